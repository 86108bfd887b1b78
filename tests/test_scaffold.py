"""`zigclaw tools new`: the scaffolded tool validates, installs and runs with no edits (end to end)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import zigclaw

REPO = Path(__file__).resolve().parent.parent



@pytest.mark.parametrize("lang", ["c", "zig"])
def test_new_then_validate_add_and_run_with_no_edits(tmp_path: Path, lang: str) -> None:
    name = f"greet_{lang}"
    made = zigclaw(tmp_path, "tools", "new", name, "--lang", lang, "--dir", "src")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["built"] is True
    folder = tmp_path / "src" / name
    assert (folder / f"{name}.wasm").is_file() and (folder / "build.sh").is_file()

    checked = zigclaw(tmp_path, "tools", "validate", str(folder))
    assert checked.returncode == 0, checked.stderr
    assert [c["status"] for c in json.loads(checked.stdout)["checks"]] == ["pass", "pass", "skip", "pass"]

    added = zigclaw(tmp_path, "tools", "add", str(folder))
    assert added.returncode == 0, added.stderr
    (tmp_path / "zigclaw.toml").write_text(
        textwrap.dedent(
            f"""
            [tools.filter]
            allow_external = true

            [capabilities.presets.readonly]
            tools = ["echo", "{name}"]

            [approval.tools]
            {name} = "preApproved"
            """
        )
    )
    ran = zigclaw(tmp_path, "tools", "run", name, "--args", '{"name":"newcomer"}')
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["ok"] and result["data"] == {"greeting": "hello, newcomer"}
    assert result["stdout"] == f"{name} ok"

    pinned = zigclaw(tmp_path, "tools", "validate", name)  # by name: the installed, pinned copy
    assert pinned.returncode == 0, pinned.stderr
    assert [c["status"] for c in json.loads(pinned.stdout)["checks"]] == ["pass"] * 4


def test_new_refuses_bad_names_existing_folders_and_unknown_languages(tmp_path: Path) -> None:
    bad = zigclaw(tmp_path, "tools", "new", "Bad-Name", "--no-build")
    assert bad.returncode == 1 and bad.stderr.startswith("error: InvalidToolName\n")
    assert zigclaw(tmp_path, "tools", "new", "ok_name", "--no-build").returncode == 0
    again = zigclaw(tmp_path, "tools", "new", "ok_name", "--no-build")
    assert again.returncode == 1 and again.stderr.startswith("error: ToolExists\n")
    lang = zigclaw(tmp_path, "tools", "new", "other", "--lang", "rust")
    assert lang.returncode == 2 and "--lang" in lang.stderr and not (tmp_path / "other").exists()


def test_the_zig_template_carries_the_same_protocol_library_as_the_builtins() -> None:
    template = REPO / "runner" / "_builtin" / "protocol.zig"
    assert template.read_text() == (REPO / "plugins" / "sdk" / "protocol.zig").read_text()
