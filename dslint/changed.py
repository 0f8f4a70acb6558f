"""Changed files checked in the context of their repository (`dslint check --context DIR FILES…`, the pre-commit
hook; issue 32 part 2).

A commit that changes only `ds_config.json` (train_batch_size 32) beside an already committed `run.sh` that
launches 8 ranks breaks the batch arithmetic (DSL406) -- a finding that needs the launcher, which the commit
does not touch. So the named files are checked together with the other files of DIR, as a run on DIR would
check them (the same launch units, configs and world sizes), and the report keeps:

- the findings located in a named file, and
- the findings located elsewhere that a named file takes part in: one of its evidence facts (the launcher line,
  the config and its consumer, the engine, the ZeRO stage, the MoE layer…) or one of its trace steps is in a
  named file -- a staged launcher that now starts 8 ranks makes the committed script's rank-0-only
  `save_checkpoint` a hang, and that finding names the launcher line as evidence.

Inside a git work tree the context is the files git tracks under DIR (the index: what the commit holds;
pre-commit stashes unstaged changes before its hooks run, so the working tree's text of a tracked file is the
index's), untracked files left out; outside one, every file a run on DIR would read. The input errors kept are
those of the named files and the run's own (internal, configuration); the context's skipped files are not
the commit's business."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterable, Optional

from dslint.findings import Report


def _real(path: str | os.PathLike) -> str:
    return os.path.realpath(os.fspath(path))


def tracked_files(root: Path) -> Optional[set[str]]:
    """The real paths of the files git tracks under `root` (the index), or None when `root` is not in a git
    work tree (or git is missing)."""
    try:
        out = subprocess.run(["git", "-C", os.fspath(root), "ls-files", "-z", "--cached", "--full-name", "--", "."],
                             capture_output=True, timeout=120)
        top = subprocess.run(["git", "-C", os.fspath(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or top.returncode != 0:
        return None
    base = top.stdout.strip()
    return {_real(os.path.join(base, os.fsdecode(name))) for name in out.stdout.split(b"\0") if name}


def named_files(paths: Iterable[Path]) -> set[str]:
    """The real paths of the named files (a named folder stands for every file below it)."""
    return {_real(p) for p in paths}


def _in(path: Optional[str], named: set[str]) -> bool:
    if not path:
        return False
    real = _real(path)
    return real in named or any(real.startswith(n.rstrip(os.sep) + os.sep) for n in named if os.path.isdir(n))


def keep_attributed(report: Report, named: set[str]) -> Report:
    """The report cut to the findings of the named files and those a named file takes part in (above)."""
    report.findings = [f for f in report.findings
                       if _in(f.path, named) or any(_in(e.path, named) for e in f.evidence)
                       or any(_in(t.path, named) for t in f.trace)]
    report.errors = [e for e in report.errors if e.kind in ("internal-error", "config") or _in(e.path, named)]
    return report
