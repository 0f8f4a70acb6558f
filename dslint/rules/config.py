"""DSL4xx: DeepSpeed config rules — keys, values, batch arithmetic, precision, ZeRO/offload combinations,
`"auto"` outside the HF integration, MoE-specific ZeRO settings — for JSON configs and for dicts built in Python
and handed to `deepspeed.initialize`/`init_inference`, `TrainingArguments(deepspeed=...)`, `HfDeepSpeedConfig`,
Accelerate's `DeepSpeedPlugin(hf_ds_config=...)` (`dslint.program.pyconfig`: literals, `dict(...)`, mutations, helper
returns; nothing is reported that depends on a value dslint cannot know).

Every finding sits on the offending key (for a Python-built config, the line where the key is written). The key/value checks share one pass (`dslint.dsconfig.analyse`,
memoised per source); configs for `deepspeed.init_inference` (a different schema) are left alone.
"""

from __future__ import annotations

import textwrap
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Optional

from dslint.dsconfig.semantics import (batch_findings, moe_zero_findings, offload_findings,
                                       precision_findings)
from dslint.findings import Fix, Severity
from dslint.program.query import Program
from dslint.rules.base import Diagnostic, Example, Rule, RuleContext

if TYPE_CHECKING:
    from dslint.dsconfig.check import Analysis

DS_CONFIG_DOCS = "DeepSpeed config reference: https://www.deepspeed.ai/docs/config-json/"


def analyse(data, partial: bool = False, version: Optional[str] = None) -> "Analysis":
    from dslint.dsconfig.check import analyse as run     # pydantic: imported once a config is checked
    return run(data, partial, version)


def is_inference_config(data) -> bool:
    from dslint.dsconfig.top import is_inference_config as test
    return test(data)


def where(path) -> str:
    return ".".join(str(p) for p in path) if path else "the top level"


def analysis_of(src, version: Optional[str] = None) -> "Analysis":
    """The analysis of a JSON config at the DeepSpeed `version` the project uses, memoised per version."""
    cached = src.__dict__.setdefault("_dslint_dsconfig", {})
    if version not in cached:
        cached[version] = analyse(src.data, version=version)
    return cached[version]


# words one of which a Python file holding (part of) a DeepSpeed config dict contains
PY_CONFIG_TRIGGERS = ("initialize", "init_inference", "TrainingArguments", "HfDeepSpeedConfig", "DeepSpeedPlugin",
                      "zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "fp16", "bf16")


class Subject:
    """One config under check: a JSON file, or a dict built in Python (`dslint.program.pyconfig.PyConfig`, whose
    unknown values no finding may depend on)."""

    def __init__(self, ctx: RuleContext, pyconfig=None):
        self.ctx, self.py = ctx, pyconfig
        self.data = pyconfig.data if pyconfig is not None else ctx.source.data

    @property
    def version(self) -> Optional[str]:
        """The DeepSpeed version this config runs against: that of a DeepSpeed source tree holding the file
        (its own tests and examples), else the one the project uses (option, pin or installed); the table judges
        at the nearest release at or below it."""
        return self.ctx.program.deepspeed_version_for(self.py.src if self.py is not None else self.ctx.source)

    @property
    def analysis(self) -> "Analysis":
        version = self.version
        if self.py is None:
            return analysis_of(self.ctx.source, version)
        cached = getattr(self.data, "_dslint_analysis", None)
        if cached is None or cached.version != version:
            cached = self.data._dslint_analysis = analyse(self.data, partial=True, version=version)
        return cached

    def semantic(self, fn, *args):
        """fn(data, *args)'s findings; none of them when it read an unknown value of a Python-built config, nor
        one about a key the project's DeepSpeed release does not read (DSL401/403 report that key)."""
        if self.py is None:
            found = fn(self.data, *args)
        else:
            found, known = Program.reading_known(fn, self.data, *args)
            found = found if known else []
        if not found:
            return found
        from dslint.dsconfig.table import reads
        release = self.analysis.release
        return [f for f in found if reads(release, f.path)]

    def overwrites(self, path) -> bool:
        """The consumer writes `path` (or a section holding it) itself before DeepSpeed reads the config: the
        consumer it is handed to (accelerate), or the program that loads the file and writes into the dict before
        handing it to `deepspeed.initialize` (`Program.config_keys_written`: an "auto" it fills itself)."""
        if _under(path, Program.overwritable()) and _under(path, self.overwritten):
            return True
        return self.py is None and _under(tuple(path), self.ctx.program.config_keys_written(self.ctx.source))

    @cached_property
    def overwritten(self) -> frozenset:
        """The key paths the consumer this config is handed to writes before DeepSpeed reads it (accelerate's
        DeepSpeedPlugin sets `steps_per_print`): what the file holds there never reaches DeepSpeed."""
        if self.py is not None:
            return Program.keys_overwritten_by_call(self.py.call.callee)
        return self.ctx.program.keys_overwritten(self.ctx.source)

    @property
    def world_size(self):
        return self.ctx.program.world_size_for(self.py.src if self.py is not None else self.ctx.source)

    @property
    def scripts(self) -> list:
        """The scripts that use this config."""
        if self.py is not None:
            return [self.py.src]
        return self.ctx.program.scripts_using(self.ctx.source)

    @property
    def hf_call(self) -> bool:
        """A Python-built config handed to the HF integration itself (TrainingArguments, HfDeepSpeedConfig,
        DeepSpeedPlugin)."""
        return self.py is not None and not (self.py.call.callee or "").endswith(("initialize", "init_inference"))

    @property
    def via_hf(self) -> bool:
        """A JSON config the HF integration hands to DeepSpeed: the `deepspeed` entry of an arguments JSON, an
        accelerate config's `deepspeed_config_file`."""
        if self.py is not None:
            return False
        use = self.ctx.program.json_use(self.ctx.source)
        return use is not None and use.via_hf

    def filled(self, keys: tuple, fn, *args) -> list:
        """fn(config filled from each arguments JSON that names it, *args)'s findings, each message saying which
        arguments file filled which `"auto"` value among `keys` (`Program.filled_by_arguments`); one finding per
        message, none offering a fix (the values come from the arguments file: which side is wrong is the
        user's call). `args` may hold `WORLD`, the world size of the arguments file's launcher line."""
        if self.py is not None:
            return []
        out, seen = [], set()
        for path, data, filled, world in self.ctx.program.filled_by_arguments(self.ctx.source):
            shown = [f for f in filled if f.startswith(keys)]
            if not shown:
                continue
            for f in fn(data, *[world if a is WORLD else a for a in args]):
                f.message = f"with \"auto\" filled from the arguments file {path} ({', '.join(shown)}): {f.message}"
                f.fix_path, f.fix_delete = None, False
                if f.message not in seen:
                    seen.add(f.message)
                    out.append(f)
        return out


WORLD = object()        # `Subject.filled`'s stand-in for the world size of the arguments file's launcher line


class Change:
    """The one change a config finding implies, for dslint.fixes: rename the key at the finding's path to
    `rename`, and/or set the value at `path` (default: the finding's) to `value`."""

    def __init__(self, description: str, applicability: str, rename: Optional[str] = None, path=None,
                 value: Any = None, has_value: bool = False, delete: bool = False):
        self.description, self.applicability = description, applicability
        self.rename, self.path, self.value, self.has_value = rename, path, value, has_value
        self.delete = delete        # delete the member at `path` (a JSON member, a dict literal's element)

    def json_fix(self, source, path) -> Optional[Fix]:
        from dslint.fixes.jsonedit import delete_member, rename_key, set_value
        if self.delete:
            return self._fix([delete_member(source, self.path or path)])
        edits = []
        if self.rename is not None:
            edits.append(rename_key(source, path, self.rename))
        if self.has_value:
            edits.append(set_value(source, self.path or path, self.value))
        return self._fix(edits)

    def python_fix(self, source, cfg, path) -> Optional[Fix]:
        from dslint.fixes.python import config_key_node, config_value_node, literal, renamed_key, replace_nodes
        mapping = {}
        if self.delete:
            import libcst as cst
            key = config_key_node(cfg, self.path or path, source)
            element = source._parents.get(id(key)) if key is not None else None
            holder = source._parents.get(id(element)) if element is not None else None
            if not isinstance(element, cst.DictElement) or element.key is not key or not isinstance(holder, cst.Dict):
                return None
            kept = [e for e in holder.elements if e is not element]
            if kept and holder.elements[-1] is element:
                kept[-1] = kept[-1].with_changes(comma=element.comma)     # the last one ends as the deleted did
            mapping[holder] = holder.with_changes(elements=kept)
        if self.rename is not None:
            key = config_key_node(cfg, path, source)
            new = renamed_key(key, self.rename) if key is not None else None
            parent = _dict_at(cfg.data, path[:-1])
            if new is None or parent is None or dict.__contains__(parent, self.rename):
                return None
            mapping[key] = new
        if self.has_value:
            key = config_key_node(cfg, self.path or path, source)
            value = config_value_node(source, key) if key is not None else None
            code = literal(self.value)
            if value is None or code is None:
                return None
            mapping[value] = code
        try:
            edits = replace_nodes(source, mapping)
        except Exception:
            return None
        return self._fix(edits)

    def _fix(self, edits) -> Optional[Fix]:
        if not edits or any(e is None for e in edits):
            return None
        return Fix(description=self.description, applicability=self.applicability, edits=edits)


def _under(path, paths) -> bool:
    """`path` is one of `paths` or inside one."""
    return any(tuple(path[:len(p)]) == p for p in paths)


def _dict_at(data, path):
    for part in path:
        if not isinstance(data, dict) or not dict.__contains__(data, part):
            return None
        data = dict.__getitem__(data, part)
    return data if isinstance(data, dict) else None


def _implied(f) -> Optional[Change]:
    """The one value change a cross-key finding implies (unsafe: it changes what the job does)."""
    if f.fix_delete:
        return Change(f"Delete `{where(f.path)}` (or raise the ZeRO stage to what it needs).", "unsafe",
                      path=f.path, delete=True)
    if f.fix_path is None:
        return None
    return Change(f"Set `{where(f.fix_path)}` to {str(f.fix_value).lower() if isinstance(f.fix_value, bool) else f.fix_value}.",
                  "unsafe", path=f.fix_path, value=f.fix_value, has_value=True)


class ConfigRule(Rule):
    """A DSL4xx rule: `problems(subject)` yields (message, JSON path, severity or None) for one config; a JSON
    config reports on its key, a dict built in Python on the line where the key is written."""

    kinds = frozenset({"json", "python"})
    triggers = PY_CONFIG_TRIGGERS
    inference_too = False

    def wants(self, ctx: RuleContext) -> bool:
        if ctx.source.kind == "python":
            return bool(ctx.program.configs_written_in(ctx.source))
        data = ctx.source.data
        return isinstance(data, dict) and (self.inference_too or not is_inference_config(data)) and \
            ctx.program.is_deepspeed_config(ctx.source)     # not an HF arguments file (dslint.program.json_kinds)

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        if ctx.source.kind != "python":
            subject = Subject(ctx)
            for message, path, severity, *change in self.problems(subject):
                if subject.overwrites(path):
                    continue
                fix = change[0].json_fix(ctx.source, path) if change and change[0] else None
                yield Diagnostic(message, path, severity=severity, fix=fix)
            return
        seen = set()
        for cfg in ctx.program.configs_written_in(ctx.source):
            if not self.inference_too and (cfg.inference or is_inference_config(cfg.data)):
                continue
            subject = Subject(ctx, cfg)
            for message, path, severity, *change in self.problems(subject):
                if subject.overwrites(path):
                    continue
                src, node = cfg.location(path)
                if src is not ctx.source or (id(node), message) in seen:
                    continue
                seen.add((id(node), message))
                fix = change[0].python_fix(ctx.source, cfg, path) if change and change[0] else None
                yield Diagnostic(message, node, severity=severity, fix=fix)

    def problems(self, subject: Subject) -> Iterable[tuple]:
        raise NotImplementedError


class UnknownConfigKey(ConfigRule):
    """A key DeepSpeed does not read, at any level of the config, with the closest valid key.

    **Why it matters**: DeepSpeed reads the top level and several sections (`optimizer`, `aio`,
    `flops_profiler`, `activation_checkpointing`, …) with `dict.get`: a misspelled key there is silently
    ignored — `"gradient_acumulation_steps": 8` trains with accumulation 1 and a different global batch, and
    nothing says so. Sections DeepSpeed builds with pydantic (`zero_optimization`, its `offload_*`, `fp16`,
    `bf16`, `comms_logger`, monitors, `compile`, `tensor_parallel`, …) forbid extra keys: `deepspeed.initialize`
    fails on every rank after the job waited in the queue. The message says which of the two happens.

    Keys are those of the DeepSpeed release the project uses (`--deepspeed-version`, a pin, the installed
    DeepSpeed): the nearest release at or below it in dslint's table, generated from DeepSpeed's own sources for
    every release from 0.10.0 on (the newest when the version is unknown); a file inside a DeepSpeed source tree
    (its own tests and examples) at the version of that tree's version file, and a release older than the table
    at its oldest, as a warning that says so. Whether a section forbids extra keys
    is that release's too (`fp16` is read with `dict.get` before 0.17.1, a pydantic model from then on), and a key other
    releases read says which (`compile.backend`: 0.13.2–0.14.3). Mappings DeepSpeed hands on whole
    (`optimizer.params`, `scheduler.params`, `pipeline`, `expert_parallel`, …) are not checked below their top.

    Like every DSL4xx rule it also checks configs built in Python and handed to `deepspeed.initialize`,
    `init_inference`, `TrainingArguments(deepspeed=...)`, `HfDeepSpeedConfig` or `DeepSpeedPlugin(hf_ds_config=...)`:
    dict literals, `dict(...)`, `cfg["zero_optimization"] = {...}`, `cfg.update(...)`, `cfg.setdefault(...)`, and
    the dict a helper function of the checked files returns. The finding sits where the key is written; a value
    dslint cannot know (a parameter, `args.x`) is never reported, nor anything that depends on it. A dotted key
    (`"zero_optimization.reduce_bucket_size"`, Accelerate's notation) is not expanded by DeepSpeed.

    A key the program itself reads from the same file is its own setting, not a typo: a script a launcher line
    hands the config to by a flag that loads that file as JSON (`cfg = json.load(open(args.deepspeed_config))`,
    through helpers of the checked files too) and reads the key from the result (`cfg.get("precision")`,
    `cfg["lora"]`, `"lora" in cfg`) -- for a config nothing references, any script the run hands a config that
    way (`dslint.program.config_reads`).
    """

    code = "DSL401"
    name = "unknown-config-key"
    # a helper that loads the config file as JSON is part of the data flow that shows a key is the program's own
    # setting (`dslint.program.config_reads`): such files stay in the view
    triggers = PY_CONFIG_TRIGGERS + ("json.load", "hjson.load")
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "a config key DeepSpeed does not read (misspelled or misplaced), with a did-you-mean suggestion"
    fix_advice = "Rename the key to the suggested one (or move it to the section it belongs to); delete it otherwise."
    autofix = 'a did-you-mean rename when it is the only candidate (a case-only difference or the one close key) and the object does not have that key yet: safe where `deepspeed.initialize` rejects the key, unsafe where DeepSpeed ignored it (the setting starts to apply). A key that resembles no DeepSpeed key is deleted: unsafe where initialize rejects it, display where DeepSpeed ignores it (other code may read it). JSON and dict literals built in Python.'
    references = (DS_CONFIG_DOCS, "deepspeed/runtime/config.py", "deepspeed/runtime/zero/config.py")
    versions = "Keys of the release the project uses (table generated from DeepSpeed 0.10.0 to 0.19.8)."
    suppress_when = "Never for a misspelling; a private annotation key (e.g. `_comment`) at a dict.get level is harmless."
    VALID = (
        Example('{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 8,\n'
                '  "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e7,\n'
                '                        "offload_optimizer": {"device": "cpu", "pin_memory": true}}\n}\n',
                filename="ds_config.json"),
        """
        import deepspeed
        ds_config = {"train_micro_batch_size_per_gpu": 4, "_comment": "ZeRO-2 with CPU Adam"}
        ds_config["zero_optimization"] = {"stage": args.zero_stage, "offload_optimizer": {"device": "cpu"}}
        engine, *_ = deepspeed.initialize(model=model, config=ds_config)
        """,
    )
    INVALID = (
        Example('{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_acumulation_steps": 8\n}\n',
                filename="ds_config.json", expect_lines=(3,),
                fixed='{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 8\n}\n'),
        Example('{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {\n    "stage": 2,\n'
                '    "offload_optimiser": {"device": "cpu"}\n  }\n}\n', filename="ds_config.json", expect_lines=(5,),
                fixed='{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {\n    "stage": 2,\n'
                      '    "offload_optimizer": {"device": "cpu"}\n  }\n}\n'),
        Example(textwrap.dedent("""\
        import deepspeed
        ds_config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}
        ds_config["zero_optimization"]["offload_optimiser"] = {"device": "cpu"}  # expect: DSL401
        engine, *_ = deepspeed.initialize(model=model, config=ds_config)
        """), fixed="""\
        import deepspeed
        ds_config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}
        ds_config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}  # expect: DSL401
        engine, *_ = deepspeed.initialize(model=model, config=ds_config)
        """),
        # a key no DeepSpeed key resembles, in a section that rejects unknown keys: deleted (unsafe)
        Example('{\n  "train_micro_batch_size_per_gpu": 4,\n  "fp16": {\n    "enabled": true,\n'
                '    "opt_level": "O2"\n  }\n}\n', filename="ds_config.json", expect_lines=(5,),
                fixed='{\n  "train_micro_batch_size_per_gpu": 4,\n  "fp16": {\n    "enabled": true\n  }\n}\n'),
        Example(textwrap.dedent("""\
        import deepspeed
        ds_config = {
            "train_micro_batch_size_per_gpu": 4,
            "bf16": {"enabled": True, "opt_level": "O2"},  # expect: DSL401
        }
        engine, *_ = deepspeed.initialize(model=model, config=ds_config)
        """), fixed="""\
        import deepspeed
        ds_config = {
            "train_micro_batch_size_per_gpu": 4,
            "bf16": {"enabled": True},  # expect: DSL401
        }
        engine, *_ = deepspeed.initialize(model=model, config=ds_config)
        """),
        # two close keys (`stage3_max_live_parameters` and its alias `max_live_parameters`): no unique
        # did-you-mean, so no rename is offered
        Example('{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {"stage": 3, '
                '"stage3_max_live_parameter": 1e9}\n}\n', filename="ds_config.json", expect_lines=(3,)),
    )

    def problems(self, subject: Subject) -> Iterable[tuple]:
        analysis = subject.analysis
        # keys the program reads from the same file itself (`cfg = json.load(open(args.deepspeed_config))`,
        # `cfg.get("precision")`), or that its own DeepSpeed wrapper reads (`from msamp import deepspeed`):
        # stock DeepSpeed ignores them, but they are the program's own settings
        program = subject.ctx.program
        consumed = program.config_keys_read(subject.ctx.source) if subject.py is None else \
            program.entry_keys_read(subject.py)
        for p in analysis.of("unknown"):
            if tuple(p.path) in consumed:
                continue
            sev = None if (p.deepspeed_fails or p.suggestion) and not analysis.predates else Severity.WARNING
            change = None
            if p.rename:
                # where initialize failed on the key there is no working behaviour to keep; where DeepSpeed
                # ignored it, the renamed key now takes effect
                change = Change(f"Rename `{p.path[-1]}` to `{p.rename}`.", "safe" if p.deepspeed_fails else "unsafe",
                                rename=p.rename)
            elif p.suggestion is None and isinstance(p.path[-1], str):
                # no DeepSpeed key it could stand for: delete it -- unsafe where initialize rejects it (the run
                # starts working, whatever the key meant is dropped), display where DeepSpeed ignores it (other
                # code may read the key from the same file)
                change = Change(f"Delete `{p.path[-1]}`.", "unsafe" if p.deepspeed_fails else "display", delete=True)
            yield p.message, p.path, sev, change


class DeprecatedConfigKey(ConfigRule):
    """A key DeepSpeed still accepts but has replaced: `cpu_offload` → `offload_optimizer`,
    `cpu_offload_param` → `offload_param`, `stage3_gather_fp16_weights_on_model_save` →
    `stage3_gather_16bit_weights_on_model_save`, `bfloat16` → `bf16`, the boolean `"zero_optimization": true`,
    `aio.thread_count` → `aio.intra_op_parallelism` (no longer read at all).

    **Why it matters**: deprecated keys are translated with a warning today and removed later; giving both
    the old and the new key fails `initialize` ("Cannot provide deprecated parameter … together").
    """

    code = "DSL402"
    name = "deprecated-config-key"
    severity = Severity.WARNING
    summary = "a deprecated config key, named with its replacement"
    fix_advice = "Use the replacement key named in the message."
    autofix = 'safe where DeepSpeed maps the key one to one: `bfloat16` → `bf16`, `stage3_gather_fp16_weights_on_model_save` → `stage3_gather_16bit_weights_on_model_save`, `cpu_offload: true/false` → `offload_optimizer: {"device": "cpu"/"none"}` (likewise `cpu_offload_param` → `offload_param`); unsafe for `aio.thread_count` → `intra_op_parallelism` (no longer read at all).'
    references = ("deepspeed/runtime/zero/config.py (json_schema_extra deprecated)", DS_CONFIG_DOCS)
    versions = "Deprecations of the release the project uses (table generated from DeepSpeed 0.10.0 to 0.19.8)."
    suppress_when = "When the config must also run on a DeepSpeed old enough not to know the replacement."
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": 2, '
                     '"offload_optimizer": {"device": "cpu"}}\n}\n', filename="ds_config.json"),)
    INVALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 2,\n'
                       '    "cpu_offload": true\n  }\n}\n', filename="ds_config.json", expect_lines=(5,),
                       fixed='{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 2,\n'
                             '    "offload_optimizer": {"device": "cpu"}\n  }\n}\n'),
               Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "bfloat16": {"enabled": true},\n'
                       '  "zero_optimization": {"stage": 3, "stage3_gather_fp16_weights_on_model_save": true}\n}\n',
                       filename="ds_config.json", expect_lines=(3, 4),
                       fixed='{\n  "train_micro_batch_size_per_gpu": 1,\n  "bf16": {"enabled": true},\n'
                             '  "zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": true}\n}\n'),
               Example(textwrap.dedent("""\
               import deepspeed
               config = {"train_micro_batch_size_per_gpu": 1, "bfloat16": {"enabled": True}}  # expect: DSL402
               engine, *_ = deepspeed.initialize(model=model, config=config)
               """), fixed="""\
               import deepspeed
               config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}}  # expect: DSL402
               engine, *_ = deepspeed.initialize(model=model, config=config)
               """))

    def problems(self, subject: Subject) -> Iterable[tuple]:
        for p in subject.analysis.of("deprecated"):
            yield p.message, p.path, None, _deprecated_change(p.path)


# deprecated key -> (replacement, value map or None for the same value, applicability): the keys DeepSpeed maps
# one to one (zero/config.py, top-level bf16, aio): `cpu_offload: true` is `offload_optimizer: {"device": "cpu"}`
_DEPRECATED_FIXES = {
    "bfloat16": ("bf16", None, "safe"),
    "stage3_gather_fp16_weights_on_model_save": ("stage3_gather_16bit_weights_on_model_save", None, "safe"),
    # DeepSpeed: true -> an offload config with device cpu, false -> none (no offload: device "none")
    "cpu_offload": ("offload_optimizer", {True: {"device": "cpu"}, False: {"device": "none"}}, "safe"),
    "cpu_offload_param": ("offload_param", {True: {"device": "cpu"}, False: {"device": "none"}}, "safe"),
    # no longer read at all: renaming makes the setting take effect
    "thread_count": ("intra_op_parallelism", None, "unsafe"),
}


def _deprecated_change(path) -> Optional[Change]:
    entry = _DEPRECATED_FIXES.get(path[-1]) if path and isinstance(path[-1], str) else None
    if entry is None:
        return None
    new, values, applicability = entry
    return _MappedChange(f"Rename `{path[-1]}` to `{new}`" + (" (true → {\"device\": \"cpu\"}, false → "
                                                             "{\"device\": \"none\"}, as DeepSpeed maps it)"
                                                             if values else "") + ".",
                         applicability, rename=new, values=values)


class _MappedChange(Change):
    """A rename whose value is mapped as DeepSpeed maps it (no fix for a value outside the map)."""

    def __init__(self, description, applicability, rename, values):
        super().__init__(description, applicability, rename=rename)
        self.values = values

    def _mapped(self, current) -> bool:
        if self.values is None:
            return True
        if isinstance(current, bool) and current in self.values:
            self.value, self.has_value = self.values[current], True
            return True
        return False

    def json_fix(self, source, path):
        from dslint.fixes.jsonedit import _value_at
        return super().json_fix(source, path) if self._mapped(_value_at(source.data, path)) else None

    def python_fix(self, source, cfg, path):
        parent = _dict_at(cfg.data, path[:-1])
        current = dict.get(parent, path[-1]) if parent is not None else None
        return super().python_fix(source, cfg, path) if self._mapped(current) else None


class RemovedConfigKey(ConfigRule):
    """A config block for a feature DeepSpeed removed (issue #8489): `amp`, `sparse_attention`,
    `elasticity`, `curriculum_learning` (top level), `progressive_layer_drop`, `compression_training`,
    `quantize_training`, `eigenvalue`, `sparse_gradients`, `nebula`, `graph_harvesting`,
    `zero_optimization.mics_*`, `zero_optimization.zeropp_loco_param`.

    **Why it matters**: DeepSpeed 0.19.8 raises `DeepSpeedConfigError` on them at `initialize`
    (`_REMOVED_TOP_LEVEL_CONFIG_KEYS`, `_REMOVED_ZERO_CONFIG_KEYS`, read into dslint's generated table); older
    releases honour them. Reported when the release the project uses lists the key as removed: an error
    when the version is known, a warning when it is not (judged at the newest release). A config inside a
    DeepSpeed source tree (a vendored DeepSpeed's own tests) is judged at that tree's version file.
    """

    code = "DSL403"
    name = "removed-config-key"
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "a config key for a feature removed from DeepSpeed (initialize raises on it)"
    fix_advice = "Delete the block, or use the replacement the message names."
    autofix = 'unsafe (DeepSpeed ≥ 0.19.8, where initialize raises): delete the block; display on older or unknown versions.'
    references = ("DeepSpeed #8489", "deepspeed/runtime/config.py _reject_removed_config_keys")
    versions = "Rejected from DeepSpeed 0.19.8 on (the generated table); accepted by earlier releases."
    suppress_when = "When the config only runs with a DeepSpeed release that still has the feature."
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "bf16": {"enabled": true}\n}\n',
                     filename="ds_config.json"),)
    INVALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "amp": {"enabled": true, "opt_level": "O1"}\n}\n',
                       filename="ds_config.json", expect_lines=(3,),
                       fixed='{\n  "train_micro_batch_size_per_gpu": 1\n}\n'),)

    def problems(self, subject: Subject) -> Iterable[tuple]:
        # the table lists a removal only at the releases that reject the key; an unknown version is judged at
        # the newest release, so the finding is then a warning
        analysis = subject.analysis
        sev = Severity.ERROR if subject.version is not None and not analysis.predates else Severity.WARNING
        for p in analysis.of("removed"):
            change = Change(f"Delete `{where(p.path)}` (the feature is gone from DeepSpeed).",
                            "unsafe" if sev is Severity.ERROR else "display", delete=True)
            yield p.message, p.path, sev, change


class DuplicateConfigKey(ConfigRule):
    """The same key twice in one JSON object.

    **Why it matters**: DeepSpeed loads a config path with `object_pairs_hook=dict_raise_error_on_duplicate_keys`
    and fails ("Duplicate keys in DeepSpeed config"); a config loaded by other code (`json.load` in the HF
    integration or a script) silently keeps the last value, so the two loaders disagree on the setting.
    """

    code = "DSL404"
    name = "duplicate-config-key"
    severity = Severity.ERROR
    summary = "a key given twice in one object of the config"
    fix_advice = "Keep one occurrence with the value you mean."
    autofix = 'display: delete the earlier occurrence (the value `json.load` kept stays).'
    references = ("deepspeed/runtime/config_utils.py dict_raise_error_on_duplicate_keys",)
    versions = "All DeepSpeed versions."
    inference_too = True
    kinds = frozenset({"json"})
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 2,\n  "steps_per_print": 10\n}\n',
                     filename="ds_config.json"),)
    INVALID = (Example('{\n  "train_micro_batch_size_per_gpu": 2,\n  "train_micro_batch_size_per_gpu": 4\n}\n',
                       filename="ds_config.json", expect_lines=(3,),
                       fixed='{\n  "train_micro_batch_size_per_gpu": 4\n}\n'),)

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        from dslint.fixes.jsonedit import delete_first_duplicate
        for i, (path, span) in enumerate(ctx.source.parsed.duplicate_keys):
            edit = delete_first_duplicate(ctx.source, i)
            fix = Fix(description=f"Delete the earlier `{path[-1]}` (keeps the value other loaders use); or keep "
                                  "the earlier one and delete this one.", applicability="display",
                      edits=[edit]) if edit else None
            yield Diagnostic(f"duplicate key `{where(path)}`: DeepSpeed refuses a config with duplicate keys, "
                             f"other loaders keep the last value", span, fix=fix)


class InvalidConfigValue(ConfigRule):
    """A value of the wrong type or out of range: a ZeRO stage outside 0–3, a negative bucket size, an offload
    device other than `none`/`cpu`/`nvme`, a string where a number is expected, a ratio above 1, …; the
    cross-field checks of DeepSpeed's validators at the releases that have them (`fp16.min_loss_scale` and
    `loss_scale_window` > 0 with dynamic loss scaling, from 0.19.3), and a quoted number where DeepSpeed does
    arithmetic with the value as read (`"gradient_accumulation_steps": "8"`: TypeError in `_batch_assertion`).

    **Why it matters**: pydantic sections fail `deepspeed.initialize` on every rank; values read with
    `dict.get` fail later or, worse, are used as-is (`"false"` is truthy).

    A key the consumer rewrites before DeepSpeed reads the config is not judged (every DSL4xx rule): accelerate's
    `DeepSpeedPlugin` sets `steps_per_print` to `float("inf")` itself, so `"steps_per_print": "inf"` in a file
    only accelerate hands over (`accelerate launch --config_file` naming it as `deepspeed_config_file`, an
    accelerate config under the root naming it where nothing else hands it over, `DeepSpeedPlugin(hf_ds_config=...)`)
    never reaches DeepSpeed; a file also handed to DeepSpeed directly is still checked.
    """

    code = "DSL405"
    name = "invalid-config-value"
    severity = Severity.ERROR
    summary = "a config value of the wrong type or out of its valid range"
    fix_advice = "Use a value of the type and range the message names."
    autofix = 'unsafe, where one value is implied: a wrong-case choice (`"CPU"` → `"cpu"`).'
    references = (DS_CONFIG_DOCS, "deepspeed/runtime/zero/config.py", "deepspeed/runtime/precision_config.py")
    versions = ("Types and bounds of the release the project uses (table generated from DeepSpeed 0.10.0 to "
                "0.19.8; pydantic 1's coercions before 0.15).")
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 2,\n  "zero_optimization": {"stage": 3}\n}\n',
                     filename="ds_config.json"),
             """
             import deepspeed
             def train(args):   # an unknown value is never invalid
                 config = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": args.zero_stage}}
                 return deepspeed.initialize(model=args.model, config=config)
             """)
    INVALID = (Example('{\n  "train_micro_batch_size_per_gpu": 2,\n  "zero_optimization": {\n    "stage": 4\n  }\n}\n',
                       filename="ds_config.json", expect_lines=(4,)),
               Example('{\n  "train_micro_batch_size_per_gpu": 2,\n  "gradient_accumulation_steps": "8",\n'
                       '  "fp16": {"enabled": true, "loss_scale": 0, "min_loss_scale": 0}\n}\n',
                       filename="ds_config.json", expect_lines=(3, 4)),
               Example('{\n  "train_micro_batch_size_per_gpu": 2,\n  "zero_optimization": {"stage": 2, '
                       '"offload_optimizer": {"device": "CPU"}}\n}\n', filename="ds_config.json", expect_lines=(3,),
                       fixed='{\n  "train_micro_batch_size_per_gpu": 2,\n  "zero_optimization": {"stage": 2, '
                             '"offload_optimizer": {"device": "cpu"}}\n}\n'),
               """
               import deepspeed
               zero = dict(stage=3, reduce_bucket_size=-1)  # expect: DSL405
               engine, *_ = deepspeed.initialize(model=model, config={"train_micro_batch_size_per_gpu": 2,
                                                                      "zero_optimization": zero})
               """)

    def problems(self, subject: Subject) -> Iterable[tuple]:
        analysis = subject.analysis
        for p in analysis.of("invalid"):
            change = Change(f"Set `{where(p.path)}` to {p.value!r}.", "unsafe", value=p.value, has_value=True) \
                if p.has_value else None
            yield p.message, p.path, Severity.WARNING if analysis.predates else None, change


class BatchSizeMismatch(ConfigRule):
    """`train_batch_size`, `train_micro_batch_size_per_gpu` and `gradient_accumulation_steps` that violate
    DeepSpeed's `train_batch_size == micro × accumulation × data-parallel size`: impossible for any world size
    (train_batch_size not a multiple of micro × accumulation), or wrong for the known world size
    (`--world-size`, `[tool.dslint] world-size`, `deepspeed --num_gpus`/`torchrun --nproc-per-node` lines).
    A launcher line's world size applies to the configs it hands over (a config flag, or the script it starts
    naming the config); where none is seen to hand one, to a config a script names, from the run's launcher
    lines that hand no other config -- never to a config nothing names (known by its keys alone: an editor's
    autosave copy), which belongs to no launch of the run.

    The data-parallel size is the world size divided by `sequence_parallel_size` and
    `tensor_parallel.autotp_size` when set (or `data_parallel_size` with `sequence_parallel_size`); a `pipeline`
    section makes it unknown (the stage count lives in the PipelineModule), and so does an `mpu` passed by
    the script (Megatron tensor/pipeline parallel) — suppress then. `"auto"` values are filled as the HF integration
    fills them where an HF arguments file (`HfArgumentParser.parse_json_file`) names the config in its `deepspeed`
    entry: `train_micro_batch_size_per_gpu` from its `per_device_train_batch_size`, `gradient_accumulation_steps`
    from its own (the message names the file); otherwise a config with `"auto"` batch values is skipped. A
    micro batch or accumulation value the config gives that such a file contradicts is reported too: the HF
    integration refuses the mismatch when the Trainer sets DeepSpeed up ("Please correct the following DeepSpeed
    config values that mismatch TrainingArguments values"), on every rank.

    **Why it matters**: `deepspeed.initialize` asserts the product on every rank at start-up; a misspelled
    accumulation key silently changes the derived values instead.
    """

    code = "DSL406"
    name = "batch-size-mismatch"
    severity = Severity.ERROR
    summary = "train_batch_size != micro batch × gradient accumulation × data-parallel size"
    fix_advice = ("Make train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × "
                  "data-parallel size, or give only two of the three and let DeepSpeed derive the third.")
    autofix = 'unsafe, where the world size is known and all three values are given: `train_batch_size` set to micro × accumulation × data-parallel size.'
    references = ("deepspeed/runtime/config.py _batch_assertion", DS_CONFIG_DOCS)
    versions = "All DeepSpeed versions."
    suppress_when = "When the script passes an mpu (Megatron tensor/pipeline parallel) that shrinks the data-parallel size."
    VALID = (
        Example('{\n  "train_batch_size": 32,\n  "train_micro_batch_size_per_gpu": 4,\n'
                '  "gradient_accumulation_steps": 2\n}\n', filename="ds_config.json", world_size=4),
        Example('{\n  "train_batch_size": "auto",\n  "train_micro_batch_size_per_gpu": "auto"\n}\n',
                filename="ds_config.json", world_size=3),
    )
    INVALID = (
        Example('{\n  "train_batch_size": 30,\n  "train_micro_batch_size_per_gpu": 4,\n'
                '  "gradient_accumulation_steps": 2\n}\n', filename="ds_config.json", expect_lines=(2,)),
        # "auto" filled from the HF arguments file that names the config: 4 × 3 does not divide 32
        Example('{\n  "train_batch_size": 32,\n  "train_micro_batch_size_per_gpu": "auto",\n'
                '  "gradient_accumulation_steps": "auto"\n}\n', filename="ds_z2.json", expect_lines=(2,),
                files={"args.json": '{"output_dir": "out", "per_device_train_batch_size": 4, '
                                    '"gradient_accumulation_steps": 3, "deepspeed": "ds_z2.json"}'}),
        Example('{\n  "train_batch_size": 32,\n  "train_micro_batch_size_per_gpu": 4,\n'
                '  "gradient_accumulation_steps": 2\n}\n', filename="ds_config.json", world_size=8,
                expect_lines=(2,), fixed='{\n  "train_batch_size": 64,\n  "train_micro_batch_size_per_gpu": 4,\n'
                                         '  "gradient_accumulation_steps": 2\n}\n'),
    )

    def problems(self, subject: Subject) -> Iterable[tuple]:
        for f in subject.semantic(batch_findings, subject.world_size) or subject.filled(
                ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps"), batch_findings, WORLD):
            yield f.message, f.path, f.severity, _implied(f)
        if subject.py is not None:
            return
        for path, key, given, arg, wanted in subject.ctx.program.argument_mismatches(subject.ctx.source):
            yield (f"`{key}` is {given!r} but the arguments file {path} sets `{arg}` to {wanted!r}: the HF "
                   "integration refuses the mismatch when the Trainer sets DeepSpeed up, on every rank (\"Please "
                   "correct the following DeepSpeed config values that mismatch TrainingArguments values\"); set it "
                   f"to \"auto\" or {wanted!r}", (key,), None,
                   Change(f"Set `{key}` to \"auto\" (filled from the arguments file).", "unsafe", value="auto",
                          has_value=True))


class FP16AndBF16(ConfigRule):
    """`fp16.enabled` and `bf16.enabled` both true.

    **Why it matters**: `deepspeed.initialize` asserts "bfloat16 and fp16 modes cannot be simultaneously
    enabled" on every rank. With the HF integration use `"auto"` for both and let the training arguments decide.
    """

    code = "DSL407"
    name = "fp16-and-bf16"
    severity = Severity.ERROR
    summary = "fp16 and bf16 both enabled"
    fix_advice = "Enable one of fp16/bf16 (bf16 on Ampere or newer), or set both to \"auto\" under the HF Trainer."
    autofix = 'unsafe: `fp16.enabled` set to false (bf16 kept).'
    references = ("deepspeed/runtime/config.py _initialize_params",)
    versions = "All DeepSpeed versions with bf16 support."
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "fp16": {"enabled": "auto"},\n'
                     '  "bf16": {"enabled": "auto"}\n}\n', filename="ds_config.json"),
             """
             import deepspeed
             def build(args):
                 ds_config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": args.dtype == "fp16"}}
                 if args.dtype == "bf16":
                     ds_config["bf16"] = {"enabled": True}
                 return deepspeed.initialize(model=args.model, config=ds_config)
             """)
    INVALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "fp16": {"enabled": true},\n'
                       '  "bf16": {\n    "enabled": true\n  }\n}\n', filename="ds_config.json", expect_lines=(4,),
                       fixed='{\n  "train_micro_batch_size_per_gpu": 1,\n  "fp16": {"enabled": false},\n'
                             '  "bf16": {\n    "enabled": true\n  }\n}\n'),
               Example(textwrap.dedent("""\
               import deepspeed
               ds_config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}}
               ds_config.setdefault("bf16", {"enabled": True})  # expect: DSL407
               engine, *_ = deepspeed.initialize(model=model, config=ds_config)
               """), fixed="""\
               import deepspeed
               ds_config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": False}}
               ds_config.setdefault("bf16", {"enabled": True})  # expect: DSL407
               engine, *_ = deepspeed.initialize(model=model, config=ds_config)
               """))

    def problems(self, subject: Subject) -> Iterable[tuple]:
        for f in subject.semantic(precision_findings) or subject.filled(("fp16", "bf16"), precision_findings):
            yield f.message, f.path, f.severity, _implied(f)


class ZeroOffloadConflict(ConfigRule):
    """ZeRO stage and offload/precision settings that cannot work together (each from DeepSpeed 0.19.8's source):
    `offload_param` below stage 3 (ignored: warning); `offload_optimizer` at stage 0 (CPUAdam on GPU
    parameters fails at the first step); partial offload (`ratio` < 1) below stage 3; `nvme` without
    `nvme_path` at stage 3; `compute_grad_norm: false` outside stages 1–2; `*_master_weights_and_grads` at stage
    0; `bf16_optimizer_states` without `bf16_master_weights_and_grads`; `gradient_allreduce_op: "sum"` at stage 3.

    **Why it matters**: all but the first fail `deepspeed.initialize` or the first step on every rank.
    """

    code = "DSL408"
    name = "zero-offload-conflict"
    severity = Severity.ERROR
    severity_when_unsure = Severity.WARNING
    summary = "a ZeRO stage/offload/precision combination DeepSpeed rejects or ignores"
    fix_advice = "Raise the ZeRO stage to what the option needs, or remove the option."
    autofix = 'unsafe: delete `offload_param` below stage 3 (DeepSpeed ignores it there; the other fix is raising the stage). The other combinations have no automatic fix.'
    references = ("deepspeed/runtime/zero/config.py validators", "deepspeed/runtime/zero/offload_config.py",
                  "deepspeed/runtime/config.py _do_error_check", "deepspeed/ops/adam/cpu_adam.py")
    versions = "DeepSpeed 0.19.8 (partial offload and compute_grad_norm since they were added)."
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": 3,\n'
                     '    "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}\n}\n',
                     filename="ds_config.json"),)
    INVALID = (
        Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 0,\n'
                '    "offload_optimizer": {"device": "cpu"}\n  }\n}\n', filename="ds_config.json", expect_lines=(5,)),
        Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 2,\n'
                '    "offload_param": {"device": "cpu"}\n  }\n}\n', filename="ds_config.json", expect_lines=(5,),
                fixed='{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 2\n  }\n}\n'),
    )

    def problems(self, subject: Subject) -> Iterable[tuple]:
        for f in subject.semantic(offload_findings):
            yield f.message, f.path, f.severity, _implied(f)


class AutoOutsideHF(ConfigRule):
    """`"auto"` values in a config used by scripts that are not driven by the Hugging Face integration.

    Only the HF integration (transformers Trainer/TrainingArguments, HfDeepSpeedConfig, Accelerate) replaces
    `"auto"` with real values. Plain `deepspeed.initialize` reads the string itself: in the top-level keys and
    free-form sections (batch sizes, `gradient_clipping`, `optimizer.params`) it fails; inside DeepSpeed's pydantic
    sections (`zero_optimization`, `fp16`, …) it is dropped and the default used, which is rarely what was meant.
    Reported only when the scripts using the config are known (checked in the same run) and none is HF-driven,
    and never for a config the HF integration itself hands to DeepSpeed: the `deepspeed` entry of an HF arguments
    file (`HfArgumentParser.parse_json_file`), the `deepspeed_config_file` of an accelerate config file.
    DeepSpeed's own `"auto"` values (`pipeline.stages`, `data_types.keep_in_fp32_modules`, ZenFlow intervals)
    are accepted.
    """

    code = "DSL409"
    name = "auto-outside-hf"
    severity = Severity.WARNING
    summary = "\"auto\" config values in a config whose scripts do not use the HF integration"
    fix_advice = "Replace \"auto\" with concrete values, or drive training through the HF Trainer/Accelerate."
    references = ("transformers.integrations.deepspeed.HfTrainerDeepSpeedConfig", "deepspeed/runtime/config_utils.py")
    versions = "All DeepSpeed versions."
    suppress_when = "When the config is also used by an HF-driven script that dslint did not see."
    _CFG = '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "zero_optimization": {"stage": 2}\n}\n'
    VALID = (
        Example(_CFG, filename="ds.json", files={
            "train.py": "from transformers import TrainingArguments\nargs = TrainingArguments('out', deepspeed='ds.json')\n"}),
        Example(_CFG, filename="ds_config.json"),
    )
    INVALID = (
        Example(_CFG, filename="ds.json", expect_lines=(2,), files={
            "train.py": "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config='ds.json')\n"}),
    )

    def problems(self, subject: Subject) -> Iterable[tuple]:
        autos = subject.analysis.auto_paths
        if not autos or subject.hf_call or subject.via_hf:
            return
        ctx = subject.ctx
        scripts = subject.scripts
        if not scripts or any(ctx.program.runs_under_hf(s) for s in scripts):
            return
        names = ", ".join(sorted({s.path for s in scripts}))
        for path in autos:
            fails = len(path) == 1 or path[0] in ("optimizer", "scheduler")
            effect = ("DeepSpeed reads the string \"auto\" and fails" if fails
                      else "DeepSpeed drops it and uses its default")
            yield (f"`{where(path)}` is \"auto\", but {names} does not use the HF integration (Trainer/"
                   f"Accelerate), the only thing that fills \"auto\" in; {effect}. Set a concrete value", path, None)


class MoEZeroSettings(ConfigRule):
    """ZeRO-1/2 settings that DeepSpeed's ZeRO optimizer refuses when the model has DeepSpeed MoE layers:
    `reduce_scatter: false` (stages 1–2) and `contiguous_gradients: false` (stage 2).

    Reported only when a script using this config (checked in the same run) builds `deepspeed.moe` layers.
    **Why it matters**: `DeepSpeedZeroOptimizer._configure_moe_settings` asserts both at `initialize`, on every rank.
    MoE with ZeRO-3 is DSL205's business.
    """

    code = "DSL410"
    name = "moe-zero-settings"
    severity = Severity.ERROR
    summary = "reduce_scatter/contiguous_gradients disabled at ZeRO-1/2 for a model with DeepSpeed MoE layers"
    fix_advice = "Set zero_optimization.reduce_scatter and contiguous_gradients to true (their defaults)."
    references = ("deepspeed/runtime/zero/stage_1_and_2.py _configure_moe_settings",)
    versions = "DeepSpeed 0.5 … 0.19.8."
    _SCRIPT = ("import deepspeed\nfrom deepspeed.moe.layer import MoE\nmoe = MoE(hidden_size=8, expert=e, num_experts=4)\n"
               "engine, *_ = deepspeed.initialize(model=model, config='ds.json')\n")
    VALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": 2}\n}\n',
                     filename="ds.json", files={"train.py": _SCRIPT}),)
    INVALID = (Example('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 2,\n'
                       '    "contiguous_gradients": false\n  }\n}\n', filename="ds.json", files={"train.py": _SCRIPT},
                       expect_lines=(5,)),)

    def problems(self, subject: Subject) -> Iterable[tuple]:
        findings = subject.semantic(moe_zero_findings)
        if not findings:
            return
        scripts = [s for s in subject.scripts if Program.builds_moe_layers(s)]
        if not scripts:
            return
        for f in findings:
            yield f"{f.message} ({scripts[0].path} builds MoE layers)", f.path, f.severity
