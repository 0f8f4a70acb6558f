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


def one_process_clues(program: "Program", src: "AnySource") -> list[Clue]:
    """Where the checked scripts start `src`'s program only with plain `python x.py` commands (no launcher
    line, no replicating wrapper, no process spawning in the program: `ProjectView.python_runs_only`), the
    clues that say so -- a rank hazard there has no other rank to wait on, as far as the checked files tell:
    its evidence is incomplete (issue 30, launcher-single-gpu-include). Empty otherwise."""
    try:
        runs = program.python_runs_only(src)
    except Exception:
        return []
    if not runs:
        return []
    sh, run = runs[0]
    what = f"python {run.script}" if run.script else f"python -m {run.module}"
    more = f" (and {len(runs) - 1} more such command(s))" if len(runs) > 1 else ""
    return [Clue("launcher", f"started only as `{what}`: one process{more}", run.line, sh),
            unseen("world-size", "no launcher line (deepspeed, torchrun, accelerate, srun/mpirun) or process "
                                 "spawning starts several processes of this program")]


def plugin_clues(program: "Program", src: "AnySource") -> list[Clue]:
    """Where `src` is a plugin module that a program loads by a computed name and that program creates no process
    group (`plugins.plugin_program`: no launcher line of several processes, no `init_process_group` /
    `deepspeed.initialize` / Accelerator / Trainer in it or reached from the module), the clues that say so -- a
    collective there has no other rank to wait on (issue 30, single-process-tool). Empty otherwise."""
    try:
        loads = program.plugin_program(src)
    except Exception:
        return []
    if not loads:
        return []
    loader, call = loads[0]
    what = loader.path.rsplit("/", 1)[-1]
    return [Clue("program", f"loaded by a computed name in {what} (`{call.callee}`), which no launcher line of "
                            f"several processes starts", call.node, loader),
            unseen("process-group", "no call in that program or reached from this module creates a process group "
                                    "(init_process_group, deepspeed.initialize/init_distributed, an Accelerator, "
                                    "a Trainer): one process")]


def unreached_clues(program: "Program", src: "AnySource", diag) -> list[Clue]:
    """Where no program of the run reaches the function or class holding the finding (a vendored library's
    class that no program of the repository constructs, calls or subclasses: `Program.unreached`), the clue that
    says so -- the hazard is in code no program runs, as far as the checked files tell (issue 30,
    vendored-library-unreached). Empty otherwise."""
    from dslint.rules.base import span_of
    where = diag.source or src
    if getattr(where, "kind", "") != "python" or diag.at is None:
        return []
    try:
        line = span_of(where, diag.at).line
        found = program.unreached(where, line)
    except Exception:
        return []
    if not found:
        return []
    name, first = found
    if program.unloaded_module(where):
        return [unseen("program", f"nothing in the repository loads the module of `{name}` ({where.path}:{first}): "
                                  f"no program imports it, no file of its project folder spells its name "
                                  f"`{where.path.replace(chr(92), '/').rsplit('/', 1)[-1][:-3]}` (an import, a "
                                  f"string import, a config, a command line), and no import by a computed name "
                                  f"can give it, though the programs use its package: its code never runs")]
    return [unseen("program", f"no program of the run reaches `{name}` ({where.path}:{first}): no launched or "
                              f"self-running script, nor any file it imports, constructs, calls, subclasses or "
                              f"names it")]


def dead_branch_clues(program: "Program", src: "AnySource", diag) -> list[Clue]:
    """Where the finding lies in a branch no execution takes -- an `if` whose test its data flow decides, a
    switch bound only to a literal (`using_hat_freeze = False` then `if using_hat_freeze:`), `if False:`
    (`dslint.program.dead_branches`) -- the clue that says so: the hazard is in code the file never runs as it
    stands (issue 30, dead-literal-switch). Empty otherwise."""
    from dslint.rules.base import span_of
    where = diag.source or src
    if getattr(where, "kind", "") != "python" or diag.at is None:
        return []
    try:
        branch = program.dead_branch(where, span_of(where, diag.at).line)
    except Exception:
        return []
    if branch is None:
        return []
    part = "body" if not branch.value else "`else` part"
    return [unseen("program", f"the {part} of the `if` at {where.path}:{branch.test_line} never runs: its test is "
                              f"always {branch.value} ({branch.why})")]


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


# ---- the other rule families: what each finding rests on, from the facts of its launch-unit view ------------
def family_evidence(code: str, ctx, diag) -> tuple[list[Clue], Optional[bool]]:
    """Evidence for a diagnostic its rule gave none: (clues, proven) -- proven None leaves the diagnostic's own.
    DSL2xx/DSL3xx: the MoE layer, the engine (or Trainer/DDP/accelerate) that trains the model on several ranks,
    the config with its ZeRO stage, the launcher; DSL4xx: the config and what hands it to DeepSpeed; DSL5xx:
    the launcher line and its config."""
    family = code[:4]
    src = ctx.source
    program = ctx.program
    if family in ("DSL2", "DSL3"):
        clues = moe_clues(program, src) if family == "DSL2" else []
        stage = stage_clues(program, src)
        if family == "DSL2":
            stage = [c for c in stage if c.found]       # the MoE rules say themselves where a stage matters
        clues += engine_clues(program, src) + stage + launch_clues(program, src)
        proven = None
        if code == "DSL204":
            # issue 30: the token count matters only where the MoE layer is in the model this code feeds
            proven = any(c.kind == "moe-layer" and c.found for c in clues)
        if code == "DSL303":
            # issue 30: a gradient reduction that can differ needs ZeRO 1-3 or several ranks training the model
            proven = any(c.found and c.kind in ("engine", "init_inference", "trainer", "ddp", "accelerate")
                         or c.kind == "zero-stage" and c.found for c in clues)
            if not proven:
                clues.append(unseen("engine", "no deepspeed.initialize, Trainer, DDP or accelerate training of this "
                                              "model, and no config with a ZeRO stage, in its launch unit"))
        return dedupe(clues), proven
    if family == "DSL4":
        return dedupe(config_clues(program, src, diag)), None
    if family == "DSL5":
        return [Clue("launcher", "launcher line", diag.at, diag.source)], None
    return [], None


def moe_sites_reaching(program: "Program", src: "AnySource", sites: list) -> list:
    """The MoE constructions (`models.moe.MoESite`) that are in the program `src` runs in: built in `src`, in a
    file `src` imports (transitively), in a file of a launch unit that reaches `src`, or in a file imported by
    one that also imports `src` (the model file and the data file of one trainer). A layer merely defined in the
    same package -- a test helper's model beside a test that builds a dense HF model (issue 30: MoE in the
    package, not in the model the engine holds) -- is not."""
    if not sites or not hasattr(src, "facts"):
        return []
    try:
        run = program.run_program
    except Exception:
        return list(sites)
    return program.memo(f"moe-reaching:{id(src)}:{len(sites)}", lambda: _reaching(program, run, src, sites))


def _reaching(program: "Program", run, src: "AnySource", sites: list) -> list:
    ctx = run.context_of(src)
    built = _built_in(program, ctx.files if ctx is not None and ctx.units else None)
    closure = {id(f) for f in run.closure(src)} | {id(src)}
    inside = [s for s in sites if id(s.src) in closure and built(s)]
    if inside:
        return inside
    units = ctx.units if ctx is not None else []
    reached = [s for s in sites if built(s) and
               any(any(f is s.src for f in u.files) for u in units if any(f is src for f in u.files))]
    if reached:
        return reached
    # a file that imports both (within the files analysed with `src`; bounded: a package checked as a whole)
    files = [f for f in (ctx.files if ctx is not None else []) if f is not src][:400]
    wanted = {id(s.src): s for s in sites}
    out: dict[int, object] = {}
    for f in files:
        deps = {id(d) for d in run.closure(f)}
        if id(src) in deps:
            for key, site in wanted.items():
                if key in deps:
                    out.setdefault(id(site), site)
    return [s for s in sites if id(s) in out]


def _built_in(program: "Program", files: Optional[list]):
    """A test of MoE sites: is the class or function holding the site named by a file of the program (`files`:
    the files of the launch units `src` runs in; None -- no unit reaches it -- admits every site)? A model class
    of the package that no file of the program constructs, subclasses or names (an evaluation-only class whose
    `ep_size` comes from a saved config, beside the training class the program builds) is not in the model the
    program trains (`Program.named_by`)."""
    if files is None:
        return lambda site: True

    def built(site) -> bool:
        try:
            line = site.src.span(site.call.node).line
        except Exception:
            return True
        return program.named_by(site.src, line, files)
    return built


def moe_clues(program: "Program", src: "AnySource") -> list[Clue]:
    try:
        sites = program.moe().sites
    except Exception:
        return []
    if not sites:
        return []
    reaching = moe_sites_reaching(program, src, sites)
    site = next((s for s in reaching if s.src is src), reaching[0] if reaching else None)
    if site is None:
        other = sites[0]
        return [Clue("moe-layer", f"no DeepSpeed MoE layer in the program this file runs in (one is built in "
                                  f"{other.src.path}, which nothing that imports this file imports)", found=False)]
    return [Clue("moe-layer", "DeepSpeed MoE layer", site.call.node, site.src)]


def _training_calls(program: "Program", src: "AnySource") -> list[Clue]:
    """The first call of the view (this file's first) that trains a model on several ranks: an engine, a
    Trainer, DDP/FSDP, an Accelerator. Found on the outlines; only the file found is read for the line."""
    engine_builder = program.engine_builder
    order = sorted(program.python, key=lambda s: s is not src)
    for other in order[:400]:
        outline = getattr(other, "outline", None)
        if outline is None:
            continue
        for callee, _scope in outline.calls:
            kind = _training_kind(callee, engine_builder)
            if kind is None:
                continue
            call = next((c for c in other.facts.calls if c.callee == callee), None)
            note = f"`{callee}`"
            return [Clue(kind, note, call.node if call is not None else None, other)]
    return []


def _training_kind(callee: Optional[str], engine_builder) -> Optional[str]:
    if not callee:
        return None
    built = engine_builder(callee)
    if built:
        return "init_inference" if built == "init_inference" else "engine"
    last = callee.rsplit(".", 1)[-1]
    if last in ("DistributedDataParallel", "DDP", "FullyShardedDataParallel"):
        return "ddp"
    if last == "Accelerator":
        return "accelerate"
    if last.endswith("Trainer") and callee.startswith(("transformers", "trl")):
        return "trainer"
    return None


def engine_clues(program: "Program", src: "AnySource") -> list[Clue]:
    return _training_calls(program, src)


def stage_clues(program: "Program", src: "AnySource") -> list[Clue]:
    """The config with a known ZeRO stage that applies to the file (or, for a model file, to the run)."""
    try:
        configs = program.configs_near(src) if hasattr(src, "facts") else []
    except Exception:
        configs = []
    for config in configs:
        stage = config.zero_stage
        if stage is None:
            continue
        if config.source is not None:
            return [Clue("zero-stage", f"ZeRO stage {stage}", ("zero_optimization", "stage")
                         if isinstance(config.get("zero_optimization"), dict) and "stage" in config.get(
                             "zero_optimization") else None, config.source)]
        return [Clue("zero-stage", f"ZeRO stage {stage} ({config.origin})")]
    for json_src in program.json_configs[:50]:
        data = json_src.data if isinstance(json_src.data, dict) else {}
        zero = data.get("zero_optimization")
        if isinstance(zero, dict) and isinstance(zero.get("stage"), int):
            return [Clue("zero-stage", f"ZeRO stage {zero['stage']} (a config of the run)",
                         ("zero_optimization", "stage"), json_src)]
    return [Clue("zero-stage", "no DeepSpeed config with a known ZeRO stage reaches this code", found=False)]


def config_clues(program: "Program", src: "AnySource", diag) -> list[Clue]:
    """A config finding: the config (the file, or the dict built in a script) and what hands it to DeepSpeed; where
    its project pins no DeepSpeed but another sub-project does, the release it was judged at instead
    (`Program.version_note`)."""
    note = program.version_note(src)
    version = [Clue("deepspeed-version", note)] if note else []
    if getattr(src, "kind", "") != "json":
        return [Clue("config", "DeepSpeed config built in Python", diag.at)] + version
    out = [Clue("config", "read as a DeepSpeed config", None, src)]
    consumers = consumer_clues(program, src)
    out += consumers or [unseen("consumer", "no launcher or script seen handing it to DeepSpeed: a DeepSpeed config "
                                            "by its keys")]
    return out + version


def consumer_clues(program: "Program", config: "AnySource") -> list[Clue]:
    """Launcher lines (`--deepspeed cfg.json`) and script calls (`deepspeed.initialize(config=...)`,
    `TrainingArguments(deepspeed=...)`) that hand `config` to DeepSpeed."""
    from pathlib import Path
    view = program.view
    out: list[Clue] = []
    for sh, launch in view.launches[:200]:
        for ref in launch.config_paths:
            if any(c is config for c in view._json_by_reference(ref, Path(sh.path).parent)):
                out.append(Clue("consumer", f"{launch.launcher} launch hands it to DeepSpeed", launch.line, sh))
                break
        if len(out) >= 2:
            return out
    try:
        scripts = program.scripts_using(config)
    except Exception:
        scripts = []
    for script in scripts[:2]:
        node = None
        try:
            for value, at in view.literal_configs(script):
                if isinstance(value, str) and any(c is config for c in view._json_by_reference(
                        value, Path(script.path).parent)):
                    node = at
                    break
        except Exception:
            node = None
        out.append(Clue("consumer", "handed to DeepSpeed here" if node is not None else "a script given it",
                        node, script))
    return out
