"""How much stack the calling thread has: wasm runs on it, so a small one must not run guests.

wasmtime stops wasm at its own stack limit (512 KiB by default), but only if the
thread really has that much left; on a smaller thread stack (some thread pools,
musl's 128 KiB default) deep guest recursion would crash the process instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

# Room for wasmtime's 512 KiB wasm stack plus the host frames around it.
MIN_INLINE_STACK_BYTES = 4 * 1024 * 1024

_local = threading.local()


def _query_stack_bytes() -> int:
    """The calling thread's stack size from pthread_getattr_np, or 0 when unknown."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.pthread_self.restype = ctypes.c_ulong
        libc.pthread_self.argtypes = []
        libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        libc.pthread_attr_getstack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        libc.pthread_attr_destroy.argtypes = [ctypes.c_void_p]
        attr = ctypes.create_string_buffer(256)  # larger than any pthread_attr_t
        if libc.pthread_getattr_np(libc.pthread_self(), attr) != 0:
            return 0
        try:
            address = ctypes.c_void_p()
            size = ctypes.c_size_t()
            if libc.pthread_attr_getstack(attr, ctypes.byref(address), ctypes.byref(size)) != 0:
                return 0
            return int(size.value)
        finally:
            libc.pthread_attr_destroy(attr)
    except (OSError, AttributeError):
        return 0


def has_room_for_wasm() -> bool:
    """True when the calling thread's stack is large enough to run a guest on it."""
    size = getattr(_local, "stack_bytes", None)
    if size is None:
        size = _local.stack_bytes = _query_stack_bytes()
    return size >= MIN_INLINE_STACK_BYTES
