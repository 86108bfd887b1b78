"""Fuzz target: untrusted inputs must give a value or a ZigclawError, never another exception.

    python tests/fuzz/fuzz_inputs.py -max_total_time=10     # with atheris (coverage guided)
    python tests/fuzz/fuzz_inputs.py -atheris_runs=100000   # with atheris, a fixed number of runs
    python tests/fuzz/fuzz_inputs.py --plain 20000          # without atheris: seeded random inputs
    python tests/fuzz/fuzz_inputs.py --write-corpus DIR     # the valid seeds, one file per target

The first byte picks the target (manifest, config, args, response, archive); the rest is its input.
Any exception that is not a ZigclawError propagates: that is a finding.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import atheris
except ImportError:  # the target also runs, unguided, without atheris
    atheris = None

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from runner.config import parse_config, unknown_keys  # noqa: E402
from runner.errors import ZigclawError  # noqa: E402
from runner.install import unpack_archive  # noqa: E402
from runner.manifest import parse_manifest  # noqa: E402
from runner.protocol import decode_response  # noqa: E402
from runner.schema import SchemaValidator, normalize_args_schema, parse_args, validate_args  # noqa: E402

TARGETS = ("manifest", "config", "args", "response", "archive")
# Short, so that a fuzzer can find the id that gets a response past the request_id check.
REQUEST_ID = "r1"
ECHO_SCHEMA = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "maxLength": 1024}},
    "additionalProperties": False,
}
_echo_validator = SchemaValidator(normalize_args_schema(ECHO_SCHEMA))

def _tool_archive() -> bytes:
    """A small uncompressed tar of a tool folder (mutations then reach the tar parser, not only gzip)."""
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in (("t/t.toml", b'tool_name = "t"\n'), ("t/t.wasm", b"\0asm\1\0\0\0")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# Valid inputs per target: the seeds that --plain mutates (and a starting corpus for atheris).
SEEDS: dict[str, bytes] = {
    "manifest": b"""tool_name = "echo"
version = "0.1.0"
description = "Echo text back."
max_runtime_ms = 2000
module = "echo.wasm"
env = ["HOME"]

[args]
type = "object"
required = ["text"]

[args.properties.text]
type = "string"
max_length = 1024
pattern = "^[a-z]*$"

[output]
type = "object"
""",
    "config": b"""[security]
workspace_root = "."

[tools.filter]
allow_external = true
external_allow_list = ["ext"]

[capabilities]
active_preset = "writer"

[capabilities.presets.writer]
tools = ["echo", "fs_write"]
allow_write_paths = ["out"]
""",
    "args": b'{"text": "hi \\u00e9 \\"q\\" \\ud83d\\ude00"}',
    "response": b'{"protocol_version":0,"request_id":"r1","ok":true,"data_json":"{\\"echo\\":\\"hi\\"}",'
    b'"stdout":"echo ok","stderr":""}',
    "archive": _tool_archive(),
}


def _run(target: str, payload: bytes) -> None:
    if target == "manifest":
        parse_manifest(payload, stem="echo", source="fuzz.toml")
    elif target == "config":
        loaded = parse_config(payload, source="zigclaw.toml", base_dir=Path("/tmp"))
        unknown_keys(loaded.raw)
    elif target == "args":
        args = parse_args(payload.decode("utf-8", "surrogateescape"))
        validate_args(_echo_validator, args, "echo")
    elif target == "response":
        decode_response(payload, REQUEST_ID)
    else:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="zigclaw-fuzz-") as scratch:
            archive = Path(scratch) / "in.tar"
            archive.write_bytes(payload)
            stage = Path(scratch) / "stage"
            stage.mkdir()
            unpack_archive(archive, stage)


def TestOneInput(data: bytes) -> None:  # atheris' name
    """One fuzz input: byte 0 picks the target, the rest is fed to it."""
    if not data:
        return
    with contextlib.suppress(ZigclawError):
        _run(TARGETS[data[0] % len(TARGETS)], data[1:])


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(4)
        pos = rng.randint(0, len(buf))
        if op == 0:
            buf.insert(pos, rng.choice([rng.randrange(256), *b"[]{}=.\"'\\\n#,0"]))
        elif op == 1 and pos < len(buf):
            del buf[pos]
        elif op == 2 and pos < len(buf):
            buf[pos] = rng.randrange(256)
        elif op == 3 and buf:
            # Repeat a slice: grows nesting and key runs quickly.
            start = rng.randrange(len(buf))
            piece = bytes(buf[start : start + rng.randint(1, 8)])
            buf[pos:pos] = piece * rng.randint(2, 64)
    return bytes(buf)


def plain_inputs(count: int, seed: int = 0x5EED) -> Iterator[bytes]:
    """`count` seeded inputs: half random bytes, half mutations of a valid input of each target."""
    rng = random.Random(seed)
    for index in range(count):
        selector = index % len(TARGETS)
        if rng.random() < 0.5:
            body = rng.randbytes(rng.randint(0, 256))
        else:
            body = _mutate(rng, SEEDS[TARGETS[selector]])
        yield bytes([selector]) + body


def run_plain(count: int) -> None:
    slowest, worst = 0.0, b""
    for data in plain_inputs(count):
        start = time.perf_counter()
        TestOneInput(data)
        elapsed = time.perf_counter() - start
        if elapsed > slowest:
            slowest, worst = elapsed, data
    print(f"{count} inputs, no finding; slowest {slowest * 1000:.1f} ms: {worst[:80]!r}")


def write_corpus(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for selector, target in enumerate(TARGETS):
        (folder / f"seed_{target}").write_bytes(bytes([selector]) + SEEDS[target])


def main(argv: list[str]) -> None:
    if "--write-corpus" in argv:
        write_corpus(Path(argv[argv.index("--write-corpus") + 1]))
        return
    if "--plain" in argv:
        index = argv.index("--plain")
        run_plain(int(argv[index + 1]) if index + 1 < len(argv) else 20_000)
        return
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris, or run with --plain N")
    atheris.instrument_all()  # runner, tomllib, json, pydantic glue, jsonschema: all coverage guided
    atheris.Setup(argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
