"""`zigclaw wasi run`: any WASI command module under the tool sandbox, `wasmtime run` style.

This module decides the run (mounts from `--dir`, variables from `--env`, limits)
and maps how it ended to a process exit code. A guest's own exit code is always
in 0..125 (wasmtime refuses larger ones), so every code the runner uses for
itself is 126 or above and can never be mistaken for the guest's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import (
    InvalidModule,
    SandboxUnavailable,
    StreamTooLong,
    ToolMemoryLimit,
    ToolOutOfFuel,
    ToolTimeout,
    ToolTrap,
    ZigclawError,
)
from .files import read_untrusted_file
from .manifest import FUEL_PER_MS, MIB
from .modulefile import MAX_MODULE_BYTES
from .policy import Mount

DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_MEMORY = 256 * MIB
DEFAULT_MAX_STDOUT = 64 * MIB
DEFAULT_MAX_STDERR = 1 * MIB
MAX_STREAM_BYTES = 1024 * MIB
MAX_TIMEOUT_MS = 600_000

# Exit codes of a run the runner ended, or could not start.
EXIT_NOT_STARTED = 126
EXIT_CODES: dict[type[ZigclawError], int] = {
    ToolTimeout: 200,
    ToolOutOfFuel: 201,
    ToolMemoryLimit: 202,
    StreamTooLong: 203,
    ToolTrap: 204,
}
READ_ONLY_FLAG = "ro"
# The flag to raise, where a tool's error names a manifest key.
HINTS: dict[type[ZigclawError], str] = {
    ToolTimeout: "raise --timeout (milliseconds) if the program needs longer.",
    ToolOutOfFuel: "raise --fuel if the program needs more.",
    ToolMemoryLimit: "raise --max-memory (bytes) if the program needs more.",
    StreamTooLong: "raise --max-stdout / --max-stderr (bytes) if the output is legitimate.",
}


class UsageProblem(ValueError):
    """A malformed `--dir` or `--env` value (a usage error); `option` names the flag."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def exit_code_for(error: ZigclawError) -> int:
    """The process exit code for a run that ended in `error`."""
    return EXIT_CODES.get(type(error), EXIT_NOT_STARTED)


@dataclass(frozen=True)
class DirSpec:
    """One `--dir HOST[::GUEST[::ro]]`."""

    host: str
    guest: str
    read_only: bool


def parse_dir(spec: str) -> DirSpec:
    """`HOST`, `HOST::GUEST` or `HOST::GUEST::ro`; ValueError saying what is wrong."""
    parts = spec.split("::")
    if len(parts) > 3 or not parts[0]:
        raise ValueError(f"'{spec}' is not HOST[::GUEST[::ro]]")
    host = parts[0]
    guest = parts[1] if len(parts) > 1 else host
    if not guest:
        raise ValueError(f"'{spec}' has an empty guest path")
    read_only = False
    if len(parts) == 3:
        if parts[2] != READ_ONLY_FLAG:
            raise ValueError(f"'{spec}': the only flag after the guest path is '{READ_ONLY_FLAG}'")
        read_only = True
    if "\0" in spec:
        raise ValueError("a path cannot hold a NUL character")
    return DirSpec(host, guest, read_only)


def parse_env(spec: str, host_env: Mapping[str, str]) -> tuple[str, str]:
    """`NAME=VALUE`, or `NAME` for the host's value; ValueError saying what is wrong."""
    name, sep, value = spec.partition("=")
    if not name:
        raise ValueError(f"'{spec}' has no variable name (NAME or NAME=VALUE)")
    if "\0" in spec:
        raise ValueError("a variable cannot hold a NUL character")
    if not sep:
        if name not in host_env:
            raise ValueError(f"'{name}' is not set on the host; pass NAME=VALUE")
        value = host_env[name]
    return name, value


def plan_mounts(specs: Sequence[DirSpec], cache_dir: Path) -> list[Mount]:
    """Mounts for the `--dir` specs: existing folders, by real path and identity, each guest path once.

    A writable mount may not contain the module cache: a guest could plant code there.
    """
    mounts: list[Mount] = []
    guests: set[str] = set()
    cache = os.path.realpath(cache_dir)
    for spec in specs:
        real = os.path.realpath(spec.host)
        try:
            info = os.stat(real)
        except OSError as exc:
            raise SandboxUnavailable(
                f"--dir {spec.host}: {exc.strerror or exc}", hint="give an existing host folder."
            ) from None
        if not os.path.isdir(real):
            raise SandboxUnavailable(f"--dir {spec.host}: not a folder", hint="give an existing host folder.")
        if spec.guest in guests:
            raise SandboxUnavailable(f"--dir: guest path {spec.guest} is mapped twice")
        guests.add(spec.guest)
        if not spec.read_only and (cache == real or cache.startswith(real.rstrip("/") + "/")):
            raise SandboxUnavailable(
                f"--dir {spec.host}: a writable mount may not contain the module cache ({cache})",
                hint="mount it read-only (HOST::GUEST::ro) or mount a narrower folder.",
            )
        mounts.append(Mount(real, spec.guest, spec.read_only, (info.st_dev, info.st_ino)))
    return mounts


@dataclass(frozen=True)
class CommandLimits:
    """The limits the user asked for; fuel None: derived from the timeout."""

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    fuel: int | None = None
    max_memory_bytes: int = DEFAULT_MAX_MEMORY
    max_stdout_bytes: int = DEFAULT_MAX_STDOUT
    max_stderr_bytes: int = DEFAULT_MAX_STDERR


def run_module(
    module: str,
    args: Sequence[str],
    *,
    dirs: Sequence[str] = (),
    env: Sequence[str] = (),
    limits: CommandLimits = CommandLimits(),
    stdout_fd: int = 1,
    stderr_fd: int = 2,
    host_env: Mapping[str, str] | None = None,
) -> int:
    """Run a WASI command module; return its exit code or raise the named error that ended it.

    Malformed `dirs` or `env` specs raise UsageProblem.
    """
    from .sandbox.cache import default_cache_dir
    from .sandbox.command import CommandPlan, run_command
    from .sandbox.plan import Limits

    try:
        specs = [parse_dir(spec) for spec in dirs]
    except ValueError as exc:
        raise UsageProblem("--dir", str(exc)) from None
    try:
        variables = [parse_env(spec, os.environ if host_env is None else host_env) for spec in env]
    except ValueError as exc:
        raise UsageProblem("--env", str(exc)) from None
    path = Path(module)
    try:
        # The user names this file on the command line: a symlink to it is fine.
        data, _ = read_untrusted_file(path, MAX_MODULE_BYTES, follow_symlinks=True)
    except FileNotFoundError:
        raise InvalidModule(f"module {module} does not exist") from None
    except ValueError as exc:
        raise InvalidModule(f"module {module} {exc}") from None
    import hashlib

    plan = CommandPlan(
        module_path=path,
        module_bytes=data,
        module_sha256=hashlib.sha256(data).hexdigest(),
        argv=(path.name, *args),
        env=tuple(variables),
        mounts=tuple(plan_mounts(specs, default_cache_dir())),
        limits=Limits(
            max_runtime_ms=limits.timeout_ms,
            max_fuel=limits.fuel if limits.fuel is not None else limits.timeout_ms * FUEL_PER_MS,
            max_memory_bytes=limits.max_memory_bytes,
            max_stdout_bytes=limits.max_stdout_bytes,
            max_stderr_bytes=limits.max_stderr_bytes,
        ),
        stdout_fd=stdout_fd,
        stderr_fd=stderr_fd,
    )
    try:
        return run_command(plan).exit_code
    except ZigclawError as exc:
        exc.hint = HINTS.get(type(exc), exc.hint)
        raise
