"""A file's facts as rules read them, with the libcst nodes they are about.

Every rule reads these tables instead of walking the tree again: imports and their aliases, functions
and classes with their qualified names, and every call with its callee resolved through the imports.
Those names, scopes and callees are the outline's (`dslint.program.outline`, from CPython's tree: the one model of
them); the libcst tree only contributes the syntax handles (`CallSite.node`, `FunctionInfo.node`,
`ClassInfo.node`), paired with the outline's entries in source order by one node-collecting walk
(`file_facts`). No libcst metadata provider is used (they cost 1.3-3.7x the parse, DESIGN.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from dslint.sources.cstwalk import nodes_of
# PairingError is raised here, and defined in outline.py, where the engine can catch it without importing libcst
from dslint.program.outline import PairingError, resolve_dotted

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
        return resolve_dotted(self.imports, dotted)

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


def _shape(func: cst.BaseExpression) -> tuple[Optional[str], bool, Optional[str]]:
    """What `Outline.shapes` holds of a callee, from the libcst node: last name, whether it is an attribute, and
    the owner's last name (through calls: `a.b(x).c` → "a")."""
    kind = type(func)
    if kind is cst.Attribute:
        owner = func.value
        while type(owner) is cst.Call:
            inner = owner.func
            owner = inner.value if type(inner) is cst.Attribute else None
        kind = type(owner)
        return func.attr.value, True, owner.attr.value if kind is cst.Attribute else \
            owner.value if kind is cst.Name else None
    return (func.value if kind is cst.Name else None), False, None


KINDS = (cst.Call, cst.FunctionDef, cst.ClassDef)     # the nodes paired with the outline's entries


def file_facts(module: cst.Module, outline, found: Optional[list] = None) -> FileFacts:
    """The file's facts: every name, scope and resolved callee from its outline (`dslint.program.outline`, the one model
    of them), each paired with its libcst node -- the i-th call, function and class statement of the tree in
    source pre-order with the outline's i-th entry of that kind. Counts per kind and each call's callee shape
    and each definition's name are checked: a mismatch raises PairingError. `found`: `nodes_of(module, KINDS)`
    when the caller walked it (`cstwalk.statement_nodes`)."""
    calls, defs, classes = found if found is not None else nodes_of(module, KINDS)
    if len(calls) != len(outline.calls) or len(defs) != len(outline.defs) or \
            len(classes) != len(outline.class_defs):
        raise PairingError(f"the libcst tree has {len(calls)} calls, {len(defs)} functions and {len(classes)} "
                           f"classes; the outline {len(outline.calls)}, {len(outline.defs)} and "
                           f"{len(outline.class_defs)}")
    facts = FileFacts(imports=dict(outline.imports))
    class_infos: list[ClassInfo] = []
    for node, entry in zip(classes, outline.class_defs):
        if node.name.value != entry.name:
            raise PairingError(f"class {entry.qualname} paired with the class statement of {node.name.value}")
        info = ClassInfo(entry.name, entry.qualname, node, list(entry.bases))
        class_infos.append(info)
        facts.classes[entry.qualname] = info
    functions = facts.functions
    infos: list[FunctionInfo] = []
    for node, entry in zip(defs, outline.defs):
        if node.name.value != entry.name:
            raise PairingError(f"function {entry.qualname} paired with the def of {node.name.value}")
        info = FunctionInfo(entry.name, entry.qualname, node, entry.class_name, list(entry.params))
        infos.append(info)
        functions[entry.qualname] = info
        if entry.owner >= 0:
            class_infos[entry.owner].methods[entry.name] = info
    # a call goes to the FunctionInfo of the def it is in; where a name is defined twice, the earlier def's calls
    # stay with its own FunctionInfo (the one `functions` no longer holds)
    by_def = _enclosing_defs(module, infos) if len(functions) != len(infos) else None
    append = facts.calls.append
    shapes = outline.shapes
    for i, node in enumerate(calls):
        callee, scope = outline.calls[i]
        if _shape(node.func) != shapes[i][:3]:
            raise PairingError(f"call {i + 1} of the tree ({cst.Module([]).code_for_node(node.func)!r}) paired with "
                               f"the outline's call of {callee or shapes[i][0]!r}")
        site = CallSite(node, callee, scope)
        append(site)
        if scope != MODULE_SCOPE:
            info = by_def[i] if by_def is not None else functions.get(scope)
            if info is not None:
                if info.qualname != scope:
                    raise PairingError(f"call {i + 1} of the tree is in {info.qualname}, the outline's in {scope}")
                info.calls.append(site)
    return facts


def _enclosing_defs(module: cst.Module, infos: list[FunctionInfo]) -> list[Optional[FunctionInfo]]:
    """For each call in source pre-order, the FunctionInfo of the innermost def around it (a decorator's call:
    the def it decorates, as the outline's scopes have it)."""
    from dslint.sources.cstwalk import source_fields
    by_node = {id(info.node): info for info in infos}
    out: list[Optional[FunctionInfo]] = []
    stack: list[tuple[cst.CSTNode, Optional[FunctionInfo]]] = [(module, None)]
    while stack:
        node, enclosing = stack.pop()
        kind = type(node)
        if kind is cst.Call:
            out.append(enclosing)
        elif kind is cst.FunctionDef:
            enclosing = by_node[id(node)]
        kids = []
        for name in source_fields(kind):
            value = getattr(node, name)
            for item in (value if type(value) in (tuple, list) else (value,)):
                if isinstance(item, cst.CSTNode):
                    kids.append((item, enclosing))
        kids.reverse()
        stack.extend(kids)
    return out
