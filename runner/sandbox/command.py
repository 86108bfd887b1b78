"""Running any WASI command module (not only protocol v0 tools) in the same sandbox.

Same engine, module checks, cache, limits and stop machinery as a tool run; what
differs is the guest's world: argv and chosen environment variables, the host's
stdin, output streamed to host descriptors as it comes, and the mounts the
caller decided.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from ..errors import SandboxUnavailable, ZigclawError
from ..policy import Mount
from .forward import ForwardedStream
from .interrupts import RunState
from .plan import Limits
from .wasi import CompiledModule, WasiRuntime, raise_if_stopped, runtime


@dataclass(frozen=True)
class CommandPlan:
    """One decided command run: module bytes, argv, environment, mounts, limits, where output goes."""

    module_path: Path
    module_bytes: bytes
    module_sha256: str
    argv: Sequence[str]
    env: Sequence[tuple[str, str]]
    mounts: Sequence[Mount]
    limits: Limits
    stdout_fd: int
    stderr_fd: int
    inherit_stdin: bool = True
    guard_blocking_calls: bool = True


@dataclass(frozen=True)
class CommandResult:
    """How the command ended: the guest's exit code (0 when `_start` returned) and what it wrote."""

    exit_code: int
    stdout_bytes: int
    stderr_bytes: int
    fuel_used: int
    duration_ms: float


def run_command(plan: CommandPlan) -> CommandResult:
    """Run `plan`; raise the named error when the sandbox stopped the guest or it trapped."""
    rt = runtime()
    limits = plan.limits
    compiled = rt.compile_within(plan.module_bytes, str(plan.module_path), plan.module_sha256, limits)
    return rt.guarded(lambda: _run(rt, plan, compiled), limits, plan.guard_blocking_calls)


def _run(rt: WasiRuntime, plan: CommandPlan, compiled: CompiledModule) -> CommandResult:
    limits = plan.limits
    started = time.monotonic()
    state = RunState(started + limits.max_runtime_ms / 1000)
    streams: list[ForwardedStream] = []
    store = rt.new_store(limits)
    try:
        try:
            streams.append(
                ForwardedStream("stdout", plan.stdout_fd, limits.max_stdout_bytes, state.request_stop)
            )
            streams.append(
                ForwardedStream("stderr", plan.stderr_fd, limits.max_stderr_bytes, state.request_stop)
            )
        except (OSError, RuntimeError) as exc:  # out of descriptors or threads
            raise SandboxUnavailable(f"cannot set up the output streams: {exc}") from None
        store.set_wasi(_wasi_config(rt, plan, streams))
        state.monotonic_base_ns = time.monotonic_ns()
        for stream in streams:
            stream.close_write_end()
        outcome = rt._execute(store, compiled, state)
        fuel_used = limits.max_fuel - store.get_fuel()
    finally:
        store.close()  # closes the guest's ends: the forwarders see the end of each stream
        for stream in streams:
            stream.finish(timeout=None)
    try:
        raise_if_stopped(
            state,
            outcome,
            limits,
            overflowed=[(s.name, s.cap) for s in streams if s.overflowed],
            stderr=b"",
        )
    except ZigclawError as exc:
        exc.details["output_mid_line"] = any(stream.mid_line for stream in streams)
        raise
    return CommandResult(
        exit_code=outcome.exit_code,
        stdout_bytes=streams[0].forwarded,
        stderr_bytes=streams[1].forwarded,
        fuel_used=fuel_used,
        duration_ms=(time.monotonic() - started) * 1000,
    )


def _wasi_config(rt: WasiRuntime, plan: CommandPlan, streams: list[ForwardedStream]) -> wasmtime.WasiConfig:
    wasi = wasmtime.WasiConfig()
    wasi.argv = list(plan.argv)
    wasi.env = [[name, value] for name, value in plan.env]
    if plan.inherit_stdin:
        wasi.inherit_stdin()
    wasi.stdout_file = f"/proc/self/fd/{streams[0].write_fd}"
    wasi.stderr_file = f"/proc/self/fd/{streams[1].write_fd}"
    for mount in plan.mounts:
        rt._preopen(wasi, mount)
    return wasi
