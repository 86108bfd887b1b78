"""zigclaw.toml: its model, the loader, and the warnings of `config validate`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .errors import InvalidConfig
from .files import read_untrusted_file
from .tomlinput import load_model

CONFIG_FILE_NAME = "zigclaw.toml"
MAX_CONFIG_BYTES = 1024 * 1024
DEFAULT_PRESET = "readonly"


def _plain_path(value: str) -> str:
    if "\0" in value:
        raise ValueError("a path cannot hold a NUL character")
    return value


# A path as written in zigclaw.toml: no NUL, a bounded length.
PathText = Annotated[str, Field(max_length=4096), AfterValidator(_plain_path)]


class _Section(BaseModel):
    # Unknown keys are warnings (see `unknown_keys`), so the model ignores them.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class SecurityConfig(_Section):
    workspace_root: PathText = "."
    # Run guests on a worker thread the caller can give up on (see README); the CLI always does.
    guard_blocking_calls: bool = False


class RegistryConfig(_Section):
    strict: bool = False


class FilterConfig(_Section):
    allow_external: bool = False
    external_allow_list: list[str] = []


class NativeConfig(_Section):
    allow_unconfined: bool = False


class ToolsConfig(_Section):
    plugin_dir: PathText | None = None  # None: the package's built-in tools
    external_dir: PathText = "./ext-tools"
    # A global or project tool may replace a built-in of the same name only when this is true.
    allow_shadow_builtin: bool = False
    registry: RegistryConfig = RegistryConfig()
    filter: FilterConfig = FilterConfig()
    native: NativeConfig = NativeConfig()


class Preset(_Section):
    tools: list[str] = []
    allow_network: bool = False
    allow_write_paths: list[PathText] = []


def _default_presets() -> dict[str, Preset]:
    return {DEFAULT_PRESET: Preset(tools=["echo"])}


class CapabilitiesConfig(_Section):
    active_preset: str = DEFAULT_PRESET
    presets: dict[str, Preset] = Field(default_factory=_default_presets)


ApprovalMode = Literal["ask", "preApproved", "blocked"]


class ApprovalConfig(_Section):
    # None: "ask" for external tools, "preApproved" for built-ins.
    default: ApprovalMode | None = None
    tools: dict[str, ApprovalMode] = {}


class AuditConfig(_Section):
    enabled: bool = True
    path: PathText = ".zigclaw/audit.jsonl"
    include_args: bool = False


class Config(_Section):
    """A whole zigclaw.toml; every field has the default of SPEC 3."""

    security: SecurityConfig = SecurityConfig()
    tools: ToolsConfig = ToolsConfig()
    capabilities: CapabilitiesConfig = CapabilitiesConfig()
    approval: ApprovalConfig = ApprovalConfig()
    audit: AuditConfig = AuditConfig()


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config, the folder its relative paths resolve against, and its raw table."""

    config: Config
    base_dir: Path
    source: Path | None
    raw: Mapping[str, Any]

    def resolve(self, path: str) -> Path:
        """A config path made absolute: relative paths start at the config file's folder."""
        try:
            candidate = Path(path).expanduser()
        except RuntimeError as exc:  # `~user` for a user that does not exist
            raise InvalidConfig(f"path {path!r} cannot be resolved: {exc}") from None
        return candidate if candidate.is_absolute() else self.base_dir / candidate


@dataclass(frozen=True)
class Warning_:
    """One `config validate` warning: where, and what."""

    key_path: str
    message: str


def parse_config(data: bytes, *, source: str, base_dir: Path) -> LoadedConfig:
    """Validate config bytes; wrong types and bad TOML are InvalidConfig, unknown keys are not."""
    config, raw = load_model(data, Config, source=source, error=InvalidConfig)
    return LoadedConfig(config=config, base_dir=base_dir, source=Path(source), raw=raw)


def load_config(path: str | Path | None = None) -> LoadedConfig:
    """Load `path`, else ./zigclaw.toml, else the built-in defaults."""
    explicit = path is not None
    candidate = Path(path) if path is not None else Path.cwd() / CONFIG_FILE_NAME
    try:
        # The config is the operator's own file: a symlink to it is fine.
        data, _ = read_untrusted_file(candidate, MAX_CONFIG_BYTES, follow_symlinks=True)
    except FileNotFoundError:
        if explicit:
            raise InvalidConfig(
                f"config file {candidate} does not exist",
                hint="pass an existing file to --config, or omit it to use ./zigclaw.toml.",
            ) from None
        return LoadedConfig(config=Config(), base_dir=Path.cwd(), source=None, raw={})
    except ValueError as exc:
        raise InvalidConfig(f"{candidate}: {exc}") from None
    base = candidate.resolve().parent
    return parse_config(data, source=str(candidate), base_dir=base)


# --- warnings --------------------------------------------------------------------


def _levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


# Suggestions are for typos in key and preset names; longer words are not compared
# (the edit distance costs the product of both lengths).
MAX_SUGGEST_LENGTH = 64


def suggest(word: str, known: Iterable[str], max_distance: int = 2) -> str | None:
    """The closest known word within `max_distance` edits, first one wins on a tie."""
    if len(word) > MAX_SUGGEST_LENGTH:
        return None
    best: tuple[int, str] | None = None
    for candidate in known:
        if abs(len(candidate) - len(word)) > max_distance:
            continue
        distance = _levenshtein(word, candidate)
        if distance <= max_distance and (best is None or distance < best[0]):
            best = (distance, candidate)
    return None if best is None else best[1]


def _model_fields(model: type[BaseModel]) -> dict[str, Any]:
    return {name: field.annotation for name, field in model.model_fields.items()}


def unknown_keys(raw: Mapping[str, Any], model: type[BaseModel] = Config, prefix: str = "") -> list[Warning_]:
    """Warnings for keys the model does not know, with a "did you mean" where one is close."""
    warnings: list[Warning_] = []
    fields = _model_fields(model)
    for key, value in raw.items():
        path = f"{prefix}{key}"
        if key not in fields:
            guess = suggest(key, fields)
            message = "unknown key (ignored)" + (f"; did you mean '{guess}'?" if guess else "")
            warnings.append(Warning_(path, message))
            continue
        annotation = fields[key]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if isinstance(value, Mapping):
                warnings.extend(unknown_keys(value, annotation, f"{path}."))
        elif model is CapabilitiesConfig and key == "presets" and isinstance(value, Mapping):
            for name, preset in value.items():
                if isinstance(preset, Mapping):
                    warnings.extend(unknown_keys(preset, Preset, f"{path}.{name}."))
    return warnings


def validation_warnings(
    loaded: LoadedConfig,
    builtin_names: Iterable[str],
    network_tools: Iterable[str],
) -> list[Warning_]:
    """Every warning of SPEC 3, in a stable order: unknown keys first, then the policy checks."""
    config = loaded.config
    builtins = set(builtin_names)
    network = set(network_tools)
    presets = config.capabilities.presets
    warnings = unknown_keys(loaded.raw)
    referenced = {tool for preset in presets.values() for tool in preset.tools}
    allow_key = "tools.filter.external_allow_list"
    for tool in config.tools.filter.external_allow_list:
        if tool in builtins:
            message = f"'{tool}' is a built-in tool; listing it in external_allow_list is redundant"
            warnings.append(Warning_(allow_key, message))
        elif tool not in referenced:
            warnings.append(Warning_(allow_key, f"'{tool}' is not referenced by any capability preset"))
    for name in sorted(presets):
        preset = presets[name]
        if preset.allow_network:
            continue
        for tool in preset.tools:
            if tool in network:
                warnings.append(
                    Warning_(
                        f"capabilities.presets.{name}.allow_network",
                        f"preset '{name}' includes network tool '{tool}' but allow_network=false",
                    )
                )
    active = config.capabilities.active_preset
    if active not in presets:
        guess = suggest(active, presets)
        known = ", ".join(sorted(presets)) or "none"
        message = f"unknown preset '{active}'; every tool will be denied (defined: {known})"
        if guess:
            message += f"; did you mean '{guess}'?"
        warnings.append(Warning_("capabilities.active_preset", message))
    return warnings
