"""Target 2 of issue 4: `zigclaw tools run echo` as a whole process against `python -c "import wasmtime"`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import record, side_by_side


def test_one_shot_cli_against_python_importing_wasmtime(benchmark, tmp_path, smoke):
    # Bytecode caches as an installed package has them: written on the first run, then reused.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    zigclaw = str(Path(sys.executable).parent / "zigclaw")
    cli = [zigclaw, "tools", "run", "echo", "--args", '{"text":"hi"}']
    floor = [sys.executable, "-c", "import wasmtime"]

    def spawn(command: list[str]) -> object:
        def call() -> None:
            done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, check=True)
            assert command is floor or b'"ok":true' in done.stdout

        return call

    for command in (cli, floor):  # bytecode and the compiled module are cached after this
        spawn(command)()
    benchmark.pedantic(spawn(cli), rounds=1 if smoke else 10, iterations=1)
    medians = side_by_side({"cli": spawn(cli), "floor": spawn(floor)}, rounds=2 if smoke else 40, block=1)
    ours, bare = medians["cli"] * 1000, medians["floor"] * 1000
    record(
        "one-shot `zigclaw tools run echo` vs `python -c \"import wasmtime\"`",
        f"CLI {ours:.0f} ms, import wasmtime {bare:.0f} ms",
        ours / bare,
        "<= 2",
        ours / bare <= 2,
    )
    if not smoke:
        assert ours / bare <= 2, f"one-shot CLI is x{ours / bare:.2f} importing wasmtime (target <= 2)"
