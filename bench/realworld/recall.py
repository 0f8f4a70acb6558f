"""Recall on real upstream fixes of distributed hangs (bench/realworld/hangs.json).

Each case of the manifest is a fix commit of a public repository, its parent, and the hazard lines
in the parent's files. For every case this script

1. exports the PARENT commit's tree from the bare mirror ``<mirror root>/<owner>+<name>/repo`` into
   ``<scratch>/<name>-<commit[:12]>/`` (``export_tree`` of materialise.py; one export per commit,
   reused across cases and runs);
2. runs, with that folder as the working directory and this checkout's dslint first on PYTHONPATH,
   ``python -m dslint check --no-cache --exit-zero --format json .`` -- the repository root, as a
   user would; when the root run exceeds ``--timeout`` it retries on the folder of the case's first
   file and says so (``scope`` in the results);
3. counts the case FOUND when a finding whose code is one of the case's ``codes`` (an exact code
   such as ``DSL101`` or a family prefix such as ``DSL1``) lies in a labelled file within
   ``window`` lines (default 3) of a labelled line;
4. does the same on the FIX commit's tree, with each labelled line carried over to the fixed file
   through a line diff, and reports whether the finding is gone there (a fix that silences the
   finding is what a user wants to see).

It prints one row per case and a summary (recall overall and per code family), and writes
``bench/realworld/results-recall/recall.json``. Nothing is downloaded; third-party code is only
written under the scratch folder.

    python bench/realworld/recall.py [--manifest M] [--mirror-root /work/.mirror]
                                     [--scratch /tmp/recall-trees] [--timeout 300] [ids...]
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent  # the dslint checkout this script belongs to
sys.path.insert(0, str(HERE))
from materialise import export_tree  # noqa: E402
from run import dslint_json  # noqa: E402

DEFAULT_WINDOW = 3


# --------------------------------------------------------------------------- matching (pure)

def code_matches(code: str, expected: list[str]) -> bool:
    """``code`` is one of ``expected`` (exact codes, or families given as a prefix like ``DSL1``)."""
    return any(code == e or (len(e) < 6 and code.startswith(e)) for e in expected)


def family(codes: list[str]) -> str:
    """The family a case is counted under: its first expected code's ``DSLn``."""
    return codes[0][:4]


def _near(findings: list[dict], sites: list[dict], window: int, keep) -> list[dict]:
    """Findings of a labelled file within ``window`` lines of one of its labelled lines whose code ``keep``
    accepts. ``sites`` = ``[{"path": relative path, "lines": [1-based lines]}]``; a finding's ``path`` is
    compared after normalising ``./`` and separators."""
    wanted = {_norm(s["path"]): s["lines"] for s in sites}
    out = []
    for f in findings:
        lines = wanted.get(_norm(f.get("path", "")))
        if not lines or not keep(f.get("code", "")):
            continue
        start = f.get("line") or 0
        end = f.get("end_line") or start
        if any(start - window <= ln <= end + window for ln in lines):
            out.append(f)
    return out


def matching_findings(findings: list[dict], sites: list[dict], codes: list[str], window: int) -> list[dict]:
    """Findings of an expected code within ``window`` lines of a labelled line of a labelled file."""
    return _near(findings, sites, window, lambda code: code_matches(code, codes))


def near_other_codes(findings: list[dict], sites: list[dict], codes: list[str], window: int) -> list[dict]:
    """Findings near the labelled lines whose code is NOT expected (diagnosis only, never counted)."""
    return _near(findings, sites, window, lambda code: not code_matches(code, codes))


def map_lines(old_text: str, new_text: str, lines: list[int]) -> list[int]:
    """Carry 1-based ``lines`` of ``old_text`` over to ``new_text``.

    An unchanged line maps to its new position; a replaced or deleted line maps to the start of
    what replaced it (or the line after the deletion), so a finding that the fix moved a few lines
    still counts as the same site.
    """
    a = old_text.splitlines()
    b = new_text.splitlines()
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    out = []
    for ln in lines:
        i = ln - 1
        for tag, i1, i2, j1, j2 in ops:
            if i1 <= i < i2 or (i1 == i2 == i):
                if tag == "equal":
                    out.append(j1 + (i - i1) + 1)
                else:
                    out.append(min(j1, max(len(b) - 1, 0)) + 1)
                break
        else:
            out.append(len(b))
    return out


def _norm(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


# --------------------------------------------------------------------------- trees and runs

def mirror_of(repo: str, mirror_root: Path) -> Path:
    return mirror_root / repo.replace("/", "+") / "repo"


def tree_for(repo: str, commit: str, mirror_root: Path, scratch: Path) -> Path:
    """Export ``commit`` of ``repo`` once under ``scratch`` (stamped; reused when already there)."""
    dest = scratch / f"{repo.split('/', 1)[1]}-{commit[:12]}"
    stamp = dest / ".recall-commit"
    if stamp.is_file() and stamp.read_text().strip() == commit:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    missing = export_tree(mirror_of(repo, mirror_root), commit, dest)
    if missing:
        (dest / ".recall-missing").write_text("".join(p + "\n" for p in missing))
    stamp.write_text(commit + "\n")
    return dest


def run_dslint(folder: Path, scope: str, timeout: float) -> dict:
    return dslint_json(folder, [scope], timeout, {"scope": scope})


class Runner:
    """One dslint run per (commit, scope), shared by the cases that need it."""

    def __init__(self, mirror_root: Path, scratch: Path, timeout: float):
        self.mirror_root, self.scratch, self.timeout = mirror_root, scratch, timeout
        self.runs: dict[tuple[str, str], dict] = {}

    def report(self, repo: str, commit: str, fallback_scope: str) -> tuple[Path, dict]:
        folder = tree_for(repo, commit, self.mirror_root, self.scratch)
        key = (commit, ".")
        if key not in self.runs:
            self.runs[key] = run_dslint(folder, ".", self.timeout)
        run = self.runs[key]
        if run["report"] is None and fallback_scope not in ("", "."):
            key = (commit, fallback_scope)
            if key not in self.runs:
                self.runs[key] = run_dslint(folder, fallback_scope, self.timeout)
            run = self.runs[key]
        return folder, run


# --------------------------------------------------------------------------- one case

def slim(f: dict) -> dict:
    return {k: f.get(k) for k in ("code", "path", "line", "message")}


def evaluate(case: dict, runner: Runner) -> dict:
    codes, sites = case["codes"], case["sites"]
    window = case.get("window", DEFAULT_WINDOW)
    fallback = str(Path(sites[0]["path"]).parent) or "."
    result = {"id": case["id"], "repo": case["repo"], "codes": codes, "family": family(codes),
              "fix": case["fix"], "parent": case["parent"], "reason": case["reason"], "ref": case.get("ref", "")}

    folder, run = runner.report(case["repo"], case["parent"], fallback)
    result["parent_run"] = {k: run[k] for k in ("scope", "seconds", "timed_out", "returncode")}
    findings = (run["report"] or {}).get("findings", [])
    paths = {_norm(s["path"]) for s in sites}
    result["parent_findings_in_files"] = [slim(f) for f in findings if _norm(f.get("path", "")) in paths]
    hits = matching_findings(findings, sites, codes, window)
    result["found"] = bool(hits) if run["report"] is not None else None
    result["matched"] = [slim(f) for f in hits]
    result["near_other_codes"] = [slim(f) for f in near_other_codes(findings, sites, codes, window)]

    # The fix: carry the labelled lines over and look again.
    fix_folder, fix_run = runner.report(case["repo"], case["fix"], fallback)
    result["fix_run"] = {k: fix_run[k] for k in ("scope", "seconds", "timed_out", "returncode")}
    fix_sites = []
    for s in sites:
        old, new = folder / s["path"], fix_folder / s["path"]
        if not new.is_file():
            continue  # the fix removed the file: nothing there to flag
        mapped = map_lines(old.read_text(errors="replace"), new.read_text(errors="replace"), s["lines"])
        fix_sites.append({"path": s["path"], "lines": mapped})
    result["fix_sites"] = fix_sites
    fix_findings = (fix_run["report"] or {}).get("findings", [])
    fix_paths = {_norm(s["path"]) for s in fix_sites}
    result["fix_findings_in_files"] = [slim(f) for f in fix_findings if _norm(f.get("path", "")) in fix_paths]
    fix_hits = matching_findings(fix_findings, fix_sites, codes, window)
    result["fix_matched"] = [slim(f) for f in fix_hits]
    if fix_run["report"] is None:
        result["gone_after_fix"] = None
    elif result["found"]:
        result["gone_after_fix"] = not fix_hits
    else:
        result["gone_after_fix"] = None  # nothing to lose
    result["fix_flags_site"] = bool(fix_hits) if fix_run["report"] is not None else None
    return result


def summarise(results: list[dict]) -> dict:
    scored = [r for r in results if r["found"] is not None]
    by_family: dict[str, list[int]] = {}
    for r in scored:
        row = by_family.setdefault(r["family"], [0, 0])
        row[0] += bool(r["found"])
        row[1] += 1
    by_code: dict[str, list[int]] = {}
    for r in scored:
        row = by_code.setdefault(r["codes"][0], [0, 0])
        row[0] += bool(r["found"])
        row[1] += 1
    found = sum(bool(r["found"]) for r in scored)
    gone = [r["gone_after_fix"] for r in scored if r["found"]]
    return {
        "cases": len(results), "scored": len(scored), "found": found,
        "recall": round(found / len(scored), 3) if scored else None,
        "per_family": {k: {"found": v[0], "cases": v[1], "recall": round(v[0] / v[1], 3)}
                       for k, v in sorted(by_family.items())},
        "per_code": {k: {"found": v[0], "cases": v[1]} for k, v in sorted(by_code.items())},
        "found_and_gone_after_fix": sum(1 for g in gone if g),
        "found_and_still_flagged_after_fix": sum(1 for g in gone if g is False),
        "fix_tree_flags_site_though_parent_missed": sum(1 for r in scored if not r["found"] and r["fix_flags_site"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, default=HERE / "hangs.json")
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/recall-trees"))
    ap.add_argument("--results", type=Path, default=HERE / "results-recall")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per dslint run (default 300)")
    ap.add_argument("ids", nargs="*", help="only these case ids")
    args = ap.parse_args(argv)
    cases = json.loads(args.manifest.read_text())["cases"]
    if args.ids:
        cases = [c for c in cases if c["id"] in args.ids]
    missing = sorted({c["repo"] for c in cases if not mirror_of(c["repo"], args.mirror_root).is_dir()})
    for repo in missing:
        print(f"{repo}: no mirror under {args.mirror_root} -- fetch github:{repo} first; its cases are skipped",
              file=sys.stderr)
    cases = [c for c in cases if c["repo"] not in missing]
    runner = Runner(args.mirror_root, args.scratch, args.timeout)
    results = []
    print(f"{'case':34} {'codes':20} {'found':6} {'fix':8} dslint near the site")
    for case in cases:
        r = evaluate(case, runner)
        results.append(r)
        found = {True: "FOUND", False: "miss", None: "n/a"}[r["found"]]
        fix = {True: "gone", False: "stays", None: "-"}[r["gone_after_fix"]]
        near = ", ".join(f"{f['code']}@{f['line']}" for f in r["matched"] + r["near_other_codes"]) or "-"
        print(f"{r['id']:34} {','.join(r['codes']):20} {found:6} {fix:8} {near}", flush=True)
    summary = summarise(results)
    print(json.dumps(summary, indent=1))
    args.results.mkdir(parents=True, exist_ok=True)
    runs = [{"commit": c, "scope": s, **{k: v for k, v in run.items() if k != "report"},
             "findings": len((run["report"] or {}).get("findings", []))} for (c, s), run in runner.runs.items()]
    out = {"manifest": str(args.manifest.relative_to(ROOT)) if args.manifest.is_relative_to(ROOT) else str(args.manifest),
           "summary": summary, "cases": results, "runs": runs}
    (args.results / "recall.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
