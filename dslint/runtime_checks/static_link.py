"""Static ↔ runtime (ISSUE 31 step 3): for each finding ``dslint check`` reports in the launched script, whether
the dry run reached its line and what happened there.

Rank 0 runs ``dslint check --format json`` on the launched script in a child process started with the run
(``StaticCheck``), and reads its JSON when it writes the report. A finding's line is the one it reports (not its trace's: a callee
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
WAIT_S = 20.0  # the report waits at most this long for the static check (started with the run)


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


class StaticCheck:
    """``dslint check --format json`` on the launched script, in a child process started with the run on rank 0:
    it runs beside the script's start-up (another core, no GIL shared with the ranks), and its JSON (the public
    output contract of ``dslint check``) is read when the report is written. The child is killed by its pid when
    the rank leaves, whatever the path."""

    def __init__(self, script: str) -> None:
        import subprocess
        import sys

        self.began = time.monotonic()
        self.proc: Any = None
        self.error: str | None = None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dslint", "check", "--format", "json", "--exit-zero", "--jobs", "1", script],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        except OSError as exc:
            self.error = str(exc)
        self._result: dict[str, Any] | None = None

    def result(self, wait_s: float) -> dict[str, Any]:
        """{"findings": [...], "seconds": s} or {"error": why}."""
        if self._result is not None:
            return self._result
        if self.proc is None:
            return {"error": self.error or "not started"}
        import json
        import subprocess

        try:
            out, _ = self.proc.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.stop()
            self._result = {"error": f"dslint check took longer than the report could wait ({wait_s:g} s)"}
            return self._result
        try:
            findings = json.loads(out).get("findings") or []
        except ValueError:
            self._result = {"error": f"dslint check gave no JSON (exit {self.proc.returncode})"}
            return self._result
        self._result = {"findings": findings, "seconds": round(time.monotonic() - self.began, 2)}
        return self._result

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=5)
            except Exception:
                pass


def start(script: str, rank: int) -> StaticCheck | None:
    if rank != 0 or os.environ.get("DSLINT_PREFLIGHT_STATIC", "1") == "0":
        return None
    return StaticCheck(script)


def link(check: StaticCheck | None, per_rank: dict[int, list[str]], on_verdict: set[str],
         wait_s: float = WAIT_S) -> dict[str, Any]:
    """The static findings of the launched script with what the dry run did at their lines (module doc)."""
    if check is None:
        return {}
    found = check.result(wait_s)
    if "error" in found:
        return found
    ran = {r: set(lines) for r, lines in per_rank.items()}
    rows = []
    for f in found["findings"]:
        keys = {_key(f["path"], f["line"])}  # its own line: a trace's callee (shared by other calls) would over-claim
        reached = sorted(r for r, lines in ran.items() if keys & lines)
        status = "confirmed" if keys & on_verdict else "executed" if reached else "not reached"
        rows.append({"code": f["code"], "severity": f.get("severity"), "path": f["path"], "line": f["line"],
                     "message": str(f.get("message", ""))[:300], "status": status, "ranks": reached})
    return {"findings": rows, "seconds": found["seconds"]}


STATUS_TEXT = {"confirmed": "CONFIRMED by this run", "executed": "executed, the ranks agreed there",
               "not reached": "not reached (no collective issued from it in this run)"}
