"""The real `pre-commit` tool runs this repository's hook in a temporary git repository."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

HAZARD = '{\n  "train_micro_batch_size_per_gpu": 4,\n  "fp16": {"enabled": true},\n  "bf16": {"enabled": true}\n}\n'
CLEAN = '{\n  "train_micro_batch_size_per_gpu": 4,\n  "bf16": {"enabled": true}\n}\n'


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _new_repo(repo: Path) -> Path:
    """An empty git repository with a committer set."""
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "ci@example.com")
    _git(repo, "config", "user.name", "ci")
    return repo


def _pre_commit(cwd: Path, env: dict) -> subprocess.CompletedProcess:
    # try-repo installs the hook from this checkout (committed or not) into pre-commit's own virtualenv
    return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "dslint", "--all-files",
                           "--color", "never"], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.timeout(900)
def test_pre_commit_hook_fails_on_hazard_and_passes_on_clean(tmp_path):
    repo = _new_repo(tmp_path / "proj")
    (repo / "package.json").write_text('{"name": "frontend", "version": "1.0.0"}\n')   # not a DeepSpeed config
    (repo / "ds_config.json").write_text(HAZARD)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}
    bad = _pre_commit(repo, env)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "ds_config.json:3:3: DSL4" in bad.stdout or "ds_config.json:4:3: DSL4" in bad.stdout, bad.stdout
    assert "package.json" not in bad.stdout

    (repo / "ds_config.json").write_text(CLEAN)
    _git(repo, "commit", "-qam", "fix")
    good = _pre_commit(repo, env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout

    # nothing the hook can check staged (a front-end's tsconfig.json): the commit is not blocked
    web = tmp_path / "web"
    web.mkdir()
    _git(web, "init", "-q")
    (web / "tsconfig.json").write_text('{\n  "compilerOptions": {"strict": true}\n}\n')
    _git(web, "add", "-A")
    only_json = _pre_commit(web, env)
    assert only_json.returncode == 0, only_json.stdout + only_json.stderr
    assert "Passed" in only_json.stdout
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


FIXABLE = ('{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {\n    "stage": 2,\n'
           '    "cpu_offload": true\n  }\n}\n')
FIXED = ('{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {\n    "stage": 2,\n'
         '    "offload_optimizer": {"device": "cpu"}\n  }\n}\n')


@pytest.mark.timeout(900)
def test_fixing_hook_applies_safe_fixes_then_passes(tmp_path):
    repo = _new_repo(tmp_path / "proj")
    (repo / "ds_config.json").write_text(FIXABLE)
    (repo / "README.md").write_text("notes\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "dslint-fix",
                               "--all-files", "--color", "never"], cwd=repo, capture_output=True, text=True,
                              timeout=600, env=env)

    first = run()
    # pre-commit fails a hook that modified files; the file now holds the fix, byte for byte
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout, first.stdout
    assert (repo / "ds_config.json").read_text() == FIXED
    assert (repo / "README.md").read_text() == "notes\n"
    _git(repo, "commit", "-qam", "dslint fixes")
    second = run()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


LAUNCHER = "#!/bin/bash\ndeepspeed --num_gpus {gpus} train.py --deepspeed ds_config.json\n"
TRAIN = ("import argparse\nimport deepspeed\nimport torch\n\nparser = argparse.ArgumentParser()\n"
         "parser.add_argument('--deepspeed', type=str)\nargs = parser.parse_args()\nmodel = torch.nn.Linear(4, 4)\n"
         "engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),\n"
         "                                      config=args.deepspeed)\nfor step in range(10):\n"
         "    engine.backward(engine(torch.randn(2, 4)).sum())\n    engine.step()\n")
BATCH = '{{\n  "train_batch_size": {tb},\n  "train_micro_batch_size_per_gpu": 8,\n  "gradient_accumulation_steps": {gas}\n}}\n'


@pytest.mark.timeout(900)
def test_staged_files_are_checked_in_the_context_of_the_committed_ones(tmp_path):
    """Issue 32 part 2: the hook sees only the staged files, but reads them with the repository's other files
    (as git tracks them), so a staged config that breaks the batch arithmetic of a committed launcher (DSL406:
    32 != 8 × 1 × 8 ranks) fails the commit, and so does a staged launcher that breaks a committed config; the
    clean twins (a product that matches) and an unrelated staged file pass."""
    repo = _new_repo(tmp_path / "proj")
    (repo / "run.sh").write_text(LAUNCHER.format(gpus=8))
    (repo / "train.py").write_text(TRAIN)
    (repo / "ds_config.json").write_text(BATCH.format(tb=64, gas=1))
    (repo / "notes.py").write_text("NOTES = 'unrelated'\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}

    def staged() -> subprocess.CompletedProcess:      # the hook on the staged files only, as `git commit` runs it
        return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "dslint", "--color",
                               "never"], cwd=repo, capture_output=True, text=True, timeout=600, env=env)

    # only the config is staged; the launcher that makes the world size 8 is committed
    (repo / "ds_config.json").write_text(BATCH.format(tb=32, gas=1))
    _git(repo, "add", "ds_config.json")
    bad = staged()
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "ds_config.json:2:3: DSL406" in bad.stdout and "8 × 1 × 8 = 64" in bad.stdout, bad.stdout
    assert "run.sh:2" in bad.stdout                  # the committed launcher, as evidence
    # the clean twin: a staged config whose product holds (128 = 8 × 2 × 8) passes
    (repo / "ds_config.json").write_text(BATCH.format(tb=128, gas=2))
    _git(repo, "add", "ds_config.json")
    good = staged()
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
    _git(repo, "commit", "-qm", "batch 128")

    # a finding located in a file the commit does not touch, caused by one it does: the staged launcher now
    # starts 4 ranks, and the committed config's 128 != 8 × 2 × 4
    (repo / "run.sh").write_text(LAUNCHER.format(gpus=4))
    _git(repo, "add", "run.sh")
    caused = staged()
    assert caused.returncode == 1, caused.stdout + caused.stderr
    assert "ds_config.json:2:3: DSL406" in caused.stdout and "8 × 2 × 4 = 64" in caused.stdout, caused.stdout
    # its clean twin: the config changed with it
    (repo / "ds_config.json").write_text(BATCH.format(tb=64, gas=2))
    _git(repo, "add", "ds_config.json")
    assert staged().returncode == 0
    _git(repo, "commit", "-qm", "4 ranks")

    # a staged file that takes no part in a finding passes even while the repository has one elsewhere
    (repo / "ds_config.json").write_text(BATCH.format(tb=48, gas=1))
    _git(repo, "commit", "-qam", "a broken config, committed without the hook")
    (repo / "notes.py").write_text("NOTES = 'still unrelated'\n")
    _git(repo, "add", "notes.py")
    unrelated = staged()
    assert unrelated.returncode == 0, unrelated.stdout + unrelated.stderr
    assert "DSL406" not in unrelated.stdout
    _git(repo, "commit", "-qm", "notes")

    # untracked files are not the commit's context: a consistent config (32 = 8 × 1 × 4) staged beside an
    # untracked launcher of 8 ranks passes; tracked, that launcher makes it fail
    (repo / "ds_config.json").write_text(BATCH.format(tb=32, gas=1))
    (repo / "run8.sh").write_text(LAUNCHER.format(gpus=8))
    _git(repo, "add", "ds_config.json")
    untracked = staged()
    assert untracked.returncode == 0, untracked.stdout + untracked.stderr
    _git(repo, "add", "run8.sh")
    tracked = staged()
    assert tracked.returncode == 1, tracked.stdout + tracked.stderr
    assert "run8.sh:2:1: DSL501" in tracked.stdout and "needs 4 data-parallel ranks" in tracked.stdout
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


def test_context_option_without_pre_commit(tmp_path, dslint_cli):
    """`check --context DIR PATHS` directly (the mechanism under the hook, dslint/changed.py): outside a git
    repository every file of DIR is context; inside one, only those git tracks (and the named ones)."""
    (tmp_path / "run.sh").write_text(LAUNCHER.format(gpus=8))
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "ds_config.json").write_text(BATCH.format(tb=32, gas=1))
    (tmp_path / "notes.py").write_text("NOTES = 1\n")
    alone = dslint_cli("check", "--sniff-json", "ds_config.json", cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout             # without context: no launcher, no world size
    ctx = dslint_cli("check", "--sniff-json", "--context", ".", "ds_config.json", cwd=tmp_path)
    assert ctx.returncode == 1 and "ds_config.json:2:3: DSL406" in ctx.stdout, ctx.stdout + ctx.stderr
    launcher = dslint_cli("check", "--sniff-json", "--context", ".", "run.sh", cwd=tmp_path)
    assert "ds_config.json:2:3: DSL406" in launcher.stdout           # run.sh is its evidence
    unrelated = dslint_cli("check", "--sniff-json", "--context", ".", "notes.py", cwd=tmp_path)
    assert unrelated.returncode == 0 and "DSL406" not in unrelated.stdout, unrelated.stdout
    # in a git work tree, an untracked launcher is not context
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "train.py", "ds_config.json", "notes.py")
    untracked = dslint_cli("check", "--sniff-json", "--context", ".", "ds_config.json", cwd=tmp_path)
    assert untracked.returncode == 0, untracked.stdout
    _git(tmp_path, "add", "run.sh")
    tracked = dslint_cli("check", "--sniff-json", "--context", ".", "ds_config.json", cwd=tmp_path)
    assert tracked.returncode == 1 and "DSL406" in tracked.stdout
    bad = dslint_cli("check", "--context", "notes.py", "ds_config.json", cwd=tmp_path)
    assert bad.returncode == 2 and "--context notes.py: not a folder" in bad.stderr
    fix = dslint_cli("check", "--fix", "--context", ".", "ds_config.json", cwd=tmp_path)
    assert fix.returncode == 2 and "does not combine with --fix" in fix.stderr
