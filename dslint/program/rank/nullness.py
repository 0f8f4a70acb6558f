"""Whether a value is None alike on every rank (issue 30, cause 3: a value that is non-None on every path).

`self.engine is None` is rank-varying when some ranks store an engine there and others do not; it is the same
on every rank when every store of the field is `None` or a value that is never None (an object a constructor
builds, a literal container, what a checked function returns on every path) and every store runs on every
rank that runs its method -- no rank-dependent test or exit stands before it in the method, and no call of the
method stands under one. The engine an object builds from rank-dependent arguments (`Engine(port=40000 +
local_rank)`) differs per rank, but whether it is there does not.

`never_none` decides an expression from its form and, through the checked functions and classes it calls, from
their returns; `uniform_none_field` decides a field of a class family. The guards of a statement are those the
rank walk (`reaching_ranks.FlowWalk`) gives it: enclosing rank-dependent tests and earlier rank-dependent exits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional, Protocol

import libcst as cst

from dslint.program.facts import MODULE_SCOPE, FunctionInfo, dotted_name
from dslint.program.rank.reaching_ranks import FlowWalk
from dslint.program.statement_walks import iter_assigns, iter_returns

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

# builtin constructors: their result is an object, never None
_BUILTIN_CONSTRUCTORS = {"list", "dict", "set", "tuple", "frozenset", "str", "int", "float", "bool", "bytes",
                         "object", "range", "enumerate", "zip", "sorted", "len"}
_NEVER_NONE_NODES = (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp,
                     cst.GeneratorExp, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer,
                     cst.Float, cst.Imaginary, cst.Lambda, cst.Comparison, cst.BinaryOperation)


class Program(Protocol):
    """What this module asks of the project level (`function_summaries.ProjectTaint`)."""
    project: "ProjectView"

    def taint(self, src: "PythonSource") -> Any: ...

    def module_env(self, src: "PythonSource") -> dict: ...

    def param_taint(self, src: "PythonSource", info: FunctionInfo) -> dict: ...

    def call_source(self, src: "PythonSource", callee: Optional[str], cls: Optional[str], fields: bool = True,
                    scope: Optional[str] = None) -> Optional[tuple["PythonSource", str]]: ...

    def function_info(self, source: Optional[tuple["PythonSource", str]]) -> Optional[tuple["PythonSource", Any]]: ...

    def _class_family(self, src: "PythonSource", cls: str, depth: int = 0) -> Iterable[tuple["PythonSource", str]]: ...

    def _files_calling(self, name: str) -> list["PythonSource"]: ...


def never_none(program: Program, src: "PythonSource", e: Optional[cst.BaseExpression], cls: Optional[str],
               depth: int = 0) -> bool:
    """Is `e` an object on every path: a literal, a container, arithmetic, a comparison, a constructor of a
    checked class or a builtin one, a call of a checked function all of whose returns are such (and that does
    not end without one), either side of an `x if t else y` such?"""
    if e is None or depth > 3:
        return False
    if isinstance(e, _NEVER_NONE_NODES):
        return True
    if isinstance(e, cst.IfExp):
        return never_none(program, src, e.body, cls, depth) and never_none(program, src, e.orelse, cls, depth)
    if not isinstance(e, cst.Call):
        return False
    callee = src.facts.resolve_expr(e.func)
    if isinstance(e.func, cst.Name) and e.func.value in _BUILTIN_CONSTRUCTORS and callee in (None, e.func.value):
        return True
    if program.project.class_for_callee(src, callee) is not None:
        return True
    hit = program.function_info(program.call_source(src, callee, cls, fields=False))
    if hit is None:
        return False
    other, info = hit
    return _returns_object(program, other, info, depth + 1)


def _returns_object(program: Program, src: "PythonSource", info: FunctionInfo, depth: int) -> bool:
    memo = src.__dict__.setdefault("_returns_object", {})
    if info.qualname in memo:
        return bool(memo[info.qualname])
    memo[info.qualname] = False         # recursion: not known
    body = info.node.body
    stmts = list(body.body) if isinstance(body, cst.IndentedBlock) else []
    if any(isinstance(n, (cst.Yield,)) for n in _walk_own(info.node)):
        memo[info.qualname] = True      # a generator function returns a generator object
        return True
    returns = list(iter_returns(body))
    last = stmts[-1] if stmts else None
    ends = isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    ok = bool(returns) and ends and all(
        r.value is not None and (never_none(program, src, r.value, info.class_name, depth)
                                 or _local_object(program, src, info, r.value, depth)) for r in returns)
    memo[info.qualname] = ok
    return ok


def _local_object(program: Program, src: "PythonSource", info: FunctionInfo, value: cst.BaseExpression,
                  depth: int) -> bool:
    """`engine = Engine(...); return engine`: a local name every binding of which in the function is an object."""
    if not isinstance(value, cst.Name):
        return False
    bound = [node.value for node in iter_assigns(info.node.body) for t in node.targets
             if isinstance(t.target, cst.Name) and t.target.value == value.value]
    if not bound or any(isinstance(node, (cst.For, cst.With, cst.AugAssign, cst.NamedExpr, cst.AnnAssign))
                        and _binds(node, value.value) for node in _walk_own(info.node)):
        return False
    return all(never_none(program, src, v, info.class_name, depth) for v in bound)


def _binds(node: cst.CSTNode, name: str) -> bool:
    target = getattr(node, "target", None)
    if isinstance(node, cst.With):
        return any(item.asname is not None and dotted_name(item.asname.name) == name for item in node.items)
    return target is not None and any(isinstance(n, cst.Name) and n.value == name for n in _walk_all(target))


def _walk_all(node: cst.CSTNode):
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(n.children)


def _walk_own(func: cst.FunctionDef):
    """The nodes of a function's body, not of the functions, lambdas and classes nested in it."""
    todo = list(func.body.children)
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        todo.extend(n.children)


def uniform_none_field(program: Program, src: "PythonSource", cls: str, attr: str) -> bool:
    """Is `self.<attr>` None alike on every rank in the class family of `cls`: every store of it is `None` or
    never None (`never_none`), none is guarded by a rank-dependent test or exit of its method, and every call
    (found by the method's name, a superset) of a method other than `__init__` that stores an object there is
    itself unguarded? False when the field is also set another way (`setattr`, unpacking, `+=`) or nowhere."""
    memo = program.__dict__.setdefault("_uniform_none_fields", {})
    key = (id(src), cls, attr)
    if key in memo:
        return memo[key]
    memo[key] = False
    memo[key] = _decide_field(program, src, cls, attr)
    return memo[key]


def _decide_field(program: Program, src: "PythonSource", cls: str, attr: str) -> bool:
    target = f"self.{attr}"
    stores = 0
    for where, owner in program._class_family(src, cls):
        if "setattr" in where.text and attr in where.text:
            return False
        for info in where.facts.functions.values():
            if info.class_name != owner:
                continue
            for node in _walk_own(info.node):
                if isinstance(node, (cst.AugAssign, cst.AnnAssign)) and dotted_name(node.target) == target:
                    return False
                if not isinstance(node, cst.Assign):
                    continue
                for t in node.targets:
                    if isinstance(t.target, (cst.Tuple, cst.List)) and any(
                            dotted_name(n) == target for n in _walk_all(t.target)):
                        return False
                    if dotted_name(t.target) != target:
                        continue
                    stores += 1
                    is_none = isinstance(node.value, cst.Name) and node.value.value == "None"
                    if not is_none and not never_none(program, where, node.value, owner):
                        return False
                    if guarded(program, where, info, node):
                        return False
                    if not is_none and info.name != "__init__" and not _calls_unguarded(program, info.name):
                        return False
    return stores > 0


def guarded(program: Program, src: "PythonSource", info: Optional[FunctionInfo], node: cst.CSTNode) -> bool:
    """Does a rank-dependent test or an earlier rank-dependent exit stand before this statement (or the
    statement holding this node) in its function (None: the module's top level)?"""
    walk = _guard_walk(program, src, info)
    found = walk.guards_at.get(id(node))
    if found is None:
        holder = _holder(info.node if info is not None else src.module, node)
        found = walk.guards_at.get(id(holder)) if holder is not None else None
    return found is None or bool(found)


def _holder(root: cst.CSTNode, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The innermost small or compound statement of `root` whose subtree holds `node`."""
    path: list = []

    def search(n: cst.CSTNode) -> bool:
        if n is node:
            return True
        for child in n.children:
            if isinstance(child, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                path.append(child)
                if search(child):
                    return True
                path.pop()
            elif search(child):
                return True
        return False

    return path[-1] if search(root) and path else None


def _guard_walk(program: Program, src: "PythonSource", info: Optional[FunctionInfo]):
    memo = program.__dict__.setdefault("_guard_walks", {})
    key = (id(src), info.qualname if info is not None else MODULE_SCOPE)
    if key not in memo:
        if info is None:
            walk = _GuardWalk(program.taint(src), scope=MODULE_SCOPE, env={})
            walk.run(src.module.body)
        else:
            walk = _GuardWalk(program.taint(src), scope=info.qualname,
                              env={**program.module_env(src), **program.param_taint(src, info)}, cls=info.class_name)
            walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ())
        memo[key] = walk
    return memo[key]


class _GuardWalk(FlowWalk):
    """The rank walk, keeping the guards each statement runs under."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.guards_at: dict[int, tuple] = {}

    def stmt(self, node, guards):
        self.guards_at.setdefault(id(node), tuple(guards))
        return super().stmt(node, guards)

    def small(self, node, guards):
        self.guards_at.setdefault(id(node), tuple(guards))
        return super().small(node, guards)


def _calls_unguarded(program: Program, name: str) -> bool:
    """Every call spelled `<x>.name(...)` or `name(...)` in the checked files runs unguarded in its scope."""
    for other in program._files_calling(name):
        for call in other.facts.calls:
            func = call.node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if last != name:
                continue
            info = other.facts.functions.get(call.scope) if call.scope != MODULE_SCOPE else None
            if call.scope != MODULE_SCOPE and info is None:
                return False
            if guarded(program, other, info, call.node):
                return False
    return True
