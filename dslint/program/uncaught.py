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
over-approximation: a same-named call elsewhere can only add a caller that catches, never hide one.
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


def _uses(tree: ast.Module, name: str) -> Optional[list[tuple[str, bool]]]:
    """Each call of `name` in the file: (qualified name of the function it is in, or "" at module level; whether a
    `try` with handlers around it in that function may catch what it raises). None when the name is used other
    than as the callee of a call or in its own `def` (handed on by reference)."""
    out: list[tuple[str, bool]] = []
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
        if isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.Attribute) and node.attr == name:
            bad = True                  # `executor.submit(f)`, `handlers = {"x": f}`, `f.remote(...)`
            return
        for child in ast.iter_child_nodes(node):
            visit(child, scope, guarded)

    visit(tree, "", False)
    return None if bad else out


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
    pending = [qualname.rsplit(".", 1)[-1]]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
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
            tree = _tree(other)
            if tree is None:
                return False
            uses = _uses(tree, name)
            if uses is None:
                return False
            for scope, guarded in uses:
                if guarded:
                    return False
                calls += 1
                if scope:
                    pending.append(scope.rsplit(".", 1)[-1])
        if not calls:
            return False                # nothing checked calls it: whoever does may catch
    return True
