"""Pure policy decisions (SPEC 4): typed inputs in, `Decision` values out, no I/O.

A reviewer can audit everything here without a runtime: the sandbox only ever
receives the mounts and limits that these functions decided.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .config import Preset
from .manifest import TOOL_NAME_PATTERN

_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
WORKSPACE_GUEST = "/workspace"
WRITE_GUEST_PREFIX = "/write"


@dataclass(frozen=True)
class Decision:
    """One recorded policy decision: its category, whether it allows, and why."""

    category: str
    allowed: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"category": self.category, "allowed": self.allowed, "reason": self.reason}


@dataclass(frozen=True)
class ActivePreset:
    """The preset a call runs under; `preset` is None when the name is not defined."""

    name: str
    preset: Preset | None

    @property
    def tools(self) -> Sequence[str]:
        return self.preset.tools if self.preset else ()

    @property
    def allow_network(self) -> bool:
        return bool(self.preset and self.preset.allow_network)

    @property
    def write_paths(self) -> Sequence[str]:
        return self.preset.allow_write_paths if self.preset else ()


@dataclass(frozen=True)
class Mount:
    """A host folder mapped into the guest; `identity` is the (st_dev, st_ino) that was checked."""

    host_path: str
    guest_path: str
    read_only: bool
    identity: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"host_path": self.host_path, "guest_path": self.guest_path, "read_only": self.read_only}


def check_tool_name(tool: str) -> Decision:
    """Step 1: a plain lowercase ASCII name; anything that could be a path is refused."""
    if not isinstance(tool, str):
        return Decision("tool.name", False, f"a tool name is a string, not {type(tool).__name__}")
    if _TOOL_NAME.fullmatch(tool):
        return Decision("tool.name", True, "plain tool name")
    shown = tool.encode("unicode_escape").decode("ascii")[:80]
    return Decision("tool.name", False, f"'{shown}' is not a plain tool name ({TOOL_NAME_PATTERN})")


def preset_gate(active: ActivePreset, tool: str) -> Decision:
    """Step 2: the active preset lists the tool."""
    if active.preset is None:
        return Decision("tool.allow", False, f"denied: preset '{active.name}' is not defined")
    if tool in active.tools:
        return Decision("tool.allow", True, f"allowed by preset '{active.name}'")
    return Decision("tool.allow", False, f"denied: tool not in preset '{active.name}'")


def external_filter(tool: str, *, builtin: bool, allow_external: bool, allow_list: Sequence[str]) -> Decision:
    """Step 3: external tools pass only if allowed and (no allow list or listed)."""
    category = "tool.external_filter"
    if builtin:
        return Decision(category, True, "built-in tool")
    if not allow_external:
        return Decision(category, False, "denied: tools.filter.allow_external is false")
    if allow_list and tool not in allow_list:
        return Decision(category, False, f"denied: '{tool}' is not in tools.filter.external_allow_list")
    return Decision(category, True, "allowed external tool")


def integrity_check(expected: str | None, actual: str) -> Decision:
    """Step 5: the module's SHA-256 equals the manifest's pin, when there is one."""
    if expected is None:
        return Decision("tool.integrity", True, "no sha256 pin")
    if expected == actual:
        return Decision("tool.integrity", True, "sha256 pin matches")
    return Decision("tool.integrity", False, f"module sha256 {actual} does not match the pin {expected}")


def network_gate(active: ActivePreset, requires_network: bool) -> Decision:
    """Step 6: a network tool needs a preset that allows the network."""
    if not requires_network:
        return Decision("tool.network", True, "tool does not use the network")
    if active.allow_network:
        return Decision("tool.network", True, f"network allowed by preset '{active.name}'")
    return Decision("tool.network", False, f"denied: preset '{active.name}' does not allow network")


def write_mount_name(path: str) -> str:
    """The `<name>` of `/write/<name>` for a write path: its last component."""
    return posixpath.basename(path.rstrip("/")) or path


def _contains(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def check_write_path(
    raw: str,
    literal: str,
    real: str,
    *,
    exists: bool,
    taken: Collection[str],
    protected: Sequence[tuple[str, str]],
    workspace: tuple[str, str] | None = None,
    siblings: Sequence[str] = (),
) -> Decision:
    """Whether one write path may be mounted read-write at /write/<name>.

    `literal` is the absolute path as written, `real` the same with symlinks
    resolved; they must agree, or something on the way could be swapped between
    runs. `protected` names real paths a tool must never be able to change (the
    config, the tool folders, the runner, the module cache). `workspace` is the
    workspace's (literal, real) path and `siblings` the real paths of the
    preset's other write paths: none may contain another, or one run could
    redirect the next run's mounts.
    """
    category = "tool.write_path"
    name = write_mount_name(literal)
    if not exists:
        return Decision(category, False, f"write path '{raw}' is not an existing folder")
    if posixpath.dirname(real) == real:
        return Decision(category, False, f"write path '{raw}' is the root of the file system")
    if real != literal:
        return Decision(category, False, f"write path '{raw}' goes through a symbolic link (to {real})")
    if name in ("", ".", "..", "/") or "/" in name:
        return Decision(category, False, f"write path '{raw}' has no usable name for /write/<name>")
    if name in taken:
        return Decision(category, False, f"write path '{raw}' would be mounted at /write/{name} twice")
    for label, path in protected:
        if _contains(real, path):
            return Decision(category, False, f"write path '{raw}' contains {label} ({path})")
    if workspace is not None and (_contains(literal, workspace[0]) or _contains(real, workspace[1])):
        return Decision(category, False, f"write path '{raw}' contains the workspace")
    for other in siblings:
        if other != real and (_contains(real, other) or _contains(other, real)):
            return Decision(category, False, f"write path '{raw}' overlaps another write path ({other})")
    return Decision(category, True, f"write path '{raw}' mounted at /write/{name}")


def plan_mounts(
    workspace: tuple[str, tuple[int, int]], writes: Sequence[tuple[str, tuple[int, int]]]
) -> list[Mount]:
    """The workspace read-only at /workspace, then each write path at /write/<its name>.

    Each entry is a real path and the identity it had when it was checked.
    """
    mounts = [Mount(workspace[0], WORKSPACE_GUEST, True, workspace[1])]
    for real, identity in writes:
        mounts.append(Mount(real, f"{WRITE_GUEST_PREFIX}/{write_mount_name(real)}", False, identity))
    return mounts


def policy_hash(workspace_root: str, active: ActivePreset) -> str:
    """zigclaw's policy hash: SHA-256 over the workspace root, preset, network flag, tools and write paths."""
    tools = "".join(f"{tool}," for tool in sorted(active.tools))
    paths = "".join(f"{path}," for path in sorted(active.write_paths))
    text = (
        f"workspace_root={workspace_root};preset={active.name};"
        f"allow_network={'true' if active.allow_network else 'false'};"
        f"tools={tools};write_paths={paths}"
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _clean(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/") if path not in ("/",) else path


def _escapes(path: str) -> bool:
    return path.startswith("/") or ".." in path.split("/")


def explain_mount(
    workspace_root: str, active: ActivePreset, path: str, refused: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Whether `path` is visible to a tool, where, and how: zigclaw's `policy explain --mount` JSON.

    `refused` maps write paths that `check_write_path` refused to the reason.
    """
    result: dict[str, Any] = {"mount": path}
    refused = refused or {}
    cleaned = _clean(path)
    if not cleaned:
        decision = Decision("tool.mount", False, "denied: empty mount path")
        return _mount_json(result, decision, workspace_root, active, None, None)
    for write_path in active.write_paths:
        root = _clean(write_path)
        if cleaned == root or cleaned.startswith(root + "/"):
            if write_path in refused:
                decision = Decision("tool.mount", False, f"denied: {refused[write_path]}")
                return _mount_json(result, decision, workspace_root, active, None, None)
            rest = cleaned[len(root) :]
            if ".." in rest.split("/"):
                continue
            guest = f"{WRITE_GUEST_PREFIX}/{write_mount_name(write_path)}{rest}"
            decision = Decision(
                "tool.mount", True, f"allowed writable by preset '{active.name}' path '{write_path}'"
            )
            return _mount_json(result, decision, workspace_root, active, guest, False)
    root = _clean(workspace_root)
    inside: str | None = None
    if root in ("", "."):
        inside = None if _escapes(cleaned) else cleaned
    elif cleaned == root or cleaned.startswith(root + "/"):
        rest = cleaned[len(root) :].lstrip("/")
        inside = None if ".." in rest.split("/") else rest
    if inside is not None:
        guest = WORKSPACE_GUEST + (f"/{inside}" if inside and inside != "." else "")
        decision = Decision("tool.mount", True, f"allowed read-only under workspace_root '{workspace_root}'")
        return _mount_json(result, decision, workspace_root, active, guest, True)
    decision = Decision(
        "tool.mount",
        False,
        f"denied: path is outside workspace_root '{workspace_root}' and preset writable paths",
    )
    return _mount_json(result, decision, workspace_root, active, None, None)


def _mount_json(
    result: dict[str, Any],
    decision: Decision,
    workspace_root: str,
    active: ActivePreset,
    guest: str | None,
    read_only: bool | None,
) -> dict[str, Any]:
    result["allowed"] = decision.allowed
    result["reason"] = decision.reason
    result["policy_hash"] = policy_hash(workspace_root, active)
    if guest is not None:
        result["guest_path"] = guest
        result["read_only"] = read_only
    return result
