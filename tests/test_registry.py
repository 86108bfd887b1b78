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
