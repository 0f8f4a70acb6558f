"""Which values are data loaders, by data flow (issue 30, item 9: no names as evidence).

`RankTaint.loader_batch` binds a loop's item to "a batch of the script's own data loader" (other samples on each
rank) when the loop iterates a loader. Whether it does is decided here from where the iterated value comes from,
never from what it is called: the binding of the name (a local, a `self.` field -- set by the class or a checked
base class, in any file --, a module global, a free variable of a nested function) reaches

- a loader construction, by the resolved import (`torch.utils.data.DataLoader`, a project class deriving from
  one, the loader classes of accelerate, DeepSpeed, torchdata -- `_LOADER_CLASSES`);
- a checked function or method whose `return` gives one (followed into its file); a method called on an object
  whose class is unknown (built from a registry, handed in) is any of the few checked methods of that name
  (class hierarchy analysis, `_CHA_LIMIT`);
- a library API whose result is a loader: DeepSpeed's `engine.deepspeed_io(dataset)` and the third result of
  `deepspeed.initialize(..., training_data=...)`, transformers' `Trainer.get_train_dataloader()` (and eval/test),
  accelerate's `prepare(...)` (result i is argument i prepared) and `prepare_data_loader`;
- an iterator over one (`iter(x)`, `tqdm(x)`, `enumerate(x)`, `itertools.cycle(x)`, `skip_first_batches(x, n)`);
- a parameter some caller in the checked files (or its default) hands one of the above.

The walk is bounded (`_DEPTH` steps) and memoised per project; a cycle of bindings is no loader."""

from __future__ import annotations

from typing import Any, Iterable, Optional

import libcst as cst

from dslint.program.facts import MODULE_SCOPE, dotted_name
from dslint.program.statement_walks import iter_assigns, iter_returns

# the callers' `RankTaint` (dslint.program.rank.value_uniformity, which imports this module): its `analysis`,
# `facts` and `src` are read
RankTaint = Any

# loader classes of the libraries, by their resolved path
LOADER_CLASSES = frozenset({
    "torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader",
    "torchdata.stateful_dataloader.StatefulDataLoader", "torchdata.stateful_dataloader.stateful_dataloader."
    "StatefulDataLoader", "deepspeed.runtime.dataloader.DeepSpeedDataLoader",
    "accelerate.data_loader.DataLoaderShard", "accelerate.data_loader.DataLoaderDispatcher",
    "torch_geometric.loader.DataLoader", "monai.data.DataLoader", "webdataset.WebLoader"})
# library functions that return a loader built from their arguments
_LOADER_BUILDERS = frozenset({"accelerate.data_loader.prepare_data_loader", "accelerate.prepare_data_loader",
                              "accelerate.data_loader.skip_first_batches", "accelerate.skip_first_batches"})
# methods of library objects that return a loader: DeepSpeedEngine.deepspeed_io, transformers.Trainer's getters
_LOADER_METHODS = frozenset({"deepspeed_io", "get_train_dataloader", "get_eval_dataloader", "get_test_dataloader"})
# calls whose result iterates what their first argument iterates
_ITERATING = frozenset({"iter", "tqdm", "enumerate", "cycle", "islice", "skip_first_batches"})
# `deepspeed.initialize`'s results: (engine, optimizer, training_dataloader, lr_scheduler); its loader is built
# only from `training_data` (keyword, or the fifth positional argument)
_INITIALIZE = frozenset({"deepspeed.initialize"})
_INITIALIZE_LOADER_AT = 2
_TRAINING_DATA_AT = 4
_DEPTH = 8
# class hierarchy analysis answers for a method name only when at most this many checked classes define it
_CHA_LIMIT = 3


def is_loader(taint: RankTaint, e: Optional[cst.BaseExpression], scope: Optional[str], depth: int = 0) -> bool:
    """Does `e`, an expression of `taint`'s file evaluated in `scope`, hold a data loader (module docstring)?"""
    if e is None or depth > _DEPTH:
        return False
    memo = taint.analysis.__dict__.setdefault("_loader_values", {})
    key = (id(taint.src), id(e), scope)
    if key in memo:
        return memo[key]
    memo[key] = False           # a cycle of bindings: no loader
    out = memo[key] = _is_loader(taint, e, scope or MODULE_SCOPE, depth)
    return out


def _is_loader(taint: RankTaint, e: cst.BaseExpression, scope: str, depth: int) -> bool:
    if isinstance(e, cst.IfExp):
        return is_loader(taint, e.body, scope, depth + 1) or is_loader(taint, e.orelse, scope, depth + 1)
    if isinstance(e, cst.Call):
        return _loader_call(taint, e, scope, depth)
    name = dotted_name(e)
    if name is None:
        return False
    return any(_bound_loader(owner, value, at, where, depth)
               for owner, value, at, where in _bindings(taint, name, scope)) \
        or any(is_loader(other, arg, where, depth + 1) for other, arg, where in _handed(taint, name, scope))


def _bound_loader(taint: RankTaint, value: cst.BaseExpression, at: Optional[int], scope: str, depth: int) -> bool:
    """Is element `at` (None: the whole value) of what an assignment binds a loader?"""
    if at is None:
        return is_loader(taint, value, scope, depth + 1)
    if isinstance(value, (cst.Tuple, cst.List)):
        elems = [el.value for el in value.elements]
        return at < len(elems) and not isinstance(value.elements[at], cst.StarredElement) and \
            is_loader(taint, elems[at], scope, depth + 1)
    if not isinstance(value, cst.Call):
        return False
    callee = taint.facts.resolve_expr(value.func)
    targets = _targets(taint, callee, scope, value)
    if targets:
        return any(isinstance(r.value, (cst.Tuple, cst.List)) and
                   _bound_loader(other, r.value, at, info.qualname, depth + 1)
                   for other, info in targets for r in iter_returns(info.node.body))
    positional = [a for a in value.args if a.keyword is None]
    if callee in _INITIALIZE:
        data = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "training_data"),
                    positional[_TRAINING_DATA_AT].value if len(positional) > _TRAINING_DATA_AT else None)
        return at == _INITIALIZE_LOADER_AT and data is not None and \
            not (isinstance(data, cst.Name) and data.value == "None")
    if _is_prepare(value) and not any(a.star for a in positional[:at + 1]):
        return at < len(positional) and is_loader(taint, positional[at].value, scope, depth + 1)
    return False


def _is_prepare(call: cst.Call) -> bool:
    """accelerate's `Accelerator.prepare(*args)`: its results are its arguments, each prepared (a loader
    sharded) -- what each result is follows from its argument, whatever the receiver is called."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "prepare"


def _loader_call(taint: RankTaint, call: cst.Call, scope: str, depth: int) -> bool:
    callee = taint.facts.resolve_expr(call.func)
    if callee in LOADER_CLASSES or callee in _LOADER_BUILDERS:
        return True
    targets = _targets(taint, callee, scope, call)
    if targets:         # a checked function: what it returns decides
        return any(is_loader(other, r.value, info.qualname, depth + 1)
                   for other, info in targets for r in iter_returns(info.node.body))
    if _loader_class(taint, callee, depth):
        return True
    last = callee.rsplit(".", 1)[-1] if callee else (
        call.func.attr.value if isinstance(call.func, cst.Attribute) else None)
    first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
    if last in _ITERATING and first is not None:
        return is_loader(taint, first, scope, depth + 1)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _LOADER_METHODS:
        return True
    if _is_prepare(call) and len(call.args) == 1 and first is not None:
        return is_loader(taint, first, scope, depth + 1)
    return False


def _loader_class(taint: RankTaint, callee: Optional[str], depth: int) -> bool:
    """A checked class deriving (through checked classes) from a library loader class."""
    found = taint.analysis.class_of(taint.src, callee) if callee else None
    if found is None or depth > _DEPTH:
        return False
    other, qual = found
    info = other.facts.classes.get(qual) if getattr(other, "facts", None) is not None else None
    for base in info.bases if info is not None else ():
        resolved = other.facts.resolve(base)
        if resolved in LOADER_CLASSES or resolved != callee and _loader_class(
                taint.analysis.taint(other), resolved, depth + 1):
            return True
    return False


def _targets(taint: RankTaint, callee: Optional[str], scope: str, call: Optional[cst.Call] = None) -> list:
    """The checked functions a call may run: its resolved targets; else, for a method called on an object whose
    class dslint cannot tell (`loader_factory = registry[name](...)`, handed in), the methods of that name the
    checked classes define (class hierarchy analysis: the object is an instance of one of them), when few do."""
    out = []
    for target in taint.analysis.call_targets(taint.src, callee, scope) if callee else ():
        hit = taint.analysis.function_info(target)
        if hit is not None:
            out.append((taint.analysis.taint(hit[0]), hit[1]))
    if out or call is None or not isinstance(call.func, cst.Attribute) or _library_receiver(taint, call.func.value):
        return out
    candidates = taint.analysis.methods_named(call.func.attr.value)
    run = getattr(taint.analysis.project, "run_view", None)
    if not candidates and run is not None:
        # a registry's classes are imported by no file of the unit (registered when the package is walked at
        # run time): the run's classes answer
        candidates = run.methods_named(call.func.attr.value)
    if not 0 < len(candidates) <= _CHA_LIMIT:
        return out
    for target in candidates:
        hit = taint.analysis.function_info(target)
        if hit is not None:
            out.append((taint.analysis.taint(hit[0]), hit[1]))
    return out


def _library_receiver(taint: RankTaint, receiver: cst.BaseExpression) -> bool:
    """Is the receiver rooted at an imported name (a module, a library's object) or at `self`/`cls`/`super`
    (resolved by `call_targets` already)? Class hierarchy analysis is for objects of unknown class only."""
    root = receiver
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    return root.value in ("self", "cls", "super") or root.value in taint.facts.imports


def _scope_chain(taint: RankTaint, scope: str) -> Iterable:
    parts = scope.split(".") if scope != MODULE_SCOPE else []
    for i in range(len(parts), 0, -1):
        info = taint.facts.functions.get(".".join(parts[:i]))
        if info is not None:
            yield info


def _targets_of(node: cst.Assign, name: str) -> Iterable[Optional[int]]:
    for t in node.targets:
        if dotted_name(t.target) == name:
            yield None
        elif isinstance(t.target, (cst.Tuple, cst.List)):
            for i, el in enumerate(t.target.elements):
                if isinstance(el.value, cst.StarredElement) or isinstance(el, cst.StarredElement):
                    break
                if dotted_name(el.value) == name:
                    yield i


def _bindings(taint: RankTaint, name: str, scope: str
              ) -> Iterable[tuple[RankTaint, cst.BaseExpression, Optional[int], str]]:
    """(the binding file's taint, value, element index or None, scope) of every assignment that may bind `name` as
    read in `scope`: a local of the innermost function that binds it (or has it as a parameter), a `self.` field
    of the scope's class or of a checked base class (in any of their methods, in whatever file: the instance's
    inherited `__init__` sets it), else a module global."""
    if name.startswith("self.") and name.count(".") == 1:
        cls = next((info.class_name for info in _scope_chain(taint, scope) if info.class_name), None)
        for owner, qual in _class_and_bases(taint, cls) if cls is not None else ():
            for info in owner.facts.functions.values():
                if info.class_name == qual:
                    for node in iter_assigns(info.node.body):
                        for at in _targets_of(node, name):
                            yield owner, node.value, at, info.qualname
        return
    if "." in name:
        return
    for info in _scope_chain(taint, scope):
        found = [(node.value, at) for node in iter_assigns(info.node.body) for at in _targets_of(node, name)]
        if found or name in info.params:
            for value, at in found:
                yield taint, value, at, info.qualname
            return
    for stmt in taint.src.module.body:
        if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            for node in iter_assigns(stmt):
                for at in _targets_of(node, name):
                    yield taint, node.value, at, MODULE_SCOPE


def _class_and_bases(taint: RankTaint, cls: str) -> list[tuple[RankTaint, str]]:
    """(taint of its file, qualified name) of a class and of its checked base classes, through files (class
    hierarchy by resolved bases, at most `_DEPTH` deep)."""
    out, todo, seen = [], [(taint, cls)], set()
    while todo and len(out) <= _DEPTH:
        owner, qual = todo.pop(0)
        if (id(owner.src), qual) in seen:
            continue
        seen.add((id(owner.src), qual))
        out.append((owner, qual))
        info = owner.facts.classes.get(qual)
        for base in info.bases if info is not None else ():
            found = owner.analysis.class_of(owner.src, owner.facts.resolve(base))
            if found is not None and getattr(found[0], "facts", None) is not None:
                todo.append((owner.analysis.taint(found[0]), found[1]))
    return out


def _handed(taint: RankTaint, name: str, scope: str) -> Iterable[tuple[RankTaint, cst.BaseExpression, str]]:
    """(caller's taint, argument, caller's scope) of what the callers in the checked files (and the default) hand
    the parameter `name` of the innermost function of `scope` that binds it."""
    if "." in name:
        return
    for info in _scope_chain(taint, scope):
        if name not in info.params:
            if any(True for node in iter_assigns(info.node.body) for _ in _targets_of(node, name)):
                return
            continue
        default = next((p.default for p in info.node.params.params + info.node.params.kwonly_params
                        if p.name.value == name and p.default is not None), None)
        owner = info.qualname.rpartition(".")[0]
        if default is not None:
            yield taint, default, owner if owner in taint.facts.functions else MODULE_SCOPE
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
        if name not in params:
            return          # the instance itself (`for x in self`): its callers hand no argument for it
        at = params.index(name)
        for other, call, caller in _calls(taint, info):
            if any(a.star for a in call.args):
                continue
            positional = [a for a in call.args if a.keyword is None]
            arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
            if arg is None and at < len(positional):
                arg = positional[at].value
            if arg is not None:
                yield taint.analysis.taint(other), arg, caller.qualname if caller is not None else MODULE_SCOPE
        return


def _calls(taint: RankTaint, info) -> list:
    """(file, call node, calling function or None) of the calls in the checked files that run `info`: its calls
    (`calls_of`), or for a constructor the calls of its class (`Evaluator(model, loader)`)."""
    if info.name != "__init__" or not info.class_name:
        return taint.analysis.calls_of(taint.src, info)
    name = info.class_name.rsplit(".", 1)[-1]
    if taint.analysis.count_calls_named(name) > 64:
        return []
    out = []
    for other in taint.analysis._files_calling(name):
        for call in other.facts.calls:
            if call.attr == name and taint.analysis.class_of(other, call.callee) == (taint.src, info.class_name):
                out.append((other, call.node, other.facts.functions.get(call.scope)))
    return out
