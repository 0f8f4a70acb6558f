"""Branches no execution takes: the test of an `if` decided by literals alone (issue 30: evidence before a finding,
dead-literal-switch).

Research code disables a block by a switch bound once to a literal right before it (`using_hat_freeze = False`
then `if using_hat_freeze: ...`), or by `if False:` / `if 0:`. A hazard inside such a block is in code no run
executes as the file stands: its evidence is incomplete, whatever rule found it. This is a reachability fact of
the file, read by every rule's finding through `dead_branch` (the rule runner marks a finding there unproven).

A test is decided when it evaluates, by its data flow alone, to a constant truth value:

* a literal (`False`, `0`, `None`, `""`, `True`, `1`);
* a name whose only binding in its scope is one assignment of a literal before the test -- no other store of it
  in that scope (assignment, augmented assignment, loop or `with` target, walrus, import, parameter, `del`), and
  no `global`/`nonlocal` declaration of it anywhere in the scope; a name the function does not bind is looked up
  at module scope, with the same conditions over the whole module;
* `not`, `and`/`or` (short-circuit: `args.x and flag` is false when `flag` is) and `==`/`!=`/`is`/`is not`
  between decided values.

The body of an `if` whose test is decided false, and the `else`/`elif` part of one decided true, are dead.
Anything computed, read from arguments, configuration or the environment is undecided: the branch counts as
taken.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Optional

from dslint.program.outline import parse_tree
from dslint.sources import PythonSource

_UNDECIDED = object()
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class DeadBranch:
    test_line: int          # the `if` whose test is decided
    first: int              # the dead lines
    last: int
    value: bool             # what the test always evaluates to
    why: str                # how: "`using_hat_freeze` is bound only to False (line 238)"


def dead_branch(src: PythonSource, line: int) -> Optional[DeadBranch]:
    """The outermost dead branch of `src` holding `line`, or None."""
    for branch in _dead_branches(src):
        if branch.first <= line <= branch.last:
            return branch
    return None


def _dead_branches(src: PythonSource) -> list[DeadBranch]:
    memo = src.__dict__.get("_dead_branches")
    if memo is None:
        tree = parse_tree(src.text, src.path) if "if" in src.text else None
        memo = src.__dict__["_dead_branches"] = _collect(tree) if tree is not None else []
    return memo


def _collect(tree: ast.Module) -> list[DeadBranch]:
    out: list[DeadBranch] = []

    def walk(node: ast.AST, chain: tuple) -> None:
        for child in ast.iter_child_nodes(node):
            inner = chain + (child,) if isinstance(child, _SCOPES) else chain
            if isinstance(child, ast.If):
                value, why = _decide(child.test, child.lineno, inner)
                if value is not _UNDECIDED:
                    dead = child.orelse if value else child.body
                    if dead:
                        out.append(DeadBranch(child.lineno, dead[0].lineno, _last_line(dead[-1]), bool(value),
                                              why))
            walk(child, inner)

    walk(tree, (tree,))
    out.sort(key=lambda b: (b.first, -b.last))
    return out


def _last_line(node: ast.AST) -> int:
    return getattr(node, "end_lineno", None) or node.lineno


def _decide(test: ast.expr, line: int, chain: tuple) -> tuple[Any, str]:
    """(the constant value of `test`, how it is decided) or (_UNDECIDED, "")."""
    if isinstance(test, ast.Constant) and not isinstance(test.value, (bytes,)):
        return test.value, f"the test is the literal {test.value!r}"
    if isinstance(test, ast.Name):
        return _bound_literal(test.id, line, chain)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value, why = _decide(test.operand, line, chain)
        return (_UNDECIDED, "") if value is _UNDECIDED else (not value, why)
    if isinstance(test, ast.BoolOp):
        decisive = isinstance(test.op, ast.Or)      # `or` is decided by a true operand, `and` by a false one
        undecided = False
        for operand in test.values:
            value, why = _decide(operand, line, chain)
            if value is _UNDECIDED:
                undecided = True
            elif bool(value) is decisive:
                return decisive, why
        return (_UNDECIDED, "") if undecided else (not decisive, "every operand is decided")
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, why_left = _decide(test.left, line, chain)
        right, why_right = _decide(test.comparators[0], line, chain)
        if left is _UNDECIDED or right is _UNDECIDED:
            return _UNDECIDED, ""
        op = test.ops[0]
        why = "; ".join(w for w in (why_left, why_right) if not w.startswith("the test is"))
        if isinstance(op, ast.Eq):
            return left == right, why
        if isinstance(op, ast.NotEq):
            return left != right, why
        if isinstance(op, ast.Is) and (left is None or right is None or isinstance(left, bool)):
            return left is right, why
        if isinstance(op, ast.IsNot) and (left is None or right is None or isinstance(left, bool)):
            return left is not right, why
    return _UNDECIDED, ""


def _bound_literal(name: str, line: int, chain: tuple) -> tuple[Any, str]:
    """The literal `name` holds at `line`: the innermost scope of `chain` (module first) that binds it binds it
    exactly once, to a literal, before the line (a class body's names are seen from that body only)."""
    module = chain[0]
    for depth, holder in enumerate(reversed(chain)):
        if isinstance(holder, ast.ClassDef) and depth:
            continue
        stores = _stores(holder, name)
        if stores is None:
            return _UNDECIDED, ""           # declared global/nonlocal somewhere: another scope may rebind it
        if not stores:
            if holder is not module and _is_parameter(holder, name):
                return _UNDECIDED, ""
            continue                        # not bound here: the enclosing scope's binding is read
        if len(stores) != 1:
            return _UNDECIDED, ""
        store = stores[0]
        if not (isinstance(store, ast.Assign) and len(store.targets) == 1 and store.lineno < line
                and isinstance(store.value, ast.Constant) and not isinstance(store.value.value, bytes)):
            return _UNDECIDED, ""
        if holder is not module and _is_parameter(holder, name):
            return _UNDECIDED, ""
        return store.value.value, f"`{name}` is bound only to {store.value.value!r} (line {store.lineno})"
    return _UNDECIDED, ""


def _is_parameter(scope: ast.AST, name: str) -> bool:
    args = getattr(scope, "args", None)
    if args is None:
        return False
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    return any(a.arg == name for a in every)


def _stores(scope: ast.AST, name: str) -> Optional[list[ast.AST]]:
    """The statements of `scope` (not of the functions and classes it defines) that bind `name`; None when a
    `global`/`nonlocal` declaration of it appears anywhere under `scope` (a nested function may rebind it)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                out.append(node)
            todo.extend(d for d in ast.walk(node) if isinstance(d, (ast.Global, ast.Nonlocal)))
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            out.extend(n for n in ast.walk(node)        # a walrus inside binds in this scope
                       if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name) and n.target.id == name)
            continue
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.append(_statement_of(scope, node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in node.names):
                out.append(node)
        elif isinstance(node, ast.ExceptHandler) and node.name == name:
            out.append(node)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and getattr(node, "name", None) == name:
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _statement_of(scope: ast.AST, target: ast.Name) -> ast.AST:
    """The assignment whose target is `target` when it is a plain `name = <value>` statement, else the target."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(t is target for t in node.targets):
            return node
    return target
