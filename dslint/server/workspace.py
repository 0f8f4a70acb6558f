"""The language server's analysis, without the protocol (no pygls here): which workspace folder a document
belongs to, that folder's settings and its engine `Checker`, and a run that checks the folder with the open
documents' texts in place of the files.

A folder is checked as `dslint check <folder>` checks it (the same `Checker`: launch units, configs and launcher
lines of the whole folder, `[tool.dslint]` of the folder's pyproject.toml), but a run reports only the open
documents (`Checker.analyse_only`). The first run of a folder reads its files; a re-check after an edit starts
from the previous run's sources (`Checker.recheck` → `pipeline.gather.carry_over`: unchanged files keep their parses and
outlines, the edited Python file re-parses only the top-level statements its edit touches). The files are read
again when the disk may have changed (a save, a watched-file event, a closed document whose buffer differed).
With a result cache (`cache_dir`: the server's default is `check`'s, $DSLINT_CACHE_DIR or ~/.cache/dslint), a
document whose context did not change since a run (of the server or of `check`) is answered from it, and the
files' program facts are read from it instead of computed.
"""

from __future__ import annotations

import os
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Union

from dslint.findings import Finding, InputError, Report


@dataclass
class FolderRun:
    """What one run of a folder gave: per open document (real path), its findings and the input errors
    located in it."""

    root: Path
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    errors: dict[str, list[InputError]] = field(default_factory=dict)
    crashed: Optional[str] = None          # the run failed as a whole: one line saying why


def real(path: Union[str, Path]) -> str:
    return os.path.realpath(path)


class Folder:
    """One workspace folder: its settings (`[tool.dslint]`), its Checker and the state of the last run."""

    def __init__(self, root: Path, settings_error: Optional[Callable[[str], None]] = None,
                 cache_dir: Optional[Path] = None):
        self.root = Path(real(root))
        self.report_settings_error = settings_error
        self.cache_dir = cache_dir      # the result cache `check` uses (None: none)
        self.checker = None
        # the files must be read again when the disk may have changed since they were read: a change (a save,
        # a watched-file event, a closed buffer) bumps `disk_epoch`, a read records the epoch it started at
        # (a change during a run is not lost)
        self.disk_epoch = 1
        self.read_epoch = 0
        self.looked_for: set[str] = set()   # open documents not among the sources, after a read looked for them
        self.lock = threading.Lock()    # one run of a folder at a time
        self.settings_problem: Optional[str] = None

    def contains(self, path: str) -> bool:
        root = str(self.root)
        return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

    def _new_checker(self):
        from dslint.config import ConfigFileError, Settings, find_pyproject, load_settings
        from dslint.engine import Checker
        self.settings_problem = None
        try:
            # the nearest pyproject.toml with [tool.dslint] at or above the folder, as `dslint check <folder>`
            settings = load_settings(None, [self.root])
        except ConfigFileError as exc:
            settings = None
            self.settings_problem = str(exc)
            if self.report_settings_error is not None:
                self.report_settings_error(f"dslint: {exc} (the defaults are used)")
        if settings is None or find_pyproject([self.root]) is None:
            settings = settings or Settings()
            settings.root = self.root       # paths of the settings are the folder's, not the server's cwd
        # no per-file time budget: SIGALRM works only in the main thread, and the server's runs are in another
        return Checker(settings, cache_dir=self.cache_dir, file_timeout=0)

    def settings_changed(self) -> None:
        """A pyproject.toml may have changed: settings (and so the rules and the cache of sources) start again."""
        self.checker = None
        self.disk_epoch += 1

    def disk_changed(self) -> None:
        self.disk_epoch += 1
        self.looked_for.clear()

    def run(self, texts: dict[str, str], stop: Callable[[], bool] = lambda: False, freeze: bool = False
            ) -> FolderRun:
        """Check the folder with `texts` (real path -> buffer text; the open documents of this folder) in place
        of the files, reporting those documents. Raises `engine.Cancelled` when `stop()` says a newer run made
        this one stale. `freeze`: what the run leaves alive is frozen (`Collector`)."""
        from dslint.sources.inputs import shown_path
        with self.lock:
            if self.checker is None:
                self.checker = self._new_checker()
                self.read_epoch = 0
            checker = self.checker
            shown = {shown_path(Path(p)): p for p in texts}
            overrides = {s: texts[p] for s, p in shown.items()}
            checker.analyse_only = frozenset(shown)
            checker.interrupt = stop
            checker.freeze_after = freeze
            # a document the last read did not find (created since, e.g. saved for the first time) is looked for
            # once by reading the folder again; one the run never reads (excluded, not a kind dslint checks)
            # is then not looked for again until the disk changes
            known = {s.path for s in checker.sources}
            unseen = [s for s in shown if s not in known and s not in self.looked_for]
            try:
                if self.read_epoch != self.disk_epoch or not checker.sources or unseen:
                    epoch = self.disk_epoch
                    report = checker.check_paths([self.root], overrides=overrides)
                    self.read_epoch = epoch
                    self.looked_for.update(unseen)
                else:
                    report = checker.recheck(overrides)
            finally:
                checker.interrupt = None
            return _by_document(self.root, report, shown, os.getcwd())


def _by_document(root: Path, report: Report, shown: dict[str, str], cwd: str) -> FolderRun:
    out = FolderRun(root=root, findings={p: [] for p in shown.values()}, errors={p: [] for p in shown.values()})
    for f in report.findings:
        path = shown.get(f.path) or real(os.path.join(cwd, f.path))
        if path in out.findings:
            out.findings[path].append(f)
    for e in report.errors:
        path = shown.get(e.path) or real(os.path.join(cwd, e.path))
        if path in out.errors:
            out.errors[path].append(e)
    return out


class Workspace:
    """The folders of the workspace (LSP workspace folders, else the root URI), and a folder made on demand for
    a document outside all of them (its own folder, as `dslint check <its folder>` would see it)."""

    def __init__(self, roots: list[Path], settings_error: Optional[Callable[[str], None]] = None,
                 cache_dir: Optional[Path] = None):
        self.report_settings_error = settings_error
        self.cache_dir = cache_dir
        self.folders: list[Folder] = [Folder(r, settings_error, cache_dir) for r in roots]
        self.loose: dict[str, Folder] = {}

    def add(self, root: Path) -> None:
        if not any(f.root == Path(real(root)) for f in self.folders):
            self.folders.append(Folder(root, self.report_settings_error, self.cache_dir))

    def remove(self, root: Path) -> None:
        self.folders = [f for f in self.folders if f.root != Path(real(root))]

    def folder_of(self, path: str) -> Folder:
        path = real(path)
        owners = [f for f in self.folders if f.contains(path)]
        if owners:
            return max(owners, key=lambda f: len(str(f.root)))     # the innermost folder
        parent = os.path.dirname(path)
        folder = self.loose.get(parent)
        if folder is None:
            folder = self.loose[parent] = Folder(Path(parent), self.report_settings_error, self.cache_dir)
        return folder

    def all_folders(self) -> list[Folder]:
        return self.folders + list(self.loose.values())


class Collector:
    """The cyclic garbage collector in a server that holds a workspace's trees between runs.

    A run holds every parsed tree of its folder and keeps them for the next one (millions of objects); Python's
    collector, enabled between runs, walked all of them at each full collection -- 0.45 s per edit on a 252-file
    workspace, on the hot path of the next re-check. After each run (`after_run`) whatever is alive is moved to
    the permanent generation (`gc.freeze`), which no automatic collection walks; objects are still freed by
    reference counting as the next runs drop them. What only a cycle keeps alive is collected lazily
    (`collect`): when the server has been idle `IDLE_S` seconds, or on the next run once `MAX_RUNS` runs went by
    without one (a bound on what cycles can hold meanwhile)."""

    IDLE_S = 5.0
    MAX_RUNS = 50

    def __init__(self) -> None:
        self.runs_since = 0

    def after_run(self) -> None:
        import gc
        gc.freeze()         # done by the run itself before it enables the collector; here also after a failed one
        self.runs_since += 1

    def due(self) -> bool:
        return self.runs_since >= self.MAX_RUNS

    def collect(self) -> None:
        """Unfreeze, collect everything, freeze again (off the hot path: an idle server, or a bounded number of
        runs)."""
        import gc
        if not self.runs_since:
            return
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.runs_since = 0


def crash_line(exc: BaseException) -> str:
    """One line for a run that failed as a whole (the DSL001-style diagnostic's message)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
    message = " ".join(str(exc).split())[:300]
    return f"could not be analysed: internal error: {type(exc).__name__}: {message}{where}"
