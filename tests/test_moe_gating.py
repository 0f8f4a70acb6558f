"""Issue 30, capacity-allreduced-no-drop: a DeepSpeed MoE gate patched with the project's own gating is judged on
that code (dslint/program/models/moe_gating.py). The fixture pair is tests/fixtures/static/moe/patched_gate_*."""

import shutil
from pathlib import Path

from dslint.config import Settings
from dslint.engine import Checker

MOE = Path(__file__).parent / "fixtures" / "static" / "moe"


def _check(folder: Path, monkeypatch, version: str = "0.19.8"):
    monkeypatch.chdir(folder)
    files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.suffix in (".py", ".json", ".sh"))
    return Checker(Settings(root=folder, deepspeed_version=version)).check_paths(files)


def test_project_gate_that_all_reduces_the_capacity_is_clean(monkeypatch):
    assert [f.code for f in _check(MOE / "patched_gate_capacity_allreduced", monkeypatch).findings] == []


def test_without_the_patch_deepspeeds_clamp_is_flagged(tmp_path, monkeypatch):
    # the same layer on DeepSpeed's own top1gating (k=1, drop_tokens=False, 0.19.8) clamps the capacity to the
    # local token count: the clean twin is clean because of the patched gate, not by accident
    case = tmp_path / "case"
    shutil.copytree(MOE / "patched_gate_capacity_allreduced", case)
    model = case / "model.py"
    model.write_text("\n".join(line for line in model.read_text().splitlines() if "gate.forward" not in line) + "\n")
    [f] = _check(case, monkeypatch).findings
    assert f.code == "DSL204" and "clamped to the local token count" in f.message


def test_project_gate_that_clamps_to_the_local_count_is_flagged(monkeypatch):
    [f] = _check(MOE / "patched_gate_capacity_local", monkeypatch).findings
    assert f.code == "DSL204" and "project's gating" in f.message and "gating.py:29" in f.message


def test_project_gate_with_token_dropping_is_flagged(tmp_path, monkeypatch):
    # drop_tokens=True takes the gating's other path: the capacity computed from the local token count
    case = tmp_path / "case"
    shutil.copytree(MOE / "patched_gate_capacity_allreduced", case)
    model = case / "model.py"
    model.write_text(model.read_text().replace("drop_tokens=False", "drop_tokens=True"))
    [f] = _check(case, monkeypatch).findings
    assert f.code == "DSL204" and "project's gating" in f.message and "drop_tokens=True" in f.message


def test_project_gate_dslint_cannot_read_is_a_warning(tmp_path, monkeypatch):
    # a gate forward from code outside the checked files: nothing shows the capacity is all-reduced, nor that it
    # is not -- flagged as a warning (the severity of an unknown gating setting)
    case = tmp_path / "case"
    shutil.copytree(MOE / "patched_gate_capacity_allreduced", case)
    (case / "gating.py").unlink()
    model = case / "model.py"
    model.write_text(model.read_text().replace("from gating import", "from vendored_gates import"))
    [f] = _check(case, monkeypatch).findings
    assert f.code == "DSL204" and f.severity.value == "warning" and "cannot read" in f.message


def test_project_gate_reducing_over_the_gates_ep_group_is_clean(tmp_path, monkeypatch):
    # DeepSpeed >= 0.14.1's copy: the MAX all_reduce runs over the gate's `ep_group`, the all_to_all's own group
    case = tmp_path / "case"
    shutil.copytree(MOE / "patched_gate_capacity_allreduced", case)
    gating = case / "gating.py"
    text = gating.read_text()
    text = text.replace("def route_top1(logits, capacity_factor, min_capacity, drop_tokens=True):",
                        "def route_top1(logits, capacity_factor, min_capacity, drop_tokens=True, ep_group=None):")
    text = text.replace("group=dist.group.WORLD", "group=ep_group")
    text = text.replace("gate.min_capacity, gate.drop_tokens)", "gate.min_capacity, gate.drop_tokens,\n"
                        "                                             gate.ep_group)")
    gating.write_text(text)
    assert "group=ep_group" in text and "gate.ep_group)" in text
    assert _check(case, monkeypatch).findings == []
    # over another group (one rank's own): nothing shows the sizes agree across the expert-parallel group
    gating.write_text(text.replace("group=ep_group", "group=dist.new_group([0])"))
    [f] = _check(case, monkeypatch).findings
    assert f.code == "DSL204" and f.severity.value == "warning"
