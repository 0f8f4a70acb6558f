"""Collective sequences (issue 30, cause 4): which collectives, in which order, each rank of a body calls.

A rank-dependent branch is a hazard when the ranks that take it and those that do not call *different sequences*
of collectives -- not merely when one side has none. PARCOACH decides "possibly not called by all processes" per
collective kind from the post-dominance frontier of the collective sites, filtered by rank-dependent tests, and
carries it across calls with per-function summaries. dslint's walk (`flow.FlowWalk`) already finds the
rank-dependent tests around every site and judges an `if` chain by presence (every branch reaches a site); this
module compares the sequences, for the cases presence gets wrong:

- a *sequence tree* of a body (`SequenceBuilder.block`): its collectives in evaluation order, each a `Token` (the
  op -- `all_reduce`, `barrier`, `engine:backward` -- and the process group it runs on, `CollectiveSites.group_of`);
  a branch on a uniform test is a choice item keyed by the test (every rank takes the same side, so two trees
  that agree side by side agree); a loop is an item holding its body's tree; a `yield` is a marker.
  Calls of checked functions are replaced by the callee's tree (a per-function summary, memoised per rank);
  `with cm(...)` of a `@contextmanager` function is the code before its `yield`, the body, the code after.
  A test that asks whether the run is distributed at all (`dist.is_initialized()`, `get_world_size() > 1`,
  `local_rank != -1`, a checked helper returning one) keeps only its distributed side: without a process group
  nothing can hang (`def barrier(): if is_distributed(): dist.barrier()` is a barrier).
- *rank classes*: a rank-dependent test that compares a rank id with constants (`rank == 0`, `local_rank not in
  [-1, 0]`, `not is_main` for `is_main = get_rank() == 0`, `accelerator.is_main_process`) is decided per
  representative rank (0, 1 and the neighbours of every constant tested, `representatives`); all rank ids are
  one variable (a process's rank). The tree of the body is built once per representative.
- any other rank-dependent test (per-rank data, a grid coordinate) keeps its branches only when they build the
  same tree; otherwise the body's tree is unknown (None) and the presence rule decides, as before.

Three decisions follow (`HazardWalk` applies them after its walk of a body, `apply`):
- a body whose trees are known and equal for every representative is balanced: its DSL101 findings under its
  tests, and its DSL103 findings for a `return`/exit outside loops under them, are dropped (the "rank 0 first" barrier pair, `torch_distributed_zero_first`; for a
  generator the `yield` markers are left out: the caller's `with` body sits between its halves); so are those of
  a function body every call of which sits in a balanced caller (`_balanced_at_callers`: the pair split across
  a caller and a callee, or across two helpers);
- an early `return` under a rank test is the `if`/`else` it spells (`_drop_paired_exits`): the ranks that leave
  and those that go on through the rest of the body agree when, for one value of each uniform test (the same on
  every rank), all run the same non-empty sequence -- the presence rule's and `_report_chain`'s reading of the
  `else` spelling;
- an `if` chain the presence rule takes as balanced (every branch reaches a collective) whose branches build
  different trees is reported (DSL101) at the collectives past their common prefix and suffix: a broadcast on
  one side and an all_reduce on the other, two barriers against one, the same op on different groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import libcst as cst

from dslint.program.collective_sites import CollectiveSites, Site
from dslint.program.process_groups import uniform_over
from dslint.program.rank.reaching_ranks import EXIT_CALLS, FlowWalk, Guard, distributed_truth_of
from dslint.program.rank.handed_ranks import HANDED_RANK
from dslint.program.rank.value_uniformity import LAUNCHER_OPTION, RANK_ENV_KEYS
from dslint.program.facts import dotted_name
from dslint.program.statement_walks import BindingOrder, code_of, iter_calls, name_nodes, sub_expressions
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.program.facts import FunctionInfo
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

MAX_ITEMS = 400                  # a tree larger than this is unknown
MAX_REPRESENTATIVES = 12

# rank ids and rank-0 tests whose value is a function of the process's rank (the taint must agree: `walk.eval`)
# (`current_device()`: the accelerator's device index, which a launch sets from the local rank --
# `set_device(local_rank)` -- and the taint takes for a rank id)
_RANK_ID_CALLS = {"get_rank", "get_local_rank", "rank", "get_ordinal", "current_device"}
_RANK_ZERO_CALLS = {"is_main_process", "is_local_main_process", "is_world_process_zero", "is_local_process_zero",
                    "is_rank_0", "is_rank0", "is_master", "is_master_process", "is_main"}
_RANK_ID_ATTRS = {"local_rank", "global_rank", "rank", "process_index", "local_process_index", "global_rank_id",
                  "local_rank_id", "world_rank"}
_RANK_ZERO_ATTRS = {"is_main_process", "is_local_main_process", "is_global_zero"}
_RANK_ENV = RANK_ENV_KEYS - {"NODE_RANK", "GROUP_RANK", "CROSS_RANK"}
_DIST_MODULES = ("torch.distributed", "deepspeed.comm", "deepspeed.")
_MULTI = object()                # a name bound more than once in the body: no single value to read
_FROM_ENV = object()             # an element unpacked from a call's result: read its origin


@dataclass(frozen=True)
class Token:
    """One collective: the op and the group (`(axes, family, ranks)`); `call` -- the call of the walked body that
    runs it (itself, or the helper call that reaches it) -- is not part of the comparison."""

    op: str
    group: tuple
    call: cst.Call = field(compare=False, hash=False, repr=False)


YIELD = ("yield",)


# --- what the walk records: the tests it evaluated and the values names were bound to --------------------------
class Records:
    """A mixin of a `FlowWalk`: every test the walk evaluates with a rank-varying origin (`seq_tests`: id of the
    test → (origin, per-rank formula or None)), the value each name was bound to (`seq_bound`), and the
    constants the formulas compare rank ids with (`seq_consts`)."""

    def seq_init(self) -> None:
        self.seq_tests: dict[int, tuple] = {}
        # uniform tests that ask whether the run is distributed through a rank id's "not launched" value
        # (`local_rank == -1`): id of the test → its value in a distributed run
        self.seq_sentinels: dict[int, bool] = {}
        self.seq_bound: dict[str, object] = {}
        self.seq_consts: set[int] = set()

    def eval_test(self, e):
        origin = super().eval_test(e)
        if origin is not None and e is not None and id(e) not in self.seq_tests:
            consts: set = set()
            formula = rank_formula(e, self, consts) if origin.axes is None else None
            if formula is not None and len({decide(formula, r) for r in representatives(consts)}) == 1:
                formula = None          # the same for every rank, while the taint says it varies: a value
                                        # computed from a rank id (`size is not None`), not the rank itself
            if formula is not None:
                self.seq_consts |= consts
            mixed = mixed_formula(self, e) if formula is None and origin.axes is None else None
            if mixed is not None:
                self.seq_consts |= mixed.consts
            self.seq_tests[id(e)] = (origin, formula, mixed)
        elif origin is None and e is not None and id(e) not in self.seq_sentinels:
            value = self._sentinel(e)
            if value is not None:
                self.seq_sentinels[id(e)] = value
        return origin

    def chain_covers_ranks(self, links: list) -> bool:
        """Some link's test holds on each rank 0 … W-1 of a run of W processes (`known_world_size`), every
        earlier link decided for it: the chain's `else` is never taken (`if rank == 0: … elif rank == 1: …
        else: raise RuntimeError("test has world size of two")`)."""
        world = known_world_size(self.taint.analysis, self.taint.src, self.cls, self.scope)
        if world is None:
            return False
        formulas = [rank_formula(link.test, self, set()) for link in links]
        for r in range(world):
            for formula in formulas:
                value = decide(formula, r)
                if value is None:
                    return False
                if value:
                    break
            else:
                return False
        return True

    def _sentinel(self, e: cst.BaseExpression) -> Optional[bool]:
        """`local_rank == -1` (`!= -1`) of a rank id: -1 is the value a rank id has when no distributed launch set
        it (argparse's `--local_rank` default, `int(os.environ.get("LOCAL_RANK", -1))`), so in a distributed run
        -- the only one where a collective can wait -- the test is false (true). None: not such a test."""
        if not isinstance(e, cst.Comparison) or len(e.comparisons) != 1 or \
                not isinstance(e.comparisons[0].operator, (cst.Equal, cst.NotEqual)) or \
                literal_value(e.comparisons[0].comparator) != -1:
            return None
        hit = self.eval(e.left)
        if hit is None or hit.kind != "rank" or hit.axes is not None:
            return None
        return isinstance(e.comparisons[0].operator, cst.NotEqual)

    def bind(self, target, value, origin) -> None:
        super().bind(target, value, origin)
        if isinstance(target, cst.Name):
            self._seq_bind(target.value, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(
                target.elements) else None
            for i, el in enumerate(target.elements):
                if isinstance(el.value, cst.Name):
                    self._seq_bind(el.value.value, values[i].value if values is not None else _FROM_ENV)

    def _seq_bind(self, name: str, value) -> None:
        """One binding: its value; an unpacked element of a call: `_FROM_ENV` (the taint's origin tells); two
        bindings: `_MULTI`."""
        seen = self.seq_bound.get(name)
        if value is None or value is _FROM_ENV and seen is not None or seen is _MULTI or seen is _FROM_ENV:
            self.seq_bound[name] = _MULTI
        elif value is _FROM_ENV:
            self.seq_bound[name] = _FROM_ENV
        else:
            self.seq_bound[name] = (*seen, value) if seen is not None else (value,)


class _Recorder(Records, FlowWalk):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seq_init()


# --- how many processes a run starts ------------------------------------------------------------------------
MAX_WORLD = 64
# DeepSpeed's unit-test harness (tests/unit/common.py): a test class deriving from one of these launches
# `world_size` processes (its class attribute, "the number of processes to launch"; a list runs once per
# size), or the size of the method's `@pytest.mark.world_size(n)`
_HARNESS_BASES = {"DistributedTest", "DistributedFixture", "DistributedExec"}


def known_world_size(analysis, src: "PythonSource", cls: Optional[str], scope: str) -> Optional[int]:
    """The largest number of processes a run of this function starts, when known: every launch unit that reaches
    the file has a known size (`LaunchUnit.world_size`), or the function is a test method of DeepSpeed's
    unit-test harness. None otherwise (or beyond `MAX_WORLD`)."""
    memo = analysis.__dict__.setdefault("_known_world_size", {})
    key = (id(src), cls, scope)
    if key not in memo:
        memo[key] = _world_size(analysis, src, cls, scope)
    return memo[key]


def _world_size(analysis, src, cls, scope) -> Optional[int]:
    size = _harness_world_size(analysis, src, cls, scope) if cls else None
    if size is None:
        project = getattr(analysis, "project", None)
        reaching = getattr(project, "_units_reaching", None)    # a view's index: its units holding each file
        units = reaching.get(id(src), []) if isinstance(reaching, dict) else \
            [u for u in (getattr(project, "units", None) or ()) if any(f is src for f in u.files)]
        sizes = [u.world_size for u in units]
        if sizes and all(isinstance(n, int) for n in sizes):
            size = max(sizes)
    return size if size is not None and 0 < size <= MAX_WORLD else None


def _harness_world_size(analysis, src, cls: str, scope: str) -> Optional[int]:
    info = src.facts.functions.get(scope)
    if info is not None:
        for d in info.node.decorators:
            dec = d.decorator
            if isinstance(dec, cst.Call) and (dotted_name(dec.func) or "").endswith("mark.world_size") \
                    and dec.args:
                value = literal_value(dec.args[0].value)
                return _largest(value)
    project = getattr(analysis, "project", None)
    size: object = None
    harness = False
    todo: list = [(src, cls)]
    seen: set = set()
    while todo:
        where, name = todo.pop(0)
        if (id(where), name) in seen or len(seen) > 16:
            continue
        seen.add((id(where), name))
        info = where.facts.classes.get(name)
        if info is None:
            continue
        if name.rsplit(".", 1)[-1] in _HARNESS_BASES:
            harness = True
        if size is None:
            for stmt in _class_body(info.node):
                for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                            isinstance(small.targets[0].target, cst.Name) and \
                            small.targets[0].target.value == "world_size":
                        size = literal_value(small.value)
        for base in info.bases:
            found = project.class_for_callee(where, base) if project is not None else None
            if found is not None:
                todo.append(found)
    return _largest(size) if harness else None


def _largest(value) -> Optional[int]:
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        value = max(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _class_body(node: cst.ClassDef) -> Sequence[cst.CSTNode]:
    return node.body.body if isinstance(node.body, cst.IndentedBlock) else ()


# --- a test as a function of the rank ------------------------------------------------------------------------
def _last(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _is_rank(walk, e: cst.BaseExpression) -> bool:
    if walk is None:
        return True             # an origin's own source expression: the taint already took it for a rank id
    origin = walk.eval(e)
    return origin is not None and origin.kind == "rank" and origin.axes is None


_COMPARE = {cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b, cst.LessThan: lambda a, b: a < b,
            cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThan: lambda a, b: a > b,
            cst.GreaterThanEqual: lambda a, b: a >= b, cst.In: lambda a, b: a in b,
            cst.NotIn: lambda a, b: a not in b, cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b}


def rank_formula(e: cst.BaseExpression, walk, consts: set, depth: int = 0) -> Optional[Callable[[int], object]]:
    """The value of `e` as a function of the process's rank, when `e` is made of rank ids, constants,
    comparisons and `not`/`and`/`or` only; None otherwise. Names are read from their one binding in the walk,
    else from their origin's source expression (a parameter a caller passes `os.environ["LOCAL_RANK"]`)."""
    if depth > 8 or e is None:
        return None
    kind = type(e)
    # (`-1`, the value a rank id has when no launcher set it, is a unary minus of an integer in the syntax tree)
    if kind in (cst.Integer, cst.List, cst.Tuple, cst.Set) or kind is cst.Name and e.value in ("None", "True",
                                                                                             "False") or \
            kind is cst.UnaryOperation and isinstance(e.operator, cst.Minus) and type(e.expression) is cst.Integer:
        value = literal_value(e)
        if value is UNKNOWN:
            return None
        items = value if isinstance(value, (list, tuple, set, frozenset)) else (value,)
        if any(isinstance(v, str) for v in items):
            return None
        consts.update(v for v in items if isinstance(v, int) and not isinstance(v, bool))
        if isinstance(value, list):
            value = tuple(value)
        return lambda r: value
    if kind is cst.Name:
        if walk is None:
            return None
        bound = walk.seq_bound.get(e.value)
        if bound is _MULTI:
            return None
        if bound is not None and bound is not _FROM_ENV:
            # a binding the taint takes for uniform (`is_main = smp.rank() == 0` of an API it does not know) gives
            # every rank the same answer in the runs that take it: only the rank-varying ones must agree
            varying = [v for v in bound if walk.eval(v) is not None] if len(bound) > 1 else list(bound)
            return _agreeing([rank_formula(v, walk, consts, depth + 1) for v in varying], consts)
        origin = walk.env.get(e.value)
        if origin is None or origin.kind != "rank" or origin.axes is not None or origin.node is e:
            return None
        if origin.via_call is not None:
            return _argument_formula(origin.via_call, e.value, walk, consts, depth)
        return rank_formula(origin.node, None, consts, depth + 1)
    if kind is cst.Attribute:
        name = e.attr.value
        if name in _RANK_ID_ATTRS or name in _RANK_ZERO_ATTRS:
            if not _is_rank(walk, e):
                return None
            return (lambda r: r == 0) if name in _RANK_ZERO_ATTRS else (lambda r: r)
        return _field_formula(e, walk, consts, depth)
    if kind is cst.Call:
        last = _last(e.func)
        if last == "int" and len(e.args) == 1:
            return rank_formula(e.args[0].value, walk, consts, depth + 1)
        if last in _RANK_ID_CALLS or last in _RANK_ZERO_CALLS:
            if not _is_rank(walk, e):
                return None
            return (lambda r: r == 0) if last in _RANK_ZERO_CALLS else (lambda r: r)
        if last in ("get", "getenv") and e.args and literal_value(e.args[0].value) in _RANK_ENV:
            return lambda r: r
        return _returned_formula(e, None, walk, consts, depth)
    if kind is cst.Subscript:
        if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and \
                literal_value(e.slice[0].slice.value) in _RANK_ENV and _last(e.value) == "environ":
            return lambda r: r
        index = literal_value(e.slice[0].slice.value) if len(e.slice) == 1 and isinstance(
            e.slice[0].slice, cst.Index) else UNKNOWN
        if type(e.value) is cst.Call and isinstance(index, int) and not isinstance(index, bool):
            return _returned_formula(e.value, index, walk, consts, depth)
        return None
    if kind is cst.IfExp:
        # `a.is_local_main_process if local else a.is_main_process`: sides that agree for every rank
        return _agreeing([rank_formula(e.body, walk, consts, depth + 1),
                          rank_formula(e.orelse, walk, consts, depth + 1)], consts)
    if kind is cst.UnaryOperation and isinstance(e.operator, cst.Not):
        inner = rank_formula(e.expression, walk, consts, depth + 1)
        return (lambda r: not inner(r)) if inner is not None else None
    if kind is cst.BooleanOperation:
        left = rank_formula(e.left, walk, consts, depth + 1)
        right = rank_formula(e.right, walk, consts, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(e.operator, cst.And):
            return lambda r: left(r) and right(r)
        return lambda r: left(r) or right(r)
    if kind is cst.Comparison and len(e.comparisons) == 1:
        op = _COMPARE.get(type(e.comparisons[0].operator))
        left = rank_formula(e.left, walk, consts, depth + 1)
        right = rank_formula(e.comparisons[0].comparator, walk, consts, depth + 1)
        if op is None or left is None or right is None:
            return None
        return lambda r: op(left(r), right(r))
    return None


def _returned_formula(call: cst.Call, index: Optional[int], walk, consts: set, depth: int):
    """A call without arguments of a checked function whose body is plain statements ending in one `return`
    (`def is_local_master(): local_rank = get_dist_setting()[1]; return local_rank in {-1, 0}`): the formula of
    what it returns -- of its `index`-th element when the call is subscripted (`get_dist_setting()[1]` of `return
    rank, local_rank, ...`) --, read in a walk of the callee's body."""
    if walk is None or call.args or depth > 6:
        return None
    taint = walk.taint.analysis
    hit = taint.function_info(taint.call_source(walk.taint.src, walk.taint.src.facts.resolve_expr(call.func),
                                                walk.cls))
    if hit is None:
        return None
    returns = _plain_returns(hit[1].node)
    if len(returns) != 1:
        return None
    value = returns[0]
    if index is not None:
        if not isinstance(value, cst.Tuple) or not -len(value.elements) <= index < len(value.elements) or any(
                isinstance(el, cst.StarredElement) for el in value.elements):
            return None
        value = value.elements[index].value
    inner = SequenceAnalysis.of(taint.project).function_walk(*hit)
    return rank_formula(value, inner, consts, depth + 1) if inner is not None else None


def _field_formula(e: cst.Attribute, walk, consts: set, depth: int):
    """A field that holds a rank id because something stores one there (`cfg.env._local_rank =
    int(os.environ["LOCAL_RANK"])`, `ProjectTaint.rank_fields`), however it is spelled: the formula of what was
    stored -- each rank-varying store's value, a name read from its one reaching binding in the storing function,
    the launchers' `--local_rank` the rank itself --, when they all agree; None otherwise."""
    if walk is None:
        return None
    origin = walk.eval(e)
    if origin is None or origin.kind != "rank" or origin.axes is not None or origin.node is not e:
        return None
    from dslint.program.process_groups import reaching_value
    stores = walk.taint.analysis.rank_field_stores(walk.taint.src, e, walk.cls)
    formulas = []
    for where, info, value in stores or ():
        if isinstance(value, str) and value in (LAUNCHER_OPTION, HANDED_RANK):
            formulas.append(lambda r: r)
            continue
        if type(value) is cst.Name and info is not None:
            value = reaching_value(info.node, value, value.value)
        if not isinstance(value, cst.BaseExpression):
            return None
        formulas.append(rank_formula(value, None, consts, depth + 1))
    return _agreeing(formulas, consts)


def _agreeing(formulas: list, consts: set):
    """One formula for a value bound more than once (or chosen by a uniform test): each binding's, when they all
    give every representative rank the same answer; None otherwise."""
    if not formulas or any(f is None for f in formulas):
        return None
    if len(formulas) > 1 and any(len({decide(f, r) for f in formulas}) != 1 for r in representatives(consts)):
        return None
    return formulas[0]


def _argument_formula(via_call: tuple, name: str, walk, consts: set, depth: int):
    """A parameter: the formula of the argument the (first) caller passes for it -- itself a rank source, or a
    name bound once there to one (`local_rank = int(os.environ["LOCAL_RANK"])`, then `f(local_rank)`)."""
    from dslint.program.process_groups import reaching_value
    other, call = via_call
    info = walk.taint.src.facts.functions.get(walk.scope)
    if info is None:
        return None
    params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
    value = None
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == name or arg.keyword is None and i < len(params) \
                and params[i] == name:
            value = arg.value
            break
    if value is None:
        return None
    if type(value) is cst.Name:
        scope = next((c.scope for c in other.facts.calls if c.node is call), None)
        caller = other.facts.functions.get(scope) if scope is not None else None
        value = reaching_value(caller.node, call, value.value) if caller is not None else None
        if value is None:
            return None
    return rank_formula(value, None, consts, depth + 1)


def decide(formula: Optional[Callable[[int], object]], r: int) -> Optional[bool]:
    if formula is None:
        return None
    try:
        return bool(formula(r))
    except TypeError:
        return None


def representatives(consts: set) -> tuple[int, ...]:
    """Ranks that take every combination of the tests' outcomes: 0, 1, and each constant with its neighbours."""
    reps = {0, 1}
    for c in consts:
        if c >= 0:
            reps.update((c - 1, c, c + 1) if c > 0 else (c, c + 1))
    return tuple(sorted(reps))[:MAX_REPRESENTATIVES]


# --- tests split into leaves (`raising_ranks.path_implies`, `MixedFormula`) ---------------------------------
MAX_ATOMS = 8


def _truth(leaves: dict, values: dict, r: int, e, depth: int = 0):
    if depth > 12:
        return None
    leaf = leaves.get(id(e))
    if isinstance(leaf, tuple) and leaf[0] == "atom":
        return values[leaf[1]] != leaf[2]
    if isinstance(leaf, tuple) and leaf[0] == "const":
        return leaf[1]
    if isinstance(leaf, tuple) and leaf[0] == "rank":
        return decide(leaf[1], r)
    if isinstance(leaf, tuple) and leaf[0] == "name":
        return _truth(leaves, values, r, leaf[1], depth + 1)
    if isinstance(e, cst.UnaryOperation):
        inner = _truth(leaves, values, r, e.expression, depth + 1)
        return None if inner is None else not inner
    if isinstance(e, cst.BooleanOperation):
        left, right = _truth(leaves, values, r, e.left, depth + 1), _truth(leaves, values, r, e.right, depth + 1)
        if left is None or right is None:
            return None
        return left and right if isinstance(e.operator, cst.And) else left or right
    return None


_NEGATED = {cst.IsNot: "is", cst.NotEqual: "==", cst.NotIn: "in"}
_PLAIN = {cst.Is: "is", cst.Equal: "==", cst.In: "in"}


def _leaves(walk, e: cst.BaseExpression, consts: set, atoms: dict, leaves: dict, depth: int,
            held: bool = False) -> None:
    """Classify the leaves of test `e` (see `path_implies`) into `leaves` (id of the node → what it is). `held`:
    a name bound once, before the test, to a value a later evaluation could change (a call: `use_barrier = not
    os.path.exists(path)`) is a leaf of its own -- the value it holds, read alike by every test -- rather than
    that value's code."""
    if depth > 6 or id(e) in leaves:
        return
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        _leaves(walk, e.expression, consts, atoms, leaves, depth + 1, held)
        return
    if isinstance(e, cst.BooleanOperation):
        _leaves(walk, e.left, consts, atoms, leaves, depth + 1, held)
        _leaves(walk, e.right, consts, atoms, leaves, depth + 1, held)
        return
    bound = getattr(walk, "seq_bound", {})
    if isinstance(e, cst.Name) and e.value not in ("True", "False", "None"):
        value = bound.get(e.value)
        if value is not _MULTI and value is not _FROM_ENV and isinstance(value, tuple) and len(value) == 1 \
                and isinstance(value[0], (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison, cst.Call,
                                          cst.Attribute, cst.Name)) and \
                not (held and not _stable(walk, value[0]) and rank_formula(e, walk, set()) is None
                     and _settled(walk, walk.taint.src.facts.functions.get(walk.scope), e)):
            leaves[id(e)] = ("name", value[0])
            _leaves(walk, value[0], consts, atoms, leaves, depth + 1, held)
            return
    mine: set = set()
    formula = rank_formula(e, walk, mine)
    if formula is not None:
        consts |= mine
        leaves[id(e)] = ("rank", formula)
        return
    if id(e) in getattr(walk, "seq_sentinels", {}):
        leaves[id(e)] = ("const", walk.seq_sentinels[id(e)])
        return
    analysis = getattr(getattr(walk, "analysis", None), "sequences", None)
    if analysis is None and getattr(walk, "taint", None) is not None:     # a function's recording walk
        analysis = SequenceAnalysis.of(walk.taint.analysis.project)
    if analysis is not None:
        scope = Scope(walk.taint.src, walk.cls, walk.seq_tests, walk.seq_bound, set(), walk.seq_sentinels, walk)
        value = analysis.distributed_truth(scope, e)
        if value is not None:
            leaves[id(e)] = ("const", value)
            return
    negated = False
    key = _code(e, 10000)
    if isinstance(e, cst.Comparison) and len(e.comparisons) == 1:
        op = type(e.comparisons[0].operator)
        if op in _NEGATED or op in _PLAIN:
            negated = op in _NEGATED
            word = _NEGATED.get(op) or _PLAIN[op]
            key = f"{_code(e.left, 10000)} {word} {_code(e.comparisons[0].comparator, 10000)}"
    atoms[key] = None
    leaves[id(e)] = ("atom", key, negated)


def _code(node: cst.CSTNode, limit: int = 48) -> str:
    return code_of(node, limit)


@dataclass(frozen=True)
class MixedFormula:
    """A rank-varying test made of rank leaves (`rank_formula`) and uniform ones joined by `and`/`or`/`not`
    (`use_barrier and args.local_rank not in [-1, 0] and split == "train"`): its leaves as `raising_ranks.path_implies`
    splits them -- a uniform leaf is a free boolean, the same wherever it is written alike, so two tests reading
    `use_barrier` and `split == "train"` take one value of each on every rank --, the test, and the constants its
    rank leaves compare with."""

    test: cst.BaseExpression = field(compare=False)
    names: tuple
    leaves: dict = field(compare=False, hash=False)
    consts: frozenset

    def table(self, r: int) -> Optional[dict]:
        from itertools import product
        out = {}
        for bits in product((False, True), repeat=len(self.names)):
            value = _truth(self.leaves, dict(zip(self.names, bits)), r, self.test)
            if value is None:
                return None
            out[bits] = bool(value)
        return out

    def residue(self, r: int) -> tuple[Optional[bool], bool, str]:
        """For rank `r`: (its value when its rank leaves decide it, None otherwise; still rank-varying?; the key
        of the uniform test left: the leaves it depends on, written as the conjunction or disjunction it is, or
        as its truth table). One key for one boolean function of the uniform leaves, however the test is written."""
        table = self.table(r)
        if table is None:
            return None, True, ""
        values = set(table.values())
        if len(values) == 1:
            return values.pop(), False, ""
        n = len(self.names)
        used = [i for i in range(n) if any(
            table[bits] != table[bits[:i] + (not bits[i],) + bits[i + 1:]] for bits in table)]
        names = [self.names[i] for i in used]
        rows = {tuple(bits[i] for i in used): v for bits, v in table.items()}
        true = [bits for bits, v in rows.items() if v]
        false = [bits for bits, v in rows.items() if not v]
        key = self._key(names, true, false)
        return None, False, Residue(key)

    @staticmethod
    def _key(names: list, true: list, false: list) -> str:
        word = lambda name, on: name if on else f"not {_grouped(name)}"     # noqa: E731
        if len(true) == 1:
            return " and ".join(_grouped(word(nm, on)) if len(names) > 1 else word(nm, on)
                                for nm, on in zip(names, true[0]))
        if len(false) == 1:
            return " or ".join(_grouped(word(nm, not on)) if len(names) > 1 else word(nm, not on)
                               for nm, on in zip(names, false[0]))
        return "{" + ", ".join(names) + "} in " + repr(sorted(true))


class RankSplit(str):
    """The key of a choice on a rank-varying test that is not decided per representative rank (a grid coordinate,
    `rank == src` of a handed-in source, per-rank data): some ranks run one side, others the other. A tree holding
    one whose sides differ is no proof of balance by itself (`balanced`); an early exit under it is paired when
    the ranks of both sides can run the same sequence (`_drop_paired_exits`)."""


class Residue(str):
    """The key of a choice on what a rank test leaves of its uniform leaves for one rank: equal to the same uniform
    test written alone, but every value of it must pair the ranks (`_paired_on_some_path`), not some value --
    the rank test itself is not a choice a path may skip."""


def _grouped(code: str) -> str:
    return f"({code})" if " and " in code or " or " in code else code


def mixed_formula(walk, e: cst.BaseExpression) -> Optional[MixedFormula]:
    """A rank-varying test without a rank formula whose leaves are rank leaves, tests of a distributed run and
    uniform leaves (the taint says so, and they read no call and no name bound more than once: the same code
    has the same value at every test of the body); None otherwise, or when its rank leaves decide nothing."""
    consts: set = set()
    atoms: dict[str, None] = {}
    leaves: dict[int, object] = {}
    _leaves(walk, e, consts, atoms, leaves, 0, held=True)
    if not atoms or len(atoms) > MAX_ATOMS or not any(
            isinstance(leaf, tuple) and leaf[0] == "rank" for leaf in leaves.values()):
        return None
    todo = [e]
    while todo:
        n = todo.pop()
        leaf = leaves.get(id(n))
        if isinstance(leaf, tuple) and leaf[0] == "name":
            todo.append(leaf[1])
        elif isinstance(leaf, tuple) and leaf[0] == "atom":
            if walk.eval(n) is not None or not _stable(walk, n):
                return None
        elif leaf is None:
            todo.extend(c for c in n.children if isinstance(c, cst.BaseExpression))
    mixed = MixedFormula(e, tuple(atoms), leaves, frozenset(consts))
    reps = representatives(consts)
    tables = [mixed.table(r) for r in reps]
    if any(t is None for t in tables) or all(t == tables[0] for t in tables):
        return None
    return mixed


def _stable(walk, e: cst.BaseExpression) -> bool:
    """A uniform leaf whose value the body cannot change between two tests: no call but `getattr` of a literal
    field (a read, like `cfg.field`), and no name bound more than once in the body nor parameter the body binds
    again -- unless every binding of it comes before the test, in no loop holding the test (`BindingOrder`:
    `flag = False; if split == "train": flag = True`, then `if flag and rank != 0:` … `if flag and rank == 0:`)."""
    info = walk.taint.src.facts.functions.get(walk.scope)
    params = set(info.params) if info is not None else set()
    todo = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, cst.Call) and _field_read(walk, n):
            todo.extend(a.value for a in n.args)
            continue
        if isinstance(n, (cst.Call, cst.Await, cst.Yield, cst.NamedExpr)):
            return False
        if isinstance(n, cst.Name) and _rebound(walk, params, n.value) and not _settled(walk, info, n):
            return False
        todo.extend(n.children)
    return True


def _rebound(walk, params: set, name: str) -> bool:
    bound = walk.seq_bound.get(name)
    return bound in (_MULTI, _FROM_ENV) or isinstance(bound, tuple) and len(bound) > 1 or \
        name in params and bound is not None


def _field_read(walk, call: cst.Call) -> bool:
    """`getattr(obj, "field")` / `getattr(obj, "field", default)`: the builtin, a literal field name."""
    return isinstance(call.func, cst.Name) and call.func.value == "getattr" and \
        walk.taint.src.facts.resolve_expr(call.func) in (None, "getattr") and \
        len(call.args) in (2, 3) and all(a.keyword is None and not a.star for a in call.args) and \
        isinstance(literal_value(call.args[1].value), str)


def _settled(walk, info: Optional["FunctionInfo"], name: cst.Name) -> bool:
    if info is None:
        return False
    memo = walk.__dict__.setdefault("_binding_order", {})
    order = memo.get(id(info.node))
    if order is None:
        order = memo[id(info.node)] = (BindingOrder(info.node), info.node)
    return order[0].settled_at(name.value, name)


# --- trees ---------------------------------------------------------------------------------------------------
class _Unknown(Exception):
    """The tree cannot be told (a rank-dependent test whose branches differ, a tree too large, recursion)."""


@dataclass
class Scope:
    """What is known of one body's tests, for building its trees."""

    src: "PythonSource"
    cls: Optional[str]
    tests: dict[int, tuple]
    bound: dict[str, object]
    consts: set
    sentinels: dict = field(default_factory=dict)   # `Records.seq_sentinels`
    walk: object = None                              # the recording walk, when the scope is a function's


class SequenceBuilder:
    def __init__(self, analysis: "SequenceAnalysis", scope: Scope, r: int) -> None:
        self.analysis = analysis
        self.sites = analysis.sites
        self.scope = scope
        self.src = scope.src
        self.r = r
        self.size = 0
        self.split = 0          # inside how many sides of a split of the ranks (`RankSplit`)

    # every method returns (items, status): status "next" (falls through), "return", "raise", "break",
    # "continue", or a frozenset of them when a choice's sides end differently (the rest of the block was
    # pushed into the sides that go on)
    def block(self, stmts: Sequence[cst.CSTNode]) -> tuple[tuple, object]:
        out: list = []
        for i, stmt in enumerate(stmts):
            alts, key = self.stmt(stmt)
            if key is None or len(alts) == 1:
                items, status = alts[0] if len(alts) == 1 else ((), "next")
                out.extend(items)
                if status != "next":
                    _mixed_before_more(status, i, stmts)
                    return tuple(out), status
                continue
            if len(alts := _going_on(alts, key, self.split)) == 1:
                items, status = alts[0]
                out.extend(items)
                if status != "next":
                    _mixed_before_more(status, i, stmts)
                    return tuple(out), status
                continue
            statuses = {s for _, s in alts}
            if statuses == {"next"} or len(statuses) == 1:
                out.append(_choice(key, [items for items, _ in alts]))
                status = next(iter(statuses))
                if status != "next":
                    _mixed_before_more(status, i, stmts)
                    return tuple(out), status
                continue
            if any(isinstance(s, frozenset) for s in statuses):
                raise _Unknown()
            rest, rest_status = self.block(stmts[i + 1:])
            sides = [(items + rest, rest_status) if s == "next" else (items, s) for items, s in alts]
            ends = {s for _, s in sides}
            out.append(_choice(key, [items for items, _ in sides]))
            return tuple(out), next(iter(ends)) if len(ends) == 1 else frozenset(ends)
        return tuple(out), "next"

    def _grow(self, n: int = 1) -> None:
        self.size += n
        if self.size > MAX_ITEMS:
            raise _Unknown()

    def stmt(self, node: cst.CSTNode) -> tuple[list, Optional[object]]:
        """[(items, status)] and the key of the choice between them (None: one alternative)."""
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            out: list = []
            for small in node.body:
                items, status = self.small(small)
                out.extend(items)
                if status != "next":
                    return [(tuple(out), status)], None
            return [(tuple(out), "next")], None
        if isinstance(node, cst.BaseSmallStatement):
            items, status = self.small(node)
            return [(items, status)], None
        if kind is cst.If:
            return self.chain(node)
        if kind is cst.For and (turn := self._turn(node)) is not None:
            # `for r in range(world): if get_rank() == r: ...`: every rank takes its own turn once
            head = self.expr(node.iter)
            items, status = self.block(_body(turn.body))
            if status != "next":
                raise _Unknown()
            return [(head + items, "next")], None
        if kind in (cst.For, cst.While):
            head = self.expr(node.iter if kind is cst.For else node.test)
            body, _ = self.block(_body(node.body))
            items = head + ((("loop", "", body),) if body else ())
            if node.orelse is not None:
                more, status = self.block(_body(node.orelse.body))
                return [(items + more, status)], None
            return [(items, "next")], None
        if kind is cst.With:
            return [self.with_stmt(node)], None
        if kind is cst.Try or type(node).__name__ == "TryStar":
            items, status = self.block(_body(node.body))
            if status == "next" and node.orelse is not None:
                more, status = self.block(_body(node.orelse.body))
                items += more
            if node.finalbody is not None:
                more, fstatus = self.block(_body(node.finalbody.body))
                items += more
                status = fstatus if fstatus != "next" else status
            return [(items, status)], None
        if kind is cst.Match:
            head = self.expr(node.subject)
            alts = [self.block(_body(case.body)) for case in node.cases]
            if len(set(alts)) > 1:
                raise _Unknown()
            return [(head + alts[0][0], alts[0][1])] if alts else [(head, "next")], None
        return [((), "next")], None        # FunctionDef / ClassDef: their own scopes

    def _turn(self, node: cst.For) -> Optional[cst.If]:
        """A loop over every rank of the world whose body is one `if <global rank> == <loop variable>:` without
        `else` (`for r in range(dist.get_world_size()): if dist.get_rank() == r: print(...); dist.barrier()`):
        each rank runs that body exactly once, in its own pass, so its collectives are the body's, once. The
        loop variable must not reach a collective's arguments (`broadcast(x, src=r)` would pair different
        sources across ranks). The `if` (None: not such a loop)."""
        body = _body(node.body)
        if node.orelse is not None or not isinstance(node.target, cst.Name) or len(body) != 1 or \
                not isinstance(body[0], cst.If) or body[0].orelse is not None:
            return None
        it = node.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
                and len(it.args) == 1 and isinstance(it.args[0].value, cst.Call) and not it.args[0].value.args
                and (self.src.facts.resolve_expr(it.args[0].value.func) or "").endswith("get_world_size")):
            return None
        test, var = body[0].test, node.target.value
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
                not isinstance(test.comparisons[0].operator, cst.Equal):
            return None
        sides = (test.left, test.comparisons[0].comparator)
        for rank, other in (sides, sides[::-1]):
            formula = rank_formula(rank, None, set())
            if isinstance(other, cst.Name) and other.value == var and formula is not None and \
                    all(decide(lambda r: formula(r) == r, r) for r in (0, 1, 3)):
                break           # the global rank itself (`dist.get_rank()`), not a test of it
        else:
            return None
        for call in iter_calls(body[0].body):
            if self.sites.classify(self.src, call, self.scope.cls) is not None and any(
                    isinstance(n, cst.Name) and n.value == var for a in call.args for n in _names_in(a.value)):
                return None
        return body[0]

    def small(self, node: cst.BaseSmallStatement) -> tuple[tuple, object]:
        kind = type(node)
        if kind is cst.Return:
            return self.expr(node.value) if node.value is not None else (), "return"
        if kind is cst.Raise:
            return self.expr(node.exc) if node.exc is not None else (), "raise"
        if kind is cst.Continue:
            return (), "continue"
        if kind is cst.Break:
            return (), "break"
        if kind is cst.Expr:
            value = node.value
            if type(value) is cst.Yield:
                inner = value.value
                return (self.expr(inner) if isinstance(inner, cst.BaseExpression) else ()) + (YIELD,), "next"
            items = self.expr(value)
            if type(value) is cst.Call and self.src.facts.resolve_expr(value.func) in EXIT_CALLS:
                return items, "raise"
            return items, "next"
        if kind in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            value = node.value
            if value is None:
                return (), "next"
            if type(value) is cst.Yield:
                inner = value.value
                return (self.expr(inner) if isinstance(inner, cst.BaseExpression) else ()) + (YIELD,), "next"
            return self.expr(value), "next"
        if kind is cst.Assert:
            # `assert dist.get_rank() == 0, "only rank 0 prepares the data"`: the other ranks fail there
            items = self.expr(node.test)
            if decide(rank_formula(node.test, None, self.scope.consts), self.r) is False:
                return items, "raise"
            return items, "next"
        if kind is cst.Del:
            return self.expr(node.target), "next"
        return (), "next"

    # --- tests --------------------------------------------------------------------------------------------
    def truth(self, test: cst.BaseExpression) -> tuple[Optional[bool], bool, str]:
        """(the test's value for this rank, or None; is it rank-varying?; the key of the choice between its
        sides when it is not). A test mixing rank leaves with uniform ones (`use_barrier and local_rank == 0 and
        split == "train"`) is, for this rank, either decided or the uniform test its rank leaves leave
        (`use_barrier and split == "train"`): a choice every rank takes alike, keyed by that residue."""
        rec = self.scope.tests.get(id(test))
        if rec is None:
            if id(test) in self.scope.sentinels:
                return self.scope.sentinels[id(test)], False, code_of(test, 200)
            return self.analysis.distributed_truth(self.scope, test), False, code_of(test, 200)
        value = decide(rec[1], self.r)
        if value is None and len(rec) > 2 and rec[2] is not None:
            return rec[2].residue(self.r)
        if value is None and rec[1] is None:
            # a rank-varying test that asks whether the run is distributed (`def is_dist(): rank, local_rank, _, _
            # = get_dist_setting(); return rank >= 0 and local_rank >= 0`): the same answer on every launched rank
            dist = self.analysis.distributed_truth(self.scope, test)
            if dist is not None:
                return dist, False, code_of(test, 200)
        return value, value is None, code_of(test, 200)

    def chain(self, node: cst.If) -> tuple[list, Optional[object]]:
        head = self.expr(node.test)
        value, varying, key = self.truth(node.test)
        body = lambda: self.block(_body(node.body))       # noqa: E731
        orelse = node.orelse

        def other() -> tuple[tuple, object]:
            if isinstance(orelse, cst.If):
                alts, key = self.chain(orelse)
                if key is None:
                    return alts[0]
                alts = _going_on(alts, key, self.split)
                if len(alts) == 1:
                    return alts[0]
                statuses = {s for _, s in alts}
                if len(statuses) != 1:
                    raise _Unknown()
                return (_choice(key, [items for items, _ in alts]),), next(iter(statuses))
            if isinstance(orelse, cst.Else):
                return self.block(_body(orelse.body))
            return (), "next"

        if value is True:
            items, status = body()
            return [(head + items, status)], None
        if value is False:
            items, status = other()
            return [(head + items, status)], None
        self.split += varying
        try:
            a, b = body(), other()
        finally:
            self.split -= varying
        if a == b:
            return [(head + a[0], a[1])], None
        if varying:
            # rank-dependent sides that differ, the test not decided per rank (`rank == src` of a handed-in
            # source): a split of the ranks into two classes, each running one side (`RankSplit`)
            key = RankSplit(code_of(node.test, 200))
        alts = [(head + a[0], a[1]), (head + b[0], b[1])]
        return alts, key

    # --- with ---------------------------------------------------------------------------------------------
    def with_stmt(self, node: cst.With) -> tuple[tuple, object]:
        pre: list = []
        post: list = []
        for item in node.items:
            expr = item.item
            tree = self.analysis.context_manager(self.src, expr, self.scope.cls, self.r) \
                if type(expr) is cst.Call else None
            if tree is None:
                pre.extend(self.expr(expr))
                continue
            pre.extend(self.expr_args(expr))
            if tree.count(YIELD) != 1:
                raise _Unknown()
            at = tree.index(YIELD)
            pre.extend(_attach(tree[:at], expr))
            post[:0] = _attach(tree[at + 1:], expr)
        items, status = self.block(_body(node.body))
        return tuple(pre) + items + tuple(post), status

    # --- expressions: collectives in evaluation order --------------------------------------------------------
    def expr_args(self, call: cst.Call) -> tuple:
        out: tuple = self.expr(call.func) if type(call.func) is not cst.Name else ()
        for arg in call.args:
            out += self.expr(arg.value)
        return out

    def expr(self, e: Optional[cst.CSTNode]) -> tuple:
        if e is None:
            return ()
        kind = type(e)
        if kind in (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Lambda):
            return ()
        if kind is cst.Call:
            out = self.expr_args(e)
            return out + self.call(e)
        if kind is cst.Await and type(e.expression) is cst.Call:
            return self.expr_args(e.expression)     # an asyncio engine's request (`FlowWalk.expr`): no site
        if kind is cst.IfExp:
            head = self.expr(e.test)
            a, b = self.expr(e.body), self.expr(e.orelse)
            if a == b:
                return head + a
            value, varying, key = self.truth(e.test)
            if value is not None:
                return head + (a if value else b)
            if varying:
                raise _Unknown()
            return head + (_choice(key, [a, b]),)
        if kind is cst.BooleanOperation:
            head = self.expr(e.left)
            right = self.expr(e.right)
            if not right:
                return head
            value, varying, key = self.truth(e.left)
            if value is not None:
                runs = value if isinstance(e.operator, cst.And) else not value
                return head + (right if runs else ())
            if varying:
                raise _Unknown()
            return head + (_choice(key, [right, ()]),)
        if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            head = self.expr(e.for_in.iter)
            inner: tuple = ()
            for part in sub_expressions(e):
                if part is not e.for_in:
                    inner += self.expr(part)
            comp = e.for_in.inner_for_in
            while comp is not None:
                inner += self.expr(comp.iter)
                comp = comp.inner_for_in
            return head + ((("loop", "", inner),) if inner else ())
        out: tuple = ()
        for child in sub_expressions(e):
            out += self.expr(child)
        return out

    def call(self, call: cst.Call) -> tuple:
        site = self.sites.classify(self.src, call, self.scope.cls)
        if site is None:
            return ()
        if site.kind == "function" and site.function is not None:
            tree = self.analysis.function_tree(*site.function, self.r)
            if tree is None:
                raise _Unknown()
            tree = _strip_yields(tree)      # calling a generator runs none of it here
            self._grow(len(tree))
            if site.callback:               # run by the outside call, zero or more times
                return (("loop", "", _attach(tree, call)),) if tree else ()
            return _attach(tree, call)
        self._grow()
        return (Token(*self.analysis.token(site), call),)


def _going_on(alts: list, key, split: int = 0) -> list:
    """The sides of a uniform choice that do not raise, when some do: every rank raises there together and the
    job ends loudly (the launcher takes the group down), whatever collectives came before, so the sequences to
    compare are those of the sides that go on. A split of the ranks keeps its sides: some ranks raise while the
    others go on and wait, and so does a uniform choice inside one of its sides (`split`): the ranks of the
    other side do not raise with them."""
    if not split and not isinstance(key, RankSplit) and any(s == "raise" for _, s in alts) and any(s != "raise" for _, s in alts):
        return [alt for alt in alts if alt[1] != "raise"]
    return alts


def _mixed_before_more(status, i: int, stmts) -> None:
    """A nested block that ends some paths and goes on with others, followed by more statements here: where
    those statements belong is not kept (the rest was pushed into the nested block's sides only)."""
    if isinstance(status, frozenset) and "next" in status and i < len(stmts) - 1:
        raise _Unknown()


def _choice(key, sides: list) -> object:
    """A branch on a uniform test: its sides' trees; one tree when they agree."""
    if all(s == sides[0] for s in sides):
        return ("seq", sides[0]) if sides[0] else ("seq", ())
    return ("choice", key, tuple(sides))


def _attach(tree: tuple, call: cst.Call) -> tuple:
    """A callee's tree as the caller sees it: every token run by this call."""
    out = []
    for item in tree:
        if isinstance(item, Token):
            out.append(Token(item.op, item.group, call))
        elif item[0] == "choice":
            out.append(("choice", item[1], tuple(_attach(side, call) for side in item[2])))
        elif item[0] == "loop":
            out.append(("loop", item[1], _attach(item[2], call)))
        elif item[0] == "seq":
            out.append(("seq", _attach(item[1], call)))
        else:
            out.append(item)
    return tuple(out)


def flatten(tree: tuple) -> tuple:
    """`("seq", …)` items spliced in (a choice whose sides agreed), for comparison."""
    out = []
    for item in tree:
        if isinstance(item, tuple) and item and item[0] == "seq":
            out.extend(flatten(item[1]))
        elif isinstance(item, tuple) and item and item[0] == "choice":
            out.append(("choice", item[1], tuple(flatten(side) for side in item[2])))
        elif isinstance(item, tuple) and item and item[0] == "loop":
            out.append(("loop", item[1], flatten(item[2])))
        else:
            out.append(item)
    return tuple(out)


def tokens(tree: tuple) -> list[Token]:
    """The tokens of a tree, choices' sides and loops' bodies included, in order."""
    out: list[Token] = []
    for item in tree:
        if isinstance(item, Token):
            out.append(item)
        elif item[0] == "choice":
            for side in item[2]:
                out.extend(tokens(side))
        elif item[0] == "loop":
            out.extend(tokens(item[2]))
        elif item[0] == "seq":
            out.extend(tokens(item[1]))
    return out


def _body(block) -> Sequence[cst.CSTNode]:
    return block.body if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()


# --- the project-level analysis: per-function summaries ------------------------------------------------------
class SequenceAnalysis:
    def __init__(self, project: "ProjectView") -> None:
        self.project = project
        self.sites = CollectiveSites.of(project)
        self.taint = self.sites.taint
        self._trees: dict[tuple, object] = {}
        self._scopes: dict[tuple, Optional[Scope]] = {}
        self._walks: dict[tuple, FlowWalk] = {}
        self._busy: set[tuple] = set()

    @classmethod
    def of(cls, project: "ProjectView") -> "SequenceAnalysis":
        return project.memo(cls, lambda: cls(project))

    def token(self, site: Site) -> tuple[str, tuple]:
        func = site.call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        # explicit collectives by op; engine/trainer/accelerate calls by method; a forward or a generation of any
        # model alike (which model runs is not compared: `actor(x)` on one side, `critic(x)` on the other agree)
        op = last if site.kind == "explicit" else site.kind if site.kind in ("forward", "generate") else \
            f"{site.kind}:{last}"
        group = self.sites.group_of(site)
        return op, (group.axes, group.family, group.ranks)

    def function_scope(self, src: "PythonSource", info: "FunctionInfo") -> Optional[Scope]:
        """The tests of a checked function, from a walk of its body (its parameters' taint from the callers)."""
        key = (id(src), info.qualname)
        if key not in self._scopes:
            self._scopes[key] = None
            if not isinstance(info.node.body, cst.IndentedBlock):
                return None
            env = {**self.taint.globals_for(src, info), **self.taint.param_taint(src, info)}
            walk = _Recorder(self.taint.taint(src), info.qualname, env, info.class_name)
            walk.run(info.node.body.body)
            self._walks[key] = walk
            self._scopes[key] = Scope(src, info.class_name, walk.seq_tests, walk.seq_bound, walk.seq_consts,
                                      walk.seq_sentinels, walk)
        return self._scopes[key]

    def function_walk(self, src: "PythonSource", info: "FunctionInfo") -> Optional[FlowWalk]:
        """The recording walk of a checked function's body (`function_scope`), for reading its names."""
        self.function_scope(src, info)
        return self._walks.get((id(src), info.qualname))

    def function_tree(self, src: "PythonSource", info: "FunctionInfo", r: int) -> Optional[tuple]:
        """The summary of a checked function for a process of rank `r` (None: unknown)."""
        key = (id(src), info.qualname, r)
        if key in self._trees:
            return self._trees[key]
        if key in self._busy:
            return None
        scope = self.function_scope(src, info)
        if scope is None:
            return None
        self._busy.add(key)
        try:
            tree = self.tree(scope, info.node.body.body, r)
        finally:
            self._busy.discard(key)
        self._trees[key] = tree
        return tree

    def function_consts(self, src: "PythonSource", info: "FunctionInfo") -> set:
        scope = self.function_scope(src, info)
        return scope.consts if scope is not None else set()

    def tree(self, scope: Scope, stmts: Sequence[cst.CSTNode], r: int, ends: Optional[list] = None) \
            -> Optional[tuple]:
        """The tree of `stmts` for rank `r` (None: unknown); how it ends is appended to `ends` when given."""
        builder = SequenceBuilder(self, scope, r)
        try:
            items, status = builder.block(stmts)
        except (_Unknown, RecursionError):
            return None
        if ends is not None:
            ends.append(status)
        return flatten(items)

    def context_manager(self, src: "PythonSource", call: cst.Call, cls: Optional[str], r: int) -> Optional[tuple]:
        """`with cm(...)`: the tree of a checked `@contextmanager` function (with its `yield` marker)."""
        hit = self.taint.function_info(self.taint.call_source(src, src.facts.resolve_expr(call.func), cls))
        if hit is None or not any(_last(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                                  in ("contextmanager", "asynccontextmanager") for d in hit[1].node.decorators):
            return None
        if self.sites.reaches(*hit) is None:
            return None
        tree = self.function_tree(*hit, r)
        if tree is None:
            raise _Unknown()
        return tree

    def distributed_truth(self, scope: Scope, test: cst.BaseExpression, depth: int = 0) -> Optional[bool]:
        """The value of a uniform test in a distributed run, when the test asks whether the run is distributed
        (`dist.is_initialized()`, `get_world_size() > 1`, `local_rank != -1`, a checked helper returning one):
        on a single process no collective can leave another waiting, so only the distributed side counts."""
        if depth > 3 or test is None:
            return None
        return distributed_truth_of(test, lambda leaf, at: self._distributed_leaf(scope, leaf, at), depth)

    def _distributed_leaf(self, scope: Scope, test: cst.BaseExpression, depth: int) -> Optional[bool]:
        kind = type(test)
        if kind is cst.Name:
            bound = scope.bound.get(test.value)
            if isinstance(bound, tuple) and len(bound) == 1:
                return self.distributed_truth(scope, bound[0], depth + 1)
            return None
        if kind is cst.Call:
            callee = scope.src.facts.resolve_expr(test.func) or ""
            last = _last(test.func)
            if last in ("is_initialized", "is_available") and callee.startswith(_DIST_MODULES):
                return True
            hit = self.taint.function_info(self.taint.call_source(scope.src, callee or None, scope.cls))
            if hit is not None:
                returns = _plain_returns(hit[1].node)
                if len(returns) == 1:
                    inner = self.function_scope(*hit)
                    if inner is not None:
                        return self.distributed_truth(inner, returns[0], depth + 1)
            return None
        if kind is cst.Comparison and len(test.comparisons) == 1:
            op = type(test.comparisons[0].operator)
            right = literal_value(test.comparisons[0].comparator)
            left = test.left
            bound = scope.bound.get(left.value) if type(left) is cst.Name else None
            if isinstance(bound, tuple) and len(bound) == 1:
                left = bound[0]
            if type(left) is cst.Call and _last(left.func) == "get_world_size" and isinstance(right, int) \
                    and not isinstance(right, bool):
                cmp = _COMPARE.get(op)
                if cmp is None:
                    return None
                many, one = cmp(2, right), cmp(1, right)       # a distributed run: 2 or more processes
                return many if many == cmp(64, right) and many != one else None
            if right == -1 and op in (cst.Equal, cst.NotEqual) and (
                    rank_formula(left, None, set()) is not None
                    or type(left) is cst.Attribute and left.attr.value in _RANK_ID_ATTRS):
                return op is cst.NotEqual       # `local_rank == -1`: the run is not distributed
            if isinstance(right, int) and not isinstance(right, bool) and right in (-1, 0) and \
                    _COMPARE.get(op) is not None and op not in (cst.In, cst.NotIn, cst.Is, cst.IsNot):
                # `rank >= 0`, `local_rank > -1`: the same answer for every launched rank (0, 1, …), another
                # for the "not launched" -1 -- whether the run is distributed
                formula = rank_formula(left, scope.walk, set())
                cmp = _COMPARE[op]
                if formula is not None and decide(formula, 0) == 0 and decide(lambda r: formula(r) == r, 1):
                    launched = {cmp(r, right) for r in (0, 1, 2, 64)}
                    if len(launched) == 1 and cmp(-1, right) not in launched:
                        return launched.pop()
        return None


def _plain_returns(node: cst.FunctionDef) -> list[cst.BaseExpression]:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    out = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Return) and small.value is not None:
                    out.append(small.value)
        elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return []
    return out


# --- the decisions on one walked body ---------------------------------------------------------------------------
def _strip_yields(tree: tuple) -> tuple:
    """The tree without its `yield` markers, inside choices and loops too (sides that then agree merge)."""
    out: list = []
    for item in tree:
        if item == YIELD:
            continue
        if isinstance(item, tuple) and item[0] == "choice":
            sides = [_strip_yields(side) for side in item[2]]
            merged = _choice(item[1], sides)
            out.extend(merged[1] if merged[0] == "seq" else (merged,))
        elif isinstance(item, tuple) and item[0] == "loop":
            out.append(("loop", item[1], _strip_yields(item[2])))
        else:
            out.append(item)
    return tuple(out)


def _none_of(tests: list[str]) -> str:
    if len(tests) == 1:
        return f"`{tests[0]}` does not hold"
    shown = ", ".join(f"`{t}`" for t in tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")
    return f"none of {shown} holds"


def apply(walk, body: Sequence[cst.CSTNode], hazard_cls) -> None:
    """After `HazardWalk` walked `body`: drop its DSL101 findings when every rank runs the same sequence of
    collectives through the body, and report the `if` chains whose branches all reach a collective but not the
    same sequence (see the module's docstring). `walk.found` is updated in place."""
    tested = [(k, h) for k, h in walk.found.items() if h.guard is not None and (
        h.code == "DSL101" and id(h.guard.node) in walk.seq_tests
        or h.code == "DSL103" and h.guard.exit_kind in ("return", "exit", "raise") and h.guard.test is not None
        and id(h.guard.test) in walk.seq_tests)]
    if any(h.code == "DSL103" for _, h in tested):
        looped = _exits_in_loops(body)     # a loop's tree holds its body's exits: not judged here
        tested = [(k, h) for k, h in tested if h.code == "DSL101" or id(h.at) not in looped]
    chains = walk.seq_balanced_chains
    if not tested and not chains:
        return
    analysis = walk.analysis.sequences
    scope = Scope(walk.src, walk.cls, walk.seq_tests, walk.seq_bound, set(walk.seq_consts), walk.seq_sentinels,
                  walk)
    try:
        trees = _trees_per_rank(analysis, scope, body)
    except RecursionError:
        return
    if balanced(trees) or tested and _balanced_at_callers(analysis, walk.src, walk.src.facts.functions.get(
            walk.scope), body, trees):
        for key, _ in tested:
            del walk.found[key]
        return
    where = _TopIndex(body)
    _drop_balanced_suffixes(walk, analysis, scope, body, tested, where)
    _drop_balanced_windows(walk, analysis, scope, body, tested, where)
    _drop_paired_exits(walk, analysis, scope, body, [(k, h) for k, h in tested if k in walk.found], where)
    note = _classes_differ(walk, trees)
    if note is not None:
        for key, h in tested:
            if key in walk.found and h.code == "DSL101" and note not in h.notes:
                h.notes.append(note)
    for head in chains.values():
        _report_chain(walk, analysis, scope, head, hazard_cls)


def _classes_differ(walk, trees: Optional[list]) -> Optional[str]:
    """The rank classes whose sequences through the body differ, in words, with the first collective they differ
    in: `rank 0 calls `barrier` (line 12) where rank 1 calls no further collective` (None: trees unknown or
    holding a split of the ranks no representative decides)."""
    if trees is None or any(_has_split(t) for _, t in trees):
        return None
    classes: dict = {}
    for r, tree in trees:
        classes.setdefault(tree, []).append(r)
    if len(classes) < 2:
        return None
    (a, ranks_a), (b, ranks_b) = sorted(classes.items(), key=lambda kv: kv[1][0])[:2]
    at = 0
    while at < min(len(a), len(b)) and a[at] == b[at]:
        at += 1

    def what(tree: tuple) -> str:
        toks = tokens(tree[at:at + 1])
        if not toks:
            return "no further collective" if at >= len(tree) else "no collective there"
        t, item = toks[0], tree[at]
        where = f"`{t.op}` (line {walk.src.span(t.call).line})"
        if isinstance(item, Token):
            return where
        if item[0] == "choice":
            return f"{where} on one side of `{item[1]}`"
        return f"{where} in a loop" if item[0] == "loop" else where

    def who(ranks: list) -> str:
        return f"rank {ranks[0]}" if len(ranks) == 1 else f"rank {ranks[0]} (as {', '.join(map(str, ranks[1:]))})"
    return (f"through this body {who(ranks_a)} calls {what(a)} where {who(ranks_b)} calls {what(b)}: the first "
            f"collective their sequences differ in")


def _balanced_at_callers(analysis: "SequenceAnalysis", src: "PythonSource", info: Optional["FunctionInfo"], body,
                         trees: Optional[list], depth: int = 0) -> bool:
    """A function whose ranks run different sequences, every call of which sits in a caller whose ranks all run
    one sequence through the caller's whole body, this function's summary inlined (`_trees_per_rank`): the pair
    split across a caller and a callee (`if local_rank not in [-1, 0]: barrier()` in the caller, `if local_rank
    == 0: barrier()` at the end of the loader it calls; `wait_for_first(args)` ... `release_others(args)`, each
    helper holding one half). A caller that is itself unbalanced is judged at its own callers (two levels). No
    caller found (an entry point, a callback) or a call from module code: not balanced. The callers inline the
    function's summary (`function_tree`, built from a walk with the callers' parameter taint): it must be the
    trees this walk built, rank by rank -- a test this walk finds rank-varying (a field stored on some ranks)
    that the summary's walk takes for uniform would make the callers agree on a choice the ranks do not share.
    The function's trees must differ by rank class only (no `RankSplit`: a test no representative decides), and
    each caller's trees must hold a collective of the call (a call the builder does not follow inlines nothing)."""
    if info is None or depth > 2 or trees is None or any(_has_split(t) for _, t in trees) or \
            not isinstance(info.node.body, cst.IndentedBlock) or body is not info.node.body.body:
        return False
    for r, tree in trees:
        summary = analysis.function_tree(src, info, r)
        if summary is None or _commuted(_strip_yields(summary)) != tree:
            return False
    calls = analysis.taint.calls_of(src, info)
    if not calls or len(calls) > 8:
        return False
    for other, call, caller in calls:
        if caller is None or caller is info or not isinstance(caller.node.body, cst.IndentedBlock):
            return False
        scope = analysis.function_scope(other, caller)
        if scope is None:
            return False
        try:
            at_caller = _trees_per_rank(analysis, scope, caller.node.body.body)
        except RecursionError:
            return False
        if at_caller is None or not any(t.call is call for _, tree in at_caller for t in tokens(tree)):
            return False            # the caller's trees do not hold this call's collectives (not followed)
        if not balanced(at_caller) and not _balanced_at_callers(analysis, other, caller, caller.node.body.body,
                                                                at_caller, depth + 1):
            return False
    return True


def balanced(trees: Optional[list]) -> bool:
    """Every representative rank's tree is known and the same, with no split of the ranks left in it."""
    return trees is not None and all(t == trees[0][1] for _, t in trees) and not any(
        _has_split(t) for _, t in trees)


def _has_split(tree: tuple) -> bool:
    for item in tree:
        if isinstance(item, Token) or not isinstance(item, tuple) or not item:
            continue
        if item[0] == "choice" and (isinstance(item[1], RankSplit) or any(_has_split(side) for side in item[2])):
            return True
        if item[0] == "loop" and _has_split(item[2]):
            return True
    return False


def _split_variants(tree: tuple, limit: int = 16) -> Optional[list]:
    """The trees the ranks of each class of the splits in `tree` run (each split's side taken; None past
    `limit`)."""
    out: list = [()]
    for item in tree:
        if isinstance(item, Token) or not isinstance(item, tuple) or not item or item[0] not in ("choice", "loop"):
            out = [t + (item,) for t in out]
            continue
        if item[0] == "loop":
            inner = _split_variants(item[2], limit)
            if inner is None:
                return None
            out = [t + (("loop", item[1], v),) for t in out for v in inner]
        else:
            sides = []
            for side in item[2]:
                inner = _split_variants(side, limit)
                if inner is None:
                    return None
                sides.append(inner)
            if isinstance(item[1], RankSplit):
                out = [t + v for t in out for side in sides for v in side]
            else:
                from itertools import product
                out = [t + (("choice", item[1], combo),) for t in out for combo in product(*sides)]
        if len(out) > limit:
            return None
    return out


def _drop_balanced_suffixes(walk, analysis: "SequenceAnalysis", scope: Scope, body, tested: list,
                            where: "_TopIndex") -> None:
    """The findings under a rank test whose ranks call the same sequence of collectives *from the statement holding
    the test to the end of the body*, though the body as a whole has no known tree (a helper before the test whose
    tree is unknown, a per-rank test there): what came before, every rank ran alike up to that statement -- a
    rank-dependent part of it is judged at its own test --, so whether this test's sides match is the suffix's
    question (`if cfg.env.lrank != 0: barrier(); return` after an inference loop, rank 0 calling its barrier
    after its own work). A `return` there leaves the function on every side alike: the caller goes on the same."""
    starts: dict[int, list] = {}
    for key, h in tested:
        # from the statement holding the test (an earlier exit's test guards what follows it: the ranks it lets
        # go never reach the later statements)
        test = h.guard.node if h.code == "DSL101" else h.guard.test
        at, here = where(test), where(h.at)
        if at is None or here is None:
            continue
        at = min(at, here)
        if at > 0:
            starts.setdefault(at, []).append(key)
    for at, keys in starts.items():
        if not _may_change(walk, body[:at]):
            continue                    # no collective nor exit before: the body's own trees answered
        try:
            trees = _trees_per_rank(analysis, scope, body[at:])
        except RecursionError:
            continue
        if balanced(trees):
            for key in keys:
                walk.found.pop(key, None)


MAX_WINDOW_STATEMENTS = 12


def _drop_balanced_windows(walk, analysis: "SequenceAnalysis", scope: Scope, body, tested: list,
                           where: "_TopIndex") -> None:
    """The findings inside a run of statements of the body -- from one finding's statement to another's -- through
    which every rank calls the same sequence of collectives and which every rank leaves the same way, though the
    body as a whole has no known or no equal trees (a model download between the two halves of a "first process
    downloads" pair in a `main` whose training loop comes later): the ranks enter that run together (what came
    before is judged at its own tests) and leave it together, so its collectives pair up inside it. The runs are
    looked for in the body and in the blocks every rank enters alike (`_shared_blocks`: under uniform tests,
    `with` and `try`)."""
    for block in _shared_blocks(walk, body):
        left = [(k, h) for k, h in tested if k in walk.found]
        if len(left) < 2:
            return
        _windows_in(walk, analysis, scope, block, left, where if block is body else _TopIndex(block))


def _shared_blocks(walk, body) -> list:
    """The body and the statement lists nested in it that every rank reaching their statement enters alike:
    the sides of an `if` on a uniform test, `with` bodies, `try` bodies and their `finally` (not loops: their
    count is DSL102's; not exception handlers: one rank may raise alone)."""
    out = [body]
    todo = list(body)
    while todo:
        node = todo.pop()
        inner: list = []
        if isinstance(node, cst.If) and id(node.test) not in walk.seq_tests:
            inner = [node.body] + ([node.orelse if isinstance(node.orelse, cst.If) else node.orelse.body]
                                   if node.orelse is not None else [])
        elif isinstance(node, cst.With):
            inner = [node.body]
        elif isinstance(node, cst.Try):
            inner = [node.body] + ([node.finalbody.body] if node.finalbody is not None else [])
        for block in inner:
            if isinstance(block, cst.If):
                todo.append(block)
                continue
            stmts = list(_body(block))
            if stmts:
                out.append(stmts)
                todo.extend(stmts)
    return out


def _windows_in(walk, analysis: "SequenceAnalysis", scope: Scope, body, tested: list, where: "_TopIndex") -> None:
    at: dict[int, list] = {}
    for key, h in tested:
        if key not in walk.found:
            continue
        test = h.guard.node if h.code == "DSL101" else h.guard.test
        i, j = where(test), where(h.at)
        if i is None or j is None:
            continue
        at.setdefault(min(i, j), []).append(key)
        if j != min(i, j):
            at.setdefault(j, [])
    points = sorted(at)
    if len(points) < 2 or len(points) > MAX_WINDOW_STATEMENTS:
        return
    windows = sorted(((a, b) for a in points for b in points if a < b), key=lambda w: (w[1] - w[0], w[0]))
    for a, b in windows:
        keys = [k for i in points if a <= i <= b for k in at[i] if k in walk.found]
        if not keys:
            continue
        ends: list = []
        try:
            trees = _trees_per_rank(analysis, scope, body[a:b + 1], ends)
        except RecursionError:
            continue
        if balanced(trees) and len(set(ends)) == 1 and not isinstance(ends[0], frozenset):
            for key in keys:
                walk.found.pop(key, None)


def _drop_paired_exits(walk, analysis: "SequenceAnalysis", scope: Scope, body, tested: list,
                       where: "_TopIndex") -> None:
    """The findings under a rank test whose statement lets some ranks `return` (`if rank != head: barrier(g);
    return`), when the ranks that leave there and those that go on through the rest of the body call the same
    sequence of collectives on some path of the uniform tests inside -- the early return is another spelling of
    `if rank != head: barrier(g) else: <the rest>`, and the presence rule and `_report_chain` read that chain so:
    a side is balanced when it reaches a collective and the sides may agree for some value of the uniform tests
    inside them (the head rank releasing the others from a fallback path, `if self.group is None: barrier(g);
    return`, and again after its update). The values are taken alike on every rank (one assignment of each
    uniform test for all the trees), and the agreed sequence must hold a collective: sides that agree only by
    running none are what the presence rule reports. A DSL103 finding counts only for a `return` (an exit or a
    `raise` does not hand control back to a caller that goes on alike)."""
    starts: dict[int, list] = {}
    for key, h in tested:
        if h.code == "DSL103" and h.guard.exit_kind != "return":
            continue
        test = h.guard.node if h.code == "DSL101" else h.guard.test
        at = where(test)
        if at is not None and where(h.at) == at:
            starts.setdefault(at, []).append((key, h))
    for at, hits in starts.items():
        try:
            ends = [_end_of(analysis, scope, body[at], r) for r in representatives(scope.consts)]
            if not any(e == "return" or isinstance(e, frozenset) and "return" in e for e in ends) or any(
                    e is None or e == "raise" or isinstance(e, frozenset) and "raise" in e for e in ends):
                continue                # no rank leaves here, or some raise: not an exit chain
            trees = _trees_per_rank(analysis, scope, body[at:])
        except RecursionError:
            continue
        if trees is None:
            continue
        variants = []
        for _, t in trees:
            more = _split_variants(t)
            if more is None:
                variants = None
                break
            variants.extend(more)
        if variants is None:
            continue
        for key, h in hits:
            test = h.guard.node if h.code == "DSL101" else h.guard.test
            if _paired_on_some_path(variants, h.guard.origin, test):
                walk.found.pop(key, None)


def _end_of(analysis: "SequenceAnalysis", scope: Scope, stmt: cst.CSTNode, r: int) -> object:
    """How a statement ends for rank `r` ("next", "return", …, a frozenset when its paths end differently;
    None: unknown)."""
    try:
        return SequenceBuilder(analysis, scope, r).block([stmt])[1]
    except _Unknown:
        return None


MAX_ASSIGNMENTS = 64


def _paired_on_some_path(trees: list, origin, test) -> bool:
    """Do all the trees run the same non-empty sequence of collectives for one value of each uniform test in them
    (the same value in every tree: every rank takes the same side)? Collectives on groups whose members all take
    the same side of `test` are left out; a group a helper is handed matches any (as in `_expand`)."""
    sides: dict = {}
    residues: set = set()
    for tree in trees:
        if not _choice_sides(tree, sides, residues):
            return False
    count = 1
    for n in sides.values():
        count *= n
    if count > MAX_ASSIGNMENTS:
        return False
    from itertools import product
    fixed = [k for k in sides if k in residues]        # a rank test's uniform residue: every value must pair
    free = [k for k in sides if k not in residues]
    for values in product(*(range(sides[k]) for k in fixed)):
        for more in product(*(range(sides[k]) for k in free)):
            chosen = {**dict(zip(fixed, values)), **dict(zip(free, more))}
            runs = [_run(tree, chosen, origin, test) for tree in trees]
            if runs[0] and all(_match(runs[0], other) for other in runs[1:]):
                break
        else:
            return False
    return True


def _choice_sides(tree: tuple, sides: dict, residues: set) -> bool:
    """The uniform tests of a tree (choice keys) with their number of sides, those a rank test leaves in
    `residues`; False when one key has choices with different numbers of sides."""
    for item in tree:
        if isinstance(item, Token) or not isinstance(item, tuple) or not item:
            continue
        if item[0] == "choice":
            key, _ = _positive(item[1], len(item[2]))
            if sides.setdefault(key, len(item[2])) != len(item[2]):
                return False
            if isinstance(item[1], Residue):
                residues.add(key)
            if not all(_choice_sides(side, sides, residues) for side in item[2]):
                return False
        elif item[0] == "loop" and not _choice_sides(item[2], sides, residues):
            return False
    return True


def _run(tree: tuple, chosen: dict, origin, test) -> tuple:
    """The flat sequence a tree runs for the chosen sides, as `_expand` writes one (compared by `_match`): (op,
    group) pairs, "*" for a handed-in group, a loop as ("loop", {body}) -- without the collectives on groups
    whose members all take the same side of `test`."""
    from dslint.program.process_groups import Group
    out: list = []
    for item in tree:
        if isinstance(item, Token):
            axes, family, ranks = item.group
            if not uniform_over(origin, Group(axes, family, ranks), test):
                out.append((item.op, "*" if family == "handed-in" else item.group))
        elif isinstance(item, tuple) and item and item[0] == "choice":
            key, flip = _positive(item[1], len(item[2]))
            side = chosen[key]
            out.extend(_run(item[2][1 - side if flip else side], chosen, origin, test))
        elif isinstance(item, tuple) and item and item[0] == "loop":
            body = _run(item[2], chosen, origin, test)
            if body:
                out.append(("loop", frozenset((body,))))
    return tuple(out)


_NEGATIONS = ((" is not ", " is "), (" != ", " == "), (" not in ", " in "))


def _positive(key: str, n: int) -> tuple[str, bool]:
    """A two-sided choice's key with its negation taken off (`not flag` is `flag` with its sides swapped, `x is
    not None` is `x is None`, one comparison only), so the two spellings of one test take one value; and
    whether the sides swap."""
    if n != 2 or not isinstance(key, str):
        return key, False
    if key.startswith("not ") and " and " not in key and " or " not in key:
        return key[4:], True
    if " and " not in key and " or " not in key:
        for negative, positive in _NEGATIONS:
            if key.count(negative) == 1:
                rest = key.replace(negative, " ")
                if not any(n in rest or p in rest for n, p in _NEGATIONS):
                    return key.replace(negative, positive), True
    return key, False


def _may_change(walk, stmts) -> bool:
    """Whether statements can make a body's tree unknown where the rest's is known: they reach a collective or
    leave (`return`/`raise`; nested functions and classes are their own scopes)."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, (cst.Return, cst.Raise)):
            return True
        if isinstance(n, cst.Call) and walk.sites.classify(walk.src, n, walk.cls) is not None:
            return True
        todo.extend(n.children)
    return False


class _TopIndex:
    """The index of the statement of `body` that holds a node (None: not found). Each statement's nodes are read
    once, in order and only as far as a lookup needs: a body with many findings (a long `elif` chain over the
    rank) is not searched again for each."""

    def __init__(self, body) -> None:
        self.body = body
        self.seen: dict[int, int] = {}
        self.done = 0

    def __call__(self, node) -> Optional[int]:
        while id(node) not in self.seen and self.done < len(self.body):
            stack = [self.body[self.done]]
            while stack:
                n = stack.pop()
                self.seen[id(n)] = self.done
                stack.extend(n.children)
            self.done += 1
        return self.seen.get(id(node))


def _exits_in_loops(body) -> set[int]:
    """ids of the statements inside the loops of a body (not of nested functions and classes)."""
    out: set[int] = set()
    todo = [(stmt, False) for stmt in body]
    while todo:
        node, inside = todo.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if inside:
            out.add(id(node))
        inside = inside or isinstance(node, (cst.For, cst.While))
        todo.extend((child, inside) for child in node.children)
    return out


def _trees_per_rank(analysis: SequenceAnalysis, scope: Scope, body, ends: Optional[list] = None) \
        -> Optional[list[tuple[int, tuple]]]:
    consts = set(scope.consts)
    for _ in range(2):
        reps = representatives(consts)
        out = []
        if ends is not None:
            ends.clear()
        for r in reps:
            tree = analysis.tree(scope, body, r, ends)
            if tree is None:
                return None
            out.append((r, _commuted(_strip_yields(tree))))
        more = set(consts) | scope.consts
        for _, tree in out:
            for token in tokens(tree):
                site_fn = analysis.sites.classify(scope.src, token.call, scope.cls)
                if site_fn is not None and site_fn.function is not None:
                    more |= analysis.function_consts(*site_fn.function)
        if more == consts:
            return out
        consts = more
    return out


def _commuted(tree: tuple) -> tuple:
    """The tree with each run of neighbouring items that can only call one collective (one op on one group:
    `barrier()`, a loop or a choice of nothing but such barriers) in one canonical order: each runs that
    collective some number of times, so their order does not change the sequence (rank 0 calling its barrier
    after a loop of barrier pairs, the others before it)."""
    out: list = []
    run: list = []
    only = None
    for item in tree:
        item = _commuted_item(item)
        one = _only_collective(item)
        if one is not None and one == only:
            run.append(item)
            continue
        out.extend(sorted(run, key=_order_key))
        run, only = ([item], one) if one is not None else ([], None)
        if one is None:
            out.append(item)
    out.extend(sorted(run, key=_order_key))
    return tuple(out)


def _commuted_item(item):
    if isinstance(item, Token) or not isinstance(item, tuple) or not item:
        return item
    if item[0] == "choice":
        return ("choice", item[1], tuple(_commuted(side) for side in item[2]))
    if item[0] == "loop":
        return ("loop", item[1], _commuted(item[2]))
    if item[0] == "seq":
        return ("seq", _commuted(item[1]))
    return item


def _only_collective(item) -> Optional[tuple]:
    """The one (op, group) an item can call, any number of times (None: none, or more than one)."""
    if isinstance(item, Token):
        return (item.op, item.group)
    if not isinstance(item, tuple) or not item or item[0] not in ("choice", "loop", "seq"):
        return None
    parts = [x for side in item[2] for x in side] if item[0] == "choice" else list(item[-1])
    ones = {_only_collective(x) for x in parts}
    return ones.pop() if len(ones) == 1 and None not in ones else None


def _order_key(item) -> str:
    return repr(flatten((item,)))


def _alike(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_alike_item(x, y) for x, y in zip(a, b))


def _alike_item(x, y) -> bool:
    """Equal, except that a group a helper is handed (`group=group` of a parameter) matches any group: the
    caller may hand it the very group the other side names."""
    if isinstance(x, Token) and isinstance(y, Token):
        return x.op == y.op and (x.group == y.group or "handed-in" in (x.group[1], y.group[1]))
    if isinstance(x, tuple) and isinstance(y, tuple) and x and y and x[0] == y[0] == "choice":
        return x[1] == y[1] and len(x[2]) == len(y[2]) and all(_alike(p, q) for p, q in zip(x[2], y[2]))
    if isinstance(x, tuple) and isinstance(y, tuple) and x and y and x[0] == y[0] == "loop":
        return _alike(x[2], y[2])
    return x == y


MAX_EXPANSIONS = 64


def _expand(seq: tuple, origin, test) -> Optional[set]:
    """Every flat sequence a tree can run, one per value of the uniform tests in it (each choice's sides taken
    alike or not: an over-approximation), as (op, group) pairs -- "*" for a group a helper is handed -- without
    the collectives on groups whose members all take the same side of `test`; None past `MAX_EXPANSIONS`."""
    from dslint.program.process_groups import Group
    out: set = {()}
    for item in seq:
        if isinstance(item, Token):
            axes, family, ranks = item.group
            if uniform_over(origin, Group(axes, family, ranks), test):
                continue
            key = (item.op, "*" if family == "handed-in" else item.group)
            out = {r + (key,) for r in out}
        elif item[0] == "choice":
            options: set = set()
            for side in item[2]:
                more = _expand(side, origin, test)
                if more is None:
                    return None
                options |= more
            out = {r + o for r in out for o in options}
        elif item[0] == "loop":
            body = _expand(item[2], origin, test)
            if body is None:
                return None
            if body != {()}:
                out = {r + (("loop", frozenset(body)),) for r in out}
        if len(out) > MAX_EXPANSIONS:
            return None
    return out


def _may_match(a: set, b: set) -> bool:
    return any(_match(x, y) for x in a for y in b)


def _match(x: tuple, y: tuple) -> bool:
    if len(x) != len(y):
        return False
    for p, q in zip(x, y):
        if p == q:
            continue
        if p[0] == "loop" or q[0] == "loop":
            if p[0] != q[0] or not any(_match(i, j) for i in p[1] for j in q[1]):
                return False
        elif p[0] != q[0] or "*" not in (p[1], q[1]):
            return False
    return True


def _report_chain(walk, analysis: SequenceAnalysis, scope: Scope, head: cst.If, hazard_cls) -> None:
    links = [head]
    while isinstance(links[-1].orelse, cst.If):
        links.append(links[-1].orelse)
    last = links[-1].orelse
    bodies = [_body(link.body) for link in links] + [_body(last.body) if isinstance(last, cst.Else) else ()]
    recs = [scope.tests.get(id(link.test)) for link in links]
    varying = [rec for rec in recs if rec is not None]
    if not varying:
        return
    decidable = all(rec is not None and rec[1] is not None for rec in recs)
    reps = representatives(scope.consts)
    takers: dict[int, int] = {}
    if decidable:
        for r in reps:
            branch = next((i for i, rec in enumerate(recs) if decide(rec[1], r)), len(links))
            if any(decide(rec[1], r) is None for rec in recs):
                return
            takers.setdefault(branch, r)
    elif all(rec is not None and rec[1] is None for rec in recs):
        takers = {i: reps[0] for i in range(len(bodies))}
    else:
        return
    sides: dict[int, tuple] = {}
    for i, r in takers.items():
        builder = SequenceBuilder(analysis, scope, r)
        try:
            items, status = builder.block(bodies[i])
        except (_Unknown, RecursionError):
            return
        if status != "next":
            return                      # an exit on one side: DSL103's part
        if _has_split(items):
            return                      # a split of the ranks inside: not compared here
        sides[i] = flatten(items)
    seqs = list(sides.values())
    if len(sides) < 2 or all(_alike(s, seqs[0]) for s in seqs):
        return
    origin = (recs[0] or varying[-1])[0]
    expanded = [_expand(s, origin, links[0].test) for s in seqs]
    if any(e is None for e in expanded) or any(
            _may_match(expanded[0], e) for e in expanded[1:]):
        return                          # the sides may agree for some value of the uniform tests inside them
    prefix = 0
    while all(len(s) > prefix for s in seqs) and all(_alike_item(s[prefix], seqs[0][prefix]) for s in seqs):
        prefix += 1
    suffix = 0
    while all(len(s) > prefix + suffix for s in seqs) and all(
            _alike_item(s[-1 - suffix], seqs[0][-1 - suffix]) for s in seqs):
        suffix += 1
    texts = [code_of(link.test, 60) for link in links]
    differing = {i: tokens(s[prefix:len(s) - suffix]) for i, s in sides.items()}
    for i, toks in differing.items():
        if not toks:
            continue
        at = min(i, len(links) - 1)
        rec = recs[at] if recs[at] is not None else varying[-1]
        if i == 0:
            words = ""
        elif i < len(links):
            words = f"`{texts[i]}` holds and {_none_of(texts[:i])}"
        else:
            words = _none_of(texts)
        others = [t for j, ts in differing.items() if j != i for t in ts]
        instead = ", ".join(dict.fromkeys(f"`{code_of(t.call.func, 40)}(...)` (line {walk.src.span(t.call).line})"
                                          for t in others)) or "no collective"
        note = (f"the ranks on the other side of this test run {instead} at this point instead: the two sides "
                f"do not call the same sequence of collectives")
        for token in {id(t.call): t for t in toks}.values():
            site = walk.sites.classify(walk.src, token.call, walk.cls)
            if site is None or uniform_over(rec[0], walk.sites.group_of(site), links[at].test):
                continue                # every member of its group takes this side (a stage test, a dp group)
            key = ("DSL101", id(token.call))
            if key in walk.found:
                continue
            guard = Guard("cond", rec[0], links[at].test, condition=words)
            walk.found[key] = hazard_cls("DSL101", token.call, site, guard, walk.scope, [note])


_names_in = name_nodes
