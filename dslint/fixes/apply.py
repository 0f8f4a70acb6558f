"""Applying fixes to file texts: which fixes a run may apply, merging one file's edits, and the iteration
to a fixed point.

As ruff does: the fixes of one round are taken in order of their first edit; a fix whose edits overlap an
edit already taken this round is left for the next round (after a re-check of the changed texts, its
finding may be gone or its edits recomputed on the new text). Identical edits (two findings adding the same
import) are applied once. Rounds repeat until no applicable fix is left, at most MAX_ROUNDS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from dslint.findings import Edit, Finding, Fix, Report

MAX_ROUNDS = 10


def applicable(fix: Optional[Fix], unsafe: bool) -> bool:
    if fix is None or not fix.edits:
        return False
    return fix.applicability == "safe" or (unsafe and fix.applicability == "unsafe")


def line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def _offset(starts: list[int], text: str, line: int, column: int) -> int:
    if not 1 <= line <= len(starts):
        raise ValueError(f"edit at line {line}, the text has {len(starts)} lines")
    at = starts[line - 1] + column - 1
    limit = starts[line] - 1 if line < len(starts) else len(text)     # the line's "\n", or the end
    if at > limit:
        raise ValueError(f"edit at {line}:{column} is past the end of its line")
    return at


def offsets(text: str, edit: Edit, starts: Optional[list[int]] = None) -> tuple[int, int]:
    starts = starts or line_starts(text)
    a = _offset(starts, text, edit.line, edit.column)
    b = _offset(starts, text, edit.end_line, edit.end_column)
    if b < a:
        raise ValueError("edit ends before it starts")
    return a, b


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits of one file (positions in `text`)."""
    starts = line_starts(text)
    spans = sorted({(*offsets(text, e, starts), e.content) for e in edits})
    out, at = [], 0
    for a, b, content in spans:
        if a < at:
            raise ValueError("overlapping edits")
        out.append(text[at:a])
        out.append(content)
        at = b
    out.append(text[at:])
    return "".join(out)


def _overlaps(span: tuple[int, int, str], taken: list[tuple[int, int, str]]) -> bool:
    a, b, content = span
    for c, d, other in taken:
        if (a, b, content) == (c, d, other):
            continue                        # the same edit: applied once
        if a < d and c < b:
            return True
        if a == b == c == d or (a == b and c < a < d) or (c == d and a < c < b):
            return True                     # two insertions at one point, or one inside a replaced range
    return False


@dataclass
class Round:
    texts: dict[str, str]                       # path -> new text (files that changed)
    applied: list[Finding] = field(default_factory=list)
    deferred: int = 0                           # fixes left for the next round (overlap)


def fix_round(report: Report, texts: Callable[[str], Optional[str]], unsafe: bool) -> Round:
    """Apply every applicable fix of `report` that does not overlap an earlier one. `texts(path)` gives the
    current text of a file (None: unknown, its fixes are skipped)."""
    candidates = [f for f in report.findings if applicable(f.fix, unsafe)]
    current: dict[str, str] = {}
    starts: dict[str, list[int]] = {}
    taken: dict[str, list[tuple[int, int, str]]] = {}
    out = Round(texts={})

    def first(f: Finding) -> tuple:
        e = min(f.fix.edits, key=lambda e: (e.path, e.line, e.column))
        return (e.path, e.line, e.column, f.code)

    for finding in sorted(candidates, key=first):
        spans = []
        ok = True
        for edit in finding.fix.edits:
            if edit.path not in current:
                text = texts(edit.path)
                if text is None:
                    ok = False
                    break
                current[edit.path], starts[edit.path] = text, line_starts(text)
            try:
                a, b = offsets(current[edit.path], edit, starts[edit.path])
            except ValueError:
                ok = False
                break
            spans.append((edit.path, (a, b, edit.content)))
        if not ok:
            continue
        if any(_overlaps(span, taken.get(path, [])) for path, span in spans) or \
                any(_overlaps(s, [t for q, t in spans if q == p and t is not s]) for p, s in spans):
            out.deferred += 1
            continue
        for path, span in spans:
            taken.setdefault(path, []).append(span)
        out.applied.append(finding)
    for path, spans in taken.items():
        text = current[path]
        pieces, at = [], 0
        for a, b, content in sorted(set(spans)):
            pieces.append(text[at:a])
            pieces.append(content)
            at = b
        pieces.append(text[at:])
        new = "".join(pieces)
        if new != text:
            out.texts[path] = new
    return out
