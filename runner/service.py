"""One call, end to end: decide, plan, run in the sandbox, decode. The library API lives here."""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import policy
from .approval import (
    ASK,
    BLOCKED,
    ApprovalMemory,
    ApprovalRequest,
    Approver,
    approval_key,
    decide_approval,
    mode_for,
)
from .audit import AuditLog, CallRecord
from .cancel import CancelToken
from .config import LoadedConfig, Warning_, load_config, validation_warnings
from .errors import (
    ExternalToolDenied,
    InvalidConfig,
    InvalidModule,
    InvalidToolArgs,
    InvalidToolName,
    MalformedResponse,
    SandboxUnavailable,
    ToolAbiMismatch,
    ToolBlocked,
    ToolCancelled,
    ToolFailed,
    ToolIntegrityMismatch,
    ToolNetworkNotAllowed,
    ToolNotAllowed,
    ToolNotInRegistry,
    ZigclawError,
)
from .manifest import Manifest, load_manifest
from .modulefile import ModuleFile, read_module
from .policy import ActivePreset, Decision, Mount
from .protocol import decode_response, encode_request, new_request_id
from .registry import (
    BUILTIN_DIR,
    ORIGIN_BUILTIN,
    ORIGIN_EXTERNAL,
    ORIGIN_GLOBAL,
    Layer,
    ToolEntry,
    discover_layers,
    global_tools_dir,
    load_registry,
    locate,
)
from .sandbox.plan import Limits, RunPlan
from .sandbox.stack import has_room_for_wasm
from .schema import parse_args, validate_args

STDERR_EXCERPT_BYTES = 512
# How many (tool, preset) pairs a Runner remembers as allowed by the static steps.
MAX_REMEMBERED_CALLS = 1024


# Folders whose contents the host runs or trusts; no write mount may contain one.
SYSTEM_FOLDERS = ("/bin", "/boot", "/etc", "/lib", "/lib64", "/opt", "/root", "/sbin", "/usr", "/var")


@dataclass(frozen=True)
class RunResult:
    """What a completed run returns; `ok` is the tool's own verdict."""

    request_id: str
    ok: bool
    data: Any
    stdout: str
    stderr: str
    tool: str = ""
    duration_ms: float = 0.0
    fuel_used: int = 0
    peak_memory_bytes: int = 0
    output_bytes: int = 0
    decisions: tuple[Decision, ...] = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        """The `tools run` output of SPEC 7, in zigclaw's key order."""
        return {
            "request_id": self.request_id,
            "ok": self.ok,
            "data": self.data,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


class Runner:
    """Runs tools under one config; safe to share between threads."""

    def __init__(
        self, loaded: LoadedConfig, *, guard_blocking_calls: bool | None = None, audit: bool = True
    ) -> None:
        self.loaded = loaded
        config = loaded.config
        self.guard_blocking_calls = (
            config.security.guard_blocking_calls if guard_blocking_calls is None else guard_blocking_calls
        )
        self.plugin_dir = loaded.resolve(config.tools.plugin_dir) if config.tools.plugin_dir else BUILTIN_DIR
        self.external_dir = loaded.resolve(config.tools.external_dir)
        self.global_dir = global_tools_dir()
        self.workspace = loaded.resolve(config.security.workspace_root)
        self.registry = load_registry()
        self._builtin_names = frozenset(self.registry)
        # Decided once per Runner (the config cannot change under it); bounded, since
        # API callers can ask for any name.
        self._presets: dict[str | None, ActivePreset] = {}
        self._allowed: dict[tuple[str, str, bool], tuple[Decision, ...]] = {}
        self._mount_plans: dict[str, tuple[tuple[tuple[int, int], ...], list[Mount]]] = {}
        self.approvals = ApprovalMemory()
        # Opened now: an audit trail that cannot be written stops the Runner before any call.
        self.audit: AuditLog | None = AuditLog(self.audit_path) if audit and config.audit.enabled else None

    @classmethod
    def from_config(
        cls, path: str | Path | None = None, *, guard_blocking_calls: bool | None = None, audit: bool = True
    ) -> Runner:
        """A runner for `path`, else ./zigclaw.toml, else the built-in defaults.

        `guard_blocking_calls` overrides `[security] guard_blocking_calls`. `audit=False`
        leaves the audit log closed (for a Runner that only lists and explains).
        """
        return cls(load_config(path), guard_blocking_calls=guard_blocking_calls, audit=audit)

    @property
    def audit_path(self) -> Path:
        """Where `[audit]` says the trail goes (relative to the config file's folder)."""
        return self.loaded.resolve(self.loaded.config.audit.path)

    # --- policy -------------------------------------------------------------------------

    def active_preset(self, name: str | None = None) -> ActivePreset:
        if name is not None and not isinstance(name, str):
            raise ToolNotAllowed(f"a preset name is a string, not {type(name).__name__}")
        known = self._presets.get(name)
        if known is not None:
            return known
        chosen = name if name is not None else self.loaded.config.capabilities.active_preset
        active = ActivePreset(chosen, self.loaded.config.capabilities.presets.get(chosen))
        if active.preset is not None or name is None:
            self._presets[name] = active
        return active

    def policy_hash(self, preset: str | None = None) -> str:
        return policy.policy_hash(self.loaded.config.security.workspace_root, self.active_preset(preset))

    @property
    def layers(self) -> tuple[Layer, Layer, Layer]:
        """Where tools load from, first to last; a later layer shadows an earlier one."""
        return (
            Layer(ORIGIN_BUILTIN, self.plugin_dir),
            Layer(ORIGIN_GLOBAL, self.global_dir),
            Layer(ORIGIN_EXTERNAL, self.external_dir),
        )

    def locate(self, tool: str) -> Layer:
        """The layer a plain tool name loads from (see `registry.locate`)."""
        if not policy.check_tool_name(tool).allowed:
            return self.layers[-1]  # never looked up on disk; the name check denies it first
        shadow = self.loaded.config.tools.allow_shadow_builtin
        return locate(tool, self.layers, self._builtin_names, shadow)

    def is_builtin(self, tool: str) -> bool:
        return self.locate(tool).origin == ORIGIN_BUILTIN

    def static_decisions(
        self, tool: str, active: ActivePreset, *, builtin: bool | None = None
    ) -> list[Decision]:
        """Steps 1-3 of SPEC 4, stopping at the first denial.

        `builtin` is where the caller already located the tool (one lookup per call, so the
        filter and the loader cannot disagree); None looks it up. Allowed outcomes are
        remembered: they depend only on the config and where the tool was found.
        """
        if builtin is None:
            builtin = self.is_builtin(tool)
        key = (tool, active.name, builtin)
        allowed = self._allowed.get(key)
        if allowed is not None:
            return list(allowed)
        decisions = self._static_decisions(tool, active, builtin)
        if all(d.allowed for d in decisions):
            if len(self._allowed) >= MAX_REMEMBERED_CALLS:
                self._allowed.clear()
            self._allowed[key] = tuple(decisions)
        return decisions

    def _static_decisions(self, tool: str, active: ActivePreset, builtin: bool) -> list[Decision]:
        decisions = [policy.check_tool_name(tool)]
        if decisions[-1].allowed:
            decisions.append(policy.preset_gate(active, tool))
        if decisions[-1].allowed:
            filters = self.loaded.config.tools.filter
            decisions.append(
                policy.external_filter(
                    tool,
                    builtin=builtin,
                    allow_external=filters.allow_external,
                    allow_list=filters.external_allow_list,
                )
            )
        return decisions

    def explain_tool(self, tool: str, preset: str | None = None) -> dict[str, Any]:
        """zigclaw's `policy explain --tool` JSON: the first denial, else the preset's allowance."""
        active = self.active_preset(preset)
        decisions = self.static_decisions(tool, active)
        if all(d.allowed for d in decisions):
            decisions.append(self._manifest_decision(tool, active))
        denied = next((d for d in decisions if not d.allowed), None)
        shown = denied or next(d for d in decisions if d.category == "tool.allow")
        return {
            "tool": tool,
            "allowed": denied is None,
            "reason": shown.reason,
            "policy_hash": policy.policy_hash(self.loaded.config.security.workspace_root, active),
        }

    def _manifest_decision(self, tool: str, active: ActivePreset) -> Decision:
        """Whether the tool's manifest loads and its network needs fit the preset (for explain)."""
        try:
            manifest = load_manifest(self.folder_for(tool), tool)
        except ZigclawError as exc:
            return Decision("tool.manifest", False, f"denied: {exc.name}: {exc.message}")
        return policy.network_gate(active, manifest.requires_network)

    def explain_mount(self, path: str, preset: str | None = None) -> dict[str, Any]:
        """zigclaw's `policy explain --mount` JSON."""
        if not isinstance(path, str):
            raise TypeError(f"a mount path is a string, not {type(path).__name__}")
        active = self.active_preset(preset)
        decisions = self.write_path_decisions(active, require_existing=False)
        refused = {raw: d.reason for raw, _real, d in decisions if not d.allowed}
        return policy.explain_mount(self.loaded.config.security.workspace_root, active, path, refused)

    # --- tools --------------------------------------------------------------------------

    def tools(self) -> list[ToolEntry]:
        """Every tool that wins its name across the layers, valid or not, with what it shadows."""
        shadow = self.loaded.config.tools.allow_shadow_builtin
        return discover_layers(self.layers, set(self.registry), shadow)

    def folder_for(self, tool: str) -> Path:
        return self.locate(tool).folder

    def describe(self, tool: str) -> dict[str, Any]:
        """The tool's manifest as JSON (zigclaw key order)."""
        _raise_if_denied(policy.check_tool_name(tool), tool)
        return load_manifest(self.folder_for(tool), tool).describe()

    def validate_config(self) -> list[Warning_]:
        """Every `config validate` warning: SPEC 3's, then what would fail or surprise at run time."""
        entries = self.tools()
        network = {name for name, entry in self.registry.items() if entry.requires_network}
        network |= {e.name for e in entries if e.manifest is not None and e.manifest.requires_network}
        warnings = validation_warnings(self.loaded, self.registry, network)
        config = self.loaded.config
        if not _is_dir(self.workspace):
            warnings.append(
                Warning_("security.workspace_root", f"'{self.workspace}' is not an existing folder")
            )
        if config.tools.filter.external_allow_list and not config.tools.filter.allow_external:
            warnings.append(
                Warning_(
                    "tools.filter.external_allow_list",
                    "has no effect while tools.filter.allow_external = false",
                )
            )
        known = set(self.registry) | {entry.name for entry in entries}
        for name in sorted(config.capabilities.presets):
            active = self.active_preset(name)
            for tool in active.tools:
                if tool not in known:
                    warnings.append(
                        Warning_(f"capabilities.presets.{name}.tools", f"'{tool}' is not a known tool")
                    )
            for _raw, _real, decision in self.write_path_decisions(active):
                if not decision.allowed:
                    warnings.append(
                        Warning_(f"capabilities.presets.{name}.allow_write_paths", decision.reason)
                    )
        warnings.extend(self._agent_warnings(known))
        return warnings

    def _agent_warnings(self, known: set[str]) -> list[Warning_]:
        """`[approval]` entries for unknown tools; raw arguments logged where tools can read them."""
        config = self.loaded.config
        warnings = [
            Warning_(f"approval.tools.{tool}", f"'{tool}' is not a known tool")
            for tool in sorted(config.approval.tools)
            if tool not in known
        ]
        audit = config.audit
        if audit.enabled and audit.include_args:
            log = os.path.realpath(self.audit_path)
            workspace = os.path.realpath(self.workspace)
            if log == workspace or log.startswith(workspace.rstrip("/") + "/"):
                warnings.append(
                    Warning_(
                        "audit.path",
                        "the audit log is inside the workspace, where every tool can read the "
                        "arguments include_args logs; move it out of the workspace",
                    )
                )
        return warnings

    # --- one call -------------------------------------------------------------------------

    def run(
        self,
        tool: str,
        args: Any,
        *,
        preset: str | None = None,
        cancel: CancelToken | None = None,
        approve: Approver | None = None,
    ) -> RunResult:
        """Decide, run and decode one call; raise the named error of the first step that fails.

        `args` is the argument object (a dict) or its JSON text. Safe from any thread:
        a caller with a small stack has the whole call done on a worker with a large one
        (JSON parsing and wasm both recurse on the native stack). `cancel`, set from any
        thread, stops the call (ToolCancelled). `approve` answers for tools whose approval
        mode is "ask"; without it they are refused (ApprovalRequired).
        """
        if not has_room_for_wasm():
            from .sandbox.wasi import runtime

            return runtime().workers.call(
                lambda: self._audited_run(tool, args, preset, cancel, approve), timeout=None
            )
        return self._audited_run(tool, args, preset, cancel, approve)

    def pending_approval(self, tool: str, args: Any, *, preset: str | None = None) -> ApprovalRequest | None:
        """The approval a call would have to ask for, or None when it needs none.

        Raises the named error when the call would be refused before that point.
        Nothing is run and nothing is logged: the call itself is made with `run`.
        """
        active = self.active_preset(preset)
        record = CallRecord(new_request_id(), str(tool), active.name, "")
        manifest, module, parsed = self._prepare(tool, args, active, record)
        mode = self.approval_mode(tool)
        if mode == BLOCKED:
            raise ToolBlocked(f"tool '{tool}' is blocked by [approval]")
        if mode != ASK:
            return None
        request = self._approval_request(tool, manifest, module, parsed, active)
        return None if self.approvals.knows(request) else request

    def approval_mode(self, tool: str, *, builtin: bool | None = None) -> str:
        """`ask`, `preApproved` or `blocked`, from `[approval]`; `builtin` as located by the caller."""
        approval = self.loaded.config.approval
        if builtin is None:
            builtin = self.is_builtin(tool)
        return mode_for(approval.default, approval.tools, tool, builtin=builtin)

    def _audited_run(
        self, tool: Any, args: Any, preset: Any, cancel: CancelToken | None, approve: Approver | None
    ) -> RunResult:
        started = time.monotonic()
        active = self.active_preset(preset)
        record = CallRecord(
            request_id=new_request_id(),
            tool=tool if isinstance(tool, str) else repr(tool)[:80],
            preset=active.name,
            policy_hash=policy.policy_hash(self.loaded.config.security.workspace_root, active)
            if self.audit is not None
            else "",
            args=args,
        )
        try:
            result = self._run(tool, args, active, record, cancel, approve)
        except ZigclawError as exc:
            self._log_end(record, started, error=exc)
            raise
        except Exception as exc:
            from .errors import InternalError

            self._log_end(record, started, error=InternalError(f"{type(exc).__name__}: {exc}"))
            raise
        self._log_end(
            record,
            started,
            tool_ok=result.ok,
            fuel_used=result.fuel_used,
            peak_memory_bytes=result.peak_memory_bytes,
            output_bytes=result.output_bytes,
        )
        return result

    def _log_end(self, record: CallRecord, started: float, **outcome: Any) -> None:
        if self.audit is None:
            return
        lines = record.pending_decisions()
        lines.append(record.end_line(duration_ms=(time.monotonic() - started) * 1000, **outcome))
        self.audit.append(lines)

    def _prepare(
        self, tool: Any, args: Any, active: ActivePreset, record: CallRecord
    ) -> tuple[Manifest, ModuleFile, dict[str, Any]]:
        """Steps 1-7 of SPEC 4: every decision before approval; raises at the first denial."""
        if not isinstance(tool, str):
            raise InvalidToolName(f"a tool name is a string, not {type(tool).__name__}")
        layer = self.locate(tool)
        builtin = layer.origin == ORIGIN_BUILTIN
        decisions = record.decisions
        decisions.extend(self.static_decisions(tool, active, builtin=builtin))
        for decision in decisions:
            _raise_if_denied(decision, tool)
        record.origin = layer.origin
        manifest = load_manifest(layer.folder, tool)
        record.limits = {
            "max_runtime_ms": manifest.max_runtime_ms,
            "max_fuel": manifest.fuel,
            "max_memory_bytes": manifest.max_memory_bytes,
            "max_stdout_bytes": manifest.max_stdout_bytes,
            "max_stderr_bytes": manifest.max_stderr_bytes,
        }
        self._check_registry(tool, manifest, builtin)
        module = read_module(os.path.join(layer.folder, manifest.module_file))
        digest = module.sha256
        record.module_sha256 = digest
        for decision in (
            policy.integrity_check(manifest.sha256, digest),
            policy.network_gate(active, manifest.requires_network),
        ):
            decisions.append(decision)
            _raise_if_denied(decision, tool)
        if isinstance(args, str):
            args = parse_args(args)
            record.args = args
        validate_args(manifest.args_validator, args, tool)
        return manifest, module, args

    def _approval_request(
        self, tool: str, manifest: Manifest, module: ModuleFile, args: dict[str, Any], active: ActivePreset
    ) -> ApprovalRequest:
        return ApprovalRequest(
            tool=tool,
            key=approval_key(manifest.approval_key, args),
            policy_hash=policy.policy_hash(self.loaded.config.security.workspace_root, active),
            module_sha256=module.sha256,
        )

    def _approve(
        self,
        tool: str,
        manifest: Manifest,
        module: ModuleFile,
        args: dict[str, Any],
        active: ActivePreset,
        record: CallRecord,
        approve: Approver | None,
    ) -> None:
        """Step 8: the approval policy; raises ToolBlocked, ApprovalRequired or ApprovalDenied."""
        decision, refusal = decide_approval(
            tool,
            self.approval_mode(tool, builtin=record.origin == ORIGIN_BUILTIN),
            lambda: self._approval_request(tool, manifest, module, args, active),
            self.approvals,
            approve,
        )
        record.decisions.append(decision)
        if refusal is not None:
            raise refusal

    def _run(
        self,
        tool: Any,
        args: Any,
        active: ActivePreset,
        record: CallRecord,
        cancel: CancelToken | None,
        approve: Approver | None,
    ) -> RunResult:
        manifest, module, args = self._prepare(tool, args, active, record)
        digest = module.sha256
        decisions = record.decisions
        self._approve(tool, manifest, module, args, active, record, approve)
        if manifest.native:
            return self._run_native(
                tool, manifest, Path(module.path), module.data, args, active, decisions, record.request_id
            )
        request_id = record.request_id
        mounts = self._mounts(active)
        try:
            stdin = encode_request(
                request_id=request_id,
                tool=tool,
                args=args,
                cwd=policy.WORKSPACE_GUEST,
                mounts=mounts,
            )
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidToolArgs(f"args cannot be encoded as JSON: {type(exc).__name__}") from None
        from .sandbox.wasi import runtime

        plan = RunPlan(
            tool=tool,
            module_path=module.path,
            module_bytes=module.data,
            module_sha256=digest,
            mounts=tuple(mounts),
            limits=Limits(
                max_runtime_ms=manifest.max_runtime_ms,
                max_fuel=manifest.fuel,
                max_memory_bytes=manifest.max_memory_bytes,
                max_stdout_bytes=manifest.max_stdout_bytes,
                max_stderr_bytes=manifest.max_stderr_bytes,
            ),
            stdin=stdin,
            guard_blocking_calls=self.guard_blocking_calls,
            cancel=cancel,
        )
        if cancel is not None and cancel.cancelled:
            raise ToolCancelled("call cancelled before the tool started")
        if self.audit is not None:
            lines = record.pending_decisions()
            lines.append(record.started_line(self.loaded.config.audit.include_args))
            self.audit.append(lines)  # fails closed: nothing runs unless its start is on record
        outcome = runtime().run(plan)
        return _result(tool, manifest, request_id, outcome, tuple(decisions))

    def _run_native(
        self,
        tool: str,
        manifest: Manifest,
        module_path: Path,
        module_data: bytes,
        args: Any,
        active: ActivePreset,
        decisions: list[Decision],
        request_id: str,
    ) -> RunResult:
        """SPEC 6, native half: a confined subprocess in the host workspace root."""
        from .sandbox import native
        from .sandbox.plan import Limits

        _check_executable(module_path)
        allow_network = manifest.requires_network and active.allow_network
        gaps = native.confinement_gaps(
            native.kernel_support(), allow_network=allow_network, root=os.geteuid() == 0
        )
        best_effort = False
        if gaps:
            if not self.loaded.config.tools.native.allow_unconfined:
                raise SandboxUnavailable(
                    f"native tool '{tool}' cannot be confined on this machine: it lacks " + "; ".join(gaps),
                    hint="enable Landlock and unprivileged user namespaces, or set "
                    "[tools.native] allow_unconfined = true to run with whatever confinement is available.",
                )
            native.warn_unconfined_once(gaps)
            best_effort = True
        decisions.append(
            Decision("tool.sandbox", True, "native, unconfined: lacks " + "; ".join(gaps))
            if gaps
            else Decision("tool.sandbox", True, "native, confined: namespaces, Landlock, seccomp, limits")
        )
        mounts = self._mounts(active)
        workspace = mounts[0].host_path
        try:
            stdin = encode_request(
                request_id=request_id,
                tool=tool,
                args=args,
                cwd=workspace,
                mounts=mounts,
            )
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidToolArgs(f"args cannot be encoded as JSON: {type(exc).__name__}") from None
        plan = native.NativePlan(
            tool=tool,
            module_path=module_path,
            module_bytes=module_data,
            mounts=tuple(mounts),
            limits=Limits(
                max_runtime_ms=manifest.max_runtime_ms,
                max_fuel=0,
                max_memory_bytes=manifest.max_memory_bytes,
                max_stdout_bytes=manifest.max_stdout_bytes,
                max_stderr_bytes=manifest.max_stderr_bytes,
            ),
            env=native.native_environment(manifest.env, os.environ),
            allow_network=allow_network,
            stdin=stdin,
        )
        outcome = native.run_native(plan, best_effort=best_effort)
        return _result(tool, manifest, request_id, outcome, tuple(decisions))

    def _check_registry(self, tool: str, manifest: Manifest, builtin: bool) -> None:
        if not builtin or not self.loaded.config.tools.registry.strict:
            return
        entry = self.registry.get(tool)
        if entry is None:
            raise ToolNotInRegistry(f"built-in tool '{tool}' is not in the compiled registry")
        if manifest.abi != entry.abi:
            raise ToolAbiMismatch(f"args schema of '{tool}' does not match the registry fingerprint")

    @functools.cached_property
    def _protected(self) -> list[tuple[str, str]]:
        """`_protected_paths`, worked out once per Runner (each is several system calls)."""
        return self._protected_paths()

    def _protected_paths(self) -> list[tuple[str, str]]:
        """Real paths no write mount may contain: a tool could rewrite its own policy or code,
        plant compiled code in the module cache, or plant code a shell runs (the home folder)."""
        import sys

        from .sandbox.cache import default_cache_dir

        places: list[tuple[str, Path | None]] = [
            ("the config file", self.loaded.source),
            ("the external tools folder", self.external_dir),
            ("the global tools folder", self.global_dir),
            ("the built-in tools folder", self.plugin_dir),
            ("the module cache", default_cache_dir()),
            ("the zigclaw package", Path(__file__).parent),
            ("the Python installation", Path(sys.prefix)),
            ("the home folder", Path.home()),
        ]
        if self.loaded.config.audit.enabled:
            places.append(("the audit log", self.audit_path))
        places += [("a system folder", Path(p)) for p in SYSTEM_FOLDERS]
        return [(label, os.path.realpath(path)) for label, path in places if path is not None]

    def write_path_decisions(
        self, active: ActivePreset, *, require_existing: bool = True
    ) -> list[tuple[str, str, Decision]]:
        """Each of the preset's write paths, its real path, and the decision on mounting it.

        `policy explain` passes require_existing=False: a folder made later is fine.
        """
        if not active.write_paths:
            return []
        paths = [self.loaded.resolve(raw) for raw in active.write_paths]
        reals = [os.path.realpath(path) for path in paths]
        workspace = (os.path.normpath(self.workspace), os.path.realpath(self.workspace))
        taken: set[str] = set()
        out: list[tuple[str, str, Decision]] = []
        for raw, path, real in zip(active.write_paths, paths, reals, strict=True):
            literal = os.path.normpath(path)
            decision = policy.check_write_path(
                raw,
                literal,
                real,
                exists=_is_dir(path) or not require_existing,
                taken=taken,
                protected=self._protected,
                workspace=workspace,
                siblings=reals,
            )
            if decision.allowed:
                taken.add(policy.write_mount_name(literal))
            out.append((raw, real, decision))
        return out

    def _mounts(self, active: ActivePreset) -> list[Mount]:
        """The workspace and the preset's write paths, checked, with the identity each had then.

        The checks resolve every path (several system calls each); their result is
        reused while each configured path still names the same folder (one stat
        each). The sandbox compares each folder's identity again when it maps it.
        """
        paths = [self.workspace, *(self.loaded.resolve(raw) for raw in active.write_paths)]
        try:
            seen = tuple(_stat_identity(path) for path in paths)
        except OSError:
            seen = None
        known = self._mount_plans.get(active.name)
        if seen is not None and known is not None and known[0] == seen:
            return known[1]
        mounts = self._check_mounts(active)
        if seen is not None and len(self._mount_plans) < MAX_REMEMBERED_CALLS:
            self._mount_plans[active.name] = (seen, mounts)
        return mounts

    def _check_mounts(self, active: ActivePreset) -> list[Mount]:
        if not _is_dir(self.workspace):
            raise InvalidConfig(
                f"security.workspace_root {self.workspace} is not an existing folder",
                hint="create the folder or fix security.workspace_root in zigclaw.toml.",
            )
        writes: list[tuple[str, tuple[int, int]]] = []
        for _raw, real, decision in self.write_path_decisions(active):
            if not decision.allowed:
                raise InvalidConfig(
                    f"preset '{active.name}': {decision.reason}",
                    hint="fix allow_write_paths; `zigclaw config validate` lists every problem.",
                )
            writes.append((real, _identity(real)))
        real_workspace = os.path.realpath(self.workspace)
        return policy.plan_mounts((real_workspace, _identity(real_workspace)), writes)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a name too long, say
        return False


def _stat_identity(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return (info.st_dev, info.st_ino)


def _check_executable(path: Path) -> None:
    """A native tool's file must carry an execute bit, as exec would require of it."""
    try:
        mode = os.stat(path, follow_symlinks=False).st_mode
    except OSError as exc:
        raise InvalidModule(f"module {path} cannot be read: {exc.strerror}") from None
    if not mode & 0o111:
        raise InvalidModule(
            f"native tool {path} is not executable", hint=f"run `chmod +x {path}` if you trust it."
        )


def _identity(real: str) -> tuple[int, int]:
    try:
        info = os.stat(real)
    except (OSError, ValueError) as exc:
        raise InvalidConfig(f"{real} cannot be used as a mount: {exc}") from None
    return (info.st_dev, info.st_ino)


def _raise_if_denied(decision: Decision, tool: str) -> None:
    if decision.allowed:
        return
    category = decision.category
    if category == "tool.name":
        raise InvalidToolName(decision.reason)
    if category == "tool.allow":
        raise ToolNotAllowed(
            f"tool '{tool}' {decision.reason}",
            hint=f"tool denied by policy; run `zigclaw policy explain --tool {tool}`.",
        )
    if category == "tool.external_filter":
        raise ExternalToolDenied(f"tool '{tool}' {decision.reason}")
    if category == "tool.integrity":
        raise ToolIntegrityMismatch(decision.reason)
    if category == "tool.network":
        raise ToolNetworkNotAllowed(f"tool '{tool}' requires network; {decision.reason}")
    raise ZigclawError(decision.reason)


def _result(
    tool: str, manifest: Manifest, request_id: str, outcome: Any, decisions: tuple[Decision, ...]
) -> RunResult:
    try:
        response = decode_response(outcome.stdout, request_id)
    except MalformedResponse as exc:
        if outcome.exit_code != 0:
            excerpt = outcome.stderr[-STDERR_EXCERPT_BYTES:].decode("utf-8", "replace").strip()
            raise ToolFailed(
                f"tool exited with code {outcome.exit_code} without a valid response"
                + (f"; stderr: {excerpt}" if excerpt else ""),
                exit_code=outcome.exit_code,
            ) from None
        raise exc from None
    data = response.data
    if response.ok and manifest.output_validator is not None:
        problem = manifest.output_validator.first_error(data)
        if problem is not None:
            raise MalformedResponse(f"data does not match the tool's [output] schema: {problem}")
    return RunResult(
        request_id=request_id,
        ok=response.ok,
        data=data,
        stdout=response.stdout,
        stderr=response.stderr,
        tool=tool,
        duration_ms=outcome.duration_ms,
        fuel_used=outcome.fuel_used,
        peak_memory_bytes=outcome.peak_memory_bytes,
        output_bytes=len(outcome.stdout) + len(outcome.stderr),
        decisions=decisions,
    )
