"""The typer application behind `dslint` (help, usage errors, `rules`, `explain`, and `check` when its
command line is anything but plain: see `dslint.cli.main`). Imported only when needed: typer costs ~0.1 s
of start-up, and recent typer versions coerce every parameter through pydantic, which a Python-only
`dslint check` must not import."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import List, Optional

# plain help and errors: typer's rich formatting costs ~0.1 s of start-up
os.environ.setdefault("TYPER_USE_RICH", "0")
import typer  # noqa: E402

from dslint import __version__  # noqa: E402
from dslint.commands import _FAIL_LEVELS, _OUTPUT_FORMATS, EXIT_OK, EXIT_USAGE, _run_preflight, run_check  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="Find collective-communication hazards in DeepSpeed MoE/ZeRO setups before they hang.")


# the choices are the direct parser's (dslint.cli, from dslint.commands), so both accept the same values
OutputFormat = Enum("OutputFormat", {v: v for v in _OUTPUT_FORMATS}, type=str)
FailLevel = Enum("FailLevel", {v: v for v in _FAIL_LEVELS}, type=str)


class RulesFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dslint {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show the version and exit.")) -> None:
    pass


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
                                                            "nor the compiled-code cache ($DSLINT_CACHE_DIR, "
                                                            "default ~/.cache/dslint)."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0,
                             help="Worker processes for runs of 24 files or more (0: one per CPU, at most 4; "
                                  "1: none). Output is the same in any case (docs/performance.md)."),
    sniff_json: bool = typer.Option(False, "--sniff-json", help="Treat a JSON argument as a DeepSpeed config "
                                                                "only when it looks like one (pre-commit, "
                                                                "`git ls-files`)."),
    max_file_size: Optional[str] = typer.Option(None, "--max-file-size",
                                                help="Skip (with a message) files larger than this, e.g. 20M "
                                                     "(MiB; default: 2M for Python and shell, 1M for JSON); a "
                                                     "Python file within it is analysed whatever its size."),
    show_unproven: bool = typer.Option(False, "--show-unproven",
                                       help="Also report findings whose evidence is incomplete (no DeepSpeed engine, "
                                            "ZeRO-3/MoE config, DDP or MoE layer seen for them), marked "
                                            "[unproven]."),
    context: Optional[Path] = typer.Option(None, "--context",
                                           help="Check PATHS in the context of this folder's files (those git "
                                                "tracks in a repository) and report the findings in PATHS and "
                                                "those PATHS take part in elsewhere (the pre-commit hook: "
                                                "`--context .`)."),
    debug: bool = typer.Option(False, "--debug", help="Print the traceback of an internal error (read by "
                                                      "`dslint.cli.main` before this parser runs)."),
    fix: bool = typer.Option(False, "--fix", help="Apply the safe fixes, then report what remains."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="With --fix/--diff/--fix-only: also the "
                                                                    "unsafe fixes (they may change behaviour)."),
    diff: bool = typer.Option(False, "--diff", help="Print the fixes as a unified diff; write nothing (exit 1 "
                                                    "when there is a diff)."),
    fix_only: bool = typer.Option(False, "--fix-only", help="Apply the fixes and report nothing but the count "
                                                            "(exit 0 unless a file could not be written)."),
) -> None:
    """Check scripts and configs statically (never imports or runs them)."""
    raise typer.Exit(run_check(
        list(paths), output_format=output_format.value, select=select, ignore=ignore, world_size=world_size,
        fail_level=fail_level.value if fail_level else None, config=config, deepspeed_version=deepspeed_version,
        output=output, exit_zero=exit_zero, no_cache=no_cache, jobs=jobs, sniff_json=sniff_json,
        max_file_size=max_file_size, fix=fix, unsafe_fixes=unsafe_fixes, diff=diff, fix_only=fix_only,
        show_unproven=show_unproven, context=context))


@app.command()
def rules(output_format: RulesFormat = typer.Option(RulesFormat.text, "--format", "-f")) -> None:
    """List the rules (markdown: the generated docs/rules.md)."""
    import sys

    from dslint import ruledocs
    from dslint.rules import all_rules

    fn = {"text": ruledocs.text, "json": ruledocs.as_json, "markdown": ruledocs.markdown}[output_format.value]
    sys.stdout.write(fn(all_rules()))


@app.command()
def explain(code: str = typer.Argument(..., help="A rule code, e.g. DSL101, or its name.")) -> None:
    """Explain one rule: what it flags, why it hangs, the fix."""
    import sys

    from dslint import ruledocs
    from dslint.rules import all_rules, rule_by_code

    rule = rule_by_code(code) or next((r for r in all_rules() if r.name == code.lower()), None)
    if rule is None:
        typer.echo(f"dslint: error: unknown rule {code!r} (see `dslint rules`)", err=True)
        raise typer.Exit(EXIT_USAGE)
    sys.stdout.write(ruledocs.explain(rule))


@app.command()
def server(no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache "
                                                                   "nor the compiled-code cache.")) -> None:
    """Run the language server on stdin/stdout (LSP; needs the `server` extra: pip install 'dslint[server]').
    Editor set-ups: docs/editors.md."""
    from dslint.server import serve
    raise typer.Exit(serve(no_cache))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def preflight(ctx: typer.Context) -> None:
    """Run the script's first step on every rank under the collective tracer (launch with deepspeed/torchrun)."""
    # reached only through typer's help listing; main() dispatches preflight before typer parses anything
    raise typer.Exit(_run_preflight(list(ctx.args), None))
