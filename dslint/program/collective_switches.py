"""Switches that turn a collective off (issue 30, cause 8): a fix that silences a collective on the ranks that
skip it through a flag must make the finding go away.

`CollectiveSites` already follows the `self.` flags a caller's branch has decided into the methods it calls on
`self` (`statements.settled_flags`). This module adds the two other ways a caller decides a helper's branch:

- **a literal argument** (or the parameter's literal default): `total(t, sync=False)` where `def total(t,
  sync=True): if sync: dist.all_reduce(t)` -- the call reaches no collective; the parameter must not be rebound
  in the helper;
- **a module global set by a context manager** around the call: `with no_sync(): total_global(t)` where
  `no_sync` (a generator of the checked files) runs `global _SYNC; _SYNC = False` before its `yield`, and the
  helper tests `if _SYNC:` -- the global of the module that defines it (a name imported from there is a copy
  the context manager does not change) -- or tests a local the global switched (`if _DISABLE_BARRIER:
  use_barrier = False` before `if use_barrier: dist.barrier()`: `rebound_flags`).

Flags are keyed so that names of different functions and modules never meet: ("param:<qualname>:<name>",
truth) for a parameter, ("global:<path>:<name>", truth) for a module global; `self.` flags keep their dotted
name. `qualify` turns the bare "name:x" keys `settled_flags` gives into these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import FunctionInfo, dotted_name
from dslint.program.statement_walks import (MEMBER, _bound_names, branch_facts, iter_assigns, iter_calls, own_nodes,
                                            statement_expressions, sub_statements)
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.sources import PythonSource


def _bound_locally(info: FunctionInfo) -> tuple[set[str], set[str]]:
    """(names assigned in the function, names it declares `global`), memoised on the FunctionInfo."""
    memo = info.__dict__.get("_switch_binds")
    if memo is None:
        assigned: set[str] = set()
        for node in iter_assigns(info.node):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    assigned.add(t.target.value)
                elif isinstance(t.target, (cst.Tuple, cst.List)):
                    assigned.update(el.value.value for el in t.target.elements if isinstance(el.value, cst.Name))
                elif isinstance(t.target, cst.Attribute) and dotted_name(t.target) is not None:
                    assigned.add(dotted_name(t.target))        # `args.split = ...`: that field is rebound
        declared = {n.name.value for node in _globals(info.node) for n in node.names}
        memo = info.__dict__["_switch_binds"] = (assigned, declared)
    return memo


def _globals(node: cst.CSTNode):
    """The `global` statements of a function body (not of nested functions)."""
    stack = list(sub_statements(node.body)) if isinstance(node, cst.FunctionDef) else [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleStatementLine):
            yield from (x for x in n.body if isinstance(x, cst.Global))
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif not isinstance(n, cst.BaseExpression):
            stack.extend(sub_statements(n))


def qualify(src: "PythonSource", info: Optional[FunctionInfo], flags: frozenset) -> frozenset:
    """The "name:x" flags of a function's table as parameter or module-global keys (dropped when the name is
    rebound in the function, or imported into the module)."""
    if not any(f[0].startswith("name:") for f in flags):
        return flags
    out = set()
    for flag, truth in flags:
        if not flag.startswith("name:"):
            out.add((flag, truth))
            continue
        name, _, test = flag[5:].partition(MEMBER)
        test = MEMBER + test if test else ""
        if info is None:
            continue
        assigned, declared = _bound_locally(info)
        root = name.split(".", 1)[0]
        if name != root and (name in assigned or any(name.startswith(a + ".") for a in assigned if "." in a)):
            continue                    # a field of the object the function rebinds: its test says nothing else
        if root in info.params and root not in assigned:
            out.add((f"param:{info.qualname}:{name}{test}", truth))
        elif name == root and root not in info.params and root not in assigned and root not in declared \
                and root not in src.facts.imports:
            out.add((f"global:{src.path}:{name}{test}", truth))
    return frozenset(out)


def bound_arguments(call: cst.Call, info: FunctionInfo) -> Optional[dict[str, cst.BaseExpression]]:
    """The callee's parameter → the argument expression this call passes it (None when the call spreads
    `*args`/`**kwargs`: which parameter gets what is not known)."""
    params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
    given: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
        if name is not None:
            given[name] = arg.value
    return given


def literal_flags(call: cst.Call, info: FunctionInfo, tested: frozenset) -> frozenset:
    """("param:<qualname>:<p>", truth) for the parameters of the callee its own branches test (`tested`) that
    this call settles with a literal argument, or leaves at a literal default."""
    prefix = f"param:{info.qualname}:"
    wanted = {f[0][len(prefix):] for f in tested if f[0].startswith(prefix)}
    wanted = {w for w in wanted if "." not in w.partition(MEMBER)[0]}
    if not wanted:
        return frozenset()
    given = bound_arguments(call, info)
    if given is None:
        return frozenset()
    defaults = {p.name.value: literal_value(p.default) for p in (*info.node.params.params,
                                                               *info.node.params.kwonly_params)
                if p.default is not None}
    out = set()
    for key in wanted:
        name, _, test = key.partition(MEMBER)
        value = literal_value(given[name]) if name in given else defaults.get(name, UNKNOWN)
        if value is UNKNOWN:
            continue
        if not test:
            out.add((prefix + key, bool(value)))
        elif not isinstance(value, (list, tuple, dict, set)):
            # `split="dev"` decides the callee's `split == "train"` (false) and `split != "train"` (true)
            out.add((prefix + key, value in literal_members(key)))
    return frozenset(out)


def literal_members(key: str) -> tuple:
    """The literal values of a comparison flag's key (`statements.member_key`)."""
    import ast
    return ast.literal_eval(key.partition(MEMBER)[2])


def rebased(flag: str, theirs: str, mine: str) -> Optional[str]:
    """`flag` about `theirs` (the name itself, a field of it -- `args.local_rank` --, or a comparison of either
    with literals) as the same flag about `mine`; None for a flag about something else."""
    if flag == theirs or flag.startswith((theirs + ".", theirs + MEMBER)):
        return mine + flag[len(theirs):]
    return None


def _subject(key: str) -> str:
    return key.partition(MEMBER)[0]


def contradicts(assumed: frozenset, flags: frozenset) -> bool:
    """Does some (flag, truth) of `flags` fail wherever `assumed` holds? The same flag with the other truth, or a
    comparison of the same subject with literals that `assumed` already excludes (`split` one of ("dev",) leaves
    `split == "train"` false; `local_rank in (-1, 0)` leaves `local_rank not in (-1, 0)` false)."""
    for flag, truth in flags:
        if (flag, not truth) in assumed:
            return True
        if MEMBER not in flag:
            continue
        subject, mine = _subject(flag), None
        for known, held in assumed:
            if MEMBER not in known or _subject(known) != subject or known == flag:
                continue
            if mine is None:
                mine = frozenset(literal_members(flag))
            theirs = frozenset(literal_members(known))
            if held and (truth and not theirs & mine or not truth and theirs <= mine):
                return True
            if not held and truth and mine <= theirs:
                return True
    return False


def testable(flag: tuple, tested: frozenset) -> bool:
    """Can the callee (or a function it calls) test `flag`: the flag itself, or for a comparison any comparison
    of its subject (`local_rank in (-1, 0)` decides the callee's `local_rank == 1`)?"""
    if flag in tested or (flag[0], not flag[1]) in tested:
        return True
    return MEMBER in flag[0] and _subject(flag[0]) in subjects(tested)


def subjects(flags) -> set:
    """The subjects of comparison flags (and the plain flags), to match a caller's flags with a callee's tests."""
    return {_subject(f[0]) for f in flags}


def handed_params(call: cst.Call, caller: FunctionInfo, callee: FunctionInfo) -> dict[str, str]:
    """The caller's parameters this call hands on unchanged to the callee: callee parameter → caller parameter
    (`self._append(obj, gather_obj=gather_obj)` in `def append(self, obj, gather_obj=False)`), for a caller
    parameter the caller never rebinds. A flag the caller's own callers settled for it settles the callee's."""
    given = bound_arguments(call, callee) or {}
    assigned, _ = _bound_locally(caller)
    return {name: arg.value for name, arg in given.items()
            if isinstance(arg, cst.Name) and arg.value in caller.params and arg.value not in assigned
            and arg.value not in ("self", "cls")}


def handed_flags(call: cst.Call, caller: FunctionInfo, callee: FunctionInfo, around: frozenset,
                 tested: frozenset) -> frozenset:
    """The callee's parameter flags (among `tested`) that the caller's settled parameter flags (`around`) decide
    through the parameters the call hands on unchanged (`handed_params`)."""
    if not any(f[0].startswith(f"param:{callee.qualname}:") for f in tested):
        return frozenset()
    out = set()
    wanted = subjects(tested)
    for name, mine in handed_params(call, caller, callee).items():
        for flag, truth in around:
            handed = rebased(flag, f"param:{caller.qualname}:{mine}", f"param:{callee.qualname}:{name}")
            if handed is not None and _subject(handed) in wanted:
                out.add((handed, truth))
    return frozenset(out)


def uniform_facts(test: cst.BaseExpression, truth: bool, uniform) -> frozenset:
    """`branch_facts` of `test` evaluated to `truth`, from its operands that take one value on every rank only
    (`uniform(operand)`): what holds on the ranks that skip `if test:`'s body, as far as it is the same on all."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, truth = test.expression, not truth
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) == truth:
            return uniform_facts(test.left, truth, uniform) | uniform_facts(test.right, truth, uniform)
        return frozenset()
    return branch_facts(test, truth) if uniform(test) else frozenset()


def handed_facts(call: cst.Call, callee: FunctionInfo, facts: frozenset, block: cst.CSTNode) -> frozenset:
    """The caller's unqualified facts ("name:x", "name:x.f", comparisons of either: `statements.branch_facts`)
    as facts of the callee's parameters, for the names the call passes as they are (`f(x, flag=x)`) and that
    `block` (the statements between the test and the call) never rebinds."""
    given = bound_arguments(call, callee)
    if not given or not facts:
        return frozenset()
    rebound = set()
    for node in iter_assigns(block):
        for t in node.targets:
            for el in (t.target.elements if isinstance(t.target, (cst.Tuple, cst.List)) else ()):
                rebound.add(dotted_name(el.value) or "")
            rebound.add(dotted_name(t.target) or "")
    out = set()
    for name, arg in given.items():
        if not isinstance(arg, cst.Name):
            continue
        for flag, truth in facts:
            handed = rebased(flag, "name:" + arg.value, f"param:{callee.qualname}:{name}")
            subject = _subject(flag)[5:]
            if handed is not None and not any(subject == r or subject.startswith(r + ".") for r in rebound if r):
                out.add((handed, truth))
    return frozenset(out)


def context_globals(src: "PythonSource", info: FunctionInfo, resolve) -> dict[int, frozenset]:
    """For every call of the function (by node id) inside `with cm(...):` blocks: the module globals those
    context managers set before their `yield` -- `resolve(src, call)` gives the checked (source, FunctionInfo)
    a `with` item's call runs, or None."""
    memo = info.__dict__.get("_switch_with")
    if memo is not None:
        return memo
    out: dict[int, frozenset] = {}

    def walk(stmts, known):
        for stmt in stmts:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            inner = known
            if isinstance(stmt, cst.With):
                for item in stmt.items:
                    if isinstance(item.item, cst.Call):
                        inner = inner | _set_before_yield(resolve(src, item.item))
            if known:
                for expr in statement_expressions(stmt) if not isinstance(
                        stmt, (cst.SimpleStatementLine, cst.BaseSmallStatement)) else (stmt,):
                    for call in iter_calls(expr):
                        out[id(call)] = known
            if isinstance(stmt, (cst.SimpleStatementLine, cst.BaseSmallStatement)):
                continue
            for sub in sub_statements(stmt):
                if isinstance(sub, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                    walk(sub_statements(sub), inner)
                elif isinstance(sub, cst.BaseCompoundStatement):
                    walk([sub], inner)
                elif hasattr(sub, "body"):
                    walk(sub_statements(sub.body), inner)

    if isinstance(info.node.body, cst.IndentedBlock):
        walk(info.node.body.body, frozenset())
    info.__dict__["_switch_with"] = out
    return out


def _set_before_yield(hit) -> frozenset:
    """("global:<path>:X", truth) for `global X; X = <literal>` (or `old, X = X, <literal>`) before the first
    `yield` of a checked generator function."""
    if hit is None:
        return frozenset()
    src, info = hit
    _, declared = _bound_locally(info)
    body = info.node.body
    if not declared or not isinstance(body, cst.IndentedBlock):
        return frozenset()
    out: dict[str, bool] = {}
    for stmt in body.body:
        if _yields(stmt):
            return frozenset((f"global:{src.path}:{k}", v) for k, v in out.items())
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target, value = small.targets[0].target, small.value
                    pairs = [(target, value)]
                    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                            and len(target.elements) == len(value.elements):
                        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
                    for t, v in pairs:
                        if isinstance(t, cst.Name) and t.value in declared:
                            known = literal_value(v)
                            if known is UNKNOWN:
                                out.pop(t.value, None)
                            else:
                                out[t.value] = bool(known)
    return frozenset()                  # no yield at the top of the body: not a plain context manager


def _yields(stmt: cst.CSTNode) -> bool:
    """Does the statement hold a `yield` (the context manager's body runs there)?"""
    found = []

    class _V(cst.CSTVisitor):
        def visit_Yield(self, node: cst.Yield) -> bool:
            found.append(node)
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    stmt.visit(_V())
    return bool(found)


def rebound_flags(info: FunctionInfo, table: dict[int, frozenset]) -> dict[int, frozenset]:
    """`settled_flags`' table of a function, with what a test of a switched local tells: a name whose every
    binding in the function is a literal store forming the whole body of an `if` on one flag at the top of the
    body (`if _DISABLE_BARRIER: use_barrier = False`), each store of the literal's other truth than the later
    test asks, says at that test which way those `if`s went -- where `use_barrier` holds after them, none of
    them stored `False`: each of their flags failed (`_DISABLE_BARRIER` false, a global a context manager
    sets), and a parameter so switched still holds what the caller passed (its "param:" flag). The calls of
    the table settled by such a name, in top-level statements after those `if`s, gain these flags."""
    body = info.node.body
    if not isinstance(body, cst.IndentedBlock):
        return table
    stores: dict[str, list] = {}            # name → [(stored truth, (flag, truth) of the `if`, statement index)]
    for i, stmt in enumerate(body.body):
        if not isinstance(stmt, cst.If) or stmt.orelse is not None:
            continue
        facts = branch_facts(stmt.test, True)
        pairs = _literal_stores(stmt.body)
        if len(facts) != 1 or not pairs:
            continue
        for node, name, truth in pairs:
            stores.setdefault(name, []).append((node, truth, next(iter(facts)), i))
    if not stores:
        return table
    bindings = _bindings(info)
    switched = {name: rows for name, rows in stores.items()
                if bindings.get(name) == {id(node) for node, *_ in rows}}
    if not switched:
        return table
    params = set(info.params)
    out = dict(table)
    for j, stmt in enumerate(body.body):
        for call in iter_calls(stmt):
            flags = out.get(id(call))
            if not flags:
                continue
            extra = set()
            for name, rows in switched.items():
                for truth in (True, False):
                    if (f"name:{name}", truth) in flags and j > max(r[3] for r in rows) \
                            and all(stored != truth for _, stored, _, _ in rows):
                        extra |= {(flag, not held) for _, _, (flag, held), _ in rows}
                        if name in params:
                            extra.add((f"param:{info.qualname}:{name}", truth))
            if extra:
                out[id(call)] = flags | extra
    return out


def _literal_stores(block) -> list:
    """(Assign node, name, truth) of a block made only of `name = <literal>` statements (else empty)."""
    out = []
    for stmt in sub_statements(block):
        if not isinstance(stmt, cst.SimpleStatementLine):
            return []
        for small in stmt.body:
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                return []
            value = literal_value(small.value)
            if value is UNKNOWN:
                return []
            out.append((small, small.targets[0].target.value, bool(value)))
    return out


def _bindings(info: FunctionInfo) -> dict[str, set]:
    """name → ids of the plain single-name `Assign`s binding it in the function's own scope; a name bound any
    other way too (a loop, `with ... as`, augmented, unpacked, `global`, a nested definition) maps to {0}."""
    out: dict[str, set] = {}
    for n in own_nodes(info.node):
        if isinstance(n, cst.Assign):
            if len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
                out.setdefault(n.targets[0].target.value, set()).add(id(n))
            else:
                for t in n.targets:
                    for name in _bound_names(t.target):
                        out.setdefault(name, set()).add(0)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            for name in _bound_names(n.target):
                out.setdefault(name, set()).add(0)
        elif isinstance(n, (cst.WithItem, cst.ExceptHandler)):
            named = n.asname if isinstance(n, cst.WithItem) else n.name
            if named is not None:
                for name in _bound_names(named.name):
                    out.setdefault(name, set()).add(0)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            for item in n.names:
                out.setdefault(item.name.value, set()).add(0)
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n is not info.node:
            out.setdefault(n.name.value, set()).add(0)
    return out
