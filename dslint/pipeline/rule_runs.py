"""Stage 4 of a check (`dslint.pipeline`): the rules on one file, in the view it is checked in. Every enabled
rule that applies to the file's kind runs (those that need ranks are skipped where the file runs as one
process); a rule that raises is that file's and rule's internal error, the other rules' findings stand; a
diagnostic becomes a `Finding` (located, with its family's evidence, suppressions applied); unused
suppressions are DSL002. The whole file's analysis has a time budget (`FILE_TIMEOUT`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dslint.config import Settings
from dslint.findings import Evidence, Finding, Fix, InputError, Report, TraceStep
from dslint.program.project_view import ProjectView
from dslint.rules.base import Diagnostic, Rule, RuleContext, span_of
from dslint.sources import AnySource, PythonSource
from dslint.suppressions import parse_suppressions

FILE_TIMEOUT = 60.0            # seconds of analysis per file (DSLINT_FILE_TIMEOUT; 0: none): past it, the file is
                               # reported as skipped and the run goes on
TRANSIENT = ("could not be analysed: skipped", "could not be analysed: the process")   # not cached
CRASH_SIGNALS = {int(getattr(signal, n)) for n in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")
                 if hasattr(signal, n)}


class Cancelled(Exception):
    """A run `Checker.interrupt` stopped (a newer edit made it stale: the language server, dslint.server)."""


def stop_if_stale(interrupt) -> None:
    """Raise Cancelled where `interrupt` (a callable, or None) says a newer run has made this one stale: asked
    between phases, files and rules, points where no source is half-built."""
    if interrupt is not None and interrupt():
        raise Cancelled()


class AnalysisTimeout(BaseException):
    """Raised (by SIGALRM) in the analysis of one file that runs past its budget. A BaseException, so that the
    per-rule `except Exception` of `RuleRun.check_one` does not take it for a rule's failure."""


@contextmanager
def time_budget(seconds: float):
    """Raise AnalysisTimeout in the body once `seconds` have passed (main thread, POSIX; elsewhere no budget).
    Pure-Python code and libcst's parser (which builds its nodes in Python) both let the signal through."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise AnalysisTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def judging(settings: Settings) -> bool:
    """DSL002 judges a suppression only by the rules it names having run: when it is selected, every default
    rule that is not ignored runs as a judge, and findings of codes not selected are dropped after they have
    marked the suppressions they hit (`--select DSL002` alone reports the unused ones)."""
    return "DSL002" in settings.select and settings.code_enabled("DSL002")


@dataclass
class RuleRun:
    """The rules of a run applied to one file at a time: what a serial run and every forked worker call."""
    settings: Settings
    rules: list[Rule]
    file_timeout: float = FILE_TIMEOUT     # seconds of analysis per file; 0: no budget
    interrupt: Optional[object] = None     # `Checker.interrupt`: asked between files and rules

    @property
    def _judging(self) -> bool:
        return judging(self.settings)

    def results_for(self, source: AnySource, project: ProjectView) -> tuple[list[Finding], list[InputError]]:
        partial = Report()
        try:
            with time_budget(self.file_timeout):
                self.check_one(source, project, partial)
        except AnalysisTimeout:
            # whatever the rules had found is dropped with the rest: a partial answer would read as complete
            partial = Report(findings=[self.not_analysed(
                source, f"skipped: analysis exceeded {self.file_timeout:g} s")])
            return partial.findings, partial.errors
        if project.units and isinstance(source, PythonSource):
            for finding in partial.findings:
                name_units(finding, source, project.units, project._units_reaching, project._unit_files)
        return partial.findings, partial.errors

    def not_analysed(self, source: AnySource, reason: str) -> Finding:
        """DSL001 for a file whose analysis could not finish (reported even when DSL001 is not selected: the
        file's other findings are missing)."""
        from dslint.rules.parse import ParseError
        return Finding(code="DSL001", name=ParseError.name, severity=ParseError.severity, path=source.path,
                       line=1, column=1, end_line=1, end_column=1, message=f"could not be analysed: {reason}",
                       fix=Fix(description="Split the file, or raise DSLINT_FILE_TIMEOUT (seconds per file)."
                               if reason.startswith("skipped") else "Report it to dslint with the file."))

    def check_one(self, source: AnySource, project: ProjectView, report: Report) -> None:
        suppressions = parse_suppressions(source.text, source.kind)
        errors_before = len(report.errors)
        per_file = self.settings.ignored_for(source.path)
        broken = source.parse_problem() is not None
        ctx = RuleContext(source, project)
        one_process = None
        one_run = None          # the clues of a program started only by plain `python x.py` commands
        plugin_run = None       # the clues of a plugin module of a program that creates no process group
        for rule in self.rules:
            if source.kind not in rule.kinds or (broken and rule.code != "DSL001"):
                continue
            stop_if_stale(self.interrupt)       # between rules too: what a rule computed is whole when it returns
            if rule.needs_ranks:
                if one_process is None:
                    one_process = project.runs_one_process(source)
                if one_process:
                    continue
            try:
                if not rule.wants(ctx):
                    continue
                diagnostics = list(rule.check(ctx))
                for diag in diagnostics:
                    if not diag.evidence:
                        _family_evidence(rule, ctx, diag)
                    if diag.proven and (rule.needs_ranks or (diag.code or rule.code) == "DSL303"):
                        if one_run is None:
                            from dslint.rules.evidence import one_process_clues
                            one_run = one_process_clues(ctx.program, source)
                        if not one_run:
                            if plugin_run is None:
                                from dslint.rules.evidence import plugin_clues
                                plugin_run = plugin_clues(ctx.program, source)
                            if plugin_run:
                                diag.proven = False
                                diag.evidence = list(diag.evidence) + plugin_run
                        if one_run:
                            diag.proven = False
                            diag.evidence = list(diag.evidence) + one_run
                    if diag.proven and (diag.code or rule.code)[:4] in _REACHED_FAMILIES:
                        from dslint.rules.evidence import unreached_clues
                        unreached = unreached_clues(ctx.program, source, diag)
                        if unreached:
                            diag.proven = False
                            diag.evidence = list(diag.evidence) + unreached
                    if diag.proven and not (diag.code or rule.code).startswith("DSL0"):
                        from dslint.rules.evidence import dead_branch_clues
                        dead = dead_branch_clues(ctx.program, source, diag)
                        if dead:
                            diag.proven = False
                            diag.evidence = list(diag.evidence) + dead
            except Exception as exc:  # a broken rule must not lose the other rules' findings
                report.errors.append(_internal_error(rule, source.path, exc))
                continue
            for diag in diagnostics:
                code = diag.code or rule.code
                enabled = self.settings.code_enabled(code)
                if code in per_file or not enabled and not self._judging:
                    continue
                try:
                    finding = _finding(rule, diag, source)
                except Exception as exc:
                    report.errors.append(_internal_error(rule, source.path, exc))
                    continue
                if finding.path == source.path and suppressions.covers(code, finding.line):
                    continue
                if enabled:
                    report.findings.append(finding)
        if not broken and source.parse_problem() is not None:
            # libcst rejected, when a rule read the tree, a file CPython compiles: the rules saw an empty module
            parse_rule = next((r for r in self.rules if r.code == "DSL001"), None)
            if parse_rule is not None and "DSL001" not in per_file:
                finding = _finding(parse_rule, next(iter(parse_rule.check(ctx))), source)
                if not suppressions.covers("DSL001", finding.line) and self.settings.code_enabled("DSL001"):
                    report.findings.append(finding)
        if not broken:      # the rules did not run on a file that does not parse: nothing to judge by
            self._report_unused(source, suppressions, per_file, report, errors_before)

    def _report_unused(self, source: AnySource, suppressions, per_file: set[str], report: Report,
                       errors_before: int) -> None:
        """DSL002: directives that suppressed nothing, judged only when every rule they name ran cleanly."""
        rule = next((r for r in self.rules if r.code == "DSL002"), None)
        if rule is None or "DSL002" in per_file or source.kind not in rule.kinds \
                or len(report.errors) > errors_before:
            return
        ran = {r.code for r in self.rules}
        for d in suppressions.unused():
            if "*" not in d.codes and not d.codes <= ran:
                continue
            what = "any finding" if "*" in d.codes else ", ".join(sorted(d.codes))
            scope = "in this file" if d.file_level else "on its line" + (" or the next" if len(d.targets) > 1 else "")
            diag = Diagnostic(f"unused suppression: no {what} {scope} to suppress", (d.line, d.column))
            if not suppressions.covers("DSL002", d.line):
                report.findings.append(_finding(rule, diag, source))


def _internal_error(rule: Rule, path: str, exc: BaseException) -> InputError:
    if os.environ.get("DSLINT_DEBUG") == "1":       # `dslint --debug`
        sys.stderr.write(f"{path}: rule {rule.code}:\n" + "".join(traceback.format_exception(exc)))
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
    return InputError(kind="internal-error", path=path, code=rule.code,
                      message=f"internal error in rule {rule.code} {rule.name}: {type(exc).__name__}: {exc}{where}")


_UNIT_FAMILIES = ("DSL1", "DSL2", "DSL3")


def name_units(finding: Finding, source: PythonSource, units: list, reaching: Optional[dict] = None,
               files: Optional[dict] = None) -> None:
    """A collective-hazard finding in a module that launch units import says which of them make it
    hazardous: those holding a file its trace or message cites (else every unit that reaches the file).
    Nothing is added in the entry script itself. `reaching`: id(file) -> the units holding it, and `files`:
    id(file) -> file, over every file of `units` (`ProjectView._units_reaching`, `_unit_files`): each file
    is then tested once, not once per unit holding it (a package module's findings in a view of 400 launch
    units)."""
    if not finding.code.startswith(_UNIT_FAMILIES) or any(u.entry is source for u in units):
        return
    cited = {step.path for step in finding.trace} | {finding.path}
    if reaching is None or files is None:
        named = [u for u in units if any(f.path in cited or f.path in finding.message for f in u.files
                                         if f is not source)]
    else:
        chosen: set[int] = set()
        for key, f in files.items():
            if f is not source and (f.path in cited or f.path in finding.message):
                chosen.update(id(u) for u in reaching.get(key, ()))
        named = [u for u in units if id(u) in chosen]
    named = named or units
    for unit in named[:3]:
        if unit.launches:
            sh, launch = unit.launches[0]
            where, line = sh.path, launch.line
        else:
            where, line = unit.entry.path, 1
        finding.trace.append(TraceStep(path=where, line=line, note=f"hazardous when {unit.entry.path} runs"
                                       + (f" (launched by {sh.path}:{line})" if unit.launches else "")))
    if len(named) > 3:
        finding.trace.append(TraceStep(path=named[3].entry.path, line=1, note=f"and {len(named) - 3} more launch units"))


def _family_rule(rule: Rule, code: str) -> Optional[type[Rule]]:
    """The class of a code emitted by another rule of the same family (without importing every family)."""
    module = sys.modules.get(type(rule).__module__)
    return next((obj for obj in vars(module).values() if isinstance(obj, type) and issubclass(obj, Rule)
                 and getattr(obj, "code", None) == code), None) if module else None


# the families whose findings are about code a program runs: unproven where no program reaches that code
_REACHED_FAMILIES = ("DSL1", "DSL2", "DSL3")


def _finding(rule: Rule, diag: Diagnostic, source: AnySource) -> Finding:
    from dslint.rules import rule_by_code

    where = diag.source or source
    span = span_of(where, diag.at)
    code = diag.code or rule.code
    owner = type(rule) if code == rule.code else (_family_rule(rule, code) or rule_by_code(code) or type(rule))
    trace = []
    for hop in diag.trace:
        hop_src = hop.source or source
        trace.append(TraceStep(path=hop_src.path, line=span_of(hop_src, hop.at).line, note=hop.note))
    fix = diag.fix
    if fix is None and owner.fix_advice:
        fix = Fix(description=owner.fix_advice)
    return Finding(code=code, name=owner.name, severity=diag.severity or owner.severity, path=where.path,
                   line=span.line, column=span.column, end_line=max(span.end_line, span.line),
                   end_column=span.end_column if span.end_line > span.line else max(span.end_column, span.column),
                   message=diag.message, trace=trace, fix=fix, evidence=_evidence(diag, source), proven=diag.proven)


def _family_evidence(rule: Rule, ctx: RuleContext, diag: Diagnostic) -> None:
    """Evidence for a diagnostic its rule gave none (`dslint.rules.evidence.family_evidence`)."""
    from dslint.rules.evidence import family_evidence
    clues, proven = family_evidence(diag.code or rule.code, ctx, diag)
    diag.evidence = clues
    if proven is not None:
        diag.proven = diag.proven and proven


def _evidence(diag: Diagnostic, source: AnySource) -> list[Evidence]:
    """The diagnostic's clues (`rules.base.Clue`, or anything with its fields: `collective_sites.Fact`) as
    located evidence, in order, without repeats."""
    out: list[Evidence] = []
    seen: set[tuple] = set()
    for clue in diag.evidence:
        path, line = clue.path, None
        number = clue.at if isinstance(clue.at, int) and not isinstance(clue.at, bool) else None
        if clue.source is not None or clue.at is not None and clue.path is None:
            where = clue.source or source
            path = where.path
            if number is not None:
                line = number
            elif clue.at is not None:
                try:
                    line = span_of(where, clue.at).line
                except Exception:
                    line = None
        elif number is not None:
            line = number
        key = (clue.kind, clue.note, path, line, clue.found)
        if key not in seen:
            seen.add(key)
            out.append(Evidence(kind=clue.kind, note=clue.note, path=path, line=line, found=clue.found))
    return out
