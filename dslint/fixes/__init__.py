"""Fixes (issue 22): the data model of the edits a finding carries, and how edits apply.

- `dslint.findings.Edit` / `Fix`: a fix is a list of edits (path, span, replacement) with an applicability
  (ruff's terms): `safe` (`--fix`), `unsafe` (`--fix --unsafe-fixes`), `display` (shown, never applied);
  `manual` fixes only describe the change.
- `python`: edits as libcst transformations (only the changed nodes' text changes), imports added once.
- `jsonedit`: JSON edits on dslint.sources.jsonpos spans (every other byte kept).
- `apply`: merging one file's edits, overlap, one round of the fixed point (`fix_round`).

This package imports neither the engine nor the rules (rules import it to build their fixes). The `--fix` /
`--diff` run, which drives the engine (check, apply, re-check, write), is `dslint.fix_command`, beside the
commands that use it.
"""
