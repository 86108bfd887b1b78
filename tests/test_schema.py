"""Argument schemas (SPEC 2, SPEC 4 step 7): `--args` parsing, validation with the JSON path and
the reason, and the mapping of zigclaw's spellings to JSON Schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.errors import InvalidToolArgs
from runner.schema import (
    MAX_ARGS_BYTES,
    SchemaError,
    SchemaValidator,
    normalize_args_schema,
    parse_args,
    validate_args,
)

ECHO = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "max_length": 1024}},
}
FS_READ = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string", "max_length": 2048},
        "max_bytes": {"type": "integer", "min": 1, "max": 1048576},
    },
}
RICH = {
    "type": "object",
    "required": ["mode"],
    "properties": {
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "opts": {
            "type": "object",
            "required": ["level"],
            "additionalProperties": False,
            "properties": {"level": {"type": "integer", "min": 0, "max": 3}},
        },
        "tags": {"type": "array", "items": {"type": "string", "max_length": 3}},
    },
}


def validator(raw: dict[str, Any]) -> SchemaValidator:
    return SchemaValidator(normalize_args_schema(raw))


def args_error(raw_schema: dict[str, Any], args: Any) -> str:
    with pytest.raises(InvalidToolArgs) as info:
        validate_args(validator(raw_schema), args, "tool")
    assert info.value.name == "InvalidToolArgs"
    return info.value.message


def parse_error(text: str) -> str:
    with pytest.raises(InvalidToolArgs) as info:
        parse_args(text)
    assert info.value.name == "InvalidToolArgs"
    return info.value.message


# --- parse_args ---------------------------------------------------------------------------------


def test_parse_args_returns_the_object() -> None:
    assert parse_args('{"text": "hi", "n": [1, {"a": null}]}') == {"text": "hi", "n": [1, {"a": None}]}


@pytest.mark.parametrize("text", ["", "{", "{'text': 'hi'}", "text=hi", '{"text": "hi"} x', "NaN-ish"])
def test_parse_args_rejects_text_that_is_not_json(text: str) -> None:
    assert "not valid JSON" in parse_error(text)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[1, 2]", "list"),
        ('"hi"', "str"),
        ("42", "int"),
        ("1.5", "float"),
        ("null", "NoneType"),
        ("true", "bool"),
    ],
)
def test_parse_args_rejects_json_that_is_not_an_object(text: str, kind: str) -> None:
    message = parse_error(text)
    assert "must be a JSON object" in message
    assert kind in message


def test_parse_args_rejects_text_over_the_size_cap() -> None:
    text = '{"text": "' + "a" * MAX_ARGS_BYTES + '"}'
    message = parse_error(text)
    assert str(MAX_ARGS_BYTES) in message


def test_parse_args_counts_the_size_cap_in_utf8_bytes() -> None:
    # Fewer characters than the cap, more bytes: still refused.
    text = '{"t":"' + "é" * (MAX_ARGS_BYTES // 2) + '"}'
    assert len(text) < MAX_ARGS_BYTES
    assert str(MAX_ARGS_BYTES) in parse_error(text)


def test_parse_args_accepts_text_just_under_the_size_cap() -> None:
    filler = MAX_ARGS_BYTES - len('{"t":""}')
    text = '{"t":"' + "a" * filler + '"}'
    assert len(text.encode()) == MAX_ARGS_BYTES
    assert len(parse_args(text)["t"]) == filler


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_parse_args_rejects_deeply_nested_json_without_recursion_error(opener: str) -> None:
    text = opener * 100_000
    message = parse_error(text)
    assert "not valid JSON" in message


def test_parse_args_rejects_deeply_nested_but_closed_json() -> None:
    text = '{"a":' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "not valid JSON" in parse_error(text)


# --- validate_args -----------------------------------------------------------------------------


def test_valid_args_pass() -> None:
    validate_args(validator(ECHO), {"text": "hi"}, "echo")
    validate_args(validator(FS_READ), {"path": "a.txt", "max_bytes": 10}, "fs_read")
    validate_args(
        validator(RICH), {"mode": "fast", "name": "abc", "opts": {"level": 3}, "tags": ["a", "bcd"]}, "rich"
    )


@pytest.mark.parametrize("args", [[], "hi", 5, None])
def test_validate_args_rejects_a_non_object(args: Any) -> None:
    assert "must be a JSON object" in args_error(ECHO, args)


def test_missing_required_key_names_the_key() -> None:
    message = args_error(ECHO, {})
    assert message.startswith("$:")
    assert "'text' is a required property" in message


def test_unknown_key_is_rejected_by_default() -> None:
    message = args_error(ECHO, {"text": "hi", "extra": 1})
    assert message.startswith("$:")
    assert "'extra'" in message
    assert "unknown key" in message


def test_unknown_key_is_accepted_when_schema_allows_it() -> None:
    schema = {**ECHO, "additionalProperties": True}
    validate_args(validator(schema), {"text": "hi", "extra": 1}, "echo")


def test_wrong_type_names_the_path() -> None:
    message = args_error(ECHO, {"text": 5})
    assert message.startswith("$.text:")
    assert "is not of type 'string'" in message


def test_boolean_is_not_an_integer() -> None:
    message = args_error(FS_READ, {"path": "a", "max_bytes": True})
    assert message.startswith("$.max_bytes:")
    assert "integer" in message


def test_string_over_max_length_is_rejected() -> None:
    message = args_error(ECHO, {"text": "a" * 1025})
    assert message.startswith("$.text:")
    assert "too long" in message


def test_max_length_counts_characters_not_bytes() -> None:
    text = "€" * 1024  # 3072 UTF-8 bytes, 1024 characters
    validate_args(validator(ECHO), {"text": text}, "echo")
    validate_args(validator(ECHO), {"text": "😀" * 1024}, "echo")
    short = {"type": "object", "properties": {"s": {"type": "string", "max_length": 3}}}
    validate_args(validator(short), {"s": "€😀é"}, "tool")
    message = args_error(short, {"s": "€😀éa"})
    assert message.startswith("$.s:")
    assert "too long" in message


def test_long_value_is_truncated_in_the_message() -> None:
    message = args_error(ECHO, {"text": "a" * 100_000})
    assert message.startswith("$.text:")
    assert len(message) < 400


@pytest.mark.parametrize(
    ("value", "word"), [(0, "less than the minimum"), (1048577, "greater than the maximum")]
)
def test_integer_out_of_range_is_rejected(value: int, word: str) -> None:
    message = args_error(FS_READ, {"path": "a", "max_bytes": value})
    assert message.startswith("$.max_bytes:")
    assert word in message


@pytest.mark.parametrize("value", [1, 1048576])
def test_integer_range_bounds_are_inclusive(value: int) -> None:
    validate_args(validator(FS_READ), {"path": "a", "max_bytes": value}, "fs_read")


def test_value_outside_enum_is_rejected() -> None:
    message = args_error(RICH, {"mode": "medium"})
    assert message.startswith("$.mode:")
    assert "is not one of" in message


def test_nested_object_error_has_nested_path() -> None:
    message = args_error(RICH, {"mode": "fast", "opts": {"level": 4}})
    assert message.startswith("$.opts.level:")
    assert "maximum" in message


def test_nested_object_missing_key_has_nested_path() -> None:
    message = args_error(RICH, {"mode": "fast", "opts": {}})
    assert message.startswith("$.opts:")
    assert "'level' is a required property" in message


def test_nested_object_unknown_key_is_rejected() -> None:
    message = args_error(RICH, {"mode": "fast", "opts": {"level": 1, "x": 2}})
    assert message.startswith("$.opts:")
    assert "'x'" in message


def test_array_item_error_has_index_in_path() -> None:
    message = args_error(RICH, {"mode": "fast", "tags": ["ok", "toolong"]})
    assert message.startswith("$.tags[1]:")
    assert "too long" in message


def test_pattern_mismatch_is_rejected() -> None:
    message = args_error(RICH, {"mode": "fast", "name": "ABC"})
    assert message.startswith("$.name:")
    assert "does not match" in message


def test_validation_error_carries_a_describe_hint() -> None:
    with pytest.raises(InvalidToolArgs) as info:
        validate_args(validator(ECHO), {}, "echo")
    assert info.value.hint is not None
    assert "zigclaw tools describe echo" in info.value.hint


def test_deeply_nested_args_value_gives_invalid_tool_args() -> None:
    # A recursive schema makes the validator descend as deep as the value goes.
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "properties": {"v": {"$ref": "#/$defs/n"}},
    }
    nested: Any = []
    for _ in range(5000):
        nested = [nested]
    nested = [nested, 1]  # an error at the top, reached only after the deep descent
    with pytest.raises(InvalidToolArgs) as info:
        validate_args(validator(schema), {"v": nested}, "tool")
    assert info.value.name == "InvalidToolArgs"
    assert info.value.message.startswith("$")


def test_parsed_then_validated_args_from_text() -> None:
    args = parse_args(json.dumps({"text": "hi"}))
    validate_args(validator(ECHO), args, "echo")
    args = parse_args(json.dumps({"text": 1}))
    assert args_error(ECHO, args).startswith("$.text:")


# --- normalize_args_schema ---------------------------------------------------------------------


def test_normalize_maps_zigclaw_spellings_at_top_level_properties() -> None:
    schema = normalize_args_schema(FS_READ)
    assert schema["properties"]["path"] == {"type": "string", "maxLength": 2048}
    assert schema["properties"]["max_bytes"] == {"type": "integer", "minimum": 1, "maximum": 1048576}


def test_normalize_maps_min_length() -> None:
    schema = normalize_args_schema(
        {"type": "object", "properties": {"s": {"type": "string", "min_length": 2}}}
    )
    assert schema["properties"]["s"] == {"type": "string", "minLength": 2}


def test_normalize_maps_spellings_inside_nested_properties_and_items() -> None:
    schema = normalize_args_schema(RICH)
    assert schema["properties"]["opts"]["properties"]["level"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 3,
    }
    assert schema["properties"]["tags"]["items"] == {"type": "string", "maxLength": 3}


def test_normalize_maps_spellings_inside_combinators() -> None:
    raw = {
        "type": "object",
        "properties": {"a": {"anyOf": [{"type": "string", "max_length": 2}, {"type": "integer", "max": 9}]}},
    }
    schema = normalize_args_schema(raw)
    assert schema["properties"]["a"]["anyOf"] == [
        {"type": "string", "maxLength": 2},
        {"type": "integer", "maximum": 9},
    ]


def test_normalize_keeps_property_names_that_look_like_zigclaw_spellings() -> None:
    raw = {
        "type": "object",
        "required": ["max"],
        "properties": {"max": {"type": "integer", "max": 5}, "min": {"type": "integer"}},
    }
    schema = normalize_args_schema(raw)
    assert set(schema["properties"]) == {"max", "min"}
    assert schema["properties"]["max"] == {"type": "integer", "maximum": 5}
    assert schema["required"] == ["max"]
    validate_args(SchemaValidator(schema), {"max": 5, "min": -3}, "tool")


def test_normalize_defaults_additional_properties_to_false() -> None:
    schema = normalize_args_schema({"type": "object"})
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {}


def test_normalize_keeps_explicit_additional_properties_true() -> None:
    assert (
        normalize_args_schema({"type": "object", "additionalProperties": True})["additionalProperties"]
        is True
    )


def test_normalize_does_not_change_its_input() -> None:
    raw = json.loads(json.dumps(FS_READ))
    normalize_args_schema(raw)
    assert raw == FS_READ


@pytest.mark.parametrize(
    ("zig", "json_name"), [("max_length", "maxLength"), ("min", "minimum"), ("max", "maximum")]
)
def test_normalize_rejects_both_spellings_of_one_constraint(zig: str, json_name: str) -> None:
    raw = {"type": "object", "properties": {"a": {"type": "string", zig: 1, json_name: 2}}}
    with pytest.raises(SchemaError) as info:
        normalize_args_schema(raw)
    assert json_name in str(info.value)
    assert "twice" in str(info.value)


@pytest.mark.parametrize("kind", ["array", "string", None, ["object", "null"]])
def test_normalize_rejects_type_other_than_object(kind: Any) -> None:
    raw: dict[str, Any] = {"properties": {}}
    if kind is not None:
        raw["type"] = kind
    with pytest.raises(SchemaError) as info:
        normalize_args_schema(raw)
    assert 'type must be "object"' in str(info.value)


def test_normalize_rejects_an_invalid_json_schema_naming_the_place() -> None:
    with pytest.raises(SchemaError) as info:
        normalize_args_schema({"type": "object", "properties": {"a": {"type": 5}}})
    assert "properties/a/type" in str(info.value)


def test_normalize_rejects_a_negative_max_length() -> None:
    with pytest.raises(SchemaError) as info:
        normalize_args_schema({"type": "object", "properties": {"a": {"type": "string", "max_length": -1}}})
    assert "properties/a/maxLength" in str(info.value)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_parse_args_rejects_non_json_number_constants(constant: str) -> None:
    assert "not valid JSON" in parse_error('{"x": ' + constant + "}")


# --- regexes run on RE2, refs stay inside the schema ------------------------------------


def test_a_backtracking_pattern_cannot_hang_argument_validation() -> None:
    # Exponential for a backtracking engine; linear on RE2.
    schema = normalize_args_schema(
        {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a|aa)+$"}}}
    )
    message = args_error(schema, {"q": "a" * 5000 + "b"})
    assert message.startswith("$.q:") and "does not match" in message


def test_a_backtracking_property_name_pattern_cannot_hang_validation() -> None:
    schema = normalize_args_schema(
        {
            "type": "object",
            "patternProperties": {"^(a+)+$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    message = args_error(schema, {"a" * 5000 + "b": 1})
    assert "unknown key" in message


def test_ecma_unicode_escapes_in_patterns_work() -> None:
    schema = normalize_args_schema(
        {"type": "object", "properties": {"p": {"type": "string", "pattern": "^[^\\u0000]*$"}}}
    )
    assert args_error(schema, {"p": "a\u0000b"}).startswith("$.p:")
    validate_args(SchemaValidator(schema), {"p": "fine"}, "t")


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)b", "a{99999999999}"])
def test_patterns_re2_cannot_run_are_refused_when_the_schema_loads(pattern: str) -> None:
    with pytest.raises(SchemaError):
        normalize_args_schema({"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}})


@pytest.mark.parametrize("ref", ["https://example.com/schema.json", "file:///etc/passwd", "other.json#/x"])
def test_refs_outside_the_schema_are_refused_when_it_loads(ref: str) -> None:
    with pytest.raises(SchemaError, match="must point inside the schema"):
        normalize_args_schema({"type": "object", "properties": {"p": {"$ref": ref}}})


def test_a_self_referencing_schema_is_reported_not_crashed() -> None:
    schema = normalize_args_schema(
        {
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        }
    )
    message = args_error(schema, {"p": 1})
    assert "too deep to check" in message
