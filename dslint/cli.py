"""Command line: `dslint check`, `dslint rules`, `dslint explain`, `dslint preflight`.

Exit codes of `check`: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage error or an
input that could not be checked (missing path, bad config); 3 an internal error in a rule (the other rules'
findings are still printed). `preflight` has its own codes (docs/preflight.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional


EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

# The typer application (dslint.cli_app) parses every command line but the plain `dslint check` ones, which
# `_parse_check` reads itself: typer costs ~0.1 s of start-up and recent versions import pydantic to coerce
# parameters. Anything `_parse_check` is not sure of (help, a bad value, an unknown option) goes to typer, so
# help and usage errors are typer's, as before.
_CHECK_VALUES = {"--format": "output_format", "-f": "output_format", "--select": "select", "--ignore": "ignore",
                 "--world-size": "world_size", "--fail-level": "fail_level", "--config": "config",
                 "--deepspeed-version": "deepspeed_version", "--output": "output", "-o": "output",
                 "--jobs": "jobs", "-j": "jobs"}
_CHECK_FLAGS = {"--exit-zero": "exit_zero", "--no-cache": "no_cache", "--sniff-json": "sniff_json"}
_OUTPUT_FORMATS = ("text", "json", "sarif", "github")
_FAIL_LEVELS = ("warning", "error")


def _parse_check(args: list[str]) -> Optional[dict]:
    """`check`'s arguments as `run_check` keywords, or None where typer must parse them (and report)."""
    out: dict = {"paths": []}
    i, positional_only = 0, False
    while i < len(args):
        arg = args[i]
        i += 1
        if positional_only or not arg.startswith("-"):
            if not arg:
                return None
            out["paths"].append(Path(arg))
            continue
        if arg == "--":
            positional_only = True
            continue
        if arg in _CHECK_FLAGS:
            out[_CHECK_FLAGS[arg]] = True
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        key = _CHECK_VALUES.get(name)
        if key is None:
            return None
        if not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if value.startswith("-"):
            return None
        if key in ("select", "ignore"):
            out.setdefault(key, []).append(value)
        elif key == "output_format":
            if value not in _OUTPUT_FORMATS:
                return None
            out[key] = value
        elif key == "fail_level":
            if value not in _FAIL_LEVELS:
                return None
            out[key] = value
        elif key in ("world_size", "jobs"):
            if not (value.isascii() and value.isdigit()) or key == "world_size" and int(value) < 1:
                return None
            out[key] = int(value)
        elif key in ("config", "output"):
            if not value:
                return None
            out[key] = Path(value)
        else:
            out[key] = value
    return out if out["paths"] else None


def _codes(values: Optional[List[str]]) -> List[str]:
    return [c.strip().upper() for v in values or [] for c in v.split(",") if c.strip()]


def _error(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def run_check(paths: List[Path], output_format: str = "text", select: Optional[List[str]] = None,
              ignore: Optional[List[str]] = None, world_size: Optional[int] = None, fail_level: Optional[str] = None,
              config: Optional[Path] = None, deepspeed_version: Optional[str] = None, output: Optional[Path] = None,
              exit_zero: bool = False, no_cache: bool = False, jobs: int = 0, sniff_json: bool = False) -> int:
    """`dslint check`: returns the exit code."""
    from dslint.cache import default_dir
    from dslint.codecache import install
    cache_dir = None if no_cache else default_dir()
    install(cache_dir)      # before libcst's ~200 dataclasses are built (dslint.codecache)
    from dslint.config import ConfigFileError, load_settings
    from dslint.engine import Checker, fails
    from dslint.findings import Severity
    from dslint.formats import render
    from dslint.rules import all_rules

    try:
        settings = load_settings(config, list(paths))
    except ConfigFileError as exc:
        _error(f"dslint: error: {exc}")
        return EXIT_USAGE
    for code in _codes(select) + _codes(ignore):     # imports every family only when codes are given
        if code != "ALL" and not any(r.code.startswith(code) for r in all_rules()):
            _error(f"dslint: error: unknown rule code or prefix {code!r} (see `dslint rules`)")
            return EXIT_USAGE
    if select:
        settings.select = _codes(select)
    if ignore:
        settings.ignore = settings.ignore + _codes(ignore)
    if world_size:
        settings.world_size = world_size
    if fail_level:
        settings.fail_level = Severity(fail_level)
    if deepspeed_version:
        settings.deepspeed_version = deepspeed_version

    checker = Checker(settings, sniff_json=sniff_json, cache_dir=cache_dir, jobs=jobs)
    report = checker.check_paths(list(paths))
    used = [type(r) for r in checker.rules]
    rendered = render(output_format, report, used)
    if output:
        output.write_text(rendered)
    else:
        sys.stdout.write(rendered)
    if report.errors:
        for e in report.errors:
            where = e.path + (f":{e.line}:{e.column or 1}" if e.line else "")
            _error(f"{where}: error: {e.message}")
    if any(e.kind == "internal-error" for e in report.errors):
        return EXIT_INTERNAL
    if any(e.kind in ("missing-path", "config") for e in report.errors) or report.files_checked == 0:
        if report.files_checked == 0:
            _error("dslint: error: no input could be checked")
        return EXIT_USAGE
    return EXIT_FINDINGS if fails(report, settings.fail_level) and not exit_zero else EXIT_OK


def _run_check_directly(kwargs: dict) -> int:
    """`run_check` with what typer's standalone mode does around a command: Ctrl-C exits 130, a closed
    pipe (`dslint check … | head`) exits 1 without a traceback."""
    try:
        code = run_check(**kwargs)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _run_preflight(argv: list[str], local_rank: Optional[int]) -> int:
    from dslint.runtime_checks.cli import main as preflight_main
    return preflight_main(argv, local_rank)


def _split_local_rank(argv: list[str]) -> tuple[list[str], Optional[int]]:
    """The deepspeed launcher runs `python -u -m dslint --local_rank=N preflight …`."""
    local_rank = None
    if argv and argv[0].startswith("--local_rank") or argv and argv[0].startswith("--local-rank"):
        head = argv[0]
        if "=" in head:
            local_rank, argv = int(head.split("=", 1)[1]), argv[1:]
        elif len(argv) > 1:
            local_rank, argv = int(argv[1]), argv[2:]
    return argv, local_rank


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest, local_rank = _split_local_rank(argv)
    if rest and rest[0] == "preflight":
        return _run_preflight(rest[1:], local_rank)
    if rest and rest[0] == "check":
        parsed = _parse_check(rest[1:])
        if parsed is not None:
            return _run_check_directly(parsed)
    from dslint.cli_app import app
    try:
        app(args=rest, prog_name="dslint", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    return EXIT_OK


def __getattr__(name: str):
    """`dslint.cli.app` and its enums, without importing typer for a plain `check`."""
    if name in ("app", "OutputFormat", "RulesFormat", "FailLevel"):
        from dslint import cli_app
        return getattr(cli_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
