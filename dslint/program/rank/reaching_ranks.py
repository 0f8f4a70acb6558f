"""The walk over one function (or module) body that tracks rank-varying names in statement order and the
rank-dependent control around every call: `if`/`elif`/`while`/ternary/`and`/`or` tests, loops whose trip
count follows a rank-varying iterable, and early `return`/`continue`/`break`/`raise`/`sys.exit()` under such a test.

Subclasses override the hooks (`on_call`, `cond_guard`); the base walk alone computes what a function
returns (helper summaries) and which names were ever bound to rank-varying values (module globals).
Nested function and class bodies are walked on their own, as separate scopes.
"""

from __future__ import annotations

from collections import Counter

from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

import libcst as cst

from dslint.program.rank import setting_domains as domains
from dslint.program.rank.library_types import accelerate_typing, fetch_only, item_source, items_key, same_items
from dslint.program.rank.stage_positions import one_rank_coordinates, single_rank_conjunction
from dslint.program.rank.value_uniformity import (_DEVICE_MOVES, TRIP_COUNT_KINDS, Env, Origin, RankTaint, element_of,
                                       is_display, join, mark_written, world_size_group, written_paths_met, WRITTEN)
from dslint.program.process_groups import ALL_AXES, remaining_axes
from dslint.program.facts import MODULE_SCOPE, dotted_name
from dslint.sources.literals import literal_value
from dslint.program.statement_walks import (code_of, iter_assigns, iter_calls, statement_expressions,  # noqa: F401
                                       name_nodes, sub_expressions, sub_statements)

EXIT_CALLS = {"sys.exit", "exit", "quit", "os._exit"}


@dataclass(frozen=True, eq=False)
class Guard:
    """Rank-dependent control around a statement."""

    kind: str                         # "cond" | "loop" | "exit"
    origin: Origin                    # why the test/iterable varies across ranks
    node: cst.CSTNode                 # the test (cond), the loop statement (loop), the exit statement (exit)
    exit_kind: str = ""               # return | continue | break | exit | raise
    test: Optional[cst.CSTNode] = None   # for exits: the test that leads to it
    loop: Optional[cst.CSTNode] = None   # for `continue`: the loop it goes back to
    condition: str = ""               # for conds of an elif/else/case branch: when the branch runs, in words


def _none_test_of(e: cst.BaseExpression) -> bool:
    """`name is None` / `name is not None`."""
    return isinstance(e, cst.Comparison) and len(e.comparisons) == 1 and isinstance(e.left, cst.Name) and \
        isinstance(e.comparisons[0].operator, (cst.Is, cst.IsNot)) and \
        isinstance(e.comparisons[0].comparator, cst.Name) and e.comparisons[0].comparator.value == "None"


def _is_none(e: Optional[cst.BaseExpression]) -> bool:
    return isinstance(e, cst.Name) and e.value == "None"


# the builtin exception classes a handler catches StopIteration by
_STOP_CATCHERS = frozenset({"StopIteration", "Exception", "BaseException"})


def _catches_stop(handler: cst.ExceptHandler) -> bool:
    """Does this handler catch StopIteration: bare, or by StopIteration or one of its (builtin) bases, alone or
    in a tuple?"""
    if handler.type is None:
        return True
    kinds = [el.value for el in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    return any(isinstance(k, cst.Name) and k.value in _STOP_CATCHERS for k in kinds)


def _own_next_calls(stmts: Sequence[cst.CSTNode]) -> list[cst.Call]:
    """The `next(it)` calls (one argument: no default) of these statements whose StopIteration leaves them: not
    in a nested function, class or lambda, nor in the body of a nested `try` one of whose handlers catches it."""
    out: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Try(self, node: cst.Try) -> bool:
            if any(_catches_stop(h) for h in node.handlers):
                for h in node.handlers:
                    h.body.visit(self)
                for part in (node.orelse, node.finalbody):
                    if part is not None:
                        part.visit(self)
                return False
            return True

        def visit_Call(self, node: cst.Call) -> bool:
            if isinstance(node.func, cst.Name) and node.func.value == "next" and len(node.args) == 1 and \
                    node.args[0].keyword is None and not node.args[0].star:
                out.append(node)
            return True

    visitor = _Calls()
    for stmt in stmts:
        stmt.visit(visitor)
    return out


class FlowWalk:
    def __init__(self, taint: RankTaint, scope: str, env: Env, cls: Optional[str] = None,
                 guards: tuple[Guard, ...] = ()) -> None:
        self.taint = taint
        self.scope = scope
        self.env = env
        self.cls = cls
        self.base_guards = guards
        self.ever_bound: Env = dict(env)
        self.returned: Optional[Origin] = None
        self._elements: object = ()          # () before any return; a list per element; None: not always a tuple
        # a `return None` (the whole value, or these tuple positions) under a rank-dependent test of this walk:
        # whether the result is None there varies as that test does (`_none_returned`, `Origin.none_by`)
        self._none_origin: Optional[Origin] = None
        self._none_positions: dict[int, Origin] = {}
        self.loop_depth = 0
        self.loop_iters: list[Optional[cst.BaseExpression]] = []   # enclosing loops' iterables (None: while)
        # group-membership predicates known false on the current path (`else:` of `if is_pipeline_last_stage()`,
        # the body of `if not …`): dslint.program.process_groups.uniform_over
        self.negated: frozenset = frozenset()
        self._tainted_loops = 0
        self._retry_loops: list[bool] = []     # per enclosing loop: is it a retry loop (`_retries`)?
        self._loops: list[cst.CSTNode] = []    # the enclosing loop statements, innermost last
        self._caught = 0                       # depth of enclosing `try` bodies with handlers (a raise is caught)
        self._handling = 0                     # depth of enclosing `except` handlers
        self._ifs: list[cst.If] = []           # the `if`/`elif` links whose branch is being walked, innermost last
        self._holds: list[bool] = []           # per entry of `_ifs`: its test holds there (False: the `else`)
        # names whose value here came out of a collective (all-reduced, sent by the source rank, unpacked from a
        # received buffer): the same on every rank even when each branch of a rank test binds them (`_join_after`)
        self._fresh: set[str] = set()
        # empty lists bound in this walk (`out = []`) that only payloads were appended to so far (`_append_payload`)
        self._filling: set[str] = set()
        # every value this walk returned so far on a path a distributed run takes is a collective's payload (a
        # name in `_fresh`, or an item of one: `return outputs[0]` after `scatter_object_list(outputs, ...)`); None
        # before any such return (`ProjectTaint.returns_payload`)
        self.payload_returns: Optional[bool] = None
        # name → the names whose value it holds in another form (`torch.save(obj, buffer)`, `buffer =
        # torch.ByteTensor(buffer.getbuffer())`, `encoded = pickle.dumps(obj)`): what the source rank sends when it
        # broadcasts the buffer (`_sent_from_source`, `faithful_source`)
        self._encodes: dict[str, frozenset] = {}
        # names bound to the size of a process group (`tp_world_size = dist.get_world_size(tp_group)`): name → the
        # group as code ("" for the world), for the tests that say the group holds one rank (`_single_rank`)
        self._sizes: dict[str, str] = {}
        # parameters one call fixes to a constant (a literal argument, or the default it leaves in place): a walk
        # of the body for that call (`ProjectTaint.returns_at_constants`) takes only the branches they leave live
        self.fixed: dict[str, object] = {}
        self._left_for_fixed = False
        # names one branch of a rank-dependent chain alone binds (`if self.rank == 0: config = model.config`), or
        # a conditional expression on a rank test binds (`buf = [None] * n if rank == 0 else None`): name →
        # ([(the branch's path, its value there), ...], the varying value the join gave it); a later branch whose
        # path implies one of those (`if self.rank == 0:` again) is run only by ranks that bound it there
        self._correlated: dict[str, tuple] = {}
        # names a rank-dependent chain binds to one value on the ranks of one branch and to None on every other
        # (`if rank < n: model = create_model(...) else: model = None`, `x = build() if is_first else None`): name
        # → (that branch's value, the varying value the join gave it); where a later test says the name is not
        # None, the ranks there are those of that branch and hold its value (`_present_side`)
        self._present: dict[str, tuple] = {}
        self._test_names: dict[int, frozenset] = {}     # id(test node) -> the names it reads (`_uncorrelate`)
        # what a name says about the length of a list (`_length_fact`), by the code of that list: ("len", xs) holds
        # len(xs) on this rank (`n = torch.tensor([len(xs)])`), ("gathered", xs) every rank's len(xs) (filled by
        # all_gather_object), ("max", xs) at least len(xs) on every rank (an all_reduce MAX of a "len" tensor, the
        # max of a "gathered" list): padding xs to it gives every rank the same length (`_padded_to`)
        self._lengths: dict[str, tuple] = {}   # also ("floor", (xs, n)) and ("multiple", n): `_floor_multiple`
        self._stmt_names: dict[int, Counter] = {}       # id(statement) -> its names counted (`_item_binding`)
        # counts measured on one side of a rank test (`count = torch.tensor([len(xs)])` under `if rank == 0:`):
        # name -> (code of xs, the path of tests it was measured under, broadcast since); and the names bound on
        # the other side to an object yielding that many items (`xs = FakeDataloader(count[0].item())`): name ->
        # the `if` link the binding's side is of (`announced_counts`, `_note_measured`)
        self._measured: dict[str, tuple[str, tuple, bool]] = {}
        self._agreed: dict[str, int] = {}

    # --- hooks ---------------------------------------------------------------------------------------
    def on_call(self, call: cst.Call, guards: tuple[Guard, ...]) -> None:
        pass

    def reaches_sites(self, stmts: Sequence[cst.CSTNode]) -> bool:
        """Does every rank running `stmts` reach a collective? (A test whose every branch does is balanced.)"""
        return False

    def enter_if(self, node: cst.If) -> None:
        """Before the test of each `if`/`elif` of a chain (the chain's links are left in reverse order)."""

    def chain_covers_ranks(self, links: list[cst.If]) -> bool:
        """Does some link of this `if`/`elif` chain hold on every rank the run starts (its final `else` is then
        dead: `if rank == 0: … elif rank == 1: … else: raise` with two processes)? (sequences.Records)"""
        return False

    def leave_if(self, node: cst.If) -> None:
        pass

    def branch_path(self) -> Optional[tuple]:
        """The tests around the statement being walked, each with the side taken (None: not tracked)."""
        return None

    def path_implies(self, use: tuple, assigned: tuple) -> bool:
        """Does every rank taking the `use` path take the `assigned` one? (False: not known.)"""
        return False

    # --- driver --------------------------------------------------------------------------------------
    def run(self, stmts: Sequence[cst.CSTNode]) -> None:
        self.block(stmts, self.base_guards)

    def eval(self, e: Optional[cst.BaseExpression]) -> Optional[Origin]:
        origin = self.taint.eval(e, self.env, self.cls)
        if origin is not None and origin.kind in ("rank", "shard") and type(e) is cst.BinaryOperation and \
                isinstance(e.operator, cst.Add) and self._padded_to(e.left, e.right):
            # `mine + [None] * (max_count - len(mine))` with `max_count` the MAX over the ranks of len(mine): as
            # long as `max_count` everywhere, each item still this rank's
            return _padded(origin)
        return origin

    def _padded_to(self, base: cst.BaseExpression, pad: cst.BaseExpression) -> bool:
        """Does appending `pad` to the list `base` (`base + pad`, `base += pad`, `base.extend(pad)`) give it the
        same length on every rank? `pad` is `[fill] * (m - len(base))` (or `(m - len(base)) * [fill]`, `[fill
        for _ in range(m - len(base))]`), so the length becomes max(m, len(base)): `m` must be at least len(base)
        on every rank -- the MAX over the ranks of len(base), all-reduced or taken of the gathered lengths
        (`_lengths`) -- and the same on every rank (`eval`: a MAX over a group of known grid axes leaves it varying
        in the others, so the padded length does too)."""
        count = _pad_count(pad)
        if not (isinstance(count, cst.BinaryOperation) and isinstance(count.operator, cst.Subtract)):
            return False
        length = count.right
        if not (isinstance(length, cst.Call) and isinstance(length.func, cst.Name) and length.func.value == "len"
                and len(length.args) == 1 and code_of(length.args[0].value, 400) == code_of(base, 400)):
            return False
        return self._length_fact(count.left) == ("max", code_of(base, 400)) and self.eval(count.left) is None

    def _length_fact(self, e: cst.BaseExpression) -> Optional[tuple[str, str]]:
        """What `e` says about a list's length (`_lengths`): `len(xs)` is ("len", xs); a torch constructor of it
        (`torch.tensor([len(xs)])`, `torch.cuda.LongTensor([n])`) and a conversion of a one-item tensor
        (`int(t)`, `t.item()`, `t.tolist()`, `t[0]`, `t.cpu()`) keep the fact; `max(lengths)` of a gathered
        list is ("max", xs)."""
        for _ in range(8):
            if isinstance(e, cst.Name):
                return self._lengths.get(e.value)
            if isinstance(e, cst.BinaryOperation):
                return _floor_multiple(e)
            if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Slice):
                # `xs[:k]` with k = len(xs) rounded down to a multiple of n: a length that is a multiple of n
                cut = e.slice[0].slice
                if cut.lower is None or literal_value(cut.lower) == 0:
                    if cut.step is None and cut.upper is not None:
                        fact = self._length_fact(cut.upper)
                        # pandas' positional row indexer cuts the frame's rows (`df.iloc[:k]`)
                        rows = e.value.value if isinstance(e.value, cst.Attribute) and e.value.attr.value == "iloc" \
                            else e.value
                        if fact is not None and fact[0] == "floor" and fact[1][0] == code_of(rows, 400):
                            return "multiple", fact[1][1]
                return None
            if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and \
                    literal_value(e.slice[0].slice.value) in (0, -1):
                e = e.value
                continue
            if not isinstance(e, cst.Call):
                return None
            func = e.func
            positional = [a.value for a in e.args if a.keyword is None and not a.star]
            if isinstance(func, cst.Attribute) and func.attr.value in _SCALAR_CONVERSIONS and not positional:
                e = func.value
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "to_dict" and not positional and any(
                    a.keyword is not None and a.keyword.value == "orient" and literal_value(a.value) == "list"
                    for a in e.args):
                # a frame's columns as lists (`df.to_dict(orient="list")`), each as long as the frame: accelerate's
                # `split_between_processes` cuts every value of a dict alike
                e = func.value
                continue
            resolved = self.taint.facts.resolve_expr(func) or ""
            if len(positional) != 1:
                return None
            arg = positional[0]
            if resolved in ("len", "int") and isinstance(func, cst.Name):
                if func.value == "len":
                    return "len", code_of(arg, 400)
                e = arg
                continue
            if resolved == "max" and isinstance(func, cst.Name):
                fact = self._length_fact(arg)
                return ("max", fact[1]) if fact is not None and fact[0] == "gathered" else None
            if resolved.startswith("torch.") or resolved.startswith("numpy."):
                if isinstance(arg, (cst.List, cst.Tuple)) and len(arg.elements) == 1 and \
                        not isinstance(arg.elements[0], cst.StarredElement):
                    arg = arg.elements[0].value
                fact = self._length_fact(arg)
                return fact if fact is not None and fact[0] == "len" else None
            return None
        return None

    def _equal_shares(self, call: cst.Call) -> bool:
        """`<state>.split_between_processes(xs, ...)` giving every process as many items: `apply_padding=True`
        (accelerate pads the shares with the last item), or `xs` of a length that is a multiple of
        `<state>.num_processes` (`_length_fact` "multiple")."""
        if any(a.keyword is not None and a.keyword.value == "apply_padding" and literal_value(a.value) is True
               for a in call.args):
            return True
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if not positional or not isinstance(call.func, cst.Attribute):
            return False
        fact = self._length_fact(positional[0])
        return fact is not None and fact[0] == "multiple" and \
            fact[1] == code_of(call.func.value, 400) + ".num_processes"

    def _note_lengths(self, call: cst.Call) -> None:
        """A collective over a list's length (`_lengths`): `all_reduce(t, op=ReduceOp.MAX)` of a "len" tensor makes
        it a "max" one; `all_gather_object(lengths, len(xs))` (or `all_gather(lengths, t)`) fills a "gathered"
        list."""
        resolved = self.taint.facts.resolve_expr(call.func) or ""
        if not resolved.startswith(("torch.distributed.", "deepspeed.comm.")):
            return
        op = resolved.rsplit(".", 1)[-1]
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if op == "all_reduce" and positional and isinstance(positional[0], cst.Name):
            how = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "op"),
                       positional[1] if len(positional) > 1 else None)
            fact = self._lengths.get(positional[0].value)
            if how is not None and fact is not None and fact[0] == "len" and \
                    (self.taint.facts.resolve_expr(how) or "").endswith("ReduceOp.MAX"):
                self._lengths[positional[0].value] = ("max", fact[1])
        elif op in ("all_gather_object", "all_gather") and len(positional) >= 2 and \
                isinstance(positional[0], cst.Name):
            fact = self._length_fact(positional[1])
            if fact is not None and fact[0] == "len":
                self._lengths[positional[0].value] = ("gathered", fact[1])

    # --- counts agreed through a broadcast (dslint/program/rank/announced_counts.py) ------------------------
    def _path(self) -> tuple:
        return tuple(zip(self._ifs, self._holds))

    def _note_measured(self, target: cst.BaseExpression, value: cst.BaseExpression) -> Optional[str]:
        """Keep `_measured` for the binding `target = value`; the name, when it binds on the other side of the
        test a count was measured under an object that yields as many items as that count, broadcast since."""
        from dslint.program.rank.announced_counts import counted_by, measured, opposite_sides, placeholder, read_back
        name = dotted_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if name is None:
            for n in _target_names_of(target):
                self._forget_measured(n)
            return None
        xs = measured(value)
        if not self._measured and not self._agreed and xs is None:
            return None
        path = self._path()

        def other_side(where: tuple) -> bool:
            return bool(path) and len(where) == len(path) and all(
                a[0] is b[0] and a[1] == b[1] for a, b in zip(where[:-1], path[:-1])) and \
                opposite_sides((where[-1][0].test, where[-1][1]), (path[-1][0].test, path[-1][1]))
        agreed = None
        if isinstance(value, cst.Call) and len(value.args) == 1:
            entry = self._measured.get(read_back(value.args[0].value) or "")
            if entry is not None and entry[2] and entry[0] == name and other_side(entry[1]) and \
                    self.eval(value.args[0].value) is None and counted_by(self.taint.analysis, self.taint.src, value):
                agreed = name
        kept = self._measured.get(name)
        self._forget_measured(name)
        if kept is not None and not kept[2] and placeholder(value) and other_side(kept[1]):
            self._measured[name] = kept         # the others' placeholder (`count = torch.tensor([0])`)
        if xs is not None and path and not self._varying_length(xs, value):
            # (a length that varies on the measuring side itself -- a shard of its own -- agrees with nothing)
            self._measured[name] = (xs, path, False)
        source = read_back(value)
        if source is not None and source != name and source in self._measured and self._measured[source][2]:
            self._measured[name] = self._measured[source]       # `args.n = count[0].item()` of a received count
        return agreed

    def _varying_length(self, xs: str, value: cst.BaseExpression) -> bool:
        """Does the measured `xs` (the `len(...)` argument inside `value`) have a rank-dependent length here?"""
        for node in _calls_of_len(value):
            if code_of(node.args[0].value, 400) == xs:
                held = self.eval(node.args[0].value)
                return held is not None and held.kind in TRIP_COUNT_KINDS
        return True

    def _forget_measured(self, name: str) -> None:
        for key, (base, _, _) in list(self._measured.items()):
            if key == name or base == name:
                del self._measured[key]
        self._agreed.pop(name, None)

    def _note_sent(self, call: cst.Call) -> None:
        """`broadcast(count, src, group)` after the test a count was measured under: every rank of the group
        holds the measured count now."""
        if not self._measured or not (self.taint.facts.resolve_expr(call.func) or "").startswith(
                ("torch.distributed.", "deepspeed.comm.")) or \
                (self.taint.facts.resolve_expr(call.func) or "").rsplit(".", 1)[-1] != "broadcast":
            return
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        name = dotted_name(positional[0]) if positional else None
        entry = self._measured.get(name or "")
        path = self._path()
        if entry is not None and not entry[2] and len(entry[1]) == len(path) + 1 and all(
                a[0] is b[0] and a[1] == b[1] for a, b in zip(entry[1], path)):
            self._measured[name] = (entry[0], entry[1], True)

    def _count_agreed(self, links: list) -> None:
        """After the chain whose side bound `xs` to an object yielding the broadcast count of the other side's
        `xs`: every rank iterates `xs` as often -- the object varies, its length does not (an "item" value)."""
        ids = {id(link) for link in links}
        for name, at in list(self._agreed.items()):
            if at not in ids:
                continue
            del self._agreed[name]
            held = self.env.get(name)
            if held is not None and held.kind in TRIP_COUNT_KINDS:
                # not None anywhere: the source took its len(), the others built it
                self.env[name] = replace(held, kind="item", stream=False, items=None, elements=None, present=True,
                                         rows=True)

    def eval_iter(self, e: Optional[cst.BaseExpression]) -> Optional[Origin]:
        """What a `for` over `e` walks (`RankTaint.iterated`), through this walk's own `eval`."""
        def evaluate(x: cst.BaseExpression, env: Env) -> Optional[Origin]:
            if env is self.env:
                return self.eval(x)
            saved, self.env = self.env, env
            try:
                return self.eval(x)
            finally:
                self.env = saved
        return self.taint.iterated(e, self.env, self.cls, evaluate)

    def eval_test(self, e: Optional[cst.BaseExpression]) -> Optional[Origin]:
        """A value used as a test (`if x:`, `while x`, `x and …`): the truth of a collated batch or of a field
        read from it (`if not local_counts:` for a list built over its rows) is its emptiness or presence, the
        collator's and the same on every rank; tests of its values (`.sum()`, comparisons) vary."""
        if isinstance(e, cst.BooleanOperation):
            # `has_labels or loss_without_labels`: each operand is itself a test (a batch field's truth is the
            # collator's), and the whole varies when one of them does
            left = self.eval_test(e.left)
            if left is not None and left.kind == "rank" and isinstance(e.operator, cst.And) and \
                    single_rank_conjunction(self.taint, e, self.env, self.cls, self.scope):
                return None     # `is_first_stage and is_last_stage`: the group holds one rank, on every rank
            if left is not None and left.axes is None:
                return left
            return join(left, self.eval_test(e.right), isinstance(e.operator, cst.Or))
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
            inner = self.eval_test(e.expression)
            return replace(inner, member=None) if inner is not None and inner.member else inner
        origin = self.eval(e)
        if origin is not None and origin.batch and isinstance(e, (cst.Name, cst.Attribute, cst.Subscript)):
            return None
        if origin is not None and origin.kind == "item" and origin.rows and isinstance(e, (cst.Name, cst.Attribute)):
            return None                 # `if not padded:` of a list padded to the same length on every rank
        if origin is not None and origin.truth and isinstance(e, cst.Name):
            return None                 # `if not path:` of a path never empty on any rank (`Origin.truth`)
        if origin is not None and self.scope != MODULE_SCOPE and _none_test_of(e) and \
                self.taint.analysis.uniform_none_local(self.taint.src, self.scope, e.left.value, e):
            return None                 # `loader is None` where every path the ranks share binds it alike
        return origin

    def bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression], origin: Optional[Origin]) -> None:
        self.taint.bind(target, value, origin, self.env, self.cls)
        names = _target_names_of(target)
        for name in names:
            self._sizes.pop(name, None)
        if self._lengths:
            rebound = {*names, dotted_name(target) or ""}
            for name, (_, base) in list(self._lengths.items()):
                if name in rebound or base in rebound:      # a fact about a list bound again says nothing now
                    del self._lengths[name]
        group = world_size_group(value)
        if isinstance(target, cst.Name) and group is not None:
            self._sizes[target.value] = group
        if self._correlated or self._present:
            self._uncorrelate(names)
        if origin is None and isinstance(value, cst.Name) and value.value in self._fresh:
            self._fresh.update(names)       # `text, stop = payload` of a received buffer
        elif isinstance(value, cst.Subscript) and self._payload_expr(value) and isinstance(target, cst.Name):
            self._fresh.add(target.value)   # `item = outputs[0]` of the list `scatter_object_list` filled
        elif isinstance(target, cst.Name) and value is not None and \
                (held := faithful_source(self.taint.facts, value)) is not None and held in self._fresh:
            # `obj = torch.load(io.BytesIO(buffer.cpu().numpy()))` of a received buffer: the payload, decoded
            self._fresh.add(target.value)
        elif isinstance(value, cst.Call) and (source := self._payload_source(value)) is not None:
            # `data = self._scatter_object_list(data)`: what a helper hands back from its collective, on every
            # branch that calls it (`returns_payload`): the payload as the helper's own walk holds it -- uniform,
            # or this rank's received item, whose None-ness is alike on every rank or not (`Origin.present`)
            self._fresh.update(names)
            if isinstance(target, cst.Name):
                handed = self.taint.analysis.payload_origin(source)
                if handed is None:
                    self.env.pop(target.value, None)
                else:
                    self.env[target.value] = replace(handed, via_call=(self.taint.src, value),
                                                     via=handed.via or "returned by a helper of its collective")
        elif origin is None and value is not None and self._derived_payload(value):
            # `tensor = tensor.view(meta["size"]).to(meta["device"])` of received values: computed from payloads
            # alone, the same on every rank whichever branch computed it
            self._fresh.update(names)
        else:
            self._fresh.difference_update(names)
        self._filling.difference_update(names)
        if isinstance(target, cst.Name) and isinstance(value, cst.List) and not value.elements:
            self._filling.add(target.value)     # `out = []`: a payload once only payloads are appended to it
        held = faithful_source(self.taint.facts, value) if isinstance(target, cst.Name) and value is not None \
            and not isinstance(value, cst.Name) else None
        encoded = self._encodes.get(held, frozenset()) | ({held} - {target.value}) if held is not None else None
        for name in names:
            self._encodes.pop(name, None)
        if encoded:
            self._encodes[target.value] = encoded       # `buffer = torch.ByteTensor(buffer.getbuffer())` included
        for name, o in self.env.items():
            if not name.endswith(WRITTEN):      # a mark, no value (`uniformize`)
                self.ever_bound.setdefault(name, o)

    def _uncorrelate(self, names: list[str]) -> None:
        """`names` are bound again: their records, and those whose path reads one of them, no longer hold."""
        for name in names:
            self._present.pop(name, None)
        for name in list(self._correlated):
            paths = [path for path, _ in self._correlated[name][0]]
            if name in names or any(not self._reads(test).isdisjoint(names) for path in paths for test, _ in path):
                del self._correlated[name]

    def _name_counts(self, stmt: cst.CSTNode) -> Counter:
        """How often each name occurs in `stmt`, once per statement node (`_item_binding` asks per branch and name)."""
        hit = self._stmt_names.get(id(stmt))
        if hit is None:
            hit = self._stmt_names[id(stmt)] = Counter(n.value for n in _names_of(stmt))
        return hit

    def _reads(self, test: cst.CSTNode) -> frozenset:
        """The names `test` reads, once per test node (a correlated path is checked at every later binding)."""
        hit = self._test_names.get(id(test))
        if hit is None:
            hit = self._test_names[id(test)] = frozenset(n.value for n in _names_of(test))
        return hit

    def _recorrelate(self, path: Optional[tuple] = None) -> None:
        """Entering a branch: a name bound by one branch of an earlier rank-dependent chain alone holds, for the
        ranks taking this path when it implies that branch's, the value it had there (`if self.rank == 0:
        model_config = …` … `if self.rank == 0: if "X" in model_config.architectures[0]: …`): inside that
        branch it was the value of the ranks that run it, and these are the same ranks."""
        if not self._correlated:
            return
        path = self.branch_path() if path is None else path
        if not path:
            return
        for name, (alternatives, joined) in self._correlated.items():
            if self.env.get(name) is not joined:
                continue
            for assigned, inner in alternatives:
                if self.path_implies(path, assigned):
                    if inner is None:
                        self.env.pop(name, None)
                    else:
                        self.env[name] = inner
                    break

    def block(self, stmts: Sequence[cst.CSTNode], guards: tuple[Guard, ...]) -> list[Guard]:
        """Walk statements in order; returns the rank-dependent exits that escape this block."""
        pending: list[Guard] = []
        for stmt in stmts:
            more = self.stmt(stmt, guards + tuple(pending))
            if pending and self._leaves_here(stmt):
                # every rank still on this path leaves the function here too (`if bad: raise` then `return`),
                # after what this statement calls: those that left earlier skip nothing the others reach later;
                # their loop exits still escape
                pending = [g for g in pending if g.exit_kind not in _LEAVING]
            pending.extend(more)
            if pending and _forms_world(stmt):
                pending = []        # the ranks that left are no members of the world formed here
            if self._left_for_fixed:
                self._left_for_fixed = False
                break               # the one branch the fixed parameters take leaves the function: dead below
        return pending

    def _leaves_here(self, stmt: cst.CSTNode) -> bool:
        """A `return` (or an uncaught `raise`) of the block itself, whatever the rank."""
        return isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, cst.Return) or isinstance(s, cst.Raise) and not self._caught for s in stmt.body)

    def _branch(self, stmts: Sequence[cst.CSTNode], guards: tuple[Guard, ...]) -> tuple[Env, list[Guard]]:
        saved = self.env
        self.env = dict(saved)
        pending = self.block(stmts, guards)
        out, self.env = self.env, saved
        return out, pending

    def _merge(self, *envs: Env) -> None:
        merged: Env = {}
        for env in envs:
            for k, v in env.items():
                seen = merged.setdefault(k, v)
                if seen is not v and seen.truth and not v.truth:
                    # true alike on the paths that bind it so, maybe not on this one (`Origin.truth`)
                    seen = merged[k] = replace(seen, truth=False)
                if seen is not v and (seen.keys is not None or v.keys is not None or
                                      (seen.kind, seen.stream) == (v.kind, v.stream) and (
                                          seen.axes is not None and seen.axes != v.axes
                                          or seen.by_setting != v.by_setting)):
                    # a mapping varying at some keys: at the keys of every path; a value of one kind varying along
                    # some grid coordinates: along those of every path (a sampler drawing by the data-parallel rank
                    # on one path, by the global rank on another), under each value of its setting too
                    # (`Origin.by_setting`: a batch scaled by the model-parallel rank on one path)
                    merged[k] = join(seen, v)
        written_paths_met(merged, envs)
        self.env = merged

    def stmt(self, node: cst.CSTNode, guards: tuple[Guard, ...]) -> list[Guard]:
        if isinstance(node, cst.BaseSmallStatement):
            return self.small(node, guards)
        if isinstance(node, cst.SimpleStatementLine):
            out: list[Guard] = []
            for small in node.body:
                out.extend(self.small(small, guards))
            return out
        if isinstance(node, cst.If):
            return self.if_stmt(node, guards)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, guards)
        if isinstance(node, cst.With):
            for item in node.items:
                self.expr(item.item, guards)
                if item.asname is not None:
                    origin = self.eval(item.item)
                    if isinstance(item.item, cst.Call) and _last_attr(item.item.func) == "split_between_processes":
                        # this process's share of the list: as many items on every process when the call pads
                        # them (`apply_padding=True`) or the list's length is a multiple of the process count
                        # (`xs = xs[:len(xs) - len(xs) % state.num_processes]`): per-rank items, one count, as a list
                        # padded to the same length (`_padded`: its `len()` and its passes alike on every rank)
                        origin = Origin("shard", item.item, self.taint.src)
                        if self._equal_shares(item.item):
                            origin = _padded(origin)
                    self.bind(item.asname.name, None, origin)
            return self.block(_body(node.body), guards)
        if isinstance(node, cst.Try) or type(node).__name__ == "TryStar":
            handled = bool(node.handlers)
            self._caught += handled
            try:
                pending = self.block(_body(node.body), guards)
            finally:
                self._caught -= handled
            envs = [self.env]
            ran_out = self._exhaustion(node)
            self._handling += 1
            try:
                handled_envs = [self._branch(_body(handler.body), guards + tuple(pending) + (
                                    (ran_out,) if ran_out is not None and _catches_stop(handler) else ()))
                                for handler in node.handlers]
            finally:
                self._handling -= 1
            for env, more in handled_envs:
                envs.append(env)
                pending.extend(more)
            self._merge(*envs)
            if node.orelse is not None:
                pending.extend(self.block(_body(node.orelse.body), guards + tuple(pending)))
            if node.finalbody is not None:
                pending.extend(self.block(_body(node.finalbody.body), guards + tuple(pending)))
            return pending
        if isinstance(node, cst.Match):
            return self.match_stmt(node, guards)
        return []          # FunctionDef / ClassDef: their own scopes

    def _exhaustion(self, node: cst.Try) -> Optional[Guard]:
        """The rank-dependent test a `try` body's `next(it)` makes (issue 30 item 8, MooER): `next` without a
        default raises StopIteration when `it` runs out, and when `it` walks this rank's share of the data (a trip
        count that varies: `TRIP_COUNT_KINDS`, not a display) the ranks run out at different passes -- a handler
        that catches it (`except StopIteration`, `except Exception`, bare) runs on some ranks while the others go
        on with the body: a branch on "this rank's iterator ran out", walked under that test. Only the body's own
        statements count (not a nested function, nor a nested `try` that catches it first); the iterator is read
        as the body left it."""
        for call in _own_next_calls(_body(node.body)):
            origin = self.eval_iter(call.args[0].value)
            if origin is not None and origin.kind in TRIP_COUNT_KINDS and not is_display(origin):
                return Guard("cond", replace(origin, batch=False, opaque=False), call,
                             condition=f"`{code_of(call, 60)}` runs out (StopIteration)")
        return None

    def small(self, node: cst.BaseSmallStatement, guards: tuple[Guard, ...]) -> list[Guard]:
        if isinstance(node, cst.Assign):
            self.expr(node.value, guards)
            origin = self.eval(node.value)
            if origin is None and isinstance(node.value, cst.Name) and node.value.value in ("None", "True", "False"):
                origin = self._none_under(guards)       # `has_images = True` under a per-rank test: the flag varies
            agreed = self._note_measured(node.targets[0].target, node.value) if len(node.targets) == 1 else None
            for target in node.targets:
                self.bind(target.target, node.value, origin)
            if agreed is not None:
                self._agreed[agreed] = id(self._ifs[-1])
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                fact = self._length_fact(node.value)
                if fact is not None:
                    self._lengths[node.targets[0].target.value] = fact
                elif self._lengths.get(node.targets[0].target.value, ("",))[0] in ("floor", "multiple"):
                    del self._lengths[node.targets[0].target.value]     # rebound: what it said is gone
            if origin is not None and isinstance(node.value, cst.IfExp) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, cst.Name):
                self._correlate_choice(node.targets[0].target.value, node.value, origin)
            self._uniformize(node.value)
            return []
        if isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.expr(node.value, guards)
                self.bind(node.target, node.value, self.eval(node.value))
            return []
        if isinstance(node, cst.AugAssign):
            self.expr(node.value, guards)
            held = self.eval(node.target)
            if held is not None and held.kind in ("rank", "shard") and isinstance(node.operator, cst.AddAssign) \
                    and self._padded_to(node.target, node.value):
                self.bind(node.target, None, _padded(held))     # `mine += [None] * (max_count - len(mine))`
                return []
            self.bind(node.target, None, held or self.eval(node.value))
            return []
        if isinstance(node, cst.Expr):
            self.expr(node.value, guards)
            self._uniformize(node.value)
            value = node.value
            if isinstance(value, cst.Call):
                self._note_lengths(value)
                self._note_sent(value)
                func = value.func
                if isinstance(func, cst.Attribute) and func.attr.value == "extend" and len(value.args) == 1 and \
                        value.args[0].keyword is None and not value.args[0].star:
                    held = self.eval(func.value)
                    if held is not None and held.kind in ("rank", "shard") and \
                            self._padded_to(func.value, value.args[0].value):
                        # `mine.extend([None] * (max_count - len(mine)))`: padded in place
                        self.bind(func.value, None, _padded(held))
                        return []
                # a checked helper that fills its arguments with varying values (`rec(nested, "", flat)`)
                for arg, origin in self.taint.analysis.written_args(self.taint.src, value, self.env, self.cls):
                    self.bind(arg, None, join(self.eval(arg), origin))
                # `outs.append(logits)`, `data.update(inputs)`: a local container holds the varying values put in
                self.taint.fill(value, self.env, self.cls)
                self._append_payload(value)
            if isinstance(value, cst.Call) and self.taint.facts.resolve_expr(value.func) in EXIT_CALLS:
                return self._exit(node, "exit", guards)
            return []
        if isinstance(node, cst.Return):
            single = self._single_process_path()
            if not single:
                here = node.value is not None and self._payload_expr(node.value)
                self.payload_returns = here if self.payload_returns is None else self.payload_returns and here
            self._none_returned(node.value, guards)
            if node.value is not None:
                self.expr(node.value, guards)
                # (on the side only a run of one process takes, `if not dist.is_initialized(): return value`, no
                # other rank can hold another value)
                self.returned = join(self.returned, None if single else self.eval(node.value))
                if self._none_origin is not None and self.returned is not None and self.returned.opaque:
                    self.returned = replace(self.returned, none_by=join(self.returned.none_by, self._none_origin))
            self._return_elements(node.value)
            return self._exit(node, "return", guards)
        if isinstance(node, (cst.Continue, cst.Break)):
            if self._tainted_loops:       # the loop's own trip count already varies: DSL102 says it
                return []
            if isinstance(node, cst.Continue) and self._retry_loops and self._retry_loops[-1]:
                return []                 # back to the same collective: a retry, not an exit (`_retries`)
            out = self._exit(node, "continue" if isinstance(node, cst.Continue) else "break", guards)
            if isinstance(node, cst.Continue) and self._loops:
                out = [replace(g, loop=self._loops[-1]) for g in out]
            return out
        if isinstance(node, (cst.Assert, cst.Raise, cst.Del)):
            for field in ("test", "msg", "exc", "cause", "target"):
                sub = getattr(node, field, None)
                if isinstance(sub, cst.BaseExpression):
                    self.expr(sub, guards)
            if isinstance(node, cst.Raise) and not self._caught:
                return self._raise_exit(node, guards)
            return []
        return []

    def _return_elements(self, value: Optional[cst.BaseExpression]) -> None:
        if self._elements is None:
            return
        if not isinstance(value, (cst.Tuple, cst.List)) or any(
                isinstance(el, cst.StarredElement) for el in value.elements):
            self._elements = None
            return
        elems = [self.eval(el.value) for el in value.elements]
        if self._elements == ():
            self._elements = elems
        elif len(self._elements) != len(elems):
            self._elements = None
        else:
            self._elements = [join(a, b) for a, b in zip(self._elements, elems)]

    def returned_elements(self) -> Optional[list[Optional[Origin]]]:
        """Per element of the tuple every `return` of the body returns (None when one returns something else)."""
        if not isinstance(self._elements, list):
            return None
        return [replace(o, none_by=join(o.none_by, self._none_positions[i]))
                if o is not None and o.opaque and i in self._none_positions else o
                for i, o in enumerate(self._elements)]

    def _none_returned(self, value: Optional[cst.BaseExpression], guards: tuple[Guard, ...]) -> None:
        """`if not os.path.isfile(name): return None, "", False` under a test that varies with the rank (or after
        an exit that does): the result (or that tuple position) is None on the ranks the test picks, so where what
        the function returns otherwise is `opaque` (`torch.load(name)`: None or not by that call alone), whether the
        result is None varies as that test does (`Origin.none_by`, read by `RankTaint._comparison`), in whatever
        order the returns come -- along the test's grid coordinates only (a pipeline stage's `return None`)."""
        guard = next((g for g in reversed(guards) if g.kind in ("cond", "cond-balanced", "exit")
                      and g not in self.base_guards), None)
        if guard is None:
            return                      # (an earlier rank-dependent exit: only the other ranks get here)
        origin = replace(guard.origin, batch=False, opaque=False, none_by=None)
        if value is None or _is_none(value):
            self._none_origin = join(self._none_origin, origin)
        elif isinstance(value, (cst.Tuple, cst.List)):
            for i, el in enumerate(value.elements):
                if _is_none(el.value):
                    self._none_positions[i] = join(self._none_positions.get(i), origin)

    def _none_under(self, guards: tuple[Guard, ...]) -> Optional[Origin]:
        """`x = None` under a rank-dependent test of this walk (`if all(imgs == [] for imgs in images): images =
        None`): whether `x` is None now varies with that test; so does a flag set to `True`/`False` under it
        (`if part["type"] == "image": has_images = True`)."""
        cond = self._innermost_cond(guards)
        return replace(cond.origin, batch=False, opaque=False) if cond is not None else None

    def _innermost_cond(self, guards: tuple[Guard, ...]) -> Optional[Guard]:
        """The innermost rank-dependent test of this walk around a statement (not one the caller put there)."""
        return next((g for g in reversed(guards) if g.kind in ("cond", "cond-balanced") and g not in self.base_guards),
                    None)

    def _exit(self, node: cst.CSTNode, kind: str, guards: tuple[Guard, ...]) -> list[Guard]:
        cond = self._innermost_cond(guards)
        if cond is None:
            return []
        return [Guard("exit", cond.origin, node, kind, cond.node)]

    def _raise_exit(self, node: cst.Raise, guards: tuple[Guard, ...]) -> list[Guard]:
        """`if dist.get_rank() != 0: raise RuntimeError(...)`: the ranks the rank id picks leave on every call --
        control flow that expects a caller to handle it (a Ray driver calling the method on every learner with
        `.remote()`), while the others wait in the next collective. Not exits: a raise that a `try` of this
        function may catch (`_caught`), one inside an `except` handler (it translates an outside failure: a
        file system error), one under a test of per-rank *data* (a malformed batch, a missing image), and one whose
        innermost `if` is another test inside the rank test (rank 0 validating a setting): those are fail-fast
        checks that end the job under its launcher, not decisions a rank takes by its id."""
        if self._handling:
            return []
        cond = self._innermost_cond(guards)
        if cond is None or cond.origin.kind not in ("rank", "derived"):
            return []
        if not self._ifs or self._ifs[-1].test is not cond.node:
            return []       # a check of its own under the rank test (`if is_main: if bad(cfg): raise`)
        if self._out_of_range(cond.node):
            return []
        if _reraises_failure(cond.node, node):
            return []
        return [Guard("exit", cond.origin, node, "raise", cond.node)]

    def _out_of_range(self, test: cst.CSTNode) -> bool:
        """`if local_rank >= cfg.tensor_parallel.tp_size: raise RuntimeError(...)`: the rank id checked against an
        upper bound the run reads from its settings (a parameter, a global, an attribute chain of one: the same on
        every rank). On a launch that matches the configuration no rank raises; on one that does not, the launch
        itself is wrong -- a fail-fast validation of the launch, not ranks leaving by their id. A bound the code
        computes -- a literal or an expression in the test (`rank >= 1`, `rank >= world // 2`), or a name or field
        bound to one (`half = world // 2`; `self.half = ...`), whatever it is called -- splits the ranks into roles
        and stays an exit (`_read_from_settings`: the bound's bindings followed, not its spelling)."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        comp = test.comparisons[0]
        if isinstance(comp.operator, (cst.GreaterThanEqual, cst.GreaterThan)):
            rank, bound = test.left, comp.comparator
        elif isinstance(comp.operator, (cst.LessThanEqual, cst.LessThan)):
            rank, bound = comp.comparator, test.left
        else:
            return False
        if not self._read_from_settings(bound):
            return False
        return self.eval(rank) is not None and self.eval(bound) is None

    def _read_from_settings(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Is `expr` a value the run reads from outside the function rather than one it computes: a name or
        attribute chain whose root is a parameter, a global or an import (no binding in the function), or is
        bound in the function only to such values (`tp = cfg.tp_size`, `n = int(os.getenv("TP"))`); a field
        `self.f...` whose stores in the methods of the class are all such values (`self.config = config`) or that
        the class never stores (a base's or a library's). A literal, an arithmetic expression or another call's
        result is computed."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Call):
            name = dotted_name(expr.func) or ""
            if name in ("int", "float") and len(expr.args) == 1:
                return self._read_from_settings(expr.args[0].value, depth + 1)
            return name in ("os.getenv", "os.environ.get", "getenv", "environ.get")
        chain = expr
        while isinstance(chain, cst.Attribute):
            if isinstance(chain.value, cst.Name) and chain.value.value == "self":
                break
            chain = chain.value
        if isinstance(chain, cst.Attribute):        # `self.f` (then `.a.b`): the stores of the field
            if self.cls is None:
                return True
            field = chain.attr.value
            values = [node.value for info in self.taint.src.facts.functions.values()
                      if info.class_name == self.cls for node in iter_assigns(info.node.body)
                      for t in node.targets if isinstance(t.target, cst.Attribute)
                      and isinstance(t.target.value, cst.Name) and t.target.value.value == "self"
                      and t.target.attr.value == field]
            return all(self._read_from_settings(v, depth + 1) for v in values)
        if not isinstance(chain, cst.Name) or chain.value in ("True", "False", "None"):
            return False
        info = self.taint.src.facts.functions.get(self.scope)
        if info is None:
            return True
        values = [node.value for node in iter_assigns(info.node.body) for t in node.targets
                  if isinstance(t.target, cst.Name) and t.target.value == chain.value]
        return all(self._read_from_settings(v, depth + 1) for v in values)

    def _uniformize(self, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Call):
            name = self.taint.uniformize(value, self.env, self.cls, tuple(self._loops),
                                         lambda subject: self._setting_at(value, subject))
            if name:
                self._fresh.add(name)
            elif (wrapped := self._wrapped(value)) is not None and (name := dotted_name(wrapped[1])):
                # the project's own wrapper writing its argument with a collective (`broadcast(buffer, src,
                # group)`): the argument as a collective leaves it (over the group it is handed)
                self.env.pop(name, None)
                self.env.pop(name + "[]", None)
                mark_written(self.env, name)
                self._fresh.add(name)
            written = serialized_into(self.taint.facts, value)
            if written is not None:
                self._encodes[written[1]] = self._encodes.get(written[0], frozenset()) | {written[0]}
            self._sent_from_source(value)
            self._scattered(value)
        elif isinstance(value, cst.Await) and isinstance(value.expression, cst.Call):
            self.taint.uniformize(value.expression, self.env, self.cls)

    def _setting_at(self, node: cst.CSTNode, subject: str) -> Optional[frozenset]:
        """The values the validated setting `subject` (`self.env_type`) may hold at `node` of this method: its
        entry domain (`setting_domains.entry_domain`) narrowed by the `if` chains `node` sits in; fixed by this
        walk (`fixed`), that value. None when the setting has no domain here."""
        if subject in self.fixed:
            return frozenset({self.fixed[subject]})
        info = self.taint.src.facts.functions.get(self.scope)
        if info is None or info.class_name is None or not subject.startswith("self."):
            return None
        domain = domains.entry_domain(self.taint.analysis, self.taint.src, info, subject[5:])
        if not domain:
            return None
        for links, at in domains._path_to(domains._statements(info.node.body), node, ()) or ():
            for i, link in enumerate(links):
                if i > at:
                    break
                domain = domains.narrow(domain, link.test, subject, i == at)
        return domain

    def if_stmt(self, node: cst.If, guards: tuple[Guard, ...]) -> list[Guard]:
        """An `if`/`elif`/…/`else` chain, walked as one statement without recursion (a chain of thousands of
        `elif`s is one level deep here). A branch runs when its test holds and the earlier ones did not: its
        guards are the earlier tests' and its own, and its condition says so in words. A test whose branches
        all reach a collective (the `else` included) is balanced: every rank reaches one either way."""
        links = [node]
        while isinstance(links[-1].orelse, cst.If):
            links.append(links[-1].orelse)
        last = links[-1].orelse
        final: Sequence[cst.CSTNode] = _body(last.body) if isinstance(last, cst.Else) else ()
        covered = leaves = False    # the parameters this walk fixes take exactly one link (`fixed`)
        if self.fixed:
            for i, link in enumerate(links):
                holds = fixed_truth(link.test, self.fixed)
                if holds is None:
                    break
                if holds:
                    links, final, covered = links[:i + 1], (), True
                    leaves = any(self._leaves_here(st) for st in _body(links[-1].body))
                    break
        bodies = [_body(link.body) for link in links]
        # balanced[i]: body i and every later branch (a final `else` needed) reach a collective
        balanced = [False] * len(links)
        rest = bool(final) and self.reaches_sites(final)
        for i in range(len(links) - 1, -1, -1):
            rest = rest and self.reaches_sites(bodies[i])
            balanced[i] = rest
        saved = self.env
        saved_fresh = self._fresh
        freshes: list[set[str]] = []
        envs: list[Env] = []
        pendings: list[list[Guard]] = []
        outer = guards
        chain: list[tuple[int, Guard]] = []          # the rank-varying tests so far: (link index, guard)
        tests: list[str] = []
        false_before: frozenset = frozenset()        # membership predicates of the earlier tests (false here)
        entered = 0
        paths: list = []                             # per branch (the links', then the else's): its path
        uniform_tests: list[bool] = []               # per link walked: its test is the same on every rank
        first_varying: Optional[int] = None          # the first link whose test varies
        # the records of earlier chains (`_correlated`) as each branch starts: a name one branch binds again
        # drops them there (`_uncorrelate`), not on the branches beside it, whose rank took another way
        correlated_before = dict(self._correlated)
        correlated_after: list[dict] = []
        try:
            for i, link in enumerate(links):
                self.env = dict(saved) if i else saved
                if i:
                    correlated_after.append(self._correlated)
                    self._correlated = dict(correlated_before)
                self.enter_if(link)
                entered += 1
                self.expr(link.test, outer)
                origin = self.eval_test(link.test)
                uniform_tests.append(origin is None)
                tests.append(code_of(link.test, 60))
                guard = None
                if origin is not None:
                    guard = Guard("cond-balanced" if balanced[i] else "cond", origin, link.test)
                inner = outer + ((guard,) if guard else ())
                if guard is not None:
                    chain.append((len(outer), guard))
                    first_varying = i if first_varying is None else first_varying
                body_guards = inner
                if i and chain and chain[-1][1].kind == "cond":
                    # an `elif` branch: runs when its test holds and the earlier ones did not
                    at, top = chain[-1]
                    if top is guard:
                        words = f"`{tests[-1]}` holds and {_none_of(tests[:-1])}"
                    else:
                        words = f"{_none_of(tests[:-1])} and `{tests[-1]}` holds"
                    body_guards = inner[:at] + (replace(top, condition=words),) + inner[at + 1:]
                if i and chain:
                    # `if not distributed and kl > t: … elif distributed: all_reduce(…)`: this test rules an earlier
                    # one out (a conjunct of it is this test negated), so that test failing here says nothing
                    ruled_out = {id(links[j].test) for j in range(i) if _excludes(link.test, links[j].test)}
                    if ruled_out:
                        body_guards = tuple(g for g in body_guards
                                            if not (g.kind.startswith("cond") and id(g.node) in ruled_out))
                self.env = self._single_rank(dict(saved), link.test, True)
                self._none_side(self.env, links[:i + 1], uniform_tests, i)
                self._present_side(self.env, links[:i + 1], i)
                self._fresh = set(saved_fresh)
                negated = self.negated
                self.negated = negated | false_before | _negated_members(self, link.test)
                self._ifs.append(link)
                self._holds.append(True)
                paths.append(self.branch_path())
                self._recorrelate()
                try:
                    pending = [] if self._never_holds(link.test) else self.block(bodies[i], body_guards)
                finally:
                    self._ifs.pop()
                    self._holds.pop()
                    self.negated = negated
                false_before = false_before | _members(origin)
                freshes.append(self._fresh)
                envs.append(self.env)
                pendings.append(pending)
                outer = inner
            else_guards = outer
            if chain and chain[-1][1].kind == "cond" and final:
                at, top = chain[-1]
                else_guards = outer[:at] + (replace(top, condition=_none_of(tests)),) + outer[at + 1:]
            self.env = self._single_rank(dict(saved), links[0].test, False) if len(links) == 1 else dict(saved)
            self._none_side(self.env, links, uniform_tests, None)
            self._present_side(self.env, links, None)
            self._fresh = set(saved_fresh)
            correlated_after.append(self._correlated)
            self._correlated = dict(correlated_before)
            negated = self.negated
            self.negated = negated | false_before
            self._ifs.append(links[-1])
            self._holds.append(False)
            paths.append(self.branch_path())
            self._recorrelate()
            if len(links) == 1 and uniform_tests == [True] and self._correlated:
                self._else_worlds(links[0].test, paths[-1])
            dead = bool(final) and bool(chain) and self.chain_covers_ranks(links)
            try:
                more = [] if dead else self.block(final, else_guards)
            finally:
                self._ifs.pop()
                self._holds.pop()
                self.negated = negated
            else_env = self.env
            correlated_after.append(self._correlated)
            self._correlated = _correlated_join(correlated_before, correlated_after)
            if covered and leaves:
                self._left_for_fixed = True
            if final and not dead or not final and not covered and not self._falls_through_never(links):
                envs.append(self.env)
                freshes.append(self._fresh)
            single = False
            if len(links) == 1 and len(envs) == 2:
                # `if world_size > 1: broadcast_object_list(query, 0)`, `if args.local_rank != -1: all_reduce(stop)`:
                # the side a run of one process takes holds no value another rank could differ in (one process:
                # every value is uniform), so only the distributed side's values count -- the join of "reduced"
                # and "single process" is uniform. A rank id's "not launched" test is the same on every rank of a
                # distributed run: its sides bind nothing rank-dependent (no `_join_after`)
                side = _distributed_truth(self, links[0].test)
                if side is not None:
                    envs, freshes = [envs[0 if side else 1]], [freshes[0 if side else 1]]
                    single = True
            self._fresh = set.intersection(*freshes) if freshes else set(saved_fresh)
            self._merge(*envs)
            if len(links) == 1 and not final and bodies[0] and self._leaves_here(bodies[0][-1]):
                self._present_after_exit(links[0].test, else_env)
            if chain and not single and not (len(links) == 1 and not final and self._rank_turn(node)):
                alike = (self._bound_alike(bodies, final, envs[:len(links)] + [else_env]) |
                         self._same_effect(bodies, final, envs[:len(links)] + [else_env])) if final else set()
                self._join_after(chain[0][1], [*bodies[first_varying:], final], alike, before=saved)
                self._correlate(bodies, final, envs[:len(links)] + [else_env], paths, first_varying)
            if self._agreed:
                self._count_agreed(links)
            for i in range(len(links) - 1, -1, -1):
                pending = pendings[i]
                orelse = final if i == len(links) - 1 else links[i + 1:]
                more = [g for g in pending + more if not _exits_together(g, pending, more, bodies[i], orelse)]
            return more
        finally:
            for link in reversed(links[:entered]):
                self.leave_if(link)

    def _rank_turn(self, node: cst.If) -> bool:
        """`for pi in range(<world size>): if pi == <rank id>: …; wait_for_everyone()`: each rank takes its own
        turn, exactly once, and binds the names of the body there from what it reads (a staggered load: one
        process at a time reads the checkpoint). Such a name is not rank-varying for the turn test; what the body
        computes from a rank-varying value stays so. The `if` (without `else`) is a statement of the innermost
        loop's body, which no `break`/`continue`/`return` leaves early; the loop counts the processes of the
        world (`range(dist.get_world_size())`, `range(<accelerate state>.num_processes)`); the body does not read
        the loop variable (`load(paths[pi])` differs per rank)."""
        if node.orelse is not None or not self._loops:
            return False
        loop = self._loops[-1]
        if not isinstance(loop, cst.For) or loop.orelse is not None or not isinstance(loop.target, cst.Name) \
                or not any(stmt is node for stmt in _body(loop.body)):
            return False
        var = loop.target.value
        test = node.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
                not isinstance(test.comparisons[0].operator, cst.Equal):
            return False
        sides = (test.left, test.comparisons[0].comparator)
        other = next((b for a, b in (sides, sides[::-1]) if isinstance(a, cst.Name) and a.value == var), None)
        hit = self.eval(other) if other is not None else None
        if hit is None or hit.kind != "rank" or hit.axes is not None or \
                any(n.value == var for n in _names_of(other)):
            return False
        if not self._world_count(loop.iter, other):
            return False
        todo: list = list(_body(loop.body))
        while todo:
            n = todo.pop()
            if isinstance(n, (cst.Break, cst.Continue, cst.Return)):
                return False
            if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            todo.extend(n.children)
        return not any(n.value == var for stmt in _body(node.body) for n in _names_of(stmt))

    def _world_count(self, it: cst.BaseExpression, rank: Optional[cst.BaseExpression] = None) -> bool:
        """`range(dist.get_world_size())` / `range(<accelerate state>.num_processes)`: one pass per process. The
        state is typed by use (`AccelerateTyping`), or it is the object whose attribute the turn test reads as the
        rank id (`range(state.num_processes)` with `pi == state.local_process_index`)."""
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
                and len(it.args) == 1 and it.args[0].keyword is None):
            return False
        count = it.args[0].value
        if isinstance(count, cst.Call):
            callee = self.taint.facts.resolve_expr(count.func) or ""
            return not count.args and callee.startswith(("torch.distributed.", "deepspeed.comm.", "deepspeed.")) \
                and callee.endswith(".get_world_size")
        if isinstance(count, cst.Attribute) and count.attr.value == "num_processes":
            typing = accelerate_typing(self.taint.analysis, self.taint.src)
            base = count.value
            if isinstance(rank, cst.Attribute) and code_of(rank.value, 400) == code_of(base, 400):
                return True
            return typing.is_state(base, self.cls) or isinstance(base, cst.Attribute) and \
                base.attr.value == "state" and typing.is_state(base.value, self.cls)
        return False

    @staticmethod
    def _none_side(env: Env, links: list, uniform_tests: list[bool], holding: Optional[int]) -> None:
        """The branch of an `if` chain where link `holding` holds (None: the `else`) and the links before it do
        not: a name that a test of the same value on every rank says is None there (`if logits is not None:` not
        holding, `if cache is None:` holding) IS None on that branch, on every rank that takes it -- the same
        value, whatever per-rank data it held before the test (`if logits is not None: logits = gather(logits)`
        leaves `logits` uniform after the join). Only tests whose outcome is uniform: a rank-varying test's
        branches are joined by `_join_after`."""
        for i, link in enumerate(links):
            if i >= len(uniform_tests) or not uniform_tests[i] or not _none_test_of(link.test):
                continue
            holds = i == holding
            is_none = isinstance(link.test.comparisons[0].operator, cst.Is)
            if holds == is_none:
                env.pop(link.test.left.value, None)

    def _present_side(self, env: Env, links: list, holding: Optional[int]) -> None:
        """The branch of an `if` chain where link `holding` holds (None: the `else`) and the links before it do
        not: a name an earlier rank-dependent chain bound to one value on the ranks of one branch and to None on
        the others (`_present`) and that a test here says is not None (`if model is not None:` holding, `if model
        is None:` not holding) holds, on every rank taking this branch, the value of that one branch: these are
        its ranks (`model = create_model(cfg)` on the ranks a placement gives the model: its config fields are
        the ones every holder built alike). The test itself still varies across ranks (a collective under it is
        reached by the holders only); only what the name holds is settled."""
        if not self._present:
            return
        for i, link in enumerate(links):
            if not _none_test_of(link.test):
                continue
            name = link.test.left.value
            held = self._present.get(name)
            if held is None or env.get(name) is not held[1]:
                continue
            if (i == holding) != isinstance(link.test.comparisons[0].operator, cst.Is):
                if held[0] is None:
                    env.pop(name, None)
                else:
                    env[name] = held[0]

    def _present_after_exit(self, test: cst.BaseExpression, else_env: Env) -> None:
        """After `if model is None: return` (a body that leaves): the ranks going on are those the test said
        hold the one branch's value (`_present_side` gave it to the fall-through's environment)."""
        if not self._present or not _none_test_of(test) or not isinstance(test.comparisons[0].operator, cst.Is):
            return
        name = test.left.value
        held = self._present.get(name)
        if held is None or else_env.get(name) is not held[0]:
            return
        if held[0] is None:
            self.env.pop(name, None)
        else:
            self.env[name] = held[0]

    def _single_rank(self, env: Env, test: cst.BaseExpression, holds: bool) -> Env:
        """The environment of a branch where `test` (`holds`: its true side, else its false side) says a process
        group holds one rank (`if tp_world_size == 1:`, the `else` of `if dist.get_world_size(g) > 1:`): there
        the rank within that group is 0, on every rank, so the values computed from it are uniform (a shard's
        bounds `tp_rank * n` are `0 * n`). Only the group's own rank ids are cleared, not other ranks'."""
        ones = one_rank_coordinates(self.taint, test, self.env, self.cls, self.scope) if holds else None
        for kind, which in ones or ():
            # `if mpu.is_pipeline_first_stage() and is_last_stage: return tensor`: the pipeline holds one stage, so
            # a value varying only by the pipeline coordinate (set on the last stage alone) is the same everywhere,
            # and one varying by more coordinates (this rank's tokens) varies by the others only: no two ranks of
            # the run differ in that coordinate (what a broadcast over the pipeline group leaves, `uniformize`)
            if kind == "axes":
                env = {k: narrowed for k, o in env.items()
                       if (narrowed := _without_axes(o, which, self.taint)) is not None}
            else:
                env = {k: o for k, o in env.items() if not (o.kind == "rank" and o.group == which)}
        group = self._one_rank_group(test, holds)
        if group is None:
            return env
        return {k: o for k, o in env.items() if not (o.kind == "rank" and o.group == group)}

    def _else_worlds(self, test: cst.BaseExpression, path: Optional[tuple]) -> None:
        """The side of a uniform `c1 and c2 and …` (up to four conjuncts) not taken: some conjunct is false there,
        the same one on every rank. Each such world is walked into apart -- where `ci` is false, a record of an
        earlier rank-dependent chain whose branch that implies (`_recorrelate`) gives its value, and a size test
        that says a group holds one rank (`self.data_parallel_world_size > 1` false) makes the values varying by
        that group's rank alone uniform (`_one_rank_world`) -- and the side holds the join of the worlds (fairseq's
        `if is_distributed and not load_on_all_ranks: state = broadcast(state)`: where `load_on_all_ranks` holds
        every rank loaded the file, where the data-parallel group holds one rank its rank 0 loaded it)."""
        conjuncts = _conjuncts(test)
        if not 2 <= len(conjuncts) <= 4 or not path:
            return
        start = self.env
        names = [n for n, (_, joined) in self._correlated.items() if start.get(n) is joined]
        if not names:
            return
        worlds: list[Env] = []
        for part in conjuncts:
            self.env = self._one_rank_world(dict(start), part, False)
            self._recorrelate(path + ((part, False),))
            worlds.append(self.env)
        self.env = start
        for name in names:
            values = [world.get(name) for world in worlds]
            if all(v is None for v in values):
                start.pop(name, None)
            elif all(v is values[0] for v in values):
                start[name] = values[0]

    def _one_rank_world(self, env: Env, test: cst.BaseExpression, holds: bool, depth: int = 0) -> Env:
        """`env` where `test` has the truth `holds` and that says a group holds one rank (`size > 1` false,
        `size == 1` true, a name bound once to such a test; the size a group's, through the checked files'
        properties and helpers: `_size_coordinate`): the values varying by that group's rank alone are the same
        on every rank (its rank is 0 everywhere)."""
        if depth > 3:
            return env
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._one_rank_world(env, test.expression, not holds, depth + 1)
        if isinstance(test, cst.Name):
            value = _one_value(self, test)
            return self._one_rank_world(env, value, holds, depth + 1) if value is not None else env
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return env
        left, (comp,) = test.left, test.comparisons
        right, op = comp.comparator, comp.operator
        bound = literal_value(right)
        if type(bound) is not int or type(literal_value(left)) is int:
            return env
        one = {cst.Equal: bound == 1, cst.LessThanEqual: bound == 1, cst.LessThan: bound == 2} if holds else \
            {cst.NotEqual: bound == 1, cst.GreaterThan: bound == 1, cst.GreaterThanEqual: bound == 2}
        if not one.get(type(op), False):
            return env
        coordinate = self._size_coordinate(left, depth)
        if coordinate is None:
            return env
        kind, which = coordinate
        if kind == "group" and which == "":
            return {}               # the world holds one process: nothing differs between ranks
        if kind == "axes":
            return {k: narrowed for k, o in env.items()
                    if (narrowed := _without_axes(o, which, self.taint)) is not None}
        return {k: o for k, o in env.items() if not (o.kind == "rank" and o.group == which)}

    def _size_coordinate(self, e: cst.BaseExpression, depth: int = 0) -> Optional[tuple]:
        """The group whose size `e` is, as `stage_positions._group_of` names it (`("axes", …)` / `("group",
        code)`): a name bound to a group's size, a getter call, or a property / no-argument method of the
        checked files every return of which is that size or the literal 1 (a run of one process: a group of one
        rank, whichever): fairseq's `data_parallel_world_size`."""
        from dslint.program.rank.stage_positions import _group_of
        if depth > 3:
            return None
        if isinstance(e, cst.Name):
            if e.value in self._sizes:
                return ("group", self._sizes[e.value])
            value = _one_value(self, e)
            return self._size_coordinate(value, depth + 1) if value is not None else None
        found = _group_of(self.taint, e, self.cls, "size", 0)
        if found is not None or not isinstance(e, (cst.Attribute, cst.Call)):
            return found
        if isinstance(e, cst.Call) and e.args:
            return None
        analysis = self.taint.analysis
        callee = self.taint.facts.resolve_expr(e.func if isinstance(e, cst.Call) else e)
        hit = analysis.function_info(analysis.call_source(self.taint.src, callee, self.cls, fields=False)) \
            if callee else None
        if hit is None:
            return None
        other, info = hit
        if info.params and [p for p in info.params if p not in ("self", "cls")]:
            return None
        own = analysis.taint(other)
        groups = set()
        for ret in _plain_returns(info.node.body):
            if ret.value is None:
                return None
            if literal_value(ret.value) == 1:
                continue
            groups.add(_group_of(own, ret.value, info.class_name, "size", 0))
        return groups.pop() if len(groups) == 1 and None not in groups else None

    def _one_rank_group(self, test: cst.BaseExpression, holds: bool) -> Optional[str]:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._one_rank_group(test.expression, not holds)
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        left, (comp,) = test.left, test.comparisons
        right, op = comp.comparator, comp.operator
        size = self._size_group(left)
        bound = literal_value(right)
        if size is None:        # `1 == world_size`, `1 < world_size`: the mirrored comparison
            size, bound = self._size_group(right), literal_value(left)
            op = {cst.LessThan: cst.GreaterThan(), cst.GreaterThan: cst.LessThan(),
                  cst.LessThanEqual: cst.GreaterThanEqual(), cst.GreaterThanEqual: cst.LessThanEqual()
                  }.get(type(op), op)
        if size is None or type(bound) is not int:
            return None
        one = {cst.Equal: bound == 1, cst.LessThanEqual: bound == 1, cst.LessThan: bound == 2} if holds else \
            {cst.NotEqual: bound == 1, cst.GreaterThan: bound == 1, cst.GreaterThanEqual: bound == 2}
        return size if one.get(type(op), False) else None

    def _size_group(self, e: cst.BaseExpression) -> Optional[str]:
        if isinstance(e, cst.Name):
            return self._sizes.get(e.value)
        return world_size_group(e)

    def _payload_call(self, call: cst.Call) -> bool:
        """Does `call` run a checked function that hands back its collective's payload?"""
        return self._payload_source(call) is not None

    def _payload_source(self, call: cst.Call):
        """The checked function (source, qualified name) `call` runs when it hands back its collective's payload
        -- a method of a `self.` field's object included (`self.collector.collect(...)`); None otherwise. (Which
        function a call runs is a lookup a module's environment may be kept with, `view_free`; the rest asks the
        view, and only for a checked function.)"""
        analysis = self.taint.analysis
        callee = self.taint.facts.resolve_expr(call.func)
        source = analysis.call_source(self.taint.src, callee, self.cls) if callee else None
        return source if source is not None and analysis.returns_payload(source) else None

    def _payload_expr(self, e: cst.BaseExpression) -> bool:
        """Is `e` a collective's payload here: a name a collective set (`_fresh`), or an item of one at a literal
        index (`outputs[0]` of the list `scatter_object_list` filled)?"""
        for _ in range(4):
            # a one-item tensor read back (`int(t.item())`, `t.tolist()`, `float(t)`): the same value in another form
            if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and \
                    e.func.attr.value in _SCALAR_CONVERSIONS and not e.args:
                e = e.func.value
            elif isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in ("int", "float", "bool") \
                    and len(e.args) == 1 and e.args[0].keyword is None and not e.args[0].star:
                e = e.args[0].value
            else:
                break
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and \
                isinstance(literal_value(e.slice[0].slice.value), int):
            e = e.value
        return isinstance(e, cst.Name) and e.value in self._fresh or self._derived_payload(e)

    def _derived_payload(self, e: cst.BaseExpression, iterated: bool = False) -> bool:
        """Is `e` computed from payloads alone (`_fresh`, the names a collective set or an earlier such value),
        so that it is the same on every rank whichever branch of a rank test computed it? It reads at least one
        payload; every other leaf is a literal; its calls are methods of such values (`tensor.view(meta["size"])
        .to(meta["device"])`), `len`/`enumerate`/`zip`/`range`/`int`/`float`/`bool`/`tuple`/`list` of such values,
        or a checked function of such arguments whose result the lattice calls uniform
        (`_put_tensors_in_obj(obj, tensors)`) -- where no enclosing test of the walk varies. `iterated`: `e` is a
        loop's iterable."""
        reads: list[bool] = []

        def ok(x: cst.BaseExpression) -> bool:
            if isinstance(x, cst.Name):
                if x.value in self._fresh:
                    reads.append(True)
                    return True
                return x.value in ("None", "True", "False")
            if isinstance(x, (cst.Integer, cst.Float, cst.SimpleString)):
                return True
            if isinstance(x, cst.Attribute):
                return ok(x.value)
            if isinstance(x, cst.Subscript):
                return ok(x.value) and all(isinstance(el.slice, cst.Index) and ok(el.slice.value) for el in x.slice)
            if isinstance(x, (cst.Tuple, cst.List)):
                return all(not isinstance(el, cst.StarredElement) and ok(el.value) for el in x.elements)
            if isinstance(x, cst.Call):
                if any(a.star for a in x.args) or not all(ok(a.value) for a in x.args):
                    return False
                if isinstance(x.func, cst.Attribute):
                    return ok(x.func.value)
                if isinstance(x.func, cst.Name) and x.func.value in _PAYLOAD_BUILTINS and \
                        self.taint.facts.resolve_expr(x.func) in (None, x.func.value):
                    return True
                callee = self.taint.facts.resolve_expr(x.func)
                return bool(callee) and \
                    self.taint.analysis.call_source(self.taint.src, callee, self.cls) is not None and \
                    self.eval(x) is None
            return False

        # under a rank-dependent test, another branch may compute something else from the same payloads
        # (`payload + 1` here, `payload + 2` there): only where every enclosing test is the same on every rank
        return ok(e) and any(reads) and (iterated or self.eval(e) is None) and \
            all(self.eval_test(link.test) is None for link in self._ifs)

    def _append_payload(self, call: cst.Call) -> None:
        """`out.append(tensor)` of a list bound empty in this walk (`_filling`): while only payloads are appended,
        each where every enclosing test and `for` loop of the walk is the same on every rank (as many appends
        everywhere; under a `while`, no), the list is a payload too; anything else appended to it leaves it the rank's own."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value == "append"):
            return
        name = func.value.value
        if name not in self._filling:
            return
        alike = len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None and \
            self._payload_expr(call.args[0].value) and \
            all(self.eval_test(link.test) is None for link in self._ifs) and \
            all(it is not None and self.eval_iter(it) is None for it in self.loop_iters)
        if alike:
            self._fresh.add(name)
        else:
            self._filling.discard(name)
            self._fresh.discard(name)

    def _single_process_path(self) -> bool:
        """Is the statement being walked on the side of a test only a run of one process takes (`if not
        dist.is_initialized(): return inputs[0]`, `_distributed_truth`)? Such a path has no other rank."""
        return any(truth is not None and truth != holds for truth, holds in
                   ((_distributed_truth(self, link.test), holds) for link, holds in zip(self._ifs, self._holds)))

    def _scattered(self, call: cst.Call) -> None:
        """`scatter_object_list(outputs, inputs, src, group=g)`: the collective writes `outputs` in place with the
        source rank's item for this rank -- a payload (`_fresh`), whose value is this rank's item; whether it is
        None is the same on every rank where every list the source can send holds items alike in that
        (`ProjectTaint.scatters_alike`: `[None] * n`, `[next(it) for _ in range(n)]`), so `if data is None:
        break` is taken together."""
        callee = self.taint.facts.resolve_expr(call.func) or ""
        if callee.rsplit(".", 1)[-1] != "scatter_object_list" or \
                not callee.startswith(("torch.distributed", "deepspeed.comm")) or not call.args:
            return
        def argument(position: int, keyword: str) -> Optional[cst.BaseExpression]:
            return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword),
                        call.args[position].value if len(call.args) > position and
                        call.args[position].keyword is None else None)
        out, sent = argument(0, "scatter_object_output_list"), argument(1, "scatter_object_input_list")
        name = dotted_name(out) if out is not None else None
        if name is None:
            return
        alike = sent is not None and self.taint.analysis.scatters_alike(self.taint.src, self.scope, sent, call)
        # the output list holds one item, this rank's: a display of one element (`Origin.elements`), so `item =
        # outputs[0]` reads the item itself and keeps whether its None-ness is alike
        self.env[name] = Origin("item", call, self.taint.src, display=True,
                                elements=(Origin("item", call, self.taint.src, present=alike),))
        self.env.pop(name + "[]", None)
        self._fresh.add(name)

    def _wrapped(self, call: cst.Call):
        """`collective_payloads.collective_wrapper` of a call of a checked function (a file mentioning an in-place
        collective holds it: decided on the outlines before anything is parsed)."""
        callee = self.taint.facts.resolve_expr(call.func)
        if not callee or not call.args or callee.startswith(("torch.", "deepspeed.")):
            return None
        analysis = self.taint.analysis
        source = analysis.call_source(self.taint.src, callee, self.cls)
        if source is None or id(source[0]) not in _in_place_files(analysis):
            return None
        return analysis.collective_wrapper(self.taint.src, call, self.cls)

    def _sent_from_source(self, call: cst.Call) -> None:
        """`broadcast_object_list([text, stop])` in the branch of the source rank (`if get_rank() == 0:`, the
        call's `src`, 0 by default): what that rank holds in the names it sends is what every rank receives, so
        they are uniform after the chain's join (the other ranks unpack the received list,
        `broadcast_join_uniform.py`). Outside such a branch the names of a literal list keep their values on the
        receiving ranks."""
        if not call.args or not self._ifs:
            return
        last = self.taint.facts.resolve_expr(call.func) or ""
        if last.startswith(("torch.distributed", "deepspeed.comm")):
            if last.rsplit(".", 1)[-1] not in ("broadcast_object_list", "broadcast"):
                return
            sent = call.args[0].value
            src = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "src"),
                       call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else None)
        else:
            wrapped = self._wrapped(call)
            if wrapped is None or wrapped[0] != "broadcast" or wrapped[2] is None:
                return
            _, sent, src = wrapped
        if isinstance(sent, (cst.List, cst.Tuple)):
            names = [dotted_name(el.value) for el in sent.elements]
        elif isinstance(sent, cst.Name) and sent.value in self._encodes:
            # `broadcast(buffer, src)` of a buffer holding `obj` serialized (`torch.save(obj, buffer)`): the source
            # sends `obj`, which the others decode from what they receive (`faithful_source`)
            names = sorted(self._encodes[sent.value])
        elif self._ifs and self._holds[-1] and (held := self._sending_name(sent)) is not None:
            # `tensor = tensors[i]`, then `broadcast(tensors[i].to(device), src)`: the source sends the values
            # that name holds (a device move keeps them), which the others receive into their buffer
            names = [held]
        else:
            return
        source = literal_value(src) if src is not None else 0
        test = self._bound_test(self._ifs[-1].test)
        if not self._holds[-1] or not isinstance(test, cst.Comparison) or \
                len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
            return
        sides = (test.left, test.comparisons[0].comparator)
        for rank, other in (sides, sides[::-1]):
            hit = self.eval(rank)
            # the rank compared with the call's source: a literal equal to it, or the very name the call passes
            # as `src` (`if get_rank(group) == src_rank: ... broadcast(buffer, src=src_rank, group=group)`)
            same = literal_value(other) == source if isinstance(source, int) else \
                isinstance(other, cst.Name) and isinstance(src, cst.Name) and other.value == src.value and \
                self.eval(other) is None
            if hit is not None and hit.kind == "rank" and hit.axes is None and same:
                for name in names:
                    if name:
                        self.env.pop(name, None)
                        self._fresh.add(name)
                return

    def _sending_name(self, sent: cst.BaseExpression) -> Optional[str]:
        """The name the source's branch bound to the very value `sent` carries: `sent` stripped of conversions
        that keep every value (`.to(device)`, `.cuda()`, `.contiguous()`, `.clone()`, `.detach()`) is code-equal
        to the value of the branch's one binding of a name (`tensor = tensors[i]`), a binding of the branch's own
        block -- where nothing else in the block binds that name or a name the value reads."""
        for _ in range(8):
            if isinstance(sent, cst.Call) and isinstance(sent.func, cst.Attribute) and \
                    sent.func.attr.value in ("to", "cuda", "contiguous", "clone", "detach") and \
                    (self.taint.facts.resolve_expr(sent.func) or "") not in _KEEPING_FUNCTIONS | _SERIALIZING:
                sent = sent.func.value
                continue
            break
        body = self._ifs[-1].body
        if isinstance(sent, cst.Name) or not isinstance(body, cst.IndentedBlock):
            return None
        text = code_of(sent)
        read = {n.value for n in name_nodes(sent)}
        bound: dict[str, list] = {}
        for node in iter_assigns(body):
            for t in node.targets:
                for n in name_nodes(t.target):
                    bound.setdefault(n.value, []).append(node.value if isinstance(t.target, cst.Name) else None)
        for target in _other_targets(body):
            for n in name_nodes(target):
                bound.setdefault(n.value, []).append(None)
        for name, values in bound.items():
            if len(values) == 1 and values[0] is not None and code_of(values[0]) == text and \
                    not any(r in bound for r in read):
                return name
        return None

    def _bound_test(self, test: cst.BaseExpression) -> cst.BaseExpression:
        """A test that is a local bound once in this function (`is_src_rank = get_rank(group) == src_rank`, then
        `if is_src_rank:`): the expression it was bound to; any other test itself."""
        info = self.taint.src.facts.functions.get(self.scope)
        if not isinstance(test, cst.Name) or info is None or test.value in info.params:
            return test
        values = [node.value for node in iter_assigns(info.node.body) for t in node.targets
                  if any(n.value == test.value for n in name_nodes(t.target))]
        if len(values) == 1 and all(isinstance(t.target, cst.Name) for node in iter_assigns(info.node.body)
                                    for t in node.targets if any(n.value == test.value for n in name_nodes(t.target))):
            return values[0]
        return test

    def _never_holds(self, test: cst.BaseExpression) -> bool:
        """A test false for every value its parameter takes at the calls found (`if norm_type == inf:` in a
        function every caller leaves at `norm_type=2`, `domains.param_domain`), or for the constants the call this
        walk is for fixes (`fixed`): its branch is dead code."""
        if self.fixed and fixed_truth(test, self.fixed) is False:
            return True
        if self._library_truth(test) is False:
            return True
        if not isinstance(test, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)):
            return False
        info = self.taint.src.facts.functions.get(self.scope)
        if info is None or not info.params:
            return False
        consts = domains.Constants(self.taint.src)
        names = domains.name_subjects(test, consts.value) & set(info.params)
        if not names:
            return False
        for name in names:
            domain = domains.param_domain(self.taint.analysis, self.taint.src, info, name)
            if domain and all(domains.truth(test, name, v, consts.value) is False for v in domain):
                return True
        return False

    def _library_truth(self, test: cst.BaseExpression) -> Optional[bool]:
        """The truth of a test over fields of library config objects the program leaves fixed
        (`if accelerator.project_configuration.automatic_checkpoint_naming:` where every Accelerator reaching it
        is built with a `ProjectConfiguration` that leaves the field at its default, `fixed_values.
        library_setting`), through `not`/`and`/`or` (`fixed_values.truth_of`); None where it is not fixed."""
        from dslint.program.fixed_values import known_truth, library_field_shape, library_setting, truth_of
        src = self.taint.src

        def leaf(e: cst.BaseExpression) -> Optional[bool]:
            if not library_field_shape(e):
                return None         # decided on the expression: the analysis (a launch unit's view) not asked
            analysis = self.taint.analysis
            return known_truth(library_setting(analysis.project, src, src.facts.functions.get(self.scope), e,
                                               analysis.calls_of))
        return truth_of(test, leaf)

    def _falls_through_never(self, links: list[cst.If]) -> bool:
        """An `if`/`elif` chain without `else` whose tests cover every value a validated setting may hold here
        (`if self.env_type == "deepspeed+mpu": … elif self.env_type == "deepspeed": …` in a method its callers
        run only in those configurations, `dslint.program.rank.setting_domains`): no rank passes it untouched."""
        info = self.taint.src.facts.functions.get(self.scope)
        if info is None or info.class_name is None:
            return False
        tests = [link.test for link in links]
        for subject in domains.subjects(tests[0]):
            domain = domains.entry_domain(self.taint.analysis, self.taint.src, info, subject[5:])
            if domain and domains.covers(tests, subject, domain):
                return True
        return False

    def _bound_alike(self, bodies: list, final, envs: list) -> set[str]:
        """Names every branch of the chain (its `else` included) binds once, in a statement of its own body, to
        the same expression of values the same on every rank -- the same call of the same arguments, apart from
        those that only fetch files (`download=` of a torchvision dataset, `library_types.fetch_only`): rank 0
        downloads the dataset and builds it, the others wait and build it from the files: one value everywhere
        (`if local_rank == 0: ds = CIFAR10(root, train=True, download=True) … else: … ds = CIFAR10(root,
        train=True, download=False)`). Names the expression reads must not be bound in any branch."""
        branches, bound, every, written = _bound_in_every(bodies, final)
        if not every:
            return set()
        out: set[str] = set()
        for name in every:
            forms = []
            for body, names, env in zip(branches, bound, envs):
                value = _top_binding(body, name) if names.count(name) == 1 and \
                    sum(n.value == name for stmt in body for n in _names_of(stmt)) == 1 else None
                if value is None or env.get(name) is not None or \
                        any(n.value in written for n in _names_of(self._kept_arguments(value))):
                    break
                forms.append(self._canonical(value))
            else:
                if len(set(forms)) == 1 and forms[0] is not None:
                    out.add(name)
        return out

    def _same_effect(self, bodies: list, final, envs: list) -> set[str]:
        """Names every branch of the chain (its `else` included) changes in the same way: the same updates under
        the same tests of the name itself and of values the same on every rank, in loops that run the same number
        of times (`_effect`) -- the last pipeline stage yields one item per row of its micro-batch (`assert
        len(lengths) == args.micro_batch_size; for tokens, length in zip(rows, lengths): …; ctr += 1; if ctr >=
        num_samples: break`), the other ranks yield None `range(args.micro_batch_size)` times with the same
        updates: `ctr` is the same on every rank after the chain."""
        branches, bound, every, written = _bound_in_every(bodies, final)
        if not every:
            return set()
        out: set[str] = set()
        for name in every:
            if any(env.get(name) is not None for env in envs):
                continue
            effects = [_Effect(self, name, written - {name}).block(body) for body in branches]
            if effects[0] is not None and all(e == effects[0] for e in effects[1:]):
                out.add(name)
        return out

    def _canonical(self, value: cst.BaseExpression) -> Optional[str]:
        """The code of `value` without the arguments of its call that only fetch files or place the result on a
        device (`library_types.fetch_only`)."""
        if not isinstance(value, cst.Call):
            return code_of(value, 100000)
        return code_of(self._kept_arguments(value), 100000)

    def _kept_arguments(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """`value` without the keyword arguments of its call that leave what it builds alone (`download=` of a
        torchvision dataset, `map_location=` of `torch.load`: `library_types.fetch_only`): rank 0 loads the
        checkpoint onto the CPU, the others onto their GPU -- one content everywhere."""
        if not isinstance(value, cst.Call):
            return value
        callee = self._class_attr_callee(value.func)
        args = [a for a in value.args if a.keyword is None or not fetch_only(callee, a.keyword.value)]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return value.with_changes(args=args)

    def _class_attr_callee(self, func: cst.BaseExpression) -> Optional[str]:
        """The callee resolved through the file's imports, or through a class attribute of the file bound once
        to an imported name (`Net.DATASET_TARGET` for `class Net: DATASET_TARGET = datasets.CIFAR10`)."""
        facts = self.taint.facts
        name = dotted_name(func)
        if name is None:
            return None
        head, _, attr = name.partition(".")
        info = facts.classes.get(head)
        if info is None or not attr or "." in attr:
            return facts.resolve(name)
        values = [small.value for stmt in _body(info.node.body) if isinstance(stmt, cst.SimpleStatementLine)
                  for small in stmt.body if isinstance(small, cst.Assign) and len(small.targets) == 1
                  and dotted_name(small.targets[0].target) == attr]
        return facts.resolve(dotted_name(values[0])) if len(values) == 1 else None

    def _join_after(self, guard: Guard, bodies: list, alike: frozenset | set = frozenset(),
                    before: Optional[Env] = None) -> None:
        """After a rank-dependent `if` chain: a name its branches bind holds the value of the branch each rank took
        (`if rank == 0: stop = text == "exit"; payload = [text, stop]`): it varies, with the test's origin, until
        a collective makes it uniform (`broadcast_object_list(payload)`, `uniformize`) or it is bound again. Inside
        the branch the value is the one of the ranks that run it: the branch's own hazards are the test's. Not a
        move of a value to a device (`model = model.to("meta")` on the non-main ranks): the same value elsewhere."""
        origin = replace(guard.origin, batch=False, opaque=False, elements=None, rows=False, items=None, truth=False)
        for name in _bound_names(bodies):
            if (held := self.env.get(name)) is not None and held.truth:
                # a path never empty on some ranks, another value on the others: its truth follows the test
                self.env[name] = replace(held, truth=False)
            # a loader bound on some ranks only (`Origin.stream`): the object is alike where it exists, but whether
            # it exists (`loader is not None`) and what is drawn from it follow the test
            held = self.env.get(name)
            if (name not in self.env or held is not None and held.stream) and name not in self._fresh and \
                    name not in alike:
                items = self._items_kept(name, bodies, before) if before is not None else None
                bound = replace(origin, items=items) if items is not None else origin
                self.env[name] = bound
                self.ever_bound.setdefault(name, bound)

    def _items_kept(self, name: str, bodies: list, before: Env) -> Optional[tuple]:
        """`progress = tqdm(progress)` on rank 0 only, `pbar = tqdm(loader)` on rank 0 and `pbar = loader`
        elsewhere, `it = tqdm(enumerate(loader))` on rank 0 and `it = enumerate(loader)` elsewhere: every branch of
        the chain (the fall-through included) leaves `name` bound to one iterable `S`, or to an item-preserving
        wrapper of it (`library_types.items_key`: tqdm yields its iterable's items, also inside `enumerate`), in one
        statement of the branch's own body that is the branch's only use of `name`; `S` reads no name a branch
        binds (but `name` itself, wrapped), and an `S` that is no plain name (`enumerate(loader)`, `range(n)`) no
        name another statement of a branch reads (`next(loader_iter)` there would advance it on those ranks only).
        The object then differs across ranks, its iteration does not: `Origin.items`, the origin of `S` before the
        chain and the expression `S` (None for the name's own earlier value). None when the branches differ
        otherwise."""
        key: Optional[str] = None
        bare: Optional[cst.BaseExpression] = None
        others: list = []
        own = items_key(self.taint.src, cst.Name(name))
        for body in bodies:
            found = self._item_binding(name, body)
            if found is False:
                return None
            here, node, rest = (own, None, None) if found is None else found
            if here is None or key is not None and here != key:
                return None
            key = here
            bare = node if bare is None else bare
            others.append(rest)
        if key is None or bare is None:
            return None
        bound = set(_bound_names(bodies))
        source = dotted_name(bare) if isinstance(bare, (cst.Name, cst.Attribute)) else None
        if source == name:
            return (before.get(name), None)
        if source is not None:
            if source in bound or source.split(".", 1)[0] in bound:
                return None
            return (self.env.get(source), bare)
        reads = _read_roots(bare)
        if reads & (bound - {name}) or any(rest is not None and any(rest[n] for n in reads) for rest in others) or \
                any(rest is None for rest in others):
            return None
        saved, self.env = self.env, before
        try:
            return (self.eval(bare), bare)
        finally:
            self.env = saved

    def _item_binding(self, name: str, body) -> object:
        """What one branch binds `name` to: (`items_key` of the value, the iterable it walks without its wrappers,
        the names the branch's other statements read, counted); None when the branch does not bind it; False when
        it binds it otherwise (twice, nested, in a statement with others) or reads it elsewhere."""
        names = _bound_names([body])
        if name not in names:
            return None
        if names.count(name) != 1 or "." in name:
            return False
        found: object = False
        rest: Counter = Counter()
        for stmt in body:
            value = None
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                        isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == name:
                    value = small.value
            uses = self._name_counts(stmt)[name]
            if value is None:
                if uses:
                    return False        # `next(progress)`, `progress.close()` on these ranks only
                rest.update(self._name_counts(stmt))
                continue
            inner = same_items(self.taint.src, [value])
            key = items_key(self.taint.src, value)
            reads = sum(n.value == name for n in _names_of(inner)) if inner is not None else 0
            if inner is None or key is None or len(stmt.body) != 1 or uses != 1 + reads:
                return False
            found = (key, inner)
        return (*found, rest) if found is not False else False

    def _correlate_choice(self, name: str, value: cst.IfExp, origin: Origin) -> None:
        """`buf = [None] * n if rank == 0 else None`: for the ranks taking a later path that implies one side of
        the test, `buf` is that side's value (`if rank == 0: … for item in buf:` reads the list)."""
        if self.eval_test(value.test) is None:
            return
        joined = self.env.get(name)
        sides = [_is_none(value.body), _is_none(value.orelse)]
        if joined is not None and sides.count(True) == 1 and name not in {n.value for n in _names_of(value)}:
            # `model = build(cfg) if is_first else None`: not None on the ranks of the built side alone
            self._present[name] = (self.eval(value.orelse if sides[0] else value.body), joined)
        path = self.branch_path()
        if path is None or joined is None:
            return
        self._correlated[name] = ([(path + ((value.test, True),), self.eval(value.body)),
                                   (path + ((value.test, False),), self.eval(value.orelse))], joined)

    def _correlate(self, bodies: list, final, envs: list, paths: list, first: int) -> None:
        """Record the names one branch of the chain alone binds, with that branch's path and value
        (`_recorrelate`); a name another branch binds too holds one of several values on those ranks."""
        self._note_present(bodies, final, envs)
        if len(paths) != len(bodies) + 1 or not all(paths[first:]):
            return
        per_branch = [set(_bound_names([body])) for body in [*bodies, final]]
        several: set[str] = set()
        for i in range(first, len(per_branch)):
            for name in per_branch[i]:
                joined = self.env.get(name)
                if joined is None or name in self._fresh or name in several:
                    continue
                if any(name in per_branch[j] for j in range(len(per_branch)) if j != i):
                    several.add(name)
                    if len(per_branch) > _MAX_CORRELATED_BRANCHES:
                        continue        # a long `elif` chain: each later path would be checked against every branch
                    # bound on several branches (`if load_on_all_ranks or rank == 0: state = load(path) else:
                    # state = None`): each branch's ranks hold that branch's value, so a later path implying one
                    # branch's (the side of `if not load_on_all_ranks: state = broadcast(state)` not taken, where
                    # `load_on_all_ranks` holds: every rank took the loading branch) holds its value there
                    alternatives = [(paths[j], envs[j].get(name)) for j in range(first, len(per_branch))
                                    if name in per_branch[j]]
                    self._correlated[name] = (alternatives, joined)
                    continue
                self._correlated[name] = ([(paths[i], envs[i].get(name))], joined)

    def _note_present(self, bodies: list, final, envs: list) -> None:
        """Record (`_present`) the names every branch of the chain (an `else` needed) binds once, in a statement
        of its own body, one branch to a value other than None and every other to None: after the chain the
        name is not None exactly on the ranks that took that branch."""
        if not final or len(envs) != len(bodies) + 1:
            return
        branches, bound, every, _ = _bound_in_every(bodies, final)
        for name in every:
            if "." in name or any(names.count(name) != 1 for names in bound):
                continue
            values = [_top_binding(body, name) for body in branches]
            if any(v is None for v in values):
                continue
            built = [i for i, v in enumerate(values) if not _is_none(v)]
            joined = self.env.get(name)
            if len(built) == 1 and joined is not None and name not in self._fresh:
                self._present[name] = (envs[built[0]].get(name), joined)

    def match_stmt(self, node: cst.Match, guards: tuple[Guard, ...]) -> list[Guard]:
        """`match subject: case p: …`: a case runs when the subject matches its pattern (and its guard holds) and
        no earlier case matched. When the subject is rank-varying, each case's body runs under that test; every
        case reaching a collective, with a last case that matches anything (`case _:`), is balanced."""
        self.expr(node.subject, guards)
        origin = self.eval(node.subject)
        cases = list(node.cases)
        bodies = [_body(case.body) for case in cases]
        for case in cases:
            if case.guard is not None:
                self.expr(case.guard, guards)
        catch_all = bool(cases) and _irrefutable(cases[-1])
        balanced = catch_all and all(self.reaches_sites(b) for b in bodies)
        subject = code_of(node.subject, 60)
        patterns = [code_of(case.pattern, 40) for case in cases]
        envs, pending = [], []
        for i, case in enumerate(cases):
            inner = guards
            if origin is not None:
                if balanced:
                    guard = Guard("cond-balanced", origin, node.subject)
                elif catch_all and i == len(cases) - 1 and i:
                    guard = Guard("cond", origin, node.subject,
                                  condition=f"`{subject}` matches none of " + ", ".join(
                                      f"`{p}`" for p in patterns[:-1][:3]) + (" …" if i > 3 else ""))
                else:
                    guard = Guard("cond", origin, node.subject, condition=f"`{subject}` matches `{patterns[i]}`")
                inner = guards + (guard,)
            env, more = self._branch(bodies[i], inner)
            envs.append(env)
            pending.extend(more)
        self._merge(*envs) if catch_all else self._merge(self.env, *envs)
        return pending

    def loop(self, node, guards: tuple[Guard, ...]) -> list[Guard]:
        if isinstance(node, cst.For):
            self.expr(node.iter, guards)
            origin = self.eval_iter(node.iter)      # its passes and items
            item = element_of(origin)
            if origin is not None and origin.kind == "shard" and not is_display(origin):
                # one element of this rank's share
                item = replace(origin, kind="item")
            if origin is None:
                item = self.taint.loader_batch(node.iter, self.env, self.cls, self.scope)   # a batch of a uniform loader
            self.bind(node.target, None, item)
            if origin is None and self._derived_payload(node.iter, iterated=True):
                # `for i, meta in enumerate(metadata)` of a received list: the same passes and items on every rank
                self._fresh.update(_target_names_of(node.target))
            head: cst.CSTNode = node
        else:
            self.expr(node.test, guards)
            origin = self.eval_test(node.test)
            head = node
        self.loop_depth += 1
        self.loop_iters.append(node.iter if isinstance(node, cst.For) else None)
        self._loops.append(node)
        self._retry_loops.append(_retries(node))
        if isinstance(node, cst.For) and origin is not None and (origin.kind not in TRIP_COUNT_KINDS
                                                                 or is_display(origin)):
            origin_loop = None      # iterating over this rank's item or output: its length is the batch's; over a
            # list or tuple display: as many passes as it has elements (`Origin.display`)
        else:
            origin_loop = origin
        if origin_loop is not None and isinstance(node, cst.For) and self.count_announced(node):
            origin_loop = None      # the count this rank broadcast to the group its loop's collectives run on
        tainted_before = origin_loop is not None
        inner = guards + ((Guard("loop", origin_loop, head),) if origin_loop else ())
        self._tainted_loops += tainted_before
        env_before = dict(self.env)
        pending = self.block(_body(node.body), inner)
        self._tainted_loops -= tainted_before
        if isinstance(node, cst.While) and origin is None:
            late = self.eval_test(node.test)         # `while not done:` where the body sets `done` per rank
            if late is not None:
                self.on_late_loop(node, Guard("loop", late, head), guards)
        self.loop_depth -= 1
        self.loop_iters.pop()
        self._loops.pop()
        self._retry_loops.pop()
        self._merge(self.env, env_before)
        leaving = [g for g in pending if g.exit_kind in ("break", "return", "exit", "raise")]
        if leaving:
            self.on_loop_exit(node, leaving)
        pending = [g for g in pending if g.exit_kind not in ("continue", "break")]
        if node.orelse is not None:
            pending.extend(self.block(_body(node.orelse.body), guards + tuple(pending)))
        return pending

    def count_announced(self, node: cst.For) -> bool:
        """Whether the loop's trip count is one this rank broadcast before it (`HazardWalk`: collective sites)."""
        return False

    def on_late_loop(self, node: cst.CSTNode, guard: Guard, guards: tuple[Guard, ...]) -> None:
        pass

    def on_loop_exit(self, node: cst.CSTNode, exits: list[Guard]) -> None:
        """Rank-dependent `break`/`return`/exit statements of a loop's body: the ranks that take them skip every
        later pass of the loop, the collectives before them in the body included."""

    # --- expressions: calls in evaluation order, with `x if c else y` and `a and b` as control ----------
    def expr(self, e: cst.CSTNode, guards: tuple[Guard, ...]) -> None:
        # dispatch on the exact type: libcst's node classes are ABCs (an `isinstance` goes through
        # `ABCMeta.__instancecheck__`), and the classes tested here are leaves of libcst's hierarchy
        kind = type(e)
        if kind in _LEAF_EXPRESSIONS:
            return
        if kind not in _CONTROL_EXPRESSIONS:
            for child in sub_expressions(e):
                self.expr(child, guards)
            return
        if kind is cst.Await and type(e.expression) is cst.Call:
            # `await llm_engine.generate(...)`: an asyncio engine (vLLM, SGLang) serving requests; DeepSpeed
            # engines, torch.distributed and HF generate are never awaited, so the call is no collective site
            self.expr(e.expression.func, guards)
            for arg in e.expression.args:
                self.expr(arg.value, guards)
            return
        if kind is cst.Call:
            self.expr(e.func, guards)
            for arg in e.args:
                self.expr(arg.value, guards)
            self.on_call(e, guards)
            return
        if kind is cst.IfExp:
            self.expr(e.test, guards)
            origin = self.eval_test(e.test)
            inner = guards + ((Guard("cond", origin, e.test),) if origin else ())
            self.expr(e.body, inner)
            self.expr(e.orelse, inner)
            return
        if kind is cst.BooleanOperation:
            self.expr(e.left, guards)
            origin = self.eval_test(e.left)
            self.expr(e.right, guards + ((Guard("cond", origin, e.left),) if origin else ()))
            return
        if kind is not cst.Await:          # a comprehension (an `await` of no call is walked below)
            comp = e.for_in
            inner = guards
            while comp is not None:
                self.expr(comp.iter, inner)
                origin = self.eval_iter(comp.iter)
                if origin is not None and origin.kind in TRIP_COUNT_KINDS and not is_display(origin):
                    inner = inner + (Guard("loop", origin, e),)
                comp = comp.inner_for_in
            for part in ((e.key, e.value) if kind is cst.DictComp else (e.elt,)):
                self.expr(part, inner)
            return
        for child in sub_expressions(e):
            self.expr(child, guards)


# `FlowWalk.expr`: expressions it does not enter, and those it walks in its own way
_LEAF_EXPRESSIONS = frozenset({cst.Lambda, cst.SimpleString, cst.Name, cst.Integer, cst.Float})
_CONTROL_EXPRESSIONS = frozenset({cst.Await, cst.Call, cst.IfExp, cst.BooleanOperation, cst.ListComp, cst.SetComp,
                                  cst.GeneratorExp, cst.DictComp})


# conversions of a one-item tensor or number that keep its value (`_length_fact`)
_SCALAR_CONVERSIONS = ("item", "tolist", "cpu", "long", "int", "numpy")


def _padded(origin: Origin) -> Origin:
    """A rank's list padded to a length the same on every rank: its items are this rank's (kind "item"), its
    row count -- `len()`, its truth -- is uniform (`rows`; an element drops it, `element_of`)."""
    return replace(origin, kind="item", elements=None, rows=True, affine=None)


def _pad_count(pad: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """How many items `pad` holds: `n` of `[fill] * n`, `n * [fill]`, `[fill for _ in range(n)]` (None otherwise)."""
    if isinstance(pad, cst.BinaryOperation) and isinstance(pad.operator, cst.Multiply):
        for seq, n in ((pad.left, pad.right), (pad.right, pad.left)):
            if isinstance(seq, cst.List) and len(seq.elements) == 1 and not isinstance(
                    seq.elements[0], cst.StarredElement):
                return n
    elif isinstance(pad, cst.ListComp) and pad.for_in.inner_for_in is None and pad.for_in.ifs == () and \
            isinstance(pad.for_in.iter, cst.Call) and isinstance(pad.for_in.iter.func, cst.Name) and \
            pad.for_in.iter.func.value == "range" and len(pad.for_in.iter.args) == 1:
        return pad.for_in.iter.args[0].value
    return None


def _bound_names(bodies: list) -> list[str]:
    """The names (and dotted `self.x` targets) the statements of these blocks bind by assignment, nested blocks
    included (not nested functions and classes), except to a device move of a value (`_placement`)."""
    out: list[str] = []
    todo = [stmt for body in bodies for stmt in body]
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and not _placement(small.value):
                    for t in small.targets:
                        out.extend(_target_names_of(t.target))
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and small.value is not None:
                    out.extend(_target_names_of(small.target))
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field, None)
            if isinstance(block, (cst.Else, cst.Finally)):
                block = block.body
            if isinstance(block, cst.If):
                todo.append(block)
            elif isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                todo.extend(block.body)
        for handler in getattr(stmt, "handlers", ()) or ():
            todo.extend(_body(handler.body))
    return out


class _Effect:
    """What a block does to one name, as a comparable value (`FlowWalk._same_effect`): its updates (the
    statements' code), the tests around them and around the exits of the loops that update it (their code; a test
    may read only the name and values the same on every rank that no branch binds), and those loops with their
    trip counts: `range(n)`, or a `zip`/name whose length an `assert len(x) == n` of the block states (`zip` pairs
    the rows of aligned sequences: as long as each), `n` the same on every rank. None when anything else touches
    the name or the flow around it (a `while`, a `try`, a `return`/`raise`, a test of other values)."""

    def __init__(self, walk: "FlowWalk", name: str, others: set[str]) -> None:
        self.walk = walk
        self.name = name
        self.others = others            # names the branches bind: not the same on every rank here
        self.lengths: dict[str, str] = {}

    def uniform(self, e: cst.BaseExpression) -> bool:
        for n in _names_of(e):
            if n.value == self.name:
                continue
            if n.value in self.others or self.walk.env.get(n.value) is not None:
                return False
        return self.walk.eval(e) is None

    def writes(self, node: cst.CSTNode) -> bool:
        return self.name in _bound_names([[node]])

    def block(self, stmts) -> Optional[tuple]:
        out: list = []
        for stmt in stmts:
            item = self.stmt(stmt)
            if item is None:
                return None
            out.extend(item)
        return tuple(out)

    def stmt(self, stmt: cst.CSTNode) -> Optional[list]:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return [] if not self.writes(stmt) else None
        if _mutates(stmt, self.name):
            return None         # `xs.append(o)`, `d[k] = v`, `fill(xs)`: a change the updates do not show
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else \
            [stmt] if isinstance(stmt, cst.BaseSmallStatement) else None
        if smalls is not None:
            out: list = []
            for small in smalls:
                if isinstance(small, (cst.Return, cst.Raise)):
                    return None
                if isinstance(small, (cst.Break, cst.Continue)):
                    out.append(type(small).__name__)
                elif isinstance(small, cst.Assert):
                    self._assert(small.test)
                elif isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    names = [n for t in targets for n in _target_names_of(t)]
                    if self.name in names:
                        if len(names) != 1 or small.value is None or not self.uniform(small.value):
                            return None
                        out.append(code_of(small, 100000))
            return out
        if isinstance(stmt, cst.If):
            if not self.writes(stmt) and not _leaves_loop(stmt):
                return []
            if not self.uniform(stmt.test):
                return None
            body = self.block(_body(stmt.body))
            orelse = () if stmt.orelse is None else self.block(
                [stmt.orelse] if isinstance(stmt.orelse, cst.If) else _body(stmt.orelse.body))
            if body is None or orelse is None:
                return None
            return [("if", code_of(stmt.test, 100000), body, orelse)]
        if isinstance(stmt, cst.For):
            if not self.writes(stmt):
                return [] if not _returns_in(stmt) else None
            trip = self.trip(stmt.iter)
            body = self.block(_body(stmt.body))
            if trip is None or body is None or stmt.orelse is not None or \
                    self.name in {n for n in _target_names_of(stmt.target)}:
                return None
            return [("for", trip, body)]
        if isinstance(stmt, cst.With):
            if any(self.name in {n.value for n in _names_of(item.item)} for item in stmt.items):
                return None
            return self.block(_body(stmt.body))
        return [] if not self.writes(stmt) and not _returns_in(stmt) else None

    def _assert(self, test: cst.BaseExpression) -> None:
        """`assert len(x) == n` (either order) with `n` the same on every rank: x has n items."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
                not isinstance(test.comparisons[0].operator, cst.Equal):
            return
        for side, other in ((test.left, test.comparisons[0].comparator), (test.comparisons[0].comparator, test.left)):
            if isinstance(side, cst.Call) and _last_attr(side.func) == "len" and len(side.args) == 1 and \
                    isinstance(side.args[0].value, cst.Name) and self.uniform(other) and \
                    self.name not in {n.value for n in _names_of(other)}:
                self.lengths[side.args[0].value.value] = code_of(other, 100000)

    def trip(self, it: cst.BaseExpression) -> Optional[str]:
        if isinstance(it, cst.Name):
            return self.lengths.get(it.value)
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("range", "zip", "enumerate") \
                and self.walk.taint.facts.resolve_expr(it.func) in (None, it.func.value, f"builtins.{it.func.value}"):
            args = [a for a in it.args if a.keyword is None and not a.star]
            if it.func.value == "range":
                if len(args) == 1 and len(it.args) == 1 and self.uniform(args[0].value) and \
                        self.name not in {n.value for n in _names_of(args[0].value)}:
                    return code_of(args[0].value, 100000)
                return None
            if it.func.value == "enumerate":
                return self.trip(args[0].value) if args else None
            counts = {self.trip(a.value) for a in args} - {None}
            return counts.pop() if len(counts) == 1 else None
        return None


def _len_of(e: cst.BaseExpression) -> Optional[str]:
    """`len(xs)`: the code of xs."""
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value == "len" and len(e.args) == 1 and \
            e.args[0].keyword is None and not e.args[0].star:
        return code_of(e.args[0].value, 400)
    return None


def _floor_multiple(e: cst.BinaryOperation) -> Optional[tuple[str, tuple[str, str]]]:
    """`len(xs) - len(xs) % n` or `len(xs) // n * n` (either factor order): len(xs) rounded down to a multiple of
    n, ("floor", (xs, n))."""
    if isinstance(e.operator, cst.Subtract) and isinstance(e.right, cst.BinaryOperation) and \
            isinstance(e.right.operator, cst.Modulo):
        xs = _len_of(e.left)
        if xs is not None and _len_of(e.right.left) == xs:
            return "floor", (xs, code_of(e.right.right, 400))
    if isinstance(e.operator, cst.Multiply):
        for part, n in ((e.left, e.right), (e.right, e.left)):
            if isinstance(part, cst.BinaryOperation) and isinstance(part.operator, cst.FloorDivide):
                xs = _len_of(part.left)
                if xs is not None and code_of(part.right, 400) == code_of(n, 400):
                    return "floor", (xs, code_of(n, 400))
    return None


def _mutates(node: cst.CSTNode, name: str) -> bool:
    """Might `node` change the object `name` holds without binding the name: a method call on it, a store
    into a subscript or attribute of it, `del`, or the bare name handed to a call."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, cst.Call):
            func = n.func
            while isinstance(func, (cst.Attribute, cst.Subscript)):
                func = func.value
            if isinstance(n.func, (cst.Attribute, cst.Subscript)) and isinstance(func, cst.Name) and \
                    func.value == name:
                return True
            if any(isinstance(a.value, cst.Name) and a.value.value == name for a in n.args):
                return True
        elif isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            for t in targets:
                for sub in ([el.value for el in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]):
                    if isinstance(sub, (cst.Subscript, cst.Attribute)):
                        base = sub
                        while isinstance(base, (cst.Attribute, cst.Subscript)):
                            base = base.value
                        if isinstance(base, cst.Name) and base.value == name:
                            return True
        todo.extend(n.children)
    return False


def _leaves_loop(stmt: cst.CSTNode) -> bool:
    """A `break`/`continue` of the enclosing loop, or a `return`/`raise`, inside `stmt` (nested loops' own
    `break`s excluded)."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (cst.Break, cst.Continue, cst.Return, cst.Raise)):
            return True
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, (cst.For, cst.While)):
            if _returns_in(node):
                return True
            continue
        todo.extend(node.children)
    return False


def _returns_in(stmt: cst.CSTNode) -> bool:
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (cst.Return, cst.Raise)):
            return True
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        todo.extend(node.children)
    return False


def _top_binding(body, name: str) -> Optional[cst.BaseExpression]:
    """The value of the assignment `name = value` among the statements of `body` itself (not nested blocks)."""
    for stmt in body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else (stmt,):
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                    isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == name:
                return small.value
    return None


def _calls_of_len(value: cst.BaseExpression) -> list:
    """The `len(...)` calls of one argument in an expression."""
    return [node for node in iter_calls(value) if isinstance(node.func, cst.Name) and node.func.value == "len"
            and len(node.args) == 1]


def _in_place_files(analysis) -> set:
    """Ids of the files that mention an in-place collective (`broadcast`, `all_reduce`): where a wrapper of one
    can be (`FlowWalk._wrapped`). Memoised on the analysis."""
    memo = analysis.__dict__.get("_in_place_files")
    if memo is None:
        memo = analysis.__dict__["_in_place_files"] = {id(src) for src in analysis.project.mentioning(
            "broadcast", "all_reduce")}
    return memo


def _target_names_of(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _target_names_of(el.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names_of(target.value)
    name = dotted_name(target)
    # a local name or a field of this object; not a field of another object (`args.hf_entity = ...` on the main
    # process: hub metadata on a shared namespace, which the code reads as that field, not as the namespace)
    return [name] if name and (name.count(".") == 0 or name.startswith("self.") and name.count(".") == 1) else []


# `nn.Module.to_empty(device=...)`: the same module (it returns self) with its parameters and buffers allocated on
# the device, uninitialised -- the structure of the module `.to(device)` moves on the other ranks, before a load
# or broadcast fills it (torch's meta-device initialisation)
_MODULE_ALLOCATIONS = frozenset({"to_empty"})


def _placement(value: cst.BaseExpression) -> bool:
    """`x.to(device)`, `x.cuda()`, `x.cpu()`: a value moved to a device, its structure and contents kept;
    `module.to_empty(device=...)`: the same module, its storage allocated there."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
        (value.func.attr.value in _DEVICE_MOVES or value.func.attr.value in _MODULE_ALLOCATIONS)


def _irrefutable(case: cst.MatchCase) -> bool:
    """`case _:` / `case name:` without a guard: matches whatever the earlier cases left."""
    pattern = case.pattern
    while isinstance(pattern, cst.MatchAs) and pattern.pattern is not None:
        pattern = pattern.pattern
    return case.guard is None and isinstance(pattern, cst.MatchAs) and pattern.pattern is None


def _none_of(tests: list[str]) -> str:
    """"`a` does not hold" / "none of `a`, `b` holds" (the first three of a long chain)."""
    if len(tests) == 1:
        return f"`{tests[0]}` does not hold"
    shown = ", ".join(f"`{t}`" for t in tests[:3])
    if len(tests) > 3:
        shown += f" and {len(tests) - 3} more"
    return f"none of {shown} holds"


def _body(block) -> Sequence[cst.CSTNode]:
    # an IndentedBlock holds statements; a one-line suite (`if rank: return`) holds small statements
    return block.body if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()


def _last_attr(func: cst.BaseExpression) -> Optional[str]:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _forms_world(stmt: cst.CSTNode) -> bool:
    """`init_process_group(..., world_size=N, rank=R)`: the program names the world's size itself, so the ranks
    that exited before it are not part of the WORLD the later collectives run on (a script that keeps one process
    of each tensor-parallel group). Without `world_size=` the launcher's count is awaited, and the exit stays one."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        value = getattr(small, "value", None)
        if isinstance(value, cst.Call) and _last_attr(value.func) == "init_process_group" and any(
                a.keyword is not None and a.keyword.value == "world_size" for a in value.args):
            return True
    return False


def _retries(node: cst.CSTNode) -> bool:
    """A `while` loop whose body ends by leaving it (`break`/`return`/`raise` as its last statement): every pass
    that gets past its `continue`s runs the rest once and leaves, so a rank that continues comes back to the same
    collectives instead of skipping them -- each rank runs them exactly once (`while True: batch = next_valid();
    if batch is None: continue; all_reduce(x); break`). A `for` loop can run out first: not a retry."""
    if not isinstance(node, cst.While) or node.orelse is not None:
        return False
    body = _body(node.body)
    if not body:
        return False
    last = body[-1]
    smalls = last.body if isinstance(last, cst.SimpleStatementLine) else (last,)
    return bool(smalls) and isinstance(smalls[-1], (cst.Break, cst.Return, cst.Raise))


def _reraises_failure(test: cst.CSTNode, node: cst.Raise) -> bool:
    """`if fut.exception(): raise fut.exception()` (`is not None` alike): the raise hands on the exception a task
    of this rank failed with (`concurrent.futures.Future.exception()`, an asyncio task's: "the exception raised by
    the call"), as `fut.result()` would have raised it -- a failure of this rank's own I/O or computation, an
    exceptional path as inside an `except` handler, not a decision the rank takes by its id or its data, whatever
    the task's arguments say of the rank (a per-rank file name)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.IsNot) and \
            isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        test = test.left
    if not (isinstance(test, cst.Call) and not test.args and isinstance(test.func, cst.Attribute)
            and test.func.attr.value == "exception"):
        return False
    return node.exc is not None and code_of(node.exc, 10 ** 6) == code_of(test, 10 ** 6)


_LEAVING = ("return", "raise", "exit")     # exits that leave the function (not a loop)


def _exits_together(g: Guard, pending: list[Guard], more: list[Guard], body, orelse) -> bool:
    """Both branches leave the same way (`if rank == 0: return a` / `else: return b`): not rank-dependent."""
    if g.kind != "exit":
        return False
    mine, other = (pending, more) if g in pending else (more, pending)
    return any(o.exit_kind == g.exit_kind for o in other) and bool(orelse)


def _conjuncts(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an `and` chain (`a and (b and c)`: a, b, c); the expression itself otherwise."""
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _excludes(test: cst.BaseExpression, earlier: cst.BaseExpression) -> bool:
    """Does `test` holding make `earlier` false -- is some conjunct of `earlier` the negation (`not x`) of a
    conjunct of `test`, or the other way round? (Decided on the code, parentheses aside.)"""
    def negation(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
        return isinstance(a, cst.UnaryOperation) and isinstance(a.operator, cst.Not) and \
            code_of(a.expression, 100000).strip("() ") == code_of(b, 100000).strip("() ")
    mine, theirs = _conjuncts(test), _conjuncts(earlier)
    return any(negation(a, b) or negation(b, a) for a in mine for b in theirs)


def distributed_truth_of(test: cst.BaseExpression, leaf: Callable[[cst.BaseExpression, int], Optional[bool]],
                         depth: int = 0) -> Optional[bool]:
    """Three-valued: the value in a distributed run of a test built with `not`/`and`/`or` from leaves that
    `leaf(test, depth)` answers (True, False, or None: not a question of whether the run is distributed). In a
    distributed run `a and b` is false when one is, `a or b` true when one is. Shared by the flow walk
    (`_distributed_truth`) and the sequence analysis (`SequenceAnalysis.distributed_truth`), which differ only
    in how a leaf is looked up."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = distributed_truth_of(test.expression, leaf, depth)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = distributed_truth_of(test.left, leaf, depth), distributed_truth_of(test.right, leaf, depth)
        known = isinstance(test.operator, cst.Or)
        if left is known or right is known:
            return known
        return None if left is None or right is None else not known
    return leaf(test, depth)


_MAX_CORRELATED_BRANCHES = 8    # a name several branches bind is recorded per branch for chains this long at most


def _correlated_join(before: dict, after: list[dict]) -> dict:
    """The records (`FlowWalk._correlated`) after an `if` chain whose branches left `after`: an earlier record
    that a branch dropped or replaced (it bound the name, or a name its path reads, again) is gone; what a branch
    recorded anew stays (a later branch's record of the same name replaces an earlier one's)."""
    out = {k: v for k, v in before.items() if all(d.get(k) is v for d in after)}
    for d in after:
        for k, v in d.items():
            if before.get(k) is not v:
                out[k] = v
    return out


def _distributed_truth(walk: "FlowWalk", test: cst.BaseExpression, depth: int = 0) -> Optional[bool]:
    """The value, in a run of more than one process, of a test that asks whether the run is distributed:
    `dist.is_initialized()`, `get_world_size() > 1`, or the launcher's `WORLD_SIZE` environment variable compared
    so (`world_size = int(os.environ.get("WORLD_SIZE", 1))`, then `if world_size > 1:`); None for any other."""
    if depth > 3:
        return None
    return distributed_truth_of(test, lambda leaf, at: _distributed_leaf(walk, leaf, at), depth)


def _distributed_leaf(walk: "FlowWalk", test: cst.BaseExpression, depth: int) -> Optional[bool]:
    if isinstance(test, cst.Name):
        value = _one_value(walk, test)
        return _distributed_truth(walk, value, depth + 1) if value is not None else None
    if isinstance(test, cst.Call):
        callee = walk.taint.facts.resolve_expr(test.func) or ""
        if callee.rsplit(".", 1)[-1] in ("is_initialized", "is_available") and \
                callee.startswith(("torch.distributed", "deepspeed.comm")):
            return True
        if callee in ("bool", "builtins.bool") and len(test.args) == 1 and test.args[0].keyword is None:
            return _distributed_truth(walk, test.args[0].value, depth + 1)
        return _helper_truth(walk, test, callee, depth) if not test.args and callee else None
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    op = type(test.comparisons[0].operator)
    right = literal_value(test.comparisons[0].comparator)
    if right == -1 and op in (cst.Equal, cst.NotEqual):
        # `local_rank != -1`: -1 is the value a rank id has when no distributed launch set it (argparse's
        # `--local_rank` default, `int(os.environ.get("LOCAL_RANK", -1))`): false on every rank of a distributed run
        hit = walk.eval(test.left)
        if hit is not None and hit.kind == "rank" and hit.axes is None:
            return op is cst.NotEqual
    if not isinstance(right, int) or isinstance(right, bool) or op not in _COMPARE or \
            not _world_size_value(walk, test.left, depth):
        return None
    many, one = _COMPARE[op](2, right), _COMPARE[op](1, right)    # a distributed run: 2 or more processes
    return many if many == _COMPARE[op](1 << 20, right) and many != one else None


def _helper_truth(walk: "FlowWalk", call: cst.Call, callee: str, depth: int) -> Optional[bool]:
    """`_dist_active()`: a checked function of no arguments whose every return outside an `except` handler (the
    side a failed import or call takes) asks whether the run is distributed, all alike (`return
    bool(dist.is_available() and dist.is_initialized())`): that answer. Memoised per function."""
    analysis = walk.taint.analysis
    source = analysis.call_source(walk.taint.src, callee, walk.cls)
    if source is None:
        return None
    memo = analysis.__dict__.setdefault("_helper_truths", {})
    key = (id(source[0]), source[1])
    if key in memo:
        return memo[key]
    memo[key] = None
    hit = analysis.function_info(source)
    if hit is None or hit[1].params:
        return None
    other, info = hit
    returns = _plain_returns(info.node.body)
    if not returns or any(r.value is None for r in returns):
        return None
    inner = FlowWalk(analysis.taint(other), scope=info.qualname, env={}, cls=info.class_name)
    truths = {_distributed_truth(inner, r.value, depth + 1) for r in returns}
    memo[key] = truths.pop() if len(truths) == 1 else None
    return memo[key]


def _plain_returns(body: cst.CSTNode) -> list:
    """The `return` statements of a function body outside `except` handlers and nested functions."""
    found: list = []

    class _Find(cst.CSTVisitor):
        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

        def visit_ExceptHandler(self, node: cst.ExceptHandler) -> bool:
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False
    body.visit(_Find())
    return found


_COMPARE = {cst.GreaterThan: lambda a, b: a > b, cst.GreaterThanEqual: lambda a, b: a >= b,
            cst.LessThan: lambda a, b: a < b, cst.LessThanEqual: lambda a, b: a <= b,
            cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b}


def _world_size_value(walk: "FlowWalk", e: cst.BaseExpression, depth: int) -> bool:
    """Is `e` the number of processes of the run: `get_world_size()` of torch.distributed/deepspeed.comm (no
    group: the whole world), the launcher's `WORLD_SIZE` read from the environment (through `int(...)`), or a
    name whose one assignment reaching here is one of those?"""
    if isinstance(e, cst.Call):
        callee = walk.taint.facts.resolve_expr(e.func) or ""
        if callee.rsplit(".", 1)[-1] == "get_world_size" and callee.startswith(("torch.distributed", "deepspeed.comm")):
            return not e.args
        if callee in ("int", "builtins.int") or isinstance(e.func, cst.Name) and e.func.value == "int":
            return len(e.args) == 1 and _world_size_value(walk, e.args[0].value, depth)
        if e.args and (callee.endswith("environ.get") or callee in ("os.getenv", "getenv")):
            return literal_value(e.args[0].value) == "WORLD_SIZE"
        return False
    if isinstance(e, cst.Subscript) and (dotted_name(e.value) or "").endswith("environ") and len(e.slice) == 1 \
            and isinstance(e.slice[0].slice, cst.Index):
        return literal_value(e.slice[0].slice.value) == "WORLD_SIZE"
    if isinstance(e, cst.IfExp) and depth < 3:
        # `dist.get_world_size() if dist.is_initialized() else 1`: the world size on the distributed side of a
        # test that asks whether the run is distributed, 1 (one process) on the other
        side = _distributed_truth(walk, e.test, depth + 1)
        if side is None:
            return False
        many, one = (e.body, e.orelse) if side else (e.orelse, e.body)
        return literal_value(one) == 1 and _world_size_value(walk, many, depth + 1)
    if isinstance(e, cst.Name) and depth < 3:
        value = _one_value(walk, e)
        return value is not None and _world_size_value(walk, value, depth + 1)
    return False


def _one_value(walk: "FlowWalk", e: cst.Name) -> Optional[cst.BaseExpression]:
    """The one assignment of the name `e` reaching here (the file's one assignment, in module-level code)."""
    from dslint.program.process_groups import reaching_value
    info = walk.taint.src.facts.functions.get(walk.scope)
    if info is not None:
        return reaching_value(info.node, e, e.value)
    values = [a.value for a in iter_assigns(walk.taint.src.module)
              if any(dotted_name(t.target) == e.value for t in a.targets)]
    return values[0] if len(values) == 1 else None


def _members(origin: Optional[Origin]) -> frozenset:
    """The group-membership predicates a test is made of (`is_pipeline_last_stage`), when it is one."""
    return origin.member if origin is not None and origin.member else frozenset()


def _negated_members(walk: "FlowWalk", test: cst.BaseExpression) -> frozenset:
    """`if not is_pipeline_last_stage():` -- in its body, the predicate is false."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _members(walk.eval(test.expression))
    return frozenset()


_names_of = name_nodes


def _read_roots(e: cst.CSTNode) -> set[str]:
    """The names an expression reads values from: its names but attribute names (`args.n`: `args`) and the plain
    names it calls (`range(n)`: `n`)."""
    skip: set[int] = set()
    stack: list[cst.CSTNode] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Attribute):
            skip.add(id(n.attr))
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name):
            skip.add(id(n.func))
        stack.extend(n.children)
    return {n.value for n in name_nodes(e) if id(n) not in skip}


def _bound_in_every(bodies: list, final) -> tuple[list, list, set, set]:
    """The branches of a chain (its `else` last), the names each binds, the names every one binds, and every name
    any of them binds."""
    branches = [*bodies, final]
    bound = [_bound_names([body]) for body in branches]
    every = set(bound[0]).intersection(*bound[1:])
    return branches, bound, every, {n for names in bound for n in names}


def fixed_truth(test: cst.BaseExpression, fixed: dict) -> Optional[bool]:
    """The truth of a test when the parameters in `fixed` hold those constants, the others unknown (None: it
    depends on them): `build_only or "model_parallel_size" not in overwrite_args` with `overwrite_args={}` holds."""
    if isinstance(test, cst.Name):
        return bool(fixed[test.value]) if test.value in fixed else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = fixed_truth(test.expression, fixed)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = fixed_truth(test.left, fixed), fixed_truth(test.right, fixed)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else (True if left is True and right is True else None)
        return True if True in (left, right) else (False if left is False and right is False else None)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        if isinstance(op, (cst.Is, cst.IsNot)) and literal_value(test.comparisons[0].comparator) is None:
            name = dotted_name(test.left)
            if name in fixed:
                return (fixed[name] is None) == isinstance(op, cst.Is)
            return None
        for name in (domains.name_subjects(test) | domains.subjects(test)) & fixed.keys():
            try:
                hit = domains.truth(test, name, fixed[name])
            except TypeError:
                hit = None
            if hit is not None:
                return hit
    return None


def _without_axes(origin: Origin, axes: frozenset, taint: RankTaint) -> Optional[Origin]:
    """`origin` where every rank of the run has the same coordinates `axes` (a group of those coordinates holds one
    rank): None when it varies by them only, else the origin varying by the run's other coordinates
    (`process_groups.remaining_axes`), as a collective over a group of those coordinates leaves it."""
    if origin.axes is not None and origin.axes <= axes:
        return None
    rest = remaining_axes((origin.axes if origin.axes is not None else ALL_AXES) - axes,
                          getattr(taint.analysis, "project", None))
    if not rest:
        return None
    return replace(origin, axes=frozenset(rest), by_setting=None)


# serializations and the conversions that keep every byte of a value (`torch.ByteTensor(buffer.getbuffer())`,
# `.to(device)`, `io.BytesIO(buffer.cpu().numpy())`, `torch.load(...)`): what comes out holds what went in, in
# another form (`faithful_source`)
_SERIALIZING = {"torch.save", "pickle.dump", "pickle.dumps", "cloudpickle.dumps", "dill.dumps", "torch.load",
                "pickle.load", "pickle.loads", "cloudpickle.loads", "dill.loads"}
_KEEPING_FUNCTIONS = {"torch.ByteTensor", "torch.tensor", "torch.as_tensor", "torch.frombuffer", "torch.from_numpy",
                      "torch.cuda.ByteTensor", "torch.ByteStorage.from_buffer", "io.BytesIO", "bytearray", "bytes",
                      "numpy.frombuffer", "np.frombuffer", "numpy.array", "np.array", "numpy.asarray", "np.asarray"}
_KEEPING_METHODS = {"getbuffer", "getvalue", "to", "cuda", "cpu", "numpy", "tobytes", "contiguous", "clone",
                    "detach", "tolist"}


def faithful_source(facts, e: cst.BaseExpression) -> Optional[str]:
    """The one name whose whole value `e` holds in another form -- a serialization, a deserialization, or a
    conversion that keeps every byte (`torch.ByteTensor(buffer.getbuffer()).to(device)` → "buffer"); None when
    `e` is none of those (a length, a sum, any other call)."""
    for _ in range(8):
        if isinstance(e, cst.Name):
            return e.value
        if not isinstance(e, cst.Call):
            return None
        positional = [a for a in e.args if a.keyword is None and not a.star]
        if isinstance(e.func, cst.Attribute) and e.func.attr.value in _KEEPING_METHODS and \
                (facts.resolve_expr(e.func) or "") not in _KEEPING_FUNCTIONS | _SERIALIZING:
            if e.func.attr.value not in ("to", "cuda") and positional:
                return None
            e = e.func.value
            continue
        callee = facts.resolve_expr(e.func) or ""
        if callee in _KEEPING_FUNCTIONS or callee in _SERIALIZING and callee.endswith(("load", "loads", "dumps")):
            if not positional:
                return None
            e = positional[0].value
            continue
        return None
    return None


def serialized_into(facts, call: cst.Call) -> Optional[tuple[str, str]]:
    """(object, file) of `torch.save(obj, buffer)` / `pickle.dump(obj, buffer)`: the file now holds the object."""
    callee = facts.resolve_expr(call.func) or ""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if callee in ("torch.save", "pickle.dump") and len(positional) >= 2 and \
            isinstance(positional[0], cst.Name) and isinstance(positional[1], cst.Name):
        return positional[0].value, positional[1].value
    return None


# builtins that compute from their arguments alone (`_derived_payload`)
_PAYLOAD_BUILTINS = frozenset({"len", "enumerate", "zip", "range", "int", "float", "bool", "tuple", "list"})



def _other_targets(node: cst.CSTNode) -> list:
    """The targets of the bindings in `node` that `iter_assigns` does not list: `x += ...`, `x: T = ...`,
    `for x in ...`, `with ... as x`, `(x := ...)`."""
    out: list = []

    class _Collect(cst.CSTVisitor):
        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            out.append(n.target)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            out.append(n.target)

        def visit_For(self, n: cst.For) -> None:
            out.append(n.target)

        def visit_AsName(self, n: cst.AsName) -> None:
            out.append(n.name)

        def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
            out.append(n.target)

    node.visit(_Collect())
    return out
