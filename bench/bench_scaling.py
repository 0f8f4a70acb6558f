"""Scaling benchmark (issue 33): cold `dslint check` of synthetic repositories whose launch scripts all import one
package, against libcst parse-only of the same files, as the number of launch units U and of package modules M
grow.

    python bench/bench_scaling.py [--units 1,10,100,400] [--modules 20,200] [--repeat 2] [--plot scaling.png]
    python bench/bench_scaling.py --generate DEST --units 100 --modules 200     # one repository, kept

Each repository (generated under a temporary folder, deleted afterwards) is the shape of a research monorepo:

- `synpkg/`: M modules. Each has collectives (`dist.all_reduce`, `dist.barrier`, `dist.broadcast`), helpers
  called under a rank test (`if dist.get_rank() == 0:` -- some hazards, some clean twins: every rank takes the
  collective), a model class whose `forward` gathers, a checkpoint helper handed the engine
  (`engine.save_checkpoint`) and a generate helper; each module imports two others (fan-in: the package's
  modules reach most of the package), and `synpkg/train_loop.py` imports a spread of them;
- `scripts/train_<u>.py`: U launch scripts, each importing `synpkg.train_loop` and two modules of its own choice,
  handing a model to `deepspeed.initialize(..., config=args.deepspeed_config)` and calling the package's helpers
  with the engine;
- `ds_config.json` (ZeRO-3) and `launch.sh` with one `deepspeed --num_gpus 8 scripts/train_<u>.py
  --deepspeed_config ds_config.json` line per script.

For each (U, M), in fresh processes and alternated `--repeat` times: libcst parse-only of the repository's Python
files (one process: the floor) and `dslint check --no-cache .` (cold; default workers). Wall time (min of the
repeats, and the spread), CPU time (user + system of the process tree) and peak RSS: the largest sum over the
process tree (the main process and its forked workers, sampled from /proc every 10 ms) and the largest single
process (`ru_maxrss`). The ratio cold / parse-only is taken within each round (same-run ratio) and its
median and range over the rounds are printed. The markdown table goes to stdout; with matplotlib importable a
PNG plot of time against U is written (`--plot`), otherwise only the table (said on stderr). Per-unit slope:
(time at the largest U - time at U=1) / (U - 1), as a fraction of the U=1 time. CPU seconds (user + system of the
process tree) are given beside wall seconds: on a loaded machine they move much less than wall time (the CPU
ratio compares all of dslint's processes' CPU with the one parse-only process's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARSE_ONLY = """
import sys, pathlib, libcst
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        libcst.parse_module(f.read_bytes())
    except Exception:
        pass
"""

# ---------------------------------------------------------------------------------------------- generator

MODULE = '''"""Synthetic module {i} of synpkg: collectives, rank tests, an engine hand-off."""
import torch
import torch.distributed as dist

from synpkg import {dep_a} as dep_a
from synpkg.{dep_b} import reduce_{dep_b_i}

SCALE_{i} = {scale}


def reduce_{i}(tensor, group=None):
    """Every rank of the group reduces."""
    dist.all_reduce(tensor, group=group)
    return tensor / dist.get_world_size(group)


def sync_{i}():
    dist.barrier()


def share_{i}(value, src=0):
    dist.broadcast(value, src=src)
    return value


def rank_zero_{i}(tensor):
    """A hazard when the caller is on one rank only{hazard_doc}."""
    if dist.get_rank() == 0:
        print("step", SCALE_{i})
{hazard_body}
    return tensor


def balanced_{i}(tensor):
    """The clean twin: the rank test only guards a print, every rank reduces."""
    if dist.get_rank() == 0:
        print("reducing", tensor.shape)
    reduce_{i}(tensor)
    return dep_a.reduce_{dep_a_i}(tensor)


def chained_{i}(tensor, steps=3):
    for _ in range(steps):
        tensor = reduce_{dep_b_i}(tensor)
        tensor = tensor * SCALE_{i}
    return tensor


class Block{i}(torch.nn.Module):
    def __init__(self, width={width}):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        y = self.norm(self.proj(x))
        if self.training:
            y = y + dep_a.Block{dep_a_i}(y.shape[-1])(y)
        return y


def save_{i}(engine, folder, tag=None):
    """Every rank saves (ZeRO-3 gathers the partitions)."""
    engine.save_checkpoint(folder, tag=tag)
    sync_{i}()


def maybe_save_{i}(engine, folder, step):
{save_body}


def sample_{i}(engine, prompts):
{generate_body}


def metrics_{i}(values):
    total = sum(values)
    count = max(len(values), 1)
    table = {{"mean": total / count, "count": count, "module": {i}}}
    for key in sorted(table):
        table[key] = table[key] if key != "mean" else round(table[key], 4)
    return table


def schedule_{i}(step, warmup={warmup}, total=1000):
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 1.0 - progress)
'''

HAZARD = "        reduce_{i}(tensor)  # a collective one rank enters"
CLEAN = "        pass\n    reduce_{i}(tensor)"
SAVE_HAZARD = "    if dist.get_rank() == 0 and step % 100 == 0:\n        engine.save_checkpoint(folder)"
SAVE_CLEAN = "    if step % 100 == 0:\n        save_{i}(engine, folder)"
GEN_HAZARD = ("    if dist.get_rank() == 0:\n        return [engine.module.generate(p, max_new_tokens=8) for p in prompts]\n"
              "    return []")
GEN_CLEAN = "    return [engine.module.generate(p, max_new_tokens=8) for p in prompts]"

TRAIN_LOOP = '''"""The package's training loop: what every launch script runs."""
import torch.distributed as dist

{imports}


def train(engine, loader, folder, steps=10):
    for step, batch in enumerate(loader):
        loss = engine(batch)
        engine.backward(loss)
        engine.step()
{calls}
        if step >= steps:
            break
    dist.barrier()
'''

SCRIPT = '''"""Launch script {u}: fine-tunes a model with the shared package."""
import argparse

import deepspeed
import torch
import torch.distributed as dist

from synpkg import train_loop
from synpkg import mod_{a} as first
from synpkg.mod_{b} import balanced_{b}, maybe_save_{b}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspeed_config", default="ds_config.json")
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    model = first.Block{a}({width})
    engine, optimizer, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                        config=args.deepspeed_config)
    train_loop.train(engine, loader, "checkpoints/run_{u}")
    balanced_{b}(torch.zeros({width}))
    maybe_save_{b}(engine, "checkpoints/run_{u}", {u})
{tail}


if __name__ == "__main__":
    main()
'''
SCRIPT_HAZARD = ('    if dist.get_rank() == 0:\n        first.share_{a}(torch.ones(1))  # only rank 0 broadcasts')
SCRIPT_CLEAN = '    first.share_{a}(torch.ones(1))'

CONFIG = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
          "zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True},
          "bf16": {"enabled": True}}


def generate(dest: Path, units: int, modules: int, seed: int = 33) -> Path:
    """Write a synthetic repository of `units` launch scripts over a package of `modules` modules to `dest`."""
    rng = random.Random(seed)
    pkg = dest / "synpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Synthetic package (bench/bench_scaling.py)."""\n')
    for i in range(modules):
        a, b = (i * 7 + 3) % modules, (i // 2 + 1) % modules
        if a == i:
            a = (i + 1) % modules
        if b == i:
            b = (i + 2) % modules
        hazard = i % 5 == 0
        text = MODULE.format(
            i=i, dep_a=f"mod_{a}", dep_a_i=a, dep_b=f"mod_{b}", dep_b_i=b, scale=rng.randint(1, 9),
            width=rng.choice((64, 128, 256)), warmup=rng.randint(10, 100),
            hazard_doc=" (this module's twin is a hazard)" if hazard else "",
            hazard_body=(HAZARD if hazard else CLEAN).format(i=i),
            save_body=(SAVE_HAZARD if i % 7 == 0 else SAVE_CLEAN).format(i=i),
            generate_body=GEN_HAZARD if i % 11 == 0 else GEN_CLEAN)
        (pkg / f"mod_{i}.py").write_text(text)
    picked = sorted(rng.sample(range(modules), min(8, modules)))
    (pkg / "train_loop.py").write_text(TRAIN_LOOP.format(
        imports="\n".join(f"from synpkg import mod_{k}" for k in picked),
        calls="\n".join(f"        mod_{k}.maybe_save_{k}(engine, folder, step)" for k in picked[:4])))
    scripts = dest / "scripts"
    scripts.mkdir()
    lines = ["#!/bin/bash", "# Every fine-tuning script of the repository, on one 8-GPU node."]
    for u in range(units):
        a, b = rng.randrange(modules), rng.randrange(modules)
        tail = (SCRIPT_HAZARD if u % 4 == 0 else SCRIPT_CLEAN).format(a=a)
        (scripts / f"train_{u}.py").write_text(SCRIPT.format(u=u, a=a, b=b, width=128, tail=tail))
        lines.append(f"deepspeed --num_gpus 8 scripts/train_{u}.py --deepspeed_config ds_config.json")
    (dest / "launch.sh").write_text("\n".join(lines) + "\n")
    (dest / "ds_config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    return dest


# ---------------------------------------------------------------------------------------------- measuring

def _tree_rss(root: int) -> int:
    """RSS bytes of `root` and its descendants now (from /proc; 0 where there is none)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * page
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def measure(cmd: list[str], cwd: Path, env: dict) -> dict:
    """Wall and CPU seconds of `cmd` and its children, the peak RSS summed over its process tree (sampled) and
    the largest single process's."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            stop.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"{' '.join(cmd)}: exit {proc.returncode}\n{err.decode(errors='replace')[-2000:]}\n")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "tree_rss": peak[0], "max_rss": after.ru_maxrss * 1024}


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f}"


def run(units: list[int], modules: list[int], repeat: int, jobs: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    import compileall
    compileall.compile_dir(str(ROOT / "dslint"), quiet=1)     # as installed: no run compiles dslint's modules
    dslint = [sys.executable, "-m", "dslint", "check", "--no-cache", "--exit-zero", "--format", "json"]
    if jobs:
        dslint += ["--jobs", str(jobs)]
    rows = []
    top = Path(tempfile.mkdtemp(prefix="dslint-scaling-"))
    try:
        for m in modules:
            for u in units:
                repo = generate(top / f"u{u}-m{m}", u, m)
                parse, cold = [], []
                for _ in range(repeat):        # alternated: each round's ratio is a same-run ratio
                    parse.append(measure([sys.executable, "-c", PARSE_ONLY, "."], repo, env))
                    cold.append(measure(dslint + ["."], repo, env))
                out = subprocess.run(dslint + ["."], cwd=repo, env=env, capture_output=True, text=True)
                try:
                    findings = len(json.loads(out.stdout)["findings"])
                except (ValueError, KeyError):
                    findings = -1
                ratios = [c["wall"] / p["wall"] for p, c in zip(parse, cold)]
                row = {"U": u, "M": m, "files": sum(1 for _ in repo.rglob("*.py")),
                       "parse": min(p["wall"] for p in parse), "cold": min(c["wall"] for c in cold),
                       "cold_max": max(c["wall"] for c in cold), "cpu": min(c["cpu"] for c in cold),
                       "parse_cpu": min(p["cpu"] for p in parse),
                       "ratio": statistics.median(ratios), "ratio_lo": min(ratios), "ratio_hi": max(ratios),
                       "tree_rss": max(c["tree_rss"] for c in cold), "max_rss": max(c["max_rss"] for c in cold),
                       "findings": findings}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                shutil.rmtree(repo, ignore_errors=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return rows


def table(rows: list[dict]) -> str:
    out = ["| M | U | .py files | parse-only s (CPU) | cold s (min–max) | cold CPU s | cold / parse-only, median (range) "
           "| CPU ratio | peak RSS tree / one process MiB | findings |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['M']} | {r['U']} | {r['files']} | {r['parse']:.2f} ({r['parse_cpu']:.2f}) "
                   f"| {r['cold']:.2f}–{r['cold_max']:.2f} "
                   f"| {r['cpu']:.2f} | **{r['ratio']:.2f}×** ({r['ratio_lo']:.2f}–{r['ratio_hi']:.2f}) "
                   f"| {r['cpu'] / r['parse_cpu']:.2f}× "
                   f"| {_mib(r['tree_rss'])} / {_mib(r['max_rss'])} | {r['findings']} |")
    for m in dict.fromkeys(r["M"] for r in rows):
        mine = sorted((r for r in rows if r["M"] == m), key=lambda r: r["U"])
        first, last = mine[0], mine[-1]
        if first["U"] == 1 and last["U"] > 1:
            slope = (last["cold"] - first["cold"]) / (last["U"] - 1)
            out.append(f"\nM={m}: slope {slope * 1000:.1f} ms per added launch unit = "
                       f"{100 * slope / first['cold']:.2f} % of the U=1 time ({first['cold']:.2f} s)")
    return "\n".join(out)


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in dict.fromkeys(r["M"] for r in rows):
        mine = sorted((r for r in rows if r["M"] == m), key=lambda r: r["U"])
        xs = [r["U"] for r in mine]
        ax.plot(xs, [r["cold"] for r in mine], "o-", label=f"dslint cold, M={m}")
        ax.plot(xs, [r["parse"] for r in mine], "x--", label=f"libcst parse-only, M={m}")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("launch units U")
    ax.set_ylabel("wall seconds (min of repeats)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", default="1,10,100,400")
    ap.add_argument("--modules", default="20,200")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=0, help="dslint --jobs (0: its default)")
    ap.add_argument("--plot", type=Path, default=Path("scaling.png"))
    ap.add_argument("--generate", type=Path, help="only write one repository (the first --units / --modules) here")
    args = ap.parse_args()
    units = [int(x) for x in args.units.split(",")]
    modules = [int(x) for x in args.modules.split(",")]
    if args.generate:
        generate(args.generate, units[0], modules[0])
        print(args.generate)
        return 0
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # the temporary repositories are deleted
    rows = run(units, modules, args.repeat, args.jobs)
    print(table(rows))
    if plot(rows, args.plot):
        print(f"\nplot: {args.plot}")
    else:
        print("\nmatplotlib is not importable: table only (no plot)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
