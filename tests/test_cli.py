"""The command line as users and CI see it: exit codes, formats, errors that name file:line:col."""

import json


BROKEN_PY = "import deepspeed\ndef train(:\n    pass\n"
GOOD_PY = "import os\nprint(os.getcwd())\n"


def test_version_and_rules(dslint_cli):
    out = dslint_cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("dslint ")
    listing = dslint_cli("rules", "--format", "json")
    assert listing.returncode == 0
    codes = [r["code"] for r in json.loads(listing.stdout)]
    assert "DSL001" in codes and codes == sorted(codes)


def test_explain_known_and_unknown(dslint_cli):
    out = dslint_cli("explain", "DSL001")
    assert out.returncode == 0 and "parse-error" in out.stdout
    bad = dslint_cli("explain", "DSL999")
    assert bad.returncode == 2 and "unknown rule" in bad.stderr


def test_parse_errors_reported_and_other_files_still_checked(tmp_path, dslint_cli):
    (tmp_path / "broken.py").write_text(BROKEN_PY)
    (tmp_path / "good.py").write_text(GOOD_PY)
    # a trailing comma is fine (DeepSpeed reads configs as Hjson: tests/test_bad_inputs.py); a missing value is not
    (tmp_path / "bad.json").write_text('{\n  "train_batch_size": 8,\n  "fp16": ]\n}\n')
    (tmp_path / "latin1.py").write_bytes(b"x = 1\ny = '\xe9'\n")
    (tmp_path / "list.json").write_text("[1, 2]\n")
    out = dslint_cli("check", "--format", "json", "broken.py", "good.py", "bad.json", "latin1.py", "list.json",
                     cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["files_checked"] == 5
    where = {(f["path"], f["line"], f["column"]) for f in report["findings"] if f["code"] == "DSL001"}
    assert where == {("broken.py", 2, 11), ("bad.json", 3, 11), ("latin1.py", 2, 6), ("list.json", 1, 1)}
    text = dslint_cli("check", "broken.py", "good.py", cwd=tmp_path)
    assert "broken.py:2:11: DSL001" in text.stdout


def test_exit_codes(tmp_path, dslint_cli):
    (tmp_path / "good.py").write_text(GOOD_PY)
    assert dslint_cli("check", "good.py", cwd=tmp_path).returncode == 0
    missing = dslint_cli("check", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.py" in missing.stderr
    usage = dslint_cli("check", "--select", "XYZ1", "good.py", cwd=tmp_path)
    assert usage.returncode == 2 and "unknown rule code" in usage.stderr
    (tmp_path / "broken.py").write_text(BROKEN_PY)
    assert dslint_cli("check", "broken.py", cwd=tmp_path).returncode == 1
    assert dslint_cli("check", "--ignore", "DSL001", "broken.py", cwd=tmp_path).returncode == 0


def test_directory_walk_skips_non_deepspeed_json_and_excludes(tmp_path, dslint_cli):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "package.json").write_text("[not json")
    (tmp_path / "pkg" / "ds.json").write_text('{"train_batch_size": 8,,}')
    (tmp_path / "vendored").mkdir()
    (tmp_path / "vendored" / "x.py").write_text(BROKEN_PY)
    (tmp_path / "pyproject.toml").write_text('[tool.dslint]\nexclude = ["vendored"]\n')
    out = dslint_cli("check", "--format", "json", ".", cwd=tmp_path)
    report = json.loads(out.stdout)
    assert [f["path"] for f in report["findings"]] == ["pkg/ds.json"]


def test_github_format(tmp_path, dslint_cli):
    (tmp_path / "broken.py").write_text(BROKEN_PY)
    out = dslint_cli("check", "--format", "github", "broken.py", cwd=tmp_path)
    assert out.stdout.startswith("::error file=broken.py,line=2,col=11,")
    assert "title=DSL001 parse-error::DSL001 " in out.stdout


def test_bad_pyproject_is_a_usage_error(tmp_path, dslint_cli):
    (tmp_path / "pyproject.toml").write_text('[tool.dslint]\nfail-level = "fatal"\n')
    (tmp_path / "good.py").write_text(GOOD_PY)
    out = dslint_cli("check", "good.py", cwd=tmp_path)
    assert out.returncode == 2 and "fail-level" in out.stderr


def test_local_rank_before_subcommand_is_accepted():
    from dslint.cli import _split_local_rank
    assert _split_local_rank(["--local_rank=3", "preflight", "x.py"]) == (["preflight", "x.py"], 3)
    assert _split_local_rank(["--local_rank", "1", "preflight"]) == (["preflight"], 1)
    assert _split_local_rank(["check", "x.py"]) == (["check", "x.py"], None)


def test_an_explicit_folder_is_checked_even_when_excluded(tmp_path, dslint_cli):
    (tmp_path / "pyproject.toml").write_text('[tool.dslint]\nexclude = ["examples", "*_skip.py"]\n')
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "broken.py").write_text(BROKEN_PY)
    (tmp_path / "examples" / "b_skip.py").write_text(BROKEN_PY)
    assert json.loads(dslint_cli("check", "-f", "json", ".", cwd=tmp_path).stdout)["findings"] == []
    named = json.loads(dslint_cli("check", "-f", "json", "examples", cwd=tmp_path).stdout)
    assert [f["path"] for f in named["findings"]] == ["examples/broken.py"]


def test_every_error_line_has_one_format(tmp_path, dslint_cli):
    """Issue 32: three prefixes (`dslint: error:`, `path: error:`, click's `Error:`) became one format, as
    compilers print errors: `dslint: error: …` for the run, `path[:line:col]: error: …` for a file."""
    import re
    (tmp_path / "good.py").write_text(GOOD_PY)
    runs = {
        "unknown option (typer)": dslint_cli("check", "--bogus", "good.py", cwd=tmp_path),
        "bad choice (typer)": dslint_cli("check", "--format", "xml", "good.py", cwd=tmp_path),
        "bad number (typer)": dslint_cli("check", "--world-size", "0", "good.py", cwd=tmp_path),
        "rules format (typer)": dslint_cli("rules", "--format", "zz", cwd=tmp_path),
        "unknown rule code": dslint_cli("check", "--select", "XYZ1", "good.py", cwd=tmp_path),
        "unknown rule": dslint_cli("explain", "DSL999", cwd=tmp_path),
        "missing path": dslint_cli("check", "nope.py", cwd=tmp_path),
        "bad size": dslint_cli("check", "--max-file-size", "lots", "good.py", cwd=tmp_path),
    }
    line = re.compile(r"^(dslint|[^\s:]+(:\d+:\d+)?): error: \S")
    for what, out in runs.items():
        assert out.returncode == 2, (what, out.stderr)
        errors = [x for x in out.stderr.splitlines() if x and not x.startswith(("Usage: ", "Try '"))]
        assert errors and all(line.match(x) for x in errors), (what, out.stderr)
        assert "Error: " not in out.stderr, (what, out.stderr)
    assert runs["unknown option (typer)"].stderr.startswith("Usage: dslint check ")      # click's usage line kept
    assert "dslint: error: No such option: --bogus" in runs["unknown option (typer)"].stderr
    assert "nope.py: error: no such file or directory" in runs["missing path"].stderr
    # the pre-flight's own parser (argparse) says `dslint preflight: error: …`, its range check too
    for args in (("--timeout", "0", "x.py"), ("--bogus",)):
        pre = dslint_cli("preflight", *args, cwd=tmp_path)
        assert pre.returncode == 2 and pre.stderr.splitlines()[-1].startswith("dslint preflight: error: "), pre.stderr
    assert dslint_cli(cwd=tmp_path).returncode == 2                                      # `dslint` alone: help
    assert dslint_cli("check", "--help", cwd=tmp_path).returncode == 0
    assert dslint_cli("--version", cwd=tmp_path).returncode == 0
