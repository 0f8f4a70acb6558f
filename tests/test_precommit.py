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
