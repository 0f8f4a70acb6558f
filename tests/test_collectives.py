"""Focused checks of the collective-hazard analysis beyond the fixtures: severity follows what the config
settles, findings carry the chain across files, and the uniformizing collectives clear rank taint."""

from dslint.config import Settings
from dslint.engine import check_texts

Z3 = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}\n'
Z2 = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}\n'

SCRIPT = """\
import deepspeed, torch.distributed as dist
from helpers import evaluate
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
if dist.get_rank() == 0:
    evaluate(engine, loader)
"""
HELPER = """\
def evaluate(engine, loader):
    for batch in loader:
        engine(batch)
"""


def _findings(files, code):
    report = check_texts(files, Settings(deepspeed_version="0.19.8", select=[code]))
    assert not report.errors, report.errors
    return [f for f in report.findings if f.code == code]


def test_zero3_forward_under_rank_test_is_an_error_with_the_chain():
    [f] = _findings({"train.py": SCRIPT, "helpers.py": HELPER, "ds.json": Z3}, "DSL101")
    assert f.severity.value == "error" and f.line == 5
    assert any(step.path == "helpers.py" and step.line == 3 and "evaluate()" in step.note for step in f.trace)
    assert "dist.get_rank()" in f.message and "ZeRO-3" in f.message


def test_zero2_forward_is_local():
    assert _findings({"train.py": SCRIPT, "helpers.py": HELPER, "ds.json": Z2}, "DSL101") == []


def test_unknown_config_is_a_warning():
    [f] = _findings({"train.py": SCRIPT, "helpers.py": HELPER}, "DSL101")
    assert f.severity.value == "warning"


def test_all_reduced_exit_condition_is_uniform():
    src = """\
import deepspeed, torch, torch.distributed as dist
engine, *_ = deepspeed.initialize(model=model, config="ds.json")
def step(batch):
    empty = torch.tensor([int(batch is None or dist.get_rank() > 3)])
    dist.all_reduce(empty, op=dist.ReduceOp.MAX)
    if empty.item():
        return
    engine.backward(engine(batch))
"""
    assert _findings({"train.py": src, "ds.json": Z3}, "DSL103") == []
    assert len(_findings({"train.py": src.replace("    dist.all_reduce(empty, op=dist.ReduceOp.MAX)\n", ""),
                          "ds.json": Z3}, "DSL103")) == 1


def test_distributed_mode_test_is_not_rank_dependent():
    src = """\
import argparse, torch.distributed as dist
args = argparse.ArgumentParser().parse_args()
if args.local_rank != -1:
    dist.barrier()
"""
    assert _findings({"train.py": src}, "DSL101") == []


SEQUENCE_HELPERS = """\
import torch.distributed as dist


def share(t):
    dist.broadcast(t, 0)
"""
SEQUENCE_SCRIPT = """\
import torch.distributed as dist
from helpers import share


def step(t):
    if dist.get_rank() == 0:
        share(t)
    else:
        dist.all_reduce(t)
"""


def test_branches_reaching_different_collectives_name_what_the_other_side_runs():
    """Both sides reach a collective, through a helper in another file on one side: the sequences differ
    (a broadcast against an all_reduce), each side is reported and says what the other side runs instead."""
    found = _findings({"train.py": SEQUENCE_SCRIPT, "helpers.py": SEQUENCE_HELPERS}, "DSL101")
    assert sorted(f.line for f in found) == [7, 9]
    by_line = {f.line: f for f in found}
    assert "`dist.all_reduce(...)` (line 9)" in by_line[7].message and "instead" in by_line[7].message
    assert "`share(...)` (line 7)" in by_line[9].message
    assert "does not hold" in by_line[9].message


def test_unpaired_first_process_barrier_names_the_rank_classes():
    """A "first process" pair missing its second half: the finding names the rank classes whose sequences differ
    and the first collective they differ in."""
    script = """\
import argparse, torch.distributed as dist

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    dist.init_process_group(backend="nccl")
    if args.local_rank not in [-1, 0]:
        dist.barrier()
    print("loaded")
"""
    found = _findings({"train.py": script}, "DSL101")
    assert [f.line for f in found] == [9]
    assert "rank 0 calls no further collective where rank 1 calls `barrier` (line 9)" in found[0].message


def test_same_sequence_through_a_helper_is_balanced():
    script = SEQUENCE_SCRIPT.replace("dist.all_reduce(t)", "dist.broadcast(t, 0)")
    assert _findings({"train.py": script, "helpers.py": SEQUENCE_HELPERS}, "DSL101") == []


def test_rank_formula_and_representatives():
    import libcst as cst
    from dslint.program.rank.collective_sequences import decide, rank_formula, representatives
    consts: set = set()
    formula = rank_formula(cst.parse_expression('int(os.environ["LOCAL_RANK"]) not in [-1, 0]'), None, consts)
    assert [decide(formula, r) for r in (0, 1, 5)] == [False, True, True]
    assert consts == {-1, 0}
    assert representatives({0, 3}) == (0, 1, 2, 3, 4)
    assert rank_formula(cst.parse_expression("rank % 2 == 0"), None, set()) is None


def test_generate_on_a_served_engine_object_is_no_forward():
    """`self.inference_engine.generate(...)`: the object is what its constructions make it, not what its name
    spells. Built from a re-exported subclass of vLLM's engine (and elsewhere from vLLM's `LLM`, or a proxy class
    nested in `__init__`) it is no model, so its generate is no collective site; built from an `nn.Module` class
    re-exported the same way, nothing wraps it in a DeepSpeed engine nor shards it (no initialize, no ZeRO-3
    config): its name alone made it a site until issue 30 item 9, and no longer does
    (engine_object_reexported{,_module}/)."""
    from pathlib import Path

    from dslint.program.collective_sites import CollectiveSites
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

    here = Path(__file__).parent / "fixtures" / "static" / "collectives"
    for folder, expected in (("engine_object_reexported", False), ("engine_object_reexported_module", False)):
        root = here / folder
        sources = [PythonSource(str(p.relative_to(root)), p.read_text(encoding="utf-8"),
                                module_name=".".join(p.relative_to(root).with_suffix("").parts).removesuffix(
                                    ".__init__")) for p in sorted(root.rglob("*.py"))]
        project = ProjectView(sources)
        sites = CollectiveSites.of(project)
        fire = next(s for s in project.python if s.path.endswith("fire.py"))
        call = next(c for c in fire.facts.calls if c.callee and c.callee.endswith("generate"))
        found = sites.classify(fire, call.node, "FireRollout")
        assert (found is not None) is expected, folder


ROLLOUT = """\
import torch
class Rollout:
    def __init__(self, engine, tokenizer):
        self.engine = engine
    @torch.no_grad()
    def generate(self, ids, sampling):
        module = self.engine.module
        do_sample = sampling.temperature > 0.0
        return module.generate(ids, max_new_tokens=sampling.max_new_tokens, do_sample=do_sample%s)
"""


def test_generate_on_a_local_alias_of_an_engine_parameter_known_by_name_only_is_no_finding():
    """DeepSpeed's HybridEngineRollout (issue #8262): the engine reaches the class only as a parameter named
    `engine`, its model is read into a local before `generate`. Nothing hands the class an engine (no caller, no
    `deepspeed.initialize`): known by its name only, it is no engine (issue 30 item 9), shown or unproven. The
    alias itself is followed where an engine really arrives: fixtures collectives/generate_engine_alias_sampled
    (DSL104) and generate_engine_alias_fixed_steps (its `eos_token_id=None` twin, clean)."""
    def run(extra, show):
        report = check_texts({"rollout.py": ROLLOUT % extra},
                             Settings(deepspeed_version="0.19.8", select=["DSL104"], show_unproven=show))
        return [f for f in report.findings if f.code == "DSL104"]
    assert run("", True) == []
    assert run("", False) == []
    assert run(", eos_token_id=None", True) == []
