"""What to show while a large module compiles for the first time (a spinner, from the CLI).

Kept apart from wasi.py so the CLI can set it without importing wasmtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

# Modules at least this large compile for long enough (a second or more) to show progress.
SLOW_COMPILE_BYTES = 2 * 1024 * 1024

# (what is compiled, its size in bytes) -> a context manager that shows progress while open.
ProgressHook = Callable[[str, int], AbstractContextManager[object]]

_hook: ProgressHook | None = None


def set_compile_progress(hook: ProgressHook | None) -> None:
    """Show progress with `hook` while a large module compiles; None: show nothing (the default)."""
    global _hook
    _hook = hook


def compiling(source: str, size: int) -> AbstractContextManager[object]:
    """Progress for compiling `size` bytes from `source`, if anyone wants it shown."""
    hook = _hook
    if hook is None or size < SLOW_COMPILE_BYTES:
        return contextlib.nullcontext()
    return hook(source, size)
