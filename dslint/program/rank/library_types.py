"""Objects of known libraries typed by use, and the parameters of their calls that only word the display.

A Hugging Face `datasets` object is what `datasets.load_dataset(...)` (any function of the `datasets` module)
returns, what a checked function returns when all its returns are such objects, a split of one
(`raw["train"]`) and what its dataset-returning methods (`map`, `filter`, `select`, `shuffle`, ...) return.
A name is such an object when every binding of it in its file is (or `None`: no method runs on it).

`Dataset.map` / `Dataset.filter` (and `DatasetDict`'s) take `desc`, the label of the progress bar they show:
it never reaches the returned dataset. A rank-varying label (`desc="Tokenizing" if is_main else None`)
therefore leaves the result as uniform as the data and the function (`values.RankTaint._call`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.facts import MODULE_SCOPE, dotted_name
from dslint.program.statement_walks import iter_assigns, iter_returns, sub_statements
from dslint.sources.cstwalk import children
from dslint.sources.literals import literal_value

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

# the `datasets` API: methods of Dataset / DatasetDict / IterableDataset that return a dataset of the same kind
_DATASET_METHODS = {"map", "filter", "select", "shuffle", "train_test_split", "remove_columns", "rename_column",
                    "rename_columns", "sort", "flatten", "with_format", "cast", "cast_column", "add_column",
                    "select_columns", "skip", "take", "shard", "flatten_indices", "class_encode_column"}
# parameters of those methods that only label the progress bar (the `datasets` signatures of map/filter)
DISPLAY_PARAMS = {"map": frozenset({"desc"}), "filter": frozenset({"desc"})}


class DatasetTyping:
    """Which expressions of one file are `datasets` objects (memoised per name)."""

    def __init__(self, project: "ProjectView", src: "PythonSource") -> None:
        self.project = project
        self.src = src
        self._names: dict[str, bool] = {}
        self._functions: dict[tuple[int, str], bool] = {}

    def is_dataset(self, e: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if isinstance(e, cst.Name):
            return self._name(e.value, depth)
        if isinstance(e, cst.Subscript):
            keys = [el.slice.value for el in e.slice if isinstance(el.slice, cst.Index)]
            return len(keys) == 1 and isinstance(keys[0], (cst.SimpleString, cst.FormattedString)) and \
                self.is_dataset(e.value, depth + 1)
        if isinstance(e, cst.Call):
            callee = self.src.facts.resolve_expr(e.func) or ""
            if callee == "datasets" or callee.startswith("datasets."):
                return True
            if isinstance(e.func, cst.Attribute) and e.func.attr.value in _DATASET_METHODS and \
                    self.is_dataset(e.func.value, depth + 1):
                return True
            return self._returns_dataset(callee, depth)
        return False

    def _name(self, name: str, depth: int) -> bool:
        if name in self._names:
            return self._names[name]
        # assumed while its bindings are looked at (`ds = ds.select(...)`, `tok = ds.map(...); ds = tok.filter(...)`:
        # a cycle of dataset methods is a dataset when its entries are); undone with what was derived from it
        before = set(self._names)
        self._names[name] = True
        values = [node.value for node in self._assigns for t in node.targets
                  if isinstance(t.target, cst.Name) and t.target.value == name]
        found = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
        ok = bool(found) and all(self.is_dataset(v, depth + 1) for v in found)
        if not ok:
            for other in set(self._names) - before:
                del self._names[other]
        self._names[name] = ok
        return ok

    @property
    def _assigns(self) -> list[cst.Assign]:
        if "_assign_list" not in self.__dict__:
            self.__dict__["_assign_list"] = list(iter_assigns(self.src.module))
        return self.__dict__["_assign_list"]

    def _returns_dataset(self, callee: str, depth: int) -> bool:
        hit = self.project.function_for_callee(self.src, callee) if callee else None
        if hit is None:
            return False
        where, qual = hit
        key = (id(where), qual)
        if key in self._functions:
            return self._functions[key]
        self._functions[key] = False
        info = where.facts.functions.get(qual)
        if info is None:
            return False
        other = self if where is self.src else DatasetTyping(self.project, where)
        returns = [r.value for r in iter_returns(info.node.body) if r.value is not None]
        self._functions[key] = bool(returns) and all(other.is_dataset(v, depth + 1) for v in returns)
        return self._functions[key]


# library calls whose listed keyword arguments only fetch the files the result is read from, or only say on which
# device its tensors are put, never change what it holds: the torchvision datasets' `download` ("If True, downloads
# the dataset from the internet and puts it in root directory. If dataset is already downloaded, it is not
# downloaded again."), `torch.load`'s `map_location` ("a function, torch.device, string or a dict specifying how to
# remap storage locations"), safetensors' `device` ("The device where the tensors need to be located after load")
_FETCH_ONLY = (("torchvision.datasets.", frozenset({"download"})),
               ("torch.load", frozenset({"map_location"})), ("torch.jit.load", frozenset({"map_location"})),
               ("safetensors.torch.load_file", frozenset({"device"})))


def fetch_only(callee: Optional[str], keyword: str) -> bool:
    """Is `keyword` an argument of the library call `callee` (resolved) that only fetches files (`download=` of a
    torchvision dataset) or only places the result on a device (`map_location=` of `torch.load`): the object built
    holds the same whatever it is?"""
    return bool(callee) and any((callee == prefix or prefix.endswith(".") and callee.startswith(prefix))
                                and keyword in words for prefix, words in _FETCH_ONLY)


def display_only(typing: Optional[DatasetTyping], call: cst.Call, arg: cst.Arg) -> bool:
    """Is `arg` a parameter of a known library call that only words its display (`desc=` of `Dataset.map`)?"""
    if typing is None or arg.keyword is None or not isinstance(call.func, cst.Attribute):
        return False
    params = DISPLAY_PARAMS.get(call.func.attr.value)
    return params is not None and arg.keyword.value in params and typing.is_dataset(call.func.value)


# library constructors with an argument that only says which process serves the object: torch's key-value store
# (`TCPStore(host_name, port, world_size, is_master, timeout)`: "is_master: True when initializing the server
# store"), one store whose keys every process reads and writes alike -- (position, keyword) per qualified name
_SERVER_ROLE = {"torch.distributed.TCPStore": (3, "is_master"), "torch.distributed.distributed_c10d.TCPStore":
                (3, "is_master")}


def server_role(callee: Optional[str], call: cst.Call, arg: cst.Arg) -> bool:
    """Is `arg` the argument of a library constructor that only chooses the process hosting the shared object
    (`is_master` of `TCPStore`): the object built is the one store of every rank?"""
    role = _SERVER_ROLE.get(callee or "")
    if role is None or arg.star:
        return False
    at, keyword = role
    if arg.keyword is not None:
        return arg.keyword.value == keyword
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return len(positional) > at and positional[at] is arg

# torch's tracers, with the arguments that are only example data run through the module while recording it
# (position of the positional one, keywords): "example_inputs: a tuple of example inputs that will be passed to
# the function while tracing" -- the traced module holds the module's parameters, buffers, attributes and
# submodules, whichever rank's samples drove the recording
_TRACE_EXAMPLES = {"torch.jit.trace": (1, frozenset({"example_inputs", "example_kwarg_inputs", "check_inputs"})),
                   "torch.jit._trace.trace": (1, frozenset({"example_inputs", "example_kwarg_inputs",
                                                            "check_inputs"})),
                   "torch.jit.trace_module": (1, frozenset({"inputs", "check_inputs", "example_inputs_is_kwarg"})),
                   "torch.jit._trace.trace_module": (1, frozenset({"inputs", "check_inputs"}))}


def trace_example(callee: Optional[str], call: cst.Call, arg: cst.Arg) -> bool:
    """Is `arg` the example data of a torch tracer call (`torch.jit.trace(model, example_kwarg_inputs=batch)`):
    data the tracer only runs the module on, which does not reach the traced module it returns?"""
    known = _TRACE_EXAMPLES.get(callee or "")
    if known is None or arg.star:
        return False
    at, keywords = known
    if arg.keyword is not None:
        return arg.keyword.value in keywords
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return len(positional) > at and positional[at] is arg


# what a torch tensor IS rather than what it holds (`torch.Tensor`'s attributes and argument-free methods): how it is
# stored and where -- its dtype, its layout, whether it lives on a GPU (`is_cuda`; the type of its device,
# `x.device.type`, never the device itself: `cuda:0` vs `cuda:1`), whether it requires a gradient. Each process's
# batches sit on its device in the dtype and layout its collator and model give them, whatever they hold: a test
# of these reads no data. (Not the number of dimensions, `ndim`/`dim()`: a batch of videos has one more than a
# batch of images -- the rank lattice takes those too, value_uniformity._TYPE_ATTRS, since ranks' shards differ
# in values and sizes only.)
TENSOR_PLACEMENT_ATTRS = frozenset({"dtype", "requires_grad", "is_cuda", "layout", "is_sparse", "is_floating_point"})
TENSOR_PLACEMENT_METHODS = frozenset({"is_floating_point", "is_complex", "element_size"})


def tensor_placement(node: cst.BaseExpression) -> bool:
    """Is `node` a read of a tensor's placement (`x.is_cuda`, `x.dtype`, `x.device.type`, `x.is_floating_point()`),
    `TENSOR_PLACEMENT_ATTRS`?"""
    if isinstance(node, cst.Call):
        return isinstance(node.func, cst.Attribute) and not node.args and \
            node.func.attr.value in TENSOR_PLACEMENT_METHODS
    if not isinstance(node, cst.Attribute):
        return False
    return node.attr.value in TENSOR_PLACEMENT_ATTRS or node.attr.value == "type" and \
        isinstance(node.value, cst.Attribute) and node.value.attr.value == "device"


# `torch.nn.Module`'s own methods that never run the module's `forward` (only `__call__` and `forward` do): they walk,
# move, cast, freeze, initialise (`apply(fn)` calls `fn` on each sub-module), hook or (de)serialise its parameters.
# `self.head.apply(init)` beside `self.head(q, k)` hands the module no input.
MODULE_METHODS_WITHOUT_FORWARD = frozenset({
    "apply", "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "train", "eval", "requires_grad_", "zero_grad", "to", "to_empty", "cuda", "cpu", "xpu", "half",
    "float", "double", "bfloat16", "type", "state_dict", "load_state_dict", "register_buffer", "register_parameter",
    "register_module", "add_module", "register_forward_hook", "register_forward_pre_hook", "register_backward_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook", "get_submodule", "get_parameter", "get_buffer",
    "extra_repr", "share_memory"})


# library callables whose iteration yields exactly the items of the iterable they are handed, in its order, and
# nothing else (their other arguments -- `desc`, `total`, `disable`, `position` -- only word or place the display):
# tqdm's progress bars (`tqdm.__iter__` yields from `self.iterable`, whatever the bar shows), rich's `track`, and the
# builtins `iter`, `list`, `tuple`. Resolved through the file's imports; a builtin only when the file does not bind
# the name itself. (Not `enumerate`/`zip`, whose items are tuples, nor `sorted`/`reversed`, which reorder them.)
_ITEM_PRESERVING = frozenset({"tqdm.tqdm", "tqdm.std.tqdm", "tqdm.auto.tqdm", "tqdm.autonotebook.tqdm",
                              "tqdm.notebook.tqdm", "tqdm.rich.tqdm", "tqdm.gui.tqdm", "tqdm.tk.tqdm",
                              "rich.progress.track"})
_ITEM_PRESERVING_BUILTINS = frozenset({"iter", "list", "tuple"})
# the parameter name of the iterable, where it may be passed by keyword
_ITERABLE_KEYWORDS = frozenset({"iterable", "sequence"})


def item_preserving_arg(src: "PythonSource", call: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The iterable a call of an item-preserving wrapper is handed (`tqdm(progress, desc=...)` → `progress`): the
    wrapper's iteration yields that iterable's items, in order. None when `call` is no such call."""
    if not isinstance(call, cst.Call):
        return None
    facts = src.facts
    callee = facts.resolve_expr(call.func)
    if callee not in _ITEM_PRESERVING:
        if not (isinstance(call.func, cst.Name) and call.func.value in _ITEM_PRESERVING_BUILTINS
                and call.func.value not in facts.imports and call.func.value not in facts.functions
                and call.func.value not in facts.classes):
            return None
    first = next((a for a in call.args if not a.star and (a.keyword is None or a.keyword.value in _ITERABLE_KEYWORDS)),
                 None)
    if first is None or any(a.star for a in call.args):
        return None
    return first.value


def item_source(src: "PythonSource", e: cst.BaseExpression) -> cst.BaseExpression:
    """`e` without the item-preserving wrappers around it (`tqdm(iter(xs))` → `xs`)."""
    for _ in range(8):
        inner = item_preserving_arg(src, e)
        if inner is None:
            return e
        e = inner
    return e


def _numbering(src: "PythonSource", e: cst.BaseExpression) -> Optional[cst.Call]:
    """`e` when it is a call of the builtin `enumerate` (the file binds no such name itself) on one positional
    iterable: its items are that iterable's, numbered."""
    facts = src.facts
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value == "enumerate" and \
            "enumerate" not in facts.imports and "enumerate" not in facts.functions and \
            "enumerate" not in facts.classes and e.args and e.args[0].keyword is None and \
            not any(a.star for a in e.args):
        return e
    return None


# tqdm's `trange(*args, **kwargs)`: `tqdm(range(*args), **kwargs)` (its positional arguments are range's, its
# keywords the bar's)
_TRANGE = frozenset({"tqdm.trange", "tqdm.std.trange", "tqdm.auto.trange", "tqdm.autonotebook.trange",
                     "tqdm.notebook.trange", "tqdm.rich.trange", "tqdm.gui.trange", "tqdm.tk.trange"})


def _trange_as_range(src: "PythonSource", e: cst.BaseExpression) -> Optional[cst.Call]:
    """`trange(a, b, desc=...)` written as the `range(a, b)` it iterates; None for any other expression."""
    if not isinstance(e, cst.Call) or src.facts.resolve_expr(e.func) not in _TRANGE or \
            any(a.star for a in e.args):
        return None
    positional = [a for a in e.args if a.keyword is None]
    if not 1 <= len(positional) <= 3:
        return None
    return cst.Call(func=cst.Name("range"), args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                                  for a in positional])


def items_key(src: "PythonSource", e: cst.BaseExpression) -> Optional[str]:
    """What iterating `e` yields, as a canonical text: `e` without its item-preserving wrappers, also those
    around the iterable `enumerate` numbers (`tqdm(enumerate(xs), total=n)`, `enumerate(tqdm(xs))` and
    `enumerate(xs)` all key as `enumerate(xs)`), written as Python's syntax tree (whitespace, comments and
    parentheses aside; tqdm's `trange(n)` as `range(n)`). Two expressions of one key evaluated at one program
    point iterate the same items; None when the text does not parse alone."""
    e = item_source(src, e)
    e = _trange_as_range(src, e) or e
    numbered = _numbering(src, e)
    if numbered is not None:
        inner = item_source(src, numbered.args[0].value)
        e = numbered.with_changes(args=[numbered.args[0].with_changes(value=inner), *numbered.args[1:]])
    try:
        text = cst.Module(body=[]).code_for_node(e)
        return ast.dump(ast.parse("(" + text + "\n)", mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return None


def same_items(src: "PythonSource", sides: list) -> Optional[cst.BaseExpression]:
    """The iterable every one of `sides` walks -- each side that iterable or an item-preserving wrapper of it
    (`tqdm(enumerate(loader), total=n) if is_main else enumerate(loader)`, `tqdm(range(n)) if is_main else
    range(n)`: one key, `items_key`) -- written without wrappers, as on the least wrapped side; None when the
    sides iterate different expressions (`tqdm(loader_a) if is_main else loader_b`). Evaluated where the sides
    are, such a choice selects only the display: which side a rank takes, it iterates what that expression is
    there (whether that varies across ranks is the expression's own affair)."""
    keys = [items_key(src, side) for side in sides]
    if not sides or keys[0] is None or any(k != keys[0] for k in keys):
        return None
    bare = [item_source(src, side) for side in sides]
    plain = [b for b in bare if _trange_as_range(src, b) is None] or bare
    return min(plain, key=lambda b: len(cst.Module(body=[]).code_for_node(b)))


def _builtin(src: "PythonSource", e: cst.BaseExpression, name: str) -> bool:
    facts = src.facts
    return isinstance(e, cst.Name) and e.value == name and name not in facts.imports and \
        name not in facts.functions and name not in facts.classes


def _counted_range(src: "PythonSource", e: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`range(len(xs))` (under item-preserving wrappers, `trange(len(xs))` too): `xs`; None otherwise."""
    e = item_source(src, e)
    e = _trange_as_range(src, e) or e
    if not (isinstance(e, cst.Call) and _builtin(src, e.func, "range") and len(e.args) == 1):
        return None
    arg = e.args[0]
    if arg.keyword is not None or arg.star or not isinstance(arg.value, cst.Call):
        return None
    inner = arg.value
    if not (_builtin(src, inner.func, "len") and len(inner.args) == 1 and inner.args[0].keyword is None
            and not inner.args[0].star):
        return None
    return inner.args[0].value


def same_count(src: "PythonSource", sides: list) -> Optional[cst.BaseExpression]:
    """The sized iterable whose passes every one of two `sides` makes, when one side walks it (itself, `iter` or
    an item-preserving wrapper of it, `enumerate` of it) and the other counts them off (`range(len(xs))`):
    `iter(loader) if is_leader else range(len(loader))` -- the leader takes the batches, the others a dummy
    index "to keep step counts aligned"; Python's `len` of a sized container is the number of items its
    iteration yields (a map-style DataLoader's, of its batches). Items differ, passes do not. None otherwise."""
    if len(sides) != 2:
        return None
    for walked, counted in (sides, sides[::-1]):
        xs = _counted_range(src, counted)
        if xs is None or _counted_range(src, walked) is not None:
            continue
        bare = item_source(src, walked)
        numbered = _numbering(src, bare)
        if numbered is not None:
            bare = item_source(src, numbered.args[0].value)
        key = items_key(src, xs)
        if key is not None and items_key(src, bare) == key:
            return xs
    return None


# accelerate's process-state objects: `Accelerator`, `PartialState`, `AcceleratorState` (their `gather`,
# `gather_for_metrics`, `reduce`, `pad_across_processes` are collectives whose result every process shares)
_ACCELERATE_STATES = {"Accelerator", "PartialState", "AcceleratorState"}

# methods of accelerate's `Accelerator` that no torch module, DeepSpeed engine or HF Trainer has (accelerator.py):
# an object they are called on, of a field the checked files do not type, is an Accelerator (typed by use)
_ACCELERATOR_METHODS = frozenset({"unwrap_model", "get_state_dict", "wait_for_everyone", "gather_for_metrics",
                                  "main_process_first", "local_main_process_first", "split_between_processes",
                                  "prepare_model", "prepare_data_loader", "register_for_checkpointing"})

# The documented rank properties of typed library objects, keyed by the class (API meaning, not a guess from an
# attribute's spelling): what `RankTaint._attribute` reads as a rank id when the receiver is typed so.
#   accelerate `PartialState` / `AcceleratorState` / `Accelerator` (accelerate/state.py, accelerator.py)
ACCELERATE_RANK_PROPERTIES = frozenset({"process_index", "local_process_index", "is_main_process",
                                        "is_local_main_process", "is_last_process"})
#   transformers `TrainingArguments` (training_args.py: `local_rank` is the field the launcher's `--local_rank`
#   fills; `process_index`, `local_process_index`, `should_save`, `should_log` are properties of the process)
TRAINING_ARGS_RANK_PROPERTIES = frozenset({"local_rank", "process_index", "local_process_index", "should_save",
                                           "should_log"})
#   a DeepSpeed engine (`DeepSpeedEngine.__init__` sets `self.global_rank = dist.get_rank()` and `local_rank`)
ENGINE_RANK_PROPERTIES = frozenset({"global_rank", "local_rank"})
_ENGINE_BUILDERS = ("deepspeed.initialize", "deepspeed.init_inference")
#   a Lightning `Trainer` (pytorch_lightning / lightning trainer.py: `global_rank`, `local_rank`, `node_rank`,
#   `is_global_zero` are properties of the strategy's process)
LIGHTNING_RANK_PROPERTIES = frozenset({"global_rank", "local_rank", "node_rank", "is_global_zero"})
# Lightning's Trainer class, by its resolved import paths, and its classmethod constructors
_LIGHTNING_TRAINERS = frozenset({"pytorch_lightning.Trainer", "pytorch_lightning.trainer.Trainer",
                                 "pytorch_lightning.trainer.trainer.Trainer", "lightning.Trainer",
                                 "lightning.pytorch.Trainer", "lightning.pytorch.trainer.Trainer",
                                 "lightning.pytorch.trainer.trainer.Trainer", "lightning.fabric.Fabric",
                                 "lightning.Fabric", "lightning_fabric.Fabric"})
_LIGHTNING_CONSTRUCTORS = ("from_argparse_args",)
# the HF classes of training arguments (a subclass among the checked files is typed through its bases)
_TRAINING_ARGS = ("TrainingArguments",)
_TRAINING_ARGS_MODULES = ("transformers.", "trl.", "optimum.")
# `HfArgumentParser` methods returning one instance per dataclass it was built with, in that order
_PARSE_METHODS = {"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict"}


def is_lightning_trainer_call(callee: str) -> bool:
    """Does a call of `callee` (resolved through imports) build a Lightning Trainer (or Fabric): its constructor
    or its `from_argparse_args` classmethod?"""
    if callee in _LIGHTNING_TRAINERS:
        return True
    head, _, last = callee.rpartition(".")
    return last in _LIGHTNING_CONSTRUCTORS and head in _LIGHTNING_TRAINERS


def _one_lightning_process(call: cst.Call) -> bool:
    """A Lightning Trainer/Fabric construction that runs one process: `devices=1` (or a one-device list) and no
    `num_nodes` other than 1, by literal keywords (Lightning's API: one device on one node is one process)."""
    devices = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "devices"), None)
    nodes = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "num_nodes"), None)
    if devices is None or any(a.star for a in call.args):
        return False
    value = literal_value(devices)
    one = value == 1 or isinstance(value, (list, tuple)) and len(value) == 1
    return one and (nodes is None or literal_value(nodes) == 1)


class AccelerateTyping:
    """Which expressions of one file are accelerate process-state objects, typed by use: built by accelerate's
    constructors, returned by a checked function that builds one, bound so (every binding of a name in the file,
    every argument the callers found pass for a parameter of that name, or an annotation naming the class),
    stored so on `self`, or the `accelerator` attribute of an HF Trainer (transformers' Trainer builds
    `self.accelerator = Accelerator(...)` itself): `self.accelerator` in a Trainer subclass, `trainer.accelerator`
    of an object typed so the same way (a Trainer subclass's constructor, `self` handed on by one)."""

    def __init__(self, analysis, src: "PythonSource") -> None:
        self.analysis = analysis
        self.project = analysis.project
        self.src = src
        self._memo: dict[tuple[str, str], bool] = {}

    def is_state(self, e: cst.BaseExpression, cls: Optional[str] = None, depth: int = 0) -> bool:
        if "ccelerat" not in self.src.text:
            return False        # prefilter: a file that never spells accelerate/Accelerator/accelerator
        return self._typed("state", e, cls, depth)

    def is_training_args(self, e: cst.BaseExpression, cls: Optional[str] = None) -> bool:
        """An HF `TrainingArguments` object (or of a subclass): built by its constructor, one of the dataclasses
        an `HfArgumentParser` built with it parses, a parameter annotated so, or an HF Trainer's `.args`."""
        if "rain" not in self.src.text and "rgument" not in self.src.text:
            return False        # prefilter: neither Trainer nor TrainingArguments/HfArgumentParser is spelled
        return self._typed("args", e, cls, 0)

    def is_lightning_trainer(self, e: cst.BaseExpression, cls: Optional[str] = None) -> bool:
        """A Lightning `Trainer` (or Fabric): built by its constructor or `from_argparse_args`, bound so (every
        binding of the name the read resolves to), returned so by a checked function, stored so on `self`."""
        if "ightning" not in self.src.text:
            return False        # prefilter: the file never spells lightning / Lightning
        return self._typed("lightning", e, cls, 0)

    def rank_property(self, e: cst.Attribute, cls: Optional[str] = None) -> Optional[str]:
        """`e` (`receiver.attr`) read as a documented rank property of a typed library object: the class it is
        of, or None."""
        attr = e.attr.value
        if attr in ACCELERATE_RANK_PROPERTIES and self.is_state(e.value, cls):
            return "accelerate"
        if attr in TRAINING_ARGS_RANK_PROPERTIES and self.is_training_args(e.value, cls):
            return "TrainingArguments"
        if attr in ENGINE_RANK_PROPERTIES and "deepspeed" in self.src.text and self._typed("engine", e.value, cls, 0):
            return "the DeepSpeed engine"
        if attr in LIGHTNING_RANK_PROPERTIES and "ightning" in self.src.text and \
                self._typed("lightning", e.value, cls, 0) and not self._typed("lightning_one", e.value, cls, 0):
            return "Lightning's Trainer"
        if attr == "local_rank" and "deepspeed" in self.src.text and self._deepspeed_args(e.value):
            return "the arguments handed to deepspeed.initialize(args=...)"
        return None

    def _deepspeed_args(self, e: cst.BaseExpression) -> bool:
        """The object this file hands to `deepspeed.initialize(args=...)`: DeepSpeed's documented contract for it
        is an argparse namespace holding `local_rank` (the launcher's `--local_rank`) and the config path."""
        name = dotted_name(e)
        if name is None:
            return False
        if "_ds_args" not in self.__dict__:
            self.__dict__["_ds_args"] = {dotted_name(c.keyword("args").value) for c in self.src.facts.calls
                                         if c.callee == "deepspeed.initialize" and c.keyword("args") is not None}
        return name in self.__dict__["_ds_args"]

    def _engine_unpacked(self, name: str) -> bool:
        """`engine, optimizer, _, _ = deepspeed.initialize(...)`: the name unpacked first from the builder."""
        for node in self._assigns:
            v = node.value
            if not (isinstance(v, cst.Call) and (self.src.facts.resolve_expr(v.func) or "") in _ENGINE_BUILDERS):
                continue
            for t in node.targets:
                if isinstance(t.target, (cst.Tuple, cst.List)) and t.target.elements and \
                        isinstance(t.target.elements[0].value, cst.Name) and t.target.elements[0].value.value == name:
                    return True
        return False

    def _args_class(self, e: cst.BaseExpression, depth: int = 0) -> bool:
        """Does this class expression name HF's TrainingArguments or a subclass (through checked bases)?"""
        callee = self.src.facts.resolve_expr(e) or ""
        last = callee.rsplit(".", 1)[-1]
        if callee.startswith(_TRAINING_ARGS_MODULES) and last.endswith(_TRAINING_ARGS):
            return True
        found = self.project.class_for_callee(self.src, callee) if callee else None
        if found is None or found[0].outline is None or depth > 4:
            return False
        info = found[0].outline.classes.get(found[1])
        return info is not None and any(
            b.startswith(_TRAINING_ARGS_MODULES) and b.rsplit(".", 1)[-1].endswith(_TRAINING_ARGS) or
            accelerate_typing(self.analysis, found[0])._base_args(b, depth + 1) for b in info.bases)

    def _base_args(self, base: str, depth: int) -> bool:
        try:
            return self._args_class(cst.parse_expression(base), depth)
        except cst.ParserSyntaxError:
            return False

    def command_line_args(self, e: cst.BaseExpression) -> bool:
        """`e` names TrainingArguments parsed from the command line: unpacked from
        `HfArgumentParser((..., TrainingArguments)).parse_args_into_dataclasses()` (whose `--deepspeed ds.json`
        makes an HF Trainer call `deepspeed.initialize`), every binding of the name in this file being such."""
        if not isinstance(e, cst.Name):
            return False
        name = e.value
        bound = [node for node in self._assigns for t in node.targets
                 if isinstance(t.target, cst.Name) and t.target.value == name or
                 isinstance(t.target, (cst.Tuple, cst.List)) and any(
                     isinstance(el.value, cst.Name) and el.value.value == name for el in t.target.elements)]
        return bool(bound) and all(
            isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Attribute)
            and node.value.func.attr.value == "parse_args_into_dataclasses" for node in bound) \
            and self._parsed_args(name)

    def _parsed_args(self, name: str) -> bool:
        """`a, b, training_args = parser.parse_args_into_dataclasses()` with `parser = HfArgumentParser((A, B,
        TrainingArguments))`: the name unpacked at the position of a TrainingArguments class."""
        for node in self._assigns:
            v = node.value
            if not (isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in
                    _PARSE_METHODS):
                continue
            for t in node.targets:
                if not isinstance(t.target, (cst.Tuple, cst.List)):
                    continue
                at = next((i for i, el in enumerate(t.target.elements)
                           if isinstance(el.value, cst.Name) and el.value.value == name), None)
                if at is None:
                    continue
                classes = self._parser_classes(v.func.value)
                if classes is not None and at < len(classes) and self._args_class(classes[at]):
                    return True
        return False

    def _parser_classes(self, e: cst.BaseExpression) -> Optional[list]:
        """The dataclasses an `HfArgumentParser(...)` expression (or a name bound to one) was built with."""
        if isinstance(e, cst.Name):
            values = [node.value for node in self._assigns for t in node.targets
                      if isinstance(t.target, cst.Name) and t.target.value == e.value]
            e = values[0] if len(values) == 1 else e
        if not isinstance(e, cst.Call) or not e.args:
            return None
        if not (self.src.facts.resolve_expr(e.func) or "").endswith("HfArgumentParser"):
            return None
        first = e.args[0].value
        if isinstance(first, (cst.Tuple, cst.List)):
            return [el.value for el in first.elements]
        return [first]

    def _typed(self, kind: str, e: cst.BaseExpression, cls: Optional[str], depth: int) -> bool:
        if depth > 10:
            return False
        if isinstance(e, cst.Call):
            callee = self.src.facts.resolve_expr(e.func) or ""
            if kind == "state" and callee.startswith("accelerate.") and \
                    callee.rsplit(".", 1)[-1] in _ACCELERATE_STATES:
                return True
            if kind == "trainer":
                found = self.project.class_for_callee(self.src, callee) if callee else None
                if found is not None:
                    return self.analysis.is_hf_trainer_class(*found)
                return callee.startswith(("transformers.", "trl.")) and callee.endswith("Trainer")
            if kind == "args" and self._args_class(e.func):
                return True
            if kind == "engine" and callee in _ENGINE_BUILDERS:
                return callee.endswith("init_inference")
            if kind == "lightning" and is_lightning_trainer_call(callee):
                return True
            if kind == "lightning_one" and is_lightning_trainer_call(callee):
                return _one_lightning_process(e)
            hit = self.project.function_for_callee(self.src, callee) if callee else None
            if hit is not None and hit[0].outline is not None:
                # a checked function (of this file or another) whose every return is such an object
                where = hit[0] if hit[0] is self.src else None
                typing = self if where is not None else accelerate_typing(self.analysis, hit[0])
                info = hit[0].facts.functions.get(hit[1])
                returns = [r.value for r in iter_returns(info.node.body) if r.value is not None] if info else []
                # a returned name is what the bindings of the function's scope make it (`_scoped_name`)
                return bool(returns) and all(typing._typed(kind, v, info.class_name, depth + 1) for v in returns)
            return False
        if isinstance(e, cst.Name):
            if e.value == "self":
                if kind == "state":
                    # accelerate's own state classes, checked as a folder: `self` of its `Accelerator`
                    return (self.src.module_name or "").startswith("accelerate.") and cls in _ACCELERATE_STATES
                return kind == "trainer" and self.analysis.is_hf_trainer_class(self.src, cls)
            scope = self._scopes.get(id(e), _UNPLACED)
            if scope is _UNPLACED:
                return self._name(kind, e.value, depth)     # a node of no tree of this file: every binding
            return self._scoped_name(kind, e.value, scope, depth)
        if isinstance(e, cst.Attribute):
            if kind == "state" and e.attr.value == "accelerator" and self._typed("trainer", e.value, cls, depth + 1):
                return True         # the Trainer's own `self.accelerator`
            if kind == "state" and e.attr.value == "state" and self._typed("state", e.value, cls, depth + 1):
                return True         # `accelerator.state`: its `AcceleratorState`
            if kind == "args" and e.attr.value == "args" and self._typed("trainer", e.value, cls, depth + 1):
                return True         # the Trainer's `self.args` / `trainer.args`: its TrainingArguments
            if isinstance(e.value, cst.Name) and e.value.value == "self":
                key = (kind, "self." + e.attr.value)
                if key not in self._memo:
                    self._memo[key] = True      # assumed while its stores are looked at
                    stores = [(fn, node.value) for fn in self.src.facts.functions.values()
                              for node in iter_assigns(fn.node.body) for t in node.targets
                              if isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                              and t.target.value.value == "self" and t.target.attr.value == e.attr.value]
                    # a parameter stored as it came (`self.trainer = trainer`): what that function's callers pass
                    self._memo[key] = bool(stores) and all(
                        self._param(kind, fn, v.value, depth + 1) if isinstance(v, cst.Name) and v.value in fn.params
                        else self._typed(kind, v, fn.class_name, depth + 1) for fn, v in stores)
                return self._memo[key]
        return False

    @property
    def _scopes(self) -> dict[int, Optional[str]]:
        """id(node) → the qualified name of the innermost function whose body holds it (None: the module's top
        level or a class body there), for the names and assignments of the file (built on first use)."""
        memo = self.__dict__.get("_scope_index")
        if memo is None:
            memo = self.__dict__["_scope_index"] = {}
            functions = {id(info.node): q for q, info in self.src.facts.functions.items()}
            stack: list = [(self.src.module, None)]
            while stack:
                node, scope = stack.pop()
                if isinstance(node, (cst.Name, cst.Assign)):
                    memo[id(node)] = scope
                if isinstance(node, cst.FunctionDef) and id(node) in functions:
                    inner = functions[id(node)]
                    stack.extend((kid, scope) for kid in (*node.decorators, node.name))
                    stack.extend((kid, inner) for kid in (node.params, node.body))
                    continue
                stack.extend((kid, scope) for kid in children(node))
        return memo

    def _scoped_name(self, kind: str, name: str, scope: Optional[str], depth: int) -> bool:
        """A name read in the function `scope` (None: at the top level) is what the bindings of the scope it
        resolves to make it, Python's rule: that function's assignments of it and the parameter of that name
        (what its callers pass), else the enclosing function's, else the module's top level -- not every binding
        of the same spelling in other functions of the file (another method's `accelerator` parameter that no
        found caller passes says nothing of a local built by accelerate)."""
        key = (kind, name, scope or "")
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = True          # assumed while its bindings are looked at (a cycle adds nothing)
        functions = self.src.facts.functions
        found: Optional[tuple[list, Optional[object]]] = None
        q = scope
        while q:
            info = functions.get(q)
            if info is not None:
                if name in _globals_declared(info):
                    break
                values = [node.value for node in self._assigns if self._scopes.get(id(node)) == q
                          for t in node.targets if isinstance(t.target, cst.Name) and t.target.value == name]
                if values or name in info.params:
                    found = (values, info if name in info.params else None)
                    break
            q = q.rsplit(".", 1)[0] if "." in q else None
        if found is None:
            found = ([node.value for node in self._assigns if self._scopes.get(id(node)) is None
                      for t in node.targets if isinstance(t.target, cst.Name) and t.target.value == name], None)
        values, param_of = found
        values = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
        if kind == "args" and self._parsed_args(name) or kind == "engine" and self._engine_unpacked(name):
            self._memo[key] = True
            return True
        ok = all(self._typed(kind, v, None, depth + 1) for v in values)
        if ok and param_of is not None:
            ok = self._param(kind, param_of, name, depth)
        ok = ok and bool(values or param_of is not None)
        if not ok and kind == "state" and values and param_of is None and \
                all(isinstance(v, (cst.Attribute, cst.Subscript)) for v in values):
            # read from a field of an object the checked files do not type (`accelerator = vllm_gen.accelerator`
            # of a library's generation helper): an Accelerator when accelerate's own methods are called on it
            ok = self._used_as_accelerator(name, scope)
        self._memo[key] = ok
        return ok

    def _used_as_accelerator(self, name: str, scope: Optional[str]) -> bool:
        """Is one of accelerate's Accelerator-only methods (`_ACCELERATOR_METHODS`) called on the name in that
        scope (`accelerator.get_state_dict(model)`, `accelerator.unwrap_model(model)`)? Typing by the API used."""
        where = scope or MODULE_SCOPE
        for call in self.src.facts.calls:
            f = call.node.func
            if call.scope == where and isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and \
                    f.value.value == name and f.attr.value in _ACCELERATOR_METHODS:
                return True
        return False

    def _name(self, kind: str, name: str, depth: int, params: bool = True) -> bool:
        key = (kind, name) if params else (kind, name, "bound")
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = True          # assumed while its bindings are looked at (a cycle adds nothing)
        values = [node.value for node in self._assigns for t in node.targets
                  if isinstance(t.target, cst.Name) and t.target.value == name]
        values = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
        if kind == "args" and self._parsed_args(name) or kind == "engine" and self._engine_unpacked(name):
            self._memo[key] = True
            return True
        ok = all(self._typed(kind, v, None, depth + 1) for v in values)
        params = [info for info in self.src.facts.functions.values() if name in info.params] if params else []
        for info in params:
            if not ok:
                break
            ok = self._param(kind, info, name, depth)
        ok = ok and bool(values or params)
        self._memo[key] = ok
        return ok

    def _param(self, kind: str, info, name: str, depth: int) -> bool:
        """A parameter: annotated with an accelerate state class, or passed such an object by every caller
        found."""
        node = next((p for p in [*info.node.params.params, *info.node.params.kwonly_params]
                     if p.name.value == name), None)
        if node is not None and node.annotation is not None and kind == "state":
            ann = self.src.facts.resolve_expr(node.annotation.annotation) or ""
            return ann.rsplit(".", 1)[-1] in _ACCELERATE_STATES
        if node is not None and node.annotation is not None and kind == "args":
            return self._args_class(node.annotation.annotation)
        params = info.params[1:] if info.class_name and info.params[:1] in (["self"], ["cls"]) else info.params
        at = params.index(name) if name in params else None
        callers = 0
        for other in self._callers_files(info):
            typing = accelerate_typing(self.analysis, other)
            for call in other.facts.calls:
                caller = other.facts.functions.get(call.scope)
                cls = caller.class_name if caller else None
                if not self._calls(other, call, info, cls):
                    continue
                arg = next((a.value for a in call.node.args if a.keyword is not None and a.keyword.value == name),
                           None)
                positional = [a for a in call.node.args if a.keyword is None and not a.star]
                if arg is None and at is not None and at < len(positional):
                    arg = positional[at].value
                if arg is None:
                    continue        # left at its default: not an object of the caller's
                callers += 1
                if not typing._typed(kind, arg, cls, depth + 1):
                    return False
        return callers > 0

    def _callers_files(self, info) -> list:
        if info.name == "__init__" and info.class_name:
            short = info.class_name.rsplit(".", 1)[-1]
            return [s for s in self.project.using_identifier(short) if s.outline is not None]
        return self.analysis._files_calling_function(self.src, info)

    def _calls(self, other, call, info, cls) -> bool:
        """Does this call run `info` (a constructor call of its class, for `__init__`)?"""
        if info.name == "__init__" and info.class_name:
            found = self.project.class_for_callee(other, call.callee) if call.callee else None
            return found is not None and found[0] is self.src and found[1] == info.class_name
        if call.attr != info.name:
            return False
        hit = self.analysis.function_info(self.analysis.call_source(other, call.callee, cls, scope=call.scope))
        return hit is not None and hit[1] is info

    @property
    def _assigns(self) -> list[cst.Assign]:
        if "_assign_list" not in self.__dict__:
            self.__dict__["_assign_list"] = list(iter_assigns(self.src.module))
        return self.__dict__["_assign_list"]


_UNPLACED = object()     # `AccelerateTyping._scopes` of a node no tree of the file holds


def _globals_declared(info) -> set[str]:
    """The names a function declares `global` (its reads and stores of them are the module's)."""
    out: set[str] = set()
    stack = list(info.node.body.body) if isinstance(info.node.body, cst.IndentedBlock) else []
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleStatementLine):
            out.update(g.name.value for small in n.body if isinstance(small, cst.Global) for g in small.names)
        elif not isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            stack.extend(sub_statements(n))
    return out


def accelerate_typing(analysis, src: "PythonSource") -> AccelerateTyping:
    """The file's `AccelerateTyping`, one per analysis (memoised)."""
    memo = analysis.__dict__.setdefault("_accelerate_typing", {})
    if id(src) not in memo:
        memo[id(src)] = AccelerateTyping(analysis, src)
    return memo[id(src)]
