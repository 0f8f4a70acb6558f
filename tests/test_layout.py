"""The package layout stays acyclic: no module of dslint imports, directly or through others, a module that
imports it back. Every import statement counts, wherever it is: at module level, inside a function (a deferred
import is still a dependency, only a hidden one), and under `if TYPE_CHECKING:` (it never runs, but it says
that the module's meaning depends on the other's: a circle through annotations is a circle of the design; a
module that needs a type of a higher one declares the protocol it uses instead, `program.rank.value_uniformity.
ProjectLevel`). What is counted is the module an import names: `from dslint.sources import X` depends on
`dslint.sources`, `import dslint.sources.guard` on `dslint.sources.guard` alone, not on the package's
`__init__` that Python runs first (a package's `__init__` may gather its own modules). Imports by name at
run time (`importlib.import_module`) are not seen."""

import ast
from pathlib import Path

import dslint

ROOT = Path(dslint.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str], type_checking: bool = True) -> set[str]:
    """The modules of `modules` that `path` imports; with `type_checking=False`, those imported only under
    `if TYPE_CHECKING:` are left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        out.update(t for t in targets if t in modules and t != name)
    return out


def _cycles() -> list[list[str]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {name: _imports(path, name, set(files)) for name, path in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:          # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles() == []


def test_deferred_and_type_checking_imports_are_counted(tmp_path):
    """The graph holds the imports a module-level scan would miss: one inside a function, one under
    `if TYPE_CHECKING:`."""
    (tmp_path / "m.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dslint.a import X\n"
                                   "def f():\n    from dslint.b import y\n    import dslint.c\n")
    assert _imports(tmp_path / "m.py", "dslint.m", {"dslint.a", "dslint.b", "dslint.c"}) == \
        {"dslint.a", "dslint.b", "dslint.c"}


def test_sources_never_import_the_program_model():
    """A source file knows how to read itself; what it means is the program model's (`dslint.program.per_file`,
    installed as the source's readers): no module of dslint.sources imports dslint.program, lazily or not."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    offenders = {name: sorted(m for m in _imports(path, name, set(files)) if m.startswith("dslint.program"))
                 for name, path in files.items() if name == "dslint.sources" or name.startswith("dslint.sources.")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_rules_query_the_program_model_through_one_interface():
    """Rules read the program model only through `dslint.program.query` (deliverable 7 of issue 18): no rule
    module imports another module of `dslint.program`, lazily or not, nor reaches the view behind the query
    (`ctx.project`). A type named under `if TYPE_CHECKING:` for an annotation is no read of the model (the
    rule context holds the view the query wraps): those imports count for the cycle test, not here."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    program = {m for m in files if m == "dslint.program" or m.startswith("dslint.program.")}
    offenders = {}
    for name, path in files.items():
        if not name.startswith("dslint.rules."):
            continue
        used = _imports(path, name, set(files), type_checking=False) & program
        used.discard("dslint.program.query")
        used.discard("dslint.program")         # `from dslint.program import query` names the package too
        if used:
            offenders[name] = sorted(used)
        if "ctx.project" in path.read_text(encoding="utf-8"):
            offenders.setdefault(name, []).append("ctx.project")
    assert offenders == {}


def test_the_program_model_is_one_package_of_concepts():
    """The program model's concept modules live under dslint/program/; no analysis package beside it."""
    assert not (ROOT / "analysis").exists()
    for concept in ("units", "roles", "config_handoffs", "process_groups", "collective_sites", "query", "outline", "facts"):
        assert (ROOT / "program" / f"{concept}.py").is_file(), concept
    for concept in ("lattice", "value_uniformity", "function_summaries", "reaching_ranks",
                    "collective_hazards", "collective_sequences", "raising_ranks"):
        assert (ROOT / "program" / "rank" / f"{concept}.py").is_file(), concept
    for package in ("rank", "models"):
        assert (ROOT / "program" / package / "__init__.py").is_file(), package


def test_lower_layers_never_call_up_into_the_check_run():
    """The check run (`dslint.engine` and its stages, `dslint.pipeline`) and what drives it (`dslint.fix_command`,
    `dslint.commands`) sit above the rules, the program model, the sources and the fix data model: none of
    those imports them, lazily or not (issue 34: the fix loop used to live in `dslint.fixes`)."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    upper = ("dslint.engine", "dslint.pipeline", "dslint.fix_command", "dslint.commands")
    lower = ("dslint.sources", "dslint.program", "dslint.rules", "dslint.fixes", "dslint.dsconfig", "dslint.findings")
    offenders = {}
    for name, path in files.items():
        if any(name == p or name.startswith(p + ".") for p in lower):
            used = sorted(m for m in _imports(path, name, set(files)) if any(m == u or m.startswith(u + ".") for u in upper))
            if used:
                offenders[name] = used
    assert offenders == {}
