"""Which tools exist: the generated built-in registry, and discovery across tool folders."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import InvalidToolName, ZigclawError
from .manifest import Manifest, load_manifest
from .policy import check_tool_name

BUILTIN_DIR = Path(__file__).resolve().parent / "_builtin"
REGISTRY_FILE = "registry.json"

ORIGIN_BUILTIN = "built-in"
ORIGIN_EXTERNAL = "external"


@dataclass(frozen=True)
class RegistryEntry:
    """A built-in tool as the build step recorded it."""

    name: str
    abi: str
    requires_network: bool
    native: bool


@lru_cache(maxsize=4)
def load_registry(folder: Path = BUILTIN_DIR) -> dict[str, RegistryEntry]:
    """The registry generated at build time; empty when the built-ins were never built."""
    try:
        raw = json.loads((folder / REGISTRY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries: dict[str, RegistryEntry] = {}
    for item in raw.get("tools", []):
        entry = RegistryEntry(
            name=str(item["name"]),
            abi=str(item["abi"]),
            requires_network=bool(item.get("requires_network", False)),
            native=bool(item.get("native", False)),
        )
        entries[entry.name] = entry
    return entries


def builtin_names() -> frozenset[str]:
    """Names of the built-in tools (the compiled registry decides what is built in)."""
    return frozenset(load_registry())


@dataclass(frozen=True)
class ToolEntry:
    """A tool found in a folder: its manifest, or why the manifest is unusable."""

    name: str
    origin: str
    folder: Path
    manifest: Manifest | None
    error: ZigclawError | None

    @property
    def runnable_name(self) -> bool:
        """Whether `tools run` could ever accept this name (`Foo.toml` never runs as `Foo`)."""
        return check_tool_name(self.name).allowed


def manifest_stems(folder: Path) -> list[str]:
    """Stems of the `*.toml` files directly in `folder` (none if it does not exist)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name[: -len(".toml")] for name in names if name.endswith(".toml"))


def discover(plugin_dir: Path, external_dir: Path) -> list[ToolEntry]:
    """Every tool, sorted by name: registry names from plugin_dir, all other names from external_dir."""
    builtins = builtin_names()
    found: list[ToolEntry] = []
    for origin, folder in ((ORIGIN_BUILTIN, plugin_dir), (ORIGIN_EXTERNAL, external_dir)):
        for name in manifest_stems(folder):
            if (name in builtins) != (origin == ORIGIN_BUILTIN):
                continue  # built-ins load only from plugin_dir, externals only from external_dir
            manifest: Manifest | None = None
            error: ZigclawError | None = None
            if not check_tool_name(name).allowed:
                error = InvalidToolName(f"file name '{name}.toml' is not a valid tool name")
            else:
                try:
                    manifest = load_manifest(folder, name)
                except ZigclawError as exc:
                    error = exc
            found.append(ToolEntry(name, origin, folder, manifest, error))
    return sorted(found, key=lambda entry: entry.name)
