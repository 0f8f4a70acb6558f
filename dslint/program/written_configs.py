"""DeepSpeed configs a script writes itself before handing their path over (issue 30, evidence before a finding).

A script that builds its DeepSpeed config as a dict and writes it with `json.dump` to the path it then hands to
`TrainingArguments(deepspeed="ds_config.json")` (or `deepspeed.initialize(config=...)`) runs under that dict, not
under a file of the repository that happens to bear the name (the file does not exist until the script runs).
`written_configs(project, src)` finds, in one file, every

    with open(PATH, "w") as fh:            # or json.dump(obj, open(PATH, "w"))
        json.dump(OBJ, fh)

whose PATH evaluates to a string (a literal, a name bound to one, or a parameter of the writing function whose
default is a string that no call of the function in this file overrides) and whose OBJ evaluates to a dict
(`dslint.program.pyconfig`: literals, `dict(...)`, a helper's return), keyed by the normalised path. Both paths
are relative to the same process's working directory, so the same normalised string names the same file.
Limit: the write and the hand-over must be in the same file; a path built at run time (`os.path.join(out, ...)`)
stays unknown, and so does the config.
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from dslint.sources.cstwalk import walk
from dslint.sources.literals import literal_value

_DUMPS = ("json.dump",)
_OPENS = ("open", "builtins.open", "io.open")


def _mode_writes(call: cst.Call) -> bool:
    mode = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "mode"), None)
    if mode is None:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        mode = positional[1] if len(positional) > 1 else None
    value = literal_value(mode) if mode is not None else None
    return isinstance(value, str) and ("w" in value or "x" in value)


def _path_arg(call: cst.Call) -> Optional[cst.BaseExpression]:
    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "file"), None)
    if arg is None:
        arg = next((a.value for a in call.args if a.keyword is None and not a.star), None)
    return arg


def written_configs(project: Any, src: Any) -> dict[str, tuple[Any, int]]:
    """normalised path -> (the dict written there, the line of the `json.dump`), for the dicts `src` dumps to a
    known path. Memoised on the view per file."""
    memo = project.__dict__.setdefault("_written_configs", {})
    hit = memo.get(id(src))
    if hit is None:
        hit = memo[id(src)] = _find(project, src) if "json" in src.text and "dump" in src.text else {}
    return hit


def _find(project: Any, src: Any) -> dict[str, tuple[Any, int]]:
    from dslint.program.units import norm_path
    out: dict[str, tuple[Any, int]] = {}
    dumps = [c for c in src.facts.calls if c.callee in _DUMPS and len(c.node.args) >= 2]
    if not dumps:
        return out
    for site in dumps:
        obj, handle = site.node.args[0].value, site.node.args[1].value
        opened = _opened(src, site, handle)
        if opened is None:
            continue
        path = _path_value(project, src, site.scope, opened)
        if not isinstance(path, str) or not path.endswith(".json"):
            continue
        value = project.config_value(src, obj, site.scope, site.node)
        if not isinstance(value, dict) or getattr(value, "based_unknown", False):
            continue
        key = norm_path(path)
        line = src.span(site.node).line
        if key in out and out[key][0] != value:
            out[key] = (None, line)        # two different dicts to one path: which one runs is not known here
        else:
            out[key] = (value, line)
    return {k: v for k, v in out.items() if v[0] is not None}


def _opened(src: Any, site: Any, handle: cst.BaseExpression) -> Optional[cst.Call]:
    """The `open(PATH, "w")` call the handle `json.dump` writes to is: inline, or the `with ... as NAME` around
    the dump in its function."""
    def is_open(node: Any) -> bool:
        return isinstance(node, cst.Call) and (src.facts.resolve_expr(node.func) or "") in _OPENS \
            and _mode_writes(node)
    if is_open(handle):
        return handle
    if not isinstance(handle, cst.Name):
        return None
    info = src.facts.functions.get(site.scope)
    body = info.node if info is not None else src.module
    for node in walk(body):
        if not isinstance(node, cst.With):
            continue
        for item in node.items:
            if item.asname is not None and isinstance(item.asname.name, cst.Name) \
                    and item.asname.name.value == handle.value and is_open(item.item) \
                    and any(n is site.node for n in walk(node.body)):
                return item.item
    return None


def _path_value(project: Any, src: Any, scope: str, opened: cst.Call) -> Any:
    expr = _path_arg(opened)
    if expr is None:
        return None
    value = project.config_value(src, expr, scope, opened)
    if isinstance(value, str):
        return value
    info = src.facts.functions.get(scope)
    if not isinstance(expr, cst.Name) or info is None or expr.value not in info.params:
        return None
    # a parameter of the writing function: its default, when no call of the function in this file hands it
    # and the function never rebinds it
    params = list(info.node.params.params) + list(info.node.params.kwonly_params)
    param = next((p for p in params if p.name.value == expr.value), None)
    if param is None or param.default is None:
        return None
    default = literal_value(param.default)
    if not isinstance(default, str):
        return None
    if any(isinstance(n, (cst.AssignTarget, cst.AugAssign)) and isinstance(getattr(n, "target", None), cst.Name)
           and n.target.value == expr.value for n in walk(info.node.body)):
        return None
    index = [p.name.value for p in info.node.params.params].index(expr.value) \
        if param in info.node.params.params else None
    if index is not None and info.class_name is not None:
        index -= 1          # `self` is handed by the call's receiver
    for call in src.facts.calls:
        if (call.callee or "").rsplit(".", 1)[-1] != info.name:
            continue
        positional = [a for a in call.node.args if a.keyword is None]
        if any(a.star for a in call.node.args) or any(a.keyword is not None and a.keyword.value == expr.value
                                                      for a in call.node.args) \
                or index is not None and len(positional) > index:
            return None
    return default
