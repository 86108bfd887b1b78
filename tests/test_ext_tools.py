"""ext-tools/wc, the example third-party tool in C: built from source with zig cc, validated, run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import runner

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import build_ext_tools  # noqa: E402


@pytest.fixture(scope="module")
def wc_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ext-tools/ with wc.wasm freshly built from wc.c (never a stale committed binary)."""
    folder = tmp_path_factory.mktemp("ext") / "ext-tools"
    folder.mkdir()
    for name in ("wc.c", "wc.toml"):
        shutil.copyfile(REPO / "ext-tools" / name, folder / name)
    assert build_ext_tools.build(folder) == [folder / "wc.wasm"]
    return folder


def test_wc_passes_validate_with_its_examples(wc_folder: Path) -> None:
    from runner.toolcheck import validate

    report = validate(wc_folder, "wc")
    assert report.ok, [c.to_json() for c in report.checks]
    assert [c.name for c in report.checks] == ["manifest", "module", "sha256", "example 1", "example 2"]


def test_wc_counts_a_file_under_the_workspace(wc_folder: Path, toolbox) -> None:
    for name in ("wc.toml", "wc.wasm"):
        shutil.copyfile(wc_folder / name, toolbox.external / name)
    text = "one two\nthree  four five\n\nsix"  # 3 newlines, 6 words, 29 bytes, like coreutils wc
    (toolbox.workspace / "notes.txt").write_text(text)
    toolbox.write_config(["wc"])
    result = toolbox.runner().run("wc", {"path": "notes.txt"})
    assert result.ok and result.data == {"lines": 3, "words": 6, "bytes": 29}
    assert toolbox.runner().run("wc", {"path": "/workspace/notes.txt"}).data["words"] == 6
    missing = toolbox.runner().run("wc", {"path": "nope.txt"})
    assert not missing.ok and "cannot open nope.txt" in missing.data["error"]
    outside = toolbox.runner().run("wc", {"path": "/etc/passwd"})
    assert not outside.ok  # nothing outside the mounts is visible
    with pytest.raises(runner.InvalidToolArgs):
        toolbox.runner().run("wc", {"path": "a", "text": "b"})  # oneOf: exactly one


def test_the_source_tree_wc_is_built_by_the_install(tmp_path: Path) -> None:
    built = REPO / "ext-tools" / "wc.wasm"
    if not built.exists():
        pytest.skip("ext-tools/wc.wasm is built by `pip install -e .` or `just build-plugins`; not here")
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "tools", "validate", str(REPO / "ext-tools" / "wc.toml")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
