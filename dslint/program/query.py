"""The one interface rules query the program model through.

A rule sees the file it checks (`RuleContext.source`) and a `Program`: the launch-unit view that file is analysed
in (`ProjectView`: the entry point, the modules it imports, the configs it is given, its launcher's world size)
with the questions rules ask of it -- what the run is (versions, world size, configs), which values differ between
ranks and which collective sites that makes hazardous, which engines, models, MoE layers and optimizers the run
builds. Every answer is computed once per view (memoised on it) by the concept modules of this package
(`units`, `roles`, `configs`, `process_groups`, `collective_sites`, `rank/`, `models/`); rules import none of
them, only this module (tests/test_layout.py checks it), so the model can change underneath without a rule
noticing.

The value types the answers are made of are re-exported here for annotations and `isinstance` checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from dslint.program.models.forward_paths import (Condition, ForwardPaths, Path, TooManyPaths, deciding_condition,
                                                 divergent)
from dslint.program.models.modules import ModelFacts, ModuleClass
from dslint.program.models.moe import INITIALIZE_POSITIONAL, EngineCall, MoEFacts, MoESite
from dslint.program.models.moe_library import LibraryMoE
from dslint.program.models.moe_usage import DEFAULT_LEAF_CLASSES, PaddingSite, SparseBlock
from dslint.program.models.optimizers import PLAIN
from dslint.program.project_view import ConfigView, version_tuple
from dslint.program.rank.collective_hazards import Hazard
from dslint.program.statement_walks import code_of

if TYPE_CHECKING:
    from dslint.program.facts import CallSite, FunctionInfo
    from dslint.program.project_view import ProjectView
    from dslint.sources import JsonSource, PythonSource

__all__ = [
    "Program", "Hazard", "EngineCall", "MoEFacts", "MoESite", "LibraryMoE", "PaddingSite", "SparseBlock",
    "ModelFacts", "ModuleClass", "ForwardPaths", "TooManyPaths", "Path", "Condition", "ConfigView",
    "INITIALIZE_POSITIONAL", "PLAIN", "DEFAULT_LEAF_CLASSES", "code_of", "divergent", "deciding_condition",
]


class Program:
    """The program model of one launch-unit view, as rules query it."""

    __slots__ = ("view",)

    def __init__(self, view: "ProjectView") -> None:
        self.view = view

    # ---- the run: versions, launches, world size, configs -------------------------------------------------
    @property
    def deepspeed_version(self) -> Optional[str]:
        """The DeepSpeed version of the run (installed, or pinned by the repository), as written."""
        return self.view.deepspeed_version

    def deepspeed_version_for(self, src) -> Optional[str]:
        """The DeepSpeed version `src` runs against: that of the DeepSpeed source tree holding it (a vendored
        DeepSpeed's own tests and examples), else the run's (`deepspeed_version`)."""
        return self.view.deepspeed_version_for(src)

    def builds_library_trainer(self, src, callee: Optional[str]) -> bool:
        """Does a call of `callee` construct a transformers/TRL Trainer (the library's class, or a checked class
        on such a base: `dslint.program.models.moe.builds_library_trainer`)?"""
        from dslint.program.models.moe import builds_library_trainer
        return builds_library_trainer(self.view, src, callee)

    def version_note(self, src) -> Optional[str]:
        """Where `src`'s project pins no DeepSpeed but another sub-project of the repository does: what its
        config findings are judged at instead (`ProjectView.deepspeed_version_note`), for their message."""
        return self.view.deepspeed_version_note(src)

    @property
    def transformers_version(self) -> Optional[str]:
        return self.view.transformers_version

    @staticmethod
    def version(text: Optional[str]) -> Optional[tuple[int, ...]]:
        """"0.19.1" -> (0, 19, 1); None when unknown."""
        return version_tuple(text)

    def launches_for(self, src: "PythonSource") -> list:
        """The launcher lines (deepspeed/torchrun/accelerate ...) that run `src`."""
        return list(self.view._launches_for(src))

    def web_ui_server(self, src: "PythonSource") -> Optional[tuple["PythonSource", int]]:
        """(entry, line) where the programs holding `src` start a gradio web server, when every launch unit
        reaching `src` does (`front_ends.web_ui_launch`): its requests come from a person's page, to this
        process. None where a unit does not, or no unit reaches `src`."""
        from dslint.program.front_ends import web_ui_launch
        ctx = self.view.run_program.context_of(src) if self.view.run_program is not None else None
        units = ctx.units if ctx is not None else []
        found = []
        for unit in units:
            line = web_ui_launch(unit.entry)
            if line is None:
                return None
            found.append((unit.entry, line))
        return found[0] if found else None

    def unit_launch_lines(self) -> list:
        """The launcher lines of this view's launch units (empty when the view belongs to no unit): what starts
        the program the checked file belongs to, whichever of its files the line names."""
        return list(self.view.unit_launches or ())

    def unit_launch_configs(self) -> list[str]:
        """The DeepSpeed config references (`--deepspeed zero2.json`) on the launcher lines of this view's launch
        units, as written -- resolved or not (a line after `cd ~/repo`). Empty when the view belongs to no unit."""
        if self.view.unit_launches is None:
            return []
        return [ref for _, launch in self.view.unit_launches for ref in launch.config_paths]

    def plugin_program(self, src: "PythonSource") -> list:
        """The (loading script, call) pairs when `src` is a module loaded by a computed name in a program that
        creates no process group (`dslint.program.plugins.plugin_program`); empty otherwise."""
        from dslint.program.plugins import plugin_program
        return plugin_program(self.view, src)

    def python_runs_only(self, src: "PythonSource") -> list:
        """(shell, run) of the plain `python x.py` commands that alone start `src`'s program (one process);
        empty where anything else may start it (`ProjectView.python_runs_only`)."""
        return self.view.python_runs_only(src)

    def raise_ends_job(self, src: "PythonSource", scope: str) -> bool:
        """Does an exception raised in function `scope` of `src` end the job rather than leave ranks waiting?
        It escapes every caller uncaught up to module-level code (`uncaught.escapes_to_top`), a launcher line
        runs a program that holds `src` (`ProjectView.program_launches`: the evidence of how the job is started;
        without one, nothing says what happens to the others), and none starts one node of a multi-node job (there the other nodes' launchers go on and their
        ranks wait until the collective's timeout): the launchers dslint reads stop every process of a node when
        one fails."""
        from dslint.program.uncaught import escapes_to_top
        launches = [launch for _, launch in self.view.program_launches(src)]
        if not launches or any(launch.node_of_job is not None or (launch.nodes or 1) > 1 for launch in launches):
            return False
        return escapes_to_top(self.view, src, scope)

    def unreached(self, src: "PythonSource", line: int) -> Optional[tuple[str, int]]:
        """(name, first line) of the module-scope function or class of `src` holding `line` when no program of
        the run reaches it -- the run has programs, none constructs, calls, subclasses or names it
        (`dslint.program.reach`) --; None when one does."""
        from dslint.program.reach import unreached_definition
        return unreached_definition(self.view.run_program, src, line)

    def unloaded_module(self, src: "PythonSource") -> bool:
        """Can nothing of the run load the module `src` -- no program imports it, no file of the checked folder
        spells its name, no plugin folder is auto-imported (`dslint.program.reach.unloaded_module`)?"""
        from dslint.program.reach import unloaded_module
        return unloaded_module(self.view.run_program, src)

    def dead_branch(self, src: "PythonSource", line: int):
        """The branch of `src` holding `line` that no execution takes -- an `if` whose test its data flow decides
        (`dslint.program.dead_branches.DeadBranch`) --, or None."""
        from dslint.program.dead_branches import dead_branch
        return dead_branch(src, line)

    def launch_option_value(self, attr: str, sh, launch):
        """`args.<attr>` in the process one launcher line starts (`hyperparams.launch_option_value`): a `Value`."""
        from dslint.program.hyperparams import launch_option_value
        return launch_option_value(self.view, attr, sh, launch)

    def named_by(self, src: "PythonSource", line: int, files: list) -> bool:
        """Is the module-scope function or class of `src` holding `line` named in code by one of `files` (the
        files of one program): constructed, called, subclassed or handed on (`dslint.program.reach.named_by`)?"""
        from dslint.program.reach import named_by
        return named_by(self.view.run_program, src, line, files)

    def world_size_for(self, src: "PythonSource") -> Optional[int]:
        return self.view.world_size_for(src)

    @property
    def run_program(self):
        """The launch units of the run (`units.RunProgram`)."""
        return self.view.run_program

    @property
    def python(self) -> list["PythonSource"]:
        """The Python files of this view (the unit's files, or every file when no unit reaches the checked one)."""
        return self.view.python

    @property
    def json_configs(self) -> list["JsonSource"]:
        return self.view.json_configs

    def json_use(self, src: "JsonSource"):
        """How the run uses a JSON file (`dslint.program.json_kinds.JsonUse`): a DeepSpeed config (handed to
        DeepSpeed by a launcher flag, a config call, an arguments JSON's `deepspeed` entry, an accelerate config;
        or, unreferenced, with DeepSpeed's keys only) or an HF arguments file; with the evidence."""
        return self.view.json_use(src)

    def is_deepspeed_config(self, src: "JsonSource") -> bool:
        return self.view.is_deepspeed_config(src)

    def argument_mismatches(self, config: "JsonSource") -> list[tuple[str, str, Any, str, Any]]:
        """(arguments file, config key, its value, argument, the file's value) for each batch value of `config`
        that an arguments file naming it contradicts (the HF integration refuses the mismatch at start-up)."""
        from dslint.program.json_kinds import argument_mismatches
        use = self.view.json_use(config)
        out, seen = [], set()
        for args, _ in (use.arguments if use is not None else ()):
            if id(args) in seen or not isinstance(config.data, dict) or not isinstance(args.data, dict):
                continue
            seen.add(id(args))
            out += [(args.path, *m) for m in argument_mismatches(config.data, args.data)]
        return out

    def filled_by_arguments(self, config: "JsonSource") -> list[tuple[str, dict, list[str], Optional[int]]]:
        """The config as the HF integration fills its `"auto"` values from each arguments JSON whose `deepspeed`
        entry names it: (the arguments file's path, the filled config, what was filled, the world size of the
        launcher line that passes that arguments file, else of the run). Empty when none fills anything."""
        from dslint.program.json_kinds import filled_from_arguments
        use = self.view.json_use(config)
        out = []
        for args, launch in (use.arguments if use is not None else ()):
            filled = filled_from_arguments(config.data, args.data) if isinstance(config.data, dict) else None
            if filled is None:
                continue
            world = self.view.world_size_override or (launch[1].world_size if launch is not None else None) \
                or self.view.world_size_for(config)
            out.append((args.path, filled[0], filled[1], world))
        return out

    def config_view(self, config: "JsonSource") -> ConfigView:
        return ConfigView(config.data, config.path)

    def configs_for_call(self, src: "PythonSource", call: "CallSite") -> list[ConfigView]:
        """The DeepSpeed configs that reach this `deepspeed.initialize`/`Trainer` call (per call, issue 18)."""
        return self.view.configs_for_call(src, call)

    def configs_by_reference(self, ref: str, base: Any) -> list["JsonSource"]:
        """The JSON configs a path written in a script or launcher line names (relative to `base`, the
        referring file's folder, or to the root; else by file name)."""
        return self.view._configs_by_reference(ref, base)

    def launch_configs(self, sh: Any, launch: Any, ref: str) -> list["JsonSource"]:
        """The JSON configs a launcher line's path names, resolved as the shell would (the folder the script
        `cd`-ed into, else the script's folder, else the root; `ProjectView.launch_json`)."""
        return self.view.launch_json(sh, launch, ref)

    def mentioning(self, *words: str) -> list["PythonSource"]:
        """Files of the view whose text holds one of `words` (a cheap pre-filter)."""
        return self.view.mentioning(*words)

    def using_identifier(self, name: str) -> list["PythonSource"]:
        return self.view.using_identifier(name)

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """A rule's own per-view result, computed once."""
        return self.view.memo(key, build)

    def scripts_using(self, config: "JsonSource") -> list["PythonSource"]:
        """The scripts of the run that are handed `config`."""
        from dslint.dsconfig.usage import scripts_using
        return scripts_using(self.view, config)

    @staticmethod
    def overwritable() -> frozenset:
        """The key paths some consumer rewrites before DeepSpeed reads a config (a cheap first test)."""
        from dslint.program.config_handoffs import OVERWRITABLE
        return OVERWRITABLE

    @staticmethod
    def keys_overwritten_by_call(callee: Optional[str]) -> frozenset:
        """The key paths the call a Python-built config is handed to rewrites (accelerate's `DeepSpeedPlugin`)."""
        from dslint.program.config_handoffs import overwritten_by
        return overwritten_by({"accelerate"}) if (callee or "").rsplit(".", 1)[-1] == "DeepSpeedPlugin" \
            else frozenset()

    def keys_overwritten(self, config: "JsonSource") -> frozenset:
        """The key paths of `config` that every consumer handing it to DeepSpeed rewrites first
        (`config_handoffs.overwritten_by` over `JsonUse.handlers`); for a file nothing hands over, those accelerate
        rewrites when an accelerate config file under the root names it as its `deepspeed_config_file`
        (`json_kinds.accelerate_configs_naming`: no launcher line needed), or when the configs of its folder that
        something hands over are all handed to accelerate that way."""
        from dslint.program.config_handoffs import overwritten_by
        from dslint.program.json_kinds import ACCELERATE, accelerate_configs_naming
        use = self.view.json_use(config)
        if use is None:
            return frozenset()
        if use.handlers:
            return overwritten_by(use.handlers)
        keys = overwritten_by({ACCELERATE})
        if not keys:
            return frozenset()
        run = self.view.run_view or self.view
        if accelerate_configs_naming(run, config):
            return keys
        if use.by_use:
            return frozenset()
        # a config nothing references is used as the configs of its folder are: when those that something
        # hands over are all accelerate's `deepspeed_config_file`s, so is it (a sibling whose accelerate config
        # names a file that is not there)
        import os.path
        folder = os.path.dirname(config.path)
        handed = []
        for other in self.view.json_sources:
            if other is config or os.path.dirname(other.path) != folder:
                continue
            other_use = self.view.json_use(other)
            if other_use is None or not other_use.is_config:
                continue
            if other_use.handlers:
                handed.append(frozenset(other_use.handlers))
            elif accelerate_configs_naming(run, other):
                handed.append(frozenset({ACCELERATE}))
        return keys if handed and all(h == {ACCELERATE} for h in handed) else frozenset()

    def config_keys_read(self, config: "JsonSource") -> frozenset:
        """The key paths of `config` that a script it is handed to reads from the loaded file itself
        (`dslint.program.config_reads`): consumed by the program, not typos."""
        from dslint.program.config_reads import config_keys_read
        return config_keys_read(self.view, config)

    def entry_keys_read(self, pyconfig) -> frozenset:
        """The key paths of a dict built in Python that the project's own DeepSpeed reads, where the call it is
        handed to resolves to the checked files (`dslint.program.config_reads.entry_keys_read`)."""
        from dslint.program.config_reads import entry_keys_read
        return entry_keys_read(self.view, pyconfig.src, pyconfig.call, pyconfig.expr)

    def config_keys_written(self, config: "JsonSource") -> frozenset:
        """The key paths of `config` that a script it is handed to writes into (or removes from) the loaded dict
        before handing it to DeepSpeed (`dslint.program.config_reads`): DeepSpeed never sees the file's value."""
        from dslint.program.config_reads import config_keys_written
        return config_keys_written(self.view, config)

    def runs_under_hf(self, script: "PythonSource") -> bool:
        """`script` hands its config to HF Trainer/accelerate (which fill "auto" values)."""
        from dslint.dsconfig.usage import runs_under_hf
        return runs_under_hf(self.view, script)

    @staticmethod
    def builds_moe_layers(script: "PythonSource") -> bool:
        from dslint.dsconfig.usage import builds_moe_layers
        return builds_moe_layers(script)

    @staticmethod
    def reading_known(fn: Callable[..., Any], data: Any, *args: Any) -> tuple[Any, bool]:
        """`fn(data, *args)` over a config built in Python, and whether it read only values known statically."""
        from dslint.program.pyconfig import reading_known
        return reading_known(fn, data, *args)

    def configs_written_in(self, src: "PythonSource") -> list:
        """The DeepSpeed configs `src` builds in Python (dict literals, evaluated assignments)."""
        from dslint.program.pyconfig import configs_written_in
        return configs_written_in(self.view, src)

    # ---- rank-varying values and the collective sites they make hazardous ---------------------------------
    def prepare_rank_hazards(self) -> None:
        """Compute the whole-view parts of the rank analysis now (roles, launch units, MoE holders, the HF ZeRO-3
        test, which functions can return a rank), so that forked workers inherit them."""
        from dslint.program.rank.collective_hazards import RankHazards
        hazards = RankHazards.of(self.view)
        hazards.sites.roles
        hazards.sites.program
        hazards.sites.moe_classes
        hazards.hf_zero3_auto_sync
        hazards.taint._rank_capable_units()

    def same_on_every_rank(self, src: "PythonSource", expr: Any, scope: str, depth: int = 0) -> bool:
        """Is `expr` (evaluated in function `scope` of `src`) proven the same on every rank: the rank-uniformity
        lattice says Uniform, and every parameter of `scope` it reads is one the checked files call the function
        with (a function nobody calls visibly -- a `collate_fn`, a Dataset's `__getitem__` -- gets its values
        from code not seen, so nothing is proven), the callers' functions in turn up to three levels."""
        from dslint.program.facts import MODULE_SCOPE
        from dslint.program.rank.lattice import Uniform, uniformity
        from dslint.program.rank.function_summaries import ProjectTaint
        if not isinstance(uniformity(self.view, src, expr, scope), Uniform):
            return False
        if scope in (None, MODULE_SCOPE):
            return True
        info = src.facts.functions.get(scope)
        if info is None or depth > 2:
            return False
        import libcst as cst

        from dslint.sources.cstwalk import walk
        from dslint.program.models.forward_paths import derived_names
        names = {n.value for n in walk(expr) if isinstance(n, cst.Name)}
        params = set(info.params)
        if not names & (params | derived_names(info.node, params)):
            return True         # reads no parameter, nor a local computed from one
        analysis = ProjectTaint.of(self.view)
        callers = [(other, call) for other in analysis._files_calling_function(src, info)
                   for call in other.facts.calls if call.attr == info.name]
        if not callers:
            return False
        return all(call.scope != scope and all(self.same_on_every_rank(other, arg.value, call.scope, depth + 1)
                                               for arg in call.node.args)
                   for other, call in callers)

    def reads_rank(self, src: "PythonSource", scope: str) -> bool:
        """Does `scope` of `src` (or its module) bind a name to a rank id or a value computed from one
        (`local_rank = int(os.environ["LOCAL_RANK"])`, `rank = dist.get_rank()`)? The script then knows it runs
        as one of several ranks: evidence, beside its launch lines, that more than one process runs it."""
        from dslint.program.rank.function_summaries import ProjectTaint
        env = ProjectTaint.of(self.view).scope_env(src, scope)
        return any(origin is not None and origin.kind in ("rank", "derived") for origin in env.values())

    def rank_hazards(self, src: "PythonSource") -> list[Hazard]:
        """Collective sites of `src` that rank-dependent control reaches on some ranks only (DSL101-105)."""
        from dslint.program.rank.collective_hazards import rank_hazards
        return rank_hazards(self.view, src)

    # ---- engines, ZeRO stages, MoE layers ------------------------------------------------------------------
    @staticmethod
    def engine_builder(callee: Optional[str]) -> Optional[str]:
        """"initialize" / "init_inference" when `callee` is one of DeepSpeed's engine builders."""
        from dslint.program.outline import engine_builder
        return engine_builder(callee)

    def configs_near(self, src: "PythonSource") -> list[ConfigView]:
        """The configs of a script, or for a helper module those of the scripts that import it (what decides
        whether its forwards are collective)."""
        from dslint.program.collective_sites import CollectiveSites
        return CollectiveSites.of(self.view).configs(src)

    def trainer_args_from_command_line(self, src: "PythonSource", call: "CallSite") -> bool:
        """Does this HF Trainer call get its `args` from the command line (TrainingArguments an
        `HfArgumentParser` parses from `sys.argv`), so that a launch line dslint does not see may pass
        `--deepspeed ds.json` and make the Trainer build a DeepSpeed engine?"""
        from dslint.program.rank.function_summaries import ProjectTaint
        from dslint.program.rank.library_types import accelerate_typing
        arg = call.keyword("args")
        if arg is None:
            positional = [a for a in call.node.args if a.keyword is None]
            arg = positional[1] if len(positional) > 1 else None     # Trainer(model, args, ...)
        if arg is None:
            return False
        return accelerate_typing(ProjectTaint.of(self.view), src).command_line_args(arg.value)

    def engine_calls(self, src: "PythonSource") -> list[EngineCall]:
        """`deepspeed.initialize` / `init_inference` / HF Trainer calls of `src`."""
        from dslint.program.models.moe import engine_calls
        return engine_calls(self.view, src)

    def moe(self) -> MoEFacts:
        """The run's DeepSpeed MoE constructions and the functions that build models holding them."""
        from dslint.program.models.moe import moe_facts
        return moe_facts(self.view)

    def moe_patched_gating(self, site: Any) -> Any:
        """The project's own gating a patch installs on this MoE layer's gate (`models.moe_gating.Gating`:
        whether it all-reduces the capacity to the max before sizing the all_to_all buffer), or None when the
        gate is DeepSpeed's."""
        from dslint.program.models.moe_gating import patched_gating
        return patched_gating(self.view, site)

    def moe_builds_in_scope(self, src: "PythonSource", scope: str) -> list["CallSite"]:
        from dslint.program.models.moe import moe_builds_in_scope
        return moe_builds_in_scope(self.view, src, scope)

    def calls_moe_builder(self, src: "PythonSource", call: "CallSite", keys: set[str]) -> bool:
        from dslint.program.models.moe import _calls_builder
        return _calls_builder(self.view, src, call, keys)

    def stages_for(self, src: "PythonSource", call: Optional["CallSite"] = None
                   ) -> tuple[list[ConfigView], set[Optional[int]]]:
        """The configs reaching `call` (or any engine call of `src`) and their ZeRO stages."""
        from dslint.program.models.moe_usage import stages_for
        return stages_for(self.view, src, call)

    def run_stages(self) -> set[Optional[int]]:
        """The ZeRO stages of the run's configs (None: a stage not known statically)."""
        from dslint.program.models.moe_usage import run_stages
        return run_stages(self.view)

    def dynamic_padding_sites(self, src: "PythonSource") -> list[PaddingSite]:
        from dslint.program.models.moe_usage import dynamic_padding_sites
        return dynamic_padding_sites(self.view, src)

    def sparse_blocks(self) -> list[SparseBlock]:
        from dslint.program.models.moe_usage import sparse_blocks
        return sparse_blocks(self.view)

    def leaf_modules(self) -> tuple[set[str], bool]:
        """Class names made ZeRO-3 leaves by `set_z3_leaf_modules`, and whether some call's names are unreadable."""
        from dslint.program.models.moe_usage import leaf_modules
        return leaf_modules(self.view)

    @staticmethod
    def config_leaf_classes(config: ConfigView) -> Optional[set[str]]:
        from dslint.program.models.moe_usage import config_leaf_classes
        return config_leaf_classes(config)

    def library_moe_family(self, call: "CallSite") -> tuple[Optional[LibraryMoE], str]:
        """The transformers MoE family a call loads or configures, and how it is named."""
        from dslint.program.models.moe_library import family_of_call
        return family_of_call(call)

    def library_moe_data_dependent(self, family: LibraryMoE) -> Optional[bool]:
        """Does the family's sparse block run a data-dependent set of experts in this run's transformers?"""
        from dslint.program.models.moe_library import data_dependent
        return data_dependent(family, version_tuple(self.transformers_version))

    @staticmethod
    def mentions_library_moe(text: str) -> bool:
        from dslint.program.models.moe_library import mentions_library_moe
        return mentions_library_moe(text)

    # ---- optimizers, param groups ---------------------------------------------------------------------------
    def trainer_optimizer_has_moe_groups(self, trainer_name: str) -> Optional[bool]:
        """True: the Trainer subclass overrides create_optimizer with MoE groups; False: overrides it without;
        None: a stock Trainer (HF builds plain groups) or nothing to read."""
        from dslint.program.models.optimizers import trainer_optimizer_has_moe_groups
        return trainer_optimizer_has_moe_groups(self.view, trainer_name)

    @staticmethod
    def optimizer_params_arg(ctor: Any) -> Any:
        """The params argument of an optimizer construction."""
        from dslint.program.models.optimizers import optimizer_params_arg
        return optimizer_params_arg(ctor)

    def classify_optimizer(self, src: "PythonSource", scope: Optional["FunctionInfo"], expr: Any
                           ) -> tuple[str, Any, Optional["PythonSource"]]:
        """How the client optimizer `expr` is built (`PLAIN`, MoE-aware ...), with the construction and its file."""
        from dslint.program.models.optimizers import classify_optimizer
        return classify_optimizer(self.view, src, scope, expr)

    @staticmethod
    def optimizer_constructions(src: "PythonSource") -> Iterable:
        from dslint.program.models.param_groups import optimizer_constructions
        return optimizer_constructions(src)

    @staticmethod
    def param_groups(src: "PythonSource", scope: Optional["FunctionInfo"], expr: Any):
        """The name-filtered param groups an optimizer is built over (None: not readable)."""
        from dslint.program.models.param_groups import groups_of
        return groups_of(src, scope, expr)

    @staticmethod
    def uncovered_parameters(groups) -> Optional[list[tuple[str, bool]]]:
        from dslint.program.models.param_groups import uncovered
        return uncovered(groups)

    @staticmethod
    def uncovered_name_tests(groups) -> Optional[int]:
        from dslint.program.models.param_groups import uncovered_name_tests
        return uncovered_name_tests(groups)

    def uniform_inputs(self, cls: ModuleClass) -> frozenset:
        """Forward parameters of `cls` that every caller in the run passes uniformly (memoised per class)."""
        from dslint.program.models.forward_paths import uniform_inputs
        cache = self.memo("uniform-inputs", dict)
        if id(cls) not in cache:
            cache[id(cls)] = uniform_inputs(self.models(), cls, project=self.view)
        return cache[id(cls)]

    def input_origins(self, cls: ModuleClass) -> dict:
        """Input of `cls.forward` -> what its call sites hand it: batch data, a value uniform per call site, or
        unknown (`input_origins.forward_origins`, memoised per class)."""
        from dslint.program.models.input_origins import forward_origins
        return forward_origins(self.view, self.models(), cls)

    def inputs_not_fed(self, cls: ModuleClass) -> frozenset:
        """Inputs of `cls.forward` that no call of the run feeds from the batch (`input_origins.not_fed`)."""
        from dslint.program.models.input_origins import not_fed
        return not_fed(self.input_origins(cls))

    def inputs_behind(self, cls: ModuleClass, fn, names) -> list:
        """(input, Origin) of each input of `cls.forward` (`fn`) the locals `names` come from, batch-fed ones first
        (`input_origins.behind`)."""
        from dslint.program.models.input_origins import behind
        return behind(self.input_origins(cls), fn, names)

    def inputs_set_by_callers(self, cls: ModuleClass) -> frozenset:
        """Optional forward parameters of `cls` whose value is the same on every rank at every call of the run that
        hands them over -- a literal per call site, a run setting, an option of the caller -- or that no call hands
        over in a run that builds the class and whose model calls are all seen
        (`forward_paths.inputs_set_by_callers`; memoised per class)."""
        from dslint.program.models.forward_paths import inputs_set_by_callers
        cache = self.memo("inputs-set-by-callers", dict)
        if id(cls) not in cache:
            cache[id(cls)] = inputs_set_by_callers(self.view, self.models(), cls)
        return cache[id(cls)]

    def builds_another(self, container: ModuleClass, cls: ModuleClass) -> bool:
        """Do all of `container`'s constructions of a class named like `cls` resolve, through its file's definitions
        and imports, to another class of that name (`forward_paths.creates_another`)?"""
        from dslint.program.models.forward_paths import creates_another
        return creates_another(self.view, container, cls, self.models())

    def used_on_every_call(self, container: ModuleClass, cls: ModuleClass, attr: str) -> bool:
        """Does every returning call of `container.forward` run a held `cls` object's forward, which uses `attr` on
        every path (`always_run.used_on_every_call`, memoised)?"""
        from dslint.program.models.always_run import used_on_every_call
        return used_on_every_call(self.view, self.models(), container, cls, attr)

    def caller_keys(self, cls: ModuleClass) -> dict:
        """Forward parameters of `cls` that every caller in the run fills from one batch field by its literal key
        (`sensors.get("depth")`): parameter -> key (memoised per class)."""
        from dslint.program.models.forward_paths import caller_keys
        cache = self.memo("caller-keys", dict)
        if id(cls) not in cache:
            cache[id(cls)] = caller_keys(self.models(), cls, project=self.view)
        return cache[id(cls)]

    def optimizer_excluded(self) -> frozenset:
        """ids of the run's module attributes that every optimizer of the run leaves out."""
        from dslint.program.models.param_groups import optimizer_excluded
        return self.memo("optimizer-excluded", lambda: optimizer_excluded(self.models(), self.view))

    def uncovered_parameter_names(self, src: "PythonSource", scope: Optional["FunctionInfo"], groups) -> list[str]:
        """The parameters of the groups' model (when its class is one of the run's) that no group takes."""
        from dslint.program.models.param_groups import uncovered_parameter_names
        return uncovered_parameter_names(self.models(), src, scope, groups)

    @staticmethod
    def returns_value(fn: "FunctionInfo") -> bool:
        """The function hands something back (`return model`), so its callers hold what it built."""
        from dslint.program.models.moe import returns_value
        return returns_value(fn.node)

    # ---- nn.Module models ---------------------------------------------------------------------------------
    def parameter_names_built(self, src: "PythonSource", value) -> Optional[list]:
        """The parameter names of the module the expression `value` builds (`param_groups.built_parameter_names`:
        a torch.nn layer, a Sequential of them, a class of the run); None when not all known."""
        from dslint.program.models.param_groups import built_parameter_names
        return built_parameter_names(self.models(), src, value)

    @staticmethod
    def filter_rejects_all(src: "PythonSource", scope, condition, name_var: str, param_var: str, names: list) -> bool:
        """Does the name filter `condition` of a `named_parameters()` loop hold for none of `names`
        (`param_groups.filter_rejects_all`; names bound once in `scope` read as their value)?"""
        from dslint.program.models.param_groups import _single_value, filter_rejects_all
        return filter_rejects_all(condition, name_var, param_var, names, lambda n: _single_value(src, scope, n))

    def models(self) -> ModelFacts:
        """The run's `nn.Module` classes, the parameters/submodules they create, and what the scripts freeze."""
        from dslint.program.models.modules import model_facts
        return model_facts(self.view)

    def built_only_where_untrained(self, cls: ModuleClass) -> bool:
        """The class is built only through a flag-chosen class value (`Inf if for_inference else Train`) whose
        every choosing call sits in a file that trains nothing (memoised per class)."""
        from dslint.program.models.modules import built_only_where_untrained
        cache = self.memo("built-only-where-untrained", dict)
        if id(cls) not in cache:
            cache[id(cls)] = built_only_where_untrained(self.view, self.models(), cls)
        return cache[id(cls)]

    def flag_choice_unseen(self, cls: ModuleClass) -> bool:
        """The class is built only through a flag-chosen class value of a function no call of the run reaches
        (memoised per class)."""
        from dslint.program.models.modules import flag_choice_unseen
        cache = self.memo("flag-choice-unseen", dict)
        if id(cls) not in cache:
            cache[id(cls)] = flag_choice_unseen(self.view, self.models(), cls)
        return cache[id(cls)]

    def never_created(self, attr) -> bool:
        """The attribute is created only under a constructor flag that every construction of its class in the run
        settles the other way (memoised per attribute)."""
        from dslint.program.models.modules import never_created
        cache = self.memo("never-created", dict)
        if id(attr) not in cache:
            cache[id(attr)] = never_created(self.view, self.models(), attr)
        return cache[id(attr)]

    def never_trained(self, cls: ModuleClass) -> bool:
        """Every construction of the model class found (itself or a class holding it) is in a file that trains
        nothing, itself or through a function it calls (memoised per class)."""
        from dslint.program.models.modules import never_trained
        cache = self.memo("never-trained", dict)
        if id(cls) not in cache:
            cache[id(cls)] = never_trained(self.view, self.models(), cls)
        return cache[id(cls)]

    def trained_chain(self, cls: ModuleClass):
        """The training call (`trained_chain.Sink`: DeepSpeed's initialize, DDP/FSDP, accelerate's prepare, a
        Trainer, a backward) that an object built from the class -- a subclass, a holder -- is seen flowing into,
        or None: positive evidence that the run trains it (memoised per class)."""
        from dslint.program.models.trained_chain import trained_chain
        cache = self.memo("trained-chain", dict)
        if id(cls) not in cache:
            cache[id(cls)] = trained_chain(self.view, self.models(), cls)
        return cache[id(cls)]

    def per_element_guard(self, cls: ModuleClass, test: str, inputs: tuple) -> Optional[str]:
        """When `test` (code) is an empty-input guard of one of `inputs` (`x.shape[0] == 0`) and every call of the
        class the run shows runs once per element of its caller's input (`for sample in inputs: self.enc(sample)`),
        that loop; None otherwise (`dslint.program.models.per_element`)."""
        from dslint.program.models.per_element import emptiness_input, per_element_loop
        name = emptiness_input(test)
        if name is None or name not in inputs:
            return None
        return per_element_loop(self.view, self.models(), cls)

    def uneven_submodule_uses(self, src: "PythonSource") -> list:
        """Sub-module outputs that a patched-in forward (or a helper it hands the model to) uses on some data
        paths only (`dslint.program.models.patched_forwards`)."""
        from dslint.program.models.patched_forwards import uneven_uses
        return self.memo(("uneven-submodule-uses", id(src)), lambda: uneven_uses(self.view, src))

    def patched_class_trained(self, cls) -> Optional[tuple]:
        """(file, line) of a construction of a patched class in a file of the run that trains; None when none is
        found (`dslint.program.models.patched_forwards.class_trained`)."""
        from dslint.program.models.patched_forwards import class_trained
        return class_trained(self.view, cls)

    def constant_losses(self, src: "PythonSource") -> list:
        """Losses that are a constant on a data-dependent path (`dslint.program.models.constant_losses`)."""
        from dslint.program.models.constant_losses import constant_losses
        return constant_losses(self.view, src)

    def attribute_read_count(self, name: str) -> int:
        from dslint.program.models.modules import attribute_read_count
        return attribute_read_count(self.view, name)

    @staticmethod
    def reaches_attributes_dynamically(cls: ModuleClass) -> bool:
        from dslint.program.models.modules import reaches_attributes_dynamically
        return reaches_attributes_dynamically(cls)

