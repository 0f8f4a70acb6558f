"""Engine paths that must not change results: worker processes, the result cache, triage."""

import shutil
from pathlib import Path

from dslint.config import Settings
from dslint.engine import Checker

FIXTURES = Path(__file__).parent / "fixtures" / "static"


def _run(tmp_path, **kw):
    settings = Settings(root=tmp_path, deepspeed_version="0.19.8")
    report = Checker(settings, **kw).check_paths([tmp_path])
    return [f.model_dump() for f in report.findings], report


def _corpus(tmp_path):
    # one project per family folder would pair unrelated scripts; the collectives family is self-contained
    shutil.copytree(FIXTURES / "collectives", tmp_path / "collectives")
    return tmp_path


def test_workers_give_the_same_findings_in_the_same_order(tmp_path, monkeypatch):
    root = _corpus(tmp_path)
    monkeypatch.chdir(root)
    serial, _ = _run(root, jobs=1)
    parallel, _ = _run(root, jobs=2)
    assert serial and serial == parallel


def test_cache_hits_reproduce_findings_and_edits_invalidate(tmp_path, monkeypatch):
    root = _corpus(tmp_path / "src")
    monkeypatch.chdir(root)
    cache = tmp_path / "cache"
    cold, _ = _run(root, cache_dir=cache)
    assert any(cache.rglob("*.json"))
    warm, _ = _run(root, cache_dir=cache)
    assert warm == cold
    # an edit to a file that other files depend on must not serve stale entries
    target = next(p for p in root.rglob("*.py") if "save_checkpoint" in p.read_text())
    target.write_text(target.read_text().replace("save_checkpoint", "save_checkpoint_renamed_for_test"))
    edited, _ = _run(root, cache_dir=cache)
    fresh, _ = _run(root)
    assert edited == fresh


def test_triage_skips_files_without_trigger_words_but_keeps_their_syntax_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plot.py").write_text("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n")
    (tmp_path / "broken_util.py").write_text("def f(:\n    pass\n")
    (tmp_path / "train.py").write_text("import torch.distributed as dist\nif dist.get_rank() == 0:\n"
                                       "    dist.barrier()\n")
    checker = Checker(Settings(root=tmp_path))
    report = checker.check_paths([tmp_path])
    assert {(f.path, f.code) for f in report.findings} == {("broken_util.py", "DSL001"), ("train.py", "DSL101")}
    plot = next(s for s in _sources(tmp_path) if s.path == "plot.py")
    assert not checker.triage.relevant(plot)


def test_triaged_out_files_would_produce_no_findings():
    """Every fixture the triage would skip produces nothing when checked with triage disabled."""
    checker = Checker(Settings())
    from dslint.rules import all_rules
    from dslint.pipeline.rule_set import select_rules
    checker.rules = select_rules(checker.settings, [])
    for path in sorted(FIXTURES.rglob("*.py")):
        from dslint.sources import PythonSource
        src = PythonSource(path.name, path.read_text())
        if checker.triage.relevant(src):
            continue
        report = Checker(Settings(), [cls() for cls in all_rules() if cls.code != "DSL001"]).check_sources([src])
        assert report.findings == [], path


def _sources(root):
    from dslint.engine import collect, read_sources
    return read_sources(collect([root], Settings(root=root)))[0]


_PARENT = None


def _dying_chunk(indices):
    import os

    from dslint.pipeline import workers
    if os.getpid() != _PARENT and 0 in indices:
        os._exit(9)
    return workers._real_analyse_chunk(indices)


def test_a_dead_worker_loses_no_finding(tmp_path, monkeypatch):
    """A worker killed mid-run (the kernel's OOM killer) breaks the pool: its files are checked in the main
    process and the report is the serial one."""
    import os

    from dslint.pipeline import workers
    global _PARENT
    _PARENT = os.getpid()
    root = _corpus(tmp_path)
    monkeypatch.chdir(root)
    serial, _ = _run(root, jobs=1)
    monkeypatch.setattr(workers, "_real_analyse_chunk", workers._analyse_chunk, raising=False)
    monkeypatch.setattr(workers, "_analyse_chunk", _dying_chunk)
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 2)
    parallel, _ = _run(root, jobs=2)
    assert serial and parallel == serial
