"""Build the built-in tools from `plugins/` into a data folder the runner loads.

For every `plugins/<tool>/main.zig` with a `manifests/<tool>.toml`, this writes
`<out>/<tool>.wasm` (or, for a `native = true` manifest, a static host executable
`<out>/<tool>`) and `<out>/<tool>.toml`, then `<out>/registry.json` listing each
tool's name, ABI fingerprint, `requires_network` and `native`. On Linux it also
builds `<out>/zigclaw-confine`, the helper that confines native tools.
Standard library only: it runs before the package is installed (hatch hook, Justfile).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
MANIFESTS = ROOT / "manifests"
SDK = PLUGINS / "sdk" / "protocol.zig"
# The exec helper that confines native tools (C: raw Linux syscalls, no Zig std API churn).
CONFINE_SOURCE = PLUGINS / "confine" / "confine.c"
CONFINE_NAME = "zigclaw-confine"
DEFAULT_OUT = ROOT / "runner" / "_builtin"


class BuildError(Exception):
    """A tool could not be built; the message is one line for the user."""


def _abi_fingerprint() -> Callable[[Any], str]:
    # The package is not importable at build time, but runner/abi.py is standard library only.
    spec = importlib.util.spec_from_file_location("_zigclaw_build_abi", ROOT / "runner" / "abi.py")
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot load {ROOT / 'runner' / 'abi.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.abi_fingerprint  # type: ignore[no-any-return]


def _tools() -> list[str]:
    return sorted(
        d.name
        for d in PLUGINS.iterdir()
        if (d / "main.zig").is_file() and (MANIFESTS / f"{d.name}.toml").is_file()
    )


def _zig_env() -> dict[str, str]:
    env = dict(os.environ)
    cache = ROOT / "build" / "zig-cache"
    for name, default in (
        ("ZIG_GLOBAL_CACHE_DIR", cache / "global"),
        ("ZIG_LOCAL_CACHE_DIR", cache / "local"),
    ):
        # zig runs in a scratch folder, so a relative setting is anchored here first.
        env[name] = str(Path(env[name]).resolve() if env.get(name) else default)
    return env


def _native_target() -> str:
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{arch}-linux-musl"


def _compile(zig: list[str], tool: str, target_triple: str, dest: Path, workdir: Path) -> None:
    # Each tool is a module rooted in its own folder, so the shared SDK is passed
    # as a named module ("protocol"): Zig refuses imports outside a module's folder.
    target = ["-target", target_triple, "-O", "ReleaseSmall"]
    cmd = [
        *zig, "build-exe", "-lc",
        "--dep", "protocol", *target, f"-Mmain={PLUGINS / tool / 'main.zig'}",
        *target, f"-Mprotocol={SDK}",
        f"-femit-bin={dest}",
    ]  # fmt: skip
    # A scratch cwd keeps any by-products (object files) out of the repo and out_dir.
    proc = subprocess.run(cmd, cwd=workdir, env=_zig_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise BuildError(f"zig failed to build plugins/{tool}/main.zig (exit {proc.returncode})")


def _compile_confine(zig: list[str], dest: Path, workdir: Path) -> None:
    cmd = [
        *zig,
        "cc",
        "-target",
        _native_target(),
        "-Os",
        "-s",
        "-static",
        "-o",
        str(dest),
        str(CONFINE_SOURCE),
    ]
    proc = subprocess.run(cmd, cwd=workdir, env=_zig_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise BuildError(
            f"zig cc failed to build {CONFINE_SOURCE.relative_to(ROOT)} (exit {proc.returncode})"
        )


def build(out_dir: Path, zig: list[str] | None = None) -> None:
    """Compile every built-in tool into `out_dir` with its manifest and the registry."""
    zig = zig or [sys.executable, "-m", "ziglang"]
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    abi_fingerprint = _abi_fingerprint()
    registry = []
    with tempfile.TemporaryDirectory(prefix="zigclaw-build-") as scratch:
        for tool in _tools():
            manifest_path = MANIFESTS / f"{tool}.toml"
            try:
                manifest = tomllib.loads(manifest_path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise BuildError(f"{manifest_path}: {exc}") from None
            native = bool(manifest.get("native", False))
            module = tool if native else f"{tool}.wasm"
            built = Path(scratch) / module
            _compile(zig, tool, _native_target() if native else "wasm32-wasi", built, Path(scratch))
            shutil.copyfile(built, out_dir / module)
            if native:
                (out_dir / module).chmod(0o755)
            shutil.copyfile(manifest_path, out_dir / f"{tool}.toml")
            registry.append(
                {
                    "name": tool,
                    "abi": abi_fingerprint(manifest.get("args", {})),
                    "requires_network": bool(manifest.get("requires_network", False)),
                    "native": native,
                }
            )
        if sys.platform.startswith("linux"):
            built = Path(scratch) / CONFINE_NAME
            _compile_confine(zig, built, Path(scratch))
            shutil.copyfile(built, out_dir / CONFINE_NAME)
            (out_dir / CONFINE_NAME).chmod(0o755)
    text = json.dumps({"tools": sorted(registry, key=lambda t: t["name"])}, indent=2) + "\n"
    (out_dir / "registry.json").write_text(text, encoding="utf-8")
    # `zigclaw tools new --lang zig` gives new tools this same protocol library.
    shutil.copyfile(SDK, out_dir / "protocol.zig")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output folder (default: runner/_builtin)"
    )
    args = parser.parse_args(argv)
    try:
        build(args.out)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"error: cannot run zig: {exc}", file=sys.stderr)
        return 1
    print(f"built plugins into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
