"""`# dslint: ignore[DSL101]` on the line or the line above; `# dslint: ignore-file[DSL302]` anywhere.
Without a code list, every code is suppressed."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Optional

_DIRECTIVE = re.compile(r"#\s*dslint:\s*(ignore-file|ignore)\b(?:\[([A-Za-z0-9_,\s]*)\])?")
ALL = frozenset({"*"})


@dataclass
class Suppressions:
    by_line: dict[int, frozenset[str]] = field(default_factory=dict)
    file_codes: frozenset[str] = frozenset()
    used: set[tuple[int, str]] = field(default_factory=set)

    def covers(self, code: str, line: int) -> bool:
        if "*" in self.file_codes or code in self.file_codes:
            return True
        codes = self.by_line.get(line)
        if codes is not None and ("*" in codes or code in codes):
            self.used.add((line, code))
            return True
        return False


def _codes(group: Optional[str]) -> frozenset[str]:
    if group is None:
        return ALL
    codes = frozenset(c.strip().upper() for c in group.split(",") if c.strip())
    return codes or ALL


def _comments(text: str, kind: str):
    """(line, column, comment text, stands_alone) for every comment that mentions dslint."""
    if kind == "python":
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT and "dslint:" in tok.string:
                    line = tok.line
                    yield tok.start[0], tok.start[1], tok.string, line[: tok.start[1]].strip() == ""
            return
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
    for number, line in enumerate(text.splitlines(), 1):
        pos = line.find("#")
        if pos >= 0 and "dslint:" in line[pos:]:
            yield number, pos, line[pos:], line[:pos].strip() == ""


def parse_suppressions(text: str, kind: str) -> Suppressions:
    out = Suppressions()
    if "dslint:" not in text or kind == "json":
        return out
    file_codes: set[str] = set()
    for line, _col, comment, alone in _comments(text, kind):
        for m in _DIRECTIVE.finditer(comment):
            codes = _codes(m.group(2))
            if m.group(1) == "ignore-file":
                file_codes |= codes
            else:
                out.by_line[line] = out.by_line.get(line, frozenset()) | codes
                if alone:
                    # a directive alone on its line also covers the next line
                    out.by_line[line + 1] = out.by_line.get(line + 1, frozenset()) | codes
    out.file_codes = frozenset(file_codes)
    return out
