"""A failure costs one file, never the run: a worker that dies on a file, a file whose analysis runs past its
time budget, and Ctrl-C (which ends the whole run, workers included, at once)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dslint.config import Settings
from dslint.engine import Checker
from dslint.sources import make_source

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork and signals")

HAZARD = "import torch.distributed as dist\nrank = dist.get_rank()\nif rank == 0:\n    dist.barrier()\n"


def _slow_text(branches: int = 150, functions: int = 8) -> str:
    """A file that takes the rules a while (about 1.2 ms a branch on the development machine, so ~1.5 s here,
    several times the 0.2 s budget the tests give it): functions each holding an elif chain of rank tests,
    each branch with a collective."""
    body = ("    y = None\n    if r == 0:\n        y = 1\n"
            + "".join(f"    elif r == {i}:\n        dist.barrier()\n        y = [a for a in x if a]\n"
                      for i in range(1, branches))
            + "    else:\n        dist.all_reduce(x)\n    return y[0]\n")
    return "import torch.distributed as dist\nr = dist.get_rank()\n" + "".join(
        f"def f{k}(x):\n{body}" for k in range(functions))


def _sources(files: dict[str, str]):
    return [make_source(Path(n), n, "python", t) for n, t in files.items()]


def test_a_worker_dying_on_one_file_costs_that_file_only(monkeypatch):
    files = {f"m{i:02d}.py": HAZARD for i in range(30)}
    files["m07.py"] = "x = 1  # the file whose worker dies\n" + HAZARD
    from dslint.pipeline.rule_runs import RuleRun
    original = RuleRun.check_one
    parent = os.getpid()

    def dies_on_m07(self, source, project, report):
        if source.path == "m07.py":
            if os.getpid() == parent:       # never in the test's own process
                raise AssertionError("m07.py analysed in the main process")
            import faulthandler
            faulthandler.disable()          # pytest's dump of the child's stack is noise here
            os.kill(os.getpid(), signal.SIGSEGV)    # a native crash (libcst's parser overflowing its stack)
        return original(self, source, project, report)

    monkeypatch.setattr(RuleRun, "check_one", dies_on_m07)
    report = Checker(Settings(), jobs=2).check_sources(_sources(files))
    by_path = {}
    for f in report.findings:
        by_path.setdefault(f.path, []).append((f.code, f.message))
    assert by_path.pop("m07.py") == [("DSL001", "could not be analysed: the process analysing it crashed (SIGSEGV)")]
    assert len(by_path) == 30 - 1 and all(v[0][0] == "DSL101" for v in by_path.values())


def test_a_file_past_its_time_budget_is_reported_as_skipped_and_the_others_stand():
    files = {"slow.py": _slow_text(), "train.py": HAZARD}
    report = Checker(Settings(), jobs=1, file_timeout=0.2).check_sources(_sources(files))
    got = sorted((f.path, f.code, f.message) for f in report.findings)
    assert got[0] == ("slow.py", "DSL001", "could not be analysed: skipped: analysis exceeded 0.2 s")
    assert [(p, c) for p, c, _ in got[1:]] == [("train.py", "DSL101")]
    # without a budget the same file is analysed: the budget is what skipped it
    full = Checker(Settings(), jobs=1, file_timeout=0).check_sources(_sources({"slow.py": _slow_text()}))
    assert full.findings and all(f.code == "DSL101" for f in full.findings)


def test_the_budget_applies_from_the_command_line_and_a_skip_is_not_cached(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "slow.py").write_text(_slow_text())
    (tmp_path / "src" / "train.py").write_text(HAZARD)
    env = {"DSLINT_FILE_TIMEOUT": "0.2", "DSLINT_CACHE_DIR": str(tmp_path / "cache")}
    full_env = {**os.environ, "NO_COLOR": "1", **env}
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "dslint", "check", "--format", "json", str(tmp_path / "src")],
                              capture_output=True, text=True, timeout=120, env=full_env, cwd=REPO)
        assert proc.returncode == 1, proc.stderr
        found = {(Path(f["path"]).name, f["code"], f["message"]) for f in json.loads(proc.stdout)["findings"]}
        assert ("slow.py", "DSL001", "could not be analysed: skipped: analysis exceeded 0.2 s") in found
        assert any(n == "train.py" and c == "DSL101" for n, c, _ in found)
    # the skip was not kept: with time enough, the next run analyses the file
    proc = subprocess.run([sys.executable, "-m", "dslint", "check", "--format", "json", str(tmp_path / "src")],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**full_env, "DSLINT_FILE_TIMEOUT": "0"})
    found = {(Path(f["path"]).name, f["code"]) for f in json.loads(proc.stdout)["findings"]}
    assert ("slow.py", "DSL101") in found and ("slow.py", "DSL001") not in found


def _children(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_sigint_ends_the_run_and_its_workers_within_a_second(tmp_path):
    for i in range(30):
        (tmp_path / f"m{i:02d}.py").write_text(_slow_text(120))
    env = {**os.environ, "NO_COLOR": "1", "DSLINT_FILE_TIMEOUT": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "dslint", "check", "--no-cache", "--jobs", "2", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        workers: set[int] = set()
        deadline = time.monotonic() + 60
        while not workers and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            workers = _children(proc.pid)
        assert workers, "no worker started"
        time.sleep(0.5)                     # the workers are inside the analysis now
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)     # the parent only (a terminal would signal the whole group)
        out, err = proc.communicate(timeout=10)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 130 and elapsed < 1.0, (proc.returncode, elapsed, err[-2000:])
    assert "Traceback" not in err and "interrupted" in err
    time.sleep(0.2)
    assert not [w for w in workers if _alive(w)]


def test_an_internal_error_in_one_rule_loses_no_other_rule_s_findings(monkeypatch):
    from dslint.rules import rule_by_code
    broken = rule_by_code("DSL103")

    def fails(self, ctx):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(broken, "check", fails)
    text = HAZARD + "for b in loader[rank:]:\n    dist.all_reduce(b)\n"
    report = Checker(Settings(), jobs=1).check_sources(_sources({"train.py": text}))
    assert {f.code for f in report.findings} == {"DSL101", "DSL102"}
    (error,) = report.errors
    assert error.kind == "internal-error" and error.code == "DSL103" and "RecursionError" in error.message
