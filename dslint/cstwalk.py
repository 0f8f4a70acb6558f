"""A fast pre-order walk over libcst trees.

libcst's own visitor machinery rebuilds every node's children on the way (`_visit_and_replace_children`),
which costs several times the parse on large trees. dslint only reads trees, so it walks the dataclass
fields directly, skipping whitespace and punctuation.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import libcst as cst

_SKIP = frozenset({"lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
                   "footer", "colon", "equal", "star", "dot", "newline", "lbrace", "rbrace", "lbracket",
                   "rbracket", "first_line", "empty_lines", "trailing_whitespace", "indent",
                   "asynchronous", "default_indent", "default_newline", "encoding", "arrow", "semicolon"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = tuple(f.name for f in dataclasses.fields(kind)
                       if f.name not in _SKIP and not f.name.startswith("whitespace"))
        _CHILD_FIELDS[kind] = fields
    return fields


_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    # CSTNode is an ABC: isinstance() against it goes through abc's slow path; the answer per type is cached
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for name in child_fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                if _is_node(type(item)):
                    yield item
        elif _is_node(kind):
            yield value


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `node` (itself included), parents before children, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        kids = list(children(n))
        kids.reverse()
        stack.extend(kids)


def walk_events(node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, bool]]:
    """(node, True) when entering a node and (node, False) when leaving it, in source order: for passes
    that keep a context (the enclosing `if`s, loops) without libcst's visitor."""
    stack: list[tuple[cst.CSTNode, bool]] = [(node, True)]
    while stack:
        n, entering = stack.pop()
        yield n, entering
        if entering:
            stack.append((n, False))
            kids = list(children(n))
            kids.reverse()
            stack.extend((k, True) for k in kids)


_HOOKS: dict[tuple[type, type, bool], object] = {}


def visit(node: cst.CSTNode, visitor: object) -> None:
    """`node.visit(visitor)` for read-only `CSTVisitor`s, on the fast walk: `visit_<Node>` (returning False skips
    the children) and `leave_<Node>` are called as libcst calls them, for every node but whitespace and
    punctuation, without libcst rebuilding each node's children on the way."""
    cls = type(visitor)
    stack: list[tuple[cst.CSTNode, bool]] = [(node, True)]
    while stack:
        n, entering = stack.pop()
        key = (cls, type(n), entering)
        hook = _HOOKS.get(key, _HOOKS)
        if hook is _HOOKS:
            name = ("visit_" if entering else "leave_") + type(n).__name__
            hook = name if callable(getattr(cls, name, None)) else None
            _HOOKS[key] = hook
        if entering:
            descend = getattr(visitor, hook)(n) if hook else None
            stack.append((n, False))
            if descend is not False:
                kids = list(children(n))
                kids.reverse()
                stack.extend((k, True) for k in kids)
        elif hook:
            getattr(visitor, hook)(n)
