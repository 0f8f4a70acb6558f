"""Groups a program builds of the ends of its pipelines (issue 30: "rank-branch-uniform-over-reducing-group").

A grid class that builds its own groups stores, per rank, the group it belongs to: Megatron-style code builds the
*embedding group* of each pipeline from the pipeline's first and last stage and keeps it on the ranks that are in
it (ReaLHF's `ParallelGrid`):

    for ranks in self._topo.get_axis_comm_lists("pipe"):     # one list per pipeline, in stage order
        embedding_ranks = [ranks[0], ranks[-1]] if len(ranks) > 1 else ranks
        group = new_group(ranks=[mapping[r] for r in embedding_ranks])
        if self.global_rank in embedding_ranks:
            self.embedding_proc_group = group

Every member of `self.embedding_proc_group` is the first or the last stage of its pipeline, and every such stage
is a member: the group is the "embedding" family of `process_groups` (axes {"pp"}), whose membership test is
"first or last pipeline stage" -- a test of it around a collective on the group (`if pp_rank not in [0, pp_size -
1]: return`) is taken alike by every member (`stage_positions.ends_test`). `[ranks[0]]` is the
"position_embedding" family (the first stage alone).

What is read is the data flow of the stores, never a name: every store of the field in the checked files must be
of a name bound once, in the same function, to `new_group` (or a checked helper that calls it) of the member list
(or a comprehension over it), under a test `x in <member list>`; the member list bound to the first and last
items (or the first item) of the loop variable -- or to the loop variable itself where the test before says the
list holds one rank (`len(ranks) > 1` false) --; the loop over DeepSpeed's `ProcessTopology.get_axis_comm_lists`
of the pipeline axis (its documented meaning: the lists of ranks that differ only in that axis, ordered along it),
directly or through a name bound to it in the same function. A store of `None` is the field on the ranks
outside the group (no member reaches a collective on it under the membership test). Anything else: None (the group stays what
`resolve_group` says).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import dotted_name
from dslint.program.statement_walks import code_of, iter_assigns, sub_statements
from dslint.sources.cstwalk import walk
from dslint.sources.literals import literal_value

if TYPE_CHECKING:
    from dslint.program.process_groups import Group

# DeepSpeed `ProcessTopology` axis names of the pipeline coordinate (`PipeModelDataParallelTopology`: "pipe")
_PIPE_AXES = {"pipe", "pipeline", "pp"}
_FIRST, _BOTH = "position_embedding", "embedding"


def stage_end_group(project, attr: str) -> Optional["Group"]:
    """The group every store of the field `attr` in the checked files holds, when each is a group of the ends of
    a pipeline (module docstring); None otherwise."""
    memo = project.__dict__.setdefault("_stage_end_groups", {})
    if attr not in memo:
        memo[attr] = _find(project, attr)
    return memo[attr]


def _find(project, attr: str) -> Optional["Group"]:
    from dslint.program.process_groups import PP, Group
    families: set = set()
    for src in project.python:
        # a prefilter only: the store and its loop over `get_axis_comm_lists` stand in one function
        if attr not in src.text or "get_axis_comm_lists" not in src.text or src.module is None:
            continue
        for info in src.facts.functions.values():
            for store, path in _stores(info.node, attr):
                if isinstance(store, cst.Assign) and isinstance(store.value, cst.Name) and \
                        store.value.value == "None":
                    continue        # the field's initial value on the ranks outside every such group
                families.add(_family(project, src, info.node, store, path))
    if len(families) != 1 or None in families:
        return None
    return Group(frozenset({PP}), families.pop())


def _stores(func: cst.FunctionDef, attr: str):
    """(`x.attr = value` statement, [enclosing If/For statements, outermost first, with the branch taken]) of a
    function's own body (nested functions and classes are theirs)."""
    out: list = []

    def visit(stmt: cst.CSTNode, path: list) -> None:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    if any(isinstance(t, cst.Attribute) and t.attr.value == attr for t in targets):
                        out.append((small, list(path)))
            return
        if isinstance(stmt, cst.If):
            for child in _block(stmt.body):
                visit(child, path + [(stmt, True)])
            if stmt.orelse is not None:
                for child in ([stmt.orelse] if isinstance(stmt.orelse, cst.If) else _block(stmt.orelse.body)):
                    visit(child, path + [(stmt, False)])
            return
        for child in sub_statements(stmt):
            if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                for inner in child.body:
                    visit(inner, path + [(stmt, True)])
            elif isinstance(child, cst.CSTNode) and hasattr(child, "body"):
                visit(child, path + [(stmt, True)])

    for st in _block(func.body):
        visit(st, [])
    return out


def _block(body: cst.CSTNode) -> list:
    return list(body.body) if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [body]


def _family(project, src, func: cst.FunctionDef, store, path: list) -> Optional[str]:
    if not isinstance(store, cst.Assign) or not isinstance(store.value, cst.Name):
        return None
    group_name = store.value.value
    built = _bound_values(func, group_name)
    if len(built) != 1 or not isinstance(built[0], cst.Call) or not _builds_group(project, src, built[0]):
        return None
    members = _ranks_argument(built[0])
    if members is None:
        return None
    # the store's own test: `<rank> in <members>`, holding on this path
    tested = [test for test, holds in ((st.test, holds) for st, holds in path if isinstance(st, cst.If))
              if holds and _in_test(test) == members]
    if not tested:
        return None
    loops = [st for st, _ in path if isinstance(st, cst.For)]
    if not loops or not isinstance(loops[-1].target, cst.Name) or not _pipeline_lists(func, loops[-1].iter):
        return None
    lists = loops[-1].target.value
    families = set()
    for value in _bound_values(func, members):
        families.add(_ends_of(value, lists, func))
    if len(families) == 2 and "one" in families:
        families.discard("one")
    if len(families) != 1 or None in families or "one" in families:
        return None
    return families.pop()


def _bound_values(func: cst.FunctionDef, name: str) -> list:
    """The values a function binds to `name` by `=` (chained targets included); [None] for another binding."""
    out = []
    for node in iter_assigns(func):
        for t in node.targets:
            if isinstance(t.target, cst.Name) and t.target.value == name:
                out.append(node.value)
            elif not isinstance(t.target, cst.Name) and name in code_of(t.target, 200):
                out.append(None)
    return out


def _builds_group(project, src, call: cst.Call) -> bool:
    """`new_group(...)`, or a call of a checked function whose body calls `new_group`."""
    func = call.func
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if last == "new_group":
        return True
    found = project.find_function(src.facts.resolve_expr(func), near=src)
    return found is not None and any(
        (c.node.func.attr.value if isinstance(c.node.func, cst.Attribute) else getattr(c.node.func, "value", None))
        == "new_group" for c in found[1].calls)


def _ranks_argument(call: cst.Call) -> Optional[str]:
    """The member list a group is built of: `new_group(ranks=members)` / `new_group(members)`, or a
    comprehension mapping each of its items (`[mapping[r] for r in members]`)."""
    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "ranks"), None)
    if arg is None:
        arg = next((a.value for a in call.args if a.keyword is None and not a.star), None)
    if isinstance(arg, (cst.ListComp, cst.GeneratorExp)) and arg.for_in.inner_for_in is None and \
            arg.for_in.ifs == ():
        arg = arg.for_in.iter
    if isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name) and arg.func.value in ("list", "sorted") and \
            len(arg.args) == 1:
        arg = arg.args[0].value
    return arg.value if isinstance(arg, cst.Name) else None


def _in_test(test: cst.BaseExpression) -> Optional[str]:
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.In) and isinstance(test.comparisons[0].comparator, cst.Name):
        return test.comparisons[0].comparator.value
    return None


def _pipeline_lists(func: cst.FunctionDef, it: cst.BaseExpression, depth: int = 0) -> bool:
    """`topo.get_axis_comm_lists("pipe")`, or a name/field bound (only) to it in the function."""
    if isinstance(it, cst.Call):
        func_ = it.func
        return isinstance(func_, cst.Attribute) and func_.attr.value == "get_axis_comm_lists" and \
            len(it.args) >= 1 and literal_value(it.args[0].value) in _PIPE_AXES
    name = dotted_name(it)
    if name is None or depth > 2:
        return False
    values = [node.value for node in iter_assigns(func) for t in node.targets if dotted_name(t.target) == name]
    return len(values) == 1 and _pipeline_lists(func, values[0], depth + 1)


def _ends_of(value, lists: str, func: cst.FunctionDef) -> Optional[str]:
    """`[lists[0], lists[-1]]`: "embedding"; `[lists[0]]`: "position_embedding"; `lists` itself: "one" (a list of
    one rank, accepted beside the others only -- `_family`)."""
    if value is None:
        return None
    if isinstance(value, cst.Name) and value.value == lists:
        return "one" if _one_rank_branch(func, value, lists) else None
    if not isinstance(value, cst.List):
        return None
    idx = []
    for el in value.elements:
        v = el.value
        if not (isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name) and v.value.value == lists and
                len(v.slice) == 1 and isinstance(v.slice[0].slice, cst.Index)):
            return None
        idx.append(literal_value(v.slice[0].slice.value))
    if idx == [0, -1]:
        return _BOTH
    if idx == [0]:
        return _FIRST
    return None


def _one_rank_branch(func: cst.FunctionDef, value: cst.Name, lists: str) -> bool:
    """Is `members = lists` bound only in the `else` of `if len(lists) > 1:` (the pipeline holds one stage)?"""
    for node in walk(func):
        if not isinstance(node, cst.If) or node.orelse is None or isinstance(node.orelse, cst.If):
            continue
        if code_of(node.test, 200).replace(" ", "") != f"len({lists})>1":
            continue
        for assign in iter_assigns(node.orelse):
            if assign.value is value:
                return True
    return False

