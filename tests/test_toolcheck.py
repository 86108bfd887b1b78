"""`tools validate` and `tools add` (runner/toolcheck.py, runner/install.py), in-process and via the CLI."""

from __future__ import annotations

import io
import json
import os
import tarfile
import textwrap
from pathlib import Path

import pytest
from conftest import zigclaw

import runner
from runner.install import add_tool, pin_manifest, unpack_archive
from runner.registry import builtin_names
from runner.toolcheck import FAIL, PASS, SKIP, find_manifest, validate

REPO = Path(__file__).resolve().parent.parent
ECHO_WASM = REPO / "runner" / "_builtin" / "echo.wasm"

MANIFEST = """
tool_name = "say"
version = "1.0.0"
description = "echo under another name"

[args]
type = "object"
required = ["text"]

[args.properties.text]
type = "string"

[[examples]]
args = {{ text = "hi" }}
data = {{ echo = "{expected}" }}
"""


def make_tool(folder: Path, *, expected: str = "hi", module: bytes | None = None, name: str = "say") -> Path:
    """A tool folder `<folder>/<name>/` with the built-in echo module and an example."""
    tool = folder / name
    tool.mkdir(parents=True)
    text = MANIFEST.format(expected=expected).replace('"say"', f'"{name}"')
    (tool / f"{name}.toml").write_text(textwrap.dedent(text))
    (tool / f"{name}.wasm").write_bytes(ECHO_WASM.read_bytes() if module is None else module)
    return tool


def statuses(report) -> dict[str, str]:
    return {check.name: check.status for check in report.checks}



def add(source: Path, dest: Path, force: bool = False):
    return add_tool(source, dest, force=force, builtin_names=builtin_names(), allow_shadow_builtin=False)


# --- validate ------------------------------------------------------------------------------------


def test_a_good_tool_passes_every_check_and_its_example_really_runs(tmp_path: Path) -> None:
    folder = make_tool(tmp_path)
    report = validate(*find_manifest(folder))
    assert report.ok
    assert statuses(report) == {"manifest": PASS, "module": PASS, "sha256": SKIP, "example 1": PASS}


def test_an_example_whose_expected_data_differs_fails_with_both_values(tmp_path: Path) -> None:
    report = validate(*find_manifest(make_tool(tmp_path, expected="something else")))
    assert not report.ok and statuses(report)["example 1"] == FAIL
    error = report.first_error
    assert isinstance(error, runner.ExampleFailed)
    assert '"something else"' in error.message and '"hi"' in error.message


def test_an_example_with_arguments_the_schema_refuses_fails(tmp_path: Path) -> None:
    folder = make_tool(tmp_path)
    manifest = folder / "say.toml"
    manifest.write_text(manifest.read_text().replace('args = { text = "hi" }', "args = { text = 5 }"))
    report = validate(folder, "say")
    assert isinstance(report.first_error, runner.InvalidToolArgs)


def test_a_module_that_is_not_wasm_fails_the_module_check(tmp_path: Path) -> None:
    report = validate(*find_manifest(make_tool(tmp_path, module=b"MZ not wasm at all")))
    assert statuses(report) == {"manifest": PASS, "module": FAIL}
    assert isinstance(report.first_error, runner.InvalidModule)


def test_a_component_fails_the_module_check_saying_it_is_a_component(tmp_path: Path) -> None:
    report = validate(*find_manifest(make_tool(tmp_path, module=b"\0asm\x0d\x00\x01\x00")))
    assert "component" in report.first_error.message


def test_a_module_importing_outside_wasi_fails(tmp_path: Path, guest) -> None:
    report = validate(*find_manifest(make_tool(tmp_path, module=guest("import_env"))))
    assert statuses(report)["module"] == FAIL
    assert "not a WASI preview 1 function" in report.first_error.message


def test_a_module_without_start_fails(tmp_path: Path, guest) -> None:
    report = validate(*find_manifest(make_tool(tmp_path, module=guest("no_start"))))
    assert statuses(report)["module"] == FAIL and "_start" in report.first_error.message


def test_a_wrong_pin_fails_and_examples_are_not_run(tmp_path: Path) -> None:
    folder = make_tool(tmp_path)
    manifest = folder / "say.toml"
    manifest.write_text(f'sha256 = "{"0" * 64}"\n' + manifest.read_text())
    report = validate(folder, "say")
    assert statuses(report) == {"manifest": PASS, "module": PASS, "sha256": FAIL, "examples": SKIP}
    assert isinstance(report.first_error, runner.ToolIntegrityMismatch)


def test_an_invalid_manifest_stops_at_the_manifest_check(tmp_path: Path) -> None:
    folder = make_tool(tmp_path)
    (folder / "say.toml").write_text('tool_name = "say"\nversion = "x"\n')
    report = validate(folder, "say")
    assert statuses(report) == {"manifest": FAIL} and isinstance(report.first_error, runner.InvalidManifest)


def test_a_folder_without_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(runner.ToolNotFound, match="no manifest"):
        find_manifest(tmp_path / "empty")


def test_cli_validate_prints_each_check_and_fails_with_the_error_name(tmp_path: Path) -> None:
    good = zigclaw(tmp_path, "tools", "validate", str(make_tool(tmp_path / "a")))
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout)
    assert report["ok"] and [c["status"] for c in report["checks"]] == ["pass", "pass", "skip", "pass"]
    bad = zigclaw(tmp_path, "tools", "validate", str(make_tool(tmp_path / "b", expected="no")))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("error: ExampleFailed\n")
    assert json.loads(bad.stdout)["checks"][-1]["status"] == "fail"
    missing = zigclaw(tmp_path, "tools", "validate", str(tmp_path))  # holds no manifest
    assert missing.returncode == 1 and missing.stderr.startswith("error: ToolNotFound\n")


def test_cli_validate_by_tool_name_finds_the_installed_tool(tmp_path: Path) -> None:
    ext = tmp_path / "ext-tools"
    add(make_tool(tmp_path / "src"), ext)
    proc = zigclaw(tmp_path, "tools", "validate", "say", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [c["status"] for c in json.loads(proc.stdout)["checks"]] == ["pass"] * 4  # pinned now


# --- add -----------------------------------------------------------------------------------------


def test_add_installs_manifest_and_module_with_the_pin_of_the_checked_module(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    done = add(make_tool(tmp_path / "src"), ext)
    assert sorted(os.listdir(ext)) == ["say.toml", "say.wasm"]  # no staging left behind
    assert (ext / "say.wasm").read_bytes() == ECHO_WASM.read_bytes()
    from runner.manifest import load_manifest

    assert load_manifest(ext, "say").sha256 == done.sha256 == runner_sha(ECHO_WASM)


def runner_sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_installed_tool_runs_and_a_swapped_module_is_refused(toolbox) -> None:
    add(make_tool(toolbox.root / "src"), toolbox.external)
    toolbox.write_config(["say"])
    assert toolbox.runner().run("say", {"text": "x"}).data == {"echo": "x"}
    (toolbox.external / "say.wasm").write_bytes(ECHO_WASM.read_bytes() + b"\0")
    with pytest.raises(runner.ToolIntegrityMismatch):
        toolbox.runner().run("say", {"text": "x"})


def test_add_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    add(make_tool(tmp_path / "one"), ext)
    with pytest.raises(runner.ToolExists):
        add(make_tool(tmp_path / "two"), ext)
    assert add(make_tool(tmp_path / "three"), ext, force=True).replaced


def test_add_refuses_a_tool_that_fails_validation_and_installs_nothing(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    with pytest.raises(runner.ExampleFailed):
        add(make_tool(tmp_path / "src", expected="nope"), ext)
    assert os.listdir(ext) == []


def test_add_refuses_a_builtin_name(tmp_path: Path) -> None:
    with pytest.raises(runner.ToolExists, match="built-in"):
        add(make_tool(tmp_path / "src", name="echo"), tmp_path / "ext")


def test_add_refuses_a_module_that_belongs_to_another_tool(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    add(make_tool(tmp_path / "a"), ext)
    other = make_tool(tmp_path / "b", name="other")
    manifest = other / "other.toml"
    manifest.write_text('module = "say.wasm"\n' + manifest.read_text())
    (other / "say.wasm").write_bytes(ECHO_WASM.read_bytes())
    with pytest.raises(runner.ToolExists, match="belongs to the installed tool 'say'"):
        add(other, ext, force=True)


def test_add_a_folder_without_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    with pytest.raises(runner.ToolNotFound):
        add(tmp_path / "src", tmp_path / "ext")


def test_pin_is_written_as_the_first_key_and_reparses() -> None:
    text = textwrap.dedent(MANIFEST.format(expected="hi")).encode()
    pinned = pin_manifest(text, "a" * 64, stem="say")
    assert pinned.startswith(b'sha256 = "' + b"a" * 64) and pinned.endswith(text)
    assert pin_manifest(pinned, "a" * 64, stem="say") == pinned
    with pytest.raises(runner.InvalidManifest):
        pin_manifest(pinned, "b" * 64, stem="say")


# --- archives ------------------------------------------------------------------------------------


def tarball(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def file_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special_member(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def good_members(prefix: str = "say/") -> list[tuple[tarfile.TarInfo, bytes | None]]:
    text = textwrap.dedent(MANIFEST.format(expected="hi")).encode()
    return [file_member(f"{prefix}say.toml", text), file_member(f"{prefix}say.wasm", ECHO_WASM.read_bytes())]


@pytest.mark.parametrize("prefix", ["say/", "", "./"])
def test_add_installs_from_a_tar_gz(tmp_path: Path, prefix: str) -> None:
    archive = tarball(tmp_path / "say.tar.gz", good_members(prefix))
    done = add(archive, tmp_path / "ext")
    assert done.tool == "say" and (tmp_path / "ext" / "say.wasm").read_bytes() == ECHO_WASM.read_bytes()
    assert sorted(os.listdir(tmp_path / "ext")) == ["say.toml", "say.wasm"]


def test_a_truncated_archive(tmp_path: Path) -> None:
    whole = tarball(tmp_path / "whole.tar.gz", good_members()).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(runner.InvalidArchive, match="truncated"):
        add(cut, tmp_path / "ext")
    assert os.listdir(tmp_path / "ext") == []


def test_a_file_that_is_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not gzip")
    with pytest.raises(runner.InvalidArchive):
        add(junk, tmp_path / "ext")


@pytest.mark.parametrize(
    "member,reason",
    [
        (file_member("/etc/evil", b"x"), "absolute path"),
        (file_member("say/../../evil", b"x"), "'..'"),
        (file_member("../evil", b"x"), "'..'"),
        (special_member("say/link", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
        (special_member("say/hard", tarfile.LNKTYPE, "say/say.toml"), "hard link"),
        (special_member("say/dev", tarfile.CHRTYPE), "device"),
        (special_member("say/blk", tarfile.BLKTYPE), "device"),
        (special_member("say/fifo", tarfile.FIFOTYPE), "FIFO"),
        (file_member("say/say.toml", b"again"), "twice"),
    ],
)
def test_archives_with_paths_links_or_devices_are_refused_whole(tmp_path: Path, member, reason: str) -> None:
    archive = tarball(tmp_path / "bad.tar.gz", [*good_members(), member])
    with pytest.raises(runner.InvalidArchive, match=reason):
        add(archive, tmp_path / "ext")
    assert os.listdir(tmp_path / "ext") == []  # nothing installed, no staging left
    assert not (tmp_path / "evil").exists()


def test_an_oversized_archive_is_refused(tmp_path: Path, monkeypatch) -> None:
    import runner.install as install

    monkeypatch.setattr(install, "MAX_ARCHIVE_BYTES", 1000)
    archive = tarball(tmp_path / "big.tar.gz", good_members())
    with pytest.raises(runner.InvalidArchive, match="more than 1000 bytes"):
        unpack_archive(archive, (tmp_path / "stage"))


def test_too_many_members_are_refused(tmp_path: Path, monkeypatch) -> None:
    import runner.install as install

    monkeypatch.setattr(install, "MAX_ARCHIVE_MEMBERS", 3)
    members = [file_member(f"f{i}", b"") for i in range(5)]
    stage = tmp_path / "stage"
    stage.mkdir()
    with pytest.raises(runner.InvalidArchive, match="more than 3 entries"):
        unpack_archive(tarball(tmp_path / "many.tar.gz", members), stage)


def test_cli_add_reports_errors_by_name(tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(tarball(tmp_path / "w.tar.gz", good_members()).read_bytes()[:100])
    proc = zigclaw(tmp_path, "tools", "add", str(cut))
    assert proc.returncode == 1 and proc.stderr.startswith("error: InvalidArchive\n")
    assert "Traceback" not in proc.stderr
    ok = zigclaw(tmp_path, "tools", "add", str(make_tool(tmp_path / "src")))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["sha256"] == runner_sha(ECHO_WASM)
    again = zigclaw(tmp_path, "tools", "add", str(tmp_path / "src" / "say"))
    assert again.returncode == 1 and again.stderr.startswith("error: ToolExists\n")


def test_validate_target_is_a_path_when_one_exists_else_a_plain_name(tmp_path: Path, monkeypatch) -> None:
    from runner.toolcheck import locate_target

    folder = make_tool(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert locate_target("say", lambda name: Path("/nowhere")) == (folder.relative_to(tmp_path), "say")
    assert locate_target("other", lambda name: tmp_path / "layer") == (tmp_path / "layer", "other")
    with pytest.raises(runner.InvalidToolName):
        locate_target("Not_Plain", lambda name: tmp_path)


def test_cli_add_global_installs_into_the_global_layer(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("ZIGCLAW_CONFIG_HOME", str(home))
    project = tmp_path / "project"
    project.mkdir()
    proc = zigclaw(project, "tools", "add", "--global", str(make_tool(tmp_path / "src")))
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(home / "tools")) == ["say.toml", "say.wasm"]
    assert not (project / "ext-tools").exists()
    listed = zigclaw(project, "tools", "list", "--json")
    assert "say" in json.loads(listed.stdout)["tools"]


@pytest.mark.parametrize("suffix,mode", [(".tar.xz", "w:xz"), (".tar.bz2", "w:bz2")])
def test_damaged_xz_and_bz2_archives_are_invalid_archives(tmp_path: Path, suffix: str, mode: str) -> None:
    good = tmp_path / f"good{suffix}"
    with tarfile.open(good, mode) as tar:
        for info, data in good_members():
            tar.addfile(info, io.BytesIO(data))
    data = bytearray(good.read_bytes())
    for index in range(len(data) // 2, len(data) - 8, 7):
        data[index] ^= 0x5A  # damage the compressed stream past its header
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(bytes(data))
    with pytest.raises(runner.InvalidArchive):
        add(bad, tmp_path / "ext")
    assert os.listdir(tmp_path / "ext") == []
