"""The project view: which config applies to a script, world size, DeepSpeed version."""

from dslint.engine import check_texts
from dslint.project import ProjectView
from dslint.sources import JsonSource, PythonSource, ShellSource

LOCAL_DICT = '''
import deepspeed

def load(model):
    ds_config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}
    engine, *_ = deepspeed.initialize(model=model, config=ds_config)
    return engine
'''


def test_config_dict_bound_inside_the_calling_function():
    src = PythonSource("infer.py", LOCAL_DICT)
    [config] = ProjectView([src]).configs_for(src)
    assert config.zero_stage == 3


def test_launcher_pairs_script_config_and_world_size():
    script = PythonSource("train.py", "import deepspeed\n")
    cfg = JsonSource("configs/z2.json", '{"zero_optimization": {"stage": 2}}')
    other = JsonSource("configs/z3.json", '{"zero_optimization": {"stage": 3}}')
    sh = ShellSource("run.sh", "N=4\ndeepspeed --num_gpus $N --num_nodes 2 train.py --deepspeed configs/z2.json\n")
    project = ProjectView([script, cfg, other, sh])
    assert [c.origin for c in project.configs_for(script)] == ["configs/z2.json"]
    assert project.world_size_for(script) == 8


def test_severity_follows_the_local_zero3_config():
    text = LOCAL_DICT + '''
def main(model, prompts, rank, world):
    engine = load(model)
    for p in prompts[rank::world]:
        engine.module.generate(p, do_sample=True)
'''
    report = check_texts({"infer.py": text})
    severities = {f.code: f.severity.value for f in report.findings}
    assert severities.get("DSL104") == "error", [(f.code, f.severity, f.message) for f in report.findings]


def test_installed_version_reads_the_same_metadata_as_importlib():
    from importlib.metadata import version

    from dslint.project import installed_version

    for name in ("deepspeed", "libcst", "pydantic", "typer", "pytest"):
        assert installed_version(name) == version(name), name
    assert installed_version("no-such-distribution-dslint") is None


PER_CALL = '''
import deepspeed
from transformers import Trainer, TrainingArguments

def test_a(model, opt):
    deepspeed.initialize(model=model, optimizer=opt, config={"zero_optimization": {"stage": 0}})

def test_b(model, opt, stage):
    cfg = {"zero_optimization": {"stage": stage}}
    deepspeed.initialize(model=model, optimizer=opt, config=cfg)

def test_c(model, opt):
    deepspeed.initialize(model=model, optimizer=opt, config="z2.json")

def test_d(args, model):
    deepspeed.initialize(args=args, model=model)

def test_e(model):
    targs = TrainingArguments(output_dir="out", deepspeed={"zero_optimization": {"stage": 3}})
    Trainer(model=model, args=targs)
'''


def test_configs_reach_each_engine_call_separately():
    src = PythonSource("test_engines.py", PER_CALL)
    z2 = JsonSource("z2.json", '{"zero_optimization": {"stage": 2}}')
    sh = ShellSource("run.sh", "deepspeed --num_gpus 2 test_engines.py --deepspeed_config z2.json\n")
    project = ProjectView([src, z2, sh])
    calls = [c for c in src.facts.calls if (c.attr or "") in ("initialize", "Trainer")]
    stages = [[c.zero_stage for c in project.configs_for_call(src, call)] for call in calls]
    # stage-0 dict; a variable stage (unknown); a JSON path; no config argument: the launcher's config and no
    # dict literal of another call; the Trainer's TrainingArguments(deepspeed=...)
    assert stages == [[0], [None], [2], [2], [3]]
    assert {c.zero_stage for c in project.configs_for(src)} == {0, None, 2, 3}
