"""Constructions guarded by a keyword switch that nothing in the run ever sets (issue 30, argument-never-passed).

A model file may build a DeepSpeed `MoE` layer only when its constructor's `**kwargs` carry a switch
(`use_ds_moe = "use_ds_moe"` ... `self.use_ds = USE_DS in kwargs and kwargs[USE_DS]` ... `if self.use_ds:
self.mlp = MoE(...)`, else a local block). When no file of the run hands that key over -- no call passes it as
a keyword, no dict or string spells it, no other file names the constant holding it -- every construction
leaves the switch unset: the branch never runs, and the layer is no evidence that the model has MoE layers.

`unset_switch(project, src, line)` decides it for the statement at `line` of `src`, from the `if` tests enclosing
it in its function. A test is never true when it is (through `and`, `not` of an `or`, a parenthesised value):

* a read of an unset key on the function's `**` parameter: `kwargs[K]`, `kwargs.get(K)` (a falsy or no default),
  `K in kwargs`;
* `self.a` where every assignment of `self.a` in the class is such a value (or a falsy literal), and no other
  file assigns an attribute of that name;
* a falsy literal.

A key K (a string literal, or a module constant bound once to one) is unset when, across the run's Python,
shell and config files, K appears only as that constant's value or in such reads, and the constant (if any) is
named only in such reads of its own file. Limits: a key assembled from pieces, or handed by code outside the
checked files (a user of a published library), is not seen; anything else keeps the layer.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Optional

from dslint.sources import PythonSource

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView

_FALSY = (False, None, 0, "", ())


def unset_switch(project: "ProjectView", src: PythonSource, line: int) -> Optional[str]:
    """The switch key (as the code spells it) whose being unset keeps the statement at `line` from running,
    or None when none is found (module docstring)."""
    tree = _tree(src)
    if tree is None:
        return None
    cls, fn = _enclosing(tree, line)
    if fn is None:
        return None
    for test, when in _enclosing_tests(fn.body, line):
        if when:
            key = _never_true(project, src, tree, cls, fn, test)
            if key is not None:
                return key
    return None


def _tree(src: PythonSource) -> Optional[ast.Module]:
    tree = src.__dict__.get("_unset_switch_tree")
    if tree is None:
        try:
            tree = ast.parse(src.text)
        except (SyntaxError, ValueError):
            tree = False
        src.__dict__["_unset_switch_tree"] = tree
    return tree or None


def _spans(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _enclosing(tree: ast.Module, line: int):
    """(class, function) innermost around `line` (class None for a function outside a class)."""
    cls = fn = None
    body = tree.body
    while True:
        nxt = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                    and _spans(n, line)), None)
        if nxt is None:
            return cls, fn
        if isinstance(nxt, ast.ClassDef):
            cls, fn = nxt, None
        else:
            fn = nxt
            return cls, fn
        body = nxt.body


def _enclosing_tests(body: list, line: int) -> list[tuple[ast.expr, bool]]:
    """(test, truth under which `line` runs) of the `if` statements of `body` enclosing `line`, outermost first."""
    for stmt in body:
        if not isinstance(stmt, ast.stmt) or not _spans(stmt, line):
            continue
        if isinstance(stmt, ast.If):
            in_body = any(_spans(s, line) for s in stmt.body)
            in_else = any(_spans(s, line) for s in stmt.orelse)
            if not (in_body or in_else):
                return []
            return [(stmt.test, in_body), *_enclosing_tests(stmt.body if in_body else stmt.orelse, line)]
        for name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner:
                if name == "handlers":
                    for h in inner:
                        if _spans(h, line):
                            return _enclosing_tests(h.body, line)
                    continue
                found = _enclosing_tests(inner, line)
                if found:
                    return found
        return []
    return []


def _never_true(project, src, tree, cls, fn, test: ast.expr, depth: int = 0) -> Optional[str]:
    """The unset key that keeps `test` (in `fn`) from ever being true, or None."""
    if depth > 4:
        return None
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for part in test.values:
            found = _never_true(project, src, tree, cls, fn, part, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        keys = [_never_true(project, src, tree, cls, fn, part, depth + 1) for part in test.values]
        return keys[0] if all(k is not None for k in keys) else None
    key = _unset_read(project, src, tree, fn, test)
    if key is not None:
        return key
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self" \
            and cls is not None:
        return _unset_field(project, src, tree, cls, test.attr, depth)
    return None


def _kwargs_name(fn) -> Optional[str]:
    return fn.args.kwarg.arg if fn is not None and fn.args.kwarg is not None else None


def _key_of(tree: ast.Module, node: ast.expr) -> Optional[tuple[str, Optional[str]]]:
    """(key, constant name or None) of a string literal or of a module constant bound once to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, None
    if isinstance(node, ast.Name):
        values = [stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets)]
        if len(values) == 1 and isinstance(values[0], ast.Constant) and isinstance(values[0].value, str):
            return values[0].value, node.id
    return None


def _read_key(tree: ast.Module, fn, node: ast.expr) -> Optional[tuple[str, Optional[str]]]:
    """The key a read of the `**` parameter of `fn` tests (`kwargs[K]`, `kwargs.get(K[, falsy])`, `K in
    kwargs`), or None."""
    kw = _kwargs_name(fn)
    if kw is None:
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == kw:
        return _key_of(tree, node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop") \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == kw and node.args \
            and not node.keywords and len(node.args) <= 2:
        if len(node.args) == 2 and not (isinstance(node.args[1], ast.Constant) and node.args[1].value in _FALSY):
            return None
        return _key_of(tree, node.args[0])
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In) \
            and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id == kw:
        return _key_of(tree, node.left)
    return None


def _unset_read(project, src, tree, fn, node: ast.expr) -> Optional[str]:
    found = _read_key(tree, fn, node)
    if found is None:
        return None
    key, const = found
    return (const or repr(key)) if _key_unset(project, src, tree, key, const) else None


def _unset_field(project, src, tree, cls: ast.ClassDef, attr: str, depth: int) -> Optional[str]:
    """The unset key that keeps `self.attr` false: every assignment of an attribute named `attr` in the file is
    `self.attr = v` in a method, `v` never true there (a read of an unset key, or a falsy literal) -- the class's
    own, and those of any other class of the file (a subclass may set it) --, at least one in `cls`; no
    `setattr`, and no other file assigns an attribute of that name. None otherwise."""
    key = None
    in_cls = False
    for owner in ast.walk(tree):
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "setattr":
            return None
        if not isinstance(owner, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = owner.targets if isinstance(owner, ast.Assign) else [owner.target]
        if not any(isinstance(e, ast.Attribute) and e.attr == attr for t in targets for e in ast.walk(t)):
            continue
        if not (isinstance(owner, (ast.Assign, ast.AnnAssign)) and owner.value is not None and len(targets) == 1
                and isinstance(targets[0], ast.Attribute) and isinstance(targets[0].value, ast.Name)
                and targets[0].value.id == "self"):
            return None
        method = _method_holding(tree, owner)
        if method is None:
            return None
        value = owner.value
        if isinstance(value, ast.Constant) and value.value in _FALSY:
            continue
        found = _never_true(project, src, tree, None, method, value, depth + 1)
        if found is None:
            return None
        key = key or found
        in_cls = in_cls or _spans_node(cls, owner)
    if key is None or not in_cls:
        return None
    # no other file sets an attribute of that name (`model.layer.use_ds = True`, `setattr(m, "use_ds", ...)`)
    assign = re.compile(r"\.%s\s*=[^=]|[\"']%s[\"']" % (re.escape(attr), re.escape(attr)))
    for other in project.mentioning(attr):
        if other is not src and assign.search(other.text):
            return None
    return key


def _method_holding(tree: ast.Module, node: ast.AST):
    """The function directly inside a class whose body holds `node` (None: elsewhere)."""
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and _spans_node(cls, node):
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _spans_node(fn, node):
                    return fn
    return None


def _spans_node(outer: ast.AST, node: ast.AST) -> bool:
    """Does `node` lie inside `outer` (by lines)?"""
    line = getattr(node, "lineno", None)
    return line is not None and outer.lineno <= line <= (getattr(node, "end_lineno", None) or line) \
        <= (outer.end_lineno or outer.lineno)


def _key_unset(project, src: PythonSource, tree: ast.Module, key: str, const: Optional[str]) -> bool:
    """Does nothing of the run hand `key` over (module docstring)?"""
    memo = src.__dict__.setdefault("_unset_keys", {})
    if (key, const) in memo:
        return memo[(key, const)]
    memo[(key, const)] = result = _decide_key_unset(project, src, tree, key, const)
    return result


def _decide_key_unset(project, src: PythonSource, tree: ast.Module, key: str, const: Optional[str]) -> bool:
    if not key:
        return False
    for other in getattr(project, "sources", ()):
        if isinstance(other, PythonSource) or other is src:
            continue
        if key in (getattr(other, "text", "") or ""):
            return False                      # a launch line, a config, a JSON of keyword arguments spells it
    words = [key] + ([const] if const else [])
    for other in project.mentioning(*words):
        if other is src:
            continue
        return False                          # another file spells the key or imports the constant
    reads: set[int] = set()
    binding: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                found = _read_key(tree, node, inner) if isinstance(inner, (ast.Subscript, ast.Call,
                                                                             ast.Compare)) else None
                if found is not None and found == (key, const):
                    part = inner.slice if isinstance(inner, ast.Subscript) else \
                        inner.args[0] if isinstance(inner, ast.Call) else inner.left
                    reads.add(id(part))
                    if isinstance(inner, ast.Subscript) and not isinstance(inner.ctx, ast.Load):
                        return False          # `kwargs[K] = True`: set here
        if const and isinstance(node, ast.Assign) and node in tree.body and any(
                isinstance(t, ast.Name) and t.id == const for t in node.targets):
            binding.add(id(node.value))
            binding.update(id(t) for t in node.targets)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == key and id(node) not in reads | binding:
            return False                      # a dict key, a keyword's string, another use of the value
        if isinstance(node, ast.keyword) and node.arg == key:
            return False                      # `Block(..., use_ds=True)`
        if const and isinstance(node, ast.Name) and node.id == const and id(node) not in reads | binding:
            return False                      # the constant handed somewhere else
    return bool(reads)
