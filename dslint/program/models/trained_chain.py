"""Positive evidence that a model class is trained under gradient reduction (issue 30, "evidence before a
finding"): a construction chain from the class to a training call of the run.

`never_trained` (modules.py) is negative evidence: it drops a finding only when every construction it finds sits
in a file that trains nothing. A class the run never constructs, or builds only for evaluation beside files that
train other models, passes that test. `trained_chain` asks the other way round: is an object built from the class
-- itself, a subclass, or a class holding one as a sub-module (`ModelFacts.containers`, up to four levels) --
seen flowing into something that reduces its gradients across ranks? Followed by data flow, not by names:

- the value of the construction (`Cls(...)`, `Cls.from_pretrained(...)`), and every name or `self.` field
  assigned from an expression that reads a followed value (`model = Model(); model = model.cuda()`,
  `out = model(x)`, `loss = out.mean()`), within one function;
- a class value (`cls = Inf if flag else Model`) is followed as the object its call builds; an annotated field
  holds what its annotation names (`self.fuse: Fusion = globals()[name](...)`);
- into a function the value is returned from (a factory: its calls and the places it is handed on as a value
  are followed, `model = build_model()`, `pretrain(args, model_provider)`); into a module class whose `self.`
  field it lands in (a factory-built sub-module: the holder is followed), a function or method of the run it is handed to (`train(model)`: its parameter is followed),
  a project class it is handed to (`Runner(model)`: `__init__`'s parameter, then the `self.` fields it lands in,
  through every method of that class);
- to a sink that takes a followed value: DeepSpeed's `initialize` (not `init_inference`),
  `DistributedDataParallel` / `DDP` / `FullyShardedDataParallel` / `FSDP`, the `prepare(...)` of an object
  accelerate's `Accelerator(...)` built, a transformers/TRL `...Trainer(...)`, or a class of the run derived from one of these or from `DeepSpeedEngine` (`Engine(model=
  model)`). Not a `backward` of a value the model computed: a frozen teacher's output feeds the student's loss
  under `torch.no_grad()`, and the engine that runs a trained model's backward is built by one of the sinks.

Bounded: four hand-overs deep, each (file, function, followed names) once. The result is the sink (file, line,
what it is) or None; `Program.trained_chain` memoises it per class.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, Optional

from dslint.program.hyperparams import memo
from dslint.program.outline import MODULE_SCOPE, dotted_name, engine_builder

if TYPE_CHECKING:
    from dslint.program.models.modules import ModelFacts, ModuleClass
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

MAX_DEPTH = 4
_WRAPPERS = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})
_PREPARE = frozenset({"prepare", "prepare_model"})


class Sink:
    __slots__ = ("src", "line", "what")

    def __init__(self, src: "PythonSource", line: int, what: str) -> None:
        self.src, self.line, self.what = src, line, what


def trained_chain(project: "ProjectView", facts: "ModelFacts", cls: "ModuleClass") -> Optional[Sink]:
    """The training call an object built from `cls` (a subclass, a holder) reaches in the run, or None."""
    return _Walker(project, facts).model(cls, 0)


def model_call(project: "ProjectView", facts: "ModelFacts", cls: "ModuleClass") -> Optional[Sink]:
    """A call of an object built from `cls` (a subclass, a holder) -- or of the engine, wrapper or Trainer it is
    handed to -- that the run's files show (`model(ids)`, `engine(batch["x"])`, `self.model.forward(...)`), or
    None: the premise of taking an input no call passes as its default (`keyword_presence._closed_world`)."""
    return _Walker(project, facts, calls=True).model(cls, 0)


def model_calls(project: "ProjectView", facts: "ModelFacts", cls: "ModuleClass") -> Optional[list]:
    """Every call of an object built from `cls` (or a subclass) -- or of the engine or wrapper it is handed to, its
    `.module` or `.forward` -- that the run's files show, as (file, ast.Call), found by the same data flow as
    `trained_chain`; None when the list may be incomplete: a class held by another module class (its holder's
    methods call it as a field), a chain cut at the depth limit, or no call seen at all."""
    from dslint.program.models.modules import holder_closure
    family = {id(c) for c in [cls, *facts.subclasses(cls)]}
    if any(k not in family for k in holder_closure(facts, cls)):
        return None
    walker = _Walker(project, facts, calls=True)
    walker.collected = []
    walker.model(cls, 0)
    if walker.truncated or not walker.collected:
        return None
    return walker.collected


def _references(project: "ProjectView", src: "PythonSource", names: set, wanted, own=None) -> dict[str, set]:
    """Scope → ids of the nodes of `src` that name (`Cls(...)`, `Cls.from_pretrained`, `Inf if flag else Cls`,
    `factory(args)`, `run(args, factory)`) something `wanted(src, resolved dotted name)` accepts, outside the
    functions `own(qualified name)` excludes (a holder's own methods build its sub-modules: followed through the
    holder)."""
    tree = _tree(project, src)
    out: dict[str, set] = {}
    if tree is None or src.outline is None:
        return out

    def visit(node, scope, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = f"{prefix}{child.name}"
                if own is not None and own(q):
                    continue
                visit(child, q, q + ".")
            elif isinstance(child, ast.ClassDef):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), scope, f"{prefix}{child.name}.")
            else:
                check(child, scope)
                visit(child, scope, prefix)

    def check(node, scope):
        if isinstance(node, ast.Name) and node.id in names or \
                isinstance(node, ast.Attribute) and node.attr in names:
            dotted = _dotted(node)
            if dotted is None:
                return
            root = dotted.split(".", 1)[0]
            resolved = src.outline.imports[root] + dotted[len(root):] if root in src.outline.imports else dotted
            if wanted(src, resolved):
                out.setdefault(scope, set()).add(id(node))

    visit(tree, MODULE_SCOPE, "")
    return out


def _library_trainer(callee: Optional[str]) -> bool:
    """transformers' or TRL's `...Trainer` (built with the model it trains)."""
    return bool(callee) and callee.rsplit(".", 1)[-1].endswith("Trainer") and \
        callee.startswith(("transformers", "trl"))


def _tree(project: "ProjectView", src: "PythonSource") -> Optional[ast.Module]:
    trees = memo(project, "trained-chain-trees", dict)
    if id(src) not in trees:
        try:
            trees[id(src)] = ast.parse(src.text)
        except (SyntaxError, ValueError):
            trees[id(src)] = None
    return trees[id(src)]


def _scopes(project: "ProjectView", src: "PythonSource") -> dict[str, ast.AST]:
    """Qualified name (as the outline spells it) → function node; MODULE_SCOPE → the module."""
    table = memo(project, "trained-chain-scopes", dict)
    if id(src) not in table:
        out: dict[str, ast.AST] = {}
        tree = _tree(project, src)
        if tree is not None:
            out[MODULE_SCOPE] = tree

            def walk(body, prefix):
                for node in body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        q = f"{prefix}{node.name}"
                        if not isinstance(node, ast.ClassDef):
                            out.setdefault(q, node)
                        walk(node.body, q + ".")
                    elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                        for field in ("body", "orelse", "finalbody", "handlers"):
                            walk(getattr(node, field, []) or [], prefix)
                    elif isinstance(node, ast.ExceptHandler):
                        walk(node.body, prefix)
            walk(tree.body, "")
        table[id(src)] = out
    return table[id(src)]


def _dotted(node: ast.AST) -> Optional[str]:
    return dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None


def _own_nodes(fn: ast.AST):
    """The nodes of a scope: a function's body with its nested functions (closures read its names), the
    module's statements outside functions and classes."""
    if isinstance(fn, ast.Module):
        stack = [n for n in fn.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(c for c in ast.iter_child_nodes(node)
                         if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    else:
        yield from ast.walk(fn)


class _Walker:
    def __init__(self, project: "ProjectView", facts: "ModelFacts", calls: bool = False) -> None:
        # calls: look for a call of the model (or of its engine, its wrapper) instead of a training sink
        self.project, self.facts, self.calls = project, facts, calls
        self.seen: set = set()
        self.models_seen: set = set()
        # collecting every call of the model (`model_calls`) instead of stopping at the first; whether the walk
        # was cut at the depth limit
        self.collected: Optional[list] = None
        self.truncated = False

    def model(self, cls: "ModuleClass", depth: int) -> Optional[Sink]:
        """The references to `cls`, a subclass or a holder (four levels), each followed from its scope."""
        from dslint.program.models.modules import _scope_class
        if id(cls) in self.models_seen or depth > MAX_DEPTH:
            return None
        self.models_seen.add(id(cls))
        from dslint.program.models.modules import holder_closure
        project = self.project
        holders = holder_closure(self.facts, cls)
        keys = {(id(c.src), c.qualname) for c in holders.values()}
        self.models_seen |= set(holders)
        names = {c.name for c in holders.values()}
        # module-level aliases of the classes in their own files (`AudioEncoder = FiniteAudioEncoder`): a
        # reference to the alias, in that file or imported from it, is one to the class
        from dslint.program.models.per_element import aliases
        by_file: dict[int, set] = {}
        for c in holders.values():
            by_file.setdefault(id(c.src), set()).update(aliases(project, c.src, {c.name}))
        alias_names = set().union(*by_file.values()) if by_file else set()

        def wanted(src, resolved):
            found = project.class_for_callee(src, resolved)
            if found is not None:
                return (id(found[0]), found[1]) in keys
            last = resolved.rsplit(".", 1)[-1]
            return last in alias_names and (last in by_file.get(id(src), ()) or "." in resolved)

        names |= alias_names
        for src in project.mentioning(*sorted(names)):
            own = (lambda q, src=src: (id(src), _scope_class(project, src, q)) in keys)
            for scope, ids in _references(project, src, names, wanted, own).items():
                sink = self.scope(src, scope, lambda node, ids=ids: id(node) in ids, frozenset(), depth)
                if sink is not None:
                    return sink
        return None

    def resolve(self, src: "PythonSource", node: ast.AST) -> Optional[str]:
        name = _dotted(node)
        if name is None or src.outline is None:
            return name
        root = name.split(".", 1)[0]
        if root in src.outline.imports:
            return src.outline.imports[root] + name[len(root):]
        return name

    def scope(self, src: "PythonSource", scope: str, seed: Optional[Callable[[str], bool]], names: frozenset,
              depth: int, handed: bool = False) -> Optional[Sink]:
        """The sink the followed values of `scope` reach: the nodes `seed` accepts, or the variables `names`.
        `handed`: the scope is a function entered through its parameters at one call (`load_checkpoint(model,
        path)`); what it returns goes back to that call, whose result the caller already follows -- not to every
        other caller of the function (a checkpoint loader shared by an evaluation model and the trained one)."""
        key = (id(src), scope, names, seed is None)
        if depth > MAX_DEPTH:
            # a chain cut here may hide calls of the model -- not in a module class's methods: no module class
            # holds the model when its calls are collected (`model_calls`), so what flows there is no model
            self.truncated |= not self._module_scope(src, scope)
            return None
        if seed is None and key in self.seen:
            return None
        self.seen.add(key)
        fn = _scopes(self.project, src).get(scope)
        if fn is None:
            return None
        nodes = list(_own_nodes(fn))
        seeds = {id(node) for node in nodes if seed(node)} if seed is not None else set()
        followed = set(names)

        def reads(expr: Optional[ast.AST]) -> bool:
            if expr is None:
                return False
            for sub in ast.walk(expr):
                if id(sub) in seeds:
                    return True
                if isinstance(sub, ast.Name) and sub.id in followed:
                    return True
                if isinstance(sub, ast.Attribute):
                    d = _dotted(sub)
                    if d is not None and d in followed:
                        return True
            return False

        def bind(target: ast.AST) -> bool:
            if isinstance(target, (ast.Tuple, ast.List)):
                return any([bind(t) for t in target.elts])
            if isinstance(target, ast.Starred):
                return bind(target.value)
            if isinstance(target, ast.Subscript):       # `models["actor"] = model`: the container holds it
                return bind(target.value)
            d = _dotted(target)
            if d is None or not (isinstance(target, ast.Name) or d.startswith("self.")) or d in followed:
                return False
            followed.add(d)
            return True

        def alias(expr: Optional[ast.AST]) -> bool:
            # while collecting the model's calls (`model_calls`): is `expr` the model object itself -- a followed
            # name, the class's construction or factory call, a method's result on the model (`model.cuda()`), a
            # wrapper built around it (`DDP(model)`, `deepspeed.initialize(model=model)`) -- not a value computed
            # from it or from its outputs (`feats = np.array(...)`)?
            if expr is None:
                return False
            if id(expr) in seeds or (isinstance(expr, ast.Name) and expr.id in followed) or \
                    (isinstance(expr, ast.Attribute) and _dotted(expr) in followed):
                return True
            if isinstance(expr, ast.Call):
                func = expr.func
                return alias(func) or (isinstance(func, ast.Attribute) and alias(func.value)) or \
                    any(alias(a.value if isinstance(a, ast.Starred) else a) for a in expr.args) or \
                    any(alias(k.value) for k in expr.keywords)
            if isinstance(expr, ast.IfExp):
                return alias(expr.body) or alias(expr.orelse)
            if isinstance(expr, (ast.Tuple, ast.List)):
                return any(alias(e.value if isinstance(e, ast.Starred) else e) for e in expr.elts)
            if isinstance(expr, ast.Await):
                return alias(expr.value)
            return False

        binds = reads if self.collected is None else alias
        assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr,
                                                        ast.For, ast.withitem))]
        for _ in range(6):
            changed = False
            for n in assigns:
                if isinstance(n, ast.Assign):
                    if self._output(n.value, followed):
                        continue    # `features = model(x)`: what a call of the model returns is not the model
                    if binds(n.value):
                        changed |= any([bind(t) for t in n.targets])
                elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                    # an annotated field holds what its annotation names (`self.fuse: Fusion = make(...)`)
                    if n.value is not None and (binds(n.value) or isinstance(n, ast.AnnAssign) and
                                                reads(n.annotation)):
                        changed |= bind(n.target)
                elif isinstance(n, ast.For):
                    if binds(n.iter):
                        changed |= bind(n.target)
                elif n.optional_vars is not None and binds(n.context_expr):
                    changed |= bind(n.optional_vars)
            if not changed:
                break
        if not seeds and not followed:
            return None
        handed_to: list = []
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            args = [*node.args, *(k.value for k in node.keywords)]
            resolved = self.resolve(src, node.func) or ""
            last = resolved.rsplit(".", 1)[-1] if resolved else (
                node.func.attr if isinstance(node.func, ast.Attribute) else "")
            line = getattr(node, "lineno", 0)
            if self.calls:
                func = node.func.value if isinstance(node.func, ast.Attribute) and node.func.attr == "forward" \
                    else node.func
                if self.collected is not None and isinstance(func, ast.Attribute) and func.attr == "module":
                    func = func.value       # a wrapper's (DDP's, the engine's) `.module`: the model itself
                if _dotted(func) in followed:
                    if self.collected is None:
                        return Sink(src, line, f"a call of the model, `{_dotted(func)}(...)`")
                    self.collected.append((src, scope, node))
                    continue
            if not any(reads(a) for a in args):
                continue
            built = engine_builder(resolved) if resolved else None
            if built == "initialize":
                if self.calls:
                    continue        # its engine: bound by the assignment, called later
                return Sink(src, line, f"`{resolved}`")
            if built:
                continue            # init_inference: no gradients
            if last in _WRAPPERS or _library_trainer(resolved) or self._reducing_class(src, resolved, 0) or \
                    last in _PREPARE and self._accelerator(src, scope, node.func):
                if self.calls:
                    continue
                return Sink(src, line, f"`{resolved or last}`")
            handed_to.append(node)
        # returned: the factory's calls in the run
        if scope != MODULE_SCOPE and not handed and any(isinstance(n, ast.Return) and reads(n.value) for n in nodes):
            for caller_src, caller_scope, match in self._callers(src, scope):
                sink = self.scope(caller_src, caller_scope, match, frozenset(), depth + 1)
                if sink is not None:
                    return sink
        # handed to a function, method or class of the run: its parameter
        for call in handed_to:
            # while collecting the model's calls, a function receives the model only as the argument itself
            # (`get_loss(model, ...)`), not inside a value computed from it or from its outputs (`mmr(feats)`)
            hands = reads if self.collected is None else \
                (lambda arg: (isinstance(arg, ast.Name) and arg.id in followed) or _dotted(arg) in followed)
            for target_src, target_scope, params in self._parameters(src, scope, call, hands):
                sink = self.scope(target_src, target_scope, None, frozenset(params), depth + 1,
                                  handed=not target_scope.endswith(".__init__"))
                if sink is not None:
                    return sink
        # a `self.` field: every method of the class reads it
        fields = frozenset(n for n in followed if n.startswith("self."))
        owner = self._class_of(src, scope)
        if fields and owner is not None:
            # a module class's field (a factory-built sub-module, `self.lm, _ = get_language_model()`): the
            # holder is what the run trains
            holder = next((c for c in self.facts.classes_in(src) if c.qualname == owner), None)
            if holder is not None:
                if self.collected is not None:
                    return None     # no module class holds the model (`model_calls`): what lands here is not it
                return self.model(holder, depth + 1)
        if fields and owner is not None:
            for q in list(_scopes(self.project, src)):
                if q != scope and q.startswith(owner + ".") and q.count(".") == owner.count(".") + 1:
                    sink = self.scope(src, q, None, fields, depth + 1)
                    if sink is not None:
                        return sink
        return None

    def _output(self, value: ast.AST, followed: set) -> bool:
        """While collecting the model's calls (`model_calls`): is `value` a call of the followed model itself
        (`model(x)`, `model.module(x)`, `model.forward(x)`), whose result is its output?"""
        if self.collected is None or not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in ("forward", "module"):
            func = func.value
        return _dotted(func) in followed

    def _module_scope(self, src: "PythonSource", scope: str) -> bool:
        owner = self._class_of(src, scope)
        return owner is not None and any(c.qualname == owner for c in self.facts.classes_in(src))

    def _reducing_class(self, src: "PythonSource", callee: str, depth: int) -> bool:
        """Is `callee` a class of the run derived from DeepSpeed's engine, DDP/FSDP or a Trainer (`class
        Engine(DeepSpeedEngine)` built with `model=model`)?"""
        if not callee or depth > 4:
            return False
        found = self.project.class_for_callee(src, callee)
        if found is None or found[0].outline is None:
            return False
        outline = found[0].outline.classes.get(found[1])
        for base in outline.bases if outline is not None else ():
            last = base.rsplit(".", 1)[-1]
            if last in _WRAPPERS or last == "DeepSpeedEngine" or _library_trainer(base) or \
                    self._reducing_class(found[0], base, depth + 1):
                return True
        return False

    def _accelerator(self, src: "PythonSource", scope: str, func: ast.AST) -> bool:
        """Is `func` (`accelerator.prepare`) a method of an object built by accelerate's `Accelerator(...)` (a
        name of the scope or the module, or a `self.` field of the class)?"""
        if not isinstance(func, ast.Attribute) or src.outline is None:
            return False
        recv = _dotted(func.value)
        if recv is None:
            return False
        if recv.startswith("accelerate"):
            return True
        outline = src.outline
        if recv.startswith("self.") and recv.count(".") == 1:
            owner = self._class_of(src, scope)
            built = outline.fields.get(f"{owner}.{recv[5:]}", []) if owner else []
        else:
            built = [*outline.instances.get(f"{scope}:{recv}", []), *outline.instances.get(f"{MODULE_SCOPE}:{recv}", [])]
        return any(b.rsplit(".", 1)[-1] == "Accelerator" for b in built)

    def _class_of(self, src: "PythonSource", scope: str) -> Optional[str]:
        from dslint.program.models.modules import _scope_class
        if scope == MODULE_SCOPE or src.outline is None:
            return None
        return _scope_class(self.project, src, scope)

    def _callers(self, src: "PythonSource", scope: str):
        """(file, scope, node test) of the references to the function or method `scope` of `src`: its calls,
        and a function handed on as a value (`pretrain(args, model_provider)`)."""
        owner = self._class_of(src, scope)
        name = scope.rsplit(".", 1)[-1]
        if owner is None:
            project = self.project

            def wanted(other, resolved):
                return project.function_for_callee(other, resolved) == (src, scope)
            for other in project.mentioning(name)[:200]:
                for where, ids in _references(project, other, {name}, wanted).items():
                    yield other, where, (lambda node, ids=ids: id(node) in ids)
            return
        # a method: its `self.<name>(...)` calls in the class's other methods
        for callee, where in src.outline.calls:
            if callee == f"self.{name}" and where.startswith(owner + "."):
                yield src, where, (lambda node, n=name: isinstance(node, ast.Call) and
                                   _dotted(node.func) == f"self.{n}")

    def _parameters(self, src: "PythonSource", scope: str, call: ast.Call, reads):
        """(file, function, parameter names) that receive a followed value at `call`."""
        callee = self.resolve(src, call.func)
        if not callee:
            return
        target = None
        skip_self = False
        if callee.startswith("self.") and callee.count(".") == 1:
            owner = self._class_of(src, scope)
            if owner is not None and f"{owner}.{callee[5:]}" in _scopes(self.project, src):
                target, skip_self = (src, f"{owner}.{callee[5:]}"), True
        if target is None:
            found = self.project.class_for_callee(src, callee)
            if found is not None:
                target, skip_self = (found[0], f"{found[1]}.__init__"), True
        if target is None:
            target = self.project.function_for_callee(src, callee)
        if target is None:
            return
        fn = _scopes(self.project, target[0]).get(target[1])
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if skip_self and params:
            params = params[1:]
        out = set()
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if i < len(params) and reads(arg):
                out.add(params[i])
        for kw in call.keywords:
            if kw.arg is not None and reads(kw.value):
                out.add(kw.arg)
        if out:
            yield target[0], target[1], out
