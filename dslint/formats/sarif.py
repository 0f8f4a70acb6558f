"""SARIF 2.1.0 (validated against the OASIS schema in the tests)."""

from __future__ import annotations

import json
from pathlib import Path

from dslint import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
DOCS = "https://github.com/dslint/dslint/blob/main/docs/rules.md"


def _rule_entry(rule) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.documentation() or rule.summary},
        "help": {"text": rule.fix_advice or rule.summary},
        "helpUri": f"{DOCS}#{rule.code.lower()}-{rule.name}",
        "defaultConfiguration": {"level": "error" if rule.severity.value == "error" else "warning"},
    }


def _fix_entry(fix) -> dict:
    """A SARIF 2.1.0 `fix`: its edits grouped per file as replacements (an insertion deletes an empty region)."""
    changes: dict[str, list] = {}
    for e in fix.edits:
        changes.setdefault(e.path, []).append({
            "deletedRegion": {"startLine": e.line, "startColumn": e.column, "endLine": e.end_line,
                              "endColumn": e.end_column},
            "insertedContent": {"text": e.content}})
    return {"description": {"text": f"{fix.description} [{fix.applicability}]"},
            "artifactChanges": [{"artifactLocation": {"uri": Path(path).as_posix()}, "replacements": reps}
                                for path, reps in changes.items()]}


def render(report, rules) -> str:
    rules = list(rules)
    index = {r.code: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        result = {
            "ruleId": f.code,
            "level": "error" if f.severity.value == "error" else "warning",
            "message": {"text": f.message + (f"\nFix: {f.fix.description}" if f.fix else "")},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": Path(f.path).as_posix()},
                "region": {"startLine": f.line, "startColumn": f.column,
                           "endLine": f.end_line, "endColumn": f.end_column},
            }}],
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        fixes = [fx for fx in ([f.fix] + list(f.fix.alternatives) if f.fix else []) if fx.edits]
        if fixes:
            result["fixes"] = [_fix_entry(fx) for fx in fixes]
        if f.trace:
            result["codeFlows"] = [{"threadFlows": [{"locations": [
                {"location": {"physicalLocation": {"artifactLocation": {"uri": Path(t.path).as_posix()},
                                                   "region": {"startLine": t.line}},
                              "message": {"text": t.note}}} for t in f.trace]}]}]
        # issue 30: what the finding rests on, and whether that evidence is complete
        result["properties"] = {"proven": f.proven,
                                "evidence": [e.model_dump(mode="json") for e in f.evidence]}
        results.append(result)
    notifications = [{"level": "error", "message": {"text": e.message},
                      "locations": [{"physicalLocation": {"artifactLocation": {"uri": Path(e.path).as_posix()}}}]}
                     for e in report.errors]
    run = {
        "tool": {"driver": {"name": "dslint", "version": __version__, "informationUri": DOCS,
                            "rules": [_rule_entry(r) for r in rules]}},
        "results": results,
        "invocations": [{"executionSuccessful": not any(e.kind == "internal-error" for e in report.errors),
                         "toolExecutionNotifications": notifications}],
    }
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"
