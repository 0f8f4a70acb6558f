"""The fork-per-task runner the check workers use: results in task order, a dead or failing child reported as
FAILED (its task is then redone by the caller), children ended when the consumer stops early."""

import os
from pathlib import Path

import pytest

from dslint.forkpool import FAILED, run_forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _children() -> set[int]:
    me = os.getpid()
    path = Path(f"/proc/{me}/task/{me}/children")
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


def test_results_come_back_in_task_order_whatever_finishes_first():
    import time

    def work(n):
        time.sleep(0.05 * (5 - n % 5))      # later tasks finish first
        return n * n, os.getpid()

    out = list(run_forked(work, list(range(12)), 3))
    assert [i for i, _ in out] == list(range(12))
    assert [r[0] for _, r in out] == [n * n for n in range(12)]
    assert os.getpid() not in {r[1] for _, r in out} and len({r[1] for _, r in out}) == 12   # one child per task


def test_a_dying_or_failing_child_is_reported_and_the_others_stand():
    def work(n):
        if n == 2:
            os._exit(9)                     # as the OOM killer would leave it
        if n == 4:
            raise ValueError("boom")
        return [n] * 100_000                # bigger than a pipe's buffer
    out = dict(run_forked(work, list(range(6)), 2))
    assert out[2] is FAILED and out[4] is FAILED
    assert all(out[n] == [n] * 100_000 for n in (0, 1, 3, 5))


def test_stopping_early_ends_the_children_still_running():
    import time
    before = _children()

    def work(n):
        if n:
            time.sleep(30)
        return n
    gen = run_forked(work, list(range(4)), 3)
    assert next(gen) == (0, 0)
    gen.close()
    assert _children() - before == set()


def test_while_running_steps_in_the_parent_between_the_childrens_results():
    import time
    steps = []

    def work(n):
        time.sleep(0.3 if n < 2 else 0)
        return n

    def step():
        steps.append(len(_children()))
        return len(steps) < 3           # three steps of work, then nothing to do until a child ends

    out = list(run_forked(work, list(range(5)), 2, while_running=step))
    assert [r for _, r in out] == list(range(5))
    # the first three steps ran at once, in this process, while both first children were alive; then one
    # call per pipe event (a child's data, its end), not a busy loop through the 0.3 s the children sleep
    assert steps[:3] == [2, 2, 2] and 3 <= len(steps) <= 3 + 2 * 5
