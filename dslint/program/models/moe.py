"""DeepSpeed MoE layers of a run and what the scripts do with the models holding them.

- every `deepspeed.moe.layer.MoE(...)` construction with its gating settings (literal, constant, argparse
  default or launcher value, else unknown; DeepSpeed's own defaults when the argument is absent);
- which classes and functions build MoE layers, directly or through wrappers (`MoEBlock` replacing
  `layer.mlp`, `build_model()` returning one);
- per script scope: the `deepspeed.initialize` / `init_inference` calls, HF `Trainer`s, and whether the scope
  builds an MoE model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.hyperparams import UNKNOWN_VALUE, Value, evaluate, memo
from dslint.program.facts import MODULE_SCOPE, CallSite, FunctionInfo
from dslint.sources import PythonSource
from dslint.program.models.unset_switches import unset_switch

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView

MOE_POSITIONAL = ("hidden_size", "expert", "num_experts", "ep_size", "k", "capacity_factor", "eval_capacity_factor",
                  "min_capacity", "use_residual", "noisy_gate_policy", "drop_tokens", "use_rts", "use_tutel",
                  "enable_expert_tensor_parallelism", "top2_2nd_expert_sampling")
MOE_DEFAULTS = {"num_experts": 1, "ep_size": 1, "k": 1, "capacity_factor": 1.0, "eval_capacity_factor": 1.0,
                "min_capacity": 4, "use_residual": False, "drop_tokens": True}
INITIALIZE_POSITIONAL = ("args", "model", "optimizer", "model_parameters", "training_data", "lr_scheduler",
                         "distributed_port", "mpu", "dist_init_required", "collate_fn", "config")
MOE_GROUP_HELPERS = ("split_params_into_different_moe_groups_for_optimizer", "configure_moe_param_groups",
                     "split_params_grads_into_shared_and_expert_params")


# names for `PythonSource.may_call` (the last name of the callees these scans look for)
MOE_NAME = frozenset({"MoE"})
TRAINER = frozenset({"Trainer"})        # with suffix=True: any `…Trainer`
_ENGINE_BUILDERS = frozenset({"initialize", "init_inference"})


def is_moe_ctor(callee: Optional[str]) -> bool:
    return bool(callee) and (callee in ("deepspeed.moe.layer.MoE", "deepspeed.moe.MoE", "deepspeed.MoE")
                             or callee.endswith(".moe.layer.MoE"))


@dataclass
class MoESite:
    src: PythonSource
    call: CallSite
    scope: Optional[FunctionInfo]
    settings: dict[str, Value]
    arg_nodes: dict[str, cst.CSTNode]

    def get(self, name: str) -> Value:
        return self.settings.get(name, UNKNOWN_VALUE)


@dataclass
class MoEFacts:
    sites: list[MoESite]
    builder_classes: set[str]                          # short class names whose construction builds MoE layers
    builder_functions: set[str]                        # qualified function names that build MoE layers
    holder_sites: dict[str, list[MoESite]] = field(default_factory=dict)   # builder name → MoE sites under it


def _settings(project: "ProjectView", src: PythonSource, call: CallSite, scope: Optional[FunctionInfo]
              ) -> tuple[dict[str, Value], dict[str, cst.CSTNode]]:
    settings: dict[str, Value] = {}
    nodes: dict[str, cst.CSTNode] = {}
    has_star = any(a.star == "**" for a in call.node.args)
    positional = [a for a in call.node.args if a.keyword is None and not a.star]
    for name, arg in zip(MOE_POSITIONAL, positional):
        nodes[name] = arg.value
    for arg in call.node.args:
        if arg.keyword is not None:
            nodes[arg.keyword.value] = arg.value
    for name in MOE_POSITIONAL:
        if name in nodes:
            settings[name] = evaluate(project, src, nodes[name], scope)
        elif not has_star and name in MOE_DEFAULTS:
            settings[name] = Value(MOE_DEFAULTS[name], "DeepSpeed default")
    return settings, nodes


def _may_construct_moe(src: PythonSource) -> bool:
    return src.may_call(MOE_NAME) and (src.outline is None or any(
        is_moe_ctor(callee) for callee, _ in src.outline.calls))


def _build(project: "ProjectView") -> MoEFacts:
    sites: list[MoESite] = []
    # decided on the outline's resolved calls: the other files are not parsed
    for src in project.files_where("moe.ctor", _may_construct_moe):
        for call in src.facts.calls:
            if _live_moe_ctor(project, src, call):
                scope = src.facts.functions.get(call.scope)
                settings, nodes = _settings(project, src, call, scope)
                sites.append(MoESite(src, call, scope, settings, nodes))
    classes: set[str] = {"MoE"} if sites else set()
    functions: set[str] = set()
    holder_sites: dict[str, list[MoESite]] = {}
    site_by_scope: dict[tuple[int, str], list[MoESite]] = {}
    for s in sites:
        site_by_scope.setdefault((id(s.src), s.call.scope), []).append(s)
    changed = bool(sites)
    while changed:
        changed = False
        # a function builds MoE layers only by calling MoE or a known holder class/builder by name
        for src in project.mentioning("MoE", *classes, *(f.rsplit(".", 1)[-1] for f in functions)):
            for qual, fn in src.facts.functions.items():
                hits = [c for c in fn.calls if _live_moe_ctor(project, src, c) or (c.attr in classes and c.attr != "MoE")
                        or _calls_builder(project, src, c, functions)]
                if not hits:
                    continue
                key = f"{src.module_name}.{qual}"
                if key not in functions:
                    functions.add(key)
                    changed = True
                    holder_sites.setdefault(key, []).extend(site_by_scope.get((id(src), qual), []))
                if fn.class_name:
                    cls = src.facts.classes.get(fn.class_name)
                    if cls is not None and cls.name not in classes:
                        classes.add(cls.name)
                        changed = True
            for info in src.facts.classes.values():       # subclasses of a builder class build too
                if info.name not in classes and any(b.rsplit(".", 1)[-1] in classes or is_moe_ctor(b)
                                                    for b in info.bases if b):
                    classes.add(info.name)
                    changed = True
    return MoEFacts(sites, classes, functions, holder_sites)


def _live_moe_ctor(project: "ProjectView", src: PythonSource, call: CallSite) -> bool:
    """An MoE construction that may run: not one built only under a keyword switch nothing of the run sets
    (`dslint.program.models.unset_switches`)."""
    if not is_moe_ctor(call.callee):
        return False
    line = src.span(call.node).line
    return not line or unset_switch(project, src, line) is None


def _calls_builder(project: "ProjectView", src: PythonSource, call: CallSite, functions: set[str]) -> bool:
    if not functions or not call.callee or call.attr not in {f.rsplit(".", 1)[-1] for f in functions}:
        return False
    hit = project.find_function(call.callee, near=src)
    if hit is None:
        return False
    hsrc, info = hit
    return f"{hsrc.module_name}.{info.qualname}" in functions


def moe_facts(project: "ProjectView") -> MoEFacts:
    return memo(project, "moe-facts", lambda: _build(project))


def returns_value(node: cst.FunctionDef) -> bool:
    """The function hands something back (`return model`), so its callers hold what it built."""
    from dslint.program.rank.reaching_ranks import sub_statements
    stack: list = [node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleStatementLine):
            if any(isinstance(x, cst.Return) and x.value is not None for x in n.body):
                return True
        elif not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.BaseExpression)):
            stack.extend(sub_statements(n))
    return False


def returns_moe_model(project: "ProjectView", src: PythonSource, call: cst.Call) -> bool:
    """`build_model(args)` (under any chain of method calls: `build_model().cuda()`) runs a function of the
    checked files that builds MoE layers and returns what it built: the caller holds an MoE model."""
    facts = moe_facts(project)
    if not facts.builder_functions:
        return False
    while isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
        call = call.func.value          # `build_model().cuda().eval()` → `build_model()`
    site = CallSite(call, src.facts.resolve_expr(call.func), MODULE_SCOPE)
    if not _calls_builder(project, src, site, facts.builder_functions):
        return False
    hit = project.find_function(site.callee, near=src)
    return hit is not None and hit[1].class_name is None and returns_value(hit[1].node)


def builds_moe(project: "ProjectView", src: PythonSource, call: CallSite) -> bool:
    facts = moe_facts(project)
    if is_moe_ctor(call.callee):
        return True
    if call.attr in facts.builder_classes:
        return True
    if call.attr in _FACTORY_METHODS and isinstance(call.node.func, cst.Attribute) and \
            isinstance(call.node.func.value, cst.Name) and call.node.func.value.value in facts.builder_classes:
        return True         # `MoEModel.from_pretrained(path)` builds the class's MoE layers like `MoEModel(cfg)`
    return _calls_builder(project, src, call, facts.builder_functions)


# classmethods that construct an instance of their class (HF PreTrainedModel)
_FACTORY_METHODS = {"from_pretrained", "from_config", "_from_config"}


def scope_calls(src: PythonSource, scope: str) -> list[CallSite]:
    return src.facts.calls_in(scope)


def moe_builds_in_scope(project: "ProjectView", src: PythonSource, scope: str) -> list[CallSite]:
    """Calls in `scope` (and in module-level code of the file) that build MoE layers."""
    calls = list(scope_calls(src, scope))
    if scope != MODULE_SCOPE:
        calls += scope_calls(src, MODULE_SCOPE)
    return [c for c in calls if builds_moe(project, src, c)]


def call_arg(call: CallSite, name: str, positional: tuple[str, ...]) -> Optional[cst.BaseExpression]:
    kw = call.keyword(name)
    if kw is not None:
        return kw.value
    args = [a for a in call.node.args if a.keyword is None and not a.star]
    if name in positional:
        i = positional.index(name)
        if i < len(args):
            return args[i].value
    return None


@dataclass
class EngineCall:
    src: PythonSource
    call: CallSite
    kind: str              # "initialize" | "init_inference" | "trainer"

    def argument(self, name: str) -> Optional[cst.BaseExpression]:
        """The expression passed as `name` (keyword, or positional in `deepspeed.initialize`'s order)."""
        return call_arg(self.call, name, INITIALIZE_POSITIONAL if self.kind == "initialize" else ())


def may_hold_engine_calls(src: PythonSource) -> bool:
    """`engine_calls`' test on the text: a call written `….initialize(`, `…Trainer(` or through an alias."""
    return src.may_call(_ENGINE_BUILDERS) or src.may_call(TRAINER, suffix=True)


def engine_calls(project: "ProjectView", src: PythonSource) -> list[EngineCall]:
    def build():
        out = []
        # the callees below are written `….initialize(`, `…Trainer(` or reached through an imported alias
        if not may_hold_engine_calls(src):
            return out
        if src.outline is not None and not _may_hold_engine_calls(src.outline, project, src):
            return out          # decided on the outline's resolved calls: the file is not parsed
        trainer_classes = _trainer_classes((info.name, info.bases) for info in src.facts.classes.values())
        trainer_classes |= _imported_trainer_classes(project, src)
        for call in src.facts.calls:
            kind = _engine_kind(call.callee or "", trainer_classes)
            if kind is not None:
                out.append(EngineCall(src, call, kind))
        return out
    return memo(project, f"engine-calls:{id(src)}", build)


def _engine_kind(callee: str, trainer_classes: set[str]) -> Optional[str]:
    """What a call with this resolved callee builds: "initialize", "init_inference", "trainer" or None."""
    if callee == "deepspeed.initialize" or callee.endswith("deepspeed.initialize"):
        return "initialize"
    if callee == "deepspeed.init_inference" or callee.endswith("deepspeed.init_inference"):
        return "init_inference"
    attr = callee.rsplit(".", 1)[-1]
    if attr.endswith("Trainer") and (callee.startswith(("transformers.", "trl.")) or attr in trainer_classes):
        return "trainer"
    return None


def _trainer_classes(bases_by_class) -> set[str]:
    """Names of the classes whose bases include a `…Trainer`, from (name, resolved bases) pairs."""
    return {name for name, bases in bases_by_class if any(b.rsplit(".", 1)[-1].endswith("Trainer") for b in bases if b)}


def builds_library_trainer(project: "ProjectView", src: PythonSource, callee: Optional[str], depth: int = 0) -> bool:
    """Does a call of `callee` (or a class statement on that base) make a library Trainer: a class of an installed
    library (a module outside the checked packages) that the library names `…Trainer` (`transformers.Trainer`,
    `trl.SFTTrainer`, also `lightning.Trainer`: every such class runs its own distributed training loop), or a class
    of the checked files whose bases lead to one (`class Mine(Trainer)`)? The library's own class name is its API;
    the project's classes are decided by their hierarchy, never by how they are spelled."""
    if not callee:
        return False
    found = project.class_for_callee(src, callee) if depth <= 6 else None
    if found is None or found[0].outline is None:
        # a library's class (its module is none of the checked packages), named by the library
        return "." in callee and callee.split(".", 1)[0] not in project.checked_tops \
            and callee.rsplit(".", 1)[-1].endswith("Trainer")
    cls = found[0].outline.classes.get(found[1])
    return cls is not None and any(base and builds_library_trainer(project, found[0], base, depth + 1)
                                   for base in cls.bases)


def _may_hold_engine_calls(outline, project=None, src=None) -> bool:
    """`engine_calls` finds something in the file: decided on the outline's calls and classes, which resolve
    callees and bases as `FileFacts` does."""
    trainers = _trainer_classes((c.name, c.bases) for c in outline.classes.values())
    if project is not None and src is not None:
        trainers |= _imported_trainer_classes(project, src)
    return any(_engine_kind(callee or "", trainers) is not None for callee, _ in outline.calls)


def _imported_trainer_classes(project: "ProjectView", src: PythonSource) -> set[str]:
    """Names of the `…Trainer` classes `src` constructs that another checked file defines on a `…Trainer` base
    (`from llava_trainer import LLaVATrainer`, `class LLaVATrainer(Trainer)`)."""
    out: set[str] = set()
    if src.outline is None:
        return out
    for callee, _ in src.outline.calls:
        last = (callee or "").rsplit(".", 1)[-1]
        if not last.endswith("Trainer") or callee.startswith(("transformers.", "trl.")):
            continue
        found = project.class_for_callee(src, callee)
        if found is None or found[0] is src or found[0].outline is None:
            continue
        cls = found[0].outline.classes.get(found[1])
        if cls is not None and any(b and b.rsplit(".", 1)[-1].endswith("Trainer") for b in cls.bases):
            out.add(last)
    return out
