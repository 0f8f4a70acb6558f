"""`dslint server`: the Language Server Protocol front end (pygls, stdio) over `dslint.server.workspace`.

- Diagnostics are pushed (`textDocument/publishDiagnostics`) for the open documents after an open, an edit
  (debounced: `debounce_ms`, default 150, from the client's `initializationOptions`) and a save. A run checks
  the document's workspace folder as `dslint check <folder>` would (launch units, configs, launchers, the
  folder's `[tool.dslint]`), with the open buffers in place of the files, and reports the open documents.
- A newer edit makes a running check stale: the engine stops it between phases, files and rules
  (`Checker.interrupt` → `engine.Cancelled`) and the newest texts are checked; a stale result is never
  published.
- A run that fails as a whole publishes, on each of its documents, one DSL001 error "could not be analysed:
  internal error: ..." (a rule's crash is already a per-file error of the engine, published the same way);
  the folder's state is dropped and the server goes on.
- A finding's trace becomes the diagnostic's `relatedInformation`; its fix (edits) a code action: `safe`
  fixes are plain quick fixes (preferred), `unsafe` ones are titled "(unsafe: may change behaviour)" with the
  kind `quickfix.dslint.unsafe`, `display` ones "(suggestion: review it)"; advice without edits is none.
- Hover over a diagnostic or over a code written in the file (`# dslint: ignore[DSL104]`) shows `dslint
  explain` for it.

Positions: dslint's columns are characters (code points); they are converted to the encoding negotiated with
the client (UTF-16 unless the client offers another) on the text that was checked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from dslint import __version__
from dslint.findings import Finding, InputError
from dslint.server.workspace import Collector, Folder, FolderRun, Workspace, crash_line, real

DEBOUNCE_MS = 150
UNSAFE_KIND = "quickfix.dslint.unsafe"
SUGGESTION_KIND = "quickfix.dslint.suggestion"
_CODE = re.compile(r"DSL\d{3}")
log = logging.getLogger("dslint.server")


def uri_to_path(uri: str) -> Optional[str]:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return real(unquote(parsed.path))


@dataclass
class Published:
    """What was published for a document: the text checked, and each diagnostic with its finding."""

    text: str
    version: Optional[int]
    items: list            # [(lsp.Diagnostic, Finding | InputError)]


class DslintServer(LanguageServer):
    def __init__(self, cache_dir: Optional[Path] = None) -> None:
        super().__init__("dslint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.dslint: Optional[Workspace] = None
        self.cache_dir = cache_dir
        self.debounce = DEBOUNCE_MS / 1000
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dslint-check")
        self.generation: dict[int, int] = {}          # id(folder) -> edits seen
        self.timers: dict[int, asyncio.TimerHandle] = {}
        self.running: dict[int, asyncio.Future] = {}
        self.published: dict[str, Published] = {}
        self.shutting_down = False
        self.collector = Collector()          # the cyclic collector, kept off the hot path
        self.idle: Optional[asyncio.TimerHandle] = None

    # --- documents --------------------------------------------------------------------------------
    def open_texts(self, folder: Folder) -> tuple[dict[str, str], dict[str, tuple[str, Optional[int]]]]:
        """The open documents of `folder`: real path -> text, and real path -> (uri, version)."""
        texts, uris = {}, {}
        for uri, doc in list(self.workspace.text_documents.items()):
            path = uri_to_path(uri)
            if path is None or self.folder_of(path) is not folder:
                continue
            texts[path] = doc.source
            uris[path] = (uri, doc.version)
        return texts, uris

    def folder_of(self, path: str) -> Folder:
        if self.dslint is None:
            self.dslint = Workspace([], self.settings_error, self.cache_dir)
        return self.dslint.folder_of(path)

    def settings_error(self, message: str) -> None:
        self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))

    # --- runs ---------------------------------------------------------------------------------------
    def schedule(self, folder: Folder, delay: Optional[float] = None) -> None:
        """Check `folder` after `delay` (the debounce): a later call before then replaces this one, and makes a
        run in progress stale."""
        key = id(folder)
        self.generation[key] = self.generation.get(key, 0) + 1
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
        timer = self.timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        delay = self.debounce if delay is None else delay
        if delay <= 0:
            self.timers[key] = loop.call_soon(self._start, folder)
        else:
            self.timers[key] = loop.call_later(delay, self._start, folder)

    def _start(self, folder: Folder) -> None:
        key = id(folder)
        self.timers.pop(key, None)
        if key in self.running or self.shutting_down:
            return            # the run in progress is stale now; `_finished` starts the newest one
        generation = self.generation.get(key, 0)
        texts, uris = self.open_texts(folder)
        if not texts:
            return

        def stale() -> bool:
            return self.shutting_down or self.generation.get(key, 0) != generation

        future = asyncio.get_running_loop().run_in_executor(self.executor, _run, folder, texts, stale,
                                                            self.collector)
        self.running[key] = future
        future.add_done_callback(lambda f: self._finished(folder, generation, texts, uris, f))

    def _finished(self, folder: Folder, generation: int, texts: dict, uris: dict, future) -> None:
        key = id(folder)
        self.running.pop(key, None)
        if self.shutting_down:
            return
        result = future.result()          # `_run` never raises
        current = self.generation.get(key, 0) == generation
        if result is not None and current:
            self.publish(folder, result, texts, uris)
        if not current and key not in self.timers:
            self._start(folder)
        elif not self.running and not self.timers:
            # nothing to check: what cycles hold is collected once the server has been idle a while
            if self.idle is not None:
                self.idle.cancel()
            self.idle = asyncio.get_running_loop().call_later(self.collector.IDLE_S, self._collect_when_idle)

    def _collect_when_idle(self) -> None:
        self.idle = None
        if not self.running and not self.timers and not self.shutting_down:
            # in the analysis thread, so that it never runs beside a check
            self.executor.submit(self.collector.collect)

    def publish(self, folder: Folder, run: FolderRun, texts: dict, uris: dict) -> None:
        for path, (uri, version) in uris.items():
            doc = self.workspace.text_documents.get(uri)
            if doc is None:
                continue        # closed meanwhile
            text = texts[path]
            items = []
            if run.crashed:
                items.append((self._crash_diagnostic(run.crashed), None))
            for finding in run.findings.get(path, []):
                items.append((self.diagnostic(finding, text), finding))
            for error in run.errors.get(path, []):
                items.append((self.error_diagnostic(error, text), error))
            self.published[uri] = Published(text, version, items)
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=[d for d, _ in items]))

    # --- conversions --------------------------------------------------------------------------------
    def _range(self, text: Optional[str], line: int, column: int, end_line: int, end_column: int) -> lsp.Range:
        """dslint's 1-based, character-column span as an LSP range in the client's position encoding."""
        start = lsp.Position(line=max(line - 1, 0), character=max(column - 1, 0))
        end = lsp.Position(line=max(end_line - 1, 0), character=max(end_column - 1, 0))
        if text is None:
            return lsp.Range(start=start, end=end)
        lines = text.split("\n")
        codec = self.workspace.position_codec
        return codec.range_to_client_units(lines, lsp.Range(start=start, end=end))

    def _location(self, path: str, line: int) -> lsp.Location:
        full = real(os.path.join(os.getcwd(), path))
        pos = lsp.Position(line=max(line - 1, 0), character=0)
        return lsp.Location(uri=from_fs_path(full) or full, range=lsp.Range(start=pos, end=pos))

    def diagnostic(self, f: Finding, text: str) -> lsp.Diagnostic:
        severity = lsp.DiagnosticSeverity.Error if f.severity.value == "error" else lsp.DiagnosticSeverity.Warning
        related = [lsp.DiagnosticRelatedInformation(location=self._location(step.path, step.line), message=step.note)
                   for step in f.trace]
        message = f.message
        if f.fix is not None and f.fix.applicability == "manual" and f.fix.description:
            message += f"\nFix: {f.fix.description}"
        return lsp.Diagnostic(range=self._range(text, f.line, f.column, f.end_line, f.end_column), message=message,
                              severity=severity, code=f.code, source="dslint",
                              related_information=related or None,
                              data={"name": f.name, "fix": f.fix.applicability if f.fix else None})

    def error_diagnostic(self, e: InputError, text: str) -> lsp.Diagnostic:
        line, column = e.line or 1, e.column or 1
        skipped = e.message.startswith("skipped: ")
        return lsp.Diagnostic(range=self._range(text, line, column, line, column), message=e.message,
                              severity=lsp.DiagnosticSeverity.Warning if skipped else lsp.DiagnosticSeverity.Error,
                              code="DSL001" if e.kind == "internal-error" else None, source="dslint")

    @staticmethod
    def _crash_diagnostic(message: str) -> lsp.Diagnostic:
        pos = lsp.Position(line=0, character=0)
        return lsp.Diagnostic(range=lsp.Range(start=pos, end=pos), message=message, code="DSL001",
                              severity=lsp.DiagnosticSeverity.Error, source="dslint")

    # --- code actions -------------------------------------------------------------------------------
    def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        shown = self.published.get(uri)
        doc = self.workspace.text_documents.get(uri)
        if shown is None or doc is None or doc.source != shown.text:
            return []           # the buffer changed since its check: the edits are for another text
        want = params.context.only
        actions = []
        for diag, finding in shown.items:
            if not isinstance(finding, Finding) or finding.fix is None or not finding.fix.edits:
                continue
            if not _overlaps(diag.range, params.range):
                continue
            applicability = finding.fix.applicability
            kind = {"safe": lsp.CodeActionKind.QuickFix, "unsafe": UNSAFE_KIND}.get(applicability, SUGGESTION_KIND)
            if want and not any(kind == w or kind.startswith(f"{w}.") for w in want):
                continue
            title = f"dslint: {finding.fix.description} ({finding.code})"
            if applicability == "unsafe":
                title += " (unsafe: may change behaviour)"
            elif applicability == "display":
                title += " (suggestion: review it)"
            edit = self._workspace_edit(finding, uri, shown.text)
            if edit is None:
                continue
            actions.append(lsp.CodeAction(title=title, kind=kind, diagnostics=[diag], edit=edit,
                                          is_preferred=applicability == "safe" or None))
        return actions

    def _workspace_edit(self, finding: Finding, uri: str, text: str) -> Optional[lsp.WorkspaceEdit]:
        changes: dict[str, list[lsp.TextEdit]] = {}
        doc_path = uri_to_path(uri)
        for edit in finding.fix.edits:
            path = real(os.path.join(os.getcwd(), edit.path))
            if path == doc_path:
                target, content = uri, text
            else:
                target = from_fs_path(path) or path
                other = self.workspace.text_documents.get(target)
                if other is not None:
                    content = other.source
                else:
                    try:
                        content = Path(path).read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError):
                        return None
            rng = self._range(content, edit.line, edit.column, edit.end_line, edit.end_column)
            changes.setdefault(target, []).append(lsp.TextEdit(range=rng, new_text=edit.content))
        return lsp.WorkspaceEdit(changes=changes)

    # --- hover ----------------------------------------------------------------------------------------
    def hover(self, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        uri = params.text_document.uri
        doc = self.workspace.text_documents.get(uri)
        codes: list[str] = []
        pos = params.position
        if doc is not None and pos.line < len(doc.lines):
            line = doc.lines[pos.line]
            for m in _CODE.finditer(line):
                start = doc.position_codec.client_num_units(line[:m.start()])
                end = doc.position_codec.client_num_units(line[:m.end()])
                if start <= pos.character <= end:
                    codes.append(m.group())
        shown = self.published.get(uri)
        if not codes and shown is not None:
            for diag, finding in shown.items:
                if isinstance(diag.code, str) and _contains(diag.range, pos) and diag.code not in codes:
                    codes.append(diag.code)
        texts = [t for t in (_explain(c) for c in codes) if t]
        if not texts:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(texts)))


def _explain(code: str) -> Optional[str]:
    from dslint import ruledocs
    from dslint.rules import rule_by_code
    rule = rule_by_code(code)
    return ruledocs.explain(rule) if rule is not None else None


def _before(a: lsp.Position, b: lsp.Position) -> bool:
    return (a.line, a.character) <= (b.line, b.character)


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    return _before(a.start, b.end) and _before(b.start, a.end)


def _contains(r: lsp.Range, p: lsp.Position) -> bool:
    return _before(r.start, p) and _before(p, r.end)


def _run(folder: Folder, texts: dict[str, str], stale, collector: Optional[Collector] = None
         ) -> Optional[FolderRun]:
    """One check of `folder` (in the analysis thread): its result, None when it went stale, or a run saying it
    crashed (the folder's state is then dropped: the next run starts from the files). `collector`: what the run
    leaves alive is frozen after it (`Collector`)."""
    from dslint.engine import Cancelled
    if collector is not None and collector.due():
        collector.collect()
    try:
        return folder.run(texts, stale, freeze=collector is not None)
    except Cancelled:
        return None
    except Exception as exc:        # noqa: BLE001 -- the server must stay up; the client is told
        log.exception("dslint: the check of %s failed", folder.root)
        folder.settings_changed()
        return FolderRun(root=folder.root, crashed=crash_line(exc))
    finally:
        if collector is not None:
            collector.after_run()


def build_server(cache_dir: Optional[Path] = None) -> DslintServer:
    server = DslintServer(cache_dir)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: DslintServer, params: lsp.InitializeParams) -> None:
        roots = []
        for folder in params.workspace_folders or []:
            path = uri_to_path(folder.uri)
            if path:
                roots.append(Path(path))
        if not roots:
            root = uri_to_path(params.root_uri) if params.root_uri else params.root_path
            if root:
                roots.append(Path(root))
        ls.dslint = Workspace(roots, ls.settings_error, ls.cache_dir)
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("debounce_ms"), (int, float)):
            ls.debounce = max(0.0, float(options["debounce_ms"])) / 1000

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: DslintServer, params: lsp.InitializedParams) -> None:
        caps = ls.client_capabilities
        watched = caps.workspace and caps.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            watchers = [lsp.FileSystemWatcher(glob_pattern=g) for g in
                        ("**/*.py", "**/*.json", "**/*.sh", "**/*.md", "**/pyproject.toml", "**/*.toml")]
            ls.client_register_capability(lsp.RegistrationParams(registrations=[lsp.Registration(
                id="dslint-watched-files", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers))]))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DslintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        path = uri_to_path(params.text_document.uri)
        if path is not None:
            ls.schedule(ls.folder_of(path), 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DslintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        path = uri_to_path(params.text_document.uri)
        if path is not None:
            ls.schedule(ls.folder_of(path))

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: DslintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        path = uri_to_path(params.text_document.uri)
        if path is None:
            return
        folder = ls.folder_of(path)
        if os.path.basename(path) == "pyproject.toml":
            folder.settings_changed()
        else:
            folder.disk_changed()       # a client that watches no files: other files may have changed too
        ls.schedule(folder, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DslintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.published.pop(uri, None)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        path = uri_to_path(uri)
        if path is not None:
            folder = ls.folder_of(path)
            folder.disk_changed()       # its buffer may have differed from the file: the file counts again
            ls.schedule(folder)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: DslintServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        folders = {}
        for change in params.changes:
            path = uri_to_path(change.uri)
            if path is None:
                continue
            folder = ls.folder_of(path)
            if os.path.basename(path) == "pyproject.toml":
                folder.settings_changed()
            else:
                folder.disk_changed()
            folders[id(folder)] = folder
        for folder in folders.values():
            ls.schedule(folder)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def workspace_folders(ls: DslintServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        if ls.dslint is None:
            ls.dslint = Workspace([], ls.settings_error, ls.cache_dir)
        for gone in params.event.removed:
            path = uri_to_path(gone.uri)
            if path:
                ls.dslint.remove(Path(path))
        for added in params.event.added:
            path = uri_to_path(added.uri)
            if path:
                ls.dslint.add(Path(path))

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, UNSAFE_KIND, SUGGESTION_KIND]))
    def code_action(ls: DslintServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return ls.code_actions(params)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: DslintServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        return ls.hover(params)

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: DslintServer, params: None) -> None:
        ls.shutting_down = True         # a run in progress stops at its next check of `stale`
        for timer in ls.timers.values():
            timer.cancel()
        ls.timers.clear()

    @server.feature(lsp.EXIT)
    def exit_(ls: DslintServer, params: None) -> None:
        _leave(0 if ls.shutting_down else 1)

    return server


def _leave(code: int) -> None:
    """End the process now: a check running in the analysis thread would otherwise keep it alive until it
    finished (the thread pool is joined at exit), and forked workers of a first run are killed."""
    from dslint.forkpool import kill_children
    try:
        kill_children()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def serve(no_cache: bool = False) -> int:
    from dslint.cache import default_dir
    from dslint.codecache import install
    cache_dir = None if no_cache else default_dir()
    install(cache_dir)      # before libcst's dataclasses are built, as `check` does (dslint.codecache)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    server = build_server(cache_dir)
    server.start_io()
    _leave(0 if server.shutting_down else 1)        # stdin closed: the client is gone
    return 0
