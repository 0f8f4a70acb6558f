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

import re
from typing import TYPE_CHECKING, Any, Iterable, Optional, Protocol

import libcst as cst

from dslint.program.facts import MODULE_SCOPE, FunctionInfo, dotted_name
from dslint.program.rank.reaching_ranks import FlowWalk
from dslint.program.statement_walks import ends_in_exit, in_loop_or_handler, iter_assigns, iter_returns, own_nodes

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

# builtin constructors: their result is an object, never None
_BUILTIN_CONSTRUCTORS = {"list", "dict", "set", "tuple", "frozenset", "str", "int", "float", "bool", "bytes",
                         "object", "range", "enumerate", "zip", "sorted", "len"}
_DEVICE_MOVES = frozenset({"to", "cuda", "cpu"})
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

    def call_env(self, src: "PythonSource", scope: str, call: cst.Call) -> dict: ...


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
    if isinstance(e.func, cst.Call) and isinstance(e.func.func, cst.Name) and e.func.func.value == "type" and \
            len(e.func.args) == 1 and "type" not in src.facts.functions and "type" not in src.facts.imports:
        return True                     # `type(data)(...)`: a new instance of the class of `data`
    callee = src.facts.resolve_expr(e.func)
    if isinstance(e.func, cst.Name) and e.func.value in _BUILTIN_CONSTRUCTORS and callee in (None, e.func.value):
        return True
    if program.project.class_for_callee(src, callee) is not None or callee in _LIBRARY_CONSTRUCTORS:
        return True
    hit = program.function_info(program.call_source(src, callee, cls, fields=False))
    if hit is None:
        return False
    other, info = hit
    return _returns_object(program, other, info, depth + 1)


def none_follows(program: Program, src: "PythonSource", info: FunctionInfo) -> Optional[frozenset[str]]:
    """The parameters whose None-ness the function's result follows: it ends with a `return`, and each return
    gives an object (`never_none`) or a parameter kept as it is, sliced (`data[:, lo:hi]`, a sequence's slice) or
    moved to a device (`data.to(device)`) -- where that parameter is bound again only to such forms of itself.
    `_prepare_input(data)` returns None exactly when `data` is None. None when some return is anything else."""
    memo = src.__dict__.setdefault("_none_follows", {})
    if info.qualname in memo:
        return memo[info.qualname]
    memo[info.qualname] = None          # recursion: not known
    body = info.node.body
    stmts = list(body.body) if isinstance(body, cst.IndentedBlock) else []
    last = stmts[-1] if stmts else None
    if not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise))
                                                              for s in last.body)):
        return None
    if any(isinstance(n, cst.Yield) for n in own_nodes(info.node)):
        return None
    params = set(info.params)
    followed: set[str] = set()
    for r in iter_returns(body):
        if r.value is None:
            return None
        if never_none(program, src, r.value, info.class_name):
            continue
        kept = _kept_param(r.value, params)
        if kept is None:
            return None
        followed.add(kept)
    for name in followed:
        # every other binding of the parameter is a slice or a device move of itself
        for node in own_nodes(info.node):
            if isinstance(node, (cst.For, cst.With, cst.AugAssign, cst.NamedExpr, cst.AnnAssign)) and \
                    _binds_anywhere(node, name):
                return None
            if isinstance(node, cst.Assign) and _binds_anywhere(node, name) and not (
                    len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                    and _kept_param(node.value, {name}) == name):
                return None
    out = frozenset(followed)
    memo[info.qualname] = out
    return out


def _kept_param(e: cst.BaseExpression, params: set) -> Optional[str]:
    """`p`, `p[..:..]` (a slice: a sequence, never None), `p.to(...)`/`.cuda()`/`.cpu()` (the moved value) of a
    parameter `p`: the parameter, else None."""
    if isinstance(e, cst.Name):
        return e.value if e.value in params else None
    if isinstance(e, cst.Subscript) and any(isinstance(el.slice, cst.Slice) for el in e.slice):
        return _kept_param(e.value, params)
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in _DEVICE_MOVES:
        return _kept_param(e.func.value, params)
    return None


def _returns_object(program: Program, src: "PythonSource", info: FunctionInfo, depth: int) -> bool:
    memo = src.__dict__.setdefault("_returns_object", {})
    if info.qualname in memo:
        return bool(memo[info.qualname])
    memo[info.qualname] = False         # recursion: not known
    body = info.node.body
    stmts = list(body.body) if isinstance(body, cst.IndentedBlock) else []
    if any(isinstance(n, (cst.Yield,)) for n in own_nodes(info.node)) or _declares_object(info.node):
        memo[info.qualname] = True      # a generator function returns a generator object; `-> Engine` an engine
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
                        and _binds(node, value.value) for node in own_nodes(info.node)):
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
        if "setattr" in where.text and _sets_by_name(program, where, attr):
            return False
        for info in where.facts.functions.values():
            if info.class_name != owner:
                continue
            own = {id(n) for n in own_nodes(info.node)}
            if any(isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and id(n) not in own and any(
                    dotted_name(t) == target for t in _store_targets(n)) for n in _walk_all(info.node.body)):
                return False            # stored by a function nested in the method: when, not known here
            for node in own_nodes(info.node):
                if isinstance(node, (cst.AugAssign, cst.AnnAssign)) and dotted_name(node.target) == target:
                    return False
                if not isinstance(node, cst.Assign):
                    continue
                for t in node.targets:
                    value: Optional[cst.BaseExpression] = node.value
                    if isinstance(t.target, (cst.Tuple, cst.List)) and any(
                            dotted_name(n) == target for n in _walk_all(t.target)):
                        value = _unpacked(t.target, node.value, target)
                        if value is None:
                            return False    # a tuple a call returns, a starred target: which item, not known
                    elif dotted_name(t.target) != target:
                        continue
                    stores += 1
                    is_none = isinstance(value, cst.Name) and value.value == "None"
                    if not is_none and not never_none(program, where, value, owner):
                        return False
                    if guarded(program, where, info, node):
                        return False
                    if not is_none and info.name != "__init__" and not _calls_unguarded(program, info.name):
                        return False
                    if not is_none and info.name == "__init__" and _built_with_rank(program, where, info):
                        return False
    return stores > 0


def _built_with_rank(program: Program, src: "PythonSource", info: FunctionInfo) -> bool:
    """Does a construction of the class found in the checked files pass a rank-varying value for a parameter that
    a test of this constructor reads (`Member(plan, in_process_group=dist.get_rank() % 2 == 0)` for `if
    in_process_group: self.rank = dist.get_rank()`)? The rank walk takes a constructor's parameters as uniform
    (no caller is followed into `__init__`); a store the constructor makes under such a test runs on some ranks
    only. Constructions are found by the class's name (or a derived class's without a constructor of its own,
    or a derived constructor's `super().__init__`): a superset. Memoised."""
    memo = program.__dict__.setdefault("_built_with_rank", {})
    key = (id(src), info.qualname)
    if key in memo:
        return memo[key]
    memo[key] = True                    # recursion: not known
    memo[key] = _construction_varies(program, src, info)
    return memo[key]


def _construction_varies(program: Program, src: "PythonSource", info: FunctionInfo) -> bool:
    params = info.node.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)][1:]
    tested = {n.value for node in own_nodes(info.node) if isinstance(node, (cst.If, cst.While, cst.IfExp))
              for n in _walk_all(node.test) if isinstance(n, cst.Name)}
    tested &= {*positional, *(p.name.value for p in params.kwonly_params)}
    if not tested or info.class_name is None:
        return False
    cls = info.class_name.rsplit(".", 1)[-1]
    derived = derived_classes(program, cls)
    constructing = {cls, *(name for name, own in derived.items() if not own)}
    files = {id(f): f for name in (*constructing, *(("__init__",) if derived else ()))
             for f in program._files_calling(name)}
    for other in files.values():
        for call in other.facts.calls:
            caller = other.facts.functions.get(call.scope)
            owner = caller.class_name if caller is not None else None
            if call.attr in constructing:
                skip = 0
            elif call.attr == "__init__" and owner is not None and owner.rsplit(".", 1)[-1] in derived:
                func = call.node.func       # `Base.__init__(self, ...)` passes `self` positionally
                skip = 1 if isinstance(func, cst.Attribute) and not isinstance(func.value, cst.Call) else 0
            else:
                continue
            at = -skip
            for arg in call.node.args:
                if arg.keyword is not None:
                    param: Optional[str] = arg.keyword.value
                elif arg.star:
                    param = None            # `*args`, `**kwargs`: any parameter
                else:
                    param = positional[at] if 0 <= at < len(positional) else ""
                    at += 1
                if param is not None and param not in tested:
                    continue
                if program.taint(other).eval(arg.value, program.call_env(other, call.scope, call.node),
                                             owner) is not None:
                    return True
    return False


def derived_classes(program, cls: str) -> dict[str, bool]:
    """The classes of the checked files derived from `cls` (by the last part of their bases' names), each with
    whether it defines its own `__init__`."""
    return {name: own for name, (own, _bases) in derived_class_bases(program, cls).items()}


def derived_class_bases(program, cls: str) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """The classes of the checked files derived from `cls` (by the last part of their bases' names), each with
    whether it defines its own `__init__` and the last names of its bases, in order."""
    out: dict[str, tuple[bool, tuple[str, ...]]] = {}
    todo = [cls]
    while todo:
        base = todo.pop()
        for src in program.project.python:
            if src.outline is None or base not in src.text:
                continue
            for info in src.facts.classes.values():
                if info.name in out or info.name == cls:
                    continue
                bases = tuple(b.rsplit(".", 1)[-1] for b in info.bases)
                if base in bases:
                    out[info.name] = ("__init__" in info.methods, bases)
                    todo.append(info.name)
    return out


def _unpacked(targets: cst.BaseExpression, value: cst.BaseExpression, target: str) -> Optional[cst.BaseExpression]:
    """`self.rank, self.world_size = None, None`: the item of the display `value` that the flat unpacking
    `targets` stores at `target` (a dotted name); None when the value is no display of as many plain items, a
    target is starred or nested, or `target` is stored twice."""
    if not isinstance(targets, (cst.Tuple, cst.List)) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    names = targets.elements
    items = value.elements
    if len(names) != len(items) or any(isinstance(el, cst.StarredElement) for el in (*names, *items)):
        return None
    hits = [item.value for name, item in zip(names, items) if dotted_name(name.value) == target]
    if len(hits) != 1 or any(isinstance(name.value, (cst.Tuple, cst.List)) for name in names):
        return None
    return hits[0]


def _sets_by_name(program: Program, src: "PythonSource", attr: str) -> bool:
    """A `setattr(obj, name, value)` of the file that may set `attr` (its name is that literal, or no literal)
    and may set it unlike on different ranks (`_alike_setattr` does not hold)."""
    from dslint.sources.literals import literal_value
    for call in src.facts.calls:
        func = call.node.func
        if isinstance(func, cst.Name) and func.value == "setattr" and len(call.node.args) >= 2:
            name = literal_value(call.node.args[1].value)
            if (not isinstance(name, str) or name == attr) and not _alike_setattr(program, src, call.node):
                return True
    return False


def _alike_setattr(program: Program, src: "PythonSource", call: cst.Call) -> bool:
    """Does `setattr(obj, name, value)` store alike on every rank, so that it keeps a field None alike (or not)
    on every rank whatever field it names? fairseq's `for k, v in arg_overrides.items(): setattr(args, k, v)`
    applies overrides parsed from the run's options. It does when the name and the value are the same on every
    rank (the rank walk of its function, with what its callers pass, finds neither rank-varying) or the value is
    never None, and the store runs on every rank that runs its function: no rank-dependent test or exit before
    it (`guarded`), and every call of the function unguarded too -- or, where a call is guarded, the store is
    out of that call's reach (`_call_skips`: an enclosing test needs a parameter that call leaves at its None
    default). A dynamic store in a nested function, or one the walk never reaches, is not judged."""
    args = call.args
    if len(args) != 3 or any(a.star or a.keyword is not None for a in args):
        return False
    info = _function_holding(src, call)
    if info is False:
        return False
    walk = _guard_walk(program, src, info)
    holder = _holder(info.node if info is not None else src.module, call)
    env = walk.env_at.get(id(holder)) if holder is not None else None
    if env is None:
        return False
    cls = info.class_name if info is not None else None
    taint = program.taint(src)
    if taint.eval(args[1].value, env, cls) is not None:
        return False                    # which field it sets differs per rank
    if taint.eval(args[2].value, env, cls) is not None and not never_none(program, src, args[2].value, cls):
        return False
    if guarded(program, src, info, call):
        return False
    return info is None or info.name == "__init__" or _calls_unguarded(program, info.name, (info, call))


def _declares_object(func: cst.FunctionDef) -> bool:
    """A return annotation that names a type, not None or an optional one (`-> Engine`, `-> "LLM"`): the function
    declares it returns an object (not `Optional[X]`, `X | None`, `Union[..., None]`, `Any`, `object`)."""
    from dslint.program.statement_walks import code_of
    ann = func.returns.annotation if func.returns is not None else None
    if ann is None:
        return False
    if isinstance(ann, cst.SimpleString):
        text = ann.evaluated_value if isinstance(ann.evaluated_value, str) else ""
    else:
        text = code_of(ann, 400)
    words = set(text.replace("[", " ").replace("]", " ").replace("|", " ").replace(",", " ").replace(".", " ").split())
    return bool(words) and not words & {"None", "Optional", "Any", "object", "NoReturn", "Union"}


def _store_targets(node: cst.CSTNode) -> list:
    if isinstance(node, cst.Assign):
        return [n for t in node.targets for n in _walk_all(t.target)]
    return [node.target]


def guarded(program: Program, src: "PythonSource", info: Optional[FunctionInfo], node: cst.CSTNode) -> bool:
    """Does a rank-dependent test or an earlier rank-dependent exit stand before this statement (or the
    statement holding this node) in its function (None: the module's top level)? A statement the walk does not
    visit (a branch no caller's setting takes) is none."""
    walk = _guard_walk(program, src, info)
    found = walk.guards_at.get(id(node))
    if found is None:
        holder = _holder(info.node if info is not None else src.module, node)
        found = walk.guards_at.get(id(holder)) if holder is not None else None
    return bool(found)                  # a statement the walk never visits is dead code (`_never_holds`)


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
        busy = program.__dict__.setdefault("_nullness_busy", set())
        busy.add(key)
        try:
            memo[key] = _new_guard_walk(program, src, info)
        finally:
            busy.discard(key)
    return memo[key]


def _new_guard_walk(program: Program, src: "PythonSource", info: Optional[FunctionInfo]):
    if info is None:
        walk = _GuardWalk(program.taint(src), scope=MODULE_SCOPE, env={})
        walk.run(src.module.body)
    else:
        walk = _GuardWalk(program.taint(src), scope=info.qualname,
                          env={**program.module_env(src), **program.param_taint(src, info)}, cls=info.class_name)
        walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ())
    return walk


class _GuardWalk(FlowWalk):
    """The rank walk, keeping the guards each statement runs under."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.guards_at: dict[int, tuple] = {}
        self.env_at: dict[int, dict] = {}       # the rank-varying names before each statement

    def stmt(self, node, guards):
        self.guards_at.setdefault(id(node), tuple(guards))
        self.env_at.setdefault(id(node), dict(self.env))
        return super().stmt(node, guards)

    def small(self, node, guards):
        self.guards_at.setdefault(id(node), tuple(guards))
        self.env_at.setdefault(id(node), dict(self.env))
        return super().small(node, guards)


def _calls_unguarded(program: Program, name: str, store: Optional[tuple] = None) -> bool:
    """Every call spelled `<x>.name(...)` or `name(...)` in the checked files runs unguarded in its scope -- or,
    given `store` (the called function, a node of it), does not reach that node (`_call_skips`)."""
    for other in program._files_calling(name):
        for call in other.facts.calls:
            func = call.node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if last != name:
                continue
            info = other.facts.functions.get(call.scope) if call.scope != MODULE_SCOPE else None
            if call.scope != MODULE_SCOPE and info is None:
                return False
            if guarded(program, other, info, call.node) and not (
                    store is not None and _call_skips(store[0], store[1], call.node)):
                return False
    return True


def _call_skips(info: FunctionInfo, node: cst.CSTNode, call: cst.Call) -> bool:
    """Does `call` of the function `info` leave `node` unreached: an `if` of the function enclosing it tests a
    conjunction one of whose parts is `p is not None` (or `p` alone) of a parameter whose default is None and
    that the call passes neither by name nor by position (nor through `*`/`**`) and that the function never binds
    again?"""
    if any(a.star for a in call.args):
        return False
    params = info.node.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if info.class_name is not None and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    passed = {a.keyword.value for a in call.args if a.keyword is not None}
    passed |= set(positional[:sum(1 for a in call.args if a.keyword is None)])
    unset = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
             if p.default is not None and isinstance(p.default, cst.Name) and p.default.value == "None"
             and p.name.value not in passed}
    # a parameter the function binds again (`arg_overrides = arg_overrides or {}`) is no longer what was passed
    unset = {name for name in unset if not any(_binds_anywhere(n, name) for n in own_nodes(info.node))}
    if not unset:
        return False
    for test in _enclosing_tests(info.node, node):
        for part in _conjuncts(test):
            if isinstance(part, cst.Name) and part.value in unset:
                return True
            if isinstance(part, cst.Comparison) and len(part.comparisons) == 1 and \
                    isinstance(part.comparisons[0].operator, cst.IsNot) and isinstance(part.left, cst.Name) and \
                    part.left.value in unset and isinstance(part.comparisons[0].comparator, cst.Name) and \
                    part.comparisons[0].comparator.value == "None":
                return True
    return False


def _enclosing_tests(root: cst.CSTNode, node: cst.CSTNode) -> list:
    """The tests of the `if` statements of `root` whose body (not `else`) holds `node`."""
    out: list = []

    def search(n: cst.CSTNode) -> bool:
        if n is node:
            return True
        for child in n.children:
            if search(child):
                if isinstance(n, cst.If) and child is n.body:
                    out.append(n.test)
                return True
        return False

    search(root)
    return out


def _conjuncts(e: cst.BaseExpression) -> list:
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


# --- a local name: None on every path, or on none, of the paths the ranks can be spread over --------------------
_MAX_PATHS = 64
# library calls that build an object (never None): API facts by qualified name
_LIBRARY_CONSTRUCTORS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader",
                         "torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler",
                         "torch.tensor", "torch.zeros", "torch.ones", "torch.empty", "torch.full",
                         # torch.distributed's rank and size getters return an int (-1 outside the group), never None
                         "torch.distributed.get_rank", "torch.distributed.get_world_size",
                         "torch.distributed.distributed_c10d.get_rank",
                         "torch.distributed.distributed_c10d.get_world_size"}


def uniform_none_local(program: Program, src: "PythonSource", scope: str, name: str, test: cst.CSTNode) -> bool:
    """Is the local `name` None alike on every rank where `test` (an expression of a statement of the function
    `scope`) is evaluated? The paths through the function's `if` statements up to that statement are enumerated
    (each a set of test outcomes; a test and its negation `x == c` / `x != c` on one path is no path), each with
    what it last bound `name` to: None, an object (`never_none`), or a value bound at one place. The ranks can
    only be spread over paths that agree on every uniform test: any two paths that bind `name` differently must
    take opposite sides of a uniform test. `if rank == 0: loader = DataLoader(...)` then `if rank != 0: loader =
    Fake(...)`: not None on any path. Loops that bind the name, and more than `_MAX_PATHS` paths, give False."""
    info = src.facts.functions.get(scope)
    if info is None or not isinstance(info.node.body, cst.IndentedBlock):
        return False
    memo = program.__dict__.setdefault("_uniform_none_locals", {})
    key = (id(src), scope, name, id(test))
    if key in memo:
        return bool(memo[key])
    if (id(src), scope) in program.__dict__.get("_nullness_busy", ()):
        return False                    # asked by the walk of this very function this answer needs
    memo[key] = False                   # asked again while deciding (the walk below evaluates tests): no
    holder = _holder(info.node, test)
    if holder is None:
        return False
    walk = _PathWalk(program, src, info, name, holder)
    paths = walk.run()
    if paths is None:
        return False
    states = {state for _, state in paths}
    if states in ({"obj"}, {"none"}, {"nullness"}):
        # an object on every path, None on every path, or what one call returns, None on every rank or on none
        memo[key] = True
        return True
    # one binding on every path: the test varies with that value (the walk found it varying); only paths that bind
    # the name differently are looked at further (the walks of the function that needs are built only then)
    ok = len(states) > 1 and "var" not in states and all(
        walk.uniform_site(state) for state in states if state.startswith("site:"))
    for i, (lits_a, state_a) in enumerate(paths):
        if not ok:
            break
        for lits_b, state_b in paths[i + 1:]:
            if state_a == state_b:
                continue
            if not any((k, not pol) in lits_b and walk.uniform_key(k) for k, pol in lits_a):
                ok = False
                break
        if not ok:
            break
    memo[key] = ok
    return ok


class _PathWalk:
    def __init__(self, program: Program, src: "PythonSource", info: FunctionInfo, name: str,
                 target: cst.CSTNode) -> None:
        self.program, self.src, self.info, self.name, self.target = program, src, info, name, target
        self.tests: dict[str, cst.BaseExpression] = {}
        self.reached: list[tuple[frozenset, str]] = []
        self.sites: dict[str, tuple] = {}      # "site:<id>" → (the value, its assignment)
        self.too_many = False

    def run(self) -> Optional[list[tuple[frozenset, str]]]:
        self.block(list(self.info.node.body.body), [(frozenset(), "unbound")])
        if self.too_many or not self.reached:
            return None
        # an unbound name at the test is a parameter or a global: not decided here
        if any(state == "unbound" for _, state in self.reached):
            return None
        return self.reached

    def uniform_key(self, key: str) -> bool:
        test = self.tests.get(key)
        if test is None:
            return False
        walk = _guard_walk(self.program, self.src, self.info)
        holder = _holder(self.info.node, test)
        env = walk.env_at.get(id(holder)) if holder is not None else None
        if env is None:
            return False
        return self.program.taint(self.src).eval(test, env, self.info.class_name) is None

    def block(self, stmts: list, paths: list) -> list:
        for st in stmts:
            if not paths:
                return paths
            if st is self.target:
                self.reached.extend(paths)
                return []
            paths = self.stmt(st, paths)
            if len(paths) > _MAX_PATHS:
                self.too_many = True
                return []
        return paths

    def _contains_target(self, node: cst.CSTNode) -> bool:
        return any(n is self.target for n in _walk_all(node))

    def stmt(self, st: cst.CSTNode, paths: list) -> list:
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                if small is self.target:
                    self.reached.extend(paths)
                    return []
                if isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
                    return []
                if isinstance(small, cst.Assign):
                    paths = [(lits, self.assign(small, state)) for lits, state in paths]
                elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and _binds(small, self.name):
                    paths = [(lits, "var") for lits, _ in paths]
            return paths
        if isinstance(st, cst.If):
            return self.if_stmt(st, paths)
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            return paths
        if isinstance(st, (cst.With,)):
            if any(item.asname is not None and _binds(item.asname, self.name) for item in st.items):
                paths = [(lits, "var") for lits, _ in paths]
            return self.block(_stmts(st.body), paths)
        # loops, try, match: the target inside them, or a binding of the name there, is not followed
        if self._contains_target(st) or any(_binds_anywhere(n, self.name) for n in _walk_all(st)):
            self.too_many = True
            return []
        return paths

    def if_stmt(self, st: cst.If, paths: list) -> list:
        if self._contains_target(st.test):
            self.reached.extend(paths)
            return []
        key, positive = _test_key(st.test)
        self.tests.setdefault(key, st.test)
        taken = [(lits | {(key, positive)}, s) for lits, s in paths if (key, not positive) not in lits]
        skipped = [(lits | {(key, not positive)}, s) for lits, s in paths if (key, positive) not in lits]
        out = self.block(_stmts(st.body), taken)
        if isinstance(st.orelse, cst.If):
            out = out + self.if_stmt(st.orelse, skipped)
        elif st.orelse is not None:
            out = out + self.block(_stmts(st.orelse.body), skipped)
        else:
            out = out + skipped
        return _rejoin(out, key)

    def assign(self, node: cst.Assign, state: str) -> str:
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Name) and target.value == self.name:
                return self.value_state(node.value, node)
            if isinstance(target, (cst.Tuple, cst.List)):
                names = [el.value for el in target.elements]
                at = next((i for i, n in enumerate(names) if isinstance(n, cst.Name) and n.value == self.name), None)
                if at is None:
                    if any(_binds_anywhere(n, self.name) for n in names):
                        return "var"
                    continue
                if isinstance(node.value, (cst.Tuple, cst.List)) and len(node.value.elements) == len(names):
                    return self.value_state(node.value.elements[at].value, node)
                if isinstance(node.value, cst.Call) and _returns_element_object(
                        self.program, self.src, node.value, self.info.class_name, at, len(names)):
                    return "obj"
                if isinstance(node.value, cst.Call) and returns_none_uniformly(
                        self.program, self.src, node.value, self.info.class_name, at, len(names)):
                    return "nullness"
                self.sites[f"site:{id(node)}"] = (node.value, node)
                return f"site:{id(node)}"
        return state

    def value_state(self, value: cst.BaseExpression, node: cst.CSTNode) -> str:
        if isinstance(value, cst.Name) and value.value == "None":
            return "none"
        if never_none(self.program, self.src, value, self.info.class_name) or _library_object(self.src, value):
            return "obj"
        if isinstance(value, cst.Call) and returns_none_uniformly(self.program, self.src, value, self.info.class_name):
            return "nullness"
        self.sites[f"site:{id(node)}"] = (value, node)
        return f"site:{id(node)}"

    def uniform_site(self, state: str) -> bool:
        """Is the value bound at this place the same on every rank (then so is whether it is None)?"""
        value, node = self.sites[state]
        return self._uniform_value(value, node)

    def _uniform_value(self, value: cst.BaseExpression, node: cst.CSTNode) -> bool:
        walk = _guard_walk(self.program, self.src, self.info)
        holder = _holder(self.info.node, node)
        env = walk.env_at.get(id(holder)) if holder is not None else None
        return env is not None and self.program.taint(self.src).eval(value, env, self.info.class_name) is None


def _rejoin(paths: list, key: str) -> list:
    """The paths past an `if` on `key`: two that differ only in its outcome -- the same other outcomes, the same
    binding of the name -- are one path that does not depend on it (`L and k` or `L and not k` is `L`). A test
    whose branches leave the name alike thus adds no path (a function of many uniform `if`s around logging,
    checkpoint loading or timers stays far below `_MAX_PATHS`)."""
    rest: dict = {}
    for lits, state in paths:
        rest.setdefault((lits - {(key, True), (key, False)}, state), set()).update(
            pol for k, pol in lits if k == key)
    if all(len(pols) < 2 for pols in rest.values()):
        return paths
    out, seen = [], set()
    for lits, state in paths:
        base = lits - {(key, True), (key, False)}
        if len(rest[(base, state)]) == 2:
            if (base, state) not in seen:
                seen.add((base, state))
                out.append((base, state))
        else:
            out.append((lits, state))
    return out


def _stmts(body: cst.CSTNode) -> list:
    return list(body.body) if isinstance(body, cst.IndentedBlock) else [body]


def _binds_anywhere(node: cst.CSTNode, name: str) -> bool:
    if isinstance(node, (cst.Assign,)):
        return any(isinstance(n, cst.Name) and n.value == name for t in node.targets for n in _walk_all(t.target))
    if isinstance(node, (cst.For, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.With, cst.AsName)):
        return _binds(node, name) if not isinstance(node, cst.AsName) else dotted_name(node.name) == name
    return False


def _test_key(test: cst.BaseExpression) -> tuple[str, bool]:
    """A test's outcome as (key, polarity): `x != c` is `x == c` false, `not t` is `t` false."""
    from dslint.program.statement_walks import code_of
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        key, positive = _test_key(test.expression)
        return key, not positive
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        left, right = code_of(test.left, 400), code_of(test.comparisons[0].comparator, 400)
        if isinstance(op, (cst.Equal, cst.NotEqual)):
            return f"{left} == {right}", isinstance(op, cst.Equal)
        if isinstance(op, (cst.Is, cst.IsNot)):
            return f"{left} is {right}", isinstance(op, cst.Is)
        if isinstance(op, (cst.In, cst.NotIn)):
            return f"{left} in {right}", isinstance(op, cst.In)
    return code_of(test, 400), True


def _library_object(src: "PythonSource", value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and src.facts.resolve_expr(value.func) in _LIBRARY_CONSTRUCTORS


def _returns_element_object(program: Program, src: "PythonSource", call: cst.Call, cls: Optional[str], at: int,
                            width: int) -> bool:
    """`a, b = f(...)` where every return of the checked `f` is a tuple of `width` whose element `at` is an
    object (a literal, a constructor, a local bound to objects only)."""
    hit = program.function_info(program.call_source(src, src.facts.resolve_expr(call.func), cls, fields=False))
    if hit is None:
        return False
    other, info = hit
    returns = list(iter_returns(info.node.body))
    if not returns:
        return False
    for r in returns:
        if not isinstance(r.value, (cst.Tuple, cst.List)) or len(r.value.elements) != width:
            return False
        element = r.value.elements[at].value
        if not (never_none(program, other, element, info.class_name) or _library_object(other, element)
                or _local_object(program, other, info, element, 1)):
            return False
    return True


def returns_none_uniformly(program: Program, src: "PythonSource", call: cst.Call, cls: Optional[str],
                           at: Optional[int] = None, width: int = 0) -> bool:
    """Is what the checked function `call` runs returns (element `at` of the tuple of `width` it returns; None:
    the whole value) None on every rank or on none, whatever else varies in it? Every `return` gives there either
    None -- and then no rank-dependent test or earlier rank-dependent exit stands before that `return`
    (`guarded`), nor a loop or an exception handler around it: the ranks that return None are decided by values
    the same on every rank -- or a value that is not None (not a None literal, a parameter, a conditional with a
    None side, or a local the function binds to None): Megatron's `_load_base_checkpoint` returns `None, "",
    False` when the tracker file (one path for every rank) is missing, before any per-rank checkpoint name is
    computed, and the per-rank `state_dict` otherwise (issue 30, cause 3: the nullness of a value split from its
    value, per path and across the call). A function that may end without a `return` (an implicit None) is not
    decided here."""
    hit = program.function_info(program.call_source(src, src.facts.resolve_expr(call.func), cls, fields=False))
    if hit is None:
        return False
    other, info = hit
    if not isinstance(info.node.body, cst.IndentedBlock) or not info.node.body.body or \
            not ends_in_exit(info.node.body.body[-1]):
        return False
    returns = list(iter_returns(info.node.body))
    params = set(info.params)
    nones = []
    for r in returns:
        value = r.value
        if at is not None:
            if not isinstance(value, (cst.Tuple, cst.List)) or len(value.elements) != width:
                return False
            value = value.elements[at].value
        if value is None or isinstance(value, cst.Name) and value.value == "None":
            nones.append(r)
        elif _may_be_none(info, value, params):
            return False
    if not nones:
        return False
    return all(not in_loop_or_handler(info.node.body, r) and not guarded(program, other, info, r) for r in nones)



def _may_be_none(info: FunctionInfo, value: cst.BaseExpression, params: set) -> bool:
    """May this returned value be None: a None literal, a conditional with a None side, a parameter, a local the
    function binds to one of those or otherwise than by a plain `name = <value>` (unpacking, a loop, `+=`)."""
    if isinstance(value, cst.IfExp):
        return _may_be_none(info, value.body, params) or _may_be_none(info, value.orelse, params)
    if not isinstance(value, cst.Name):
        return False
    if value.value == "None" or value.value in params:
        return True
    for node in own_nodes(info.node):
        if isinstance(node, cst.Assign) and _binds_anywhere(node, value.value):
            plain = all(isinstance(t.target, cst.Name) for t in node.targets)
            if not plain or _may_be_none(info, node.value, set()) or isinstance(node.value, cst.Name):
                return True
        elif _binds_anywhere(node, value.value):
            return True
    return False



# --- a field holding a rank id: set on every rank, or on none ---------------------------------------------------
def uniform_none_rank_field(program: Program, src: "PythonSource", e: cst.Attribute) -> bool:
    """Is `receiver.attr`, a field that holds a rank id by provenance (`ProjectTaint.rank_field`: `cfg.
    data_parallel_rank = get_data_parallel_rank()`, `args.gpu = gpu` in a spawned worker), None alike on every
    rank? Its value differs per rank, whether it is there does not when every store of an attribute so spelled in
    the checked files (a superset of this field's) is `None`, a rank id (an int on every rank), or never None,
    and runs on every rank that runs its function: unguarded there (`guarded`; the field's own `is None` test
    before the store counts as alike -- set on every rank or on none on entry, the store then runs on every rank
    or on none), in a function whose calls are unguarded too (`_calls_unguarded`; a constructor or a process
    launcher's worker is called alike). `is None` of it asks whether the configuration set it, not which rank
    this is. False when the attribute is also set another way (`setattr`, unpacking, `+=`) or nowhere."""
    attr = e.attr.value
    memo = program.__dict__.setdefault("_uniform_none_rank_fields", {})
    if attr in memo:
        return memo[attr]
    memo[attr] = True                   # asked again while deciding (the store's own `is None` guard): alike
    memo[attr] = _decide_rank_field(program, attr)
    return memo[attr]


def _decide_rank_field(program: Program, attr: str) -> bool:
    stores = 0
    store = re.compile(rf"\.{re.escape(attr)}\s*(?:[-+*/%|&^@]|//|\*\*|>>|<<)?=(?!=)|\b{re.escape(attr)}\b\s*[,)\]]")
    for where in program.project.mentioning(attr):
        if "setattr" in where.text and _sets_by_name(program, where, attr):
            return False
        if not store.search(where.text):
            continue                    # no store of the attribute, nor unpacking into it: nothing to walk
        for node in _walk_all(where.module):
            if not isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                continue
            targets = _store_targets(node)
            if not any(isinstance(t, cst.Attribute) and t.attr.value == attr for t in targets):
                continue
            if not isinstance(node, cst.Assign) or len(node.targets) != 1 or \
                    not isinstance(node.targets[0].target, cst.Attribute):
                return False            # `+=`, an annotated store, unpacking: not followed
            info = _function_holding(where, node)
            if info is False:
                return False            # in a nested function or a lambda: when it runs is not known here
            value = node.value
            taint = program.taint(where)
            is_none = isinstance(value, cst.Name) and value.value == "None"
            cls = info.class_name if info is not None else None
            if not is_none and not never_none(program, where, value, cls):
                held = taint.eval(value, program.module_env(where), cls) \
                    if isinstance(value, (cst.Name, cst.Attribute, cst.Call)) else None
                handed = isinstance(value, cst.Name) and info is not None and value.value in info.params
                if not handed and not (held is not None and held.kind == "rank"
                                       and isinstance(value, (cst.Call, cst.Attribute))):
                    return False
            stores += 1
            if guarded(program, where, info, node):
                return False
            if info is not None and info.name != "__init__" and not _calls_unguarded(program, info.name):
                return False
    return stores > 0


def _function_holding(src: "PythonSource", node: cst.CSTNode):
    """The function whose own statements hold `node` (None: the module's top level; False: a nested scope)."""
    for info in src.facts.functions.values():
        if any(n is node for n in own_nodes(info.node)):
            return info
    if any(n is node for n in own_nodes(src.module)):
        return None
    return False
