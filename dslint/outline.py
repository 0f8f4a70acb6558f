"""A file's outline from CPython's own parser: its functions, classes (with bases resolved through the
imports) and imports, with the qualified names and resolution rules of `dslint.facts`.

CPython's `ast` parses about 10x faster than libcst, and `compile()` runs for every Python file anyway (to tell
valid files from DSL001 ones). Whole-project indexes (functions by qualified name, nn.Module classes by their
bases) are built from outlines, so a file is parsed with libcst only when an analysis needs its syntax tree
(DESIGN.md §5, ISSUE 6). Outlines hold no syntax tree and pickle cheaply.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional

_BLOCKS = ("body", "orelse", "handlers", "finalbody", "cases")


@dataclass
class ClassOutline:
    name: str
    qualname: str
    bases: list[str]               # resolved as `FileFacts.resolve_expr` does ("" for a non-name base)


@dataclass
class Outline:
    functions: set[str] = field(default_factory=set)                    # qualified names within the file
    classes: dict[str, ClassOutline] = field(default_factory=dict)      # qualified name → class
    imports: dict[str, str] = field(default_factory=dict)

    def resolve(self, dotted: Optional[str]) -> Optional[str]:
        if not dotted:
            return dotted
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            return dotted
        return f"{target}.{rest}" if rest else target


def _dotted(expr: ast.expr) -> Optional[str]:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def build_outline(tree: ast.Module, package: str = "") -> Outline:
    """Statements only, pre-order and in source order (as `FactCollector` walks), so that a class's bases are
    resolved against the imports seen before it, exactly as the libcst facts resolve them."""
    out = Outline()
    stack: list[tuple[ast.AST, tuple[str, ...]]] = [(tree, ())]
    while stack:
        node, scopes = stack.pop()
        kind = type(node)
        if kind is ast.Import:
            for alias in node.names:
                if alias.asname:
                    out.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    out.imports.setdefault(head, head)
            continue
        if kind is ast.ImportFrom:
            module = node.module or ""
            if node.level:
                base = package.split(".") if package else []
                up = node.level - 1
                base = base[: len(base) - up] if up else base
                module = ".".join([*base, module] if module else base)
            for alias in node.names:
                if alias.name == "*":
                    break
                out.imports[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
            continue
        if kind is ast.ClassDef:
            qual = ".".join((*scopes, node.name))
            out.classes[qual] = ClassOutline(node.name, qual, [out.resolve(_dotted(b)) or "" for b in node.bases])
            scopes = (*scopes, node.name)
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            out.functions.add(".".join((*scopes, node.name)))
            scopes = (*scopes, node.name)
        kids: list = []
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if block:
                kids.extend(block)
        for child in reversed(kids):
            stack.append((child, scopes))
    return out


def outline_of(text: str, filename: str, package: str = "") -> Optional[Outline]:
    """The outline, or None when CPython rejects the source."""
    try:
        tree = compile(text, filename, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return build_outline(tree, package)
