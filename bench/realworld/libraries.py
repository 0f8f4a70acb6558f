"""dslint on the most exercised distributed code there is: installed library packages, checked as folders.

Issue 30's target: the installed ``transformers`` (Trainer, integrations), ``accelerate`` and ``deepspeed``
packages, each checked as a folder with default options, give at most 5 findings in all, each a real bug one
can point to (an upstream issue or fix). For every package importable by this interpreter this script runs

    python -m dslint check --no-cache --exit-zero --format json <package folder>

with the working directory at the package's parent (site-packages) and this checkout's dslint first on
PYTHONPATH, writes ``bench/realworld/results-libraries/<package>.json`` (the same record as run.py: the
report unchanged, seconds, the package's version) and prints the findings per code family and every
DSL1xx/2xx/3xx finding (path:line code message) for triage.

    python bench/realworld/libraries.py [--results DIR] [--timeout 900] [packages...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import FAMILIES, dslint_json, family_counts  # noqa: E402

DEFAULT_PACKAGES = ("transformers", "accelerate", "deepspeed")


def package_folder(name: str) -> Path | None:
    """The folder of an installed package, found without importing it (its import may be slow or fail)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=HERE / "results-libraries")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per package (default 900)")
    ap.add_argument("packages", nargs="*", default=list(DEFAULT_PACKAGES))
    args = ap.parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in args.packages:
        folder = package_folder(name)
        if folder is None:
            print(f"{name}: not installed for {sys.executable}", file=sys.stderr)
            continue
        version = importlib.metadata.version(name)
        record = dslint_json(folder.parent, [folder.name], args.timeout,
                             {"package": name, "version": version,
                              "command": f"python -m dslint check --no-cache --exit-zero --format json {name}"})
        (args.results / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        report = record["report"]
        counts = family_counts(report)
        state = "TIMEOUT" if record["timed_out"] else ("crash" if report is None else "")
        print(f"## {name} {version}: {record['seconds']} s {state} "
              + " ".join(f"{f}xx={counts[f]}" for f in FAMILIES))
        for finding in (report or {}).get("findings", []):
            total += 1
            print(f"- {finding['path']}:{finding['line']} {finding['code']} {finding['severity']}: "
                  f"{finding['message'][:160]}")
    print(f"findings in all: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
