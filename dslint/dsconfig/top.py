"""The top level of a DeepSpeed config, after DeepSpeed 0.19.8's `deepspeed/runtime/config.py`
(`DeepSpeedConfig._initialize_params`, `_reject_removed_config_keys`) and `deepspeed/__init__.py`
(`sequence_parallel_size`/`data_parallel_size`). DeepSpeed reads the top level with `dict.get`: an unknown
top-level key is silently ignored (`gradient_acumulation_steps` leaves accumulation at its default).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from pydantic import Field, field_validator

from dslint.dsconfig.base import Section, deprecated, removed
from dslint.dsconfig.sections import (AIO, BF16, FP16, ActivationCheckpointing, CommsLogger, Comet, Compile,
                                      CSVMonitor, DataTypes, FlopsProfiler, HybridEngine, Optimizer, Scheduler,
                                      TensorBoard, TensorParallel, Timers, TorchAutocast, Wandb)
from dslint.dsconfig.zero import ZeroConfig

_ISSUE = "https://github.com/deepspeedai/DeepSpeed/issues/8489"
OpenSection = Optional[Dict[str, Any]]       # read by DeepSpeed code dslint does not model key by key


class DeepSpeedConfig(Section):
    where = ""
    deepspeed_rejects_unknown = False

    # batch
    train_batch_size: Optional[int] = Field(None, gt=0)
    train_micro_batch_size_per_gpu: Optional[int] = Field(None, gt=0)
    gradient_accumulation_steps: Optional[int] = Field(None, gt=0)
    managed_gradient_accumulation: bool = True
    # optimisation
    optimizer: Optional[Optimizer] = None
    scheduler: Optional[Scheduler] = None
    zero_optimization: Optional[ZeroConfig] = None
    zero_allow_untested_optimizer: bool = False
    zero_force_ds_cpu_optimizer: bool = True
    gradient_clipping: float = 1.0
    prescale_gradients: bool = False
    gradient_predivide_factor: float = 1.0
    gradient_allreduce_op: str = "mean"
    communication_data_type: Optional[str] = None
    seq_parallel_communication_data_type: Optional[str] = None
    disable_allgather: bool = False
    # precision
    fp16: Optional[FP16] = None
    bf16: Optional[BF16] = None
    bfloat16: Optional[BF16] = deprecated("bf16")
    torch_autocast: Optional[TorchAutocast] = None
    data_types: Optional[DataTypes] = None
    # parallelism
    tensor_parallel: Optional[TensorParallel] = None
    sequence_parallel_size: Optional[int] = Field(None, ge=1)
    data_parallel_size: Optional[int] = Field(None, ge=1)
    use_data_before_expert_parallelism: bool = False
    expert_parallel: OpenSection = None
    pipeline: OpenSection = None
    hybrid_engine: Optional[HybridEngine] = None
    # logging, profiling, monitoring
    steps_per_print: Optional[int] = None
    wall_clock_breakdown: bool = False
    memory_breakdown: bool = False
    dump_state: bool = False
    log_level: Any = None
    disable_python_gc: Any = False
    timers: Optional[Timers] = None
    comms_logger: Optional[CommsLogger] = None
    flops_profiler: Optional[FlopsProfiler] = None
    tensorboard: Optional[TensorBoard] = None
    wandb: Optional[Wandb] = None
    csv_monitor: Optional[CSVMonitor] = None
    comet: Optional[Comet] = None
    # memory, I/O, checkpoints, data
    activation_checkpointing: Optional[ActivationCheckpointing] = None
    aio: Optional[AIO] = None
    checkpoint: OpenSection = None
    datastates_ckpt: OpenSection = None
    dataloader_drop_last: bool = False
    data_efficiency: OpenSection = None
    vocabulary_size: Optional[int] = None
    autotuning: OpenSection = None
    compile: Optional[Compile] = None
    weight_quantization: OpenSection = None
    # removed from DeepSpeed: `deepspeed.initialize` raises DeepSpeedConfigError on them in 0.19.8
    nebula: Any = removed(f"Nebula checkpointing has been removed; checkpoints use torch.save. See {_ISSUE}.")
    compression_training: Any = removed(f"The DeepSpeed compression library has been removed. See {_ISSUE}.")
    amp: Any = removed(f"NVIDIA Apex AMP integration has been removed; use 'fp16', 'bf16' or 'torch_autocast'. "
                       f"See {_ISSUE}.")
    quantize_training: Any = removed(f"Mixture-of-Quantization ('quantize_training') has been removed. See {_ISSUE}.")
    sparse_gradients: Any = removed("Sparse compression of dense embedding gradients has been removed; embeddings "
                                    f"built with sparse=True are still reduced sparsely. See {_ISSUE}.")
    eigenvalue: Any = removed(f"Eigenvalue-based MoQ has been removed. See {_ISSUE}.")
    sparse_attention: Any = removed(f"DeepSpeed Sparse Attention has been removed. See {_ISSUE}.")
    elasticity: Any = removed("Elastic training has been removed; set train_batch_size / "
                              "train_micro_batch_size_per_gpu / gradient_accumulation_steps directly.")
    graph_harvesting: Any = removed(f"Graph harvesting has been removed. See {_ISSUE}.")
    curriculum_learning: Any = removed("Top-level 'curriculum_learning' has been removed; use "
                                       f"'data_efficiency.data_sampling.curriculum_learning'. See {_ISSUE}.")
    progressive_layer_drop: Any = removed(f"Progressive Layer Dropping has been removed. See {_ISSUE}.")

    @field_validator("gradient_allreduce_op")
    @classmethod
    def _allreduce_op(cls, v: str) -> str:
        if v.lower() not in ("mean", "sum"):
            raise ValueError(f"must be 'mean' or 'sum', not {v!r}")
        return v

    @field_validator("communication_data_type", "seq_parallel_communication_data_type")
    @classmethod
    def _comm_dtype(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and v.lower() not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"must be one of 'fp32', 'fp16', 'bf16', not {v!r}")
        return v


# Keys of `deepspeed.init_inference`'s config (DeepSpeedInferenceConfig) that a training config never has:
# a JSON holding them is an inference config, which the training-config rules leave alone.
INFERENCE_ONLY_KEYS = frozenset({
    "replace_with_kernel_inject", "kernel_inject", "injection_policy", "injection_dict", "mp_size",
    "training_mp_size", "replace_method", "enable_cuda_graph", "max_out_tokens", "max_tokens", "min_out_tokens",
    "min_tokens", "triangular_masking", "return_tuple", "use_triton", "triton_autotune", "moe_experts", "moe_type",
    "save_mp_checkpoint_path", "set_empty_params", "transposed_mode", "base_dir", "ep_size", "dtype", "moe",
    "quant", "zero", "tp", "checkpoint_config", "ckpt_config"})
TRAINING_ONLY_KEYS = frozenset({"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                "optimizer", "scheduler", "zero_optimization"})


def is_inference_config(data: dict) -> bool:
    return bool(INFERENCE_ONLY_KEYS & data.keys()) and not (TRAINING_ONLY_KEYS & data.keys())
