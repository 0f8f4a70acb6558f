"""Rank-varying values (the expression level; `rank_taint.ProjectTaint` holds the project level): which expressions can differ from one rank to another (PARCOACH's taint, DESIGN §2.1).

Sources are rank ids (`dist.get_rank()`, `os.environ["LOCAL_RANK"]`, `args.local_rank`,
`accelerator.is_main_process`, `trainer.is_world_process_zero()`, helpers that return them) and per-rank data
(slices and shards indexed by a rank id, loaders over them, `split_between_processes`, generation outputs, the
batches of the script's own data loaders and the HF Trainer's: their content varies, their structure does not).
Taint flows through assignment, unpacking, operators, comparisons, containers, attributes, f-strings, calls and
the returns of functions in the checked files. Collective outputs (all_reduce, broadcast, all_gather, accelerate
gather/reduce) are uniform again, and so are values that only place work on a device (`.to(device)`,
`device=`), a padded `DistributedSampler`, and comparisons with -1 (the "is this run distributed" test, which
is the same on every rank).

The evaluation is flow-sensitive inside a function body (see `FlowWalk`) and flow-insensitive for module
globals and `self.` attributes, which functions see whenever they run. What a tensor is (`isinstance`, `.dtype`,
`.dim()`, `.device.type`) stays uniform for per-rank data; an object of a checked class that only stores varying
arguments varies in those fields only (`object_fields`). The rules read these answers through the lattice,
`dslint.program.rank.lattice` (None here = Uniform there).
"""

from __future__ import annotations

import builtins
from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import cached_property
import re
from typing import TYPE_CHECKING, Any, Iterable, Optional, Protocol

import libcst as cst

from dslint.program.process_groups import (ALL_AXES, MEMBERSHIP, RANK_AXES, WORLD, group_argument,
                                          remaining_axes, resolve_group)
from dslint.program.statement_walks import code_of, iter_assigns, name_nodes, names_reached, sub_expressions  # noqa: F401  (code_of re-exported)
from dslint.program.facts import MODULE_SCOPE, dotted_name
from dslint.program.hyperparams import evaluate
from dslint.program.rank.library_types import (TENSOR_PLACEMENT_ATTRS, TENSOR_PLACEMENT_METHODS, DatasetTyping,
                                               accelerate_typing, display_only, item_preserving_arg, item_source,
                                               same_count, same_items, server_role, trace_example)
from dslint.program.rank.loader_flow import is_loader
from dslint.program.rank.samplers import distributed_sampler_class, library_distributed_sampler
from dslint.program.rank.stage_positions import single_rank_conjunction
from dslint.program.rank.saved_records import restored_sizes
from dslint.sources.literals import literal_value
from dslint.sources.wordsearch import alternation

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

# what a rank field the launchers fill (`--local_rank`) was stored from: the process's local rank itself
# (`ProjectTaint.rank_field_stores`)
LAUNCHER_OPTION = "launcher option"
RANK_ENV_KEYS = {"RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "SLURM_PROCID", "SLURM_LOCALID", "PMI_RANK", "MV2_COMM_WORLD_RANK", "CROSS_RANK"}
# how attributes holding a rank id are often spelled: words of the prefilter (`_TAINT_WORDS`) only -- whether an
# attribute holds one is decided by provenance (`RankTaint._attribute`, `ProjectTaint.rank_fields`)
RANK_ATTR_WORDS = {"local_rank", "global_rank", "node_rank", "world_rank", "process_index", "local_process_index",
                   "is_main_process", "is_local_main_process", "is_last_process", "should_save", "should_log",
                   "dp_rank", "data_parallel_rank", "global_rank_id", "local_rank_id", "is_global_zero"}
# functions/methods whose result is a rank id or a rank-0 test
# (not get_global_rank(group, i): it maps a group rank to a global one, the same answer everywhere)
RANK_CALLS = {"get_rank", "get_local_rank", "get_node_rank", "get_data_parallel_rank",
              "get_model_parallel_rank", "get_tensor_model_parallel_rank", "get_pipeline_model_parallel_rank",
              "get_expert_parallel_rank", "get_expert_data_parallel_rank", "get_sequence_parallel_rank",
              "is_world_process_zero", "is_local_process_zero", "is_main_process", "is_local_main_process",
              "is_rank_0", "is_rank0", "is_master", "is_master_process", "is_main", "get_ordinal", "current_device",
              # values of one coordinate of the rank grid (their axes: dslint/program/process_groups.py)
              *(n for n in RANK_AXES if n.startswith(("get_", "is_")))}
# predicates naming a group family's members (`is_rank_in_embedding_group()`): their Origin keeps the name
_MEMBER_CALLS = {n for sets in MEMBERSHIP.values() for s in sets for n in s}
# collectives whose result (or first argument, in place) is the same on every rank afterwards
UNIFORMIZING = {"all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "broadcast",
                "broadcast_object_list", "gather", "gather_for_metrics", "gather_object", "reduce",
                "pad_across_processes", "allreduce", "all_reduce_coalesced", "reduce_scatter", "reduce_scatter_tensor"}
_COLLECTIVE_MODULES = ("torch.distributed", "deepspeed.comm", "accelerate")
# calls whose result does not vary with a rank argument: device placement, seeding, padded samplers
LAUNDERING = {"to", "cuda", "device", "device_name", "set_device", "manual_seed", "seed", "manual_seed_all",
              "set_seed", "DistributedSampler", "DistributedLengthGroupedSampler", "deepspeed_io", "prepare",
              "prepare_data_loader", "getLogger", "get_logger", "log_dist", "print_rank_0", "get_world_size",
              "init_process_group", "init_distributed", "DistributedDataParallel", "DDP", "barrier",
              # every rank loads (saves) the one checkpoint the run names: its path, tag and iteration are shared
              "load_checkpoint", "save_checkpoint"}
# methods that compute from a batch's VALUES (`mask.sum()`, `.item()`, `.bool()`): their results vary, while
# structure-keeping ones (`batch.union(...)`, `.pop(k)`, `.to(device)`, `.repeat(...)`) keep what the batch is
_VALUE_METHODS = {"sum", "mean", "max", "min", "item", "any", "all", "float", "int", "bool", "long", "half",
                  "double", "tolist", "nonzero", "count_nonzero", "argmax", "argmin", "std", "var", "norm", "prod",
                  "cumsum", "abs", "exp", "log", "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "numpy",
                  "unique", "masked_select", "nansum", "amax", "amin"}
# modules whose functions of the SIZE_ATTRS names (`torch.numel(x)`, `np.shape(x)`) ask their argument's size
_ARRAY_MODULES = {"torch", "numpy", "np"}
# moves of a value to a device: per-rank data stays per-rank data
_DEVICE_MOVES = {"to", "cuda", "cpu"}
# keyword arguments that carry a rank only for placement or display
PLACEMENT_KWARGS = {"device", "device_ids", "output_device", "map_location", "rank", "local_rank", "device_map",
                    "position", "disable", "num_replicas", "process_index", "seed", "leave", "dynamic_ncols",
                    "main_process_only", "is_main_process", "world_size", "dist_rank"}
# wrappers whose length/items follow their first argument only (tqdm(loader, disable=not main) is as long as loader)
FIRST_ARG_ONLY = {"tqdm", "trange", "enumerate", "iter", "list", "tuple", "sorted", "reversed", "len", "int",
                  "float", "bool", "str", "set", "next", "deepcopy", "copy", "islice"}
SPLITTERS = {"array_split", "split", "chunk", "tensor_split", "array_split_list", "np_split", "distribute"}
# calls whose result keeps the kind of a rank-id argument (`range(rank)` runs `rank` times); any other call to a
# function outside the checked files only *derives* a value from it (see `_call`)
KIND_KEEPING = {"range", "arange", "min", "max", "abs", "sum", "round", "divmod", "pow", "ceil", "floor",
                "zip", "map", "filter", "repeat", "product", "chain", "cycle", "count"}
# per-rank data (its size or content varies), as opposed to a rank id
_DATA_KINDS = ("shard", "item", "generation")
# calls that look a part of their argument up (`getattr(batch, "images", None)`): its presence is the data's
_LOOKUPS = {"getattr", "get", "pop", "next", "deepcopy", "copy"}
# a mapping's views: as many items as the mapping has keys
_MAPPING_VIEWS = {"items", "keys", "values"}
# calls that ask a value's structure (its type, attributes, keys), not its contents
_STRUCTURE_CALLS = {"isinstance", "hasattr", "type", "callable", "keys", "is_tensor", "is_floating_point"}
# calls that build the DeepSpeed engine (and its optimizer, loader, scheduler): the same on every rank
_ENGINE_BUILDERS = {"initialize", "init_inference"}
# keyword arguments that choose a loader's sampler
_SAMPLER_KWARGS = {"sampler", "batch_sampler"}
_RANKISH_NAMES = ("rank", "main_process", "process_index", "process_zero", "global_zero", "is_master", "is_main", "should_save",
                  "split_between", "RANK", "generate", "local_process", "_stage", "stage_id",
                  # the batches of the script's own data loaders (`RankTaint.loader_batch`): the words of the
                  # library APIs a loader comes from (`loader_flow`), never the name it is bound to
                  "Loader", "dataloader", "deepspeed_io", "prepare", "training_data")
# builders of a sharded map-style loader whose batches number the same on every rank
_BUILTIN_NAMES = frozenset(dir(builtins))
_TORCH_LOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}


# the key under which `bind` keeps the rank a distributed sampler bound to a name draws by (`RankTaint.sampler_axes`);
# removed with the name's other fields when the name is bound again
_SAMPLER_RANK = ".<sampler rank>"
# the key under which `uniformize` marks an attribute path a collective wrote in place (`dist.all_reduce(rt.tensor)`):
# the path reads as uniform (over the collective's group: the axes it leaves are kept at the path itself) although
# its base object varies; the mark goes when the path or its base is bound again, and survives a join only where
# every path holds it (`written_paths_met`)
WRITTEN = ".<written>"


# HF Trainer hooks that receive this rank's batch, and the position of the parameter that holds it (self at 0):
# transformers' Trainer calls them positionally -- `self.training_step(model, inputs, ...)` then
# `self._prepare_inputs(inputs)`, `self.compute_loss(model, inputs, ...)`, `self.prediction_step(model, inputs,
# prediction_loss_only, ...)` in `evaluation_loop` -- so the position says which one it is, whatever it is called
TRAINER_BATCH_HOOKS = {"training_step": 2, "compute_loss": 2, "prediction_step": 2, "_prepare_inputs": 1}


# every word a taint source is spelled with (rank names, attributes, calls, environment keys, sampled
# generation, accelerate's split): a file without any of them holds no rank source of its own
_TAINT_WORDS = re.compile(alternation(
    {*_RANKISH_NAMES, "split_between_processes", *RANK_ATTR_WORDS, *RANK_CALLS, *RANK_ENV_KEYS, *TRAINER_BATCH_HOOKS}))


def _unit(src: "PythonSource", qual: str) -> tuple[int, str]:
    """What `returns()` of a function reads besides its own body: a method also reads the `self.` attributes
    set in any method of its file, so the methods of a file form one unit."""
    owner = qual.rpartition(".")[0]
    return (id(src), "<methods>") if owner and owner in src.outline.classes else (id(src), qual)


def _enclosing(scope: str) -> list[str]:
    parts = scope.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _seeded_tops(text: str, outline) -> Optional[set[str]]:
    """Names of the module-scope functions and classes whose code spells a taint source's word; None when one
    is spelled outside them (module-level code feeds every function of the file through the module env)."""
    found: set[str] = set()
    tops = sorted(outline.tops, key=lambda t: t[1])
    firsts = [t[1] for t in tops]
    line, seen = 1, 0
    for m in _TAINT_WORDS.finditer(text):
        line += text.count("\n", seen, m.start())
        seen = m.start()
        at = bisect_right(firsts, line) - 1
        if at < 0 or line > tops[at][2]:
            return None
        found.add(tops[at][0])
    return found


def seeded_tops(src: "PythonSource") -> Optional[set[str]]:
    """`_seeded_tops` of a file with an outline: a fact of the file alone, kept on the source for every view (the
    outline workers of a big run compute it and hand it back, `dslint.pipeline.workers.text_facts`)."""
    facts = src.__dict__
    if "_seeded_tops" not in facts:
        facts["_seeded_tops"] = _seeded_tops(src.text, src.outline)
    return facts["_seeded_tops"]


def scope_classes(outline, scope: str) -> list[Optional[str]]:
    """The `cls` a call of this scope may be resolved with: the class of a method, of a method a nested
    function sits in (a walk of the method may visit it), or none."""
    if scope == MODULE_SCOPE:
        return [None]
    return [*(q for q in _enclosing(scope)[1:] if q in outline.classes), None]


def mentions_rank(text: str) -> bool:
    """Cheap pre-filter: can this text contain a rank source at all? (A rank word, or an HF Trainer hook whose
    batch parameter is this rank's data: `ProjectTaint._trainer_batch`.)"""
    return any(word in text for word in _RANKISH_NAMES) or \
        "Trainer" in text and any(hook in text for hook in TRAINER_BATCH_HOOKS)


@dataclass(frozen=True, eq=False)
class Origin:
    """Why a value is rank-varying: the source expression and what it is."""

    kind: str                      # "rank" (a rank id / rank-0 test) | "shard" (this rank's share: its length
                                   # varies) | "item" (xs[rank]) | "generation" (a sampled output)
    node: cst.CSTNode
    source: "PythonSource"
    via: Optional[str] = None      # "is_main()" when it came through a helper
    via_call: Optional[tuple] = None   # (source, call node) of the call that passed it in, located lazily
    # the coordinates of the rank grid the value depends on (dslint/program/process_groups.py): None = any rank may
    # differ; {"pp"} for `is_pipeline_last_stage()`, which every member of a data-parallel group shares
    axes: Optional[frozenset] = None
    member: Optional[frozenset] = None     # membership predicates it is made of (`is_rank_in_embedding_group`)
    elements: Optional[tuple] = None       # a tuple literal's elements, each an Origin or None (`(world, rank)`)
    # a generation's batch as a whole (`out = model.generate(ids)`, its decoded texts): one row per prompt, so
    # its length is the prompts' count; an element (`out[0]`, a loop's item) is one sampled sequence. Of an "item"
    # list: padded to the same length on every rank (`FlowWalk._padded_to`): its length and truth are uniform
    rows: bool = False
    # per-rank data that went through a call outside the checked files (`_, logits = forward_fn(data=shard)`), or
    # what such a call made of a rank's name (`torch.load(f"rank_{rank}.pt")`, `Origin.rendered`): whether such a
    # result is None is that function's control (a pipeline stage, a mode), not the data's size nor the rank's --
    # unless a checked function returns None itself under a rank-dependent test (`Origin.none_by`)
    opaque: bool = False
    # a collated batch as a whole and the fields read from it (the HF Trainer's `inputs`): its keys, its fields'
    # presence (None or not) and their types are the collator's, the same on every rank; only the values vary
    batch: bool = False
    # a mapping whose items vary only at these literal keys (`info["loss"] = loss` beside `info["engine"] =
    # args.engine`, `{"loss": loss, **configs}`): reading another literal key is uniform; None: any item may vary
    keys: Optional[frozenset] = None
    # bound from `None if <uniform test> else <value that is never None>` (`seq_q = None if seq_k is None else
    # seq_k[:, lo:hi]` with per-rank bounds): whether it is None is the test's, the same on every rank; kept only
    # by a name bound to that expression or copied from such a name (`bind`)
    present: bool = False
    # a rank within a process group (`dist.get_rank(tp_group)`): the group as the scope holding the value names
    # it ("" for the world: `dist.get_rank()`), renamed to the parameter it is handed to across a call, None once
    # out of reach; where that group holds one rank (`if dist.get_world_size(tp_group) == 1:`) the rank is 0 on
    # every rank (`FlowWalk._single_rank`)
    group: Optional[str] = None
    # a data loader itself, or an iterator over one (`loader = DataLoader(ds, ...)`, `it = iter(loader)`, a helper
    # returning one): the same object on every rank, whose batches are this rank's samples (`Origin.batch`); only
    # what is drawn from it (`next(it)`, a loop's item, a function handed it) carries per-rank values
    stream: bool = False
    # the value as a sum of products of the values it was computed from (`shard_end = (rank + 1) * size` →
    # rank·size + size), `affine_form`: a range between two such bounds (`range(rank * size, (rank + 1) * size)`)
    # is as long on every rank when their difference holds uniform values only. Kept by the name bound to it
    affine: Optional[frozenset] = None
    # what a method of a class returns under each value of a validated setting of its instance (`get_dataloader`
    # branching on `self.env_type`, `setting_domains`): ("self.env_type", ((value, axes), ...)), axes None for
    # every coordinate, empty for uniform under that value (`ProjectTaint.returns_of_source`). Read where a
    # collective over a group of known axes runs on a path that narrows the setting (`RankTaint.uniformize`);
    # combined with another varying value, value by value (`_joined_tables`)
    by_setting: Optional[tuple] = None
    # an object that differs across ranks while its iteration does not: (origin, expression) of the value whose
    # items it yields, in order (origin None: uniform; expression None: the name's own earlier value) --
    # `progress = range(n)`, then `progress = tqdm(progress)` on rank 0 only (`FlowWalk._join_after`,
    # `library_types.item_preserving_arg`), or `data_iter = tqdm(enumerate(loader)) if rank == 0 else
    # enumerate(loader)` (`library_types.same_items`: the rank test chooses the display, not the data): a loop over
    # it runs as many passes, with the same items, on every rank as one over the expression (`RankTaint.iterated`,
    # `loader_batch`). Kept only by a name bound to the choice itself or copied from such a name (`bind`)
    items: Optional[tuple] = None
    # a list or tuple display (`[state_dict]`, `(world, rank)`): `elements` are its own items, each with its origin,
    # and its length is their count on every rank, whatever they hold -- a loop over it makes as many passes
    # everywhere and binds one of them (`element_of`), `len` of it is uniform (`_counted`); only the display itself
    # is one: a value computed from it (`join`, `[mine] + others`: `undisplayed`) is not
    display: bool = False
    # a string that writes the value among other text (`f"zero_pp_rank_{rank}_model_states.pt"`, `"rank{}".format(
    # rank)`, `"r%d" % rank`): the name of this rank's own thing -- a file, a directory, a key --, whose text
    # varies (a test of it still does) while being a string does not. Whether what a call outside the checked
    # files makes of such a name (`os.path.join`, `glob.glob`, `torch.load`, `open`) is None is that function's
    # affair, not the rank's (`opaque`, `RankTaint._rendered_name`). Kept by the name bound to the rendering itself
    # or copied from such a name (`bind`)
    rendered: bool = False
    # whether it is true (empty or not) is the same on every rank, whatever its text: a string with literal text
    # around the rank's part (`f"{step}/rank_{rank}.pt"`, `"r%d" % rank`) or a path joined onto such a string or
    # onto literal text (`os.path.join(root, name)`) is never empty; `a or b` / `a and b` of such values and
    # uniform ones, a concatenation of such strings, and the join of the branches of a uniform test that bind such
    # values (`if path == "": path = os.path.join(root, f"rank_{rank}.pt")`) are alike too. Read only by a truth
    # test of a name (`if not path:`, `FlowWalk.eval_test`); kept by a name bound to such an expression or copied
    # from such a name (`bind`, `_truth_kept`), dropped by any other operation and by a rank-dependent join
    truth: bool = False
    # of an `opaque` value: the origin whether it is None varies with -- a checked function that returns None
    # itself under a rank-dependent test (`FlowWalk._none_returned`), where its other returns are opaque; None:
    # whether it is None is the outside call's affair alone
    none_by: Optional["Origin"] = None
    # an object of a checked class built with rank-varying arguments (`Tracker(cfg, local_rank)`): its varying
    # fields, each (field, dotted below the object; its Origin) -- what the stores of the class put there
    # (`ProjectTaint.constructed_fields`) -- and `object_class` (source, class) its methods are looked up in. A
    # field not listed holds what every rank stores alike (configuration, a count kept in lockstep, a collective's
    # result); the object as a whole (its identity, None-ness) varies as the origin says. Kept by a name or field
    # bound to the object; an operation, container or other call made of it is a value of its own (`RankTaint.eval`)
    fields: Optional[tuple] = None
    object_class: Optional[tuple] = None

    def text(self, limit: int = 60) -> str:
        return code_of(self.node, limit)

    def describe(self) -> str:
        line = self.source.span(self.node).line
        what = {"item": "a data loader, its batches other samples on each rank" if self.stream else
                "this rank's batch" if self.batch else "this rank's item", "rank": "a rank id",
                "shard": "this rank's share of the data",
                "generation": "a per-rank generation output", "derived": "a value computed from a rank id"}
        if self.via_call is not None:
            src, node = self.via_call
            return (f"`{self.text()}` ({what.get(self.kind, self.kind)} from {self.source.path}:{line}, "
                    f"{self.via} at {src.path}:{src.span(node).line})")
        if self.via:
            return f"`{self.text()}` ({what.get(self.kind, self.kind)} from {self.source.path}:{line}, {self.via})"
        return f"`{self.text()}` ({what.get(self.kind, self.kind)}, line {line})"


Env = dict[str, Origin]


def field_origin(obj: Origin, attr: str) -> Optional[Origin]:
    """`obj.attr` of an object with per-field origins (`Origin.fields`): that field's origin (None: uniform); a
    field holding an object whose own fields vary (`self.state.F`) is that object, with those fields."""
    fields = dict(obj.fields or ())
    if attr in fields:
        return fields[attr]
    below = tuple((k[len(attr) + 1:], o) for k, o in obj.fields or () if k.startswith(attr + "."))
    return replace(below[0][1], fields=below, object_class=None) if below else None


# the value under a `WRITTEN` key: only its presence counts
_WRITTEN_MARK = Origin("written", cst.Name("written"), None)


def mark_written(env: dict, path: str) -> None:
    """`path` was written in place by a collective: an attribute path reads as uniform (`WRITTEN`)."""
    if "." in path:
        env[path + WRITTEN] = _WRITTEN_MARK


def written_paths_met(merged: dict, envs) -> None:
    """A join of several paths' environments (`FlowWalk._merge`): an attribute path's `WRITTEN` mark stays only
    where every path holds it -- a path that did not run the collective leaves the base object's value there."""
    for key in [k for k in merged if k.endswith(WRITTEN)]:
        if not all(key in env for env in envs):
            del merged[key]


def join(a: Optional[Origin], b: Optional[Origin], either: bool = False) -> Optional[Origin]:
    """The origin of a value computed from both: `a`'s report, the union of their axes. `either`: `a or b` of
    two membership predicates (`is_pipeline_first_stage() or is_pipeline_last_stage()`) keeps both names."""
    if a is not None and a.display:
        a = undisplayed(a)      # a value computed from a display is no display (`Origin.display`)
    if b is not None and b.display:
        b = undisplayed(b)
    if a is None:
        return b
    if b is None:
        return a
    if a.present or b.present:
        # computed from both: whether it is None is no longer either one's (`Origin.present`)
        a, b = replace(a, present=False), replace(b, present=False)
    if a.truth != b.truth:
        # one part whose truth may vary: the whole's may too (`Origin.truth`; two such parts: a concatenation of
        # strings whose emptiness is alike, `_truth_kept` says where that is kept)
        a, b = replace(a, truth=False), replace(b, truth=False)
    if a.fields is not None or b.fields is not None:
        # a value computed from an object with per-field origins and another value is neither object
        a, b = replace(a, fields=None, object_class=None), replace(b, fields=None, object_class=None)
    if a.rows and a.kind == "item" or b.rows and b.kind == "item":
        # a padded list (`FlowWalk._padded_to`) combined with another varying value: its length is no longer known
        a, b = replace(a, rows=a.rows and a.kind != "item"), replace(b, rows=b.rows and b.kind != "item")
    table = _joined_tables(a, b)
    if a.by_setting is not None:
        a = replace(a, by_setting=None)     # the table is of `a` alone
    if b.by_setting is not None:
        b = replace(b, by_setting=None)
    if a.keys is not None or b.keys is not None:
        # two mappings varying at some keys vary at the keys of both; with any other varying value, anywhere
        a = replace(a, keys=a.keys | b.keys if a.keys is not None and b.keys is not None else None)
    if a.axes is None:
        return replace(a, by_setting=table) if table is not None else a
    if b.axes is None:
        return replace(b, by_setting=table) if table is not None else b
    member = a.member | b.member if either and a.member and b.member else None
    return replace(a, axes=a.axes | b.axes, member=member, by_setting=table)


def _joined_tables(a: Origin, b: Origin) -> Optional[tuple]:
    """The setting table (`Origin.by_setting`) of a value computed from `a` and `b`: under each value of the
    setting, the union of what each varies by there -- a table's entry under that value, else the origin's own
    axes (a batch moved to this rank's device, `{k: batch[k].to(dev) for k in batch}`, varies as the batch does
    under each backend). None when neither has a table, when both have tables of different settings or values,
    or when one varies by every coordinate (no narrowing can make the result uniform over a group)."""
    if a.by_setting is None and b.by_setting is None:
        return None
    if a.by_setting is not None and b.by_setting is not None:
        if a.by_setting == b.by_setting:
            return a.by_setting
        if a.by_setting[0] != b.by_setting[0] or {v for v, _ in a.by_setting[1]} != {v for v, _ in b.by_setting[1]}:
            return None
        other = dict(b.by_setting[1])
        subject, rows = a.by_setting
        return subject, tuple((v, None if x is None or other[v] is None else x | other[v]) for v, x in rows)
    with_table, plain = (a, b) if a.by_setting is not None else (b, a)
    if plain.axes is None:
        return None
    subject, rows = with_table.by_setting
    return subject, tuple((v, None if x is None else x | plain.axes) for v, x in rows)


def group_named(call: cst.Call) -> Optional[str]:
    """The process group a `get_rank(...)`/`get_world_size(...)` call asks about, as code: "" for the world (no
    argument, `None`), None when it is not a plain name or attribute (`groups["tp"]`, a call)."""
    arg = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "group"), None)
    if arg is None or isinstance(arg, cst.Name) and arg.value == "None":
        return ""
    return dotted_name(arg)


def world_size_group(e: Optional[cst.BaseExpression]) -> Optional[str]:
    """The group whose size this expression is: `dist.get_world_size(g)`, `dist.get_world_size(g) if g is not None
    else 1` (a missing group: one process); None otherwise."""
    if isinstance(e, cst.IfExp):
        for this, other in ((e.body, e.orelse), (e.orelse, e.body)):
            if literal_value(other) == 1:
                return world_size_group(this)
        return None
    if isinstance(e, cst.Call) and isinstance(e.func, (cst.Name, cst.Attribute)) and \
            _last(None, e.func) == "get_world_size":
        return group_named(e)
    return None


def partial(origin: Optional[Origin]) -> bool:
    """Does the origin vary over some coordinates only (another operand may widen it), or so under some value of
    its setting (`Origin.by_setting`)?"""
    return origin is not None and (origin.axes is not None or origin.by_setting is not None
                                   and any(axes is not None for _, axes in origin.by_setting[1]))


# sizes of a value: the same on every rank when the value is this rank's *item* (its content varies, its shape is
# the batch's), whatever its content; a shard's or a generation's sizes vary
SIZE_ATTRS = {"shape", "size", "numel", "dim", "ndim", "ndimension", "nelement"}


# what a tensor IS rather than what it holds: its dtype, number of dimensions, whether it requires a gradient,
# its device's type (not its index: `cuda:0` vs `cuda:1`). Per-rank data -- a batch, a shard, a sampled output, a
# value an outside function computed from them or from a rank id -- differs in its values and sizes, never in
# these; only a value that is itself chosen by a rank test (`x if rank == 0 else None`, kind "rank") may
_TYPE_ATTRS = TENSOR_PLACEMENT_ATTRS | {"ndim"}
_TYPE_METHODS = TENSOR_PLACEMENT_METHODS | {"dim", "ndimension"}


def _shape_of(e: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` of `x.shape` / `x.size()` (the whole size, no dimension asked): its length is x's number of
    dimensions, what x IS rather than what it holds (`_TYPE_ATTRS`)."""
    if isinstance(e, cst.Attribute) and e.attr.value == "shape":
        return e.value
    if isinstance(e, cst.Call) and not e.args and isinstance(e.func, cst.Attribute) and e.func.attr.value == "size":
        return e.func.value
    return None


def _typed(origin: Optional[Origin]) -> Optional[Origin]:
    return None if origin is not None and origin.kind != "rank" else origin


def _sized(origin: Optional[Origin]) -> Optional[Origin]:
    return None if origin is not None and origin.kind == "item" else origin


def _counted(origin: Optional[Origin]) -> Optional[Origin]:
    """`len(x)` / `x.size(0)`: the number of rows. A sampled generation returns one row per prompt (the count
    is the prompts', uniform unless they are sharded: then the shard's own origin says so); its rows' lengths
    vary."""
    if origin is not None and origin.kind in ("generation", "item") and origin.rows:
        return None             # (an "item" list with `rows`: padded to a length the same on every rank)
    if is_display(origin):
        return None         # `len([a, b])`: its elements' count
    return _sized(origin)


_MAX_NESTING = 2


def _nesting(origin: Optional[Origin]) -> int:
    if origin is None or origin.elements is None:
        return 0
    return 1 + max((_nesting(e) for e in origin.elements), default=0)


def _shallow(origin: Optional[Origin]) -> Optional[Origin]:
    """An element of a display as the display keeps it: without elements of its own past `_MAX_NESTING` levels."""
    if origin is not None and origin.elements is not None and _nesting(origin) > _MAX_NESTING:
        return replace(origin, elements=None, display=False)
    return origin


def is_display(origin: Optional[Origin]) -> bool:
    """A list or tuple display with its elements (`Origin.display`): as many items on every rank."""
    return origin is not None and origin.display and origin.elements is not None


def undisplayed(origin: Optional[Origin]) -> Optional[Origin]:
    """A value computed from a display as from its elements (`Origin.display` off): its length no longer theirs."""
    return replace(origin, display=False) if origin is not None and origin.display else origin


def element_of(origin: Optional[Origin]) -> Optional[Origin]:
    """One element of a value (`xs[i]`, a loop's item): one sampled sequence of a generation's batch; one of a
    display's elements (`Origin.display`), whichever it is."""
    if is_display(origin):
        out = None
        for part in origin.elements:
            out = join(out, part)
        return out
    if origin is not None and origin.present:
        origin = replace(origin, present=False)     # the whole's None-ness says nothing of an element's
    if origin is not None and origin.truth:
        origin = replace(origin, truth=False)       # nor its truth an element's
    if origin is not None and origin.rows:
        return replace(origin, rows=False)
    if origin is not None and origin.stream:
        return replace(origin, stream=False)    # a batch of a loader (`for batch in loader`)
    return origin


def _boolean_mask(e: cst.BaseExpression) -> bool:
    """An index that selects by truth: `mask.bool()`, `x > 0`, `~pad`, `a & b` of such."""
    if isinstance(e, cst.Call):
        return _last(None, e.func) in ("bool", "logical_not", "logical_and", "logical_or", "isfinite", "isnan")
    if isinstance(e, cst.Comparison):
        return True
    if isinstance(e, cst.UnaryOperation):
        return isinstance(e.operator, cst.BitInvert) and _boolean_mask(e.expression) or \
            isinstance(e.operator, cst.BitInvert) and isinstance(e.expression, (cst.Name, cst.Attribute))
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.BitAnd, cst.BitOr)):
        return _boolean_mask(e.left) or _boolean_mask(e.right)
    return False


def filters(e: cst.BaseExpression) -> bool:
    """Is `e` a comprehension that keeps only the items that pass an `if`?"""
    if not isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
        return False
    comp = e.for_in
    while comp is not None:
        if comp.ifs:
            return True
        comp = comp.inner_for_in
    return False


_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")


def _template_text(e: Optional[cst.BaseExpression]) -> Optional[str]:
    """The literal text of a string template without its replacement fields: an f-string's text parts, a string
    literal less its `{...}` and `%...` fields (`"zero_pp_rank_{}"` → "zero_pp_rank_"); None when `e` is no
    string literal."""
    if isinstance(e, cst.FormattedString):
        return "".join(p.value for p in e.parts if isinstance(p, cst.FormattedStringText))
    if isinstance(e, (cst.SimpleString, cst.ConcatenatedString)):
        value = e.evaluated_value
        if not isinstance(value, str):
            return None
        return _PERCENT_FIELD.sub("", _FORMAT_FIELD.sub("", value))
    return None


def _rendered(origin: Optional[Origin], text: Optional[str]) -> Optional[Origin]:
    """The origin of a string that writes a value among other text (`text` non-empty): `Origin.rendered`. A
    template of the value alone (`f"{rank}"`, `"{}".format(rank)`) is the value itself, in other clothes."""
    return replace(origin, rendered=True, truth=True) if origin is not None and text else origin


def _truth_kept(e: Optional[cst.BaseExpression]) -> bool:
    """Does binding `e` keep its value's `Origin.truth`? A name, a rendering, a concatenation, `a or b` / `a and
    b`, `os.path.join(...)` (whose eval set it); any other expression is a value of its own."""
    if isinstance(e, (cst.Name, cst.FormattedString, cst.BooleanOperation)):
        return True
    if isinstance(e, cst.BinaryOperation):
        return isinstance(e.operator, (cst.Add, cst.Modulo))
    return isinstance(e, cst.Call) and (_renders(e) or _path_join(e))


def _path_join(e: cst.Call) -> bool:
    """`os.path.join(...)` spelled through the module (`os.path.join`, `osp.join` of `import os.path as osp`,
    `path.join` of `from os import path`): by the call's spelling, resolved in `RankTaint._call_truth`."""
    return isinstance(e.func, cst.Attribute) and e.func.attr.value == "join"


_PATH_JOINS = frozenset({"os.path.join", "posixpath.join", "ntpath.join"})


def _nonempty_literal(e: cst.BaseExpression) -> bool:
    """A string literal with some text (`"ckpt"`, an f-string with literal text)."""
    if isinstance(e, (cst.SimpleString, cst.ConcatenatedString)):
        value = e.evaluated_value
        return isinstance(value, (str, bytes)) and len(value) > 0
    return isinstance(e, cst.FormattedString) and bool(_template_text(e))


def _renders(e: Optional[cst.BaseExpression]) -> bool:
    """Is `e` a string rendering: an f-string, `template % v`, `template.format(...)`, a concatenation?"""
    if isinstance(e, cst.FormattedString):
        return True
    if isinstance(e, cst.BinaryOperation):
        return isinstance(e.operator, (cst.Modulo, cst.Add))
    return isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "format" and \
        _template_text(e.func.value) is not None


def _none_or_value(e: cst.IfExp) -> bool:
    """`None if test else v` / `v if test else None` where `v` is never None: a slice (`x[:, lo:hi]`), a literal
    container or string, an f-string, arithmetic."""
    sides = (e.body, e.orelse)
    nones = [isinstance(side, cst.Name) and side.value == "None" for side in sides]
    if nones.count(True) != 1:
        return False
    value = sides[nones.index(False)]
    if isinstance(value, cst.Subscript):
        return any(isinstance(el.slice, cst.Slice) for el in value.slice)
    return isinstance(value, (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp,
                              cst.FormattedString, cst.SimpleString, cst.ConcatenatedString, cst.Integer,
                              cst.Float, cst.BinaryOperation))


def _env_read(e: cst.BaseExpression) -> bool:
    """`os.getenv(K)`, `os.environ.get(K)`, `os.environ[K]`: a string whose presence is the launcher's choice."""
    if isinstance(e, cst.Call):
        last = _last(None, e.func)
        return last == "getenv" or last == "get" and "environ" in (dotted_name(e.func) or "")
    return isinstance(e, cst.Subscript) and (dotted_name(e.value) or "").endswith("environ")


def _scatter_item(origin: Optional[Origin]) -> bool:
    """Is `origin` this rank's item of a `scatter_object_list` (`FlowWalk._scattered`)?"""
    return origin is not None and origin.kind == "item" and isinstance(origin.node, cst.Call) and \
        (dotted_name(origin.node.func) or "").rsplit(".", 1)[-1] == "scatter_object_list"


def _last(callee: Optional[str], func: cst.BaseExpression) -> Optional[str]:
    if callee:
        return callee.rsplit(".", 1)[-1]
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


TRIP_COUNT_KINDS = ("rank", "shard")
# FIRST_ARG_ONLY calls whose result is not as long as a display handed to them (`set` folds equal items)
_NOT_LENGTH_KEEPING = {"set", "int", "float", "bool", "str", "next", "islice"}
# container methods that put values in (list, deque, set, dict), and the positional argument that is the value put
# in (-1: every argument of `dict.update`, mappings and keywords)
_PUTS = {"append": 0, "appendleft": 0, "add": 0, "insert": 1, "extend": 0, "extendleft": 0, "setdefault": 1,
         "update": -1}     # iterating over these runs a rank-dependent number of times
# "derived": the result of a call outside the checked files that was passed a rank id (`make_dataset(local_rank)`,
# `build_loader(args)`): rank-dependent as a test, but nothing says its length follows the rank (most such
# helpers use the rank for caching, logging or device placement), so it does not make a loop's trip count vary


class ProjectLevel(Protocol):
    """What the expression level asks of the project level (`dslint.program.rank.function_summaries.ProjectTaint`, which
    builds a `RankTaint` per source): declared here, so that this module does not import the one above it."""
    project: "ProjectView"

    def self_attrs(self, src: "PythonSource", cls: Optional[str] = None) -> "Env": ...

    def plain_field_of(self, src: "PythonSource", receiver: cst.BaseExpression, attr: str, cls: Optional[str]
                       ) -> tuple[bool, Optional["Origin"]]: ...

    def rank_field(self, src: "PythonSource", e: cst.Attribute, cls: Optional[str]) -> Optional["Origin"]: ...

    def rank_field_stores(self, src: "PythonSource", e: cst.Attribute, cls: Optional[str]) -> Optional[list]: ...

    def stored_fields(self, src: "PythonSource", cls: str) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]: ...

    def class_of(self, src: "PythonSource", callee: Optional[str]) -> Optional[tuple["PythonSource", str]]: ...

    def constructed_fields(self, call: cst.Call, found: tuple["PythonSource", str],
                           origins: list[Optional["Origin"]]) -> Optional[dict[str, "Origin"]]: ...

    def method_of(self, src: "PythonSource", cls: str, method: str) -> Optional[tuple["PythonSource", str]]: ...

    def returns_with_fields(self, call: cst.Call, method: tuple["PythonSource", str], fields: dict[str, "Origin"],
                            origins: list[Optional["Origin"]]) -> Optional["Origin"]: ...

    def call_source(self, src: "PythonSource", callee: Optional[str], cls: Optional[str], fields: bool = True,
                    scope: Optional[str] = None) -> Optional[tuple["PythonSource", str]]: ...

    def returns_of_source(self, source: tuple["PythonSource", str]) -> Optional["Origin"]: ...

    def calls_payload_collective(self, source: tuple["PythonSource", str]) -> bool: ...

    def collective_wrapper(self, src: "PythonSource", call: cst.Call, cls: Optional[str]) -> Optional[tuple]: ...

    def function_info(self, source: Optional[tuple["PythonSource", str]]) -> Optional[tuple["PythonSource", Any]]: ...

    def returns_for_args(self, call: cst.Call, target: tuple["PythonSource", Any],
                         origins: list[Optional["Origin"]]) -> Optional["Origin"]: ...

    def returned_elements(self, src: "PythonSource", call: cst.Call, env: "Env", cls: Optional[str]
                          ) -> Optional[list[Optional["Origin"]]]: ...

    def uniform_none_field(self, src: "PythonSource", cls: str, attr: str) -> bool: ...

    def uniform_none_rank_field(self, src: "PythonSource", e: cst.Attribute) -> bool: ...

    def uniform_none_local(self, src: "PythonSource", scope: str, name: str, test: cst.CSTNode) -> bool: ...

    def none_follows(self, src: "PythonSource", info: Any) -> Optional[frozenset[str]]: ...

    def methods_named(self, method: str) -> list[tuple["PythonSource", str]]: ...

    def taint(self, src: "PythonSource") -> "RankTaint": ...

    def globals_for(self, src: "PythonSource", info: Any) -> "Env": ...

    def env_before(self, src: "PythonSource", info: Any, node: cst.CSTNode) -> Optional["Env"]: ...


class RankTaint:
    """Evaluates expressions of one source to an `Origin` (rank-varying) or None (same on every rank)."""

    def __init__(self, analysis: "ProjectLevel", src: "PythonSource") -> None:
        self.analysis = analysis
        self.src = src
        self.facts = src.facts

    # --- expressions ---------------------------------------------------------------------------------
    def eval(self, e: Optional[cst.BaseExpression], env: Env, cls: Optional[str] = None) -> Optional[Origin]:
        out = self._eval(e, env, cls)
        if out is not None and out.none_by is not None and not isinstance(e, cst.Name) and not (
                isinstance(e, cst.Call) and self.analysis.call_source(
                    self.src, self.facts.resolve_expr(e.func), cls, fields=False) is not None):
            # `Origin.none_by` is whether that very value is None: a name holding it, or the checked function
            # returning it; a container, a field, an operation or another call made of it is a value of its own
            out = replace(out, none_by=None)
        if out is not None and out.fields is not None and not isinstance(e, (cst.Name, cst.Attribute, cst.Call,
                                                                              cst.Subscript)):
            out = replace(out, fields=None, object_class=None)  # an operation on the object: a value of its own
        return out

    def _eval(self, e: Optional[cst.BaseExpression], env: Env, cls: Optional[str] = None) -> Optional[Origin]:
        if e is None:
            return None
        if isinstance(e, cst.Name):
            return env.get(e.value)
        if isinstance(e, cst.Attribute):
            return self._attribute(e, env, cls)
        if isinstance(e, cst.Subscript):
            return self._subscript(e, env, cls)
        if isinstance(e, cst.Call):
            return self._call_truth(e, self._call(e, env, cls), env, cls)
        if isinstance(e, cst.Comparison):
            return self._comparison(e, env, cls)
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Modulo) and \
                _template_text(e.left) is not None:
            # `"zero_pp_rank_%d" % rank`: the value written into the template's text
            return _rendered(undisplayed(self.eval(e.right, env, cls)), _template_text(e.left))
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add) and \
                (size := restored_sizes(self.src).get(id(e))) is not None:
            # `saved.numel() + record[PADDINGS][i]` of a record whose saver cut that padding off the item: the size
            # of the item before the cut, not the padding's per-rank value (`saved_records`)
            return self.eval(size, env, cls)
        if isinstance(e, (cst.BinaryOperation, cst.BooleanOperation)):
            left = undisplayed(self.eval(e.left, env, cls))    # `[mine] + others`: as long as its parts
            if left is not None and left.kind == "rank" and isinstance(e, cst.BooleanOperation) and \
                    isinstance(e.operator, cst.And) and single_rank_conjunction(self, e, env, cls):
                return None     # `is_first_stage() and is_last_stage()`: the group holds one rank, on every rank
            if left is not None and not partial(left) and left.keys is None:
                if left.truth and not ((isinstance(e, cst.BooleanOperation) or isinstance(e.operator, cst.Add)) and
                                       _truth_kept(e.left) and self._truth_alike_part(e.right, env, cls)):
                    # `a + b` / `a or b` / `a and b`: empty (false) alike when both parts are
                    return replace(left, truth=False)
                return left
            if left is None and isinstance(e, cst.BooleanOperation) and self._decides_alone(e):
                return None
            out = join(left, self.eval(e.right, env, cls), isinstance(e, cst.BooleanOperation)
                       and isinstance(e.operator, cst.Or))
            if out is not None and out.truth and (isinstance(e, cst.BinaryOperation) and
                                                  not isinstance(e.operator, cst.Add) or not (
                    self._truth_alike_part(e.left, env, cls) and self._truth_alike_part(e.right, env, cls))):
                out = replace(out, truth=False)
            return out
        if isinstance(e, cst.UnaryOperation):
            hit = self.eval(e.expression, env, cls)
            if hit is not None and hit.batch and isinstance(e.operator, cst.Not) and \
                    isinstance(e.expression, (cst.Name, cst.Attribute, cst.Subscript)):
                return None     # `not batch["images"]`: a field's presence or emptiness, the collator's
            if hit is not None and hit.truth and isinstance(e.operator, cst.Not) and isinstance(e.expression, cst.Name):
                return None     # `not path` of a path never empty (`Origin.truth`): false on every rank
            if hit is not None and hit.truth:
                hit = replace(hit, truth=False)
            return replace(hit, member=None) if hit is not None and hit.member else hit
        if isinstance(e, cst.IfExp):
            hit = self._any([e.test, e.body, e.orelse], env, cls)
            source = self._items_choice(e)
            if hit is not None and source is not None:
                # `tqdm(xs) if is_main else xs`: another object per rank, the items of `xs` on every rank
                return replace(hit, items=(self.eval(source, env, cls), source))
            if hit is not None and self.eval(e.test, env, cls) is None and (
                    _none_or_value(e) or self._none_as_args(e, env, cls)):
                return replace(hit, present=True)
            return hit
        if isinstance(e, cst.FormattedString):
            hit = self._any([p.expression for p in e.parts if isinstance(p, cst.FormattedStringExpression)], env, cls)
            return _rendered(hit, _template_text(e))
        if isinstance(e, (cst.Tuple, cst.List)) and e.elements and not any(isinstance(el, cst.StarredElement)
                                                                          for el in e.elements):
            # `(train_loader, block_loader)` handed on whole: the display's items keep their own origins, so
            # `loaders[0]` is the loader again (not a batch drawn from it) wherever the tuple goes; and it holds as
            # many items as it has elements on every rank (`state_dicts = [state_dict]` of a rank-chosen mapping:
            # a loop over it makes one pass everywhere): `Origin.display`
            # (an element nested past `_MAX_NESTING` displays keeps its origin, not its own elements: a loop that
            # wraps a value in a display on every pass, `acc = [acc, x]`, would nest without end)
            parts = tuple(_shallow(self.eval(el.value, env, cls)) for el in e.elements)
            out = None
            for part in parts:
                out = join(out, part)
            return replace(out, elements=parts, display=True) if out is not None else None
        if isinstance(e, (cst.List, cst.Tuple, cst.Set)):
            return self._any([el.value for el in e.elements], env, cls)
        if isinstance(e, cst.Dict):
            keyed = self._keyed_dict(e, env, cls)
            if keyed is not False:
                return keyed
            return self._any([x for el in e.elements for x in
                              ((el.key, el.value) if isinstance(el, cst.DictElement) else (el.value,))], env, cls)
        if isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            # the comprehension's targets are its own names (they shadow the function's `k, v`); what they hold
            # comes from the iterables, which are part of the value
            first = e.for_in.iter
            parts: list = [e.key, e.value] if isinstance(e, cst.DictComp) else [e.elt]
            over = self.eval(first, env, cls)
            if over is not None and over.stream and isinstance(e, (cst.GeneratorExp, cst.ListComp)) and \
                    e.for_in.inner_for_in is None and not e.for_in.ifs:
                # one item per batch of a loader (`((exp, None) for exp in pbar)`): another stream as long as the
                # loader, the same object on every rank, whose items are what the expression makes of a batch
                inner = dict(env)
                self.bind(e.for_in.target, None, element_of(over), inner, cls)
                hit = self._any(parts, inner, cls)
                return replace(hit, stream=True) if hit is not None else over
            if over is not None and over.batch and e.for_in.inner_for_in is None and (
                    not e.for_in.ifs or self._key_filter(e, parts, env, cls)):
                # one item per row of a collated batch (`[m.sum() for m in batch["masks"]]`): as many on every
                # rank -- the result keeps the batch's structure (its truth, its None-ness) -- and each item is
                # what its expression makes of the row (`x is None` of a row: the collator's); or one per field
                # kept by a test of its key alone (`_key_filter`)
                inner = dict(env)
                if e.for_in.ifs:
                    # kept by a test of its key alone: the target is a key of the batch, the collator's, the same on
                    # every rank (`batch[k]` then reads the batch's field as the batch holds it, table and all); of
                    # `for k, v in batch.items()`, `v` is the field itself
                    key, value = _mapping_view_targets(e.for_in)
                    for name in _target_names(e.for_in.target):
                        inner.pop(name.value, None)
                    if value is not None:
                        self.bind(value, None, element_of(over), inner, cls)
                else:
                    self.bind(e.for_in.target, None, element_of(over), inner, cls)
                hit = self._any(parts, inner, cls)
                if hit is not None and hit.kind == "shard":
                    # each row filtered on its own (`[[t for t, m in zip(ids, mask) if m] for ids, mask in
                    # zip(batch["ids"], batch["mask"])]`): the rows' lengths differ, their count is the batch's
                    hit = replace(hit, kind="item")
                return replace(hit, batch=True) if hit is not None else None
            comp: Optional[cst.CompFor] = e.for_in
            own: set[str] = set()
            while comp is not None:
                if comp.iter is not first:
                    parts.append(comp.iter)
                parts.extend(i.test for i in comp.ifs)
                own.update(n.value for n in _target_names(comp.target))
                comp = comp.inner_for_in
            inner = {k: v for k, v in env.items() if k.split(".", 1)[0].split("[", 1)[0] not in own} if own else env
            hit = join(self.eval(first, env, cls), self._any(parts, inner, cls)) if parts else \
                self.eval(first, env, cls)
            if hit is not None and hit.kind in _DATA_KINDS and filters(e):
                # `[s for s in inputs["scores"] if s > 0]`: as many items as pass the filter on this rank
                return replace(hit, kind="shard", batch=False, rows=False, elements=None)
            return hit
        if isinstance(e, (cst.Await, cst.StarredElement)):
            return self.eval(getattr(e, "expression", None) or getattr(e, "value", None), env, cls)
        if isinstance(e, cst.NamedExpr):
            return self.eval(e.value, env, cls)
        return None

    def _key_filter(self, e, parts: list, env: Env, cls: Optional[str]) -> bool:
        """`{k: batch[k].cuda() for k in batch if k not in ("uid", "meta")}` over a collated batch: the target is
        a key of the mapping (the comprehension reads `batch[k]`), and every `if` is uniform with the key taken as
        uniform -- a batch's keys are the collator's, the same on every rank -- so the same fields pass on every
        rank. A test that reads a field's content (`batch[k].sum() > 0`) still varies."""
        keyed_target, value = _mapping_view_targets(e.for_in)
        if keyed_target is not None:
            # `for k, v in batch.items() if k not in ignore_keys` / `for k in batch.keys() if ...`: the target is a
            # key of the mapping by the view's meaning
            key = keyed_target.value
            inner = {k: v for k, v in env.items() if k.split(".", 1)[0].split("[", 1)[0] != key}
            if value is not None:
                # the value target is the field itself: a test reading it (`v.sum() > 0`) reads its content
                self.bind(value, None, element_of(self.eval(e.for_in.iter, env, cls)), inner, cls)
            return all(self.eval(i.test, inner, cls) is None for i in e.for_in.ifs)
        target, mapping = e.for_in.target, dotted_name(e.for_in.iter)
        if not isinstance(target, cst.Name) or mapping is None:
            return False
        key = target.value

        def keyed(node) -> bool:
            return isinstance(node, cst.Subscript) and dotted_name(node.value) == mapping and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.Name) \
                and node.slice[0].slice.value.value == key
        todo = [part for part in parts if part is not None]
        found = False
        while todo and not found:
            node = todo.pop()
            found = keyed(node)
            todo.extend(sub_expressions(node))
        if not found:
            return False
        inner = {k: v for k, v in env.items() if k.split(".", 1)[0].split("[", 1)[0] != key}
        return all(self.eval(i.test, inner, cls) is None for i in e.for_in.ifs)

    def _items_choice(self, e: cst.IfExp) -> Optional[cst.BaseExpression]:
        """The iterable both sides of `e` walk, each side that iterable or an item-preserving wrapper of it
        (`tqdm(xs) if is_main else xs`, `tqdm(enumerate(loader)) if is_main else enumerate(loader)`:
        `library_types.same_items`), or that iterable's passes counted off on the other side (`iter(loader) if
        is_leader else range(len(loader))`, `library_types.same_count`: as many passes, the dummy side's items
        taken for the iterable's -- a superset of what they may be); None otherwise."""
        return same_items(self.src, [e.body, e.orelse]) or same_count(self.src, [e.body, e.orelse])

    def iterated(self, e: Optional[cst.BaseExpression], env: Env, cls: Optional[str] = None,
                 evaluate=None) -> Optional[Origin]:
        """The origin of what a `for` over `e` walks -- its trip count and its items: `e`'s own, except for an
        object whose iteration yields the items of another value (`Origin.items`: `progress` after `progress =
        tqdm(progress)` on rank 0 only), read through item-preserving wrappers and `enumerate` (`enumerate(progress)`
        counts the same passes): the iteration of that value. `evaluate(e, env)`: the evaluator (a walk's own,
        `FlowWalk.eval_iter`; `eval` by default)."""
        if e is None:
            return None
        if evaluate is None:
            evaluate = lambda x, at: self.eval(x, at, cls)     # noqa: E731
        inner = e
        for _ in range(8):
            nxt = item_preserving_arg(self.src, inner)
            if nxt is None and isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and \
                    inner.func.value == "enumerate" and self.facts.resolve_expr(inner.func) == "enumerate" and \
                    inner.args and inner.args[0].keyword is None and not inner.args[0].star:
                nxt = inner.args[0].value
            if nxt is None:
                break
            inner = nxt
        name = dotted_name(inner) if isinstance(inner, (cst.Name, cst.Attribute)) else None
        held = env.get(name) if name is not None else self.eval(inner, env, cls) if isinstance(inner, cst.IfExp) \
            else None
        if held is None or held.items is None:
            return evaluate(e, env)
        if name is None:
            # `tqdm(xs) if is_main else xs` itself, or under `enumerate`/wrappers: the passes of the iterable chosen
            # alike (a varying iterable is left to the whole expression's own origin)
            return held.items[0] if inner is e or held.items[0] is None else evaluate(e, env)
        walked = dict(env)
        if held.items[0] is None:
            walked.pop(name, None)
        else:
            walked[name] = held.items[0]
        return evaluate(e, walked)

    def _none_as_args(self, e: cst.IfExp, env: Env, cls: Optional[str]) -> bool:
        """`None if <test> else f(x)` / `f(x) if <test> else None` where `f` is a checked function whose result is
        None exactly when the arguments of some parameters are (`ProjectTaint.none_follows`: `_prepare_input(data)`
        slices or moves `data`) and those arguments are None alike on every rank: uniform, a field of a collated
        batch (the collator's), or themselves such a choice."""
        sides = (e.body, e.orelse)
        nones = [isinstance(side, cst.Name) and side.value == "None" for side in sides]
        if nones.count(True) != 1:
            return False
        value = sides[nones.index(False)]
        if not isinstance(value, cst.Call):
            return False
        found = self.analysis.function_info(self.analysis.call_source(
            self.src, self.facts.resolve_expr(value.func), cls, fields=False))
        if found is None:
            return False
        other, info = found
        followed = self.analysis.none_follows(other, info)
        if followed is None:
            return False
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) and \
            isinstance(value.func, cst.Attribute) else info.params
        for i, arg in enumerate(value.args):
            if arg.star:
                return False
            name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
            if name not in followed:
                continue
            hit = self.eval(arg.value, env, cls)
            if hit is not None and not hit.batch and not hit.present:
                return False
        return True

    def _plain_method(self, func: cst.Attribute) -> bool:
        """`blueprint_generator.generate(config, args)` where every class the name is built from in this file
        (`Outline.instances`) is a checked class defining the method whose bases are all checked classes too: a
        plain Python object's own method, which returns what its body computes -- not a model's sampled
        generation (a model class derives from a library base: `nn.Module`, `PreTrainedModel`)."""
        if not isinstance(func.value, cst.Name) or self.src.outline is None:
            return False
        name = func.value.value
        ctors = [c for key, found in self.src.outline.instances.items() if key.rsplit(":", 1)[-1] == name
                 for c in found]
        if not ctors:
            return False
        project = self.analysis.project
        for ctor in ctors:
            found = project.class_for_callee(self.src, ctor)
            if found is None or found[0].outline is None \
                    or self.analysis._method_of(found[0], found[1], func.attr.value) is None:
                return False
            for where, owner in self.analysis._class_family(found[0], found[1]):
                outline = where.outline.classes.get(owner) if where.outline is not None else None
                if outline is None:
                    return False
                for base in outline.bases:
                    if base and base not in ("object", "ABC", "abc.ABC") and project.class_for_callee(where, base) is None:
                        return False
        return True

    def _decides_alone(self, e: cst.BooleanOperation) -> bool:
        """`args.eval_iters or len(loader)` whose left side, the same on every rank, is a run setting whose value
        the run shows (`hyperparams.evaluate`: a launcher line's value for the script, else the argparse or
        dataclass default) and decides the operation by itself -- true for `or`, false for `and`: the right side
        is never evaluated in this run, so its rank-varying value is no part of the result."""
        if not isinstance(e.left, cst.Attribute):
            return False        # a bare name may be a local that shadows a module constant: no scope to tell here
        found = evaluate(self.analysis.project, self.src, e.left)
        if not found.known:
            return False
        try:
            truth = bool(found.value)
        except Exception:
            return False
        return truth if isinstance(e.operator, cst.Or) else not truth

    def _any(self, exprs: list, env: Env, cls: Optional[str]) -> Optional[Origin]:
        out = None
        for x in exprs:
            out = join(out, self.eval(x, env, cls))
            if out is not None and not partial(out):
                return out
        return out

    def _keyed_dict(self, e: cst.Dict, env: Env, cls: Optional[str]):
        """A dict display whose every key is a literal string (`**other` spreads of uniform or keyed mappings
        allowed): the mapping varying at the keys of its varying values only (`Origin.keys`), None when none
        varies; False when some key is not such a literal (then the display is judged as a whole)."""
        out: Optional[Origin] = None
        keys: set = set()
        for el in e.elements:
            if isinstance(el, cst.DictElement):
                key = literal_value(el.key)
                if not isinstance(key, str):
                    return False
                hit = self.eval(el.value, env, cls)
                if hit is not None:
                    keys.add(key)
                    out = out if out is not None else hit
                else:
                    keys.discard(key)      # a later literal entry replaces an earlier one
            else:
                hit = self.eval(el.value, env, cls)
                if hit is not None:
                    if hit.keys is None:
                        return False
                    keys |= hit.keys
                    out = out if out is not None else hit
        if out is None:
            return None
        return replace(out, keys=frozenset(keys), batch=True, elements=None, rows=False)

    def _field_scatter_item(self, callee: Optional[str], cls: Optional[str]) -> Optional[Origin]:
        """`data, info = self.collector.collect(...)` where the method of the `self.` field's object scatters
        itself (`scatter_object_list`) and hands back the received item: this rank's item, whose None-ness is
        alike on every rank or not (`Origin.present`), whatever the arguments. Such methods are otherwise not
        followed for their returns (`_call_value`); only the scattered item is kept (a tuple's other elements are
        left uniform), so their metrics dicts stay out."""
        if not callee or not callee.startswith("self.") or callee.count(".") != 2 or cls is None:
            return None
        source = self.analysis.call_source(self.src, callee, cls)
        if source is None or not self.analysis.calls_payload_collective(source):
            return None
        hit = self.analysis.returns_of_source(source)
        if hit is None:
            return None
        if _scatter_item(hit):
            return hit
        if hit.elements is not None and any(_scatter_item(o) for o in hit.elements):
            return replace(hit, elements=tuple(o if _scatter_item(o) else None for o in hit.elements))
        return None

    def _agreed_by_method(self, e: cst.Call, env: Env, cls: Optional[str]) -> bool:
        """`self.strategy.all_gather(ready)` on an object whose class dslint cannot tell (a field stored from a
        parameter): the result is the same on every rank when every method of that name among the checked
        classes -- what the call runs, if the object is one of theirs -- agrees it across the ranks: it runs a
        collective that writes its result (`dist.all_gather(out, x)`, `all_reduce`) and returns, for these
        arguments, what the collective made uniform (`returns_for_args`: the varying arguments bound). One method
        that may return a varying value, or none among the checked files: not decided here."""
        method = e.func.attr.value
        candidates = self.analysis.methods_named(method)
        if not candidates:
            return False
        origins = [self.eval(a.value, env, cls) for a in e.args]
        if not any(o is not None for o in origins):
            return False
        memo = self.analysis.__dict__.setdefault("_writes_collective_result", {})
        for candidate in candidates:
            other, qual = candidate
            key = (id(other), qual)
            if key not in memo:
                # the text prefilters (no parse of a file that never spells such a collective); the calls decide
                target = self.analysis.function_info(candidate) if any(w in other.text for w in UNIFORMIZING) \
                    else None
                memo[key] = target if target is not None and any(
                    c.scope == target[1].qualname and _last(c.callee, c.node.func) in UNIFORMIZING
                    and (c.callee or "").startswith(_COLLECTIVE_MODULES) for c in target[0].facts.calls) else None
            target = memo[key]
            if target is None or self.analysis.returns_for_args(e, target, origins) is not None:
                return False
        return True

    def fill(self, call: cst.Call, env: Env, cls: Optional[str]) -> None:
        """A container -- a local, or an attribute path the walk keeps like one (`self.buffer`) -- filled by its
        own method (list/deque `append`/`appendleft`/`insert`/`extend`, set
        `add`, dict `setdefault`/`update`: each puts its value arguments in): with a varying value it holds varying
        items, what was put in (`xs[]`); its length and keys are taken as the same on every rank, as for an item
        stored at a uniform key (`bind`; a list grown under a rank-dependent test is `raising_ranks`' concern); a
        data loader put in leaves it as it was (`Origin.stream`: the same object on every rank); a
        varying sequence extended in (its length varies) makes the container vary as a whole. A mapping varying
        at some literal keys only (`Origin.keys`) widens its keys (`updated_mapping`)."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return
        # the receiver: a local (`outs`) or an attribute path the walk keeps in its environment like one
        # (`self.buffer`, read back by `_attribute` before the class's stored fields)
        name = func.value.value if isinstance(func.value, cst.Name) else \
            dotted_name(func.value) if isinstance(func.value, cst.Attribute) else None
        if name is None:
            return
        method = func.attr.value
        at = _PUTS.get(method)
        if at is None:
            return
        if method == "update" and (env.get(name) is None or env[name].keys is not None):
            updated = self.updated_mapping(call, env, cls)
            if updated is not None:
                env[name] = updated[1]
            return
        values = [a.value for a in call.args if not a.star and a.keyword is None][at:at + 1] if at >= 0 else \
            [a.value for a in call.args if a.keyword is not None or a.star == "**" or a is call.args[0]]
        origin = self._any(values, env, cls) if values else None
        if origin is None:
            return
        if origin.none_by is not None:
            origin = replace(origin, none_by=None)      # the container is no None, whatever was put in
        if origin.stream:
            # a data loader put in (`loaders.append(DataLoader(...))`) is the same object on every rank: the
            # container, its length and its keys stay as they were; an element read back (`loaders[0]`) is the
            # loader, what a rank draws from it is per-rank
            env[name + "[]"] = join(env.get(name + "[]"), origin)
            return
        if method in ("extend", "extendleft") and origin.kind in TRIP_COUNT_KINDS and not is_display(origin):
            # as many items as this rank's sequence has: the container's length varies
            env[name] = join(env.get(name), origin) if name in env else origin
            return
        item = replace(origin, keys=None) if origin.keys is not None else origin
        if method in ("extend", "extendleft", "update"):
            item = element_of(item)
        env[name + "[]"] = join(env.get(name + "[]"), item)
        held = env.get(name)
        if held is not None and held.keys is not None:
            env[name] = replace(held, keys=None)
        elif held is None:
            env[name] = replace(item, kind="item" if item.kind in TRIP_COUNT_KINDS else item.kind, batch=True,
                                keys=None, elements=None)

    def updated_mapping(self, call: cst.Call, env: Env, cls: Optional[str]) -> Optional[tuple[str, Origin]]:
        """`d.update(other)` / `d.update(k=v)` (dict's method: it adds or replaces items) of a mapping that is
        uniform or varies at some literal keys only (`Origin.keys`): (its name, the mapping now) -- it also varies
        at the keys of the varying values put in (a keyword's name, a keyed mapping's `keys`; a uniform value put
        at a keyword takes that key out), and at any key once a varying mapping whose keys are not known is merged
        in (`keys=None`); None when `call` is no such update or the mapping stays uniform."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "update" or not isinstance(func.value, cst.Name):
            return None
        name = func.value.value
        held = env.get(name)
        if held is not None and held.keys is None:
            return None
        keys = set(held.keys) if held is not None else set()
        base, anywhere = held, False
        for arg in call.args:
            hit = self.eval(arg.value, env, cls)
            if arg.keyword is not None:
                if hit is not None:
                    keys.add(arg.keyword.value)
                else:
                    keys.discard(arg.keyword.value)     # replaced by a uniform value
            elif hit is not None:
                if hit.keys is None:
                    anywhere = True
                else:
                    keys |= hit.keys
            if hit is not None:
                base = base if base is not None else hit
                env[name + "[]"] = join(env.get(name + "[]"), replace(hit, keys=None, batch=False)
                                        if hit.keys is not None else hit)
        if base is None or not keys and not anywhere:
            return None
        return name, replace(base, keys=None if anywhere else frozenset(keys), batch=True, elements=None,
                             rows=False)

    @staticmethod
    def keyed_item(container: Optional[Origin], key) -> tuple[bool, Optional[Origin]]:
        """`d["k"]` / `d.get("k")` of a mapping varying only at some literal keys: (decided, the item's origin)."""
        if container is None or container.keys is None or not isinstance(key, str):
            return False, None
        if key not in container.keys:
            return True, None
        return True, replace(container, keys=None, batch=False)

    def _option_keys(self, key: cst.BaseExpression, env: Env, cls: Optional[str]) -> Optional[frozenset]:
        """The strings a key that is no literal can be: `args.metric` where `metric` is the destination of
        command-line options that all declare their literal choices (`hyperparams.option_domain`: argparse
        `choices=`, an `HfArgumentParser` field's `Literal[...]` or `metadata={"choices": ...}`, defaults
        included, the attribute assigned nowhere) -- the same on every rank; None for anything else."""
        if not isinstance(key, cst.Attribute) or not isinstance(key.value, (cst.Name, cst.Attribute)) or \
                self.eval(key, env, cls) is not None:
            return None
        project = getattr(self.analysis, "project", None)
        if project is None:
            return None
        from dslint.program.hyperparams import option_domain
        return option_domain(project, key.attr.value)

    def _attribute(self, e: cst.Attribute, env: Env, cls: Optional[str]) -> Optional[Origin]:
        name = dotted_name(e)
        if name is not None:
            if name in env:
                return env[name]
            if name + WRITTEN in env:
                return None     # written in place by a collective (`uniformize`): what it holds now is alike
            if name.startswith("self.") and cls is not None:
                hit = self.analysis.self_attrs(self.src, cls).get(name)
                if hit is not None:
                    return hit
        attr = e.attr.value
        if attr in _TYPE_ATTRS or attr == "type" and isinstance(e.value, cst.Attribute) and \
                e.value.attr.value == "device":
            return _typed(self.eval(e.value, env, cls))
        if attr in SIZE_ATTRS:
            return _sized(self.eval(e.value, env, cls))
        # a rank id by provenance, never by the attribute's spelling: a documented rank property of a library
        # object whose type is known (accelerate's `accelerator.is_main_process`, TrainingArguments'
        # `local_rank`), or a field something stores a rank id in (`ProjectTaint.rank_fields`: an assignment
        # from a rank source, the launchers' `--local_rank` option). `cfg.local_rank` of an object nothing stores
        # a rank in is whatever `cfg` is.
        library = accelerate_typing(self.analysis, self.src).rank_property(e, cls)
        held = Origin("rank", e, self.src, via=f"a rank property of {library}") if library is not None else \
            self.analysis.rank_field(self.src, e, cls)
        if held is not None:
            declared, field = self.analysis.plain_field_of(self.src, e.value, attr, cls)
            # `self.control.should_save` of a `TrainerControl()`: a field its class declares and the code sets
            # (varying only if the class's methods set it from a rank value)
            return field if declared else held
        hit = self.eval(e.value, env, cls)
        if hit is not None and hit.fields is not None:
            if hit.kind == "rank" and self.analysis.constant_field(attr):
                return None     # one value on every object, whichever a rank test picked (below)
            return field_origin(hit, attr)     # `tracker.total` of `Tracker(cfg, local_rank)`: that field's stores
        if hit is not None and hit.stream:
            return None     # `loader.batch_size`, `loader.dataset`: the loader's own settings, alike on every rank
        if hit is not None and hit.kind == "rank" and self.analysis.constant_field(attr):
            return None     # `model[0]` or `model[-1]` by the stage: a field every object holds alike
        return hit

    def _subscript(self, e: cst.Subscript, env: Env, cls: Optional[str]) -> Optional[Origin]:
        if self.facts.resolve_expr(e.value) in ("os.environ", "environ"):
            return self._subscript_item(e, env, cls)   # the environment is no display: decided without the view
        if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            base_origin = self.eval(e.value, env, cls)
            if base_origin is not None and base_origin.elements is not None:
                at = literal_value(e.slice[0].slice.value)
                if isinstance(at, int) and -len(base_origin.elements) <= at < len(base_origin.elements):
                    # the element of a display (`model = [model]`, then `model[0]`): that value again, an object
                    # with per-field origins (`Origin.fields`) with them
                    return base_origin.elements[at]
        out = self._subscript_item(e, env, cls)
        # any other item of an object with per-field origins: a value of its own
        return replace(out, fields=None, object_class=None) if out is not None and out.fields is not None else out

    def _subscript_item(self, e: cst.Subscript, env: Env, cls: Optional[str]) -> Optional[Origin]:
        base = self.facts.resolve_expr(e.value)
        if base in ("os.environ", "environ") and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            if literal_value(e.slice[0].slice.value) in RANK_ENV_KEYS:
                return Origin("rank", e, self.src)
        for el in e.slice:
            s = el.slice
            if isinstance(s, cst.Slice):
                bound = self._any([x for x in (s.lower, s.upper, s.step) if x is not None], env, cls)
                if bound is not None:
                    out = Origin("shard", e, self.src, axes=bound.axes)
                    return join(out, self.eval(e.value, env, cls)) if partial(out) else out
            elif (index := self.eval(s.value, env, cls)) is not None and index.kind in _DATA_KINDS and \
                    _boolean_mask(s.value):
                # `entropies[mask.bool()]`: a boolean mask of per-rank content picks as many elements as hold on
                # this rank -- the selection's size varies (a shard of it), whatever the container's shape
                return Origin("shard", e, self.src, axes=index.axes,
                              via="a selection by a mask of this rank's data: its size is this rank's")
            elif index is not None:
                # array_split(xs, world)[rank], chunk(...)[rank], `parts[rank]` of a name bound to such a split or
                # to per-index slices: this rank's share (its length varies); any other xs[rank] is this rank's
                # item, whose structure is usually uniform -- by what the container is bound to, never by its name
                out = Origin("shard" if self._split_parts(e.value) else "item", e, self.src, axes=index.axes)
                return join(out, self.eval(e.value, env, cls)) if partial(out) else out
        name = dotted_name(e.value)
        if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            decided, item = self.keyed_item(self.eval(e.value, env, cls), literal_value(e.slice[0].slice.value))
            if decided:                 # `info["engine"]` beside a varying `info["loss"]`
                return env.get(name + "[]", item) if item is not None and name is not None else item
        if name is not None and name + "[]" in env:
            return env[name + "[]"]     # what was stored in it at a uniform key (`bind`)
        base_origin = self.eval(e.value, env, cls)
        if base_origin is not None and base_origin.keys is not None:
            if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
                domain = self._option_keys(e.slice[0].slice.value, env, cls)
                if domain and not domain & base_origin.keys:
                    # `results[args.metric]` where the option's choices never name a varying item (issue 30,
                    # collective-result-uniform: a metrics mapping holding this rank's loss beside gathered metrics)
                    return None
            # `batch[k]` of a mapping varying at some literal keys, at a key that is no literal: any of its items,
            # the varying ones included -- an item, not the mapping (its `keys` say nothing of the item's own)
            return replace(base_origin, keys=None, batch=False)
        if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and \
                not isinstance(literal_value(e.slice[0].slice.value), str):
            return element_of(base_origin)      # `out[0]`: one sequence; `out["sequences"]`: the batch still
        return base_origin

    def _split_parts(self, container: cst.BaseExpression) -> bool:
        """Is `container` a collection of parts of one sequence, whose lengths may differ: a splitter's result
        (`np.array_split(xs, world)`, `torch.chunk(t, n)`, `t.tensor_split(n)`), or per-index slices
        (`[xs[i::world] for i in range(world)]`), inline or through a name (or `self.` field) every binding of
        which in the file is one (a name bound nowhere in the file -- a parameter, a loop variable -- is not
        known to be one)."""
        if isinstance(container, cst.Call):
            return _last(None, container.func) in SPLITTERS
        if isinstance(container, (cst.ListComp, cst.GeneratorExp)):
            elt = container.elt
            if not isinstance(elt, cst.Subscript) or not any(isinstance(el.slice, cst.Slice) for el in elt.slice):
                return False
            bound = {n.value for f in _comp_fors(container.for_in) for n in _target_names(f.target)}
            return any(isinstance(x, cst.Name) and x.value in bound
                       for el in elt.slice if isinstance(el.slice, cst.Slice)
                       for part in (el.slice.lower, el.slice.upper, el.slice.step) if part is not None
                       for x in name_nodes(part))
        name = dotted_name(container)
        if name is None or self.src.module is None:
            return False
        values = [node.value for node in iter_assigns(self.src.module) for t in node.targets
                  if dotted_name(t.target) == name]
        return bool(values) and all(not isinstance(v, (cst.Name, cst.Attribute)) and self._split_parts(v)
                                    for v in values)

    def _comparison(self, e: cst.Comparison, env: Env, cls: Optional[str]) -> Optional[Origin]:
        op = e.comparisons[0].operator
        if len(e.comparisons) == 1 and isinstance(op, (cst.In, cst.NotIn)):
            left = self.eval(e.left, env, cls)
            container = self.eval(e.comparisons[0].comparator, env, cls)
            if left is None and container is not None and (container.batch or container.kind == "item"):
                # `"pixel_values" in inputs`: a key of the collated batch; `KEY in state_dicts[rank]`: of this
                # rank's item of a collection whose items share their structure (their sizes: `_sized`)
                return None
            hit = join(left, container) if partial(left) else left or container
        else:
            hit = self._any([e.left, *(c.comparator for c in e.comparisons)], env, cls)
        if hit is None or len(e.comparisons) != 1:
            return hit
        if isinstance(op, (cst.Is, cst.IsNot)) and \
                isinstance(e.comparisons[0].comparator, cst.Name) and e.comparisons[0].comparator.value == "None":
            if _env_read(e.left):
                return None             # `os.getenv("RANK") is not None`: the launcher sets it on every rank or none
            if hit.opaque and (hit.kind in _DATA_KINDS or hit.kind == "derived"):
                # `logits is not None` after `forward_fn(data=shard)`, `state is None` after `torch.load(name)` of
                # this rank's file: not the data's doing, nor the rank's -- unless a checked function returned None
                # itself under a rank-dependent test (`Origin.none_by`)
                return hit.none_by
            if hit.batch:
                return None             # `labels is not None` for `labels = inputs.get("labels")`: the collator's
            if hit.present and isinstance(e.left, cst.Name):
                return None             # `seq_q is not None` for `seq_q = None if seq_k is None else seq_k[:, lo:hi]`
            if cls is not None and isinstance(e.left, cst.Attribute) and isinstance(e.left.value, cst.Name) and \
                    e.left.value.value == "self" and self.analysis.uniform_none_field(self.src, cls, e.left.attr.value):
                return None             # `self.engine is None`: None on every rank, or an object built on every rank
            if hit.kind == "rank" and isinstance(e.left, cst.Attribute) and dotted_name(e.left) not in env and \
                    self.analysis.rank_field(self.src, e.left, cls) is not None and \
                    self.analysis.uniform_none_rank_field(self.src, e.left):
                return None             # `cfg.data_parallel_rank is None`: not set yet on every rank, or set on all
        if hit.batch:
            hit = replace(hit, batch=False)     # a comparison of values: the contents, which vary
        # `local_rank == -1` / `local_rank >= 0` ask "is this run distributed?": the same answer on every rank
        other = literal_value(e.comparisons[0].comparator)
        if other == -1 and isinstance(op, (cst.Equal, cst.NotEqual, cst.GreaterThan, cst.LessThanEqual)):
            return None
        if other == 0 and isinstance(op, (cst.GreaterThanEqual, cst.LessThan)) and hit.kind == "rank":
            return None
        return hit

    def _call(self, e: cst.Call, env: Env, cls: Optional[str]) -> Optional[Origin]:
        if isinstance(e.func, cst.Attribute):
            receiver = self.eval(e.func.value, env, cls)
            if receiver is not None and receiver.fields is not None and receiver.object_class is not None:
                # `tracker.due()` on an object whose fields vary one by one: the method's return as the fields it
                # reads and the arguments it is handed make it (`ProjectTaint.returns_with_fields`)
                method = self.analysis.method_of(*receiver.object_class, e.func.attr.value)
                if method is not None:
                    return self.analysis.returns_with_fields(
                        e, method, dict(receiver.fields), [self.eval(a.value, env, cls) for a in e.args])
        hit = self._call_value(e, env, cls)
        if hit is None:
            return None
        if hit.kind not in _DATA_KINDS:
            built = self.constructed_fields(e, env, cls)
            if built is not None:
                return replace(hit, fields=tuple(sorted(built[1].items())), object_class=built[0])
        if hit.fields is not None and self._checked_return(e, cls):
            # a checked function (or one a parameter is handed) returning the object it built or was handed
            # (Megatron's `get_model(model_provider)` returning `model_provider(pre_process=...)`): its return
            # summary was walked with these rules, so the fields it keeps are that object's (`returns_for_args`)
            return hit
        # what another call returns is a value of its own, not an object handed to it
        return replace(hit, fields=None, object_class=None) if hit.fields is not None else hit

    def _checked_return(self, e: cst.Call, cls: Optional[str]) -> bool:
        """Is `e`'s value what a function of the checked files returns: a call the analysis resolves to one
        (`call_source`), or of a parameter the callers hand checked functions (`_handed_returns`)?"""
        callee = self.facts.resolve_expr(e.func)
        if self.analysis.call_source(self.src, callee, cls, fields=False) is not None:
            return True
        if not (isinstance(e.func, cst.Name) and self._handed_callable(e.func)):
            return False
        scope = self._call_scopes.get(id(e))
        info = self.facts.functions.get(scope) if scope is not None else None
        finder = getattr(self.analysis, "_function_value", None)
        return info is not None and finder is not None and bool(finder(self.src, info, e.func, 0))

    def constructed_fields(self, e: cst.Call, env: Env, cls: Optional[str]
                           ) -> Optional[tuple[tuple["PythonSource", str], dict[str, Origin]]]:
        """`Tracker(cfg, local_rank)`: a class of the checked files constructed with rank-varying arguments (rank
        ids or values computed from them: per-rank data kept on an object is that data), which the object keeps
        field by field -- (the class, its varying fields: `ProjectTaint.constructed_fields`). None when the call
        is no such construction, or a library class's (today's model: the object varies as a whole)."""
        if not e.args:
            return None
        callee = self.facts.resolve_expr(e.func)
        if not callee or callee in _BUILTIN_NAMES:
            return None
        found = self.analysis.class_of(self.src, callee)     # a lookup `view_free` lets through
        if found is None:
            return None
        origins = [self.eval(a.value, env, cls) for a in e.args]
        if any(o is not None and (a.star or o.kind in _DATA_KINDS) for a, o in zip(e.args, origins)):
            return None
        fields = self.analysis.constructed_fields(e, found, origins)
        return (found, fields) if fields is not None else None

    def _call_value(self, e: cst.Call, env: Env, cls: Optional[str]) -> Optional[Origin]:
        callee = self.facts.resolve_expr(e.func)
        last = _last(callee, e.func)
        if last in RANK_CALLS:
            axes = RANK_AXES.get(last)
            if last == "get_rank" and group_named(e):
                # `dist.get_rank(group=mpu.get_data_parallel_group())`: the rank within a group of known
                # coordinates differs only in those
                axes = resolve_group(self.src, next(a.value for a in e.args if a.keyword is None
                                                    or a.keyword.value == "group"), None).axes
            return Origin("rank", e, self.src, axes=axes,
                          member=frozenset({last}) if last in _MEMBER_CALLS else None,
                          group=group_named(e) if last == "get_rank" else None)
        if last in ("getenv", "get") and e.args and (last == "getenv" or (callee or "").endswith("environ.get")):
            if literal_value(e.args[0].value) in RANK_ENV_KEYS:
                return Origin("rank", e, self.src)
        if last in UNIFORMIZING and (callee or "").startswith(_COLLECTIVE_MODULES) or \
                last in UNIFORMIZING and isinstance(e.func, cst.Attribute) and \
                accelerate_typing(self.analysis, self.src).is_state(e.func.value, cls):
            return None     # `accelerator.gather(x)` of an accelerate state object typed by use
        if isinstance(e.func, cst.Attribute) and self.bound_collective(e.func):
            return None     # `self.gather_function(x)` with `self.gather_function = accelerator.gather_for_metrics`
        group = _library_broadcast(callee, last)
        if group is not None and len(e.args) >= 2:
            # `mpu.broadcast_data(keys, data, datatype)`: the model-parallel group's first rank reads the batch,
            # the library broadcasts it to the group: what comes back varies in the other coordinates only
            held = self._any([a.value for a in e.args], env, cls)
            if held is None:
                return None
            rest = remaining_axes((held.axes if held.axes is not None else ALL_AXES) - group,
                                  getattr(self.analysis, "project", None))
            return replace(held, axes=frozenset(rest), keys=None, elements=None, present=False,
                           by_setting=None) if rest else None
        if last in ("get", "pop") and isinstance(e.func, cst.Attribute) and e.args and e.args[0].keyword is None:
            container = self.eval(e.func.value, env, cls)
            decided, item = self.keyed_item(container, literal_value(e.args[0].value))
            if not decided and container is not None and container.keys is not None and \
                    (domain := self._option_keys(e.args[0].value, env, cls)) and not domain & container.keys:
                decided = True          # `results.get(args.metric)`: the option never names a varying item
            if decided:                 # `info.get("save_interval", default)` of a mapping varying elsewhere
                held = dotted_name(e.func.value)
                if item is not None and held is not None:
                    item = env.get(held + "[]", item)
                return join(item, self._any([a.value for a in e.args[1:]], env, cls))
        if last in _DEVICE_MOVES and isinstance(e.func, cst.Attribute):
            # `batch["input_ids"].to(device)`: the same data on another device (a rank-id receiver: placement)
            hit = self.eval(e.func.value, env, cls)
            return hit if hit is not None and hit.kind in _DATA_KINDS else None
        if last in LAUNDERING:
            return None
        if last == "range" and isinstance(e.func, cst.Name) and callee in (None, "range") and 2 <= len(e.args) <= 3 \
                and not any(a.keyword is not None or a.star for a in e.args):
            hit = self._any([a.value for a in e.args], env, cls)
            if hit is not None and hit.kind in TRIP_COUNT_KINDS and (len(e.args) == 2 or self.eval(
                    e.args[2].value, env, cls) is None) and \
                    uniform_difference(e.args[0].value, e.args[1].value, env, self.eval, cls):
                # `range(rank * size, (rank + 1) * size)`: the same number of items on every rank (which
                # items they are varies)
                return replace(hit, kind="item", affine=None, member=None)
        if last in _ENGINE_BUILDERS and (callee or "").startswith("deepspeed"):
            return None
        if last == "generate" and isinstance(e.func, cst.Attribute) and not self._plain_method(e.func):
            return Origin("generation", e, self.src, rows=True)
        if self.object_fields(e, env, cls) is not None:
            return None                 # `TrainerState(is_local_process_zero=...)`: only that field varies (`bind`)
        # a method of another class's instance on a `self.` field (`self.gen.generate(...)`) is followed for its
        # parameters and its collectives, not for what it returns: its results are mostly dicts of metrics and
        # outputs, whose per-key taint a return summary cannot keep (one rank-varying key would taint them all)
        source = self.analysis.call_source(self.src, callee, cls, fields=False)
        if source is None and (scattered := self._field_scatter_item(callee, cls)) is not None:
            return scattered
        if source is not None:
            hit = self.analysis.returns_of_source(source)
            if hit is not None:
                # the branches the call's constants leave live (`ProjectTaint.returns_at_constants`)
                hit = self.analysis.returns_at_constants(e, source, hit)
            if hit is not None and not hit.stream:
                return hit
            # a function of the checked files: what it returns for these arguments (context-sensitive), which
            # differs only when some argument is rank-varying (a helper building a loader returns a loader whatever
            # it is handed, unless it builds it over a rank's share of the data)
            # a loader handed in is not followed back out through the return (`rank_0_tqdm(val_loader)`, a
            # `train_step(it, engine)` returning a loss): what the callee draws from it taints the callee's own
            # tests (its parameters, `call_env`), not what it hands back
            origins = [None if o is not None and o.stream else o for o in
                       (self.eval(a.value, env, cls) for a in e.args)]
            if not any(o is not None for o in origins):
                return hit
            target = self.analysis.function_info(source)
            if target is not None:
                return self.analysis.returns_for_args(e, target, origins) or hit
            return hit
        if source is None and isinstance(e.func, cst.Attribute) and self._agreed_by_method(e, env, cls):
            return None
        if last in _STRUCTURE_CALLS:
            first = e.func.value if last == "keys" and isinstance(e.func, cst.Attribute) else \
                next((a.value for a in e.args if a.keyword is None), None)
            hit = self.eval(first, env, cls) if first is not None else None
            if hit is not None and hit.batch:
                return None             # `isinstance(inputs, dict)`, `hasattr(outputs, "loss")`, `inputs.keys()`
            if hit is not None and last != "keys" and hit.kind != "rank":
                # `isinstance(result, torch.Tensor)` of this rank's share or of what a function made of it: per-rank
                # data differs in its values and sizes, not in its type (`_typed`)
                return None
        if last == "len" and len(e.args) == 1:
            dims = _shape_of(e.args[0].value)
            if dims is not None:
                return _typed(self.eval(dims, env, cls))    # `len(x.shape)`: x's number of dimensions, as `x.dim()`
        if last in FIRST_ARG_ONLY:
            first = next((a for a in e.args if a.keyword is None), None)
            hit = self.eval(first.value, env, cls) if first is not None else None
            if isinstance(hit, Origin) and last == "enumerate" and not hit.stream and hit.elements is None and \
                    (hit.kind in TRIP_COUNT_KINDS or hit.kind == "derived" or hit.kind == "item" and hit.rows):
                # (step, item): the step counts the passes made so far, the same number at any pass on every rank
                # that makes it. Over this rank's share (kinds of TRIP_COUNT_KINDS) a differing trip count is the
                # loop's own hazard (`FlowWalk.loop`); over a "derived" value nothing says the length follows the
                # rank, so the passes, and their count, go alike; over a list padded to one length (an "item" list
                # with `rows`) the passes are as many everywhere. Over anything else (the items a function draws
                # from a loader, filtered by their content) the passes made may differ: the step stays the items'
                return replace(hit, elements=(None, hit))
            if hit is not None and hit.stream:
                if last == "enumerate":     # (step, batch): the step counts alike on every rank
                    return replace(hit, elements=(None, replace(hit, stream=False)))
                if last == "len":
                    return None             # the loader's batch count: see `FlowWalk.loop` (kind "shard" otherwise)
                if last == "next":
                    return replace(hit, stream=False)   # a batch drawn from it
            if first is None and isinstance(e.func, cst.Attribute):
                # a method without arguments (`mask.bool()`, `loss.float()`, `ids.tolist()`): its receiver's
                # values converted -- what a collated batch's values are, which vary
                hit = self.eval(e.func.value, env, cls)
                return replace(hit, batch=False) if hit is not None and hit.batch and last in _VALUE_METHODS else hit
            if hit is None and last == "next" and first is not None:
                return self.loader_batch(first.value, env, cls, self._call_scopes.get(id(e)))  # `next(self.dataloader)`
            # a display keeps its length through `list`/`tuple`/`sorted`/`iter`/…, not through `set` (equal items
            # fold) nor a conversion of it
            return _counted(hit) if last == "len" else undisplayed(hit) if last in _NOT_LENGTH_KEEPING else hit
        if last in _TYPE_METHODS and isinstance(e.func, cst.Attribute) and not e.args:
            return _typed(self.eval(e.func.value, env, cls))     # `x.dim()`: its number of dimensions
        if last in SIZE_ATTRS and isinstance(e.func, cst.Attribute):
            if self.facts.resolve_expr(e.func.value) in _ARRAY_MODULES and e.args:
                return _sized(self.eval(e.args[0].value, env, cls))     # `torch.numel(x)`: x's size
            if last == "size" and len(e.args) == 1 and literal_value(e.args[0].value) == 0:
                return _counted(self.eval(e.func.value, env, cls)) or self._any([a.value for a in e.args], env, cls)
            return _sized(self.eval(e.func.value, env, cls)) or self._any([a.value for a in e.args], env, cls)
        if any(a.keyword is not None and a.keyword.value in _SAMPLER_KWARGS and self.distributed_sampler(a.value)
               for a in e.args):
            # DataLoader(ds, sampler=DistributedSampler(ds)): ceil(len(ds)/world) batches on every rank, so
            # only a dataset that is itself this rank's share makes its length vary
            data = next((a for a in e.args if a.keyword is None or a.keyword.value == "dataset"), None)
            hit = self.eval(data.value, env, cls) if data is not None else None
            if hit is not None and hit.kind == "shard":
                return hit
            stream = self._loader_stream(e, callee)
            sampler = next(a.value for a in e.args if a.keyword is not None and a.keyword.value in _SAMPLER_KWARGS
                           and self.distributed_sampler(a.value))
            axes = self.sampler_axes(sampler, env, cls)
            if stream is not None and axes is not None:
                # the sampler draws by a rank of some grid coordinates only (`rank=mpu.get_data_parallel_rank()`):
                # the members of a model-parallel group draw the same items
                stream = replace(stream, axes=axes, via="a data loader whose sampler draws by the rank "
                                 f"`{code_of(self._sampler_rank_node(sampler, env) or sampler, 40)}`: "
                                 "other samples on the ranks that differ in it")
            return stream
        if last == "zip" and isinstance(e.func, cst.Name) and e.args:
            # `zip(prompt_loader, unsup_loader)`: a stream of tuples, a batch of each loader (or what the other
            # iterables hold) in each
            parts = [self.eval(a.value, env, cls) if a.keyword is None else None for a in e.args]
            first = next((p for p in parts if p is not None and p.stream), None)
            if first is not None:
                return replace(first, elements=tuple(replace(p, stream=False, elements=None) if p is not None
                                                     and p.stream else element_of(p) for p in parts))
        stream = self._loader_stream(e, callee)
        if stream is not None:
            data = next((a for a in e.args if a.keyword is None or a.keyword.value == "dataset"), None)
            if data is None or self.eval(data.value, env, cls) is None:
                return stream
            # a loader over a per-rank value (`DataLoader(samples[rank::world])`): its batch count is the value's,
            # below
        if last == "format" and isinstance(e.func, cst.Attribute) and _template_text(e.func.value) is not None:
            # `"zero_pp_rank_{}".format(rank)`: the values written into the template's text
            return _rendered(self._any([a.value for a in e.args], env, cls), _template_text(e.func.value))
        # a method of a display (`xs.index(v)`) returns no display
        out = undisplayed(self.eval(e.func.value, env, cls)) if isinstance(e.func, cst.Attribute) else None
        if out is not None and out.stream:
            out = replace(out, stream=False)    # `it.__next__()`: what is drawn from a loader is a batch
        if out is not None and out.batch and last in _VALUE_METHODS:
            out = replace(out, batch=False)     # `batch["mask"].sum()`, `.item()`, `.any()`: values, which vary
        if out is not None and out.opaque and out.kind in _DATA_KINDS and last in _MAPPING_VIEWS:
            # `for k, v in outputs.items()` of what a function outside the checked files made from per-rank data:
            # its keys are that function's, as many on every rank; the values still vary
            return replace(out, kind="item")
        if out is not None and not partial(out):
            return out
        if out is None and isinstance(e.func, cst.Name) and self._handed_callable(e.func):
            handed = self._handed_returns(e, env, cls)
            if handed is not False:
                return handed
        for arg in e.args:
            if arg.keyword is not None and arg.keyword.value in PLACEMENT_KWARGS:
                continue
            if arg.star == "**" and self._placement_only(arg.value, env, cls):
                continue        # `make_loader(**kwargs)` after `kwargs["device"] = local_rank`: as `device=...`
            if display_only(self.datasets, e, arg):
                continue        # `ds.map(fn, desc=label if is_main else None)`: the label never reaches the result
            if server_role(callee, e, arg):
                continue        # `TCPStore(host, port, world, rank == 0)`: which process serves the one store
            if trace_example(callee, e, arg):
                continue        # `torch.jit.trace(model, example_kwarg_inputs=batch)`: the module, traced
            hit = self.eval(arg.value, env, cls)
            if hit is not None and hit.fields is not None:
                # an object whose fields vary one by one (`Origin.fields`) handed to a call no summary follows
                # (`cb.on_step_end(self.state, self.control)` of callbacks in a list): its result is taken as no
                # value made of the object -- as for an object whose class only stores the varying arguments
                # (`object_fields`); a checked callee reads the fields themselves (`param_taint`)
                continue
            if hit is not None and hit.rendered:
                hit = self._rendered_name(e, last, arg, hit, env, cls)
            if hit is not None and hit.stream:
                # a loader handed to a call: a function value the code was given (`hooks["forward_step"](it,
                # model)`, a parameter) draws this rank's batches from it; a named library function
                # (`has_length(loader)`, `accelerator.prepare(loader)`) returns what that function makes of the
                # loader object, which is the same on every rank
                if not self._handed_callable(e.func):
                    continue
                hit = replace(hit, stream=False)
            if hit is not None:
                if hit.elements is not None and last not in _LOOKUPS:
                    # what a call outside the checked files makes of a tuple (`torch.stack((x, rank_t))`) is no
                    # longer that tuple: its items are not the tuple's items
                    hit = replace(hit, elements=None)
                if hit.kind in _DATA_KINDS and last not in _LOOKUPS:
                    hit = replace(hit, opaque=True)
                if hit.kind == "rank" and last not in KIND_KEEPING:
                    kind = "shard" if self._share_of(e, callee, last, arg) else "derived"
                    hit = replace(hit, kind=kind, member=None)
                out = join(out, hit)
                if not partial(out):
                    return out
        return out

    def _truth_alike_part(self, e: cst.BaseExpression, env: Env, cls: Optional[str]) -> bool:
        """Is the truth of `e` the same on every rank: a uniform value, or a name / rendering / concatenation whose
        eval says so (`Origin.truth`, `_truth_kept`)?"""
        origin = self.eval(e, env, cls)
        return origin is None or origin.truth and _truth_kept(e)

    def _call_truth(self, e: cst.Call, out: Optional[Origin], env: Env, cls: Optional[str]) -> Optional[Origin]:
        """`Origin.truth` of a call's result: a rendering's (`"rank{}".format(rank)`, set by `_rendered`); the path
        `os.path.join` makes is empty exactly when all its parts are: never empty when one part is literal text or
        a rendering of literal text written there, and empty alike on every rank when each part's truth is alike
        (uniform, or `Origin.truth` of a name bound to such a string: `os.path.join(root, name)` after `name =
        f"{step}/rank_{rank}.pt"`); any other call's result is a value of its own, whose truth its arguments'
        says nothing of."""
        if out is None:
            return out
        parts = [a for a in e.args if a.keyword is None]
        if _path_join(e) and parts and not any(a.star for a in parts) and \
                self.facts.resolve_expr(e.func) in _PATH_JOINS and (
                    any(_nonempty_literal(a.value) for a in parts) or
                    all(self._truth_alike_part(a.value, env, cls) for a in parts)):
            return replace(out, truth=True)
        if out.truth and not _renders(e):
            return replace(out, truth=False)
        return out

    def _placement_only(self, mapping: cst.BaseExpression, env: Env, cls: Optional[str]) -> bool:
        """Is a mapping spread into a call (`f(**kwargs)`) rank-varying only at literal keys that are placement
        keywords (`Origin.keys` within `PLACEMENT_KWARGS`: `kwargs["device"] = int(os.environ["LOCAL_RANK"])`)?
        Its items are then the call's keyword arguments of those names, which place the result, not make it."""
        hit = self.eval(mapping, env, cls)
        return hit is not None and hit.keys is not None and bool(hit.keys) and hit.keys <= PLACEMENT_KWARGS

    def _rendered_name(self, e: cst.Call, last: Optional[str], arg: cst.Arg, hit: Origin, env: Env,
                       cls: Optional[str]) -> Origin:
        """A name of this rank's own thing (`Origin.rendered`) handed to a call outside the checked files: what the
        call makes of it -- a path joined onto it, the files a pattern matches, what a file holds -- is derived
        from the rank as any such result is (its tests still vary), but whether it is None is the call's affair,
        not the rank's (`opaque`), as for what such a call makes of a rank's batch. Not so for a lookup by the
        name (`getattr(obj, name)`, `env.get(name)`: whether the name is there is the rank's, `_LOOKUPS`), nor
        for a call also handed a rank id itself (`make(name, rank)`)."""
        if last in _LOOKUPS or any(
                other is not arg and not other.star and (other.keyword is None or other.keyword.value
                                                         not in PLACEMENT_KWARGS)
                and (o := self.eval(other.value, env, cls)) is not None and o.kind == "rank" and not o.rendered
                for other in e.args):
            return replace(hit, rendered=False)
        return replace(hit, kind="derived" if hit.kind == "rank" else hit.kind, opaque=True, rendered=False,
                       member=None, group=None, affine=None)

    def _share_of(self, e: cst.Call, callee: Optional[str], last: Optional[str], arg: cst.Arg) -> bool:
        """Does a library call outside the checked files return the share of the data its rank argument picks
        (its length follows the rank)? By the API's meaning, not the callee's name: `Dataset.shard(num_shards,
        index=rank)` of a `datasets` object typed by use, `itertools.islice(xs, rank, None, world)`. Any other
        outside call given a rank id only derives a value from it ("derived")."""
        if last == "shard" and isinstance(e.func, cst.Attribute) and self.datasets is not None and \
                (arg.keyword is None or arg.keyword.value == "index") and self.datasets.is_dataset(e.func.value):
            return True
        return callee == "itertools.islice" and arg.keyword is None and arg is not e.args[0]

    @cached_property
    def datasets(self) -> Optional[DatasetTyping]:
        """`datasets` objects of this file typed by use (None: the file does not use the library)."""
        if "datasets" not in self.facts.imports.values() and not any(
                q.startswith("datasets.") for q in self.facts.imports.values()):
            return None
        return DatasetTyping(self.analysis.project, self.src)

    def object_fields(self, e: cst.BaseExpression, env: Env, cls: Optional[str]) -> Optional[dict[str, Origin]]:
        """`TrainerState(is_local_process_zero=self.is_local_process_zero(), ...)`: a checked class constructed with
        rank-varying arguments that it only stores, each as the field of its keyword (a dataclass field, or
        `self.k = k` in its `__init__`): the object itself -- its identity, None-ness, other fields -- is the same
        on every rank, only those fields vary. Rank ids and values computed from them only: an object holding
        per-rank data is that data (its fields are read as the data's). The varying fields (keyword → Origin); None when the call is not
        such a construction (any varying argument positional, or not kept as a field of its own name)."""
        if not isinstance(e, cst.Call) or not e.args:
            return None
        varying: list[tuple[object, Origin]] = []      # (keyword or position, origin)
        for i, arg in enumerate(e.args):
            hit = self.eval(arg.value, env, cls)
            if hit is None:
                continue
            if arg.star or hit.kind in _DATA_KINDS:
                # per-rank data kept on an object (`DistillationLogits(loss_mask=...)`) stays the data it holds:
                # the object is this rank's data, whose structure `Origin.batch`/sizes already tell apart
                return None
            varying.append((arg.keyword.value if arg.keyword is not None else i, hit))
        if not varying:
            return None
        # a checked class, a class of this file whatever its name (`_PendingPlan`), or an installed package's
        found = self.analysis.class_of(self.src, self.facts.resolve_expr(e.func))
        if found is None:
            return None
        stored, order = self.analysis.stored_fields(*found)
        out: dict[str, Origin] = {}
        for at, hit in varying:
            param = order[at] if isinstance(at, int) and at < len(order) else at
            if not isinstance(param, str) or param not in stored:
                return None
            for attr in stored[param]:
                out[attr] = hit
        return out

    def loader_batch(self, e: cst.BaseExpression, env: Env, cls: Optional[str], scope: Optional[str] = None,
                     _depth: int = 0) -> Optional[Origin]:
        """A batch of the script's own data loader (`for batch in train_dataloader`, `next(self.dataloader)`,
        through `iter`/`tqdm`/`enumerate`), when the loader itself is the same on every rank: in data parallelism
        each rank gets other samples, so the batch's CONTENT varies (its tensors' values, masks, token counts,
        losses computed from it); its structure (keys, a field's None-ness, types) is the collator's and its row
        count the loader's (`Origin.batch`, kind "item": sizes uniform). A loader whose batch count or lengths
        vary is a per-rank value itself (kind "shard": built over a shard or from a rank id) and is not asked.
        A rank-dependent choice of the display only (`tqdm(enumerate(loader)) if is_main else enumerate(loader)`,
        or a name bound to one: `Origin.items`) draws what the iterable it wraps draws. Whether the iterated value
        is a loader is data flow from its bindings in `scope` (`loader_flow.is_loader`), never its name."""
        inner = e
        if isinstance(inner, cst.IfExp):
            source = self._items_choice(inner) if _depth < 8 else None
            return self.loader_batch(source, env, cls, scope, _depth + 1) if source is not None else None
        if isinstance(inner, (cst.Name, cst.Attribute)) and _depth < 8:
            held = env.get(dotted_name(inner) or "")
            if held is not None and held.items is not None and held.items[1] is not None:
                return self.loader_batch(held.items[1], env, cls, scope, _depth + 1)
        while isinstance(inner, cst.Call) and _last(None, inner.func) in ("iter", "tqdm", "enumerate", "zip") \
                and inner.args and inner.args[0].keyword is None:
            wrapper = _last(None, inner.func)
            if wrapper == "enumerate":      # (step, batch) pairs
                hit = self.loader_batch(inner.args[0].value, env, cls, scope, _depth + 1)
                return replace(hit, elements=(None, hit)) if hit is not None else None
            if wrapper == "zip":            # a batch of each loader zipped (`zip(prompt_loader, unsup_loader)`)
                elems = tuple(self.loader_batch(a.value, env, cls, scope) if self.eval(a.value, env, cls) is None else None
                              for a in inner.args if a.keyword is None)
                hit = next((o for o in elems if o is not None), None)
                return replace(hit, elements=elems) if hit is not None else None
            inner = inner.args[0].value
        if not is_loader(self, inner, scope):
            return None
        name = dotted_name(inner)
        if name is not None:
            if name in self._list_names:
                return None     # `for name, loader in dataloaders` of a list the file builds: loaders, no batch
            if self.replicated_loader_name(name):
                return None     # a loader that samples alike on every rank: its batches are the same everywhere
            what = f"`{name}`"
        elif isinstance(inner, cst.Call):
            last = _last(self.facts.resolve_expr(inner.func), inner.func) or ""
            what = f"`{last}(...)`"
        else:
            return None
        return Origin("item", e, self.src, via=f"a batch of the data loader {what}: other samples on each rank",
                      batch=True)

    @cached_property
    def _list_names(self) -> frozenset[str]:
        """Bare names every assignment of which in the file binds a list display or comprehension (`dataloaders =
        []`, filled by `append`): a list, whatever its items -- a loop over it walks its items, not a loader's
        batches."""
        seen: dict[str, bool] = {}
        for node in _assignments(self.src.module):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    seen[t.target.value] = seen.get(t.target.value, True) and \
                        isinstance(node.value, (cst.List, cst.ListComp))
                else:
                    for n in _target_names(t.target) if isinstance(t.target, (cst.Tuple, cst.List)) else ():
                        seen[n.value] = False
        return frozenset(n for n, is_list in seen.items() if is_list)

    def _handed_returns(self, e: cst.Call, env: Env, cls: Optional[str]):
        """`forward_step_func(data_iterator, model, ...)` of a parameter the callers in the checked files hand
        project functions (`ProjectTaint.handed_functions`): what those functions return for these arguments,
        joined (a loader handed over is what they draw their batches from). False when the functions are not
        all known: the call is then judged on its arguments."""
        scope = self._call_scopes.get(id(e))
        info = self.facts.functions.get(scope) if scope is not None else None
        finder = getattr(self.analysis, "_function_value", None)
        if info is None or finder is None:
            return False
        targets = finder(self.src, info, e.func, 0)
        if not targets:
            return False
        origins = [self.eval(a.value, env, cls) for a in e.args]
        out: Optional[Origin] = None
        for target in targets:
            hit = self.analysis.returns_of_source((target[0], target[1].qualname))
            if hit is None or hit.stream:
                hit = (self.analysis.returns_for_args(e, target, origins) if any(o is not None for o in origins)
                       else None) or hit
            out = join(out, hit)
        return out

    @cached_property
    def _call_scopes(self) -> dict[int, str]:
        return {id(c.node): c.scope for c in self.facts.calls}

    def _handed_callable(self, func: cst.BaseExpression) -> bool:
        """Is the called function a value the code was handed rather than a named function: an item of a mapping
        (`hooks["forward_step"]`), or a bare name that is no import, no function or class of the file and no
        builtin (a parameter, or a local bound from one)?"""
        if isinstance(func, cst.Subscript):
            return True
        if not isinstance(func, cst.Name):
            return False
        name = func.value
        return name not in self.facts.imports and name not in self.facts.functions and \
            name not in self.facts.classes and name not in _BUILTIN_NAMES and name not in self._none_globals

    @cached_property
    def _none_globals(self) -> frozenset[str]:
        """Names the module binds, at its top level, to None only (`skip_first_batches = None`, the stub of an
        optional library function whose import was dropped) and no function rebinds (`global`): no value a caller
        handed in, and never a function that could draw batches -- a call of one never runs (it would raise)."""
        if re.search(r"^\s*global\s", self.src.text, re.M):
            return frozenset()
        seen: dict[str, bool] = {}

        def visit(body) -> None:
            for stmt in body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign):
                            none = isinstance(small.value, cst.Name) and small.value.value == "None"
                            for t in small.targets:
                                if isinstance(t.target, cst.Name):
                                    seen[t.target.value] = seen.get(t.target.value, True) and none
                        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and \
                                isinstance(small.target, cst.Name):
                            seen[small.target.value] = False
                elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                    for block in _blocks(stmt):
                        visit(block)
                elif isinstance(stmt, (cst.For, cst.While)):
                    for n in _target_names(stmt.target) if isinstance(stmt, cst.For) else ():
                        seen[n.value] = False
                    visit(_body(stmt.body))

        visit(self.src.module.body)
        return frozenset(n for n, none in seen.items() if none)

    def _loader_stream(self, e: cst.Call, callee: Optional[str]) -> Optional[Origin]:
        """`DataLoader(dataset, ...)` (torch's class, resolved through the imports, whatever the name it is bound
        to) or an engine's `deepspeed_io(dataset)`: a loader, the same object on every rank, whose batches hold
        other samples on each rank (data parallelism). Its number of batches is the loader's business (kind "item":
        no trip count); a loader over this rank's share keeps the share's origin (the sampler branch of `_call`)."""
        if callee in _TORCH_LOADERS and self.replicated_loader(e):
            return None     # every rank draws the same samples in the same order: a uniform value
        if callee in _TORCH_LOADERS or callee is None and isinstance(e.func, cst.Attribute) and \
                e.func.attr.value == "deepspeed_io":
            return Origin("item", e, self.src, via="a data loader: other samples on each rank", batch=True,
                          stream=True)
        return None

    def replicated_loader(self, e: cst.BaseExpression) -> bool:
        """A torch `DataLoader(dataset, ...)` call that chooses no sampler (no `sampler`/`batch_sampler`, by
        keyword or position) and does not shuffle (`shuffle` absent or a literal False): its default
        `SequentialSampler` walks the dataset in order, so on every rank it yields the same batches -- torch
        shards nothing by itself (a `DistributedSampler`, `accelerator.prepare` or `deepspeed_io` does). Only its
        dataset can then make the samples differ by rank, which the caller evaluates (issue 30,
        replicated-inputs-no-sampler). A shuffling loader draws its order from each process's generator: not
        proven the same."""
        if not isinstance(e, cst.Call) or self.facts.resolve_expr(e.func) not in _TORCH_LOADERS:
            return False
        positional = [a for a in e.args if a.keyword is None]
        if any(a.star for a in e.args) or len(positional) > 2:
            return False        # `**kwargs` may choose a sampler; a third positional is `shuffle`, then `sampler`
        for a in e.args:
            if a.keyword is None:
                continue
            if a.keyword.value in _SAMPLER_KWARGS:
                return False
            if a.keyword.value == "shuffle" and literal_value(a.value) not in (False, None):
                return False
        data = next((a.value for a in e.args if a.keyword is None or a.keyword.value == "dataset"), None)
        return data is not None and not self._reads_parameters(e, data)

    def _reads_parameters(self, call: cst.Call, expr: cst.BaseExpression) -> bool:
        """Does `expr`, an argument of `call`, read a parameter of the function holding the call, or a local
        computed from one (flow-insensitive)? A dataset handed in by callers may be this rank's shard already
        (`split_dataset_by_node`, a shard the caller picked), which this file does not show."""
        site = next((c for c in self.src.facts.calls if c.node is call), None)
        info = self.src.facts.functions.get(site.scope) if site is not None else None
        if info is None:
            return False        # module-level code: its names are the module's own
        tainted = set(info.params)
        pairs = []
        for node in iter_assigns(info.node.body):
            targets = {n.value for t in node.targets for n in _walk_names(t.target)}
            pairs.append((targets, {n.value for n in _walk_names(node.value)}))
        from dslint.sources.cstwalk import walk
        for node in walk(info.node.body):
            if isinstance(node, cst.For):
                pairs.append(({n.value for n in _walk_names(node.target)}, {n.value for n in _walk_names(node.iter)}))
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                pairs.append(({n.value for n in _walk_names(node.asname.name)},
                              {n.value for n in _walk_names(node.item)}))
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and node.value is not None:
                pairs.append(({n.value for n in _walk_names(node.target)}, {n.value for n in _walk_names(node.value)}))
        names_reached(pairs, tainted)
        return bool({n.value for n in _walk_names(expr)} & tainted)

    def replicated_loader_name(self, name: str) -> bool:
        """Every binding of `name` (a local or `self.` field) in this file is a `replicated_loader` call (a name
        also bound by unpacking, a loop or `with`, or to anything else, is not)."""
        memo = self.__dict__.setdefault("_replicated_names", {})
        if name not in memo:
            values, other = [], False
            for node in _assignments(self.src.module):
                for t in node.targets:
                    if dotted_name(t.target) == name:
                        values.append(node.value)
                    elif isinstance(t.target, (cst.Tuple, cst.List)) and any(
                            dotted_name(el.value if not isinstance(el.value, cst.StarredElement) else el.value.value)
                            == name for el in t.target.elements):
                        other = True
            if not other and values:
                short = name.rsplit(".", 1)[-1]
                other = any(dotted_name(n) == name or isinstance(n, cst.Name) and n.value == short and "." not in name
                            for n in _other_binding_targets(self.src.module))
            memo[name] = bool(values) and not other and all(self.replicated_loader(v) for v in values)
        return memo[name]

    def distributed_sampler(self, e: cst.BaseExpression) -> bool:
        """A `DistributedSampler(...)` (or a name this file binds to one, on some path: the other paths are
        the single-process fallbacks of `if local_rank == -1:`)."""
        if self._sampler_call(e):
            return True
        name = dotted_name(e)
        return name is not None and name in self._sampler_names

    def _sampler_call(self, e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Call):
            # a checked class by its hierarchy and code, a library class by its API name (`rank.samplers`)
            resolved = self.facts.resolve_expr(e.func)
            # the view is asked only in a file that can hand a sampler to a loader (`sampler=` /
            # `batch_sampler=`, the same text prefilter as `_sampler_names`): elsewhere a call is no sampler
            # of any loader here, and the file's module environment stays view-free (`view_free.per_source`)
            if "ampler" not in self.src.text:
                return False
            decided = distributed_sampler_class(self.analysis, self.src, resolved)
            if decided is not None:
                return decided
            return library_distributed_sampler(_last(resolved, e.func))
        if isinstance(e, cst.IfExp):
            return self._sampler_call(e.body) or self._sampler_call(e.orelse)
        return False

    def sampler_axes(self, e: cst.BaseExpression, env: Env, cls: Optional[str]) -> Optional[frozenset]:
        """The grid coordinates along which a distributed sampler's items differ: those of the rank values it is
        built from (`DistributedSampler(ds, num_replicas=dp_world, rank=mpu.get_data_parallel_rank())`, a
        project's batch sampler handed `rank = dist.get_rank(group=mpu.get_data_parallel_group())`): its
        selection follows the rank it is handed. None (every coordinate) when no argument is a rank of known
        coordinates -- the default sampler draws by the global rank --, and for a name whose binding did not
        record one (`bind`: `<name>.<sampler rank>`, joined over the paths that reach here)."""
        if isinstance(e, cst.Call) or isinstance(e, cst.IfExp):
            held = self._sampler_rank(e, env, cls)
        else:
            name = dotted_name(e)
            held = env.get(name + _SAMPLER_RANK) if name is not None else None
        return held.axes if held is not None else None

    def _sampler_rank(self, e: cst.BaseExpression, env: Env, cls: Optional[str]) -> Optional[Origin]:
        """The rank a sampler call is built from (an Origin of kind "rank" whose axes are its coordinates, None
        for every coordinate), or None when `e` is no distributed sampler call."""
        if isinstance(e, cst.IfExp):
            sides = [self._sampler_rank(side, env, cls) for side in (e.body, e.orelse)]
            found = [o for o in sides if o is not None]
            if not found:
                return None
            return found[0] if len(found) == 1 else join(*found)
        if not self._sampler_call(e):
            return None
        out: Optional[Origin] = None
        for arg in e.args:
            hit = self.eval(arg.value, env, cls)
            if hit is not None and hit.kind == "rank":
                out = join(out, hit)
        if out is None or out.axes is None:
            return Origin("rank", e, self.src)
        return Origin("rank", out.node, out.source, axes=out.axes)

    def _sampler_rank_node(self, e: cst.BaseExpression, env: Env) -> Optional[cst.CSTNode]:
        name = dotted_name(e)
        held = env.get(name + _SAMPLER_RANK) if name is not None else None
        return held.node if held is not None else None

    @cached_property
    def _sampler_names(self) -> set[str]:
        if "ampler" not in self.src.text:
            return set()        # a sampler reaches a loader by its `sampler=`/`batch_sampler=` keyword
        out = set()
        for node in _assignments(self.src.module):
            if self._sampler_call(node.value):
                out.update(n for t in node.targets if (n := dotted_name(t.target)))
        return out

    def _element_read(self, value: cst.BaseExpression, env: Env, cls: Optional[str]) -> bool:
        """`xs[0]` at a literal index of a display whose elements the origin keeps (`Origin.elements`): the
        element itself, not a value computed from it."""
        if not (isinstance(value, cst.Subscript) and len(value.slice) == 1 and
                isinstance(value.slice[0].slice, cst.Index) and
                isinstance(literal_value(value.slice[0].slice.value), int)):
            return False
        base = self.eval(value.value, env, cls)
        return base is not None and base.elements is not None

    # --- binding -----------------------------------------------------------------------------------
    def bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression], origin: Optional[Origin],
             env: Env, cls: Optional[str] = None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            items = [el.value for el in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(items):
                for t, v in zip(items, value.elements):
                    self.bind(t, v.value, self.eval(v.value, env, cls), env, cls)
                return
            elems = self.analysis.returned_elements(self.src, value, env, cls) \
                if origin is not None and isinstance(value, cst.Call) else \
                origin.elements if origin is not None else None
            if elems is not None and len(elems) == len(items) and not any(
                    isinstance(t, cst.StarredElement) for t in items):
                for t, o in zip(items, elems):
                    self.bind(t, None, o, env, cls)
            else:
                whole = replace(origin, present=False) if origin is not None and origin.present else origin
                for t in items:
                    self.bind(t, None, whole, env, cls)
            return
        if isinstance(target, cst.StarredElement):
            self.bind(target.value, None, origin, env, cls)
            return
        if isinstance(target, cst.Subscript):      # d["k"] = tainted: the container now holds it
            name = dotted_name(target.value)
            keys = [el.slice.value if isinstance(el.slice, cst.Index) else el.slice for el in target.slice]
            key = literal_value(keys[0]) if len(keys) == 1 and not isinstance(keys[0], cst.Slice) else None
            held = env.get(name) if name is not None else None
            if isinstance(key, str) and name is not None and (held is None or held.keys is not None):
                # a literal key: the mapping varies at its varying keys only (`Origin.keys`); storing a uniform
                # value there takes the key out
                rest = held.keys - {key} if held is not None else frozenset()
                if origin is not None:
                    base = held if held is not None else \
                        replace(origin, kind="item" if origin.kind in TRIP_COUNT_KINDS else origin.kind)
                    env[name] = replace(base, batch=True, keys=rest | {key})
                    env[name + "[]"] = join(env.get(name + "[]"), origin)     # what the varying keys hold
                elif held is not None:
                    if rest:
                        env[name] = replace(held, keys=rest)
                    else:
                        del env[name]
                return
            if origin is None:
                return
            if name is not None and not any(isinstance(k, cst.Slice) or self.eval(k, env, cls) for k in keys):
                # stored at a uniform key: the container's keys and length stay the same on every rank (a loop
                # over `data` after `data[k] = chunk[cp_rank]` runs alike); its items are what was stored
                env[name + "[]"] = join(env.get(name + "[]"), origin)
                if name in env and env[name].keys is not None:
                    # a mapping varying at some literal keys, now also at one that is no literal: at any key
                    env[name] = replace(env[name], keys=None)
                if name not in env:
                    # the container as a whole: its keys (`"k" in data`), None-ness and truth are uniform, like a
                    # collated batch's (`Origin.batch`)
                    # (stored at a key that is no literal: which keys vary is not known, `keys=None`)
                    env[name] = replace(origin, kind="item" if origin.kind in TRIP_COUNT_KINDS else origin.kind,
                                        batch=True, keys=None)
                return
            # stored at a varying key: the container varies as a whole (whatever keys the value itself came with)
            self.bind(target.value, None, replace(origin, keys=None) if origin.keys is not None else origin, env, cls)
            return
        name = dotted_name(target)
        if name is None:
            return
        if origin is not None and isinstance(value, (cst.Tuple, cst.List)) and not any(
                isinstance(el, cst.StarredElement) for el in value.elements):
            origin = replace(origin, elements=tuple(self.eval(el.value, env, cls) for el in value.elements))
        if origin is not None and origin.present and value is not None and \
                not isinstance(value, (cst.IfExp, cst.Name)) and not self._element_read(value, env, cls):
            # computed from such a value: None or not, its own affair (an element read as it is -- `item =
            # out[0]` of a display, an unpacked element, `value` None -- is the element itself)
            origin = replace(origin, present=False)
        if origin is not None and origin.items is not None and not isinstance(value, (cst.IfExp, cst.Name)):
            origin = replace(origin, items=None)        # what a call makes of such an object iterates its own way
        if origin is not None and origin.rendered and not (isinstance(value, cst.Name) or _renders(value)):
            origin = replace(origin, rendered=False)    # computed from a rank's name: no longer that name
        if origin is not None and origin.truth and not _truth_kept(value):
            origin = replace(origin, truth=False)       # its truth is that expression's own (`Origin.truth`)
        if origin is not None and (value is not None or origin.affine is not None):
            form = affine_form(value, env, self.eval, cls) \
                if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation, cst.Name)) else None
            if form is not origin.affine:
                origin = replace(origin, affine=form)
        held = self._sampler_rank(value, env, cls) if value is not None and self._sampler_call(value) else None
        env.pop(name + WRITTEN, None)
        for key in [k for k in env if k.endswith(WRITTEN) and k.startswith(name + ".")]:
            del env[key]                # another object (or value) at the path: no collective wrote this one
        if value is not None:
            # bound to a new value (`results = {}` after the gather): what was stored in the old one is gone
            env.pop(name + "[]", None)
        if origin is None:
            env.pop(name, None)
            fields = self.object_fields(value, env, cls) if isinstance(value, cst.Call) else None
            for key in [k for k in env if k.startswith(name + ".")]:
                del env[key]            # a new object: its fields are its own
            for k, o in (fields or {}).items():
                env[f"{name}.{k}"] = o
        else:
            env[name] = origin
        env.pop(name + _SAMPLER_RANK, None)
        if held is not None:
            env[name + _SAMPLER_RANK] = held     # what `DataLoader(ds, sampler=name)` draws by

    def bound_collective(self, func: cst.Attribute) -> bool:
        """`self.gather_function(x)` where every store to `self.gather_function` in this file binds a gathering or
        reducing collective whose result is the same on every rank (`self.accelerator.gather_for_metrics`, a
        `torch.distributed` one) or `functools.partial` of one or of the attribute itself (`partial(
        self.gather_function, use_gather_object=...)`): calling the attribute calls that collective, so its
        result is uniform as the collective's is. A store of anything else (or none in this file) says nothing."""
        if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        key = "self." + func.attr.value
        memo = self.__dict__.setdefault("_bound_collectives", {})
        if key not in memo:
            memo[key] = False           # assumed while its stores are looked at
            stores = [(fn, node.value) for fn in self.facts.functions.values() for node in iter_assigns(fn.node.body)
                      for t in node.targets if dotted_name(t.target) == key]
            memo[key] = bool(stores) and all(self._collective_reference(v, fn.class_name, key) for fn, v in stores)
        return memo[key]

    def _collective_reference(self, v: cst.BaseExpression, cls: Optional[str], key: str) -> bool:
        """Is `v` a reference to (not a call of) a uniformizing collective, or a partial application of one?"""
        if isinstance(v, cst.Call) and v.args and v.args[0].keyword is None and not v.args[0].star and \
                (self.facts.resolve_expr(v.func) or "") in ("functools.partial", "partial"):
            v = v.args[0].value
            if dotted_name(v) == key:
                return True             # a partial of the attribute's earlier value
        if not isinstance(v, cst.Attribute) or v.attr.value not in UNIFORMIZING:
            return False
        callee = self.facts.resolve_expr(v) or ""
        return callee.startswith(_COLLECTIVE_MODULES) or accelerate_typing(self.analysis, self.src).is_state(v.value, cls)

    def uniformize(self, call: cst.Call, env: Env, cls: Optional[str] = None,
                   loops: tuple = (), domain_of=None) -> Optional[str]:
        """`dist.all_reduce(t)` / `broadcast_object_list(objs, src=0)`: the first argument is written in place by
        the collective, so it is uniform now (its name returned) -- as a whole and in its items (`buf[0].item()`,
        unpacking it), whatever was stored into it before (`buf[0] = best` on the source rank). Uniform over the
        collective's group: one over a group of known grid axes (`group=mpu.get_model_parallel_group()`) leaves
        the value varying in the other axes the run's grid holds (`process_groups.remaining_axes`); over WORLD, a group dslint cannot
        name or one the code is handed, the same on every rank. `domain_of(subject)`: the values a validated
        setting (`self.env_type`) may hold where the collective runs; a value whose origin says how its axes
        follow that setting (`Origin.by_setting`: a loader drawn by the data-parallel rank under "deepspeed+mpu")
        has the axes of those values only."""
        callee = self.facts.resolve_expr(call.func) or ""
        last = _last(callee, call.func)
        if last in UNIFORMIZING and call.args and (
                callee.startswith(_COLLECTIVE_MODULES) or isinstance(call.func, cst.Attribute)
                and accelerate_typing(self.analysis, self.src).is_state(call.func.value, cls)):
            name = dotted_name(call.args[0].value)
            if name is None:
                keyed = _keyed_in_loop(call.args[0].value, loops)
                if keyed is not None:
                    # the key walked: every rank reduces the item at it in the same pass, so the keys are alike
                    name, key = keyed
                    env.pop(key, None)
                elif (item := _literal_item(call.args[0].value)) is not None:
                    self._uniformize_item(call, last, callee, env, domain_of, *item)
                    return None
            if name:
                names = [name]
                if name.endswith(".data"):
                    # `all_reduce(t.data)`: a tensor's `.data` shares its storage, so `t` itself holds the result
                    names.append(name[: -len(".data")])
                group = resolve_group(self.src, group_argument(call, last), None, at=call) \
                    if callee.startswith(_COLLECTIVE_MODULES[:2]) else WORLD
                for n in names:
                    held = join(env.pop(n, None), env.pop(n + "[]", None))
                    if "." in n and n + WRITTEN not in env:
                        # an attribute path (`rt.tensor` of an object built from this rank's device): without a
                        # mark it would read as its base object again; what it held is what the base gave it
                        if held is None and n == name:
                            held = self.eval(call.args[0].value, env, cls)
                        mark_written(env, n)
                    if held is not None and group.axes is not None:
                        # uniform over the group's members only: it still varies in the coordinates they share
                        axes = _axes_under(held, domain_of)
                        rest = remaining_axes((axes if axes is not None else ALL_AXES) - group.axes,
                                              getattr(self.analysis, "project", None))
                        if rest:
                            env[n] = replace(held, axes=frozenset(rest), keys=None, elements=None, present=False,
                                             by_setting=None)
                return names[-1] if len(names) > 1 else name
        return None


    def _uniformize_item(self, call: cst.Call, last: Optional[str], callee: str, env: Env, domain_of,
                         container: str, key: str) -> None:
        """`dist.all_reduce(stats["loss"])` of a mapping varying at some literal keys only (`Origin.keys`): the
        collective writes that item in place, so the mapping no longer varies at that key -- where the
        collective leaves nothing varying (over WORLD, or a group whose axes cover what the mapping varies by:
        `process_groups.remaining_axes`); once no key is left the mapping is the same on every rank. A mapping
        varying at unknown keys, or a reduction leaving some axes, is left as it is (its items' axes are not
        kept per key)."""
        held = env.get(container)
        if held is None or held.keys is None or key not in held.keys or container + "[]" in env:
            return
        group = resolve_group(self.src, group_argument(call, last), None, at=call) \
            if callee.startswith(_COLLECTIVE_MODULES[:2]) else WORLD
        if group.axes is not None:
            axes = _axes_under(held, domain_of)
            if remaining_axes((axes if axes is not None else ALL_AXES) - group.axes,
                              getattr(self.analysis, "project", None)):
                return
        left = held.keys - {key}
        if left:
            env[container] = replace(held, keys=frozenset(left))
        else:
            env.pop(container, None)


def _literal_item(arg: cst.BaseExpression) -> Optional[tuple[str, str]]:
    """`stats["loss"]` (or its `.data`) of a dotted name at a literal string key: (the name, the key)."""
    if isinstance(arg, cst.Attribute) and arg.attr.value == "data":
        arg = arg.value
    if not isinstance(arg, cst.Subscript) or len(arg.slice) != 1 or not isinstance(arg.slice[0].slice, cst.Index):
        return None
    container, key = dotted_name(arg.value), literal_value(arg.slice[0].slice.value)
    return (container, key) if container is not None and isinstance(key, str) else None


# library helpers that broadcast their data argument from the first rank of a model-parallel group to the group
# (Megatron's and SwissArmyTransformer's `mpu.broadcast_data`, Megatron-core's `tensor_parallel.broadcast_data`):
# module part of the resolved callee → the axes of the group (`process_groups.GROUP_GETTERS`)
_LIBRARY_BROADCASTS = {"broadcast_data": (("tensor_parallel", "get_tensor_model_parallel_group"),
                                          ("mpu", "get_model_parallel_group"))}


def _library_broadcast(callee: Optional[str], last: Optional[str]) -> Optional[frozenset]:
    """The axes of the group a library broadcast helper (`_LIBRARY_BROADCASTS`) sends over, for a call resolved
    to one (by its module path: the API, whether vendored in the checked files or installed); None for any other
    call."""
    from dslint.program.process_groups import GROUP_GETTERS
    if not callee or "." not in callee:
        return None
    parts = callee.split(".")[:-1]
    for module, getter in _LIBRARY_BROADCASTS.get(last or "", ()):
        if module in parts:
            return GROUP_GETTERS[getter][0]
    return None


def _axes_under(origin: Origin, domain_of) -> Optional[frozenset]:
    """The axes of `origin` where its setting may hold only the values `domain_of` gives (`Origin.by_setting`):
    the union of its axes under those values; its own axes when the setting is not narrowed there or a value
    is not in its table."""
    if origin.by_setting is None or domain_of is None:
        return origin.axes
    subject, table = origin.by_setting
    domain = domain_of(subject)
    known = dict(table)
    if not domain or any(v not in known for v in domain):
        return origin.axes
    parts = [known[v] for v in domain]
    if any(p is None for p in parts):
        return None
    return frozenset().union(*parts)


def _keyed_in_loop(arg: cst.BaseExpression, loops: tuple) -> Optional[tuple[str, str]]:
    """`all_reduce(metrics[name].data)` inside `for name in metrics:` (or `metrics.keys()`): each pass reduces
    the item of the key it is at, so once the loop is through every item of the container is the same on every
    rank, and the item just reduced is already ((the container's name, the key's) returned: it is uniform from
    here on).
    Another subscript (a key the loop does not walk) says nothing about the other items: None."""
    if isinstance(arg, cst.Attribute) and arg.attr.value == "data":
        arg = arg.value
    if not isinstance(arg, cst.Subscript) or len(arg.slice) != 1 or not isinstance(arg.slice[0].slice, cst.Index):
        return None
    container, key = dotted_name(arg.value), arg.slice[0].slice.value
    if container is None or not isinstance(key, cst.Name):
        return None
    for loop in loops:
        if not isinstance(loop, cst.For) or not isinstance(loop.target, cst.Name) or loop.target.value != key.value:
            continue
        over = loop.iter
        if isinstance(over, cst.Call) and isinstance(over.func, cst.Attribute) and over.func.attr.value == "keys" \
                and not over.args:
            over = over.func.value
        if dotted_name(over) == container:
            return container, key.value
    return None


_AFFINE_TERMS = 8        # larger sums are not followed


def affine_form(e: Optional[cst.BaseExpression], env: Env, evaluate, cls: Optional[str] = None
                ) -> Optional[frozenset]:
    """`e` as a polynomial over the values it is computed from: a frozenset of (monomial, coefficient), a
    monomial a sorted tuple of factors. A name bound to such a sum stands for it (its `Origin.affine`); any
    other operand is a factor: ("u", its code) when it is uniform, ("v", its origin) when it varies (the origin
    object, by identity: a name read twice in one scope is one factor, two computations are two). None when
    `e` is not made of integers, factors, `+`, `-` and `*`, or the sum grows past `_AFFINE_TERMS` terms."""
    form = _poly(e, env, evaluate, cls, 0)
    return frozenset(form.items()) if form is not None else None


def _poly(e, env: Env, evaluate, cls, depth: int) -> Optional[dict]:
    if e is None or depth > 12:
        return None
    if isinstance(e, cst.Integer):
        value = literal_value(e)
        return {(): value} if isinstance(value, int) and value else {}
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
        inner = _poly(e.expression, env, evaluate, cls, depth + 1)
        return {m: -c for m, c in inner.items()} if inner is not None else None
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        left = _poly(e.left, env, evaluate, cls, depth + 1)
        right = _poly(e.right, env, evaluate, cls, depth + 1)
        if left is None or right is None:
            return None
        out: dict = {}
        if isinstance(e.operator, cst.Multiply):
            for ml, cl in left.items():
                for mr, cr in right.items():
                    m = tuple(sorted(ml + mr, key=_factor_order))
                    out[m] = out.get(m, 0) + cl * cr
        else:
            sign = -1 if isinstance(e.operator, cst.Subtract) else 1
            out = dict(left)
            for m, c in right.items():
                out[m] = out.get(m, 0) + sign * c
        out = {m: c for m, c in out.items() if c}
        return out if len(out) <= _AFFINE_TERMS else None
    origin = evaluate(e, env, cls)
    if origin is None:
        return {(("u", code_of(e, 200)),): 1}
    if isinstance(e, cst.Name) and origin.affine is not None:
        return dict(origin.affine)
    if isinstance(e, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        return {(("v", origin),): 1}       # the origin object itself: one factor per binding it comes from
    return None


def _factor_order(factor: tuple) -> tuple:
    kind, what = factor
    return (kind, what if kind == "u" else str(id(what)))


def uniform_difference(start: cst.BaseExpression, stop: cst.BaseExpression, env: Env, evaluate,
                       cls: Optional[str] = None) -> bool:
    """Is `stop - start` made of uniform values only (`(rank + 1) * size - rank * size` = `size`)?"""
    a = affine_form(start, env, evaluate, cls)
    b = affine_form(stop, env, evaluate, cls)
    if a is None or b is None:
        return False
    diff = dict(b)
    for m, c in a:
        diff[m] = diff.get(m, 0) - c
    return all(not c or all(kind == "u" for kind, _ in m) for m, c in diff.items())


def _assignments(block) -> Iterable[cst.Assign]:
    return iter_assigns(block)


def _walk_names(node) -> Iterable[cst.Name]:
    from dslint.sources.cstwalk import walk
    return (n for n in walk(node) if isinstance(n, cst.Name))


def _other_binding_targets(module) -> Iterable[cst.BaseExpression]:
    """The targets a module binds other than by `=`: `for` targets, `with ... as`, augmented and annotated
    assignments, walrus."""
    from dslint.sources.cstwalk import walk
    for n in walk(module):
        if isinstance(n, cst.For):
            yield from (t for t in walk(n.target) if isinstance(t, (cst.Name, cst.Attribute)))
        elif isinstance(n, cst.AsName):
            yield n.name
        elif isinstance(n, (cst.AugAssign, cst.NamedExpr)):
            yield n.target
        elif isinstance(n, cst.AnnAssign):
            yield n.target


def _body(body) -> list:
    return list(body.body) if isinstance(body, cst.IndentedBlock) else [body]


def _blocks(stmt) -> Iterable[list]:
    """The statement lists of a top-level `if`/`try`/`with` (its branches, handlers, else and finally)."""
    if isinstance(stmt, cst.If):
        yield _body(stmt.body)
        if stmt.orelse is not None:
            yield from _blocks(stmt.orelse) if isinstance(stmt.orelse, cst.If) else [_body(stmt.orelse.body)]
    elif isinstance(stmt, cst.Try):
        yield _body(stmt.body)
        for h in stmt.handlers:
            yield _body(h.body)
        for part in (stmt.orelse, stmt.finalbody):
            if part is not None:
                yield _body(part.body)
    elif isinstance(stmt, cst.With):
        yield _body(stmt.body)


def _comp_fors(node: Optional[cst.CompFor]) -> list[cst.CompFor]:
    out = []
    while node is not None:
        out.append(node)
        node = node.inner_for_in
    return out




def _mapping_view_targets(comp: cst.CompFor) -> tuple[Optional[cst.Name], Optional[cst.BaseExpression]]:
    """(key name, value target) of `for k, v in m.items()` / (key name, None) of `for k in m.keys()`: the names a
    comprehension binds to a mapping's keys (and values) through its views; (None, None) otherwise."""
    it, target = comp.iter, comp.target
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args):
        return None, None
    view = it.func.attr.value
    if view == "keys" and isinstance(target, cst.Name):
        return target, None
    if view == "items" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2 and \
            isinstance(target.elements[0].value, cst.Name) and not isinstance(target.elements[0], cst.StarredElement):
        return target.elements[0].value, target.elements[1].value
    return None, None


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names a `for` target binds (`k, (a, b)`, `*rest`)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _target_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []

