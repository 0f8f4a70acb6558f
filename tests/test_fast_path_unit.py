"""The fast path's pattern bookkeeping (``dslint.runtime_checks.fast_path``), without processes."""

from __future__ import annotations

from dslint.runtime_checks.fast_path import FastPath, enabled


def _step(fp: FastPath, group: str, start: int, tokens: list[str], ops: list[str] | None = None) -> list[bool]:
    """Check ``tokens`` on ``group`` from sequence number ``start``: which took the fast path."""
    taken = []
    for i, token in enumerate(tokens):
        op = (ops or ["all_reduce"] * len(tokens))[i]
        fast = fp.expects(group, start + i, op, token)
        fp.note(group, start + i, token, {"op": op}, {"seq": start + i}, fast)
        taken.append(fast)
    return taken


def _boundary(ranks: dict[int, FastPath], counts: dict[str, int], members: dict[str, tuple[int, ...]]) -> None:
    votes = {r: fp.end_step(counts) for r, fp in ranks.items()}
    for fp in ranks.values():
        fp.arm(votes, members)


def test_switch_defaults_on_and_turns_off():
    assert enabled({}) and enabled({"DSLINT_PREFLIGHT_FAST_PATH": "1"})
    assert not enabled({"DSLINT_PREFLIGHT_FAST_PATH": "0"}) and not enabled({"DSLINT_PREFLIGHT_FAST_PATH": "off"})


def test_agreed_step_arms_the_next_and_matching_collectives_go_fast():
    ranks = {0: FastPath(True), 1: FastPath(True)}
    members = {"w": (0, 1)}
    for fp in ranks.values():
        assert _step(fp, "w", 0, ["a", "b", "a"]) == [False] * 3  # step 1: nothing armed
    _boundary(ranks, {"w": 3}, members)
    for fp in ranks.values():
        assert fp.armed_steps == 1
        assert _step(fp, "w", 3, ["a", "b", "a"]) == [True] * 3
        assert fp.pattern_entry("w", 4).token == "b" and fp.pattern_entry("w", 6) is None
        assert fp.summary()["fast"] == 3 and fp.summary()["checked"] == 6


def test_a_different_token_disarms_the_group_until_the_next_boundary():
    fp = FastPath(True)
    _step(fp, "w", 0, ["a", "b", "c"])
    _boundary({0: fp}, {"w": 3}, {"w": (0,)})
    assert _step(fp, "w", 3, ["a", "x", "c"]) == [True, False, False]  # after the deviation: compared
    assert fp.deviations == 1
    assert fp.pattern_entry("w", 4).token == "b"  # the verdict still finds the pattern's call
    _boundary({0: fp}, {"w": 6}, {"w": (0,)})  # the new sequence was agreed: it is the pattern now
    assert _step(fp, "w", 6, ["a", "x", "c", "c"]) == [True, True, True, False]  # past the end: compared


def test_patterns_that_differ_between_members_are_not_armed():
    ranks = {0: FastPath(True), 1: FastPath(True), 2: FastPath(True)}
    _step(ranks[0], "w", 0, ["a", "b"])
    _step(ranks[1], "w", 0, ["a", "b"])
    _step(ranks[2], "w", 0, ["a", "b", "b"])  # an extra collective on rank 2
    _step(ranks[0], "pair", 0, ["p"])  # a group of ranks 0 and 1 only
    _step(ranks[1], "pair", 0, ["p"])
    _boundary(ranks, {"w": 2, "pair": 1}, {"w": (0, 1, 2), "pair": (0, 1)})
    assert all("w" not in fp.armed for fp in ranks.values())
    assert "pair" in ranks[0].armed and "pair" in ranks[1].armed  # its own members agree
    assert _step(ranks[0], "w", 2, ["a"]) == [False]


def test_an_exchange_that_did_not_complete_arms_nothing_and_a_gap_is_not_armable():
    fp = FastPath(True)
    _step(fp, "w", 0, ["a"])
    fp.end_step({"w": 1})
    assert fp.arm(None, {"w": (0,)}) == []
    _step(fp, "w", 1, ["a"])
    fp.note("w", 5, "a", {}, {}, False)  # a sequence number skipped: the step's record has a gap
    assert fp.end_step({"w": 6}) == {}


def test_all_to_all_never_goes_fast_but_keeps_the_pattern_armed():
    fp = FastPath(True)
    _step(fp, "w", 0, ["t", "a"], ["all_to_all_single", "all_reduce"])
    _boundary({0: fp}, {"w": 2}, {"w": (0,)})
    assert _step(fp, "w", 2, ["t", "a"], ["all_to_all_single", "all_reduce"]) == [False, True]
    assert fp.deviations == 0


def test_off_votes_nothing_and_never_arms():
    fp = FastPath(False)
    _step(fp, "w", 0, ["a"])
    assert fp.end_step({"w": 1}) == {}
    fp.arm({0: {}}, {"w": (0,)})
    assert _step(fp, "w", 1, ["a"]) == [False] and fp.summary()["checked"] == 2
