"""Whether a forward input's presence is decided per call site: issue 30 item 5 (DSL303 from data flow).

A presence test of an input (`if image is None: return self.encode_text(text)`) reads the batch only when some
call of the model hands over, at that input, a value that is None on some batches and not on others. When every
call of the run passes either a literal (`model(images, None)`, or leaves out an input with a default) or a value
that is never None -- an element unpacked from the batch (`images, texts = batch`), a batch field read by its
literal key or position, the result of a tensor method of such a value (`images.cuda()`), of a `torch` function or
of arithmetic -- each call takes the same arm on every rank and every step: the test is the call site's, not the
batch's. A parameter of the calling function is followed to that function's calls (`get_loss(model, images,
...)`).

What the decision reads, never a name:
- the calls of the model: `trained_chain.model_calls`, the data flow that finds the training chain, collecting
  every call of an object built from the class (or of its engine, its wrapper, their `.module`); none when the
  class is held by another module (its holder's forward calls it as a field) or the chain is cut;
- a closed world (`keyword_presence._closed_world`: no call of an object unpacks a mapping or a sequence, no
  library Trainer calls the model from unchecked code);
- the tests under which each call (and each call of a function handing the value on) runs: run settings only
  (`keyword_presence._setting_shape`, Uniform in the rank-uniformity lattice) -- `if has_image: model(img,
  None)` decides per batch which arm runs.
A loop's iterable decides how often a call runs, not which arm it takes (as for `keyword_presence`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.hyperparams import memo
from dslint.program.outline import MODULE_SCOPE

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

MAX_DEPTH = 3
# lookups that give None where the entry is missing: their result may be None on some batches
_MAY_BE_NONE = frozenset({"get", "pop", "setdefault"})


def presence_per_call(project: "ProjectView", cls, name: str, position: Optional[int], has_default: bool) -> bool:
    """Is the presence of the input `name` of `cls.forward` (at `position` after the receiver, or keyword-only)
    the same on every rank at every call of the model the run shows (see the module's docstring)? Memoised per
    view, class and input."""
    cache = memo(project, "call-presence", dict)
    key = (id(cls), name, position)
    if key not in cache:
        cache[key] = _decide(project, cls, name, position, has_default)
    return cache[key]


def _decide(project: "ProjectView", cls, name: str, position: Optional[int], has_default: bool) -> bool:
    from dslint.program.models.keyword_presence import _closed_world
    from dslint.program.models.modules import model_facts
    from dslint.program.models.trained_chain import model_calls
    if not _closed_world(project):
        return False
    cache = memo(project, "call-presence.calls", dict)
    if id(cls) not in cache:
        cache[id(cls)] = model_calls(project, model_facts(project), cls)
    calls = cache[id(cls)]
    if calls is None:
        return False
    for src, scope, call in calls:
        fn = _function(project, src, scope)
        if fn is None:
            return False
        if _no_grad(project, fn, call):
            continue                # no gradient on any rank: no reduction to skew
        if not _uniform_tests(project, src, scope, fn, call):
            return False
        arg = _argument(call, name, position)
        if arg is _UNKNOWN:
            return False
        if arg is _MISSING:
            # left out: its default on every run of this call -- or, for a required input, no call of this
            # forward at all (the data flow over-approximates: `optimizer.zero_grad()` of an optimizer built
            # from the model's parameters), which would raise
            continue
        if not (_constant(arg) or _never_none(project, src, scope, fn, arg, 0, set())):
            return False
    return True


_UNKNOWN, _MISSING = object(), object()


def _argument(call: ast.Call, name: str, position: Optional[int]):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
        if kw.arg is None:
            return _UNKNOWN         # `**kwargs`: any input may arrive through it
    if position is not None:
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return _UNKNOWN
            if i == position:
                return arg
    return _MISSING


def _constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant)


def _function(project: "ProjectView", src: "PythonSource", scope: str) -> Optional[ast.AST]:
    from dslint.program.models.trained_chain import _scopes
    return _scopes(project, src).get(scope)


def _parents(fn: ast.AST) -> dict[int, ast.AST]:
    out: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            out[id(child)] = node
    return out


def _up(project: "ProjectView", fn: ast.AST) -> dict[int, ast.AST]:
    parents = memo(project, "call-presence.parents", dict)
    if id(fn) not in parents:
        parents[id(fn)] = _parents(fn)
    return parents[id(fn)]


def _no_grad(project: "ProjectView", fn: ast.AST, call: ast.AST) -> bool:
    """Does `call` run under `torch.no_grad()` / `torch.inference_mode()` (a `with` item in `fn`, or `fn`'s
    decorator)?"""
    from dslint.program.models.trained_chain import _dotted

    def grad_off(expr: ast.AST) -> bool:
        if isinstance(expr, ast.Call):
            expr = expr.func
        name = _dotted(expr) or ""
        return name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode") and \
            (name.startswith("torch.") or "." not in name)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(grad_off(d) for d in fn.decorator_list):
        return True
    up = _up(project, fn)
    node = up.get(id(call))
    while node is not None and node is not fn:
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(grad_off(i.context_expr) for i in node.items):
            return True
        node = up.get(id(node))
    return False


def _uniform_tests(project: "ProjectView", src: "PythonSource", scope: str, fn: ast.AST, call: ast.AST) -> bool:
    """Does every test deciding whether `call` runs in `fn` (an enclosing `if`/`while`, a conditional
    expression, a comprehension's condition) read run settings only, the same on every rank?"""
    up = _up(project, fn)
    node: Optional[ast.AST] = call
    while node is not None and node is not fn:
        parent = up.get(id(node))
        test = None
        if isinstance(parent, (ast.If, ast.While)) and node is not parent.test:
            test = parent.test
        elif isinstance(parent, ast.IfExp) and node is not parent.test:
            test = parent.test
        elif isinstance(parent, ast.comprehension) and node is not parent.iter and parent.ifs:
            return False
        if test is not None and not _setting(project, src, scope, test):
            return False
        node = parent
    return True


def _setting(project: "ProjectView", src: "PythonSource", scope: str, test: ast.AST) -> bool:
    from dslint.program.models.keyword_presence import _setting_shape
    from dslint.program.rank.lattice import Uniform, uniformity
    try:
        expr = cst.parse_expression(ast.unparse(test))
    except Exception:
        return False
    if not _setting_shape(expr):
        return False
    try:
        return isinstance(uniformity(project, src, expr, None if scope == MODULE_SCOPE else scope), Uniform)
    except RecursionError:
        return False


def _never_none(project: "ProjectView", src: "PythonSource", scope: str, fn: ast.AST, node: ast.AST, depth: int,
                seen: set) -> bool:
    """Is `node`, evaluated in `fn`, never None: a non-None literal, arithmetic, a display or comprehension, a
    `torch` function's result, a
    method's result on such a value (not a lookup that gives None for a missing entry), a subscript of one by a
    literal, or a variable every binding of which is one of these or an element unpacked from a sequence?"""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp,
                         ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Lambda, ast.Compare)):
        return True                 # arithmetic, a display, a comprehension: never None
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and \
            _never_none(project, src, scope, fn, node.value, depth, seen)
    if isinstance(node, ast.Call):
        func = node.func
        from dslint.program.models.trained_chain import _dotted
        dotted = _dotted(func) or ""
        root = dotted.split(".", 1)[0]
        imports = src.outline.imports if src.outline is not None else {}
        if (imports.get(root, root) + dotted[len(root):]).startswith("torch."):
            return True
        if isinstance(func, ast.Attribute) and func.attr not in _MAY_BE_NONE:
            return _never_none(project, src, scope, fn, func.value, depth, seen)
        return False
    if isinstance(node, ast.Name):
        return _name_never_none(project, src, scope, fn, node.id, depth, seen)
    return False


def _name_never_none(project: "ProjectView", src: "PythonSource", scope: str, fn: ast.AST, name: str, depth: int,
                     seen: set) -> bool:
    key = (id(fn), name)
    if key in seen:
        return True                 # `x = x.cuda()`: the other bindings decide
    seen = seen | {key}
    from dslint.program.models.trained_chain import _own_nodes
    bindings: list = []
    for node in _own_nodes(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                got = _bound(target, node.value, name)
                if got is not None:
                    bindings.append(got)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and \
                node.target.id == name:
            bindings.append(node.value if node.value is not None else _UNKNOWN)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            bindings.append(True)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            got = _bound(node.target, None, name)
            if got is not None:
                bindings.append(True if got is _ELEMENT else _UNKNOWN)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None and \
                _bound(node.optional_vars, None, name) is not None:
            bindings.append(_UNKNOWN)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            if any((a.asname or a.name).split(".")[0] == name for a in getattr(node, "names", []) if
                   not isinstance(a, str)) or name in getattr(node, "names", []):
                bindings.append(_UNKNOWN)
    params = _params(fn)
    if name in params:
        # the calling function's own input: its callers decide (when it is not rebound from anything else)
        if any(b is _UNKNOWN or (b is not True and b is not _ELEMENT and
                                 not _never_none(project, src, scope, fn, b, depth, seen)) for b in bindings):
            return False
        return _callers_pass(project, src, scope, fn, name, depth, seen)
    if not bindings:
        return False
    for b in bindings:
        if b is True or b is _ELEMENT:
            continue
        if b is _UNKNOWN or not _never_none(project, src, scope, fn, b, depth, seen):
            return False
    return True


_ELEMENT = object()


def _bound(target: ast.AST, value: Optional[ast.AST], name: str):
    """What binding `target` (= `value`) gives `name`: the value, `_ELEMENT` for an element of an unpacked sequence
    (`images, texts = batch`), None when it does not bind `name`."""
    if isinstance(target, ast.Name):
        return (value if value is not None else _ELEMENT) if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        elts = target.elts
        for i, el in enumerate(elts):
            if isinstance(el, ast.Starred):
                if _bound(el.value, None, name) is not None:
                    return _UNKNOWN
                continue
            inner = value.elts[i] if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts) \
                else None
            got = _bound(el, inner, name)
            if got is not None:
                return got
    return None


def _params(fn: ast.AST) -> list[str]:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _callers_pass(project: "ProjectView", src: "PythonSource", scope: str, fn: ast.AST, name: str, depth: int,
                  seen: set) -> bool:
    """Does every call of the function `fn` (a plain function of the run: `get_loss(model, images, ...)`) pass a
    never-None value for its parameter `name`, under tests of run settings only? False when no call is found, or
    for a method (its receiver's calls are not followed)."""
    if depth >= MAX_DEPTH or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    from dslint.program.models.modules import model_facts
    from dslint.program.models.trained_chain import _Walker, _scopes
    walker = _Walker(project, model_facts(project))
    if walker._class_of(src, scope) is not None:
        return False
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    position = positional.index(name) if name in positional else None
    found = False
    for other, where, match in walker._callers(src, scope):
        caller = _scopes(project, other).get(where)
        if caller is None:
            return False
        for node in ast.walk(caller):
            if not (isinstance(node, ast.Call) and match(node.func)):
                continue
            found = True
            if not _uniform_tests(project, other, where, caller, node):
                return False
            arg = _argument(node, name, position)
            if arg is _UNKNOWN or arg is _MISSING:
                return False        # (a default may be None)
            if not _never_none(project, other, where, caller, arg, depth + 1, seen):
                return False
    return found
