"""Hatchling build hook: compile the built-in tools into `runner/_builtin` for every wheel.

The wheel (and the editable install, which imports `runner` from this tree) ships
the modules built from `plugins/` sources, never hand-copied binaries (SPEC 1).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class BuildPluginsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Runs `scripts/build_plugins.py` before the wheel is assembled."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return  # an sdist carries the sources; the wheel built from it compiles them
        root = Path(self.root)
        script = root / "scripts" / "build_plugins.py"
        spec = importlib.util.spec_from_file_location("_zigclaw_build_plugins", script)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot load {script}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.build(root / "runner" / "_builtin")
        except module.BuildError as exc:
            raise RuntimeError(f"building the built-in tools failed: {exc}") from None
        _build_ext_tools(root)
        # runner/_builtin/ is git-ignored; artifacts put ignored files back into the wheel.
        build_data["artifacts"].append("runner/_builtin/*")
        if sys.platform.startswith("linux"):
            # The native tools and zigclaw-confine are machine code: the wheel is for this platform.
            # Any Python 3 runs it, so only the platform goes into the tag.
            import sysconfig

            platform_tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
            build_data["pure_python"] = False
            build_data["tag"] = f"py3-none-{platform_tag}"


def _build_ext_tools(root: Path) -> None:
    """Build the example C tools in ext-tools/ in place (a source checkout only; not in the wheel)."""
    script = root / "scripts" / "build_ext_tools.py"
    if not (root / "ext-tools").is_dir() or not script.is_file():
        return  # building from an sdist: there is no ext-tools folder to fill
    spec = importlib.util.spec_from_file_location("_zigclaw_build_ext_tools", script)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {script}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.build(root / "ext-tools")
    except module.BuildError as exc:
        raise RuntimeError(f"building the example tools in ext-tools/ failed: {exc}") from None
