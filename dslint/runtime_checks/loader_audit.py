"""The loader audit: before a DataLoader's first batch reaches the model, every rank walks the whole epoch of
its data pipeline (sampler, dataset and collate only: no forward, no workers) and publishes per-step summaries
(batch count, tensor shapes, token counts) through the store; the ranks compare them before any model runs.

Found across ranks, with the step index and the sampler/collator at fault:
  * uneven batch counts (a DataLoader without a DistributedSampler, an uneven shard): the rank that runs out
    stops issuing the loop's collectives while the others go on (DSL102);
  * per-step token counts that differ under expert parallelism with ``drop_tokens`` (dynamic padding): the MoE
    capacity DeepSpeed computes from the local token count differs, so the all_to_all sizes do (DSL204);
  * the last partial batch (a distinct shape class the dry steps must reach).

The audit also gives the dry steps their coverage target: the distinct shape classes of the epoch and its end
(``DrySession.coverage_done``).  The user's random state is restored after the audit, so the audit walks the
same order the script then sees (RandomSampler draws its seed from the global generator).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from typing import Any

MAX_FIELDS = 12
MAX_STEPS_PUBLISHED = 20000
# how long a rank waits for its peers' audits of the same loader before going on (a loader iterated on some
# ranks only, e.g. a rank-0 evaluation, is then compared later or not at all)
PEER_WAIT_S = 5.0


def _flatten(obj: Any, path: str, out: dict[str, list[int]]) -> None:
    if len(out) >= MAX_FIELDS:
        return
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        out[path or "batch"] = [int(d) for d in obj.shape]
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            _flatten(value, f"{path}.{key}" if path else str(key), out)
    elif isinstance(obj, (list, tuple)):
        if obj and all(hasattr(v, "shape") or isinstance(v, (Mapping, list, tuple)) for v in obj):
            for i, value in enumerate(obj):
                _flatten(value, f"{path}[{i}]", out)
        else:
            out[path or "batch"] = [len(obj)]


def shapes_of(batch: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    _flatten(batch, "", out)
    return out


def signature(shapes: dict[str, list[int]]) -> str:
    return ";".join(f"{k}:{'x'.join(map(str, v))}" for k, v in sorted(shapes.items()))


def token_count(shapes: dict[str, list[int]]) -> int | None:
    """Batch x sequence positions of the main input (what an MoE gate sees): ``input_ids``-like first."""
    ranked = sorted(shapes.items(), key=lambda kv: (not any(w in kv[0].lower() for w in ("input_ids", "ids",
                                                                                      "tokens")), kv[0]))
    for _, dims in ranked:
        if len(dims) >= 2:
            return dims[0] * dims[1]
    return None


def describe_loader(loader: Any) -> dict[str, Any]:
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    collate = getattr(loader, "collate_fn", None)
    try:
        dataset_len: int | None = len(loader.dataset)
    except Exception:
        dataset_len = None
    info = {
        "loader": type(loader).__name__, "sampler": type(sampler).__name__ if sampler is not None else None,
        "batch_sampler": type(batch_sampler).__name__ if batch_sampler is not None else None,
        "collate_fn": getattr(collate, "__qualname__", None) or type(collate).__name__,
        "batch_size": getattr(loader, "batch_size", None), "drop_last": getattr(loader, "drop_last", None),
        "dataset": type(getattr(loader, "dataset", None)).__name__, "dataset_len": dataset_len,
        "distributed_sampler": _is_distributed(sampler) or _is_distributed(batch_sampler),
    }
    return info


def _is_distributed(sampler: Any) -> bool:
    if sampler is None:
        return False
    names = {c.__name__ for c in type(sampler).__mro__}
    return bool(names & {"DistributedSampler", "BatchSamplerShard", "DistributedBatchSampler"}) or \
        (hasattr(sampler, "num_replicas") and hasattr(sampler, "rank"))


def walk(loader: Any, budget_s: float) -> dict[str, Any]:
    """Iterate the loader's epoch in this process (collate only) and summarise each step.

    Returns the per-step shape classes (``classes``: distinct signatures; ``steps``: index of each step's
    class), token counts, and whether the walk was cut by the budget."""
    import torch
    from torch.utils.data.dataloader import _DatasetKind

    states = _save_random_state(torch)
    classes: list[str] = []
    class_index: dict[str, int] = {}
    class_shapes: list[dict[str, list[int]]] = []
    steps: list[int] = []
    tokens: list[int | None] = []
    truncated = False
    error = None
    start = time.monotonic()
    try:
        if loader._dataset_kind != _DatasetKind.Map:
            # a stream may be consumable once (a generator behind __iter__): walking it would take the
            # script's data, so iterable datasets are described but not walked
            raise _NotWalked("an IterableDataset is not walked (a stream may be consumable only once)")
        fetcher = _DatasetKind.create_fetcher(loader._dataset_kind, loader.dataset, loader._auto_collation,
                                              loader.collate_fn, loader.drop_last)
        for index in loader._index_sampler:
            try:
                batch = fetcher.fetch(index)
            except StopIteration:
                break
            shapes = shapes_of(batch)
            sig = signature(shapes)
            if sig not in class_index:
                class_index[sig] = len(classes)
                classes.append(sig)
                class_shapes.append(shapes)
            if len(steps) < MAX_STEPS_PUBLISHED:
                steps.append(class_index[sig])
                tokens.append(token_count(shapes))
            if time.monotonic() - start > budget_s or len(steps) >= MAX_STEPS_PUBLISHED:
                truncated = True
                break
    except _NotWalked as exc:
        error = str(exc)
    except Exception as exc:  # an audit that cannot walk this pipeline says so and checks nothing
        error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        _restore_random_state(torch, states)
    return {"classes": classes, "class_shapes": class_shapes, "steps": steps, "tokens": tokens,
            "count": len(steps), "truncated": truncated, "error": error,
            "seconds": round(time.monotonic() - start, 3)}


class _NotWalked(Exception):
    pass


def _save_random_state(torch: Any) -> tuple[Any, ...]:
    np_state = None
    try:
        import numpy as np

        np_state = np.random.get_state()
    except ImportError:
        pass
    return torch.get_rng_state(), random.getstate(), np_state


def _restore_random_state(torch: Any, states: tuple[Any, ...]) -> None:
    torch.set_rng_state(states[0])
    random.setstate(states[1])
    if states[2] is not None:
        import numpy as np

        np.random.set_state(states[2])


# ---- comparing the ranks' audits ------------------------------------------------------------------------
def moe_capacity(tokens: int, layer: dict[str, Any]) -> int | None:
    """The expert capacity DeepSpeed's gate computes from the local token count (top-1/2/k, drop_tokens)."""
    experts, factor = layer.get("num_experts"), layer.get("capacity_factor")
    if not experts or not factor or not layer.get("drop_tokens", True):
        return None
    k = layer.get("k") or 1
    capacity = math.ceil(tokens / experts * factor * (k if k > 1 else 1))
    return max(capacity, layer.get("min_capacity") or 0)


def compare(audits: dict[int, dict[str, Any]], moe_layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings from the ranks' audits of one loader; every rank computes the same from the same data."""
    findings: list[dict[str, Any]] = []
    ranks = sorted(audits)
    where = next((a.get("source") for a in audits.values() if a.get("source")), None)
    loader = audits[ranks[0]]["loader"]
    at = f" (iterated at {where[0]}:{where[1]})" if where else ""
    if any(audits[r]["walk"].get("error") for r in ranks):
        return findings
    counts = {r: audits[r]["walk"]["count"] for r in ranks}
    truncated = any(audits[r]["walk"]["truncated"] for r in ranks)
    if len(set(counts.values())) > 1 and not truncated:
        short = min(counts.values())
        info = {r: audits[r]["loader"] for r in ranks}
        fault = _fault(info)
        findings.append({
            "code": "DSL102", "severity": "error", "step": short, "counts": {str(r): n for r, n in counts.items()},
            "message": (f"uneven batch counts{at}: " + ", ".join(f"rank {r}: {n} batches" for r, n in counts.items())
                        + f"; at step {short} the ranks with {short} batches leave the loop while the others "
                        f"issue its collectives: {fault}"),
            "fix": "shard with a DistributedSampler (it pads every rank to the same count) or drop_last=True; for "
                   "an uneven eval, all-reduce the count and run dummy steps on the ranks that run out",
            "loader": loader, "source": where})
    usable = min(counts.values())
    expert = [layer for layer in moe_layers if (layer.get("ep_size") or 1) > 1]
    for step in range(min(usable, min(len(audits[r]["walk"]["steps"]) for r in ranks))):
        sigs = {r: audits[r]["walk"]["classes"][audits[r]["walk"]["steps"][step]] for r in ranks}
        if len(set(sigs.values())) == 1:
            continue
        tokens = {r: audits[r]["walk"]["tokens"][step] for r in ranks}
        detail = "; ".join(f"rank {r}: {sigs[r]}" for r in ranks)
        if expert and len(set(tokens.values())) > 1 and None not in tokens.values():
            layer = expert[0]
            caps = {r: moe_capacity(t, layer) for r, t in tokens.items()}
            if None not in caps.values() and len(set(caps.values())) > 1:
                findings.append({
                    "code": "DSL204", "severity": "error", "step": step,
                    "tokens": {str(r): t for r, t in tokens.items()},
                    "capacity": {str(r): c for r, c in caps.items()},
                    "message": (f"step {step} of the loader{at} gives the ranks different token counts ({detail}): "
                                f"the capacity of MoE layer {layer['module']} (num_experts={layer['num_experts']}, "
                                f"capacity_factor={layer['capacity_factor']}) would be "
                                + ", ".join(f"rank {r}: {c}" for r, c in caps.items())
                                + f", so its all_to_all sizes differ (collate_fn "
                                f"{audits[ranks[0]]['loader']['collate_fn']} pads per batch)"),
                    "fix": "pad every batch to one fixed length (padding='max_length'), or all-reduce the pad "
                           "length to the maximum, or use drop_tokens=False",
                    "loader": loader, "source": where})
                break
        findings.append({"code": None, "severity": "info", "step": step,
                         "message": f"step {step}: the ranks' batches differ in shape ({detail})"})
        break
    for r in ranks:
        walk_ = audits[r]["walk"]
        classes = walk_["class_shapes"]
        if walk_["count"] > 1 and walk_["steps"] and walk_["steps"][-1] != walk_["steps"][0] and \
                audits[r]["loader"].get("drop_last") is False:
            last = classes[walk_["steps"][-1]]
            findings.append({"code": None, "severity": "info", "step": walk_["count"] - 1, "rank": r,
                             "message": f"rank {r}: the last batch (step {walk_['count'] - 1}) is partial or "
                                        f"differently shaped ({signature(last)}; drop_last=False)"})
    return findings


def _fault(info: dict[int, dict[str, Any]]) -> str:
    first = next(iter(info.values()))
    sizes = ", ".join(f"rank {r}: {i.get('dataset_len')}" for r, i in info.items())
    if not any(i.get("distributed_sampler") for i in info.values()):
        return (f"sampler {first.get('sampler')} is not a DistributedSampler (dataset sizes {sizes}, "
                f"batch_size={first.get('batch_size')}, drop_last={first.get('drop_last')})")
    return (f"sampler {first.get('sampler')} (dataset sizes {sizes}, batch_size={first.get('batch_size')}, "
            f"drop_last={first.get('drop_last')}) gives the ranks uneven shards")


def moe_gate_info(module: Any) -> dict[str, Any]:
    """The gate settings of a DeepSpeed MOELayer that decide its capacity."""
    gate = getattr(module, "gate", None)
    return {"capacity_factor": getattr(gate, "capacity_factor", None),
            "min_capacity": getattr(gate, "min_capacity", None), "k": getattr(gate, "k", None),
            "drop_tokens": getattr(gate, "drop_tokens", True)}
