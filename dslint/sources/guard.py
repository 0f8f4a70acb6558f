"""The complexity guard: a file whose syntax would take a parser down is never handed to one.

libcst's native parser overflows its stack (the process dies with SIGSEGV, exit 139: no report at all) on
brackets nested a few thousand deep, on `and`/`not`/unary/lambda chains of ~10,000, and takes minutes on
chains of 2,000 trailers (`f()()…`, `x[0][0]…`: its time grows with the cube of the length); CPython's own
parser gives up (SyntaxError, MemoryError, RecursionError) on most of the same inputs, and dslint's rules walk
such trees recursively. `scan` reads the token stream once (CPython's tokenizer, no tree) and measures:

- `depth`: brackets open at once. CPython's tokenizer refuses more than 200 (`too many nested parentheses`),
  so no Python file exceeds that limit and libcst is never asked to parse one that does.
- `chain`: the longest run of operators and trailers inside one expression operand list (between commas,
  `;`, `=` and the end of the logical line, per bracket level): `a + a + …`, `a.b.b…`, `f()()…`, `- - - x`,
  `not not …`, `lambda: lambda: …`, `x if c else y if c else …`. Each step is one level of the syntax tree.
- `strings`: the longest run of implicitly concatenated string literals (`'a' 'b' …`, a table of characters
  written one literal per line). Each literal is one level of libcst's tree too, but the rules never walk such a
  run step by step, and libcst and the walks were measured through 3,000 (libcst's native parser refuses
  10,000 with a syntax error), so their limit is their own: a 300-line character table is analysed.
- `elifs`: the longest `if`/`elif` chain (each `elif` nests the rest of the chain one level down in the tree).

and, before any of them, the size: a Python text over the run's limit for Python sources (`MAX_SOURCE_CHARS`,
`--max-file-size`, default 2 MiB) is not analysed either -- a file that large is skipped when it is read
(dslint.sources.inputs), so this is met only by texts that do not come from a file (`check_texts`).

The limits sit above real code (the 5,948 files of the installed torch, transformers and deepspeed packages
reach depth 26, chain 45, 127 implicitly concatenated bytes literals, 79 elifs; docs/performance.md) and
below what the parsers and the rules' recursive walks survive. A file over a limit
is reported as DSL001 "could not be analysed: …" at the token that crossed it, and no rule reads it.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Optional

# (measure, limit, what it is called in the message)
MIB = 1 << 20
# The size: the limit for Python sources (`--max-file-size` / `max-file-size`, default 2 MiB:
# dslint.sources.inputs.DEFAULT_LIMITS), which is also what a file read from disk was held to -- one limit, which
# the user controls. A bigger file is generated data, not a training script: libcst's tree of a 5 MB file takes
# ~3 GB and a minute (docs/performance.md). Real code: 1.4 MB at most. Set per run (`set_source_limit`).
MAX_SOURCE_CHARS = 2 * MIB
MAX_DEPTH = 200            # CPython's tokenizer: MAXLEVEL
MAX_CHAIN = 200            # the rules' walks pass 250 of each kind (300 untested); libcst: 0.2 s at 500 trailers,
                           # 2.5 s at 1,000, 13 s at 2,000, a segfault near 10,000. Real code: 127 at most
MAX_STRINGS = 2000         # implicitly concatenated literals: libcst + every rule pass 3,000 (1.3 s, 60 MB);
                           # libcst's parser refuses 10,000. Real code: 300 (a CJK character table)
MAX_ELIFS = 200            # the rules and the reporting (libcst's code generation) pass 300 and fail at 500;
                           # libcst segfaults near 10,000. Real code: 79 at most

_CHAIN_OPS = frozenset({"+", "-", "*", "/", "//", "%", "@", "**", "<<", ">>", "&", "|", "^", "~", "<", ">", "<=",
                        ">=", "==", "!=", ".", "->"})
_CHAIN_WORDS = frozenset({"and", "or", "not", "if", "else", "lambda", "is", "in", "await"})
_RESETS = frozenset({",", ";", "=", ":=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=",
                     "<<=", "**="})
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = frozenset({")", "]", "}"})
_KEYWORDS = frozenset({"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
                       "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
                       "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
                       "try", "while", "with", "yield"})


@dataclass
class TooComplex:
    """Why a file is not analysed, and where."""
    reason: str
    line: int
    column: int


@dataclass
class Measures:
    depth: int = 0
    chain: int = 0
    strings: int = 0
    elifs: int = 0
    tokens: int = 0


def _size(n: int) -> str:
    """As the skip messages say it (dslint.sources.inputs): MiB, KiB or bytes."""
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} bytes"


def set_source_limit(limit: int) -> None:
    """The run's limit for Python sources, in bytes (`Checker`: from `--max-file-size`)."""
    global MAX_SOURCE_CHARS
    MAX_SOURCE_CHARS = limit


def check(text: str, limits: Optional[tuple[int, int, int]] = None) -> Optional[TooComplex]:
    """None when the file is within every limit; else why not and where. A cheap over-estimate first (one
    regular expression over brackets, operators, keywords and strings); the tokenizer's exact measures
    (`scan`, ~1.5 MB/s) only for a file the estimate puts over a limit."""
    if len(text) > MAX_SOURCE_CHARS:       # characters: never more than the UTF-8 bytes the file limit counts
        return TooComplex(f"{_size(len(text))} of Python source, over the {_size(MAX_SOURCE_CHARS)} limit for "
                          f"Python sources (--max-file-size)", 1, 1)
    max_depth, max_chain, max_elifs = limits or (MAX_DEPTH, MAX_CHAIN, MAX_ELIFS)
    if text.count("elif") <= max_elifs:
        if within_bound(text, max_depth, max_chain):
            return None
        depth, chain, strings = _estimate(text)
        if depth <= max_depth and chain <= max_chain and strings <= MAX_STRINGS:
            return None
    return scan(text, limits)[1]


_STR_OR_COMMENT = re.compile(r"""\#[^\n]*
    |'''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)|\"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\Z)
    |'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?""", re.VERBOSE | re.DOTALL)
_COMPARISONS = re.compile(r"==|!=|<=|>=")
_BLANKS = re.compile(r"[ \t\f]+")
_INNERMOST = re.compile(r"[(\[{][^()\[\]{}]*[)\]}]")
_BOUND_PATTERNS: dict[int, tuple[re.Pattern, re.Pattern, re.Pattern]] = {}


def within_bound(text: str, max_depth: int, max_chain: int) -> bool:
    """A cheaper over-estimate than `_estimate` (regular-expression passes, no loop over tokens), decisive for
    ~98 % of real files: True only when the file is surely within both limits. Each step of a chain is at least
    one character at its bracket level, so a chain longer than `max_chain` needs a run of more than
    `max_chain` characters holding no reset (`,`, `;`, `=`, a line end outside brackets). Strings and comments
    become one character, blanks none (every step has a character that is not one); `==`/`!=`/`<=`/`>=` are
    kept from counting as `=`; then, innermost bracket groups
    first, each group's content is searched for such a run (line ends inside brackets do not reset) and the
    group is replaced by one character (the trailer step it is at the level above), at most `max_depth` times;
    what is left is the top level, where line ends reset. A group left open, or deeper nesting, says False (the
    exact measures decide)."""
    patterns = _BOUND_PATTERNS.get(max_chain)
    if patterns is None:
        n = max_chain + 1
        patterns = _BOUND_PATTERNS[max_chain] = (re.compile(r"[(\[{][^()\[\]{}]{%d,}[)\]}]" % n),
                                                 re.compile(r"[^,;=]{%d}" % n), re.compile(r"[^,;=\n]{%d}" % n))
    long_group, in_group, at_top = patterns
    s = _COMPARISONS.sub("~~", _BLANKS.sub("", _STR_OR_COMMENT.sub("S", text).replace("\\\n", " ")))
    for _ in range(max_depth + 1):
        for m in long_group.finditer(s):
            if in_group.search(s, m.start() + 1, m.end() - 1):
                return False
        s, replaced = _INNERMOST.subn("T", s)
        if not replaced:
            break
    else:
        return False
    if any(c in s for c in "()[]{}"):
        return False
    return at_top.search(s) is None


_ROUGH = re.compile(r"""
    (?P<s>[rRbBuUfF]{0,2}(?:'''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)|\"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\Z)
        |'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?))
    |(?P<c>\#[^\n]*)
    |(?P<n>\\?\n)
    |(?P<o>[(\[{])
    |(?P<x>[)\]}])
    |(?P<r>==|!=|<=|>=|->|:=|\*\*=|//=|>>=|<<=|[-+*/%@&|^]=|[=,;])
    |(?P<k>\b(?:and|or|not|if|else|lambda|is|in|await|for)\b)
    |(?P<p>\*\*|//|<<|>>|[-+*/%@&|^~<>.])
    """, re.VERBOSE | re.DOTALL)


def _estimate(text: str) -> tuple[int, int, int]:
    """Bracket depth, longest operator chain and longest run of concatenated string literals, at least the
    tokenizer's (numbers such as `1e-5` count their sign, a keyword before `(` counts as a trailer, lines never
    end inside brackets)."""
    depth = max_depth = chain = strings = run = 0
    chains = [0]
    last = ""
    for m in _ROUGH.finditer(text):
        kind = m.lastgroup
        previous = last
        if kind != "c" and kind != "n":
            last = kind
        if kind == "s":
            if previous == "s":                     # implicit concatenation (blanks, lines, comments between)
                run += 1
                if run > strings:
                    strings = run
            else:
                run = 0
            continue
        elif kind == "c":
            continue
        elif kind == "n":
            if depth == 0 and m.group() == "\n":
                chains = [0]
                last = ""
            continue
        elif kind == "o":
            j = m.start() - 1
            while j >= 0 and text[j] in " \t":
                j -= 1
            if j >= 0 and (text[j].isalnum() or text[j] in "_)]}'\""):
                chains[-1] += 1
                if chains[-1] > chain:
                    chain = chains[-1]
            depth += 1
            chains.append(0)
            if depth > max_depth:
                max_depth = depth
        elif kind == "x":
            if depth:
                depth -= 1
                chains.pop()
            continue
        elif kind == "r":
            if m.group() in _RESETS:
                chains[-1] = 0
                continue
            chains[-1] += 1
        elif kind == "k":
            if m.group() == "for":
                chains[-1] = 0
                continue
            chains[-1] += 1
        else:
            chains[-1] += 1
        if chains[-1] > chain:
            chain = chains[-1]
    return max_depth, chain, strings


def scan(text: str, limits: Optional[tuple[int, int, int]] = None) -> tuple[Measures, Optional[TooComplex]]:
    """The file's measures and, when one crosses its limit, where (scanning stops there). A tokenizer error
    is no verdict: the parsers report it as a syntax error."""
    max_depth, max_chain, max_elifs = limits or (MAX_DEPTH, MAX_CHAIN, MAX_ELIFS)
    m = Measures()
    chains = [0]                 # per open bracket: operators since the last separator at that level
    run = 0                      # string literals concatenated to the current one
    elif_runs: list[int] = [0]   # per indentation level: elifs of the current if statement
    start = True                 # at the first token of a logical line
    previous = ""                # the previous significant token's string ("" at a line start)
    previous_type = tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            typ = tok.type
            if typ in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING):
                continue
            m.tokens += 1
            if typ == tokenize.NEWLINE or typ == tokenize.ENDMARKER:
                chains = [0]
                start, previous, previous_type = True, "", typ
                continue
            if typ == tokenize.INDENT:
                elif_runs.append(0)
                start = True
                continue
            if typ == tokenize.DEDENT:
                if len(elif_runs) > 1:
                    elif_runs.pop()
                start = True
                continue
            s = tok.string
            if typ == tokenize.OP:
                if s in _OPENERS:
                    # a trailer (call or subscript of what precedes) is a step of the chain it ends
                    if previous_type in (tokenize.NAME, tokenize.STRING, tokenize.NUMBER) and \
                            previous not in _KEYWORDS or previous in _CLOSERS:
                        chains[-1] += 1
                        if chains[-1] > m.chain:
                            m.chain = chains[-1]
                            if m.chain > max_chain:
                                return m, _chain_too_long(max_chain, tok)
                    chains.append(0)
                    if len(chains) - 1 > m.depth:
                        m.depth = len(chains) - 1
                        if m.depth > max_depth:
                            return m, TooComplex(f"brackets nested more than {max_depth} deep", *_at(tok))
                elif s in _CLOSERS:
                    if len(chains) > 1:
                        chains.pop()
                elif s in _RESETS:
                    chains[-1] = 0
                elif s in _CHAIN_OPS:
                    chains[-1] += 1
            elif typ == tokenize.NAME:
                if start and s == "if":
                    elif_runs[-1] = 0
                elif start and s == "elif":
                    elif_runs[-1] += 1
                    if elif_runs[-1] > m.elifs:
                        m.elifs = elif_runs[-1]
                        if m.elifs > max_elifs:
                            return m, TooComplex(f"an if/elif chain longer than {max_elifs} branches", *_at(tok))
                elif s in _CHAIN_WORDS:
                    chains[-1] += 1
                elif s == "for":            # a comprehension's clauses are operand lists of their own
                    chains[-1] = 0
            if typ == tokenize.STRING:      # implicit concatenation: a run of its own (`strings`)
                run = run + 1 if previous_type == tokenize.STRING else 0
                if run > m.strings:
                    m.strings = run
                    if run > MAX_STRINGS:
                        return m, TooComplex(f"more than {MAX_STRINGS} implicitly concatenated string literals",
                                             *_at(tok))
            if chains[-1] > m.chain:
                m.chain = chains[-1]
                if m.chain > max_chain:
                    return m, _chain_too_long(max_chain, tok)
            start = False
            previous, previous_type = s, typ
    except (tokenize.TokenError, SyntaxError, ValueError, MemoryError, RecursionError):
        pass
    return m, None


def _chain_too_long(limit: int, tok: tokenize.TokenInfo) -> TooComplex:
    return TooComplex(f"an expression chaining more than {limit} operators, calls or subscripts", *_at(tok))


def _at(tok: tokenize.TokenInfo) -> tuple[int, int]:
    return tok.start[0], tok.start[1] + 1
