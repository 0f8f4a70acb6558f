"""Issue 30, item 6 (evidence before a finding): code no program of the run reaches (a vendored library's class
no program uses), the MoE layers of the classes a program builds, and the launch evidence of notebooks and Cog
configurations. Fixture pairs: tests/fixtures/static/units/{vendored_library_*,notebook_launch_*,cog_predictor_*,
databricks_notebook_*},
tests/fixtures/static/moe/padding_eval_class_*."""

from pathlib import Path

from dslint.config import Settings
from dslint.engine import Checker, check_texts
from dslint.sources import MarkdownSource, PythonSource, make_source
from dslint.sources.launcher import cog_launches, databricks_shell, markdown_launches, notebook_shell

STATIC = Path(__file__).parent / "fixtures" / "static"


def _case(folder: Path, monkeypatch, **settings):
    monkeypatch.chdir(folder)
    files = sorted(p.relative_to(folder) for p in folder.rglob("*")
                   if p.suffix in (".py", ".json", ".sh", ".md", ".ipynb") or p.name == "cog.yaml")
    return Checker(Settings(root=folder, deepspeed_version="0.19.8", **settings)).check_paths(files)


def test_vendored_class_no_program_uses_is_unproven(monkeypatch):
    case = STATIC / "units" / "vendored_library_unreached"
    report = _case(case, monkeypatch)
    assert report.findings == [] and report.hidden == 1
    [f] = _case(case, monkeypatch, show_unproven=True).findings
    assert f.code == "DSL101" and not f.proven and f.path == "vendored_trl/trainers.py"
    [missing] = [e for e in f.evidence if not e.found]
    assert missing.kind == "program" and "`RolloutTrainer`" in missing.note
    # the twin: the program constructs the class -- shown, proven
    [f] = _case(STATIC / "units" / "vendored_library_reached", monkeypatch).findings
    assert f.code == "DSL101" and f.proven and not [e for e in f.evidence if e.kind == "program"]


def test_what_the_repositorys_own_package_exports_is_reached(monkeypatch):
    # the repository publishes `trainerlib` (pyproject.toml beside it): a class its package exports is run by the
    # package's users though no program of the repository names it -- shown, proven
    [f] = _case(STATIC / "units" / "published_library_export", monkeypatch).findings
    assert f.code == "DSL101" and f.proven and f.path == "trainerlib/trainers/rollout.py"
    # the twin: the same package without the export -- unproven, hidden
    case = STATIC / "units" / "published_library_unexported"
    report = _case(case, monkeypatch)
    assert report.findings == [] and report.hidden == 1
    [f] = _case(case, monkeypatch, show_unproven=True).findings
    assert [e.kind for e in f.evidence if not e.found] == ["program"]


def test_a_setup_file_below_other_files_of_the_run_is_no_published_package(monkeypatch, tmp_path):
    # the same package and program in a sub-folder that carries its own pyproject.toml, beside other code of the
    # run (`tools/`): the setup file is not at or above every file of the run, so the folder is a copy kept
    # inside a larger repository, not the repository's own distribution -- its exports decide nothing
    case = STATIC / "units" / "published_library_export"
    for path in case.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(case)
            rel = Path(*rel.parts[1:]) if rel.parts[0] == "examples" else rel
            dest = tmp_path / "vendor" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(path.read_text())
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "prepare.py").write_text("import json\n\nprint(json.dumps({}))\n")
    report = _case(tmp_path, monkeypatch, show_unproven=True)
    assert [(f.code, f.proven) for f in report.findings] == [("DSL101", False)]
    # the same tree without `tools/`: the setup file is above every file, the package is published
    (tmp_path / "tools" / "prepare.py").unlink()
    (tmp_path / "tools").rmdir()
    report = _case(tmp_path, monkeypatch, show_unproven=True)
    assert [(f.code, f.proven) for f in report.findings] == [("DSL101", True)]


LIBRARY = {
    "lib/__init__.py": "from .trainers import RolloutTrainer\n",
    "lib/trainers.py": (
        "from accelerate import Accelerator, DeepSpeedPlugin\n\n\n"
        "class RolloutTrainer:\n"
        "    def __init__(self, model):\n"
        "        self.accelerator = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=2))\n"
        "        self.model = self.accelerator.prepare(model)\n\n"
        "    def save(self):\n"
        "        if self.accelerator.is_main_process:\n"
        "            self.accelerator.save_state('out')\n"),
}


def _run(files, **settings):
    return check_texts(files, Settings(deepspeed_version="0.19.8", **settings))


def test_library_without_programs_keeps_its_findings():
    # a library checked alone has no program: nothing decides that its classes are unreached
    [f] = _run(LIBRARY).findings
    assert f.code == "DSL101" and f.proven


def test_a_program_of_the_library_decides_and_its_tests_and_examples_reach():
    app = "import lib\n\nif __name__ == '__main__':\n    print(lib)\n"
    report = _run({**LIBRARY, "bin/tool.py": app}, show_unproven=True)
    assert [(f.code, f.proven) for f in report.findings] == [("DSL101", False)]
    # an example naming the class through its package (an attribute) reaches it
    example = "import lib\n\nif __name__ == '__main__':\n    lib.RolloutTrainer(None).save()\n"
    [f] = _run({**LIBRARY, "bin/tool.py": app, "examples/rollout.py": example}).findings
    assert f.proven
    # so does a test pytest collects, and a subclass's module naming it as a base
    test = "from lib import RolloutTrainer\n\n\ndef test_save():\n    RolloutTrainer(None).save()\n"
    [f] = _run({**LIBRARY, "bin/tool.py": app, "tests/test_rollout.py": test}).findings
    assert f.proven
    # an import, `__all__` and a string are no use of it
    reexport = "from lib.trainers import RolloutTrainer\n__all__ = ['RolloutTrainer']\nNAME = 'RolloutTrainer'\n"
    report = _run({**LIBRARY, "bin/tool.py": app, "lib/api.py": reexport}, show_unproven=True)
    assert [f.proven for f in report.findings] == [False]


def test_a_file_no_program_imports_keeps_its_findings():
    # the programs of the run decide only for the files they import: a module no unit reaches keeps its finding
    app = "if __name__ == '__main__':\n    print('unrelated')\n"
    [f] = _run({**LIBRARY, "bin/tool.py": app}).findings
    assert f.proven


def test_decorated_definition_counts_as_reached():
    lib = dict(LIBRARY)
    lib["lib/trainers.py"] = lib["lib/trainers.py"].replace("class RolloutTrainer:", "@register\nclass RolloutTrainer:")
    app = "import lib\n\nif __name__ == '__main__':\n    print(lib)\n"
    [f] = _run({**lib, "bin/tool.py": app}).findings
    assert f.proven


def test_moe_layer_of_an_evaluation_class_the_program_never_builds(monkeypatch):
    # the program trains the class whose ep_size is `--ep_size` (default 1, no launch sets it): clean; the
    # twin loads through the Auto factory the evaluation class is registered with (ep_size from a saved config)
    assert _case(STATIC / "moe" / "padding_eval_class_not_built", monkeypatch, show_unproven=True).findings == []
    [f] = _case(STATIC / "moe" / "padding_eval_class_built", monkeypatch).findings
    assert f.code == "DSL204" and f.proven
    assert "ep_size (unknown statically" in f.message


def test_a_launch_that_sets_ep_size_above_one_is_flagged(monkeypatch, tmp_path):
    import shutil
    case = tmp_path / "ep2"
    shutil.copytree(STATIC / "moe" / "padding_eval_class_not_built", case)
    (case / "run.sh").write_text("#!/bin/bash\ndeepspeed --num_gpus 4 mllm/train_moe_tagger.py --ep_size 2\n")
    [f] = _case(case, monkeypatch).findings
    assert f.code == "DSL204" and f.proven and "ep_size=2" in f.message


NOTEBOOK = """{
 "cells": [
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": [
    "!deepspeed not_a_command.py\\n"
   ]
  },
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [],
   "source": [
    "x = 1\\n",
    "if x:\\n",
    "    !accelerate launch --num_processes=1 train.py \\\\\\n",
    "        --seed=1\\n",
    "print(x)"
   ]
  },
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [],
   "source": [
    "%%bash\\n",
    "torchrun --nproc_per_node 2 eval.py\\n"
   ]
  }
 ],
 "nbformat": 4,
 "nbformat_minor": 5
}
"""


def test_notebook_shell_commands_at_their_lines():
    shell = notebook_shell(NOTEBOOK).split("\n")
    assert shell[16].strip().startswith("accelerate launch") and shell[17].strip() == "--seed=1"
    assert not shell[6].strip() and not shell[18].strip()      # a markdown cell's text, and Python code
    launches = markdown_launches(NOTEBOOK, notebook=True)
    assert [(L.launcher, L.line, L.script, L.world_size) for L in launches] == [
        ("accelerate", 17, "train.py", 1), ("torchrun", 28, "eval.py", 2)]
    assert notebook_shell("not json") is None


def test_notebook_launch_decides_the_process_count(monkeypatch):
    assert _case(STATIC / "units" / "notebook_launch_one_process", monkeypatch, show_unproven=True).findings == []
    [f] = _case(STATIC / "units" / "notebook_launch_two_processes", monkeypatch).findings
    assert f.code == "DSL101" and f.proven


DATABRICKS = """\
# Databricks notebook source
# MAGIC %md
# MAGIC ## Train with deepspeed --num_gpus 8 (prose)

# COMMAND ----------

flag = "--num_gpus 2"

# COMMAND ----------

!deepspeed {flag} \\
    --module training.trainer \\
    --epochs 2

# COMMAND ----------

# MAGIC %sh
# MAGIC torchrun --nproc_per_node 4 eval.py
"""


def test_databricks_notebook_export_is_read_as_a_notebook(monkeypatch):
    shell = databricks_shell(DATABRICKS).split("\n")
    assert shell[10].startswith("deepspeed $_ ") and shell[11].strip().startswith("--module")
    assert not shell[2].strip() and not shell[6].strip()     # a markdown cell's prose, and Python code
    assert shell[17].startswith("torchrun")
    source = make_source(Path("train.py"), "train.py", "python", DATABRICKS)
    assert isinstance(source, MarkdownSource) and source.parse_problem() is None
    assert [(L.launcher, L.line, L.module, L.script) for L in source.launches] == [
        ("deepspeed", 11, "training.trainer", None), ("torchrun", 18, None, "eval.py")]
    # an export without shell escapes is valid Python: a Python file still
    plain = DATABRICKS.replace("!deepspeed", "# deepspeed")
    assert isinstance(make_source(Path("train.py"), "train.py", "python", plain), PythonSource)
    assert _case(STATIC / "units" / "databricks_notebook_one_process", monkeypatch, show_unproven=True).findings == []
    [f] = _case(STATIC / "units" / "databricks_notebook_two_processes", monkeypatch).findings
    assert (f.code, f.path, f.proven) == ("DSL101", "training/trainer.py", True)


def test_cog_configuration_runs_its_predictor_in_one_process(monkeypatch):
    text = 'build:\n  gpu: true\n# the predictor\npredict: "predict.py:Predictor"\n'
    [launch] = cog_launches(text)
    assert (launch.launcher, launch.line, launch.script, launch.world_size) == ("cog", 4, "predict.py", 1)
    assert _case(STATIC / "units" / "cog_predictor_one_process", monkeypatch, show_unproven=True).findings == []
    [f] = _case(STATIC / "units" / "cog_predictor_launched", monkeypatch).findings
    assert f.code == "DSL104"


README_PLACEHOLDERS = """\
# Training

```bash
GPUS=8 sh train_in1k.sh <partition> <job-name> configs/t_1k_224.yaml --batch-size 8
```

With DeepSpeed:

```bash
GPUS=8 GPUS_PER_NODE=8 sh train_in1k_deepspeed.sh <partition> <job-name> configs/t_1k_224.yaml --batch-size 128
```

With accelerate:

```bash
cd classification
accelerate launch --config_file configs/zero1.yaml main_accelerate.py --batch-size 16
```

Export:

```bash
cd mmdeploy && git checkout v0.13.0
export MMDEPLOY_DIR=$(pwd)
make -j$(nproc) && make install
```
"""


def test_markdown_block_read_on_its_own_when_other_snippets_swallow_it():
    # `<partition> <job-name>` are redirections to bash: read as one script with the other blocks (InternImage's
    # README), the snippets swallow the accelerate line; each fenced block is a snippet of its own, so a block whose
    # launcher line gave nothing is read again alone
    launches = markdown_launches(README_PLACEHOLDERS)
    assert [(L.launcher, L.line) for L in launches] == [("accelerate", 17)]
    [acc] = launches
    assert acc.script == "main_accelerate.py" and acc.options == {"--config_file": "configs/zero1.yaml"}
    assert acc.cwd is not None and "classification" in str(acc.cwd)      # the block's own `cd` is kept
