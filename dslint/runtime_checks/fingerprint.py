"""Collective fingerprints and the cross-rank compatibility rule.

A fingerprint is what peers must agree on *before* a collective is issued: op, reduce op, root, and the
sizes each rank sends to / receives from every peer.  On gloo a size mismatch aborts the receiving process
from a C++ thread (SIGABRT) and on NCCL it may hang or corrupt silently, so the comparison has to happen
through the rendezvous store first.  Pure data: no torch import, so the rule is testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# ops whose per-peer element counts are explicit (split sizes); everything else must agree on `sym`
PAIRWISE_OPS = frozenset({"all_to_all_single", "all_to_all"})
POINT_TO_POINT_OPS = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})


@dataclass(frozen=True)
class Mismatch:
    """Why the group's ranks cannot issue this collective together."""

    kind: str  # "op" (different collectives at the same sequence number) or "size"
    detail: str


def describe(fp: dict[str, Any]) -> str:
    """One-line human form: ``all_to_all_single in=[2, 8, 16] float32 splits=None``."""
    parts = [fp["op"]]
    if fp.get("ins"):
        parts.append("in=" + ", ".join(f"{list(s)} {d}" for s, d in fp["ins"]))
    if fp.get("outs"):
        parts.append("out=" + ", ".join(f"{list(s)} {d}" for s, d in fp["outs"]))
    if fp.get("splits") is not None:
        parts.append(f"splits={fp['splits']}")
    if fp.get("root") is not None:
        parts.append(f"root={fp['root']}")
    return " ".join(parts)


def check_group(fps: list[dict[str, Any]]) -> Mismatch | None:
    """Compare the fingerprints of one collective, one per group rank (index = rank in the group)."""
    first = fps[0]
    for fp in fps[1:]:
        if fp["op"] != first["op"]:
            return Mismatch("op", "different collectives at the same position in the group's sequence")
        if fp.get("rop") != first.get("rop") or fp.get("root") != first.get("root"):
            return Mismatch("op", "same collective with a different reduce op or root")
    if first["op"] in POINT_TO_POINT_OPS:
        return None
    dtypes = {d for fp in fps for _, d in (fp.get("ins") or []) + (fp.get("outs") or [])}
    if len(dtypes) > 1:
        return Mismatch("size", f"dtypes differ across ranks: {sorted(dtypes)}")
    if first["op"] in PAIRWISE_OPS:
        # rank i sends send[i][j] elements to rank j, which must expect exactly that many from i
        n = len(fps)
        for i in range(n):
            for j in range(n):
                sent, expected = fps[i]["send"][j], fps[j]["recv"][i]
                if sent != expected:
                    return Mismatch(
                        "size",
                        f"group rank {i} sends {sent} elements to group rank {j}, which expects {expected}",
                    )
        return None
    if any(fp.get("sym") != first.get("sym") for fp in fps):
        return Mismatch("size", "tensor sizes differ across ranks")
    return None
