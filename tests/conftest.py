"""Shared fixtures: test guests built from sources in tests/hostile, and throwaway tool folders."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

GUESTS = Path(__file__).parent / "hostile"

# Compiled modules go to a cache of this test session, never the user's own.
if "ZIGCLAW_CACHE_DIR" not in os.environ:
    os.environ["ZIGCLAW_CACHE_DIR"] = tempfile.mkdtemp(prefix="zigclaw-test-cache-")
# The global tools layer of the tests is a fresh empty folder, never the user's own config.
if "ZIGCLAW_CONFIG_HOME" not in os.environ:
    os.environ["ZIGCLAW_CONFIG_HOME"] = tempfile.mkdtemp(prefix="zigclaw-test-config-")
REPO = Path(__file__).resolve().parent.parent


def zigclaw(
    cwd: Path, *args: str, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `python -m runner ARGS` in `cwd` with the repo importable and stdout piped."""
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(value)


@pytest.fixture(scope="session")
def guest_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("guests")


@pytest.fixture(scope="session")
def guest(guest_dir: Path) -> Callable[[str], bytes]:
    """Build tests/hostile/<name>.wat (wasmtime's WAT parser) or <name>.c (zig cc) once per session."""
    built: dict[str, bytes] = {}

    def build(name: str) -> bytes:
        if name in built:
            return built[name]
        wat = GUESTS / f"{name}.wat"
        if wat.exists():
            import wasmtime

            data = bytes(wasmtime.wat2wasm(wat.read_text()))
        else:
            source = GUESTS / f"{name}.c"
            out = guest_dir / f"{name}.wasm"
            env = dict(os.environ)
            env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(REPO / "build" / "zig-cache"))
            command = [sys.executable, "-m", "ziglang", "cc", "--target=wasm32-wasi", "-Os"]
            subprocess.run(
                [*command, "-o", str(out), str(source)],
                check=True,
                env=env,
                cwd=guest_dir,
            )
            data = out.read_bytes()
        built[name] = data
        return data

    return build


class ToolBox:
    """A workspace, an external tool folder and a zigclaw.toml, all under one temp dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "workspace"
        self.external = root / "ext-tools"
        self.workspace.mkdir()
        self.external.mkdir()
        self.config_path = root / "zigclaw.toml"

    def add_tool(self, name: str, wasm: bytes | None, *, args: str | None = None, **fields: Any) -> Path:
        """Write the module (<name>.wasm, or the manifest's `module`) when given, and <name>.toml."""
        if wasm is not None:
            (self.external / fields.get("module", f"{name}.wasm")).write_bytes(wasm)
        manifest = {
            "tool_name": name,
            "version": "1.0.0",
            "description": f"test tool {name}",
            **fields,
        }
        lines = [f"{key} = {_toml_value(value)}" for key, value in manifest.items()]
        schema = args if args is not None else 'type = "object"\nadditionalProperties = true'
        text = "\n".join(lines) + "\n\n[args]\n" + textwrap.dedent(schema) + "\n"
        path = self.external / f"{name}.toml"
        path.write_text(text)
        return path

    def write_config(
        self,
        tools: list[str],
        *,
        allow_external: bool = True,
        write_paths: list[str] | None = None,
        allow_network: bool = False,
        extra: str = "",
        approval: str | None = "preApproved",
    ) -> Path:
        """The config of a test; `approval` is `[approval] default` (None: leave it unset).

        Sandbox tests run external tools unattended, so they pre-approve them by default.
        """
        text = textwrap.dedent(
            f"""
            [security]
            workspace_root = "{self.workspace}"

            [tools]
            external_dir = "{self.external}"

            [tools.filter]
            allow_external = {_toml_value(allow_external)}

            [capabilities]
            active_preset = "test"

            [capabilities.presets.test]
            tools = {_toml_value(tools)}
            allow_network = {_toml_value(allow_network)}
            allow_write_paths = {_toml_value(write_paths or [])}
            """
        )
        if approval is not None:
            text += f'\n[approval]\ndefault = "{approval}"\n'
        self.config_path.write_text(text + extra)
        return self.config_path

    def runner(self) -> Any:
        from runner import Runner

        return Runner.from_config(self.config_path)


@pytest.fixture
def toolbox(tmp_path: Path) -> ToolBox:
    return ToolBox(tmp_path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
