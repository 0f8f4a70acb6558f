"""GitHub Actions workflow commands: one annotation per finding."""

from __future__ import annotations


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report, rules) -> str:
    from dslint.formats.text import evidence_text
    lines = []
    for f in report.findings:
        level = "error" if f.severity.value == "error" else "warning"
        title = f"{f.code} {f.name}" + ("" if f.proven else " (unproven)")
        props = (f"file={_escape_property(f.path)},line={f.line},col={f.column},endLine={f.end_line},"
                 f"endColumn={f.end_column},title={_escape_property(title)}")
        message = f"{f.code} {f.message}"
        found = [e for e in f.evidence if e.found]
        missing = [e for e in f.evidence if not e.found]
        if found:
            message += f"\nEvidence: {evidence_text(found)}"
        if missing:
            message += f"\nNot seen: {evidence_text(missing)}"
        lines.append(f"::{level} {props}::{_escape_data(message)}")
    for e in report.errors:
        line = f",line={e.line}" if e.line else ""
        lines.append(f"::error file={_escape_property(e.path)}{line}::{_escape_data(e.message)}")
    return "\n".join(lines) + ("\n" if lines else "")
