"""DSL2xx: DeepSpeed MoE — expert groups, MoE param groups, expert-parallel sizes, per-rank token counts,
MoE under ZeRO-3, and HF-style sparse MoE blocks under ZeRO-3.

The facts come from `dslint.program.models.moe` (MoE constructions and the models holding them),
`dslint.program.models.optimizers` (how the client optimizer is built) and `dslint.program.models.moe_usage` (ZeRO stages,
dynamic padding, sparse blocks, leaf modules), each computed once per run.
"""

from __future__ import annotations

import textwrap
from typing import Optional

from dslint.findings import Fix, Severity
from dslint.program.query import DEFAULT_LEAF_CLASSES, PLAIN, MoESite, Program
from dslint.rules.base import Diagnostic, Example, Rule, RuleContext, Trace

MOE_TRIGGERS = ("MoE", "moe", "experts")


def ex(source: str, **kw) -> Example:
    return Example(textwrap.dedent(source).lstrip("\n"), **kw)


def _ds_version(ctx: RuleContext) -> Optional[tuple[int, ...]]:
    return ctx.program.version(ctx.program.deepspeed_version)


def _site_note(site: MoESite) -> str:
    parts = []
    for key in ("num_experts", "ep_size", "k", "capacity_factor", "min_capacity", "drop_tokens"):
        v = site.get(key)
        parts.append(f"{key}={v.value!r}" if v.known else f"{key}=?")
    return "MoE(" + ", ".join(parts) + ")"


def _distributed(ctx: RuleContext) -> bool:
    src = ctx.source
    if list(ctx.program.launches_for(src)):
        return True
    ws = ctx.program.world_size_for(src)
    if ws and ws > 1:
        return True
    return any(w in src.text for w in ("init_process_group", "init_distributed", "LOCAL_RANK", "local_rank",
                                       "Accelerator(", "get_world_size"))


class MoEGroupsNotInitialised(Rule):
    """A script builds a model holding DeepSpeed MoE layers and runs it without `deepspeed.initialize`.

    **Why it hangs**: only `DeepSpeedEngine` (created by `deepspeed.initialize`) walks the model and calls
    `set_deepspeed_parallelism()` on every MoE layer, which creates the expert-parallel process groups and sets
    `MOELayer.ep_group`. Without it `ep_group` stays `None`, and `all_to_all_single(..., group=None)` runs on
    the **WORLD** group: in DeepSpeed ≤ 0.19.0 even at `ep_size=1` (the all_to_all was unconditional until
    PR #7997, released in 0.19.1, guarded it with `ep_size > 1`), and at `ep_size > 1` on every version.
    Ranks then exchange tokens with each other's experts (silently wrong outputs) and, as soon as their
    forward counts or token counts differ (`batches[rank::world]` with uneven counts, sampled `generate`
    lengths), the WORLD all_to_all hangs or aborts (DeepSpeed #7141, DDP inference of an MoE model).
    `deepspeed.init_inference` does not help either: its `InferenceEngine` creates expert groups only for
    kernel-injected MoE inference modules and never calls `set_deepspeed_parallelism()` on native `MoE` layers.

    Not flagged: a single-process script (no launcher line, no process-group setup), a script that passes the
    model to `deepspeed.initialize` or to an HF `Trainer` (a subclass another file defines included) with a
    DeepSpeed config -- in its `TrainingArguments` or on the command line of the launch lines that start its
    program (`deepspeed train_mem.py --deepspeed zero2.json`) --, `ep_size=1` on DeepSpeed ≥ 0.19.1, and layers
    whose `ep_size` equals the world size on every launcher line that runs the script (a literal, or
    `args.world_size` where each line passes the option the number of ranks it starts): their one expert group
    is every rank, so the WORLD group the all_to_all falls back to is the group they ask for.
    """

    code = "DSL201"
    needs_ranks = True
    name = "moe-groups-not-initialised"
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "an MoE model run without `deepspeed.initialize` (expert groups never created: all_to_all on WORLD)"
    fix_advice = ("Wrap the model with `deepspeed.initialize(model=..., config=...)` (also for inference) so the "
                  "MoE layers get their expert-parallel groups; or upgrade to DeepSpeed ≥ 0.19.1 when ep_size=1.")
    autofix = 'display: `model, *_ = deepspeed.initialize(model=model, config="ds_config.json")` after the statement that builds the model (the config path is yours to fill in), `import deepspeed` added once.'
    references = ("DeepSpeed #7141", "DeepSpeed PR #7997", "deepspeed/runtime/engine.py set_deepspeed_parallelism")
    versions = "ep_size=1: DeepSpeed ≤ 0.19.0; ep_size>1: every version."
    suppress_when = "The script runs in a single process, or sets every MoE layer's expert group itself."
    unproven_when = ("the model goes to an HF Trainer whose TrainingArguments are parsed from the command line "
                     "(`HfArgumentParser.parse_args_into_dataclasses`) and no launch line of its program is seen: "
                     "`--deepspeed ds.json` there would make the Trainer build the DeepSpeed engine",)
    triggers = MOE_TRIGGERS
    VALID = (
        """\
        import deepspeed
        from deepspeed.moe.layer import MoE
        net = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=2)
        engine, *_ = deepspeed.initialize(model=net, config="ds.json")
        deepspeed.init_distributed()
        engine(x)
        """,
        ex("""\
        import torch.distributed as dist
        from deepspeed.moe.layer import MoE
        dist.init_process_group("nccl")
        model = MoE(hidden_size=64, expert=expert, num_experts=4)
        model(x)
        """, deepspeed_version="0.19.1"),
    )
    INVALID = (
        ex("""\
        import torch.distributed as dist
        from deepspeed.moe.layer import MoE
        dist.init_process_group("nccl")
        model = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=1)  # expect: DSL201
        for batch in batches[dist.get_rank()::dist.get_world_size()]:
            model(batch)
        """, deepspeed_version="0.15.1", fixed="""\
        import torch.distributed as dist
        from deepspeed.moe.layer import MoE
        import deepspeed
        dist.init_process_group("nccl")
        model = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=1)  # expect: DSL201
        model, *_ = deepspeed.initialize(model=model, config="ds_config.json")  # creates the expert-parallel groups
        for batch in batches[dist.get_rank()::dist.get_world_size()]:
            model(batch)
        """),
        ex("""\
        import torch.distributed as dist
        from deepspeed.moe.layer import MoE
        dist.init_process_group("nccl")
        model = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=2)  # expect: DSL201
        model(batch)
        """, fixed="""\
        import torch.distributed as dist
        from deepspeed.moe.layer import MoE
        import deepspeed
        dist.init_process_group("nccl")
        model = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=2)  # expect: DSL201
        model, *_ = deepspeed.initialize(model=model, config="ds_config.json")  # creates the expert-parallel groups
        model(batch)
        """),
    )

    def wants(self, ctx: RuleContext) -> bool:
        return bool(ctx.program.moe().sites)

    def check(self, ctx: RuleContext):
        src, program = ctx.source, ctx.program
        facts = program.moe()
        calls = program.engine_calls(src)
        inference = [c for c in calls if c.kind == "init_inference"]
        if any(c.kind == "initialize" for c in calls):
            return
        if any(c.kind == "trainer" and program.configs_for_call(src, c.call) for c in calls):
            return
        if any(c.kind == "trainer" for c in calls) and program.unit_launch_configs():
            return      # the launch lines of its program hand it a DeepSpeed config on the command line (`deepspeed
                        # train_mem.py --deepspeed zero2.json` after a `cd` dslint cannot follow), which the
                        # Trainer's parsed arguments carry to deepspeed.initialize
        builder_fns = facts.builder_functions
        consumers = []
        for call in src.facts.calls:
            scope_key = f"{src.module_name}.{call.scope}"
            if scope_key in builder_fns and call.scope != "<module>":
                fn = src.facts.functions.get(call.scope)
                if fn is not None and fn.class_name:       # construction inside a model class: not a consumer
                    continue
                if fn is not None and program.returns_value(fn) and _builder_called(program, scope_key, fn.name):
                    continue        # a helper that builds the model for its callers: they are the consumers
            if call in program.moe_builds_in_scope(src, call.scope):
                consumers.append(call)
        if not consumers or not _distributed(ctx):
            return
        open_sites = [s for s in facts.sites if not _expert_group_is_world(ctx, s)]
        if not open_sites:
            return      # every layer asks for one expert group of all ranks: WORLD is that group
        eps = {s.get("ep_size").value if s.get("ep_size").known else None for s in open_sites}
        version = _ds_version(ctx)
        fixed = version is not None and version >= (0, 19, 1)
        if eps == {1} and fixed:
            return
        severity = None
        if None in eps and fixed:
            severity = Severity.WARNING
            when = "if any MoE layer has ep_size > 1 (its value is not known statically)"
        elif any(e and e > 1 for e in eps):
            when = "at ep_size > 1, on every DeepSpeed version"
        elif version is None:
            severity = Severity.WARNING
            when = "in DeepSpeed ≤ 0.19.0 even at ep_size=1 (the installed/pinned version is unknown)"
        else:
            when = f"in DeepSpeed {program.deepspeed_version} (≤ 0.19.0) even at ep_size=1"
        how = ("`deepspeed.init_inference` does not create expert groups for native MoE layers; "
               if inference else "")
        site = facts.sites[0]
        call = consumers[0]
        diag = Diagnostic(
            f"this model holds DeepSpeed MoE layers but never passes through `deepspeed.initialize`: {how}their "
            f"`ep_group` stays None and the MoE all_to_all runs on the WORLD group {when} — outputs mix tokens "
            f"across ranks and uneven per-rank forward counts hang (DeepSpeed #7141). Wrap the model with "
            f"`deepspeed.initialize`.", call.node, severity=severity,
            trace=[Trace(f"MoE layer built here: {_site_note(site)}", site.call.node, site.src)],
            fix=_initialize_fix(src, call.node))
        trainer = next((c for c in calls if c.kind == "trainer" and program.trainer_args_from_command_line(src, c.call)),
                       None)
        if trainer is not None and not program.unit_launch_lines() and not program.launches_for(src):
            # issue 30 (hf-trainer-deepspeed-launch-unseen): the Trainer's TrainingArguments come from the command
            # line, and no launch line of this program is seen: `--deepspeed ds.json` there makes the Trainer call
            # deepspeed.initialize, which creates the expert groups -- the hazard rests on a flag nobody saw
            from dslint.rules.evidence import family_evidence, unseen
            clues, _ = family_evidence(self.code, ctx, diag)
            diag.evidence = clues + [unseen("launcher", "no launch line of this program is seen, and the Trainer's "
                                                        "TrainingArguments are parsed from the command line "
                                                        "(`parse_args_into_dataclasses`): `--deepspeed ds.json` there "
                                                        "would make the Trainer call deepspeed.initialize")]
            diag.proven = False
        yield diag


def _expert_group_is_world(ctx: RuleContext, site: MoESite) -> bool:
    """Issue 30 (ep-size-equals-world-size): does the MoE layer's `ep_size` equal the world size on every
    launcher line that runs the checked script -- `ep_size=args.world_size` where each line passes the option the
    same number of ranks it starts (`deepspeed --num_gpus $N train.py --world_size $N`)? Its one expert group is
    then every rank: the WORLD group its all_to_all falls back to is the group `deepspeed.initialize` would have
    created, and no token goes to a rank outside its expert group."""
    import libcst as cst
    node = site.arg_nodes.get("ep_size")
    fixed = site.get("ep_size")
    if not fixed.known and not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
        return False
    launches = ctx.program.launches_for(ctx.source)
    if not launches:
        return False
    for sh, launch in launches:
        world = launch.world_size
        value = fixed if fixed.known else ctx.program.launch_option_value(node.attr.value, sh, launch)
        if not world or world == 1 or not value.known or value.value != world:
            return False
    return True


def _same_texts_everywhere(ctx: RuleContext, pad) -> bool:
    """The padding call tokenizes texts that are proven the same on every rank (`Program.same_on_every_rank`: an
    evaluation script where every rank reads the same prompt files, no rank split, every caller seen): then the
    padded length is the same everywhere too (issue 30: evidence before a finding)."""
    import libcst as cst
    node = pad.node
    if not isinstance(node, cst.Call) or pad.src is not ctx.source:
        return False
    texts = next((a.value for a in node.args if a.keyword is None and not a.star), None)
    if texts is None:
        texts = next((a.value for a in node.args if a.keyword is not None and a.keyword.value in ("text", "texts")),
                     None)
    call = next((c for c in ctx.source.facts.calls if c.node is node), None)
    if texts is None or call is None or (call.attr or "")[:1].isupper():
        return False        # a collator built here (`DataCollatorWithPadding(tok, ...)`) pads the batches it gets later
    return ctx.program.same_on_every_rank(ctx.source, texts, call.scope)


def _initialize_fix(src, node) -> Optional[Fix]:
    """Display only: `name, *_ = deepspeed.initialize(model=name, config=...)` after the statement binding the
    model (the config path is the user's to fill in)."""
    import libcst as cst

    from dslint.fixes.python import import_edit, line_insertion, statement_of
    stmt = statement_of(src, node)
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    name = small.targets[0].target.value
    try:
        edits = [line_insertion(src, stmt, [f'{name}, *_ = deepspeed.initialize(model={name}, config="ds_config.json")'
                                            "  # creates the expert-parallel groups"], after=True),
                 import_edit(src, "deepspeed")]
    except Exception:
        return None
    edits = [e for e in edits if e is not None]
    if not edits or edits[0].content.strip().startswith("import"):
        return None
    return Fix(description=f"Pass `{name}` through `deepspeed.initialize` (with the job's DeepSpeed config) before "
                           "running it.", applicability="display", edits=edits)


def _builder_called(program, key: str, name: str) -> bool:
    """Some checked file calls the MoE-building function `key` (`model = moefy(base)`): the model is used
    (initialized or not) where that call is, and the rule looks at that file."""
    return any(c.attr == name and program.calls_moe_builder(s, c, {key})
               for s in program.using_identifier(name) for c in s.facts.calls)


def _moe_engine_calls(ctx: RuleContext):
    """deepspeed.initialize / Trainer calls of this file whose scope builds an MoE model."""
    for ec in ctx.program.engine_calls(ctx.source):
        if ec.kind == "init_inference":
            continue
        builds = ctx.program.moe_builds_in_scope(ctx.source, ec.call.scope)
        if builds:
            yield ec, builds


class MoEParamGroupsMissing(Rule):
    """A client optimizer for a model with DeepSpeed MoE layers whose param groups carry no `"moe"` marker.

    **Why it fails**: under ZeRO stage 1 or 2 (and the BF16 optimizer wrapper) DeepSpeed reduces expert
    gradients over the expert-data-parallel group and dense gradients over the data-parallel group, so it needs
    the expert parameters in their own param groups (`{"params": [...], "moe": True, "name": ...}`).
    `DeepSpeedZeroOptimizer._configure_moe_settings` asserts *"The model has moe layers, but None of the param
    groups are marked as MoE. Create a param group with 'moe' key set to True before creating optimizer"* at
    `deepspeed.initialize` — on every rank, after the job waited in the queue. The HF `Trainer` builds such a
    plain optimizer itself when the DeepSpeed config has no `optimizer` block (unless `create_optimizer` is
    overridden to split the groups). When DeepSpeed builds the optimizer from the config's `optimizer` block it
    converts the groups itself (`configure_moe_param_groups`, PR #5354), so that case is not flagged.
    """

    code = "DSL202"
    name = "moe-param-groups-missing"
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "client optimizer for an MoE model without `split_params_into_different_moe_groups_for_optimizer`"
    fix_advice = ("Build the optimizer from `split_params_into_different_moe_groups_for_optimizer("
                  "{'params': params, 'name': 'parameters'})` (deepspeed.moe.utils), or drop the client optimizer "
                  "and use the config's `optimizer` block.")
    autofix = 'unsafe: the client optimizer\'s params wrapped with `split_params_into_different_moe_groups_for_optimizer` (a parameter iterable as `{"params": ..., "name": "parameters"}`, a list of group dicts as it is), its import added once to the import block.'
    references = ("deepspeed/runtime/zero/stage_1_and_2.py _configure_moe_settings", "DeepSpeed PR #5354",
                  "MoE-LLaVA #17", "DeepSpeed #5794")
    versions = "All DeepSpeed versions with MoE (ZeRO stage 1/2, BF16 optimizer)."
    suppress_when = "The optimizer's groups are made MoE-aware somewhere dslint cannot see."
    triggers = MOE_TRIGGERS
    _HF = textwrap.dedent("""\
        import torch
        from deepspeed.moe.layer import MoE
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
        from transformers import Trainer, TrainingArguments

        class MoETrainer(Trainer):
            def create_optimizer(self):
                groups = split_params_into_different_moe_groups_for_optimizer(
                    {"params": [p for p in self.model.parameters() if p.requires_grad], "name": "p"})
                self.optimizer = torch.optim.AdamW(groups, lr=self.args.learning_rate)
                return self.optimizer

        def main():
            model = build_base_model()
            model.mlp = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
            args = TrainingArguments(output_dir="out", deepspeed="ds.json")
            trainer = {trainer}(model=model, args=args, train_dataset=data)  {mark}
            trainer.train()
        """)
    _HF_CFG = {"ds.json": '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}'}
    VALID = (
        ex("""\
        import deepspeed, torch
        from deepspeed.moe.layer import MoE
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
        model = Net()
        groups = split_params_into_different_moe_groups_for_optimizer({"params": model.parameters(), "name": "p"})
        optimizer = torch.optim.AdamW(groups, lr=1e-4)
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds.json")

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.moe = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
        """, files={"ds.json": '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}'}),
        ex("""\
        import deepspeed, torch
        from deepspeed.moe.layer import MoE
        model = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")
        """, files={"ds.json": '{"train_batch_size": 8, "optimizer": {"type": "AdamW"}, '
                               '"zero_optimization": {"stage": 2}}'}),
        Example(_HF.replace("{trainer}", "MoETrainer").replace("{mark}", ""), files=_HF_CFG),
    )
    INVALID = (
        Example(_HF.replace("{trainer}", "Trainer").replace("{mark}", "# expect: DSL202"), files=_HF_CFG),
        ex("""\
        import deepspeed, torch
        from deepspeed.moe.layer import MoE
        model = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # expect: DSL202
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds.json")
        """, files={"ds.json": '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}'}, fixed="""\
        import deepspeed, torch
        from deepspeed.moe.layer import MoE
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
        model = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
        optimizer = torch.optim.AdamW(split_params_into_different_moe_groups_for_optimizer({"params": model.parameters(), "name": "parameters"}), lr=1e-4)  # expect: DSL202
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds.json")
        """),
        ex('''\
        """Two optimizers built in one file: the import is added once."""
        import deepspeed, torch
        from deepspeed.moe.layer import MoE

        def build(model):
            opt = torch.optim.AdamW([{"params": model.parameters(), "name": "all"}], lr=1e-4)  # expect: DSL202
            return deepspeed.initialize(model=model, optimizer=opt, config="ds.json")

        def build_sgd(model):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: DSL202
            return deepspeed.initialize(model=model, optimizer=opt, config="ds.json")

        model = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
        build(model)
        build_sgd(model)
        ''', files={"ds.json": '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}'}, fixed='''\
        """Two optimizers built in one file: the import is added once."""
        import deepspeed, torch
        from deepspeed.moe.layer import MoE
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

        def build(model):
            opt = torch.optim.AdamW(split_params_into_different_moe_groups_for_optimizer([{"params": model.parameters(), "name": "all"}]), lr=1e-4)  # expect: DSL202
            return deepspeed.initialize(model=model, optimizer=opt, config="ds.json")

        def build_sgd(model):
            opt = torch.optim.SGD(split_params_into_different_moe_groups_for_optimizer({"params": model.parameters(), "name": "parameters"}), lr=0.1)  # expect: DSL202
            return deepspeed.initialize(model=model, optimizer=opt, config="ds.json")

        model = MoE(hidden_size=64, expert=torch.nn.Linear(64, 64), num_experts=4, ep_size=2)
        build(model)
        build_sgd(model)
        '''),
    )

    def wants(self, ctx: RuleContext) -> bool:
        return bool(ctx.program.moe().sites)

    def check(self, ctx: RuleContext):
        src, program = ctx.source, ctx.program
        for ec, builds in _moe_engine_calls(ctx):
            configs, stages = program.stages_for(src, ec.call)
            if stages and not stages & {1, 2, None}:
                continue        # stage 0 has no such assertion; stage 3 is DSL205
            severity = None if stages & {1, 2} else Severity.WARNING
            stage_text = (f"ZeRO stage {sorted(s for s in stages if s in (1, 2))[0]}" if stages & {1, 2}
                          else "ZeRO stage 1/2 (no DeepSpeed config with a known stage reaches this call)")
            scope = src.facts.functions.get(ec.call.scope)
            if ec.kind == "initialize":
                expr = ec.argument("optimizer")
                kind, node, where = program.classify_optimizer(src, scope, expr)
                if kind != PLAIN:
                    continue
                at, at_src = (node, where) if node is not None else (expr, src)
                trace = [Trace("the optimizer reaches deepspeed.initialize here", ec.call.node, src)]
            else:
                if any(c.has_optimizer for c in configs) or not configs:
                    continue
                opts = ec.call.keyword("optimizers")
                if opts is not None:
                    continue        # a prebuilt optimizer tuple: read by the initialize branch when visible
                if program.trainer_optimizer_has_moe_groups(ec.call.attr or "") is not False:
                    continue
                at, at_src, trace = ec.call.node, src, []
            yield Diagnostic(
                f"the model holds DeepSpeed MoE layers but this optimizer's param groups have no 'moe' marker: under "
                f"{stage_text} `deepspeed.initialize` asserts \"The model has moe layers, but None of the param "
                f"groups are marked as MoE\" on every rank. Build the groups with "
                f"`split_params_into_different_moe_groups_for_optimizer` (deepspeed.moe.utils)"
                + (" in an overridden `create_optimizer`, or add an `optimizer` block to the DeepSpeed config"
                   if ec.kind == "trainer" else "") + ".",
                at, source=at_src if at_src is not src else None, severity=severity,
                trace=trace + [Trace("MoE layers built here", builds[0].node, src)],
                fix=_moe_groups_fix(at_src, at) if ec.kind == "initialize" else None)


SPLIT = "split_params_into_different_moe_groups_for_optimizer"


def _moe_groups_fix(src, ctor) -> Optional[Fix]:
    """Unsafe: the optimizer's params wrapped with split_params_into_different_moe_groups_for_optimizer (a
    parameter iterable as one named group; a list of group dicts as it is), the import added once."""
    import libcst as cst

    from dslint.fixes.python import import_edit, replace_nodes
    if not isinstance(ctor, cst.Call):
        return None
    params = Program.optimizer_params_arg(ctor)
    if params is None:
        return None
    name = src.module.code_for_node(params)
    groups = (isinstance(params, (cst.List, cst.Tuple)) and params.elements
              and all(isinstance(e.value, cst.Dict) for e in params.elements)) or "group" in name.lower()
    if groups:
        new = cst.Call(func=cst.Name(SPLIT), args=[cst.Arg(value=params)])
    else:
        new = cst.Call(func=cst.Name(SPLIT), args=[cst.Arg(value=cst.Dict([
            cst.DictElement(cst.SimpleString('"params"'), params),
            cst.DictElement(cst.SimpleString('"name"'), cst.SimpleString('"parameters"'))]))])
    try:
        edits = replace_nodes(src, {params: new})
        imp = import_edit(src, "deepspeed.moe.utils", SPLIT)
    except Exception:
        return None
    if not edits:
        return None
    return Fix(description=f"Build the param groups with `{SPLIT}` (deepspeed.moe.utils); unsafe: the groups "
                           "change (expert parameters get their own).", applicability="unsafe",
               edits=edits + ([imp] if imp else []))


# collators whose `padding` takes "max_length" with a `max_length=`
_MAX_LENGTH_COLLATORS = ("DataCollatorWithPadding", "DataCollatorForSeq2Seq", "DataCollatorForTokenClassification")


def _max_length_fix(src, call) -> Optional[Fix]:
    """Unsafe: `padding="max_length"` with the length the call already names (`max_length=`), else the
    tokenizer's `model_max_length` when the tokenizer is the callee or the collator's tokenizer argument."""
    import libcst as cst

    from dslint.fixes.python import replace_nodes, with_keyword
    if not isinstance(call, cst.Call):
        return None
    code = src.module.code_for_node
    func = code(call.func)
    last = func.rpartition(".")[2]
    has_max = any(a.keyword is not None and a.keyword.value == "max_length" for a in call.args)
    length = None
    if not has_max:
        if last in _MAX_LENGTH_COLLATORS:
            tok = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "tokenizer"),
                       None) or next((a.value for a in call.args if a.keyword is None and not a.star), None)
            if isinstance(tok, (cst.Name, cst.Attribute)):
                length = f"{code(tok)}.model_max_length"
        elif "token" in last.lower() and isinstance(call.func, (cst.Name, cst.Attribute)):
            length = f"{func}.model_max_length"
        if length is None:
            return None
    elif last not in _MAX_LENGTH_COLLATORS and "token" not in last.lower():
        return None
    new = with_keyword(call, "padding", cst.SimpleString('"max_length"'))
    if length is not None:
        new = with_keyword(new, "max_length", cst.parse_expression(length))
    try:
        edits = replace_nodes(src, {call: new})
    except Exception:
        return None
    if not edits:
        return None
    return Fix(description="Pad to a fixed length: padding=\"max_length\"" + (f", max_length={length}" if length else "")
               + "; unsafe: batches get longer (and a tokenizer without a real model_max_length pads to it).",
               applicability="unsafe", edits=edits)


class EpSizeMismatch(Rule):
    """Expert-parallel size that cannot be laid out: `num_experts % ep_size != 0`, `ep_size` larger than the
    world size, or a world size that `ep_size` does not divide.

    **Why it fails**: `MoE.__init__` asserts `num_experts % ep_size == 0` ("Number of experts should be
    divisible by expert parallel size") and `groups._create_expert_and_data_parallel` asserts the data-parallel
    world size is divisible by `ep_size` when `deepspeed.initialize` creates the expert groups — on every rank,
    after the job was queued. Values are read from literals, module constants, argparse defaults, the values a
    launcher line of the same run passes (`--ep-world-size 4`), `--num_gpus`/`--num_nodes`/`--nproc-per-node`
    and `--world-size`; unknown values are not guessed. Runs that pass an `mpu` (tensor/pipeline parallel)
    are checked for `num_experts % ep_size` only.
    """

    code = "DSL203"
    name = "ep-size-mismatch"
    severity = Severity.ERROR
    summary = "`num_experts % ep_size`, `world_size % ep_size` or `ep_size > world_size`"
    fix_advice = "Pick ep_size dividing both num_experts and the (data-parallel) world size."
    references = ("deepspeed/moe/layer.py MoE.__init__", "deepspeed/utils/groups.py _create_expert_and_data_parallel")
    versions = "All DeepSpeed versions with MoE."
    suppress_when = "Never: DeepSpeed refuses the layout."
    triggers = MOE_TRIGGERS
    VALID = (
        ex("""\
        from deepspeed.moe.layer import MoE
        layer = MoE(hidden_size=64, expert=expert, num_experts=8, ep_size=4)
        """, world_size=8),
    )
    INVALID = (
        """\
        from deepspeed.moe.layer import MoE
        layer = MoE(hidden_size=64, expert=expert, num_experts=6, ep_size=4)  # expect: DSL203
        """,
        ex("""\
        from deepspeed.moe.layer import MoE
        layer = MoE(hidden_size=64, expert=expert, num_experts=8, ep_size=4)  # expect: DSL203
        """, world_size=2),
    )

    def wants(self, ctx: RuleContext) -> bool:
        return "MoE" in ctx.source.text

    def check(self, ctx: RuleContext):
        program = ctx.program
        with_mpu = any(ec.kind == "initialize" and ec.call.keyword("mpu") is not None
                       for src in program.mentioning("initialize", "init_inference") for ec in program.engine_calls(src))
        world = program.world_size_for(ctx.source)
        for site in program.moe().sites:
            if site.src is not ctx.source:
                continue
            ne, ep = site.get("num_experts"), site.get("ep_size")
            if not ep.known or not isinstance(ep.value, int) or isinstance(ep.value, bool) or ep.value < 1:
                continue
            at = site.arg_nodes.get("ep_size", site.call.node)
            src_note = "" if ep.origin in ("literal", "DeepSpeed default") else f" (ep_size from {ep.origin})"
            if ne.known and isinstance(ne.value, int) and ne.value % ep.value:
                yield Diagnostic(f"num_experts={ne.value} is not divisible by ep_size={ep.value}{src_note}: "
                                 f"`MoE.__init__` asserts \"Number of experts ({ne.value}) should be divisible by "
                                 f"expert parallel size ({ep.value})\" on every rank.", at)
                continue
            if world and not with_mpu and ep.value > 1:
                if ep.value > world:
                    yield Diagnostic(f"ep_size={ep.value}{src_note} is larger than the world size {world}: the "
                                     f"expert-parallel group cannot be formed and `deepspeed.initialize` fails in "
                                     f"`_create_expert_and_data_parallel` on every rank.", at)
                elif world % ep.value:
                    yield Diagnostic(f"world size {world} is not divisible by ep_size={ep.value}{src_note}: "
                                     f"`deepspeed.initialize` asserts in `_create_expert_and_data_parallel` on "
                                     f"every rank.", at)


def _gating_varies(site: MoESite, version) -> tuple[Optional[bool], str]:
    """(does the all_to_all size follow the local token count, the capacity arithmetic in words), by DeepSpeed's
    `sharded_moe.py` at each release (read at the tags): with drop_tokens=False the capacity is the largest expert
    count all-reduced with MAX -- over the world group up to 0.14.0, over the layer's `ep_group` (the all_to_all's
    group) from 0.14.1 -- and k=1 then clamps it to the local token count S (0.14.1 on); top2gating honours
    drop_tokens only from 0.14.0 (before, it always computes C from S); top-k > 2 (0.15.0 on) does not clamp."""
    k, drop = site.get("k"), site.get("drop_tokens")
    cf, minc = site.get("capacity_factor"), site.get("min_capacity")
    cf_t = f"{cf.value}" if cf.known else "capacity_factor"
    mc_t = f"{minc.value}" if minc.known else "min_capacity"
    if not drop.known:
        return None, ("drop_tokens is not known statically; with drop_tokens=True the capacity is computed from the "
                      "local token count")
    if drop.value is False:
        kv = k.value if k.known and isinstance(k.value, int) else None
        clamp = ("with k=1, drop_tokens=False the capacity is all-reduced to the largest expert count and then "
                 "clamped to the local token count S (DeepSpeed ≥ 0.14.1), so a rank with fewer tokens sends a "
                 "smaller [E, C, M] buffer")
        old_top2 = ("with k=2 DeepSpeed < 0.14.0's top2gating ignores drop_tokens and computes the capacity from the "
                    "local token count S")
        if kv is not None and kv >= 3:
            return False, ""
        if kv == 2:
            if version is None:
                return None, old_top2 + " (the DeepSpeed version is unknown)"
            return (True, old_top2) if version < (0, 14, 0) else (False, "")
        if kv == 1:
            if version is not None and version < (0, 14, 1):
                return False, ""
            return True, clamp
        # k unknown: uniform only where neither k=1 nor k=2 can make it vary
        if version is not None and version < (0, 14, 1) and version >= (0, 14, 0):
            return False, ""
        return None, ("drop_tokens=False, but k is not known statically: with k=1 the capacity is all-reduced and "
                      "then clamped to the local token count (DeepSpeed ≥ 0.14.1), with k=2 top2gating honours "
                      "drop_tokens only from 0.14.0")
    factor = f"{cf_t}·{k.value}" if k.known and k.value >= 2 else cf_t
    kt = k.value if k.known else "k"
    return True, (f"with drop_tokens=True each rank computes capacity C = max(ceil(S / num_experts · {factor}), "
                  f"{mc_t}) from its own token count S with no collective, so ranks with different S send "
                  f"[E, C, M] buffers of different sizes" if k.known else
                  f"with drop_tokens=True (k={kt}) each rank computes its capacity C from its own token count S with "
                  f"no collective, so ranks with different S send [E, C, M] buffers of different sizes")


class MoETokenCountVaries(Rule):
    """Expert parallelism with batches padded per rank (dynamic padding), where the MoE all_to_all size follows
    each rank's local token count.

    **Why it hangs**: `_AllToAll` calls `all_to_all_single(empty_like(x), x, group=ep_group)` without split
    sizes, assuming every rank of the expert-parallel group holds the same `[E, C, M]` buffer. The capacity C
    comes from the local token count S (batch × padded length): with `drop_tokens=True` (the default)
    `C = max(ceil(S / E · capacity_factor · k), min_capacity)` with no collective; with `k=1, drop_tokens=False`
    (DeepSpeed ≥ 0.14.1) the capacity is all-reduced to the max and then clamped to the local S. Dynamic padding
    (`DataCollatorWithPadding`, `padding="longest"`, `pad_sequence`, `group_by_length`) gives each rank a
    different S, so the all_to_all sizes disagree: NCCL runs on with garbage until a later collective hangs
    (DeepSpeed #5794 "Expert parallel hangs at the last MoE layer"); gloo aborts.

    With `drop_tokens=False` the capacity is the largest expert count all-reduced with MAX -- over the world group
    up to 0.14.0, over the layer's `ep_group` from 0.14.1 --; top2gating honours `drop_tokens` only from 0.14.0.
    A gate whose forward the project replaces with its own gating (`layer.deepspeed_moe.gate.forward =
    make_forward(layer.deepspeed_moe.gate)`) is judged on that code: clean where every capacity that sizes the
    dispatch buffer (a `one_hot`'s `num_classes`, directly or through a helper) comes from a MAX all_reduce over
    the world on the path the layer's `drop_tokens` takes, flagged where it follows the local token count.

    Safe, not flagged: fixed-length padding (`padding="max_length"`), a pad length all-reduced to the max in the
    padding function, `ep_size=1`, top-k ≥ 2 with `drop_tokens=False` (capacity all-reduced, no clamp; k=2 from
    0.14.0), k=1 with `drop_tokens=False` before 0.14.1, a project gate that all-reduces the capacity, and texts
    proven the same on every rank (the rank-uniformity lattice says so and every caller of the padding function
    is seen: an evaluation where every rank scores the same prompt file, no rank split).
    """

    code = "DSL204"
    needs_ranks = True
    name = "moe-token-count-varies"
    evidence_needed = ("the DeepSpeed MoE layer of the model the padded batches feed -- built in the padding "
                       "file, in a file it imports, in a file of a launch unit that reaches it, or in a file that "
                       "imports both (the model file and the data file of one trainer) -- with its ep_size and "
                       "gating settings, the engine and the launcher line. An MoE layer only defined elsewhere in "
                       "the package (a test helper's model beside a test that trains a dense HF model), or held by "
                       "a class no file of the program constructs, subclasses or names (an evaluation class "
                       "registered with an Auto factory the program never asks for a model), is not evidence: the "
                       "finding is then unproven, hidden unless `--show-unproven`; the program's own layers with "
                       "a known `ep_size` of 1 (`--ep_size` left at its default by every launch) are clean.")
    evidence_complete = ("a DeepSpeed MoE layer in the program the padded batches feed (built in the file, in what "
                         "it imports, in a launch unit reaching it, or in a file importing both)")
    unproven_when = ("the only MoE layers seen are outside that program (defined elsewhere in the package, not in "
                     "the model the engine holds)",)
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "expert parallelism with per-rank token counts that differ (dynamic padding) and local capacity"
    fix_advice = ("Pad every batch to a fixed length (`padding=\"max_length\"`, `max_length=...`) or all-reduce the "
                  "pad length to the max across ranks; or use k≥2 with drop_tokens=False.")
    autofix = 'unsafe: `padding="max_length"` on the tokenizer call or collator, with the `max_length=` the call gives, else the tokenizer\'s `model_max_length` (the collator\'s tokenizer argument, or the called tokenizer).'
    references = ("DeepSpeed #5794", "DeepSpeed #6809", "deepspeed/moe/sharded_moe.py top1gating/top2gating")
    versions = ("All versions with drop_tokens=True; k=1, drop_tokens=False since 0.14.1 (the clamp); k=2, "
                "drop_tokens=False before 0.14.0 (top2gating ignored drop_tokens). A gate patched with the project's "
                "own gating is judged on that code.")
    suppress_when = "Every rank's batch has the same number of tokens by construction."
    triggers = MOE_TRIGGERS + ("pad",)
    VALID = (
        """\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4)
        collator = DataCollatorWithPadding(tok, padding="max_length", max_length=512)
        """,
        """\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4, k=2, drop_tokens=False)
        collator = DataCollatorWithPadding(tok)
        """,
        ex("""\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4, k=1, drop_tokens=False)
        collator = DataCollatorWithPadding(tok, padding="longest")
        """, deepspeed_version="0.14.0"),
    )
    INVALID = (
        ex("""\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4, k=2, drop_tokens=False)
        collator = DataCollatorWithPadding(tok, padding="longest")  # expect: DSL204
        """, deepspeed_version="0.13.5", fixed="""\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4, k=2, drop_tokens=False)
        collator = DataCollatorWithPadding(tok, padding="max_length", max_length=tok.model_max_length)  # expect: DSL204
        """),
        ex("""\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4)
        collator = DataCollatorWithPadding(tok, padding="longest")  # expect: DSL204
        """, fixed="""\
        from deepspeed.moe.layer import MoE
        from transformers import DataCollatorWithPadding
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4)
        collator = DataCollatorWithPadding(tok, padding="max_length", max_length=tok.model_max_length)  # expect: DSL204
        """),
        ex("""\
        from deepspeed.moe.layer import MoE
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4)
        def collate(tokenizer, texts):
            return tokenizer(texts, padding=True, max_length=1024, truncation=True)  # expect: DSL204
        """, fixed="""\
        from deepspeed.moe.layer import MoE
        layer = MoE(hidden_size=64, expert=expert, num_experts=4, ep_size=4)
        def collate(tokenizer, texts):
            return tokenizer(texts, padding="max_length", max_length=1024, truncation=True)  # expect: DSL204
        """),
    )

    def wants(self, ctx: RuleContext) -> bool:
        text = ctx.source.text
        return ("pad" in text or "group_by_length" in text) and bool(ctx.program.moe().sites)

    def check(self, ctx: RuleContext):
        facts = ctx.program.moe()
        if not facts.sites:
            return
        pads = ctx.program.dynamic_padding_sites(ctx.source)
        if not pads:
            return
        version = _ds_version(ctx)
        chosen = None
        from dslint.rules.evidence import moe_sites_reaching
        # the layers of the program this file runs in first (issue 30: the evidence says whether one reaches it)
        for site in moe_sites_reaching(ctx.program, ctx.source, facts.sites) or facts.sites:
            ep = site.get("ep_size")
            if ep.known and isinstance(ep.value, int) and ep.value <= 1:
                continue
            gating = ctx.program.moe_patched_gating(site)
            if gating is not None:
                # the gate runs the project's own gating (issue 30, capacity-allreduced-no-drop): its code, not
                # DeepSpeed's release facts, says whether the capacity is all-reduced
                varies = None if gating.uniform is None else not gating.uniform
                why = "" if gating.uniform else gating.why
            else:
                varies, why = _gating_varies(site, version)
            if varies is False:
                continue
            certain = ep.known and varies is True
            if chosen is None or (certain and not chosen[0]):
                chosen = (certain, site, why)
        if chosen is None:
            return
        certain, site, why = chosen
        ep = site.get("ep_size")
        ep_text = f"ep_size={ep.value}" if ep.known else "ep_size (unknown statically; flagged in case it is > 1)"
        for pad in pads:
            if _same_texts_everywhere(ctx, pad):
                continue
            yield Diagnostic(
                f"{pad.what}, so the number of tokens S differs across ranks; the MoE layers run with {ep_text} and "
                f"{why}. The un-split `all_to_all_single` then disagrees in size across the expert-parallel group: "
                f"NCCL corrupts data and hangs at a later MoE layer (DeepSpeed #5794). Pad to a fixed length "
                f"(`padding=\"max_length\"`) or all-reduce the pad length to the max across ranks.",
                pad.node, severity=None if certain else Severity.WARNING,
                trace=[Trace(f"MoE layer: {_site_note(site)}", site.call.node, site.src)],
                fix=_max_length_fix(ctx.source, pad.node))


class MoEZero3(Rule):
    """A model with DeepSpeed-native MoE layers initialised under ZeRO stage 3.

    **Why it fails**: native `deepspeed.moe.layer.MoE` needs expert-data-parallel gradient reduction that the
    ZeRO-3 optimizer does not implement. DeepSpeed 0.19.8 raises *"Native DeepSpeed MoE is not supported with
    ZeRO Stage 3. Use AutoEP or choose ZeRO stage 1/2."* (`_validate_zero3_moe_compatibility`); older versions
    assert *"MoE not supported with Stage 3"* — in `deepspeed.initialize`, on every rank, after queueing.
    """

    code = "DSL205"
    name = "moe-zero3"
    severity = Severity.ERROR
    summary = "DeepSpeed-native MoE layers with ZeRO stage 3"
    fix_advice = "Use ZeRO stage 1 or 2 with native MoE (or DeepSpeed AutoEP / HF sparse blocks with leaf modules)."
    references = ("deepspeed/runtime/engine.py _validate_zero3_moe_compatibility",)
    versions = "All DeepSpeed versions."
    suppress_when = "Never."
    triggers = MOE_TRIGGERS
    VALID = (
        ex("""\
        import deepspeed
        from deepspeed.moe.layer import MoE
        model = MoE(hidden_size=64, expert=expert, num_experts=4)
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")
        """, files={"ds.json": '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}'}),
    )
    INVALID = (
        ex("""\
        import deepspeed
        from deepspeed.moe.layer import MoE
        model = MoE(hidden_size=64, expert=expert, num_experts=4)
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")  # expect: DSL205
        """, files={"ds.json": '{"train_batch_size": 8, "zero_optimization": {"stage": 3}}'}),
    )

    def wants(self, ctx: RuleContext) -> bool:
        return bool(ctx.program.moe().sites)

    def check(self, ctx: RuleContext):
        for ec, builds in _moe_engine_calls(ctx):
            configs, stages = ctx.program.stages_for(ctx.source, ec.call)
            if 3 in stages:
                cfg = next(c for c in configs if c.zero_stage == 3)
                yield Diagnostic(
                    f"the model holds DeepSpeed-native MoE layers and the config {cfg.origin} selects ZeRO stage 3: "
                    f"`deepspeed.initialize` raises \"Native DeepSpeed MoE is not supported with ZeRO Stage 3\" "
                    f"(older versions: \"MoE not supported with Stage 3\"). Use ZeRO stage 1 or 2.",
                    ec.call.node, trace=[Trace("MoE layers built here", builds[0].node)])


class Zero3DataDependentExperts(Rule):
    """An HF-style sparse MoE block that runs only the experts that received tokens, trained under ZeRO-3
    without making it a ZeRO-3 leaf module.

    **Why it hangs**: ZeRO-3 all-gathers a submodule's partitioned parameters when its forward starts (hooks per
    submodule) and prefetches by the recorded module order. A block that loops only over routed experts
    (`for expert_idx in expert_hit:` or `if top_x.shape[0] == 0: continue`) calls different experts on different
    ranks, so ranks issue different all-gathers and the collective sequence diverges: a hang or a wrong fetch
    (DeepSpeed #5066, #7461). `deepspeed.utils.set_z3_leaf_modules(model, [Block])` or the config's
    `zero_optimization.leaf_module` makes the whole block one unit gathered on every rank. DeepSpeed ≥ 0.18.0
    does this by default for `MixtralSparseMoeBlock`, `Qwen2MoeSparseMoeBlock` and `Qwen3MoeSparseMoeBlock`
    (unless the config's `leaf_module.classes` replaces the defaults).

    **Library models**: a transformers MoE model loaded by hub id (`AutoModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-30B-A3B")`), by class (`MixtralForCausalLM`, `DbrxConfig`) or by `model_type`
    (`AutoConfig.for_model("qwen3_moe")`) is looked up in a table of families (`dslint/program/models/moe_library.py`,
    each row citing the transformers/DeepSpeed source it was read from). In transformers 4.x the Mixtral/Qwen/
    DeepSeek-V3/OLMoE/PhiMoE/Jamba/Qwen3-Next blocks call `self.experts[i]` only for hit experts; transformers
    ≥ 5.0 fuses each family's experts into one module of 3-D parameters (no hazard), except DBRX (calls its
    `mlp` once per hit expert) and Switch Transformers / NLLB-MoE (a `ModuleDict` of experts, only hit ones
    run). The finding is at the loading call, when the run's config selects ZeRO-3, the DeepSpeed version
    (option, pin, installed) predates the block's default (0.18.0 for Mixtral/Qwen2-MoE/Qwen3-MoE, never for
    the others) and no `set_z3_leaf_modules` or `leaf_module.classes` names the block. The transformers
    version comes from a pin in the project, else the installed distribution; unknown: a warning. A model id
    held in a variable is not followed.
    """

    code = "DSL206"
    needs_ranks = True
    name = "zero3-data-dependent-experts"
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "sparse MoE block running only routed experts under ZeRO-3 without leaf modules"
    fix_advice = ("Call `deepspeed.utils.set_z3_leaf_modules(model, [YourSparseMoeBlock])` before "
                  "`deepspeed.initialize`, or list the class in `zero_optimization.leaf_module.classes`.")
    references = ("DeepSpeed #5066", "DeepSpeed #7461", "DeepSpeed PR #7604", "deepspeed/utils/z3_leaf_module.py")
    versions = ("All DeepSpeed versions; Mixtral/Qwen2-MoE/Qwen3-MoE blocks are leaves by default since 0.18.0 "
                "(PR #7604; checked in 0.19.8's `leaf_module_config.py`). Library models: transformers 4.x "
                "blocks (ModuleList experts); in transformers ≥ 5.0 only DBRX, Switch Transformers and "
                "NLLB-MoE (checked in 5.24.0).")
    suppress_when = "Every expert runs on every rank in every step (the loop never skips an expert)."
    triggers = ("expert", "from_pretrained", "for_model", "from_config", "Config(")
    _BLOCK = textwrap.dedent("""\
        import torch
        from torch import nn

        class SparseMoeBlock(nn.Module):
            def __init__(self, dim, n):
                super().__init__()
                self.gate = nn.Linear(dim, n)
                self.experts = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n)])

            def forward(self, x):
                routing = self.gate(x).argmax(-1)
                out = torch.zeros_like(x)
                for i in range(len(self.experts)):  {mark}
                    idx = torch.where(routing == i)[0]
                    if idx.numel() == 0:
                        continue
                    out[idx] = self.experts[i](x[idx])
                return out
        """)
    _CFG = '{"train_batch_size": 8, "zero_optimization": {"stage": 3}}'
    _LIB = textwrap.dedent("""\
        import deepspeed
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained("{id}"){mark}
        {leaf}engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")
        """)
    VALID = (
        ex(_BLOCK.replace("{mark}", "") + "\nimport deepspeed\ndeepspeed.utils.set_z3_leaf_modules(model, "
                "[SparseMoeBlock])\n", files={"ds.json": _CFG}),
        ex(_BLOCK.replace("{mark}", ""), files={"ds.json": '{"zero_optimization": {"stage": 2}}'}),
        ex(_LIB.format(id="Qwen/Qwen3-30B-A3B", mark="", leaf=""), deepspeed_version="0.19.8",
           files={"ds.json": _CFG}),
        ex(_LIB.format(id="Qwen/Qwen3-30B-A3B", mark="", leaf="deepspeed.utils.set_z3_leaf_modules(model, "
                       "[Qwen3MoeSparseMoeBlock])\n"), deepspeed_version="0.17.5",
           files={"ds.json": _CFG}),
    )
    INVALID = (
        ex(_BLOCK.replace("{mark}", "# expect: DSL206"), files={"ds.json": _CFG}),
        ex(_LIB.format(id="databricks/dbrx-instruct", mark="  # expect: DSL206", leaf=""),
           deepspeed_version="0.19.8", files={"ds.json": _CFG}),
    )

    def _library_models(self, ctx: RuleContext):
        """A transformers MoE model loaded by id / class / `model_type` (the table in
        `dslint.program.models.moe_library`) whose block is data-dependent in the run's transformers version and not
        a leaf: no `set_z3_leaf_modules`/`leaf_module.classes` naming it, DeepSpeed older than its default."""
        src, program = ctx.source, ctx.program
        if "from_pretrained" not in src.text and "for_model" not in src.text and "from_config" not in src.text \
                and "Config(" not in src.text or not program.mentions_library_moe(src.text):
            return
        seen: set[str] = set()
        for call in src.facts.calls:
            fam, how = program.library_moe_family(call)
            if fam is None or fam.family in seen:
                continue
            tf = program.version(program.transformers_version)
            ds = _ds_version(ctx)
            dd = program.library_moe_data_dependent(fam)
            if dd is False:
                continue
            configs, stages = program.stages_for(src)
            zero3 = [c for c in configs if c.zero_stage == 3]
            if not zero3:
                return
            named, unreadable = program.leaf_modules()
            if unreadable or fam.block in named:
                continue
            listed = [_listed_leaf_classes(c) for c in zero3]       # None: the defaults apply
            if any(names is not None and fam.block in names for names in listed):
                continue                     # the config lists the block itself
            replaced = any(names is not None for names in listed)
            if fam.default_leaf_since and not replaced and (ds is None or ds >= fam.default_leaf_since):
                continue
            seen.add(fam.family)
            since = (f"DeepSpeed ≥ {_version_text(fam.default_leaf_since)} makes it a leaf by default (PR #7604); "
                     f"this run uses {program.deepspeed_version}" + (" and the config's `leaf_module.classes` "
                                                                     "replaces the defaults" if replaced else "")
                     if fam.default_leaf_since else "no DeepSpeed version makes it a leaf by default")
            tf_text = (f"transformers {program.transformers_version}" if tf is not None
                       else "transformers < 5.0 (the version of this run is unknown)")
            yield Diagnostic(
                f"{how} loads a {fam.family} model whose sparse block `{fam.block}` runs only the experts that "
                f"received tokens ({tf_text}); the config {zero3[0].origin} selects ZeRO stage 3, so each rank "
                f"all-gathers a different set of expert parameters and the collective sequence diverges "
                f"(DeepSpeed #5066, #7461). {since[0].upper() + since[1:]}. Call "
                f"`deepspeed.utils.set_z3_leaf_modules(model, [{fam.block}])` before `deepspeed.initialize`, or "
                f"list `{fam.block}` in `zero_optimization.leaf_module.classes`.",
                call.node, severity=None if dd else Severity.WARNING)

    def check(self, ctx: RuleContext):
        yield from self._library_models(ctx)
        program = ctx.program
        if "ModuleList" not in ctx.source.text and "ModuleDict" not in ctx.source.text:
            return                  # no sparse block of this file (`sparse_blocks` reads only such files)
        blocks = [b for b in program.sparse_blocks() if b.src is ctx.source]
        if not blocks:
            return
        stages = program.run_stages()
        if 3 not in stages:
            return
        named, unreadable = program.leaf_modules()
        if unreadable:
            return
        version = _ds_version(ctx)
        cfg_leaves: list[Optional[set[str]]] = []
        for js in program.json_configs:
            view = program.config_view(js)
            if view.zero_stage == 3:
                cfg_leaves.append(program.config_leaf_classes(view))
        for block in blocks:
            if block.class_name in named:
                continue
            covered_by_cfg = any(c is not None and (block.class_name in c or len(c) > len(DEFAULT_LEAF_CLASSES))
                                 for c in cfg_leaves)
            if covered_by_cfg:
                continue
            default = block.class_name in DEFAULT_LEAF_CLASSES and all(c is None or block.class_name in c
                                                                      for c in cfg_leaves)
            if default and (version is None or version >= (0, 18, 0)):
                continue
            extra = (f" DeepSpeed ≥ 0.18.0 makes `{block.class_name}` a leaf by default; this run uses "
                     f"{program.deepspeed_version}." if default else "")
            yield Diagnostic(
                f"`{block.class_name}` runs only the experts that received tokens ({block.reason}); under ZeRO "
                f"stage 3 each rank then all-gathers a different set of expert parameters and the collective "
                f"sequence diverges (DeepSpeed #5066, #7461). Make the block a ZeRO-3 leaf module: "
                f"`deepspeed.utils.set_z3_leaf_modules(model, [{block.class_name}])` or "
                f"`zero_optimization.leaf_module.classes`.{extra}", block.loop)


def _listed_leaf_classes(config) -> Optional[set[str]]:
    """The class names a config's `zero_optimization.leaf_module` lists (they replace DeepSpeed's defaults),
    plus its `names`/`name_suffixes`; None when it lists no `classes` (the defaults apply)."""
    section = config.get("zero_optimization", "leaf_module")
    if not isinstance(section, dict) or "classes" not in section:
        return None
    return Program.config_leaf_classes(config)


def _version_text(v) -> str:
    return ".".join(str(n) for n in v)


def prepare(program: Program) -> None:
    """Whole-project analyses of this family, computed once before files are dealt to worker processes."""
    if program.moe().sites:
        program.run_stages()
        program.leaf_modules()
    program.sparse_blocks()
