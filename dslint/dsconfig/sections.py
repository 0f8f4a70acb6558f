"""Top-level sections other than ZeRO, after DeepSpeed 0.19.8.

Pydantic in DeepSpeed (unknown keys fail `initialize`): `fp16`/`bf16` (runtime/precision_config.py),
`comms_logger` (comm/config.py), `tensorboard`/`wandb`/`csv_monitor`/`comet` (monitor/config.py), `compile`
(compile/config.py), `hybrid_engine` (runtime/config.py), `tensor_parallel` (runtime/tensor_parallel/config.py),
`timers.throughput` (utils/config.py).
Read with `dict.get` (unknown keys silently ignored): `torch_autocast`, `data_types`, `flops_profiler`,
`activation_checkpointing`, `aio`, `optimizer`, `scheduler`, `timers`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import Field, field_validator

from dslint.dsconfig.base import Section, deprecated


class FP16(Section):
    where = "fp16"
    enabled: bool = False
    auto_cast: bool = False
    loss_scale: float = 0
    initial_scale_power: int = 16
    loss_scale_window: int = 1000
    hysteresis: int = 2
    consecutive_hysteresis: bool = False
    min_loss_scale: int = 1
    fp16_master_weights_and_grads: bool = False

    @field_validator("loss_scale", mode="before")
    @classmethod
    def _loss_scale(cls, v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError("loss_scale must be a number, not a boolean")
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError("loss_scale must be a number") from None
        if not math.isfinite(v) or v < 0:
            raise ValueError("loss_scale must be a finite number >= 0 (0 selects dynamic loss scaling)")
        return v


class BF16(Section):
    where = "bf16"
    enabled: bool = False
    immediate_grad_update: bool = False
    check_grad_overflow: bool = True
    bf16_master_weights_and_grads: bool = False
    bf16_optimizer_states: bool = False


class TorchAutocast(Section):
    where = "torch_autocast"
    deepspeed_rejects_unknown = False
    enabled: bool = False
    dtype: Optional[Literal["torch.float16", "fp16", "float16", "half", "torch.float32", "fp32", "float32", "float",
                            "torch.int8", "int8", "torch.bfloat16", "bf16", "bfloat16"]] = None
    lower_precision_safe_modules: Optional[List[str]] = None


class DataTypes(Section):
    where = "data_types"
    deepspeed_rejects_unknown = False
    grad_accum_dtype: Optional[str] = None
    param_dtype: Optional[str] = None
    buffer_dtype: Optional[str] = None
    keep_in_fp32_modules: Union[Literal["auto"], List[str]] = "auto"


class CommsLogger(Section):
    where = "comms_logger"
    enabled: bool = False
    prof_all: bool = True
    prof_ops: list = Field(default_factory=list)
    verbose: bool = False
    debug: bool = False


class TensorBoard(Section):
    where = "tensorboard"
    enabled: bool = False
    output_path: str = ""
    job_name: str = "DeepSpeedJobName"


class CSVMonitor(TensorBoard):
    where = "csv_monitor"


class Wandb(Section):
    where = "wandb"
    enabled: bool = False
    group: Optional[str] = None
    team: Optional[str] = None
    project: str = "deepspeed"


class Comet(Section):
    where = "comet"
    enabled: bool = False
    samples_log_interval: int = 100
    project: Optional[str] = None
    workspace: Optional[str] = None
    api_key: Optional[str] = None
    experiment_name: Optional[str] = None
    experiment_key: Optional[str] = None
    online: Optional[bool] = None
    mode: Optional[str] = None


class Compile(Section):
    where = "compile"
    deepcompile: bool = False
    autoep_non_moe: bool = False
    free_activation: bool = False
    free_activation_threshold: int = 10485760
    offload_activation: bool = False
    offload_activation_pin_memory: bool = True
    offload_opt_states: bool = False
    double_buffer: bool = True
    symmetric_memory: bool = False
    debug_log: bool = False
    offload_parameters: bool = False
    sync_before_reduce: bool = False
    sync_after_reduce: bool = False
    sync_before_allgather: bool = False
    sync_after_allgather: bool = False
    keep_int_input_tensors: bool = True
    keep_all_input_tensors: bool = False
    passes: Optional[List[Literal["z1", "z3", "autosp", "autotp"]]] = None


class HybridEngine(Section):
    where = "hybrid_engine"
    enabled: bool = False
    max_out_tokens: int = Field(512, gt=0)
    inference_tp_size: int = 1
    release_inference_cache: bool = False
    pin_parameters: bool = True
    tp_gather_partition_size: int = 8
    enable_cuda_graph: bool = False


class TPInner(Section):
    where = "tensor_parallel.tp"
    tp_size: int = 1
    tp_grain_size: int = 1
    mpu: Any = None
    tp_group: Any = None


class TensorParallel(Section):
    where = "tensor_parallel"
    dtype: Any = None                   # a torch.dtype in DeepSpeed; set from Python, not from JSON
    autotp_size: int = 0
    tp_overlap_comm: bool = False
    vocab_parallel_lm_head: Optional[bool] = None
    vocab_parallel_ce_backend: Literal["torch", "liger"] = "torch"
    tensor_parallel: Optional[TPInner] = Field(None, alias="tp")
    injection_policy_tuple: Any = None
    partition_config: Optional[Dict[str, Any]] = None
    preset_model: Optional[str] = None
    keep_module_on_host: bool = False
    replace_with_kernel_inject: bool = Field(False, alias="kernel_inject")


class ThroughputTimer(Section):
    where = "timers.throughput"
    enabled: bool = True
    synchronized: bool = True


class Timers(Section):
    where = "timers"
    deepspeed_rejects_unknown = False
    throughput: Optional[ThroughputTimer] = None


class FlopsProfiler(Section):
    where = "flops_profiler"
    deepspeed_rejects_unknown = False
    enabled: bool = False
    recompute_fwd_factor: float = 0.0
    profile_step: int = 1
    module_depth: int = -1
    top_modules: int = 1
    detailed: bool = True
    output_file: Optional[str] = None


class ActivationCheckpointing(Section):
    where = "activation_checkpointing"
    deepspeed_rejects_unknown = False
    partition_activations: bool = False
    number_checkpoints: Optional[int] = None
    contiguous_memory_optimization: bool = False
    synchronize_checkpoint_boundary: bool = False
    profile: bool = False
    cpu_checkpointing: bool = False


class AIO(Section):
    where = "aio"
    deepspeed_rejects_unknown = False
    block_size: int = Field(1048576, gt=0)
    queue_depth: int = Field(8, gt=0)
    intra_op_parallelism: int = Field(1, gt=0)
    single_submit: bool = False
    overlap_events: bool = True
    use_gds: bool = False
    thread_count: Optional[int] = deprecated("intra_op_parallelism")


class Optimizer(Section):
    where = "optimizer"
    deepspeed_rejects_unknown = False
    type: Optional[str] = None
    params: Optional[Dict[str, Any]] = None       # handed to the optimizer's constructor: free-form here
    legacy_fusion: bool = False


class Scheduler(Section):
    where = "scheduler"
    deepspeed_rejects_unknown = False
    type: Optional[str] = None
    params: Optional[Dict[str, Any]] = None
