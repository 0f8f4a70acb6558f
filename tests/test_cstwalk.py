"""`cstwalk.lib_children` is libcst's `children` exactly: the same nodes, whitespace and punctuation included, in
the same order, on every node of a quarter of the fixture files (every fourth by name), and for every node type libcst
defines its visit order is the one its `_visit_and_replace_children` source names."""

import ast
import dataclasses
import inspect
import textwrap
from pathlib import Path

import libcst as cst

from dslint.sources import cstwalk
from dslint.sources.cstwalk import lib_children

ROOT = Path(__file__).parent.parent


def _source_order(kind: type) -> tuple[str, ...]:
    """The field names the method's source passes to libcst's `visit_*` helpers, in source order."""
    for base in kind.__mro__:
        method = base.__dict__.get("_visit_and_replace_children")
        if method is not None:
            break
    calls = []
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(method)))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("visit_") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            calls.append((node.lineno, node.col_offset, node.args[1].value))
    order: list[str] = []
    for _, _, name in sorted(calls):
        if name not in order:
            order.append(name)
    return tuple(order)


def test_visit_order_matches_libcst_source():
    kinds = [k for k in vars(cst).values() if isinstance(k, type) and issubclass(k, cst.CSTNode)
             and dataclasses.is_dataclass(k) and not inspect.isabstract(k)]
    assert len(kinds) > 150
    for kind in kinds:
        assert cstwalk._visit_order(kind) == _source_order(kind), kind


def test_same_children_as_libcst_on_every_node():
    nodes = files = 0
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.py"))[::4]:
        try:
            module = cst.parse_module(path.read_bytes())
        except Exception:
            continue
        files += 1
        stack = [module]
        while stack:
            node = stack.pop()
            theirs = list(cstwalk._LIBCST_CHILDREN(node))       # libcst's own property (fast_children replaces it)
            mine = lib_children(node)
            assert all(a is b for a, b in zip(node.children, mine)) and len(node.children) == len(mine)
            assert len(mine) == len(theirs) and all(a is b for a, b in zip(mine, theirs)), (path, node)
            nodes += 1
            stack.extend(theirs)
    assert files > 200 and nodes > 50_000


def test_fast_type_checks_answer_as_abc():
    """Every libcst node class has the fast metaclass (`cstwalk.fast_type_checks`), none has a virtual
    subclass or a subclass hook (where `ABCMeta`'s answers would differ from `type`'s), and `isinstance`/
    `issubclass` answer as `ABCMeta` does over every pair of node classes."""
    import abc

    todo, kinds = [cst.CSTNode], []
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        kinds.append(kind)
    assert len(kinds) > 300
    for kind in kinds:
        assert type(kind) is cstwalk._NodeMeta, kind
        assert not abc._get_dump(kind)[0] and "__subclasshook__" not in kind.__dict__, kind
    for a in kinds:
        for b in kinds:
            assert issubclass(a, b) == abc.ABCMeta.__subclasscheck__(b, a), (a, b)
    node = cst.parse_module("x = f(a, *b)\n")
    for n in [node, *cstwalk.walk(node)]:
        for b in kinds:
            assert isinstance(n, b) == abc.ABCMeta.__instancecheck__(b, n), (n, b)
