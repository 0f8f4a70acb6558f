"""Pre-flight tracer overhead: traced vs untraced steps of a small MoE ZeRO-2 model, CPU, 2 ranks (gloo).

    python bench/bench_tracer.py [--steps 20] [--json out.json]

Spawns ``torchrun --nproc-per-node 2`` on itself.  Measures, per rank 0:
  * a training step (forward, backward, optimizer step) untraced, with the tracer recording ("watch": what
    stays on after a pass), and in dry-step mode ("dry": every collective's fingerprint compared with the
    peers through the store before it is issued);
  * per-collective cost on 1-element all_reduces (the wrapper's own cost, without model compute).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("untraced", "watch", "dry")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, REPO)
    import deepspeed
    import torch
    import torch.distributed as dist
    from torch import nn

    from dslint.runtime_checks.dry_step import DrySession, Options

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    hidden, vocab = 64, 128

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(hidden)
            self.mlp = deepspeed.moe.layer.MoE(hidden_size=hidden, expert=nn.Linear(hidden, hidden), num_experts=2,
                                               ep_size=world, k=1, min_capacity=2)

        def forward(self, x):
            return x + self.mlp(self.norm(x))[0]

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList(Block() for _ in range(4))
            self.head = nn.Linear(hidden, vocab)

        def forward(self, ids):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x)
            return nn.functional.cross_entropy(self.head(x).reshape(-1, vocab), ids.reshape(-1))

    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

    torch.manual_seed(0)
    model = Model()
    groups = split_params_into_different_moe_groups_for_optimizer({"params": list(model.parameters()), "name": "p"})
    config = {"train_micro_batch_size_per_gpu": 4, "steps_per_print": 10**9, "zero_optimization": {"stage": 2},
              "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}}}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=config)
    batch = torch.randint(0, vocab, (4, 32), generator=torch.Generator().manual_seed(rank))

    def step() -> None:
        loss = engine(batch)
        engine.backward(loss)
        engine.step()

    def timed_steps(n: int) -> list[float]:
        times = []
        for _ in range(n):
            dist.barrier()
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        return times

    def timed_allreduce(n: int) -> float:
        x = torch.ones(1)
        dist.barrier()
        t = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(x)
        return (time.perf_counter() - t) / n

    for _ in range(3):
        step()
    session = DrySession(Options(timeout=60), run_id="bench")

    def set_mode(mode: str) -> None:
        session.tracer.uninstall()
        session.context.uninstall()
        if mode != "untraced":
            session.context.install()
            session.tracer.install()
            if mode == "watch":
                session.tracer.watch()
            else:
                session.tracer.mode = "dry"
                session.tracer.records = list(session.tracer.records)

    describe = session.tracer._describe
    cpu = {"s": 0.0, "n": 0}

    def timed_describe(*a):  # the tracer's own work per collective, apart from scheduling effects
        t = time.perf_counter()
        try:
            return describe(*a)
        finally:
            cpu["s"] += time.perf_counter() - t
            cpu["n"] += 1

    per_step: dict[str, int] = {}
    cpu_us: dict[str, list[float]] = {m: [] for m in MODES}
    samples: dict[str, dict[str, list[float]]] = {m: {"step_s": [], "allreduce_s": []} for m in MODES}
    # interleaved rounds, minimum over rounds: the machine's noise only ever adds time
    for _round in range(args.rounds):
        for mode in MODES:
            set_mode(mode)
            session.tracer._describe = timed_describe
            cpu["s"], cpu["n"] = 0.0, 0
            before = sum(session.tracer.counts.values())
            step()
            per_step[mode] = sum(session.tracer.counts.values()) - before
            samples[mode]["step_s"].append(statistics.median(timed_steps(args.steps)))
            samples[mode]["allreduce_s"].append(timed_allreduce(args.collectives))
            if cpu["n"]:
                cpu_us[mode].append(1e6 * cpu["s"] / cpu["n"])
    set_mode("untraced")
    results = {m: {"step_s": min(v["step_s"]), "allreduce_s": min(v["allreduce_s"]),
                   "collectives_per_step": per_step[m]} for m, v in samples.items()}
    if rank == 0:
        base = results["untraced"]
        summary = {"world_size": world, "steps": args.steps, "collectives": args.collectives, "rounds": args.rounds,
                   "modes": {}}
        for mode in ("watch", "dry"):
            r = results[mode]
            n = r["collectives_per_step"]
            summary["modes"][mode] = {
                "step_ms": round(r["step_s"] * 1e3, 3), "untraced_step_ms": round(base["step_s"] * 1e3, 3),
                "step_overhead_pct": round(100 * (r["step_s"] / base["step_s"] - 1), 2),
                "collectives_per_step": n,
                "per_collective_us_in_step": round(1e6 * (r["step_s"] - base["step_s"]) / max(n, 1), 1),
                "allreduce_us": round(r["allreduce_s"] * 1e6, 1),
                "untraced_allreduce_us": round(base["allreduce_s"] * 1e6, 1),
                "per_collective_us_microbench": round((r["allreduce_s"] - base["allreduce_s"]) * 1e6, 1),
                "tracer_cpu_us_per_collective": round(statistics.median(cpu_us[mode]), 1),
            }
        print("BENCH_RESULT " + json.dumps(summary), flush=True)
    dist.barrier()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10, help="timed steps per block")
    parser.add_argument("--collectives", type=int, default=1000, help="1-element all_reduces per block")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of all modes")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--local_rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    cmd = ["torchrun", "--nproc-per-node", "2", "--master-port", str(29731), os.path.abspath(__file__), "--worker",
           "--steps", str(args.steps), "--collectives", str(args.collectives), "--rounds", str(args.rounds)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH_RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"benchmark failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    summary = json.loads(lines[-1].removeprefix("BENCH_RESULT "))
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
