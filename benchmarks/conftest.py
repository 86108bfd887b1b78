"""Benchmarks run with `just bench` (pytest benchmarks --benchmark-enable).

Targets are ratios measured side by side in one run: absolute times drift on
shared machines, ratios hold.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GUESTS = Path(__file__).parent / "guests"
REPO = Path(__file__).resolve().parent.parent


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
