"""Which code of the run a program reaches (issue 30: evidence before a finding, vendored-library-unreached).

A hazard is real only where a program runs the code that holds it. An application repository often carries a
copy of a library (a `trl/` package beside `llava/`) of which its programs use a few classes; a rank hazard in
a class of that copy that no program of the repository constructs, calls, subclasses or hands anywhere is not
a hazard of any program there: its evidence is incomplete (`unreached_definition`).

Reachability is decided on the run's Python files, by reference, never by folder or package names:

* a file that is the entry of a launch unit (launched, an `if __name__ == "__main__":` guard, work at module
  scope) is a program: all of it counts as reached;
* otherwise the module-scope function or class holding the finding is reached when a file of the run names
  it in code -- a call, a base class, an argument, an assignment, an attribute (`trl.DDPOTrainer`): any
  `Name` or `Attribute` outside import statements and string constants, and, in its own file, outside its own
  body --, or a string names it as an entry point (`"pkg.mod:main"`), or a decorator registers it, or pytest
  collects it (a `test*` function or `Test*` class of a `test_*.py` / `*_test.py` file: how pytest starts code);
* module-scope code (outside any function or class) runs when the module is imported: reached;
* what the repository's own published package exports (`published`: an `__init__.py` of its package imports or
  lists the public name, the top-level package sits beside a setup file at or above every file of the run) is
  run by the package's users, outside the repository: reached, though no program of the run names it.

Only the programs that hold the file decide (the launch units whose imports reach it, and their files): a
library checked alone, or a module no program imports, keeps its findings. The search is an over-approximation of reaching (a same-named reference elsewhere counts), so
it only ever leaves a finding proven that a finer analysis would hide, never the reverse.
"""

from __future__ import annotations

import ast
import os
import posixpath
import re
import stat
from typing import Optional

from dslint.program.outline import parse_tree
from dslint.sources import PythonSource


def unreached_definition(run, src: PythonSource, line: int) -> Optional[tuple[str, int]]:
    """(name, first line) of the module-scope function or class of `src` holding `line` when none of the
    programs whose files hold `src` -- the launch units reaching it, `run.context_of(src)` -- reaches it (see
    the module's docstring); None when one does, or when no program holds `src` (a library checked alone, a file
    no unit imports: nothing decides). Decided within those units' files only, as every fact of the program
    model is, so a file's findings do not depend on what else is checked."""
    if run is None or not getattr(run, "units", None) or not isinstance(src, PythonSource):
        return None
    ctx = run.context_of(src)
    if ctx is None or any(u.entry is src for u in ctx.units):
        return None
    outline = getattr(src, "outline", None)
    if outline is None:
        return None
    top = next(((name, first, last) for name, first, last in outline.tops if first <= line <= last), None)
    if not ctx.units:
        # a file no program imports: decided only when nothing can load the module at all (`unloaded_module`)
        if not unloaded_module(run, src):
            return None
        return (top[0], top[1]) if top is not None else (src.module_name or posixpath.basename(src.path), 1)
    if top is None:
        return None                       # module-scope code: runs when the module is imported
    name, first, last = top
    memo = run.__dict__.setdefault("_reach_memo", {})
    key = (id(src), name, first)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = not _reached(run, src, name, first, last, ctx.files, importers=True) \
            and not published(run, src, name)
    return (name, first) if hit else None


def unloaded_module(run, src: PythonSource) -> bool:
    """Can nothing load the module `src` (issue 30, class-never-instantiated)? The run has programs (launch
    units), none of which imports `src` though one imports a module of its top-level package (outside
    packages: of its folder) -- the programs that hold its package decide, not unrelated ones --, and:

    * `src` is no program of its own and nothing a tool starts by its file name: not an entry (launched, an
      `if __name__ == "__main__":` guard, training work at module scope), not a package's `__init__.py` /
      `__main__.py`, not a file pytest collects (`test_*.py`, `*_test.py`, `conftest.py`), no `setup.py`,
      `hubconf.py` or other file a tool loads by name (`_ENTRY_FILES`); and its module-scope code only
      defines (imports, defs, classes, assignments: a call statement or a loop is a script run by hand);
    * no file of the run imports it, and no other file under its project folder -- Python, shell, configs
      (YAML, JSON, TOML, INI), notebooks, documentation -- spells the module's file stem as a word: an
      import statement (`from .clap import X`, `import pkg.clap`), a string import (`importlib.import_module("pkg.clap")`, a registry's
      `custom_imports`, a Hydra `_target_`), a command line (`python -m pkg.clap`) or an entry point all spell it;
    * no import by a computed name in a file of the run under that project folder can give it: `importlib.import_module(f"convert_{kind}_{name}")`
      may load `convert_loader_megatron` (the name's literal pieces are matched, holes match anything), and a
      name from a variable, a folder listing (a plugin folder's auto-import, as fairseq's `models/__init__.py`
      registers every model module it finds) or a spec may load any module (`_computed_imports`).

    Then no code of the module ever runs in the repository, and a hazard there is no program's (a leftover
    experiment beside the module the model is built from). Limits: the words are searched in the files on disk
    under the module's project folder -- the folder holding its top-level package, else its own folder, so that
    the verdict does not depend on what else is checked (a text outside it is not seen); a module of a distribution is still importable by its users -- where its
    package sits beside a setup file, nothing is decided."""
    if run is None or not getattr(run, "units", None) or not isinstance(src, PythonSource):
        return False
    memo = run.__dict__.setdefault("_unloaded_memo", {})
    hit = memo.get(id(src))
    if hit is None:
        hit = memo[id(src)] = _unloaded(run, src)
    return hit


# files a tool loads by their file name, not by an import: packages, pytest, setuptools, torch.hub, nox/invoke/
# fabric task files, Sphinx, the interpreter's site hooks
_ENTRY_FILES = ("__init__.py", "__main__.py", "conftest.py", "setup.py", "hubconf.py", "noxfile.py", "tasks.py",
                "fabfile.py", "conf.py", "sitecustomize.py", "usercustomize.py")


def _unloaded(run, src: PythonSource) -> bool:
    path = src.path.replace("\\", "/")
    base = posixpath.basename(path)
    if not base.endswith(".py") or base in _ENTRY_FILES or base.startswith("test_") or base.endswith("_test.py"):
        return False
    if run.runs_by_itself(src) or not os.path.isfile(src.path):
        return False
    ctx = run.context_of(src)
    if ctx is None or ctx.units:
        return False
    root = run._package_root(src)
    if root is not None:
        package, _, top = root.rpartition(":")
        if _distribution_folder(run, posixpath.dirname(package), top):
            return False                  # a distribution's module: its users may import it
    if any(src in run.imports_of(other) for other in run.python if other is not src):
        return False                      # a file of the run imports it (an orphan script, a notebook's copy)
    if not _beside_used_modules(run, src, root):
        return False                      # no program uses its package: a library checked alone keeps its findings
    # the project folder of the module: the folder holding its top-level package, else its own folder
    scope = os.path.dirname(os.path.abspath(src.path))
    if root is not None:
        scope = os.path.dirname(os.path.abspath(root.rpartition(":")[0] or "."))
    if _works_at_module_scope(src) or _may_import_by_computed_name(run, src, scope):
        return False
    mentions = _stem_mentions(run, scope)
    if mentions is None:
        return False
    own = os.path.normcase(os.path.abspath(src.path))
    return not any(other != own for other in mentions.get(base[:-3], ()))


def _beside_used_modules(run, src: PythonSource, root: Optional[str]) -> bool:
    """Does a program of the run import a module of `src`'s top-level package (`root`), or, outside packages,
    a module of `src`'s folder (an imported module, not a program's own entry)? Only then do the programs
    that hold its package -- not unrelated ones checked beside it -- decide that `src` is never loaded."""
    folder = posixpath.dirname(src.path.replace("\\", "/"))
    for unit in run.units:
        for f in unit.files:
            if f is src or f is unit.entry:
                continue
            if root is not None and run._package_root(f) == root:
                return True
            if root is None and posixpath.dirname(f.path.replace("\\", "/")) == folder:
                return True
    return False


# files whose text may name a module: code, launch scripts, configs, notebooks, documentation
_TEXT_SUFFIXES = frozenset({".py", ".pyi", ".sh", ".bash", ".zsh", ".yaml", ".yml", ".json", ".jsonnet", ".toml",
                            ".cfg", ".ini", ".conf", ".txt", ".md", ".rst", ".ipynb", ".slurm", ".sbatch", ".pbs",
                            ".mk", ".env"})
_TEXT_NAMES = frozenset({"Makefile", "Dockerfile", "Procfile", "Justfile"})
_MAX_TEXT_BYTES = 2_000_000
_MAX_WALKED = 200_000
_STEM_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _stem_mentions(run, top: str) -> Optional[dict[str, set]]:
    """Module file stem of the run's Python files → the files (absolute, at most two) under the folder `top`
    (the module's project folder: what is decided does not depend on what else is checked) whose text spells it
    as a word; None when that folder cannot be read whole (too many files). One walk per folder and run, only
    for the stems the run's modules have."""
    memo = run.__dict__.setdefault("_stem_mentions", {})
    if top in memo:
        return memo[top]
    found: Optional[dict[str, set]] = None
    if os.path.isdir(top):
        stems = {posixpath.basename(s.path.replace("\\", "/"))[:-3] for s in run.python if s.path.endswith(".py")}
        found, walked = {}, 0
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")]
            walked += len(files)
            if walked > _MAX_WALKED:
                found = None
                break
            for name in files:
                if name not in _TEXT_NAMES and os.path.splitext(name)[1].lower() not in _TEXT_SUFFIXES:
                    continue
                full = os.path.join(folder, name)
                try:
                    info = os.lstat(full)         # regular files only: no FIFO, device or link is opened
                    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_TEXT_BYTES:
                        continue
                    with open(full, encoding="utf-8", errors="ignore") as fh:
                        words = set(_STEM_WORD.findall(fh.read(_MAX_TEXT_BYTES)))
                except (OSError, ValueError):
                    continue
                key = os.path.normcase(full)
                for word in words & stems:
                    seen = found.setdefault(word, set())
                    if len(seen) < 2:
                        seen.add(key)
    memo[top] = found
    return found


def _works_at_module_scope(src: PythonSource) -> bool:
    """Does module-scope code of `src` do work beyond defining things -- a call as a statement (`main()`,
    `dist.barrier()`), a loop or `with` block, an `if` whose body does more than import, assign or define (a
    script run by hand, with no `__main__` guard) -- or call a function or class `src` defines?"""
    tree = _tree(src)
    if tree is None:
        return True
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for stmt in tree.body:
        if _defines_only(stmt):
            continue
        if isinstance(stmt, (ast.Expr, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If,
                             ast.Try)):
            return True
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in own:
                return True
    return False


def _defines_only(stmt: ast.stmt) -> bool:
    """A module-scope statement that only defines: an import, a def or class, an assignment, a docstring, and
    an `if`/`try` made of those (`if TYPE_CHECKING:`, `try: import x except ImportError: x = None`)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                         ast.Pass)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.If):
        return all(_defines_only(s) for s in (*stmt.body, *stmt.orelse))
    if isinstance(stmt, ast.Try):
        return all(_defines_only(s) for s in (*stmt.body, *stmt.orelse, *stmt.finalbody,
                                              *(s for h in stmt.handlers for s in h.body)))
    return False


# calls that import a module by a name given as their first argument
_IMPORT_BY_NAME = frozenset({"import_module", "__import__", "spec_from_file_location", "load_source", "run_path",
                             "run_module", "SourceFileLoader", "find_spec"})
# calls that load a module object made elsewhere (by a spec, a loader): their module's name is not at hand
_LOADS_MODULE = frozenset({"load_module", "exec_module", "module_from_spec"})


def _computed_imports(run, top: str) -> list:
    """What the run's Python files under the folder `top` import by a computed name: for each such call a
    pattern of the module names it can give (`f"convert_{kind}_{name}"` → `convert_.*_.*`), or None when any
    name can come (a variable, a name from a folder listing, a module loaded from a spec). Memoised per run and
    folder."""
    memo = run.__dict__.setdefault("_computed_imports", {})
    if top not in memo:
        found: list = []
        prefix = top.rstrip(os.sep) + os.sep
        for src in run.python:
            if os.path.abspath(src.path).startswith(prefix):
                found.extend(_computed_in(src))
        memo[top] = found
    return memo[top]


def _computed_in(src: PythonSource) -> list:
    text = src.text
    if not any(word in text for word in (*_IMPORT_BY_NAME, *_LOADS_MODULE)):
        return []
    tree = _tree(src)
    if tree is None:
        return [None]
    out: list = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in _LOADS_MODULE:
            out.append(None)
        elif name in _IMPORT_BY_NAME:
            if not node.args:
                out.append(None)
            elif not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                out.append(_name_pattern(node.args[0]))
    return out


def _name_pattern(node: ast.expr) -> Optional[re.Pattern]:
    """A pattern of the names an f-string or a `+` of strings can make (holes match anything); None for
    anything else (a variable: any name)."""
    parts = _pieces(node)
    if parts is None or not any(p for p in parts if p is not None):
        return None
    body = "".join(".*" if p is None else re.escape(p) for p in parts).lstrip("\\.")
    return re.compile(r"(?:^|\.)" + body + r"$")


def _pieces(node: ast.expr) -> Optional[list]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list = []
        for v in node.values:
            out.append(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pieces(node.left), _pieces(node.right)
        return None if left is None and right is None else [*(left or [None]), *(right or [None])]
    return [None]


def _may_import_by_computed_name(run, src: PythonSource, top: str) -> bool:
    """Can a computed-name import of the run's files under `top` (the module's project folder) give `src`'s
    module (`_computed_imports`)?"""
    names = {src.module_name or "", posixpath.basename(src.path.replace("\\", "/"))[:-3]}
    for pattern in _computed_imports(run, top):
        if pattern is None or any(pattern.search(n) for n in names if n):
            return True
    return False


_DISTRIBUTION_FILES = ("setup.py", "pyproject.toml", "setup.cfg")


def published(run, src: PythonSource, name: str) -> bool:
    """Is `name` (a module-scope definition of `src`) part of the public interface of the repository's own
    distribution? Then the programs that run it are its users', outside the repository, and no program of the
    run needs to reach it. It is when

    * `src` is a module of a package whose top-level folder sits beside a `setup.py` / `pyproject.toml` /
      `setup.cfg` (what packaging installs: setuptools' discovery takes the packages beside the file), that
      folder being at or above every Python file of the run (the repository's own package, not a copy of a
      library in a sub-folder, whose setup file is in the sub-folder);
    * neither the name nor a module on its path is private (a leading underscore);
    * an `__init__.py` of a package on its path exports it: imports it (`from .trainer import PPOTrainer`) or
      lists it as a string (`__all__`, a lazy package's `_import_structure`).
    """
    if name.startswith("_") or not isinstance(src, PythonSource):
        return False
    parts = (src.module_name or "").split(".")
    if len(parts) < 2 or any(p.startswith("_") for p in parts[1:]):
        return False
    root = run._package_root(src)
    if root is None:
        return False
    package, _, top = root.rpartition(":")
    folder = posixpath.dirname(package)          # the folder holding the top-level package
    if not _distribution_folder(run, folder, top):
        return False
    by_path = getattr(run, "_by_path", {})
    for n in range(len(parts) - 1, 0, -1):
        init = by_path.get(posixpath.normpath(posixpath.join(folder or ".", *parts[:n], "__init__.py")))
        tree = _tree(init) if init is not None else None
        if tree is not None and _exports(tree, name):
            return True
    return False


def _distribution_folder(run, folder: str, top: str) -> bool:
    """Does `folder` hold a distribution's setup file beside the package `top` (both on disk: the run's files
    are read from there, not handed in as texts), and lie at or above every Python file of the run?"""
    memo = run.__dict__.setdefault("_distribution_memo", {})
    hit = memo.get((folder, top))
    if hit is None:
        base = folder or "."
        hit = os.path.isfile(os.path.join(base, top, "__init__.py")) and \
            any(os.path.isfile(os.path.join(base, f)) for f in _DISTRIBUTION_FILES)
        if hit:
            paths = list(getattr(run, "_by_path", {}))
            prefix = posixpath.normpath(base)
            hit = prefix == "." and not any(p.startswith("../") or p.startswith("/") for p in paths) or \
                all(p.startswith(prefix + "/") for p in paths)
        memo[(folder, top)] = hit
    return hit


def _exports(tree: ast.Module, name: str) -> bool:
    """Does a package's `__init__` export `name`: import it, or list it as a string (`__all__`,
    `_import_structure`)?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
        if isinstance(node, ast.Constant) and node.value == name:
            return True
    return False


def named_by(run, src: PythonSource, line: int, files: list) -> bool:
    """Is the module-scope function or class of `src` holding `line` named in code (as `unreached_definition`
    asks of the whole run) by one of `files` -- the files of one program? True for module-scope code, a
    decorated or pytest-collected definition, and where `src` itself is among `files` and names it outside its
    body. Used to tell which MoE layers a program builds: a class of the package that the program's files
    never construct, subclass or name (an evaluation-only model class beside the training one) is not in it."""
    outline = getattr(src, "outline", None)
    if outline is None:
        return True
    top = next(((name, first, last) for name, first, last in outline.tops if first <= line <= last), None)
    if top is None:
        return True
    name, first, last = top
    memo = run.__dict__.setdefault("_named_memo", {}) if run is not None else {}
    key = (id(src), name, first, id(files), len(files))
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _reached(run, src, name, first, last, files)
    return hit


def _reached(run, src: PythonSource, name: str, first: int, last: int, files: Optional[list] = None,
             importers: bool = False) -> bool:
    """Is the definition `name` (lines first-last of `src`) named in code by one of `files` (None: every file of
    the run) -- or, with `importers`, by any file of the run whose imports reach `src` (a test pytest runs, an
    example: programs of their own that no launch line names)?"""
    tree = _tree(src)
    if tree is None:
        return True
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == name and _first_line(n) == first), None)
    if node is None or node.decorator_list:
        return True                       # a decorator may register it (a CLI command, a model registry)
    if _pytest_collects(src, node):
        return True
    from dslint.program.project_view import identifiers
    scope = files if files is not None else run.python
    inside = {id(f) for f in scope}
    registered = False
    for other in (run.python if importers else scope):
        if name not in identifiers(other):
            continue
        if id(other) not in inside and not _imports_package_of(run, other, src):
            continue
        tree = _tree(other)
        if tree is None:
            return True
        skip = (first, last) if other is src else None
        found = _names_in_code(tree, name, skip)
        if found == "named":
            return True
        registered = registered or found == "registered"
    # registered with an HF Auto factory (`AutoModelForCausalLM.register(Config, Model)`): the factory builds
    # it where the program asks the factory for a model
    return registered and any(_auto_factory_call(callee) for f in scope
                              for callee, _ in (getattr(getattr(f, "outline", None), "calls", None) or ()))


def _imports_package_of(run, other: PythonSource, src: PythonSource) -> bool:
    """Do `other`'s imports reach `src`, or a module of the package `src` is in (`from trl import DDPOTrainer`
    reaches trl/__init__.py, which a lazy package's `_import_structure` maps to the module defining it)?"""
    root = run._package_root(src)
    for f in run.closure(other):
        if f is src or (root is not None and f is not other and run._package_root(f) == root):
            return True
    return False


def _auto_factory_call(callee: Optional[str]) -> bool:
    """`AutoModel*.from_pretrained` / `from_config`: transformers' model factories, which construct the model
    class registered for the checkpoint's config."""
    if not callee or "." not in callee:
        return False
    owner, _, method = callee.rpartition(".")
    return method in ("from_pretrained", "from_config") and owner.rsplit(".", 1)[-1].startswith("AutoModel")


def _registration(node: ast.AST) -> bool:
    """`AutoModel*.register(config_class, model_class)`: hands the class to transformers' Auto factory."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register" \
        and isinstance(node.func.value, (ast.Name, ast.Attribute)) \
        and (node.func.value.id if isinstance(node.func.value, ast.Name) else node.func.value.attr).startswith("AutoModel")


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decorators])


def _pytest_collects(src: PythonSource, node: ast.AST) -> bool:
    base = posixpath.basename(src.path.replace("\\", "/"))
    if not (base.startswith("test_") or base.endswith("_test.py")):
        return False
    if isinstance(node, ast.ClassDef):
        return node.name.startswith("Test")
    return node.name.startswith("test")


def _tree(src: PythonSource) -> Optional[ast.Module]:
    tree = src.__dict__.get("_reach_tree")
    if tree is None:
        tree = src.__dict__["_reach_tree"] = parse_tree(src.text, src.path) or False
    return tree or None


def _names_in_code(tree: ast.Module, name: str, skip: Optional[tuple[int, int]]) -> Optional[str]:
    """"named" when `tree` names `name` outside import statements (and outside lines `skip`, the definition's
    own), "registered" when it does so only as an argument of an Auto factory's `register`, else None."""
    todo: list[ast.AST] = [tree]
    registered = None
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if _registration(node):
            if any(isinstance(a, ast.Name) and a.id == name for a in node.args):
                registered = "registered"
                continue
        lineno = getattr(node, "lineno", None)
        if skip is not None and lineno is not None and skip[0] <= lineno <= (getattr(node, "end_lineno", None)
                                                                             or lineno) <= skip[1]:
            continue
        if isinstance(node, ast.Name) and node.id == name:
            return "named"
        if isinstance(node, ast.Attribute) and node.attr == name:
            return "named"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(":" + name):
            return "named"                # an entry point: "package.module:name"
        todo.extend(ast.iter_child_nodes(node))
    return registered


def runs_unsharded(view, src: PythonSource, line: int) -> bool:
    """Does every program that reaches the code at `line` of `src` run without sharded parameters (`view`: a
    ProjectView)? The programs are the launch units holding `src` whose files name the module-scope function or
    class holding the line (`named_by`: a helper of a shared module called by one trainer is no code of the
    others); there must be some, each started only by launcher lines that tell an accelerate backend that
    shards nothing (`ProjectView.launch_backend`: `accelerate launch --config_file ddp.yaml` with
    `distributed_type: MULTI_GPU`; not DEEPSPEED, FSDP or MEGATRON_LM) and hand no DeepSpeed config, and none of
    its files may set sharding up itself (`ProjectView.shards_parameters`). A collective only DeepSpeed's
    partitioned parameters make is local code there."""
    units = [unit for unit in view._units_reaching.get(id(src), [])
             if named_by(view.run_program, src, line, unit.files)]
    if not units:
        return False
    for unit in units:
        if not unit.launches or any(launch.config_paths for _, launch in unit.launches):
            return False
        if any(view.launch_backend(sh, launch) in _SHARDING_BACKENDS for sh, launch in unit.launches):
            return False
        if any(view.shards_parameters(f) for f in unit.files):
            return False
    return True


# what `launch_backend` may give that shards parameters, or leaves the backend untold (None)
_SHARDING_BACKENDS = (None, "DEEPSPEED", "FSDP", "MEGATRON_LM")
