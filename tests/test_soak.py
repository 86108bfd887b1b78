"""Soak: one Runner shared by two threads, thousands of good and hostile runs, nothing leaks.

The short form (SHORT_RUNS) runs in the normal suite; `ZIGCLAW_SOAK_FULL=1` runs FULL_RUNS.
After a warm-up the test records open file descriptors, RSS, the names in the temp dir and
the thread count; after the soak every run must have had its expected outcome and none of
those figures may have grown (RSS within a tolerance, see RSS_* below).
"""

from __future__ import annotations

import gc
import os
import random
import re
import tempfile
import threading
import time
from typing import Any

from runner.errors import ZigclawError

FULL_RUNS = 10_000
SHORT_RUNS = 600
THREADS = 2
SEED = 20240611

# RSS may move by 10% of the settled value after warm-up. For the short form the absolute
# number is small and allocator noise (glibc arenas of the second thread, wasmtime's mmap
# pools of stores and the compiled-module cache settling) is a few MiB no matter how many
# runs follow, so a floor of 8 MiB is allowed there; a per-run leak of even 16 KiB would
# still show up in the full form as more than 150 MiB.
RSS_RATIO = 0.10
RSS_FLOOR_SHORT = 8 * 1024 * 1024

NOT_WASM = b"#!/bin/sh\necho pwned\n"
TIMEOUT_MS = 50

# (tool name, guest source or raw bytes, manifest overrides, expected error name, weight)
# The two timeouts cost TIMEOUT_MS each: together 1 in 50 runs. Echo is half of the rest.
HOSTILE: list[tuple[str, Any, dict[str, Any], str, int]] = [
    ("loop_forever", "loop_forever", {"max_runtime_ms": TIMEOUT_MS}, "ToolTimeout", 2),
    ("sleep_forever", "sleep_forever", {"max_runtime_ms": TIMEOUT_MS}, "ToolTimeout", 2),
    ("flood_stdout", "flood_stdout", {}, "StreamTooLong", 5),
    ("flood_stderr", "flood_stderr", {}, "StreamTooLong", 5),
    ("grow_memory", "grow_memory", {"max_memory_bytes": 4 * 1024 * 1024}, "ToolMemoryLimit", 5),
    ("recurse", "recurse", {}, "ToolTrap", 5),
    ("divide_by_zero", "divide_by_zero", {}, "ToolTrap", 5),
    ("exit_silent", "exit_silent", {}, "ToolFailed", 5),
    ("say_not_json", "say_not_json", {}, "MalformedResponse", 5),
    ("wrong_request_id", "wrong_request_id", {}, "MalformedResponse", 5),
    ("import_env", "import_env", {}, "InvalidModule", 5),
    ("not_wasm", NOT_WASM, {}, "InvalidModule", 5),
]
ECHO_WEIGHT = 200 - sum(entry[4] for entry in HOSTILE)  # 4 of 200 runs are timeouts
REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")


def _fds() -> int:
    """Open descriptors, not counting the idle pipes the sandbox keeps for reuse (a bounded pool)."""
    from runner.sandbox.pipes import idle_descriptors

    return len(os.listdir("/proc/self/fd")) - idle_descriptors()


def _rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _temp_names() -> set[str]:
    return set(os.listdir(tempfile.gettempdir()))


def _schedule(total: int) -> list[str]:
    rng = random.Random(SEED)
    names = ["echo"] + [entry[0] for entry in HOSTILE]
    weights = [ECHO_WEIGHT] + [entry[4] for entry in HOSTILE]
    return rng.choices(names, weights=weights, k=total)


def _run_one(run: Any, tool: str, index: int, expected: dict[str, str], ids: list[str]) -> str | None:
    """One call; None when it had its expected outcome, else what went wrong."""
    if tool == "echo":
        text = f"soak #{index} \u00e9\u4e2d"
        try:
            result = run.run("echo", {"text": text})
        except ZigclawError as exc:
            return f"run {index} echo: raised {exc.name}: {exc.message}"
        if result.data != {"echo": text}:
            return f"run {index} echo: data {result.data!r}"
        if not result.ok or not REQUEST_ID.match(result.request_id):
            return f"run {index} echo: ok={result.ok} request_id={result.request_id!r}"
        ids.append(result.request_id)
        return None
    try:
        result = run.run(tool, {})
    except ZigclawError as exc:
        if exc.name != expected[tool]:
            return f"run {index} {tool}: {exc.name} (want {expected[tool]}): {exc.message}"
        return None
    return f"run {index} {tool}: returned ok={result.ok} data={result.data!r} (want {expected[tool]})"


def _soak(run: Any, schedule: list[str], start: int, expected: dict[str, str]) -> tuple[list[str], list[str]]:
    """Run `schedule` on THREADS threads sharing `run`; return the mismatches and request ids."""
    mismatches: list[str] = []
    request_ids: list[str] = []
    lock = threading.Lock()
    cursor = iter(range(len(schedule)))

    def worker() -> None:
        while True:
            with lock:
                position = next(cursor, None)
            if position is None:
                return
            tool = schedule[position]
            ids: list[str] = []
            try:
                problem = _run_one(run, tool, start + position, expected, ids)
            except Exception as exc:  # any other exception is a wrong outcome, not a dead thread
                problem = f"run {start + position} {tool}: {type(exc).__name__}: {exc}"
            with lock:
                request_ids.extend(ids)
                if problem is not None:
                    mismatches.append(problem)

    threads = [threading.Thread(target=worker, name=f"soak-{n}") for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return mismatches, request_ids


def test_soak_two_threads_share_one_runner_and_nothing_leaks(toolbox, guest, monkeypatch):
    full = os.environ.get("ZIGCLAW_SOAK_FULL") == "1"
    # A private temp dir: the shared /tmp gets files from other processes on the machine at any
    # moment (a concurrent test run once made /tmp/scratch mid-soak), which is not our leak.
    # Python's tempfile and native code reading TMPDIR (putenv via os.environ) both land here.
    private_tmp = toolbox.root / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    assert tempfile.gettempdir() == str(private_tmp)
    total = FULL_RUNS if full else SHORT_RUNS
    warmup = max(100, total // 20)

    expected: dict[str, str] = {}
    for tool, source, fields, error, _weight in HOSTILE:
        wasm = source if isinstance(source, bytes) else guest(source)
        toolbox.add_tool(tool, wasm, **fields)
        expected[tool] = error
    toolbox.write_config(["echo", *expected])
    run = toolbox.runner()

    schedule = _schedule(warmup + total)
    assert set(schedule) == {"echo", *expected}, "every guest must appear in the schedule"

    # Warm-up: compiles every module, starts the heartbeat, grows the allocator's arenas.
    mismatches, _ = _soak(run, schedule[:warmup], 0, expected)
    assert mismatches == [], "\n".join(mismatches[:5])
    gc.collect()
    fds_before, rss_before = _fds(), _rss()
    temp_before, threads_before = _temp_names(), threading.active_count()

    started = time.monotonic()
    mismatches, request_ids = _soak(run, schedule[warmup:], warmup, expected)
    seconds = time.monotonic() - started
    gc.collect()
    fds_after, rss_after = _fds(), _rss()
    temp_after, threads_after = _temp_names(), threading.active_count()

    mib = 1024 * 1024
    print(
        f"\nsoak: {total} runs in {seconds:.1f} s ({total / seconds:.0f} runs/s), "
        f"fds {fds_before} -> {fds_after}, RSS {rss_before / mib:.1f} -> {rss_after / mib:.1f} MiB, "
        f"threads {threads_before} -> {threads_after}, mismatches {len(mismatches)}"
    )

    assert not mismatches, f"{len(mismatches)} of {total} runs had a wrong outcome:\n" + "\n".join(
        mismatches[:5]
    )
    assert len(set(request_ids)) == len(request_ids) == schedule[warmup:].count("echo")
    assert fds_after == fds_before, f"open fds {fds_before} -> {fds_after} over {total} runs"
    allowed = rss_before * RSS_RATIO if full else max(rss_before * RSS_RATIO, RSS_FLOOR_SHORT)
    assert rss_after - rss_before <= allowed, (
        f"RSS grew {(rss_after - rss_before) / mib:.1f} MiB over {total} runs "
        f"({(rss_after - rss_before) / total:.0f} bytes/run; allowed {allowed / mib:.1f} MiB)"
    )
    assert temp_after - temp_before == set(), f"new temp files: {sorted(temp_after - temp_before)[:5]}"
    # The soak threads have been joined. The heartbeat is started during the warm-up, but it
    # is started lazily and may be (re)started by a later run if it was ever found dead, so
    # one extra thread is tolerated; anything more is a thread per run (or per timeout) leak.
    assert threads_after <= threads_before + 1, f"threads {threads_before} -> {threads_after}"
