"""Launch units: what runs together.

An *entry point* is a Python file that a launcher line of the checked shell scripts runs (`deepspeed x.py`,
`torchrun -m pkg.x`, …), or one that runs by itself: an `if __name__ == "__main__":` guard, or training /
inference work at module scope (`deepspeed.initialize(...)`, `trainer.train()`, `model.generate(...)` …).
Its *unit* is the entry, the modules it imports inside the checked tree (transitively: package imports,
package-relative imports, modules beside the script or in a folder above it, as `sys.path` tricks make
importable), and the launcher lines that run it. Facts never cross units: a file is analysed in the context
of the units that reach it (`context_of`), and a file no unit reaches only with the files it is
import-connected to among the unreached ones (a library package; an unrelated script stands alone).

Everything here is decided on the outlines (CPython's parse) and paths: no libcst parse, no file system
access beyond the paths of the run.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Iterable, Optional

from dslint.program.outline import MODULE_SCOPE
from dslint.sources import PythonSource, ShellSource

# module-scope calls that make a file a program of its own (last name of the resolved callee)
_RUNS_AT_TOP = frozenset({"initialize", "init_inference", "init_distributed", "init_process_group", "train",
                          "generate", "backward", "fit", "main", "launch", "spawn", "evaluate", "predict"})


@dataclass(frozen=True)
class FileFacts:
    """What the program model needs of one Python file, a function of its text alone (kept in the result
    cache by content, so an edit re-reads only the edited file): the modules its imports name, whether it
    runs by itself, the config paths its code names (`deepspeed.initialize(config="ds.json")`, an
    argparse default), the arguments JSONs it hands to `HfArgumentParser.parse_json_file` and whether it
    hands it one named on its command line (`parse_json_file(sys.argv[1])`: dslint.program.json_kinds)."""

    imports: tuple[str, ...]
    runs_by_itself: bool
    config_refs: tuple[str, ...] = ()
    argument_files: tuple[str, ...] = ()
    arguments_from_argv: bool = False
    argument_flags: tuple[str, ...] = ()     # argparse options whose value it hands to parse_json_file

    @staticmethod
    def of(src: PythonSource, config_refs: Iterable[str] = (), argument_files: Iterable[str] = (),
           arguments_from_argv: bool = False, argument_flags: Iterable[str] = ()) -> Optional["FileFacts"]:
        outline = src.outline
        if outline is None:
            return None
        runs = outline.main_guard or any(scope == MODULE_SCOPE and callee and callee.rsplit(".", 1)[-1] in _RUNS_AT_TOP
                                         for callee, scope in outline.calls)
        return FileFacts(tuple(outline.imported_modules), runs, tuple(config_refs), tuple(argument_files),
                         arguments_from_argv, tuple(argument_flags))


@dataclass(eq=False)
class LaunchUnit:
    entry: PythonSource
    files: list[PythonSource]                             # the entry first, then what it imports
    launches: list[tuple[ShellSource, object]] = field(default_factory=list)   # (shell, launcher.Launch)
    # the plain `python x.py` commands of the checked shell scripts that run the entry (one process each)
    python_runs: list[tuple[ShellSource, object]] = field(default_factory=list)

    @property
    def world_size(self) -> Optional[int]:
        """The processes its launches start: the largest of their world sizes (each read from the launcher's
        own options, `dslint.sources.launcher`); None when one of them depends on the machine, or when no
        launcher line runs the entry (a script run by itself may be started any way)."""
        sizes = [launch.world_size for _, launch in self.launches]
        if not sizes or any(size is None for size in sizes):
            return None
        return max(sizes)

    @property
    def name(self) -> str:
        """How findings name the unit: the launcher line that runs it, else the entry script."""
        if self.launches:
            sh, launch = self.launches[0]
            return f"{sh.path}:{launch.line}"
        return self.entry.path


@dataclass(eq=False)
class Context:
    """The files one group of Python files is analysed with (`analysed` ⊆ `files`), and the units it stands
    for (empty for files no unit reaches)."""

    analysed: list[PythonSource]
    files: list[PythonSource]
    units: list[LaunchUnit]


def norm_path(path: str) -> str:
    """A path as the program model and the project view compare them: normalised, with forward slashes."""
    return posixpath.normpath(path.replace(os.sep, "/").replace("\\", "/"))


_norm = norm_path


class Program:
    """The launch units of one run, and the context each Python file is analysed in."""

    def __init__(self, python: list[PythonSource], shell: list[ShellSource],
                 facts: Optional[dict[int, FileFacts]] = None):
        """`facts`: id(source) → FileFacts (read from the outlines where missing)."""
        self.facts = dict(facts or {})
        for src in python:
            if id(src) not in self.facts:
                found = FileFacts.of(src)
                if found is not None:
                    self.facts[id(src)] = found
        python = [s for s in python if id(s) in self.facts]
        self.python = python
        self.shell = shell
        self._by_path = {_norm(s.path): s for s in python}
        self._by_name: dict[str, list[PythonSource]] = {}
        for s in python:
            self._by_name.setdefault(posixpath.basename(self._norm_of(s)), []).append(s)
        self._imports: dict[tuple, list[PythonSource]] = {}
        self._lookups: dict[tuple[str, str], list[PythonSource]] = {}
        self._closures: dict[int, list[PythonSource]] = {}
        self.launch_targets: list[tuple[ShellSource, object, PythonSource]] = []
        self.python_targets: list[tuple[ShellSource, object, PythonSource]] = []
        for sh in shell:
            for launch in sh.launches:
                target = self._launch_target(sh, launch)
                if target is not None:
                    self.launch_targets.append((sh, launch, target))
            for run in getattr(sh, "python_runs", ()):
                target = self._launch_target(sh, run)
                if target is not None:
                    self.python_targets.append((sh, run, target))
        self.units = self._build_units()
        self._contexts = self._build_contexts()

    def _norm_of(self, src: PythonSource) -> str:
        return _norm(src.path)

    # --- import resolution ------------------------------------------------------------------------
    def _file_for_module(self, dotted: str, bases: Iterable[str]) -> list[PythonSource]:
        """The files an import of `dotted` runs, looked up under each base folder in turn: the module itself
        (longest prefix that is a file) and the packages' `__init__.py` on the way."""
        for base in bases:
            found = self._under(base, dotted)
            if found:
                return found
        return []

    def _under(self, base: str, dotted: str) -> list[PythonSource]:
        key = (base, dotted)
        hit = self._lookups.get(key)
        if hit is None:
            hit = self._lookups[key] = []
            stem = "" if base in ("", ".") else base
            for part in dotted.split("."):
                if not part:
                    continue
                stem = f"{stem}/{part}" if stem else part
                found = self._by_path.get(stem + ".py") or self._by_path.get(stem + "/__init__.py")
                if found is not None:
                    hit.append(found)     # a folder without __init__.py is a namespace package: go on
        return hit

    def _bases(self, src: PythonSource, entry: Optional[PythonSource]) -> list[str]:
        """Folders an import in `src` may be resolved under, nearest first: the package root of `src` (its
        folder above the package), the folder of the script being run, `src`'s folder and those above it
        (`sys.path.insert(0, "..")` and running from the repository root)."""
        path = self._norm_of(src)
        folder = posixpath.dirname(path)
        bases: list[str] = []
        depth = src.module_name.count(".")
        root = folder
        for _ in range(depth if posixpath.basename(path) != "__init__.py" else depth + 1):
            root = posixpath.dirname(root)
        for b in (root, posixpath.dirname(self._norm_of(entry)) if entry is not None else None):
            if b is not None and b not in bases:
                bases.append(b)
        for up in _ancestors(folder):
            if up not in bases and not (up == "" and "." in bases):
                bases.append(up)
        return bases

    def imports_of(self, src: PythonSource, entry: Optional[PythonSource] = None) -> list[PythonSource]:
        """The checked files that `src`'s import statements run."""
        key = (id(src), posixpath.dirname(self._norm_of(entry)) if entry is not None else None)
        hit = self._imports.get(key)
        if hit is None:
            out: dict[int, PythonSource] = {}
            facts = self.facts.get(id(src))
            if facts is not None:
                bases = self._bases(src, entry)
                for dotted in facts.imports:
                    for f in self._file_for_module(dotted, bases):
                        if f is not src:
                            out.setdefault(id(f), f)
            hit = self._imports[key] = list(out.values())
        return hit

    def closure(self, entry: PythonSource) -> list[PythonSource]:
        hit = self._closures.get(id(entry))
        if hit is not None:
            return hit
        seen = {id(entry): entry}
        todo = [entry]
        while todo:
            src = todo.pop()
            for dep in self.imports_of(src, entry):
                if id(dep) not in seen:
                    seen[id(dep)] = dep
                    todo.append(dep)
        hit = self._closures[id(entry)] = list(seen.values())
        return hit

    # --- entry points ---------------------------------------------------------------------------
    def _launch_target(self, sh: ShellSource, launch) -> Optional[PythonSource]:
        folder = posixpath.dirname(_norm(sh.path))
        if launch.script:
            script = launch.script
            candidates = [posixpath.join(folder, script), script]
            if launch.cwd is not None:       # the folder the script `cd`-ed into comes first
                anchor, path = launch.cwd
                candidates[:0] = [posixpath.join(folder, path, script)] + ([posixpath.join(path, script)]
                                                                           if anchor == "start" else [])
            for candidate in candidates:
                hit = self._by_path.get(_norm(candidate))
                if hit is not None:
                    return hit
            # `cd ..; deepspeed train.py`, `$ROOT/train.py`: the file of that name nearest to the shell script
            name = posixpath.basename(script)
            return _nearest(self._by_name.get(name, []), folder, self._norm_of)
        if launch.module:
            found = self._file_for_module(launch.module, _ancestors(folder))
            return found[-1] if found else None
        return None

    def runs_by_itself(self, src: PythonSource) -> bool:
        facts = self.facts.get(id(src))
        return facts is not None and facts.runs_by_itself

    def _build_units(self) -> list[LaunchUnit]:
        launched: dict[int, list] = {}
        for sh, launch, target in self.launch_targets:
            launched.setdefault(id(target), []).append((sh, launch))
        by_python: dict[int, list] = {}
        for sh, run, target in self.python_targets:
            by_python.setdefault(id(target), []).append((sh, run))
        units = []
        for src in self.python:
            if id(src) in launched or self.runs_by_itself(src):
                units.append(LaunchUnit(src, self.closure(src), launched.get(id(src), []), by_python.get(id(src), [])))
        return units

    # --- contexts -------------------------------------------------------------------------------
    def _build_contexts(self) -> dict[int, Context]:
        """One context per set of units that reach a file: a file reached by units {A, B} is analysed once,
        with the files of A and B; files of one unit only see that unit. Files no unit reaches are grouped
        by import connection among themselves, with what they import as context."""
        member: dict[int, list[LaunchUnit]] = {}
        for unit in self.units:
            for f in unit.files:
                member.setdefault(id(f), []).append(unit)
        groups: dict[tuple[int, ...], list[PythonSource]] = {}
        for src in self.python:
            units = member.get(id(src))
            if units:
                groups.setdefault(tuple(id(u) for u in units), []).append(src)
        by_id = {id(u): u for u in self.units}
        contexts: dict[int, Context] = {}
        for key, analysed in groups.items():
            units = [by_id[k] for k in key]
            files: dict[int, PythonSource] = {}
            for u in units:
                for f in u.files:
                    files.setdefault(id(f), f)
            ctx = Context(analysed, list(files.values()), units)
            for src in analysed:
                contexts[id(src)] = ctx
        orphans = [s for s in self.python if id(s) not in member]
        for component in self._components(orphans):
            files: dict[int, PythonSource] = {}
            for src in component:
                for f in self.closure(src):
                    files.setdefault(id(f), f)
            ctx = Context(component, list(files.values()), [])
            for src in component:
                contexts[id(src)] = ctx
        return contexts

    def _components(self, orphans: list[PythonSource]) -> list[list[PythonSource]]:
        """Groups of the files no unit reaches: import-connected ones, and the modules of one package (a
        library package checked as a whole is one program's code, not a set of scripts) -- union-find over
        both. Files outside packages (no `__init__.py` above them) join only through imports."""
        parent = {id(s): id(s) for s in orphans}

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: int, b: int) -> None:
            a, b = find(a), find(b)
            if a != b:
                parent[a] = b

        packages: dict[str, int] = {}
        for src in orphans:
            for dep in self.imports_of(src):
                if id(dep) in parent:
                    union(id(src), id(dep))
            root = self._package_root(src)
            if root is not None:
                union(id(src), packages.setdefault(root, id(src)))
        groups: dict[int, list[PythonSource]] = {}
        for src in orphans:
            groups.setdefault(find(id(src)), []).append(src)
        return list(groups.values())

    def _package_root(self, src: PythonSource) -> Optional[str]:
        """The folder of the top-level package `src` belongs to, None outside packages."""
        if "." not in src.module_name and posixpath.basename(self._norm_of(src)) != "__init__.py":
            return None
        top = src.module_name.split(".", 1)[0]
        folder = posixpath.dirname(self._norm_of(src))
        depth = src.module_name.count(".") - (0 if posixpath.basename(self._norm_of(src)) == "__init__.py" else 1)
        for _ in range(max(depth, 0)):
            folder = posixpath.dirname(folder)
        return f"{folder}:{top}"

    def context_of(self, src: PythonSource) -> Optional[Context]:
        return self._contexts.get(id(src))

    def contexts(self) -> list[Context]:
        out: dict[int, Context] = {}
        for ctx in self._contexts.values():
            out.setdefault(id(ctx), ctx)
        return list(out.values())

    def target_of(self, launch) -> Optional[PythonSource]:
        """The Python file a launcher line runs (None when it is not one of the checked files)."""
        index = self.__dict__.get("_target_by_launch")
        if index is None:
            index = self.__dict__["_target_by_launch"] = {id(l): t for _, l, t in self.launch_targets}
        return index.get(id(launch))

    def launches_of(self, src: PythonSource) -> list[tuple[ShellSource, object]]:
        """The launcher lines that run `src` (indexed once: every file of every context asks)."""
        index = self.__dict__.get("_launches_by_target")
        if index is None:
            index = self.__dict__["_launches_by_target"] = {}
            for sh, launch, target in self.launch_targets:
                index.setdefault(id(target), []).append((sh, launch))
        return index.get(id(src), [])


def _ancestors(folder: str) -> list[str]:
    """`folder` and the folders above it, nearest first, ending at the top of the path ("" for a relative one)."""
    out = [folder]
    while folder not in ("", ".", "/") and posixpath.dirname(folder) != folder:
        folder = posixpath.dirname(folder)
        out.append(folder)
    return out


def _nearest(candidates: list[PythonSource], folder: str, norm) -> Optional[PythonSource]:
    """The candidate whose path shares the longest folder prefix with `folder`; None when that is a tie."""
    if not candidates:
        return None
    want = [p for p in folder.split("/") if p not in ("", ".")]

    def shared(src: PythonSource) -> int:
        have = [p for p in posixpath.dirname(norm(src)).split("/") if p not in ("", ".")]
        n = 0
        for a, b in zip(want, have):
            if a != b:
                break
            n += 1
        return n

    scored = sorted(((shared(c), c) for c in candidates), key=lambda t: -t[0])
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        return None
    return scored[0][1]
