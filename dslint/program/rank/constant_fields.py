"""Fields that hold one value on every object (issue 30, cause 3): `constant_field`.

A rank-dependent test picks *which* object a rank works on (`unwrapped_model = model[0]` on the first pipeline
stage, `model[-1]` on the last); a field read from it (`unwrapped_model.share_word_embeddings`) varies with that
choice only if the objects may hold different values there. When every store of the field in the checked files
is in a constructor (`__init__`) and stores either a literal or a constructor parameter whose literal default
no call found in the checked files overrides, and all those literals are one value, every object holds that
value: which object a rank picks does not change what it reads.

The stores are those of an attribute of that name on any object of the checked files (a superset: the objects'
classes are not known where the field is read); a field set another way (`setattr` by that name, or by a name
that is no literal in a file that stores the field itself -- the config-class pattern `self.f = True` then
`setattr(self, k, v)` for the keyword arguments --, `+=`, a store outside an `__init__`, a starred or
keyword-splat construction) is not one. Not seen: a `setattr` by a computed name in another file on an object
of the class.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import dotted_name
from dslint.program.rank.nullness import _store_targets, derived_classes
from dslint.program.statement_walks import iter_assigns, own_nodes
from dslint.sources.literals import UNKNOWN, literal_value

_OTHER_STORES = re.compile(r"\.([A-Za-z_]\w*)\s*(?:(?:[-+*/%&|^@]|//|\*\*|<<|>>)=|:[^=\n]*=)")

if TYPE_CHECKING:
    from dslint.sources import PythonSource

def constant_field(program, attr: str) -> bool:
    """Does every object hold the same value in its field `attr` (see the module's docstring)? Memoised."""
    memo = program.__dict__.setdefault("_constant_fields", {})
    if attr not in memo:
        memo[attr] = False
        memo[attr] = _decide(program, attr)
    return memo[attr]


def _stores_index(program) -> dict:
    """Every store of an attribute in the checked files, once per program: attribute name → what each store
    holds (`_describe`); a name some file may set by `setattr` maps to None."""
    memo = program.__dict__
    if "_attribute_stores" in memo:
        return memo["_attribute_stores"]
    index: dict = {}
    by_name: set[str] = set()
    for src in program.project.python:
        if src.outline is None or src.module is None:
            continue
        stores, named = _file_stores(src)
        for attr, found in stores.items():
            index.setdefault(attr, []).extend(found)
        by_name |= named
    for name in by_name:
        index[name] = None
    memo["_attribute_stores"] = index
    return index


def _file_stores(src: "PythonSource") -> tuple[dict, set]:
    """One file's attribute stores (attribute → [`_describe` of each]) and the names its `setattr` calls may
    set: a fact of the file alone (plain values), kept on the source for every unit's view."""
    facts = src.__dict__
    if "_attribute_stores" in facts:
        return facts["_attribute_stores"]
    owner: dict[int, object] = {}
    for info in src.facts.functions.values():
        if info.name == "__init__" and info.class_name is not None:
            for node in own_nodes(info.node):
                if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                    owner[id(node)] = info
    stores: dict = {}
    for node in iter_assigns(src.module):       # memoised, shared with the other analyses of the file
        for t in _store_targets(node):
            if isinstance(t, cst.Attribute):
                stores.setdefault(t.attr.value, []).append(_describe(node, t.attr.value, owner.get(id(node))))
    # `x.f += 1`, `x.f: int = 0`: set another way (found on the text, a superset: a match in a string or a
    # comment only makes the field not constant)
    for m in _OTHER_STORES.finditer(src.text):
        stores.setdefault(m.group(1), []).append(None)
    named: set[str] = set()
    if "setattr" in src.text:
        for call in src.facts.calls:
            func = call.node.func
            if isinstance(func, cst.Name) and func.value == "setattr" and len(call.node.args) >= 2:
                name = literal_value(call.node.args[1].value)
                # a name that is no literal (`for k, v in kwargs.items(): setattr(self, k, v)`): any field
                # the file itself stores may be overridden so
                named.update([name] if isinstance(name, str) else stores)
    facts["_attribute_stores"] = (stores, named)
    return stores, named


def _describe(node: cst.CSTNode, attr: str, info) -> Optional[tuple]:
    """What a store of `attr` holds on every object: ("literal", value) for `self.f = <literal>` in an
    `__init__`, ("param", default, class, parameter, its index after `self`) for `self.f = <parameter with a
    literal default>` there; None for any other store (outside a constructor, `+=`, another object's field, a
    computed value)."""
    if info is None or not isinstance(node, cst.Assign) or len(node.targets) != 1 or \
            dotted_name(node.targets[0].target) != f"self.{attr}":
        return None
    declared = {p.name.value: (i, p.default) for i, p in enumerate(
        [*info.node.params.params, *info.node.params.kwonly_params][1:])}
    value = node.value
    if isinstance(value, cst.Name) and value.value in declared:
        at, default = declared[value.value]
        held = literal_value(default) if default is not None else UNKNOWN
        if held is UNKNOWN or isinstance(held, (list, dict, set)):
            return None
        return "param", _key(held), info.class_name, value.value, at
    held = literal_value(value)
    if held is UNKNOWN or isinstance(held, (list, dict, set)):
        return None
    return "literal", _key(held)


def _decide(program, attr: str) -> bool:
    stores = _stores_index(program).get(attr)
    if not stores or any(d is None for d in stores):
        return False
    if len({d[1] for d in stores}) != 1:
        return False
    return all(not _overridden(program, d[2], d[3], d[4]) for d in stores if d[0] == "param")


def _key(value):
    return (type(value).__name__, value)


def _overridden(program, cls: str, param: str, at: int) -> bool:
    """May a call found in the checked files pass the constructor parameter `param` of class `cls`: a keyword of
    that name, enough positional arguments, or a starred argument -- in a construction of `cls` or of a class
    derived from it that has no constructor of its own, or in a constructor call (`super().__init__(...)`,
    `Base.__init__(self, ...)`) of a class derived from `cls`."""
    derived = derived_classes(program, cls)
    constructing = {cls, *(name for name, own in derived.items() if not own)}
    for src in program.project.python:
        if src.outline is None or not any(name in src.text for name in (cls, *derived)):
            continue
        for call in src.facts.calls:
            last = call.attr
            caller = src.facts.functions.get(call.scope)
            owner = caller.class_name if caller is not None else None
            if last in constructing:
                skip = 0
            elif last == "__init__" and owner is not None and owner in derived:
                func = call.node.func
                explicit = isinstance(func, cst.Attribute) and not isinstance(func.value, cst.Call)
                skip = 1 if explicit else 0         # `Base.__init__(self, ...)` passes `self` positionally
            else:
                continue
            args = call.node.args
            if any(a.star for a in args):
                return True
            if any(a.keyword is not None and a.keyword.value == param for a in args):
                return True
            if len([a for a in args if a.keyword is None]) - skip > at:
                return True
    return False
