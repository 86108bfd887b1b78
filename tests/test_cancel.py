"""Cancelling a call through Runner.run(cancel=...): a running or sleeping guest stops at once."""

from __future__ import annotations

import json
import threading
import time

import pytest

from runner import CancelToken, ToolCancelled


def _started(toolbox, request_count: int = 1) -> bool:
    path = toolbox.root / ".zigclaw" / "audit.jsonl"
    if not path.exists():
        return False
    events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    return events.count("ToolInvocationStarted") >= request_count


def _cancel_when_started(toolbox, token: CancelToken) -> threading.Thread:
    def watch() -> None:
        while not _started(toolbox):
            time.sleep(0.002)
        time.sleep(0.05)  # let the guest get going
        token.cancel()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("guest_name", ["loop_forever", "sleep_forever"])
def test_cancel_stops_a_running_or_sleeping_guest_long_before_its_deadline(toolbox, guest, guest_name):
    toolbox.add_tool("slow", guest(guest_name), max_runtime_ms=60_000)
    toolbox.write_config(["slow"])
    runner = toolbox.runner()
    token = CancelToken()
    watcher = _cancel_when_started(toolbox, token)
    began = time.monotonic()
    with pytest.raises(ToolCancelled):
        runner.run("slow", {}, cancel=token)
    elapsed = time.monotonic() - began
    watcher.join()
    # The deadline is 60 s: stopping within seconds can only be the cancellation.
    assert elapsed < 10, elapsed
    lines = [json.loads(x) for x in (toolbox.root / ".zigclaw" / "audit.jsonl").read_text().splitlines()]
    assert lines[-1]["event"] == "ToolInvocationFailed"
    assert lines[-1]["error"] == "ToolCancelled"
    print(f"{guest_name}: stopped {lines[-1]['duration_ms']} ms after start (cancel at ~50 ms)")


def test_cancel_stop_latency_is_a_few_milliseconds(toolbox, guest):
    toolbox.add_tool("spin", guest("loop_forever"), max_runtime_ms=60_000)
    toolbox.write_config(["spin"])
    runner = toolbox.runner()
    token = CancelToken()
    stopped_at: list[float] = []
    cancelled_at: list[float] = []

    def run() -> None:
        with pytest.raises(ToolCancelled):
            runner.run("spin", {}, cancel=token)
        stopped_at.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    while not _started(toolbox):
        time.sleep(0.002)
    time.sleep(0.05)
    cancelled_at.append(time.monotonic())
    token.cancel()
    thread.join(30)
    assert stopped_at, "the run did not stop"
    latency_ms = (stopped_at[0] - cancelled_at[0]) * 1000
    print(f"cancel -> run returned: {latency_ms:.2f} ms")
    assert latency_ms < 2000  # generous bound for a loaded machine; typically a few ms


def test_a_call_cancelled_before_it_starts_never_runs(toolbox, guest):
    toolbox.add_tool("spin", guest("loop_forever"), max_runtime_ms=60_000)
    toolbox.write_config(["spin"])
    token = CancelToken()
    token.cancel()
    with pytest.raises(ToolCancelled):
        toolbox.runner().run("spin", {}, cancel=token)
    events = [
        json.loads(x)["event"] for x in (toolbox.root / ".zigclaw" / "audit.jsonl").read_text().splitlines()
    ]
    assert "ToolInvocationStarted" not in events
    assert events[-1] == "ToolInvocationFailed"


def test_an_unused_token_changes_nothing(toolbox):
    toolbox.write_config(["echo"])
    result = toolbox.runner().run("echo", {"text": "hi"}, cancel=CancelToken())
    assert result.data == {"echo": "hi"}
