"""Wait-for analysis: which rank waits for which, and where their paths through the script parted.

Pure functions on what the ranks publish (no torch, no store), so they are testable on their own:

* ``analyse`` reads one snapshot of the ranks' heartbeats (each holds the rank's *position*: the collective
  its main thread waits in — group, sequence number, op, fingerprint hash, user stack — or, outside any
  collective, its Python stack and how long that stack has not moved) and finds the ranks that provably wait
  forever: a rank in collective (G, s) waits for every member of G that is not at (G, s); it waits forever
  when each of those is itself waiting forever (a knot of the wait-for graph), is at another sequence number
  of G, has finished its dry step with fewer collectives in G, or sits in Python without moving (blocked
  elsewhere).  A rank whose heartbeat stopped, or whose process is gone, is dead.
* ``divergence_point`` compares two ranks' user stacks (innermost first, as the tracer records them) and
  finds the first source line where they part: the ``if`` one rank is inside and the other is not
  (branch, DSL101), the loop one rank has left (trip count, DSL102, or its ``break``: exit, DSL103), the
  early ``return`` of a function one rank left, a library ``generate`` one rank is still inside (DSL104).
  The mechanism is read from the code's structure around the two observed lines, never from a function's
  name: a script function called ``generate`` is a user frame like any other.
"""

from __future__ import annotations

import ast
import functools
import linecache
import warnings
from typing import Any

CODES = {"branch": "DSL101", "loop": "DSL102", "exit": "DSL103", "generate": "DSL104"}
BLOCKED_STATES = ("pre", "in")


def source_text(frame: list[Any] | None) -> str:
    if not frame:
        return ""
    return linecache.getline(frame[0], frame[1]).strip()


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as f:
            with warnings.catch_warnings():         # the user's invalid escapes (SyntaxWarning, 3.12+)
                warnings.simplefilter("ignore")
                return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _scope(tree: ast.Module, line: int, func: str) -> ast.AST:
    """The innermost function named ``func`` that holds ``line`` (the module for ``<module>``)."""
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == func \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is tree or node.lineno > best.lineno:  # type: ignore[attr-defined]
                best = node
    return best


def _blocks(node: ast.AST) -> list[tuple[str, list[ast.stmt]]]:
    blocks = []
    for field in ("body", "orelse", "finalbody"):
        value = getattr(node, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            blocks.append((field, value))
    for handler in getattr(node, "handlers", None) or []:
        blocks.append(("handler", handler.body))
    for case in getattr(node, "cases", None) or []:
        blocks.append(("case", case.body))
    return blocks


def _chain(scope: ast.AST, line: int) -> list[tuple[ast.stmt, str]]:
    """The statements that hold ``line``, outermost first, each with the block of its parent it is in."""
    chain: list[tuple[ast.stmt, str]] = []
    node = scope
    while True:
        found = None
        for field, block in _blocks(node):
            for stmt in block:
                if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                    found = (stmt, field)
                    break
            if found:
                break
        if found is None:
            return chain
        chain.append(found)
        if isinstance(found[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return chain
        node = found[0]


def _exits_in(loop: ast.AST) -> list[ast.stmt]:
    """``break`` statements of this loop (not of loops nested in it) and ``return``s inside it."""
    found: list[ast.stmt] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Break) and not nested or isinstance(child, ast.Return):
                found.append(child)
            visit(child, nested or isinstance(child, (ast.For, ast.AsyncFor, ast.While)))

    for stmt in getattr(loop, "body", []):
        if isinstance(stmt, ast.Break) or isinstance(stmt, ast.Return):
            found.append(stmt)
        visit(stmt, isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)))
    return sorted(found, key=lambda n: n.lineno)


def _header(node: ast.AST) -> str:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    if isinstance(node, ast.While):
        return f"while {ast.unparse(node.test)}"
    if isinstance(node, ast.If):
        return f"if {ast.unparse(node.test)}"
    return ast.unparse(node).splitlines()[0] if hasattr(ast, "unparse") else ""


def _loop_point(path: str, loop: ast.AST, inside: str) -> dict[str, Any]:
    exits = _exits_in(loop)
    if exits:
        first = exits[0]
        return {"kind": "exit", "line": first.lineno, "path": path, "construct": _header(loop),
                "loop_line": loop.lineno,
                "why": (f"{inside} is still inside `{_header(loop)}` (line {loop.lineno}), the other left it: "
                        f"the loop's `{source_text([path, first.lineno])}` at line {first.lineno} ends it at a "
                        "per-rank point")}
    return {"kind": "loop", "line": loop.lineno, "path": path, "construct": _header(loop),
            "why": (f"{inside} is still inside `{_header(loop)}` (line {loop.lineno}), the other has left it: "
                    "the loop's trip count differs across ranks")}


def _split_in_function(path: str, func: str, la: int, lb: int, names: tuple[str, str]) -> dict[str, Any] | None:
    """Two ranks in the same function at lines ``la`` / ``lb``: the construct that separates them."""
    tree = _tree(path)
    if tree is None:
        return None
    scope = _scope(tree, la, func)
    ca, cb = _chain(scope, la), _chain(scope, lb)
    k = 0
    while k < len(ca) and k < len(cb) and ca[k][0] is cb[k][0]:
        k += 1
    common = ca[k - 1][0] if k else None
    sa = ca[k] if k < len(ca) else None
    sb = cb[k] if k < len(cb) else None
    if isinstance(common, ast.If) and sa and sb and sa[1] != sb[1]:
        inside = names[0] if sa[1] == "body" else names[1]
        return {"kind": "branch", "line": common.lineno, "path": path, "construct": _header(common),
                "why": f"{inside} took the branch `{_header(common)}` (line {common.lineno}), the other did not"}
    if sa is None or sb is None:  # one rank is on the header line of the construct the other is inside
        if isinstance(common, (ast.For, ast.AsyncFor, ast.While)):
            return _loop_point(path, common, names[0] if sa is not None else names[1])
        return None
    # siblings in one block: the construct (an `if`, a loop, seen through `with`/`try`) that one rank is inside
    # and the other is not; the earlier one first
    candidates = [(sa, ca, names[0]), (sb, cb, names[1])]
    candidates.sort(key=lambda c: c[0][0].lineno)
    for _, chain, name in candidates:
        for stmt, _ in chain[k:]:
            if isinstance(stmt, ast.If):
                return {"kind": "branch", "line": stmt.lineno, "path": path, "construct": _header(stmt),
                        "why": f"{name} took the branch `{_header(stmt)}` (line {stmt.lineno}), the other went "
                               "past it"}
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                return _loop_point(path, stmt, name)
            if not isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try)):
                break
    # the rank behind is at a plain statement the other has passed: they are in different iterations of an
    # enclosing loop, or the other skipped ahead; a branch between the two lines decides
    lo, hi = sorted((sa[0].lineno, sb[0].lineno))
    block = next((b for _, b in _blocks(common or scope) if sa[0] in b), [])
    for stmt in block:
        if lo < stmt.lineno < hi and isinstance(stmt, ast.If):
            return {"kind": "branch", "line": stmt.lineno, "path": path, "construct": _header(stmt),
                    "why": f"the branch `{_header(stmt)}` (line {stmt.lineno}) lies between the ranks' lines"}
    for stmt, _ in reversed(ca[:k]):
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            return _loop_point(path, stmt, "one rank")
    return None


def _early_return(path: str, func: str, line: int) -> ast.stmt | None:
    """A ``return`` (or ``break`` out of the loop holding ``line``) of the function before ``line``."""
    tree = _tree(path)
    if tree is None:
        return None
    scope = _scope(tree, line, func)
    if scope is tree:
        return None
    for node in ast.walk(scope):
        if isinstance(node, ast.Return) and node.lineno < line:
            return node
    return None


def _same(a: list[Any], b: list[Any]) -> bool:
    return a[0] == b[0] and a[1] == b[1] and a[2] == b[2]


def _callee(frame: list[Any]) -> str:
    return frame[3] if len(frame) > 3 and frame[3] else ""


def _is_library_generate(frame: list[Any]) -> bool:
    """The frame calls into a library's ``generate`` (transformers' GenerationMixin and the like): observed
    from the recorded callee, which is a library frame — a script's own ``generate`` is a user frame."""
    callee = _callee(frame)
    return callee.rpartition(":")[2] == "generate"


def divergence_point(stack_a: list[Any] | None, stack_b: list[Any] | None,
                     names: tuple[str, str] = ("rank A", "rank B"), finished: bool = False) -> dict[str, Any] | None:
    """The first source line where two ranks' recorded paths part, with the mechanism and its rule code.

    Stacks are user frames innermost first (``[file, line, function, callee]``).  Returns ``{"kind", "code",
    "source": [file, line, function], "text", "why"}`` or None when the stacks say nothing (empty)."""
    A = [f for f in reversed(stack_a or []) if f]
    B = [f for f in reversed(stack_b or []) if f]
    if not A or not B:
        return None
    depth = 0
    while depth < len(A) and depth < len(B) and _same(A[depth], B[depth]):
        depth += 1
    result: dict[str, Any] | None = None
    if finished and depth:
        # B is a finished rank's last collective of the group: it left every construct it was in, so the
        # outermost loop both were inside (in the frames they share) is the one it ran fewer times
        for frame in A[:depth]:
            if _is_library_generate(frame):
                break
            tree = _tree(frame[0])
            loops = [st for st, _ in _chain(_scope(tree, frame[1], frame[2]), frame[1])
                     if isinstance(st, (ast.For, ast.AsyncFor, ast.While))] if tree is not None else []
            if loops:
                result = _loop_point(frame[0], loops[0], names[0])
                result["why"] = f"{names[1]} finished its dry step; " + result["why"]
                break
    if result is not None:
        pass
    elif depth == len(A) == len(B):
        # the same line on both ranks, different iterations (or different sequence numbers) of it
        frame = A[-1]
        if _is_library_generate(frame):
            result = {"kind": "generate", "line": frame[1], "path": frame[0], "why": (
                f"both ranks are in `{source_text(frame)}`, a library generate(): each rank stops generating at "
                "its own length and every generated token is a collective forward")}
        else:
            result = _innermost_loop(A, "both ranks are at the same line in different iterations")
    elif depth < len(A) and depth < len(B) and A[depth][0] == B[depth][0] and A[depth][2] == B[depth][2]:
        fa, fb = A[depth], B[depth]
        for frame, other, name in ((fa, fb, names[0]), (fb, fa, names[1])):
            if _is_library_generate(frame) and frame[1] < other[1]:
                result = {"kind": "generate", "line": frame[1], "path": frame[0], "why": (
                    f"{name} is still inside the library generate() at line {frame[1]}, the other is past it: "
                    "generation stopped at a per-rank length")}
        if result is None:
            result = _split_in_function(fa[0], fa[2], fa[1], fb[1], names)
        if result is None or result["kind"] is None:
            # the rank at the earlier line is inside a call the other has already returned from
            for deeper, other, name in ((A, fb, names[0]), (B, fa, names[1])):
                if len(deeper) > depth + 1 and deeper[depth][1] < other[1]:
                    inner = deeper[depth + 1]
                    ret = _early_return(inner[0], inner[2], inner[1])
                    if ret is not None:
                        result = {"kind": "exit", "line": ret.lineno, "path": inner[0], "why": (
                            f"{name} is still inside {inner[2]}() (line {inner[1]}), the other left it early "
                            f"through the `return` at line {ret.lineno}")}
                    else:  # the other returned after fewer iterations of a loop in the callee
                        found = _innermost_loop(deeper[depth + 1:],
                                                f"{name} is still inside {inner[2]}(), the other has returned")
                        if found is not None and found.get("kind"):
                            result = found
                    break
    elif depth:
        frame = A[depth - 1]  # same line, different callees: the call dispatches differently
        result = {"kind": None, "line": frame[1], "path": frame[0],
                  "why": "the ranks call different code from this line"}
    if result is None:
        return None
    kind = result["kind"]
    source = [result["path"], result["line"], _function_at(result["path"], result["line"])]
    return {"kind": kind, "code": CODES.get(kind or ""), "source": source, "text": source_text(source),
            "why": result["why"], "construct": result.get("construct")}


def _innermost_loop(outer_first: list[Any], why: str) -> dict[str, Any] | None:
    for frame in reversed(outer_first):
        tree = _tree(frame[0])
        if tree is None:
            continue
        scope = _scope(tree, frame[1], frame[2])
        for stmt, _ in reversed(_chain(scope, frame[1])):
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                point = _loop_point(frame[0], stmt, "one rank")
                point["why"] = f"{why}; " + point["why"]
                return point
    return {"kind": None, "line": outer_first[-1][1], "path": outer_first[-1][0], "why": why}


def _function_at(path: str, line: int) -> str:
    tree = _tree(path)
    if tree is None:
        return "?"
    best = "<module>"
    best_line = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno) and node.lineno > best_line:
            best, best_line = node.name, node.lineno
    return best


# ---- the wait-for graph -----------------------------------------------------------------------------------
def _where(pos: dict[str, Any]) -> str:
    if pos.get("state") in BLOCKED_STATES or pos.get("state") == "fin":
        return f"{pos.get('op')} #{pos.get('seq')} in group {pos.get('group')}"
    top = (pos.get("stack") or [None])[0]
    return f"Python at {top[0]}:{top[1]} `{source_text(top)}`" if top else "Python"


def analyse(beats: dict[int, dict[str, Any]], settle: float, stall: float) -> dict[str, Any] | None:
    """One snapshot of the live ranks' heartbeats -> a hang verdict, or None while nothing is proven.

    ``beats[r]["pos"]``: ``state`` ("pre": held before issue while the group's fingerprints are compared,
    "in": inside the issued collective, "py": not in a collective, "fin": the dry step is over), ``group``,
    ``seq``, ``op``, ``ranks`` (the group's members), ``for`` (seconds in this position), ``stack``, and for
    "fin" the per-group ``counts``.  ``settle``: a rank counts as blocked after this long in one collective;
    ``stall``: a rank outside any collective whose Python stack has not moved for this long is blocked
    elsewhere -- unless it is in a bounded wait of dslint's own (``bounded_wait``: the loader audit waiting
    for its peers' walks), which ends by itself."""
    pos = {r: (b.get("pos") or {}) for r, b in beats.items()}
    blocked = {r: p for r, p in pos.items() if p.get("state") in BLOCKED_STATES and p.get("for", 0) >= settle}
    waits: dict[int, list[int]] = {}
    terminal: dict[int, str] = {}  # ranks that will never join, and why
    for r, p in blocked.items():
        group, seq = p.get("group"), p.get("seq")
        for m in p.get("ranks") or []:
            if m == r or m not in pos:
                continue
            q = pos[m]
            state = q.get("state")
            if state in BLOCKED_STATES and q.get("group") == group and q.get("seq") == seq:
                continue  # there already
            waits.setdefault(r, []).append(m)
            if state in BLOCKED_STATES and q.get("group") == group and q.get("for", 0) >= settle:
                terminal[m] = f"waits at #{q.get('seq')} of the same group"
            elif state == "fin" and (q.get("counts") or {}).get(group, 0) <= seq:
                terminal[m] = (f"finished its dry step after {(q.get('counts') or {}).get(group, 0)} collectives "
                               f"in group {group}")
            elif state == "py" and q.get("for", 0) >= stall and not q.get("bounded_wait"):
                terminal[m] = f"has been in {_where(q)} for {q.get('for', 0):.1f} s, outside any collective"
    stuck = set(waits)
    changed = True
    while changed:  # greatest fixpoint: a rank stays stuck while everything it waits for is stuck or terminal
        changed = False
        for r in list(stuck):
            if any(m not in stuck and m not in terminal for m in waits[r]):
                stuck.discard(r)
                changed = True
    if not stuck:
        return None
    # explain with one waiting rank and the member it waits for: prefer a terminal member (the cause), then
    # the lowest ranks (so every run names the same pair)
    pairs = sorted(((r, m) for r in stuck for m in waits[r]), key=lambda rm: (rm[1] not in terminal, rm))
    r, m = pairs[0]
    p, q = pos[r], pos[m]
    if m in terminal and q.get("state") == "fin":
        cause = "extra-collective"
    elif m in terminal and q.get("state") == "py":
        cause = "blocked-elsewhere"
    else:
        cause = "deadlock"
    other = q.get("stack")
    if cause == "extra-collective":  # compare with the finished rank's last collective in this group
        other = (q.get("last_by_group") or {}).get(p.get("group")) or other
    point = divergence_point(p.get("stack"), other, (f"rank {r}", f"rank {m}"),
                             finished=cause == "extra-collective")
    lines = [f"rank {x} waits in {_where(pos[x])} for rank(s) {sorted(waits[x])}" for x in sorted(stuck)]
    lines += [f"rank {x} {why}" for x, why in sorted(terminal.items()) if x not in stuck]
    return {
        "kind": "hang", "cause": cause, "stuck_ranks": sorted(stuck), "group": p.get("group"), "seq": p.get("seq"),
        "waits": {str(x): {"group": pos[x].get("group"), "seq": pos[x].get("seq"), "op": pos[x].get("op"),
                           "waits_for": sorted(waits[x])} for x in sorted(stuck)},
        "blocking": {"rank": m, "state": q.get("state"), "where": _where(q), "stack": q.get("stack")},
        "finished_ranks": sorted(x for x in terminal if pos[x].get("state") == "fin"),
        "divergence": point,
        # how long ago the last of the stuck ranks blocked, when the snapshot was taken
        "last_blocked_s": round(min(pos[x].get("for", 0) for x in stuck), 3),
        "detail": "wait-for analysis: " + "; ".join(lines),
    }
