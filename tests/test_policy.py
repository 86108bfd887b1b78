"""Policy decisions (SPEC 4): the pure gates in runner/policy.py and the Runner's explain output."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from runner.config import Preset
from runner.errors import ZigclawError
from runner.policy import (
    ActivePreset,
    check_tool_name,
    check_write_path,
    explain_mount,
    external_filter,
    integrity_check,
    network_gate,
    policy_hash,
    preset_gate,
)
from runner.service import Runner


def active(
    name: str = "readonly",
    tools: list[str] | None = None,
    *,
    network: bool = False,
    writes: list[str] | None = None,
) -> ActivePreset:
    return ActivePreset(
        name,
        Preset(
            tools=["echo"] if tools is None else tools, allow_network=network, allow_write_paths=writes or []
        ),
    )


def runner_for(tmp_path: Path, body: str) -> Runner:
    path = tmp_path / "zigclaw.toml"
    path.write_text(textwrap.dedent(body))
    return Runner.from_config(path)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


DEFAULT_HASH_TEXT = "workspace_root=.;preset=readonly;allow_network=false;tools=echo,;write_paths="


# --- step 1: tool name ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["echo", "fs_read", "a", "a" * 64, "x9_"])
def test_plain_tool_names_pass(name: str) -> None:
    decision = check_tool_name(name)
    assert decision.allowed is True
    assert decision.category == "tool.name"


@pytest.mark.parametrize(
    "name",
    [
        "a/b",
        "..",
        "x\0y",
        "Echo",
        "\u0435\u0441ho",
        "",
        "a" * 65,
        "echo\n",
        "../echo",
        "/echo",
        "1echo",
        "_echo",
        "ec ho",
        "echo.toml",
        "echo\\x",
    ],
    ids=[
        "slash",
        "dotdot",
        "nul",
        "upper",
        "cyrillic",
        "empty",
        "65",
        "newline",
        "rel",
        "abs",
        "digit",
        "underscore",
        "space",
        "dot",
        "backslash",
    ],
)
def test_non_plain_tool_names_are_refused(name: str) -> None:
    decision = check_tool_name(name)
    assert decision.allowed is False
    assert decision.category == "tool.name"
    assert "not a plain tool name" in decision.reason


def test_refused_name_is_shown_escaped_and_bounded() -> None:
    reason = check_tool_name("x\0y\n" + "z" * 500).reason
    assert "\0" not in reason and "\n" not in reason
    assert "\\x00" in reason
    assert len(reason) < 200


def test_cyrillic_look_alike_is_shown_escaped() -> None:
    assert "\\u0435" in check_tool_name("\u0435\u0441ho").reason


# --- step 2: preset gate --------------------------------------------------------------------------


def test_preset_gate_allows_a_listed_tool() -> None:
    decision = preset_gate(active(tools=["echo", "fs_read"]), "fs_read")
    assert (decision.category, decision.allowed) == ("tool.allow", True)
    assert "readonly" in decision.reason


def test_preset_gate_denies_an_unlisted_tool() -> None:
    decision = preset_gate(active(tools=["echo"]), "fs_write")
    assert (decision.category, decision.allowed) == ("tool.allow", False)
    assert decision.reason == "denied: tool not in preset 'readonly'"


def test_preset_gate_denies_everything_under_an_undefined_preset() -> None:
    decision = preset_gate(ActivePreset("nosuch", None), "echo")
    assert (decision.category, decision.allowed) == ("tool.allow", False)
    assert "nosuch" in decision.reason and "not defined" in decision.reason


def test_undefined_preset_has_no_tools_network_or_write_paths() -> None:
    undefined = ActivePreset("nosuch", None)
    assert list(undefined.tools) == []
    assert undefined.allow_network is False
    assert list(undefined.write_paths) == []


# --- step 3: external filter ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builtin", "allow_external", "allow_list", "allowed"),
    [
        (True, False, [], True),
        (True, False, ["other"], True),
        (False, False, [], False),
        (False, False, ["ext"], False),
        (False, True, [], True),
        (False, True, ["ext", "other"], True),
        (False, True, ["other"], False),
    ],
    ids=[
        "builtin",
        "builtin-listed-other",
        "ext-off",
        "ext-off-listed",
        "ext-on-empty",
        "ext-on-listed",
        "ext-on-not-listed",
    ],
)
def test_external_filter_truth_table(
    builtin: bool, allow_external: bool, allow_list: list[str], allowed: bool
) -> None:
    decision = external_filter("ext", builtin=builtin, allow_external=allow_external, allow_list=allow_list)
    assert decision.category == "tool.external_filter"
    assert decision.allowed is allowed


def test_external_filter_reasons_name_the_setting() -> None:
    off = external_filter("ext", builtin=False, allow_external=False, allow_list=[])
    assert "allow_external" in off.reason
    unlisted = external_filter("ext", builtin=False, allow_external=True, allow_list=["x"])
    assert "external_allow_list" in unlisted.reason and "ext" in unlisted.reason


# --- steps 5 and 6 -------------------------------------------------------------------------------


def test_network_gate() -> None:
    assert network_gate(active(network=False), False).allowed is True
    assert network_gate(active(network=True), True).allowed is True
    denied = network_gate(active(network=False), True)
    assert (denied.category, denied.allowed) == ("tool.network", False)
    assert "readonly" in denied.reason
    assert network_gate(ActivePreset("nosuch", None), True).allowed is False


def test_integrity_check() -> None:
    digest = "a" * 64
    assert integrity_check(None, digest).allowed is True
    assert integrity_check(digest, digest).allowed is True
    mismatch = integrity_check("b" * 64, digest)
    assert (mismatch.category, mismatch.allowed) == ("tool.integrity", False)
    assert digest in mismatch.reason and "b" * 64 in mismatch.reason


# --- policy hash ---------------------------------------------------------------------------------


def test_policy_hash_of_the_default_config_matches_zigclaw_text() -> None:
    assert policy_hash(".", active()) == sha(DEFAULT_HASH_TEXT)


def test_runner_policy_hash_with_no_config_file_matches_zigclaw_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = Runner.from_config()
    assert runner.policy_hash() == sha(DEFAULT_HASH_TEXT)
    assert runner.explain_mount("a")["policy_hash"] == sha(DEFAULT_HASH_TEXT)


def test_policy_hash_text_with_tools_and_write_paths() -> None:
    preset = active("dev", ["fs_write", "echo"], network=True, writes=["out", "/data/b"])
    expected = sha(
        "workspace_root=/ws;preset=dev;allow_network=true;tools=echo,fs_write,;write_paths=/data/b,out,"
    )
    assert policy_hash("/ws", preset) == expected


def test_policy_hash_ignores_order_of_tools_and_write_paths() -> None:
    one = active(tools=["echo", "fs_read", "fs_write"], writes=["a", "b"])
    two = active(tools=["fs_write", "echo", "fs_read"], writes=["b", "a"])
    assert policy_hash(".", one) == policy_hash(".", two)


@pytest.mark.parametrize(
    ("root", "preset"),
    [
        ("./ws", active()),
        (".", active("other")),
        (".", active(network=True)),
        (".", active(tools=["echo", "fs_read"])),
        (".", active(tools=[])),
        (".", active(writes=["out"])),
    ],
    ids=["root", "name", "network", "tools", "no-tools", "writes"],
)
def test_policy_hash_changes_when_any_input_changes(root: str, preset: ActivePreset) -> None:
    assert policy_hash(root, preset) != policy_hash(".", active())


# --- explain --mount -----------------------------------------------------------------------------

DENIED_KEYS = ["mount", "allowed", "reason", "policy_hash"]
ALLOWED_KEYS = [*DENIED_KEYS, "guest_path", "read_only"]


def test_workspace_relative_path_is_allowed_read_only() -> None:
    result = explain_mount(".", active(), "src/main.zig")
    assert list(result) == ALLOWED_KEYS
    assert result["mount"] == "src/main.zig"
    assert result["allowed"] is True
    assert result["guest_path"] == "/workspace/src/main.zig"
    assert result["read_only"] is True
    assert result["policy_hash"] == sha(DEFAULT_HASH_TEXT)


@pytest.mark.parametrize(("path", "guest"), [(".", "/workspace"), ("./a/", "/workspace/a")])
def test_workspace_root_itself_maps_to_workspace(path: str, guest: str) -> None:
    result = explain_mount(".", active(), path)
    assert result["allowed"] is True
    assert result["guest_path"] == guest


def test_write_path_is_allowed_writable_under_write_basename() -> None:
    result = explain_mount(".", active(writes=["data/out"]), "data/out/report.txt")
    assert list(result) == ALLOWED_KEYS
    assert result["allowed"] is True
    assert result["guest_path"] == "/write/out/report.txt"
    assert result["read_only"] is False


def test_absolute_write_path_is_allowed_writable() -> None:
    result = explain_mount("/ws", active(writes=["/srv/out"]), "/srv/out/x")
    assert (result["allowed"], result["guest_path"], result["read_only"]) == (True, "/write/out/x", False)


def test_absolute_path_inside_an_absolute_workspace_is_allowed() -> None:
    result = explain_mount("/ws", active(), "/ws/a/b")
    assert (result["allowed"], result["guest_path"], result["read_only"]) == (True, "/workspace/a/b", True)


@pytest.mark.parametrize("path", ["/etc/passwd", "/ws2/a", "/ws/../etc", "/", "../x"])
def test_paths_outside_an_absolute_workspace_are_denied(path: str) -> None:
    result = explain_mount("/ws", active(), path)
    assert list(result) == DENIED_KEYS
    assert result["allowed"] is False


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", "./..", "..", "data/out/../../x"])
def test_paths_outside_the_workspace_are_denied(path: str) -> None:
    result = explain_mount(".", active(writes=["data/out"]), path)
    assert list(result) == DENIED_KEYS
    assert result["mount"] == path
    assert result["allowed"] is False
    assert "denied" in result["reason"]


def test_dotdot_out_of_a_write_path_is_not_writable() -> None:
    result = explain_mount(".", active(writes=["out"]), "out/../secret")
    assert not (result["allowed"] and result.get("read_only") is False)


@pytest.mark.parametrize("path", ["", "./"])
def test_empty_path_is_denied(path: str) -> None:
    result = explain_mount(".", active(), path)
    assert list(result) == DENIED_KEYS
    assert result["allowed"] is False
    assert "empty" in result["reason"]


# --- Runner.explain_tool / explain_mount / static_decisions --------------------------------------

CONFIG = """
[tools]
external_dir = "{ext}"

[tools.filter]
allow_external = {allow_external}
external_allow_list = {allow_list}

[capabilities]
active_preset = "dev"

[capabilities.presets.dev]
tools = ["echo", "fs_write", "mytool"]
allow_write_paths = ["out"]

[capabilities.presets.readonly]
tools = ["echo"]
"""


def dev_runner(tmp_path: Path, allow_external: str = "false", allow_list: str = "[]") -> Runner:
    ext = tmp_path / "ext"
    ext.mkdir(exist_ok=True)
    return runner_for(tmp_path, CONFIG.format(ext=ext, allow_external=allow_external, allow_list=allow_list))


def test_explain_tool_allows_a_builtin_in_the_active_preset(tmp_path: Path) -> None:
    result = dev_runner(tmp_path).explain_tool("fs_write")
    assert list(result) == ["tool", "allowed", "reason", "policy_hash"]
    assert result["tool"] == "fs_write"
    assert result["allowed"] is True
    assert "dev" in result["reason"]


def test_explain_tool_denies_a_tool_outside_the_preset(tmp_path: Path) -> None:
    result = dev_runner(tmp_path).explain_tool("fs_read")
    assert result["allowed"] is False
    assert result["reason"] == "denied: tool not in preset 'dev'"


def test_explain_tool_preset_argument_selects_the_preset(tmp_path: Path) -> None:
    runner = dev_runner(tmp_path)
    result = runner.explain_tool("fs_write", preset="readonly")
    assert result["allowed"] is False
    assert "readonly" in result["reason"]
    assert result["policy_hash"] == runner.policy_hash("readonly")
    assert result["policy_hash"] != runner.policy_hash()


def test_explain_tool_denies_an_external_tool_when_external_is_off(tmp_path: Path) -> None:
    result = dev_runner(tmp_path).explain_tool("mytool")
    assert result["allowed"] is False
    assert "allow_external" in result["reason"]


MYTOOL = """
tool_name = "mytool"
version = "1.0.0"
description = "an external tool"
requires_network = {network}

[args]
type = "object"
"""


def test_explain_tool_allows_an_external_tool_when_allowed_and_listed(tmp_path: Path) -> None:
    runner = dev_runner(tmp_path, "true", '["mytool"]')
    (tmp_path / "ext" / "mytool.toml").write_text(MYTOOL.format(network="false"))
    result = runner.explain_tool("mytool")
    assert result["allowed"] is True


def test_explain_tool_denies_what_the_run_would_refuse(tmp_path: Path) -> None:
    # No manifest: the run is ToolNotFound, so explain must not say allowed.
    runner = dev_runner(tmp_path, "true", '["mytool"]')
    missing = runner.explain_tool("mytool")
    assert missing["allowed"] is False
    assert "ToolNotFound" in missing["reason"]
    # A network tool under a preset without network: ToolNetworkNotAllowed at run time.
    (tmp_path / "ext" / "mytool.toml").write_text(MYTOOL.format(network="true"))
    network = runner.explain_tool("mytool")
    assert network["allowed"] is False
    assert "network" in network["reason"]


def test_explain_tool_denies_an_external_tool_missing_from_the_allow_list(tmp_path: Path) -> None:
    result = dev_runner(tmp_path, "true", '["other"]').explain_tool("mytool")
    assert result["allowed"] is False
    assert "external_allow_list" in result["reason"]


def test_explain_tool_refuses_a_path_like_name(tmp_path: Path) -> None:
    result = dev_runner(tmp_path).explain_tool("../echo")
    assert result["allowed"] is False
    assert "not a plain tool name" in result["reason"]


def test_explain_tool_hash_matches_independent_computation(tmp_path: Path) -> None:
    result = dev_runner(tmp_path).explain_tool("echo")
    expected = sha(
        "workspace_root=.;preset=dev;allow_network=false;tools=echo,fs_write,mytool,;write_paths=out,"
    )
    assert result["policy_hash"] == expected


def test_static_decisions_run_in_spec_order(tmp_path: Path) -> None:
    runner = dev_runner(tmp_path, "true")
    decisions = runner.static_decisions("mytool", runner.active_preset())
    assert [d.category for d in decisions] == ["tool.name", "tool.allow", "tool.external_filter"]
    assert all(d.allowed for d in decisions)


@pytest.mark.parametrize(
    ("tool", "categories"),
    [
        ("a/b", ["tool.name"]),
        ("fs_read", ["tool.name", "tool.allow"]),
        ("mytool", ["tool.name", "tool.allow", "tool.external_filter"]),
    ],
)
def test_static_decisions_stop_at_the_first_denial(tmp_path: Path, tool: str, categories: list[str]) -> None:
    runner = dev_runner(tmp_path)
    decisions = runner.static_decisions(tool, runner.active_preset())
    assert [d.category for d in decisions] == categories
    assert decisions[-1].allowed is False
    assert all(d.allowed for d in decisions[:-1])


def test_runner_explain_mount_uses_the_active_preset_write_paths(tmp_path: Path) -> None:
    runner = dev_runner(tmp_path)
    writable = runner.explain_mount("out/log.txt")
    assert list(writable) == ALLOWED_KEYS
    assert (writable["allowed"], writable["guest_path"], writable["read_only"]) == (
        True,
        "/write/out/log.txt",
        False,
    )
    assert writable["policy_hash"] == runner.policy_hash()
    read_only = runner.explain_mount("out/log.txt", preset="readonly")
    assert (read_only["guest_path"], read_only["read_only"]) == ("/workspace/out/log.txt", True)
    denied = runner.explain_mount("../x")
    assert list(denied) == DENIED_KEYS and denied["allowed"] is False


def test_runner_explain_mount_under_undefined_preset_still_answers(tmp_path: Path) -> None:
    runner = dev_runner(tmp_path)
    result = runner.explain_mount("a", preset="nosuch")
    assert result["allowed"] is True
    assert result["read_only"] is True
    assert result["policy_hash"] == sha(
        "workspace_root=.;preset=nosuch;allow_network=false;tools=;write_paths="
    )


# --- write paths ---------------------------------------------------------------------------

PROTECTED = [
    ("the config file", "/home/u/proj/zigclaw.toml"),
    ("the external tools folder", "/home/u/proj/ext"),
]


@pytest.mark.parametrize(
    ("raw", "literal", "real", "exists", "reason"),
    [
        ("/", "/", "/", True, "root of the file system"),
        ("..", "/home/u/..", "/home", True, "goes through a symbolic link"),
        ("/home/u", "/home/u", "/home/u", True, "contains the config file"),
        ("proj", "/home/u/proj", "/home/u/proj", True, "contains the config file"),
        ("ext", "/home/u/proj/ext", "/home/u/proj/ext", True, "contains the external tools folder"),
        ("missing", "/home/u/proj/missing", "/home/u/proj/missing", False, "not an existing folder"),
        ("link", "/data/link", "/etc", True, "goes through a symbolic link"),
        ("ws-parent", "/data", "/data", True, "contains the workspace"),
        ("out", "/data/ws/out/sub", "/data/ws/out/sub", True, "overlaps another write path"),
    ],
)
def test_check_write_path_refuses_dangerous_or_unusable_paths(raw, literal, real, exists, reason) -> None:
    decision = check_write_path(
        raw,
        literal,
        real,
        exists=exists,
        taken=set(),
        protected=PROTECTED,
        workspace=("/data/ws", "/data/ws"),
        siblings=["/data/ws/out", real],
    )
    assert decision.allowed is False
    assert reason in decision.reason


def test_check_write_path_refuses_a_second_mount_with_the_same_name() -> None:
    decision = check_write_path(
        "b/out", "/data/b/out", "/data/b/out", exists=True, taken={"out"}, protected=PROTECTED
    )
    assert decision.allowed is False and "twice" in decision.reason


def test_check_write_path_allows_a_plain_folder() -> None:
    decision = check_write_path(
        "out",
        "/home/u/proj/out",
        "/home/u/proj/out",
        exists=True,
        taken=set(),
        protected=PROTECTED,
        workspace=("/home/u/proj", "/home/u/proj"),
        siblings=["/home/u/proj/out", "/home/u/proj/logs"],
    )
    assert decision.allowed is True and "/write/out" in decision.reason


def test_a_write_path_holding_the_config_is_refused_at_run_time_and_in_explain(tmp_path: Path) -> None:
    # A tool that could rewrite zigclaw.toml could grant itself anything on the next run.
    body = f"""
[security]
workspace_root = "{tmp_path}"

[capabilities]
active_preset = "rw"

[capabilities.presets.rw]
tools = ["fs_write"]
allow_write_paths = ["{tmp_path}"]
"""
    runner = runner_for(tmp_path, body)
    with pytest.raises(ZigclawError) as info:
        runner.run("fs_write", {"path": f"/write/{tmp_path.name}/zigclaw.toml", "content": "x"})
    assert info.value.name == "InvalidConfig"
    assert "contains the config file" in info.value.message
    explained = runner.explain_mount(str(tmp_path / "zigclaw.toml"))
    assert explained["allowed"] is False
    assert "contains the config file" in explained["reason"]


def _rw_config(tmp_path: Path, workspace: Path, writes: list[str]) -> Runner:
    listed = ", ".join(f'"{w}"' for w in writes)
    body = f"""
[security]
workspace_root = "{workspace}"

[capabilities]
active_preset = "rw"

[capabilities.presets.rw]
tools = ["fs_write"]
allow_write_paths = [{listed}]
"""
    config_dir = tmp_path / "config"
    config_dir.mkdir(exist_ok=True)
    return runner_for(config_dir, body)


def _refusal(runner: Runner) -> str:
    with pytest.raises(ZigclawError) as info:
        runner.run("fs_write", {"path": "/write/x/y", "content": "z"})
    assert info.value.name == "InvalidConfig"
    return info.value.message


def test_a_write_path_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "target").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "target")
    assert "symbolic link" in _refusal(_rw_config(tmp_path, tmp_path / "ws", [str(tmp_path / "out")]))


def test_nested_write_paths_are_refused(tmp_path: Path) -> None:
    # Run 1 could swap out/sub for a symlink and aim run 2's mount anywhere.
    (tmp_path / "ws").mkdir()
    (tmp_path / "out" / "sub").mkdir(parents=True)
    writes = [str(tmp_path / "out"), str(tmp_path / "out" / "sub")]
    assert "overlaps" in _refusal(_rw_config(tmp_path, tmp_path / "ws", writes))


def test_a_write_path_holding_the_workspace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "proj" / "ws").mkdir(parents=True)
    message = _refusal(_rw_config(tmp_path, tmp_path / "proj" / "ws", [str(tmp_path / "proj")]))
    assert "contains the workspace" in message


def test_a_write_path_holding_the_module_cache_is_refused(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "out" / "cache").mkdir(parents=True)
    monkeypatch.setenv("ZIGCLAW_CACHE_DIR", str(tmp_path / "out" / "cache"))
    message = _refusal(_rw_config(tmp_path, tmp_path / "ws", [str(tmp_path / "out")]))
    assert "module cache" in message


def test_a_mount_that_changed_after_its_check_is_not_mapped(tmp_path: Path) -> None:
    import wasmtime

    from runner.errors import SandboxUnavailable
    from runner.policy import Mount
    from runner.sandbox.wasi import WasiRuntime

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    other = (tmp_path / "b").stat()
    mount = Mount(str(tmp_path / "a"), "/workspace", True, (other.st_dev, other.st_ino))
    with pytest.raises(SandboxUnavailable, match="changed after it was checked"):
        WasiRuntime._preopen(wasmtime.WasiConfig(), mount)
