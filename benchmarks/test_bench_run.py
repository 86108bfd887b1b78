"""Target 1 of issue 4: a warm in-process echo run through the Python API, every limit on and
output captured under its cap, against the bare floor, the wasmtime CLI and a native binary."""

from __future__ import annotations

import contextlib
import ctypes
import subprocess

import wasmtime
from conftest import record, side_by_side
from wasmtime import _ffi as ffi

from runner import Runner
from runner.protocol import encode_request
from runner.registry import BUILTIN_DIR

ARGS = {"text": "hi"}
REQUEST = encode_request(request_id="0" * 32, tool="echo", args=ARGS, cwd="/workspace", mounts=[])


def _floor() -> object:
    """The least an in-process run can cost: a default engine, a new Store, the same request
    on stdin, instantiate, `_start`, stdout to /dev/null; no limits, no capture, no checks."""
    engine = wasmtime.Engine()
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    pre = linker.instantiate_pre(wasmtime.Module(engine, (BUILTIN_DIR / "echo.wasm").read_bytes()))

    def run() -> None:
        store = wasmtime.Store(engine)
        wasi = wasmtime.WasiConfig()
        vec = ffi.wasm_byte_vec_t()
        buffer = (ctypes.c_uint8 * len(REQUEST)).from_buffer_copy(REQUEST)
        ffi.wasm_byte_vec_new(ctypes.byref(vec), len(REQUEST), buffer)
        ffi.wasi_config_set_stdin_bytes(wasi.ptr(), ctypes.byref(vec))
        wasi.stdout_file = "/dev/null"
        store.set_wasi(wasi)
        instance = pre.instantiate(store)
        start = instance.exports(store)["_start"]
        assert isinstance(start, wasmtime.Func)
        with contextlib.suppress(wasmtime.ExitTrap):
            start(store)
        store.close()

    return run


def test_warm_echo_run_against_the_floor_the_wasmtime_cli_and_a_native_binary(
    benchmark, tmp_path, monkeypatch, smoke, wasmtime_cli, native_echo
):
    monkeypatch.chdir(tmp_path)  # no zigclaw.toml: the built-in defaults, workspace "."
    # The sandbox and every decision, without the audit trail (issue 7; timed on its own below).
    runner = Runner.from_config(audit=False)
    audited = Runner.from_config()
    floor = _floor()

    def ours() -> None:
        runner.run("echo", ARGS)

    def ours_audited() -> None:
        audited.run("echo", ARGS)

    for _ in range(3 if smoke else 200):  # warm: compiled module cached, threads started
        ours()
        ours_audited()
        floor()
    assert runner.run("echo", ARGS).data == {"echo": "hi"}
    benchmark(ours)

    module = BUILTIN_DIR / "echo.wasm"
    cli = [str(wasmtime_cli), "run", "--dir", f"{tmp_path}::/workspace", str(module)]
    native = [str(native_echo)]
    for command in (cli, native):  # both answer the request; warms the CLI's own cache
        done = subprocess.run(command, input=REQUEST, capture_output=True, check=True)
        assert b'"ok":true' in done.stdout

    def spawn(command: list[str]) -> object:
        return lambda: subprocess.run(command, input=REQUEST, capture_output=True, check=True)

    medians = side_by_side(
        {"floor": floor, "api": ours, "audited": ours_audited, "native": spawn(native)},
        rounds=10 if smoke else 1000,
    )
    medians |= side_by_side({"cli": spawn(cli)}, rounds=2 if smoke else 60)
    api, bare = medians["api"] * 1000, medians["floor"] * 1000
    record(
        "warm API run vs bare floor",
        f"API {api:.3f} ms, floor {bare:.3f} ms",
        api / bare,
        "<= 2",
        api / bare <= 2,
    )
    logged = medians["audited"] * 1000
    record(
        "warm API run with the audit trail on (the default) vs bare floor",
        f"API + audit {logged:.3f} ms, floor {bare:.3f} ms",
        logged / bare,
        "none (what the audit trail adds)",
        None,
    )
    cli_ms = medians["cli"] * 1000
    record(
        "wasmtime CLI vs warm API run",
        f"`wasmtime run` {cli_ms:.2f} ms, API {api:.3f} ms",
        cli_ms / api,
        ">= 30",
        cli_ms / api >= 30,
    )
    native_ms = medians["native"] * 1000
    record(
        "static native echo spawn vs warm API run",
        f"spawn {native_ms:.3f} ms, API {api:.3f} ms",
        native_ms / api,
        "> 1",
        native_ms > api,
    )
    if not smoke:
        assert api / bare <= 2, f"warm run is x{api / bare:.2f} the floor (target <= 2)"
        assert cli_ms / api >= 30, f"wasmtime CLI is only x{cli_ms / api:.1f} slower (target >= 30)"
        assert native_ms > api, f"spawning native echo ({native_ms:.3f} ms) beat the API ({api:.3f} ms)"


def test_warm_echo_run_on_a_guard_worker(benchmark, tmp_path, monkeypatch, smoke):
    """What `guard_blocking_calls` (the CLI's mode) adds: a worker-thread handoff per run."""
    monkeypatch.chdir(tmp_path)
    runner = Runner.from_config(guard_blocking_calls=True, audit=False)
    plain = Runner.from_config(guard_blocking_calls=False, audit=False)
    for _ in range(3 if smoke else 100):
        runner.run("echo", ARGS)
    benchmark(runner.run, "echo", ARGS)
    medians = side_by_side(
        {"guarded": lambda: runner.run("echo", ARGS), "plain": lambda: plain.run("echo", ARGS)},
        rounds=10 if smoke else 500,
    )
    guarded, bare = medians["guarded"] * 1000, medians["plain"] * 1000
    print(f"\nguarded run {guarded:.3f} ms vs API default {bare:.3f} ms (x{guarded / bare:.2f})")
