"""Bounded capture of a stream through a pipe, drained by one shared reactor thread.

The writer (a guest or a subprocess) never blocks for long: the reactor keeps
reading, holds at most `cap` bytes, discards the rest and reports the overflow,
so there is no deadlock at any output size and nothing touches the disk.
"""

from __future__ import annotations

import errno
import os
import select
import threading
from collections.abc import Callable

_CHUNK = 65536


class BoundedSink:
    """The read end of one pipe and the first `cap` bytes that came through it."""

    def __init__(self, name: str, cap: int, on_overflow: Callable[[str], None]) -> None:
        self.name = name
        self.cap = cap
        self._on_overflow = on_overflow
        self._buffer = bytearray()
        self.overflowed = False
        read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_fd, False)
        self._read_fd: int | None = read_fd

    def _pump(self) -> bool:
        """Read what is there; True at EOF. Called with the reactor lock held."""
        fd = self._read_fd
        if fd is None:
            return True
        while True:
            try:
                chunk = os.read(fd, _CHUNK)
            except BlockingIOError:
                return False
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                return True
            if not chunk:
                return True
            room = self.cap - len(self._buffer)
            if room > 0:
                self._buffer += chunk[:room]
            if len(chunk) > room and not self.overflowed:
                self.overflowed = True
                self._on_overflow(self.name)

    def close_write_end(self) -> None:
        """Drop our copy of the write end once the writer holds its own."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def _close_read_end(self) -> None:
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None

    @property
    def data(self) -> bytes:
        return bytes(self._buffer)


class Reactor:
    """One daemon thread that drains every registered sink with epoll."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._sinks: dict[int, BoundedSink] = {}
        self._thread: threading.Thread | None = None

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="zigclaw-pipes", daemon=True)
            self._thread.start()

    def register(self, sink: BoundedSink) -> None:
        with self._lock:
            assert sink._read_fd is not None
            self._sinks[sink._read_fd] = sink
            self._epoll.register(sink._read_fd, select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR)
            self._ensure_thread()

    def _detach(self, sink: BoundedSink) -> None:
        fd = sink._read_fd
        if fd is not None and self._sinks.pop(fd, None) is not None:
            self._epoll.unregister(fd)

    def finish(self, sink: BoundedSink) -> bytes:
        """Stop watching `sink`, read whatever is still buffered in the pipe, close it."""
        with self._lock:
            self._detach(sink)
            sink.close_write_end()
            sink._pump()
            sink._close_read_end()
        return sink.data

    def _loop(self) -> None:
        while True:
            try:
                events = self._epoll.poll(1.0)
            except InterruptedError:
                continue
            for fd, _mask in events:
                with self._lock:
                    sink = self._sinks.get(fd)
                    if sink is not None and sink._pump():
                        # At EOF: stop polling; the owner closes the read end in finish().
                        self._detach(sink)


_reactor: Reactor | None = None
_reactor_lock = threading.Lock()


def reactor() -> Reactor:
    """The process-wide reactor, created on first use."""
    global _reactor
    with _reactor_lock:
        if _reactor is None:
            _reactor = Reactor()
        return _reactor


def capture(name: str, cap: int, on_overflow: Callable[[str], None]) -> BoundedSink:
    """A new sink for one stream, already being drained."""
    sink = BoundedSink(name, cap, on_overflow)
    reactor().register(sink)
    return sink
