"""Static ↔ runtime (ISSUE 31 step 3): for each finding ``dslint check`` reports in the launched script, whether
the dry run reached its line and what happened there.

Rank 0 runs the static analysis in-process when it writes the report (the engine is imported lazily, through its
public ``Checker`` API only). A finding's line is the one it reports (not its trace's: a callee
shared with other calls would over-claim); the dry run's lines are the user frames of every collective each rank
issued (``DrySession.summary``'s ``lines``). A finding is
- ``confirmed``: its line is on the path of the verdict (a stuck rank's pending collective, a mismatching
  call, the divergence point);
- ``executed``: collectives were issued from its line, on the ranks listed, and the ranks agreed there;
- ``not reached``: no rank issued a collective from its line in the dry run (the line may still have
  run without issuing one).
``DSLINT_PREFLIGHT_STATIC=0`` turns this off.
"""

from __future__ import annotations

import os
import time
from typing import Any

MAX_LINES = 4000
FILE_BUDGET_S = 10.0


def lines_of(records: list[dict[str, Any]]) -> list[str]:
    """``path:line`` of every user frame of the recorded collectives (deduplicated, bounded)."""
    seen: dict[str, None] = {}
    for rec in records:
        for frame in rec.get("user_stack") or ():
            seen.setdefault(f"{os.path.realpath(frame[0])}:{frame[1]}", None)
            if len(seen) >= MAX_LINES:
                return list(seen)
    return list(seen)


def _key(path: str, line: int) -> str:
    return f"{os.path.realpath(path)}:{line}"


def verdict_lines(verdict: dict[str, Any] | None, states: dict[int, dict[str, Any]] | None) -> set[str]:
    """The lines on the verdict's path: the mismatching calls' stacks, the divergence point, and the pending
    collectives of the ranks it names as stuck."""
    found: set[str] = set()
    if not verdict:
        return found
    for call in verdict.get("calls") or []:
        for frame in call.get("user_stack") or []:
            found.add(_key(frame[0], frame[1]))
    point = (verdict.get("divergence") or {}).get("source")
    if point:
        found.add(_key(point[0], point[1]))
    for rank in verdict.get("stuck_ranks") or []:
        pending = ((states or {}).get(rank) or {}).get("pending") or {}
        for frame in pending.get("user_stack") or []:
            found.add(_key(frame[0], frame[1]))
    return found


def link(script: str | None, per_rank: dict[int, list[str]], on_verdict: set[str]) -> dict[str, Any]:
    """The static findings of ``script`` with what the dry run did at their lines (see the module's doc)."""
    if not script or os.environ.get("DSLINT_PREFLIGHT_STATIC", "1") == "0":
        return {}
    began = time.monotonic()
    try:
        from pathlib import Path

        from dslint.config import Settings
        from dslint.engine import Checker

        report = Checker(Settings(), jobs=1, file_timeout=FILE_BUDGET_S).check_paths([Path(script)])
    except Exception as exc:  # the report must not fail for the static side
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    ran = {r: set(lines) for r, lines in per_rank.items()}
    rows = []
    for f in report.findings:
        keys = {_key(f.path, f.line)}  # its own line: a trace's callee (shared by other calls) would over-claim
        reached = sorted(r for r, lines in ran.items() if keys & lines)
        status = "confirmed" if keys & on_verdict else "executed" if reached else "not reached"
        rows.append({"code": f.code, "severity": str(getattr(f.severity, "value", f.severity)), "path": f.path,
                     "line": f.line, "message": f.message[:300], "status": status, "ranks": reached})
    return {"findings": rows, "seconds": round(time.monotonic() - began, 2)}


STATUS_TEXT = {"confirmed": "CONFIRMED by this run", "executed": "executed, the ranks agreed there",
               "not reached": "not reached (no collective issued from it in this run)"}
