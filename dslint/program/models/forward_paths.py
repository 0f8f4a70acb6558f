"""Which module attributes `forward` reaches on which paths.

The paths of a `forward` (and of the `self.method(...)` helpers it calls, inlined) are enumerated through
`if`/`elif`/`else`, early `return`, loops and conditional expressions. Each path records the branch decisions
it took, split in two kinds: **data-dependent** tests read the batch -- any input of forward (whatever its
name: `if images is not None`, `if aux_label is not None`, `if batch.get("k")`, `if x.shape[1] == 1`, a `for`
over an input that may be empty) or a value derived from one -- or the rank, and can go differently on
different ranks in the same step; **uniform** tests read only values fixed for the run (`self.training`,
`self.mode` set in `__init__`, `self.config.x`, forward's option parameters: a `bool`/`int`/`float`/`str`
annotation or a literal default such as `return_dict: bool = True`) and go the same way everywhere. Equal
uniform tests are one decision wherever they appear (`if self.mode == "a"` in both arms of a data test), so
an attribute is *divergent* when one path uses it and another path that agrees on every uniform decision does
not: for that assignment of the uniform values, ranks whose batch takes the other path produce no gradient
for it. A test that only says where a value comes from counts as uniform: a default fill (`if v is None:
v = ...`) and a hand-over (one arm takes the result from the tested input without any attribute:
`else: out = enc_states`) -- the caller computed it otherwise. A `for` over an optional input (a parameter
with a default, `**kwargs`) may run zero times; uses under `torch.no_grad()` produce no gradient and are not
uses. Paths ending in `raise` are not executions and are ignored.

A compound test is judged through its `and`/`or`/`not` (`_test_value`): it is data-dependent only when an atom
that reads the batch can still change its outcome on a step that reduces gradients. An atom testing the presence
of a batch field the configuration or the callers decide is uniform; `self.training` is true on such a step under
ZeRO-1/2 (a FALSE conjunct or a TRUE disjunct settles the operation: `images is not None and (ids.shape[1] != 1 or
self.training)`); a read of a tensor's placement (`x.is_cuda`, `x.dtype`, `x.device.type`) is no read of its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from dslint.program.models.modules import ModuleClass
from dslint.sources.cstwalk import visit as cst_visit
from dslint.program.facts import dotted_name
from dslint.program.statement_walks import names_reached

MAX_PATHS = 512
MAX_DEPTH = 5
# annotations of option parameters (a switch or a size, not a batch tensor)
OPTION_TYPES = frozenset({"bool", "int", "float", "str"})


# what a test is on the steps that reduce gradients (`ForwardPaths._test_value`)
DATA, SAME, TRUE, FALSE = "data", "same", "true", "false"


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
    inputs: tuple = ()          # the data-dependent names it reads (forward's inputs or values derived from them)
    key: Optional[str] = None   # a batch field whose presence the test reads (`"k" in batch`, `b.get("k") is None`)
    key_varies: bool = False    # ... and the run writes it on some samples or batches only (`batch_keys`: VARIES)


class _Names(cst.CSTVisitor):
    def __init__(self, interesting: frozenset, holders: frozenset = frozenset()) -> None:
        self.interesting = interesting
        self.holders = holders
        self.attrs: set[str] = set()
        self.names: set[str] = set()
        self.calls: list[cst.Call] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in self.interesting and not self._through_other_value(node.value):
            self.attrs.add(node.attr.value)

    def _through_other_value(self, receiver: cst.BaseExpression) -> bool:
        """Is `receiver` a chain from `self` whose first step is an attribute that no class of the root holds as
        a module or a parameter (`self.config.decoder` reads a configuration's field, not the sub-module
        `decoder`)? Only the first step is judged: past a held module (`self.target.lm.output_layer`) the chain
        walks that module's own sub-modules, which the root's classes do not list."""
        first = None
        while isinstance(receiver, cst.Attribute):
            first = receiver.attr.value
            receiver = receiver.value
        return first is not None and isinstance(receiver, cst.Name) and receiver.value == "self" and \
            first not in self.holders and first not in self.interesting

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

    def __init__(self, cls: ModuleClass, interesting: frozenset, project=None) -> None:
        self.cls = cls
        self.interesting = interesting
        self.project = project                  # the ProjectView: rank-varying tests from the lattice
        self._scopes: dict[int, dict[int, str]] = {}    # id(src) -> id(def node) -> qualified name
        self._rank_memo: dict[int, bool] = {}
        self.conditions: list[Condition] = []
        self.uses_at: dict[str, list[tuple[cst.CSTNode, str, object]]] = {}
        self._stack: list[str] = []
        self._srcs: list[object] = [cls.src]
        self._loop_vars: set[str] = set()
        self._uniform: dict[str, int] = {}      # code of a uniform test -> its one condition id
        self._params: list[set[str]] = []       # the parameters of the methods being walked
        self._no_grad = 0                       # inside `torch.no_grad()`: uses there produce no gradient
        self._fns: list[cst.FunctionDef] = []
        self._optional: list[set[str]] = []     # per method walked: inputs a batch may lack or bring empty
        self._following: list = []              # the statements after the one being walked, in its block
        self._caller_keys: dict[str, str] = {}  # root input -> the batch field every caller passes in it
        # the modules and parameters the root's classes hold: a chain from `self` through anything else reads
        # another object's field, whatever it is called (`_Names._through_other_value`)
        self._holders = frozenset(n for c in cls.mro() for n in c.attrs)

    # --- expressions ------------------------------------------------------------------------------
    def _scan(self, node: cst.CSTNode) -> _Names:
        names = _Names(self.interesting, self._holders)
        cst_visit(node, names)
        return names

    def _is_dd(self, node: cst.CSTNode, dd: set[str]) -> bool:
        """Does the test read the batch (a forward input or a value derived from one, whatever its name: its
        value, its presence `x is None`, its truth `if x:`) or the rank? A test on the variable of a loop
        differs per iteration, not per rank."""
        names = _data_names(node)
        if names & self._loop_vars:
            return False
        return bool(names & dd) or self._reads_rank(node)

    def _reads_rank(self, node: cst.CSTNode) -> bool:
        """Does the value differ across ranks for a rank's own reason -- a rank id, a rank-0 test, a value
        computed from one (`self.rank` set from `dist.get_rank()`, `os.environ["LOCAL_RANK"]`)? Asked of the
        rank-uniformity lattice where the expression is evaluated (its function, the class family's attributes),
        not read off the names it spells -- and not along the axes the gradient reduction does not span (a
        model-parallel rank: `process_groups.uniform_over` the data-parallel group). The batch's own variation
        is `dd`'s."""
        if self.project is None or not isinstance(node, cst.BaseExpression):
            return False
        if id(node) not in self._rank_memo:
            from dslint.program.rank.lattice import Uniform, uniformity
            src = self._srcs[-1]
            scope = self._scope_of(src, self._fns[-1]) if self._fns else None
            try:
                u = uniformity(self.project, src, node, scope)
            except RecursionError:
                u = None
            varying = u is not None and not isinstance(u, Uniform) and u.origin.kind in ("rank", "derived")
            if varying:
                # gradients are reduced over the data-parallel group (with the context-parallel ranks under
                # sequence parallelism): a test along the other axes of the rank grid (a tensor/model-parallel
                # rank) is taken alike by every rank of one reduction
                from dslint.program.process_groups import CP, DP, Group, uniform_over
                varying = not uniform_over(u.origin, Group(DP | {CP}))
            self._rank_memo[id(node)] = varying
        return self._rank_memo[id(node)]

    def _scope_of(self, src, fn: cst.FunctionDef) -> Optional[str]:
        """The qualified name `src`'s facts give the function `fn` (a method walked or inlined)."""
        table = self._scopes.get(id(src))
        if table is None:
            facts = getattr(src, "facts", None)
            table = {id(info.node): name for name, info in facts.functions.items()} if facts is not None else {}
            self._scopes[id(src)] = table
        return table.get(id(fn))

    def _expr(self, node: cst.CSTNode, paths: list[Path], dd: set[str], method: str, record: bool = True
              ) -> list[Path]:
        """Uses in an expression; inlines `self.helper(...)` calls it makes."""
        scan = self._scan(node)
        used = frozenset(scan.attrs) if not self._no_grad else frozenset()
        if record and used:
            for a in used:
                self.uses_at.setdefault(a, []).append((node, method, self._srcs[-1]))
        paths = [p.use(used) for p in paths]
        for call in scan.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                found = self.cls.find_method(func.attr.value)
                if found is not None and found[1].name not in self._stack and len(self._stack) < MAX_DEPTH:
                    callee_dd = self._bind(found[1].node, call, dd)
                    callee_optional = self._bind(found[1].node, call, self._optional[-1]) if self._optional else set()
                    self._srcs.append(found[0].src)
                    try:
                        paths = self.run(found[1].node, paths, callee_dd, callee_optional)
                    finally:
                        self._srcs.pop()
        return paths

    def _bind(self, fn: cst.FunctionDef, call: cst.Call, dd: set[str]) -> set[str]:
        """The helper's parameters that receive data-dependent values at this call (its option parameters
        excepted)."""
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][1:]
        out: set[str] = set()
        positional = [a for a in call.args if a.keyword is None and not a.star]
        for name, arg in zip(params, positional):
            if self._is_dd(arg.value, dd):
                out.add(name)
        for arg in call.args:
            if arg.keyword is not None and self._is_dd(arg.value, dd):
                out.add(arg.keyword.value)
            if arg.star and self._is_dd(arg.value, dd):
                out |= {p.name.value for p in fn.params.kwonly_params} | set(params)
                if isinstance(fn.params.star_kwarg, cst.Param):
                    out.add(fn.params.star_kwarg.name.value)
        return out - option_params(fn)

    # --- statements -------------------------------------------------------------------------------
    def run(self, fn: cst.FunctionDef, paths: list[Path], dd: set[str], optional: frozenset = frozenset()
            ) -> list[Path]:
        """Paths after running `fn` (returns rejoin the caller). `optional`: the inputs a batch may lack or
        bring empty (forward's parameters with a default, `**kwargs`) and the values derived from them."""
        self._stack.append(fn.name.value)
        params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        self._params.append(params)
        self._fns.append(fn)
        self._optional.append(set(optional) | (_derived(fn, set(optional)) - params))
        no_grad = any(_is_no_grad(d.decorator) for d in fn.decorators)
        self._no_grad += no_grad
        try:
            dd = set(dd) | (_derived(fn, dd) - params)   # a parameter keeps its own kind until reassigned
            live, ended = self._block(fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], paths, dd,
                                      fn.name.value)
            return live + ended["return"] + ended["raise"]
        finally:
            self._stack.pop()
            self._params.pop()
            self._fns.pop()
            self._optional.pop()
            self._no_grad -= no_grad

    def root(self, fn: cst.FunctionDef, uniform: frozenset = frozenset(), keys: Optional[dict] = None
             ) -> list[Path]:
        """Every input of forward is the batch's (a tensor, a batch field, `**kwargs`), whatever its name;
        only its option parameters (`option_params`), `self` and the inputs its callers in the run pass
        uniformly (`uniform`, from `uniform_inputs`) are fixed for the run. `keys`: the batch field each input
        receives at every call (`caller_keys`)."""
        self._caller_keys = dict(keys or {})
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)]
        if isinstance(fn.params.star_kwarg, cst.Param):
            params.append(fn.params.star_kwarg.name.value)
        if isinstance(fn.params.star_arg, cst.Param):
            params.append(fn.params.star_arg.name.value)
        dd = set(params[1:] if params and params[0] == "self" else params) - option_params(fn) - set(uniform)
        optional = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
                    if p.default is not None} & dd
        if isinstance(fn.params.star_kwarg, cst.Param):
            optional.add(fn.params.star_kwarg.name.value)
        return self.run(fn, [Path(frozenset(), frozenset())], dd, frozenset(optional))

    def _cond(self, node: cst.CSTNode, method: str, dd: Optional[set[str]] = None) -> int:
        inputs = tuple(sorted(_data_names(node) & dd)) if dd else ()
        self.conditions.append(Condition(node, method, self._srcs[-1], inputs))
        return len(self.conditions) - 1

    def _decide(self, node: cst.BaseExpression, method: str, is_dd: bool, dd: set[str]) -> tuple[int, bool]:
        """(condition id, negated) of a test: a uniform test is one decision wherever its code recurs
        (`not t` is `t` negated), so the paths through two equal `if self.mode == "a"` agree on it."""
        if is_dd:
            return self._cond(node, method, dd), False
        negated = False
        while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            node, negated = node.expression, not negated
        key = " ".join(cst.Module([]).code_for_node(node).split())
        if key not in self._uniform:
            self._uniform[key] = self._cond(node, method)
        return self._uniform[key], negated

    def _check(self, paths: list[Path]) -> list[Path]:
        if len(paths) > MAX_PATHS:
            raise TooManyPaths()
        return list(dict.fromkeys(paths))

    def _block(self, stmts, paths: list[Path], dd: set[str], method: str):
        ended: dict[str, list[Path]] = {"return": [], "raise": [], "continue": [], "break": []}
        live = paths
        stmts = list(stmts)
        for i, stmt in enumerate(stmts):
            if not live:
                break
            self._following = stmts[i + 1:]
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
            # a `for` over an optional input (`extra=None`, `**kwargs`, values derived from them) may run zero times
            # on some rank; one over a required input (the batch's tokens, the experts its tokens hit) runs
            empty = isinstance(stmt, cst.For) and self._is_dd(head, dd) and \
                _iterated_name(head) in (self._optional[-1] if self._optional else ())
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
            if empty or (isinstance(stmt, cst.While) and self._is_dd(head, dd)):
                # a data-dependent loop may not run at all (`for item in extra` over an empty list on some rank);
                # tests on the loop variable inside are per iteration, not per rank (`_loop_vars`)
                cid = self._cond(head, method, dd)
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
            no_grad = any(_is_no_grad(item.item) for item in stmt.items)
            self._no_grad += no_grad
            try:
                return self._block(stmt.body.body, paths, dd, method)
            finally:
                self._no_grad -= no_grad
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return paths, ended
        return self._expr(stmt, paths, dd, method), ended

    def _if(self, stmt: cst.If, paths: list[Path], dd: set[str], method: str, following: Optional[list] = None):
        following = list(self._following) if following is None else following     # before any inlining
        paths = self._expr(stmt.test, paths, dd, method)
        is_dd = self._is_dd(stmt.test, dd) and not self._fills_default(stmt) and not self._handed_over(stmt) \
            and not self._fills_after_return(stmt, following) \
            and self._test_value(stmt.test, dd) == DATA
        cid, neg = self._decide(stmt.test, method, is_dd, dd)
        if is_dd:
            self._key_evidence(self.conditions[cid], stmt.test)
        yes, ended = self._block(stmt.body.body, [p.take(cid, not neg, is_dd) for p in paths], dd, method)
        no_paths = [p.take(cid, neg, is_dd) for p in paths]
        if isinstance(stmt.orelse, cst.If):
            no, sub = self._if(stmt.orelse, no_paths, dd, method, following=[])
        elif stmt.orelse is not None:
            no, sub = self._block(stmt.orelse.body.body, no_paths, dd, method)
        else:
            no, sub = no_paths, {}
        for k, v in sub.items():
            ended[k] += v
        return self._check(yes + no), ended

    def _fills_after_return(self, stmt: cst.If, following: list) -> bool:
        """`if memory is not None: return self.decode(memory, tgt)` followed by `memory = self.encode(src)` and
        the same decoding: a default fill written with an early return. When the caller handed the value over
        (having computed it), the arm returns with it; otherwise the rest of the block computes it first. Only
        when the early arm uses no attribute and calls no method that the rest of the block does not use too
        (an arm with a projection of its own is no fill)."""
        if stmt.orelse is not None or not following or not self._params:
            return False
        present, _ = _presence_tests(stmt.test)
        if len(present) != 1 or not isinstance(stmt.test, (cst.Comparison, cst.Name)):
            return False
        name = next(iter(present))
        if name not in self._params[-1] or not _ends_in_return(stmt.body):
            return False
        rest = cst.IndentedBlock(body=list(following))
        refills = any(t == name and name not in _free_names(value) for t, value in _assigned(rest))
        if not refills:
            return False
        early, late = self._scan(stmt.body), self._scan(rest)
        return early.attrs <= late.attrs and _self_calls(early.calls) <= _self_calls(late.calls)

    def _test_value(self, test: cst.BaseExpression, dd: set[str]) -> str:
        """What a test is on the steps that reduce gradients, from its atoms through `and`/`or`/`not`: DATA (the
        batch decides it), SAME (the same on every rank and batch: it reads no batch data, or only a batch field's
        presence that the configuration or the callers decide -- `_presence_by_config`), or always TRUE/FALSE while
        the module trains (`self.training`, `_trains`). `images is not None and (ids.shape[1] != 1 or
        self.training)` is SAME when the collator always sets `images`: the shape test cannot change the outcome of
        a training step. A FALSE conjunct or a TRUE disjunct settles the operation whatever the other side reads."""
        if isinstance(test, cst.BooleanOperation):
            left, right = self._test_value(test.left, dd), self._test_value(test.right, dd)
            settled, neutral = (FALSE, TRUE) if isinstance(test.operator, cst.And) else (TRUE, FALSE)
            if settled in (left, right):
                return settled
            if DATA in (left, right):
                return DATA
            return neutral if left == right == neutral else SAME
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._test_value(test.expression, dd)
            return {TRUE: FALSE, FALSE: TRUE}.get(inner, inner)
        if self._trains(test):
            return TRUE
        if not self._is_dd(test, dd) or self._presence_by_config(test):
            return SAME
        return DATA

    def _trains(self, test: cst.BaseExpression) -> bool:
        """`self.training` of the module whose forward is walked, where its being False cannot matter: torch's
        flag is True between `model.train()` and `model.eval()`, the steps whose backward reduces gradients --
        what ZeRO-1/2 skew. Under ZeRO-3 (or a stage not known) a forward in evaluation mode gathers parameters
        too, so there the flag is a setting like any other (SAME)."""
        if not (isinstance(test, cst.Attribute) and test.attr.value == "training" and
                isinstance(test.value, cst.Name) and test.value.value == "self") or self.project is None:
            return False
        from dslint.program.models.moe_usage import run_stages
        stages = run_stages(self.project)
        return bool(stages) and None not in stages and max(stages) <= 2

    def _presence_by_config(self, test: cst.BaseExpression) -> bool:
        """A test of one batch field's presence (`depth is not None` of an input, `"depth" in batch`,
        `batch.get("depth") is None`, a local read from `batch.get("depth")`, an input every caller fills from
        `sensors.get("depth")`) where every write of that key in the run is unconditional or decided by run-fixed
        settings (`batch_keys`): the collator always or never sets it for a given configuration, so every rank's
        batch takes the same arm. Where the run writes the key nowhere (a preprocessor fills the batch from a
        configured list of sensors), the model's own construction decides: a class whose `__init__` builds its
        sub-modules under a test of the same key's membership in its configuration (`if "depth" in
        cfg.input_sensors:`) declares the field a configured input, there on every batch or on none
        (`configured_key`)."""
        if self.project is None:
            return False
        if self._passed_by_settings(test):
            return True
        key = self._presence_key(test)
        if key is None:
            return False
        from dslint.program.models.batch_keys import FIXED, UNSEEN, key_presence
        state = key_presence(self.project, key)
        return state == FIXED or (state == UNSEEN and configured_key(self.cls, key))

    def _passed_by_settings(self, test: cst.BaseExpression) -> bool:
        """A presence test of an optional input of the root forward (`prompt_pos is not None`, `prompt_pos`, a
        parameter defaulting to None) that every call of the run handing it over by keyword does only under run
        settings, with a value there whenever it runs (`if args.continuous_prompt: model(..., prompt_pos=
        data["prompt_pos"])`): `keyword_presence.presence_set_by_callers`. The batch does not decide it."""
        if len(self._stack) != 1 or not self._fns:
            return False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
                isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)) and \
                isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
            test = test.left
        if not isinstance(test, cst.Name):
            return False
        fn = self._fns[0]
        params = {p.name.value: p for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        if test.value not in params:
            return False
        optional = isinstance(params[test.value].default, cst.Name) and params[test.value].default.value == "None"
        positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][1:]
        position = positional.index(test.value) if test.value in positional else None
        from dslint.program.models.call_presence import presence_per_call
        from dslint.program.models.keyword_presence import family_of, presence_set_by_callers
        from dslint.program.models.modules import model_facts
        if optional and presence_set_by_callers(self.project, test.value, position,
                                                family_of(model_facts(self.project), self.cls)):
            return True
        # issue 30 item 5: every call of the model passes a literal or a never-None value there (`model(images,
        # texts)` on every training step, `model.module(da_images, None)` beside it): decided per call site
        return presence_per_call(self.project, self.cls, test.value, position, params[test.value].default is not None)

    def _key_evidence(self, cond: Condition, test: cst.BaseExpression) -> None:
        """Issue 30 item 6: a data-dependent test of a batch field named as a string splits ranks only where the
        run's batches differ in that field -- the run's writes of the key (`batch_keys.key_presence`) are the
        evidence DSL303 asks for before a proven finding."""
        cond.key = self._presence_key(test, literal=True)
        if cond.key is not None and self.project is not None:
            from dslint.program.models.batch_keys import VARIES, key_presence
            cond.key_varies = key_presence(self.project, cond.key) == VARIES

    def _presence_key(self, test: cst.BaseExpression, literal: bool = False) -> Optional[str]:
        """The batch field whose presence `test` reads. `literal`: only where the code names the key as a string
        (`"k" in batch`, `batch.get("k") is None`, a local read from `batch.get("k")`, an input every caller fills
        from `sensors.get("k")`), not an input taken for the field of its own name."""
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        subject = test
        if isinstance(test, cst.Comparison):
            if len(test.comparisons) != 1:
                return None
            comp = test.comparisons[0]
            if isinstance(comp.operator, (cst.In, cst.NotIn)):
                return test.left.evaluated_value if isinstance(test.left, cst.SimpleString) else None
            if not (isinstance(comp.operator, (cst.Is, cst.IsNot)) and isinstance(comp.comparator, cst.Name)
                    and comp.comparator.value == "None"):
                return None
            subject = test.left
        entry = _entry_of(subject)
        if entry is not None:
            return _evaluated(entry[1])
        if not isinstance(subject, cst.Name):
            return None
        name = subject.value
        if name in (self._params[-1] if self._params else ()):
            if len(self._stack) == 1 and name in self._caller_keys:
                return self._caller_keys[name]      # every caller passes `sensors.get("k")`: the field "k"
            return None if literal else name    # an input: the batch field of that name (`model(**batch)`)
        values = [v for t, v in _assignments(self._fns[-1]) if t == name] if self._fns else []
        if len(values) == 1 and _entry_of(values[0]) is not None:
            return _evaluated(_entry_of(values[0])[1])
        return None

    def _handed_over(self, stmt: cst.If) -> bool:
        """`if v is None: out = self.encoder(x) else: out = v.to(x.dtype)`, `if cache is not None and ...:
        k = cache.keys else: k = self.k_proj(h)`: when the input `v` is there, one arm takes the result from it
        (or a value derived from it) without any of the attributes -- the caller computed it (precomputed
        encoder states, a cache); the test says where the result comes from, not which parameters the step
        trains. An arm that uses attributes of its own on the input (`h = self.proj(images)`) is no hand-over.

        Alternatives count alike, through an `elif` chain: `if input_ids is not None: h = self.embed(input_ids)
        elif inputs_embeds is not None: h = inputs_embeds`, and `if input_ids is not None: ... else: h =
        query_embeds` where the arm without the tested input takes the result from another optional input: the
        caller hands over one of two inputs of the same role (ids or embeddings it computed itself); which one is
        its calling convention, not the batch's content."""
        arms = _chain_arms(stmt)
        if len(arms) < 2:
            return False
        fn = self._fns[-1] if self._fns else None
        # the inputs a caller may leave out (a default), whether this run's callers pass them or not
        optional = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
                    if p.default is not None} if fn is not None else set()
        assigned = [{t for t, _ in _assigned(body)} for _, body in arms]
        for i, (test, body) in enumerate(arms):
            if self._scan(body).attrs:
                continue
            sources: set[str] = set()
            if test is not None:
                sources |= _presence_tests(test)[0]
            if i + 1 == len(arms) and i == 1 and test is None:
                # the `else` of a single test: the inputs present when the test fails, and the optional inputs
                # that stand in for the one the test found absent (`if ids is not None: ... else: h = embeds`)
                head = arms[0][0]
                sources |= _presence_tests(head)[1]
                if _absence_test(head, negated=False):
                    sources |= optional | self._records_of(_presence_tests(head)[0], fn)
            elif i == 0 and _absence_test(test, negated=True):
                # `if ids is None: h = embeds else: h = self.embed(ids)`
                sources |= optional | self._records_of(_presence_tests(test)[1], fn)
            if not sources:
                continue
            carried = _derived_from(fn, set(sources)) if fn is not None else set(sources)
            got_from_input = {t for t, value in _assigned(body) if _free_names(value) & carried}
            others = set().union(*(a for j, a in enumerate(assigned) if j != i))
            if got_from_input & others:
                return True
        return False

    def _records_of(self, names: set[str], fn: Optional[cst.FunctionDef]) -> set[str]:
        """The inputs of `fn` that the tested locals are read from (`input_ids = seq_ctx.input_ids`: `seq_ctx`), when
        none of them is an input itself: one record the caller fills with one of two alternatives (ids, or the
        embeddings it computed), so another of its fields stands in for the one found absent."""
        if fn is None or not names or names & (self._params[-1] if self._params else set()):
            return set()
        params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        return {p for p in params if names <= _derived_from(fn, {p})}

    def _fills_default(self, stmt: cst.If) -> bool:
        """A presence test whose body replaces one of the function's own inputs (`if inputs_embeds is None:
        inputs_embeds = self.embed(input_ids)`, `if input_ids is not None: inputs_embeds = self.embed(input_ids)`)
        while the other arms, if any, use no attribute (`elif not isinstance(out, Output): out = Output(*out)`):
        the test only says whether the caller handed that value over (having computed it otherwise) or left it
        to be computed here. A body that extends the input (`text = cat([self.proj(images), text])`) is no
        replacement."""
        test = stmt.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        comp = test.comparisons[0]
        if not (isinstance(comp.operator, (cst.Is, cst.IsNot)) and isinstance(comp.comparator, cst.Name)
                and comp.comparator.value == "None"):
            return False
        if stmt.orelse is not None and self._scan(stmt.orelse).attrs:
            return False
        params = self._params[-1] if self._params else set()
        if isinstance(test.left, cst.Name):
            tested = test.left.value
            # the input replaced is the tested one, or is computed from it (its alternative); a body that only
            # resets another input (`attention_mask = None` beside the image features) replaces nothing the
            # test is about
            if any(t in params and not (_free_names(value) & {t}) and (t == tested or tested in _free_names(value))
                   for t, value in _assigned(stmt.body)):
                return True
            # `if prompt_ids is not None: out = self.encoder(prompt_ids, cache=cache); cache = out.cache` then `elif
            # cache is None: raise`: without the tested input the caller must hand the replaced input over (the
            # chain raises otherwise), so the arm only computes here what a caller may have computed before -- a
            # cache the arm extends when handed one is still the caller's choice of where it comes from
            required = _required_otherwise(stmt)
            from_tested = _derived_from(stmt.body, {tested})
            return any(t in params and t in required and _free_names(value) & from_tested
                       for t, value in _assigned(stmt.body))
        entry = _entry_of(test.left)
        if entry is None or isinstance(comp.operator, cst.IsNot):
            return False
        # `if outputs.get("image") is None: outputs["image"] = self.encode(pixels)`: an entry of an input dict the
        # caller may have filled (precomputed encoder outputs), computed here when it did not
        owner, key = entry
        carried = _derived_from(self._fns[-1], params) if self._fns else params
        return owner in carried and any(
            _entry_of(target) == entry and _entry_of(value) != entry for target, value in _entry_assigns(stmt.body))

    def _ifexp(self, small, value: cst.IfExp, paths: list[Path], dd: set[str], method: str) -> list[Path]:
        rest = small.with_changes(value=cst.Name("None"))
        paths = self._expr(rest, paths, dd, method, record=False)
        paths = self._expr(value.test, paths, dd, method)
        is_dd = self._is_dd(value.test, dd) and self._test_value(value.test, dd) == DATA
        cid, neg = self._decide(value.test, method, is_dd, dd)
        if is_dd:
            self._key_evidence(self.conditions[cid], value.test)
        yes = self._expr(value.body, [p.take(cid, not neg, is_dd) for p in paths], dd, method)
        no = self._expr(value.orelse, [p.take(cid, neg, is_dd) for p in paths], dd, method)
        return self._check(yes + no)


def _derived(fn: cst.FunctionDef, dd: set[str]) -> set[str]:
    """Locals assigned from data-dependent values (flow-insensitive fixpoint); a tensor's placement read from one
    (`on_gpu = x.is_cuda`) is not its data."""
    pairs: list[tuple[set[str], set[str]]] = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            targets: set[str] = set()
            for t in node.targets:
                targets |= _target_names(t.target)
            pairs.append((targets, _data_names(node.value)))

        def visit_For(self, node: cst.For) -> None:
            pairs.append((_target_names(node.target), _names(node.iter)))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Assigns())
    return names_reached(pairs, set(dd)) - set(dd)


def derived_names(fn: cst.FunctionDef, seeds: set[str]) -> set[str]:
    """The locals of `fn` computed from `seeds` (flow-insensitive): assigned or looped over from them, and also
    filled with them in place -- `xs.append(v)`, `conv.append_message(role, v)` (any method of a local given
    them), `xs[k] = v`, `xs += v` (a list of prompts built from the sources one by one)."""
    pairs: list[tuple[set[str], set[str]]] = []

    class Fills(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            targets: set[str] = set()
            for t in node.targets:
                targets |= _target_names(t.target) | _root_name(t.target)
            pairs.append((targets, _names(node.value)))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            pairs.append((_target_names(node.target) | _root_name(node.target), _names(node.value)))

        def visit_For(self, node: cst.For) -> None:
            pairs.append((_target_names(node.target), _names(node.iter)))

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value != "self":
                # a method of a local fed with the values (`xs.append(v)`, `conv.append_message(role, text)`): the
                # object may hold them afterwards
                sources: set[str] = set()
                for a in node.args:
                    sources |= _names(a.value)
                pairs.append(({func.value.value}, sources))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Fills())
    return names_reached(pairs, set(seeds)) - set(seeds)


def _root_name(target: cst.BaseExpression) -> set[str]:
    """`xs` of `xs[k]` / `xs.attr` as an assignment target (the container filled in place)."""
    while isinstance(target, (cst.Subscript, cst.Attribute)):
        target = target.value
    return {target.value} if isinstance(target, cst.Name) and target.value != "self" else set()


def _is_no_grad(expr: cst.BaseExpression) -> bool:
    """`torch.no_grad()` / `torch.inference_mode()` (as a decorator, with or without the call, or a `with`
    item): torch records no gradient for the parameters used under it."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    name = dotted_name(expr) or ""
    return name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode") and (name.startswith("torch.") or "." not in name)


def option_params(fn: cst.FunctionDef) -> set[str]:
    """Parameters that are options of the call, not batch data: annotated `bool`/`int`/`float`/`str`
    (`Optional[...]` of one included) or defaulting to such a literal (`return_dict=True`, `mode="train"`).
    A batch tensor or field is neither (`images=None`, `aux_label: Optional[torch.Tensor] = None`)."""
    out: set[str] = set()
    ps = fn.params
    for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params):
        if (p.annotation is not None and _option_annotation(p.annotation.annotation)) or _option_literal(p.default):
            out.add(p.name.value)
    return out


def _option_annotation(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in OPTION_TYPES
    if isinstance(node, cst.SimpleString):      # a string annotation: "bool"
        return node.evaluated_value.strip() in OPTION_TYPES
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):   # bool | None
        parts = [node.left, node.right]
        return all(_option_annotation(x) or (isinstance(x, cst.Name) and x.value == "None") for x in parts) and \
            any(_option_annotation(x) for x in parts)
    if isinstance(node, cst.Subscript) and (dotted_name(node.value) or "").rsplit(".", 1)[-1] in ("Optional", "Union"):
        parts = [el.slice.value for el in node.slice if isinstance(el.slice, cst.Index)]
        kinds = [_option_annotation(x) or (isinstance(x, cst.Name) and x.value == "None") for x in parts]
        return bool(parts) and all(kinds) and any(_option_annotation(x) for x in parts)
    return False


def _option_literal(node: Optional[cst.BaseExpression]) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("True", "False")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString))


def _iterated_name(head: cst.BaseExpression) -> Optional[str]:
    """`x` of `for item in x` / `for i, item in enumerate(x)`."""
    if isinstance(head, cst.Call) and isinstance(head.func, cst.Name) and head.func.value == "enumerate" and \
            head.args:
        head = head.args[0].value
    return head.value if isinstance(head, cst.Name) else None


def _presence_tests(test: cst.BaseExpression) -> tuple[set[str], set[str]]:
    """Names whose presence the test establishes: (present when the test holds -- `v is not None` alone or in
    an `and`, present when it fails -- `v is None` alone or in an `or`)."""
    def comparisons(node, op):
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, op):
            return comparisons(node.left, op) + comparisons(node.right, op)
        return [node]

    def presence(node, operator) -> Optional[str]:
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and isinstance(node.left, cst.Name):
            comp = node.comparisons[0]
            if isinstance(comp.operator, operator) and isinstance(comp.comparator, cst.Name) and \
                    comp.comparator.value == "None":
                return node.left.value
        return None

    def bare(node, negated: bool) -> Optional[str]:     # `cache` (truthy: present), `not cache`
        if negated and isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            node = node.expression
        elif negated:
            return None
        return node.value if isinstance(node, cst.Name) else None

    when_true = {n for c in comparisons(test, cst.And) if (n := presence(c, cst.IsNot) or bare(c, False))}
    when_false = {n for c in comparisons(test, cst.Or) if (n := presence(c, cst.Is) or bare(c, True))}
    return when_true, when_false


def _chain_arms(stmt: cst.If) -> list[tuple[Optional[cst.BaseExpression], cst.BaseSuite]]:
    """(test, body) of each arm of an `if`/`elif` chain, the final `else` with test None."""
    arms: list = []
    node = stmt
    while isinstance(node, cst.If):
        arms.append((node.test, node.body))
        node = node.orelse
    if isinstance(node, cst.Else):
        arms.append((None, node.body))
    return arms


def _required_otherwise(stmt: cst.If) -> set[str]:
    """The inputs a chain requires when its first test fails: `elif cache is None: raise ...` (an arm that tests a
    name's absence and only raises; `or` of several absences requires each of them)."""
    out: set[str] = set()
    for test, body in _chain_arms(stmt)[1:]:
        if test is None or not _only_raises(body):
            continue
        out |= _presence_tests(test)[1]     # present past the arm: `cache is None`, `a is None or b is None`
    return out


def _only_raises(block: cst.BaseSuite) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else []
    return len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and \
        all(isinstance(small, cst.Raise) for small in body[0].body)


def _absence_test(test: Optional[cst.BaseExpression], negated: bool) -> bool:
    """Is `test` one presence comparison of a name (`v is not None`, `v`) -- or, `negated`, one absence
    comparison (`v is None`, `not v`)?"""
    if test is None:
        return False
    present, absent = _presence_tests(test)
    single = isinstance(test, (cst.Comparison, cst.Name, cst.UnaryOperation))
    return single and (bool(absent) if negated else bool(present))


def _entry_of(node: cst.BaseExpression) -> Optional[tuple[str, str]]:
    """(dict name, key code) of `d.get(K)` / `d.get(K, None)` / `d[K]` with a constant key; None otherwise."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and \
            isinstance(node.func.value, cst.Name) and 1 <= len(node.args) <= 2 and \
            isinstance(node.args[0].value, cst.SimpleString):
        return node.func.value.value, node.args[0].value.value
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and len(node.slice) == 1 and \
            isinstance(node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.SimpleString):
        return node.value.value, node.slice[0].slice.value.value
    return None


def _entry_assigns(block: cst.BaseSuite) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, value) of the block's own top-level assignments to subscripts (`d["k"] = v`, `d["k"]: T = v`)."""
    out = []
    for line in block.body if isinstance(block, cst.IndentedBlock) else []:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign):
                out.extend((t.target, small.value) for t in small.targets)
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                out.append((small.target, small.value))
    return out


def _evaluated(code: str) -> Optional[str]:
    try:
        value = cst.parse_expression(code)
    except Exception:
        return None
    return value.evaluated_value if isinstance(value, cst.SimpleString) else None


def _assignments(fn: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    """(name, value) of every plain `name = value` in the function (nested functions excluded)."""
    out: list = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    out.append((t.target.value, node.value))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Assigns())
    return out


def _ends_in_return(block: cst.BaseSuite) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else []
    if not body or not isinstance(body[-1], cst.SimpleStatementLine):
        return False
    return any(isinstance(small, cst.Return) for small in body[-1].body)


def _self_calls(calls: list) -> set[str]:
    """Names of the `self.<name>(...)` calls among `calls`."""
    return {c.func.attr.value for c in calls if isinstance(c.func, cst.Attribute) and
            isinstance(c.func.value, cst.Name) and c.func.value.value == "self"}


def _assigned(block: cst.BaseSuite) -> list[tuple[str, cst.BaseExpression]]:
    """(target name, value) of the block's own top-level assignments."""
    out = []
    for line in block.body if isinstance(block, cst.IndentedBlock) else []:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign):
                out.extend((t, small.value) for target in small.targets for t in _target_names(target.target))
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                out.extend((t, small.value) for t in _target_names(small.target))
    return out


class _FreeNames(cst.CSTVisitor):
    """Variables an expression reads: not the attribute names of `x.attr`, nor the keywords of `f(k=v)`."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        cst_visit(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        cst_visit(node.value, self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        # a lambda's parameters are its own variables, not the enclosing function's (`map(lambda x: x > 0,
        # (self.a, self.b))` reads `self.a`/`self.b`, not the forward's input `x`); its defaults are read here
        params = node.params
        for p in (*params.posonly_params, *params.params, *params.kwonly_params):
            if p.default is not None:
                cst_visit(p.default, self)
        bound = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        bound |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
        self._scoped(node.body, bound)
        return False

    def _comprehension(self, node, parts) -> bool:
        # a comprehension's loop variables are its own (`[w(t) for t in xs]` reads `xs`, `w`, not an outer `t`)
        bound: set[str] = set()
        clause = node.for_in
        while clause is not None:
            inner = type(self)()
            cst_visit(clause.iter, inner)
            self.names |= inner.names - bound
            bound |= _target_names(clause.target)
            for cond in clause.ifs:
                self._scoped(cond.test, bound)
            clause = clause.inner_for_in
        for part in parts:
            self._scoped(part, bound)
        return False

    def _scoped(self, node: cst.CSTNode, bound: set[str]) -> None:
        inner = type(self)()
        cst_visit(node, inner)
        self.names |= inner.names - bound

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return self._comprehension(node, [node.elt])

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return self._comprehension(node, [node.elt])

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return self._comprehension(node, [node.elt])

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return self._comprehension(node, [node.key, node.value])


def _free_names(node: cst.CSTNode) -> set[str]:
    scan = _FreeNames()
    cst_visit(node, scan)
    return scan.names


class _DataNames(_FreeNames):
    """Variables whose data an expression reads: not those it reads only for a tensor's placement (`x.is_cuda`,
    `x.dtype`, `x.device.type`: `library_types.tensor_placement`), the same for every batch a process draws."""

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        from dslint.program.rank.library_types import tensor_placement
        if tensor_placement(node):
            return False
        return super().visit_Attribute(node)

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        from dslint.program.rank.library_types import tensor_placement
        return False if tensor_placement(node) else None


def _data_names(node: cst.CSTNode) -> set[str]:
    scan = _DataNames()
    cst_visit(node, scan)
    return scan.names


def _derived_from(node: cst.CSTNode, seeds: set[str]) -> set[str]:
    pairs: list[tuple[set[str], set[str]]] = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            targets: set[str] = set()
            for t in n.targets:
                targets |= _target_names(t.target)
            pairs.append((targets, _names(n.value)))

    cst_visit(node, Assigns())
    return names_reached(pairs, set(seeds))


def _names(node: cst.CSTNode) -> set[str]:
    return _free_names(node)


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


MAX_PAIRS = 4096


def divergent(paths: list[Path], attr: str) -> Optional[tuple[Path, Path]]:
    """A (using, not-using) pair of executions that agree on every uniform decision: of those, the pair whose
    data decisions differ least and agree most -- the branch that selects the use, not an earlier test that
    leaves the function on another path (`if "past_key_values" in kwargs: return super().forward(...)` before
    `if images is not None: ... self.decoder(...)`: the pair that both skip the early return differs on the
    image test alone; right-module-wrong-branch)."""
    normal = [p for p in paths if not p.raised]
    using = [p for p in normal if attr in p.uses]
    missing = [p for p in normal if attr not in p.uses]
    best, best_key, tried = None, None, 0
    for u in using:
        uni_u = {(c, t) for c, t, d in u.decisions if not d}
        data_u = {(c, t) for c, t, d in u.decisions if d}
        for m in missing:
            if any((c, not t) in uni_u for c, t, d in m.decisions if not d):
                continue
            data_m = {(c, t) for c, t, d in m.decisions if d}
            # the data tests the two executions do not take alike: decided the other way, or by one of them only
            # (the other left the function before reaching it)
            differ = len({c for c, _ in data_u ^ data_m})
            key = (differ, -len(data_u & data_m))
            if best_key is None or key < best_key:
                best, best_key = (u, m), key
            tried += 1
            if tried >= MAX_PAIRS or differ <= 1:
                return best
    return best


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


MAX_CALLER_DEPTH = 3


def uniform_inputs(facts, cls, depth: int = 0, project=None) -> frozenset:
    """Forward parameters of `cls` that every caller in the run passes uniformly: the run's classes that
    create `cls` as an attribute (`self.embeddings = Embeddings(cfg)`) and call it (`self.embeddings(ids,
    mode="text")`) leave the parameter out, or pass a value that reads none of their method's inputs, or
    pass an input of their own `forward` that their callers pass uniformly in turn. Empty when a caller is
    not found (a model the scripts call, a layer kept in a `ModuleList`) or one passes `*args`/`**kwargs`.
    Matching calls to parameters is the call's own binding (keywords, positions), not names guessed."""
    found = cls.find_method("forward")
    if found is None or depth > MAX_CALLER_DEPTH:
        return frozenset()
    fn = found[1].node
    names = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][1:]
    kwonly = [p.name.value for p in fn.params.kwonly_params]
    if isinstance(fn.params.star_arg, cst.Param) or isinstance(fn.params.star_kwarg, cst.Param):
        return frozenset()
    instances = {c.name for c in [cls, *facts.subclasses(cls)]}
    containers = facts.containers(cls)
    if not containers:
        return frozenset()
    uniform = set(names) | set(kwonly)
    for container in containers:
        holders = {a.name for c in container.mro() for a in c.attrs.values() if a.ctor in instances}
        if not holders and project is not None and creates_another(project, container, cls, facts):
            continue                # it builds another class of the same name (another package's TransformerEncoder)
        if not holders:
            return frozenset()      # created some other way (a ModuleList, a local): its calls are not found
        calls = []
        for owner, mname in [(c, m) for c in container.mro() for m in sorted(c.methods)]:
            method = owner.info.methods[mname].node
            finder = _HolderCalls(holders)
            cst_visit(method, finder)
            if finder.other_use:
                return frozenset()  # the sub-module is handed on or called through a variable
            calls.extend((method, mname, call) for call in finder.calls)
        if not calls:
            return frozenset()
        for method, mname, call in calls:
            params = {p.name.value for p in (*method.params.posonly_params, *method.params.params,
                                             *method.params.kwonly_params)} - {"self"}
            if isinstance(method.params.star_arg, cst.Param):
                params.add(method.params.star_arg.name.value)
            if isinstance(method.params.star_kwarg, cst.Param):
                params.add(method.params.star_kwarg.name.value)
            inputs = params | _derived(method, params)
            if any(a.star for a in call.args):
                return frozenset()
            bound: dict[str, cst.BaseExpression] = {}
            positional = [a for a in call.args if a.keyword is None]
            for name, arg in zip(names, positional):
                bound[name] = arg.value
            for arg in call.args:
                if arg.keyword is not None:
                    bound[arg.keyword.value] = arg.value
            outer: Optional[frozenset] = None
            for name, value in bound.items():
                if name not in uniform:
                    continue
                read = _free_names(value) & inputs
                if not read:
                    continue
                if mname != "forward" or not read <= params:
                    uniform.discard(name)
                    continue
                if outer is None:
                    outer = uniform_inputs(facts, container, depth + 1, project)
                if not read <= outer:
                    uniform.discard(name)
    return frozenset(uniform)


def creates_another(project, container, cls, facts) -> bool:
    """Do all of `container`'s constructions of a class named like `cls` (or a subclass) resolve, through its
    file's imports, to classes other than those? `containers` matches creators by short name."""
    outline = container.src.outline
    if outline is None:
        return False
    ours = {(id(c.src), c.qualname) for c in [cls, *facts.subclasses(cls)]}
    names = {c.name for c in [cls, *facts.subclasses(cls)]}
    seen = False
    for callee, scope in outline.calls:
        if not callee or callee.rsplit(".", 1)[-1] not in names or not (scope or "").startswith(container.qualname + "."):
            continue
        found = project.class_for_callee(container.src, callee)
        if found is None or (id(found[0]), found[1]) in ours:
            return False
        seen = True
    return seen


class _HolderCalls(cst.CSTVisitor):
    """Calls `self.<holder>(...)` in a method, and whether a holder is used any other way (handed on, called
    through a variable or by a method that may run its forward; not a torch `Module` method that never does,
    `library_types.MODULE_METHODS_WITHOUT_FORWARD`)."""

    def __init__(self, holders: set[str]) -> None:
        self.holders = holders
        self.calls: list[cst.Call] = []
        self.other_use = False
        self._called: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and func.attr.value in self.holders:
            self.calls.append(node)
            self._called.add(id(func))
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) and \
                isinstance(func.value.value, cst.Name) and func.value.value.value == "self" and \
                func.value.attr.value in self.holders:
            # `self.head.apply(init)`, `self.head.train(False)`: a method of torch's Module that never runs forward
            # is no use of its inputs (any other method -- `forward`, a subclass's own -- may call it)
            from dslint.program.rank.library_types import MODULE_METHODS_WITHOUT_FORWARD
            if func.attr.value in MODULE_METHODS_WITHOUT_FORWARD:
                self._called.add(id(func.value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self._called or not (isinstance(node.value, cst.Name) and node.value.value == "self"):
            return
        if node.attr.value in self.holders:
            self.other_use = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False        # `self.embeddings = Embeddings(cfg)`: the creation, not a use


def configured_key(cls: ModuleClass, key: str) -> bool:
    """Does an `__init__` of `cls`'s classes build something under a test of `key`'s membership in its
    configuration (`if "depth" in cfg.input_sensors:`, `if "depth" not in self.sensors:`)? Its constructor's
    values are the run's settings: the model declares the field one of its configured inputs."""
    for c in cls.mro():
        if "__init__" not in c.methods:
            continue
        finder = _KeyMembershipTests(key)
        cst_visit(c.info.methods["__init__"].node, finder)
        if finder.found:
            return True
    return False


class _KeyMembershipTests(cst.CSTVisitor):
    def __init__(self, key: str) -> None:
        self.key = key
        self.found = False

    def visit_If(self, node: cst.If) -> None:
        class Membership(cst.CSTVisitor):
            def __init__(inner) -> None:
                inner.hit = False

            def visit_Comparison(inner, c: cst.Comparison) -> None:
                if len(c.comparisons) == 1 and isinstance(c.comparisons[0].operator, (cst.In, cst.NotIn)) and \
                        isinstance(c.left, cst.SimpleString) and c.left.evaluated_value == self.key:
                    inner.hit = True

        m = Membership()
        cst_visit(node.test, m)
        self.found = self.found or (m.hit and _builds_below(node.body))


def _builds_below(block: cst.BaseSuite) -> bool:
    """Does the block assign an attribute anywhere (`self.proj = ...` under a nested `if`)?"""
    class Builds(cst.CSTVisitor):
        def __init__(self) -> None:
            self.hit = False

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Attribute):
                self.hit = True

    b = Builds()
    cst_visit(block, b)
    return b.hit


def caller_keys(facts, cls, project=None) -> dict:
    """Forward parameters of `cls` to which every caller in the run (the run's classes that create `cls` as an
    attribute and call it, as `uniform_inputs` finds them, and those that build the attribute from a class their
    module's namespace holds under a configured name, `globals()[cfg.encoder_class](...)` where the file binds
    `cls`: `namespace_holders`) passes one batch field by its literal key: `sensors.get("depth")`,
    `sensors["depth"]`, or a local assigned once from one. {} when a caller is not found."""
    found = cls.find_method("forward")
    if found is None:
        return {}
    fn = found[1].node
    names = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][1:]
    instances = {c.name for c in [cls, *facts.subclasses(cls)]}
    containers = facts.containers(cls)
    by_namespace = namespace_holders(facts, cls, project) if project is not None else {}
    containers = [*containers, *(c for c in facts.classes if id(c) in by_namespace and c not in containers)]
    keys: dict[str, Optional[str]] = {}
    calls = 0
    for container in containers:
        holders = {a.name for c in container.mro() for a in c.attrs.values() if a.ctor in instances}
        holders |= by_namespace.get(id(container), set())
        for owner, mname in [(c, m) for c in container.mro() for m in sorted(c.methods)]:
            method = owner.info.methods[mname].node
            finder = _HolderCalls(holders)
            cst_visit(method, finder)
            for call in finder.calls:
                if any(a.star for a in call.args):
                    return {}
                calls += 1
                bound: dict[str, cst.BaseExpression] = {}
                for name, arg in zip(names, [a for a in call.args if a.keyword is None]):
                    bound[name] = arg.value
                for arg in call.args:
                    if arg.keyword is not None:
                        bound[arg.keyword.value] = arg.value
                for name in set(names) | set(bound):
                    key = _field_key(method, bound.get(name))
                    keys[name] = key if keys.get(name, key) == key else None
    if not calls:
        return {}
    return {name: key for name, key in keys.items() if key is not None}


def namespace_holders(facts, cls, project) -> dict[int, set[str]]:
    """id(class) -> its attributes built by a class looked up in its module's namespace (`self.encoder =
    globals()[cfg.encoder_class](cfg.encoder)`), for the run's classes whose file binds `cls` (or a subclass) by
    name -- defines it or imports it (`ProjectView.class_for_callee`): the configured name may select it, so the
    calls of that attribute are calls of `cls.forward`. `globals()` is the module's namespace by the language's
    meaning; the name looked up is a run setting. The file's text is a prefilter only."""
    family = [cls, *facts.subclasses(cls)]
    ours = {(id(c.src), c.qualname) for c in family}
    out: dict[int, set[str]] = {}
    for container in facts.classes:
        if container in family or "globals()" not in container.src.text[container.span[0]:container.span[1]]:
            continue
        outline = container.src.outline
        if outline is None or not any(
                (found := project.class_for_callee(container.src, outline.resolve(c.name))) is not None
                and (id(found[0]), found[1]) in ours for c in family):
            continue
        for mname in container.methods:
            finder = _NamespaceBuilt()
            cst_visit(container.info.methods[mname].node, finder)
            if finder.attrs:
                out.setdefault(id(container), set()).update(finder.attrs)
    return out


class _NamespaceBuilt(cst.CSTVisitor):
    """`self.X = globals()[...](...)` in a method: the attributes X."""

    def __init__(self) -> None:
        self.attrs: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._record(t.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record(node.target, node.value)

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Subscript)):
            return
        lookup = value.func.value
        if not (isinstance(lookup, cst.Call) and dotted_name(lookup.func) == "globals" and not lookup.args):
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            self.attrs.add(target.attr.value)


def _field_key(method: cst.FunctionDef, value: Optional[cst.BaseExpression]) -> Optional[str]:
    if isinstance(value, cst.Name):
        values = [v for t, v in _assignments(method) if t == value.value]
        value = values[0] if len(values) == 1 else None
    entry = _entry_of(value) if value is not None else None
    return _evaluated(entry[1]) if entry is not None else None


def inputs_set_by_callers(project: "ProjectView", facts, cls) -> frozenset:
    """The optional parameters of `cls.forward` (a default that is no option literal: `mode=None`,
    `enc_hidden_states=None`) whose value every call of the run sets alike on every rank
    (`keyword_presence.value_set_by_callers`)."""
    found = cls.find_method("forward")
    if found is None:
        return frozenset()
    from dslint.program.models.keyword_presence import family_of, value_set_by_callers
    fn = found[1].node
    positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][1:]
    options = option_params(fn)
    family = family_of(facts, cls)
    out = set()
    for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
        name = p.name.value
        if p.default is None or name in options or name in ("self", "cls"):
            continue
        if value_set_by_callers(project, name, positional.index(name) if name in positional else None, family):
            out.add(name)
    return frozenset(out)
