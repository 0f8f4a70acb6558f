"""What the commands do, apart from how their command lines are read (dslint.cli parses plain `check` lines
itself, dslint.cli_app -- typer -- everything else): `run_check`, `preflight`, and the exit codes.

Exit codes of `check`: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage error or an
input that could not be checked (missing path, bad config); 3 an internal error in a rule (the other rules'
findings are still printed). `preflight` has its own codes (docs/preflight.md).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_OUTPUT_FORMATS = ("text", "json", "sarif", "github")
_FAIL_LEVELS = ("warning", "error")


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

    checker = Checker(settings, sniff_json=sniff_json, cache_dir=cache_dir, jobs=jobs,
                      file_timeout=_file_timeout())
    with _interruptible():
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
