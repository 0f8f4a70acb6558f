"""The rank-uniformity lattice: what every rule asks about a value -- is it the same on every rank?

    Uniform                the same on every rank (a constant, a config/argparse/environment value that is no rank
                           id, the result of a collective -- all_reduce, all_gather*, broadcast*, accelerate's
                           gather/reduce --, what a broadcast's receive buffer holds afterwards, an attribute set
                           only from uniform values -- per field on an object of a checked class built with
                           rank-varying arguments, `Origin.fields` --, a tensor's dtype/ndim/device type whatever
                           its content)
    Varying(origin)        differs from rank to rank for a known reason: `origin.kind` is "rank" (a rank id or a
                           rank-0 test), "shard" (this rank's share of the data: its length varies), "item" (this
                           rank's item or batch: its content varies; `origin.batch`: the structure -- keys,
                           None-ness, row count -- is the collator's, uniform), "generation" (a sampled output)
    Unknown(origin)        computed from a rank-varying value by code outside the checked files (origin.kind
                           "derived": `make_dataset(local_rank)`): it may or may not vary. Rules treat it as varying
                           in a test (DSL101/103) but not as changing a loop's trip count (DSL102).

The join (a value computed from several) is the most varying of its parts (`Varying` > `Unknown` > `Uniform`;
two varying parts keep the first part's report with the union of the grid axes, `values.join`). The expression
evaluator is `dslint.program.rank.value_uniformity.RankTaint` (None = uniform, an Origin otherwise); this module is the one
interface the rules and the other analyses (DSL303's forward paths) read it through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

import libcst as cst

from dslint.program.rank.value_uniformity import Env, Origin

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource


@dataclass(frozen=True)
class Uniform:
    """The same on every rank."""

    def __bool__(self) -> bool:        # `if uniformity(...)`: "does it vary (or may it)?"
        return False


@dataclass(frozen=True, eq=False)
class Varying:
    """Differs across ranks; `origin` says why (its kind, the source expression, the grid axes)."""

    origin: Origin

    @property
    def data(self) -> bool:
        """Per-rank data (a shard, an item or batch, a generation) rather than a rank id."""
        return self.origin.kind in ("shard", "item", "generation")


@dataclass(frozen=True, eq=False)
class Unknown:
    """Computed from a rank-varying value by code dslint cannot see: may vary."""

    origin: Origin


UNIFORM = Uniform()
Uniformity = Union[Uniform, Varying, Unknown]


def classify(origin: Optional[Origin]) -> Uniformity:
    """The lattice element of what `RankTaint.eval` returned."""
    if origin is None:
        return UNIFORM
    if origin.kind == "derived":
        return Unknown(origin)
    return Varying(origin)


def join(a: Uniformity, b: Uniformity) -> Uniformity:
    """The value computed from both: the most varying of the two (Varying > Unknown > Uniform)."""
    rank = {Uniform: 0, Unknown: 1, Varying: 2}
    return a if rank[type(a)] >= rank[type(b)] else b


def uniformity(project: "ProjectView", src: "PythonSource", expr: cst.BaseExpression, scope: Optional[str] = None,
               env: Optional[Env] = None) -> Uniformity:
    """Is `expr` (a libcst expression of `src`) the same on every rank, when evaluated in `scope` (a function's
    qualified name in `src`; None or "<module>": module level)?

    The environment is, unless `env` is given, the one where `expr` is evaluated (`_env_at`: flow-sensitive in
    statement order, loops joined), seeded with the parameters its callers in the checked files pass
    rank-varying values (and the batch parameter of an HF Trainer hook) and the module's globals; `self.x`
    reads the attributes of the class family. `env` (name or dotted name → Origin) replaces it: an analysis
    that walks a body itself passes its own state (seed forward's arguments with `batch_origin`)."""
    from dslint.program.facts import MODULE_SCOPE
    from dslint.program.rank.function_summaries import ProjectTaint
    analysis = ProjectTaint.of(project)
    taint = analysis.taint(src)
    scope = scope or MODULE_SCOPE
    info = src.facts.functions.get(scope) if scope != MODULE_SCOPE else None
    cls = info.class_name if info is not None else None
    if env is None:
        env = _env_at(analysis, src, scope, info, expr) if info is not None else analysis.module_env(src)
    return classify(taint.eval(expr, env, cls))


def _env_at(analysis, src: "PythonSource", scope: str, info, expr: cst.BaseExpression) -> Env:
    """The names rank-varying where `expr` is evaluated in the function: flow-sensitive in statement order
    (`flag` after `dist.all_reduce(flag)` is uniform again) outside loops; inside a loop, every name the body
    ever binds as well (a later statement runs before the next pass). Every name the scope ever binds when `expr`
    is not found in its body."""
    memo = analysis.__dict__.setdefault("_lattice_walks", {})
    key = (id(src), scope)
    if key not in memo:
        walk = _statement_walk_class()(analysis.taint(src), scope=scope,
                              env={**analysis.globals_for(src, info), **analysis.param_taint(src, info)}, cls=info.class_name)
        walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ())
        memo[key] = walk
    walk = memo[key]
    stmt = _innermost_statement(info.node.body, expr)
    snap = walk.before.get(id(stmt)) if stmt is not None else None
    if snap is None:
        return walk.ever_bound
    env, in_loop = snap
    return {**walk.ever_bound, **env} if in_loop else env


def _statement_walk_class():
    from dslint.program.rank.reaching_ranks import FlowWalk

    class StatementWalk(FlowWalk):
        """The base walk, keeping the environment before each statement (and whether it sits in a loop)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.before: dict[int, tuple[Env, bool]] = {}

        def stmt(self, node, guards):
            self.before.setdefault(id(node), (dict(self.env), bool(self.loop_depth)))
            return super().stmt(node, guards)

        def small(self, node, guards):
            self.before.setdefault(id(node), (dict(self.env), bool(self.loop_depth)))
            return super().small(node, guards)

    return StatementWalk


def _innermost_statement(body: cst.CSTNode, expr: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The innermost statement (small statements included) of `body` whose subtree holds `expr`."""
    found: list = []

    class _Find(cst.CSTVisitor):
        def __init__(self) -> None:
            self.stack: list = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if found:
                return False
            if node is expr:
                found.append(next((n for n in reversed(self.stack)), None))
                return False
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine)):
                self.stack.append(node)
            return True

        def on_leave(self, node: cst.CSTNode) -> None:
            if self.stack and self.stack[-1] is node:
                self.stack.pop()

    body.visit(_Find())
    return found[0] if found else None


def batch_origin(node: cst.CSTNode, src: "PythonSource", via: str) -> Origin:
    """The Origin of a rank's batch (a forward argument, a collated batch's field): its values vary, its
    structure -- keys, a field's None-ness, types, row count -- is the collator's (kind "item", `batch`)."""
    return Origin("item", node, src, via=via, batch=True)
