"""Hostile guests against the in-process WASI sandbox: each gets its named error and harms nothing.

The table below is the contract: guest source (tests/hostile), manifest overrides, expected error.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path

import pytest

import runner
from runner.errors import ZigclawError

HOSTILE = [
    # (guest, manifest overrides, expected error name)
    ("loop_forever", {"max_runtime_ms": 200}, "ToolTimeout"),
    ("loop_forever", {"max_runtime_ms": 60000, "max_fuel": 1_000_000}, "ToolOutOfFuel"),
    ("sleep_forever", {"max_runtime_ms": 200}, "ToolTimeout"),
    ("grow_memory", {"max_memory_bytes": 4 * 1024 * 1024}, "ToolMemoryLimit"),
    ("huge_initial_memory", {"max_memory_bytes": 64 * 1024 * 1024}, "ToolMemoryLimit"),
    ("recurse", {}, "ToolTrap"),
    ("flood_stdout", {}, "StreamTooLong"),
    ("flood_stderr", {}, "StreamTooLong"),
    ("import_env", {}, "InvalidModule"),
    ("bad_signature", {}, "InvalidModule"),
    ("no_start", {}, "InvalidModule"),
    ("exit_silent", {}, "ToolFailed"),
    ("say_not_json", {}, "MalformedResponse"),
    ("wrong_request_id", {}, "MalformedResponse"),
    ("exit_zero_silent", {}, "MalformedResponse"),
    ("start_loop", {"max_runtime_ms": 200}, "ToolTimeout"),
    ("two_memories", {}, "InvalidModule"),
    ("memory64", {}, "InvalidModule"),
    ("big_table", {}, "ToolMemoryLimit"),
    ("divide_by_zero", {}, "ToolTrap"),
    ("import_threads", {}, "InvalidModule"),
    ("flood_forever", {}, "StreamTooLong"),
    ("flood_iovecs", {}, "StreamTooLong"),
    ("say_invalid_utf8", {}, "MalformedResponse"),
    ("say_deep_json", {"max_stdout_bytes": 65536}, "MalformedResponse"),
    ("poll_loop", {"max_runtime_ms": 200}, "ToolTimeout"),
    # One grow far past the cap is refused (-1) and the guest exits 1 at 64 KiB of memory:
    # wasmtime does not say a grow was refused, so this is ToolFailed (THREAT_MODEL.md, limits).
    ("grow_to_cap", {"max_memory_bytes": 4 * 1024 * 1024 - 65536}, "ToolFailed"),
    # WebAssembly exceptions are on (current WASI toolchains use them); the limits still hold.
    ("throw_forever", {"max_runtime_ms": 200}, "ToolTimeout"),
    ("throw_forever", {"max_runtime_ms": 60000, "max_fuel": 1_000_000}, "ToolOutOfFuel"),
    ("throw_uncaught", {}, "ToolTrap"),
]

NOT_CORE_MODULES = [
    # (file bytes, what the message must say)
    (b"#!/bin/sh\necho pwned\n", "not a WebAssembly module"),
    (b"", "not a WebAssembly module"),
    (b"\0asm\x0d\x00\x01\x00", "component"),
    (b"\0asm\x02\x00\x00\x00", "unsupported WebAssembly version"),
    (b"\0asm\x01\x00\x00\x00\xff\xff", "does not compile"),
    (b'(module (memory (export "memory") 1) (func (export "_start")))', "not a WebAssembly module"),
]


def _open_fds() -> int:
    """Open descriptors, not counting the idle pipes the sandbox keeps for reuse (a bounded pool)."""
    from runner.sandbox.pipes import idle_descriptors

    return len(os.listdir("/proc/self/fd")) - idle_descriptors()


def _run_direct(module: bytes, limits: tuple[int, ...], stdin: bytes = b"", mounts=(), guard=False):
    """Run module bytes straight through the sandbox (no manifest, no protocol), as `runtime().run`."""
    import hashlib

    from runner.sandbox.plan import Limits, RunPlan
    from runner.sandbox.wasi import runtime

    plan = RunPlan(
        tool="direct",
        module_path=Path("direct.wasm"),
        module_bytes=module,
        module_sha256=hashlib.sha256(module).hexdigest(),
        mounts=tuple(mounts),
        limits=Limits(*limits),
        stdin=stdin,
        guard_blocking_calls=guard,
    )
    return runtime().run(plan)


@pytest.mark.parametrize(
    ("guest_name", "fields", "expected"), HOSTILE, ids=[f"{g}-{e}" for g, _, e in HOSTILE]
)
def test_hostile_guest_gets_its_named_error(toolbox, guest, guest_name, fields, expected):
    toolbox.add_tool("hostile", guest(guest_name), **fields)
    toolbox.write_config(["hostile", "echo"])
    run = toolbox.runner()
    with pytest.raises(ZigclawError) as caught:
        run.run("hostile", {})
    assert caught.value.name == expected, caught.value.message
    assert "\n" not in caught.value.message
    # The host is unharmed: the same runner still runs a good tool afterwards.
    assert run.run("echo", {"text": "still here"}).data == {"echo": "still here"}


@pytest.mark.parametrize(("module", "reason"), NOT_CORE_MODULES)
def test_a_file_that_is_not_a_core_wasm_module_is_refused_before_running(toolbox, module, reason):
    toolbox.add_tool("notwasm", module)
    toolbox.write_config(["notwasm"])
    with pytest.raises(runner.InvalidModule, match=reason):
        toolbox.runner().run("notwasm", {})


def test_a_missing_module_file_is_invalid_module(toolbox):
    toolbox.add_tool("ghost", None)
    toolbox.write_config(["ghost"])
    with pytest.raises(runner.InvalidModule, match="does not exist"):
        toolbox.runner().run("ghost", {})


def test_trap_message_names_the_cause_not_the_backtrace(toolbox, guest):
    toolbox.add_tool("div", guest("divide_by_zero"))
    toolbox.write_config(["div"])
    with pytest.raises(runner.ToolTrap, match="integer divide by zero"):
        toolbox.runner().run("div", {})


def test_sleeping_guest_is_stopped_near_its_deadline_not_after_its_sleep(toolbox, guest):
    # The guest asks for a 60 s sleep; it must be stopped long before that.
    toolbox.add_tool("sleeper", guest("sleep_forever"), max_runtime_ms=100)
    toolbox.write_config(["sleeper"])
    started = time.monotonic()
    with pytest.raises(runner.ToolTimeout):
        toolbox.runner().run("sleeper", {})
    assert time.monotonic() - started < 30


def test_output_flood_leaves_no_file_descriptors_or_temp_files(toolbox, guest, tmp_path):
    toolbox.add_tool("flood", guest("flood_stdout"))
    toolbox.write_config(["flood"])
    run = toolbox.runner()
    with pytest.raises(runner.StreamTooLong):
        run.run("flood", {})  # warm-up: lazily created threads and epoll
    gc.collect()  # earlier tests' Runners close their audit logs when collected
    before = _open_fds()
    tmp_before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    for _ in range(20):
        with pytest.raises(runner.StreamTooLong):
            run.run("flood", {})
    assert _open_fds() == before
    assert set(os.listdir(os.environ.get("TMPDIR", "/tmp"))) - tmp_before == set()


PROBE_DENIED = [
    "write /workspace/new.txt",
    "trunc /workspace/a.txt",
    "mkdir /workspace/d",
    "unlink /workspace/a.txt",
    "rename /workspace/a.txt /workspace/b.txt",
    "symlink a.txt /workspace/l",
    "utimes /workspace/a.txt",
    "read /etc/passwd",
    "read /workspace/../../etc/passwd",
    "read ../etc/passwd",
    "write /write/../escape.txt",
    "symlink /etc/passwd /write/out/abs_link",
    "link /workspace/a.txt /write/out/hard",
]


def _probe(guest, workspace: Path, write_dir: Path, ops: list[str]) -> list[str]:
    from runner.policy import Mount

    mounts = (Mount(str(workspace), "/workspace", True), Mount(str(write_dir), "/write/out", False))
    result = _run_direct(
        guest("probe"), (5000, 10**10, 64 << 20, 65536, 65536), "\n".join(ops).encode(), mounts
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "argc 0"  # no argv reaches the guest
    return lines[1:]


@pytest.mark.parametrize("op", PROBE_DENIED)
def test_guest_cannot_write_the_workspace_or_leave_its_mounts(guest, tmp_path, op):
    workspace, write_dir = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    write_dir.mkdir()
    (workspace / "a.txt").write_text("original")
    (result,) = _probe(guest, workspace, write_dir, [op])
    assert result.startswith("err "), f"{op} -> {result}"
    assert sorted(os.listdir(workspace)) == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "original"
    assert os.listdir(write_dir) == []
    assert not (tmp_path / "escape.txt").exists()


def test_guest_reads_workspace_and_writes_its_write_mount(guest, tmp_path):
    workspace, write_dir = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    write_dir.mkdir()
    (workspace / "a.txt").write_text("hello")
    results = _probe(guest, workspace, write_dir, ["read /workspace/a.txt", "write /write/out/x.txt", "env"])
    assert results == ["ok 5", "ok ", "ok 0"]  # read 5 bytes, wrote, saw no environment variables
    assert (write_dir / "x.txt").read_text() == "pwned"


def test_symlink_made_in_write_mount_does_not_lead_outside(guest, tmp_path):
    workspace, write_dir = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    write_dir.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    results = _probe(guest, workspace, write_dir, ["symlink ../secret.txt /write/out/s", "read /write/out/s"])
    assert results[1].startswith("err "), results


def test_two_threads_run_guests_concurrently_with_their_own_limits(toolbox, guest):
    toolbox.add_tool("spin", guest("loop_forever"), max_runtime_ms=300)
    toolbox.write_config(["spin", "echo"])
    run = toolbox.runner()
    outcomes: list[str] = []

    def call_spin() -> None:
        try:
            run.run("spin", {})
        except ZigclawError as exc:
            outcomes.append(exc.name)

    def call_echo() -> None:
        outcomes.append(run.run("echo", {"text": "x"}).data["echo"])

    threads = [threading.Thread(target=call_spin), threading.Thread(target=call_echo)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["ToolTimeout", "x"]


def test_guest_blocked_on_a_fifo_in_its_workspace_is_abandoned_at_its_deadline(guest, tmp_path):
    # A read from a FIFO blocks inside a host call, where the epoch cannot reach.
    from runner.policy import Mount

    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "pipe")
    mounts = (Mount(str(workspace), "/workspace", True),)
    with pytest.raises(runner.ToolTimeout, match="blocked in a host call"):
        limits = (200, 10**10, 64 << 20, 65536, 65536)
        _run_direct(guest("probe"), limits, b"read /workspace/pipe", mounts, guard=True)
    # Unblock the abandoned worker so it can clean up behind us.
    with open(workspace / "pipe", "wb"):
        pass


def test_cli_gives_up_on_a_guest_blocked_on_a_fifo(guest, toolbox):
    import json
    import subprocess
    import sys

    os.mkfifo(toolbox.workspace / "pipe")
    toolbox.add_tool("fifo", guest("read_fifo"), max_runtime_ms=200)
    toolbox.write_config(["fifo"])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    command = [sys.executable, "-m", "runner", "tools", "run", "fifo", "--json"]
    done = subprocess.run(
        [*command, "--config", str(toolbox.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    reply = json.loads(done.stdout)
    assert reply["error"] == "ToolTimeout"
    assert "blocked in a host call" in reply["message"]


def test_config_key_guards_api_runs_against_blocking_host_calls(guest, toolbox):
    os.mkfifo(toolbox.workspace / "pipe")
    toolbox.add_tool("fifo", guest("read_fifo"), max_runtime_ms=200)
    toolbox.write_config(["fifo"])
    text = toolbox.config_path.read_text()
    toolbox.config_path.write_text(text.replace("[security]\n", "[security]\nguard_blocking_calls = true\n"))
    run = toolbox.runner()
    assert run.guard_blocking_calls is True
    try:
        with pytest.raises(runner.ToolTimeout, match="blocked in a host call"):
            run.run("fifo", {})
    finally:
        # Unblock the abandoned worker so it can finish and clean up.
        with open(toolbox.workspace / "pipe", "wb"):
            pass


def test_deep_recursion_from_a_small_stack_thread_is_a_trap_not_a_crash(toolbox, guest):
    # In a subprocess: if the guard failed, the process would die with SIGSEGV.
    import subprocess
    import sys
    import textwrap

    toolbox.add_tool("rec", guest("recurse"))
    toolbox.write_config(["rec"])
    script = textwrap.dedent(
        f"""
        import threading
        from runner import Runner, ZigclawError
        runner = Runner.from_config({str(toolbox.config_path)!r}, guard_blocking_calls=False)
        outcome = []
        def call():
            try:
                runner.run("rec", {{}})
            except ZigclawError as exc:
                outcome.append(exc.name)
        threading.stack_size(256 * 1024)
        thread = threading.Thread(target=call)
        thread.start()
        thread.join()
        print(outcome[0])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ToolTrap"


def test_growing_memory_exactly_to_the_cap_is_allowed(guest):
    result = _run_direct(guest("grow_to_cap"), (2000, 10**9, 4 * 1024 * 1024, 65536, 65536))
    assert result.exit_code == 0  # 64 pages = the 4 MiB cap: allowed


def test_an_absolute_monotonic_sleep_waits_on_the_guests_own_clock(guest):
    result = _run_direct(guest("sleep_until"), (5000, 10**9, 4 * 1024 * 1024, 65536, 65536))
    assert result.exit_code == 0  # its clock moved >= 90 ms across the sleep


def test_reused_output_pipes_are_bounded_and_never_carry_old_bytes():
    from runner.sandbox import pipes

    sinks = [pipes.capture("stdout", 1000, lambda name: None) for _ in range(3 * pipes._POOL_PER_SIZE)]
    for sink in sinks:
        os.write(sink.write_fd, b"old")
        assert sink.finish() == b"old"
    assert pipes.idle_descriptors() <= 2 * pipes._POOL_PER_SIZE * 2  # two sizes at most so far
    # Bytes that reach an idle pipe after it was drained: that pipe is dropped, not reused.
    stale = pipes._pool._idle[pipes._DEFAULT_PIPE][-1]
    os.write(stale[1], b"stale")
    fresh = pipes.capture("stdout", 1000, lambda name: None)
    assert (fresh._read_fd, fresh.write_fd) != stale  # the next idle pipe, not the stale one
    assert stale not in pipes._pool._idle[pipes._DEFAULT_PIPE]
    assert fresh.finish() == b""


def test_a_pipe_that_overflowed_is_not_reused():
    from runner.sandbox import pipes

    seen: list[str] = []
    sink = pipes.capture("stdout", 4, seen.append)
    pair = (sink._read_fd, sink.write_fd)
    os.write(sink.write_fd, b"too long")
    assert sink.finish() == b"too "
    assert seen == ["stdout"]
    assert all(pair != idle for idle in pipes._pool._idle.get(pipes._DEFAULT_PIPE, []))
