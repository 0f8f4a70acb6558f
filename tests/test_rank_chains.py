"""if/elif/else chains and `match` over the rank: each branch's collective is judged with the branch's own
condition (the earlier tests failing included), a chain is walked without recursion, and a `match` statement
is located for the report (it crashed DSL101: `'Match' object has no attribute 'body'`)."""

import time

from dslint.engine import check_texts

HEAD = "import torch.distributed as dist\nrank = dist.get_rank()\n"


def _messages(text: str) -> dict[int, str]:
    report = check_texts({"train.py": text})
    assert not report.errors, report.errors
    return {f.line: f.message for f in report.findings if f.code == "DSL101"}


def test_each_branch_of_an_elif_chain_states_when_it_runs():
    got = _messages(HEAD + "if rank == 0:\n    dist.barrier()\nelif flag:\n    dist.all_reduce(t)\n"
                    "elif rank == 2:\n    pass\nelse:\n    dist.broadcast(t, 0)\n")
    assert "only runs when `rank == 0` holds (line 3)" in got[4]
    assert "only runs when `rank == 0` does not hold and `flag` holds" in got[6]
    assert "only runs when none of `rank == 0`, `flag`, `rank == 2` holds" in got[10]


def test_a_chain_whose_every_branch_reaches_a_collective_is_balanced_but_not_one_with_an_empty_branch():
    balanced = HEAD + "if rank == 0:\n    dist.all_reduce(t)\nelif rank == 1:\n    dist.all_reduce(t)\n" \
                      "else:\n    dist.all_reduce(t)\n"
    assert _messages(balanced) == {}
    no_else = HEAD + "if rank == 0:\n    dist.all_reduce(t)\nelif rank == 1:\n    dist.all_reduce(t)\n"
    assert sorted(_messages(no_else)) == [4, 6]


def test_match_cases_state_their_pattern_and_a_catch_all_balances():
    text = HEAD + "match rank:\n    case 0:\n        dist.barrier()\n    case 1 | 2:\n        pass\n" \
                  "    case _:\n        dist.all_reduce(t)\n"
    got = _messages(text)
    assert "only runs when `rank` matches `0` (line 3)" in got[5]
    assert "only runs when `rank` matches none of `0`, `1 | 2`" in got[9]
    every = HEAD + "match rank:\n    case 0:\n        dist.all_reduce(t)\n    case _:\n        dist.all_reduce(t)\n"
    assert _messages(every) == {}
    no_catch_all = HEAD + "match rank:\n    case 0:\n        dist.all_reduce(t)\n    case 1:\n        dist.all_reduce(t)\n"
    assert sorted(_messages(no_catch_all)) == [5, 7]


def test_a_long_elif_chain_is_walked_without_recursion_errors():
    chain = "".join(f"    elif r == {i}:\n        dist.barrier()\n        y = [a for a in x if a]\n"
                    for i in range(1, 190))
    text = ("import torch.distributed as dist\nr = dist.get_rank()\ndef f(x):\n    y = None\n    if r == 0:\n"
            "        y = 1\n" + chain + "    else:\n        dist.all_reduce(x)\n    return y[0]\n")
    start = time.monotonic()
    report = check_texts({"train.py": text})
    assert not report.errors, report.errors[:2]
    assert time.monotonic() - start < 60
    assert sum(f.code == "DSL101" for f in report.findings) >= 190
