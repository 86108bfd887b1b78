"""Argument schemas: zigclaw's spellings mapped to JSON Schema, and argument validation."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
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


_UNICODE_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9A-Fa-f]{4})")


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """A schema regex compiled with RE2: linear time on any input, so no pattern can hang a call.

    ECMA-262's \\uXXXX escapes are rewritten to RE2's \\x{XXXX}; backreferences and
    lookaround do not exist in RE2, and a pattern that uses them is refused.
    """
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(_UNICODE_ESCAPE.sub(r"\1\\x{\2}", pattern), options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise SchemaError(f"pattern {pattern!r} is not supported: {detail}") from None


def _walk(node: Any) -> Iterator[tuple[str, Any, Mapping[str, Any]]]:
    """Every (keyword, value, schema) in a schema tree."""
    if isinstance(node, list):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield key, value, node
            if key in ("enum", "const", "default", "examples"):
                continue  # data, not subschemas
            yield from _walk(value)


def _check_keywords(schema: Mapping[str, Any]) -> None:
    """Refuse what this runner will not evaluate safely: remote refs and non-RE2 patterns."""
    uses_pattern_properties = uses_unevaluated = False
    for key, value, _node in _walk(schema):
        if key in ("$ref", "$dynamicRef") and not (isinstance(value, str) and value.startswith("#")):
            raise SchemaError(f"{key} {value!r} must point inside the schema (start with '#')")
        elif key == "pattern" and isinstance(value, str):
            compile_pattern(value)
        elif key == "patternProperties" and isinstance(value, Mapping):
            uses_pattern_properties = True
            for pattern in value:
                compile_pattern(str(pattern))
        elif key == "unevaluatedProperties":
            uses_unevaluated = True
    if uses_pattern_properties and uses_unevaluated:
        raise SchemaError("unevaluatedProperties cannot be combined with patternProperties")


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

    # RE2 sees every pattern first: the metaschema's "regex" format check compiles
    # them with Python's re, which must only ever see what RE2 accepted.
    _check_keywords(schema)
    try:
        Draft202012Validator.check_schema(schema)
    except JsonSchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise SchemaError(f"{where}: {exc.message}") from None
    except RecursionError:
        raise SchemaError("nested too deeply") from None
    except (OverflowError, re.error) as exc:  # a pattern Python's re cannot take
        raise SchemaError(f"a pattern cannot be used: {exc}") from None


def _is_integer(_checker: Any, value: Any) -> bool:
    # JSON Schema counts 10.0 as an integer; tools parsing integers do not.
    return isinstance(value, int) and not isinstance(value, bool)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and compile_pattern(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(compile_pattern(pattern).search(name) is not None for pattern in patterns)


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = compile_pattern(pattern)
        for name, value in instance.items():
            if regex.search(name) is not None:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [name for name in instance if name not in declared and not _matches_any(name, patterns)]
    if validator.is_type(allowed, "object"):
        for name in extras:
            yield from validator.descend(instance[name], allowed, path=name)
    elif allowed is False and extras:
        names = ", ".join(repr(name) for name in sorted(extras))
        yield ValidationError(f"unknown key{'s' if len(extras) > 1 else ''} {names} (not in the schema)")


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 where "integer" has no fraction and every regex runs on RE2 (linear time)."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer)
    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        validators={
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
        type_checker=checker,
    )


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
            if self._validator.is_valid(value):  # the common case, without ranking errors
                return None
            error = best_match(self._validator.iter_errors(value))
        except RecursionError:
            return "$: too deep to check (the value, or a schema $ref that refers to itself)"
        except ValueError:  # e.g. an integer too long to show in the message
            return "$: value cannot be checked (an integer with too many digits?)"
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
