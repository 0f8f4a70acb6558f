"""Plugin modules: a module no launch unit imports, that a program loads by a computed name (issue 30).

A converter script loads its reader and writer as plugins, `importlib.import_module(f"checkpoint_{kind}_{name}")`:
no import statement names them, so no launch unit reaches them and they are analysed as a library would be --
code some unseen program runs, maybe with other ranks. The computed name says which program runs them: its
literal parts (`checkpoint_`, `_`) must match the module's name as the loading script's folder (`sys.path[0]` when
it runs as a script) names it; a name with no literal part (`import_module(name)`) says nothing.

`plugin_program(view, src)`: the loaders of a module no unit reaches, when the program they make creates no process
group -- every unit reaching a loader is started by no launcher line (or one of one process) and holds no call
that creates the default group, the plugins it loads hold none either, and no call reached from the module's own
functions (through the checked files) creates one (`init_process_group`, DeepSpeed's `init_distributed` /
`initialize` / `init_inference`, accelerate's `Accelerator` / `PartialState`, an HF `Trainer` / `TrainingArguments`,
Lightning's `Trainer`). Such a program has no other rank for a collective to wait on -- `torch.distributed` raises
without a group, and the code usually says so itself (`if torch.distributed.is_initialized():`) --, so the rank
hazards found there are unproven (`evidence.plugin_clues`): a checkpoint converter that sets Megatron's parallel
ranks by hand in a loop and loads each rank's shards in one process.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.outline import MODULE_SCOPE
from dslint.program.statement_walks import own_nodes
from dslint.program.units import norm_path

if TYPE_CHECKING:
    from dslint.sources import PythonSource

_LOADERS = ("importlib.import_module", "import_module", "__import__")
_HOLE = r"[A-Za-z0-9_.]+"


def _name_patterns(src: "PythonSource", scope: str, expr: cst.BaseExpression, depth: int = 0) -> list[str]:
    """Regular expressions for the module names a computed name may give: an f-string or a `+` of strings with
    literal parts (holes match any dotted name); a local bound to such a value in the calling function. A literal
    name is matched exactly; a name with no literal part gives none."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return [re.escape(value)] if isinstance(value, str) else []
    if isinstance(expr, cst.FormattedString):
        parts = [re.escape(p.value) if isinstance(p, cst.FormattedStringText) else _HOLE for p in expr.parts]
        return ["".join(parts)] if any(isinstance(p, cst.FormattedStringText) and p.value for p in expr.parts) \
            else []
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and depth < 4:
        left = _name_patterns(src, scope, expr.left, depth + 1) or [_HOLE]
        right = _name_patterns(src, scope, expr.right, depth + 1) or [_HOLE]
        out = [a + b for a in left for b in right]
        return [p for p in out if p != _HOLE + _HOLE]
    if isinstance(expr, cst.Name) and depth < 4:
        info = src.facts.functions.get(scope)
        if info is None:
            return []
        out = []
        for node in own_nodes(info.node):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == expr.value:
                out += _name_patterns(src, scope, node.value, depth + 1)
        return out
    return []


def dynamic_loads(run) -> dict[int, list[tuple["PythonSource", object]]]:
    """id(module) -> [(loading file, its loading call)] for every module of the run that a checked file loads
    by a computed name matching it (the run's `units.Program`, memoised on it)."""
    memo = run.__dict__
    if "_dynamic_loads" in memo:
        return memo["_dynamic_loads"]
    out: dict[int, list] = {}
    for loader in run.python:
        if "import_module" not in loader.text and "__import__" not in loader.text:
            continue
        folder = posixpath.dirname(norm_path(loader.path))
        for call in loader.facts.calls:
            if call.callee not in _LOADERS or not call.node.args:
                continue
            patterns = _name_patterns(loader, call.scope, call.node.args[0].value)
            if not patterns:
                continue
            matcher = re.compile("|".join(f"(?:{p})" for p in patterns))
            for module in run.python:
                if module is loader:
                    continue
                name = _module_name(norm_path(module.path), folder)
                if name is not None and matcher.fullmatch(name):
                    out.setdefault(id(module), []).append((loader, call))
    memo["_dynamic_loads"] = out
    return out


def _module_name(path: str, folder: str) -> Optional[str]:
    rel = posixpath.relpath(path, folder) if folder else path
    if rel.startswith("..") or not rel.endswith(".py"):
        return None
    rel = rel[:-3]
    if rel.endswith("/__init__"):
        rel = rel[: -len("/__init__")]
    return rel.replace("/", ".")


# ---- does the program create a process group? -------------------------------------------------------------------
_LIBRARY_MAKERS = {
    "accelerate": ("Accelerator", "PartialState", "AcceleratorState"),
    "transformers": ("Trainer", "Seq2SeqTrainer", "TrainingArguments", "Seq2SeqTrainingArguments"),
    "lightning": ("Trainer", "Fabric"),
    "pytorch_lightning": ("Trainer",),
    "colossalai": ("launch", "launch_from_torch"),
}


def creates_group(callee: Optional[str]) -> bool:
    """Does a call of `callee` (resolved through imports) create the default process group, or may it: torch's
    `init_process_group`, DeepSpeed's `init_distributed`/`initialize`/`init_inference`, the library objects that
    set it up when the launcher's variables are there (accelerate's state, an HF Trainer and its arguments,
    Lightning's Trainer). An unresolved `init_process_group`/`init_distributed` of any module counts."""
    if not callee:
        return False
    last = callee.rsplit(".", 1)[-1]
    if last in ("init_process_group", "init_distributed"):
        return True
    root = callee.split(".", 1)[0]
    if root == "deepspeed" and last in ("initialize", "init_inference"):
        return True
    return last in _LIBRARY_MAKERS.get(root, ())


def _file_creates(src: "PythonSource") -> bool:
    outline = src.outline
    return outline is None or any(creates_group(callee) for callee, _ in outline.calls)


def _reaches_group(view, src: "PythonSource") -> bool:
    """Does a call reached from any function of `src` (or its top level), through the functions of the checked
    files, create the process group?"""
    from dslint.program.rank.function_summaries import ProjectTaint
    outline = src.outline
    if outline is None:
        return True
    taint = ProjectTaint.of(view)
    calls_by: dict[int, dict[str, list]] = {}

    def calls_of(f, scope) -> list:
        per = calls_by.get(id(f))
        if per is None:
            per = calls_by[id(f)] = {}
            for callee, where in (f.outline.calls if f.outline is not None else ()):
                per.setdefault(where, []).append(callee)
        return per.get(scope, [])

    todo = [(src, scope) for scope in (MODULE_SCOPE, *outline.functions)]
    seen: set = set()
    while todo:
        f, scope = todo.pop()
        key = (id(f), scope)
        if key in seen:
            continue
        seen.add(key)
        if f.outline is None:
            return True
        for callee in calls_of(f, scope):
            if creates_group(callee):
                return True
            if callee is None:
                continue
            for target, qual in taint.call_targets(f, callee, scope):
                if (id(target), qual) not in seen:
                    todo.append((target, qual))
    return False


def plugin_program(view, src: "PythonSource") -> list[tuple["PythonSource", object]]:
    """The (loading file, call) pairs of `src` when it is a plugin module of a program that creates no process
    group (see the module's docstring); empty otherwise -- a module some unit imports, one nothing loads, a
    loader started by a launcher of several processes, or a program that creates a group."""
    memo = view.__dict__.setdefault("_plugin_program", {})
    if id(src) in memo:
        return memo[id(src)]
    memo[id(src)] = []
    run = getattr(view, "run_program", None)
    if run is None or getattr(view, "world_size_override", None) or view._units_reaching.get(id(src)):
        return []
    loads = dynamic_loads(run).get(id(src), [])
    if not loads:
        return []
    loaders = {id(loader): loader for loader, _ in loads}
    for loader in loaders.values():
        reaching = [u for u in run.units if any(f is loader for f in u.files)]
        if not reaching:
            return []       # a loader that is itself a library module: its program is not seen
        for unit in reaching:
            if unit.launches and unit.world_size != 1 or any(_file_creates(f) for f in unit.files):
                return []
        siblings = [m for m in run.python if any(l is loader for l, _ in dynamic_loads(run).get(id(m), []))]
        if any(_file_creates(m) for m in siblings if m is not src):
            return []
    if _reaches_group(view, src):
        return []
    memo[id(src)] = loads
    return loads


def load_dependencies(run, files) -> list:
    """What `plugin_program` may read of the run beyond a context's own files, for the result cache's key: the
    scripts that may load one of `files` by a computed name (by text: they call `import_module`/`__import__` and
    the file lies in or under their folder), the files and launcher scripts of the units reaching them, and the
    modules they may load besides (every file in or under their folder). Decided on paths and texts: nothing is
    parsed."""
    out: dict[int, object] = {}
    loaders = [s for s in run.python if "import_module" in s.text or "__import__" in s.text]
    for loader in loaders:
        folder = posixpath.dirname(norm_path(loader.path))
        if not any(_module_name(norm_path(f.path), folder) is not None for f in files if f is not loader):
            continue
        out.setdefault(id(loader), loader)
        for unit in run.units:
            if any(f is loader for f in unit.files):
                for f in unit.files:
                    out.setdefault(id(f), f)
                for sh, _ in unit.launches:
                    out.setdefault(id(sh), sh)
        for module in run.python:
            if _module_name(norm_path(module.path), folder) is not None:
                out.setdefault(id(module), module)
    return list(out.values())
