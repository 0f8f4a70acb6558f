"""Objects of classes an installed package defines (dslint/program/rank/function_summaries.py `installed_class`): a vendored
HF Trainer builds `TrainerState(is_local_process_zero=...)` from transformers. The class's source is read from
site-packages (never imported), so only the field built from a rank id varies, not the whole object. The
stand-in package `looplib` (tests/fixtures/installed/site) plays the installed library."""

import site
from pathlib import Path

import pytest

from dslint.config import Settings
from dslint.engine import Checker
from dslint.program.rank import function_summaries as taint
from dslint.testing import expected

HERE = Path(__file__).parent / "fixtures" / "installed"
SCRIPTS = sorted((HERE / "scripts").glob("*.py"))


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(HERE / "site")])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(HERE / "nowhere"))
    monkeypatch.setattr(taint, "_INSTALLED_SOURCES", {})


def _check(script: Path, monkeypatch):
    monkeypatch.chdir(script.parent)
    settings = Settings(root=script.parent, deepspeed_version="0.19.8")
    report = Checker(settings).check_paths([Path(script.name)])
    assert not report.errors, report.errors
    return report


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_installed_class_fields(script, installed, monkeypatch):
    report = _check(script, monkeypatch)
    got = {(f.line, f.code) for f in report.findings}
    assert got == set(expected(script.read_text())), \
        "\n".join(f"{f.path}:{f.line} {f.code} {f.message}" for f in report.findings)


def test_not_installed_stays_conservative(monkeypatch):
    """Without the package's source the constructed object is what the call derived from a rank id: may vary."""
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(HERE / "nowhere")])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(HERE / "nowhere"))
    monkeypatch.setattr(taint, "_INSTALLED_SOURCES", {})
    report = _check(HERE / "scripts" / "installed_state_other_field.py", monkeypatch)
    assert any(f.code == "DSL103" for f in report.findings)


def test_installed_class_lookup(installed):
    found = taint.installed_class("looplib.state.LoopState")
    assert found is not None and found[1] == "LoopState"
    assert taint.installed_class("looplib.state.missing") is None
    assert taint.installed_class("looplib.nomodule.LoopState") is None
