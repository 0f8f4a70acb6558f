"""dslint's config models for the installed DeepSpeed release — built from the generated table
(dslint/dsconfig/schemas.json, `table.root_model`) — against that DeepSpeed's own config code, so the generator
cannot drift silently: every key DeepSpeed accepts is accepted, every key it rejects is flagged, deprecated
and removed keys agree, and sample values are accepted/rejected alike. DeepSpeed is imported here only."""

import json
import os
from pathlib import Path

os.environ["DS_ACCELERATOR"] = "cpu"   # before deepspeed is imported: no GPU probing

import deepspeed  # noqa: E402
import pytest  # noqa: E402
from deepspeed.comm.config import CommsLoggerConfig  # noqa: E402
from deepspeed.compile.config import CompileConfig  # noqa: E402
from deepspeed.monitor.config import CometConfig, CSVConfig, TensorBoardConfig, WandbConfig  # noqa: E402
from deepspeed.runtime import config as ds_runtime_config  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig as RealDeepSpeedConfig  # noqa: E402
from deepspeed.runtime.config import HybridEngineConfig  # noqa: E402
from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config  # noqa: E402
from deepspeed.runtime.tensor_parallel.config import TPConfig, TPTrainingConfig  # noqa: E402
from deepspeed.runtime.zenflow.zenflow_config import ZenFlowConfig  # noqa: E402
from deepspeed.runtime.zero.config import DeepSpeedZeroConfig  # noqa: E402
from deepspeed.runtime.zero.leaf_module_config import DeepSpeedZeroLeafModuleConfig  # noqa: E402
from deepspeed.runtime.zero.offload_config import (DeepSpeedZeroOffloadOptimizerConfig,  # noqa: E402
                                                   DeepSpeedZeroOffloadParamConfig)
from deepspeed.utils.config import DeepSpeedThroughputTimerConfig  # noqa: E402

from dslint.program.json_kinds import deepspeed_only_keys, training_argument_keys
from dslint.dsconfig import table  # noqa: E402
from dslint.dsconfig.base import extra_of, field_for, keys_of, section_type  # noqa: E402
from dslint.dsconfig.check import analyse as _analyse  # noqa: E402

if deepspeed.__version__ not in table.releases():
    pytest.skip(f"the installed DeepSpeed {deepspeed.__version__} is not a release of the generated table "
                "(regenerate it with `python -m dslint.dsconfig.gen_schemas --tree VERSION=site-packages`)",
                allow_module_level=True)

VERSION = deepspeed.__version__
DeepSpeedConfig = table.root_model(VERSION)


def analyse(data):
    return _analyse(data, version=VERSION)


def model_at(*path):
    model = DeepSpeedConfig
    for key in path:
        model = section_type(field_for(model, key)[1])
    return model


# (DeepSpeed's pydantic model, dslint's model, where it sits in a config)
_SECTIONS = [
    (DeepSpeedZeroConfig, ("zero_optimization",)),
    (DeepSpeedZeroOffloadParamConfig, ("zero_optimization", "offload_param")),
    (DeepSpeedZeroOffloadOptimizerConfig, ("zero_optimization", "offload_optimizer")),
    (DeepSpeedZeroLeafModuleConfig, ("zero_optimization", "leaf_module")),
    (ZenFlowConfig, ("zero_optimization", "zenflow")),
    (DeepSpeedFP16Config, ("fp16",)),
    (DeepSpeedBF16Config, ("bf16",)),
    (CommsLoggerConfig, ("comms_logger",)),
    (TensorBoardConfig, ("tensorboard",)),
    (WandbConfig, ("wandb",)),
    (CSVConfig, ("csv_monitor",)),
    (CometConfig, ("comet",)),
    (CompileConfig, ("compile",)),
    (HybridEngineConfig, ("hybrid_engine",)),
    (TPTrainingConfig, ("tensor_parallel",)),
    (TPConfig, ("tensor_parallel", "tp")),
    (DeepSpeedThroughputTimerConfig, ("timers", "throughput")),
]
# (DeepSpeed's pydantic model, dslint's model built from the table, where it sits in a config)
PYDANTIC_SECTIONS = [(ds, model_at(*path), path) for ds, path in _SECTIONS]
IDS = [m.__name__ for m, _, _ in PYDANTIC_SECTIONS]


def ds_keys(model) -> set[str]:
    out = set()
    for name, info in model.model_fields.items():
        out.add(name)
        if info.alias:
            out.add(info.alias)
    return out


def nest(path, value):
    for key in reversed(path):
        value = {key: value}
    return value


def unknown_paths(config) -> set:
    return {p.path for p in analyse(config).of("unknown")}


@pytest.mark.parametrize("ds_model,ours,path", PYDANTIC_SECTIONS, ids=IDS)
def test_same_keys_as_deepspeed_model(ds_model, ours, path):
    assert ds_keys(ds_model) == set(keys_of(ours)), ours.__name__


@pytest.mark.parametrize("ds_model,ours,path", PYDANTIC_SECTIONS, ids=IDS)
def test_every_key_deepspeed_accepts_is_accepted(ds_model, ours, path):
    for key in ds_keys(ds_model):
        assert not unknown_paths(nest(path, {key: None})), f"{path}.{key} flagged as unknown"


@pytest.mark.parametrize("ds_model,ours,path", PYDANTIC_SECTIONS, ids=IDS)
def test_a_key_deepspeed_rejects_is_flagged(ds_model, ours, path):
    with pytest.raises(Exception):
        ds_model(**{"definitely_not_a_key": 1})
    problems = [p for p in analyse(nest(path, {"definitely_not_a_key": 1})).of("unknown")]
    assert [p.path for p in problems] == [path + ("definitely_not_a_key",)]
    assert problems[0].deepspeed_fails and ours.deepspeed_rejects_unknown


@pytest.mark.parametrize("ds_model,ours,path", PYDANTIC_SECTIONS, ids=IDS)
def test_same_deprecated_keys(ds_model, ours, path):
    def deprecated(model):
        return {n: extra_of(i).get("new_param") for n, i in model.model_fields.items()
                if (i.json_schema_extra or {}).get("deprecated")}
    theirs, mine = deprecated(ds_model), deprecated(ours)
    assert theirs.keys() == mine.keys()
    for key, new in theirs.items():   # ours may name the JSON alias of the replacement
        assert new.split(" ")[0] in mine[key] or mine[key].endswith(new), (key, new, mine[key])


def test_removed_keys_agree():
    top = {n for n, i in DeepSpeedConfig.model_fields.items() if extra_of(i).get("removed")}
    zero = {n for n, i in model_at("zero_optimization").model_fields.items() if extra_of(i).get("removed")}
    assert top == set(ds_runtime_config._REMOVED_TOP_LEVEL_CONFIG_KEYS)
    assert zero == set(ds_runtime_config._REMOVED_ZERO_CONFIG_KEYS)
    for key in top:
        with pytest.raises(ds_runtime_config.DeepSpeedConfigError):
            RealDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, key: {}})
        assert [p.path for p in analyse({key: {}}).of("removed")] == [(key,)]


class Tracking(dict):
    """A config dict that records every key DeepSpeed looks up in it."""

    def __init__(self, data, seen):
        super().__init__(data)
        self.seen = seen

    def __getitem__(self, k):
        self.seen.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.seen.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self.seen.add(k)
        return super().__contains__(k)

    def keys(self):
        owner = self

        class Keys:
            def __contains__(self, k):
                owner.seen.add(k)
                return dict.__contains__(owner, k)

            def __iter__(self):
                return iter(list(dict.keys(owner)))
        return Keys()

    def items(self):
        raise AssertionError("DeepSpeed iterates this section: its keys cannot be enumerated by tracking")

    def __copy__(self):
        return self


def keys_deepspeed_reads(section=None, value=None):
    """Keys DeepSpeedConfig reads at the top level, or inside `section` (given as a tracked dict)."""
    top_seen, sub_seen = set(), set()
    data = {"train_micro_batch_size_per_gpu": 1}
    if section:
        data[section] = Tracking(value or {}, sub_seen)
    RealDeepSpeedConfig(Tracking(data, top_seen))
    return sub_seen if section else top_seen


def test_top_level_keys_match_what_deepspeed_reads():
    read = keys_deepspeed_reads()
    # read outside DeepSpeedConfig, in deepspeed.initialize (deepspeed/__init__.py)
    read |= {"sequence_parallel_size", "data_parallel_size"}
    # read only for the deprecated boolean `"zero_optimization": true` (zero/config.py read_zero_config_deprecated)
    read |= {"allgather_size"}
    ours = set(keys_of(DeepSpeedConfig)) | {n for n, i in DeepSpeedConfig.model_fields.items()
                                             if extra_of(i).get("removed")}
    assert read - ours == set(), "keys DeepSpeed reads that dslint would call unknown"
    assert ours - read == set(), "keys dslint accepts that DeepSpeed never reads"


def test_unknown_top_level_key_is_ignored_by_deepspeed_and_flagged():
    RealDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, "gradient_acumulation_steps": 4})
    problems = analyse({"gradient_acumulation_steps": 4}).of("unknown")
    assert [p.suggestion for p in problems] == ["gradient_accumulation_steps"]
    assert not problems[0].deepspeed_fails


DICT_SECTIONS = [(name, model_at(name)) for name in ("flops_profiler", "activation_checkpointing", "aio", "timers",
                                                     "torch_autocast", "data_types", "optimizer", "scheduler")]


@pytest.mark.parametrize("section,ours", DICT_SECTIONS, ids=[s for s, _ in DICT_SECTIONS])
def test_dict_sections_match_what_deepspeed_reads(section, ours):
    value = {"type": "Adam", "params": {}} if section in ("optimizer", "scheduler") else {}
    read = keys_deepspeed_reads(section, value)
    accepted = {k for k in keys_of(ours) if not extra_of(ours.model_fields[k]).get("deprecated")} \
        if all(k in ours.model_fields for k in keys_of(ours)) else set(keys_of(ours))
    assert read == accepted, section
    assert not ours.deepspeed_rejects_unknown
    RealDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, section: {**value, "definitely_not_a_key": 1}})
    assert unknown_paths({section: {"definitely_not_a_key": 1}}) == {(section, "definitely_not_a_key")}


VALUE_CASES = [
    ("zero_optimization", {"stage": 3}), ("zero_optimization", {"stage": 4}), ("zero_optimization", {"stage": -1}),
    ("zero_optimization", {"stage": "2"}), ("zero_optimization", {"stage": True}),
    ("zero_optimization", {"reduce_bucket_size": 0}), ("zero_optimization", {"reduce_bucket_size": 5e8}),
    ("zero_optimization", {"reduce_bucket_size": 5.5}), ("zero_optimization", {"reduce_bucket_size": "auto"}),
    ("zero_optimization", {"allgather_bucket_size": 0}), ("zero_optimization", {"sub_group_size": -1}),
    ("zero_optimization", {"stage3_prefetch_bucket_size": -1}), ("zero_optimization", {"overlap_comm": "yes"}),
    ("zero_optimization", {"offload_optimizer": {"device": "disk"}}),
    ("zero_optimization", {"offload_optimizer": {"device": "cpu", "ratio": 1.5}}),
    ("zero_optimization", {"offload_param": {"device": "nvme", "nvme_path": "/nvme", "buffer_count": -1}}),
    ("zero_optimization", {"leaf_module": {"classes": "MixtralSparseMoeBlock"}}),
    ("zero_optimization", {"zenflow": {"topk_ratio": 1.0}}), ("zero_optimization", {"zenflow": {"select_strategy": "x"}}),
    ("fp16", {"enabled": True, "loss_scale": -1}), ("fp16", {"loss_scale": True}), ("fp16", {"loss_scale": 128}),
    ("fp16", {"initial_scale_power": "sixteen"}), ("bf16", {"enabled": "auto"}), ("bf16", {"enabled": 1}),
    # the dynamic-scaling cross-field validator (issue 30: ru-gpts' `min_loss_scale: 0.0`)
    ("fp16", {"enabled": True, "loss_scale": 0, "min_loss_scale": 0.0}), ("fp16", {"enabled": True, "min_loss_scale": 0}),
    ("fp16", {"enabled": True, "loss_scale_window": 0}), ("fp16", {"enabled": True, "min_loss_scale": -1}),
    ("fp16", {"enabled": True, "loss_scale": 128, "min_loss_scale": 0, "loss_scale_window": 0}),
    ("fp16", {"enabled": False, "min_loss_scale": 0}), ("fp16", {"min_loss_scale": True}),
    ("fp16", {"enabled": True, "loss_scale": "x", "min_loss_scale": 0}),
    ("hybrid_engine", {"max_out_tokens": 0}), ("compile", {"passes": ["z9"]}),
    ("tensor_parallel", {"vocab_parallel_ce_backend": "cuda"}),
]


@pytest.mark.parametrize("section,value", VALUE_CASES, ids=[json.dumps(v) for _, v in VALUE_CASES])
def test_values_accepted_and_rejected_alike(section, value):
    model = next(ds for ds, _, path in PYDANTIC_SECTIONS if path == (section,))
    try:
        model(**value)
        deepspeed_accepts = True
    except Exception:
        deepspeed_accepts = False
    flagged = analyse({section: value}).of("invalid")
    assert deepspeed_accepts == (not flagged), [p.message for p in flagged]


BATCH_STRINGS = [{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": "8"},
                 {"train_micro_batch_size_per_gpu": "2"}, {"train_batch_size": "8", "train_micro_batch_size_per_gpu": 1},
                 {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8}]


@pytest.mark.parametrize("data", BATCH_STRINGS, ids=[json.dumps(d) for d in BATCH_STRINGS])
def test_batch_values_given_as_strings_fail_alike(data):
    """DeepSpeed reads the batch values as written and asserts on them: a string raises (TypeError) there,
    and dslint flags it (issue 30: Open-Assistant's `"gradient_accumulation_steps": "8"`)."""
    try:
        RealDeepSpeedConfig(dict(data))
        deepspeed_accepts = True
    except TypeError:
        deepspeed_accepts = False
    flagged = analyse(data).of("invalid")
    assert deepspeed_accepts == (not flagged), [p.message for p in flagged]
    assert all("TypeError" in p.message for p in flagged)


FIXTURES = Path(__file__).parent / "fixtures" / "static" / "config"


def _deepspeed_config(path: Path) -> bool:
    """Not an HF arguments file (its keys decide, as for an unreferenced JSON: dslint.program.json_kinds)."""
    data = json.loads(path.read_text())
    return not (training_argument_keys(data) and not deepspeed_only_keys(data))


@pytest.mark.parametrize("path", sorted(p for p in FIXTURES.glob("*.json")
                                        if not p.with_name(p.name + ".expect").exists() and _deepspeed_config(p)),
                         ids=lambda p: p.name)
def test_clean_fixtures_are_accepted_by_deepspeed(path):
    def without_auto(node):   # what the HF integration does first: every "auto" replaced (here: left to defaults)
        if isinstance(node, dict):
            return {k: without_auto(v) for k, v in node.items() if v != "auto"}
        return node
    data = without_auto(json.loads(path.read_text()))
    if "train_batch_size" not in data:
        data.setdefault("train_micro_batch_size_per_gpu", 1)
    RealDeepSpeedConfig(data)


def test_the_installed_release_is_judged_with_its_own_schema():
    assert table.release_for(VERSION) == VERSION
