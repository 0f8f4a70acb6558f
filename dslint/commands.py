"""What the commands do, apart from how their command lines are read (dslint.cli parses plain `check` lines
itself, dslint.cli_app -- typer -- everything else): `run_check`, `preflight`, and the exit codes.

Exit codes of `check`: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage error or an
input that could not be checked (missing path, bad config); 3 an internal error in a rule (the other rules'
findings are still printed) or of dslint itself (one line; `--debug` shows the traceback). `preflight` has its
own codes (docs/preflight.md).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

# set by dslint.cli when the process ends right after the command (dslint.cli._end_process): the run's state is
# then kept instead of freed, and the cyclic collector is left off
PROCESS_ENDS_AFTER_RUN = False

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_OUTPUT_FORMATS = ("text", "json", "sarif", "github")
_FAIL_LEVELS = ("warning", "error")


def _codes(values: Optional[List[str]]) -> List[str]:
    return [c.strip().upper() for v in values or [] for c in v.split(",") if c.strip()]


def _error(message: str) -> None:
    sys.stderr.write(" ".join(message.splitlines()) + "\n")
    sys.stderr.flush()


def _error_line(e) -> str:
    """An input error as one line: `path:line:col: error: message` (`path: skipped: reason` for a skipped file),
    the format of every error dslint prints (`dslint: error: …` for those of the run itself)."""
    where = e.path + (f":{e.line}:{e.column or 1}" if e.line else "")
    return f"{where}: {e.message}" if e.message.startswith("skipped: ") else f"{where}: error: {e.message}"


def unknown_codes(codes: List[str]) -> List[str]:
    """The codes or prefixes that name no rule (imports every rule family)."""
    from dslint.rules import all_rules
    known = [r.code for r in all_rules()]
    return [c for c in codes if c != "ALL" and not any(k.startswith(c) for k in known)]


def run_check(paths: List[Path], output_format: str = "text", select: Optional[List[str]] = None,
              ignore: Optional[List[str]] = None, world_size: Optional[int] = None, fail_level: Optional[str] = None,
              config: Optional[Path] = None, deepspeed_version: Optional[str] = None, output: Optional[Path] = None,
              exit_zero: bool = False, no_cache: bool = False, jobs: int = 0, sniff_json: bool = False,
              max_file_size: Optional[str] = None, fix: bool = False, unsafe_fixes: bool = False,
              diff: bool = False, fix_only: bool = False, show_unproven: bool = False,
              context: Optional[Path] = None) -> int:
    """`dslint check`: returns the exit code. `fix`/`fix_only`/`diff`: dslint.fixes (issue 22). `context`: the
    paths are checked in the context of that folder's files and the report keeps what concerns them
    (dslint.changed: the pre-commit hook)."""
    if output is not None and output.is_dir():
        _error(f"dslint: error: -o/--output {output}: is a folder; give a file to write the report to")
        return EXIT_USAGE
    if config is not None and config.is_dir():
        _error(f"dslint: error: --config {config}: is a folder; give a pyproject.toml or a TOML file")
        return EXIT_USAGE
    if context is not None:
        if not context.is_dir():
            _error(f"dslint: error: --context {context}: not a folder; give the repository's root (`.`)")
            return EXIT_USAGE
        if fix or fix_only or diff:
            _error("dslint: error: --context reports findings; it does not combine with --fix, --diff or "
                   "--fix-only")
            return EXIT_USAGE
    from dslint.cache import default_dir
    from dslint.codecache import install
    cache_dir = None if no_cache else default_dir()
    install(cache_dir)      # before libcst's ~200 dataclasses are built (dslint.codecache)
    from dslint.config import ConfigFileError, load_settings, parse_size
    from dslint.engine import Checker
    from dslint.findings import Severity

    try:
        settings = load_settings(config, list(paths))
    except ConfigFileError as exc:
        _error(f"dslint: error: {exc}")
        return EXIT_USAGE
    # codes of the configuration file, then of the command line: a misspelt code would silently turn every
    # rule off (`select`) or leave one on
    configured = [(f"[tool.dslint] {key}", codes) for key, codes in
                  (("select", settings.select), ("ignore", settings.ignore))] + \
        [(f"[tool.dslint.per-file-ignores] {pattern!r}", [c.upper() for c in codes])
         for pattern, codes in settings.per_file_ignores.items()]
    configured += [("--select", _codes(select)), ("--ignore", _codes(ignore))]
    for where, codes in configured:
        bad = unknown_codes(codes) if codes else []
        if bad:
            _error(f"dslint: error: {where}: unknown rule code or prefix {bad[0]!r} (see `dslint rules`)")
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
    if show_unproven:
        settings.show_unproven = True
    if max_file_size is not None:
        try:
            settings.max_file_size = parse_size(max_file_size)
        except ValueError as exc:
            _error(f"dslint: error: --max-file-size: {exc}")
            return EXIT_USAGE

    checker = Checker(settings, sniff_json=sniff_json, cache_dir=cache_dir, jobs=jobs,
                      file_timeout=_file_timeout(), ends_process=PROCESS_ENDS_AFTER_RUN)
    from dslint import progress
    progress.begin(output_format)      # on a terminal, text format: the phase and files done after ~1 s
    try:
        return _run(checker, settings, paths, output_format, output, exit_zero, sniff_json, fix, unsafe_fixes,
                    diff, fix_only, context)
    finally:
        progress.end()


def _run(checker, settings, paths, output_format, output, exit_zero, sniff_json, fix, unsafe_fixes, diff,
         fix_only, context) -> int:
    from dslint import progress
    from dslint.engine import fails
    from dslint.formats import render
    if fix or fix_only or diff:
        from dslint.fix_command import diffs, fix_run, held_back
        from dslint.formats.text import held_back_text
        with _interruptible():
            outcome, _written = fix_run(checker, list(paths), unsafe_fixes, write=not diff)
        progress.end()                  # erased before anything is written
        report = outcome.report
        held = held_back(report, unsafe_fixes)
        if diff or fix_only:
            if diff:
                sys.stdout.write(diffs(outcome))
                n = outcome.fixed
                line = f"Would fix {n} finding{'s' if n != 1 else ''}." if n else \
                    ("No safe fixes available." if held else "No fixes available.")
                _error(line + (" " + held_back_text(held, diff=True) if held else ""))
            else:
                from dslint.formats.text import fix_summary
                _error(fix_summary(report.fixes))
            for e in report.errors:
                _error(_error_line(e))
            if any(e.kind == "internal-error" for e in report.errors):
                return EXIT_INTERNAL
            if diff:       # 1: a diff to apply, or unsafe fixes held back (the diff shows only part of the fixes)
                return EXIT_FINDINGS if outcome.texts or held else EXIT_OK
            return EXIT_FINDINGS if report.fixes["not_written"] else EXIT_OK
    elif context is not None:
        from dslint.changed import keep_attributed, named_files, tracked_files
        named = named_files(paths)
        tracked = tracked_files(context)
        walked = None if tracked is None else (lambda p: os.path.realpath(p) in tracked
                                               or os.path.realpath(p) in named)
        with _interruptible():
            # the folder first: a named file inside it is read as a run on the folder reads it
            report = keep_attributed(checker.check_paths([context, *paths], walked=walked), named)
    else:
        with _interruptible():
            report = checker.check_paths(list(paths))
    progress.end()
    used = [type(r) for r in checker.rules]
    rendered = render(output_format, report, used)
    if output:
        try:
            output.write_text(rendered, encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            _error(f"dslint: error: -o/--output {output}: cannot write the report: {exc.strerror or exc}")
            return EXIT_USAGE
    else:
        try:
            sys.stdout.write(rendered)
        except UnicodeEncodeError:      # a terminal that cannot show some character: escaped, not a crash
            encoding = sys.stdout.encoding or "utf-8"
            sys.stdout.write(rendered.encode(encoding, "backslashreplace").decode(encoding))
    for e in report.errors:
        _error(_error_line(e))
    if any(e.kind == "internal-error" for e in report.errors):
        return EXIT_INTERNAL
    if any(e.kind in ("missing-path", "config") for e in report.errors):
        return EXIT_USAGE
    if report.files_checked == 0:
        if sniff_json:
            return EXIT_OK      # pre-commit / `git ls-files`: nothing staged that dslint checks
        _error("dslint: error: no input could be checked")
        return EXIT_USAGE
    if report.fixes is not None and report.fixes["not_written"]:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if fails(report, settings.fail_level) and not exit_zero else EXIT_OK


def _file_timeout() -> float:
    from dslint.engine import FILE_TIMEOUT
    value = os.environ.get("DSLINT_FILE_TIMEOUT", "")
    try:
        return max(0.0, float(value)) if value else FILE_TIMEOUT
    except ValueError:
        return FILE_TIMEOUT


@contextmanager
def _interruptible():
    """Ctrl-C (SIGINT) ends the run at once: the workers are killed and the process exits 130 without a
    traceback or a partial report. The handler runs between Python bytecodes, which libcst's parser and every
    analysis execute continually, so it never waits for a file to finish."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum, frame):
        from dslint.forkpool import kill_children
        kill_children()
        try:
            os.write(2, b"dslint: interrupted\n")
        finally:
            os._exit(130)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_preflight(argv: list[str], local_rank: Optional[int]) -> int:
    from dslint.runtime_checks.cli import main as preflight_main
    return preflight_main(argv, local_rank)
