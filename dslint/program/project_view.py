"""The project view: facts that span the files of one run.

Which DeepSpeed config applies to which script (JSON arguments, launcher lines, literal paths and dicts
in the script), the world size, the DeepSpeed version, and functions by qualified name across files
(for the call graph that carries collective sites and rank-varying values between modules).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from typing import TYPE_CHECKING

from dslint.sources import AnySource, JsonSource, PythonSource, ShellSource

if TYPE_CHECKING:
    from dslint.program.facts import FunctionInfo

# keyword/positional places where a DeepSpeed config (a path or a dict) is handed over
from dslint.program.config_handoffs import (_CONFIG_CALLS, _CONFIG_KEYWORD_TEXT, _CONFIG_KEYWORDS,  # noqa: F401
                                    _CONFIG_SUFFIXES, _hands_config, takes_config)

_CONFIG_FLAG = re.compile(r"""["'][-\w]*(deepspeed|ds_config)["']""")    # an argparse flag `--deepspeed_config`


# the `Accelerator` keywords and accelerate plugin classes that set up a backend (accelerate 1.16 accelerator.py:
# `deepspeed_plugin` / `fsdp_plugin` / `megatron_lm_plugin` choose DEEPSPEED / FSDP / MEGATRON_LM)
_PLUGIN_KEYWORDS = {"deepspeed_plugin": "DEEPSPEED", "deepspeed_plugins": "DEEPSPEED", "fsdp_plugin": "FSDP",
                    "megatron_lm_plugin": "MEGATRON_LM"}
_PLUGIN_CLASSES = {"DeepSpeedPlugin": "DEEPSPEED", "FullyShardedDataParallelPlugin": "FSDP",
                   "MegatronLMPlugin": "MEGATRON_LM"}
_SHARDING_WORDS = ("deepspeed", "DeepSpeed", "fsdp", "FSDP", "FullySharded", "fully_shard", "megatron", "Megatron")


@dataclass
class ConfigView:
    """One DeepSpeed config as dslint understands it (a JSON file or a dict literal in a script)."""

    data: dict
    origin: str                                     # path of the JSON, or "script.py:LINE" for a dict literal
    source: Optional[JsonSource] = None

    def get(self, *path: str, default: Any = None) -> Any:
        node: Any = self.data
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return node

    @property
    def zero_stage(self) -> Optional[int]:
        """The ZeRO stage; None when unknown (a variable, or a dict built in Python that may hold another)."""
        if type(self.data) is not dict:
            from dslint.program.pyconfig import reading_known
            stage, known = reading_known(self.get, "zero_optimization", "stage", default=0)
            if not known:
                return None
        else:
            stage = self.get("zero_optimization", "stage", default=0)
        return stage if isinstance(stage, int) and not isinstance(stage, bool) else None

    @property
    def has_optimizer(self) -> bool:
        return isinstance(self.data.get("optimizer"), dict)

    @property
    def uses_auto(self) -> bool:
        return "\"auto\"" in repr(self.data).replace("'", "\"")


@dataclass
class ProjectView:
    sources: list[AnySource]
    world_size_override: Optional[int] = None
    deepspeed_version_override: Optional[str] = None
    root: Path = field(default_factory=Path.cwd)
    # the run's launch units (dslint.program.units.Program); a view of one context also names the launcher
    # lines of its units, so that the world size comes from them alone
    program: Optional[Any] = None
    unit_launches: Optional[list] = None
    units: list = field(default_factory=list)
    # the run's view, for a view of one context: what kind each JSON file is is decided on the whole run
    run_view: Optional["ProjectView"] = None

    @property
    def run_program(self):
        """The launch units of this run: set by the pipeline (`dslint.pipeline.launch_units.build_program`, with
        per-file facts from the cache), else built here on first use from the outlines, the config paths and the
        launcher lines."""
        if self.program is None:
            from dslint.program.units import FileFacts, Program
            facts = {}
            for src in self.python:
                refs = [v for v, _ in self.literal_configs(src) if isinstance(v, str) and v.endswith(".json")]
                found = FileFacts.of(src, refs, *self.argument_files(src))
                if found is not None:
                    facts[id(src)] = found
            self.program = Program(self.python, self.shell, facts)
        return self.program

    def context_sources(self, context) -> list[AnySource]:
        """What a context's files are analysed with: the files of its units (or of its import-connected
        group), the configs they are given (launcher flags, paths their code names, the run's only config
        for a file that names none) and the launcher scripts that run its units. Read from the program
        model's per-file facts: no file is parsed for it."""
        program = self.run_program
        sources: dict[int, AnySource] = {id(f): f for f in context.files}
        for f in context.files:
            found: list[JsonSource] = []
            for sh, launch in program.launches_of(f):
                for ref in launch.config_paths:
                    found += self.launch_json(sh, launch, ref)
            facts = program.facts.get(id(f))
            for ref in facts.config_refs if facts is not None else ():
                found += self.script_configs_by_reference(f, ref)
            found = [c for c in found if self.is_deepspeed_config(c)] + self.configs_reached_through(f)
            if not found and len(self.json_configs) == 1 and _beside(self.json_configs[0], f):
                found = list(self.json_configs)     # the run's one config, beside the script or above it
            for cfg in found:
                sources.setdefault(id(cfg), cfg)
        for unit in context.units:
            for sh, _ in unit.launches:
                sources.setdefault(id(sh), sh)
        return list(sources.values())

    def context_view(self, context) -> "ProjectView":
        """The view a context's files are analysed in (`context_sources`), with the launcher lines of its
        units alone deciding the world size."""
        launches = [pair for unit in context.units for pair in unit.launches]
        return ProjectView(self.context_sources(context), self.world_size_override, self.deepspeed_version_override,
                           self.root, program=self.run_program, unit_launches=launches, units=list(context.units),
                           run_view=self.run_view or self)

    # --- indexes ---------------------------------------------------------------------------------
    @cached_property
    def python(self) -> list[PythonSource]:
        # CPython's compile() decides (cheap); libcst parses a file only when something reads its tree
        return [s for s in self.sources if isinstance(s, PythonSource) and s.compiles]

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """One result per run for a whole-project analysis, shared by every rule family that needs it."""
        cache = self.__dict__.setdefault("_analyses", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]

    @cached_property
    def _identifier_index(self) -> dict[str, list[PythonSource]]:
        index: dict[str, list[PythonSource]] = {}
        for src in self.python:
            for word in identifiers(src):
                index.setdefault(word, []).append(src)
        return index

    @cached_property
    def _shared_identifiers(self) -> Optional[tuple[dict[str, list[PythonSource]], dict[int, int]]]:
        """For a view of one launch-unit context: the run's identifier index (every Python file of the
        program model, built once per run and kept on it) and this view's order of its Python files. A
        view per launch unit over one package used to index the whole package's words again (issue 33).
        None where the view holds a file the program model does not (a view built by hand)."""
        program = self.program
        if program is None or self.run_view is None:
            return None
        shared = program.__dict__.get("_identifier_index")
        if shared is None:
            shared = {}
            for src in program.python:
                if src.compiles:
                    for word in identifiers(src):
                        shared.setdefault(word, []).append(src)
            program.__dict__["_identifier_index"] = shared
        order = self._run_order
        if order is None:
            return None
        return shared, order

    @cached_property
    def _run_order(self) -> Optional[dict[int, int]]:
        """For a view of one launch-unit context whose Python files are all the program model's: id(file) → its
        position in this view's order of its files; the key to the run-wide indexes that such a view reads
        restricted to its files (`using_identifier`, `mentioning`, `_function_index`, `methods_named`) instead of
        building its own over every file it holds (issue 33: U views over one package of M files were U x M
        work). None for any other view (the run's own, a view built by hand), which builds its own."""
        program = self.program
        if program is None or self.run_view is None:
            return None
        known = program.__dict__.get("_program_ids")
        if known is None:
            known = program.__dict__["_program_ids"] = {id(s) for s in program.python}
        if not all(id(s) in known for s in self.python):
            return None
        return {id(s): k for k, s in enumerate(self.python)}

    def files_where(self, key: Any, test: Callable[[PythonSource], bool]) -> list[PythonSource]:
        """`[s for s in self.python if test(s)]`, where `test` reads the file alone (its text, its outline) and
        `key` names it with whatever parameters it reads. A launch unit's view (`_run_order`) restricts the run's
        list of the files passing it, kept on the program model under `key`, instead of testing every file it
        holds again."""
        if self._run_order is None:
            return [s for s in self.python if test(s)]
        table = self.program.__dict__.setdefault("_files_where", {})
        hits = table.get(key)
        if hits is None:
            hits = table[key] = [s for s in self.program.python if s.compiles and test(s)]
        return self._in_view_order(hits)

    def _in_view_order(self, hits: list) -> list:
        """`hits` (files of the program model, in its order) that this view holds, in the view's order."""
        order = self._run_order
        return sorted((s for s in hits if id(s) in order), key=lambda s: order[id(s)])

    def using_identifier(self, name: str) -> list[PythonSource]:
        """Python sources in which `name` occurs as a whole identifier (an index lookup: scans that run once
        per function name must not read every file each time), in the view's order of its files."""
        shared = self._shared_identifiers
        if shared is None:
            return self._identifier_index.get(name, [])
        memo = self.__dict__.setdefault("_using_identifier", {})
        hit = memo.get(name)
        if hit is None:
            index, order = shared
            hit = memo[name] = sorted((s for s in index.get(name, ()) if id(s) in order), key=lambda s: order[id(s)])
        return hit

    @cached_property
    def _units_reaching(self) -> dict[int, list]:
        """id(file) -> the view's units whose files hold it, in the order of `units` (indexed once per view: a
        view of many units asked for each of its files was units x files x files)."""
        out: dict[int, list] = {}
        for unit in self.units:
            for f in unit.files:
                found = out.setdefault(id(f), [])
                if not found or found[-1] is not unit:
                    found.append(unit)
        return out

    @cached_property
    def _unit_files(self) -> dict[int, PythonSource]:
        """id(file) -> file, for every file of the view's units (`_units_reaching`'s keys)."""
        return {id(f): f for unit in self.units for f in unit.files}

    def mentioning(self, *words: str) -> list[PythonSource]:
        """Python sources whose text contains one of `words`: a scan over the whole project filters with this
        first, so that files which cannot matter to it are never parsed."""
        # memoised per view: scans ask the same words again and again (2,000 times per re-check of a 250-file
        # workspace, each scanning every text); a copy, so that no caller changes the memo. A launch unit's view
        # restricts the run's list of the files mentioning them (`_run_order`)
        return list(self.memo(("mentioning", words), lambda: self._mentioning(words)))

    def _mentioning(self, words: tuple[str, ...]) -> list[PythonSource]:
        if self._run_order is None:
            return [s for s in self.python if _mentions(s, words)]
        program = self.program
        table = program.__dict__.setdefault("_mentioning", {})
        hits = table.get(words)
        if hits is None:
            hits = table[words] = [s for s in program.python if s.compiles and _mentions(s, words)]
        return self._in_view_order(hits)

    @cached_property
    def json_sources(self) -> list[JsonSource]:
        """Every JSON file of the view that reads as an object: DeepSpeed configs, arguments JSONs, ..."""
        return [s for s in self.sources if isinstance(s, JsonSource) and s.parse_problem() is None]

    @cached_property
    def json_configs(self) -> list[JsonSource]:
        """The JSON files of the view that are DeepSpeed configs (`json_use`)."""
        return [s for s in self.json_sources if self.is_deepspeed_config(s)]

    @property
    def json_uses(self) -> dict:
        """id(JsonSource) → `dslint.program.json_kinds.JsonUse`, decided once on the run's view (a view of one
        context holds only its units' files; a file's kind depends on every reference of the run)."""
        run = self.run_view or self
        uses = run.__dict__.get("_json_uses")
        if uses is None:
            from dslint.program.json_kinds import classify
            uses = run.__dict__["_json_uses"] = classify(run)
        return uses

    def json_use(self, src: JsonSource):
        """How the run uses one JSON file: a DeepSpeed config or an HF arguments file, and the evidence."""
        use = self.json_uses.get(id(src))
        if use is None:      # a file the run's view does not hold (a view built by hand): by its own keys
            from dslint.program.json_kinds import classify
            use = classify(ProjectView([src], root=self.root)).get(id(src))
        return use

    def is_deepspeed_config(self, src: JsonSource) -> bool:
        use = self.json_use(src)
        return use is None or use.is_config

    def configs_reached_through(self, src: PythonSource) -> list[JsonSource]:
        """The DeepSpeed configs `src` reaches through an arguments JSON it reads (the `deepspeed` entry) or an
        accelerate config its launcher line names (`deepspeed_config_file`)."""
        index = (self.run_view or self).__dict__.get("_configs_through")
        if index is None:
            index = {}
            run = self.run_view or self
            for cfg in run.json_sources:
                use = self.json_uses.get(id(cfg))
                if use is not None and use.is_config:
                    for consumer in use.consumers:
                        index.setdefault(id(consumer), []).append(cfg)
            run.__dict__["_configs_through"] = index
        return list(index.get(id(src), ()))

    @cached_property
    def shell(self) -> list[ShellSource]:
        return [s for s in self.sources if isinstance(s, ShellSource) and s.parse_problem() is None]

    @cached_property
    def _function_index(self) -> dict[str, tuple[PythonSource, str]]:
        """Fully qualified function name (`pkg.mod.Class.method`) → (source, name within it), from the
        outlines: no file is parsed with libcst to build it. A launch unit's view reads the run's entries
        restricted to its files (`ViewIndex`)."""
        if self._run_order is not None:
            return ViewIndex(self._run_table("_function_entries", _qualified_functions), self._run_order)
        out: dict[str, tuple[PythonSource, str]] = {}
        for src in self.python:
            for key, qual in _qualified_functions(src):
                out[key] = (src, qual)
        return out

    def _run_table(self, name: str, pairs: Callable[[PythonSource], list[tuple[str, str]]]
                   ) -> dict[str, list[tuple[PythonSource, str]]]:
        """key → [(source, name within it)] over every Python file of the program model, from `pairs(src)` (the
        (key, name) pairs of one file), built once per run and kept on the program model under `name`."""
        program = self.program
        table = program.__dict__.get(name)
        if table is None:
            table = program.__dict__[name] = {}
            for src in program.python:
                if src.compiles:
                    for key, qual in pairs(src):
                        table.setdefault(key, []).append((src, qual))
        return table

    def methods_named(self, method: str) -> list[tuple[PythonSource, str]]:
        """Every method called `method` of a class of the view's files (source, qualified name within it), on
        the outlines, in the view's order of its files and each file's order of its functions."""
        index = self.__dict__.get("_methods_by_name")
        if index is None:
            index = self.__dict__["_methods_by_name"] = {}
            if self._run_order is None:
                for src in self.python:
                    for name, qual in _class_methods(src):
                        index.setdefault(name, []).append((src, qual))
        if self._run_order is None:
            return index.get(method, [])
        hit = index.get(method)
        if hit is None:
            table = self._run_table("_methods_by_name", _class_methods)
            order = self._run_order
            # a stable sort by file: each file's methods stay in its own order
            hit = index[method] = sorted((e for e in table.get(method, ()) if id(e[0]) in order),
                                         key=lambda e: order[id(e[0])])
        return hit

    def find_function(self, qualified: Optional[str], near: Optional[PythonSource] = None
                      ) -> Optional[tuple[PythonSource, FunctionInfo]]:
        """A function by the name a call resolved to; local names are looked up in `near`'s module."""
        hit = self.find_function_source(qualified, near)
        if hit is None:
            return None
        src, qual = hit
        info = src.facts.functions.get(qual)         # parses that one file
        return (src, info) if info is not None else None

    def find_function_source(self, qualified: Optional[str], near: Optional[PythonSource] = None
                             ) -> Optional[tuple[PythonSource, str]]:
        """`find_function` on the outline index: (source, qualified name within it), no file parsed."""
        if not qualified:
            return None
        return self._look_up(self._function_index, qualified, near.module_name if near is not None else "")

    def _look_up(self, index: dict, qualified: str, module: str) -> Optional[tuple[PythonSource, str]]:
        """A function or class by the name a call resolved to, in an index of fully qualified names: local to
        `module` first, then as written, through a package re-export, then by its tail (`from utils import
        evaluate` when utils.py sits beside the script but is named differently)."""
        hit = index.get(f"{module}.{qualified}") if module else None
        if hit:
            return hit
        hit = index.get(qualified)
        if hit:
            return hit
        hit = self._reexported(qualified, index)
        if hit:
            return hit
        tail = qualified.split(".")
        for n in range(len(tail) - 1, 0, -1):
            hit = index.get(".".join(tail[-n - 1:]))
            if hit:
                return hit
        return self._by_suffix(index, qualified, module)

    def _by_suffix(self, index: dict, qualified: str, module: str) -> Optional[tuple[PythonSource, str]]:
        """`from cosyvoice.utils.train_utils import f` in a script run with `examples/s2s/utils` on `sys.path`:
        the definition whose fully qualified name ends with the imported one (module and name at least); among
        several copies (`InternVideo1/.../dataset` beside `InternVideo2/multi_modality/dataset`), the one whose
        package path shares the most leading parts with the caller's module; None while that leaves a tie."""
        if "." not in qualified:
            return None
        keys = [k for k in self._suffix_table(index).get(qualified, ()) if k in index]
        if not keys:
            return None
        if len(keys) == 1:
            return index[keys[0]]
        mine = module.split(".")

        def shared(key: str) -> int:
            n = 0
            for a, b in zip(key.split("."), mine):
                if a != b:
                    break
                n += 1
            return n
        ranked = sorted(keys, key=shared, reverse=True)
        return index[ranked[0]] if shared(ranked[0]) > shared(ranked[1]) else None

    def _suffix_table(self, index: dict) -> dict[str, list[str]]:
        """Each proper dotted suffix of a qualified name (module and name at least) → the names ending with it,
        over the keys of every index of the run (kept on the run's view: a view per launch unit over one
        package split the same names again, issue 33); `_by_suffix` keeps those of its own index. The answer
        there depends only on which keys match, not on their order."""
        run = self.run_view or self
        table = run.__dict__.setdefault("_suffix_names", {})
        seen = run.__dict__.setdefault("_suffix_keys", set())
        if isinstance(index, ViewIndex):
            # the run's entries, whose keys hold every view's: absorbed once for the run
            index = index.entries
            absorbed = run.__dict__.setdefault("_suffix_absorbed", {})
        else:
            absorbed = self.__dict__.setdefault("_suffix_absorbed", {})
        if id(index) not in absorbed:
            absorbed[id(index)] = index           # held, so that the id stays this index's
            for key in index:
                if key in seen:
                    continue
                seen.add(key)
                parts = key.split(".")
                for n in range(1, len(parts) - 1):
                    table.setdefault(".".join(parts[n:]), []).append(key)
        return table

    def may_name_json(self, src: PythonSource) -> bool:
        """Can a config expression of `src` evaluate to a path ending in ".json"? Only if ".json" is written in
        `src` or in a checked file it imports or calls into, directly or through others: the evaluation
        (`dslint.program.pyconfig`) builds strings from literals of the files it reads, and those are all reached so
        (a superset: modules by their dotted name or any tail of it, functions as calls resolve them). Decided
        on the outlines, so the launch units' config references parse only files that can name one. (Ask
        `may_hand_configs` first: past the file's own text this reads every file's outline.)"""
        if ".json" in src.text:
            return True
        seen = {id(src)}
        todo = [src]
        while todo:
            current = todo.pop()
            if ".json" in current.text:
                return True
            outline = current.outline
            if outline is None:
                continue
            reached = [hit[0] for callee, _ in outline.calls
                       if (hit := self.find_function_source(callee, near=current)) is not None]
            for module in outline.imported_modules:
                reached += self._modules_by_tail.get(module, ())
                reached += self._modules_by_tail.get(module.rpartition(".")[0], ())
            for other in reached:
                if id(other) not in seen:
                    seen.add(id(other))
                    todo.append(other)
        return False

    @cached_property
    def _modules_by_tail(self) -> dict[str, list[PythonSource]]:
        """Every dotted tail of every module's name and of its path (`a/b/c.py`: "c", "b.c", "a.b.c") → the
        sources so named (a package by its `__init__.py`'s folder)."""
        out: dict[str, list[PythonSource]] = {}
        for src in self.python:
            path = Path(src.path)
            by_path = (path.parent if path.name == "__init__.py" else path.with_suffix("")).as_posix()
            for name in {src.module_name, by_path.strip("./").replace("/", ".")}:
                parts = name.split(".") if name else []
                for n in range(len(parts)):
                    out.setdefault(".".join(parts[n:]), []).append(src)
        return out

    @cached_property
    def checked_tops(self) -> frozenset:
        """Every name a checked module may be imported by as its top-level package: each dotted tail's first
        component of each module's name and path (`_modules_by_tail`), so that `import x` of a checked `a/x.py`
        run from `a/` counts."""
        return frozenset(tail.split(".", 1)[0] for tail in self._modules_by_tail)

    @cached_property
    def _module_index(self) -> dict[str, PythonSource]:
        """Dotted module name → source (a package by its `__init__.py`), for re-exports."""
        out: dict[str, PythonSource] = {}
        for src in self.python:
            if src.module_name:
                out.setdefault(src.module_name, src)
        return out

    def _reexported(self, qualified: str, index: dict) -> Optional[tuple[PythonSource, str]]:
        """`pkg.models.f` where `pkg/models/__init__.py` re-exports `f` (`from .utils import f`, also under
        `if TYPE_CHECKING:`, or named in an HF `_LazyModule`'s `_import_structure = {"utils": ["f"]}`, the
        outline's `lazy_exports`): the definition the name stands for, followed through at most four
        packages, on the outlines. `index`: the functions' or the classes' (qualified name → source, name)."""
        seen = {qualified}
        for _ in range(4):
            parts = qualified.split(".")
            target = None
            for n in range(len(parts) - 1, 0, -1):
                module = self._module_index.get(".".join(parts[:n]))
                if module is None or module.outline is None:
                    continue
                name = parts[n]
                target = module.outline.imports.get(name) or module.outline.lazy_exports.get(name)
                if target is not None:
                    target = ".".join([target, *parts[n + 1:]])
                break                   # the longest module prefix decides
            if target is None or target in seen:
                return None
            hit = index.get(target)
            if hit:
                return hit
            # a target in a folder the checked files do not name as a package (`from .language_model.llama
            # import M` into a folder with no `__init__.py`): by its tail, as `_look_up` finds a name as written
            tail = target.split(".")
            for n in range(len(tail) - 2, 0, -1):
                hit = index.get(".".join(tail[-n - 1:]))
                if hit:
                    return hit
            seen.add(target)
            qualified = target
        return None

    def class_for_callee(self, src: PythonSource, callee: Optional[str]) -> Optional[tuple[PythonSource, str]]:
        """The checked class (source, qualified name) a constructor call names (`Trainer(...)`, `ppo.Trainer(...)`),
        looked up as `find_function_source` looks up functions, on the outlines."""
        if not callee or src.outline is None:
            return None
        if callee in src.outline.classes:
            return src, callee
        if "." not in callee and callee not in src.outline.imports:
            # `from models import *`: a class of a star-imported module of the checked files (as
            # `function_for_callee` finds functions)
            if callee in src.outline.functions or not _star_imports(src) or callee not in self._class_names():
                return None
            index = self.memo("class-index", self._class_index)
            for module in _star_imports(src):
                hit = self._look_up(index, f"{module}.{callee}", src.module_name)
                if hit is not None and hit[1] == callee:
                    return hit
            return None
        # no checked class has this name: most calls are of functions (decided by the classes there are, not by
        # how the name is spelled)
        if callee.rsplit(".", 1)[-1] not in self._class_names():
            return None
        index = self.memo("class-index", self._class_index)
        return self._look_up(index, callee, src.module_name)

    def _class_names(self) -> frozenset:
        """The short names of the checked classes."""
        return self.memo("class-names", lambda: frozenset(
            qual.rsplit(".", 1)[-1] for other in self.python if other.outline is not None
            for qual in other.outline.classes))

    def _class_index(self) -> dict[str, tuple[PythonSource, str]]:
        """Fully qualified class name → (source, name within it), as `_function_index` for functions."""
        if self._run_order is not None:
            return ViewIndex(self._run_table("_class_entries", _qualified_classes), self._run_order)
        return {key: (other, qual) for other in self.python for key, qual in _qualified_classes(other)}

    def function_for_callee(self, src: PythonSource, callee: Optional[str]) -> Optional[tuple[PythonSource, str]]:
        """`ProjectTaint.function_for_call` outside a class (no `self.` method lookup), on the outlines."""
        if callee is None or src.outline is None:
            return None
        outline = src.outline
        if "." not in callee:
            if callee in outline.functions:
                return src, callee
            if callee not in outline.imports:
                nested = outline.nested_named(callee)
                if len(nested) == 1:
                    return src, nested[0]
                # `from utils import *`: a function of a star-imported module of the checked files
                for module in _star_imports(src):
                    hit = self.find_function_source(f"{module}.{callee}", near=src)
                    if hit is not None and hit[1] == callee:
                        return hit
                return None
        return self.find_function_source(callee, near=src)

    # --- configs ---------------------------------------------------------------------------------
    @cached_property
    def _json_index(self) -> tuple[dict[str, JsonSource], dict[str, list[JsonSource]]]:
        by_path: dict[str, JsonSource] = {}
        by_name: dict[str, list[JsonSource]] = {}
        for c in self.json_sources:
            by_path.setdefault(_norm(c.path), c)
            by_name.setdefault(Path(c.path).name, []).append(c)
        return by_path, by_name

    def _configs_by_reference(self, ref: str, base: Path) -> list[JsonSource]:
        """`_json_by_reference`, DeepSpeed configs only."""
        return [c for c in self._json_by_reference(ref, base) if self.is_deepspeed_config(c)]

    def script_configs_by_reference(self, src: PythonSource, ref: str) -> list[JsonSource]:
        """The DeepSpeed configs a relative path written in `src` names, resolved against every folder the process
        may run in (Python opens it relative to the working directory): the folders the launcher lines that run
        `src` `cd` into first (`Launch.cwd`); where some launch leaves the folder unknown, also the script's own
        folder and the root (`_configs_by_reference`). Where a launcher's folder holds the file, a file found by
        name alone elsewhere is not the one; where several folders hold one, each is a candidate."""
        if Path(ref).is_absolute():
            return self._configs_by_reference(ref, Path(src.path).parent)
        by_path = self._json_index[0]
        hits: list[JsonSource] = []
        elsewhere = False           # a launch whose folder is not known: the script's folder or the root may be it
        for sh, launch in self._launches_for(src):
            if launch.cwd is None:
                elsewhere = True
                continue
            anchor, path = launch.cwd
            folder = Path(sh.path).parent
            for base in (folder / path,) + ((self.root / path, Path(path)) if anchor == "start" else ()):
                hit = by_path.get(_norm(str(base / ref)))
                if hit is not None and hit not in hits and self.is_deepspeed_config(hit):
                    hits.append(hit)
                    break
        if not hits:
            return self._configs_by_reference(ref, Path(src.path).parent)
        if not elsewhere:
            return hits
        for candidate in (Path(src.path).parent / ref, Path(ref), self.root / ref):
            hit = by_path.get(_norm(str(candidate)))
            if hit is not None and hit not in hits and self.is_deepspeed_config(hit):
                hits.append(hit)
        return hits

    def launch_json_files(self, sh: ShellSource, launch, ref: str) -> list[JsonSource]:
        """The configs a launcher line's path names, resolved as the shell would: in the folder the script
        `cd`-ed into before the launch (`Launch.cwd`: relative to the script's folder, or for a `cd` from the
        folder it was started in, to the script's folder and then the root), else relative to the script's own
        folder, else the root, else by file name (`_json_by_reference`)."""
        folder = Path(sh.path).parent
        if launch.cwd is not None:
            anchor, path = launch.cwd
            by_path = self._json_index[0]
            for base in (folder / path,) + ((self.root / path, Path(path)) if anchor == "start" else ()):
                hit = by_path.get(_norm(str(base / ref)))
                if hit is not None:
                    return [hit]
        hit = self._beside_launched(launch, ref)
        return [hit] if hit is not None else self._json_by_reference(ref, folder)

    def _beside_launched(self, launch, ref: str) -> Optional[JsonSource]:
        """`torchrun $ROOT/main.py --deepspeed_config $ROOT/configs/ds.json`: a path under the same unknown
        variable as the launched script's is under the folder that script was found in (`units._launch_target`:
        the file of that name nearest the launcher), whatever the variable holds at run time."""
        m = _UNKNOWN_PREFIX.match(ref)
        script = launch.script or ""
        if m is None or not script.startswith(m.group(0)) or self.program is None:
            return None
        target = self.program.target_of(launch)
        path, rest = _norm(target.path) if target is not None else "", _norm(script[len(m.group(0)):])
        if not path.endswith(rest) or path[:len(path) - len(rest)][-1:] not in ("", "/"):
            return None
        return self._json_index[0].get(_norm(path[:len(path) - len(rest)] + ref[len(m.group(0)):]))

    def launch_json(self, sh: ShellSource, launch, ref: str) -> list[JsonSource]:
        """`launch_json_files`, DeepSpeed configs only."""
        return [c for c in self.launch_json_files(sh, launch, ref) if self.is_deepspeed_config(c)]

    def _json_by_reference(self, ref: str, base: Path) -> list[JsonSource]:
        """The JSON files a path written in a script or launcher line names: relative to the referring file's
        folder or to the root (compared as normalised paths: no file system access), else by file name.
        Memoised per view: every file of every context asks for the same few paths."""
        memo = self.__dict__.setdefault("_json_refs", {})
        key = (ref, str(base))
        if key not in memo:
            memo[key] = self._find_json(ref, base)
        return list(memo[key])

    def _find_json(self, ref: str, base: Path) -> list[JsonSource]:
        by_path, by_name = self._json_index
        hits = []
        for candidate in (base / ref, Path(ref), self.root / ref):
            hit = by_path.get(_norm(str(candidate)))
            if hit is not None and hit not in hits:
                hits.append(hit)
        if not hits and not Path(ref).is_absolute():
            try:
                rel = (self.root / ref).resolve().relative_to(Path.cwd().resolve())
                hit = by_path.get(_norm(str(rel)))
                if hit is not None:
                    hits.append(hit)
            except (ValueError, OSError):
                pass
        return hits or list(by_name.get(Path(ref).name, []))

    @cached_property
    def launches(self):
        if self.unit_launches is not None:
            return list(self.unit_launches)
        return [(sh, launch) for sh in self.shell for launch in sh.launches]

    def _launches_for(self, src: PythonSource):
        """The launcher lines that run `src` (resolved once per run by the program model), restricted to the
        lines of this view's units."""
        for pair in self.run_program.launches_of(src):
            if self.unit_launches is None or any(pair[1] is l for _, l in self.unit_launches):
                yield pair

    def literal_configs(self, src: PythonSource) -> Iterator[tuple[Any, Any]]:
        """(value, node) of config arguments in `src`: JSON path strings or dicts built in the script (a
        `dslint.program.pyconfig.PartialDict`: literals, `dict(...)`, a name bound to one and mutated, a helper's
        return; not one built on an unknown value)."""
        if not self.may_hand_configs(src):
            return
        for call in src.facts.calls:
            if not _hands_config(call):
                continue
            for arg in call.node.args:
                if arg.keyword is not None and arg.keyword.value in _CONFIG_KEYWORDS:
                    value = self.config_value(src, arg.value, call.scope, call.node)
                    if _usable(value):
                        yield value, arg.value
        for node, value in self._argparse_config_defaults(src):
            yield value, node

    def argument_files(self, src: PythonSource) -> tuple[tuple[str, ...], bool, tuple[str, ...]]:
        """The arguments JSONs `src` hands to `HfArgumentParser.parse_json_file`: the paths its code names (an
        argparse option's default included), whether it hands one its command line names
        (`parse_json_file(sys.argv[1])`, also through a name bound to it), and the argparse options whose value
        it hands over (`parse_json_file(args.train_args_file)`: `--train_args_file`, which a launcher line
        sets). Parsed (libcst) only when the outline makes such a call. A fact of the file alone."""
        outline = src.outline
        if outline is None or not outline.call_attrs["parse_json_file"]:
            return (), False, ()
        from dslint.program.outline import PairingError
        paths: list[str] = []
        flags: list[str] = []
        argv = False
        try:
            for call in src.facts.calls:
                if call.attr != "parse_json_file":
                    continue
                arg = call.keyword("json_file")
                if arg is None:
                    arg = next((a for a in call.node.args if a.keyword is None and not a.star), None)
                if arg is None:
                    continue
                value = self.config_value(src, arg.value, call.scope, call.node)
                if isinstance(value, str) and value.endswith(".json"):
                    paths.append(value)
                elif _reads_argv(self, src, arg.value, call.scope):
                    argv = True
                else:
                    option = _argparse_option(self, src, arg.value, call.scope)
                    if option is not None:
                        flags += option[0]
                        if option[1] is not None:
                            paths.append(option[1])
        except PairingError:
            return (), False, ()
        return tuple(dict.fromkeys(paths)), argv, tuple(dict.fromkeys(flags))

    def may_hand_configs(self, src: PythonSource) -> bool:
        """Can `src` hand a config to DeepSpeed (decided on its own outline and text)? The outline has every
        call's resolved callee: parse only a file that makes one of these calls with a config keyword written
        in it, or declares an argparse flag for a config. A fact of the file alone: kept on the source for
        every view (and for forked workers: the main process asks it of every file of a big run)."""
        known = src.__dict__.get("_may_hand_configs")
        if known is not None:
            return known
        outline = src.outline
        if outline is None:
            known = False
        else:
            known = any(takes_config(c) for c, _ in outline.calls) \
                and _CONFIG_KEYWORD_TEXT.search(src.text) is not None      # the text search costs more
            known = known or bool(outline.call_attrs["add_argument"] and _CONFIG_FLAG.search(src.text))
        src.__dict__["_may_hand_configs"] = known
        return known

    @cached_property
    def config_evaluator(self):
        from dslint.program.pyconfig import ConfigEvaluator
        return ConfigEvaluator(self)

    def config_value(self, src: PythonSource, expr, scope: str, upto=None) -> Any:
        """The abstract value of a config expression just before `upto` (`dslint.program.pyconfig`), memoised."""
        memo = self.__dict__.setdefault("_config_values", {})
        key = (id(src), id(expr), id(upto))
        if key not in memo:
            memo[key] = self.config_evaluator.evaluate(src, expr, scope, upto)
        return memo[key]

    def _argparse_config_defaults(self, src: PythonSource):
        from dslint.sources.literals import literal_value
        for call in src.facts.calls:
            if call.attr != "add_argument" or not call.node.args:
                continue
            flag = literal_value(call.node.args[0].value)
            if isinstance(flag, str) and re.search(r"deepspeed(_config)?$|ds_config$", flag):
                default = call.keyword("default")
                if default is not None:
                    value = literal_value(default.value)
                    if isinstance(value, str) and value.endswith(".json"):
                        yield default.value, value

    def configs_for(self, src: PythonSource) -> list[ConfigView]:
        """The DeepSpeed configs that apply to a script, most specific evidence first (memoised per view)."""
        memo = self.__dict__.setdefault("_configs_memo", {})
        hit = memo.get(id(src))
        if hit is None:
            hit = memo[id(src)] = self._configs_for(src)
        return list(hit)

    def scripts_using(self, config: JsonSource) -> list[PythonSource]:
        """The scripts whose configs (`json_configs_for`) include `config`, in the view's order: one index of the
        view's JSON configs to their scripts, built on the first question."""
        def users() -> dict[int, list[PythonSource]]:
            out: dict[int, list[PythonSource]] = {}
            for py in self.python:
                for key in dict.fromkeys(id(c) for c in self.json_configs_for(py)):
                    out.setdefault(key, []).append(py)
            return out
        return list(self.memo("dsconfig.usage.scripts_using", users).get(id(config), ()))

    def json_configs_for(self, src: PythonSource) -> list[JsonSource]:
        """The JSON configs among `configs_for(src)`, without evaluating the config expressions of a file that
        cannot name a ".json" path (`may_name_json`: its dict-literal configs are not parsed, evaluated or
        placed for this question). With a single JSON config in the view (which `configs_for` applies to a
        script beside it that has no other config) it is `configs_for` itself."""
        memo = self.__dict__.get("_configs_memo")
        if memo is not None and id(src) in memo or len(self.json_configs) == 1:
            return [v.source for v in self.configs_for(src) if v.source is not None]
        out: list[JsonSource] = []

        def add_json(cfgs: list[JsonSource]) -> None:
            out.extend(c for c in cfgs if c not in out and isinstance(c.data, dict))

        for sh, launch in self._launches_for(src):
            for ref in launch.config_paths:
                add_json(self.launch_json(sh, launch, ref))
        add_json(self.configs_reached_through(src))
        if self.may_hand_configs(src) and self.may_name_json(src):
            for value, _ in self.literal_configs(src):
                if isinstance(value, str) and value.endswith(".json") and self.written_config(src, value) is None:
                    add_json(self.script_configs_by_reference(src, value))
        return out

    def _configs_for(self, src: PythonSource) -> list[ConfigView]:
        found: list[ConfigView] = []
        seen: set[str] = set()

        def add_json(cfgs: list[JsonSource]) -> None:
            for c in cfgs:
                if c.path not in seen and isinstance(c.data, dict):
                    seen.add(c.path)
                    found.append(ConfigView(c.data, c.path, c))

        for sh, launch in self._launches_for(src):
            for ref in launch.config_paths:
                add_json(self.launch_json(sh, launch, ref))
        add_json(self.configs_reached_through(src))
        for value, node in self.literal_configs(src):
            written = self.written_config(src, value)
            if written is not None:
                found.append(written)
            elif isinstance(value, str) and value.endswith(".json"):
                add_json(self.script_configs_by_reference(src, value))
            elif isinstance(value, dict):
                line = src.span(node).line
                found.append(ConfigView(value, f"{src.path}:{line}"))
        if not found and len(self.json_configs) == 1 and _beside(self.json_configs[0], src):
            add_json(self.json_configs)
        return found

    def configs_for_call(self, src: PythonSource, call) -> list[ConfigView]:
        """The DeepSpeed configs that reach one `deepspeed.initialize` / `init_inference` / HF `Trainer` call
        (`call`: a `dslint.program.facts.CallSite` of `src`): the dict literal or JSON path it is given, directly or
        through a name bound in the calling function (else at module level), for a Trainer the `deepspeed=` of
        the `TrainingArguments` its `args` is bound to. Without such an argument (`args.deepspeed_config`, a
        config loaded at run time) the script's configs (`configs_for`), less the dict literals that config
        calls of other functions are given. A dict whose stage is a variable gives a
        view whose `zero_stage` is None (unknown)."""
        expr = self._config_expr(src, call)
        if expr is not None:
            views = self._config_views(src, expr, call.scope, call.node)
            if views is not None:
                return views
        found = self.configs_for(src)
        others = {src.span(e).line for other in src.facts.calls
                  if other.scope != call.scope and _hands_config(other)
                  for e in [self._config_expr(src, other)] if e is not None}
        if expr is not None:
            others.discard(src.span(expr).line)
        return [c for c in found if c.source is not None or c.origin.rpartition(":")[0] != src.path
                or int(c.origin.rpartition(":")[2]) not in others]

    def _config_expr(self, src: PythonSource, call):
        """The expression handed to a config call as its DeepSpeed config (for a Trainer: the `deepspeed=` of
        the TrainingArguments its `args` is, or is bound to), else None."""
        import libcst as cst

        from dslint.program.facts import dotted_name
        callee = call.callee or ""
        last = callee.rsplit(".", 1)[-1]
        positional = [a.value for a in call.node.args if a.keyword is None and not a.star]
        by_kw = {a.keyword.value: a.value for a in call.node.args if a.keyword is not None}
        if last.endswith("Trainer") and last not in _CONFIG_CALLS:
            args = by_kw.get("args", positional[1] if len(positional) > 1 else None)
            if isinstance(args, cst.Name):
                args = self._bound_value(src, args.value, call.scope)
            if not isinstance(args, cst.Call):
                return None
            made = src.facts.resolve_expr(args.func) or dotted_name(args.func) or ""
            if not (made.endswith("TrainingArguments") or takes_config(made)):
                return None
            return next((a.value for a in args.args if a.keyword is not None and a.keyword.value == "deepspeed"),
                        None)
        for kw in ("config", "config_params", "deepspeed", "hf_ds_config", "deepspeed_config", "config_file"):
            if kw in by_kw:
                return by_kw[kw]
        index = {"initialize": 10, "init_inference": 1, "HfDeepSpeedConfig": 0}.get(last)
        return positional[index] if index is not None and len(positional) > index else None

    def _config_views(self, src: PythonSource, expr, scope: str, upto=None) -> Optional[list[ConfigView]]:
        """Views of a config argument: a dict built in Python (`dslint.program.pyconfig`), or a JSON path of the run;
        None when it cannot be read."""
        value = self.config_value(src, expr, scope, upto)
        if not _usable(value):
            return None
        if isinstance(value, dict):
            return [ConfigView(value, f"{src.path}:{src.span(expr).line}")]
        written = self.written_config(src, value)
        if written is not None:
            return [written]
        if isinstance(value, str) and value.endswith(".json"):
            hits = [ConfigView(c.data, c.path, c) for c in self.script_configs_by_reference(src, value)
                    if isinstance(c.data, dict)]
            return hits or None
        return None

    def written_config(self, src: PythonSource, value: Any) -> Optional[ConfigView]:
        """The config a path handed over in `src` names when `src` itself writes a dict there with `json.dump`
        (`dslint.program.written_configs`): that dict, whatever file of the repository bears the name."""
        if not isinstance(value, str) or not value.endswith(".json"):
            return None
        from dslint.program.written_configs import written_configs
        hit = written_configs(self, src).get(_norm(value))
        return ConfigView(hit[0], f"{src.path}:{hit[1]}") if hit is not None else None

    def _bound_value(self, src: PythonSource, name: str, scope: str):
        """The expression last assigned to `name` in `scope` (else at module level), or None."""
        import libcst as cst

        from dslint.sources.cstwalk import walk
        function = src.facts.functions.get(scope)
        bodies = [walk(function.node.body)] if function is not None else []
        bodies.append(small for stmt in src.module.body if isinstance(stmt, cst.SimpleStatementLine)
                      for small in stmt.body)
        for nodes in bodies:
            found = None
            for node in nodes:
                if isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                        isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == name:
                    found = node.value
            if found is not None:
                return found
        return None

    # --- world size and version -----------------------------------------------------------------
    def world_size_for(self, src: Optional[AnySource] = None) -> Optional[int]:
        if self.world_size_override:
            return self.world_size_override
        if src is None:
            return self._world_size_of(None)
        # memoised per view and file: the launcher check asks it of a config once per launcher line naming it,
        # and each answer reads every launcher line of the view (launch lines x launch lines on a monorepo)
        memo = self.__dict__.setdefault("_world_sizes", {})
        key = id(src)
        if key not in memo:
            memo[key] = self._world_size_of(src)
        return memo[key]

    def _world_size_of(self, src: Optional[AnySource]) -> Optional[int]:
        sizes = set()
        if isinstance(src, PythonSource):
            sizes = {launch.world_size for _, launch in self._launches_for(src) if launch.world_size}
        elif isinstance(src, JsonSource):
            for sh, launch in self.launches:
                if launch.world_size and any(src in self.launch_json(sh, launch, r)
                                             for r in launch.config_paths):
                    sizes.add(launch.world_size)
            use = self.json_use(src)
            sizes |= {launch.world_size for _, launch in (use.launches if use is not None else ()) if launch.world_size}
        if not sizes and src is not None:
            if isinstance(src, JsonSource):
                # issue 30, world-size-from-unrelated-launcher: no launch is seen to hand this config. A config
                # known by its keys alone (nothing names it: an editor's autosave copy) belongs to no launch of
                # the run; one a script names runs under that script's launches, or under one dslint cannot pin
                # -- any but those that hand another config of the run (theirs is that config, not this one)
                use = self.json_use(src)
                if use is None or not use.by_use:
                    return None
                # the launcher lines of the scripts that name it (`deepspeed.initialize(config="ds.json")` in
                # a script `deepspeed --num_gpus 2 train.py` starts), else the run's that hand no other config
                sizes = {launch.world_size for script in self.scripts_using(src)
                         for _, launch in self._launches_for(script) if launch.world_size}
                if not sizes:
                    sizes = {launch.world_size for sh, launch in self.launches
                             if launch.world_size and not self._hands_other_config(sh, launch, src)}
            else:
                sizes = {launch.world_size for _, launch in self.launches if launch.world_size}
            if len(sizes) > 1:
                return None
        return sizes.pop() if len(sizes) == 1 else None

    def _hands_other_config(self, sh: ShellSource, launch, src: JsonSource) -> bool:
        """Does this launcher line hand DeepSpeed a config of the run other than `src` (a config flag naming it,
        or a config whose use lists the line)?"""
        if any(c is not src for r in launch.config_paths for c in self.launch_json(sh, launch, r)):
            return True
        run = self.run_view or self
        claimed = run.__dict__.get("_launch_configs")
        if claimed is None:             # id(launch) -> ids of the configs whose use lists it, once per run
            claimed = run.__dict__["_launch_configs"] = {}
            for cfg in run.json_sources:
                use = self.json_uses.get(id(cfg))
                if use is not None and use.is_config:
                    for _, l in use.launches:
                        claimed.setdefault(id(l), set()).add(id(cfg))
        return bool(claimed.get(id(launch), set()) - {id(src)})

    def program_launches(self, src: PythonSource) -> list:
        """The launcher lines of the programs that hold `src`: those that run it, and those of every launch unit
        of this view whose files hold it (a helper module is run by its importers' launches)."""
        out = list(self._launches_for(src))
        for unit in self._units_reaching.get(id(src), []):
            out += [pair for pair in unit.launches if all(pair[1] is not l for _, l in out)]
        return out

    def accelerate_backends(self, src: PythonSource) -> Optional[frozenset]:
        """The accelerate backends (`DistributedType` names) the launcher lines of the programs that hold `src`
        (`program_launches`) start them with (`json_kinds.accelerate_backend`: an `accelerate launch` option, or
        the `distributed_type` of the config file it names), when every such line tells; None where one does not
        (no option and no config file: the machine's default config decides; another launcher: the environment
        or the code does), where a program holding `src` has no launcher line, or no line runs `src`."""
        launches = self.launch_backends(src)
        if not launches or any(backend is None for *_, backend in launches):
            return None
        return frozenset(backend for *_, backend in launches)

    def launch_backends(self, src: PythonSource) -> Optional[list[tuple[Any, Any, Optional[str]]]]:
        """(shell source, launch, backend) for each launcher line of the programs holding `src`
        (`program_launches`), the backend that line starts the job with (`json_kinds.accelerate_backend`; None
        where the line does not tell). None where a program holding `src` has no launcher line or no line runs
        it: the run does not show every way the file is started."""
        if any(not unit.launches for unit in self._units_reaching.get(id(src), [])):
            return None
        return [(sh, launch, self.launch_backend(sh, launch)) for sh, launch in self.program_launches(src)] or None

    def launch_backend(self, sh, launch) -> Optional[str]:
        """The accelerate backend one launcher line starts its job with (`json_kinds.accelerate_backend`, its
        config file read beside the script, under the root or as written); None where the line does not tell."""
        from dslint.program.json_kinds import _read_beside, accelerate_backend
        base = Path(sh.path).parent

        def read(ref: str) -> Optional[str]:
            found = _read_beside(self, ref, base)
            return found[1] if found else None
        return accelerate_backend(launch, read)

    def shards_parameters(self, src: PythonSource) -> bool:
        """Does `src` set up sharded parameters itself: start DeepSpeed (`deepspeed.initialize`,
        `init_inference`, `zero.Init`), build or hand an accelerate plugin (`DeepSpeedPlugin(...)`,
        `Accelerator(fsdp_plugin=...)`, ...), wrap with torch FSDP (`FullyShardedDataParallel`, `fully_shard`),
        or hand a `deepspeed=`/`fsdp=` setting (`TrainingArguments(deepspeed=...)`: the Trainer starts it)?
        Callees resolved through the imports."""
        from libcst import Name
        from dslint.sources.literals import literal_value
        if not _mentions(src, _SHARDING_WORDS):
            return False

        def given(arg) -> bool:
            return arg is not None and not (isinstance(arg.value, Name) and arg.value.value == "None") and \
                literal_value(arg.value) not in ("", False)
        for call in src.facts.calls:
            callee = call.callee or ""
            last = callee.rsplit(".", 1)[-1]
            if callee.startswith("deepspeed.") and last in ("initialize", "init_inference", "Init"):
                return True
            if callee.startswith("accelerate.") and last in _PLUGIN_CLASSES:
                return True
            if callee.startswith("torch.distributed.") and last in ("FullyShardedDataParallel", "fully_shard"):
                return True
            if given(call.keyword("deepspeed")) or given(call.keyword("fsdp")):
                return True
            if last == "Accelerator" and any(given(call.keyword(word)) for word in _PLUGIN_KEYWORDS):
                return True
        return False

    def configured_backends(self, src: PythonSource,
                            launches: Optional[list] = None) -> list[tuple[str, str, Any, PythonSource]]:
        """What the programs holding `src` show of an accelerate backend beyond their `accelerate launch` lines
        (`accelerate_backends`): (backend, note, node, file) for each `Accelerator(...)` call of their files given
        a plugin (`deepspeed_plugin=`, `fsdp_plugin=`, `megatron_lm_plugin=`, a value other than `None`), each
        plugin they build (`DeepSpeedPlugin(...)`, `FullyShardedDataParallelPlugin(...)`, `MegatronLMPlugin(...)`,
        resolved to accelerate through the imports), and DEEPSPEED for a launcher line that hands a DeepSpeed
        config to the program (`--deepspeed ds.json`). The files are those of the launch units reaching `src`
        (`src` alone where none does). Empty where nothing shows one: the job then runs on the backend of the
        machine's accelerate config, which the checked files do not show. `launches`: only these launcher lines
        count (those whose own backend is not otherwise told)."""
        from libcst import Name
        memo = self.__dict__.setdefault("_configured_backends", {})
        key = id(src)
        if key in memo:
            code, handed = memo[key]
            return code + [entry for launch, entry in handed
                           if launches is None or any(launch is other for other in launches)]
        units = self._units_reaching.get(id(src), [])
        files = {id(f) for unit in units for f in unit.files} or {id(src)}
        out: list[tuple[str, str, Any, PythonSource]] = []
        for f in self.mentioning(*_PLUGIN_KEYWORDS, *_PLUGIN_CLASSES):
            if id(f) not in files:
                continue
            for call in f.facts.calls:
                callee = call.callee or ""
                last = callee.rsplit(".", 1)[-1]
                if last in _PLUGIN_CLASSES and callee.startswith("accelerate."):
                    out.append((_PLUGIN_CLASSES[last], f"`{last}(...)` built here", call.node, f))
                elif last == "Accelerator":
                    for word, backend in _PLUGIN_KEYWORDS.items():
                        arg = call.keyword(word)
                        if arg is not None and not (isinstance(arg.value, Name) and arg.value.value == "None"):
                            out.append((backend, f"`Accelerator({word}=...)` here", call.node, f))
        handed = [(launch, ("DEEPSPEED", f"the {launch.launcher} launcher line hands the program a DeepSpeed config",
                            launch.line, sh)) for sh, launch in self.program_launches(src) if launch.config_paths]
        memo[key] = (out, handed)
        return self.configured_backends(src, launches)

    def runs_one_process(self, src: AnySource) -> bool:
        """Does every program that runs `src` start one process (each launch unit reaching it launched with
        one: `--include localhost:0`, `--num_gpus 1`, `--nproc_per_node 1`, `--num_processes 1`, ...; or
        `--world-size 1`)? Then no other rank exists to wait in a collective. False where a unit's size is
        unknown or no unit reaches the file."""
        if self.world_size_override:
            return self.world_size_override == 1
        if not isinstance(src, PythonSource) or not self.units:
            return False
        reaching = self._units_reaching.get(id(src), [])
        return bool(reaching) and all(u.world_size == 1 for u in reaching)

    def python_runs_only(self, src: AnySource) -> list:
        """The plain `python x.py` commands that start `src`'s program, when they are ALL that starts it: every
        launch unit reaching `src` is run by such commands of the checked scripts (one process each, see
        `launcher.python_run`), by no launcher line, and starts no processes itself (`mp.spawn`, a launcher API,
        a subprocess, Lightning). Then no other rank exists for a collective to wait on, as far as the checked
        files tell: rank hazards there are unproven (issue 30). Empty where a unit reaching it is launched, run
        by nothing seen, or spawns; with `--world-size` given; or for a file no unit reaches."""
        if self.world_size_override or not isinstance(src, PythonSource) or not self.units:
            return []
        reaching = self._units_reaching.get(id(src), [])     # the view's units holding it, in `units`' order
        if not reaching or any(u.launches or not u.python_runs for u in reaching):
            return []
        for unit in reaching:
            for f in unit.files:
                outline = getattr(f, "outline", None)
                if outline is None or any(_starts_processes(callee) for callee, _ in outline.calls):
                    return []
        return [pair for u in reaching for pair in u.python_runs]

    def _project_folders(self) -> list[Path]:
        """Folders where a version pin may live: those of the checked files and their parents up to the root."""
        seen: dict[Path, None] = {}
        root = self.root.resolve()
        parents: set[str] = set()
        for src in self.sources:
            parent = os.path.dirname(src.path)
            if parent in parents:
                continue                # the same folders as a file seen before
            parents.add(parent)
            for folder in _ancestors(Path(src.path).resolve(), root):
                seen.setdefault(folder, None)
        seen.setdefault(root, None)
        return list(seen)

    @cached_property
    def deepspeed_version(self) -> Optional[str]:
        """Version from --deepspeed-version/[tool.dslint], else a pin in the project (`deepspeed_pin`), else the
        installed distribution's metadata (never `import deepspeed`). None: unknown."""
        if self.deepspeed_version_override:
            return self.deepspeed_version_override
        pin = self.deepspeed_pin
        return pin[0] if pin else installed_version("deepspeed")

    def deepspeed_version_for(self, src: Optional[AnySource] = None) -> Optional[str]:
        """The DeepSpeed release `src` runs against: the version of the DeepSpeed source tree holding it
        (`deepspeed_tree_of`: a vendored DeepSpeed's own tests and examples run against that tree, whatever the
        project pins or the option says), else the project's (`deepspeed_version`)."""
        if src is not None and getattr(src, "path", None):
            tree = deepspeed_tree_of(Path(src.path), self.root)
            if tree is not None:
                return tree[0]
            if not self.deepspeed_version_override and (self.run_view or self)._all_pins:
                pin, _ = self.deepspeed_pin_for(src)
                return pin[0] if pin else installed_version("deepspeed")
        return self.deepspeed_version

    def deepspeed_pin_for(self, src: AnySource) -> tuple[Optional[tuple[str, str]], Optional[str]]:
        """(pin, other): the DeepSpeed pin of the project `src` belongs to, and where no pin applies the file of
        another sub-project's pin that does not (None when none was passed over). The pin of the project that holds
        the code: the nearest pin file up the tree from `src` (for a JSON config, also from each script that
        uses it), up to the root; else one in a folder that holds no Python file of the run (a `docker/` or
        `env/` folder beside the code). A pin in a folder that holds code of its own, not above `src`, is
        another sub-project's (a monorepo: `sofa/requirements.txt` does not pin `mPLUG/`'s DeepSpeed)."""
        run = self.run_view or self
        pins = run._all_pins
        starts = [Path(src.path).resolve()]
        if isinstance(src, JsonSource):
            starts += [Path(s.path).resolve() for s in run.scripts_using(src)]
        root = self.root.resolve()
        by_folder = {folder: pin for folder, pin in pins}
        for start in starts:
            for folder in _ancestors(start, root, limit=32):
                if folder in by_folder:
                    return by_folder[folder], None
        code = run._code_folders
        for folder, pin in pins:
            if folder not in code:
                return pin, None
        return None, pins[0][1][1] if pins else None

    def deepspeed_version_note(self, src: Optional[AnySource]) -> Optional[str]:
        """Where `src`'s project pins no DeepSpeed but another sub-project of the repository does
        (`deepspeed_pin_for`): what `deepspeed_version_for` judges it at instead, in words."""
        if self.deepspeed_version_override or src is None or not getattr(src, "path", None) or \
                not (self.run_view or self)._all_pins or deepspeed_tree_of(Path(src.path), self.root) is not None:
            return None
        pin, other = self.deepspeed_pin_for(src)
        if pin is not None or other is None:
            return None
        found = installed_version("deepspeed")
        return (f"judged at the installed DeepSpeed {found}" if found else "judged at the newest release of "
                "dslint's table") + \
            f": the DeepSpeed pin in {os.path.relpath(other, self.root.resolve())} belongs to another sub-project"

    @cached_property
    def _all_pins(self) -> list[tuple[Path, tuple[str, str]]]:
        """(folder, (version, file)) of every DeepSpeed pin in the folders `deepspeed_pin` searches, in its order."""
        out = []
        for folder in self._project_folders():
            for path in _pin_files(folder):
                found = pin_in_file(path)
                if found:
                    out.append((folder, (found, str(path))))
                    break
        return out

    @cached_property
    def _code_folders(self) -> frozenset:
        """The folders (and their parents up to the root) that hold a Python file of the run."""
        root = self.root.resolve()
        program = self.run_program
        out: set = set()
        for src in program.python:
            for folder in _ancestors(Path(src.path).resolve(), root, limit=32):
                if folder in out:
                    break
                out.add(folder)
        return frozenset(out)

    def settings_summary(self) -> dict:
        """What `--format json` reports under `settings`: the DeepSpeed version and its source."""
        if self.deepspeed_version_override:
            return {"deepspeed_version": self.deepspeed_version_override, "deepspeed_version_from": "option"}
        pin = self.deepspeed_pin
        if pin:
            return {"deepspeed_version": pin[0], "deepspeed_version_from": _shown(pin[1])}
        found = installed_version("deepspeed")
        return {"deepspeed_version": found, "deepspeed_version_from": "installed" if found else None}

    @cached_property
    def transformers_version(self) -> Optional[str]:
        """transformers' version: a pin in the project (as for DeepSpeed), else the installed distribution's
        metadata (never `import transformers`). None: unknown."""
        for folder in self._project_folders():
            for path in _pin_files(folder):
                found = pin_in_file(path, "transformers")
                if found:
                    return found
        return installed_version("transformers")

    @cached_property
    def deepspeed_pin(self) -> Optional[tuple[str, str]]:
        """(version, file) of the first DeepSpeed pin (`==`, `===`, `~=`; conda's `=` in environment files) in
        the folders of the checked files, nearest first, up to the root: `requirements*.txt` and the `.txt`
        files of a `requirements*/` folder, `pyproject.toml` (`[project] dependencies`,
        `[project.optional-dependencies]`, Poetry), `setup.py` / `setup.cfg` `install_requires`,
        `environment*.yml` (conda and pip sections). A lower bound (`>=`) is not a pin."""
        for folder in self._project_folders():
            for path in _pin_files(folder):
                found = pin_in_file(path)
                if found:
                    return found, str(path)
        return None


_PIN_FMT = r"""(?<![\w.-]){}\s*(?:\[[^\]]*\])?\s*(?:===?|~=)\s*v?([0-9][0-9A-Za-z.+!-]*)"""
_CONDA_PIN_FMT = r"""^\s*-\s*(?:conda-forge::)?{}\s*=\s*([0-9][0-9A-Za-z.+-]*)"""
_PIN = re.compile(_PIN_FMT.format("deepspeed"), re.I)
_CONDA_PIN = re.compile(_CONDA_PIN_FMT.format("deepspeed"), re.I | re.M)


def _pin_patterns(name: str) -> tuple[re.Pattern, re.Pattern]:
    if name == "deepspeed":
        return _PIN, _CONDA_PIN
    return (re.compile(_PIN_FMT.format(re.escape(name)), re.I),
            re.compile(_CONDA_PIN_FMT.format(re.escape(name)), re.I | re.M))


def _pin_files(folder: Path) -> list[Path]:
    """The files of one folder that may pin DeepSpeed, in the order they are trusted."""
    out: list[Path] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return out
    names = {p.name: p for p in entries}
    # names first: a stat only for the few entries whose name can matter
    out += [p for p in entries if p.name.startswith("requirements") and p.suffix == ".txt"
            and p.name != "requirements.txt" and p.is_file()]
    if "requirements.txt" in names:
        out.insert(0, names["requirements.txt"])
    for sub in entries:
        if sub.name.startswith("requirements") and not sub.suffix and sub.is_dir():
            try:
                out += sorted(p for p in sub.iterdir() if p.is_file() and p.suffix == ".txt")
            except OSError:
                pass
    out += [names[n] for n in ("pyproject.toml", "setup.py", "setup.cfg") if n in names]
    out += [p for p in entries if p.name.startswith("environment") and p.suffix in (".yml", ".yaml") and p.is_file()]
    return out


def pin_in_file(path: Path, name: str = "deepspeed") -> Optional[str]:
    """The version of `name` (DeepSpeed by default) pinned in one requirements/pyproject/setup/environment
    file, or None."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    if name not in text.lower():
        return None
    pin_re, conda_re = _pin_patterns(name)
    if path.name == "pyproject.toml":
        return _pyproject_pin(text, name)
    if path.suffix in (".yml", ".yaml"):
        found = conda_re.search(text)
        if found:
            return found.group(1)
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())      # comments pin nothing
    found = pin_re.search(text)
    return found.group(1) if found else None


def _pyproject_pin(text: str, name: str = "deepspeed") -> Optional[str]:
    """A pin among `[project] dependencies`, `[project.optional-dependencies]` and Poetry's dependency tables."""
    pin_re = _pin_patterns(name)[0]
    try:
        from dslint import toml
        data = toml.loads(text)
    except Exception:                      # an unreadable file: read its lines
        found = pin_re.search("\n".join(line.split("#", 1)[0] for line in text.splitlines()))
        return found.group(1) if found else None
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    specs: list = list(project.get("dependencies") or [])
    for group in (project.get("optional-dependencies") or {}).values():
        specs += list(group or [])
    for spec in specs:
        found = pin_re.search(spec) if isinstance(spec, str) else None
        if found:
            return found.group(1)
    poetry = (data.get("tool") or {}).get("poetry") or {}
    tables = [poetry.get("dependencies") or {}] + [g.get("dependencies") or {}
                                                    for g in (poetry.get("group") or {}).values() if isinstance(g, dict)]
    for table in tables:
        value = table.get(name) if isinstance(table, dict) else None
        if isinstance(value, dict):
            value = value.get("version")
        if isinstance(value, str):
            found = re.fullmatch(r"\s*(?:===?|~=)?\s*v?([0-9][0-9A-Za-z.+!-]*)\s*", value)
            if found:
                return found.group(1)
    return None


def _argparse_option(view: "ProjectView", src: PythonSource, expr, scope: str):
    """(option strings, its `.json` default or None) of the argparse option of `src` whose value `expr` is
    (`args.train_args_file`, directly or through a name bound to it), else None."""
    import libcst as cst

    from dslint.sources.literals import literal_value
    for _ in range(3):
        if isinstance(expr, cst.Name):
            expr = view._bound_value(src, expr.value, scope)
            continue
        break
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
        return None
    dest = expr.attr.value
    for call in src.facts.calls:
        if call.attr != "add_argument":
            continue
        names = [v for a in call.node.args if a.keyword is None
                 for v in [literal_value(a.value)] if isinstance(v, str) and v.startswith("-")]
        given = call.keyword("dest")
        named = literal_value(given.value) if given is not None else None
        implied = next((n.lstrip("-").replace("-", "_") for n in names if n.startswith("--")), None)
        if (named if isinstance(named, str) else implied) != dest:
            continue
        default = call.keyword("default")
        value = literal_value(default.value) if default is not None else None
        return names, value if isinstance(value, str) and value.endswith(".json") else None
    return None


def _reads_argv(view: "ProjectView", src: PythonSource, expr, scope: str) -> bool:
    """Does `expr` read the command line (`sys.argv[...]`, `os.path.abspath(sys.argv[1])`), directly or through
    a name last bound to such an expression in `scope` (else at module level)?"""
    import libcst as cst

    from dslint.sources.cstwalk import walk
    for _ in range(3):
        for node in walk(expr):
            if isinstance(node, cst.Attribute) and node.attr.value == "argv" and \
                    isinstance(node.value, cst.Name) and node.value.value == "sys":
                return True
            if isinstance(node, cst.Name) and node.value == "argv" and src.outline.imports.get("argv") == "sys.argv":
                return True
        if not isinstance(expr, cst.Name):
            return False
        expr = view._bound_value(src, expr.value, scope)
        if expr is None:
            return False
    return False


def _usable(value: Any) -> bool:
    """A config value a ConfigView can stand on: a path string, or a dict not built on an unknown value."""
    if isinstance(value, str):
        return True
    return isinstance(value, dict) and not getattr(value, "based_unknown", False)


def installed_version(name: str) -> Optional[str]:
    """The `Version:` of an installed distribution, read from its `*.dist-info/METADATA` (or `*.egg-info/
    PKG-INFO`) on sys.path: what importlib.metadata answers, without the ~50 ms its import costs every run."""
    import sys
    wanted = name.lower().replace("-", "_")
    for entry in sys.path:
        folder = Path(entry or ".")
        try:
            names = [p for p in folder.iterdir() if p.suffix in (".dist-info", ".egg-info")]
        except OSError:
            continue
        for meta in sorted(names):
            if meta.name.split("-", 1)[0].lower().replace("-", "_") != wanted:
                continue
            for leaf in ("METADATA", "PKG-INFO"):
                try:
                    text = (meta / leaf).read_text(errors="replace")
                except OSError:
                    continue
                found = re.search(r"^Version:\s*(\S+)", text, re.M)
                if found:
                    return found.group(1)
    return None


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifiers(src: PythonSource) -> frozenset[str]:
    """The identifier-like words of `src`'s text: a fact of the text, kept on the source for every view that
    indexes it (and built by the outline workers of a big run, `dslint.pipeline.workers.text_facts`)."""
    words = src.__dict__.get("_identifiers")
    if words is None:
        words = src.__dict__["_identifiers"] = frozenset(_IDENTIFIER.findall(src.text))
    return words


def _shown(path: str) -> str:
    """A path as findings show theirs: relative to the working directory when below it."""
    import os
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    except ValueError:
        return path


def _beside(config: JsonSource, src: PythonSource) -> bool:
    """Is the config in the script's folder or a folder above it?"""
    import posixpath
    folder = posixpath.dirname(_norm(config.path))
    here = posixpath.dirname(_norm(src.path))
    return folder in ("", ".") or here == folder or here.startswith(folder.rstrip("/") + "/")


_STAR_IMPORT = re.compile(r"^from\s+([\w.]+)\s+import\s+\*", re.M)


def _star_imports(src: PythonSource) -> list[str]:
    """The modules `src` star-imports (`from utils import *`), by its text: kept on the source (a fact of its
    text; asked for every unresolved call name, each ask scanned the whole text)."""
    found = src.__dict__.get("_star_imports")
    if found is None:
        found = src.__dict__["_star_imports"] = _STAR_IMPORT.findall(src.text) if "import *" in src.text else []
    return found


# a leading path component held in a shell variable the launcher leaves unknown (`${1-PATH_TO_CODE}/`, `$ROOT/`)
_UNKNOWN_PREFIX = re.compile(r"\$(?:\{[^{}/]*\}|[A-Za-z_]\w*)/")


@lru_cache(maxsize=1 << 16)
def _norm(path: str) -> str:
    """(Memoised: every launch unit's view asks it of the paths of every file it holds.)"""
    from dslint.program.units import norm_path      # one normalisation for the program model and the view
    return norm_path(path)


_VERSION_TEXT = re.compile(r"\s*v?(\d+\.\d+\.\d+)[0-9A-Za-z.+-]*\s*")
_INSTALLED_VERSION = re.compile(r"""^version\s*=\s*['"]v?(\d+\.\d+\.\d+)[^'"]*['"]""", re.M)


def deepspeed_tree_of(path: Path, root: Path) -> Optional[tuple[str, str]]:
    """(version, folder) of the DeepSpeed source tree that holds `path`, if any: the nearest folder, up to the
    run's root (to the file system's root for a file outside it), that holds DeepSpeed's package
    (`deepspeed/__init__.py` with `deepspeed/git_version_info.py`, the module DeepSpeed reads its own version
    with) and the version that module reads: `version.txt` beside the package (a source checkout: what setup.py
    builds) or `deepspeed/git_version_info_installed.py` (what setup.py writes into an installed copy). Decided
    from the tree's own version file, never from folder names (`DeepSpeed-0.9.5/` says nothing). Memoised per
    process (the files are read once)."""
    return _tree_of(str(path), str(root))


def _mentions(src: PythonSource, words: tuple[str, ...]) -> bool:
    """Does the text of `src` contain one of `words`? Kept on the source for every view that asks."""
    memo = src.__dict__.setdefault("_dslint_mentions", {})
    hit = memo.get(words)
    if hit is None:
        hit = memo[words] = any(w in src.text for w in words)
    return hit


class ViewIndex:
    """What a dict of fully qualified name → (source, name within it), built over a view's files in the view's
    order (a later file's entry replacing an earlier one's), answers, read from the run's entries of every
    file (`entries`: name → [(source, name within it)], one per file defining it) and the view's order of its
    files (`order`: id(file) → position): among a name's entries, that of the view's file latest in its order.
    Answers are memoised per name. `get`, `in` and `[]`; no iteration (`ProjectView._suffix_table` reads
    `entries`)."""

    __slots__ = ("entries", "order", "_memo")

    def __init__(self, entries: dict[str, list[tuple[PythonSource, str]]], order: dict[int, int]) -> None:
        self.entries = entries
        self.order = order
        self._memo: dict[str, Optional[tuple[PythonSource, str]]] = {}

    def get(self, key: str, default: Any = None) -> Any:
        memo = self._memo
        if key in memo:
            hit = memo[key]
        else:
            hit, best = None, -1
            order = self.order
            for entry in self.entries.get(key, ()):
                at = order.get(id(entry[0]))
                if at is not None and at > best:
                    hit, best = entry, at
            memo[key] = hit
        return default if hit is None else hit

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key: str) -> tuple[PythonSource, str]:
        hit = self.get(key)
        if hit is None:
            raise KeyError(key)
        return hit


def _class_methods(src: PythonSource) -> list[tuple[str, str]]:
    """(method name, qualified name within the file) of each method of a class of the outline, kept on the
    source for every view's `methods_named`."""
    memo = src.__dict__.get("_dslint_class_methods")
    if memo is None:
        memo = []
        outline = src.outline
        if outline is not None:
            for qual in outline.functions:
                owner, _, name = qual.rpartition(".")
                if owner and owner in outline.classes:
                    memo.append((name, qual))
        src.__dict__["_dslint_class_methods"] = memo
    return memo


def _qualified_classes(src: PythonSource) -> list[tuple[str, str]]:
    """(fully qualified name, name within the file) of each class of the outline."""
    if src.outline is None:
        return []
    return [(f"{src.module_name}.{qual}" if src.module_name else qual, qual) for qual in src.outline.classes]


def _qualified_functions(src: PythonSource) -> list[tuple[str, str]]:
    """(fully qualified name, name within the file) of each function of the outline, kept on the source for
    every view's `_function_index`."""
    memo = src.__dict__.get("_dslint_qualified_functions")
    if memo is None:
        memo = src.__dict__["_dslint_qualified_functions"] = [
            (f"{src.module_name}.{qual}" if src.module_name else qual, qual) for qual in src.outline.functions]
    return memo


@lru_cache(maxsize=4096)
def _tree_of(path: str, root: str) -> Optional[tuple[str, str]]:
    try:
        start = Path(path).resolve()
        stop = Path(root).resolve()
    except OSError:
        return None
    folder = start if start.is_dir() else start.parent
    for _ in range(32):
        found = _tree_version(str(folder))
        if found is not None:
            return found, str(folder)
        if folder == stop or folder.parent == folder:
            return None
        folder = folder.parent
    return None


@lru_cache(maxsize=4096)
def _tree_version(folder: str) -> Optional[str]:
    base = Path(folder)
    package = base / "deepspeed"
    if not ((package / "__init__.py").is_file() and (package / "git_version_info.py").is_file()):
        return None
    try:
        installed = (package / "git_version_info_installed.py").read_text(errors="replace")
    except OSError:
        installed = ""
    found = _INSTALLED_VERSION.search(installed)
    if found:
        return found.group(1)
    try:
        text = (base / "version.txt").read_text(errors="replace")
    except OSError:
        return None
    found = _VERSION_TEXT.fullmatch(text)
    return found.group(1) if found else None


# APIs that start processes of the program from inside it (a plain `python x.py` run of such a program is not one
# process): torch/multiprocessing spawn, torch's and DeepSpeed's launchers, accelerate's notebook launcher,
# subprocesses, Lightning/Ray/submitit/MPI runners
_PROCESS_STARTERS = ("torch.multiprocessing", "multiprocessing", "torch.distributed.run", "torch.distributed.launch",
                     "torch.distributed.elastic", "deepspeed.launcher", "accelerate.notebook_launcher",
                     "accelerate.launchers", "accelerate.debug_launcher", "subprocess", "os.system", "os.fork",
                     "pytorch_lightning", "lightning", "ray", "submitit", "mpi4py", "horovod",
                     "torch.distributed.launcher")


def _starts_processes(callee: Optional[str]) -> bool:
    if not callee:
        return False
    return any(callee == p or callee.startswith(p + ".") for p in _PROCESS_STARTERS) or \
        callee.startswith(("os.spawn", "os.exec", "os.popen")) or callee.rsplit(".", 1)[-1] in ("spawn", "start_processes")


def _ancestors(path: Path, stop: Path, limit: int = 6):
    folder = path if path.is_dir() else path.parent
    for _ in range(limit):
        yield folder
        if folder == stop or folder.parent == folder:
            return
        folder = folder.parent


def version_tuple(version: Optional[str]) -> Optional[tuple[int, ...]]:
    if not version:
        return None
    nums = re.findall(r"\d+", version.split("+")[0])[:3]
    return tuple(int(n) for n in nums) if nums else None

