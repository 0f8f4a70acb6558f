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


# ---- the O(1) pre-issue check: one token per rank instead of every peer's fingerprint ---------------------
# Every rank of the group must publish the same token (compare-and-set against the first one published), and
# for all_to_all the ranks' *shares* must sum to zero modulo SHARE_MODULUS: rank i's share is
# sum_j w(i, j) * send_i[j] - sum_j w(j, i) * recv_i[j], so the sum over the group is
# sum_ij w(i, j) * (send_i[j] - recv_j[i]), zero when every send matches its receive (a mismatch cancels
# with probability ~1 / SHARE_MODULUS). Only on a mismatch are the full fingerprints exchanged (``check_group``).
SHARE_MODULUS = 2**31 - 1


_TOKENS: dict[str, str] = {}  # the tokens of the fingerprints seen (a training step repeats a few hundred)


def check_token(fp: dict[str, Any]) -> str:
    """What every rank of the group must agree on, hashed: op, reduce op, root, dtypes, and the sizes of
    the ops whose sizes must be equal on every rank. Memoised on the fields' repr (a finer key than the
    hashed JSON: equal keys give equal tokens), which costs a few µs where JSON and blake2b cost ~30."""
    dtypes = sorted({d for _, d in (fp.get("ins") or []) + (fp.get("outs") or [])})
    sizes = None if fp["op"] in PAIRWISE_OPS else fp.get("sym")
    fields = [fp["op"], fp.get("rop"), fp.get("root"), dtypes, sizes]
    key = repr(fields)
    token = _TOKENS.get(key)
    if token is None:
        import hashlib
        import json

        if len(_TOKENS) >= 4096:
            _TOKENS.clear()
        body = json.dumps(fields, default=str)
        token = _TOKENS[key] = hashlib.blake2b(body.encode(), digest_size=8).hexdigest()
    return token


def fold(token: str, size: int) -> tuple[int, int, int]:
    """The value a rank adds to the group's counter: 1 in the low bits (the arrival) and its token, cut to
    what fits, in the high bits; with the mask of the count bits and the token's shift. The sum of ``size``
    values fits in the store's int64 counter."""
    width = size.bit_length()
    shift = width + 1
    token_bits = max(8, 62 - shift - width)
    return 1 + ((int(token, 16) & ((1 << token_bits) - 1)) << shift), (1 << shift) - 1, shift


def _weight(i: int, j: int, seq: int) -> int:
    x = (i * 0x9E3779B1 + j * 0x85EBCA77 + seq * 0xC2B2AE3D + 0x27D4EB2F) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 29
    x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 32
    return x % SHARE_MODULUS or 1


def pairwise_share(fp: dict[str, Any], index: int, size: int, seq: int) -> int | None:
    """This rank's share of the all_to_all balance (None: not a pairwise op, or counts that are not whole)."""
    if fp["op"] not in PAIRWISE_OPS:
        return None
    send, recv = fp.get("send") or [], fp.get("recv") or []
    if len(send) != size or len(recv) != size or not all(isinstance(c, int) for c in send + recv):
        return None
    total = 0
    for j in range(size):
        total += _weight(index, j, seq) * send[j] - _weight(j, index, seq) * recv[j]
    return total % SHARE_MODULUS
