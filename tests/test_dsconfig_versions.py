"""DSL4xx judged at the DeepSpeed release the project pins (tests/fixtures/dsconfig_versions/*: a
requirements.txt pin + a config + its expected findings). No --deepspeed-version is given: the pin decides."""

from pathlib import Path

import pytest

from dslint.config import Settings
from dslint.engine import Checker

ROOT = Path(__file__).parent / "fixtures" / "dsconfig_versions"
CASES = sorted(p for p in ROOT.iterdir() if p.is_dir())


def _expected(case: Path) -> set:
    out = set()
    for line in (case / "ds_config.json.expect").read_text().splitlines():
        if line.strip():
            n, code = line.split()[:2]
            out.add(("ds_config.json", int(n), code))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_findings_follow_the_pinned_release(case, monkeypatch):
    monkeypatch.chdir(case)
    report = Checker(Settings(root=case)).check_paths([Path("ds_config.json")])
    assert not report.errors, report.errors
    got = {(f.path, f.line, f.code) for f in report.findings}
    assert got == _expected(case), "\n".join(f"{f.path}:{f.line} {f.code} {f.message}" for f in report.findings)


def test_the_pin_is_what_judges(monkeypatch):
    """The same config, the option overriding the pin: the option's release decides."""
    case = ROOT / "min_loss_scale_0_10"
    monkeypatch.chdir(case)
    report = Checker(Settings(root=case, deepspeed_version="0.19.5")).check_paths([Path("ds_config.json")])
    assert [(f.line, f.code) for f in report.findings] == [(5, "DSL405")]
    assert "integer" in report.findings[0].message
