"""Human output like ruff's `full` format: file:line:col, code, message, a code frame, the chain and the fix."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


# characters that end a line for str.splitlines() but not for Python or a shell (they may stand in a comment or a
# string): each shown as one character, so the frame's caret stays under its column
_SHOWN = str.maketrans({"\f": "␌", "\v": "␋", "\x1c": "␜", "\x1d": "␝", "\x1e": "␞", "\x85": "␤",
                        "\u2028": "␤", "\u2029": "¶"})


@lru_cache(maxsize=64)
def _lines(path: str) -> list[str]:
    """The file's lines as findings number them (`physical_lines`: `\n`, `\r\n`, `\r` only)."""
    from dslint.sources.astsplice import physical_lines
    try:
        return [line.translate(_SHOWN) for line in physical_lines(Path(path).read_text(errors="replace"))]
    except OSError:
        return []


WIDTH = 160          # characters of a source line shown in a code frame (a generated line can be megabytes)


def _cut(text: str, start: int) -> str:
    shown = text[start:start + WIDTH]
    return ("…" if start else "") + shown + ("…" if start + WIDTH < len(text) else "")


def _frame(path: str, line: int, column: int, end_line: int, end_column: int, color: bool) -> list[str]:
    lines = _lines(path)
    if not lines or line > len(lines):
        return []
    out = []
    width = len(str(min(line + 1, len(lines))))
    # the window every line of the frame is cut to: from a little before the column
    start = max(0, min(column - 1 - WIDTH // 4, len(lines[line - 1]) - WIDTH))
    for n in range(max(1, line - 1), min(len(lines), line + 1) + 1):
        out.append(f"  {n:>{width}} | {_cut(lines[n - 1], start)}")
        if n == line:
            stop = end_column if end_line == line and end_column > column else len(lines[n - 1]) + 1
            lead = 1 if start else 0                     # the "…" before the window
            first = column - start + lead
            last = min(stop - start + lead, lead + WIDTH + 1)
            marks = "^" * max(1, last - first)
            if color:
                marks = f"\x1b[31m{marks}\x1b[0m"
            out.append(f"  {' ' * width} | {' ' * (first - 1)}{marks}")
    return out


def render(report, rules, color: bool | None = None) -> str:
    if color is None:
        color = os.environ.get("FORCE_COLOR") is not None or (os.isatty(1) and "NO_COLOR" not in os.environ)
    bold = (lambda s: f"\x1b[1m{s}\x1b[0m") if color else (lambda s: s)
    red = (lambda s: f"\x1b[31m{s}\x1b[0m") if color else (lambda s: s)
    yellow = (lambda s: f"\x1b[33m{s}\x1b[0m") if color else (lambda s: s)
    out: list[str] = []
    for f in report.findings:
        sev = red(f.severity.value) if f.severity.value == "error" else yellow(f.severity.value)
        mark = "" if f.proven else ", " + yellow("unproven")
        out.append(f"{bold(f'{f.path}:{f.line}:{f.column}')}: {bold(f.code)} [{sev}{mark}] {f.message}")
        out.extend(_frame(f.path, f.line, f.column, f.end_line, f.end_column, color))
        for step in f.trace:
            out.append(f"  = via {step.path}:{step.line}: {step.note}")
        out.extend(evidence_lines(f))
        if f.fix:
            how = {"safe": " [fix: --fix]", "unsafe": " [fix: --fix --unsafe-fixes]",
                   "display": " [suggested edit: --format json]"}.get(f.fix.applicability, "")
            out.append(f"  = help: {f.fix.description}{how}")
        out.append("")
    n = len(report.findings)
    errors = sum(1 for f in report.findings if f.severity.value == "error")
    summary = (f"Found {n} finding{'s' if n != 1 else ''} ({errors} error{'s' if errors != 1 else ''}, "
               f"{n - errors} warning{'s' if n - errors != 1 else ''}) in {report.files_checked} "
               f"file{'s' if report.files_checked != 1 else ''}.") if n else \
        ("No files were checked." if not report.files_checked else "") or \
        f"All checks passed ({report.files_checked} file{'s' if report.files_checked != 1 else ''})."
    out.append(summary)
    hidden = getattr(report, "hidden", 0)
    if hidden:
        out.append(f"{hidden} finding{'s' if hidden != 1 else ''} with incomplete evidence not shown "
                   f"(--show-unproven shows {'them' if hidden != 1 else 'it'}).")
    if report.fixes is not None:
        out.append(fix_summary(report.fixes))
    return "\n".join(out) + "\n"


def evidence_text(items) -> str:
    """`engine: created by deepspeed.initialize (train.py:12); zero-stage: ZeRO-3 (ds.json:4)`."""
    return "; ".join(f"{e.kind}: {e.note}" + (f" ({e.where()})" if e.where() else "") for e in items)


def evidence_lines(f) -> list[str]:
    """A finding's evidence in one line, and what it needed but was not seen in another."""
    out = []
    found = [e for e in f.evidence if e.found]
    missing = [e for e in f.evidence if not e.found]
    if found:
        out.append(f"  = evidence: {evidence_text(found)}")
    if missing:
        out.append(f"  = not seen: {evidence_text(missing)}")
    return out


def fix_summary(fixes: dict) -> str:
    n, left = fixes.get("applied", 0), fixes.get("remaining", 0)
    line = f"Fixed {n} finding{'s' if n != 1 else ''} ({left} remaining)."
    if fixes.get("not_written"):
        line += f" Not written: {', '.join(fixes['not_written'])}."
    held = fixes.get("unsafe_held_back", 0)
    if held:
        line += " " + held_back_text(held)
    return line


def held_back_text(held: int, diff: bool = False) -> str:
    """`3 unsafe fixes held back (they may change what the job does): apply them with --fix --unsafe-fixes.`"""
    them = "them" if held != 1 else "it"
    how = f"see {them} with --diff --unsafe-fixes, apply {them} with --fix --unsafe-fixes" if diff else \
        f"apply {them} with --fix --unsafe-fixes"
    return (f"{held} unsafe fix{'es' if held != 1 else ''} held back ({'they' if held != 1 else 'it'} may change what "
            f"the job does): {how}.")
