"""`dslint check --fix / --diff`: check, apply the applicable fixes in memory, re-check, repeat to a fixed
point; then write the changed files (or print their diff). The fix loop drives the engine, so it lives beside
the commands that use it (`dslint.commands`), above the engine; what a fix is and how edits apply (the data
model rules produce) is below it, in `dslint.findings` (`Edit`, `Fix`) and `dslint.fixes`.

- Every round re-checks the whole run with the changed texts in place of the files (nothing is written
  until the end), so each fix is computed on the text it applies to and a fix that a previous round made
  moot is not applied. The re-check starts from the previous check's sources (`pipeline.gather.carry_over`:
  unchanged files keep their parses; a changed Python file re-parses only the top-level statements its
  edits touch, `sources.spliced_module`).
- A round whose result no longer parses (Python: CPython's parser, as the re-check's outline found it; JSON:
  dslint's reader) where the input did is undone for that file, and the file gets no further fixes.
- Writes (`write_fixed`): only files with an applied fix; the file must hold exactly the text that was
  checked (else it changed during the run and is left alone); the real path (symlinks resolved) must lie
  inside a checked path; a temporary file in the same folder, fsynced, then renamed over the file (its
  mode kept; a UTF-8 BOM kept).
"""

from __future__ import annotations

import difflib
import gc
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from dslint.engine import Checker
from dslint.findings import Report
from dslint.fixes.apply import MAX_ROUNDS, fix_round


@dataclass
class FixOutcome:
    report: Report                               # the findings left after the fixes
    originals: dict[str, str]                    # path -> text that was checked (every checked file)
    texts: dict[str, str] = field(default_factory=dict)    # path -> fixed text (changed files only)
    fixed: int = 0                               # findings whose fix was applied
    rounds: int = 0
    broken: list[str] = field(default_factory=list)        # files whose fixes were undone (no longer parsed)
    applied: list = field(default_factory=list)            # the findings whose fix was applied


def _parses(path: str, text: str, kind: str) -> bool:
    if kind == "python":
        try:
            from dslint.sources.astsplice import compile_ast
            compile_ast(text, path)
        except (SyntaxError, ValueError, RecursionError):
            return False
        return True
    if kind == "json":
        from dslint.sources.jsonpos import JsonPositionError, load_positioned
        try:
            load_positioned(text)
        except (JsonPositionError, RecursionError):
            return False
    return True


def parsed_in(checker: Checker) -> Callable[[str, str], Optional[bool]]:
    """Whether a text parsed, as `checker`'s last check learnt it (`Checker.parsed`: the outline that check
    built, or the result cache's facts of that text); None when it did not (then `_parses` compiles it)."""
    def parsed(path: str, text: str) -> Optional[bool]:
        for src in checker.sources:
            if src.path == path and src.kind == "python" and (src.text is text or src.text == text):
                return checker.parsed(src)
        return None
    return parsed


def run_fixes(checker: Checker, paths: list[Path], unsafe: bool) -> FixOutcome:
    """Check `paths` with `checker`, then fix to a fixed point. Each re-check starts from
    the previous check's sources (`pipeline.gather.carry_over`: unchanged files keep their parses, a changed Python
    file re-parses only the statements its edits touch)."""
    report = checker.check_paths(paths)
    sources = list(checker.sources)
    return fix_loop(lambda texts: checker.check_paths(paths, overrides=texts), report,
                    {s.path: s.text for s in sources}, {s.path: s.kind for s in sources}, unsafe,
                    parsed_in(checker))


def fix_loop(check: Callable[[dict], Report], report: Report, originals: dict[str, str], kinds: dict[str, str],
             unsafe: bool, parsed: Optional[Callable[[str, str], Optional[bool]]] = None) -> FixOutcome:
    """Rounds of `fix_round` on `report`, each followed by `check(texts)` (a re-check of the run with the
    changed texts in place of the files), until no applicable fix is left.

    A file that parsed and no longer does after a round is put back as it was and gets no further fixes.
    `parsed(path, text)` says whether a text parsed as the last `check` saw it (None: unknown); what it does
    not know is parsed here (`_parses`). So a Python file is parsed once per round -- by the re-check, which
    needs its tree anyway -- and a round that broke a file costs one more re-check, without it."""
    out = FixOutcome(report=report, originals=originals)
    frozen: set[str] = set()

    def parses(path: str, text: str) -> bool:
        known = parsed(path, text) if parsed is not None else None
        return _parses(path, text, kinds.get(path, "")) if known is None else known

    for _ in range(MAX_ROUNDS):
        rnd = fix_round(report, lambda p: None if p in frozen else out.texts.get(p, originals.get(p)), unsafe)
        changed = dict(rnd.texts)
        result = None
        while changed:
            applied = [f for f in rnd.applied if all(e.path in changed for e in f.fix.edits)]
            if not applied:
                break
            result = check({**out.texts, **changed})
            # the text before the round is parsed only when the new one does not parse (rarely)
            broken = [path for path, text in changed.items()
                      if not parses(path, text) and parses(path, out.texts.get(path, originals[path]))]
            if not broken:
                break
            for path in broken:         # undone for that file; the others' fixes are checked again without it
                frozen.add(path)
                out.broken.append(path)
                del changed[path]
            result = None
        if result is None:
            break
        out.texts.update(changed)
        out.fixed += len(applied)
        out.applied += applied
        out.rounds += 1
        report = result
    out.report = report
    return out


def unified_diff(path: str, before: str, after: str) -> str:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    lines = []
    for line in difflib.unified_diff(a, b, fromfile=f"a/{path}", tofile=f"b/{path}"):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def checked_roots(paths: list[Path]) -> list[Path]:
    """The real folders a fix may write into: each folder given, the folder of each file given."""
    roots = []
    for p in paths:
        roots.append(Path(os.path.realpath(p if p.is_dir() else (p.parent if str(p.parent) else Path(".")))))
    return roots


def inside(real: Path, roots: list[Path]) -> bool:
    return any(real == r or r in real.parents for r in roots)


@dataclass
class WriteResult:
    written: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)      # (path, why)


def write_fixed(outcome: FixOutcome, paths: list[Path]) -> WriteResult:
    result = WriteResult()
    roots = checked_roots(paths)
    for path, text in sorted(outcome.texts.items()):
        why = _write_one(Path(path), outcome.originals[path], text, roots)
        if why:
            result.refused.append((path, why))
        else:
            result.written.append(path)
    return result


def _write_one(path: Path, original: str, text: str, roots: list[Path]) -> Optional[str]:
    real = Path(os.path.realpath(path))
    if not inside(real, roots):
        return f"resolves to {real}, outside the checked paths (a symlink); not written"
    try:
        data = real.read_bytes()
        mode = os.stat(real).st_mode & 0o7777
    except OSError as exc:
        return f"cannot be read back ({exc.strerror or exc}); not written"
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        current = (data[3:] if bom else data).decode("utf-8")
    except UnicodeDecodeError:
        current = None
    if current != original:
        return "changed during the run; not written"
    payload = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".dslint-fix", dir=real.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"could not be written ({exc.strerror or exc})"
    return None


def fix_run(checker: Checker, paths: list[Path], unsafe: bool, write: bool) -> tuple[FixOutcome, WriteResult]:
    """The `--fix`/`--fix-only` (write=True) and `--diff` (write=False) run. When a file could not be written,
    the report is that of the files as they are on disk. The cyclic garbage collector is off for the run, as
    in `Checker.check_sources` (the parsed trees are kept until the end, and a parse between two checks would
    otherwise make it traverse them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        outcome = run_fixes(checker, paths, unsafe)
    finally:
        if enabled:
            gc.enable()
    result = WriteResult()
    if write and outcome.texts:
        result = write_fixed(outcome, paths)
        if result.refused:
            outcome.report = checker.check_paths(paths)
            outcome.fixed = sum(1 for f in outcome.applied if f.path in result.written) if outcome.applied else 0
    if write:
        outcome.report.fixes = {"applied": outcome.fixed, "remaining": len(outcome.report.findings),
                                "files": sorted(result.written),
                                "not_written": [f"{p} ({why})" for p, why in result.refused],
                                "unsafe_held_back": held_back(outcome.report, unsafe)}
    return outcome, result


def held_back(report: Report, unsafe: bool) -> int:
    """The findings left whose fix is `unsafe` and was not applied because `--unsafe-fixes` was not given."""
    if unsafe:
        return 0
    return sum(1 for f in report.findings if f.fix is not None and f.fix.applicability == "unsafe" and f.fix.edits)


def diffs(outcome: FixOutcome) -> str:
    return "".join(unified_diff(p, outcome.originals[p], t) for p, t in sorted(outcome.texts.items()))
