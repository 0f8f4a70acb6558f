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

The same loaded dict tells which keys the program **writes** before DeepSpeed reads it (`config_keys_written`):
`cfg["train_batch_size"] = n`, `cfg["optimizer"]["params"]["lr"] = lr`, through a name bound to a section
(`opt = cfg["optimizer"]; opt["params"]["lr"] = lr`), `cfg.update({...})`, `cfg.pop("k")`, `del cfg["k"]`, and
in the checked functions the dict is handed to (`self.initialize_deepspeed(ds_config=cfg)`: the parameter it
arrives as), in source order up to the `deepspeed.initialize`/`init_inference` call that takes it -- only when
that call is found: a program that fills a dict but hands DeepSpeed the file's path fills nothing. What the file
holds at a key written there never reaches DeepSpeed (an `"auto"` the program fills itself is no DSL409).
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


def config_keys_written(view: "ProjectView", config: "JsonSource") -> frozenset:
    """The key paths (tuples) of `config` that a script it is handed to writes into (or removes from) the loaded
    dict before handing it to DeepSpeed: what the file holds there is not what DeepSpeed reads."""
    use = view.json_use(config)
    if use is None or not use.by_use:
        return frozenset()      # only a file a launcher line hands over: another script's writes are not its
    return view.memo(f"config_writes:{id(config)}", lambda: frozenset(_over_loads(view, config, _writes_from)))


def _keys_read(view: "ProjectView", config: "JsonSource") -> set:
    out = _over_loads(view, config, lambda view, src, call, bound, body: _string_keys_read(body, bound))
    return out | _entry_keys_of_users(view, config)


def _entry_keys_of_users(view: "ProjectView", config: "JsonSource") -> set:
    """The keys the project's own DeepSpeed reads (`entry_keys_read`) where a script that uses `config`
    initialises DeepSpeed through it (`from msamp import deepspeed; deepspeed.initialize(args=args, ...)` with
    the file passed by `--deepspeed_config`): the files the script imports included."""
    from dslint.program.config_handoffs import _hands_config
    from dslint.program.pyconfig import _takes_config
    program = view.run_program
    out: set = set()
    seen: set = set()
    for script in view.scripts_using(config):
        for src in program.closure(script):
            if id(src) in seen:
                continue
            seen.add(id(src))
            outline = src.outline
            if outline is None or not any(c and _takes_config(c) for c, _ in outline.calls):
                continue
            for call in src.facts.calls:
                if _hands_config(call):
                    out |= entry_keys_read(view, src, call)
    return out


def _over_loads(view: "ProjectView", config: "JsonSource", collect) -> set:
    """`collect(view, src, load call, bound name, scope body)` over every load of `config` as data by the scripts
    it is handed to. A config a launcher line hands over: the scripts those lines run, from the flag they pass
    it by. A config nothing references (a DeepSpeed config by its keys only): every script that a launcher line
    hands a DeepSpeed config by a flag -- the programs of the run that take such a file."""
    from dslint.program.json_kinds import DEEPSPEED_FLAGS, _script_flags
    use = view.json_use(config)
    if use is None or not use.is_config:
        return set()
    program = view.run_program
    targets = {id(launch): target for _, launch, target in program.launch_targets}
    launches = use.launches if use.by_use else view.launches
    out: set = set()
    done: set = set()       # (file, flags) already read: many launch lines run scripts over one package
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
        flags = frozenset(dests)
        for src in program.closure(target):
            # what a file's loads give is a function of the file and the flags: read once (a union)
            if (id(src), flags) not in done:
                done.add((id(src), flags))
                out |= _loads_in(view, src, dests, collect)
    return out


def _loads_in(view: "ProjectView", src: "PythonSource", dests: set, collect) -> set:
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
        out |= collect(view, src, call.node, bound, body)
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


# --- writes -------------------------------------------------------------------------------------------------

_HANDOFFS = frozenset({"deepspeed.initialize", "deepspeed.init_inference"})
_WRITE_DEPTH = 3


def _writes_from(view: "ProjectView", src: "PythonSource", load: cst.Call, bound: str, body: cst.CSTNode) -> set:
    from dslint.program.facts import MODULE_SCOPE
    scope = next((c.scope for c in src.facts.calls if c.node is load), MODULE_SCOPE)
    info = src.facts.functions.get(scope)
    writes: set = set()
    handed = _DictWrites(view, src, info.class_name if info is not None else None, {bound: ()}, writes, 0,
                         start=load).run(body)
    return writes if handed else set()     # the dict itself must reach DeepSpeed (not the file's path)


def _key_path(node: cst.BaseExpression, aliases: dict) -> Optional[tuple]:
    """`cfg["a"]["b"]` as the key path it names (the alias's own path first), None when it is not a chain of
    string subscripts on an alias (`cfg` itself: its path)."""
    keys = []
    while isinstance(node, cst.Subscript):
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        key = _key(node.slice[0].slice.value)
        if key is None:
            return None
        keys.append(key)
        node = node.value
    if isinstance(node, cst.Name) and node.value in aliases:
        return aliases[node.value] + tuple(reversed(keys))
    return None


class _DictWrites(cst.CSTVisitor):
    """The writes into the dict (known by the names in `aliases`, each bound to the key path it holds) in one
    function body, in source order from `start` (the load) up to the DeepSpeed call that takes it (`handed`);
    the checked functions it is passed to are walked from their parameter."""

    def __init__(self, view, src, cls, aliases: dict, writes: set, depth: int, start=None) -> None:
        self.view, self.src, self.cls, self.aliases = view, src, cls, dict(aliases)
        self.writes, self.depth = writes, depth
        self.active, self.start, self.handed, self._root = start is None, start, False, None
        self._callees = None

    def run(self, body: cst.CSTNode) -> bool:
        self._root = body
        body.visit(self)
        return self.handed

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.handed:
            return False
        if node is not self._root and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False                    # a nested definition runs when called, not here
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if original_node is self.start:
            self.active = True
        super().on_leave(original_node)

    def _write(self, path: Optional[tuple]) -> None:
        if self.active and path:            # the dict itself rebound (`cfg = {...}`) is no key written
            self.writes.add(path)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.active:
            return
        for t in node.targets:
            self._target(t.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.active and node.value is not None:
            self._target(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.active:
            self._write(_key_path(node.target, self.aliases))

    def visit_Del(self, node: cst.Del) -> None:
        if not self.active:
            return
        targets = [e.value for e in node.target.elements] if isinstance(node.target, cst.Tuple) else [node.target]
        for t in targets:
            if isinstance(t, cst.Subscript):
                self._write(_key_path(t, self.aliases))

    def _target(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Subscript):
            self._write(_key_path(target, self.aliases))
        elif isinstance(target, cst.Name):
            section = _key_path(value, self.aliases)
            if section is not None:
                self.aliases[target.value] = section    # `opt = cfg["optimizer"]`: writes through it are cfg's
            elif not self._other_branch(target):
                self.aliases.pop(target.value, None)    # rebound to something else

    def _other_branch(self, node: cst.CSTNode) -> bool:
        """`node` sits in another branch of an `if` whose branch loads the dict (`if ds: cfg = json.load(...)
        else: cfg = {}`): an alternative to the load, not a later rebinding."""
        if self.start is None:
            return False
        parents = self.src._parents
        up, chain = self.start, set()
        while up is not None:
            chain.add(id(up))
            up = parents.get(id(up))
        child, up = node, parents.get(id(node))
        while up is not None and id(up) not in chain:
            child, up = up, parents.get(id(up))
        return isinstance(up, cst.If) and child is up.orelse or isinstance(up, cst.Else)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        held = [(i, a) for i, a in enumerate(node.args)
                if isinstance(a.value, cst.Name) and a.value.value in self.aliases and a.star == ""]
        f = node.func
        base = _key_path(f.value, self.aliases) if isinstance(f, cst.Attribute) else None
        if base is not None:
            method = f.attr.value
            if method in ("pop", "__delitem__") and node.args and node.args[0].keyword is None:
                key = _key(node.args[0].value)
                if key is not None:
                    self._write(base + (key,))
            elif method == "update":
                for a in node.args:
                    if a.keyword is not None:
                        self._write(base + (a.keyword.value,))
                    elif isinstance(a.value, cst.Dict):
                        for el in a.value.elements:
                            key = _key(el.key) if isinstance(el, cst.DictElement) else None
                            if key is not None:
                                self._write(base + (key,))
            return
        if not held:
            return
        callee = self._callee(node)
        if callee in _HANDOFFS:
            self.handed = True              # DeepSpeed reads it here: later writes do not count
            return
        if self.depth >= _WRITE_DEPTH:
            return
        from dslint.program.rank.function_summaries import ProjectTaint
        hit = ProjectTaint.function_info(ProjectTaint.of(self.view).call_source(self.src, callee, self.cls))
        if hit is None:
            return
        other, info = hit
        params = list(info.params)
        if params and params[0] in ("self", "cls") and isinstance(f, cst.Attribute):
            params = params[1:]
        for i, a in held:
            name = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
            if name is None or name not in info.params:
                continue
            walk = _DictWrites(self.view, other, info.class_name, {name: self.aliases[a.value.value]}, self.writes,
                               self.depth + 1)
            if walk.run(info.node.body):
                self.handed = True
                return

    def _callee(self, node: cst.Call) -> Optional[str]:
        if self._callees is None:
            self._callees = {id(c.node): c.callee for c in self.src.facts.calls}
        return self._callees.get(id(node))


# --- keys the project's own DeepSpeed reads ----------------------------------------------------------------

# DeepSpeed's config class: `DeepSpeedConfig(config, mpu)` loads the dict (or the file a path names) and hands it
# to `self._initialize_params(param_dict)`; its methods read it as `self._param_dict` too (deepspeed/runtime/
# config.py). A subclass of the checked files that overrides the hook reads its own keys from the same dict.
_DS_CONFIG_CLASSES = frozenset({"deepspeed.runtime.config.DeepSpeedConfig", "deepspeed.DeepSpeedConfig"})
_DS_CONFIG_HOOKS = ("__init__", "_initialize_params")       # the method whose first parameter holds the config
_DS_CONFIG_SELF = "self._param_dict"
# DeepSpeed's getters (deepspeed/runtime/config_utils.py): `get_scalar_param(param_dict, name, default)` reads
# `param_dict[name]`
_DS_GETTERS = frozenset({"deepspeed.runtime.config_utils.get_scalar_param",
                         "deepspeed.runtime.config_utils.get_list_param",
                         "deepspeed.runtime.config_utils.get_dict_param"})
_ENTRY_DEPTH = 3


def entry_keys_read(view: "ProjectView", src: "PythonSource", call, config_expr=None) -> frozenset:
    """The key paths that the project's own DeepSpeed reads from the config handed to `call` (a
    `deepspeed.initialize`-like call whose callee resolves to a function of the checked files: `from msamp import
    deepspeed; deepspeed.initialize(config=cfg)` runs MS-AMP's wrapper, not DeepSpeed's): the keys that wrapper
    reads from the parameter `config_expr` arrives as, followed through the checked functions it hands the dict to,
    and the keys every subclass of DeepSpeed's `DeepSpeedConfig` that it builds reads from the dict DeepSpeed hands
    to it (`_initialize_params(param_dict)`, `self._param_dict`). Keys are string constants, also module constants
    (`param_dict[MSAMP]` with `MSAMP = "msamp"`). A call of DeepSpeed itself reads nothing here: its keys are
    the table's."""
    view = view.run_view or view        # the wrapper's modules, whichever files a context was given
    key = ("entry_keys", id(call.node), id(config_expr))
    return view.memo(key, lambda: frozenset(_entry_keys(view, src, call, config_expr)))


def _entry_keys(view: "ProjectView", src: "PythonSource", call, config_expr) -> set:
    hit = view.function_for_callee(src, call.callee)
    if hit is None:
        return set()
    other, qual = hit
    info = other.facts.functions.get(qual)
    if info is None:
        return set()
    reads = _Reads(view)
    if config_expr is not None:
        param = _param_receiving(call.node, info, config_expr)
        if param is not None:
            reads.function(other, info, {param: ()}, 0)
    for cls_src, cls in _config_classes_built(view, other, info, 0, set()):
        reads.config_class(cls_src, cls)
    return reads.out


def _param_receiving(call: cst.Call, info, expr) -> Optional[str]:
    """The parameter of `info` that the argument `expr` of `call` binds to."""
    params = list(info.params)
    if params and params[0] in ("self", "cls") and info.class_name:
        params = params[1:]
    positional = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.value is expr:
            if arg.keyword is not None:
                return arg.keyword.value if arg.keyword.value in info.params else None
            return params[positional] if positional < len(params) else None
        if arg.keyword is None:
            positional += 1
    return None


def _derives_from_ds_config(view: "ProjectView", src: "PythonSource", cls, depth: int = 0) -> bool:
    for base in cls.bases:
        if base in _DS_CONFIG_CLASSES:
            return True
        if depth < _ENTRY_DEPTH:
            hit = view.class_for_callee(src, base)
            info = hit[0].facts.classes.get(hit[1]) if hit is not None else None
            if info is not None and info is not cls and _derives_from_ds_config(view, hit[0], info, depth + 1):
                return True
    return False


def _config_classes_built(view: "ProjectView", src: "PythonSource", info, depth: int, seen: set):
    """The subclasses of DeepSpeed's `DeepSpeedConfig` of the checked files that `info` (or a checked function it
    calls, through at most `_ENTRY_DEPTH` calls) constructs."""
    if id(info) in seen:
        return
    seen.add(id(info))
    for c in info.calls:
        hit = view.class_for_callee(src, c.callee)
        if hit is not None:
            cls = hit[0].facts.classes.get(hit[1])
            if cls is not None and _derives_from_ds_config(view, hit[0], cls):
                yield hit[0], cls
            continue
        if depth < _ENTRY_DEPTH:
            fn = view.function_for_callee(src, c.callee)
            callee = fn[0].facts.functions.get(fn[1]) if fn is not None else None
            if callee is not None:
                yield from _config_classes_built(view, fn[0], callee, depth + 1, seen)


def _constant_key(view: "ProjectView", src: "PythonSource", node: cst.BaseExpression) -> Optional[str]:
    """A string key: a literal, or a module constant (`MSAMP` bound once to a string in its module or the module
    it is imported from)."""
    key = _key(node)
    if key is not None or not isinstance(node, cst.Name):
        return key
    from dslint.program.hyperparams import module_assignments
    for _ in range(2):
        values = module_assignments(src, node.value)
        if values:
            return _key(values[0]) if len(values) == 1 else None
        module, _, name = (src.facts.imports.get(node.value) or "").rpartition(".")
        found = _modules(view).get(module) if module else None
        if found is None:
            return None
        src, node = found, cst.Name(name)
    return None


def _modules(view: "ProjectView") -> dict:
    """Dotted module name -> source over every Python file of the run (a constants module holds nothing the
    run's own file selection keeps)."""
    return view.memo("config_reads.modules", lambda: {
        src.module_name: src for src in reversed(view.run_program.python) if src.module_name})


class _Reads:
    """The key paths read from a config dict, from the names (and `self.` attributes) that hold it or a section
    of it, through the checked functions it is handed to."""

    def __init__(self, view: "ProjectView") -> None:
        self.view, self.out, self._seen = view, set(), set()

    def config_class(self, src: "PythonSource", cls) -> None:
        for name, method in cls.methods.items():
            roots = {_DS_CONFIG_SELF: ()}
            params = list(method.params)
            if name in _DS_CONFIG_HOOKS and len(params) > 1:
                roots[params[1]] = ()
            self.function(src, method, roots, 0)

    def function(self, src: "PythonSource", info, roots: dict, depth: int) -> None:
        key = (id(info), tuple(sorted(roots.items())))
        if key in self._seen:
            return
        self._seen.add(key)
        aliases = dict(roots)
        view = self.view

        def path_of(node) -> Optional[tuple]:
            keys = []
            while isinstance(node, cst.Subscript):
                if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                    return None
                k = _constant_key(view, src, node.slice[0].slice.value)
                if k is None:
                    return None
                keys.append(k)
                node = node.value
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                    node.func.attr.value in ("keys", "copy") and not node.args:
                node = node.func.value          # `MSAMP in param_dict.keys()`
            from dslint.program.facts import dotted_name
            root = dotted_name(node)
            if root is None or root not in aliases:
                return None
            return aliases[root] + tuple(reversed(keys))

        reads = self

        written: set = set()

        class Find(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                held = path_of(node.value)
                for t in node.targets:
                    if isinstance(t.target, cst.Name) and held is not None:
                        aliases[t.target.value] = held
                    elif isinstance(t.target, cst.Subscript):
                        written.add(id(t.target))       # a key the wrapper sets is no key it reads

            def visit_Subscript(self, node: cst.Subscript) -> None:
                path = None if id(node) in written else path_of(node)
                if path:
                    reads.out.add(path)

            def visit_Comparison(self, node: cst.Comparison) -> None:
                for target in node.comparisons:
                    if isinstance(target.operator, (cst.In, cst.NotIn)):
                        base = path_of(target.comparator)
                        k = _constant_key(view, src, node.left)
                        if base is not None and k is not None:
                            reads.out.add(base + (k,))

            def visit_Call(self, node: cst.Call) -> None:
                f = node.func
                if isinstance(f, cst.Attribute) and f.attr.value in ("get", "pop", "setdefault") and node.args:
                    base = path_of(f.value)
                    k = _constant_key(view, src, node.args[0].value)
                    if base is not None and k is not None:
                        reads.out.add(base + (k,))
                held = [(a, path_of(a.value)) for a in node.args]
                held = [(a, p) for a, p in held if p is not None and not a.star]
                if held:
                    reads._handed(src, node, held, depth)

        info.node.body.visit(Find())

    def _handed(self, src: "PythonSource", node: cst.Call, held: list, depth: int) -> None:
        """The dict (or a section) handed to a call: DeepSpeed's getters read their key argument; a checked
        function reads from the parameter it arrives as."""
        from dslint.program.facts import dotted_name
        callee = src.facts.resolve(dotted_name(node.func))
        if callee in _DS_GETTERS:
            if len(node.args) > 1 and node.args[0].keyword is None and held[0][0] is node.args[0]:
                k = _constant_key(self.view, src, node.args[1].value)
                if k is not None:
                    self.out.add(held[0][1] + (k,))
            return
        if depth >= _ENTRY_DEPTH:
            return
        hit = self.view.function_for_callee(src, callee)
        info = hit[0].facts.functions.get(hit[1]) if hit is not None else None
        if info is None:
            return
        roots = {}
        for arg, path in held:
            param = _param_receiving(node, info, arg.value)
            if param is not None:
                roots[param] = path
        if roots:
            self.function(hit[0], info, roots, depth + 1)
