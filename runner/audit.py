"""The audit trail: one JSON line per decision and per run, appended to `.zigclaw/audit.jsonl`.

Appends are whole lines or nothing. Each batch of lines goes out in one `write()`
on a descriptor opened with O_APPEND, under a thread lock and an exclusive
`flock`, so threads and processes never interleave. A process killed in the
middle of a write could still leave a fragment behind (a short write on a full
disk, a power cut): every writer checks, under the lock, that the file ends with
a newline and cuts a trailing fragment off before it appends, and a short write
is undone at once. Readers skip any line that does not parse.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import AuditUnavailable

DEFAULT_AUDIT_PATH = ".zigclaw/audit.jsonl"
# Keys whose values never reach the log, even with include_args (matched anywhere in the key).
SECRET_KEY = re.compile(r"password|passwd|secret|token|key", re.IGNORECASE)
REDACTED = "[redacted]"
# How far back a writer looks for the last newline when it repairs a trailing fragment.
_REPAIR_WINDOW = 1 << 20
# A logged message or reason is cut to this many characters.
MAX_TEXT = 1000

EVENT_DECISION = "ToolDecision"
EVENT_STARTED = "ToolInvocationStarted"
EVENT_SUCCEEDED = "ToolInvocationSucceeded"
EVENT_FAILED = "ToolInvocationFailed"


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def canonical_json(value: Any) -> bytes:
    """The one byte form of a JSON value that its digest is taken over."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8", "surrogatepass")


def args_sha256(args: Any) -> str:
    """SHA-256 of the argument object's canonical JSON (of the raw text when it is not JSON)."""
    try:
        data = args.encode("utf-8", "surrogatepass") if isinstance(args, str) else canonical_json(args)
    except (TypeError, ValueError, RecursionError):
        # Not JSON at all (the call is refused as InvalidToolArgs): mark it, never repr() it.
        data = b"unencodable:" + type(args).__name__.encode()
    return hashlib.sha256(data).hexdigest()


def redact(value: Any, _depth: int = 0) -> Any:
    """`value` with the value of every key named like password/secret/token/key replaced, at any depth."""
    if _depth > 64:
        return REDACTED
    if isinstance(value, Mapping):
        return {
            str(k): (REDACTED if SECRET_KEY.search(str(k)) else redact(v, _depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(item, _depth + 1) for item in value]
    return value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)


@functools.lru_cache(maxsize=4096)
def _decision_fragment(
    tool: str, preset: str, policy_hash: str, category: str, allowed: bool, reason: str
) -> bytes:
    """The part of a decision line after request_id, with its closing brace and newline:
    the same for every call of a tool under a preset, so it is encoded once."""
    rest = {
        "tool": tool,
        "preset": preset,
        "policy_hash": policy_hash,
        "category": category,
        "allowed": allowed,
        "reason": _cut(reason),
    }
    return _encode(rest)[1:]


def _encode(line: Mapping[str, Any]) -> bytes:
    return json.dumps(line, separators=(",", ":"), ensure_ascii=True, default=str).encode("ascii") + b"\n"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


@dataclass
class CallRecord:
    """What one call has learned so far, for its audit lines; filled in as the call proceeds."""

    request_id: str
    tool: str
    preset: str
    policy_hash: str
    args: Any = None
    origin: str | None = None
    module_sha256: str | None = None
    limits: dict[str, int] | None = None
    decisions: list[Any] = field(default_factory=list)  # policy.Decision values
    decisions_logged: int = 0
    started: bool = False

    def _base(self, event: str) -> dict[str, Any]:
        return {
            "time": now_iso(),
            "event": event,
            "request_id": self.request_id,
            "tool": self.tool,
            "preset": self.preset,
            "policy_hash": self.policy_hash,
        }

    def pending_decisions(self) -> list[dict[str, Any] | bytes]:
        """Lines for the decisions not yet logged, already encoded (a call logs several)."""
        when = _json(now_iso())
        head = f'{{"time":{when},"event":"{EVENT_DECISION}","request_id":{_json(self.request_id)},'
        prefix = head.encode("ascii")
        out: list[dict[str, Any] | bytes] = []
        for decision in self.decisions[self.decisions_logged :]:
            fragment = _decision_fragment(
                self.tool, self.preset, self.policy_hash, decision.category, decision.allowed, decision.reason
            )
            out.append(prefix + fragment)
        self.decisions_logged = len(self.decisions)
        return out

    @functools.cached_property
    def _args_sha256(self) -> str:
        return args_sha256(self.args)

    def started_line(self, include_args: bool) -> dict[str, Any]:
        line = self._base(EVENT_STARTED)
        line.update(
            origin=self.origin,
            module_sha256=self.module_sha256,
            args_sha256=self._args_sha256,
            limits=self.limits,
        )
        if include_args:
            try:
                shown = redact(self.args)
                canonical_json(shown)
            except (TypeError, ValueError, RecursionError):
                shown = "[unencodable]"
            line["args"] = shown
        self.started = True
        return line

    def end_line(
        self,
        *,
        duration_ms: float,
        error: Any = None,
        tool_ok: bool | None = None,
        fuel_used: int | None = None,
        peak_memory_bytes: int | None = None,
        output_bytes: int | None = None,
    ) -> dict[str, Any]:
        line = self._base(EVENT_FAILED if error is not None else EVENT_SUCCEEDED)
        line.update(
            origin=self.origin,
            module_sha256=self.module_sha256,
            args_sha256=self._args_sha256,
            limits=self.limits,
            duration_ms=round(duration_ms, 3),
            fuel_used=fuel_used,
            peak_memory_bytes=peak_memory_bytes,
            output_bytes=output_bytes,
            outcome="failed" if error is not None else "succeeded",
            error=None if error is None else error.name,
        )
        if error is not None:
            line["message"] = _cut(error.message)
        else:
            line["tool_ok"] = tool_ok
        return line


class AuditLog:
    """An append-only JSON-lines file, safe to share between threads and processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._clean_size = -1  # the file size our last append left (a whole line at its end)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
            self._fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise AuditUnavailable(f"cannot open the audit log {path}: {_reason(exc)}") from None
        except ValueError as exc:  # a NUL in the path
            raise AuditUnavailable(f"cannot open the audit log {path}: {exc}") from None
        try:
            info = os.fstat(self._fd)
            if not _is_regular(info.st_mode):
                raise AuditUnavailable(f"the audit log {path} is not a regular file")
            self.append([])  # repairs a fragment left by a crash, and proves the file is writable
        except BaseException:
            os.close(self._fd)
            raise

    def append(self, lines: Iterable[Mapping[str, Any] | bytes]) -> None:
        """Append `lines` (objects, or lines already encoded with their newline) in one write;
        AuditUnavailable when they cannot all be written."""
        data = b"".join(line if isinstance(line, bytes) else _encode(line) for line in lines)
        with self._lock:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except OSError as exc:
                raise AuditUnavailable(f"cannot lock the audit log {self.path}: {_reason(exc)}") from None
            try:
                size = self._repair()
                if data:
                    self._write(data, size)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _repair(self) -> int:
        """Cut a trailing partial line (left by a crash) off; the file's size after."""
        try:
            size = os.fstat(self._fd).st_size
            if size == self._clean_size:
                return size  # as our last append left it: ends with a whole line
            if size == 0 or os.pread(self._fd, 1, size - 1) == b"\n":
                return size
            start = max(0, size - _REPAIR_WINDOW)
            tail = os.pread(self._fd, size - start, start)
            cut = tail.rfind(b"\n")
            keep = start + cut + 1 if cut >= 0 else (0 if start == 0 else size)
            if keep == size:  # a fragment longer than the window: close it off instead
                os.write(self._fd, b"\n")
                return size + 1
            os.ftruncate(self._fd, keep)
            return keep
        except OSError as exc:
            raise AuditUnavailable(f"cannot check the audit log {self.path}: {_reason(exc)}") from None

    def _write(self, data: bytes, size: int) -> None:
        try:
            written = os.write(self._fd, data)
        except OSError as exc:
            written, failure = -1, _reason(exc)
        else:
            failure = f"only {written} of {len(data)} bytes were written"
        if written == len(data):
            self._clean_size = size + written
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, size)  # never leave part of a line behind
        raise AuditUnavailable(f"cannot append to the audit log {self.path}: {failure}")

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symlink"
    return exc.strerror or str(exc)


# --- reading -------------------------------------------------------------------------


def read_entries(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete entry of the log, oldest first; fragments and foreign lines are skipped."""
    try:
        # Non-blocking: a FIFO put where the log should be must not hang the reader.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise AuditUnavailable(f"cannot read the audit log {path}: {_reason(exc)}") from None
    if not _is_regular(os.fstat(fd).st_mode):
        os.close(fd)
        raise AuditUnavailable(f"the audit log {path} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                return  # a trailing fragment: a write that never finished
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("event"), str):
                yield entry


def tail(path: Path, count: int, *, tool: str | None = None, failed: bool = False) -> list[dict[str, Any]]:
    """The last `count` entries that match the filters."""
    kept: deque[dict[str, Any]] = deque(maxlen=count)
    for entry in read_entries(path):
        if tool is not None and entry.get("tool") != tool:
            continue
        if failed and entry.get("event") != EVENT_FAILED:
            continue
        kept.append(entry)
    return list(kept)
