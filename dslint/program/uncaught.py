"""Where an exception raised in a function goes: to the top of the program, or into a handler on the way.

A rank that raises under a rank test leaves the others waiting in the next collective only where something
keeps the job alive: a caller that catches the exception (and goes on without the collective), or a driver
it travels back to (a Ray actor method). An exception that no caller catches ends the raising process; the
launchers dslint reads -- torchrun and `accelerate launch` (torch's elastic agent), the deepspeed launcher
(`deepspeed.launcher.launch`), `mp.spawn` -- stop every other process of the node when one exits with an
error: a crash with the exception's traceback, not a hang (rule DSL103's docs).

`escapes_to_top(view, src, qualname)` follows the callers of a function through the run's Python files, on
CPython's trees, up to module-level code: the exception escapes when every call of the function (and of each
caller, in turn) stands outside every `try` statement with an `except` handler, and the function (each caller)
is used only by calls -- a function handed elsewhere by reference (a callback, a Ray `.remote` method, a
registry) or with no caller among the checked files (a library entry, a test) may be run by code that catches
what it raises: not decided, so the finding stays. Callers are found by name (`f(...)`, `x.f(...)`), an
over-approximation: a same-named call elsewhere can only add a caller that catches, never hide one (a file that
defines a module-level function of that name itself, importing neither it nor its module, uses its own); a use
of the name through an import from outside the checked files (`from torch.nn import init; init.zeros_(w)`,
`nn.init`) is that library's, not a reference to the function.

A function handed as an argument to a function of the checked files (`pretrain(datasets_provider, ...)`, the
Megatron style) is followed into it: the parameter that receives it (by position or keyword) must be only
called there, or handed on again the same way; each such call is a call of the function at that place, and the
callers of the receiving function are followed in turn. A bare-name callee is the caller's own module-level
function of that name, or the one its imports name, where found; otherwise every checked function so named.
A parameter stored, returned or used otherwise, a receiving function the checked files do not define, or an
argument that lands in `*args`/`**kwargs`, is not decided (the callback may run anywhere).
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from dslint.program.outline import parse_tree
from dslint.sources import PythonSource

_MAX_CALLERS = 64           # functions followed up the call graph before giving up (not decided)


def _tree(src: PythonSource) -> Optional[ast.Module]:
    tree = src.__dict__.get("_uncaught_tree")
    if tree is None:
        tree = src.__dict__["_uncaught_tree"] = parse_tree(src.text, src.path) or False
    return tree or None


_MAX_HANDOFFS = 16          # receiving functions followed for one name before giving up (not decided)


class _Handoff:
    """`name` handed as an argument to a call of `callee` (by position `index` or keyword `keyword`), through an
    attribute (`x.callee(f)`) or not."""
    __slots__ = ("callee", "attribute", "index", "keyword")

    def __init__(self, callee: str, attribute: bool, index: Optional[int], keyword: Optional[str]):
        self.callee, self.attribute, self.index, self.keyword = callee, attribute, index, keyword


def _handoff(call: ast.Call, name: str) -> Optional[_Handoff]:
    """How `call` receives the bare name `name` as one of its arguments; None where it does not, or where the
    place cannot be told (after a `*args` argument, inside a `**kwargs` one)."""
    func = call.func
    if isinstance(func, ast.Name):
        callee, attribute = func.id, False
    elif isinstance(func, ast.Attribute):
        callee, attribute = func.attr, True
    else:
        return None
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if isinstance(arg, ast.Name) and arg.id == name:
            return _Handoff(callee, attribute, i, None)
    for kw in call.keywords:
        if kw.arg is not None and isinstance(kw.value, ast.Name) and kw.value.id == name:
            return _Handoff(callee, attribute, None, kw.arg)
    return None


def _root(node: ast.AST) -> Optional[ast.Name]:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def _scan(nodes: list, name: str, scope: str, guarded: bool = False, foreign: Optional[set[str]] = None
          ) -> Optional[tuple[list[tuple[str, bool]], list[tuple[_Handoff, str]]]]:
    """The calls of `name` in `nodes` -- (qualified name of the function each is in, or "" at module level;
    whether a `try` with handlers around it in that function may catch what it raises) -- and the calls that
    receive `name` as an argument ((hand-off, scope)). None when the name is used otherwise than as the callee of
    a call, an argument of one, or in its own `def` (stored, returned, handed elsewhere by reference). `foreign`:
    the local names the file binds by importing a module or object from outside the checked files (`from
    torch.nn import init`, `import torch.nn as nn`): `init.zeros_` or `nn.init` is that library's, never the
    function followed."""
    foreign = foreign or set()
    out: list[tuple[str, bool]] = []
    handed: list[tuple[_Handoff, str]] = []
    bad = False

    def visit(node: ast.AST, scope: str, guarded: bool) -> None:
        nonlocal bad
        if bad:
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for dec in node.decorator_list:
                visit(dec, scope, guarded)
            if not isinstance(node, ast.ClassDef):
                for default in [*node.args.defaults, *node.args.kw_defaults]:
                    if default is not None:
                        visit(default, scope, guarded)
            inner = f"{scope}.{node.name}" if scope else node.name
            for child in node.body:
                visit(child, inner, False)          # a caller's `try` guards the call, not the body
            return
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) and node.handlers:
            for child in node.body:
                visit(child, scope, True)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, scope, guarded)
            return
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == name or isinstance(func, ast.Attribute) and func.attr == name:
                out.append((scope, guarded))
                if isinstance(func, ast.Attribute):
                    visit(func.value, scope, guarded)
                for child in [*node.args, *node.keywords]:
                    visit(child, scope, guarded)
                return
            given = _handoff(node, name)
            if given is not None:
                handed.append((given, scope))
                visit(func, scope, guarded)
                for child in [*node.args, *node.keywords]:
                    if not (isinstance(child, ast.Name) and child.id == name or
                            isinstance(child, ast.keyword) and isinstance(child.value, ast.Name)
                            and child.value.id == name):
                        visit(child, scope, guarded)
                return
        if isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.Attribute) and node.attr == name:
            root = _root(node)
            if root is not None and root.id in foreign:
                return                  # `nn.init.constant_(...)`, `init.zeros_(...)`: a library's module
            bad = True                  # `executor.submit(f)`, `handlers = {"x": f}`, `f.remote(...)`
            return
        for child in ast.iter_child_nodes(node):
            visit(child, scope, guarded)

    for node in nodes:
        visit(node, scope, guarded)
    return None if bad else (out, handed)


def _uses(tree: ast.Module, name: str, foreign: Optional[set[str]] = None):
    """`_scan` of a whole module."""
    return _scan(tree.body, name, "", foreign=foreign)


def _foreign_names(view, src: PythonSource) -> set[str]:
    """The local names `src` binds by an import from outside the checked files: the imported module's top-level
    package is none of the checked files' (`_scan`)."""
    outline = src.outline
    if outline is None:
        return set()
    tops = view.__dict__.get("_uncaught_tops")
    if tops is None:
        tops = view.__dict__["_uncaught_tops"] = {s.module_name.split(".", 1)[0] for s in view.python
                                                  if s.module_name}
    return {alias for alias, dotted in outline.imports.items()
            if dotted and not dotted.startswith(".") and dotted.split(".", 1)[0] not in tops}


def _definitions(view, name: str, caller: Optional[PythonSource] = None, attribute: bool = True
                 ) -> list[tuple[ast.AST, str, bool, PythonSource]]:
    """(def node, qualified name, a method called through its instance or class -- its first parameter is
    bound --, file) of each function named `name` the checked files define. A bare-name call (`attribute` False)
    from `caller` means the module-level function of that name in `caller` itself, or the one its imports bring
    in under that name, where either is found; else (a method, a name bound some other way) every such one."""
    if not attribute and caller is not None:
        own = [d for d in _definitions_in(caller, name) if "." not in d[1]]
        if own:
            return own
        outline = caller.outline
        dotted = outline.imports.get(name) if outline is not None else None
        if dotted and "." in dotted and dotted.rsplit(".", 1)[1] == name:
            module = dotted.rsplit(".", 1)[0]
            found = [d for src in view.python if src.module_name == module
                     for d in _definitions_in(src, name) if "." not in d[1]]
            if found:
                return found
    word = re.compile(rf"\bdef\s+{re.escape(name)}\b")
    out = []
    for src in view.python:
        if name not in src.text or not word.search(src.text):
            continue
        out += _definitions_in(src, name)
    return out


def _definitions_in(src: PythonSource, name: str) -> list[tuple[ast.AST, str, bool, PythonSource]]:
    """`_definitions` of one file: (def node, qualified name, bound first parameter, the file)."""
    out: list[tuple[ast.AST, str, bool, PythonSource]] = []
    tree = _tree(src) if name in src.text else None
    if tree is None:
        return out
    stack: list[tuple[ast.AST, str, bool]] = [(node, "", False) for node in tree.body]
    while stack:
        node, scope, in_class = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qual = f"{scope}.{node.name}" if scope else node.name
            if isinstance(node, ast.ClassDef):
                stack += [(child, qual, True) for child in node.body]
                continue
            if node.name == name:
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
                out.append((node, qual, in_class and not static, src))
            stack += [(child, qual, False) for child in node.body]
        else:
            stack += [(child, scope, in_class) for child in ast.iter_child_nodes(node)
                      if isinstance(child, (ast.stmt, ast.excepthandler))]
    return out


def _parameter(node: ast.AST, bound: bool, given: _Handoff) -> Optional[str]:
    """The parameter of function `node` that receives the hand-off's argument; None where it lands in
    `*args`/`**kwargs` or nowhere."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    if bound and given.attribute:
        positional = positional[1:]                 # `obj.method(f)`: `self` is bound
    if given.index is not None:
        return positional[given.index].arg if given.index < len(positional) else None
    names = {a.arg for a in [*args.args, *args.kwonlyargs]}
    return given.keyword if given.keyword in names else None


def escapes_to_top(view, src: PythonSource, qualname: str) -> bool:
    """Does an exception raised (and not handled) in function `qualname` of `src` reach the top of every program
    that calls it, uncaught? (See the module's docstring.)"""
    memo = view.__dict__.setdefault("_escapes_memo", {})
    key = (id(src), qualname)
    if key not in memo:
        memo[key] = _escapes(view, src, qualname)
    return memo[key]


def _escapes(view, src: PythonSource, qualname: str) -> bool:
    if not qualname or qualname == "<module>":
        return True
    pending = [(qualname.rsplit(".", 1)[-1], src)]
    seen: set[str] = set()
    while pending:
        name, home = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if len(seen) > _MAX_CALLERS:
            return False
        word = re.compile(rf"\b{re.escape(name)}\b")
        calls = 0
        for other in view.python:
            if name not in other.text or not word.search(other.text):
                continue
            if _own_namesake(other, home, name):
                continue                # another script's function of the same name: its uses are its own
            tree = _tree(other)
            if tree is None:
                return False
            found = _uses(tree, name, _foreign_names(view, other))
            if found is None:
                return False
            uses, handed = found
            received = _received(view, handed, other)
            if received is None:
                return False
            for scope, guarded in [*uses, *received]:
                if guarded:
                    return False
                calls += 1
                if scope:
                    pending.append((scope.rsplit(".", 1)[-1], other))
        if not calls:
            return False                # nothing checked calls it: whoever does may catch
    return True


def _own_namesake(other: PythonSource, home: PythonSource, name: str) -> bool:
    """Does `other` (not `home`, the file defining the function followed) define a module-level function or
    class `name` of its own and import neither that name nor `home`'s module? Its uses of `name` are then of its
    own definition (Python's scoping), not of the function followed."""
    if other is home or not home.module_name:
        return False
    if not any("." not in d[1] for d in _definitions_in(other, name)):
        return False
    outline = other.outline
    if outline is None:
        return False
    module = home.module_name
    return not any(dotted in (module, f"{module}.{name}") or module.startswith(dotted + ".")
                   for dotted in outline.imports.values() if dotted)


def _received(view, handed: list, caller: PythonSource) -> Optional[list[tuple[str, bool]]]:
    """The calls of a function made through the parameters it is handed to (`handed`: `_scan`'s hand-offs of
    `name`), followed through further hand-offs: (scope, guarded) as `_scan` gives them; None where one is not
    decided (see the module's docstring)."""
    out: list[tuple[str, bool]] = []
    pending = [(given, caller) for given, _scope in handed]
    followed = 0
    while pending:
        given, caller = pending.pop()
        followed += 1
        if followed > _MAX_HANDOFFS:
            return None
        defs = _definitions(view, given.callee, caller, given.attribute)
        if not defs:
            return None                 # a library's function, a class: it may run the callback anywhere
        for node, qual, bound, src in defs:
            param = _parameter(node, bound, given)
            if param is None:
                return None
            found = _scan(node.body, param, qual, foreign=_foreign_names(view, src))
            if found is None:
                return None
            uses, more = found
            out += uses
            pending += [(more_given, src) for more_given, _scope in more]
    return out
