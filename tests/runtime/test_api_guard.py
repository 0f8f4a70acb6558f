"""dslint.runtime_checks.api.guard(engine) in a custom loop launched without `dslint preflight`."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(240)]


def test_guard_passes_and_the_loop_goes_on(preflight, tmp_path):
    report = tmp_path / "guard.json"
    run = preflight("guard_custom_loop.py", "--report", str(report), plain=True)
    assert run.returncode == 0, run.output[-3000:]
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass" and data["ended_by"]["0"] == "optimizer step 1"
    assert "rank 0 finished the custom loop" in run.output and "rank 1 finished the custom loop" in run.output


def test_guard_catches_the_padding_divergence_and_every_rank_leaves(preflight, tmp_path):
    report = tmp_path / "guard.json"
    run = preflight("guard_custom_loop.py", "--bad", "--report", str(report), plain=True)
    assert run.returncode != 0
    data = json.loads(report.read_text())
    assert data["exit_code"] == 1 and data["diagnosis"]["code"] == "DSL204"
    assert "finished the custom loop" not in run.output
