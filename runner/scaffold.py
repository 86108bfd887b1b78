"""`zigclaw tools new`: a working tool folder to start from, in Zig or C.

The folder holds the manifest (with an example that `tools validate` runs), the
source speaking protocol v0, a copy of the small protocol library for that
language, and `build.sh`, the build recipe (Zig from the `ziglang` package on
PyPI). When `ziglang` is installed the module is built right away.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import InvalidToolName, SandboxUnavailable, ToolExists
from .policy import check_tool_name

LANGUAGES = ("zig", "c")
PLACEHOLDER = "{{name}}"
BUILD_SCRIPT = "build.sh"
BUILD_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class Scaffold:
    """The folder that was made, its files, and whether the module was built."""

    folder: Path
    files: tuple[str, ...]
    built: bool
    build_note: str


def new_tool(name: str, lang: str, parent: Path, *, build: bool = True) -> Scaffold:
    """Write `<parent>/<name>/` from the `lang` template and build it when Zig is available."""
    decision = check_tool_name(name)
    if not decision.allowed:
        raise InvalidToolName(decision.reason)
    if lang not in LANGUAGES:
        raise InvalidToolName(f"unknown language '{lang}' (choose {' or '.join(LANGUAGES)})")
    folder = parent / name
    if os.path.lexists(folder):
        raise ToolExists(f"{folder} already exists", hint="pick another name or --dir.")
    templates = resources.files("runner") / "templates"
    files: dict[str, str] = {f"{name}.toml": (templates / "manifest.toml").read_text(encoding="utf-8")}
    for entry in (templates / lang).iterdir():
        files[entry.name] = entry.read_text(encoding="utf-8")
    if lang == "zig":  # the built-in tools' own protocol library, copied there by the build
        files["protocol.zig"] = (resources.files("runner") / "_builtin" / "protocol.zig").read_text(
            encoding="utf-8"
        )
    try:
        folder.mkdir(parents=True)
        for file_name, text in sorted(files.items()):
            path = folder / file_name
            path.write_text(text.replace(PLACEHOLDER, name), encoding="utf-8")
            if file_name == BUILD_SCRIPT:
                path.chmod(0o755)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot write {folder}: {exc.strerror or exc}") from None
    built, note = build_tool(folder) if build else (False, "not built (--no-build)")
    return Scaffold(folder, tuple(sorted(files)), built, note)


def build_tool(folder: Path) -> tuple[bool, str]:
    """Run the folder's build.sh with this Python; (built, what happened)."""
    import importlib.util

    if importlib.util.find_spec("ziglang") is None:
        return False, "not built: Zig is missing; `pip install ziglang`, then run ./build.sh"
    proc = subprocess.run(
        ["sh", str(folder / BUILD_SCRIPT)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        return False, "build.sh failed: " + " / ".join(tail)
    return True, "built with build.sh"
