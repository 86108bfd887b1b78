"""The built-in tools (SPEC 8) through the Python API: echo, fs_read, fs_write, the registry and pins."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runner import InvalidToolArgs, ToolAbiMismatch, ToolIntegrityMismatch
from runner.abi import abi_fingerprint

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN = Path(__file__).resolve().parent.parent / "runner" / "_builtin"
BUILTINS = ("echo", "fs_read", "fs_write")
ZIGCLAW_ECHO_ABI = "cf4319544dcaf7fc07c77d5dd7aebd045993a3453eae0c32f5e346322748a86f"


class Box:
    """The conftest toolbox with an `out` folder mounted read-write at /write/out."""

    def __init__(self, toolbox: Any) -> None:
        self.toolbox = toolbox
        self.root: Path = toolbox.root
        self.workspace: Path = toolbox.workspace
        self.external: Path = toolbox.external
        self.out = self.root / "out"
        self.out.mkdir()

    def write_config(
        self,
        tools: list[str] | tuple[str, ...] = BUILTINS,
        *,
        plugin_dir: Path | None = None,
        extra: str = "",
    ) -> Path:
        path = self.toolbox.write_config(list(tools), write_paths=[str(self.out)], extra=extra)
        if plugin_dir is not None:
            text = path.read_text()
            assert text.count("[tools]\n") == 1
            path.write_text(
                text.replace("[tools]\n", f"[tools]\nplugin_dir = {json.dumps(str(plugin_dir))}\n")
            )
        return path

    def runner(self) -> Any:
        return self.toolbox.runner()


@pytest.fixture
def box(toolbox: Any) -> Box:
    sandbox = Box(toolbox)
    sandbox.write_config()
    return sandbox


def files_under(folder: Path) -> set[Path]:
    # The audit trail (.zigclaw/) is the one thing a run leaves behind, by design.
    return {path for path in folder.rglob("*") if ".zigclaw" not in path.relative_to(folder).parts}


# --- echo ------------------------------------------------------------------------------------


def test_echo_returns_the_text_as_data_and_echo_ok_on_stdout(box: Box) -> None:
    result = box.runner().run("echo", {"text": "hello"})
    assert result.ok is True
    assert result.data == {"echo": "hello"}
    assert result.stdout == "echo ok"
    assert result.stderr == ""


@pytest.mark.parametrize(
    "text",
    ["", "héllo wörld", "日本語のテキスト", "emoji 🦀🚀", 'quotes " and \\ backslash', "line\nbreak\ttab"],
)
def test_echo_round_trips_unicode_and_escapes(box: Box, text: str) -> None:
    result = box.runner().run("echo", {"text": text})
    assert result.ok is True
    assert result.data == {"echo": text}


# --- fs_read ---------------------------------------------------------------------------------


def read_bytes(result: Any) -> bytes:
    assert result.ok is True, result
    return base64.b64decode(result.data["content_base64"], validate=True)


BINARY = bytes(range(256)) * 4 + b"\x00\xff\x00tail"


@pytest.mark.parametrize("path", ["blob.bin", "./blob.bin", "/workspace/blob.bin"])
def test_fs_read_returns_the_file_bytes_as_base64(box: Box, path: str) -> None:
    (box.workspace / "blob.bin").write_bytes(BINARY)
    assert read_bytes(box.runner().run("fs_read", {"path": path})) == BINARY


def test_fs_read_reads_a_file_in_a_workspace_subfolder(box: Box) -> None:
    (box.workspace / "sub").mkdir()
    (box.workspace / "sub" / "f.txt").write_bytes(b"nested")
    assert read_bytes(box.runner().run("fs_read", {"path": "sub/f.txt"})) == b"nested"


def test_fs_read_of_an_empty_file_returns_empty_content(box: Box) -> None:
    (box.workspace / "empty").write_bytes(b"")
    assert read_bytes(box.runner().run("fs_read", {"path": "empty"})) == b""


@pytest.mark.parametrize("size", [999, 1000])
def test_fs_read_accepts_a_file_up_to_max_bytes(box: Box, size: int) -> None:
    content = bytes((i * 7) % 256 for i in range(size))
    (box.workspace / "f.bin").write_bytes(content)
    result = box.runner().run("fs_read", {"path": "f.bin", "max_bytes": 1000})
    assert read_bytes(result) == content


def test_fs_read_accepts_a_file_just_under_the_default_max_bytes(box: Box) -> None:
    content = bytes(range(256)) * 255 + bytes(255)  # 65535 bytes
    (box.workspace / "big.bin").write_bytes(content)
    assert read_bytes(box.runner().run("fs_read", {"path": "big.bin"})) == content


def test_fs_read_of_a_file_over_max_bytes_is_ok_false(box: Box) -> None:
    (box.workspace / "f.bin").write_bytes(b"x" * 1001)
    result = box.runner().run("fs_read", {"path": "f.bin", "max_bytes": 1000})
    assert result.ok is False
    assert "content_base64" not in json.dumps(result.data)


def test_fs_read_of_a_file_over_the_default_max_bytes_is_ok_false(box: Box) -> None:
    (box.workspace / "big.bin").write_bytes(b"y" * 65537)
    result = box.runner().run("fs_read", {"path": "big.bin"})
    assert result.ok is False


def test_fs_read_of_a_missing_file_is_ok_false(box: Box) -> None:
    result = box.runner().run("fs_read", {"path": "nope.txt"})
    assert result.ok is False


def test_fs_read_max_bytes_out_of_range_is_InvalidToolArgs(box: Box) -> None:
    for max_bytes in (0, 1048577, -1):
        with pytest.raises(InvalidToolArgs):
            box.runner().run("fs_read", {"path": "f.bin", "max_bytes": max_bytes})


def test_fs_read_max_bytes_that_passes_validation_is_honoured_by_the_tool(box: Box) -> None:
    # JSON Schema counts 10.0 as an integer, so the runner accepts it; the tool must then
    # honour it instead of failing the run (it is either rejected up front or it works).
    (box.workspace / "f.bin").write_bytes(b"abc")
    try:
        result = box.runner().run("fs_read", {"path": "f.bin", "max_bytes": 10.0})
    except InvalidToolArgs:
        return
    assert read_bytes(result) == b"abc"


def test_fs_read_and_fs_write_handle_their_maximum_sizes(box: Box) -> None:
    content = bytes((i * 31) % 256 for i in range(1048576))
    (box.workspace / "mib.bin").write_bytes(content)
    runner = box.runner()
    assert read_bytes(runner.run("fs_read", {"path": "mib.bin", "max_bytes": 1048576})) == content
    written = runner.run("fs_write", {"path": "/write/out/mib.txt", "content": "z" * 1048576})
    assert written.data == {"bytes_written": 1048576}
    assert (box.out / "mib.txt").stat().st_size == 1048576


SECRET = b"TOP-SECRET-BESIDE-THE-WORKSPACE"


def assert_secret_not_leaked(result: Any) -> None:
    assert result.ok is False, result
    text = json.dumps(result.to_json()) + result.stdout + result.stderr
    assert SECRET.decode() not in text
    assert base64.b64encode(SECRET).decode()[:20] not in text


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../secret",
        "/workspace/../secret",
        "../../secret",
        "/secret",
        "/workspace/sub/../../secret",
    ],
)
def test_fs_read_outside_the_workspace_is_ok_false_and_never_the_content(box: Box, path: str) -> None:
    (box.root / "secret").write_bytes(SECRET)
    (box.workspace / "sub").mkdir()
    result = box.runner().run("fs_read", {"path": path})
    assert_secret_not_leaked(result)
    if path == "/etc/passwd":
        assert "root:" not in json.dumps(result.to_json())


def test_fs_read_through_a_symlink_out_of_the_workspace_is_ok_false(box: Box) -> None:
    (box.root / "secret").write_bytes(SECRET)
    (box.workspace / "link").symlink_to(box.root / "secret")
    assert_secret_not_leaked(box.runner().run("fs_read", {"path": "link"}))


# --- fs_write --------------------------------------------------------------------------------


def test_fs_write_under_a_write_mount_creates_the_host_file(box: Box) -> None:
    result = box.runner().run("fs_write", {"path": "/write/out/a.txt", "content": "hello, world"})
    assert result.ok is True, result
    assert result.data == {"bytes_written": 12}
    assert (box.out / "a.txt").read_text() == "hello, world"


def test_fs_write_reports_bytes_not_characters_for_unicode_content(box: Box) -> None:
    content = "héllo 🦀"
    result = box.runner().run("fs_write", {"path": "/write/out/u.txt", "content": content})
    assert result.ok is True, result
    assert result.data == {"bytes_written": len(content.encode())}
    assert (box.out / "u.txt").read_text(encoding="utf-8") == content


def test_fs_write_overwrites_an_existing_file(box: Box) -> None:
    (box.out / "a.txt").write_text("a much longer old content")
    result = box.runner().run("fs_write", {"path": "/write/out/a.txt", "content": "new"})
    assert result.ok is True
    assert (box.out / "a.txt").read_text() == "new"


def test_fs_write_to_the_read_only_workspace_is_ok_false_and_creates_nothing(box: Box) -> None:
    before = files_under(box.root)
    result = box.runner().run("fs_write", {"path": "/workspace/x.txt", "content": "nope"})
    assert result.ok is False
    assert not (box.workspace / "x.txt").exists()
    assert files_under(box.root) == before


def test_fs_write_cannot_overwrite_a_workspace_file(box: Box) -> None:
    (box.workspace / "keep.txt").write_text("original")
    result = box.runner().run("fs_write", {"path": "/workspace/keep.txt", "content": "changed"})
    assert result.ok is False
    assert (box.workspace / "keep.txt").read_text() == "original"


@pytest.mark.parametrize(
    "path", ["/write/out/../escape.txt", "/write/escape.txt", "/escape.txt", "../escape.txt"]
)
def test_fs_write_out_of_the_write_mount_is_ok_false_and_creates_nothing(box: Box, path: str) -> None:
    before = files_under(box.root)
    result = box.runner().run("fs_write", {"path": path, "content": "escaped"})
    assert result.ok is False
    assert files_under(box.root) == before
    assert not (box.root / "escape.txt").exists()


# --- the README's worked example: a tool that may write one folder ---------------------------------

README_CONFIG = """
[security]
workspace_root = "."            # mounted read-only at /workspace

[capabilities]
active_preset = "writer"

[capabilities.presets.writer]
tools = ["echo", "fs_read", "fs_write"]
allow_write_paths = ["out"]     # mounted read-write at /write/out
"""


@pytest.fixture
def demo(tmp_path: Path) -> Any:
    """The README's `demo` folder: notes.txt, out/ and zigclaw.toml with relative paths."""
    from runner import Runner

    folder = tmp_path / "demo"
    (folder / "out").mkdir(parents=True)
    (folder / "notes.txt").write_text("notes from the host\n")
    (folder / "zigclaw.toml").write_text(README_CONFIG)
    return folder, Runner.from_config(folder / "zigclaw.toml")


def test_readme_example_fs_read_returns_the_notes(demo: Any) -> None:
    _, runner = demo
    result = runner.run("fs_read", {"path": "notes.txt"})
    assert result.ok is True
    assert result.data == {"content_base64": "bm90ZXMgZnJvbSB0aGUgaG9zdAo="}
    assert result.stdout == "fs_read ok"
    assert result.stderr == ""


def test_readme_example_fs_write_lands_in_the_host_out_folder(demo: Any) -> None:
    folder, runner = demo
    result = runner.run("fs_write", {"path": "/write/out/result.txt", "content": "done"})
    assert result.ok is True
    assert result.data == {"bytes_written": 4}
    assert result.stdout == "fs_write ok"
    assert (folder / "out" / "result.txt").read_text() == "done"


def test_readme_example_fs_write_to_the_workspace_fails_inside_the_sandbox(demo: Any) -> None:
    folder, runner = demo
    result = runner.run("fs_write", {"path": "/workspace/notes.txt", "content": "x"})
    assert result.ok is False
    assert result.data == {"error": "write failed"}
    assert (folder / "notes.txt").read_text() == "notes from the host\n"


def test_readme_example_policy_explain_mount_maps_out_to_write_out(demo: Any) -> None:
    _, runner = demo
    explained = runner.explain_mount("out/result.txt")
    assert list(explained) == ["mount", "allowed", "reason", "policy_hash", "guest_path", "read_only"]
    assert explained["mount"] == "out/result.txt"
    assert explained["allowed"] is True
    assert explained["reason"] == "allowed writable by preset 'writer' path 'out'"
    assert explained["policy_hash"] == runner.policy_hash()
    assert explained["guest_path"] == "/write/out/result.txt"
    assert explained["read_only"] is False


def test_readme_example_flow_end_to_end_write_then_read_back(demo: Any) -> None:
    folder, runner = demo
    guest_path = runner.explain_mount("out/result.txt")["guest_path"]
    assert runner.run("fs_write", {"path": guest_path, "content": "done"}).ok is True
    read_back = runner.run("fs_read", {"path": guest_path})
    assert read_bytes(read_back) == b"done"
    assert (folder / "out" / "result.txt").read_bytes() == b"done"


def test_workspace_path_is_explained_read_only_at_workspace(box: Box) -> None:
    explained = box.runner().explain_mount(str(box.workspace / "notes.txt"))
    assert explained["allowed"] is True
    assert explained["read_only"] is True
    assert explained["guest_path"] == "/workspace/notes.txt"


# --- the registry of built-ins ------------------------------------------------------------------


def load_registry_json() -> dict[str, dict[str, Any]]:
    raw = json.loads((BUILTIN / "registry.json").read_text())
    return {entry["name"]: entry for entry in raw["tools"]}


def test_registry_lists_the_builtin_tools() -> None:
    assert set(BUILTINS) <= set(load_registry_json())


@pytest.mark.parametrize("tool", BUILTINS)
def test_registry_abi_is_the_fingerprint_of_the_manifest_args(tool: str) -> None:
    manifest = tomllib.loads((BUILTIN / f"{tool}.toml").read_text())
    entry = load_registry_json()[tool]
    assert entry["abi"] == abi_fingerprint(manifest["args"])
    assert entry["requires_network"] is manifest.get("requires_network", False)
    assert entry["native"] is manifest.get("native", False)


def test_registry_echo_abi_equals_zigclaws_fingerprint() -> None:
    assert load_registry_json()["echo"]["abi"] == ZIGCLAW_ECHO_ABI


def _plugin_dir_with_changed_echo_schema(box: Box) -> Path:
    plugins = box.root / "plugins"
    shutil.copytree(BUILTIN, plugins)
    echo = plugins / "echo.toml"
    text = echo.read_text()
    assert "max_length = 1024" in text
    echo.write_text(text.replace("max_length = 1024", "max_length = 2048"))
    return plugins


def test_strict_registry_refuses_a_builtin_whose_args_schema_changed(box: Box) -> None:
    plugins = _plugin_dir_with_changed_echo_schema(box)
    box.write_config(
        plugin_dir=plugins,
        extra="\n[tools.registry]\nstrict = true\n",
    )
    with pytest.raises(ToolAbiMismatch):
        box.runner().run("echo", {"text": "hi"})


def test_non_strict_registry_runs_a_builtin_whose_args_schema_changed(box: Box) -> None:
    plugins = _plugin_dir_with_changed_echo_schema(box)
    box.write_config(plugin_dir=plugins)
    result = box.runner().run("echo", {"text": "hi"})
    assert result.data == {"echo": "hi"}


def test_strict_registry_runs_an_unchanged_copy_of_the_builtins(box: Box) -> None:
    plugins = box.root / "plugins"
    shutil.copytree(BUILTIN, plugins)
    box.write_config(
        plugin_dir=plugins,
        extra="\n[tools.registry]\nstrict = true\n",
    )
    assert box.runner().run("echo", {"text": "hi"}).data == {"echo": "hi"}


# --- sha256 pins ----------------------------------------------------------------------------


def _pinned_tool(box: Box, pin: str) -> None:
    module = (BUILTIN / "echo.wasm").read_bytes()
    (box.external / "pinned.wasm").write_bytes(module)
    (box.external / "pinned.toml").write_text(
        textwrap.dedent(
            f"""
            tool_name = "pinned"
            version = "1.0.0"
            description = "echo, pinned"
            sha256 = "{pin}"

            [args]
            type = "object"
            required = ["text"]

            [args.properties.text]
            type = "string"
            """
        )
    )
    box.write_config(tools=[*BUILTINS, "pinned"])


def test_external_tool_with_the_right_sha256_pin_runs(box: Box) -> None:
    _pinned_tool(box, hashlib.sha256((BUILTIN / "echo.wasm").read_bytes()).hexdigest())
    result = box.runner().run("pinned", {"text": "pinned hi"})
    assert result.ok is True
    assert result.data == {"echo": "pinned hi"}


def test_external_tool_with_a_wrong_sha256_pin_is_ToolIntegrityMismatch(box: Box) -> None:
    _pinned_tool(box, "0" * 64)
    with pytest.raises(ToolIntegrityMismatch):
        box.runner().run("pinned", {"text": "pinned hi"})


def test_external_tool_whose_module_changed_after_pinning_is_ToolIntegrityMismatch(box: Box) -> None:
    _pinned_tool(box, hashlib.sha256((BUILTIN / "echo.wasm").read_bytes()).hexdigest())
    with (box.external / "pinned.wasm").open("ab") as module:
        module.write(b"\x00")  # a trailing byte changes the hash
    with pytest.raises(ToolIntegrityMismatch):
        box.runner().run("pinned", {"text": "pinned hi"})
