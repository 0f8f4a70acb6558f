"""Do an optimizer's name-filtered param groups cover every trainable parameter?

HF-style optimizers build groups as comprehensions over `model.named_parameters()` with name filters
(`n in decay_parameters and n not in projector_parameters and p.requires_grad`). The filters of all groups
are read as boolean formulas over their atoms (`n in decay_parameters`, `"bias" in n`, …; `p.requires_grad`
counts as true: only trainable parameters matter) and checked for a name that no group takes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from dslint.program.models.optimizers import is_optimizer_ctor, optimizer_params_arg
from dslint.program.hyperparams import _assignments, module_assignments
from dslint.program.facts import FunctionInfo
from dslint.sources.literals import literal_value
from dslint.sources import PythonSource

MAX_ATOMS = 8


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


@dataclass
class Group:
    condition: Optional[cst.BaseExpression]     # None: takes every parameter
    receiver: str                               # "model" of model.named_parameters()


def _group_of(expr: cst.BaseExpression) -> Optional[Group]:
    if not isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return None
    comp = expr.for_in
    if comp.inner_for_in is not None:
        return None
    it = comp.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute)
            and it.func.attr.value == "named_parameters"):
        return None
    conds = [c.test for c in comp.ifs]
    cond: Optional[cst.BaseExpression] = None
    for c in conds:
        cond = c if cond is None else cst.BooleanOperation(cond, cst.And(), c)
    return Group(cond, _code(it.func.value))


def groups_of(src: PythonSource, scope: Optional[FunctionInfo], expr: cst.BaseExpression) -> Optional[list[Group]]:
    """The groups of an optimizer's params argument, when every group is a named_parameters comprehension."""
    if isinstance(expr, cst.Name):
        values = _assignments(scope.node, expr.value) if scope is not None \
            else module_assignments(src, expr.value, annotated=False)
        if len(values) != 1:
            return None
        expr = values[0]
    if not isinstance(expr, (cst.List, cst.Tuple)) or not expr.elements:
        return None
    out = []
    for el in expr.elements:
        d = el.value
        if not isinstance(d, cst.Dict):
            return None
        params = next((e.value for e in d.elements if isinstance(e, cst.DictElement)
                       and literal_value(e.key) == "params"), None)
        group = _group_of(params) if params is not None else None
        if group is None:
            return None
        out.append(group)
    if len({g.receiver for g in out}) != 1:
        return None
    return out


class _Atoms:
    def __init__(self) -> None:
        self.atoms: list[str] = []

    def formula(self, node: cst.BaseExpression):
        """A function of an assignment (tuple of bools) → bool; None for unreadable parts."""
        if isinstance(node, cst.BooleanOperation):
            left, right = self.formula(node.left), self.formula(node.right)
            if isinstance(node.operator, cst.And):
                return lambda v: left(v) and right(v)
            return lambda v: left(v) or right(v)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            inner = self.formula(node.expression)
            return lambda v: not inner(v)
        if "requires_grad" in _code(node):
            return lambda v: True
        negate = False
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and \
                isinstance(node.comparisons[0].operator, (cst.NotIn, cst.IsNot, cst.NotEqual)):
            op = node.comparisons[0].operator
            positive = {cst.NotIn: cst.In(), cst.IsNot: cst.Is(), cst.NotEqual: cst.Equal()}[type(op)]
            node = node.with_changes(comparisons=[node.comparisons[0].with_changes(operator=positive)])
            negate = True
        key = _code(node)
        if key.startswith("not "):
            key, negate = key[4:], not negate
        if key not in self.atoms:
            self.atoms.append(key)
        i = self.atoms.index(key)
        return (lambda v: not v[i]) if negate else (lambda v: v[i])


def uncovered(groups: list[Group]) -> Optional[list[tuple[str, bool]]]:
    """An assignment of the filter atoms under which no group takes the parameter; None when covered."""
    atoms = _Atoms()
    formulas = []
    for g in groups:
        if g.condition is None:
            return None
        formulas.append(atoms.formula(g.condition))
    if len(atoms.atoms) > MAX_ATOMS:
        return None
    for values in itertools.product((False, True), repeat=len(atoms.atoms)):
        if not any(f(values) for f in formulas):
            return list(zip(atoms.atoms, values))
    return None


def may_construct_optimizer(src: PythonSource) -> bool:
    """Can the file construct an optimizer? Decided on the outline's resolved callees (as `is_optimizer_ctor`
    resolves them), so that a file without one is not parsed for it."""
    from dslint.program.models.optimizers import OPTIMIZER_CLASSES, OPTIMIZER_MODULES
    outline = src.outline
    if outline is None:
        return True
    return any(callee and (callee.rsplit(".", 1)[-1] in OPTIMIZER_CLASSES or callee.startswith(OPTIMIZER_MODULES))
               for callee, _ in outline.calls)


def optimizer_constructions(src: PythonSource):
    """(call, scope) of every optimizer construction in a file."""
    if not may_construct_optimizer(src):
        return
    for call in src.facts.calls:
        if is_optimizer_ctor(src, call.node):
            arg = optimizer_params_arg(call.node)
            if arg is not None:
                yield call, src.facts.functions.get(call.scope), arg
