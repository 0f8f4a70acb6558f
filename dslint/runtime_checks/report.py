"""The pre-flight report: one JSON document (``--report FILE``) and its human rendering on rank 0."""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any

from dslint.runtime_checks import compare, diagnosis, loader_audit, static_link

VERDICT_TITLES = {
    "pass": "PASS: all ranks agree",
    "not_covered": "NOT FULLY COVERED: the ranks agreed on what ran, but part of the script never ran",
    "divergence": "DIVERGENCE: the ranks disagree",
    "hang": "HANG: a collective would never complete",
    "error": "ERROR: the script failed before its dry step ended",
}


def _count_table(per_rank: dict[int, dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[int]] = {}
    labels: dict[str, str] = {}
    for summary in per_rank.values():
        groups.update(summary.get("groups", {}))
        labels.update(summary.get("group_labels", {}))
    return {name: {"label": labels.get(name, f"group {name}"), "ranks": ranks,
                   "per_rank": {str(r): per_rank[r].get("counts", {}).get(name, 0) for r in ranks if r in per_rank}}
            for name, ranks in sorted(groups.items())}


def _where(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if not record:
        return None
    source = record.get("source")
    return {"op": record["op"], "group": record["group"], "seq": record["seq"], "ins": record["ins"],
            "outs": record["outs"], "splits": record.get("splits"), "module": record.get("module"),
            "phase": record.get("phase"), "async": record.get("async"), "on_stream": record.get("on_stream"),
            "p2p": record.get("p2p"), "params": record.get("params"), "params_from": record.get("params_from"),
            "source": _frame(source) if source else None,
            "user_stack": [_frame(f) for f in record.get("user_stack") or []]}


def _frame(frame: list[Any]) -> dict[str, Any]:
    return {"path": frame[0], "line": frame[1], "function": frame[2], "text": diagnosis.source_text(frame)}


def dry_run_end(ends: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """What ended the dry run, from the ranks' ``end`` records (``DrySession.end_info``): the lowest rank's, with
    ``covered`` False when any rank's run stopped before the script's end."""
    if not ends:
        return {}
    first = dict(ends[min(ends)])
    first["covered"] = all(e.get("covered") for e in ends.values())
    loop = next((e["unended_loop"] for e in ends.values() if e.get("unended_loop")), None)
    if loop:
        first["unended_loop"] = loop
    return first


def describe_end(end: dict[str, Any]) -> str:
    """One line: what ended the dry run (printed before the verdict)."""
    kind = end.get("kind")
    trunc = end.get("truncated")
    cut = ""
    if trunc:
        ended = trunc.get("loaders") or []
        what = "the loaders' epochs were" if any(e.get("loader") != "range" for e in ended) or not ended \
            else "the script's range loop was"
        cut = (f"{what} ended at optimizer step {trunc['step']} ({trunc['detail']}), "
               "then the script's code after its loops ran; ")
    if kind == "script-end":
        if not trunc:
            return f"dry run: ran the script to its end ({end.get('steps', 0)} optimizer steps)"
        return f"dry run: {cut}ended at the script's end ({end.get('steps', 0)} optimizer steps in all)"
    if kind == "steps":
        return (f"dry run: ended by --steps {end.get('steps_option')} at optimizer step {end.get('steps')}; the rest "
                "of the loop and the code after it were not run")
    if kind == "coverage":
        return (f"dry run: ended at optimizer step {end.get('steps')} by coverage (first epoch end of every audited "
                "loader; --continue: real training goes on from here)")
    if kind in ("max-steps", "max-time"):
        return (f"dry run: ended at optimizer step {end.get('steps')} by the --{kind} bound, before coverage "
                "(--continue: real training goes on from here)")
    if kind == "unended-loop":
        loop = end.get("unended_loop") or {}
        return (f"dry run: {cut}ended at optimizer step {end.get('steps')}: the loop at "
                f"{loop.get('path')}:{loop.get('line')} `{loop.get('header')}` went on stepping and the pre-flight "
                "cannot end it")
    if kind in ("abort", "error"):
        return f"dry run: {cut}ended by the verdict below at optimizer step {end.get('steps', 0)}" if trunc else \
            f"dry run: ended by the verdict below at optimizer step {end.get('steps', 0)}"
    return f"dry run: ended by {kind}"


def not_run_lines(end: dict[str, Any]) -> list[str]:
    """What the dry run did not run (a run that is not fully covered)."""
    if end.get("covered", True) or end.get("kind") in ("abort", "error"):
        return []
    kind = end.get("kind")
    if kind == "unended-loop":
        loop = end.get("unended_loop") or {}
        return [f"not run: the remaining iterations of `{loop.get('header')}` ({loop.get('path')}:{loop.get('line')}) "
                "and all code after it (evaluation, saves, inference, teardown). Its steps are not driven by a "
                "DataLoader epoch or a `for ... in range(...)` of the launched script that the pre-flight can end "
                "(a while loop, next() in the script, a range loop in another module, --keep-range-loops); run the "
                "pre-flight with the script's own arguments set to a short loop (e.g. fewer steps) to check that code"]
    if kind == "steps":
        return [f"not run: everything after optimizer step {end.get('steps')} (--steps); leave --steps out to run "
                "the code after the loop"]
    return [f"not run: everything after optimizer step {end.get('steps')} (the --{kind} bound; --continue goes on "
            "with real training under the watchdog)"]


def build_pass(session: Any, summaries: dict[int, dict[str, Any]], findings: list[dict[str, Any]]) -> dict[str, Any]:
    failed = any(f["severity"] == "error" for f in findings)
    end = dry_run_end({r: s["end"] for r, s in summaries.items() if s.get("end")})
    verdict = "divergence" if failed else "pass" if end.get("covered", True) or end.get("kind") == "steps" \
        else "not_covered"
    return {
        "tool": "dslint preflight", "verdict": verdict,
        "world_size": session.world_size, "timeout_s": session.options.timeout,
        "dry_run": end, "not_run": not_run_lines(end),
        "static": static_link.link(getattr(session, "static_check", None) if session.rank == 0 else None,
                                   {r: s.get("lines") or [] for r, s in summaries.items()}, set()),
        "ended_by": {str(r): s.get("ended_by") for r, s in summaries.items()},
        "counts": _count_table(summaries), "findings": [f for f in findings if f["severity"] != "hint"],
        "hints": [f for f in findings if f["severity"] == "hint"],
        "moe_layers": summaries.get(0, {}).get("moe_layers", []),
        "loader_audit": _audit_table(summaries), "coverage": {str(r): s.get("coverage") for r, s in summaries.items()},
        "pre_issue_check": _check_protocol(summaries),
        **_saves(summaries),
    }


def _check_protocol(per_rank: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """How the ranks compared their collectives before issue: the flat check on the rendezvous store, or the
    tree of stores (its fan-out, and each rank's operations on the tree's stores)."""
    checks = {r: s.get("check") or {} for r, s in per_rank.items()}
    protocol = next((c.get("protocol") for c in checks.values() if c.get("protocol")), "flat")
    found: dict[str, Any] = {"protocol": protocol}
    if protocol == "tree":
        found["fanout"] = next((c.get("fanout") for c in checks.values() if c.get("fanout")), None)
        found["tree_store_ops"] = {str(r): c.get("tree_ops", 0) for r, c in sorted(checks.items())}
    fast = {r: c["fast_path"] for r, c in sorted(checks.items()) if c.get("fast_path")}
    if fast:  # the fast path (dslint.runtime_checks.fast_path): per rank, collectives checked and taken fast
        found["fast_path"] = {"enabled": any(f.get("enabled") for f in fast.values()),
                              "checked": {str(r): f.get("checked", 0) for r, f in fast.items()},
                              "fast": {str(r): f.get("fast", 0) for r, f in fast.items()},
                              "deviations": {str(r): f.get("deviations", 0) for r, f in fast.items()}}
    return found


def _audit_table(per_rank: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per audited loader: what each rank's walk of its epoch found (batch count, shape classes, sampler)."""
    table: dict[str, dict[str, Any]] = {}
    for rank, summary in sorted(per_rank.items()):
        for audit in summary.get("audits") or []:
            row = table.setdefault(audit["key"], {"index": len(table), "key": audit["key"],
                                                  "source": audit.get("source"), "loader": audit["loader"],
                                                  "per_rank": {}})
            walk = audit["walk"]
            row["per_rank"][str(rank)] = {"batches": walk["count"], "shape_classes": len(walk["classes"]),
                                          "truncated": walk["truncated"], "error": walk["error"],
                                          "seconds": walk["seconds"], "dataset_len": audit["loader"]["dataset_len"]}
    moe = next((s.get("moe_layers") for s in per_rank.values() if s.get("moe_layers")), [])
    for row in table.values():  # what the comparison found, the partial last batch included
        if len(row["per_rank"]) == len(per_rank) > 1:
            audits = {r: a for r, s in per_rank.items() for a in s.get("audits") or [] if a["key"] == row["key"]}
            row["findings"] = loader_audit.compare(audits, moe)
    return list(table.values())


def _saves(per_rank: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Where the dry step's saves were redirected (the scratch copies are deleted when the run leaves)."""
    return {"redirected_saves": {str(r): s.get("redirected_saves", []) for r, s in per_rank.items()},
            "redirected_to": {str(r): s.get("redirected_to", []) for r, s in per_rank.items()
                              if s.get("redirected_to")}}


def build_abort(session: Any, verdict: dict[str, Any], states: dict[int, dict[str, Any]]) -> dict[str, Any]:
    ranks = {}
    for rank, state in sorted(states.items()):
        ranks[str(rank)] = {
            "pending": _where(state.get("pending")), "waiting_for": state.get("waiting_for"),
            "phase": state.get("phase"), "module": state.get("module"),
            "last_collectives": [_where(r) for r in state.get("last_collectives", [])],
            "error": state.get("error"),
        }
    missing = [r for r in range(session.world_size) if r not in states]
    divergences = {}
    groups: dict[str, list[int]] = {}
    for state in states.values():
        groups.update(state.get("groups", {}))
    for group, members in groups.items():
        seqs = {r: states[r]["sequences"].get(group, []) for r in members if r in states}
        first = compare.first_divergence(seqs) if len(seqs) > 1 else None
        if first:
            divergences[group] = first
    cause = diagnosis.diagnose(verdict, states)
    return {
        "tool": "dslint preflight", "verdict": verdict.get("kind", "error"), "world_size": session.world_size,
        "timeout_s": session.options.timeout, "abort": verdict, "diagnosis": cause,
        "dry_run": session.end_info("error" if verdict.get("kind") == "error" else "abort"),
        "static": static_link.link(getattr(session, "static_check", None),
                                   {r: s.get("lines") or [] for r, s in states.items()},
                                   static_link.verdict_lines(verdict, states)),
        "findings": [{"code": cause["code"], "severity": "error", "message": cause["cause"], "fix": cause["fix"]}]
        + ([dict(cause["related"], severity="error")] if cause.get("related") else []),
        "ranks": ranks, "ranks_without_state": missing, "counts": _count_table(states),
        "first_divergence": divergences,
        "divergence_point": _point(verdict.get("divergence")),
        "dead_ranks": verdict.get("dead_ranks") or [],
        "moe_layers": next((s.get("moe_layers") for s in states.values() if s.get("moe_layers")), []),
        "loader_audit": _audit_table(states), "audit_findings": verdict.get("audit") or [],
        "pre_issue_check": _check_protocol(states),
        **_saves(states),
    }


def _point(point: dict[str, Any] | None) -> dict[str, Any] | None:
    """Where the ranks' recorded paths part (wait-for analysis / op mismatch): the line and the mechanism."""
    if not point or not point.get("source"):
        return None
    src = point["source"]
    return {"path": src[0], "line": src[1], "function": src[2], "text": point.get("text"),
            "mechanism": point.get("kind"), "code": point.get("code"), "why": point.get("why")}


def emit(built: dict[str, Any], path: str | None) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(built, f, indent=2, default=str)
    print(render_text(built), flush=True)


def render_text(built: dict[str, Any]) -> str:
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=120, color_system=None, force_terminal=False, soft_wrap=True,
                      markup=False, highlight=False)
    verdict = built["verdict"]
    end = built.get("dry_run") or {}
    if end:
        console.print(f"dslint preflight: {describe_end(end)}")
    title = VERDICT_TITLES.get(verdict, verdict)
    if verdict == "pass" and end.get("kind") == "steps":
        title = f"PASS for the first {end.get('steps')} optimizer steps (--steps): all ranks agree on what ran"
    console.print(f"dslint preflight: {title} (exit {built.get('exit_code')}, {built['world_size']} ranks)")
    for line in built.get("not_run") or []:
        console.print(f"  {line}")
    abort = built.get("abort")
    if abort:
        console.print(f"  what happened: {abort.get('detail') or abort.get('message') or abort.get('exception')}")
        for call in abort.get("calls", []):
            src = call.get("source")
            console.print(f"    rank {call['rank']}: {call['call']}  module={call.get('module')}  "
                          f"phase={call.get('phase')}  at {src[0]}:{src[1]}" if src else
                          f"    rank {call['rank']}: {call['call']}  module={call.get('module')}")
            if call.get("fast_path"):
                console.print("      (issued on the fast path: its call is the previous step's agreed one at this "
                              "position, its stack from its heartbeat)")
            if call.get("params"):
                console.print(f"      reduces the gradients of: {', '.join(call['params'][:12])}"
                              + (" …" if len(call["params"]) > 12 else ""))
    for rank, info in (built.get("ranks") or {}).items():
        where = info.get("pending") or (info.get("last_collectives") or [None])[-1]
        doing = "pending" if info.get("pending") else "last"
        if info.get("error"):
            console.print(f"  rank {rank}: raised {info['error'].get('exception')}: {info['error'].get('message')}")
        elif where:
            src = where.get("source") or {}
            console.print(f"  rank {rank}: {doing} {where['op']} #{where['seq']} group {where['group']} "
                          f"in={where['ins']} module={where.get('module')} phase={where.get('phase')} "
                          f"at {src.get('path')}:{src.get('line')} `{src.get('text', '')}`"
                          + "".join(f" <- {f['path']}:{f['line']} `{f['text']}`" for f in where["user_stack"][1:])
                          + (f"; waiting for {info['waiting_for'].get('what')}" if info.get("waiting_for") else ""))
        else:
            console.print(f"  rank {rank}: no collective yet; phase={info.get('phase')}")
    for group, first in (built.get("first_divergence") or {}).items():
        console.print(f"  first divergence in group {group} at #{first['seq']}: "
                      + ", ".join(f"rank {r}: {c}" for r, c in first["calls"].items()))
    point = built.get("divergence_point")
    if point:
        console.print(f"  divergence point: {point['path']}:{point['line']} `{point['text']}` "
                      f"({point['mechanism'] or 'mechanism unknown'}): {point['why']}")
    cause = built.get("diagnosis")
    if cause:
        console.print(f"  likely cause [{cause.get('code')}]: {cause['cause']}")
        console.print(f"  fix: {cause['fix']}")
        if cause.get("related"):
            console.print(f"  also [{cause['related']['code']}]: {cause['related']['message']}")
    counts = built.get("counts") or {}
    if counts:
        ranks = sorted({r for g in counts.values() for r in g["per_rank"]}, key=int)
        table = Table(title="collectives per rank", show_edge=False)
        table.add_column("group")
        for r in ranks:
            table.add_column(f"rank {r}", justify="right")
        for name, group in counts.items():
            table.add_row(f"{name} ({group['label']})", *[str(group["per_rank"].get(r, "-")) for r in ranks])
        console.print(table)
    if not abort:
        for finding in built.get("findings", []):
            console.print(f"  {finding['severity']} {finding['code']}: {finding['message']}")
            if finding.get("fix"):
                console.print(f"      fix: {finding['fix']}")
    for row in built.get("loader_audit") or []:
        src = row.get("source")
        console.print(f"  loader audit #{row['index']} ({row['loader'].get('loader')}, sampler "
                      f"{row['loader'].get('sampler')}, collate_fn {row['loader'].get('collate_fn')}"
                      + (f", iterated at {src[0]}:{src[1]}" if src else "") + "): "
                      + ", ".join(f"rank {r}: {v['batches']} batches, {v['shape_classes']} shape classes"
                                  + (" (cut by --audit-budget)" if v["truncated"] else "")
                                  for r, v in row["per_rank"].items()))
        for note in row.get("findings") or []:
            console.print(f"    {note['severity']} {note.get('code') or ''} step {note.get('step')}: {note['message']}")
    for finding in built.get("audit_findings") or []:
        console.print(f"  audit {finding['severity']} {finding.get('code') or ''}: {finding['message']}")
    for rank, cov in sorted((built.get("coverage") or {}).items(), key=lambda item: int(item[0])):
        if cov and cov.get("loaders"):
            console.print(f"  coverage rank {rank}: {cov['steps']} optimizer steps; "
                          + "; ".join(f"loader #{c['index']}: {c['classes_seen']}/{c['classes']} shape classes, "
                                      f"{c['epoch_ends']} epoch end(s)" for c in cov["loaders"]))
    fast = (built.get("pre_issue_check") or {}).get("fast_path")
    if fast and fast.get("enabled"):
        console.print("  pre-issue check: " + ", ".join(
            f"rank {r}: {fast['fast'].get(r, 0)} of {n} on the fast path" for r, n in fast["checked"].items()))
    static = built.get("static") or {}
    for row in static.get("findings") or []:
        console.print(f"  static {row['code']} at {row['path']}:{row['line']}: "
                      f"{static_link.STATUS_TEXT.get(row['status'], row['status'])}"
                      + (f" (ranks {', '.join(map(str, row['ranks']))})" if row["ranks"] else "")
                      + f" -- {row['message'][:160]}")
    for hint in built.get("hints", []):
        console.print(f"  hint {hint['code']} (static, not observed in this run; does not fail it): {hint['message']}")
    for rank, moves in sorted((built.get("redirected_to") or {}).items(), key=lambda item: int(item[0])):
        for move in moves:
            console.print(f"  rank {rank}: save to {move['from']} redirected to {move['to']} (deleted at exit)")
    return buffer.getvalue().rstrip()


def print_local_error(message: str) -> None:
    print(f"dslint preflight: {message}", file=sys.stderr, flush=True)
