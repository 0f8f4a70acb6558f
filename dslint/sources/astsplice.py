"""CPython's tree of a fixed text from the tree of the text it was fixed from (dslint.fixes' re-check: issue 22's
`--fix` timing target): the top-level statements the change touches are parsed again, the others are the
previous tree's node objects -- those before the change always, those after it when the change adds or removes
no line (else the rest of the file is parsed again: their line numbers moved).

The result is the tree `compile(text, flags=PyCF_ONLY_AST)` gives, positions included, or None where that
could differ (the caller then parses the whole text): the statements kept and their positions are unchanged
text at unchanged lines, and the part parsed again is whole lines between two kept statements, padded with
empty lines so that its positions are the file's. CPython's tokenizer starts such a part in the state the
whole file has there -- top level, no bracket open, no continuation line -- as long as the line before it and
its last line end without a backslash (checked). A part that leans on its neighbours (an indented line that
would continue the function before it, an `else:` of the `if` before it, a decorator of the function after
it) does not parse on its own, so the whole text is parsed. Text with a carriage return, and files that set
`from __future__ import barry_as_FLUFL` (it changes the grammar), are parsed whole.
"""

from __future__ import annotations

import ast
import re
import warnings
from itertools import accumulate
from typing import Callable, Optional


_NEWLINE = re.compile(r"\r\n|\r|\n")


def physical_lines(text: str) -> list[str]:
    """The lines as CPython, libcst, tree-sitter and dslint's findings number them: split at `\n`, `\r\n` and
    `\r` only. `str.splitlines()` also splits at form feeds, vertical tabs, `\x1c`-`\x1e`, `\x85`, U+2028 and
    U+2029, which may stand in a comment or a string, and every such split shifts the lines after it by one.
    Like `splitlines`, no empty last line after a final newline."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def compile_ast(text: str, filename: str) -> ast.Module:
    """CPython's tree of a user's source, without the warnings its parse emits: Python 3.12 and later print a
    `SyntaxWarning` (3.11 a `DeprecationWarning`) for an invalid escape sequence such as `"\\d"` in a string
    literal, about the user's code and on dslint's stderr. Raises what `compile` raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return compile(text, filename, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)


def _start(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return decorators[0].lineno if decorators else stmt.lineno


def common_prefix(a: str, b: str) -> int:
    """The longest n with a[:n] == b[:n] (slices compared in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    """The longest n <= limit with a[-n:] == b[-n:]."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:len(a) - lo] == b[len(b) - mid:len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def spliced_ast(tree: Optional[ast.Module], before: str, text: str, filename: str = "<unknown>",
                guard: Optional[Callable[[str], object]] = None) -> Optional[ast.Module]:
    """CPython's tree of `text`, built from `tree` (CPython's tree of `before`), or None (see the module).
    `guard`: asked of the part to parse before CPython reads it (`dslint.sources.guard.check`); anything but None
    makes this None."""
    if tree is None or type(tree) is not ast.Module or tree.type_ignores or not tree.body \
            or "\r" in before or "\r" in text or "barry_as_FLUFL" in text:
        return None
    head = common_prefix(before, text)
    if head == len(before) == len(text):
        return tree
    tail = common_suffix(before, text, min(len(before), len(text)) - head)
    changed_end = len(before) - tail                      # before[head:changed_end] became text[head:len(text) - tail]
    first = before.count("\n", 0, head) + 1               # the lines of `before` the change touches
    last = before.count("\n", 0, max(head, changed_end - 1)) + 1
    delta = text.count("\n", head, len(text) - tail) - before.count("\n", head, changed_end)
    body = tree.body
    n = len(body)
    # i: the last statement kept before the change (wholly on earlier lines, no later statement on its last line)
    i = n - 1
    while i >= 0 and body[i].end_lineno >= first:
        i -= 1
    while i >= 0 and i + 1 < n and _start(body[i + 1]) <= body[i].end_lineno:
        i -= 1
    # j: the first statement kept after it (wholly on later lines, no earlier statement on its first line); with
    # lines added or removed, none (the rest is parsed again)
    j = n
    if delta == 0:
        j = 0
        while j < n and _start(body[j]) <= last:
            j += 1
        while j < n and j > 0 and body[j - 1].end_lineno >= _start(body[j]):
            j += 1
        if j <= i:
            return None
    # line start offsets of `before` (lines end at "\n" only, as for CPython's tokenizer)
    lines = before.split("\n")
    offsets = [0, *accumulate(len(line) + 1 for line in lines)]
    start_line = body[i].end_lineno + 1 if i >= 0 else 1
    if i >= 0 and lines[start_line - 2].endswith("\\"):
        return None
    start = offsets[start_line - 1]
    if j < n:
        end = offsets[_start(body[j]) - 1] + len(text) - len(before)     # after the change: shifted by its length
        region = text[start:end]
        if region.rstrip("\n").endswith("\\") or region and not region.endswith("\n"):
            return None
    else:
        region = text[start:]
    if guard is not None and guard(region) is not None:
        return None
    try:
        part = compile_ast("\n" * (start_line - 1) + region, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if part.type_ignores:
        return None
    return ast.Module(body=[*body[:i + 1], *part.body, *body[j:]], type_ignores=[])
