"""How a script builds its optimizer, as far as it can be read without running it.

`classify_optimizer` follows the `optimizer=` argument of `deepspeed.initialize` to the construction
(`AdamW(model.parameters())`, `torch.optim.AdamW(groups)`, `create_optimizer(model)` in a checked file) and
says whether its param groups are MoE-aware (built through `split_params_into_different_moe_groups_for_optimizer`
or dicts carrying a `"moe"` key), plain (`model.parameters()`, `filter(...)`, comprehensions over
`named_parameters()`, dict groups without `"moe"`), absent, or unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.models.moe import MOE_GROUP_HELPERS
from dslint.program.hyperparams import _assignments, module_assignments
from dslint.sources.cstwalk import visit as cst_visit
from dslint.program.facts import FunctionInfo, dotted_name
from dslint.sources.literals import literal_value
from dslint.sources import PythonSource

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView

OPTIMIZER_CLASSES = {"Adam", "AdamW", "SGD", "Adagrad", "RMSprop", "Lion", "Adafactor", "FusedAdam", "DeepSpeedCPUAdam",
                     "FusedLamb", "Lamb", "LAMB", "AdamW8bit", "PagedAdamW", "PagedAdamW8bit", "Adam8bit",
                     "OneBitAdam", "ZeroOneAdam", "OnebitLamb", "Adamax", "NAdam", "RAdam", "Adadelta",
                     "DeepSpeedCPUAdagrad", "FusedLion", "DeepSpeedCPULion", "Muon", "MuSGD", "AdEMAMix", "SophiaG"}
MOE, PLAIN, NONE, UNKNOWN = "moe", "plain", "none", "unknown"


class _Markers(cst.CSTVisitor):
    def __init__(self) -> None:
        self.moe = False
        self.calls: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func) or ""
        if name.rsplit(".", 1)[-1] in MOE_GROUP_HELPERS:
            self.moe = True
        self.calls.append(name)
        if name == "dict" and any(a.keyword is not None and a.keyword.value == "moe" for a in node.args):
            self.moe = True

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if literal_value(node.key) == "moe":
            self.moe = True

    def visit_Subscript(self, node: cst.Subscript) -> None:     # group["moe"] = True
        for el in node.slice:
            if isinstance(el.slice, cst.Index) and literal_value(el.slice.value) == "moe":
                self.moe = True


def _function_marks_moe(project: "ProjectView", src: PythonSource, name: str, depth: int) -> Optional[bool]:
    hit = project.find_function(src.facts.resolve(name), near=src)
    if hit is None:
        return None
    fsrc, info = hit
    markers = _Markers()
    cst_visit(info.node, markers)
    if markers.moe:
        return True
    if depth < 2:
        for callee in markers.calls:
            if _function_marks_moe(project, fsrc, callee, depth + 1):
                return True
    return False


def _mentions_parameters(node: cst.CSTNode) -> bool:
    text = cst.Module([]).code_for_node(node)
    return ".parameters(" in text or ".named_parameters(" in text or "params" in text


def classify_params(project: "ProjectView", src: PythonSource, scope: Optional[FunctionInfo],
                    expr: Optional[cst.BaseExpression], depth: int = 0) -> str:
    if expr is None or depth > 4:
        return UNKNOWN
    markers = _Markers()
    cst_visit(expr, markers)
    if markers.moe:
        return MOE
    if isinstance(expr, cst.Name):
        body = scope.node if scope is not None else src.module
        values = _assignments(body, expr.value) if scope is not None \
            else module_assignments(src, expr.value, annotated=False)
        # appended groups: `groups.append({...})` / `groups += [...]`
        if scope is not None and _appends_moe(scope.node, expr.value):
            return MOE
        kinds = {classify_params(project, src, scope, v, depth + 1) for v in values}
        if kinds == {PLAIN}:
            return PLAIN
        return MOE if MOE in kinds else UNKNOWN
    for callee in markers.calls:
        marked = _function_marks_moe(project, src, callee, 0)
        if marked:
            return MOE
    if isinstance(expr, cst.Call):
        name = dotted_name(expr.func) or ""
        last = name.rsplit(".", 1)[-1]
        if last in ("parameters", "named_parameters"):
            return PLAIN
        if last in ("filter", "list", "tuple", "chain") and expr.args:
            kinds = {classify_params(project, src, scope, a.value, depth + 1) for a in expr.args[-1:]}
            return kinds.pop() if len(kinds) == 1 else UNKNOWN
        if _function_marks_moe(project, src, name, 0) is False:
            hit = project.find_function(src.facts.resolve(name), near=src)
            return PLAIN if hit is not None and _mentions_parameters(hit[1].node) else UNKNOWN
        return UNKNOWN
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return PLAIN if _mentions_parameters(expr) else UNKNOWN
    if isinstance(expr, (cst.List, cst.Tuple)):
        kinds = set()
        for el in expr.elements:
            v = el.value
            if isinstance(v, cst.Dict):
                params = next((e.value for e in v.elements if isinstance(e, cst.DictElement)
                               and literal_value(e.key) == "params"), None)
                kinds.add(classify_params(project, src, scope, params, depth + 1) if params is not None else UNKNOWN)
            else:
                kinds.add(classify_params(project, src, scope, v, depth + 1))
        return PLAIN if kinds == {PLAIN} else UNKNOWN
    return UNKNOWN




def _appends_moe(fn: cst.FunctionDef, name: str) -> bool:
    found = False

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            f = node.func
            if isinstance(f, cst.Attribute) and f.attr.value in ("append", "extend") and \
                    isinstance(f.value, cst.Name) and f.value.value == name:
                m = _Markers()
                cst_visit(node, m)
                found = found or m.moe

    cst_visit(fn, V())
    return found


OPTIMIZER_MODULES = ("torch.optim.", "bitsandbytes.optim.", "deepspeed.ops.")


def is_optimizer_ctor(src: PythonSource, call: cst.Call) -> bool:
    name = src.facts.resolve_expr(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    return last in OPTIMIZER_CLASSES or name.startswith(OPTIMIZER_MODULES)


def optimizer_params_arg(call: cst.Call) -> Optional[cst.BaseExpression]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "params":
            return a.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[0].value if positional else None


def classify_optimizer(project: "ProjectView", src: PythonSource, scope: Optional[FunctionInfo],
                       expr: Optional[cst.BaseExpression], depth: int = 0
                       ) -> tuple[str, Optional[cst.CSTNode], Optional[PythonSource]]:
    """(kind, construction node, its source) for an `optimizer=` argument."""
    if expr is None:
        return NONE, None, None
    if isinstance(expr, cst.Name) and expr.value == "None":
        return NONE, None, None
    if depth > 3:
        return UNKNOWN, None, None
    if isinstance(expr, cst.Name):
        body = scope.node if scope is not None else None
        values = _assignments(body, expr.value) if body is not None \
            else module_assignments(src, expr.value, annotated=False)
        results = [classify_optimizer(project, src, scope, v, depth + 1) for v in values]
        kinds = {r[0] for r in results}
        if len(kinds) == 1 and results:
            return results[-1]
        return (MOE, None, None) if MOE in kinds else (UNKNOWN, None, None)
    if isinstance(expr, cst.Call):
        if is_optimizer_ctor(src, expr):
            return classify_params(project, src, scope, optimizer_params_arg(expr)), expr, src
        hit = project.find_function(src.facts.resolve_expr(expr.func), near=src)
        if hit is not None:
            fsrc, info = hit
            markers = _Markers()
            cst_visit(info.node, markers)
            if markers.moe:
                return MOE, None, None
            ctors: list[cst.Call] = []

            class Ctors(cst.CSTVisitor):
                def visit_Call(self, node: cst.Call) -> None:
                    if is_optimizer_ctor(fsrc, node):
                        ctors.append(node)

            cst_visit(info.node, Ctors())
            kinds = {classify_params(project, fsrc, info, optimizer_params_arg(c)) for c in ctors}
            if kinds == {PLAIN}:
                return PLAIN, ctors[-1], fsrc
            return (MOE if MOE in kinds else UNKNOWN), None, None
    return UNKNOWN, None, None


def trainer_optimizer_has_moe_groups(project: "ProjectView", trainer_name: str) -> Optional[bool]:
    """True: the Trainer subclass overrides create_optimizer with MoE groups; False: overrides it without;
    None: a stock Trainer (HF builds plain groups) or nothing to read."""
    for src in project.mentioning(trainer_name):
        for info in src.facts.classes.values():
            if info.name == trainer_name:
                method = info.methods.get("create_optimizer")
                if method is None:
                    return False
                markers = _Markers()
                cst_visit(method.node, markers)
                return True if markers.moe else False
    return False if trainer_name.endswith("Trainer") else None
