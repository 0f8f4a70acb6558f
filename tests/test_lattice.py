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
