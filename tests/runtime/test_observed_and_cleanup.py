"""Pre-flight v2 correctness (ISSUE 21 item 4): runtime findings only for what was observed, static hints apart;
scratch folders with redirected saves removed on every exit path (the conftest checks every run for leftover
scratch folders and /dev/shm segments); gradient reductions attributed through their bucket's parameters."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(240)]


def test_moe_without_engine_at_ep_size_1_passes_with_a_static_hint(preflight):
    run = preflight("moe_no_engine.py", "--ep_size", "1", launcher="torchrun", timeout=10)
    assert run.returncode == 0, run.output[-3000:]
    report = run.report
    assert report["verdict"] == "pass" and report["exit_code"] == 0
    assert not [f for f in report["findings"] if f["code"] == "DSL201"]
    [hint] = [h for h in report["hints"] if h["code"] == "DSL201"]
    assert hint["severity"] == "hint" and hint["observed"] is False and hint["module"] == "moe.deepspeed_moe"
    assert "static, not observed" in run.output
    assert all(layer["all_to_all_groups"] == [] for layer in report["moe_layers"])
    assert "rank 0 output (3, 5, 8) finite=True" in run.output


def test_moe_without_engine_at_ep_size_2_is_an_observed_dsl201(preflight):
    run = preflight("moe_no_engine.py", "--ep_size", "2", launcher="torchrun", timeout=10)
    report = run.report
    assert report is not None and report["exit_code"] == 1, run.output[-3000:]
    [finding] = [f for f in report["findings"] if f["code"] == "DSL201"]
    assert finding["severity"] == "error" and finding["observed"] is True
    assert report["hints"] == []
    world = [name for name, group in report["counts"].items() if group["label"] == "WORLD"]
    assert report["moe_layers"][0]["all_to_all_groups"] == world


def test_continue_removes_the_scratch_folder_and_reports_where_saves_went(preflight, tmp_path):
    out = tmp_path / "ckpt"
    run = preflight("checkpoint_every_step.py", "--save_dir", str(out), options=("--steps", "2", "--continue"),
                    timeout=15)
    assert run.returncode == 0, run.output[-3000:]
    moves = run.report["redirected_to"]
    assert [m["from"] for m in moves["0"]] == [str(out)] and [m["from"] for m in moves["1"]] == [str(out)]
    assert "dslint-preflight-" in moves["0"][0]["to"]
    assert f"save to {out} redirected to {moves['0'][0]['to']}" in run.output
    # the dry step's save (tag step0) went to scratch; the real training after the pass saved for real
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["step1", "step2", "step3"]
    assert "rank 0 saved" in run.output


def test_guard_removes_its_scratch_folder(preflight, tmp_path):
    out, report = tmp_path / "ckpt", tmp_path / "guard.json"
    run = preflight("checkpoint_every_step.py", "--save_dir", str(out), "--guard", "--report", str(report),
                    plain=True)
    assert run.returncode == 0, run.output[-3000:]
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass" and data["redirected_saves"]["0"] == [str(out)]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["step1", "step2", "step3"]
