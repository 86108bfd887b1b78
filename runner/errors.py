"""Every error a user can hit, by name, and the one seam that maps lower libraries' errors to them.

Each class carries a stable `name` (zigclaw's spelling where zigclaw had one), a
one-line message given at raise time and an optional hint. Grouped by the stage
of a call that raises them.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ZigclawError(Exception):
    """Base of every error this package raises on purpose."""

    name: ClassVar[str] = "ZigclawError"
    default_hint: ClassVar[str | None] = None

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        # One line, no control characters: messages quote tool output and file contents,
        # and end up in one-line JSON and on terminals.
        self.message = printable(" ".join(str(message).split()))
        hint = hint if hint is not None else self.default_hint
        self.hint = None if hint is None else printable(hint)
        self.details = details
        super().__init__(self.message)

    def to_json(self, command: str) -> dict[str, Any]:
        """The `--json` error object of SPEC 7."""
        return {
            "ok": False,
            "command": command,
            "error": self.name,
            "message": self.message,
            "hint": self.hint,
        }


# --- configuration and manifests -------------------------------------------------


class InvalidConfig(ZigclawError):
    """zigclaw.toml is unreadable, not TOML, or has a value of the wrong type."""

    name = "InvalidConfig"
    default_hint = "run `zigclaw config validate` to see every problem with the file."


class InvalidManifest(ZigclawError):
    """A tool.toml is unreadable, too large, not TOML, or breaks the manifest rules."""

    name = "InvalidManifest"
    default_hint = "fix the manifest; `zigclaw tools list` shows each invalid tool with its reason."


class ToolNotFound(ZigclawError):
    """No manifest exists for the tool in the folder it must load from."""

    name = "ToolNotFound"
    default_hint = "run `zigclaw tools list` to see the tools that exist."


class ToolNotInRegistry(ZigclawError):
    """Strict registry mode: a built-in tool is missing from the generated registry."""

    name = "ToolNotInRegistry"


class ToolAbiMismatch(ZigclawError):
    """Strict registry mode: a built-in's args schema differs from the registry fingerprint."""

    name = "ToolAbiMismatch"


# --- policy decisions ----------------------------------------------------------------


class InvalidToolName(ZigclawError):
    """The tool name is not a plain lowercase name."""

    name = "InvalidToolName"
    default_hint = "tool names match ^[a-z][a-z0-9_]{0,63}$."


class ToolNotAllowed(ZigclawError):
    """The active preset does not list the tool."""

    name = "ToolNotAllowed"


class ExternalToolDenied(ZigclawError):
    """The external-tool filter denies a tool that is not built in."""

    name = "ExternalToolDenied"
    default_hint = (
        "external tool denied by tools.filter; set tools.filter.allow_external=true "
        "or add the tool to external_allow_list."
    )


class ToolNetworkNotAllowed(ZigclawError):
    """The tool needs the network and the active preset denies it."""

    name = "ToolNetworkNotAllowed"
    default_hint = "tool requires network but active preset denies network; choose a different preset."


class ToolIntegrityMismatch(ZigclawError):
    """The module's SHA-256 differs from the manifest's `sha256` pin."""

    name = "ToolIntegrityMismatch"
    default_hint = "the module changed since it was pinned; reinstall the tool or update its sha256."


class InvalidToolArgs(ZigclawError):
    """The arguments are not JSON, not an object, or do not match the tool's schema."""

    name = "InvalidToolArgs"


# --- approvals and the audit trail ---------------------------------------------------


class ToolBlocked(ZigclawError):
    """The approval policy blocks the tool (`[approval]` says "blocked")."""

    name = "ToolBlocked"


class ApprovalRequired(ZigclawError):
    """The tool needs an approval and nobody could be asked."""

    name = "ApprovalRequired"


class ApprovalDenied(ZigclawError):
    """The approver said no, or gave no valid answer."""

    name = "ApprovalDenied"


class ServerUnavailable(ZigclawError):
    """`zigclaw serve` cannot listen where it was asked to."""

    name = "ServerUnavailable"


class AuditUnavailable(ZigclawError):
    """The audit trail cannot be written; nothing runs without it."""

    name = "AuditUnavailable"
    default_hint = (
        "fix [audit] path in zigclaw.toml (or the folder's permissions), or set [audit] enabled = false."
    )


# --- the sandbox -------------------------------------------------------------------


class InvalidModule(ZigclawError):
    """The module is not a core WASI module this runner accepts."""

    name = "InvalidModule"


class SandboxUnavailable(ZigclawError):
    """The sandbox cannot be set up as the plan requires."""

    name = "SandboxUnavailable"


class ToolTimeout(ZigclawError):
    """The tool ran past its wall-clock limit."""

    name = "ToolTimeout"
    default_hint = "raise max_runtime_ms in the tool's manifest if the tool needs longer."


class ToolOutOfFuel(ZigclawError):
    """The tool used up its instruction budget."""

    name = "ToolOutOfFuel"
    default_hint = "raise max_fuel in the tool's manifest if the tool needs more."


class ToolMemoryLimit(ZigclawError):
    """The tool needed more linear memory than its cap."""

    name = "ToolMemoryLimit"
    default_hint = "raise max_memory_bytes in the tool's manifest if the tool needs more."


class ToolTrap(ZigclawError):
    """The guest trapped (unreachable, stack overflow, out-of-bounds access, ...)."""

    name = "ToolTrap"


class ToolCancelled(ZigclawError):
    """The caller cancelled the call; a running guest was stopped."""

    name = "ToolCancelled"


class StreamTooLong(ZigclawError):
    """The tool wrote more than its stdout or stderr cap."""

    name = "StreamTooLong"
    default_hint = "raise max_stdout_bytes / max_stderr_bytes in the manifest if the output is legitimate."


# --- the protocol ------------------------------------------------------------------


class MalformedResponse(ZigclawError):
    """The tool's stdout is not a valid protocol v0 response to this request."""

    name = "MalformedResponse"


class ToolFailed(ZigclawError):
    """The tool exited non-zero without a valid response."""

    name = "ToolFailed"


# --- tool authoring and installation ------------------------------------------------


class ExampleFailed(ZigclawError):
    """A manifest `[[examples]]` entry did not give the `data` (or `ok`) it expects."""

    name = "ExampleFailed"
    default_hint = "fix the tool or the example; `zigclaw tools validate` shows each example's result."


class InvalidArchive(ZigclawError):
    """A tool archive is truncated, not a gzip tar, or holds paths, links or files it must not."""

    name = "InvalidArchive"
    default_hint = "pack the tool folder with `tar czf tool.tar.gz -C parent folder`: regular files only."


class ToolExists(ZigclawError):
    """`tools add` would replace an installed tool, and --force was not given."""

    name = "ToolExists"
    default_hint = "pass --force to replace the installed tool."


class InternalError(ZigclawError):
    """A bug in zigclaw itself; reported without a traceback."""

    name = "InternalError"
    default_hint = "please report this; set ZIGCLAW_DEBUG=1 to see the traceback."


ALL_ERRORS: tuple[type[ZigclawError], ...] = (
    InvalidConfig,
    InvalidManifest,
    ToolNotFound,
    ToolNotInRegistry,
    ToolAbiMismatch,
    InvalidToolName,
    ToolNotAllowed,
    ExternalToolDenied,
    ToolNetworkNotAllowed,
    ToolIntegrityMismatch,
    InvalidToolArgs,
    ToolBlocked,
    ApprovalRequired,
    ApprovalDenied,
    AuditUnavailable,
    ServerUnavailable,
    InvalidModule,
    SandboxUnavailable,
    ToolTimeout,
    ToolOutOfFuel,
    ToolMemoryLimit,
    ToolTrap,
    ToolCancelled,
    StreamTooLong,
    MalformedResponse,
    ToolFailed,
    ExampleFailed,
    InvalidArchive,
    ToolExists,
    InternalError,
)


def describe_validation_error(exc: Any) -> str:
    """One line for a pydantic ValidationError: the key path of the first problem, and the problem."""
    problems = exc.errors(include_url=False)
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "(file)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "required key is missing"
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{where}: {message}{suffix}"


def wasm_failure_summary(failure: BaseException) -> str:
    """The one line of a wasmtime error that says what went wrong.

    wasmtime puts a backtrace first and the cause under "Caused by:"; the cause is the line a user needs.
    """
    text = str(failure)
    lines = [line.strip() for line in text.splitlines()]
    if "Caused by:" in lines:
        cause = [line for line in lines[lines.index("Caused by:") + 1 :] if line]
        if cause:
            return first_line(cause[0])
    return first_line(text)


def map_wasm_failure(
    failure: BaseException, *, instantiating: bool, near_memory_cap: bool, cap: int, stderr: bytes
) -> ZigclawError:
    """The named error for a guest that wasmtime stopped (not by exit, deadline or output cap).

    `failure` is a wasmtime `Trap` or `WasmtimeError`; traps carry a `trap_code` enum.
    """
    code = getattr(getattr(failure, "trap_code", None), "name", None)
    summary = wasm_failure_summary(failure)
    if code == "OUT_OF_FUEL":
        return ToolOutOfFuel("tool used up its fuel")
    if code == "INTERRUPT":
        return ToolTimeout("tool was interrupted at its deadline")
    if near_memory_cap:
        return ToolMemoryLimit(f"tool failed with its memory at the {cap}-byte cap: {summary}")
    if code is None and ("limit" in summary or "too high" in summary):
        return ToolMemoryLimit(f"tool needs more than its limits allow: {summary}")
    if code is not None:
        return ToolTrap(f"tool trapped ({code.lower()}): {summary}")
    if instantiating:
        return InvalidModule(f"module cannot be instantiated: {summary}")
    if "thrown Wasm exception" in summary:
        return ToolTrap("tool ended on a WebAssembly exception that it did not catch")
    # No trap code: a host function refused the guest's call (bad arguments, say).
    excerpt = stderr[-512:].decode("utf-8", "replace").strip()
    return ToolTrap(f"tool trapped in a host call: {summary}" + (f"; stderr: {excerpt}" if excerpt else ""))


def printable(text: str) -> str:
    """`text` with every non-printable character (controls, format marks, surrogates) escaped.

    Anything a tool or a tool folder supplies can hold terminal escape sequences or
    bidirectional overrides.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def with_cause(text: str, limit: int = 300) -> str:
    """A lower library's message and its innermost cause on one line, bounded for display.

    wasmtime reports "failed to parse WebAssembly module" and puts the reason under
    "Caused by:"; the reason is what a tool author needs.
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    head, cause = lines[0], lines[-1]
    if len(lines) > 1 and cause != head and not cause.endswith(":"):
        return f"{head}: {cause}"[:limit]
    return head[:limit]


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of a lower library's message, bounded for display."""
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line[:limit]
    return ""
