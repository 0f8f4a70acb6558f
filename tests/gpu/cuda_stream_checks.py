"""The tracer's CUDA path at world size 1 (NCCL): what "pending" means when the host runs ahead of the stream.

    python3 -m torch.distributed.run --nproc-per-node 1 tests/gpu/cuda_stream_checks.py [--json FILE]

Each check queues a collective behind a ~1 s kernel (``torch.cuda._sleep``), so it cannot complete before the
kernel ends, and asks the tracer what is pending:
  * sync all_reduce / all_to_all_single: the host call returns at enqueue; the tracer must keep the collective
    pending until the stream passes it (its stream mark), and drop it once completed;
  * the same with the stream marks off (the tracer before ISSUE 7): nothing pending once the call returned;
  * async all_reduce: ``Work.wait()`` returns at once on NCCL (the current stream waits, not the host);
    pending must follow ``Work.is_completed()`` (GPU completion), not ``wait()`` having returned;
  * barrier: does the host block (NCCL's barrier synchronises the device);
  * the watchdog thread: after ``bind_thread_device`` it queries on the collectives' device;
  * Work retention: a loop of async all_gathers (the ZeRO-3 pattern) must not keep finished Works (and so
    their output buffers) alive in the tracer; compared with the pruning before ISSUE 7 (every 64 works);
  * costs: a stream mark (event create + record) and a completion query, in µs.
On CPU (gloo) only the sync check runs (there the host blocks inside the call).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    from dslint.runtime_checks import tracer as tracer_mod
    from dslint.runtime_checks.dry_step import DrySession, Options

    cuda = torch.cuda.is_available() and os.environ.get("DSLINT_GPU_FORCE_CPU") != "1"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    session = DrySession(Options(timeout=60), run_id="gpu-unit")
    session.context.install()
    tracer = session.tracer
    tracer.install()
    tracer.watch()
    results: dict[str, dict] = {}
    x = torch.ones(1 << 20, device=device)
    dist.all_reduce(x)  # NCCL communicator set up

    def kernel(seconds: float) -> None:
        if cuda:
            torch.cuda._sleep(int(cycles_per_s * seconds))

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    cycles_per_s = 0.0
    if cuda:
        torch.cuda.synchronize()
        t = time.perf_counter()
        torch.cuda._sleep(100_000_000)
        torch.cuda.synchronize()
        cycles_per_s = 100_000_000 / (time.perf_counter() - t)

    def check_sync(name: str, call, marks: bool = True) -> None:
        tracer.stream_marks = marks
        sync()
        kernel(1.0)
        t = time.perf_counter()
        call()
        host_s = time.perf_counter() - t
        pending = tracer.current()
        sync()
        tracer.outstanding()
        after = tracer.current()
        expect_pending = cuda and marks
        results[name] = {
            "host_call_s": round(host_s, 4), "pending_after_return": pending is not None,
            "pending_op": pending and pending["op"], "on_stream": bool(pending and pending.get("on_stream")),
            "pending_after_synchronize": after is not None,
            "ok": (pending is not None) == expect_pending and after is None,
        }
        tracer.stream_marks = True

    check_sync("sync_all_reduce", lambda: dist.all_reduce(x))
    check_sync("sync_all_reduce_marks_off", lambda: dist.all_reduce(x), marks=False)
    out = torch.empty_like(x)
    check_sync("sync_all_to_all_single", lambda: dist.all_to_all_single(out, x))

    if cuda:
        # async: wait() returns at once, completion is on the GPU
        sync()
        kernel(1.0)
        work = dist.all_reduce(x, async_op=True)
        pending_issue = tracer.current()
        t = time.perf_counter()
        work.wait()
        wait_s = time.perf_counter() - t
        completed_after_wait = work.is_completed()
        pending_wait = tracer.current()
        sync()
        results["async_all_reduce"] = {
            "pending_after_issue": pending_issue is not None, "wait_host_s": round(wait_s, 4),
            "is_completed_after_wait": completed_after_wait, "pending_after_wait": pending_wait is not None,
            "is_completed_after_synchronize": work.is_completed(), "pending_after_synchronize": tracer.current() is not None,
            "ok": pending_issue is not None and pending_wait is not None and tracer.current() is None,
        }
        del work

        # barrier: host-blocking on NCCL?
        sync()
        kernel(1.0)
        t = time.perf_counter()
        dist.barrier()
        results["barrier"] = {"host_call_s": round(time.perf_counter() - t, 4),
                              "host_blocks": time.perf_counter() - t > 0.5, "ok": True}
        sync()

        # the watchdog thread's view
        kernel(1.0)
        dist.all_reduce(x)
        seen: dict = {}

        def watcher() -> None:
            seen["device_before"] = torch.cuda.current_device()
            tracer.bind_thread_device()
            seen["device_after"] = torch.cuda.current_device()
            stuck = tracer.stuck_collective(time.monotonic() + 1000, 0.0)
            seen["stuck_op"] = stuck and stuck["op"]

        thread = threading.Thread(target=watcher)
        thread.start()
        thread.join()
        sync()
        results["watchdog_thread"] = dict(seen, ok=seen.get("stuck_op") == "all_reduce"
                                          and seen.get("device_after") == device.index)

        # Work retention (ZeRO-3 pattern): async all_gathers whose outputs the caller frees after waiting
        def gather_loop(track) -> dict:
            tracer.pending_async.clear()
            original = tracer._track
            tracer._track = track
            sync()
            base = torch.cuda.memory_allocated()
            inp = torch.ones(8 << 20, device=device)  # 32 MiB
            for _ in range(100):
                buf = torch.empty(8 << 20, device=device)
                work = dist.all_gather_into_tensor(buf, inp, async_op=True)
                work.wait()
                buf.add_(1)
                del buf, work
            sync()
            retained = torch.cuda.memory_allocated() - base - inp.numel() * 4
            tracked = len(tracer.pending_async)
            tracer._track = original
            tracer.pending_async.clear()
            del inp
            return {"retained_mib": round(retained / 2**20, 1), "tracked_works": tracked}

        def old_track(record, work):  # the tracer before ISSUE 7: pruned only past 64 entries
            if len(tracer.pending_async) > 64:
                tracer.pending_async = type(tracer.pending_async)(
                    (r, w) for r, w in tracer.pending_async if not tracer_mod._completed(w))
            tracer.pending_async.append((record, work))

        new = gather_loop(tracer._track)
        old = gather_loop(old_track)
        results["work_retention"] = {"now": new, "before_issue_7": old, "ok": new["retained_mib"] <= 32.5}

        # the stream-mark path (ops without async_op, e.g. sync send/recv): pending behind a kernel, then done
        pool: list = []
        kernel(1.0)
        mark = tracer_mod._StreamMark(device, pool)
        pending_mark = not mark.is_completed()
        sync()
        done_mark = mark.is_completed()
        mark.release(pool)
        reused = tracer_mod._StreamMark(device, pool)
        results["stream_mark"] = {"pending_behind_kernel": pending_mark, "completed_after_synchronize": done_mark,
                                  "event_reused": not pool and reused.event is not None,
                                  "released_mark_reads_completed": mark.is_completed(),
                                  "ok": pending_mark and done_mark and mark.is_completed()}

        # costs: a pooled stream mark; a completion query; a 1-element sync all_reduce untraced / traced
        n = 2000
        sync()
        t = time.perf_counter()
        for _ in range(n):
            m = tracer_mod._StreamMark(device, pool)
            m.release(pool)
        mark_us = 1e6 * (time.perf_counter() - t) / n
        sync()
        t = time.perf_counter()
        for _ in range(n):
            m.is_completed()
        query_us = 1e6 * (time.perf_counter() - t) / n
        one = torch.ones(1, device=device)

        def per_call() -> float:
            sync()
            t = time.perf_counter()
            for _ in range(n):
                dist.all_reduce(one)
            host = time.perf_counter() - t
            sync()
            return 1e6 * host / n

        costs = {"stream_mark_pooled_us": round(mark_us, 2), "event_query_us": round(query_us, 2)}
        for label in ("untraced", "traced_work", "traced_no_tracking", "untraced_again"):
            if label.startswith("untraced"):
                tracer.mode = "off"
            else:
                tracer.mode = "watch"
                tracer.stream_marks = label == "traced_work"
            costs[f"all_reduce_{label}_us"] = round(min(per_call() for _ in range(3)), 2)
        tracer.mode, tracer.stream_marks = "watch", True
        results["costs"] = dict(costs, ok=True)

    all_ok = all(r.get("ok", True) for r in results.values())
    summary = {"backend": "nccl" if cuda else "gloo", "torch": torch.__version__, "all_ok": all_ok, "checks": results}
    print("CUDA_STREAM_CHECKS " + json.dumps(summary, indent=2), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    tracer.uninstall()
    session.context.uninstall()
    dist.destroy_process_group()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
