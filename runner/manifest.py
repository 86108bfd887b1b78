"""The tool.toml manifest: its model, and a loader that treats every file as untrusted."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .errors import InvalidManifest, ToolNotFound
from .files import IdentityCache
from .schema import SchemaError, SchemaValidator, check_schema, normalize_args_schema
from .tomlinput import load_model

MAX_MANIFEST_BYTES = 256 * 1024
TOOL_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
MIB = 1024 * 1024
# Semantic Versioning 2.0.0, written out: MAJOR.MINOR.PATCH[-pre][+build].
_NUM = r"(0|[1-9][0-9]*)"
_PRE = r"(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
SEMVER_PATTERN = rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$"
# Fuel per millisecond of max_runtime_ms when max_fuel is not given: above what
# wasmtime executes in that time, so the wall clock is normally the binding limit.
FUEL_PER_MS = 5_000_000
MAX_EXAMPLES = 64


class Example(BaseModel):
    """One `[[examples]]` entry: arguments, and the `data` the tool must answer with (checked by validate)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    args: dict[str, Any] = {}
    data: Any
    ok: bool = True


class Manifest(BaseModel):
    """One tool's manifest (SPEC 2), validated: a value of this type is safe to act on."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    tool_name: Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]
    version: Annotated[str, Field(pattern=SEMVER_PATTERN)]
    description: Annotated[str, Field(min_length=1, max_length=4096)]
    requires_network: bool = False
    native: bool = False
    max_runtime_ms: Annotated[int, Field(ge=1, le=600_000)] = 2000
    max_stdout_bytes: Annotated[int, Field(ge=0, le=64 * MIB)] = 65536
    max_stderr_bytes: Annotated[int, Field(ge=0, le=64 * MIB)] = 65536
    max_memory_bytes: Annotated[int, Field(ge=64 * 1024, le=4096 * MIB)] = 64 * MIB
    max_fuel: Annotated[int, Field(ge=1, le=2**63 - 1)] | None = None
    module: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]] = []
    args: dict[str, Any]
    output: dict[str, Any] | None = None
    # Argument names whose values identify an approval (see runner/approval.py).
    approval_key: Annotated[
        list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$")]], Field(max_length=16)
    ] = []

    @model_validator(mode="after")
    def _approval_key_names_arguments(self) -> Manifest:
        properties = self.args.get("properties")
        known = properties if isinstance(properties, dict) else {}
        for name in self.approval_key:
            if name not in known:
                raise ValueError(f"approval_key: '{name}' is not an argument in [args.properties]")
        if len(set(self.approval_key)) != len(self.approval_key):
            raise ValueError("approval_key: names must not repeat")
        return self

    examples: Annotated[list[Example], Field(max_length=MAX_EXAMPLES)] = []

    @field_validator("description")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("module")
    @classmethod
    def _plain_file_name(cls, value: str | None) -> str | None:
        if value is not None and ("/" in value or "\\" in value or "\0" in value or value in (".", "..")):
            raise ValueError("must be a file name in the tool's folder, without path separators")
        return value

    @field_validator("args")
    @classmethod
    def _args_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            return normalize_args_schema(value)
        except SchemaError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("output")
    @classmethod
    def _output_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                check_schema(value)
            except SchemaError as exc:
                raise ValueError(str(exc)) from None
        return value

    # Built on first use (the schemas were checked at load) and kept with the manifest.
    @cached_property
    def args_validator(self) -> SchemaValidator:
        return SchemaValidator(self.args)

    @cached_property
    def output_validator(self) -> SchemaValidator | None:
        return None if self.output is None else SchemaValidator(self.output)

    @cached_property
    def abi(self) -> str:
        """The ABI fingerprint of the args schema, as the built-in registry records it."""
        from .abi import abi_fingerprint

        return abi_fingerprint(self.args)

    @property
    def module_file(self) -> str:
        """The module's file name inside the tool's folder."""
        if self.module is not None:
            return self.module
        return self.tool_name if self.native else f"{self.tool_name}.wasm"

    @property
    def fuel(self) -> int:
        return self.max_fuel if self.max_fuel is not None else self.max_runtime_ms * FUEL_PER_MS

    def describe(self) -> dict[str, Any]:
        """The manifest as JSON, zigclaw's keys first in zigclaw's order, then the new ones set."""
        out: dict[str, Any] = {
            "tool_name": self.tool_name,
            "version": self.version,
            "description": self.description,
            "requires_network": self.requires_network,
            "native": self.native,
            "max_runtime_ms": self.max_runtime_ms,
            "max_stdout_bytes": self.max_stdout_bytes,
            "max_stderr_bytes": self.max_stderr_bytes,
            "args": self.args,
            "max_memory_bytes": self.max_memory_bytes,
            "max_fuel": self.fuel,
            "module": self.module_file,
        }
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        if self.env:
            out["env"] = list(self.env)
        if self.output is not None:
            out["output"] = self.output
        if self.approval_key:
            out["approval_key"] = list(self.approval_key)
        if self.examples:
            out["examples"] = [example.model_dump() for example in self.examples]
        return out


def parse_manifest(data: bytes, *, stem: str, source: str) -> Manifest:
    """Validate manifest bytes that claim to be `<stem>.toml`; `source` names the file in errors."""
    manifest, _ = load_model(data, Manifest, source=source, error=InvalidManifest)
    if manifest.tool_name != stem:
        raise InvalidManifest(
            f"{source}: tool_name: '{manifest.tool_name}' does not match the file name '{stem}.toml'"
        )
    return manifest


# Validated manifests, reused while their file is unchanged.
_manifests: IdentityCache[Manifest] = IdentityCache(256)


def load_manifest(folder: Path, tool: str) -> Manifest:
    """Load `<folder>/<tool>.toml`; ToolNotFound when absent, InvalidManifest when unusable."""
    path = source = os.path.join(folder, f"{tool}.toml")  # os.path: pathlib costs more per run
    try:
        return _manifests.load(
            path, MAX_MANIFEST_BYTES, lambda data: parse_manifest(data, stem=tool, source=source)
        )
    except FileNotFoundError:
        raise ToolNotFound(f"no manifest for tool '{tool}' in {folder}") from None
    except ValueError as exc:
        raise InvalidManifest(f"{path}: {exc}") from None
