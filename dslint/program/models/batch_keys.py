"""Whether a batch field's presence is decided by the configuration: the writes of a dict key across the run.

DSL303 asks it of a presence test in forward (`if depth is not None`, `"depth" in batch`, `batch.get("depth")`):
the field `depth` is there or not according to whoever builds the batch. Every write of the key the run's files
show -- `d["depth"] = v`, `{"depth": v}`, `dict(depth=v)`, `d.setdefault("depth", v)` -- is found with the tests
that decide whether it runs (the enclosing `if`/`while` tests, the iterables of enclosing loops and
comprehensions, a conditional expression's test). A test that reads only values fixed for the run -- `self.`
attributes (a collator's or dataset's settings, a model's configured sensors), module-level names, literals --
decides alike for every batch: the collator always or never sets the key for a given configuration. A test that
reads a local value or a parameter of its function (the items being collated, a sample's index, an argument the
caller passes per sample) may decide differently from batch to batch, and so may the value written: a key always
written with a value the function makes None on some calls (`images = None`, then `images = stack(...)` under a
test of the items; `x if items else None`) gives the model no input on those batches. The field's presence is
uniform when at least one write is found and every write is unconditional or decided by such settings; no write
found (the caller builds the batch outside the checked files, or from a configured list of keys) leaves it to the
model's own construction (`key_presence`: DSL303 then asks whether the model builds the sub-module for that key
only when the key is one of its configured inputs).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.hyperparams import memo
from dslint.sources.cstwalk import visit as cst_visit

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource


FIXED, VARIES, UNSEEN = "fixed", "varies", "unseen"


def presence_fixed_by_config(project: "ProjectView", key: str) -> bool:
    """Is every write of dict key `key` in the run's files unconditional or decided by run-fixed settings (and
    is there one)?"""
    return key_presence(project, key) == FIXED


def key_presence(project: "ProjectView", key: str) -> str:
    """FIXED: every write of dict key `key` in the run's files is unconditional or decided by run-fixed settings
    (and there is one); VARIES: a write is decided per batch (or sits in a file that cannot be read); UNSEEN: the
    run's files write the key nowhere with a literal key. Memoised per view and key."""
    cache = memo(project, "batch-key-presence", dict)
    if key not in cache:
        cache[key] = _decide(project, key)
    return cache[key]


def _decide(project: "ProjectView", key: str) -> str:
    words = (f'"{key}"', f"'{key}'", f"{key}=")
    quoted = f"[\"']{re.escape(key)}[\"']"
    # a file is parsed only when its text may hold a write of the key: `["key"] =` (or `]: T =`), `"key":`,
    # `setdefault("key"`, `dict(... key=`
    may_write = re.compile(rf"{quoted}\s*\]\s*(?:=[^=]|:)|{quoted}\s*:|setdefault\(\s*{quoted}|"
                           rf"\bdict\((?:[^()]|\([^()]*\))*\b{re.escape(key)}\s*=[^=]")
    found = False
    for src in project.mentioning(*words):
        if not may_write.search(src.text):
            continue
        writes = _writes(src, key)
        if writes is None:
            return VARIES       # the file could not be read: a write there is not known to be config-decided
        for fixed in writes:
            if fixed is None:
                continue        # a copy of the key from another mapping: its presence is that mapping's
            if not fixed:
                return VARIES
            found = True
    return FIXED if found else UNSEEN


def _writes(src: "PythonSource", key: str):
    finder = visited(src, _KeyWrites(key))
    return None if finder is None else finder.writes


def visited(src: "PythonSource", visitor):
    """`visitor` after it walked `src`'s module; None when the file has no tree (it does not parse)."""
    try:
        module = src.module
    except Exception:
        return None
    if module is None:
        return None
    cst_visit(module, visitor)
    return visitor


def _bound_names(fn: cst.FunctionDef) -> set[str]:
    """The function's parameters and every name it binds (assignments, loop targets, `with ... as`, walrus,
    comprehension targets), nested functions excluded."""
    names = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    for star in (fn.params.star_arg, fn.params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)

    class Binds(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            pass

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            names.update(_targets(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            names.update(_targets(node.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            names.update(_targets(node.target))

        def visit_For(self, node: cst.For) -> None:
            names.update(_targets(node.target))

        def visit_CompFor(self, node: cst.CompFor) -> None:
            names.update(_targets(node.target))

        def visit_AsName(self, node: cst.AsName) -> None:
            names.update(_targets(node.name))

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            names.update(_targets(node.target))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Binds())
    return names


def _targets(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Name):
        return {node.value}
    if isinstance(node, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for e in node.elements:
            out |= _targets(e.value)
        return out
    if isinstance(node, cst.StarredElement):
        return _targets(node.value)
    return set()


def _reads(node: cst.CSTNode) -> set[str]:
    """Variables an expression reads (not attribute names, not keyword names)."""
    out: set[str] = set()

    class Reads(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            cst_visit(n.value, self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            cst_visit(n.value, self)
            return False

    cst_visit(node, Reads())
    return out


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _bindings(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    """The values `fn` assigns to the local `name` (nested functions excluded)."""
    out: list[cst.BaseExpression] = []

    class Binds(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                out.append(node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None and isinstance(node.target, cst.Name) and node.target.value == name:
                out.append(node.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Binds())
    return out


def _gradient_free(node: cst.BaseExpression) -> bool:
    """`torch.no_grad()` / `torch.inference_mode()` (or the bare names imported from torch): a block whose
    forwards make no gradient."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    parts: list[str] = []
    while isinstance(func, cst.Attribute):
        parts.append(func.attr.value)
        func = func.value
    if not isinstance(func, cst.Name):
        return False
    parts.append(func.value)
    dotted = ".".join(reversed(parts))
    return dotted in ("torch.no_grad", "torch.inference_mode", "no_grad", "inference_mode") and \
        not (dotted.endswith("inference_mode") and node.args and not _is_true(node.args[0].value))


def _is_true(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _binding_names(fn: cst.FunctionDef, name: str) -> set[int]:
    """ids of the `Name` nodes through which `fn` binds `name` by assignment (plain or unpacking)."""
    out: set[int] = set()

    def collect(target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name) and target.value == name:
            out.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                collect(e.value)
        elif isinstance(target, cst.StarredElement):
            collect(target.value)

    class Binds(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            collect(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                collect(node.target)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    cst_visit(fn, Binds())
    return out


def _string_is(node: cst.CSTNode, key: str) -> bool:
    return isinstance(node, cst.SimpleString) and node.evaluated_value == key


class _KeyWrites(cst.CSTVisitor):
    """Each write of the key, as whether the tests deciding it read only run-fixed values (None: a copy of the key
    from the mapping an enclosing loop walks, `_dispatch`)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.writes: list[Optional[bool]] = []
        self.tests: list[cst.CSTNode] = []          # the expressions deciding whether the current node runs
        self.locals: list[set[str]] = []            # the names each enclosing function binds
        self.functions: list[cst.FunctionDef] = []  # the enclosing functions
        self.loop_vars: list[set[str]] = []         # the targets of the enclosing `for` loops
        # ids of the tests that decide how many times a body runs, not which of two bodies does (a `for`'s or a
        # comprehension's iterable and filters, a `while`'s test)
        self.repeats: set[int] = set()
        self.no_grad: list[Optional[cst.With]] = []     # the enclosing gradient-free `with` blocks (None: a function)

    # --- scopes and the tests that decide what runs -------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.locals.append(_bound_names(node))
        self.functions.append(node)
        self.tests.append(None)     # a function's body runs when it is called: the caller's tests are not seen
        self.no_grad.append(None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.locals.pop()
        self.functions.pop()
        self.tests.pop()
        self.no_grad.pop()

    def visit_With(self, node: cst.With) -> None:
        if any(_gradient_free(item.item) for item in node.items):
            self.no_grad.append(node)

    def leave_With(self, node: cst.With) -> None:
        if self.no_grad and self.no_grad[-1] is node:
            self.no_grad.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_If(self, node: cst.If) -> None:
        self.tests.append(node.test)

    def leave_If(self, node: cst.If) -> None:
        self.tests.pop()

    def visit_While(self, node: cst.While) -> None:
        self.tests.append(node.test)
        self.repeats.add(id(node.test))

    def leave_While(self, node: cst.While) -> None:
        self.tests.pop()

    def visit_For(self, node: cst.For) -> None:
        self.tests.append(node.iter)
        self.repeats.add(id(node.iter))
        self.loop_vars.append(_targets(node.target))

    def leave_For(self, node: cst.For) -> None:
        self.tests.pop()
        self.loop_vars.pop()

    def _dispatch(self, test: cst.CSTNode) -> bool:
        """`sensor == "K"` on the variable of an enclosing loop over keys (`for sensor in sample.keys(): if sensor
        == "K": out["K"] = ...`): the write copies the key from the mapping the loop walks -- present exactly when
        it is there, which this write does not decide."""
        loop = set().union(*self.loop_vars) if self.loop_vars else set()
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                and isinstance(test.comparisons[0].operator, cst.Equal)):
            return False
        sides = (test.left, test.comparisons[0].comparator)
        return any(isinstance(a, cst.Name) and a.value in loop and _string_is(b, self.key)
                   for a, b in (sides, sides[::-1]))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.tests.append(node.test)

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self.tests.pop()

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.tests.append(node.iter)
        self.tests.extend(i.test for i in node.ifs)
        self.repeats.add(id(node.iter))
        self.repeats.update(id(i.test) for i in node.ifs)

    def leave_CompFor(self, node: cst.CompFor) -> None:
        for _ in range(1 + len(node.ifs)):
            self.tests.pop()

    # --- the writes -----------------------------------------------------------------------------------
    def _subscript_key(self, target: cst.CSTNode) -> bool:
        return isinstance(target, cst.Subscript) and len(target.slice) == 1 and \
            isinstance(target.slice[0].slice, cst.Index) and _string_is(target.slice[0].slice.value, self.key)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self._subscript_key(t.target) for t in node.targets):
            if any(self._confined_without_gradient(t.target) for t in node.targets if self._subscript_key(t.target)):
                self.writes.append(None)
                return
            self._record(value=node.value)

    def _confined_without_gradient(self, target: cst.Subscript) -> bool:
        """Is the write a store into a mapping the function makes itself (a local bound by assignment, not a
        parameter) inside a gradient-free block (`with torch.no_grad():` / `torch.inference_mode()`), and does the
        function read that local only inside the block (after binding it)? Then the mapping feeds only forwards
        that make no gradient (a generation path filling a cached input, VisCPM's `vision_hidden_states`): the
        key's presence there decides no training step's reduction, and the write is no evidence about the
        batches that train."""
        # the outermost gradient-free block of the enclosing function (none across a function boundary)
        starts = [i for i, b in enumerate(self.no_grad) if b is None]
        blocks = self.no_grad[starts[-1] + 1:] if starts else []
        if not blocks or not (isinstance(target.value, cst.Name) and self.functions):
            return False
        block = blocks[0]
        name, fn = target.value.value, self.functions[-1]
        params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        params |= {st.name.value for st in (fn.params.star_arg, fn.params.star_kwarg) if isinstance(st, cst.Param)}
        if name in params or not _binding_names(fn, name):
            return False
        inside: set[int] = set()

        class Inside(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                inside.add(id(n))

        cst_visit(block, Inside())
        bound = _binding_names(fn, name)

        class Outside(cst.CSTVisitor):
            escapes = False

            def visit_Name(self, n: cst.Name) -> None:
                if n.value == name and id(n) not in inside and id(n) not in bound:
                    Outside.escapes = True      # read outside the block (also by a nested function)

        cst_visit(fn.body, Outside())
        return not Outside.escapes

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._subscript_key(node.target):
            self._record(value=node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if _string_is(node.key, self.key):
            self._record(builds=True, value=node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value == "dict":
            arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == self.key), None)
            if arg is not None:
                self._record(builds=True, value=arg.value)
        elif isinstance(func, cst.Attribute) and func.attr.value == "setdefault" and node.args and \
                _string_is(node.args[0].value, self.key):
            self._record(value=node.args[1].value if len(node.args) > 1 else None)

    def _none_per_call(self, value: Optional[cst.BaseExpression]) -> bool:
        """Is the value written None on some calls and not on others, by the function's own state -- a
        conditional expression with a None arm whose test reads the function's values (`x if items else None`),
        or a local bound both to None and to something else (`images = None` then `if any(...): images =
        stack(...)`)? The key is then always there, the input it gives the model (`images is not None`) is not:
        a presence the batch decides."""
        local = self.locals[-1] if self.locals else set()
        if isinstance(value, cst.IfExp):
            none_arm = _is_none(value.body) or _is_none(value.orelse)
            return none_arm and bool((_reads(value.test) - {"self", "cls"}) & local)
        if not (isinstance(value, cst.Name) and value.value in local and self.functions):
            return False
        bound = _bindings(self.functions[-1], value.value)
        return any(_is_none(v) or isinstance(v, cst.IfExp) and (_is_none(v.body) or _is_none(v.orelse))
                   for v in bound) and len(bound) > 1

    def _record(self, builds: bool = False, value: Optional[cst.BaseExpression] = None) -> None:
        """`builds`: the write is part of the mapping's construction (`{"k": v}`, `dict(k=v)`): every mapping
        it makes has the key, so an enclosing loop (`for s in samples: out.append({"text": s})`) decides only how
        many such mappings there are -- a loop that does not run makes none, not one without the key. An
        enclosing `if` still decides (its other arm may build the mapping without the key), as does a loop
        around a store into a mapping made before it (`for s in extra: batch["k"] = s`: an empty `extra`
        leaves `batch` without the key)."""
        local = self.locals[-1] if self.locals else set()
        if any(self._dispatch(test) for test in self.tests if test is not None):
            self.writes.append(None)
            return
        fixed = not self._none_per_call(value)
        for test in reversed(self.tests):
            if test is None:
                break               # the enclosing function's own body starts here
            if builds and id(test) in self.repeats:
                continue
            if (_reads(test) - {"self", "cls"}) & local:
                fixed = False
                break
        self.writes.append(fixed)
