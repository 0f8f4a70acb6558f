"""A file's outline from CPython's own parser: its functions, classes (with bases resolved through the
imports), imports and calls (callee resolved, enclosing scope) -- the one model of a file's names, scopes and
calls. `dslint.program.facts` pairs libcst's nodes with these entries and resolves nothing itself.

CPython's `ast` parses about 10x faster than libcst, and `compile()` runs for every Python file anyway (to tell
valid files from DSL001 ones). Whole-project indexes (functions by qualified name, nn.Module classes by their
bases) are built from outlines, so a file is parsed with libcst only when an analysis needs its syntax tree
(DESIGN.md §5, ISSUE 6). Outlines hold no syntax tree and pickle cheaply.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

from dslint.program.code_strings import called_names, runs_code_text
from dslint.sources.astsplice import compile_ast

_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")     # libcst's field order (`try`: handlers first)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
MODULE_SCOPE = "<module>"          # as dslint.program.facts (not imported: it imports libcst)


class PairingError(RuntimeError):
    """A file's libcst nodes do not pair with its outline's entries (`dslint.program.facts.file_facts`; an internal error:
    the outline's order or the node walk is wrong for some syntax). Raised rather than hand a rule a call with
    another call's node. Defined here, not in dslint.program.facts, so that catching it does not import libcst."""


@dataclass
class ClassOutline:
    name: str
    qualname: str
    bases: list[str]               # resolved as `FileFacts.resolve_expr` does ("" for a non-name base)
    methods: list[str] = field(default_factory=list)      # names of the functions defined in its body, in order


class FunctionOutline(NamedTuple):
    name: str
    qualname: str
    class_name: Optional[str]      # qualified name of the class it is a method of, else None
    params: tuple[str, ...]        # positional-only, positional, keyword-only, then *args and **kwargs
    owner: int                     # index in `Outline.class_defs` of that class statement, -1 for none


@dataclass
class Outline:
    """The one model of a file's names, scopes and calls: `dslint.program.facts.file_facts` pairs the libcst nodes with
    these entries (`defs`, `class_defs`, `calls`: each in source pre-order, an outer node before those nested
    in it) and takes every name, scope and resolved callee from here."""
    functions: set[str] = field(default_factory=set)                    # qualified names within the file
    classes: dict[str, ClassOutline] = field(default_factory=dict)      # qualified name → class (the last)
    imports: dict[str, str] = field(default_factory=dict)
    # every function and class statement, redefinitions included, in source pre-order
    defs: list[FunctionOutline] = field(default_factory=list)
    class_defs: list[ClassOutline] = field(default_factory=list)
    # every call in source pre-order (by position; a call before the calls nested in it): (callee resolved
    # through the imports seen so far in libcst's field order, qualified name of the enclosing function or
    # MODULE_SCOPE -- for a decorator's call, the function it decorates)
    calls: list[tuple[Optional[str], str]] = field(default_factory=list)
    # for each call, in the order of `calls`, the names `CollectiveSites` classifies it by: (last name of the
    # callee, whether it is an attribute, `_tail` of its owner, `_tail` of the owner's owner) -- None where
    # libcst's helpers give None
    shapes: list[tuple[Optional[str], bool, Optional[str], Optional[str]]] = field(default_factory=list)
    # per enclosing function, the bare names its calls pass as arguments (`study.optimize(objective)`): a function
    # handed to a call may run there (`CollectiveSites._callback_site`; the outline pre-filters follow these)
    name_args: dict[str, set] = field(default_factory=dict)
    # (name, first line with its decorators, last line) of each function and class of the module's scope
    tops: list[tuple[str, int, int]] = field(default_factory=list)
    # the per-file model facts (dslint.program.models.modules.file_model_facts), built from the same tree
    model_classes: dict = field(default_factory=dict)
    freezing: Optional[object] = None
    # the constructions each function of the file returns (`modules.file_model_facts`): qualified name →
    # ((plain kind, kind as a module class of the run, callee's short name, resolved callee), ...) -- what
    # `self.x = make(cfg)` creates is what `make` returns
    returned_constructions: dict = field(default_factory=dict)
    # what the launch units are built from (dslint.program.units): every module an import statement names, as
    # absolute dotted names (`from a import b` gives "a.b"; a relative import resolved against the package),
    # whether the module has an `if __name__ == "__main__":` guard
    imported_modules: list[str] = field(default_factory=list)
    main_guard: bool = False
    # an HF-style lazy package's names (`_import_structure`): name → "package.submodule.name"
    lazy_exports: dict[str, str] = field(default_factory=dict)
    # `self.attr = C(...)` in a method: "Class.attr" → the constructor callees (resolved) stored there
    fields: dict[str, list[str]] = field(default_factory=dict)
    # `trainer = Trainer(...)` (or `cls = A if c else B; trainer = cls(...)`) bound to a name in a function or at
    # module level: "scope:name" → the constructor callees (resolved) stored there
    instances: dict[str, list[str]] = field(default_factory=dict)

    @property
    def call_attrs(self) -> "Counter[str]":
        """How many calls have each last callee name (`CallSite.attr`)."""
        counts = self.__dict__.get("_call_attrs")
        if counts is None:
            counts = self.__dict__["_call_attrs"] = Counter(c.rsplit(".", 1)[-1] for c, _ in self.calls if c)
        return counts

    def nested_named(self, name: str) -> list[str]:
        """`FileFacts.nested_named` on the outline: functions (not methods) nested in another scope."""
        index = self.__dict__.get("_nested")
        if index is None:
            index = self.__dict__["_nested"] = {}
            for qual in sorted(self.functions):
                owner, _, own = qual.rpartition(".")
                if owner and owner not in self.classes:
                    index.setdefault(own, []).append(qual)
        return index.get(name, [])

    def resolve(self, dotted: Optional[str]) -> Optional[str]:
        return resolve_dotted(self.imports, dotted)


def resolve_dotted(imports: dict[str, str], dotted: Optional[str]) -> Optional[str]:
    """Replace the first component of a dotted name by what it was imported as (`imports`: local name →
    imported dotted name)."""
    if not dotted:
        return dotted
    head, _, rest = dotted.partition(".")
    target = imports.get(head)
    if target is None:
        return dotted
    return f"{target}.{rest}" if rest else target


def _is_main_guard(test: ast.expr) -> bool:
    """`__name__ == "__main__"` (either side)."""
    if type(test) is not ast.Compare or len(test.ops) != 1 or type(test.ops[0]) is not ast.Eq:
        return False
    sides = (test.left, test.comparators[0])
    return any(type(a) is ast.Name and a.id == "__name__" for a in sides) and \
        any(type(a) is ast.Constant and a.value == "__main__" for a in sides)


def dotted_name(expr: ast.expr) -> Optional[str]:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def build_outline(tree: ast.Module, package: str = "") -> Outline:
    """The file's outline. Names are resolved walking the statements pre-order in libcst's field order (the
    order `dslint.program.facts` resolved them in when it walked the libcst tree, kept so that no callee changed): a
    class's bases are resolved against the imports seen before it, and every call's callee against the imports
    seen before the call -- which, as libcst orders its fields, includes the imports of a function's body for
    its decorators, of a class body for its bases, of an `except` body for its exception type, and of a `try`'s
    handlers for its `else` block. The entries are then put in source order (`_in_source_order`)."""
    out = Outline()
    calls = out.calls
    keys: list = []                # each call's source position, to order calls (and shapes) at the end
    defs: list = []                # (position, FunctionOutline, owning ClassOutline or None)
    class_keys: list = []          # (position, ClassOutline)
    # items: (node, class/function scope names, qualified name of the enclosing function, the ClassOutline whose
    # body the node is in directly) or [expressions, scope]: expressions whose calls are to be recorded at that
    # point of the walk
    stack: list = [(tree, (), MODULE_SCOPE, None)]
    classes = frozenset(n.name for n in tree.body if type(n) is ast.ClassDef)    # the file's top-level classes
    while stack:
        item = stack.pop()
        if type(item) is list:
            exprs, fscope = item[0], item[1]
            for expr in exprs:
                _record_calls(expr, out, fscope, calls, keys)
            continue
        node, scopes, fscope, owner = item
        kind = type(node)
        if kind is ast.Import:
            out.imported_modules.extend(alias.name for alias in node.names)
            for alias in node.names:
                if alias.asname:
                    out.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    out.imports.setdefault(head, head)
            continue
        if kind is ast.ImportFrom:
            module = node.module or ""
            if node.level:
                base = package.split(".") if package else []
                up = node.level - 1
                base = base[: len(base) - up] if up else base
                module = ".".join([*base, module] if module else base)
            out.imported_modules.extend(f"{module}.{alias.name}" if module and alias.name != "*" else
                                        module or alias.name for alias in node.names)
            for alias in node.names:
                if alias.name == "*":
                    break
                out.imports[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
            continue
        after: list = []
        if (kind is ast.Assign or kind is ast.AnnAssign) and len(scopes) >= 2 and isinstance(node.value, ast.Call):
            _record_field(node, scopes, out)
        if kind is ast.Assign and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                isinstance(node.value, (ast.Call, ast.IfExp)):
            _record_instance(node, fscope, out, classes)
        if not scopes and kind in _DEFS:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.tops.append((node.name, first, node.end_lineno or node.lineno))
        if kind is ast.ClassDef:
            qual = ".".join((*scopes, node.name))
            cls = out.classes[qual] = ClassOutline(node.name, qual,
                                                   [out.resolve(dotted_name(b)) or "" for b in node.bases])
            class_keys.append(((node.lineno, node.col_offset), cls))
            scopes, owner = (*scopes, node.name), cls
            after = [*node.bases, *(k.value for k in node.keywords), *node.decorator_list]
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            qual = ".".join((*scopes, node.name))
            out.functions.add(qual)
            a = node.args
            params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            params.extend(p.arg for p in (a.vararg, a.kwarg) if p is not None)
            defs.append(((node.lineno, node.col_offset),
                         FunctionOutline(node.name, qual, owner.qualname if owner else None, tuple(params), -1), owner))
            if owner is not None:
                owner.methods.append(node.name)
            scopes, fscope, owner = (*scopes, node.name), qual, None
            _record_calls(node.args, out, fscope, calls, keys)
            after = [*node.decorator_list, *([node.returns] if node.returns is not None else [])]
        elif kind is ast.ExceptHandler:
            after = [node.type] if getattr(node, "type", None) is not None else []
        elif kind is ast.If and not scopes and _is_main_guard(node.test):
            out.main_guard = True
        elif kind is ast.match_case:
            after = [node.guard] if node.guard is not None else []
        elif kind is not ast.Module:
            for name, value in ast.iter_fields(node):
                if name not in _BLOCKS and value is not None:
                    for expr in (value if type(value) is list else (value,)):
                        if isinstance(expr, ast.AST):
                            _record_calls(expr, out, fscope, calls, keys)
        if after:
            stack.append([after, fscope])
        kids: list = []
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if block:
                kids.extend(block)
        for child in reversed(kids):
            stack.append((child, scopes, fscope, owner))
    _in_source_order(out, keys, defs, class_keys)
    if package and any(isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == _LAZY_TABLE
                                                            for t in stmt.targets) for stmt in tree.body):
        for name, sub in _lazy_structure(tree).items():
            out.lazy_exports.setdefault(name, f"{package}.{sub}.{name}")
            out.imported_modules.append(f"{package}.{sub}")
    return out


_LAZY_TABLE = "_import_structure"


def _in_source_order(out: Outline, keys: list, defs: list, class_keys: list) -> None:
    """The calls, functions and classes in source pre-order: the order of libcst's nodes in a walk that visits a
    node's children in source order (`dslint.sources.cstwalk.nodes_of`), so that the i-th node of a kind pairs with
    the i-th entry. Spans are nested or disjoint: by start, then the longer first."""
    if keys:
        order = sorted(range(len(keys)), key=keys.__getitem__)
        calls, shapes = out.calls, out.shapes
        out.calls = [calls[i] for i in order]
        out.shapes = [shapes[i] for i in order]
    class_keys.sort(key=_first)
    out.class_defs = [cls for _, cls in class_keys]
    index = {id(cls): i for i, cls in enumerate(out.class_defs)}
    defs.sort(key=_first)
    out.defs = [fn if cls is None else fn._replace(owner=index[id(cls)]) for _, fn, cls in defs]


def _first(item: tuple):
    return item[0]


def _record_field(node, scopes: tuple, out: Outline) -> None:
    """`self.gen = Gen(...)` in a method of a class: the field may hold a `Gen` (`Outline.fields`)."""
    owner = ".".join(scopes[:-1])
    if owner not in out.classes:
        return
    callee = out.resolve(dotted_name(node.value.func))
    if not callee:
        return
    for target in (node.targets if type(node) is ast.Assign else [node.target]):
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            known = out.fields.setdefault(f"{owner}.{target.attr}", [])
            if callee not in known:
                known.append(callee)


def _record_instance(node: ast.Assign, fscope: str, out: Outline, local: frozenset[str] = frozenset()) -> None:
    """`trainer = Trainer(...)` in a scope: the name may hold a `Trainer` (`Outline.instances`); a class chosen by
    a ternary (`cls = A if c else B`) is kept under "scope:cls()" and read when the name is called. Kept for a
    class of the file (`local`, whatever its name) and, to keep the outline small, for another callee spelled
    like a class (a capital): a call of a function is not recorded."""
    name = node.targets[0].id
    value = node.value

    def classlike(callee: Optional[str]) -> bool:
        return bool(callee) and (callee in local or callee.rsplit(".", 1)[-1][:1].isupper())

    if isinstance(value, ast.IfExp):
        names = [dotted_name(v) for v in (value.body, value.orelse)]
        classes = [out.resolve(n) for n in names]
        if all(c and classlike(n) for n, c in zip(names, classes)):
            out.instances[f"{fscope}:{name}()"] = classes
        return
    callee = dotted_name(value.func)
    chosen = out.instances.get(f"{fscope}:{callee}()") if callee and "." not in callee else None
    targets = chosen or ([out.resolve(callee)] if classlike(callee) else [])
    if targets and all(targets):
        known = out.instances.setdefault(f"{fscope}:{name}", [])
        known.extend(t for t in targets if t not in known)


def _lazy_structure(tree: ast.Module) -> dict[str, str]:
    """An HF-style lazy package (`_import_structure = {"utils": ["f"]}` handed to `_LazyModule`; also
    `_import_structure["m"] = [...]` and `_import_structure["m"].extend([...])`/`.append("f")`, often in
    `try`/`else` blocks): name → the submodule it is imported from on first access."""
    out: dict[str, str] = {}

    def names(sub: object, value: ast.AST) -> None:
        if not isinstance(sub, str):
            return
        for item in value.elts if isinstance(value, (ast.List, ast.Tuple, ast.Set)) else [value]:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                out.setdefault(item.value, sub)

    def table_key(node: ast.AST) -> object:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == _LAZY_TABLE \
                and isinstance(node.slice, ast.Constant):
            return node.slice.value
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id == _LAZY_TABLE and isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values):
                    if isinstance(key, ast.Constant):
                        names(key.value, value)
            elif table_key(target) is not None:
                names(table_key(target), node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
                node.func.attr in ("extend", "append") and table_key(node.func.value) is not None:
            names(table_key(node.func.value), node.args[0])
    return out


# per node type, the fields that can hold expressions (`ctx` and plain values left out); filled on first use
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {kind: () for kind in (ast.Name, ast.Constant, str, int, float, complex,
                                                                     bytes, bool, type(None), type(...))}


def calls_under(roots: list, skip: tuple = ()):
    """Every `ast.Call` under the roots, not descending into nodes whose type is in `skip` (an explicit stack
    over the node fields: `ast.walk` costs twice as much). Depth-first; the order is not `ast.walk`'s."""
    fields_of = _CHILD_FIELDS
    todo = list(roots)
    pop, push, extend = todo.pop, todo.append, todo.extend
    while todo:
        node = pop()
        kind = type(node)
        if kind in skip:
            continue
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f != "ctx")
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend(value)
            elif value is not None:
                push(value)
        if kind is ast.Call:
            yield node


def _record_calls(expr: ast.AST, out: Outline, scope: str, calls: list, keys: list) -> None:
    shapes = out.shapes
    for node in calls_under([expr]):
        func = node.func
        calls.append((out.resolve(dotted_name(func)), scope))
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if type(arg) is ast.Name:
                out.name_args.setdefault(scope, set()).add(arg.id)
        if node.args and type(node.args[0]) is ast.Constant and type(node.args[0].value) is str and \
                runs_code_text(calls[-1][0]):
            # `cProfile.runctx("train()", ...)`: the functions its code text calls are handed over by name
            out.name_args.setdefault(scope, set()).update(called_names(node.args[0].value))
        keys.append((node.lineno, node.col_offset, -node.end_lineno, -node.end_col_offset))
        if type(func) is ast.Attribute:
            owner = func.value
            shapes.append((func.attr, True, tail(owner), tail(owner.value) if type(owner) is ast.Attribute else None))
        else:
            shapes.append((func.id if type(func) is ast.Name else None, False, None, None))


def tail(expr: Optional[ast.expr]) -> Optional[str]:
    """`collective_sites._tail` on CPython's tree: the last name of `a.b`; through a call, that of the callee's
    owner (`net.cuda()` → "net", `a.b(x).c()` → "a")."""
    while type(expr) is ast.Call:
        func = expr.func
        expr = func.value if type(func) is ast.Attribute else None
    if type(expr) is ast.Attribute:
        return expr.attr
    return expr.id if type(expr) is ast.Name else None


ENGINE_BUILDERS = ("initialize", "init_inference")


def engine_builder(callee: Optional[str]) -> Optional[str]:
    """"initialize" / "init_inference" for DeepSpeed's engine builders (as `moe_facts._engine_kind`)."""
    if not callee:
        return None
    last = callee.rsplit(".", 1)[-1]
    return last if last in ENGINE_BUILDERS and "deepspeed" in callee else None


def builds_engine(outline: Outline) -> bool:
    """The file calls `deepspeed.initialize`/`init_inference`: the role analysis reads it first. Kept on the
    outline: every launch unit's view asks it of every file it holds (issue 33)."""
    found = outline.__dict__.get("_builds_engine")
    if found is None:
        found = outline.__dict__["_builds_engine"] = any(engine_builder(c) for c, _ in outline.calls)
    return found


def parse_tree(text: str, filename: str) -> Optional[ast.Module]:
    """CPython's tree of the file, or None when CPython rejects the source."""
    try:
        return compile_ast(text, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
