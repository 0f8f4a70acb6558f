"""Stage 2 of a check (`dslint.pipeline`): the project view's launch units and the view each file is checked
in. Each Python file's `FileFacts` (its imports, whether it runs by itself, the config paths and arguments
files its code names) come from the result cache by content, else from its outline (built by the outline
workers on big runs, `dslint.pipeline.workers.build_outlines`) and the config references its calls evaluate;
the launch units (`dslint.program.units.Program`) are built from them. A Python file is then checked in its
launch-unit context (the files of the units that reach it, their configs and launcher lines), a config or a
launcher script in the run's view."""

from __future__ import annotations

import os
from typing import Optional

from dslint.pipeline.run_cache import RunCache
from dslint.pipeline.workers import WhileOutlining, build_outlines, worker_imports
from dslint.program.project_view import ProjectView
from dslint.program.units import FileFacts, Program
from dslint.rules.base import Rule
from dslint.sources import AnySource, PythonSource, ShellSource
from dslint.timeline import span

FACTS_MEMO = "_dslint_program_facts"     # a Python source's `FileFacts` (None: it does not compile), kept on it


def build_program(sources: list[AnySource], project: ProjectView, cache: Optional[RunCache], jobs: int,
                  rules: list[Rule]) -> None:
    """The run's launch units, set on `project.program`. An `__init__.py` that no rule needs still links a
    script to what it imports, so every compiled Python file takes part. `jobs` > 1: the outlines the cache
    does not answer are built by forked workers."""
    python = [s for s in sources if isinstance(s, PythonSource)]
    facts: dict[int, FileFacts] = {}
    missing: list[tuple[PythonSource, str]] = []
    for src in python:
        if FACTS_MEMO in src.__dict__:
            # a source carried over from the previous run (`gather.carry_over`): its facts are its text's, as the
            # cache's entries keyed by content are
            if src.__dict__[FACTS_MEMO] is not None:
                facts[id(src)] = src.__dict__[FACTS_MEMO]
            continue
        key = cache.facts_key(src) if cache else ""
        hit = cache.facts(key) if cache else None
        if hit is None:
            missing.append((src, key))
        else:
            src.__dict__[FACTS_MEMO] = hit[1]
            if hit[0]:
                facts[id(src)] = hit[1]
    if jobs > 1 and hasattr(os, "fork"):
        with span("outlines (forked)"):
            build_outlines([s for s, _ in missing] + [s for s in sources if isinstance(s, ShellSource)], jobs,
                           WhileOutlining(worker_imports(rules, sources), [s for s, _ in missing], project))
    with span("config references (serial)"):
        config_references(missing, project, facts, cache)
    project.program = Program([s for s in python if id(s) in facts], project.shell, facts)


def config_references(missing: list[tuple[PythonSource, str]], project: ProjectView, facts: dict[int, FileFacts],
                      cache: Optional[RunCache]) -> None:
    """The facts of the files the cache did not answer (`missing`: (source, its facts key)), into `facts` and
    the cache."""
    from dslint.program.outline import PairingError      # not dslint.program.facts: a cached run never imports libcst
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
        src.__dict__[FACTS_MEMO] = found
        if found is not None:
            facts[id(src)] = found
        if cache:
            cache.put_facts(key, found)


def views_for(relevant: list[AnySource], todo: list[int], project: ProjectView) -> dict[int, ProjectView]:
    """The view each file to analyse (`todo`: indices into `relevant`) is checked in: a Python file in its
    launch-unit context, a config or launcher script in the run's view. Files of one context share a view."""
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
