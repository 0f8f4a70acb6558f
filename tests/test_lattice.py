"""The rank-uniformity lattice's interface (dslint/program/rank/lattice.py): what `uniformity` answers for the
facts the DSL1xx rules and DSL303 rely on, each with a varying counterpart."""

import libcst as cst

from dslint.program.project_view import ProjectView
from dslint.program.rank.lattice import UNIFORM, Unknown, Varying, batch_origin, classify, join, uniformity
from dslint.sources import PythonSource

TEXT = """\
import os
import torch
import torch.distributed as dist
from dataclasses import dataclass


@dataclass
class State:
    step: int = 0
    is_main: bool = True


class Loop:
    def __init__(self, config):
        self.every = config["every"]
        self.state = State(is_main=dist.get_rank() == 0)
        self.local = int(os.environ["LOCAL_RANK"])

    def run(self, shards, args, images):
        world = int(os.environ["WORLD_SIZE"])
        lr = args.lr
        mine = shards[dist.get_rank()]
        flag = torch.tensor([mine.sum() > 0])
        dist.all_reduce(flag)
        out = mine.float()
        if dist.get_rank() == 0:
            stop = lr > 1
            payload = [lr, stop]
        else:
            payload = [None, None]
        dist.broadcast_object_list(payload, src=0)
        _, agreed = payload
        probe = (world, lr, self.every, self.state.step, self.state.is_main, self.local, mine, mine.sum(),
                 flag, out.dtype, out.dim(), out.device.type, isinstance(mine, list), agreed, stop, make(mine),
                 images, images is None)
"""


def _probe():
    src = PythonSource("m.py", TEXT)
    project = ProjectView([src])
    func = src.facts.functions["Loop.run"]
    assign = [s for s in func.node.body.body if isinstance(s, cst.SimpleStatementLine)
              and isinstance(s.body[0], cst.Assign) and getattr(s.body[0].targets[0].target, "value", "") == "probe"]
    elements = [el.value for el in assign[0].body[0].value.elements]
    return project, src, func, elements


def test_uniformity_of_each_fact():
    project, src, func, e = _probe()
    u = [uniformity(project, src, x, "Loop.run") for x in e]
    names = ["world", "lr", "every", "state.step", "state.is_main", "local", "mine", "mine.sum()", "flag",
             "dtype", "dim()", "device.type", "isinstance", "agreed", "stop", "make(mine)", "images", "images is None"]
    got = dict(zip(names, u))
    for uniform in ("world", "lr", "every", "state.step", "flag", "dtype", "dim()", "device.type", "isinstance",
                    "agreed", "images", "images is None"):
        assert got[uniform] is UNIFORM, uniform
    for varying in ("state.is_main", "local", "mine", "mine.sum()", "stop"):
        assert isinstance(got[varying], Varying), varying
        assert got[varying]            # truthy: "does it (or may it) vary?"
    assert isinstance(got["make(mine)"], Varying) and got["make(mine)"].data    # per-rank data, kept opaque
    assert not got["world"]


def test_seeded_batch_environment():
    """DSL303's use: forward's arguments seeded as this rank's batch -- the values vary, the structure does not."""
    project, src, func, e = _probe()
    images = e[-2]
    env = {"images": batch_origin(images, src, "argument `images` of forward()")}
    assert isinstance(uniformity(project, src, images, "Loop.run", env=env), Varying)
    assert uniformity(project, src, e[-1], "Loop.run", env=env) is UNIFORM      # `images is None`: the collator's


def test_classify_and_join():
    project, src, func, e = _probe()
    assert classify(None) is UNIFORM
    varying = uniformity(project, src, e[6], "Loop.run")
    derived = Unknown(varying.origin.__class__("derived", e[6], src))
    assert isinstance(classify(derived.origin), Unknown)
    assert join(UNIFORM, derived) is derived and join(derived, varying) is varying and join(UNIFORM, UNIFORM) is UNIFORM


ITEMS_TEXT = """\
import torch.distributed as dist
from tqdm import tqdm


def run(n, xs):
    main = dist.get_rank() == 0
    progress = range(n)
    if main:
        progress = tqdm(progress, desc="steps")
    for step in progress:
        a = step
    bar = tqdm(xs) if main else xs
    for x in bar:
        b = x
    other = range(n)
    if main:
        other = tqdm(range(n - 1))
    for y in other:
        c = y
    used = iter(range(n))
    if main:
        used = iter(used)
        next(used)
    for z in used:
        d = z
    probe = (a, b, c, d, progress, isinstance(bar, tqdm))
"""


def test_item_preserving_wrapper_on_some_ranks():
    """`progress = tqdm(progress)` on rank 0 only: the object differs per rank, its iteration (the passes and the
    items) does not; a wrapper of another range, or an iterator rank 0 also advances, does."""
    src = PythonSource("m.py", ITEMS_TEXT)
    project = ProjectView([src])
    func = src.facts.functions["run"]
    probe = [s for s in func.node.body.body if isinstance(s, cst.SimpleStatementLine)
             and getattr(s.body[0].targets[0].target, "value", "") == "probe"][0]
    a, b, c, d, progress, typed = [uniformity(project, src, el.value, "run") for el in probe.body[0].value.elements]
    assert a is UNIFORM and b is UNIFORM
    assert isinstance(c, Varying) and isinstance(d, Varying)
    assert isinstance(progress, Varying) and typed      # the object itself still differs


CHOICE_TEXT = """\
import torch.distributed as dist
from tqdm import tqdm


def run(n, rows, data_loader, xs, other_rows):
    main = dist.get_rank() == 0
    data_iter = tqdm(enumerate(rows), total=len(rows)) if main else enumerate(rows)
    for i, row in data_iter:
        a, ai = row, i
    sample_iter = tqdm(range(n), total=n) if main else range(n)
    for j in sample_iter:
        b = j
    if main:
        steps = enumerate(tqdm(xs, desc="eval"))
    else:
        steps = enumerate(xs)
    for k, x in steps:
        c = x
    batches = tqdm(enumerate(data_loader)) if main else enumerate(data_loader)
    for s, batch in batches:
        lengths = [len(p) for p in batch["prompt"]]
    for s, batch in enumerate(data_loader):
        plain = [len(p) for p in batch["prompt"]]
    mixed = tqdm(enumerate(xs)) if main else enumerate(other_rows)
    for m, y in mixed:
        d = y
    cut = tqdm(range(dist.get_rank())) if main else range(dist.get_rank())
    for z in cut:
        e = z
    it = iter(xs)
    if main:
        next(it)
        bar = tqdm(enumerate(it))
    else:
        bar = enumerate(it)
    for w, v in bar:
        f = v
    for q, r in enumerate(tqdm(rows) if main else rows):
        g = (q, r)
    probe = (a, ai, b, c, lengths, plain, d, e, f, g)
"""


def test_item_preserving_choice_between_equal_iterables():
    """`tqdm(enumerate(rows)) if main else enumerate(rows)`, `tqdm(range(n)) if main else range(n)`, or an
    `if`/`else` binding `enumerate(tqdm(xs))` and `enumerate(xs)`: the rank test chooses the display only, so
    what the loop walks -- and what is computed from its items (the prompt lengths of a loader's batch) -- is
    the iterable's, not the rank test's. Different iterables (`enumerate(xs)` / `enumerate(other_rows)`), an
    iterable cut at the rank, or one advanced on rank 0 first, still vary with the rank."""
    src = PythonSource("m.py", CHOICE_TEXT)
    project = ProjectView([src])
    func = src.facts.functions["run"]
    probe = [s for s in func.node.body.body if isinstance(s, cst.SimpleStatementLine)
             and getattr(s.body[0].targets[0].target, "value", "") == "probe"][0]
    a, ai, b, c, lengths, plain, d, e, f, g = [uniformity(project, src, el.value, "run")
                                               for el in probe.body[0].value.elements]
    assert a is UNIFORM and ai is UNIFORM and b is UNIFORM and c is UNIFORM and g is UNIFORM
    # a batch of the loader: what the loop without the progress bar makes of it, never the rank test's value
    assert type(lengths) is type(plain) and (lengths is UNIFORM or lengths.origin.kind == plain.origin.kind)
    assert isinstance(d, Varying) and isinstance(e, Varying) and isinstance(f, Varying)


def test_library_tables_name_torch_api():
    """The torch tables of library_types name what torch defines: a tensor's placement attributes and methods
    (`TENSOR_PLACEMENT_ATTRS`), and Module methods other than `forward`/`__call__`
    (`MODULE_METHODS_WITHOUT_FORWARD`)."""
    import pytest
    torch = pytest.importorskip("torch")
    from dslint.program.rank.library_types import (MODULE_METHODS_WITHOUT_FORWARD, TENSOR_PLACEMENT_ATTRS,
                                                   TENSOR_PLACEMENT_METHODS)
    x = torch.zeros(2)
    assert all(hasattr(x, a) for a in TENSOR_PLACEMENT_ATTRS | TENSOR_PLACEMENT_METHODS)
    assert all(callable(getattr(torch.nn.Module, m)) for m in MODULE_METHODS_WITHOUT_FORWARD)
    assert not {"forward", "__call__", "_call_impl"} & MODULE_METHODS_WITHOUT_FORWARD


STRUCTURE_TEXT = """\
import torch.distributed as dist


def run(rows, outputs, ignore, a, b):
    mine = rows[dist.get_rank()::dist.get_world_size()]
    chosen = (a, b) if dist.get_rank() == 0 else a
    probe = (len(mine.shape), len(mine.size()), mine.shape[0], len(chosen.shape),
             len(tuple(v for k, v in outputs.items() if k not in ignore)),
             len(tuple(v for k, v in outputs.items() if v.sum() > 0)))
"""


def test_structure_is_uniform_sizes_are_not():
    """What a value IS (its number of dimensions, the fields kept by a test of their key) is the same on every rank
    for per-rank data; its sizes, a structure chosen by a rank test, and fields kept by their contents are not."""
    src = PythonSource("m.py", STRUCTURE_TEXT)
    project = ProjectView([src])
    func = src.facts.functions["run"]
    probe = [s for s in func.node.body.body if isinstance(s, cst.SimpleStatementLine)
             and getattr(s.body[0].targets[0].target, "value", "") == "probe"][0]
    e = [el.value for el in probe.body[0].value.elements]
    env = {"outputs": batch_origin(e[0], src, "argument `outputs` of run()")}
    got = [uniformity(project, src, x, "run") for x in e[:4]] + \
        [uniformity(project, src, x, "run", env=env) for x in e[4:]]
    assert got[0] is UNIFORM and got[1] is UNIFORM     # len(mine.shape), len(mine.size()): dimensions
    assert isinstance(got[2], Varying)                  # mine.shape[0]: this rank's row count
    assert isinstance(got[3], Varying)                  # a structure chosen by a rank test
    assert got[4] is UNIFORM                            # fields kept by their key: the batch's structure
    assert isinstance(got[5], Varying)                  # fields kept by their values


FIELDS_TEXT = """\
import os
import torch
import torch.distributed as dist


class Tracker:
    def __init__(self, cfg, local_rank):
        self.device = torch.device("cuda", local_rank)
        self.flag = local_rank == 0
        self.every = cfg.every
        self.step = 0
        self.seen = 0
        self.total = 0

    def tick(self):
        self.step += 1

    def count(self, n):
        self.seen += n

    def sync(self, n):
        t = torch.tensor(n)
        dist.all_reduce(t)
        self.total = t.item()

    def due(self):
        return self.step % self.every == 0

    def first(self):
        return self.flag


def run(cfg):
    tracker = Tracker(cfg, int(os.environ["LOCAL_RANK"]))
    probe = (tracker.every, tracker.step, tracker.total, tracker.due(), tracker.flag, tracker.first(), tracker.seen,
             tracker is None)
"""


def test_object_fields_of_a_rank_built_object():
    """An object of a checked class built with a rank id varies field by field (`Origin.fields`): the fields its
    stores set from uniform values -- configuration, a count kept in lockstep, an all-reduced total -- and a method
    reading only them are uniform; the field computed from the rank, a method returning it, and a field a method
    adds its (possibly per-rank) argument to vary; the object's None-ness keeps the object's own taint."""
    src = PythonSource("m.py", FIELDS_TEXT)
    project = ProjectView([src])
    func = src.facts.functions["run"]
    assign = [s for s in func.node.body.body if isinstance(s, cst.SimpleStatementLine)
              and getattr(s.body[0].targets[0].target, "value", "") == "probe"]
    e = [el.value for el in assign[0].body[0].value.elements]
    u = [uniformity(project, src, x, "run") for x in e]
    assert u[:4] == [UNIFORM] * 4, u[:4]
    assert isinstance(u[4], Varying) and u[4].origin.kind == "rank"
    assert u[5] and u[6], (u[5], u[6])
    assert u[7], "the object's None-ness keeps the object's taint"
