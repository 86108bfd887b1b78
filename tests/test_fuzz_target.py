"""The fuzz target in tests/fuzz runs in every test run: seeded random inputs and crafted hostile ones."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

_PATH = Path(__file__).parent / "fuzz" / "fuzz_inputs.py"
_spec = importlib.util.spec_from_file_location("fuzz_inputs", _PATH)
assert _spec is not None and _spec.loader is not None
fuzz_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz_inputs)

MANIFEST, CONFIG, ARGS, RESPONSE = (bytes([i]) for i in range(4))
# Every input, however hostile, is answered well within this (seconds).
SLOW = 2.0
HEAD = b'tool_name = "echo"\nversion = "0.1.0"\ndescription = "d"\n'


def _deep_args(depth: int) -> bytes:
    return b'{"text":' + b"[" * depth + b"]" * depth + b"}"


CRAFTED: dict[str, bytes] = {
    "empty": b"",
    "selector-only": MANIFEST,
    # deeply nested JSON
    "args-deep-list": ARGS + b"[" * 100_000 + b"]" * 100_000,
    "args-deep-object": ARGS + b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "args-deep-valid-shape": ARGS + _deep_args(50_000),
    "args-deep-within-parser": ARGS + _deep_args(900),
    "args-unclosed": ARGS + b"[" * 200_000,
    "response-deep": RESPONSE + b"[" * 100_000 + b"]" * 100_000,
    "response-deep-field": RESPONSE
    + b'{"protocol_version":0,"request_id":"r1","ok":true,"data_json":'
    + b"[" * 50_000
    + b"]" * 50_000
    + b"}",
    # JSON oddities
    "args-huge-int": ARGS + b'{"text":' + b"9" * 10_000 + b"}",
    "args-nan": ARGS + b'{"text":NaN}',
    "args-inf-literal": ARGS + b'{"text":1e999}',
    "args-lone-surrogate": ARGS + b'{"text":"\\ud800"}',
    "args-duplicate-keys": ARGS + b'{"text":"a","text":"b"}',
    "response-huge-version": RESPONSE
    + b'{"protocol_version":'
    + b"1" * 10_000
    + b',"request_id":"r1","ok":true}',
    "response-float-version": RESPONSE + b'{"protocol_version":0.0,"request_id":"r1","ok":true}',
    "response-bool-version": RESPONSE + b'{"protocol_version":false,"request_id":"r1","ok":true}',
    "response-surrogate-id": RESPONSE + b'{"protocol_version":0,"request_id":"\\udc80","ok":true}',
    "response-valid": RESPONSE + fuzz_inputs.SEEDS["response"],
    # TOML bombs
    "toml-deep-array": MANIFEST + b"a = " + b"[" * 100_000 + b"]" * 100_000,
    "toml-deep-inline-table": CONFIG + b"a = " + b"{b = " * 50_000 + b"1" + b"}" * 50_000,
    "toml-deep-args-table": MANIFEST
    + HEAD
    + b"args = "
    + b"{type = 'object', items = " * 300
    + b"{}"
    + b"}" * 300,
    "toml-long-dotted-key": CONFIG + b"a" + b".a" * 100_000 + b" = 1",
    "toml-long-dotted-header": MANIFEST + b"[" + b"a." * 100_000 + b"a]",
    "toml-dotted-floats": CONFIG + b"x = [" + b"1.5," * 100_000 + b"]",
    "toml-many-headers": CONFIG + b"[capabilities.presets.p]\n" * 20_000,
    "toml-many-array-tables": CONFIG + b"[[a]]\nb = 1\n" * 20_000,
    "toml-huge-unknown-key": CONFIG + b'"' + b"k" * 20_000 + b'" = 1\n',
    "toml-many-unknown-keys": CONFIG + b"".join(b"k%d = 1\n" % i for i in range(20_000)),
    "toml-unterminated-multiline": MANIFEST + b'description = """' + b'\\"' * 100_000,
    "toml-backslash-run": CONFIG + b'a = "' + b"\\" * 100_001 + b'"\n' + b'b = "' + b'\\"' * 50_000,
    # NUL bytes and control characters
    "nul-manifest": MANIFEST + b"\x00" * 1000,
    "nul-in-string": MANIFEST + HEAD + b'module = "a\\u0000b"\n[args]\ntype = "object"\n',
    "nul-args": ARGS + b'{"text":"\x00"}',
    "nul-response": RESPONSE + b'{"protocol_version":0,"request_id":"r1\x00","ok":true}',
    # invalid UTF-8
    "utf8-manifest": MANIFEST + b'tool_name = "\xc3\x28"',
    "utf8-overlong": CONFIG + b'[security]\nworkspace_root = "\xc0\xaf"',
    "utf8-surrogate": ARGS + b'{"text":"\xed\xa0\x80"}',
    "utf8-response": RESPONSE + b'{"protocol_version":0,"request_id":"\xff","ok":true}',
    # schemas in manifests: bad regexes of every kind re.compile can raise
    "regex-invalid": MANIFEST + HEAD + b'[args]\ntype = "object"\npattern = "["\n',
    "regex-deep-groups": MANIFEST
    + HEAD
    + b'[args]\ntype = "object"\npattern = "'
    + b"(" * 2000
    + b")" * 2000
    + b'"\n',
    "regex-repeat-overflow": MANIFEST + HEAD + b'[args]\ntype = "object"\npattern = "a{4294967296}"\n',
    "regex-repeat-overflow-property": MANIFEST
    + HEAD
    + b'[args]\ntype = "object"\n[args.properties.x]\ntype = "string"\npattern = "a{99999999999}"\n',
    "regex-repeat-overflow-output": MANIFEST
    + HEAD
    + b'[args]\ntype = "object"\n[output]\ntype = "object"\npattern = "x{4294967296,}"\n',
    "regex-repeat-overflow-pattern-properties": MANIFEST
    + HEAD
    + b'[args]\ntype = "object"\n[args.patternProperties."a{4294967296}"]\n',
}


@pytest.mark.parametrize("data", CRAFTED.values(), ids=CRAFTED.keys())
def test_crafted_input(data):
    start = time.perf_counter()
    fuzz_inputs.TestOneInput(data)
    assert time.perf_counter() - start < SLOW


def test_seeded_random_inputs():
    slowest = 0.0
    for data in fuzz_inputs.plain_inputs(4000, seed=20240611):
        start = time.perf_counter()
        fuzz_inputs.TestOneInput(data)
        slowest = max(slowest, time.perf_counter() - start)
    assert slowest < SLOW


def test_the_seeds_are_valid_inputs():
    # The seeds must get past parsing, or mutating them explores nothing.
    for selector, target in enumerate(fuzz_inputs.TARGETS):
        fuzz_inputs._run(target, fuzz_inputs.SEEDS[target])
        fuzz_inputs.TestOneInput(bytes([selector]) + fuzz_inputs.SEEDS[target])


def test_a_foreign_exception_propagates(monkeypatch):
    def boom(*_args, **_kwargs):
        raise KeyError("not ours")

    monkeypatch.setattr(fuzz_inputs, "parse_manifest", boom)
    with pytest.raises(KeyError):
        fuzz_inputs.TestOneInput(MANIFEST + b"x")
