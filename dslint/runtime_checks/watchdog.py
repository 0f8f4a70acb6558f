"""The watchdog thread: heartbeats, the wait-for monitor, dead ranks, signals, and the --timeout bound.

It wakes every ``HEARTBEAT_S`` on its own store connection and

* publishes this rank's heartbeat and position (``monitor.Heart``);
* on rank 0 (rank 1 if rank 0 is dead), runs the wait-for monitor (``monitor.Monitor``): a dead rank or a
  proven wait-for knot becomes a verdict within seconds;
* turns a collective of this rank pending longer than ``--timeout`` (sync: the main thread is inside it, or
  on CUDA its stream mark has not completed; async: its work is not completed) into a hang verdict — the
  bound for silent stalls that the wait-for analysis cannot prove;
* on SIGTERM/SIGHUP (the launcher terminating the ranks after one died: the deepspeed launcher and torchrun
  both do), looks for the dead rank and concludes *before* the process goes: the signal's C handler writes
  to a wakeup pipe this thread selects on, so it acts even while the main thread is blocked in C++;
* makes this rank publish its state and exit when any rank has published a verdict — also when its main
  thread is blocked inside a C++ collective, sleeping, or spinning in user code.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
import traceback

from dslint.runtime_checks import monitor, store_tree
from dslint.runtime_checks.dry_step import DrySession
from dslint.runtime_checks.peer_exchange import PeerExchange

POLL_S = monitor.HEARTBEAT_S
TERMINATING = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


class Watchdog(threading.Thread):
    def __init__(self, session: DrySession) -> None:
        super().__init__(name="dslint-preflight-watchdog", daemon=True)
        self.session = session
        self.peers: PeerExchange | None = None
        self.stopped = threading.Event()
        self.heart = monitor.Heart(session)
        self.monitor = monitor.Monitor(session, self.heart)
        self.signal_fd: int | None = None
        self.errors = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            signum = self._wait()
            if self.stopped.is_set():
                return
            try:
                if signum is not None:
                    self.on_signal(signum)
                self.tick()
            except Exception:  # never let the watchdog die silently while the run may hang
                self.errors += 1
                if self.errors == 1:  # once: a store that went away with its host fails every tick
                    traceback.print_exc()

    def _wait(self) -> int | None:
        if self.signal_fd is None:
            self.stopped.wait(POLL_S)
            return None
        ready, _, _ = select.select([self.signal_fd], [], [], POLL_S)
        if not ready:
            return None
        try:
            data = os.read(self.signal_fd, 64)
        except OSError:
            return None
        return next((b for b in data if b in TERMINATING), None)

    def tick(self) -> None:
        session = self.session
        if session.status == "aborting":
            return
        if self.peers is None:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                return
            self.peers = PeerExchange.connect(dist.get_rank(), dist.get_world_size(), session.run_id)
            # a store host of the tree of stores starts its server now: its ranks may need it before this rank
            # makes its first check
            store_tree.host_if_leader(self.peers.store, dist.get_rank(), dist.get_world_size(), session.run_id)
        verdict = self.peers.aborted()
        if verdict is not None:
            session.conclude(verdict, self.peers)
        if session.tracer.mode == "dry" and session.status in ("running", "done"):
            self.heart.beat(self.peers)
            found = self.monitor.tick(self.peers)
            if found is not None:
                session.conclude(self.peers.abort(found), self.peers)
        session.tracer.bind_thread_device()  # before querying CUDA events from this thread
        stuck = session.tracer.stuck_collective(time.monotonic(), session.options.timeout)
        if stuck is not None:
            session.conclude(self.peers.abort({
                "kind": "hang", "cause": "timeout", "stuck_ranks": [session.rank],
                "group": stuck["group"], "seq": stuck["seq"],
                "detail": (f"rank {session.rank}: {stuck['op']} #{stuck['seq']} in group {stuck['group']} did not "
                           f"complete within {session.options.timeout:g} s"),
                "detected_by": session.rank,
            }), self.peers)

    def on_signal(self, signum: int) -> None:
        """The launcher is terminating this rank (after another rank died, or the job was cancelled): find
        the dead rank and conclude now, so the report is written before the processes go."""
        session = self.session
        if session.status not in ("running", "done") or self.peers is None:
            session.exit_for_signal(signum)
            return
        name = TERMINATING.get(signum, f"signal {signum}")
        verdict = None
        try:
            beats = self.monitor._read(self.peers, list(range(session.world_size)))
            dead = self.monitor._dead(beats, time.monotonic(), self.peers)
            if dead:
                verdict = monitor.dead_verdict(dead, beats, session.rank)
                verdict["detail"] += f" (rank {session.rank} then got {name} from the launcher)"
        except Exception:  # the store may have died with the rank that hosted it
            traceback.print_exc()
        if verdict is None:
            verdict = {"kind": "hang", "cause": "terminated", "stuck_ranks": [session.rank], "signal": name,
                       "detail": f"rank {session.rank} received {name} during its dry step (no dead rank seen)",
                       "detected_by": session.rank}
        try:
            verdict = self.peers.abort(verdict)
        except Exception:
            traceback.print_exc()
        session.conclude(verdict, self.peers)

    def stop(self, wait_s: float = 2.0) -> None:
        """Stop watching; from another thread, wait (bounded) for a tick in progress to end, so that the process
        does not go on to exit with this thread inside a store call of torch's C++ (`with guard(...)` lets the
        script run on and end as it will)."""
        self.stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(wait_s)
