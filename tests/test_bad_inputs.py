"""Hostile and unusual inputs (issue 20, inputs and contract): one test per row of the issue's table that is
about what dslint reads and how it exits. Every run is the real CLI in a fresh process; each asserts the exit
code of the contract (README: 0 clean, 1 findings, 2 usage/input, 3 internal), a one-line message, and that
no Python traceback reaches the user."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_dslint

HAZARD = ("import torch.distributed as dist\n\n\ndef sync():\n    if dist.get_rank() == 0:\n"
          "        dist.barrier()\n")
MIXED_PRECISION = '{\n  "train_micro_batch_size_per_gpu": 4,\n  "fp16": {"enabled": true},\n  "bf16": {"enabled": true}\n}\n'


def _clean_stderr(result) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    for line in result.stderr.splitlines():
        assert line.strip(), result.stderr


def _with_hazard(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(HAZARD)
    return folder


def _reports_hazard(result) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:6:9: DSL101" in result.stdout, result.stdout


# --- special files ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["fifo.py", "pipe", "ds_config.json"])
def test_fifo_in_a_folder_is_skipped_not_read(tmp_path, name):
    folder = _with_hazard(tmp_path / "proj")
    os.mkfifo(folder / name)
    start = time.monotonic()
    result = run_dslint("check", str(folder), timeout=60)
    assert time.monotonic() - start < 30
    _clean_stderr(result)
    _reports_hazard(result)
    if name != "pipe":       # a name dslint never reads is not even looked at
        assert f"{name}: skipped: a FIFO (named pipe), not a regular file" in result.stderr
    else:
        assert "pipe" not in result.stderr


def test_fifo_named_explicitly_is_skipped(tmp_path):
    os.mkfifo(tmp_path / "train.py")
    result = run_dslint("check", str(tmp_path / "train.py"), timeout=60)
    _clean_stderr(result)
    assert result.returncode == 2
    assert "train.py: skipped: a FIFO (named pipe), not a regular file" in result.stderr
    assert "no input could be checked" in result.stderr


def test_socket_in_a_folder_is_skipped(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "helper.py"))
        result = run_dslint("check", str(folder))
    finally:
        sock.close()
    _clean_stderr(result)
    _reports_hazard(result)
    assert "helper.py: skipped: a socket, not a regular file" in result.stderr


def test_symlink_to_dev_zero_is_skipped(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    os.symlink("/dev/zero", folder / "zero.py")
    os.symlink("/dev/zero", folder / "zero.json")
    result = run_dslint("check", str(folder), timeout=60)
    _clean_stderr(result)
    _reports_hazard(result)
    assert "zero.py: skipped: symbolic link to a character device, not a regular file" in result.stderr
    assert "zero.json: skipped: symbolic link to a character device" in result.stderr


def test_dev_zero_named_explicitly_is_skipped():
    result = run_dslint("check", "/dev/zero", timeout=60)
    _clean_stderr(result)
    assert result.returncode == 2
    assert "/dev/zero: skipped: a character device, not a regular file" in result.stderr


# --- size and binary content ----------------------------------------------------------------------------

def test_a_1gib_checkpoint_is_never_read_in_full(tmp_path):
    """A sparse 1 GiB file under every name a checkpoint may have: walked, only its name is looked at (or its
    size, for .json); named explicitly, its first bytes. Counted at the os.read calls of the real reader."""
    from dslint.config import Settings
    from dslint.sources.inputs import collect, read_sources
    folder = _with_hazard(tmp_path / "proj")
    for name in ("model.pt", "weights.json", "state.py"):
        with open(folder / name, "wb") as f:
            f.truncate(1 << 30)
    read = []
    real_read = os.read

    def counting_read(fd, n):
        data = real_read(fd, n)
        read.append(len(data))
        return data
    os.read = counting_read
    try:
        inputs = collect([folder, folder / "model.pt"], Settings())
        sources, _ = read_sources(inputs)
    finally:
        os.read = real_read
    assert sum(read) < 100_000, sum(read)
    assert [s.path.rsplit("/", 1)[-1] for s in sources] == ["train.py"]
    messages = {Path(e.path).name: e.message for e in inputs.errors}
    assert messages["weights.json"].startswith("skipped: 1024.0 MiB is over the 1.0 MiB limit for JSON configs")
    assert messages["state.py"].startswith("skipped: 1024.0 MiB is over the 2.0 MiB limit for Python sources")
    assert messages["model.pt"].startswith("skipped: binary content")

    start = time.monotonic()
    result = run_dslint("check", str(folder), str(folder / "model.pt"), timeout=60)
    assert time.monotonic() - start < 30
    _clean_stderr(result)
    _reports_hazard(result)


def test_one_size_limit_a_large_file_is_skipped_or_analysed_never_an_error(tmp_path):
    """Issue 32: `--max-file-size 20M` turned a skipped 13 MB file into a DSL001 *error* (the analysis had a fixed
    2 MB cap of its own, its message in MB beside the skip message's MiB). One limit now: over it, the file is
    skipped with a line in MiB (exit 0); within it -- the option raised -- the file is analysed."""
    folder = _with_hazard(tmp_path / "proj")
    line = "# " + "generated table row " * 50 + "\n"                    # ~1 kB of comment per line
    (folder / "table.py").write_text("ROWS = 1\n" + line * (int(2.5 * (1 << 20)) // len(line)))
    default = run_dslint("check", "--format", "json", str(folder / "table.py"), timeout=300)
    assert default.returncode == 2, default.stderr                      # the only path named: nothing checked
    assert "table.py: skipped: 2.5 MiB is over the 2.0 MiB limit for Python sources (--max-file-size)" \
        in default.stderr, default.stderr
    walked = run_dslint("check", "--format", "json", str(folder), timeout=300)
    report = json.loads(walked.stdout)
    assert not [f for f in report["findings"] if f["path"].endswith("table.py")]
    assert [e["message"] for e in report["errors"] if e["path"].endswith("table.py")] == [
        "skipped: 2.5 MiB is over the 2.0 MiB limit for Python sources (--max-file-size)"]
    raised = run_dslint("check", "--format", "json", "--max-file-size", "3M", str(folder), timeout=300)
    report = json.loads(raised.stdout)
    assert not [f for f in report["findings"] if f["path"].endswith("table.py")], report["findings"]
    assert not [e for e in report["errors"] if e["path"].endswith("table.py")]
    assert "MB " not in raised.stderr and "MB " not in walked.stderr
    assert raised.returncode == 1 and [f["code"] for f in report["findings"]] == ["DSL101"]
    # a text over the limit that reaches the analysis without a file (the library's check_texts) is DSL001,
    # in the same unit
    from dslint.engine import check_texts
    from dslint.config import Settings
    big = check_texts({"gen.py": "x = 1\n" + "#" * 3000 + "\n"}, Settings(max_file_size=2048))
    assert [f.code for f in big.findings] == ["DSL001"], big.findings
    assert big.findings[0].message == ("could not be analysed: 2.9 KiB of Python source, over the 2.0 KiB limit for "
                                       "Python sources (--max-file-size)")


def test_max_file_size_option_and_setting(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    (folder / "big.py").write_text("x = 1\n" * 400)          # 2,400 bytes
    result = run_dslint("check", "--max-file-size", "1k", str(folder))
    _clean_stderr(result)
    _reports_hazard(result)
    assert "big.py: skipped: 2.3 KiB is over the 1.0 KiB limit for Python sources (--max-file-size)" in result.stderr
    assert run_dslint("check", "--max-file-size", "10M", str(folder)).stderr == ""

    bad = run_dslint("check", "--max-file-size", "lots", str(folder))
    _clean_stderr(bad)
    assert bad.returncode == 2 and "--max-file-size: expected a size" in bad.stderr

    (folder / "pyproject.toml").write_text('[tool.dslint]\nmax-file-size = "2k"\n')
    configured = run_dslint("check", str(folder))
    assert "big.py: skipped: 2.3 KiB is over the 2.0 KiB limit" in configured.stderr
    (folder / "pyproject.toml").write_text('[tool.dslint]\nmax-file-size = "huge"\n')
    wrong = run_dslint("check", str(folder))
    _clean_stderr(wrong)
    assert wrong.returncode == 2 and "max-file-size" in wrong.stderr


def test_binary_python_file_is_skipped(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    (folder / "blob.py").write_bytes(b"import os\n\x00\x01\x02" * 10)
    result = run_dslint("check", str(folder))
    _clean_stderr(result)
    _reports_hazard(result)
    assert "blob.py: skipped: binary content (a NUL byte in its first 130 bytes)" in result.stderr


# --- links, folders, names ------------------------------------------------------------------------------

def test_symlink_loop_named_explicitly_is_an_input_error(tmp_path):
    os.symlink(tmp_path / "b.py", tmp_path / "a.py")
    os.symlink(tmp_path / "a.py", tmp_path / "b.py")
    (tmp_path / "train.py").write_text(HAZARD)
    result = run_dslint("check", str(tmp_path / "a.py"), str(tmp_path / "train.py"))
    _clean_stderr(result)
    assert result.returncode == 2, result.stderr
    assert "a.py: error: symbolic link loop" in result.stderr
    assert "train.py:6:9: DSL101" in result.stdout      # the rest is still checked and reported


def test_symlink_loop_and_dangling_link_in_a_folder_are_skipped(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    os.symlink(folder / "b.py", folder / "a.py")
    os.symlink(folder / "a.py", folder / "b.py")
    os.symlink(folder / "missing.py", folder / "gone.py")
    os.symlink(folder, folder / "again")          # a link to a folder is not followed (no endless walk)
    result = run_dslint("check", str(folder))
    _clean_stderr(result)
    _reports_hazard(result)
    assert "a.py: skipped: symbolic link loop" in result.stderr
    assert "gone.py: skipped: broken symbolic link" in result.stderr
    assert result.stdout.count("DSL101") == 1


def test_symlink_out_of_the_tree_is_skipped_one_inside_is_checked_once(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.py").write_text(HAZARD)
    folder = _with_hazard(tmp_path / "proj")
    os.symlink(outside / "secret.py", folder / "linked.py")
    os.symlink(folder / "train.py", folder / "z_alias.py")
    result = run_dslint("check", str(folder))
    _clean_stderr(result)
    _reports_hazard(result)
    assert "linked.py: skipped: symbolic link leads outside" in result.stderr
    assert result.stdout.count("DSL101") == 1      # train.py and alias.py are one file, checked once
    # named explicitly, a link is followed wherever it leads
    explicit = run_dslint("check", str(folder / "linked.py"))
    assert explicit.returncode == 1 and "DSL101" in explicit.stdout


def test_a_symlink_checked_out_as_text_is_skipped_a_path_to_nothing_is_dsl001(tmp_path):
    # git writes a link as a text file holding its target where links cannot be made (core.symlinks=false)
    folder = _with_hazard(tmp_path / "proj")
    (folder / "sub").mkdir()
    (folder / "sub" / "alias.py").write_text("../train.py")
    (folder / "sub" / "dangling.py").write_text("../gone/nothing.py")     # names no file: a real syntax error
    result = run_dslint("check", str(folder))
    _clean_stderr(result)
    assert result.stdout.count("train.py:6:9: DSL101") == 1, result.stdout
    assert "alias.py: skipped: holds only the path `../train.py` (a symbolic link checked out as a text file)" \
        in result.stderr
    assert "alias.py" not in result.stdout
    assert "dangling.py:1:1: DSL001" in result.stdout, result.stdout


TEMPLATE = ("import torch\n\n{% if cookiecutter.with_trainer == \"True\" %}\nfrom transformers import Trainer\n"
            "{% endif %}\n\n\nclass {{cookiecutter.camelcase_modelname}}Model(torch.nn.Module):\n    pass\n")


def test_a_template_is_skipped_a_real_syntax_error_stays_dsl001(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    tpl = folder / "templates" / "cookiecutter-{{cookiecutter.modelname}}"
    tpl.mkdir(parents=True)
    (tpl / "model.py").write_text("x = 1\n")                  # named by the template: never run as it is
    (folder / "templates" / "gen.py").write_text(TEMPLATE)      # the syntax error sits on a template tag
    (folder / "templates" / "config_tpl.py").write_text(
        "{{cookiecutter.uppercase_modelname}}_ARCHIVE_MAP = {\n    'a': 1,\n}\n")
    # a `{{` escape in an f-string, and a syntax error elsewhere: the user's, DSL001
    (folder / "broken.py").write_text('name = "x"\nprint(f"{{{name}}}")\ndef train(:\n    pass\n')
    # a template tag in a string, the error on a line of its own: DSL001
    (folder / "broken2.py").write_text('TAG = "{% if x %}"\nif True\n    pass\n')
    result = run_dslint("check", str(folder))
    _clean_stderr(result)
    assert "train.py:6:9: DSL101" in result.stdout
    assert "model.py: skipped: a template, not Python (its path holds the placeholder " \
           "`{{cookiecutter.modelname}}`)" in result.stderr
    assert "gen.py: skipped: a template, not Python (line 3 holds the template tag `{% if" in result.stderr
    assert "config_tpl.py: skipped: a template, not Python (line 1 holds" in result.stderr
    assert "broken.py:3:11: DSL001" in result.stdout, result.stdout
    assert "broken2.py:2:" in result.stdout and "DSL001" in result.stdout
    assert "gen.py" not in result.stdout and "model.py" not in result.stdout


def test_unreadable_folder_is_skipped_and_the_run_goes_on(tmp_path):
    """As a user without the permission (root reads every folder: the run is made as `nobody` then)."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"dslint-perm-{os.getpid()}"
    base.mkdir(mode=0o755)
    try:
        folder = _with_hazard(base / "proj")
        locked = folder / "private"
        locked.mkdir()
        (locked / "x.py").write_text(HAZARD)
        locked.chmod(0)
        for p in (base, folder):
            p.chmod(0o755)
        (folder / "train.py").chmod(0o644)
        prefix: list[str] = []
        env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO), "HOME": str(base)}
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            assert setpriv, "running as root needs setpriv to drop the permission"
            prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            # the checkout may sit where `nobody` cannot read (a fresh clone in root's 0700 home): this copy of
            # dslint can be read by anyone; the interpreter and its packages are tried as they are
            code = base / "code"
            shutil.copytree(REPO / "dslint", code / "dslint", ignore=shutil.ignore_patterns("__pycache__"))
            for p in (code, *code.rglob("*")):
                p.chmod(0o755 if p.is_dir() else 0o644)
            env["PYTHONPATH"] = str(code)
            probe = subprocess.run([*prefix, sys.executable, "-c", "import dslint.cli, libcst"], capture_output=True,
                                   text=True, timeout=60, env=env, cwd=str(base))
            if probe.returncode != 0:
                reason = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
                pytest.skip(f"as root, the test drops to uid 65534 (nobody), who cannot run this interpreter "
                            f"({sys.executable}) with its packages -- e.g. a virtualenv in a 0700 folder: {reason}")
        result = subprocess.run([*prefix, sys.executable, "-m", "dslint", "check", "--no-cache", str(folder)],
                                capture_output=True, text=True, timeout=60, env=env, cwd=str(base))
        _clean_stderr(result)
        _reports_hazard(result)
        assert "private: skipped: folder cannot be read: Permission denied" in result.stderr
    finally:
        (base / "proj" / "private").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_non_utf8_file_name_is_skipped_with_a_printable_name(tmp_path):
    folder = _with_hazard(tmp_path / "proj")
    fd = os.open(os.fsencode(folder) + b"/caf\xe9.py", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, HAZARD.encode())
    os.close(fd)
    for fmt in ("text", "json", "sarif", "github"):
        result = run_dslint("check", "--format", fmt, str(folder))
        _clean_stderr(result)
        assert result.returncode == 1, result.stderr
        assert "caf\\xe9.py: skipped: file name is not valid UTF-8" in result.stderr
        if fmt == "json":
            assert json.loads(result.stdout)["errors"][0]["path"].endswith("caf\\xe9.py")
    out = tmp_path / "report.json"
    result = run_dslint("check", "--format", "json", "-o", str(out), str(folder))
    assert result.returncode == 1 and json.loads(out.read_text())["files_checked"] == 1
    # named on the command line: the same one line, and the other paths are checked
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO), "DSLINT_CACHE_DIR": str(tmp_path / "c")}
    named = subprocess.run([sys.executable, "-m", "dslint", "check", os.fsencode(folder) + b"/caf\xe9.py",
                            str(folder / "train.py")], capture_output=True, timeout=60, env=env)
    assert named.returncode == 1, named.stderr
    assert b"caf\\xe9.py: skipped: file name is not valid UTF-8" in named.stderr
    assert b"Traceback" not in named.stderr and b"train.py:6:9: DSL101" in named.stdout


# --- encodings ------------------------------------------------------------------------------------------

def test_pep263_latin1_source_is_analysed(tmp_path):
    source = ("# -*- coding: latin-1 -*-\nimport torch.distributed as dist\nGREETING = 'caf\xe9'\n\n\n"
              "def sync():\n    if dist.get_rank() == 0:\n        dist.barrier()\n")
    (tmp_path / "train.py").write_bytes(source.encode("latin-1"))
    result = run_dslint("check", str(tmp_path / "train.py"))
    _clean_stderr(result)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:8:9: DSL101" in result.stdout
    assert "DSL001" not in result.stdout


def test_source_contradicting_its_coding_line_is_dsl001(tmp_path):
    (tmp_path / "a.py").write_bytes(b"# coding: ascii\nx = '\xc3\xa9'\n")
    (tmp_path / "b.py").write_bytes(b"# coding: klingon\nx = 1\n")
    result = run_dslint("check", str(tmp_path / "a.py"), str(tmp_path / "b.py"))
    _clean_stderr(result)
    assert result.returncode == 1
    assert "a.py:2:6: DSL001" in result.stdout and "not valid ascii (its coding declaration)" in result.stdout
    assert "b.py:1:1: DSL001" in result.stdout and "unknown encoding" in result.stdout


# --- configs: Hjson, and JSON no config can be ------------------------------------------------------------

HJSON_CONFIG = """// DeepSpeed reads this with hjson
{
  # batch
  train_micro_batch_size_per_gpu: 4,
  "fp16": {"enabled": true,},
  /* both on: DSL407 */
  "bf16": {
    enabled: true
  },
}
"""


def test_hjson_config_with_comments_and_trailing_commas_is_checked(tmp_path):
    (tmp_path / "ds_config.json").write_text(HJSON_CONFIG)
    result = run_dslint("check", str(tmp_path / "ds_config.json"))
    _clean_stderr(result)
    assert result.returncode == 1
    assert "DSL001" not in result.stdout
    assert "ds_config.json:5:3: DSL407" in result.stdout or "ds_config.json:7:3: DSL407" in result.stdout, result.stdout


def test_hjson_config_walked_in_a_folder_is_checked(tmp_path):
    (tmp_path / "ds_config.json").write_text(HJSON_CONFIG)
    result = run_dslint("check", str(tmp_path))
    assert result.returncode == 1 and "DSL407" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": [1, 2,],}',
    '// c\n{\n  # comment\n  train_batch_size: 8\n  "fp16": {enabled: true, loss_scale: 0}\n'
    '  /* x */ zero_optimization: {stage: 3,},\n  name: hello world\n  lr: 1e-5\n  x: 2.0\n  s: \'it\'\n'
    "  m:\n    '''\n    multi\n    line\n    '''\n}",
    "a: 1\nb: [1, 2]\n",
    "{a: 1, b: 2}",
    "[1, 2\n3]",
    "{\"u\": \"\\u00e9\\ud83d\\ude00\", 'k': 'x\\ty'}",
    "{a: -3, b: null, c: true, d: 3 apples\n}",
    "{a: -3, b: null, c: true, d: 3 apples}",          # both reject it: the quoteless string eats the brace
    "{a: 1 b: 2}",
    "{'a': [1, 2,,]}",
])
def test_hjson_reader_agrees_with_hjson(text):
    import hjson     # DeepSpeed's dependency (constraints/test.txt pins it)
    from dslint.sources.jsonpos import JsonPositionError, load_positioned
    try:
        expected = hjson.loads(text)
    except ValueError:
        with pytest.raises(JsonPositionError):
            load_positioned(text)
    else:
        assert load_positioned(text).value == expected


def test_hjson_spans_point_at_keys():
    from dslint.sources.jsonpos import load_positioned
    parsed = load_positioned(HJSON_CONFIG)
    assert parsed.span(("bf16", "enabled")).line == 8
    assert parsed.span(("train_micro_batch_size_per_gpu",)).line == 4


def test_a_template_that_is_valid_hjson_stays_a_template(tmp_path):
    (tmp_path / "ds_config.json").write_text('{\n  "train_batch_size": CONFIG_BATCH_SIZE,\n  "fp16": {"enabled": true}\n}\n')
    (tmp_path / "train.py").write_text(HAZARD)
    result = run_dslint("check", str(tmp_path))
    assert "ds_config.json" not in result.stdout + result.stderr


@pytest.mark.parametrize("name, text, where, message", [
    ("deep.json", '{"train_batch_size": 1, "a": ' + '[' * 600 + ']' * 600 + '}', "1:129:",
     "nested deeper than 100 levels"),
    ("bigint.json", '{"train_batch_size": ' + "9" * 5000 + "}", "1:22:", "an integer of 5000 digits"),
    ("surrogate.json", '{"train_batch_size": 8, "\\ud800": 1}', "1:25:", "lone surrogate \\ud800"),
    ("surrogate_hjson.json", '{train_batch_size: 8, x: "\\udfff"}', "1:26:", "lone surrogate \\udfff"),
])
def test_json_no_config_can_be_is_a_clear_dsl001(tmp_path, name, text, where, message):
    (tmp_path / name).write_text(text)
    for args in ([str(tmp_path / name)], [str(tmp_path)], ["--format", "json", str(tmp_path / name)]):
        result = run_dslint("check", *args)
        _clean_stderr(result)
        assert result.returncode == 1, result.stdout + result.stderr
        if args[0] == "--format":
            finding = json.loads(result.stdout)["findings"][0]
            assert finding["code"] == "DSL001" and message in finding["message"]
        else:
            assert f"{name}:{where} DSL001" in result.stdout and message in result.stdout, result.stdout


# --- the contract: usage errors, exit codes, no traceback --------------------------------------------------

def test_output_to_a_folder_is_a_usage_error(tmp_path):
    (tmp_path / "train.py").write_text(HAZARD)
    result = run_dslint("check", "-o", str(tmp_path), str(tmp_path / "train.py"))
    _clean_stderr(result)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "-o/--output" in result.stderr and "is a folder" in result.stderr
    missing = run_dslint("check", "-o", str(tmp_path / "no" / "such" / "r.txt"), str(tmp_path / "train.py"))
    _clean_stderr(missing)
    assert missing.returncode == 2 and "cannot write the report" in missing.stderr


def test_config_that_is_a_folder_is_a_usage_error(tmp_path):
    (tmp_path / "train.py").write_text(HAZARD)
    for args in (["--config", str(tmp_path)], ["--format", "json", "--config", str(tmp_path)]):
        result = run_dslint("check", *args, str(tmp_path / "train.py"))
        _clean_stderr(result)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "is a folder" in result.stderr


@pytest.mark.parametrize("table, where", [
    ('select = ["DSL999"]', "[tool.dslint] select"),
    ('ignore = ["DSL1", "DSLX"]', "[tool.dslint] ignore"),
    ('[tool.dslint.per-file-ignores]\n"tests/*" = ["DSL9"]', "[tool.dslint.per-file-ignores] 'tests/*'"),
])
def test_unknown_codes_in_pyproject_are_usage_errors(tmp_path, table, where):
    (tmp_path / "train.py").write_text(HAZARD)
    (tmp_path / "pyproject.toml").write_text("[tool.dslint]\n" + table + "\n")
    result = run_dslint("check", str(tmp_path))
    _clean_stderr(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and where in result.stderr and "unknown rule code" in result.stderr
    assert result.stdout == ""


def test_unknown_codes_on_the_command_line_are_usage_errors(tmp_path):
    (tmp_path / "train.py").write_text(HAZARD)
    for option in ("--select", "--ignore"):
        result = run_dslint("check", option, "DSL999", str(tmp_path))
        _clean_stderr(result)
        assert result.returncode == 2 and f"{option}: unknown rule code or prefix 'DSL999'" in result.stderr


@pytest.mark.parametrize("text", ['[tool.dslint\nselect = ["DSL1"]\n', '[tool.dslint]\nselect = ["DSL1"\n',
                                  '[project]\nname = "x"\n[tool.dslint]\nworld-size = = 8\n'])
def test_invalid_pyproject_is_a_usage_error(tmp_path, text):
    (tmp_path / "train.py").write_text(HAZARD)
    (tmp_path / "pyproject.toml").write_text(text)
    result = run_dslint("check", str(tmp_path))
    _clean_stderr(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pyproject.toml: invalid TOML" in result.stderr and result.stderr.count("\n") == 1


def test_an_unexpected_exception_is_one_line_and_exit_3_and_debug_shows_it(monkeypatch, capsys):
    from dslint import cli

    def broken(**kwargs):
        raise RuntimeError("boom\nsecond line")
    monkeypatch.setattr(cli, "run_check", broken)
    monkeypatch.delenv("DSLINT_DEBUG", raising=False)
    assert cli.main(["check", "x.py"]) == 3
    err = capsys.readouterr().err
    assert err == ("dslint: error: internal error: RuntimeError: boom second line "
                   "(run again with --debug for the traceback)\n")
    assert cli.main(["check", "--debug", "x.py"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: boom" in err
    os.environ.pop("DSLINT_DEBUG", None)


def test_debug_is_accepted_by_the_direct_and_the_typer_parser(tmp_path):
    (tmp_path / "train.py").write_text(HAZARD)
    for args in (["--debug", "check"], ["check", "--debug"], ["check", "--debug", "--select", "DSL1,DSL2"]):
        result = run_dslint(*args, str(tmp_path / "train.py"))
        assert result.returncode == 1 and "DSL101" in result.stdout, result.stderr


def test_sniff_json_with_nothing_checkable_passes(tmp_path):
    (tmp_path / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}}\n')
    result = run_dslint("check", "--sniff-json", str(tmp_path / "tsconfig.json"))
    _clean_stderr(result)
    assert result.returncode == 0, result.stdout + result.stderr
    # without --sniff-json the user named a file dslint cannot check as a config: still exit 2 when it fails
    plain = run_dslint("check", str(tmp_path / "missing.json"))
    assert plain.returncode == 2


# --- everything at once ---------------------------------------------------------------------------------

def test_a_folder_of_every_bad_input_still_reports_the_hazards(tmp_path):
    folder = tmp_path / "proj"
    shutil.copytree(REPO / "examples", folder)
    os.mkfifo(folder / "fifo.py")
    os.symlink("/dev/zero", folder / "zero.py")
    os.symlink(folder / "loop_b.py", folder / "loop_a.py")
    os.symlink(folder / "loop_a.py", folder / "loop_b.py")
    with open(folder / "checkpoint.pt", "wb") as f:
        f.truncate(1 << 30)
    with open(folder / "big.json", "wb") as f:
        f.truncate(1 << 30)
    fd = os.open(os.fsencode(folder) + b"/bad\xff.py", os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    (folder / "deep.json").write_text('{"train_batch_size": 1, "a": ' + '[' * 600 + ']' * 600 + '}')
    (folder / "bigint.json").write_text('{"train_batch_size": ' + "9" * 5000 + "}")
    (folder / "surrogate.json").write_text('{"train_batch_size": 8, "\\ud800": 1}')
    (folder / "hjson_config.json").write_text(HJSON_CONFIG)
    (folder / "latin.py").write_bytes(("# coding: latin-1\nimport torch.distributed as dist\nN = '\xe9'\n"
                                       "if dist.get_rank() == 0:\n    dist.barrier()\n").encode("latin-1"))
    (folder / "blob.py").write_bytes(b"\x00" * 100)
    (folder / "tsconfig.json").write_text('{"compilerOptions": {}}')
    expected = run_dslint("check", "--format", "json", str(REPO / "examples"), cwd=REPO)
    start = time.monotonic()
    result = run_dslint("check", "--format", "json", str(folder), cwd=tmp_path, timeout=120)
    assert time.monotonic() - start < 60
    _clean_stderr(result)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    found = {(Path(f["path"]).name, f["line"], f["code"]) for f in report["findings"]}
    for f in json.loads(expected.stdout)["findings"]:       # every hazard of the examples is still reported
        assert (Path(f["path"]).name, f["line"], f["code"]) in found, f
    assert ("latin.py", 5, "DSL101") in found
    assert ("hjson_config.json", 7, "DSL407") in found or ("hjson_config.json", 5, "DSL407") in found
    for name in ("deep.json", "bigint.json", "surrogate.json"):
        assert any(p == name and c == "DSL001" for p, _, c in found), name
    skipped = {Path(e["path"]).name for e in report["errors"]}
    assert {"fifo.py", "zero.py", "loop_a.py", "loop_b.py", "big.json", "bad\\xff.py", "blob.py"} <= skipped
    assert "checkpoint.pt" not in skipped and "tsconfig.json" not in skipped
    assert stat.S_ISFIFO(os.lstat(folder / "fifo.py").st_mode)


def test_a_terminal_that_cannot_show_a_character_gets_it_escaped(tmp_path):
    """DSL406's message holds `×`; on an ASCII-only stdout it is escaped, not a UnicodeEncodeError."""
    (tmp_path / "ds_config.json").write_text('{"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4,\n'
                                             ' "gradient_accumulation_steps": 1}\n')
    result = run_dslint("check", "--world-size", "4", str(tmp_path / "ds_config.json"),
                        env={"PYTHONIOENCODING": "ascii"})
    _clean_stderr(result)
    assert result.returncode == 1 and "DSL406" in result.stdout and "\\xd7" in result.stdout, result.stdout


def test_walked_markdown_is_read_only_for_launcher_blocks(tmp_path):
    # a README without a launcher block, one that is not UTF-8 and one over the size limit are dropped without a
    # word; one whose shell block launches train.py on one GPU is read (and gets no finding of its own)
    folder = _with_hazard(tmp_path / "repo")
    (folder / "NOTES.md").write_text("# notes\n\n```python\nimport deepspeed\n```\n")
    (folder / "BAD.md").write_bytes(b"\xff\xfe deepspeed train.py")
    (folder / "BIG.md").write_text("```bash\ndeepspeed --num_gpus 2 train.py\n```\n" + "x" * (2 << 20))
    (folder / "README.md").write_text("Run it:\n\n```bash\ndeepspeed --include localhost:0 train.py\n```\n")
    result = run_dslint("check", "--format", "json", str(folder))
    _clean_stderr(result)
    report = json.loads(result.stdout)
    assert report["files_checked"] == 2 and not report["errors"]
    assert report["findings"] == []                      # one process: no rank to wait for
    (folder / "README.md").write_text("Run it:\n\n```bash\ndeepspeed --include localhost:0,1 train.py\n```\n")
    _reports_hazard(run_dslint("check", str(folder)))
