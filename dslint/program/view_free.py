"""Results a launch unit's view computes that depend on one file and a few lookups, shared by every view.

A repository of many launch scripts over one package checks each script in a view of its own (its launch
units' files, `dslint.program.units`), and a whole-project analysis of that view (`ProjectTaint`) asks the same
question of every package module again: what does this module bind at module level to a rank-varying value?
Whether the answer depends on the view is not decided by reading the code but by watching the computation: it
runs on the file's own evaluator with the view-wide analysis behind a `Watch`. The watch lets through a few
named lookups (`queries`: which checked function or class a call names) and records each with its answer;
any other use of the analysis (a summary, a table of the view, another file's facts) marks the run as the
view's own. A run that used nothing else is a function of the file's text and of those answers: it is kept on
the source with its questions (`per_source`), and a later view takes it when asking the same questions there
gives the same answers (the same objects); otherwise that view computes its own, as before. The watched run
forwards every question unchanged, so its answer is the unwatched one in either case.
"""

from __future__ import annotations

from typing import Any, Callable

_VARIANTS = 4       # answers kept per source and key (one per set of lookup answers seen)


class Watch:
    """A stand-in for an analysis object that forwards every attribute read and write to it. A method named in
    `queries` is called through and its call recorded with the answer (`questions`); any other use is
    remembered (`asked`)."""

    __slots__ = ("_target", "_asked", "_queries", "_questions")

    def __init__(self, target: Any, queries: frozenset = frozenset()) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_asked", False)
        object.__setattr__(self, "_queries", queries)
        object.__setattr__(self, "_questions", [])

    def __getattribute__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_target")
        if name in object.__getattribute__(self, "_queries"):
            method = getattr(target, name)
            questions = object.__getattribute__(self, "_questions")

            def ask(*args: Any, **kwargs: Any) -> Any:
                answer = method(*args, **kwargs)
                questions.append((name, args, kwargs, answer))
                return answer
            return ask
        object.__setattr__(self, "_asked", True)
        return getattr(target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, "_asked", True)
        setattr(object.__getattribute__(self, "_target"), name, value)

    def __delattr__(self, name: str) -> None:
        object.__setattr__(self, "_asked", True)
        delattr(object.__getattribute__(self, "_target"), name)


def asked(watch: Watch) -> bool:
    """Did anything use the watched analysis other than through its recorded lookups?"""
    return object.__getattribute__(watch, "_asked")


def questions(watch: Watch) -> list:
    """The recorded lookups: (method name, positional arguments, keyword arguments, answer)."""
    return object.__getattribute__(watch, "_questions")


def _same(a: Any, b: Any) -> bool:
    """The same answer: the same objects, element by element for a tuple; equal strings, numbers, None."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) in (str, int, bool, float) and a == b


def _still(asked_before: list, analysis: Any) -> bool:
    """Does `analysis` answer every recorded lookup as it was answered then?"""
    return all(_same(getattr(analysis, name)(*args, **kwargs), answer) for name, args, kwargs, answer in asked_before)


def per_source(src: Any, key: str, analysis: Any, compute: Callable[[Any], Any],
               queries: frozenset = frozenset()) -> Any:
    """`compute(analysis)` for one source. `compute` receives the analysis behind a `Watch` letting `queries`
    through, and must reach the rest of the view only through it. A run that used the analysis only through
    those lookups is kept on the source (under `key`) with its lookups; a later call whose analysis answers
    them alike takes it instead of computing."""
    kept = src.__dict__.get(key)
    for out, asked_before in kept or ():
        if _still(asked_before, analysis):
            return out
    watch = Watch(analysis, queries)
    out = compute(watch)
    if not asked(watch):
        kept = src.__dict__.setdefault(key, [])
        if len(kept) < _VARIANTS:
            kept.append((out, tuple(questions(watch))))
    return out
