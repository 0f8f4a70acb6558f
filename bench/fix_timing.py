"""What `dslint check --fix` adds to a run on one script (issue 22's target: within the single-script start-up
budget + 0.1 s).

    python bench/fix_timing.py [--reps N] [--big PATH_TO_A_LARGE_SCRIPT]

Writes a 6-line MoE script with a DSL104 hazard (and, with --big, a copy of the given script with the same hazard
appended) into a scratch folder, then measures, restoring the file before every run:
- subprocess wall time of `dslint check FILE` and `dslint check --fix FILE`, caches on (after warm-up) and with
  `--no-cache`, median of N;
- in-process CPU time of `run_check` without and with `fix=True` (imports done, `no_cache`), median of N.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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


def subprocess_times(folder: Path, name: str, original: str, reps: int, extra: list[str]) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DSLINT_CACHE_DIR": str(folder / "cache")}

    def run(args: list[str]) -> float:
        (folder / name).write_text(original)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dslint", "check", *args, name], cwd=folder, env=env,
                       capture_output=True, timeout=300)
        took = time.perf_counter() - start
        assert ("synced_gpus=True" in (folder / name).read_text()) == ("--fix" in args), "the fix was not applied"
        return took

    for _ in range(2):
        run(extra), run(["--fix", *extra])
    check, fix = [], []
    for _ in range(reps):
        check.append(run(extra))
        fix.append(run(["--fix", *extra]))
    return statistics.median(check), statistics.median(fix)


def in_process_times(folder: Path, name: str, original: str, reps: int) -> tuple[float, float]:
    sys.path.insert(0, str(ROOT))
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
        return statistics.median(check), statistics.median(fix)
    finally:
        os.chdir(here)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--big", type=Path)
    args = ap.parse_args()
    cases = [("small.py", HAZARD)]
    if args.big:
        cases.append(("big.py", args.big.read_text() + PROBE))
    with tempfile.TemporaryDirectory(prefix="dslint-fix-timing-") as tmp:
        folder = Path(tmp)
        for name, text in cases:
            lines = text.count("\n")
            for extra in ([], ["--no-cache"]):
                c, f = subprocess_times(folder, name, text, args.reps, extra)
                print(f"{name} ({lines} lines) subprocess {' '.join(extra) or 'caches on'}: check {c:.3f}s, "
                      f"--fix {f:.3f}s, added {f - c:+.3f}s (median of {args.reps})", flush=True)
            c, f = in_process_times(folder, name, text, args.reps)
            print(f"{name} ({lines} lines) in-process CPU: check {c:.3f}s, --fix {f:.3f}s, added {f - c:+.3f}s",
                  flush=True)
            shutil.rmtree(folder / "cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
