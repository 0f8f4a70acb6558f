"""DSL4xx as a user meets them: the CLI's JSON on the issue's three-finding config, messages that name the key,
the problem and the fix, world size from the CLI and launchers, version gating, inference configs, speed."""

import json
import textwrap

from dslint.config import Settings
from dslint.dsconfig import analyse
from dslint.engine import Checker, check_texts
from tests.conftest import run_dslint

THREE = textwrap.dedent("""\
    {
      "train_batch_size": 30,
      "train_micro_batch_size_per_gpu": 4,
      "gradient_acumulation_steps": 2,
      "fp16": {"enabled": true},
      "bf16": {"enabled": true}
    }
    """)


def findings(files, **settings):
    report = check_texts(files, Settings(**{"deepspeed_version": "0.19.8", **settings}))
    mine = [e for e in report.errors if (e.code or "").startswith("DSL4") or "rules.config" in e.message]
    assert not mine, mine
    return [(f.path, f.line, f.code, f.message) for f in report.findings if f.code.startswith("DSL4")]


def test_cli_json_reports_the_three_findings_on_their_lines(tmp_path):
    (tmp_path / "ds_config.json").write_text(THREE)
    out = run_dslint("check", "--format", "json", "ds_config.json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    got = [(f["line"], f["column"], f["code"]) for f in json.loads(out.stdout)["findings"]]
    assert got == [(2, 3, "DSL406"), (4, 3, "DSL401"), (6, 3, "DSL407")]


def test_cli_text_names_key_problem_and_fix(tmp_path):
    (tmp_path / "ds_config.json").write_text(THREE)
    out = run_dslint("check", "ds_config.json", cwd=tmp_path).stdout
    assert "unknown key `gradient_acumulation_steps`" in out and "did you mean `gradient_accumulation_steps`" in out
    assert "ignores it silently" in out
    assert "no world size" in out and "fp16 and bf16 are both enabled" in out


def test_world_size_option_checks_the_product():
    cfg = '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}'
    assert findings({"ds.json": cfg}, world_size=4) == []
    [(_, line, code, message)] = findings({"ds.json": cfg}, world_size=8)
    assert code == "DSL406" and "4 × 2 × 8 = 64" in message and "world size 8" in message


def test_data_parallel_size_divides_out_autotp_and_sequence_parallel():
    cfg = ('{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,'
           ' "tensor_parallel": {"autotp_size": 4}}')
    assert findings({"ds.json": cfg}, world_size=8) == []
    assert [c for _, _, c, _ in findings({"ds.json": cfg}, world_size=16)] == ["DSL406"]


def test_derived_accumulation_that_rounds_to_zero_is_reported():
    cfg = '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4}'
    assert findings({"ds.json": cfg}, world_size=2) == []
    assert [c for _, _, c, _ in findings({"ds.json": cfg}, world_size=4)] == ["DSL406"]


def test_world_size_from_launcher_line():
    files = {"run.sh": "deepspeed --num_gpus 8 train.py --deepspeed ds.json\n",
             "train.py": "import deepspeed\n",
             "ds.json": '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4}\n'}
    assert findings(files) == []            # accumulation derived: 32 / 4 / 8 = 1
    files["run.sh"] = "deepspeed --num_gpus 16 train.py --deepspeed ds.json\n"
    assert [c for _, _, c, _ in findings(files)] == ["DSL406"]


def test_misplaced_key_names_its_section():
    [p] = analyse({"offload_optimizer": {"device": "cpu"}}).of("unknown")
    assert "belongs in `zero_optimization`" in p.message


def test_removed_keys_follow_the_deepspeed_version():
    cfg = {"ds.json": '{"train_micro_batch_size_per_gpu": 1,\n "sparse_attention": {"mode": "fixed"}}'}
    assert [c for _, _, c, _ in findings(cfg)] == ["DSL403"]
    assert findings(cfg, deepspeed_version="0.14.4") == []
    # 0.19.2 still reads `sparse_attention` (the generated table lists the removal from 0.19.8 on)
    assert findings(cfg, deepspeed_version="0.19.2") == []
    report = check_texts(cfg, Settings(deepspeed_version="0.19.8"))
    assert [f.severity.value for f in report.findings] == ["error"]


def test_inference_configs_are_left_alone():
    cfg = '{"replace_with_kernel_inject": true, "dtype": "fp16", "tensor_parallel": {"tp_size": 2}}'
    assert findings({"infer_config.json": cfg}) == []


def test_auto_is_fine_without_known_scripts_and_under_accelerate():
    cfg = '{"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": "auto"}'
    assert findings({"ds.json": cfg}) == []
    script = "from accelerate import Accelerator\nacc = Accelerator()\nimport deepspeed\n" \
             "deepspeed.initialize(model=m, config='ds.json')\n"
    assert findings({"ds.json": cfg, "train.py": script}) == []
    plain = "import deepspeed\ndeepspeed.initialize(model=m, config='ds.json')\n"
    got = findings({"ds.json": cfg, "train.py": plain})
    assert [c for _, _, c, _ in got] == ["DSL409", "DSL409"]
    assert "fails" in got[0][3] and "train.py" in got[0][3]


def test_moe_settings_only_with_moe_scripts():
    cfg = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1, "reduce_scatter": false}}'
    assert findings({"ds.json": cfg, "train.py": "import deepspeed\ndeepspeed.initialize(model=m, config='ds.json')\n"}) == []
    moe = "import deepspeed\nfrom deepspeed.moe.layer import MoE\ndeepspeed.initialize(model=m, config='ds.json')\n"
    assert [c for _, _, c, _ in findings({"ds.json": cfg, "train.py": moe})] == ["DSL410"]


def test_deprecated_boolean_zero_form():
    [p] = analyse({"zero_optimization": True}).of("deprecated")
    assert p.path == ("zero_optimization",) and '"stage"' in p.message


def test_unknown_key_without_suggestion_at_ignored_level_is_a_warning():
    report = check_texts({"ds.json": '{"train_micro_batch_size_per_gpu": 1, "my_setting": "mine"}'}, Settings())
    assert [(f.code, f.severity.value) for f in report.findings] == [("DSL401", "warning")]


def test_comment_keys_pass_where_deepspeed_reads_with_get_but_not_in_pydantic_sections():
    cfg = '{"train_micro_batch_size_per_gpu": 1, "_comment": "mine", "//": "x", "zero_optimization": {"stage": 1, "_comment": "no"}}'
    report = check_texts({"ds.json": cfg}, Settings())
    assert [(f.code, f.line, f.severity.value) for f in report.findings] == [("DSL401", 1, "error")]
    assert "zero_optimization" in report.findings[0].message


def test_framework_config_embedding_deepspeed_sections_reports_only_near_misses():
    own = {f"model-arg-{i}": i for i in range(5)}
    cfg = {**own, "train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 1}}
    import json
    report = check_texts({"neox.json": json.dumps(cfg)}, Settings())
    assert [f.message.split("`")[1] for f in report.findings] == ["zero_optimisation"]
    # the same framework keys in a plain DeepSpeed config (DeepSpeed's keys in the majority) are reported
    plain = {"model-arg": 1, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2}
    report = check_texts({"ds.json": json.dumps(plain)}, Settings())
    assert [f.message.split("`")[1] for f in report.findings] == ["model-arg"]


def test_check_does_not_import_deepspeed(tmp_path):
    (tmp_path / "ds_config.json").write_text(THREE)
    # `dslint check` ends its process itself (exit handlers, then os._exit): the modules are read by a handler
    probe = "import atexit, sys, runpy; sys.argv = ['dslint', 'check', 'ds_config.json']\n" \
            "atexit.register(lambda: print('LOADED:' + ','.join(m for m in ('deepspeed', 'torch') if m in sys.modules),\n" \
            "                              file=sys.stderr))\n" \
            "runpy.run_module('dslint', run_name='__main__')\n"
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "LOADED:\n" in out.stderr, out.stderr


def test_autotuning_search_spaces_are_not_values_and_suffixed_section_names_get_a_suggestion():
    import json
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": [0, 1, 2, 3]},
           "autotuning": {"enabled": True}, "autotuning_config": {"fast": True}}
    report = check_texts({"tune.json": json.dumps(cfg)}, Settings())
    assert [(f.code, "autotuning" in f.message) for f in report.findings] == [("DSL401", True)]
    assert "did you mean `autotuning`" in report.findings[0].message
    cfg["autotuning"]["enabled"] = False        # no autotuner: a list is not a stage
    assert "DSL405" in {f.code for f in check_texts({"tune.json": json.dumps(cfg)}, Settings()).findings}


def test_config_templates_are_not_parse_errors(tmp_path, monkeypatch):
    """A JSON that fails at a placeholder (sed/envsubst/Jinja templates), is named as a template, or is rewritten
    by `sed` in a script beside it is not a config yet: no DSL001, no other finding. A real mistake (Python's
    `True` inside braces, a doubled comma) still is one; a trailing comma is Hjson, which DeepSpeed reads."""
    from dslint.sources import JsonSource

    def problem(text, name="ds.json"):
        return JsonSource(name, text).parse_problem()

    for text in ('{"train_batch_size": CONFIG_BATCH_SIZE}', '{"path": <Specify path>}', '{"bs": ${BS}}',
                 '{"bs": $BS}', '{"bs": {{ bs }}}', '{"bs": @BS@}', '{"bs": __BS__}'):
        assert problem(text).template, text
    assert problem('{"bs": 1,}', "ds_config_TEMPLATE.json").template
    for text in ('{"bf16": {"enabled": True}}', '{"bs": 1,,}', '{"bs": None}'):
        assert not problem(text).template, text
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_text('{"bs": 8, "lr": LR}')
    assert problem('{"bs": 8, "lr": lr}') is not None and not problem('{"bs": 8, "lr": lr}').template
    (tmp_path / "make.sh").write_text("sed 's/lr/3e-4/' ds.json > ds_run.json\n")
    assert problem('{"bs": 8, "lr": lr}').template
    report = check_texts({"ds.json": '{"train_batch_size": CONFIG_BATCH_SIZE}'}, Settings())
    assert report.findings == []


def _deepspeed_tree(root, version_file: str, text: str):
    """A DeepSpeed source tree under `root`: its package with the version module, and its version file."""
    (root / "deepspeed").mkdir(parents=True)
    (root / "deepspeed" / "__init__.py").write_text("")
    (root / "deepspeed" / "git_version_info.py").write_text("version = '0.0.0'\n")
    (root / version_file).write_text(text)


def test_a_deepspeed_source_tree_is_its_own_release(tmp_path, monkeypatch):
    """Issue 30 (DynMoE's vendored DeepSpeed-0.9.5): a file inside a DeepSpeed source tree is judged at the tree's
    version file, not at the project's DeepSpeed; a tree older than the table is judged at its oldest release
    and every such finding says so, as a warning. Folder names decide nothing."""
    from dslint.program.project_view import deepspeed_tree_of
    new, old, named = tmp_path / "a", tmp_path / "b", tmp_path / "DeepSpeed-0.14.0"
    _deepspeed_tree(new, "version.txt", "0.14.0\n")
    _deepspeed_tree(old, "deepspeed/git_version_info_installed.py", "version='0.9.5+abc'\ngit_hash='abc'\n")
    (named / "deepspeed").mkdir(parents=True)
    (named / "deepspeed" / "__init__.py").write_text("")
    for root in (new, old, named):
        (root / "tests").mkdir()
    assert deepspeed_tree_of(new / "tests" / "x.json", tmp_path) == ("0.14.0", str(new.resolve()))
    assert deepspeed_tree_of(old / "tests" / "x.json", tmp_path)[0] == "0.9.5"
    assert deepspeed_tree_of(named / "tests" / "x.json", tmp_path) is None
    cfg = '{\n  "train_micro_batch_size_per_gpu": 1,\n  "sparse_gradients": true,\n  "gradient_acumulation_steps": 2\n}\n'
    for root in (new, old, named):
        (root / "tests" / "ds_config.json").write_text(cfg)
    monkeypatch.chdir(tmp_path)
    report = Checker(Settings(root=tmp_path, deepspeed_version="0.19.8")).check_paths(
        [p.relative_to(tmp_path) for p in (new, old, named)])
    got = {(f.path.split("/")[0], f.line, f.code, f.severity.value) for f in report.findings}
    assert got == {("a", 4, "DSL401", "error"), ("b", 4, "DSL401", "warning"),
                   ("DeepSpeed-0.14.0", 3, "DSL403", "error"), ("DeepSpeed-0.14.0", 4, "DSL401", "error")}, got
    old_message = next(f.message for f in report.findings if f.path.startswith("b/"))
    assert "judged at DeepSpeed 0.10.0" in old_message and "0.9.5" in old_message
