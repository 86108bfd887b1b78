"""Which tools exist: the generated built-in registry, and discovery across tool folders.

Tools come in layers, searched last to first: the built-ins, the user's global
tools folder, then the project's external folder. A later layer shadows an
earlier one by name, except that a built-in is shadowed only when the config
allows it (`[tools] allow_shadow_builtin`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import InvalidToolName, ZigclawError
from .manifest import Manifest, load_manifest
from .policy import check_tool_name

BUILTIN_DIR = Path(__file__).resolve().parent / "_builtin"
REGISTRY_FILE = "registry.json"

ORIGIN_BUILTIN = "built-in"
ORIGIN_GLOBAL = "global"
ORIGIN_EXTERNAL = "external"
# Overrides the user config folder whose `tools/` is the global layer (tests, sandboxes, CI).
CONFIG_HOME_ENV = "ZIGCLAW_CONFIG_HOME"


def global_tools_dir() -> Path:
    """The user's global tools folder: `$ZIGCLAW_CONFIG_HOME/tools`, else the user config dir's `tools/`."""
    override = os.environ.get(CONFIG_HOME_ENV)
    if override:
        return Path(override).expanduser() / "tools"
    import platformdirs

    return Path(platformdirs.user_config_dir("zigclaw", appauthor=False)) / "tools"


@dataclass(frozen=True)
class Layer:
    """One folder tools load from, and what kind of origin it is."""

    origin: str
    folder: Path


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
    # Origins of the same-named tools this one hides, nearest first.
    shadows: tuple[str, ...] = ()

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


def has_manifest(folder: Path, tool: str) -> bool:
    """Whether `folder` holds an entry named `<tool>.toml` (any kind: a bad one still claims the name)."""
    return os.path.lexists(folder / f"{tool}.toml")


def locate(
    tool: str, layers: Sequence[Layer], builtins: frozenset[str] | set[str], allow_shadow_builtin: bool
) -> Layer:
    """The layer `tool` loads from. `layers[0]` is the built-in layer; `tool` is a checked plain name.

    A name nobody provides resolves to the last layer, whose loader then says ToolNotFound.
    """
    if tool in builtins and not allow_shadow_builtin:
        return layers[0]
    for layer in reversed(layers[1:]):
        if has_manifest(layer.folder, tool):
            return layer
    return layers[0] if tool in builtins else layers[-1]


def discover_layers(
    layers: Sequence[Layer], builtins: frozenset[str] | set[str], allow_shadow_builtin: bool
) -> list[ToolEntry]:
    """Every tool that wins its name across `layers` (built-in layer first), sorted by name."""
    winners: dict[str, ToolEntry] = {}
    for layer in layers:
        for name in manifest_stems(layer.folder):
            if layer.origin == ORIGIN_BUILTIN:
                if name not in builtins:
                    continue  # the built-in layer holds only what the registry lists
            elif name in builtins and not allow_shadow_builtin:
                continue  # an external file never replaces a built-in unless the config says so
            previous = winners.get(name)
            shadows = () if previous is None else (previous.origin, *previous.shadows)
            winners[name] = _entry(name, layer, shadows)
    return sorted(winners.values(), key=lambda entry: entry.name)


def _entry(name: str, layer: Layer, shadows: tuple[str, ...]) -> ToolEntry:
    manifest: Manifest | None = None
    error: ZigclawError | None = None
    if not check_tool_name(name).allowed:
        error = InvalidToolName(f"file name '{name}.toml' is not a valid tool name")
    else:
        try:
            manifest = load_manifest(layer.folder, name)
        except ZigclawError as exc:
            error = exc
    return ToolEntry(name, layer.origin, layer.folder, manifest, error, shadows)


def discover(plugin_dir: Path, external_dir: Path) -> list[ToolEntry]:
    """Every tool, sorted by name: registry names from plugin_dir, all other names from external_dir."""
    layers = (Layer(ORIGIN_BUILTIN, plugin_dir), Layer(ORIGIN_EXTERNAL, external_dir))
    return discover_layers(layers, builtin_names(), allow_shadow_builtin=False)
