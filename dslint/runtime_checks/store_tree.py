"""A tree of stores for the pre-issue check at large world sizes (issue 21, "Scale").

The flat check (``DrySession.before_issue``) makes O(1) store operations per rank, but all of them go to the
one rendezvous store, which then serves O(N) operations per collective one after the other. Here the ranks
are the leaves of a tree of stores with fan-out F (``DSLINT_PREFLIGHT_TREE_FANOUT``, default 16):

* the node of level k holding rank r is ``r // F**k``, hosted by rank ``(r // F**k) * F**k + F**(k-1) - 1``
  (``host_of``: a leaf by its first rank, its parent by that leaf's last rank, ...: no process hosts two levels);
* a hosting rank starts a store server (a ``TCPStore`` master in its own process, port chosen by the system)
  and publishes its address in the rendezvous store (``tree/addr/<rank>``) as soon as torch.distributed is
  initialised (the watchdog's first tick, or the first check);
* for a collective of a group with ranks R, a rank ``add``s its folded token (``fingerprint.fold``: arrival
  count in the low bits, token in the high bits) to the counter of its lowest node that holds more than one
  of R's subtrees (levels where it is alone are skipped); the last arrival at a node checks the node's sum
  (every child's token equal to its own) and forwards one folded value to the node above -- poisoned (one
  token bit flipped) when the node disagreed; all_to_all's send/receive *shares* are summed per node and the
  sum forwarded the same way;
* the last arrival at the group's top node (the lowest node holding all of R) decides: it sets the verdict
  ``v`` (1 agreed, 2 disagreed) there, then at every node below where it was the last arrival; a rank that
  was not the last at a node waits for ``v`` there (polling ``add(v, 0)`` first, then a store-side wait on
  ``w``, as the flat check does) and passes it down the nodes below it where it forwarded.

So every store serves at most F clients' operations per collective, and a rank makes O(1) operations on
agreement (O(levels) for the ranks that happen to arrive last). On disagreement the caller compares the full
fingerprints through the rendezvous store, as the flat check does. A store host that dies makes the
operations on its store fail: ``StoreLost`` names the host rank, and the caller looks for the dead rank.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any, Callable

from dslint.runtime_checks.fingerprint import SHARE_MODULUS, fold

TREE_ENV = "DSLINT_PREFLIGHT_TREE"  # auto (default): tree from AUTO_FROM ranks; 1/on/tree: always; 0/off/flat
FANOUT_ENV = "DSLINT_PREFLIGHT_TREE_FANOUT"
AUTO_FROM = 32
DEFAULT_FANOUT = 16
ADDR_KEY = "tree/addr/"
POLL_FIRST_S = 0.05  # the checks poll this long, then wait on the store's side: peers in step arrive within a ms
# The polls' backoff (the tree's and the flat check's, dslint.runtime_checks.dry_step): 50 µs doubling to
# POLL_MAX_S while the wait is young, to POLL_SLOW_MAX_S after POLL_TIGHT_S. The check holds every rank until the
# last arrives and a waiter leaves only at its next poll, so the pause is what the check adds after the last
# arrival: with a 2 ms cap from the start, a rank that waited 0.8 ms polled at 0.05, 0.15, 0.35, 0.75 and 1.55 ms
# and left 0.75 ms late. A verdict of the tree also crosses several stores, each waiter adding its pause. Past
# POLL_TIGHT_S the peers are out of step (a slow step, a late rank): polling every 0.1 ms for the rest of
# POLL_FIRST_S would cost ~500 store round trips per collective and rank; 2 ms then adds at most that to a wait
# already 2 ms long. Simulated (bench/bench_check.py, service and latency probed on a 16-core machine) at 4,096
# ranks through the tree, arrivals at once / spread over 1 ms, slowest rank: a 0.2 ms cap gave 1.02 / 0.90 ms,
# 0.1 ms 0.89 / 0.72 ms.
POLL_START_S = 0.00005
POLL_MAX_S = 0.0001
POLL_TIGHT_S = 0.002
POLL_SLOW_MAX_S = 0.002


def next_pause(pause: float, waited: float) -> float:
    """The next pause of a check's polling, after ``pause``, ``waited`` seconds into the wait."""
    return min(pause * 2, POLL_MAX_S if waited < POLL_TIGHT_S else POLL_SLOW_MAX_S)


AGREED, DISAGREED = 1, 2


def selected(world_size: int, env: dict[str, str] | None = None) -> bool:
    """Is the tree used at this world size? ``DSLINT_PREFLIGHT_TREE``: auto (default: from 32 ranks on),
    on/1/tree (always, for tests at a few ranks), off/0/flat (never)."""
    mode = (env if env is not None else os.environ).get(TREE_ENV, "auto").strip().lower()
    if world_size < 2 or mode in ("0", "off", "flat", "no", "false"):
        return False
    if mode in ("1", "on", "tree", "yes", "true"):
        return True
    return world_size >= AUTO_FROM


def fanout(env: dict[str, str] | None = None) -> int:
    try:
        value = int((env if env is not None else os.environ).get(FANOUT_ENV, DEFAULT_FANOUT))
    except ValueError:
        value = DEFAULT_FANOUT
    return max(2, value)


def host_of(level: int, node: int, f: int) -> int:
    """The rank hosting node ``node`` of ``level``: the last rank of the node's first child (the leaf's first
    rank; for its parent, the leaf's last rank; ...), so that no process hosts two levels (the first rank
    would otherwise serve a leaf, its parent and the root: ~3F clients on one server)."""
    return node * f**level + f ** (level - 1) - 1


def hosted_level(rank: int, world_size: int, f: int) -> int | None:
    """The level whose nodes this rank hosts, if any (each rank hosts at most one)."""
    level, span = 1, f
    while span // f < world_size:  # level k exists while F**(k-1) < world size
        if rank % span == span // f - 1:
            return level
        level, span = level + 1, span * f
    return None


def path_of(rank: int, ranks: tuple[int, ...] | list[int] | range, f: int) -> list[tuple[int, int, int]]:
    """This rank's nodes for a group with ``ranks``: (level, host rank, expected arrivals), bottom-up, only the
    levels where more than one of the group's subtrees meet; the last entry is the group's top node. A node
    with two children holding members spans ranks past its first F**(level-1), so its host rank exists."""
    members = sorted(set(ranks))
    path = []
    level, span = 0, 1
    while members[0] // span != members[-1] // span:
        below, level, span = span, level + 1, span * f
        node = rank // span
        children = {x // below for x in members if x // span == node}
        if len(children) > 1:
            path.append((level, host_of(level, node, f), len(children)))
    return path


def own_address() -> str:
    """The address the other ranks reach this process at: the interface that routes to the rendezvous host."""
    master = os.environ.get("MASTER_ADDR") or "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((master, 9))  # no packet is sent: this only picks the route
            return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


class StoreLost(Exception):
    """An operation on the store hosted by ``host`` failed: that rank's process is gone (or unreachable)."""

    def __init__(self, host: int, error: BaseException) -> None:
        super().__init__(f"the pre-flight store hosted by rank {host} failed: {error}")
        self.host, self.error = host, error


class AddressMissing(Exception):
    """The store host never published its address (it died, or never initialised torch.distributed)."""

    def __init__(self, host: int) -> None:
        super().__init__(f"rank {host} never published the address of the pre-flight store it hosts")
        self.host = host


# ---- hosting (one server per process, whatever the run id) -------------------------------------------------
_hosting_lock = threading.Lock()
_server: Any = None
_published: set[str] = set()  # the run ids whose namespace holds this process's address


def host_if_leader(main_store: Any, rank: int, world_size: int, run_id: str, f: int | None = None,
                   force: bool = False) -> None:
    """Start this process's store server (a rank that hosts a node) and publish its address; idempotent, any thread.
    ``f``/``force``: the fan-out, and hosting whatever the selection says (the bench)."""
    global _server
    if not (force or selected(world_size)) or hosted_level(rank, world_size, f or fanout()) is None:
        return
    with _hosting_lock:
        if run_id in _published:
            return
        import torch.distributed as dist

        if _server is None:
            _server = dist.TCPStore("0.0.0.0", 0, is_master=True, wait_for_workers=False,
                                    timeout=timedelta(seconds=30))
        main_store.set(f"{ADDR_KEY}{rank}", f"{own_address()}:{_server.port}")
        _published.add(run_id)


class StoreTree:
    """One rank's side of the tree: clients of the stores on its paths (connected on first use; one per host,
    at most one per level)."""

    def __init__(self, main_store: Any, rank: int, world_size: int, run_id: str, f: int | None = None) -> None:
        self.main_store = main_store  # the run's PrefixStore on the rendezvous store
        self.rank, self.world_size, self.run_id = rank, world_size, run_id
        self.fanout = f or fanout()
        self._clients: dict[int, Any] = {}
        self._paths: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}
        self.ops = 0  # store operations on the tree's stores (for the bench)
        self.fast_taken = False  # the last ``agree`` returned on the fast path

    def path(self, ranks: tuple[int, ...]) -> list[tuple[int, int, int]]:
        found = self._paths.get(ranks)
        if found is None:
            found = self._paths[ranks] = path_of(self.rank, ranks, self.fanout)
        return found

    def client(self, host: int, deadline: float, on_wait: Callable[[], None]) -> Any:
        store = self._clients.get(host)
        if store is not None:
            return store
        import torch.distributed as dist

        if host == self.rank and _server is not None:
            raw = _server
        else:
            key = f"{ADDR_KEY}{host}"
            pause = 0.001
            while not self.main_store.check([key]):
                if time.monotonic() > deadline:
                    raise AddressMissing(host)
                on_wait()
                time.sleep(pause)
                pause = min(pause * 2, 0.1)
            address = self.main_store.get(key).decode()
            ip, _, port = address.rpartition(":")
            try:
                raw = dist.TCPStore(ip, int(port), is_master=False, wait_for_workers=False,
                                    timeout=timedelta(seconds=30))
            except Exception as exc:
                raise StoreLost(host, exc) from exc
        store = self._clients[host] = dist.PrefixStore(f"dslint-preflight/{self.run_id}/tree/", raw)
        return store

    def agree(self, ranks: tuple[int, ...], base: str, token: str, share: int | None, pairwise: bool,
              deadline: float, on_slow: Callable[[], None], on_wait: Callable[[], None], fast: bool = False) -> bool:
        """Do all ranks of the group agree on this collective (``base``: "<group>/<seq>")? Every rank of the
        group gets the same answer. ``on_slow``: called once a rank starts waiting on the store's side;
        ``on_wait``: called while waiting (an address not published yet, --timeout passed), may conclude.
        ``fast``: the collective has the armed pattern's token (``fast_path``): a rank that is not the last
        arrival at its first node returns True at once (``fast_taken``) instead of waiting for the verdict;
        the last arrival forwards, waits above and passes the verdict down as always (its node's waiters need
        it). Raises StoreLost / AddressMissing when a store host is gone."""
        self.fast_taken = False
        path = self.path(ranks)
        value, mask, shift = fold(token, self.fanout)
        poison = value ^ (1 << shift)
        ok = not (pairwise and share is None)  # a rank whose counts are not whole numbers: no agreement
        carried = (share if share is not None else 1) % SHARE_MODULUS
        forwarded: list[tuple[Any, str, int]] = []  # (store, key, host) where this rank was the last arrival
        verdict = DISAGREED
        for i, (level, host, expected) in enumerate(path):
            store = self.client(host, deadline, on_wait)
            key = f"{level}/{base}"
            try:
                if pairwise:
                    store.add(f"x/{key}", carried)
                total = store.add(f"n/{key}", value if ok else poison)
                self.ops += 1 + pairwise
                if total & mask != expected and fast and i == 0:  # the fast path: the others decide
                    self.fast_taken = True
                    return True
                if total & mask != expected:  # not the last: the verdict comes down to this node
                    verdict = self._wait_verdict(store, key, deadline, on_slow, on_wait)
                    break
                ok = ok and (total >> shift) == expected * (value >> shift)
                if pairwise:
                    carried = store.add(f"x/{key}", 0) % SHARE_MODULUS
                    self.ops += 1
                if i == len(path) - 1:  # the top: decide
                    verdict = AGREED if ok and (not pairwise or carried == 0) else DISAGREED
                    self._publish(store, key, verdict)
                    self.ops += 1
                    break
                forwarded.append((store, key, host))
            except (StoreLost, AddressMissing):
                raise
            except Exception as exc:
                if time.monotonic() >= deadline:
                    raise
                raise StoreLost(host, exc) from exc
        for store, key, host in reversed(forwarded):  # the verdict down the nodes this rank forwarded from
            try:
                self._publish(store, key, verdict)
                self.ops += 1
            except Exception as exc:
                raise StoreLost(host, exc) from exc
        return verdict == AGREED

    def _publish(self, store: Any, key: str, verdict: int) -> None:
        """The verdict at a node: ``v`` is a counter (a waiter's poll, ``add(v, 0)``, reads it in one round trip;
        0 is "not yet"), ``w`` a key for the waiters that wait on the store's side (``add`` would create ``v``
        for them before the verdict)."""
        store.add(f"v/{key}", verdict)
        store.set(f"w/{key}", "1")
        self.ops += 2

    def _wait_verdict(self, store: Any, key: str, deadline: float, on_slow: Callable[[], None],
                      on_wait: Callable[[], None]) -> int:
        vkey = f"v/{key}"
        verdict = store.add(vkey, 0)
        self.ops += 1
        began = time.monotonic()
        pause, poll_until = POLL_START_S, began + POLL_FIRST_S
        while not verdict and time.monotonic() < poll_until:
            time.sleep(pause)
            pause = next_pause(pause, time.monotonic() - began)
            verdict = store.add(vkey, 0)
            self.ops += 1
        if not verdict:
            on_slow()
            try:
                store.wait([f"w/{key}"], timedelta(seconds=max(0.001, deadline - time.monotonic())))
            except Exception:
                if time.monotonic() < deadline:  # not the timeout: the store failed (its host died)
                    raise
                on_wait()  # concludes: --timeout passed
            verdict = store.add(vkey, 0)
            self.ops += 1
        return verdict
