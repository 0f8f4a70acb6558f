"""Values a program hands to torch as a process's rank (issue 30, cause 8: ranks from a custom launcher).

A program that starts its workers itself (Ray actors, its own process pool) has no launcher filling `RANK`: it
tells torch the rank of each worker, either through the environment variables torch's `env://` rendezvous and
DeepSpeed's `init_distributed` read (`os.environ["RANK"] = str(self.rank)`, torch/distributed/rendezvous.py
`_env_rendezvous_handler` reads `RANK`/`WORLD_SIZE`; `LOCAL_RANK` is the launcher contract every process reads its
device from) or as the `rank=` argument of `torch.distributed.init_process_group` / `deepspeed.init_distributed`.
Whatever is handed over there is, by that API's meaning, the process's rank: distinct on every process of the
world. So the field or parameter it is read from holds a rank id, whatever it is called and however it arrived
(an actor's constructor argument, a callback's parameter).

Syntax only (the expressions of one function body); `ProjectTaint` turns them into rank fields and parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from dslint.program.facts import FunctionInfo, dotted_name
from dslint.sources.literals import UNKNOWN, literal_value
from dslint.program.statement_walks import iter_assigns

if TYPE_CHECKING:
    from dslint.sources import PythonSource

# the environment variables a process's own rank is read from by torch's env:// rendezvous (`RANK`), DeepSpeed's
# `init_distributed` (`RANK`, `LOCAL_RANK`, or MPI's `OMPI_COMM_WORLD_*` when it discovers the MPI environment) and
# every launcher-aware script (`LOCAL_RANK`): a value written there is this process's (local) rank
RANK_SINK_KEYS = frozenset({"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})
# calls whose `rank=` argument is the calling process's rank in the group being formed
RANK_SINK_CALLS = frozenset({"torch.distributed.init_process_group", "torch.distributed.distributed_c10d"
                             ".init_process_group", "deepspeed.init_distributed", "deepspeed.comm.init_distributed",
                             "deepspeed.comm.comm.init_distributed"})
# words a file must spell to hand a rank over (a prefilter)
SINK_WORDS = ("environ", "init_process_group", "init_distributed", "putenv")

# how a rank id found so is explained (`Origin.via`), and what its field was stored from for
# `ProjectTaint.rank_field_stores`: the process's rank itself (as `LAUNCHER_OPTION` is the local rank itself)
HANDED_VIA = "handed to torch as this process's rank"
HANDED_RANK = "handed rank"

# conversions that keep the value: `str(rank)`, `int(rank)`
_KEEPING = ("str", "int")


def handed_value(e: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The value `e` carries unchanged: itself, the argument of `str(...)`/`int(...)`, the one expression of an
    f-string that holds nothing else (`f"{rank}"`). None for a literal (`os.environ["LOCAL_RANK"] = "0"`: the
    same on every process)."""
    while True:
        if isinstance(e, cst.Call) and dotted_name(e.func) in _KEEPING and len(e.args) == 1 and not e.args[0].star \
                and e.args[0].keyword is None:
            e = e.args[0].value
            continue
        if isinstance(e, cst.FormattedString) and len(e.parts) == 1 and \
                isinstance(e.parts[0], cst.FormattedStringExpression) and e.parts[0].format_spec is None:
            e = e.parts[0].expression
            continue
        break
    if literal_value(e) is not UNKNOWN:
        return None
    return e


def rank_sinks(src: "PythonSource", info: FunctionInfo) -> Iterator[tuple[cst.BaseExpression, cst.CSTNode, str]]:
    """(value handed over, the node handing it, how) for every place the body of `info` hands torch a process's
    rank: `os.environ[K] = v`, `os.environ.update(K=v)` / `({K: v})`, `os.environ.setdefault(K, v)`,
    `os.putenv(K, v)` for K a rank variable (`RANK_SINK_KEYS`), and `rank=v` of a process-group initialisation."""
    text = src.text
    if not any(w in text for w in SINK_WORDS):
        return
    facts = src.facts
    for node in iter_assigns(info.node.body):
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Subscript) and len(target.slice) == 1 and \
                    isinstance(target.slice[0].slice, cst.Index) and \
                    facts.resolve_expr(target.value) in ("os.environ", "environ") and \
                    literal_value(target.slice[0].slice.value) in RANK_SINK_KEYS:
                value = handed_value(node.value)
                if value is not None:
                    key = literal_value(target.slice[0].slice.value)
                    yield value, node, f'written to `os.environ["{key}"]`'
    for call in info.calls:
        callee = call.callee or ""
        args = call.node.args
        if callee in RANK_SINK_CALLS:
            arg = call.keyword("rank")
            value = handed_value(arg.value) if arg is not None else None
            if value is not None:
                yield value, call.node, f"the `rank=` of `{callee.rsplit('.', 1)[-1]}(...)`"
        elif callee in ("os.environ.update", "environ.update"):
            pairs = [(a.keyword.value, a.value) for a in args if a.keyword is not None]
            if len(args) == 1 and args[0].keyword is None and isinstance(args[0].value, cst.Dict):
                pairs += [(literal_value(el.key), el.value) for el in args[0].value.elements
                          if isinstance(el, cst.DictElement)]
            for key, v in pairs:
                value = handed_value(v) if key in RANK_SINK_KEYS else None
                if value is not None:
                    yield value, call.node, f'written to `os.environ["{key}"]`'
        elif callee in ("os.environ.setdefault", "environ.setdefault", "os.putenv") and len(args) == 2 \
                and not any(a.star or a.keyword is not None for a in args):
            key = literal_value(args[0].value)
            value = handed_value(args[1].value) if key in RANK_SINK_KEYS else None
            if value is not None:
                yield value, call.node, f'written to `os.environ["{key}"]`'


def handed_rank_params(src: "PythonSource", info: FunctionInfo) -> dict[str, tuple[cst.Name, cst.CSTNode, str]]:
    """Parameters of `info` the body hands over as the process's rank as they came (`def worker(rank):
    os.environ["RANK"] = str(rank)`): parameter → (its node in the signature, the node handing it, how)."""
    out: dict[str, tuple[cst.Name, cst.CSTNode, str]] = {}
    params = {p.name.value: p.name for p in (*info.node.params.posonly_params, *info.node.params.params,
                                             *info.node.params.kwonly_params)}
    for value, node, how in rank_sinks(src, info):
        if isinstance(value, cst.Name) and value.value in params and value.value not in ("self", "cls") \
                and not _rebound(info, value.value):
            out.setdefault(value.value, (params[value.value], node, how))
    return out


def handed_rank_fields(src: "PythonSource", info: FunctionInfo) -> dict[str, tuple[cst.Attribute, cst.CSTNode, str]]:
    """Fields of `self` the body of a method hands over as the process's rank (`os.environ["RANK"] =
    str(self.rank)`): attribute name → (the read, the node handing it, how)."""
    out: dict[str, tuple[cst.Attribute, cst.CSTNode, str]] = {}
    if not info.class_name:
        return out
    for value, node, how in rank_sinks(src, info):
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
            out.setdefault(value.attr.value, (value, node, how))
    return out


def _rebound(info: FunctionInfo, name: str) -> bool:
    """Does the body bind `name` by `=` (the parameter no longer holds what the caller passed)?"""
    return any(isinstance(t.target, cst.Name) and t.target.value == name
               for node in iter_assigns(info.node.body) for t in node.targets)
