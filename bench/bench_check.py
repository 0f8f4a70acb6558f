"""Cost of the pre-flight's pre-issue check per collective and rank, on real CPU ranks (gloo) and simulated.

    python bench/bench_check.py measure --ranks 2 4 8 16 [--collectives 200] [--rounds 3] [--json out.json]
    python bench/bench_check.py measure --ranks 16 --step-len 50 --nofast --fanouts 16 --no-full  # fast path on/off
    python bench/bench_check.py simulate [--json sim.json]   # store-protocol simulation to 4,096 ranks

``measure`` starts N ranks (env://, no launcher) running 1-element all_reduces on WORLD in interleaved blocks:
untraced, the dry-step check as shipped below 32 ranks ("token": one folded ``add`` per rank, the last arrival
sets a key, the others poll the counter), the tree of stores (``store_tree``) at each fan-out of ``--fanouts``
("tree16", "tree4": every rank r that hosts a node starts a store server), and the protocol before issue 21
("full": every rank publishes its fingerprint and reads all N fingerprints). The check's cost per collective
and rank is (block time with the check - untraced block time) / collectives, median over ranks and rounds
(wall: includes waiting for the slowest peer and, on an oversubscribed machine, for a core), and the same for
the main thread's CPU time (the rank's own work); the store operations per rank and collective are counted
(the tree's stores included). A probe then measures one client's round trip and, with 8 clients saturating
one server, the server's service time per operation.

``--step-len L`` puts a step boundary (the CLI's default vote exchange, whose votes arm the fast path,
``dslint.runtime_checks.fast_path``) after every L collectives of the checked loops, and reports the first step
(nothing armed) and the later steps apart; ``--nofast`` adds the shipped checks with the fast path off
("token-nofast", "tree16-nofast") to the same interleaved rounds. ``--traced`` adds the tracer alone ("traced":
dry mode, the check replaced by ``return True``, no step boundaries) and reports every mode over it as well: the
check's own cost, apart from the tracer's record and stack.

``simulate`` runs a discrete-event model of the protocols as built: one FIFO server per hosting process (a
fixed service time per operation plus a per-key time for multi-key operations; one-way network latency), N
ranks arriving with jitter, their polls with the implementations' backoffs. ``--from-probe measure.json``
takes service time and latency from ``measure``'s probe. It reports what the check adds after the last rank
arrives, and the operations the servers made.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- measurement on real ranks -------------------------------------------------------------------------
class CountingStore:
    """Counts the store operations the check makes (a proxy over the C++ PrefixStore)."""

    def __init__(self, store):
        self._store = store
        self.ops = 0

    def __getattr__(self, name):
        attr = getattr(self._store, name)
        if callable(attr):
            def counted(*a, **k):
                self.ops += 1
                return attr(*a, **k)
            return counted
        return attr


def worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, REPO)
    import torch
    import torch.distributed as dist

    from dslint.runtime_checks.dry_step import DrySession, Options
    from dslint.runtime_checks.fingerprint import check_group

    from dslint.runtime_checks import store_tree

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    # the CLI's default mode (steps=None): at a step boundary the ranks exchange their votes, which carry the fast
    # path's patterns; the bounds are lifted so that the bench's boundaries never end the session
    session = DrySession(Options(timeout=120, steps=None, max_steps=10**9, max_time=1e9), run_id="bench")
    session.tracer.install()
    peers = session.peers()
    counting = CountingStore(peers.store)
    peers.store = counting
    token_check = session.before_issue
    # the tree of stores at each fan-out measured: a rank hosting a node at any of them starts its one server
    trees = {}
    for f in args.fanouts:
        store_tree.host_if_leader(counting, rank, world, "bench", f=f, force=True)
        trees[f"tree{f}"] = store_tree.StoreTree(counting, rank, world, "bench", f=f)
    dist.barrier()

    def full_check(info, record, fp):  # the protocol before this change: every rank reads every fingerprint
        keys = [f"full/{info.name}/{record['seq']}/{i}" for i in range(info.size)]
        peers.put(keys[info.my_index], dict(fp, rank=rank))
        while not peers.wait_keys(keys):
            pass
        return check_group(peers.get_many(keys)) is None

    from datetime import timedelta

    from dslint.runtime_checks.fingerprint import check_token, fold

    def wait_check(info, record, fp):  # a variant (not shipped): the flat check waiting on the store's side at once
        base = f"w/{info.name}/{record['seq']}"
        value, count_mask, shift = fold(check_token(fp), info.size)
        total = counting.add(f"n/{base}", value)
        if total & count_mask == info.size:
            counting.set(f"v/{base}", "1")
        else:
            counting.wait([f"v/{base}"], timedelta(seconds=60))
            total = counting.add(f"n/{base}", 0)
        return (total >> shift) == info.size * (value >> shift)

    x = torch.ones(1)

    shipped_cap = store_tree.POLL_MAX_S
    caps = {f"flat@{c:g}us": c / 1e6 for c in args.flat_caps_us or ()}  # the flat check with another polling cap

    def block(mode: str) -> tuple[float, float, float, float]:
        session.tracer.before_issue = full_check if mode == "full" else wait_check if mode == "flat-wait" \
            else (lambda info, record, fp: True) if mode == "traced" else token_check
        # "-nofast": the check with the fast path off (an A/B in the same run); it is on in the other modes that
        # use the shipped check, and armed only by step boundaries (--step-len)
        session.fast.enabled = not mode.endswith("-nofast")
        session.fast.reset(dict(session.tracer.counts))
        session._votes_pending = None
        mode = mode.removesuffix("-nofast")
        tree = trees.get(mode)
        session._tree = tree if tree is not None else False  # the check as shipped: flat, or this tree
        store_tree.POLL_MAX_S = caps.get(mode, shipped_cap)  # read by store_tree.next_pause
        session.tracer.mode = "off"
        dist.barrier()
        session.tracer.mode = "off" if mode == "untraced" else "dry"
        ops0 = counting.ops + sum(t.ops for t in trees.values())
        rng = random.Random(rank)  # the same per-rank compute times in every block
        work = [(args.compute_us + rng.uniform(0, args.jitter_us)) * 1e-6 for _ in range(args.collectives)]
        busy = 0.0
        # the untraced and traced loops have no boundaries: the step votes' cost is counted to the check
        step_len = args.step_len if mode not in ("untraced", "traced") else 0
        first = None  # the first step's time (nothing armed yet), its boundary included
        start, cpu0 = time.perf_counter(), time.thread_time()
        for i, w in enumerate(work, 1):
            if w:
                t = time.perf_counter()
                end = t + w
                while time.perf_counter() < end:
                    pass
                busy += time.perf_counter() - t
            dist.all_reduce(x)
            if step_len and i % step_len == 0:
                session.step_boundary()
                if first is None:
                    first = time.perf_counter() - start
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu0 - busy
        session.tracer.mode = "off"
        ops = counting.ops + sum(t.ops for t in trees.values()) - ops0
        n, n_first = args.collectives, args.step_len or args.collectives
        first = elapsed if first is None else first
        later = (elapsed - first) / (n - n_first) if n > n_first else elapsed / n
        return elapsed / n, ops / n, cpu / n, first / n_first, later

    nofast = [f"{m}-nofast" for m in ("token", *trees)] if args.nofast else []
    modes = ["untraced", *(["traced"] if args.traced else []), "token", *caps, *(["flat-wait"] if args.wait else []), *trees, *nofast,
             *(["full"] if args.full else [])]
    results: dict[str, list[tuple[float, ...]]] = {m: [] for m in modes}
    for mode in modes[1:]:
        if mode != "full":
            block(mode)  # warm-up (connections, caches)
    for _ in range(args.rounds):
        for mode in results:
            results[mode].append(block(mode))
    session.tracer.records.clear()
    mine = {m: {"s": [r[0] for r in v], "ops": [r[1] for r in v], "cpu": [r[2] for r in v],
                "first": [r[3] for r in v], "later": [r[4] for r in v]} for m, v in results.items()}
    mine["fast_path"] = session.fast.summary()
    peers.put(f"bench/{rank}", mine)
    if rank == 0:
        keys = [f"bench/{r}" for r in range(world)]
        while not peers.wait_keys(keys, 1.0):
            pass
        every = peers.get_many(keys)
        out = {"ranks": world, "collectives": args.collectives, "rounds": args.rounds, "step_len": args.step_len,
               "compute_us": args.compute_us, "jitter_us": args.jitter_us}
        for mode in modes[1:]:
            extra = [(e[mode]["s"][i] - e["untraced"]["s"][i]) * 1e3 for e in every for i in range(args.rounds)]
            cpu = [(e[mode]["cpu"][i] - e["untraced"]["cpu"][i]) * 1e3 for e in every for i in range(args.rounds)]
            first = [(e[mode]["first"][i] - e["untraced"]["s"][i]) * 1e3 for e in every for i in range(args.rounds)]
            later = [(e[mode]["later"][i] - e["untraced"]["s"][i]) * 1e3 for e in every for i in range(args.rounds)]
            out[mode] = {"check_ms_per_rank_median": round(statistics.median(extra), 4),
                         "check_cpu_ms_per_rank_median": round(statistics.median(cpu), 4),
                         "check_ms_per_rank_p90": round(sorted(extra)[int(0.9 * (len(extra) - 1))], 4),
                         "store_ops_per_rank": round(statistics.mean(o for e in every for o in e[mode]["ops"]), 2)}
            if args.traced and mode != "traced":  # the check alone: over the traced loop (tracer, no check)
                own = [(e[mode]["s"][i] - e["traced"]["s"][i]) * 1e3 for e in every for i in range(args.rounds)]
                out[mode]["over_traced_ms_per_rank_median"] = round(statistics.median(own), 4)
                if args.step_len:
                    own = [(e[mode]["later"][i] - e["traced"]["s"][i]) * 1e3 for e in every
                           for i in range(args.rounds)]
                    out[mode]["later_steps_over_traced_ms_per_rank_median"] = round(statistics.median(own), 4)
            if args.step_len:  # the first step (unarmed) and the later ones (armed, or not with -nofast)
                out[mode]["first_step_ms_per_rank_median"] = round(statistics.median(first), 4)
                out[mode]["later_steps_ms_per_rank_median"] = round(statistics.median(later), 4)
                out[mode]["later_steps_ms_per_rank_p90"] = round(sorted(later)[int(0.9 * (len(later) - 1))], 4)
        out["fast_path"] = {"fast": sum(e["fast_path"]["fast"] for e in every),
                            "checked": sum(e["fast_path"]["checked"] for e in every)}
        out["untraced_ms"] = round(statistics.median(s * 1e3 for e in every for s in e["untraced"]["s"]), 4)
        print("RESULT " + json.dumps(out), flush=True)
        peers.put("bench/done", 1)
    else:
        while not peers.wait_keys(["bench/done"], 1.0):
            pass
    dist.barrier()
    session.exit(0)  # also removes the session's scratch folder


def probe() -> dict[str, float]:
    """Single-client latency of one store operation and of a 16-key multi_get, on a local TCPStore."""
    from datetime import timedelta

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=10))
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
    for i in range(16):
        client.set(f"k{i}", "x" * 200)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        client.add("c", 1)
    add_us = (time.perf_counter() - start) / n * 1e6
    keys = [f"k{i}" for i in range(16)]
    start = time.perf_counter()
    for _ in range(n // 4):
        client.multi_get(keys)
    mget_us = (time.perf_counter() - start) / (n // 4) * 1e6
    saturated = _throughput(port)
    del client, server
    return {"add_us": round(add_us, 2), "multi_get16_us": round(mget_us, 2),
            "key_us": round(max(0.0, (mget_us - add_us) / 15), 3), **saturated}


def _hammer(port: int, seconds: float, clients: int, queue) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
    client.add("go", 1)
    start_by = time.monotonic() + 20  # a client that failed to connect must not hold the others forever
    while client.add("go", 0) < clients and time.monotonic() < start_by:
        time.sleep(0.0005)
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        client.add("c", 1)
        n += 1
    queue.put(n)


def _throughput(port: int, clients: int = 8, seconds: float = 1.0) -> dict[str, float]:
    """The server's service time per operation: ``clients`` processes issue ``add``s back to back for
    ``seconds``; with the server saturated, service ≈ seconds / operations. The one-way latency is what is left
    of a single client's round trip: (round trip - service) / 2. Only meaningful with a core per client."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(port, seconds, clients, queue), daemon=True) for _ in range(clients)]
    for p in procs:
        p.start()
    try:
        total = sum(queue.get(timeout=30) for _ in procs)
    except Exception:  # an overloaded machine: no figure rather than no result
        total = 0
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    if not total:
        return {"saturated_clients": clients, "saturated_ops_per_s": None, "service_us": None}
    return {"saturated_clients": clients, "saturated_ops_per_s": round(total / seconds),
            "service_us": round(seconds / total * 1e6, 2)}


def measure(args: argparse.Namespace) -> dict:
    rows = []
    for n in args.ranks:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONPATH=REPO)
            procs.append(subprocess.Popen([sys.executable, __file__, "_worker", "--collectives",
                                           str(args.collectives), "--rounds", str(args.rounds),
                                           "--fanouts", *map(str, args.fanouts),
                                           "--flat-caps-us", *map(str, args.flat_caps_us or ()),
                                           *(["--wait"] if args.wait else []),
                                           *(["--nofast"] if args.nofast else []),
                                           *(["--traced"] if args.traced else []),
                                           *(["--full"] if args.full else []),
                                           "--step-len", str(args.step_len),
                                           "--compute-us", str(args.compute_us), "--jitter-us", str(args.jitter_us)],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        out = ""
        try:
            out = procs[0].communicate(timeout=args.limit)[0]
            for p in procs[1:]:
                p.communicate(timeout=60)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
        line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise SystemExit(f"no result for {n} ranks:\n{out[-3000:]}")
        row = json.loads(line[7:])
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {"measured": rows, "probe": probe()}


# ---- simulation -------------------------------------------------------------------------------------------
class Server:
    """One store server: FIFO, ``service`` µs per operation (+ ``per_key`` µs per key beyond the first)."""

    def __init__(self, service: float, per_key: float) -> None:
        self.free_at = 0.0
        self.service, self.per_key = service, per_key
        self.ops = 0

    def serve(self, arrive: float, keys: int = 1) -> float:
        start = max(arrive, self.free_at)
        self.free_at = start + self.service + self.per_key * max(0, keys - 1)
        self.ops += 1
        return self.free_at


POLL_START = 50e-6  # the checks' polling backoff (store_tree.next_pause): 50 µs doubling to a cap


def _store_tree():
    """dslint's store_tree module (the simulation's constants come from it), imported once."""
    global _STORE_TREE
    if _STORE_TREE is None:
        if REPO not in sys.path:
            sys.path.insert(0, REPO)
        from dslint.runtime_checks import store_tree
        _STORE_TREE = store_tree
    return _STORE_TREE


_STORE_TREE = None


def _backoff(pause: float, waited: float, cap: float | None) -> float:
    """store_tree.next_pause with the young-wait cap ``cap`` (default: the shipped one)."""
    tree = _store_tree()
    young = cap if cap is not None else tree.POLL_MAX_S
    return min(pause * 2, young if waited < tree.POLL_TIGHT_S else tree.POLL_SLOW_MAX_S)


class _Sim:
    """Discrete events over several store servers (one per hosting process), each FIFO: a request arriving at
    ``t`` is served at ``max(t, free_at)`` for ``service`` seconds; its reply reaches the client ``latency``
    later. Requests are served in order of arrival (a heap), and a server's handler sees the state at service
    time (counters, verdict keys)."""

    def __init__(self, service: float, latency: float) -> None:
        self.service, self.latency = service, latency
        self.free: dict[int, float] = {}
        self.heap: list = []
        self.n = 0
        self.ops = 0

    def send(self, t: float, host: int, handler, then) -> None:
        """A request sent at ``t`` to ``host``: ``handler()`` runs at service, ``then(reply_time, result)``."""
        self.n += 1
        heapq.heappush(self.heap, (t + self.latency, self.n, host, handler, then))

    def run(self) -> None:
        while self.heap:
            t, _, host, handler, then = heapq.heappop(self.heap)
            done = max(t, self.free.get(host, 0.0)) + self.service
            self.free[host] = done
            self.ops += 1
            then(done + self.latency, handler())


def simulate_flat(n: int, arrivals: list[float], service: float, per_key: float, latency: float,
                  poll_max: float | None = None) -> dict:
    """The flat check as shipped: add (count + token) to the group's counter on the one store; the last arrival
    sets v and is done; the others poll the counter (add 0) with the backoff until it is complete."""
    sim = _Sim(service, latency)
    state = {"count": 0}
    finish: dict[int, float] = {}

    def add() -> int:
        state["count"] += 1
        return state["count"]

    def start(r: int) -> None:
        def added(t: float, count: int) -> None:
            if count == n:
                sim.send(t, 0, lambda: None, lambda t2, _: finish.__setitem__(r, t2))  # set v
            else:
                poll(t, POLL_START)

        def poll(t: float, pause: float) -> None:
            def polled(t2: float, count: int) -> None:
                if count == n:
                    finish[r] = t2
                else:
                    poll(t2, _backoff(pause, t2 - arrivals[r], poll_max))
            sim.send(t + pause, 0, lambda: state["count"], polled)

        sim.send(arrivals[r], 0, add, added)

    for r in range(n):
        start(r)
    sim.run()
    return {"finish": finish, "ops": sim.ops}


def simulate_tree(n: int, arrivals: list[float], service: float, per_key: float, latency: float,
                  fanout: int = 16, poll_max: float | None = None) -> dict:
    """The tree of stores as built (``dslint.runtime_checks.store_tree``): each rank adds to its lowest node
    (``path_of``); the last arrival at a node forwards one add to the node above; the last at the top sets v;
    a rank that was not last polls ``add(v, 0)`` at its node with the backoff (the first poll right after its
    add), and sets v (add v, set w) at the nodes below where it forwarded. One server per hosting process serves all the levels it hosts."""
    path_of = _store_tree().path_of

    sim = _Sim(service, latency)
    counts: dict[tuple[int, int], int] = {}
    verdicts: set[tuple[int, int]] = set()
    finish: dict[int, float] = {}
    paths = {r: path_of(r, range(n), fanout) for r in range(n)}

    def start(r: int) -> None:
        path = paths[r]
        forwarded: list[tuple[int, int]] = []
        first = [True]  # the first poll follows the add at once (as in store_tree)

        def down(t: float) -> None:
            if not forwarded:
                finish[r] = t
                return
            level, host = forwarded.pop()  # add(v, verdict), then set(w) for store-side waiters
            sim.send(t, host, lambda: verdicts.add((level, host)),
                     lambda t2, _: sim.send(t2, host, lambda: None, lambda t3, _: down(t3)))

        def at(i: int, t: float) -> None:
            level, host, expected = path[i]
            node = (level, host)

            def add() -> int:
                counts[node] = counts.get(node, 0) + 1
                return counts[node]

            began = [0.0]

            def added(t2: float, count: int) -> None:
                if count != expected:
                    began[0] = t2
                    poll(t2, POLL_START)
                elif i == len(path) - 1:  # the top: decide (add v, set w), then down
                    sim.send(t2, host, lambda: verdicts.add(node),
                             lambda t3, _: sim.send(t3, host, lambda: None, lambda t4, _: down(t4)))
                else:
                    forwarded.append(node)
                    at(i + 1, t2)

            def poll(t2: float, pause: float) -> None:  # add(v, 0): the verdict, or 0
                def polled(t3: float, there: bool) -> None:
                    if there:
                        down(t3)
                    else:
                        poll(t3, _backoff(pause, t3 - began[0], poll_max))
                delay = 0.0 if first[0] else pause
                first[0] = False
                sim.send(t2 + delay, host, lambda: node in verdicts, polled)

            sim.send(t, host, add, added)

        if path:
            at(0, arrivals[r])
        else:
            finish[r] = arrivals[r]

    for r in range(n):
        start(r)
    sim.run()
    return {"finish": finish, "ops": sim.ops, "levels": max(len(p) for p in paths.values())}


def simulate_full(n: int, arrivals: list[float], service: float, per_key: float, latency: float) -> dict:
    server = Server(service, per_key)
    published: dict[int, float] = {}
    # everyone publishes first (a set), then polls check(N keys) with backoff, then multi_get(N keys)
    events = []
    for r in sorted(range(n), key=lambda r: arrivals[r]):
        published[r] = server.serve(arrivals[r] + latency)
        events.append((published[r] + latency, r, 0.0002))
    all_there = max(published.values())
    finish = {}
    heapq.heapify(events)
    while events:
        t, r, pause = heapq.heappop(events)
        done = server.serve(t + latency, n)
        if done >= all_there:
            finish[r] = server.serve(done + latency, n) + latency  # multi_get
        else:
            heapq.heappush(events, (done + latency + pause, r, min(pause * 2, 0.02)))
    return {"finish": finish, "ops": server.ops}


def simulate(args: argparse.Namespace) -> dict:
    if args.from_probe:  # the service time and latency measured by ``measure``'s probe on this machine
        with open(args.from_probe) as f:
            found = json.load(f)["probe"]
        args.service_us = found["service_us"] or args.service_us
        args.latency_us = max(1.0, (found["add_us"] - args.service_us) / 2)
        args.key_us = found["key_us"]
    service, per_key, latency = args.service_us * 1e-6, args.key_us * 1e-6, args.latency_us * 1e-6
    rows = []
    for n in args.sizes:
        for jitter_us in args.jitter_us:
            rng = random.Random(n * 7919 + int(jitter_us))
            arrivals = [rng.uniform(0, jitter_us * 1e-6) for _ in range(n)]
            last = max(arrivals)
            row = {"ranks": n, "jitter_us": jitter_us}
            protocols = [("token", lambda *a: simulate_flat(*a, poll_max=args.flat_poll_max_us
                                                            and args.flat_poll_max_us * 1e-6))]
            protocols += [(f"tree{f}", lambda *a, f=f: simulate_tree(*a, fanout=f, poll_max=args.tree_poll_max_us
                                                                     and args.tree_poll_max_us * 1e-6))
                          for f in args.fanouts]
            protocols += [("full", simulate_full)] if args.full else []
            for name, fn in protocols:
                if name == "full" and n > 1024:
                    continue  # O(N^2) keys: minutes of simulated server time, see the trend below
                result = fn(n, arrivals, service, per_key, latency)
                after = [result["finish"][r] - last for r in range(n)]
                row[name] = {"added_ms_max": round(max(after) * 1e3, 3),
                             "added_ms_median": round(statistics.median(after) * 1e3, 3),
                             "server_ops": result["ops"]}
                if "levels" in result:
                    row[name]["levels"] = result["levels"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return {"simulated": rows, "parameters": {"service_us": args.service_us, "key_us": args.key_us,
                                              "latency_us": args.latency_us, "from_probe": args.from_probe,
                                              "tree_poll_max_us": args.tree_poll_max_us,
                                              "flat_poll_max_us": args.flat_poll_max_us}}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16])
    m.add_argument("--collectives", type=int, default=200)
    m.add_argument("--rounds", type=int, default=3)
    m.add_argument("--limit", type=float, default=400)
    m.add_argument("--fanouts", type=int, nargs="*", default=[16, 4])
    m.add_argument("--flat-caps-us", type=float, nargs="*", help="also the flat check with these polling caps")
    m.add_argument("--compute-us", type=float, default=0.0, help="busy work before each collective (a step's "
                   "compute), plus a per-rank random 0..--jitter-us: the ranks arrive apart, as in training")
    m.add_argument("--jitter-us", type=float, default=0.0)
    m.add_argument("--wait", action="store_true", help="also a variant of the flat check that waits on the store "
                   "at once (flat-wait: add, then one store-side wait for the last arrival's key)")
    m.add_argument("--step-len", type=int, default=0, help="collectives per step: a step boundary (the votes "
                   "that arm the fast path) after every L collectives; 0: none (nothing is ever armed)")
    m.add_argument("--nofast", action="store_true", help="also the shipped checks with the fast path off")
    m.add_argument("--no-full", dest="full", action="store_false", help="leave out the protocol before issue 21")
    m.add_argument("--traced", action="store_true", help="also the tracer alone (dry mode, no check): the check's "
                   "own cost is then reported over it (the tracer's record and stack are not the check's)")
    m.add_argument("--json")
    s = sub.add_parser("simulate")
    s.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    s.add_argument("--jitter-us", type=float, nargs="+", default=[0.0, 1000.0])
    s.add_argument("--service-us", type=float, default=5.0)
    s.add_argument("--key-us", type=float, default=0.5)
    s.add_argument("--latency-us", type=float, default=15.0)
    s.add_argument("--fanouts", type=int, nargs="*", default=[16, 4])
    s.add_argument("--from-probe", help="a measure --json file: take service time and latency from its probe")
    s.add_argument("--tree-poll-max-us", type=float, help="the tree's polling cap (default: store_tree's)")
    s.add_argument("--flat-poll-max-us", type=float, help="the flat check's polling cap (default: store_tree's)")
    s.add_argument("--full", action="store_true", help="also the protocol before the token check (slow)")
    s.add_argument("--json")
    w = sub.add_parser("_worker")
    w.add_argument("--collectives", type=int, default=200)
    w.add_argument("--rounds", type=int, default=3)
    w.add_argument("--fanouts", type=int, nargs="*", default=[16, 4])
    w.add_argument("--flat-caps-us", type=float, nargs="*")
    w.add_argument("--wait", action="store_true")
    w.add_argument("--compute-us", type=float, default=0.0)
    w.add_argument("--jitter-us", type=float, default=0.0)
    w.add_argument("--step-len", type=int, default=0)
    w.add_argument("--nofast", action="store_true")
    w.add_argument("--traced", action="store_true")
    w.add_argument("--full", action="store_true")
    args = parser.parse_args()
    if args.cmd == "_worker":
        worker(args)
        return
    result = measure(args) if args.cmd == "measure" else simulate(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
