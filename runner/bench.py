"""`zigclaw tools bench`: what isolation costs for one tool, in-process against the wasmtime CLI."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidManifest, MalformedResponse
from .protocol import decode_response, encode_request, new_request_id
from .service import Runner


@dataclass(frozen=True)
class BenchFigures:
    """Timings of one way of running a tool, in milliseconds."""

    mode: str
    runs: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    runs_per_second: float

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "runs": self.runs,
            "p50_ms": round(self.p50_ms, 4),
            "p90_ms": round(self.p90_ms, 4),
            "p99_ms": round(self.p99_ms, 4),
            "runs_per_second": round(self.runs_per_second, 1),
        }


def _figures(mode: str, seconds: Sequence[float]) -> BenchFigures:
    ordered = sorted(seconds)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else ordered * 99
    total = sum(ordered)
    return BenchFigures(
        mode=mode,
        runs=len(ordered),
        p50_ms=statistics.median(ordered) * 1000,
        p90_ms=cuts[89] * 1000,
        p99_ms=cuts[98] * 1000,
        runs_per_second=len(ordered) / total if total > 0 else float("inf"),
    )


def _time(call: Callable[[], object], runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


def bench_tool(
    runner: Runner, tool: str, args: Any, runs: int = 200, native_tool: str | None = None
) -> dict[str, Any]:
    """Time the tool in-process and, when a `wasmtime` CLI is on PATH, under it; `args` as for run().

    `native_tool` names the tool's native build, installed as a `native = true` tool: it is
    timed with the same arguments, confined as every native run is (never run unconfined
    just because it sits in a tool folder).
    """
    from .schema import parse_args

    if isinstance(args, str):
        args = parse_args(args)
    runner.run(tool, args)  # fails with the run's own error if the tool cannot run at all
    results = [_figures("in-process", _time(lambda: runner.run(tool, args), runs, warmup=min(20, runs)))]
    skipped: dict[str, str] = {}
    cli = shutil.which("wasmtime")
    manifest = runner.describe(tool)
    if cli is None:
        skipped["wasmtime-cli"] = "no `wasmtime` on PATH"
    elif manifest["native"]:
        skipped["wasmtime-cli"] = "native tool"
    else:
        module = runner.folder_for(tool) / manifest["module"]
        workspace = str(runner.workspace.resolve())
        stdin = encode_request(request_id=new_request_id(), tool=tool, args=args, cwd="/workspace", mounts=[])
        command = [cli, "run", "--dir", f"{workspace}::/workspace", str(module)]

        def spawn() -> bytes:
            done = subprocess.run(command, input=stdin, capture_output=True, check=False, timeout=60)
            return done.stdout

        reply = spawn()
        try:
            decode_response(reply, json.loads(stdin)["request_id"])
        except MalformedResponse as exc:
            skipped["wasmtime-cli"] = f"the tool did not answer under the wasmtime CLI: {exc.message}"
        else:
            cli_runs = max(1, min(runs, 50))
            results.append(_figures("wasmtime-cli", _time(spawn, cli_runs, warmup=2)))
    if native_tool is None:
        skipped["native"] = "no native build given (--native TOOL names one, a `native = true` tool)"
    else:
        if not runner.describe(native_tool)["native"]:
            raise InvalidManifest(
                f"'{native_tool}' is not a native tool (its manifest does not say native = true)",
                hint="pass the name of the tool's native build to --native.",
            )
        runner.run(native_tool, args)  # its own error if it cannot run
        native_runs = max(1, min(runs, 100))
        seconds = _time(lambda: runner.run(native_tool, args), native_runs, warmup=min(5, native_runs))
        results.append(_figures("native (confined)", seconds))
    base = results[0].p50_ms
    return {
        "tool": tool,
        "results": [
            {**figures.to_json(), "x_in_process": round(figures.p50_ms / base, 2) if base else None}
            for figures in results
        ],
        "skipped": skipped,
    }
