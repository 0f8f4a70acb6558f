"""Which sub-modules' forwards run on every call of a module's forward (issue 30 item 5, DSL303 from data flow).

DSL303 walks the forward of a class that holds `cls` (a container: `LLaMAModel` holding `LLaMAInnerModel` holding
`LLaMALayer`) for the names of `cls`'s attributes it spells. A container method that reaches into a sub-module's
attribute on some paths only (`for i, h in enumerate(prefix_h): layer.input_layernorm(h)`, building a cache from
an optional input) is an *extra* use when the container also runs `cls`'s own forward on every path and that
forward uses the attribute on every path: every rank then produces its gradient.

`used_on_every_call(project, facts, container, cls, attr)` answers that from data flow:
 - `cls.forward` uses `attr` on every path that returns (`ForwardPaths`, the walker DSL303 itself uses: uses
   under `torch.no_grad()` are none, paths ending in `raise` are not executions);
 - the container's forward uses, on every path that returns, a field whose value is built from a class that is
   `cls`, or a class that in turn does so (`self.layers = nn.ModuleList([Layer(...) for ...])`; a constructor is
   resolved through the file's definitions and imports, `ProjectView.class_for_callee`, never by its bare name).
Anything not shown -- a field filled by a later `append`, a class built elsewhere, too many paths -- answers
False, and the container's paths are judged as before.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.program.facts import dotted_name
from dslint.program.models.forward_paths import ForwardPaths, TooManyPaths
from dslint.program.models.modules import ModelFacts, ModuleClass
from dslint.sources.cstwalk import walk

MAX_HOLDING_DEPTH = 4


def used_on_every_call(project, facts: ModelFacts, container: ModuleClass, cls: ModuleClass, attr: str) -> bool:
    """Does every returning call of `container.forward` run the forward of a `cls` object held by one of its fields
    (through held sub-modules at any depth up to `MAX_HOLDING_DEPTH`), and does that forward use `attr` on every
    returning path?"""
    memo = project.memo("always-run:used", dict)
    key = (id(container), id(cls), attr)
    if key not in memo:
        memo[key] = _reaches(project, facts, container, cls, attr, MAX_HOLDING_DEPTH, frozenset())
    return memo[key]


def _own_every_path(project, cls: ModuleClass, attr: str) -> bool:
    memo = project.memo("always-run:own", dict)
    key = (id(cls), attr)
    if key not in memo:
        found = cls.find_method("forward")
        memo[key] = found is not None and attr in _every_path_uses(project, cls, found, frozenset({attr}))
    return memo[key]


def _every_path_uses(project, cls: ModuleClass, found, names: frozenset) -> frozenset:
    """The names of `names` that every returning path of `cls`'s forward uses."""
    try:
        paths = [p for p in ForwardPaths(cls, names, project).root(found[1].node) if not p.raised]
    except (TooManyPaths, RecursionError):
        return frozenset()
    if not paths:
        return frozenset()
    out = set(names)
    for p in paths:
        out &= p.uses
    return frozenset(out)


def _reaches(project, facts: ModelFacts, holder: ModuleClass, cls: ModuleClass, attr: str, depth: int,
             seen: frozenset) -> bool:
    """Does every returning call of `holder.forward` run the forward of a held object of `cls` (or of a subclass:
    its own forward then) that uses `attr` on every returning path?"""
    if depth <= 0 or id(holder) in seen:
        return False
    found = holder.find_method("forward")
    if found is None:
        return False
    seen = seen | {id(holder)}
    built = _built_classes(project, facts, holder)
    if not built:
        return False
    always = _every_path_uses(project, holder, found, frozenset(built))
    for name in sorted(always):
        for held in built[name]:
            if cls in held.mro():
                if _own_every_path(project, held, attr):
                    return True
            elif _reaches(project, facts, held, cls, attr, depth - 1, seen):
                return True
    return False


def _built_classes(project, facts: ModelFacts, holder: ModuleClass) -> dict[str, list[ModuleClass]]:
    """Field name -> the run's module classes constructed in the value assigned to it (`self.x = X(...)`,
    `self.layers = nn.ModuleList([Layer(c) for _ in range(n)])`), resolved by the file's definitions and imports."""
    memo = project.memo("always-run:built", dict)
    if id(holder) in memo:
        return memo[id(holder)]
    out: dict[str, list[ModuleClass]] = {}
    for owner in holder.mro():
        for name, attr in owner.attrs.items():
            if attr.kind != "module" or name in out:
                continue
            try:
                stmt = attr.statement
            except (LookupError, KeyError):
                continue
            classes = [c for c in (_class_of(project, facts, owner, call) for call in _calls(stmt)) if c is not None]
            if classes:
                out[name] = list(dict.fromkeys(classes))
    memo[id(holder)] = out
    return out


def _class_of(project, facts: ModelFacts, owner: ModuleClass, call: cst.Call) -> Optional[ModuleClass]:
    outline = owner.src.outline
    dotted = dotted_name(call.func)
    if outline is None or not dotted:
        return None
    found = project.class_for_callee(owner.src, outline.resolve(dotted))
    if found is None:
        return None
    src, qualname = found
    for c in facts.by_name.get(qualname.rsplit(".", 1)[-1], ()):
        if c.src is src and c.qualname == qualname:
            return c
    return None


def _calls(stmt: cst.CSTNode) -> list[cst.Call]:
    if isinstance(stmt, cst.BaseCompoundStatement):       # `self.x = ...` itself, not a block holding it
        return []
    return [n for n in walk(stmt) if isinstance(n, cst.Call)]
