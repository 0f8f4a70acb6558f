"""What dslint knows about DeepSpeed config values beyond the generated table (`schemas.json`): run-time checks
DeepSpeed makes on keys it reads with `dict.get`, validators of its pydantic models (code, not declarations),
and keys it replaced. Each entry is keyed by the config path only: whether the key exists in the release the
project pins, and whether its section is a validated pydantic model there, comes from the table
(`dslint.dsconfig.table`), so nothing here is a per-version list.

- `read_type` / `bounds`: keys DeepSpeed reads with `get_scalar_param` and then uses in a way that fails on
  another type: the batch sizes (`_batch_assertion`: positive integers), the parallel sizes
  (`deepspeed.initialize`'s mesh), `gradient_allreduce_op` and the communication data types
  (`get_gradient_allreduce_op`/`get_communication_data_type` raise on other strings).
- `validators`: validators of DeepSpeed's pydantic models (`DeepSpeedFP16Config.loss_scale`, ZenFlow's
  `select_strategy`/intervals, the leaf-module lists' string form), applied only where the table says that
  section is a DeepSpeed model.
- `REPLACED`: keys DeepSpeed replaced by another key without a pydantic deprecation (`bfloat16` → `bf16`,
  `aio.thread_count` → `aio.intra_op_parallelism`); reported as deprecated only at a release whose table reads
  the replacement.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from pydantic import field_validator

TB, MB, GAS = "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"

_READ_TYPES: dict[tuple, Any] = {
    (TB,): int, (MB,): int, (GAS,): int,
    ("sequence_parallel_size",): int, ("data_parallel_size",): int,
    ("gradient_allreduce_op",): str, ("communication_data_type",): str,
    ("seq_parallel_communication_data_type",): str,
}
_BOUNDS: dict[tuple, dict] = {
    (TB,): {"gt": 0}, (MB,): {"gt": 0}, (GAS,): {"gt": 0},
    ("sequence_parallel_size",): {"ge": 1}, ("data_parallel_size",): {"ge": 1},
}

# (section path, replaced key) -> the key that replaced it
REPLACED: dict[tuple, str] = {
    ((), "bfloat16"): "bf16",
    (("aio",), "thread_count"): "intra_op_parallelism",
}


def read_type(path: tuple) -> Optional[Any]:
    return _READ_TYPES.get(tuple(path))


def bounds(path: tuple) -> dict:
    return dict(_BOUNDS.get(tuple(path), {}))


def _allreduce_op(cls, v: Any) -> Any:
    if isinstance(v, str) and v.lower() not in ("mean", "sum"):
        raise ValueError(f"must be 'mean' or 'sum', not {v!r}")
    return v


def _comm_dtype(cls, v: Any) -> Any:
    if isinstance(v, str) and v.lower() not in ("fp32", "fp16", "bf16"):
        raise ValueError(f"must be one of 'fp32', 'fp16', 'bf16', not {v!r}")
    return v


def _loss_scale(cls, v: Any) -> Any:
    if v is None:
        return v
    if isinstance(v, bool):
        raise ValueError("loss_scale must be a number, not a boolean")
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise ValueError("loss_scale must be a number") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError("loss_scale must be a finite number >= 0 (0 selects dynamic loss scaling)")
    return v


def _strategy(cls, v: Any) -> Any:
    if v is not None and v not in ("auto", "step", "epoch"):
        raise ValueError('select_strategy must be one of "auto", "step", or "epoch"')
    return v


def _interval(cls, v: Any) -> Any:
    if isinstance(v, str) and v != "auto":
        raise ValueError('a string interval must be "auto"')
    return v


def _one_or_list(cls, v: Any) -> Any:
    return [v] if isinstance(v, str) else v


# (section path) -> [(keys, mode, function, only where DeepSpeed validates the section with its model)]
_VALIDATORS: dict[tuple, list[tuple[tuple, str, Callable, bool]]] = {
    (): [(("gradient_allreduce_op",), "after", _allreduce_op, False),
         (("communication_data_type", "seq_parallel_communication_data_type"), "after", _comm_dtype, False)],
    ("fp16",): [(("loss_scale",), "before", _loss_scale, True)],
    ("zero_optimization", "zenflow"): [(("select_strategy",), "after", _strategy, True),
                                       (("select_interval", "update_interval"), "after", _interval, True)],
    # DeepSpeedZeroLeafModuleConfig's model_validator(mode="before"): a single string stands for a list of one
    ("zero_optimization", "leaf_module"): [(("classes", "names", "name_suffixes"), "before", _one_or_list, True)],
}


def validators(path: tuple, is_model: bool, keys: set) -> dict:
    """pydantic validators for the section at `path` (field names = its keys present in the release)."""
    out = {}
    for i, (names, mode, fn, needs_model) in enumerate(_VALIDATORS.get(tuple(path), [])):
        present = [n for n in names if n in keys]
        if not present or (needs_model and not is_model):
            continue
        out[f"_check_{i}"] = field_validator(*present, mode=mode)(classmethod(fn).__func__)
    return out
