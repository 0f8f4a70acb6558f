"""Comparing the ranks' dry-step summaries: sequences per group, gradients, expert groups, optimizer coverage.

Every rank runs this on the same published summaries and reaches the same findings.  Findings use the
static half's rule codes (DESIGN.md §2.2) so a runtime finding points at the rule that explains it.
"""

from __future__ import annotations

from typing import Any


def call_key(record: dict[str, Any]) -> str:
    """A collective as compared across ranks: op and the shapes it carries."""
    shapes = ";".join("x".join(map(str, s)) or "scalar" for s, _ in record["ins"] + record["outs"])
    return f"{record['op']}({shapes})" if shapes else record["op"]


def first_divergence(sequences: dict[int, list[str]]) -> dict[str, Any] | None:
    """The first position where the ranks' sequences of one group differ (including one running out)."""
    if not sequences:
        return None
    longest = max(len(s) for s in sequences.values())
    for i in range(longest):
        calls = {r: (s[i] if i < len(s) else None) for r, s in sequences.items()}
        if len(set(calls.values())) > 1:
            return {"seq": i, "calls": calls}
    return None


def _finding(code: str, severity: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"code": code, "severity": severity, "message": message, **extra}


def compare(summaries: dict[int, dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = []
    findings += _sequence_findings(summaries)
    findings += _gradient_findings(summaries)
    findings += _expert_group_findings(summaries, world_size)
    findings += _optimizer_findings(summaries)
    return findings


def _sequence_findings(summaries: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    findings = []
    groups: dict[str, list[int]] = {}
    for summary in summaries.values():
        groups.update(summary.get("groups", {}))
    for group, ranks in sorted(groups.items()):
        members = [r for r in ranks if r in summaries]
        sequences = {r: summaries[r]["sequences"].get(group, []) for r in members}
        counts = {r: summaries[r]["counts"].get(group, 0) for r in members}
        divergence = first_divergence(sequences)
        if len(set(counts.values())) > 1 or divergence:
            findings.append(_finding(
                "DSL102", "error",
                f"group {group} (ranks {ranks}): collective sequences differ across ranks; counts "
                + ", ".join(f"rank {r}: {n}" for r, n in counts.items()),
                group=group, counts=counts, first_divergence=divergence))
    return findings


def _gradient_findings(summaries: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    trainable: dict[str, None] = {}
    for summary in summaries.values():
        trainable.update(dict.fromkeys(summary.get("trainable", [])))
    seen = {r: set(s.get("grads_seen", [])) for r, s in summaries.items()}
    if not any(seen.values()):
        return []  # no backward in the dry step (inference): nothing to compare
    findings = []
    partial = []
    unused = []
    for name in trainable:
        with_grad = [r for r in summaries if name in seen[r]]
        if not with_grad:
            unused.append(name)
        elif len(with_grad) < len(summaries):
            partial.append((name, with_grad, [r for r in summaries if name not in seen[r]]))
    for name, with_grad, without in partial:
        findings.append(_finding(
            "DSL303", "error",
            f"trainable parameter {name} got a gradient on ranks {with_grad} but not on ranks {without}: "
            "ZeRO-1/2 gradient buckets then differ in size across ranks (hang, abort, or gradients of different "
            "parameters reduced together)",
            parameter=name, ranks_with_grad=with_grad, ranks_without_grad=without,
            fix="use the parameter on every path (e.g. add `0 * param.sum()` to the loss, or LLaVA's "
                "`features[0:0]`), or set requires_grad=False for it"))
    if unused:
        findings.append(_finding(
            "DSL302", "warning",
            f"{len(unused)} trainable parameter(s) got no gradient on any rank: {', '.join(unused[:8])}"
            + (" …" if len(unused) > 8 else ""),
            parameters=unused,
            fix="set requires_grad=False for parameters the step never uses, or remove them"))
    return findings


def _expert_group_findings(summaries: dict[int, dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    findings = []
    reported: set[tuple[str, str]] = set()
    observed: dict[str, set[str]] = {}  # layer -> groups its all_to_alls ran on, on any rank
    for summary in summaries.values():
        for layer in summary.get("moe_layers", []):
            observed.setdefault(layer["module"], set()).update(layer.get("all_to_all_groups") or [])
    for rank, summary in sorted(summaries.items()):
        for layer in summary.get("moe_layers", []):
            module, ep_size, ranks = layer["module"], layer["ep_size"], layer["ep_group_ranks"]
            if ranks is None and world_size > 1 and (module, "none") not in reported:
                reported.add((module, "none"))
                fix = ("wrap the model with deepspeed.initialize (or init_inference), which calls "
                       "set_deepspeed_parallelism and gives each MoE layer its expert group")
                groups = sorted(observed.get(module, ()))
                if groups:  # a runtime finding only for what was observed
                    findings.append(_finding(
                        "DSL201", "error",
                        f"MoE layer {module} has no expert-parallel group at world size {world_size}: its "
                        f"all_to_all ran on group(s) {', '.join(groups)} (WORLD) in the dry step (tokens go to "
                        "other ranks' experts; rank-dependent forward counts hang)",
                        module=module, observed=True, fix=fix))
                else:  # e.g. ep_size=1: this DeepSpeed issues no all_to_all, and the output is correct
                    findings.append(_finding(
                        "DSL201", "hint",
                        f"static hint, not observed: MoE layer {module} (ep_size={ep_size}) has no "
                        f"expert-parallel group at world size {world_size}; it issued no all_to_all in the dry "
                        "step, but a larger ep_size or another DeepSpeed version would run it on WORLD",
                        module=module, observed=False, fix=fix))
            elif ranks is not None and ep_size and len(ranks) != ep_size and (module, "size") not in reported:
                reported.add((module, "size"))
                findings.append(_finding(
                    "DSL203", "error",
                    f"MoE layer {module}: expert-parallel group {ranks} has {len(ranks)} ranks, ep_size is "
                    f"{ep_size} (rank {rank})", module=module,
                    fix="make ep_size divide the world size and num_experts"))
    return findings


def _optimizer_findings(summaries: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    missing: dict[str, None] = {}
    for summary in summaries.values():
        missing.update(dict.fromkeys(summary.get("not_in_optimizer", [])))
    if not missing:
        return []
    names = list(missing)
    return [_finding(
        "DSL301", "warning",
        f"{len(names)} trainable parameter(s) are in no optimizer param group and will never train: "
        + ", ".join(names[:8]) + (" …" if len(names) > 8 else ""),
        parameters=names,
        fix="pass every trainable parameter to the optimizer, or set requires_grad=False")]
