"""Streaming a guest's output to a host file descriptor as it comes, up to a cap.

The guest writes into a pipe; one thread per stream reads it and writes what it
read to the host descriptor (the terminal, a file, the next program in a shell
pipeline). Past the cap nothing more is forwarded, the overflow is reported so
the run can be stopped, and the pipe is still drained so that a guest writing
into it never blocks. Nothing is buffered beyond one read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

_CHUNK = 65536


class ForwardedStream:
    """One guest stream forwarded to `target_fd`, at most `cap` bytes of it."""

    def __init__(self, name: str, target_fd: int, cap: int, on_overflow: Callable[[str], None]) -> None:
        self.name = name
        self.cap = cap
        self.forwarded = 0
        self.overflowed = False
        self.target_closed = False
        # Whether the last byte forwarded ended a line: a message after the guest's starts on its own.
        self.mid_line = False
        self._target_fd = target_fd
        self._on_overflow = on_overflow
        self._read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._drain, name=f"zigclaw-{name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._read_fd, _CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return  # every write end is closed: the run is over
                room = self.cap - self.forwarded
                part = chunk[: max(room, 0)]
                if part:
                    self._write(part)
                    self.forwarded += len(part)
                    self.mid_line = not part.endswith(b"\n")
                if len(chunk) > room and not self.overflowed:
                    self.overflowed = True
                    self._on_overflow(self.name)
        finally:
            os.close(self._read_fd)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.target_closed:
            try:
                written = os.write(self._target_fd, view)
            except InterruptedError:
                continue
            except OSError:
                # The reader went away (`| head`), the disk is full, the descriptor is
                # unusable: the rest is dropped, as a host program would lose it.
                self.target_closed = True
                return
            view = view[written:]

    def close_write_end(self) -> None:
        """Drop our copy of the write end once the guest holds its own."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def finish(self, timeout: float | None) -> None:
        """Wait (at most `timeout` s) until everything the guest wrote has been forwarded or dropped."""
        self.close_write_end()
        self._thread.join(timeout)
