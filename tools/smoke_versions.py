"""Smoke test of every Python the package admits (`requires-python`), as a new user would try it: for each of
3.10-3.13 that this machine offers, a fresh virtualenv, `pip install .` (no extras: no torch, no DeepSpeed),
then `dslint check --format json` of the bundled examples and a few fixtures, compared with 3.11's report, and
the compiled-code cache (dslint.codecache) verified: a second process loads every method from the file the
first wrote, and the classes are those a plain `exec` builds. A version the machine lacks is reported and
skipped. Run by .ci/run; by hand: `python tools/smoke_versions.py [--keep DIR] [3.10 3.12 ...]`.

Exit status: 0 when every version found passed, 1 otherwise (each failure on a line of its own)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VERSIONS = ("3.10", "3.11", "3.12", "3.13")
REFERENCE = "3.11"
# what is checked: the bundled examples and fixtures that exercise the launch units (a launcher's world size and
# its config: DSL406), the config model (pydantic), the collective analyses and a syntax error (DSL001)
TARGETS = ("examples",
           "tests/fixtures/static/units",
           "tests/fixtures/static/config/misspelled_batch_precision.json",
           "tests/fixtures/static/config/moe_zero2",
           "tests/fixtures/static/collectives/elif_chain_rank_branches.py",
           "tests/fixtures/static/collectives/engine_passed_to_helper",
           "tests/fixtures/static/launch")

# Describes every method `dataclasses` generated for libcst's and dslint's classes (as tests/test_codecache.py
# does on 3.11), with codecache installed or not, and this process's cache statistics.
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
    # a frozenset constant (3.12+: a frozen class's field names) is compared as a set: its repr's order
    # follows the string hashes, which differ between processes
    consts = tuple(desc(k) if isinstance(k, types.CodeType) else repr(sorted(k)) if isinstance(k, frozenset)
                   else repr(k) for k in c.co_consts)
    return [c.co_name, getattr(c, "co_qualname", ""), c.co_flags, c.co_argcount, c.co_posonlyargcount,
            c.co_kwonlyargcount, c.co_code.hex(), c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars,
            c.co_filename, c.co_firstlineno, c.co_linetable.hex(), consts]

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


def find_interpreter(version: str) -> str | None:
    """`pythonX.Y` on PATH, else a pyenv installation of that version."""
    found = shutil.which(f"python{version}")
    candidates = [found] if found else []
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")),
                         reverse=True)
    for path in candidates:
        try:
            out = subprocess.run([path, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == version:
            return path
    return None


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def _normalised(report: dict) -> dict:
    """The report without what legitimately differs between interpreters (nothing of the findings)."""
    report = dict(report)
    report.pop("version", None)
    return report


def smoke(version: str, python: str, work: Path, log) -> tuple[dict | None, list[str]]:
    """Install into a fresh venv, check the targets, verify the code cache: (report, failures)."""
    failures: list[str] = []
    venv = work / f"venv-{version}"
    shutil.rmtree(venv, ignore_errors=True)
    started = time.monotonic()
    made = _run([python, "-m", "venv", str(venv)])
    if made.returncode != 0:
        return None, [f"{version}: venv failed: {made.stderr.strip()[-500:]}"]
    vpy = str(venv / "bin" / "python")
    # a build folder of its own per version (setuptools builds in the source tree otherwise)
    src = work / f"src-{version}"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                             ".pytest_cache", "bench", "docs", "tests",
                                                             "examples"))
    installed = _run([vpy, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", "."], cwd=src)
    if installed.returncode != 0:
        return None, [f"{version}: pip install . failed: {installed.stderr.strip()[-1500:]}"]
    log(f"{version}: installed in {time.monotonic() - started:.0f} s")
    dslint = str(venv / "bin" / "dslint")
    cache = work / f"cache-{version}"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "DSLINT_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    for var in ("PYTHONPATH", "VIRTUAL_ENV", "DSLINT_NO_CODE_CACHE"):
        env.pop(var, None)
    reports = []
    for attempt in ("cold", "warm"):
        out = _run([dslint, "check", "--format", "json", "--exit-zero", *TARGETS], cwd=REPO, env=env, timeout=600)
        if out.returncode != 0:
            failures.append(f"{version}: dslint check ({attempt}) exited {out.returncode}: {out.stderr.strip()[-800:]}")
            return None, failures
        # nothing on stderr: no warning about the user's code (invalid escapes: SyntaxWarning on 3.12+), no crash;
        # the skipped-file lines of the fixtures are the only expected ones
        noise = [line for line in out.stderr.splitlines() if ": skipped: " not in line]
        if noise:
            failures.append(f"{version}: stderr of dslint check ({attempt}): " + " | ".join(noise[:5]))
        try:
            reports.append(_normalised(json.loads(out.stdout)))
        except ValueError:
            failures.append(f"{version}: dslint check ({attempt}) wrote no JSON report")
            return None, failures
    if reports[0] != reports[1]:
        failures.append(f"{version}: the warm (cached) run's report differs from the cold run's")
    # the code cache: the file the runs wrote, then plain vs cached classes in fresh processes
    tag = _run([vpy, "-c", "from dslint import codecache; from pathlib import Path; import sys; "
                "print(codecache.cache_file(Path(sys.argv[1])))", str(cache)], env=env)
    cache_file = Path(tag.stdout.strip()) if tag.returncode == 0 else None
    if cache_file is None or not cache_file.is_file():
        failures.append(f"{version}: the check runs wrote no code cache file ({tag.stdout.strip() or tag.stderr[-300:]})")
    probe_dir = work / f"probe-{version}"
    shutil.rmtree(probe_dir, ignore_errors=True)
    probes = {}
    for mode in ("plain", "cached", "cached-again"):
        out = _run([vpy, "-c", PROBE, mode.split("-")[0], str(probe_dir)], env=env, timeout=300)
        if out.returncode != 0:
            failures.append(f"{version}: code cache probe ({mode}) failed: {out.stderr.strip()[-800:]}")
            break
        probes[mode] = json.loads(out.stdout)
    else:
        plain, first, second = probes["plain"], probes["cached"], probes["cached-again"]
        if len(plain["methods"]) < 600:
            failures.append(f"{version}: code cache probe saw only {len(plain['methods'])} generated methods")
        if first["methods"] != plain["methods"] or second["methods"] != plain["methods"]:
            failures.append(f"{version}: cached dataclass methods differ from plainly compiled ones")
        if second["stats"]["compiled"] != 0 or second["stats"]["hits"] == 0:
            failures.append(f"{version}: the second process did not load the code cache: {second['stats']}")
    log(f"{version}: checked in {time.monotonic() - started:.0f} s since its venv "
        f"({len(reports[0]['findings'])} findings, {reports[0]['files_checked']} files)")
    return reports[0], failures


def compare(reference: dict, report: dict, version: str) -> list[str]:
    if report == reference:
        return []
    ref = {json.dumps(f, sort_keys=True) for f in reference["findings"]}
    got = {json.dumps(f, sort_keys=True) for f in report["findings"]}
    lines = [f"{version}: report differs from {REFERENCE}'s"]
    for f in sorted(ref - got)[:5]:
        lines.append(f"  only on {REFERENCE}: {f[:300]}")
    for f in sorted(got - ref)[:5]:
        lines.append(f"  only on {version}: {f[:300]}")
    for key in sorted(set(reference) | set(report)):
        if key != "findings" and reference.get(key) != report.get(key):
            lines.append(f"  {key}: {json.dumps(reference.get(key))[:200]} on {REFERENCE}, "
                         f"{json.dumps(report.get(key))[:200]} on {version}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=list(VERSIONS))
    parser.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    versions = list(dict.fromkeys([REFERENCE, *args.versions]))

    def log(message: str) -> None:
        print(f"smoke: {message}", flush=True)

    work = args.keep or Path(tempfile.mkdtemp(prefix="dslint-smoke-"))
    work.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    reports: dict[str, dict] = {}
    missing: list[str] = []
    try:
        for version in versions:
            python = find_interpreter(version)
            if python is None:
                log(f"{version}: not on this machine (no python{version} on PATH or under pyenv): skipped")
                missing.append(version)
                continue
            log(f"{version}: {python}")
            report, problems = smoke(version, python, work, log)
            failures += problems
            if report is not None:
                reports[version] = report
        reference = reports.get(REFERENCE)
        if reference is None:
            failures.append(f"no {REFERENCE} report to compare with")
        else:
            for version, report in reports.items():
                if version != REFERENCE:
                    failures += compare(reference, report, version)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    for line in failures:
        log(f"FAIL {line}")
    found = [v for v in versions if v not in missing]
    failed = sorted({line.split(":", 1)[0] for line in failures if line.split(":", 1)[0] in found})
    passed = [v for v in found if v not in failed and v in reports]
    log(f"passed {', '.join(passed) or 'none'}; failed {', '.join(failed) or 'none'}; "
        f"not on this machine {', '.join(missing) or 'none'}")
    print(f"smoke: {len(passed)} passed, {len(found) - len(passed)} failed, {len(missing)} skipped", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
