"""DSL3xx: trainable parameters — left out of the optimizer, never used, used only on some ranks' paths,
or (un)frozen after `deepspeed.initialize`.

Facts: `dslint.program.models.modules` (module classes, created attributes, freezing), `forward_paths`
(which attributes `forward` reaches on which paths), `param_groups` (name-filtered optimizer groups).
"""

from __future__ import annotations

import re
import textwrap
from typing import Optional

import libcst as cst

from dslint.program.query import (ForwardPaths, ModelFacts, ModuleClass, Program, TooManyPaths, deciding_condition,
                                  divergent)
from dslint.sources.cstwalk import visit as cst_visit
from dslint.findings import Fix, Severity
from dslint.rules.params_patched import constant_loss_diagnostics, patched_forward_diagnostics
from dslint.rules.base import Diagnostic, Example, Rule, RuleContext, Trace

PARAM_TRIGGERS = ("Module", "Parameter", "PreTrained", "ForCausalLM", "requires_grad", "named_parameters",
                  "transformers", "torch")


def ex(source: str, **kw) -> Example:
    return Example(textwrap.dedent(source).lstrip("\n"), **kw)


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _roots(facts: ModelFacts, cls: ModuleClass, program: Optional[Program] = None) -> list[tuple[ModuleClass, bool]]:
    """(class whose forward may reach `cls`'s attributes, is it of cls's own family). A subclass that the run
    builds only where nothing trains (chosen by a flag that only generation scripts set) is not one: its
    forward's paths produce no gradients to reduce."""
    subs = [s for s in facts.subclasses(cls)
            if program is None or s is cls or not program.built_only_where_untrained(s)]
    family = list(dict.fromkeys([*cls.mro(), *subs]))
    out = [(c, True) for c in family]
    seen = set(id(c) for c in family)
    # containers of objects that may be a `cls`: creators of cls or of a subclass (`containers` takes both).
    # Not of its bases: a creator of a base builds that base or a sibling of cls, whose attributes are not
    # cls's -- and a library base (PreTrainedModel) has every model of a package as subclasses.
    frontier = [cls]
    for _ in range(3):
        nxt = []
        for c in frontier:
            for container in facts.containers(c):
                # `containers` matches creators by the constructor's short name: one whose constructions all
                # resolve, through its file's imports and definitions, to another class of that name (another
                # file's `LLaMALayer`) never holds a `c`, and its forward's paths are not `cls`'s
                if program is not None and program.builds_another(container, c):
                    continue
                if id(container) not in seen:
                    seen.add(id(container))
                    nxt.append(container)
                    out.append((container, False))
        frontier = nxt
    return out


# attributes a transformers model's own forward reads (its sub-modules): a subclass that assigns one replaces a
# library sub-module, which the base's `super().forward(...)` then uses on every path
LIBRARY_ATTRS = frozenset({
    "model", "lm_head", "transformer", "embed_tokens", "layers", "norm", "rotary_emb", "language_model",
    "vision_tower", "vision_model", "visual", "multi_modal_projector", "encoder", "decoder", "embeddings",
    "pooler", "classifier", "score", "wte", "wpe", "h", "ln_f", "shared", "final_logits_bias", "qa_outputs",
    "embed_out", "gpt_neox", "bert", "roberta", "dropout", "lm_head_bias", "loss_fct", "vision_embed_tokens",
    "connector", "mlp1", "vision_encoder", "projector", "image_newline", "text_model", "audio_tower"})


def _library_reachable(root: ModuleClass, names: frozenset) -> frozenset:
    """Of `names`, those a library base's forward may read on every path: library attribute names, and
    attributes that a method of the run's classes spells which the run itself never calls (an override the
    library may call: `get_input_embeddings`, `_update_causal_mask`, a `loss_function`); the methods the run
    calls (`self.encode_images(...)`) are inlined into forward's paths."""
    out = set(names & LIBRARY_ATTRS)
    rest = frozenset(names - out)
    if rest:
        mro = root.mro()
        for cls in mro:
            if not cls.mentions(rest):
                continue
            for mname in cls.methods - {"forward", "__init__"}:
                if any(re.search(r"\.%s\s*\(" % re.escape(mname), c.src.text[c.span[0]:c.span[1]]) for c in mro):
                    continue
                code = _code(cls.info.methods[mname].node)
                out |= {n for n in rest if _word_in(n, code)}
    return frozenset(out)


def _word_in(name: str, code: str) -> bool:
    return re.search(r"\b%s\b" % re.escape(name), code) is not None


def conditional_uses(ctx: RuleContext) -> list[tuple]:
    """(attr, root class, condition, path pair) for trainable attributes of this file's classes whose use
    depends on data; memoised per file."""
    program, src = ctx.program, ctx.source

    def build():
        facts = program.models()
        out = []
        excluded = program.optimizer_excluded()
        for cls in facts.classes_in(src):
            attrs = [a for a in cls.attrs.values() if facts.trainable(a) and id(a) not in excluded]
            if not attrs:
                continue
            names = frozenset(a.name for a in attrs)
            reported: set[str] = set()
            for root, own in _roots(facts, cls, program):
                if not root.has_method("forward"):
                    continue
                shadowed = set() if own else {n for c in root.mro() for n in c.attrs}
                interesting = frozenset(names - shadowed - reported)
                # the paths inline only `self.<method>()` of the root's own classes: a root whose classes never
                # spell any of the names cannot use them on any path (decided without parsing its file)
                if not interesting or not any(c.mentions(interesting) for c in root.mro()):
                    continue
                if not own:
                    # a holder's own reach into the attribute (a cache built from an optional input, layer by
                    # layer) is an extra use where every call of its forward runs `cls`'s forward, which uses the
                    # attribute on every path (`always_run`)
                    interesting = frozenset(n for n in interesting
                                            if not program.used_on_every_call(root, cls, n))
                    if not interesting:
                        continue
                found = root.find_method("forward")
                if own and any(c.external_bases for c in root.mro()) and "super(" in _code(found[1].node):
                    # the library base's forward reads its own attributes (`model`, `lm_head`, ...) on every path,
                    # and the run's attributes only through methods the run overrides for it
                    interesting = interesting - _library_reachable(root, interesting)
                    if not interesting:
                        continue
                walker = ForwardPaths(root, names - shadowed, program.view)
                uniform = program.uniform_inputs(root)
                fed = None              # the walk with only the inputs some call feeds from the batch left as data
                try:
                    paths = walker.root(found[1].node, uniform, program.caller_keys(root))
                    if any(divergent(paths, a.name) is not None for a in attrs if a.name in interesting and
                           a.name not in reported):
                        # only where a use diverges: the optional inputs every call of the run sets alike (a
                        # literal per call site, a setting, none passed at all) are no batch data either
                        by_callers = program.inputs_set_by_callers(root) - uniform
                        if by_callers:
                            walker = ForwardPaths(root, names - shadowed, program.view)
                            paths = walker.root(found[1].node, uniform | by_callers, program.caller_keys(root))
                        if _trained_across_ranks(program):
                            # (a model file checked alone: nothing calls it, the config is its evidence)
                            fed = _fed_walk(program, root, found[1].node, names - shadowed, uniform | by_callers,
                                            walker, paths)
                except (TooManyPaths, RecursionError):
                    continue
                for attr in attrs:
                    if attr.name in reported or attr.name in shadowed or attr.name not in interesting:
                        continue
                    pair = divergent(paths, attr.name)
                    if pair is None:
                        continue
                    cond = deciding_condition(walker, pair)
                    fed_clue = None
                    if fed is not None and cond is not None:
                        fed_clue, fed_cond = _fed_evidence(fed, attr.name, root, found[1].node, cond)
                        cond = fed_cond or cond
                    if cond is None or program.never_created(attr):
                        continue            # (a Parameter only under a constructor flag the run never sets)
                    if program.never_trained(cls) and program.trained_chain(root) is None:
                        # model-never-trained: every construction of the class (or of a class holding it) sits
                        # in a file that trains nothing -- an annotation or evaluation pipeline run under
                        # `torch.no_grad()`: no gradient of it is ever reduced (unless an object built from it
                        # is seen reaching a training call: a factory's own file trains nothing)
                        break
                    use = next(iter(walker.uses_at.get(attr.name, [])), None)
                    reported.add(attr.name)
                    # a subclass reached only through a flag-chosen class value of a function no call of the run
                    # reaches: whether a training script builds it is undecidable
                    proven = root is cls or not program.flag_choice_unseen(root)
                    out.append((attr, root, found[0], cond, use, proven, fed_clue))
        return out

    return program.memo(f"conditional-uses:{id(src)}", build)


def _fed_walk(program, root, fn, interesting: frozenset, fixed: frozenset, walker, paths):
    """Issue 30 items 5 and 6: the forward's inputs followed back through their call sites (`input_origins`). The
    inputs no call feeds from the batch -- never passed, a literal or setting per call site, a layer index, or no
    call seen -- are held fixed and the paths walked again: (origins, walker, paths); the first walk's when every
    input that is not already fixed is fed from the batch."""
    try:
        held = program.inputs_not_fed(root) - fixed
        if not held:
            return program, walker, paths
        walker = ForwardPaths(root, interesting, program.view)
        paths = walker.root(fn, fixed | held, program.caller_keys(root))
    except (TooManyPaths, RecursionError):
        return None         # no evidence either way: the first walk stands
    return program, walker, paths


def _fed_evidence(fed, attr: str, root, fn, first):
    """(Clue, condition) for `attr` from the walk with only batch-fed inputs as data (`_fed_walk`): found, with
    the call site feeding the batch, when the use still diverges on that walk (the condition deciding it there);
    missing, naming what arrives at the tested inputs, when it diverges only on inputs no call feeds from the
    batch."""
    from dslint.rules.evidence import Clue
    program, walker, paths = fed
    pair = divergent(paths, attr)
    cond = deciding_condition(walker, pair) if pair is not None else None
    if cond is None:
        held = [f"`{p}`: {o.what}" for p, o in program.inputs_behind(root, fn, first.inputs)]
        return Clue("batch-input", f"no call of `{root.name}` the run shows feeds the tested input from the batch"
                                   + (" (" + "; ".join(held[:3]) + ")" if held else ""), found=False), None
    hit = next(iter(program.inputs_behind(root, fn, cond.inputs)), None)
    if hit is None or hit[1].kind != "varying":
        return None, cond
    p, o = hit
    return Clue("batch-input", f"`{p}` of `{root.name}.forward` is fed from the batch: {o.what}", o.at, o.src), cond


def _zero_severity(program) -> Optional[tuple[Optional[Severity], str]]:
    stages = program.run_stages()
    known = {s for s in stages if s is not None}
    if stages and known == stages and known <= {0}:
        return None             # ZeRO-0 / DDP path zero-fills missing gradients
    if known & {1, 2, 3}:
        return None, f"ZeRO stage {max(known & {1, 2, 3})}"
    return Severity.WARNING, "ZeRO stage 1/2/3 (no DeepSpeed config with a known stage was found in this run)"


# calls that set up gradient reduction across ranks (last names of resolved callees): a DeepSpeed engine, DDP,
# FSDP, accelerate, a process group; a `...Trainer` construction is counted below. Not `model.train()` nor a
# `.prepare(...)` of anything: a single-process loop calls those too, and has no reduction to skew.
_MULTI_RANK_TRAINING = frozenset({"initialize", "DistributedDataParallel", "DDP", "FullyShardedDataParallel",
                                  "Accelerator", "init_process_group", "init_distributed"})


def _trained_across_ranks(program) -> bool:
    """Does any file of the context start multi-rank training (decided on the outlines)? In a run whose launch
    units never reach it, a model class with no script that trains it -- a library's own model code, a copy
    vendored for evaluation -- has no gradient reduction to skew."""
    def build() -> bool:
        for src in program.python:
            outline = src.outline
            if outline is None:
                continue
            if any(callee and (callee.rsplit(".", 1)[-1] in _MULTI_RANK_TRAINING
                               or program.builds_library_trainer(src, callee)) for callee, _ in outline.calls):
                return True
        return False
    return program.memo("params.trained_across_ranks", build)


class ParamNotInOptimizer(Rule):
    """An optimizer whose param groups, built by name filters over `named_parameters()`, leave some trainable
    parameters out of every group.

    **Why it matters**: a trainable parameter outside every optimizer group still gets a gradient (and under
    ZeRO it is not part of the partitioned fp32 state), but it is never updated: the model trains with that
    part frozen at its initial value and nothing says so. The groups -- comprehensions over
    `model.named_parameters()` written in the group dicts or through variables (`decay = [p for n, p in ...];
    groups = [{"params": decay}, ...]`), given to an optimizer or to `deepspeed.initialize(model_parameters=...)`
    for the config's optimizer -- have their filters read as boolean formulas over their atoms
    (`n in decay_parameters`, `"bias" in n`, `p.ndim < 2`; `p.requires_grad` counts as true), and a name that
    satisfies none of them is reported, e.g. a projector excluded from the decay groups but never given its own.
    When the model's class is one of the run's, the parameters no group takes are named (`norm.weight`).
    Not flagged when the run freezes the model wholesale (`model.requires_grad_(False)`, PEFT), since then the
    uncovered names may all be frozen.

    **Unproven** (hidden unless `--show-unproven`, marked in the message): when the model's parameter names are
    not known and every combination no group takes needs a name that passes two or more name tests at once
    (six groups over decay x `any(h in n for h in head_names)` x `any(k in n for k in clip_keys)` leaving out
    "head and CLIP key"). A filter on a name attests that some parameter passes that test, not that one passes
    two tests of different groups: whether the combination holds any parameter is undecided.
    """

    code = "DSL301"
    name = "param-not-in-optimizer"
    severity = Severity.WARNING
    summary = "trainable parameters that no optimizer param group contains (name filters that miss some)"
    fix_advice = "Make the groups' filters cover every trainable parameter (add the missing complement group)."
    references = ("DeepSpeed #4933",)
    versions = "All versions."
    suppress_when = "The uncovered parameters are frozen elsewhere (requires_grad=False)."
    unproven_when = ("the model's parameter names are not known and every combination no group takes needs a name "
                     "that passes two or more of the groups' name tests at once",)
    triggers = ("named_parameters",)
    VALID = (
        """\
        import torch
        decay = get_decay_names(model)
        groups = [
            {"params": [p for n, p in model.named_parameters() if n in decay and p.requires_grad], "weight_decay": 0.1},
            {"params": [p for n, p in model.named_parameters() if n not in decay and p.requires_grad], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=1e-4)
        """,
    )
    INVALID = (
        """\
        import torch
        decay = get_decay_names(model)
        groups = [
            {"params": [p for n, p in model.named_parameters() if n in decay and "projector" not in n], "weight_decay": 0.1},
            {"params": [p for n, p in model.named_parameters() if n not in decay and "projector" not in n], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=1e-4)  # expect: DSL301
        """,
        """\
        import torch
        from torch import nn
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.norm = nn.LayerNorm(8)
            def forward(self, x):
                return self.norm(self.proj(x))
        model = Classifier()
        decay = [p for n, p in model.named_parameters() if "bias" not in n and "norm" not in n]
        no_decay = [p for n, p in model.named_parameters() if "bias" in n]
        groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
        optimizer = torch.optim.AdamW(groups, lr=1e-4)  # expect: DSL301
        """,
    )

    def check(self, ctx: RuleContext):
        if ctx.program.models().freezing.freeze_all:
            return
        src = ctx.source
        sites = [(call.node, scope, arg, "this optimizer")
                 for call, scope, arg in ctx.program.optimizer_constructions(src)]
        # groups handed to DeepSpeed, which builds the config's optimizer over them
        for ec in ctx.program.engine_calls(src):
            params = ec.argument("model_parameters") if ec.kind == "initialize" else None
            if params is not None and ec.argument("optimizer") is None:
                sites.append((ec.call.node, src.facts.functions.get(ec.call.scope), params,
                              "the optimizer `deepspeed.initialize` builds"))
        for node, scope, arg, what in sites:
            groups = ctx.program.param_groups(src, scope, arg)
            if not groups:
                continue
            missing = ctx.program.uncovered_parameters(groups)
            if missing is None:
                continue
            named = ctx.program.uncovered_parameter_names(src, scope, groups)
            # uncovered-filter-combination-empty: the only combinations no group takes need a name that passes
            # two or more name tests at once (a head key and a CLIP key); without the model's parameter names,
            # whether any parameter has such a name is undecided
            tests = None if named else ctx.program.uncovered_name_tests(groups)
            proven = tests is None or tests < 2
            if named:
                shown = ", ".join(f"`{n}`" + ("..." if n.endswith(".") else "") for n in named[:6])
                more = f" and {len(named) - 6} more" if len(named) > 6 else ""
                subject = f"the trainable parameter{'s' if len(named) > 1 else ''} {shown}{more} of `{groups[0].receiver}`"
            else:
                text = " and ".join(atom if value else f"not ({atom})" for atom, value in missing)
                subject = f"a trainable parameter of `{groups[0].receiver}` for which {text}"
            undecided = "" if proven else (
                " (unproven: such a name must pass several of the groups' name tests at once, and the model's "
                "parameter names are not known here, so whether any parameter is left out is undecided)")
            yield Diagnostic(
                f"no param group of {what} takes {subject}: such parameters get gradients but are never updated"
                f"{undecided}. Add a group for them (or freeze them explicitly).", node, proven=proven)


class UnusedTrainableParam(Rule):
    """A trainable parameter or submodule created in a module's `__init__` that no code of the run ever reads.

    **Why it matters**: it never receives a gradient. All ranks agree, so ZeRO's reductions still match and
    nothing hangs — but it occupies optimizer state, is saved in checkpoints, and is a sign that a branch
    meant to use it is missing (when some ranks do use it, see DSL303). Only classes whose whole forward chain
    is in the checked files are considered (bases `nn.Module` or other checked classes, no `getattr(self, name)`
    or `self.children()` style access). A model that nothing trains is left alone: when every construction the
    run shows -- of the class or of a class holding it -- is in a file that neither trains (`backward()`,
    `step()`, `deepspeed.initialize`, a Trainer, DDP/FSDP, accelerate) nor calls a function of another file that
    does (a unit test building a model to inspect its parameter groups), or when nothing in the run constructs or
    names the class at all and its file builds other models of the run and trains nothing (a test's leftover
    stand-in). A class of a module that nothing can load -- the programs use its package but none imports it,
    no other file of its project folder spells its file name (an import, a string import, a config, a command
    line), no import by a computed name can give it (a leftover experiment beside the module the model is built
    from) -- is unproven: hidden unless `--show-unproven`.
    """

    code = "DSL302"
    name = "unused-trainable-param"
    severity = Severity.WARNING
    summary = "a trainable parameter/submodule defined in `__init__` that forward never reaches"
    fix_advice = "Remove it, use it, or create it with requires_grad=False."
    references = ("DeepSpeed #4933",)
    versions = "All versions."
    suppress_when = "It is used by code outside the checked files (a subclass, a training script not checked)."
    triggers = PARAM_TRIGGERS
    VALID = (
        """\
        import torch
        from torch import nn
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.scale = nn.Parameter(torch.ones(8))
            def forward(self, x):
                return self.proj(x) * self.scale
        """,
    )
    INVALID = (
        """\
        import torch
        from torch import nn
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.old_proj = nn.Linear(8, 8)  # expect: DSL302
            def forward(self, x):
                return self.proj(x)
        """,
    )

    def check(self, ctx: RuleContext):
        facts = ctx.program.models()
        for cls in facts.classes_in(ctx.source):
            mro = cls.mro()
            if any(c.external_bases for c in mro) or not cls.has_method("forward"):
                continue
            candidates = [a for a in cls.attrs.values() if a.method == "__init__" and facts.trainable(a)]
            if not candidates or any(Program.reaches_attributes_dynamically(c) for c in mro):
                continue
            # one object under several names (`self.pool = self.pool_5a = Pool(...)`): a read of any name uses it
            names_of: dict[tuple, list[str]] = {}
            for a in cls.attrs.values():
                names_of.setdefault((a.method, a.index), []).append(a.name)
            unread = [a for a in candidates
                      if not any(ctx.program.attribute_read_count(n) for n in names_of[(a.method, a.index)])]
            if not unread or ctx.program.never_trained(cls):
                continue        # a model built only to be inspected (its parameter groups, its structure)
            for attr in unread:
                yield Diagnostic(
                    f"`self.{attr.name}` ({attr.kind}) is trainable but nothing in the checked files reads it: it never "
                    f"gets a gradient and is never updated. Every rank skips it alike, so this alone does not hang; "
                    f"remove it, use it, or create it with requires_grad=False.", attr.statement)


# a ZeRO-2 config in the run: the evidence DSL303 needs (issue 30) beside a model file
_ZERO2_RUN = {"ds_config.json": '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}\n'}


class ConditionallyUsedParam(Rule):
    """A trainable parameter or submodule that `forward` uses only on a data- or rank-dependent branch.

    **Why it hangs**: ZeRO-1/2 hook every trainable parameter's gradient accumulation and reduce buckets built
    from the gradients that actually arrived; ZeRO-3 reduce-scatters per submodule. A parameter used only when
    the batch has images (LLaVA: `if images is not None:` around the projector) gets no gradient on the ranks
    whose batch is text-only, so the ranks' reduction sizes differ: the all_reduce/reduce_scatter hangs, or,
    with small buckets, same-size reductions pair different parameters and silently corrupt gradients; the
    ranks that got through wait in `optimizer.step()`'s overflow all_reduce (DeepSpeed #4933, #1355). Stage 0
    zero-fills missing gradients and is safe. Reported only where the run reduces gradients across ranks (a
    ZeRO config, `deepspeed.initialize`, DDP/FSDP, accelerate, a process group, a `...Trainer`): a
    single-process loop (`model.train()`, `optimizer.step()`) has nothing to skew; a model file checked alone
    is reported as a warning.

    Models derived from a transformers class (`class LlavaLlamaForCausalLM(LlamaForCausalLM, ...)`) count: the
    parameters added beside the library's sub-modules are checked, and freezing is per sub-tree --
    `model.get_model().requires_grad_(False)` (a getter of `self.model`) or a `requires_grad = False` loop over
    `model.model.parameters()` freezes that sub-module only, not `self.image_gate` of the outer class nor a
    sibling `self.mm_projector`; `model.requires_grad_(False)` then `model.get_model().mm_projector
    .requires_grad_(True)` leaves only the projector trainable. The library base's `super().forward(...)` is taken
    to use the library's own attributes (`model`, `lm_head`, ...) on every path, not the ones the subclass adds.

    A test is data-dependent when it reads the batch -- any input of forward or a value derived from one,
    whatever its name (`if aux_label is not None`, `if batch.get("k")`, `x.shape[1] == 1`, a `for` over an
    optional input that may be empty) -- or the rank. Uniform: `self.*` values set in `__init__` (a
    config-fixed `self.mode`), `self.training`, forward's option parameters (a `bool`/`int`/`float`/`str`
    annotation or literal default), a sub-module's input that every caller in the run leaves out or passes
    uniformly (`self.embeddings(ids)` never passing `token_type_ids`; the caller's `self.head.apply(init)`, a
    torch Module method that runs no forward, hands it nothing), a None test of an input that every call of the
    model the run shows -- outside `torch.no_grad()`, under run settings only -- passes as a literal or as a
    value that is never None (a CLIP-style `if image is None: return self.encode_text(text)` called with
    `model(images, texts)` and `model.module(views, None)`: each call takes its arm on every rank), a tensor's
    placement (`not x.is_cuda`,
    `x.dtype`, `x.device.type`: where a batch lives, not what it holds; its number of dimensions is the batch's);
    where uniform tests select the branch inside each data path, it is
    reported only when, for one assignment of them, the parameters used differ between the data paths. A test
    of several parts is judged through its `and`/`or`/`not`: it is data-dependent only when a part that reads
    the batch can change its outcome on a step that reduces gradients -- `images is not None and
    (input_ids.shape[1] != 1 or self.training)` is decided by `images` alone under ZeRO-1/2, where `self.training`
    holds on every such step (under ZeRO-3 an evaluation forward gathers parameters too: there it is a setting).

    Clean: a use on every path (LLaVA's `image_features[0:0]` concatenated on text-only batches,
    `+ 0 * self.proj.weight.sum()`, a dummy forward in the `else` branch), `requires_grad=False` (at
    creation, by the class itself, by its owner, by a `for p in model.vision.parameters()` loop of the script),
    attributes every optimizer of the run leaves out (`AdamW([p for n, p in model.named_parameters() if not
    n.startswith("vision.")])`: DeepSpeed reduces only its optimizer's parameters),
    uses under `torch.no_grad()`, attributes holding no parameters (a transformers tokenizer or processor),
    tests that only say where a value comes from (`if inputs_embeds is None: inputs_embeds =
    self.embed(input_ids)`; `else: out = enc_states` -- the caller computed it; ids or embeddings handed over
    as alternatives, `elif inputs_embeds is not None: h = inputs_embeds`, also as two fields of one input record,
    `input_ids = seq_ctx.input_ids` ... `else: h = seq_ctx.inputs_embeds`; an input dict's entry filled when
    absent, `if outputs.get("image") is None: outputs["image"] = self.vision(pixels)`; a fill written with an
    early return, `if memory is not None: return self.decode(memory)` before `memory = self.encode(src)`; an
    input the chain requires when the tested one is absent and the arm computes from it, `if prompt_ids is not
    None: cache = self.encoder(prompt_ids, cache=cache)` / `elif cache is None: raise`),
    tests on uniform values only. A batch field whose presence the configuration decides is uniform: when every
    write of its key in the run (`batch["depth"] = ...`, `{"depth": ...}`) is unconditional or under tests of
    run-fixed values (a collator's `self.use_depth`), the collator sets it for every batch or for none (Vary's
    collator passes `images` on every batch, a zero image for text-only samples); a write under a test of the
    items (`if all("depth" in x for x in items)`), or of a value the collator makes None on some batches
    (`images = None`, then a stack under such a test), keeps it data-dependent. A test on the
    rank is one whose value the rank-uniformity lattice finds rank-varying (`self.me = dist.get_rank()`), not
    one whose code spells a rank word; a test that varies only along an axis the gradient reduction does not span
    (a model-parallel rank, `if mp_rank == 0:` before a broadcast to the model-parallel group) is taken alike by
    every rank of one data-parallel reduction. A field the run never writes under its own literal key (a
    preprocessor copying each sample's keys, `for k in sample: if k == "depth":`) is a configured input when the
    model builds its sub-module only under a test of that key in its configuration (`if "depth" in
    cfg.input_sensors:`), also when it arrives through a parameter every caller fills from `sensors.get("depth")`
    (a caller being any class that holds the sub-module, also one built from a class its module's namespace holds
    under a configured name, `self.enc = globals()[cfg.enc_class](...)`). An optional input (`prompt_pos=None`)
    is uniform when every call of the run handing it over (by keyword or at its position, outside
    `torch.no_grad()`) does so only under tests of run settings (`if args.continuous_prompt:`) with a batch field
    read by its literal key (`data["prompt_pos"]`), or hands on its own input decided alike; a call unpacking a
    mapping into a model's keywords (`model(**batch)`) leaves it to the batch. Likewise an optional input whose
    value every such call sets alike on every rank -- a literal per call site (`mode="text"` for one pass,
    `mode="fusion"` for the next: every rank runs both; a module constant bound once to a literal, `mode=MODE_TEXT`,
    is one), a setting, or the caller's own option decided alike --, or
    that no call of the run hands over at all (Megatron's `enc_hidden_states`, passed by no training step) when the
    run builds the class, every call of the run's models is seen (no `model(**batch)`, `model(*inputs)` or
    transformers/TRL Trainer) and at least one call of the model or of its engine is (`engine(batch["ids"])`: an
    engine handed to a loop of an installed package shows nothing of what that loop passes): it keeps its default
    on every rank. A model built by a factory function (`get_language_model()` called in a
    holder module's `__init__`) is trained where the holder is built. A holder reaching into a sub-module's
    attribute on some paths only (a cache built layer by layer from optional prefixes, `layer.k_proj(h)`) is an
    extra use when every path of the holder's forward runs the sub-module's own forward (through the fields it
    builds, `nn.ModuleList([Layer(...) ...])`) and that forward uses the attribute on every path; a holder is a
    class whose constructions resolve to the class, through its file's definitions and imports -- not another
    file's class of the same name.
    Not judged through a subclass that the run builds only through a flag-chosen class (`Inf if for_inference
    else Base`) set only by files that train nothing (generation scripts); not an attribute that is a Parameter
    only under a constructor flag every construction settles the other way (`Rotary(dim, learnable=False)`);
    not a class every construction of which -- itself or of a class holding it -- sits in a file that trains
    nothing (an annotation pipeline loading weights and running the model under `torch.no_grad()`: no gradient of
    it is ever reduced). The condition reported is the one that selects the use: of the path pairs that differ in
    the use, the pair whose data decisions differ least (an early `return` for generation, `if
    "past_key_values" in kwargs:`, is not the branch that skips the mask decoder on training batches).

    Evidence that batch data reaches the test (issue 30 items 5 and 6): each input of the forward is followed back
    through its call sites -- its holders' calls (`self.emb(ids, aux)`, `self.layer[i](h, i)`, `for layer in
    self.layers: layer(h)`), a helper method's callers, and the run's calls of the trained model (`engine(ids,
    aux=batch.get("aux"))`, `model(**batch)`) or a library loop that feeds it the batch. An input no call feeds
    from the batch -- never passed (StructBERT's `adv_embedding`), a literal or setting per call site, a layer
    index, or one whose calls are not seen (a layer handed to `checkpoint(custom_forward(layer), ...)`) -- is held
    fixed and the paths compared again; the finding is proven only when the use still differs between data paths,
    and its evidence names the call site that feeds the batch; otherwise it is unproven.

    Evidence before a finding (issue 30): a class's finding is proven only when an object built from it -- the
    class, a subclass or a class holding it, through factories that return it, class values (`Inf if flag else
    Cls`), functions, methods and classes it is handed to, and the `self.` fields it lands in -- is seen reaching
    `deepspeed.initialize`, DDP/FSDP, an `Accelerator`'s `prepare`, a transformers/TRL Trainer or a class of the
    run derived from one of these or from `DeepSpeedEngine`; otherwise (an evaluation model, a distillation
    teacher, a vendored class no file builds) it is unproven, the missing chain named. A model file checked alone
    (no file of the check trains anything) keeps the config as its evidence. And an empty-input guard of a
    sub-module's own forward (`if xi.shape[0] == 0: return ...`) is unproven where every call of the module the run
    shows runs once per element of the caller's input (`for sample in samples: self.enc(sample["codes"])`): a rank
    skips it only when every element of its batch is empty.

    Also reported: a function installed as a library class's forward (`Qwen2VLModel.forward = my_forward`), or a
    helper it hands the model to, that reaches a sub-module's output on some data paths only -- a text-only
    dummy `model.visual(...)` switched off by `model.training` (evaluation then skips the tower's FSDP/ZeRO-3
    gathers on text-only ranks), or a dummy call that drops an output the image path uses (`embeds, _ =
    model.visual(...)`); sub-modules are the class's `__init__` fields whose objects hold parameters, and a read of
    a field's own parameter (`F.linear(x, m.k_proj.weight)`) uses it as a call does; the module's own values
    (`self.config.pretraining_tp > 1`) are uniform, also where the function stores into a tensor indexed by them.
    Such a finding is proven only when the patch is chosen for the model the run trains (installed under a test of the
    model object handed to the installing function, `if model.config.model_type == "qwen2_vl":
    Qwen2VLModel.forward = ...`) or a file that trains builds the patched class (`Cls(...)`,
    `Cls.from_pretrained(...)`); a blanket port of every layer class of a library (`adapt_transformers_to_gaudi()`)
    says nothing about which classes are trained nor where a layer's `encoder_hidden_states` comes from:
    unproven. And a loss
    (a Trainer's `compute_loss` result, a value handed to a backward) that is a torch constant on a branch whose
    test reads the batch's values or sizes (`else: loss = torch.tensor(0.0)` on a rank with no kept rows): that
    rank's backward reaches no parameter.
    """

    code = "DSL303"
    name = "conditionally-used-param"
    evidence_needed = ("a config with a ZeRO stage, or a call that trains the model on several ranks "
                       "(`deepspeed.initialize`, an HF/TRL Trainer, DDP/FSDP, an `Accelerator`), in the launch "
                       "unit: without either (a model file with nothing that trains it) the finding is unproven "
                       "and hidden unless `--show-unproven`. The data-dependent branch and the use on one path only "
                       "are in the trace.")
    evidence_complete = ("a config with a ZeRO stage, or a call that trains the model on several ranks "
                         "(`deepspeed.initialize`, an HF/TRL Trainer, DDP/FSDP, an `Accelerator`), in the launch unit")
    unproven_when = ("neither is in the launch unit (a model file with nothing that trains it)",
                     "no object built from the class, a subclass or a class holding it is seen reaching "
                     "`deepspeed.initialize`, DDP/FSDP, an Accelerator's `prepare` or a Trainer (an evaluation model, "
                     "a distillation teacher, a class no file builds) while other files of the check train a model",
                     "the branch is an empty-input guard of the module's own forward and every call of the module "
                     "runs once per element of its caller's input (a loop over the batch's samples)",
                     "the class is reached only as a subclass that a flag of a function chooses, and no call of that "
                     "function is found (a module imported by a name the command line gives)",
                     "a patched-in forward whose patch is applied to every class alike (not chosen by a test of the "
                     "model handed in) and no file that trains builds the patched class: a layer's inputs are what "
                     "the library's enclosing forward hands it (cross-attention states, caches), not the batch",
                     "no call of the forward the run shows feeds the tested input from the batch: every call leaves "
                     "it out or passes a literal, a setting, a layer index or a value uniform at its own callers, or "
                     "a holder hands the module on where its calls are not followed",
                     "the branch tests a batch field named as a string (`\"k\" in batch`, `batch.get(\"k\") is None`, "
                     "an input every caller reads from one) and no file of the run writes that key on some samples or "
                     "batches and not on others (no writer found: the batch is built outside the run's files, or the "
                     "model is reached by a registry no writer feeds) -- nothing shows ranks' batches differing in it")
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "a trainable parameter used only under a data- or rank-dependent branch of forward"
    fix_advice = ("Touch the parameter on every path (e.g. `x = x + 0 * self.proj(dummy).sum()` or concatenate "
                  "`features[0:0]` on text-only batches), or freeze it.")
    autofix = 'display, two variants: freeze it (`self.x.requires_grad_(False)` after it is built), or use it on every path (a zero term built from it before the branch).'
    references = ("DeepSpeed #4933", "DeepSpeed #1355", "LLaVA llava_arch.py prepare_inputs_labels_for_multimodal")
    versions = "All versions (ZeRO stages 1-3)."
    suppress_when = "Every rank's batch takes the same branch in every step (e.g. every sample has an image)."
    triggers = PARAM_TRIGGERS
    VALID = (
        """\
        import torch
        from torch import nn
        class VLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.lm = nn.Linear(8, 8)
                self.projector = nn.Linear(4, 8)
            def forward(self, text, images=None):
                if images is not None:
                    feats = self.projector(images)
                else:
                    feats = self.projector(torch.zeros(0, 4))
                return self.lm(torch.cat([feats, text]))
        """,
        """\
        import torch
        from torch import nn
        class Mixer(nn.Module):
            def __init__(self, mode):
                super().__init__()
                self.mode = mode
                self.mlp = nn.Linear(8, 8)
                self.conv = nn.Conv1d(8, 8, 3, padding=1)
            def forward(self, x, extra=None):
                if extra is not None:
                    x = x + extra
                    h = self.mlp(x) if self.mode == "mlp" else self.conv(x)
                else:
                    h = self.mlp(x) if self.mode == "mlp" else self.conv(x)
                return h
        """,
        """\
        import torch
        from torch import nn
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(100, 8)
                self.aux_head = nn.Linear(8, 2)
                self.frozen_query = nn.Parameter(torch.zeros(8), requires_grad=False)
            def forward(self, input_ids=None, inputs_embeds=None, images=None):
                if input_ids is not None:
                    inputs_embeds = self.embed(input_ids)
                if self.training:
                    inputs_embeds = inputs_embeds + self.aux_head(inputs_embeds).sum()
                if images is not None:
                    inputs_embeds = inputs_embeds + self.frozen_query
                return inputs_embeds
        """,
    )
    INVALID = (
        Example(textwrap.dedent("""\
        import torch
        from torch import nn
        class VLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.lm = nn.Linear(8, 8)
                self.projector = nn.Linear(4, 8)  # expect: DSL303
            def forward(self, text, images=None):
                if images is not None:
                    text = torch.cat([self.projector(images), text])
                return self.lm(text)
        """), files=_ZERO2_RUN, fixed="""\
        import torch
        from torch import nn
        class VLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.lm = nn.Linear(8, 8)
                self.projector = nn.Linear(4, 8)  # expect: DSL303
                self.projector.requires_grad_(False)  # frozen: no rank waits for its gradient
            def forward(self, text, images=None):
                if images is not None:
                    text = torch.cat([self.projector(images), text])
                return self.lm(text)
        """),
        Example(textwrap.dedent("""\
        import torch
        from torch import nn
        class AuxTagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(8, 8)
                self.aux_head = nn.Linear(8, 3)  # expect: DSL303
                self.loss_fn = nn.CrossEntropyLoss()
            def forward(self, x, labels, aux_label=None):
                h = self.encoder(x)
                loss = self.loss_fn(h, labels)
                if aux_label is not None:
                    loss = loss + self.loss_fn(self.aux_head(h), aux_label)
                return loss
        """), files=_ZERO2_RUN, fixed="""\
        import torch
        from torch import nn
        class AuxTagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(8, 8)
                self.aux_head = nn.Linear(8, 3)  # expect: DSL303
                self.aux_head.requires_grad_(False)  # frozen: no rank waits for its gradient
                self.loss_fn = nn.CrossEntropyLoss()
            def forward(self, x, labels, aux_label=None):
                h = self.encoder(x)
                loss = self.loss_fn(h, labels)
                if aux_label is not None:
                    loss = loss + self.loss_fn(self.aux_head(h), aux_label)
                return loss
        """),
        Example(textwrap.dedent("""\
        import torch
        from torch import nn
        class Router(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.long_seq_bias = nn.Parameter(torch.zeros(8))  # expect: DSL303
            def forward(self, hidden):
                out = self.body(hidden)
                if hidden.shape[1] > 512:
                    out = out + self.long_seq_bias
                return out
        """), files=_ZERO2_RUN, fixed="""\
        import torch
        from torch import nn
        class Router(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.long_seq_bias = nn.Parameter(torch.zeros(8))  # expect: DSL303
                self.long_seq_bias.requires_grad_(False)  # frozen: no rank waits for its gradient
            def forward(self, hidden):
                out = self.body(hidden)
                if hidden.shape[1] > 512:
                    out = out + self.long_seq_bias
                return out
        """),
        Example(textwrap.dedent("""\
        import deepspeed
        import torch
        from torch import nn
        from transformers import LlamaForCausalLM
        class GatedLlama(LlamaForCausalLM):
            def __init__(self, config):
                super().__init__(config)
                self.image_gate = nn.Parameter(torch.zeros(1))  # expect: DSL303
            def get_model(self):
                return self.model
            def forward(self, input_ids=None, labels=None, images=None):
                embeds = self.get_model().embed_tokens(input_ids)
                if images is not None:
                    embeds = torch.cat([images * self.image_gate, embeds], dim=1)
                return super().forward(inputs_embeds=embeds, labels=labels)
        model = GatedLlama.from_pretrained("org/llama")
        model.get_model().requires_grad_(False)
        engine, *_ = deepspeed.initialize(model=model, config="ds_config.json")
        """), files=_ZERO2_RUN, fixed="""\
        import deepspeed
        import torch
        from torch import nn
        from transformers import LlamaForCausalLM
        class GatedLlama(LlamaForCausalLM):
            def __init__(self, config):
                super().__init__(config)
                self.image_gate = nn.Parameter(torch.zeros(1))  # expect: DSL303
                self.image_gate.requires_grad_(False)  # frozen: no rank waits for its gradient
            def get_model(self):
                return self.model
            def forward(self, input_ids=None, labels=None, images=None):
                embeds = self.get_model().embed_tokens(input_ids)
                if images is not None:
                    embeds = torch.cat([images * self.image_gate, embeds], dim=1)
                return super().forward(inputs_embeds=embeds, labels=labels)
        model = GatedLlama.from_pretrained("org/llama")
        model.get_model().requires_grad_(False)
        engine, *_ = deepspeed.initialize(model=model, config="ds_config.json")
        """),
    )

    def check(self, ctx: RuleContext):
        if not ctx.program.run_stages() and not _trained_across_ranks(ctx.program) and ctx.program.run_program.units:
            return              # the run's programs never reach this model and nothing near it trains it on
                                # several ranks (vendored model code); a model file checked alone is still checked
        zero = _zero_severity(ctx.program)
        if zero is None:
            return              # ZeRO-0 / DDP only
        severity, stage_text = zero
        for attr, root, owner, cond, use, proven, fed_clue in conditional_uses(ctx):
            where = f"{root.name}.forward" if owner is root else f"{root.name}.forward (via {owner.name})"
            trace = [Trace(f"data-dependent branch in {cond.method}(): `{_code(cond.node)}`", cond.node, cond.src)]
            if use is not None:
                trace.append(Trace(f"used only on that path, in {use[1]}()", use[0], use[2]))
            reads = (" (it reads the batch: " + ", ".join(f"`{n}`" for n in cond.inputs) + ")") if cond.inputs else ""
            unseen = "" if proven else (
                f" (unproven: `{root.name}` is built only through a class value a flag chooses in a function no "
                f"call of the run reaches, so whether a training script builds it is unknown)")
            key_clue = _key_evidence(ctx, cond)
            if key_clue is not None and not key_clue.found and proven:
                proven = False
                unseen = (f" (unproven: no file of the run writes the batch field `{cond.key}` on some batches and not "
                          f"on others, so whether ranks' batches differ in it is unknown)")
            loop = _per_element_guard(ctx, root, owner, cond)
            if loop is not None and proven:
                proven = False
                unseen = (f" (unproven: `{_code(cond.node)}` is an empty-input guard, and every call of "
                          f"`{root.name}` the run shows runs once per element of its input (`{loop}`): a rank "
                          f"skips it only when every element of its batch is empty, which nothing shows)")
            if fed_clue is not None and not fed_clue.found and proven:
                proven = False
                unseen = f" (unproven: {fed_clue.note})"
            chain_clue = _chain_evidence(ctx, root)
            if not chain_clue.found and proven:
                proven = False
                unseen = (f" (unproven: no object built from `{root.name}` -- nor from a subclass or a class holding "
                          f"it -- is seen reaching deepspeed.initialize, a Trainer, DDP/FSDP or accelerate's prepare, "
                          f"so whether the run trains it under gradient reduction is unknown)")
            diag = Diagnostic(
                f"`self.{attr.name}` ({attr.kind}) is trainable but {where}{unseen} uses it only when "
                f"`{_code(cond.node)}` goes one way{reads}: ranks whose batch takes the other path produce no gradient for "
                f"it, so under {stage_text} the gradient reductions differ in size across ranks and hang or mix "
                f"gradients (DeepSpeed #4933). Use it on every path (e.g. `+ 0 * self.{attr.name}...sum()`, "
                f"`features[0:0]`) or freeze it.", attr.statement, severity=severity, trace=trace,
                fix=_freeze_or_touch_fix(ctx, attr, cond), proven=proven)
            # the rule's own clues beside the family's (the engine adds the family's only to a bare diagnostic)
            from dslint.rules.evidence import family_evidence
            clues, family_proven = family_evidence("DSL303", ctx, diag)
            diag.evidence = [*clues, *([key_clue] if key_clue is not None else []),
                             *([fed_clue] if fed_clue is not None else []), chain_clue]
            if family_proven is not None:
                diag.proven = diag.proven and family_proven
            yield diag
        # patched-in forwards and the helpers they hand the model to (dslint/rules/params_patched.py)
        trained = _trained_across_ranks(ctx.program)
        yield from patched_forward_diagnostics(ctx, severity, stage_text, trained)
        yield from constant_loss_diagnostics(ctx, severity, stage_text, trained)


def _key_evidence(ctx: RuleContext, cond):
    """Issue 30 item 6, evidence before a finding: a test of a batch field's presence (`"k" in batch`,
    `batch.get("k") is None`, an input `k` of `model(**batch)`) splits ranks only where batches differ in that
    field. The run's writes of the key (`Condition.key_varies`, from `batch_keys`) are that evidence: a write decided per sample
    or per batch (VARIES) is found; no write at all (the batch is built outside the run's files, or the model is
    reached by an entry no writer feeds) is missing. (Writes all decided by run-fixed settings never get here: the
    test is then uniform.) None when the condition tests no batch field's presence."""
    key = cond.key
    if not key:
        return None
    from dslint.rules.evidence import Clue
    if cond.key_varies:
        return Clue("batch-key", f"the run writes the batch field `{key}` on some samples or batches only")
    return Clue("batch-key", f"no file of the run writes the batch field `{key}` on some samples and not on others",
                found=False)


def _per_element_guard(ctx: RuleContext, root, owner, cond) -> Optional[str]:
    """Issue 30: a test of the emptiness of an input of the class's own forward (`xi.shape[0] == 0`) in a module
    that every call of the run runs once per element of the caller's input (`per_element.per_element_loop`): the
    branch is per element, not per batch. The loop, or None."""
    if owner is not root or cond.method != "forward":
        return None
    return ctx.program.per_element_guard(root, _code(cond.node), tuple(cond.inputs))


def _chain_evidence(ctx: RuleContext, root):
    """Issue 30, evidence before a finding: the construction chain from the model class (a subclass, a holder,
    the factories returning it) to a call that trains it under gradient reduction (`Program.trained_chain`) --
    without it the class may be an evaluation model, a vendored copy or one the run never builds."""
    from dslint.rules.evidence import Clue
    sink = ctx.program.trained_chain(root)
    if sink is None and not _trained_across_ranks(ctx.program):
        # a model file checked alone (with its config): no file of the check trains anything, so no chain can
        # be followed -- the ZeRO config the family's clues give is the evidence there is
        return Clue("trained-model", "no file of the check trains a model: the class is checked as a model file "
                                     "alone")
    if sink is None:
        return Clue("trained-model", f"no object built from `{root.name}` (or a subclass or holder) is seen reaching "
                                     f"deepspeed.initialize, a Trainer, DDP/FSDP or accelerate's prepare",
                    found=False)
    return Clue("trained-model", f"`{root.name}` reaches {sink.what}", sink.line, sink.src)


def _freeze_or_touch_fix(ctx: RuleContext, attr, cond) -> Optional[Fix]:
    """Display only, both variants: freeze the parameter after it is built, or use it on every path (a zero
    term added to the forward's result before the branch)."""
    from dslint.fixes.python import line_insertion, statement_of
    name = attr.name
    try:
        freeze = line_insertion(ctx.source, attr.statement,
                                [f"self.{name}.requires_grad_(False)  # frozen: no rank waits for its gradient"],
                                after=True)
        stmt = statement_of(cond.src, cond.node) if cond.src is not None else None
        terms = (f"self.{name}.sum()" if attr.kind == "parameter"
                 else f"sum(p.sum() for p in self.{name}.parameters())")
        touch = line_insertion(cond.src, stmt, [
            f"_dslint_touch = 0 * {terms}  # add to the forward's result so every path uses self.{name}"],
            after=False) if stmt is not None else None
    except Exception:
        return None
    if freeze is None:
        return None
    alternatives = [Fix(description=f"Use self.{name} on every path: add a zero term built from it to the "
                                    f"forward's result (the inserted `_dslint_touch`).", applicability="display",
                        edits=[touch])] if touch is not None else []
    return Fix(description=f"Freeze self.{name} (requires_grad_(False)) if it is not meant to train; or use it on "
                           f"every path (alternative).", applicability="display", edits=[freeze],
               alternatives=alternatives)


class RequiresGradAfterInit(Rule):
    """`requires_grad` toggled on the model after `deepspeed.initialize` (progressive unfreezing, freezing a
    tower mid-training).

    **Why it fails**: DeepSpeed reads `requires_grad` once, in `deepspeed.initialize`: ZeRO-1/2 build their
    flat fp16/fp32 partitions, gradient hooks and reduction buckets from the parameters that required grad
    then; ZeRO-3 registers its hooks likewise. A parameter unfrozen later gets gradients that are never
    reduced or stepped (it silently stays at its initial value); one frozen later stays in the buckets and
    the reductions no longer match the gradients that arrive. Set the trainable set before `initialize`
    (or re-initialise the engine).

    An engine that is only ever run forward is left alone: when the engine and optimizer `initialize` returns
    are never used for `backward`/`step` and never handed on (a frozen teacher or projection head wrapped for
    ZeRO's memory savings), freezing its parameters afterwards changes nothing DeepSpeed decided.
    """

    code = "DSL304"
    name = "requires-grad-after-init"
    severity = Severity.WARNING
    summary = "requires_grad changed after `deepspeed.initialize`"
    fix_advice = "Freeze/unfreeze before `deepspeed.initialize` (or build a new engine after changing it)."
    references = ("deepspeed/runtime/zero/stage_1_and_2.py (trainable params read at init)",)
    versions = "All versions."
    suppress_when = "The toggled parameters are outside the DeepSpeed engine."
    triggers = ("requires_grad",)
    VALID = (
        """\
        import deepspeed
        model.vision.requires_grad_(False)
        engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")
        """,
    )
    INVALID = (
        """\
        import deepspeed
        engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")
        for epoch in range(10):
            if epoch == 2:
                for p in engine.module.vision.parameters():  # expect: DSL304
                    p.requires_grad = True
            for batch in loader:
                engine.backward(engine(batch))
                engine.step()
        """,
    )

    def check(self, ctx: RuleContext):
        src = ctx.source
        for ec in ctx.program.engine_calls(src):
            if ec.kind != "initialize":
                continue
            names = set()
            model = ec.argument("model")
            if isinstance(model, cst.Name):
                names.add(model.value)
            scope = src.facts.functions.get(ec.call.scope)
            body = scope.node if scope is not None else src.module
            if _never_trained(src, ec.call.node, body):
                continue
            finder = _AfterInit(ec.call.node, names)
            finder.filtered = _FilterOnNames(ctx.program, src, scope, body, ec.call.node, model)
            cst_visit(body, finder)
            for node, what in finder.hits:
                yield Diagnostic(
                    f"{what} after `deepspeed.initialize`: DeepSpeed decided which parameters it reduces and steps "
                    f"at initialize; parameters unfrozen now are never updated and ones frozen now leave its "
                    f"gradient buckets out of step. Change requires_grad before `deepspeed.initialize`.", node,
                    trace=[Trace("deepspeed.initialize", ec.call.node)])


_TRAINING = frozenset({"backward", "step"})


def _never_trained(src, init_call: cst.Call, body: cst.CSTNode) -> bool:
    """The engine (and optimizer) this `deepspeed.initialize` returns are bound to plain names in `body` and
    only ever run forward there (`out = engine(x)`, `engine.eval()`): no `backward`/`step` on either, and neither
    leaves through an argument, a return, an alias or a container. Such an engine keeps no gradient buckets and
    steps no optimizer, so requires_grad changed after it is built changes nothing DeepSpeed decided (a frozen
    teacher or projection head wrapped for ZeRO's memory savings only)."""
    holder = src._parents.get(id(init_call))
    if not isinstance(holder, cst.Assign) or holder.value is not init_call or len(holder.targets) != 1:
        return False
    target = holder.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or not target.elements:
        return False
    names = set()
    for position, element in enumerate(target.elements[:2]):      # the engine and the optimizer
        value = element.value
        if isinstance(value, cst.Name):
            if value.value != "_":
                names.add(value.value)
        elif position == 0:
            return False
    if not names:
        return False
    uses = _EngineUses(names)
    cst_visit(body, uses)
    return uses.forward_only


class _EngineUses(cst.CSTVisitor):
    """Whether the names are used only to run forward: `name(...)`, `name.attr` other than backward/step (and
    not handed on), their own binding."""

    def __init__(self, names: set) -> None:
        self.names = names
        self.forward_only = True
        self._allowed: set = set()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.names:
            self._allowed.add(id(node.func))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value in self.names:
            if node.attr.value in _TRAINING:
                self.forward_only = False
            self._allowed.add(id(node.value))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False                    # a binding of the name is no use of it

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names and id(node) not in self._allowed:
            self.forward_only = False   # handed on (an argument, a return, an alias): trained elsewhere maybe


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    while isinstance(expr, (cst.Attribute, cst.Call, cst.Subscript)):
        expr = expr.value if not isinstance(expr, cst.Call) else expr.func
    return expr.value if isinstance(expr, cst.Name) else None


class _FilterOnNames:
    """A `named_parameters()` loop over the model handed to `deepspeed.initialize` (or its engine's `.module`)
    whose every requires_grad change sits under `if` tests on the parameter's name that no parameter of that
    model satisfies (`if name.startswith("1."):` on a bare `nn.Linear`: `weight`, `bias`): it changes nothing.
    Decided only where the model's parameter names are all known (`param_groups.built_parameter_names`: a torch.nn
    layer, a Sequential of them, a class of the run)."""

    def __init__(self, program, src, scope, body: cst.CSTNode, init_call: cst.Call, model) -> None:
        self.program, self.src, self.scope, self.body, self.init_call = program, src, scope, body, init_call
        self.model = model
        self._names = False

    def names(self):
        if self._names is False:
            value = _value_before(self.body, self.model.value, self.init_call) \
                if isinstance(self.model, cst.Name) else self.model
            self._names = self.program.parameter_names_built(self.src, value) if value is not None else None
        return self._names

    def changes_nothing(self, loop: cst.For, changes: list) -> bool:
        target = loop.target
        it = loop.iter
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2 and
                all(isinstance(e.value, cst.Name) for e in target.elements)) or \
                not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and
                     it.func.attr.value == "named_parameters" and not it.args):
            return False
        receiver = _code(it.func.value).split(".")
        if len(receiver) > 2 or len(receiver) == 2 and receiver[1] != "module":
            return False
        names = self.names()
        if not names:
            return False
        name_var, param_var = (e.value.value for e in target.elements)
        parents = self.src._parents
        for change in changes:
            tests, child, up = [], change, parents.get(id(change))
            while up is not None and up is not loop:
                if isinstance(up, cst.If):
                    if child is not up.body:
                        return False            # an `else` / `elif` side: not the test's own branch
                    tests.append(up.test)
                elif isinstance(up, (cst.For, cst.While)) and child is not up.body:
                    return False
                child, up = up, parents.get(id(up))
            if up is None or not tests:
                return False
            cond = tests[0]
            for t in tests[1:]:
                cond = cst.BooleanOperation(cond, cst.And(), t)
            if not self.program.filter_rejects_all(self.src, self.scope, cond, name_var, param_var, names):
                return False
        return True


def _value_before(body: cst.CSTNode, name: str, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The value last bound to the plain `name` in `body` before `call` (in source order), None when unknown."""
    found: list = [None, False]

    class Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if found[1]:
                return False
            if node is call:
                found[1] = True
                return False
            if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                    for t in node.targets):
                found[0] = node.value if len(node.targets) == 1 else None
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.With)) and \
                    name in {n.value for n in _names_in(getattr(node, "target", None))}:
                found[0] = None
            return True

    body.visit(Walk())
    return found[0] if found[1] else None


def _names_in(node) -> list:
    if node is None:
        return []
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _names_in(e.value)]
    return []


class _AfterInit(cst.CSTVisitor):
    filtered: Optional[_FilterOnNames] = None

    def __init__(self, init_call: cst.Call, models: set[str]) -> None:
        self.init_call = init_call
        self.models = set(models)
        self.seen = False
        self.hits: list[tuple[cst.CSTNode, str]] = []
        self.param_loops: list[str] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if node.value is self.init_call or (isinstance(node.value, cst.Call) and node.value is self.init_call):
            for t in node.targets:
                tgt = t.target
                first = tgt.elements[0].value if isinstance(tgt, (cst.Tuple, cst.List)) and tgt.elements else tgt
                if isinstance(first, cst.Name):
                    self.models.add(first.value)
            return
        if not self.seen:
            return
        for t in node.targets:
            tgt = t.target
            if isinstance(tgt, cst.Attribute) and tgt.attr.value == "requires_grad":
                root = _root_name(tgt.value)
                if root in self.models or root in self.param_loops:
                    self.hits.append((node, f"`{_code(tgt)} = ...`"))

    def visit_Call(self, node: cst.Call) -> None:
        if node is self.init_call:
            self.seen = True
            return
        if self.seen and isinstance(node.func, cst.Attribute) and node.func.attr.value == "requires_grad_":
            root = _root_name(node.func.value)
            if root in self.models or root in self.param_loops:
                self.hits.append((node, f"`{_code(node.func)}(...)`"))

    def visit_For(self, node: cst.For) -> Optional[bool]:
        if self.seen and isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Attribute) and \
                node.iter.func.attr.value in ("parameters", "named_parameters") and \
                _root_name(node.iter.func.value) in self.models:
            target = node.target
            if isinstance(target, cst.Tuple) and target.elements:
                target = target.elements[-1].value
            if isinstance(target, cst.Name):
                before = len(self.hits)
                self.param_loops.append(target.value)
                cst_visit(node.body, self)
                self.param_loops.pop()
                if len(self.hits) > before:      # report the loop once, on its header
                    changes = [hit for hit, _ in self.hits[before:]]
                    del self.hits[before:]
                    if self.filtered is None or not self.filtered.changes_nothing(node, changes):
                        self.hits.append((node, f"changing requires_grad of `{_code(node.iter)}`"))
                return False
        return True


def prepare(program: Program) -> None:
    """Whole-project analyses of this family, computed once before files are dealt to worker processes."""
    program.models()
    program.run_stages()
