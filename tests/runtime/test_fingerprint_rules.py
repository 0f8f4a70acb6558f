"""The cross-rank compatibility rule and the source reading behind diagnoses (pure, no processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO, base_env
from dslint.runtime_checks.diagnosis import enclosing_controls
from dslint.runtime_checks.fingerprint import check_group

pytestmark = pytest.mark.runtime


def a2a(shape, world=2):
    n = shape[0] * shape[1] * shape[2]
    return {"op": "all_to_all_single", "ins": [[shape, "float32"]], "outs": [[shape, "float32"]],
            "send": [n // world] * world, "recv": [n // world] * world}


def test_all_to_all_capacity_mismatch_is_a_size_mismatch():
    mismatch = check_group([a2a([2, 12, 16]), a2a([2, 20, 16])])
    assert mismatch.kind == "size" and "sends 192" in mismatch.detail and "expects 320" in mismatch.detail
    assert check_group([a2a([2, 16, 16]), a2a([2, 16, 16])]) is None


def test_split_sizes_pair_send_with_the_peer_receive():
    r0 = {"op": "all_to_all_single", "ins": [], "outs": [], "send": [4, 6], "recv": [4, 2]}
    r1 = {"op": "all_to_all_single", "ins": [], "outs": [], "send": [2, 8], "recv": [6, 8]}
    assert check_group([r0, r1]) is None
    r1_bad = dict(r1, recv=[5, 8])
    assert check_group([r0, r1_bad]).kind == "size"


def test_different_ops_or_roots_at_one_position():
    ar = {"op": "all_reduce", "ins": [[[4], "float32"]], "outs": [], "sym": [[[[4], "float32"]], []], "rop": "SUM"}
    assert check_group([ar, {"op": "barrier", "sym": None}]).kind == "op"
    assert check_group([ar, dict(ar, rop="MAX")]).kind == "op"
    other = dict(ar, ins=[[[5], "float32"]], sym=[[[[5], "float32"]], []])
    assert check_group([ar, other]).kind == "size"
    assert check_group([ar, dict(ar, ins=[[[4], "bfloat16"]])]).kind == "size"


def test_enclosing_controls_read_the_users_loop_and_rank_test():
    loop = enclosing_controls([str(FIXTURES / "moe_uneven_eval.py"), 20, "<module>"])
    assert loop == [("loop", "samples[rank::world]")]
    cond = enclosing_controls([str(FIXTURES / "moe_rank0_forward.py"), 33, "<module>"])
    assert cond[0] == ("if", "rank == 0")


def test_importing_the_runtime_half_does_not_import_torch():
    code = ("import sys, dslint.cli, dslint.runtime_checks.cli, dslint.runtime_checks.api, "
            "dslint.runtime_checks.launch; print('torch' in sys.modules, 'deepspeed' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=base_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.strip() == "False False", proc.stderr
