"""Warm in-process echo through the Python API, every limit on, output captured under its cap."""

from __future__ import annotations

import statistics

from runner import Runner


def test_warm_echo_run_through_the_api(benchmark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no zigclaw.toml: the built-in defaults
    runner = Runner.from_config()
    args = {"text": "hi"}
    for _ in range(20):  # warm: compiled module cached, threads started
        runner.run("echo", args)

    result = benchmark(runner.run, "echo", args)

    assert result.data == {"echo": "hi"}
    stats = benchmark.stats
    if stats is not None:  # None under --benchmark-disable (the plain test run)
        median_ms = statistics.median(stats.stats.data) * 1000
        print(f"\nwarm echo run: median {median_ms:.3f} ms over {len(stats.stats.data)} runs")
        assert median_ms < 1.0, f"warm echo run took {median_ms:.3f} ms (target < 1 ms)"
