"""DSLINT_TIMELINE: where a whole-repository run spends its wall time (docs/performance.md), and the facts
the outline workers hand to the analysis workers (`dslint.pipeline.workers.text_facts`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dslint
from dslint.config import Settings
from dslint.engine import Checker
from dslint.pipeline.workers import PARALLEL_MIN_FILES
from dslint.sources.guard import check
from dslint.program.project_view import _IDENTIFIER
from dslint.sources import PythonSource
from dslint.timeline import summary

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

SCRIPT = '''import deepspeed
import torch.distributed as dist


def step_{n}(engine, batch):
    if dist.get_rank() == 0:
        dist.barrier()
    return engine(batch)


if __name__ == "__main__":
    engine, *_ = deepspeed.initialize(model=None, config="ds_config.json")
'''
NESTED = "x = " + "(" * 210 + "1" + ")" * 210 + "\n"       # over the guard's bracket depth


def _tree(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(PARALLEL_MIN_FILES + 2):
        (root / f"train_{n:02}.py").write_text(SCRIPT.format(n=n))
    (root / "deep.py").write_text("import deepspeed\n" + NESTED)
    (root / "ds_config.json").write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    return root


def _timeline_rows(root: Path, log: Path) -> list[list[str]]:
    """`dslint check --no-cache -j 2` at `root` with DSLINT_TIMELINE=log: the timeline's rows."""
    env = {**os.environ, "PYTHONPATH": str(Path(dslint.__file__).parent.parent), "DSLINT_TIMELINE": str(log)}
    run = subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", "-j", "2", "--exit-zero", "."],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return [line.split("\t") for line in log.read_text().splitlines()]


def test_the_timeline_records_every_process_phase_and_file(tmp_path):
    root = _tree(tmp_path / "repo")
    log = tmp_path / "timeline.tsv"
    rows = _timeline_rows(root, log)
    assert all(len(r) == 5 and float(r[2]) <= float(r[3]) and float(r[4]) >= 0 for r in rows)
    by_pid: dict[str, set[str]] = {}
    for pid, name, *_ in rows:
        by_pid.setdefault(pid, set()).add(name)
    main = next(pid for pid, names in by_pid.items() if "check process (from its start)" in names)
    assert {"collect and read inputs", "outlines (forked)", "config references (serial)",
            "analysis (forked)"} <= by_pid[main]
    # the analysis workers' imbalance: the busiest one's wall time over the mean (issue 33)
    assert any(n.startswith("analysis workers: max/mean busy ") and n.endswith("(2 workers)") for n in by_pid[main])
    workers = [names for pid, names in by_pid.items() if pid != main]
    assert any(any(n.startswith("outline worker") for n in names) for names in workers)
    assert sum(any(n.startswith("analysis worker") for n in names) for names in workers) == 2
    files = {n.strip() for names in workers for n in names if n.startswith("  ")}
    assert files == {p.name for p in root.iterdir()}         # every file's analysis, in one worker or the other
    text = summary(str(log))
    assert "files (sum)" in text and "analysis worker" in text and f"process {main}:" in text


def test_no_timeline_without_the_variable(tmp_path):
    root = _tree(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if k != "DSLINT_TIMELINE"}
    env["PYTHONPATH"] = str(Path(dslint.__file__).parent.parent)
    run = subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", "-j", "2", "--exit-zero", "."],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in root.iterdir()) == sorted([f"train_{n:02}.py" for n in range(PARALLEL_MIN_FILES + 2)]
                                                            + ["deep.py", "ds_config.json"])


def test_files_that_may_hand_a_config_are_parsed_while_the_outline_workers_run(tmp_path):
    root = _tree(tmp_path / "repo")
    (root / "plain.py").write_text("import torch.distributed as dist\n\ndef f():\n    dist.barrier()\n")
    log = tmp_path / "timeline.tsv"
    rows = _timeline_rows(root, log)
    main = next(r[0] for r in rows if r[1] == "check process (from its start)")
    parses = [r for r in rows if r[0] == main and r[1].startswith("libcst parse")]
    parsed_here = {r[1].removeprefix("libcst parse ") for r in parses}
    # every script hands `config=` to deepspeed.initialize: all parsed here, once, none of them after the
    # outline phase; plain.py hands no config (its tree, if any, is an analysis worker's)
    assert parsed_here == {f"train_{n:02}.py" for n in range(PARALLEL_MIN_FILES + 2)}
    workers = {r[1] for r in rows if r[0] != main and r[1].startswith("libcst parse")}
    assert not workers & {f"libcst parse {p}" for p in parsed_here}    # inherited, not parsed again
    assert any(r[0] == main and r[1].startswith("import ") and r[1].endswith("(main, while outlining)") for r in rows)


def test_the_main_process_parses_as_outlines_come_back_and_never_builds_one():
    from dslint.pipeline.workers import WhileOutlining
    from dslint.program.outline import build_outline, parse_tree
    from dslint.program.project_view import ProjectView
    texts = [SCRIPT.format(n=0), "import os\n", SCRIPT.format(n=1), SCRIPT.format(n=2)]
    python = [PythonSource(f"s{i}.py", t) for i, t in enumerate(texts)]
    for src in python[:3]:      # as the outline workers hand them back: the first three so far
        src.__dict__["outline"] = build_outline(parse_tree(src.text, src.path), "")
    step = WhileOutlining(["json"], python, ProjectView(python))
    assert step() is True                                   # the import
    assert step() is True and "module" in python[0].__dict__
    assert step() is True and "module" not in python[1].__dict__ and "module" in python[2].__dict__
    assert step() is False and "outline" not in python[3].__dict__     # waits for it: not built here
    python[3].__dict__["outline"] = build_outline(parse_tree(python[3].text, "s3.py"), "")
    assert step() is True and "module" in python[3].__dict__
    assert step() is False and step() is False


def test_outline_workers_hand_over_the_text_facts_and_findings_do_not_change(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    monkeypatch.chdir(root)
    reports = {}
    for jobs in (1, 2):
        checker = Checker(Settings(root=root, deepspeed_version="0.19.8"), jobs=jobs)
        reports[jobs] = [f.model_dump() for f in checker.check_paths([root]).findings]
        if jobs == 2:
            python = [s for s in checker.sources if isinstance(s, PythonSource)]
            assert len(python) == PARALLEL_MIN_FILES + 3
            for src in python:
                facts = src.__dict__
                # built by the outline workers (this process built no outline of its own)
                assert {"outline", "too_complex", "_identifiers"} <= facts.keys()
                assert facts["too_complex"] == check(src.text)
                assert facts["_identifiers"] == frozenset(_IDENTIFIER.findall(src.text))
            deep = next(s for s in python if s.path.endswith("deep.py"))
            assert deep.too_complex is not None and deep.outline is None
            assert any(f["code"] == "DSL001" and f["path"].endswith("deep.py") for f in reports[2])
    assert reports[1] and reports[1] == reports[2]
