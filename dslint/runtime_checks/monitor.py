"""Heartbeats, the wait-for monitor, and dead ranks (driven by each rank's watchdog thread).

Every rank's watchdog publishes ``hb/<rank>`` every ``HEARTBEAT_S``: a beat counter, host and pid, and the
rank's *position* (``DrySession.position``: the collective its main thread is held in or inside, with group,
sequence number, op, fingerprint token and user stack; or, outside any collective, its Python stack and for
how long that stack has not moved; or "fin" with its per-group counts), plus its last collective.

Rank 0's watchdog (rank 1's when rank 0 is dead) is the monitor: it reads all heartbeats over its own store
connection and

* declares a rank **dead** when its process is gone or a zombie (same host: checked by pid, the zombie's exit
  status gives the signal), when it left through ``os._exit`` (the exit hook publishes ``exit/<rank>``), or
  when its heartbeat has not advanced for ``DEAD_AFTER_S`` (another host, or a frozen process);
* runs the wait-for analysis (``waitfor.analyse``) and, once the same ranks are found stuck in two
  consecutive snapshots, publishes the verdict with the divergence point — seconds after the last rank
  blocks, not after ``--timeout``.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

from dslint.runtime_checks import waitfor

HEARTBEAT_S = 0.25
SETTLE_S = 1.0  # a rank counts as blocked after this long in one collective
DEAD_AFTER_S = 3.0  # a heartbeat that has not advanced for this long (monitor's clock): the rank stopped
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 7: "SIGBUS"}
NO_HOOK = ("no exit hook ran: killed by a signal that cannot be caught (SIGKILL: kill -9, the OOM killer) "
           "or a hard crash")


def stall_after(timeout: float) -> float:
    """A rank outside any collective whose Python stack has not moved this long counts as blocked there
    (while a peer waits for it in a collective). Not a proof — one long C call (a checkpoint read, a JIT
    build) looks the same — hence half the timeout, and at most 30 s."""
    return max(1.5, min(30.0, timeout / 2))


def process_status(pid: int) -> tuple[bool, str | None]:
    """(alive, how it ended) of a process on this host: a zombie's exit status is still readable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return False, None
    if fields and fields[0] in ("Z", "X"):
        how = None
        if len(fields) >= 50:
            status = int(fields[-1])
            how = f"killed by {SIGNALS.get(status & 0x7F, f'signal {status & 0x7F}')}" if status & 0x7F \
                else f"exited with code {status >> 8}"
        return False, how
    return True, None


class Heart:
    """This rank's side: the heartbeat and the Python position of its main thread."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.n = 0
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.main_ident = threading.main_thread().ident
        self._sig: tuple[Any, ...] | None = None
        self._sig_since = time.monotonic()

    def position(self, now: float) -> dict[str, Any]:
        pos = self.session.position(now)
        if pos["state"] != "py":
            self._sig = None
            return pos
        frame = sys._current_frames().get(self.main_ident)
        sig: list[Any] = []
        f = frame
        while f is not None and len(sig) < 64:
            sig.append((id(f), f.f_lasti))
            f = f.f_back
        signature = tuple(sig)
        if signature != self._sig:
            self._sig, self._sig_since = signature, now
        stack = self.session.context.user_frames(frame=frame, limit=12) if frame is not None else []
        pos.update(stack=[list(x) for x in stack], **{"for": round(now - self._sig_since, 3)})
        return pos

    def beat(self, peers: Any) -> None:
        now = time.monotonic()
        records = self.session.tracer.records
        last = records[-1] if records else None
        peers.put(f"hb/{self.session.rank}", {
            "n": self.n, "host": self.host, "pid": self.pid, "status": self.session.status,
            "scratch": getattr(self.session, "_scratch", None),
            "pos": self.position(now),
            "last": {k: last.get(k) for k in ("op", "group", "seq", "user_stack", "module", "phase")} if last else None,
        })
        self.n += 1


class Monitor:
    def __init__(self, session: Any, heart: Heart) -> None:
        self.session = session
        self.heart = heart
        self.present: dict[int, str] = {}
        self.seen: dict[int, tuple[int, float]] = {}  # rank -> (beat counter, when it last advanced)
        self.last_beats: dict[int, dict[str, Any]] = {}
        self.previous: tuple[Any, ...] | None = None
        self.exits_seen = 0

    def acting(self, peers: Any) -> bool:
        """Rank 0 monitors; rank 1 takes over when rank 0's heartbeat stops or its process is gone."""
        rank = self.session.rank
        if rank == 0:
            return True
        if rank != 1 or self.session.world_size < 2:
            return False
        beats = self._read(peers, [0])
        if 0 not in beats:
            return False
        return bool(self._dead(beats, time.monotonic()).get(0))

    def _read(self, peers: Any, ranks: list[int]) -> dict[int, dict[str, Any]]:
        missing = [r for r in ranks if r not in self.present]
        for r in missing:
            if peers.has(f"hb/{r}"):
                self.present[r] = f"hb/{r}"
        found = [r for r in ranks if r in self.present]
        if not found:
            return {}
        beats = dict(zip(found, peers.get_many([self.present[r] for r in found])))
        now = time.monotonic()
        for r, beat in beats.items():
            if self.seen.get(r, (None,))[0] != beat["n"]:
                self.seen[r] = (beat["n"], now)
            self.last_beats[r] = beat
        self.session.peer_beats = self.last_beats  # what this rank last knew of its peers (if the store goes)
        return beats

    def _dead(self, beats: dict[int, dict[str, Any]], now: float, peers: Any = None) -> dict[int, dict[str, Any]]:
        dead: dict[int, dict[str, Any]] = {}
        exits: dict[int, Any] = {}
        if peers is not None:
            count = peers.add("exits", 0)
            if count > self.exits_seen:
                exits = {r: peers.get(f"exit/{r}") for r in beats if peers.has(f"exit/{r}")}
        for r, beat in beats.items():
            if r == self.session.rank or beat.get("status") in ("passed", "aborting"):
                continue
            how = None
            if r in exits:
                how = f"left through {exits[r].get('how')}({exits[r].get('code')}) outside the pre-flight's exit path"
            elif beat.get("host") == self.heart.host:
                alive, ended = process_status(int(beat["pid"]))
                if not alive:
                    how = ended or NO_HOOK
            if how is None and now - self.seen.get(r, (None, now))[1] >= DEAD_AFTER_S:
                how = f"stopped heart-beating {now - self.seen[r][1]:.1f} s ago (process frozen, or on another host)"
            if how is not None:
                dead[r] = {"how": how, "host": beat.get("host"), "pid": beat.get("pid"), "scratch": beat.get("scratch"),
                           "pos": beat.get("pos"), "last": beat.get("last")}
        return dead

    def tick(self, peers: Any) -> dict[str, Any] | None:
        session = self.session
        if session.status not in ("running", "done") or getattr(session, "leaving", False):
            return None
        # the monitor reads every heartbeat: at large world sizes it reads less often (every 128 ranks add a
        # heartbeat period), keeping its store traffic near 128 x 4 reads per second
        if self.heart.n % max(1, session.world_size // 128) or not self.acting(peers):
            return None
        now = time.monotonic()
        beats = self._read(peers, list(range(session.world_size)))
        beats[session.rank] = {"n": self.heart.n, "host": self.heart.host, "pid": self.heart.pid,
                               "status": session.status, "pos": self.heart.position(now)}  # fresher than its beat
        session.local_live = sorted(r for r, b in beats.items() if b.get("host") == self.heart.host)
        dead = self._dead(beats, now, peers)
        if dead:
            return dead_verdict(dead, beats, session.rank)
        found = waitfor.analyse(beats, SETTLE_S, stall_after(session.options.timeout))
        key = (tuple(found["stuck_ranks"]), found["cause"], str(found["waits"])) if found else None
        stable = key is not None and key == self.previous
        self.previous = key
        if stable and found is not None:
            found["detected_by"] = session.rank
            return found
        return None


def dead_verdict(dead: dict[int, dict[str, Any]], beats: dict[int, dict[str, Any]], me: int) -> dict[str, Any]:
    waiting = sorted(r for r, b in beats.items() if r not in dead
                     and (b.get("pos") or {}).get("state") in waitfor.BLOCKED_STATES)
    parts = []
    for r, info in sorted(dead.items()):
        pos = info.get("pos") or {}
        last = info.get("last") or {}
        if pos.get("state") in waitfor.BLOCKED_STATES:
            where = f"in {pos.get('op')} #{pos.get('seq')} of group {pos.get('group')}"
            stack = pos.get("stack")
        elif pos.get("state") == "py":
            where = "outside any collective"
            stack = pos.get("stack")
        else:
            where = "after its dry step" if pos.get("state") == "fin" else ""
            stack = last.get("user_stack")
        top = (stack or [None])[0]
        at = f" at {top[0]}:{top[1]} `{waitfor.source_text(top)}`" if top else ""
        if last:
            where += f" (last collective: {last.get('op')} #{last.get('seq')} of group {last.get('group')})"
        info["stack"] = stack
        parts.append(f"rank {r} died ({info['how']}) {where}{at}".replace("  ", " "))
    return {"kind": "hang", "cause": "dead-rank", "dead_ranks": sorted(dead), "stuck_ranks": waiting,
            "dead": {str(r): info for r, info in dead.items()},
            "detail": "; ".join(parts) + (f"; ranks {waiting} wait for it in collectives that cannot complete"
                                          if waiting else ""),
            "detected_by": me}
