"""`zigclaw tools add`: install a tool folder, or a `.tar.gz` of one, into a tools folder.

The source is copied (or unpacked) into a private staging folder inside the
destination, validated there with every check of `tools validate`, and only the
bytes that passed are installed: the module first, then the manifest with the
module's `sha256` pin written into it, each by an atomic rename. An archive may
hold only regular files and folders with plain relative names; anything else
refuses the whole archive before a byte of it is used.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .errors import InvalidArchive, InvalidManifest, ToolExists, ToolNotFound, ZigclawError
from .files import read_untrusted_file
from .manifest import MAX_MANIFEST_BYTES, parse_manifest
from .modulefile import MAX_MODULE_BYTES
from .registry import manifest_stems
from .toolcheck import Report, find_manifest, manifest_problem, validate

MAX_ARCHIVE_MEMBERS = 1000
MAX_ARCHIVE_BYTES = MAX_MODULE_BYTES + 64 * 1024 * 1024
MAX_MEMBER_NAME = 1024
STAGE_PREFIX = ".zigclaw-add-"


@dataclass(frozen=True)
class Installed:
    """What `tools add` installed, and the report of the checks it passed."""

    tool: str
    manifest_path: Path
    module_path: Path
    sha256: str
    replaced: bool
    report: Report


def add_tool(
    source: Path, dest: Path, *, force: bool, builtin_names: frozenset[str], allow_shadow_builtin: bool
) -> Installed:
    """Validate and install the tool at `source` (folder, manifest file or archive) into `dest`."""
    if not source.exists():
        raise ToolNotFound(f"{source} does not exist")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=dest))
    except OSError as exc:
        raise InvalidManifest(f"cannot create a staging folder in {dest}: {exc.strerror}") from None
    try:
        if source.is_file() and source.suffix != ".toml":
            unpack_archive(source, stage)
            folder, tool = find_manifest(_archive_root(stage))
        else:
            origin, tool = find_manifest(source)
            folder = stage
            _copy_tool(origin, tool, stage)
        report = validate(folder, tool)
        if not report.ok or report.manifest is None or report.module is None:
            raise manifest_problem(report)
        installed = _install(report, dest, force, builtin_names, allow_shadow_builtin)
        report.folder = source  # the staging folder is gone; report where the tool came from
        return installed
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _copy_tool(origin: Path, tool: str, stage: Path) -> None:
    """Copy the manifest and its module (regular files, not through symlinks) into the stage."""
    names = [f"{tool}.toml"]
    try:
        data, _ = read_untrusted_file(origin / names[0], MAX_MANIFEST_BYTES)
        manifest = parse_manifest(data, stem=tool, source=str(origin / names[0]))
    except (FileNotFoundError, ValueError) as exc:
        raise InvalidManifest(f"{origin / names[0]}: {exc}") from None
    _write_new(stage / names[0], data)
    try:
        module, _ = read_untrusted_file(origin / manifest.module_file, MAX_MODULE_BYTES)
    except FileNotFoundError:
        return  # validation reports the missing module
    except ValueError as exc:
        raise InvalidManifest(f"module {origin / manifest.module_file} {exc}") from None
    _write_new(stage / manifest.module_file, module)


def _install(
    report: Report, dest: Path, force: bool, builtin_names: frozenset[str], allow_shadow_builtin: bool
) -> Installed:
    manifest, module = report.manifest, report.module
    assert manifest is not None and module is not None
    tool = manifest.tool_name
    module_name = manifest.module_file
    if tool in builtin_names and not allow_shadow_builtin:
        raise ToolExists(
            f"'{tool}' is a built-in tool; an installed tool of that name would never run",
            hint="rename the tool, or set [tools] allow_shadow_builtin = true to replace the built-in.",
        )
    if module_name.endswith(".toml") or module_name.startswith("."):
        raise InvalidManifest(f"module '{module_name}' cannot be installed: it would read as a manifest")
    for other in manifest_stems(dest):
        if other != tool and _module_of(dest, other) == module_name:
            raise ToolExists(f"module '{module_name}' belongs to the installed tool '{other}'")
    manifest_path = dest / f"{tool}.toml"
    module_path = dest / module_name
    replaced = os.path.lexists(manifest_path) or os.path.lexists(module_path)
    if replaced and not force:
        raise ToolExists(f"'{tool}' is already installed in {dest}")
    text = (report.folder / f"{tool}.toml").read_bytes()
    pinned = pin_manifest(text, module.sha256, stem=tool)
    # The module first: until the new manifest lands, the old pin refuses the new module.
    _replace(dest, module_name, module.data)
    _replace(dest, f"{tool}.toml", pinned)
    return Installed(tool, manifest_path, module_path, module.sha256, replaced, report)


def _module_of(folder: Path, tool: str) -> str | None:
    try:
        data, _ = read_untrusted_file(folder / f"{tool}.toml", MAX_MANIFEST_BYTES)
        return parse_manifest(data, stem=tool, source=tool).module_file
    except (FileNotFoundError, ValueError, ZigclawError):
        return None


def pin_manifest(text: bytes, sha256: str, *, stem: str) -> bytes:
    """The manifest with `sha256 = "<digest>"` as its first key (kept as is when already pinned)."""
    manifest = parse_manifest(text, stem=stem, source=f"{stem}.toml")
    if manifest.sha256 == sha256:
        return text
    if manifest.sha256 is not None:
        raise InvalidManifest(f"{stem}.toml pins {manifest.sha256}, not the module's {sha256}")
    # A top-level key may open any TOML document, whatever follows it.
    pinned = f'sha256 = "{sha256}"  # written by zigclaw tools add\n'.encode() + text
    if parse_manifest(pinned, stem=stem, source=f"{stem}.toml").sha256 != sha256:
        raise InvalidManifest(f"{stem}.toml: the pin could not be written")
    return pinned


def _replace(dest: Path, name: str, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(prefix=STAGE_PREFIX, dir=dest)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, dest / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


# --- archives ---------------------------------------------------------------------------


def unpack_archive(archive: Path, stage: Path) -> None:
    """Unpack a tar (gzip, bzip2, xz or plain) into the empty `stage`, refusing anything but
    regular files and folders with plain relative names, and bounding count and size."""
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            count = total = 0
            for member in tar:
                count += 1
                if count > MAX_ARCHIVE_MEMBERS:
                    raise InvalidArchive(f"{archive} holds more than {MAX_ARCHIVE_MEMBERS} entries")
                parts = _member_parts(archive, member)
                if member.isdir():
                    if parts:
                        os.makedirs(stage.joinpath(*parts), mode=0o755, exist_ok=True)
                    continue
                if not member.isfile():
                    raise InvalidArchive(
                        f"{archive}: '{member.name}' is {_kind(member)}; only files are allowed"
                    )
                if not parts:
                    raise InvalidArchive(f"{archive}: an entry has an empty name")
                total += member.size
                if member.size > MAX_MODULE_BYTES or total > MAX_ARCHIVE_BYTES:
                    raise InvalidArchive(f"{archive} unpacks to more than {MAX_ARCHIVE_BYTES} bytes")
                _unpack_file(tar, member, stage.joinpath(*parts), archive)
    except ZigclawError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError) as exc:
        # ValueError covers decoders' complaints about odd headers (numbers, encodings).
        reason = str(exc) or type(exc).__name__
        raise InvalidArchive(f"{archive} is truncated or not a tar archive: {reason}") from None


def _member_parts(archive: Path, member: tarfile.TarInfo) -> tuple[str, ...]:
    name = member.name
    if "\0" in name or "\\" in name or len(name) > MAX_MEMBER_NAME:
        raise InvalidArchive(f"{archive}: entry name {name[:80]!r} is not a plain path")
    if name.startswith("/"):
        raise InvalidArchive(f"{archive}: '{name}' is an absolute path")
    parts = tuple(part for part in PurePosixPath(name).parts if part != ".")
    if ".." in parts:
        raise InvalidArchive(f"{archive}: '{name}' climbs out with '..'")
    return parts


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return "not a regular file"


def _unpack_file(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path, archive: Path) -> None:
    source = tar.extractfile(member)
    if source is None:
        raise InvalidArchive(f"{archive}: '{member.name}' cannot be read")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise InvalidArchive(f"{archive} holds '{member.name}' twice") from None
    written = 0
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > member.size:
                raise InvalidArchive(f"{archive}: '{member.name}' is longer than its header says")
            out.write(chunk)
    if written != member.size:
        raise InvalidArchive(f"{archive} is truncated inside '{member.name}'")


def _archive_root(stage: Path) -> Path:
    """Where the tool is in an unpacked archive: the top level, or its only folder."""
    entries = [entry for entry in stage.iterdir()]
    if not manifest_stems(stage) and len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return stage
