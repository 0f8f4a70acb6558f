"""Value roles: which DeepSpeed engines (and the models they wrap) a value can be, followed through the program.

A role is created where DeepSpeed builds an engine (`deepspeed.initialize` -- the first element of its tuple --
or `deepspeed.init_inference`); the module passed as `model=` becomes a DeepSpeed-wrapped model (ZeRO-3
partitions it in place), and so does `engine.module`. Roles flow through

- assignments, tuple unpacking (`engine, opt, _, _ = deepspeed.initialize(...)`, `deepspeed.initialize(...)[0]`),
  simple containers (list/tuple/dict literals, subscripts, `for` loops over them);
- `self.` and object attributes, per class field (the fields of a class, its bases and subclasses are one
  family): `self.actor = engine` in one class, `self.actor_model = actor` in a class constructed with it,
  `holder.actor` read from an instance;
- call arguments → parameters (every call site of the files of the run: functions, methods of instances,
  constructors, dataclass fields) and returns (`return engine` read by the caller);
- methods that return their receiver (`.eval()`, `.to(device)`, `.cuda()`, ...).

One bounded fixed point over the files of the run, on CPython's `ast` (no libcst parse): summaries per
location -- a function's local names and parameters, a module's globals, a class family's fields, a
function's returns. Only files joined to an engine-building file by calls (on the outlines) take part.
Each role keeps its hand-offs (`Step`s) so a finding can show how the engine reached the call:
"engine created by deepspeed.initialize at a.py:12 → stored on self.actor at a.py:12 → passed as `actor` to
PPOTrainer() at main.py:7 → stored on self.actor_model at b.py:6".

Query (what rules call): `RoleAnalysis.of(project).model_roles(src, expr, scope)` -- the engine/model roles a
libcst expression (a name/attribute chain, through receiver-returning calls) can have in a scope.
`RoleAnalysis.tails` is the outline pre-filter's view: every name (variable, parameter, field) that may hold
one, so `CollectiveSites._direct_site` stays a superset without parsing.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Optional

from dslint.program.outline import MODULE_SCOPE, builds_engine, dotted_name, engine_builder
from dslint.sources.astsplice import compile_ast

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

ENGINE, MODEL, INSTANCE = "engine", "model", "instance"
MODEL_KINDS = (ENGINE, MODEL)
# `initialize(args, model, ...)` / `init_inference(model, ...)`: where the wrapped module is passed
_MODEL_ARG = {"initialize": 1, "init_inference": 0}
# methods that return their receiver (nn.Module / DeepSpeedEngine)
KEEP_METHODS = frozenset({"eval", "train", "to", "cuda", "cpu", "half", "float", "bfloat16", "requires_grad_"})
MAX_ROUNDS = 8           # the fixed point's bound (each round re-reads every summary once)
MAX_ROLES = 12           # roles kept per location
MAX_FILES = 400          # beyond this many joined files, the analysis stays off (speed over recall)


@dataclass(frozen=True, eq=False)
class Step:
    """One hand-off of a role: where it was created, stored, passed or returned."""

    note: str
    src: "PythonSource"
    line: int
    col: int

    def text(self) -> str:
        return f"{self.note} at {self.src.path}:{self.line}"


@dataclass(frozen=True, eq=False)
class Role:
    kind: str                        # engine | model | instance
    origin: tuple                    # identity of the value: the creating call, or the class of an instance
    src: "PythonSource"              # where it was created (engine/model) or the class is defined (instance)
    steps: tuple[Step, ...] = ()
    cls: Optional[tuple] = None      # instance: (id of the class's source, qualified class name)
    elem: Any = None                 # None: the value; int: element i of a tuple; "*": some element
    builder: str = ""                # initialize | init_inference

    @property
    def key(self) -> tuple:
        return (self.kind, self.origin, self.elem)

    def then(self, step: Optional[Step], **changes: Any) -> "Role":
        steps = self.steps + (step,) if step is not None else self.steps
        return replace(self, steps=steps, **changes)

    def trace(self) -> str:
        return " → ".join(s.text() for s in self.steps)


Roles = dict  # key → Role


@dataclass
class _Class:
    src: "PythonSource"
    qual: str
    bases: list[str]
    fields: list[str]                # annotated class-level names, in order (dataclass constructors)
    is_dataclass: bool


@dataclass
class _Scope:
    src: "PythonSource"
    qual: str
    node: Any
    cls: Optional[str]               # the class of a method
    parent: Optional["_Scope"]       # the enclosing function scope (None: the module's)
    params: list[str] = field(default_factory=list)        # those a keyword can name
    positional: list[str] = field(default_factory=list)    # those a positional argument fills, in order
    bound: set[str] = field(default_factory=set)
    binds: list[ast.AST] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.qual.rsplit(".", 1)[-1]


_builder = engine_builder


class _Collector:
    """Scopes of one file: per function (and the module), the statements that bind names and its calls."""

    def __init__(self, src: "PythonSource", previous: Optional["_Collector"] = None) -> None:
        self.src = src
        self.scopes: dict[str, _Scope] = {}
        self.classes: dict[str, _Class] = {}
        # what the walk of each function's body found, for the collection of a fixed text whose tree keeps that
        # function's node (`dslint.sources.astsplice`): `log` holds, in order, the scopes made ("scope", qual, scope)
        # and the classes found ("class", qual, ClassDef node, fields, is_dataclass); `bodies` maps
        # id(FunctionDef node) to (node, its scope, the slice of `log` its body's walk wrote)
        self.log: list[tuple] = []
        self.bodies: dict[int, tuple] = {}
        self._previous = previous

    def run(self, tree: ast.Module) -> None:
        module = _Scope(self.src, MODULE_SCOPE, tree, None, None)
        self.scopes[MODULE_SCOPE] = module
        self._body(tree.body, module, prefix=(), cls=None)
        self._previous = None

    def _scope(self, qual: str, scope: _Scope) -> None:
        self.scopes[qual] = scope
        self.log.append(("scope", qual, scope))

    def _class(self, qual: str, node: ast.ClassDef, fields: list[str], is_dc: bool) -> None:
        self.classes[qual] = _Class(self.src, qual, [self.src.outline.resolve(dotted_name(b)) or ""
                                                     for b in node.bases], fields, is_dc)
        self.log.append(("class", qual, node, fields, is_dc))

    def _reused_body(self, node, inner: _Scope) -> Optional[list[tuple]]:
        """The previous collection's walk of `node`'s body, when `node` is the same node object there (a fixed
        text's tree keeps it, with its positions): a function body's scopes and classes are facts of its
        nodes, except the classes' bases, which are resolved through the file's imports (again, below)."""
        hit = self._previous.bodies.get(id(node)) if self._previous is not None else None
        if hit is None or hit[0] is not node:
            return None
        _, old_inner, start, end = hit
        return [(old_inner, inner), *self._previous.log[start:end]]

    def _body(self, stmts, scope: _Scope, prefix: tuple, cls: Optional[str]) -> None:
        for stmt in stmts:
            self._stmt(stmt, scope, prefix, cls)

    def _stmt(self, node, scope: _Scope, prefix: tuple, cls: Optional[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qual = ".".join((*prefix, node.name))
            # a method sees the names of the function its class sits in, not the class body's
            inner = _Scope(self.src, qual, node, cls, scope if scope.qual != MODULE_SCOPE else None)
            a = node.args
            inner.positional = [p.arg for p in (*a.posonlyargs, *a.args)]
            inner.params = [*inner.positional, *(p.arg for p in a.kwonlyargs)]
            inner.bound.update(inner.params)
            inner.bound.update(p.arg for p in (a.vararg, a.kwarg) if p is not None)
            reused = self._reused_body(node, inner)
            if reused is not None:
                # the previous scope's names and statements (read-only, shared), this file's source
                inner = replace(reused[0][0], src=self.src, parent=inner.parent)
            self._scope(qual, inner)
            for expr in (*node.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)):
                self._exprs(expr, scope)
            scope.bound.add(node.name)
            start = len(self.log)
            if reused is None:
                self._body(node.body, inner, (*prefix, node.name), None)
            else:
                self._replay(reused, inner)
            self.bodies[id(node)] = (node, inner, start, len(self.log))
            return
        if isinstance(node, ast.ClassDef):
            qual = ".".join((*prefix, node.name))
            fields = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            is_dc = any("dataclass" in (dotted_name(d.func if isinstance(d, ast.Call) else d) or "")
                        for d in node.decorator_list)
            self._class(qual, node, fields, is_dc)
            scope.bound.add(node.name)
            for expr in (*node.bases, *node.decorator_list):
                self._exprs(expr, scope)
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self._stmt(stmt, scope, (*prefix, node.name), qual)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
                             ast.Return)):
            scope.binds.append(node)
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor)) else \
                [i.optional_vars for i in node.items if i.optional_vars is not None] \
                if isinstance(node, (ast.With, ast.AsyncWith)) else []
            for t in targets:
                scope.bound.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            return
        for name, value in ast.iter_fields(node):
            if name in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in value:
                    if isinstance(child, ast.ExceptHandler):
                        if child.type is not None:
                            self._exprs(child.type, scope)
                        self._body(child.body, scope, prefix, cls)
                    elif isinstance(child, ast.match_case):
                        self._body(child.body, scope, prefix, cls)
                    else:
                        self._stmt(child, scope, prefix, cls)
            elif isinstance(value, ast.AST):
                self._exprs(value, scope)
            elif isinstance(value, list):
                for v in value:
                    if isinstance(v, ast.AST):
                        self._exprs(v, scope)

    def _replay(self, reused: list[tuple], inner: _Scope) -> None:
        """What the previous walk of a kept function body made, made again for this source: its scopes (their
        enclosing scopes mapped to this walk's) and classes (bases resolved again), in the same order."""
        (old_inner, _), events = reused[0], reused[1:]
        mapped = {id(old_inner): inner}
        for event in events:
            if event[0] == "scope":
                old = event[2]
                new = replace(old, src=self.src, parent=None if old.parent is None else mapped[id(old.parent)])
                mapped[id(old)] = new
                self._scope(event[1], new)
            else:
                self._class(*event[1:])

    def _exprs(self, expr: ast.AST, scope: _Scope) -> None:
        """Calls and walrus/comprehension bindings of an expression, not entering lambdas."""
        todo = [expr]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Call):
                scope.calls.append(node)
            elif isinstance(node, ast.NamedExpr):
                scope.binds.append(node)
                scope.bound.add(node.target.id)
            elif isinstance(node, ast.comprehension):
                scope.binds.append(node)
                scope.bound.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
            todo.extend(ast.iter_child_nodes(node))


def _same_module(name: str, imported: str) -> bool:
    """A read module named `name` is the module an import names `imported` (the checked tree's root and the
    import's package root may differ: `pkg.mod` / `mod`)."""
    return name.endswith("." + imported) or imported.endswith("." + name)


class RoleAnalysis:
    """The role fixed point of one run (memoised on the ProjectView; computed in `prepare`, before forking)."""

    def __init__(self, project: "ProjectView") -> None:
        self.project = project
        self.values: dict[tuple, Roles] = {}
        self.scopes: dict[int, dict[str, _Scope]] = {}
        self.classes: dict[tuple[int, str], _Class] = {}
        self._family: dict[tuple[int, str], tuple[int, str]] = {}
        self._by_module: dict[str, "PythonSource"] = {}
        # each proper dotted suffix of a read module's name -> those names, in `_by_module`'s order (`_module_named`)
        self._module_suffixes: dict[str, list[str]] = {}
        self._changed = False
        self._dirty: set[int] = set()                    # scopes to run again (`_solve`)
        self._deps: dict[tuple, set[int]] = {}           # location -> the scopes that read it
        self._reader: Optional[int] = None               # the scope being run
        self._misses: dict[int, set[int]] = {}           # a file not read yet -> the scopes that looked for it
        self._module_misses: dict[str, set[int]] = {}    # a module name not read yet -> the scopes importing it
        self._call_memo: dict[int, list] = {}
        self._pending: dict[int, "PythonSource"] = {}    # files a role is passed into, read after the round
        self._carrying: set[tuple] = set()               # class families whose fields hold an engine (nested)
        self.files: list["PythonSource"] = []
        self._loaded: set[int] = set()
        self._use_seeded: set[int] = set()
        seeds = self._seed_files()
        if seeds:
            self._solve(seeds)
        self.tails = self._tails()

    @classmethod
    def of(cls, project: "ProjectView") -> "RoleAnalysis":
        return project.memo(cls, lambda: cls(project))

    @property
    def active(self) -> bool:
        return bool(self.tails)

    # --- which files take part: read on demand, as roles reach them --------------------------------------
    def _class_source(self, src: "PythonSource", callee: Optional[str]) -> Optional[tuple["PythonSource", str]]:
        return class_source(self.project, src, callee)

    def _seed_files(self) -> list["PythonSource"]:
        """The files that build an engine (on the outlines). Every other file is read only when a role reaches
        it: passed into one of its functions or classes, or exported (returned, kept on a field, a module
        global) to a file that calls, constructs or imports it (`_importers`)."""
        return self.project.files_where("roles.seeds", _seed_file)

    def _solve(self, seeds: list["PythonSource"]) -> None:
        batch = list(seeds)
        while batch and len(self._loaded) < MAX_FILES:
            before = set(self.scopes)
            for src in batch:
                self._load(src)
            families = dict(self._family)
            self._families()
            for src in batch:
                self._seed_uses(src)
            self._rounds(self._reached(before, families))
            batch = [s for i, s in self._pending.items() if i not in self._loaded]
            self._pending.clear()
            if not batch:
                batch = self._importers()

    def _reached(self, before: set[int], families: dict) -> set[int]:
        """The scopes a batch's new files can change: theirs, and those of the files read before whose runs
        missed them (a call of one of their functions or classes, a base class, an imported module global:
        `_miss`). Every scope when the batch merged class families (fields are kept per family)."""
        if any(self._family.get(k, k) != v for k, v in families.items()):
            return {id(sc) for scopes in self.scopes.values() for sc in scopes.values()}
        out: set[int] = set()
        for src in self.files:
            if id(src) in before:
                continue
            out.update(id(sc) for sc in self.scopes[id(src)].values())
            out |= self._misses.pop(id(src), set())
            if src.module_name:
                for mod, readers in self._module_misses.items():
                    if mod == src.module_name or _same_module(src.module_name, mod):
                        out |= readers
        return out

    def _miss(self, file: int) -> None:
        """The scope being run looked for a function or class of a file not read yet (`_reached`)."""
        if self._reader is not None and file not in self.scopes:
            self._misses.setdefault(file, set()).add(self._reader)

    def _rounds(self, dirty: set[int]) -> None:
        """The rounds of one batch, to the fixed point, starting with the `dirty` scopes."""
        # a worklist over the rounds: a scope runs again only when a location it read since its last run
        # gained a role (`_read`, `_add`), or a file it missed was read (`_reached`). A run whose reads are
        # unchanged adds nothing, so the additions, their order (the MAX_ROLES cap) and the rounds are those of
        # running every scope every round. The carrying families change what no location records: then
        # every scope runs.
        everything = {id(sc) for scopes in self.scopes.values() for sc in scopes.values()}
        self._dirty = dirty
        for _ in range(MAX_ROUNDS):
            self._changed = False
            carrying = self._carrying_families()
            if carrying != self._carrying:
                self._dirty |= everything
            self._carrying = carrying
            dirty = self._dirty
            for scopes in list(self.scopes.values()):
                for sc in scopes.values():
                    if id(sc) in dirty:
                        dirty.discard(id(sc))
                        self._reader = id(sc)
                        self._run_scope(sc)
            self._reader = None
            if not self._changed and self._carrying == self._carrying_families():
                break

    def _load(self, src: "PythonSource") -> None:
        if id(src) in self._loaded or len(self._loaded) >= MAX_FILES:
            return
        self._loaded.add(id(src))
        col = src.__dict__.get("_role_scopes", False)
        if col is False:
            # the scopes of a file are a fact of its text (read-only below): collected once, kept on the source
            # for every context that reads it
            # the outline's tree when it kept it (a file that builds an engine: `PythonSource.outline`),
            # else the text parsed again
            tree = src.__dict__.pop("_ast_tree", None)
            try:
                if tree is None and src.too_complex is None:
                    tree = compile_ast(src.text, src.path)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
            col = None
            previous = src.__dict__.pop("_previous_scopes", None)     # a fixed text's: `PythonSource.outline`
            if tree is not None:
                col = _Collector(src, previous)
                col.run(tree)
            src.__dict__["_role_scopes"] = col
        if col is None:
            return
        self.files.append(src)
        self.scopes[id(src)] = col.scopes
        for qual, info in col.classes.items():
            self.classes[(id(src), qual)] = info
        if src.module_name:
            self._note_module(src.module_name, src)
        # `self` of a method is an instance of its class
        for sc in col.scopes.values():
            if sc.cls is not None and sc.params and not _is_static(sc.node):
                key = (id(sc.src), sc.cls)
                if key in self.classes:
                    role = self._instance(key)
                    self.values[self._local(sc, sc.params[0])] = {role.key: role}

    def _want(self, src: "PythonSource") -> None:
        """A role reaches a file not read yet: read it after this round."""
        if id(src) not in self._loaded:
            self._pending[id(src)] = src

    def _carries(self, roles: Roles) -> bool:
        return any(r.kind in MODEL_KINDS or r.kind == INSTANCE and self._family.get(r.cls, r.cls) in self._carrying
                   for r in roles.values())

    def _carrying_families(self) -> set[tuple]:
        out: set[tuple] = set()
        changed = True
        while changed:
            changed = False
            for loc, roles in self.values.items():
                if loc[0] == "field" and loc[1] not in out and any(
                        r.kind in MODEL_KINDS or r.kind == INSTANCE and self._family.get(r.cls, r.cls) in out
                        for r in roles.values()):
                    out.add(loc[1])
                    changed = True
        return out

    def _importers(self) -> list["PythonSource"]:
        """Files not read yet that call a function returning an engine, construct a class holding one, or import
        a module global holding one (on the outlines)."""
        exported_functions: set[tuple[int, str]] = set()
        exported_globals: dict[str, set[str]] = {}
        by_id = {id(s): s for s in self.files}
        for loc, roles in self.values.items():
            if not self._carries(roles):
                continue
            if loc[0] == "ret":
                exported_functions.add((loc[1], loc[2]))
            elif loc[0] == "local" and loc[2] == MODULE_SCOPE and by_id[loc[1]].module_name:
                exported_globals.setdefault(by_id[loc[1]].module_name, set()).add(loc[3])
        exported_classes = {k for k in self.classes if self._family.get(k, k) in self._carrying}
        if not (exported_functions or exported_globals or exported_classes):
            return []
        from dslint.program.rank.function_summaries import ProjectTaint
        taint = ProjectTaint.of(self.project)
        # a call can only resolve to a function or class of that last name
        names = {q.rpartition(".")[2] for _, q in exported_functions} | {k[1].rpartition(".")[2] for k in exported_classes}
        out = []
        for src in self.project.python:
            if id(src) in self._loaded or src.outline is None:
                continue
            if any(target.rpartition(".")[2] in exported_globals.get(target.rpartition(".")[0], ())
                   for target in src.outline.imports.values()):
                out.append(src)
                continue
            for callee, scope in src.outline.calls:
                if callee is None or callee.rpartition(".")[2] not in names:
                    continue
                hit = self._class_source(src, callee)
                if hit is not None and (id(hit[0]), hit[1]) in exported_classes or any(
                        (id(t[0]), t[1]) in exported_functions for t in taint.call_targets(src, callee, scope)):
                    out.append(src)
                    break
        return out

    def _families(self) -> None:
        parent: dict[tuple, tuple] = {k: k for k in self.classes}

        def root(k):
            while parent[k] != k:
                parent[k] = parent[parent[k]]
                k = parent[k]
            return k
        for key, info in self.classes.items():
            for base in info.bases:
                hit = self._class_source(info.src, base) if base else None
                if hit is not None and (id(hit[0]), hit[1]) in parent:
                    parent[root((id(hit[0]), hit[1]))] = root(key)
        self._family = {k: root(k) for k in parent}
        for loc in [loc for loc in self.values if loc[0] == "field"]:
            new = ("field", self._family.get(loc[1], loc[1]), loc[2])
            if new != loc:
                for key, role in self.values.pop(loc).items():
                    self.values.setdefault(new, {}).setdefault(key, role)

    # --- engines known by their use (issue 30, cause 7) ------------------------------------------------------
    def _seed_uses(self, src: "PythonSource") -> None:
        """An object on which `.backward(loss)` (with an argument), `.step()` (without an optimizer) and a member
        only a DeepSpeed engine has (`.module`, `save_checkpoint`, `zero_optimization_stage()` ...) are used is a
        DeepSpeed engine, wherever it came from (a constructor's or function's parameter, a field): decided from
        the engine's method set, never from its name. So is one handed, by `.backward(...)`, the loss its own
        forward computed (`loss = engine(x)`, or a call it is handed to: `loss = forward_step(batch, engine)`;
        `_own_loss`) and then stepped: a mixed-precision optimizer wrapper or an Accelerator back-propagates
        another object's (the model's) loss. A plain module trained with a torch optimizer
        (`loss.backward(); opt.step()`) never has `backward` called with a loss on it."""
        if id(src) in self._use_seeded or id(src) not in self.scopes or not may_use_engine(src.text):
            return
        self._use_seeded.add(id(src))
        uses: dict[tuple, dict[str, tuple[int, int]]] = {}
        for sc in self.scopes[id(src)].values():
            nodes = list(_own_nodes(sc.node))
            made = _made_from(nodes)
            for node in nodes:
                if not isinstance(node, ast.Attribute):
                    continue
                parent_call = getattr(node, "_dslint_call", None)
                what = _engine_use(node, parent_call)
                if what is None:
                    continue
                loc = self._use_location(sc, node.value)
                if loc is None:
                    continue
                uses.setdefault(loc, {}).setdefault(what, (node.lineno, node.col_offset + 1))
                if what == "backward" and _own_loss(node.value, parent_call.args[0], made):
                    uses[loc].setdefault("own loss", (node.lineno, node.col_offset + 1))
        for loc, seen in uses.items():
            members = [m for m in seen if m not in ("backward", "step", "own loss")]
            if "backward" not in seen or "step" not in seen or not (members or "own loss" in seen):
                continue
            if not members:
                members = ["own loss"]
            line, col = seen["backward"]
            shown = ", ".join((f"`.{m}" + ("(loss)" if m == "backward" else "()" if m == "step" else "") + "`"
                               if m != "own loss" else "the loss its own forward computed")
                              + f" line {seen[m][0]}" for m in ("backward", "step", *members[:2]))
            role = Role(ENGINE, ("use", id(src), line, col), src,
                        (Step(f"DeepSpeed engine by its use ({shown})", src, line, col),), builder="use")
            self._add(loc, {role.key: role})

    def _use_location(self, sc: _Scope, expr: ast.AST) -> Optional[tuple]:
        """Where the value an engine use reads is kept: a local/parameter of the scope that binds it, or a field
        of the method's class (`self.model`)."""
        if isinstance(expr, ast.Name):
            s: Optional[_Scope] = sc
            while s is not None:
                if expr.id in s.bound:
                    return self._local(s, expr.id)
                s = s.parent
            module = self.scopes[id(sc.src)][MODULE_SCOPE]
            return self._local(module, expr.id) if expr.id in module.bound else None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and sc.cls is not None \
                and sc.positional and expr.value.id == sc.positional[0] and not _is_static(sc.node):
            key = (id(sc.src), sc.cls)
            return self._field(key, expr.attr) if key in self.classes else None
        return None

    def _instance(self, key: tuple[int, str]) -> Role:
        info = self.classes[key]
        return Role(INSTANCE, ("class", *key), info.src, cls=key)

    # --- locations --------------------------------------------------------------------------------------
    @staticmethod
    def _local(sc: _Scope, name: str) -> tuple:
        return ("local", id(sc.src), sc.qual, name)

    def _field(self, cls: tuple[int, str], attr: str) -> tuple:
        return ("field", self._family.get(cls, cls), attr)

    def _add(self, loc: tuple, roles: Roles, step: Optional[Step] = None) -> None:
        if not roles:
            return
        have = self.values.setdefault(loc, {})
        added = False
        for key, role in roles.items():
            if key not in have and len(have) < MAX_ROLES:
                have[key] = role.then(step) if step is not None else role
                added = True
        if added:
            self._changed = True
            readers = self._deps.get(loc)
            if readers:
                self._dirty |= readers

    def _read(self, loc: tuple) -> Optional[Roles]:
        """The roles at a location (None: none yet), noting that the scope being run read it (`_solve`)."""
        reader = self._reader
        if reader is not None:
            readers = self._deps.get(loc)
            if readers is None:
                self._deps[loc] = {reader}
            else:
                readers.add(reader)
        return self.values.get(loc)

    # --- the fixed point's transfer functions --------------------------------------------------------
    def _run_scope(self, sc: _Scope) -> None:
        for node in sc.binds:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                if node.value is None:
                    continue
                roles = self.eval(sc, node.value)
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    self._store(sc, t, roles)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                roles = self.eval(sc, node.iter)
                self._store(sc, node.target, _elements(roles))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        self._store(sc, item.optional_vars, self.eval(sc, item.context_expr))
            elif isinstance(node, ast.NamedExpr):
                self._store(sc, node.target, self.eval(sc, node.value))
            elif isinstance(node, ast.Return) and node.value is not None and sc.qual != MODULE_SCOPE:
                self._add(("ret", id(sc.src), sc.qual), self.eval(sc, node.value))
        for call in sc.calls:
            self.eval(sc, call)

    def _store(self, sc: _Scope, target: ast.AST, roles: Roles) -> None:
        if not roles:
            return
        if isinstance(target, ast.Name):
            self._add(self._local(sc, target.id), roles)
        elif isinstance(target, ast.Attribute):
            owners = self.eval(sc, target.value)
            step = Step(f"stored on {dotted_name(target) or target.attr}", sc.src, target.lineno, target.col_offset + 1)
            for owner in owners.values():
                if owner.kind == INSTANCE and owner.elem is None:
                    self._add(self._field(owner.cls, target.attr), roles, step)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    break
                self._store(sc, elt, _element(roles, i))
        elif isinstance(target, ast.Subscript):
            self._store(sc, target.value, {r.key: r for r in (x.then(None, elem="*") for x in roles.values()
                                                               if x.elem is None)})

    def eval(self, sc: _Scope, e: Optional[ast.AST]) -> Roles:
        if e is None:
            return {}
        if isinstance(e, ast.Name):
            return self._lookup(sc, e.id)
        if isinstance(e, ast.Attribute):
            return self._attribute(self.eval(sc, e.value), e.attr)
        if isinstance(e, ast.Call):
            return self._call(sc, e)
        if isinstance(e, ast.Subscript):
            index = e.slice.value if isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int) else None
            base = self.eval(sc, e.value)
            return _element(base, index) if index is not None else _elements(base)
        if isinstance(e, ast.Tuple):
            out: Roles = {}
            for i, elt in enumerate(e.elts):
                if isinstance(elt, ast.Starred):
                    break
                out.update(_tagged(self.eval(sc, elt), i))
            return out
        if isinstance(e, (ast.List, ast.Set)):
            out = {}
            for elt in e.elts:
                out.update(_tagged(self.eval(sc, elt.value if isinstance(elt, ast.Starred) else elt), "*"))
            return out
        if isinstance(e, ast.Dict):
            out = {}
            for v in e.values:
                out.update(_tagged(self.eval(sc, v), "*"))
            return out
        if isinstance(e, ast.IfExp):
            return {**self.eval(sc, e.body), **self.eval(sc, e.orelse)}
        if isinstance(e, ast.BoolOp):
            out = {}
            for v in e.values:
                out.update(self.eval(sc, v))
            return out
        if isinstance(e, (ast.NamedExpr, ast.Await)):
            return self.eval(sc, e.value)
        return {}

    def _lookup(self, sc: _Scope, name: str) -> Roles:
        # a name the scope binds, or one a role was stored on without a binding statement (the `model=` an
        # engine wraps, a global or a parameter of an enclosing function)
        s: Optional[_Scope] = sc
        while s is not None:
            hit = self._read(self._local(s, name))
            if hit is not None or name in s.bound:
                return hit if hit is not None else {}
            s = s.parent
        module = self.scopes[id(sc.src)][MODULE_SCOPE]
        hit = self._read(self._local(module, name))
        if hit is not None or name in module.bound:
            return hit if hit is not None else {}
        target = sc.src.outline.imports.get(name)
        if target and "." in target:
            mod, _, attr = target.rpartition(".")
            other = self._by_module.get(mod)
            if other is None:
                # the module read later (or one whose name ends like it) is the answer then (`_reached`)
                if self._reader is not None:
                    self._module_misses.setdefault(mod, set()).add(self._reader)
                other = self._module_named(mod)
            if other is not None and id(other) in self.scopes:
                return self._read(("local", id(other), MODULE_SCOPE, attr)) or {}
        return {}

    def _note_module(self, name: str, src: "PythonSource") -> None:
        if name not in self._by_module:
            parts = name.split(".")
            for i in range(1, len(parts)):
                self._module_suffixes.setdefault(".".join(parts[i:]), []).append(name)
        self._by_module[name] = src

    def _module_named(self, mod: str) -> Optional["PythonSource"]:
        """The first read module (in reading order) whose name ends like `mod` or is a dotted suffix of it
        (`_same_module`), looked up by suffix rather than tried one by one against every module read."""
        names = list(self._module_suffixes.get(mod, ()))
        parts = mod.split(".")
        names += [m for m in (".".join(parts[i:]) for i in range(1, len(parts))) if m in self._by_module]
        if not names:
            return None
        if len(names) > 1:
            order = {m: i for i, m in enumerate(self._by_module)}
            names.sort(key=order.__getitem__)
        return self._by_module[names[0]]

    def _attribute(self, base: Roles, attr: str) -> Roles:
        out: Roles = {}
        for r in base.values():
            if r.elem is not None:
                continue
            if r.kind == ENGINE and attr == "module":
                moved = r.then(None, kind=MODEL)
                out[moved.key] = moved
            elif r.kind == INSTANCE:
                out.update(self._read(self._field(r.cls, attr)) or {})
        return out

    def _call(self, sc: _Scope, e: ast.Call) -> Roles:
        func = e.func
        dotted = dotted_name(func)
        callee = sc.src.outline.resolve(dotted) if dotted else None
        built = _builder(callee)
        if built is not None:
            return self._engine(sc, e, built)
        out: Roles = {}
        if isinstance(func, ast.Attribute):
            base = self.eval(sc, func.value)
            if func.attr in KEEP_METHODS:
                return {k: r for k, r in base.items() if r.elem is None and r.kind in MODEL_KINDS}
            instances = [r for r in base.values() if r.kind == INSTANCE and r.elem is None]
            for r in instances:
                method = self._method(r.cls, func.attr)
                if method is not None:
                    out.update(self._invoke(sc, e, method, bound=True))
            if instances:
                return out
        for target in self._targets(sc, e, callee):
            if target[0] == "class":
                src, qual = target[1]
                key = (id(src), qual)
                if key in self.classes:
                    out.update(self._construct(sc, e, key))
                else:
                    self._miss(id(src))
                    if self._carries_args(sc, e):
                        self._want(src)
                continue
            fn = self.scopes.get(id(target[0]), {}).get(target[1])
            if fn is not None:
                out.update(self._invoke(sc, e, fn, bound=False))
            else:
                self._miss(id(target[0]))
                if self._carries_args(sc, e):
                    self._want(target[0])
        return out

    def _carries_args(self, sc: _Scope, e: ast.Call) -> bool:
        return any(self._carries(self.eval(sc, a.value if isinstance(a, ast.Starred) else a)) for a in e.args) or \
            any(self._carries(self.eval(sc, k.value)) for k in e.keywords)

    def _targets(self, sc: _Scope, e: ast.Call, callee: Optional[str]) -> list:
        """Functions (source, qualified name) and classes ("class", (source, name)) a plain call runs, resolved
        on the outlines; memoised per call."""
        hit = self._call_memo.get(id(e))
        if hit is not None:
            return hit
        out: list = []
        if callee and not callee.startswith("self."):
            from dslint.program.rank.function_summaries import ProjectTaint
            scope = sc.qual if sc.qual in sc.src.outline.functions else MODULE_SCOPE
            out.extend(ProjectTaint.of(self.project).call_targets(sc.src, callee, scope))
            cls = self._class_source(sc.src, callee)
            if cls is not None:
                out.append(("class", cls))
            # `trainer_cls = A if flag else B; trainer = trainer_cls(...)`: either class (`Outline.instances`)
            for chosen in sc.src.outline.instances.get(f"{scope}:{callee}()", ()) if "." not in callee else ():
                cls = self._class_source(sc.src, chosen)
                if cls is not None and ("class", cls) not in out:
                    out.append(("class", cls))
        self._call_memo[id(e)] = out
        return out

    def _method(self, cls: tuple[int, str], name: str, depth: int = 0) -> Optional[_Scope]:
        info = self.classes.get(cls)
        if info is None:
            self._miss(cls[0])
            return None
        if depth > 8:
            return None
        hit = self.scopes.get(cls[0], {}).get(f"{cls[1]}.{name}")
        if hit is not None:
            return hit
        for base in info.bases:
            found = self._class_source(info.src, base) if base else None
            if found is not None:
                hit = self._method((id(found[0]), found[1]), name, depth + 1)
                if hit is not None:
                    return hit
        return None

    def _engine(self, sc: _Scope, e: ast.Call, built: str) -> Roles:
        line, col = e.lineno, e.col_offset + 1
        origin = ("engine", id(sc.src), line, col)
        created = Step(f"engine created by deepspeed.{built}", sc.src, line, col)
        role = Role(ENGINE, origin, sc.src, (created,), elem=0 if built == "initialize" else None, builder=built)
        model = next((k.value for k in e.keywords if k.arg == "model"), None)
        positional = [a for a in e.args if not isinstance(a, ast.Starred)]
        if model is None and len(positional) > _MODEL_ARG[built]:
            model = positional[_MODEL_ARG[built]]
        if isinstance(model, (ast.Name, ast.Attribute)):
            wrapped = Role(MODEL, origin, sc.src, (Step(f"model wrapped by deepspeed.{built}", sc.src, line, col),),
                           builder=built)
            self._store(sc, model, {wrapped.key: wrapped})
        return {role.key: role}

    def _bind(self, sc: _Scope, e: ast.Call, positional: list[str], named: list[str], fn: str, store) -> None:
        for i, arg in enumerate(e.args):
            if isinstance(arg, ast.Starred):
                break
            if i < len(positional):
                roles = self.eval(sc, arg)
                if roles:
                    store(positional[i], roles, Step(f"passed as `{positional[i]}` to {fn}()", sc.src, arg.lineno,
                                                     arg.col_offset + 1))
        for kw in e.keywords:
            if kw.arg is not None and kw.arg in named:
                roles = self.eval(sc, kw.value)
                if roles:
                    store(kw.arg, roles, Step(f"passed as `{kw.arg}` to {fn}()", sc.src, kw.value.lineno,
                                              kw.value.col_offset + 1))

    def _invoke(self, sc: _Scope, e: ast.Call, target: _Scope, bound: bool, shown: str = "") -> Roles:
        positional = target.positional
        if bound and target.cls is not None and not _is_static(target.node):
            positional = positional[1:]
        self._bind(sc, e, positional, target.params, shown or target.name, lambda p, roles, step: self._add(self._local(target, p), roles, step))
        returned = self._read(("ret", id(target.src), target.qual)) or {}
        if not returned:
            return {}
        step = Step(f"returned by {target.name}()", sc.src, e.lineno, e.col_offset + 1)
        return {r.key: r.then(step) for r in returned.values()}

    def _construct(self, sc: _Scope, e: ast.Call, cls: tuple[int, str]) -> Roles:
        init = self._method(cls, "__init__")
        info = self.classes[cls]
        name = info.qual.rsplit(".", 1)[-1]
        if init is not None:
            self._invoke(sc, e, init, bound=True, shown=name)
        elif info.is_dataclass:
            self._bind(sc, e, info.fields, info.fields, name,
                       lambda p, roles, step: self._add(self._field(cls, p), roles, step))
        role = self._instance(cls)
        return {role.key: role}

    # --- queries ------------------------------------------------------------------------------------------
    def _tails(self) -> frozenset[str]:
        out = set()
        for loc, roles in self.values.items():
            if loc[0] != "ret" and any(r.kind in MODEL_KINDS and r.elem is None for r in roles.values()):
                out.add(loc[-1])
        return frozenset(out)

    def scope(self, src: "PythonSource", qual: str) -> Optional[_Scope]:
        scopes = self.scopes.get(id(src))
        if scopes is None:
            return None
        return scopes.get(qual) or scopes.get(MODULE_SCOPE)

    def model_roles(self, src: "PythonSource", expr, scope: str) -> list[Role]:
        """The DeepSpeed engines / wrapped models a libcst expression -- a name/attribute chain, through calls
        of methods that return their receiver -- can hold in `scope` (a function's qualified name or
        MODULE_SCOPE). Empty when the analysis knows of none."""
        if not self.tails:
            return []
        chain = _cst_chain(expr)
        if not chain or chain[-1] not in self.tails and chain[-1] != "module":
            return []
        sc = self.scope(src, scope)
        if sc is None:
            return []
        roles = self._lookup(sc, chain[0])
        for attr in chain[1:]:
            if not roles:
                return []
            roles = self._attribute(roles, attr)
        return [r for r in roles.values() if r.kind in MODEL_KINDS and r.elem is None]


# members only a DeepSpeed engine has (deepspeed/runtime/engine.py); `backward`/`step` alone are torch's too
ENGINE_MEMBERS = frozenset({"module", "save_checkpoint", "load_checkpoint", "zero_optimization_stage",
                            "zero_optimization_partition_gradients", "is_gradient_accumulation_boundary",
                            "train_micro_batch_size_per_gpu", "save_16bit_model", "get_global_grad_norm",
                            "zero_optimization", "train_batch_size", "gradient_accumulation_steps"})
_BACKWARD_WITH_ARG = re.compile(r"\.backward\(\s*[^)\s]")
_STEP_WITHOUT_ARG = re.compile(r"\.step\(\s*\)")


def _seed_file(src: "PythonSource") -> bool:
    return src.outline is not None and (builds_engine(src.outline) or _may_use_engine(src))


def _may_use_engine(src: "PythonSource") -> bool:
    """`may_use_engine` of the source's text, kept on the source: every launch unit's view asks it of every
    file it holds (issue 33)."""
    found = src.__dict__.get("_may_use_engine")
    if found is None:
        found = src.__dict__["_may_use_engine"] = may_use_engine(src.text)
    return found


def may_use_engine(text: str) -> bool:
    """Text pre-filter of `RoleAnalysis._seed_uses`: `.backward(<arg>)` and `.step()` occur (a superset of the
    files where one object has both, with an engine-only member or the loss of its own forward)."""
    return ".backward(" in text and ".step(" in text and _BACKWARD_WITH_ARG.search(text) is not None \
        and _STEP_WITHOUT_ARG.search(text) is not None


def _made_from(nodes) -> dict[str, list[ast.AST]]:
    """name -> the values a scope's own plain assignments give it (`loss = engine(batch)`, `out = f(x, engine)`)."""
    made: dict[str, list[ast.AST]] = {}
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for name in ([t] if isinstance(t, ast.Name) else t.elts if isinstance(t, (ast.Tuple, ast.List))
                             else []):
                    if isinstance(name, ast.Name):
                        made.setdefault(name.id, []).append(node.value)
    return made


def _own_loss(receiver: ast.AST, loss: ast.AST, made: dict[str, list[ast.AST]], depth: int = 0) -> bool:
    """Is the value handed to `receiver.backward(...)` computed by a call that runs the receiver itself -- called
    (`loss = engine(x)`), or handed to the function that computes it (`loss = forward_step(batch, engine)`),
    through the scope's plain assignments and attribute/subscript reads (`out = engine(x); out.loss`)? That is
    the DeepSpeed engine's API (`engine.backward(loss)` of its own forward); a torch optimizer or an Accelerator
    is handed the loss of another object, the model."""
    want = ast.dump(receiver)
    todo, seen = [loss], 0
    while todo and seen < 16:
        expr = todo.pop()
        seen += 1
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        if isinstance(expr, ast.Name):
            todo.extend(made.get(expr.id, ()) if depth < 4 else ())
            depth += 1
            continue
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and any(ast.dump(part) == want for part in (
                    node.func, *node.args, *(k.value for k in node.keywords))):
                return True
    return False


def _own_nodes(root: ast.AST):
    """The nodes of a scope's own code (not those of nested functions, classes and lambdas); each Attribute that
    is a call's function gets `_dslint_call` (the call)."""
    todo = list(root.body) if isinstance(root, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else [root]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node.func._dslint_call = node
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _engine_use(node: ast.Attribute, call: Optional[ast.Call]) -> Optional[str]:
    """The engine member an attribute uses: `backward` called with a loss, `step` called without arguments
    (an LR scheduler's `step()` is told apart by the other members), or a member only an engine has."""
    attr = node.attr
    if attr == "backward":
        return "backward" if call is not None and call.args else None
    if attr == "step":
        return "step" if call is not None and not call.args else None
    return attr if attr in ENGINE_MEMBERS else None


def class_source(project: "ProjectView", src: "PythonSource", callee: Optional[str]
                 ) -> Optional[tuple["PythonSource", str]]:
    """The checked class (source, qualified name) a constructor call names: `ProjectView.class_for_callee`."""
    return project.class_for_callee(src, callee)

def _cst_chain(expr) -> Optional[list[str]]:
    """`self.actor_model.module` → ["self", "actor_model", "module"]; `model.eval()` → ["model"]."""
    import libcst as cst
    parts: list[str] = []
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
                expr.func.attr.value in KEEP_METHODS:
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Name):
            parts.append(expr.value)
            return list(reversed(parts))
        else:
            return None


def _tagged(roles: Roles, elem: Any) -> Roles:
    out: Roles = {}
    for r in roles.values():
        if r.elem is None:
            moved = r.then(None, elem=elem)
            out[moved.key] = moved
    return out


def _element(roles: Roles, index: int) -> Roles:
    out: Roles = {}
    for r in roles.values():
        if r.elem == index or r.elem == "*":
            moved = r.then(None, elem=None)
            out[moved.key] = moved
    return out


def _elements(roles: Roles) -> Roles:
    out: Roles = {}
    for r in roles.values():
        if r.elem is not None:
            moved = r.then(None, elem=None)
            out[moved.key] = moved
    return out


def _is_static(node) -> bool:
    return any(dotted_name(d) == "staticmethod" for d in getattr(node, "decorator_list", ()))

