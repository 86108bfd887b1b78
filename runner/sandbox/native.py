"""Native tools: a confined subprocess, drained concurrently, killed whole at its deadline.

The runner is multi-threaded (heartbeat, workers, callers), so nothing runs between
fork and exec in Python: subprocess starts `zigclaw-confine` (built from
plugins/confine/confine.c), a small single-threaded helper that puts the tool in
new user, pid and (when the network is denied) network namespaces, sets the
resource limits, applies Landlock and execs the tool's bytes from a sealed memfd,
so what runs is exactly what was hashed and checked against the manifest's pin.

This side only waits: on stdout and stderr (bounded sinks), on the helper's status
pipe (a set-up failure before exec) and on a pidfd (the helper's exit), until the
deadline. At the deadline or on an output cap it kills the helper's process
group; the tool is pid 1 of its pid namespace and dies with the helper
(PR_SET_PDEATHSIG), and the kernel then kills every process left in the namespace,
so no grandchild survives or keeps a pipe open.

Why not a Python Landlock binding (`landlock`, `py-landlock` on PyPI): they
restrict the calling thread, and this process must never restrict itself; doing
it between fork and exec needs `preexec_fn`, which is unsafe with threads. The
helper does it, with namespaces, limits and seccomp, in about 500 lines of C.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidModule, SandboxUnavailable, StreamTooLong, ToolTimeout
from ..policy import Mount
from .pipes import BoundedSink
from .plan import Limits, SandboxResult

HELPER_NAME = "zigclaw-confine"
HELPER_PATH = Path(__file__).resolve().parent.parent / "_builtin" / HELPER_NAME

# Variables a native tool always gets from the host (when set there), plus the manifest's `env`.
BASE_ENV = ("PATH", "HOME", "USER", "LANG")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

# Limits every native tool meets besides the manifest's own.
MAX_PROCESSES = 64
MAX_OPEN_FILES = 256
MAX_FILE_BYTES = 256 * 1024 * 1024

# Read and execute: what exec of a static or dynamic binary, /bin/sh and name lookups need.
# /etc as a whole is left out (it holds /etc/shadow, keys, credentials); missing ones are skipped.
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ca-certificates",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

# After the tool exits, how long stragglers may keep its pipes open (only possible when
# the pid namespace is missing and allow_unconfined let the run go ahead).
EXIT_GRACE_SECONDS = 0.2
_PROBE_TIMEOUT_SECONDS = 10.0
_SETUP_EXIT = 127


@dataclass(frozen=True)
class NativePlan:
    """One decided native run: the tool's bytes, where it may read and write, its limits."""

    tool: str
    module_path: Path
    module_bytes: bytes
    # The workspace first (read-only), then the write paths, each with the identity checked.
    mounts: Sequence[Mount]
    limits: Limits
    env: Mapping[str, str]
    allow_network: bool
    stdin: bytes


@dataclass(frozen=True)
class KernelSupport:
    """What the kernel offers the helper, as `zigclaw-confine --probe` found it."""

    helper: bool
    landlock_abi: int = 0
    userns: bool = False
    netns: bool = False
    pid_max: bool = False


def native_environment(names: Sequence[str], host: Mapping[str, str]) -> dict[str, str]:
    """The tool's whole environment: PATH, HOME, USER, LANG and the manifest's `env`, if set."""
    env = {name: host[name] for name in (*BASE_ENV, *names) if name in host}
    env.setdefault("PATH", DEFAULT_PATH)
    return env


_support: KernelSupport | None = None
_support_lock = threading.Lock()


def kernel_support() -> KernelSupport:
    """Probe once per process what confinement this kernel allows."""
    global _support
    with _support_lock:
        if _support is None:
            _support = _probe()
        return _support


def _probe() -> KernelSupport:
    if not os.access(HELPER_PATH, os.X_OK):
        return KernelSupport(helper=False)
    try:
        proc = subprocess.run(
            [str(HELPER_PATH), "--probe"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT_SECONDS,
            env={},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return KernelSupport(helper=False)
    fields = dict(item.partition("=")[::2] for item in proc.stdout.decode("ascii", "replace").split())
    try:
        return KernelSupport(
            helper=proc.returncode == 0,
            landlock_abi=int(fields.get("landlock", "0")),
            userns=fields.get("userns") == "1",
            netns=fields.get("netns") == "1",
            pid_max=fields.get("pidmax") == "1",
        )
    except ValueError:
        return KernelSupport(helper=False)


def confinement_gaps(support: KernelSupport, *, allow_network: bool, root: bool) -> list[str]:
    """What this run's confinement needs and the kernel lacks; empty means fully confined."""
    if not support.helper:
        return [f"the {HELPER_NAME} helper is missing (rebuild the built-in tools)"]
    gaps = []
    if support.landlock_abi < 1:
        gaps.append("Landlock (Linux >= 5.13 with landlock enabled)")
    if not support.userns:
        gaps.append("unprivileged user and pid namespaces")
        return gaps
    if not allow_network and not support.netns:
        gaps.append("network namespaces")
    if root and not support.pid_max:
        gaps.append("a per-namespace pid_max (Linux >= 6.14), the process cap that binds root")
    return gaps


# --- one run ----------------------------------------------------------------------------------


def run_native(plan: NativePlan, *, best_effort: bool = False) -> SandboxResult:
    """Run the tool confined; `best_effort` (allow_unconfined) skips what the kernel lacks."""
    start = time.monotonic()
    deadline = start + plan.limits.max_runtime_ms / 1000
    overflow: list[str] = []
    sinks = (
        BoundedSink("stdout", plan.limits.max_stdout_bytes, overflow.append),
        BoundedSink("stderr", plan.limits.max_stderr_bytes, overflow.append),
    )
    fds: list[int] = []
    proc: subprocess.Popen[bytes] | None = None
    try:
        try:
            exec_fd = _sealed_memfd(f"zigclaw-{plan.tool}", plan.module_bytes)
            fds.append(exec_fd)
            stdin_fd = _sealed_memfd("zigclaw-request", plan.stdin)
            fds.append(stdin_fd)
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            fds += [status_r, status_w]
        except OSError as exc:
            raise SandboxUnavailable(f"cannot prepare native tool '{plan.tool}': {exc.strerror}") from None
        use_helper = os.access(HELPER_PATH, os.X_OK)
        if use_helper:
            argv = _helper_argv(plan, exec_fd, status_w, best_effort)
            executable = None
        elif best_effort:
            argv, executable = [plan.tool], f"/proc/self/fd/{exec_fd}"
        else:
            raise SandboxUnavailable(f"the {HELPER_NAME} helper is missing from {HELPER_PATH.parent}")
        try:
            proc = subprocess.Popen(
                argv,
                executable=executable,
                stdin=stdin_fd,
                stdout=sinks[0].write_fd,
                stderr=sinks[1].write_fd,
                pass_fds=(exec_fd, status_w),
                env=dict(plan.env),
                cwd=plan.mounts[0].host_path,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxUnavailable(f"cannot start native tool '{plan.tool}': {exc.strerror}") from None
        if not use_helper:
            _limit_after_start(proc.pid, plan.limits)
        for fd in (exec_fd, stdin_fd, status_w):
            os.close(fd)
            fds.remove(fd)
        for sink in sinks:
            sink.close_write_end()
        status, exit_code = _supervise(proc, sinks, status_r, deadline, overflow, plan)
        if status:
            raise _setup_error(status, plan)
        outputs = [sink.finish() for sink in sinks]
        return SandboxResult(
            exit_code=exit_code,
            stdout=outputs[0],
            stderr=outputs[1],
            fuel_used=0,
            duration_ms=(time.monotonic() - start) * 1000,
        )
    finally:
        if proc is not None and proc.returncode is None:
            _kill(proc)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        for sink in sinks:
            sink.finish()


def _helper_argv(plan: NativePlan, exec_fd: int, status_fd: int, best_effort: bool) -> list[str]:
    limits = plan.limits
    argv = [str(HELPER_PATH), "--status-fd", str(status_fd), "--exec-fd", str(exec_fd)]
    argv += ["--as", str(limits.max_memory_bytes)]
    argv += ["--cpu", str(math.ceil(limits.max_runtime_ms / 1000) + 1)]
    argv += ["--fsize", str(MAX_FILE_BYTES), "--nofile", str(MAX_OPEN_FILES), "--nproc", str(MAX_PROCESSES)]
    for mount in plan.mounts:
        argv += ["--ro" if mount.read_only else "--rw", mount.host_path]
        if mount.identity is not None:
            argv += ["--expect", f"{mount.identity[0]}:{mount.identity[1]}"]
    for path in SYSTEM_PATHS:
        argv += ["--sys", path]
    for path in DEVICES:
        argv += ["--dev", path]
    if plan.module_bytes.startswith(b"#!"):
        argv.append("--script")  # the interpreter reads the script through /dev/fd/N
    if not plan.allow_network:
        argv.append("--no-net")
    if best_effort:
        argv.append("--best-effort")
    return [*argv, "--", plan.tool]


def _limit_after_start(pid: int, limits: Limits) -> None:
    """Without the helper (allow_unconfined only): the limits, set just after the start."""
    import resource

    wanted = (
        (resource.RLIMIT_AS, limits.max_memory_bytes),
        (resource.RLIMIT_CPU, math.ceil(limits.max_runtime_ms / 1000) + 1),
        (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
        (resource.RLIMIT_CORE, 0),
    )
    for which, value in wanted:
        with contextlib.suppress(OSError, ValueError):
            resource.prlimit(pid, which, (value, value))


def _sealed_memfd(name: str, data: bytes) -> int:
    """An anonymous file holding `data`, sealed so nothing can change it, at offset 0."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except OSError:
        os.close(fd)
        raise
    return fd


def _supervise(
    proc: subprocess.Popen[bytes],
    sinks: tuple[BoundedSink, BoundedSink],
    status_r: int,
    deadline: float,
    overflow: list[str],
    plan: NativePlan,
) -> tuple[str, int]:
    """Drain until the tool exits and its pipes close; the set-up status and the exit code."""
    pidfd = os.pidfd_open(proc.pid)
    status = bytearray()
    exited_at: float | None = None
    try:
        with selectors.DefaultSelector() as selector:
            for sink in sinks:
                selector.register(sink.fileno(), selectors.EVENT_READ, sink)
            selector.register(status_r, selectors.EVENT_READ, "status")
            selector.register(pidfd, selectors.EVENT_READ, "exit")
            while selector.get_map():
                now = time.monotonic()
                if exited_at is not None and now - exited_at > EXIT_GRACE_SECONDS:
                    break  # stragglers outside the process group hold a pipe open
                if exited_at is None and now >= deadline:
                    _kill(proc)
                    raise ToolTimeout(f"native tool '{plan.tool}' ran past {plan.limits.max_runtime_ms} ms")
                wait = deadline - now if exited_at is None else EXIT_GRACE_SECONDS
                for key, _ in selector.select(wait):
                    what = key.data
                    if isinstance(what, BoundedSink):
                        what.pump()
                        if what.eof:
                            selector.unregister(key.fd)
                    elif what == "status":
                        chunk = os.read(status_r, 4096)
                        status += chunk[: max(0, 4096 - len(status))]
                        if not chunk:
                            selector.unregister(status_r)
                    else:
                        selector.unregister(pidfd)
                        exited_at = time.monotonic()
                        # Anything left in the process group goes now, while the helper's
                        # zombie still holds the group id (so it cannot name another group).
                        _kill_group(proc.pid)
                        proc.wait()
                if overflow:
                    _kill(proc)
                    name = overflow[0]
                    cap = plan.limits.max_stdout_bytes if name == "stdout" else plan.limits.max_stderr_bytes
                    raise StreamTooLong(f"native tool '{plan.tool}' wrote more than {cap} bytes on {name}")
    finally:
        os.close(pidfd)
    if proc.returncode is None:
        proc.wait()
    code = proc.returncode
    exit_code = code if code >= 0 else 128 - code
    text = status.decode("utf-8", "replace").strip() if code == _SETUP_EXIT else ""
    return text, exit_code


def _setup_error(status: str, plan: NativePlan) -> Exception:
    kind, _, message = status.partition("\t")
    if kind == "exec":
        return InvalidModule(
            f"native tool {plan.module_path} cannot be executed: {message}",
            hint="a native tool is an ELF executable for this machine, or a script whose #! "
            "interpreter lies in the system paths; it must fit in max_memory_bytes.",
        )
    hint = (
        "enable Landlock and unprivileged user namespaces, or set [tools.native] allow_unconfined = true "
        "to run native tools with whatever confinement the kernel offers."
    )
    return SandboxUnavailable(f"cannot confine native tool '{plan.tool}': {message}", hint=hint)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError as exc:
        if exc.errno not in (errno.ESRCH, errno.EPERM):
            raise


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the helper's whole process group; the pid namespace goes down with it."""
    _kill_group(proc.pid)
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()


# --- allow_unconfined ----------------------------------------------------------------------


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_unconfined_once(gaps: Sequence[str]) -> None:
    """Say once per process, on stderr, what a native run goes without."""
    text = "; ".join(gaps)
    with _warned_lock:
        if text in _warned:
            return
        _warned.add(text)
    sys.stderr.write(
        "warning: [tools.native] allow_unconfined = true: native tools run without " + text + "\n"
    )
    sys.stderr.flush()
