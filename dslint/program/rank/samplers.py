"""Which constructor calls build a distributed sampler (`RankTaint.distributed_sampler`): a sampler whose items
are this rank's share of the dataset, selected by the rank (and replica count) it is handed or reads.

Decided from what the class is and does, never from how the project spells it:

- a library class (not among the checked files) by the library's own API name: torch's `DistributedSampler`
  (`torch.utils.data.DistributedSampler`, `...distributed.DistributedSampler`) and the like of other libraries
  (`transformers`' `DistributedLengthGroupedSampler`, mmcv's `DistributedSampler`) -- a class's public name is
  its API meaning;
- a checked class by its hierarchy and its code: it derives (through checked classes, a few levels) from such a
  library distributed sampler, or it is an iterable (`__iter__` in the family, or a torch.utils.data sampler
  base) one of whose methods selects this rank's share by a position and a stride it was handed -- a slice's
  bounds and step, or a `range(...)`'s arguments, read two or more attributes together, at least one stored by
  `__init__` from its parameters, the others from its parameters too or by the library base's constructor
  (`batch[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]`, `indices[self.rank::self.num_replicas]`).
  Which rank that parameter receives is the caller's argument (`RankTaint._sampler_rank`); a class that selects by
  no handed values is a plain sampler, whatever its name (`batch[:self.batch_size]` reads one).

Limit: a checked class that shards by a rank it reads itself (`dist.get_rank()` in `__init__` with no
parameter) and stores in no attribute read by a selection is not recognised (its loader then varies on every
coordinate, as any loader does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional

import libcst as cst

from dslint.program.facts import dotted_name

if TYPE_CHECKING:
    from dslint.program.project_view import PythonSource

_DEPTH = 4


def library_distributed_sampler(resolved: Optional[str]) -> bool:
    """A library class's resolved name is a distributed sampler's (its public API name)."""
    last = (resolved or "").rsplit(".", 1)[-1]
    return "Distributed" in last and "Sampler" in last


def _torch_sampler_base(resolved: str) -> bool:
    return resolved.startswith("torch.utils.data.") and resolved.endswith("Sampler")


def distributed_sampler_class(analysis, src: "PythonSource", resolved: Optional[str]) -> Optional[bool]:
    """Whether the constructor `resolved` (as `FileFacts.resolve_expr` gives it in `src`) builds a distributed
    sampler: None when it names no checked class (the caller decides a library class by its API name), else
    decided by the class's hierarchy and code (module docstring). Memoised per class on the project view."""
    project = analysis.project
    found = project.class_for_callee(src, resolved)
    if found is None or found[0].outline is None:
        return None
    memo = project.memo("distributed-sampler-classes", dict)
    key = (id(found[0]), found[1])
    if key not in memo:
        memo[key] = False           # a cycle of bases reads False
        memo[key] = _decide(analysis, found[0], found[1])
    return memo[key]


def _decide(analysis, src: "PythonSource", cls: str) -> bool:
    project = analysis.project
    family = list(analysis._class_family(src, cls))
    iterable = False
    for where, owner in family:
        outline = where.outline.classes.get(owner) if where.outline is not None else None
        if outline is None:
            continue
        for base in outline.bases:
            if not base or project.class_for_callee(where, base) is not None:
                continue            # a checked base: in the family itself
            if library_distributed_sampler(base):
                return True
            iterable = iterable or _torch_sampler_base(base)
        iterable = iterable or "__iter__" in outline.methods
    if not iterable:
        return False
    handed: set[str] = set()
    stored: set[str] = set()
    methods: list[cst.FunctionDef] = []
    for where, owner in family:
        info = where.facts.classes.get(owner)
        if info is None:
            continue
        for name, method in info.methods.items():
            stored |= _attrs_stored(method.node)
            if name == "__init__":
                handed |= _attrs_from_params(method.node)
            else:
                methods.append(method.node)
    # what the library base's constructor stores from the arguments handed on to it (`super().__init__(sampler,
    # batch_size, drop_last)` -> `self.batch_size`): an attribute read here that no method of the family stores
    return bool(handed) and any(_selects_by(node, handed, stored) for node in methods)


def _params(node: cst.FunctionDef) -> set[str]:
    p = node.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    names.discard("self")
    return names


def _reads(expr: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(n, cst.Name) and n.value in names for n in _walk(expr))


def _walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def _self_attr(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _attrs_from_params(init: cst.FunctionDef) -> set[str]:
    """`self.<attr>` stored in `__init__` from an expression reading one of its parameters."""
    params = _params(init)
    out: set[str] = set()
    for n in _walk(init.body):
        if isinstance(n, cst.Assign) and _reads(n.value, params):
            for t in n.targets:
                targets = [el.value for el in t.target.elements] \
                    if isinstance(t.target, (cst.Tuple, cst.List)) else [t.target]
                out.update(a for a in map(_self_attr, targets) if a is not None)
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)) and n.value is not None and _reads(n.value, params):
            attr = _self_attr(n.target)
            if attr is not None:
                out.add(attr)
    return out


def _attrs_stored(method: cst.FunctionDef) -> set[str]:
    out: set[str] = set()
    for n in _walk(method.body):
        targets: list = []
        if isinstance(n, cst.Assign):
            for t in n.targets:
                targets += [el.value for el in t.target.elements] \
                    if isinstance(t.target, (cst.Tuple, cst.List)) else [t.target]
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            targets.append(n.target)
        out.update(a for a in map(_self_attr, targets) if a is not None)
    return out


def _attrs_read(expr: cst.CSTNode, attrs: set[str], derived: dict[str, frozenset],
                stored: frozenset = frozenset()) -> set[str]:
    out: set[str] = set()
    for n in _walk(expr):
        attr = _self_attr(n)
        if attr is not None and (attr in attrs or attr not in stored):
            out.add(attr)
        elif isinstance(n, cst.Name) and n.value in derived:
            out |= derived[n.value]
    return out


def _selects_by(method: cst.FunctionDef, attrs: set[str], stored: set[str]) -> bool:
    """The method selects items by a position and a stride it was handed: a slice's bounds and step, or a
    `range(start, stop, step)`'s arguments, read two or more of the handed attributes together (or locals
    computed from them, `start = self.rank * n // self.world_size`) -- this rank's share, where a plain batch
    sampler's `batch[:self.batch_size]` reads one."""
    derived: dict[str, frozenset] = {}
    nodes = list(_walk(method.body))
    for _ in range(2):      # locals computed from the attributes, or from such locals
        for n in nodes:
            if isinstance(n, cst.Assign):
                read = _attrs_read(n.value, attrs, derived, stored)
                if not read:
                    continue
                for t in n.targets:
                    targets = [el.value for el in t.target.elements] \
                        if isinstance(t.target, (cst.Tuple, cst.List)) else [t.target]
                    for x in targets:
                        if isinstance(x, cst.Name):
                            derived[x.value] = derived.get(x.value, frozenset()) | frozenset(read)
    for n in nodes:
        parts: list[cst.CSTNode] = []
        if isinstance(n, cst.Subscript):
            parts = [b for el in n.slice if isinstance(el.slice, cst.Slice)
                     for b in (el.slice.lower, el.slice.upper, el.slice.step) if b is not None]
        elif isinstance(n, cst.Call) and dotted_name(n.func) == "range" and len(n.args) >= 2:
            parts = [a.value for a in n.args]
        read: set[str] = set()
        for part in parts:
            read |= _attrs_read(part, attrs, derived, stored)
        if len(read) >= 2 and read & attrs:
            return True
    return False
