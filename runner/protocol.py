"""zigclaw protocol v0: the request a tool reads on stdin, the response it writes on stdout."""

from __future__ import annotations

import functools
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import MalformedResponse
from .policy import Mount

PROTOCOL_VERSION = 0


def new_request_id() -> str:
    """16 random bytes as 32 lowercase hex characters."""
    return secrets.token_hex(16)


def encode_request(
    *, request_id: str, tool: str, args: dict[str, Any], cwd: str, mounts: Sequence[Mount]
) -> bytes:
    """The request bytes: `args` travels serialised as the string `args_json`.

    Keys in zigclaw's order: protocol_version, request_id, tool, args_json, cwd, mounts.
    """
    args_json = json.dumps(args, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    text = (
        f'{{"protocol_version":{PROTOCOL_VERSION},"request_id":{_string(request_id)},'
        f'"tool":{_string(tool)},"args_json":{_string(args_json)},{_tail(cwd, tuple(mounts))}}}'
    )
    return text.encode("utf-8")


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


@functools.lru_cache(maxsize=256)
def _tail(cwd: str, mounts: tuple[Mount, ...]) -> str:
    """`"cwd":...,"mounts":[...]`, the same for every call with the same mounts."""
    listed = json.dumps([mount.to_json() for mount in mounts], separators=(",", ":"), ensure_ascii=False)
    return f'"cwd":{_string(cwd)},"mounts":{listed}'


@dataclass(frozen=True)
class Response:
    """A decoded, checked response; `data` is `data_json` parsed, or the raw string if not JSON."""

    request_id: str
    ok: bool
    data_json: str
    stdout: str
    stderr: str

    @property
    def data(self) -> Any:
        try:
            value = json.loads(self.data_json, parse_constant=_not_json)
            _check_unicode(value, self.data_json)
        except (ValueError, RecursionError):
            return self.data_json
        return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("an object repeats a key")
    return obj


# A lone surrogate can only come from a \\uD800-\\uDFFF escape: text without one needs no walk.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_unicode(value: Any, source: str) -> None:
    """Raise ValueError if any string in `value`, parsed from JSON `source`, holds a lone surrogate."""
    # A one-character find is a memchr; text with no backslash at all skips the regex.
    if "\\" not in source or _SURROGATE_ESCAPE.search(source) is None:
        return
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")  # UnicodeEncodeError is a ValueError
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _field(obj: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    if key not in obj:
        if default is not None:
            return default
        raise MalformedResponse(f"response has no '{key}'")
    value = obj[key]
    # bool is an int subclass: a `true` protocol_version is not a version.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedResponse(f"response field '{key}' must be {kind.__name__}")
    return value


def decode_response(raw: bytes, request_id: str) -> Response:
    """Check one response: JSON object, version 0, our request_id, fields of the right types."""
    if not raw.strip():
        raise MalformedResponse("tool wrote no response on stdout")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedResponse(f"response is not valid UTF-8 (byte {exc.start})") from None
    try:
        obj = json.loads(text, parse_constant=_not_json, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        raise MalformedResponse(f"response is not JSON: {exc}") from None
    except RecursionError:
        raise MalformedResponse("response JSON is nested too deeply") from None
    if not isinstance(obj, dict):
        raise MalformedResponse(f"response must be a JSON object, not {type(obj).__name__}")
    version = _field(obj, "protocol_version", int)
    if version != PROTOCOL_VERSION:
        raise MalformedResponse(f"response protocol_version is {version}, expected {PROTOCOL_VERSION}")
    answered = _field(obj, "request_id", str)
    if answered != request_id:
        raise MalformedResponse("response request_id does not match the request")
    response = Response(
        request_id=answered,
        ok=_field(obj, "ok", bool),
        data_json=_field(obj, "data_json", str, ""),
        stdout=_field(obj, "stdout", str, ""),
        stderr=_field(obj, "stderr", str, ""),
    )
    try:
        _check_unicode([response.data_json, response.stdout, response.stderr], text)
    except ValueError:
        raise MalformedResponse("response holds a lone surrogate (\\ud800-\\udfff), not text") from None
    return response
