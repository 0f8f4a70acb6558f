"""Result-cache entries that are not what dslint wrote (issue 20): valid JSON of another shape, flipped bytes,
another version's, a forged digest over a wrong shape. Each is a miss -- the same findings as a run without a
cache, no traceback -- and is written over, whole, by that run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dslint
from dslint.cache import SCHEMA, ResultCache
from tests.conftest import REPO

FILES = {
    "train.py": "import torch.distributed as dist\nfrom helpers import sync\n\n\ndef step():\n"
                "    if dist.get_rank() == 0:\n        dist.barrier()\n    sync()\n",
    "helpers.py": "import torch.distributed as dist\n\n\ndef sync():\n    dist.all_reduce(x)\n",
    "ds_config.json": '{\n  "train_micro_batch_size_per_gpu": 4,\n  "fp16": {"enabled": true},\n'
                      '  "bf16": {"enabled": true}\n}\n',
}


def _check(root: Path, cache: Path):
    env = {**os.environ, "DSLINT_CACHE_DIR": str(cache), "NO_COLOR": "1", "DSLINT_NO_CODE_CACHE": "1"}
    return subprocess.run([sys.executable, "-m", "dslint", "check", "--format", "json", "--jobs", "1", str(root)],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=env)


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json") if "code" not in p.parts)


def _whole(path: Path) -> bool:
    envelope = json.loads(path.read_bytes())
    return envelope["sha256"] == hashlib.sha256(envelope["payload"].encode()).hexdigest() \
        and envelope["dslint"] == dslint.__version__ and envelope["schema"] == SCHEMA


def _forge(payload) -> bytes:
    text = json.dumps(payload)
    return json.dumps({"schema": SCHEMA, "dslint": dslint.__version__,
                       "sha256": hashlib.sha256(text.encode()).hexdigest(), "payload": text}).encode()


DAMAGE = {
    "wrong shape (list)": lambda data: b"[1, 2, 3]",
    "wrong shape (object)": lambda data: b'{"findings": 5, "errors": "x", "keys": {"a": 1}, "compiles": "yes"}',
    "old format (bare entry)": lambda data: json.loads(data)["payload"].encode(),
    "flipped bytes": lambda data: data[:40] + bytes(b ^ 0x20 for b in data[40:60]) + data[60:],
    "truncated": lambda data: data[: len(data) // 2],
    "not UTF-8": lambda data: b"\xff\xfe" + data,
    "deeply nested": lambda data: b"[" * 100_000 + b"]" * 100_000,
    "another dslint version": lambda data: data.replace(dslint.__version__.encode(), b"0.0.0-other", 1),
    "forged digest over wrong shapes": lambda data: _forge(
        {"findings": [{"code": 1, "line": -3}], "errors": [None], "keys": [1, 2], "compiles": True,
         "imports": "x", "runs": "yes", "refs": None}),
    "forged digest, findings of wrong types": lambda data: _forge(
        {"findings": [{"code": "DSL101", "name": "x", "severity": "error", "path": 5, "line": 1, "column": 1,
                       "end_line": 1, "end_column": 1, "message": ["m"]}], "errors": []}),
}


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """The project, a run's output without a cache, and a cache filled by a run (copied per test)."""
    base = tmp_path_factory.mktemp("caches")
    root = base / "proj"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    reference = _check(root, base / "none")
    assert reference.returncode == 1 and "DSL101" in reference.stdout and "DSL407" in reference.stdout
    cold = _check(root, base / "cache")
    assert (cold.returncode, cold.stdout) == (reference.returncode, reference.stdout)
    return root, reference, base / "cache"


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_bad_result_cache_entry_is_a_miss_and_is_rewritten(tmp_path, warmed, damage):
    root, reference, filled = warmed
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    entries = _entries(cache)
    assert len(entries) >= 4         # the run's entry, program facts, per-file results
    for path in entries:
        path.write_bytes(DAMAGE[damage](path.read_bytes()))
    warm = _check(root, cache)
    assert (warm.returncode, warm.stdout, warm.stderr) == (reference.returncode, reference.stdout, "")
    assert all(_whole(p) for p in _entries(cache))      # written over by that run
    again = _check(root, cache)
    assert (again.returncode, again.stdout) == (reference.returncode, reference.stdout)


def test_get_checks_the_envelope_and_the_callers_shape(tmp_path):
    cache = ResultCache(tmp_path, "run")
    cache.put("k", {"keys": ["a", "b"]})
    assert cache.get("k") == {"keys": ["a", "b"]}
    assert cache.get("k", lambda e: len(e["keys"]) == 2) == {"keys": ["a", "b"]}
    assert cache.get("k", lambda e: len(e["keys"]) == 3) is None
    assert cache.get("k", lambda e: e["missing"]) is None            # an exception in the check is a miss
    assert cache.get("other") is None


def test_installing_a_package_changes_the_cache_key(tmp_path, monkeypatch):
    """The analysis reads installed packages' classes (a vendored Trainer's TrainerState): a package installed,
    upgraded or removed in site-packages must not leave results cached under the old one."""
    import site

    from dslint import cache

    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "user-site"))
    cache.implementation_fingerprint.cache_clear()
    try:
        before = cache.implementation_fingerprint()
        os.utime(site_dir, ns=(1, 1))
        cache.implementation_fingerprint.cache_clear()
        older = cache.implementation_fingerprint()
        (site_dir / "looplib-2.0.dist-info").mkdir()  # pip's upgrade: a new dist-info folder
        cache.implementation_fingerprint.cache_clear()
        assert cache.implementation_fingerprint() != older != before
    finally:
        cache.implementation_fingerprint.cache_clear()
