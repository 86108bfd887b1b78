"""Property tests: every untrusted input yields a value or a ZigclawError, never another exception.

Covers manifest loading, config loading, `--args` parsing/validation and protocol decoding with
arbitrary bytes, arbitrary text, structured TOML/JSON, and mutations of valid inputs.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path
from typing import Any

import jsonschema
import tomllib
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runner.config import LoadedConfig, parse_config, unknown_keys
from runner.errors import InvalidConfig, InvalidManifest, InvalidToolArgs, MalformedResponse
from runner.manifest import Manifest, parse_manifest
from runner.protocol import Response, decode_response
from runner.schema import SchemaValidator, normalize_args_schema, parse_args, validate_args

# Every single input must be handled well below this (seconds); a slower one is a hang-class bug.
SLOW = 2.0

FEW = settings(max_examples=150, deadline=None)
SOME = settings(max_examples=250, deadline=None)
MANY = settings(max_examples=500, deadline=None)

VALID_MANIFEST = b"""tool_name = "echo"
version = "0.1.0"
description = "Echo text back."
requires_network = false
native = false
max_runtime_ms = 2000
max_stdout_bytes = 65536
max_stderr_bytes = 65536

[args]
type = "object"
required = ["text"]

[args.properties.text]
type = "string"
max_length = 1024
"""

VALID_CONFIG = b"""[security]
workspace_root = "."
guard_blocking_calls = false

[tools]
external_dir = "./ext-tools"

[tools.registry]
strict = false

[tools.filter]
allow_external = true
external_allow_list = ["ext_tool"]

[capabilities]
active_preset = "writer"

[capabilities.presets.writer]
tools = ["echo", "fs_read", "fs_write"]
allow_network = false
allow_write_paths = ["out"]
"""

ECHO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "maxLength": 1024}},
    "additionalProperties": False,
}

NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "maxItems": 5,
            "items": {
                "type": "object",
                "required": ["n"],
                "properties": {
                    "n": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
                },
                "additionalProperties": False,
            },
        },
        "mode": {"enum": ["a", "b", None]},
        "meta": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
        },
        "ratio": {"type": "number", "exclusiveMinimum": 0},
    },
    "additionalProperties": False,
}

SCHEMAS = {"echo": ECHO_SCHEMA, "nested": NESTED_SCHEMA}


def timed(call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run `call`, fail if it takes longer than SLOW; exceptions pass through untouched."""
    start = time.perf_counter()
    try:
        return call(*args, **kwargs)
    finally:
        elapsed = time.perf_counter() - start
        assert elapsed < SLOW, f"{call.__name__} took {elapsed:.2f}s"


# --- TOML rendering ----------------------------------------------------------------


def toml_str(text: str) -> str:
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_str(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def render_toml(doc: dict[str, Any]) -> str:
    """Scalars and arrays as `key = value`; sub-tables as `[section]` headers (inline below that)."""
    lines = [f"{toml_str(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for key, value in doc.items():
        if isinstance(value, dict):
            lines.append(f"[{toml_str(key)}]")
            lines.extend(f"{toml_str(k)} = {toml_value(v)}" for k, v in value.items())
    return "\n".join(lines) + "\n"


# --- strategies ---------------------------------------------------------------------

MANIFEST_KEYS = [
    "tool_name",
    "version",
    "description",
    "requires_network",
    "native",
    "max_runtime_ms",
    "max_stdout_bytes",
    "max_stderr_bytes",
    "max_memory_bytes",
    "max_fuel",
    "module",
    "sha256",
    "env",
    "args",
    "output",
]
SCHEMA_KEYS = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "pattern",
    "patternProperties",
    "maxLength",
    "max_length",
    "minLength",
    "min_length",
    "minimum",
    "min",
    "maximum",
    "max",
    "enum",
    "const",
    "format",
    "$ref",
    "$defs",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "uniqueItems",
    "multipleOf",
    "dependentSchemas",
    "propertyNames",
    "$schema",
    "$id",
    "contains",
    "minItems",
    "maxItems",
]
CONFIG_KEYS = [
    "security",
    "workspace_root",
    "guard_blocking_calls",
    "tools",
    "plugin_dir",
    "external_dir",
    "registry",
    "strict",
    "filter",
    "allow_external",
    "external_allow_list",
    "native",
    "allow_unconfined",
    "capabilities",
    "active_preset",
    "presets",
    "readonly",
    "writer",
    "allow_network",
    "allow_write_paths",
]
# Regexes a schema may carry: ordinary, invalid, and ones `re.compile` refuses in unusual ways.
REGEXES = [
    "^[a-z]+$",
    "[",
    "(?P<",
    "a{4294967296}",
    "(" * 300 + ")" * 300,
    "(?<=a+)b",
    "\\",
    "*",
    "a{2,1}",
]
TYPES = ["object", "string", "integer", "number", "array", "boolean", "null", "nope"]

no_surrogates = st.characters(blacklist_categories=("Cs",))
toml_text = st.text(no_surrogates, max_size=20)
scalars = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.booleans()
    | toml_text
    | st.sampled_from(TYPES + REGEXES + ["echo", "0.1.0", "1.0.0-rc.1+b", "x.wasm", "../x", "a" * 64])
)


def keys(names: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(names) | toml_text


def toml_values(names: list[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys(names), inner, max_size=4),
        max_leaves=20,
    )


def toml_docs(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(keys(names), toml_values(names), max_size=8)


# Built once: building strategies inside a composite on every draw dominates the run time.
schema_key_values = toml_values(SCHEMA_KEYS)
config_keys = keys(CONFIG_KEYS)
config_values = toml_values(CONFIG_KEYS)
config_sections = st.dictionaries(config_keys, config_values, max_size=4)
config_presets = st.dictionaries(
    toml_text,
    st.dictionaries(
        st.sampled_from(["tools", "allow_network", "allow_write_paths"]) | toml_text,
        config_values,
        max_size=4,
    ),
    max_size=3,
)


schema_values = st.recursive(
    scalars | st.sampled_from(REGEXES),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(SCHEMA_KEYS) | toml_text, inner, max_size=4)
    ),
    max_leaves=15,
)
args_schemas = st.dictionaries(st.sampled_from(SCHEMA_KEYS), schema_values, max_size=5).map(
    lambda d: {"type": "object", **d}
)


@st.composite
def near_valid_manifests(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "tool_name": "echo",
        "version": "0.1.0",
        "description": "Echo text back.",
        "args": draw(args_schemas),
    }
    if draw(st.booleans()):
        doc["output"] = draw(args_schemas)
    for key in draw(st.lists(st.sampled_from(MANIFEST_KEYS), max_size=3)):
        if draw(st.booleans()):
            doc.pop(key, None)
        else:
            doc[key] = draw(schema_key_values)
    return doc


@st.composite
def near_valid_configs(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "security": draw(config_sections),
        "tools": draw(config_sections),
        "capabilities": {"active_preset": draw(toml_text), "presets": draw(config_presets)},
    }
    for key in draw(st.lists(st.sampled_from(["security", "tools", "capabilities", "extra"]), max_size=2)):
        doc[key] = draw(config_values)
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        pos = draw(st.integers(0, len(data)))
        byte = draw(st.integers(0, 255) | st.sampled_from(list(b"[]{}=.\"'\\\n#,")))
        if op == "insert":
            data.insert(pos, byte)
        elif data and pos < len(data):
            if op == "delete":
                del data[pos]
            else:
                data[pos] = byte
    return bytes(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=25,
)


def deep_json(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    if kind == "dict":
        return '{"a":' * depth + "1" + "}" * depth
    return '{"text":' + "[" * depth + "]" * depth + "}"


deep_json_texts = st.builds(deep_json, st.integers(1, 20_000), st.sampled_from(["list", "dict", "arg"]))


def has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(has_float(item) for item in value)
    if isinstance(value, dict):
        return any(has_float(item) for item in value.values())
    return False


# --- manifests ------------------------------------------------------------------------


def check_manifest(data: bytes) -> None:
    try:
        result = timed(parse_manifest, data, stem="echo", source="echo.toml")
    except InvalidManifest:
        return
    assert isinstance(result, Manifest)


def test_the_valid_manifest_parses():
    assert parse_manifest(VALID_MANIFEST, stem="echo", source="echo.toml").tool_name == "echo"


@MANY
@given(st.binary(max_size=2048))
def test_manifest_arbitrary_bytes(data):
    check_manifest(data)


@MANY
@given(st.text(max_size=2048))
def test_manifest_arbitrary_text(text):
    check_manifest(text.encode("utf-8", "surrogatepass"))


@FEW
@given(toml_docs(MANIFEST_KEYS + SCHEMA_KEYS))
def test_manifest_structured_toml(doc):
    check_manifest(render_toml(doc).encode())


@SOME
@given(near_valid_manifests())
@example({"tool_name": "echo", "version": "0.1.0", "description": "d", "args": {"type": "object"}})
@example(  # re.compile raises OverflowError (not re.error) for this `pattern`
    {
        "tool_name": "echo",
        "version": "0.1.0",
        "description": "d",
        "args": {"type": "object", "pattern": "a{4294967296}"},
    }
)
@example(
    {
        "tool_name": "echo",
        "version": "0.1.0",
        "description": "d",
        "args": {"type": "object", "patternProperties": {"a{4294967296}": {}}},
    }
)
def test_manifest_near_valid_toml(doc):
    check_manifest(render_toml(doc).encode())


@MANY
@given(mutated(VALID_MANIFEST))
def test_manifest_mutations(data):
    check_manifest(data)


# --- configs ---------------------------------------------------------------------------


def check_config(data: bytes) -> None:
    try:
        result = timed(parse_config, data, source="zigclaw.toml", base_dir=Path("/tmp"))
    except InvalidConfig:
        pass
    else:
        assert isinstance(result, LoadedConfig)
        assert isinstance(timed(unknown_keys, result.raw), list)
    # unknown_keys must take any table TOML can produce, valid config or not.
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return
    assert isinstance(timed(unknown_keys, raw), list)


def test_the_valid_config_parses():
    loaded = parse_config(VALID_CONFIG, source="zigclaw.toml", base_dir=Path("/tmp"))
    assert loaded.config.capabilities.active_preset == "writer"
    assert unknown_keys(loaded.raw) == []


@MANY
@given(st.binary(max_size=2048))
def test_config_arbitrary_bytes(data):
    check_config(data)


@MANY
@given(st.text(max_size=2048))
def test_config_arbitrary_text(text):
    check_config(text.encode("utf-8", "surrogatepass"))


@FEW
@given(toml_docs(CONFIG_KEYS))
def test_config_structured_toml(doc):
    check_config(render_toml(doc).encode())


@SOME
@given(near_valid_configs())
def test_config_near_valid_toml(doc):
    check_config(render_toml(doc).encode())


@MANY
@given(mutated(VALID_CONFIG))
def test_config_mutations(data):
    check_config(data)


# --- arguments ---------------------------------------------------------------------------


def check_parse_args(text: str) -> dict[str, Any] | None:
    try:
        value = timed(parse_args, text)
    except InvalidToolArgs:
        return None
    assert isinstance(value, dict)
    return value


@MANY
@given(st.text(max_size=1024))
def test_parse_args_arbitrary_text(text):
    check_parse_args(text)


@SOME
@given(json_values)
def test_parse_args_json_text(value):
    parsed = check_parse_args(json.dumps(value))
    if isinstance(value, dict):
        assert parsed == value
    else:
        assert parsed is None


@FEW
@given(deep_json_texts)
@example(deep_json(100_000, "list"))
def test_parse_args_deep_nesting(text):
    check_parse_args(text)


def check_validate(schema_name: str, value: Any) -> None:
    schema = normalize_args_schema(SCHEMAS[schema_name])
    try:
        result = timed(validate_args, SchemaValidator(schema), value, "t")
    except InvalidToolArgs:
        ours = False
    else:
        assert result is None
        ours = True
    theirs = isinstance(value, dict) and jsonschema.Draft202012Validator(schema).is_valid(value)
    if ours:
        # Our "integer" is narrower than JSON Schema's (10.0 is not one), so valid here is valid there.
        assert theirs, value
    elif not has_float(value):
        assert not theirs, value


near_valid_args = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=1100) | json_values,
        "items": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "n": st.integers(-5, 1005) | st.floats(allow_nan=False) | json_values,
                    "tags": st.lists(st.from_regex("^[a-z]+$", fullmatch=True) | json_values, max_size=3),
                    "x": json_values,
                },
            ),
            max_size=6,
        )
        | json_values,
        "mode": st.sampled_from(["a", "b", None, "c", 1]),
        "meta": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
        "ratio": st.floats(allow_nan=False) | json_values,
        "other": json_values,
    },
)


@SOME
@given(st.sampled_from(sorted(SCHEMAS)), json_values | near_valid_args)
@example("echo", {"text": "hi"})
@example("nested", {"items": [{"n": 10.0}]})
@example("nested", {"items": [{"n": 3, "tags": ["ab"]}], "meta": {"k": 1.5}, "ratio": 0.5})
def test_validate_args_agrees_with_jsonschema(schema_name, value):
    check_validate(schema_name, value)


@FEW
@given(st.sampled_from(sorted(SCHEMAS)), st.integers(1, 20_000))
def test_validate_args_deep_nesting(schema_name, depth):
    value: Any = []
    for _ in range(depth):
        value = [value]
    validator = SchemaValidator(normalize_args_schema(SCHEMAS[schema_name]))
    for args in ({"text": value}, {"items": [{"n": 1, "tags": value}]}, {"meta": {"k": value}}):
        with contextlib.suppress(InvalidToolArgs):
            timed(validate_args, validator, args, "t")


# --- protocol ------------------------------------------------------------------------------

REQUEST_ID = "5c0f1e2d3c4b5a69788796a5b4c3d2e1"


def check_response(raw: bytes, request_id: str = REQUEST_ID) -> Response | None:
    try:
        result = timed(decode_response, raw, request_id)
    except MalformedResponse:
        return None
    assert isinstance(result, Response)
    return result


@MANY
@given(st.binary(max_size=2048))
def test_response_arbitrary_bytes(raw):
    check_response(raw)


@SOME
@given(json_values, st.booleans())
def test_response_arbitrary_json(value, ascii_only):
    check_response(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


any_type = json_values | st.floats() | st.integers(min_value=-(2**80), max_value=2**80)


@MANY
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "protocol_version": st.sampled_from([0, 1, -1, 0.0, False, True, None, "0"]) | any_type,
            "request_id": st.sampled_from([REQUEST_ID, REQUEST_ID.upper(), ""]) | any_type,
            "ok": st.booleans() | any_type,
            "data_json": st.text() | any_type,
            "stdout": st.text() | any_type,
            "stderr": st.text() | any_type,
            "extra": any_type,
        },
    ),
    st.booleans(),
)
def test_response_near_valid(obj, ascii_only):
    text = json.dumps(obj, ensure_ascii=ascii_only)
    check_response(text.encode("utf-8", "surrogatepass"))


@FEW
@given(deep_json_texts)
def test_response_deep_nesting(text):
    check_response(text.encode())


@SOME
@given(
    request_id=st.text(),
    ok=st.booleans(),
    data_json=st.text(),
    stdout=st.text(),
    stderr=st.text(),
    padding=st.sampled_from(["", " ", "\n", "\r\n\t "]),
)
def test_response_round_trip(request_id, ok, data_json, stdout, stderr, padding):
    # Lone surrogates can only travel as \u escapes, so those go out ASCII-escaped.
    obj = {
        "protocol_version": 0,
        "request_id": request_id,
        "ok": ok,
        "data_json": data_json,
        "stdout": stdout,
        "stderr": stderr,
    }
    for ascii_only in (True, False):
        try:
            raw = (padding + json.dumps(obj, ensure_ascii=ascii_only) + padding).encode("utf-8")
        except UnicodeEncodeError:
            continue
        response = decode_response(raw, request_id)
        assert (response.request_id, response.ok) == (request_id, ok)
        assert (response.data_json, response.stdout, response.stderr) == (data_json, stdout, stderr)
