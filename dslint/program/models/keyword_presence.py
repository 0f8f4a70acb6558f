"""Whether an optional input of a model's forward is passed on every batch or on none, by a run setting at its callers.

DSL303 asks it of a presence test in forward (`if prompt_pos is not None:` on an input that defaults to None).
The batch does not decide the test when the callers decide it: every call of the run that hands the input over
by keyword (`model(tokens, ..., prompt_pos=prompt_pos)`) sits under tests of run settings only (`if
args.continuous_prompt:`) and passes a value that is there whenever the call runs -- a batch field read by its
literal key (`data["prompt_pos"]`, possibly through methods of it, `.long().cuda()`, or a local assigned only
from such reads), which raises rather than gives None when the field is missing -- or passes on an input of its
own function that its callers decide the same way (a wrapper's `forward(..., prompt_pos=None)` handing
`prompt_pos=prompt_pos` to the model it holds). Then the calls that pass the input run for every batch of a
configuration or for none, on every rank alike.

What the decision reads, never a name:
- a call of the run passing the keyword: a call of a variable (`model(...)`) or of a module's attribute
  (`self.model(...)`) that no function or class of the checked files resolves to other than as a model call;
  the forward's own parameter binds it by the call's keyword (keyword binding, not a guess);
- a test of run settings: built of attribute reads of a name (`args.continuous_prompt`, `self.cfg.use_x`),
  literals, comparisons of those, `not`/`and`/`or`, which reads no subscript, call, or bare local (a batch
  `if "k" in batch:`, `if batch.get("k") is not None:` is not one), and which the rank-uniformity lattice finds
  the same on every rank (`if args.local_rank == 0:` is not one);
- no call of a variable or of `self.<attr>` in the run unpacks a mapping into keywords (`model(**batch)`: the
  input may arrive through the mapping, whose keys the batch decides) -- then nothing is decided.

Calls that hand the input over positionally are sites too (`engine(ids, batch.get("aux"))`: the argument at the
parameter's position, for every call of an object with that many positional arguments, whatever object it
calls -- an over-approximation of the model's callers, so that an unrelated call can only keep the test
data-dependent). Calls under `torch.no_grad()` (a `with` block or a decorated function) produce no gradient and
are not sites. Undecided (False) when no call passes the input: the existing analyses (`batch_keys`,
`uniform_inputs`) apply. Not followed: the elements of an unpacked sequence (`model(*inputs)`, `self.model(x,
*mems)`) -- an optional input collected into a list and unpacked into the call is not seen.
"""

from __future__ import annotations

import re

import builtins
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import dotted_name
from dslint.program.hyperparams import memo, module_assignments
from dslint.program.models.batch_keys import _reads, visited
from dslint.sources.cstwalk import visit as cst_visit

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

MAX_DEPTH = 3
# what `_decide` asks of each call's value: there whenever the call runs, or the same on every rank
PRESENT, VALUE = "present", "value"
_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))


def presence_set_by_callers(project: "ProjectView", keyword: str, position: Optional[int] = None,
                            family: Optional[frozenset] = None) -> bool:
    """Is the input passed as `keyword=` (or, `position` given, as that positional argument after the receiver)
    by every call of the run only under run settings, with a value there whenever the call runs (see the
    module's docstring)? `family`: the names of the class whose forward takes the input and of its subclasses --
    a call of a sub-module the caller's class builds from another class of the run (`self.attention = Attention
    (...)`, then `self.attention(q, mask, ...)`) is that class's forward, no site. Memoised per view, keyword,
    position and family."""
    cache = memo(project, "keyword-presence", dict)
    key = (keyword, position, family)
    if key not in cache:
        cache[key] = _decide(project, keyword, position, family, 0, set(), PRESENT)
    return cache[key]


def value_set_by_callers(project: "ProjectView", keyword: str, position: Optional[int] = None,
                         family: Optional[frozenset] = None) -> bool:
    """Is the input's value the same on every rank at every call of the run that can hand it over -- a literal
    (`mode="fusion"`, one per call site), a run setting (`args.mode`), or the caller's own input decided alike (an
    option of its own, `mode="text"` as its default, that its callers set the same way or leave out) -- each call
    under tests of run settings only? Or does no call of the run hand it over at all, in a run whose every call of a model is seen
    (`_closed_world`): then it is its default on every call. Memoised per view, keyword, position and family."""
    cache = memo(project, "keyword-value", dict)
    key = (keyword, position, family)
    if key not in cache:
        cache[key] = _decide(project, keyword, position, family, 0, set(), VALUE)
    return cache[key]


def family_of(facts, cls) -> frozenset:
    """The names of a module class and of its subclasses in the run."""
    return frozenset(c.name for c in [cls, *facts.subclasses(cls)])


def _another_class(project: "ProjectView", src: "PythonSource", site: "_Site", family: Optional[frozenset]) -> bool:
    """Does the site call `self.X(...)` where the calling class builds `X` from a class of the run outside
    `family` (so the call runs that class's forward)?"""
    func = site.call.func
    if family is None or site.function is None or not (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return False
    from dslint.program.models.modules import model_facts
    facts = model_facts(project)
    owner = _owner_class(facts, src, site.function)
    if owner is None:
        return False
    ctors = {a.ctor for c in owner.mro() for a in c.attrs.values() if a.name == func.attr.value and a.ctor}
    return bool(ctors) and all(c in facts.by_name and c not in family for c in ctors)


def _owner_class(facts, src: "PythonSource", fn: cst.FunctionDef):
    """The module class of the run one of whose methods is `fn`."""
    for c in facts.classes:
        if c.src is src and any(c.info.methods[m].node is fn for m in c.methods if m in c.info.methods):
            return c
    return None


def _decide(project: "ProjectView", keyword: str, position: Optional[int], family: Optional[frozenset], depth: int,
            seen: set, kind: str = PRESENT) -> bool:
    if depth > MAX_DEPTH or _unpacks_mappings(project):
        return False
    seen = seen | {(keyword, position, family)}
    sites: list[tuple["PythonSource", _Site]] = []
    for src in project.mentioning(f"{keyword}=", f"'{keyword}'", f'"{keyword}"'):
        found = _keyword_calls(src, keyword)
        if found is None:
            return False
        sites.extend((src, site) for site in found)
    if position is not None:
        for src, site in _object_calls(project, position):
            if site.no_grad or not _callee_may_be_a_model(project, src, site.call) or \
                    _another_class(project, src, site, family):
                continue
            args = site.call.args
            # the explicit arguments before any unpacking (`model(ids, mask, *mems)`): an unpacked sequence is
            # not followed (see the module's docstring)
            before_star = next((i for i, a in enumerate(args) if a.star == "*"), None)
            positional = [a for a in args[:before_star] if a.keyword is None and not a.star]
            if len(positional) > position:
                sites.append((src, _Site(site.call, positional[position].value, site.function, site.tests,
                                         site.no_grad)))
    decided = False
    for src, site in sites:
        if site.no_grad or not _callee_may_be_a_model(project, src, site.call) or \
                _another_class(project, src, site, family) or _untrained_caller(project, src, site, family):
            continue                # a call under `torch.no_grad()` produces no gradient on any rank
        decided = True
        if not all(_setting_test(project, src, site.function, t) for t in site.tests):
            return False
        handed_on = _value_present(site.function, site.value) if kind == PRESENT else \
            _value_uniform(project, src, site.function, site.value)
        if handed_on is False:
            return False
        if isinstance(handed_on, tuple):
            from dslint.program.models.modules import model_facts
            facts = model_facts(project)
            owner = _owner_class(facts, src, site.function) if site.function is not None else None
            wrapper = family_of(facts, owner) if owner is not None else None
            # the same input of the same class already being decided (a wrapper handing it on to itself)
            if (*handed_on, wrapper) not in seen and \
                    not _decide(project, handed_on[0], handed_on[1], wrapper, depth + 1, seen, kind):
                return False
    # no call hands the input over: it keeps its default on every call -- when the run builds the class (a model
    # file checked alone is called by code that is not checked) and every call of a model is seen
    return decided or (kind == VALUE and family is not None and _built_in_run(project, family) and
                       _closed_world(project) and _called_in_run(project, family))


def _trained(project: "ProjectView", facts, cls) -> bool:
    from dslint.program.models.trained_chain import trained_chain
    cache = memo(project, "keyword-presence.trained", dict)
    if id(cls) not in cache:
        cache[id(cls)] = trained_chain(project, facts, cls) is not None
    return cache[id(cls)]


def _untrained_caller(project: "ProjectView", src: "PythonSource", site: "_Site", family: Optional[frozenset]
                      ) -> bool:
    """Issue 30 items 5/6: is the site a method of a module class that no chain hands to a training call
    (`trained_chain`: a feature extractor's `forward` calling the shared text encoder with `mode="text"` under
    its own `mode` test), while the class whose input is decided is trained? Such a caller runs in no training
    step: its call decides nothing about what the trained model's callers pass."""
    if family is None or site.function is None:
        return False
    from dslint.program.models.modules import model_facts
    facts = model_facts(project)
    owner = _owner_class(facts, src, site.function)
    if owner is None or owner.name in family or _trained(project, facts, owner):
        return False
    return any(_trained(project, facts, c) for name in sorted(family) for c in facts.by_name.get(name, []))


def _built_in_run(project: "ProjectView", family: frozenset) -> bool:
    """Does a call of the run construct a class of `family` (resolved to a checked class of that name)?"""
    from dslint.program.models.modules import constructor_calls
    cache = memo(project, "keyword-presence.built-in-run", dict)
    if family not in cache:
        cache[family] = any(
            callee.rsplit(".", 1)[-1] in family and (found := project.class_for_callee(src, callee)) is not None
            and found[1].rsplit(".", 1)[-1] in family for src, callee, _ in constructor_calls(project))
    return cache[family]


def _called_in_run(project: "ProjectView", family: frozenset) -> bool:
    """Is a call of the model seen -- an object built from a class of `family` (a subclass, a holder), or the
    engine or wrapper it is handed to, called in the run's files (`trained_chain.model_call`)? A closed world
    says every call of the model is seen; with none seen at all (an evaluation model no checked file runs, one
    called by a registry's or a library's code) nothing shows what the callers pass."""
    from dslint.program.models.modules import model_facts
    from dslint.program.models.trained_chain import model_call
    cache = memo(project, "keyword-presence.called-in-run", dict)
    if family not in cache:
        facts = model_facts(project)
        classes = [c for name in sorted(family) for c in facts.by_name.get(name, [])]
        cache[family] = any(model_call(project, facts, c) is not None for c in classes)
    return cache[family]


def _closed_world(project: "ProjectView") -> bool:
    """Are the run's calls of its models all in the checked files, with their arguments spelled out? Not when a
    call of an object unpacks a mapping or a sequence that is not the calling function's own (`model(**batch)`,
    `model(*inputs)`: `_unpacks_mappings`), nor when the run builds a library trainer (a transformers/TRL
    `...Trainer`, or a class of the run derived from one), whose training step calls the model with the batch's
    own keys from code that is not checked."""
    def build() -> bool:
        for src in project.mentioning("Trainer"):
            outline = src.outline
            if outline is None:
                return False
            names = [c for c, _ in outline.calls if c] + [b for c in outline.classes.values() for b in c.bases if b]
            if any(n.startswith(("transformers.", "trl.")) and n.rsplit(".", 1)[-1].endswith("Trainer")
                   for n in names):
                return False
        return True
    return not _unpacks_mappings(project) and not _unpacks_sequences(project) and \
        memo(project, "keyword-presence.closed-world", build)


def _object_calls(project: "ProjectView", position: int) -> list:
    """Every call of an object in the run that passes more than `position` positional arguments (`model(ids,
    mask)`, `self.enc(x)`, `model(*inputs)`), with its function and tests: where an input handed over
    positionally comes from."""
    def build():
        out = []
        for src in project.python:
            out.extend((src, site) for site in _keyword_calls(src, None) or ())
        # by the number of explicit positional arguments (an unpacked sequence counts as many as any position)
        return sorted(((_positional_count(site.call), src, site) for src, site in out), key=lambda t: t[0])
    calls = memo(project, "keyword-presence.object-calls", build)
    return [(src, site) for count, src, site in calls if count > position]


def _positional_count(call: cst.Call) -> int:
    if any(a.star == "*" for a in call.args):
        return 1 << 30
    return sum(1 for a in call.args if a.keyword is None and not a.star)


class _Site:
    def __init__(self, call: cst.Call, value: Optional[cst.BaseExpression], function: Optional[cst.FunctionDef],
                 tests: list, no_grad: bool = False) -> None:
        self.call, self.value, self.function, self.tests, self.no_grad = call, value, function, tests, no_grad


def _keyword_calls(src: "PythonSource", keyword: Optional[str]) -> Optional[list[_Site]]:
    """`_KeywordCalls(keyword)`'s sites in `src` (None: the file has no tree), memoised on the source: a function
    of its text alone, asked again by every view the file is in (read only: the sites are shared)."""
    memo = src.__dict__.setdefault("_dslint_keyword_calls", {})
    if keyword not in memo:
        finder = visited(src, _KeywordCalls(keyword))
        memo[keyword] = None if finder is None else finder.sites
    return memo[keyword]


class _KeywordCalls(cst.CSTVisitor):
    """Calls passing `keyword=` (None: calls of an object passing positional arguments), with their enclosing
    function, the tests deciding whether they run there (the enclosing `if`s' tests, a conditional expression's;
    a loop's iterable decides how often, not which call) and whether they run under `torch.no_grad()`."""

    def __init__(self, keyword: Optional[str]) -> None:
        self.keyword = keyword
        self.sites: list[_Site] = []
        self.functions: list[cst.FunctionDef] = []
        self.tests: list[list] = [[]]
        self.no_grad = 0
        self.constructors: list[Optional[str]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)
        self.tests.append([])
        self.no_grad += any(_is_no_grad(d.decorator) for d in node.decorators)
        self.constructors.append(_class_parameter(node))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()
        self.tests.pop()
        self.no_grad -= any(_is_no_grad(d.decorator) for d in node.decorators)
        self.constructors.pop()

    def visit_With(self, node: cst.With) -> bool:
        for item in node.items:
            cst_visit(item.item, self)
        inside = any(_is_no_grad(item.item) for item in node.items)
        self.no_grad += inside
        cst_visit(node.body, self)
        self.no_grad -= inside
        return False

    def visit_If(self, node: cst.If) -> bool:
        cst_visit(node.test, self)
        self.tests[-1].append(node.test)
        cst_visit(node.body, self)
        if node.orelse is not None:
            cst_visit(node.orelse, self)
        self.tests[-1].pop()
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        cst_visit(node.test, self)
        self.tests[-1].append(node.test)
        cst_visit(node.body, self)
        cst_visit(node.orelse, self)
        self.tests[-1].pop()
        return False

    def visit_While(self, node: cst.While) -> None:
        self.tests[-1].append(node.test)

    def leave_While(self, node: cst.While) -> None:
        self.tests[-1].pop()

    def visit_Call(self, node: cst.Call) -> None:
        fn = self.functions[-1] if self.functions else None
        if isinstance(node.func, cst.Name) and self.constructors and node.func.value == self.constructors[-1]:
            return                  # `cls(config, *inputs)` in a classmethod: the class's constructor
        if self.keyword is None:
            if _model_call_form(node.func) and any(a.keyword is None for a in node.args):
                self.sites.append(_Site(node, None, fn, list(self.tests[-1]), bool(self.no_grad)))
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == self.keyword:
                self.sites.append(_Site(node, arg.value, fn, list(self.tests[-1]), bool(self.no_grad)))
            elif arg.star == "**" and _model_call_form(node.func):
                # a local dict of literal keys unpacked into the call: its entries are keywords (`_literal_keys`)
                values = (_literal_keys(fn, arg.value) or {}).get(self.keyword)
                if values:
                    # the entry's value and the tests under which it is stored, beside the call's own
                    value, stored_under = values[0] if len(values) == 1 else (cst.Name("__several__"), [])
                    self.sites.append(_Site(node, value, fn, [*self.tests[-1], *stored_under], bool(self.no_grad)))


def _model_call_form(func: cst.BaseExpression) -> bool:
    """`model(...)` or `self.model(...)`: the call of an object, as a model is called."""
    if isinstance(func, cst.Name):
        return True
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _callee_may_be_a_model(project: "ProjectView", src: "PythonSource", call: cst.Call) -> bool:
    """A call of an object (`model(...)`, `self.model(...)`) that resolves to no function of the checked files
    (`self.helper(...)` of a method, `build(...)` of a module function): it may be the model's forward."""
    func = call.func
    if not _model_call_form(func):
        return False
    outline = src.outline
    if outline is None:
        return True
    if isinstance(func, cst.Name):
        if func.value in _BUILTINS:
            return False            # `print(...)`, `len(...)`: the language's functions
        callee = outline.resolve(func.value)
        if callee != func.value:
            return False            # an imported function or class (`from torch import cat`), not an instance
        return project.find_function_source(callee, near=src) is None and project.class_for_callee(src, callee) is None
    # `self.x(...)`: a method of the enclosing class family is no model call
    name = func.attr.value
    return not any(q.rsplit(".", 1)[-1] == name for q in getattr(src.facts, "functions", {}))


def _unpacks_mappings(project: "ProjectView") -> bool:
    """Does a call of an object in the run (`model(**batch)`, `self.model(**kwargs)`; not a function or class of
    the checked files, `make_scaler(**cfg)`) unpack a mapping into keywords? Then any input may arrive through the
    mapping. Not a local dict of literal keys (`kw = {"mask": m}; kw["cache"] = c; layer(x, **kw)`): its keys are
    keywords the call passes, seen as such (`_keyword_calls`)."""
    return _unpacks(project, "**")


def _unpacks_sequences(project: "ProjectView") -> bool:
    """Does a call of an object in the run unpack a sequence into positions (`model(*inputs)`), other than the
    calling function's own `*args`? Then any position may be filled."""
    return _unpacks(project, "*")


def _unpacks(project: "ProjectView", star: str) -> bool:
    def build() -> bool:
        for src in project.mentioning("(" + star, ", " + star):
            try:
                module = src.module
            except Exception:
                return True
            if module is None:
                return True
            finder = _Unpacks(star)
            cst_visit(module, finder)
            if any(_callee_may_be_a_model(project, src, call) and not _library_field(project, src, fn, call)
                   for call, fn in finder.calls):
                return True
        return False
    return memo(project, f"keyword-presence.unpacks{star}", build)


class _Unpacks(cst.CSTVisitor):
    """Calls of an object unpacking a mapping (`star` "**") or a sequence ("*"); not `cls(...)` in a classmethod
    (the class's constructor), nor an unpacking of the enclosing function's own `**kwargs` / `*args` (a wrapper's
    `forward(self, *a, **kwargs): return self.module(*a, **kwargs)` hands on what its callers pass, which is seen
    at those calls), nor of a local dict of literal keys (`_literal_keys`)."""

    def __init__(self, star: str = "**") -> None:
        self.star = star
        self.calls: list[tuple[cst.Call, Optional[cst.FunctionDef]]] = []
        self.constructors: list[Optional[str]] = []
        self.own: list[Optional[str]] = []
        self.functions: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.constructors.append(_class_parameter(node))
        star = node.params.star_kwarg if self.star == "**" else node.params.star_arg
        self.own.append(star.name.value if isinstance(star, cst.Param) else None)
        self.functions.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.constructors.pop()
        self.own.pop()
        self.functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and self.constructors and node.func.value == self.constructors[-1]:
            return
        own = self.own[-1] if self.own else None
        fn = self.functions[-1] if self.functions else None
        if _model_call_form(node.func) and any(
                a.star == self.star and not (isinstance(a.value, cst.Name) and a.value.value == own) and
                not (self.star == "**" and _literal_keys(fn, a.value) is not None) for a in node.args):
            self.calls.append((node, fn))


def _library_field(project: "ProjectView", src: "PythonSource", fn: Optional[cst.FunctionDef], call: cst.Call
                   ) -> bool:
    """Is the call's object `self.X` a field that the enclosing class never stores and inherits from a base that
    is no checked class (a transformers `Pipeline`'s `self.model(**model_inputs)`)? The library's own code fills it
    and calls it; the run's code never binds it."""
    func = call.func
    if fn is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and
                          func.value.value == "self"):
        return False
    info = next((c for c in src.facts.classes.values() if any(m.node is fn for m in c.methods.values())), None)
    if info is None or not info.bases:
        return False
    if any(project.class_for_callee(src, b) is not None for b in info.bases):
        return False

    stores = _FieldStores(func.attr.value)
    cst_visit(info.node, stores)
    return not stores.found


class _FieldStores(cst.CSTVisitor):
    """Does a class store `self.<attr>` anywhere (`self.model = ...`, `self.model, self.key = ...`)?"""

    def __init__(self, attr: str) -> None:
        self.attr = attr
        self.found = False

    def _target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._target(el.value)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and \
                target.value.value == "self" and target.attr.value == self.attr:
            self.found = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)


def _literal_keys(fn: Optional[cst.FunctionDef], value: cst.BaseExpression) -> Optional[dict]:
    """key -> the (value, enclosing tests) stored under it, for a local of `fn` that is only ever a dict of literal keys: bound to a
    display with string keys (`{"mask": m}`, `{}`) or `dict(mask=m)`, filled by stores under literal keys (`kw["k"]
    = v`), otherwise only unpacked into calls (`**kw`) or read. None for anything else (a parameter, a dict handed
    to a function or updated from another mapping: its keys are not all spelled)."""
    if fn is None or not isinstance(value, cst.Name):
        return None
    name = value.value
    params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    if name in params:
        return None
    finder = _DictKeys(name, fn)
    cst_visit(fn, finder)
    return finder.keys if finder.ok and finder.bound else None


class _DictKeys(cst.CSTVisitor):
    def __init__(self, name: str, fn: cst.FunctionDef) -> None:
        self.name, self.fn = name, fn
        self.keys: dict[str, list] = {}
        self.ok, self.bound = True, False
        self._allowed: set[int] = set()
        self._tests: list = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.fn

    def visit_If(self, node: cst.If) -> None:
        self._tests.append(node.test)

    def leave_If(self, node: cst.If) -> None:
        self._tests.pop()

    def visit_While(self, node: cst.While) -> None:
        self._tests.append(node.test)

    def leave_While(self, node: cst.While) -> None:
        self._tests.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Name) and target.value == self.name:
                self._allowed.add(id(target))
                self.bound = True
                self._display(node.value)
            elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and \
                    target.value.value == self.name:
                self._allowed.add(id(target.value))
                key = _string_key(target)
                if key is None:
                    self.ok = False
                else:
                    self.keys.setdefault(key, []).append((node.value, list(self._tests)))

    def _display(self, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Dict):
            for el in value.elements:
                if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
                    self.ok = False
                    return
                self.keys.setdefault(el.key.evaluated_value, []).append((el.value, list(self._tests)))
        elif isinstance(value, cst.Call) and dotted_name(value.func) == "dict" and \
                all(a.keyword is not None for a in value.args):
            for a in value.args:
                self.keys.setdefault(a.keyword.value, []).append((a.value, list(self._tests)))
        else:
            self.ok = False

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.star == "**" and isinstance(node.value, cst.Name) and node.value.value == self.name:
            self._allowed.add(id(node.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == self.name:
            self._allowed.add(id(node.value))           # a read of one entry

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._allowed:
            self.ok = False         # handed on, updated, returned: its keys may change where they are not spelled


def _string_key(target: cst.Subscript) -> Optional[str]:
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    key = target.slice[0].slice.value
    return key.evaluated_value if isinstance(key, cst.SimpleString) else None


def _is_no_grad(expr: cst.BaseExpression) -> bool:
    """`torch.no_grad()` / `torch.inference_mode()` (a decorator, with or without the call, or a `with` item), as
    the forward-path analysis reads it: torch records no gradient under it."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    name = dotted_name(expr) or ""
    return name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode") and (name.startswith("torch.") or "." not in name)


def _class_parameter(fn: cst.FunctionDef) -> Optional[str]:
    """The first parameter of a classmethod (`cls`): calling it constructs the class."""
    first = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)][:1]
    classmethod = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod"
                      for d in fn.decorators)
    return first[0] if first and classmethod else None


def _setting_test(project: "ProjectView", src: "PythonSource", fn: Optional[cst.FunctionDef],
                  test: cst.BaseExpression) -> bool:
    """A test of run settings only: its shape (attribute reads, literals, comparisons, boolean operators) and the
    rank-uniformity lattice's answer (the same on every rank)."""
    if not _setting_shape(test):
        return False
    from dslint.program.rank.lattice import Uniform, uniformity
    scope = None
    if fn is not None:
        scope = next((name for name, info in src.facts.functions.items() if info.node is fn), None)
    try:
        return isinstance(uniformity(project, src, test, scope), Uniform)
    except RecursionError:
        return False


def _setting_shape(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _setting_shape(node.expression)
    if isinstance(node, cst.BooleanOperation):
        return _setting_shape(node.left) and _setting_shape(node.right)
    if isinstance(node, cst.Comparison):
        return _setting_shape(node.left) and all(_setting_shape(c.comparator) for c in node.comparisons)
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return all(_setting_shape(e.value) for e in node.elements)
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, cst.Attribute):
        inner = node.value
        while isinstance(inner, cst.Attribute):
            inner = inner.value
        return isinstance(inner, cst.Name)      # `args.flag`, `self.cfg.use_x`: a field of a settings object
    return False


def _subscript_read(node: cst.BaseExpression) -> bool:
    """`d["k"]` by a literal key, possibly through attributes or method calls of it (`d["k"].long().cuda()`), never
    `.get(...)` (a lookup with a default, None when absent)."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value == "get":
                return False
            node = node.func.value
        elif isinstance(node, cst.Attribute):
            node = node.value
        else:
            break
    return isinstance(node, cst.Subscript) and len(node.slice) == 1 and \
        isinstance(node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.SimpleString)


def _value_present(fn: Optional[cst.FunctionDef], value: cst.BaseExpression):
    """True: the value is there whenever the call runs (a batch field read by its literal key, or a local assigned
    only from such reads); (a parameter's name, its position after the receiver or None when keyword-only): the
    function hands on its own input (assigned, if at all, only from expressions of itself), which its callers
    decide; False otherwise."""
    if _subscript_read(value):
        return True
    if not isinstance(value, cst.Name) or fn is None:
        return False
    name = value.value
    params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    assigned = _assignments(fn, name)
    if name in params:
        if not all(_reads(v) <= {name} for v in assigned):
            return False
        positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
        if positional and positional[0] in ("self", "cls"):
            positional = positional[1:]
        return name, (positional.index(name) if name in positional else None)
    return bool(assigned) and all(_subscript_read(v) for v in assigned)


def _value_uniform(project: "ProjectView", src: "PythonSource", fn: Optional[cst.FunctionDef],
                   value: cst.BaseExpression):
    """True: the value is the same on every rank whenever the call runs -- a literal (one per call site, `mode=
    "text"`), or a run setting the rank-uniformity lattice finds uniform (`args.mode`, `self.cfg.mode`); (a
    parameter's name, its position): the function hands on its own input, which its callers decide -- an option
    parameter too (`mode="multimodal"` as its default: its own callers may pass data); False otherwise (a batch
    field, a value computed from the data)."""
    if _literal(value) or _module_literal(src, fn, value):
        return True
    if isinstance(value, cst.Name) and fn is not None:
        handed_on = _value_present(fn, value)
        if isinstance(handed_on, tuple):
            return handed_on
    return _setting_test(project, src, fn, value)


def _module_literal(src: "PythonSource", fn: Optional[cst.FunctionDef], value: cst.BaseExpression) -> bool:
    """A name the calling function neither takes nor binds that its file binds once, at module level, to a literal
    (`MODE_HYPER = "hyper"`, then `mode=MODE_HYPER`): a constant, the same on every rank."""
    if not isinstance(value, cst.Name) or value.value in ("None", "True", "False"):
        return False
    name = value.value
    if fn is not None:
        params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        if name in params or _assignments(fn, name):
            return False
    if re.search(r"\bglobal\b[^\n]*\b%s\b" % re.escape(name), src.text):
        return False                # rebound from a function
    values = module_assignments(src, name)
    return len(values) == 1 and _literal(values[0])


def _literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(not isinstance(e, cst.StarredElement) and _literal(e.value) for e in node.elements)
    return False


def _assignments(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    out: list = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    out.append(node.value)
                elif isinstance(t.target, (cst.Tuple, cst.List)):
                    for i, e in enumerate(t.target.elements):
                        if not (isinstance(e.value, cst.Name) and e.value.value == name):
                            continue
                        # `a, b = d["a"], d["b"]`: element-wise; any other unpacking is opaque
                        pair = isinstance(node.value, (cst.Tuple, cst.List)) and \
                            len(node.value.elements) == len(t.target.elements) and \
                            not any(isinstance(x, (cst.StarredElement,)) for x in
                                    (*node.value.elements, *t.target.elements))
                        out.append(node.value.elements[i].value if pair else cst.Name("__unpacked__"))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                out.append(cst.Name("__augmented__"))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Assigns())
    return out
