"""Pre-flight v3 (ISSUE 31): the code after (and between) the training loops runs under the check.

Every script is run with its real arguments (``--steps 100``: a loop longer than the default ``--max-steps 50``)
and the default options (``--timeout 120``, no ``--steps``): once the ranks have agreed to end the dry steps, the
DataLoader ends its epoch, the script goes on, and a rank-0-only evaluation, sample or save after the loop is
reported as the hang it is; each clean twin passes. A loop the pre-flight cannot end is named, exit 6.
Each test records its wall time (start-up included) in the report's figures (``figures`` below).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(300)]

SCRIPT = "after_loop.py"
PASS, HANG, NOT_COVERED = 0, 3, 6
DEFAULT_TIMEOUT = 120  # the CLI's default --timeout: the verdicts must come from the wait-for monitor, long before


def _run(preflight, *args, options=()):
    return preflight(SCRIPT, "--steps", "100", *args, timeout=DEFAULT_TIMEOUT, limit_s=240, options=options)


def _assert_found_after_the_truncation(run, line_text):
    report = run.report
    assert report is not None and run.returncode == HANG, run.output[-4000:]
    assert report["verdict"] == "hang" and report["abort"]["cause"] in ("deadlock", "finished", "peer-finished") \
        or report["verdict"] == "hang", report["abort"]
    truncated = report["dry_run"]["truncated"]
    assert truncated["step"] == 50 and truncated["by"] == "max-steps", report["dry_run"]
    assert report["diagnosis"]["code"] == "DSL101", report["diagnosis"]
    assert "rank == 0" in report["diagnosis"]["cause"], report["diagnosis"]
    stack = [f["text"] for f in report["ranks"]["0"]["pending"]["user_stack"]]
    assert any(line_text in t for t in stack), stack
    assert "loaders' epochs were ended at optimizer step 50" in run.output.split("HANG")[0]
    assert run.wall_s < DEFAULT_TIMEOUT, run.wall_s  # the monitor's verdict, not the --timeout
    # static <-> runtime: dslint check's finding at the hazard's line is confirmed by this run
    confirmed = [f for f in report["static"]["findings"] if f["status"] == "confirmed"]
    assert [f["code"] for f in confirmed] == ["DSL101"], report["static"]
    assert line_text in _line(confirmed[0]), confirmed
    assert "CONFIRMED by this run" in run.output
    print(f"figure: {run.wall_s:.1f} s")


def _line(finding):
    from conftest import FIXTURES

    return (FIXTURES / SCRIPT).read_text().splitlines()[finding["line"] - 1]


@pytest.mark.parametrize("after, line_text", [
    ("eval", 'print(f"eval {evaluate():.3f}", flush=True)'),
    ("generate", "print(f\"sample {generate(tokens(1, 4, seed=3)).tolist()}\", flush=True)"),
    ("save", 'engine.save_checkpoint(args.out, tag="final")'),
    ("epoch_eval", 'print(f"epoch {epoch} eval {evaluate():.3f}", flush=True)'),
])
def test_rank0_only_code_after_a_100_step_loop_is_reached_and_reported(preflight, after, line_text):
    run = _run(preflight, "--after", after)
    _assert_found_after_the_truncation(run, line_text)


@pytest.mark.parametrize("after", ["eval", "generate", "save", "epoch_eval"])
def test_clean_twin_runs_the_code_after_the_loop_and_passes(preflight, tmp_path, after):
    out = tmp_path / "ckpt"
    run = _run(preflight, "--after", after, "--clean", "--out", str(out))
    report = run.report
    assert report is not None and run.returncode == PASS, run.output[-4000:]
    assert report["verdict"] == "pass" and report["dry_run"]["kind"] == "script-end"
    assert report["dry_run"]["covered"] is True and report["dry_run"]["truncated"]["step"] == 50
    assert "rank 0 done" in run.output and "rank 1 done" in run.output
    lines = run.output.splitlines()
    first = next(i for i, line in enumerate(lines) if "dslint preflight: dry run:" in line)
    assert "PASS" in lines[first + 1] and "ended at the script's end" in lines[first]
    if after == "epoch_eval":  # epochs 2 and 3 ran their first step each: 50 + 1 + 1
        assert report["dry_run"]["steps"] == 52, report["dry_run"]
        assert run.output.count("epoch 2 eval") == 2
    if after == "save":
        assert report["redirected_saves"] == {"0": [str(out)], "1": [str(out)]}
        assert not out.exists()
    # the static finding on the code after the loop (guarded by `everyone or rank == 0`) ran on both ranks
    executed = [f for f in report["static"]["findings"] if f["status"] == "executed"]
    assert executed and all(f["ranks"] == [0, 1] for f in executed), report["static"]
    print(f"figure: {run.wall_s:.1f} s")


def test_a_range_training_loop_ends_with_the_dry_steps_and_the_code_after_it_runs(preflight):
    """`for step in range(args.steps)` around the optimizer step (no DataLoader): ended at the truncation as an
    epoch is, so the rank-0-only evaluation after it is reached and reported."""
    run = _run(preflight, "--after", "eval", "--loop", "range")
    report = run.report
    assert report is not None and run.returncode == HANG, run.output[-4000:]
    assert report["diagnosis"]["code"] == "DSL101", report["diagnosis"]
    truncated = report["dry_run"]["truncated"]
    assert truncated["step"] == 50 and [e["loader"] for e in truncated["loaders"]] == ["range"], truncated
    assert "the script's range loop was ended at optimizer step 50" in run.output.split("HANG")[0]
    stack = [f["text"] for f in report["ranks"]["0"]["pending"]["user_stack"]]
    assert any('print(f"eval {evaluate():.3f}", flush=True)' in t for t in stack), stack
    print(f"figure: {run.wall_s:.1f} s")


def test_a_range_loop_left_alone_is_named_and_not_covered(preflight):
    run = _run(preflight, "--after", "eval", "--loop", "range", options=("--keep-range-loops",))
    report = run.report
    assert report is not None and run.returncode == NOT_COVERED, run.output[-4000:]
    assert report["dry_run"]["unended_loop"]["header"] == "for step in range(args.steps)"
    assert "--keep-range-loops" in run.output


@pytest.mark.parametrize("after", ["eval", "none"])
def test_a_loop_the_preflight_cannot_end_is_named_and_not_covered(preflight, after):
    run = _run(preflight, "--after", after, "--loop", "while")
    report = run.report
    assert report is not None and run.returncode == NOT_COVERED, run.output[-4000:]
    assert report["verdict"] == "not_covered" and report["exit_code"] == NOT_COVERED
    end = report["dry_run"]
    assert end["kind"] == "unended-loop" and end["covered"] is False and end["truncated"]["step"] == 50
    loop = end["unended_loop"]
    assert loop["path"].endswith("after_loop.py") and loop["header"] == "while step < args.steps"
    assert "while step < args.steps" in run.output and "not run:" in run.output
    assert "PASS" not in run.output
    lines = run.output.splitlines()
    first = next(i for i, line in enumerate(lines) if "dslint preflight: dry run:" in line)
    assert "NOT FULLY COVERED" in lines[first + 1]
    # the static findings after the unended loop: not reached by the dry run
    statuses = {f["line"]: f["status"] for f in report["static"]["findings"]}
    if after == "eval":
        assert statuses and set(statuses.values()) == {"not reached"}, report["static"]
    print(f"figure: {run.wall_s:.1f} s")


def test_7141_train_then_rank_sliced_sampled_generate_is_diagnosed_from_its_launch_command(preflight):
    """#7141 end to end: `deepspeed --num_gpus 2 moe_train_then_generate.py --steps 100` with the pre-flight put
    between the launcher and the script, default options: the training loop is ended at the bound, the sampled
    generation on the rank-sliced prompts runs, and the ranks' MoE all_to_all counts part (7 + 6 forwards on
    rank 0 against 4 + 3 on rank 1): a hang, not PASS."""
    run = preflight("moe_train_then_generate.py", "--steps", "100", timeout=DEFAULT_TIMEOUT, limit_s=240)
    report = run.report
    assert report is not None and run.returncode == HANG, run.output[-4000:]
    assert report["dry_run"]["truncated"]["step"] == 50, report["dry_run"]
    pending = [r["pending"] for r in report["ranks"].values() if r.get("pending")]
    assert any(p["op"] == "all_to_all_single" and "deepspeed_moe" in (p.get("module") or "") for p in pending), \
        report["ranks"]
    stack = [f["text"] for p in pending for f in p["user_stack"]]
    assert any("scores = logits(window(ids))[:, -1]" in t for t in stack), stack
    assert "PASS" not in run.output
    assert run.wall_s < DEFAULT_TIMEOUT, run.wall_s
    print(f"figure: {run.wall_s:.1f} s")


def test_7141_clean_twin_with_synced_forwards_passes(preflight):
    run = preflight("moe_train_then_generate.py", "--steps", "100", "--synced", timeout=DEFAULT_TIMEOUT,
                    limit_s=240)
    report = run.report
    assert report is not None and run.returncode == PASS, run.output[-4000:]
    assert report["dry_run"]["kind"] == "script-end" and report["dry_run"]["covered"] is True
    assert "rank 0 done" in run.output and "rank 1 done" in run.output
    print(f"figure: {run.wall_s:.1f} s")
