"""The rule catalogue. Each family module defines Rule subclasses; this registry lists them by code.

Codes are a public contract (DESIGN.md §2.2): keep them, add new ones rather than renumber.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from dslint.rules.base import Rule

# family modules and the input kinds their rules read (a run imports only the families its inputs need;
# tests/test_docs.py checks this table against the rule classes)
FAMILIES = {
    "dslint.rules.parse": frozenset({"python", "json", "shell"}),
    "dslint.rules.collectives": frozenset({"python"}),
    "dslint.rules.moe": frozenset({"python"}),
    "dslint.rules.params": frozenset({"python"}),
    "dslint.rules.config": frozenset({"json", "python"}),
    "dslint.rules.launch": frozenset({"shell"}),
}


# families that failed to import: (module, error). A broken family must not take the others down;
# the engine reports these as internal errors (exit 3).
FAMILY_ERRORS: list[tuple[str, str]] = []


@lru_cache(maxsize=None)
def all_rules(kinds: frozenset[str] | None = None) -> tuple[type[Rule], ...]:
    """Every rule, or only those of the families that read one of `kinds`."""
    found: dict[str, type[Rule]] = {}
    for name, family_kinds in FAMILIES.items():
        if kinds is not None and not family_kinds & kinds:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:      # family not written (yet)
                continue
            if not any(n == name for n, _ in FAMILY_ERRORS):
                FAMILY_ERRORS.append((name, f"{type(exc).__name__}: {exc}"))
            continue
        except Exception as exc:
            if not any(n == name for n, _ in FAMILY_ERRORS):
                FAMILY_ERRORS.append((name, f"{type(exc).__name__}: {exc}"))
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == name \
                    and getattr(obj, "code", None):
                if obj.code in found:
                    raise RuntimeError(f"duplicate rule code {obj.code}: {found[obj.code]} and {obj}")
                found[obj.code] = obj
    return tuple(sorted(found.values(), key=lambda r: r.code))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((r for r in all_rules() if r.code == code.upper()), None)
