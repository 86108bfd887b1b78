"""The audit trail: what each call leaves behind, whole lines under concurrency and crashes, `audit tail`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import zigclaw as _zigclaw

from runner import AuditUnavailable, InvalidConfig, ToolNotAllowed
from runner.audit import AuditLog, args_sha256, read_entries, redact, tail

REPO = Path(__file__).resolve().parent.parent


def _entries(toolbox) -> list[dict]:
    return [json.loads(line) for line in (toolbox.root / ".zigclaw" / "audit.jsonl").read_text().splitlines()]


def test_a_run_logs_each_decision_then_start_then_success_with_its_figures(toolbox):
    toolbox.write_config(["echo"])
    result = toolbox.runner().run("echo", {"text": "hi"})
    lines = _entries(toolbox)
    events = [line["event"] for line in lines]
    assert events == ["ToolDecision"] * 6 + ["ToolInvocationStarted", "ToolInvocationSucceeded"]
    assert {line["request_id"] for line in lines} == {result.request_id}
    categories = [line["category"] for line in lines[:6]]
    assert categories == [
        "tool.name",
        "tool.allow",
        "tool.external_filter",
        "tool.integrity",
        "tool.network",
        "tool.approval",
    ]
    assert all(line["allowed"] is True and line["reason"] for line in lines[:6])
    end = lines[-1]
    for key in ("time", "tool", "origin", "module_sha256", "preset", "policy_hash", "args_sha256", "limits"):
        assert end[key], key
    assert end["origin"] == "built-in" and end["preset"] == "test"
    assert end["args_sha256"] == args_sha256({"text": "hi"})
    assert "args" not in end and "args" not in lines[-2]
    assert end["limits"]["max_runtime_ms"] == 2000
    assert end["outcome"] == "succeeded" and end["error"] is None and end["tool_ok"] is True
    assert end["fuel_used"] == result.fuel_used > 0
    assert end["peak_memory_bytes"] >= 65536
    assert end["output_bytes"] > 0 and end["duration_ms"] > 0


def test_a_denied_call_logs_the_denial_and_a_failure_but_never_a_start(toolbox):
    toolbox.write_config(["echo"])
    with pytest.raises(ToolNotAllowed):
        toolbox.runner().run("fs_read", {"path": "x"})
    lines = _entries(toolbox)
    assert [line["event"] for line in lines] == ["ToolDecision", "ToolDecision", "ToolInvocationFailed"]
    assert lines[1]["category"] == "tool.allow" and lines[1]["allowed"] is False
    assert "not in preset" in lines[1]["reason"]
    assert lines[2]["outcome"] == "failed" and lines[2]["error"] == "ToolNotAllowed"


def test_a_failed_run_names_its_error(toolbox, guest):
    toolbox.add_tool("spin", guest("loop_forever"), max_runtime_ms=50)
    toolbox.write_config(["spin"])
    with pytest.raises(Exception, match="limit"):
        toolbox.runner().run("spin", {})
    end = _entries(toolbox)[-1]
    assert end["event"] == "ToolInvocationFailed" and end["error"] == "ToolTimeout"
    assert end["origin"] == "external" and end["fuel_used"] is None


def test_raw_args_only_with_include_args_and_secrets_are_redacted_at_any_depth(toolbox):
    toolbox.add_tool("any", None)
    toolbox.write_config(["echo"], extra="\n[audit]\ninclude_args = true\n")
    args = {"text": "hi"}
    toolbox.runner().run("echo", args)
    assert _entries(toolbox)[-2]["args"] == args
    nested = {
        "Password": "p",
        "user": {"api_KEY": "k", "list": [{"refresh_token": "t", "ok": 1}], "SECRET": {"x": 1}},
        "text": "fine",
    }
    assert redact(nested) == {
        "Password": "[redacted]",
        "user": {
            "api_KEY": "[redacted]",
            "list": [{"refresh_token": "[redacted]", "ok": 1}],
            "SECRET": "[redacted]",
        },
        "text": "fine",
    }


def test_audit_off_by_config_writes_nothing(toolbox):
    toolbox.write_config(["echo"], extra="\n[audit]\nenabled = false\n")
    toolbox.runner().run("echo", {"text": "hi"})
    assert not (toolbox.root / ".zigclaw").exists()


@pytest.mark.parametrize("where", ["under_a_file", "symlink", "a_folder"])
def test_an_unwritable_audit_path_is_a_clear_error_at_start(toolbox, where, tmp_path):
    blocker = toolbox.root / "blocker"
    blocker.write_text("a file")
    if where == "under_a_file":
        path = blocker / "audit.jsonl"
    elif where == "symlink":
        path = toolbox.root / "link.jsonl"
        path.symlink_to(tmp_path / "elsewhere.jsonl")
    else:
        path = toolbox.root / "dir.jsonl"
        path.mkdir()
    toolbox.write_config(["echo"], extra=f'\n[audit]\npath = "{path}"\n')
    with pytest.raises(AuditUnavailable) as info:
        toolbox.runner()
    assert str(path) in info.value.message
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_cli_reports_an_unwritable_audit_path_before_running(toolbox):
    blocker = toolbox.root / "blocker"
    blocker.write_text("a file")
    toolbox.write_config(["echo"], extra=f'\n[audit]\npath = "{blocker}/audit.jsonl"\n')
    proc = _zigclaw(
        toolbox.root, "tools", "run", "echo", "--args", '{"text":"hi"}', "--config", str(toolbox.config_path)
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "error: AuditUnavailable"
    assert "hint:" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_read_only_audit_folder_is_refused_at_start(toolbox):
    if os.geteuid() == 0:
        pytest.skip("root writes through folder permissions; the other unwritable-path cases still run")
    folder = toolbox.root / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    toolbox.write_config(["echo"], extra=f'\n[audit]\npath = "{folder}/audit.jsonl"\n')
    with pytest.raises(AuditUnavailable):
        toolbox.runner()


def test_a_write_mount_may_not_hold_the_audit_log(toolbox):
    toolbox.write_config(["echo"], write_paths=[str(toolbox.root)])
    with pytest.raises(InvalidConfig, match=r"audit log|config file"):
        toolbox.runner().run("echo", {"text": "hi"})
    audit_dir = toolbox.root / "logs"
    audit_dir.mkdir()
    toolbox.write_config(
        ["echo"], write_paths=[str(audit_dir)], extra=f'\n[audit]\npath = "{audit_dir}/a.jsonl"\n'
    )
    with pytest.raises(InvalidConfig, match="audit log"):
        toolbox.runner().run("echo", {"text": "hi"})


# --- whole lines ---------------------------------------------------------------------


def test_threads_appending_at_once_leave_only_whole_lines(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    threads = [
        threading.Thread(
            target=lambda n=n: [
                log.append([{"event": "x", "t": n, "i": i, "pad": "y" * (i % 300)}]) for i in range(300)
            ]
        )
        for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    raw = (tmp_path / "a.jsonl").read_bytes()
    lines = raw.splitlines()
    assert raw.endswith(b"\n") and len(lines) == 8 * 300
    parsed = [json.loads(line) for line in lines]
    assert {(p["t"], p["i"]) for p in parsed} == {(n, i) for n in range(8) for i in range(300)}


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from runner.audit import AuditLog
    log = AuditLog(Path(sys.argv[1]))
    tag, count = sys.argv[2], int(sys.argv[3])
    for i in range(count):
        # batches of 1-3 lines, some long, as a run writes them
        pad = "z" * ((i * 37) % 5000)
        log.append([{"event": "x", "w": tag, "i": i, "j": j, "pad": pad} for j in range(1 + i % 3)])
    """
)


def _writer(path: Path, tag: str, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), tag, str(count)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_two_processes_appending_at_once_leave_only_whole_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    writers = [_writer(path, tag, 1500) for tag in ("a", "b")]
    for proc in writers:
        assert proc.wait(120) == 0
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    parsed = [json.loads(line) for line in raw.splitlines()]  # every line parses
    per_writer = sum(1 + i % 3 for i in range(1500))
    assert len(parsed) == 2 * per_writer
    for tag in ("a", "b"):
        mine = {(p["i"], p["j"]) for p in parsed if p["w"] == tag}
        assert len(mine) == per_writer


def test_a_writer_killed_mid_stream_leaves_no_partial_line(tmp_path):
    path = tmp_path / "a.jsonl"
    proc = _writer(path, "k", 1_000_000)
    while not path.exists() or path.stat().st_size < 200_000:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    assert all(json.loads(line)["w"] == "k" for line in complete.splitlines())
    # Whatever a crash left, the next writer starts from whole lines only.
    AuditLog(path).append([{"event": "after"}])
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = [json.loads(line) for line in raw.splitlines()]
    assert lines[-1] == {"event": "after"}


def test_a_fragment_left_by_a_crash_is_cut_off_and_never_read_as_an_entry(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"event":"ok","n":1}\n{"event":"torn","n":')
    assert [e["n"] for e in read_entries(path)] == [1]
    AuditLog(path).append([{"event": "ok", "n": 2}])
    assert path.read_bytes() == b'{"event":"ok","n":1}\n{"event":"ok","n":2}\n'


def test_a_short_write_is_undone_and_reported(tmp_path, monkeypatch):
    path = tmp_path / "a.jsonl"
    log = AuditLog(path)
    log.append([{"event": "ok"}])
    before = path.read_bytes()
    real_write = os.write
    monkeypatch.setattr("runner.audit.os.write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    with pytest.raises(AuditUnavailable, match="only"):
        log.append([{"event": "half", "pad": "x" * 100}])
    monkeypatch.undo()
    assert path.read_bytes() == before


def test_a_run_whose_start_cannot_be_logged_does_not_run(toolbox, monkeypatch):
    toolbox.write_config(["echo"])
    runner = toolbox.runner()
    import runner.sandbox.wasi as wasi

    ran: list[bool] = []
    real = wasi.WasiRuntime.run
    monkeypatch.setattr(wasi.WasiRuntime, "run", lambda self, plan: ran.append(True) or real(self, plan))
    monkeypatch.setattr(
        runner.audit, "append", lambda lines: (_ for _ in ()).throw(AuditUnavailable("disk full"))
    )
    with pytest.raises(AuditUnavailable):
        runner.run("echo", {"text": "hi"})
    assert ran == []


# --- audit tail ----------------------------------------------------------------------



def test_audit_tail_prints_json_lines_when_piped_with_filters(toolbox, guest):
    toolbox.add_tool("spin", guest("loop_forever"), max_runtime_ms=50)
    toolbox.write_config(["echo", "spin"])
    runner = toolbox.runner()
    runner.run("echo", {"text": "one"})
    with pytest.raises(Exception, match="limit"):
        runner.run("spin", {})
    config = str(toolbox.config_path)
    proc = _zigclaw(toolbox.root, "audit", "tail", "--config", config)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == 16 and lines[-1]["event"] == "ToolInvocationFailed"
    proc = _zigclaw(toolbox.root, "audit", "tail", "-n", "3", "--config", config)
    assert len(proc.stdout.splitlines()) == 3
    proc = _zigclaw(toolbox.root, "audit", "tail", "--failed", "--config", config)
    failed = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(f["tool"], f["error"]) for f in failed] == [("spin", "ToolTimeout")]
    proc = _zigclaw(toolbox.root, "audit", "tail", "--tool", "echo", "--config", config)
    assert {json.loads(line)["tool"] for line in proc.stdout.splitlines()} == {"echo"}


def test_audit_tail_prints_a_table_on_a_terminal(toolbox):
    import pty

    toolbox.write_config(["echo"])
    toolbox.runner().run("echo", {"text": "hi"})
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "audit", "tail", "-n", "2", "--config", str(toolbox.config_path)],
        cwd=toolbox.root,
        env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
        stdout=slave,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(60) == 0
    os.close(master)
    text = out.decode("utf-8", "replace")
    assert "ToolInvocationSucceeded" in text and "event" in text
    assert not text.lstrip().startswith("{")


def test_audit_tail_of_no_log_prints_nothing(tmp_path):
    proc = _zigclaw(tmp_path, "audit", "tail")
    assert proc.returncode == 0 and proc.stdout == ""
    assert tail(tmp_path / "none.jsonl", 5) == []


def test_audit_tail_of_a_fifo_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "audit.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(AuditUnavailable, match="not a regular file"):
        tail(fifo, 5)
    with pytest.raises(AuditUnavailable):
        AuditLog(fifo)
