"""Fixes (issue 22): the edits a finding carries and how a run applies them.

- `dslint.findings.Edit` / `Fix`: a fix is a list of edits (path, span, replacement) with an applicability
  (ruff's terms): `safe` (`--fix`), `unsafe` (`--fix --unsafe-fixes`), `display` (shown, never applied);
  `manual` fixes only describe the change.
- `python`: edits as libcst transformations (only the changed nodes' text changes), imports added once.
- `jsonedit`: JSON edits on dslint.sources.jsonpos spans (every other byte kept).
- `apply`: merging one file's edits, overlap, the round-by-round fixed point.
- `session`: the `--fix`/`--diff` run (re-checks in memory, atomic writes, refusals, unified diffs).

This package imports neither the engine nor the rules (rules import it to build their fixes).
"""
