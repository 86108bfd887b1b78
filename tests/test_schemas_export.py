"""manifests/*.schema.json are generated from the models and kept current."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from runner.schemas_export import main, render, schemas

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"


def test_committed_schemas_match_the_models():
    for name, schema in schemas().items():
        assert (MANIFESTS / name).read_text() == render(schema), f"run `just schemas` to refresh {name}"


def test_builtin_manifests_validate_against_the_exported_tool_schema():
    import tomllib

    schema = json.loads((MANIFESTS / "tool.schema.json").read_text())
    for path in sorted(MANIFESTS.glob("*.toml")):
        jsonschema.validate(tomllib.loads(path.read_text()), schema)


def test_exported_tool_schema_rejects_unknown_keys():
    schema = json.loads((MANIFESTS / "tool.schema.json").read_text())
    manifest = {"tool_name": "x", "version": "1.0.0", "description": "d", "args": {}, "nope": 1}
    try:
        jsonschema.validate(manifest, schema)
    except jsonschema.ValidationError as exc:
        assert "nope" in exc.message
    else:
        raise AssertionError("an unknown key passed the exported schema")


def test_export_writes_both_files(tmp_path):
    assert main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tool.schema.json", "zigclaw.schema.json"]
