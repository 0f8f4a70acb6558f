"""Docstrings, comments and docs name only things that exist: a dotted `dslint.…` path resolves to a module
or an attribute of one, and a backticked `Class.attr` of a class defined in dslint names one of its members
(a method, a class-level or dataclass field, or an attribute its methods set on `self`). A rename or a moved
function otherwise leaves the reader a pointer to nothing (issue 34)."""

import ast
import collections
import importlib
import re

from tests.conftest import REPO

_DOTTED = re.compile(r"(?<![\w.])(dslint(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_CLASS_ATTR = re.compile(r"`([A-Z][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")


def _texts():
    for path in sorted((REPO / "dslint").rglob("*.py")) + sorted((REPO / "docs").glob("*.md")):
        yield path, path.read_text(encoding="utf-8")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for name in parts[k:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def _class_members() -> dict[str, set[str]]:
    members: dict[str, set[str]] = collections.defaultdict(set)
    for path in (REPO / "dslint").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = members[node.name]
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                    names.add(sub.attr)
    return members


def test_dotted_dslint_references_resolve():
    missing = [f"{path.relative_to(REPO)}:{i}: {m.group(1).rstrip('.')}"
               for path, text in _texts() for i, line in enumerate(text.splitlines(), 1)
               for m in _DOTTED.finditer(line) if not _resolves(m.group(1).rstrip("."))]
    assert not missing, "references to nothing:\n" + "\n".join(missing)


def test_class_member_references_exist():
    members = _class_members()
    missing = [f"{path.relative_to(REPO)}:{i}: `{m.group(1)}.{m.group(2)}`"
               for path, text in _texts() for i, line in enumerate(text.splitlines(), 1)
               for m in _CLASS_ATTR.finditer(line)
               if m.group(1) in members and m.group(2) not in members[m.group(1)]]
    assert not missing, "members that do not exist:\n" + "\n".join(missing)
