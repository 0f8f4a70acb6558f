"""Pre-flight tracer overhead on a real-size MoE layer step on GPU (NCCL), traced vs untraced.

    python3 bench/bench_tracer_gpu.py [--gpus 1] [--hidden 2048] [--experts 8] [--tokens 4096] [--layers 1]
                                      [--iters 30] [--rounds 5] [--json out.json]

Spawns ``python3 -m torch.distributed.run --nproc-per-node N`` on itself. Every rank runs a GShard-style
top-1 MoE layer in bf16 (LayerNorm, gate, capacity 1.25, expert FFN hidden -> 4*hidden -> hidden, the
experts split over the ranks, dispatch and combine through all_to_all_single, as DeepSpeed's MOELayer does),
then backward (two more all_to_all), an all_reduce of each non-expert gradient and an SGD update: 7
collectives a layer and step. At world size 1 the all_to_all and all_reduce are real NCCL calls on a
one-rank communicator.

Modes, interleaved round by round: untraced; ``watch`` (record only: what stays on with --continue);
``watch_untracked`` (watch without tracking the GPU completion of sync CUDA collectives, i.e.
DSLINT_PREFLIGHT_STREAM_MARKS=0, the tracer before ISSUE 7); ``dry`` (the dry-step mode: full
fingerprints; at world size 1 no store exchange, as groups of one are not compared). Each step is timed
CUDA-synchronised (synchronize, step, synchronize) and also up to the host's return (the enqueue time); the
figures are min and median over all iterations of all rounds. A micro-benchmark times 2000 one-element
all_reduces without synchronisation per mode (the host cost per collective).

Without a GPU it runs on CPU with gloo, float32 and small sizes (to check the script).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("untraced", "watch", "watch_untracked", "dry")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, REPO)
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn import functional as F

    from dslint.runtime_checks.dry_step import DrySession, Options

    cuda = torch.cuda.is_available() and os.environ.get("DSLINT_GPU_FORCE_CPU") != "1"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    hidden, tokens, experts = (args.hidden, args.tokens, args.experts) if cuda else (64, 256, args.experts)
    ffn = 4 * hidden
    assert experts % world == 0, "experts must be divisible by the world size"

    class AllToAll(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001
            out = torch.empty_like(x)
            dist.all_to_all_single(out, x.contiguous())
            return out

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001
            out = torch.empty_like(grad)
            dist.all_to_all_single(out, grad.contiguous())
            return out

    class MoELayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(hidden)
            self.gate = nn.Linear(hidden, experts, bias=False)
            self.local = experts // world
            self.w1 = nn.Parameter(torch.randn(self.local, hidden, ffn) * hidden ** -0.5)
            self.w2 = nn.Parameter(torch.randn(self.local, ffn, hidden) * ffn ** -0.5)

        def forward(self, x):  # noqa: ANN001
            n = x.shape[0]
            h = self.norm(x)
            prob, idx = self.gate(h).float().softmax(-1).max(-1)
            cap = int(1.25 * n / experts)
            onehot = F.one_hot(idx, experts)
            pos = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
            keep = pos < cap
            slot = torch.where(keep, idx * cap + pos, experts * cap)  # dropped tokens go to a spare row
            buf = h.new_zeros(experts * cap + 1, hidden).index_copy(0, slot, h)[:-1]
            disp = AllToAll.apply(buf.reshape(world, -1)).view(world, self.local, cap, hidden)
            inp = disp.transpose(0, 1).reshape(self.local, world * cap, hidden)
            out = torch.bmm(F.gelu(torch.bmm(inp, self.w1)), self.w2)
            out = out.view(self.local, world, cap, hidden).transpose(0, 1).reshape(world, -1)
            out = AllToAll.apply(out).view(experts * cap, hidden)
            out = torch.cat([out, out.new_zeros(1, hidden)])[slot]
            return x + out * (prob * keep).unsqueeze(-1).to(out.dtype)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(MoELayer() for _ in range(args.layers))

        def forward(self, x):  # noqa: ANN001
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    model = Model().to(device=device, dtype=dtype)
    expert_params = {id(p) for layer in model.layers for p in (layer.w1, layer.w2)}
    dense = [p for p in model.parameters() if id(p) not in expert_params]
    params = list(model.parameters())
    gen = torch.Generator(device=device).manual_seed(1 + rank)
    x = torch.randn(tokens, hidden, device=device, dtype=dtype, generator=gen)

    def step() -> None:
        y = model(x)
        y.float().pow(2).mean().backward()
        for p in dense:  # data-parallel gradient all_reduce (expert-data-parallel group has size 1 here)
            dist.all_reduce(p.grad)
        with torch.no_grad():
            torch._foreach_add_(params, [p.grad for p in params], alpha=-1e-4)
        for p in params:
            p.grad = None

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def timed_steps(n: int) -> tuple[list[float], list[float]]:
        total, host = [], []
        for _ in range(n):
            sync()
            dist.barrier()
            sync()
            t = time.perf_counter()
            step()
            host.append(time.perf_counter() - t)
            sync()
            total.append(time.perf_counter() - t)
        return total, host

    def timed_allreduce(n: int) -> float:
        one = torch.ones(1, device=device)
        sync()
        t = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(one)
        host = time.perf_counter() - t
        sync()
        return host / n

    for _ in range(5):
        step()
    sync()
    session = DrySession(Options(timeout=120), run_id="bench-gpu")
    tracer = session.tracer

    def set_mode(mode: str) -> None:
        tracer.uninstall()
        session.context.uninstall()
        tracer.pending_async.clear()
        if mode == "untraced":
            return
        session.context.install()
        tracer.install()
        tracer.stream_marks = mode != "watch_untracked"
        if mode == "dry":
            tracer.mode = "dry"
            tracer.records = list(tracer.records)[-256:]
        else:
            tracer.watch()

    samples = {m: {"step": [], "host": [], "allreduce": []} for m in MODES}
    per_step: dict[str, int] = {}
    for _round in range(args.rounds):
        for mode in MODES:
            set_mode(mode)
            before = sum(tracer.counts.values())
            step()
            sync()
            per_step[mode] = sum(tracer.counts.values()) - before
            total, host = timed_steps(args.iters)
            samples[mode]["step"] += total
            samples[mode]["host"] += host
            samples[mode]["allreduce"].append(timed_allreduce(args.collectives))
    set_mode("untraced")
    if rank == 0:
        base = samples["untraced"]
        flops = 6 * tokens * 2 * hidden * ffn * args.layers  # fwd+bwd of the expert FFN (top-1)
        summary = {"world_size": world, "backend": "nccl" if cuda else "gloo", "dtype": str(dtype).split(".")[-1],
                   "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                   "hidden": hidden, "ffn": ffn, "experts": experts, "tokens_per_rank": tokens, "layers": args.layers,
                   "iters_per_round": args.iters, "rounds": args.rounds, "modes": {}}
        for mode in MODES:
            s = samples[mode]
            step_min, step_med = min(s["step"]), statistics.median(s["step"])
            entry = {
                "step_ms_min": round(step_min * 1e3, 3), "step_ms_median": round(step_med * 1e3, 3),
                "host_enqueue_ms_min": round(min(s["host"]) * 1e3, 3),
                "host_enqueue_ms_median": round(statistics.median(s["host"]) * 1e3, 3),
                "collectives_per_step": per_step.get(mode, 0),
                "allreduce_host_us": round(min(s["allreduce"]) * 1e6, 2),
                "expert_tflops_median": round(flops / step_med / 1e12, 1),
            }
            if mode != "untraced":
                entry["overhead_pct_min"] = round(100 * (step_min / min(base["step"]) - 1), 2)
                entry["overhead_pct_median"] = round(100 * (step_med / statistics.median(base["step"]) - 1), 2)
                entry["host_us_per_collective"] = round(
                    1e6 * (min(s["allreduce"]) - min(base["allreduce"])), 2)
            summary["modes"][mode] = entry
        print("BENCH_RESULT " + json.dumps(summary), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=1, help="ranks (GPUs) (1)")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per rank (4096)")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--iters", type=int, default=30, help="timed steps per mode and round (30)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of all modes (5)")
    parser.add_argument("--collectives", type=int, default=2000, help="1-element all_reduces per round (2000)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--local_rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.gpus), "--master-port", "29751",
           os.path.abspath(__file__), "--worker", *sys.argv[1:]]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
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
