"""Pre-flight v2 coverage (ISSUE 21 item 1): the loader audit before any model runs, and dry steps that run by
default until the audited loaders' first epoch end. Hazards that appear from step 2 on are caught without
--steps; each clean twin passes. Every run must end within --timeout + 10 s of its start-up."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(240)]

TIMEOUT = 8
DIVERGENCE, HANG = 1, 3


def _no_collective_issued_by_the_model(report):
    for rank in report["ranks"].values():
        assert all(c["phase"] not in ("forward", "backward") for c in rank["last_collectives"] if c), rank


def test_dynamic_padding_that_differs_from_step_2_is_caught_by_the_audit(preflight):
    run = preflight("padding_grows.py", timeout=TIMEOUT)
    report = run.report
    assert report is not None and run.returncode == DIVERGENCE, run.output[-3000:]
    assert report["diagnosis"]["code"] == "DSL204"
    [finding] = [f for f in report["audit_findings"] if f["code"] == "DSL204"]
    assert finding["step"] == 2 and finding["tokens"] == {"0": 10, "1": 18}
    assert finding["capacity"] == {"0": 5, "1": 9}
    assert "pad_batch" in finding["message"] and "padding_grows.py" in finding["source"][0]
    _no_collective_issued_by_the_model(report)  # reported before any model ran
    assert "Received data size doesn't match" not in run.output


def test_fixed_padding_twin_runs_to_the_epoch_end_and_passes(preflight):
    run = preflight("padding_grows.py", "--fixed", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
    report = run.report
    assert report["verdict"] == "pass"
    # coverage at step 5 (the first step after the first epoch end): the loader's second epoch ends there and
    # the script runs to its end (ISSUE 31's epoch truncation)
    assert report["ended_by"]["0"] == "script exit"
    assert report["dry_run"]["kind"] == "script-end" and report["dry_run"]["covered"] is True
    assert report["dry_run"]["truncated"]["step"] == 5 and report["dry_run"]["truncated"]["by"] == "coverage"
    [loader] = report["coverage"]["0"]["loaders"]
    assert loader["key"].endswith("padding_grows.py:65#0")
    assert {k: v for k, v in loader.items() if k != "key"} == {"index": 0, "epoch_ends": 1, "classes": 1,
                                                              "classes_seen": 1, "batches": 4}
    assert "rank 0 finished 2 epochs" in run.output


def test_loader_without_distributed_sampler_gives_uneven_batch_counts(preflight):
    run = preflight("uneven_loader.py", launcher="torchrun", timeout=TIMEOUT)
    report = run.report
    assert report is not None and report["exit_code"] == DIVERGENCE, run.output[-3000:]
    assert report["diagnosis"]["code"] == "DSL102"
    [finding] = [f for f in report["audit_findings"] if f["code"] == "DSL102"]
    assert finding["step"] == 3 and finding["counts"] == {"0": 5, "1": 3}
    assert "RandomSampler is not a DistributedSampler" in finding["message"]
    assert "rank 0: 9, rank 1: 6" in finding["message"]
    _no_collective_issued_by_the_model(report)


def test_sharded_loader_twin_passes_with_its_partial_last_batch(preflight):
    run = preflight("uneven_loader.py", "--shard", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
    report = run.report
    [audit] = report["loader_audit"]
    assert {r: v["batches"] for r, v in audit["per_rank"].items()} == {"0": 3, "1": 3}
    assert audit["per_rank"]["0"]["shape_classes"] == 2  # [3, 4] batches and the partial [2, 4] one
    assert report["coverage"]["1"]["loaders"][0]["classes_seen"] == 2
    notes = audit["findings"]
    assert [(n["severity"], n["step"], n["rank"]) for n in notes] == [("info", 2, 0), ("info", 2, 1)]
    assert "[0]:2x4" in notes[0]["message"] and "drop_last=False" in notes[0]["message"]
    assert report["ended_by"]["0"] == "script exit"


def test_early_stop_from_the_rank_local_loss_hangs_at_step_2(preflight):
    run = preflight("early_stop.py", timeout=TIMEOUT)
    report = run.report
    assert report is not None and run.returncode == HANG, run.output[-3000:]
    assert "rank 1 stops early at step 2" in run.output
    assert report["abort"]["stuck_ranks"] == [0]
    assert report["ranks"]["0"]["pending"]["phase"] == "backward"
    assert run.wall_s < TIMEOUT + 10 + 45  # start-up included


def test_early_stop_twin_with_an_all_reduced_decision_passes(preflight):
    run = preflight("early_stop.py", "--synced", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
    assert "rank 0 stops early at step 2" in run.output and "rank 1 stops early at step 2" in run.output


def test_rank0_checkpoint_after_step_1_is_caught_by_default(preflight, tmp_path):
    out = tmp_path / "ckpt"
    run = preflight("rank0_checkpoint.py", "--out", str(out), launcher="torchrun", timeout=TIMEOUT)
    report = run.report
    assert report is not None and report["exit_code"] in (DIVERGENCE, HANG), run.output[-3000:]
    assert report["diagnosis"]["code"] == "DSL101", report["diagnosis"]
    assert "rank == 0" in report["diagnosis"]["cause"]
    assert not out.exists() or not any(out.iterdir())


def test_checkpoint_on_every_rank_twin_passes_and_is_redirected(preflight, tmp_path):
    out = tmp_path / "ckpt"
    run = preflight("rank0_checkpoint.py", "--out", str(out), "--every_rank", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
    assert run.report["redirected_saves"] == {"0": [str(out)], "1": [str(out)]}
    assert run.report["coverage"]["0"]["saves"] == 1
    assert not out.exists() or not any(out.iterdir())


def test_loader_iterated_on_rank_0_only_is_no_hazard(preflight):
    run = preflight("rank0_eval_loader.py", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
    report = run.report
    assert {row["key"].rsplit(":", 1)[1] for row in report["loader_audit"]} == {"29#0", "35#0"}
    train = next(row for row in report["loader_audit"] if row["key"].endswith(":29#0"))
    assert {r: v["batches"] for r, v in train["per_rank"].items()} == {"0": 2, "1": 2}
    held_out = next(row for row in report["loader_audit"] if row["key"].endswith(":35#0"))
    assert list(held_out["per_rank"]) == ["0"]
    assert report["ended_by"]["0"] == "script exit" and report["dry_run"]["truncated"]["step"] == 3
    assert report["dry_run"]["truncated"]["by"] == "coverage"
