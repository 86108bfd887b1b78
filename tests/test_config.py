"""zigclaw.toml (SPEC 3): defaults with no file, errors for wrong types, and the exact warnings
of `config validate`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.config import Preset, load_config
from runner.errors import InvalidConfig, ToolNotAllowed, ZigclawError
from runner.service import Runner


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "zigclaw.toml"
    path.write_text(textwrap.dedent(body))
    return path


def warnings_of(tmp_path: Path, body: str) -> list[tuple[str, str]]:
    runner = Runner.from_config(write_config(tmp_path, body))
    return [(w.key_path, w.message) for w in runner.validate_config()]


def config_error(path: Path) -> InvalidConfig:
    with pytest.raises(ZigclawError) as info:
        Runner.from_config(path)
    assert type(info.value) is InvalidConfig
    assert info.value.name == "InvalidConfig"
    assert "\n" not in info.value.message
    return info.value


def add_external_tool(folder: Path, name: str, *, requires_network: bool = False) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text(
        f'tool_name = "{name}"\nversion = "1.0.0"\ndescription = "t"\n'
        f"requires_network = {'true' if requires_network else 'false'}\n\n"
        '[args]\ntype = "object"\n'
    )


# --- loading -------------------------------------------------------------------------------------


def test_no_config_file_gives_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = Runner.from_config()
    config = runner.loaded.config
    assert runner.loaded.source is None
    assert config.capabilities.active_preset == "readonly"
    assert config.capabilities.presets == {
        "readonly": Preset(tools=["echo"], allow_network=False, allow_write_paths=[])
    }
    assert config.security.workspace_root == "."
    assert config.tools.external_dir == "./ext-tools"
    assert config.tools.filter.allow_external is False
    assert config.tools.filter.external_allow_list == []
    assert config.tools.registry.strict is False
    assert runner.active_preset().tools == ["echo"]


def test_defaults_produce_no_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Runner.from_config().validate_config() == []


def test_zigclaw_toml_in_the_current_folder_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(
        tmp_path, '[capabilities]\nactive_preset = "dev"\n[capabilities.presets.dev]\ntools = ["fs_read"]\n'
    )
    monkeypatch.chdir(tmp_path)
    runner = Runner.from_config()
    assert runner.loaded.config.capabilities.active_preset == "dev"
    assert runner.active_preset().tools == ["fs_read"]


def test_explicit_config_path_that_does_not_exist_is_invalid_config(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    error = config_error(missing)
    assert str(missing) in error.message
    assert "does not exist" in error.message


def test_explicit_config_path_is_used_over_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, '[capabilities]\nactive_preset = "cwd"\n')
    other = tmp_path / "other"
    other.mkdir()
    explicit = write_config(other, '[capabilities]\nactive_preset = "explicit"\n')
    monkeypatch.chdir(tmp_path)
    assert Runner.from_config(explicit).loaded.config.capabilities.active_preset == "explicit"


def test_relative_paths_resolve_against_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    path = write_config(conf, '[tools]\nexternal_dir = "tools"\n[security]\nworkspace_root = "ws"\n')
    monkeypatch.chdir(tmp_path)
    runner = Runner.from_config(path)
    assert runner.external_dir.resolve() == (conf / "tools").resolve()
    assert runner.workspace.resolve() == (conf / "ws").resolve()


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('[tools.filter]\nallow_external = "yes"\n', "tools.filter.allow_external"),
        ('[tools.filter]\nexternal_allow_list = "foo"\n', "tools.filter.external_allow_list"),
        ('[capabilities.presets.readonly]\ntools = "echo"\n', "capabilities.presets.readonly.tools"),
        (
            "[capabilities.presets.readonly]\nallow_network = 1\n",
            "capabilities.presets.readonly.allow_network",
        ),
        (
            "[capabilities.presets.readonly]\nallow_write_paths = [1]\n",
            "capabilities.presets.readonly.allow_write_paths",
        ),
        ("[capabilities]\nactive_preset = 3\n", "capabilities.active_preset"),
        ("[security]\nworkspace_root = true\n", "security.workspace_root"),
        ('[tools.registry]\nstrict = "false"\n', "tools.registry.strict"),
        ("[tools]\nexternal_dir = 5\n", "tools.external_dir"),
        ("security = 5\n", "security"),
        ("[capabilities.presets]\nreadonly = 5\n", "capabilities.presets.readonly"),
    ],
)
def test_wrong_value_type_is_invalid_config_naming_the_key(tmp_path: Path, body: str, key: str) -> None:
    path = write_config(tmp_path, body)
    error = config_error(path)
    assert str(path) in error.message
    assert key in error.message


def test_malformed_toml_is_invalid_config(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[tools\nexternal_dir = \n")
    error = config_error(path)
    assert str(path) in error.message
    assert "invalid TOML" in error.message


def test_non_utf8_config_is_invalid_config(tmp_path: Path) -> None:
    path = tmp_path / "zigclaw.toml"
    path.write_bytes(b'[security]\nworkspace_root = "\xff"\n')
    assert "UTF-8" in config_error(path).message


def test_deeply_nested_config_is_invalid_config(tmp_path: Path) -> None:
    path = write_config(tmp_path, "x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "invalid TOML" in config_error(path).message


def test_load_config_with_directory_path_is_invalid_config(tmp_path: Path) -> None:
    with pytest.raises(ZigclawError) as info:
        load_config(tmp_path)
    assert info.value.name == "InvalidConfig"


# --- warnings ------------------------------------------------------------------------------------


def test_unknown_key_with_a_close_match_suggests_it(tmp_path: Path) -> None:
    assert warnings_of(tmp_path, "[tools.filter]\nallow_extrnal = true\n") == [
        ("tools.filter.allow_extrnal", "unknown key (ignored); did you mean 'allow_external'?")
    ]


def test_unknown_key_without_a_close_match_has_no_suggestion(tmp_path: Path) -> None:
    assert warnings_of(tmp_path, '[security]\nfavourite_colour = "blue"\n') == [
        ("security.favourite_colour", "unknown key (ignored)")
    ]


def test_unknown_top_level_table_is_warned(tmp_path: Path) -> None:
    assert warnings_of(tmp_path, '[secrity]\nworkspace_root = "."\n') == [
        ("secrity", "unknown key (ignored); did you mean 'security'?")
    ]


def test_unknown_key_inside_a_preset_is_warned(tmp_path: Path) -> None:
    body = '[capabilities.presets.readonly]\ntools = ["echo"]\ntols = ["fs_read"]\nzzz = 1\n'
    assert warnings_of(tmp_path, body) == [
        ("capabilities.presets.readonly.tols", "unknown key (ignored); did you mean 'tools'?"),
        ("capabilities.presets.readonly.zzz", "unknown key (ignored)"),
    ]


def test_unknown_key_does_not_make_the_config_invalid(tmp_path: Path) -> None:
    runner = Runner.from_config(write_config(tmp_path, "[tools.filter]\nallow_extrnal = true\n"))
    assert runner.loaded.config.tools.filter.allow_external is False


def test_builtin_in_external_allow_list_is_redundant(tmp_path: Path) -> None:
    body = '[tools.filter]\nallow_external = true\nexternal_allow_list = ["echo"]\n'
    assert warnings_of(tmp_path, body) == [
        (
            "tools.filter.external_allow_list",
            "'echo' is a built-in tool; listing it in external_allow_list is redundant",
        )
    ]


def test_allow_list_entry_no_preset_references_is_dead(tmp_path: Path) -> None:
    body = '[tools.filter]\nallow_external = true\nexternal_allow_list = ["foo"]\n'
    assert warnings_of(tmp_path, body) == [
        ("tools.filter.external_allow_list", "'foo' is not referenced by any capability preset")
    ]


def test_allow_list_entry_referenced_by_any_preset_is_not_warned(tmp_path: Path) -> None:
    body = """
    [tools.filter]
    allow_external = true
    external_allow_list = ["foo"]

    [capabilities.presets.readonly]
    tools = ["echo"]

    [capabilities.presets.other]
    tools = ["foo"]
    """
    # 'foo' has no manifest (a warning of its own); the allow list itself is fine.
    assert [w for w in warnings_of(tmp_path, body) if w[0] == "tools.filter.external_allow_list"] == []


NETWORK_CONFIG = """
[tools]
external_dir = "{ext}"

[tools.filter]
allow_external = true

[capabilities]
active_preset = "web"

[capabilities.presets.web]
tools = ["echo", "fetcher", "local"]
allow_network = {network}
"""


def test_preset_listing_a_network_tool_without_network_is_warned(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    add_external_tool(ext, "fetcher", requires_network=True)
    add_external_tool(ext, "local")
    assert warnings_of(tmp_path, NETWORK_CONFIG.format(ext=ext, network="false")) == [
        (
            "capabilities.presets.web.allow_network",
            "preset 'web' includes network tool 'fetcher' but allow_network=false",
        )
    ]


def test_preset_listing_a_network_tool_with_network_is_not_warned(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    add_external_tool(ext, "fetcher", requires_network=True)
    add_external_tool(ext, "local")
    assert warnings_of(tmp_path, NETWORK_CONFIG.format(ext=ext, network="true")) == []


def test_unknown_active_preset_is_warned(tmp_path: Path) -> None:
    warnings = warnings_of(tmp_path, '[capabilities]\nactive_preset = "readonyl"\n')
    assert len(warnings) == 1
    key, message = warnings[0]
    assert key == "capabilities.active_preset"
    assert "unknown preset 'readonyl'" in message
    assert "did you mean 'readonly'?" in message


def test_unknown_active_preset_without_close_match_is_warned(tmp_path: Path) -> None:
    warnings = warnings_of(tmp_path, '[capabilities]\nactive_preset = "zzzzzzzz"\n')
    assert [key for key, _ in warnings] == ["capabilities.active_preset"]
    assert "unknown preset 'zzzzzzzz'" in warnings[0][1]
    assert "did you mean" not in warnings[0][1]


def test_warnings_come_unknown_keys_first_then_policy_checks(tmp_path: Path) -> None:
    body = """
    [tools.filter]
    allow_external = true
    external_allow_list = ["echo", "foo"]
    alow_external = true

    [capabilities]
    active_preset = "nosuchpreset"
    """
    assert [key for key, _ in warnings_of(tmp_path, body)] == [
        "tools.filter.alow_external",
        "tools.filter.external_allow_list",
        "tools.filter.external_allow_list",
        "capabilities.active_preset",
    ]


# --- fail closed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["echo", "fs_read", "anything"])
def test_unknown_active_preset_denies_every_tool(tmp_path: Path, tool: str) -> None:
    runner = Runner.from_config(write_config(tmp_path, '[capabilities]\nactive_preset = "readonyl"\n'))
    with pytest.raises(ZigclawError) as info:
        runner.run(tool, {"text": "hi"})
    assert type(info.value) is ToolNotAllowed
    assert info.value.name == "ToolNotAllowed"
    assert "readonyl" in info.value.message


def test_unknown_preset_chosen_at_run_time_denies_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ZigclawError) as info:
        Runner.from_config().run("echo", {"text": "hi"}, preset="nosuch")
    assert info.value.name == "ToolNotAllowed"
    assert "nosuch" in info.value.message


def test_validate_warns_about_what_would_fail_at_run_time(tmp_path: Path) -> None:
    body = f"""
    [security]
    workspace_root = "{tmp_path / "missing-ws"}"

    [tools.filter]
    external_allow_list = ["ghost"]

    [capabilities]
    active_preset = "p"

    [capabilities.presets.p]
    tools = ["echo", "ghost"]
    allow_write_paths = ["/", "{tmp_path / "nope"}", "{tmp_path}"]
    """
    found = warnings_of(tmp_path, body)
    keys = [key for key, _ in found]
    messages = " | ".join(message for _, message in found)
    assert ("security.workspace_root") in keys
    assert "has no effect while tools.filter.allow_external = false" in messages
    assert ("capabilities.presets.p.tools", "'ghost' is not a known tool") in found
    assert "is the root of the file system" in messages
    assert "is not an existing folder" in messages
    assert "contains the config file" in messages  # tmp_path holds zigclaw.toml
