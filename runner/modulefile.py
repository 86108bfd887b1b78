"""Reading a tool's module file: bytes and SHA-256, cached while the file is unchanged.

What runs is always exactly what was hashed (and checked against the pin): the
cache holds the bytes with their digest, keyed by the file's identity and its
change times, so an unchanged file is neither re-read nor re-hashed.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidModule
from .manifest import read_untrusted_file

MAX_MODULE_BYTES = 512 * 1024 * 1024
_CACHE_ENTRIES = 64


@dataclass(frozen=True)
class ModuleFile:
    """A module's bytes and their SHA-256."""

    path: Path
    data: bytes
    sha256: str


_cache: dict[tuple[str, int, int, int, int, int], ModuleFile] = {}
_lock = threading.Lock()


def read_module(path: Path) -> ModuleFile:
    """The module at `path` (a regular file, not a symlink), or InvalidModule."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise InvalidModule(
            f"module {path} does not exist", hint="build the tool, or fix `module` in its manifest."
        ) from None
    except OSError as exc:
        raise InvalidModule(f"module {path} cannot be read: {exc.strerror}") from None
    key = (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        data = read_untrusted_file(path, MAX_MODULE_BYTES)
    except FileNotFoundError:
        raise InvalidModule(f"module {path} does not exist") from None
    except ValueError as exc:
        raise InvalidModule(f"module {path} {exc}") from None
    module = ModuleFile(path, data, hashlib.sha256(data).hexdigest())
    if len(data) == info.st_size:  # cache only what matches the identity we keyed it by
        with _lock:
            if len(_cache) >= _CACHE_ENTRIES:
                _cache.pop(next(iter(_cache)))
            _cache[key] = module
    return module
