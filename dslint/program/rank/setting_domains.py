"""The values a uniform setting can take (`self.env_type` in {"deepspeed", "pytorch", ...}): value domains for
the path feasibility of `if` chains over them.

A class that validates a setting when it stores it (`self.mode = mode; if mode not in ("a", "b"): raise ...`,
or `assert mode in MODES` with a literal collection, or a literal assigned) gives the attribute a finite
domain. A method's *entry* domain narrows it by the tests its callers in the class family run around the call
(`if self.mode == "a": self.step_a() / else: self.step_b()`: `step_b` runs with `mode` in the rest). An `if`
/ `elif` chain without `else` whose tests cover every value of the entry domain has no fall-through path: a
name the chain binds on every branch (`dist.all_reduce(loss)` in each configuration's branch) is what the
branches made it, not also what it was before the chain (`FlowWalk.if_stmt`).

Only literal collections and comparisons with literals are read (`==`, `!=`, `in`, `not in`, `"s" in X` of a
string); any other test leaves the domain as it is. A setting assigned anywhere without such a validation has
no domain. Subclasses that assign the attribute differently are not looked for (the class family is the class
and its bases, `ProjectTaint._class_family`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Protocol, Sequence

import libcst as cst

from dslint.program.facts import FunctionInfo, dotted_name
from dslint.program.statement_walks import code_of, contains, iter_assigns
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.sources import PythonSource


class CallGraph(Protocol):
    """What the domains ask of the project level (`dslint.program.rank.function_summaries.ProjectTaint`): declared here, so
    that this module, which the statement walk below the project level uses, does not import it."""

    def _class_family(self, src: "PythonSource", cls: str) -> Iterable[tuple["PythonSource", str]]: ...

    def count_calls_named(self, name: str) -> int: ...

    def _calls_of(self, src: "PythonSource", info: FunctionInfo) -> list: ...

Domain = frozenset


def literal_set(e: Optional[cst.BaseExpression]) -> Optional[Domain]:
    """`("a", "b")`, `{"a", "b"}`, `["a"]`, `set([...])`/`frozenset(...)`/`tuple(...)` of one: its values."""
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and \
            e.func.value in ("set", "frozenset", "tuple", "list") and len(e.args) == 1 and e.args[0].keyword is None:
        return literal_set(e.args[0].value)
    if not isinstance(e, (cst.List, cst.Tuple, cst.Set)):
        return None
    values = literal_value(e)
    if not isinstance(values, (list, tuple)) or any(v is UNKNOWN or isinstance(v, (list, tuple, dict))
                                                   for v in values):
        return None
    return frozenset(values)


def truth(test: cst.BaseExpression, subject: str, value: object, const=literal_value) -> Optional[bool]:
    """The value of `test` when the expression spelled `subject` holds `value`; None when it depends on more.
    `const`: the value of a constant operand (`literal_value`, or `Constants.value` with named constants)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = truth(test.expression, subject, value, const)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = truth(test.left, subject, value, const), truth(test.right, subject, value, const)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else (True if left is True and right is True else None)
        return True if True in (left, right) else (False if left is False and right is False else None)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    op, other = test.comparisons[0].operator, test.comparisons[0].comparator
    if dotted_name(test.left) == subject:
        if isinstance(op, (cst.Equal, cst.NotEqual)):
            lit = const(other)
            if lit is UNKNOWN or isinstance(lit, (list, tuple, dict)):
                return None
            return (lit == value) == isinstance(op, cst.Equal)
        if isinstance(op, (cst.In, cst.NotIn)):
            values = literal_set(other)
            if values is None:
                return None
            return (value in values) == isinstance(op, cst.In)
        return None
    if dotted_name(other) == subject and isinstance(op, (cst.In, cst.NotIn)) and \
            isinstance(value, (str, dict, list, tuple, set, frozenset)):
        # `"deepspeed" in self.env_type`: a substring of the value; `"k" not in overrides`: a key or an item of a
        # constant container
        part = literal_value(test.left)
        if part is UNKNOWN or isinstance(value, str) and not isinstance(part, str):
            return None
        try:
            return (part in value) == isinstance(op, cst.In)
        except TypeError:
            return None
    return None


def narrow(domain: Domain, test: cst.BaseExpression, subject: str, holds: bool) -> Domain:
    """The values of `domain` under which `test` may be `holds`."""
    return frozenset(v for v in domain if truth(test, subject, v) in (None, holds))


def subjects(test: cst.BaseExpression) -> set[str]:
    """The `self.X` attributes a test compares with literals."""
    out: set[str] = set()
    stack = [test]
    while stack:
        t = stack.pop()
        if isinstance(t, cst.UnaryOperation):
            stack.append(t.expression)
        elif isinstance(t, cst.BooleanOperation):
            stack.extend((t.left, t.right))
        elif isinstance(t, cst.Comparison) and len(t.comparisons) == 1:
            for side in (t.left, t.comparisons[0].comparator):
                name = dotted_name(side)
                if name and name.startswith("self.") and name.count(".") == 1:
                    out.add(name)
    return out


def _statements(block) -> Sequence[cst.CSTNode]:
    return block.body if isinstance(block, cst.IndentedBlock) else ()


def _raises(block) -> bool:
    body = _statements(block) if isinstance(block, cst.IndentedBlock) else \
        [block] if isinstance(block, cst.SimpleStatementSuite) else ()
    last = body[-1] if body else None
    return isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and \
        any(isinstance(s, cst.Raise) for s in last.body)


def validated(fn: cst.FunctionDef, spelled: set[str]) -> Optional[Domain]:
    """The literal collection a top-level statement of `fn` restricts an expression spelled one of `spelled`
    to: `if X not in LITS: raise ...` or `assert X in LITS`."""
    for stmt in _statements(fn.body):
        test = None
        if isinstance(stmt, cst.If) and not isinstance(stmt.orelse, (cst.If, cst.Else)) and _raises(stmt.body):
            test, holds = stmt.test, False          # the code goes on where the test is false
        elif isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assert):
            test, holds = stmt.body[0].test, True
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        op = test.comparisons[0].operator
        if code_of(test.left, 200) not in spelled or not isinstance(op, cst.NotIn if not holds else cst.In):
            continue
        values = literal_set(test.comparisons[0].comparator)
        if values is not None:
            return values
    return None


def attr_domain(analysis: CallGraph, src: "PythonSource", cls: str, attr: str) -> Optional[Domain]:
    """The values `self.<attr>` may hold in an instance of `cls`: the union over every assignment to it in the
    methods of the class family, each a literal or validated in its function (None: unknown). Memoised."""
    memo = analysis.__dict__.setdefault("_attr_domains", {})
    key = (id(src), cls, attr)
    if key in memo:
        return memo[key]
    memo[key] = None
    out: set = set()
    found = False
    for where, owner in analysis._class_family(src, cls):
        for qual, fn in where.facts.functions.items():
            if fn.class_name != owner:
                continue
            for node in iter_assigns(fn.node.body):
                if not any(isinstance(t.target, cst.Attribute) and dotted_name(t.target) == f"self.{attr}"
                           for t in node.targets):
                    continue
                found = True
                lit = literal_value(node.value)
                if lit is not UNKNOWN and not isinstance(lit, (list, tuple, dict)):
                    out.add(lit)
                    continue
                values = validated(fn.node, {f"self.{attr}", code_of(node.value, 200)})
                if values is None:
                    return None
                out |= values
    memo[key] = frozenset(out) if found else None
    return memo[key]


def _path_to(stmts: Sequence[cst.CSTNode], target: cst.CSTNode, path: tuple) -> Optional[tuple]:
    """The `if` branches (links, index; index len(links) = the `else`) from `stmts` down to `target`."""
    for stmt in stmts:
        if isinstance(stmt, cst.If):
            links = [stmt]
            while isinstance(links[-1].orelse, cst.If):
                links.append(links[-1].orelse)
            blocks = [link.body for link in links]
            if isinstance(links[-1].orelse, cst.Else):
                blocks.append(links[-1].orelse.body)
            for i, block in enumerate(blocks):
                hit = _path_to(_statements(block), target, path + ((tuple(links), i),))
                if hit is not None:
                    return hit
            if any(contains(link.test, target) for link in links):
                return path
        elif isinstance(stmt, cst.BaseCompoundStatement):
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            inner = [b for b in _blocks(stmt)]
            for block in inner:
                hit = _path_to(_statements(block), target, path)
                if hit is not None:
                    return hit
            if contains(stmt, target):
                return path
        elif contains(stmt, target):
            return path
    return None


def _blocks(stmt: cst.BaseCompoundStatement):
    yield stmt.body
    for name in ("orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if part is not None and hasattr(part, "body"):
            yield part.body
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body




def entry_domain(analysis: CallGraph, src: "PythonSource", info: FunctionInfo, attr: str
                 ) -> Optional[Domain]:
    """The values `self.<attr>` may hold when the method `info` runs: its class's domain narrowed, at each call
    `self.<method>(...)` in the class family, by the branch of the caller's `if` chains the call sits in (other
    calls keep the whole domain). Memoised."""
    if info.class_name is None:
        return None
    memo = analysis.__dict__.setdefault("_entry_domains", {})
    key = (id(src), info.qualname, attr)
    if key in memo:
        return memo[key]
    memo[key] = None
    domain = attr_domain(analysis, src, info.class_name, attr)
    if domain is None:
        return None
    if analysis.count_calls_named(info.name) > 64:
        memo[key] = domain
        return domain
    subject = f"self.{attr}"
    reached: set = set()
    callers = 0
    for _, call, caller in analysis._calls_of(src, info):
        callers += 1
        here = domain
        if caller is not None and call.callee == f"self.{info.name}":
            path = _path_to(_statements(caller.node.body), call.node, ()) or ()
            for links, at in path:
                for i, link in enumerate(links):
                    if i > at:
                        break
                    here = narrow(here, link.test, subject, i == at)
        reached |= here
        if reached == domain:
            break
    memo[key] = frozenset(reached) if callers else domain
    return memo[key]


def covers(tests: Sequence[cst.BaseExpression], subject: str, domain: Domain) -> bool:
    """Does one of the chain's tests hold for every value of the domain (no path falls through)?"""
    return bool(domain) and all(any(truth(t, subject, v) is True for t in tests) for v in domain)


# named constants of the numeric libraries (their API meaning: the float infinity)
_INFINITIES = {"math.inf", "torch.inf", "numpy.inf", "np.inf", "torch._six.inf", "cmath.inf"}
# conversions that keep a number's value (`norm_type = float(norm_type)`)
_CONVERSIONS = {"float": float, "int": int}


class Constants:
    """Constant operands of one file: literals and the libraries' infinity (`from torch._six import inf`)."""

    def __init__(self, src: "PythonSource") -> None:
        self.facts = src.facts

    def value(self, e: cst.BaseExpression) -> object:
        lit = literal_value(e)
        if lit is not UNKNOWN:
            return lit
        name = self.facts.resolve_expr(e) if isinstance(e, (cst.Name, cst.Attribute)) else None
        if name in _INFINITIES:
            return float("inf")
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value == "float" and \
                len(e.args) == 1 and literal_value(e.args[0].value) in ("inf", "Inf", "+inf"):
            return float("inf")
        return UNKNOWN


def param_domain(analysis: CallGraph, src: "PythonSource", info: FunctionInfo, param: str
                 ) -> Optional[Domain]:
    """The values a parameter holds in the body: at every call of the function found in the checked files, the
    constant passed or the default left in place (a default no caller leaves counts for nothing); rebound only
    by value-keeping conversions (`p = float(p)`). None: unknown (no caller found, a non-constant argument,
    `*args`, another rebinding). Memoised."""
    if param not in info.params:
        return None
    memo = analysis.__dict__.setdefault("_param_domains", {})
    key = (id(src), info.qualname, param)
    if key in memo:
        return memo[key]
    memo[key] = None
    if info.name.startswith("__") or analysis.count_calls_named(info.name) > 64:
        return None         # too common a name to enumerate its calls (as `ProjectTaint.param_taint`)
    params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
    at = params.index(param) if param in params else None
    default = next((p.default for p in [*info.node.params.params, *info.node.params.kwonly_params]
                    if p.name.value == param), None)
    values: set = set()
    callers = 0
    for other, call in _call_sites(analysis, src, info):
        callers += 1
        if any(a.star for a in call.node.args):
            return None
        arg = next((a.value for a in call.node.args if a.keyword is not None and a.keyword.value == param), None)
        positional = [a for a in call.node.args if a.keyword is None]
        if arg is None and at is not None and at < len(positional):
            arg = positional[at].value
        value = Constants(other).value(arg) if arg is not None else \
            Constants(src).value(default) if default is not None else UNKNOWN
        if value is UNKNOWN or isinstance(value, (list, tuple, dict)):
            return None
        values.add(value)
    if not callers:
        return None
    convert = _rebinding(info.node, param)      # walked last: only for parameters every caller sets alike
    if convert is UNKNOWN:
        return None
    try:
        out = frozenset(convert(v) for v in values) if convert else frozenset(values)
    except (TypeError, ValueError):
        return None
    memo[key] = out
    return out


def _rebinding(fn: cst.FunctionDef, name: str):
    """How the body rebinds a parameter: None (never), a value-keeping conversion (`p = float(p)` only), or
    UNKNOWN (any other binding, or two conversions that differ)."""
    convert = None
    stack: list = [fn.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and n is not fn:
            continue
        if isinstance(n, cst.Assign):
            if any(name in _names(t.target) for t in n.targets):
                v = n.value
                ok = len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name) and \
                    isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in _CONVERSIONS and \
                    len(v.args) == 1 and isinstance(v.args[0].value, cst.Name) and v.args[0].value.value == name
                if not ok or convert not in (None, _CONVERSIONS[v.func.value]):
                    return UNKNOWN
                convert = _CONVERSIONS[v.func.value]
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign)) and name in _names(n.target) or \
                isinstance(n, (cst.For, cst.CompFor)) and name in _names(n.target) or \
                isinstance(n, cst.NamedExpr) and name in _names(n.target) or \
                isinstance(n, cst.AsName) and name in _names(n.name) or \
                isinstance(n, (cst.Global, cst.Nonlocal)):
            return UNKNOWN
        stack.extend(n.children)
    return convert


def _names(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for el in target.elements for n in _names(el.value)}
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return set()


def name_subjects(test: cst.BaseExpression, const=literal_value) -> set[str]:
    """The plain names a test compares with a constant (`norm_type == inf`, `mode != "a"`)."""
    out: set[str] = set()
    stack = [test]
    while stack:
        t = stack.pop()
        if isinstance(t, cst.UnaryOperation):
            stack.append(t.expression)
        elif isinstance(t, cst.BooleanOperation):
            stack.extend((t.left, t.right))
        elif isinstance(t, cst.Comparison) and len(t.comparisons) == 1:
            left, right = t.left, t.comparisons[0].comparator
            for side, other in ((left, right), (right, left)):
                if isinstance(side, cst.Name) and side.value not in ("None", "True", "False") and \
                        (const(other) is not UNKNOWN or literal_set(other) is not None):
                    out.add(side.value)
    return out


def _call_sites(analysis: CallGraph, src: "PythonSource", info: FunctionInfo) -> list:
    """(file, CallSite) of every call found that runs the function (memoised per function)."""
    memo = analysis.__dict__.setdefault("_domain_call_sites", {})
    key = (id(src), info.qualname)
    if key not in memo:
        out = [(other, call) for other, call, _ in analysis._calls_of(src, info)]
        memo[key] = out
    return memo[key]
