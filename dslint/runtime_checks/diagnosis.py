"""From an aborted dry step to a likely cause, the static rule that explains it, and the fix.

The pre-flight sees *where* ranks parted ways; the user's source around that line says *why*: a collective
under ``if rank == 0`` (DSL101), in a loop over a rank-sliced list (DSL102), in ``generate`` without
``synced_gpus`` (DSL104), MoE all_to_all sizes following the local token count (DSL204), a parameter
used only on some ranks' batches (DSL303).  The source is read with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from dslint.runtime_checks import waitfor

RANK_WORDS = re.compile(r"rank|is_main|main_process|world_process_zero|process_index", re.I)

FIXES = {
    "DSL101": "issue the collective on every rank (move it out of the rank condition; guard only the "
              "side effect such as printing or writing), or give the other ranks the same call",
    "DSL102": "give every rank the same number of iterations: pad the per-rank shard to the longest "
              "(DistributedSampler with drop_last/padding), or all-reduce the count and run dummy forwards",
    "DSL103": "decide the exit on every rank alike: all-reduce the stop condition (e.g. the loss or a flag) "
              "before testing it, so every rank breaks or returns at the same step",
    "DSL104": "call generate(..., synced_gpus=True) so finished ranks keep joining the per-token forwards",
    "DSL201": "wrap the model with deepspeed.initialize/init_inference so MoE layers get their expert groups",
    "DSL202": "build the optimizer from deepspeed.moe.utils.split_params_into_different_moe_groups_for_optimizer"
              "(param_groups) so expert parameters are in a group marked {'moe': True}",
    "DSL204": "pad every batch to one fixed length (padding='max_length'), or all-reduce the pad length to "
              "the maximum, or use top-k>=2 gating with drop_tokens=False",
    "DSL303": "use the parameter on every path (add `0 * param.sum()` to the loss), or set requires_grad=False",
}


source_text = waitfor.source_text
_tree = waitfor._tree     # one parse cache for the diagnosis and the wait-for analysis


def enclosing_controls(source: list[Any] | None) -> list[tuple[str, str]]:
    """("if", test) / ("loop", header) of the compound statements around the line, innermost first."""
    if not source:
        return []
    tree = _tree(source[0])
    if tree is None:
        return []
    line = source[1]
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.For, ast.While)):
            continue
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        if not node.lineno <= line <= end:
            continue
        if isinstance(node, ast.For):
            found.append((node.lineno, "loop", ast.unparse(node.iter)))
        elif isinstance(node, ast.While):
            found.append((node.lineno, "loop", ast.unparse(node.test)))
        else:
            found.append((node.lineno, "if", ast.unparse(node.test)))
    return [(kind, text) for _, kind, text in sorted(found, reverse=True)]


def diagnose(verdict: dict[str, Any], states: dict[int, dict[str, Any]]) -> dict[str, Any]:
    kind = verdict.get("kind")
    if verdict.get("diagnosis"):  # decided where it was observed (e.g. the loader audit, before any model ran)
        return dict(verdict["diagnosis"])
    if kind == "error":
        finding = verdict.get("finding")
        if finding:
            return {"code": finding["code"], "cause": finding["message"], "fix": FIXES.get(finding["code"], "")}
        return {"code": None, "cause": f"the script raised on rank {verdict.get('rank')}: "
                                       f"{verdict.get('exception')}", "fix": "fix the script's error"}
    moe_without_group = sorted({layer["module"] for s in states.values() for layer in s.get("moe_layers", [])
                                if layer.get("ep_group_ranks") is None and layer.get("all_to_all_groups")})
    observed = _observed(verdict)
    if observed is not None:
        result = observed
    elif kind == "divergence":
        result = _diagnose_divergence(verdict, states)
    else:
        result = _diagnose_hang(verdict, states)
    result.pop("weak", None)
    if moe_without_group and len(states) > 1:
        result["related"] = {"code": "DSL201", "message": (
            f"MoE layers without an expert-parallel group (all_to_all on WORLD): {', '.join(moe_without_group)}"),
            "fix": FIXES["DSL201"]}
    return result


DEAD_FIX = ("find out why the rank died: its own log and exit status (the launcher prints it), `dmesg` for the "
            "OOM killer (`Out of memory: Killed process <pid>`), the node's health; a rank that calls os._exit "
            "or sys.exit on its own leaves the others waiting")


def _observed(verdict: dict[str, Any]) -> dict[str, Any] | None:
    """A verdict that already carries what was observed: a dead rank, a termination, or the divergence point
    found by comparing the ranks' recorded stacks (the code follows from the mechanism found there)."""
    cause = verdict.get("cause")
    if cause == "dead-rank":
        return {"code": None, "cause": verdict.get("detail", "a rank died"), "fix": DEAD_FIX}
    if cause == "terminated":
        return {"code": None, "cause": verdict.get("detail", ""), "fix": "the launcher or the scheduler stopped "
                "the job: see why (another node's failure, a time limit, a cancelled job)"}
    point = verdict.get("divergence")
    if not point:
        if cause == "blocked-elsewhere":
            blocking = verdict.get("blocking") or {}
            return {"code": None, "fix": "see why that rank stopped there (a lock, I/O, an input it waits for, a "
                    "long computation); the others wait for it in a collective",
                    "cause": f"rank {blocking.get('rank')} is not in a collective: {blocking.get('where')}"}
        return None
    code = point.get("code")
    src = point.get("source") or [None, None]
    what = {"deadlock": "the ranks wait for each other in different collectives",
            "extra-collective": "a rank issues a collective that a finished rank never reaches",
            "blocked-elsewhere": "a rank waits in a collective while a peer is blocked outside any collective",
            }.get(cause or "", "the ranks issue different collectives at the same position")
    text = (f"{what}; their paths part at {src[0]}:{src[1]} `{point.get('text')}`: {point.get('why')}")
    if cause == "blocked-elsewhere":  # not a collective hazard: no rule code, the place and the Python line
        blocking = verdict.get("blocking") or {}
        return {"code": None, "source": src, "fix": "see why that rank stopped there (a lock, I/O, a file or "
                "input it waits for, a long computation); the others wait for it in a collective",
                "cause": f"rank {blocking.get('rank')} is not in a collective: it is in {blocking.get('where')}; "
                         + text}
    if code is None:
        return None if cause != "blocked-elsewhere" else {
            "code": None, "source": src, "cause": text,
            "fix": "see why that rank stopped there; the others wait for it in a collective"}
    return {"code": code, "source": src, "fix": FIXES.get(code, ""), "cause": text}


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
        bucket = _bucket_difference(calls)
        if bucket:  # gradient reductions: the reduced buckets hold different parameters
            return {"code": "DSL303", "fix": FIXES["DSL303"], "cause": (
                f"the gradient buckets reduced here hold different parameters: {bucket}; those parameters got "
                "a gradient on some ranks only")}
        if len(set(modules)) > 1:  # e.g. ZeRO-3 gathers follow the modules each rank actually runs
            return _branch_cause(calls)
        partial = _params_with_partial_grads(states)
        if partial:
            names = ", ".join(f"{n} (no gradient on ranks {r})" for n, r in partial[:4])
            return {"code": "DSL303", "fix": FIXES["DSL303"], "cause": (
                f"gradient reduction sizes differ because some trainable parameters got no gradient on some "
                f"ranks: {names}")}
        return {"code": None, "fix": "make the tensor sizes of this collective independent of per-rank data",
                "cause": f"the ranks pass differently sized tensors to the same {'/'.join(sorted(ops))}"}
    # different ops at the same sequence position: control flow differs
    return _control_flow_cause(calls[0].get("user_stack") if calls else None,
                               "the ranks issue different collectives at the same position")


def _bucket_difference(calls: list[dict[str, Any]]) -> str:
    """For gradient reductions attributed through their bucket's parameters: which ranks' buckets hold
    parameters the others' lack ("" when the calls carry no bucket contents or the buckets agree)."""
    buckets = {c["rank"]: set(c["params"]) for c in calls if c.get("params")}
    if len(buckets) < 2:
        return ""
    union = set().union(*buckets.values())
    parts = [f"rank {r}'s lacks {', '.join(sorted(union - names)[:6])}"
             for r, names in sorted(buckets.items()) if union - names]
    return "; ".join(parts)


def _branch_cause(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Ranks run different modules at the same point: find the branch in the user's code that decides."""
    where = "; ".join(f"rank {c['rank']} runs {c.get('module')}" for c in calls)
    for call in calls:
        for frame in call.get("user_stack") or []:
            for kind, text in enclosing_controls(frame):
                if kind != "if":
                    continue
                at = f"{frame[0]}:{frame[1]} `{source_text(frame)}`"
                if RANK_WORDS.search(text):
                    return {"code": "DSL101", "fix": FIXES["DSL101"], "source": frame,
                            "cause": f"{where}: {at} runs under the rank-dependent condition `{text}`"}
                return {"code": "DSL303", "fix": FIXES["DSL303"], "source": frame, "cause": (
                    f"{where}: {at} runs only when `{text}`, which depends on each rank's data; its parameters "
                    "are gathered (ZeRO-3) and get gradients (ZeRO-1/2) on some ranks only")}
    return {"code": None, "fix": "make the modules each rank runs independent of per-rank data",
            "cause": f"the ranks run different modules at the same collective: {where}"}


def _diagnose_hang(verdict: dict[str, Any], states: dict[int, dict[str, Any]]) -> dict[str, Any]:
    stuck = verdict.get("stuck_ranks") or []
    candidates = []  # the stuck ranks' pending (or last) collectives first
    for rank in stuck:
        state = states.get(rank) or {}
        found = state.get("pending") or (state.get("last_collectives") or [None])[-1]
        if found:
            candidates.append(found)
    if verdict.get("cause") == "timeout":
        # which rank times out first is a race (each waits --timeout from its own start): in a cross-group
        # wait the other ranks' pending collectives explain the hang as well, so they are read too
        candidates += [states[r]["pending"] for r in sorted(states)
                       if r not in stuck and (states[r] or {}).get("pending")]
    pending = candidates[0] if candidates else None
    issued = _issued_everywhere(verdict, pending, states)
    if issued:
        return issued
    partial = _params_with_partial_grads(states)
    if partial and pending and pending.get("phase") in ("backward", "step"):
        names = ", ".join(f"{n} (no gradient on ranks {r})" for n, r in partial[:4])
        return {"code": "DSL303", "fix": FIXES["DSL303"], "cause": f"gradients arrived on some ranks only: {names}"}
    what = "an extra collective" if verdict.get("cause") == "extra-collective" else \
        "a collective the other ranks never reach"
    causes = [_control_flow_cause(p.get("user_stack") or [p.get("source")], what) for p in candidates] or \
        [_control_flow_cause(None, what)]
    chosen = next((c for c in causes if not c.get("weak")), causes[0])
    chosen.pop("weak", None)
    return chosen


def _issued_everywhere(verdict: dict[str, Any], pending: dict[str, Any] | None,
                       states: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """A timed-out collective that every rank of its group has issued (the fingerprints agreed): not a
    control-flow divergence but a collective that does not complete. On CUDA the host returns at enqueue, so
    this is what a stream held up behind a long or stuck kernel, or a stalled NCCL transport, looks like."""
    if verdict.get("cause") != "timeout" or not pending or pending.get("p2p"):
        return None
    group, seq = pending.get("group"), pending.get("seq")
    members: list[int] = []
    for state in states.values():
        members = list((state.get("groups") or {}).get(group) or members)
    if not members or any(r not in states or (states[r].get("counts") or {}).get(group, 0) <= seq for r in members):
        return None
    where = "on the GPU stream" if pending.get("on_stream") or pending.get("async") else "inside the call"
    return {"code": None, "source": pending.get("source"), "fix": (
        "look at what runs before it on each rank's stream (a long or stuck kernel, a collective on another "
        "group that waits for it), raise --timeout if the step is simply slow; NCCL_DEBUG=INFO and PyTorch's "
        "flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) show the transport's side"),
        "cause": (f"all {len(members)} rank(s) of group {group} issued {pending.get('op')} #{seq} with matching "
                  f"fingerprints, but it did not complete {where} within the timeout: not a divergence of "
                  "the ranks' collective sequences")}


def _control_flow_cause(stack: list[Any] | None, what: str) -> dict[str, Any]:
    """Read the user frames (innermost first) for the reason the ranks' collective sequences part."""
    stack = [f for f in (stack or []) if f]

    def at(frame: list[Any]) -> str:
        return f" at {frame[0]}:{frame[1]} `{source_text(frame)}`"

    for frame in stack:
        if waitfor._is_library_generate(frame):  # observed: the frame called into a library generate()
            return {"code": "DSL104", "fix": FIXES["DSL104"], "source": frame, "cause": (
                f"{what}{at(frame)}: generate() stops at a per-rank length and its forwards are collective "
                "(ZeRO-3 parameter gathers / MoE all_to_all); without synced_gpus=True finished ranks stop joining")}
    controls = [(frame, kind, text) for frame in stack for kind, text in enclosing_controls(frame)]
    for frame, kind, text in controls:
        if kind == "if" and RANK_WORDS.search(text):
            return {"code": "DSL101", "fix": FIXES["DSL101"], "source": frame,
                    "cause": f"{what}{at(frame)} runs under the rank-dependent condition `{text}`"}
    for frame, kind, text in controls:
        if kind == "loop" and RANK_WORDS.search(text):
            return {"code": "DSL102", "fix": FIXES["DSL102"], "source": frame, "cause": (
                f"{what}{at(frame)} runs in the loop over `{text}`, whose trip count differs across ranks")}
    outer = stack[-1] if stack else None
    for frame, kind, text in reversed(controls):  # weak: guesses from the shape of the code alone
        if kind == "loop":
            return {"code": "DSL102", "fix": FIXES["DSL102"], "source": frame, "weak": True, "cause": (
                f"{what}{at(frame)} runs in the loop over `{text}`; its trip count seems to differ across ranks")}
    return {"code": "DSL102", "fix": FIXES["DSL102"], "source": outer, "weak": True,
            "cause": f"{what}{at(outer) if outer else ''}: the ranks issue different numbers of collectives"}


def _params_with_partial_grads(states: dict[int, dict[str, Any]]) -> list[tuple[str, list[int]]]:
    seen = {r: set(s.get("grads_seen", [])) for r, s in states.items()}
    if not any(seen.values()):
        return []
    union = set().union(*seen.values())
    return [(name, [r for r in sorted(seen) if name not in seen[r]])
            for name in sorted(union) if any(name not in s for s in seen.values())]
