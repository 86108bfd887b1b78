"""Bounded capture of a stream through a pipe.

The pipe is sized to hold the whole cap where the kernel allows, so a tool that
stays under its cap never waits and its output is read once, at the end, by the
caller's thread. While a run is live the heartbeat thread pumps every active
pipe each tick: a tool that writes more than the pipe holds is drained, never
deadlocked; at most `cap` bytes are kept, the rest is discarded and the overflow
reported so the run can be stopped. Nothing touches the disk.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Callable

_CHUNK = 1 << 20
_DEFAULT_PIPE = 65536
# Pipes above /proc/sys/fs/pipe-max-size need privileges; this is its default.
_MAX_PIPE = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class BoundedSink:
    """The read end of one pipe and the first `cap` bytes that came through it."""

    def __init__(self, name: str, cap: int, on_overflow: Callable[[str], None]) -> None:
        self.name = name
        self.cap = cap
        self._on_overflow = on_overflow
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self.overflowed = False
        self.eof = False
        read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_fd, False)
        self._read_fd: int | None = read_fd
        # Up to 64 KiB the default pipe holds the whole cap; one byte more waits a tick.
        wanted = min(max(cap, _DEFAULT_PIPE), _MAX_PIPE)
        if wanted > _DEFAULT_PIPE:
            # Over the user's pipe budget the kernel says no: a smaller pipe is just pumped more.
            with contextlib.suppress(OSError):
                fcntl.fcntl(read_fd, _F_SETPIPE_SZ, wanted)

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
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                return
            if not chunk:
                self.eof = True
                return
            room = self.cap - len(self._buffer)
            if room > 0:
                self._buffer += chunk[:room]
            if len(chunk) > room and not self.overflowed:
                self.overflowed = True
                self._on_overflow(self.name)

    def fileno(self) -> int:
        """The read end, for a caller that waits on it with `selectors` (the native runner)."""
        if self._read_fd is None:
            raise ValueError(f"{self.name} sink is finished")
        return self._read_fd

    def close_write_end(self) -> None:
        """Drop our copy of the write end once the writer holds its own."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def finish(self) -> bytes:
        """Read what is still in the pipe, close both of our ends, return the kept bytes."""
        with _active_lock:
            _active.discard(self)
        with self._lock:
            self.close_write_end()
            self._pump_locked()
            if self._read_fd is not None:
                os.close(self._read_fd)
                self._read_fd = None
        return bytes(self._buffer)


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
