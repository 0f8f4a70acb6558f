"""The one fact-gathering walk over a parsed Python file.

Every rule reads these tables instead of walking the tree again: imports and their aliases, functions
and classes with their qualified names, and every call with its callee resolved through the imports.
No libcst metadata provider is used here (they cost 1.3-3.7x the parse, DESIGN.md §5): scopes are
tracked with a plain stack and names are resolved against the import table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import libcst as cst

MODULE_SCOPE = "<module>"


def dotted_name(expr: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def _module_dotted(node: Union[cst.Attribute, cst.Name]) -> str:
    return dotted_name(node) or ""


@dataclass
class CallSite:
    node: cst.Call
    callee: Optional[str]        # resolved through imports: "torch.distributed.all_reduce", "engine.backward"
    scope: str                   # qualified name of the enclosing function, or MODULE_SCOPE

    @property
    def attr(self) -> Optional[str]:
        """The last component of the callee (`backward` for `engine.backward`)."""
        return self.callee.rsplit(".", 1)[-1] if self.callee else None

    def keyword(self, name: str) -> Optional[cst.Arg]:
        for arg in self.node.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None


@dataclass
class FunctionInfo:
    name: str
    qualname: str
    node: cst.FunctionDef
    class_name: Optional[str]
    params: list[str]
    calls: list[CallSite] = field(default_factory=list)


@dataclass
class ClassInfo:
    name: str
    qualname: str
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, FunctionInfo] = field(default_factory=dict)


@dataclass
class FileFacts:
    imports: dict[str, str] = field(default_factory=dict)
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)

    def resolve(self, dotted: Optional[str]) -> Optional[str]:
        """Replace the first component of a dotted name by what it was imported as."""
        if not dotted:
            return dotted
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            return dotted
        return f"{target}.{rest}" if rest else target

    def resolve_expr(self, expr: cst.BaseExpression) -> Optional[str]:
        return self.resolve(dotted_name(expr))

    def imports_any(self, *prefixes: str) -> bool:
        return any(q == p or q.startswith(p + ".") for q in self.imports.values() for p in prefixes)

    def nested_named(self, name: str) -> list[FunctionInfo]:
        """Functions (not methods) defined inside another scope whose own name is `name`."""
        index = self.__dict__.get("_nested")
        if index is None:
            index = self.__dict__["_nested"] = {}
            for qual, info in self.functions.items():
                if "." in qual and info.class_name is None:
                    index.setdefault(qual.rsplit(".", 1)[-1], []).append(info)
        return index.get(name, [])

    def calls_in(self, scope: str) -> list[CallSite]:
        info = self.functions.get(scope)
        return info.calls if info else [c for c in self.calls if c.scope == MODULE_SCOPE]


class FactCollector:
    """Fills a FileFacts in one pre-order walk (dslint.cstwalk, not libcst's visitor: ~10x cheaper)."""

    def __init__(self, package: str = "") -> None:
        self.facts = FileFacts()
        self._package = package
        self.parts: dict[int, tuple] = {}
        self._snapshot: Optional[list] = None
        self._functions_made: list = []
        self._classes_made: list = []

    def run(self, module: cst.Module, previous: Optional[dict] = None) -> FileFacts:
        """The facts of `module`, walked one top-level statement after the other (comments and blank lines
        around them hold nothing). Each statement's part is kept (`parts`: the imports before and after it,
        the functions, classes and calls it added); `previous` (id(statement) → part, of a tree this one was
        spliced from, `sources.splice`) gives a statement that is the same node object, reached with the
        same imports in the same order, its former part instead of a walk: what it adds depends on nothing
        else (its calls and bases resolve against those imports, its scopes are its own)."""
        facts = self.facts
        for stmt in module.body:
            before = self._imports_now()
            part = previous.get(id(stmt)) if previous else None
            if part is not None and part[5] is stmt and (part[0] is before or part[0] == before):
                _, after, functions, classes, calls, _ = part
                for qual, info in functions:
                    facts.functions[qual] = info
                for qual, info in classes:
                    facts.classes[qual] = info
                facts.calls.extend(calls)
                if after is not part[0]:           # the statement imports
                    facts.imports.clear()
                    facts.imports.update(after)
                    self._snapshot = after
                self.parts[id(stmt)] = part
                continue
            self._functions_made: list = []
            self._classes_made: list = []
            first_call = len(facts.calls)
            self._walk(stmt)
            self.parts[id(stmt)] = (before, self._imports_now(), self._functions_made, self._classes_made,
                                    facts.calls[first_call:], stmt)
        return facts

    def _imports_now(self) -> list:
        """The imports so far, in order (one list shared by the statements between two imports)."""
        if self._snapshot is None:
            self._snapshot = list(self.facts.imports.items())
        return self._snapshot

    def _walk(self, top: cst.CSTNode) -> None:
        from dslint.cstwalk import children

        stack: list[tuple[cst.CSTNode, tuple]] = [(top, ())]
        while stack:
            node, scopes = stack.pop()
            kind = type(node)
            if kind is cst.Call:
                self._call(node, scopes)
            elif kind is cst.Import:
                self._import(node)
                continue
            elif kind is cst.ImportFrom:
                self._import_from(node)
                continue
            elif kind is cst.ClassDef:
                scopes = scopes + ((node.name.value, self._class(node, scopes)),)
            elif kind is cst.FunctionDef:
                scopes = scopes + ((node.name.value, self._function(node, scopes)),)
            kids = [(child, scopes) for child in children(node)]
            kids.reverse()
            stack.extend(kids)

    # --- imports -------------------------------------------------------------------------------
    def _import(self, node: cst.Import) -> None:
        self._snapshot = None
        for alias in node.names:
            full = _module_dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.facts.imports[alias.asname.name.value] = full
            else:
                head = full.split(".", 1)[0]
                self.facts.imports.setdefault(head, head)

    def _import_from(self, node: cst.ImportFrom) -> None:
        self._snapshot = None
        module = _module_dotted(node.module) if node.module is not None else ""
        if node.relative:
            base = self._package.split(".") if self._package else []
            up = len(node.relative) - 1
            base = base[: len(base) - up] if up else base
            module = ".".join([*base, module] if module else base)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = _module_dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) \
                else name
            self.facts.imports[local] = f"{module}.{name}" if module else name

    # --- scopes --------------------------------------------------------------------------------
    @staticmethod
    def _qual(scopes: tuple, name: str) -> str:
        return ".".join([s[0] for s in scopes] + [name])

    def _class(self, node: cst.ClassDef, scopes: tuple) -> ClassInfo:
        qual = self._qual(scopes, node.name.value)
        bases = [self.facts.resolve_expr(a.value) or "" for a in node.bases]
        info = ClassInfo(node.name.value, qual, node, bases)
        self.facts.classes[qual] = info
        self._classes_made.append((qual, info))
        return info

    def _function(self, node: cst.FunctionDef, scopes: tuple) -> FunctionInfo:
        qual = self._qual(scopes, node.name.value)
        owner = scopes[-1][1] if scopes else None
        class_name = owner.qualname if isinstance(owner, ClassInfo) else None
        p = node.params
        params = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                params.append(star.name.value)
        info = FunctionInfo(node.name.value, qual, node, class_name, params)
        self.facts.functions[qual] = info
        self._functions_made.append((qual, info))
        if isinstance(owner, ClassInfo):
            owner.methods[node.name.value] = info
        return info

    # --- calls ---------------------------------------------------------------------------------
    def _call(self, node: cst.Call, scopes: tuple) -> None:
        scope_info = next((s[1] for s in reversed(scopes) if isinstance(s[1], FunctionInfo)), None)
        site = CallSite(node, self.facts.resolve_expr(node.func),
                        scope_info.qualname if scope_info else MODULE_SCOPE)
        self.facts.calls.append(site)
        if scope_info is not None:
            scope_info.calls.append(site)


def collect_facts(module: cst.Module, package: str = "", previous: Optional[dict] = None
                  ) -> tuple[FileFacts, dict[int, tuple]]:
    """The file's facts, and each top-level statement's part of them (for `previous` of a tree spliced from
    this one: `FactCollector.run`)."""
    collector = FactCollector(package)
    facts = collector.run(module, previous)
    return facts, collector.parts
