"""Clean scripts pass with exit 0 and equal counts; outputs stay untouched; usage and script errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, base_env

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(240)]


def _snapshot(directory):
    return sorted((p.relative_to(directory).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in directory.rglob("*"))


def _equal_counts(report):
    assert report["counts"], report
    for group in report["counts"].values():
        assert len(set(group["per_rank"].values())) == 1, group


def test_clean_expert_parallel_zero2_passes_and_checkpoints_stay_out_of_the_user_dir(preflight, tmp_path):
    out = tmp_path / "checkpoints"
    out.mkdir()
    (out / "keep.txt").write_text("user data")
    before = _snapshot(out)
    run = preflight("moe_dynamic_padding.py", "--padding", "max_length", "--save_dir", str(out),
                    options=("--steps", "2"))
    assert run.returncode == 0, run.output[-3000:]
    assert run.report["verdict"] == "pass"
    _equal_counts(run.report)
    assert run.report["ended_by"] == {"0": "optimizer step 2", "1": "optimizer step 2"}
    assert run.report["redirected_saves"]["0"] == [str(out)]  # the step-1 checkpoint went to scratch
    assert _snapshot(out) == before
    assert not any(layer["ep_group_ranks"] is None for layer in run.report["moe_layers"])
    assert "rank 0 trained" not in run.output  # the dry step stopped the script


def test_continue_goes_on_into_training_after_a_pass(preflight):
    run = preflight("moe_dynamic_padding.py", "--padding", "max_length", options=("--continue",),
                    launcher="torchrun")
    assert run.returncode == 0, run.output[-3000:]
    assert run.report["verdict"] == "pass"
    assert "rank 0 trained" in run.output and "rank 1 trained" in run.output


def test_hf_trainer_tiny_model_passes(preflight, tmp_path):
    out = tmp_path / "trainer-out"
    out.mkdir()
    run = preflight("hf_trainer_tiny.py", "--output_dir", str(out), launcher="torchrun")
    assert run.returncode == 0, run.output[-3000:]
    assert run.report["verdict"] == "pass"
    _equal_counts(run.report)
    assert list(out.iterdir()) == []


def test_script_error_on_one_rank_is_reported_with_exit_4(preflight):
    run = preflight("raises_on_rank1.py", launcher="torchrun")
    report = run.report
    assert report is not None and report["exit_code"] == 4, run.output[-3000:]
    assert report["verdict"] == "error"
    assert report["ranks"]["1"]["error"]["exception"] == "ValueError"
    assert report["ranks"]["1"]["error"]["source"][1] == 10


@pytest.mark.parametrize("argv", [[], ["--timeout", "0", "x.py"], ["does-not-exist.py"], ["--bogus", "x.py"],
                                  ["--steps", "0", "x.py"], ["--max-steps", "0", "x.py"],
                                  ["--audit-budget", "-1", "x.py"]])
def test_usage_errors_exit_2(argv):
    proc = subprocess.run([sys.executable, "-m", "dslint", "preflight", *argv], cwd=REPO, env=base_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr


def test_preflight_accepts_the_deepspeed_launcher_local_rank_option():
    proc = subprocess.run([sys.executable, "-m", "dslint", "--local_rank=0", "preflight", "--help"], cwd=REPO,
                          env=base_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--timeout" in proc.stdout
