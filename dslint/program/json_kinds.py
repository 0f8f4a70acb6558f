"""What kind of JSON each JSON file of a run is, decided by use, then by schema.

A JSON file is a **DeepSpeed config** when something hands it to DeepSpeed:

- a launcher line's `--deepspeed` / `--deepspeed_config` / `--ds_config` / accelerate's `--deepspeed_config_file`;
- a config call of the checked Python (`deepspeed.initialize(config=...)`, `TrainingArguments(deepspeed=...)`,
  `HfDeepSpeedConfig`, `DeepSpeedPlugin(hf_ds_config=...)`, an argparse `--deepspeed_config` default:
  `FileFacts.config_refs`);
- the `deepspeed` entry of an **arguments JSON** (below): TrainingArguments hands it to DeepSpeed;
- the `deepspeed_config.deepspeed_config_file` of an accelerate config file that an `accelerate launch
  --config_file` line names (YAML or JSON).

An **arguments JSON** is one handed to `HfArgumentParser.parse_json_file`: a path the code names
(`FileFacts.argument_files`, an argparse option's default included), or a JSON a launcher line passes to a unit
whose code parses it: as a positional argument (`parse_json_file(sys.argv[1])`, `FileFacts.arguments_from_argv`)
or as the value of the argparse option it hands over (`parse_json_file(args.train_args_file)`,
`FileFacts.argument_flags`).

A file nothing references is classified by its keys: an arguments JSON when one of its top-level keys is a
field of transformers' `TrainingArguments`/`Seq2SeqTrainingArguments` that is not also a DeepSpeed key
(`dslint/data/hf_arguments.json`, generated from transformers by `tools/generate_hf_arguments.py`) and none is a
DeepSpeed key that TrainingArguments lacks; **another program's settings** (`OTHER`, `foreign_settings`) when
most of its top-level keys are unknown to every section of DeepSpeed's schema (any release of
`dslint/dsconfig/schemas.json`, and no near-miss of a DeepSpeed key) and it holds no DeepSpeed section (a key
DeepSpeed reads as a section, given as an object): a GUI or trainer preset whose `train_batch_size` and
`gradient_accumulation_steps` coincide with DeepSpeed's (`"optimizer": "AdamW8bit"` is not DeepSpeed's
optimizer section); else a DeepSpeed config (the reader already kept only JSON with DeepSpeed keys at its top
level, or one named on the command line). A framework config that embeds DeepSpeed's sections among its own
settings (GPT-NeoX) stays a config: `dslint.dsconfig.check` keeps only the near-misses of DeepSpeed keys there.
A reference by use wins over the keys: a file handed to DeepSpeed is checked as a config whatever it holds.

File names never decide (`ds_config*.json` says nothing); they only word the evidence.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

if TYPE_CHECKING:
    from dslint.program.units import Program
    from dslint.sources import JsonSource, PythonSource, ShellSource
    from dslint.sources.launcher import Launch

DEEPSPEED = "deepspeed"
ARGUMENTS = "hf-arguments"
OTHER = "other"             # another program's settings (a GUI or trainer preset): not checked as a config
ACCELERATE, OTHERS = "accelerate", "others"     # JsonUse.handlers

# launcher flags that hand DeepSpeed its config (script arguments read by `deepspeed.add_config_arguments`
# / HfArgumentParser's `--deepspeed`, and accelerate launch's own option)
DEEPSPEED_FLAGS = frozenset({"--deepspeed", "--deepspeed_config", "--deepspeed-config", "--ds_config", "--ds-config",
                             "--deepspeed_config_file"})
_ACCELERATE_CONFIG = ("--config_file", "--config-file")


@dataclass
class JsonUse:
    """How the run uses one JSON file."""

    kind: str
    evidence: list[str] = field(default_factory=list)       # why, the deciding reason first
    by_use: bool = False                                    # decided by a reference, not by its keys
    via_hf: bool = False            # handed over by the HF integration (TrainingArguments, accelerate): "auto" filled
    # who hands it to DeepSpeed, one entry per reference: ACCELERATE (accelerate's DeepSpeedPlugin, which rewrites
    # some keys first: `config_handoffs.overwritten_by`), or OTHERS (a launcher flag, a config call, TrainingArguments)
    handlers: set = field(default_factory=set)
    # for a config: the arguments JSONs whose `deepspeed` entry names it, each with the launcher line that passes
    # that arguments JSON (None when the code names it, or nothing does)
    arguments: list[tuple["JsonSource", Optional[tuple["ShellSource", Any]]]] = field(default_factory=list)
    # the scripts that read this arguments JSON, or that reach this config through an arguments JSON or an
    # accelerate config
    consumers: list["PythonSource"] = field(default_factory=list)
    # the launcher lines that hand this config over (directly, or through an arguments JSON or accelerate config)
    # or that pass this arguments JSON
    launches: list[tuple["ShellSource", Any]] = field(default_factory=list)

    @property
    def is_config(self) -> bool:
        return self.kind == DEEPSPEED


@lru_cache(maxsize=1)
def hf_arguments_table() -> dict:
    """The generated table (`tools/generate_hf_arguments.py`): transformers' argument dataclasses' fields."""
    path = Path(__file__).resolve().parent.parent / "data" / "hf_arguments.json"
    return json.loads(path.read_text())


@lru_cache(maxsize=1)
def training_argument_fields() -> frozenset[str]:
    """Fields of TrainingArguments and Seq2SeqTrainingArguments."""
    return frozenset(f for fields in hf_arguments_table()["schemas"].values() for f in fields)


@lru_cache(maxsize=1)
def _not_deepspeed_fields() -> frozenset[str]:
    return training_argument_fields() - frozenset(hf_arguments_table()["shared_with_deepspeed"])


def training_argument_keys(data: Any) -> list[str]:
    """The top-level keys of `data` that are TrainingArguments fields and not DeepSpeed keys."""
    if not isinstance(data, dict):
        return []
    fields = _not_deepspeed_fields()
    return [k for k in data if isinstance(k, str) and k in fields]


def deepspeed_only_keys(data: Any) -> list[str]:
    """The top-level keys of `data` that the reader takes for DeepSpeed's (`dslint.sources.DS_TOP_KEYS`: what
    makes a walked JSON read at all) and that are not TrainingArguments fields (`train_micro_batch_size_per_gpu`,
    `zero_optimization`, ...): no arguments file holds one (`parse_json_file` rejects unknown keys)."""
    from dslint.sources import DS_TOP_KEYS
    if not isinstance(data, dict):
        return []
    fields = training_argument_fields()
    return [k for k in data if k in DS_TOP_KEYS and k not in fields]


@lru_cache(maxsize=1)
def _deepspeed_schema() -> tuple[frozenset, frozenset, frozenset]:
    """(every key any DeepSpeed section of any release reads (field names, aliases and removed keys included,
    and the inference config's own keys), the top-level keys, the top-level keys DeepSpeed reads as a section),
    from the generated table (`dslint.dsconfig.table`)."""
    from dslint.dsconfig.table import table
    from dslint.dsconfig.top import INFERENCE_ONLY_KEYS
    known, top = set(INFERENCE_ONLY_KEYS), set()
    sections = table()["sections"]
    for path, runs in sections.items():
        for run in runs:
            for key, entry in run["keys"].items():
                names = {key, entry.get("field") or key}
                known |= names
                if path == "":
                    top |= names
    return frozenset(known), frozenset(top), frozenset(p for p in sections if p and "." not in p)


def _comment_key(key: str) -> bool:
    return key.startswith(("_", "//", "#"))


def foreign_settings(data: Any) -> Optional[tuple[list[str], list[str]]]:
    """(the top-level keys unknown to every DeepSpeed section, the keys DeepSpeed's schema knows) when `data`
    reads as another program's settings rather than a DeepSpeed config: most of its top-level keys (annotation
    keys aside) are unknown to every section of every release of DeepSpeed's schema and close to none of its
    top-level keys (a misspelling of a DeepSpeed key counts as DeepSpeed's), and no top-level key DeepSpeed
    reads as a section, or a misspelling of one, holds an object (`"zero_optimization": {...}`, `"fp16": {...}`,
    `"optimizer": {"type": ...}`, `"zero_optimisation": {...}`: a framework config that embeds DeepSpeed's sections
    is one). None otherwise."""
    import difflib
    if not isinstance(data, dict):
        return None
    known, top, sections = _deepspeed_schema()
    section_names = sorted(sections)
    if any(isinstance(k, str) and isinstance(v, dict) and
           (k in sections or difflib.get_close_matches(k, section_names, n=1, cutoff=0.8))
           for k, v in data.items()):
        return None         # a DeepSpeed section, or a misspelling of one (`"zero_optimisation": {...}`), holds an object
    keys = [k for k in data if isinstance(k, str) and not _comment_key(k)]
    shared = [k for k in keys if k in known]
    lowered = {t.lower() for t in top}
    foreign = [k for k in keys if k not in known and k.lower() not in lowered
               and not difflib.get_close_matches(k, top, n=1, cutoff=0.8)]
    if 2 * len(foreign) <= len(keys):
        return None
    return foreign, shared


def _script_flags(launch) -> list[tuple[str, str]]:
    """(flag, value) pairs of a launch's script arguments and options."""
    out = []
    args = launch.script_args
    for j, word in enumerate(args):
        key, eq, value = word.partition("=")
        if key.startswith("-"):
            out.append((key, value if eq else (args[j + 1] if j + 1 < len(args) else "")))
    out += list(launch.options.items())
    return out


def positional_json(launch) -> list[str]:
    """The script arguments of a launch that are `.json` paths not given as a flag's value."""
    out = []
    args = launch.script_args
    for j, word in enumerate(args):
        if word.startswith("-") or not word.endswith(".json"):
            continue
        before = args[j - 1] if j else ""
        if before.startswith("-") and "=" not in before:
            continue            # `--flag value`
        out.append(word)
    return out


_YAML_DS_FILE = re.compile(r"""^[ \t]+deepspeed_config_file[ \t]*:[ \t]*(["']?)([^"'#\r\n]+?)\1[ \t]*(?:#.*)?$""",
                           re.MULTILINE)


def accelerate_deepspeed_file(text: str) -> Optional[str]:
    """`deepspeed_config.deepspeed_config_file` of an accelerate config file (JSON, or YAML where it sits indented
    under `deepspeed_config:`)."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        section = data.get("deepspeed_config") if isinstance(data, dict) else None
        value = section.get("deepspeed_config_file") if isinstance(section, dict) else None
        return value if isinstance(value, str) and value else None
    found = _YAML_DS_FILE.search(text)
    if found is None:
        return None
    value = found.group(2).strip()
    return value if value and value not in ("null", "none", "None", "~") else None


_YAML_BACKEND = re.compile(r"""^distributed_type[ \t]*:[ \t]*(["']?)(\w+)\1[ \t]*(?:#.*)?$""", re.MULTILINE)
# `accelerate launch` options that choose the backend themselves (accelerate/commands/launch.py)
_ACCELERATE_BACKEND_FLAGS = {"--use_deepspeed": "DEEPSPEED", "--use_fsdp": "FSDP", "--use_megatron_lm": "MEGATRON_LM",
                             "--multi_gpu": "MULTI_GPU"}


def accelerate_backend(launch, read: Callable[[str], Optional[str]]) -> Optional[str]:
    """The backend (`DistributedType` name) an `accelerate launch` line starts its processes with: an option
    that chooses it (`--use_deepspeed`, `--use_fsdp`, `--multi_gpu`, ...), else the top-level
    `distributed_type` of the config file it names (`--config_file`, YAML or JSON; `read` gives its text). None
    where neither tells: accelerate then reads the machine's default config, which the checked files do not
    show."""
    if launch.launcher != "accelerate":
        return None
    for flag, backend in _ACCELERATE_BACKEND_FLAGS.items():
        if flag in launch.options or flag.replace("_", "-") in launch.options:
            return backend
    named = next((launch.options[k] for k in _ACCELERATE_CONFIG if launch.options.get(k)), None)
    text = read(named) if named else None
    if not text:
        return None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        value = data.get("distributed_type") if isinstance(data, dict) else None
        return value if isinstance(value, str) and value else None
    found = _YAML_BACKEND.search(text)
    return found.group(2) if found else None


class RunView(Protocol):
    """What the classification reads of the run's view (`dslint.program.project_view.ProjectView`, which asks this
    module once per run): declared here, so that this module does not import the one that uses it."""
    root: Path
    json_sources: list["JsonSource"]
    run_program: "Program"
    launches: list[tuple["ShellSource", "Launch"]]

    def launch_json_files(self, sh: "ShellSource", launch: "Launch", ref: str) -> list["JsonSource"]: ...

    def _json_by_reference(self, ref: str, base: Path) -> list["JsonSource"]: ...


def _read_beside(view: RunView, ref: str, base: Path) -> Optional[tuple[str, str]]:
    """(path, text) of a file a launcher line names: beside the script, under the root, or as written."""
    for candidate in (base / ref, view.root / ref, Path(ref)):
        try:
            if candidate.is_file() and candidate.stat().st_size < (1 << 20):
                return str(candidate), candidate.read_text(errors="replace")
        except OSError:
            continue
    return None


def classify(view: RunView) -> dict[int, JsonUse]:
    """id(JsonSource) → JsonUse for every JSON file of the view (the run's view: every reference is in it)."""
    jsons = view.json_sources
    if not jsons:
        return {}
    uses: dict[int, JsonUse] = {}
    weak: dict[int, list[str]] = {}

    def config(cfg, why: str, via_hf: bool = False, consumer=None, arguments=None, launch=None,
               handler: str = OTHERS) -> None:
        use = uses.get(id(cfg))
        if use is None or use.kind != DEEPSPEED:
            use = uses[id(cfg)] = JsonUse(DEEPSPEED, [], True)
        use.evidence.append(why)
        use.via_hf = use.via_hf or via_hf
        use.handlers.add(handler)
        if launch is not None and all(l is not launch[1] for _, l in use.launches):
            use.launches.append(launch)
        if consumer is not None and consumer not in use.consumers:
            use.consumers.append(consumer)
        if arguments is not None and all(a is not arguments[0] or l is not arguments[1] for a, l in use.arguments):
            use.arguments.append(arguments)

    def arguments_file(src, why: str, consumer, launch) -> None:
        use = uses.get(id(src))
        if use is not None and use.kind == DEEPSPEED:
            return
        if use is None:
            use = uses[id(src)] = JsonUse(ARGUMENTS, [], True)
        use.evidence.append(why)
        if consumer is not None and consumer not in use.consumers:
            use.consumers.append(consumer)
        if launch is not None:
            use.launches.append(launch)

    program = view.run_program
    targets = {id(launch): target for _, launch, target in program.launch_targets}
    reads_argv = {id(s) for s in program.python
                  if (f := program.facts.get(id(s))) is not None and f.arguments_from_argv}
    option_of = {id(s): f.argument_flags for s in program.python
                 if (f := program.facts.get(id(s))) is not None and f.argument_flags}
    for sh, launch in view.launches:
        base = Path(sh.path).parent
        where = f"{sh.path}:{launch.line}"
        target = targets.get(id(launch))
        for flag, value in _script_flags(launch):
            if not value.endswith(".json"):
                continue
            if flag in DEEPSPEED_FLAGS:
                via = launch.launcher == "accelerate" and flag == "--deepspeed_config_file"
                for cfg in view.launch_json_files(sh, launch, value):
                    config(cfg, f"{where} passes it as {flag}", via, target, launch=(sh, launch),
                           handler=ACCELERATE if via else OTHERS)
            elif flag in ("--config_file", "--config-file") and launch.launcher != "accelerate":
                for cfg in view._json_by_reference(value, base):
                    weak.setdefault(id(cfg), []).append(f"{where} passes it as {flag}")
        unit = program.closure(target) if target is not None else []
        if any(id(f) in reads_argv for f in unit):
            for ref in positional_json(launch):
                for src in view._json_by_reference(ref, base):
                    arguments_file(src, f"{where} passes it to {target.path}, which reads it with "
                                        "HfArgumentParser.parse_json_file", target, (sh, launch))
        options = {o for f in unit for o in option_of.get(id(f), ())}
        for flag, value in _script_flags(launch) if options else ():
            if flag in options and value.endswith(".json"):
                for src in view._json_by_reference(value, base):
                    arguments_file(src, f"{where} passes it as {flag} to {target.path}, which reads it with "
                                        "HfArgumentParser.parse_json_file", target, (sh, launch))
        if launch.launcher == "accelerate":
            named = next((launch.options[k] for k in _ACCELERATE_CONFIG if launch.options.get(k)), None)
            read = _read_beside(view, named, base) if named else None
            ref = accelerate_deepspeed_file(read[1]) if read else None
            if ref and ref.endswith(".json"):
                for cfg in view._json_by_reference(ref, base):
                    config(cfg, f"the deepspeed_config_file of the accelerate config {named} ({where})", True,
                           target, launch=(sh, launch), handler=ACCELERATE)
    for src in program.python:
        facts = program.facts.get(id(src))
        if facts is None:
            continue
        for ref in facts.config_refs:
            for cfg in view._json_by_reference(ref, Path(src.path).parent):
                config(cfg, f"{src.path} hands it to DeepSpeed")
        for ref in facts.argument_files:
            for a in view._json_by_reference(ref, Path(src.path).parent):
                arguments_file(a, f"{src.path} reads it with HfArgumentParser.parse_json_file", src, None)
    # what nothing references: by its keys -- an arguments file holds TrainingArguments fields and none of
    # DeepSpeed's own keys (a config with a stray `seed` stays a config; a framework file embedding DeepSpeed
    # sections is the config analysis' business: dslint.dsconfig keeps only near-misses there)
    for src in jsons:
        if id(src) in uses:
            continue
        foreign = training_argument_keys(src.data)
        if foreign and not deepspeed_only_keys(src.data):
            shown = ", ".join(f"`{k}`" for k in foreign[:3]) + (", …" if len(foreign) > 3 else "")
            uses[id(src)] = JsonUse(ARGUMENTS, [f"its keys are HF TrainingArguments fields ({shown})"])
    # what nothing references and is not an arguments file: another program's settings when most of its keys
    # are unknown to DeepSpeed and it holds no DeepSpeed section (a GUI/trainer preset sharing two keys)
    for src in jsons:
        if id(src) in uses:
            continue
        foreign = foreign_settings(src.data)
        if foreign is not None:
            theirs, shared = foreign
            shown = ", ".join(f"`{k}`" for k in theirs[:3]) + (", …" if len(theirs) > 3 else "")
            common = ", ".join(f"`{k}`" for k in shared[:3]) + (", …" if len(shared) > 3 else "")
            uses[id(src)] = JsonUse(OTHER, [
                f"another program's settings, not a DeepSpeed config: nothing hands it to DeepSpeed, "
                f"{len(theirs)} of its {len(src.data)} top-level keys ({shown}) are unknown to every DeepSpeed "
                f"section, it holds no DeepSpeed section" + (f", and the keys DeepSpeed shares ({common}) "
                                                              "coincide" if shared else "")])
    # the `deepspeed` entry of every arguments JSON: TrainingArguments hands that file to DeepSpeed
    for src in jsons:
        use = uses.get(id(src))
        if use is None or use.kind != ARGUMENTS:
            continue
        ref = src.data.get("deepspeed") if isinstance(src.data, dict) else None
        if not isinstance(ref, str) or not ref.endswith(".json"):
            continue
        for cfg in view._json_by_reference(ref, Path(src.path).parent):
            if cfg is src:
                continue
            for launch in use.launches or [None]:
                config(cfg, f"the `deepspeed` entry of the arguments file {src.path} (HF TrainingArguments)", True,
                       arguments=(src, launch), launch=launch)
            cfg_use = uses[id(cfg)]
            for consumer in use.consumers:
                if consumer not in cfg_use.consumers:
                    cfg_use.consumers.append(consumer)
    for src in jsons:
        if id(src) not in uses:
            uses[id(src)] = JsonUse(DEEPSPEED, weak.get(id(src), []) or ["its keys are DeepSpeed config keys"])
    return uses


def filled_from_arguments(data: dict, arguments: dict) -> Optional[tuple[dict, list[str]]]:
    """The config as the HF integration hands it to DeepSpeed (`HfTrainerDeepSpeedConfig.trainer_config_process`)
    where an arguments JSON gives the values `"auto"` resolves to: `train_micro_batch_size_per_gpu` ←
    `per_device_train_batch_size`, `gradient_accumulation_steps` ← `gradient_accumulation_steps`,
    `fp16.enabled` ← `fp16`, `bf16.enabled` ← `bf16`; an `"auto"` `train_batch_size` is world × micro ×
    accumulation, consistent by construction, so it is left out (DeepSpeed derives it). An `"auto"` whose
    argument the file does not give stays `"auto"` (the script's defaults are not known). Returns (the filled
    config, the filled keys as `config key ← argument value`), or None when nothing was filled."""
    out = dict(data)
    filled: list[str] = []
    for key, arg in (("train_micro_batch_size_per_gpu", "per_device_train_batch_size"),
                     ("gradient_accumulation_steps", "gradient_accumulation_steps")):
        if out.get(key) == "auto" and arg in arguments:
            out[key] = arguments[arg]
            filled.append(f"{key} ← {arg} {arguments[arg]!r}")
    for section in ("fp16", "bf16"):
        block = out.get(section)
        if isinstance(block, dict) and block.get("enabled") == "auto" and section in arguments:
            value = bool(arguments[section] or arguments.get(f"{section}_full_eval"))
            out[section] = {**block, "enabled": value}
            filled.append(f"{section}.enabled ← {section} {str(value).lower()}")
    if not filled:
        return None
    if out.get("train_batch_size") == "auto":
        del out["train_batch_size"]
    return out, filled


# (config key, TrainingArguments field) pairs `trainer_config_process` checks when the config gives a value
# (`fill_match`: a mismatch fails `TrainingArguments`' DeepSpeed set-up on every rank)
_MATCHED = (("train_micro_batch_size_per_gpu", "per_device_train_batch_size"),
            ("gradient_accumulation_steps", "gradient_accumulation_steps"))


def argument_mismatches(data: dict, arguments: dict) -> list[tuple[str, Any, str, Any]]:
    """(config key, its value, argument, the arguments file's value) for each batch value the config gives that
    differs from the one the arguments file gives: `HfTrainerDeepSpeedConfig.fill_match` collects them and
    `trainer_config_finalize` raises "Please correct the following DeepSpeed config values that mismatch
    TrainingArguments values". The micro batch is not compared under `auto_find_batch_size` (HF does not)."""
    out = []
    for key, arg in _MATCHED:
        if key == "train_micro_batch_size_per_gpu" and arguments.get("auto_find_batch_size") is True:
            continue
        given, wanted = data.get(key), arguments.get(arg)
        if given is None or given == "auto" or arg not in arguments or isinstance(given, bool) \
                or not isinstance(given, (int, float)) or isinstance(wanted, bool) or not isinstance(wanted, int):
            continue
        if given != wanted:
            out.append((key, given, arg, wanted))
    return out


def accelerate_configs_naming(view: RunView, config: "JsonSource") -> list[str]:
    """The accelerate config files under the root (YAML, read from disk, no launcher line needed) whose
    `deepspeed_config.deepspeed_config_file` is `config`'s path (from the accelerate config's folder or a folder
    above it, up to the root: where `accelerate launch` may run). Not a reason to read a file as a DeepSpeed config (its kind stays the one
    `classify` gave it); it says who hands the file to DeepSpeed where no launcher line or code does. One walk of
    the root per run, asked only for a config whose finding sits on a key such a consumer rewrites."""
    import os
    from dslint.sources.inputs import SKIP_DIRS
    root = Path(view.root)

    def walk() -> list[tuple[str, str]]:
        found = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
            for name in files:
                if not name.endswith((".yaml", ".yml")):
                    continue
                path = Path(folder, name)
                try:
                    if path.stat().st_size >= (1 << 16):
                        continue
                    text = path.read_text(errors="replace")
                except OSError:
                    continue
                ref = accelerate_deepspeed_file(text) if "deepspeed_config_file" in text else None
                if ref:
                    found.append((str(path), ref))
        return found

    named = view.memo("json_kinds.accelerate_configs_on_disk", walk) if hasattr(view, "memo") else walk()
    try:
        target = (root / config.path).resolve()
    except OSError:
        return []
    out = []
    for path, ref in named:
        # accelerate resolves the path from where `accelerate launch` runs: no line says where, so the accelerate
        # config's folder or any folder above it, up to the root
        folder, bases = Path(path).parent, []
        while True:
            bases.append(folder)
            if folder == root or root not in folder.parents:
                break
            folder = folder.parent
        for candidate in (b / ref for b in bases):
            try:
                if candidate.resolve() == target:
                    out.append(os.path.relpath(path, root))
                    break
            except OSError:
                continue
    return out
