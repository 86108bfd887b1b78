"""The spinner a large module's first compile shows: on a terminal only, and never again once cached."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from runner.sandbox.progress import SLOW_COMPILE_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bigmodule

SPINNER_TEXT = b"compiling big.wasm"


def _run_with_stderr_on_a_terminal(command: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    """Run `command` with stderr on a pseudo-terminal (stdout piped); everything stderr showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    proc.stdout.read()  # type: ignore[union-attr]
    os.close(leader)
    return proc.wait(timeout=120), bytes(shown)


def test_first_compile_of_a_large_module_shows_a_spinner_on_a_terminal_only(toolbox, tmp_path):
    toolbox.add_tool("big", bigmodule.build(SLOW_COMPILE_BYTES + 256 * 1024))
    toolbox.write_config(["big"])
    env = dict(os.environ, ZIGCLAW_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    command = [sys.executable, "-m", "runner", "tools", "run", "big", "--config", str(toolbox.config_path)]

    code, shown = _run_with_stderr_on_a_terminal(command, env)
    assert code == 1  # the module answers nothing: MalformedResponse, after compiling
    assert b"MalformedResponse" in shown
    assert SPINNER_TEXT in shown

    code, shown = _run_with_stderr_on_a_terminal(command, env)  # compiled module from the cache
    assert code == 1 and b"MalformedResponse" in shown
    assert SPINNER_TEXT not in shown

    env["ZIGCLAW_CACHE_DIR"] = str(tmp_path / "cache-2")  # compiles again, stderr piped
    done = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert done.returncode == 1 and b"MalformedResponse" in done.stderr
    assert b"compiling" not in done.stderr


def test_a_small_module_compiles_without_a_spinner(toolbox, tmp_path):
    from runner.sandbox.progress import compiling, set_compile_progress

    opened: list[tuple[str, int]] = []

    def hook(source: str, size: int):
        import contextlib

        opened.append((source, size))
        return contextlib.nullcontext()

    set_compile_progress(hook)
    try:
        with compiling("small.wasm", SLOW_COMPILE_BYTES - 1):
            pass
        with compiling("large.wasm", SLOW_COMPILE_BYTES):
            pass
    finally:
        set_compile_progress(None)
    assert opened == [("large.wasm", SLOW_COMPILE_BYTES)]
