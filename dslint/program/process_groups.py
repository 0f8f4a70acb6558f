"""Process groups: over which ranks a value is uniform, and which ranks a collective's group holds.

The ranks of a Megatron/NeoX/DeepSpeed job form a grid: a rank's coordinates are its tensor-parallel rank
("tp"), pipeline stage ("pp"), context/sequence-parallel rank ("cp"), and its data-parallel rank, which under
expert parallelism splits into the expert-parallel rank ("ep") and the expert-data-parallel rank ("edp");
"node" stands for every other way ranks differ (a local rank, a host). A value's *axes* are the coordinates it
can depend on: `get_rank()` all of them (`None`: any rank may differ), `is_pipeline_last_stage()` only "pp",
`get_data_parallel_rank()` "ep" and "edp". A process group's *axes* are the coordinates in which its members
differ: the members of a data-parallel group share their stage and tensor-parallel rank (axes "ep", "edp"), those
of a pipeline group share everything but the stage ("pp"), WORLD differs in every coordinate.

A test whose axes are disjoint from the group's is uniform over the group's members: every member takes the same
branch, so a collective on that group under the test does not hang (`if mpu.is_pipeline_last_stage():
all_reduce(x, group=mpu.get_data_parallel_group())`). A test that *is* the group's membership predicate
(`if mpu.is_rank_in_embedding_group(): all_reduce(g, group=mpu.get_embedding_group())`; `if rank in ranks:`
around a collective on `new_group(ranks)`) is taken exactly by the members. Anything else -- a group dslint
cannot name, a group passed in as a parameter -- is WORLD.

The tables below are the whole model: names of rank/predicate calls and attributes → the axes their value
depends on (`RANK_AXES`), names of group getters → the axes of the group and the family its membership
predicates name (`GROUP_GETTERS`, `MEMBERSHIP`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.statement_walks import code_of, iter_assigns
from dslint.program.facts import dotted_name

if TYPE_CHECKING:
    from dslint.sources import PythonSource

TP, PP, CP, EP, EDP, NODE = "tp", "pp", "cp", "ep", "edp", "node"
ALL_AXES = frozenset({TP, PP, CP, EP, EDP, NODE})
DP = frozenset({EP, EDP})          # the data-parallel rank: expert-parallel rank × expert-data-parallel rank

Axes = Optional[frozenset]         # None: every rank may differ (WORLD, `get_rank()`)

# calls and attributes whose value depends only on these coordinates (Megatron `mpu`/`parallel_state`, NeoX
# `mpu`, DeepSpeed `groups`/`PipelineEngine`/`PipeModelDataParallelTopology`)
RANK_AXES: dict[str, frozenset] = {
    "get_data_parallel_rank": DP, "dp_rank": DP, "data_parallel_rank": DP, "get_data_parallel_id": DP,
    "get_tensor_model_parallel_rank": frozenset({TP}), "get_slice_parallel_rank": frozenset({TP}),
    "get_model_parallel_rank": frozenset({TP, PP}),    # TP in NeoX, TP×PP in Megatron: the wider
    "get_pipeline_model_parallel_rank": frozenset({PP}), "get_pipe_parallel_rank": frozenset({PP}),
    "get_stage_id": frozenset({PP}), "stage_id": frozenset({PP}),
    "is_pipeline_first_stage": frozenset({PP}), "is_pipeline_last_stage": frozenset({PP}),
    "is_first_stage": frozenset({PP}), "is_last_stage": frozenset({PP}),
    "is_pipeline_stage_before_split": frozenset({PP}), "is_pipeline_stage_after_split": frozenset({PP}),
    "is_pipeline_stage_at_split": frozenset({PP}),
    "is_rank_in_embedding_group": frozenset({PP}), "is_rank_in_position_embedding_group": frozenset({PP}),
    "get_expert_parallel_rank": frozenset({EP}), "get_expert_model_parallel_rank": frozenset({EP}),
    "get_expert_data_parallel_rank": frozenset({EDP}),
    "get_context_parallel_rank": frozenset({CP}), "get_sequence_parallel_rank": frozenset({CP}),
    "cp_rank": frozenset({CP}), "sp_rank": frozenset({CP}), "tp_rank": frozenset({TP}), "pp_rank": frozenset({PP}),
}
# predicates that hold exactly on the members of a group family (one alone, or all of a set joined by `or`)
MEMBERSHIP: dict[str, tuple[frozenset, ...]] = {
    "embedding": (frozenset({"is_rank_in_embedding_group"}),
                  frozenset({"is_pipeline_first_stage", "is_pipeline_last_stage"}),
                  frozenset({"is_first_stage", "is_last_stage"})),
    "position_embedding": (frozenset({"is_rank_in_position_embedding_group"}),
                           frozenset({"is_pipeline_first_stage"})),
}
# group getters → (axes in which the members differ, membership family)
GROUP_GETTERS: dict[str, tuple[Axes, Optional[str]]] = {
    **{n: (DP, None) for n in ("get_data_parallel_group", "_get_data_parallel_group", "get_data_parallel_group_gloo",
                               "get_dp_group", "dp_group", "data_parallel_group", "get_data_parallel_process_group")},
    **{n: (frozenset({TP}), None) for n in ("get_tensor_model_parallel_group", "get_slice_parallel_group",
                                            "get_tp_group", "tp_group", "tensor_parallel_group",
                                            "_get_expert_tensor_parallel_group")},
    **{n: (frozenset({TP, PP}), None) for n in ("get_model_parallel_group", "_get_model_parallel_group",
                                                "get_mp_group", "mp_group", "model_parallel_group")},
    **{n: (frozenset({PP}), None) for n in ("get_pipeline_model_parallel_group", "get_pipe_parallel_group",
                                            "get_pp_group", "pp_group", "pipe_group", "pipeline_group")},
    "get_embedding_group": (frozenset({PP}), "embedding"),
    "get_position_embedding_group": (frozenset({PP}), "position_embedding"),
    **{n: (frozenset({EP}), None) for n in ("_get_expert_parallel_group", "get_expert_parallel_group",
                                            "get_expert_model_parallel_group", "ep_group", "expert_parallel_group")},
    **{n: (frozenset({EDP}), None) for n in ("_get_expert_data_parallel_group", "get_expert_data_parallel_group",
                                             "expert_data_parallel_group")},
    **{n: (frozenset({CP}), None) for n in ("get_context_parallel_group", "get_sequence_parallel_group",
                                            "_get_sequence_parallel_group", "cp_group", "sp_group",
                                            "sequence_parallel_group", "context_parallel_group")},
    "get_sequence_data_parallel_group": (DP | {CP}, None),
    "_get_sequence_data_parallel_group": (DP | {CP}, None),
}
_WORLD_GETTERS = {"get_world_group", "WORLD"}
_NEW_GROUP = {"new_group", "new_subgroups", "new_subgroups_by_enumeration"}

# where torch.distributed / deepspeed.comm take the group positionally
GROUP_POSITION = {"all_reduce": 2, "broadcast": 2, "all_gather": 2, "all_gather_into_tensor": 2,
                  "_all_gather_base": 2, "all_gather_object": 2, "broadcast_object_list": 2, "all_to_all": 2,
                  "reduce_scatter": 3, "reduce_scatter_tensor": 3, "_reduce_scatter_base": 3, "reduce": 3,
                  "gather": 3, "scatter": 3, "gather_object": 3, "scatter_object_list": 3, "all_to_all_single": 4,
                  "barrier": 0, "monitored_barrier": 0, "all_reduce_coalesced": 2}


class Group:
    """Who calls a collective: the axes its members differ in, a membership family, or `new_group(ranks)`."""

    __slots__ = ("axes", "family", "ranks")

    def __init__(self, axes: Axes, family: Optional[str] = None, ranks: Optional[str] = None) -> None:
        self.axes, self.family, self.ranks = axes, family, ranks

    def join(self, other: "Group") -> "Group":
        if self.axes is None or other.axes is None:
            axes = None
        else:
            axes = self.axes | other.axes
        same = self.family == other.family and self.ranks == other.ranks
        return Group(axes, self.family if same else None, self.ranks if same else None)


WORLD = Group(None)
# the collectives of one model step -- a forward (ZeRO-3 gathers, MoE all_to_all, tensor-parallel all_reduce, DDP
# buffer broadcast), a generation, an engine's backward (gradient reduction) -- run among ranks that hold the same
# pipeline stage: stages exchange activations only through the schedule's explicit send/recv, which are sites of
# their own. A test of the stage (`for _ in range(num_warmup_microbatches)`) is taken alike by all of them.
MODEL_STEP = Group(ALL_AXES - {PP})
# a group the code computes or is handed (`group=group` of a parameter, `group=_pair_group(a, b)`): its members
# are unknown. A raw rank test around a collective on it is still a hazard; a test of a grid coordinate (the
# pipeline stage of `if not self.is_last_stage(): p2p.send(...)`) is how code reaches the stage-local and
# point-to-point groups such helpers build, and is not reported.
HANDED_IN = Group(None, "handed-in")


def uniform_over(origin, group: Group, test: Optional[cst.CSTNode] = None, negated: frozenset = frozenset()) -> bool:
    """Do all members of `group` evaluate a test with this origin alike? `negated`: the membership predicates
    known false where the test is evaluated. A group's members are the ranks where one of an accepted set of
    predicates holds (the embedding group: first or last pipeline stage); a test of some of them, on a path
    where the others are false (`else:` of `if is_pipeline_last_stage():`, then `if is_pipeline_first_stage():`),
    holds on every member that gets there."""
    if group.family == HANDED_IN.family and origin.axes is not None:
        return True
    if origin.member and group.family:
        if any(origin.member == accepted or accepted <= origin.member | negated and origin.member <= accepted
               for accepted in MEMBERSHIP.get(group.family, ())):
            return True
    if group.ranks is not None and test is not None and _membership_test(test, group.ranks):
        return True
    if origin.axes is None or group.axes is None:
        return False
    return not (origin.axes & group.axes)


# how code names the context/sequence-parallel coordinate: its groups, ranks and sizes (Megatron's
# `get_context_parallel_group`, `context_parallel_size`, DeepSpeed Ulysses' `sequence_parallel_group`, `cp_rank`)
# -- the prefilter of `absent_axes` only: a file spelling none of them uses no such group
_CP_WORDS = re.compile(r"context_parallel|sequence_parallel|sequence_data_parallel|\b(?:cp|sp)_(?:rank|group|size|"
                       r"world_size|degree)\b|\bget_(?:cp|sp)_")
# the getters and rank/predicate calls of the context-parallel coordinate (the tables' entries holding "cp")
_CP_API = frozenset({*(n for n, axes in RANK_AXES.items() if CP in axes),
                     *(n for n, (axes, _) in GROUP_GETTERS.items() if axes is not None and CP in axes)})
# the settings a library builds a context/sequence-parallel group from (Megatron's `initialize_model_parallel(
# context_parallel_size=...)`, its `--context-parallel-size` option, DeepSpeed's `sequence_parallel_size`,
# accelerate's `ParallelismConfig(cp_size=...)`)
_CP_SETTINGS = frozenset({"context_parallel_size", "sequence_parallel_size", "ulysses_sequence_parallel_size",
                          "context_parallel_degree", "sequence_parallel_degree", "cp_size", "sp_size",
                          "cp_degree", "sp_degree", "with_context_parallel"})


def _uses_cp(module: cst.Module) -> bool:
    """Does this module build or use a context/sequence-parallel group, or hand its size to a library that does:
    a call, a definition or an attribute of the coordinate's API (`mpu.get_context_parallel_group()`, a copy's
    `def get_sequence_parallel_rank()`, `self.cp_group`), a keyword argument, a literal mapping key or a
    command-line option naming its setting (`initialize_model_parallel(context_parallel_size=n)`,
    `{"sequence_parallel_size": 4}`, `add_argument("--context-parallel-size")`), or a read of that setting
    (`args.context_parallel_size`). Not a local variable, a comment or a message that merely spells the words."""
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            last = _last(node.func)
            if last in _CP_API:
                return True
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value in _CP_SETTINGS:
                    return True
            if last == "add_argument":
                for arg in node.args:
                    if isinstance(arg.value, cst.SimpleString) and isinstance(arg.value.evaluated_value, str) and \
                            arg.value.evaluated_value.lstrip("-").replace("-", "_") in _CP_SETTINGS:
                        return True
        elif isinstance(node, cst.FunctionDef) and node.name.value in _CP_API:
            return True
        elif isinstance(node, cst.Attribute) and (node.attr.value in _CP_API or node.attr.value in _CP_SETTINGS):
            return True
        elif isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString) and \
                isinstance(node.key.evaluated_value, str) and node.key.evaluated_value in _CP_SETTINGS:
            return True
        stack.extend(node.children)
    return False


def _file_uses_cp(src: "PythonSource") -> bool:
    """`_uses_cp` of a file's module, a fact of the file alone (kept on the source for every unit's view)."""
    facts = src.__dict__
    if "_uses_cp" not in facts:
        facts["_uses_cp"] = bool(_CP_WORDS.search(src.text)) and src.module is not None and _uses_cp(src.module)
    return facts["_uses_cp"]


def absent_axes(project) -> frozenset:
    """Coordinates of the rank grid no file of the launch unit uses (the unit's view: the program's files, so
    that a unit's findings do not depend on what else is checked beside it): a Megatron copy whose `mpu` has
    tensor/pipeline and data-parallel groups but no context-parallel one runs with one context-parallel rank, so
    nothing can vary along that coordinate. Only "cp" is asked: the data-parallel coordinates are every grid's,
    the tensor/pipeline ones are what a model-parallel group holds. Present when a file builds or uses such a
    group or hands its size to a library that does (`_uses_cp`), not when its words are merely spelled."""
    memo = project.__dict__
    if "_absent_axes" not in memo:
        used = any(_file_uses_cp(src) for src in project.python)
        memo["_absent_axes"] = frozenset() if used else frozenset({CP})
    return memo["_absent_axes"]


def remaining_axes(axes: frozenset, project) -> frozenset:
    """What is left of a value's axes once collectives have made it uniform over some coordinates: the axes the
    run's grid holds (`absent_axes`), and nothing at all when only "node" is left -- a host or local rank is a
    function of the grid coordinates, so a value the same along each of them is the same on every rank."""
    rest = axes - absent_axes(project) if project is not None else axes
    return frozenset() if rest <= {NODE} else frozenset(rest)


def _membership_test(test: cst.CSTNode, ranks: str) -> bool:
    """`rank in ranks` (possibly `and` something uniform) where the group is `new_group(ranks)`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _membership_test(test.left, ranks) or _membership_test(test.right, ranks)
    return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
        and isinstance(test.comparisons[0].operator, cst.In) \
        and code_of(test.comparisons[0].comparator, 400) == ranks


# the global rank of this process: what `new_group(ranks)` counts its members in
_GLOBAL_RANK_CALLS = {"torch.distributed.get_rank", "deepspeed.comm.get_rank", "torch.distributed.distributed_c10d.get_rank"}


def interval_membership(src: "PythonSource", scope_node: Optional[cst.CSTNode], test: cst.CSTNode, ranks: str,
                        uniform) -> bool:
    """Is `test` true exactly on the members of `new_group(ranks)` when those are a range of global ranks
    (`new_group(list(range(n)))`, `ranks = range(start, end)` bound once in the function): the test bounds the
    global rank (`dist.get_rank()`, a name bound once to it) by the same bounds -- `rank < n`, `start <= rank <
    end`, `rank >= start and rank < end`, `rank in range(start, end)` -- the same code, its names not bound again
    in the function between (names bound more than once there: unknown); its other `and` operands are uniform
    (`uniform(expr)`). Then every member takes the branch and no other rank does: the collective on that group
    under it is reached by all its members."""
    bounds = _range_bounds(src, scope_node, ranks)
    if bounds is None:
        return False
    lo, hi = bounds
    if not _bounds_fixed(scope_node, bounds):
        return False
    found_lo, found_hi = lo is None, False
    for part in _and_operands(test):
        got = _rank_bounds(src, scope_node, part)
        if got is None:
            if not uniform(part):
                return False
            continue
        for side, code in got:
            if side == "hi" and code == hi:
                found_hi = True
            elif side == "lo" and code == lo:
                found_lo = True
            elif side == "lo" and code == "0":
                continue                # `0 <= rank`: every rank
            else:
                return False
    return found_lo and found_hi


def interval_exclusion(src: "PythonSource", scope_node: Optional[cst.CSTNode], test: cst.CSTNode, ranks: str,
                       uniform) -> bool:
    """Is `test` true exactly on the ranks outside `new_group(ranks)` of a range of global ranks (an early exit
    `if dist.get_rank() >= n: return` before a collective on `new_group(list(range(n)))`): `not` of a membership
    test (`interval_membership`), or an `or` of the rank's comparisons with the range's bounds from outside
    (`rank >= end`, `rank < start`), each bound of the range present."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return interval_membership(src, scope_node, test.expression, ranks, uniform)
    bounds = _range_bounds(src, scope_node, ranks)
    if bounds is None:
        return False
    parts: list = []
    stack = [test]
    while stack:
        part = stack.pop()
        if isinstance(part, cst.BooleanOperation) and isinstance(part.operator, cst.Or):
            stack.extend([part.left, part.right])
        else:
            parts.append(part)
    wanted = {("lo", bounds[1])} | ({("hi", bounds[0])} if bounds[0] is not None else set())
    seen: set = set()
    for part in parts:
        got = _rank_bounds(src, scope_node, part)
        if got is None or len(got) != 1:
            return False
        seen.add(got[0])        # `rank >= end` bounds the rank from below by the end: outside the range
    return seen == wanted and _bounds_fixed(scope_node, bounds)


def _bounds_fixed(scope_node: Optional[cst.CSTNode], bounds: tuple) -> bool:
    """The names of the range's bounds hold one value in the function: bound at most once (a parameter, or
    one `=`)."""
    if scope_node is None:
        return True
    counts: dict[str, int] = {}
    for node in iter_assigns(scope_node):
        for t in node.targets:
            for n in _names_in(t.target):
                counts[n.value] = counts.get(n.value, 0) + 1
    for name in _other_targets(scope_node):
        counts[name] = counts.get(name, 0) + 1
    return not any(code is not None and any(counts.get(n.value, 0) > 1 for n in _names_in(cst.parse_expression(code)))
                   for code in bounds)


def _and_operands(test: cst.CSTNode) -> list:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _and_operands(test.left) + _and_operands(test.right)
    return [test]


def _single_binding(scope_node: Optional[cst.CSTNode], name: str) -> Optional[cst.BaseExpression]:
    if scope_node is None:
        return None
    values = [node.value for node in iter_assigns(scope_node) for t in node.targets
              if isinstance(t.target, cst.Name) and t.target.value == name]
    targets = [t for t in _other_targets(scope_node) if t == name]
    return values[0] if len(values) == 1 and not targets else None


def _other_targets(scope_node: cst.CSTNode) -> list[str]:
    """Names bound otherwise than by `=` in a function: loop targets, `+=`, `with ... as`, parameters."""
    out: list[str] = []
    stack: list[cst.CSTNode] = [scope_node]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.For, cst.CompFor)):
            out.extend(n.value for n in _names_in(node.target))
        elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            out.append(node.target.value)
        elif isinstance(node, cst.AsName):
            out.extend(n.value for n in _names_in(node.name))
        elif isinstance(node, cst.Param):
            out.append(node.name.value)
        elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            out.append(node.target.value)
        stack.extend(node.children)
    return out


def _names_in(node: cst.CSTNode) -> list:
    if isinstance(node, cst.Name):
        return [node]
    return [n for child in node.children for n in _names_in(child)]


def _range_bounds(src: "PythonSource", scope_node: Optional[cst.CSTNode], ranks: str
                  ) -> Optional[tuple[Optional[str], str]]:
    """(start, end) of the ranks a group holds when its ranks are `range(end)` / `range(start, end)` (or a
    `list(...)` of one), directly or through a name bound once in the function; start None for 0."""
    try:
        expr = cst.parse_expression(ranks)
    except Exception:
        return None
    for _ in range(3):
        if isinstance(expr, cst.Name):
            expr = _single_binding(scope_node, expr.value)
            continue
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
                and len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
            expr = expr.args[0].value
            continue
        break
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "range") or \
            any(a.keyword is not None or a.star for a in expr.args) or len(expr.args) not in (1, 2):
        return None
    if scope_node is not None and src.facts.resolve("range") not in (None, "range", "builtins.range"):
        return None
    codes = [code_of(a.value, 400) for a in expr.args]
    if len(codes) == 1:
        return None, codes[0]
    return (None if codes[0] == "0" else codes[0]), codes[1]


def _global_rank(src: "PythonSource", scope_node: Optional[cst.CSTNode], e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.Name):
        bound = _single_binding(scope_node, e.value)
        return bound is not None and not isinstance(bound, cst.Name) and _global_rank(src, scope_node, bound)
    return isinstance(e, cst.Call) and not e.args and src.facts.resolve(dotted_name(e.func) or "") in _GLOBAL_RANK_CALLS


def _rank_bounds(src: "PythonSource", scope_node: Optional[cst.CSTNode], part: cst.CSTNode
                 ) -> Optional[list[tuple[str, str]]]:
    """The bounds one comparison puts on the global rank: [("lo", code) for `rank >= code`, ("hi", code) for
    `rank < code`, ...]; None when it is no such comparison."""
    if not isinstance(part, cst.Comparison):
        return None
    items = [part.left, *(c.comparator for c in part.comparisons)]
    ops = [c.operator for c in part.comparisons]
    at = [i for i, item in enumerate(items) if _global_rank(src, scope_node, item)]
    if len(at) != 1:
        return None
    i = at[0]
    out: list[tuple[str, str]] = []
    if len(ops) == 1 and i == 0 and isinstance(ops[0], cst.In):
        bounds = _range_bounds(src, scope_node, code_of(items[1], 400))
        if bounds is None:
            return None
        return ([("lo", bounds[0])] if bounds[0] is not None else []) + [("hi", bounds[1])]
    for j, op in enumerate(ops):
        left, right = items[j], items[j + 1]
        if j == i - 1:        # `a <= rank`, `b > rank`
            other, flip = left, True
        elif j == i:          # `rank < b`, `rank >= a`
            other, flip = right, False
        else:
            return None
        code = code_of(other, 400)
        if isinstance(op, cst.LessThan if not flip else cst.GreaterThan):
            out.append(("hi", code))
        elif isinstance(op, cst.GreaterThanEqual if not flip else cst.LessThanEqual):
            out.append(("lo", code))
        else:
            return None
    return out


def _last(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


def group_argument(call: cst.Call, op: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("group", "process_group", "pg"):
            return arg.value
    pos = GROUP_POSITION.get(op)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if pos is not None and pos < len(positional):
        return positional[pos].value
    return None


def resolve_group(src: "PythonSource", expr: Optional[cst.BaseExpression], scope_node: Optional[cst.CSTNode],
                  depth: int = 0, at: Optional[cst.CSTNode] = None) -> Group:
    """The group an expression names: a getter call (`mpu.get_data_parallel_group()`), `new_group(ranks)`, or a
    name/attribute every assignment of which (in the function, else the file) is one of those. With `at` (the
    collective's call), a name bound more than once in the function is read from the assignment that reaches
    the call, when one plainly does (`reaching_value`)."""
    if expr is None or depth > 3:
        return WORLD
    if isinstance(expr, cst.Name) and expr.value == "None":
        return WORLD
    if isinstance(expr, cst.Call):
        last = _last(expr.func)
        if last in GROUP_GETTERS:
            axes, family = GROUP_GETTERS[last]
            if any(a.keyword is not None and a.keyword.value == "with_context_parallel" for a in expr.args):
                axes = axes | {CP}
            return Group(axes, family)
        if last == "new_group" and expr.args:
            first = next((a for a in expr.args if a.keyword is None or a.keyword.value == "ranks"), None)
            return Group(None, None, code_of(first.value, 400)) if first is not None else WORLD
        if isinstance(expr.func, cst.Attribute) and last in ("get", "__getitem__"):
            return WORLD
        return HANDED_IN                # a helper of the code builds it
    last = _last(expr)
    if last in _WORLD_GETTERS:
        return WORLD
    name = dotted_name(expr)
    if name is None:
        return WORLD
    values = _assigned(src, name, scope_node) or (_assigned(src, name, None) if scope_node is not None else [])
    if len(values) > 1 and at is not None and scope_node is not None:
        reaching = reaching_value(scope_node, at, name)
        if reaching is not None:
            values = [reaching]
    if values:
        out: Optional[Group] = None
        for value in values:
            g = resolve_group(src, value, scope_node, depth + 1)
            out = g if out is None else out.join(g)
            if out.axes is None and out.ranks is None and out.family is None:
                return WORLD
        return out or WORLD
    if last in GROUP_GETTERS:           # a module attribute / field named for its group (`self.dp_group`)
        axes, family = GROUP_GETTERS[last]
        return Group(axes, family)
    return HANDED_IN                    # a parameter, or a name bound where dslint does not look


def _assigned(src: "PythonSource", name: str, scope_node: Optional[cst.CSTNode]) -> list[cst.BaseExpression]:
    """Values assigned to `name` in a function body (`scope_node`) or anywhere in the file (None); `self.x` is
    matched file-wide by its tail."""
    memo = src.__dict__.setdefault("_group_assigns", {})
    key = id(scope_node) if scope_node is not None else 0
    table = memo.get(key)
    if table is None:
        table = memo[key] = {}
        for node in iter_assigns(scope_node if scope_node is not None else src.module):
            for target in node.targets:
                t = target.target
                if isinstance(t, (cst.Tuple, cst.List)):
                    continue
                n = dotted_name(t)
                if n:
                    table.setdefault(n, []).append(node.value)
    return table.get(name, [])


def reaching_value(scope_node: cst.CSTNode, at: cst.CSTNode, name: str) -> Optional[cst.BaseExpression]:
    """The value of the one assignment `name = …` that reaches `at` in the function `scope_node`, found on the
    statement structure: going out from the statement holding `at`, the nearest earlier statement of the same
    block that binds `name` must be a plain `name = …` line (a binding inside an `if`/loop/`try` there, or a
    later binding in an enclosing loop's body, which the next iteration would see, gives None: unknown)."""
    path = _statement_path(scope_node, at)
    if path is None:
        return None
    for level in range(len(path) - 1, -1, -1):
        block, index, owner = path[level]
        if isinstance(owner, (cst.For, cst.While)) and any(_binds(st, name) for st in block[index:]):
            return None
        for st in reversed(block[:index]):
            if not _binds(st, name):
                continue
            if isinstance(st, cst.SimpleStatementLine):
                for small in reversed(st.body):
                    if isinstance(small, cst.Assign) and any(dotted_name(t.target) == name for t in small.targets):
                        return small.value
            return None
    return None


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    return any(dotted_name(t.target) == name for node in iter_assigns(stmt) for t in node.targets) or \
        _binds_otherwise(stmt, name)


def _binds_otherwise(stmt: cst.CSTNode, name: str) -> bool:
    """`for name in …`, `with … as name`, `name += …`, `name: T = …`, `(name := …)`: bindings `iter_assigns`
    does not list (decided on the text: a superset)."""
    from dslint.sources.cstwalk import walk
    for n in walk(stmt):
        target = None
        if isinstance(n, (cst.For, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.CompFor)):
            target = n.target
        elif isinstance(n, cst.AsName):
            target = n.name
        if target is not None and any(dotted_name(t) == name for t in _targets(target)):
            return True
    return False


def _targets(target: cst.CSTNode):
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _targets(element.value)
    else:
        yield target


def _statement_path(scope_node: cst.CSTNode, at: cst.CSTNode) -> Optional[list]:
    """[(block, index of the statement on the way to `at`, the statement owning the block)] from the function's
    body down to the statement holding `at` (in its header, for a compound statement); None when `at` is not
    found. Nested functions and classes are not entered."""
    from dslint.sources.cstwalk import walk
    if not isinstance(scope_node, cst.FunctionDef):
        return None

    def search(block: list, owner: cst.CSTNode) -> Optional[list]:
        for i, st in enumerate(block):
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
                continue
            for inner in _nested_blocks(st):
                found = search(inner, st)
                if found is not None:
                    return [(block, i, owner)] + found
            if any(n is at for n in walk(st)):
                return [(block, i, owner)]
        return None

    return search(_block(scope_node.body), scope_node)


def _block(body: cst.CSTNode) -> list:
    """The statements of an indented block; an inline suite (`if x: a = 1`) is one statement of its own."""
    return list(body.body) if isinstance(body, cst.IndentedBlock) else [body]


def _nested_blocks(st: cst.CSTNode):
    """The blocks a compound statement holds (an `elif` is a block of one `if`)."""
    if isinstance(st, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return
    body = getattr(st, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        yield _block(body)
    for handler in getattr(st, "handlers", ()) or ():
        yield _block(handler.body)
    for case in getattr(st, "cases", ()) or ():
        yield _block(case.body)
    orelse = getattr(st, "orelse", None)
    if isinstance(orelse, cst.If):
        yield [orelse]
    elif orelse is not None and hasattr(orelse, "body"):
        yield _block(orelse.body)
    final = getattr(st, "finalbody", None)
    if final is not None:
        yield _block(final.body)
