"""A DeepSpeed MoE layer whose gate runs the project's own gating code (issue 30, capacity-allreduced-no-drop).

Repositories patch the gate of a `deepspeed.moe.layer.MoE` with their own copy of DeepSpeed's gating
(`layer.deepspeed_moe.gate.forward = make_gate_forward(layer.deepspeed_moe.gate)`: the MoE layer holds its
`MOELayer` as `deepspeed_moe`, which holds its `TopKGate` as `gate` -- DeepSpeed's object structure). Then
DeepSpeed's release facts about the capacity (the clamp to the local token count, which group the MAX
all_reduce spans) say nothing: what sizes the `[E, C, M]` all_to_all buffer is the project's code.

`patched_gating(project, site)` reads that code. The replacement forward is the function the patch installs (a
project function, or the nested function a project factory returns); the gating functions are it and the
project functions it calls. In each, the capacity dimension of the dispatch buffer is the size argument of a
`one_hot` (torch's, or a project helper that hands a parameter to one). Walking the function's statements in
order (an `if` on a flag the call settles -- `drop_tokens` bound to the gate's `drop_tokens`, the MoE layer's
constructor argument, or a literal -- walks its taken branch only), each local is LOCAL (computed from the
function's inputs: this rank's tokens), REDUCED (all-reduced with MAX over the world group, or over the gate's
`ep_group` handed in as `gate.ep_group`, or computed from such
a value and run-wide values only) or UNIFORM (neither). The buffer sizes agree on every rank when every size
argument reached is not LOCAL and at least one MAX all_reduce makes one REDUCED: `Gating.uniform`. A `.device`
or `.dtype` read is placement, not a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import dotted_name
from dslint.sources.cstwalk import walk
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.program.models.moe import MoESite
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

LOCAL, REDUCED, UNIFORM = "local", "reduced", "uniform"
# the path from a DeepSpeed `MoE` object to its gate's forward: MoE.deepspeed_moe (MOELayer).gate (TopKGate)
_GATE_PATH = ".deepspeed_moe.gate.forward"
_WORLD_GROUPS = ("get_world_group", "WORLD")
_PLACEMENT = ("device", "dtype")
_MAX_DEPTH = 3
# a parameter bound to the gate's own `ep_group` (TopKGate.ep_group: the expert-parallel group its all_to_all runs on)
EP_GROUP = "<the gate's ep_group>"


@dataclass(frozen=True)
class Gating:
    """The project's gating that a patched gate runs: `uniform` True when every capacity it sizes a dispatch
    buffer with is all-reduced to the max (or run-wide), False when one follows the local token count, None when
    the code does not tell (unreadable, no buffer size found); `at` the patch statement and `where` its file."""
    uniform: Optional[bool]
    why: str
    at: cst.CSTNode
    where: "PythonSource"


def patched_gating(project: "ProjectView", site: "MoESite") -> Optional[Gating]:
    """The project gating installed on `site`'s gate, judged; None when the gate is DeepSpeed's own."""
    memo = project.__dict__.setdefault("_patched_gating", {})
    key = id(site.call.node)
    if key not in memo:
        memo[key] = _judge(project, site)
    return memo[key]


def _judge(project: "ProjectView", site: "MoESite") -> Optional[Gating]:
    src = site.src
    scope = site.scope.node if site.scope is not None else src.module
    holder = _bound_to(scope, site.call.node)
    if holder is None:
        return None
    patch = next((a for a in _assigns(scope) if any(dotted_name(t.target) == holder + _GATE_PATH
                                                       for t in a.targets)), None)
    if patch is None:
        return None
    drop = site.get("drop_tokens")
    drop_value = drop.value if drop.known else UNKNOWN
    forwards = _installed(project, src, patch.value)
    if not forwards:
        return Gating(None, "its gate's forward is replaced by code dslint cannot read, so nothing shows the "
                             "capacity is all-reduced", patch, src)
    walker = _Walker(project, drop_value)
    for where, fn in forwards:
        walker.function(where, fn, {}, 0)
    if walker.local_sink is not None:
        where, node = walker.local_sink
        return Gating(False, f"its gate runs the project's gating, which sizes the dispatch buffer with a capacity "
                             f"computed from the local token count ({where.path}:{where.span(node).line}) under "
                             f"drop_tokens={drop_value if drop_value is not UNKNOWN else '?'}", patch, src)
    if not walker.sinks or not walker.reduced:
        return Gating(None, "its gate runs the project's gating, where dslint finds no capacity all-reduced to "
                             "the max before the buffer is sized", patch, src)
    where, node = walker.reduced[0]
    return Gating(True, f"its gate runs the project's gating, which all-reduces the capacity with MAX over the "
                        f"world or the expert-parallel group ({where.path}:{where.span(node).line}) before sizing "
                        f"the all_to_all buffer",
                  patch, src)


def _assigns(scope: cst.CSTNode):
    return (n for n in walk(scope) if isinstance(n, cst.Assign))


def _bound_to(scope: cst.CSTNode, call: cst.Call) -> Optional[str]:
    """The name (`self.mlp`, `layer`) the MoE construction is assigned to."""
    for a in _assigns(scope):
        if a.value is call and len(a.targets) == 1:
            return dotted_name(a.targets[0].target)
    return None


def _installed(project, src, value: cst.BaseExpression) -> list:
    """The functions a patch installs: a project function named, or the nested functions a project factory
    called there returns."""
    if isinstance(value, cst.Call):
        hit = project.function_for_callee(src, src.facts.resolve_expr(value.func))
        if hit is None or hit[0].facts is None:
            return []
        info = hit[0].facts.functions.get(hit[1])
        if info is None:
            return []
        nested = {n.name.value: n for n in info.node.body.body if isinstance(n, cst.FunctionDef)} \
            if isinstance(info.node.body, cst.IndentedBlock) else {}
        out = []
        for n in walk(info.node.body):
            if isinstance(n, cst.Return) and isinstance(n.value, cst.Name) and n.value.value in nested:
                out.append((hit[0], nested[n.value.value]))
        return out
    hit = project.function_for_callee(src, src.facts.resolve_expr(value))
    if hit is None or hit[0].facts is None:
        return []
    info = hit[0].facts.functions.get(hit[1])
    return [(hit[0], info.node)] if info is not None else []


def _params(fn: cst.FunctionDef) -> list[cst.Param]:
    p = fn.params
    return list(p.posonly_params) + list(p.params) + list(p.kwonly_params)


class _Walker:
    def __init__(self, project, drop) -> None:
        self.project = project
        self.drop = drop
        self.sinks: list = []
        self.local_sink: Optional[tuple] = None
        self.reduced: list = []
        self._size_params: dict = {}

    # ---- one gating function --------------------------------------------------------------------------------
    def function(self, src, fn: cst.FunctionDef, flags: dict, depth: int) -> None:
        state = {p.name.value: LOCAL for p in _params(fn)}
        for name in flags:
            state[name] = UNIFORM
        self.block(src, fn.body, state, flags, depth)

    def block(self, src, body, state: dict, flags: dict, depth: int) -> dict:
        stmts = body.body if isinstance(body, cst.IndentedBlock) else [body] if body is not None else []
        if isinstance(body, cst.SimpleStatementSuite):
            stmts = [body]
        for stmt in stmts:
            state = self.statement(src, stmt, state, flags, depth)
        return state

    def statement(self, src, stmt, state: dict, flags: dict, depth: int) -> dict:
        if isinstance(stmt, cst.If):
            taken = self._settled(stmt.test, flags)
            self.expressions(src, stmt.test, state, flags, depth)
            if taken is True:
                return self.block(src, stmt.body, dict(state), flags, depth)
            orelse = stmt.orelse
            if taken is False:
                if orelse is None:
                    return state
                return self.statement(src, orelse, state, flags, depth) if isinstance(orelse, cst.If) else \
                    self.block(src, orelse.body, dict(state), flags, depth)
            one = self.block(src, stmt.body, dict(state), flags, depth)
            other = state if orelse is None else self.statement(src, orelse, dict(state), flags, depth) \
                if isinstance(orelse, cst.If) else self.block(src, orelse.body, dict(state), flags, depth)
            return _merge(one, other)
        if isinstance(stmt, cst.Else):
            return self.block(src, stmt.body, state, flags, depth)
        if isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
            if isinstance(stmt, cst.For):
                for n in walk(stmt.target):
                    if isinstance(n, cst.Name):
                        state[n.value] = _join(state.get(n.value, UNIFORM), self.status(stmt.iter, state))
            after = self.block(src, stmt.body, dict(state), flags, depth)
            return _merge(state, after) if isinstance(stmt, (cst.For, cst.While)) else after
        if isinstance(stmt, cst.FunctionDef):
            return state
        if isinstance(stmt, cst.SimpleStatementLine) or isinstance(stmt, cst.SimpleStatementSuite):
            for small in stmt.body:
                self.expressions(src, small, state, flags, depth)
                if isinstance(small, cst.Assign):
                    status = self.status(small.value, state)
                    for t in small.targets:
                        for n in walk(t.target):
                            if isinstance(n, cst.Name):
                                state[n.value] = status
                elif isinstance(small, cst.AugAssign):
                    name = dotted_name(small.target)
                    if name is not None:
                        state[name] = _join(state.get(name, UNIFORM), self.status(small.value, state))
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    reduced = self._max_all_reduce(src, small.value, flags)
                    if reduced is not None:
                        state[reduced] = REDUCED
                        self.reduced.append((src, small.value))
        return state

    # ---- values ---------------------------------------------------------------------------------------------
    def status(self, e: cst.BaseExpression, state: dict) -> str:
        out = UNIFORM
        skip: set[int] = set()
        for n in walk(e):
            if _trailing_dimension(n):
                # `gates.shape[1]`, `x.size(-1)`: a dimension after the leading one -- the gate works on the
                # [S, M] reshaped tokens, so only the leading dimension counts this rank's tokens
                skip.update(id(m) for m in walk(n))
            if isinstance(n, cst.Attribute):
                if n.attr.value in _PLACEMENT:
                    skip.update(id(m) for m in walk(n.value))
                skip.add(id(n.attr))
            if isinstance(n, cst.Arg) and n.keyword is not None:
                skip.add(id(n.keyword))
            if isinstance(n, cst.Name) and id(n) not in skip:
                out = _join(out, state.get(n.value, UNIFORM))
        return out

    def _max_all_reduce(self, src, call: cst.Call, flags: dict) -> Optional[str]:
        """`dist.all_reduce(x, op=ReduceOp.MAX[, group=<the world, or the gate's ep_group>])`: the name written
        with the max (over the world, or over the very group the all_to_all runs on)."""
        callee = src.facts.resolve_expr(call.func) or ""
        if callee.rsplit(".", 1)[-1] != "all_reduce" or not call.args or call.args[0].keyword is not None:
            return None
        op = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "op"), None)
        if op is None or not (isinstance(op, cst.Attribute) and op.attr.value == "MAX"):
            return None
        group = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "group"), None)
        if group is not None and not (isinstance(group, cst.Name) and flags.get(group.value) == EP_GROUP):
            text = dotted_name(group.func if isinstance(group, cst.Call) else group) or ""
            if text.rsplit(".", 1)[-1] not in _WORLD_GROUPS:
                return None         # a group dslint cannot compare with the expert-parallel one
        return dotted_name(call.args[0].value)

    def _settled(self, test: cst.BaseExpression, flags: dict) -> Optional[bool]:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._settled(test.expression, flags)
            return None if inner is None else not inner
        if isinstance(test, cst.Name) and isinstance(flags.get(test.value), bool):
            return flags[test.value]
        return None

    # ---- calls: sizes and callees -----------------------------------------------------------------------------
    def expressions(self, src, node, state: dict, flags: dict, depth: int) -> None:
        for call in (n for n in walk(node) if isinstance(n, cst.Call)):
            size = self._size_argument(src, call, depth)
            if size is not None:
                self.sinks.append((src, call))
                if self.status(size, state) == LOCAL and self.local_sink is None:
                    self.local_sink = (src, call)
                continue
            if depth >= _MAX_DEPTH:
                continue
            hit = self.project.function_for_callee(src, src.facts.resolve_expr(call.func))
            if hit is None or hit[0].facts is None:
                continue
            info = hit[0].facts.functions.get(hit[1])
            if info is None or info.class_name:
                continue
            self.function(hit[0], info.node, self._bound_flags(call, info.node), depth + 1)

    def _size_argument(self, src, call: cst.Call, depth: int) -> Optional[cst.BaseExpression]:
        """The size argument of a `one_hot` call (torch's `num_classes`), or of a project helper that hands one of
        its parameters to a `one_hot` as its size."""
        callee = src.facts.resolve_expr(call.func) or ""
        if callee.rsplit(".", 1)[-1] == "one_hot" and not callee.startswith(("numpy", "np.")):
            kw = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "num_classes"), None)
            positional = [a.value for a in call.args if a.keyword is None]
            return kw if kw is not None else positional[1] if len(positional) > 1 else None
        hit = self.project.function_for_callee(src, callee) if callee else None
        if hit is None or hit[0].facts is None:
            return None
        info = hit[0].facts.functions.get(hit[1])
        if info is None or info.class_name:
            return None
        key = (id(hit[0]), hit[1])
        if key not in self._size_params:
            self._size_params[key] = self._helper_size_param(hit[0], info.node)
        index = self._size_params[key]
        if index is None:
            return None
        name = _params(info.node)[index].name.value
        kw = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
        positional = [a.value for a in call.args if a.keyword is None]
        return kw if kw is not None else positional[index] if index < len(positional) else None

    def _helper_size_param(self, src, fn: cst.FunctionDef) -> Optional[int]:
        names = [p.name.value for p in _params(fn)]
        for call in (n for n in walk(fn.body) if isinstance(n, cst.Call)):
            callee = src.facts.resolve_expr(call.func) or ""
            if callee.rsplit(".", 1)[-1] != "one_hot":
                continue
            kw = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "num_classes"), None)
            positional = [a.value for a in call.args if a.keyword is None]
            size = kw if kw is not None else positional[1] if len(positional) > 1 else None
            if isinstance(size, cst.Name) and size.value in names:
                return names.index(size.value)
        return None

    def _bound_flags(self, call: cst.Call, fn: cst.FunctionDef) -> dict:
        """The parameters of `fn` this call settles: a literal argument (or default), or the gate's
        `drop_tokens` (`gate.drop_tokens`: the MoE layer's constructor argument)."""
        params = _params(fn)
        out: dict = {}
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if any(a.star for a in call.args):
            return out
        for i, p in enumerate(params):
            name = p.name.value
            arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
            if arg is None and i < len(positional) and p in list(fn.params.posonly_params) + list(fn.params.params):
                arg = positional[i]
            if arg is None:
                arg = p.default
            if arg is None:
                continue
            if isinstance(arg, cst.Attribute) and arg.attr.value == "drop_tokens":
                if self.drop is not UNKNOWN:
                    out[name] = self.drop
                continue
            if isinstance(arg, cst.Attribute) and arg.attr.value == "ep_group":
                out[name] = EP_GROUP
                continue
            value = literal_value(arg)
            if isinstance(value, bool):
                out[name] = value
        return out


def _trailing_dimension(n: cst.CSTNode) -> bool:
    if isinstance(n, cst.Subscript) and isinstance(n.value, cst.Attribute) and n.value.attr.value == "shape" \
            and len(n.slice) == 1 and isinstance(n.slice[0].slice, cst.Index):
        index = literal_value(n.slice[0].slice.value)
        return isinstance(index, int) and index != 0
    if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "size" and \
            len(n.args) == 1 and n.args[0].keyword is None:
        index = literal_value(n.args[0].value)
        return isinstance(index, int) and index != 0
    return False


def _join(a: str, b: str) -> str:
    if LOCAL in (a, b):
        return LOCAL
    if REDUCED in (a, b):
        return REDUCED
    return UNIFORM


def _merge(one: dict, other: dict) -> dict:
    return {k: _join(one.get(k, UNIFORM), other.get(k, UNIFORM)) for k in set(one) | set(other)}
