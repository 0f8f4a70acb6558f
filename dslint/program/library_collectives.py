"""Collectives hidden inside library calls (issue 30, cause 8).

**An iterator over a DataLoader whose dataset is an `IterDataPipe`.** torch's `DataLoader.__iter__` builds its
iterator (`_BaseDataLoaderIter.__init__`), which, when the dataset is an `IterDataPipe` and the default process
group exists, creates a gloo group over every rank (`dist.new_group`) and broadcasts a shared seed from rank 0
(`torch.utils.data.dataloader._share_dist_seed`, torch >= 1.13). Making the iterator on some ranks only --
`if rank == 0: it = iter(loader)`, a DataLoader subclass whose `__iter__` calls `super().__iter__()` on process 0
only (accelerate's `DataLoaderDispatcher` before PR #1709) -- leaves those ranks in the broadcast.

What says the dataset is an `IterDataPipe`, from data flow and API meaning (never from names):

- the loader is built in the same function or at module level as `DataLoader(<pipe>, ...)` (positional or
  `dataset=`), where `<pipe>` is, through the names bound to it there, a call of an `IterDataPipe` class
  (`torch.utils.data.datapipes.iter.*`, `torchdata.datapipes.iter.*`, a class of the file deriving from
  `IterDataPipe`) or a chain of method calls on one (`IterableWrapper(xs).shuffle()`);
- `super().__iter__()` in a class deriving from torch's `DataLoader` whose own methods test a value against an
  `IterDataPipe` type (`isinstance(dataset, ShufflerIterDataPipe)`): the class is written to load datapipes.

A map-style dataset (`TensorDataset`, a `Dataset` subclass, a `MapDataPipe`) broadcasts nothing: no site.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import MODULE_SCOPE, dotted_name
from dslint.program.statement_walks import code_of, iter_assigns

if TYPE_CHECKING:
    from dslint.sources import PythonSource

WHY_DATAPIPE = ("`DataLoader.__iter__` over an IterDataPipe creates a gloo group and broadcasts a shared seed "
                "from rank 0 (torch `_share_dist_seed`)")
_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_ITER_PIPE_MODULES = ("torch.utils.data.datapipes.iter.", "torchdata.datapipes.iter.")


def may_iterate_datapipe(text: str) -> bool:
    """A text pre-filter (a superset of `datapipe_iteration`'s answers): the file names a datapipe type."""
    return "DataPipe" in text or "datapipes" in text


def _iter_pipe_type(src: "PythonSource", expr: cst.BaseExpression) -> bool:
    """Is `expr` (a name or attribute) an IterDataPipe class: torch's/torchdata's, or a class of the file that
    derives from one?"""
    resolved = src.facts.resolve_expr(expr)
    if not resolved:
        return False
    if resolved.startswith(_ITER_PIPE_MODULES) or resolved.rsplit(".", 1)[-1] == "IterDataPipe" and \
            resolved.startswith(("torch.utils.data", "torchdata")):
        return True
    if resolved.startswith(("torch.", "torchdata.")):
        return resolved.rsplit(".", 1)[-1].endswith("IterDataPipe") and "datapipes" in resolved
    outline = src.outline
    info = outline.classes.get(resolved) if outline is not None else None
    if info is None:
        return False
    return any(b.rsplit(".", 1)[-1] == "IterDataPipe" and b.startswith(("torch.utils.data", "torchdata"))
               or b.startswith(_ITER_PIPE_MODULES) for b in info.bases)


def _builds_pipe(src: "PythonSource", expr: Optional[cst.BaseExpression], binds: dict[str, list], depth: int = 0
                 ) -> bool:
    """Is `expr` an IterDataPipe: a call of an IterDataPipe class, a chain of method calls on one, or a name
    every binding of which is one."""
    if expr is None or depth > 4:
        return False
    if isinstance(expr, cst.Name):
        values = binds.get(expr.value)
        return bool(values) and all(_builds_pipe(src, v, binds, depth + 1) for v in values)
    while isinstance(expr, cst.Call):
        func = expr.func
        if _iter_pipe_type(src, func):
            return True
        if not isinstance(func, cst.Attribute):
            return False
        expr = func.value              # `IterableWrapper(xs).shuffle().batch(4)`: the pipe under the chain
        if isinstance(expr, cst.Name):
            return _builds_pipe(src, expr, binds, depth + 1)
    return False


def _bindings(body: cst.CSTNode) -> dict[str, list]:
    """name → the values `name = value` binds in `body` (a function, or the module's top-level statements)."""
    out: dict[str, list] = {}
    for node in iter_assigns(body):
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                out.setdefault(t.target.value, []).append(node.value)
    return out


def _loader_over_pipe(src: "PythonSource", value: cst.BaseExpression, binds: dict[str, list]) -> bool:
    """Is `value` a `DataLoader(<IterDataPipe>, ...)` call?"""
    if not isinstance(value, cst.Call) or src.facts.resolve_expr(value.func) not in _LOADERS:
        return False
    dataset = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "dataset"), None)
    if dataset is None and value.args and value.args[0].keyword is None and not value.args[0].star:
        dataset = value.args[0].value
    return _builds_pipe(src, dataset, binds)


def _class_loads_pipes(src: "PythonSource", cls: str) -> Optional[cst.CSTNode]:
    """The `isinstance(x, <IterDataPipe type>)` test of a DataLoader subclass's methods, if the class derives from
    torch's DataLoader and has one."""
    info = src.facts.classes.get(cls)
    if info is None or not any(b in _LOADERS for b in info.bases):
        return None
    for method in info.methods.values():
        for call in method.calls:
            node = call.node
            if call.callee == "isinstance" and len(node.args) == 2:
                types = node.args[1].value
                options = [e.value for e in types.elements] if isinstance(types, (cst.Tuple, cst.List)) else [types]
                if any(_iter_pipe_type(src, t) for t in options):
                    return node
    return None


def datapipe_iteration(src: "PythonSource", call: cst.Call, scope: str) -> Optional[tuple[str, cst.CSTNode, bool]]:
    """(why, evidence node, certain) when `call` makes an iterator over a DataLoader of an IterDataPipe:
    `iter(loader)` / `loader.__iter__()` with `loader = DataLoader(<pipe>)` bound in the same function or at
    module level (certain), or `super().__iter__()` in a DataLoader subclass written for datapipes (the dataset
    is the caller's: a warning)."""
    if not may_iterate_datapipe(src.text):
        return None
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "__iter__":
        owner = func.value
        if isinstance(owner, cst.Call) and dotted_name(owner.func) == "super":
            info = src.facts.functions.get(scope)
            test = _class_loads_pipes(src, info.class_name) if info is not None and info.class_name else None
            if test is not None:
                return (f"{WHY_DATAPIPE}; this DataLoader subclass loads IterDataPipe datasets "
                        f"(line {src.span(test).line})", test, False)
            return None
        loader = owner
    elif isinstance(func, cst.Name) and func.value == "iter" and len(call.args) == 1 and call.args[0].keyword is None:
        loader = call.args[0].value
    else:
        return None
    if not isinstance(loader, cst.Name):
        return None
    info = src.facts.functions.get(scope) if scope != MODULE_SCOPE else None
    for body in ((info.node,) if info is not None else ()) + (src.module,):
        binds = _bindings(body) if body is not src.module else _module_bindings(src)
        values = binds.get(loader.value)
        if values:
            hit = next((v for v in values if _loader_over_pipe(src, v, binds)), None)
            if hit is not None:
                return (f"{WHY_DATAPIPE}; `{loader.value}` loads an IterDataPipe (line {src.span(hit).line})",
                        hit, True)
            return None
    return None


def _module_bindings(src: "PythonSource") -> dict[str, list]:
    """The module's top-level `name = value` bindings (not those inside its functions)."""
    memo = src.__dict__.get("_datapipe_module_binds")
    if memo is None:
        memo = src.__dict__["_datapipe_module_binds"] = {}
        for stmt in src.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            if isinstance(t.target, cst.Name):
                                memo.setdefault(t.target.value, []).append(small.value)
    return memo


# --- DTensor.full_tensor() --------------------------------------------------------------------------------------

WHY_DTENSOR = ("`DTensor.full_tensor()` redistributes the tensor to Replicate over its device mesh: an all-gather "
               "of the shards (FSDP2 parameters and their state dict are sharded) that every rank of the mesh "
               "must join")
_DTENSOR_TYPES = ("torch.distributed.tensor.DTensor", "torch.distributed._tensor.DTensor",
                  "torch.distributed.tensor.api.DTensor", "torch.distributed._tensor.api.DTensor")


def may_gather_dtensor(text: str) -> bool:
    """A text pre-filter (a superset of `dtensor_gather`'s answers)."""
    return "full_tensor" in text


def _is_dtensor_type(src: "PythonSource", expr: cst.BaseExpression) -> bool:
    return src.facts.resolve_expr(expr) in _DTENSOR_TYPES


def _tests_dtensor(src: "PythonSource", test: cst.BaseExpression, receiver: str) -> Optional[cst.CSTNode]:
    """The part of `test` that asks whether `receiver` (its code) is a DTensor: `isinstance(r, DTensor)` (torch's
    class, through the imports), `hasattr(r, "full_tensor")` (the code asks for DTensor's own API), or
    `type(r).__name__ == "DTensor"`; through `and`, `or` and `not` is not followed (a negated test guards the
    other branch)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tests_dtensor(src, test.left, receiver) or _tests_dtensor(src, test.right, receiver)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and len(test.args) == 2:
        first, second = test.args[0].value, test.args[1].value
        if _code(first) != receiver:
            return None
        if test.func.value == "hasattr" and isinstance(second, cst.SimpleString) and \
                second.evaluated_value == "full_tensor":
            return test
        if test.func.value == "isinstance":
            options = [e.value for e in second.elements] if isinstance(second, (cst.Tuple, cst.List)) else [second]
            if options and all(_is_dtensor_type(src, t) for t in options):
                return test
        return None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.Equal):
        left, right = test.left, test.comparisons[0].comparator
        if isinstance(right, cst.SimpleString) and right.evaluated_value == "DTensor" and \
                isinstance(left, cst.Attribute) and left.attr.value == "__name__" and \
                isinstance(left.value, cst.Call) and isinstance(left.value.func, cst.Name) and \
                left.value.func.value == "type" and len(left.value.args) == 1 and \
                _code(left.value.args[0].value) == receiver:
            return test
    return None


def _guards(body: cst.CSTNode, target: cst.CSTNode) -> list[cst.BaseExpression]:
    """The tests whose true branch holds `target` inside `body` (`if t:` bodies, `a if t else b`'s `a`)."""
    from dslint.sources.cstwalk import ancestors
    path = ancestors(body, target)
    if path is None:
        return []
    out = []
    for i, node in enumerate(path):
        below = path[i + 1] if i + 1 < len(path) else target
        if isinstance(node, cst.IfExp) and below is node.body or isinstance(node, cst.If) and below is node.body:
            out.append(node.test)
    return out


def dtensor_gather(src: "PythonSource", call: cst.Call, scope: str) -> Optional[tuple[str, Optional[cst.CSTNode]]]:
    """(why, evidence node or None) when `call` is `r.full_tensor()` and the code shows `r` a torch DTensor -- a
    test on the way to the call (`isinstance(r, DTensor)` with torch's class, `hasattr(r, "full_tensor")`,
    `type(r).__name__ == "DTensor"`; the node) or an import of torch's `DTensor` by the file (it is written for
    DTensors; None). The method's name alone makes no site: an unproven site found first in a function would
    hide a proven one it also reaches."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "full_tensor") or call.args:
        return None
    receiver = _code(func.value)
    info = src.facts.functions.get(scope)
    body = info.node if info is not None else src.module
    for test in _guards(body, call):
        hit = _tests_dtensor(src, test, receiver)
        if hit is not None:
            return WHY_DTENSOR, hit
    if any(v in _DTENSOR_TYPES for v in src.facts.imports.values()):
        return WHY_DTENSOR, None
    return None


def _code(node: cst.CSTNode) -> str:
    return code_of(node, 10_000)
