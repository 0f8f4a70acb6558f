"""Repeat a pre-flight hang scenario and tally the diagnoses: is it the same every time, and how fast?

    python bench/waitfor_repeat.py [--runs 10] [--timeout 30] [--launcher torchrun] SCRIPT [ARGS…]

Each run: ``torchrun --nproc-per-node 2 -m dslint preflight --timeout T --report … SCRIPT ARGS`` (CPU, gloo).
Prints one line per run (exit code, cause, rule code, divergence line, seconds from the last rank blocking to
the verdict, wall time) and a summary as JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=REPO, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", NO_COLOR="1")
    runs = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp, socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            report = os.path.join(tmp, "report.json")
            cmd = [os.path.join(os.path.dirname(sys.executable), "torchrun"), "--nproc-per-node", str(args.ranks),
                   "--master-port", str(port), "-m", "dslint", "preflight", "--timeout", str(args.timeout),
                   "--report", report, os.path.abspath(args.script), *args.args]
            start = time.monotonic()
            proc = subprocess.run(cmd, cwd=tmp, env=dict(env, TMPDIR=tmp), capture_output=True, text=True,
                                  timeout=args.timeout + 120)
            wall = time.monotonic() - start
            data = json.load(open(report)) if os.path.exists(report) else {}
            abort = data.get("abort") or {}
            point = data.get("divergence_point") or {}
            row = {"run": i, "exit": data.get("exit_code"), "cause": abort.get("cause"),
                   "code": (data.get("diagnosis") or {}).get("code"),
                   "divergence": f"{os.path.basename(point.get('path') or '?')}:{point.get('line')} {point.get('text')}",
                   "last_blocked_s": abort.get("last_blocked_s"), "wall_s": round(wall, 2), "rc": proc.returncode}
            print(json.dumps(row), flush=True)
            runs.append(row)
    same = collections.Counter((r["exit"], r["cause"], r["code"], r["divergence"]) for r in runs)
    delays = [r["last_blocked_s"] for r in runs if r["last_blocked_s"] is not None]
    summary = {"runs": len(runs), "distinct_diagnoses": [list(k) + [n] for k, n in same.items()],
               "last_blocked_s_max": max(delays) if delays else None,
               "last_blocked_s_median": sorted(delays)[len(delays) // 2] if delays else None,
               "wall_s_max": max(r["wall_s"] for r in runs)}
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "summary": summary}, f, indent=2)


if __name__ == "__main__":
    main()
