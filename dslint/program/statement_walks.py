"""Read-only walks over libcst statement trees shared by the analyses: the expressions and statements a node
holds directly, the calls of a statement tree (not entering nested scopes) and its assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.sources.cstwalk import children, is_node_type, lib_children

if TYPE_CHECKING:
    from dslint.program.facts import FunctionInfo


# Fields that hold sub-expressions, per node type: walking them directly is ~20x cheaper than libcst's
# `children` (which runs a visitor per node).
_FIELDS: dict[type, tuple[str, ...]] = {
    cst.Attribute: ("value",), cst.Subscript: ("value", "slice"), cst.SubscriptElement: ("slice",),
    cst.Index: ("value",), cst.Slice: ("lower", "upper", "step"), cst.BinaryOperation: ("left", "right"),
    cst.UnaryOperation: ("expression",), cst.Comparison: ("left", "comparisons"),
    cst.ComparisonTarget: ("comparator",), cst.Tuple: ("elements",), cst.List: ("elements",),
    cst.Set: ("elements",), cst.Element: ("value",), cst.StarredElement: ("value",), cst.Dict: ("elements",),
    cst.DictElement: ("key", "value"), cst.StarredDictElement: ("value",), cst.Arg: ("value",),
    cst.FormattedString: ("parts",), cst.FormattedStringExpression: ("expression",), cst.Await: ("expression",),
    cst.NamedExpr: ("value",), cst.Yield: ("value",), cst.From: ("item",), cst.ConcatenatedString: (),
    cst.FormattedStringText: (), cst.Ellipsis: (), cst.Imaginary: (),
}


def sub_expressions(node: cst.CSTNode):
    fields = _FIELDS.get(type(node))
    if fields is None:
        yield from lib_children(node)
        return
    for name in fields:
        value = getattr(node, name, None)
        if value is None:
            continue
        kind = type(value)
        if kind is tuple or kind is list:
            yield from value
        elif is_node_type(kind):
            yield value


def sub_statements(node: cst.CSTNode):
    """Statements directly nested in a compound statement (bodies, else/except/finally, match cases)."""
    if isinstance(node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite)):
        yield from node.body
        return
    for name in ("body", "orelse", "handlers", "finalbody", "cases"):
        value = getattr(node, name, None)
        if value is None:
            continue
        if isinstance(value, (tuple, list)):
            yield from value
        else:
            yield value


def statement_expressions(node: cst.CSTNode):
    """Expressions a statement evaluates itself (not those of its nested statements)."""
    if isinstance(node, cst.SimpleStatementLine):
        for small in node.body:
            yield from statement_expressions(small)
        return
    for name in ("value", "test", "iter", "target", "subject", "exc", "cause", "msg", "items"):
        value = getattr(node, name, None)
        if isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.WithItem):
                    yield item.item
        elif isinstance(value, cst.BaseExpression):
            yield value
    if isinstance(node, cst.Assign):
        yield from (t.target for t in node.targets)


def iter_calls(node: cst.CSTNode):
    """Calls in a statement tree, not entering nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, cst.Call):
            yield n
            stack.append(n.func)
            stack.extend(a.value for a in n.args)
        elif isinstance(n, cst.BaseExpression) or type(n) in _FIELDS:
            stack.extend(sub_expressions(n))
        elif isinstance(n, cst.SimpleStatementLine):
            stack.extend(statement_expressions(n))      # its small statements' expressions, each once
        else:
            stack.extend(statement_expressions(n))
            stack.extend(sub_statements(n))


# Memos of the two purely syntactic reads below that every launch unit's analyses repeat on the same trees (issue
# 33): keyed by the node's identity and holding the node (libcst nodes take no weak references), so an id is
# never reused while its entry lives; a node's answer never changes (the trees are immutable). Cleared whole
# when they grow past `MEMO_LIMIT` entries, which bounds what a long-lived server keeps of trees it replaced.
MEMO_LIMIT = 200_000
_assigns_memo: dict[int, tuple[cst.CSTNode, tuple[cst.Assign, ...]]] = {}
_code_memo: dict[int, tuple[cst.CSTNode, str]] = {}


def _remember(memo: dict, node: cst.CSTNode, value):
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo[id(node)] = (node, value)
    return value


def iter_assigns(node: cst.CSTNode) -> tuple[cst.Assign, ...]:
    """Assignments in a statement tree, nested functions and classes included (memoised per node)."""
    hit = _assigns_memo.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    return _remember(_assigns_memo, node, tuple(_walk_assigns(node)))


def _walk_assigns(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleStatementLine):
            stack.extend(x for x in n.body if isinstance(x, cst.Assign))
        elif isinstance(n, cst.Assign):
            yield n
        elif not isinstance(n, cst.BaseExpression):
            stack.extend(sub_statements(n))


def code_of(node: cst.CSTNode, limit: int = 60) -> str:
    """The node's source text on one line (whitespace runs made one space), cut to `limit` characters; the
    whole text is memoised per node."""
    hit = _code_memo.get(id(node))
    if hit is not None and hit[0] is node:
        text = hit[1]
    else:
        try:
            text = " ".join(cst.Module(body=[]).code_for_node(node).split())
        except Exception:
            return type(node).__name__
        _remember(_code_memo, node, text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# a comparison flag's key: the subject's key, MEMBER, the literal values (`split == "train"`: "name:split∈('train',)")
MEMBER = "\u2208"


def member_key(subject: str, values) -> str:
    """The key of the flag "`subject` holds one of `values`"."""
    return f"{subject}{MEMBER}{tuple(sorted(values, key=repr))!r}"


def _compared_flag(test: cst.Comparison):
    """("<subject key>∈<values>", polarity) for a comparison of a bare name or of a dotted name rooted at one
    (`split == "train"`, `args.local_rank not in [-1, 0]`, `self.mode != "eval"`) with literals: the test holds
    exactly where the subject is one of the values (polarity True), or none of them (False)."""
    if len(test.comparisons) != 1:
        return None
    from dslint.sources.literals import UNKNOWN, literal_value
    op, right = test.comparisons[0].operator, test.comparisons[0].comparator
    left = test.left
    if isinstance(op, (cst.Equal, cst.NotEqual)) and literal_value(left) is not UNKNOWN \
            and literal_value(right) is UNKNOWN:
        left, right = right, left
    if isinstance(op, (cst.Equal, cst.NotEqual)):
        values = (literal_value(right),)
    elif isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.List, cst.Tuple, cst.Set)):
        values = literal_value(right)
    else:
        return None
    # plain scalars only: the key spells them and `collective_switches.literal_members` reads them back
    if not isinstance(values, (list, tuple)) or not values or any(type(v) not in (str, int, float, bool, bytes)
                                                                  for v in values):
        return None
    parts = []
    while isinstance(left, cst.Attribute):
        parts.append(left.attr.value)
        left = left.value
    if not isinstance(left, cst.Name) or left.value in ("True", "False", "None"):
        return None
    subject = ("self." if left.value == "self" else "name:" + left.value + ("." if parts else "")) + \
        ".".join(reversed(parts))
    if subject == "self.":
        return None
    return member_key(subject, values), isinstance(op, (cst.Equal, cst.In))


def _settled_flag(test: cst.BaseExpression):
    """(`self.x.y`, polarity) for a test that is an attribute of `self` (possibly negated): a flag of the object
    that a method and the methods it calls on `self` read alike; a comparison with literals (`_compared_flag`)."""
    polarity = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, polarity = test.expression, not polarity
    if isinstance(test, cst.Comparison):
        flag = _compared_flag(test)
        return (flag[0], flag[1] == polarity) if flag else None
    parts = []
    while isinstance(test, cst.Attribute):
        parts.append(test.attr.value)
        test = test.value
    if isinstance(test, cst.Name) and test.value == "self" and parts:
        return "self." + ".".join(reversed(parts)), polarity
    if isinstance(test, cst.Name) and not parts and test.value not in ("True", "False", "None"):
        return "name:" + test.value, polarity      # a parameter or a module global (collective_sites decides)
    return None


def branch_facts(test: cst.BaseExpression, truth: bool) -> frozenset:
    """The (flag, truth) pairs that hold wherever `test` evaluated to `truth`: a flag itself (`_settled_flag`),
    through `not`, every operand of an `and` that held and every operand of an `or` that failed
    (`if a and not b:` decides `b` false in its body; the `else` of `if b or c:` decides both false). What a
    held `or` or a failed `and` leaves open decides nothing."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, truth = test.expression, not truth
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) == truth:
            return branch_facts(test.left, truth) | branch_facts(test.right, truth)
        return frozenset()
    flag = _settled_flag(test)
    return frozenset({(flag[0], flag[1] == truth)}) if flag else frozenset()


def _leaves(block) -> bool:
    """Does the block end with `return`/`raise`/`continue`/`break` (the statements after its `if` in the same
    block never run on that side)?"""
    stmts = getattr(block, "body", ())
    last = stmts[-1] if stmts else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def settled_flags(body) -> dict[int, frozenset]:
    """For every call of a function body (by node id): the `self.` flags (and bare names, "name:x") the enclosing
    `if`/`elif`/`else` branches have decided where it runs, as (dotted name, truth) pairs (`branch_facts`: the
    operands of `and`/`or`/`not` tests too), and those an earlier `if` of the same block decided by leaving on
    its other side (`if not sync: return` decides `sync` true for the statements after it)."""
    out: dict[int, frozenset] = {}

    def calls(node, known):
        for call in iter_calls(node):
            out[id(call)] = known

    def walk(stmts, known):
        for stmt in stmts:
            if isinstance(stmt, cst.If):
                calls(stmt.test, known)
                walk(sub_statements(stmt.body), known | branch_facts(stmt.test, True))
                other = known | branch_facts(stmt.test, False)
                if isinstance(stmt.orelse, cst.If):
                    walk([stmt.orelse], other)
                elif stmt.orelse is not None:
                    walk(sub_statements(stmt.orelse.body), other)
                # the rest of the block runs only on the side that does not leave it (`if not sync: return`)
                if _leaves(stmt.body):
                    known = other
                elif isinstance(stmt.orelse, cst.Else) and _leaves(stmt.orelse.body):
                    known = known | branch_facts(stmt.test, True)
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            elif isinstance(stmt, (cst.SimpleStatementLine, cst.BaseSmallStatement)):
                calls(stmt, known)
            else:
                for expr in statement_expressions(stmt):
                    calls(expr, known)
                for sub in sub_statements(stmt):
                    walk(sub_statements(sub) if isinstance(sub, (cst.IndentedBlock, cst.SimpleStatementSuite))
                         else [sub] if not hasattr(sub, "body") or isinstance(sub, cst.BaseCompoundStatement)
                         else sub_statements(sub.body), known)

    walk(body, frozenset())
    return out


def iter_returns(body: cst.CSTNode):
    """The `return` statements of a function body in source order, not those of nested functions, classes or
    lambdas."""
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Return):
            yield node
            continue
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        kids = list(children(node))
        kids.reverse()
        stack.extend(kids)


def _unset_test(test: cst.BaseExpression):
    """The holder a test asks "not made yet?" of (`_WORLD_GROUP is None`, `not self._group`), as code."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
        return _holder(test)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, (cst.Is, cst.Equal)) and \
            isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        return _holder(test.left)
    return None


def _holder(expr: cst.BaseExpression):
    """A module global or a `self.` attribute (what lives longer than one call), as code."""
    if isinstance(expr, cst.Name):
        return expr.value
    parts = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name) and expr.value == "self" and parts:
        return "self." + ".".join(reversed(parts))
    return None


def once_initialized_calls(func: cst.FunctionDef) -> set[int]:
    """Calls (by node id) that make a value kept for every later call, once per process: the value of an
    assignment to a module global the function declares `global` or to a `self.` attribute, in the body of an
    `if` that asks whether that same holder is still unset (`if _WORLD_GROUP is None: _WORLD_GROUP =
    dist.new_group(...)`). Later calls find it set and skip them."""
    declared = {n.value for stmt in iter_global_stmts(func) for n in (x.name for x in stmt.names)
                if isinstance(n, cst.Name)}
    out: set[int] = set()
    stack = list(sub_statements(func.body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(stmt, cst.If):
            holder = _unset_test(stmt.test)
            if holder is not None and (holder.startswith("self.") or holder in declared):
                for line in sub_statements(stmt.body):
                    for small in getattr(line, "body", ()) if isinstance(line, cst.SimpleStatementLine) else ():
                        if isinstance(small, (cst.Assign, cst.AnnAssign)):
                            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) \
                                else [small.target]
                            if small.value is not None and any(_holder(t) == holder for t in targets):
                                out.update(id(c) for c in iter_calls(small.value))
        if not isinstance(stmt, (cst.SimpleStatementLine, cst.BaseSmallStatement)):
            stack.extend(sub_statements(stmt))
    return out


def iter_global_stmts(func: cst.FunctionDef):
    """The `global` statements of a function body (not those of nested scopes)."""
    stack = list(sub_statements(func.body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from (s for s in stmt.body if isinstance(s, cst.Global))
        elif not isinstance(stmt, cst.BaseSmallStatement):
            stack.extend(sub_statements(stmt))


def name_nodes(node: cst.CSTNode):
    """Every `Name` node inside `node` (itself included), depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            yield n
        stack.extend(lib_children(n))


def contains(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    """Is `target` (by identity) `node` or a node inside it?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if n is target:
            return True
        stack.extend(lib_children(n))
    return False


def names_reached(flows, reached: set[str]) -> set[str]:
    """Grow `reached` (in place, and return it) to the fixed point of `flows`, pairs (names bound, names read) of
    assignments in any order: a binding that reads a reached name reaches the names it binds."""
    changed = True
    while changed:
        changed = False
        for bound, read in flows:
            if read & reached and not bound <= reached:
                reached |= bound
                changed = True
    return reached


def own_nodes(func: cst.CSTNode):
    """The nodes of a function's body (or under another node), not inside the functions, lambdas and classes
    nested in it (those nodes themselves are yielded, not their insides)."""
    todo = lib_children(func.body if isinstance(func, cst.FunctionDef) else func)
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        todo.extend(lib_children(n))


def ends_in_exit(stmt: cst.CSTNode) -> bool:
    """Does control never fall off the end of this statement (the last of a body): a `return`/`raise`, or an
    `if`/`elif`/`else` chain every branch of which ends so?"""
    if isinstance(stmt, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in stmt.body)
    if isinstance(stmt, cst.If):
        if stmt.orelse is None or not stmt.body.body:
            return False
        other = [stmt.orelse] if isinstance(stmt.orelse, cst.If) else list(stmt.orelse.body.body)
        return bool(other) and ends_in_exit(stmt.body.body[-1]) and ends_in_exit(other[-1])
    return False


def in_loop_or_handler(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Does a loop or an `except` handler under `root` (not inside a nested function) hold `node`? (Which pass,
    or which exception, reaches it may differ per process.)"""
    def search(n: cst.CSTNode, inside: bool):
        if n is node:
            return inside
        for child in lib_children(n):
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            found = search(child, inside or isinstance(child, (cst.For, cst.While, cst.ExceptHandler)))
            if found is not None:
                return found
        return None
    return bool(search(root, False))


def argument_for(call: cst.Call, callee: "FunctionInfo", param: str) -> tuple[bool, Optional[cst.BaseExpression]]:
    """The argument a call passes for `param` of `callee`: (True, expr); (True, None) when it passes none (the
    default applies); (False, None) when a `*args`/`**kwargs` spread may hold it."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return True, arg.value
    node = callee.node
    positional = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
    if positional and positional[0] in ("self", "cls") and callee.class_name and \
            isinstance(call.func, cst.Attribute) and not any(
                isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in node.decorators):
        positional = positional[1:]
    passed = [a for a in call.args if a.keyword is None]
    for i, arg in enumerate(passed):
        if arg.star:
            return False, None
        if i < len(positional) and positional[i] == param:
            return True, arg.value
    if any(arg.star == "**" for arg in call.args):
        return False, None
    return True, None


MANY = object()


def local_bindings(info) -> dict:
    """The names a function binds: name → the value of its one plain binding (`args = get_args()`), or `MANY`
    for a parameter, a name bound more than once or any other way (a loop or comprehension target, `with ... as`,
    augmented, unpacked, imported, ...)."""
    if info is None:
        return {}
    out: dict = {p.name.value: MANY for p in (*info.node.params.params, *info.node.params.kwonly_params,
                                               *info.node.params.posonly_params)}
    for star in (info.node.params.star_arg, info.node.params.star_kwarg):
        if isinstance(star, cst.Param):
            out[star.name.value] = MANY

    def many(target) -> None:
        for n in _bound_names(target):
            out[n] = MANY

    for n in own_nodes(info.node):
        if isinstance(n, cst.Assign):
            if len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
                name = n.targets[0].target.value
                out[name] = MANY if name in out else n.value
            else:
                for t in n.targets:
                    many(t.target)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            many(n.target)
        elif isinstance(n, (cst.WithItem, cst.ExceptHandler)):
            named = n.asname if isinstance(n, cst.WithItem) else n.name
            if named is not None:
                many(named.name)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            for item in n.names:
                out[item.name.value] = MANY
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            out[n.name.value] = MANY
    return out


def sole_binding(info, name: str) -> Optional[cst.BaseExpression]:
    """The value of the one plain `=` binding a local of the function `info` (`local_bindings`); None for a
    parameter, a name bound more than once or otherwise, or not bound there."""
    value = local_bindings(info).get(name)
    return None if value is MANY else value


def _bound_names(target) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _bound_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return []


def if_path(links, holds, elif_of: dict) -> tuple:
    """The tests of the enclosing `if` links (`links`, outermost first) with the side taken (`holds`), each
    `elif` preceded by the earlier links of its chain as false (`elif_of`: id of an `elif` link → the link it is
    the `orelse` of)."""
    out: list = []
    for link, side in zip(links, holds):
        out.append((link.test, side))
        prev = elif_of.get(id(link))
        while prev is not None:
            out.append((prev.test, False))
            prev = elif_of.get(id(prev))
    return tuple(out)


class BindingOrder:
    """Where a function binds its local names, in source order: a name whose every binding comes before a node
    keeps one value from the last binding a path ran to the node, however many times it was bound before
    (`flag = False; if split == "train": flag = True` ... `if flag and rank != 0:` ... `if flag and rank == 0:`):
    nothing between two such nodes of one pass rebinds it."""

    def __init__(self, func: cst.FunctionDef) -> None:
        self.order: dict[int, int] = {}             # id of a node → its preorder position
        self.binds: dict[str, list[int]] = {}       # name → the positions of its bindings
        self.opaque: set[str] = set()               # global / nonlocal: bound elsewhere too
        for p in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params,
                  func.params.star_arg, func.params.star_kwarg):
            if isinstance(p, cst.Param):
                self.binds.setdefault(p.name.value, []).append(-1)
        todo: list = [func.body]
        while todo:
            n = todo.pop()
            at = self.order[id(n)] = len(self.order)
            for t in self._targets(n):
                for name in _bound_names(t):
                    self.binds.setdefault(name, []).append(at)
            if not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                todo.extend(reversed(lib_children(n)))

    def _targets(self, n: cst.CSTNode) -> list:
        if isinstance(n, cst.Assign):
            return [t.target for t in n.targets]
        if isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
            return [n.target]
        if isinstance(n, cst.WithItem) and n.asname is not None:
            return [n.asname.name]
        if isinstance(n, cst.ExceptHandler) and n.name is not None:
            return [n.name.name]
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            return [n.name]
        if isinstance(n, cst.Del):
            return [n.target]
        if isinstance(n, (cst.Global, cst.Nonlocal)):
            self.opaque.update(item.name.value for item in n.names)
        elif isinstance(n, (cst.Import, cst.ImportFrom)) and not isinstance(n.names, cst.ImportStar):
            out = []
            for alias in n.names:
                if alias.asname is not None:
                    out.append(alias.asname.name)
                elif isinstance(alias.name, cst.Name):
                    out.append(alias.name)
                else:
                    self.opaque.add(code_of(alias.name, 200).split(".")[0])
            return out
        return []

    def settled_at(self, name: str, node: cst.CSTNode) -> bool:
        """Is every binding of `name` before `node` (a loop's later passes rebind it only before `node` too)?"""
        at = self.order.get(id(node))
        return at is not None and name not in self.opaque and all(pos < at for pos in self.binds.get(name, ()))
