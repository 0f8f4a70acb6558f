"""The project view: which config applies to a script, world size, DeepSpeed version."""

from dslint.engine import check_texts
from dslint.program.project_view import ProjectView
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

    from dslint.program.project_view import installed_version

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


# --- DeepSpeed version pins --------------------------------------------------------------------------------
def _pin(tmp_path, files, script="train.py"):
    from pathlib import Path
    from dslint.engine import make_source
    from dslint.program.project_view import ProjectView
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    path = tmp_path / script
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import deepspeed\n")
    view = ProjectView([make_source(path, str(path), "python", "import deepspeed\n")], root=tmp_path)
    pin = view.deepspeed_pin
    return (pin[0], Path(pin[1]).relative_to(tmp_path).as_posix()) if pin else None


def test_pin_in_pyproject_optional_dependencies_and_dependencies(tmp_path):
    assert _pin(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch"]\n'
                           '[project.optional-dependencies]\ntrain = ["accelerate", "deepspeed==0.14.4"]\n'}) \
        == ("0.14.4", "pyproject.toml")
    assert _pin(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch", "deepspeed~=0.15.1"]\n'}) \
        == ("0.15.1", "pyproject.toml")
    # a lower bound is not a pin; a pin elsewhere in the file (a comment, another tool's table) is not either
    assert _pin(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["deepspeed>=0.14"]\n'
                           '# deepspeed==0.9.0 was too old\n'}) is None


def test_pin_in_setup_py_install_requires(tmp_path):
    assert _pin(tmp_path, {"setup.py": 'from setuptools import setup\nsetup(name="x", install_requires=['
                           '"torch>=2.0", "deepspeed==0.12.6", "transformers"])\n'}) == ("0.12.6", "setup.py")


def test_pin_in_requirements_of_sub_folders_nearest_first(tmp_path):
    files = {"requirements/base.txt": "torch\ndeepspeed==0.10.0\n",
             "apps/chat/requirements-train.txt": "deepspeed==0.13.1  # tested\n"}
    assert _pin(tmp_path, files, script="apps/chat/train.py") == ("0.13.1", "apps/chat/requirements-train.txt")
    assert _pin(tmp_path, {}, script="tools/train.py") == ("0.10.0", "requirements/base.txt")


def test_pin_in_environment_yml_pip_and_conda_sections(tmp_path):
    env = "name: x\ndependencies:\n  - python=3.10\n  - pip\n  - pip:\n    - deepspeed==0.11.2\n"
    assert _pin(tmp_path, {"environment.yml": env}) == ("0.11.2", "environment.yml")
    (tmp_path / "environment.yml").unlink()
    assert _pin(tmp_path, {"environment.yaml": "dependencies:\n  - conda-forge::deepspeed=0.12.3\n"}) \
        == ("0.12.3", "environment.yaml")


def test_a_config_path_is_looked_for_only_where_json_is_written():
    """`may_name_json`: the launch units' config references are evaluated (parsing the file) only when ".json"
    is written in the file or in a checked file it imports or calls into, through others too."""
    files = {
        "pkg/__init__.py": "",
        "pkg/paths.py": "CONFIG = 'configs/ds_zero3.json'\n",
        "pkg/helpers.py": "from pkg.paths import CONFIG\n\ndef config_path():\n    return CONFIG\n",
        "train.py": "import deepspeed\nfrom pkg.helpers import config_path\n"
                    "engine, *_ = deepspeed.initialize(model=m, config=config_path())\n",
        "plain.py": "import deepspeed\nengine, *_ = deepspeed.initialize(model=m, config=args.cfg)\n",
    }
    view = ProjectView([PythonSource(path=name, text=text) for name, text in files.items()])
    by_path = {s.path: s for s in view.python}
    assert view.may_name_json(by_path["train.py"]) and view.may_name_json(by_path["pkg/paths.py"])
    assert not view.may_name_json(by_path["plain.py"])


def _configs_tree():
    helper = PythonSource("paths.py", 'def config_path():\n    return "configs/" + "z3.json"\n')
    return [
        PythonSource("launched.py", "import deepspeed\n"),
        PythonSource("dict_only.py", LOCAL_DICT),
        PythonSource("named.py", 'import deepspeed\nengine, *_ = deepspeed.initialize(model=None, '
                                 'config="configs/z2.json")\n'),
        PythonSource("through_import.py", "import deepspeed\nfrom paths import config_path\n"
                                          "engine, *_ = deepspeed.initialize(model=None, config=config_path())\n"),
        helper,
        JsonSource("configs/z2.json", '{"zero_optimization": {"stage": 2}}'),
        JsonSource("configs/z3.json", '{"zero_optimization": {"stage": 3}}'),
        ShellSource("run.sh", "deepspeed launched.py --deepspeed configs/z3.json\n"),
    ]


def test_json_configs_for_is_the_json_part_of_configs_for_without_reading_dict_configs():
    from dslint.program.units import Program
    from dslint.dsconfig.usage import scripts_using
    answers = {}
    for way in ("configs_for", "json_configs_for"):
        sources = _configs_tree()
        python = [s for s in sources if isinstance(s, PythonSource)]
        project = ProjectView(sources)
        project.program = Program(python, project.shell)
        if way == "configs_for":
            answers[way] = {s.path: [v.source.path for v in project.configs_for(s) if v.source is not None]
                            for s in python}
        else:
            answers[way] = {s.path: [c.path for c in project.json_configs_for(s)] for s in python}
            dict_only = next(s for s in python if s.path == "dict_only.py")
            assert "module" not in dict_only.__dict__       # its dict config was neither parsed nor evaluated
            z2, z3 = project.json_configs
            assert [s.path for s in scripts_using(project, z3)] == ["launched.py"]
            assert [s.path for s in scripts_using(project, z2)] == ["named.py"]
    assert answers["configs_for"] == answers["json_configs_for"]
    assert answers["configs_for"]["dict_only.py"] == [] and answers["configs_for"]["named.py"] == ["configs/z2.json"]
