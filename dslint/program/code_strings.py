"""Code handed over as a string: `cProfile.runctx("train()", globals(), locals())`, `exec("main()")`.

The standard library's profilers (`cProfile.run/runctx`, `profile.run/runctx`) and the builtins `exec`/`eval` run
the source text of their first argument in the caller's namespaces, once, before they return. A function called
by name in that text is called at the runner's call site as surely as a direct call there (a rank-0 branch that
profiles `train()` and a branch that calls it directly both run `train()`). This module reads such a string
(parsed with CPython's parser, never run) and names the functions it calls by a bare name; the outline's
pre-filters (`Outline.name_args`) and the collective sites (`CollectiveSites._callback_site`) follow them as
hand-overs. The runners are fixed by their API, resolved through the file's imports: a project function that
happens to be called `run` is not one.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Optional

# resolved callee -> the position of the code text among the positional arguments (all take it first)
CODE_RUNNERS = frozenset({"cProfile.run", "cProfile.runctx", "profile.run", "profile.runctx", "exec", "eval"})


def runs_code_text(callee: Optional[str]) -> bool:
    """Is the resolved callee one that runs its first argument as code in the caller's namespaces?"""
    return callee in CODE_RUNNERS


@lru_cache(maxsize=256)
def called_names(text: str) -> tuple[str, ...]:
    """The bare names the code text calls (`"train()"` -> ("train",)), in order; () when it does not parse."""
    try:
        tree = ast.parse(text, mode="exec")
    except (SyntaxError, ValueError):
        return ()
    out: list[str] = []
    for node in ast.walk(tree):
        if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id not in out:
            out.append(node.func.id)
    return tuple(out)
