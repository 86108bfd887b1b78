"""`zigclaw serve`: the active preset's tools for any MCP client, on the official `mcp` SDK.

`tools/list` lists the tools the preset allows (each with its manifest's `[args]`
as `inputSchema` and `[output]` as `outputSchema` when that is an object schema).
`tools/call` goes through `Runner.run` - the same decisions, approvals, audit and
sandbox as `zigclaw tools run` - on a thread of its own, so calls run concurrently.
A runner error comes back as a tool error (`isError`) that carries the error's
name, message and hint. A cancelled request stops its guest at the next epoch tick.

Approvals for tools in "ask" mode are asked of the client by elicitation: a
server-to-client `elicitation/create` on handshake-era connections, an
`input_required` round (SEP-2322) on 2026-07-28 ones, whose sealed request state
ties the answer to the approval that was asked. A client that does not declare
the elicitation capability gets ApprovalRequired.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import secrets
import socket
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import __version__, policy
from .approval import BLOCKED, Answer, ApprovalRequest, Approver, answer_for, parse_answer
from .audit import canonical_json
from .cancel import CancelToken
from .errors import ApprovalDenied, ApprovalRequired, InternalError, ZigclawError
from .manifest import load_manifest
from .service import Runner, RunResult

SERVER_NAME = "zigclaw"
APPROVAL_INPUT = "zigclaw_approval"
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Approve this call?",
            "enum": ["yes", "no", "session"],
            "enumNames": ["Yes, this call", "No", "Yes, for this session"],
        }
    },
    "required": ["decision"],
}


class ToolService:
    """The MCP handlers over one Runner and preset."""

    def __init__(self, runner: Runner, preset: str | None = None) -> None:
        self.runner = runner
        self.preset = preset
        # Tells the answers to this server's own approval rounds from anything else.
        self._round_key = secrets.token_bytes(32)

    # --- tools/list ------------------------------------------------------------------

    def listed_tools(self) -> list[types.Tool]:
        """The preset's tools that would pass every static decision, sorted by name."""
        runner = self.runner
        active = runner.active_preset(self.preset)
        out: list[types.Tool] = []
        for name in sorted(set(active.tools)):
            if not all(d.allowed for d in runner.static_decisions(name, active)):
                continue
            if runner.approval_mode(name) == BLOCKED:
                continue
            try:
                manifest = load_manifest(runner.folder_for(name), name)
            except ZigclawError:
                continue  # an invalid tool is not offered; calling it reports why
            if manifest.native or not policy.network_gate(active, manifest.requires_network).allowed:
                continue
            output = manifest.output if _is_object_schema(manifest.output) else None
            out.append(
                types.Tool(
                    name=name,
                    description=manifest.description,
                    input_schema=manifest.args,
                    output_schema=output,
                )
            )
        return out

    async def list_tools(
        self, _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = await anyio.to_thread.run_sync(self.listed_tools)
        return types.ListToolsResult(tools=tools)

    # --- tools/call ------------------------------------------------------------------

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, args = params.name, params.arguments if params.arguments is not None else {}
        approve: Approver | None = None
        request = await anyio.to_thread.run_sync(self._pending, name, args)
        if request is not None:
            asked = await self._ask(ctx, params, request)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            approve = asked
        cancel = CancelToken()
        try:
            result = await anyio.to_thread.run_sync(
                lambda: self.runner.run(name, args, preset=self.preset, cancel=cancel, approve=approve),
                abandon_on_cancel=True,
            )
        except anyio.get_cancelled_exc_class():
            cancel.cancel()  # the guest traps at its next epoch tick; its thread logs ToolCancelled
            raise
        except ZigclawError as exc:
            return error_result(exc)
        except Exception as exc:
            return error_result(InternalError(f"{type(exc).__name__}: {exc}"))
        return run_result(result)

    def _pending(self, name: str, args: Any) -> ApprovalRequest | None:
        try:
            return self.runner.pending_approval(name, args, preset=self.preset)
        except Exception:
            return None  # the call is refused; `run` says why and puts it on record

    async def _ask(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, request: ApprovalRequest
    ) -> Approver | types.InputRequiredResult:
        """An approver holding the client's answer, or the input_required round that asks for it."""
        capabilities = ctx.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            return _refuse(
                ApprovalRequired(
                    f"tool '{request.tool}' needs approval and this MCP client cannot be asked",
                    hint=(
                        "use a client that supports elicitation, or set "
                        f'[approval.tools] {request.tool} = "preApproved" in zigclaw.toml.'
                    ),
                )
            )
        message = f"zigclaw: approve: {request.describe()}?"
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            try:
                reply = await ctx.session.elicit_form(
                    message, APPROVAL_SCHEMA, related_request_id=ctx.request_id
                )
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                return _refuse(ApprovalDenied(f"the client did not answer the approval request: {exc}"))
            return _approver_from_reply(request, reply)
        fingerprint = self._fingerprint(request)
        if params.request_state is not None and params.input_responses:
            try:
                state = json.loads(params.request_state)
            except ValueError:
                state = None
            response = params.input_responses.get(APPROVAL_INPUT)
            if isinstance(state, dict) and state.get("approval") == fingerprint and response is not None:
                if not isinstance(response, types.ElicitResult):
                    return _refuse(ApprovalDenied("the client answered the approval with something else"))
                return _approver_from_reply(request, response)
        # Ask (again: answers without our request state, or to another approval, are not taken).
        return types.InputRequiredResult(
            input_requests={
                APPROVAL_INPUT: types.ElicitRequest(
                    params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
                )
            },
            request_state=json.dumps({"approval": fingerprint}),
        )

    def _fingerprint(self, request: ApprovalRequest) -> str:
        digest = hashlib.sha256(self._round_key + canonical_json(request.to_json()))
        return digest.hexdigest()

    def build(self) -> Server[Any]:
        server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            instructions="Sandboxed zigclaw tools: each call runs in a fresh WASI sandbox under policy.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )
        # The approval round's request state comes back from the client: sealed and bound
        # to this tool call by the SDK, so it cannot be forged or replayed on another call.
        server.middleware.append(
            RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME)
        )
        return server


def _is_object_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def _refuse(error: ZigclawError) -> Approver:
    """An approver that refuses with `error` (so that the refusal goes through run and its audit)."""

    def refuse(_request: ApprovalRequest) -> Answer:
        raise error

    return refuse


def _approver_from_reply(request: ApprovalRequest, reply: types.ElicitResult) -> Approver:
    if reply.action != "accept":
        return answer_for(request, Answer.NO)
    decision = (reply.content or {}).get("decision")
    answer = parse_answer(decision) if isinstance(decision, str) else None
    if answer is None:
        shown = json.dumps(decision, ensure_ascii=True)[:60]
        return _refuse(ApprovalDenied(f"the approval answer {shown} is not yes, no or session"))
    return answer_for(request, answer)


def run_result(result: RunResult) -> types.CallToolResult:
    """A completed run: SPEC 7's run JSON as text, `data` as structured content; ok:false is isError."""
    text = json.dumps(result.to_json(), separators=(",", ":"), ensure_ascii=True)
    structured = result.data if isinstance(result.data, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=not result.ok,
        _meta={"zigclaw/request_id": result.request_id},
    )


def error_result(error: ZigclawError) -> types.CallToolResult:
    """A runner error as a tool error: `{"ok":false,"error":Name,"message","hint"}`."""
    body = error.to_json("serve")
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=json.dumps(body, separators=(",", ":"), ensure_ascii=True))
        ],
        structured_content=body,
        is_error=True,
        _meta={"zigclaw/error": error.name, "zigclaw/hint": error.hint},
    )


# --- transports ----------------------------------------------------------------------


def parse_loopback(text: str) -> tuple[str, int]:
    """HOST:PORT on a loopback address (`[::1]:PORT` for IPv6); anything else is a usage error."""
    import typer

    host, sep, port_text = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not 0 <= port <= 65535:
        raise typer.BadParameter(f"--http wants HOST:PORT, got {text!r}")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise typer.BadParameter(
                f"--http serves on loopback only (127.0.0.1, ::1, localhost), not {host!r}"
            )
    return host, port


def serve_stdio(runner: Runner, preset: str | None) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    server = ToolService(runner, preset).build()

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def serve_http(
    runner: Runner, preset: str | None, host: str, port: int, *, ready: Callable[[str], None] | None = None
) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp until interrupted; the URL goes to stderr."""
    import uvicorn

    server = ToolService(runner, preset).build()
    app = server.streamable_http_app(host=host)  # turns on DNS-rebinding protection for loopback
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    except OSError as exc:
        sock.close()
        from .errors import ServerUnavailable

        raise ServerUnavailable(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/mcp"
    sys.stderr.write(f"zigclaw: serving MCP on {url}\n")
    sys.stderr.flush()
    if ready is not None:
        ready(url)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
