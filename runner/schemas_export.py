"""JSON Schemas of tool.toml and zigclaw.toml, generated from the pydantic models.

`python -m runner.schemas_export [DIR]` writes them to DIR (default: manifests/).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .config import Config
from .manifest import Manifest

SCHEMA_FILES: dict[str, tuple[type[BaseModel], str]] = {
    "tool.schema.json": (Manifest, "zigclaw tool manifest (tool.toml)"),
    "zigclaw.schema.json": (Config, "zigclaw configuration (zigclaw.toml)"),
}


def schemas() -> dict[str, dict[str, Any]]:
    """Each schema file name with its content."""
    out: dict[str, dict[str, Any]] = {}
    for name, (model, title) in SCHEMA_FILES.items():
        schema = model.model_json_schema(mode="validation")
        out[name] = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": title}
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "manifests"
    for name, schema in schemas().items():
        (folder / name).write_text(render(schema), encoding="utf-8")
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
