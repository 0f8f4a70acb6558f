"""Collective sites: calls every rank must make together, and the config under which they are collective.

Explicit: `torch.distributed.*` / `deepspeed.comm.*` collectives, accelerate's gather/reduce/wait_for_everyone.
Implicit: a DeepSpeed engine's forward (ZeRO-3 all-gathers partitioned parameters; a DeepSpeed MoE layer runs
all_to_all over its expert group), `engine.backward`/`step` (gradient reductions), `save_checkpoint`/
`load_checkpoint` (barriers and an all_reduce of the tag on every rank, deepspeed/runtime/engine.py), HF
`generate` (one forward per new token), `Trainer.train/evaluate/predict` (and `save_model` under ZeRO-3).
A function of the checked files that reaches a site is a site; `Site.chain` keeps the hops (`evaluate() →
engine(x)`).

Who is an engine is asked first of the value roles (dslint/program/roles.py): an engine or the model it wraps
followed through attributes, parameters, returns and containers, with the config of the script that built it
(`_role_site`; the site keeps the hand-offs for the trace). Otherwise it is read from bindings: targets of
`deepspeed.initialize(...)`/`init_inference`, the `model=` they wrapped, instances of classes that build
`deepspeed.moe.layer.MoE`, `*Trainer(...)`, `Accelerator(...)` or a function of the checked files returning one,
and `self.accelerator` of a class on a transformers/TRL Trainer base (the library keeps its Accelerator there).
Never from how a name is spelled (issue 30 item 9: `model_engine` known by its name only is no engine).
Matching is by the last name component (`self.engine` and `engine` are one role) — a deliberate
over-approximation across functions.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.rank.reaching_ranks import iter_assigns, iter_calls
from dslint.program.library_collectives import datapipe_iteration, dtensor_gather, may_iterate_datapipe
from dslint.program.code_strings import called_names, runs_code_text
from dslint.program import collective_switches as switches
from dslint.program.statement_walks import argument_for as _argument_for, iter_returns, once_initialized_calls, \
    settled_flags, sole_binding
from dslint.program.models.unset_switches import unset_switch
from dslint.program.models.moe import MOE_NAME, TRAINER, builds_library_trainer, moe_facts, returns_moe_model
from dslint.program.rank.function_summaries import ProjectTaint, code_of
from dslint.program.rank.library_types import accelerate_typing
from dslint.program.facts import MODULE_SCOPE, CallSite, FunctionInfo
from dslint.sources.literals import literal_value
from dslint.program.project_view import ConfigView, version_tuple

if TYPE_CHECKING:
    from dslint.program.process_groups import Group
    from dslint.program.roles import RoleAnalysis
    from dslint.program.project_view import ConfigView, ProjectView
    from dslint.sources import PythonSource

EXPLICIT = {"barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor",
            "_all_gather_base", "all_gather_base", "allgather_fn", "reduce", "reduce_scatter", "reduce_scatter_tensor",
            "_reduce_scatter_base", "reduce_scatter_fn", "broadcast", "broadcast_object_list", "scatter",
            "scatter_object_list", "gather", "gather_object", "all_to_all", "all_to_all_single", "new_group",
            "all_reduce_coalesced", "inference_all_reduce"}
# the builtins that call a function handed to them (`map(step, batches)`, `sorted(xs, key=score)`, `iter(read,
# None)`); every other builtin only reads the object it is handed (`hasattr(save_checkpoint, "best")`,
# `isinstance`, `print`, `id`), and `exec`/`eval` run code text (code_strings.py), not a handed function
_CALLING_BUILTINS = frozenset({"map", "filter", "sorted", "min", "max", "iter", "next"})
_BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))


# library calls that wrap a function handed to them into a new callable and run nothing themselves
_WRAPS_ONLY = frozenset({"functools.partial", "functools.partialmethod"})


def _handed_name(src: "PythonSource", value: cst.BaseExpression) -> Optional[cst.Name]:
    """The function name an argument hands over: the name itself, or the function a partial application of it
    wraps (`pool.submit(functools.partial(step, model), x)` hands `step`, run where the partial is)."""
    if isinstance(value, cst.Name):
        return value
    if isinstance(value, cst.Call) and value.args and value.args[0].keyword is None and not value.args[0].star \
            and isinstance(value.args[0].value, cst.Name) and src.facts.resolve_expr(value.func) in _WRAPS_ONLY:
        return value.args[0].value
    return None


def _builtin_not_calling(src: "PythonSource", func: cst.BaseExpression) -> bool:
    """Is `func` a builtin of the language -- a bare name the file neither imports nor defines -- that never
    calls a function handed to it?"""
    if not isinstance(func, cst.Name) or func.value not in _BUILTIN_NAMES or func.value in _CALLING_BUILTINS:
        return False
    facts = src.facts
    name = func.value
    return name not in facts.imports and name not in facts.classes and \
        not any(q == name or q.endswith("." + name) for q in facts.functions)


_EXPLICIT_MODULES = ("torch.distributed.", "deepspeed.comm.", "deepspeed.utils.groups.")
ACCELERATE_FUNCS = {"gather", "gather_object", "reduce", "broadcast", "broadcast_object_list", "wait_for_everyone",
                    "pad_across_processes", "gather_for_metrics"}
ACCELERATOR_METHODS = {"gather", "gather_for_metrics", "reduce", "wait_for_everyone", "pad_across_processes",
                       "backward", "save_state", "load_state"}
ACCELERATOR_Z3 = {"get_state_dict", "save_model"}
# the accelerate backends (`AcceleratorState.distributed_type`) under which an Accelerator method is collective,
# where that is not every multi-process backend. accelerate 1.16 accelerator.py: `save_state` runs
# `model.save_checkpoint` on each model under DEEPSPEED (DeepSpeed's barriers and tag all_reduce) and
# MEGATRON_LM, `save_fsdp_model`/`save_fsdp_optimizer` under FSDP (state-dict gathers); under MULTI_GPU / NO /
# XLA it takes each process's own `state_dict` and writes files (`save` on the main process only, an RNG file
# per process): no collective -- unless the Accelerator names checkpoints itself
# (`ProjectConfiguration(automatic_checkpoint_naming=True)`: `wait_for_everyone()` on every backend, see
# `backends_of`). `load_state` mirrors it (`load_checkpoint`, `load_fsdp_model`; else local `torch.load`s).
# `get_state_dict` (and `save_model`, which calls it) gathers only under DEEPSPEED with ZeRO-3
# (`_zero3_consolidated_16bit_state_dict`) and FSDP (a full state dict); elsewhere it is the model's own
# `state_dict()`.
ACCELERATOR_BACKENDS = {"save_state": frozenset({"DEEPSPEED", "FSDP", "MEGATRON_LM"}),
                        "load_state": frozenset({"DEEPSPEED", "FSDP", "MEGATRON_LM"}),
                        "get_state_dict": frozenset({"DEEPSPEED", "FSDP"}),
                        "save_model": frozenset({"DEEPSPEED", "FSDP"})}
ENGINE_ALWAYS = {"backward": "gradient all_reduce/reduce_scatter across data-parallel ranks",
                 "step": "ZeRO overflow/grad-norm all_reduce and parameter updates across ranks",
                 "save_checkpoint": "DeepSpeed checkpointing: barriers and an all_reduce of the tag on every rank",
                 "load_checkpoint": "DeepSpeed checkpoint loading: barriers on every rank",
                 "train_batch": "pipeline-parallel send/recv and gradient reduction",
                 "eval_batch": "pipeline-parallel send/recv"}
ENGINE_Z3 = {"save_16bit_model", "save_fp16_model", "consolidated_16bit_state_dict"}
LIGHTNING_SAVE = "Lightning's Trainer.save_checkpoint: the strategy's barrier on every rank (a collective save under " \
    "DeepSpeed / sharded strategies)"
TRAINER_ALWAYS = {"train": "Trainer.train runs DeepSpeed/DDP gradient reductions",
                  "evaluate": "Trainer.evaluate gathers predictions and metrics across ranks",
                  "predict": "Trainer.predict gathers predictions across ranks"}
_INIT_CALLS = ("deepspeed.initialize", "deepspeed.init_inference")
_ENGINE_BUILDERS = ("initialize", "init_inference")
_MODEL_ROLES = ("engine", "wrapped", "moe")
# `_built_as_non_module` reads the bindings of a name in at most this many files
_NON_MODULE_FILES = 40
# packages whose engines serve their own model (no `nn.Module` a DeepSpeed engine runs): a construction of one of
# their classes, by its resolved import, is no model
_SERVING_PACKAGES = frozenset({"vllm", "sglang"})


@dataclass
class Hop:
    note: str
    node: cst.CSTNode
    source: "PythonSource"


@dataclass
class Fact:
    """Evidence a site rests on (issue 30; `rules.base.Clue` in the findings): `at` a libcst node, a JSON path of
    `source` (a JsonSource), a line number, or None; `path` where the fact is in no source of the run."""

    kind: str                      # engine | init_inference | zero-stage | moe-layer | collective | ...
    note: str
    at: object = None
    source: object = None
    found: bool = True
    path: Optional[str] = None


@dataclass
class Site:
    """A call that is (or reaches) a collective."""

    call: cst.Call
    source: "PythonSource"
    why: str                       # which collective, on which group
    certain: bool                  # collective under the known config (error) or only under some (warning)
    kind: str                      # explicit | forward | generate | engine | trainer | accelerate | function | library | dtensor
    chain: list[Hop] = field(default_factory=list)
    # how a DeepSpeed engine reached the call's receiver across attributes, parameters, returns (dslint/program/
    # roles.py): "engine created by deepspeed.initialize at a.py:12", "stored on self.actor at a.py:12", ...
    handoff: list[Hop] = field(default_factory=list)
    forward: Optional["ForwardFacts"] = None        # forward/generate sites: why the model's forward is collective
    function: Optional[tuple] = None                # function sites: (source, FunctionInfo) of the callee
    # issue 30: what makes the call collective in this launch unit (the engine, its config, an MoE layer), and
    # whether that is shown (`proven`) or rests on names and assumptions only (a model no engine/config/MoE
    # layer of the unit is seen to make collective)
    evidence: list[Fact] = field(default_factory=list)
    proven: bool = True
    # a function of the checked files handed to a call outside them (`study.optimize(objective, n_trials=n)`):
    # that call runs it, zero or more times (`SequenceBuilder.call`: a loop of its tree)
    callback: bool = False
    # the accelerate backends under which the call is collective (`ACCELERATOR_BACKENDS`), None for every one
    backends: Optional[frozenset] = None

    @property
    def label(self) -> str:
        """`engine.save_checkpoint(...)` (rendered on demand: code generation is not free)."""
        return f"{code_of(self.call.func, 48)}(...)"

    @property
    def target(self) -> str:
        """The collective at the end of the chain (`engine(batch)`), for messages."""
        return self.chain[-1].note.rsplit(" → ", 1)[-1] if self.chain else self.label


@dataclass
class ForwardFacts:
    status: str                    # "yes" | "no" | "unknown"
    why: str
    moe: bool = False
    zero3: bool = False
    evidence: list[Fact] = field(default_factory=list)      # the ZeRO-3 config, the MoE layer (issue 30)
    origin: str = ""               # where the ZeRO-3 config was found (a config path, `file.py:line`)


def _tail(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    while isinstance(expr, cst.Call):
        expr = expr.func.value if isinstance(expr.func, cst.Attribute) else None
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    """`Net(cfg).cuda(rank).eval()` → "Net": the constructor under a chain of method calls."""
    root = None
    while isinstance(expr, cst.Call):
        root = expr
        expr = expr.func.value if isinstance(expr.func, cst.Attribute) else None
    if root is None:
        return None
    func = root.func
    if isinstance(func, cst.Attribute) and func.attr.value in _ALT_CONSTRUCTORS:
        func = func.value          # `Net.from_pretrained(path)` builds a Net
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None


# calls that bind an engine/trainer/accelerator/wrapper role (the names `roles` tests; a definition is no call)
_ROLE_NAMES = frozenset({"initialize", "init_inference", "Accelerator", "DistributedDataParallel", "DDP",
                         "HfDeepSpeedConfig"})

# classmethods that build an instance of their class (HF PreTrainedModel and friends)
_ALT_CONSTRUCTORS = frozenset({"from_pretrained", "from_config", "_from_config", "from_checkpoint",
                               "load_from_checkpoint"})


def _is_moe_layer(callee: Optional[str]) -> bool:
    return bool(callee) and (callee.startswith("deepspeed.moe") and callee.endswith(".MoE")
                             or callee == "deepspeed.moe.MoE")


def _may_make_moe_layer(src: "PythonSource") -> bool:
    return src.may_call(MOE_NAME) and (src.outline is None or any(
        _is_moe_layer(callee) for callee, _ in src.outline.calls))


def _may_bind_role(src: "PythonSource", moe_classes: set[str]) -> bool:
    """Has the file a call whose name `roles` can take for a role (`_ROLE_NAMES`, `…Trainer`, an MoE holder,
    the class under `X.from_pretrained`)? Decided on the outline."""
    outline = src.outline
    if outline is None:
        return True
    for (callee, _), (last, _, owner_tail, _) in zip(outline.calls, outline.shapes):
        name = callee.rsplit(".", 1)[-1] if callee else last
        if name in _ALT_CONSTRUCTORS:
            name = owner_tail
        if name in _ENGINE_BUILDERS and "deepspeed" not in (callee or ""):
            continue                # `self.initialize()`: only DeepSpeed's builders bind an engine
        if name and (name in _ROLE_NAMES or name in moe_classes or name.endswith("Trainer")):
            return True
    return False


class CollectiveSites:
    def __init__(self, project: "ProjectView") -> None:
        self.project = project
        self.taint = ProjectTaint.of(project)
        self._reach: dict[tuple[int, str], Optional[Site]] = {}
        self._busy: set[tuple[int, str]] = set()
        self._forward: dict[int, ForwardFacts] = {}
        self._sites_by_node: dict[int, dict[int, CallSite]] = {}
        self._classified: dict[tuple[int, Optional[str]], Optional[Site]] = {}

    @classmethod
    def of(cls, project: "ProjectView") -> "CollectiveSites":
        return project.memo(cls, lambda: cls(project))

    @cached_property
    def program(self) -> "RoleAnalysis":
        """Roles that flow through attributes, parameters and returns (engines held as `self.actor_model`,
        passed as `model`): asked before the names are."""
        from dslint.program.roles import RoleAnalysis
        return RoleAnalysis.of(self.project)

    def _scope_of(self, src: "PythonSource", call: cst.Call) -> str:
        # a fact of the file's tree: kept on the source for every launch unit's view
        table = src.__dict__.get("_dslint_call_scopes")
        if table is None:
            table = src.__dict__["_dslint_call_scopes"] = {id(c.node): c.scope for c in src.facts.calls}
        return table.get(id(call), MODULE_SCOPE)

    def _role_site(self, src: "PythonSource", call: cst.Call, func: cst.BaseExpression,
                   owner: Optional[cst.BaseExpression], last: str) -> tuple[bool, Optional[Site]]:
        """A site decided by the roles the receiver (or the callee) can hold: engine methods, forward and
        generate of a DeepSpeed engine or the model it wraps, under that engine's config. (decided, site):
        when the roles decide, a forward they show local (ZeRO-0/1/2, no MoE) is no site whatever the names."""
        program = self.program
        scope = self._scope_of(src, call)
        if owner is not None:
            held = program.model_roles(src, owner, scope)
            engines = [r for r in held if r.kind == "engine"]
            if engines and last in ENGINE_ALWAYS:
                return True, Site(call, src, ENGINE_ALWAYS[last], True, "engine",
                                  handoff=self._handoff(src, owner, engines[0]),
                                  evidence=role_evidence(engines[0]))
            if engines and last in ENGINE_Z3:
                return True, self._forward_site(src, call, "engine", f"`{last}` gathers ZeRO-3 partitions",
                                                held=(engines, owner))
            if held and last in ("generate", "forward"):
                return True, self._forward_site(src, call, "generate" if last == "generate" else "forward", last,
                                                held=(held, owner))
        if isinstance(func, (cst.Name, cst.Attribute)):
            held = program.model_roles(src, func, scope)
            if held:
                return True, self._forward_site(src, call, "forward", "forward", held=(held, func))
        return False, None

    def _role_facts(self, held) -> tuple["ForwardFacts", object]:
        """The forward facts of the engines' own scripts (their configs), the most collective first."""
        rank = {"yes": 0, "unknown": 1, "no": 2}
        best = None
        for role in held:
            facts = self._created_facts(role)
            order = (rank[facts.status], not facts.zero3)
            if best is None or order < best[0]:
                best = (order, facts, role)
        return best[1], best[2]

    def _created_facts(self, role) -> "ForwardFacts":
        """The forward facts of the engine a role holds, under the configs that reach the very
        `deepspeed.initialize` call that created it (`ProjectView.configs_for_call`); the script's otherwise."""
        origin = getattr(role, "origin", None)
        if not (isinstance(origin, tuple) and len(origin) == 4 and origin[0] == "engine"):
            return self.forward(role.src)
        memo = self.__dict__.setdefault("_created", {})
        if origin not in memo:
            src, line = role.src, origin[2]
            call = next((c for c in src.facts.calls if c.callee and c.callee.rsplit(".", 1)[-1] in (
                "initialize", "init_inference") and src.span(c.node).line == line), None)
            memo[origin] = self._forward_facts(src, self.project.configs_for_call(src, call)) \
                if call is not None else self.forward(src)
        return memo[origin]

    @staticmethod
    def _handoff(src: "PythonSource", via: cst.BaseExpression, role) -> list[Hop]:
        """The role's hand-offs, shown when it crossed a scope (stored, passed, returned) or a file."""
        if len(role.steps) < 2 and role.src is src:
            return []
        hops = [Hop(step.note, (step.line, step.col), step.src) for step in role.steps]
        return hops + [Hop(f"read as `{code_of(via, 48)}`", via, src)]

    # --- roles: who is an engine, a trainer, an accelerator, an MoE model ---------------------------------
    @cached_property
    def _assignments(self) -> list[tuple["PythonSource", str, Optional[str], cst.Call, bool, cst.BaseExpression]]:
        """(source, target tail, resolved callee, call, first-of-tuple, target) for `x = f(...)`-like
        statements."""
        out = []
        moe_names = self.moe_classes | self._moe_builder_names

        builders = frozenset(self._accelerator_builders)

        def may_bind(src: "PythonSource") -> bool:
            return (any(c in src.text for c in moe_names) or src.may_call(_ROLE_NAMES)
                    or src.may_call(TRAINER, suffix=True) or bool(builders) and src.may_call(builders)) \
                and _may_bind_role(src, moe_names | builders)
        # the others have no call that can bind a role: they are not parsed
        for src in self.project.files_where(("roles.assignments", frozenset(moe_names)), may_bind):
            out.extend((src, *row) for row in _file_assignments(src))
        return out

    @cached_property
    def _accelerator_builders(self) -> dict[str, list[tuple["PythonSource", str]]]:
        """Last name → the functions of the checked files (not methods) that return an `accelerate.Accelerator`
        they build (`return Accelerator(...)`, or a local bound to one): a call of one hands its caller an
        Accelerator, whatever either is called."""
        out: dict[str, list[tuple["PythonSource", str]]] = {}
        for src in self.project.mentioning("Accelerator"):
            if not src.may_call(frozenset({"Accelerator"})):
                continue
            for qual, info in src.facts.functions.items():
                if info.class_name is None and _returns_accelerator(src, info.node):
                    out.setdefault(info.name, []).append((src, qual))
        return out

    def _builds_accelerator(self, src: "PythonSource", callee: Optional[str]) -> bool:
        """Does a call of `callee` run one of `_accelerator_builders` (resolved, not matched by name)?"""
        last = (callee or "").rsplit(".", 1)[-1]
        if last not in self._accelerator_builders:
            return False
        hit = self.project.find_function_source(callee, near=src)
        return hit is not None and hit in self._accelerator_builders[last]

    @cached_property
    def _library_trainer_accelerators(self) -> bool:
        """Does a class of the checked files that is a transformers/TRL Trainer (`builds_library_trainer` on its
        bases) read `self.accelerator`, the `Accelerator` the library's Trainer builds and keeps there?"""
        for src in self.project.mentioning("self.accelerator"):
            outline = src.outline
            if outline is not None and any(builds_library_trainer(self.project, src, base)
                                           for cls in outline.classes.values() for base in cls.bases if base):
                return True
        return False

    @cached_property
    def _moe_builder_names(self) -> set[str]:
        """Last names of the functions of the checked files that build MoE layers (`build_model`, `moefy`)
        and "MoE" itself: calls that can hand an MoE model to the name they are assigned to."""
        if not self.moe_layers:
            return set()
        return {"MoE"} | {f.rsplit(".", 1)[-1] for f in moe_facts(self.project).builder_functions}

    def _holds_moe(self, src: "PythonSource", call: cst.Call) -> bool:
        """The call builds a model holding DeepSpeed MoE layers: a holder class (`Net(...)`, `Net.from_pretrained`,
        a chain of method calls on one) or a function of the checked files that builds and returns one
        (`build_model(args).cuda()`)."""
        if _root_name(call) in self.moe_classes:
            return True
        return bool(self._moe_builder_names) and _root_name(call) in self._moe_builder_names \
            and returns_moe_model(self.project, src, call)

    @cached_property
    def moe_layers(self) -> list[tuple["PythonSource", cst.Call]]:
        out = []
        for src in self.project.files_where("moe_layers", _may_make_moe_layer):    # on the outline: the others
            for call in src.facts.calls:                                            # are not parsed
                if _is_moe_layer(call.callee) and unset_switch(self.project, src, src.span(call.node).line) is None:
                    out.append((src, call.node))    # (not one built only under a keyword switch nothing sets)
        return out

    @cached_property
    def moe_classes(self) -> set[str]:
        """Classes of the checked files whose instances hold a DeepSpeed MoE layer (directly or nested)."""
        holders = {id(node) for _, node in self.moe_layers}
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            # a class holds a layer when it makes a holder call, or constructs a class found so far
            candidates = {id(src): src for src, _ in self.moe_layers}
            for name in found:
                candidates.update((id(src), src) for src in self.project.using_identifier(name))
            for src in candidates.values():
                for cls in src.facts.classes.values():
                    if cls.name in found:
                        continue
                    calls = [c for m in cls.methods.values() for c in m.calls]
                    if any(id(c.node) in holders or (c.attr in found) for c in calls):
                        found.add(cls.name)
                        changed = True
        return found

    @cached_property
    def roles(self) -> dict[str, set[str]]:
        engine, wrapped, trainer, accel, moe = set(), set(), set(), set(), set()
        for src, tail, callee, call, first, target in self._assignments:
            last = (callee or "").rsplit(".", 1)[-1] or _root_name(call) or ""
            if callee and any(callee == c or callee.endswith("." + c.split(".")[-1]) and "deepspeed" in callee
                              for c in _INIT_CALLS):
                engine.add(tail)
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value == "model":
                        if _tail(arg.value):
                            wrapped.add(_tail(arg.value))
            elif last.endswith("Trainer"):
                trainer.add(tail)
            elif last == "Accelerator" or self._builds_accelerator(src, callee):
                accel.add(tail)
            elif isinstance(target, cst.Attribute) and _is_moe_layer(callee):
                # `model.mlp = MoE(...)`: the object the layer is attached to holds MoE layers (`self.` is the
                # holder class, found by `moe_classes`)
                root = target
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(root, cst.Name) and root.value not in ("self", "cls"):
                    moe.add(root.value)
            elif last in self.moe_classes or self._holds_moe(src, call) or (
                    last in ("DistributedDataParallel", "DDP") and call.args
                    and (_tail(call.args[0].value) in moe or isinstance(call.args[0].value, cst.Call)
                         and self._holds_moe(src, call.args[0].value))):
                moe.add(tail)
        if self._library_trainer_accelerators:
            accel.add("accelerator")        # the library Trainer's own attribute (`self.accelerator`)
        return {"engine": engine, "wrapped": wrapped, "trainer": trainer, "accelerator": accel, "moe": moe}

    def role(self, tail: Optional[str]) -> Optional[str]:
        if not tail:
            return None
        r = self.roles
        if tail in r["engine"]:
            return "engine"
        if tail in r["moe"]:
            return "moe"
        if tail in r["wrapped"]:
            return "wrapped"
        if tail in r["trainer"]:
            return "trainer"
        if tail in r["accelerator"]:
            return "accelerator"
        return None

    # --- config: is a forward collective? ---------------------------------------------------------------
    def configs(self, src: "PythonSource") -> list["ConfigView"]:
        """The configs of the script, or for a helper module those of the scripts that import it."""
        found = self.project.configs_for(src)
        if found or not src.module_name:
            return found
        mod = src.module_name
        for other in self.project.using_identifier(mod.rsplit(".", 1)[-1]):
            if other is not src and any(v == mod or v.startswith(mod + ".") or v.endswith("." + mod)
                                        for v in other.outline.imports.values()):
                found = found + [c for c in self.project.configs_for(other) if c not in found]
        return found

    def forward(self, src: "PythonSource") -> ForwardFacts:
        key = id(src)
        if key in self._forward:
            return self._forward[key]
        facts = self._forward_facts(src)
        self._forward[key] = facts
        return facts

    def _forward_facts(self, src: "PythonSource", configs: Optional[list["ConfigView"]] = None) -> ForwardFacts:
        if configs is None:
            configs = self.configs(src)
        stages = [c.zero_stage for c in configs]
        zero3 = next((c for c in configs if c.zero_stage == 3), None)
        moe = self._moe_collective(src)
        if moe:
            return ForwardFacts("yes", moe, moe=True, zero3=zero3 is not None,
                                evidence=self._moe_facts(src) + ([config_fact(zero3)] if zero3 is not None else []))
        if zero3 is not None:
            return ForwardFacts("yes", f"ZeRO-3 ({zero3.origin}) all-gathers partitioned parameters in every forward",
                                zero3=True, evidence=[config_fact(zero3)],
                                origin=str(zero3.origin))
        if configs and all(s is not None for s in stages):
            return ForwardFacts("no", f"ZeRO stage {max(stages)} keeps full parameters on every rank")
        return ForwardFacts("unknown", "a collective if the DeepSpeed config enables ZeRO-3 (parameter all-gather) "
                                       "or the model has expert-parallel MoE layers; no config was found")

    def _moe_facts(self, near: Optional["PythonSource"] = None) -> list[Fact]:
        """The MoE layer `_moe_collective` cites, as evidence."""
        layers = self.moe_layers
        if not layers:
            return []
        src, call = next(((s, c) for s, c in layers if s is near), layers[0])
        return [Fact("moe-layer", "DeepSpeed MoE layer", call, src)]

    def _moe_collective(self, near: Optional["PythonSource"] = None) -> str:
        """Why a forward of an MoE model is collective ("" when it is not); cites a layer of `near` first."""
        layers = self.moe_layers
        if not layers:
            return ""
        sizes = []
        for src, call in layers:
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "ep_size"), None)
            sizes.append(literal_value(arg.value) if arg is not None else 1)
        initialised = any(callee in _INIT_CALLS for s in self.project.mentioning(*_ENGINE_BUILDERS)
                          for callee, _ in (s.outline.calls if s.outline is not None else ()))
        version = version_tuple(self.project.deepspeed_version)
        if all(s == 1 for s in sizes) and (initialised or (version is not None and version >= (0, 19, 1))):
            return ""
        pick = next((i for i, (s, _) in enumerate(layers) if s is near), 0)
        src, call = layers[pick]
        size = f"ep_size={sizes[pick]}, " if isinstance(sizes[pick], int) else ""
        line = src.span(call).line
        where = f"{src.path}:{line}" if line else src.path
        group = "the expert-parallel group" if initialised else \
            "the WORLD group (no deepspeed.initialize created its expert groups)"
        return f"DeepSpeed MoE ({size}{where}) runs all_to_all over {group} in every forward"

    # --- classification -----------------------------------------------------------------------------------
    def classify(self, src: "PythonSource", call: cst.Call, cls: Optional[str] = None,
                 assumed: frozenset = frozenset()) -> Optional[Site]:
        """The collective site `call` is (or reaches), if any. `assumed`: `self.` flags the callers' branches
        have decided on the way here (see `settled`)."""
        key = (id(call), cls, assumed)
        if key in self._classified:
            return self._classified[key]
        site = self._classify(src, call, cls, assumed)
        if not self._busy:          # an answer given inside a recursive `reaches` may be partial: not kept
            self._classified[key] = site
        return site

    def settled(self, src: "PythonSource", call: cst.Call) -> frozenset:
        """The `self.` flags decided where `call` runs in its function (`if self.args.pipe: ... else: <call>`)."""
        memo = self.__dict__.setdefault("_settled", {})
        scope = self._scope_of(src, call)
        key = (id(src), scope)
        table = memo.get(key)
        if table is None:
            info = src.facts.functions.get(scope)
            body = info.node.body if info is not None else None
            raw = switches.rebound_flags(info, settled_flags(body.body)) if isinstance(body, cst.IndentedBlock) \
                else {}
            table = memo[key] = {k: switches.qualify(src, info, v) for k, v in raw.items()}
        return table.get(id(call), frozenset())

    def _tested(self, src: "PythonSource", info: FunctionInfo) -> frozenset:
        """Every flag some branch of the function decides (what a caller's switch can settle)."""
        memo = self.__dict__.setdefault("_tested_memo", {})
        key = (id(src), info.qualname)
        if key not in memo:
            memo[key] = frozenset()         # a recursive call tests nothing more
            own = {f for c in info.calls for f in self.settled(src, c.node)}
            memo[key] = frozenset(own | self._handed_tests(src, info))
        return memo[key]

    def _handed_tests(self, src: "PythonSource", info: FunctionInfo) -> set:
        """The flags of `info`'s parameters that a function it calls tests, the parameter handed on unchanged
        (`def append(self, obj, gather=False): self._append(obj, gather=gather)`, `_append` testing `gather`)."""
        out = set()
        for c in info.calls:
            if not any(isinstance(a.value, cst.Name) and a.value.value in info.params for a in c.node.args):
                continue
            hit = self.taint.function_info(self.taint.call_source(src, src.facts.resolve_expr(c.node.func),
                                                                  info.class_name))
            if hit is None:
                continue
            inner = self._tested(*hit)
            for name, mine in switches.handed_params(c.node, info, hit[1]).items():
                for flag, truth in inner:
                    # the parameter, a field of it, or a comparison of either with literals (`switches.MEMBER`)
                    handed = switches.rebased(flag, f"param:{hit[1].qualname}:{name}", f"param:{info.qualname}:{mine}")
                    if handed is not None:
                        out.add((handed, truth))
        return out

    def _switched(self, src: "PythonSource", call: cst.Call, hit, assumed: frozenset, on_self: bool) -> frozenset:
        """The flags a call hands its callee (collective_switches.py): its own `self.` flags and those decided around it for
        a method on `self`; module globals decided by the callers' branches or by a context manager around the
        call, through any call; the callee's parameters its literal arguments settle. The caller's parameters
        stay behind."""
        around = assumed | self.settled(src, call)
        scope = self._scope_of(src, call)
        info = src.facts.functions.get(scope)
        if info is not None:
            around = around | switches.context_globals(src, info, self._with_target).get(id(call), frozenset())
        passed = {f for f in around if f[0].startswith("global:") or on_self and not f[0].startswith("param:")}
        tested = self._tested(*hit)
        passed |= switches.literal_flags(call, hit[1], tested)
        if info is not None:
            passed |= switches.handed_flags(call, info, hit[1], around, tested)
        # only what the callee (or a function it calls) can test: an unrelated flag would split the memo (a
        # comparison's subject is enough: `local_rank in (-1, 0)` decides the callee's `local_rank == 1`)
        return frozenset(f for f in passed if f[0].startswith(("global:", "self.")) or switches.testable(f, tested))

    def reached_beyond(self, src: "PythonSource", call: cst.Call, cls: Optional[str], facts: frozenset,
                       block: cst.CSTNode) -> bool:
        """Does the checked function `call` runs still reach a collective where the caller's unqualified `facts`
        hold (`switches.handed_facts`: through the names it passes as they are, and its literal arguments)?
        True where nothing settles the callee's tests."""
        hit = self.taint.function_info(self.taint.call_source(src, src.facts.resolve_expr(call.func), cls))
        if hit is None:
            return True
        tested = self._tested(*hit)
        mapped = frozenset(f for f in switches.handed_facts(call, hit[1], facts, block) if switches.testable(f, tested))
        if not mapped:
            return True
        return self.reaches(*hit, assumed=mapped | switches.literal_flags(call, hit[1], tested)) is not None

    def _with_target(self, src: "PythonSource", call: cst.Call):
        scope = self._scope_of(src, call)
        info = src.facts.functions.get(scope)
        return self.taint.function_info(self.taint.call_source(src, src.facts.resolve_expr(call.func),
                                                               info.class_name if info else None))

    def _classify(self, src: "PythonSource", call: cst.Call, cls: Optional[str] = None,
                  assumed: frozenset = frozenset()) -> Optional[Site]:
        callee = src.facts.resolve_expr(call.func)
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
            else None
        if last is None:
            return None
        if callee and callee.startswith(_EXPLICIT_MODULES) and last in EXPLICIT:
            return Site(call, src, f"`{last}` on its process group", True, "explicit")
        if callee and callee.startswith("deepspeed") and last == "GatheredParameters":
            return self._forward_site(src, call, "gather", "`GatheredParameters` all-gathers ZeRO-3 partitions")
        if callee and callee.startswith("accelerate.") and last in ACCELERATE_FUNCS:
            return Site(call, src, f"accelerate `{last}` across all processes", True, "accelerate")
        if last in ("iter", "__iter__"):
            hidden = datapipe_iteration(src, call, self._scope_of(src, call))
            if hidden is not None:          # a collective inside a library call (library_collectives.py)
                why, at, certain = hidden
                return Site(call, src, why, certain, "library",
                            evidence=[Fact("collective", "the loader's dataset is an IterDataPipe", at, src)])
        owner = func.value if isinstance(func, cst.Attribute) else None
        if last == "full_tensor" and owner is not None and self.taint.call_source(src, callee, cls) is None:
            gather = dtensor_gather(src, call, self._scope_of(src, call))
            if gather is not None:      # torch DTensor's gather over its mesh (library_collectives.py)
                why, at = gather
                fact = Fact("collective", "the receiver is tested as a DTensor", at, src) if at is not None else \
                    Fact("collective", "the file imports torch's DTensor", None, src)
                return Site(call, src, why, True, "dtensor", evidence=[fact])
        if self.program.active:
            decided, site = self._role_site(src, call, func, owner, last)
            if decided:
                return site
        owner_role = self.role(_tail(owner)) if owner is not None else None
        if owner_role == "accelerator":
            if last in ACCELERATOR_METHODS:
                return Site(call, src, f"accelerate `{last}` across all processes", True, "accelerate",
                            evidence=self._bound_makers(src, owner, "accelerate"), backends=self.backends_of(last))
            if last in ACCELERATOR_Z3:
                site = self._forward_site(src, call, "accelerate", f"`{last}` gathers ZeRO-3 partitions")
                return replace(site, backends=self.backends_of(last)) if site is not None else None
        if owner_role == "trainer":
            if last in TRAINER_ALWAYS:
                return Site(call, src, TRAINER_ALWAYS[last], True, "trainer",
                            evidence=self._bound_makers(src, owner, "trainer"))
            if last == "save_model":
                return self._forward_site(src, call, "trainer", "Trainer.save_model gathers ZeRO-3 partitions")
        if last == "save_checkpoint" and owner is not None and "ightning" in src.text and \
                accelerate_typing(self.taint, src).is_lightning_trainer(owner, cls):
            # Lightning's `Trainer.save_checkpoint` ends in `strategy.barrier("Trainer.save_checkpoint")` on every
            # strategy (and the DeepSpeed / sharded strategies save collectively): a collective on its trainer
            return Site(call, src, LIGHTNING_SAVE, True, "engine")
        if last in ENGINE_ALWAYS and (owner_role == "engine" or last in ("save_checkpoint", "load_checkpoint")
                                      and owner is not None and "deepspeed" in src.text
                                      and self.taint.call_source(src, callee, cls) is None):
            # an owner of unknown role is taken for an engine only where the call runs no checked function: a
            # class's own `save_checkpoint` (or an instance's, through its constructor) is followed like any
            # other function below, and is collective only if its body reaches a collective
            return Site(call, src, ENGINE_ALWAYS[last], True, "engine", evidence=self._bound_engines(src, owner))
        if last in ENGINE_Z3 and owner_role == "engine":
            return self._forward_site(src, call, "engine", f"`{last}` gathers ZeRO-3 partitions")
        if self._is_model(func) and not self._defined_callable(src, func, callee, cls, self._scope_of(src, call)) \
                and not self._built_as_non_module(func):
            return self._forward_site(src, call, "forward", "forward")
        if last in ("generate", "forward") and owner is not None and self._is_model(owner) \
                and not self._built_as_non_module(owner):
            return self._forward_site(src, call, "generate" if last == "generate" else "forward", last)
        if last == "generate" and isinstance(owner, cst.Name) and self._is_model(self._alias(src, call, owner)):
            return self._forward_site(src, call, "generate", last)
        target = self.taint.call_source(src, callee, cls)
        if target is None:
            return self._callback_site(src, call, cls)
        if not self.able((id(target[0]), target[1])):
            return None             # decided on the outlines: the callee's file is not parsed for it
        hit = self.taint.function_info(target)
        if hit is not None:
            # a method called on `self` reads the object's flags as the caller left them: a flag the caller's
            # branch decided decides the callee's branches on it too
            on_self = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
            inner = self.reaches(*hit, assumed=self._switched(src, call, hit, assumed, on_self))
            if inner is not None:
                hop = Hop(f"{hit[1].name}() → {inner.label}", inner.call, inner.source)
                return Site(call, src, inner.why, inner.certain, "function", [hop, *inner.chain],
                            handoff=inner.handoff, forward=inner.forward, function=hit,
                            evidence=inner.evidence, proven=inner.proven, backends=inner.backends)
        return None

    def backends_of(self, method: str) -> Optional[frozenset]:
        """The accelerate backends under which `accelerator.<method>(...)` is collective (None: every one). A
        project that may turn on `automatic_checkpoint_naming` (it names the setting anywhere other than as a
        literal `automatic_checkpoint_naming=False` argument) makes `save_state` wait for every process on
        every backend."""
        backends = ACCELERATOR_BACKENDS.get(method)
        if backends is None or method != "save_state":
            return backends
        naming = self.__dict__.get("_auto_naming")
        if naming is None:
            word = "automatic_checkpoint_naming"
            naming = self.__dict__["_auto_naming"] = any(
                src.text.count(word) > sum(1 for site in src.facts.calls for arg in site.node.args
                                           if arg.keyword is not None and arg.keyword.value == word
                                           and literal_value(arg.value) is False)
                for src in self.project.mentioning(word))
        return None if naming else backends

    def _callback_site(self, src: "PythonSource", call: cst.Call, cls: Optional[str]) -> Optional[Site]:
        """A call outside the checked files handed a function of them by name (`study.optimize(objective, ...)`,
        `executor.submit(step)`): the outside code runs it, so the call reaches what the function reaches --
        zero or more times, as a loop does. The outline pre-filters follow the same hand-overs (`Outline.name_args`,
        `_handed_targets`): a function whose only collective is a callback's is among `site_units`."""
        if src.facts.resolve_expr(call.func) in _WRAPS_ONLY:
            return None         # `functools.partial(f, model)` builds a callable: what calls it runs `f`
        handed = [] if _builtin_not_calling(src, call.func) else \
            [(name.value, False) for arg in call.args if not arg.star
             for name in (_handed_name(src, arg.value),) if name is not None]
        if call.args and not call.args[0].star and runs_code_text(src.facts.resolve_expr(call.func)):
            text = literal_value(call.args[0].value)
            if isinstance(text, str):       # `cProfile.runctx("train()", ...)`: run once, here (code_strings.py)
                handed = [(name, True) for name in called_names(text)]
        for name, once in handed:
            if enclosing_function(src.outline, self._scope_of(src, call), name) is False:
                continue        # a parameter of the call's function or of one around it: a value, no definition
            target = self._local_function(src, call, name) or \
                self.taint.call_source(src, src.facts.resolve(name), cls)
            if target is None or not self.able((id(target[0]), target[1])):
                continue
            hit = self.taint.function_info(target)
            if hit is None:
                continue
            inner = self.reaches(*hit)
            if inner is not None:
                hop = Hop(f"{code_of(call.func, 40)}(...) runs {hit[1].name}() → {inner.label}", inner.call,
                          inner.source)
                return Site(call, src, inner.why, inner.certain, "function", [hop, *inner.chain],
                            handoff=inner.handoff, forward=inner.forward, function=hit,
                            evidence=inner.evidence, proven=inner.proven, callback=not once, backends=inner.backends)
        return None

    def _local_function(self, src: "PythonSource", call: cst.Call, name: str) -> Optional[tuple["PythonSource", str]]:
        """A function nested in the call's scope or an enclosing one, by that name (the file may nest others of
        the same name elsewhere: each `run_hp_search_*` its own `_objective`)."""
        found = enclosing_function(src.outline, self._scope_of(src, call), name)
        return (src, found) if found else None

    def _defined_callable(self, src: "PythonSource", func: cst.BaseExpression, callee: Optional[str],
                          cls: Optional[str], scope: Optional[str] = None) -> bool:
        """Does a bare name call a function or class the checked files define (`get_engine_version()`,
        `TorchCheckpointEngine()`), rather than an object (a model, an engine) whose call is its forward? What
        the name spells does not matter: a definition is no module instance."""
        if isinstance(func, cst.Attribute):
            return self._names_method(src, func, callee, cls, scope)
        if not isinstance(func, cst.Name) or callee is None:
            return False
        return self.taint.call_source(src, callee, cls) is not None or \
            self.project.class_for_callee(src, callee) is not None or self._library_import(src, func.value)

    def _names_method(self, src: "PythonSource", func: cst.Attribute, callee: Optional[str],
                      cls: Optional[str], scope: Optional[str] = None) -> bool:
        """Does `x.name(...)` call a method rather than an object held in the attribute `name`? It does when the
        call resolves to a function of the checked files (`self._engine_infer(...)`: followed into its body
        instead). Otherwise the receiver's class decides (`_receiver_classes`: `self`'s class, the constructor
        bound to the name or field, its annotation): a method when that class or a checked base defines
        `name` (`self.vllm_client.get_engine_type()`, a method of the server client) -- a definition is no
        module instance --, an attribute holding an object when none does. An attribute `name` bound by a
        role-giving assignment (an engine, a model it wraps, an MoE model) holds that object. Where the
        receiver's class is not known (a parameter, a library's object) nothing shows a method: the call is
        the object's."""
        if callee is not None and self.taint.call_source(src, callee, cls, scope=scope) is not None:
            return True
        name = func.attr.value
        roles = self.roles
        if any(name in roles[k] for k in ("engine", "wrapped", "moe")):
            return False
        classes = self._receiver_classes(src, func.value, cls, scope)
        out = bool(classes) and any(self.taint._method_of(where, owner, name) is not None for where, owner in classes)
        if not out:
            # the attribute holds, by every construction, an instance of a checked class that is no module (a
            # server client): calling it runs that class's `__call__`, no model forward
            held = self._receiver_classes(src, func, cls, scope)
            out = bool(held) and not any((id(c[0]), c[1]) in self._module_like_ids for c in held)
        return out

    def _receiver_classes(self, src: "PythonSource", owner: cst.BaseExpression, cls: Optional[str],
                          scope: Optional[str]) -> list[tuple["PythonSource", str]]:
        """The checked classes (source, qualified name) the receiver of a method call is an instance of: `self`
        in a method of `cls`; `self.field` by the constructors the class family stores there or that the class's
        construction sites hand its `__init__` for it (`_handed_field`); a local name by the constructors bound
        to it in the call's scope (`Outline.instances`); a constructor call itself. [] when any of those is no
        checked class or none is known."""
        outline = src.outline
        if outline is None:
            return []
        ctors: list[tuple["PythonSource", str]] = []
        if isinstance(owner, cst.Name) and owner.value == "self" and cls is not None:
            return [(src, cls)] if cls in outline.classes else []
        if isinstance(owner, cst.Attribute) and isinstance(owner.value, cst.Name) and owner.value.value == "self" \
                and cls is not None and cls in outline.classes:
            for where, family in self.taint._class_family(src, cls):
                ctors += [(where, c) for c in where.outline.fields.get(f"{family}.{owner.attr.value}", ())]
                handed = self._handed_field(where, family, owner.attr.value)
                if handed is None:
                    return []
                ctors += handed
        elif isinstance(owner, cst.Name) and scope is not None:
            ctors = [(src, c) for c in outline.instances.get(f"{scope}:{owner.value}", ())]
        elif isinstance(owner, cst.Call):                   # `Evaluator().score(...)`
            ctors = [(src, src.facts.resolve_expr(owner.func))]
        out = []
        for where, ctor in ctors:
            found = self.project.class_for_callee(where, ctor) if ctor else None
            if found is None or found[0].outline is None:
                return []
            out.append(found)
        return out

    def _handed_field(self, src: "PythonSource", cls: str, attr: str) -> Optional[list[tuple["PythonSource", str]]]:
        """`self.client = client` in `cls.__init__`, `client` its parameter: the constructor calls the class's
        construction sites hand it (`Trainer(args, RolloutClient(url))`), as (source, callee); [] when
        `__init__` stores no parameter there; None when a site hands something else (a name, a function's result)
        or passes it by a spread."""
        init = src.facts.functions.get(f"{cls}.__init__")
        if init is None:
            return []
        params = set(init.params)
        from dslint.sources.cstwalk import walk
        stored = {n.value.value for n in walk(init.node.body)
                  if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value in params
                  and any(isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                          and t.target.value.value == "self" and t.target.attr.value == attr for t in n.targets)}
        if not stored:
            return []
        param = next(iter(stored))
        positional = [p.name.value for p in (*init.node.params.posonly_params, *init.node.params.params)][1:]
        short = cls.rsplit(".", 1)[-1]
        out = []
        for where in self.project.using_identifier(short):
            if where.outline is None or short not in where.text:
                continue
            for site in where.facts.calls:
                if site.callee is None or site.callee.rsplit(".", 1)[-1] != short or \
                        self.project.class_for_callee(where, site.callee) != (src, cls):
                    continue
                value = next((a.value for a in site.node.args if a.keyword is not None and a.keyword.value == param),
                             None)
                passed = [a for a in site.node.args if a.keyword is None]
                if value is None:
                    if any(a.star for a in site.node.args):
                        return None
                    index = positional.index(param) if param in positional else -1
                    value = passed[index].value if 0 <= index < len(passed) else None
                if value is None:
                    continue            # the default applies
                if not isinstance(value, cst.Call):
                    return None
                out.append((where, where.facts.resolve_expr(value.func)))
        return out

    @cached_property
    def _module_like_ids(self) -> set:
        """(id of source, qualified name) of the checked classes that are `nn.Module`s or may be."""
        from dslint.program.models.modules import _module_like
        return {(id(s), c.qualname) for s, c in _module_like(self.project)}

    def _built_as_non_module(self, expr: cst.BaseExpression) -> bool:
        """Is the object a name (or attribute) holds, by every construction the checked files bind it to, an
        instance of a checked class that is no `nn.Module` (`self.inference_engine = LLM(...)`, the vLLM
        engine wrapper; a server client)? Then its `generate`/call is that class's method, no model forward,
        whatever the name spells. False when the name gets a role (an engine, a model an engine wraps, an MoE
        model), or some binding is not such a construction (a library's object, a function's result)."""
        tail = _tail(expr)
        if not tail or any(tail in self.roles[k] for k in ("engine", "wrapped", "moe")):
            return False
        memo = self.__dict__.setdefault("_non_module_memo", {})
        if tail not in memo:
            memo[tail] = False
            module_like = self._module_like_ids
            found = False
            files = self.project.using_identifier(tail)
            if len(files) > _NON_MODULE_FILES:
                return False        # a name used all over: not decided (each file would be parsed for it)
            for where in files:
                for row_tail, callee, _call, first, _target in _file_assignments(where):
                    if row_tail != tail:
                        continue
                    classes = None if first else self._constructed_classes(where, callee)
                    if classes is None or any((id(c[0]), c[1]) in module_like for c in classes):
                        return False
                    found = True
            memo[tail] = found
        return memo[tail]

    def _constructed_classes(self, src: "PythonSource", callee: Optional[str]) -> Optional[list]:
        """The checked classes (source, qualified name) a constructor call `callee(...)` of `src` may build: the
        class it names, a class nested in a function of the file (`class _Proxy: ...` in `__init__`), or the
        classes of that name in the modules of a checked package that re-exports one by a version test
        (`from verl.third_party.vllm import LLM`); [] for a class of a serving library (vLLM, SGLang: engines
        that run their own model, no module DeepSpeed wraps); None when not known."""
        if not callee or src.outline is None:
            return None
        hit = self.project.class_for_callee(src, callee)
        if hit is not None:
            return [hit]
        last = callee.rsplit(".", 1)[-1]
        if "." not in callee:
            nested = [(src, q) for q in src.outline.classes if q.rsplit(".", 1)[-1] == callee]
            return nested or None
        package = callee.rsplit(".", 1)[0]
        found = [(other, q) for other in self.project.python if other.outline is not None and other.module_name
                 and (other.module_name + ".").startswith(package + ".") for q in other.outline.classes
                 if q == last]
        if found:
            return found
        return [] if callee.split(".", 1)[0] in _SERVING_PACKAGES else None

    def _library_import(self, src: "PythonSource", name: str) -> bool:
        """Is `name` bound by an import from a package none of the checked files belongs to (`from deepspeed.
        runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine`)? Such a name is a class or
        function of that library, fixed when its module is imported: no model or engine this program builds
        (those are made at run time, by `deepspeed.initialize` or a constructor), so calling it is no forward."""
        qualified = src.facts.imports.get(name)
        if not qualified or qualified.startswith("."):
            return False
        top = qualified.split(".", 1)[0]
        return top not in self.project.checked_tops

    def _alias(self, src: "PythonSource", call: cst.Call, name: cst.Name) -> Optional[cst.BaseExpression]:
        """What a local of the calling function is bound to when the function binds it once, by a plain `=`, and
        it is no parameter (`module = self.engine.module` before `module.generate(...)`): the receiver is that
        expression's object. None otherwise."""
        return sole_binding(src.facts.functions.get(self._scope_of(src, call)), name.value)

    def _is_model(self, expr: Optional[cst.BaseExpression]) -> bool:
        """`engine`, `model` (wrapped by deepspeed.initialize), an MoE model, or `engine.module`."""
        tail = _tail(expr)
        if self.role(tail) in _MODEL_ROLES:
            return True
        return isinstance(expr, cst.Attribute) and tail == "module" and self.role(_tail(expr.value)) == "engine"

    def _call_sites(self, src: "PythonSource") -> dict[int, CallSite]:
        """id(call node) → the file's CallSite (resolved callee, enclosing scope)."""
        if id(src) not in self._sites_by_node:
            self._sites_by_node[id(src)] = {id(c.node): c for c in src.facts.calls}
        return self._sites_by_node[id(src)]

    @cached_property
    def _engine_bindings(self) -> dict[tuple[int, str], list[tuple["PythonSource", cst.Call]]]:
        """(id of source, name tail) → the `deepspeed.initialize`/`init_inference` calls that bind it there: the
        engine they return, or the `model=` they wrap."""
        out: dict[tuple[int, str], list[tuple["PythonSource", cst.Call]]] = {}
        for src, tail, callee, call, _first, _target in self._assignments:
            if callee and any(callee == c or callee.endswith("." + c.split(".")[-1]) and "deepspeed" in callee
                              for c in _INIT_CALLS):
                out.setdefault((id(src), tail), []).append((src, call))
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value == "model" and _tail(arg.value):
                        out.setdefault((id(src), _tail(arg.value)), []).append((src, call))
        return out

    def _engine_forward(self, src: "PythonSource", call: cst.Call, model: cst.BaseExpression
                        ) -> Optional[ForwardFacts]:
        """The forward facts of the engine a call runs, decided by the configs that reach the
        `deepspeed.initialize` call binding it in the same function (else at module level) of this file
        (`ProjectView.configs_for_call`); None when no such binding is seen (then the script's configs decide)."""
        if isinstance(model, cst.Attribute) and model.attr.value == "forward":
            model = model.value                 # `engine.forward(x)`
        tail = _tail(model)
        if tail == "module" and isinstance(model, cst.Attribute):
            tail = _tail(model.value)           # `engine.module.generate(...)`
        if self.role(tail) not in ("engine", "wrapped"):
            return None
        binds = self._engine_bindings.get((id(src), tail))
        if not binds:
            return None
        sites = self._call_sites(src)
        use = sites.get(id(call))
        scope = use.scope if use is not None else MODULE_SCOPE
        inits = [sites[id(c)] for _, c in binds if id(c) in sites]
        chosen = [c for c in inits if c.scope == scope] or [c for c in inits if c.scope == MODULE_SCOPE]
        if not chosen:
            return None
        configs: list["ConfigView"] = []
        for init in chosen:
            configs += [c for c in self.project.configs_for_call(src, init) if c not in configs]
        return self._forward_facts(src, configs)

    def _forward_site(self, src: "PythonSource", call: cst.Call, kind: str, what: str, held=None
                      ) -> Optional[Site]:
        """`held`: (roles, expression) when the receiver's roles decide -- the facts are then its engine's;
        else those of the `deepspeed.initialize` call binding the receiver's name, else the script's."""
        handoff: list[Hop] = []
        model = call.func.value if isinstance(call.func, cst.Attribute) and kind == "generate" else call.func
        fwd = None
        if held is not None:
            fwd, role = self._role_facts(held[0])
            handoff = self._handoff(src, held[1], role)
        elif kind in ("forward", "generate"):
            fwd = self._engine_forward(src, call, model)
        if fwd is None:
            fwd = self.forward(src)
        tail = _tail(model)
        receiver = call.func.value if isinstance(call.func, cst.Attribute) and kind != "forward" else call.func
        engine = role_evidence(role) if held is not None else self._bound_engines(src, receiver) \
            if kind not in ("accelerate", "trainer") else self._bound_makers(src, receiver, kind)
        if held is None and self.role(tail) == "moe":
            if self._moe_collective(src):
                fwd = ForwardFacts("yes", self._moe_collective(src), moe=True, evidence=self._moe_facts(src))
            elif tail not in self.roles["wrapped"]:
                # a plain module holding MoE layers whose all_to_all is skipped (ep_size=1, DeepSpeed >= 0.19.1)
                # and that no DeepSpeed engine wraps: its forward is local
                return None
        if fwd.status == "no":
            return None
        # issue 30: the forward is shown collective by a ZeRO-3 config or an MoE layer of the unit; with neither,
        # by a DeepSpeed engine that runs it (its ZeRO stage then unknown: said as a fact not seen)
        if kind == "gather":        # ZeRO-3's own API: the code is written for partitioned parameters
            engine = engine + [Fact("zero-stage", "`GatheredParameters` is ZeRO-3's API", call, src)]
        evidence = engine + fwd.evidence
        # issue 30, item 6: the evidence that the forward IS a collective comes before the finding -- a ZeRO-3
        # config or an MoE layer reaching the unit (`fwd.status == "yes"`), ZeRO-3's own API, or an inference
        # engine that splits the model over the ranks (`init_inference(mp_size=...)`: every forward all-reduces).
        # An engine alone, its ZeRO stage unknown, shows where the forward runs, not that it is a collective
        tensor_parallel = [f for f in engine if f.kind == "init_inference" and _splits_model(f)]
        if tensor_parallel:
            evidence = evidence + [Fact("tensor-parallel", "init_inference splits the model over the ranks "
                                                           "(mp_size): every forward all-reduces across them",
                                        tensor_parallel[0].at, tensor_parallel[0].source)]
        if engine and not tensor_parallel and fwd.status != "yes" and kind != "gather" and \
                all(f.kind == "init_inference" and _inference_runs_locally(f) for f in engine):
            # issue 30, init-inference-mp-size-one: an inference engine that keeps the whole model on each rank
            # (`mp_size` 1, no config or tensor-parallel setting that could split it) holds no collective in
            # its forward -- the InferenceEngine never partitions parameters (its `zero` setting is unused) --,
            # and no ZeRO-3 config or MoE layer reaches this model: each rank generates on its own
            return None
        proven = fwd.status == "yes" or kind == "gather" or bool(tensor_parallel)
        shipped = None
        if not proven and engine:
            # an engine, its stage unknown: a ZeRO-3 forward is still the finding's claim unless the configs the
            # project ships beside this code all keep full parameters (`shipped_stages`)
            shipped = self.shipped_stages(src)
            proven = shipped is None
        if shipped is not None:
            evidence = evidence + [Fact("zero-stage", f"the DeepSpeed configs beside this code ({shipped[1]}) are "
                                                      f"ZeRO stage {shipped[0]}: none enables ZeRO-3",
                                        found=False)]
        if not engine and fwd.status != "yes":
            evidence = evidence + [Fact("engine", "no DeepSpeed engine (deepspeed.initialize/init_inference, or an "
                                                  "object used as one) is seen to run this model", found=False)]
        if fwd.status != "yes" and kind != "gather" and shipped is None:
            evidence = evidence + [Fact("zero-stage", "no DeepSpeed config with a known ZeRO stage reaches this "
                                                      "code: ZeRO-3 assumed (collective only under ZeRO-3 or MoE)",
                                        found=False)]
        if kind not in ("forward", "generate"):
            why = (f"{what}: ZeRO-3 in {fwd.origin}" if fwd.origin else what) if fwd.status == "yes" and fwd.zero3 else \
                f"{what} when ZeRO-3 is on (assumed: no DeepSpeed config was found to tell)"
            if fwd.status == "yes" and not fwd.zero3:
                why = f"{what} when ZeRO-3 is on"
            return Site(call, src, why, fwd.status == "yes" and fwd.zero3, kind, handoff=handoff, forward=fwd,
                        evidence=evidence, proven=proven)
        prefix = {"forward": "its forward: ", "generate": "every generation step runs a forward: "}[kind]
        return Site(call, src, prefix + fwd.why, fwd.status == "yes", kind, handoff=handoff, forward=fwd,
                    evidence=evidence, proven=proven)

    def shipped_stages(self, src: "PythonSource") -> Optional[tuple[str, str]]:
        """When no config is seen to reach `src`: the DeepSpeed configs of the run nearest to it -- those under
        the closest folder above it that holds any -- when every one sets a ZeRO stage below 3, as (the stages,
        the folder); None when one enables ZeRO-3 or leaves its stage unknown, or the run has none. Evidence
        that the project, as shipped, runs no ZeRO-3 (minillm's configs/deepspeed: stages 1 and 2)."""
        memo = self.__dict__.setdefault("_shipped", {})
        folder = src.path.rsplit("/", 1)[0] if "/" in src.path else ""
        if folder in memo:
            return memo[folder]
        run = self.project.run_view or self.project
        configs = [(c.path, ConfigView(c.data, c.path).zero_stage) for c in run.json_configs]
        out = None
        here = folder
        while configs:
            near = [(p, st) for p, st in configs if not here or p.startswith(here + "/")]
            if near:
                stages = {st for _, st in near}
                if all(st is not None and st < 3 for st in stages):
                    out = ("/".join(str(st) for st in sorted(stages)), here or ".")
                break
            if not here:
                break
            here = here.rsplit("/", 1)[0] if "/" in here else ""
        memo[folder] = out
        return out

    def _bound_makers(self, src: "PythonSource", owner: cst.BaseExpression, kind: str) -> list[Fact]:
        """Evidence for an accelerator/Trainer receiver: the `Accelerator(...)`/`…Trainer(...)` call of this file
        that binds its name."""
        tail = _tail(owner)
        rows = [(s, c) for s, t, callee, c, _f, _t in self._assignments if s is src and t == tail and (
            (callee or "").rsplit(".", 1)[-1] == "Accelerator" if kind == "accelerate"
            else ((callee or "").rsplit(".", 1)[-1] or _root_name(c) or "").endswith("Trainer"))]
        return [Fact(kind if kind == "accelerate" else "trainer", f"`{tail}` built here", c, where)
                for where, c in rows[:1]]

    def _bound_engines(self, src: "PythonSource", model: Optional[cst.BaseExpression]) -> list[Fact]:
        """Evidence for a receiver named like an engine (`engine`, `self.model_engine`, `engine.module`): the
        `deepspeed.initialize`/`init_inference` call of this file that binds its name."""
        if model is None:
            return []
        if isinstance(model, cst.Attribute) and model.attr.value in ("forward", "generate"):
            model = model.value
        tail = _tail(model)
        if tail == "module" and isinstance(model, cst.Attribute):
            tail = _tail(model.value)
        if not tail:
            return []
        # this file's bindings only: a same-named variable of another file is no evidence (issue 30); an engine
        # that really flows here across files is the value roles' (`held`)
        binds = self._engine_bindings.get((id(src), tail)) or []
        out = []
        for where, call in binds[:1]:
            callee = where.facts.resolve_expr(call.func) or ""
            built = "init_inference" if callee.endswith("init_inference") else "initialize"
            out.append(Fact("init_inference" if built == "init_inference" else "engine",
                            f"`{tail}` bound by deepspeed.{built}", call, where))
        return out

    # --- interprocedural: does a function reach a site? ----------------------------------------------------
    def reaches(self, src: "PythonSource", info: FunctionInfo, assumed: frozenset = frozenset()) -> Optional[Site]:
        """A site the function's body reaches; `assumed`: (flag, truth) pairs its callers decided, so a
        call under a branch they exclude is not reached."""
        key = (id(src), info.qualname, assumed) if assumed else (id(src), info.qualname)
        if key in self._reach:
            return self._reach[key]
        if key in self._busy:
            return None
        self._busy.add(key)
        best: Optional[Site] = None
        # a value made once per process and kept (`if _WORLD_GROUP is None: _WORLD_GROUP = dist.new_group(...)`):
        # its collective runs at the first call only, where the program sets itself up; a later call under a
        # rank test skips it on every rank (a first call under a rank test is a limit: not seen)
        once = once_initialized_calls(info.node) if isinstance(info.node, cst.FunctionDef) else set()
        try:
            for call in info.calls:
                if assumed and switches.contradicts(assumed, self.settled(src, call.node)):
                    continue
                if id(call.node) in once:
                    continue
                site = self.classify(src, call.node, info.class_name, assumed)
                if site is not None and (best is None or site.certain and not best.certain or
                                         site.certain == best.certain and site.proven and not best.proven):
                    best = site
                    if site.certain:
                        break
        finally:
            self._busy.discard(key)
        self._reach[key] = best
        return best

    # --- the same questions on the outlines (CPython's tree): which files and functions can hold a site ------
    def _direct_site(self, src: "PythonSource", callee: Optional[str], shape) -> bool:
        """Can `_classify` take a call of this shape for a site without following it into a function? An
        over-approximation of its tests, on names only."""
        last, attr, owner_tail, owner_owner_tail = shape
        if last is None:
            return False
        if callee and (callee.startswith(_EXPLICIT_MODULES) and last in EXPLICIT
                       or callee.startswith("deepspeed") and last == "GatheredParameters"
                       or callee.startswith("accelerate.") and last in ACCELERATE_FUNCS):
            return True
        if last in ("iter", "__iter__") and may_iterate_datapipe(src.text) or last == "full_tensor" and attr:
            return True
        owner_role = self.role(owner_tail) if attr else None
        if owner_role == "accelerator" and (last in ACCELERATOR_METHODS or last in ACCELERATOR_Z3) \
                or owner_role == "trainer" and (last in TRAINER_ALWAYS or last == "save_model") \
                or owner_role == "engine" and (last in ENGINE_ALWAYS or last in ENGINE_Z3):
            return True
        if last in ("save_checkpoint", "load_checkpoint") and attr and "deepspeed" in src.text or \
                last == "save_checkpoint" and attr and "ightning" in src.text:
            return True
        if self.role(last) in _MODEL_ROLES or attr and last == "module" and owner_role == "engine":
            return True
        tails = self.program.tails          # names that hold an engine/model role somewhere (`_role_site`)
        if tails and (last in tails or attr and (owner_tail in tails or owner_tail == "module" and (
                owner_owner_tail is None or owner_owner_tail in tails))):
            return True
        return last in ("generate", "forward") and attr and (
            owner_role in _MODEL_ROLES or owner_tail == "module" and self.role(owner_owner_tail) == "engine") \
            or last == "generate" and attr and owner_owner_tail is None    # a local alias (`_alias`)

    def _call_targets(self, src: "PythonSource", callee: Optional[str], scope: str):
        return ((id(s), q) for s, q in self.taint.call_targets(src, callee, scope))

    def _handed_targets(self, src: "PythonSource", scope: str) -> list[tuple[int, str]]:
        """The functions `scope` hands to calls by bare name (`study.optimize(objective)`), on the outline: a
        function nested in the scope or an enclosing one, or what a call of that name would resolve to -- those
        `_callback_site` may follow, so the pre-filters count them as called."""
        outline = src.outline
        if outline is None:
            return []
        out = []
        defined = self._function_names(src)
        for name in outline.name_args.get(scope, ()):
            if name not in defined and name not in outline.imports:
                continue        # a local variable: no function of the checked files (most arguments)
            found = enclosing_function(outline, scope, name)
            if found is False:
                continue        # the parameter of a function around the call
            if found:
                out.append((id(src), found))
            out.extend(self._call_targets(src, outline.resolve(name), scope))
        return out

    def _function_names(self, src: "PythonSource") -> frozenset:
        """The last names of the functions and classes a file defines (nested ones included), memoised per file."""
        memo = self.__dict__.setdefault("_function_names_memo", {})
        names = memo.get(id(src))
        if names is None:
            names = memo[id(src)] = frozenset(q.rsplit(".", 1)[-1] for q in (*src.outline.functions,
                                                                              *src.outline.classes))
        return names

    @cached_property
    def site_units(self) -> set[tuple[int, str]]:
        """(id of source, qualified name) of every function for which `reaches` may find a site: one of its
        own calls may be a site directly, or may run such a function. A fixed point on the outlines."""
        able: set[tuple[int, str]] = set()
        callers: dict[tuple[int, str], set[tuple[int, str]]] = {}
        for src in self.project.python:
            outline = src.outline
            if outline is None:
                continue
            for (callee, scope), shape in zip(outline.calls, outline.shapes):
                if scope == MODULE_SCOPE:
                    continue
                unit = (id(src), scope)
                if unit in able:
                    continue
                if self._direct_site(src, callee, shape):
                    able.add(unit)
                elif callee is not None:
                    for target in self._call_targets(src, callee, scope):
                        callers.setdefault(target, set()).add(unit)
            for scope in outline.name_args:
                if scope != MODULE_SCOPE:
                    for target in self._handed_targets(src, scope):
                        callers.setdefault(target, set()).add((id(src), scope))
        work = list(able)
        while work:
            for caller in callers.get(work.pop(), ()):
                if caller not in able:
                    able.add(caller)
                    work.append(caller)
        return able

    def _unit_calls(self, unit: tuple[int, str]) -> list[tuple[Optional[str], tuple]]:
        """(callee, shape) of the calls whose innermost function is `unit`, from its file's outline."""
        per_file = self.__dict__.setdefault("_calls_by_unit", {})
        calls = per_file.get(unit[0])
        if calls is None:
            calls = per_file[unit[0]] = {}
            src = self._source_by_id.get(unit[0])
            outline = src.outline if src is not None else None
            if outline is not None:
                for (callee, scope), shape in zip(outline.calls, outline.shapes):
                    if scope != MODULE_SCOPE:
                        calls.setdefault(scope, []).append((callee, shape))
        return calls.get(unit[1], [])

    @cached_property
    def _source_by_id(self) -> dict[int, "PythonSource"]:
        return {id(s): s for s in self.project.python}

    def able(self, unit: tuple[int, str]) -> bool:
        """Is `unit` in `site_units`? Asked on demand: a search over the calls reachable from the function
        only, so a view of many files pays for what its checked files call, not for every function it holds.
        A search that finds no site settles every function it went through (what they reach, it went
        through too); one that finds a site settles the chain of calls that led there."""
        memo = self.__dict__.setdefault("_able", {})
        known = memo.get(unit)
        if known is not None:
            return known
        parent: dict[tuple[int, str], Optional[tuple[int, str]]] = {unit: None}
        todo = [unit]
        hit: Optional[tuple[int, str]] = None
        while todo and hit is None:
            current = todo.pop()
            src = self._source_by_id.get(current[0])
            if src is None:
                continue
            # each step: the targets of one call of the function, or a function it hands to a call by name
            steps = [(callee, shape, None) for callee, shape in self._unit_calls(current)]
            if current[1] != MODULE_SCOPE:     # as `site_units`: a module's top level is no unit
                steps += [(None, None, [target]) for target in self._handed_targets(src, current[1])]
            for callee, shape, handed in steps:
                if handed is not None:
                    targets = handed
                elif self._direct_site(src, callee, shape):
                    hit = current
                    break
                elif callee is None:
                    continue
                else:
                    targets = self._call_targets(src, callee, current[1])
                for target in targets:
                    if memo.get(target) is True:
                        parent.setdefault(target, current)
                        hit = target
                        break
                    if target not in parent and memo.get(target) is None:
                        parent[target] = current
                        todo.append(target)
                if hit is not None:
                    break
        if hit is None:
            for seen in parent:
                memo[seen] = False
            return False
        while hit is not None:
            memo[hit] = True
            hit = parent.get(hit)
        return True

    def may_have_sites(self, src: "PythonSource") -> bool:
        """Can any call of the file be a collective site? Decided on its outline (True without one)."""
        outline = src.outline
        if outline is None:
            return True
        for (callee, scope), shape in zip(outline.calls, outline.shapes):
            if self._direct_site(src, callee, shape):
                return True
            if callee is not None and any(self.able(t) for t in self._call_targets(src, callee, scope)):
                return True
        return False

    # --- process groups: which ranks call a site (dslint/program/process_groups.py) ------------------------------
    def group_of(self, site: Site) -> "Group":
        """The ranks a site's collective runs over: the group argument of an explicit collective; for a call of
        a checked function, the union of the groups of every collective it can reach; a model's forward, its
        generation and an engine's backward: `MODEL_STEP`; WORLD otherwise."""
        from dslint.program.process_groups import MODEL_STEP, WORLD, group_argument, resolve_group
        if site.kind == "explicit":
            func = site.call.func
            op = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            if op in ("new_group", "new_subgroups"):
                return WORLD
            scope = self._scope_of(site.source, site.call)
            info = site.source.facts.functions.get(scope)
            arg = group_argument(site.call, op)
            built = self._built_group(site.source, info, arg) if info is not None else None
            if built is not None:
                return built
            group = resolve_group(site.source, arg, info.node if info else None, at=site.call)
            if group.axes is None and group.ranks is None:
                stored = self._stored_group(info, arg)
                if stored is not None:
                    return stored
            return group
        if site.kind == "function" and site.function is not None:
            fixed, params = self._function_groups(*site.function)
            if not params:
                return fixed or WORLD
            scope = self._scope_of(site.source, site.call)
            info = site.source.facts.functions.get(scope)
            return self._bind_group_params(site.source, info.node if info else None, site.call,
                                           *site.function, fixed, params)
        func = site.call.func
        if site.kind in ("forward", "generate") or site.kind == "engine" and isinstance(func, cst.Attribute) and \
                func.attr.value == "backward":
            return MODEL_STEP
        return WORLD

    def _stored_group(self, info: Optional[FunctionInfo], arg) -> Optional["Group"]:
        """The group of a field the program's grid class stores per rank (`grid().embedding_proc_group`, or a
        local bound once to it), when every store of that field is a group of the ends of a pipeline
        (dslint/program/stage_end_groups.py); None otherwise."""
        from dslint.program.stage_end_groups import stage_end_group
        if isinstance(arg, cst.Name) and info is not None:
            values = [node.value for node in iter_assigns(info.node) for t in node.targets
                      if isinstance(t.target, cst.Name) and t.target.value == arg.value]
            arg = values[0] if len(values) == 1 else None
        if not isinstance(arg, cst.Attribute):
            return None
        return stage_end_group(self.project, arg.attr.value)

    def _built_group(self, src: "PythonSource", info: FunctionInfo, arg) -> Optional["Group"]:
        """A group a checked helper builds and returns: `group, members = build_group(...)` where the helper
        returns `new_group(ranks), ranks` -- the caller's `members` is then the group's member list, so `if
        rank in members:` around a collective on `group` is the group's own membership test; `group =
        make_group(ranks)` returning `new_group(<its parameter>)` has the caller's argument as members. A group
        of a getter the helper returns keeps its axes. None when `arg` is not bound so (`resolve_group`
        decides)."""
        from dslint.program.process_groups import Group, resolve_group
        from dslint.program.rank.reaching_ranks import iter_assigns
        if isinstance(arg, cst.Call):
            return self._returned_group(src, info, arg)
        if not isinstance(arg, cst.Name):
            return None
        binds = [(node, t.target) for node in iter_assigns(info.node) for t in node.targets
                 if _binds_name(t.target, arg.value)]
        if len(binds) != 1 or not isinstance(binds[0][0].value, cst.Call):
            return None
        node, target = binds[0]
        call = node.value
        hit = self._helper_returns(src, info, call)
        if hit is None:
            return None
        other, helper, returns = hit
        at: Optional[int] = None
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [el.value for el in target.elements]
            at = next(i for i, el in enumerate(names) if isinstance(el, cst.Name) and el.value == arg.value)
            if any(not isinstance(r, (cst.Tuple, cst.List)) or len(r.elements) != len(names) for r in returns):
                return None
        out: Optional[Group] = None
        for r in returns:
            value = r.elements[at].value if at is not None else r
            g = resolve_group(other, value, helper.node, at=value)
            if g.ranks is None and (g.axes is None or g.family == "handed-in"):
                return None             # no group dslint can name there: `resolve_group` decides as before
            if g.ranks is not None:
                members = None
                if at is not None:
                    j = next((j for j, el in enumerate(r.elements) if j != at and code_of(el.value, 400) == g.ranks),
                             None)
                    if j is not None and isinstance(names[j], cst.Name):
                        members = names[j].value
                elif g.ranks in helper.params:
                    i = helper.params.index(g.ranks)
                    passed = [a for a in call.args if a.keyword is None and not a.star]
                    keyword = next((a for a in call.args if a.keyword is not None and a.keyword.value == g.ranks),
                                   None)
                    given = keyword or (passed[i] if i < len(passed) else None)
                    if given is not None:
                        members = code_of(given.value, 400)
                g = Group(None, None, members) if members is not None else Group(None)
            out = g if out is None else out.join(g)
        return out

    def _helper_returns(self, src: "PythonSource", info: FunctionInfo, call: cst.Call) -> Optional[tuple]:
        """(source, FunctionInfo, returned expressions) of the checked function `call` runs, when every `return` of
        it hands back a value; None otherwise."""
        hit = self.taint.function_info(self.taint.call_source(src, src.facts.resolve_expr(call.func),
                                                              info.class_name))
        if hit is None:
            return None
        returns = [r.value for r in iter_returns(hit[1].node.body)]
        if not returns or any(r is None for r in returns):
            return None
        return (*hit, returns)

    def _returned_group(self, src: "PythonSource", info: FunctionInfo, call: cst.Call, depth: int = 0
                        ) -> Optional["Group"]:
        """`group=constants.model_parallel_group()` of a checked helper: the group its returns name, read through
        its definition rather than its name (`def model_parallel_group(): return
        grid().get_tensor_model_parallel_group()` is the tensor-parallel group, whatever Megatron's getter of that
        name means), through helpers returning helpers. Only groups of the getters' table count: a helper returning
        a module global built by `new_group(...)` (Megatron's own `get_model_parallel_group`) or a group dslint
        cannot name leaves the decision to `resolve_group`, as before. None: not such a helper."""
        from dslint.program.process_groups import resolve_group
        hit = self._helper_returns(src, info, call) if depth <= 3 else None
        if hit is None:
            return None
        other, helper, returns = hit
        out: Optional["Group"] = None
        for r in returns:
            g = self._returned_group(other, helper, r, depth + 1) if isinstance(r, cst.Call) else None
            if g is None:
                g = resolve_group(other, r, helper.node, at=r)
            if g.axes is None or g.ranks is not None or g.family == "handed-in":
                return None
            out = g if out is None else out.join(g)
        return out

    def function_group(self, src: "PythonSource", info: FunctionInfo) -> "Group":
        """The union of the groups every collective a function reaches runs over, whatever its callers pass: a
        group it is handed through a parameter is `HANDED_IN` (`group_of` binds it to a call's argument)."""
        from dslint.program.process_groups import HANDED_IN, WORLD
        fixed, params = self._function_groups(src, info)
        if params:
            fixed = HANDED_IN if fixed is None else fixed.join(HANDED_IN)
        return fixed or WORLD

    def _function_groups(self, src: "PythonSource", info: FunctionInfo) -> tuple[Optional["Group"], frozenset]:
        """(the union of the groups of the collectives a function reaches that it names itself -- None when
        all come through parameters --, the parameters whose value is the group of some collective it reaches:
        `def reduce(t, group=None): dist.all_reduce(t, group=group)`, also through helpers it passes them to).
        A call of the function itself (`reduce(t, group, op)` for each item of a list) reaches nothing else; a
        call back into a function being summarised (mutual recursion) is WORLD."""
        from dslint.program.process_groups import WORLD, _assigned, group_argument, resolve_group
        memo = self.__dict__.setdefault("_group_summaries", {})
        key = (id(src), info.qualname)
        if key in memo:
            return memo[key] if memo[key] is not None else (WORLD, frozenset())
        memo[key] = None
        own = {p for p in info.params if p not in ("self", "cls") and not _assigned(src, p, info.node)}
        fixed: Optional["Group"] = None
        params: set[str] = set()

        def add(g: "Group") -> None:
            nonlocal fixed
            fixed = g if fixed is None else fixed.join(g)

        for call in info.calls:
            site = self.classify(src, call.node, info.class_name)
            if site is None:
                continue
            if site.kind == "explicit":
                func = site.call.func
                op = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
                arg = group_argument(site.call, op)
                if isinstance(arg, cst.Name) and arg.value in own and op not in ("new_group", "new_subgroups"):
                    params.add(arg.value)
                    continue
            elif site.kind == "function" and site.function is not None:
                callee_src, callee = site.function
                if callee_src is src and callee.qualname == info.qualname:
                    continue            # recursion: what this function reaches already
                inner_fixed, inner_params = self._function_groups(callee_src, callee)
                if inner_fixed is not None:
                    add(inner_fixed)
                for p in inner_params:
                    found, arg = _argument_for(site.call, callee, p)
                    if isinstance(arg, cst.Name) and arg.value in own:
                        params.add(arg.value)
                    elif not found:
                        add(self.function_group(callee_src, callee))
                    elif arg is None:
                        add(resolve_group(callee_src, _default_of(callee, p), callee.node))
                    else:
                        add(resolve_group(src, arg, info.node, at=site.call))
                continue
            add(self.group_of(site))
        memo[key] = (fixed, frozenset(params))
        return memo[key]

    def _bind_group_params(self, src: "PythonSource", scope_node: Optional[cst.CSTNode], call: cst.Call,
                           callee_src: "PythonSource", callee: FunctionInfo, fixed: Optional["Group"], params: frozenset) -> "Group":
        """The groups a call of a function reaches, the ones it is handed read from this call's arguments
        (`distributed_reduce(m, group=mpu.get_data_parallel_group())`: the data-parallel group), a parameter
        left out from its default (`group=None`: WORLD); an argument dslint cannot map (`*args`) is handed in."""
        from dslint.program.process_groups import HANDED_IN, WORLD, resolve_group
        out = fixed
        for p in sorted(params):
            found, arg = _argument_for(call, callee, p)
            if not found:
                g = HANDED_IN
            elif arg is None:
                g = resolve_group(callee_src, _default_of(callee, p), callee.node)
            else:
                g = resolve_group(src, arg, scope_node, at=call)
            out = g if out is None else out.join(g)
        return out or WORLD

    def block_sites(self, src: "PythonSource", stmts, cls: Optional[str]) -> list[Site]:
        out = []
        for node in stmts:
            for call in iter_calls(node):
                site = self.classify(src, call, cls)
                if site is not None:
                    out.append(site)
        return out


def enclosing_function(outline, scope: str, name: str):
    """What a bare `name` read in function `scope` is, by Python's scoping, on the outline: the qualified name of
    a function nested in `scope` or in a function around it (the innermost); False where a parameter of one of
    those functions binds the name first (`def update(self, step): def set_one(d): torch.tensor(step)`: the
    number, not a method `step`); None otherwise (a module-level name, resolved through the imports). A class
    body is no enclosing scope of its methods: a method `step` of the class is not what `step` names there."""
    if outline is None:
        return None
    params = outline.__dict__.get("_params_by_qualname")
    if params is None:
        params = outline.__dict__["_params_by_qualname"] = {d.qualname: d.params for d in outline.defs}
    while scope and scope != MODULE_SCOPE:
        if scope not in outline.classes:
            if f"{scope}.{name}" in outline.functions:
                return f"{scope}.{name}"
            if name in params.get(scope, ()):
                return False
        scope = scope.rpartition(".")[0]
    return None


def _default_of(callee: FunctionInfo, param: str) -> Optional[cst.BaseExpression]:
    node = callee.node.params
    for p in (*node.posonly_params, *node.params, *node.kwonly_params):
        if p.name.value == param:
            return p.default
    return None


def _inference_call(fact: Fact) -> Optional[cst.Call]:
    """The `deepspeed.init_inference` call an evidence fact names (by node, or by its line in its file)."""
    call, src = fact.at, fact.source
    if isinstance(call, int) and src is not None:
        call = next((c.node for c in src.facts.calls if (c.callee or "").endswith("init_inference")
                     and src.span(c.node).line == call), None)
    return call if isinstance(call, cst.Call) else None


def _splits_model(fact: Fact) -> bool:
    """Does the `deepspeed.init_inference` call an evidence fact names split the model over the ranks (an
    `mp_size` other than a literal 1, or a `tensor_parallel` argument: DeepSpeed's tensor parallelism, whose
    every forward all-reduces across the group)?"""
    call = _inference_call(fact)
    if call is None:
        return False
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value == "mp_size":
            return literal_value(arg.value) != 1
        if arg.keyword.value in ("tensor_parallel", "tp"):      # `tp`: the config field's alias
            value = literal_value(arg.value)
            size = value.get("tp_size") if isinstance(value, dict) else None
            return size != 1
    return False


# init_inference settings that never split the model nor form a process group (DeepSpeedInferenceConfig 0.19.8):
# precision, kernel injection and its policy, checkpoint loading, CUDA graphs, token bounds
_LOCAL_INFERENCE_SETTINGS = frozenset({
    "dtype", "replace_with_kernel_inject", "kernel_inject", "injection_policy", "injection_dict", "replace_method",
    "checkpoint", "base_dir", "save_mp_checkpoint_path", "checkpoint_config", "enable_cuda_graph", "use_triton",
    "triton_autotune", "triangular_masking", "tm", "return_tuple", "max_out_tokens", "max_tokens", "min_out_tokens",
    "min_tokens", "quant", "keep_module_on_host", "set_empty_params", "transposed_mode", "use_cuda_events"})


def _inference_runs_locally(fact: Fact) -> bool:
    """Does the `deepspeed.init_inference` call an evidence fact names keep the whole model on every rank, by its
    arguments alone: `mp_size` a literal 1 or not given, `tensor_parallel`/`tp` not given or a literal `tp_size`
    of 1, and every other keyword one of the settings that split nothing (`_LOCAL_INFERENCE_SETTINGS`: no
    `config=`, second positional argument or `**` argument, no expert-parallel or group setting)? Then its
    forward runs no collective of DeepSpeed's."""
    call = _inference_call(fact)
    if call is None:
        return False
    for position, arg in enumerate(call.args):
        if arg.star or arg.keyword is None and position > 0:
            return False
        name = arg.keyword.value if arg.keyword is not None else None
        if name is None or name in _LOCAL_INFERENCE_SETTINGS:
            continue
        if name == "mp_size" and literal_value(arg.value) == 1:
            continue
        value = literal_value(arg.value) if name in ("tensor_parallel", "tp") else None
        if isinstance(value, dict) and set(value) <= {"enabled", "tp_size"} and value.get("tp_size", 1) == 1:
            continue
        return False                    # a setting that may split the model or form a group (config, mp_size,
                                        # tensor_parallel/tp, moe, ep_size, mpu, ...), or one not known here
    return True


def role_evidence(role) -> list[Fact]:
    """The engine a value role holds, as evidence: where DeepSpeed built it, or the use that shows it is one."""
    if role is None or not role.steps:
        return []
    first = role.steps[0]
    kind = "init_inference" if role.builder == "init_inference" else "engine"
    return [Fact(kind, first.note, first.line, first.src)]


def config_fact(config) -> Fact:
    """A DeepSpeed config with ZeRO-3 as evidence: its `zero_optimization.stage` entry (a JSON file) or the line
    of the dict literal (`origin` "script.py:LINE")."""
    if config.source is not None:
        return Fact("zero-stage", "ZeRO stage 3", ("zero_optimization", "stage"), config.source)
    path, _, line = config.origin.rpartition(":")
    if path and line.isdigit():
        return Fact("zero-stage", "ZeRO stage 3 (config built in Python)", path=path, at=int(line))
    return Fact("zero-stage", "ZeRO stage 3", path=config.origin)


def _file_assignments(src: "PythonSource") -> list:
    """(target tail, resolved callee, call, first-of-tuple, target) of the file's `x = f(...)`-like statements:
    a fact of the file alone, kept on the source for every view that reads it."""
    rows = src.__dict__.get("_role_assignments")
    if rows is not None:
        return rows
    rows = src.__dict__["_role_assignments"] = []
    for node in assignments(src.module):
        value = node.value
        first = False
        if isinstance(value, cst.Subscript) and literal_value(value.slice[0].slice.value
                                                             if isinstance(value.slice[0].slice, cst.Index)
                                                             else None) == 0:
            value, first = value.value, True
        if not isinstance(value, cst.Call):
            continue
        callee = src.facts.resolve_expr(value.func)
        for target in node.targets:
            t = target.target
            if isinstance(t, (cst.Tuple, cst.List)) and t.elements:
                t, first = t.elements[0].value, True
            tail = _tail(t)
            if tail:
                rows.append((tail, callee, value, first, t))
    return rows


def _returns_accelerator(src: "PythonSource", fn: cst.FunctionDef) -> bool:
    """Does the function return an `accelerate.Accelerator` it builds: `return Accelerator(...)`, or a name the
    function binds to one (`acc = Accelerator(...); ...; return acc`)?"""
    def built(value) -> bool:
        return isinstance(value, cst.Call) and (src.facts.resolve_expr(value.func) or "") in (
            "accelerate.Accelerator", "accelerate.accelerator.Accelerator")
    bound = {t.target.value for node in assignments(fn) if built(node.value) for t in node.targets
             if isinstance(t.target, cst.Name)}
    return any(built(r.value) or isinstance(r.value, cst.Name) and r.value.value in bound
               for r in iter_returns(fn.body))


def _binds_name(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds_name(el.value, name) for el in target.elements)
    return isinstance(target, cst.Name) and target.value == name


def assignments(module: cst.Module):
    return iter_assigns(module)
