"""Values a helper hands back from its collective (issue 30 item 3: one rank-uniformity lattice).

A checked function whose every return, on the paths a distributed run takes, is what a collective left in a
name (`_fresh` of its walk: the buffer `dist.all_reduce`/`broadcast_object_list` wrote, or an item of it --
`return outputs[0]` after `scatter_object_list(outputs, ...)`) hands back that collective's payload: a call of
it binds a payload too, so the names each branch of a rank test binds from such a call (the source rank's
`data = self._scatter_object_list(data)`, the others' `data = self._scatter_object_list(None)`) are not joined
as varying by the test (`FlowWalk._join_after`); they keep the origin the collective gives them.

`scatter_object_list` hands each rank its own item of the source's list: a value of its own ("item"), whose
None-ness is the same on every rank when every list the source can send holds items alike in it
(`scatters_alike`): `[None] * n` (one object repeated), `[next(it) for _ in range(n)]` (items drawn from one
iterator: a loader's batches, which the lattice takes as alike in presence as it does a collated batch's,
`Origin.batch`), a display of literals all None or none. The list is looked for where it is built: in the
function that scatters it, or, for a parameter, at every call of that function the checked files hold (a
caller passing None receives only); a binding counts when it comes before the call in the text (a superset of
those reaching it, but for a loop's later statements).

Only a helper whose collectives run over WORLD (or a group it is handed or computes, `HANDED_IN`) hands back a
payload here: one over a sub-group of known grid axes is the same over that group only, and a test of other
coordinates still splits it (`_over_whole_groups`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import FunctionInfo, dotted_name
from dslint.program.statement_walks import iter_assigns
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.sources import PythonSource

# collectives whose written buffer (or, for scatter, this rank's item) a helper can hand back
PAYLOAD_COLLECTIVES = frozenset({"all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor",
                                 "broadcast", "broadcast_object_list", "scatter_object_list", "reduce_scatter",
                                 "reduce_scatter_tensor"})
_MODULES = ("torch.distributed", "deepspeed.comm")


def payload_scopes(analysis) -> set:
    """(id of source, qualified name) of every function that calls a `PAYLOAD_COLLECTIVES` collective itself, on
    the outlines: no file is parsed for it. Memoised on the analysis."""
    memo = analysis.__dict__.get("_payload_scopes")
    if memo is None:
        files = analysis.project.mentioning(*sorted(PAYLOAD_COLLECTIVES))
        calls = [(other, callee, scope) for other in files
                 for callee, scope in (other.outline.calls if other.outline is not None else ()) if callee]
        memo = {(id(other), scope) for other, callee, scope in calls
                if callee.startswith(_MODULES) and callee.rsplit(".", 1)[-1] in PAYLOAD_COLLECTIVES}
        # and those calling a function of these files that writes its argument with an in-place collective itself
        # (a candidate by its name only: `collective_wrapper` decides, when the walk meets the call)
        wrappers = {scope.rsplit(".", 1)[-1] for other, callee, scope in calls
                    if callee.startswith(_MODULES) and callee.rsplit(".", 1)[-1] in _IN_PLACE}
        memo |= {(id(other), scope) for other, callee, scope in calls
                 if not callee.startswith(_MODULES) and callee.rsplit(".", 1)[-1] in wrappers}
        analysis.__dict__["_payload_scopes"] = memo
    return memo


def returns_payload(analysis, source: tuple["PythonSource", str]) -> bool:
    """Does this checked function (source, qualified name) hand back, on every return a distributed run's paths
    take, its collective's payload (`FlowWalk.payload_returns`)? Memoised per function."""
    from dslint.program.rank.reaching_ranks import FlowWalk
    if (id(source[0]), source[1]) not in payload_scopes(analysis):
        return False
    memo = analysis.__dict__.setdefault("_returns_payload", {})
    key = (id(source[0]), source[1])
    if key not in memo:
        memo[key] = False           # while its own walk asks
        hit = analysis.function_info(source)
        if hit is not None and _over_whole_groups(*hit):
            other, info = hit
            walk = FlowWalk(analysis.taint(other), scope=info.qualname, env=dict(analysis.globals_for(other, info)),
                            cls=info.class_name)
            walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
            memo[key] = bool(walk.payload_returns)
            if memo[key]:
                analysis.__dict__.setdefault("_payload_origin", {})[key] = walk.returned
    return memo[key]


def payload_origin(analysis, source: tuple["PythonSource", str]):
    """What a payload-returning helper (`returns_payload`) hands back, as its own walk saw it: None for a
    uniform payload (a reduced or broadcast buffer), this rank's item for a `scatter_object_list` item (alike
    in None-ness on every rank or not, `Origin.present`)."""
    if not returns_payload(analysis, source):
        return None
    return analysis.__dict__.get("_payload_origin", {}).get((id(source[0]), source[1]))


def _over_whole_groups(src: "PythonSource", info: FunctionInfo) -> bool:
    """Does every payload collective the function calls itself run over a group of no known grid axes (WORLD, or
    one it is handed or computes)? A payload of a sub-group (`group=mpu.get_model_parallel_group()`) is uniform
    over that group only: which branch of a rank test bound it still matters, so it is no payload here."""
    from dslint.program.process_groups import group_argument, resolve_group
    for c in src.facts.calls:
        last = (c.callee or "").rsplit(".", 1)[-1]
        if c.scope != info.qualname or last not in PAYLOAD_COLLECTIVES or not (c.callee or "").startswith(_MODULES):
            continue
        group = resolve_group(src, group_argument(c.node, last), info.node, at=c.node)
        if group.axes is not None or group.ranks is not None:
            return False
    return True


def scatters_alike(analysis, src: "PythonSource", scope: str, sent: cst.BaseExpression, call: cst.Call) -> bool:
    """Does every list the source rank can scatter here (`sent`) hold items alike in being None or not?"""
    if not isinstance(sent, cst.Name):
        return _alike_items(sent, None)
    info = src.facts.functions.get(scope)
    if info is None:
        return False
    params = [p.name.value for p in info.node.params.params]
    if sent.value not in params:
        return _bound_alike(src, info, sent.value, call)
    sites = analysis.calls_of(src, info)
    lists = 0
    for other, site, caller in sites:
        arg = _argument(site, info, sent.value)
        if arg is None:
            return False
        if isinstance(arg, cst.Name) and arg.value == "None":
            continue                # a rank that only receives
        if caller is None or not (_bound_alike(other, caller, arg.value, site) if isinstance(arg, cst.Name)
                                  else _alike_items(arg, None)):
            return False
        lists += 1
    return lists > 0


def _argument(call: cst.Call, info: FunctionInfo, param: str) -> Optional[cst.BaseExpression]:
    """The expression a call passes for `param` (None when it passes none or spreads `*args`/`**kwargs`)."""
    params = [p.name.value for p in info.node.params.params]
    if info.class_name is not None and isinstance(call.func, cst.Attribute) and params[:1] in (["self"], ["cls"]):
        params = params[1:]
    positional = 0
    for a in call.args:
        if a.star:
            return None
        if a.keyword is not None:
            if a.keyword.value == param:
                return a.value
            continue
        if positional < len(params) and params[positional] == param:
            return a.value
        positional += 1
    return None


def _bound_alike(src: "PythonSource", info: FunctionInfo, name: str, at: cst.CSTNode) -> bool:
    """Every binding of `name` in `info` that may reach `at` (`_reaching_values`: those before it in the text
    that no later plain binding of the same block, still before it, overwrites) is a list of items alike in
    None-ness, or None (a rank holding None sends nothing: it only receives, and on the source
    `scatter_object_list` raises), and one is a list; no other kind of binding (a loop target, `+=`) does."""
    values = _reaching_values(src, info.node.body, name, src.span(at).line)
    if values is None:
        return False
    iterators = {dotted_name(t.target) for node in iter_assigns(info.node.body) for t in node.targets
                 if isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name)
                 and node.value.func.value == "iter"}
    lists = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
    return bool(lists) and all(_alike_items(v, iterators) for v in lists)


def _reaching_values(src: "PythonSource", body: cst.CSTNode, name: str, line: int
                     ) -> Optional[list[cst.BaseExpression]]:
    """The values of the plain bindings of `name` (`name = v`, `name: T = v`) before `line` that no later plain
    binding of the same statement block, also before `line`, overwrites (a superset of those reaching `line`);
    None when there is none, or when another kind of binding of `name` (a loop target, `+=`, `with … as`, an
    unpacking) comes before `line`."""
    from dslint.program.process_groups import _binds_otherwise
    from dslint.program.statement_walks import sub_statements
    out: list = []
    todo = [body]
    while todo:
        block = todo.pop()
        last: Optional[cst.BaseExpression] = None
        for stmt in sub_statements(block):
            if src.span(stmt).line >= line:
                break
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            if not isinstance(stmt, cst.SimpleStatementLine):
                if _binds_otherwise(_header_only(stmt), name):
                    return None
                todo.extend(_blocks_in(stmt))
                continue
            for small in stmt.body:
                value = _plain_value(small, name)
                if value is not None:
                    last = value                # overwrites the block's earlier binding
                elif _binds_otherwise(small, name) or isinstance(small, cst.Assign) and any(
                        name in _names_in(t.target) for t in small.targets):
                    return None
        if last is not None:
            out.append(last)
    return out or None


def _plain_value(small: cst.CSTNode, name: str) -> Optional[cst.BaseExpression]:
    """`v` of `name = v` / `name: T = v`."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and dotted_name(small.targets[0].target) == name:
        return small.value
    if isinstance(small, cst.AnnAssign) and small.value is not None and dotted_name(small.target) == name:
        return small.value
    return None


def _names_in(target: cst.BaseExpression) -> set:
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for el in target.elements for n in _names_in(el.value)}
    if isinstance(target, cst.StarredElement):
        return _names_in(target.value)
    name = dotted_name(target)
    return {name} if name else set()


def _header_only(stmt: cst.CSTNode) -> cst.CSTNode:
    """A compound statement without its nested blocks (what binds in its header: `for x in`, `with … as x`)."""
    if isinstance(stmt, cst.For):
        return cst.For(target=stmt.target, iter=stmt.iter, body=cst.IndentedBlock(body=[]))
    if isinstance(stmt, cst.With):
        return cst.With(items=stmt.items, body=cst.IndentedBlock(body=[]))
    return cst.Pass()


def _blocks_in(stmt: cst.CSTNode) -> list:
    """The statement blocks a compound statement nests (its body, `else`, handlers, `finally`), each once."""
    from dslint.program.statement_walks import sub_statements
    out, todo = [], list(sub_statements(stmt))
    while todo:
        n = todo.pop()
        if isinstance(n, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            out.append(n)
        elif not isinstance(n, (cst.BaseSmallStatement, cst.SimpleStatementLine, cst.BaseExpression)):
            todo.extend(sub_statements(n))
    return out


def _alike_items(e: cst.BaseExpression, iterators: Optional[set]) -> bool:
    """A list whose items are all None or none is: `[x] * n` (one object repeated), a comprehension of
    `next(it)` over an iterator the function made with `iter(...)`, of slices (`xs[i:j]`, never None) or of a
    literal, a display of literals all None or all other."""
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply):
        return any(isinstance(side, cst.List) and len(side.elements) == 1 and not
                   isinstance(side.elements[0], cst.StarredElement) for side in (e.left, e.right))
    if isinstance(e, cst.ListComp):
        item = e.elt
        if isinstance(item, cst.Call) and isinstance(item.func, cst.Name) and item.func.value == "next" and \
                len(item.args) == 1 and iterators and dotted_name(item.args[0].value) in iterators:
            return True
        if isinstance(item, cst.Subscript) and item.slice and all(isinstance(el.slice, cst.Slice)
                                                                  for el in item.slice):
            return True             # `[data[i:j] for i, j in ...]`: slices, never None
        return literal_value(item) is not UNKNOWN
    if isinstance(e, (cst.List, cst.Tuple)) and e.elements:
        values = [literal_value(el.value) if not isinstance(el, cst.StarredElement) else UNKNOWN
                  for el in e.elements]
        return UNKNOWN not in values and len({v is None for v in values}) == 1
    return False


# --- the project's own wrappers of an in-place collective -------------------------------------------------------
_IN_PLACE = ("broadcast", "all_reduce")


def collective_wrapper(analysis, src: "PythonSource", call: cst.Call, cls: Optional[str]
                       ) -> Optional[tuple[str, cst.BaseExpression, Optional[cst.BaseExpression]]]:
    """`broadcast(buffer, src=src_rank, group=group)` where `broadcast` is a checked function that, on every path
    of its body, writes its first parameter in place with a collective (`dist.broadcast(tensor, src=src, group=
    group)`, or on another path `tensor.zero_()` on the other ranks and an all_reduce of it -- fairseq's XLA
    form -- through `dist` or another such wrapper): (the collective, "broadcast" when some path broadcasts the
    parameter and "all_reduce" otherwise; the caller's argument written; for a broadcast, the caller's argument
    for the parameter the wrapper passes as `src`, None when it passes none of them). None for any other call."""
    callee = analysis.taint(src).facts.resolve_expr(call.func)
    if not callee or callee.startswith(_MODULES):
        return None
    source = analysis.call_source(src, callee, cls)
    hit = _wrapper_of(analysis, source, 0) if source is not None else None
    if hit is None:
        return None
    op, src_param, info = hit
    written = _argument(call, info, info.params[1 if info.class_name and info.params[:1] in (["self"], ["cls"])
                                                else 0])
    if written is None:
        return None
    return op, written, (_argument(call, info, src_param) if src_param is not None else None)


def _wrapper_of(analysis, source: tuple["PythonSource", str], depth: int
                ) -> Optional[tuple[str, Optional[str], FunctionInfo]]:
    """`collective_wrapper` of the function itself: (collective, its parameter passed as `src`, its info).
    Memoised per function."""
    memo = analysis.__dict__.setdefault("_collective_wrappers", {})
    key = (id(source[0]), source[1])
    if key in memo:
        return memo[key]
    memo[key] = None                # while its own calls ask
    hit = analysis.function_info(source)
    if hit is None or depth > 3:
        return None
    other, info = hit
    params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
    if not params or not isinstance(info.node.body, cst.IndentedBlock):
        return None
    param = params[0]
    found: dict[str, Optional[str]] = {}     # collective -> the parameter passed as `src`

    def writes(stmt: cst.CSTNode) -> bool:
        """Does the statement call a collective writing `param` in place?"""
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            value = small.value if isinstance(small, cst.Expr) else None
            if not isinstance(value, cst.Call) or not value.args or value.args[0].keyword is not None or \
                    dotted_name(value.args[0].value) != param:
                continue
            resolved = other.facts.resolve_expr(value.func) or ""
            if resolved.startswith(_MODULES) and resolved.rsplit(".", 1)[-1] in _IN_PLACE:
                op = resolved.rsplit(".", 1)[-1]
                if op == "broadcast":
                    sent = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "src"),
                                value.args[1].value if len(value.args) > 1 and value.args[1].keyword is None
                                else None)
                    found[op] = sent.value if isinstance(sent, cst.Name) and sent.value in params else None
                else:
                    found.setdefault(op, None)
                return True
            inner = analysis.call_source(other, resolved, info.class_name) if resolved else None
            nested = _wrapper_of(analysis, inner, depth + 1) if inner is not None else None
            if nested is not None:
                found.setdefault(nested[0], None)
                return True
        return False

    def every_path(stmts) -> bool:
        """Does every path through `stmts` write `param` before it returns? A path that raises never returns; one
        that returns having made no torch.distributed call at all is another backend's (XLA's `xm.all_reduce`),
        outside the runs modelled here."""
        for stmt in stmts:
            if writes(stmt):
                return True
            if isinstance(stmt, cst.SimpleStatementLine):
                if any(isinstance(s, cst.Raise) for s in stmt.body):
                    return True
                if any(isinstance(s, cst.Return) for s in stmt.body):
                    return False
                continue
            if isinstance(stmt, cst.If):
                branches, link = [], stmt
                while True:
                    branches.append(link.body.body)
                    if isinstance(link.orelse, cst.If):
                        link = link.orelse
                        continue
                    branches.append(link.orelse.body.body if isinstance(link.orelse, cst.Else) else ())
                    break
                done = [every_path(b) or _foreign(other, b) for b in branches]
                if all(done):
                    return True
                if any(not ok and any(_returns_in(st) for st in b) for ok, b in zip(done, branches)):
                    return False
                continue
            if _returns_in(stmt):
                return False
        return False

    if not every_path(info.node.body.body) or not found:
        return None
    op = "broadcast" if "broadcast" in found else "all_reduce"
    memo[key] = (op, found.get("broadcast"), info)
    return memo[key]


def _foreign(src: "PythonSource", stmts) -> bool:
    """A branch that returns having called nothing of torch.distributed / deepspeed.comm itself."""
    if not any(_returns_in(st) for st in stmts):
        return False
    return not any((src.facts.resolve_expr(c.func) or "").startswith(_MODULES)
                   for st in stmts for c in _calls_in(st))


def _calls_in(stmt: cst.CSTNode) -> list:
    found: list = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)
    stmt.visit(_Find())
    return found


def _returns_in(stmt: cst.CSTNode) -> bool:
    """Does a `return` (or `raise`) sit anywhere in the compound statement?"""
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

        def visit_Raise(self, node: cst.Raise) -> None:
            found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False
    stmt.visit(_Find())
    return bool(found)
