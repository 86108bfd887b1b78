"""Generate a large, valid WASI command module of a chosen size, for compile and cache benchmarks.

The module exports `memory` and a `_start` that returns at once; its size is
made of many distinct functions whose bodies are long runs of integer
arithmetic, so compiling it costs what compiling real code of that size costs.
Written straight to the binary format (sections, LEB128), no text round trip.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return bytes(out)


def _section(section_id: int, payload: bytes) -> bytes:
    return bytes([section_id]) + _uleb(len(payload)) + payload


def _vector(items: list[bytes]) -> bytes:
    return _uleb(len(items)) + b"".join(items)


def _name(text: str) -> bytes:
    raw = text.encode()
    return _uleb(len(raw)) + raw


def _body(seed: int, steps: int) -> bytes:
    # (i32) -> i32: x = x * c1 + c2, `steps` times, with constants that differ per function.
    code = bytearray(b"\x20\x00")  # local.get 0
    for step in range(steps):
        code += b"\x41" + _sleb((seed * 7919 + step * 104729) % 1_000_003 + 1)  # i32.const
        code += b"\x6c"  # i32.mul
        code += b"\x41" + _sleb((seed + step) % 65521)  # i32.const
        code += b"\x6a"  # i32.add
    code += b"\x0b"  # end
    locals_ = _uleb(0)
    return _uleb(len(locals_) + len(code)) + locals_ + bytes(code)


def build(size_bytes: int, function_bytes: int = 8192) -> bytes:
    """A module of at least `size_bytes`, made of functions of about `function_bytes` each."""
    steps = max(1, function_bytes // 12)
    sample = len(_body(1, steps))
    count = max(1, -(-size_bytes // sample))
    types = _vector([b"\x60\x01\x7f\x01\x7f", b"\x60\x00\x00"])  # (i32)->i32, ()->()
    functions = _vector([_uleb(0)] * count + [_uleb(1)])
    memory = _vector([b"\x00\x01"])  # min 1 page, no max
    exports = _vector(
        [
            _name("memory") + b"\x02" + _uleb(0),
            _name("_start") + b"\x00" + _uleb(count),
        ]
    )
    start_body = _uleb(2) + b"\x00\x0b"
    bodies = _vector([_body(index, steps) for index in range(count)] + [start_body])
    return b"".join(
        [
            b"\x00asm\x01\x00\x00\x00",
            _section(1, types),
            _section(3, functions),
            _section(5, memory),
            _section(7, exports),
            _section(10, bodies),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mib", type=float, default=20.0, help="size in MiB (default 20)")
    options = parser.parse_args(argv)
    options.out.write_bytes(build(int(options.mib * 1024 * 1024)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
