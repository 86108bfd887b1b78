"""The fully decided, immutable plan a sandbox receives, and what it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cancel import CancelToken
from ..policy import Mount


@dataclass(frozen=True)
class Limits:
    """Every limit one run meets."""

    max_runtime_ms: int
    max_fuel: int
    max_memory_bytes: int
    max_stdout_bytes: int
    max_stderr_bytes: int


@dataclass(frozen=True)
class RunPlan:
    """One decided run: which module bytes, which mounts, which limits, what goes on stdin."""

    tool: str
    module_path: str | Path
    module_bytes: bytes
    module_sha256: str
    mounts: Sequence[Mount]
    limits: Limits
    stdin: bytes
    # Run on a worker thread and give up on it at the deadline (plus a grace period)
    # even if the guest is stuck in a blocking host call, at the cost of a thread handoff.
    guard_blocking_calls: bool = False
    # Set by the caller to stop the run early (ToolCancelled).
    cancel: CancelToken | None = None


@dataclass(frozen=True)
class SandboxResult:
    """How a guest ended: its exit code (0 when `_start` returned) and its bounded output."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    fuel_used: int
    duration_ms: float
    # Linear memory never shrinks: its size at the end is the run's peak.
    peak_memory_bytes: int = 0
