"""The `zigclaw` CLI (SPEC 7), run as a real subprocess from a folder with no zigclaw.toml."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import zigclaw

from runner import __version__

REPO = Path(__file__).resolve().parent.parent
REQUEST_ID = re.compile(r"[0-9a-f]{32}")



def write_config(folder: Path, text: str) -> Path:
    path = folder / "zigclaw.toml"
    path.write_text(textwrap.dedent(text))
    return path


def add_external_tool(folder: Path, name: str, manifest: str | None = None) -> None:
    """An external tool in ./ext-tools: a copy of the built-in echo module and a manifest."""
    ext = folder / "ext-tools"
    ext.mkdir(exist_ok=True)
    shutil.copyfile(REPO / "runner" / "_builtin" / "echo.wasm", ext / f"{name}.wasm")
    if manifest is None:
        manifest = f"""
            tool_name = "{name}"
            version = "1.0.0"
            description = "external test tool"

            [args]
            type = "object"
            required = ["text"]

            [args.properties.text]
            type = "string"
            """
    (ext / f"{name}.toml").write_text(textwrap.dedent(manifest))


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout
    assert "Traceback" not in proc.stderr


def assert_runner_error(proc: subprocess.CompletedProcess[str], name: str, *, hint: bool) -> None:
    """Exit 1, `error: <name>` first on stderr, a `hint:` line when one is expected, no traceback."""
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines, "no error on stderr"
    assert lines[0] == f"error: {name}"
    hints = [line for line in lines if line.startswith("hint: ")]
    if hint:
        assert len(hints) == 1 and len(hints[0]) > len("hint: ")
    assert proc.stdout == ""


def assert_runner_error_json(proc: subprocess.CompletedProcess[str], name: str, *, hint: bool) -> None:
    """With --json: exit 1 and one JSON error object on stdout in SPEC 7's key order."""
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert list(obj) == ["ok", "command", "error", "message", "hint"]
    assert obj["ok"] is False
    assert obj["command"] == "tools"
    assert obj["error"] == name
    assert isinstance(obj["message"], str) and obj["message"]
    if hint:
        assert isinstance(obj["hint"], str) and obj["hint"]
    else:
        assert obj["hint"] is None or isinstance(obj["hint"], str)


# --- version and a successful run ---------------------------------------------------------


def test_version_prints_name_and_version_and_exits_0(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"zigclaw {__version__}\n"


def test_tools_run_echo_prints_one_compact_json_line_in_zigclaw_key_order(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "echo", "--args", '{"text":"hello"}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and proc.stdout.endswith("\n")
    obj = json.loads(lines[0])
    assert list(obj) == ["request_id", "ok", "data", "stdout", "stderr"]
    rid = obj["request_id"]
    assert REQUEST_ID.fullmatch(rid)
    assert lines[0] == (
        '{"request_id":"' + rid + '","ok":true,"data":{"echo":"hello"},"stdout":"echo ok","stderr":""}'
    )


def test_tools_run_gives_each_run_a_new_request_id(tmp_path: Path) -> None:
    ids = {
        json.loads(zigclaw(tmp_path, "tools", "run", "echo", "--args", '{"text":"x"}').stdout)["request_id"]
        for _ in range(2)
    }
    assert len(ids) == 2


# --- runner errors: exit 1, error/hint on stderr, or a JSON object with --json ------------------

INVALID_ARGS = [
    pytest.param("not json", id="bad-json"),
    pytest.param('["hello"]', id="not-an-object"),
    pytest.param("{}", id="missing-key"),
    pytest.param('{"text":"hi","extra":1}', id="unknown-key"),
    pytest.param('{"text":5}', id="wrong-type"),
    pytest.param(json.dumps({"text": "a" * 1025}), id="text-over-1024"),
]


@pytest.mark.parametrize("args", INVALID_ARGS)
def test_tools_run_with_invalid_args_is_InvalidToolArgs(tmp_path: Path, args: str) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "echo", "--args", args)
    assert_runner_error(proc, "InvalidToolArgs", hint=False)


@pytest.mark.parametrize("args", INVALID_ARGS)
def test_tools_run_with_invalid_args_and_json_prints_the_error_object(tmp_path: Path, args: str) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "echo", "--args", args, "--json")
    assert_runner_error_json(proc, "InvalidToolArgs", hint=False)


def test_tools_run_echo_text_of_exactly_1024_chars_is_accepted(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "echo", "--args", json.dumps({"text": "a" * 1024}))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["data"] == {"echo": "a" * 1024}


def test_tools_run_of_a_tool_outside_the_default_preset_is_ToolNotAllowed_with_hint(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "fs_read", "--args", '{"path":"x"}')
    assert_runner_error(proc, "ToolNotAllowed", hint=True)


def test_tools_run_not_allowed_with_json_prints_error_object_with_hint(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "fs_read", "--args", '{"path":"x"}', "--json")
    assert_runner_error_json(proc, "ToolNotAllowed", hint=True)


@pytest.mark.parametrize("name", ["../echo", "Echo"])
def test_tools_run_with_a_non_plain_tool_name_is_InvalidToolName(tmp_path: Path, name: str) -> None:
    proc = zigclaw(tmp_path, "tools", "run", name, "--args", '{"text":"hi"}')
    assert_runner_error(proc, "InvalidToolName", hint=True)


@pytest.mark.parametrize("name", ["../echo", "Echo"])
def test_tools_run_with_a_non_plain_tool_name_and_json_prints_error_object(tmp_path: Path, name: str) -> None:
    proc = zigclaw(tmp_path, "tools", "run", name, "--args", '{"text":"hi"}', "--json")
    assert_runner_error_json(proc, "InvalidToolName", hint=True)


def test_tools_run_of_an_external_tool_without_allow_external_is_ExternalToolDenied(tmp_path: Path) -> None:
    add_external_tool(tmp_path, "x")
    write_config(
        tmp_path,
        """
        [capabilities.presets.readonly]
        tools = ["echo", "x"]
        """,
    )
    proc = zigclaw(tmp_path, "tools", "run", "x", "--args", '{"text":"hi"}')
    assert_runner_error(proc, "ExternalToolDenied", hint=True)
    proc = zigclaw(tmp_path, "tools", "run", "x", "--args", '{"text":"hi"}', "--json")
    assert_runner_error_json(proc, "ExternalToolDenied", hint=True)


def test_tools_run_of_the_same_external_tool_runs_once_allow_external_is_true(tmp_path: Path) -> None:
    add_external_tool(tmp_path, "x")
    write_config(
        tmp_path,
        """
        [tools.filter]
        allow_external = true

        [capabilities.presets.readonly]
        tools = ["echo", "x"]
        """,
    )
    proc = zigclaw(tmp_path, "tools", "run", "x", "--args", '{"text":"hi"}', "--yes")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["data"] == {"echo": "hi"}


def test_tools_run_of_an_allowed_tool_without_a_manifest_is_ToolNotFound(tmp_path: Path) -> None:
    (tmp_path / "ext-tools").mkdir()
    write_config(
        tmp_path,
        """
        [tools.filter]
        allow_external = true

        [capabilities.presets.readonly]
        tools = ["echo", "ghost"]
        """,
    )
    proc = zigclaw(tmp_path, "tools", "run", "ghost", "--args", "{}")
    assert_runner_error(proc, "ToolNotFound", hint=True)
    proc = zigclaw(tmp_path, "tools", "run", "ghost", "--args", "{}", "--json")
    assert_runner_error_json(proc, "ToolNotFound", hint=True)


def test_tools_run_of_an_allowed_tool_with_malformed_toml_is_InvalidManifest(tmp_path: Path) -> None:
    add_external_tool(tmp_path, "broken", manifest='tool_name = "broken\nversion = = 1\n[args\n')
    write_config(
        tmp_path,
        """
        [tools.filter]
        allow_external = true

        [capabilities.presets.readonly]
        tools = ["echo", "broken"]
        """,
    )
    proc = zigclaw(tmp_path, "tools", "run", "broken", "--args", "{}")
    assert_runner_error(proc, "InvalidManifest", hint=True)
    proc = zigclaw(tmp_path, "tools", "run", "broken", "--args", "{}", "--json")
    assert_runner_error_json(proc, "InvalidManifest", hint=True)


# --- usage errors: exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["tools", "frobnicate"], id="unknown-subcommand"),
        pytest.param(["tools", "run"], id="run-without-tool"),
        pytest.param(["policy", "explain"], id="explain-neither"),
        pytest.param(["policy", "explain", "--tool", "echo", "--mount", "."], id="explain-both"),
    ],
)
def test_usage_errors_exit_2_without_traceback(tmp_path: Path, argv: list[str]) -> None:
    proc = zigclaw(tmp_path, *argv)
    assert_no_traceback(proc)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.strip()


# --- the other commands ----------------------------------------------------------------------


def test_tools_list_piped_prints_sorted_deduplicated_names(tmp_path: Path) -> None:
    # An external tool named like a built-in must not appear twice.
    add_external_tool(tmp_path, "echo")
    add_external_tool(tmp_path, "aaa_ext")
    proc = zigclaw(tmp_path, "tools", "list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert list(obj) == ["tools"]
    names = obj["tools"]
    assert names == sorted(set(names))
    assert {"echo", "fs_read", "fs_write", "aaa_ext"} <= set(names)


def test_tools_list_json_flag_prints_the_same_json(tmp_path: Path) -> None:
    piped = zigclaw(tmp_path, "tools", "list")
    flagged = zigclaw(tmp_path, "tools", "list", "--json")
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout == piped.stdout


def test_tools_describe_echo_prints_the_manifest_in_zigclaw_key_order(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "tools", "describe", "echo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('{"tool_name":"echo","version":')
    manifest = json.loads(proc.stdout)
    assert list(manifest)[:8] == [
        "tool_name",
        "version",
        "description",
        "requires_network",
        "native",
        "max_runtime_ms",
        "max_stdout_bytes",
        "max_stderr_bytes",
    ]
    assert manifest["args"]["required"] == ["text"]


def test_policy_explain_tool_prints_tool_allowed_reason_and_policy_hash(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "policy", "explain", "--tool", "echo")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert list(obj) == ["tool", "allowed", "reason", "policy_hash"]
    assert obj["tool"] == "echo"
    assert obj["allowed"] is True
    assert isinstance(obj["reason"], str) and obj["reason"]
    assert re.fullmatch(r"[0-9a-f]{64}", obj["policy_hash"])


def test_policy_explain_tool_outside_the_preset_says_denied(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "policy", "explain", "--tool", "fs_write")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["tool"] == "fs_write"
    assert obj["allowed"] is False


def test_config_validate_json_prints_ok_policy_hash_and_warnings(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "config", "validate", "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert list(obj) == ["ok", "policy_hash", "warnings"]
    assert obj["ok"] is True
    assert re.fullmatch(r"[0-9a-f]{64}", obj["policy_hash"])
    assert obj["warnings"] == []


def test_config_validate_policy_hash_matches_policy_explain(tmp_path: Path) -> None:
    validate = json.loads(zigclaw(tmp_path, "config", "validate", "--json").stdout)
    explain = json.loads(zigclaw(tmp_path, "policy", "explain", "--tool", "echo").stdout)
    assert validate["policy_hash"] == explain["policy_hash"]


def test_config_validate_warns_about_an_unknown_key_on_stderr_and_exits_0(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
        [security]
        workspace_rot = "."
        """,
    )
    proc = zigclaw(tmp_path, "config", "validate")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: security.workspace_rot: unknown key (ignored)")
    assert "workspace_root" in warnings[0]  # the "did you mean"


def test_config_validate_json_lists_the_unknown_key_warning(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
        [security]
        workspace_rot = "."
        """,
    )
    proc = zigclaw(tmp_path, "config", "validate", "--json")
    assert proc.returncode == 0, proc.stderr
    warnings = json.loads(proc.stdout)["warnings"]
    assert [w["key_path"] for w in warnings] == ["security.workspace_rot"]
    assert warnings[0]["message"].startswith("unknown key (ignored)")


def test_config_validate_with_a_wrong_value_type_is_InvalidConfig(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
        [security]
        workspace_root = 5
        """,
    )
    proc = zigclaw(tmp_path, "config", "validate")
    assert_no_traceback(proc)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "error: InvalidConfig"


# --- --preset --------------------------------------------------------------------------------


def _two_presets(folder: Path) -> None:
    (folder / "out").mkdir()
    write_config(
        folder,
        """
        [capabilities]
        active_preset = "readonly"

        [capabilities.presets.readonly]
        tools = ["echo"]

        [capabilities.presets.rw]
        tools = ["echo", "fs_write"]
        allow_write_paths = ["out"]
        """,
    )


def test_tools_run_with_preset_selects_that_preset(tmp_path: Path) -> None:
    _two_presets(tmp_path)
    args = json.dumps({"path": "/write/out/note.txt", "content": "written"})
    proc = zigclaw(tmp_path, "tools", "run", "fs_write", "--args", args, "--preset", "rw")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is True, result
    assert result["data"] == {"bytes_written": 7}
    assert (tmp_path / "out" / "note.txt").read_text() == "written"


def test_tools_run_without_preset_uses_the_active_preset(tmp_path: Path) -> None:
    _two_presets(tmp_path)
    args = json.dumps({"path": "/write/out/note.txt", "content": "written"})
    proc = zigclaw(tmp_path, "tools", "run", "fs_write", "--args", args)
    assert_runner_error(proc, "ToolNotAllowed", hint=True)
    assert not (tmp_path / "out" / "note.txt").exists()


def test_tools_run_with_an_undefined_preset_is_ToolNotAllowed_not_a_fallback(tmp_path: Path) -> None:
    _two_presets(tmp_path)
    proc = zigclaw(tmp_path, "tools", "run", "echo", "--args", '{"text":"hi"}', "--preset", "nope")
    assert_runner_error(proc, "ToolNotAllowed", hint=True)


def test_a_missing_config_file_given_with_config_is_InvalidConfig(tmp_path: Path) -> None:
    proc = zigclaw(tmp_path, "tools", "run", "echo", "--args", '{"text":"hi"}', "--config", "missing.toml")
    assert_runner_error(proc, "InvalidConfig", hint=True)
    proc = zigclaw(
        tmp_path, "tools", "run", "echo", "--args", '{"text":"hi"}', "--config", "missing.toml", "--json"
    )
    assert_runner_error_json(proc, "InvalidConfig", hint=True)


# --- the terminal table --------------------------------------------------------------------


def _run_on_terminal(cwd: Path, argv: list[str]) -> str:
    """Run argv with stdout on a pseudo-terminal and return what it printed."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "TERM": "xterm"}
    script = shutil.which("script")
    if script is not None:
        proc = subprocess.run(
            [script, "-qc", shlex.join(argv), "/dev/null"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout
    import pty

    parent, child = pty.openpty()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=child, stderr=child, stdin=subprocess.DEVNULL)
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(parent)
    return b"".join(chunks).decode("utf-8", "replace")


def test_tools_list_on_a_terminal_prints_a_table_with_origin_and_verdict(tmp_path: Path) -> None:
    out = _run_on_terminal(tmp_path, [sys.executable, "-m", "runner", "tools", "list"])
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert not plain.lstrip().startswith("{"), plain
    for name in ("echo", "fs_read", "fs_write", "built-in", "allowed", "denied"):
        assert name in plain, plain
    echo_row = next(line for line in plain.splitlines() if " echo " in line)
    assert "allowed" in echo_row and "built-in" in echo_row
    fs_write_row = next(line for line in plain.splitlines() if " fs_write " in line)
    assert "denied" in fs_write_row
    assert "Traceback" not in plain


def test_tools_list_on_a_terminal_shows_external_tools_and_invalid_manifests(tmp_path: Path) -> None:
    add_external_tool(tmp_path, "ext_ok")
    add_external_tool(tmp_path, "ext_bad", manifest='tool_name = "ext_bad"\n')  # no version, no [args]
    out = _run_on_terminal(tmp_path, [sys.executable, "-m", "runner", "tools", "list"])
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    ok_row = next(line for line in plain.splitlines() if " ext_ok " in line)
    assert "external" in ok_row and "denied" in ok_row  # allow_external is false by default
    bad_row = next(line for line in plain.splitlines() if " ext_bad " in line)
    assert "invalid" in bad_row
    assert "echo" in plain  # one bad manifest does not hide the other tools


# --- odd environments and hostile names ----------------------------------------------------


def test_a_closed_stdout_does_not_crash_the_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runner", "tools", "run", "echo", "--args", '{"text":"x"}'],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        close_fds=True,
        pass_fds=(),
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreadable_config_is_invalid_config_not_internal_error(tmp_path: Path) -> None:
    done = zigclaw(tmp_path, "tools", "list", "--config", "/proc/self/mem")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == "error: InvalidConfig"


def test_a_symlinked_config_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text('[capabilities]\nactive_preset = "readonly"\n')
    (tmp_path / "zigclaw.toml").symlink_to(real)
    done = zigclaw(tmp_path, "config", "validate", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_tools_list_json_leaves_out_names_that_can_never_run(tmp_path: Path) -> None:
    ext = tmp_path / "ext-tools"
    ext.mkdir()
    for stem in ("UPPER", "a b", "fine"):
        (ext / f"{stem}.toml").write_text("not toml at all [")
    (ext / b"\xff.toml".decode("utf-8", "surrogateescape")).write_text("x")
    done = zigclaw(tmp_path, "tools", "list", "--json")
    assert done.returncode == 0, done.stderr
    names = json.loads(done.stdout)["tools"]
    assert "fine" in names  # invalid manifest, but a name a fixed manifest could run under
    assert not {"UPPER", "a b"} & set(names)
    assert all(name.isascii() for name in names)


def test_manifest_text_cannot_smuggle_terminal_escapes_into_errors(tmp_path: Path) -> None:
    ext = tmp_path / "ext-tools"
    ext.mkdir()
    (ext / "evil.toml").write_text('tool_name = "evil"\n"\\u001b]0;owned\\u0007" = 1\n')
    (tmp_path / "zigclaw.toml").write_text(
        '[tools.filter]\nallow_external = true\n[capabilities.presets.readonly]\ntools = ["evil"]\n'
    )
    done = zigclaw(tmp_path, "tools", "run", "evil")
    assert done.returncode == 1
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert done.stderr.splitlines()[0] == "error: InvalidManifest"
