"""Fixture scripts carry their expected findings inline (`# expect: DSL101`); clean twins carry none.

Layout: `tests/fixtures/static/<family>/<case>.py|.json|.sh` is checked alone; a folder
`tests/fixtures/static/<family>/<case>/` is one run over all its files (script + config + launcher +
helper modules). JSON cannot hold comments: `<name>.json.expect` beside it lists `LINE CODE` pairs.
A `# dslint-fixture: world-size=4 deepspeed-version=0.18.0` comment sets run options.
"""

import re
from pathlib import Path

import pytest

from dslint.config import Settings
from dslint.engine import Checker
from dslint.testing import expected

ROOT = Path(__file__).parent / "fixtures" / "static"
SUFFIXES = {".py", ".json", ".sh", ".md", ".ipynb"}


def _cases():
    for family in sorted(p for p in ROOT.iterdir() if p.is_dir()) if ROOT.exists() else []:
        for entry in sorted(family.iterdir()):
            if entry.is_dir() and not entry.name.startswith(("_", ".")):
                yield entry
            elif entry.suffix in SUFFIXES and entry.suffix not in (".md", ".ipynb"):    # a README or notebook travels with its folder case
                yield entry


def _files(case: Path) -> list[Path]:
    if case.is_dir():
        return sorted(p for p in case.rglob("*") if (p.suffix in SUFFIXES or p.name == "cog.yaml")
                      and "__pycache__" not in p.parts)
    return [case]


def _options(files: list[Path]) -> dict:
    opts = {}
    for f in files:
        for m in re.finditer(r"#\s*dslint-fixture:\s*(.*)", f.read_text()):
            for key, value in re.findall(r"([\w-]+)=(\S+)", m.group(1)):
                opts[key.replace("-", "_")] = int(value) if value.isdigit() else \
                    {"true": True, "false": False, "none": None}.get(value, value)
    return opts


def _want(files: list[Path], base: Path) -> set[tuple[str, int, str]]:
    want = set()
    for f in files:
        rel = f.relative_to(base).as_posix()
        if f.suffix == ".json":
            side = f.with_name(f.name + ".expect")
            if side.exists():
                for line in side.read_text().splitlines():
                    if line.strip() and not line.startswith("#"):
                        n, code = line.split()[:2]
                        want.add((rel, int(n), code))
        else:
            want |= {(rel, line, code) for line, code in expected(f.read_text())}
    return want


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c.relative_to(ROOT).as_posix() for c in CASES])
def test_fixture(case, monkeypatch):
    files = _files(case)
    base = case if case.is_dir() else case.parent
    monkeypatch.chdir(base)
    settings = Settings(**{"root": base, "deepspeed_version": "0.19.8", **_options(files)})
    report = Checker(settings).check_paths([f.relative_to(base) for f in files])
    assert not report.errors, report.errors
    got = {(f.path, f.line, f.code) for f in report.findings}
    want = _want(files, base)
    assert got == want, "\n".join(f"{f.path}:{f.line} {f.code} {f.message}" for f in report.findings)
