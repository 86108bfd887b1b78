"""Approvals: modes from [approval], approval keys, remembered answers, the terminal prompt, --yes."""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import zigclaw as _zigclaw

from runner import ApprovalDenied, ApprovalRequired, InvalidManifest, ToolBlocked
from runner.approval import Answer, mode_for, parse_answer, terminal_approver

REPO = Path(__file__).resolve().parent.parent

WRITER_ARGS = """
type = "object"
required = ["path"]
additionalProperties = true
[args.properties.path]
type = "string"
[args.properties.content]
type = "string"
"""


@pytest.fixture
def writer(toolbox, guest):
    """An external tool `w` (ask mode by default) whose approval key is its `path`."""
    toolbox.add_tool("w", guest("exit_zero_silent"), args=WRITER_ARGS, approval_key=["path"])
    return toolbox


class Asker:
    """An approver that records what it was asked and gives scripted answers."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list = []

    def __call__(self, request):
        self.asked.append(request)
        return self.answers.pop(0)


def _run(runner, path: str, approve=None):
    # exit_zero_silent says nothing: MalformedResponse means the approval passed and it ran.
    from runner import MalformedResponse

    with pytest.raises(MalformedResponse):
        runner.run("w", {"path": path, "content": "x"}, approve=approve)


def test_default_modes_ask_for_external_tools_and_pre_approve_built_ins():
    assert mode_for(None, {}, "echo", builtin=True) == "preApproved"
    assert mode_for(None, {}, "x", builtin=False) == "ask"
    assert mode_for("blocked", {}, "echo", builtin=True) == "blocked"
    assert mode_for("ask", {"x": "preApproved"}, "x", builtin=False) == "preApproved"


def test_an_external_tool_without_an_approver_is_approval_required_with_a_hint(writer):
    writer.write_config(["w"], approval=None)
    with pytest.raises(ApprovalRequired) as info:
        writer.runner().run("w", {"path": "/write/a"})
    assert "--yes" in info.value.hint and "preApproved" in info.value.hint


def test_blocked_refuses_even_with_an_approver_and_built_ins_can_be_blocked(writer):
    writer.write_config(
        ["w", "echo"], approval=None, extra='\n[approval.tools]\nw = "blocked"\necho = "blocked"\n'
    )
    runner = writer.runner()
    asker = Asker(Answer.YES)
    with pytest.raises(ToolBlocked):
        runner.run("w", {"path": "/write/a"}, approve=asker)
    with pytest.raises(ToolBlocked):
        runner.run("echo", {"text": "hi"})
    assert asker.asked == []


def test_yes_approves_one_call_and_the_next_call_asks_again(writer):
    writer.write_config(["w"], approval=None)
    runner = writer.runner()
    asker = Asker(Answer.YES, Answer.YES)
    _run(runner, "/write/a", asker)
    _run(runner, "/write/a", asker)
    assert len(asker.asked) == 2


def test_no_is_approval_denied_and_nothing_runs(writer):
    writer.write_config(["w"], approval=None)
    with pytest.raises(ApprovalDenied):
        writer.runner().run("w", {"path": "/write/a"}, approve=Asker(Answer.NO))
    events = [json.loads(x) for x in (writer.root / ".zigclaw" / "audit.jsonl").read_text().splitlines()]
    assert "ToolInvocationStarted" not in [e["event"] for e in events]
    assert events[-2]["category"] == "tool.approval" and events[-2]["allowed"] is False
    assert events[-1]["error"] == "ApprovalDenied"


def test_session_approval_covers_only_the_same_approval_key(writer):
    writer.write_config(["w"], approval=None)
    runner = writer.runner()
    asker = Asker(Answer.SESSION, Answer.SESSION)
    _run(runner, "/write/out/a.txt", asker)
    _run(runner, "/write/out/a.txt", asker)  # remembered: not asked
    assert len(asker.asked) == 1
    assert asker.asked[0].key == (("path", '"/write/out/a.txt"'),)
    _run(runner, "/write/out/b.txt", asker)  # another path: asked again
    assert len(asker.asked) == 2
    events = [json.loads(x) for x in (writer.root / ".zigclaw" / "audit.jsonl").read_text().splitlines()]
    reasons = [e["reason"] for e in events if e.get("category") == "tool.approval"]
    assert reasons == [
        "approved for this session",
        "approved earlier for this session",
        "approved for this session",
    ]


def test_a_changed_policy_asks_again(writer):
    writer.write_config(["w"], approval=None, extra='\n[capabilities.presets.other]\ntools = ["w", "echo"]\n')
    runner = writer.runner()
    asker = Asker(Answer.SESSION, Answer.SESSION)
    _run(runner, "/write/a", asker)
    _run(runner, "/write/a", asker)
    assert len(asker.asked) == 1
    from runner import MalformedResponse

    with pytest.raises(MalformedResponse):
        runner.run("w", {"path": "/write/a"}, preset="other", approve=asker)  # another policy hash
    assert len(asker.asked) == 2
    assert asker.asked[0].policy_hash != asker.asked[1].policy_hash


def test_approval_key_must_name_arguments(toolbox, guest):
    toolbox.add_tool("w", guest("exit_zero_silent"), args=WRITER_ARGS, approval_key=["nope"])
    toolbox.write_config(["w"])
    with pytest.raises(InvalidManifest, match="approval_key"):
        toolbox.runner().run("w", {"path": "/write/a"})


def test_unknown_approval_modes_are_invalid_config(toolbox):
    from runner import InvalidConfig

    toolbox.write_config(["echo"], approval="maybe")
    with pytest.raises(InvalidConfig, match="approval"):
        toolbox.runner()


# --- the terminal prompt ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("y\n", Answer.YES),
        ("no\n", Answer.NO),
        ("s\n", Answer.SESSION),
        ("what\nYES\n", Answer.YES),  # garbage, then an answer
        ("what\n\x1b[31m\nmaybe\ny\n", Answer.NO),  # garbage three times: refused
        ("", Answer.NO),  # end of input
    ],
)
def test_terminal_prompt_answers(typed, expected):
    from runner.approval import ApprovalRequest

    err = io.StringIO()
    ask = terminal_approver(io.StringIO(typed), err)
    request = ApprovalRequest("w", (("path", '"/write/a"'),), "h", "m")
    assert ask(request) is expected
    assert "approve: run tool 'w' with path=\"/write/a\"" in err.getvalue()
    assert "\x1b" not in err.getvalue()


def test_parse_answer_takes_only_known_words():
    assert parse_answer(" Yes ") is Answer.YES
    assert parse_answer("session") is Answer.SESSION
    assert parse_answer("yes please") is None and parse_answer("") is None


# --- the CLI ----------------------------------------------------------------------------



def _ext_echo(toolbox) -> None:
    data = (REPO / "runner" / "_builtin" / "echo.wasm").read_bytes()
    toolbox.add_tool(
        "ext_echo",
        data,
        args='type = "object"\nrequired = ["text"]\n[args.properties.text]\ntype = "string"',
        approval_key=["text"],
    )
    toolbox.write_config(["ext_echo"], approval=None)


def test_cli_without_a_terminal_is_approval_required_unless_yes(toolbox):
    _ext_echo(toolbox)
    config = str(toolbox.config_path)
    proc = _zigclaw(
        toolbox.root, "tools", "run", "ext_echo", "--args", '{"text":"hi"}', "--config", config, stdin="y\n"
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "error: ApprovalRequired"
    assert "hint:" in proc.stderr and "--yes" in proc.stderr
    proc = _zigclaw(
        toolbox.root, "tools", "run", "ext_echo", "--args", '{"text":"hi"}', "--config", config, "--json"
    )
    assert json.loads(proc.stdout)["error"] == "ApprovalRequired"
    proc = _zigclaw(
        toolbox.root, "tools", "run", "ext_echo", "--args", '{"text":"hi"}', "--config", config, "--yes"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["data"] == {"echo": "hi"}


def _on_a_terminal(toolbox, typed: list[str]) -> tuple[int, str, str]:
    """Run `tools run ext_echo` with stdin and stderr on a pty; type each answer after a prompt."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner",
            "tools",
            "run",
            "ext_echo",
            "--args",
            '{"text":"hi"}',
            "--config",
            str(toolbox.config_path),
        ],
        cwd=toolbox.root,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
    )
    os.close(slave)
    seen = b""
    pending = list(typed)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            while pending and seen.count(b"session: ") > len(typed) - len(pending):
                os.write(master, pending.pop(0).encode() + b"\n")
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(60)
    os.close(master)
    return code, out, seen.decode("utf-8", "replace")


def test_cli_on_a_terminal_asks_and_runs_on_yes(toolbox):
    _ext_echo(toolbox)
    code, out, seen = _on_a_terminal(toolbox, ["y"])
    assert "approve: run tool 'ext_echo' with text=\"hi\"?" in seen
    assert code == 0, seen
    assert json.loads(out)["data"] == {"echo": "hi"}


def test_cli_on_a_terminal_refuses_a_prompt_answered_with_garbage(toolbox):
    _ext_echo(toolbox)
    code, out, seen = _on_a_terminal(toolbox, ["maybe", "\x1b[2J", "12345"])
    assert code == 1
    assert "not an answer" in seen
    assert "error: ApprovalDenied" in seen
    assert out == ""


def test_config_validate_warns_about_approvals_for_unknown_tools_and_readable_raw_args(toolbox):
    toolbox.write_config(
        ["echo"],
        approval=None,
        extra=f'\n[approval.tools]\nghost = "ask"\necho = "ask"\n[audit]\ninclude_args = true\n'
        f'path = "{toolbox.workspace}/.zigclaw/audit.jsonl"\n',
    )
    warnings = {(w.key_path, w.message) for w in toolbox.runner().validate_config()}
    assert ("approval.tools.ghost", "'ghost' is not a known tool") in warnings
    assert not any(key == "approval.tools.echo" for key, _ in warnings)
    assert any(key == "audit.path" and "inside the workspace" in message for key, message in warnings)
    toolbox.write_config(
        ["echo"], extra="\n[audit]\ninclude_args = true\n"
    )  # log beside, not in, the workspace
    assert not any(w.key_path == "audit.path" for w in toolbox.runner().validate_config())


@pytest.mark.parametrize(
    ("mode", "answer", "allowed", "error", "remembered"),
    [
        ("blocked", Answer.YES, False, "ToolBlocked", False),
        ("preApproved", None, True, None, False),
        ("ask", None, False, "ApprovalRequired", False),
        ("ask", Answer.NO, False, "ApprovalDenied", False),
        ("ask", "garbage", False, "ApprovalDenied", False),
        ("ask", Answer.YES, True, None, False),
        ("ask", Answer.SESSION, True, None, True),
    ],
)
def test_decide_approval_as_plain_data(mode, answer, allowed, error, remembered):
    from runner.approval import ApprovalMemory, ApprovalRequest, decide_approval

    request = ApprovalRequest("t", (("path", '"/a"'),), "hash", "sha")
    memory = ApprovalMemory()
    approve = None if answer is None else (lambda _r: answer)
    decision, refusal = decide_approval("t", mode, lambda: request, memory, approve)
    assert decision.category == "tool.approval" and decision.allowed is allowed
    assert (refusal.name if refusal else None) == error
    assert memory.knows(request) is remembered
    if remembered:  # asked no more for the same request
        decision, refusal = decide_approval("t", mode, lambda: request, memory, None)
        assert decision.allowed and refusal is None
