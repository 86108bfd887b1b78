"""TOML from untrusted files: bounded before it reaches the parser."""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

# tomllib's cost grows with the square of a dotted key's length; no real manifest
# or config needs keys this deep, so longer ones are refused before parsing.
MAX_KEY_PARTS = 64


class TomlInputError(ValueError):
    """TOML that cannot be used; the message is one line naming the problem."""


def parse_toml(data: bytes) -> dict[str, Any]:
    """Parse TOML bytes from an untrusted file, or raise TomlInputError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TomlInputError(f"not valid UTF-8 (byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        # The key part of a line: what precedes '=' (a table header has no '=').
        if line.split("=", 1)[0].count(".") >= MAX_KEY_PARTS:
            raise TomlInputError(f"line {number}: a key with more than {MAX_KEY_PARTS} dotted parts")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlInputError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise TomlInputError("invalid TOML: nested too deeply") from None
