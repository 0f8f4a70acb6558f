"""Before stage 2 of a check (`dslint.pipeline`): which rules run, and which files they need. The rules follow
from the settings and the kinds of the files checked (`select_rules`); a Python file none of their trigger
words occurs in is triaged out (`Triage`), unless it is DSL001's (a syntax error, a file no parser may read)."""

from __future__ import annotations

import re
from typing import Optional

from dslint.config import Settings
from dslint.pipeline.rule_runs import judging
from dslint.rules import all_rules
from dslint.rules.base import Rule
from dslint.sources import AnySource, PythonSource
from dslint.sources.astsplice import compile_ast
from dslint.sources.wordsearch import alternation


def select_rules(settings: Settings, sources: list[AnySource]) -> list[Rule]:
    """The enabled rules for the kinds of `sources` (default ones and those selected; with DSL002 selected,
    every default rule not ignored runs as a judge of the suppressions)."""
    kinds = frozenset(s.kind for s in sources) or frozenset({"python"})
    ignored = settings.ignore
    judge = judging(settings)
    return [cls() for cls in all_rules(kinds)
            if settings.code_enabled(cls.code) and (cls.default_enabled or cls.code in settings.select)
            or judge and cls.default_enabled and not any(cls.code.startswith(p) or p == "ALL" for p in ignored)]


def parse_rule_added(settings: Settings, rules: list[Rule]) -> list[Rule]:
    """DSL001, where files could not be decoded and the selection left it out (enabled, not yet in `rules`)."""
    if any(r.code == "DSL001" for r in rules):
        return []
    return [cls() for cls in all_rules(frozenset({"python"})) if cls.code == "DSL001" and settings.code_enabled("DSL001")]


class Triage:
    """Which sources the rules need: every config and launcher script; a Python file where a trigger word of
    an enabled rule occurs in its text (every file when some rule declares none), or that DSL001 reports."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self._pattern: Optional[re.Pattern] = None
        self._built = False
        self._no_python_rules = False

    @property
    def pattern(self) -> Optional[re.Pattern]:
        """One pattern of every enabled rule's trigger words; None when some rule needs every file."""
        if not self._built:
            self._built = True
            if all(r.triggers for r in self.rules if "python" in r.kinds and r.code != "DSL001"):
                words: set[str] = set()
                for r in self.rules:
                    if r.code != "DSL001":
                        words.update(r.triggers)
                self._pattern = re.compile(alternation(words)) if words else None
                self._no_python_rules = not words
        return self._pattern

    def relevant(self, source: AnySource) -> bool:
        if not isinstance(source, PythonSource):
            return True
        pattern = self.pattern
        # a function of the text and the rules' trigger words: kept on a source carried into the next run
        key = (pattern.pattern if pattern is not None else None, self._no_python_rules)
        memo = source.__dict__.get("_dslint_relevant")
        if memo is not None and memo[0] == key:
            return memo[1]
        relevant = self._relevant_text(source, pattern)
        source.__dict__["_dslint_relevant"] = (key, relevant)
        return relevant

    def _relevant_text(self, source: PythonSource, pattern: Optional[re.Pattern]) -> bool:
        if pattern is None and not self._no_python_rules:
            return True
        if pattern is not None and pattern.search(source.text):
            return True
        # triaged out: no rule can flag it or needs its facts -- but a syntax error is still DSL001, and so is a
        # file no parser may read (dslint.sources.guard)
        if source.too_complex is not None:
            return True
        try:
            compile_ast(source.text, source.path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return True
        return False
