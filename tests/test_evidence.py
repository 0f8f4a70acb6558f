"""Issue 30, causes 6 and 7: every finding says what it rests on; findings whose evidence is incomplete are
hidden unless asked for (and never fail the run then); engines are known by their use. The fixture pairs are in
tests/fixtures/static/collectives/ (generate_input_loop_*, raise_*_process_group, engine_by_use_*)."""

import json
from pathlib import Path

from dslint.config import Settings
from dslint.engine import check_texts
from dslint.formats import render
from dslint.rules import all_rules

FIXTURES = Path(__file__).parent / "fixtures" / "static" / "collectives"

# a chat loop whose model is an engine by its name only (issue 30 item 9: no engine, no finding)
NAMED_ONLY = """\
import os
from transformers import AutoModelForCausalLM

local_rank = int(os.environ.get("LOCAL_RANK", 0))
ds_engine = AutoModelForCausalLM.from_pretrained("gpt2")
while True:
    ids = tokenize(input("> "))
    out = ds_engine.generate(ids, do_sample=True)
    if local_rank == 0:
        ds_engine(ids)
"""


def _run(files: dict, **settings):
    return check_texts(files, Settings(deepspeed_version="0.19.8", **settings))


def _fixture(name: str) -> dict:
    return {name: (FIXTURES / name).read_text()}


def test_name_only_engine_is_no_engine():
    """Issue 30 item 9: an object known as an engine by its name only (no deepspeed.initialize, no engine use) is
    no engine at all -- not even an unproven one."""
    for show in (False, True):
        report = _run({"chat.py": NAMED_ONLY}, show_unproven=show)
        assert report.findings == [] and report.hidden == 0


# a finding whose evidence is incomplete (a batch key no file is seen to write on some batches only): hidden by
# default, shown with --show-unproven
UNPROVEN = Path(__file__).parent / "fixtures" / "static" / "params" / "sensor_key_not_configured"


def _unproven_files() -> dict:
    return {str(p.relative_to(UNPROVEN)): p.read_text() for p in sorted(UNPROVEN.rglob("*")) if p.is_file()}


def _write_unproven(root: Path) -> list[Path]:
    for name, text in _unproven_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return [Path(name) for name in _unproven_files()]


def test_unproven_finding_is_hidden_by_default():
    report = _run(_unproven_files())
    assert report.findings == [] and report.hidden == 1
    shown = _run(_unproven_files(), show_unproven=True)
    [f] = shown.findings
    assert f.proven is False and shown.hidden == 0
    assert "batch-key" in {e.kind for e in f.evidence if not e.found}


def test_plain_model_in_input_loop_is_no_finding_at_all():
    report = _run(_fixture("generate_input_loop_plain_model.py"), show_unproven=True)
    assert report.findings == [] and report.hidden == 0


def test_init_inference_is_the_evidence_of_generate():
    report = _run(_fixture("generate_input_loop_init_inference.py"))
    [f] = report.findings
    assert f.code == "DSL104" and f.proven and f.severity.value == "warning"
    kinds = {(e.kind, e.found): e for e in f.evidence}
    assert kinds[("init_inference", True)].line == 12
    assert kinds[("collective", True)].line == 16
    assert ("zero-stage", False) in kinds


def test_zero3_config_and_engine_are_cited_with_their_lines():
    files = {"train.py": "import deepspeed\n"
                         "engine, *_ = deepspeed.initialize(model=model, config='ds.json')\n"
                         "for batch in loader:\n"
                         "    out = engine.module.generate(**batch, do_sample=True)\n",
             "ds.json": '{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {\n    "stage": 3\n  }\n}\n'}
    [f] = _run(files).findings
    assert f.code == "DSL104" and f.proven and f.severity.value == "error"
    found = {e.kind: (e.path, e.line) for e in f.evidence if e.found}
    assert found["engine"] == ("train.py", 2)
    assert found["zero-stage"] == ("ds.json", 4)
    assert not [e for e in f.evidence if not e.found]


def test_raise_before_the_process_group_is_no_dsl103_after_it_is():
    assert _run(_fixture("raise_before_process_group.py"), show_unproven=True).findings == []
    [f] = _run(_fixture("raise_after_process_group.py")).findings
    assert f.code == "DSL103"
    pg = [e for e in f.evidence if e.kind == "process-group"]
    assert pg and pg[0].line == 8 and "init_process_group" in pg[0].note


def test_engine_known_by_its_use_through_a_constructor_parameter():
    report = _run(_fixture("engine_by_use_constructor_param.py"))
    assert sorted(f.code for f in report.findings) == ["DSL102", "DSL104"]
    for f in report.findings:
        assert f.proven and f.severity.value == "warning"
        engine = [e for e in f.evidence if e.kind == "engine" and e.found]
        assert engine and "by its use" in engine[0].note and "backward(loss)" in engine[0].note
        assert [e.kind for e in f.evidence if not e.found] == ["zero-stage"]


def test_plain_module_with_torch_optimizer_is_no_engine():
    report = _run(_fixture("engine_by_use_torch_optimizer.py"), show_unproven=True)
    assert report.findings == []


def test_backward_without_loss_or_step_with_optimizer_is_no_engine():
    # an LR scheduler's `step()` and a tensor's `backward()` on other objects; `.module` on a DDP wrapper
    text = (FIXTURES / "engine_by_use_constructor_param.py").read_text()
    text = text.replace("self.model.backward(loss)", "loss.backward()")
    text = text.replace("  # expect: DSL102", "").replace("  # expect: DSL104", "")
    assert _run({"t.py": text}, show_unproven=True).findings == []


def test_formats_carry_the_evidence_and_the_mark():
    report = _run(_unproven_files(), show_unproven=True)
    data = json.loads(render("json", report, all_rules()))
    f = data["findings"][0]
    assert f["proven"] is False and f["evidence"][0]["kind"] == "engine"
    assert set(f["evidence"][0]) == {"kind", "note", "path", "line", "found"}
    sarif = json.loads(render("sarif", report, all_rules()))
    props = sarif["runs"][0]["results"][0]["properties"]
    assert props["proven"] is False and props["evidence"]
    github = render("github", report, all_rules())
    assert "(unproven)" in github and "Evidence%3A" not in github and "Evidence: " in github.replace("%0A", " ")
    from dslint.formats import text as text_format
    text = text_format.render(report, all_rules(), color=False)
    assert "[error, unproven]" in text and "  = evidence: engine: " in text and "  = not seen: batch-key: " in text
    hidden = text_format.render(_run(_unproven_files()), all_rules(), color=False)
    assert "1 finding with incomplete evidence not shown (--show-unproven shows it)." in hidden


def test_exit_code_ignores_hidden_findings(tmp_path, monkeypatch):
    from dslint.commands import run_check
    paths = _write_unproven(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert run_check(paths, output_format="json", no_cache=True, output=tmp_path / "out.json") == 0
    assert json.loads((tmp_path / "out.json").read_text())["hidden"] == 1
    assert run_check(paths, output_format="json", no_cache=True, output=tmp_path / "out.json",
                     show_unproven=True) == 1
    (tmp_path / "pyproject.toml").write_text("[tool.dslint]\nshow-unproven = true\n")
    assert run_check(paths, output_format="json", no_cache=True, output=tmp_path / "out.json") == 1
    assert len(json.loads((tmp_path / "out.json").read_text())["findings"]) == 1


def test_show_unproven_setting_must_be_a_boolean():
    import pytest
    from dslint.config import SettingsError
    with pytest.raises(SettingsError):
        Settings(**{"show-unproven": "yes"})


def test_cached_run_hides_and_shows_the_same(tmp_path, monkeypatch):
    from dslint.commands import run_check
    paths = _write_unproven(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSLINT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out.json"
    for show, count in ((False, 0), (True, 1), (False, 0), (True, 1)):
        run_check(paths, output_format="json", output=out, show_unproven=show)
        assert len(json.loads(out.read_text())["findings"]) == count


def test_config_findings_name_the_consumer():
    files = {"ds.json": '{"train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 2}}\n',
             "run.sh": "deepspeed --num_gpus 2 train.py --deepspeed ds.json\n",
             "train.py": "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config=args.deepspeed)\n"}
    report = _run(files)
    config = [f for f in report.findings if f.path == "ds.json"]
    assert config, [(f.code, f.path) for f in report.findings]
    for f in config:
        consumers = [e for e in f.evidence if e.kind == "consumer" and e.found]
        assert consumers and consumers[0].path == "run.sh" and consumers[0].line == 1, f.evidence


def test_every_rule_documents_its_evidence():
    for rule in all_rules():
        assert rule.evidence_docs(), rule.code


def test_engine_known_by_its_use_through_a_function_parameter():
    text = (
        "import torch.distributed as dist\n"
        "def train(model, loader):\n"
        "    for batch in loader:\n"
        "        loss = model(**batch).loss\n"
        "        model.backward(loss)\n"
        "        model.step()\n"
        "    if dist.get_rank() == 0:\n"
        "        model.save_checkpoint('ckpt')\n")
    [f] = _run({"loop.py": text}).findings
    assert (f.code, f.line, f.severity.value) == ("DSL101", 8, "error")
    assert [e.line for e in f.evidence if e.kind == "engine"] == [5]
    # the same without `backward(loss)` on it: a plain module, and `save_checkpoint` of an unknown object
    plain = text.replace("model.backward(loss)", "loss.backward()").replace("model.save_checkpoint", "model.save")
    assert _run({"loop.py": plain}, show_unproven=True).findings == []


def test_terminal_chat_without_a_second_rank_is_unproven():
    """A generating loop fed by `input()` under init_inference, with no launcher line, --world-size or rank read:
    a one-process tool, its DSL104 hidden unless asked for; the same chat reading LOCAL_RANK is proven."""
    report = _run(_fixture("generate_terminal_chat_one_process.py"))
    assert report.findings == [] and report.hidden == 1
    [f] = _run(_fixture("generate_terminal_chat_one_process.py"), show_unproven=True).findings
    assert f.code == "DSL104" and f.proven is False
    assert "ranks" in [e.kind for e in f.evidence if not e.found]
    [g] = _run(_fixture("generate_input_loop_init_inference.py")).findings
    assert g.code == "DSL104" and g.proven and "ranks" not in {e.kind for e in g.evidence}


def _case(folder: Path, monkeypatch, **settings):
    """A fixture folder checked as one run from its own root (as tests/test_fixtures.py does)."""
    from dslint.engine import Checker
    monkeypatch.chdir(folder)
    files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.suffix in (".py", ".json", ".sh", ".md"))
    return Checker(Settings(root=folder, deepspeed_version="0.19.8", **settings)).check_paths(files)


MOE = Path(__file__).parent / "fixtures" / "static" / "moe"


def test_dsl204_needs_the_moe_layer_in_the_model_the_padded_batches_feed(monkeypatch):
    # the twin of padding_moe_model_imported: the MoE layer is only defined in the package (issue 30,
    # moe-in-package-not-in-model); hidden by default, shown marked with --show-unproven
    report = _case(MOE / "padding_moe_in_package_only", monkeypatch)
    assert report.findings == [] and report.hidden == 1
    [f] = _case(MOE / "padding_moe_in_package_only", monkeypatch, show_unproven=True).findings
    assert f.code == "DSL204" and not f.proven
    [moe] = [e for e in f.evidence if e.kind == "moe-layer"]
    assert not moe.found and "tagger/experts.py" in moe.note
    [f] = _case(MOE / "padding_moe_model_imported", monkeypatch).findings
    assert f.code == "DSL204" and f.proven
    [moe] = [e for e in f.evidence if e.kind == "moe-layer"]
    assert moe.found and moe.path == "tagger/experts.py" and moe.line == 10


COLLECTIVES = Path(__file__).parent / "fixtures" / "static" / "collectives"


def test_program_started_only_by_plain_python_commands_is_unproven(monkeypatch, tmp_path):
    # twin of rank_exit_launched: run.sh runs the script only as `python sweep.py` (issue 30,
    # launcher-single-gpu-include): hidden by default, shown marked, with the command as its evidence
    report = _case(COLLECTIVES / "rank_exit_python_run_only", monkeypatch)
    assert report.findings == [] and report.hidden == 1
    [f] = _case(COLLECTIVES / "rank_exit_python_run_only", monkeypatch, show_unproven=True).findings
    assert f.code == "DSL103" and not f.proven
    [run] = [e for e in f.evidence if e.kind == "launcher"]
    assert run.found and run.path == "run.sh" and run.line == 3 and "python sweep.py" in run.note
    assert [e.kind for e in f.evidence if not e.found] == ["world-size"]
    # the same command, but the program spawns its ranks itself: the finding is shown
    import shutil
    case = tmp_path / "spawned"
    shutil.copytree(COLLECTIVES / "rank_exit_python_run_only", case)
    text = (case / "sweep.py").read_text().replace(
        "if __name__ == \"__main__\":\n    main()",
        "if __name__ == \"__main__\":\n    import torch.multiprocessing as mp\n    mp.spawn(main, nprocs=4)")
    (case / "sweep.py").write_text(text)
    [f] = _case(case, monkeypatch).findings
    assert f.code == "DSL103" and f.proven
    # one rank of several started by hand (`RANK=$i python ... &`) is no one-process run either
    (case / "sweep.py").write_text((COLLECTIVES / "rank_exit_python_run_only" / "sweep.py").read_text())
    (case / "run.sh").write_text("#!/bin/bash\nfor i in 0 1; do\n  RANK=$i WORLD_SIZE=2 python sweep.py &\ndone\nwait\n")
    [f] = _case(case, monkeypatch).findings
    assert f.code == "DSL103" and f.proven


def test_plain_python_commands_read_from_a_shell_script():
    from dslint.sources.launcher import read_python_runs
    text = ("#!/bin/bash\nlayers=\"10 11\"\npython search.py --lr 1 --moe_layers $layers;\n"
            "for i in 0 1; do RANK=$i python train.py & done\npython train2.py --local_rank 0\nsrun python x.py\n"
            "CUDA_VISIBLE_DEVICES=0 python3 -u run.py --a b &\ncd sub && python -m pkg.tool --x\n"
            "python -c 'print(1)'\necho python z.py\n")
    runs = [(r.line, r.script, r.module, r.world_size) for r in read_python_runs(text)]
    assert runs == [(3, "search.py", None, 1), (8, None, "pkg.tool", 1)]


def test_rules_page_has_the_evidence_table_of_every_rule():
    from dslint.ruledocs import markdown
    rules = all_rules()
    page = markdown(rules)
    table = page.split("## Evidence: which findings are shown by default", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| DSL")}
    assert set(rows) == {r.code for r in rules}
    for code in ("DSL101", "DSL103", "DSL104", "DSL204", "DSL303"):
        assert "`python x.py`" in rows[code]            # the one-process run condition
    assert "elsewhere in the package" in rows["DSL204"] and "by its name only" in rows["DSL104"]
    assert rows["DSL401"].rstrip().endswith("| never |")


def test_backend_disjunct_without_launch_evidence_is_unproven():
    """`if distributed_type == DEEPSPEED or is_main_process: accelerator.save_state()` with no launcher line that
    shows the backend: the call is collective off DeepSpeed only under FSDP/Megatron-LM, which nothing shows --
    unproven, with the backend as the evidence not seen (with a launcher line: the fixture pair
    accelerate_backend_disjunct_launched / _fsdp)."""
    case = FIXTURES / "accelerate_backend_disjunct_launched"
    files = {"train.py": (case / "train.py").read_text()}
    assert _run(files).findings == []
    shown = _run(files, show_unproven=True)
    assert [(f.code, f.line, f.proven) for f in shown.findings] == [("DSL101", 15, False), ("DSL101", 21, False)]
    for f in shown.findings:
        assert [e.kind for e in f.evidence if not e.found] == ["backend"]


def test_main_process_save_state_without_backend_evidence_is_unproven():
    """Issue 30 cause 6 (collective-backend-never-configured): the plain `if accelerator.is_main_process:
    accelerator.save_state()` is collective only under a DeepSpeed/FSDP/Megatron-LM backend. With no launcher line,
    accelerate config, DeepSpeed config or plugin that shows one, the finding is unproven (hidden by default); an
    `Accelerator(deepspeed_plugin=...)` of the program or an `accelerate launch --use_fsdp` line proves it; every
    launch MULTI_GPU makes it none (the fixture pair collectives/accelerate_backend_never_configured /
    accelerate_backend_plugin)."""
    text = ("from accelerate import Accelerator\n\n"
            "def main(model, plugin):\n"
            "    accelerator = Accelerator({})\n"
            "    model = accelerator.prepare(model)\n"
            "    if accelerator.is_main_process:\n"
            "        accelerator.save_state('out')\n")
    bare = {"train.py": text.format("")}
    report = _run(bare)
    assert report.findings == [] and report.hidden == 1
    [f] = _run(bare, show_unproven=True).findings
    assert (f.code, f.line, f.proven) == ("DSL101", 7, False)
    assert [e.kind for e in f.evidence if not e.found] == ["backend"]
    # `deepspeed_plugin=None` sets up nothing
    assert _run({"train.py": text.format("deepspeed_plugin=None")}).findings == []
    [f] = _run({"train.py": text.format("deepspeed_plugin=plugin")}).findings
    assert (f.code, f.line, f.proven) == ("DSL101", 7, True)
    assert any(e.kind == "backend" and e.found and e.line == 4 for e in f.evidence)
    assert _run({**bare, "run.sh": "accelerate launch --multi_gpu --num_processes 4 train.py\n"},
                show_unproven=True).findings == []
    [f] = _run({**bare, "run.sh": "accelerate launch --use_fsdp --num_processes 4 train.py\n"}).findings
    assert f.code == "DSL101" and f.proven
    # a launcher line handing the program a DeepSpeed config shows DeepSpeed; one without shows nothing
    config = {"ds.json": '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}'}
    for line in ("accelerate launch --num_processes 2 train.py --deepspeed ds.json\n",
                 "deepspeed --num_gpus 2 train.py --deepspeed_config ds.json\n"):
        [f] = _run({**bare, **config, "run.sh": line}).findings
        assert f.proven and any(e.kind == "backend" and e.found and "DeepSpeed config" in e.note for e in f.evidence)
    report = _run({**bare, **config, "run.sh": "accelerate launch --num_processes 2 train.py\n"})
    assert report.findings == [] and report.hidden == 1


def test_trainer_with_command_line_arguments_and_no_launch_line_is_unproven(monkeypatch):
    # issue 30 (hf-trainer-deepspeed-launch-unseen): the Trainer's TrainingArguments are parsed from the command
    # line and no launch line is seen -- a `--deepspeed ds.json` there would create the expert groups
    report = _case(MOE / "trainer_command_line_launch_unseen", monkeypatch)
    assert report.findings == [] and report.hidden == 1
    [f] = _case(MOE / "trainer_command_line_launch_unseen", monkeypatch, show_unproven=True).findings
    assert f.code == "DSL201" and not f.proven
    assert any(e.kind == "launcher" and not e.found and "--deepspeed" in e.note for e in f.evidence)
    # the twin's launch line is seen and passes no --deepspeed: proven
    [g] = _case(MOE / "trainer_no_deepspeed_on_command_line", monkeypatch).findings
    assert g.code == "DSL201" and g.proven


def test_web_ui_demo_without_a_second_rank_is_unproven(monkeypatch):
    """A gradio demo (`demo.launch()` in the entry) over init_inference, with no launcher line or rank read: the
    page's requests reach one process, its DSL104 is unproven with the `ranks` clue at the launch; launched on
    two processes, the same demo's finding is proven."""
    report = _case(FIXTURES / "generate_web_ui_one_process", monkeypatch)
    assert report.findings == [] and report.hidden == 1
    [f] = _case(FIXTURES / "generate_web_ui_one_process", monkeypatch, show_unproven=True).findings
    assert f.code == "DSL104" and f.proven is False
    [clue] = [e for e in f.evidence if e.kind == "ranks"]
    assert not clue.found and (clue.path, clue.line) == ("web_server.py", 21) and "gradio" in clue.note
    [g] = _case(FIXTURES / "generate_web_ui_launched", monkeypatch).findings
    assert g.code == "DSL104" and g.proven and "ranks" not in {e.kind for e in g.evidence}
