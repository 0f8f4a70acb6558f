"""Which JSON dicts are `deepspeed.init_inference` configs (a different schema, which the training-config rules
leave alone). The training config's own keys, per release, are in the generated table (`dslint.dsconfig.table`).
"""

from __future__ import annotations


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
