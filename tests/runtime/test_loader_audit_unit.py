"""The loader audit's walk and comparison, the observed/hint split of DSL201 and gradient attribution
(pure: no processes, real torch DataLoaders)."""

from __future__ import annotations

import pytest

from dslint.runtime_checks import compare, loader_audit
from dslint.runtime_checks.execution_context import ExecutionContext

pytestmark = pytest.mark.runtime
torch = pytest.importorskip("torch")


def _loader(n, batch_size=2, shuffle=False, collate_fn=None):
    data = torch.utils.data.TensorDataset(torch.arange(n * 3).reshape(n, 3))
    return torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=shuffle, collate_fn=collate_fn)


def _audit(loader, rank=0):
    return {"index": 0, "loader": loader_audit.describe_loader(loader), "walk": loader_audit.walk(loader, 30),
            "source": ["train.py", 12, "<module>"]}


def test_walk_restores_the_random_state_so_the_script_sees_the_audited_order():
    torch.manual_seed(3)
    loader = _loader(7, shuffle=True)
    expected_next = torch.rand(1)
    torch.manual_seed(3)
    walked = loader_audit.walk(loader, 30)
    assert torch.rand(1).item() == expected_next.item()  # the audit left the generator where it was
    assert walked["count"] == 4 and walked["classes"] == ["[0]:2x3", "[0]:1x3"] and walked["steps"] == [0, 0, 0, 1]


def test_uneven_batch_counts_name_the_step_and_the_sampler():
    findings = loader_audit.compare({0: _audit(_loader(9)), 1: _audit(_loader(6))}, [])
    [error] = [f for f in findings if f["severity"] == "error"]
    assert error["code"] == "DSL102" and error["step"] == 3 and error["counts"] == {"0": 5, "1": 3}
    assert "SequentialSampler is not a DistributedSampler" in error["message"] and "train.py:12" in error["message"]
    assert loader_audit.compare({0: _audit(_loader(8)), 1: _audit(_loader(8))}, []) == []


def _padded(lengths_per_step):
    steps = iter(lengths_per_step)

    def collate(rows):
        width = next(steps)
        return {"input_ids": torch.zeros(len(rows), width, dtype=torch.long)}
    return collate


MOE = {"module": "moe.deepspeed_moe", "ep_size": 2, "num_experts": 4, "capacity_factor": 1.0, "min_capacity": 2,
       "k": 1, "drop_tokens": True}


def test_token_counts_that_change_the_moe_capacity_at_step_2():
    r0 = _audit(_loader(6, collate_fn=_padded([8, 8, 5])))
    r1 = _audit(_loader(6, collate_fn=_padded([8, 8, 9])))
    [error] = [f for f in loader_audit.compare({0: r0, 1: r1}, [MOE]) if f["severity"] == "error"]
    assert error["code"] == "DSL204" and error["step"] == 2
    assert error["tokens"] == {"0": 10, "1": 18} and error["capacity"] == {"0": 3, "1": 5}
    # without expert parallelism (or with drop_tokens=False) differently padded batches are no error
    assert not [f for f in loader_audit.compare({0: r0, 1: r1}, [dict(MOE, ep_size=1)]) if f["severity"] == "error"]
    assert not [f for f in loader_audit.compare({0: r0, 1: r1}, [dict(MOE, drop_tokens=False)])
                if f["severity"] == "error"]


def test_capacity_follows_deepspeeds_gate():
    assert loader_audit.moe_capacity(10, MOE) == 3  # ceil(10 / 4 * 1.0)
    assert loader_audit.moe_capacity(10, dict(MOE, k=2)) == 5  # top-2: capacity_factor * 2
    assert loader_audit.moe_capacity(2, MOE) == 2  # min_capacity


def test_dsl201_is_a_finding_only_when_the_all_to_all_was_observed():
    layer = {"module": "moe.deepspeed_moe", "ep_size": 1, "ep_group_ranks": None, "all_to_all_groups": []}
    summaries = {r: {"moe_layers": [layer]} for r in (0, 1)}
    [hint] = compare._expert_group_findings(summaries, 2)
    assert hint["severity"] == "hint" and hint["observed"] is False
    seen = dict(layer, ep_size=2, all_to_all_groups=["0"])
    [finding] = compare._expert_group_findings({0: {"moe_layers": [seen]}, 1: {"moe_layers": [layer]}}, 2)
    assert finding["severity"] == "error" and finding["observed"] is True


def test_gradient_reduction_attributed_through_its_bucket():
    ctx = ExecutionContext()
    ctx.param_root = "Net"
    ctx.push_phase("backward")
    for name in ("head.weight", "body.0.weight", "body.0.bias"):
        ctx.grad_arrived(name)
    ctx.reducing.append(["body.0.weight", "body.0.bias"])
    assert ctx.module_path() == "body.0" and ctx.gradient_params() == (["body.0.weight", "body.0.bias"], "bucket")
    ctx.reducing.pop()
    assert ctx.module_path() == "Net"  # head and body: the model owns both
    assert ctx.gradient_params() == (["head.weight", "body.0.weight", "body.0.bias"], "autograd")
    assert ctx.gradient_params() is None  # consumed by that collective


def test_iterable_datasets_are_described_but_not_walked_and_walks_stop_at_the_budget():
    class Stream(torch.utils.data.IterableDataset):
        def __init__(self):
            self.source = iter(range(10))  # consumable once

        def __iter__(self):
            return self.source

    stream = Stream()
    walked = loader_audit.walk(torch.utils.data.DataLoader(stream, batch_size=2), 30)
    assert walked["count"] == 0 and "IterableDataset is not walked" in walked["error"]
    assert list(stream) == list(range(10))  # the script still gets all of it
    cut = loader_audit.walk(_loader(50), 0)
    assert cut["truncated"] and cut["count"] == 1
    findings = loader_audit.compare({0: dict(_audit(_loader(9)), walk=cut), 1: _audit(_loader(6))}, [])
    assert not [f for f in findings if f["severity"] == "error"]  # a cut walk's count proves nothing
