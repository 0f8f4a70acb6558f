"""Fields that hold one value on every object (issue 30, cause 3): `constant_field`.

A rank-dependent test picks *which* object a rank works on (`unwrapped_model = model[0]` on the first pipeline
stage, `model[-1]` on the last); a field read from it (`unwrapped_model.share_word_embeddings`) varies with that
choice only if the objects may hold different values there. When every store of the field in the checked files
is in a constructor (`__init__`) and stores one value that is the same on every object -- a literal, or a
*setting*: an expression the same on every rank (the rank-uniformity lattice) that reads no parameter, loop
variable or other per-construction local, only module-level names and locals bound once to such an expression
(`args = get_args()` then `not args.untie_embeddings`) -- or a constructor parameter whose default and every
value a call found in the checked files passes (a construction of the class or of a derived class without its
own constructor, a `super().__init__(...)` / `Base.__init__(self, ...)` of a derived class) are such values, and
all those values are one, every object holds that value: which object a rank picks does not change what it
reads. Values differing per class (a subclass passing `False` where the base defaults to `True`) or per
construction (`share=(i == 0)` in a loop) leave the field varying with the choice.

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
from dslint.program.rank.nullness import _store_targets, derived_class_bases
from dslint.program.statement_walks import MANY as _MANY
from dslint.program.statement_walks import iter_assigns, own_nodes
from dslint.program.statement_walks import local_bindings as _local_bindings
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
                found = _describe(node, t.attr.value, owner.get(id(node)))
                stores.setdefault(t.attr.value, []).append(found + (src,) if found and found[0] == "expr" else found)
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
    `__init__`, ("expr", expression, the constructor's qualified name) for another value there (a setting or
    not: `_setting_key` decides, with the view), ("param", default, class, parameter, its index after `self`)
    for `self.f = <parameter>` there, the default a value key, `_REQUIRED` for a parameter without one, None for
    a default that is no literal; None for any other store (outside a constructor, `+=`, another object's field,
    a computed value)."""
    if info is None or not isinstance(node, cst.Assign) or len(node.targets) != 1 or \
            dotted_name(node.targets[0].target) != f"self.{attr}":
        return None
    declared = {p.name.value: (i, p.default) for i, p in enumerate(
        [*info.node.params.params, *info.node.params.kwonly_params][1:])}
    value = node.value
    if isinstance(value, cst.Name) and value.value in declared:
        at, default = declared[value.value]
        return "param", _REQUIRED if default is None else _literal_key(default), info.class_name, value.value, at
    held = _literal_key(value)
    if held is not None:
        return "literal", held
    return "expr", value, info.qualname


_REQUIRED = ("required",)


def _literal_key(value: cst.BaseExpression):
    held = literal_value(value)
    if held is UNKNOWN or isinstance(held, (list, dict, set)):
        return None
    return _key(held)


def _decide(program, attr: str) -> bool:
    stores = _stores_index(program).get(attr)
    if not stores or any(d is None for d in stores):
        return False
    values: set = set()
    for d in stores:
        if d[0] == "literal":
            values.add(d[1])
        elif d[0] == "expr":
            values.add(_setting_key(program, d[3], d[2], d[1]))
        else:
            passed = _passed(program, d[2], d[3], d[4])
            if passed is None or d[1] is None or d[1] is _REQUIRED and not passed:
                return False
            values.update(passed)
            if d[1] is not _REQUIRED:
                values.add(d[1])
        if None in values or len(values) > 1:
            return False
    return len(values) == 1


def _key(value):
    return (type(value).__name__, value)


def _setting_key(program, src: "PythonSource", scope: str, expr: cst.BaseExpression):
    """The value key of `expr` evaluated in `scope` of `src` when it is the same on every object and every rank
    (a literal, or a *setting*: `_setting_text`, each expression it reads -- `expr` and the value of each local it
    goes through -- uniform by the rank taint), else None."""
    held = _literal_key(expr)
    if held is not None:
        return held
    info = src.facts.functions.get(scope)
    read: list = []
    text = _setting_text(src, info, expr, _local_bindings(info), 0, read)
    if text is None:
        return None
    try:
        taint = program.taint(src)
        env = {**program.globals_for(src, info), **program.param_taint(src, info)} if info is not None else \
            program.module_env(src)
        cls = info.class_name if info is not None else None
        if any(taint.eval(e, env, cls) is not None for e in read):
            return None
    except Exception:
        return None
    return "setting", text


def _setting_text(src: "PythonSource", info, expr: cst.BaseExpression, local: dict, depth: int,
                  read: list) -> Optional[str]:
    """A text naming what `expr` computes when it reads only module-level names (by what they resolve to) and
    locals bound once to such an expression, through attributes, calls, literal subscripts and operators -- the
    same on every object the constructor builds; None when it reads a parameter, a loop variable or another
    local bound per construction, or is of another form. `read` collects `expr` and the values of the locals
    it goes through (what must be uniform)."""
    if depth > 4:
        return None
    if depth == 0 or isinstance(expr, cst.Call):
        read.append(expr)
    held = _literal_key(expr)
    if held is not None:
        return repr(held)

    def sub(e) -> Optional[str]:
        return _setting_text(src, info, e, local, depth + 1, read)

    if isinstance(expr, cst.Name):
        bound = local.get(expr.value)
        if bound is _MANY:
            return None
        if bound is not None:
            read.append(bound)
            return sub(bound)
        return src.facts.resolve(expr.value) or expr.value
    if isinstance(expr, cst.Attribute):
        base = sub(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    if isinstance(expr, cst.Call):
        parts = [sub(expr.func)]
        for a in expr.args:
            if a.star:
                return None
            inner = sub(a.value)
            parts.append(None if inner is None else (f"{a.keyword.value}={inner}" if a.keyword else inner))
        return None if None in parts else f"{parts[0]}({', '.join(parts[1:])})"
    if isinstance(expr, cst.UnaryOperation):
        inner = sub(expr.expression)
        return None if inner is None else f"{type(expr.operator).__name__}({inner})"
    if isinstance(expr, (cst.BooleanOperation, cst.BinaryOperation)):
        left, right = sub(expr.left), sub(expr.right)
        return None if left is None or right is None else f"{type(expr.operator).__name__}({left}, {right})"
    if isinstance(expr, cst.Comparison):
        parts = [sub(expr.left)] + [sub(c.comparator) for c in expr.comparisons]
        ops = [type(c.operator).__name__ for c in expr.comparisons]
        return None if None in parts else f"Compare({parts[0]}, {list(zip(ops, parts[1:]))})"
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        base, at = sub(expr.value), _literal_key(expr.slice[0].slice.value)
        return None if base is None or at is None else f"{base}[{at!r}]"
    return None


def _passed(program, cls: str, param: str, at: int) -> Optional[list]:
    """The value keys (`_setting_key`) of what the calls found in the checked files pass for the constructor
    parameter `param` of class `cls` -- a keyword of that name or the argument at its position, in a call that
    runs `cls.__init__`: a construction of `cls` or of a derived class whose nearest constructor is `cls`'s, or a
    constructor call of a derived class (`super().__init__(...)`, `Base.__init__(self, ...)`) that reaches it
    (`super()` in a class whose next constructor is another derived class's passes that one's parameters); None
    when one may pass it unseen (a starred argument) or passes a value not the same on every object."""
    family = derived_class_bases(program, cls)

    def constructor(name: Optional[str], depth: int = 0) -> Optional[str]:
        """The class whose `__init__` a call of class `name`'s constructor runs, within the family."""
        if name == cls:
            return cls
        if name not in family or depth > 20:
            return None
        own, bases = family[name]
        if own:
            return name
        return next((c for c in (constructor(b, depth + 1) for b in bases) if c is not None), None)

    out: list = []
    for src in program.project.python:
        if src.outline is None or not any(name in src.text for name in (cls, *family)):
            continue
        for call in src.facts.calls:
            func = call.node.func
            caller = src.facts.functions.get(call.scope)
            owner = caller.class_name if caller is not None else None
            if isinstance(func, cst.Attribute) and func.attr.value == "__init__":
                if isinstance(func.value, cst.Call):
                    # `super().__init__(...)` (no callee resolves): the next constructor after the owner's class
                    if owner not in family or \
                            next((c for c in map(constructor, family[owner][1]) if c is not None), None) != cls:
                        continue
                    skip = 0
                else:
                    # `Base.__init__(self, ...)`, which passes `self` positionally
                    base = dotted_name(func.value)
                    if owner not in family or base is None or constructor(base.rsplit(".", 1)[-1]) != cls:
                        continue
                    skip = 1
            elif call.attr is not None and constructor(call.attr) == cls:
                skip = 0
            else:
                continue
            args = call.node.args
            if any(a.star for a in args):
                return None
            given = next((a.value for a in args if a.keyword is not None and a.keyword.value == param), None)
            positional = [a for a in args if a.keyword is None][skip:]
            if given is None and len(positional) > at:
                given = positional[at].value
            if given is not None:
                out.append(_setting_key(program, src, call.scope, given))
                if out[-1] is None:
                    return None
    return out
