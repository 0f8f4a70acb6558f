"""The package layout stays acyclic: no module of dslint imports, directly or through others, a module that
imports it back -- lazy imports inside functions count (they are still a dependency), imports under
`if TYPE_CHECKING:` do not (they never run)."""

import ast
from pathlib import Path

import dslint

ROOT = Path(dslint.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
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


def test_rules_query_the_program_model_through_one_interface():
    """Rules read the program model only through `dslint.program.query` (deliverable 7 of issue 18): no rule
    module imports another module of `dslint.program`, lazily or not, nor reaches the view behind the query
    (`ctx.project`)."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    program = {m for m in files if m == "dslint.program" or m.startswith("dslint.program.")}
    offenders = {}
    for name, path in files.items():
        if not name.startswith("dslint.rules."):
            continue
        used = _imports(path, name, set(files)) & program
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
    for concept in ("units", "roles", "configs", "process_groups", "collective_sites", "query", "outline", "facts"):
        assert (ROOT / "program" / f"{concept}.py").is_file(), concept
    for package in ("rank", "models"):
        assert (ROOT / "program" / package / "__init__.py").is_file(), package
