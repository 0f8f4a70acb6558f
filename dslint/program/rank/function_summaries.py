"""Rank-varying values across the project: function summaries (what a helper returns, which parameters its
callers taint), module environments and the call graph on the outlines (`ProjectTaint`). The expression level
-- sources, propagation, `Origin` -- is `dslint.program.rank.value_uniformity`, re-exported here."""

from __future__ import annotations

from copy import copy

from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.rank.reaching_ranks import FlowWalk
from dslint.program.rank.setting_domains import _rebinding as domains_rebinding
from dslint.program.rank.setting_domains import attr_domain as domains_attr, subjects as domains_subjects
from dslint.program.statement_walks import if_path, iter_calls, iter_returns, sub_statements
from dslint.program.rank.value_uniformity import *  # noqa: F401,F403  (the expression level, re-exported)
from dslint.program.rank.value_uniformity import (LAUNCHER_OPTION, _TAINT_WORDS, Origin, code_of, RankTaint, _assignments, _enclosing, _unit,
                                        scope_classes, seeded_tops, WRITTEN)
from dslint.program.facts import MODULE_SCOPE, FunctionInfo, dotted_name
from dslint.program.view_free import per_source
from dslint.program.rank.handed_ranks import HANDED_RANK, HANDED_VIA, handed_rank_fields, handed_rank_params
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource


# process launchers that call their worker as `fn(i, *args)` in process i (torch.multiprocessing.spawn.py; torch_xla)
PROCESS_LAUNCHERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                               "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes",
                               "torch_xla.distributed.xla_multiprocessing.spawn"})


class ProjectTaint:
    """Per-run memo: module globals, `self.` attributes and helper return summaries for every source."""

    def __init__(self, project: "ProjectView") -> None:
        self.project = project
        self._taints: dict[int, RankTaint] = {}
        self._module_env: dict[int, Env] = {}
        self._self_attrs: dict[int, Env] = {}
        self._returns: dict[tuple[int, str], Optional[Origin]] = {}
        self._in_progress: set[tuple[int, str]] = set()
        self._params: dict[tuple[int, str], Env] = {}
        self._scope_env: dict[tuple[int, str], tuple[Env, dict[int, Env]]] = {}
        # the scopes whose walk is under way: what `call_env` answers for them is a placeholder (the module's)
        self._walking: set[tuple[int, str]] = set()
        self._building = False              # while `rank_fields` is being built
        self._missed: set[str] = set()      # attributes looked up meanwhile and not (yet) in the table
        # what the rank fields were stored from: attribute → (owner as in `rank_fields`, source, storing
        # function or None, the stored expression -- None when not kept, `LAUNCHER_OPTION` for the launchers'
        # `--local_rank`): `rank_field_stores`
        self._field_values: dict[str, list] = {}

    @classmethod
    def of(cls, project: "ProjectView") -> "ProjectTaint":
        return project.memo(cls, lambda: cls._with_rank_fields(project))

    @classmethod
    def _with_rank_fields(cls, project: "ProjectView") -> "ProjectTaint":
        """A new analysis whose table of rank fields (`rank_fields`) is complete before anything else is asked
        of it: the table is built by the analysis itself (its lookups meanwhile see the table found so far);
        when one of them missed a field the table later got, what it memoised may lack that field's rank, so a
        fresh analysis takes the finished table and starts over."""
        first = cls(project)
        table = first.rank_fields()
        if not first._missed & table.keys():
            return first
        fresh = cls(project)
        fresh.__dict__["_rank_fields"] = table
        fresh._field_values = first._field_values
        return fresh

    def taint(self, src: "PythonSource") -> RankTaint:
        key = id(src)
        if key not in self._taints:
            self._taints[key] = RankTaint(self, src)
        return self._taints[key]

    def module_env(self, src: "PythonSource") -> Env:
        """Names bound to rank-varying values anywhere at module level (functions see them whenever they run)."""
        key = id(src)
        if key not in self._module_env:
            self._module_env[key] = {}
            # the same in every launch unit's view whose lookups of the called functions and classes answer
            # alike, when the walk asks the view nothing else (`view_free`)
            self._module_env[key] = per_source(src, _MODULE_ENV, self, lambda analysis: _module_walk(analysis, src),
                                               _MODULE_QUERIES)
        return self._module_env[key]

    def globals_for(self, src: "PythonSource", info: FunctionInfo) -> Env:
        """`module_env` as the body of `info` sees it: a parameter shadows the module global of its name
        (`def prepare(table): ...` beside a module-level `table` bound under a rank test is the caller's value)."""
        module = self.module_env(src)
        params = [p for p in info.params if p in module]
        if not params:
            return module
        return {k: v for k, v in module.items() if k not in params}

    def self_attrs(self, src: "PythonSource", cls: Optional[str] = None) -> Env:
        """`self.X` attributes assigned a rank-varying value in a method of the class `cls` or of one of its bases
        among the checked files (its class family as a method of it sees it: an attribute that only uniform values
        are assigned to there is uniform, whatever other classes of the file store under the same name); without
        `cls`, in any method of the file. An object stored with rank-varying fields
        (`self.state = TrainerState(is_local_process_zero=...)`, `RankTaint.object_fields`) gives `self.state.F`."""
        if cls is None:
            return self._file_self_attrs(src)
        key = (id(src), cls)
        memo = self.__dict__.setdefault("_family_attrs", {})
        if key not in memo:
            memo[key] = {}
            out: Env = {}
            for where, owner in (self._class_family(src, cls) if src.outline is not None else ((src, cls),)):
                for name, origin in self._class_self_attrs(where, owner).items():
                    out.setdefault(name, origin)
            memo[key] = out
        return memo[key]

    def _file_self_attrs(self, src: "PythonSource") -> Env:
        key = id(src)
        if key not in self._self_attrs:
            self._self_attrs[key] = {}
            out: Env = {}
            for qual in src.facts.classes:
                for name, origin in self._class_self_attrs(src, qual).items():
                    out.setdefault(name, origin)
            self._self_attrs[key] = out
        return self._self_attrs[key]

    def _class_self_attrs(self, src: "PythonSource", cls: str) -> Env:
        """`self.X` assigned a rank-varying value in the methods of this one class (memoised)."""
        memo = self.__dict__.setdefault("_class_attrs", {})
        key = (id(src), cls)
        if key in memo:
            return memo[key]
        memo[key] = {}
        out: Env = {}
        taint = self.taint(src)
        env = self.module_env(src)
        for info in src.facts.functions.values():
            if info.class_name != cls:
                continue
            for node in _assignments(info.node.body):
                for target in node.targets:
                    name = dotted_name(target.target)
                    if name and name.startswith("self."):
                        hit = taint.eval(node.value, env, info.class_name)
                        if hit is not None:
                            out.setdefault(name, hit)
                        elif isinstance(node.value, cst.Call):
                            # `self.state = TrainerState(is_local_process_zero=...)`: only that field varies
                            for k, o in (taint.object_fields(node.value, env, info.class_name) or {}).items():
                                out.setdefault(f"{name}.{k}", o)
        memo[key] = out
        return out

    # --- fields that hold a rank id, by provenance --------------------------------------------------------
    def rank_fields(self) -> dict[str, list[tuple[Optional[tuple[int, str]], Origin]]]:
        """Attributes that hold a rank id because something stores one there (never because of how they are
        spelled): attribute name → (the class whose `self.` it was stored on, or None for another receiver; the
        origin of the stored value). Found (a) at every assignment of the checked files whose target is an
        attribute and whose value is a rank id (`self.local_rank = int(os.environ["LOCAL_RANK"])`, `args.rank =
        dist.get_rank()`, `self.local_rank = local_rank` of a parameter its callers pass one), a dataclass field or
        an argparse option whose default is one, a property returning one; (c) the option the DeepSpeed and torch
        launchers pass every process (`--local_rank`, `--local-rank`: an argparse option of that name, or the
        TrainingArguments field an `HfArgumentParser` turns into it). Built by this analysis before anything
        else (its lookups meanwhile see the partial table; see `_with_rank_fields` for the memos computed meanwhile). Memoised."""
        memo = self.__dict__.get("_rank_fields")
        if memo is not None:
            return memo
        table: dict[str, list] = {}
        self.__dict__["_rank_fields"] = table       # a re-entrant ask while it is built: the table so far
        self.__dict__["_building"] = True
        try:
            _launcher_options(self.project, table, self._field_values)
            self._collect_rank_fields(table)
        finally:
            self.__dict__["_building"] = False
        return table

    def _collect_rank_fields(self, table: dict[str, list]) -> None:
        for src in self.project.mentioning(*_FIELD_SOURCE_WORDS):
            # no word of a taint source in the text (`seeded_tops` is empty exactly then: kept on the source,
            # where a search of the text was made again by every launch unit's view)
            if src.outline is None or seeded_tops(src) == set():
                continue
            done: list = []

            def emit(attr: str, owner, origin: Optional[Origin], entry: Optional[tuple], done=done) -> None:
                self._add_store(table, attr, owner, origin, entry)
                done.append((attr, owner, origin, entry))

            # what this file adds is the same in every launch unit's view where the lookups it made answer alike,
            # when it asked the view nothing else (`view_free`): a later view replays those additions
            kept = per_source(src, _FIELD_PART, self, lambda analysis: _field_part(analysis, src, emit, done),
                              _FIELD_QUERIES)
            if kept is not done:
                for store in kept:
                    self._add_store(table, *store)

    def _add_store(self, table: dict, attr: str, owner, origin: Optional[Origin], entry: Optional[tuple]) -> None:
        """A store found: the table gets `origin` under `attr` (unless None), `rank_field_stores` `entry`."""
        if origin is not None:
            _add_field(table, attr, owner, origin)
        if entry is not None:
            self._field_values.setdefault(attr, []).append(entry)

    def rank_field(self, src: "PythonSource", e: cst.Attribute, cls: Optional[str]) -> Optional[Origin]:
        """`receiver.attr` where `attr` holds a rank id by provenance (`rank_fields`): on `self` of a class, only
        what that class family (or code outside any class) stores there."""
        entries = self.rank_fields().get(e.attr.value)
        if not entries:
            if self._building:
                self._missed.add(e.attr.value)
            return None
        if dotted_name(e.value) == "self" and cls is not None and src.outline is not None:
            family = {(id(w), o) for w, o in self._class_family(src, cls)}
            entries = [x for x in entries if x[0] is None or x[0] in family]
            if not entries:
                if self._building:
                    self._missed.add(e.attr.value)
                return None
        if src.outline is not None and self.launches_worker_in_parent(src):
            # read in a function that starts the workers: the workers' own stores are not seen there
            entries = [x for x in entries if not self._worker_store(src, e, x[1])]
            if not entries:
                return None
        origin = entries[0][1]
        where = f"{origin.source.path}:{origin.source.span(origin.node).line}"
        return Origin(origin.kind, e, src, axes=origin.axes,
                      via=origin.via if origin.via and origin.via.startswith(("the launcher", HANDED_VIA)) else
                      f"set from `{origin.text(40)}` at {where}")

    def rank_field_stores(self, src: "PythonSource", e: cst.Attribute, cls: Optional[str]) -> Optional[list]:
        """What `receiver.attr`, a rank field (`rank_field`), was stored from: (source, storing function or None,
        stored expression) per rank-varying store, filtered as `rank_field` filters (on `self` of a class, only its
        family's); the expression is None where it was not kept (a module-level store, a property) and
        `LAUNCHER_OPTION` for the launchers' `--local_rank`. None: not a rank field."""
        self.rank_fields()
        entries = self._field_values.get(e.attr.value)
        if not entries:
            return None
        if dotted_name(e.value) == "self" and cls is not None and src.outline is not None:
            family = {(id(w), o) for w, o in self._class_family(src, cls)}
            entries = [x for x in entries if x[0] is None or x[0] in family]
        return [(where, info, value) for _, where, info, value in entries] or None

    def stored_fields(self, src: "PythonSource", cls: str) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
        """How a checked class keeps its constructor's arguments: parameter → the fields it is stored in unchanged
        (a dataclass's annotated class-level names, each its own field; `self.attr = param` in `__init__`), and the
        parameters in positional order (`__init__`'s after `self`, else the dataclass fields). Memoised."""
        memo = self.__dict__.setdefault("_stored_fields", {})
        key = (id(src), cls)
        if key in memo:
            return memo[key]
        memo[key] = ({}, ())
        info = src.facts.classes.get(cls)
        stored: dict[str, list[str]] = {}
        order: list[str] = []
        if info is not None:
            for stmt in info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ():
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            stored.setdefault(small.target.value, []).append(small.target.value)
                            order.append(small.target.value)
            found = self._method_of(src, cls, "__init__") if src.outline is not None else None
            init = found[0].facts.functions.get(found[1]) if found is not None else None
            if init is not None:
                params = init.params[1:]
                order = list(params)
                for node in _assignments(init.node.body):
                    if isinstance(node.value, cst.Name) and node.value.value in params:
                        stored.setdefault(node.value.value, []).extend(
                            t.target.attr.value for t in node.targets
                            if isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) == "self")
        memo[key] = ({k: tuple(v) for k, v in stored.items() if v}, tuple(order))
        return memo[key]

    def constructed_fields(self, call: cst.Call, found: tuple["PythonSource", str],
                           origins: list[Optional[Origin]]) -> Optional[dict[str, Origin]]:
        """Field sensitivity for an object of a checked class built with rank-varying arguments (`Tracker(cfg,
        local_rank)` whose `__init__` computes `self.is_main = local_rank == 0` and `self.device` from it): per
        field, the origin of what its stores put there -- `__init__` walked with the parameters bound to this
        construction's arguments, and every other store of the class family (`self_attrs`: method stores,
        collective results, counts kept in lockstep; `_method_stores`). A field varies only when some store's value
        does (`Origin.fields`; the object's own identity and None-ness keep the construction's taint). The varying fields (dotted below the object → origin); None when the construction is not followed:
        no `__init__` of the checked files, an argument into *args/**kwargs, or a varying argument handed on to
        another call whose effect on `self` is not followed (`super().__init__(rank)`)."""
        src, cls = found
        checked = self.__dict__.get("_checked_ids")
        if checked is None:
            checked = self.__dict__["_checked_ids"] = frozenset(id(s) for s in self.project.python)
        if src.outline is None or id(src) not in checked:
            return None                 # a library class (`installed_class`): the object varies as a whole
        method = self._method_of(src, cls, "__init__")
        info = method[0].facts.functions.get(method[1]) if method is not None else None
        if info is None:
            return None
        where = method[0]
        bound = self._bound_params(call, info, origins)
        if not isinstance(bound, dict) or not bound:
            return None
        # per construction site: the fields' origins name this call's arguments
        key = ("fields", id(call)) + (self._args_key(call, (where, info), origins) or ())

        def fields(walk: FlowWalk) -> Optional[dict[str, Origin]]:
            if _hands_on(where, info, walk.ever_bound, self.taint(where)):
                return None
            out: dict[str, Origin] = {}
            for name, o in (*walk.ever_bound.items(), *self.self_attrs(src, cls).items()):
                if name.startswith("self.") and o is not None:
                    out.setdefault(name[5:], o)
            for name, o in self._method_stores(src, cls).items():
                out.setdefault(name, o)
            return out
        return self._memo_walk("_constructed_fields", key, where, info, {**self.globals_for(where, info), **bound},
                               fields)

    def _memo_walk(self, memo_name: str, key: tuple, where: "PythonSource", info: FunctionInfo, env: Env, result):
        """`result(walk)` of `info`'s body walked from `env` (memoised under `key`; None while it is under way)."""
        memo = self.__dict__.setdefault(memo_name, {})
        if key in memo:
            return memo[key]
        if key in self._in_progress:
            return None
        self._in_progress.add(key)
        try:
            walk = FlowWalk(self.taint(where), scope=info.qualname, env=env, cls=info.class_name)
            walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
            out = result(walk)
        finally:
            self._in_progress.discard(key)
        memo[key] = out
        return out

    def _method_stores(self, src: "PythonSource", cls: str) -> dict[str, Origin]:
        """The fields the methods of a checked class family other than `__init__` may store rank-varying values
        in: each method walked with every parameter taken as possibly varying (what its callers hand it is not
        asked: their walks may be the ones asking), so `def count(self, n): self.total += n` may vary while
        `self.step += 1` and `self.total = t.item()` after `dist.all_reduce(t)` do not. Field → origin
        (memoised per class)."""
        memo = self.__dict__.setdefault("_method_stores_memo", {})
        key = (id(src), cls)
        if key in memo:
            return memo[key]
        memo[key] = {}
        out: dict[str, Origin] = {}
        for where, owner in self._class_family(src, cls):
            for info in where.facts.functions.values():
                if info.class_name != owner or info.name == "__init__" or "self." not in code_of(info.node, 10**6):
                    continue
                params = info.params[1:] if info.params[:1] in (["self"], ["cls"]) else info.params
                nodes = {p.name.value: p.name for p in (*info.node.params.posonly_params, *info.node.params.params,
                                                          *info.node.params.kwonly_params)}
                env = {**self.globals_for(where, info),
                       **{p: Origin("derived", nodes[p], where, via=f"argument `{p}` of {info.name}()")
                          for p in params if p in nodes}}
                walk = FlowWalk(self.taint(where), scope=info.qualname, env=env, cls=info.class_name)
                walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
                for name, o in walk.ever_bound.items():
                    if name.startswith("self.") and o is not None:
                        out.setdefault(name[5:], o)
        memo[key] = out
        return out

    def method_of(self, src: "PythonSource", cls: str, method: str) -> Optional[tuple["PythonSource", str]]:
        """The checked method `method` of the class `cls` or of a base of it (source, qualified name)."""
        return self._method_of(src, cls, method) if src.outline is not None else None

    def returns_with_fields(self, call: cst.Call, method: tuple["PythonSource", str], fields: dict[str, Origin],
                            origins: list[Optional[Origin]]) -> Optional[Origin]:
        """What a method returns on an object whose fields vary one by one (`constructed_fields`), handed these
        arguments (`origins`): its body walked with `self.F` bound to each varying field and the parameters to the
        varying arguments, so `return self.is_main` varies and `return self.step % self.every` does not."""
        target = self.function_info(method)
        if target is None:
            return None
        other, info = target
        bound = self._bound_params(call, info, origins)
        if isinstance(bound, Origin):
            return bound                # into *args/**kwargs: not followed, keep the argument's taint
        key = (id(other), info.qualname, tuple(sorted((k, id(o.node), o.kind, o.axes) for k, o in fields.items())),
               tuple(sorted((k, id(o.node), o.kind, o.axes) for k, o in bound.items())))

        def returned(walk: FlowWalk) -> Optional[Origin]:
            hit = walk.returned
            return replace(hit, via=f"{info.name}()", via_call=None, group=_group_out(hit)) if hit is not None else None
        return self._memo_walk("_returns_with_fields", key, other, info,
                               {**self.globals_for(other, info), **{f"self.{k}": o for k, o in fields.items()}, **bound},
                               returned)

    def class_of(self, src: "PythonSource", callee: Optional[str]) -> Optional[tuple["PythonSource", str]]:
        """The class a constructor call names: a checked class (`ProjectView.class_for_callee`), a class of this
        file whatever its name, else a class an installed package defines at the module the call resolves to
        (`installed_class`: `from transformers.trainer_callback import TrainerState` in a vendored Trainer): what
        its objects store is read from its source, never imported."""
        if not callee:
            return None
        found = self.project.class_for_callee(src, callee)
        if found is None and src.outline is not None and callee in src.outline.classes:
            found = (src, callee)
        if found is None and "." in callee:
            memo = self.__dict__.setdefault("_installed_classes", {})
            if callee not in memo:
                memo[callee] = installed_class(callee)
            found = memo[callee]
        return found

    def plain_field_of(self, src: "PythonSource", receiver: cst.BaseExpression, attr: str, cls: Optional[str]
                       ) -> tuple[bool, Optional[Origin]]:
        """Is `receiver.attr` a plain data field of the object -- `receiver` a `self.` field (or a local name) that
        the code binds to a constructor of a checked class (the outline's `fields`/`instances`), a class that
        declares `attr` (a class-level annotation, a `self.attr = ...` in a method of its family)? Then the value
        is that object's, whatever a rank-flag property of another class spelled `attr` means."""
        name = dotted_name(receiver)
        if name is None or src.outline is None:
            return False, None
        ctors: list[tuple["PythonSource", str]] = []
        if name.startswith("self.") and name.count(".") == 1 and cls is not None:
            for where, owner in self._class_family(src, cls):
                ctors.extend((where, c) for c in where.outline.fields.get(f"{owner}.{name[5:]}", ()))
        for where, ctor in ctors:
            found = self.class_of(where, ctor)
            if found is not None and attr in self.declared_fields(*found):
                # the field's value: what the class's own methods assign to it (`self.local_rank = args.local_rank`)
                return True, self.self_attrs(*found).get(f"self.{attr}")
        return False, None

    def declared_fields(self, src: "PythonSource", cls: str) -> frozenset:
        """The fields a checked class's objects hold: class-level annotated names and `self.X = ...` targets in the
        methods of the class and its bases (memoised)."""
        memo = self.__dict__.setdefault("_declared_fields", {})
        key = (id(src), cls)
        if key not in memo:
            memo[key] = frozenset()
            out: set[str] = set()
            for where, owner in self._class_family(src, cls):
                info = where.facts.classes.get(owner)
                if info is None:
                    continue
                for stmt in info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ():
                    if isinstance(stmt, cst.SimpleStatementLine):
                        out.update(small.target.value for small in stmt.body
                                   if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name))
                for fn in where.facts.functions.values():
                    if fn.class_name != owner:
                        continue
                    for node in _assignments(fn.node.body):
                        out.update(t.target.attr.value for t in node.targets
                                   if isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) == "self")
            memo[key] = frozenset(out)
        return memo[key]

    def constant_field(self, attr: str) -> bool:
        """Does every object hold one value in its field `attr` (`dslint.program.rank.constant_fields`)?"""
        from dslint.program.rank.constant_fields import constant_field
        return constant_field(self, attr)

    def uniform_none_field(self, src: "PythonSource", cls: str, attr: str) -> bool:
        """Is `self.<attr>` None alike on every rank (`dslint.program.rank.nullness`)?"""
        from dslint.program.rank.nullness import uniform_none_field
        return uniform_none_field(self, src, cls, attr)

    def uniform_none_rank_field(self, src: "PythonSource", e: cst.Attribute) -> bool:
        """Is `receiver.attr`, a rank field, None alike on every rank (`dslint.program.rank.nullness`)?"""
        from dslint.program.rank.nullness import uniform_none_rank_field
        return uniform_none_rank_field(self, src, e)

    def none_follows(self, src: "PythonSource", info: FunctionInfo) -> Optional[frozenset[str]]:
        """The parameters whose None-ness the function's result follows (`dslint.program.rank.nullness`)."""
        from dslint.program.rank.nullness import none_follows
        return none_follows(self, src, info)

    def env_before(self, src: "PythonSource", info: FunctionInfo, node: cst.CSTNode) -> Optional[Env]:
        """The rank-varying names before the statement of the function `info` holding `node` (the walk of
        `dslint.program.rank.nullness`, memoised); None when the walk does not reach it or is under way."""
        from dslint.program.rank.nullness import _guard_walk, _holder
        key = (id(src), info.qualname)
        if key in self.__dict__.get("_nullness_busy", ()):
            return None
        holder = _holder(info.node, node)
        return _guard_walk(self, src, info).env_at.get(id(holder)) if holder is not None else None

    def uniform_none_local(self, src: "PythonSource", scope: str, name: str, test: cst.CSTNode) -> bool:
        """Is the local `name` None alike on every rank at `test` (`dslint.program.rank.nullness`)?"""
        from dslint.program.rank.nullness import uniform_none_local
        return uniform_none_local(self, src, scope, name, test)

    def function_for_call(self, src: "PythonSource", call: cst.Call, callee: Optional[str],
                          cls: Optional[str]) -> Optional[tuple["PythonSource", FunctionInfo]]:
        """The checked function a call runs: `helper()`, `utils.helper()`, `self.method()`."""
        return self.function_info(self.call_source(src, callee, cls))

    @staticmethod
    def function_info(source: Optional[tuple["PythonSource", str]]) -> Optional[tuple["PythonSource", FunctionInfo]]:
        """The libcst facts of a function found on the outlines (parses its file)."""
        if source is None:
            return None
        info = source[0].facts.functions.get(source[1])
        return (source[0], info) if info is not None else None

    def call_source(self, src: "PythonSource", callee: Optional[str], cls: Optional[str], fields: bool = True,
                    scope: Optional[str] = None) -> Optional[tuple["PythonSource", str]]:
        """Which checked function (source, qualified name within it) a call runs, on the outlines: a local or
        nested function, a method of `self`'s class or of a base class, an imported function; with the call's
        scope, a method of a checked class's instance bound to a name there (`trainer = PPOTrainer(...)`,
        `trainer.generate_experience(...)`)."""
        if callee is None or src.outline is None:
            return None
        if scope is not None and callee.count(".") == 1 and not callee.startswith("self."):
            name, method = callee.split(".")
            for ctor in src.outline.instances.get(f"{scope}:{name}", ()):
                found = self.project.class_for_callee(src, ctor)
                hit = self._method_of(*found, method) if found is not None and found[0].outline is not None else None
                if hit is not None:
                    return hit
        if callee.startswith("self.") and cls is not None and callee.count(".") == 1:
            method = callee[5:]
            if f"{cls}.{method}" in src.outline.functions:
                return src, f"{cls}.{method}"
            owner = src.outline.classes.get(cls)
            for base in owner.bases if owner else ():
                hit = self.project.find_function_source(f"{base}.{method}", near=src)
                if hit:
                    return hit
            return None
        if callee.startswith("self.") and cls is not None and callee.count(".") == 2:
            return self._field_method(src, cls, *callee[5:].split(".")) if fields else None
        return self.project.function_for_callee(src, callee)

    def methods_named(self, method: str) -> list[tuple["PythonSource", str]]:
        """Every method called `method` of a class of the view's files (source, qualified name within it), on the
        outlines: what a call of that method on an object whose class dslint cannot tell (`self.strategy`, handed
        in) may run, if the object is one of the checked classes'."""
        return self.project.methods_named(method)

    def _field_method(self, src: "PythonSource", cls: str, attr: str, method: str
                      ) -> Optional[tuple["PythonSource", str]]:
        """`self.gen.generate(...)` where a method of the class (or of a base class in the view) stores
        `self.gen = Gen(...)` of a checked class `Gen`: `Gen.generate` (or its base class's), on the outlines.
        With several constructors stored there, the first that defines the method."""
        for where, owner in self._class_family(src, cls):
            for ctor in where.outline.fields.get(f"{owner}.{attr}", ()):
                found = self.project.class_for_callee(where, ctor)
                if found is None:
                    continue
                hit = self._method_of(*found, method)
                if hit is not None:
                    return hit
        return None

    def _class_family(self, src: "PythonSource", cls: str, depth: int = 0):
        """The class and its bases among the checked files, nearest first (a few levels)."""
        yield src, cls
        owner = src.outline.classes.get(cls) if src.outline is not None else None
        if owner is None or depth >= 4:
            return
        for base in owner.bases:
            found = self.project.class_for_callee(src, base)
            if found is not None and found[0].outline is not None:
                yield from self._class_family(found[0], found[1], depth + 1)

    def _method_of(self, src: "PythonSource", cls: str, method: str) -> Optional[tuple["PythonSource", str]]:
        for where, owner in self._class_family(src, cls):
            if f"{owner}.{method}" in where.outline.functions:
                return where, f"{owner}.{method}"
        return None

    def returns_of_source(self, source: tuple["PythonSource", str]) -> Optional[Origin]:
        """What a call of this function returns whatever its arguments, as seen by the caller (`via` it)."""
        if not self.may_return_rank(*source):
            return None                 # decided on the outlines: the callee's file is not parsed for it
        hit = self.function_info(source)
        if hit is None:
            return None
        origin = self.returns(*hit)
        if origin is None:
            return None
        table = self._returns_by_setting(*hit) if origin.axes is None else None
        if table is not None:
            origin = replace(origin, by_setting=table)
        return replace(origin, via=f"{hit[1].name}()", via_call=None, group=_group_out(origin))

    def _returns_by_setting(self, src: "PythonSource", info: FunctionInfo) -> Optional[tuple]:
        """What a method returns under each value of a validated setting its `if` tests read (`if self.env_type
        == "deepspeed+mpu": sampler = DistributedSampler(..., rank=mpu.get_data_parallel_rank())`): the axes of
        the value a walk fixing the setting to that value returns (`FlowWalk.fixed`), as ("self.<attr>", ((value,
        axes), ...)) -- `Origin.by_setting`. The first setting tested with a domain of at most
        `_SETTING_VALUES` values; None when there is none, or no value narrows the axes. Memoised."""
        memo = self.__dict__.setdefault("_by_setting", {})
        key = (id(src), info.qualname)
        if key in memo:
            return memo[key]
        memo[key] = None
        if info.class_name is None:
            return None
        tested: list[str] = []
        for test in _if_tests(info):
            tested.extend(sorted(domains_subjects(test) - set(tested)))
        for subject in tested:
            domain = domains_attr(self, src, info.class_name, subject[5:])
            if not domain or len(domain) > _SETTING_VALUES:
                continue
            table = []
            for value in sorted(domain, key=repr):
                walk = FlowWalk(self.taint(src), scope=info.qualname, env=dict(self.globals_for(src, info)),
                                cls=info.class_name)
                walk.fixed = {subject: value}
                walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
                table.append((value, frozenset() if walk.returned is None else walk.returned.axes))
            if any(axes is not None for _, axes in table):
                memo[key] = (subject, tuple(table))
                break
        return memo[key]

    def returns(self, src: "PythonSource", info: FunctionInfo) -> Optional[Origin]:
        """Does the function return a rank-varying value whatever its arguments (`def is_main(): …`)?"""
        key = (id(src), info.qualname)
        if key in self._returns:
            return self._returns[key]
        if key in self._in_progress:
            return None
        self._in_progress.add(key)
        try:
            walk = FlowWalk(self.taint(src), scope=info.qualname, env=dict(self.globals_for(src, info)),
                            cls=info.class_name)
            walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
            result = walk.returned
            self.__dict__.setdefault("_returns_elems", {})[key] = walk.returned_elements()
        finally:
            self._in_progress.discard(key)
        self._returns[key] = result
        return result

    def returns_payload(self, source: tuple["PythonSource", str]) -> bool:
        """Does this checked function hand back its collective's payload on every return
        (dslint/program/rank/collective_payloads.py)?"""
        from dslint.program.rank.collective_payloads import returns_payload
        return returns_payload(self, source)

    def calls_payload_collective(self, source: tuple["PythonSource", str]) -> bool:
        """Does this checked function call a collective whose payload it can hand back itself (on the outlines,
        `collective_payloads.payload_scopes`)?"""
        from dslint.program.rank.collective_payloads import payload_scopes
        return (id(source[0]), source[1]) in payload_scopes(self)

    def collective_wrapper(self, src: "PythonSource", call: cst.Call, cls: Optional[str]):
        """`collective_payloads.collective_wrapper`: a call of the project's own wrapper of an in-place
        collective -- (the collective, the argument written, the argument naming the source rank) -- or None."""
        from dslint.program.rank.collective_payloads import collective_wrapper
        return collective_wrapper(self, src, call, cls)

    def payload_origin(self, source: tuple["PythonSource", str]) -> Optional[Origin]:
        """What a payload-returning helper hands back (None: uniform; this rank's scattered item otherwise)."""
        from dslint.program.rank.collective_payloads import payload_origin
        return payload_origin(self, source)

    def scatters_alike(self, src: "PythonSource", scope: str, sent: cst.BaseExpression, call: cst.Call) -> bool:
        """Does every list the source rank can scatter at `call` hold items alike in None-ness?"""
        from dslint.program.rank.collective_payloads import scatters_alike
        return scatters_alike(self, src, scope, sent, call)

    def returns_at_constants(self, call: cst.Call, source: tuple["PythonSource", str], hit: Origin
                             ) -> Optional[Origin]:
        """What a call returns given the constants it fixes (`hit`: what the function returns whatever its
        arguments). A parameter the call passes a literal, or leaves at a literal default, that an `if` test of
        the body reads and the body never rebinds, decides that test: the walk for this call takes only the
        branches left live (`from_pretrained(name, args)` leaves `overwrite_args={}`, so `if build_only or
        "model_parallel_size" not in overwrite_args: return cls.load(...)` always returns there, and the
        rank-0-only merge of its other branch is dead for this call). Memoised per function and constants."""
        found = self.function_info(source)
        if found is None:
            return hit
        other, info = found
        fixed = self._call_constants(call, info)
        if not fixed:
            return hit
        key = (id(other), info.qualname, tuple(sorted((k, repr(v)) for k, v in fixed.items())))
        memo = self.__dict__.setdefault("_returns_at", {})
        if key not in memo:
            if key in self._in_progress:
                return hit
            self._in_progress.add(key)
            try:
                walk = FlowWalk(self.taint(other), scope=info.qualname, env=dict(self.module_env(other)),
                                cls=info.class_name)
                walk.fixed = fixed
                walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
                memo[key] = (walk.returned, walk.returned_elements())
            finally:
                self._in_progress.discard(key)
        origin, elems = memo[key]
        self.__dict__.setdefault("_returns_at_elems", {})[id(call)] = elems
        if origin is None:
            return None
        return replace(origin, via=f"{info.name}()", via_call=None, group=_group_out(origin))

    def _call_constants(self, call: cst.Call, info: FunctionInfo) -> dict[str, object]:
        """Parameter → the constant this call fixes it to, for the parameters an `if` test of the body reads and
        the body never rebinds (empty when the call spreads `*args`/`**kwargs`)."""
        tested = self.__dict__.setdefault("_tested_params", {})
        names = tested.get(id(info))
        if names is None:
            names = {x for test in _if_tests(info) for x in _test_names(test) if x in info.params}
            names = tested[id(info)] = {x for x in names if domains_rebinding(info.node, x) is None}
        if not names or any(a.star for a in call.args):
            return {}
        spec = info.node.params
        params = [p.name.value for p in (*spec.posonly_params, *spec.params)]
        if info.class_name and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        defaults = {p.name.value: p.default for p in [*spec.posonly_params, *spec.params, *spec.kwonly_params]
                    if p.default is not None}
        positional = [a.value for a in call.args if a.keyword is None]
        out: dict[str, object] = {}
        for name in names:
            arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
            if arg is None and name in params and params.index(name) < len(positional):
                arg = positional[params.index(name)]
            value = literal_value(arg if arg is not None else defaults.get(name, cst.Name("_")))
            if value is not UNKNOWN:
                out[name] = value
        return out

    def returned_elements(self, src: "PythonSource", call: cst.Call, env: Env, cls: Optional[str]
                          ) -> Optional[list[Optional[Origin]]]:
        """What each element of the tuple a checked function returns is, for this call (`rank, world_size =
        get_dist_info()`: the rank varies, the world size does not); None when it does not always return a
        tuple of one length."""
        taint = self.taint(src)
        source = self.call_source(src, taint.facts.resolve_expr(call.func), cls)
        hit = self.function_info(source)
        if hit is None:
            return None
        origins = [taint.eval(a.value, env, cls) for a in call.args]
        if any(o is not None for o in origins):
            if self.returns_for_args(call, hit, origins) is None:
                return None             # uniform as a whole: nothing to split
            key = self._args_key(call, hit, origins)
            elems = self.__dict__.get("_returns_for_elems", {}).get(key) if key is not None else None
        elif id(call) in self.__dict__.get("_returns_at_elems", {}):
            elems = self.__dict__["_returns_at_elems"][id(call)]      # for the constants it fixes
        else:
            if not self.may_return_rank(*source):
                return None
            self.returns(*hit)
            elems = self.__dict__.get("_returns_elems", {}).get((id(hit[0]), hit[1].qualname))
        if elems is None:
            return None
        via = f"{hit[1].name}()"
        return [replace(o, via=via, via_call=None) if o is not None else None for o in elems]

    @staticmethod
    def _bound_params(call: cst.Call, info: FunctionInfo, origins: list[Optional[Origin]]):
        """Parameter → origin for the arguments that are rank-varying; an Origin alone when one goes into
        *args/**kwargs (not followed)."""
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
        bound: dict[str, Origin] = {}
        for i, (arg, origin) in enumerate(zip(call.args, origins)):
            if origin is None:
                continue
            name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) and not arg.star
                                                                      else None)
            if name is None or name not in info.params:
                return origin
            bound.setdefault(name, _group_renamed(origin, call, params))
        return bound

    def _args_key(self, call: cst.Call, target: tuple["PythonSource", FunctionInfo],
                  origins: list[Optional[Origin]]) -> Optional[tuple]:
        bound = self._bound_params(call, target[1], origins)
        if not isinstance(bound, dict) or not bound:
            return None
        return (id(target[0]), target[1].qualname,
                tuple(sorted(((n, o.kind, o.axes, o.member, o.group, o.by_setting) for n, o in bound.items()),
                             key=lambda t: t[0])))


    def returns_for_args(self, call: cst.Call, target: tuple["PythonSource", FunctionInfo],
                         origins: list[Optional[Origin]]) -> Optional[Origin]:
        """What a checked function returns when this call passes it these arguments (`origins`: what each of
        `call.args` evaluates to): its body is walked with the parameters that receive rank-varying values
        bound, so `build_loader(ds, rank)` that only hands `rank` to a DistributedSampler returns a uniform
        loader, and `shard(xs, rank)` returns a share."""
        other, info = target
        bound = self._bound_params(call, info, origins)
        if isinstance(bound, Origin):
            return bound                # into *args/**kwargs: not followed, keep the argument's taint
        if not bound:
            return None
        key = self._args_key(call, target, origins)
        memo = self.__dict__.setdefault("_returns_for", {})
        if key in memo:
            hit = memo[key]
        elif key in self._in_progress:
            return None
        else:
            self._in_progress.add(key)
            try:
                walk = FlowWalk(self.taint(other), scope=info.qualname, env={**self.globals_for(other, info), **bound},
                                cls=info.class_name)
                walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else [info.node.body])
                hit = walk.returned
                self.__dict__.setdefault("_returns_for_elems", {})[key] = walk.returned_elements()
                filled = _filled_params(info)
                if filled:
                    written: Env = {}
                    for param, values in filled.items():
                        if param in bound:
                            continue
                        origin = walk.ever_bound.get(param)
                        for method, value in values:
                            put = self.taint(other).eval(value, walk.ever_bound, info.class_name)
                            if put is not None and method in _ONE_ITEM and put.kind in TRIP_COUNT_KINDS:
                                # one element per call: the container's length is the number of calls, its
                                # items are what varies (as for an item store)
                                put = replace(put, kind="item", batch=True)
                            origin = join(origin, put)
                        if origin is not None:
                            # a mapping the helper only stores into at literal keys (`info["loss"] = model(batch)`)
                            # varies at those keys, as the walk kept them (`Origin.keys`); which keys other stores
                            # write is not followed (`into[prefix + k] = v`, `into.update(...)`): the caller's
                            # container then varies as a whole
                            written[param] = origin if origin.keys is not None and not values else \
                                replace(origin, keys=None)
                    self.__dict__.setdefault("_written_for", {})[key] = written
            finally:
                self._in_progress.discard(key)
            memo[key] = hit
        if hit is None:
            return None
        return replace(hit, via=f"{info.name}()", via_call=None, group=_group_out(hit))

    # --- which helpers can return a rank-varying value: decided on the outlines, before any parse ----------
    def written_args(self, src: "PythonSource", call: cst.Call, env: Env, cls: Optional[str]
                     ) -> list[tuple[cst.BaseExpression, Origin]]:
        """The caller's arguments a checked function fills with rank-varying values (`rec(nested, "", flat)`
        where `rec` stores `into[prefix + k] = v` for the items of `nest`): (argument expression, origin) for
        each parameter the callee writes into (item stores, `append`/`extend`/`update`/`insert`/`add`/
        `setdefault`) and never rebinds, when this call's varying arguments make what it writes vary."""
        taint = self.taint(src)
        source = self.call_source(src, taint.facts.resolve_expr(call.func), cls)
        hit = self.function_info(source)
        if hit is None or not isinstance(hit[1].node.body, cst.IndentedBlock):
            return []
        filled = _filled_params(hit[1])
        if not filled:
            return []
        origins = [taint.eval(a.value, env, cls) for a in call.args]
        if not any(o is not None for o in origins):
            return []
        self.returns_for_args(call, hit, origins)
        key = self._args_key(call, hit, origins)
        written = self.__dict__.get("_written_for", {}).get(key) if key is not None else None
        if not written:
            return []
        info = hit[1]
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
        out = []
        for i, arg in enumerate(call.args):
            if arg.star:
                continue
            name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
            if name in written and dotted_name(arg.value) is not None:
                out.append((arg.value, replace(written[name], via=f"filled by {info.name}()", via_call=None)))
        return out

    def may_return_rank(self, src: "PythonSource", qual: str) -> bool:
        """Can `returns()` of this function be other than None? Decided on the outlines, with an
        over-approximation: a function can return a rank-varying value only if its file holds a rank source
        (any of the words the taint starts from, or the name of an attribute something stores a rank id in,
        `rank_fields`), or it -- or, for a method, any method of its file (`self.`
        attributes are file-wide), or its module's top level -- calls a function that can."""
        return _unit(src, qual) in self._rank_capable_units()

    def _rank_capable_units(self) -> set[tuple[int, str]]:
        memo = self.__dict__.get("_capable")
        if memo is not None:
            return memo
        seeds, callers = self._capable_graph()
        # a file that reads an attribute something stores a rank id in (`rank_fields`, by provenance) may spell no
        # rank word itself: every function of a file using such an attribute's name is a seed
        names = frozenset(self.rank_fields())
        # while `rank_fields` is being built its table is partial, so the answer is not the final one; it
        # depends on the table's names only, and is memoised per set of names (the table grows a few times, while
        # `may_return_rank` asks once per call it evaluates)
        partial = self.__dict__.setdefault("_capable_partial", {})
        able = partial.get(names)
        if able is None:
            seeds = set(seeds)
            for name in names:
                for src in self.project.using_identifier(name):
                    if src.outline is not None:
                        seeds.update(_unit(src, qual) for qual in src.outline.functions)
            able = set(seeds)
            work = list(seeds)
            while work:
                unit = work.pop()
                for caller in callers.get(unit, ()):
                    if caller not in able:
                        able.add(caller)
                        work.append(caller)
            partial[names] = able
        if not self.__dict__.get("_building"):
            self.__dict__["_capable"] = able    # not while `rank_fields` is being built (its table is partial)
            self.__dict__.pop("_capable_partial", None)
        return able

    def _capable_graph(self) -> tuple[set[tuple[int, str]], dict[tuple[int, str], set[tuple[int, str]]]]:
        """The part of `_rank_capable_units` that does not read `rank_fields`: the units seeded by a rank word of
        their file, and callee unit → units whose calls reach it (from the outlines and `call_targets`, itself
        memoised whatever the table). Memoised."""
        memo = self.__dict__.get("_capable_graph_memo")
        if memo is not None:
            return memo
        seeds: set[tuple[int, str]] = set()
        callers: dict[tuple[int, str], set[tuple[int, str]]] = {}    # callee unit → units whose calls reach it
        for src in self.project.python:
            outline = src.outline
            if outline is None:
                continue
            seeded = seeded_tops(src)
            if seeded is None:
                seeds.update(_unit(src, qual) for qual in outline.functions)
                continue
            seeds.update(_unit(src, qual) for qual in outline.functions if qual.split(".", 1)[0] in seeded)
            units_of_scope = {qual: _unit(src, qual) for qual in outline.functions}
            every = set(units_of_scope.values())
            for callee, scope in outline.calls:
                if callee is None:
                    continue
                # a call at module level feeds the module env every function of the file reads; elsewhere the
                # unit of the innermost function that holds the call, and of every function it is nested in
                if scope == MODULE_SCOPE:
                    users = every
                else:
                    users = {units_of_scope[q] for q in _enclosing(scope) if q in units_of_scope}
                for target in self.call_targets(src, callee, scope):
                    callers.setdefault(_unit(*target), set()).update(users)
        memo = self.__dict__["_capable_graph_memo"] = (seeds, callers)
        return memo

    def call_targets(self, src: "PythonSource", callee: Optional[str], scope: str) -> list[tuple["PythonSource", str]]:
        """Functions (source, qualified name) a call of this scope may run: `call_source` with each class the
        call may be resolved in (`scope_classes`). Memoised: both fixed points on the outlines (`site_units`,
        `_rank_capable_units`) ask it for every call of the project."""
        memo = self.__dict__.setdefault("_targets_memo", {})
        key = (id(src), callee, scope)
        out = memo.get(key)
        if out is None:
            out = memo[key] = []
            for cls in scope_classes(src.outline, scope):
                hit = self.call_source(src, callee, cls, scope=scope)
                if hit is not None and not any(h[0] is hit[0] and h[1] == hit[1] for h in out):
                    out.append(hit)
        return out

    # --- arguments: `evaluate(engine, batches[rank::world])` taints `evaluate`'s parameter ------------------
    def count_calls_named(self, name: str) -> int:
        """How many calls across the checked files have a callee ending in `name`, from the outlines. Memoised:
        every function's parameter taint asks it, and in a view of many launch scripts each sum is over them all."""
        memo = self.__dict__.setdefault("_calls_named_memo", {})
        count = memo.get(name)
        if count is None:
            count = memo[name] = sum(src.outline.call_attrs[name] for src in self._files_calling(name))
        return count

    def _files_calling(self, name: str) -> list["PythonSource"]:
        memo = self.__dict__.setdefault("_files_calling_memo", {})
        if name not in memo:
            memo[name] = [src for src in self.project.using_identifier(name)
                          if src.outline is not None and src.outline.call_attrs[name]]
        return memo[name]

    def _files_calling_function(self, src: "PythonSource", info: FunctionInfo) -> list["PythonSource"]:
        """Files with a call that `function_for_call` may resolve to this function, chosen on the outlines."""
        wanted = (id(src), info.qualname)
        out = []
        for other in self._files_calling(info.name):
            outline = other.outline
            for callee, scope in outline.calls:
                if not callee or callee.rsplit(".", 1)[-1] != info.name:
                    continue
                if any((id(t[0]), t[1]) == wanted for t in self.call_targets(other, callee, scope)):
                    out.append(other)
                    break
        return out

    def handed_functions(self, src: "PythonSource", info: FunctionInfo, param: str, depth: int = 0
                         ) -> Optional[list[tuple["PythonSource", FunctionInfo]]]:
        """The checked functions a parameter of `info` can hold when the function calls it (`forward_step_func`
        of a training step that every caller hands a project function, a name its own caller was handed in turn,
        or the parameter's default): followed back through the callers in the checked files, `_HANDED_DEPTH`
        callers deep. None when some value cannot be told (a lambda, an attribute of an object, a caller that
        passes it on through `*args`, too deep)."""
        key = (id(src), info.qualname, param)
        memo = self.__dict__.setdefault("_handed", {})
        if key in memo:
            return memo[key]
        memo[key] = None                # a cycle of callers: unknown
        out: Optional[list] = None
        if depth <= _HANDED_DEPTH and not info.name.startswith("__") and self.count_calls_named(info.name) <= 64:
            out = []
            values = []
            default = next((p.default for p in info.node.params.params + info.node.params.kwonly_params
                            if p.name.value == param and p.default is not None), None)
            if default is not None:
                values.append((src, self._enclosing_info(src, info), default))
            params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
            at = params.index(param) if param in params else None
            for other, call, caller in self._calls_of(src, info):
                if any(a.star for a in call.node.args):
                    out = None
                    break
                positional = [a for a in call.node.args if a.keyword is None]
                arg = next((a.value for a in call.node.args if a.keyword is not None and a.keyword.value == param),
                           None)
                if arg is None and at is not None and at < len(positional):
                    arg = positional[at].value
                if arg is not None:
                    values.append((other, caller, arg))
            for other, scope_info, value in values if out is not None else ():
                found = self._function_value(other, scope_info, value, depth)
                if found is None:
                    out = None
                    break
                out.extend(f for f in found if all(f[1] is not g[1] for g in out))
        memo[key] = out
        return out

    def _enclosing_info(self, src: "PythonSource", info: FunctionInfo) -> Optional[FunctionInfo]:
        """The function a default value of `info`'s parameters is evaluated in (None: module level)."""
        owner = info.qualname.rpartition(".")[0]
        return src.facts.functions.get(owner) if owner else None

    def _bound_function_values(self, src: "PythonSource", scope: FunctionInfo, value: cst.BaseExpression, name: str,
                               assigned: list, depth: int) -> Optional[list[tuple["PythonSource", FunctionInfo]]]:
        """`_function_value` of a local or parameter `name`: the values its bindings and callers give it."""
        out: list = []
        for v in assigned:
            found = self._function_value(src, scope, v, depth) if v is not value else None
            if found is None:
                return None
            out.extend(found)
        if name in scope.params:
            found = self.handed_functions(src, scope, name, depth + 1)
            if found is None:
                return None
            out.extend(found)
        return out

    def _function_value(self, src: "PythonSource", scope: Optional[FunctionInfo], value: cst.BaseExpression,
                        depth: int) -> Optional[list[tuple["PythonSource", FunctionInfo]]]:
        """The checked functions an expression handed as a function can be: a function's name (imported, of the
        file, nested), a parameter of the scope (its callers' values, `handed_functions`), a local the scope
        binds to such names on some path (all of them, and the parameter's values when it is one)."""
        if isinstance(value, cst.Name) and value.value == "None":
            return []
        name = value.value if isinstance(value, cst.Name) else None
        out: list = []
        if name is not None and scope is not None:
            assigned = [node.value for node in _assignments(scope.node.body)
                        for t in node.targets if isinstance(t.target, cst.Name) and t.target.value == name]
            if name in scope.params or assigned:
                active = self.__dict__.setdefault("_function_values_active", set())
                key = (id(scope.node), name)
                if key in active:
                    return None     # round a cycle of bindings (`a = b` … `b = a`): unknown
                active.add(key)
                try:
                    return self._bound_function_values(src, scope, value, name, assigned, depth)
                finally:
                    active.discard(key)
            enclosing = self._enclosing_info(src, scope)
            if enclosing is not None and scope.class_name is None and name not in src.facts.functions and \
                    depth <= _HANDED_DEPTH:
                # a free variable of a nested function (`eval_func` of the closure `metrics_func`): what the
                # enclosing function binds it to
                return self._function_value(src, enclosing, value, depth + 1)
        if isinstance(value, cst.Call) and depth <= _HANDED_DEPTH:
            return self._returned_functions(src, scope, value, depth + 1)
        if not isinstance(value, (cst.Name, cst.Attribute)):
            return None
        callee = src.facts.resolve_expr(value)
        hit = self.function_info(self.call_source(src, callee, scope.class_name if scope else None,
                                                  scope=scope.qualname if scope else None))
        return [hit] if hit is not None else None

    def _returned_functions(self, src: "PythonSource", scope: Optional[FunctionInfo], call: cst.Call, depth: int
                            ) -> Optional[list[tuple["PythonSource", FunctionInfo]]]:
        """The checked functions a call returns when it returns functions (`end_of_epoch_callback =
        end_of_epoch_callback_provider(args, ...)` of a provider that builds a closure and returns it): every
        function the callee can be, each of whose returns is None (no callback) or a function value
        (`_function_value`: a nested function's name, a call of another such provider). None when some callee or
        some return cannot be told."""
        callees = self._function_value(src, scope, call.func, depth)
        if not callees:
            return None
        out: list = []
        for other, info in callees:
            returns = list(iter_returns(info.node.body))
            if not returns or any(r.value is None for r in returns):
                return None
            for r in returns:
                found = self._function_value(other, info, r.value, depth + 1)
                if found is None:
                    return None
                out.extend(f for f in found if all(f[1] is not g[1] for g in out))
        return out

    def param_taint(self, src: "PythonSource", info: FunctionInfo) -> Env:
        """Parameters some caller in the checked files passes a rank-varying value (context-insensitive)."""
        key = (id(src), info.qualname)
        if key in self._params:
            return self._params[key]
        self._params[key] = {}
        out: Env = {**self._trainer_batch(src, info), **self._launched_rank(src, info),
                    **self._handed_rank(src, info)}
        if info.name.startswith("__") or self.count_calls_named(info.name) > 64:
            self._params[key] = out
            return out
        partial = False
        for other, call, caller in self._calls_of(src, info):
            cls = caller.class_name if caller else None
            # a caller whose own walk asked for this (a summary it needs on the way): its placeholder environment
            # holds none of its names, so the answer is not kept -- asked again once that walk is done
            partial = partial or (id(other), call.scope) in self._walking
            env = self.call_env(other, call.scope, call.node)
            params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
            taint = self.taint(other)
            for i, arg in enumerate(call.node.args):
                if arg.star:
                    continue
                name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
                if name is None or name in out:
                    continue
                origin = taint.eval(arg.value, env, cls)
                if origin is not None:
                    out[name] = replace(origin, via=f"argument `{name}` of {info.name}()", via_call=(other, call.node))
        if partial:
            del self._params[key]
        else:
            self._params[key] = out
        return out

    def _calls_of(self, src: "PythonSource", info: FunctionInfo) -> list:
        """(file, call site, calling function or None) of every call in the checked files that resolves to
        `info`."""
        out = []
        for other in self._files_calling_function(src, info):
            for call in other.facts.calls:
                if call.attr != info.name:
                    continue
                caller = other.facts.functions.get(call.scope)
                hit = self.function_info(self.call_source(other, call.callee, caller.class_name if caller else None,
                                                          scope=call.scope))
                if hit is not None and hit[1] is info:
                    out.append((other, call, caller))
        return out

    def calls_of(self, src: "PythonSource", info: FunctionInfo) -> list:
        """(file, call node, calling function or None) of every call in the checked files that resolves to
        `info` (none for a dunder or a name called more than 64 times: too common to follow)."""
        if info.name.startswith("__") or self.count_calls_named(info.name) > 64:
            return []
        return [(other, call.node, caller) for other, call, caller in self._calls_of(src, info)]

    @property
    def _launched(self) -> dict[tuple[int, str], tuple["PythonSource", cst.Call]]:
        """(id of source, qualified name) of the functions a process launcher starts as workers → (file, launcher
        call): `torch.multiprocessing.spawn(fn, args=...)`/`start_processes(fn, ...)` (and torch_xla's `spawn`)
        call `fn(i, *args)` in process i of the launch, so fn's first parameter is the process's rank."""
        memo = self.__dict__.get("_launched_memo")
        if memo is None:
            memo = self.__dict__["_launched_memo"] = {}
            parents = self.__dict__["_launched_parents"] = {}
            for other in self.project.mentioning("spawn", "start_processes"):
                if other.outline is None or not any(
                        callee in PROCESS_LAUNCHERS for callee, _ in other.outline.calls):
                    continue            # decided on the outline: the file is not parsed
                for call in other.facts.calls:
                    if call.callee not in PROCESS_LAUNCHERS:
                        continue
                    fn = call.keyword("fn") or call.keyword("entrypoint")
                    fn = fn.value if fn is not None else \
                        call.node.args[0].value if call.node.args and call.node.args[0].keyword is None else None
                    if fn is None:
                        continue
                    caller = other.facts.functions.get(call.scope)
                    hit = self.call_source(other, other.facts.resolve_expr(fn), caller.class_name if caller else None,
                                           scope=call.scope)
                    if hit is not None:
                        memo.setdefault((id(hit[0]), hit[1]), (other, call.node))
                        parents.setdefault(id(other), []).append((call.scope, hit))
        return memo

    def _launching(self, src: "PythonSource") -> list[tuple[frozenset, list]]:
        """The functions of `src` that hand a checked worker to a process launcher (the launching process, one
        per launch: `def main(): ... mp.spawn(main_worker, ...)`): (the ids of their nodes; per worker they
        start, its file and the ids of its nodes), memoised per file."""
        self._launched
        memo = self.__dict__.setdefault("_launching_memo", {})
        out = memo.get(id(src))
        if out is None:
            by_scope: dict[str, list] = {}
            for scope, hit in self.__dict__["_launched_parents"].get(id(src), ()):
                by_scope.setdefault(scope, []).append(hit)
            out = []
            for scope, workers in by_scope.items():
                info = src.facts.functions.get(scope)
                found = [w for w in (self.function_info(h) for h in workers) if w is not None]
                if info is not None and found:
                    out.append((_node_ids(info.node), [(w, _node_ids(i.node)) for w, i in found]))
            memo[id(src)] = out
        return out

    def _worker_store(self, src: "PythonSource", e: cst.Attribute, origin: "Origin") -> bool:
        """Is `origin` (a rank id stored in a field) stored inside a worker that the function reading `e` starts
        through a process launcher? The launching function runs in the parent process, before (or without) any
        worker: a worker's store into its own copy of the object never reaches the parent's reads."""
        for ids, workers in self._launching(src):
            if id(e) in ids and any(wsrc is origin.source and id(origin.node) in inside for wsrc, inside in workers):
                return True
        return False

    def launches_worker_in_parent(self, src: "PythonSource") -> bool:
        """Does a function of `src` start a checked worker through a process launcher?"""
        if "spawn" not in src.text and "start_processes" not in src.text:
            return False
        self._launched
        return id(src) in self.__dict__["_launched_parents"]

    def launches_worker_in(self, src: "PythonSource") -> bool:
        """Is a function of `src` a process launcher's worker (its first parameter a rank id)?"""
        return any(key[0] == id(src) for key in self._launched)

    def _launched_rank(self, src: "PythonSource", info: FunctionInfo) -> Env:
        """The first parameter of a function a process launcher starts (`mp.spawn(worker, ...)`): a rank id."""
        hit = self._launched.get((id(src), info.qualname))
        if hit is None:
            return {}
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
        node = next((p.name for p in info.node.params.params if params and p.name.value == params[0]), None)
        if node is None:
            return {}
        other, call = hit
        return {params[0]: Origin("rank", node, src, via=f"the process index {code_of(call.func, 40)}() passes "
                                                         f"its worker (line {other.span(call).line})")}

    def _handed_rank(self, src: "PythonSource", info: FunctionInfo) -> Env:
        """Parameters the function hands torch as the process's rank as they came (`handed_ranks`): rank ids."""
        return {name: Origin("rank", node, src, via=f"{HANDED_VIA} ({how} at {src.path}:{src.span(at).line})")
                for name, (node, at, how) in handed_rank_params(src, info).items()}

    def is_hf_trainer_class(self, src: "PythonSource", cls: Optional[str]) -> bool:
        """Does the class `cls` of `src` derive from the HF Trainer (`transformers.Trainer`, a `trl` trainer),
        directly or through classes of the view? Decided on the outlines' resolved bases."""
        if not cls or src.outline is None:
            return False
        memo = self.__dict__.setdefault("_hf_trainer", {})
        key = (id(src), cls)
        if key not in memo:
            memo[key] = False
            by_name = self.__dict__.get("_classes_by_name")
            if by_name is None:
                by_name = self.__dict__["_classes_by_name"] = {}
                for other in self.project.python:
                    if other.outline is not None:
                        for c in other.outline.classes.values():
                            by_name.setdefault(c.name, []).append((other, c.qualname))
            todo, seen = [(src, cls)], set()
            while todo and not memo[key]:
                where, name = todo.pop()
                info = where.outline.classes.get(name) if where.outline is not None else None
                if info is None or (id(where), name) in seen:
                    continue
                seen.add((id(where), name))
                for base in info.bases:
                    last = base.rsplit(".", 1)[-1]
                    if last.endswith("Trainer") and (base.startswith(("transformers.", "trl.")) or last in (
                            "Trainer", "Seq2SeqTrainer")):
                        memo[key] = True
                        break
                    todo.extend(by_name.get(last, ()))
        return memo[key]

    def _trainer_batch(self, src: "PythonSource", info: FunctionInfo) -> Env:
        """The batch parameter of an HF Trainer hook overridden in a Trainer subclass: the Trainer's loop calls
        `training_step`/`compute_loss`/`prediction_step` with this rank's batch from its own (distributed)
        dataloader, and `training_step` hands it on to `_prepare_inputs` -- same keys and row count on every
        rank, contents of its own (`Origin` kind "item")."""
        if info.name not in TRAINER_BATCH_HOOKS or not info.class_name or info.params[:1] != ["self"]:
            return {}
        at = TRAINER_BATCH_HOOKS[info.name]
        param = info.params[at] if at < len(info.params) else None
        if param is None:
            return {}
        if not self.is_hf_trainer_class(src, info.class_name):
            return {}
        node = next((p.name for p in info.node.params.params if p.name.value == param), None)
        if node is None:
            return {}
        return {param: Origin("item", node, src, via=f"the batch the HF Trainer passes to {info.name}()", batch=True)}

    def scope_env(self, src: "PythonSource", scope: str) -> Env:
        """Every name a scope ever binds to a rank-varying value (flow-insensitive)."""
        return self._scope_walk(src, scope)[0]

    def call_env(self, src: "PythonSource", scope: str, call: cst.Call) -> Env:
        """The names rank-varying where `call` is evaluated: flow-sensitive (`inputs = self.prepare(inputs)` does
        not feed the call its own result); inside a loop also every name the outermost enclosing loop binds (a
        later statement of the body runs before the call's next iteration), never what is bound after the loop
        (`_CallSiteWalk`). A call the walk did not reach: every name the scope ever binds."""
        ever, at_call = self._scope_walk(src, scope)
        return at_call.get(id(call), ever)

    def _scope_walk(self, src: "PythonSource", scope: str) -> tuple[Env, dict[int, Env]]:
        key = (id(src), scope)
        if key in self._scope_env:
            return self._scope_env[key]
        module = dict(self.module_env(src))
        self._scope_env[key] = (module, {})
        self._walking.add(key)
        try:
            return self._walk_scope(src, scope, key, module)
        finally:
            self._walking.discard(key)

    def _walk_scope(self, src: "PythonSource", scope: str, key: tuple[int, str], module: Env
                    ) -> tuple[Env, dict[int, Env]]:
        if scope == MODULE_SCOPE:
            # the module's own statements run once, in order: a call there sees what is bound before it, not every
            # name the module ever binds (`if is_main: table = parse(args); prepare(table)` passes rank 0's own
            # table, which the join after the branch makes varying only for what comes after it)
            walk = _CallSiteWalk(self.taint(src), scope=MODULE_SCOPE, env={})
            walk.run(src.module.body)
            self._scope_env[key] = (module, walk.at_call)
            return self._scope_env[key]
        info = src.facts.functions.get(scope)
        if info is None:
            return self._scope_env[key]
        env = {**self.globals_for(src, info), **self.param_taint(src, info)}
        walk = _CallSiteWalk(self.taint(src), scope=scope, env=env, cls=info.class_name)
        walk.run(info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ())
        found = (walk.ever_bound, walk.at_call)
        if key in self._params:
            self._scope_env[key] = found
        else:
            del self._scope_env[key]    # its parameters' taint was partial (`param_taint`): walked again when asked
        return found


class _CallSiteWalk(FlowWalk):
    """The base walk, also keeping the environment each call is evaluated in: outside loops the one at the call
    (shared between calls while no name is bound in between); inside a loop what holds on entry to the outermost
    loop around it together with every name that loop ever binds (a later statement of the body runs before the
    call's next pass) -- not what the scope binds after the loop (`if is_main: network = unwrap(network)` after
    the epochs never reaches a call inside them). That bound is narrowed by walking the loop again from its entry
    state, each loop to a fixed point of what reaches its head (`_loop_to_fixpoint`): a name the pass binds again
    before the call holds what it was bound to there (`if rank == 0: prompts = [""] * n; generate(prompts)`
    passes rank 0's uniform list on every pass, whatever `prompts` holds after the branch; a query broadcast at
    the end of each pass reaches the call broadcast). The `if` path is kept (`branch_path`), so a name one branch
    of a rank test alone binds holds that branch's value on a later path through the same test
    (`FlowWalk._recorrelate`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.at_call: _CallEnvs = _CallEnvs()
        self.at_call.walk = self
        self._lazy: dict[int, tuple] = {}           # a call in a loop -> its outermost loop's walk from the head
        self._version = 0
        self._snapshot: tuple[int, int, Env] = (-1, -1, {})
        self._loop_bound: Optional[Env] = None      # the outermost loop's entry env and what it binds
        self._loop_calls: list[int] = []
        self._head_pass = False                     # walking the outermost loop again from its head (`loop`)
        self._head_at: dict[int, Env] = {}          # the environments at the calls of that walk
        self._head_budget = 0                       # the loop walks that walk may still make (`_HEAD_WALKS`)
        self._continues: list[list[Env]] = []       # per loop of that walk: the environments at its `continue`s
        self._elif_of: dict[int, cst.If] = {}       # an `elif` link → the link it is the `orelse` of
        self.seq_bound: dict = {}                   # (`path_implies` reads names through it: not tracked here)

    # a name one branch of a rank test alone binds holds that branch's value on a later path implying it (`if
    # rank == 0: texts = read(f)` … `if rank == 0: generate(texts)` hands rank 0's own list: `_recorrelate`)
    def enter_if(self, node: cst.If) -> None:
        super().enter_if(node)
        if isinstance(node.orelse, cst.If):
            self._elif_of[id(node.orelse)] = node

    def branch_path(self) -> Optional[tuple]:
        return if_path(self._ifs, self._holds, self._elif_of)

    def path_implies(self, use: tuple, assigned: tuple) -> bool:
        """Every test of `assigned` is on `use` too, with the same side, and reads nothing that could change in
        between (`_same_each_time`; a name read is rebound: `_uncorrelate` drops the record)."""
        taken = {(code_of(t, 10000), h) for t, h in use}
        return all(self._same_each_time(t) and (code_of(t, 10000), h) in taken for t, h in assigned)

    def _same_each_time(self, e: cst.BaseExpression) -> bool:
        """Is `e` made of names, literals, comparisons, `and`/`or`/`not` and rank-id calls without arguments
        (`dist.get_rank()`) only: the same value wherever it is evaluated again while its names are not rebound?"""
        if isinstance(e, (cst.Name, cst.Integer, cst.SimpleString)):
            return True
        if isinstance(e, cst.UnaryOperation):
            return self._same_each_time(e.expression)
        if isinstance(e, (cst.BooleanOperation, cst.BinaryOperation)):
            return self._same_each_time(e.left) and self._same_each_time(e.right)
        if isinstance(e, cst.Comparison):
            return self._same_each_time(e.left) and all(self._same_each_time(c.comparator) for c in e.comparisons)
        if isinstance(e, cst.Call) and not e.args:
            origin = self.taint.eval(e, {}, self.cls)
            return origin is not None and origin.kind == "rank" and origin.node is e
        if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
            # a rank id the class reads through a property (`self.data_parallel_rank`)
            origin = self.taint.eval(e, {}, self.cls)
            return origin is not None and origin.kind == "rank" and not origin.opaque
        return False

    def bind(self, target, value, origin) -> None:
        self._version += 1
        super().bind(target, value, origin)
        if self._loop_bound is not None:
            for name, o in self.env.items():
                if not name.endswith(WRITTEN):     # written by one pass: not yet at the calls before it
                    self._loop_bound.setdefault(name, o)

    def loop(self, node, guards):
        if self._head_pass:
            return self._loop_to_fixpoint(node, guards)
        if self.loop_depth or self._loop_bound is not None:
            return super().loop(node, guards)
        ever_before = set(self.ever_bound)
        entry = self._state()
        self._loop_bound, self._loop_calls = dict(self.env), []
        try:
            pending = super().loop(node, guards)
        finally:
            bound, calls = self._loop_bound, self._loop_calls
            self._loop_bound, self._loop_calls = None, []
        for name, o in self.env.items():
            if not name.endswith(WRITTEN):
                bound.setdefault(name, o)
        for name, o in self.ever_bound.items():
            if name not in ever_before:     # set by the walk itself inside the loop (a branch's varying names)
                bound.setdefault(name, o)
        head = (entry, node, guards, calls)
        for call_id in calls:
            self.at_call[call_id] = bound
            self._lazy[call_id] = head
        return pending

    def settle(self, call_id: int) -> None:
        """Narrow the environments at the calls of the outermost loop around the call `call_id`: walk it again,
        from the state it was entered in, each loop to what reaches its head on any pass (`_loop_to_fixpoint`);
        where every loop settles, the calls keep the environment of that walk, else the first walk's bound. Done
        when a call's environment is first read (`_CallEnvs`), after the scope's walk: most loops' calls are never
        asked about. Then the state at the end of the walk is restored. A walk from a head under way leaves the
        other loops' calls their bound."""
        if self._head_pass or call_id not in self._lazy:
            return
        entry, node, guards, calls = self._lazy[call_id]
        for other in calls:
            self._lazy.pop(other, None)
        if not self._lazy:
            self.at_call.walk = None
        after = self._state()
        vars(self).update(entry)
        self._head_pass, self._head_at = True, {}
        self._head_budget = _HEAD_WALKS * _loops_within(node)
        try:
            self._loop_to_fixpoint(node, guards)
            self.at_call.update(self._head_at)
        except _Unsettled:
            pass
        finally:
            vars(self).update(after)

    def _loop_to_fixpoint(self, node, guards):
        """Walk the loop from its entry environment joined with what reaches its head again -- the environment
        after the body and at each `continue` --, until no name varies there that did not before (at most
        `_HEAD_PASSES` walks, and `_HEAD_WALKS` per loop of the outermost one in all: `_Unsettled` otherwise, and
        the calls keep the first walk's bound)."""
        start = self._state()
        head = dict(self.env)
        for _ in range(_HEAD_PASSES):
            self._head_budget -= 1
            if self._head_budget < 0:
                raise _Unsettled()
            self._continues.append([])
            try:
                pending = super().loop(node, guards)
            finally:
                continues = self._continues.pop()
            self._merge(self.env, head, *continues)
            if all(name in head and (head[name].kind, head[name].axes, head[name].by_setting) ==
                   (o.kind, o.axes, o.by_setting) for name, o in self.env.items()):
                return pending
            head = dict(self.env)
            vars(self).update(start)
            self.env = dict(head)
        raise _Unsettled()

    def small(self, node, guards):
        if self._head_pass and isinstance(node, cst.Continue) and self._continues:
            self._continues[-1].append(dict(self.env))
        return super().small(node, guards)

    def _state(self) -> dict:
        """The walk's state but the calls' environments (containers copied: the walk updates them in place)."""
        return {k: (copy(v) if isinstance(v, (dict, list, set)) else v) for k, v in vars(self).items()
                if k not in _NOT_STATE}

    def on_call(self, call: cst.Call, guards) -> None:
        if self._head_pass:
            self._head_at[id(call)] = dict(self.env)
            return
        if self.loop_depth:
            if self._loop_bound is not None:
                self._loop_calls.append(id(call))
            return
        env_id, version, snap = self._snapshot
        if env_id != id(self.env) or version != self._version:
            snap = dict(self.env)
            self._snapshot = (id(self.env), self._version, snap)
        self.at_call[id(call)] = snap


# methods that put a value into the container they are called on (those of `_ONE_ITEM` one element per call)
_FILLING = frozenset({"append", "extend", "update", "insert", "add", "setdefault", "appendleft"})
_ONE_ITEM = frozenset({"append", "insert", "add", "appendleft", "setdefault"})


class _CallEnvs(dict):
    """The environments at a scope's calls (`_CallSiteWalk.at_call`), by id of the call: one in a loop is narrowed
    by walking the loop from its head when first read (`_CallSiteWalk.settle`)."""

    walk: Optional["_CallSiteWalk"] = None

    def get(self, key, default=None):
        if self.walk is not None:
            self.walk.settle(key)
        return dict.get(self, key, default)


_HEAD_PASSES = 3        # the walks of a loop `_CallSiteWalk._loop_to_fixpoint` makes before it gives up
# what `_CallSiteWalk._state` leaves out: the calls' environments, the walk budget, memos of what a node reads
_NOT_STATE = frozenset({"at_call", "_head_at", "_head_budget", "_test_names", "_stmt_names", "_snapshot", "_lazy"})
_HEAD_WALKS = 6         # per loop statement of an outermost loop: the loop walks its fixed points may take in all


def _loops_within(node: cst.CSTNode) -> int:
    """The loop statements of `node`, itself included (not those of nested functions and classes)."""
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            continue
        count += isinstance(n, (cst.For, cst.While))
        stack.extend(sub_statements(n))
    return count


class _Unsettled(Exception):
    """A loop of `_CallSiteWalk`'s walk from the loop head did not settle within its walks."""
_SETTING_VALUES = 8     # the largest setting domain `_returns_by_setting` walks a method for, value by value
_HANDED_DEPTH = 4       # callers followed back for a function handed in as a parameter


def _group_renamed(origin: Origin, call: cst.Call, params: list[str]) -> Origin:
    """A group's rank handed to a helper: its group as the helper names it (the parameter that receives the same
    group expression), or out of reach (None); the world stays the world."""
    if not origin.group:
        return origin
    for i, arg in enumerate(call.args):
        if not arg.star and dotted_name(arg.value) == origin.group:
            name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
            return replace(origin, group=name)
    return replace(origin, group=None)


def _group_out(origin: Origin) -> Optional[str]:
    """A group's rank returned to a caller: the callee's name of the group means nothing there (the world still
    does)."""
    return "" if origin.group == "" else None


def _filled_params(info: FunctionInfo) -> dict[str, list]:
    """Parameters the function (its nested functions included) writes into and never rebinds: parameter → the
    (method, value) pairs put in by method calls (`into.append(v)`: [("append", v)]); item stores (`into[k] = v`)
    are the walk's."""
    memo = info.__dict__.get("_filled")
    if memo is not None:
        return memo
    params = set(info.params) - {"self", "cls"}
    filled: dict[str, list] = {}
    rebound: set[str] = set()
    if params:
        for node in iter_assigns(info.node):
            for t in node.targets:
                target = t.target
                if isinstance(target, cst.Name):
                    rebound.add(target.value)
                elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and \
                        target.value.value in params:
                    filled.setdefault(target.value.value, [])
        for call in info.calls:
            func = call.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _FILLING and isinstance(func.value, cst.Name) \
                    and func.value.value in params:
                filled.setdefault(func.value.value, []).extend((func.attr.value, a.value) for a in call.node.args)
    memo = {p: v for p, v in filled.items() if p not in rebound}
    info.__dict__["_filled"] = memo
    return memo


_INSTALLED_SOURCES: dict[str, Optional["PythonSource"]] = {}


def installed_class(qualified: str) -> Optional[tuple["PythonSource", str]]:
    """A class of an installed package by its fully qualified name (`transformers.trainer_callback.TrainerState`):
    the module's file found in the interpreter's site-packages (not imported) and parsed, when it defines the
    class at module level. None when the module is not installed there or the name is not a class of it (a
    re-export through a package's lazy `__init__` is not followed). Sources are kept for the process."""
    module, _, name = qualified.rpartition(".")
    if not module or not name[:1].isalpha():
        return None
    if module not in _INSTALLED_SOURCES:
        _INSTALLED_SOURCES[module] = _read_installed(module)
    src = _INSTALLED_SOURCES[module]
    if src is None or src.outline is None or name not in src.outline.classes:
        return None
    return src, name


def _read_installed(module: str) -> Optional["PythonSource"]:
    import site
    from pathlib import Path

    from dslint.sources import PythonSource
    from dslint.sources.guard import MAX_SOURCE_CHARS
    parts = module.split(".")
    roots = [*site.getsitepackages(), site.getusersitepackages()]
    for root in roots:
        base = Path(root, *parts)
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            try:
                if not path.is_file() or path.stat().st_size > MAX_SOURCE_CHARS:
                    continue
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, ValueError):
                continue
            return PythonSource(str(path), text, module_name=module)
    return None


# words a file must spell to store a rank id in an attribute (a prefilter of `ProjectTaint.rank_fields`)
_FIELD_SOURCE_WORDS = ("rank", "RANK", "process_index", "main_process", "PROCID", "LOCALID", "spawn",
                       "start_processes", "get_ordinal")
# the option every process gets from the DeepSpeed launcher (`deepspeed/launcher/launch.py`) and from
# `torch.distributed.launch` (`--local-rank`, formerly `--local_rank`): a launcher contract
_LAUNCHER_OPTIONS = ("--local_rank", "--local-rank")
_MODULE_ENV = "_dslint_module_env"      # `ProjectTaint.module_env` kept on a source (`view_free.per_source`)
_MODULE_QUERIES = frozenset({"call_source", "class_of"})    # lookups whose answers it is kept with


_FIELD_PART = "_dslint_rank_field_part"   # what a file adds to `ProjectTaint.rank_fields`, kept on it (`view_free`)
_FIELD_QUERIES = _MODULE_QUERIES | frozenset({"module_env"})


def _field_part(analysis, src: "PythonSource", emit, done: list) -> list:
    """What `src` adds to the rank-field table (`ProjectTaint.rank_fields`), each store handed to `emit` as it
    is found (the table is built re-entrantly: a later lookup of this file sees it); returns `done`, the list
    `emit` fills."""
    taint = RankTaint(analysis, src)
    module = analysis.module_env(src)
    for key, origin in module.items():
        if "." in key and origin.kind == "rank" and not key.startswith("self."):
            emit(key.rsplit(".", 1)[-1], None, origin, (None, src, None, None))
    for info, targets, is_property, handed in _field_candidates(src):
        if is_property:
            hit = analysis.returns(src, info)
            if hit is not None and hit.kind == "rank":
                emit(info.name, (id(src), info.class_name), hit, ((id(src), info.class_name), src, info, None))
        # a field the method hands torch as the process's rank (`os.environ["RANK"] = str(self.rank)`)
        for attr, (read, node, how) in handed.items():
            owner = (id(src), info.class_name)
            emit(attr, owner, Origin("rank", read, src, via=f"{HANDED_VIA} ({how} at {src.path}:{src.span(node).line})"),
                 (owner, src, info, HANDED_RANK))
        if not targets:
            continue
        ever = analysis.scope_env(src, info.qualname)
        for target, value in targets:
            name = dotted_name(target)
            origin = ever.get(name) if name else None
            if origin is None or origin.kind != "rank":
                continue
            owner = (id(src), info.class_name) if name.startswith("self.") and name.count(".") == 1 \
                and info.class_name else None
            emit(target.attr.value, owner, origin, None)
            # this store's own value (another store of the name may be a constant: one answer for every rank in
            # the runs that take it, `rank_field_stores`)
            if taint.eval(value, ever, info.class_name) is not None:
                emit(target.attr.value, owner, None, (owner, src, info, value))
    for cls in src.facts.classes.values():
        _class_defaults(src, taint, module, cls, emit)
    if "add_argument" in src.text:
        for call in src.facts.calls:
            if call.attr != "add_argument":
                continue
            default = call.keyword("default")
            dest = _option_dest(call.node)
            if default is None or dest is None:
                continue
            caller = src.facts.functions.get(call.scope)
            env = analysis.scope_env(src, call.scope) if caller is not None else module
            hit = taint.eval(default.value, env, caller.class_name if caller else None)
            if hit is not None and hit.kind == "rank":
                emit(dest, None, hit, (None, src, caller, default.value))
    return done


def _class_defaults(src, taint, module, cls, emit) -> None:
    """Class-level fields (a dataclass's) whose default is a rank id: `local_rank: int =
    field(default=int(os.environ.get("LOCAL_RANK", -1)))`."""
    body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                value = small.value
                if isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == "field":
                    value = next((a.value for a in value.args if a.keyword is not None
                                  and a.keyword.value == "default"), None)
                hit = taint.eval(value, module, None) if value is not None else None
                if hit is not None and hit.kind == "rank":
                    emit(small.target.value, None, hit, (None, src, None, value))


def _module_walk(analysis, src: "PythonSource") -> Env:
    walk = FlowWalk(RankTaint(analysis, src), scope=MODULE_SCOPE, env={})
    walk.run(src.module.body)
    return walk.ever_bound


def _field_candidates(src: "PythonSource") -> list:
    """The functions of `src` that `_collect_rank_fields` reads, each as (info, its attribute stores whose value
    spells a rank source's word or hands on a parameter as it came, is it a property of a class, the fields it
    hands torch as the rank): what the file's text alone decides, kept on the source for every view."""
    memo = src.__dict__.get("_dslint_field_candidates")
    if memo is not None:
        return memo
    seeded = seeded_tops(src)
    memo = []
    for info in src.facts.functions.values():
        if seeded is not None and info.qualname.split(".", 1)[0] not in seeded:
            continue
        targets = [(t.target, node.value) for node in _assignments(info.node.body) for t in node.targets
                   if isinstance(t.target, cst.Attribute) and literal_value(node.value) is UNKNOWN
                   and (isinstance(node.value, cst.Name) and node.value.value in info.params
                        or _TAINT_WORDS.search(code_of(node.value, 10 ** 6)))]
        is_property = bool(info.class_name) and _is_property(info)
        handed = handed_rank_fields(src, info)
        if targets or is_property or handed:
            memo.append((info, targets, is_property, handed))
    src.__dict__["_dslint_field_candidates"] = memo
    return memo


def _add_field(table: dict, attr: str, owner, origin: Origin) -> None:
    entries = table.setdefault(attr, [])
    if not any(o == owner for o, _ in entries):
        entries.append((owner, origin))


def _is_property(info: FunctionInfo) -> bool:
    return any((dotted_name(d.decorator) or "").rsplit(".", 1)[-1] in ("property", "cached_property")
               for d in info.node.decorators)


def _option_dest(call: cst.Call) -> Optional[str]:
    """The attribute an argparse `add_argument(...)` call fills: `dest=`, else its first long option."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "dest":
            dest = literal_value(a.value)
            return dest if isinstance(dest, str) else None
    opts = [literal_value(a.value) for a in call.args if a.keyword is None]
    long = next((o for o in opts if isinstance(o, str) and o.startswith("--")), None)
    return long[2:].replace("-", "_") if long else None


def _launcher_options(project: "ProjectView", table: dict, values: dict) -> None:
    """(c) of `ProjectTaint.rank_fields`: `parser.add_argument("--local_rank", ...)` anywhere in the checked
    files, or an `HfArgumentParser` (which turns TrainingArguments' `local_rank` field into that option): the
    launcher passes each process its local rank there."""
    for src in project.mentioning(*_LAUNCHER_OPTIONS, "HfArgumentParser"):
        if src.outline is None:
            continue
        for call in src.facts.calls:
            if call.attr == "add_argument" and any(literal_value(a.value) in _LAUNCHER_OPTIONS
                                                   for a in call.node.args if a.keyword is None):
                what = "the launcher's `--local_rank` option"
            elif (call.callee or "").endswith("HfArgumentParser") and \
                    (call.callee or "").startswith("transformers"):
                what = "the launcher's `--local_rank` option (TrainingArguments' field)"
            else:
                continue
            _add_field(table, "local_rank", None, Origin("rank", call.node, src,
                                                          via=f"{what}, {src.path}:{src.span(call.node).line}"))
            values.setdefault("local_rank", []).append((None, src, None, LAUNCHER_OPTION))
            return


def _if_tests(info: FunctionInfo) -> list[cst.BaseExpression]:
    """The tests of the `if`/`elif` statements of a function's body, outer before inner (nested functions and
    classes are theirs, not its)."""
    out: list[cst.BaseExpression] = []
    stack = [info.node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(n, cst.If):
            out.append(n.test)
            stack.extend((n.body, *((n.orelse,) if n.orelse is not None else ())))
        else:
            stack.extend(sub_statements(n))
    return out


def _test_names(test: cst.BaseExpression) -> set[str]:
    """The plain names a test reads (as `fixed_truth` may decide them)."""
    out: set[str] = set()
    stack = [test]
    while stack:
        t = stack.pop()
        if isinstance(t, cst.Name):
            out.add(t.value)
        elif isinstance(t, cst.UnaryOperation):
            stack.append(t.expression)
        elif isinstance(t, cst.BooleanOperation):
            stack.extend((t.left, t.right))
        elif isinstance(t, cst.Comparison) and len(t.comparisons) == 1:
            stack.extend((t.left, t.comparisons[0].comparator))
    return out



def _node_ids(node: cst.CSTNode) -> frozenset:
    """The ids of every node under `node` (nested functions' included)."""
    ids = set()
    stack = [node]
    while stack:
        n = stack.pop()
        ids.add(id(n))
        stack.extend(n.children)
    return frozenset(ids)


def _hands_on(src: "PythonSource", info: FunctionInfo, env: Env, taint: "RankTaint") -> bool:
    """Does `__init__` hand a rank-varying value to a call whose effect on `self` is not followed: a base class's
    constructor (`super().__init__(rank)`, `Base.__init__(self, rank)`) or a method of `self` (`self.setup(rank)`)?"""
    for node in iter_calls(info.node.body):
        func = node.func
        if not isinstance(func, cst.Attribute):
            continue
        receiver = func.value
        on_self = isinstance(receiver, cst.Name) and receiver.value == "self"
        on_base = func.attr.value == "__init__"
        if not (on_self or on_base):
            continue
        if any(taint.eval(a.value, env, info.class_name) is not None for a in node.args):
            return True
    return False
