"""Argument schemas: zigclaw's spellings mapped to JSON Schema, and argument validation."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from .errors import InvalidToolArgs

# zigclaw's constraint names and their JSON Schema equivalents.
_ZIG_SPELLINGS = {
    "max_length": "maxLength",
    "min_length": "minLength",
    "min": "minimum",
    "max": "maximum",
}
# Keywords whose value is a map of name -> subschema.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords whose value is one subschema or a list of them.
_SCHEMA_VALUES = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "prefixItems",
    "allOf",
    "anyOf",
    "oneOf",
)

# Bound on the raw `--args` text: fs_write's 1 MiB content escaped as JSON fits.
MAX_ARGS_BYTES = 8 * 1024 * 1024


class SchemaError(ValueError):
    """An args or output schema that is not a usable JSON Schema; the message names the problem."""


def _normalize(node: Any) -> Any:
    if isinstance(node, list):
        return [_normalize(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for raw_key, value in node.items():
        key = str(raw_key)
        key = _ZIG_SPELLINGS.get(key, key)
        if key in out:
            raise SchemaError(f"'{key}' is given twice (once in zigclaw spelling)")
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _normalize(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES:
            out[key] = _normalize(value)
        else:
            out[key] = value
    return out


def normalize_args_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Map zigclaw spellings to JSON Schema, default to rejecting unknown keys, and check the result."""
    schema: dict[str, Any] = _normalize(raw)
    if schema.get("type") != "object":
        raise SchemaError('type must be "object"')
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)
    check_schema(schema)
    return schema


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise SchemaError unless `schema` is a valid JSON Schema (draft 2020-12)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError as JsonSchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except JsonSchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise SchemaError(f"{where}: {exc.message}") from None


def _is_integer(_checker: Any, value: Any) -> bool:
    # JSON Schema counts 10.0 as an integer; tools parsing integers do not.
    return isinstance(value, int) and not isinstance(value, bool)


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 where "integer" means a JSON number written without a fraction."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer)
    return validators.extend(Draft202012Validator, type_checker=checker)  # type: ignore[no-untyped-call]


def _elide(message: str, keep: int = 100) -> str:
    # Messages quote the offending value; keep both ends so the reason survives.
    if len(message) <= 2 * keep + 5:
        return message
    return f"{message[:keep]} ... {message[-keep:]}"


class SchemaValidator:
    """A compiled JSON Schema: a tool's args schema or its [output] schema."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._validator = _validator_class()(schema)

    def first_error(self, value: Any) -> str | None:
        """The JSON path and reason of the most relevant mismatch, or None when `value` matches."""
        from jsonschema.exceptions import best_match

        try:
            error = best_match(self._validator.iter_errors(value))
        except RecursionError:
            return "$: value is nested too deeply"
        if error is None:
            return None
        return f"{error.json_path}: {_elide(error.message)}"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_args(args_text: str) -> dict[str, Any]:
    """Parse `--args` text into an argument object, or raise InvalidToolArgs."""
    if len(args_text.encode("utf-8", "surrogatepass")) > MAX_ARGS_BYTES:
        raise InvalidToolArgs(f"args are longer than {MAX_ARGS_BYTES} bytes")
    try:
        value = json.loads(args_text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidToolArgs(f"args are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidToolArgs(f"args must be a JSON object, not {type(value).__name__}")
    return value


def validate_args(validator: SchemaValidator, args: Any, tool: str) -> None:
    """Raise InvalidToolArgs unless `args` is an object that matches the tool's schema."""
    if not isinstance(args, dict):
        raise InvalidToolArgs(f"args must be a JSON object, not {type(args).__name__}")
    problem = validator.first_error(args)
    if problem is not None:
        raise InvalidToolArgs(
            problem, hint=f"tool args do not match schema; run `zigclaw tools describe {tool}`."
        )
