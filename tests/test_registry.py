"""Which tools exist and where they load from: built-ins only from the plugin folder."""

from __future__ import annotations

import pytest

import runner
from runner.registry import ORIGIN_BUILTIN, ORIGIN_EXTERNAL, builtin_names, discover


def test_an_external_manifest_named_like_a_builtin_never_replaces_it(toolbox, guest):
    # A hostile ext-tools/echo.{toml,wasm} that would answer with garbage.
    toolbox.add_tool("echo", guest("say_not_json"), args='type = "object"\nadditionalProperties = true')
    toolbox.write_config(["echo"], allow_external=True)
    run = toolbox.runner()
    assert run.run("echo", {"text": "built-in"}).data == {"echo": "built-in"}
    origins = {entry.name: entry.origin for entry in run.tools()}
    assert origins["echo"] == ORIGIN_BUILTIN


def test_discover_lists_builtins_and_externals_with_their_origin(toolbox, guest):
    toolbox.add_tool("mine", guest("exit_silent"))
    toolbox.write_config(["mine"])
    run = toolbox.runner()
    entries = {entry.name: entry for entry in discover(run.plugin_dir, run.external_dir)}
    assert {"echo", "fs_read", "fs_write"} <= builtin_names()
    assert entries["mine"].origin == ORIGIN_EXTERNAL
    assert all(entries[name].origin == ORIGIN_BUILTIN for name in builtin_names())


def test_a_precompiled_artifact_beside_a_tool_is_never_loaded_as_machine_code(toolbox, guest):
    # A wasmtime artifact (an ELF file) planted as the tool's module is refused, not deserialized.
    import wasmtime

    engine = wasmtime.Engine()
    artifact = wasmtime.Module(engine, guest("exit_silent")).serialize()
    toolbox.add_tool("planted", artifact, module="planted.cwasm")
    toolbox.write_config(["planted"])
    with pytest.raises(runner.InvalidModule, match="not a WebAssembly module"):
        toolbox.runner().run("planted", {})


def test_a_cwasm_next_to_the_module_is_ignored(toolbox, guest):
    # The manifest names x.wasm; an x.cwasm beside it plays no part in the run.
    toolbox.add_tool("x", guest("say_not_json"))
    (toolbox.external / "x.cwasm").write_bytes(b"\x7fELF" + b"\0" * 64)
    toolbox.write_config(["x"])
    with pytest.raises(runner.MalformedResponse):
        toolbox.runner().run("x", {})


# --- layers: built-in, then the user's global folder, then the project's external folder ----------


def _global_tool(monkeypatch, tmp_path, toolbox, name, wasm, **fields):
    """A tool in a fresh global layer ($ZIGCLAW_CONFIG_HOME/tools), written like toolbox.add_tool."""
    home = tmp_path / "config-home"
    monkeypatch.setenv("ZIGCLAW_CONFIG_HOME", str(home))
    folder = home / "tools"
    folder.mkdir(parents=True, exist_ok=True)
    path = toolbox.add_tool(name, wasm, **fields)
    for file in (path, toolbox.external / f"{name}.wasm"):
        if file.exists():
            file.rename(folder / file.name)
    return folder


def test_global_dir_follows_the_override_variable(monkeypatch, tmp_path):
    from runner.registry import global_tools_dir

    monkeypatch.setenv("ZIGCLAW_CONFIG_HOME", str(tmp_path))
    assert global_tools_dir() == tmp_path / "tools"


def test_a_global_tool_runs_and_is_listed_with_its_origin(monkeypatch, tmp_path, toolbox, guest):
    from runner.registry import ORIGIN_GLOBAL

    _global_tool(monkeypatch, tmp_path, toolbox, "glob", guest("say_not_json"))
    toolbox.write_config(["glob"])
    run = toolbox.runner()
    entries = {entry.name: entry for entry in run.tools()}
    assert entries["glob"].origin == ORIGIN_GLOBAL and entries["glob"].shadows == ()
    with pytest.raises(runner.MalformedResponse):  # it really ran the global module
        run.run("glob", {})


def test_the_external_filter_applies_to_the_global_layer(monkeypatch, tmp_path, toolbox, guest):
    _global_tool(monkeypatch, tmp_path, toolbox, "glob", guest("say_not_json"))
    toolbox.write_config(["glob"], allow_external=False)
    with pytest.raises(runner.ExternalToolDenied):
        toolbox.runner().run("glob", {})


def test_a_project_tool_shadows_a_global_tool_of_the_same_name(monkeypatch, tmp_path, toolbox, guest):
    _global_tool(monkeypatch, tmp_path, toolbox, "dup", guest("say_not_json"))
    toolbox.add_tool("dup", guest("exit_silent"))
    toolbox.write_config(["dup"])
    run = toolbox.runner()
    entry = next(e for e in run.tools() if e.name == "dup")
    assert entry.origin == ORIGIN_EXTERNAL and entry.shadows == ("global",)
    with pytest.raises(runner.ToolFailed):  # exit_silent exits 1 with no response: the project one ran
        run.run("dup", {})


def test_shadowing_a_builtin_needs_the_config_switch(monkeypatch, tmp_path, toolbox, guest):
    _global_tool(monkeypatch, tmp_path, toolbox, "echo", guest("say_not_json"))
    toolbox.write_config(["echo"])
    run = toolbox.runner()
    assert run.run("echo", {"text": "still built-in"}).data == {"echo": "still built-in"}
    assert next(e for e in run.tools() if e.name == "echo").origin == ORIGIN_BUILTIN

    text = toolbox.config_path.read_text().replace(
        "[tools]\n", "[tools]\nallow_shadow_builtin = true\n"
    )
    toolbox.config_path.write_text(text)
    run = toolbox.runner()
    entry = next(e for e in run.tools() if e.name == "echo")
    assert entry.origin == "global" and entry.shadows == (ORIGIN_BUILTIN,)
    with pytest.raises(runner.MalformedResponse):  # the global replacement ran
        run.run("echo", {"text": "x"})
    # Once shadowed, it is an external tool: the external filter decides.
    toolbox.config_path.write_text(text.replace("allow_external = true", "allow_external = false"))
    with pytest.raises(runner.ExternalToolDenied):
        toolbox.runner().run("echo", {"text": "x"})


def test_tools_list_on_a_terminal_shows_the_origin_and_what_a_tool_shadows(monkeypatch, tmp_path, guest):
    import re
    import sys

    from test_cli import _run_on_terminal, add_external_tool

    home = tmp_path / "home"
    (home / "tools").mkdir(parents=True)
    monkeypatch.setenv("ZIGCLAW_CONFIG_HOME", str(home))
    (home / "tools" / "dup.toml").write_text(
        'tool_name = "dup"\nversion = "1.0.0"\ndescription = "g"\n[args]\n'
    )
    (home / "tools" / "only_global.toml").write_text(
        'tool_name = "only_global"\nversion = "2.0.0"\ndescription = "g"\n[args]\ntype = "object"\n'
    )
    project = tmp_path / "project"
    project.mkdir()
    add_external_tool(project, "dup")
    out = _run_on_terminal(project, [sys.executable, "-m", "runner", "tools", "list"])
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    dup_row = next(line for line in plain.splitlines() if " dup " in line)
    assert "external" in dup_row and "global" in dup_row  # the project's dup hides the global one
    global_row = next(line for line in plain.splitlines() if " only_global " in line)
    assert "global" in global_row and "2.0.0" in global_row
