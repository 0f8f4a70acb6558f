"""Wait-for analysis and dead ranks on real multi-process runs (CPU, gloo), every wait bounded.

Each hazard is diagnosed well before ``--timeout`` (which stays the bound for silent stalls) with the line
where the ranks' paths part; each has a clean twin that passes."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.runtime, pytest.mark.timeout(120)]

HANG = 3
TIMEOUT = 30  # far above what the wait-for analysis needs: a diagnosis must not come from the timeout


@pytest.fixture(scope="module")
def warm_shm_op():
    """These scripts use torch.distributed alone (DeepSpeed's CPU comm op is never built or loaded)."""


@pytest.fixture
def preflight(preflight):
    """Every run here also checks that no process, scratch folder or /dev/shm file of the pre-flight's own
    is left behind (processes are checked for every run by the conftest)."""

    def run(*args, **kwargs):
        return preflight(*args, check_left=True, **kwargs)

    return run


def _point(report):
    return report["divergence_point"]


def test_cross_group_hang_is_diagnosed_by_wait_for_analysis_at_the_branch(preflight):
    run = preflight("wf_cross_group.py", launcher="torchrun", timeout=TIMEOUT)
    report = run.report
    assert report is not None and report["exit_code"] == HANG, run.output[-3000:]
    abort = report["abort"]
    assert abort["cause"] == "deadlock" and abort["stuck_ranks"] == [0, 1]
    assert abort["waits"]["0"]["op"] == "all_reduce" and abort["waits"]["1"]["op"] == "barrier"
    assert abort["waits"]["0"]["group"] != abort["waits"]["1"]["group"]
    point = _point(report)
    assert point["text"] == "if step == 1 and (rank == 0 or args.fixed):" and point["mechanism"] == "branch"
    assert report["diagnosis"]["code"] == "DSL101"
    assert abort["last_blocked_s"] <= 5  # diagnosed seconds after the last rank blocked
    assert run.wall_s < TIMEOUT, run.wall_s  # start-up included: the timeout was never reached
    assert "divergence point" in run.output


def test_cross_group_clean_twin_passes(preflight):
    run = preflight("wf_cross_group.py", "--fixed", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
    assert run.report["verdict"] == "pass"


def test_script_function_named_generate_is_a_trip_count_not_dsl104(preflight):
    run = preflight("wf_generate_named.py", launcher="torchrun", timeout=TIMEOUT)
    report = run.report
    assert report is not None and report["exit_code"] == HANG, run.output[-3000:]
    assert report["diagnosis"]["code"] == "DSL102", report["diagnosis"]
    point = _point(report)
    assert point["text"] == "for _ in range(max_new_tokens):" and point["function"] == "generate"
    assert run.wall_s < TIMEOUT


def test_generate_named_clean_twin_passes(preflight):
    run = preflight("wf_generate_named.py", "--fixed", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]


def test_rank_blocked_in_python_is_named_at_its_python_line_before_the_timeout(preflight):
    run = preflight("wf_python_hang.py", launcher="torchrun", timeout=8)
    report = run.report
    assert report is not None and report["exit_code"] == HANG, run.output[-3000:]
    abort = report["abort"]
    assert abort["cause"] == "blocked-elsewhere" and abort["stuck_ranks"] == [0]
    assert abort["blocking"]["rank"] == 1 and abort["blocking"]["state"] == "py"
    assert abort["blocking"]["stack"][0][2] == "wait_for_data"
    assert report["diagnosis"]["code"] is None  # not a collective hazard
    assert "time.sleep(0.5)" in report["diagnosis"]["cause"]
    assert _point(report)["text"] == "if rank == 1:"
    assert abort["last_blocked_s"] < 8  # before the timeout of the stuck all_reduce


def test_python_hang_clean_twin_passes(preflight):
    run = preflight("wf_python_hang.py", "--fixed", launcher="torchrun", timeout=8)
    assert run.returncode == 0, run.output[-3000:]


def _assert_dead_rank_1(run, how):
    report = run.report
    assert report is not None, run.output[-3000:]
    assert report["exit_code"] == HANG and report["abort"]["cause"] == "dead-rank", report["abort"]
    assert report["dead_ranks"] == [1]
    dead = report["abort"]["dead"]["1"]
    assert how in dead["how"], dead
    assert dead["last"]["op"] == "all_reduce" and dead["last"]["seq"] == 1
    assert report["diagnosis"]["code"] is None  # not DSL102: nothing diverged, a rank died
    assert "rank 1 died" in report["diagnosis"]["cause"]


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
def test_rank_killed_by_sigkill_is_reported_before_the_launcher_stops_the_others(preflight, launcher):
    run = preflight("wf_rank_dies.py", "--how", "kill", launcher=launcher, timeout=TIMEOUT)
    _assert_dead_rank_1(run, "SIGKILL")
    assert run.wall_s < TIMEOUT


def test_rank_killed_without_a_watching_launcher_is_reported_by_the_survivor(preflight):
    run = preflight("wf_rank_dies.py", "--how", "kill", launcher="none", timeout=TIMEOUT)
    assert run.returncode == HANG, run.output[-3000:]
    _assert_dead_rank_1(run, "")
    assert run.wall_s < TIMEOUT


def test_rank_leaving_through_os_exit_is_named_with_its_code(preflight):
    run = preflight("wf_rank_dies.py", "--how", "exit", launcher="none", timeout=TIMEOUT)
    assert run.returncode == HANG, run.output[-3000:]
    _assert_dead_rank_1(run, "os._exit(7)")


def test_rank_dies_clean_twin_passes(preflight):
    run = preflight("wf_rank_dies.py", "--how", "none", launcher="none", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]


def test_store_host_rank_0_killed_is_reported_by_rank_1(preflight):
    """Without a launcher the store lives in rank 0: when it dies, rank 1 reports from what it knows."""
    run = preflight("wf_rank_dies.py", "--how", "kill", "--victim", "0", launcher="none", timeout=TIMEOUT)
    assert run.report is not None, run.output[-3000:]
    assert run.report["dead_ranks"] == [0] and run.report["abort"]["cause"] == "dead-rank", run.report["abort"]
    assert "rank 0 died" in run.report["diagnosis"]["cause"]
    assert run.wall_s < TIMEOUT


def test_store_kept_by_torchrun_rank_0_killed_rank_1_reports(preflight):
    run = preflight("wf_rank_dies.py", "--how", "kill", "--victim", "0", launcher="torchrun", timeout=TIMEOUT)
    assert run.report is not None, run.output[-3000:]
    assert run.report["dead_ranks"] == [0] and "SIGKILL" in run.report["abort"]["dead"]["0"]["how"]


def test_early_break_on_rank_local_loss_is_an_exit_at_the_break(preflight):
    run = preflight("wf_early_break.py", launcher="torchrun", timeout=TIMEOUT)
    report = run.report
    assert report is not None and report["exit_code"] == HANG, run.output[-3000:]
    assert report["diagnosis"]["code"] == "DSL103", report["diagnosis"]
    assert _point(report)["text"] == "break" and _point(report)["mechanism"] == "exit"
    assert "for step in range(6)" in report["diagnosis"]["cause"]  # the loop it ends


def test_early_break_clean_twin_passes(preflight):
    run = preflight("wf_early_break.py", "--fixed", launcher="torchrun", timeout=TIMEOUT)
    assert run.returncode == 0, run.output[-3000:]
