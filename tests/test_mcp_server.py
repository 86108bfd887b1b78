"""`zigclaw serve` driven by the official MCP SDK client: over a real stdio subprocess and over HTTP."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
ECHO_WASM = REPO / "runner" / "_builtin" / "echo.wasm"
TEXT_ARGS = 'type = "object"\nrequired = ["text"]\n[args.properties.text]\ntype = "string"\nmaxLength = 64'
OUTPUT = '\n[output]\ntype = "object"\nrequired = ["echo"]\n[output.properties.echo]\ntype = "string"'


@pytest.fixture
def served(toolbox, guest):
    """A toolbox whose preset lists built-ins, external tools of each kind, and a tool it lacks."""
    (toolbox.workspace / "notes.txt").write_text("notes from the host")
    echo = ECHO_WASM.read_bytes()
    toolbox.add_tool("shaped", echo, args=TEXT_ARGS + OUTPUT)
    toolbox.add_tool("asking", echo, args=TEXT_ARGS, approval_key=["text"])
    toolbox.add_tool("spin", guest("loop_forever"), max_runtime_ms=60_000)
    toolbox.add_tool("slow", guest("loop_forever"), max_runtime_ms=400)
    toolbox.write_config(
        ["echo", "fs_read", "shaped", "asking", "spin", "slow", "ghost"],
        approval=None,
        extra='\n[approval.tools]\nshaped = "preApproved"\nspin = "preApproved"\nslow = "preApproved"\n',
    )
    return toolbox


def _stdio(toolbox) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner", "serve", "--config", str(toolbox.config_path)],
        cwd=str(toolbox.root),
        env={"PYTHONPATH": str(REPO), "ZIGCLAW_CACHE_DIR": os.environ["ZIGCLAW_CACHE_DIR"]},
    )


def _with_client(server: Any, body: Callable[[Client], Awaitable[None]], **options: Any) -> None:
    async def main() -> None:
        async with Client(server, **options) as client:
            await body(client)

    anyio.run(main)


def _error(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error
    body = json.loads(result.content[0].text)
    assert result.meta is not None and result.meta["zigclaw/error"] == body["error"]
    return body


def _audit(toolbox) -> list[dict[str, Any]]:
    path = toolbox.root / ".zigclaw" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- over stdio --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_client_lists_the_presets_tools_with_their_schemas_and_calls_echo_and_fs_read(served, mode):
    async def body(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        # ghost has no manifest; every other tool of the preset is offered
        assert sorted(listed) == ["asking", "echo", "fs_read", "shaped", "slow", "spin"]
        assert listed["echo"].input_schema["properties"]["text"]["maxLength"] == 1024
        assert listed["echo"].input_schema["required"] == ["text"]
        assert listed["fs_read"].input_schema["properties"]["max_bytes"]["maximum"] == 1048576
        assert listed["echo"].output_schema is None
        assert listed["shaped"].output_schema["required"] == ["echo"]
        assert listed["echo"].description

        echoed = await client.call_tool("echo", {"text": "hi"})
        assert not echoed.is_error
        assert echoed.structured_content == {"echo": "hi"}
        run = json.loads(echoed.content[0].text)
        assert run["ok"] is True and run["stdout"] == "echo ok" and len(run["request_id"]) == 32

        read = await client.call_tool("fs_read", {"path": "notes.txt"})
        assert not read.is_error, read.content
        content = base64.b64decode(read.structured_content["content_base64"])
        assert content == b"notes from the host"

        shaped = await client.call_tool("shaped", {"text": "s"})  # the client checks outputSchema
        assert shaped.structured_content == {"echo": "s"}

    _with_client(_stdio(served), body, mode=mode)
    succeeded = [e for e in _audit(served) if e["event"] == "ToolInvocationSucceeded"]
    assert [e["tool"] for e in succeeded] == ["echo", "fs_read", "shaped"]


def test_runner_errors_are_tool_errors_with_name_and_hint(served):
    async def body(client: Client) -> None:
        outside = _error(await client.call_tool("fs_write", {"path": "/write/x", "content": "x"}))
        assert outside["error"] == "ToolNotAllowed" and "policy explain" in outside["hint"]
        missing = _error(await client.call_tool("ghost", {}))
        assert missing["error"] == "ToolNotFound" and missing["hint"]
        bad_name = _error(await client.call_tool("../echo", {}))
        assert bad_name["error"] == "InvalidToolName"
        wrong_type = _error(await client.call_tool("echo", {"text": 5}))
        assert wrong_type["error"] == "InvalidToolArgs" and "$.text" in wrong_type["message"]
        too_long = _error(await client.call_tool("echo", {"text": "x" * 2000}))
        assert too_long["error"] == "InvalidToolArgs"
        extra = _error(await client.call_tool("echo", {"text": "a", "rm": "-rf"}))
        assert extra["error"] == "InvalidToolArgs"
        timeout = _error(await client.call_tool("slow", {}))
        assert timeout["error"] == "ToolTimeout" and timeout["hint"]
        # the server keeps serving after every refusal
        assert (await client.call_tool("echo", {"text": "still here"})).structured_content == {
            "echo": "still here"
        }

    _with_client(_stdio(served), body)
    failed = [(e["tool"], e["error"]) for e in _audit(served) if e["event"] == "ToolInvocationFailed"]
    assert ("fs_write", "ToolNotAllowed") in failed and ("echo", "InvalidToolArgs") in failed


def test_a_tool_whose_manifest_became_invalid_after_start_is_refused_and_unlisted(served):
    async def body(client: Client) -> None:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "shaped" in names
        assert not (await client.call_tool("shaped", {"text": "a"})).is_error
        manifest = served.external / "shaped.toml"
        manifest.write_text(manifest.read_text().replace('version = "1.0.0"', 'version = "one"'))
        broken = _error(await client.call_tool("shaped", {"text": "a"}))
        assert broken["error"] == "InvalidManifest" and "version" in broken["message"]
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "shaped" not in names and "echo" in names
        assert not (await client.call_tool("echo", {"text": "a"})).is_error

    _with_client(_stdio(served), body)


def test_calls_run_concurrently_each_in_its_own_sandbox(served):
    async def body(client: Client) -> None:
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("slow", {}))

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(call)
        assert [_error(r)["error"] for r in results] == ["ToolTimeout"] * 3

    _with_client(_stdio(served), body)
    events = [
        (e["event"], e["request_id"]) for e in _audit(served) if e["event"].startswith("ToolInvocation")
    ]
    first_end = next(i for i, (event, _) in enumerate(events) if event == "ToolInvocationFailed")
    started_before = {rid for event, rid in events[:first_end] if event == "ToolInvocationStarted"}
    assert len(started_before) == 3  # all three guests were running before any of them ended


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_mcp_cancellation_stops_the_running_guest(served, mode):
    async def body(client: Client) -> None:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("spin", {})

            group.start_soon(call)
            with anyio.fail_after(60):
                while not any(e["event"] == "ToolInvocationStarted" for e in _audit(served)):
                    await anyio.sleep(0.01)
            await anyio.sleep(0.1)
            group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        with anyio.fail_after(30):
            while not any(e["event"] == "ToolInvocationFailed" for e in _audit(served)):
                await anyio.sleep(0.01)
        # the server is still there and serves the next call
        assert (await client.call_tool("echo", {"text": "after"})).structured_content == {"echo": "after"}

    _with_client(_stdio(served), body, mode=mode)
    ended = next(e for e in _audit(served) if e["event"] == "ToolInvocationFailed")
    assert ended["tool"] == "spin" and ended["error"] == "ToolCancelled"
    # its deadline was 60 s; it stopped right after the cancellation (about 100 ms in)
    assert ended["duration_ms"] < 10_000
    print(f"{mode}: spin stopped after {ended['duration_ms']} ms")


# --- approvals over MCP ------------------------------------------------------------------


class Elicitor:
    """An elicitation callback with scripted answers that records each question."""

    def __init__(self, *replies: types.ElicitResult) -> None:
        self.replies = list(replies)
        self.messages: list[str] = []

    async def __call__(self, _context: Any, params: Any) -> types.ElicitResult:
        self.messages.append(params.message)
        return self.replies.pop(0)


def _accept(decision: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"decision": decision})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_approval_is_asked_by_elicitation_and_remembered_per_key_for_the_session(served, mode):
    elicitor = Elicitor(_accept("session"), _accept("yes"), _accept("yes"))

    async def body(client: Client) -> None:
        first = await client.call_tool("asking", {"text": "a"})
        assert first.structured_content == {"echo": "a"}
        again = await client.call_tool("asking", {"text": "a"})  # remembered: not asked
        assert again.structured_content == {"echo": "a"}
        other = await client.call_tool("asking", {"text": "b"})  # another key value: asked
        assert other.structured_content == {"echo": "b"}
        once = await client.call_tool("asking", {"text": "b"})  # "yes" was for one call only
        assert once.structured_content == {"echo": "b"}

    _with_client(_stdio(served), body, mode=mode, elicitation_callback=elicitor)
    assert len(elicitor.messages) == 3
    assert "run tool 'asking' with text=\"a\"" in elicitor.messages[0]
    assert 'text="b"' in elicitor.messages[1]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_declined_and_garbage_approvals_are_refused(served, mode):
    elicitor = Elicitor(
        _accept("maybe"),
        _accept(["yes"]),
        types.ElicitResult(action="accept", content={}),
        types.ElicitResult(action="decline"),
        _accept("no"),
    )

    async def body(client: Client) -> None:
        for expected in ("not yes, no or session", "not yes, no or session", "not yes, no or session"):
            refused = _error(await client.call_tool("asking", {"text": "a"}))
            assert refused["error"] == "ApprovalDenied" and expected in refused["message"]
        for _ in range(2):
            refused = _error(await client.call_tool("asking", {"text": "a"}))
            assert refused["error"] == "ApprovalDenied" and "declined" in refused["message"]

    _with_client(_stdio(served), body, mode=mode, elicitation_callback=elicitor)
    assert elicitor.replies == []
    assert not any(e["event"] == "ToolInvocationStarted" for e in _audit(served))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_client_without_elicitation_gets_approval_required(served, mode):
    async def body(client: Client) -> None:
        refused = _error(await client.call_tool("asking", {"text": "a"}))
        assert refused["error"] == "ApprovalRequired" and "preApproved" in refused["hint"]
        assert not (await client.call_tool("echo", {"text": "built-ins need no approval"})).is_error

    _with_client(_stdio(served), body, mode=mode)


def test_an_unsolicited_answer_without_the_servers_request_state_is_not_taken(served):
    async def body(client: Client) -> None:
        forged = {"zigclaw_approval": _accept("session")}
        result = await client.session.call_tool(
            "asking", {"text": "a"}, input_responses=forged, allow_input_required=True
        )
        assert isinstance(result, types.InputRequiredResult)  # asked properly instead
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError, match="requestState"):  # state this server did not seal
            await client.session.call_tool(
                "asking",
                {"text": "a"},
                input_responses=forged,
                request_state="forged",
                allow_input_required=True,
            )
        # a real round for another call does not approve this one
        other = await client.session.call_tool("asking", {"text": "b"}, allow_input_required=True)
        assert isinstance(other, types.InputRequiredResult)
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool(
                "asking",
                {"text": "a"},
                input_responses=forged,
                request_state=other.request_state,
                allow_input_required=True,
            )

    elicitor = Elicitor()
    _with_client(_stdio(served), body, elicitation_callback=elicitor)
    assert not any(e["event"] == "ToolInvocationStarted" for e in _audit(served))


def test_blocked_tools_are_not_listed_and_refused(served):
    text = served.config_path.read_text().replace('shaped = "preApproved"', 'shaped = "blocked"')
    served.config_path.write_text(text)

    async def body(client: Client) -> None:
        assert "shaped" not in [tool.name for tool in (await client.list_tools()).tools]
        assert _error(await client.call_tool("shaped", {"text": "a"}))["error"] == "ToolBlocked"

    _with_client(_stdio(served), body)


# --- over HTTP -----------------------------------------------------------------------------


def _serve_http(toolbox, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--config",
            str(toolbox.config_path),
            *extra,
        ],
        cwd=toolbox.root,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert line.startswith("zigclaw: serving MCP on http://127.0.0.1:"), line
    return proc, line.split(" on ", 1)[1].strip()


def test_client_lists_and_calls_echo_and_fs_read_over_http(served):
    proc, url = _serve_http(served)
    try:

        async def body(client: Client) -> None:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert "echo" in names and "fs_read" in names
            assert (await client.call_tool("echo", {"text": "over http"})).structured_content == {
                "echo": "over http"
            }
            read = await client.call_tool("fs_read", {"path": "notes.txt"})
            assert base64.b64decode(read.structured_content["content_base64"]) == b"notes from the host"
            assert _error(await client.call_tool("fs_write", {"path": "/x", "content": "y"}))["error"] == (
                "ToolNotAllowed"
            )
            elicitor_less = _error(await client.call_tool("asking", {"text": "a"}))
            assert elicitor_less["error"] == "ApprovalRequired"

        _with_client(url, body)
    finally:
        proc.terminate()
        proc.wait(30)


def test_http_cancellation_and_approval_by_elicitation(served):
    proc, url = _serve_http(served)
    elicitor = Elicitor(_accept("yes"))
    try:

        async def body(client: Client) -> None:
            assert (await client.call_tool("asking", {"text": "h"})).structured_content == {"echo": "h"}
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await client.call_tool("spin", {})

                group.start_soon(call)
                with anyio.fail_after(60):
                    while not any(
                        e["event"] == "ToolInvocationStarted" and e["tool"] == "spin" for e in _audit(served)
                    ):
                        await anyio.sleep(0.01)
                await anyio.sleep(0.1)
                group.cancel_scope.cancel()
            with anyio.fail_after(30):
                while not any(e["event"] == "ToolInvocationFailed" for e in _audit(served)):
                    await anyio.sleep(0.01)

        _with_client(url, body, elicitation_callback=elicitor)
    finally:
        proc.terminate()
        proc.wait(30)
    ended = next(e for e in _audit(served) if e["event"] == "ToolInvocationFailed")
    assert ended["tool"] == "spin" and ended["error"] == "ToolCancelled" and ended["duration_ms"] < 10_000
    assert len(elicitor.messages) == 1


@pytest.mark.parametrize(
    "address", ["0.0.0.0:8080", "192.168.1.5:80", "example.com:80", "127.0.0.1", "127.0.0.1:99999"]
)
def test_http_serves_on_loopback_only(tmp_path, address):
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--http", address],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "--http" in proc.stderr


def test_serve_with_an_unwritable_audit_path_fails_at_start(served):
    blocker = served.root / "blocker"
    blocker.write_text("x")
    served.config_path.write_text(served.config_path.read_text() + f'\n[audit]\npath = "{blocker}/a.jsonl"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--config", str(served.config_path)],
        cwd=served.root,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.PIPE,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines()[0] == "error: AuditUnavailable"


def test_serve_preset_option_selects_the_tools_offered(served):
    text = served.config_path.read_text() + '\n[capabilities.presets.small]\ntools = ["echo"]\n'
    served.config_path.write_text(text)
    params = _stdio(served)
    params.args += ["--preset", "small"]

    async def body(client: Client) -> None:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
        assert _error(await client.call_tool("fs_read", {"path": "notes.txt"}))["error"] == "ToolNotAllowed"

    _with_client(params, body)


def test_http_refuses_a_foreign_host_header(served):
    import http.client

    proc, url = _serve_http(served)
    try:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        headers = {"Host": "evil.example", "Content-Type": "application/json", "Accept": "application/json"}
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", "/mcp", body=body, headers=headers)
        response = connection.getresponse()
        assert response.status in (400, 403, 421), response.status
        assert b"echo" not in response.read()
    finally:
        proc.terminate()
        proc.wait(30)
