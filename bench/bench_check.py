"""Cost of the pre-flight's pre-issue check per collective and rank, on real CPU ranks (gloo) and simulated.

    python bench/bench_check.py measure --ranks 2 4 8 16 [--collectives 200] [--rounds 3] [--json out.json]
    python bench/bench_check.py simulate [--json sim.json]   # store-protocol simulation to 4,096 ranks

``measure`` starts N ranks (env://, no launcher) running 1-element all_reduces on WORLD in interleaved blocks:
untraced, the dry-step check as shipped ("token": one folded ``add`` per rank, the last arrival sets a key the
others wait for on the store's side, one ``add`` to read the total), and the previous protocol ("full": every
rank publishes its fingerprint and reads all N fingerprints). The check's cost per collective and rank is
(block time with the check - untraced block time) / collectives, median over ranks and rounds (wall: includes
waiting for the slowest peer and, on an oversubscribed machine, for a core), and the same for the main
thread's CPU time (the rank's own work); the store operations per rank and collective are counted.

``simulate`` runs a discrete-event model of one store server (FIFO, a fixed service time per operation plus a
per-key time for multi-key operations; one-way network latency) with N clients arriving with jitter, for the
two protocols and for a tree of stores (one per 16 ranks, leaders forward one value up; simulated only). The
service times come from ``--service-us``/``--key-us``/``--latency-us`` (defaults: measured on this machine by
``measure``'s single-client probe). It reports what the check adds after the last rank arrives.
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

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    session = DrySession(Options(timeout=120), run_id="bench")
    session.tracer.install()
    peers = session.peers()
    counting = CountingStore(peers.store)
    peers.store = counting
    token_check = session.before_issue

    def full_check(info, record, fp):  # the protocol before this change: every rank reads every fingerprint
        keys = [f"full/{info.name}/{record['seq']}/{i}" for i in range(info.size)]
        peers.put(keys[info.my_index], dict(fp, rank=rank))
        while not peers.wait_keys(keys):
            pass
        return check_group(peers.get_many(keys)) is None

    x = torch.ones(1)

    def block(mode: str) -> tuple[float, float]:
        session.tracer.mode = "off" if mode == "untraced" else "dry"
        session.tracer.before_issue = full_check if mode == "full" else token_check
        session.tracer.mode = "off"
        dist.barrier()
        session.tracer.mode = "off" if mode == "untraced" else "dry"
        ops0 = counting.ops
        start, cpu0 = time.perf_counter(), time.thread_time()
        for _ in range(args.collectives):
            dist.all_reduce(x)
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu0
        session.tracer.mode = "off"
        return elapsed / args.collectives, (counting.ops - ops0) / args.collectives, cpu / args.collectives

    results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in ("untraced", "token", "full")}
    block("token")  # warm-up (connections, caches)
    for _ in range(args.rounds):
        for mode in results:
            results[mode].append(block(mode))
    session.tracer.records.clear()
    mine = {m: {"s": [r[0] for r in v], "ops": [r[1] for r in v], "cpu": [r[2] for r in v]}
            for m, v in results.items()}
    peers.put(f"bench/{rank}", mine)
    if rank == 0:
        keys = [f"bench/{r}" for r in range(world)]
        while not peers.wait_keys(keys, 1.0):
            pass
        every = peers.get_many(keys)
        out = {"ranks": world, "collectives": args.collectives, "rounds": args.rounds}
        for mode in ("token", "full"):
            extra = [(e[mode]["s"][i] - e["untraced"]["s"][i]) * 1e3 for e in every for i in range(args.rounds)]
            cpu = [(e[mode]["cpu"][i] - e["untraced"]["cpu"][i]) * 1e3 for e in every for i in range(args.rounds)]
            out[mode] = {"check_ms_per_rank_median": round(statistics.median(extra), 4),
                         "check_cpu_ms_per_rank_median": round(statistics.median(cpu), 4),
                         "check_ms_per_rank_p90": round(sorted(extra)[int(0.9 * (len(extra) - 1))], 4),
                         "store_ops_per_rank": round(statistics.mean(o for e in every for o in e[mode]["ops"]), 2)}
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
    del client, server
    return {"add_us": round(add_us, 2), "multi_get16_us": round(mget_us, 2),
            "key_us": round(max(0.0, (mget_us - add_us) / 15), 3)}


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
                                           str(args.collectives), "--rounds", str(args.rounds)],
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


def simulate_token(n: int, arrivals: list[float], service: float, per_key: float, latency: float) -> dict:
    server = Server(service, per_key)
    finish: dict[int, float] = {}
    # a rank: add (count + token) -> the last sets v, the others wait on the server (a registration op, then
    # a notification op per waiter when v is set) -> add(0) to read the total
    order = sorted(range(n), key=lambda r: arrivals[r])
    replies = {}
    for r in order:
        replies[r] = server.serve(arrivals[r] + latency) + latency
    # process the adds in server order to find the last arrival
    last = max(order, key=lambda r: replies[r])
    set_done = server.serve(replies[last] + latency) + latency
    for r in order:
        if r == last:
            finish[r] = server.serve(set_done + latency) + latency
            continue
        registered = server.serve(replies[r] + latency)  # the wait request is queued at the server
        notified = max(registered, set_done - latency)
        woke = server.serve(notified) + latency  # the notification
        finish[r] = server.serve(woke + latency) + latency  # add(0): read the total
    return {"finish": finish, "ops": server.ops}


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


def simulate_tree(n: int, arrivals: list[float], service: float, per_key: float, latency: float,
                  fanout: int = 16) -> dict:
    """Stores in a tree (one per ``fanout`` members); the last arrival of a level forwards one value to the
    level above; the verdict comes down the same way. Every level is the token protocol on ``fanout`` clients."""
    level_arrivals = arrivals
    ops = 0
    up: list[dict] = []
    while len(level_arrivals) > 1:
        groups = [level_arrivals[i:i + fanout] for i in range(0, len(level_arrivals), fanout)]
        nxt = []
        for g in groups:
            server = Server(service, per_key)
            replies = sorted(server.serve(a + latency) + latency for a in g)
            nxt.append(replies[-1])  # the last arrival forwards one add upward
            ops += server.ops
        up.append({"groups": len(groups)})
        level_arrivals = nxt
    top = level_arrivals[0]
    levels = len(up)
    # down: at each level the forwarder sets v in its store and each waiter is notified and reads the total
    down = top
    for _ in range(levels):
        down += latency + service  # set v
        down += service * fanout + latency  # notifications of fanout waiters (worst: the last one)
        down += 2 * latency + service  # read the total
        ops += 3 * fanout
    return {"finish": {r: down for r in range(n)}, "ops": ops, "levels": levels}


def simulate(args: argparse.Namespace) -> dict:
    service, per_key, latency = args.service_us * 1e-6, args.key_us * 1e-6, args.latency_us * 1e-6
    rows = []
    for n in args.sizes:
        for jitter_us in args.jitter_us:
            rng = random.Random(n * 7919 + int(jitter_us))
            arrivals = [rng.uniform(0, jitter_us * 1e-6) for _ in range(n)]
            last = max(arrivals)
            row = {"ranks": n, "jitter_us": jitter_us}
            for name, fn in (("token", simulate_token), ("tree16", simulate_tree), ("full", simulate_full)):
                if name == "full" and n > 1024:
                    continue  # O(N^2) keys: minutes of simulated server time, see the trend below
                result = fn(n, arrivals, service, per_key, latency)
                after = [result["finish"][r] - last for r in range(n)]
                row[name] = {"added_ms_max": round(max(after) * 1e3, 3),
                             "added_ms_median": round(statistics.median(after) * 1e3, 3),
                             "server_ops": result["ops"]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return {"simulated": rows, "parameters": {"service_us": args.service_us, "key_us": args.key_us,
                                              "latency_us": args.latency_us}}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16])
    m.add_argument("--collectives", type=int, default=200)
    m.add_argument("--rounds", type=int, default=3)
    m.add_argument("--limit", type=float, default=400)
    m.add_argument("--json")
    s = sub.add_parser("simulate")
    s.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    s.add_argument("--jitter-us", type=float, nargs="+", default=[0.0, 1000.0])
    s.add_argument("--service-us", type=float, default=5.0)
    s.add_argument("--key-us", type=float, default=0.5)
    s.add_argument("--latency-us", type=float, default=15.0)
    s.add_argument("--json")
    w = sub.add_parser("_worker")
    w.add_argument("--collectives", type=int, default=200)
    w.add_argument("--rounds", type=int, default=3)
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
