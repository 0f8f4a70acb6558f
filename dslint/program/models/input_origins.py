"""What reaches each input of a module's forward, followed back through its call sites: issue 30 items 5 and 6
(DSL303 from data flow; evidence before a finding).

A branch on a forward input splits ranks only when some call of that forward hands it a value that differs from
batch to batch. Each input is classified by the calls the run shows:

- **uniform**: no call passes it (its default on every call: `self.embeddings(ids, types)` leaving
  `adv_embedding` out), or every call passes a value that reads none of its calling method's inputs -- a literal
  per call site (`mode="text"`), a `self.`/config value, a loop index over the layers (`for i in
  range(len(self.layer)): self.layer[i](h, i)`) -- or an input of the calling forward that is uniform in turn;
- **varying**: some call passes a value computed from its caller's inputs that are varying in turn, up to the
  trained model's entry, where the run's own call (`engine(ids, aux=batch["aux"])`, `model(**batch)`) hands it
  the batch -- or no call of the entry is seen while it is trained (a library loop, a Trainer: it hands over the
  batch's fields);
- **unknown**: a holder hands the sub-module on (`checkpoint(custom_forward(layer), ...)`, `f(self.enc)`), builds
  it in a way whose calls are not followed, or calls it from a helper method no call of which is found.

Call sites are the sub-module's holders (`ModelFacts.containers`: a class of the run building it, directly or in a
`ModuleList`/`Sequential` display) and their `self.<field>(...)`, `self.<field>[i](...)` and loop/alias calls
(`for layer in self.layers: layer(h)`), and, for a class no other module holds, the calls of the trained model
`trained_chain.model_calls` finds. Matching arguments to inputs is the call's own binding (positions, keywords),
never a name. Uses under `torch.no_grad()` are left out (no gradient to reduce).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.hyperparams import memo
from dslint.sources.cstwalk import visit as cst_visit

if TYPE_CHECKING:
    from dslint.program.models.modules import ModelFacts, ModuleClass
    from dslint.program.project_view import ProjectView

VARYING, UNKNOWN, UNIFORM = "varying", "unknown", "uniform"
_RANK = {VARYING: 0, UNKNOWN: 1, UNIFORM: 2}
MAX_DEPTH = 6
_LIST_CTORS = frozenset({"ModuleList", "Sequential", "ModuleDict"})
# Python builtins that look at an object without calling it: `len(self.layer)` runs no layer's forward
_INSPECTING = frozenset({"len", "isinstance", "hasattr", "getattr", "id", "type", "print", "repr", "str"})


@dataclass(frozen=True)
class Origin:
    kind: str
    what: str
    src: object = None
    at: object = None           # a libcst node of `src`, or a line number


def not_fed(origins: dict) -> frozenset:
    """The inputs no call feeds from the batch (uniform or unknown)."""
    return frozenset(p for p, o in origins.items() if o.kind != VARYING)


def behind(origins: dict, fn: cst.FunctionDef, names) -> list:
    """(input, Origin) of each input of `fn` that the locals `names` are, or are computed from; batch-fed first."""
    from dslint.program.models.forward_paths import _derived
    names = set(names)
    out = [(p, o) for p, o in origins.items() if p in names or names & _derived(fn, {p})]
    return sorted(out, key=lambda t: _RANK[t[1].kind])


def _join(a: Optional[Origin], b: Origin) -> Origin:
    return b if a is None or _RANK[b.kind] < _RANK[a.kind] else a


def forward_origins(project: "ProjectView", facts: "ModelFacts", cls: "ModuleClass") -> dict[str, Origin]:
    """Input name -> Origin for `cls.forward` (memoised per view and class)."""
    return _origins(project, facts, cls, "forward", 0, frozenset())


def _origins(project, facts, cls, method: str, depth: int, seen: frozenset) -> dict[str, Origin]:
    cache = memo(project, "input-origins", dict)
    key = (id(cls), method)
    if key in cache:
        return cache[key]
    found = cls.find_method(method)
    if found is None:
        return {}
    fn = found[1].node
    names = _param_names(fn)
    if depth > MAX_DEPTH or key in seen:
        return {n: Origin(UNKNOWN, "the chain of callers is too deep to follow") for n in names}
    seen = seen | {key}
    out: dict[str, Optional[Origin]] = {n: None for n in names}
    sites = 0
    if method == "forward":
        for holder, mname, call, unknown in _holder_sites(facts, cls):
            sites += 1
            _site(project, facts, holder, mname, fn, call, unknown, out, depth, seen)
        if not facts.containers(cls):
            sites += _entry_sites(project, facts, cls, fn, out)
    else:
        for holder, mname, call, unknown in _self_calls(cls, method):
            sites += 1
            _site(project, facts, holder, mname, fn, call, unknown, out, depth, seen)
    if not sites:
        what = (f"no call of `{cls.name}.{method}` is found" if method != "forward" else
                f"no call of a `{cls.name}` object is found")
        for n in names:
            out[n] = Origin(UNKNOWN, what)
    result = {n: (o if o is not None else Origin(UNIFORM, "every call leaves it out")) for n, o in out.items()}
    cache[key] = result
    return result


def _param_names(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    names = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.append(star.name.value)
    return [n for n in names if n not in ("self", "cls")]


def _positional(fn: cst.FunctionDef) -> list[str]:
    return [x.name.value for x in (*fn.params.posonly_params, *fn.params.params)][1:]


def _code(node) -> str:
    if isinstance(node, list):
        return ", ".join(_code(n) for n in node)
    text = " ".join(cst.Module([]).code_for_node(node).split())
    return text if len(text) <= 80 else text[:77] + "..."


def _site(project, facts, holder, mname: str, callee: cst.FunctionDef, call: Optional[cst.Call], unknown: str,
          out: dict, depth: int, seen: frozenset) -> None:
    """Classify what one call in `holder.<mname>` hands each input of `callee` (None call: a use not followed)."""
    if call is None:
        for n in out:
            out[n] = _join(out[n], Origin(UNKNOWN, unknown, holder.src))
        return
    where = f"`{_code(call)}` in {holder.name}.{mname}"
    line = call
    found = holder.find_method(mname)
    if found is None:
        return
    method = found[1].node
    if _under_no_grad(method, call):
        return
    params = _param_names(method)
    # a call that runs only when a test of its caller's data goes one way: which call runs, and so what each
    # input gets, is the batch's choice
    chosen: Optional[Origin] = None
    for test in _guards(method, call):
        roots = _roots(method, test, params)
        if roots:
            upstream = _origins(project, facts, holder, mname, depth + 1, seen)
            for r in sorted(roots):
                o = upstream.get(r)
                if o is not None and o.kind == VARYING:
                    chosen = Origin(VARYING, f"{where} runs only when `{_code(test)}` (the batch's `{r}`: {o.what})",
                                    holder.src, line)
                    break
        if chosen is not None:
            break
    bound: dict[str, cst.BaseExpression] = {}
    star: Optional[cst.BaseExpression] = None
    positional = _positional(callee)
    extra: list = []
    i = 0
    for arg in call.args:
        if arg.star:
            star = arg.value
            continue
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg.value
        elif star is None and i < len(positional):
            bound[positional[i]] = arg.value
            i += 1
        elif star is None:
            extra.append(arg.value)
    if extra and isinstance(callee.params.star_arg, cst.Param):
        bound[callee.params.star_arg.name.value] = extra      # its tuple of extra positional arguments
    for n in out:
        value = bound.get(n, star)
        if chosen is not None:
            out[n] = _join(out[n], chosen)
            continue
        if value is None:
            out[n] = _join(out[n], Origin(UNIFORM, f"{where} leaves it out (its default)", holder.src, line))
            continue
        roots = _roots(method, value, params)
        if not roots:
            out[n] = _join(out[n], Origin(UNIFORM, f"{where} passes `{_code(value)}`, fixed at that call site",
                                          holder.src, line))
            continue
        upstream = _origins(project, facts, holder, mname, depth + 1, seen)
        got: Optional[Origin] = None
        for r in sorted(roots):
            o = upstream.get(r)
            got = _join(got, o if o is not None else Origin(UNKNOWN, f"{where}: `{r}` is not followed"))
        assert got is not None
        if got.kind == VARYING and got.src is not None and (holder.src, line) != (got.src, got.at):
            why = got.what if len(got.what) <= 200 else got.what[:197] + "..."
            got = Origin(VARYING, f"{where} passes `{_code(value)}`; {why}", got.src, got.at)
        if got.kind == UNIFORM:
            why = got.what if len(got.what) <= 160 else got.what[:157] + "..."
            got = Origin(UNIFORM, f"{where} passes `{_code(value)}`, uniform at its callers ({why})", holder.src,
                         line)
        # (varying: the call site where the batch enters is the evidence, kept as found)
        out[n] = _join(out[n], got)


def _roots(method: cst.FunctionDef, value: cst.BaseExpression, params: list[str]) -> set[str]:
    """The inputs of `method` that `value` is computed from (through its locals, flow-insensitive)."""
    from dslint.program.models.forward_paths import _derived, _free_names
    read: set = set()
    for v in (value if isinstance(value, list) else [value]):
        read |= _free_names(v)
    out = set()
    for p in params:
        if p in read or (read & _derived(method, {p})):
            out.add(p)
    return out


def _guards(method: cst.FunctionDef, call: cst.Call) -> list:
    """The tests deciding whether `call` runs in `method`: enclosing `if`/`elif`/`while` tests, conditional
    expressions and comprehension conditions (not a test the call itself sits in)."""
    from dslint.sources.cstwalk import ancestors
    path = ancestors(method, call)
    if path is None:
        return []
    out = []
    for i, node in enumerate(path):
        below = path[i + 1] if i + 1 < len(path) else call
        if isinstance(node, (cst.If, cst.While, cst.IfExp)) and below is not node.test:
            out.append(node.test)
        elif isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            comp = node.for_in
            while comp is not None:
                out.extend(c.test for c in comp.ifs)
                comp = comp.inner_for_in
    return out


def _under_no_grad(method: cst.FunctionDef, call: cst.Call) -> bool:
    from dslint.program.models.forward_paths import _is_no_grad

    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.depth = 0
            self.hit = False

        def visit_With(self, node: cst.With) -> None:
            if any(_is_no_grad(item.item) for item in node.items):
                self.depth += 1

        def leave_With(self, node: cst.With) -> None:
            if any(_is_no_grad(item.item) for item in node.items):
                self.depth -= 1

        def visit_Call(self, node: cst.Call) -> None:
            if node is call and self.depth:
                self.hit = True

    if any(_is_no_grad(d.decorator) for d in method.decorators):
        return True
    f = Finder()
    cst_visit(method, f)
    return f.hit


def _holder_sites(facts, cls):
    """(holder class, method name, call or None, why unknown) for each use of a `cls` object its holders make."""
    instances = {c.name for c in [cls, *facts.subclasses(cls)]}
    for container in facts.containers(cls):
        fields = set()
        for c in container.mro():
            for a in c.attrs.values():
                if a.ctor in instances or (a.ctor in _LIST_CTORS and _builds(a, instances)):
                    fields.add(a.name)
        if not fields:
            yield container, "forward", None, (f"{container.name} builds a `{cls.name}` but keeps it where its "
                                               f"calls are not followed")
            continue
        running = _forward_methods(container)
        for owner in container.mro():
            for mname in sorted(owner.methods):
                finder = _FieldCalls(fields)
                cst_visit(owner.info.methods[mname].node, finder)
                for call in finder.calls:
                    yield container, mname, call, ""
                # handed on where the holder's forward runs (`checkpoint(custom_forward(layer), ...)`); not a
                # weight-tying or initialising helper of another method, which runs no forward with data
                if finder.other and mname in running:
                    yield container, mname, None, (f"{container.name}.{mname} hands its `{cls.name}` on "
                                                   f"(`{finder.other}`): what that call passes is not followed")
        yield from _outer_sites(facts, cls, container, fields)


def _outer_sites(facts, cls, container, fields: set):
    """Uses of the holder's `fields` that a class holding the holder makes through the holder object: its field
    (`self.model.f(...)`), a getter method returning that field (`self.get_model().f(...)`, as a LLaVA-style mixin
    reaches its inner model's sub-modules) or a property, and a local bound to one of those."""
    holders = {c.name for c in [container, *facts.subclasses(container)]}
    for outer in facts.containers(container):
        inner = {a.name for c in outer.mro() for a in c.attrs.values() if a.ctor in holders}
        if not inner:
            continue
        getters, props = _getters(outer, inner)
        running = _forward_methods(outer)
        for owner in outer.mro():
            for mname in sorted(owner.methods):
                finder = _FieldCalls(fields, _HolderOf(inner, getters, props))
                cst_visit(owner.info.methods[mname].node, finder)
                for call in finder.calls:
                    yield outer, mname, call, ""
                if finder.other and mname in running:
                    yield outer, mname, None, (f"{outer.name}.{mname} hands the `{cls.name}` of its "
                                               f"{container.name} on (`{finder.other}`): what that call passes is "
                                               f"not followed")


def _getters(cls, fields: set) -> tuple[set, set]:
    """(methods, properties) of `cls` whose whole body returns one of its `fields` (`return self.model`), as the
    class's method resolution finds them (a mixin's abstract `get_model` is overridden by the concrete one)."""
    methods, props = set(), set()
    for name in {m for c in cls.mro() for m in c.methods}:
        found = cls.find_method(name)
        fn = found[1].node if found is not None else None
        if not isinstance(fn, cst.FunctionDef) or len(_param_names(fn)) or \
                not isinstance(fn.body, cst.IndentedBlock):
            continue
        body = [s for s in fn.body.body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                                and isinstance(s.body[0], cst.Expr)
                                                and isinstance(s.body[0].value, (cst.SimpleString,
                                                                                 cst.ConcatenatedString)))]
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
            continue
        ret = body[0].body[0]
        if not isinstance(ret, cst.Return) or ret.value is None or not _self_field(ret.value, fields) or \
                isinstance(ret.value, cst.Subscript):
            continue
        if any(isinstance(d.decorator, cst.Name) and d.decorator.value == "property" for d in fn.decorators):
            props.add(name)
        elif not fn.decorators:
            methods.add(name)
    return methods, props


class _HolderOf:
    """Expressions that are the holder object inside a class holding it: `self.<field>`, `self.<getter>()`,
    `self.<property>`."""

    def __init__(self, fields: set, getters: set, props: set) -> None:
        self.fields, self.getters, self.props = fields, getters, props

    def __call__(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call):
            return not node.args and _self_field(node.func, self.getters) and not isinstance(node.func,
                                                                                              cst.Subscript)
        return _self_field(node, self.fields | self.props) and not isinstance(node, cst.Subscript)


def _forward_methods(cls) -> set:
    """`forward` and the methods it calls through `self.` (transitively): the code a call of the module runs."""
    todo, seen = ["forward"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found = cls.find_method(name)
        if found is None:
            continue

        class Calls(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                f = node.func
                if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self":
                    todo.append(f.attr.value)

        cst_visit(found[1].node, Calls())
    return seen


def _self_calls(cls, method: str):
    """Calls `self.<method>(...)` in the class's own methods (a helper's callers)."""
    for owner in cls.mro():
        for mname in sorted(owner.methods):
            if mname == method:
                continue
            node = owner.info.methods[mname].node
            for call in _method_calls(node, method):
                yield cls, mname, call, ""


def _method_calls(fn: cst.FunctionDef, method: str) -> list:
    out = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if isinstance(f, cst.Attribute) and f.attr.value == method and isinstance(f.value, cst.Name) and \
                    f.value.value == "self":
                out.append(node)

    cst_visit(fn, Finder())
    return out


def _builds(attr, instances: set) -> bool:
    """Does the statement creating a `ModuleList`/`Sequential` field construct one of `instances`?"""
    try:
        stmt = attr.statement
    except Exception:
        return False
    hit = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
            if name in instances:
                hit.append(node)

    cst_visit(stmt, Finder())
    return bool(hit)


def _self_field(node: cst.BaseExpression, fields: set, base=None) -> bool:
    """`self.<field>`, `self.<field>[i]`, `self.<field>[a:b]`; with `base`, `<holder>.<field>...` for an
    expression `base` says is the holder object instead of `self`."""
    while isinstance(node, cst.Subscript):
        node = node.value
    if not (isinstance(node, cst.Attribute) and node.attr.value in fields):
        return False
    if base is not None:
        return base(node.value)
    return isinstance(node.value, cst.Name) and node.value.value == "self"


class _FieldCalls(cst.CSTVisitor):
    """Calls of a held sub-module in one method -- `self.f(...)`, `self.f.forward(...)`, `self.f[i](...)`, a local
    bound to it (`layer = self.f[i]`, `for layer in self.f`, `for i, layer in enumerate(self.f)`) then called --
    and the first other use that may run it out of sight (`create_custom_forward(layer)`, `run(self.f)`)."""

    def __init__(self, fields: set, holder=None) -> None:
        self.fields = fields
        self.holder = holder          # None: the holder is `self`; else a test of the expression that is it
        self.holders: set[str] = set()  # locals bound to the holder object (`m = self.get_model()`)
        self.aliases: set[str] = set()
        self.calls: list[cst.Call] = []
        self.other: str = ""
        self._ok: set[int] = set()

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name) and self.holder is not None and self.holder(value):
            self.holders.add(target.value)
        elif isinstance(target, cst.Name) and _self_field(value, self.fields, self._base):
            self.aliases.add(target.value)
            self._ok.add(id(value))

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind(t.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        it, target = node.iter, node.target
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" and \
                it.args and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            self._bind(target.elements[1].value, it.args[0].value)
        else:
            self._bind(target, it)

    def _is_held(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.aliases
        return _self_field(node, self.fields, self._base)

    def _base(self, node: cst.BaseExpression) -> bool:
        if self.holder is None:
            return isinstance(node, cst.Name) and node.value == "self"
        return (isinstance(node, cst.Name) and node.value in self.holders) or self.holder(node)

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value == "forward" and self._is_held(f.value):
            self.calls.append(node)
            self._ok.add(id(f.value))
        elif self._is_held(f):
            self.calls.append(node)
            self._ok.add(id(f))
        elif not (isinstance(f, cst.Name) and f.value in _INSPECTING):
            for a in node.args:
                if self._is_held(a.value) and id(a.value) not in self._ok and not self.other:
                    self.other = _code(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self._ok:
            return

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False


def _entry_sites(project, facts, cls, fn: cst.FunctionDef, out: dict) -> int:
    """The calls of the trained model the run's scripts make (`trained_chain.model_calls`); a model no call of which
    is seen (a library's loop, a Trainer, feeds it) is handed the batch's fields. Returns the number of sites."""
    from dslint.program.models.call_presence import _function, _no_grad, _setting
    from dslint.program.models.trained_chain import model_calls
    calls = model_calls(project, facts, cls)
    library = _library_loop(project, facts, cls)
    if calls is None and library is None and _sink(project, facts, cls) is None:
        for n in out:
            out[n] = _join(out[n], Origin(UNKNOWN, f"no call of a `{cls.name}` object is seen, nor a training call "
                                                   f"it reaches"))
        return 1
    if calls is None or library is not None:
        what = (f"`{cls.name}` is handed to {library.what}, whose training step calls it with the batch"
                if library is not None else
                f"`{cls.name}` is the model's entry, and no call of it is seen: code the run's files do not show "
                f"hands it the batch")
        for n in out:
            out[n] = _join(out[n], Origin(VARYING, what, library.src if library is not None else None,
                                          library.line if library is not None else None))
        if calls is None:
            return 1
    positional = _positional(fn)
    counted = 0
    for src, scope, call in calls:
        func = _function(project, src, scope)
        if func is None:
            for n in out:
                out[n] = _join(out[n], Origin(UNKNOWN, "a call of the model outside a known function", src,
                                              getattr(call, "lineno", None)))
            counted += 1
            continue
        if _no_grad(project, func, call):
            continue
        counted += 1
        where = f"`{_ast_code(call)}`"
        line = getattr(call, "lineno", None)
        bound: dict[str, ast.AST] = {}
        star: Optional[ast.AST] = None
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                star = arg.value
                break
            if i < len(positional):
                bound[positional[i]] = arg
        for kw in call.keywords:
            if kw.arg is None:
                star = kw.value
            else:
                bound[kw.arg] = kw.value
        for n in out:
            value = bound.get(n, star)
            if value is None:
                o = Origin(UNIFORM, f"{where} leaves it out (its default)", src, line)
            elif isinstance(value, ast.Constant) or _setting(project, src, scope, value):
                o = Origin(UNIFORM, f"{where} passes `{_ast_code(value)}`, a value fixed for the run", src, line)
            else:
                o = Origin(VARYING, f"{where} passes `{_ast_code(value)}`", src, line)
            out[n] = _join(out[n], o)
    return counted


def _ast_code(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:
        return "..."
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def _library_loop(project, facts, cls):
    """The sink of `cls`'s training chain when it is a library's loop that calls the model itself (a
    transformers/TRL Trainer, a class of the run derived from one): not `deepspeed.initialize`, a DDP/FSDP wrapper
    or accelerate's `prepare`, whose engine the run's own code calls. None otherwise."""
    from dslint.program.models.trained_chain import _PREPARE, _WRAPPERS
    from dslint.program.outline import engine_builder
    cache = memo(project, "input-origins.library", dict)
    if id(cls) not in cache:
        sink = _sink(project, facts, cls)
        name = sink.what.strip("`") if sink is not None else ""
        last = name.rsplit(".", 1)[-1]
        own = sink is None or engine_builder(name) == "initialize" or last in _WRAPPERS or last in _PREPARE or \
            name.startswith("a call of the model")
        cache[id(cls)] = None if own else sink
    return cache[id(cls)]


def _sink(project, facts, cls):
    from dslint.program.models.trained_chain import trained_chain
    cache = memo(project, "input-origins.sink", dict)
    if id(cls) not in cache:
        cache[id(cls)] = trained_chain(project, facts, cls)
    return cache[id(cls)]
