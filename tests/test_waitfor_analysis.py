"""The wait-for analysis and the divergence point on recorded stacks (pure: no torch, no processes)."""

from __future__ import annotations

import textwrap

from dslint.runtime_checks.fingerprint import check_group, pairwise_share, SHARE_MODULUS
from dslint.runtime_checks.waitfor import analyse, divergence_point

SCRIPT = textwrap.dedent("""\
    import torch.distributed as dist

    def log_metrics(x):
        dist.all_reduce(x, group=side)

    def generate(prompt, n):
        for _ in range(n):
            dist.all_reduce(prompt)
        return prompt

    def evaluate(batches, rank):
        if rank == 0:
            return None
        for b in batches:
            dist.all_reduce(b)

    for step in range(3):
        dist.all_reduce(grad)
        if step == 1 and rank == 0:
            log_metrics(grad)
        if loss.item() < 0.5:
            break
    dist.barrier()
    out = model.generate(prompt)
    generate(prompt, 2 + rank)
    evaluate(batches, rank)
    dist.barrier(group=side)
""")


def _lines(path):
    return {text.strip(): i for i, text in enumerate(path.read_text().splitlines(), 1)}


def test_divergence_points_follow_the_code_structure(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    f = str(path)
    ln = _lines(path)
    barrier, side_barrier = ln["dist.barrier()"], ln["dist.barrier(group=side)"]
    # rank 0 inside `if step == 1 and rank == 0` (in log_metrics), rank 1 at the step's all_reduce: a branch
    a = [[f, ln["dist.all_reduce(x, group=side)"], "log_metrics", ""], [f, ln["log_metrics(grad)"], "<module>", ""]]
    b = [[f, ln["dist.all_reduce(grad)"], "<module>", ""]]
    point = divergence_point(a, b, ("rank 0", "rank 1"))
    assert point["kind"] == "branch" and point["code"] == "DSL101"
    assert point["text"] == "if step == 1 and rank == 0:" and "rank 0 took the branch" in point["why"]
    # one rank still in the loop, the other after it; the loop has a `break`: an exit (DSL103) at the break
    point = divergence_point([[f, ln["dist.all_reduce(grad)"], "<module>", ""]], [[f, barrier, "<module>", ""]])
    assert point["kind"] == "exit" and point["code"] == "DSL103" and point["text"] == "break"
    # a script function named generate: its loop's trip count (DSL102), not DSL104
    inside = [[f, ln["dist.all_reduce(prompt)"], "generate", ""], [f, ln["generate(prompt, 2 + rank)"], "<module>", ""]]
    point = divergence_point(inside, [[f, side_barrier, "<module>", ""]])
    assert point["code"] == "DSL102" and point["text"] == "for _ in range(n):"
    # a library generate() (observed through the recorded callee) one rank is still inside: DSL104
    lib = [[f, ln["out = model.generate(prompt)"], "<module>", "transformers/generation/utils.py:generate"]]
    point = divergence_point(lib, [[f, side_barrier, "<module>", ""]])
    assert point["code"] == "DSL104"
    assert divergence_point(lib, lib)["code"] == "DSL104"  # same line, different lengths
    # one rank returned early from evaluate(): the `return` is the divergence point
    inside = [[f, ln["dist.all_reduce(b)"], "evaluate", ""], [f, ln["evaluate(batches, rank)"], "<module>", ""]]
    point = divergence_point(inside, [[f, side_barrier, "<module>", ""]])
    assert point["kind"] == "exit" and point["text"] == "return None"
    assert divergence_point([], inside) is None


def _pos(state, group=None, seq=None, ranks=(0, 1), age=5.0, **extra):
    return {"pos": {"state": state, "group": group, "seq": seq, "op": "all_reduce", "ranks": list(ranks),
                    "for": age, "stack": [], **extra}}


def test_wait_for_knot_extra_collective_and_blocked_elsewhere():
    # cross-group: 0 waits in group A for 1, 1 waits in group W for 0
    beats = {0: _pos("in", "A", 0), 1: _pos("pre", "W", 3)}
    found = analyse(beats, settle=1.0, stall=4.0)
    assert found["cause"] == "deadlock" and found["stuck_ranks"] == [0, 1]
    # not yet settled: nothing proven
    assert analyse({0: _pos("in", "A", 0), 1: _pos("pre", "W", 3, age=0.2)}, 1.0, 4.0) is None
    # a peer running Python (moving): nothing proven; frozen past the stall bound: blocked elsewhere
    assert analyse({0: _pos("in", "W", 1), 1: _pos("py", age=0.5)}, 1.0, 4.0) is None
    found = analyse({0: _pos("in", "W", 1), 1: _pos("py", age=5.0)}, 1.0, 4.0)
    assert found["cause"] == "blocked-elsewhere" and found["stuck_ranks"] == [0] and found["blocking"]["rank"] == 1
    # ... unless it is in a bounded wait of dslint's own (the loader audit waiting for its peers): it ends by itself
    waiting = _pos("py", age=5.0, bounded_wait="peers' audits of the loader iterated at t.py:35")
    assert analyse({0: _pos("in", "W", 1), 1: waiting}, 1.0, 4.0) is None
    # a finished peer with fewer collectives in the group: an extra collective
    found = analyse({0: _pos("in", "W", 8), 1: _pos("fin", counts={"W": 8})}, 1.0, 4.0)
    assert found["cause"] == "extra-collective" and found["finished_ranks"] == [1]
    # all members present at the same collective (a transport stall): left to --timeout
    assert analyse({0: _pos("in", "W", 2), 1: _pos("in", "W", 2)}, 1.0, 4.0) is None
    # same group, different sequence numbers: proven at once
    found = analyse({0: _pos("in", "W", 2), 1: _pos("pre", "W", 3)}, 1.0, 4.0)
    assert found is not None and found["stuck_ranks"] == [0, 1]


def test_pairwise_shares_sum_to_zero_exactly_when_sends_match_receives():
    def fps(matrix):
        n = len(matrix)
        return [{"op": "all_to_all_single", "send": list(matrix[i]), "recv": [matrix[j][i] for j in range(n)],
                 "ins": [], "outs": []} for i in range(n)]

    good = fps([[4, 6, 2], [1, 3, 5], [7, 0, 9]])
    assert check_group(good) is None
    assert sum(pairwise_share(fp, i, 3, seq=5) for i, fp in enumerate(good)) % SHARE_MODULUS == 0
    bad = [dict(fp) for fp in good]
    bad[2] = dict(bad[2], recv=[3, 5, 9])  # rank 2 expects 3 from rank 0, which sends 2
    assert check_group(bad) is not None
    assert sum(pairwise_share(fp, i, 3, seq=5) for i, fp in enumerate(bad)) % SHARE_MODULUS != 0


def test_a_finished_rank_points_at_the_outermost_shared_loop(tmp_path):
    model = tmp_path / "model.py"
    model.write_text("def forward(layers, x):\n    for layer in layers:\n        x = layer(x)\n    return x\n")
    script = tmp_path / "eval.py"
    script.write_text("for batch in samples[rank::world]:\n    loss = forward(layers, batch)\n")
    m, s = str(model), str(script)
    stuck = [[m, 3, "forward", ""], [s, 2, "<module>", ""]]
    last = [[m, 3, "forward", ""], [s, 2, "<module>", ""]]
    point = divergence_point(stuck, last, ("rank 0", "rank 1"), finished=True)
    assert point["code"] == "DSL102" and point["text"] == "for batch in samples[rank::world]:"
    assert divergence_point(stuck, last)["text"] == "for layer in layers:"  # two running ranks: innermost
