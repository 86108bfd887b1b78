"""In-process WASI sandbox on wasmtime: one Engine, cached modules, a fresh Store per run.

Limits: fuel, linear memory and table caps on the Store; the wall clock through
epoch interruption with one shared ticker thread and a per-tick callback that
also stops a guest whose output went over its cap; a shadowed `poll_oneoff` so
a sleeping guest never outlives its deadline. Host functions never raise into
wasmtime-py (its exception slot is process-wide): they record why the guest must
stop and the next epoch check stops it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import wasmtime
from wasmtime import _ffi as ffi

from ..errors import (
    InvalidModule,
    SandboxUnavailable,
    StreamTooLong,
    ToolCancelled,
    ToolMemoryLimit,
    ToolTimeout,
    first_line,
    map_wasm_failure,
    with_cause,
)
from ..policy import Mount
from .cache import ModuleCache, default_cache_dir, engine_key
from .heartbeat import Heartbeat
from .interrupts import NO_FINALIZER, ON_EPOCH, STOP_CANCELLED, STOP_TIMEOUT, RunState, bind, poll_oneoff
from .pipes import BoundedSink, capture, pump_active
from .plan import Limits, RunPlan, SandboxResult
from .progress import compiling
from .stack import has_room_for_wasm
from .workers import WorkerPool, WorkersExhausted, WorkerTimeout

WASI_MODULE = "wasi_snapshot_preview1"
# The preview 1 functions a guest may import; anything else is refused before it runs.
WASI_FUNCTIONS = frozenset(
    (
        "args_get",
        "args_sizes_get",
        "environ_get",
        "environ_sizes_get",
        "clock_res_get",
        "clock_time_get",
        "fd_advise",
        "fd_allocate",
        "fd_close",
        "fd_datasync",
        "fd_fdstat_get",
        "fd_fdstat_set_flags",
        "fd_fdstat_set_rights",
        "fd_filestat_get",
        "fd_filestat_set_size",
        "fd_filestat_set_times",
        "fd_pread",
        "fd_prestat_get",
        "fd_prestat_dir_name",
        "fd_pwrite",
        "fd_read",
        "fd_readdir",
        "fd_renumber",
        "fd_seek",
        "fd_sync",
        "fd_tell",
        "fd_write",
        "path_create_directory",
        "path_filestat_get",
        "path_filestat_set_times",
        "path_link",
        "path_open",
        "path_readlink",
        "path_remove_directory",
        "path_rename",
        "path_symlink",
        "path_unlink_file",
        "poll_oneoff",
        "proc_exit",
        "proc_raise",
        "sched_yield",
        "random_get",
        "sock_accept",
        "sock_recv",
        "sock_send",
        "sock_shutdown",
    )
)
PAGE = 65536
MAX_TABLE_ELEMENTS = 1_000_000
# Exception handling (WebAssembly 3.0) stays on for C/C++ built by current WASI toolchains;
# its exception objects live in a GC heap, so the GC runtime (not the GC proposal) stays on
# too: with it off, wasmtime 50 aborts the process compiling a module that catches.
_DISABLED_FEATURES = (
    "wasm_threads",
    "shared_memory",
    "wasm_gc",
    "wasm_function_references",
    "wasm_stack_switching",
    "wasm_component_model",
    "wasm_memory64",
    "wasm_multi_memory",
)
# How long past its deadline a guest stuck in a host call is waited for.
BLOCKED_GRACE_SECONDS = 0.5
T = TypeVar("T")
_WASM_MAGIC = b"\0asm"
_CORE_VERSION = b"\x01\x00\x00\x00"

# --- the runtime: engine, linker, ticker, module cache ---------------------------------


@dataclass(frozen=True)
class CompiledModule:
    """A module that passed every check, ready to instantiate many times."""

    sha256: str
    module: wasmtime.Module
    pre: wasmtime.InstancePre
    initial_memory_bytes: int


class WasiRuntime:
    """The process's one Engine with its shared ticker, linker and compiled-module cache."""

    def __init__(self) -> None:
        config = wasmtime.Config()
        config.consume_fuel = True
        config.epoch_interruption = True
        # WASI preview 1 tools need none of these; each one off is attack surface gone,
        # and a module that uses one is refused at compile time.
        for feature in _DISABLED_FEATURES:
            setattr(config, feature, False)
        self.engine = wasmtime.Engine(config)
        self.linker = wasmtime.Linker(self.engine)
        self.linker.define_wasi()
        self.linker.allow_shadowing = True
        i32 = wasmtime.ValType.i32()
        self.linker.define_func(
            WASI_MODULE,
            "poll_oneoff",
            wasmtime.FuncType([i32, i32, i32, i32], [i32]),
            poll_oneoff,
            access_caller=True,
        )
        settings = "fuel;epoch;off=" + ",".join(_DISABLED_FEATURES)
        self.disk = ModuleCache(default_cache_dir(), engine_key(settings))
        self._modules: dict[str, CompiledModule] = {}
        self._lock = threading.Lock()
        self.heartbeat = Heartbeat(self._tick)
        self.workers = WorkerPool()

    def _tick(self) -> None:
        self.engine.increment_epoch()
        pump_active()

    def compile(self, module_bytes: bytes, source: str, sha256: str | None = None) -> CompiledModule:
        """Check and compile module bytes once; later calls with the same bytes hit the cache."""
        digest = sha256 or hashlib.sha256(module_bytes).hexdigest()
        with self._lock:
            cached = self._modules.get(digest)
        if cached is not None:
            return cached
        compiled = self._compile(module_bytes, source, digest)
        with self._lock:
            return self._modules.setdefault(digest, compiled)

    def _compile(self, data: bytes, source: str, digest: str) -> CompiledModule:
        if data[:4] != _WASM_MAGIC:
            raise InvalidModule(f"{source} is not a WebAssembly module (no \\0asm header)")
        if data[4:8] != _CORE_VERSION:
            if len(data) >= 8 and data[6:8] == b"\x01\x00":
                raise InvalidModule(
                    f"{source} is a WebAssembly component, not a core module",
                    hint="build the tool as a WASI preview 1 core module (wasm32-wasi / wasm32-wasip1).",
                )
            raise InvalidModule(f"{source} has an unsupported WebAssembly version")
        module = self._load_cached(digest)
        from_disk = module is not None
        if module is None:
            try:
                with compiling(source, len(data)):
                    module = wasmtime.Module(self.engine, data)
            except (wasmtime.WasmtimeError, wasmtime.Trap) as exc:
                raise InvalidModule(f"{source} does not compile: {with_cause(str(exc))}") from None
        for item in module.imports:
            if item.module != WASI_MODULE or item.name not in WASI_FUNCTIONS:
                raise InvalidModule(
                    f"{source} imports '{item.module}.{item.name}', which is not a WASI preview 1 function",
                    hint="tools may import only wasi_snapshot_preview1 functions.",
                )
            if not isinstance(item.type, wasmtime.FuncType):
                raise InvalidModule(f"{source} imports '{item.module}.{item.name}' as a non-function")
        exports = {item.name: item.type for item in module.exports}
        start = exports.get("_start")
        if not isinstance(start, wasmtime.FuncType) or start.params or start.results:
            raise InvalidModule(f"{source} does not export a `_start` function of type () -> ()")
        memory = exports.get("memory")
        if not isinstance(memory, wasmtime.MemoryType):
            raise InvalidModule(f"{source} does not export its `memory`")
        try:
            pre = self.linker.instantiate_pre(module)
        except (wasmtime.WasmtimeError, wasmtime.Trap) as exc:
            raise InvalidModule(f"{source} cannot be linked: {with_cause(str(exc))}") from None
        if not from_disk:  # only modules that passed every check are worth keeping
            self.disk.store(digest, bytes(module.serialize()))
        return CompiledModule(digest, module, pre, memory.limits.min * PAGE)

    def _load_cached(self, digest: str) -> wasmtime.Module | None:
        """A module from the disk cache, when an entry passes every check and wasmtime accepts it."""
        artifact = self.disk.load(digest)
        if artifact is None:
            return None
        try:
            return _deserialize(self.engine, artifact.data)
        except (wasmtime.WasmtimeError, wasmtime.Trap):
            self.disk.discard(digest)  # from another build of wasmtime, or damaged: compile again
            return None
        finally:
            artifact.close()

    def compile_within(self, module_bytes: bytes, source: str, sha256: str, limits: Limits) -> CompiledModule:
        """`compile`, then refuse a module whose initial memory is already over the cap."""
        compiled = self.compile(module_bytes, source, sha256)
        if compiled.initial_memory_bytes > limits.max_memory_bytes:
            raise ToolMemoryLimit(
                f"module starts with {compiled.initial_memory_bytes} bytes of memory, "
                f"over the {limits.max_memory_bytes}-byte cap"
            )
        return compiled

    def run(self, plan: RunPlan) -> SandboxResult:
        """Run one plan in a fresh Store; raise the named error for each way it can be stopped."""
        limits = plan.limits
        compiled = self.compile_within(plan.module_bytes, str(plan.module_path), plan.module_sha256, limits)
        return self.guarded(lambda: self._run(plan, compiled), limits, plan.guard_blocking_calls)

    def guarded(self, func: Callable[[], T], limits: Limits, guard_blocking_calls: bool) -> T:
        """Call `func` (which runs a guest) here, or on a worker given up on at the deadline plus a grace."""
        if not guard_blocking_calls and has_room_for_wasm():
            return func()
        bound = limits.max_runtime_ms / 1000 + BLOCKED_GRACE_SECONDS
        try:
            return self.workers.call(func, timeout=bound)
        except WorkersExhausted:
            raise SandboxUnavailable(
                "too many earlier tools are still stuck in blocking host calls",
                hint="find what they block on (a FIFO or a hung mount in the workspace), or restart.",
            ) from None
        except WorkerTimeout:
            raise ToolTimeout(
                f"tool stayed blocked in a host call past its {limits.max_runtime_ms} ms limit; "
                "it was abandoned",
                hint="a tool can block on a FIFO or a hung file system in its mounts.",
            ) from None

    def _run(self, plan: RunPlan, compiled: CompiledModule) -> SandboxResult:
        limits = plan.limits
        started = time.monotonic()
        state = RunState(started + limits.max_runtime_ms / 1000, plan.cancel)
        sinks: list[BoundedSink] = []
        store = self.new_store(limits)
        try:
            try:
                sinks.append(capture("stdout", limits.max_stdout_bytes, state.request_stop))
                sinks.append(capture("stderr", limits.max_stderr_bytes, state.request_stop))
            except OSError as exc:  # out of file descriptors, most likely
                raise SandboxUnavailable(f"cannot create output pipes: {exc.strerror}") from None
            store.set_wasi(self._wasi_config(plan, sinks[0], sinks[1]))
            state.monotonic_base_ns = time.monotonic_ns()
            outcome = self._execute(store, compiled, state)
            fuel_used = limits.max_fuel - store.get_fuel()
        finally:
            store.close()  # closes the guest's ends of the pipes
            outputs = [sink.finish() for sink in sinks]
        duration_ms = (time.monotonic() - started) * 1000
        near_cap = raise_if_stopped(
            state,
            outcome,
            limits,
            overflowed=[(sink.name, sink.cap) for sink in sinks if sink.overflowed],
            stderr=outputs[1],
        )
        if outcome.exit_code != 0 and near_cap:
            raise ToolMemoryLimit(
                f"tool exited with code {outcome.exit_code} with its memory at the "
                f"{limits.max_memory_bytes}-byte cap"
            )
        return SandboxResult(
            exit_code=outcome.exit_code,
            stdout=outputs[0],
            stderr=outputs[1],
            fuel_used=fuel_used,
            duration_ms=duration_ms,
            peak_memory_bytes=outcome.memory_bytes,
        )

    def new_store(self, limits: Limits) -> wasmtime.Store:
        """A fresh Store with the run's fuel, memory and table caps, stopped by the epoch callback."""
        store = wasmtime.Store(self.engine)
        store.set_fuel(limits.max_fuel)
        store.set_limits(
            memory_size=limits.max_memory_bytes,
            table_elements=MAX_TABLE_ELEMENTS,
            instances=1,
            tables=4,
            memories=1,
        )
        store.set_epoch_deadline(1)
        ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), ON_EPOCH, None, NO_FINALIZER)
        return store

    def _wasi_config(self, plan: RunPlan, stdout: BoundedSink, stderr: BoundedSink) -> wasmtime.WasiConfig:
        wasi = wasmtime.WasiConfig()
        data = plan.stdin
        vec = ffi.wasm_byte_vec_t()
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        ffi.wasm_byte_vec_new(ctypes.byref(vec), len(data), buffer)
        ffi.wasi_config_set_stdin_bytes(wasi.ptr(), ctypes.byref(vec))
        wasi.stdout_file = f"/proc/self/fd/{stdout.write_fd}"
        wasi.stderr_file = f"/proc/self/fd/{stderr.write_fd}"
        for mount in plan.mounts:
            self._preopen(wasi, mount)
        return wasi

    @staticmethod
    def _preopen(wasi: wasmtime.WasiConfig, mount: Mount) -> None:
        """Map exactly the folder that was checked: opened without following a final
        symlink, its identity compared, then handed to wasmtime through /proc/self/fd."""
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(mount.host_path, flags)
        except OSError as exc:
            raise SandboxUnavailable(f"cannot open {mount.host_path} to map it: {exc.strerror}") from None
        try:
            info = os.fstat(fd)
            if mount.identity is not None and (info.st_dev, info.st_ino) != mount.identity:
                raise SandboxUnavailable(f"{mount.host_path} changed after it was checked; not mapped")
            wasi.preopen_dir(f"/proc/self/fd/{fd}", mount.guest_path, fs_mutable=not mount.read_only)
        except wasmtime.WasmtimeError as exc:
            raise SandboxUnavailable(
                f"cannot map {mount.host_path} at {mount.guest_path}: {first_line(str(exc))}"
            ) from None
        finally:
            os.close(fd)  # wasmtime holds its own descriptor now

    def _execute(self, store: wasmtime.Store, compiled: CompiledModule, state: RunState) -> Outcome:
        bind(state)
        beat = self.heartbeat.hold()
        exports = None
        try:
            instance = compiled.pre.instantiate(store)  # runs the module's start function, if any
            exports = instance.exports(store)
            start = exports["_start"]
            assert isinstance(start, wasmtime.Func)
            start(store)
            code, failure = 0, None
        except wasmtime.ExitTrap as exc:
            code, failure = exc.code, None
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            code, failure = -1, exc
        finally:
            self.heartbeat.release(beat)
            bind(None)
        memory_bytes = 0
        if exports is not None:
            memory = exports.get("memory")
            if isinstance(memory, wasmtime.Memory):
                memory_bytes = memory.data_len(store)
        return Outcome(code, failure, exports is None, memory_bytes)


def _deserialize(engine: wasmtime.Engine, artifact: memoryview) -> wasmtime.Module:
    """wasmtime.Module.deserialize without its copy of the bytes: wasmtime reads them in place
    (from the mapped cache file) and copies them once, into its own executable memory."""
    size = len(artifact)
    buffer = (ctypes.c_uint8 * size).from_buffer(artifact)
    pointer = ctypes.POINTER(ffi.wasmtime_module_t)()
    try:
        error = ffi.wasmtime_module_deserialize(engine.ptr(), buffer, size, ctypes.byref(pointer))
    finally:
        del buffer  # the mapping can be closed only once nothing exports it
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)
    return wasmtime.Module._from_ptr(pointer)


@dataclass(frozen=True)
class Outcome:
    """How `_start` ended: an exit code, or the wasmtime failure that stopped it."""

    exit_code: int
    failure: Exception | None
    instantiating: bool
    memory_bytes: int


def raise_if_stopped(
    state: RunState,
    outcome: Outcome,
    limits: Limits,
    *,
    overflowed: list[tuple[str, int]],
    stderr: bytes,
) -> bool:
    """Raise the named error when the runner stopped the guest or it trapped.

    Returns whether the guest's memory ended near its cap (for the caller's own reading
    of a non-zero exit).
    """
    for name, cap in overflowed:
        raise StreamTooLong(f"tool wrote more than {cap} bytes to {name}")
    if state.stop_reason == STOP_CANCELLED:
        raise ToolCancelled("call cancelled; the tool was stopped")
    if state.stop_reason == STOP_TIMEOUT:
        raise ToolTimeout(f"tool ran past its {limits.max_runtime_ms} ms limit")
    # A refused memory.grow is not a trap: the guest sees -1 and fails its own way.
    # When it then fails with its memory close to the cap, the cap is the cause.
    near_cap = outcome.memory_bytes + max(PAGE, limits.max_memory_bytes // 8) > limits.max_memory_bytes
    if outcome.failure is not None:
        raise map_wasm_failure(
            outcome.failure,
            instantiating=outcome.instantiating,
            near_memory_cap=near_cap,
            cap=limits.max_memory_bytes,
            stderr=stderr,
        )
    return near_cap


_runtime: WasiRuntime | None = None
_runtime_lock = threading.Lock()


def runtime() -> WasiRuntime:
    """The process-wide runtime, created on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = WasiRuntime()
        return _runtime
