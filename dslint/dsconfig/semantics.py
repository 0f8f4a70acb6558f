"""Cross-key facts of a DeepSpeed config, each established from DeepSpeed 0.19.8's source:
batch arithmetic (`DeepSpeedConfig._set_batch_related_parameters` / `_batch_assertion`), fp16+bf16
(`_initialize_params` assert), ZeRO stage/offload combinations (zero/config.py validators, engine, stage3,
cpu_adam), and the ZeRO-1/2 settings MoE requires (`stage_1_and_2._configure_moe_settings`).

Each function returns `Finding`s (message, JSON path, severity override or None) for the DSL4xx rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from dslint.findings import Severity

TB, MB, GAS = "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"


@dataclass
class Finding:
    message: str
    path: tuple
    severity: Optional[Severity] = None
    # the one value change the finding implies (dslint.fixes, unsafe): set `fix_path` to `fix_value`
    fix_path: Optional[tuple] = None
    fix_value: Any = None
    fix_delete: bool = False        # the finding's key is deleted (an option DeepSpeed ignores at this stage)


def _get(data: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


def positive_int(value: Any) -> Optional[int]:
    """A positive integer as DeepSpeed would use it; None for "auto", missing, or invalid (DSL405's business)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    if value <= 0 or value != int(value):
        return None
    return int(value)


def _stage(data: dict) -> Optional[int]:
    stage = _get(data, "zero_optimization", "stage", default=0)
    if isinstance(data.get("zero_optimization"), bool):
        return 1 if data["zero_optimization"] else 0
    return stage if isinstance(stage, int) and not isinstance(stage, bool) and 0 <= stage <= 3 else None


def data_parallel_size(data: dict, world: int) -> tuple[Optional[int], str]:
    """DeepSpeed's batch world size for `world` ranks, and how it was derived; None when it cannot be known
    from the config alone (a pipeline section: the stage count comes from the PipelineModule)."""
    dp = positive_int(data.get("data_parallel_size"))
    if dp and positive_int(data.get("sequence_parallel_size")):
        return dp, f"data_parallel_size {dp}"
    if isinstance(data.get("pipeline"), dict) and data["pipeline"]:
        return None, ""
    divisor, parts = 1, []
    sp = positive_int(data.get("sequence_parallel_size"))
    if sp and sp > 1:
        divisor, parts = divisor * sp, parts + [f"sequence_parallel_size {sp}"]
    tp = positive_int(_get(data, "tensor_parallel", "autotp_size"))
    if tp and tp > 1:
        divisor, parts = divisor * tp, parts + [f"autotp_size {tp}"]
    if world % divisor:
        return None, ""
    how = f"world size {world}" + (f" / ({' × '.join(parts)})" if parts else "")
    return world // divisor, how


def batch_findings(data: dict, world: Optional[int]) -> list[Finding]:
    raw = {k: data.get(k) for k in (TB, MB, GAS)}
    if any(v == "auto" for v in raw.values()):
        return []
    tb, mb, gas = (positive_int(raw[k]) for k in (TB, MB, GAS))
    given = [k for k in (TB, MB, GAS) if k in data]
    if not given or any(positive_int(raw[k]) is None for k in given):
        return []
    at = (TB,) if TB in data else (given[0],)
    if tb and mb and gas and tb % (mb * gas):
        return [Finding(f"train_batch_size {tb} is not a multiple of train_micro_batch_size_per_gpu {mb} × "
                        f"gradient_accumulation_steps {gas} = {mb * gas}: DeepSpeed requires train_batch_size == "
                        "micro × accumulation × data-parallel size, which no world size satisfies", at)]
    if tb and mb and not gas and tb % mb:
        return [Finding(f"train_batch_size {tb} is not a multiple of train_micro_batch_size_per_gpu {mb}: "
                        "no world size and accumulation steps satisfy train_batch_size == micro × accumulation × "
                        "data-parallel size", at)]
    if tb and gas and not mb and tb % gas:
        return [Finding(f"train_batch_size {tb} is not a multiple of gradient_accumulation_steps {gas}: no world "
                        "size and micro batch satisfy train_batch_size == micro × accumulation × data-parallel "
                        "size", at)]
    if world is None or not tb:
        return []
    dp, how = data_parallel_size(data, world)
    if dp is None:
        return []
    # DeepSpeed derives the missing values with floor division, then asserts the product
    implied = None
    if mb and gas:
        ok, product = tb == mb * gas * dp, f"{mb} × {gas} × {dp} = {mb * gas * dp}"
        implied = mb * gas * dp
    elif mb:
        gas = tb // mb // dp
        ok, product = gas > 0 and tb == mb * gas * dp, f"{mb} × {gas} (derived) × {dp} = {mb * gas * dp}"
    elif gas:
        mb = tb // dp // gas
        ok, product = mb > 0 and tb == mb * gas * dp, f"{mb} (derived) × {gas} × {dp} = {mb * gas * dp}"
    else:
        mb = tb // dp
        ok, product = mb > 0 and tb == mb * dp, f"{mb} (derived) × 1 × {dp} = {mb * dp}"
    if ok:
        return []
    return [Finding(f"train_batch_size {tb} != micro × accumulation × data-parallel size ({product}, "
                    f"data-parallel size from {how}): deepspeed.initialize fails the batch assertion; set "
                    "values whose product is train_batch_size, or drop train_batch_size and let DeepSpeed derive it",
                    at, fix_path=(TB,) if implied else None, fix_value=implied)]


def enabled(data: dict, section: str) -> bool:
    return _get(data, section, "enabled") is True


def precision_findings(data: dict) -> list[Finding]:
    bf16 = "bf16" if enabled(data, "bf16") else ("bfloat16" if enabled(data, "bfloat16") else None)
    if enabled(data, "fp16") and bf16:
        return [Finding("fp16 and bf16 are both enabled: deepspeed.initialize asserts 'bfloat16 and fp16 modes "
                        "cannot be simultaneously enabled'; keep one (bf16 on Ampere or newer)", (bf16,),
                        fix_path=("fp16", "enabled"), fix_value=False)]
    return []


def offload_findings(data: dict) -> list[Finding]:
    zero = data.get("zero_optimization")
    if not isinstance(zero, dict):
        zero = {}
    stage = _stage(data)
    out: list[Finding] = []
    opt = zero.get("offload_optimizer") if isinstance(zero.get("offload_optimizer"), dict) else None
    par = zero.get("offload_param") if isinstance(zero.get("offload_param"), dict) else None
    opt_dev = opt.get("device") if opt else None
    par_dev = par.get("device") if par else None
    if stage is not None:
        if par_dev in ("cpu", "nvme") and stage < 3:
            out.append(Finding(f"offload_param (device {par_dev}) needs ZeRO stage 3; at stage {stage} only stage 3 "
                               "partitions parameters, so the setting is ignored and parameters stay on the GPU",
                               ("zero_optimization", "offload_param"), Severity.WARNING, fix_delete=True))
        if opt_dev in ("cpu", "nvme") and stage == 0:
            out.append(Finding(f"offload_optimizer (device {opt_dev}) with ZeRO stage 0: DeepSpeed builds its CPU "
                               "optimizer but no ZeRO optimizer moves states to the CPU, so the first step fails "
                               "('CPUAdam param is on cuda… must be cpu'); use stage 1–3 or remove the offload",
                               ("zero_optimization", "offload_optimizer")))
        ratio = opt.get("ratio") if opt else None
        if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio < 1 and stage != 3:
            out.append(Finding(f"offload_optimizer.ratio {ratio} (partial offload) needs ZeRO stage 3: "
                               "deepspeed.initialize asserts 'Partial offloading only supported for ZeRO Stage 3'",
                               ("zero_optimization", "offload_optimizer", "ratio")))
        if stage == 3:
            for name, sub, dev in (("offload_optimizer", opt, opt_dev), ("offload_param", par, par_dev)):
                if dev == "nvme" and not sub.get("nvme_path"):
                    out.append(Finding(f"{name} device nvme without nvme_path: ZeRO-3 has nowhere to swap "
                                       "(it fails at initialize); set nvme_path to a local NVMe mount",
                                       ("zero_optimization", name, "device")))
        if zero.get("compute_grad_norm") is False and stage not in (1, 2):
            out.append(Finding(f"compute_grad_norm=false is supported only with ZeRO stage 1 or 2 (stage {stage}): "
                               "deepspeed.initialize raises", ("zero_optimization", "compute_grad_norm")))
        for section, key in (("fp16", "fp16_master_weights_and_grads"), ("bf16", "bf16_master_weights_and_grads"),
                             ("bf16", "bf16_optimizer_states")):
            if _get(data, section, key) is True and stage == 0:
                out.append(Finding(f"{section}.{key} needs ZeRO stage 1, 2 or 3 (stage 0 here): "
                                   "deepspeed.initialize asserts", (section, key)))
        op = data.get("gradient_allreduce_op")
        if isinstance(op, str) and op.lower() == "sum" and stage == 3:
            out.append(Finding("gradient_allreduce_op 'sum' is not supported with ZeRO stage 3: "
                               "deepspeed.initialize raises", ("gradient_allreduce_op",)))
    if _get(data, "bf16", "bf16_optimizer_states") is True and _get(data, "bf16", "bf16_master_weights_and_grads") \
            is not True:
        out.append(Finding("bf16.bf16_optimizer_states requires bf16.bf16_master_weights_and_grads: "
                           "deepspeed.initialize asserts", ("bf16", "bf16_optimizer_states")))
    return out


def moe_zero_findings(data: dict) -> list[Finding]:
    """ZeRO-1/2 with DeepSpeed MoE layers asserts reduce_scatter (stages 1, 2) and contiguous_gradients (2)."""
    stage = _stage(data)
    zero = data.get("zero_optimization") if isinstance(data.get("zero_optimization"), dict) else {}
    out = []
    if stage in (1, 2) and zero.get("reduce_scatter") is False:
        out.append(Finding(f"reduce_scatter=false with DeepSpeed MoE layers at ZeRO stage {stage}: the ZeRO optimizer "
                           "asserts 'Reduce Scatter in ZeRO Stage 2 must be set to True for MoE'",
                           ("zero_optimization", "reduce_scatter")))
    if stage == 2 and zero.get("contiguous_gradients") is False:
        out.append(Finding("contiguous_gradients=false with DeepSpeed MoE layers at ZeRO stage 2: the ZeRO optimizer "
                           "asserts 'Contiguous Gradients in ZeRO Stage 2 must be set to True for MoE'",
                           ("zero_optimization", "contiguous_gradients")))
    return out
