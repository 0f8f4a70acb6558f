"""The corpus precision report (bench/realworld/precision.py) on a small synthetic triage folder.

No mirror or corpus is needed: the triage files and results here are written under tmp_path.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "realworld"


def _load():
    spec = importlib.util.spec_from_file_location("bench_precision", BENCH / "precision.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_precision", module)
    spec.loader.exec_module(module)
    return module


precision = _load()

HEADER = "| path:line | code | sev | verdict | mech | reason |\n|---|---|---|---|---|---|\n"


def _triage(folder: Path, name: str, rows: list[str], text: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"# owner/{name}\n\n- commit: `abc`\n\nParagraph.\n\n{text}"
                                       + HEADER + "".join(r + "\n" for r in rows) + "\nMisses: none.\n")


def _results(folder: Path, name: str, findings: list[tuple], ) -> None:
    """`findings`: (path, line, code) or (path, line, code, proven) -- proven False as a --show-unproven run
    reports a finding hidden by default."""
    folder.mkdir(parents=True, exist_ok=True)
    report = {"findings": [{"path": f[0], "line": f[1], "code": f[2], "proven": f[3] if len(f) > 3 else True}
                           for f in findings]}
    (folder / f"{name}.json").write_text(json.dumps({"repo": f"o/{name}", "report": report}))


def _run(capsys, *argv) -> str:
    assert precision.main(list(argv)) == 0
    return capsys.readouterr().out


def _row(out: str, first_cell: str, section: str) -> list[str]:
    body = out.split(f"### {section}", 1)[1].split("###", 1)[0]
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in {section}:\n{body}")


def test_per_rule_family_repo_and_mechanisms(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| a.py:10 | DSL101 | e | TP | — | rank 0 skips the gather |",
        "| a.py:20 | DSL101 | w | FP | uniform-after-broadcast | broadcast first | with a pipe |",
        "| b.json:3 | DSL401 | e | FP | json-kind-hf-args | HF arguments file |",
        "| c.py:5 | DSL103 | e | uncertain | — | depends on --flag |",
    ])
    _triage(triage, "beta", [
        "| x.json:1 | DSL401 | w | FP | json-kind-hf-args | another arguments file |",
        "| y.json:2 | DSL401 | e | TP | — | misspelled key |",
    ])
    _triage(triage, "gamma", [])  # a repository without a finding
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy")
    assert "3 repositories, 6 triaged findings, 1 repositories without a finding." in out
    assert _row(out, "DSL101", "Per rule") == ["DSL101", "2", "1", "1", "0", "50 %"]
    assert _row(out, "DSL401", "Per rule") == ["DSL401", "3", "1", "2", "0", "33 %"]
    assert _row(out, "DSL103", "Per rule") == ["DSL103", "1", "0", "0", "1", "–"]
    assert _row(out, "DSL1xx", "Per family") == ["DSL1xx", "3", "1", "1", "1", "50 %"]
    assert _row(out, "all", "Per family") == ["all", "6", "2", "3", "1", "40 %"]
    assert _row(out, "alpha", "Per repository") == ["alpha", "4", "1", "2", "1", "33 %"]
    assert _row(out, "gamma", "Per repository") == ["gamma", "0", "0", "0", "0", "–"]
    mech = _row(out, "json-kind-hf-args", "False-positive mechanisms")
    assert mech[:3] == ["json-kind-hf-args", "2", "DSL401"]
    assert _row(out, "uniform-after-broadcast", "False-positive mechanisms")[1] == "1"
    # the ranking: the mechanism with more FPs first
    assert out.index("| json-kind-hf-args |") < out.index("| uniform-after-broadcast |")
    assert "Parse problems" not in out


def test_parse_problems_are_reported(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| a.py:10 | DSL101 | e | maybe | — | not a verdict |",
        "| a.py:11 | DSL101 | e | FP | — | an FP needs a mechanism |",
    ])
    (triage / "broken.md").write_text("# o/broken\n\n| path | code |\n|---|---|\n| a.py:1 | DSL101 |\n")
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy")
    problems = out.split("### Parse problems", 1)[1]
    assert "verdict 'maybe'" in problems
    assert "FP without a mechanism" in problems
    assert "broken.md: no table" in problems


def test_legacy_rows_reconciled_with_results(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "new", ["| n.py:1 | DSL104 | e | TP | — | generate without synced_gpus |"])
    legacy = tmp_path / "triage.md"
    legacy.write_text(
        "# old triage\n\n| repo | path:line | code | sev | verdict | mech | reason |\n|---|---|---|---|---|---|---|\n"
        "| old | p.py:5 | DSL101 | e | TP | — | still reported |\n"
        "| old | p.py:9 | DSL101 | e | FP | M6 | fixed since: gone from results |\n"
        "\n## Totals\n\n| family | findings |\n|---|---|\n| DSL1xx | 2 |\n")
    results = tmp_path / "results"
    _results(results, "old", [("p.py", 5, "DSL101"), ("q.py", 7, "DSL102")])
    out = _run(capsys, "--triage-dir", str(triage), "--legacy", str(legacy), "--results", str(results))
    assert _row(out, "old", "Per repository") == ["old", "1", "1", "0", "0", "100 %"]
    assert _row(out, "all", "Per repository") == ["all", "2", "2", "0", "0", "100 %"]
    assert "- old q.py:7 DSL102" in out.split("### Untriaged findings", 1)[1]
    history = out.split("### Triaged rows no longer reported (history, not counted)", 1)[1].split("###", 1)[0]
    assert "FP gone: 1" in history and "- old p.py:9 DSL101 (M6)" in history
    assert "(none) | 0" in out  # the dropped FP's mechanism is not counted


def test_every_row_matched_against_the_committed_results(tmp_path, capsys):
    """Rows of the triage folder are matched like the legacy ones: a row whose finding results/ no longer reports
    is history (listed, not counted); a second row for one finding is a parse problem."""
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| a.py:10 | DSL101 | e | TP | — | rank 0 skips the gather |",
        "| a.py:20 | DSL101 | w | FP | uniform-after-broadcast | broadcast first |",
        "| a.py:10 | DSL101 | e | FP | twice | the same finding again |",
    ])
    _triage(triage, "beta", ["| b.py:1 | DSL103 | e | FP | cosmetic-kwarg-taint | no results file |"])
    results = tmp_path / "results"
    _results(results, "alpha", [("a.py", 10, "DSL101"), ("n.py", 3, "DSL104")])
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--results", str(results))
    assert _row(out, "alpha", "Per repository") == ["alpha", "1", "1", "0", "0", "100 %"]
    assert _row(out, "beta", "Per repository") == ["beta", "1", "0", "1", "0", "0 %"]  # unchecked, counted
    history = out.split("### Triaged rows no longer reported (history, not counted)", 1)[1].split("###", 1)[0]
    assert "- alpha a.py:20 DSL101 (uniform-after-broadcast)" in history
    assert "- alpha n.py:3 DSL104" in out.split("### Untriaged findings", 1)[1]
    assert "a second row for alpha a.py:10 DSL101" in out.split("### Parse problems", 1)[1]
    assert "beta: no results/beta.json, its 1 row(s) counted unchecked" in out
    # a run that timed out reports nothing: its rows stay unchecked, not gone
    (results / "beta.json").write_text(json.dumps({"repo": "o/beta", "timed_out": True, "report": None}))
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--results", str(results))
    assert _row(out, "beta", "Per repository") == ["beta", "1", "0", "1", "0", "0 %"]
    assert "beta: timed out or crashed in results/beta.json, its 1 row(s) counted unchecked" in out
    (results / "beta.json").unlink()
    # --after: gone is measured from results/, history rows stay out of it, a history row reported again counts
    after = tmp_path / "after"
    _results(after, "alpha", [("a.py", 20, "DSL101")])
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--results", str(results), "--after", str(after))
    gone = out.split("### Triaged findings no longer reported (--after)", 1)[1].split("###", 1)[0]
    assert "TP gone: 1" in gone and "alpha a.py:10 DSL101 (TP)" in gone and "a.py:20" not in gone
    assert _row(out, "alpha", "Per repository") == ["alpha", "1", "0", "1", "0", "0 %"]
    assert "1 reported there but not in results/" in out
    # a repository the --after run timed out on is counted as results/ has it, not as all reported or all gone
    (after / "alpha.json").write_text(json.dumps({"repo": "o/alpha", "timed_out": True, "report": None}))
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--results", str(results), "--after", str(after))
    assert _row(out, "alpha", "Per repository") == ["alpha", "1", "1", "0", "0", "100 %"]
    assert "alpha: timed out or crashed in after/alpha.json, counted as in results/" in out
    assert "Triaged findings no longer reported (--after)" not in out


def test_exclude_leaves_out_a_vendored_subtree(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| lib/vendored/x.py:1 | DSL101 | e | FP | vendored | the vendored copy |",
        "| lib/vendored/y.json:2 | DSL403 | e | FP | vendored | the vendored copy's test |",
        "| src/train.py:3 | DSL101 | e | TP | — | the repository's own code |",
    ])
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--exclude", "alpha:lib/vendored/")
    assert _row(out, "alpha", "Per repository") == ["alpha", "1", "1", "0", "0", "100 %"]
    assert "excluded 2 row(s) of alpha under 'lib/vendored/'" in out
    assert "| vendored |" not in out


def test_after_counts_rows_still_reported_and_lists_gone_and_untriaged(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| a.py:10 | DSL101 | e | TP | — | rank 0 skips the gather |",
        "| a.py:20 | DSL101 | w | FP | uniform-after-broadcast | broadcast first |",
        "| b.json:3 | DSL401 | e | FP | json-kind-hf-args | HF arguments file |",
    ])
    after = tmp_path / "after"
    # the change removed both FPs and kept the TP, and reports one new finding
    _results(after, "alpha", [("a.py", 10, "DSL101"), ("c.py", 7, "DSL103")])
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--after", str(after))
    assert _row(out, "DSL101", "Per rule") == ["DSL101", "1", "1", "0", "0", "100 %"]
    assert _row(out, "all", "Per family") == ["all", "1", "1", "0", "0", "100 %"]
    gone = out.split("### Triaged findings no longer reported", 1)[1].split("###", 1)[0]
    assert "FP gone: 2" in gone and "TP gone" not in gone
    assert "alpha b.json:3 DSL401 (json-kind-hf-args)" in gone
    assert "- alpha c.py:7 DSL103" in out.split("### Untriaged findings", 1)[1]
    # a TP the change lost is listed as such
    _results(after, "alpha", [])
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--after", str(after))
    assert "TP gone: 1" in out and "alpha a.py:10 DSL101 (TP)" in out


def test_unproven_findings_of_a_show_unproven_run_are_counted_apart(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| a.py:10 | DSL101 | e | TP | — | rank 0 skips the gather |",
        "| a.py:20 | DSL101 | w | FP | launcher-single-gpu-include | one process |",
        "| a.py:30 | DSL103 | e | uncertain | — | run option |",
    ])
    after = tmp_path / "after"
    # a --show-unproven run: the FP and the uncertain row are reported unproven (hidden by default), plus an
    # untriaged unproven finding
    _results(after, "alpha", [("a.py", 10, "DSL101"), ("a.py", 20, "DSL101", False), ("a.py", 30, "DSL103", False),
                              ("d.py", 5, "DSL104", False)])
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--after", str(after))
    # the default view: only the TP is shown
    assert _row(out, "DSL101", "Per rule") == ["DSL101", "1", "1", "0", "0", "100 %"]
    hidden = out.split("### Hidden by default", 1)[1].split("### ", 1)[0]
    assert _row(out, "DSL101", "Hidden by default") == ["DSL101", "1", "0", "1", "0", "0 %"]
    assert "FP hidden: 1" in hidden and "uncertain hidden: 1" in hidden and "TP hidden" not in hidden
    assert "- alpha d.py:5 DSL104" in hidden and "Untriaged findings" not in out
    assert "Triaged findings no longer reported" not in out      # hidden is not gone
    # --count-unproven: the --show-unproven view counts them like the shown ones
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--after", str(after), "--count-unproven")
    assert _row(out, "DSL101", "Per rule") == ["DSL101", "2", "1", "1", "0", "50 %"]
    assert "### Hidden by default" not in out and "- alpha d.py:5 DSL104" in out.split("### Untriaged", 1)[1]


def test_stamp_writes_each_files_reconcile_line(tmp_path, capsys):
    triage = tmp_path / "triage"
    _triage(triage, "alpha", [
        "| a.py:10 | DSL101 | e | TP | — | rank 0 skips the gather |",
        "| a.py:20 | DSL101 | w | FP | uniform-after-broadcast | broadcast first |",
    ])
    results = tmp_path / "results"
    _results(results, "alpha", [("a.py", 10, "DSL101"), ("n.py", 3, "DSL104")])
    for _ in range(2):  # written once, replaced on the next stamp
        out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--results", str(results), "--stamp", "abc1234")
    assert "--stamp abc1234: reconcile line written in 1 triage file(s)" in out
    lines = (triage / "alpha.md").read_text().splitlines()
    stamped = [l for l in lines if l.startswith("- rows reconciled with ")]
    assert stamped == ["- rows reconciled with `bench/realworld/results/alpha.json` at: dslint `abc1234` -- "
                       "2 finding(s) reported, 1 triaged row(s) reported, 1 UNTRIAGED, 1 row(s) kept for history "
                       "(no longer reported); None files, None s"]
    assert lines.index(stamped[0]) == lines.index("- commit: `abc`") + 1
    # the table is untouched: the rows still parse
    out = _run(capsys, "--triage-dir", str(triage), "--no-legacy", "--results", str(results))
    assert _row(out, "alpha", "Per repository") == ["alpha", "1", "1", "0", "0", "100 %"]
