"""What dslint knows about DeepSpeed config values beyond the generated table (`schemas.json`): run-time checks
DeepSpeed makes on keys it reads with `dict.get`, validators of its pydantic models (code, not declarations),
and keys it replaced. Each entry is keyed by the config path only: whether the key exists in the release the
project pins, and whether its section is a validated pydantic model there, comes from the table
(`dslint.dsconfig.table`), so nothing here is a per-version list.

- `read_type` / `bounds`: keys DeepSpeed reads with `get_scalar_param` and then uses in a way that fails on
  another type: the batch sizes (`_batch_assertion`: positive integers), the parallel sizes
  (`deepspeed.initialize`'s mesh), `gradient_allreduce_op` and the communication data types
  (`get_gradient_allreduce_op`/`get_communication_data_type` raise on other strings).
- `_ARITHMETIC`: top-level keys DeepSpeed reads as written and does arithmetic with (the batch sizes'
  `_batch_assertion`, `gradient_clipping`, `steps_per_print`): a string there (`"gradient_accumulation_steps":
  "8"`) raises TypeError on every rank.
- `validators`: validators of DeepSpeed's pydantic models (`DeepSpeedFP16Config`'s loss scale checks, among
  them the dynamic-scaling cross-field check, ZenFlow's `select_strategy`/intervals, the leaf-module lists'
  string form), each keyed by the name of DeepSpeed's validator it stands for and applied only at the
  releases whose model has that validator (the table lists them per section).
- `REPLACED`: keys DeepSpeed replaced by another key without a pydantic deprecation (`bfloat16` → `bf16`,
  `aio.thread_count` → `aio.intra_op_parallelism`); reported as deprecated only at a release whose table reads
  the replacement.
"""

from __future__ import annotations

import math
import re
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


# top-level values DeepSpeed reads as written (`get_scalar_param`: no conversion) and then does arithmetic or
# comparisons with: where a string fails, and how
_ARITHMETIC: dict[str, str] = {
    TB: "`_batch_assertion` compares it with 0 when `deepspeed.initialize` builds the config",
    MB: "`_batch_assertion` compares it with 0 when `deepspeed.initialize` builds the config",
    GAS: "`_batch_assertion` compares it with 0 when `deepspeed.initialize` builds the config",
    "gradient_clipping": "the engine compares it with 0.0 (or hands it to the ZeRO optimizer's clipping) at the "
                         "first optimizer step",
    "steps_per_print": "the engine takes `global_steps % steps_per_print` at the first step",
}


def _number_for_arithmetic(cls, v: Any, info) -> Any:
    """A string where DeepSpeed does arithmetic with the value as read: TypeError on every rank (a quoted
    `"8"` is not converted: `get_scalar_param` returns it as written)."""
    if isinstance(v, str):
        how = _ARITHMETIC.get(info.field_name) or _ARITHMETIC.get(getattr(info, "alias", None) or "", "")
        number = v.strip()
        hint = f"; write the number {number} without quotes" if re.fullmatch(r"[0-9]+(\.[0-9]*)?(e[0-9]+)?", number) \
            else ""
        raise ValueError(f"a string, which DeepSpeed reads as written (`get_scalar_param` converts nothing) and "
                         f"{how}: TypeError on every rank{hint}")
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


def _integer_not_bool(cls, v: Any, info) -> Any:
    """DeepSpeedFP16Config._reject_non_integer_scale_params: pydantic would read `true` as 1."""
    if isinstance(v, bool):
        raise ValueError(f"fp16.{info.field_name} must be an integer, not bool")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"fp16.{info.field_name} must be a finite number (not inf/-inf/nan)")
    return v


def _dynamic_scaling(cls, v: Any, info) -> Any:
    """DeepSpeedFP16Config._validate_dynamic_loss_scale_params (a model validator, written here on the two
    fields it judges so that the finding sits on the key): with fp16 enabled and dynamic loss scaling
    (`loss_scale` 0, its default), `loss_scale_window` and `min_loss_scale` must be > 0 (the window is a
    modulus of DynamicLossScaler.update_scale, the minimum the scale's floor). `info.data` holds the fields
    validated before (in the table's key order: `enabled`, `loss_scale`); an absent one has DeepSpeed's
    default (False, 0); a field that failed its own validation is not there, and nothing is said."""
    if v is None or info.data.get("enabled") is not True or "loss_scale" not in info.data:
        return v
    scale = info.data.get("loss_scale")
    if (scale if scale is not None else 0) == 0 and v <= 0:
        raise ValueError(f"fp16.{info.field_name} must be > 0 when dynamic loss scaling is enabled (loss_scale=0): "
                         "deepspeed.initialize raises")
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


# (section path) -> [(keys, mode, function, DeepSpeed's validator)]: the last is None for a run-time check of a key
# read with `dict.get` (applied wherever the release reads the key), else the name of the validator of DeepSpeed's
# model that the function stands for (applied only at the releases whose model has it: the table lists the
# validators of every model, generated from DeepSpeed's sources)
_VALIDATORS: dict[tuple, list[tuple[tuple, str, Callable, Optional[str]]]] = {
    (): [(tuple(_ARITHMETIC), "before", _number_for_arithmetic, None),
         (("gradient_allreduce_op",), "after", _allreduce_op, None),
         (("communication_data_type", "seq_parallel_communication_data_type"), "after", _comm_dtype, None)],
    ("fp16",): [(("loss_scale",), "before", _loss_scale, "_validate_loss_scale"),
                (("loss_scale_window", "min_loss_scale"), "before", _integer_not_bool,
                 "_reject_non_integer_scale_params"),
                (("loss_scale_window", "min_loss_scale"), "after", _dynamic_scaling,
                 "_validate_dynamic_loss_scale_params")],
    ("zero_optimization", "zenflow"): [(("select_strategy",), "after", _strategy, "validate_fields"),
                                       (("select_interval", "update_interval"), "after", _interval,
                                        "validate_fields")],
    # DeepSpeedZeroLeafModuleConfig's model_validator(mode="before"): a single string stands for a list of one
    ("zero_optimization", "leaf_module"): [(("classes", "names", "name_suffixes"), "before", _one_or_list,
                                            "_coerce_container_types")],
}


def validators(path: tuple, section: dict) -> dict:
    """pydantic validators for the section at `path` whose schema (one release's, from the table) is `section`:
    field names = its keys; DeepSpeed's validators = its `validators` (none where DeepSpeed reads the section
    with `dict.get`)."""
    keys = set(section.get("keys", ()))
    has = set(section.get("validators", ())) if section.get("model") is not None else set()
    out = {}
    for i, (names, mode, fn, deepspeed) in enumerate(_VALIDATORS.get(tuple(path), [])):
        present = [n for n in names if n in keys]
        if not present or (deepspeed is not None and deepspeed not in has):
            continue
        out[f"_check_{i}"] = field_validator(*present, mode=mode)(classmethod(fn).__func__)
    return out
