"""Do an optimizer's name-filtered param groups cover every trainable parameter?

HF-style optimizers build groups as comprehensions over `model.named_parameters()` with name filters
(`n in decay_parameters and n not in projector_parameters and p.requires_grad`), written in the group dict or
through variables (`decay = [p for n, p in model.named_parameters() if ...]; groups = [{"params": decay}, ...]`).
The filters of all groups are read as boolean formulas over their atoms (`n in decay_parameters`, `"bias" in n`,
…; `p.requires_grad` counts as true: only trainable parameters matter) and checked for a name that no group
takes. Where the model's class is one of the run's, its parameters' names (`head.weight`, from the attributes
its classes create and the parameters of the `torch.nn` layers) are evaluated against the atoms that can be
read (`"s" in n`, `n.endswith(...)`, `any(nd in n for nd in NO_DECAY)`, `p.ndim < 2`) to name the
parameters no group takes.
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
    name_var: str = ""                          # the comprehension's variables: `for n, p in ...`
    param_var: str = ""


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
    n_var = p_var = ""
    if isinstance(comp.target, cst.Tuple) and len(comp.target.elements) == 2:
        first, second = (e.value for e in comp.target.elements)
        n_var = first.value if isinstance(first, cst.Name) else ""
        p_var = second.value if isinstance(second, cst.Name) else ""
    if cond is not None and n_var and p_var:
        # one spelling for every group (`for n, p` here, `for name, param` there): the atoms are compared as text
        cond = cond.visit(_Rename({n_var: NAME_VAR, p_var: PARAM_VAR}))
    return Group(cond, _code(it.func.value), n_var, p_var)


NAME_VAR, PARAM_VAR = "n", "p"


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.names.get(original.value)
        return updated.with_changes(value=new) if new is not None else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)       # `x.n` keeps its attribute name


def _single_value(src: PythonSource, scope: Optional[FunctionInfo], name: str) -> Optional[cst.BaseExpression]:
    """The one value assigned to `name` in the scope (the module's when no function), None otherwise."""
    values = _assignments(scope.node, name) if scope is not None \
        else module_assignments(src, name, annotated=False)
    return values[0] if len(values) == 1 else None


def groups_of(src: PythonSource, scope: Optional[FunctionInfo], expr: cst.BaseExpression) -> Optional[list[Group]]:
    """The groups of an optimizer's params argument, when every group is a named_parameters comprehension."""
    if isinstance(expr, cst.Name):
        expr = _single_value(src, scope, expr.value)
        if expr is None:
            return None
    if not isinstance(expr, (cst.List, cst.Tuple)) or not expr.elements:
        return None
    out = []
    for el in expr.elements:
        d = el.value
        if not isinstance(d, cst.Dict):
            return None
        params = next((e.value for e in d.elements if isinstance(e, cst.DictElement)
                       and literal_value(e.key) == "params"), None)
        if isinstance(params, cst.Name):         # {"params": decay} with `decay = [p for n, p in ...]`
            params = _single_value(src, scope, params.value)
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
        self.nodes: list[cst.BaseExpression] = []       # each atom's positive form

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
        node, negate = _integer_bound(node)
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
            self.nodes.append(node)
        i = self.atoms.index(key)
        return (lambda v: not v[i]) if negate else (lambda v: v[i])


def _integer_bound(node: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """`x <= k`, `x > k`, `x >= k` against an integer as `x < k'` or its negation, so that complementary
    bounds (`p.ndim >= 2` / `p.ndim < 2`, `p.ndim > 1`) are one atom."""
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1):
        return node, False
    comp = node.comparisons[0]
    bound = literal_value(comp.comparator)
    if not isinstance(bound, int) or isinstance(bound, bool):
        return node, False
    shifted = {cst.LessThan: (bound, False), cst.LessThanEqual: (bound + 1, False),
               cst.GreaterThanEqual: (bound, True), cst.GreaterThan: (bound + 1, True)}.get(type(comp.operator))
    if shifted is None:
        return node, False
    k, negate = shifted
    return node.with_changes(comparisons=[comp.with_changes(operator=cst.LessThan(), comparator=cst.Integer(str(k)))]
                             ), negate


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


def uncovered_name_tests(groups: list[Group]) -> Optional[int]:
    """Of the atom assignments no group takes, the fewest atoms reading the parameter's name that must hold at
    once (`"projector" in n`: 1; `any(h in n for h in heads) and any(k in n for k in clip_keys)`: 2); None when
    covered. Each filter written on a name attests that some parameter passes its test, not that one passes two
    tests of different groups at once: with two or more, whether the uncovered combination holds any parameter
    is undecided unless the model's parameter names are known (uncovered-filter-combination-empty)."""
    atoms = _Atoms()
    formulas = []
    for g in groups:
        if g.condition is None:
            return None
        formulas.append(atoms.formula(g.condition))
    if len(atoms.atoms) > MAX_ATOMS:
        return None
    on_name = [any(isinstance(n, cst.Name) and n.value == NAME_VAR for n in _names_in(node)) for node in atoms.nodes]
    best: Optional[int] = None
    for values in itertools.product((False, True), repeat=len(atoms.atoms)):
        if not any(f(values) for f in formulas):
            count = sum(1 for v, named in zip(values, on_name) if v and named)
            best = count if best is None else min(best, count)
    return best


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)
    node.visit(Names())
    return out


def may_construct_optimizer(src: PythonSource) -> bool:
    """Can the file construct an optimizer? Decided on the outline's resolved callees (as `is_optimizer_ctor`
    resolves them), so that a file without one is not parsed for it."""
    from dslint.program.models.optimizers import OPTIMIZER_CLASSES, OPTIMIZER_MODULES
    outline = src.outline
    if outline is None:
        return True
    found = outline.__dict__.get("_constructs_optimizer")     # a fact of the text: asked by every unit's view
    if found is None:
        found = outline.__dict__["_constructs_optimizer"] = any(
            callee and (callee.rsplit(".", 1)[-1] in OPTIMIZER_CLASSES or callee.startswith(OPTIMIZER_MODULES))
            for callee, _ in outline.calls)
    return found


def _may_hand_parameters(src: PythonSource) -> bool:
    from dslint.program.models.moe import may_hold_engine_calls
    return may_construct_optimizer(src) or may_hold_engine_calls(src)


def optimizer_constructions(src: PythonSource):
    """(call, scope) of every optimizer construction in a file."""
    if not may_construct_optimizer(src):
        return
    for call in src.facts.calls:
        if is_optimizer_ctor(src, call.node):
            arg = optimizer_params_arg(call.node)
            if arg is not None:
                yield call, src.facts.functions.get(call.scope), arg


# --- naming the parameters no group takes ----------------------------------------------------------------

# the parameters torch.nn layers create (torch's API): name, number of dimensions
_LAYER_PARAMS = {
    "Linear": (("weight", 2), ("bias", 1)), "Bilinear": (("weight", 3), ("bias", 1)),
    "Conv1d": (("weight", 3), ("bias", 1)), "Conv2d": (("weight", 4), ("bias", 1)),
    "Conv3d": (("weight", 5), ("bias", 1)), "ConvTranspose1d": (("weight", 3), ("bias", 1)),
    "ConvTranspose2d": (("weight", 4), ("bias", 1)), "LayerNorm": (("weight", 1), ("bias", 1)),
    "RMSNorm": (("weight", 1),), "GroupNorm": (("weight", 1), ("bias", 1)),
    "BatchNorm1d": (("weight", 1), ("bias", 1)), "BatchNorm2d": (("weight", 1), ("bias", 1)),
    "BatchNorm3d": (("weight", 1), ("bias", 1)), "Embedding": (("weight", 2),),
}


@dataclass(frozen=True)
class ParamName:
    name: str                   # "head.weight"; a prefix "vision." when what lies below is not known
    ndim: Optional[int]
    complete: bool


def parameter_names(facts, cls, prefix: str = "", depth: int = 0, seen: frozenset = frozenset(),
                    attrs: Optional[dict] = None) -> list[ParamName]:
    """The trainable parameters of `cls` (a `ModuleClass`) by name, as far as the run's classes tell:
    `nn.Parameter` attributes, the parameters of `torch.nn` layers, the attributes of the run's own classes
    below; a prefix for any other sub-module. `attrs`, when given, gets the `ModuleAttr` behind each
    attribute's name ("vision.proj")."""
    out: list[ParamName] = []
    done: set[str] = set()
    for c in cls.mro():
        for attr in c.attrs.values():
            if attr.name in done:
                continue
            done.add(attr.name)
            if not facts.trainable(attr):
                continue
            name = prefix + attr.name
            if attrs is not None:
                attrs[name] = attr
            if attr.kind == "parameter":
                out.append(ParamName(name, None, True))
                continue
            owners = facts.by_name.get(attr.ctor, [])
            if owners and depth < 4 and attr.ctor not in seen:
                inner = owners[0]
                out.extend(parameter_names(facts, inner, name + ".", depth + 1, seen | {attr.ctor}, attrs))
                if any(k.external_bases for k in inner.mro()):
                    out.append(ParamName(name + ".", None, False))
            elif attr.ctor in _LAYER_PARAMS:
                no_bias = "bias=False" in "".join(_code(attr.statement).split())
                out.extend(ParamName(f"{name}.{p}", nd, True) for p, nd in _LAYER_PARAMS[attr.ctor]
                           if not (p == "bias" and no_bias))
            else:
                out.append(ParamName(name + ".", None, False))
    return out


def model_class_of(facts, src: PythonSource, scope: Optional[FunctionInfo], receiver: str):
    """The run's class of the model `receiver` names (`model = MyModel(...)` / `MyModel.from_pretrained(...)`
    in the scope), None when not known."""
    if not receiver.isidentifier():
        return None
    value = _single_value(src, scope, receiver)
    if not isinstance(value, cst.Call):
        return None
    callee = src.facts.resolve_expr(value.func) or ""
    parts = callee.split(".")
    if parts and parts[-1] == "from_pretrained":
        parts = parts[:-1]
    hits = facts.by_name.get(parts[-1], []) if parts else []
    return hits[0] if len(hits) == 1 else None


def _strings(node: Optional[cst.BaseExpression], consts) -> Optional[list[str]]:
    if isinstance(node, cst.Name):
        node = consts(node.value)
    value = literal_value(node) if node is not None else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _contains(strings: list[str], pn: ParamName) -> Optional[bool]:
    if any(x in pn.name for x in strings):
        return True
    return False if pn.complete else None


def _eval_atom(node: cst.BaseExpression, pn: ParamName, consts) -> Optional[bool]:
    """An atom's truth for the parameter `pn`; None when it cannot be read."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        op, right, left = node.comparisons[0].operator, node.comparisons[0].comparator, node.left
        if isinstance(op, cst.In) and isinstance(right, cst.Name) and right.value == NAME_VAR:
            strings = _strings(left, consts)
            return _contains(strings, pn) if strings else None
        if isinstance(op, (cst.In, cst.Equal)) and isinstance(left, cst.Name) and left.value == NAME_VAR:
            strings = _strings(right, consts)
            if not strings:
                return None
            if pn.complete:
                return pn.name in strings
            return None if any(x.startswith(pn.name) for x in strings) else False
        ndim = _ndim_of(left)
        value = literal_value(right)
        if ndim and pn.ndim is not None and isinstance(value, int):
            ops = {cst.LessThan: lambda a, b: a < b, cst.LessThanEqual: lambda a, b: a <= b,
                   cst.GreaterThan: lambda a, b: a > b, cst.GreaterThanEqual: lambda a, b: a >= b,
                   cst.Equal: lambda a, b: a == b}
            fn = ops.get(type(op))
            return fn(pn.ndim, value) if fn is not None else None
        return None
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == NAME_VAR \
                and func.attr.value in ("startswith", "endswith") and node.args:
            strings = _strings(node.args[0].value, consts)
            if not strings:
                return None
            if func.attr.value == "startswith":
                if any(pn.name.startswith(x) for x in strings):
                    return True
                return False if pn.complete or not any(x.startswith(pn.name) for x in strings) else None
            return any(pn.name.endswith(x) for x in strings) if pn.complete else None
        if isinstance(func, cst.Name) and func.value == "any" and len(node.args) == 1 and \
                isinstance(node.args[0].value, cst.GeneratorExp):
            gen = node.args[0].value
            elt, comp = gen.elt, gen.for_in
            if comp.inner_for_in is None and not comp.ifs and isinstance(comp.target, cst.Name) and \
                    isinstance(elt, cst.Comparison) and len(elt.comparisons) == 1 and \
                    isinstance(elt.comparisons[0].operator, cst.In) and isinstance(elt.left, cst.Name) and \
                    elt.left.value == comp.target.value and isinstance(elt.comparisons[0].comparator, cst.Name) \
                    and elt.comparisons[0].comparator.value == NAME_VAR:
                strings = _strings(comp.iter, consts)
                return _contains(strings, pn) if strings else None
    return None


def _ndim_of(node: cst.BaseExpression) -> bool:
    """`p.ndim`, `p.dim()`, `len(p.shape)`."""
    code = _code(node)
    return code in (f"{PARAM_VAR}.ndim", f"{PARAM_VAR}.dim()", f"len({PARAM_VAR}.shape)", f"{PARAM_VAR}.ndimension()")


def uncovered_names(groups: list[Group], names: list[ParamName], consts) -> list[str]:
    """The parameters of `names` that every group's filter rejects whatever the unreadable atoms are."""
    atoms = _Atoms()
    formulas = []
    for g in groups:
        if g.condition is None:
            return []
        formulas.append(atoms.formula(g.condition))
    if len(atoms.atoms) > MAX_ATOMS:
        return []
    out = []
    for pn in names:
        known = [_eval_atom(node, pn, consts) for node in atoms.nodes]
        free = [i for i, v in enumerate(known) if v is None]
        taken = False
        for values in itertools.product((False, True), repeat=len(free)):
            v = list(known)
            for i, x in zip(free, values):
                v[i] = x
            if any(f(tuple(v)) for f in formulas):
                taken = True
                break
        if not taken:
            out.append(pn.name)
    return out


def uncovered_parameter_names(facts, src: PythonSource, scope: Optional[FunctionInfo], groups: list[Group]
                              ) -> list[str]:
    """The named parameters of the groups' model that no group takes ([] when the model's class or the
    filters cannot be read)."""
    cls = model_class_of(facts, src, scope, groups[0].receiver)
    if cls is None:
        return []
    names = parameter_names(facts, cls)
    if not names:
        return []

    def consts(name: str):
        value = _single_value(src, scope, name)
        if value is None and scope is not None:
            values = module_assignments(src, name, annotated=False)
            value = values[0] if len(values) == 1 else None
        return value

    return uncovered_names(groups, names, consts)


def _taken_groups(src: PythonSource, scope: Optional[FunctionInfo], expr: cst.BaseExpression
                  ) -> Optional[list[Group]]:
    """The groups an optimizer's params argument takes, for `optimizer_excluded`: dict groups (`groups_of`),
    one comprehension over `named_parameters()`, or `model.part.parameters()` (read as the group of names
    starting with `part.`); None when not readable."""
    if isinstance(expr, cst.Name):
        value = _single_value(src, scope, expr.value)
        if value is None:
            return None
        if not isinstance(value, (cst.List, cst.Tuple)):
            expr = value
    group = _group_of(expr)
    if group is not None:
        return [group]
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "parameters" \
            and isinstance(expr.func.value, cst.Attribute) and not expr.args:
        segments = _code(expr.func.value).split(".")
        root, part = segments[0], ".".join(segments[1:])
        cond = cst.parse_expression(f"{NAME_VAR}.startswith({part + '.'!r})")
        return [Group(cond, root, NAME_VAR, PARAM_VAR)]
    return groups_of(src, scope, expr)


def optimizer_excluded(facts, project) -> frozenset:
    """ids of the run's `ModuleAttr`s whose every parameter each optimizer of the run leaves out (filtered out
    by name, or `AdamW(model.head.parameters())` leaving the rest): DeepSpeed reduces and steps only the
    parameters of its optimizer's groups, so these are as good as frozen for it. Empty when an optimizer's
    groups or model cannot be read."""
    from dslint.program.models.moe import engine_calls
    sites = []
    # the files that may construct an optimizer or build an engine (`engine_calls`' own prefilter): the others
    # add nothing
    for src in project.files_where("optimizer_or_engine", _may_hand_parameters):
        for call, scope, arg in optimizer_constructions(src):
            sites.append((src, scope, arg))
        for ec in engine_calls(project, src):
            params = ec.argument("model_parameters") if ec.kind == "initialize" else None
            if params is not None and ec.argument("optimizer") is None:
                sites.append((src, src.facts.functions.get(ec.call.scope), params))
    if not sites:
        return frozenset()
    excluded: Optional[set] = None
    for src, scope, arg in sites:
        groups = _taken_groups(src, scope, arg)
        if not groups or len({g.receiver for g in groups}) != 1:
            return frozenset()
        cls = model_class_of(facts, src, scope, groups[0].receiver)
        if cls is None:
            return frozenset()
        attrs: dict = {}
        names = parameter_names(facts, cls, attrs=attrs)

        def consts(name: str, src=src, scope=scope):
            return _single_value(src, scope, name)

        left_out = set(uncovered_names(groups, names, consts))
        here = set()
        for prefix, attr in attrs.items():
            below = [n.name for n in names if n.name == prefix or n.name.startswith(prefix + ".")]
            if below and all(n in left_out for n in below):
                here.add(id(attr))
        excluded = here if excluded is None else excluded & here
    return frozenset(excluded or ())


# torch.nn modules that create no parameter (torch's API): a `Sequential` of these and known layers names them all
_PARAMETER_FREE = frozenset({"ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "Identity",
                             "Flatten", "LeakyReLU", "ELU", "Mish", "Hardswish", "MaxPool1d", "MaxPool2d", "AvgPool1d",
                             "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d"})


def built_parameter_names(facts, src: PythonSource, value: Optional[cst.BaseExpression], depth: int = 0
                          ) -> Optional[list[ParamName]]:
    """The parameter names of the module the expression `value` builds: a `torch.nn` layer (`nn.Linear(4, 4)`:
    `weight`, `bias`), an `nn.Sequential` of layers and parameter-free modules (`0.weight`, ...), or a class of
    the run (`parameter_names`). None when not known."""
    if not isinstance(value, cst.Call) or depth > 3:
        return None
    callee = src.facts.resolve_expr(value.func) or ""
    module, _, last = callee.rpartition(".")
    if module == "torch.nn":
        if last in _LAYER_PARAMS:
            no_bias = any(a.keyword is not None and a.keyword.value == "bias" and literal_value(a.value) is False
                          for a in value.args)
            return [ParamName(p, nd, True) for p, nd in _LAYER_PARAMS[last] if not (p == "bias" and no_bias)]
        if last in _PARAMETER_FREE:
            return []
        if last == "Sequential" and all(a.keyword is None and not a.star for a in value.args):
            out: list[ParamName] = []
            for i, arg in enumerate(value.args):
                inner = built_parameter_names(facts, src, arg.value, depth + 1)
                if inner is None:
                    return None
                out += [ParamName(f"{i}.{pn.name}", pn.ndim, pn.complete) for pn in inner]
            return out
        return None
    hits = facts.by_name.get(last or callee, []) if callee else []
    if len(hits) != 1:
        return None
    names = parameter_names(facts, hits[0])
    return names if names and all(pn.complete for pn in names) else None


def filter_rejects_all(condition: cst.BaseExpression, name_var: str, param_var: str, names: list[ParamName],
                       consts) -> bool:
    """Does the filter `condition` on a `named_parameters()` loop's `(name_var, param_var)` hold for none of
    `names` (every one known), whatever its unreadable parts are?"""
    if not names or not all(pn.complete for pn in names):
        return False
    cond = condition.visit(_Rename({name_var: NAME_VAR, param_var: PARAM_VAR}))
    rejected = uncovered_names([Group(cond, "", name_var, param_var)], names, consts)
    return len(rejected) == len(names)
