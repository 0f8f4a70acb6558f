"""The three reference hangs (DESIGN.md §1) and their relatives, reproduced on CPU with 2 ranks."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(240)]

HANG, DIVERGENCE, SCRIPT_ERROR = 3, 1, 4


def _pending(report, rank):
    return report["ranks"][str(rank)]["pending"]


def test_uneven_eval_forwards_name_the_extra_all_to_all_on_rank_0(preflight):
    run = preflight("moe_uneven_eval.py")
    assert run.returncode == HANG, run.output[-3000:]
    report = run.report
    assert report["verdict"] == "hang" and report["exit_code"] == HANG
    assert report["abort"]["stuck_ranks"] == [0]
    stuck = _pending(report, 0)
    assert stuck["op"] == "all_to_all_single"
    assert stuck["module"] == "layers.0.mlp.deepspeed_moe"
    assert stuck["ins"] == [[[2, 8, 16], "float32"]]
    lines = [f["text"] for f in stuck["user_stack"]]
    assert "loss = engine(batch)" in lines
    assert report["ranks"]["1"]["waiting_for"]["what"] == "peers' dry-step summaries"
    assert report["diagnosis"]["code"] == "DSL102"
    assert "samples[rank::world]" in report["diagnosis"]["cause"]
    ep_group = stuck["group"]
    assert report["counts"][ep_group]["per_rank"] == {"0": 9, "1": 8}
    assert "expert-parallel" in report["counts"][ep_group]["label"]
    assert "HANG" in run.output and "layers.0.mlp.deepspeed_moe" in run.output


def test_rank0_only_forward_after_other_ranks_returned_torchrun(preflight):
    """#7141: no deepspeed.initialize, so ep_group is None and the all_to_all runs on WORLD."""
    run = preflight("moe_rank0_forward.py", "--then", "exit", launcher="torchrun")
    assert run.returncode != 0
    report = run.report
    assert report["exit_code"] == HANG, run.output[-3000:]
    stuck = _pending(report, 0)
    assert stuck["op"] == "all_to_all_single" and stuck["module"] == "layers.0.mlp.deepspeed_moe"
    assert report["counts"][stuck["group"]]["label"] == "WORLD"
    assert stuck["source"]["path"].endswith("tiny_moe.py")
    assert any("# log one example" in f["text"] for f in stuck["user_stack"])
    assert report["diagnosis"]["code"] == "DSL101" and "rank == 0" in report["diagnosis"]["cause"]
    assert report["diagnosis"]["related"]["code"] == "DSL201"
    assert {f["code"] for f in report["findings"]} == {"DSL101", "DSL201"}


def test_rank0_forward_while_others_wait_in_barrier_is_a_wait_for_knot(preflight):
    """A cross-group wait (expert group vs WORLD barrier): the wait-for monitor proves it before --timeout."""
    run = preflight("moe_rank0_forward.py", "--engine", "--then", "barrier", timeout=20)
    assert run.returncode == HANG, run.output[-3000:]
    report = run.report
    assert report["abort"]["cause"] == "deadlock" and report["abort"]["last_blocked_s"] <= 5
    assert report["divergence_point"]["text"] == "if rank == 0:"
    rank0, rank1 = _pending(report, 0), _pending(report, 1)
    assert rank0["op"] == "all_to_all_single" and rank0["module"] == "layers.0.mlp.deepspeed_moe"
    assert rank1["op"] == "barrier" and rank1["source"]["text"] == "dist.barrier()"
    assert "expert-parallel" in report["counts"][rank0["group"]]["label"]
    assert report["diagnosis"]["code"] == "DSL101"
    assert run.wall_s < 20 + 45  # start-up included, generously: the timeout is never reached


def test_zero3_generate_without_synced_gpus_hangs(preflight):
    run = preflight("zero3_generate.py")
    assert run.returncode == HANG, run.output[-3000:]
    report = run.report
    assert report["abort"]["stuck_ranks"] == [1]
    stuck = _pending(report, 1)
    assert stuck["op"] == "all_gather_into_tensor" and stuck["phase"] == "forward"
    assert "generate(" in stuck["source"]["text"]
    assert report["diagnosis"]["code"] == "DSL104"


def test_zero3_generate_with_synced_gpus_passes(preflight):
    run = preflight("zero3_generate.py", "--synced_gpus", launcher="torchrun")
    assert run.returncode == 0, run.output[-3000:]
    report = run.report
    assert report["verdict"] == "pass"
    for group in report["counts"].values():
        assert len(set(group["per_rank"].values())) == 1
    assert "PASS" in run.output


def test_dynamic_padding_all_to_all_size_mismatch_is_caught_before_gloo_aborts(preflight):
    run = preflight("moe_dynamic_padding.py", "--padding", "longest")
    assert run.returncode == DIVERGENCE, run.output[-3000:]
    assert "Received data size doesn't match" not in run.output
    report = run.report
    calls = {c["rank"]: c for c in report["abort"]["calls"]}
    assert calls[0]["ins"] == [[[2, 12, 16], "float32"]] and calls[1]["ins"] == [[[2, 20, 16], "float32"]]
    assert {c["module"] for c in calls.values()} == {"layers.0.mlp.deepspeed_moe"}
    assert report["diagnosis"]["code"] == "DSL204"
    assert "[2, 12, 16]" in report["diagnosis"]["cause"] and "[2, 20, 16]" in report["diagnosis"]["cause"]


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_conditionally_used_parameter_names_the_parameter_and_ranks(preflight, stage):
    run = preflight("conditional_param.py", "--stage", str(stage), launcher="torchrun")
    report = run.report
    assert report is not None and report["exit_code"] == DIVERGENCE, run.output[-3000:]
    assert report["diagnosis"]["code"] == "DSL303"
    calls = {c["rank"]: c for c in report["abort"]["calls"]}
    assert calls[0]["ins"] != calls[1]["ins"]
    if stage < 3:  # the gradient bucket all_reduce sizes differ by image_proj's gradient
        assert "image_proj.weight" in report["diagnosis"]["cause"]
        assert calls[0]["phase"] == "backward"
        # attributed through the reduced bucket's parameters, not the module whose gradient came last
        assert "image_proj.weight" in calls[0]["params"] and "image_proj.weight" not in calls[1]["params"]
        assert "body.weight" in calls[0]["params"] and "body.weight" in calls[1]["params"]
    else:  # ZeRO-3 gathers image_proj's partition on rank 0 while rank 1 already gathers body's
        assert calls[0]["module"] == "image_proj" and calls[1]["module"] == "body"
        assert calls[0]["phase"] == "forward" and "images is not None" in report["diagnosis"]["cause"]


def test_client_optimizer_without_moe_groups_is_a_dsl202_finding(preflight):
    run = preflight("moe_client_optimizer.py", launcher="torchrun")
    report = run.report
    assert report is not None and report["exit_code"] == DIVERGENCE, run.output[-3000:]
    assert report["verdict"] == "error"
    assert [f["code"] for f in report["findings"]] == ["DSL202"]
    assert "AssertionError" in run.output and "stage_1_and_2.py" not in run.output  # no raw traceback
    assert "split_params_into_different_moe_groups_for_optimizer" in run.output
