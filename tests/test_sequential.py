"""Issue 4, target 5: 10,000 sequential runs through one Runner grow RSS by less than 10% and
leak no file descriptors (the audit trail on, as by default)."""

from __future__ import annotations

import gc

from test_soak import _fds, _rss

RUNS = 10_000
WARMUP = 300


def test_ten_thousand_sequential_runs_leak_no_descriptors_and_little_memory(tmp_path, monkeypatch):
    from runner import Runner

    monkeypatch.chdir(tmp_path)  # the built-in defaults; the audit log goes to ./.zigclaw
    runner = Runner.from_config()
    for index in range(WARMUP):
        runner.run("echo", {"text": f"warm {index}"})
    gc.collect()
    fds_before, rss_before = _fds(), _rss()
    for index in range(RUNS):
        result = runner.run("echo", {"text": f"run {index}"})
        assert result.data == {"echo": f"run {index}"}
    gc.collect()
    fds_after, rss_after = _fds(), _rss()
    mib = 1024 * 1024
    rss = f"RSS {rss_before / mib:.1f} -> {rss_after / mib:.1f} MiB"
    print(f"\n{RUNS} runs: fds {fds_before} -> {fds_after}, {rss}")
    assert fds_after == fds_before
    assert rss_after < rss_before * 1.10, f"RSS grew from {rss_before / mib:.1f} to {rss_after / mib:.1f} MiB"
    lines = (tmp_path / ".zigclaw" / "audit.jsonl").read_bytes().count(b"\n")
    assert lines >= 2 * (RUNS + WARMUP)  # every run is on record
