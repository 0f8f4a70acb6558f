"""Addressed plans (issue 30, cause 4): a loop over a communication plan whose steps each name the rank they are for.

A transfer plan is a list every rank builds alike (a sender step and receiver steps per transfer, each holding the
group and the source rank); each rank walks it and acts on the steps addressed to it:

    for step in plan:
        if isinstance(step, RecvStep) and step.rank == dist.get_rank():
            if step.src != dist.get_rank():
                dist.broadcast(buf, src=step.src, group=step.group)
        if isinstance(step, SendStep) and step.rank == dist.get_rank():
            dist.broadcast(buf, src=step.rank, group=step.group)

Per step, the presence rule sees a broadcast that only the addressed rank reaches; the members of `step.group`
meet it at their own steps of the same plan. Whether they do is a question of the sides' *sequences*, not of their
presence: the sides addressed by the same field of the element (`step.rank == rank`) are balanced when they issue
the same rooted collectives in the same order on the same group taken from the element (`group=step.group`), one
side as the root (`src=` the addressing field: the rank itself sends) and the others receiving from another
field of the element (`src=step.src`). A receiver that is itself the source (`step.src == rank`) skips its
receive: its part of the broadcast is the sender side's. `drop_balanced_sides` drops the DSL101 findings at the
collectives of such sides whose guard is the addressing test or a test of the element's fields against the rank;
sides whose sequences differ (a metadata broadcast on the sender only, another group, two roots) stay reported.
"""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from dslint.program.statement_walks import code_of, contains, name_nodes

# rooted collectives and where their root rank is passed: (keyword, position)
_ROOTED = {"broadcast": ("src", 1), "broadcast_object_list": ("src", 1), "scatter": ("src", 2),
           "scatter_object_list": ("src", 3), "gather": ("dst", 2), "gather_object": ("dst", 2),
           "reduce": ("dst", 1)}


def _ordered(nodes: Sequence[cst.CSTNode], kind: type) -> list:
    """The nodes of `kind` inside `nodes` in source order (outer before inner), not entering nested functions,
    classes or lambdas."""
    out: list = []
    stack = list(reversed(nodes))
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, kind):
            out.append(n)
        stack.extend(reversed(n.children))
    return out


def _conjuncts(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _field_of(e: cst.BaseExpression, targets: set[str]) -> Optional[str]:
    """`step.rank` for a loop target `step`: the field's name; None otherwise."""
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value in targets:
        return e.attr.value
    return None


def _addressing(walk, test: cst.BaseExpression, targets: set[str]) -> Optional[str]:
    """The field of the loop element that a conjunct of `test` equates with the process's rank (`step.rank ==
    dist.get_rank()`): the step is addressed to this rank. None: no such conjunct."""
    for c in _conjuncts(test):
        if not isinstance(c, cst.Comparison) or len(c.comparisons) != 1 or \
                not isinstance(c.comparisons[0].operator, cst.Equal):
            continue
        for a, b in ((c.left, c.comparisons[0].comparator), (c.comparisons[0].comparator, c.left)):
            f = _field_of(a, targets)
            if f is None or _field_of(b, targets) is not None:
                continue
            origin = walk.eval(b)
            if origin is not None and origin.kind == "rank" and origin.axes is None:
                return f
    return None


def _root(call: cst.Call, op: str) -> Optional[cst.BaseExpression]:
    key, pos = _ROOTED[op]
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == key or arg.keyword is None and not arg.star and i == pos:
            return arg.value
    return None


def _group(call: cst.Call, op: str) -> Optional[cst.BaseExpression]:
    key, pos = _ROOTED[op]
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == "group" or \
                arg.keyword is None and not arg.star and i == pos + 1:
            return arg.value
    return None


def _side_tokens(walk, side: cst.If, targets: set[str], field: str) -> Optional[list[tuple[str, str, bool]]]:
    """(op, group code, is this rank the root?) of each collective the side issues, in source order; None when one
    is not a rooted explicit collective on a group taken from the loop element, or its root is unknown."""
    out = []
    for call in _ordered([side.body], cst.Call):
        site = walk.sites.classify(walk.src, call, walk.cls)
        if site is None:
            continue
        func = call.func
        op = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        if site.kind != "explicit" or op not in _ROOTED:
            return None
        group, root = _group(call, op), _root(call, op)
        if group is None or root is None or not any(n.value in targets for n in name_nodes(group)):
            return None
        root_field = _field_of(root, targets)
        if root_field is None:
            return None
        out.append((op, code_of(group, 200), root_field == field))
    return out


def _sides(loop: cst.For) -> list[cst.If]:
    """The `if` statements (without `else`) at the top of the loop's body, also inside its `with` blocks."""
    out: list[cst.If] = []
    todo: list[Sequence[cst.CSTNode]] = [loop.body.body]
    while todo:
        for stmt in todo.pop():
            if isinstance(stmt, cst.If) and stmt.orelse is None:
                out.append(stmt)
            elif isinstance(stmt, cst.With):
                todo.append(stmt.body.body)
    return out


def drop_balanced_sides(walk, body: Sequence[cst.CSTNode]) -> None:
    """Drop the DSL101 findings of `walk.found` at the collectives of balanced addressed sides (the module's
    docstring) in the loops of `body`."""
    hits = [(k, h) for k, h in walk.found.items() if h.code == "DSL101" and h.guard is not None
            and h.guard.kind == "cond"]
    if not hits:
        return
    for loop in _ordered(body, cst.For):
        targets = {n.value for n in name_nodes(loop.target)}
        sides = []
        for side in _sides(loop):
            field = _addressing(walk, side.test, targets)
            if field is not None:
                sides.append((side, field))
        if len(sides) < 2 or len({f for _, f in sides}) != 1:
            continue
        field = sides[0][1]
        tokens = [_side_tokens(walk, side, targets, field) for side, _ in sides]
        if any(t is None or not t for t in tokens):
            continue
        if len({tuple((op, g) for op, g, _ in t) for t in tokens}) != 1:
            continue                    # the sides issue different sequences: the presence rule's findings stand
        roles = [{own for _, _, own in t} for t in tokens]
        if any(len(r) != 1 for r in roles) or sum(r == {True} for r in roles) != 1:
            continue                    # one sending side, the others receiving from another field
        for key, h in hits:
            side = next((s for s, _ in sides if contains(s.body, h.at)), None)
            if side is None:
                continue
            test = h.guard.node
            if test is side.test or contains(side.body, test) and _source_test(walk, test, targets):
                walk.found.pop(key, None)


def _source_test(walk, test: cst.BaseExpression, targets: set[str]) -> bool:
    """`step.src == dist.get_rank()`, `step.rank != step.src`: an (in)equality of the element's fields and the
    rank -- inside a receiving side, whether this rank is the transfer's source (then its part is the sending
    side's)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
            not isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
        return False
    fields = 0
    for e in (test.left, test.comparisons[0].comparator):
        if _field_of(e, targets) is not None:
            fields += 1
            continue
        origin = walk.eval(e)
        if origin is None or origin.kind != "rank" or origin.axes is not None:
            return False
    return fields >= 1
