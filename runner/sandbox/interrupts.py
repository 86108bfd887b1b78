"""How a running guest is stopped: its run state, the per-tick epoch callback, and a
`poll_oneoff` served by the runner so that a sleeping guest wakes at its deadline.

Both run on the guest's own thread and find the run's state in a thread-local.
Neither ever raises into wasmtime-py (its exception slot is process-wide): they
record why the guest must stop, and the epoch callback then returns an error.
"""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi

from ..cancel import CancelToken

MAX_POLL_SUBSCRIPTIONS = 4096

# WASI errno values used by the shadowed poll_oneoff.
_ERRNO_SUCCESS, _ERRNO_FAULT, _ERRNO_INTR, _ERRNO_INVAL = 0, 21, 27, 28
_SUBSCRIPTION = struct.Struct("<QB")  # userdata, tag (then a union at offset 16)
_CLOCK = struct.Struct("<I4xQQH")  # clock id, timeout ns, precision, flags
_EVENT = struct.Struct("<QHB5xQH6x")  # userdata, errno, type, nbytes, flags
_SUBSCRIPTION_SIZE = 48
_ABSTIME = 1
_LAST_CLOCK_ID = 3  # realtime, monotonic, process and thread CPU time

# Why a running guest must stop; set from any thread, read by the guest's thread.
STOP_TIMEOUT = "timeout"
STOP_CANCELLED = "cancelled"


class RunState:
    """What the epoch callback and host functions of one run need to know."""

    __slots__ = ("cancel", "deadline", "monotonic_base_ns", "stop_reason")

    def __init__(self, deadline: float, cancel: CancelToken | None = None) -> None:
        self.deadline = deadline
        self.cancel = cancel
        self.stop_reason: str | None = None
        # wasmtime's guest monotonic clock counts from when the WASI context was made;
        # the runner sets this then, to turn the guest's absolute times into ours.
        self.monotonic_base_ns = time.monotonic_ns()

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    def should_stop(self) -> bool:
        if self.stop_reason is None:
            if self.cancel is not None and self.cancel.cancelled:
                self.stop_reason = STOP_CANCELLED
            elif time.monotonic() >= self.deadline:
                self.stop_reason = STOP_TIMEOUT
        return self.stop_reason is not None

    def pause(self, seconds: float) -> None:
        """Sleep on behalf of the guest; a cancellation ends the sleep at once."""
        if self.cancel is not None:
            self.cancel.wait(seconds)
        else:
            time.sleep(seconds)


_current = threading.local()


def bind(state: RunState | None) -> None:
    """Make `state` the run of the calling thread (None: no run)."""
    _current.state = state


def _state() -> RunState | None:
    return getattr(_current, "state", None)


# --- the epoch callback: runs on the guest's thread at every tick -------------------

_CALLBACK_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_size_t,
    ctypes.POINTER(ffi.wasmtime_context_t),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ffi.wasmtime_update_deadline_kind_t),
)
_FINALIZER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
NO_FINALIZER = _FINALIZER_TYPE()  # a NULL function pointer
_UPDATE_CONTINUE = 0


def _on_epoch(_context: Any, _env: Any, delta: Any, kind: Any) -> int:
    state = _state()
    if state is None or state.should_stop():
        error = ffi.wasmtime_error_new(b"zigclaw: guest stopped by the runner")
        return ctypes.cast(error, ctypes.c_void_p).value or 0
    delta[0] = 1
    kind[0] = _UPDATE_CONTINUE
    return 0


ON_EPOCH = _CALLBACK_TYPE(_on_epoch)


# --- the shadowed poll_oneoff ---------------------------------------------------------


def poll_oneoff(caller: wasmtime.Caller, in_ptr: int, out_ptr: int, count: int, nevents_ptr: int) -> int:
    try:
        return _poll(caller, in_ptr, out_ptr, count, nevents_ptr)
    except Exception:  # never raise through wasmtime-py
        return _ERRNO_FAULT


def _poll(caller: wasmtime.Caller, in_ptr: int, out_ptr: int, count: int, nevents_ptr: int) -> int:
    memory = caller.get("memory")
    state = _state()
    if not isinstance(memory, wasmtime.Memory) or state is None:
        return _ERRNO_FAULT
    if count <= 0 or count > MAX_POLL_SUBSCRIPTIONS:
        return _ERRNO_INVAL
    size = memory.data_len(caller)
    end_in = in_ptr + count * _SUBSCRIPTION_SIZE
    if in_ptr < 0 or end_in > size or out_ptr < 0 or out_ptr + count * _EVENT.size > size:
        return _ERRNO_FAULT
    if nevents_ptr < 0 or nevents_ptr + 4 > size:
        return _ERRNO_FAULT
    raw = bytes(memory.read(caller, in_ptr, end_in))
    now = time.monotonic_ns()
    clocks: list[tuple[int, int]] = []  # (userdata, wake time in monotonic ns)
    ready: list[tuple[int, int]] = []  # (userdata, event type) for fd subscriptions
    for index in range(count):
        offset = index * _SUBSCRIPTION_SIZE
        userdata, tag = _SUBSCRIPTION.unpack_from(raw, offset)
        if tag == 0:
            clock_id, timeout, _precision, flags = _CLOCK.unpack_from(raw, offset + 16)
            if clock_id > _LAST_CLOCK_ID:
                return _ERRNO_INVAL
            if flags & _ABSTIME:
                # The guest's "now" on that clock, to measure its absolute timeout against.
                base = time.time_ns() if clock_id == 0 else now - state.monotonic_base_ns
                wake = now + max(0, timeout - base)
            else:
                wake = now + timeout
            clocks.append((userdata, wake))
        elif tag in (1, 2):
            ready.append((userdata, tag))
        else:
            return _ERRNO_INVAL
    if not ready and clocks:
        wake_at = min(wake for _, wake in clocks)
        while True:
            if state.should_stop():
                return _ERRNO_INTR
            remaining = wake_at - time.monotonic_ns()
            if remaining <= 0:
                break
            state.pause(min(remaining / 1e9, 0.01))
        now = time.monotonic_ns()
    events = [(userdata, tag, 1) for userdata, tag in ready]
    events += [(userdata, 0, 0) for userdata, wake in clocks if wake <= now]
    out = bytearray()
    for userdata, event_type, nbytes in events:
        out += _EVENT.pack(userdata, _ERRNO_SUCCESS, event_type, nbytes, 0)
    if out:
        memory.write(caller, bytes(out), out_ptr)
    memory.write(caller, struct.pack("<I", len(events)), nevents_ptr)
    return _ERRNO_SUCCESS
