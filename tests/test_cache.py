"""The on-disk cache of compiled modules: used when sound, ignored and rebuilt when not."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
import wasmtime

from runner.sandbox import wasi
from runner.sandbox.cache import ModuleCache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ZIGCLAW_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def compiles(monkeypatch):
    """Counts real compilations (not deserializations) done by the runtime."""
    counter = {"n": 0}
    real = wasmtime.Module

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, engine, data):
            counter["n"] += 1
            super().__init__(engine, data)

    monkeypatch.setattr(wasi.wasmtime, "Module", Counting)
    return counter


def _fresh_runtime() -> wasi.WasiRuntime:
    return wasi.WasiRuntime()  # its own memory cache, the disk cache of $ZIGCLAW_CACHE_DIR


def _entry(folder):
    (entry,) = [p for p in folder.iterdir() if p.suffix == ".cwasm" and not p.name.startswith(".")]
    return entry


def test_a_second_process_loads_the_module_from_disk_instead_of_compiling(cache_dir, compiles, guest):
    module = guest("exit_silent")
    _fresh_runtime().compile(module, "m.wasm")
    assert compiles["n"] == 1
    entry = _entry(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    _fresh_runtime().compile(module, "m.wasm")
    assert compiles["n"] == 1  # deserialized, not compiled


@pytest.mark.parametrize("damage", ["flip", "truncate", "header", "mode", "symlink", "hardlink"])
def test_a_damaged_or_suspicious_entry_is_never_loaded(cache_dir, compiles, guest, tmp_path, damage):
    module = guest("exit_silent")
    _fresh_runtime().compile(module, "m.wasm")
    entry = _entry(cache_dir)
    data = entry.read_bytes()
    if damage == "flip":
        entry.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "header":
        entry.write_bytes(data.replace(b"zigclaw-cwasm-2", b"zigclaw-cwasm-0", 1))
    elif damage == "mode":
        entry.chmod(0o644)
    elif damage == "symlink":
        elsewhere = tmp_path / "elsewhere.cwasm"
        elsewhere.write_bytes(data)
        elsewhere.chmod(0o600)
        entry.unlink()
        entry.symlink_to(elsewhere)
    elif damage == "hardlink":
        os.link(entry, tmp_path / "second-name.cwasm")
    assert (
        ModuleCache(cache_dir, _fresh_runtime().disk.engine).load(hashlib.sha256(module).hexdigest()) is None
    )
    _fresh_runtime().compile(module, "m.wasm")
    assert compiles["n"] == 2  # compiled again


def test_an_entry_planted_for_another_module_is_not_loaded(cache_dir, compiles, guest):
    good, other = guest("exit_silent"), guest("say_not_json")
    runtime = _fresh_runtime()
    runtime.compile(other, "other.wasm")
    planted = _entry(cache_dir)
    # Rename the other module's (valid) entry to the name the good module's entry would have.
    target = planted.with_name(
        planted.name.replace(hashlib.sha256(other).hexdigest(), hashlib.sha256(good).hexdigest())
    )
    planted.rename(target)
    assert runtime.disk.load(hashlib.sha256(good).hexdigest()) is None
    _fresh_runtime().compile(good, "good.wasm")
    assert compiles["n"] == 2


def test_a_cache_folder_open_to_others_is_refused(cache_dir, compiles, guest):
    cache_dir.mkdir(mode=0o777)
    cache_dir.chmod(0o777)
    runtime = _fresh_runtime()
    runtime.compile(guest("exit_silent"), "m.wasm")
    assert list(cache_dir.iterdir()) == []  # nothing written
    assert "open to other users" in (runtime.disk.refusal or "")


def test_a_cache_folder_owned_by_another_user_is_refused(cache_dir, guest):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder to another user (chown)")
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, 65534, 65534)
    runtime = _fresh_runtime()
    runtime.compile(guest("exit_silent"), "m.wasm")
    assert list(cache_dir.iterdir()) == []
    assert "owned by another user" in (runtime.disk.refusal or "")


def test_runs_from_a_cached_module_behave_the_same(cache_dir, toolbox, guest):
    toolbox.add_tool("silent", guest("exit_silent"))
    toolbox.write_config(["silent"])
    for _ in range(2):
        wasi._runtime = None  # a fresh runtime: the second one loads from disk
        with pytest.raises(Exception) as caught:
            toolbox.runner().run("silent", {})
        assert caught.value.name == "ToolFailed"


def test_an_entry_rewritten_by_someone_without_the_key_is_not_loaded(cache_dir, compiles, guest):
    # What a tool with a write mount over the cache could do: keep mode, owner and
    # link count, and write a header whose self-hash matches. Without the key it fails.
    module = guest("exit_silent")
    _fresh_runtime().compile(module, "m.wasm")
    entry = _entry(cache_dir)
    header, _, artifact = entry.read_bytes().partition(b"\n")
    forged = artifact[:-1] + bytes([artifact[-1] ^ 1])
    magic, digest, engine, _mac = header.split(b" ")
    fake_mac = hashlib.sha256(forged).hexdigest().encode()
    with open(entry, "r+b") as handle:  # truncating keeps the inode, mode and owner
        handle.truncate(0)
        handle.write(b" ".join((magic, digest, engine, fake_mac)) + b"\n" + forged)
    assert _fresh_runtime().disk.load(hashlib.sha256(module).hexdigest()) is None
    _fresh_runtime().compile(module, "m.wasm")
    assert compiles["n"] == 2


def test_the_key_is_private_and_a_loose_key_disables_the_cache(cache_dir, compiles, guest):
    module = guest("exit_silent")
    _fresh_runtime().compile(module, "m.wasm")
    key = cache_dir / ".key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    key.chmod(0o644)
    _fresh_runtime().compile(module, "m.wasm")
    assert compiles["n"] == 2
