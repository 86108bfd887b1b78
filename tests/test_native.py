"""Native tools (runner/sandbox/native.py and the zigclaw-confine helper): the built-ins and hostile tools.

The tests run as whatever user runs pytest. As root, "cannot read X" must come from
Landlock and the namespaces, not from file permissions: every secret planted here is
world-readable, so only the sandbox can stop the tool from reading it.
"""

from __future__ import annotations

import errno
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.errors import (
    InvalidModule,
    SandboxUnavailable,
    StreamTooLong,
    ToolFailed,
    ToolNetworkNotAllowed,
    ToolTimeout,
)
from runner.sandbox import native

NATIVE_SOURCES = Path(__file__).parent / "hostile" / "native"
REPO = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def _require_confinement(*, network: bool = False) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("native confinement is Linux only")
    support = native.kernel_support()
    gaps = native.confinement_gaps(support, allow_network=network, root=os.geteuid() == 0)
    if gaps:
        pytest.skip("this kernel lacks what native confinement needs: " + "; ".join(gaps))


@pytest.fixture(scope="session")
def native_binary(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], bytes]:
    """Build tests/hostile/native/<name>.c into a static x86_64/aarch64 Linux binary, once."""
    out_dir = tmp_path_factory.mktemp("native")
    built: dict[str, bytes] = {}

    def build(name: str) -> bytes:
        if name not in built:
            import platform

            arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine())
            out = out_dir / name
            env = dict(os.environ)
            env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(REPO / "build" / "zig-cache"))
            command = [
                sys.executable,
                "-m",
                "ziglang",
                "cc",
                "-target",
                f"{arch}-linux-musl",
                "-Os",
                "-static",
            ]
            subprocess.run(
                [*command, "-o", str(out), str(NATIVE_SOURCES / f"{name}.c")],
                check=True,
                env=env,
                cwd=out_dir,
            )
            built[name] = out.read_bytes()
        return built[name]

    return build


def add_native(toolbox: Any, name: str, binary: bytes | None, *, mode: int = 0o755, **fields: Any) -> Path:
    """A native external tool `<name>` with `binary` as its executable (none written when None)."""
    fields.setdefault("max_runtime_ms", 10000)
    toolbox.add_tool(name, None, native=True, **fields)
    path: Path = toolbox.external / fields.get("module", name)
    if binary is not None:
        path.write_bytes(binary)
        path.chmod(mode)
    return path


@pytest.fixture
def probe(toolbox: Any, native_binary: Callable[[str], bytes]) -> Callable[..., str]:
    """Run the probe tool with one operation; returns its `result` string."""
    _require_confinement()

    def run(
        op: str, arg: str = "", *, network: bool = False, write_paths: list[str] | None = None, **fields: Any
    ) -> str:
        add_native(toolbox, "probe", native_binary("probe"), requires_network=network, **fields)
        toolbox.write_config(["probe"], write_paths=write_paths, allow_network=network)
        result = toolbox.runner().run("probe", {"op": op, "arg": arg})
        assert result.ok, result
        return str(result.data["result"])

    return run


@pytest.fixture
def loopback_server() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that accepts and closes; yields its port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def _errno_of(result: str) -> int:
    kind, _, value = result.partition(" ")
    assert kind == "err", f"expected the operation to fail, got {result!r}"
    return int(value)


def _leftovers(name: str) -> list[int]:
    """Host pids of live processes running the memfd of tool `name`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry}/exe")
            with open(f"/proc/{entry}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"memfd:zigclaw-{name}" in exe and state != "Z":
            found.append(int(entry))
    return found


def _wait_gone(name: str, seconds: float = 10.0) -> list[int]:
    end = time.monotonic() + seconds
    while (left := _leftovers(name)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


# --- the built-in native tools ------------------------------------------------------------


def test_shell_exec_runs_echo(toolbox: Any) -> None:
    _require_confinement()
    toolbox.write_config(["shell_exec"])
    result = toolbox.runner().run("shell_exec", {"command": "echo hi"})
    assert result.ok is True
    assert any(d.category == "tool.sandbox" and "confined" in d.reason for d in result.decisions)
    assert result.data["exit_code"] == 0
    assert result.data["stdout"] == "hi\n"
    assert result.data["stderr"] == ""


def test_shell_exec_runs_in_the_workspace_and_reports_failure(toolbox: Any) -> None:
    _require_confinement()
    (toolbox.workspace / "marker.txt").write_text("x")
    toolbox.write_config(["shell_exec"])
    runner = toolbox.runner()
    listed = runner.run("shell_exec", {"command": "ls"})
    assert listed.data["stdout"].split() == ["marker.txt"]
    failed = runner.run("shell_exec", {"command": "ls does-not-exist"})
    assert failed.ok is False
    assert failed.data["exit_code"] != 0
    assert "does-not-exist" in failed.data["stderr"]


@pytest.mark.parametrize(
    "command", ["echo hi; cat /etc/passwd", "echo $HOME", "echo `id`", "a|b", "x > y", "é"]
)
def test_shell_exec_rejects_shell_syntax(toolbox: Any, command: str) -> None:
    from runner.errors import InvalidToolArgs

    toolbox.write_config(["shell_exec"])
    with pytest.raises(InvalidToolArgs):
        toolbox.runner().run("shell_exec", {"command": command})


def test_shell_exec_cannot_read_shadow(toolbox: Any) -> None:
    _require_confinement()
    toolbox.write_config(["shell_exec"])
    result = toolbox.runner().run("shell_exec", {"command": "cat /etc/shadow"})
    assert result.ok is False
    assert "Permission denied" in result.data["stderr"]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"moved")
            return
        self._answer(b"got " + self.path.encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._answer(b"posted " + self.rfile.read(length))

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_fetch_get_and_post_when_network_allowed(toolbox: Any, http_server: str) -> None:
    _require_confinement(network=True)
    toolbox.write_config(["http_fetch"], allow_network=True)
    runner = toolbox.runner()
    got = runner.run("http_fetch", {"url": f"{http_server}/hello"})
    assert got.ok is True
    assert got.data == {
        "status_code": 200,
        "body": "got /hello",
        "url": f"{http_server}/hello",
        "method": "GET",
    }
    posted = runner.run("http_fetch", {"url": f"{http_server}/p", "method": "POST", "body": "payload"})
    assert posted.data["status_code"] == 200
    assert posted.data["body"] == "posted payload"
    assert posted.data["method"] == "POST"
    moved = runner.run("http_fetch", {"url": f"{http_server}/moved"})
    assert (moved.data["status_code"], moved.data["body"]) == (302, "moved")  # returned, not followed


def test_http_fetch_denied_without_network(toolbox: Any, http_server: str) -> None:
    toolbox.write_config(["http_fetch"], allow_network=False)
    with pytest.raises(ToolNetworkNotAllowed):
        toolbox.runner().run("http_fetch", {"url": f"{http_server}/hello"})


def test_builtin_native_tools_are_registered() -> None:
    from runner.registry import load_registry

    registry = load_registry()
    assert registry["shell_exec"].native is True
    assert registry["shell_exec"].requires_network is False
    assert registry["http_fetch"].native is True
    assert registry["http_fetch"].requires_network is True


# --- hostile tools: (operation, argument, what must hold) --------------------------------


def test_reading_shadow_fails_inside_the_tool(probe: Callable[..., str]) -> None:
    assert _errno_of(probe("read", "/etc/shadow")) in (errno.EACCES, errno.EPERM)


def test_reading_a_planted_secret_outside_the_workspace_fails(
    probe: Callable[..., str], toolbox: Any
) -> None:
    secret = toolbox.root / "secret.txt"
    secret.write_text("s3cret")
    secret.chmod(0o644)  # readable by anyone: only the sandbox can refuse it
    assert _errno_of(probe("read", str(secret))) == errno.EACCES


def test_reading_inside_the_workspace_works(probe: Callable[..., str], toolbox: Any) -> None:
    (toolbox.workspace / "data.txt").write_text("12345")
    assert probe("read", str(toolbox.workspace / "data.txt")) == "ok 5"
    assert probe("read", "data.txt") == "ok 5"  # cwd is the workspace root


def test_writing_into_the_read_only_workspace_fails(probe: Callable[..., str], toolbox: Any) -> None:
    target = toolbox.workspace / "planted.txt"
    assert _errno_of(probe("write", str(target))) == errno.EACCES
    assert not target.exists()


def test_writing_into_a_write_path_works(probe: Callable[..., str], toolbox: Any) -> None:
    out = toolbox.root / "out"
    out.mkdir()
    assert probe("write", str(out / "result.txt"), write_paths=[str(out)]) == "ok 8"
    assert (out / "result.txt").read_text() == "written\n"


def test_host_secret_in_the_environment_is_not_visible(
    probe: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZIGCLAW_TEST_SECRET", "hunter2")
    monkeypatch.setenv("ZIGCLAW_TEST_PASSED", "visible")
    assert probe("env", "ZIGCLAW_TEST_SECRET") == "unset"
    assert probe("env", "ZIGCLAW_TEST_PASSED", env=["ZIGCLAW_TEST_PASSED"]) == "visible"


def test_environment_holds_only_the_base_variables_and_the_manifest_env(
    probe: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PATH", "HOME", "USER", "LANG", "ZIGCLAW_TEST_PASSED"):
        monkeypatch.setenv(name, "x")
    assert probe("count_env", env=["ZIGCLAW_TEST_PASSED"]) == "ok 5"


def test_connecting_to_loopback_fails_when_network_is_denied(
    probe: Callable[..., str], loopback_server: int
) -> None:
    assert _errno_of(probe("connect", str(loopback_server))) in (
        errno.EACCES,
        errno.ENETUNREACH,
        errno.ECONNREFUSED,
    )
    # UDP is not covered by Landlock's network rules: the network namespace stops it.
    assert _errno_of(probe("udp", str(loopback_server))) == errno.ENETUNREACH


def test_connecting_to_loopback_works_when_network_is_allowed(
    probe: Callable[..., str], loopback_server: int
) -> None:
    _require_confinement(network=True)
    assert probe("connect", str(loopback_server), network=True) == "ok 0"


def test_process_count_is_capped(probe: Callable[..., str]) -> None:
    # Non-root: RLIMIT_NPROC (64) in the tool's own user namespace. Root ignores RLIMIT_NPROC,
    # so there the pid namespace's pid_max (the kernel minimum, 301) is the cap.
    count = int(probe("forkcount").split()[1])
    cap = native.MAX_PROCESSES if os.geteuid() != 0 else 301
    assert 0 < count <= cap
    assert _wait_gone("probe") == []


def test_fork_bomb_is_stopped_and_nothing_survives(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "bomb", native_binary("probe"), max_runtime_ms=1500)
    toolbox.write_config(["bomb"])
    with pytest.raises(ToolTimeout):
        toolbox.runner().run("bomb", {"op": "forkbomb"})
    assert _wait_gone("bomb") == []


def test_orphan_holding_stdout_does_not_hang_the_run_or_survive(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    out = toolbox.root / "out"
    out.mkdir()
    add_native(toolbox, "orphan", native_binary("probe"), max_runtime_ms=30000)
    toolbox.write_config(["orphan"], write_paths=[str(out)])
    result = toolbox.runner().run("orphan", {"op": "orphan", "arg": str(out / "survivor.txt")})
    assert result.data == {"result": "ok 0"}
    assert result.duration_ms < 30000  # it did not wait for the orphan's 60 s
    assert _wait_gone("orphan") == []
    time.sleep(1.5)  # the orphan would have written its file after 1 s
    assert not (out / "survivor.txt").exists()


def test_tool_ignoring_sigterm_is_killed_at_the_deadline(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "stubborn", native_binary("probe"), max_runtime_ms=500)
    toolbox.write_config(["stubborn"])
    with pytest.raises(ToolTimeout):
        toolbox.runner().run("stubborn", {"op": "ignore_term"})
    assert _wait_gone("stubborn") == []


def test_ten_megabytes_on_stdout_is_stream_too_long(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "loud", native_binary("probe"), max_stdout_bytes=65536)
    toolbox.write_config(["loud"])
    with pytest.raises(StreamTooLong, match="stdout"):
        toolbox.runner().run("loud", {"op": "stdout", "arg": str(10 * MIB)})
    assert _wait_gone("loud") == []


def test_ten_megabytes_on_stderr_with_quiet_stdout(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "noisy", native_binary("probe"), max_stderr_bytes=65536)
    toolbox.write_config(["noisy"])
    with pytest.raises(StreamTooLong, match="stderr"):
        toolbox.runner().run("noisy", {"op": "stderr", "arg": str(10 * MIB)})


def test_ten_megabytes_under_a_large_cap_is_read_without_deadlock(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "big", native_binary("probe"), max_stderr_bytes=16 * MIB)
    toolbox.write_config(["big"])
    result = toolbox.runner().run("big", {"op": "stderr", "arg": str(10 * MIB)})
    assert result.data == {"result": "flooded"}


def test_address_space_is_capped(probe: Callable[..., str]) -> None:
    assert _errno_of(probe("alloc", str(256 * MIB), max_memory_bytes=64 * MIB)) == errno.ENOMEM
    assert probe("alloc", str(8 * MIB), max_memory_bytes=64 * MIB) == f"ok {8 * MIB}"


def test_tool_is_pid_one_of_its_own_pid_namespace(probe: Callable[..., str]) -> None:
    assert probe("pid") == "ok 1"


def test_nonzero_exit_without_response_is_tool_failed(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "failing", native_binary("probe"))
    toolbox.write_config(["failing"])
    with pytest.raises(ToolFailed, match=r"code 3.*probe failed on purpose") as caught:
        toolbox.runner().run("failing", {"op": "fail"})
    assert caught.value.details["exit_code"] == 3


def test_binary_that_is_not_executable_is_refused(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    add_native(toolbox, "noexec", native_binary("probe"), mode=0o644)
    toolbox.write_config(["noexec"])
    with pytest.raises(InvalidModule, match="not executable"):
        toolbox.runner().run("noexec", {"op": "pid"})


def test_file_that_is_not_a_binary_is_refused(toolbox: Any) -> None:
    _require_confinement()
    add_native(toolbox, "garbage", b"\x00\x01 not an executable at all")
    toolbox.write_config(["garbage"])
    with pytest.raises(InvalidModule, match="cannot be executed"):
        toolbox.runner().run("garbage", {})


def test_missing_binary_is_refused(toolbox: Any) -> None:
    add_native(toolbox, "ghost", None)
    toolbox.write_config(["ghost"])
    with pytest.raises(InvalidModule, match="does not exist"):
        toolbox.runner().run("ghost", {})


def test_symlink_named_like_the_tool_pointing_outside_is_refused(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    outside = toolbox.root / "elsewhere"
    outside.write_bytes(native_binary("probe"))
    outside.chmod(0o755)
    add_native(toolbox, "linked", None)
    (toolbox.external / "linked").symlink_to(outside)
    toolbox.write_config(["linked"])
    with pytest.raises(InvalidModule, match="symbolic link"):
        toolbox.runner().run("linked", {"op": "pid"})


def test_what_runs_is_what_was_pinned(toolbox: Any, native_binary: Callable[[str], bytes]) -> None:
    from runner.errors import ToolIntegrityMismatch

    data = native_binary("probe")
    add_native(toolbox, "pinned", data, sha256="0" * 64)
    toolbox.write_config(["pinned"])
    with pytest.raises(ToolIntegrityMismatch):
        toolbox.runner().run("pinned", {"op": "pid"})


# --- when the kernel lacks a feature ---------------------------------------------------------


def _without(monkeypatch: pytest.MonkeyPatch, **missing: Any) -> None:
    support = native.KernelSupport(helper=True, landlock_abi=7, userns=True, netns=True, pid_max=True)
    monkeypatch.setattr(
        native, "kernel_support", lambda: native.KernelSupport(**{**support.__dict__, **missing})
    )


def test_missing_landlock_is_sandbox_unavailable(
    toolbox: Any, native_binary: Callable[[str], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, landlock_abi=0)
    add_native(toolbox, "probe", native_binary("probe"))
    toolbox.write_config(["probe"])
    with pytest.raises(SandboxUnavailable, match="Landlock") as caught:
        toolbox.runner().run("probe", {"op": "pid"})
    assert "allow_unconfined" in (caught.value.hint or "")


def test_missing_namespaces_is_sandbox_unavailable(
    toolbox: Any, native_binary: Callable[[str], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, userns=False)
    add_native(toolbox, "probe", native_binary("probe"))
    toolbox.write_config(["probe"])
    with pytest.raises(SandboxUnavailable, match="namespaces"):
        toolbox.runner().run("probe", {"op": "pid"})


def test_allow_unconfined_runs_and_warns_once(
    toolbox: Any,
    native_binary: Callable[[str], bytes],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    _require_confinement()
    _without(monkeypatch, landlock_abi=0)
    monkeypatch.setattr(native, "_warned", set())
    add_native(toolbox, "probe", native_binary("probe"))
    toolbox.write_config(["probe"], extra="\n[tools.native]\nallow_unconfined = true\n")
    runner = toolbox.runner()
    assert runner.run("probe", {"op": "pid"}).data == {"result": "ok 1"}
    assert runner.run("probe", {"op": "pid"}).data == {"result": "ok 1"}
    err = capfd.readouterr().err
    assert err.count("warning: [tools.native] allow_unconfined") == 1
    assert "Landlock" in err


def test_missing_helper_is_sandbox_unavailable(toolbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "kernel_support", lambda: native.KernelSupport(helper=False))
    toolbox.write_config(["shell_exec"])
    with pytest.raises(SandboxUnavailable, match="zigclaw-confine"):
        toolbox.runner().run("shell_exec", {"command": "echo hi"})


def test_cli_reports_native_errors_without_traceback(toolbox: Any) -> None:
    add_native(toolbox, "noexec", b"\x7fELF", mode=0o644)
    config = toolbox.write_config(["noexec"])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "tools",
            "run",
            "noexec",
            "--config",
            str(config),
            "--args",
            "{}",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=toolbox.root,
    )
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"] == "InvalidModule"
    assert "Traceback" not in proc.stderr


# --- as an unprivileged user -----------------------------------------------------------------


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temp folder every user can enter (pytest's own is private to its user)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="zigclaw-native-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_confinement_holds_for_an_unprivileged_user(
    shared_tmp: Path, native_binary: Callable[[str], bytes], loopback_server: int
) -> None:
    """The helper, run as `nobody`: namespaces, RLIMIT_NPROC and Landlock all work without root."""
    _require_confinement()
    if os.geteuid() != 0:
        user_prefix: list[str] = []  # already unprivileged
    elif shutil.which("setpriv"):
        user_prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    else:
        pytest.skip("running as root without setpriv: cannot switch to an unprivileged user")
    workspace = shared_tmp / "ws"
    workspace.mkdir()
    secret = shared_tmp / "secret.txt"
    secret.write_text("s3cret")
    secret.chmod(0o644)

    def run(op: str, arg: str = "") -> str:
        request = json.dumps(
            {
                "protocol_version": 0,
                "request_id": "a" * 32,
                "tool": "probe",
                "args_json": json.dumps({"op": op, "arg": arg}, separators=(",", ":")),
                "cwd": str(workspace),
                "mounts": [],
            },
            separators=(",", ":"),
        ).encode()
        exec_fd = native._sealed_memfd("zigclaw-probe", native_binary("probe"))
        status_r, status_w = os.pipe()
        try:
            argv = [
                *user_prefix,
                str(native.HELPER_PATH),
                "--status-fd",
                str(status_w),
                "--exec-fd",
                str(exec_fd),
                "--nproc",
                str(native.MAX_PROCESSES),
                "--ro",
                str(workspace),
                "--no-net",
                "--",
                "probe",
            ]
            proc = subprocess.run(
                argv,
                input=request,
                capture_output=True,
                pass_fds=(exec_fd, status_w),
                timeout=60,
                env={},
                cwd=workspace,
            )
        finally:
            os.close(exec_fd)
            os.close(status_w)
        status = os.read(status_r, 4096)
        os.close(status_r)
        assert status == b"", status
        assert proc.returncode == 0, proc.stderr
        return str(json.loads(json.loads(proc.stdout)["data_json"])["result"])

    assert run("pid") == "ok 1"
    assert _errno_of(run("read", str(secret))) == errno.EACCES
    assert _errno_of(run("connect", str(loopback_server))) in (errno.EACCES, errno.ENETUNREACH)
    assert 0 < int(run("forkcount").split()[1]) <= native.MAX_PROCESSES


def test_a_mount_swapped_after_its_check_is_not_mapped(
    tmp_path: Path, native_binary: Callable[[str], bytes]
) -> None:
    """The helper compares each folder it opens with the identity the runner checked."""
    _require_confinement()
    from runner.policy import Mount
    from runner.sandbox.plan import Limits

    workspace = tmp_path / "ws"
    workspace.mkdir()
    other = os.stat(tmp_path)
    plan = native.NativePlan(
        tool="probe",
        module_path=tmp_path / "probe",
        module_bytes=native_binary("probe"),
        mounts=(Mount(str(workspace), "/workspace", True, (other.st_dev, other.st_ino)),),
        limits=Limits(
            max_runtime_ms=5000,
            max_fuel=0,
            max_memory_bytes=64 * MIB,
            max_stdout_bytes=65536,
            max_stderr_bytes=65536,
        ),
        env={},
        allow_network=False,
        stdin=b"{}",
    )
    with pytest.raises(SandboxUnavailable, match="changed after it was checked"):
        native.run_native(plan)


def test_unix_sockets_outside_are_unreachable(probe: Callable[..., str], shared_tmp: Path) -> None:
    """A pathname socket (think /run/docker.sock) is not covered by Landlock or the network namespace."""
    path = shared_tmp / "host.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    path.chmod(0o777)
    try:
        assert _errno_of(probe("unix", str(path))) in (errno.EACCES, errno.EPERM)
    finally:
        server.close()


def test_host_keyrings_are_out_of_reach(probe: Callable[..., str]) -> None:
    assert _errno_of(probe("keyring")) in (errno.EACCES, errno.EPERM, errno.ENOSYS)


def test_native_runs_from_many_threads_at_once(toolbox: Any, native_binary: Callable[[str], bytes]) -> None:
    """The runner is shared between threads; each native run has its own pipes and sandbox."""
    from concurrent.futures import ThreadPoolExecutor

    _require_confinement()
    add_native(toolbox, "probe", native_binary("probe"))
    toolbox.write_config(["probe", "shell_exec"])
    runner = toolbox.runner()

    def one(i: int) -> Any:
        if i % 2:
            return runner.run("shell_exec", {"command": f"echo {i}"}).data["stdout"]
        return runner.run("probe", {"op": "pid"}).data["result"]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(16)))
    assert results == [f"{i}\n" if i % 2 else "ok 1" for i in range(16)]


def test_cli_native_timeout_exits_one_with_the_name(
    toolbox: Any, native_binary: Callable[[str], bytes]
) -> None:
    _require_confinement()
    add_native(toolbox, "stubborn", native_binary("probe"), max_runtime_ms=300)
    config = toolbox.write_config(["stubborn"])
    args = json.dumps({"op": "ignore_term"})
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "tools", "run", "stubborn", "--config", str(config), "--args", args],
        capture_output=True,
        text=True,
        cwd=toolbox.root,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "error: ToolTimeout" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_script_tool_runs_with_its_interpreter(toolbox: Any) -> None:
    _require_confinement()
    add_native(toolbox, "scripted", (NATIVE_SOURCES / "shell_tool.sh").read_bytes())
    toolbox.write_config(["scripted"])
    result = toolbox.runner().run("scripted", {})
    assert result.data == {"shell": os.path.realpath(toolbox.workspace)}


def test_allow_unconfined_without_the_helper_still_runs_the_checked_bytes(
    toolbox: Any, native_binary: Callable[[str], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "kernel_support", lambda: native.KernelSupport(helper=False))
    monkeypatch.setattr(native, "HELPER_PATH", toolbox.root / "no-such-helper")
    monkeypatch.setattr(native, "_warned", set())
    monkeypatch.setenv("ZIGCLAW_TEST_SECRET", "hunter2")
    add_native(toolbox, "probe", native_binary("probe"))
    toolbox.write_config(["probe"], extra="\n[tools.native]\nallow_unconfined = true\n")
    runner = toolbox.runner()
    assert runner.run("probe", {"op": "env", "arg": "ZIGCLAW_TEST_SECRET"}).data == {"result": "unset"}
    with pytest.raises(StreamTooLong):
        runner.run("probe", {"op": "stdout", "arg": str(10 * MIB)})


def test_reading_a_file_in_the_home_folder_fails(probe: Callable[..., str]) -> None:
    import tempfile

    home = Path.home()
    if not home.is_dir() or not os.access(home, os.W_OK):
        pytest.skip(f"home folder {home} is not a writable folder to plant a file in")
    with tempfile.NamedTemporaryFile(dir=home, prefix=".zigclaw-test-secret-") as planted:
        planted.write(b"s3cret")
        planted.flush()
        os.chmod(planted.name, 0o644)
        assert _errno_of(probe("read", planted.name)) == errno.EACCES


def test_tool_holds_no_capabilities(probe: Callable[..., str]) -> None:
    """Not even in its own user namespace, where root (uid 0 mapped to itself) would keep them all."""
    assert probe("caps") == "ok 0"


def test_environment_is_built_from_names_only() -> None:
    host = {"PATH": "/p", "HOME": "/h", "USER": "u", "LANG": "C", "AWS_SECRET": "x", "WANTED": "w"}
    assert native.native_environment(["WANTED", "ABSENT"], host) == {
        "PATH": "/p",
        "HOME": "/h",
        "USER": "u",
        "LANG": "C",
        "WANTED": "w",
    }
    assert native.native_environment([], {}) == {"PATH": native.DEFAULT_PATH}


def test_probe_reports_what_the_kernel_offers() -> None:
    if not os.access(native.HELPER_PATH, os.X_OK):
        pytest.skip(f"{native.HELPER_PATH} is not built")
    out = subprocess.run([str(native.HELPER_PATH), "--probe"], capture_output=True, text=True, check=True)
    fields = dict(item.split("=") for item in out.stdout.split())
    assert set(fields) == {"landlock", "userns", "netns", "pidmax"}
    support = native.kernel_support()
    assert support.helper is True
    assert support.landlock_abi == int(fields["landlock"])
    assert support.userns == (fields["userns"] == "1")


@pytest.mark.parametrize(
    ("support", "network", "root", "missing"),
    [
        (native.KernelSupport(True, 7, True, True, True), False, True, []),
        (native.KernelSupport(True, 0, True, True, True), False, False, ["Landlock"]),
        (native.KernelSupport(True, 7, False, False, False), False, False, ["namespaces"]),
        (native.KernelSupport(True, 7, True, False, True), False, False, ["network namespaces"]),
        (native.KernelSupport(True, 7, True, False, True), True, False, []),
        (native.KernelSupport(True, 7, True, True, False), False, False, []),
        (native.KernelSupport(True, 7, True, True, False), False, True, ["pid_max"]),
        (native.KernelSupport(False), False, False, ["zigclaw-confine"]),
    ],
)
def test_confinement_gaps(support: Any, network: bool, root: bool, missing: list[str]) -> None:
    gaps = native.confinement_gaps(support, allow_network=network, root=root)
    assert len(gaps) == len(missing)
    for gap, word in zip(gaps, missing, strict=True):
        assert word in gap


def test_manifest_module_names_the_executable(toolbox: Any, native_binary: Callable[[str], bytes]) -> None:
    _require_confinement()
    add_native(toolbox, "renamed", native_binary("probe"), module="probe-x86")
    toolbox.write_config(["renamed"])
    assert not (toolbox.external / "renamed").exists()
    assert toolbox.runner().run("renamed", {"op": "pid"}).data == {"result": "ok 1"}
