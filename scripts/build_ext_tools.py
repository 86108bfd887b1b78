"""Build the example third-party tools in `ext-tools/` (C sources) to WASI modules beside them.

For every `ext-tools/<tool>.c` with an `ext-tools/<tool>.toml`, this writes
`ext-tools/<tool>.wasm` with `zig cc --target=wasm32-wasi` from the `ziglang`
package, including the C protocol header that `zigclaw tools new --lang c` ships
(`runner/templates/c/zigclaw_protocol.h`). Standard library only: it runs before
the package is installed (hatch hook, Justfile).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXT_TOOLS = ROOT / "ext-tools"
C_SDK = ROOT / "runner" / "templates" / "c"


class BuildError(Exception):
    """A tool could not be built; the message is one line for the user."""


def tools(folder: Path = EXT_TOOLS) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.c") if (folder / f"{p.stem}.toml").is_file())


def build(folder: Path = EXT_TOOLS, zig: list[str] | None = None) -> list[Path]:
    """Compile each C tool in `folder` to `<tool>.wasm`; returns the modules written."""
    zig = zig or [sys.executable, "-m", "ziglang"]
    env = dict(os.environ)
    env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(ROOT / "build" / "zig-cache" / "global"))
    env["ZIG_GLOBAL_CACHE_DIR"] = str(Path(env["ZIG_GLOBAL_CACHE_DIR"]).resolve())
    built = []
    with tempfile.TemporaryDirectory(prefix="zigclaw-ext-build-") as scratch:
        for tool in tools(folder):
            out = Path(scratch) / f"{tool}.wasm"
            source = folder / f"{tool}.c"
            cmd = [*zig, "cc", "--target=wasm32-wasi", "-Os", f"-I{C_SDK}", "-o", str(out), str(source)]
            proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr)
                raise BuildError(f"zig cc failed to build {folder / tool}.c (exit {proc.returncode})")
            dest = folder / f"{tool}.wasm"
            dest.write_bytes(out.read_bytes())
            built.append(dest)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=EXT_TOOLS, help="folder of C tools (default: ext-tools)")
    args = parser.parse_args(argv)
    try:
        built = build(args.dir)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"error: cannot run zig: {exc}", file=sys.stderr)
        return 1
    for path in built:
        print(f"built {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
