"""Which frames are the user's in the pre-flight's reports: a package an installed distribution provides is a
library wherever it lies (a `pip install --target` folder, an editable install from a checkout), except under the
launched script's own folders."""

from __future__ import annotations

import sys

from dslint.runtime_checks import execution_context as ec


def _dist(root, name):
    pkg = root / name
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "comm.py").write_text("def all_reduce():\n    pass\n")
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(f"{name}\n")
    return pkg / "sub" / "comm.py"


def test_an_installed_package_outside_site_packages_is_library_code_and_the_users_folders_are_not(tmp_path,
                                                                                                     monkeypatch):
    target = tmp_path / "target"  # e.g. `pip install --target` on PYTHONPATH, or an editable checkout
    comm = _dist(target, "dsl_fake_comm_pkg")
    project = tmp_path / "project"
    own = _dist(project, "dsl_fake_own_pkg")  # the user's project, installed editable from its checkout
    script = project / "train.py"
    script.write_text("")
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.setattr(ec, "_DIST_PACKAGES", None)
    ec.set_user_roots(str(project))
    try:
        assert ec.is_library_file(str(comm))
        assert not ec.is_library_file(str(own))
        assert not ec.is_library_file(str(script))
        plain = tmp_path / "elsewhere" / "helpers.py"  # no package, no distribution: the user's
        plain.parent.mkdir()
        plain.write_text("")
        assert not ec.is_library_file(str(plain))
        assert ec.is_library_file(sys.modules["json"].__file__)  # the stdlib, as before
        assert ec.is_library_file("<frozen importlib._bootstrap>")
    finally:
        ec.set_user_roots()
        monkeypatch.setattr(ec, "_DIST_PACKAGES", None)
