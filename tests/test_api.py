"""The Python API (SPEC 9): Runner.from_config(path).run(tool, args) -> RunResult, from many threads."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import runner as package
import runner.errors as runner_errors
from runner import (
    ExternalToolDenied,
    InvalidConfig,
    InvalidManifest,
    InvalidToolArgs,
    InvalidToolName,
    Runner,
    RunResult,
    ToolNotAllowed,
    ToolNotFound,
    ZigclawError,
)

REQUEST_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def runner(toolbox: Any) -> Runner:
    toolbox.write_config(["echo", "x", "ghost", "broken"], allow_external=True)
    return toolbox.runner()


def test_run_returns_a_run_result_with_the_protocol_fields(runner: Runner) -> None:
    result = runner.run("echo", {"text": "hi"})
    assert isinstance(result, RunResult)
    assert REQUEST_ID.fullmatch(result.request_id)
    assert result.ok is True
    assert result.data == {"echo": "hi"}
    assert result.stdout == "echo ok"
    assert result.stderr == ""


def test_run_accepts_the_args_as_json_text(runner: Runner) -> None:
    result = runner.run("echo", '{"text": "from json text"}')
    assert result.ok is True
    assert result.data == {"echo": "from json text"}


def test_run_result_to_json_has_zigclaws_key_order(runner: Runner) -> None:
    result = runner.run("echo", {"text": "hi"})
    out = result.to_json()
    assert list(out) == ["request_id", "ok", "data", "stdout", "stderr"]
    assert out == {
        "request_id": result.request_id,
        "ok": True,
        "data": {"echo": "hi"},
        "stdout": "echo ok",
        "stderr": "",
    }
    assert json.loads(json.dumps(out)) == out


def test_from_config_without_a_path_uses_the_defaults_in_an_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default = Runner.from_config()
    assert default.run("echo", {"text": "zero set-up"}).data == {"echo": "zero set-up"}
    with pytest.raises(ToolNotAllowed):
        default.run("fs_read", {"path": "x"})


def test_each_run_gets_a_new_request_id(runner: Runner) -> None:
    ids = {runner.run("echo", {"text": "same"}).request_id for _ in range(5)}
    assert len(ids) == 5


@pytest.mark.parametrize("threads", [2, 4])
def test_threads_sharing_one_runner_each_get_their_own_results(runner: Runner, threads: int) -> None:
    calls_per_thread = 50
    barrier = threading.Barrier(threads)

    def work(worker: int) -> list[tuple[str, RunResult]]:
        barrier.wait()  # start together so the calls really overlap
        out = []
        for i in range(calls_per_thread):
            text = f"worker {worker} call {i} " + "x" * (worker * 7 + i % 5)
            out.append((text, runner.run("echo", {"text": text})))
        return out

    with ThreadPoolExecutor(max_workers=threads) as pool:
        per_thread = list(pool.map(work, range(threads)))

    results = [pair for batch in per_thread for pair in batch]
    assert len(results) == threads * calls_per_thread
    for text, result in results:
        assert result.ok is True
        assert result.data == {"echo": text}
        assert result.stdout == "echo ok"
    ids = [result.request_id for _, result in results]
    assert len(set(ids)) == len(ids)
    assert all(REQUEST_ID.fullmatch(rid) for rid in ids)


# --- errors ------------------------------------------------------------------------------------


def _not_json(runner: Runner) -> None:
    runner.run("echo", '{\n"text":\n}')


def _not_an_object(runner: Runner) -> None:
    runner.run("echo", "[1, 2]")


def _schema_mismatch(runner: Runner) -> None:
    runner.run("echo", {"text": "line one\nline two" * 200})


def _bad_name(runner: Runner) -> None:
    runner.run("../echo\nrm -rf /", {"text": "hi"})


def _not_allowed(runner: Runner) -> None:
    runner.run("fs_read", {"path": "x"})


def _external_denied(runner: Runner, toolbox: Any) -> None:
    toolbox.add_tool("x", b"\0asm\1\0\0\0")
    toolbox.write_config(["echo", "x"], allow_external=False)
    toolbox.runner().run("x", {})


def _not_found(runner: Runner) -> None:
    runner.run("ghost", {})


def _invalid_manifest(runner: Runner, toolbox: Any) -> None:
    (toolbox.external / "broken.toml").write_text('tool_name = "broken\n[args\n')
    runner.run("broken", {})


def _invalid_config(runner: Runner, toolbox: Any) -> None:
    toolbox.config_path.write_text('[security]\nworkspace_root = ["not", "a", "string"]\n')
    Runner.from_config(toolbox.config_path)


ERROR_CASES: list[Any] = [
    pytest.param(_not_json, InvalidToolArgs, id="InvalidToolArgs-not-json"),
    pytest.param(_not_an_object, InvalidToolArgs, id="InvalidToolArgs-not-object"),
    pytest.param(_schema_mismatch, InvalidToolArgs, id="InvalidToolArgs-schema"),
    pytest.param(_bad_name, InvalidToolName, id="InvalidToolName"),
    pytest.param(_not_allowed, ToolNotAllowed, id="ToolNotAllowed"),
    pytest.param(_external_denied, ExternalToolDenied, id="ExternalToolDenied"),
    pytest.param(_not_found, ToolNotFound, id="ToolNotFound"),
    pytest.param(_invalid_manifest, InvalidManifest, id="InvalidManifest"),
    pytest.param(_invalid_config, InvalidConfig, id="InvalidConfig"),
]


@pytest.mark.parametrize(("cause", "expected"), ERROR_CASES)
def test_errors_are_named_zigclaw_errors_with_one_line_message_and_hint(
    runner: Runner, toolbox: Any, cause: Callable[..., None], expected: type[ZigclawError]
) -> None:
    with pytest.raises(expected) as caught:
        if cause.__code__.co_argcount == 2:
            cause(runner, toolbox)
        else:
            cause(runner)
    error = caught.value
    assert isinstance(error, ZigclawError)
    assert error.name == expected.__name__
    assert isinstance(error.message, str) and error.message.strip()
    assert "\n" not in error.message and "\r" not in error.message
    assert error.hint is None or (isinstance(error.hint, str) and "\n" not in error.hint)
    assert str(error) == error.message


def test_every_exported_error_class_subclasses_ZigclawError_and_has_its_own_name() -> None:
    names = set()
    for cls in package.ALL_ERRORS:
        assert issubclass(cls, ZigclawError)
        assert cls.name == cls.__name__
        assert getattr(package, cls.name) is cls
        names.add(cls.name)
    assert len(names) == len(package.ALL_ERRORS)


def test_policy_hints_tell_the_user_what_to_do(runner: Runner) -> None:
    with pytest.raises(ToolNotAllowed) as caught:
        runner.run("fs_read", {"path": "x"})
    assert caught.value.hint is not None
    assert "policy explain" in caught.value.hint


# --- whatever Python hands us, a named error or a TypeError, never a crash -------------------


@pytest.mark.parametrize("tool", [None, 123, b"echo", ["echo"]])
def test_a_tool_name_that_is_not_a_string_is_invalid_tool_name(tmp_path, monkeypatch, tool):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(runner_errors.InvalidToolName):
        Runner.from_config().run(tool, {})


@pytest.mark.parametrize(
    "args",
    [{"text": 10**5000}, {"text": {1, 2}}, {"text": float("nan")}, {"text": "a\ud800"}],
)
def test_arguments_python_cannot_send_are_invalid_tool_args(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(runner_errors.InvalidToolArgs):
        Runner.from_config().run("echo", args)


def test_deeply_nested_arguments_are_invalid_tool_args(tmp_path, monkeypatch, toolbox, guest):
    toolbox.add_tool("any", guest("exit_silent"))  # additionalProperties = true
    toolbox.write_config(["any"])
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(runner_errors.InvalidToolArgs):
        toolbox.runner().run("any", deep)


def test_a_preset_name_that_is_not_a_string_is_tool_not_allowed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(runner_errors.ToolNotAllowed):
        Runner.from_config().run("echo", {"text": "x"}, preset=["readonly"])


def test_a_thread_with_a_tiny_stack_can_call_the_api(tmp_path, monkeypatch):
    # JSON parsing and wasm both recurse on the native stack: the call moves to a worker.
    import threading

    monkeypatch.chdir(tmp_path)
    runner = Runner.from_config()
    outcomes: list = []

    def call() -> None:
        outcomes.append(runner.run("echo", {"text": "small"}).data)
        try:
            runner.run("echo", "[" * 60000)
        except runner_errors.ZigclawError as exc:
            outcomes.append(exc.name)

    previous = threading.stack_size(128 * 1024)
    try:
        thread = threading.Thread(target=call)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    assert outcomes == [{"echo": "small"}, "InvalidToolArgs"]


@pytest.mark.parametrize(
    "body",
    [
        '[tools]\nexternal_dir = "~nosuchuser_zigclaw/x"\n',
        '[security]\nworkspace_root = "a\\u0000b"\n',
        '[capabilities.presets.readonly]\ntools = ["echo"]\nallow_write_paths = ["o\\u0000ut"]\n',
    ],
)
def test_unusable_config_paths_are_invalid_config(tmp_path, body):
    path = tmp_path / "zigclaw.toml"
    path.write_text(body)
    with pytest.raises(runner_errors.InvalidConfig):
        Runner.from_config(path).run("echo", {"text": "x"})
