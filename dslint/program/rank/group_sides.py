"""Sides of a rank split compared over one group (issue 30 items 3/4: "complementary-broadcast-sides").

A chain of tests of a group family's membership predicates splits the ranks, yet the members of the group a
collective runs on may all issue it, each on its own side (minimal-llama's generation loop):

    if parallel_state.is_pipeline_last_stage():
        ...                                              # sample the next tokens
        torch.distributed.broadcast(inputs, last_rank, parallel_state.get_embedding_group())
    elif parallel_state.is_pipeline_first_stage():
        torch.distributed.broadcast(inputs, last_rank, parallel_state.get_embedding_group())

The embedding group's members are the first and the last stage (`process_groups.MEMBERSHIP`): the last stage
takes the first branch, the first stage the second, and the ranks that take neither -- where every predicate of
one of the family's accepted sets is known false -- are no members. So the collectives are compared per group
and per path: over the branches a member can take, the sequence of collectives on the group (op, and the root a
rooted op sends from: `src=`/`dst=`, a name read through its one binding in the branch) must be the same and
not empty, and the root the same on every member (uniform over the group). The root may be named differently on the sending
side: a side whose test singles out one member of the group (the last stage, of a group of the two ends of one
pipeline) broadcasting from its own rank (`src=dist.get_rank()`) sends from the rank the other sides name by the
library's getter of that end (`get_pipeline_model_parallel_last_rank()`, the global rank of the last stage of this
rank's pipeline): both are that end's member (`_END_OF`, `_END_RANK`). Then the split does not split the
group, and the DSL101 findings whose rank-varying tests are all links of such chains are dropped
(`drop_paired_sides`, after `collective_sequences.apply`). A missing side (the first stage never receives), a
WORLD or data-parallel collective (whose members include the ranks that take neither branch), another group or
another root on one side: the findings stay (`embedding_broadcast_both_ends.py` / `embedding_broadcast_one_end.py`).
"""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from dslint.program.process_groups import MEMBERSHIP, Group, uniform_over
from dslint.program.rank.collective_sequences import (
    Scope, SequenceBuilder, Token, _Unknown, _has_split, flatten, representatives)
from dslint.program.statement_walks import code_of, contains, name_nodes as _names

# the families whose groups hold one rank per end of one pipeline (`process_groups.MEMBERSHIP`: the first and the
# last stage, or the first alone), the stage predicates that single out one of those members, and the library
# getters (Megatron/apex `parallel_state`/`mpu`) of that member's global rank in this rank's pipeline
_STAGE_END_FAMILIES = {"embedding", "position_embedding"}
_END_OF = {"is_pipeline_first_stage": "first", "is_first_stage": "first",
           "is_pipeline_last_stage": "last", "is_last_stage": "last"}
_END_RANK = {"get_pipeline_model_parallel_first_rank": "first", "get_pipeline_model_parallel_last_rank": "last"}
# where torch.distributed takes the root rank of a rooted collective positionally (its keyword: `src`/`dst`)
_ROOT_POSITION = {"broadcast": 1, "broadcast_object_list": 1, "reduce": 1, "gather": 2, "scatter": 2,
                  "gather_object": 2, "scatter_object_list": 2}


def drop_paired_sides(walk, body: Sequence[cst.CSTNode]) -> None:
    """Drop the DSL101 findings of `walk.found` (a `HazardWalk` that walked `body`) whose every rank-varying test
    is a link of a membership chain whose sides match over the collective's group (module docstring)."""
    hits = [(k, h) for k, h in walk.found.items() if h.code == "DSL101" and h.guard is not None
            and h.guard.kind.startswith("cond")]
    if not hits:
        return
    memo: dict = {}
    scope = None
    for key, h in hits:
        group = walk.sites.group_of(h.site)
        if not group.family or group.family not in MEMBERSHIP:
            continue
        conds = h.conds or (h.guard,)
        if scope is None:
            scope = Scope(walk.src, walk.cls, walk.seq_tests, walk.seq_bound, set(walk.seq_consts),
                          walk.seq_sentinels, walk)
        if all(_paired(walk, scope, g.node, h.at, group, memo) for g in conds):
            del walk.found[key]


def _paired(walk, scope: Scope, test: cst.CSTNode, at: cst.CSTNode, group: Group, memo: dict) -> bool:
    head = walk._seq_heads.get(id(test))
    if head is None:
        return False
    links = [head]
    while isinstance(links[-1].orelse, cst.If):
        links.append(links[-1].orelse)
    if not any(link.test is test for link in links):
        return False
    last = links[-1].orelse
    bodies = [link.body for link in links] + ([last.body] if isinstance(last, cst.Else) else [None])
    if not any(b is not None and contains(b, at) for b in bodies):
        return False
    key = (id(head), group.axes, group.family, group.ranks)
    if key not in memo:
        memo[key] = _sides_match(walk, scope, links, bodies, group)
    return memo[key]


def _sides_match(walk, scope: Scope, links: list, bodies: list, group: Group) -> bool:
    """Over the branches a member of `group` can take, the same non-empty sequence of collectives on it."""
    members = []
    for link in links:
        rec = walk.seq_tests.get(id(link.test))
        origin = rec[0] if rec is not None else None
        if origin is None or not origin.member:
            return False            # a uniform or another rank-varying test in the chain: not judged here
        members.append(origin.member)
    accepted = MEMBERSHIP[group.family]
    wanted = (group.axes, group.family, group.ranks)
    r = representatives(scope.consts)[0]
    seqs = []
    false_before: frozenset = frozenset()
    for i, body in enumerate(bodies):
        reachable = not any(a <= false_before for a in accepted)
        if i < len(links):
            false_before = false_before | members[i]
        if not reachable:
            continue                # no member of the group gets here
        if body is None:
            return False            # an `else` a member takes, with no collective
        seq = _projected(walk, scope, body, r, wanted, group, members[i] if i < len(links) else None)
        if not seq:
            return False
        seqs.append(seq)
    return len(seqs) >= 2 and all(s == seqs[0] for s in seqs)


def _projected(walk, scope: Scope, body: cst.BaseSuite, r: int, wanted: tuple, group: Group,
               side: Optional[frozenset]) -> Optional[tuple]:
    """The branch's collectives on the group, in order, with their roots; None when not known."""
    stmts = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
    try:
        items, status = SequenceBuilder(walk.analysis.sequences, scope, r).block(stmts)
    except (_Unknown, RecursionError):
        return None
    if status != "next" or _has_split(items):
        return None
    return _project(walk, flatten(items), stmts, wanted, group, side)


def _project(walk, tree: tuple, stmts, wanted: tuple, group: Group, side: Optional[frozenset]) -> Optional[tuple]:
    out: list = []
    for item in tree:
        if isinstance(item, Token):
            if item.group != wanted:
                continue
            root = _root(walk, item, stmts, group, side)
            if root is None:
                return None
            out.append((item.op, root))
        elif isinstance(item, tuple) and item and item[0] in ("choice", "loop"):
            sides = item[2] if item[0] == "choice" else (item[2],)
            inner = [_project(walk, branch, stmts, wanted, group, side) for branch in sides]
            if any(s is None for s in inner):
                return None
            if any(inner):
                out.append((item[0], code_of(item[1], 80) if isinstance(item[1], cst.CSTNode) else str(item[1]),
                            tuple(inner)))
    return tuple(out)


def _root(walk, token: Token, stmts, group: Group, side: Optional[frozenset]) -> Optional[str]:
    """"" for an op without a root; the code of the root (a name read through its one binding in the branch)
    when it is the same on every member of the group, or the end of the pipeline whose member it is (`end:last`:
    this rank's own on a side that singles out that end, or the library's getter of that end's rank); None
    otherwise."""
    pos = _ROOT_POSITION.get(token.op)
    if pos is None:
        return ""
    call = token.call
    func = call.func
    if (func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)) != token.op:
        return None                 # a helper reaching the rooted op: its root is the helper's business
    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value in ("src", "dst")), None)
    if arg is None:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if any(a.star for a in call.args) or len(positional) <= pos:
            return None
        arg = positional[pos]
    if isinstance(arg, cst.Name):
        bound = _bindings(stmts, arg.value)
        if len(bound) > 1:
            return None
        if bound:
            arg = bound[0]
    end = _end_named(walk, arg, group, side)
    if end is not None:
        return f"end:{end}"
    origin = walk.eval(arg)
    if origin is not None and not uniform_over(origin, group):
        return None
    return code_of(arg, 400)


def _end_named(walk, arg: cst.BaseExpression, group: Group, side: Optional[frozenset]) -> Optional[str]:
    """The pipeline end ("first"/"last") whose member of a stage-end group `arg` names: the library's getter of
    that end's global rank, or this rank's own world rank (`dist.get_rank()`) on a side whose test is the one
    predicate of that end (one member of the group takes it)."""
    if group.family not in _STAGE_END_FAMILIES or not isinstance(arg, cst.Call):
        return None
    qual = walk.src.facts.resolve_expr(arg.func) or ""
    last = qual.rsplit(".", 1)[-1]
    if last in _END_RANK and not arg.args:
        return _END_RANK[last]
    if last == "get_rank" and not arg.args and qual.startswith(("torch.distributed.", "deepspeed.comm.")) and \
            side is not None and len(side) == 1:
        return _END_OF.get(next(iter(side)))
    return None


def _bindings(stmts, name: str) -> list:
    """The values `name = value` binds in the branch's own statements (a binding of another form: [None])."""
    out: list = []
    for stmt in stmts:
        if not isinstance(stmt, cst.SimpleStatementLine):
            if any(isinstance(n, cst.Name) and n.value == name for n in _targets(stmt)):
                out.append(None)
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    if isinstance(t.target, cst.Name) and t.target.value == name:
                        out.append(small.value)
                    elif name in {n.value for n in _names(t.target)}:
                        out.append(None)
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and \
                    name in {n.value for n in _names(small.target)}:
                out.append(None)
    return out


def _targets(stmt: cst.CSTNode) -> list:
    """Names bound anywhere inside a compound statement (loop targets, nested assignments, `with ... as`)."""
    out = []
    stack = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.AssignTarget):
            out.extend(_names(n.target))
        elif isinstance(n, (cst.For, cst.CompFor)):
            out.extend(_names(n.target))
        elif isinstance(n, cst.AsName):
            out.extend(_names(n.name))
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
            out.extend(_names(n.target))
        stack.extend(n.children)
    return out
