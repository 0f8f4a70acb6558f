"""Run dslint at the root of each materialised development-corpus repository.

For every manifest line (see materialise.py) whose folder exists under ``--dest`` this runs, with the
working directory at the repository root as a user would,

    python -m dslint check --no-cache --exit-zero --format json .

with this checkout's dslint first on PYTHONPATH, under a per-repository time limit. It writes
``bench/realworld/results/<name>.json`` = ``{"repo", "commit", "seconds", "timed_out", "returncode",
"command", "report"}`` where ``report`` is dslint's JSON output unchanged (``null`` on a timeout or a
crash, with ``stderr_tail``), and prints one row per repository with the findings per code family
(DSL0xx ... DSL4xx).

    python bench/realworld/run.py [--dest /tmp/realworld] [--timeout 300] [--jobs N] [--show-unproven] [names...]

``--show-unproven`` passes dslint's option of that name: the findings whose evidence is incomplete, hidden by
default, are reported too, marked ``"proven": false`` (``precision.py`` counts them apart from the default view).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent  # the dslint checkout this script belongs to
sys.path.insert(0, str(HERE))
from materialise import read_manifest  # noqa: E402

FAMILIES = ("DSL0", "DSL1", "DSL2", "DSL3", "DSL4")


def family_counts(report: dict | None) -> Counter:
    counts: Counter = Counter()
    for finding in (report or {}).get("findings", []):
        code = finding.get("code", "")
        counts[code[:4] if code[:4] in FAMILIES else "other"] += 1
    return counts


def dslint_json(folder: Path, args: list[str], timeout: float, record: dict) -> dict:
    """Run `python -m dslint check --no-cache --exit-zero --format json <args>` in `folder` with this checkout's
    dslint first on PYTHONPATH, bounded by `timeout`; fill `record` (timed_out, returncode, report or
    stderr_tail, seconds) and return it."""
    command = [sys.executable, "-m", "dslint", "check", "--no-cache", "--exit-zero", "--format", "json", *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    start = time.perf_counter()
    record.update(timed_out=False, returncode=None, report=None)
    try:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        record["timed_out"] = True
    else:
        record["returncode"] = done.returncode
        try:
            record["report"] = json.loads(done.stdout)
        except json.JSONDecodeError:
            record["stderr_tail"] = done.stderr[-4000:]
    record["seconds"] = round(time.perf_counter() - start, 2)
    return record


def run_one(repo: str, commit: str, folder: Path, timeout: float, jobs: int | None,
            show_unproven: bool = False) -> dict:
    args = (["--jobs", str(jobs)] if jobs is not None else []) + (["--show-unproven"] if show_unproven else []) + ["."]
    command = ["python", "-m", "dslint", "check", "--no-cache", "--exit-zero", "--format", "json", *args]
    return dslint_json(folder, args, timeout, {"repo": repo, "commit": commit, "command": " ".join(command),
                                               "timeout_s": timeout})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, default=HERE / "manifest")
    ap.add_argument("--dest", type=Path, default=Path("/tmp/realworld"))
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per repository (default 300)")
    ap.add_argument("--jobs", type=int, default=None, help="pass --jobs N to dslint (default: dslint's)")
    ap.add_argument("--show-unproven", action="store_true",
                    help="report the findings hidden by default too, marked unproven (precision.py counts them apart)")
    ap.add_argument("names", nargs="*", help="only these repositories (name or owner/name)")
    args = ap.parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    rows = []
    for repo, commit in read_manifest(args.manifest):
        name = repo.split("/", 1)[1]
        if args.names and repo not in args.names and name not in args.names:
            continue
        folder = args.dest / name
        if not folder.is_dir():
            print(f"{repo}: {folder} missing -- run bench/realworld/materialise.py first", file=sys.stderr)
            continue
        record = run_one(repo, commit, folder, args.timeout, args.jobs, args.show_unproven)
        (args.results / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        rows.append((name, record))
        print(f"{name}: {record['seconds']} s" + (" TIMEOUT" if record["timed_out"] else ""), file=sys.stderr)
    header = f"{'repository':<16}{'files':>7}{'secs':>9}" + "".join(f"{f + 'xx':>8}" for f in FAMILIES) + f"{'total':>8}"
    print(header)
    print("-" * len(header))
    for name, record in rows:
        report = record["report"]
        counts = family_counts(report)
        files = report.get("files_checked", "?") if report else ("timeout" if record["timed_out"] else "crash")
        print(f"{name:<16}{files!s:>7}{record['seconds']:>9.1f}" + "".join(f"{counts[f]:>8}" for f in FAMILIES)
              + f"{sum(counts.values()):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
