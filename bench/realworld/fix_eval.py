"""Fixes on the development corpus (issue 22): apply `--fix --unsafe-fixes` to a *copy* of each repository,
re-parse every file, count findings before and after, and check that a second run changes nothing.

For every manifest repository present under --src (default /tmp/realworld, never modified) this copies it to
--dest (default /tmp/fixcorpus/<name>, symlinks kept as links) and, at the copy's root, runs

    python -m dslint check --no-cache --exit-zero --format json .                       (before)
    python -m dslint check --no-cache --fix --unsafe-fixes --format json .              (fix; remaining findings)
    python -m dslint check --no-cache --fix --unsafe-fixes --format json .              (again: must change nothing)

(the second run's findings, a fresh check of the fixed copy, must equal the first run's remaining ones),
then re-parses every .py (CPython `ast`) and .json (dslint's reader) file of the copy and compares with the
same parse of the source tree (a file that parsed must still parse). Prints one row per repository and writes
bench/realworld/results/fixes.json.

    python bench/realworld/fix_eval.py [--src /tmp/realworld] [--dest /tmp/fixcorpus] [names...]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from materialise import read_manifest  # noqa: E402


def dslint(folder: Path, *args: str, timeout: float = 900) -> tuple[dict, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", "--format", "json", *args, "."],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    try:
        return json.loads(done.stdout), seconds
    except json.JSONDecodeError:
        raise SystemExit(f"{folder}: dslint failed ({done.returncode}): {done.stderr[-2000:]}")


def files_of(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath, name)
            if p.is_symlink() or not p.is_file():
                continue
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def parses(name: str, data: bytes) -> bool | None:
    if name.endswith(".py"):
        try:
            ast.parse(data)
        except (SyntaxError, ValueError, RecursionError):
            return False
        return True
    if name.endswith(".json"):
        from dslint.sources.jsonpos import JsonPositionError, load_positioned
        try:
            load_positioned(data.decode("utf-8-sig"))
        except (JsonPositionError, UnicodeDecodeError, RecursionError):
            return False
        return True
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default="/tmp/realworld")
    ap.add_argument("--dest", default="/tmp/fixcorpus")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    rows = []
    listed = read_manifest(HERE / "manifest")
    known = {repo.split("/")[1] for repo, _ in listed}
    # a folder named on the command line that the manifest does not list (e.g. DeepSpeedExamples): its commit
    # is not recorded
    listed += [(f"(not in manifest)/{n}", "unknown") for n in args.names if n not in known]
    for repo, commit in listed:
        name = repo.split("/")[1]
        src = Path(args.src, name)
        if not src.is_dir() or (args.names and name not in args.names):
            continue
        dest = Path(args.dest, name)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(src, dest, symlinks=True)
        original = files_of(src)
        before, t_check = dslint(dest, "--exit-zero")
        fixed, t_fix = dslint(dest, "--exit-zero", "--fix", "--unsafe-fixes")
        after_files = files_of(dest)
        again, _ = dslint(dest, "--exit-zero", "--fix", "--unsafe-fixes")
        again_files = files_of(dest)
        changed = sorted(n for n in after_files if after_files[n] != original.get(n))
        broken = [n for n in changed if parses(n, original[n]) and not parses(n, after_files[n])]
        reparsed = sum(1 for n in after_files if parses(n, after_files[n]) is not None)
        still = {n for n in after_files if parses(n, after_files[n]) is not False}
        lost = [n for n in original if parses(n, original[n]) and n not in still]
        by_code_before = Counter(f["code"] for f in before["findings"])
        by_code_after = Counter(f["code"] for f in fixed["findings"])
        fixable = Counter(f["code"] + ":" + f["fix"]["applicability"] for f in before["findings"]
                          if f.get("fix") and f["fix"].get("edits"))
        row = {"repo": repo, "commit": commit, "findings_before": len(before["findings"]),
               "findings_after": len(fixed["findings"]), "fixes_applied": fixed["fixes"]["applied"],
               "files_changed": changed, "files_reparsed": reparsed, "broken": broken + lost,
               "second_run_applied": again["fixes"]["applied"],
               # the second run applies nothing, so its findings are a fresh check of the fixed tree: the first
               # run's remaining findings (found by re-checks from carried-over sources) must equal them
               "remaining_equal_fresh_check": fixed["findings"] == again["findings"], "second_run_changed_files":
                   sorted(n for n in again_files if again_files[n] != after_files.get(n)),
               "by_code_before": dict(by_code_before), "by_code_after": dict(by_code_after),
               "fixes_offered": dict(fixable), "seconds_check": round(t_check, 2), "seconds_fix": round(t_fix, 2)}
        rows.append(row)
        print(f"{name:16} before {row['findings_before']:3}  applied {row['fixes_applied']:3}  after "
              f"{row['findings_after']:3}  changed {len(changed):2} files  re-parsed {reparsed:5}  broken "
              f"{len(row['broken'])}  2nd run applied {row['second_run_applied']}  remaining = fresh check "
              f"{row['remaining_equal_fresh_check']}  offered {dict(fixable)}",
              flush=True)
    out = HERE / "results" / ("fixes.json" if not args.names else f"fixes-{'-'.join(args.names)}.json")
    out.write_text(json.dumps(rows, indent=2) + "\n")
    total = {k: sum(r[k] for r in rows) for k in ("findings_before", "fixes_applied", "findings_after",
                                                  "files_reparsed", "second_run_applied")}
    print("total", total, "broken", sum(len(r["broken"]) for r in rows), "remaining = fresh check in",
          sum(r["remaining_equal_fresh_check"] for r in rows), "of", len(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
