"""Which module attributes `forward` reaches on which paths.

The paths of a `forward` (and of the `self.method(...)` helpers it calls, inlined) are enumerated through
`if`/`elif`/`else`, early `return`, loops and conditional expressions. Each path records the branch decisions
it took, split in two kinds: **data-dependent** tests (they read forward's inputs or the rank:
`if images is not None`, `if x.shape[1] == 1`, `for img in images`) can go differently on different ranks
in the same step; **uniform** tests (`self.training`, `self.config.x`, `return_dict`, `use_cache`) go the same
way everywhere. An attribute is *divergent* when one path uses it and another path that agrees on every
uniform decision does not: then ranks whose batch takes the other path produce no gradient for it.
Paths ending in `raise` are not executions and are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from dslint.program.models.modules import ModuleClass
from dslint.sources.cstwalk import visit as cst_visit
from dslint.program.facts import dotted_name

MAX_PATHS = 512
MAX_DEPTH = 5
# forward arguments that are the same on every rank of a training step
UNIFORM_ARGS = {"self", "return_dict", "output_attentions", "output_hidden_states", "use_cache", "labels",
                "past_key_values", "return_loss", "training", "train", "is_training", "mode", "cache_position",
                "logits_to_keep", "num_logits_to_keep", "return_dict_in_generate", "inference", "deterministic",
                "output_router_logits", "position_ids", "head_mask", "inputs_embeds", "use_return_dict"}
RANK_HINTS = ("get_rank", "local_rank", "global_rank", "is_main_process", "process_index", "LOCAL_RANK")


class TooManyPaths(Exception):
    pass


@dataclass(frozen=True)
class Path:
    decisions: frozenset            # {(cond_id, taken: bool, data_dependent: bool)}
    uses: frozenset                 # attribute names read on this path
    raised: bool = False

    def take(self, cond: int, taken: bool, dd: bool) -> "Path":
        return Path(self.decisions | {(cond, taken, dd)}, self.uses, self.raised)

    def use(self, names: frozenset) -> "Path":
        return Path(self.decisions, self.uses | names, self.raised) if names - self.uses else self


@dataclass
class Condition:
    node: cst.CSTNode
    method: str
    src: object = None          # the PythonSource holding the node (helpers may live in a mixin's file)


class _Names(cst.CSTVisitor):
    def __init__(self, interesting: frozenset) -> None:
        self.interesting = interesting
        self.attrs: set[str] = set()
        self.names: set[str] = set()
        self.calls: list[cst.Call] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in self.interesting:
            self.attrs.add(node.attr.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)
        if dotted_name(node.func) == "getattr" and len(node.args) > 1:
            value = node.args[1].value
            if isinstance(value, cst.SimpleString) and value.evaluated_value in self.interesting:
                self.attrs.add(value.evaluated_value)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return True


class ForwardPaths:
    """Enumerates the paths of one root method of `cls`, inlining `self.<method>()` helpers."""

    def __init__(self, cls: ModuleClass, interesting: frozenset) -> None:
        self.cls = cls
        self.interesting = interesting
        self.conditions: list[Condition] = []
        self.uses_at: dict[str, list[tuple[cst.CSTNode, str, object]]] = {}
        self._stack: list[str] = []
        self._srcs: list[object] = [cls.src]
        self._loop_vars: set[str] = set()

    # --- expressions ------------------------------------------------------------------------------
    def _scan(self, node: cst.CSTNode) -> _Names:
        names = _Names(self.interesting)
        cst_visit(node, names)
        return names

    def _is_dd(self, node: cst.CSTNode, dd: set[str]) -> bool:
        scan = self._scan(node)
        if scan.names & self._loop_vars:
            return False
        text = cst.Module([]).code_for_node(node)
        if any(h in text for h in RANK_HINTS):
            return True
        if not scan.names & dd:
            return False
        presence = _Presence(dd)
        presence._bare = _bare_names(node) if isinstance(node, cst.BaseExpression) else set()
        cst_visit(node, presence)
        return presence.data_dependent

    def _expr(self, node: cst.CSTNode, paths: list[Path], dd: set[str], method: str, record: bool = True
              ) -> list[Path]:
        """Uses in an expression; inlines `self.helper(...)` calls it makes."""
        scan = self._scan(node)
        used = frozenset(scan.attrs)
        if record:
            for a in used:
                self.uses_at.setdefault(a, []).append((node, method, self._srcs[-1]))
        paths = [p.use(used) for p in paths]
        for call in scan.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                found = self.cls.find_method(func.attr.value)
                if found is not None and found[1].name not in self._stack and len(self._stack) < MAX_DEPTH:
                    callee_dd = self._bind(found[1].node, call, dd)
                    self._srcs.append(found[0].src)
                    try:
                        paths = self.run(found[1].node, paths, callee_dd)
                    finally:
                        self._srcs.pop()
        return paths

    def _bind(self, fn: cst.FunctionDef, call: cst.Call, dd: set[str]) -> set[str]:
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][1:]
        out: set[str] = set()
        positional = [a for a in call.args if a.keyword is None and not a.star]
        for name, arg in zip(params, positional):
            if self._is_dd(arg.value, dd) and name not in UNIFORM_ARGS:
                out.add(name)
        for arg in call.args:
            if arg.keyword is not None and self._is_dd(arg.value, dd) and arg.keyword.value not in UNIFORM_ARGS:
                out.add(arg.keyword.value)
            if arg.star and self._is_dd(arg.value, dd):
                out |= {p.name.value for p in fn.params.kwonly_params} | set(params)
                if isinstance(fn.params.star_kwarg, cst.Param):
                    out.add(fn.params.star_kwarg.name.value)
        return out - UNIFORM_ARGS

    # --- statements -------------------------------------------------------------------------------
    def run(self, fn: cst.FunctionDef, paths: list[Path], dd: set[str]) -> list[Path]:
        """Paths after running `fn` (returns rejoin the caller)."""
        self._stack.append(fn.name.value)
        try:
            params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
            dd = set(dd) | (_derived(fn, dd) - params)   # a parameter keeps its own kind until reassigned
            live, ended = self._block(fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], paths, dd,
                                      fn.name.value)
            return live + ended["return"] + ended["raise"]
        finally:
            self._stack.pop()

    def root(self, fn: cst.FunctionDef) -> list[Path]:
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)]
        if isinstance(fn.params.star_kwarg, cst.Param):
            params.append(fn.params.star_kwarg.name.value)
        if isinstance(fn.params.star_arg, cst.Param):
            params.append(fn.params.star_arg.name.value)
        dd = set(params) - UNIFORM_ARGS
        return self.run(fn, [Path(frozenset(), frozenset())], dd)

    def _cond(self, node: cst.CSTNode, method: str) -> int:
        self.conditions.append(Condition(node, method, self._srcs[-1]))
        return len(self.conditions) - 1

    def _check(self, paths: list[Path]) -> list[Path]:
        if len(paths) > MAX_PATHS:
            raise TooManyPaths()
        return list(dict.fromkeys(paths))

    def _block(self, stmts, paths: list[Path], dd: set[str], method: str):
        ended: dict[str, list[Path]] = {"return": [], "raise": [], "continue": [], "break": []}
        live = paths
        for stmt in stmts:
            if not live:
                break
            live, sub = self._stmt(stmt, live, dd, method)
            for k, v in sub.items():
                ended[k].extend(v)
        return live, ended

    def _stmt(self, stmt, paths: list[Path], dd: set[str], method: str):
        ended: dict[str, list[Path]] = {"return": [], "raise": [], "continue": [], "break": []}
        if isinstance(stmt, cst.SimpleStatementLine):
            live = paths
            for small in stmt.body:
                value = getattr(small, "value", None)
                if isinstance(value, cst.IfExp):
                    live = self._ifexp(small, value, live, dd, method)
                else:
                    live = self._expr(small, live, dd, method)
                if isinstance(small, cst.Return):
                    ended["return"].extend(live)
                    return [], ended
                if isinstance(small, cst.Raise):
                    ended["raise"].extend(Path(p.decisions, p.uses, True) for p in live)
                    return [], ended
                if isinstance(small, (cst.Continue, cst.Break)):
                    ended["continue" if isinstance(small, cst.Continue) else "break"].extend(live)
                    return [], ended
            return self._check(live), ended
        if isinstance(stmt, cst.If):
            return self._if(stmt, paths, dd, method)
        if isinstance(stmt, (cst.For, cst.While)):
            head = stmt.iter if isinstance(stmt, cst.For) else stmt.test
            paths = self._expr(head, paths, dd, method)
            saved = set(self._loop_vars)
            if isinstance(stmt, cst.For):
                paths = self._expr(stmt.target, paths, dd, method)
                # tests on the loop variable differ per iteration, not per rank: some iteration takes each side
                self._loop_vars |= _derived_from(stmt, _target_names(stmt.target))
            try:
                body, sub = self._block(stmt.body.body, paths, dd, method)
            finally:
                self._loop_vars = saved
            after = body + sub["continue"] + sub["break"]
            ended["return"] += sub["return"]
            ended["raise"] += sub["raise"]
            if isinstance(stmt, cst.While) and self._is_dd(head, dd):
                # a data-dependent `while` may not run at all; a `for` over inputs is taken to run at least once
                # (zero-length inputs are rare, and per-item tests are handled as loop-variant)
                cid = self._cond(head, method)
                after = [p.take(cid, True, True) for p in after] + [p.take(cid, False, True) for p in paths]
            return self._check(after), ended
        if isinstance(stmt, cst.Try):
            live, sub = self._block(stmt.body.body, paths, dd, method)
            if stmt.orelse is not None:
                live, sub2 = self._block(stmt.orelse.body.body, live, dd, method)
                for k in sub:
                    sub[k] += sub2[k]
            return live, sub
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                paths = self._expr(item.item, paths, dd, method)
            return self._block(stmt.body.body, paths, dd, method)
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return paths, ended
        return self._expr(stmt, paths, dd, method), ended

    def _if(self, stmt: cst.If, paths: list[Path], dd: set[str], method: str):
        paths = self._expr(stmt.test, paths, dd, method)
        is_dd = self._is_dd(stmt.test, dd)
        cid = self._cond(stmt.test, method)
        yes, ended = self._block(stmt.body.body, [p.take(cid, True, is_dd) for p in paths], dd, method)
        no_paths = [p.take(cid, False, is_dd) for p in paths]
        if isinstance(stmt.orelse, cst.If):
            no, sub = self._if(stmt.orelse, no_paths, dd, method)
        elif stmt.orelse is not None:
            no, sub = self._block(stmt.orelse.body.body, no_paths, dd, method)
        else:
            no, sub = no_paths, {}
        for k, v in sub.items():
            ended[k] += v
        return self._check(yes + no), ended

    def _ifexp(self, small, value: cst.IfExp, paths: list[Path], dd: set[str], method: str) -> list[Path]:
        rest = small.with_changes(value=cst.Name("None"))
        paths = self._expr(rest, paths, dd, method, record=False)
        paths = self._expr(value.test, paths, dd, method)
        is_dd = self._is_dd(value.test, dd)
        cid = self._cond(value.test, method)
        yes = self._expr(value.body, [p.take(cid, True, is_dd) for p in paths], dd, method)
        no = self._expr(value.orelse, [p.take(cid, False, is_dd) for p in paths], dd, method)
        return self._check(yes + no)


def _derived(fn: cst.FunctionDef, dd: set[str]) -> set[str]:
    """Locals assigned from data-dependent values (flow-insensitive fixpoint)."""
    pairs: list[tuple[set[str], set[str]]] = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            targets: set[str] = set()
            for t in node.targets:
                targets |= _target_names(t.target)
            pairs.append((targets, _names(node.value)))

        def visit_For(self, node: cst.For) -> None:
            pairs.append((_target_names(node.target), _names(node.iter)))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Assigns())
    out = set(dd)
    changed = True
    while changed:
        changed = False
        for targets, sources in pairs:
            if sources & out and not targets <= out:
                out |= targets
                changed = True
    return out - set(dd)


MODALITY = re.compile(r"image|pixel|video|audio|vision|visual|graph|speech|frame|patch|wav|mel|modal|mm_|img|"
                      r"point|voxel|depth|spectrogram", re.I)


FLAG = re.compile(r"(use|return|output|is|do|with|enable|disable|skip|apply|compute|has)_")


class _Presence(cst.CSTVisitor):
    """Is a test data-dependent? Reading an input's value (`x.shape[1] == 1`, `len(x)`, `x.any()`) is; checking
    whether an input was passed (`x is None`, `if x:`) is only for modality inputs (images, audio, …), which
    mixed batches carry on some ranks and not others — `input_ids`, `encoder_outputs`, flags come uniformly."""

    def __init__(self, dd: set[str]) -> None:
        self.dd = dd
        self.data_dependent = False
        self._presence_ok: set[int] = set()

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot)) and \
                isinstance(node.comparisons[0].comparator, cst.Name) and node.comparisons[0].comparator.value == "None" \
                and isinstance(node.left, cst.Name):
            self._presence_ok.add(id(node.left))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.dd:
            return
        if id(node) in self._presence_ok or id(node) in self._bare:
            if MODALITY.search(node.value) and not FLAG.match(node.value):
                self.data_dependent = True
        else:
            self.data_dependent = True

    _bare: set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        pass


def _bare_names(test: cst.BaseExpression) -> set[int]:
    """Names used as truth values: `x`, `not x`, `x and y`."""
    if isinstance(test, cst.Name):
        return {id(test)}
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _bare_names(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _bare_names(test.left) | _bare_names(test.right)
    return set()


def _derived_from(node: cst.CSTNode, seeds: set[str]) -> set[str]:
    pairs: list[tuple[set[str], set[str]]] = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            targets: set[str] = set()
            for t in n.targets:
                targets |= _target_names(t.target)
            pairs.append((targets, _names(n.value)))

    cst_visit(node, Assigns())
    out = set(seeds)
    changed = True
    while changed:
        changed = False
        for targets, sources in pairs:
            if sources & out and not targets <= out:
                out |= targets
                changed = True
    return out


def _names(node: cst.CSTNode) -> set[str]:
    scan = _Names(frozenset())
    cst_visit(node, scan)
    return scan.names


def _target_names(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Name):
        return {node.value}
    if isinstance(node, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for e in node.elements:
            out |= _target_names(e.value)
        return out
    return set()


@dataclass
class Divergence:
    attr: str
    condition: Condition
    use: Optional[tuple[cst.CSTNode, str, object]]


def divergent(paths: list[Path], attr: str) -> Optional[tuple[Path, Path]]:
    """A (using, not-using) pair of executions that agree on every uniform decision."""
    normal = [p for p in paths if not p.raised]
    using = [p for p in normal if attr in p.uses]
    missing = [p for p in normal if attr not in p.uses]
    for u in using:
        uni_u = {(c, t) for c, t, d in u.decisions if not d}
        for m in missing:
            if not any((c, not t) in uni_u for c, t, d in m.decisions if not d):
                return u, m
    return None


def deciding_condition(walker: ForwardPaths, pair: tuple[Path, Path]) -> Optional[Condition]:
    u, m = pair
    m_dec = {(c, t) for c, t, _ in m.decisions}
    for c, t, d in sorted(u.decisions):
        if d and (c, not t) in m_dec:
            return walker.conditions[c]
    for c, t, d in sorted(u.decisions):
        if d and (c, t) not in m_dec:
            return walker.conditions[c]
    return None
