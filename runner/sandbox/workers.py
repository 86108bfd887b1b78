"""Threads that run guests: a known stack size, and a caller that never waits past a bound.

A guest blocked inside a host call (say, reading a FIFO that sits in the workspace)
cannot be interrupted by the epoch. The caller waits at most the run's deadline
plus a grace period; after that it gives up on the worker, which finishes and
cleans up on its own if the call ever returns, and a fresh worker serves the
next run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# wasmtime runs wasm on the calling thread's stack (up to its own 512 KiB wasm
# stack limit, plus host frames): give it room no matter who calls us.
WORKER_STACK_BYTES = 16 * 1024 * 1024


class WorkerTimeout(Exception):
    """The worker did not finish within the bound; it has been given up on."""


class _Task:
    __slots__ = ("abandoned", "done", "error", "func", "result")

    def __init__(self, func: Callable[[], Any]) -> None:
        self.func = func
        self.abandoned = False
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


# Workers given up on and still stuck; past this many, new guarded calls are refused
# rather than letting stuck guests pile up threads, Stores and descriptors.
MAX_STUCK_WORKERS = 8


class WorkersExhausted(Exception):
    """Too many workers are stuck in host calls to start another guarded call."""


class WorkerPool:
    """Idle workers wait for tasks; a busy or lost worker is replaced by a new one."""

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[_Task]] = []
        self._lock = threading.Lock()
        self._stuck = 0

    def call(self, func: Callable[[], T], timeout: float | None) -> T:
        """Run `func` on a worker; raise WorkerTimeout if it is not done within `timeout` s (None: wait)."""
        task = _Task(func)
        with self._lock:
            if self._stuck >= MAX_STUCK_WORKERS:
                raise WorkersExhausted()
            inbox = self._idle.pop() if self._idle else self._spawn()
        inbox.put(task)
        if not task.done.wait(timeout):
            with self._lock:
                if not task.done.is_set():
                    self._stuck += 1
                    task.abandoned = True
            raise WorkerTimeout()
        if task.error is not None:
            raise task.error
        return task.result  # type: ignore[no-any-return]

    def _spawn(self) -> queue.SimpleQueue[_Task]:
        inbox: queue.SimpleQueue[_Task] = queue.SimpleQueue()
        previous = threading.stack_size(WORKER_STACK_BYTES)
        try:
            thread = threading.Thread(target=self._serve, args=(inbox,), name="zigclaw-guest", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
        return inbox

    def _serve(self, inbox: queue.SimpleQueue[_Task]) -> None:
        while True:
            task = inbox.get()
            try:
                task.result = task.func()
            except BaseException as exc:  # handed to the caller, who re-raises it
                task.error = exc
            with self._lock:
                if task.abandoned:
                    self._stuck -= 1  # it came back after all
                self._idle.append(inbox)
                task.done.set()
