"""Stage 5 of a check (`dslint.pipeline`): the report. The errors of rule families that failed to load, the
DSL001 of files that could not be decoded, the findings in order, the settings the run assumed, and the
findings whose evidence is incomplete left out (counted as hidden) unless `--show-unproven`."""

from __future__ import annotations

from dslint.config import Settings
from dslint.findings import Finding, InputError, Report
from dslint.program.project_view import ProjectView
from dslint.rules.base import Rule


def family_errors() -> list[InputError]:
    """An internal error for every rule family that failed to import."""
    from dslint.rules import FAMILY_ERRORS
    return [InputError(kind="internal-error", path=family.replace(".", "/") + ".py",
                       message=f"rule family {family} failed to load: {message}") for family, message in FAMILY_ERRORS]


def undecodable_findings(undecodable: list, rules: list[Rule], settings: Settings) -> list[Finding]:
    """DSL001 of each file that could not be decoded ((shown path, kind, problem)), where DSL001 is enabled."""
    parse_rule = next((r for r in rules if r.code == "DSL001"), None) if settings.code_enabled("DSL001") else None
    if parse_rule is None:
        return []
    return [Finding(code="DSL001", name=parse_rule.name, severity=parse_rule.severity, path=shown,
                    line=problem.line, column=problem.column, end_line=problem.line, end_column=problem.column,
                    message=problem.message) for shown, _kind, problem in undecodable]


def finish(report: Report, project: ProjectView, settings: Settings) -> None:
    """Sort the findings, record the settings the run assumed, leave out the unproven ones (unless shown)."""
    report.findings.sort(key=Finding.sort_key)
    report.settings = project.settings_summary()
    if not settings.show_unproven:
        # findings whose evidence is incomplete (issue 30): cached with the others, left out of the report
        shown = [f for f in report.findings if f.proven]
        report.hidden = len(report.findings) - len(shown)
        report.findings = shown
