"""What `dslint check --fix` adds to a run on one script (issue 22's target: within the single-script start-up
budget + 0.1 s).

    python bench/fix_timing.py [--reps N] [--big PATH_TO_A_LARGE_SCRIPT] [--compare OTHER_CHECKOUT]

Writes a 6-line MoE script with a DSL104 hazard (and, with --big, a copy of the given script with the same hazard
appended) into a scratch folder, then measures, restoring the file before every run:
- subprocess wall time of `dslint check FILE` and `dslint check --fix FILE`, caches on (after warm-up) and with
  `--no-cache`, median of N;
- in-process CPU time of `run_check` without and with `fix=True` (imports done, `no_cache`), median of N (in a
  child process per checkout).
With --compare, the same for another checkout of dslint (e.g. `git worktree add /tmp/base <commit>`), its runs
alternating with this one's (same machine state for both), and the two side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HAZARD = ("import deepspeed\nfrom deepspeed.moe.layer import MoE\n"
          "model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n"
          "engine, *_ = deepspeed.initialize(model=model, args=args)\n"
          "for batch in loader:\n    out = engine.module.generate(**batch, do_sample=True)\n")
PROBE = "\n\ndef _dslint_probe(loader, args):\n" + "".join("    " + line + "\n" for line in HAZARD.splitlines())


def subprocess_times(roots: list[Path], folder: Path, name: str, original: str, reps: int, extra: list[str]
                     ) -> dict[Path, tuple[float, float]]:
    def run(root: Path, args: list[str]) -> float:
        env = {**os.environ, "PYTHONPATH": str(root), "DSLINT_CACHE_DIR": str(folder / f"cache-{roots.index(root)}")}
        (folder / name).write_text(original)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dslint", "check", *args, name], cwd=folder, env=env,
                       capture_output=True, timeout=300)
        took = time.perf_counter() - start
        assert ("synced_gpus=True" in (folder / name).read_text()) == ("--fix" in args), "the fix was not applied"
        return took

    for root in roots:
        for _ in range(2):
            run(root, extra), run(root, ["--fix", *extra])
    times = {root: ([], []) for root in roots}
    for _ in range(reps):
        for root in roots:
            times[root][0].append(run(root, extra))
            times[root][1].append(run(root, ["--fix", *extra]))
    return {root: (statistics.median(c), statistics.median(f)) for root, (c, f) in times.items()}


def in_process_times(folder: Path, name: str, original: str, reps: int) -> tuple[list[float], list[float]]:
    """In this process (whose sys.path starts with the checkout to time)."""
    from dslint.commands import run_check
    here = os.getcwd()
    os.chdir(folder)
    try:
        def once(**kw) -> float:
            (folder / name).write_text(original)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                start = time.process_time()
                run_check([Path(name)], no_cache=True, **kw)
                return time.process_time() - start
        for _ in range(2):
            once(), once(fix=True)
        check, fix = [], []
        for _ in range(reps):
            check.append(once())
            fix.append(once(fix=True))
        return check, fix
    finally:
        os.chdir(here)


def in_process_child(root: Path, folder: Path, name: str, original: str, reps: int) -> tuple[list[float], list[float]]:
    (folder / "original.txt").write_text(original)
    done = subprocess.run([sys.executable, __file__, "--child", str(folder), name, str(reps)], cwd=folder,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        folder, name, reps = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
        print(json.dumps(in_process_times(folder, name, (folder / "original.txt").read_text(), reps)))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--big", type=Path)
    ap.add_argument("--compare", type=Path, help="another checkout of dslint, timed alternately with this one")
    args = ap.parse_args()
    roots = [ROOT] + ([args.compare.resolve()] if args.compare else [])
    label = {ROOT: "this" if args.compare else "", **({roots[1]: "compare"} if args.compare else {})}
    cases = [("small.py", HAZARD)]
    if args.big:
        cases.append(("big.py", args.big.read_text() + PROBE))
    with tempfile.TemporaryDirectory(prefix="dslint-fix-timing-") as tmp:
        folder = Path(tmp)
        for name, text in cases:
            lines = text.count("\n")
            for extra in ([], ["--no-cache"]):
                got = subprocess_times(roots, folder, name, text, args.reps, extra)
                for root, (c, f) in got.items():
                    print(f"{label[root]:8}{name} ({lines} lines) subprocess {' '.join(extra) or 'caches on'}: "
                          f"check {c:.3f}s, --fix {f:.3f}s, added {f - c:+.3f}s (median of {args.reps})", flush=True)
            # in-process: one child per checkout and turn, the turns alternating, the samples pooled
            samples = {root: ([], []) for root in roots}
            turns = 2 if args.compare else 1
            for _ in range(turns):
                for root in roots:
                    c, f = in_process_child(root, folder, name, text, max(1, args.reps // turns))
                    samples[root][0].extend(c)
                    samples[root][1].extend(f)
            for root, (c, f) in samples.items():
                mc, mf = statistics.median(c), statistics.median(f)
                print(f"{label[root]:8}{name} ({lines} lines) in-process CPU: check {mc:.3f}s, --fix {mf:.3f}s, "
                      f"added {mf - mc:+.3f}s (median of {len(c)})", flush=True)
            for root in roots:
                shutil.rmtree(folder / f"cache-{roots.index(root)}", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
