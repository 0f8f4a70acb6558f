"""Epoch truncation and the report's dry-run lines, in one process (no launcher, no process group)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(120)]


def _session():
    from dslint.runtime_checks.dry_step import DrySession, Options

    return DrySession(Options(steps=None, max_steps=50))


def _watched(session, loader):
    from dslint.runtime_checks.engine_hooks import _WatchedIterator

    return _WatchedIterator(iter(loader), session, None, loader)


def test_a_for_loop_ends_its_epoch_at_the_next_batch_after_the_decision_and_a_later_epoch_after_one_step():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    session = _session()
    loader = DataLoader(TensorDataset(torch.arange(20)), batch_size=2)
    seen = []
    for (x,) in _watched(session, loader):
        seen.append(int(x[0]))
        if len(seen) == 3:
            session.steps_done = 3
            session.begin_truncation(3, "max-steps", "--max-steps 3 reached")
    assert seen == [0, 2, 4]  # ended at the next batch, not at the loader's end (10 batches)
    later = _watched(session, loader)  # a later epoch: runs until its first optimizer-step boundary
    assert later.fresh
    got = []
    for (x,) in later:
        got.append(int(x[0]))
        if len(got) == 2:
            session.steps_done += 1  # the boundary (micro-batches before it all ran)
    assert got == [0, 2]
    assert [e["what"] for e in session.ended_loaders] == ["the epoch in progress"]
    # two later epochs per loader run a step; the third ends before its first batch
    second = 0
    for _ in _watched(session, loader):
        second += 1
        session.steps_done += 1
    assert second == 1
    assert [x for x in _watched(session, loader)] == []
    # list() (a C caller, not a for loop of the script or a library) is not ended
    assert len(list(_watched(session, loader))) == 10


def test_next_in_the_scripts_own_code_is_never_ended():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    session = _session()
    it = _watched(session, DataLoader(TensorDataset(torch.arange(8)), batch_size=2))
    next(it)
    session.begin_truncation(1, "coverage", "coverage")
    assert int(next(it)[0][0]) == 2  # a bare next(): the script may not expect StopIteration here


def test_report_states_what_ended_the_run_before_the_verdict_and_what_was_not_run():
    from dslint.runtime_checks import report

    end = report.dry_run_end({0: {"kind": "unended-loop", "steps": 51, "covered": False,
                                  "truncated": {"step": 50, "by": "max-steps", "detail": "--max-steps 50 reached"},
                                  "unended_loop": {"path": "train.py", "line": 12,
                                                   "header": "for step in range(args.steps)"}},
                              1: {"kind": "unended-loop", "steps": 51, "covered": False}})
    built = {"verdict": "not_covered", "exit_code": 6, "world_size": 2, "dry_run": end,
             "not_run": report.not_run_lines(end)}
    lines = report.render_text(built).splitlines()
    assert lines[0].startswith("dslint preflight: dry run: the loaders' epochs were ended at optimizer step 50")
    assert "train.py:12 `for step in range(args.steps)`" in lines[0]
    assert lines[1].startswith("dslint preflight: NOT FULLY COVERED") and "(exit 6, 2 ranks)" in lines[1]
    assert lines[2].startswith("  not run: the remaining iterations of `for step in range(args.steps)`")
    steps = {"verdict": "pass", "exit_code": 0, "world_size": 2,
             "dry_run": {"kind": "steps", "steps": 2, "steps_option": 2, "covered": False}}
    text = report.render_text(steps)
    assert "PASS for the first 2 optimizer steps (--steps)" in text and "PASS: all ranks agree" not in text


def test_a_range_loop_around_the_step_ends_with_the_dry_steps_and_no_other_range_does():
    import builtins

    from dslint.runtime_checks import engine_hooks

    session = _session()
    engine_hooks._active.append(session)
    try:
        range = engine_hooks.ScriptRange  # what the launched script's globals hold in the dry run
        kept = range(3)  # not the iterable of a for statement: the builtin itself
        assert type(kept) is builtins.range and isinstance(kept, range) and issubclass(builtins.range, range)
        seen, inner = [], 0
        for epoch in range(3):  # the outer loop is not around the step's line: never ended
            for step in range(100):
                seen.append((epoch, step))
                for _ in range(2):  # a loop inside the step (micro-batches): not the step's loop
                    inner += 1
                session.steps_done += 1
                if (epoch, step) == (0, 2):
                    session.begin_truncation(session.steps_done, "max-steps", "--max-steps 3 reached")
        # epoch 0 ended after the decision; epochs 1 and 2 each ran their first step (two later epochs at most)
        assert seen == [(0, 0), (0, 1), (0, 2), (1, 0), (2, 0)], seen
        assert inner == 2 * len(seen)
        assert [e["loader"] for e in session.ended_loaders] == ["range"]
        assert session.step_loop["header"] == "for step in range(100)"
        assert sum(1 for _ in range(7)) == 7 and list(range(4)) == [0, 1, 2, 3]  # after the loop: untouched
    finally:
        engine_hooks._active.remove(session)
    assert type(range(2)) is builtins.range  # no session: the builtin everywhere
