"""Command line: `dslint check`, `dslint rules`, `dslint explain`, `dslint preflight`.

Exit codes of `check`: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage error or an
input that could not be checked (missing path, bad config); 3 an internal error in a rule (the other rules'
findings are still printed) or of dslint itself: one line on stderr, never a traceback unless `--debug` (any
command) asks for it. `preflight` has its own codes (docs/preflight.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from dslint.commands import (_FAIL_LEVELS, _OUTPUT_FORMATS, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK,  # noqa: F401
                             EXIT_USAGE, _run_preflight, run_check)

# The typer application (dslint.cli_app) parses every command line but the plain `dslint check` ones, which
# `_parse_check` reads itself: typer costs ~0.1 s of start-up and recent versions import pydantic to coerce
# parameters. Anything `_parse_check` is not sure of (help, a bad value, an unknown option) goes to typer, so
# help and usage errors are typer's, as before.
_CHECK_VALUES = {"--format": "output_format", "-f": "output_format", "--select": "select", "--ignore": "ignore",
                 "--world-size": "world_size", "--fail-level": "fail_level", "--config": "config",
                 "--deepspeed-version": "deepspeed_version", "--output": "output", "-o": "output",
                 "--jobs": "jobs", "-j": "jobs", "--max-file-size": "max_file_size",
                 "--context": "context"}
_CHECK_FLAGS = {"--exit-zero": "exit_zero", "--no-cache": "no_cache", "--sniff-json": "sniff_json",
                "--fix": "fix", "--unsafe-fixes": "unsafe_fixes", "--diff": "diff", "--fix-only": "fix_only",
                "--show-unproven": "show_unproven"}
# every error line: `dslint: error: …` when it concerns the run, `path[:line:col]: error: …` when it concerns a
# file (commands._error_line) -- one format, as compilers print them
_ERROR_PREFIX = "dslint: error: "
_MAIN_FLAGS = {"--debug"}      # taken out of every command line by `main` before either parser sees it


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
        elif key in ("config", "output", "context"):
            if not value:
                return None
            out[key] = Path(value)
        else:
            out[key] = value
    return out if out["paths"] else None


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


def _split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """`--debug` anywhere before a `--` (and not preflight's: its arguments belong to the script)."""
    end = argv.index("--") if "--" in argv else len(argv)
    if argv and argv[0] == "preflight" or "--debug" not in argv[:end]:
        return argv, False
    return [a for i, a in enumerate(argv) if a != "--debug" or i > end], True


def main(argv: Optional[list[str]] = None) -> int:
    """The `dslint` command (argv None: the process's own arguments; a `check` then ends the process itself,
    see `_end_process`)."""
    entry = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    rest, local_rank = _split_local_rank(argv)
    if rest and rest[0] == "preflight":
        return _run_preflight(rest[1:], local_rank)
    rest, debug = _split_debug(rest)
    if entry and rest and rest[0] == "check":
        import gc

        from dslint import commands
        gc.disable()                        # and not enabled again at the end of the run
        commands.PROCESS_ENDS_AFTER_RUN = True
        code = _main_guarded(rest, debug)
        if os.environ.get("DSLINT_TIMELINE"):
            from dslint.timeline import record_process
            record_process("check process (from its start)")
        _end_process(code)
    return _main_guarded(rest, debug)


def _end_process(code: int) -> None:
    """End a `dslint check` process without freeing what the run built: the output is flushed and the exit
    handlers run (the compiled-code cache is saved by one), then `os._exit`. The interpreter's own exit would
    free every syntax tree and index object by object, and the cyclic collector, off during the run
    (`Checker.check_sources`), would first walk them all again."""
    import atexit
    import gc
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                code = code or 1          # a closed pipe
    gc.disable()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main_guarded(rest: list[str], debug: bool) -> int:
    if debug:
        os.environ["DSLINT_DEBUG"] = "1"     # rules' internal errors print their traceback too (dslint/pipeline/rule_runs.py)
    try:
        return _main(rest)
    except Exception as exc:
        # no traceback reaches a user: one line and exit 3, the traceback with --debug
        if debug:
            import traceback
            traceback.print_exc()
        else:
            message = " ".join(str(exc).split())
            sys.stderr.write(f"{_ERROR_PREFIX}internal error: {type(exc).__name__}: {message[:500]} "
                             "(run again with --debug for the traceback)\n")
        sys.stderr.flush()
        return EXIT_INTERNAL


def _main(rest: list[str]) -> int:
    if rest and rest[0] == "check":
        parsed = _parse_check(rest[1:])
        if parsed is not None:
            return _run_check_directly(parsed)
    from dslint.cli_app import app
    try:
        code = app(args=rest, prog_name="dslint", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    except Exception as exc:
        # click's exceptions, by class name: typer vendors click from 0.26 on (`typer._click`), before it uses it
        kinds = {c.__name__ for c in type(exc).__mro__}
        if "NoArgsIsHelpError" in kinds:             # `dslint` alone: the help (click 8.2+)
            exc.show()
            return EXIT_USAGE
        if "Abort" in kinds:
            sys.stderr.write("\ndslint: interrupted\n")
            return 130
        if "ClickException" not in kinds:
            raise
        # a usage error: click's usage line and hint, then the error in the one format of dslint's errors
        # (`dslint: error: …`; a file's: `path:line:col: error: …`), not click's "Error: …"
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n" \
                if ctx.command.get_help_option(ctx) is not None else ""
            sys.stderr.write(f"{ctx.get_usage()}\n{hint}")
        sys.stderr.write(f"{_ERROR_PREFIX}{exc.format_message()}\n")
        return exc.exit_code if isinstance(getattr(exc, "exit_code", None), int) else EXIT_USAGE
    return code if isinstance(code, int) else EXIT_OK


def __getattr__(name: str):
    """`dslint.cli.app` and its enums, without importing typer for a plain `check`."""
    if name in ("app", "OutputFormat", "RulesFormat", "FailLevel"):
        from dslint import cli_app
        return getattr(cli_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
