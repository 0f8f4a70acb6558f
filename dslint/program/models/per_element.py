"""Empty-input guards of a module the run calls once per element of its input (issue 30, DSL303 precision).

`if xi.shape[0] == 0: return torch.zeros(0, d)` at the top of a sub-module's forward skips its parameters for an
empty input. That is a batch-dependent branch of the training step only where one call of the module sees the
whole batch. Where every call of the module in the run sits in a loop over the elements of an input of the calling
method (`for sample in inputs: ... self.enc(sample["resp"])`, a comprehension over a sample's prompts), the module
runs once per element, and a rank skips its parameters only when every element of its batch is empty: the guard
alone shows no rank whose reduction differs. The loop must walk data (its iterable reads a parameter of the
calling method, or the target of such an outer loop) and must not choose the module (`for expert in
self.experts: expert(x)` calls a different module each time: one per expert, no repetition).

Call sites are found by data flow from the module classes that hold the class as a sub-module (`self.enc =
Enc(...)`, also through a module-level alias `Enc = FiniteEnc`, and a `self.` lambda that calls it, `self.p = lambda
*a, **k: self.enc(*a, **k, mode="p")`); a call inside a nested function counts through that function's calls.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from dslint.program.hyperparams import memo

if TYPE_CHECKING:
    from dslint.program.models.modules import ModelFacts, ModuleClass
    from dslint.program.project_view import ProjectView

_SIZE_CALLS = frozenset({"size", "numel", "nelement"})


def emptiness_input(code: str) -> Optional[str]:
    """The name whose emptiness the test reads (`x.shape[0] == 0`, `x.size(0) == 0`, `len(x) == 0`, `x.numel()
    == 0`, `not len(x)`), or None."""
    try:
        test = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _size_of(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.LtE)):
        left, right = test.left, test.comparators[0]
        if _zero(right):
            return _size_of(left)
        if _zero(left) and isinstance(test.ops[0], ast.Eq):
            return _size_of(right)
    return None


def _zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _size_of(node: ast.AST) -> Optional[str]:
    """`x` of a size read along the first dimension or in total."""
    if isinstance(node, ast.Subscript) and _zero(node.slice) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "shape" and isinstance(node.value.value, ast.Name):
        return node.value.value.id
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 and \
                isinstance(node.args[0], ast.Name):
            return node.args[0].id
        if isinstance(node.func, ast.Attribute) and node.func.attr in _SIZE_CALLS and \
                isinstance(node.func.value, ast.Name) and all(_zero(a) for a in node.args) and len(node.args) <= 1:
            if node.func.attr == "size" and not node.args:
                return None         # `x.size()` is the whole shape
            return node.func.value.id
    return None


def per_element_loop(project: "ProjectView", facts: "ModelFacts", cls: "ModuleClass") -> Optional[str]:
    """When every call of a `cls` object that the run's module classes show runs once per element of an input of
    the calling method, the loop that says so (`for batch_input in inputs`); None when a call is outside such a
    loop or no call is found. Memoised per class."""
    cache = memo(project, "per-element-loop", dict)
    if id(cls) not in cache:
        cache[id(cls)] = _per_element_loop(project, facts, cls)
    return cache[id(cls)]


def _per_element_loop(project: "ProjectView", facts: "ModelFacts", cls: "ModuleClass") -> Optional[str]:
    family = {c.name for c in [cls, *facts.subclasses(cls)]}
    found: Optional[str] = None
    defining = {id(c.src) for c in [cls, *facts.subclasses(cls)]}
    alias_names = set().union(*(aliases(project, c.src, family) for c in [cls, *facts.subclasses(cls)]))
    for holder in facts.classes:
        names = family | alias_names
        if not holder.mentions(frozenset(names)):
            continue
        if alias_names and id(holder.src) not in defining and not any(
                holder.src.outline is not None and v.rsplit(".", 1)[-1] in alias_names
                for v in holder.src.outline.imports.values()):
            names = family
        tree = _class_node(project, holder)
        if tree is None:
            continue
        attrs = _fields_built(tree, names)
        if not attrs:
            continue
        attrs |= _lambda_aliases(tree, attrs)
        for fn in [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for loop in _call_loops(fn, attrs):
                if loop is None:
                    return None
                found = found or loop
    return found


def _class_node(project: "ProjectView", cls: "ModuleClass") -> Optional[ast.ClassDef]:
    trees = memo(project, "per-element-trees", dict)
    src = cls.src
    if id(src) not in trees:
        try:
            trees[id(src)] = ast.parse(src.text)
        except (SyntaxError, ValueError):
            trees[id(src)] = None
    tree = trees[id(src)]
    if tree is None:
        return None
    line = cls.info.node and src.span(cls.info.node).line
    return next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.name and
                 (line is None or n.lineno <= line <= (n.end_lineno or n.lineno) or
                  any(d.lineno == line for d in n.decorator_list))), None)


def aliases(project: "ProjectView", src, family: set) -> set:
    """Module-level names of `src` bound to a class of `family` (`AudioEncoder = FiniteAudioEncoder`)."""
    table = memo(project, "per-element-aliases", dict)
    key = (id(src), frozenset(family))
    if key not in table:
        out = set()
        try:
            tree = ast.parse(src.text)
        except (SyntaxError, ValueError):
            tree = None
        for stmt in tree.body if tree is not None else ():
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id in family:
                out |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        table[key] = out
    return table[key]


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _fields_built(cls_node: ast.ClassDef, names: set) -> set:
    """`self.X = C(...)` in the class's methods with `C` (its last name) one of `names`: the fields X."""
    out = set()
    for node in ast.walk(cls_node):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            func = node.value.func
            last = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if last in names:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out |= {a for a in (_self_attr(t) for t in targets) if a}
    return out


def _lambda_aliases(cls_node: ast.ClassDef, attrs: set) -> set:
    """`self.p = lambda *a, **k: self.enc(*a, **k)`: fields that call one of `attrs`."""
    out = set()
    for node in ast.walk(cls_node):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and \
                isinstance(node.value.body, ast.Call) and _self_attr(node.value.body.func) in attrs:
            out |= {a for a in (_self_attr(t) for t in node.targets) if a}
    return out


def _call_loops(fn: ast.FunctionDef, attrs: set):
    """For every call `self.<attr>(...)` in `fn` (outside the lambdas that alias the field), the per-element loop
    it runs in (its description), or None when it runs outside one. A call in a nested function is judged at that
    function's calls."""
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]} - {"self"}
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and _self_attr(node.func) in attrs):
            continue
        chain = _ancestors(node, parents, fn)
        if any(isinstance(a, ast.Lambda) for a in chain):
            continue            # the alias itself: its calls are the sites
        inner = next((a for a in chain if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if inner is not None:
            sites = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id == inner.name and id(n) not in {id(x) for x in ast.walk(inner)}]
            if not sites:
                yield None
            for site in sites:
                yield _loop_of(_ancestors(site, parents, fn), params, site)
            continue
        yield _loop_of(chain, params, node)


def _ancestors(node: ast.AST, parents: dict, fn: ast.AST) -> list:
    out = []
    cur = parents.get(id(node))
    while cur is not None and cur is not fn:
        out.append(cur)
        cur = parents.get(id(cur))
    return out


def _reads(node: ast.AST, names: set) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _targets(node: ast.AST) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _loop_of(chain: list, params: set, call: ast.Call) -> Optional[str]:
    """The per-element loop among `chain` (innermost first): a `for` or comprehension whose iterable reads a
    parameter of the method or the target of such an outer loop, whose target the call's module does not read."""
    loops = []
    for node in chain:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            loops.append((node.iter, node.target))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            loops.extend((g.iter, g.target) for g in node.generators)
    data = set(params)
    found = None
    for iterable, target in reversed(loops):        # outermost first
        if _reads(iterable, data):
            if _reads(call.func, _targets(target)):
                return None         # the loop chooses the module: one call of each
            data |= _targets(target)
            found = found or f"for {ast.unparse(target)} in {ast.unparse(iterable)}"
    return found
