"""Reproducible speed/memory benchmark of `dslint check` against the parsing floors and other linters.

    python bench/run_bench.py [--corpus deepspeed|transformers|transformers-sample|PATH]... [--repeat N] [--others]

Runs, on the same files and in one invocation: dslint cold (result cache cleared; default workers and --jobs
1), dslint warm (result cache kept), libcst parse-only and `ast` parse-only (1 process, the floors), a single
training script cold and on its very first run (beside a bare `import libcst`), and -- with
--others and when installed -- ruff, fixit and torchfix. Each tool runs as its own process; wall time is
measured around it and peak RSS read from wait4(). Prints a table with ratios; --json FILE saves it.

"Cold" keeps what an installed dslint keeps between any two runs: byte-compiled modules (compiled here first,
as pip does at install time) and the compiled dataclass methods of `dslint.codecache` (the cache's `code/`
folder, which the first timed run writes). "First run" clears that folder too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "examples" / "expert_parallel" / "train.py"

PARSE_ONLY = """
import sys, pathlib
files = sorted(p for p in pathlib.Path(sys.argv[2]).rglob("*.py"))
if sys.argv[1] == "ast":
    import ast
    for f in files:
        ast.parse(f.read_bytes())
else:
    import libcst
    for f in files:
        libcst.parse_module(f.read_bytes())
print(len(files))
"""


def corpus_path(name: str) -> Path:
    if name == "transformers-sample":
        # the modeling_*.py files of the first 80 model folders (alphabetical) of the installed transformers
        models = corpus_path("transformers") / "models"
        out = Path(tempfile.mkdtemp(prefix="dslint-bench-tf-"))
        for folder in sorted(p for p in models.iterdir() if p.is_dir())[:80]:
            for f in sorted(folder.glob("modeling_*.py")):
                shutil.copy(f, out / f.name)
        return out
    if name in ("deepspeed", "transformers"):
        spec = importlib.util.find_spec(name)      # locates the package without importing it
        if spec is None or spec.origin is None:
            raise SystemExit(f"{name} is not installed: pip install {name}")
        return Path(spec.origin).parent
    return Path(name)


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def best(cmd, repeat, env=None, before=None):
    runs = []
    for _ in range(repeat):
        if before:
            before()
        runs.append(timed(cmd, env))
    return min(runs, key=lambda r: r[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", action="append", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--others", action="store_true", help="also time ruff, fixit and torchfix if installed")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    corpora = args.corpus or ["deepspeed"]
    cache = Path(tempfile.mkdtemp(prefix="dslint-bench-cache-"))
    env = {"DSLINT_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    py = sys.executable
    # bytecode as an installed package has it (pip compiles at install time): a sandbox that sets
    # PYTHONDONTWRITEBYTECODE would otherwise recompile dslint's own modules in every timed run
    subprocess.run([py, "-m", "compileall", "-q", str(HERE.parent / "dslint")], check=False,
                   stdout=subprocess.DEVNULL)
    results: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                 "platform": platform.platform()}, "runs": {}}

    def clear():
        """The result cache; the compiled dataclass code stays, as `__pycache__` does."""
        for entry in cache.glob("*"):
            if entry.name != "code":
                shutil.rmtree(entry, ignore_errors=True)

    def clear_all():
        shutil.rmtree(cache, ignore_errors=True)

    rows = []
    single_cmd = [py, "-m", "dslint", "check", "--exit-zero", str(SCRIPT)]
    first = best(single_cmd, max(args.repeat, 3), env, clear_all)
    single = best(single_cmd, max(args.repeat, 3), env, clear)
    # the floor of any libcst-based check in the same machine state (this machine's `import libcst` alone
    # varies 0.19-0.45 s with its load)
    floor = best([py, "-c", "import libcst"], max(args.repeat, 3))
    rows.append(("single script", "import libcst alone", *floor))
    rows.append(("single script", "dslint first run", *first))
    rows.append(("single script", "dslint cold", *single))
    for name in corpora:
        path = corpus_path(name)
        n_files = sum(1 for _ in path.rglob("*.py"))
        ast_run = best([py, "-c", PARSE_ONLY, "ast", str(path)], args.repeat)
        cst_run = best([py, "-c", PARSE_ONLY, "libcst", str(path)], args.repeat)
        cold = best([py, "-m", "dslint", "check", "--exit-zero", "--format", "json", "--output", os.devnull,
                     str(path)], args.repeat, env, clear)
        serial = best([py, "-m", "dslint", "check", "--exit-zero", "--format", "json", "--output", os.devnull,
                       "--jobs", "1", str(path)], args.repeat, env, clear)
        warm = best([py, "-m", "dslint", "check", "--exit-zero", "--format", "json", "--output", os.devnull,
                     str(path)], args.repeat, env)
        label = f"{name} ({n_files} files)"
        print(f"{label}: ast {ast_run[0]:.2f} s, libcst {cst_run[0]:.2f} s, dslint cold {cold[0]:.2f} s "
              f"({cold[1]:.0f} MiB)", flush=True)
        rows += [(label, "ast parse-only", *ast_run), (label, "libcst parse-only", *cst_run),
                 (label, "dslint cold", *cold), (label, "dslint cold, --jobs 1", *serial),
                 (label, "dslint warm", *warm)]
        if args.others:
            for tool, cmd in (("ruff", ["ruff", "check", "--no-cache", "--select", "ALL", "--exit-zero", str(path)]),
                              ("fixit", ["fixit", "lint", str(path)]),
                              ("torchfix", ["torchfix", str(path)])):
                if shutil.which(cmd[0]):
                    rows.append((label, tool, *timed(cmd)))
        results["runs"][name] = {"files": n_files, "ast": ast_run[0], "libcst": cst_run[0], "cold": cold[0], "cold_jobs1": serial[0],
                                 "warm": warm[0], "cold_rss_mib": cold[1],
                                 "cold_vs_libcst": cold[0] / cst_run[0], "cold_jobs1_vs_libcst": serial[0] / cst_run[0], "warm_vs_cold": warm[0] / cold[0]}
    clear_all()
    results["single_script_cold_s"] = single[0]
    results["single_script_first_run_s"] = first[0]
    results["import_libcst_s"] = floor[0]
    print(f"{'corpus':<28} {'tool':<20} {'wall s':>8} {'peak RSS MiB':>13} {'rc':>3}")
    for corpus, tool, wall, rss, rc in rows:
        print(f"{corpus:<28} {tool:<20} {wall:>8.2f} {rss:>13.0f} {rc:>3}")
    for name, r in results["runs"].items():
        print(f"{name}: dslint cold / libcst parse-only = {r['cold_vs_libcst']:.2f} ({r['cold_jobs1_vs_libcst']:.2f} "
              f"with --jobs 1); warm / cold = "
              f"{r['warm_vs_cold']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
