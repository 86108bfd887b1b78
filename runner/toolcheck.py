"""`zigclaw tools validate`: everything a tool folder must pass before anyone installs or runs it.

Checks, in order: the manifest; the module (a file in the folder that parses,
imports only WASI preview 1, exports `_start` and `memory`, compiles and fits its
memory cap); the `sha256` pin; then each `[[examples]]` entry, run for real
through the same decisions and sandbox as `tools run`, with the tool's folder as
the read-only /workspace and nothing else mounted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import (
    ExampleFailed,
    InvalidManifest,
    InvalidModule,
    InvalidToolName,
    ToolIntegrityMismatch,
    ToolMemoryLimit,
    ToolNotFound,
    ZigclawError,
)
from .manifest import Manifest, load_manifest
from .modulefile import ModuleFile, read_module
from .policy import check_tool_name
from .registry import manifest_stems

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Check:
    """One check's verdict (pass, fail, skip), what it found, and the named error of a failure."""

    name: str
    status: str
    detail: str
    error: ZigclawError | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.name, "status": self.status, "detail": self.detail}
        if self.error is not None:
            out["error"] = self.error.name
        return out


@dataclass
class Report:
    """Every check of one tool folder; `manifest` and `module` are what passed, for installing."""

    folder: Path
    tool: str
    checks: list[Check] = field(default_factory=list)
    manifest: Manifest | None = None
    module: ModuleFile | None = None

    @property
    def ok(self) -> bool:
        return all(check.status != FAIL for check in self.checks)

    @property
    def first_error(self) -> ZigclawError | None:
        return next((check.error for check in self.checks if check.error is not None), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tool": self.tool,
            "folder": str(self.folder),
            "checks": [check.to_json() for check in self.checks],
        }


def find_manifest(path: Path) -> tuple[Path, str]:
    """The folder and tool name for `path`: a `<tool>.toml` file, or a folder holding one.

    A folder with several manifests must be named like one of them.
    """
    if path.is_dir():
        stems = manifest_stems(path)
        if len(stems) == 1:
            return path, stems[0]
        if path.name in stems:
            return path, path.name
        if not stems:
            raise ToolNotFound(
                f"no manifest (<tool>.toml) in {path}",
                hint="a tool folder holds <tool>.toml beside its module; `zigclaw tools new` makes one.",
            )
        raise ToolNotFound(
            f"{path} holds several manifests ({', '.join(stems[:5])}); name the one to use",
            hint="pass the manifest file itself, e.g. PATH/<tool>.toml.",
        )
    if path.suffix == ".toml" and path.is_file():
        return path.parent, path.stem
    raise ToolNotFound(f"{path} is neither a tool folder nor a manifest file")


def locate_target(target: str, folder_for: Callable[[str], Path]) -> tuple[Path, str]:
    """What `tools validate TARGET` checks: an existing path (folder or manifest), else a tool's name,
    looked up with `folder_for` (the runner's layers)."""
    if os.path.lexists(target) or "/" in target or target.endswith(".toml"):
        return find_manifest(Path(target))
    decision = check_tool_name(target)
    if not decision.allowed:
        raise InvalidToolName(decision.reason)
    return folder_for(target), target


def validate(folder: Path, tool: str, *, run_examples: bool = True) -> Report:
    """Run every check on `<folder>/<tool>.toml` and its module; never raises a ZigclawError."""
    report = Report(folder, tool)
    try:
        manifest = load_manifest(folder, tool)
    except ZigclawError as exc:
        report.checks.append(Check("manifest", FAIL, exc.message, exc))
        return report
    report.manifest = manifest
    report.checks.append(Check("manifest", PASS, f"{tool} {manifest.version}"))
    if manifest.native:
        error = InvalidModule("native tools are not checked or installed by this command")
        report.checks.append(Check("module", FAIL, error.message, error))
        return report
    module_check = _check_module(folder, manifest)
    report.checks.append(module_check[0])
    report.module = module_check[1]
    if report.module is None:
        return report
    pin = _check_pin(manifest, report.module)
    report.checks.append(pin)
    if not run_examples:
        return report
    if not manifest.examples:
        report.checks.append(Check("examples", SKIP, "the manifest has no [[examples]]"))
    elif pin.status == FAIL:
        report.checks.append(Check("examples", SKIP, "not run: the module does not match its pin"))
    else:
        report.checks.extend(_run_examples(folder, manifest))
    return report


def _check_module(folder: Path, manifest: Manifest) -> tuple[Check, ModuleFile | None]:
    from .sandbox.wasi import runtime

    try:
        module = read_module(str(folder / manifest.module_file))
        compiled = runtime().compile(module.data, str(module.path), module.sha256)
        if compiled.initial_memory_bytes > manifest.max_memory_bytes:
            raise ToolMemoryLimit(
                f"module starts with {compiled.initial_memory_bytes} bytes of memory, over "
                f"max_memory_bytes ({manifest.max_memory_bytes})"
            )
    except ZigclawError as exc:
        return Check("module", FAIL, exc.message, exc), None
    detail = (
        f"{manifest.module_file}: {len(module.data)} bytes, imports only WASI preview 1, "
        "exports _start and memory, compiles"
    )
    return Check("module", PASS, detail), module


def _check_pin(manifest: Manifest, module: ModuleFile) -> Check:
    if manifest.sha256 is None:
        return Check("sha256", SKIP, f"not pinned (module sha256 {module.sha256}); `tools add` pins it")
    if manifest.sha256 == module.sha256:
        return Check("sha256", PASS, f"module matches the pin {module.sha256}")
    error = ToolIntegrityMismatch(f"module sha256 {module.sha256} does not match the pin {manifest.sha256}")
    return Check("sha256", FAIL, error.message, error)


def _run_examples(folder: Path, manifest: Manifest) -> list[Check]:
    runner = _example_runner(folder, manifest)
    checks = []
    for number, example in enumerate(manifest.examples, 1):
        name = f"example {number}"
        shown_args = _short(example.args)
        try:
            result = runner.run(manifest.tool_name, example.args)
        except ZigclawError as exc:
            checks.append(Check(name, FAIL, f"args {shown_args}: {exc.name}: {exc.message}", exc))
            continue
        if result.ok != example.ok or result.data != example.data:
            error = ExampleFailed(
                f"{name} (args {shown_args}): expected ok={_short(example.ok)} data {_short(example.data)}, "
                f"got ok={_short(result.ok)} data {_short(result.data)}"
            )
            checks.append(Check(name, FAIL, error.message, error))
        else:
            checks.append(Check(name, PASS, f"args {shown_args} gave the expected data"))
    return checks


def _example_runner(folder: Path, manifest: Manifest) -> Any:
    """A Runner that loads only this folder, with it as the read-only workspace and no write paths."""
    from .config import Config, LoadedConfig
    from .service import Runner

    real = os.path.realpath(folder)
    config = Config.model_validate(
        {
            "security": {"workspace_root": real},
            "tools": {
                "plugin_dir": real,
                "external_dir": real,
                "filter": {"allow_external": True},
            },
            # The user asked for these example runs by name; they are not an agent's calls,
            # and nothing is written into the folder being checked.
            "approval": {"default": "preApproved"},
            "audit": {"enabled": False},
            "capabilities": {
                "active_preset": "validate",
                "presets": {
                    "validate": {
                        "tools": [manifest.tool_name],
                        "allow_network": manifest.requires_network,
                    }
                },
            },
        }
    )
    loaded = LoadedConfig(config=config, base_dir=Path(real), source=None, raw={})
    runner = Runner(loaded, guard_blocking_calls=True)
    # Only this folder counts: no global tool may answer for the one being checked.
    runner.global_dir = Path(real)
    return runner


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "..."


def manifest_problem(report: Report) -> ZigclawError:
    """The error to raise for a report that failed (the first failing check's own)."""
    return report.first_error or InvalidManifest(f"{report.folder / report.tool}.toml did not validate")
