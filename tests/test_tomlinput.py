"""The guard in front of tomllib: dotted keys are measured outside strings and comments."""

from __future__ import annotations

import pytest

from runner.tomlinput import MAX_KEY_PARTS, TomlInputError, longest_dotted_run, parse_toml

DEEP = "a" + ".a" * MAX_KEY_PARTS


@pytest.mark.parametrize(
    "text",
    [
        f"{DEEP} = 1",
        f'"=".{DEEP} = 1',
        f"[t.{DEEP}]",
        f'[args."=".{DEEP}]',
        f"x = {{{DEEP} = 1}}",
        f'x = """a""""\n{DEEP} = 1',
        f"x = '''a'''''\n{DEEP} = 1",
        f'x = "a\\\\"\n{DEEP} = 1',
        f'x = "a\\"b"\n{DEEP} = 1',
    ],
)
def test_a_deep_dotted_key_is_refused_wherever_it_hides(text):
    with pytest.raises(TomlInputError, match="dotted key"):
        parse_toml(text.encode())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('description = "one. two. three. four."', 0),
        ("# a.b.c.d.e\nx = 1", 0),
        ("version = '1.2.3'", 0),
        ("[capabilities.presets.readonly]", 2),
        ("x = 1.5", 1),
        ('a."b.c".d = 1', 2),
    ],
)
def test_dots_in_strings_and_comments_do_not_count(text, expected):
    assert longest_dotted_run(text) == expected


def test_a_normal_document_parses():
    assert parse_toml(b'[a.b]\nc = "d.e.f"\n') == {"a": {"b": {"c": "d.e.f"}}}
