"""Per-rule precision of dslint over the triaged development corpus, as markdown.

Reads every ``bench/realworld/triage/<name>.md`` (one repository each: a ``# owner/name`` title and one or more
tables with exactly the columns ``| path:line | code | sev | verdict | mech | reason |``, one row per finding) and,
unless ``--no-legacy``, the rows of ``bench/realworld/triage.md`` (tables with the columns ``| repo | path:line |
code | sev | verdict | mech | reason |``) for the repositories that have no file of their own in the triage folder.
Verdicts: ``TP``, ``FP``, ``uncertain`` (anything else is reported as a parse problem); an FP names its mechanism.
Precision is TP / (TP + FP); uncertain rows count as findings but in neither term.

What is counted is what dslint reports now: every row is matched, as (path, line, code), against the committed
run ``bench/realworld/results/<repo>.json`` (``--results``). A row whose finding is reported there is counted; a
row whose finding is no longer reported is kept in its file for history and listed under "Triaged rows no longer
reported" by verdict, not counted; a finding of the results that no row triages is listed as untriaged (to
triage). A repository without a results file, or whose run timed out or crashed (no report), keeps its rows
unchecked (counted as reported, with a note). Each triage file's header says at which dslint commit its rows were
last reconciled with results/.

    python bench/realworld/precision.py [--triage-dir D] [--legacy triage.md | --no-legacy] [--results R]
                                        [--exclude REPO:PATH_PREFIX ...] [--after DIR] [--stamp COMMIT]

``--exclude`` leaves out the rows of one repository under a path prefix (e.g. a vendored library:
``--exclude DynMoE:DeepSpeed-0.9.5/``), counted in the notes.

``--after DIR`` measures another run (``run.py --results DIR``, e.g. dslint after a change) against the verdicts:
the rows whose finding DIR reports are counted; the rows reported in results/ but not in DIR are listed by verdict
(a TP gone is a lost true positive, an FP gone a false positive removed), and DIR's findings that no row triages
are listed as untriaged (to triage before the figures are final). A repository DIR has no report for (missing,
timed out, crashed) is counted as results/ has it, with a note.

    python bench/realworld/precision.py --after /tmp/rw-after

Findings hidden by default: dslint leaves out a finding whose evidence is incomplete (``"proven": false``)
unless ``--show-unproven``; a run made with it (``run.py --show-unproven``) reports them marked so. Their rows
are not counted in the tables (the tables are the default view: what a user sees at the root with default
options) but listed apart, per rule and by verdict, under "Hidden by default" (a TP there is a true hazard the
default view hides: each must be justified). ``--count-unproven`` counts them as shown instead (the
``--show-unproven`` view). A run made without the option has no unproven finding in it (the hidden ones are only
counted, ``report.hidden``).

``--stamp COMMIT`` writes each triage file's header line saying that its rows were reconciled with results/ at
dslint COMMIT (with the counts then): run it when results/ is replaced by a new run whose findings are triaged.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = ["path:line", "code", "sev", "verdict", "mech", "reason"]
LEGACY_COLUMNS = ["repo"] + COLUMNS
VERDICTS = ("TP", "FP", "uncertain")
NO_MECH = {"", "—", "-", "–"}


@dataclass(frozen=True)
class Row:
    repo: str  # the repository's short name (results/<repo>.json)
    path: str
    line: int | None
    code: str
    sev: str
    verdict: str
    mech: str
    reason: str
    source: str  # file:line of the row, for messages


def _cells(line: str) -> list[str] | None:
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")):
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def _split_site(site: str) -> tuple[str, int | None]:
    site = site.strip("`")
    path, sep, line = site.rpartition(":")
    if sep and line.isdigit():
        return path, int(line)
    return site, None


def _strip_md(text: str) -> str:
    return re.sub(r"[*`]", "", text).strip()


def parse_tables(text: str, columns: list[str], source: str, repo: str | None,
                 problems: list[str]) -> list[Row]:
    """Rows of every table in `text` whose header is exactly `columns`. `repo` names the repository when the
    table has no repo column."""
    rows: list[Row] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        header = _cells(lines[i])
        if header is not None and [h.lower() for h in header] == columns:
            i += 2  # header and the |---| rule
            while i < len(lines) and (cells := _cells(lines[i])) is not None:
                where = f"{source}:{i + 1}"
                if len(cells) < len(columns):
                    problems.append(f"{where}: {len(cells)} cells, expected {len(columns)}")
                    i += 1
                    continue
                if len(cells) > len(columns):  # a '|' inside the reason
                    cells = cells[:len(columns) - 1] + ["|".join(cells[len(columns) - 1:])]
                values = dict(zip(columns, cells))
                name = repo if repo is not None else _strip_md(values["repo"])
                path, line_no = _split_site(values["path:line"])
                verdict = _strip_md(values["verdict"])
                if verdict not in VERDICTS:
                    problems.append(f"{where}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
                mech = _strip_md(values["mech"])
                rows.append(Row(name, path, line_no, _strip_md(values["code"]), _strip_md(values["sev"]),
                                verdict, "" if mech in NO_MECH else mech, values["reason"], where))
                i += 1
            continue
        i += 1
    return rows


def read_triage_dir(folder: Path, problems: list[str]) -> tuple[list[Row], list[str]]:
    """Rows of every <name>.md in `folder` and the names of the repositories it holds (zero-finding ones too)."""
    rows: list[Row] = []
    repos: list[str] = []
    for md in sorted(folder.glob("*.md")):
        name = md.stem
        repos.append(name)
        text = md.read_text()
        found = parse_tables(text, COLUMNS, str(md.name), name, problems)
        if not found and not any(_cells(l) and [c.lower() for c in _cells(l)] == COLUMNS
                                 for l in text.splitlines()):
            problems.append(f"{md.name}: no table with the columns | {' | '.join(COLUMNS)} |")
        for row in found:
            if row.verdict == "FP" and not row.mech:
                problems.append(f"{row.source}: FP without a mechanism")
        rows.extend(found)
    return rows, repos


def _findings(results: Path, repo: str) -> dict[tuple[str, int, str], bool] | None:
    """(path, line, code) -> proven, of every finding the run reports (unproven ones only in a run made with
    --show-unproven); None when the run has no report for `repo`."""
    path = results / f"{repo}.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    report = record.get("report")
    if not isinstance(report, dict):  # a timeout or a crash: this run says nothing about the findings
        return None
    out: dict[tuple[str, int, str], bool] = {}
    for f in report.get("findings", []):
        key = (f.get("path", ""), f.get("line"), f.get("code", ""))
        out[key] = out.get(key, False) or f.get("proven", True) is not False
    return out


@dataclass
class Matched:
    """Rows matched against one run: the rows it reports, the rows it no longer reports, its untriaged
    findings, and the repositories it has no results file for (their rows count as reported, unchecked); with
    `hidden_apart`, the rows (and untriaged findings) it reports as unproven -- hidden by default -- apart."""
    reported: list[Row]
    gone: list[Row]
    untriaged: list[tuple[str, str, int, str]]
    unchecked: list[str]
    duplicates: list[Row]
    hidden: list[Row] = field(default_factory=list)
    hidden_untriaged: list[tuple[str, str, int, str]] = field(default_factory=list)


def match(rows: list[Row], results: Path, repos: list[str], hidden_apart: bool = True) -> Matched:
    """Match every row, as (path, line, code), against ``results/<repo>.json``. With `hidden_apart` a row whose
    finding is reported unproven goes to `hidden`, not `reported`."""
    out = Matched([], [], [], [], [])
    for repo in repos:
        current = _findings(results, repo)
        mine = [r for r in rows if r.repo == repo]
        if current is None:
            if mine:
                out.unchecked.append(repo)
            out.reported.extend(mine)
            continue
        seen: set[tuple[str, int | None, str]] = set()
        for r in mine:
            key = (r.path, r.line, r.code)
            if key in seen:
                out.duplicates.append(r)
            elif key in current:
                (out.reported if current[key] or not hidden_apart else out.hidden).append(r)
                seen.add(key)
            else:
                out.gone.append(r)
        for p, l, c in sorted(set(current) - seen, key=str):
            (out.untriaged if current[(p, l, c)] or not hidden_apart else out.hidden_untriaged).append((repo, p, l, c))
    return out


def _unchecked_note(matched: Matched, results: Path, rows: list[Row]) -> list[str]:
    notes = []
    for repo in matched.unchecked:
        why = "timed out or crashed in" if (results / f"{repo}.json").is_file() else "no"
        notes.append(f"{repo}: {why} {results.name}/{repo}.json, its {sum(r.repo == repo for r in rows)} row(s) "
                     f"counted unchecked")
    return notes


def _pct(tp: int, fp: int) -> str:
    return f"{100 * tp / (tp + fp):.0f} %" if tp + fp else "–"


def _table(title: str, key_name: str, groups: dict[str, Counter]) -> list[str]:
    out = [f"### {title}", "", f"| {key_name} | findings | TP | FP | uncertain | precision TP/(TP+FP) |",
           "|---|---|---|---|---|---|"]
    total: Counter = Counter()
    for key in sorted(groups):
        c = groups[key]
        total.update(c)
        out.append(f"| {key} | {c['n']} | {c['TP']} | {c['FP']} | {c['uncertain']} | {_pct(c['TP'], c['FP'])} |")
    out.append(f"| all | {total['n']} | {total['TP']} | {total['FP']} | {total['uncertain']} | "
               f"{_pct(total['TP'], total['FP'])} |")
    return out + [""]


def _by_verdict(rows: list[Row]) -> list[str]:
    out: list[str] = []
    for verdict in VERDICTS:
        items = [r for r in rows if r.verdict == verdict]
        if items:
            out += [f"{verdict} gone: {len(items)}", ""]
            out += [f"- {r.repo} {r.path}:{r.line} {r.code} ({r.mech or r.verdict})" for r in items] + [""]
    return out


def render(rows: list[Row], repos: list[str], untriaged: list[tuple[str, str, int, str]],
           notes: list[str], problems: list[str], gone: list[Row] = (), history: list[Row] = (),
           where: str = "results/", hidden: list[Row] = (),
           hidden_untriaged: list[tuple[str, str, int, str]] = ()) -> str:
    by_rule: dict[str, Counter] = defaultdict(Counter)
    by_family: dict[str, Counter] = defaultdict(Counter)
    by_repo: dict[str, Counter] = {repo: Counter() for repo in repos}
    mechs: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        family = r.code[:4] + "xx" if re.fullmatch(r"DSL\d{3}", r.code) else "other"
        for group in (by_rule[r.code], by_family[family], by_repo.setdefault(r.repo, Counter())):
            group["n"] += 1
            group[r.verdict] += 1
        if r.verdict == "FP":
            mechs[r.mech or "(none given)"].append(r)
    out = ["## Precision over the triaged corpus", "",
           f"{len(by_repo)} repositories, {len(rows)} triaged findings, "
           f"{sum(1 for c in by_repo.values() if not c['n'])} repositories without a finding.", ""]
    out += _table("Per rule", "rule", by_rule)
    out += _table("Per family", "family", by_family)
    out += _table("Per repository", "repository", by_repo)
    out += ["### False-positive mechanisms", "", "| mechanism | FPs | rules | example |", "|---|---|---|---|"]
    for mech, items in sorted(mechs.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rules = ", ".join(sorted({r.code for r in items}))
        first = items[0]
        out.append(f"| {mech} | {len(items)} | {rules} | {first.repo} {first.path}:{first.line} |")
    if not mechs:
        out.append("| (none) | 0 | – | – |")
    out.append("")
    if hidden or hidden_untriaged:
        per_rule: dict[str, Counter] = defaultdict(Counter)
        for r in hidden:
            per_rule[r.code]["n"] += 1
            per_rule[r.code][r.verdict] += 1
        out += ["### Hidden by default (unproven: evidence incomplete, shown with --show-unproven)", "",
                "Rows the run reports as unproven: not counted above (the default view leaves them out).", ""]
        out += _table("Hidden by default, per rule", "rule", per_rule)[2:]
        for verdict in VERDICTS:
            items = [r for r in hidden if r.verdict == verdict]
            if items:
                out += [f"{verdict} hidden: {len(items)}", ""]
                out += [f"- {r.repo} {r.path}:{r.line} {r.code} ({r.mech or r.verdict})" for r in items] + [""]
        if hidden_untriaged:
            out += [f"untriaged hidden: {len(hidden_untriaged)}", ""]
            out += [f"- {repo} {path}:{line} {code}" for repo, path, line, code in hidden_untriaged] + [""]
    if gone:
        out += ["### Triaged findings no longer reported (--after)", "",
                "Rows reported in results/ that the --after run no longer reports.", ""]
        out += _by_verdict(gone)
    if history:
        out += ["### Triaged rows no longer reported (history, not counted)", "",
                "Rows kept in the triage files for history whose finding the measured run no longer reports.", ""]
        out += _by_verdict(history)
    if untriaged:
        out += [f"### Untriaged findings (in {where}, no triage row)", ""]
        out += [f"- {repo} {path}:{line} {code}" for repo, path, line, code in untriaged] + [""]
    if notes:
        out += ["### Notes", ""] + [f"- {n}" for n in notes] + [""]
    if problems:
        out += ["### Parse problems", ""] + [f"- {p}" for p in problems] + [""]
    return "\n".join(out)


RECONCILE_PREFIX = "- rows reconciled with "


def stamp_headers(folder: Path, results: Path, commit: str, matched: Matched, repos: list[str]) -> int:
    """Write each triage file's reconcile line (after its `- commit:` line): the dslint commit of results/ and the
    counts then. Returns the number of files written."""
    written = 0
    for repo in repos:
        md = folder / f"{repo}.md"
        rec_path = results / f"{repo}.json"
        if not md.is_file() or not rec_path.is_file():
            continue
        record = json.loads(rec_path.read_text())
        report = record.get("report")
        if not isinstance(report, dict):
            continue
        reported = sum(r.repo == repo for r in matched.reported)
        gone = sum(r.repo == repo for r in matched.gone)
        untriaged = sum(u[0] == repo for u in matched.untriaged)
        hidden = report.get("hidden") or 0
        line = (f"{RECONCILE_PREFIX}`bench/realworld/{results.name}/{repo}.json` at: dslint `{commit}` -- "
                f"{len(report.get('findings', []))} finding(s) reported, {reported} triaged row(s) reported"
                + (f", {untriaged} UNTRIAGED" if untriaged else "")
                + (f", {gone} row(s) kept for history (no longer reported)" if gone else "")
                + (f"; {hidden} finding(s) hidden by default (evidence incomplete, `--show-unproven`)" if hidden else "")
                + f"; {report.get('files_checked')} files, {record.get('seconds')} s")
        lines = [l for l in md.read_text().splitlines() if not l.startswith(RECONCILE_PREFIX)]
        at = next((i for i, l in enumerate(lines) if l.startswith("- commit:")), None)
        if at is None:
            continue
        at += 1
        while at < len(lines) and lines[at].startswith("- triaged at"):
            at += 1
        lines.insert(at, line)
        md.write_text("\n".join(lines) + "\n")
        written += 1
    return written


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(HERE.parent.parent))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--triage-dir", type=Path, default=HERE / "triage")
    ap.add_argument("--legacy", type=Path, default=HERE / "triage.md",
                    help="triage.md of the first eight repositories (its repo-column tables)")
    ap.add_argument("--no-legacy", action="store_true", help="read only --triage-dir")
    ap.add_argument("--results", type=Path, default=HERE / "results",
                    help="the committed run, results/<repo>.json: a row counts when its finding is reported there")
    ap.add_argument("--after", type=Path, default=None, metavar="DIR",
                    help="a later run's results (run.py --results DIR): count the rows it still reports, list the "
                         "rows gone and its untriaged findings")
    ap.add_argument("--exclude", action="append", default=[], metavar="REPO:PATH_PREFIX",
                    help="leave out the rows of REPO whose path starts with PATH_PREFIX (repeatable)")
    ap.add_argument("--stamp", metavar="COMMIT", default=None,
                    help="write each triage file's reconcile line: results/ is dslint COMMIT's run (after triaging "
                         "its new findings)")
    ap.add_argument("--count-unproven", action="store_true",
                    help="count the findings a --show-unproven run reports as unproven like the shown ones (the "
                         "--show-unproven view); default: list them apart as hidden by default")
    args = ap.parse_args(argv)
    apart = not args.count_unproven
    excludes = []
    for spec in args.exclude:
        repo, sep, prefix = spec.partition(":")
        if not sep or not repo:
            ap.error(f"--exclude takes REPO:PATH_PREFIX, got {spec!r}")
        excludes.append((repo, prefix))
    problems: list[str] = []
    notes: list[str] = []
    rows, repos = read_triage_dir(args.triage_dir, problems) if args.triage_dir.is_dir() else ([], [])
    if not args.no_legacy and args.legacy.is_file():
        legacy = parse_tables(args.legacy.read_text(), LEGACY_COLUMNS, args.legacy.name, None, problems)
        legacy_repos = [r for r in dict.fromkeys(row.repo for row in legacy) if r not in repos]
        legacy = [row for row in legacy if row.repo in legacy_repos]
        if legacy:
            notes.append(f"{args.legacy.name}: {len(legacy)} row(s) of {len(legacy_repos)} repositories "
                         f"without a triage file")
        rows += legacy
        repos += legacy_repos
    base = match(rows, args.results, repos, apart)
    notes += _unchecked_note(base, args.results, rows)
    if args.stamp:
        n = stamp_headers(args.triage_dir, args.results, args.stamp, base, repos)
        notes.append(f"--stamp {args.stamp}: reconcile line written in {n} triage file(s)")
    gone: list[Row] = []
    where = f"{args.results.name}/"
    if args.after is None:
        counted, history, untriaged = base.reported, base.gone, base.untriaged
        hidden, hidden_untriaged = base.hidden, base.hidden_untriaged
        notes.insert(0, f"{_show(args.results)}: {len(counted)} triaged row(s) reported, {len(history)} no longer "
                        f"reported (history), {len(untriaged)} untriaged finding(s)")
        duplicates = base.duplicates
    else:
        after = match(rows, args.after, repos, apart)
        # a repository the --after run has no report for (missing, timed out, crashed) keeps results/'s matching
        fall = set(after.unchecked) - set(base.unchecked)
        if fall:
            after.reported = [r for r in after.reported if r.repo not in fall] + \
                [r for r in base.reported if r.repo in fall]
            after.gone = [r for r in after.gone if r.repo not in fall] + [r for r in base.gone if r.repo in fall]
            after.untriaged += [u for u in base.untriaged if u[0] in fall]
            after.hidden = [r for r in after.hidden if r.repo not in fall] + [r for r in base.hidden if r.repo in fall]
            for repo in sorted(fall):
                why = "timed out or crashed in" if (args.after / f"{repo}.json").is_file() else "no"
                notes.append(f"{repo}: {why} {args.after.name}/{repo}.json, counted as in {args.results.name}/")
        after.unchecked = [repo for repo in after.unchecked if repo not in fall]
        notes += _unchecked_note(after, args.after, rows)
        counted, untriaged, duplicates = after.reported, after.untriaged, after.duplicates
        in_base = {id(r) for r in base.reported}
        in_after = {id(r) for r in after.reported} | {id(r) for r in after.hidden}
        gone = [r for r in base.reported if id(r) not in in_after]
        hidden, hidden_untriaged = after.hidden, after.hidden_untriaged
        back = [r for r in after.reported if id(r) not in in_base]
        history = [r for r in after.gone if id(r) not in in_base]
        where = f"{args.after}"
        notes.insert(0, f"--after {args.after}: {len(counted)} triaged row(s) still reported, {len(gone)} gone "
                        f"since {args.results.name}/, {len(back)} reported there but not in {args.results.name}/ "
                        f"(rows triaged ahead, or findings back), {len(untriaged)} untriaged finding(s)"
                        + (f"; {len(hidden)} triaged row(s) and {len(hidden_untriaged)} untriaged finding(s) "
                           f"reported unproven (hidden by default, listed apart)" if hidden or hidden_untriaged
                           else ""))
    for r in duplicates:
        problems.append(f"{r.source}: a second row for {r.repo} {r.path}:{r.line} {r.code} (not counted)")
    rows = counted
    for repo, prefix in excludes:
        keep = lambda r: not (r.repo == repo and r.path.startswith(prefix))  # noqa: E731
        left = [r for r in rows if keep(r)]
        notes.append(f"excluded {len(rows) - len(left)} row(s) of {repo} under {prefix!r}")
        rows = left
        gone = [r for r in gone if keep(r)]
        history = [r for r in history if keep(r)]
        hidden = [r for r in hidden if keep(r)]
        hidden_untriaged = [u for u in hidden_untriaged if not (u[0] == repo and u[1].startswith(prefix))]
        untriaged = [u for u in untriaged if not (u[0] == repo and u[1].startswith(prefix))]
    print(render(rows, repos, untriaged, notes, problems, gone, history, where, hidden, hidden_untriaged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
