"""GitHub Actions workflow commands: one annotation per finding."""

from __future__ import annotations


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report, rules) -> str:
    lines = []
    for f in report.findings:
        level = "error" if f.severity.value == "error" else "warning"
        props = (f"file={_escape_property(f.path)},line={f.line},col={f.column},endLine={f.end_line},"
                 f"endColumn={f.end_column},title={_escape_property(f'{f.code} {f.name}')}")
        lines.append(f"::{level} {props}::{_escape_data(f'{f.code} {f.message}')}")
    for e in report.errors:
        line = f",line={e.line}" if e.line else ""
        lines.append(f"::error file={_escape_property(e.path)}{line}::{_escape_data(e.message)}")
    return "\n".join(lines) + ("\n" if lines else "")
