"""The on-disk cache of compiled modules: only artifacts this program compiled, checked before use.

Deserializing a wasmtime artifact runs its machine code, so an entry is loaded
only if it sits in a folder that is ours alone (owned by us, no access for group
or others), is a regular file owned by us with one link and mode 0600, names
the module digest and engine it was compiled for, and carries an HMAC of all of
that and its bytes under a secret key kept in the folder (`.key`, 0600). A file
written by anything that cannot read the key (a tool with a write mount, say)
fails the check. Anything else is ignored and compiled again. Entries are
written to a temporary file and renamed into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import mmap
import os
import secrets
import stat
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..files import read_untrusted_file

_MAGIC = b"zigclaw-cwasm-2"
_MAX_HEADER_BYTES = 512
_KEY_FILE = ".key"
_KEY_BYTES = 32
MAX_ARTIFACT_BYTES = 2 * 1024 * 1024 * 1024
CACHE_ENV = "ZIGCLAW_CACHE_DIR"


def default_cache_dir() -> Path:
    """`$ZIGCLAW_CACHE_DIR`, else the user cache dir (platformdirs) + `/modules`."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("zigclaw")) / "modules"


def engine_key(settings: str) -> str:
    """What an artifact depends on besides the module: wasmtime's version and the engine settings."""
    try:
        wasmtime_version = version("wasmtime")
    except PackageNotFoundError:  # pragma: no cover - wasmtime is a dependency
        wasmtime_version = "unknown"
    text = f"wasmtime={wasmtime_version};python={sys.implementation.cache_tag};{settings}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _private_file(info: os.stat_result) -> bool:
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.geteuid()
        and stat.S_IMODE(info.st_mode) == 0o600
        and info.st_nlink == 1
    )


class Artifact:
    """A cache entry mapped into memory; `data` is the compiled artifact after the header."""

    def __init__(self, mapping: mmap.mmap) -> None:
        self.mapping = mapping
        self.offset = 0
        self._views: list[memoryview] = []

    @property
    def data(self) -> memoryview:
        view = memoryview(self.mapping)[self.offset :]
        self._views.append(view)
        return view

    def close(self) -> None:
        for view in self._views:
            view.release()
        self._views.clear()
        with contextlib.suppress(BufferError):  # still exported: unmapped when collected
            self.mapping.close()


class ModuleCache:
    """Compiled artifacts on disk, keyed by module SHA-256 and engine key."""

    def __init__(self, folder: Path, engine: str) -> None:
        self.folder = folder
        self.engine = engine
        self.refusal: str | None = None  # why the folder is not used, if it is not

    def _usable(self, create: bool) -> bool:
        try:
            if create:
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = os.lstat(self.folder)
        except OSError as exc:
            self.refusal = f"cannot use {self.folder}: {exc.strerror}"
            return False
        if not stat.S_ISDIR(info.st_mode):
            self.refusal = f"{self.folder} is not a folder"
        elif info.st_uid != os.geteuid():
            self.refusal = f"{self.folder} is owned by another user"
        elif info.st_mode & 0o077:
            self.refusal = f"{self.folder} is open to other users (mode {stat.S_IMODE(info.st_mode):o})"
        else:
            self.refusal = None
        return self.refusal is None

    def _path(self, module_sha256: str) -> Path:
        return self.folder / f"{module_sha256}-{self.engine}.cwasm"

    def _key(self, create: bool) -> bytes | None:
        """The folder's secret key: 32 random bytes in `.key`, ours alone; made on first store."""
        path = self.folder / _KEY_FILE
        if create:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(path, flags, 0o600)
            except FileExistsError:
                pass  # made earlier; checked below like any other key
            except OSError:
                return None
            else:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(secrets.token_bytes(_KEY_BYTES))
        try:
            if not _private_file(os.lstat(path)):
                return None
            key, _ = read_untrusted_file(path, _KEY_BYTES)
        except (OSError, ValueError):
            return None
        return key if len(key) == _KEY_BYTES else None

    def _header(self, key: bytes, module_sha256: str, artifact: bytes | memoryview) -> bytes:
        mac = hmac.new(key, digestmod=hashlib.sha256)
        for part in (module_sha256.encode(), self.engine.encode(), artifact):
            mac.update(len(part).to_bytes(8, "big"))
            mac.update(part)
        fields = (_MAGIC, module_sha256.encode(), self.engine.encode(), mac.hexdigest().encode())
        return b" ".join(fields) + b"\n"

    def load(self, module_sha256: str) -> Artifact | None:
        """The artifact for this module and engine, or None when absent or not trustworthy.

        The file is mapped, not read: its bytes are checked and handed to wasmtime in
        place (a large module's artifact is tens of MiB). Close what is returned.
        """
        if not self._usable(create=False):
            return None
        path = self._path(module_sha256)
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if not _private_file(info) or not 0 < info.st_size <= MAX_ARTIFACT_BYTES:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino) or not _private_file(opened):
                return None  # swapped between the checks and the open
            # A private (copy-on-write) mapping: writable for ctypes, never written back.
            mapping = mmap.mmap(fd, opened.st_size, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        artifact = Artifact(mapping)
        if not self._verify(module_sha256, artifact):
            artifact.close()
            return None
        return artifact

    def _verify(self, module_sha256: str, artifact: Artifact) -> bool:
        mapping = artifact.mapping
        end = mapping.find(b"\n", 0, _MAX_HEADER_BYTES)
        if end < 0:
            return False
        header = mapping[: end + 1]
        parts = header.rstrip(b"\n").split(b" ")
        key = self._key(create=False)
        if len(parts) != 4 or parts[0] != _MAGIC or key is None:
            return False
        artifact.offset = end + 1
        expected = self._header(key, module_sha256, artifact.data)
        return hmac.compare_digest(header, expected)

    def store(self, module_sha256: str, artifact: bytes) -> None:
        """Write an artifact atomically with mode 0600; a failure only means no cache."""
        if not self._usable(create=True):
            return
        key = self._key(create=True)
        if key is None:
            return
        header = self._header(key, module_sha256, artifact)
        try:
            fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".cwasm")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(header)
                handle.write(artifact)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, self._path(module_sha256))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)

    def discard(self, module_sha256: str) -> None:
        """Remove an entry that failed to load."""
        with contextlib.suppress(OSError):
            os.unlink(self._path(module_sha256))
