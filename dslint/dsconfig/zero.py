"""`zero_optimization` and its offload/leaf-module/ZenFlow sub-sections, after DeepSpeed 0.19.8's
`deepspeed/runtime/zero/config.py`, `offload_config.py`, `leaf_module_config.py` and
`runtime/zenflow/zenflow_config.py` (all pydantic, `extra="forbid"`: unknown keys fail `initialize`).
Field names, aliases, types and bounds follow DeepSpeed; tests/test_dsconfig_crosscheck.py keeps them in step.
"""

from __future__ import annotations

import sys
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any, List, Optional, Union

from pydantic import Field, field_validator

from dslint.dsconfig.base import Section, deprecated, removed

_REMOVED = "https://github.com/deepspeedai/DeepSpeed/issues/8489"


class ZeroStage(IntEnum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3


class OffloadDevice(str, Enum):
    none = "none"
    cpu = "cpu"
    nvme = "nvme"


class OffloadParam(Section):
    """Parameter offload; valid only with ZeRO stage 3."""
    where = "zero_optimization.offload_param"
    device: OffloadDevice = OffloadDevice.none
    nvme_path: Optional[Path] = None
    buffer_count: int = Field(5, ge=0)
    buffer_size: int = Field(int(1e8), ge=0)
    max_in_cpu: int = Field(int(1e9), ge=0)
    pin_memory: bool = True


class OffloadOptimizer(Section):
    """Optimizer-state offload; valid with ZeRO stages 1–3 (partial `ratio` only with 3)."""
    where = "zero_optimization.offload_optimizer"
    device: OffloadDevice = OffloadDevice.none
    nvme_path: Optional[Path] = None
    buffer_count: int = Field(4, ge=0)
    pin_memory: bool = True
    pipeline_read: bool = False
    pipeline_write: bool = False
    fast_init: bool = False
    ratio: float = Field(1.0, ge=0.0, le=1.0)
    super_offload: bool = False
    cpuadam_cores_perc: float = Field(0.8, ge=0.0, le=1.0)


class LeafModules(Section):
    where = "zero_optimization.leaf_module"
    classes: Union[List[str], str] = Field(default_factory=list)
    names: Union[List[str], str] = Field(default_factory=list)
    name_suffixes: Union[List[str], str] = Field(default_factory=list)


class ZenFlow(Section):
    where = "zero_optimization.zenflow"
    topk_ratio: float = Field(0.1, gt=0.0, lt=1.0)
    select_strategy: str = "auto"
    select_interval: Union[str, int] = "auto"
    update_interval: Union[str, int] = "auto"
    overlap_step: bool = False
    offload: bool = False
    auto_ratio: float = Field(0.99, ge=0.0, le=1.0)
    full_warm_up_rounds: int = 0
    pt_reserved_cores_perc: float = Field(0.5, ge=0.0, le=1.0)
    steps_per_epoch: Optional[int] = None

    @field_validator("select_strategy")
    @classmethod
    def _strategy(cls, v: str) -> str:
        if v not in ("auto", "step", "epoch"):
            raise ValueError('select_strategy must be one of "auto", "step", or "epoch"')
        return v

    @field_validator("select_interval", "update_interval")
    @classmethod
    def _interval(cls, v: Any) -> Any:
        if isinstance(v, str) and v != "auto":
            raise ValueError('a string interval must be "auto"')
        return v


class ZeroConfig(Section):
    where = "zero_optimization"
    stage: ZeroStage = ZeroStage.disabled
    contiguous_gradients: bool = True
    reduce_scatter: bool = True
    reduce_bucket_size: int = Field(int(5e8), gt=0)
    use_multi_rank_bucket_allreduce: bool = True
    allgather_partitions: bool = True
    allgather_bucket_size: int = Field(int(5e8), ge=0)
    overlap_comm: Optional[bool] = None
    compute_grad_norm: bool = True
    load_from_fp32_weights: bool = True
    elastic_checkpoint: bool = False
    offload_param: Optional[OffloadParam] = None
    offload_optimizer: Optional[OffloadOptimizer] = None
    zenflow: Optional[ZenFlow] = None
    sub_group_size: int = Field(int(1e9), ge=0)
    cpu_offload_param: Optional[bool] = deprecated("offload_param")
    cpu_offload_use_pin_memory: Optional[bool] = deprecated("offload_param or offload_optimizer (pin_memory)")
    cpu_offload: Optional[bool] = deprecated("offload_optimizer")
    prefetch_bucket_size: int = Field(int(5e7), ge=0, alias="stage3_prefetch_bucket_size")
    param_persistence_threshold: int = Field(int(1e5), ge=0, alias="stage3_param_persistence_threshold")
    model_persistence_threshold: int = Field(sys.maxsize, ge=0, alias="stage3_model_persistence_threshold")
    max_live_parameters: int = Field(int(1e9), ge=0, alias="stage3_max_live_parameters")
    max_reuse_distance: int = Field(int(1e9), ge=0, alias="stage3_max_reuse_distance")
    gather_16bit_weights_on_model_save: bool = Field(False, alias="stage3_gather_16bit_weights_on_model_save")
    module_granularity_threshold: int = Field(0, alias="stage3_module_granularity_threshold")
    use_all_reduce_for_fetch_params: bool = Field(False, alias="stage3_use_all_reduce_for_fetch_params")
    allgather_sequential: bool = Field(False, alias="stage3_allgather_sequential")
    stage3_gather_fp16_weights_on_model_save: bool = deprecated("stage3_gather_16bit_weights_on_model_save", False)
    ignore_unused_parameters: bool = True
    legacy_stage1: bool = False
    round_robin_gradients: bool = False
    parameter_alignment: bool = False
    zero_hpz_partition_size: int = Field(1, ge=0)
    zero_quantized_weights: bool = False
    zero_quantized_nontrainable_weights: bool = False
    zero_quantized_gradients: bool = False
    memory_efficient_linear: bool = True
    pipeline_loading_checkpoint: bool = False
    override_module_apply: bool = True
    log_trace_cache_warnings: bool = False
    enable_sanity_checks: bool = False
    save_muon_momentum_buffer_in_memory: bool = False
    leaf_module: Optional[LeafModules] = None
    # removed from DeepSpeed (issue #8489); `deepspeed.initialize` raises on them in 0.19.8
    mics_shard_size: Any = removed(f"MiCS ZeRO-3 sharding has been removed; delete this key. See {_REMOVED}.")
    mics_hierarchical_params_gather: Any = removed(
        f"MiCS ZeRO-3 sharding has been removed; delete this key. See {_REMOVED}.")
    zeropp_loco_param: Any = removed(
        "LoCo-Zero++ has been removed; delete this key to use standard ZeRO++ quantized gradients. "
        f"See {_REMOVED}.")
