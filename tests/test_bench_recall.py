"""The recall benchmark's bookkeeping (bench/realworld/recall.py): matching, line carry-over, manifest.

No mirror is needed: the reports here are synthetic, shaped like `dslint check --format json`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "realworld"


def _load():
    spec = importlib.util.spec_from_file_location("bench_recall", BENCH / "recall.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_recall", module)
    spec.loader.exec_module(module)
    return module


recall = _load()

SITES = [{"path": "pkg/trainer.py", "lines": [100, 140]}]


def _finding(code, path, line, end_line=None):
    return {"code": code, "path": path, "line": line, "end_line": end_line or line, "message": "m"}


def test_a_finding_of_an_expected_code_near_a_labelled_line_counts():
    findings = [_finding("DSL101", "pkg/trainer.py", 102)]
    assert recall.matching_findings(findings, SITES, ["DSL101"], 3) == findings


def test_window_code_and_file_each_decide():
    far = _finding("DSL101", "pkg/trainer.py", 104)            # 4 lines away, window 3
    other_code = _finding("DSL104", "pkg/trainer.py", 100)     # right line, code not expected
    other_file = _finding("DSL101", "pkg/other.py", 100)       # right line and code, other file
    findings = [far, other_code, other_file]
    assert recall.matching_findings(findings, SITES, ["DSL101"], 3) == []
    assert recall.matching_findings(findings, SITES, ["DSL101"], 4) == [far]
    assert recall.near_other_codes(findings, SITES, ["DSL101"], 3) == [other_code]


def test_a_multi_line_finding_counts_by_its_span_and_paths_are_normalised():
    span = _finding("DSL102", "./pkg/trainer.py", 130, end_line=138)   # ends 2 lines before 140
    assert recall.matching_findings([span], SITES, ["DSL102"], 3) == [span]


def test_codes_match_exactly_or_by_family_prefix():
    assert recall.code_matches("DSL103", ["DSL101", "DSL103"])
    assert recall.code_matches("DSL105", ["DSL1"])
    assert not recall.code_matches("DSL206", ["DSL1"])
    assert not recall.code_matches("DSL101", ["DSL104"])
    assert recall.family(["DSL206", "DSL101"]) == "DSL2"


def test_labelled_lines_follow_the_fix_through_the_diff():
    old = "".join(f"line {i}\n" for i in range(1, 11))
    # the fix inserts two lines at the top and rewrites line 5
    new = "new a\nnew b\n" + old.replace("line 5\n", "fixed 5\n")
    assert recall.map_lines(old, new, [3, 5, 9]) == [5, 7, 11]
    # a deleted line maps to what follows the deletion
    assert recall.map_lines(old, old.replace("line 4\n", ""), [4, 6]) == [4, 5]


def test_summary_counts_recall_per_family_and_fix_outcomes():
    results = [
        {"family": "DSL1", "codes": ["DSL101"], "found": True, "gone_after_fix": True, "fix_flags_site": False},
        {"family": "DSL1", "codes": ["DSL101"], "found": True, "gone_after_fix": False, "fix_flags_site": True},
        {"family": "DSL1", "codes": ["DSL103", "DSL101"], "found": False, "gone_after_fix": None,
         "fix_flags_site": True},
        {"family": "DSL2", "codes": ["DSL206"], "found": False, "gone_after_fix": None, "fix_flags_site": False},
        {"family": "DSL2", "codes": ["DSL206"], "found": None, "gone_after_fix": None, "fix_flags_site": None},  # run failed
    ]
    summary = recall.summarise(results)
    assert (summary["scored"], summary["found"], summary["recall"]) == (4, 2, 0.5)
    assert summary["per_family"] == {"DSL1": {"found": 2, "cases": 3, "recall": 0.667},
                                     "DSL2": {"found": 0, "cases": 1, "recall": 0.0}}
    assert summary["per_code"] == {"DSL101": {"found": 2, "cases": 2}, "DSL103": {"found": 0, "cases": 1},
                                   "DSL206": {"found": 0, "cases": 1}}
    assert (summary["found_and_gone_after_fix"], summary["found_and_still_flagged_after_fix"],
            summary["fix_tree_flags_site_though_parent_missed"]) == (1, 1, 1)


def test_the_committed_manifest_is_well_formed():
    cases = json.loads((BENCH / "hangs.json").read_text())["cases"]
    assert 15 <= len(cases) <= 40
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    for c in cases:
        assert re.fullmatch(r"[0-9a-f]{40}", c["fix"]) and re.fullmatch(r"[0-9a-f]{40}", c["parent"]), c["id"]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", c["repo"]), c["id"]
        assert c["sites"] and all(s["path"].endswith(".py") and s["lines"] for s in c["sites"]), c["id"]
        assert all(re.fullmatch(r"DSL\d(\d\d)?", code) for code in c["codes"]), c["id"]
        assert c["reason"], c["id"]


def test_rejected_candidates_say_why_and_are_not_cases():
    manifest = json.loads((BENCH / "hangs.json").read_text())
    fixes = {c["fix"] for c in manifest["cases"]}
    for r in manifest.get("rejected", []):
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]) and r["why"], r
        assert r["commit"] not in fixes, r
