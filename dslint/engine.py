"""The check run, as the composition of its stages (`dslint.pipeline`, docs/architecture.md):

    inputs (gather) -> rules and triage (rule_set) -> launch units and views (launch_units)
        -> scheduling and workers (workers) -> rule runs (rule_runs) -> report (results)

with the result cache at the stage boundaries (run_cache). A rule that crashes is reported as an internal error
for that file and rule; the findings of the other rules stand."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from dslint import progress
from dslint.config import Settings
from dslint.findings import Finding, Report, Severity
from dslint.pipeline.gather import carry_over, read_inputs
from dslint.pipeline.launch_units import build_program, views_for
from dslint.pipeline.results import family_errors, finish, undecodable_findings
from dslint.pipeline.rule_runs import FILE_TIMEOUT, Cancelled, RuleRun, stop_if_stale  # noqa: F401  (Cancelled: dslint.server)
from dslint.pipeline.rule_set import Triage, parse_rule_added, select_rules
from dslint.pipeline.run_cache import RunCache
from dslint.pipeline.workers import analyse, job_count
from dslint.program.project_view import ProjectView
from dslint.rules.base import Rule
from dslint.sources import AnySource, PythonSource, kind_of, make_source  # noqa: F401  (kind_of, make_source: for tests)
from dslint.sources import guard
from dslint.sources.inputs import collect, limits_for, read_sources  # noqa: F401  (collect, read_sources: for tests and tools)
from dslint.timeline import span

_KEPT: list = []               # the state of runs whose process ends after them (`Checker.ends_process`)


@dataclass
class Checker:
    settings: Settings
    rules: list[Rule] = field(default_factory=list)    # empty: chosen per run from the settings (`select_rules`)
    sniff_json: bool = False
    cache_dir: Optional[Path] = None       # None: no cache
    jobs: int = 0                          # 0: one per CPU (at most workers.MAX_AUTO_JOBS); 1: no workers
    sources: list = field(default_factory=list, repr=False)     # the sources of the last check_paths
    file_timeout: float = FILE_TIMEOUT     # seconds of analysis per file; 0: no budget
    ends_process: bool = False             # the process ends after the run: its state is never freed (_keep)
    # the language server (dslint.server): the shown paths whose findings a run reports (None: every file; the
    # program model and the views are still the whole run's, so a file's findings are those `check` gives it),
    # and a callable asked between phases, files and rules whether a newer run has made this one stale (then
    # `Cancelled` is raised at a point where no source is half-built)
    analyse_only: Optional[frozenset] = None
    interrupt: Optional[object] = None
    # the language server: what is alive at the end of a run is moved to the collector's permanent generation
    # before the collector is enabled again (`dslint.server.workspace.Collector`)
    freeze_after: bool = False

    def __post_init__(self) -> None:
        self._explicit_rules = bool(self.rules)
        self._triage: Optional[Triage] = None
        self._last_cache: Optional[RunCache] = None

    @property
    def triage(self) -> Triage:
        """Which sources the current rules need (`rule_set.Triage`)."""
        if self._triage is None or self._triage.rules is not self.rules:
            self._triage = Triage(self.rules)
        return self._triage

    def check_paths(self, paths: list[Path], overrides: Optional[dict[str, str]] = None,
                    walked: Optional[Callable[[Path], bool]] = None) -> Report:
        """`overrides`: shown path -> text to check instead of the file's (a fix round's texts). Such a
        re-check starts from the previous run's sources (`gather.carry_over`). `walked`: which files found by
        walking a folder are read (dslint.changed: the files git tracks); every one when None."""
        inputs, sources, undecodable = read_inputs(paths, self.settings, self.sniff_json, self.sources, overrides,
                                                   walked)
        self.sources = sources
        report = self.check_sources(sources)
        if undecodable and not self._explicit_rules:
            self.rules += parse_rule_added(self.settings, self.rules)
        report.files_checked += len(undecodable)
        report.findings += undecodable_findings(undecodable, self.rules, self.settings)
        report.errors[:0] = inputs.errors
        report.findings.sort(key=Finding.sort_key)
        return report

    def recheck(self, overrides: dict[str, str]) -> Report:
        """The last run's inputs checked again with `overrides` (shown path -> text) in place of their texts,
        without reading the files again: the language server's re-check of an edited buffer. Unchanged files are
        the previous run's sources, a changed Python file builds its tree from the previous one (`carry_over`)."""
        sources = carry_over(self.sources, self.sources, overrides)
        self.sources = sources
        report = self.check_sources(sources)
        report.findings.sort(key=Finding.sort_key)
        return report

    def check_sources(self, sources: list[AnySource]) -> Report:
        # A run holds every parsed tree until it ends: millions of acyclic libcst nodes that Python's cyclic
        # collector would traverse again and again (a third of the run time on large trees). Nothing of a
        # run forms reference cycles worth collecting before it ends.
        enabled = gc.isenabled()
        gc.disable()
        limit = guard.MAX_SOURCE_CHARS      # the run sets its own (`--max-file-size`); the process's is restored
        try:
            return self._check_sources(sources)
        finally:
            guard.set_source_limit(limit)
            if self.freeze_after:
                # the run's objects (~all of them young: the collector was off) would otherwise be walked by the
                # first collections after it, and the trees kept for the next run by every full one
                gc.freeze()
            if enabled:
                gc.enable()

    def _check_sources(self, sources: list[AnySource]) -> Report:
        guard.set_source_limit(limits_for(self.settings.max_file_size)["python"])    # the one size limit
        if not self._explicit_rules:
            with span("rules (imports)"):
                self.rules = select_rules(self.settings, sources)
        report = Report(files_checked=len(sources), errors=family_errors())
        with span("triage"):
            relevant = [s for s in sources if self.triage.relevant(s)]
        stop_if_stale(self.interrupt)
        project = ProjectView(relevant, world_size_override=self.settings.world_size,
                              deepspeed_version_override=self.settings.deepspeed_version, root=self.settings.root)
        cache = self._last_cache = RunCache.open(self.cache_dir, self.settings, self.rules, relevant)
        jobs = job_count(self.jobs)
        only = self.analyse_only
        # an unchanged tree is answered from the run's entry without building the program model
        keys: Optional[list] = cache.known_keys(len(relevant)) if cache else None
        if keys is None:
            progress.current.phase(f"launch units of {len(relevant)} files")
            build_program(sources, project, cache, jobs, self.rules)
            if cache and only is None:
                keys = [cache.item_key(relevant, i, project) for i in range(len(relevant))]
                cache.put_keys(keys)
            elif cache:
                # the language server's run: the keys of the files it reports only (no run entry: it needs all)
                keys = [cache.item_key(relevant, i, project) if s.path in only else None
                        for i, s in enumerate(relevant)]
        todo: list[int] = []
        for i, source in enumerate(relevant):
            if only is not None and source.path not in only:
                continue
            hit = cache.results(keys[i]) if cache else None
            if hit is None:
                todo.append(i)
            else:
                report.findings += hit[0]
                report.errors += hit[1]
        views: dict[int, ProjectView] = {}
        stop_if_stale(self.interrupt)
        if todo:
            if project.program is None:
                progress.current.phase(f"launch units of {len(relevant)} files")
                build_program(sources, project, cache, jobs, self.rules)
                stop_if_stale(self.interrupt)
            with span("views"):
                views = views_for(relevant, todo, project)
        run = RuleRun(self.settings, self.rules, self.file_timeout, self.interrupt)
        progress.current.phase("analysing", total=len(relevant))
        progress.current.advance(len(relevant) - len(todo))           # answered by the cache
        for i, findings, errors in analyse(run, relevant, views, todo, jobs):
            progress.current.advance()
            report.findings += findings
            report.errors += errors
            if cache:
                cache.put_results(keys[i], findings, errors)
        finish(report, project, self.settings)
        self._keep(project, views)
        return report

    def _keep(self, *state) -> None:
        """A run's trees and project state, kept alive when the process is to end without freeing them
        (`ends_process`: the command line, which leaves through `os._exit`): freeing millions of nodes one by
        one cost 0.1-0.4 s at the end of a whole-repository run, all of it serial."""
        if self.ends_process:
            _KEPT.append(state)

    def parsed(self, source: AnySource) -> Optional[bool]:
        """Whether CPython parses `source` (a Python source of the last check), where that check learnt it
        without parsing again: from the outline it built, or from the result cache's program facts of this
        text (written from such an outline). None: not known, or the file is one no parser may read."""
        if not isinstance(source, PythonSource):
            return None
        if "outline" in source.__dict__:
            return None if source.too_complex is not None else source.outline is not None
        if self._last_cache is not None:
            return self._last_cache.compiles(source)
        return None


def check_texts(files: dict[str, str], settings: Optional[Settings] = None, rules: Optional[list[Rule]] = None
                ) -> Report:
    """Check in-memory files (name → text) as one run; used by rule examples and tests."""
    settings = settings or Settings()
    sources: list[AnySource] = []
    for name, text in files.items():
        path = Path(name)
        kind = kind_of(path, True, text[:4096])
        if kind is None:
            raise ValueError(f"cannot tell the kind of {name}")
        sources.append(make_source(path, name, kind, text))
    return Checker(settings, rules or []).check_sources(sources)


def fails(report: Report, level: Severity) -> bool:
    """Findings at or above the fail level; hidden (unproven) findings are no longer in the report and never
    count, shown ones (`--show-unproven`) do."""
    return any(f.severity.rank >= level.rank for f in report.findings)
