"""Command line: `dslint check`, `dslint rules`, `dslint explain`, `dslint preflight`.

Exit codes of `check`: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage error or an
input that could not be checked (missing path, bad config); 3 an internal error in a rule (the other rules'
findings are still printed). `preflight` has its own codes (docs/preflight.md).
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

# plain help and errors: typer's rich formatting costs ~0.1 s of start-up on every pre-commit run
os.environ.setdefault("TYPER_USE_RICH", "0")
import typer  # noqa: E402

from dslint import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="Find collective-communication hazards in DeepSpeed MoE/ZeRO setups before they hang.")


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class RulesFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class FailLevel(str, Enum):
    warning = "warning"
    error = "error"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dslint {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show the version and exit.")) -> None:
    pass


def _codes(values: Optional[List[str]]) -> List[str]:
    return [c.strip().upper() for v in values or [] for c in v.split(",") if c.strip()]


@app.command()
def check(
    paths: List[Path] = typer.Argument(..., help="Python scripts, DeepSpeed JSON configs, launcher shell scripts, "
                                                 "or folders to walk."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="Output format."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Only these codes or prefixes (DSL1,DSL203)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Skip these codes or prefixes."),
    world_size: Optional[int] = typer.Option(None, "--world-size", min=1, help="Number of ranks the job runs on."),
    fail_level: Optional[FailLevel] = typer.Option(None, "--fail-level", help="Lowest severity that fails the run."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pyproject.toml/TOML with [tool.dslint]."),
    deepspeed_version: Optional[str] = typer.Option(None, "--deepspeed-version",
                                                    help="DeepSpeed version the job runs (default: project pin, "
                                                         "then the installed one)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to a file."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings are reported "
                                                              "(usage and internal errors still fail)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache "
                                                            "($DSLINT_CACHE_DIR, default ~/.cache/dslint)."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0,
                             help="Worker processes for runs of 24 files or more (0: one per CPU, at most 4; "
                                  "1: none). Output is the same in any case (docs/performance.md)."),
    sniff_json: bool = typer.Option(False, "--sniff-json", help="Treat a JSON argument as a DeepSpeed config "
                                                                "only when it looks like one (pre-commit, "
                                                                "`git ls-files`)."),
) -> None:
    """Check scripts and configs statically (never imports or runs them)."""
    from dslint.config import ConfigFileError, load_settings
    from dslint.engine import Checker, fails
    from dslint.findings import Severity
    from dslint.formats import render
    from dslint.rules import all_rules, rule_by_code

    try:
        settings = load_settings(config, list(paths))
    except ConfigFileError as exc:
        typer.echo(f"dslint: error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE)
    for code in _codes(select) + _codes(ignore):     # imports every family only when codes are given
        if code != "ALL" and not any(r.code.startswith(code) for r in all_rules()):
            typer.echo(f"dslint: error: unknown rule code or prefix {code!r} (see `dslint rules`)", err=True)
            raise typer.Exit(EXIT_USAGE)
    if select:
        settings.select = _codes(select)
    if ignore:
        settings.ignore = settings.ignore + _codes(ignore)
    if world_size:
        settings.world_size = world_size
    if fail_level:
        settings.fail_level = Severity(fail_level.value)
    if deepspeed_version:
        settings.deepspeed_version = deepspeed_version

    from dslint.cache import default_dir
    checker = Checker(settings, sniff_json=sniff_json, cache_dir=None if no_cache else default_dir(), jobs=jobs)
    report = checker.check_paths(list(paths))
    used = [type(r) for r in checker.rules]
    rendered = render(output_format.value, report, used)
    if output:
        output.write_text(rendered)
    else:
        sys.stdout.write(rendered)
    if report.errors:
        for e in report.errors:
            where = e.path + (f":{e.line}:{e.column or 1}" if e.line else "")
            typer.echo(f"{where}: error: {e.message}", err=True)
    if any(e.kind == "internal-error" for e in report.errors):
        raise typer.Exit(EXIT_INTERNAL)
    if any(e.kind in ("missing-path", "config") for e in report.errors) or report.files_checked == 0:
        if report.files_checked == 0:
            typer.echo("dslint: error: no input could be checked", err=True)
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_FINDINGS if fails(report, settings.fail_level) and not exit_zero else EXIT_OK)


@app.command()
def rules(output_format: RulesFormat = typer.Option(RulesFormat.text, "--format", "-f")) -> None:
    """List the rules (markdown: the generated docs/rules.md)."""
    from dslint import ruledocs
    from dslint.rules import all_rules

    fn = {"text": ruledocs.text, "json": ruledocs.as_json, "markdown": ruledocs.markdown}[output_format.value]
    sys.stdout.write(fn(all_rules()))


@app.command()
def explain(code: str = typer.Argument(..., help="A rule code, e.g. DSL101, or its name.")) -> None:
    """Explain one rule: what it flags, why it hangs, the fix."""
    from dslint import ruledocs
    from dslint.rules import all_rules, rule_by_code

    rule = rule_by_code(code) or next((r for r in all_rules() if r.name == code.lower()), None)
    if rule is None:
        typer.echo(f"dslint: error: unknown rule {code!r} (see `dslint rules`)", err=True)
        raise typer.Exit(EXIT_USAGE)
    sys.stdout.write(ruledocs.explain(rule))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def preflight(ctx: typer.Context) -> None:
    """Run the script's first step on every rank under the collective tracer (launch with deepspeed/torchrun)."""
    # reached only through typer's help listing; main() dispatches preflight before typer parses anything
    raise typer.Exit(_run_preflight(list(ctx.args), None))


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
    try:
        app(args=rest, prog_name="dslint", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    return EXIT_OK
