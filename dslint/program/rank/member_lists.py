"""Member lists an object keeps beside the group it made of them (issue 30, rank-branch-uniform-over-reducing-group).

`self.group = dist.new_group(ranks=self.members)` while the object is built, then, in a method, `if self.rank not
in self.members: return` before a collective on `self.group` (dlrover's checkpoint saver and replica groups): the
test is the group's own membership test, read through the attribute the list lives in rather than a name bound in
the collective's function (`process_groups._membership_test` compares the list's code with the `new_group`
argument's). Every member of the group takes the same side of it, so it splits no member from another.

`field_member_list` decides that the field names such a group and says which list it was made of; the list and
the group must be what the object's construction left them:

- every store of the group field in the class (and its bases in the file) is `None` or a `new_group` of the same
  list expression `self.<list>` (a None is a group not made: a rank holding it has no such group, as
  `collective_hazards._group_creators` takes it; new_group is called by every rank or none, so the ranks do not
  hold different ones);
- every store of `self.<group>` and `self.<list>` there runs while the object is built -- in `__init__`, or in a
  method only such methods call through `self.` (up to three calls deep) -- and, in a method holding both, each
  store of the list comes before the group's `new_group`;
- nothing changes the list in place afterwards (`self.<list>.append(...)`, `self.<list>[i] = ...`, `+=`, `del`).

`constant_on_members` decides that a test takes one value on every member of the group: `x in L` / `x not in L`
with `x` the process's global rank and `L` the list's code, combined by `and`/`or`/`not` with operands that are
uniform (or decided by such a comparison: `L and rank not in L` is false on every member).

Limits: a None store is taken for "no group"; a field left None that stands for the whole world (dlrover's
saver group when the saving ranks are all ranks) is not compared with the test. Subclasses in other files that
store the fields are not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from dslint.program.facts import dotted_name

if TYPE_CHECKING:
    from dslint.sources import PythonSource

# methods of a list that change its items (`sort`/`reverse` keep who is in it)
_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear"})


def _ordered(node, nested: bool = False):
    """Every node under `node`, in source order, not inside nested functions, classes or lambdas (`nested`:
    those too)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not nested and n is not node and isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(n.children))


def _self_attr(e: cst.CSTNode) -> Optional[str]:
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
        return e.attr.value
    return None


def _class_methods(src: "PythonSource", cls: str) -> Optional[list]:
    """The methods of `cls` and of its bases defined in the same file (by their last name); None when the class
    is not found."""
    by_name = {info.name: info for info in src.facts.classes.values()}
    if cls not in by_name:
        return None
    out, seen, todo = [], set(), [cls]
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        info = by_name[name]
        out.extend(info.methods.values())
        todo.extend(b.rsplit(".", 1)[-1] for b in info.bases)
    return out


def _events(method) -> list:
    """(kind, attr, value) of the method's statements on `self.<attr>`, in source order: "store" (`=`, its
    value), "change" (`+=`, `del`, an item store, a mutating method call; any of them, or a store, in a function
    or class nested in the method, which may run at another time)."""
    out = _self_events(method.node)
    for n in _ordered(method.node):
        if n is not method.node and isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            out.extend(("change", name, None) for _, name, _ in _self_events(n, nested=True))
    return out


def _self_events(node, nested: bool = False) -> list:
    out = []
    for n in _ordered(node, nested):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                targets = t.target.elements if isinstance(t.target, (cst.Tuple, cst.List)) else [t.target]
                for target in targets:
                    target = target.value if isinstance(target, cst.Element) else target
                    if _self_attr(target):
                        out.append(("store", _self_attr(target), n.value if len(targets) == 1 else None))
                    elif isinstance(target, cst.Subscript) and _self_attr(target.value):
                        out.append(("change", _self_attr(target.value), None))
        elif isinstance(n, cst.AnnAssign) and n.value is not None and _self_attr(n.target):
            out.append(("store", _self_attr(n.target), n.value))
        elif isinstance(n, cst.AugAssign):
            target = n.target.value if isinstance(n.target, cst.Subscript) else n.target
            if _self_attr(target):
                out.append(("change", _self_attr(target), None))
        elif isinstance(n, cst.Del):
            for el in _ordered(n.target):
                if isinstance(el, cst.Subscript) and _self_attr(el.value) or _self_attr(el):
                    out.append(("change", _self_attr(el.value if isinstance(el, cst.Subscript) else el), None))
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _MUTATORS \
                and _self_attr(n.func.value):
            out.append(("change", _self_attr(n.func.value), None))
    return out


def _constructing(taint, src: "PythonSource", cls_methods: list, method, depth: int = 0) -> bool:
    """Does `method` run only while the object is built: `__init__`, or a method every call of which is
    `self.<method>(...)` in such a method of the class (three calls deep)?"""
    if method.name == "__init__":
        return True
    if depth >= 3:
        return False
    calls = taint.calls_of(src, method)
    if not calls:
        return False
    for other, call, caller in calls:
        func = call.func
        if other is not src or caller is None or caller not in cls_methods or not (
                isinstance(func, cst.Attribute) and _self_attr(func) == method.name) or \
                not _constructing(taint, src, cls_methods, caller, depth + 1):
            return False
    return True


def field_member_list(taint, src: "PythonSource", cls: str, attr: str) -> Optional[str]:
    """The code of the member list (`self.<list>`) the group field `self.<attr>` of class `cls` was made of
    (module docstring); None when the field is not such a group. Memoised on the source."""
    from dslint.program.process_groups import resolve_group
    memo = src.__dict__.setdefault("_field_member_lists", {})
    key = (cls, attr)
    if key in memo:
        return memo[key]
    memo[key] = None
    methods = _class_methods(src, cls)
    if not methods:
        return None
    events = {id(m): _events(m) for m in methods}
    members: Optional[str] = None
    for m in methods:
        for kind, name, value in events[id(m)]:
            if name != attr:
                continue
            if kind != "store" or value is None:
                return None
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            if not (isinstance(value, cst.Call) and dotted_name(value.func) is not None and
                    dotted_name(value.func).rsplit(".", 1)[-1] == "new_group"):
                return None
            ranks = resolve_group(src, value, m.node).ranks
            if ranks is None or (members is not None and ranks != members):
                return None
            members = ranks
    if members is None:
        return None
    first = cst.parse_expression(members)
    listed = _self_attr(first)
    if listed is None:
        return None
    for m in methods:
        touched = [(kind, name, value) for kind, name, value in events[id(m)] if name in (attr, listed)]
        if not touched:
            continue
        if any(kind == "change" for kind, _, _ in touched) or not _constructing(taint, src, methods, m):
            return None
        made = [i for i, (kind, name, value) in enumerate(touched) if name == attr and not (
            isinstance(value, cst.Name) and value.value == "None")]
        if made and any(name == listed and i > made[0] for i, (_, name, _) in enumerate(touched)):
            return None                 # the list stored again after the group was made of it
    if _touched_elsewhere(src, listed) or _touched_elsewhere(src, attr):
        return None
    memo[key] = members
    return members


def field_is_global_rank(taint, src: "PythonSource", cls: str, attr: str) -> bool:
    """Is `self.<attr>` of class `cls` this process's global rank whenever the object is built: every store of it
    in the class (and its bases in the file) is `dist.get_rank()` with no group, or an integer literal (the value
    before the process group is up: `self._rank = 0` in `__init__`, then `dist.get_rank()` in the set-up method
    it calls, which a single process skips), each in a method that runs while the object is built; nothing
    stores it through another object."""
    from dslint.program.process_groups import _GLOBAL_RANK_CALLS
    methods = _class_methods(src, cls)
    if not methods:
        return False
    ranked = False
    for m in methods:
        events = [(kind, value) for kind, name, value in _events(m) if name == attr]
        if not events:
            continue
        if not _constructing(taint, src, methods, m):
            return False
        for kind, value in events:
            if kind != "store" or value is None:
                return False
            if isinstance(value, cst.Integer):
                continue
            if not (isinstance(value, cst.Call) and not value.args and
                    src.facts.resolve_expr(value.func) in _GLOBAL_RANK_CALLS):
                return False
            ranked = True
    return ranked and not _touched_elsewhere(src, attr)


def _touched_elsewhere(src: "PythonSource", attr: str) -> bool:
    """Does the file store or change `<obj>.<attr>` through an object other than `self` (`engine.members = ...`,
    `engine.members.append(r)`)?"""
    for n in _ordered(src.module, nested=True):
        if isinstance(n, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
            target = n.target.value if isinstance(n.target, cst.Subscript) else n.target
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _MUTATORS:
            target = n.func.value
        else:
            continue
        if isinstance(target, cst.Attribute) and target.attr.value == attr and _self_attr(target) is None:
            return True
    return False


def constant_on_members(test: cst.BaseExpression, members: str, is_global_rank: Callable,
                        uniform: Callable) -> bool:
    """Does `test` take one value on every member of `new_group(<members>)` (module docstring)?"""
    return _value_on_members(test, members, is_global_rank, uniform) is not None


def _value_on_members(test, members, is_global_rank, uniform):
    """True/False: the test's value on every member; "same": a value that is the same on every rank; None: it
    may differ between members."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, (cst.In, cst.NotIn)) and \
            dotted_name(test.comparisons[0].comparator) is not None and \
            dotted_name(test.comparisons[0].comparator) == members and is_global_rank(test.left):
        return isinstance(test.comparisons[0].operator, cst.In)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _value_on_members(test.expression, members, is_global_rank, uniform)
        return (not inner) if isinstance(inner, bool) else inner
    if isinstance(test, cst.BooleanOperation):
        left = _value_on_members(test.left, members, is_global_rank, uniform)
        right = _value_on_members(test.right, members, is_global_rank, uniform)
        absorbing = isinstance(test.operator, cst.Or)     # `or`: True decides it; `and`: False
        if left is absorbing or right is absorbing:
            return absorbing
        if left is None or right is None:
            return None
        return "same"
    return "same" if uniform(test) else None
