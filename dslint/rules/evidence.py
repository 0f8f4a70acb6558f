"""The evidence a finding rests on (issue 30): the facts of its launch unit that make the hazard real -- the
collective call, the DeepSpeed engine (where `deepspeed.initialize`/`init_inference` built it, or the use that
shows an object is one), the config that gives ZeRO-3, the MoE layer, the launcher line and its world size, the
call that creates the process group -- as `Clue`s for `Diagnostic.evidence`. Rules decide from these whether
their evidence is complete (`Diagnostic.proven`); each rule's docs say what "complete" means for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional

from dslint.rules.base import Clue

if TYPE_CHECKING:
    from dslint.program.collective_sites import Site
    from dslint.program.query import Program
    from dslint.sources import AnySource, PythonSource

# calls that create the default process group (or an engine/accelerator, which does so when there is none)
_GROUP_MAKERS = ("init_process_group", "init_distributed", "initialize", "initialize_model_parallel")


def _creates_group(callee: Optional[str]) -> bool:
    if not callee:
        return False
    last = callee.rsplit(".", 1)[-1]
    if last == "init_process_group":
        return callee.startswith(("torch.distributed", "dist.")) or callee == "init_process_group" or \
            "distributed" in callee
    if last in ("init_distributed", "initialize"):
        return callee.startswith("deepspeed")
    return callee.startswith("accelerate") and last == "Accelerator"


_FORWARD_WHY = ("its forward: ", "every generation step runs a forward: ")


def site_clues(site: "Site") -> list[Clue]:
    """The collective a hazard's site is or reaches, then what makes it one (engine, config, MoE layer)."""
    why = site.why
    if why.startswith(_FORWARD_WHY):
        why = why.split(": ", 1)[0]         # why the forward is collective: the engine/config/MoE clues below
    if site.chain:
        inner = site.chain[-1]
        out = [Clue("collective", f"`{site.target}`: {why}", inner.node, inner.source)]
    else:
        out = [Clue("collective", f"`{site.label}`: {why}", site.call, site.source)]
    for fact in site.evidence:
        out.append(Clue(fact.kind, fact.note, fact.at, fact.source, fact.found, fact.path))
    return out


def launch_clues(program: "Program", src: "AnySource") -> list[Clue]:
    """The launcher lines that run the file (with their world size), or the world size given to dslint."""
    out = []
    for sh, launch in list(program.launches_for(src))[:2]:
        size = f", world size {launch.world_size}" if launch.world_size else ""
        out.append(Clue("launcher", f"{launch.launcher} launch{size}", launch.line, sh))
    if not out and getattr(program.view, "world_size_override", None):
        out.append(Clue("world-size", f"--world-size {program.view.world_size_override}"))
    return out


def group_creations(src: "PythonSource", scope: Optional[str] = None) -> list:
    """The calls of `src` (of one scope) that create the default process group, in order."""
    return [c for c in src.facts.calls if (scope is None or c.scope == scope) and _creates_group(c.callee)]


def group_created_between(src: "PythonSource", scope: str, after: int, before: int) -> Optional[object]:
    """A call of `scope` after line `after` and before line `before` that creates the process group: a rank that
    leaves before it never joins the group the later collectives run on (issue 30: a `raise` before any process
    group exists is no DSL103)."""
    for call in group_creations(src, scope):
        line = src.span(call.node).line
        if after < line < before:
            return call
    return None


def group_clues(src: "PythonSource") -> list[Clue]:
    first = next(iter(group_creations(src)), None)
    if first is None:
        return []
    return [Clue("process-group", f"created by `{first.callee}`", first.node, src)]


def unseen(kind: str, note: str) -> Clue:
    return Clue(kind, note, found=False)


def dedupe(clues: Iterable[Clue]) -> list[Clue]:
    out, seen = [], set()
    for c in clues:
        key = (c.kind, c.note, id(c.source), repr(c.at) if not hasattr(c.at, "_codegen") else id(c.at), c.found)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
