"""Whole-repository timing of `dslint check` at a repository root (issue 18, target 5).

    python bench/realworld/materialise.py --manifest bench/realworld/bench_manifest
    python bench/realworld/bench_repo.py [--dest /tmp/realworld] [--repeat 3] [NAME]

For each run, in fresh processes: libcst parse-only of the repository's Python files (the floor the target is
stated against), `dslint check --no-cache` (cold), then with a result cache: a first run, an unchanged re-run
(warm), and a run after appending a comment to one launched script (the edit is undone afterwards). Prints
wall and CPU seconds and the ratios cold / parse-only and after-edit / cold. dslint's bytecode is compiled first
(into its `__pycache__`, as an install does), so that no run compiles dslint's sources.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PARSE_ONLY = """
import sys, pathlib, libcst
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        libcst.parse_module(f.read_bytes())
    except Exception:
        pass
"""


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def edited_script(repo: Path) -> Path:
    """A script a launcher line runs: the first `deepspeed …py` / `python …py` named in a shell script."""
    import re
    for sh in sorted(repo.rglob("*.sh")):
        for m in re.finditer(r"(?:deepspeed|torchrun|python)\s+(?:-\S+\s+\S+\s+)*([\w./-]+\.py)", sh.read_text(errors="replace")):
            for base in (sh.parent, repo):
                path = (base / m.group(1)).resolve()
                if path.is_file() and repo.resolve() in path.parents:
                    return path
    return sorted(repo.rglob("*.py"))[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dest", type=Path, default=Path("/tmp/realworld"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("name", nargs="?", default="DeepSpeedExamples")
    args = ap.parse_args()
    repo = args.dest / args.name
    if not repo.is_dir():
        print(f"{repo} is missing: run materialise.py --manifest {HERE / 'bench_manifest'} first", file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # dslint as installed: `pip install` writes its bytecode (libcst's is there already); run from the source tree
    # with PYTHONDONTWRITEBYTECODE set, every run would compile dslint's modules again (~0.08 s on this machine)
    import compileall
    compileall.compile_dir(str(ROOT / "dslint"), quiet=1)
    dslint = [sys.executable, "-m", "dslint", "check", "--exit-zero", "--format", "json", "."]
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in ("parse-only", "cold", "warm", "after edit")}
    script = edited_script(repo)
    original = script.read_bytes()
    for _ in range(args.repeat):
        rows["parse-only"].append(timed([sys.executable, "-c", PARSE_ONLY, "."], repo, env))
        rows["cold"].append(timed(dslint[:4] + ["--no-cache"] + dslint[4:], repo, env))
        cache = Path(tempfile.mkdtemp(prefix="dslint-bench-cache-"))
        try:
            cenv = {**env, "DSLINT_CACHE_DIR": str(cache)}
            timed(dslint, repo, cenv)
            rows["warm"].append(timed(dslint, repo, cenv))
            try:
                script.write_bytes(original + b"\n# edited by bench_repo.py\n")
                rows["after edit"].append(timed(dslint, repo, cenv))
            finally:
                script.write_bytes(original)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    files = sum(1 for _ in repo.rglob("*.py"))
    print(f"{args.name}: {files} Python files; edited: {script.relative_to(repo.resolve()) if script.is_absolute() else script}")
    print(f"{'run':<12}{'wall s (min)':>14}{'cpu s (min)':>13}")
    best = {}
    for name, values in rows.items():
        best[name] = min(w for w, _ in values)
        print(f"{name:<12}{best[name]:>14.2f}{min(c for _, c in values):>13.2f}")
    print(f"cold / parse-only = {best['cold'] / best['parse-only']:.2f}; after edit / cold = "
          f"{best['after edit'] / best['cold']:.2f}; warm / cold = {best['warm'] / best['cold']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
