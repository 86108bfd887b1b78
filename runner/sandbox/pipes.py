"""Bounded capture of a stream through a pipe.

The pipe is sized to hold the whole cap where the kernel allows, so a tool that
stays under its cap never waits and its output is read once, at the end, by the
caller's thread. While a run is live the heartbeat thread pumps every active
pipe each tick: a tool that writes more than the pipe holds is drained, never
deadlocked; at most `cap` bytes are kept, the rest is discarded and the overflow
reported so the run can be stopped. Nothing touches the disk.

Pipes are reused: a pipe whose run ended with it drained (and under its cap)
goes back to a small pool, and is handed out again only if it is still empty.
Each run's writer is the guest's own descriptor, which wasmtime opens from
/proc/self/fd and closes with the Store; our write end stays open meanwhile,
so a pipe never reads as closed and draining stops when it is empty.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import termios
import threading
from collections.abc import Callable

_CHUNK = 1 << 20
_DEFAULT_PIPE = 65536
# Pipes above /proc/sys/fs/pipe-max-size need privileges; this is its default.
_MAX_PIPE = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
# Idle pipes kept per size; each holds two descriptors.
_POOL_PER_SIZE = 8


def _unread_bytes(fd: int) -> int:
    raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", raw)[0])


class _PipePool:
    """Idle, empty pipes by requested size."""

    def __init__(self) -> None:
        self._idle: dict[int, list[tuple[int, int]]] = {}
        self._lock = threading.Lock()

    def take(self, size: int) -> tuple[int, int]:
        while True:
            with self._lock:
                idle = self._idle.get(size)
                pair = idle.pop() if idle else None
            if pair is None:
                return _new_pipe(size)
            try:
                empty = _unread_bytes(pair[0]) == 0
            except OSError:
                empty = False
            if empty:
                return pair
            _close(pair)  # something wrote after it was drained: never reuse it

    def idle_descriptors(self) -> int:
        with self._lock:
            return 2 * sum(len(idle) for idle in self._idle.values())

    def give(self, size: int, pair: tuple[int, int]) -> None:
        with self._lock:
            idle = self._idle.setdefault(size, [])
            if len(idle) < _POOL_PER_SIZE:
                idle.append(pair)
                return
        _close(pair)


def _new_pipe(size: int) -> tuple[int, int]:
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    os.set_blocking(read_fd, False)
    if size > _DEFAULT_PIPE:
        # Over the user's pipe budget the kernel says no: a smaller pipe is just pumped more.
        with contextlib.suppress(OSError):
            fcntl.fcntl(read_fd, _F_SETPIPE_SZ, size)
    return read_fd, write_fd


def _close(pair: tuple[int, ...]) -> None:
    for fd in pair:
        with contextlib.suppress(OSError):
            os.close(fd)


_pool = _PipePool()


def idle_descriptors() -> int:
    """How many descriptors the pool of idle pipes holds (at most 2 * _POOL_PER_SIZE per size)."""
    return _pool.idle_descriptors()


class BoundedSink:
    """The read end of one pipe and the first `cap` bytes that came through it."""

    def __init__(self, name: str, cap: int, on_overflow: Callable[[str], None]) -> None:
        self.name = name
        self.cap = cap
        self._on_overflow = on_overflow
        self._chunks: list[bytes] = []
        self._kept = 0
        self._lock = threading.Lock()
        self.overflowed = False
        self._drained = False
        self.eof = False
        # Up to 64 KiB the default pipe holds the whole cap; one byte more waits a tick.
        self._size = min(max(cap, _DEFAULT_PIPE), _MAX_PIPE)
        read_fd, self.write_fd = _pool.take(self._size)
        self._read_fd: int | None = read_fd

    def pump(self) -> None:
        """Move whatever the pipe holds into the bounded buffer; never blocks."""
        with self._lock:
            self._pump_locked()

    def _pump_locked(self) -> None:
        fd = self._read_fd
        while fd is not None:
            try:
                chunk = os.read(fd, _CHUNK)
            except BlockingIOError:
                self._drained = True
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                return
            if not chunk:
                self.eof = True
                return
            room = self.cap - self._kept
            if room > 0:
                kept = chunk if len(chunk) <= room else chunk[:room]
                self._chunks.append(kept)  # no copy: most output arrives in one read
                self._kept += len(kept)
            if len(chunk) > room and not self.overflowed:
                self.overflowed = True
                self._on_overflow(self.name)

    def fileno(self) -> int:
        """The read end, for a caller that waits on it with `selectors` (the native runner)."""
        if self._read_fd is None:
            raise ValueError(f"{self.name} sink is finished")
        return self._read_fd

    def close_write_end(self) -> None:
        """Drop our copy of the write end (the pipe then reads as closed once the writer is done,
        and is not reused)."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def finish(self) -> bytes:
        """Read what is still in the pipe, pool or close it, return the kept bytes.

        Call only once the writer is gone (the Store closed)."""
        with _active_lock:
            _active.discard(self)
        with self._lock:
            self._drained = False
            self._pump_locked()
            read_fd, self._read_fd = self._read_fd, None
            if read_fd is not None:
                if self._drained and not self.overflowed and self.write_fd >= 0:
                    _pool.give(self._size, (read_fd, self.write_fd))
                else:
                    _close((read_fd, self.write_fd) if self.write_fd >= 0 else (read_fd,))
                self.write_fd = -1
        return self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)


_active: set[BoundedSink] = set()
_active_lock = threading.Lock()


def capture(name: str, cap: int, on_overflow: Callable[[str], None]) -> BoundedSink:
    """A new sink for one stream, pumped by `pump_active` until `finish`."""
    sink = BoundedSink(name, cap, on_overflow)
    with _active_lock:
        _active.add(sink)
    return sink


def pump_active() -> None:
    """Drain every live sink a little; the heartbeat calls this each tick."""
    with _active_lock:
        sinks = list(_active)
    for sink in sinks:
        sink.pump()
