"""Trip counts agreed through a broadcast count (issue 30 item 3: one rank-uniformity lattice).

The source ranks of a rank test hold an iterable `xs` and measure it (`count = torch.cuda.LongTensor([len(xs)])`),
the other ranks a placeholder count (`count = torch.cuda.LongTensor([0])`); the count is broadcast, and on the
ranks of the other side of the same test `xs` is bound again to an object of a checked class that yields as many
items as the count it is built with (`xs = FakeDataloader(count[0].item())`, GLM's model-parallel ranks that
receive their batches by broadcast). After that, every rank of the group iterates `xs` the same number of times:
the object differs across ranks, its trip count does not (`FlowWalk` keeps it as an "item" value: its items vary,
its length does not).

The pieces are decided here on the code of one function: `counted_by` (the class's `__iter__` yields once per pass
of `range(self.F)`, `F` stored from the constructor's parameter), `sent_count` (a received count read back with
`[0]`/`.item()`/`int(...)`), `opposite_sides` (two branch tests that split the ranks the same way). Which rank
sends is not checked against the broadcast's `src`: the placeholder the others hold is a literal, so a broadcast
from one of them would carry no length at all -- the code this models always sends from the rank that measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import dotted_name
from dslint.program.statement_walks import code_of
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.sources import PythonSource

_CONVERSIONS = ("item", "tolist", "cpu", "long", "int")


def measured(value: cst.BaseExpression) -> Optional[str]:
    """`torch.tensor([len(xs)])`, `torch.cuda.LongTensor([len(xs)])`, `[len(xs)]`, `len(xs)`: the code of `xs`."""
    for _ in range(4):
        if isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1 and \
                not isinstance(value.elements[0], cst.StarredElement):
            value = value.elements[0].value
            continue
        if not isinstance(value, cst.Call):
            return None
        positional = [a.value for a in value.args if a.keyword is None and not a.star]
        if len(positional) != 1:
            return None
        if isinstance(value.func, cst.Name) and value.func.value == "len":
            return code_of(positional[0], 400)
        if not (dotted_name(value.func) or "").startswith(("torch.", "numpy.", "np.")):
            return None
        value = positional[0]
    return None


def placeholder(value: cst.BaseExpression) -> bool:
    """A count built of literals only (`torch.cuda.LongTensor([0])`, `torch.tensor([0])`, `[0]`): what the ranks
    that measure nothing hold until the broadcast overwrites it."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return bool(value.elements) and all(not isinstance(el, cst.StarredElement) and placeholder(el.value)
                                            for el in value.elements)
    if isinstance(value, cst.Call):
        return (dotted_name(value.func) or "").startswith(("torch.", "numpy.", "np.")) and bool(value.args) and \
            all(a.keyword is not None or placeholder(a.value) for a in value.args)
    return literal_value(value) is not UNKNOWN


def read_back(e: cst.BaseExpression) -> Optional[str]:
    """The dotted name a count is read back from: `count[0].item()`, `count.item()`, `int(count)`, `count[0]`."""
    for _ in range(6):
        if isinstance(e, (cst.Name, cst.Attribute)):
            return dotted_name(e)
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and \
                literal_value(e.slice[0].slice.value) in (0, -1):
            e = e.value
            continue
        if not isinstance(e, cst.Call):
            return None
        if isinstance(e.func, cst.Attribute) and e.func.attr.value in _CONVERSIONS and not e.args:
            e = e.func.value
            continue
        if isinstance(e.func, cst.Name) and e.func.value == "int" and len(e.args) == 1 and \
                e.args[0].keyword is None and not e.args[0].star:
            e = e.args[0].value
            continue
        return None
    return None


def _side(test: cst.BaseExpression, holds: bool) -> tuple[str, bool]:
    """A test and the side taken, with `not x` and a single `!=` turned round (`(code of x / of a == b, side)`)."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.NotEqual):
        same = test.with_changes(comparisons=[test.comparisons[0].with_changes(operator=cst.Equal())])
        return _bare(same), not holds
    return _bare(test), holds


def _bare(test: cst.BaseExpression) -> str:
    return "".join(code_of(test, 10 ** 6).split()).strip("()")


def opposite_sides(a: tuple[cst.BaseExpression, bool], b: tuple[cst.BaseExpression, bool]) -> bool:
    """Do the ranks taking side `b` of its test make up exactly those not taking side `a` of its own (`if rank ==
    0:` and `if rank != 0:`, `if x:` and its `else`, `if x:` and `if not x:`)? Decided on the tests' code."""
    (code_a, side_a), (code_b, side_b) = _side(*a), _side(*b)
    return code_a == code_b and side_a != side_b


def counted_by(analysis, src: "PythonSource", call: cst.Call) -> bool:
    """Does `call` build an object of a checked class whose iteration yields exactly as many items as the call's
    one positional argument? Its `__init__` stores that parameter in `self.F` (`self.num_iters = num_iters`) and
    its `__iter__` yields only once per pass of `for _ in range(self.F)`, either alone or in the branch of `if
    self.F is not None:` (`FakeDataloader`: the `else` side, `while True: yield`, is for a None count)."""
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) != 1 or positional[0].star or len(call.args) != 1:
        return False
    found = analysis.class_of(src, analysis.taint(src).facts.resolve_expr(call.func))
    if found is None:
        return False
    init = analysis.function_info(analysis.method_of(*found, "__init__"))
    walk = analysis.function_info(analysis.method_of(*found, "__iter__"))
    if init is None or walk is None:
        return False
    params = [p.name.value for p in init[1].node.params.params][1:]
    if not params:
        return False
    field = _stored_field(init[1].node, params[0])
    return field is not None and _yields_per_pass(walk[1].node.body, field)


def _stored_field(init: cst.FunctionDef, param: str) -> Optional[str]:
    """The attribute `__init__` stores the parameter in, plainly and once (`self.F = param`)."""
    fields = []
    for node in init.body.body if isinstance(init.body, cst.IndentedBlock) else ():
        for small in node.body if isinstance(node, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                    isinstance(small.value, cst.Name) and small.value.value == param:
                target = dotted_name(small.targets[0].target) or ""
                if target.startswith("self.") and target.count(".") == 1:
                    fields.append(target[5:])
    return fields[0] if len(fields) == 1 else None


def _yields_per_pass(body: cst.BaseSuite, field: str) -> bool:
    stmts = list(body.body) if isinstance(body, cst.IndentedBlock) else []
    if len(stmts) != 1:
        return False
    stmt = stmts[0]
    if isinstance(stmt, cst.If) and _not_none_test(stmt.test, field):
        return _yields_per_pass(stmt.body, field)
    if not isinstance(stmt, cst.For) or stmt.orelse is not None:
        return False
    it = stmt.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and
            len(it.args) == 1 and dotted_name(it.args[0].value) == f"self.{field}"):
        return False
    inner = list(stmt.body.body) if isinstance(stmt.body, cst.IndentedBlock) else []
    return _yields_once(inner)


def _yields_once(inner: list) -> bool:
    """One statement, `yield <value>` (of no other yield inside)."""
    if len(inner) != 1 or not isinstance(inner[0], cst.SimpleStatementLine) or len(inner[0].body) != 1:
        return False
    small = inner[0].body[0]
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield) and \
        not isinstance(small.value.value, cst.From)


def _not_none_test(test: cst.BaseExpression, field: str) -> bool:
    """`self.F is not None`."""
    return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
        isinstance(test.comparisons[0].operator, cst.IsNot) and dotted_name(test.left) == f"self.{field}" and \
        isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None"
