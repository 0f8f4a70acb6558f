"""DeepSpeed configs built in Python (dslint/program/pyconfig.py): the partial dict the evaluator builds, the DSL4xx
findings on it at the Python line of the key, and nothing reported that depends on an unknown value."""

import textwrap

from dslint.config import Settings
from dslint.engine import check_texts, make_source
from dslint.sources.literals import UNKNOWN
from dslint.program.project_view import ProjectView
from dslint.program.pyconfig import PartialDict, python_configs, reading_known


def codes(files, **settings):
    files = {k: textwrap.dedent(v) for k, v in files.items()}
    report = check_texts(files, Settings(**{"deepspeed_version": "0.19.8", **settings}))
    assert not report.errors, report.errors
    return sorted((f.path, f.line, f.code) for f in report.findings if f.code.startswith("DSL4"))


def configs(files):
    from pathlib import Path
    srcs = [make_source(Path(k), k, "python", textwrap.dedent(v)) for k, v in files.items()]
    return python_configs(ProjectView(srcs))


def test_literal_mutated_by_subscript_update_and_setdefault():
    [cfg] = configs({"t.py": """\
        import deepspeed
        cfg = {"train_micro_batch_size_per_gpu": 1}
        cfg["zero_optimization"] = {"stage": 2}
        cfg["zero_optimization"]["stage"] = 3
        cfg.update({"fp16": {"enabled": True}}, steps_per_print=5)
        cfg.setdefault("fp16", {"enabled": False})
        cfg.setdefault("bf16", {"enabled": False})
        deepspeed.initialize(model=m, config=cfg)
        """})
    assert cfg.data.plain() == {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
                                "fp16": {"enabled": True}, "steps_per_print": 5, "bf16": {"enabled": False}}
    src, node = cfg.location(("zero_optimization", "stage"))
    assert src.span(node).line == 4


def test_branches_parameters_and_escapes_are_uncertain():
    [cfg] = configs({"t.py": """\
        import deepspeed
        def run(args, stage):
            cfg = {"zero_optimization": {"stage": stage}, "fp16": {"enabled": True}}
            if args.bf16:
                cfg["bf16"] = {"enabled": True}
                cfg["fp16"]["enabled"] = False
            deepspeed.initialize(model=m, config=cfg)
        """})
    data = cfg.data
    assert data["zero_optimization"].get("stage") is UNKNOWN
    assert "bf16" in data.maybe
    _, known = reading_known(lambda d: d.get("bf16"), data)
    assert not known
    [cfg] = configs({"t.py": """\
        import deepspeed
        cfg = {"fp16": {"enabled": True}}
        patch(cfg)
        deepspeed.initialize(model=m, config=cfg)
        """})
    assert cfg.data.escaped


def test_only_the_branch_leading_to_the_call_counts():
    [a, b] = configs({"t.py": """\
        import deepspeed
        def run(args):
            cfg = {"train_micro_batch_size_per_gpu": 1}
            if args.bf16:
                cfg["bf16"] = {"enabled": True}
                deepspeed.initialize(model=m, config=cfg)
            else:
                cfg["fp16"] = {"enabled": True}
                deepspeed.initialize(model=m, config=cfg)
        """})
    assert set(a.data) == {"train_micro_batch_size_per_gpu", "bf16"} and not a.data.maybe
    assert set(b.data) == {"train_micro_batch_size_per_gpu", "fp16"} and not b.data.maybe


def test_helper_return_across_files_and_self_method():
    files = {
        "utils.py": """\
            def get_eval_ds_config(offload, stage=0):
                zero = {"stage": stage, "offload_param": {"device": "cpu" if offload else "none"}}
                return {"steps_per_print": 100, "zero_optimization": zero, "bf16": {"enabled": True}}
            """,
        "strategy.py": """\
            import deepspeed
            from utils import get_eval_ds_config
            class Strategy:
                def get_ds_eval_config(self, offload=False):
                    ds_config = get_eval_ds_config(offload=offload, stage=3)
                    ds_config["train_micro_batch_size_per_gpu"] = self.micro
                    return ds_config
                def init(self, model):
                    ds_config = self.get_ds_eval_config(offload=True)
                    return deepspeed.initialize(model=model, config=ds_config)
            """}
    [cfg] = configs(files)
    data = cfg.data
    assert set(data) == {"steps_per_print", "zero_optimization", "bf16", "train_micro_batch_size_per_gpu"}
    assert data.keys_at["steps_per_print"][0].path == "utils.py"
    assert data.keys_at["train_micro_batch_size_per_gpu"][0].path == "strategy.py"
    assert data["zero_optimization"]["stage"] is UNKNOWN          # parameters are unknown values


def test_findings_sit_on_the_python_key():
    assert codes({"train.py": """\
        import deepspeed
        cfg = dict(train_micro_batch_size_per_gpu=2,
                   gradient_acumulation_steps=4,
                   zero_optimization={"stage": 4})
        deepspeed.initialize(model=m, config=cfg)
        """}) == [("train.py", 3, "DSL401"), ("train.py", 4, "DSL405")]


def test_unknown_values_are_never_reported():
    assert codes({"train.py": """\
        import deepspeed
        def main(args):
            cfg = {"train_batch_size": args.tb, "train_micro_batch_size_per_gpu": 3,
                   "zero_optimization": {"stage": args.stage, "offload_param": {"device": "cpu"},
                                         "offload_optimizer": {"device": "nvme", "nvme_path": args.nvme}},
                   "fp16": {"enabled": args.fp16}, "bf16": {"enabled": True}}
            deepspeed.initialize(model=m, config=cfg)
        """}) == []
    # an unknown base: the keys written on it are still checked, nothing that depends on the rest
    assert codes({"train.py": """\
        import copy, deepspeed
        def main(plugin):
            cfg = copy.deepcopy(plugin.deepspeed_config)
            cfg.update({"zero_optimization.reduce_bucket_size": 10, "bf16": {"enabled": True}})
            deepspeed.initialize(model=m, config=cfg)
        """}) == [("train.py", 4, "DSL401")]


def test_auto_outside_hf_and_hf_calls():
    script = """\
        import deepspeed
        cfg = {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}
        deepspeed.initialize(model=m, config=cfg)
        """
    assert codes({"train.py": script}) == [("train.py", 2, "DSL409")]
    assert codes({"train.py": """\
        from transformers import TrainingArguments
        cfg = {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}
        args = TrainingArguments("out", deepspeed=cfg)
        """}) == []


def test_zero_stage_of_a_built_config_reaches_config_views():
    from pathlib import Path
    text = textwrap.dedent("""\
        import deepspeed
        def main(args):
            cfg = {"train_micro_batch_size_per_gpu": 1}
            cfg["zero_optimization"] = {"stage": 3}
            engine, *_ = deepspeed.initialize(model=m, config=cfg)
        """)
    src = make_source(Path("t.py"), "t.py", "python", text)
    project = ProjectView([src])
    call = next(c for c in src.facts.calls if c.callee == "deepspeed.initialize")
    [view] = project.configs_for_call(src, call)
    assert view.zero_stage == 3
    open_dict = PartialDict()
    open_dict.open = True
    from dslint.program.project_view import ConfigView
    assert ConfigView(open_dict, "x").zero_stage is None
