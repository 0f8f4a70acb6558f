"""Positions within a process group: "is this rank the first / the last of its group?", and what their
conjunction means (issue 30, cause 3).

A rank value `r` of a group of `n` ranks lies in `[0, n)`. A test `r == 0` says "the first rank of the group" (a
pipeline's first stage), `r == n - 1` "the last". Each varies across the group's ranks; their *conjunction* holds
exactly when `n == 1` -- then `r` is 0 on every rank --, the same answer on every rank: Megatron's `if
is_pipeline_first_stage() and is_pipeline_last_stage(): return tensor` (no pipeline, nothing to send) leaves on
every rank or on none. `first and not last`, `first or last` still vary.

What a test says is read from what it computes, never from its spelling:
- a comparison of a rank value (the lattice's `Origin` of kind "rank", whose grid coordinate -- `Origin.axes` --
  or process group -- `Origin.group` -- names the group) with `0`, or with that group's size minus one: the size
  of `dist.get_world_size(group)` (the group's code, or its grid coordinate through `resolve_group`), or of a
  size getter of that coordinate (`SIZE_AXES`: Megatron's `get_pipeline_model_parallel_world_size()`,
  DeepSpeed's `num_stages`);
- a call of a function of the checked files: every value it returns (`return pp_rank == 0`, `return False` on a
  virtual-pipeline path, another such call; its locals read where they stand, `ProjectTaint.env_before`),
  provided every test in its body is the same on every rank and no `return` sits in a loop or an `except`
  handler (then which value it returns is the same on every rank); a constant `False` holds nowhere, a constant
  `True` (or anything else) says nothing; the group of a rank or size a helper returns is followed the same way
  (`_group_of`);
- a call of a library predicate outside the checked files, by that library's documented meaning
  (`LIBRARY_POSITIONS`: Megatron's `mpu.is_pipeline_first_stage()`, DeepSpeed `PipelineEngine.is_last_stage()`);
- a local bound once to one of these (`is_last_stage = mpu.is_pipeline_last_stage()`).
"""

from __future__ import annotations

from itertools import product
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from dslint.program.process_groups import DP, PP, TP, CP, EP, EDP, resolve_group
from dslint.program.facts import dotted_name
from dslint.program.statement_walks import ends_in_exit, iter_assigns, name_nodes, own_nodes
from dslint.sources.literals import literal_value

if TYPE_CHECKING:
    from dslint.sources import PythonSource

Env = dict          # name → Origin (value_uniformity.Env; not imported: that module imports this one)
RankTaint = Any     # value_uniformity.RankTaint

FIRST, LAST = "first", "last"
NOWHERE = "nowhere"          # a path that returns a constant False: the predicate holds on no rank there
_DEPTH = 3

# library predicates outside the checked files, by their documented meaning: (grid coordinate, position)
# (Megatron `mpu`/`parallel_state`, NeoX `mpu`, DeepSpeed `PipelineEngine`/`PipelineModule`)
LIBRARY_POSITIONS: dict[str, tuple[frozenset, str]] = {
    "is_pipeline_first_stage": (frozenset({PP}), FIRST), "is_pipeline_last_stage": (frozenset({PP}), LAST),
    "is_first_stage": (frozenset({PP}), FIRST), "is_last_stage": (frozenset({PP}), LAST),
}
# the size of the group of one grid coordinate (the companions of `process_groups.RANK_AXES`' rank getters)
SIZE_AXES: dict[str, frozenset] = {
    "get_pipeline_model_parallel_world_size": frozenset({PP}), "get_pipe_parallel_world_size": frozenset({PP}),
    "num_stages": frozenset({PP}), "pipe_parallel_size": frozenset({PP}),
    "get_tensor_model_parallel_world_size": frozenset({TP}), "get_slice_parallel_world_size": frozenset({TP}),
    "get_model_parallel_world_size": frozenset({TP, PP}),
    "get_data_parallel_world_size": DP,
    "get_context_parallel_world_size": frozenset({CP}), "get_sequence_parallel_world_size": frozenset({CP}),
    "get_expert_model_parallel_world_size": frozenset({EP}), "get_expert_parallel_world_size": frozenset({EP}),
    "get_expert_data_parallel_world_size": frozenset({EDP}),
}

Coordinate = tuple      # ("axes", frozenset) | ("group", code): which group a rank value or a size is of
Paths = Optional[frozenset]     # the alternatives a predicate may be: (coordinate, FIRST/LAST) pairs or NOWHERE


def single_rank_conjunction(taint: "RankTaint", e: cst.BooleanOperation, env: "Env", cls: Optional[str],
                            scope: Optional[str] = None) -> bool:
    """Is the `and` chain `e` the same on every rank because it says "first and last rank of one group" (the
    group holds one rank), its other conjuncts being the same on every rank? `scope`: the function where `e`
    stands (its locals bound once to a call are read as that call)."""
    return one_rank_coordinates(taint, e, env, cls, scope) is not None


def one_rank_coordinates(taint: "RankTaint", e: cst.BaseExpression, env: "Env", cls: Optional[str],
                         scope: Optional[str] = None) -> Optional[frozenset]:
    """Where the `and` chain `e` holds, which groups hold one rank? None when `e` does not say "first and last
    rank of one group" on each of its paths (or another conjunct varies); else the coordinates (`("axes", axes)`
    or `("group", code)`) whose first and last rank it names on every path -- possibly none in common, when the
    paths name different groups. Where `e` holds, the rank within such a group is 0 on every rank."""
    if not (isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And)):
        return None
    conjuncts: list[cst.BaseExpression] = []
    _flatten(e, conjuncts)
    placed: list[frozenset] = []
    for part in conjuncts:
        paths = positions(taint, part, env, cls, 0, scope)
        if paths is not None:
            placed.append(paths)
        elif taint.eval(part, env, cls) is not None:
            return None
    if len(placed) < 2:
        return None
    common: Optional[set] = None
    for combination in product(*placed):
        if NOWHERE in combination:
            continue            # this path's predicate is false on every rank that takes it (and the path is uniform)
        ends: dict = {}
        for coordinate, where in combination:
            ends.setdefault(coordinate, set()).add(where)
        both = {c for c, w in ends.items() if len(w) == 2}
        if not both:
            return None
        common = both if common is None else common & both
    return frozenset(common or ())


def _flatten(e: cst.BaseExpression, out: list) -> None:
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And):
        _flatten(e.left, out)
        _flatten(e.right, out)
    else:
        out.append(e)


def positions(taint: "RankTaint", e: cst.BaseExpression, env: "Env", cls: Optional[str], depth: int,
              scope: Optional[str] = None) -> Paths:
    """What the boolean `e` says of this rank's position, one alternative per path that decides it; None when it
    says something else (or dslint cannot tell)."""
    if depth > _DEPTH:
        return None
    if isinstance(e, cst.Name) and e.value == "False":
        return frozenset({NOWHERE})
    if isinstance(e, cst.Comparison):
        return _compared(taint, e, env, cls, scope)
    if isinstance(e, cst.Call):
        return _called(taint, e, env, cls, depth)
    if isinstance(e, cst.Name) and e.value in env:
        value = _single_binding(taint, scope, e.value)
        if value is not None:
            return _called(taint, value, env, cls, depth)
        origin = env[e.value]
        if origin is None or not isinstance(origin.node, cst.Call) or origin.source is not taint.src or \
                not _bound_to(taint, e.value, origin.node):
            return None
        return _called(taint, origin.node, env, cls, depth)
    return None


def _compared(taint: "RankTaint", e: cst.Comparison, env: "Env", cls: Optional[str], scope: Optional[str]) -> Paths:
    if len(e.comparisons) != 1 or not isinstance(e.comparisons[0].operator, cst.Equal):
        return None
    left, right = e.left, e.comparisons[0].comparator
    for value, other in ((left, right), (right, left)):
        origin = taint.eval(value, env, cls)
        if origin is None or origin.kind != "rank":
            continue
        coordinate = _group_of(taint, value, cls, "rank", 0) or (
            _group_of(taint, origin.node, cls, "rank", 0) if origin.source is taint.src else None) or \
            _rank_coordinate(origin)
        if coordinate is None:
            continue
        if isinstance(other, cst.Integer) and literal_value(other) == 0:
            return frozenset({(coordinate, FIRST)})
        if isinstance(other, cst.BinaryOperation) and isinstance(other.operator, cst.Subtract) and \
                isinstance(other.right, cst.Integer) and literal_value(other.right) == 1 and \
                _group_of(taint, _read(taint, scope, other.left), cls, "size", 0) == coordinate:
            return frozenset({(coordinate, LAST)})
    return None


def _read(taint: "RankTaint", scope: Optional[str], e: cst.BaseExpression) -> cst.BaseExpression:
    """A local of `scope` bound once to a call (`size = dist.get_world_size(group)`): that call; else `e`."""
    if isinstance(e, cst.Name):
        value = _single_binding(taint, scope, e.value)
        if value is not None:
            return value
    return e


def _rank_coordinate(origin) -> Optional[Coordinate]:
    if origin.axes is not None:
        return ("axes", origin.axes)
    if origin.group is not None:
        return ("group", origin.group)
    return None


def _group_of(taint: "RankTaint", e: cst.BaseExpression, cls: Optional[str], what: str, depth: int
              ) -> Optional[Coordinate]:
    """The group whose rank (`what` "rank") or size ("size") `e` is: `dist.get_rank(group)` /
    `dist.get_world_size(group)` (the group's grid coordinate when `resolve_group` knows it, else the group: its
    code, or the function a getter call runs; "" for the world), a function of the checked files every return of
    which is one of one group, else a getter of one coordinate's size (`SIZE_AXES`; ranks: the lattice's axes)."""
    if depth > _DEPTH or not isinstance(e, (cst.Call, cst.Attribute, cst.Name)):
        return None
    func = e.func if isinstance(e, cst.Call) else e
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if isinstance(e, cst.Call) and last == ("get_rank" if what == "rank" else "get_world_size"):
        arg = next((a.value for a in e.args if a.keyword is None or a.keyword.value == "group"), None)
        if arg is None or isinstance(arg, cst.Name) and arg.value == "None":
            return ("group", "")
        axes = resolve_group(taint.src, arg, None).axes
        if axes is not None:
            return ("axes", axes)
        if isinstance(arg, cst.Call) and not arg.args:
            target = taint.facts.resolve_expr(arg.func)
            return ("group", target + "()") if target else None
        name = dotted_name(arg)
        return ("group", name) if name else None
    if isinstance(e, cst.Call):
        found = taint.analysis.function_info(
            taint.analysis.call_source(taint.src, taint.facts.resolve_expr(e.func), cls, fields=False))
        if found is not None:
            src, info = found
            own = taint.analysis.taint(src)
            returns: list = []
            _collect(info.node.body, returns)
            groups = {_group_of(own, node.value, info.class_name, what, depth + 1)
                      if node.value is not None and kind == "return" else None
                      for kind, node in returns if kind != "test"}
            if len(groups) == 1 and None not in groups:
                return groups.pop()
    if what == "size" and last in SIZE_AXES:
        return ("axes", SIZE_AXES[last])
    return None


def _called(taint: "RankTaint", call: cst.Call, env: "Env", cls: Optional[str], depth: int) -> Paths:
    if any(taint.eval(a.value, env, cls) is not None for a in call.args):
        return None                 # a rank-varying argument may steer the helper's own tests
    callee = taint.facts.resolve_expr(call.func)
    source = taint.analysis.call_source(taint.src, callee, cls, fields=False)
    found = taint.analysis.function_info(source)
    if found is None:
        if source is not None:
            return None
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if last in LIBRARY_POSITIONS:
            axes, where = LIBRARY_POSITIONS[last]
            return frozenset({(("axes", axes), where)})
        return None
    src, info = found
    memo = taint.analysis.__dict__.setdefault("_stage_positions", {})
    key = (id(src), info.qualname)
    if key not in memo:
        memo[key] = None            # recursion guard
        memo[key] = _helper_paths(taint.analysis.taint(src), src, info, depth)
    return memo[key]


def _helper_paths(taint: "RankTaint", src: "PythonSource", info, depth: int) -> Paths:
    """Every value the helper returns says a position (or is a constant False) and every test of its body is the
    same on every rank: its paths' predicates, else None."""
    body = info.node.body
    env = taint.analysis.globals_for(src, info)
    own_cls = info.class_name
    out: set = set()
    falls_off = True
    found: list = []
    _collect(body, found)
    for kind, node in found:
        here = taint.analysis.env_before(src, info, node)
        here = {**env, **here} if here is not None else env
        if kind == "test":
            if taint.eval(node, here, own_cls) is not None:
                return None
            continue
        if kind == "other":
            return None
        value = node.value
        if value is None:
            return None
        paths = positions(taint, value, here, own_cls, depth + 1, info.qualname)
        if paths is None:
            return None
        out |= paths
    if isinstance(body, cst.IndentedBlock) and body.body and ends_in_exit(body.body[-1]):
        falls_off = False
    if falls_off:
        return None                 # an implicit None: not a position
    return frozenset(out) if out else None


def _collect(node: cst.CSTNode, out: list, inside: bool = False) -> None:
    """The tests (`if`/`elif`/`while`, conditional expressions' are inside values) and the `return`s of a body,
    not of nested functions or classes; a `return` in a loop or an `except` handler (which pass, or which
    exception, may differ per rank) is ("other", node)."""
    for child in node.children:
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(child, (cst.If, cst.While)):
            out.append(("test", child.test))
        if isinstance(child, cst.Return):
            out.append(("other" if inside else "return", child))
        _collect(child, out, inside or isinstance(child, (cst.For, cst.While, cst.ExceptHandler)))



def _bound_to(taint: "RankTaint", name: str, value: cst.CSTNode) -> bool:
    """Is `name` bound by `name = value` (this very node: the call is the whole value, not a part of it)?"""
    memos = taint.analysis.__dict__.setdefault("_stage_position_binds", {})
    memo = memos.get(id(taint.src))
    if memo is None:
        memo = memos[id(taint.src)] = {}
        for node in iter_assigns(taint.src.module):
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                memo[id(node.value)] = node.targets[0].target.value
    return memo.get(id(value)) == name


def _single_binding(taint: "RankTaint", scope: Optional[str], name: str) -> Optional[cst.Call]:
    """The call a local of the function `scope` is bound to, when the function binds it once, to a call
    (`is_last_stage = mpu.is_pipeline_last_stage()`), and is no parameter of it."""
    info = taint.facts.functions.get(scope) if scope else None
    if info is None or name in info.params:
        return None
    values, otherwise, assigns = _bindings(taint, info.node)
    found = values.get(name, ())
    if len(found) != 1 or name in otherwise or assigns.get(name, 0) != 1:
        return None
    return found[0] if isinstance(found[0], cst.Call) else None


def _bindings(taint: "RankTaint", func: cst.FunctionDef) -> tuple[dict, set, dict]:
    """What `_single_binding` reads of a function, from one walk of its own nodes (not those of the functions,
    lambdas and classes nested in it), memoised per function node: per name, the values of the `=` statements
    that bind it as a plain name; the names bound otherwise (`_bound_otherwise`); per name, how many `=`
    statements bind it as a plain name plus how many other targets of `=` statements name it."""
    memos = taint.analysis.__dict__.setdefault("_stage_position_bindings", {})
    hit = memos.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    values: dict = {}
    otherwise: set = set()
    assigns: dict = {}
    for node in own_nodes(func):
        otherwise |= _bound_otherwise(node)
        if not isinstance(node, cst.Assign):
            continue
        plain = {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
        for name in plain:
            values.setdefault(name, []).append(node.value)
            assigns[name] = assigns.get(name, 0) + 1
        for t in node.targets:
            if not isinstance(t.target, cst.Name):
                for name in {x.value for x in name_nodes(t.target)}:
                    assigns[name] = assigns.get(name, 0) + 1
    memos[id(func)] = (func, (values, otherwise, assigns))
    return values, otherwise, assigns


_NO_NAMES: frozenset = frozenset()


def _bound_otherwise(node: cst.CSTNode) -> set:
    """The names `node` binds other than by a plain `=`: augmented or annotated assignment, a loop or `with`
    target, a walrus, `global`/`nonlocal`, an import."""
    def named(target) -> set:
        return {x.value for x in name_nodes(target)} if target is not None else _NO_NAMES
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return named(node.target)
    if isinstance(node, (cst.For, cst.CompFor)):
        return named(node.target)
    if isinstance(node, cst.WithItem):
        return named(node.asname.name) if node.asname is not None else _NO_NAMES
    if isinstance(node, cst.NamedExpr):
        return named(node.target)
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return {n.name.value for n in node.names}
    if isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
        return {n.asname.name.value if n.asname is not None and isinstance(n.asname.name, cst.Name)
                else dotted_name(n.name) for n in node.names}
    return _NO_NAMES


def ends_test(taint: "RankTaint", e: cst.BaseExpression, env: "Env", cls: Optional[str],
              scope: Optional[str] = None) -> Optional[frozenset]:
    """The (coordinate, FIRST/LAST) pairs whose disjunction the test `e` is, or is the negation of: `pp_rank in
    [0, pp_size - 1]`, `pp_rank != 0 and pp_rank != pp_size - 1`, `not (is_first() or is_last())`. A group whose
    members are exactly the ranks at those ends (the embedding group: `stage_end_groups`) evaluates such a test
    alike on every member, whichever way it is written. None: the test says something else."""
    found = _ends(taint, e, env, cls, scope, 0)
    return found[0] if found is not None else None


def _ends(taint: "RankTaint", e: cst.BaseExpression, env: "Env", cls: Optional[str], scope: Optional[str],
          depth: int) -> Optional[tuple]:
    """(pairs, positive): `e` is the disjunction of `pairs` (positive) or its negation."""
    if depth > _DEPTH:
        return None
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        inner = _ends(taint, e.expression, env, cls, scope, depth + 1)
        return (inner[0], not inner[1]) if inner is not None else None
    if isinstance(e, cst.BooleanOperation):
        left = _ends(taint, e.left, env, cls, scope, depth + 1)
        right = _ends(taint, e.right, env, cls, scope, depth + 1)
        if left is None or right is None or left[1] != right[1]:
            return None
        # `a or b` of positives is their disjunction; `not a and not b` the negation of `a or b`
        if isinstance(e.operator, cst.Or) != left[1]:
            return None
        return left[0] | right[0], left[1]
    if isinstance(e, cst.Comparison) and len(e.comparisons) == 1:
        op, other = e.comparisons[0].operator, e.comparisons[0].comparator
        if isinstance(op, (cst.In, cst.NotIn)) and isinstance(other, (cst.List, cst.Tuple, cst.Set)) and \
                other.elements and all(isinstance(el, cst.Element) for el in other.elements):
            pairs: frozenset = frozenset()
            for el in other.elements:
                one = _one_position(taint, _equal(e.left, el.value), env, cls, scope)
                if one is None:
                    return None
                pairs |= one
            return pairs, isinstance(op, cst.In)
        if isinstance(op, cst.NotEqual):
            one = _one_position(taint, _equal(e.left, other), env, cls, scope)
            return (one, False) if one is not None else None
    one = _one_position(taint, e, env, cls, scope)
    return (one, True) if one is not None else None


def _equal(left: cst.BaseExpression, right: cst.BaseExpression) -> cst.Comparison:
    return cst.Comparison(left=left, comparisons=[cst.ComparisonTarget(operator=cst.Equal(), comparator=right)])


def _one_position(taint: "RankTaint", e: cst.BaseExpression, env: "Env", cls: Optional[str],
                  scope: Optional[str]) -> Optional[frozenset]:
    """`positions` of a test that says one position on every path (not NOWHERE)."""
    paths = positions(taint, e, env, cls, 0, scope)
    if paths is None or len(paths) != 1 or NOWHERE in paths:
        return None
    return frozenset(paths)


# the group families of `process_groups` whose members are the ranks at these ends of the pipeline
FAMILY_ENDS = {"embedding": frozenset({FIRST, LAST}), "position_embedding": frozenset({FIRST})}


def tests_group_ends(taint: "RankTaint", test: Optional[cst.BaseExpression], env: "Env", cls: Optional[str],
                     scope: Optional[str], group) -> bool:
    """Is `test` (or its negation) "this rank is at the ends of the pipeline that make up `group`'s members"
    (`if pp_rank not in [0, pp_size - 1]: return` before a collective on the embedding group)? Every member holds
    it alike. A test of fewer ends (the first stage alone, around the embedding group) is not."""
    ends = FAMILY_ENDS.get(getattr(group, "family", None))
    if test is None or ends is None or group.axes != frozenset({PP}):
        return False
    pairs = ends_test(taint, test, env, cls, scope)
    return pairs is not None and pairs == frozenset((("axes", frozenset({PP})), where) for where in ends)
