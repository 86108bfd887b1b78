"""Every hostile guest, through the real CLI: its error name, a one-line message, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_sandbox import HOSTILE

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("guest_name", "fields", "expected"), HOSTILE, ids=[f"{g}-{e}" for g, _, e in HOSTILE]
)
def test_hostile_guest_through_the_cli_reports_its_name_without_traceback(
    toolbox, guest, guest_name, fields, expected
):
    toolbox.add_tool("hostile", guest(guest_name), **fields)
    toolbox.write_config(["hostile"])
    done = subprocess.run(
        [sys.executable, "-m", "runner", "tools", "run", "hostile", "--config", str(toolbox.config_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == f"error: {expected}", done.stderr
    assert lines[1].startswith("message: ") and len(lines[1]) > len("message: ")
    assert all(line.startswith(("error: ", "message: ", "hint: ")) for line in lines), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stdout == ""
