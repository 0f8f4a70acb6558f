"""From an aborted dry step to a likely cause, the static rule that explains it, and the fix.

The pre-flight sees *where* ranks parted ways; the user's source around that line says *why*: a collective
under ``if rank == 0`` (DSL101), in a loop over a rank-sliced list (DSL102), in ``generate`` without
``synced_gpus`` (DSL104), MoE all_to_all sizes following the local token count (DSL204), a parameter
used only on some ranks' batches (DSL303).  The source is read with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import functools
import linecache
import re
from typing import Any

RANK_WORDS = re.compile(r"rank|is_main|main_process|world_process_zero|process_index", re.I)

FIXES = {
    "DSL101": "issue the collective on every rank (move it out of the rank condition; guard only the "
              "side effect such as printing or writing), or give the other ranks the same call",
    "DSL102": "give every rank the same number of iterations: pad the per-rank shard to the longest "
              "(DistributedSampler with drop_last/padding), or all-reduce the count and run dummy forwards",
    "DSL104": "call generate(..., synced_gpus=True) so finished ranks keep joining the per-token forwards",
    "DSL201": "wrap the model with deepspeed.initialize/init_inference so MoE layers get their expert groups",
    "DSL202": "build the optimizer from deepspeed.moe.utils.split_params_into_different_moe_groups_for_optimizer"
              "(param_groups) so expert parameters are in a group marked {'moe': True}",
    "DSL204": "pad every batch to one fixed length (padding='max_length'), or all-reduce the pad length to "
              "the maximum, or use top-k>=2 gating with drop_tokens=False",
    "DSL303": "use the parameter on every path (add `0 * param.sum()` to the loss), or set requires_grad=False",
}


def source_text(source: list[Any] | None) -> str:
    if not source:
        return ""
    return linecache.getline(source[0], source[1]).strip()


@functools.lru_cache(maxsize=32)
def _tree(path: str) -> ast.AST | None:
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def enclosing_control(source: list[Any] | None) -> tuple[str, str] | None:
    """("if", test text) or ("loop", header text) of the innermost compound statement around the line."""
    if not source:
        return None
    tree = _tree(source[0])
    if tree is None:
        return None
    line = source[1]
    best: tuple[int, str, str] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.For, ast.While, ast.IfExp)):
            continue
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        if not (node.lineno <= line <= end) or node.lineno == line and not isinstance(node, ast.IfExp):
            continue
        if best is None or node.lineno >= best[0]:
            kind = "loop" if isinstance(node, (ast.For, ast.While)) else "if"
            header = ast.unparse(node.iter if isinstance(node, ast.For) else node.test)
            best = (node.lineno, kind, header)
    return (best[1], best[2]) if best else None


def diagnose(verdict: dict[str, Any], states: dict[int, dict[str, Any]]) -> dict[str, Any]:
    kind = verdict.get("kind")
    if kind == "error":
        finding = verdict.get("finding")
        if finding:
            return {"code": finding["code"], "cause": finding["message"], "fix": FIXES.get(finding["code"], "")}
        return {"code": None, "cause": f"the script raised on rank {verdict.get('rank')}: "
                                       f"{verdict.get('exception')}", "fix": "fix the script's error"}
    moe_without_group = sorted({layer["module"] for s in states.values() for layer in s.get("moe_layers", [])
                                if layer.get("ep_group_ranks") is None})
    if kind == "divergence":
        result = _diagnose_divergence(verdict, states)
    else:
        result = _diagnose_hang(verdict, states)
    if moe_without_group and len(states) > 1:
        result["related"] = {"code": "DSL201", "message": (
            f"MoE layers without an expert-parallel group (all_to_all on WORLD): {', '.join(moe_without_group)}"),
            "fix": FIXES["DSL201"]}
    return result


def _diagnose_divergence(verdict: dict[str, Any], states: dict[int, dict[str, Any]]) -> dict[str, Any]:
    calls = verdict.get("calls", [])
    ops = {c["op"] for c in calls}
    modules = [c.get("module") or "" for c in calls]
    if verdict.get("mismatch") == "size":
        if ops & {"all_to_all_single", "all_to_all"} and any("moe" in m.lower() for m in modules):
            shapes = "; ".join(f"rank {c['rank']}: {c['ins'][0][0] if c['ins'] else '?'}" for c in calls)
            return {"code": "DSL204", "fix": FIXES["DSL204"], "cause": (
                "MoE all_to_all buffers differ in size across the expert-parallel group "
                f"({shapes}; dim 1 is the capacity): the capacity follows each rank's local token count, "
                "so per-rank sequence lengths (dynamic padding) give different all_to_all sizes")}
        partial = _params_with_partial_grads(states)
        if partial:
            names = ", ".join(f"{n} (no gradient on ranks {r})" for n, r in partial[:4])
            return {"code": "DSL303", "fix": FIXES["DSL303"], "cause": (
                f"gradient reduction sizes differ because some trainable parameters got no gradient on some "
                f"ranks: {names}")}
        return {"code": None, "fix": "make the tensor sizes of this collective independent of per-rank data",
                "cause": f"the ranks pass differently sized tensors to the same {'/'.join(sorted(ops))}"}
    # different ops at the same sequence position: control flow differs
    return _control_flow_cause(calls[0].get("source") if calls else None, calls, "different collectives")


def _diagnose_hang(verdict: dict[str, Any], states: dict[int, dict[str, Any]]) -> dict[str, Any]:
    stuck = verdict.get("stuck_ranks") or []
    pending = None
    for rank in stuck:
        state = states.get(rank) or {}
        pending = state.get("pending") or (state.get("last_collectives") or [None])[-1]
        if pending:
            break
    source = pending.get("source") if pending else None
    partial = _params_with_partial_grads(states)
    if partial and pending and pending.get("phase") in ("backward", "step"):
        names = ", ".join(f"{n} (no gradient on ranks {r})" for n, r in partial[:4])
        return {"code": "DSL303", "fix": FIXES["DSL303"], "cause": f"gradients arrived on some ranks only: {names}"}
    return _control_flow_cause(source, [], "an extra collective" if verdict.get("cause") == "extra-collective"
                               else "a collective the other ranks never reach")


def _control_flow_cause(source: list[Any] | None, calls: list[dict[str, Any]], what: str) -> dict[str, Any]:
    text = source_text(source)
    where = f" at {source[0]}:{source[1]} `{text}`" if source else ""
    if ".generate(" in text or "generate(" in text:
        return {"code": "DSL104", "fix": FIXES["DSL104"], "cause": (
            f"{what}{where}: generate() stops at a per-rank length and its forwards are collective "
            "(ZeRO-3 parameter gathers / MoE all_to_all); without synced_gpus=True finished ranks stop joining")}
    control = enclosing_control(source)
    if control and control[0] == "if" and RANK_WORDS.search(control[1]):
        return {"code": "DSL101", "fix": FIXES["DSL101"],
                "cause": f"{what}{where} runs under the rank-dependent condition `{control[1]}`"}
    if control and control[0] == "loop":
        return {"code": "DSL102", "fix": FIXES["DSL102"], "cause": (
            f"{what}{where} runs in the loop over `{control[1]}`, whose trip count differs across ranks")}
    if control:
        return {"code": "DSL101", "fix": FIXES["DSL101"],
                "cause": f"{what}{where} runs under the condition `{control[1]}`, which differs across ranks"}
    return {"code": "DSL102", "fix": FIXES["DSL102"],
            "cause": f"{what}{where}: the ranks issue different numbers of collectives"}


def _params_with_partial_grads(states: dict[int, dict[str, Any]]) -> list[tuple[str, list[int]]]:
    seen = {r: set(s.get("grads_seen", [])) for r, s in states.items()}
    if not any(seen.values()):
        return []
    union = set().union(*seen.values())
    return [(name, [r for r in sorted(seen) if name not in seen[r]])
            for name in sorted(union) if any(name not in s for s in seen.values())]
