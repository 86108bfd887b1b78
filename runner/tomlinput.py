"""TOML from untrusted files: bounded before it reaches the parser."""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import ZigclawError, describe_validation_error

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

# tomllib's cost grows with the square of a dotted key's length; no real manifest
# or config needs keys this deep, so longer ones are refused before parsing.
M = TypeVar("M", bound=BaseModel)

MAX_KEY_PARTS = 32
# Characters that end a dotted key (or a float) outside strings and comments.
_KEY_ENDS = frozenset("=[]{},\n")
_QUOTES = ('"""', "'''", '"', "'")


class TomlInputError(ValueError):
    """TOML that cannot be used; the message is one line naming the problem."""


def longest_dotted_run(text: str) -> int:
    """The most dots in one dotted key (or header, or float) of TOML text, in one linear pass.

    Strings and comments are skipped, so a quoted `=` or `.` cannot hide a key.
    """
    longest = run = 0
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char == "#":
            newline = text.find("\n", index)
            index = length if newline < 0 else newline
            continue
        if char in "\"'":
            quote = next(q for q in _QUOTES if text.startswith(q, index))
            index = _string_end(text, index + len(quote), quote)
            continue
        if char == ".":
            run += 1
            longest = max(longest, run)
        elif char in _KEY_ENDS:
            run = 0
        index += 1
    return longest


def _string_end(text: str, index: int, quote: str) -> int:
    """The index just past the string whose body starts at `index` and ends with `quote`."""
    escapes = quote[0] == '"'
    while True:
        found = text.find(quote, index)
        if found < 0:
            return len(text)  # unterminated: tomllib reports it
        if escapes:
            backslashes = 0
            while found - backslashes - 1 >= index and text[found - backslashes - 1] == "\\":
                backslashes += 1
            if backslashes % 2:
                index = found + 1
                continue
        end = found + len(quote)
        if len(quote) == 3:
            # One or two quotes may stand right before a multi-line string's closing quotes.
            while end < len(text) and text[end] == quote[0] and end - found < 5:
                end += 1
        return end


def parse_toml(data: bytes) -> dict[str, Any]:
    """Parse TOML bytes from an untrusted file, or raise TomlInputError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TomlInputError(f"not valid UTF-8 (byte {exc.start})") from None
    if longest_dotted_run(text) >= MAX_KEY_PARTS:
        raise TomlInputError(f"a dotted key with more than {MAX_KEY_PARTS} parts")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlInputError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise TomlInputError("invalid TOML: nested too deeply") from None


def load_model(
    data: bytes, model: type[M], *, source: str, error: type[ZigclawError]
) -> tuple[M, dict[str, Any]]:
    """Parse TOML bytes into `model`; every problem becomes `error` naming `source`, the key and why."""
    try:
        raw = parse_toml(data)
    except TomlInputError as exc:
        raise error(f"{source}: {exc}") from None
    try:
        return model.model_validate(raw), raw
    except ValidationError as exc:
        raise error(f"{source}: {describe_validation_error(exc)}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply") from None
