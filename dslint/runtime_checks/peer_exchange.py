"""Talking to the other ranks through the rendezvous store, never through a collective.

Keys (under ``dslint-preflight/<run id>/``; the CLI's run id is ``cli``, each ``guard()`` has its own):
  ``fp/<group>/<seq>/<group rank>``  a collective's fingerprint, published before it is issued
  ``fin/<rank>``                     the rank's summary once its dry step is over (or its script failed)
  ``abort`` / ``abort_n``            the first verdict (divergence / hang / error) and how many tried to set it
  ``state/<rank>``                   what the rank was doing when the run was aborted
  ``report_done``, ``read``          exit ordering: the store lives in rank 0 (or the launcher's agent)
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

PREFIX = "dslint-preflight/"
POLL_S = 0.2


class PeerExchange:
    def __init__(self, store: Any, rank: int, world_size: int) -> None:
        self.store = store
        self.rank = rank
        self.world_size = world_size

    @classmethod
    def connect(cls, rank: int, world_size: int, run_id: str = "cli", own_connection: bool = True) -> "PeerExchange":
        """A client on the default process group's store; a separate TCP connection when possible, so a
        blocking wait in one thread does not delay the watchdog in another."""
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        store = c10d._get_default_store()
        if own_connection:
            raw = store
            while isinstance(raw, dist.PrefixStore):
                raw = raw.underlying_store
            if isinstance(raw, dist.TCPStore):
                try:
                    store = dist.TCPStore(
                        raw.host, raw.port, is_master=False, timeout=timedelta(seconds=30), wait_for_workers=False
                    )
                except Exception:  # fall back to the shared client; correctness does not depend on it
                    pass
        return cls(dist.PrefixStore(f"{PREFIX}{run_id}/", store), rank, world_size)

    # ---- primitives ---------------------------------------------------------------------------------
    def put(self, key: str, value: Any) -> None:
        self.store.set(key, json.dumps(value, default=str))

    def get(self, key: str) -> Any:
        return json.loads(self.store.get(key))

    def has(self, key: str) -> bool:
        return self.store.check([key])

    def wait_keys(self, keys: list[str], poll_s: float = POLL_S) -> bool:
        """Wait up to ``poll_s`` for all keys; False on timeout.

        Polls with ``check`` and a short backoff instead of ``Store.wait(timeout)``: a timed-out wait makes
        the C++ client log a warning each time, and peers in step usually arrive within a millisecond."""
        check = self.store.check
        if check(keys):
            return True
        end = time.monotonic() + poll_s
        pause = 0.0002
        while time.monotonic() < end:
            time.sleep(pause)
            if check(keys):
                return True
            pause = min(pause * 2, 0.02)
        return False

    def get_many(self, keys: list[str]) -> list[Any]:
        return [json.loads(v) for v in self.store.multi_get(keys)]

    # ---- verdicts -----------------------------------------------------------------------------------
    def abort(self, verdict: dict[str, Any]) -> dict[str, Any]:
        """Publish ``verdict`` unless another rank was first; return the verdict that stands."""
        if self.store.add("abort_n", 1) == 1:
            self.put("abort", verdict)
            return verdict
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.wait_keys(["abort"]):
                return self.get("abort")
        return verdict

    def aborted(self) -> dict[str, Any] | None:
        if self.has("abort"):
            return self.get("abort")
        return None

    def add(self, key: str, n: int = 1) -> int:
        return self.store.add(key, n)
