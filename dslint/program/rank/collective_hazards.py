"""Rank hazards: collective sites under rank-dependent control (DESIGN §2.1, rules DSL101–DSL104).

One walk per function/module body of a source (`HazardWalk`, a `FlowWalk`) records, for every collective site,
the rank-dependent tests, loops and early exits around it. The result is memoised per source on the project,
so the four rules share one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Optional, Sequence

import re

import libcst as cst

from dslint.program.collective_sites import CollectiveSites, Fact, Hop, Site, assignments
from dslint.program.rank.library_types import item_source
from dslint.program.rank.reaching_ranks import EXIT_CALLS, FlowWalk, Guard
from dslint.program.process_groups import interval_exclusion, interval_membership, uniform_over
from dslint.program.rank.stage_positions import FAMILY_ENDS, tests_group_ends
from dslint.program.rank.member_lists import constant_on_members, field_is_global_rank, field_member_list
from dslint.program.rank.raising_ranks import ExceptionTracking, RaisingOp
from dslint.program.rank.addressed_plans import drop_balanced_sides
from dslint.program.rank.group_sides import drop_paired_sides
from dslint.program.rank.collective_sequences import Records, SequenceAnalysis, apply as apply_sequences, tokens
from dslint.program.rank.function_summaries import Origin, ProjectTaint, code_of, mentions_rank
from dslint.program.facts import MODULE_SCOPE, dotted_name
from dslint.program.fixed_values import known_truth, parsed_setting, truth_of
from dslint.program.hyperparams import launch_option_value
from dslint.program import collective_switches as switches
from dslint.program.statement_walks import contains, iter_assigns, iter_calls, sole_binding
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

RANK_ONLY_DECORATORS = {"rank_zero_only", "master_only", "main_process_only", "on_main_process",
                        "on_local_main_process", "rank0_only", "only_rank0", "run_on_main", "rank_zero",
                        "on_process", "on_local_process", "main_process"}


@dataclass
class Hazard:
    code: str                          # DSL101 | DSL102 | DSL103 | DSL104 | DSL105
    at: cst.CSTNode                    # the call (101/104), the loop (102), the exit statement (103), the
                                       # raising operation (105; its guard: kind "filter", at the filter)
    site: Site
    guard: Optional[Guard]
    scope: str
    notes: list[str] = field(default_factory=list)
    inner: Optional[tuple] = None          # DSL105 through a helper: (source, RaisingOp) of its operation
    value_source: Optional["PythonSource"] = None   # DSL105: the source of the filter (guard.node)
    conds: tuple = ()                                # DSL101: every rank-varying test left around the call


class HazardWalk(Records, ExceptionTracking, FlowWalk):
    def __init__(self, analysis: "RankHazards", src: "PythonSource", scope: str, env, cls, guards=()) -> None:
        super().__init__(analysis.taint.taint(src), scope, env, cls, guards)
        self.analysis = analysis
        self.src = src
        self.sites = analysis.sites
        self.found: dict[tuple, Hazard] = {}
        self._exc_init()
        self.seq_init()
        # the `if` chains (by their first link) whose rank-varying test the presence rule took as balanced
        # around a collective: `sequences.apply` compares their branches' sequences after the walk
        self.seq_balanced_chains: dict[int, cst.If] = {}
        self._seq_heads: dict[int, cst.If] = {}
        self._seq_prev: Optional[cst.If] = None
        self._if_of_test: dict[int, cst.If] = {}

    def run_body(self, stmts) -> None:
        """The walk, then the sequence decisions on the body (dslint/program/rank/collective_sequences.py)."""
        self.run(stmts)
        apply_sequences(self, stmts, Hazard)
        drop_balanced_sides(self, stmts)
        drop_paired_sides(self, stmts)

    # --- DSL102: a count announced by broadcast ---------------------------------------------------------------
    def count_announced(self, node: cst.For) -> bool:
        """`count = tensor([len(items)]); broadcast(count, src=me, group=g)` earlier in the loop's block, then `for
        key in items:` whose every collective runs on `g` (the same group argument): the ranks of `g` that do not
        hold `items` receive the count and loop over it (`for _ in range(count.item())`), so the trip count is
        the one every member of `g` holds -- the same number on each (what the receivers do with it is the
        branch's sequence, compared in `collective_sequences`). The sender's own length is what it sent, so
        it is the source whatever `src=` says. False when `items` is re-bound between the broadcast and the
        loop or the loop reaches a collective on another group."""
        from dslint.program.process_groups import _statement_path
        base = _iterated(node.iter)
        info = self.src.facts.functions.get(self.scope)
        if base is None or info is None:
            return False
        path = _statement_path(info.node, node)
        if not path:
            return False
        block, index, _ = path[-1]
        if block[index] is not node:
            return False
        wanted = code_of(base, 10 ** 6)
        counts: set[str] = set()
        group: Optional[str] = None
        for stmt in block[:index]:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                        isinstance(small.targets[0].target, cst.Name):
                    name = small.targets[0].target.value
                    if _holds_len(small.value, wanted):
                        counts.add(name)
                    elif name == wanted:
                        counts.clear()
                        group = None            # the iterable bound again after its count was sent
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for call in iter_calls(stmt):
                first = call.args[0].value if call.args and call.args[0].keyword is None else None
                if first is None or not (isinstance(first, cst.Name) and first.value in counts
                                         or _holds_len(first, wanted)):
                    continue
                if self._broadcasts(call):
                    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "group"),
                               None)
                    group = code_of(arg, 10 ** 6) if arg is not None else ""
        if group is None:
            return False
        inside = [c for c in iter_calls(node.body) if self.sites.classify(self.src, c, self.cls) is not None]
        return bool(inside) and all(code_of(next((a.value for a in c.args if a.keyword is not None
                                                  and a.keyword.value == "group"), cst.Name("")), 10 ** 6) == group
                                    for c in inside)

    def _broadcasts(self, call: cst.Call) -> bool:
        """A broadcast: the explicit collective, or a checked helper every collective of which is one."""
        site = self.sites.classify(self.src, call, self.cls)
        if site is None:
            return False
        if site.kind == "explicit":
            return self.analysis.sequences.token(site)[0] == "broadcast"
        if site.kind == "function" and site.function is not None:
            tree = self.analysis.sequences.function_tree(*site.function, 0)
            toks = tokens(tree) if tree is not None else []
            return bool(toks) and all(t.op == "broadcast" for t in toks)
        return False

    # --- DSL105: a rank-dependent exception before a collective (dslint/program/rank/raising_ranks.py) ------
    def small(self, node: cst.BaseSmallStatement, guards: tuple[Guard, ...]) -> list[Guard]:
        if isinstance(node, cst.Assert):
            self.exc_checked(node.test)
        out = super().small(node, guards)
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self.exc_assign(target.target, node.value, guards)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.exc_assign(node.target, node.value, guards)
        elif isinstance(node, (cst.AugAssign, cst.Del)):
            self.exc_checked(node.target)
        return out

    def stmt(self, node: cst.CSTNode, guards: tuple[Guard, ...]) -> list[Guard]:
        if isinstance(node, cst.Try) and node.handlers:
            self._try_depth += 1        # a raise in the body is caught on that rank
            try:
                return super().stmt(node, guards)
            finally:
                self._try_depth -= 1
        return super().stmt(node, guards)

    def enter_if(self, node: cst.If) -> None:
        self._if_of_test[id(node.test)] = node
        prev = self._seq_prev
        self._seq_heads[id(node.test)] = self._seq_heads.get(id(prev.test), prev) \
            if prev is not None and prev.orelse is node else node
        if isinstance(node.orelse, cst.If):
            self._exc_pred[id(node.orelse)] = node      # its `elif` (entered after this link's body is walked)
        self._seq_prev = node
        self.exc_checked(node.test)
        both: set[str] = set()
        if self.none_init and isinstance(node.orelse, (cst.If, cst.Else)):
            both = self._chain_both(node)
        self._both_assigned.append(both)
        self.exc_enter()

    def leave_if(self, node: cst.If) -> None:
        self._both_assigned.pop()
        self.exc_leave()

    def branch_path(self) -> Optional[tuple]:
        return self._path_now()

    def path_implies(self, use: tuple, assigned: tuple) -> bool:
        from dslint.program.rank.raising_ranks import path_implies
        return path_implies(self, use, assigned)

    def _chain_both(self, node: cst.If) -> set[str]:
        """Names assigned both in the branch of `node` and in what runs otherwise (the later `elif`s and the
        `else` of its chain): computed once per chain, from its end, without recursion."""
        memo = self.__dict__.setdefault("_both_memo", {})
        if id(node) not in memo:
            from dslint.program.rank.raising_ranks import _assigned_names
            links = [node]
            while isinstance(links[-1].orelse, cst.If):
                links.append(links[-1].orelse)
            last = links[-1].orelse
            rest = _assigned_names(last.body.body) if isinstance(last, cst.Else) else set()
            for i in range(len(links) - 1, -1, -1):
                mine = _assigned_names(links[i].body.body)
                memo[id(links[i])] = mine & rest
                rest = rest | mine
        return memo[id(node)]

    def loop(self, node, guards: tuple[Guard, ...]) -> list[Guard]:
        if isinstance(node, cst.While):
            self.exc_checked(node.test)
        elif isinstance(node, cst.For):
            for name in list(self.maybe):
                if name in {n for n in (dotted_name(node.target),) if n}:
                    self._forget(name)
        self._loops.append(node)
        self.exc_enter()
        try:
            return super().loop(node, guards)
        finally:
            self._loops.pop()
            self.exc_leave()
            waiting = [op for op in self.raising if node in op.loops]
            if waiting:
                sites = self.sites.block_sites(self.src, node.body.body, self.cls)
                if sites:       # the next iteration reaches them: the other ranks wait there
                    best = next((s for s in sites if s.certain), sites[0])
                    for op in waiting:
                        self._report(op, best)

    def expr(self, e: cst.CSTNode, guards: tuple[Guard, ...]) -> None:
        if self.maybe or self.none_init or self.empty_init:
            if isinstance(e, cst.IfExp):
                self.exc_checked(e.test)
            elif isinstance(e, cst.BooleanOperation):
                self.exc_checked(e.left)
            self.exc_expr(e, guards)
        super().expr(e, guards)

    def _report(self, op: RaisingOp, site: Site) -> None:
        if op in self.raising:
            self.raising.remove(op)
        guard = Guard("filter", op.value.origin, op.value.node)
        hazard = Hazard("DSL105", op.node, site, guard, self.scope, [op.what, op.value.how])
        hazard.inner = op.inner
        hazard.value_source = op.value.source or self.src
        self._record(("DSL105", id(op.node)), hazard)

    def _record(self, key: tuple, hazard: Hazard) -> None:
        old = self.found.get(key)
        if old is None or (hazard.site.certain and not old.site.certain):
            self.found[key] = hazard

    def on_call(self, call: cst.Call, guards: tuple[Guard, ...]) -> None:
        if self.empty_init or self._grown_at:
            self.exc_growth(call, guards)
        helper = self.analysis.raising_helper(self.src, call, self.cls)
        if helper:
            self.exc_helper(call, helper)
        site = self.sites.classify(self.src, call, self.cls)
        if site is None or self._local_without_deepspeed(site):
            return
        for op in list(self.raising):
            self._report(op, site)
        if guards:
            guards = self._over_group(site, guards)
        for g in guards:
            if g.kind == "cond-balanced":
                head = self._seq_heads.get(id(g.node))
                if head is not None:
                    self.seq_balanced_chains[id(head)] = head
        conds = [g for g in guards if g.kind == "cond"]
        if conds and site.backends is not None:
            verdicts = {id(g): self._backend_verdict(site, g) for g in conds}
            # the test reported (the last) is one with the hazard on a shown backend where one has it (`if is_main:`
            # around `if args.use_deepspeed or is_main:`, whose launches may leave only unshown backends)
            conds = sorted((g for g in conds if verdicts[id(g)] != "local"), key=lambda g: verdicts[id(g)] == "kept")
            if conds and all(verdicts[id(g)] == "unshown" for g in conds):
                covered = self._uniform_backends(conds[-1].node) if self._in_branch_of(conds[-1].node) else frozenset()
                note = (f"collective only under the accelerate backends {_backend_names(site.backends)}; the test "
                        f"holds on every rank under {_backend_names(covered)}, and no launcher line or accelerate "
                        f"config shows the job on one of the others") if covered else (
                        f"collective only under the accelerate backends {_backend_names(site.backends)}, and no "
                        f"launcher line, accelerate config, DeepSpeed config or accelerate plugin of the program "
                        f"shows the job on one of them (elsewhere the call is local)")
                settled = sorted(self.__dict__.get("_settled_by", {}).get(id(conds[-1].node), ()))
                if settled:
                    note = (f"collective only under the accelerate backends {_backend_names(site.backends)}; the "
                            f"test takes one value on every rank of the jobs {', '.join(settled[:3])} start (the "
                            f"program's own options they pass), and the other launcher lines leave the backend to "
                            f"the machine's accelerate config, which the checked files do not show")
                site = replace(site, proven=False, evidence=[*site.evidence, Fact("backend", note, found=False)])
            elif conds and self.analysis.project.accelerate_backends(self.src) is None:
                shown = [Fact("backend", f"{note}: the {backend} backend", at, where)
                         for backend, note, at, where in self._configured(site) if backend in site.backends]
                if shown:
                    site = replace(site, evidence=[*site.evidence, *shown[:1]])
        if len(conds) == 1 and site.kind == "function" and self._all_run_where_reached(call, conds[0]):
            conds = []
        if conds:
            self._record(("DSL101", id(call)), Hazard("DSL101", call, site, conds[-1], self.scope,
                                                      conds=tuple(conds)))
        for g in guards:
            if g.kind == "exit":
                if g.exit_kind == "continue" and self._comes_back(g, call):
                    continue
                self._record(("DSL103", id(g.node)), Hazard("DSL103", g.node, site, g, self.scope))
            elif g.kind == "loop":
                self._record(("DSL102", id(g.node)), Hazard("DSL102", g.node, site, g, self.scope))
        if site.kind == "generate" and not conds:
            self._generate(call, site, guards)

    def _all_run_where_reached(self, call: cst.Call, g: Guard) -> bool:
        """`if load_on_all_ranks or rank == 0: load(path, load_on_all_ranks=load_on_all_ranks)` where `load`
        reaches its collective only under `if load_on_all_ranks:`: what the ranks that skip the call share (the
        operands of the failed test that take one value on every rank: `load_on_all_ranks` false), handed to the
        callee, leaves it no collective -- so wherever the collective is reached, those operands make the test
        hold on every rank, and every rank makes the call (issue 30, item 4)."""
        node = self._if_of_test.get(id(g.node))
        if node is None or g.condition or not isinstance(node.body, cst.IndentedBlock) or \
                not contains(node.body, call):
            return False
        facts = switches.uniform_facts(node.test, False, lambda leaf: self.eval_test(leaf) is None)
        return bool(facts) and not self.sites.reached_beyond(self.src, call, self.cls, facts, node.body)

    def on_loop_exit(self, node: cst.CSTNode, exits: list[Guard]) -> None:
        """`for …: all_reduce(x); if rank == 0: break`: the ranks that leave skip the next pass's collectives,
        where the others wait (those after the exit in the same pass are reported by `on_call`)."""
        sites = []
        for call in _loop_statements(node):
            if isinstance(call, cst.Call):
                site = self.sites.classify(self.src, call, self.cls)
                if site is not None:
                    sites.append(site)
        for g in exits:
            for site in sites:
                if not uniform_over(g.origin, self.sites.group_of(site), g.test):
                    self._record(("DSL103", id(g.node)), Hazard("DSL103", g.node, site, g, self.scope))
                    break

    def _comes_back(self, g: Guard, call: cst.Call) -> bool:
        """A `continue` in a `while True:` loop with no collective before it in the loop and no way out of the
        loop before the first collective after it: the others wait in that first collective, and the rank that
        continues comes back to it on its next pass; from there on they run the same collectives in the same
        order (Megatron's interactive generation: `continue` on an over-long prompt, `all_reduce` of the
        request, `return` on the agreed stop)."""
        memo = self.__dict__.setdefault("_comes_back_memo", {})
        key = id(g.node)
        if key not in memo:
            memo[key] = self._retry_pass(g)
        return memo[key]

    def _retry_pass(self, g: Guard) -> bool:
        loop = g.loop
        if not isinstance(loop, cst.While) or literal_value(loop.test) not in (True, 1):
            return False
        at = self.src.span(g.node).line
        sites: list[int] = []
        exits: list[int] = []
        for node in _loop_statements(loop):
            line = self.src.span(node).line
            if isinstance(node, cst.Call):
                if self.src.facts.resolve_expr(node.func) in EXIT_CALLS:
                    exits.append(line)
                elif self.sites.classify(self.src, node, self.cls) is not None:
                    sites.append(line)
            else:
                exits.append(line)
        if any(line < at for line in sites):
            return False
        first = min((line for line in sites if line > at), default=None)
        return first is not None and not any(line < first for line in exits)

    def _local_without_deepspeed(self, site: Site) -> bool:
        """A call collective only where DeepSpeed partitions the parameters (a `GatheredParameters` gather, a
        forward whose ZeRO stage no config tells: `site.forward` not shown "yes"; not an accelerate method whose
        backends `_backend_verdict` judges) in code that only programs running unsharded reach
        (`reach.runs_unsharded`: each launched on a plain accelerate backend, `accelerate launch --config_file
        ddp.yaml`, per launch unit): there it gathers nothing."""
        if site.forward is None or site.forward.status == "yes" or site.backends is not None:
            return False
        memo = self.__dict__.setdefault("_unsharded_memo", {})
        if self.scope not in memo:
            from dslint.program.reach import runs_unsharded
            memo[self.scope] = runs_unsharded(self.analysis.project, self.src, self.src.span(site.call).line)
        return memo[self.scope]

    def _backend_verdict(self, site: Site, g: Guard) -> str:
        """What an `if` test with a disjunct on the accelerate backend leaves of a call that is collective only
        under some backends (`Site.backends`: `accelerator.save_state` under DEEPSPEED/FSDP/MEGATRON_LM):
        `if accelerator.distributed_type == DistributedType.DEEPSPEED or accelerator.is_main_process:
        accelerator.save_state(...)`. The backend is one for the whole job (`AcceleratorState`), so where the
        backend disjunct holds every rank takes the branch; on the other backends the rank-varying disjunct
        decides, and the call is collective there only under `site.backends` minus those. Where launcher lines
        run every program holding the file, each is judged alone (per launch unit): a line whose values settle
        the test alike on every rank (`_launch_decides`: `args.use_deepspeed or ...` with the program's own
        `--use_deepspeed` passed) has no hazard; a line showing its backend (`accelerate launch --config_file
        x.yaml` with its `distributed_type`, `--use_deepspeed`, `--multi_gpu`, ...) has one where that backend
        remains. "local": none remains, or no line has the hazard and every other line shows its backend;
        "unshown": some remain, the lines left do not show the backend and nothing else of the program (nor
        those lines) shows one of them (`_configured`: an accelerate plugin, a DeepSpeed config handed over, a ZeRO-3 config that makes the
        call gather): the job runs on the machine's accelerate config, which the checked files do not show, so
        the finding is unproven; "kept" otherwise (and for any other test, or a call not in the test's own
        branch)."""
        covered = self._uniform_backends(g.node) if self._in_branch_of(g.node) else frozenset()
        remaining = site.backends - covered
        if not remaining:
            return "local"
        launches = self.analysis.project.launch_backends(self.src)
        if launches is None:
            return "kept" if remaining & {backend for backend, *_ in self._configured(site)} else "unshown"
        untold = []
        for sh, launch, backend in launches:
            if self._launch_decides(g.node, sh, launch, backend):
                # this launch settles the test alike on every rank
                self.__dict__.setdefault("_settled_by", {}).setdefault(id(g.node), set()).add(
                    f"{sh.path}:{launch.line}")
                continue
            if backend is None:
                untold.append(launch)
            elif backend in remaining:
                return "kept"
        if not untold:
            return "local"
        return "kept" if remaining & {backend for backend, *_ in self._configured(site, untold)} else "unshown"

    def _launch_decides(self, test: cst.BaseExpression, sh, launch, backend: Optional[str]) -> bool:
        """Does the test take one value on every rank of the job one launcher line starts (per launch unit:
        `if args.use_deepspeed or accelerator.is_main_process:` where the line passes the program's own
        `--use_deepspeed`, or leaves an `and` operand at a false default)? Its operands are judged with that
        line's values (`_launch_truth`); what varies by rank stays open."""
        return self._launch_truth(test, sh, launch, backend) is not None

    def _launch_truth(self, e: cst.BaseExpression, sh, launch, backend: Optional[str]) -> Optional[bool]:
        """The truth of `e` on every rank of one launch, None where it is not fixed (`fixed_values.truth_of`):
        its operands that read the namespace argparse parsed (`fixed_values.parsed_setting`, by data flow: the
        line's value for its script, else the argparse default, `hyperparams.launch_option_value`) or compare
        `distributed_type` with accelerate's `DistributedType` members when the line tells the backend."""
        project, scope = self.analysis.project, self.src.facts.functions.get(self.scope)

        def leaf(x: cst.BaseExpression) -> Optional[bool]:
            if backend is not None and isinstance(x, cst.Comparison):
                members = self._uniform_backends(x)
                if members:
                    return backend in members
            setting = parsed_setting(project, self.src, scope, x, self.analysis.taint.calls_of)
            return None if setting is None else known_truth(launch_option_value(project, setting, sh, launch).value)
        return truth_of(e, leaf)

    def _configured(self, site: Site, launches: Optional[list] = None) -> list[tuple]:
        """(backend, note, at, file) for what the program shows of an accelerate backend besides its launcher
        lines (`ProjectView.configured_backends`; of the launcher lines only `launches`, where given), and
        DEEPSPEED where a DeepSpeed config with ZeRO-3 reaches the call's forward (`get_state_dict` gathers
        there)."""
        out = list(self.analysis.project.configured_backends(self.src, launches))
        if site.forward is not None and site.forward.status == "yes":
            out.append(("DEEPSPEED", f"a DeepSpeed config reaches this code ({site.forward.origin or 'ZeRO-3'})",
                        None, None))
        return out

    def _in_branch_of(self, test: cst.CSTNode) -> bool:
        """Is the walk in the body of the `if`/`elif` whose test this is (where it holds)?"""
        return any(link.test is test and holds for link, holds in zip(self._ifs, self._holds))

    def _uniform_backends(self, test: cst.CSTNode) -> frozenset:
        """The accelerate backends under which a disjunct of `test` holds whatever the rank:
        `x.distributed_type == DistributedType.DEEPSPEED` (or `in (…)`) with the member resolved to accelerate's
        `DistributedType` through the imports."""
        out: set = set()
        parts = [test]
        while parts:
            e = parts.pop()
            if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.Or):
                parts += [e.left, e.right]
            elif isinstance(e, cst.Comparison) and len(e.comparisons) == 1:
                op, right = e.comparisons[0].operator, e.comparisons[0].comparator
                sides = [(e.left, right), (right, e.left)] if isinstance(op, cst.Equal) else \
                    [(e.left, right)] if isinstance(op, cst.In) else []
                for attr, value in sides:
                    if not (isinstance(attr, cst.Attribute) and attr.attr.value == "distributed_type"):
                        continue
                    members = [el.value for el in value.elements] \
                        if isinstance(value, (cst.List, cst.Tuple, cst.Set)) and isinstance(op, cst.In) else [value]
                    for m in members:
                        member = self._backend_member(m)
                        if member is not None:
                            out.add(member)
        return frozenset(out)

    def _backend_member(self, e: cst.BaseExpression) -> Optional[str]:
        resolved = self.src.facts.resolve_expr(e) if isinstance(e, cst.Attribute) else None
        if not resolved or not resolved.startswith("accelerate."):
            return None
        owner, _, member = resolved.rpartition(".")
        return member if owner.rsplit(".", 1)[-1] == "DistributedType" else None

    def _over_group(self, site: Site, guards: tuple[Guard, ...]) -> tuple[Guard, ...]:
        """The guards that can differ between members of the site's process group: a test of the pipeline stage
        around a collective on the data-parallel group, or the group's own membership test, is taken alike by
        every member (dslint/program/process_groups.py)."""
        group = self.sites.group_of(site)
        kept = tuple(g for g in guards if not uniform_over(
            g.origin, group, g.node if g.kind == "cond" else g.test if g.kind == "exit" else None, self.negated))
        if group.family in FAMILY_ENDS:
            # `if pp_rank not in [0, pp_size - 1]: return` before a collective on the embedding group
            kept = tuple(g for g in kept if not tests_group_ends(
                self.taint, g.node if g.kind == "cond" else g.test if g.kind == "exit" else None, self.env, self.cls,
                self.scope, group))
        if group.ranks is not None and any(g.kind in ("cond", "exit") for g in kept):
            # `if dist.get_rank() < n: all_reduce(t, group=new_group(list(range(n))))`: the test is the membership
            # (an exit's test, `if dist.get_rank() >= n: return`, the non-members')
            info = self.src.facts.functions.get(self.scope)
            scope_node = info.node if info is not None else None
            uniform = lambda e: self.eval(e) is None    # noqa: E731
            kept = tuple(g for g in kept if not (
                g.kind == "cond" and interval_membership(self.src, scope_node, g.node, group.ranks, uniform) or
                g.kind == "exit" and g.test is not None and
                interval_exclusion(self.src, scope_node, g.test, group.ranks, uniform)))
        if any(g.kind == "cond" for g in kept):
            members = self._group_creators(site)
            if members is not None:
                kept = tuple(g for g in kept if not (g.kind == "cond" and self._selects(g.node, members)))
        if any(g.kind in ("cond", "exit") for g in kept):
            # `if self.rank not in self.members: return` before a collective on `self.group`, made while the
            # object was built as `new_group(ranks=self.members)` (dslint/program/rank/member_lists.py)
            listed = self._kept_member_list(site)
            if listed is not None:
                uniform = lambda e: self.eval(e) is None    # noqa: E731
                kept = tuple(g for g in kept if not (
                    (g.kind == "cond" or g.kind == "exit" and g.test is not None) and constant_on_members(
                        g.node if g.kind == "cond" else g.test, listed, self._global_rank, uniform)))
        return kept

    def _group_arg(self, site: Site) -> Optional[cst.BaseExpression]:
        """The expression, in this walk's scope, of the group a site's collective runs on: the group argument
        of an explicit collective, or the argument handed to the one group parameter of a checked function the
        call reaches (`all_ready(self._saver_group, ok)`); None otherwise."""
        from dslint.program.collective_sites import _argument_for
        from dslint.program.process_groups import group_argument
        if site.source is not self.src:
            return None
        if site.kind == "explicit":
            func = site.call.func
            op = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            return group_argument(site.call, op)
        if site.kind == "function" and site.function is not None:
            fixed, params = self.sites._function_groups(*site.function)
            if fixed is not None or len(params) != 1:
                return None
            found, arg = _argument_for(site.call, site.function[1], next(iter(params)))
            return arg if found else None
        return None

    def _kept_member_list(self, site: Site) -> Optional[str]:
        """The member list a site's group field `self.<attr>` was made of (`member_lists.field_member_list`):
        the field handed to the collective (or to the one group parameter of the function called), or the one
        field every collective of a method of the class called on `self` runs on (`self._get_max_size(t)`
        gathering on `self._backup_group`)."""
        if not self.cls or site.source is not self.src:
            return None
        arg = self._group_arg(site)
        if isinstance(arg, cst.Attribute) and isinstance(arg.value, cst.Name) and arg.value.value == "self":
            fields = {arg.attr.value}
        elif site.kind == "function" and site.function is not None and site.function[0] is self.src and \
                isinstance(site.call.func, cst.Attribute) and isinstance(site.call.func.value, cst.Name) and \
                site.call.func.value.value == "self" and site.function[1].class_name == self.cls:
            fields = self._method_group_fields(site.function[1], 0)
        else:
            return None
        if not fields or len(fields) != 1:
            return None
        return field_member_list(self.analysis.taint, self.src, self.cls, next(iter(fields)))

    def _method_group_fields(self, info, depth: int) -> Optional[set]:
        """The fields `self.<attr>` every collective a method of this walk's class reaches runs on: its explicit
        collectives' group arguments, and those of the methods of the class it calls on `self` (three calls deep);
        None when one runs on anything else or through another kind of call."""
        from dslint.program.process_groups import group_argument
        if depth > 3:
            return None
        out: set = set()
        for call in info.calls:
            site = self.sites.classify(self.src, call.node, info.class_name)
            if site is None:
                continue
            func = site.call.func
            if site.kind == "explicit":
                op = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
                arg = group_argument(site.call, op)
                if not (isinstance(arg, cst.Attribute) and isinstance(arg.value, cst.Name) and
                        arg.value.value == "self"):
                    return None
                out.add(arg.attr.value)
            elif site.kind == "function" and site.function is not None and site.function[0] is self.src and \
                    site.function[1].class_name == self.cls and isinstance(func, cst.Attribute) and \
                    isinstance(func.value, cst.Name) and func.value.value == "self":
                inner = self._method_group_fields(site.function[1], depth + 1)
                if inner is None:
                    return None
                out |= inner
            else:
                return None
        return out

    def _global_rank(self, e: cst.BaseExpression) -> bool:
        """Is `e` this process's global rank (what `new_group(ranks)` counts its members in), or the same value
        on every rank (a membership test of that is uniform too)? A field is read from its stores when its origin
        has lost the group its rank is in (`member_lists.field_is_global_rank`)."""
        origin = self.eval(e)
        if origin is None or origin.kind == "rank" and origin.axes is None and origin.group == "":
            return True
        return bool(self.cls and isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and
                    e.value.value == "self" and
                    field_is_global_rank(self.analysis.taint, self.src, self.cls, e.attr.value))

    def _group_creators(self, site: Site) -> Optional[set]:
        """The (representative) ranks that hold the group a collective runs on, when that group is a field some
        class's methods create only under rank tests (`if engines is not None and get_rank() == 0:
        self._update_group = init_process_group(..., rank=0)`: a group of rank 0 and processes outside this
        program, created by rank 0 alone) -- the field read here on `self`, or handed to the function holding the
        call as a parameter (`push_weights(model, self._update_group)`, one caller level; the collective itself
        may sit in a helper the call reaches, handed the group as its parameter). A store of None elsewhere is no
        member: a rank holding None has no such group (`_selects` then requires the rank test to rule it out).
        None otherwise (a store of anything else or outside such tests, an argument that is not such a field)."""
        from dslint.program.collective_sites import _argument_for
        arg = self._group_arg(site)
        if arg is None:
            return None
        if isinstance(arg, cst.Attribute) and isinstance(arg.value, cst.Name) and arg.value.value == "self":
            return self._field_group_creators(self.src, self.cls, arg.attr.value) if self.cls else None
        info = self.src.facts.functions.get(self.scope)
        if isinstance(arg, cst.Name) and info is not None and arg.value not in info.params:
            return _local_group_creators(self.src, info, arg.value)
        if not isinstance(arg, cst.Name) or info is None or arg.value not in info.params or \
                arg.value in ("self", "cls") or any(isinstance(t.target, cst.Name) and t.target.value == arg.value
                                                    for node in iter_assigns(info.node.body) for t in node.targets):
            return None
        members: Optional[set] = None
        for other, call, caller in self.analysis.taint.calls_of(self.src, info):
            found, handed = _argument_for(call, info, arg.value)
            if not (found and isinstance(handed, cst.Attribute) and isinstance(handed.value, cst.Name)
                    and handed.value.value == "self" and caller is not None and caller.class_name):
                return None
            held = self._field_group_creators(other, caller.class_name, handed.attr.value)
            if held is None:
                return None
            members = held if members is None else members | held
        return members

    def _field_group_creators(self, src: "PythonSource", cls: str, attr: str) -> Optional[set]:
        """`_group_creators` of the field `self.<attr>` of class `cls` of `src`: the ranks on which its methods
        store a call's result there (each store under rank tests), None stores left out. Memoised."""
        from dslint.program.rank.raising_ranks import ranks_taking
        memo = self.analysis.__dict__.setdefault("_group_creators", {})
        key = (id(src), cls, attr)
        if key not in memo:
            memo[key] = None
            stores = [(value, full, info) for info in src.facts.functions.values() if info.class_name == cls
                      for value, path in _attribute_stores(info.node.body, attr, ())
                      for full in ([path] if path else self._caller_paths(src, cls, info, 0))]
            made = [(value, path, info) for value, path, info in stores
                    if not (isinstance(value, cst.Name) and value.value == "None")]
            if made and all(path and _made_here(src, info, value) for value, path, info in made):
                members: set = set()
                for _, path, _info in made:
                    taking = ranks_taking(None, path)
                    if taking is None:
                        members = None
                        break
                    members |= taking
                memo[key] = members
        return memo[key]

    def _caller_paths(self, src: "PythonSource", cls: str, info, depth: int) -> list:
        """The rank-test paths under which a method of `cls` runs, read from its callers when its own body
        stores outside any test (`if engines is not None and get_rank() == 0: self._init_sync_group(...)`, the
        helper storing the group unconditionally): one path per call, each the caller's `if` tests around the
        `self.<method>(...)` statement (followed up to three callers deep while a caller's call is itself outside
        tests). `[()]` -- a store on every rank that runs it -- when a call is elsewhere (another class, a plain
        function, an `if` test or a nested function), the method is called nowhere or too often to follow, or
        the callers go deeper."""
        calls = self.analysis.taint.calls_of(src, info) if depth < 3 else []
        out: list = []
        for other, call, caller in calls:
            func = call.func
            if other is not src or caller is None or caller.class_name != cls or not (
                    isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and
                    func.value.value == "self"):
                return [()]
            paths = list(_statement_paths(caller.node.body, call, ()))
            if len(paths) != 1:
                return [()]
            if paths[0]:
                out.append(paths[0])
            else:
                deeper = self._caller_paths(src, cls, caller, depth + 1)
                if () in deeper:
                    return [()]
                out.extend(deeper)
        return out or [()]

    def _selects(self, test: cst.BaseExpression, members: set) -> bool:
        """Does the rank test hold on every member of the group and on no other rank?"""
        from dslint.program.rank.collective_sequences import decide, rank_formula, representatives
        consts = {r for r in members}
        formula = rank_formula(test, self, consts)
        if formula is None or not members:
            return False
        for r in representatives(consts):
            if decide(formula, r) is not (r in members):
                return False
        return True

    def _generate(self, call: cst.Call, site: Site, guards: tuple[Guard, ...]) -> None:
        synced = next((a for a in call.args if a.keyword is not None and a.keyword.value == "synced_gpus"), None)
        if synced is not None and literal_value(synced.value) is not False:
            return                      # True, or decided by the script at run time
        if synced is None and any(a.star == "**" and _kwargs_set_synced(self.src, a.value) for a in call.args):
            return
        fwd = site.forward or self.sites.forward(self.src)
        if synced is None and (fwd.zero3 or fwd.status == "unknown") and not fwd.moe and \
                self.analysis.hf_zero3_auto_sync:
            return                      # transformers turns synced_gpus on while an HfDeepSpeedConfig is alive
                                        # (under ZeRO-3; without it and MoE, the forward holds no collective)
        if synced is None and not fwd.moe and self.analysis.is_hf_trainer_class(self.src, self.cls):
            return                      # a method of an HF Trainer: the only collective a generate step can
                                        # hold without MoE is ZeRO-3's, and transformers syncs it there
        sample = next((a for a in call.args if a.keyword is not None and a.keyword.value == "do_sample"), None)
        drawn = False
        if sample is not None:          # `do_sample=flag` after `flag = False` is greedy; any other expression may hold
            value = sample.value
            if isinstance(value, cst.Name):
                value = sole_binding(self.src.facts.functions.get(self.scope), value.value) or value
            drawn = literal_value(value)
        sampled = drawn is True or drawn is UNKNOWN      # `do_sample=<expr>`: sampling whenever it holds
        tainted = next((self.eval(a.value) for a in call.args if self.eval(a.value) is not None), None)
        loops = {id(node.iter): node for node in self._loops if isinstance(node, cst.For)}
        per_rank_loop = any(it is None or not _same_items_everywhere(self.src, it) and not self._replicated_items(it)
                            and _reads_loop_values(call, loops.get(id(it)), self.src) for it in self.loop_iters)
        if not (sampled or tainted or per_rank_loop):
            return                      # greedy generation of the same prompts on every rank
        notes = []
        if sampled:
            notes.append("`do_sample=True` draws a different continuation on each rank" if drawn is True else
                         f"`do_sample={code_of(sample.value, 60)}` draws a different continuation on each rank "
                         f"whenever it holds")
        if tainted is not None:
            notes.append(f"its input is rank-dependent: {tainted.describe()}")
        if per_rank_loop and not notes:
            notes.append("each rank generates for its own inputs inside a loop")
        loop = next((g for g in guards if g.kind == "loop"), None)
        self._record(("DSL104", id(call)), Hazard("DSL104", call, site, loop, self.scope, notes))

    def _replicated_items(self, it: cst.BaseExpression) -> bool:
        """A loop over a data loader that yields the same batches on every rank (no sampler, no shuffling, a
        dataset the same everywhere: `RankTaint.replicated_loader`), through `enumerate`/`tqdm`/`iter`."""
        if self.eval(it) is not None:
            return False
        inner = item_source(self.taint.src, it)        # tqdm/iter/list/tuple: the same items (library_types)
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "enumerate" \
                and inner.args and inner.args[0].keyword is None:
            inner = item_source(self.taint.src, inner.args[0].value)     # the same items, numbered
        if isinstance(inner, cst.Call):
            return self.taint.replicated_loader(inner)
        name = dotted_name(inner)
        return name is not None and self.taint.replicated_loader_name(name)

    def reaches_sites(self, stmts: Sequence) -> bool:
        return bool(stmts) and bool(self.sites.block_sites(self.src, stmts, self.cls))

    def on_late_loop(self, node, guard: Guard, guards) -> None:
        sites = self.sites.block_sites(self.src, node.body.body, self.cls)
        if sites:
            best = next((s for s in sites if s.certain), sites[0])
            self._record(("DSL102", id(node)), Hazard("DSL102", node, best, guard, self.scope))


class RankHazards:
    """Per-run memo of hazards per source."""

    def __init__(self, project: "ProjectView") -> None:
        self.project = project
        self.taint = ProjectTaint.of(project)
        self.sites = CollectiveSites.of(project)
        self._by_source: dict[int, list[Hazard]] = {}

    @classmethod
    def of(cls, project: "ProjectView") -> "RankHazards":
        return project.memo(cls, lambda: cls(project))

    @property
    def sequences(self) -> SequenceAnalysis:
        return SequenceAnalysis.of(self.project)

    @cached_property
    def hf_zero3_auto_sync(self) -> bool:
        """An HfDeepSpeedConfig kept alive (bound to a name), or a Trainer/accelerate run: transformers
        (generation/utils.py, `is_deepspeed_zero3_enabled()`) then sets synced_gpus itself under ZeRO-3. A fact
        of the view (its roles and assignments), memoised: every generate site of every file asked it again."""
        roles = self.sites.roles
        if roles["accelerator"]:
            return True
        for src, _, callee, call, _first, target in self.sites._assignments:
            if callee and callee.endswith("HfDeepSpeedConfig") and self._config_kept(src, call, target):
                return True
            last = (callee or "").rsplit(".", 1)[-1]
            if last.endswith("Trainer") and self._hf_trainer(src, callee):
                return True
        return False

    def _config_kept(self, src: "PythonSource", call: cst.Call, target: cst.BaseExpression) -> bool:
        """Is the HfDeepSpeedConfig still alive when a generate runs? transformers keeps only a weak reference:
        a local name of a helper dies when the helper returns (DeepSpeed-Chat's `create_hf_model` binds `dschf`
        "in function scope to avoid global effects", then returns the model). Kept: a module global, an
        attribute or container store, a local that the function reads again (returns it, stores it, passes it
        on), a local of a function called at module level (an entry `main()` lives for the whole run), or of a
        function that itself calls `generate` or a function of the checked files after making it (calls
        before it run while it does not exist yet: ZeRO-Inference's `get_ds_model` reads the model's config
        through a helper first)."""
        if not isinstance(target, cst.Name):
            return True
        scope = next((c.scope for c in src.facts.calls if c.node is call), MODULE_SCOPE)
        info = src.facts.functions.get(scope)
        if scope == MODULE_SCOPE or info is None:
            return True
        if _reads_name(info.node.body, target.value):
            return True
        outline = src.outline
        if outline is None:
            return True
        if any(sc == MODULE_SCOPE and callee and callee.rsplit(".", 1)[-1] == info.name
               for callee, sc in outline.calls):
            return True
        made = False
        for site in src.facts.calls:
            if site.node is call:
                made = True
                continue
            if not made or site.scope != scope:
                continue
            if site.attr == "generate" or self.sites.taint.call_source(src, site.callee, info.class_name) is not None:
                return True
        return False

    def _hf_trainer(self, src: "PythonSource", callee: str) -> bool:
        """A `…Trainer(...)` that may be HF's: from transformers/trl, a class of the checked files deriving from
        a `…Trainer`, or one dslint cannot see. A checked class of its own (an RLHF `PPOTrainer`) is not."""
        if callee.startswith(("transformers.", "trl.")):
            return True
        from dslint.program.roles import class_source
        hit = class_source(self.project, src, callee)
        if hit is None:
            return True
        info = hit[0].outline.classes.get(hit[1])
        return info is None or any(b.rsplit(".", 1)[-1].endswith("Trainer") for b in info.bases if b)

    def raising_helper(self, src: "PythonSource", call: cst.Call, cls: Optional[str]) -> list:
        """The DSL105 operations of the checked function `call` runs that no collective of its own follows
        (they raise before whatever the caller does next): [(source, RaisingOp)]. Functions whose outline calls
        nothing of `HELPER_GATE` are not parsed; functions that cannot raise on a maybe-empty value
        (`_may_raise`) are not walked."""
        hit = self._helper(src, call, cls)
        if hit is None:
            return []
        other, info = hit
        key = (id(other), info.qualname)
        memo = self.__dict__.setdefault("_raising", {})
        if key in memo:
            return memo[key]
        memo[key] = []                  # recursion: in progress
        if not self._may_raise(other, info):
            return []
        env = {**self.taint.globals_for(other, info), **self.taint.param_taint(other, info)}
        walk = HazardWalk(self, other, info.qualname, env, info.class_name, _decorator_guards(other, info.node))
        walk.run(info.node.body.body)
        memo[key] = [(other, op) for op in walk.raising]
        return memo[key]

    def _may_raise(self, src: "PythonSource", info) -> bool:
        """Can a walk of this function find a DSL105 operation? Only if it reads a value that may be empty or
        None on some ranks where that raises (`rank_exceptions.may_raise_on_empty`), or calls a checked
        function that can (whose operations it passes on, through `raising_helper`'s own gates). Decided on
        the syntax alone, so most helpers are never walked."""
        from dslint.program.rank.raising_ranks import may_raise_on_empty
        memo = self.__dict__.setdefault("_may_raise_memo", {})
        key = (id(src), info.qualname)
        if key not in memo:
            memo[key] = False           # recursion: in progress
            memo[key] = may_raise_on_empty(info.node) or any(
                self._helper_may_raise(src, call.node, info.class_name) for call in info.calls)
        return memo[key]

    def _helper_may_raise(self, src: "PythonSource", call: cst.Call, cls: Optional[str]) -> bool:
        where = self._helper(src, call, cls)
        return where is not None and self._may_raise(*where)

    def _helper(self, src: "PythonSource", call: cst.Call, cls: Optional[str]):
        """The checked function `call` runs, as (source, FunctionInfo), when `raising_helper` would walk it:
        its outline calls something of `HELPER_GATE` and its file can hold rank-varying values."""
        where = self.taint.call_source(src, src.facts.resolve_expr(call.func), cls)
        if where is None or where[0].outline is None:
            return None
        memo = self.__dict__.setdefault("_helpers", {})
        key = (id(where[0]), where[1])
        if key not in memo:
            memo[key] = self._walkable(*where)
        return memo[key]

    def _walkable(self, other: "PythonSource", qual: str):
        from dslint.program.rank.raising_ranks import HELPER_GATE
        if not any(scope == qual and c and c.rsplit(".", 1)[-1] in HELPER_GATE for c, scope in other.outline.calls):
            return None
        if not mentions_rank(other.text) and not self._calls_rank_helpers(other):
            return None
        hit = self.taint.function_info((other, qual))
        if hit is None or not isinstance(hit[1].node.body, cst.IndentedBlock):
            return None
        return hit

    def is_hf_trainer_class(self, src: "PythonSource", cls: Optional[str]) -> bool:
        return self.taint.is_hf_trainer_class(src, cls)

    def for_source(self, src: "PythonSource") -> list[Hazard]:
        key = id(src)
        if key not in self._by_source:
            self._by_source[key] = self._analyse(src)
        return self._by_source[key]

    def _analyse(self, src: "PythonSource") -> list[Hazard]:
        if not self.sites.may_have_sites(src):
            return []                   # every hazard is a collective site of this file: decided unparsed
        if not mentions_rank(src.text) and not self._calls_rank_helpers(src) and not self.taint.launches_worker_in(src):
            return []
        found: dict[tuple, Hazard] = {}
        if self._has_sites(src, src.facts.calls_in(MODULE_SCOPE), None):
            walk = HazardWalk(self, src, MODULE_SCOPE, {}, None)
            walk.run_body(src.module.body)
            found.update(walk.found)
        module_env = self.taint.module_env(src)
        for qual, info in src.facts.functions.items():
            # every hazard is a collective site under some guard: a body whose calls (nested scopes' and
            # lambdas' included, a superset of what the walk visits) are no site has none
            if not self._has_sites(src, info.calls, info.class_name):
                continue
            guards = _decorator_guards(src, info.node)
            body = info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ()
            env = dict(module_env if not info.params else self.taint.globals_for(src, info))
            if self.sites.reaches(src, info) is not None:
                env.update(self.taint.param_taint(src, info))
            walk = HazardWalk(self, src, qual, env, info.class_name, guards)
            walk.run_body(body)
            found.update(walk.found)
        return _drop_returned_sites(list(found.values()))

    def _has_sites(self, src: "PythonSource", calls, cls: Optional[str]) -> bool:
        return any(self.sites.classify(src, c.node, cls) is not None for c in calls)

    def _calls_rank_helpers(self, src: "PythonSource") -> bool:
        """Does a call of `src` run a function of another checked file that returns a rank-varying value? The
        calls are read from the outline: only the files of helpers that may are parsed."""
        if src.outline is None:
            return False
        for callee, _scope in src.outline.calls:
            source = self.taint.call_source(src, callee, None)
            if source is None or source[0] is src or not self.taint.may_return_rank(*source):
                continue
            hit = self.taint.function_info(source)
            if hit is not None and self.taint.returns(*hit) is not None:
                return True
        return False


def _backend_names(backends) -> str:
    return "/".join(sorted(backends)) or "none"


def _reads_loop_values(call: cst.Call, loop: Optional[cst.For], src: "PythonSource") -> bool:
    """Do the call's arguments read what the loop hands each pass: its target, or a name its body binds
    (`for prompt in prompts: enc = tok(prompt); model.generate(**enc)`)? A generate on the function's own
    arguments in a warm-up loop (`for _ in range(warm_up): model.generate(*args, **kwargs)`) gets the same
    inputs every pass: the loop says nothing about what differs between ranks. Nor does a name the body binds
    to literal text run through an object of the program (`ids = tok(["hello"] * n)["input_ids"].cuda()`,
    `_literal_text_each_pass`): every pass, and every rank, encodes the same words. (Unknown loop: yes.)"""
    if loop is None:
        return True
    names = {n.value for n in _names(loop.target)}
    bindings: dict[str, list] = {}
    for node in iter_assigns(loop.body):
        for t in node.targets:
            for n in _names(t.target):
                bindings.setdefault(n.value, []).append(node.value if isinstance(t.target, cst.Name) else None)
    fixed = {name for name, values in bindings.items() if name not in names and all(
        v is not None and _literal_text_each_pass(v, src, bindings, names, set()) for v in values)}
    names.update(name for name in bindings if name not in fixed)
    read = [a.value for a in call.args] + ([call.func.value] if isinstance(call.func, cst.Attribute) else [])
    return any(_reads_any(expr, names) for expr in read)


def _literal_text_each_pass(expr: cst.BaseExpression, src: "PythonSource", bindings: dict, varying: set,
                            seen: set) -> bool:
    """Is `expr`, bound in a loop's body, the same value on every pass and every rank because it is literal text
    run through the program's own objects: its data root a string literal (or a list/tuple of them, repeated:
    `["hello"] * batch_size`), reached through subscripts, methods of the value (`.to(device)`, `.cuda()`) and
    calls of a name the file binds by assignment (a tokenizer object: `tok(text, ...)`), not by an import (a
    module's function may draw at random: `random.choice(["a", "b"])`); and reading no name the loop hands
    each pass (`varying`: its target) nor a body name bound otherwise. Numbers are no such root (a benchmark's
    `torch.randint(0, vocab, shape)` draws new ids)."""
    if isinstance(expr, cst.Name):
        if expr.value in varying or expr.value in seen:
            return False
        values = bindings.get(expr.value)
        if values is None:
            return False                    # bound outside the loop: not literal text by itself
        return all(v is not None and _literal_text_each_pass(v, src, bindings, varying, seen | {expr.value})
                   for v in values)
    if _reads_any(expr, varying | {n for n in bindings if n in seen}):
        return False
    if _is_text_literal(expr):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return any(_literal_text_each_pass(side, src, bindings, varying, seen) for side in (expr.left, expr.right))
    if isinstance(expr, cst.Subscript):
        return _literal_text_each_pass(expr.value, src, bindings, varying, seen)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and _literal_text_each_pass(expr.func.value, src, bindings, varying,
                                                                           seen):
            return True                     # a method of the literal-rooted value
        root = expr.func
        while isinstance(root, cst.Attribute):
            root = root.value
        first = next((a.value for a in expr.args if a.keyword is None and not a.star), None)
        return isinstance(root, cst.Name) and root.value not in src.facts.imports and first is not None and \
            _literal_text_each_pass(first, src, bindings, varying, seen)
    return False


def _is_text_literal(expr: cst.BaseExpression) -> bool:
    value = literal_value(expr)
    if isinstance(value, str):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) for v in value)


def _reads_any(expr: cst.CSTNode, names: set) -> bool:
    if not names:
        return False
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name) and n.value in names:
            return True
        stack.extend(n.children)
    return False


def _names(target: cst.CSTNode) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _names(el.value)]
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


def _kwargs_set_synced(src: "PythonSource", expr: cst.BaseExpression) -> bool:
    """`generate(**gen_kwargs)` where gen_kwargs gets a `synced_gpus` entry somewhere in the file."""
    name = dotted_name(expr)
    if name is None or "synced_gpus" not in src.text:
        return name is None and "synced_gpus" in src.text
    tail = re.escape(name.rsplit(".", 1)[-1])
    if re.search(rf"\b{tail}\b[^\n]*synced_gpus", src.text):
        return True
    for node in assignments(src.module):
        if any(dotted_name(t.target) == name for t in node.targets) and "synced_gpus" in code_of(node.value, 10_000):
            return True
    return False


def _same_items_everywhere(src: "PythonSource", it: cst.BaseExpression) -> bool:
    """A loop over literal items (`for p in ["a", "b"]`, `for p in PROMPTS` bound once to a literal list,
    `enumerate(...)` of one): every rank iterates the same values, so a greedy generate on them runs the same
    number of steps everywhere. Loaders, datasets and anything computed are taken as per-rank data."""
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("enumerate", "tuple", "list",
                                                                                       "sorted", "reversed") \
            and it.args:
        return _same_items_everywhere(src, it.args[0].value)
    if literal_value(it) is not UNKNOWN:
        return True
    if isinstance(it, cst.Name):
        bound = [node.value for node in assignments(src.module)
                 if any(isinstance(t.target, cst.Name) and t.target.value == it.value for t in node.targets)]
        return len(bound) == 1 and literal_value(bound[0]) is not UNKNOWN
    return False


def _decorator_guards(src: "PythonSource", node: cst.FunctionDef) -> tuple[Guard, ...]:
    for dec in node.decorators:
        expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        name = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else ""
        if name in RANK_ONLY_DECORATORS:
            return (Guard("cond", Origin("rank", dec.decorator, src), dec.decorator),)
    return ()


def _reads_name(body: cst.CSTNode, name: str) -> bool:
    """Is `name` read anywhere in `body` (not only bound: `x = None` on another branch is no read)?"""
    class _Reads(cst.CSTVisitor):
        found = False
        bound: set[int] = set()

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name):
                self.bound.add(id(node.target))

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name and id(node) not in self.bound:
                self.found = True

    reads = _Reads()
    reads.bound = set()
    body.visit(reads)
    return reads.found


def _loop_statements(loop: cst.CSTNode):
    """The calls and the statements that leave a loop, in its body: not those of nested functions and classes,
    nor the `break`s of nested loops (they leave only those)."""
    todo: list[tuple[cst.CSTNode, bool]] = [(stmt, False) for stmt in loop.body.children]
    while todo:
        node, nested = todo.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, (cst.Return, cst.Raise, cst.Call)) or isinstance(node, cst.Break) and not nested:
            yield node
        inner = nested or isinstance(node, (cst.For, cst.While))
        todo.extend((child, inner) for child in node.children)


def _drop_returned_sites(hazards: list[Hazard]) -> list[Hazard]:
    """`if rank_0: return helper()` where `helper()` reaches a collective: one hazard, reported once -- as the
    collective the other ranks skip (DSL101), not again as the exit (DSL103) written on the same line."""
    calls = {id(h.at): h for h in hazards if h.code == "DSL101" and h.guard is not None}
    drop = set()
    for h in hazards:
        if h.code != "DSL103" or h.guard is None or not isinstance(h.at, cst.Return):
            continue
        value = h.at.value
        hit = calls.get(id(value)) if isinstance(value, cst.Call) else None
        if hit is not None and hit.guard.node is h.guard.test:
            drop.add(id(h))
    return [h for h in hazards if id(h) not in drop]


def rank_hazards(project: "ProjectView", src: "PythonSource") -> list[Hazard]:
    return RankHazards.of(project).for_source(src)


__all__ = ["Hazard", "Hop", "rank_hazards", "UNKNOWN"]


def _made_here(src: "PythonSource", info, value: cst.BaseExpression) -> bool:
    """Is a value stored into a group field one that the storing rank makes or names for itself, not a group other
    ranks hold too: the result of a call that builds one (a helper, torch's `init_process_group(..., rank=0)`, a
    stateless group's constructor -- not a getter of the job's grid, `new_group`, a mapping's `.get`, which
    `resolve_group` names), or the name of a group given as a string (`self._group = group_name` after
    `group_name = "openrlhf"`, the key `ray.util.collective` groups are reached by: a string is no torch group
    object that other ranks could share through it)."""
    from dslint.program.process_groups import HANDED_IN, resolve_group
    if isinstance(value, cst.Call):
        return resolve_group(src, value, info.node, at=value) is HANDED_IN
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(value, cst.Name):
        bound = [node.value for node in iter_assigns(info.node) for t in node.targets
                 if isinstance(t.target, cst.Name) and t.target.value == value.value]
        return bool(bound) and value.value not in info.params and all(
            isinstance(b, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) for b in bound)
    return False


def _local_group_creators(src: "PythonSource", info, name: str) -> Optional[set]:
    """`_group_creators` of a local of the function holding the collective (`if get_rank() == 0: group =
    init_process_group(..., rank=0)`, then `if get_rank() == 0: broadcast(t, 0, group=group)`): the ranks on
    which its assignments -- each a group made here (`_made_here`) under rank tests, None left out -- run. None
    when the name is bound any other way (a loop or `with` target, a tuple, a `global`, a walrus)."""
    from dslint.program.rank.raising_ranks import ranks_taking
    for node in _walk_nodes(info.node.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names) or \
                isinstance(node, (cst.For, cst.CompFor)) and _contains_name(node.target, name) or \
                isinstance(node, cst.AsName) and _contains_name(node.name, name) or \
                isinstance(node, cst.NamedExpr) and _contains_name(node.target, name) or \
                isinstance(node, (cst.AugAssign,)) and _contains_name(node.target, name):
            return None
    bound = [t.target for node in iter_assigns(info.node.body) for t in node.targets if _contains_name(t.target, name)]
    stores = list(_attribute_stores(info.node.body, name, (), local=True))
    if len(stores) != len(bound) or any(not isinstance(t, cst.Name) for t in bound):
        return None
    made = [(value, path) for value, path in stores if not (isinstance(value, cst.Name) and value.value == "None")]
    if not made or not all(path and _made_here(src, info, value) for value, path in made):
        return None
    members: set = set()
    for _, path in made:
        taking = ranks_taking(None, path)
        if taking is None:
            return None
        members |= taking
    return members


def _walk_nodes(node):
    """Every node under `node` (a statement list or a node), not inside nested functions, classes or lambdas."""
    stack = list(node) if isinstance(node, (list, tuple)) else [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(n.children)


def _contains_name(node, name: str) -> bool:
    """Does a Name `name` occur in `node` (outside nested functions, classes, lambdas)?"""
    return any(isinstance(n, cst.Name) and n.value == name for n in _walk_nodes(node))


def _statement_paths(block, target: cst.CSTNode, path: tuple):
    """The `if` path (as `_attribute_stores`) of each simple statement of a body holding `target` (not in nested
    functions or classes, not in a compound statement's header)."""
    stmts = block.body if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine):
            if contains(stmt, target):
                yield path
        elif isinstance(stmt, cst.If):
            before: tuple = ()
            link = stmt
            while isinstance(link, cst.If):
                yield from _statement_paths(link.body, target, path + before + ((link.test, True),))
                before = before + ((link.test, False),)
                link = link.orelse
            if isinstance(link, cst.Else):
                yield from _statement_paths(link.body, target, path + before)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            for child in stmt.children:
                if isinstance(child, cst.BaseSuite):
                    yield from _statement_paths(child, target, path)
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally)):
                    yield from _statement_paths(child.body, target, path)


def _attribute_stores(block, attr: str, path: tuple, local: bool = False):
    """(value, path) of each `self.<attr> = value` (`local`: `<attr> = value`) in a body (not in nested functions
    or classes), the path the enclosing `if` tests with the side taken (an `elif`'s earlier links false)."""
    stmts = block.body if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    for t in targets:
                        if local and isinstance(t, cst.Name) and t.value == attr or \
                                not local and isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and \
                                t.value.value == "self" and t.attr.value == attr:
                            yield small.value, path
        elif isinstance(stmt, cst.If):
            before: tuple = ()
            link = stmt
            while isinstance(link, cst.If):
                yield from _attribute_stores(link.body, attr, path + before + ((link.test, True),), local)
                before = before + ((link.test, False),)
                link = link.orelse
            if isinstance(link, cst.Else):
                yield from _attribute_stores(link.body, attr, path + before, local)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        else:                   # loops, `with`, `try` (and their `else`/handlers/`finally`): the same path
            for child in stmt.children:
                if isinstance(child, cst.BaseSuite):
                    yield from _attribute_stores(child, attr, path, local)
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally)):
                    yield from _attribute_stores(child.body, attr, path, local)


def _iterated(it: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """What a `for` loop counts: `xs` of `xs`, `xs.keys()`/`.values()`/`.items()`, `enumerate(xs)`,
    `range(len(xs))` (None: another iterable)."""
    if isinstance(it, cst.Call):
        func = it.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("keys", "values", "items") and not it.args:
            return _iterated(func.value)
        if isinstance(func, cst.Name) and func.value == "enumerate" and len(it.args) == 1:
            return _iterated(it.args[0].value)
        if isinstance(func, cst.Name) and func.value == "range" and len(it.args) == 1:
            inner = it.args[0].value
            if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "len" \
                    and len(inner.args) == 1:
                return _iterated(inner.args[0].value)
        return None
    return it if isinstance(it, (cst.Name, cst.Attribute)) else None


def _holds_len(e: cst.CSTNode, wanted: str) -> bool:
    """`len(<wanted>)` appears in `e` (`torch.LongTensor(data=[len(xs)])`)."""
    todo = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "len" and \
                len(n.args) == 1 and code_of(n.args[0].value, 10 ** 6) == wanted:
            return True
        todo.extend(n.children)
    return False
