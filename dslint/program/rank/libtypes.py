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
