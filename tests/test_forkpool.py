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


def test_stealing_workers_serve_every_item_once_and_the_idle_one_takes_the_others_lane():
    """Two lanes of very unequal cost: the worker of the cheap lane, once done, takes items from the back of
    the other lane, so both end about together; each worker keeps its state between items (one process per
    lane, not per item)."""
    import time

    from dslint.forkpool import run_stealing

    def work(n):
        time.sleep(0.05 if n < 10 else 0.0)
        return n * n, os.getpid()

    lanes = [list(range(10)), list(range(10, 12))]      # the second lane is cheap
    busy: list = []
    out = dict(run_stealing(work, lanes, {n: 1.0 for n in range(12)}, lane_times=busy))
    assert sorted(out) == list(range(12)) and all(out[n][0] == n * n for n in out)
    pids = {n: out[n][1] for n in out}
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    stolen = [n for n in range(10) if pids[n] == pids[10]]
    assert stolen and stolen == list(range(10 - len(stolen), 10))    # from the back of the busy lane
    assert len(busy) == 2 and max(busy) / (sum(busy) / 2) < 1.5
    assert _children() == set() or not (_children() & set(pids.values()))


def test_a_stealing_worker_that_dies_reports_its_item_and_a_fresh_one_goes_on():
    from dslint.forkpool import run_stealing

    def work(n):
        if n == 3:
            os._exit(9)
        if n == 5:
            raise ValueError("boom")
        return n, os.getpid()

    statuses: dict = {}
    out = dict(run_stealing(work, [list(range(8))], {}, statuses=statuses))
    assert out[3] is FAILED and out[5] is FAILED and statuses[3] == 9
    assert all(out[n][0] == n for n in (0, 1, 2, 4, 6, 7))
    assert len({out[n][1] for n in (0, 1, 2, 4, 6, 7)}) == 3       # replaced after each death


def test_a_stealing_worker_past_its_budget_is_replaced():
    from dslint.forkpool import run_stealing

    out = dict(run_stealing(lambda n: os.getpid(), [list(range(6))], {}, budget=2.0,
                            sizes={n: 1.0 for n in range(6)}))
    assert sorted(out) == list(range(6)) and len(set(out.values())) == 3      # two items per process
