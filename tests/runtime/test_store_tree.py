"""The pre-issue check through the tree of stores (``store_tree``), on real multi-process runs (CPU, gloo).

The tree is forced at 4 ranks with a fan-out of 2 (leaves {0, 1} and {2, 3}, hosted by ranks 0 and 2, their
parent by rank 1), so that every path of the protocol runs: groups inside one leaf, across leaves and on WORLD,
all_to_all shares summed per node. A mismatch must be reported exactly as the flat check reports it; a clean
twin passes; a leaf's store host that dies is reported as a dead rank."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(200)]

PASS, DIVERGENCE, HANG = 0, 1, 3
TIMEOUT = 30


@pytest.fixture(scope="module")
def warm_shm_op():
    """The script uses torch.distributed alone (DeepSpeed's CPU comm op is never built or loaded)."""


@pytest.fixture
def run_with(preflight, monkeypatch):
    def run(protocol, *script_args, launcher="torchrun"):
        monkeypatch.setenv("DSLINT_PREFLIGHT_TREE", "on" if protocol == "tree" else "off")
        monkeypatch.setenv("DSLINT_PREFLIGHT_TREE_FANOUT", "2")
        return preflight("tree_collectives.py", *script_args, launcher=launcher, ranks=4, timeout=TIMEOUT,
                         check_left=True)

    return run


def _divergence(report):
    """What a divergence report says: the group, the position, the mismatch, and each rank's call and line."""
    abort = report["abort"]
    calls = [(c["rank"], c["op"], c["call"], tuple(c["source"][1:]) if c.get("source") else None)
             for c in abort["calls"]]
    return {"kind": abort["kind"], "mismatch": abort["mismatch"], "detail": abort["detail"],
            "group_ranks": abort["group_ranks"], "seq": abort["seq"], "calls": calls,
            "code": report["diagnosis"]["code"], "exit": report["exit_code"]}


def test_tree_clean_run_passes(run_with):
    run = run_with("tree")
    assert run.returncode == PASS, run.output[-3000:]
    assert run.report["verdict"] == "pass"
    assert run.output.count("done (pid") == 4
    check = run.report["pre_issue_check"]
    assert check["protocol"] == "tree" and check["fanout"] == 2, check
    # every rank made its checks through the tree's stores (3 steps x 5 collectives of its groups)
    assert all(n >= 3 * 3 for n in check["tree_store_ops"].values()), check


@pytest.mark.parametrize("bad, group_ranks, seq, mismatch, odd_rank", [
    ("size", [0, 1, 2, 3], 3, "size", 3),  # WORLD: all_reduce, all_to_all, barrier per step
    ("splits", [0, 1, 2, 3], 4, "size", 3),
    ("op", [1, 2], 1, "op", 1),
])
def test_tree_mismatch_is_reported_as_the_flat_check_reports_it(run_with, bad, group_ranks, seq, mismatch,
                                                                odd_rank):
    tree = run_with("tree", "--bad", bad)
    assert tree.returncode == DIVERGENCE, tree.output[-3000:]
    found = _divergence(tree.report)
    assert found["group_ranks"] == group_ranks and found["seq"] == seq and found["mismatch"] == mismatch, found
    by_rank = {rank: (op, call) for rank, op, call, _ in found["calls"]}
    assert sorted(by_rank) == group_ranks
    if bad == "size":
        assert [r for r in by_rank if by_rank[r] != by_rank[0]] == [odd_rank], by_rank
    elif bad == "splits":  # every rank's call shows its own splits: the detail names the pair
        assert found["detail"] == "group rank 0 sends 4 elements to group rank 3, which expects 5", found
    else:
        assert found["detail"] == "same collective with a different reduce op or root", found
    assert tree.report["pre_issue_check"]["protocol"] == "tree"
    assert all(n > 0 for n in tree.report["pre_issue_check"]["tree_store_ops"].values())
    flat = run_with("flat", "--bad", bad)
    assert flat.returncode == DIVERGENCE, flat.output[-3000:]
    assert flat.report["pre_issue_check"]["protocol"] == "flat"
    assert _divergence(flat.report) == found


def test_tree_dead_leaf_store_host_is_reported(run_with):
    """Rank 2 hosts the store of leaf {2, 3}: rank 3 waits in it when rank 2 is killed. No launcher watches
    the ranks (as on other nodes), so no SIGTERM comes: the survivors must find the dead rank themselves."""
    run = run_with("tree", "--bad", "kill-leader", launcher="none")
    assert run.returncode == HANG, run.output[-3000:]
    report = run.report
    assert report is not None, run.output[-3000:]
    assert report["abort"]["cause"] == "dead-rank" and report["dead_ranks"] == [2], report["abort"]
    assert "rank 2 died" in report["diagnosis"]["cause"]
    assert run.wall_s < TIMEOUT, run.wall_s  # found by the dead-rank machinery, not by --timeout
