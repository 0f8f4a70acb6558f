"""Rank-dependent exceptions before a collective (rule DSL105), a part of the hazard walk (`HazardWalk`).

A value produced by a *filter* over rank-varying data can be empty (or None) on some ranks only:

- a comprehension with an `if` clause whose result is rank-varying (`[a for a in outputs if a.is_valid]`),
  `filter(...)` of rank-varying data, a comprehension over such a filtered value;
- a list started empty (`xs = []`) that grows only under a rank-dependent test or after a rank-dependent
  `continue` (`for o in outputs: if o.ok: xs.append(o)`);
- a name bound to None that a rank-dependent branch alone rebinds (`x = None; if cond: x = ...`), and
  `next(iter(data), None)` of rank-varying data.

An operation that raises on an empty/None value (`torch.cat(xs)`, `torch.stack`, `max`/`min` without a
default, `xs[0]`, `x / len(xs)`, `x.shape` of a maybe-None) kills that rank; when a collective site follows
it in the same body (or earlier in an enclosing loop's body: the next iteration), the other ranks wait there
forever. Any test of the name before the operation (`if not xs:`, `len(xs) == 0`, `x is None`, an `assert`,
`xs and ...`) is the user's decision and clears it; an operation inside a `try` with handlers is caught.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from dslint.program.rank.collective_sequences import MAX_ATOMS, _code, _leaves, _truth
from dslint.program.rank.value_uniformity import Origin, filters
from dslint.program.facts import dotted_name
from dslint.program.statement_walks import if_path
from dslint.sources.literals import literal_value

# calls that raise on an empty sequence argument (first positional)
EMPTY_RAISING = {"cat", "concat", "concatenate", "stack", "vstack", "hstack", "dstack", "max", "min", "choice",
                 "mean", "median", "stdev", "pad_sequence"}
# the modules those are read from (a bare `max`/`min` is the builtin)
_EMPTY_MODULES = ("torch", "numpy", "np", "statistics", "random", "torch.nn.utils.rnn")
_GROWING = {"append", "extend", "insert", "add", "update"}
# reductions that raise on an empty sequence only in `statistics` (StatisticsError): numpy's and torch's return
# nan with a warning (`np.mean([])`, `torch.median(torch.tensor([]))`), the rank goes on
_NAN_ON_EMPTY = {"mean", "median"}
# a helper whose calls include none of these cannot raise DSL105's way (decided on the outline)
HELPER_GATE = EMPTY_RAISING | {"len", "next", "append", "extend", "filter"}

# exits after which a rank never reaches what follows in this function: the process ends (`exit()`), or the
# function is left (`return`). A value built after such a test is built on every rank that gets to use it: the
# ranks that took the exit are gone (DSL103 reports them), not holding an empty list (DSL105)
_LEAVING = ("exit", "return")


def _conditioning(guards) -> list:
    """The rank-dependent guards that decide whether a statement runs on a rank that goes on past it: tests, and
    exits that stay in the function (`continue`, `break`, a `raise` that may be caught)."""
    return [g for g in guards if g.kind in ("cond", "cond-balanced") or
            g.kind == "exit" and g.exit_kind not in _LEAVING]


@dataclass
class MaybeEmpty:
    name: str
    kind: str                   # "empty" | "none"
    node: cst.CSTNode           # the filter / the conditional assignment
    origin: Origin              # why it differs across ranks
    how: str = "filter"         # filter | grown (appended under a test) | assigned (rebound under a test) | next
    test: str = ""              # grown/assigned: the test's code; a use under the same test is correlated
    source: object = None       # the PythonSource of `node` (another file's, for a helper's raise)
    # grown/assigned: the tests on the path of the assignment, each with the side taken ((test, holds), …); a use
    # whose own path implies them all sees the value set (`path_implies`); None: unknown
    path: Optional[tuple] = None


@dataclass
class RaisingOp:
    node: cst.CSTNode           # the raising expression
    value: MaybeEmpty
    what: str                   # "`torch.cat(answers)` raises on an empty list"
    loops: tuple                # enclosing loop statements at the operation
    inner: object = None        # a call of a helper that raises: (source, RaisingOp) of the helper's operation


def _names_in(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> Optional[bool]:
            name = dotted_name(n)
            if name is not None:
                out.add(name)
            return True

    node.visit(V())
    return out


def _assigned_names(stmts) -> set[str]:
    out: set[str] = set()
    for stmt in stmts:
        for node in _walk_statements(stmt):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    name = dotted_name(t.target)
                    if name:
                        out.add(name)
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                name = dotted_name(node.target)
                if name:
                    out.add(name)
    return out


def _walk_statements(node: cst.CSTNode):
    """Assignments of a statement and of the blocks nested in it (not of nested functions/classes)."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return
    if isinstance(node, cst.SimpleStatementLine):
        yield from node.body
        return
    if isinstance(node, cst.BaseSmallStatement):
        yield node
        return
    for child in node.children:
        if isinstance(child, (cst.BaseStatement, cst.BaseSuite, cst.BaseSmallStatement, cst.Else,
                              cst.ExceptHandler, cst.Finally)):
            yield from _walk_statements(child)


def _grows(stmt: cst.CSTNode, name: str) -> bool:
    """`name.append(...)` (or another growing call on `name`) as a statement of its own."""
    smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else (stmt,)
    return any(isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and
               isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value in _GROWING and
               dotted_name(small.value.func.value) == name for small in smalls)


def _last(func: cst.BaseExpression) -> Optional[str]:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _comp_source(e: cst.BaseExpression) -> Optional[str]:
    """The name a comprehension without filters iterates (`[a.text for a in valid]` is as long as `valid`)."""
    if isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)) and e.for_in.inner_for_in is None \
            and not e.for_in.ifs:
        return dotted_name(e.for_in.iter)
    return None


def _unwrap(e: cst.BaseExpression) -> cst.BaseExpression:
    """`list(x)`, `sorted(x)`, `tuple(x)`: as long as `x`."""
    while isinstance(e, cst.Call) and _last(e.func) in ("list", "tuple", "sorted", "set") and e.args \
            and e.args[0].keyword is None:
        e = e.args[0].value
    return e


def may_raise_on_empty(node: cst.CSTNode) -> bool:
    """Can `ExceptionTracking` find, in `node`, an operation that raises on a maybe-empty or maybe-None value?
    Decided on the syntax alone, as a superset (nested scopes included, rank-dependence ignored). A value can
    be maybe-empty only through an assignment of a filtering comprehension or `filter(...)`, a name bound to
    `[]`/`()`/`list()` that grows (`.append`/...), or a comprehension over one of those; maybe-None through
    `next(it, None)` or a name bound to None and bound again. An operation raises on a maybe-empty name read as
    `EMPTY_RAISING`'s first argument, subscripted or divided by its `len`; on a maybe-None name read in any of
    those ways, or for an attribute or its `len`. Without such a pair, a walk of `node` finds no raising
    operation of its own."""
    from dslint.sources.cstwalk import walk
    bound: dict[str, int] = {}
    nones: set[str] = set()
    empties: set[str] = set()
    maybe_empty: set[str] = set()
    maybe_none: set[str] = set()
    grown: set[str] = set()
    derived: list[tuple[str, str]] = []         # (name, the name its comprehension iterates)
    read_any: set[str] = set()                   # read where an empty or a None value raises
    read_none: set[str] = set()                  # read where only None raises
    read_empty: set[str] = set()                 # read where only an empty value raises

    def reads(e: cst.BaseExpression, into: set) -> None:
        name = dotted_name(e) or _comp_source(e)
        if name:
            into.add(name)

    for n in walk(node):
        kind = type(n)
        if kind is cst.Call:
            func = n.func
            last = _last(func)
            if type(func) is cst.Attribute and func.attr.value in _GROWING:
                name = dotted_name(func.value)
                if name:
                    grown.add(name)
            if n.args and last in EMPTY_RAISING:
                reads(n.args[0].value, read_any)
            elif n.args and last == "len":
                reads(n.args[0].value, read_none)
        elif kind is cst.Subscript:
            reads(n.value, read_any)
        elif kind is cst.Attribute:
            reads(n.value, read_none)
        elif kind is cst.BinaryOperation:
            right = n.right
            if isinstance(right, cst.Call) and _last(right.func) == "len" and right.args:
                reads(right.args[0].value, read_empty)
        elif kind is cst.Assign or kind is cst.AnnAssign and n.value is not None:
            value = n.value
            inner = _unwrap(value)
            names = [x for x in ([dotted_name(t.target) for t in n.targets] if kind is cst.Assign
                                 else [dotted_name(n.target)]) if x]
            for name in names:
                bound[name] = bound.get(name, 0) + 1
            if filters(inner) or isinstance(inner, cst.Call) and _last(inner.func) == "filter":
                maybe_empty.update(names)
            elif isinstance(inner, cst.Call) and _last(inner.func) == "next":
                maybe_none.update(names)
            elif isinstance(value, cst.Name) and value.value == "None":
                nones.update(names)
            elif isinstance(inner, (cst.List, cst.Tuple)) and not inner.elements or \
                    isinstance(inner, cst.Call) and _last(inner.func) == "list" and not inner.args:
                empties.update(names)
            else:
                source = _comp_source(inner)
                if source:
                    derived.extend((name, source) for name in names)
    maybe_none.update(name for name in nones if bound[name] > 1)
    maybe_empty.update(empties & grown)
    changed = True
    while changed:
        changed = False
        for name, source in derived:
            if source in maybe_empty and name not in maybe_empty:
                maybe_empty.add(name)
                changed = True
    return bool(maybe_none & (read_any | read_none) or maybe_empty & (read_any | read_empty))


class ExceptionTracking:
    """Mixin of `HazardWalk`: tracks maybe-empty names and raising operations on them in statement order."""

    def _exc_init(self) -> None:
        self.maybe: dict[str, MaybeEmpty] = {}
        self.empty_init: dict[str, int] = {}     # `xs = []`: name -> number of guards at the binding
        self.none_init: dict[str, int] = {}      # `x = None`
        self._grown_at: dict[str, int] = {}      # grown under a test: name -> number of guards at its `xs = []`
        self.raising: list[RaisingOp] = []
        self._both_assigned: list[set[str]] = []
        self._loops: list[cst.CSTNode] = []
        self._try_depth = 0
        # grown/assigned values take effect past the `if`/loop they were set in (inside it they are set):
        # one dict per enclosing statement, promoted when it ends
        self._deferred: list[dict[str, MaybeEmpty]] = []
        self._exc_pred: dict[int, cst.If] = {}      # an `elif` link → the link it is the `orelse` of

    def exc_enter(self) -> None:
        self._deferred.append({})

    def exc_leave(self) -> None:
        done = self._deferred.pop()
        for name, value in done.items():
            if self._deferred:
                self._deferred[-1][name] = value
            self.maybe[name] = value

    def _defer(self, value: MaybeEmpty) -> None:
        if self._deferred:
            self._deferred[-1][value.name] = value
        else:
            self.maybe[value.name] = value

    # --- bindings ------------------------------------------------------------------------------------
    def exc_assign(self, target: cst.BaseExpression, value: cst.BaseExpression, guards) -> None:
        name = dotted_name(target)
        if name is None:
            for sub in _names_in(target) if isinstance(target, (cst.Tuple, cst.List)) else ():
                self._forget(sub)
            return
        self._unpath(name)
        conds = _conditioning(guards)
        if name in self.none_init and len(conds) > self.none_init[name] and \
                not any(name in both for both in self._both_assigned):
            g = conds[-1]
            test = g.test if g.kind == "exit" else g.node
            self._defer(MaybeEmpty(name, "none", test, g.origin, "assigned", _code(test), self.src,
                                   self._path_now()))
            return              # still None on the ranks that skip this branch
        self._forget(name)
        inner = _unwrap(value)
        if isinstance(value, cst.Name) and value.value == "None":
            self.none_init[name] = len(conds)
            return
        if isinstance(inner, (cst.List, cst.Tuple)) and not inner.elements or \
                isinstance(inner, cst.Call) and _last(inner.func) in ("list",) and not inner.args:
            self.empty_init[name] = len(conds)
            return
        if filters(inner) or isinstance(inner, cst.Call) and _last(inner.func) == "filter":
            origin = self.eval(inner)
            if origin is not None:
                self.maybe[name] = MaybeEmpty(name, "empty", inner, origin, source=self.src)
            return
        src = _comp_source(inner) or (dotted_name(inner) if isinstance(inner, (cst.Name, cst.Attribute)) else None)
        if src is not None and src in self.maybe and self.maybe[src].kind == "empty":     # (`inputs = kept`)
            self.maybe[name] = MaybeEmpty(name, "empty", self.maybe[src].node, self.maybe[src].origin,
                                          self.maybe[src].how, self.maybe[src].test, self.maybe[src].source)
            return
        if isinstance(inner, cst.Call) and _last(inner.func) == "next" and len(inner.args) == 2 and \
                isinstance(inner.args[1].value, cst.Name) and inner.args[1].value.value == "None":
            origin = self.eval(inner.args[0].value)
            if origin is not None:
                self.maybe[name] = MaybeEmpty(name, "none", inner, origin, "next", source=self.src)

    def _forget(self, name: str) -> None:
        self.maybe.pop(name, None)
        for pending in self._deferred:
            pending.pop(name, None)
        self.empty_init.pop(name, None)
        self.none_init.pop(name, None)
        self._grown_at.pop(name, None)

    def exc_checked(self, test: cst.CSTNode) -> None:
        """A test that reads the name decides what to do with an empty/None value: the user's decision."""
        if not (self.maybe or self.empty_init or self.none_init):
            return
        for name in _names_in(test):
            if name in self.maybe or name in self.none_init or name in self.empty_init:
                grown = self.maybe.get(name)
                self._forget(name)
                if grown is not None and grown.how == "grown":
                    # lists grown in lockstep -- appended after the same test, in the same pass -- are empty
                    # together: a test of one decides for all (`if len(inputs) <= 0: continue` before
                    # `max(cnt_list)`, both appended after `if cnt <= 0: continue`)
                    for other in [n for n, v in self.maybe.items() if v.how == "grown" and v.node is grown.node]:
                        self._forget(other)

    def exc_growth(self, call: cst.Call, guards) -> None:
        """`xs.append(o)` under a rank-dependent test taken after `xs = []`."""
        if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in _GROWING:
            return
        name = dotted_name(call.func.value)
        if name is None:
            return
        conds = _conditioning(guards)
        if name not in self.empty_init:
            level = self._grown_at.get(name)
            if level is not None and self._adds_items(call) and \
                    len([g for g in conds if not self._exit_grew(g, name)]) <= level:
                # grown under a test, then on every rank that got to its binding (`outputs.append(done)` under
                # `if finished:`, then `outputs.extend(rest)`): not empty past here, whatever the test decided
                self._forget(name)
            return
        if len(conds) > self.empty_init[name]:
            # the tests of an `if` chain every branch of which grows the list (`if i == rank: xs.append(mine)
            # else: xs.append(zeros)`) decide what is appended, not whether: it grows on every rank there
            level = len(conds)
            chain = self._growing_chain(name)
            while level and (chain and conds[level - 1].kind != "exit" and id(conds[level - 1].node) in chain
                             or self._exit_grew(conds[level - 1], name)):
                level -= 1
            if level > self.empty_init[name]:
                g = conds[level - 1]
                test = g.test if g.kind == "exit" else g.node
                self._defer(MaybeEmpty(name, "empty", test, g.origin, "grown", _code(test), self.src,
                                       self._path_now()))
                self._grown_at[name] = self.empty_init[name]
        del self.empty_init[name]       # grown on every rank otherwise (or already maybe-empty)

    def _adds_items(self, call: cst.Call) -> bool:
        """Does the growing call add at least one item as far as this walk knows? `append`/`insert`/`add` do;
        `extend`/`update` do unless handed an empty literal or a value this walk holds as maybe-empty (a value of
        unknown length counts as items, as it does for the list's first growth)."""
        if call.func.attr.value not in ("extend", "update"):
            return True
        arg = call.args[0].value if call.args and not call.args[0].star else None
        if arg is None or isinstance(arg, (cst.List, cst.Tuple, cst.Dict, cst.Set)) and not arg.elements:
            return False
        name = dotted_name(arg) or _comp_source(arg)
        return not name or not (name in self.maybe or name in self.empty_init or
                                any(name in pending for pending in self._deferred))

    def _exit_grew(self, guard, name: str) -> bool:
        """Issue 30 (complement-extend-not-counted): is `guard` an exit (`continue`, `break`, `return`) whose own
        branch grew `name` before leaving -- `if num_images == 0: xs.append(e); continue` -- so that a growth
        past it (`xs.append(other)` on the path that stays) completes, not conditions, the list's growth: every
        pass that reaches either side adds an item, and the test decides which item, not whether."""
        if guard.kind != "exit" or guard.test is None:
            return False
        holder = self.src._parents.get(id(guard.test))
        if not isinstance(holder, cst.If) or holder.test is not guard.test:
            return False
        blocks = [holder.body] + ([holder.orelse.body] if isinstance(holder.orelse, cst.Else) else [])
        for block in blocks:
            statements = list(getattr(block, "body", ()))
            for i, stmt in enumerate(statements):
                smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
                if stmt is guard.node or any(small is guard.node for small in smalls):
                    return any(_grows(before, name) for before in statements[:i])
        return False

    def _growing_chain(self, name: str) -> set:
        """The tests (ids) of the innermost `if` chain being walked when every one of its branches, a final `else`
        included, grows `name` in a statement of its own body (`name.append(...)` outside any nested block);
        empty otherwise."""
        ifs = getattr(self, "_ifs", ())
        if not ifs:
            return set()
        head = ifs[-1]
        while id(head) in self._exc_pred:
            head = self._exc_pred[id(head)]
        links = [head]
        while isinstance(links[-1].orelse, cst.If):
            links.append(links[-1].orelse)
        last = links[-1].orelse
        if not isinstance(last, cst.Else):
            return set()
        for body in [link.body for link in links] + [last.body]:
            if not any(_grows(stmt, name) for stmt in getattr(body, "body", ())):
                return set()
        return {id(link.test) for link in links}

    # --- raising operations ------------------------------------------------------------------------
    def _maybe_of(self, e: cst.BaseExpression, kinds=("empty", "none")) -> Optional[MaybeEmpty]:
        name = dotted_name(e)
        if name is None:
            name = _comp_source(e)
        hit = self.maybe.get(name) if name else None
        if hit is None or hit.kind not in kinds:
            return None
        if hit.test and any(g.kind in ("cond", "cond-balanced") and _code(g.node) == hit.test
                            for g in getattr(self, "_guards_now", ())):
            return None         # under the same test that set it (`if is_main: x = ...` … `if is_main: x.y`)
        if hit.path and path_implies(self, self._path_now(), hit.path):
            return None         # every path to this use sets it (`if is_main and a is None: x = …` … `if a is
                                # None: … if is_main: x.y`)
        return hit

    # --- path correlation ------------------------------------------------------------------------------
    def _path_now(self) -> tuple:
        """The tests of the enclosing `if`s with the side taken, the earlier links of an `elif` chain as false."""
        return if_path(getattr(self, "_ifs", ()), getattr(self, "_holds", ()), self._exc_pred)

    def _unpath(self, name: str) -> None:
        """`name` is rebound: the tests that read it no longer say what they said at an assignment."""
        for table in (self.maybe, *self._deferred):
            for value in table.values():
                if value.path and any(name in _names_in(test) for test, _ in value.path):
                    value.path = None

    def exc_expr(self, e: cst.CSTNode, guards=()) -> None:
        if not self.maybe or self._try_depth:
            return
        self._guards_now = guards
        if isinstance(e, cst.Call):
            last = _last(e.func)
            callee = self.taint.facts.resolve_expr(e.func) or ""
            module_ok = isinstance(e.func, cst.Name) and last in ("max", "min") or \
                callee.startswith(_EMPTY_MODULES)
            first = e.args[0] if e.args else None
            if last in EMPTY_RAISING and module_ok and first is not None and first.keyword is None and first.star == "" \
                    and not any(a.keyword is not None and a.keyword.value == "default" for a in e.args) \
                    and not (last in ("max", "min") and len([a for a in e.args if a.keyword is None]) > 1):
                kinds = ("none",) if last in _NAN_ON_EMPTY and not callee.startswith("statistics") else \
                    ("empty", "none")
                hit = self._maybe_of(first.value, kinds)
                if hit is not None:
                    what = "an empty list" if hit.kind == "empty" else "None"
                    self._raise(e, hit, f"`{_code(e)}` raises on {what}")
                    return
            if last == "len" and first is not None:
                hit = self._maybe_of(first.value, ("none",))
                if hit is not None:
                    self._raise(e, hit, f"`{_code(e)}` raises TypeError on None")
            return
        if isinstance(e, cst.Subscript):
            hit = self._maybe_of(e.value)
            if hit is not None and (hit.kind == "none" or len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index)
                                    and isinstance(literal_value(e.slice[0].slice.value), int)):
                what = "IndexError on an empty list" if hit.kind == "empty" else "TypeError on None"
                self._raise(e, hit, f"`{_code(e)}` raises {what}")
            return
        if isinstance(e, cst.Attribute):
            hit = self._maybe_of(e.value, ("none",))
            if hit is not None:
                self._raise(e, hit, f"`{_code(e)}` raises AttributeError on None")
            return
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)):
            right = e.right
            if isinstance(right, cst.Call) and _last(right.func) == "len" and right.args:
                hit = self._maybe_of(right.args[0].value, ("empty",))
                if hit is not None:
                    self._raise(e, hit, f"`{_code(e)}` raises ZeroDivisionError on an empty list")

    def exc_helper(self, call: cst.Call, ops: list) -> None:
        """`rewards = self.score(outputs)` where `score` raises on a per-rank empty value with no collective after
        it: the raise happens here, before this body's later collectives."""
        if self._try_depth:
            return
        for source, op in ops:
            where = f"{source.path}:{source.span(op.node).line}"
            self.raising.append(RaisingOp(call, op.value, f"`{_code(call)}` can raise: {op.what} at {where}",
                                          tuple(self._loops), (source, op)))

    def _raise(self, node: cst.CSTNode, hit: MaybeEmpty, what: str) -> None:
        self.raising.append(RaisingOp(node, hit, what, tuple(self._loops)))
        self.maybe.pop(hit.name, None)      # one report per value: past the first raise it is known non-empty


def path_implies(walk, use: tuple, assigned: tuple) -> bool:
    """Does every rank and every value of the other tests that takes the `use` path also take the `assigned`
    one? Tests are split into `and`/`or`/`not` of leaves: a leaf that is a function of the rank
    (`sequences.rank_formula`: `is_main`, `get_rank() == 0`, a name bound once to one) is decided per
    representative rank; a leaf that asks whether the run is distributed (`dist.is_initialized()`,
    `local_rank == -1`) takes its distributed side (a single process has no rank to wait); any other leaf is a
    free boolean, the same leaf wherever it is written alike (`a is not None` is `not (a is None)`). Names are
    read through their one binding in the walk. False when unknown (too many leaves)."""
    from dslint.program.rank.collective_sequences import representatives
    own = {id(t) for t, _ in use}
    need = [(t, h) for t, h in assigned if id(t) not in own or (t, h) not in use]
    if not need:
        return True
    consts: set = set()
    atoms: dict[str, None] = {}
    leaves: dict[int, object] = {}
    for test, _ in (*use, *need):
        _leaves(walk, test, consts, atoms, leaves, 0)
    if len(atoms) > MAX_ATOMS:
        return False
    names = list(atoms)
    reps = representatives(consts)
    for bits in range(1 << len(names)):
        values = {n: bool(bits >> i & 1) for i, n in enumerate(names)}
        for r in reps:
            def truth(e):
                return _truth(leaves, values, r, e)
            taken = [truth(t) for t, _ in use]
            if any(v is None for v in taken):
                return False
            if all(v == h for v, (_, h) in zip(taken, use)):
                got = [truth(t) for t, _ in need]
                if any(v is None or v != h for v, (_, h) in zip(got, need)):
                    return False
    return True


def ranks_taking(walk, path: tuple) -> Optional[set]:
    """The representative ranks for which some value of the other leaves takes every (test, side) of `path`
    (see `path_implies`), with the constants its rank leaves compare with; None when too many leaves."""
    from dslint.program.rank.collective_sequences import representatives
    consts: set = set()
    atoms: dict[str, None] = {}
    leaves: dict[int, object] = {}
    for test, _ in path:
        _leaves(walk, test, consts, atoms, leaves, 0)
    if len(atoms) > MAX_ATOMS:
        return None
    names = list(atoms)
    out: set = set()
    for r in representatives(consts):
        for bits in range(1 << len(names)):
            values = {n: bool(bits >> i & 1) for i, n in enumerate(names)}
            if all(_truth(leaves, values, r, t) == h for t, h in path):
                out.add(r)
                break
    return out
