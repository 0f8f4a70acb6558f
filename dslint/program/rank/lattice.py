"""The rank-uniformity lattice: what every rule asks about a value -- is it the same on every rank?

    Uniform                the same on every rank (a constant, a config/argparse/environment value that is no rank
                           id, the result of a collective -- all_reduce, all_gather*, broadcast*, accelerate's
                           gather/reduce --, what a broadcast's receive buffer holds afterwards, an attribute set
                           only from uniform values, a tensor's dtype/ndim/device type whatever its content)
    Varying(origin)        differs from rank to rank for a known reason: `origin.kind` is "rank" (a rank id or a
                           rank-0 test), "shard" (this rank's share of the data: its length varies), "item" (this
                           rank's item or batch: its content varies; `origin.batch`: the structure -- keys,
                           None-ness, row count -- is the collator's, uniform), "generation" (a sampled output)
    Unknown(origin)        computed from a rank-varying value by code outside the checked files (origin.kind
                           "derived": `make_dataset(local_rank)`): it may or may not vary. Rules treat it as varying
                           in a test (DSL101/103) but not as changing a loop's trip count (DSL102).

The join (a value computed from several) is the most varying of its parts (`Varying` > `Unknown` > `Uniform`;
two varying parts keep the first part's report with the union of the grid axes, `values.join`). The expression
evaluator is `dslint.program.rank.values.RankTaint` (None = uniform, an Origin otherwise); this module is the one
interface the rules and the other analyses (DSL303's forward paths) read it through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

import libcst as cst

from dslint.program.rank.values import Env, Origin

if TYPE_CHECKING:
    from dslint.program.project import ProjectView
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

    The environment is, unless `env` is given, every name the scope ever binds to a rank-varying value
    (flow-insensitive over the body: `ProjectTaint.scope_env`), the parameters its callers in the checked files
    pass rank-varying values (and the batch parameter of an HF Trainer hook), the module's globals and the
    `self.` attributes of the class family. `env` (name or dotted name → Origin) replaces it: an analysis that
    walks a body itself passes its own state (seed forward's arguments with `batch_origin`)."""
    from dslint.program.facts import MODULE_SCOPE
    from dslint.program.rank.taint import ProjectTaint
    analysis = ProjectTaint.of(project)
    taint = analysis.taint(src)
    scope = scope or MODULE_SCOPE
    info = src.facts.functions.get(scope) if scope != MODULE_SCOPE else None
    cls = info.class_name if info is not None else None
    if env is None:
        env = analysis.scope_env(src, scope) if info is not None else analysis.module_env(src)
    return classify(taint.eval(expr, env, cls))


def batch_origin(node: cst.CSTNode, src: "PythonSource", via: str) -> Origin:
    """The Origin of a rank's batch (a forward argument, a collated batch's field): its values vary, its
    structure -- keys, a field's None-ness, types, row count -- is the collator's (kind "item", `batch`)."""
    return Origin("item", node, src, via=via, batch=True)
