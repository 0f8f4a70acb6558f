"""The check run: collect inputs, read each once, build the project view, run every enabled rule on every
file it applies to, and turn diagnostics into findings. A rule that crashes is reported as an internal
error for that file and rule; the findings of the other rules stand."""

from __future__ import annotations

import gc
import os
import re
import signal
import sys
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from dslint.config import Settings
from dslint.findings import Evidence, Finding, Fix, InputError, Report, Severity, TraceStep
from dslint.sources.inputs import SKIP_DIRS, Inputs, collect, read_sources, shown_path  # noqa: F401
from dslint.sources.wordsearch import alternation
from dslint.program.project import ProjectView
from dslint.rules import all_rules
from dslint.rules.base import Diagnostic, Rule, RuleContext, span_of
from dslint.sources import AnySource, PythonSource, ShellSource, kind_of, make_source
from dslint.suppressions import parse_suppressions
from dslint.timeline import span, span_iter

PARALLEL_MIN_FILES = 24        # below this, forking workers costs more than it saves
OUTLINE_CHUNKS_PER_JOB = 3      # runs of files per outline worker
CHUNKS_PER_JOB = 1             # contiguous runs of files per worker at least (see _contiguous_chunks): a
                               # worker exits after its run, so a second run would re-parse what the first
                               # had parsed and recompute its memos (+15% on the deepspeed package)
CHUNK_BYTES = 3_000_000        # at most this much source per run on big trees: the libcst trees a worker
                               # parses (~60 bytes per byte of source) are freed when it exits
MAX_AUTO_JOBS = 4              # files' cross-references are re-read in every worker: more rarely pays
FILE_TIMEOUT = 60.0            # seconds of analysis per file (DSLINT_FILE_TIMEOUT; 0: none): past it, the file is
                               # reported as skipped and the run goes on
_WORK = None                   # (checker, sources, views), inherited by forked workers
_OUTLINE_WORK = None           # the sources whose outlines forked workers build
_KEPT: list = []               # the state of runs whose process ends after them (`Checker.ends_process`)


def _analyse_chunk(indices: list[int]):
    checker, sources, views = _WORK
    with span(f"analysis worker ({len(indices)} files)"):
        out = []
        for i in indices:
            with span(f"  {sources[i].path}"):
                out.append((i, *checker._results_for(sources[i], views[i])))
        return out


def _outline_chunk(indices: list[int]):
    """Outlines of Python files and the launch lines of shell scripts (a launcher script with a syntax error
    is left to the main process, which reports it). With an outline come the facts of the file's text alone
    that the analysis workers would otherwise each compute again for every file of their views
    (`_text_facts`): computed here once, in parallel."""
    sources = _OUTLINE_WORK
    out = []
    with span(f"outline worker ({len(indices)} files)"):
        for i in indices:
            src = sources[i]
            if isinstance(src, ShellSource):
                if src.parse_problem() is None:
                    out.append((i, {"launches": src.launches}))
            else:
                out.append((i, _text_facts(src)))
    return out


class _WhileOutlining:
    """The main process's work while the outline workers run (it would otherwise wait for them), one step per
    call (`run_forked(..., while_running=)`): import the modules every analysis worker would import for
    itself, then parse (libcst) the files that may hand a config to DeepSpeed (`ProjectView.may_hand_configs`),
    as their outlines come back: those whose config references the run evaluates (`Checker._config_refs`)
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


def _text_facts(src: PythonSource) -> dict:
    """A Python file's outline and the facts of its text alone that forked analysis workers read for every
    file of a view (the complexity guard's verdict, the identifier set of `ProjectView.using_identifier`,
    the rank-taint words' top-level scopes), as `src.__dict__` entries."""
    from dslint.program.rank.values import seeded_tops
    from dslint.program.project import identifiers
    facts = {"outline": src.outline, "too_complex": src.too_complex, "_identifiers": identifiers(src)}
    if src.outline is not None:
        facts["_seeded_tops"] = seeded_tops(src)
    return facts


_TRANSIENT = ("could not be analysed: skipped", "could not be analysed: the process")   # not cached
_CRASH_SIGNALS = {int(getattr(signal, n)) for n in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")
                  if hasattr(signal, n)}


class AnalysisTimeout(BaseException):
    """Raised (by SIGALRM) in the analysis of one file that runs past its budget. A BaseException, so that the
    per-rule `except Exception` of `_check_one` does not take it for a rule's failure."""


@contextmanager
def time_budget(seconds: float):
    """Raise AnalysisTimeout in the body once `seconds` have passed (main thread, POSIX; elsewhere no budget).
    Pure-Python code and libcst's parser (which builds its nodes in Python) both let the signal through."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise AnalysisTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Checker:
    settings: Settings
    rules: list[Rule] = field(default_factory=list)
    sniff_json: bool = False
    cache_dir: Optional[Path] = None       # None: no cache
    jobs: int = 0                          # 0: one per CPU (at most MAX_AUTO_JOBS); 1: no workers
    sources: list = field(default_factory=list, repr=False)     # the sources of the last check_paths
    file_timeout: float = FILE_TIMEOUT     # seconds of analysis per file; 0: no budget
    ends_process: bool = False             # the process ends after the run: its state is never freed (_keep)

    def __post_init__(self) -> None:
        self._explicit_rules = bool(self.rules)

    @property
    def _judging(self) -> bool:
        """DSL002 judges a suppression only by the rules it names having run: when it is selected, every
        default rule that is not ignored runs as a judge, and findings of codes not selected are dropped
        after they have marked the suppressions they hit (`--select DSL002` alone reports the unused ones)."""
        return "DSL002" in self.settings.select and self.settings.code_enabled("DSL002")

    def _rules_for(self, sources: list[AnySource]) -> None:
        if not self._explicit_rules:
            kinds = frozenset(s.kind for s in sources) or frozenset({"python"})
            ignored = self.settings.ignore
            self.rules = [cls() for cls in all_rules(kinds)
                          if self.settings.code_enabled(cls.code)
                          and (cls.default_enabled or cls.code in self.settings.select)
                          or self._judging and cls.default_enabled
                          and not any(cls.code.startswith(p) or p == "ALL" for p in ignored)]
            self.__dict__.pop("_trigger_re", None)

    def check_paths(self, paths: list[Path], overrides: Optional[dict[str, str]] = None) -> Report:
        """`overrides`: shown path -> text to check instead of the file's (dslint.fixes: a fix round's texts).
        Such a re-check starts from the previous run's sources (`_carry_over`)."""
        with span("collect and read inputs"):
            inputs = collect(paths, self.settings)
            sources, undecodable = read_sources(inputs, self.sniff_json, self.settings.max_file_size)
        if overrides is not None:
            sources = _carry_over(self.sources, sources, overrides)
        self.sources = sources
        report = self.check_sources(sources)
        if undecodable and not self._explicit_rules and not any(r.code == "DSL001" for r in self.rules):
            self.rules += [cls() for cls in all_rules(frozenset({"python"})) if cls.code == "DSL001"
                           and self.settings.code_enabled("DSL001")]
        parse_rule = next((r for r in self.rules if r.code == "DSL001"), None) \
            if self.settings.code_enabled("DSL001") else None
        for shown, _kind, problem in undecodable:
            report.files_checked += 1
            if parse_rule is not None:
                report.findings.append(Finding(code="DSL001", name=parse_rule.name, severity=parse_rule.severity,
                                               path=shown, line=problem.line, column=problem.column,
                                               end_line=problem.line, end_column=problem.column,
                                               message=problem.message))
        report.errors[:0] = inputs.errors
        report.findings.sort(key=Finding.sort_key)
        return report

    def check_sources(self, sources: list[AnySource]) -> Report:
        # A run holds every parsed tree until it ends: millions of acyclic libcst nodes that Python's cyclic
        # collector would traverse again and again (a third of the run time on large trees). Nothing of a
        # run forms reference cycles worth collecting before it ends.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._check_sources(sources)
        finally:
            if enabled:
                gc.enable()

    def _keep(self, *state) -> None:
        """A run's trees and project state, kept alive when the process is to end without freeing them
        (`ends_process`: the command line, which leaves through `os._exit`): freeing millions of nodes one by
        one cost 0.1-0.4 s at the end of a whole-repository run, all of it serial."""
        if self.ends_process:
            _KEPT.append(state)

    def _check_sources(self, sources: list[AnySource]) -> Report:
        with span("rules (imports)"):
            self._rules_for(sources)
        report = Report(files_checked=len(sources))
        from dslint.rules import FAMILY_ERRORS
        for family, message in FAMILY_ERRORS:
            report.errors.append(InputError(kind="internal-error", path=family.replace(".", "/") + ".py",
                                            message=f"rule family {family} failed to load: {message}"))
        with span("triage"):
            relevant = [s for s in sources if self._relevant(s)]
        project = ProjectView(relevant, world_size_override=self.settings.world_size,
                              deepspeed_version_override=self.settings.deepspeed_version, root=self.settings.root)
        cache = self._cache(relevant)
        self._last_cache = cache
        keys: list[Optional[str]] = [None] * len(relevant)
        known = cache.get(self._run_entry, lambda e: _strings(e.get("keys")) and len(e["keys"]) == len(relevant)) \
            if cache else None
        if known:
            keys = list(known["keys"])       # an unchanged tree: answered without building the program model
        else:
            self._program(sources, project, cache)
            if cache:
                keys = [self._item_key(relevant, i, project) for i in range(len(relevant))]
                cache.put(self._run_entry, {"keys": keys})
        todo: list[int] = []
        for i, source in enumerate(relevant):
            hit = _cached_results(cache.get(keys[i])) if cache else None
            if hit is None:
                todo.append(i)
            else:
                report.findings += hit[0]
                report.errors += hit[1]
        views: dict[int, ProjectView] = {}
        if todo:
            if project.program is None:
                self._program(sources, project, cache)
            with span("views"):
                views = self._views(relevant, todo, project)
        for i, findings, errors in self._analyse(relevant, views, todo):
            report.findings += findings
            report.errors += errors
            if cache and not any(e.kind == "internal-error" for e in errors) and not any(
                    f.code == "DSL001" and f.message.startswith(_TRANSIENT) for f in findings):
                cache.put(keys[i], {"findings": [f.model_dump(mode="json") for f in findings],
                                    "errors": [e.model_dump(mode="json") for e in errors]})
        report.findings.sort(key=Finding.sort_key)
        report.settings = project.settings_summary()
        if not self.settings.show_unproven:
            # findings whose evidence is incomplete (issue 30): cached with the others, left out of the report
            shown = [f for f in report.findings if f.proven]
            report.hidden = len(report.findings) - len(shown)
            report.findings = shown
        self._keep(project, views)
        return report

    def parsed(self, source: AnySource) -> Optional[bool]:
        """Whether CPython parses `source` (a Python source of the last check), where that check learnt it
        without parsing again: from the outline it built, or from the result cache's program facts of this
        text (written from such an outline). None: not known, or the file is one no parser may read."""
        if not isinstance(source, PythonSource):
            return None
        if "outline" in source.__dict__:
            return None if source.too_complex is not None else source.outline is not None
        cache = getattr(self, "_last_cache", None)
        if cache is not None:
            from dslint.cache import content_hash
            key = f"program:{getattr(self, '_hashes', {}).get(id(source)) or content_hash(source.text)}"
            entry = cache.get(key, _facts_entry)
            if entry is not None and entry.get("compiles") is True:
                return True
        return None

    # --- launch units ------------------------------------------------------------------------------
    def _program(self, sources: list[AnySource], project: ProjectView, cache) -> None:
        """The run's launch units (dslint.program.units), from each Python file's `FileFacts`: read from the
        cache by content, else from the file's outline (built by forked workers on big runs) and the config
        paths its code names. An `__init__.py` that no rule needs still links a script to what it imports, so
        every compiled Python file takes part."""
        from dslint.cache import content_hash
        from dslint.program.units import FileFacts, Program
        python = [s for s in sources if isinstance(s, PythonSource)]
        facts: dict[int, FileFacts] = {}
        missing: list[tuple[PythonSource, str]] = []
        hashes = getattr(self, "_hashes", {})
        for src in python:
            key = f"program:{hashes.get(id(src)) or content_hash(src.text)}" if cache else ""
            hit = cache.get(key, _facts_entry) if cache else None
            if hit is None:
                missing.append((src, key))
            elif hit.get("compiles"):
                facts[id(src)] = FileFacts(tuple(hit["imports"]), hit["runs"], tuple(hit["refs"]), tuple(hit["args"]),
                                           hit["argv"], tuple(hit["flags"]))
        jobs = self.jobs or min(MAX_AUTO_JOBS, os.cpu_count() or 1)
        if jobs > 1 and hasattr(os, "fork"):
            with span("outlines (forked)"):
                self._outlines([s for s, _ in missing] + [s for s in sources if isinstance(s, ShellSource)], jobs,
                               _WhileOutlining(self._worker_imports(sources), [s for s, _ in missing], project))
        with span("config references (serial)"):
            self._config_refs(missing, project, facts, cache)
        project.program = Program([s for s in python if id(s) in facts], project.shell, facts)

    @staticmethod
    def _config_refs(missing: list, project: ProjectView, facts: dict, cache) -> None:
        from dslint.program.outline import PairingError      # not dslint.program.facts: a cached run never imports libcst
        from dslint.program.units import FileFacts
        for src, key in missing:
            # the config references evaluate config expressions, parsing the files that build configs: here,
            # once, so that every worker inherits those trees (in the outline workers each analysis worker
            # parsed them again: 126 -> 192 parses on DeepSpeedExamples)
            refs: list[str] = []
            if src.compiles and project.may_hand_configs(src) and project.may_name_json(src):
                try:
                    refs = [v for v, _ in project.literal_configs(src) if isinstance(v, str) and v.endswith(".json")]
                except PairingError:
                    # the file's facts could not be built: its rules report it (internal error), the run goes on
                    pass
            found = FileFacts.of(src, refs, *project.argument_files(src)) if src.compiles else None
            if found is not None:
                facts[id(src)] = found
            if cache:
                cache.put(key, {"compiles": False} if found is None else {
                    "compiles": True, "imports": list(found.imports), "runs": found.runs_by_itself,
                    "refs": list(found.config_refs), "args": list(found.argument_files),
                    "argv": found.arguments_from_argv, "flags": list(found.argument_flags)})

    def _views(self, relevant: list[AnySource], todo: list[int], project: ProjectView) -> dict[int, ProjectView]:
        """The view each file to analyse is checked in: a Python file in its launch-unit context (the files of
        the units that reach it, their configs and launcher lines), a config or launcher script in the run's
        view."""
        by_context: dict[int, ProjectView] = {}
        out: dict[int, ProjectView] = {}
        for i in todo:
            src = relevant[i]
            context = project.program.context_of(src) if isinstance(src, PythonSource) else None
            if context is None:
                out[i] = project
                continue
            view = by_context.get(id(context))
            if view is None:
                view = by_context[id(context)] = project.context_view(context)
            out[i] = view
        return out

    # --- triage, cache, workers ------------------------------------------------------------------
    @property
    def _triggers(self) -> Optional[re.Pattern]:
        """One pattern of every enabled rule's trigger words; None when some rule needs every file."""
        if not hasattr(self, "_trigger_re"):
            words: set[str] = set()
            self._trigger_re = None
            if all(r.triggers for r in self.rules if "python" in r.kinds and r.code != "DSL001"):
                for r in self.rules:
                    if r.code != "DSL001":
                        words.update(r.triggers)
                self._trigger_re = re.compile(alternation(words)) if words else None
                self._no_python_rules = not words
        return self._trigger_re

    def _relevant(self, source: AnySource) -> bool:
        if not isinstance(source, PythonSource):
            return True
        pattern = self._triggers
        if pattern is None and not getattr(self, "_no_python_rules", False):
            return True
        if pattern is not None and pattern.search(source.text):
            return True
        # triaged out: no rule can flag it or needs its facts -- but a syntax error is still DSL001, and so is a
        # file no parser may read (dslint.sources.guard)
        if source.too_complex is not None:
            return True
        try:
            compile(source.text, source.path, "exec", dont_inherit=True, flags=0x400)   # PyCF_ONLY_AST
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return True
        return False

    def _cache(self, relevant: list[AnySource]):
        """Entries keyed per file by its content and by the content of the files its view holds (the launch
        units that reach it): editing one script invalidates only the files of its units. The run's entry
        (every file's content) maps an unchanged tree to its keys without building the program model."""
        if self.cache_dir is None:
            return None
        from dslint.cache import ResultCache, content_hash, run_key
        self._hashes = {id(s): content_hash(s.text) for s in relevant}
        fingerprint = content_hash("\n".join(sorted(f"{s.path}:{self._hashes[id(s)]}" for s in relevant)))
        self._run_entry = f"run:{fingerprint}"
        settings = self.settings.model_dump_json(exclude={"root"})
        return ResultCache(self.cache_dir, run_key(settings, [r.code for r in self.rules], ""))

    def _source_key(self, source: AnySource) -> str:
        return f"{source.kind}:{source.path}:{self._hashes[id(source)]}"

    def _item_key(self, relevant: list[AnySource], i: int, project: ProjectView) -> str:
        """A file's key: its content and that of every file its findings can depend on."""
        from dslint.cache import content_hash
        source = relevant[i]
        context = project.program.context_of(source) if isinstance(source, PythonSource) else None
        if context is not None:
            deps = project.context_sources(context)
        else:
            # a config or launcher script: the configs and launchers of the run, and the scripts that name it
            deps = [s for s in relevant if not isinstance(s, PythonSource)]
            if not isinstance(source, ShellSource):
                name = Path(source.path).name
                single = len(project.json_configs) == 1
                # what kind of JSON it is also depends on the scripts launcher lines run and on those that read
                # arguments files (dslint.program.json_kinds): a superset, by text
                launched = {id(t) for _, _, t in project.program.launch_targets}
                deps += [s for s in project.program.python if single or name in s.text or id(s) in launched
                         or "parse_json_file" in s.text]   # no outline built
        hashes = self._hashes
        text = "\n".join(sorted(f"{s.path}:{hashes.get(id(s)) or content_hash(s.text)}" for s in deps))
        return f"{self._source_key(source)}|{content_hash(text)}"

    def _analyse(self, sources: list[AnySource], views: dict[int, ProjectView], todo: list[int]):
        jobs = self.jobs or min(MAX_AUTO_JOBS, os.cpu_count() or 1)
        if jobs <= 1 or len(todo) < PARALLEL_MIN_FILES or not hasattr(os, "fork"):
            for i in todo:
                with span(f"  {sources[i].path}"):
                    result = self._results_for(sources[i], views[i])
                yield (i, *result)
            return
        from dslint.forkpool import FAILED, run_forked
        global _WORK
        _WORK = (self, sources, views)
        try:
            self._outlines(sources, jobs)
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
                        self._prepare(view)
            sizes = [len(sources[i].text) for i in todo]
            count = max(jobs * CHUNKS_PER_JOB, -(-sum(sizes) // CHUNK_BYTES))
            chunks = [c for c in _contiguous_chunks(todo, sizes, count) if c]
            lost = False
            for k, part in span_iter("analysis (forked)", run_forked(_analyse_chunk, chunks, jobs)):
                if part is FAILED:
                    # a worker died (killed for memory, or a native crash on one file): its files are checked
                    # again, each in a worker of its own. A file whose worker crashes again (SIGSEGV, SIGBUS,
                    # SIGABRT, ...) is reported as its DSL001; one whose worker was killed or failed otherwise
                    # is checked here, as before (a file alone rarely needs the memory of a run of files)
                    if not lost:
                        print("dslint: a worker process died; checking its files one by one",
                              file=sys.stderr)
                        lost = True
                    singles = [[i] for i in chunks[k]]
                    statuses: dict[int, int] = {}
                    part = []
                    for j, single in run_forked(_analyse_chunk, singles, jobs, statuses):
                        i = singles[j][0]
                        if single is not FAILED:
                            part += single
                        elif -statuses.get(j, 0) in _CRASH_SIGNALS:
                            name = signal.Signals(-statuses[j]).name
                            part.append((i, [self._not_analysed(
                                sources[i], f"the process analysing it crashed ({name})")], []))
                        else:
                            part.append((i, *self._results_for(sources[i], views[i])))
                yield from part
        finally:
            _WORK = None

    def _worker_imports(self, sources: list[AnySource]) -> list[str]:
        """The modules that every forked analysis worker would otherwise import for itself (each import paid
        once per worker): the role analysis, the fix builders, and the config model (pydantic) when the run
        has JSON configs and the config rules run."""
        families = {type(r).__module__ for r in self.rules}
        names = ["dslint.program.roles", "dslint.fixes.python"]
        if "dslint.rules.config" in families and any(s.kind == "json" for s in sources):
            names += ["dslint.dsconfig.check", "dslint.dsconfig.top", "dslint.fixes.jsonedit"]
        return names

    @staticmethod
    def _outlines(sources: list[AnySource], jobs: int, while_waiting=None) -> None:
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
        chunks = [c for c in _contiguous_chunks(todo, [len(sources[i].text) for i in todo],
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

    def _prepare(self, project: ProjectView) -> None:
        """Run the families' whole-project analyses once here, so that forked workers inherit them instead of
        each recomputing them (and parsing the files they read). A failure is left to show up, per file and
        rule, when the workers run the rules."""
        from dslint.program.query import Program
        program = Program(project)
        for module in dict.fromkeys(type(r).__module__ for r in self.rules):
            prepare = getattr(sys.modules.get(module), "prepare", None)
            if prepare is not None:
                try:
                    prepare(program)
                except Exception:
                    pass

    def _results_for(self, source: AnySource, project: ProjectView) -> tuple[list[Finding], list[InputError]]:
        partial = Report()
        try:
            with time_budget(self.file_timeout):
                self._check_one(source, project, partial)
        except AnalysisTimeout:
            # whatever the rules had found is dropped with the rest: a partial answer would read as complete
            partial = Report(findings=[self._not_analysed(
                source, f"skipped: analysis exceeded {self.file_timeout:g} s")])
            return partial.findings, partial.errors
        if project.units and isinstance(source, PythonSource):
            for finding in partial.findings:
                _name_units(finding, source, project.units)
        return partial.findings, partial.errors

    def _not_analysed(self, source: AnySource, reason: str) -> Finding:
        """DSL001 for a file whose analysis could not finish (reported even when DSL001 is not selected: the
        file's other findings are missing)."""
        from dslint.rules.parse import ParseError
        return Finding(code="DSL001", name=ParseError.name, severity=ParseError.severity, path=source.path,
                       line=1, column=1, end_line=1, end_column=1, message=f"could not be analysed: {reason}",
                       fix=Fix(description="Split the file, or raise DSLINT_FILE_TIMEOUT (seconds per file)."
                               if reason.startswith("skipped") else "Report it to dslint with the file."))

    def _check_one(self, source: AnySource, project: ProjectView, report: Report) -> None:
        suppressions = parse_suppressions(source.text, source.kind)
        errors_before = len(report.errors)
        per_file = self.settings.ignored_for(source.path)
        broken = source.parse_problem() is not None
        ctx = RuleContext(source, project)
        one_process = None
        for rule in self.rules:
            if source.kind not in rule.kinds or (broken and rule.code != "DSL001"):
                continue
            if rule.needs_ranks:
                if one_process is None:
                    one_process = project.runs_one_process(source)
                if one_process:
                    continue
            try:
                if not rule.wants(ctx):
                    continue
                diagnostics = list(rule.check(ctx))
                for diag in diagnostics:
                    if not diag.evidence:
                        _family_evidence(rule, ctx, diag)
            except Exception as exc:  # a broken rule must not lose the other rules' findings
                report.errors.append(_internal_error(rule, source.path, exc))
                continue
            for diag in diagnostics:
                code = diag.code or rule.code
                enabled = self.settings.code_enabled(code)
                if code in per_file or not enabled and not self._judging:
                    continue
                try:
                    finding = _finding(rule, diag, source)
                except Exception as exc:
                    report.errors.append(_internal_error(rule, source.path, exc))
                    continue
                if finding.path == source.path and suppressions.covers(code, finding.line):
                    continue
                if enabled:
                    report.findings.append(finding)
        if not broken and source.parse_problem() is not None:
            # libcst rejected, when a rule read the tree, a file CPython compiles: the rules saw an empty module
            parse_rule = next((r for r in self.rules if r.code == "DSL001"), None)
            if parse_rule is not None and "DSL001" not in per_file:
                finding = _finding(parse_rule, next(iter(parse_rule.check(ctx))), source)
                if not suppressions.covers("DSL001", finding.line) and self.settings.code_enabled("DSL001"):
                    report.findings.append(finding)
        if not broken:      # the rules did not run on a file that does not parse: nothing to judge by
            self._report_unused(source, suppressions, per_file, report, errors_before)

    def _report_unused(self, source: AnySource, suppressions, per_file: set[str], report: Report,
                       errors_before: int) -> None:
        """DSL002: directives that suppressed nothing, judged only when every rule they name ran cleanly."""
        rule = next((r for r in self.rules if r.code == "DSL002"), None)
        if rule is None or "DSL002" in per_file or source.kind not in rule.kinds \
                or len(report.errors) > errors_before:
            return
        ran = {r.code for r in self.rules}
        for d in suppressions.unused():
            if "*" not in d.codes and not d.codes <= ran:
                continue
            what = "any finding" if "*" in d.codes else ", ".join(sorted(d.codes))
            scope = "in this file" if d.file_level else "on its line" + (" or the next" if len(d.targets) > 1 else "")
            diag = Diagnostic(f"unused suppression: no {what} {scope} to suppress", (d.line, d.column))
            if not suppressions.covers("DSL002", d.line):
                report.findings.append(_finding(rule, diag, source))


# per-source memos that hold what other files of a view gave (keyed by their ids): dropped when a source is
# carried into the next run, whose files are other objects (and may reuse those ids)
_VIEW_MEMOS = ("_dslint_pyconfig",)


def _carry_over(previous: list, sources: list[AnySource], overrides: dict[str, str]) -> list[AnySource]:
    """The sources of a re-check (dslint.fixes: a fix round's texts in place of the files): a file whose text
    is the one the previous run checked is that run's source (its parses, outline, facts and the other
    facts of its text kept, the memos of `_VIEW_MEMOS` dropped); a Python file whose text changed is a new
    source that builds its libcst tree from the previous one's, parsing only the top-level statements the
    change touches (`sources.spliced_module`, which falls back to a whole parse where that could differ)."""
    from dataclasses import fields, replace
    before = {(s.path, s.kind): s for s in previous}
    out = []
    for src in sources:
        text = overrides.get(src.path, src.text)
        old = before.get((src.path, src.kind))
        if old is not None and type(old) is type(src) and old.text == text and all(
                getattr(old, f.name) == getattr(src, f.name) for f in fields(src) if f.name != "text"):
            for name in _VIEW_MEMOS:
                old.__dict__.pop(name, None)
            out.append(old)
            continue
        if text is not src.text:
            src = replace(src, text=text)
        if isinstance(src, PythonSource) and isinstance(old, PythonSource) and "module" in old.__dict__ \
                and old.too_complex is None and not {"_libcst_error", "_cpython_rejects"} & old.__dict__.keys():
            src.__dict__["_derived_from"] = old
        out.append(src)
    return out


def _strings(value) -> bool:
    return isinstance(value, list) and all(type(v) is str for v in value)


def _facts_entry(entry: dict) -> bool:
    """A program-facts entry of the result cache has the shape `_program` writes."""
    return entry.get("compiles") is False or (entry.get("compiles") is True and _strings(entry.get("imports"))
                                               and type(entry.get("runs")) is bool and _strings(entry.get("refs"))
                                               and _strings(entry.get("args")) and type(entry.get("argv")) is bool
                                               and _strings(entry.get("flags")))


def _cached_results(entry: Optional[dict]) -> Optional[tuple[list[Finding], list[InputError]]]:
    """A file's findings and errors from its result-cache entry; None where the entry is not one (a wrong
    shape, a value a finding cannot hold): the file is analysed again and the entry written over."""
    if entry is None or not isinstance(entry.get("findings"), list) or not isinstance(entry.get("errors"), list):
        return None
    try:
        findings = [Finding.model_validate(f) for f in entry["findings"]]
        errors = [InputError.model_validate(e) for e in entry["errors"]]
    except Exception:
        return None
    texts = [x for f in findings for x in (f.code, f.name, f.path, f.message, *(s.path for s in f.trace),
                                           *(s.note for s in f.trace))] + [x for e in errors for x in (e.path, e.message)]
    return (findings, errors) if all(type(x) is str for x in texts) else None


def _internal_error(rule: Rule, path: str, exc: BaseException) -> InputError:
    if os.environ.get("DSLINT_DEBUG") == "1":       # `dslint --debug`
        sys.stderr.write(f"{path}: rule {rule.code}:\n" + "".join(traceback.format_exception(exc)))
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
    return InputError(kind="internal-error", path=path, code=rule.code,
                      message=f"internal error in rule {rule.code} {rule.name}: {type(exc).__name__}: {exc}{where}")


_UNIT_FAMILIES = ("DSL1", "DSL2", "DSL3")


def _name_units(finding: Finding, source: PythonSource, units: list) -> None:
    """A collective-hazard finding in a module that launch units import says which of them make it
    hazardous: those holding a file its trace or message cites (else every unit that reaches the file).
    Nothing is added in the entry script itself."""
    if not finding.code.startswith(_UNIT_FAMILIES) or any(u.entry is source for u in units):
        return
    cited = {step.path for step in finding.trace} | {finding.path}
    named = [u for u in units if any(f.path in cited or f.path in finding.message for f in u.files
                                     if f is not source)] or units
    for unit in named[:3]:
        if unit.launches:
            sh, launch = unit.launches[0]
            where, line = sh.path, launch.line
        else:
            where, line = unit.entry.path, 1
        finding.trace.append(TraceStep(path=where, line=line, note=f"hazardous when {unit.entry.path} runs"
                                       + (f" (launched by {sh.path}:{line})" if unit.launches else "")))
    if len(named) > 3:
        finding.trace.append(TraceStep(path=named[3].entry.path, line=1, note=f"and {len(named) - 3} more launch units"))


def _contiguous_chunks(items: list[int], sizes: list[int], count: int) -> list[list[int]]:
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


def _family_rule(rule: Rule, code: str) -> Optional[type[Rule]]:
    """The class of a code emitted by another rule of the same family (without importing every family)."""
    module = sys.modules.get(type(rule).__module__)
    return next((obj for obj in vars(module).values() if isinstance(obj, type) and issubclass(obj, Rule)
                 and getattr(obj, "code", None) == code), None) if module else None


def _finding(rule: Rule, diag: Diagnostic, source: AnySource) -> Finding:
    from dslint.rules import rule_by_code

    where = diag.source or source
    span = span_of(where, diag.at)
    code = diag.code or rule.code
    owner = type(rule) if code == rule.code else (_family_rule(rule, code) or rule_by_code(code) or type(rule))
    trace = []
    for hop in diag.trace:
        hop_src = hop.source or source
        trace.append(TraceStep(path=hop_src.path, line=span_of(hop_src, hop.at).line, note=hop.note))
    fix = diag.fix
    if fix is None and owner.fix_advice:
        fix = Fix(description=owner.fix_advice)
    return Finding(code=code, name=owner.name, severity=diag.severity or owner.severity, path=where.path,
                   line=span.line, column=span.column, end_line=max(span.end_line, span.line),
                   end_column=span.end_column if span.end_line > span.line else max(span.end_column, span.column),
                   message=diag.message, trace=trace, fix=fix, evidence=_evidence(diag, source), proven=diag.proven)


def _family_evidence(rule: Rule, ctx: RuleContext, diag: Diagnostic) -> None:
    """Evidence for a diagnostic its rule gave none (`dslint.rules.evidence.family_evidence`)."""
    from dslint.rules.evidence import family_evidence
    clues, proven = family_evidence(diag.code or rule.code, ctx, diag)
    diag.evidence = clues
    if proven is not None:
        diag.proven = diag.proven and proven


def _evidence(diag: Diagnostic, source: AnySource) -> list[Evidence]:
    """The diagnostic's clues (`rules.base.Clue`, or anything with its fields: `collective_sites.Fact`) as
    located evidence, in order, without repeats."""
    out: list[Evidence] = []
    seen: set[tuple] = set()
    for clue in diag.evidence:
        path, line = clue.path, None
        number = clue.at if isinstance(clue.at, int) and not isinstance(clue.at, bool) else None
        if clue.source is not None or clue.at is not None and clue.path is None:
            where = clue.source or source
            path = where.path
            if number is not None:
                line = number
            elif clue.at is not None:
                try:
                    line = span_of(where, clue.at).line
                except Exception:
                    line = None
        elif number is not None:
            line = number
        key = (clue.kind, clue.note, path, line, clue.found)
        if key not in seen:
            seen.add(key)
            out.append(Evidence(kind=clue.kind, note=clue.note, path=path, line=line, found=clue.found))
    return out


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
