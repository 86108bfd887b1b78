"""The manifest loader (SPEC 2): good manifests load with zigclaw's spellings mapped; every bad
file is InvalidManifest (or ToolNotFound) with a one-line message naming the file and the key."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.errors import InvalidManifest, ToolNotFound, ZigclawError
from runner.manifest import MAX_MANIFEST_BYTES, load_manifest
from runner.registry import discover

GOOD_ARGS = """
[args]
type = "object"
required = ["text"]

[args.properties.text]
type = "string"
max_length = 1024

[args.properties.count]
type = "integer"
min = 1
max = 10
"""

HEADER = 'tool_name = "{name}"\nversion = "1.2.3"\ndescription = "a test tool"\n'


def write(folder: Path, name: str, body: str, *, header: bool = True, args: bool = True) -> Path:
    text = (HEADER.format(name=name) if header else "") + textwrap.dedent(body)
    if args:
        text += GOOD_ARGS
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(folder: Path, name: str) -> ZigclawError:
    with pytest.raises(ZigclawError) as info:
        load_manifest(folder, name)
    return info.value


def assert_invalid(folder: Path, name: str, *keys: str) -> str:
    """The load fails with InvalidManifest, one line, naming the file and each key."""
    error = load_error(folder, name)
    assert type(error) is InvalidManifest
    assert error.name == "InvalidManifest"
    assert str(folder / f"{name}.toml") in error.message
    for key in keys:
        assert key in error.message, (key, error.message)
    assert "\n" not in error.message
    assert "Traceback" not in error.message
    return error.message


# --- good manifests -------------------------------------------------------------------------


def test_good_manifest_loads_with_zigclaw_defaults(tmp_path: Path) -> None:
    write(tmp_path, "tool", "")
    manifest = load_manifest(tmp_path, "tool")
    assert manifest.tool_name == "tool"
    assert manifest.version == "1.2.3"
    assert manifest.description == "a test tool"
    assert manifest.requires_network is False
    assert manifest.native is False
    assert manifest.max_runtime_ms == 2000
    assert manifest.max_stdout_bytes == 65536
    assert manifest.max_stderr_bytes == 65536
    assert manifest.max_memory_bytes == 64 * 1024 * 1024
    assert manifest.module_file == "tool.wasm"
    assert manifest.sha256 is None
    assert manifest.env == []
    assert manifest.output is None


def test_zigclaw_spellings_are_mapped_to_json_schema(tmp_path: Path) -> None:
    write(tmp_path, "tool", "")
    args = load_manifest(tmp_path, "tool").args
    text = args["properties"]["text"]
    count = args["properties"]["count"]
    assert text == {"type": "string", "maxLength": 1024}
    assert count == {"type": "integer", "minimum": 1, "maximum": 10}
    for prop in (text, count):
        assert not {"max_length", "min", "max"} & set(prop)


def test_additional_properties_defaults_to_false(tmp_path: Path) -> None:
    write(tmp_path, "tool", "")
    manifest = load_manifest(tmp_path, "tool")
    assert manifest.args["additionalProperties"] is False
    assert manifest.args_validator.first_error({"text": "hi", "other": 1}) is not None
    assert manifest.args_validator.first_error({"text": "hi"}) is None


def test_additional_properties_true_is_kept(tmp_path: Path) -> None:
    write(tmp_path, "tool", '[args]\ntype = "object"\nadditionalProperties = true\n', args=False)
    manifest = load_manifest(tmp_path, "tool")
    assert manifest.args["additionalProperties"] is True
    assert manifest.args_validator.first_error({"anything": 1}) is None


def test_describe_uses_zigclaw_key_order(tmp_path: Path) -> None:
    write(tmp_path, "tool", "max_runtime_ms = 3000\n")
    described = load_manifest(tmp_path, "tool").describe()
    assert list(described)[:9] == [
        "tool_name",
        "version",
        "description",
        "requires_network",
        "native",
        "max_runtime_ms",
        "max_stdout_bytes",
        "max_stderr_bytes",
        "args",
    ]
    assert described["tool_name"] == "tool"
    assert described["max_runtime_ms"] == 3000
    assert described["args"]["properties"]["text"]["maxLength"] == 1024


def test_optional_new_fields_load(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tool",
        f"""
        native = true
        module = "tool-bin"
        sha256 = "{"a" * 64}"
        env = ["HOME_DIR", "_X1"]
        max_fuel = 1000
        """,
    )
    manifest = load_manifest(tmp_path, "tool")
    assert manifest.module_file == "tool-bin"
    assert manifest.sha256 == "a" * 64
    assert manifest.env == ["HOME_DIR", "_X1"]
    assert manifest.fuel == 1000


def test_manifest_of_exactly_the_size_cap_loads(tmp_path: Path) -> None:
    path = write(tmp_path, "tool", "")
    size = len(path.read_bytes())
    padding = MAX_MANIFEST_BYTES - size - 2  # "#" + filler + "\n"
    path.write_bytes(path.read_bytes() + b"#" + b"x" * padding + b"\n")
    assert path.stat().st_size == MAX_MANIFEST_BYTES
    assert load_manifest(tmp_path, "tool").tool_name == "tool"


# --- bad manifests --------------------------------------------------------------------------


def test_malformed_toml_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", "max_runtime_ms = = 5\n")
    message = assert_invalid(tmp_path, "tool")
    assert "invalid TOML" in message


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('max_runtime_ms = "2000"', "max_runtime_ms"),
        ("requires_network = 1", "requires_network"),
        ("max_runtime_ms = true", "max_runtime_ms"),
        ('native = "yes"', "native"),
        ("max_stdout_bytes = 1.5", "max_stdout_bytes"),
        ('env = "HOME"', "env"),
    ],
    ids=["string-runtime", "int-network", "bool-runtime", "string-native", "float-stdout", "string-env"],
)
def test_wrong_key_type_is_invalid_manifest_naming_the_key(tmp_path: Path, line: str, key: str) -> None:
    write(tmp_path, "tool", line + "\n")
    assert_invalid(tmp_path, "tool", key)


def test_unknown_top_level_key_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", "max_runtime = 5\n")
    message = assert_invalid(tmp_path, "tool", "max_runtime")
    assert "unknown key" in message


def test_missing_required_key_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", 'tool_name = "tool"\nversion = "1.0.0"\n', header=False)
    message = assert_invalid(tmp_path, "tool", "description")
    assert "missing" in message


def test_missing_args_table_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", "", args=False)
    assert_invalid(tmp_path, "tool", "args")


def test_tool_name_differing_from_file_stem_is_invalid_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, "other", "")
    path.rename(tmp_path / "tool.toml")
    message = assert_invalid(tmp_path, "tool", "tool_name", "other")
    assert "does not match" in message


def test_uppercase_tool_name_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "Tool", "")
    assert_invalid(tmp_path, "Tool", "tool_name")


@pytest.mark.parametrize("value", [0, 600001, -1])
def test_out_of_range_max_runtime_ms_is_invalid_manifest(tmp_path: Path, value: int) -> None:
    write(tmp_path, "tool", f"max_runtime_ms = {value}\n")
    assert_invalid(tmp_path, "tool", "max_runtime_ms")


@pytest.mark.parametrize("value", [1, 600000])
def test_max_runtime_ms_bounds_are_inclusive(tmp_path: Path, value: int) -> None:
    write(tmp_path, "tool", f"max_runtime_ms = {value}\n")
    assert load_manifest(tmp_path, "tool").max_runtime_ms == value


def test_stdout_cap_over_64_mib_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", f"max_stdout_bytes = {64 * 1024 * 1024 + 1}\n")
    assert_invalid(tmp_path, "tool", "max_stdout_bytes")


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0.0", "latest", ""])
def test_bad_semver_is_invalid_manifest(tmp_path: Path, version: str) -> None:
    write(tmp_path, "tool", f'tool_name = "tool"\nversion = "{version}"\ndescription = "d"\n', header=False)
    assert_invalid(tmp_path, "tool", "version")


@pytest.mark.parametrize("version", ["0.1.0", "1.0.0-alpha.1", "2.3.4+build.5", "1.0.0-rc.1+sha.abc"])
def test_good_semver_loads(tmp_path: Path, version: str) -> None:
    write(tmp_path, "tool", f'tool_name = "tool"\nversion = "{version}"\ndescription = "d"\n', header=False)
    assert load_manifest(tmp_path, "tool").version == version


@pytest.mark.parametrize("description", ["", "   ", "\\t\\n"])
def test_blank_description_is_invalid_manifest(tmp_path: Path, description: str) -> None:
    write(
        tmp_path,
        "tool",
        f'tool_name = "tool"\nversion = "1.0.0"\ndescription = "{description}"\n',
        header=False,
    )
    assert_invalid(tmp_path, "tool", "description")


@pytest.mark.parametrize("module", ["sub/tool.wasm", "../tool.wasm", "..", ".", "a\\\\b.wasm", "/etc/passwd"])
def test_module_with_path_separator_or_dots_is_invalid_manifest(tmp_path: Path, module: str) -> None:
    write(tmp_path, "tool", f'module = "{module}"\n')
    assert_invalid(tmp_path, "tool", "module")


@pytest.mark.parametrize(
    "digest",
    ["abc", "A" * 64, "g" * 64, "a" * 63, "a" * 65, ""],
    ids=["short", "upper", "nonhex", "63", "65", "empty"],
)
def test_bad_sha256_is_invalid_manifest(tmp_path: Path, digest: str) -> None:
    write(tmp_path, "tool", f'sha256 = "{digest}"\n')
    assert_invalid(tmp_path, "tool", "sha256")


@pytest.mark.parametrize("entry", ["1HOME", "A-B", "A=B", "", "A B", "PATH\\u0000"])
def test_env_entry_with_bad_name_is_invalid_manifest(tmp_path: Path, entry: str) -> None:
    write(tmp_path, "tool", f'env = ["HOME", "{entry}"]\n')
    assert_invalid(tmp_path, "tool", "env")


@pytest.mark.parametrize("kind", ['"array"', '"string"', "5"])
def test_args_type_other_than_object_is_invalid_manifest(tmp_path: Path, kind: str) -> None:
    write(tmp_path, "tool", f"[args]\ntype = {kind}\n", args=False)
    message = assert_invalid(tmp_path, "tool", "args")
    assert "object" in message


def test_args_without_type_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", '[args]\nrequired = ["x"]\n', args=False)
    assert_invalid(tmp_path, "tool", "args", "object")


def test_invalid_json_schema_in_args_is_invalid_manifest(tmp_path: Path) -> None:
    write(tmp_path, "tool", '[args]\ntype = "object"\n[args.properties.a]\ntype = 5\n', args=False)
    assert_invalid(tmp_path, "tool", "args", "properties/a/type")


def test_duplicate_zigclaw_and_json_schema_spelling_is_invalid_manifest(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tool",
        '[args]\ntype = "object"\n[args.properties.a]\ntype = "string"\nmax_length = 1\nmaxLength = 2\n',
        args=False,
    )
    assert_invalid(tmp_path, "tool", "args", "maxLength")


def test_invalid_output_schema_is_invalid_manifest(tmp_path: Path) -> None:
    path = tmp_path / "tool.toml"
    path.write_text(
        HEADER.format(name="tool") + GOOD_ARGS + '\n[output]\ntype = "object"\nrequired = "echo"\n'
    )
    assert_invalid(tmp_path, "tool", "output")


def test_valid_output_schema_loads(tmp_path: Path) -> None:
    path = tmp_path / "tool.toml"
    path.write_text(
        HEADER.format(name="tool") + GOOD_ARGS + '\n[output]\ntype = "object"\nrequired = ["echo"]\n'
    )
    manifest = load_manifest(tmp_path, "tool")
    assert manifest.output == {"type": "object", "required": ["echo"]}
    assert manifest.output_validator is not None
    assert manifest.output_validator.first_error({"echo": 1}) is None
    assert manifest.output_validator.first_error({}) is not None


def test_manifest_over_the_size_cap_is_invalid_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, "tool", "")
    path.write_bytes(path.read_bytes() + b"#" + b"x" * MAX_MANIFEST_BYTES + b"\n")
    message = assert_invalid(tmp_path, "tool")
    assert str(MAX_MANIFEST_BYTES) in message
    assert "limit" in message


def test_manifest_one_byte_over_the_size_cap_is_invalid_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, "tool", "")
    size = len(path.read_bytes())
    path.write_bytes(path.read_bytes() + b"#" + b"x" * (MAX_MANIFEST_BYTES - size - 1) + b"\n")
    assert path.stat().st_size == MAX_MANIFEST_BYTES + 1
    assert_invalid(tmp_path, "tool", "limit")


def test_symlinked_manifest_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    write(real, "tool", "")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "tool.toml").symlink_to(real / "tool.toml")
    message = assert_invalid(tools, "tool")
    assert "symbolic link" in message


def test_missing_manifest_is_tool_not_found(tmp_path: Path) -> None:
    error = load_error(tmp_path, "nothere")
    assert type(error) is ToolNotFound
    assert error.name == "ToolNotFound"
    assert "nothere" in error.message
    assert str(tmp_path) in error.message


def test_manifest_in_missing_folder_is_tool_not_found(tmp_path: Path) -> None:
    error = load_error(tmp_path / "absent", "tool")
    assert error.name == "ToolNotFound"


def test_directory_named_like_a_manifest_is_invalid_manifest(tmp_path: Path) -> None:
    (tmp_path / "tool.toml").mkdir()
    message = assert_invalid(tmp_path, "tool")
    assert "regular file" in message


def test_fifo_named_like_a_manifest_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "tool.toml")
    message = assert_invalid(tmp_path, "tool")
    assert "regular file" in message


def test_non_utf8_manifest_is_invalid_manifest(tmp_path: Path) -> None:
    path = tmp_path / "tool.toml"
    path.write_bytes(HEADER.format(name="tool").encode() + b'author = "\xff\xfe"\n' + GOOD_ARGS.encode())
    message = assert_invalid(tmp_path, "tool")
    assert "UTF-8" in message


def test_toml_bomb_of_nested_arrays_is_invalid_manifest(tmp_path: Path) -> None:
    depth = 100_000
    path = tmp_path / "tool.toml"
    path.write_text(HEADER.format(name="tool") + "bomb = " + "[" * depth + "]" * depth + "\n" + GOOD_ARGS)
    assert path.stat().st_size <= MAX_MANIFEST_BYTES
    assert_invalid(tmp_path, "tool")


def test_toml_bomb_of_nested_arrays_inside_args_is_invalid_manifest(tmp_path: Path) -> None:
    depth = 100_000
    path = tmp_path / "tool.toml"
    path.write_text(HEADER.format(name="tool") + GOOD_ARGS + "default = " + "[" * depth + "]" * depth + "\n")
    assert path.stat().st_size <= MAX_MANIFEST_BYTES
    assert_invalid(tmp_path, "tool")


def test_deep_but_modest_nesting_in_args_loads_or_is_invalid(tmp_path: Path) -> None:
    depth = 900
    path = tmp_path / "tool.toml"
    path.write_text(HEADER.format(name="tool") + GOOD_ARGS + "default = " + "[" * depth + "]" * depth + "\n")
    try:
        manifest = load_manifest(tmp_path, "tool")
    except InvalidManifest as exc:
        assert str(path) in exc.message
    else:
        assert manifest.tool_name == "tool"


LONG_KEY = "a." * 100_000 + "a"
SLOW_TOML = {
    "dotted-key": f"default.{LONG_KEY} = 1\n",
    "dotted-key-after-quoted-equals": f'"=".{LONG_KEY} = 1\n',
    "dotted-key-in-inline-table": f"default = {{{LONG_KEY} = 1}}\n",
    "table-header": f"[args.{LONG_KEY}]\n",
    "table-header-after-quoted-equals": f'[args."=".{LONG_KEY}]\n',
}


@pytest.mark.parametrize("tail", list(SLOW_TOML.values()), ids=list(SLOW_TOML))
def test_long_dotted_key_within_the_size_cap_is_handled_quickly(tmp_path: Path, tail: str) -> None:
    """A 200 KB manifest must not stall the loader (tools list reads every external manifest)."""
    path = tmp_path / "tool.toml"
    path.write_text(HEADER.format(name="tool") + GOOD_ARGS + tail)
    assert path.stat().st_size <= MAX_MANIFEST_BYTES
    code = (
        "import sys; from pathlib import Path\n"
        "from runner.manifest import load_manifest\n"
        "from runner.errors import InvalidManifest\n"
        "try:\n    load_manifest(Path(sys.argv[1]), 'tool')\n"
        "except InvalidManifest:\n    pass\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], env=env, timeout=5, capture_output=True
        )
    except subprocess.TimeoutExpired:
        pytest.fail("loading a 200 KB manifest with a long dotted key took over 5 s")
    assert done.returncode == 0, done.stderr.decode()


# --- discovery --------------------------------------------------------------------------------


def test_discover_lists_valid_and_invalid_manifests_side_by_side(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    external = tmp_path / "ext"
    plugins.mkdir()
    external.mkdir()
    write(external, "good", "")
    write(external, "bad", "max_runtime_ms = 0\n")
    (external / "notes.txt").write_text("not a manifest")
    entries = {entry.name: entry for entry in discover(plugins, external)}
    assert set(entries) == {"good", "bad"}
    good, bad = entries["good"], entries["bad"]
    assert good.manifest is not None and good.manifest.tool_name == "good"
    assert good.error is None
    assert good.origin == "external"
    assert bad.manifest is None
    assert bad.error is not None
    assert bad.error.name == "InvalidManifest"
    assert "max_runtime_ms" in bad.error.message
    assert str(external / "bad.toml") in bad.error.message


def test_discover_is_sorted_and_survives_a_symlinked_manifest(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    external = tmp_path / "ext"
    plugins.mkdir()
    external.mkdir()
    write(external, "zeta", "")
    write(tmp_path, "alpha", "")
    (external / "alpha.toml").symlink_to(tmp_path / "alpha.toml")
    entries = discover(plugins, external)
    assert [entry.name for entry in entries] == ["alpha", "zeta"]
    assert entries[0].error is not None and entries[0].error.name == "InvalidManifest"
    assert entries[1].manifest is not None


def test_discover_reports_a_directory_named_like_a_manifest_as_invalid(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    external = tmp_path / "ext"
    plugins.mkdir()
    external.mkdir()
    write(external, "good", "")
    (external / "dir.toml").mkdir()
    entries = {entry.name: entry for entry in discover(plugins, external)}
    assert entries["good"].manifest is not None
    assert entries["dir"].manifest is None
    assert entries["dir"].error is not None and entries["dir"].error.name == "InvalidManifest"
