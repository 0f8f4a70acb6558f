"""The keys of a JSON DeepSpeed config that the program itself reads.

A launcher line hands a config to a script by a flag (`--deepspeed_config configs/llama.json`); the script may
load that same file as data before (or besides) handing it to DeepSpeed -- `cfg = json.load(open(args.deepspeed_config))`,
directly or through helpers of the checked files that end in `json.load`/`hjson.load` -- and read its own
settings from the dict: `cfg.get("precision")`, `cfg["lora"]`, `"lora" in cfg`, `cfg.pop("activation_checkpointing")`.
A key read that way is consumed by the program: DeepSpeed ignores it, but it is no typo (DSL401 stays silent on
it); a config nothing references is read by the run's scripts that take one by a launcher flag. Decided by data flow only: the value of the flag the launcher line passes this file by (argparse /
HfArgumentParser turn `--deepspeed_config` into the attribute `deepspeed_config`), a call that loads JSON from
it, the name that call's result is bound to, and the string keys read from that name in the same scope. A key
nothing reads stays reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import JsonSource, PythonSource

# the calls that parse JSON text or a JSON file into data (`json.load(open(p))`, `hjson.load`, `json.loads(...)`)
_JSON_LOADERS = frozenset({"json.load", "json.loads", "hjson.load", "hjson.loads", "ujson.load", "ujson.loads",
                           "orjson.loads", "commentjson.load", "commentjson.loads"})
_HELPER_DEPTH = 3


def config_keys_read(view: "ProjectView", config: "JsonSource") -> frozenset:
    """The key paths (tuples) of `config` that a script it is handed to reads from the loaded file."""
    return view.memo(f"config_reads:{id(config)}", lambda: frozenset(_keys_read(view, config)))


def _keys_read(view: "ProjectView", config: "JsonSource") -> set:
    """A config a launcher line hands over: the reads of the scripts those lines run, from the flag they pass it
    by. A config nothing references (a DeepSpeed config by its keys only): the reads of every script that a
    launcher line hands a DeepSpeed config by a flag -- the programs of the run that take such a file."""
    from dslint.program.json_kinds import DEEPSPEED_FLAGS, _script_flags
    use = view.json_use(config)
    if use is None or not use.is_config:
        return set()
    program = view.run_program
    targets = {id(launch): target for _, launch, target in program.launch_targets}
    launches = use.launches if use.by_use else view.launches
    out: set = set()
    for sh, launch in launches:
        target = targets.get(id(launch))
        if target is None:
            continue
        dests = {flag.lstrip("-").replace("-", "_") for flag, value in _script_flags(launch)
                 if flag.startswith("--") and value and (flag in DEEPSPEED_FLAGS or use.by_use) and
                 any(c is config or not use.by_use and view.is_deepspeed_config(c)
                     for c in view.launch_json_files(sh, launch, value))}
        if not dests:
            continue
        for src in program.closure(target):
            out |= _reads_in(view, src, dests)
    return out


def _reads_in(view: "ProjectView", src: "PythonSource", dests: set) -> set:
    if src.outline is None or not any(d in src.text for d in dests):
        return set()
    facts = src.facts
    out: set = set()
    for call in facts.calls:
        if not _carries_path(call.node, dests) or not _loads_json(view, src, call.callee, 0):
            continue
        bound = _bound_name(src, call.node)
        if bound is None:
            continue
        info = facts.functions.get(call.scope)
        body = info.node if info is not None else src.module
        out |= _string_keys_read(body, bound)
    return out


def _carries_path(call: cst.Call, dests: set) -> bool:
    """Does an argument of `call` hold the flag's value (`args.deepspeed_config`, `deepspeed_config`, inside
    `open(...)`/`Path(...)` too)?"""
    found = []

    class Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value in dests:
                found.append(node)

        def visit_Name(self, node: cst.Name) -> None:
            if node.value in dests:
                found.append(node)

    for arg in call.args:
        arg.value.visit(Find())
    return bool(found)


def _loads_json(view: "ProjectView", src: "PythonSource", callee: Optional[str], depth: int) -> bool:
    """`callee` parses JSON: a JSON loader, or a function of the checked files whose body calls one (through at
    most `_HELPER_DEPTH` helpers)."""
    if not callee:
        return False
    if callee in _JSON_LOADERS:
        return True
    if depth >= _HELPER_DEPTH:
        return False
    hit = view.function_for_callee(src, callee)
    if hit is None:
        return False
    other, qual = hit
    info = other.facts.functions.get(qual)
    if info is None:
        return False
    return any(_loads_json(view, other, c.callee, depth + 1) for c in info.calls)


def _bound_name(src: "PythonSource", call: cst.Call) -> Optional[str]:
    """The plain name `call`'s result is assigned to (`cfg = load(...)`), else None."""
    parents = src._parents
    node = parents.get(id(call))
    if isinstance(node, cst.Assign) and node.value is call and len(node.targets) == 1 and \
            isinstance(node.targets[0].target, cst.Name):
        return node.targets[0].target.value
    if isinstance(node, cst.AnnAssign) and node.value is call and isinstance(node.target, cst.Name):
        return node.target.value
    return None


def _key(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _string_keys_read(body: cst.CSTNode, name: str) -> set:
    """The top-level keys read from `name` in `body`: `name.get("k")`, `name.pop("k")`, `name.setdefault("k")`,
    `name["k"]` (not as an assignment target), `"k" in name`."""
    out: set = set()
    written: set = set()

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == name and \
                    f.attr.value in ("get", "pop", "setdefault") and node.args and node.args[0].keyword is None:
                key = _key(node.args[0].value)
                if key is not None:
                    out.add((key,))

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Subscript):
                    written.add(id(t.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Subscript):
                written.add(id(node.target))

        def visit_Subscript(self, node: cst.Subscript) -> None:
            if id(node) in written or not (isinstance(node.value, cst.Name) and node.value.value == name):
                return
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                key = _key(node.slice[0].slice.value)
                if key is not None:
                    out.add((key,))

        def visit_Comparison(self, node: cst.Comparison) -> None:
            for target in node.comparisons:
                if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(target.comparator, cst.Name) \
                        and target.comparator.value == name:
                    key = _key(node.left)
                    if key is not None:
                        out.add((key,))

    body.visit(Find())
    return out
