"""Error values: one line, no control characters, named."""

from __future__ import annotations

from runner.errors import ALL_ERRORS, ToolFailed, describe_validation_error, printable


def test_messages_escape_terminal_control_sequences_and_bidi_overrides():
    error = ToolFailed("stderr: \x1b]0;owned\x07\x1b[2Jgone \u202edesrever")
    assert "\x1b" not in error.message and "\x07" not in error.message and "\u202e" not in error.message
    assert "\\x1b]0;owned\\x07" in error.message
    assert "\\u202e" in error.message


def test_messages_are_one_line():
    assert ToolFailed("line one\nline two\r\nthree").message == "line one line two three"


def test_printable_keeps_ordinary_unicode():
    assert printable("héllo ✓ 日本") == "héllo ✓ 日本"


def test_every_error_class_has_its_own_name():
    names = [cls.name for cls in ALL_ERRORS]
    assert len(names) == len(set(names))
    assert all(cls.__name__ == cls.name for cls in ALL_ERRORS)


def test_validation_error_description_names_the_key():
    from pydantic import BaseModel, ConfigDict, ValidationError

    class Model(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        limit: int

    try:
        Model.model_validate({"limit": "x", "other": 1})
    except ValidationError as exc:
        text = describe_validation_error(exc)
    assert text.startswith("limit: ") and "(and 1 more problem)" in text
