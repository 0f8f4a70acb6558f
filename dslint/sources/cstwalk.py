"""A fast pre-order walk over libcst trees.

libcst's own visitor machinery rebuilds every node's children on the way (`_visit_and_replace_children`),
which costs several times the parse on large trees. dslint only reads trees, so it walks the dataclass
fields directly, skipping whitespace and punctuation.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Iterator, Optional

import libcst as cst

_SKIP = frozenset({"lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
                   "footer", "colon", "equal", "star", "dot", "newline", "lbrace", "rbrace", "lbracket",
                   "rbracket", "first_line", "empty_lines", "trailing_whitespace", "indent",
                   "asynchronous", "default_indent", "default_newline", "encoding", "arrow", "semicolon"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


class _NodeMeta(abc.ABCMeta):
    """libcst's node classes' metaclass with `type`'s own (C) instance and subclass checks in place of
    `ABCMeta`'s (a Python-level call into the ABC registry caches on every `isinstance(x, cst.Name)` that is
    not an exact type match: a fifth of a corpus repository's CPU). The answers are the same wherever no class
    is registered as a virtual subclass of a libcst node class and none defines `__subclasshook__` -- libcst
    does neither; `tests/test_cstwalk.py` checks it."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


def fast_type_checks() -> None:
    """Give every libcst node class `_NodeMeta` (once per process; later subclasses inherit it). Like the
    validation switched off in `dslint.sources.parse_module`, a process-wide change of libcst that changes
    no answer."""
    dump = getattr(abc, "_get_dump", None)     # CPython's C `_abc` (the pure-Python fallback has no registry dump)
    if type(cst.CSTNode) is _NodeMeta or dump is None:
        return
    todo = [cst.CSTNode]
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        if type(kind) is abc.ABCMeta and not dump(kind)[0] and "__subclasshook__" not in kind.__dict__:
            kind.__class__ = _NodeMeta




def child_fields(kind: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = tuple(f.name for f in dataclasses.fields(kind)
                       if f.name not in _SKIP and not f.name.startswith("whitespace"))
        _CHILD_FIELDS[kind] = fields
    return fields


_IS_NODE: dict[type, bool] = {}


def is_node_type(kind: type) -> bool:
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
                if is_node_type(type(item)):
                    yield item
        elif is_node_type(kind):
            yield value


# node types whose dataclass fields are not in source order: their children in the order the source has them
_SOURCE_ORDER: dict[str, tuple[str, ...]] = {
    "FunctionDef": ("decorators", "name", "type_parameters", "params", "returns", "body"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "Parameters": ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "IfExp": ("body", "test", "orelse"),
    "MatchCase": ("pattern", "guard", "body"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "TypeAlias": ("name", "type_parameters", "value"),
}
_SOURCE_FIELDS: dict[type, tuple[str, ...]] = {}


def source_fields(kind: type) -> tuple[str, ...]:
    """`child_fields` in source order (a function's decorators, then its parameters, return annotation and
    body; an `if`-expression's body before its test; an `except`'s type before its body)."""
    fields = _SOURCE_FIELDS.get(kind)
    if fields is None:
        fields = child_fields(kind)
        order = _SOURCE_ORDER.get(kind.__name__)
        if order is not None:
            assert sorted(order) == sorted(fields), (kind, fields)
            fields = order
        _SOURCE_FIELDS[kind] = fields
    return fields


def nodes_of(module: cst.CSTNode, kinds: tuple[type, ...]) -> list[list[cst.CSTNode]]:
    """The nodes of each of `kinds` (exact types) under `module`, each list in source pre-order: a node before
    the nodes nested in it, siblings as the source has them (what `dslint.program.outline` orders its entries by)."""
    found: list[list[cst.CSTNode]] = [[] for _ in kinds]
    slot = {kind: found[i].append for i, kind in enumerate(kinds)}
    fields_of = _SOURCE_FIELDS
    is_node = _IS_NODE
    stack = [module]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        kind = type(node)
        add = slot.get(kind)
        if add is not None:
            add(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = source_fields(kind)
        for name in reversed(fields):
            value = getattr(node, name)
            vkind = type(value)
            if vkind is tuple or vkind is list:
                for item in reversed(value):
                    known = is_node.get(type(item))
                    if known is None:
                        known = is_node_type(type(item))
                    if known:
                        push(item)
            else:
                known = is_node.get(vkind)
                if known is None:
                    known = is_node_type(vkind)
                if known:
                    push(value)
    return found


def statement_nodes(module: cst.Module, kinds: tuple[type, ...], previous: Optional[dict] = None
                    ) -> tuple[list[list[cst.CSTNode]], dict]:
    """`nodes_of(module, kinds)` (only the module's body holds such nodes), walked one top-level statement at a
    time, and per statement what was found (id(statement) → (statement, lists)). What `previous` (such a map of
    another walk) holds for a statement node of this module is taken again: libcst's nodes are immutable, so
    the same node object has the same nodes under it (a fixed text's tree keeps the statements its change did
    not touch, `dslint.sources.splice`)."""
    found: list[list[cst.CSTNode]] = [[] for _ in kinds]
    by_statement: dict = {}
    for stmt in module.body:
        hit = previous.get(id(stmt)) if previous is not None else None
        if hit is None or hit[0] is not stmt:
            hit = (stmt, nodes_of(stmt, kinds))
        by_statement[id(stmt)] = hit
        for into, part in zip(found, hit[1]):
            into.extend(part)
    return found, by_statement


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


# ------------------------------------------------------------------- libcst's own `children`, without the rebuild

_UNKNOWN = object()
_VISIT_ORDER: dict[type, object] = {}      # node type → its fields in libcst's visit order, or None: ask libcst


def _visit_order(kind: type) -> Optional[tuple[str, ...]]:
    """The fields that `kind._visit_and_replace_children` visits, in its order: the field-name strings it passes
    to libcst's `visit_*` helpers, read from its code object's constants (every one of them is a field name of
    the node, in the order the method's source has them). None where that cannot be read."""
    method = None
    for base in kind.__mro__:
        method = base.__dict__.get("_visit_and_replace_children")
        if method is not None:
            break
    code = getattr(method, "__code__", None)
    if code is None or not dataclasses.is_dataclass(kind):
        return None
    fields = {f.name for f in dataclasses.fields(kind)}
    order: list[str] = []
    for const in code.co_consts:
        if type(const) is str and const in fields and const not in order:
            order.append(const)
    return tuple(order)


def _in_order(node: cst.CSTNode, order: tuple[str, ...]) -> list:
    out: list = []
    for name in order:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                if is_node_type(type(item)):
                    out.append(item)
        elif is_node_type(kind):
            out.append(value)
    return out


def lib_children(node: cst.CSTNode) -> list:
    """`node.children` exactly -- the same nodes (whitespace and punctuation included) in the same order -- read
    from the node's fields in the order libcst's `_visit_and_replace_children` visits them, instead of running
    that method (which rebuilds and validates a copy of the node: ~20x the cost). The order of a node type is
    checked against libcst's own answer on the first node of that type seen by the process; a type whose
    order cannot be read, or whose first node disagrees, is answered by libcst (`tests/test_cstwalk.py` compares
    the two on every node of the fixture tree)."""
    kind = type(node)
    order = _VISIT_ORDER.get(kind, _UNKNOWN)
    if order is _UNKNOWN:
        order = _visit_order(kind)
        if order is not None:
            mine, theirs = _in_order(node, order), list(_LIBCST_CHILDREN(node))
            if len(mine) != len(theirs) or any(a is not b for a, b in zip(mine, theirs)):
                order = None
        _VISIT_ORDER[kind] = order
    if order is None:
        return list(_LIBCST_CHILDREN(node))
    return _in_order(node, order)


_CHILDREN_NOW = cst.CSTNode.__dict__["children"]
_LIBCST_CHILDREN = getattr(_CHILDREN_NOW, "libcst_fget", _CHILDREN_NOW.fget)       # libcst's own, even on a reload


def fast_children() -> None:
    """`CSTNode.children` answered by `lib_children` for the process (the analyses' many `node.children`, in
    `dslint.program.rank` and elsewhere): the same list, without rebuilding each node on the way. Leaf nodes
    keep libcst's own (an empty sequence)."""
    if not isinstance(cst.CSTNode.__dict__["children"], _FastChildren):
        fast = _FastChildren(lib_children)
        fast.libcst_fget = _LIBCST_CHILDREN
        cst.CSTNode.children = fast


class _FastChildren(property):
    libcst_fget = None


fast_type_checks()
fast_children()


def ancestors(root: cst.CSTNode, target: cst.CSTNode) -> Optional[list]:
    """The nodes from `root` down to `target`'s parent (found by identity), outermost first; None when `target`
    is not inside `root`."""
    path: list = []

    def find(node: cst.CSTNode) -> bool:
        if node is target:
            return True
        for kid in children(node):
            path.append(node)
            if find(kid):
                return True
            path.pop()
        return False

    return path if find(root) else None
