"""Reading a tool's module file: its bytes and SHA-256, reused while the file is unchanged.

What runs is always exactly what was hashed and checked against the pin: the
bytes and their digest are cached together, under the identity of the file they
were read from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .errors import InvalidModule
from .files import IdentityCache

MAX_MODULE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class ModuleFile:
    """A module's bytes and their SHA-256."""

    path: str
    data: bytes
    sha256: str


_modules: IdentityCache[ModuleFile] = IdentityCache(64)


def read_module(path: str) -> ModuleFile:
    """The module at `path` (a regular file, not a symlink), or InvalidModule."""
    try:
        return _modules.load(
            path, MAX_MODULE_BYTES, lambda data: ModuleFile(path, data, hashlib.sha256(data).hexdigest())
        )
    except FileNotFoundError:
        raise InvalidModule(
            f"module {path} does not exist", hint="build the tool, or fix `module` in its manifest."
        ) from None
    except ValueError as exc:
        raise InvalidModule(f"module {path} {exc}") from None
