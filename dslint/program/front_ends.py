"""Programs that take their requests from a person, in ONE process (issue 30: evidence before a finding).

A generating loop fed by the terminal (`input()`, `rules/collectives.py`) or by a web UI the program serves is
an interactive tool: one person, one process, unless something shows more (a launcher line, `--world-size`, a
rank id read where it generates). This module finds the second kind: the program's entry starts a gradio app's
web server (`launch()` on an app built by a gradio constructor -- `gr.Blocks(...)`, `gr.Interface(...)`,
`gr.ChatInterface(...)`, bound by `with ... as demo`, an assignment, or called in place, also through
`.queue(...)`), which runs the program's event handlers in this process for each request of the page. Decided
from the entry's imports (the constructor resolves to the `gradio` package), never from names.
"""

from __future__ import annotations

import ast
from typing import Optional

from dslint.program.outline import parse_tree
from dslint.sources import PythonSource

_LIBRARY = "gradio"


def _resolved(node: ast.AST, imports: dict[str, str]) -> Optional[str]:
    """The dotted name a `Name`/`Attribute` chain stands for, through the file's imports; None otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = imports.get(node.id)
    if head is None:
        return None
    return ".".join([head, *reversed(parts)])


def web_ui_launch(src: PythonSource) -> Optional[int]:
    """The line where `src` starts a gradio web server (see the module's docstring), None where it does not.
    Memoised on the source (a fact of its text)."""
    memo = src.__dict__.setdefault("_web_ui_launch", {})
    if "line" not in memo:
        memo["line"] = _find(src)
    return memo["line"]


def _find(src: PythonSource) -> Optional[int]:
    outline = src.outline
    if outline is None or _LIBRARY not in src.text:
        return None
    imports = dict(outline.imports)
    if not any(v == _LIBRARY or v.startswith(_LIBRARY + ".") for v in imports.values()):
        return None
    tree = parse_tree(src.text, src.path)
    if tree is None:
        return None

    def app(node: ast.AST, bound: set[str]) -> bool:
        """Is `node` a gradio app: a gradio constructor's call, a name bound to one, or `.queue(...)` of one?"""
        if isinstance(node, ast.Name):
            return node.id in bound
        if not isinstance(node, ast.Call):
            return False
        name = _resolved(node.func, imports)
        if name is not None and (name == _LIBRARY or name.startswith(_LIBRARY + ".")):
            return True
        return isinstance(node.func, ast.Attribute) and node.func.attr == "queue" and app(node.func.value, bound)

    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name) and app(item.context_expr, set()):
                    bound.add(item.optional_vars.id)
        elif isinstance(node, ast.Assign) and app(node.value, set()):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "launch" \
                and app(node.func.value, bound):
            return node.lineno
    return None
