"""What kind of JSON a file is (dslint.program.json_kinds): a DeepSpeed config when something hands it to
DeepSpeed, an HF arguments file when it is handed to HfArgumentParser.parse_json_file or, unreferenced, holds
TrainingArguments fields; the fixture pairs are under tests/fixtures/static/config/ (hf_arguments_json*,
hf_arguments_batch*, accelerate_*, unreferenced_*, foreign_preset*)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from dslint.engine import check_texts
from dslint.program.json_kinds import (ARGUMENTS, DEEPSPEED, OTHER, accelerate_deepspeed_file, filled_from_arguments,
                                       foreign_settings, hf_arguments_table, positional_json, training_argument_keys)
from dslint.program.project_view import ProjectView
from dslint.sources import JsonSource, PythonSource, ShellSource
from dslint.sources.launcher import parse_launches

ROOT = Path(__file__).resolve().parent.parent

ARGV_SCRIPT = '''
import sys
from transformers import HfArgumentParser, Trainer, TrainingArguments

def main():
    parser = HfArgumentParser((TrainingArguments,))
    path = sys.argv[1]
    (training_args,) = parser.parse_json_file(json_file=path)
    Trainer(model=None, args=training_args).train()

if __name__ == "__main__":
    main()
'''

ARGS = '{"output_dir": "out", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, ' \
       '"fp16": true, "deepspeed": "ds.json"}'
DS = '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", ' \
     '"zero_optimization": {"stage": 3}}'


def _view(*sources) -> ProjectView:
    return ProjectView(list(sources))


def test_table_matches_the_installed_transformers():
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed: the shipped table is the reference")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from generate_hf_arguments import build
    finally:
        sys.path.pop(0)
    built, shipped = build(), hf_arguments_table()
    assert {k: v for k, v in built.items() if k != "transformers"} == \
        {k: v for k, v in shipped.items() if k != "transformers"}, \
        "regenerate: python tools/generate_hf_arguments.py"


def test_keys_shared_with_deepspeed_say_nothing():
    assert training_argument_keys({"gradient_accumulation_steps": 2, "fp16": True, "bf16": False}) == []
    assert training_argument_keys({"train_micro_batch_size_per_gpu": 2, "output_dir": "x"}) == ["output_dir"]


def test_arguments_json_passed_by_a_launcher_line_to_a_script_reading_argv():
    script = PythonSource("train.py", ARGV_SCRIPT)
    args = JsonSource("args.json", ARGS)
    ds = JsonSource("ds.json", DS)
    sh = ShellSource("run.sh", "deepspeed --num_gpus 4 train.py args.json\n")
    view = _view(script, args, ds, sh)
    a, d = view.json_use(args), view.json_use(ds)
    assert (a.kind, a.by_use, a.consumers) == (ARGUMENTS, True, [script])
    assert "run.sh:1" in a.evidence[0]
    assert (d.kind, d.via_hf, d.consumers) == (DEEPSPEED, True, [script])
    assert [c for c, _ in d.arguments] == [args]
    assert view.json_configs == [ds]
    # the script is handed the config through the arguments file; the launcher line's world size reaches it
    assert [c.origin for c in view.configs_for(script)] == ["ds.json"]
    assert view.world_size_for(ds) == 4


def test_arguments_json_named_in_the_code():
    script = PythonSource("train.py", "from transformers import HfArgumentParser, TrainingArguments\n"
                                      "parser = HfArgumentParser(TrainingArguments)\n"
                                      "(args,) = parser.parse_json_file('conf/args.json')\n")
    args = JsonSource("conf/args.json", '{"gradient_accumulation_steps": 1, "deepspeed": "conf/z3.json"}')
    ds = JsonSource("conf/z3.json", DS)
    view = _view(script, args, ds)
    # by use: the keys alone (a DeepSpeed key, no TrainingArguments-only one) would make it a config
    assert view.json_use(args).kind == ARGUMENTS and view.json_use(args).by_use
    assert view.json_use(ds).is_config and view.json_use(ds).consumers == [script]


def test_unreferenced_files_by_their_keys():
    hf = JsonSource("hparams.json", '{"output_dir": "o", "learning_rate": 1e-5, "fp16": true}')
    ds = JsonSource("zero.json", '{"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true}}')
    view = _view(hf, ds)
    assert view.json_use(hf).kind == ARGUMENTS and not view.json_use(hf).by_use
    assert view.json_use(ds).kind == DEEPSPEED
    assert view.json_configs == [ds]


def test_a_config_with_a_stray_training_argument_stays_a_config():
    cfg = JsonSource("zero.json", '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}, '
                                  '"seed": 42}')
    assert _view(cfg).json_use(cfg).kind == DEEPSPEED
    report = check_texts({"zero.json": cfg.text})
    assert [(f.code, f.line) for f in report.findings] == [("DSL401", 1)]


def test_a_reference_by_use_wins_over_the_keys():
    cfg = JsonSource("ds.json", '{"gradient_accumulation_steps": 1, "learning_rate": 1e-5}')
    sh = ShellSource("run.sh", "deepspeed train.py --deepspeed ds.json\n")
    assert _view(cfg, sh).json_use(cfg).kind == DEEPSPEED
    assert _view(cfg).json_use(cfg).kind == ARGUMENTS
    report = check_texts({"ds.json": cfg.text, "run.sh": sh.text})
    assert [(f.code, f.path) for f in report.findings] == [("DSL401", "ds.json")]


def test_launcher_config_file_flag_is_not_deepspeed_evidence():
    # `--config_file` is any script's option: the file's keys decide
    args = JsonSource("args.json", '{"output_dir": "o", "gradient_accumulation_steps": 4, "fp16": true}')
    sh = ShellSource("run.sh", "deepspeed train.py --config_file args.json\n")
    assert _view(args, sh).json_use(args).kind == ARGUMENTS


def test_accelerate_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.json").write_text(json.dumps({"distributed_type": "DEEPSPEED",
                                                  "deepspeed_config": {"deepspeed_config_file": "ds.json"}}))
    cfg = JsonSource("ds.json", '{"train_micro_batch_size_per_gpu": "auto", "output_dir": "x"}')
    script = PythonSource("train.py", "from accelerate import Accelerator\nAccelerator()\n")
    sh = ShellSource("run.sh", "accelerate launch --num_processes 2 --config_file acc.json train.py\n")
    view = ProjectView([cfg, script, sh], root=tmp_path)
    use = view.json_use(cfg)
    assert (use.kind, use.via_hf, use.consumers) == (DEEPSPEED, True, [script])
    assert "acc.json" in use.evidence[0]
    assert view.world_size_for(cfg) == 2


def test_accelerate_deepspeed_file_reader():
    assert accelerate_deepspeed_file("deepspeed_config:\n  deepspeed_config_file: 'cfg/ds.json'  # z3\n") == \
        "cfg/ds.json"
    assert accelerate_deepspeed_file("deepspeed_config:\n  deepspeed_config_file: null\n") is None
    assert accelerate_deepspeed_file("deepspeed_config_file: top.json\n") is None       # not under a section
    assert accelerate_deepspeed_file('{"deepspeed_config": {"deepspeed_config_file": "d.json"}}') == "d.json"


def test_positional_json_arguments():
    [launch] = parse_launches("deepspeed --num_gpus 2 train.py args.json --deepspeed ds.json --x=y.json\n")
    assert positional_json(launch) == ["args.json"]


def test_filled_from_arguments_is_what_the_hf_integration_does():
    data = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto", "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}
    filled, shown = filled_from_arguments(data, {"per_device_train_batch_size": 4, "fp16": True})
    # train_batch_size "auto" is world × micro × accumulation (consistent); an argument not given stays "auto"
    assert filled == {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto",
                      "fp16": {"enabled": True}, "bf16": {"enabled": "auto"}}
    assert shown == ["train_micro_batch_size_per_gpu ← per_device_train_batch_size 4", "fp16.enabled ← fp16 true"]
    assert filled_from_arguments({"train_micro_batch_size_per_gpu": 2}, {"per_device_train_batch_size": 4}) is None


def test_no_auto_outside_hf_where_the_arguments_file_hands_the_config():
    # a script that hands the same config to plain deepspeed.initialize: "auto" fails there, unless an HF route
    # also hands it over (DSL409's "any HF user" rule, now through the arguments file)
    plain = "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config='ds.json')\n"
    report = check_texts({"ds.json": DS, "plain.py": plain})
    assert {f.code for f in report.findings} == {"DSL409"}
    report = check_texts({"ds.json": DS, "plain.py": plain, "args.json": ARGS})
    assert [f.code for f in report.findings] == []


def test_arguments_json_through_an_argparse_option():
    script = PythonSource("train.py", '''
import argparse
from transformers import HfArgumentParser, TrainingArguments

def setup():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_args_file", type=str, default="train_args/a.json")
    args = parser.parse_args()
    train_args_file = args.train_args_file
    parser = HfArgumentParser(TrainingArguments)
    (training_args,) = parser.parse_json_file(json_file=train_args_file)
    return training_args

if __name__ == "__main__":
    setup()
''')
    a = JsonSource("train_args/a.json", '{"gradient_accumulation_steps": 1, "deepspeed": "train_args/z3.json"}')
    b = JsonSource("train_args/b.json", '{"gradient_accumulation_steps": 2, "per_device_train_batch_size": 3, '
                                        '"deepspeed": "train_args/z3.json"}')
    z3 = JsonSource("train_args/z3.json", '{"train_batch_size": 12, "train_micro_batch_size_per_gpu": "auto", '
                                          '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 3}}')
    sh = ShellSource("run.sh", "deepspeed --num_gpus 4 train.py --train_args_file train_args/b.json\n")
    view = _view(script, a, b, z3, sh)
    for args in (a, b):         # the default, and the launcher line's value
        use = view.json_use(args)
        assert (use.kind, use.by_use, use.consumers) == (ARGUMENTS, True, [script])
    assert view.json_use(z3).consumers == [script] and view.world_size_for(z3) == 4
    # b.json fills "auto" with 3 × 2 on 4 ranks = 24 != 12; a.json gives no micro batch: nothing to say
    report = check_texts({s.path: s.text for s in (script, a, b, z3, sh)})
    assert [(f.code, f.path) for f in report.findings] == [("DSL406", "train_args/z3.json")]
    assert "train_args/b.json" in report.findings[0].message and "3 × 2 × 4 = 24" in report.findings[0].message


def test_a_batch_value_the_arguments_file_contradicts():
    cfg = '{\n  "train_micro_batch_size_per_gpu": 8,\n  "gradient_accumulation_steps": 2\n}\n'
    args = {"output_dir": "o", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
            "deepspeed": "ds.json"}
    report = check_texts({"ds.json": cfg, "args.json": json.dumps(args)})
    assert [(f.code, f.line) for f in report.findings] == [("DSL406", 2)]
    assert "per_device_train_batch_size" in report.findings[0].message
    assert report.findings[0].fix.edits[0].content == '"auto"'
    # HF does not compare the micro batch under auto_find_batch_size; equal values are fine
    report = check_texts({"ds.json": cfg, "args.json": json.dumps({**args, "auto_find_batch_size": True})})
    assert report.findings == []
    report = check_texts({"ds.json": cfg, "args.json": json.dumps({**args, "per_device_train_batch_size": 8})})
    assert report.findings == []


# a training GUI's preset: two keys coincide with DeepSpeed's, the rest are the GUI's own (issue 30 cause 1)
PRESET = json.dumps({"adapter_kind": "lora", "adapter_rank": 16, "base_checkpoint": "m.safetensors",
                     "clip_skip": 2, "gradient_accumulation_steps": 1, "image_folder": "data",
                     "lr_scheduler": "cosine", "noise_offset": 0.05, "optimizer": "AdamW8bit",
                     "output_name": "lora", "sample_sampler": "euler_a", "train_batch_size": 1})


def test_another_programs_settings_are_not_a_config():
    preset = JsonSource("preset.json", PRESET)
    use = _view(preset).json_use(preset)
    assert use.kind == OTHER and not use.is_config and not use.by_use
    assert "not a DeepSpeed config" in use.evidence[0] and "`adapter_kind`" in use.evidence[0]
    assert _view(preset).json_configs == []
    assert check_texts({"preset.json": PRESET}).findings == []
    # a script beside it is not "given" it (the run's one config beside a script)
    gui = PythonSource("gui.py", "import json\nvalues = json.load(open('preset.json'))\n")
    assert _view(preset, gui).configs_for(gui) == []


def test_foreign_settings_decide_by_the_fraction_and_the_sections():
    theirs, shared = foreign_settings(json.loads(PRESET))
    assert "adapter_kind" in theirs and {"train_batch_size", "gradient_accumulation_steps", "optimizer"} <= set(shared)
    # the same keys with a DeepSpeed section (an object where DeepSpeed reads one): an embedding framework config
    assert foreign_settings({**json.loads(PRESET), "zero_optimization": {"stage": 2}}) is None
    assert foreign_settings({**json.loads(PRESET), "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}) is None
    # mostly DeepSpeed's, misspellings included: a config
    assert foreign_settings({"train_batch_size": 8, "gradient_acumulation_steps": 2, "steps_per_print": 10,
                             "wandb_project": "x"}) is None
    # half foreign is not most
    assert foreign_settings({"train_batch_size": 8, "gradient_clipping": 1.0, "run_name": "a", "data": "b"}) is None
    assert foreign_settings({"train_batch_size": 8, "run_name": "a", "data": "b", "epochs": 3}) is not None
    # annotation keys say nothing
    assert foreign_settings({"train_batch_size": 8, "_comment": "a", "_note": "b", "//": "c"}) is None


def test_a_preset_handed_to_deepspeed_is_a_config():
    sh = ShellSource("run.sh", "deepspeed train.py --deepspeed preset.json\n")
    preset = JsonSource("preset.json", PRESET)
    use = _view(preset, sh).json_use(preset)
    assert use.kind == DEEPSPEED and use.by_use
