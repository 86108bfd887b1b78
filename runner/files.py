"""Reading files that tool folders supply: bounded, never through a final symlink, cached by identity."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from .errors import SandboxUnavailable

T = TypeVar("T")


# The host, not the file, is at fault: these are reported as such.
_HOST_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)


def read_untrusted_file(
    path: Path | str, limit: int, *, follow_symlinks: bool = False
) -> tuple[bytes, os.stat_result]:
    """Read a regular file of at most `limit` bytes, by default not through a final symlink.

    Returns the bytes and the stat of the very file they were read from. Raises
    FileNotFoundError, SandboxUnavailable when the host is out of descriptors or
    memory, or ValueError naming why the file is refused.
    """
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise ValueError("is a symbolic link; tool files must be regular files") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise FileNotFoundError(str(path)) from None
        if exc.errno in _HOST_ERRNOS:
            raise SandboxUnavailable(f"cannot open {path}: {exc.strerror}") from None
        raise ValueError(f"cannot be opened: {exc.strerror}") from None
    try:
        return _read_open_file(fd, limit)
    except OSError as exc:  # EIO, EISDIR from odd files such as /proc entries
        raise ValueError(f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)


def _read_open_file(fd: int, limit: int) -> tuple[bytes, os.stat_result]:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("is not a regular file")
    if info.st_size > limit:
        raise ValueError(f"is {info.st_size} bytes, over the {limit}-byte limit")
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ValueError(f"is over the {limit}-byte limit")
    return data, info


_Key = tuple[str, int, int, int, int, int]


def _identity(path: str, info: os.stat_result) -> _Key:
    return (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class IdentityCache(Generic[T]):
    """Values derived from a file's bytes, reused while the file's identity and times are unchanged.

    A value is stored under the identity of the file its bytes were read from
    (fstat of the open file), so whatever is returned was derived from exactly
    those bytes. A changed file (new inode, size, mtime or ctime) is read again.
    """

    def __init__(self, max_entries: int) -> None:
        self._entries: dict[_Key, T] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def load(self, path: Path | str, limit: int, derive: Callable[[bytes], T]) -> T:
        """The value for the file at `path`; errors as read_untrusted_file, or from `derive`."""
        name = os.fspath(path)
        try:
            current = os.lstat(name)
        except FileNotFoundError:
            raise
        except OSError:
            current = None
        if current is not None:
            with self._lock:
                hit = self._entries.get(_identity(name, current))
            if hit is not None:
                return hit
        data, info = read_untrusted_file(name, limit)
        value = derive(data)
        if len(data) == info.st_size:
            with self._lock:
                if len(self._entries) >= self._max:
                    self._entries.pop(next(iter(self._entries)))
                self._entries[_identity(name, info)] = value
        return value
