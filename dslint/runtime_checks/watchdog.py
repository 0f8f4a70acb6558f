"""The watchdog thread: turns a collective that never completes into a report and an exit.

It polls every half second, on its own store connection: a collective of this rank pending longer than
``--timeout`` (sync: the main thread is inside it, or on CUDA its stream mark has not completed; async: its
work is not completed) publishes a hang
verdict; a verdict published by any rank makes this rank publish its state and exit — also when the main
thread is blocked inside a C++ collective, sleeping, or spinning in user code.
"""

from __future__ import annotations

import threading
import time
import traceback

from dslint.runtime_checks.dry_step import DrySession
from dslint.runtime_checks.peer_exchange import PeerExchange

POLL_S = 0.5


class Watchdog(threading.Thread):
    def __init__(self, session: DrySession) -> None:
        super().__init__(name="dslint-preflight-watchdog", daemon=True)
        self.session = session
        self.peers: PeerExchange | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(POLL_S):
            try:
                self.tick()
            except Exception:  # never let the watchdog die silently while the run may hang
                traceback.print_exc()

    def tick(self) -> None:
        session = self.session
        if session.status == "aborting":
            return
        if self.peers is None:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                return
            self.peers = PeerExchange.connect(dist.get_rank(), dist.get_world_size(), session.run_id)
        verdict = self.peers.aborted()
        if verdict is not None:
            session.conclude(verdict, self.peers)
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

    def stop(self) -> None:
        self.stopped.set()
