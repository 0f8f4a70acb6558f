"""The result cache at the boundaries of a check's stages (`dslint.pipeline`; the store itself is
`dslint.cache.ResultCache`). Three kinds of entries, each written and read (shape checked) here only:

- the run's entry (`run:` + every relevant file's path and content): an unchanged tree maps to its files'
  keys without building the program model (before stage 2);
- a Python file's program facts (`program:` + its content): what the launch units are built from (stage 2);
- a file's findings and errors, keyed by its content and that of every file its view holds (the launch units
  that reach it, `item_key`): editing one script invalidates only the files of its units (around stages 3-4).
  A file's internal errors and transient DSL001s (skipped for time, crashed worker) are not written."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from dslint.cache import ResultCache, content_hash, run_key
from dslint.config import Settings
from dslint.findings import Finding, InputError
from dslint.pipeline.rule_runs import TRANSIENT
from dslint.program.project_view import ProjectView
from dslint.program.units import FileFacts
from dslint.rules.base import Rule
from dslint.sources import AnySource, PythonSource, ShellSource


class RunCache:
    def __init__(self, store: ResultCache, hashes: dict[int, str], run_entry: str) -> None:
        self.store = store
        self.hashes = hashes            # id(source) -> content hash, for the run's relevant sources
        self.run_entry = run_entry

    @classmethod
    def open(cls, cache_dir: Optional[Path], settings: Settings, rules: list[Rule], relevant: list[AnySource]
             ) -> Optional["RunCache"]:
        """The run's view of the cache in `cache_dir` (None: no cache), for these settings and rules."""
        if cache_dir is None:
            return None
        hashes = {id(s): _content_hash(s) for s in relevant}
        fingerprint = content_hash("\n".join(sorted(f"{s.path}:{hashes[id(s)]}" for s in relevant)))
        settings_json = settings.model_dump_json(exclude={"root"})
        return cls(ResultCache(cache_dir, run_key(settings_json, [r.code for r in rules], "")), hashes,
                   f"run:{fingerprint}")

    def hash_of(self, source: AnySource) -> str:
        return self.hashes.get(id(source)) or content_hash(source.text)

    # --- the run's entry ---------------------------------------------------------------------------
    def known_keys(self, count: int) -> Optional[list[str]]:
        """The file keys of an unchanged tree of `count` relevant files, or None."""
        entry = self.store.get(self.run_entry, lambda e: _strings(e.get("keys")) and len(e["keys"]) == count)
        return list(entry["keys"]) if entry else None

    def put_keys(self, keys: list[str]) -> None:
        self.store.put(self.run_entry, {"keys": keys})

    # --- program facts -----------------------------------------------------------------------------
    def facts_key(self, source: PythonSource) -> str:
        return f"program:{self.hash_of(source)}"

    def facts(self, key: str) -> Optional[tuple[bool, Optional[FileFacts]]]:
        """(whether the text compiles, its facts where it does), or None: not known."""
        hit = self.store.get(key, _facts_entry)
        if hit is None:
            return None
        if not hit.get("compiles"):
            return False, None
        return True, FileFacts(tuple(hit["imports"]), hit["runs"], tuple(hit["refs"]), tuple(hit["args"]),
                               hit["argv"], tuple(hit["flags"]))

    def put_facts(self, key: str, found: Optional[FileFacts]) -> None:
        """`found`: the file's facts, None where it does not compile."""
        self.store.put(key, {"compiles": False} if found is None else {
            "compiles": True, "imports": list(found.imports), "runs": found.runs_by_itself,
            "refs": list(found.config_refs), "args": list(found.argument_files),
            "argv": found.arguments_from_argv, "flags": list(found.argument_flags)})

    def compiles(self, source: PythonSource) -> Optional[bool]:
        """True where the cached program facts of this text say CPython parsed it; else None (not known)."""
        entry = self.store.get(self.facts_key(source), _facts_entry)
        return True if entry is not None and entry.get("compiles") is True else None

    # --- per-file results --------------------------------------------------------------------------
    def item_key(self, relevant: list[AnySource], i: int, project: ProjectView) -> str:
        """A file's key: its content and that of every file its findings can depend on."""
        source = relevant[i]
        context = project.program.context_of(source) if isinstance(source, PythonSource) else None
        if context is not None:
            deps = project.context_sources(context)
            if not context.units:       # a module no unit imports may be a plugin of a script (program.plugins)
                from dslint.program.plugins import load_dependencies
                deps = list({id(s): s for s in (*deps, *load_dependencies(project.program, context.files))}.values())
        else:
            # a config or launcher script: the configs and launchers of the run, and the scripts that name it
            deps = [s for s in relevant if not isinstance(s, PythonSource)]
            if not isinstance(source, ShellSource):
                name = Path(source.path).name
                single = len(project.json_configs) == 1
                # what kind of JSON it is also depends on the scripts launcher lines run and on those that read
                # arguments files (dslint.program.json_kinds): a superset, by text
                launched = {id(t) for _, _, t in project.program.launch_targets}
                deps += [s for s in project.program.python if single or name in s.text or id(s) in launched
                         or "parse_json_file" in s.text]   # no outline built
        text = "\n".join(sorted(f"{s.path}:{self.hash_of(s)}" for s in deps))
        return f"{source.kind}:{source.path}:{self.hashes[id(source)]}|{content_hash(text)}"

    def results(self, key: str) -> Optional[tuple[list[Finding], list[InputError]]]:
        return _cached_results(self.store.get(key))

    def put_results(self, key: str, findings: list[Finding], errors: list[InputError]) -> None:
        """A file's results, unless an error or a transient DSL001 makes them not worth keeping."""
        if not any(e.kind == "internal-error" for e in errors) and not any(
                f.code == "DSL001" and f.message.startswith(TRANSIENT) for f in findings):
            self.store.put(key, {"findings": [f.model_dump(mode="json") for f in findings],
                                 "errors": [e.model_dump(mode="json") for e in errors]})


def _content_hash(source: AnySource) -> str:
    """`cache.content_hash` of the source's text, kept on the source (carried into the next run with it)."""
    found = source.__dict__.get("_dslint_hash")
    if found is None:
        found = source.__dict__["_dslint_hash"] = content_hash(source.text)
    return found


def _strings(value) -> bool:
    return isinstance(value, list) and all(type(v) is str for v in value)


def _facts_entry(entry: dict) -> bool:
    """A program-facts entry of the result cache has the shape `RunCache.put_facts` writes."""
    return entry.get("compiles") is False or (entry.get("compiles") is True and _strings(entry.get("imports"))
                                               and type(entry.get("runs")) is bool and _strings(entry.get("refs"))
                                               and _strings(entry.get("args")) and type(entry.get("argv")) is bool
                                               and _strings(entry.get("flags")))


def _cached_results(entry: Optional[dict]) -> Optional[tuple[list[Finding], list[InputError]]]:
    """A file's findings and errors from its result-cache entry; None where the entry is not one (a wrong
    shape, a value a finding cannot hold): the file is analysed again and the entry written over."""
    if entry is None or not isinstance(entry.get("findings"), list) or not isinstance(entry.get("errors"), list):
        return None
    try:
        findings = [Finding.model_validate(f) for f in entry["findings"]]
        errors = [InputError.model_validate(e) for e in entry["errors"]]
    except Exception:
        return None
    texts = [x for f in findings for x in (f.code, f.name, f.path, f.message, *(s.path for s in f.trace),
                                           *(s.note for s in f.trace))] + [x for e in errors for x in (e.path, e.message)]
    return (findings, errors) if all(type(x) is str for x in texts) else None
