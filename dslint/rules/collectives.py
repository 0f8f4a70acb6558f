"""Collective hazards: a collective that one rank enters and another never reaches (DSL101–DSL105).

All five rules read one memoised analysis per file (dslint/program/rank/collective_hazards.py); `RankGuardedCollective`
would be enough to run it, but each rule filters its own code so `--select DSL102` runs only what it needs.
"""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from dslint.program.query import Hazard, Program, code_of
from dslint.findings import Fix, Severity
from dslint.rules.base import Clue, Diagnostic, Example, Rule, RuleContext, Trace
from dslint.rules.evidence import dedupe, group_clues, group_created_between, launch_clues, site_clues
from dslint.sources.literals import literal_value

_Z3_CONFIG = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}\n'
_Z2_CONFIG = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}\n'

_ADVICE = {
    "engine": "Call it on every rank; DeepSpeed itself writes the files from the ranks that own them.",
    "explicit": "Call the collective on every rank of its group (each rank may pass its own data), or use "
                "point-to-point send/recv paired on both sides.",
    "accelerate": "Call it on every process; use `accelerator.is_main_process` only around the local work "
                  "(printing, writing the result).",
    "trainer": "Call it on every process; Trainer already saves/logs from the main process only.",
    "forward": "Run the forward on every rank (each on its own shard, then gather the results), or keep only "
               "local work (logging, writing files) under the rank test.",
    "generate": "Generate on every rank, each on its own prompts, with `synced_gpus=True`; gather the outputs.",
    "function": "Call it on every rank, or keep only local work under the rank test.",
    "library": "Make the iterator on every rank (each may then read from it or not): the library call itself "
               "runs the collective.",
    "dtensor": "Gather on every rank of the mesh (`full_tensor()` outside the rank test), and keep only the "
               "local work (saving, printing) under it.",
}


def _sev(h: Hazard) -> Severity:
    if h.code == "DSL103" and h.guard is not None and h.guard.exit_kind == "raise":
        return Severity.WARNING     # a hang only where the exception does not end the job (_RAISE_CAVEAT)
    return Severity.ERROR if h.site.certain else Severity.WARNING


# a rank that raises ends the whole job under torchrun/the deepspeed launcher (they stop every rank when one
# exits with an error): a crash there, not a hang; the others wait only where the exception is caught or
# carried elsewhere
_RAISE_CAVEAT = (" (Under torchrun or the deepspeed launcher an uncaught exception ends the job instead; the "
                 "others hang where it is caught by a caller, or travels back to a driver as from a Ray actor "
                 "method.)")


def _trace(ctx: RuleContext, h: Hazard) -> list[Trace]:
    out = []
    origin = h.guard.origin if h.guard is not None else None
    if origin is not None:
        out.append(Trace(f"rank-varying value: `{origin.text()}`", origin.node, origin.source))
    if h.code == "DSL105":
        out[0] = Trace(f"may be empty/None on some ranks only: {_filtered(h, ctx)}", h.guard.node,
                       h.value_source or ctx.source)
        if h.inner is not None:
            source, op = h.inner
            out.append(Trace(f"raises: {op.what}", op.node, source))
    if h.code in ("DSL102", "DSL103", "DSL105"):
        out.append(Trace(f"collective: {h.site.label} — {h.site.why}", h.site.call, h.site.source))
    for hop in h.site.chain:
        out.append(Trace(hop.note, hop.node, hop.source))
    for hop in h.site.handoff:
        out.append(Trace(hop.note, hop.node, hop.source))
    return out


def _collective(h: Hazard, ctx: RuleContext) -> str:
    """A noun phrase: "`engine.save_checkpoint(...)`, a collective (why)"."""
    site = h.site
    if site.chain:
        inner = site.chain[-1]
        where = f"{inner.source.path}:{inner.source.span(inner.node).line}"
        return f"`{site.label}`, which reaches the collective `{site.target}` at {where} ({site.why})"
    return f"`{site.label}`, a collective ({site.why})"


def _fix(h: Hazard) -> str:
    return _ADVICE.get(h.site.kind if not h.site.chain else "function", _ADVICE["function"])


def _line(ctx: RuleContext, node) -> int:
    return ctx.source.span(node).line


def _filtered(h: Hazard, ctx: RuleContext) -> str:
    """How the DSL105 value came to differ: "it comes from `[...]`, which filters `outputs` (…)"."""
    g, how = h.guard, h.notes[1] if len(h.notes) > 1 else "filter"
    source = h.value_source or ctx.source
    where = f"line {source.span(g.node).line}" if source is ctx.source else f"{source.path}:{source.span(g.node).line}"
    test = f"{code_of(g.node)}` ({where})"
    if how == "grown":
        return f"it only grows when `{test} holds, which depends on {g.origin.describe()}"
    if how == "assigned":
        return f"it stays None unless `{test} holds, which depends on {g.origin.describe()}"
    if how == "next":
        return f"`{test} is None when {g.origin.describe()} is empty"
    return f"it comes from `{test}, which filters {g.origin.describe()}"


def diagnose(h: Hazard, ctx: RuleContext) -> Diagnostic:
    g = h.guard
    if h.code == "DSL101":
        when = g.condition or f"`{code_of(g.node)}` holds"
        msg = (f"{_collective(h, ctx)[0].upper()}{_collective(h, ctx)[1:]}, only runs when {when} (line {_line(ctx, g.node)}), "
               f"which depends on {g.origin.describe()}: ranks that skip it leave the others blocked in the "
               f"collective. " + "".join(f"{n[0].upper()}{n[1:]}. " for n in h.notes) + _fix(h))
    elif h.code == "DSL102":
        comp = getattr(h.at, "for_in", None)        # a comprehension: its (first) `for` clause's iterable
        head = code_of(h.at.iter if hasattr(h.at, "iter") else comp.iter if comp is not None else
                       getattr(h.at, "test", h.at))
        kind = "for" if hasattr(h.at, "iter") or comp is not None else "while"
        what = "comprehension" if comp is not None else "loop"
        msg = (f"this `{kind}` {what} over `{head}` runs a rank-dependent number of times ({g.origin.describe()}), "
               f"and each iteration calls {_collective(h, ctx)} at line {ctx.source.span(h.site.call).line}"
               f"; a rank with fewer iterations stops calling it while the others wait. Pad every rank to the "
               f"same number of iterations (DistributedSampler, or all_reduce the count with MAX and run dummy "
               f"steps), or move the collective out of the loop.")
    elif h.code == "DSL103":
        test = code_of(g.test) if g.test is not None else "a rank-dependent test"
        at = ctx.source.span(h.site.call).line
        if h.site.source is ctx.source and at < ctx.source.span(h.at).line:
            # the loop's collective comes before the exit: the others meet it again on their next pass
            msg = (f"`{g.exit_kind}` under `{test}` ({g.origin.describe()}) lets some ranks leave the loop while the "
                   f"others come back to {_collective(h, ctx)} at line {at} on their next pass and wait in it "
                   f"forever. Decide the exit on every rank alike (all_reduce the condition), or let every rank "
                   f"run the same passes." + (_RAISE_CAVEAT if g.exit_kind == "raise" else ""))
        else:
            msg = (f"`{g.exit_kind}` under `{test}` ({g.origin.describe()}) lets some ranks leave before "
                   f"{_collective(h, ctx)} at line {at}; the remaining "
                   f"ranks then wait in it forever. Reach the collective on every rank before leaving, or make "
                   f"the exit condition the same on all ranks (all_reduce it)." + (
                   _RAISE_CAVEAT if g.exit_kind == "raise" else ""))
    elif h.code == "DSL105":
        msg = (f"{h.notes[0]}, and the value can be empty/None on some ranks only: {_filtered(h, ctx)}. A rank "
               f"that raises here dies before {_collective(h, ctx)} at line {ctx.source.span(h.site.call).line}"
               f", and the other ranks wait in it until the timeout. Handle the empty case with a decision "
               f"every rank takes alike: all_reduce the count and skip together, or pad with a dummy element.")
    else:
        why = "; ".join(h.notes)
        unsure = "" if h.site.certain else " (no DeepSpeed config found to confirm it)"
        msg = (f"`{h.site.label}` without `synced_gpus=True` on a model where {h.site.why}{unsure}; {why}, so "
               f"ranks stop generating after different numbers of steps and the ones still generating wait in a "
               f"forward collective the finished ranks never join. Pass `synced_gpus=True`.")
    fix = Fix(description=_fix(h) if h.code == "DSL101" else {
        "DSL102": "Give every rank the same iteration count (pad the shard / DistributedSampler / all_reduce MAX).",
        "DSL103": "Let every rank reach the collective, or agree on the exit (all_reduce the condition).",
        "DSL104": "Pass synced_gpus=True to generate().",
        "DSL105": "Guard the empty/None case uniformly: all_reduce the count and skip on every rank together, "
                  "or pad with a dummy element so the operation cannot raise.",
    }[h.code])
    if h.code == "DSL104":
        fix = _synced_gpus_fix(ctx, h.at) or fix
    elif h.code == "DSL102":
        fix = _trip_count_fix(ctx, h) or fix
    clues = site_clues(h.site) + launch_clues(ctx.program, ctx.source)
    if h.code == "DSL103":
        clues += group_clues(ctx.source)
    return Diagnostic(msg, h.at, severity=_sev(h), trace=_trace(ctx, h), fix=fix, code=h.code,
                      evidence=dedupe(clues), proven=h.site.proven)


def _before_any_group(h: Hazard, ctx: RuleContext) -> bool:
    """A `raise` under a rank test before the call that creates the process group, in the same function as the
    collective it leaves before (issue 30): the ranks that raise never join the group, and the job ends under
    its launcher -- no rank waits in a collective for them."""
    if h.code != "DSL103" or h.guard is None or h.guard.exit_kind != "raise" or h.site.source is not ctx.source:
        return False
    at = ctx.source.span(h.at).line
    site = ctx.source.span(h.site.call).line
    return at < site and group_created_between(ctx.source, h.scope, at, site) is not None


def _ends_the_job(h: Hazard, ctx: RuleContext) -> bool:
    """A `raise` under a rank test whose exception no caller catches, on the way up to module-level code, in
    a program no multi-node launcher line starts (`Program.raise_ends_job`): the raising process ends with the
    traceback, and its launcher (torchrun, `accelerate launch`, the deepspeed launcher, `mp.spawn`) stops the
    others -- a crash that says why, not ranks waiting in the collective."""
    if h.code != "DSL103" or h.guard is None or h.guard.exit_kind != "raise":
        return False
    return ctx.program.raise_ends_job(ctx.source, h.scope)


def _fixed_step_count(h: Hazard) -> bool:
    """`generate(..., max_new_tokens=1)`, `min_new_tokens` and `max_new_tokens` given the same value, or
    `eos_token_id=None` beside `max_new_tokens` (no EOS stops a sequence; no stopping criterion, stop string or
    generation config passed beside it): every rank runs the same number of generation steps (EOS cannot end one
    earlier), so none waits in a forward collective
    the others have left -- the DSL104 hazard is the per-rank step count. (How many `generate` calls each rank
    makes is a loop's trip count, DSL102's question.)"""
    call = h.at
    if h.code != "DSL104" or not isinstance(call, cst.Call):
        return False
    kwargs = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    most, least = kwargs.get("max_new_tokens"), kwargs.get("min_new_tokens")
    if isinstance(most, cst.Integer) and most.evaluated_value == 1:
        return True             # a `**inputs` beside it cannot pass max_new_tokens again, and one step always runs
    if any(a.star == "**" for a in call.args):
        return False            # it may pass a stopping criterion that ends one rank's generation early
    if most is not None and "eos_token_id" in kwargs and literal_value(kwargs["eos_token_id"]) is None and \
            literal_value(most) is not None and not _STOPPERS & kwargs.keys():
        return True             # no EOS to stop at: every rank runs `max_new_tokens` steps (DeepSpeed #8264)
    return most is not None and least is not None and code_of(most, 200) == code_of(least, 200)


# generate() keywords that can end a rank's generation before `max_new_tokens` other than its EOS token
_STOPPERS = frozenset({"stopping_criteria", "stop_strings", "generation_config", "custom_generate"})


def _several_ranks(h: Hazard, ctx: RuleContext) -> bool:
    """Is there evidence that more than one process runs the generating code (issue 30 item 6: a hazard needs
    evidence in the launch unit that more than one rank runs it)? A launcher line of the program the file belongs
    to (`ProjectView` unit launches: a line with one process already keeps the rule from running), `--world-size`,
    or the script reading its rank where it generates (`LOCAL_RANK`, `dist.get_rank()`: it knows it is one of
    several). Asked of a generating loop fed by the terminal, which is a one-process tool unless one of these
    says otherwise: the finding is then unproven, hidden unless --show-unproven."""
    program = ctx.program
    if program.unit_launch_lines() or getattr(program.view, "world_size_override", None):
        return True
    return program.reads_rank(ctx.source, h.scope)


_ONE_PROCESS_TAIL = (" and nothing shows that more than one process runs it -- no launcher line of its program, no "
                     "--world-size, no rank id read where it generates: an interactive one-process tool")


def _interactive_clue(h: Hazard, ctx: RuleContext, diag: Diagnostic) -> None:
    """A `generate` fed by a person -- typed on the terminal (`input()` in the generating loop), or sent from the
    web UI its program serves (a gradio app's `launch()` in the entry of every program holding the file) --
    with nothing showing a second process: the finding is unproven, with the clue that says why."""
    if _prompts_from_terminal(h, ctx):
        what, at, where = "its prompts are typed on the terminal (`input()`)", None, None
    else:
        served = ctx.program.web_ui_server(ctx.source)
        if served is None:
            return
        where, at = served
        what = "its prompts come from the web UI its program serves (a gradio app's `launch()`)"
    if _several_ranks(h, ctx):
        return
    diag.proven = False
    diag.evidence.append(Clue("ranks", what + _ONE_PROCESS_TAIL, at, where, found=False))


def _prompts_from_terminal(h: Hazard, ctx: RuleContext) -> bool:
    """The generating loop reads its prompts with the builtin `input()`: an interactive chat (said in the unproven
    finding's evidence)."""
    if h.at is None or "input" in (ctx.source.outline.imports if ctx.source.outline is not None else {}):
        return False
    info = ctx.source.facts.functions.get(h.scope)
    loops = _enclosing_loops(info.node, h.at) if info is not None else None
    if loops is None:
        loops = _enclosing_loops(ctx.source.module, h.at) or []
    return any(_calls_builtin_input(loop) for loop in loops)


def _enclosing_loops(root: cst.CSTNode, target: cst.CSTNode):
    """The `for`/`while` statements that hold `target`, innermost first (not beyond the enclosing function or
    lambda), searched under `root`: the hazard's function (a re-check of a 2,400-line file walked the whole
    module with libcst's visitor, a fifth of its time), else the module; None when `target` is not under `root`.
    The fast walk skips whitespace and punctuation only, which never hold a call, loop or statement."""
    from dslint.sources.cstwalk import walk_events
    stack: list = []
    for node, entering in walk_events(root):
        if node is target and entering:
            out = []
            for held in reversed(stack):
                if held is None:
                    break
                out.append(held)
            return out
        if isinstance(node, (cst.For, cst.While)):
            if entering:
                stack.append(node)
            else:
                stack.pop()
        elif isinstance(node, (cst.FunctionDef, cst.Lambda)):
            if entering:
                stack.append(None)
            else:
                stack.pop()
    return None


def _calls_builtin_input(loop: cst.CSTNode) -> bool:
    from dslint.sources.cstwalk import walk
    return any(isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "input"
               for node in walk(loop))


# `**name` splats that may already carry generate()'s keywords: adding synced_gpus= next to them could pass it
# twice (TypeError), so the fix is unsafe there
_GEN_KWARGS = ("kwarg", "gen", "config", "param", "arg", "opt", "setting", "sampling")


def _synced_gpus_fix(ctx: RuleContext, call) -> "Fix | None":
    import libcst as cst

    from dslint.fixes.python import replace_nodes, with_keyword
    if not isinstance(call, cst.Call):
        return None
    try:
        edits = replace_nodes(ctx.source, {call: with_keyword(call, "synced_gpus", cst.Name("True"))})
    except Exception:
        return None
    if not edits:
        return None
    splats = [a for a in call.args if a.star == "**"]
    risky = any(not isinstance(a.value, cst.Name) or any(w in a.value.value.lower() for w in _GEN_KWARGS)
                for a in splats)
    given = any(a.keyword is not None and a.keyword.value == "synced_gpus" for a in call.args)
    risky = risky or given        # the user's own `synced_gpus=<expr>` is replaced
    return Fix(description="Pass synced_gpus=True to generate()." + (
        " Unsafe: a `**` argument may already pass synced_gpus." if risky and not given else "") + (
        " Unsafe: replaces the given synced_gpus value." if given else ""),
        applicability="unsafe" if risky else "safe", edits=edits)


def _trip_count_fix(ctx: RuleContext, h: Hazard) -> "Fix | None":
    """Display only: the MAX-padding recipe before the loop (agree on the longest share, run dummy steps on the
    ranks with fewer), with the DistributedSampler variant in the description."""
    import libcst as cst

    from dslint.fixes.python import line_insertion
    loop = h.at
    if not isinstance(loop, cst.For):
        return None
    head = code_of(loop.iter)
    try:
        edit = line_insertion(ctx.source, loop, [
            "# every rank must run the loop equally often: agree on the longest share, then pad with dummy steps",
            f"_dslint_steps = torch.tensor(len({head}))",
            "torch.distributed.all_reduce(_dslint_steps, op=torch.distributed.ReduceOp.MAX)",
            f"# ... iterate _dslint_steps times, repeating an element of {head} where this rank's share ran out"],
            after=False)
    except Exception:
        return None
    if edit is None:
        return None
    return Fix(description="Give every rank the same iteration count: all_reduce the count with MAX and pad with "
                           "dummy steps (sketched before the loop), or load the data with a DistributedSampler "
                           "(it pads every rank to the same length).", applicability="display", edits=[edit])


_EVIDENCE = (
    "the collective call -- an explicit `torch.distributed`/`deepspeed.comm` collective, an accelerate or "
    "Trainer collective method is its own evidence (with the `Accelerator(...)`/`Trainer(...)` call of the file "
    "that built its receiver, where there is one) -- and, for a model's forward or `generate`, an engine method or a function reaching one, what makes "
    "it collective in the launch unit: the DeepSpeed engine that runs it (`deepspeed.initialize`/`init_inference`, "
    "followed to the call, or an object used as an engine: `.backward(loss)`, `.step()` and `.module`/"
    "`save_checkpoint`/... on it), a config with ZeRO-3, a DeepSpeed MoE layer, `GatheredParameters`; the "
    "launcher line with its world size where the unit has one. Complete when one of these is seen: a forward of a "
    "model that is an engine by its name only (`ds_engine`, a parameter), with no config or MoE layer, is "
    "unproven (hidden unless `--show-unproven`). A ZeRO stage not seen is listed as such (the finding is then a "
    "warning). How the program is started counts too: a launcher line with its world size is cited; a program "
    "the checked scripts start only with plain `python x.py` commands (one process, nothing spawning) leaves "
    "the finding unproven, with the command as evidence.")

_NAME_ONLY_ENGINE = ("a model's forward or `generate` is collective only if the model is a DeepSpeed engine, and "
                     "it is one by its name only (`ds_engine`, a parameter): no engine, `init_inference`, ZeRO-3 "
                     "config or MoE layer seen")


_BACKEND_NOT_SHOWN = ("an accelerate method collective only under some backends (`save_state`/`load_state` under "
                      "DeepSpeed/FSDP/Megatron-LM, `get_state_dict`/`save_model` under DeepSpeed ZeRO-3/FSDP) where no "
                      "launcher line, accelerate config, DeepSpeed config or accelerate plugin of the program "
                      "(`Accelerator(deepspeed_plugin=...)`, `DeepSpeedPlugin(...)`) shows one of those backends")


class _CollectiveRule(Rule):
    severity_when_unsure = Severity.WARNING
    evidence_needed = _EVIDENCE
    unproven_when = (_NAME_ONLY_ENGINE,)
    needs_ranks = True
    # files that can hold a rank source, a collective site, or a helper reaching one
    triggers = ("rank", "RANK", "main_process", "process_index", "process_zero", "is_master", "is_main",
                "should_save", "should_log", "generate", "split_between", "barrier", "all_reduce", "all_gather",
                "broadcast", "gather", "reduce", "all_to_all", "checkpoint", "backward", "deepspeed", "engine",
                "rainer", "ccelerat", "model", "MoE", "dist.")

    def wants(self, ctx: RuleContext) -> bool:
        return ctx.source.parse_problem() is None

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        for h in ctx.program.rank_hazards(ctx.source):
            if h.code == self.code and not _before_any_group(h, ctx) and not _fixed_step_count(h) and \
                    not _ends_the_job(h, ctx):
                diag = diagnose(h, ctx)
                if h.code == "DSL104":
                    _interactive_clue(h, ctx, diag)
                yield diag


class RankGuardedCollective(_CollectiveRule):
    """A collective that runs only on the ranks where a rank-dependent test holds.

    **What it flags**: a call that every rank must make together — an explicit `torch.distributed`/`deepspeed.comm`
    collective, `engine.save_checkpoint`/`load_checkpoint`, `engine.backward`/`step`, a DeepSpeed engine's
    forward or `generate` when the forward is collective (ZeRO-3, expert-parallel MoE), `Trainer.train/evaluate`,
    accelerate `gather`/`wait_for_everyone`, an iterator made over a DataLoader whose dataset is an
    `IterDataPipe` (torch broadcasts a shared seed then) — or a function of the checked files that reaches one,
    unless a literal argument or a context manager's module global switches its collective off — under an
    `if`/`elif`/`while`/ternary/`and`/`or` whose test depends on the rank (`dist.get_rank() == 0`,
    `args.local_rank in [-1, 0]`, `accelerator.is_main_process`, `trainer.is_world_process_zero()`, a helper
    such as `is_main()`), or in a function decorated `@rank_zero_only`.

    **Why it hangs**: the ranks that enter the collective wait for the ones that never do, until the NCCL/gloo
    timeout. `DeepSpeedEngine.save_checkpoint` runs `dist.barrier()` and an all_reduce of the checkpoint tag on
    every rank (deepspeed/runtime/engine.py, 0.9 – 0.19.8), so `if rank == 0: engine.save_checkpoint(...)`
    hangs in every version; a ZeRO-3 forward all-gathers each partitioned parameter, so a rank-0-only
    evaluation hangs at the first layer; a DeepSpeed MoE layer's all_to_all (DeepSpeed #7141, #5794) likewise.

    **Not flagged**: logging, printing, file writes, wandb/tensorboard, `torch.save` of a state dict, `tqdm`
    under the test; `if/else` whose branches call the same sequence of collectives (op and group, through
    helpers and context managers); rank tests that leave every rank with the same sequence over the function,
    such as the "rank 0 first" barrier pair (`if local_rank not in (-1, 0): barrier()` … `if local_rank == 0:
    barrier()`, also as a `@contextmanager` around a `yield`, and through a wrapper that skips the barrier when
    the run is not distributed); tests against -1 ("is this
    run distributed"), `world_size > 1`, `dist.is_initialized()` and `os.getenv("RANK") is not None`, which are
    the same on every rank (also when they come in a tuple beside the rank: taint is per element). A forward under
    ZeRO-0/1/2 without MoE is local: a rank-0 `model.save_pretrained` of an unwrapped HF model is fine there. With
    no DeepSpeed config found, a forward is reported as a warning.

    **Process groups**: a collective on a sub-group only needs that group's members. A test that depends only on
    coordinates the members share is taken alike by all of them: `if mpu.is_pipeline_last_stage():
    all_reduce(x, group=mpu.get_data_parallel_group())` (every member of a data-parallel group sits at the same
    pipeline stage), a tensor-parallel rank test around a data-parallel or pipeline-group collective. The group's
    own membership test is fine too (`if mpu.is_rank_in_embedding_group(): all_reduce(g,
    group=mpu.get_embedding_group())`; `if rank in ranks:` around a collective on `new_group(ranks)`). The same
    test around a collective on WORLD, or on a group whose members differ in that coordinate (the pipeline group
    under a stage test), is flagged. The group getters and predicates dslint knows (Megatron/NeoX `mpu`,
    DeepSpeed `groups`, pipeline engines) are tables in dslint/program/process_groups.py; a group it cannot name is WORLD.
    DSL102 and DSL103 apply the same rule to loops and exits.

    **Sequences**: both branches reaching collectives is not enough -- they must reach the same ones, in the same
    order, on the same group. `if rank == 0: dist.broadcast(t, 0) else: dist.all_reduce(t)`, two barriers on one
    side against one on the other, or the same all_reduce on different groups are flagged at the collectives
    where the branches part (dslint/program/rank/collective_sequences.py); so is an `if`/`elif` chain over the rank without
    an `else` that leaves some ranks out of the barrier the others wait in. The sequences are compared from the
    rank test to the end of the function (what every rank ran before it does not matter; a `return` on one side
    leaves the function as the end of the other does).
    """

    code = "DSL101"
    name = "rank-guarded-collective"
    unproven_when = (_NAME_ONLY_ENGINE, _BACKEND_NOT_SHOWN)
    severity = Severity.ERROR
    summary = "a collective site under a rank-dependent condition"
    fix_advice = "Call the collective on every rank; keep only local work (logging, files) under the rank test."
    references = ("DeepSpeed #7141", "DeepSpeed #5794", "deepspeed/runtime/engine.py save_checkpoint (barrier)")
    versions = "All DeepSpeed versions (checkpointing and ZeRO-3 gathers are collective since 0.3)."
    suppress_when = "The guarded block only does local work dslint mistook for a collective (say which in a comment)."
    VALID = (
        """\
        import deepspeed, torch.distributed as dist
        engine, *_ = deepspeed.initialize(model=model, config="ds.json")
        engine.save_checkpoint("ckpt")            # every rank
        if dist.get_rank() == 0:
            print("saved")
            torch.save(model.state_dict(), "plain.pt")
        """,
        Example("""\
import deepspeed, torch.distributed as dist
model_engine, *_ = deepspeed.initialize(model=model, config="ds.json")
if dist.get_rank() == 0:
    model_engine.module.save_pretrained("out")   # ZeRO-2: parameters are whole on every rank
""", files={"ds.json": _Z2_CONFIG}),
    )
    INVALID = (
        """\
        import deepspeed, torch.distributed as dist
        engine, *_ = deepspeed.initialize(model=model, config="ds.json")
        if dist.get_rank() == 0:
            engine.save_checkpoint("ckpt")  # expect: DSL101
        """,
        Example("""\
import os, deepspeed
local_rank = int(os.environ["LOCAL_RANK"])
engine, *_ = deepspeed.initialize(model=model, config="ds.json")

def evaluate(loader):
    return [engine(batch) for batch in loader]

if local_rank == 0:
    evaluate(val_loader)  # expect: DSL101
""", files={"ds.json": _Z3_CONFIG}),
        """\
        import torch.distributed as dist
        if dist.get_rank() == 0:
            dist.broadcast(t, 0)  # expect: DSL101
        else:
            dist.all_reduce(t)  # expect: DSL101
        """,
    )


class RankDependentTripCount(_CollectiveRule):
    """A collective inside a loop whose number of iterations can differ across ranks.

    **What it flags**: `for`/`while` loops (and comprehensions) that reach a collective site and iterate over
    this rank's share of the data — `batches[rank::world]`, `xs[rank*n:(rank+1)*n]`, `np.array_split(xs,
    world)[rank]`, `torch.chunk(...)[rank]`, a DataLoader over such a set, `accelerator.split_between_processes`
    — or `range()` of a rank-dependent count, or `while` on a rank-dependent condition.

    **Why it hangs**: with 10 batches over 4 ranks, ranks 0–1 get 3 and ranks 2–3 get 2; the last forward of
    ranks 0–1 waits in a ZeRO-3 all-gather or an MoE all_to_all (DeepSpeed #7141: `batches[local_rank::world]`
    with an MoE model) that ranks 2–3 never join. DistributedSampler pads every rank to the same length and is
    not flagged; neither is a loop whose count was made uniform with an all_reduce(MAX), nor one over a dict
    whose values (not keys) were replaced by this rank's chunk (`batch[k] = chunks[cp_rank]`), nor one to the
    size of this rank's item (`input_ids.size(0)` of a batch whose content, not row count, differs), nor one whose
    trip count depends only on coordinates the collective's group members share (DSL101, process groups), nor a
    loop over a list whose length this rank broadcast just before to the group its loop's collectives run on
    (`broadcast(tensor([len(xs)]), src, group=g)` then `for x in xs: broadcast(x, src, group=g)`: the receivers
    loop over the count they got; what they run per pass is compared as the branch's sequences, DSL101).

    A model holding DeepSpeed MoE layers (built by its class, `from_pretrained`, a helper that returns it, or
    an `MoE` layer attached to it) has a collective forward whether or not it went through
    `deepspeed.initialize`: without it the all_to_all runs on the WORLD group (DSL201, reported as well), and
    adding `deepspeed.initialize` fixes the groups, not the uneven loop.
    """

    code = "DSL102"
    name = "rank-dependent-trip-count"
    severity = Severity.ERROR
    summary = "a collective site in a loop whose iteration count can differ across ranks"
    fix_advice = "Use a DistributedSampler (pads to equal length) or all_reduce the count with MAX and pad."
    autofix = 'display: the MAX-padding recipe before the loop (all_reduce the count with MAX, pad with dummy steps); the description names the DistributedSampler alternative.'
    references = ("DeepSpeed #7141", "DeepSpeed #5794")
    versions = ("All DeepSpeed versions; MoE without deepspeed.initialize runs all_to_all on WORLD (ep_size > 1: "
                "every version; ep_size=1: ≤ 0.19.0).")
    suppress_when = "The shards are equal by construction (e.g. the dataset length is a multiple of the world size)."
    VALID = (
        """\
        import deepspeed
        from torch.utils.data import DataLoader, DistributedSampler
        engine, *_ = deepspeed.initialize(model=model, config="ds.json")
        loader = DataLoader(ds, sampler=DistributedSampler(ds), batch_size=8)
        for batch in loader:
            loss = engine(batch)
            engine.backward(loss)
            engine.step()
        """,
    )
    INVALID = (
        Example("""\
import torch.distributed as dist, deepspeed
rank, world = dist.get_rank(), dist.get_world_size()
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
for batch in batches[rank::world]:  # expect: DSL102
    engine(batch)
""", files={"ds.json": _Z3_CONFIG}, fixed="""\
import torch.distributed as dist, deepspeed
rank, world = dist.get_rank(), dist.get_world_size()
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
# every rank must run the loop equally often: agree on the longest share, then pad with dummy steps
_dslint_steps = torch.tensor(len(batches[rank::world]))
torch.distributed.all_reduce(_dslint_steps, op=torch.distributed.ReduceOp.MAX)
# ... iterate _dslint_steps times, repeating an element of batches[rank::world] where this rank's share ran out
for batch in batches[rank::world]:  # expect: DSL102
    engine(batch)
"""),
    )


class RankEarlyExit(_CollectiveRule):
    """`return`/`continue`/`break`/`raise`/`sys.exit()` under a rank-dependent test, before a collective the
    other ranks still reach.

    **Why it hangs**: `if rank != 0: return` followed by `engine(batch)` makes the forward rank-0-only; with
    expert-parallel MoE (all_to_all over the expert group) or ZeRO-3 (parameter all-gather) rank 0 waits for
    peers that already left (DeepSpeed #7141). `continue` on a per-rank condition (an empty batch on one
    rank) skips one rank's `engine.backward` for that step, so its gradient all_reduce pairs with the next
    step of the others. Exits taken on every rank alike (`if/else` that both return) are not flagged, nor a
    `continue` in a `while` loop that ends by leaving it (a retry: each rank comes back to the same collective
    and runs it once), nor an exit before `init_process_group(..., world_size=N)` (the ranks that left are no
    members of the world formed after them), nor a test uniform over the collective's process group (DSL101),
    nor a `raise` inside a `try` with handlers of the same function, in an `except` handler (it translates an
    outside failure), one that hands on the exception a task failed with (`if fut.exception(): raise
    fut.exception()`: this rank's own write failed, as `fut.result()` would raise it), under a test of per-rank
    *data* (a fail-fast check of a malformed batch, not a decision a rank takes by its id), under a test of its own inside the rank test (rank 0 validating a setting), or
    under a test of the rank id against an upper bound read from the run's settings (`if local_rank >=
    cfg.tp_size: raise`: the launch checked against the configuration -- on a matching launch no rank raises;
    a bound written as a literal or computed, `rank >= world // 2`, splits the ranks into roles and is flagged).

    A `raise` under a rank-id test is reported as a warning: under torchrun or the deepspeed launcher the
    uncaught exception ends the whole job (a crash, not a hang); the others hang where a caller catches it, or
    where it travels back to a driver (a Ray actor method that the driver calls on every rank with `.remote()`).
    Where the evidence says the exception ends the job, the `raise` is not flagged at all: no caller catches it
    on the way to module-level code (every call of the function, and of each caller in turn, stands outside any
    `try` with an `except`, and the function is used only by calls, or handed as an argument to a checked function
    whose receiving parameter is only called -- Megatron's `pretrain(datasets_provider, ...)` -- or handed on the
    same way; one stored or handed elsewhere by reference, or called by nothing checked, may run under a handler
    dslint does not see), and a launcher line (`torchrun`, `python -m torch.distributed.run` or `.launch` -- the
    same elastic agent --, the deepspeed launcher, `accelerate launch`) runs the file,
    none of them one node of a multi-node job. torchrun and `accelerate launch` (torch's elastic agent) and
    the deepspeed launcher stop every process of the node when one exits with an error, so the others never
    wait: the job ends with the exception's traceback, which says why. With no launcher line, or a multi-node
    one (the other nodes' launchers go on, and their ranks wait until the collective's timeout), or a caller
    that catches it, the warning stays. (A `raise` whose test is false under the options' defaults -- an
    explicit `--device` that contradicts `LOCAL_RANK` -- is such a fail-fast check of the launch; the launcher
    evidence decides it, not the default.)
    """

    code = "DSL103"
    name = "rank-early-exit"
    evidence_needed = _EVIDENCE + (
        " Also the call that creates the process group (`init_process_group`, `deepspeed.init_distributed`/"
        "`initialize`, `Accelerator()`): a `raise` under a rank test before that call, in the function of the "
        "collective, is not flagged -- the ranks that raise never join the group, and the launcher ends the job.")
    severity = Severity.ERROR
    summary = "an early exit under a rank-dependent test before a collective other ranks still reach"
    fix_advice = "Reach the collective on every rank first, or make the exit decision uniform (all_reduce it)."
    references = ("DeepSpeed #7141",)
    versions = "All DeepSpeed versions."
    suppress_when = "The code after the exit provably has no collective under your config."
    VALID = (
        """\
        import torch.distributed as dist, deepspeed
        engine, *_ = deepspeed.initialize(model=model, config="ds.json")
        def save(step):
            engine.save_checkpoint("ckpt", tag=str(step))
            if dist.get_rank() != 0:
                return
            print("saved", step)
        """,
    )
    INVALID = (
        Example("""\
import torch.distributed as dist, deepspeed
from deepspeed.moe.layer import MoE
model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
def sample(batch):
    if dist.get_rank() != 0:
        return  # expect: DSL103
    return engine(batch)
""", files={"ds.json": _Z2_CONFIG}),
        """\
        import torch.distributed as dist
        def push_weights(t):
            if dist.get_rank() != 0:
                raise RuntimeError("only rank 0 pushes weights")  # expect: DSL103
            dist.broadcast(t, src=0)
        """,
    )


class GenerateNotSynced(_CollectiveRule):
    """`generate()` on a model whose forward is collective, on per-rank inputs, without `synced_gpus=True`.

    **Why it hangs**: generation stops when a rank's sequences hit EOS or `max_new_tokens`; with sampling or
    different prompts per rank that happens after a different number of steps on each rank, and the ranks
    still generating wait in a forward collective (ZeRO-3 all-gather, MoE all_to_all) the finished ones never
    join. `synced_gpus=True` keeps finished ranks running dummy forwards until every rank is done.
    transformers (`GenerationMixin._extract_generation_mode_kwargs`, 4.x – 5.24) turns it on by itself only
    when `is_deepspeed_zero3_enabled()` — i.e. while an `HfDeepSpeedConfig` object is alive (kept in a
    variable that outlives the model's set-up: a local name of a helper that returns without it dies with the
    helper, as DeepSpeed-Chat's `create_hf_model` does; the Trainer and accelerate keep one) with ZeRO-3 — and
    world size > 1. DeepSpeed MoE expert
    parallelism under ZeRO-0/1/2 is never detected: pass it yourself (DeepSpeed #7141). That holds as well for
    an MoE model never passed to `deepspeed.initialize` (its all_to_all then runs on the WORLD group, DSL201):
    wrapping it creates the expert groups but does not keep the ranks' generation steps in step.

    The engine may reach `generate` by any route: a local name, `engine.module`, a `self.` field of another
    class it was handed to (`self.actor_model.module.generate`), a helper's parameter (`def evaluate(loader,
    model)` called with the engine) or a helper's return; its own DeepSpeed config decides, and the finding's
    trace shows the hand-offs ("engine created by deepspeed.initialize at a.py:12 → stored on self.actor …").

    Not flagged: a `generate` that runs a fixed number of steps on every rank (`max_new_tokens=1`,
    `min_new_tokens` equal to `max_new_tokens`, or `eos_token_id=None` beside `max_new_tokens`: no EOS ends a
    rank's generation early); a model under `deepspeed.init_inference` that keeps the whole
    model on each rank (`mp_size=1` or none, no `config=`/tensor-parallel/expert setting: kernel injection
    only -- the InferenceEngine partitions no parameter) with no ZeRO-3 config or MoE layer reaching it, whose
    forward holds no collective; a greedy `generate` in a loop whose every pass encodes the same literal text
    (`ids = tok(["hello"] * batch_size)["input_ids"].cuda()`: a tensor-parallel benchmark, every rank feeds
    the same prompt). Unproven (hidden unless `--show-unproven`): a generating loop
    fed by the terminal (`input()`), or a `generate` in a program that serves a web UI (the entry of every
    program holding the file starts a gradio app's server, `demo.launch()`: the page's requests reach that one
    process), with nothing showing a second process -- no launcher line of its program, no `--world-size`, no
    rank id read where it generates.
    """

    code = "DSL104"
    name = "generate-not-synced"
    evidence_needed = (
        "a DeepSpeed engine or `init_inference` that runs the model (followed to the call, or an object used as an "
        "engine: `.backward(loss)`, `.step()`, `.module`), a config with ZeRO-3, or a DeepSpeed MoE layer, in the "
        "launch unit. `generate` on a plain model (a single-process `input()` loop, no engine) is no site at all; "
        "on a model that is an engine by its name only it is unproven (hidden unless `--show-unproven`). With an "
        "engine but no config the ZeRO stage is listed as not seen and the finding is a warning.")
    evidence_complete = ("an engine or `init_inference` that runs the generating model (or an object used as an "
                         "engine), a ZeRO-3 config or a DeepSpeed MoE layer, in the launch unit")
    unproven_when = (_NAME_ONLY_ENGINE, "the generating loop reads its prompts with `input()`, or its program "
                     "serves a gradio web UI (`demo.launch()` in the entry of every program holding the file), and "
                     "nothing shows more than one process (no launcher line of its program, no --world-size, no "
                     "rank id read where it generates): an interactive one-process tool")
    severity = Severity.ERROR
    summary = "generate() on a collective-forward model with per-rank inputs and no synced_gpus=True"
    fix_advice = "Pass synced_gpus=True to generate()."
    autofix = 'safe: adds `synced_gpus=True` to the `generate` call; unsafe when a `**` argument named like generation kwargs (`**gen_kwargs`, `**generation_config`) may pass it already, or when the call gives `synced_gpus=<expr>` (replaced by True).'
    references = ("DeepSpeed #7141", "transformers generate(synced_gpus)")
    versions = "transformers ≤ 5.24 auto-enables synced_gpus only under ZeRO-3 with a live HfDeepSpeedConfig."
    suppress_when = "Every rank generates the same prompt greedily, so all ranks stop at the same step."
    VALID = (
        Example("""\
import deepspeed
from deepspeed.moe.layer import MoE
model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
for batch in loader:
    out = engine.module.generate(**batch, do_sample=True, synced_gpus=True)
""", files={"ds.json": _Z2_CONFIG}),
    )
    INVALID = (
        Example("""\
import deepspeed
from deepspeed.moe.layer import MoE
model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
for batch in loader:
    out = engine.module.generate(**batch, do_sample=True)  # expect: DSL104
""", files={"ds.json": _Z2_CONFIG}, fixed="""\
import deepspeed
from deepspeed.moe.layer import MoE
model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
for batch in loader:
    out = engine.module.generate(**batch, do_sample=True, synced_gpus=True)  # expect: DSL104
"""),
        Example("""\
import deepspeed
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
for batch in loader:
    out = engine.module.generate(  # expect: DSL104
        batch["input_ids"],
        do_sample=True,  # sampling: ranks stop at different steps
    )
""", files={"ds.json": _Z3_CONFIG}, fixed="""\
import deepspeed
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
for batch in loader:
    out = engine.module.generate(  # expect: DSL104
        batch["input_ids"],
        do_sample=True,  # sampling: ranks stop at different steps
        synced_gpus=True,
    )
"""),
    )


class RankDependentException(_CollectiveRule):
    """An operation that raises on an empty or None value which only some ranks can hold, before a collective.

    **What it flags**: a value produced by a *filter* over rank-varying data — a comprehension with an `if`
    clause (`answers = [a for a in outputs if a.is_valid]` over this rank's generations or shard), `filter(...)`,
    a list started empty that grows only under a rank-dependent test or after a rank-dependent `continue`, a
    name left None unless a rank-dependent branch rebinds it, `next(iter(data), None)` — fed to an operation that
    raises when it is empty/None: `torch.cat`/`torch.stack`/`np.concatenate`, `max`/`min` without `default=`,
    `random.choice`, `xs[0]`, `total / len(xs)` (ZeroDivisionError), `x.shape`/`x.item()`/`len(x)` of a
    maybe-None; and a collective site after it in the same function (or anywhere in the enclosing loop's body:
    the next iteration reaches it) — an all_reduce/gather, a ZeRO-3 or MoE engine forward, `engine.backward`,
    `accelerator.gather`.

    **Why it hangs**: the filter keeps nothing on one rank only (all its samples were invalid, its shard was
    short); that rank raises and dies, while the others block in the collective until the NCCL timeout, and the
    job reports a timeout far from the real error (an RLHF trainer's reward step: `torch.cat(valid_rewards)`
    before the gradient all_reduce).

    **Not flagged**: any test of the value before the operation (`if not answers:`, `if len(answers) == 0`,
    `if x is None`, `assert answers`, `answers and ...`) — what that test does is the user's decision (whether
    the test itself is rank-dependent is DSL103's concern); an operation inside `try` with handlers; a filter
    over data that is the same on every rank; no collective after the operation; a list grown on both sides of
    a per-rank `continue`/`break`/`return` (the exiting branch appends before it leaves, the path that stays
    appends after): every pass adds an item, the test decides which. A collective under a config
    dslint cannot confirm makes the finding a warning.
    """

    code = "DSL105"
    name = "rank-dependent-exception"
    severity = Severity.ERROR
    summary = "an operation that raises on a per-rank empty/None value (filtered data) before a collective"
    fix_advice = ("Handle the empty case uniformly: all_reduce the count and skip on every rank together, or pad "
                  "with a dummy element; or check it and still reach the collective.")
    references = ("RLHF trainers: filtered per-rank answers fed to torch.cat before the step's all_reduce",)
    versions = "All DeepSpeed/torch.distributed versions."
    suppress_when = "The filter provably keeps at least one element on every rank (say why in a comment)."
    VALID = (
        """\
        import torch, torch.distributed as dist
        def step(engine, outputs):
            answers = [o.reward for o in outputs if o.is_valid]
            n = torch.tensor(len(answers))
            dist.all_reduce(n)
            if len(answers) == 0:
                answers = [torch.zeros(1)]
            loss = -torch.cat(answers).mean()
            dist.all_reduce(loss)
        """,
        """\
        import torch, torch.distributed as dist
        def step(outputs):
            answers = [o.reward for o in outputs if o.is_valid]
            return torch.cat(answers).mean()       # no collective after it
        """,
    )
    INVALID = (
        """\
        import torch, torch.distributed as dist
        def step(model, prompts):
            outputs = model.generate(prompts, do_sample=True)
            answers = [o for o in outputs if is_valid(o)]
            rewards = torch.cat(answers)  # expect: DSL105
            dist.all_reduce(rewards)
        """,
    )


def prepare(program: Program) -> None:
    """Whole-view analyses every file's check reads, computed once before files are dealt to worker processes,
    which inherit them through fork."""
    program.prepare_rank_hazards()
