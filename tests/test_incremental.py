"""The language server's incremental re-check (`Checker.recheck`: the previous run's sources, spliced trees, and
whatever it reuses of the previous run) against a cold `dslint check` of the same texts on disk: the findings
of the open documents must be byte-identical (their JSON), after edits of one file at a time -- a code edit
inside a function, an edit that changes another file's collective summary (the helper a rank-0 branch calls
stops or starts reaching a collective), a config value (ZeRO stage 3 -> 1: the generate hazard goes), a syntax
error and its repair."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

COMM = '''import torch.distributed as dist


def sync(t):
    dist.all_reduce(t)
    return t


def local(t):
    return t * 2
'''
COMM_LOCAL = COMM.replace("    dist.all_reduce(t)\n", "    t = t + 0\n")
TRAIN = '''import argparse

import deepspeed
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM

from pkg.comm import local, sync


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    parser.parse_args()
    deepspeed.init_distributed()
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    engine, _, _, _ = deepspeed.initialize(model=model, config="ds_config.json")
    x = torch.ones(4)
    if dist.get_rank() == 0:
        sync(x)
    y = local(x)
    prompts = torch.load("prompts.pt")
    rank = dist.get_rank()
    engine.module.generate(prompts[rank].cuda(), do_sample=True, max_new_tokens=32)


if __name__ == "__main__":
    main()
'''
EVAL = '''import torch.distributed as dist

from pkg.comm import sync


def evaluate(t):
    if dist.get_rank() == 0:
        return sync(t)
    return t


if __name__ == "__main__":
    evaluate(1)
'''
ZERO = '{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": %d}\n}\n'
OPEN = ("train.py", "pkg/comm.py", "ds_config.json", "evaluate.py")


def _workspace(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/comm.py").write_text(COMM)
    (root / "train.py").write_text(TRAIN)
    (root / "evaluate.py").write_text(EVAL)
    (root / "ds_config.json").write_text(ZERO % 3)
    (root / "run.sh").write_text("#!/bin/bash\ndeepspeed --num_gpus 2 train.py\ndeepspeed --num_gpus 2 evaluate.py\n")


def _cold(root: Path, texts: dict[str, str]) -> list[str]:
    """`dslint check .` of the folder with `texts` written to disk, in a fresh Checker: the open documents'
    findings as JSON."""
    from dslint.config import Settings
    from dslint.engine import Checker
    for name, text in texts.items():
        (root / name).write_text(text)
    report = Checker(Settings(), file_timeout=0).check_paths([Path(".")])
    return sorted(f.model_dump_json() for f in report.findings if f.path in texts)


def _codes(findings: list[str]) -> set[tuple[str, str]]:
    import json
    return {(json.loads(f)["path"], json.loads(f)["code"]) for f in findings}


STEPS = [
    ("first run", {}),
    ("a code edit inside a function", {"train.py": TRAIN.replace("    y = local(x)\n", "    y = local(x); z = 1\n")}),
    ("the helper stops reaching a collective", {"pkg/comm.py": COMM_LOCAL}),
    ("an edit of the script meanwhile", {"train.py": TRAIN.replace("    y = local(x)\n", "    y = local(x); z = 2\n")}),
    ("the helper reaches it again", {"pkg/comm.py": COMM}),
    ("a config value: ZeRO-1", {"ds_config.json": ZERO % 1}),
    ("an edit of the script under ZeRO-1", {"train.py": TRAIN.replace("    y = local(x)\n", "    y = 3\n")}),
    ("ZeRO-3 again", {"ds_config.json": ZERO % 3}),
    ("a syntax error", {"pkg/comm.py": COMM.replace("def local(t):", "def local(t:")}),
    ("repaired", {"pkg/comm.py": COMM}),
    ("the script as it was", {"train.py": TRAIN}),
]


def test_incremental_rechecks_equal_cold_checks(tmp_path, monkeypatch):
    from dslint.server.workspace import Workspace
    root = tmp_path / "ws"
    _workspace(root)
    monkeypatch.chdir(root)
    texts = {name: (root / name).read_text() for name in OPEN}
    folder = Workspace([root]).folder_of(str(root / "train.py"))
    seen = {}
    for label, change in STEPS:
        texts.update(change)
        run = folder.run({os.path.realpath(root / name): text for name, text in texts.items()})
        incremental = sorted(f.model_dump_json() for found in run.findings.values() for f in found)
        assert incremental == _cold(root, texts), label
        seen[label] = _codes(incremental)
    # the edits changed the findings, so that reuse had to be invalidated
    first = seen["first run"]
    assert {("train.py", "DSL101"), ("train.py", "DSL104"), ("evaluate.py", "DSL101")} <= first
    assert ("train.py", "DSL101") not in seen["the helper stops reaching a collective"]
    assert ("evaluate.py", "DSL101") not in seen["the helper stops reaching a collective"]
    assert ("train.py", "DSL104") in seen["the helper stops reaching a collective"]
    assert ("train.py", "DSL101") in seen["the helper reaches it again"]
    assert ("train.py", "DSL104") not in seen["a config value: ZeRO-1"]
    assert ("train.py", "DSL101") in seen["a config value: ZeRO-1"]
    assert ("train.py", "DSL104") in seen["ZeRO-3 again"]
    assert ("pkg/comm.py", "DSL001") in seen["a syntax error"]
    assert seen["the script as it was"] == first


def test_server_runs_leave_their_objects_out_of_the_collectors_walks(tmp_path, monkeypatch):
    """A server's run freezes what it leaves alive (no full collection walks the trees it keeps for the next
    run); the collector's lazy `collect` frees what only cycles hold and freezes the rest again."""
    import gc

    from dslint.server.workspace import Collector, Workspace
    root = tmp_path / "ws"
    _workspace(root)
    monkeypatch.chdir(root)
    texts = {os.path.realpath(root / name): (root / name).read_text() for name in OPEN}
    folder = Workspace([root]).folder_of(str(root / "train.py"))
    collector = Collector()
    gc.unfreeze()
    try:
        plain = folder.run(texts)
        assert gc.get_freeze_count() == 0
        frozen = folder.run(texts, freeze=True)
        collector.after_run()
        assert gc.get_freeze_count() > 0 and gc.isenabled()
        assert [f.model_dump_json() for f in frozen.findings[str(root / "train.py")]] == \
            [f.model_dump_json() for f in plain.findings[str(root / "train.py")]]

        class Cycle:
            pass

        ring = Cycle()
        ring.me = ring
        gc.freeze()             # garbage frozen by a run stays until the lazy collection
        alive = [ring]
        import weakref
        probe = weakref.ref(ring)
        del ring, alive
        gc.collect()
        assert probe() is not None
        assert not collector.due()
        collector.runs_since = Collector.MAX_RUNS
        assert collector.due()
        collector.collect()
        assert probe() is None and collector.runs_since == 0 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
