"""The `zigclaw` command: parse, call the library, render. No logic of its own."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from . import __version__
from .errors import InternalError, ZigclawError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Run untrusted agent tools in a WASI sandbox (zigclaw protocol v0).",
)
tools_app = typer.Typer(no_args_is_help=True, help="List, describe and run tools.")
config_app = typer.Typer(no_args_is_help=True, help="Check zigclaw.toml.")
policy_app = typer.Typer(no_args_is_help=True, help="Explain policy decisions.")
app.add_typer(tools_app, name="tools")
app.add_typer(config_app, name="config")
app.add_typer(policy_app, name="policy")

ConfigOption = Annotated[
    str | None, typer.Option("--config", help="Path to zigclaw.toml (default: ./zigclaw.toml).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON, also for errors.")]

F = TypeVar("F", bound=Callable[..., Any])


def _emit(value: Any) -> None:
    # ASCII only: tool data can hold C1 controls, bidi overrides and line separators,
    # which would otherwise reach the terminal raw. The JSON means the same either way.
    sys.stdout.write(json.dumps(value, separators=(",", ":"), ensure_ascii=True) + "\n")


def _fail(command: str, error: ZigclawError, as_json: bool) -> None:
    if as_json:
        _emit(error.to_json(command))
    else:
        sys.stderr.write(f"error: {error.name}\n")
        sys.stderr.write(f"message: {error.message}\n")
        if error.hint:
            sys.stderr.write(f"hint: {error.hint}\n")
    raise typer.Exit(1)


def handles_errors(command: str) -> Callable[[F], F]:
    """Turn every error of a command into exit 1 with its name, message and hint; never a traceback."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            as_json = bool(kwargs.get("as_json", False))
            try:
                return func(*args, **kwargs)
            except (typer.Exit, typer.Abort, typer.BadParameter, SystemExit, BrokenPipeError):
                raise
            except ZigclawError as exc:
                _fail(command, exc, as_json)
            except Exception as exc:
                if os.environ.get("ZIGCLAW_DEBUG"):
                    raise
                _fail(command, InternalError(f"{type(exc).__name__}: {exc}"), as_json)

        return wrapper  # type: ignore[return-value]

    return decorate


def _runner(config: str | None, *, audit: bool = False) -> Any:
    from .service import Runner

    if sys.stderr.isatty():
        from .sandbox.progress import set_compile_progress

        set_compile_progress(_compile_spinner)

    # One call per process: the guard's thread handoff costs nothing noticeable here.
    # Only commands that run tools open the audit log.
    return Runner.from_config(config, guard_blocking_calls=True, audit=audit)


def _compile_spinner(source: str, size: int) -> Any:
    """A spinner on stderr while a large module compiles; later runs load it from the cache."""
    from rich.console import Console
    from rich.markup import escape

    from .errors import printable

    name = escape(printable(os.path.basename(source)))
    text = f"compiling {name} ({size / 2**20:.1f} MiB); the first run only, later runs use the cache"
    return Console(stderr=True).status(text)


def _is_terminal() -> bool:
    return sys.stdout.isatty()


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"zigclaw {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Run untrusted agent tools in a WASI sandbox (zigclaw protocol v0)."""


@tools_app.command("list")
@handles_errors("tools")
def tools_list(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List tools: JSON when piped or with --json, a table on a terminal."""
    runner = _runner(config)
    entries = runner.tools()
    if as_json or not _is_terminal():
        _emit({"tools": sorted({entry.name for entry in entries if entry.runnable_name})})
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .errors import printable

    def cell(text: str) -> str:
        return escape(printable(text))

    active = runner.active_preset()
    table = Table("tool", "origin", "shadows", "version", "policy", "status")
    for entry in entries:
        decisions = runner.static_decisions(entry.name, active)
        denied = next((d for d in decisions if not d.allowed), None)
        verdict = "allowed" if denied is None else denied.reason
        version = entry.manifest.version if entry.manifest else "-"
        status = "ok" if entry.error is None else f"invalid: {entry.error.message}"
        shadows = ", ".join(entry.shadows) or "-"
        row = (entry.name, entry.origin, shadows, version, verdict, status)
        table.add_row(*(cell(text) for text in row))
    Console().print(table)


@tools_app.command("describe")
@handles_errors("tools")
def tools_describe(tool: str, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Print a tool's manifest as JSON."""
    _emit(_runner(config).describe(tool))


@tools_app.command("run")
@handles_errors("tools")
def tools_run(
    tool: str,
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    preset: Annotated[str | None, typer.Option("--preset", help="Run under this preset.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    yes: Annotated[
        bool, typer.Option("--yes", help="Approve this call if its tool's approval mode is 'ask'.")
    ] = False,
) -> None:
    """Run a tool and print {request_id, ok, data, stdout, stderr}."""
    result = _runner(config, audit=True).run(tool, args, preset=preset, approve=_approver(yes))
    _emit(result.to_json())


def _approver(yes: bool) -> Any:
    """--yes, else a prompt when both stdin and stderr are a terminal, else no one to ask."""
    from .approval import Answer, fixed_approver, terminal_approver

    if yes:
        return fixed_approver(Answer.YES)
    if sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty():
        return terminal_approver(sys.stdin, sys.stderr)
    return None


@tools_app.command("bench")
@handles_errors("tools")
def tools_bench(
    tool: str,
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    runs: Annotated[int, typer.Option("-n", "--runs", min=1, max=100_000, help="Timed runs.")] = 200,
    native: Annotated[
        str | None,
        typer.Option("--native", help="The tool's native build (a native = true tool) to compare."),
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Measure a tool's run time in-process, under the wasmtime CLI and as its native build."""
    from .bench import bench_tool

    # Unguarded, as the library runs by default: the figure users get from the API.
    from .service import Runner

    report = bench_tool(Runner.from_config(config), tool, args, runs, native_tool=native)
    if as_json or not _is_terminal():
        _emit(report)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("mode", "runs", "p50 ms", "p90 ms", "p99 ms", "runs/s", "x in-process", title=tool)
    for row in report["results"]:
        table.add_row(
            row["mode"],
            str(row["runs"]),
            f"{row['p50_ms']:.3f}",
            f"{row['p90_ms']:.3f}",
            f"{row['p99_ms']:.3f}",
            f"{row['runs_per_second']:.0f}",
            f"{row['x_in_process']}",
        )
    console = Console()
    console.print(table)
    for mode, why in report["skipped"].items():
        console.print(f"{mode}: skipped ({why})")


@config_app.command("validate")
@handles_errors("config")
def config_validate(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Check zigclaw.toml: warnings on stderr, or all of it as JSON with --json."""
    runner = _runner(config)
    warnings = runner.validate_config()
    if as_json:
        _emit(
            {
                "ok": True,
                "policy_hash": runner.policy_hash(),
                "warnings": [{"key_path": w.key_path, "message": w.message} for w in warnings],
            }
        )
        return
    from .errors import printable

    def short(text: str, limit: int = 300) -> str:
        return printable(text if len(text) <= limit else text[:limit] + "...")

    for warning in warnings:
        sys.stderr.write(f"warning: {short(warning.key_path)}: {short(warning.message)}\n")
    sys.stdout.write(f"ok: {len(warnings)} warning(s); policy_hash {runner.policy_hash()}\n")


@policy_app.command("explain")
@handles_errors("policy")
def policy_explain(
    tool: Annotated[str | None, typer.Option("--tool", help="Explain running this tool.")] = None,
    mount: Annotated[str | None, typer.Option("--mount", help="Explain access to this path.")] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Explain under this preset.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Explain why a tool or a path is allowed or denied, with the policy hash."""
    if (tool is None) == (mount is None):
        raise typer.BadParameter("give exactly one of --tool or --mount")
    runner = _runner(config)
    if tool is not None:
        _emit(runner.explain_tool(tool, preset))
    else:
        assert mount is not None
        _emit(runner.explain_mount(mount, preset))


# --- agent integration: MCP server and audit trail (issue 7) -------------------------

audit_app = typer.Typer(no_args_is_help=True, help="Read the audit trail.")
app.add_typer(audit_app, name="audit")


@audit_app.command("tail")
@handles_errors("audit")
def audit_tail(
    count: Annotated[int, typer.Option("-n", "--lines", min=1, max=1_000_000, help="Entries to show.")] = 20,
    tool: Annotated[str | None, typer.Option("--tool", help="Only entries of this tool.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only failed invocations.")] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the last audit entries: a table on a terminal, JSON lines when piped or with --json."""
    from .audit import tail
    from .config import load_config

    loaded = load_config(config)
    entries = tail(loaded.resolve(loaded.config.audit.path), count, tool=tool, failed=failed)
    if as_json or not _is_terminal():
        for entry in entries:
            _emit(entry)
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .errors import printable

    table = Table("time", "event", "tool", "request", "outcome", "ms", "detail")
    for entry in entries:
        outcome = (
            entry.get("error")
            or entry.get("outcome")
            or (("allowed" if entry.get("allowed") else "denied") if "allowed" in entry else "")
        )
        ms = entry.get("duration_ms")
        detail = entry.get("reason") or entry.get("message") or entry.get("category") or ""
        cells = (
            str(entry.get("time", "")),
            str(entry.get("event", "")),
            str(entry.get("tool", "")),
            str(entry.get("request_id", ""))[:8],
            str(outcome),
            "" if ms is None else f"{ms}",
            str(detail),
        )
        table.add_row(*(escape(printable(cell)) for cell in cells))
    Console().print(table)


@app.command("serve")
@handles_errors("serve")
def serve(
    http: Annotated[
        str | None,
        typer.Option("--http", help="Serve streamable HTTP on HOST:PORT (loopback only) instead of stdio."),
    ] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Serve this preset's tools.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Serve the active preset's tools to MCP clients (stdio by default)."""
    from .mcp_server import parse_loopback, serve_http, serve_stdio

    address = parse_loopback(http) if http is not None else None
    runner = _runner(config, audit=True)
    if address is None:
        serve_stdio(runner, preset)
    else:
        serve_http(runner, preset, *address)


# --- tools new / validate / add: authoring and installing third-party tools ---------------


@tools_app.command("new")
@handles_errors("tools")
def tools_new(
    name: Annotated[str, typer.Argument(help="The tool's name (^[a-z][a-z0-9_]{0,63}$).")],
    lang: Annotated[str, typer.Option("--lang", help="zig or c.")] = "zig",
    folder: Annotated[str, typer.Option("--dir", help="Make the tool folder <DIR>/<NAME>.")] = ".",
    build: Annotated[bool, typer.Option("--build/--no-build", help="Build the module now.")] = True,
    as_json: JsonOption = False,
) -> None:
    """Scaffold a working tool: manifest with an example, protocol v0 source, build.sh."""
    from pathlib import Path

    from .scaffold import LANGUAGES, new_tool

    if lang not in LANGUAGES:
        raise typer.BadParameter(f"'{lang}' is not one of {', '.join(LANGUAGES)}", param_hint="'--lang'")
    made = new_tool(name, lang, Path(folder), build=build)
    if as_json or not _is_terminal():
        _emit({"ok": True, "folder": str(made.folder), "files": list(made.files), "built": made.built})
        return
    sys.stdout.write(f"created {made.folder}: {', '.join(made.files)}\n{made.build_note}\n")
    sys.stdout.write(f"next: zigclaw tools validate {made.folder} && zigclaw tools add {made.folder}\n")


@tools_app.command("validate")
@handles_errors("tools")
def tools_validate(
    target: Annotated[
        str, typer.Argument(help="A tool folder, a manifest file, or an installed tool's name.")
    ],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a tool: manifest, module, sha256 pin, and each [[examples]] entry, run for real."""
    from .toolcheck import locate_target, manifest_problem, validate

    folder, tool = locate_target(target, lambda name: _runner(config).folder_for(name))
    report = validate(folder, tool)
    _render_report(report, as_json)
    if not report.ok:
        if as_json:
            raise typer.Exit(1)
        raise manifest_problem(report)


def _render_report(report: Any, as_json: bool) -> None:
    if as_json or not _is_terminal():
        _emit(report.to_json())
        return
    from .errors import printable

    for check in report.checks:
        sys.stdout.write(f"{check.status.upper():4}  {check.name}: {printable(check.detail)}\n")
    sys.stdout.write(("ok" if report.ok else "FAILED") + f": {report.tool} in {report.folder}\n")


@tools_app.command("add")
@handles_errors("tools")
def tools_add(
    source: Annotated[str, typer.Argument(help="A tool folder, its manifest, or a .tar.gz of the folder.")],
    force: Annotated[
        bool, typer.Option("--force", help="Replace an installed tool of the same name.")
    ] = False,
    to_global: Annotated[
        bool, typer.Option("--global", help="Install into the user's global tools folder.")
    ] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Validate a tool, then install it with its module's sha256 pinned into the manifest."""
    from pathlib import Path

    from .install import add_tool

    runner = _runner(config)
    dest = runner.global_dir if to_global else runner.external_dir
    done = add_tool(
        Path(source),
        dest,
        force=force,
        builtin_names=frozenset(runner.registry),
        allow_shadow_builtin=runner.loaded.config.tools.allow_shadow_builtin,
    )
    verb = "replaced" if done.replaced else "installed"
    if as_json or not _is_terminal():
        checks = [check.to_json() for check in done.report.checks]
        _emit(
            {
                "ok": True,
                "tool": done.tool,
                "manifest": str(done.manifest_path),
                "module": str(done.module_path),
                "replaced": done.replaced,
                "sha256": done.sha256,
                "checks": checks,
            }
        )
        return
    _render_report(done.report, as_json)
    sys.stdout.write(f"{verb} {done.tool} in {dest} (sha256 {done.sha256})\n")


# --- wasi: any WASI command module in the sandbox ---------------------------------------

wasi_app = typer.Typer(no_args_is_help=True, help="Run any WASI command module in the sandbox.")
app.add_typer(wasi_app, name="wasi")


@wasi_app.command("run", context_settings={"allow_interspersed_args": False})
def wasi_run(
    module: Annotated[str, typer.Argument(help="The WASI command module (.wasm).")],
    args: Annotated[list[str] | None, typer.Argument(help="Arguments for the module, after --.")] = None,
    dirs: Annotated[
        list[str] | None,
        typer.Option("--dir", help="Map HOST[::GUEST[::ro]]; ro makes it read-only for real."),
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", help="Pass NAME=VALUE, or NAME with the host's value.")
    ] = None,
    timeout: Annotated[int, typer.Option("--timeout", min=1, max=600_000, help="Wall clock, ms.")] = 10_000,
    fuel: Annotated[
        int | None, typer.Option("--fuel", min=1, max=2**63 - 1, help="Instruction budget.")
    ] = None,
    max_memory: Annotated[
        int, typer.Option("--max-memory", min=65536, max=4 * 1024**3, help="Linear memory cap, bytes.")
    ] = 256 * 1024 * 1024,
    max_stdout: Annotated[
        int, typer.Option("--max-stdout", min=0, max=1024**3, help="stdout cap, bytes.")
    ] = 64 * 1024 * 1024,
    max_stderr: Annotated[
        int, typer.Option("--max-stderr", min=0, max=1024**3, help="stderr cap, bytes.")
    ] = 1024 * 1024,
) -> None:
    """Run a WASI command module with argv, stdin and streamed output; exit with its exit code.

    Exit codes: the guest's own (0-125), 2 usage error, 126 not started, 200 ToolTimeout, 201 ToolOutOfFuel,
    202 ToolMemoryLimit, 203 StreamTooLong, 204 ToolTrap (each with `error: <Name>` on stderr).
    """
    from .wasirun import CommandLimits, UsageProblem, exit_code_for, run_module

    guest_args = list(args or [])
    if guest_args[:1] == ["--"]:  # options end at the module; a `--` after it is only a separator
        guest_args = guest_args[1:]
    limits = CommandLimits(timeout, fuel, max_memory, max_stdout, max_stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        code = run_module(module, guest_args, dirs=dirs or [], env=env or [], limits=limits)
    except UsageProblem as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.option}'") from None
    except ZigclawError as exc:
        _report_stop(exc)
        raise typer.Exit(exit_code_for(exc)) from None
    except Exception as exc:
        if os.environ.get("ZIGCLAW_DEBUG"):
            raise
        error = InternalError(f"{type(exc).__name__}: {exc}")
        _report_stop(error)
        raise typer.Exit(exit_code_for(error)) from None
    raise typer.Exit(code)


def _report_stop(error: ZigclawError) -> None:
    if error.details.get("output_mid_line"):
        sys.stderr.write("\n")  # the guest's last line was not finished: ours starts on its own
    sys.stderr.write(f"error: {error.name}\nmessage: {error.message}\n")
    if error.hint:
        sys.stderr.write(f"hint: {error.hint}\n")


def run() -> None:
    """Console-script entry point."""
    # Started with stdout or stderr closed: write into the void rather than crash.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("error: Interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        # stdout was closed under us (`| head`, `>&-`): nothing more can be said there.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    run()
