"""The dataclass code cache (dslint.codecache) builds the very classes a plain `exec` builds, and a damaged or
unwritable cache only costs the compilation."""

import hashlib
import json
import marshal
import os
import subprocess
import sys

from dslint import codecache
from tests.conftest import REPO

# Describes every method that `dataclasses` generated for the classes of libcst and dslint, by the code
# object's contents (marshal's bytes depend on reference counts, so they are not compared).
PROBE = r"""
import json, sys, types
from pathlib import Path
mode, directory = sys.argv[1], Path(sys.argv[2])
from dslint import codecache
if mode == "cached":
    assert codecache.install(directory)
import libcst, dslint.engine, dslint.rules
dslint.rules.all_rules()

def desc(c):
    consts = tuple(desc(k) if isinstance(k, types.CodeType) else repr(k) for k in c.co_consts)
    return [c.co_name, c.co_qualname, c.co_flags, c.co_argcount, c.co_posonlyargcount, c.co_kwonlyargcount,
            c.co_code.hex(), c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars, c.co_filename,
            c.co_firstlineno, c.co_linetable.hex(), consts]

out = {}
for name, mod in sorted(sys.modules.items()):
    if not name.startswith(("libcst", "dslint")):
        continue
    for cls in list(vars(mod).values()):
        if isinstance(cls, type) and "__dataclass_fields__" in vars(cls) and cls.__module__ == name:
            for attr, fn in sorted(vars(cls).items()):
                code = getattr(fn, "__code__", None)
                if code is not None and code.co_filename == "<string>":
                    out[f"{cls.__module__}.{cls.__qualname__}.{attr}"] = desc(code)
print(json.dumps({"methods": out, "stats": codecache.stats}))
"""


def _probe(mode, directory):
    out = subprocess.run([sys.executable, "-c", PROBE, mode, str(directory)], capture_output=True, text=True,
                         timeout=120, cwd=REPO, env={**os.environ, "DSLINT_NO_CODE_CACHE": ""})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_cached_classes_are_the_plainly_compiled_ones(tmp_path):
    plain = _probe("plain", tmp_path)
    first = _probe("cached", tmp_path)      # compiles and writes the file
    second = _probe("cached", tmp_path)     # everything from the file
    assert len(plain["methods"]) > 600      # libcst's nodes and dslint's own dataclasses
    assert first["methods"] == plain["methods"]
    assert second["methods"] == plain["methods"]
    # the first run compiles each distinct text once (frozen classes share their __setattr__ text)
    assert first["stats"]["compiled"] > 500
    assert second["stats"]["compiled"] == 0
    assert second["stats"]["hits"] == first["stats"]["hits"] + first["stats"]["compiled"]
    assert codecache.cache_file(tmp_path).is_file()


def _check(script, cache_dir, **env):
    return subprocess.run([sys.executable, "-m", "dslint", "check", "--format", "json", str(script)],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "DSLINT_CACHE_DIR": str(cache_dir), **env})


def test_damaged_cache_file_is_ignored_and_replaced(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import deepspeed\nengine, *_ = deepspeed.initialize(model=m, config='ds.json')\n"
                      "if engine.global_rank == 0:\n    engine.save_checkpoint('out')\n")
    reference = _check(script, tmp_path / "off", DSLINT_NO_CODE_CACHE="1")
    assert not (tmp_path / "off" / "code").exists()
    cache_dir = tmp_path / "on"
    path = codecache.cache_file(cache_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x00not marshal data")
    damaged = _check(script, cache_dir, DSLINT_NO_CODE_CACHE="")
    assert (damaged.returncode, damaged.stdout) == (reference.returncode, reference.stdout)
    assert reference.returncode == 1 and "DSL1" in reference.stdout
    assert len(codecache._load(path)) > 500     # rewritten from this run's compilations


def test_unwritable_cache_directory_costs_nothing_but_time(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = _check(script, blocker, DSLINT_NO_CODE_CACHE="")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_only_the_installing_process_writes(tmp_path):
    path = tmp_path / "code" / "x.marshal"
    codecache._save(path, {"def f(): pass": compile("def f(): pass", "<string>", "exec")}, os.getpid() + 1)
    assert not path.exists()
    codecache._save(path, {"def f(): pass": compile("def f(): pass", "<string>", "exec")}, os.getpid())
    assert list(codecache._load(path)) == ["def f(): pass"]


def test_foreign_entries_are_dropped(tmp_path):
    path = tmp_path / "x.marshal"
    path.write_bytes(codecache._seal(marshal.dumps({"a": 1, 2: compile("pass", "<s>", "exec"),
                                                    "ok": compile("pass", "<s>", "exec")})))
    assert list(codecache._load(path)) == ["ok"]
    path.write_bytes(codecache._seal(marshal.dumps([1, 2])))
    assert codecache._load(path) == {}


def _never_unmarshalled(monkeypatch) -> list:
    calls: list = []
    real = marshal.loads
    monkeypatch.setattr(codecache.marshal, "loads", lambda data: calls.append(data) or real(data))
    return calls


def test_unsealed_flipped_or_foreign_bytes_are_never_unmarshalled(tmp_path, monkeypatch):
    """The digest is checked before `marshal.loads` sees a byte: plain marshal data (an older dslint's file),
    a file with bits flipped anywhere, a truncated one and one sealed for another build are all ignored."""
    memo = {"def f(): pass": compile("def f(): pass", "<string>", "exec")}
    good = codecache._seal(marshal.dumps(memo))
    path = tmp_path / "x.marshal"
    calls = _never_unmarshalled(monkeypatch)
    path.write_bytes(good)
    assert list(codecache._load(path)) == ["def f(): pass"] and len(calls) == 1
    calls.clear()
    damaged = [marshal.dumps(memo), good[:-7], good[: len(good) // 2]]
    for at in (0, len(codecache.MAGIC) + 3, len(good) // 2, len(good) - 1):
        flipped = bytearray(good)
        flipped[at] ^= 0x41
        damaged.append(bytes(flipped))
    body = marshal.dumps(memo)
    other_build = codecache.MAGIC + hashlib.sha256(b"cpython|cpython-399|other" + body).digest() + body
    damaged.append(other_build)
    for data in damaged:
        path.write_bytes(data)
        assert codecache._load(path) == {}
    assert calls == []


def test_flipped_bytes_in_the_real_cache_file_cost_nothing_and_are_rewritten(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\nif dist.get_rank() == 0:\n    dist.barrier()\n")
    cache_dir = tmp_path / "on"
    first = _check(script, cache_dir, DSLINT_NO_CODE_CACHE="")
    path = codecache.cache_file(cache_dir)
    good = path.read_bytes()
    assert first.returncode == 1 and len(codecache._load(path)) > 500
    for at in range(len(codecache.MAGIC) + 40, len(good), max(1, len(good) // 7)):
        flipped = bytearray(good)
        for k in range(at, min(at + 16, len(good))):
            flipped[k] ^= 0xFF
        path.write_bytes(bytes(flipped))
        again = _check(script, cache_dir, DSLINT_NO_CODE_CACHE="")
        assert (again.returncode, again.stdout, again.stderr) == (first.returncode, first.stdout, ""), at
        assert codecache._unseal(path.read_bytes()) is not None      # written over, whole again
