"""A saved record's size restored from what its saver cut off (issue 30): `restored_sizes`.

A checkpoint writer that drops alignment padding stores each shortened item beside the amount it cut:

    def _without_padding(self, groups):                       # the save
        lean = []
        for i, g in enumerate(groups):
            lean.append(g[:g.numel() - self.groups_padding[i]])
        return lean
    sd[GROUPS] = self._without_padding(self.fp32_groups)
    sd[PADDINGS] = self.groups_padding

and the loader reads its own rank's record back: `saved = current[GROUPS][i]`, `size = saved.numel() +
current[PADDINGS][i]` (DeepSpeed's ZeRO-1/2 `load_state_dict`). The padding alone is this rank's item -- it
differs per rank (only the last partition is padded) -- but the sum is the size of the item *before* the cut:
`len(x[:len(x) - p]) + p == len(x)`. So that sum is what the size of the record's item is in the lattice (a size
of this rank's item of same-structured records: uniform), not the padding's per-rank value.

The relation is read from the save, never assumed: `size + pad` (either order) at the load, where `size` is the
size (`.numel()`, `len(...)`, `.size(0)`, `.shape[0]`) of `R[K1][I]` -- inline or through a local bound once
to it -- and `pad` is `R[K2][I]` (the same record `R`, the same index `I`, keys `K1` != `K2` given by literal
or constant), holds when every store `D[K1] = V` in the file pairs `V` with a store `D[K2] = T` of the same
mapping in the same function, and `V` is a list whose item at position k is the k-th item of a sequence cut to
its size less `T[k]`: a comprehension or a list filled by `append` in a loop `for k, x in enumerate(xs)`
(`x[:stop]`, `x[0:stop]`, `x.narrow(0, 0, stop)`, with `stop` the size of `x` less `T[k]`, inline or through
a local bound once), directly or returned by a checked function of the file called there. A saver that stores
the items whole, or cut by another amount than the one it stores, leaves the sum varying.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.statement_walks import MANY, local_bindings, own_nodes

if TYPE_CHECKING:
    from dslint.sources import PythonSource

_CODE = cst.Module(body=[])
# A prefilter (a superset): the pad `R[K2][I]` is a subscript of a subscript, so the text holds a `]` followed by
# a `[` with at most whitespace, comments and line continuations between; and the relation is an addition.
_DOUBLE_SUBSCRIPT = re.compile(r"\](?:\s|\\|#[^\r\n]*[\r\n])*\[")    # each character taken one way only: linear


def _bindings(info) -> dict:
    """A function's locals bound once, plainly (`lean_length = g.numel() - pad[i]`): name → value."""
    return {k: v for k, v in local_bindings(info).items() if v is not MANY}


def _text(e: Optional[cst.CSTNode]) -> Optional[str]:
    return None if e is None else _CODE.code_for_node(e)


def restored_sizes(src: "PythonSource") -> dict[int, cst.BaseExpression]:
    """For each `size + pad` of the file that restores a saved item's size (see the module's docstring): the
    id of the addition → its size operand. Memoised on the file's facts."""
    memo = src.facts.__dict__.get("_restored_sizes")
    if memo is None:
        memo = {}
        try:
            if "+" in src.text and _DOUBLE_SUBSCRIPT.search(src.text):
                memo = _find(src)
        except Exception:       # a shape not foreseen: no relation, never a crash of the lattice
            memo = {}
        src.facts.__dict__["_restored_sizes"] = memo
    return memo


def _find(src: "PythonSource") -> dict[int, cst.BaseExpression]:
    out: dict[int, cst.BaseExpression] = {}
    savers: Optional[dict] = None
    for info in src.facts.functions.values():
        local = None
        for node in own_nodes(info.node):
            if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
                continue
            if local is None:
                local = _bindings(info)
            for size, pad in ((node.left, node.right), (node.right, node.left)):
                item = _sized(size, local)
                if item is None:
                    continue
                read = _record_read(item)
                other = _record_read(pad)
                if read is None or other is None or read[0] != other[0] or read[2] != other[2] or \
                        read[1] == other[1]:
                    continue
                if savers is None:
                    savers = _savers(src)
                if _saved_cut_by(src.facts, savers, read[1], other[1]):
                    out[id(node)] = size
                    break
    return out


def _sized(e: cst.BaseExpression, local: dict) -> Optional[cst.BaseExpression]:
    """The value whose size `e` is (`x.numel()`, `len(x)`, `x.size(0)`, `x.shape[0]`), a local bound once
    replaced by its value; None otherwise."""
    inner = _size_of(e)
    if isinstance(inner, cst.Name) and inner.value in local:
        return local[inner.value]
    return inner


def _size_of(e: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if isinstance(e, cst.Call):
        func = e.func
        if isinstance(func, cst.Name) and func.value == "len" and len(e.args) == 1:
            return e.args[0].value
        if isinstance(func, cst.Attribute) and func.attr.value == "numel" and not e.args:
            return func.value
        if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(e.args) == 1 and \
                isinstance(e.args[0].value, cst.Integer) and e.args[0].value.value == "0":
            return func.value
    if isinstance(e, cst.Subscript) and isinstance(e.value, cst.Attribute) and e.value.attr.value == "shape" and \
            len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and \
            isinstance(e.slice[0].slice.value, cst.Integer) and e.slice[0].slice.value.value == "0":
        return e.value.value
    return None


def _record_read(e: cst.BaseExpression) -> Optional[tuple[str, str, str]]:
    """`R[K][I]` → (text of R, text of the key K, text of the index I); K a string literal or a constant's
    name (a Name or an attribute path)."""
    if not (isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index)):
        return None
    inner = e.value
    if not (isinstance(inner, cst.Subscript) and len(inner.slice) == 1 and isinstance(inner.slice[0].slice, cst.Index)):
        return None
    key = inner.slice[0].slice.value
    if not isinstance(key, (cst.SimpleString, cst.Name, cst.Attribute)):
        return None
    return _text(inner.value), _text(key), _text(e.slice[0].slice.value)


def _savers(src: "PythonSource") -> dict[str, list]:
    """Every store `D[K] = V` of the file by the text of K: (the function's info, text of D, V, that function's
    stores of D by key text)."""
    out: dict[str, list] = {}
    for info in src.facts.functions.values():
        stores: dict[tuple[str, str], list] = {}
        for node in own_nodes(info.node):
            if not isinstance(node, cst.Assign):
                continue
            for t in node.targets:
                read = _store_key(t.target)
                if read is not None:
                    stores.setdefault(read, []).append(node.value)
        for (mapping, key), values in stores.items():
            for value in values:
                out.setdefault(key, []).append((info, mapping, value, stores))
    return out


def _store_key(target: cst.BaseExpression) -> Optional[tuple[str, str]]:
    if isinstance(target, cst.Subscript) and len(target.slice) == 1 and \
            isinstance(target.slice[0].slice, cst.Index) and \
            isinstance(target.slice[0].slice.value, (cst.SimpleString, cst.Name, cst.Attribute)):
        return _text(target.value), _text(target.slice[0].slice.value)
    return None


def _saved_cut_by(facts, savers: dict, key: str, pad_key: str) -> bool:
    """Does every store at `key` in the file hold a list of items each cut by the item of the list its function
    stores at `pad_key` in the same mapping?"""
    stores = savers.get(key)
    if not stores:
        return False
    for info, mapping, value, by_key in stores:
        pads = by_key.get((mapping, pad_key), [])
        if len(pads) != 1:
            return False
        if not _cut_list(facts, info, value, _text(pads[0]), _bindings(info), 0):
            return False
    return True


def _cut_list(facts, info, value: cst.BaseExpression, pad: str, local: dict, depth: int) -> bool:
    """Is `value` a list whose k-th item is the k-th item of a sequence cut to its size less `pad[k]`?"""
    if depth > 3:
        return False
    if isinstance(value, cst.Name) and value.value in local:
        return _cut_list(facts, info, local[value.value], pad, local, depth + 1)
    if isinstance(value, cst.ListComp) and value.for_in.inner_for_in is None and not value.for_in.ifs:
        index, item = _enumerated(value.for_in.target, value.for_in.iter)
        return index is not None and _cut_item(value.elt, item, index, pad, local)
    if isinstance(value, cst.Call):
        callee = _callee(facts, info.class_name, value)
        if callee is None:
            return False
        returns = [n.value for n in own_nodes(callee.node) if isinstance(n, cst.Return)]
        if len(returns) != 1 or not isinstance(returns[0], cst.Name):
            return False
        return _appended_cut(callee.node, returns[0].value, pad, _bindings(callee))
    return False


def _callee(facts, cls: Optional[str], call: cst.Call):
    """The checked function of the saver's file that `call` runs: `self.m(...)` of the saver's class, a plain
    `f(...)`."""
    f = call.func
    if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self" and cls:
        klass = facts.classes.get(cls)
        return klass.methods.get(f.attr.value) if klass is not None else None
    if isinstance(f, cst.Name):
        return facts.functions.get(f.value)
    return None


def _enumerated(target: cst.BaseExpression, it: cst.BaseExpression) -> tuple[Optional[str], Optional[str]]:
    """`for k, x in enumerate(xs)` → ("k", "x")."""
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" and \
            len(it.args) == 1 and isinstance(target, cst.Tuple) and len(target.elements) == 2 and \
            all(isinstance(el.value, cst.Name) for el in target.elements):
        return target.elements[0].value.value, target.elements[1].value.value
    return None, None


def _cut_item(elt: cst.BaseExpression, item: str, index: str, pad: str, local: dict) -> bool:
    """`elt` is `item` cut to its size less `pad[index]`: `x[:stop]`, `x[0:stop]`, `x.narrow(0, 0, stop)`."""
    stop = None
    if isinstance(elt, cst.Subscript) and isinstance(elt.value, cst.Name) and elt.value.value == item and \
            len(elt.slice) == 1 and isinstance(elt.slice[0].slice, cst.Slice):
        s = elt.slice[0].slice
        if s.step is None and (s.lower is None or (isinstance(s.lower, cst.Integer) and s.lower.value == "0")):
            stop = s.upper
    elif isinstance(elt, cst.Call) and isinstance(elt.func, cst.Attribute) and elt.func.attr.value == "narrow" and \
            isinstance(elt.func.value, cst.Name) and elt.func.value.value == item and len(elt.args) == 3 and \
            all(isinstance(a.value, cst.Integer) and a.value.value == "0" for a in elt.args[:2]):
        stop = elt.args[2].value
    if isinstance(stop, cst.Name) and stop.value in local:
        stop = local[stop.value]
    if not (isinstance(stop, cst.BinaryOperation) and isinstance(stop.operator, cst.Subtract)):
        return False
    sized = _size_of(stop.left)
    cut = stop.right
    return isinstance(sized, cst.Name) and sized.value == item and isinstance(cut, cst.Subscript) and \
        len(cut.slice) == 1 and isinstance(cut.slice[0].slice, cst.Index) and \
        _text(cut.value) == pad and _text(cut.slice[0].slice.value) == index


def _appended_cut(func: cst.FunctionDef, name: str, pad: str, local: dict) -> bool:
    """`name` starts as `[]` and is filled only by `name.append(<cut item>)` in one `for k, x in enumerate(xs)`."""
    if not (isinstance(local.get(name), cst.List) and not local[name].elements):
        return False
    calls = [n for n in own_nodes(func) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and isinstance(n.func.value, cst.Name) and n.func.value.value == name]
    mentions = [n for n in own_nodes(func) if isinstance(n, cst.Name) and n.value == name]
    if len(calls) != 1 or len(mentions) != 3:      # bound, filled once, returned: nothing else touches it
        return False
    call = calls[0]
    index = item = None
    for node in own_nodes(func):                    # the innermost `for` around the call (outer ones come first)
        if isinstance(node, cst.For) and any(n is call for n in own_nodes(node)):
            index, item = _enumerated(node.target, node.iter)
    return call.func.attr.value == "append" and index is not None and len(call.args) == 1 and \
        _cut_item(call.args[0].value, item, index, pad, local)
