"""Stage 3 of a check (`dslint.pipeline`): scheduling and forked workers (`dslint.forkpool`). Two pools, both
fed contiguous runs of files (`contiguous_chunks`: a file's analysis reads its neighbours, parsed once per run):

- outline workers (`build_outlines`): every Python file's outline and the facts of its text alone, every shell
  script's launch lines, built in parallel before the launch units are; the main process meanwhile imports
  what every analysis worker would and parses the files that may hand DeepSpeed a config (`WhileOutlining`);
- analysis workers (`analyse`): the rules on each file to analyse (`dslint.pipeline.rule_runs.RuleRun`), after
  the whole-project analyses of a view holding most files were run once here (`prepare`) and inherited. Each
  worker starts on a lane of contiguous files of about equal estimated cost (`estimated_costs`) and is served
  one file at a time, keeping what it parsed; a worker whose lane is empty takes files from the back of the
  lane with the most cost left (`forkpool.run_stealing`: one worker ran 7.1 s and the other 2.0 s on a
  repository of examples over one package, issue 33). The file a dying worker was on is checked again in a
  worker of its own; one whose worker crashes again is its DSL001.

Small runs (fewer than `PARALLEL_MIN_FILES` files), one job, or no `fork`: everything runs in this process."""

from __future__ import annotations

import os
import signal
import sys
from typing import Iterator

from dslint.pipeline.rule_runs import CRASH_SIGNALS, RuleRun, stop_if_stale
from dslint.program.project_view import ProjectView
from dslint.rules.base import Rule
from dslint.sources import AnySource, PythonSource, ShellSource
from dslint.timeline import record, record_process, span, span_iter

PARALLEL_MIN_FILES = 24        # below this, forking workers costs more than it saves
OUTLINE_CHUNKS_PER_JOB = 3      # runs of files per outline worker
CHUNK_BYTES = 3_000_000        # at most this much source analysed per worker process on big trees: the libcst
                               # trees a worker parses (~60 bytes per byte of source) are freed when it exits,
                               # and a fresh worker goes on with its lane
VIEW_COST = 0.006              # a Python file's estimated cost (`estimated_costs`): this share of its view's
                               # Python bytes, divided among the view's files analysed
MAX_AUTO_JOBS = 4              # files' cross-references are re-read in every worker: more rarely pays
_WORK = None                   # (rule run, sources, views), inherited by forked analysis workers
_OUTLINE_WORK = None           # the sources whose outlines forked workers build


def job_count(jobs: int) -> int:
    """`jobs` as asked (0: one per CPU, at most MAX_AUTO_JOBS)."""
    return jobs or min(MAX_AUTO_JOBS, os.cpu_count() or 1)


def _analyse_chunk(indices: list[int]):
    run, sources, views = _WORK
    out = []
    for i in indices:
        with span(f"  {sources[i].path}"):
            out.append((i, *run.results_for(sources[i], views[i])))
    return out


def _analyse_item(i: int):
    """One file's (index, findings, errors), in a stealing analysis worker (`forkpool.run_stealing`)."""
    return _analyse_chunk([i])


def _worker_exits(served: int) -> None:
    record_process(f"analysis worker ({served} files)")


def estimated_costs(sources: list[AnySource], views: dict[int, ProjectView], todo: list[int]) -> dict[int, float]:
    """Each file's estimated analysis cost, in bytes of source: its own size, plus for a Python file a share of
    the whole-project analyses of its view (call graph, roles, the identifier index over the view's files),
    which every view computes once for the files analysed in it: a launch script alone in its view pays
    them all (on the synthetic bench, `bench/bench_scaling.py`, a 1 KB script costs 1.5x a 4 KB package module
    analysed with 200 others). The estimate orders the lanes; work stealing corrects what it gets wrong."""
    per_view: dict[int, list] = {}
    for i in todo:
        if isinstance(sources[i], PythonSource):
            entry = per_view.setdefault(id(views[i]), [views[i], 0])
            entry[1] += 1
    share: dict[int, float] = {}
    for key, (view, count) in per_view.items():
        share[key] = VIEW_COST * sum(len(s.text) for s in view.python) / count
    return {i: len(sources[i].text) + (share[id(views[i])] if isinstance(sources[i], PythonSource) else 0.0)
            for i in todo}


def balance(busy: list[float]) -> None:
    """Record the analysis workers' imbalance (DSLINT_TIMELINE): the busiest lane's wall time over the mean."""
    if busy and sum(busy) > 0:
        mean = sum(busy) / len(busy)
        import time
        now = time.time()
        record(f"analysis workers: max/mean busy {max(busy):.2f}/{mean:.2f} s = {max(busy) / mean:.2f} "
               f"({len(busy)} workers)", now, now, 0.0)


def _outline_chunk(indices: list[int]):
    """Outlines of Python files and the launch lines of shell scripts (a launcher script with a syntax error
    is left to the main process, which reports it). With an outline come the facts of the file's text alone
    that the analysis workers would otherwise each compute again for every file of their views
    (`text_facts`): computed here once, in parallel."""
    sources = _OUTLINE_WORK
    out = []
    with span(f"outline worker ({len(indices)} files)"):
        for i in indices:
            src = sources[i]
            if isinstance(src, ShellSource):
                if src.parse_problem() is None:
                    out.append((i, {"launches": src.launches}))
            else:
                out.append((i, text_facts(src)))
    return out


class WhileOutlining:
    """The main process's work while the outline workers run (it would otherwise wait for them), one step per
    call (`run_forked(..., while_running=)`): import the modules every analysis worker would import for
    itself, then parse (libcst) the files that may hand a config to DeepSpeed (`ProjectView.may_hand_configs`),
    as their outlines come back: those whose config references the run evaluates (`launch_units.config_references`)
    are among them, and the rules read the others' trees (on DeepSpeedExamples all 31). Those parses were
    serial work between the outline and the analysis phases, or an analysis worker's; their trees are
    inherited by every analysis worker. What is not done when the outlines are all back is done where it
    is needed."""

    def __init__(self, imports: list[str], python: list[PythonSource], project: ProjectView):
        self.imports = list(imports)
        self.python = python
        self.project = project
        self.at = 0

    def __call__(self) -> bool:
        if self.imports:
            import importlib
            name = self.imports.pop(0)
            with span(f"import {name} (main, while outlining)"):
                try:
                    importlib.import_module(name)
                except Exception:
                    pass        # left to show up where the module is used
            return True
        while self.at < len(self.python):
            src = self.python[self.at]
            if "outline" not in src.__dict__:
                return False    # outlines come back in order: wait for this one (never built here)
            self.at += 1
            if src.outline is not None and src.too_complex is None and self.project.may_hand_configs(src):
                src.module      # noqa: B018 -- the parse, kept on the source
                return True
        return False


def text_facts(src: PythonSource) -> dict:
    """A Python file's outline and the facts of its text alone that forked analysis workers read for every
    file of a view (the complexity guard's verdict, the identifier set of `ProjectView.using_identifier`,
    the rank-taint words' top-level scopes), as `src.__dict__` entries."""
    from dslint.program.rank.value_uniformity import seeded_tops
    from dslint.program.project_view import identifiers
    facts = {"outline": src.outline, "too_complex": src.too_complex, "_identifiers": identifiers(src)}
    if src.outline is not None:
        facts["_seeded_tops"] = seeded_tops(src)
    return facts


def analyse(run: RuleRun, sources: list[AnySource], views: dict[int, ProjectView], todo: list[int], jobs: int
            ) -> Iterator[tuple[int, list, list]]:
    """(index, findings, errors) of every file of `todo` (indices into `sources`), each checked in its view
    (`views[index]`) by `run`, in forked workers when the run is big enough."""
    if jobs <= 1 or len(todo) < PARALLEL_MIN_FILES or not hasattr(os, "fork"):
        for i in todo:
            stop_if_stale(run.interrupt)
            with span(f"  {sources[i].path}"):
                result = run.results_for(sources[i], views[i])
            yield (i, *result)
        return
    from dslint.forkpool import FAILED, run_forked, run_stealing
    global _WORK
    _WORK = (run, sources, views)
    try:
        build_outlines(sources, jobs)
        counts: dict[int, list] = {}
        python = [i for i in todo if isinstance(sources[i], PythonSource)]
        for i in python:        # configs and launcher scripts read the run's view, which no rule's
            counts.setdefault(id(views[i]), [views[i], 0])[1] += 1     # Python analysis needs
        for view, count in counts.values():
            # a view holding most of the files (a library package checked as a whole): its whole-project
            # analyses once, here, inherited by every worker. For the smaller views of many launch units
            # this serial work costs more than the workers' own (DeepSpeedExamples: 22 s -> 7.6 s without)
            if count >= max(PARALLEL_MIN_FILES, len(python) // 2):
                with span("prepare (serial)"):
                    prepare(run.rules, view)
        costs = estimated_costs(sources, views, todo)
        sizes = {i: float(len(sources[i].text)) for i in todo}
        lanes = [c for c in contiguous_chunks(todo, [costs[i] for i in todo], jobs) if c]
        lost = False
        busy: list[float] = []
        statuses: dict[int, int] = {}
        done: dict[int, tuple] = {}
        at = 0
        with span("analysis (forked)"):
            for i, part in run_stealing(_analyse_item, lanes, costs, CHUNK_BYTES, sizes, statuses,
                                        _worker_exits, busy):
                if part is FAILED:
                    # a worker died (killed for memory, or a native crash on this file): the file is checked
                    # again in a worker of its own. A file whose worker crashes again (SIGSEGV, SIGBUS, SIGABRT,
                    # ...) is reported as its DSL001; one whose worker was killed or failed otherwise is checked
                    # here (a file alone rarely needs the memory of a run of files)
                    if not lost:
                        print("dslint: a worker process died; checking its files one by one",
                              file=sys.stderr)
                        lost = True
                    again: dict[int, int] = {}
                    single = next(iter(run_forked(_analyse_chunk, [[i]], 1, again)))[1]
                    if single is not FAILED:
                        part = single[0][1:]
                    elif -again.get(0, 0) in CRASH_SIGNALS:
                        name = signal.Signals(-again[0]).name
                        part = ([run.not_analysed(sources[i], f"the process analysing it crashed ({name})")], [])
                    else:
                        part = run.results_for(sources[i], views[i])
                else:
                    part = part[0][1:]
                done[i] = part
                while at < len(todo) and todo[at] in done:       # in the order of `todo`, as a serial run
                    yield (todo[at], *done.pop(todo[at]))
                    at += 1
        balance(busy)
    finally:
        _WORK = None


def worker_imports(rules: list[Rule], sources: list[AnySource]) -> list[str]:
    """The modules that every forked analysis worker would otherwise import for itself (each import paid
    once per worker): the role analysis, the fix builders, and the config model (pydantic) when the run
    has JSON configs and the config rules run."""
    families = {type(r).__module__ for r in rules}
    names = ["dslint.program.roles", "dslint.fixes.python"]
    if "dslint.rules.config" in families and any(s.kind == "json" for s in sources):
        names += ["dslint.dsconfig.check", "dslint.dsconfig.top", "dslint.fixes.jsonedit"]
    return names


def build_outlines(sources: list[AnySource], jobs: int, while_waiting=None) -> None:
    """Every Python file's outline and every shell script's launch lines, built by forked workers
    (CPython's parse of the whole tree is the first thing the project analyses need, and outlines pickle
    cheaply). What a worker that fails would have built is built where it is needed."""
    from dslint.forkpool import FAILED, run_forked
    todo = [i for i, s in enumerate(sources) if isinstance(s, PythonSource) and "outline" not in s.__dict__
            or isinstance(s, ShellSource) and "launches" not in s.__dict__]
    if len(todo) < PARALLEL_MIN_FILES:
        return
    # a few runs per worker: the cost per byte varies between files (one of two halves took twice the
    # other's time on DeepSpeedExamples), and a worker that finishes early takes the next run
    chunks = [c for c in contiguous_chunks(todo, [len(sources[i].text) for i in todo],
                                           jobs * OUTLINE_CHUNKS_PER_JOB) if c]
    global _OUTLINE_WORK
    _OUTLINE_WORK = sources
    try:
        for _, part in run_forked(_outline_chunk, chunks, jobs, while_running=while_waiting):
            if part is not FAILED:
                for i, built in part:
                    sources[i].__dict__.update(built)
    finally:
        _OUTLINE_WORK = None


def prepare(rules: list[Rule], project: ProjectView) -> None:
    """Run the families' whole-project analyses once here, so that forked workers inherit them instead of
    each recomputing them (and parsing the files they read). A failure is left to show up, per file and
    rule, when the workers run the rules."""
    from dslint.program.query import Program
    program = Program(project)
    for module in dict.fromkeys(type(r).__module__ for r in rules):
        prepare = getattr(sys.modules.get(module), "prepare", None)
        if prepare is not None:
            try:
                prepare(program)
            except Exception:
                pass


def contiguous_chunks(items: list[int], sizes: list[int], count: int) -> list[list[int]]:
    """`count` runs of consecutive items (files in path order) of about equal total size. A file's analysis
    reads its neighbours (helpers, base classes of the same package), which a worker then parses once for
    the whole run of files instead of every worker parsing them."""
    total = sum(sizes) or 1
    chunks: list[list[int]] = [[]]
    filled = 0
    for item, size in zip(items, sizes):
        if filled >= total * len(chunks) / count and len(chunks) < count:
            chunks.append([])
        chunks[-1].append(item)
        filled += size
    return chunks
