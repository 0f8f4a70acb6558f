"""The pre-issue check's fast path (``fast_path``) on real multi-process DeepSpeed runs (CPU, gloo).

From step 2 on a rank whose collective is the previous step's agreed one at that position issues it without
waiting for its peers. A hazard that appears only at step 3 must still be caught before the odd call is issued,
with the same verdict as with the fast path off (``DSLINT_PREFLIGHT_FAST_PATH=0``); ranks that all change shape
together are no finding; the tree of stores takes the fast path too."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(300)]

PASS, DIVERGENCE = 0, 1
TIMEOUT = 30
SCRIPT = "fast_path_steps.py"


@pytest.fixture
def run_with(preflight, monkeypatch):
    def run(fast, *script_args, ranks=2, tree=False, options=()):
        monkeypatch.setenv("DSLINT_PREFLIGHT_FAST_PATH", "1" if fast else "0")
        monkeypatch.setenv("DSLINT_PREFLIGHT_TREE", "on" if tree else "off")
        monkeypatch.setenv("DSLINT_PREFLIGHT_TREE_FANOUT", "2")
        return preflight(SCRIPT, *script_args, launcher="torchrun", ranks=ranks, timeout=TIMEOUT, options=options,
                         check_left=True)

    return run


def _fast(report):
    return report["pre_issue_check"]["fast_path"]


def _divergence(report):
    """What a divergence report says: the group, the position, the mismatch, and each rank's call and line."""
    abort = report["abort"]
    calls = [(c["rank"], c["op"], c["call"], c["module"], c["phase"],
              tuple(c["source"][:2]) if c.get("source") else None,
              [tuple(f[:2]) for f in c["user_stack"]]) for c in abort["calls"]]
    return {"kind": abort["kind"], "mismatch": abort["mismatch"], "detail": abort["detail"], "group": abort["group"],
            "group_ranks": abort["group_ranks"], "seq": abort["seq"], "calls": calls,
            "diagnosis": report.get("diagnosis"), "divergence_point": report.get("divergence_point"),
            "exit": report["exit_code"]}


@pytest.mark.parametrize("options", [(), ("--steps", "6")], ids=["coverage", "steps"])
def test_clean_run_takes_the_fast_path_from_step_2(run_with, options):
    run = run_with(True, options=options)
    assert run.returncode == PASS, run.output[-3000:]
    fast = _fast(run.report)
    assert fast["enabled"] is True
    # every rank checked every collective; from step 2 on the ranks that were not the last arrival went fast
    assert all(n >= 5 * 5 for n in fast["checked"].values()), fast
    assert sum(fast["fast"].values()) >= 5, fast
    assert "on the fast path" in run.output
    off = run_with(False, options=options)
    assert off.returncode == PASS, off.output[-3000:]
    assert _fast(off.report)["enabled"] is False and sum(_fast(off.report)["fast"].values()) == 0
    assert _fast(off.report)["checked"] == fast["checked"]  # the same collectives, all compared the slow way


@pytest.mark.parametrize("bad, options", [("size", ()), ("extra", ()), ("size", ("--steps", "6"))],
                         ids=["size", "extra", "size-steps"])
def test_hazard_from_step_3_is_caught_as_with_the_fast_path_off(run_with, bad, options):
    on = run_with(True, "--bad", bad, options=options)
    assert on.returncode == DIVERGENCE, on.output[-3000:]
    found = _divergence(on.report)
    assert found["mismatch"] == "size" and found["group_ranks"] == [0, 1], found
    by_rank = {c[0]: c[2] for c in found["calls"]}
    assert by_rank == ({0: "all_reduce in=[2] float32", 1: "all_reduce in=[3] float32"} if bad == "size" else
                       {0: "all_reduce in=[2] float32", 1: "all_reduce in=[5] float32"}), found
    # rank 1 arrived 0.5 s late: rank 0 had issued the collective on the fast path, and rank 1's verdict names
    # rank 0's call from the agreed pattern and its stack from its heartbeat
    assert on.report["abort"].get("fast_path_ranks") == [0], on.report["abort"]
    assert sum(_fast(on.report)["fast"].values()) > 0
    off = run_with(False, "--bad", bad, options=options)
    assert off.returncode == DIVERGENCE, off.output[-3000:]
    assert "fast_path_ranks" not in off.report["abort"]
    assert _divergence(off.report) == found


def test_all_ranks_changing_shape_together_is_no_finding(run_with):
    run = run_with(True, "--bad", "all")
    assert run.returncode == PASS, run.output[-3000:]
    fast = _fast(run.report)
    assert all(n >= 1 for n in fast["deviations"].values()), fast  # step 3 left the pattern on every rank
    assert sum(fast["fast"].values()) >= 5, fast


def test_tree_takes_the_fast_path_and_catches_the_late_hazard(run_with):
    clean = run_with(True, ranks=4, tree=True)
    assert clean.returncode == PASS, clean.output[-3000:]
    check = clean.report["pre_issue_check"]
    assert check["protocol"] == "tree" and check["fanout"] == 2, check
    assert sum(check["fast_path"]["fast"].values()) >= 10, check
    bad = run_with(True, "--bad", "size", ranks=4, tree=True)
    assert bad.returncode == DIVERGENCE, bad.output[-3000:]
    found = _divergence(bad.report)
    assert found["group_ranks"] == [0, 1, 2, 3] and found["mismatch"] == "size", found
    assert [c[0] for c in found["calls"] if c[2] != found["calls"][0][2]] == [1], found
    # rank 0 went fast in leaf {0, 1}; in leaf {2, 3} the last arrival forwarded and waited for the verdict
    # at the parent (as the tree's last arrivals do), the other went fast
    assert bad.report["abort"].get("fast_path_ranks") in ([0, 2], [0, 3]), bad.report["abort"]
    flat = run_with(False, "--bad", "size", ranks=4)
    assert flat.returncode == DIVERGENCE, flat.output[-3000:]
    assert _divergence(flat.report) == found
