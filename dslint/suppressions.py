"""`# dslint: ignore[DSL101]` on the line or alone on the line above; `# dslint: ignore-file[DSL302]` anywhere.
Without a code list, every code is suppressed. Each directive remembers whether it suppressed anything, so
that unused ones can be reported (DSL002)."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Optional

_DIRECTIVE = re.compile(r"#\s*dslint:\s*(ignore-file|ignore)\b(?:\[([A-Za-z0-9_,\s]*)\])?")
ALL = frozenset({"*"})


@dataclass
class Directive:
    line: int
    column: int
    codes: frozenset[str]
    file_level: bool
    targets: tuple[int, ...] = ()     # lines it covers (its own, and the next one when it stands alone)
    used: bool = False

    def matches(self, code: str) -> bool:
        return "*" in self.codes or code in self.codes


@dataclass
class Suppressions:
    directives: list[Directive] = field(default_factory=list)

    def covers(self, code: str, line: int) -> bool:
        hit = False
        for d in self.directives:
            if d.matches(code) and (d.file_level or line in d.targets):
                d.used = hit = True
        return hit

    def unused(self) -> list[Directive]:
        return [d for d in self.directives if not d.used]


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
    from dslint.sources.astsplice import physical_lines
    for number, line in enumerate(physical_lines(text), 1):
        pos = line.find("#")
        if pos >= 0 and "dslint:" in line[pos:]:
            yield number, pos, line[pos:], line[:pos].strip() == ""


def parse_suppressions(text: str, kind: str) -> Suppressions:
    out = Suppressions()
    if "dslint:" not in text or kind == "json":
        return out
    for line, col, comment, alone in _comments(text, kind):
        for m in _DIRECTIVE.finditer(comment):
            file_level = m.group(1) == "ignore-file"
            targets = () if file_level else ((line, line + 1) if alone else (line,))
            out.directives.append(Directive(line, col + m.start() + 1, _codes(m.group(2)), file_level, targets))
    return out
