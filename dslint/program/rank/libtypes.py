"""Objects of known libraries typed by use, and the parameters of their calls that only word the display.

A Hugging Face `datasets` object is what `datasets.load_dataset(...)` (any function of the `datasets` module)
returns, what a checked function returns when all its returns are such objects, a split of one
(`raw["train"]`) and what its dataset-returning methods (`map`, `filter`, `select`, `shuffle`, ...) return.
A name is such an object when every binding of it in its file is (or `None`: no method runs on it).

`Dataset.map` / `Dataset.filter` (and `DatasetDict`'s) take `desc`, the label of the progress bar they show:
it never reaches the returned dataset. A rank-varying label (`desc="Tokenizing" if is_main else None`)
therefore leaves the result as uniform as the data and the function (`values.RankTaint._call`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.statements import iter_assigns, iter_returns

if TYPE_CHECKING:
    from dslint.program.project import ProjectView
    from dslint.sources import PythonSource

# the `datasets` API: methods of Dataset / DatasetDict / IterableDataset that return a dataset of the same kind
_DATASET_METHODS = {"map", "filter", "select", "shuffle", "train_test_split", "remove_columns", "rename_column",
                    "rename_columns", "sort", "flatten", "with_format", "cast", "cast_column", "add_column",
                    "select_columns", "skip", "take", "shard", "flatten_indices", "class_encode_column"}
# parameters of those methods that only label the progress bar (the `datasets` signatures of map/filter)
DISPLAY_PARAMS = {"map": frozenset({"desc"}), "filter": frozenset({"desc"})}


class DatasetTyping:
    """Which expressions of one file are `datasets` objects (memoised per name)."""

    def __init__(self, project: "ProjectView", src: "PythonSource") -> None:
        self.project = project
        self.src = src
        self._names: dict[str, bool] = {}
        self._functions: dict[tuple[int, str], bool] = {}

    def is_dataset(self, e: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if isinstance(e, cst.Name):
            return self._name(e.value, depth)
        if isinstance(e, cst.Subscript):
            keys = [el.slice.value for el in e.slice if isinstance(el.slice, cst.Index)]
            return len(keys) == 1 and isinstance(keys[0], (cst.SimpleString, cst.FormattedString)) and \
                self.is_dataset(e.value, depth + 1)
        if isinstance(e, cst.Call):
            callee = self.src.facts.resolve_expr(e.func) or ""
            if callee == "datasets" or callee.startswith("datasets."):
                return True
            if isinstance(e.func, cst.Attribute) and e.func.attr.value in _DATASET_METHODS and \
                    self.is_dataset(e.func.value, depth + 1):
                return True
            return self._returns_dataset(callee, depth)
        return False

    def _name(self, name: str, depth: int) -> bool:
        if name in self._names:
            return self._names[name]
        # assumed while its bindings are looked at (`ds = ds.select(...)`, `tok = ds.map(...); ds = tok.filter(...)`:
        # a cycle of dataset methods is a dataset when its entries are); undone with what was derived from it
        before = set(self._names)
        self._names[name] = True
        values = [node.value for node in self._assigns for t in node.targets
                  if isinstance(t.target, cst.Name) and t.target.value == name]
        found = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
        ok = bool(found) and all(self.is_dataset(v, depth + 1) for v in found)
        if not ok:
            for other in set(self._names) - before:
                del self._names[other]
        self._names[name] = ok
        return ok

    @property
    def _assigns(self) -> list[cst.Assign]:
        if "_assign_list" not in self.__dict__:
            self.__dict__["_assign_list"] = list(iter_assigns(self.src.module))
        return self.__dict__["_assign_list"]

    def _returns_dataset(self, callee: str, depth: int) -> bool:
        hit = self.project.function_for_callee(self.src, callee) if callee else None
        if hit is None:
            return False
        where, qual = hit
        key = (id(where), qual)
        if key in self._functions:
            return self._functions[key]
        self._functions[key] = False
        info = where.facts.functions.get(qual)
        if info is None:
            return False
        other = self if where is self.src else DatasetTyping(self.project, where)
        returns = [r.value for r in iter_returns(info.node.body) if r.value is not None]
        self._functions[key] = bool(returns) and all(other.is_dataset(v, depth + 1) for v in returns)
        return self._functions[key]


def display_only(typing: Optional[DatasetTyping], call: cst.Call, arg: cst.Arg) -> bool:
    """Is `arg` a parameter of a known library call that only words its display (`desc=` of `Dataset.map`)?"""
    if typing is None or arg.keyword is None or not isinstance(call.func, cst.Attribute):
        return False
    params = DISPLAY_PARAMS.get(call.func.attr.value)
    return params is not None and arg.keyword.value in params and typing.is_dataset(call.func.value)


# accelerate's process-state objects: `Accelerator`, `PartialState`, `AcceleratorState` (their `gather`,
# `gather_for_metrics`, `reduce`, `pad_across_processes` are collectives whose result every process shares)
_ACCELERATE_STATES = {"Accelerator", "PartialState", "AcceleratorState"}


class AccelerateTyping:
    """Which expressions of one file are accelerate process-state objects, typed by use: built by accelerate's
    constructors, returned by a checked function that builds one, bound so (every binding of a name in the file,
    every argument the callers found pass for a parameter of that name, or an annotation naming the class),
    stored so on `self`, or the HF Trainer's own `self.accelerator` in a Trainer subclass."""

    def __init__(self, analysis, src: "PythonSource") -> None:
        self.analysis = analysis
        self.project = analysis.project
        self.src = src
        self._memo: dict[str, bool] = {}

    def is_state(self, e: cst.BaseExpression, cls: Optional[str] = None, depth: int = 0) -> bool:
        if depth > 6:
            return False
        if isinstance(e, cst.Call):
            callee = self.src.facts.resolve_expr(e.func) or ""
            if callee.startswith("accelerate.") and callee.rsplit(".", 1)[-1] in _ACCELERATE_STATES:
                return True
            hit = self.project.function_for_callee(self.src, callee) if callee else None
            if hit is not None and hit[0] is self.src:
                info = self.src.facts.functions.get(hit[1])
                returns = [r.value for r in iter_returns(info.node.body) if r.value is not None] if info else []
                return bool(returns) and all(self.is_state(v, cls, depth + 1) for v in returns)
            return False
        if isinstance(e, cst.Name):
            return self._name(e.value, depth)
        if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
            key = "self." + e.attr.value
            if key not in self._memo:
                self._memo[key] = False
                values = [node.value for node in self._assigns for t in node.targets
                          if isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                          and t.target.value.value == "self" and t.target.attr.value == e.attr.value]
                self._memo[key] = bool(values) and all(self.is_state(v, cls, depth + 1) for v in values)
            if self._memo[key]:
                return True
            # transformers' Trainer builds `self.accelerator = Accelerator(...)` itself
            return e.attr.value == "accelerator" and self.analysis.is_hf_trainer_class(self.src, cls)
        return False

    def _name(self, name: str, depth: int) -> bool:
        if name in self._memo:
            return self._memo[name]
        self._memo[name] = True         # assumed while its bindings are looked at (a cycle adds nothing)
        values = [node.value for node in self._assigns for t in node.targets
                  if isinstance(t.target, cst.Name) and t.target.value == name]
        values = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
        ok = all(self.is_state(v, None, depth + 1) for v in values)
        params = [info for info in self.src.facts.functions.values() if name in info.params]
        for info in params:
            if not ok:
                break
            ok = self._param(info, name, depth)
        ok = ok and bool(values or params)
        self._memo[name] = ok
        return ok

    def _param(self, info, name: str, depth: int) -> bool:
        """A parameter: annotated with an accelerate state class, or passed one by every caller found."""
        node = next((p for p in [*info.node.params.params, *info.node.params.kwonly_params]
                     if p.name.value == name), None)
        if node is not None and node.annotation is not None:
            ann = self.src.facts.resolve_expr(node.annotation.annotation) or ""
            return ann.rsplit(".", 1)[-1] in _ACCELERATE_STATES
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
        at = params.index(name) if name in params else None
        callers = 0
        for other in self.analysis._files_calling_function(self.src, info):
            typing = accelerate_typing(self.analysis, other)
            for call in other.facts.calls:
                if call.attr != info.name:
                    continue
                caller = other.facts.functions.get(call.scope)
                cls = caller.class_name if caller else None
                hit = self.analysis.function_info(self.analysis.call_source(other, call.callee, cls, scope=call.scope))
                if hit is None or hit[1] is not info:
                    continue
                arg = next((a.value for a in call.node.args if a.keyword is not None and a.keyword.value == name),
                           None)
                positional = [a for a in call.node.args if a.keyword is None and not a.star]
                if arg is None and at is not None and at < len(positional):
                    arg = positional[at].value
                if arg is None:
                    continue        # left at its default: not an object of the caller's
                callers += 1
                if not typing.is_state(arg, cls, depth + 1):
                    return False
        return callers > 0

    @property
    def _assigns(self) -> list[cst.Assign]:
        if "_assign_list" not in self.__dict__:
            self.__dict__["_assign_list"] = list(iter_assigns(self.src.module))
        return self.__dict__["_assign_list"]


def accelerate_typing(analysis, src: "PythonSource") -> AccelerateTyping:
    """The file's `AccelerateTyping`, one per analysis (memoised)."""
    memo = analysis.__dict__.setdefault("_accelerate_typing", {})
    if id(src) not in memo:
        memo[id(src)] = AccelerateTyping(analysis, src)
    return memo[id(src)]
