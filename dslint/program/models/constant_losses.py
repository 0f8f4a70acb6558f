"""A loss that is a constant on some ranks' data (issue 30, cause 8; ms-swift PR #8102).

`if total_weight > 0: loss = ... else: loss = torch.tensor(0.0)`: on a rank whose batch takes the second path
the backward reaches no parameter -- no ZeRO gradient hook fires there (ZeRO-3 re-gathers nothing, reduces
nothing) while the other ranks' backward runs them, so the reductions differ and hang (a plain `torch.tensor`
does not even require a gradient: that rank's backward raises). The fix keeps the forward's output in the loss
(`loss = outputs.sum() * 0.0`).

Which values are losses is decided by use, never by a name: a value handed to a backward (`loss.backward()`,
`engine.backward(loss)`, `accelerator.backward(loss)`) that a function of the same file returns, and the result
of a Trainer's `compute_loss` override (transformers' `Trainer.training_step` back-propagates what
`compute_loss(model, inputs, ...)` returns); a function that returns what a method of its class (or a function
of its file) returns hands that function's loss on (up to three hops).

A constant is a tensor built from literals or shapes by a torch factory (`torch.tensor`, `zeros`, `ones`, `full`,
`*_like`, `as_tensor`, `scalar_tensor`) or a number. A path gives the constant when a branch of an `if` returns
it, or assigns it to the name the function returns after the `if`, while another return of the function is no
constant. The test must depend on the data's values or sizes (a parameter of the function other than `self` and
option parameters, or a local computed from one, including containers filled from it): a test of a field's
presence (`is None`, `isinstance`, `hasattr`) is the collator's structure, the same on every rank.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from dslint.program.models.patched_forwards import data_names, reads_of, tree_of
from dslint.program.models.moe import builds_library_trainer

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

_FACTORIES = {"tensor", "as_tensor", "scalar_tensor", "zeros", "ones", "full", "zeros_like", "ones_like",
              "full_like", "empty"}
_STRUCTURE_CALLS = {"isinstance", "hasattr", "callable", "type"}
MAX_HOPS = 3
_TRAINER_WHY = "what a Trainer's `compute_loss(model, inputs)` returns is back-propagated"


@dataclass
class ConstantLoss:
    function: str
    line: int
    col: int
    test_line: int
    test_code: str
    root: str                  # how the value is known to be a loss
    by_trainer: bool = False   # a Trainer back-propagates it (else a backward call of the checked files)


def _imports_torch(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _is_constant(e: ast.AST, imports: dict[str, str]) -> bool:
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return True
    if not isinstance(e, ast.Call):
        return False
    func = e.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        qualified = f"{imports.get(func.value.id, func.value.id)}.{func.attr}"
    elif isinstance(func, ast.Name):
        qualified = imports.get(func.id, func.id)
    else:
        return False
    module, _, name = qualified.rpartition(".")
    return module == "torch" and name in _FACTORIES


def _value_test(test: ast.AST, data: set[str]) -> bool:
    """The test reads the data's values or sizes (not only its structure)."""
    leaves = []

    def go(e):
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                go(v)
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            go(e.operand)
        else:
            leaves.append(e)
    go(test)
    for leaf in leaves:
        if isinstance(leaf, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                  for op in leaf.ops):
            continue
        if isinstance(leaf, ast.Call) and isinstance(leaf.func, ast.Name) and leaf.func.id in _STRUCTURE_CALLS:
            continue
        if reads_of(leaf) & data:
            return True
    return False


def _functions(tree: ast.Module) -> dict[str, tuple[ast.FunctionDef, Optional[str]]]:
    """Qualified name within the file → (function, its class)."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = (node, None)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{item.name}"] = (item, node.name)
    return out


def _callee(call: ast.AST, cls: Optional[str], funcs: dict) -> Optional[str]:
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and cls:
        name = f"{cls}.{f.attr}"
        return name if name in funcs else None
    if isinstance(f, ast.Name) and f.id in funcs:
        return f.id
    return None


def _roots(funcs: dict, trainers: frozenset = frozenset()) -> dict[str, str]:
    """Functions whose return value is a loss: name → why. `trainers`: the file's classes that are Trainers
    (`builds_library_trainer`), whose `compute_loss(model, inputs, ...)` override the library back-propagates."""
    roots: dict[str, str] = {}
    for name, (fn, cls) in funcs.items():
        args = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if cls in trainers and fn.name == "compute_loss" and len(args) >= 3:
            roots[name] = _TRAINER_WHY
        # values handed to a backward in this function, bound from a call of a function of the file
        bound: dict[str, str] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = _callee(node.value, cls, funcs)
                if target:
                    bound[node.targets[0].id] = target
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                    node.func.attr == "backward"):
                continue
            handed = [node.func.value] if not node.args else [node.args[0]]
            for h in handed:
                if isinstance(h, ast.Name) and h.id in bound:
                    roots.setdefault(bound[h.id], f"its result is back-propagated in {fn.name}()")
    # returns handed on
    frontier = dict(roots)
    for _ in range(MAX_HOPS):
        nxt = {}
        for name, why in frontier.items():
            fn, cls = funcs[name]
            for node in ast.walk(fn):
                if isinstance(node, ast.Return):
                    target = _callee(node.value, cls, funcs)
                    if target and target not in roots:
                        roots[target] = nxt[target] = f"{fn.name}() returns its result; {why}"
        frontier = nxt
    return roots


def constant_losses(project: "ProjectView", src: "PythonSource") -> list[ConstantLoss]:
    def build():
        if "backward" not in src.text and "compute_loss" not in src.text:
            return []           # prefilter only
        tree = tree_of(project, src)
        if tree is None:
            return []
        funcs = _functions(tree)
        imports = _imports_torch(tree)
        if "torch" not in imports.values() and not any(v.startswith("torch.") for v in imports.values()):
            return []
        outline = src.outline
        trainers = frozenset(name for name, cls in (outline.classes.items() if outline is not None else ())
                             if any(builds_library_trainer(project, src, base) for base in cls.bases if base))
        out = []
        for name, why in _roots(funcs, trainers).items():
            fn, cls = funcs[name]
            out.extend(_in_function(fn, cls, why, imports, why.endswith(_TRAINER_WHY)))
        return out
    return project.memo(("constant_losses", id(src)), build)


def _returns(fn: ast.FunctionDef) -> list[ast.Return]:
    out = []

    def go(body):
        for stmt in body:
            if isinstance(stmt, ast.Return):
                out.append(stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            else:
                for field in ("body", "orelse", "finalbody"):
                    go(getattr(stmt, field, []) or [])
                for h in getattr(stmt, "handlers", []) or []:
                    go(h.body)
    go(fn.body)
    return out


def _in_function(fn: ast.FunctionDef, cls: Optional[str], why: str, imports: dict, by_trainer: bool = False
                 ) -> list[ConstantLoss]:
    args = fn.args.posonlyargs + fn.args.args
    data = data_names(fn, args[0].arg if cls and args else None)
    returns = _returns(fn)
    if not any(r.value is not None and not _is_constant(r.value, imports) for r in returns):
        return []
    returned = {r.value.id for r in returns if isinstance(r.value, ast.Name)}
    out = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or not _value_test(node.test, data):
            continue
        for branch, other in ((node.body, node.orelse), (node.orelse, node.body)):
            for stmt in branch:
                const = None
                if isinstance(stmt, ast.Return) and stmt.value is not None and _is_constant(stmt.value, imports):
                    const = stmt
                elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                        isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in returned and \
                        _is_constant(stmt.value, imports):
                    name = stmt.targets[0].id
                    # the other branch gives it a value that is no constant (or it is returned computed later)
                    if not any(isinstance(o, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                                 for t in o.targets)
                               and not _is_constant(o.value, imports) for o in other):
                        continue
                    const = stmt
                if const is not None:
                    out.append(ConstantLoss(fn.name, const.lineno, const.col_offset, node.lineno,
                                            ast.unparse(node.test), why, by_trainer))
    return out
