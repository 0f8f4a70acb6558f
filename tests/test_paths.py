"""`real_path` (the folder-remembering `Path.resolve`) gives resolve()'s answer, links and `..` included."""

import os
from pathlib import Path

from dslint.config import Settings, real_dir, real_path
from dslint.engine import collect


def test_real_path_is_resolve(tmp_path, monkeypatch):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "a.py").write_text("x = 1\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.py").write_text("y = 2\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / "pkg" / "linked")             # a linked folder
    os.symlink(tmp_path / "elsewhere" / "b.py", tmp_path / "pkg" / "c.py")      # a linked file
    monkeypatch.chdir(tmp_path / "pkg")
    real_dir.cache_clear()
    cases = ["sub/a.py", "linked/b.py", "c.py", "sub/../c.py", "linked/../sub/a.py", "./sub//a.py", "missing.py",
             "sub", ".", str(tmp_path / "pkg" / "linked" / "b.py"), "linked"]
    for case in cases:
        assert real_path(case) == str(Path(case).resolve()), case
        assert real_path(Path(case)) == str(Path(case).resolve()), case


def test_collect_dedupes_through_links_and_relative_paths(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("x = 1\n")
    os.symlink(tmp_path / "src", tmp_path / "alias")
    settings = Settings(root=tmp_path, exclude=["build"])
    files = collect([tmp_path / "src", tmp_path / "alias", tmp_path / "src" / "train.py"], settings).files
    assert [p for p, _ in files] == [tmp_path / "src" / "train.py"]
    assert settings.relative(str(tmp_path / "alias" / "train.py")) == "src/train.py"
    assert settings.relative(str(tmp_path)) == "."
    assert settings.relative("/somewhere/else.py") == "/somewhere/else.py"
