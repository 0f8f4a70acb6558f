"""The tree of stores' shape (pure: no torch, no processes): which nodes a rank's check goes through, and when
the tree is used. The protocol itself runs on real ranks in tests/runtime/test_store_tree.py."""

from __future__ import annotations

import pytest

from dslint.runtime_checks.store_tree import hosted_level, path_of, selected


def test_world_of_4096_ranks_is_three_levels_of_16():
    # hosts: a leaf's first rank, the parent's first leaf's last rank, the root's first subtree's last rank
    assert path_of(0, range(4096), 16) == [(1, 0, 16), (2, 15, 16), (3, 255, 16)]
    assert path_of(4095, range(4096), 16) == [(1, 4080, 16), (2, 3855, 16), (3, 255, 16)]
    # a leaf's member: its leaf store is hosted by the leaf's first rank
    assert path_of(37, range(4096), 16)[0] == (1, 32, 16)


def test_every_node_counts_the_subtrees_that_hold_members():
    """Each node's expected arrivals are its children holding members of the group; the counts of the nodes of
    one level add up to the number of nodes below, and the top expects the nodes of the level under it."""
    ranks = list(range(0, 100, 3))  # 34 ranks spread over 7 leaves of 16
    paths = {r: path_of(r, ranks, 16) for r in ranks}
    tops = {p[-1] for p in paths.values()}
    assert tops == {(2, 15, 7)}
    leaves = {p[0] for p in paths.values()}
    assert sum(expected for _, _, expected in leaves) == len(ranks)


def test_levels_where_a_rank_is_alone_are_skipped():
    # one rank per leaf: nothing to count in the leaves, straight to the node that holds both
    assert path_of(1, [1, 17], 16) == [(2, 15, 2)]
    assert path_of(17, [1, 17], 16) == [(2, 15, 2)]
    # a group inside one leaf: that leaf's store alone, hosted by the leaf's first rank (not a member)
    assert path_of(18, [18, 19], 16) == [(1, 16, 2)]
    # the fan-out of 2 the runtime tests force at 4 ranks
    assert path_of(3, range(4), 2) == [(1, 2, 2), (2, 1, 2)]
    assert path_of(1, [1, 2], 2) == [(2, 1, 2)]


@pytest.mark.parametrize("world, f", [(4, 2), (5, 2), (17, 16), (33, 16), (257, 16), (300, 4), (4096, 16)])
def test_each_rank_hosts_at_most_one_level_and_every_node_on_a_path_has_its_host(world, f):
    hosts = {r: hosted_level(r, world, f) for r in range(world)}
    for r in (0, 1, world // 2, world - 1):
        for level, host, _ in path_of(r, range(world), f):
            assert 0 <= host < world and hosts[host] == level, (r, level, host)
    assert hosts[0] == 1 and (world <= f or hosts[f - 1] == 2)


@pytest.mark.parametrize("env, world, expected", [
    ({}, 16, False), ({}, 31, False), ({}, 32, True), ({}, 4096, True),
    ({"DSLINT_PREFLIGHT_TREE": "on"}, 4, True), ({"DSLINT_PREFLIGHT_TREE": "1"}, 2, True),
    ({"DSLINT_PREFLIGHT_TREE": "off"}, 4096, False), ({"DSLINT_PREFLIGHT_TREE": "on"}, 1, False),
    ({"DSLINT_PREFLIGHT_TREE": "auto"}, 64, True),
])
def test_flat_below_32_ranks_tree_above_unless_set(env, world, expected):
    assert selected(world, env) is expected


def test_polling_is_tight_while_the_wait_is_young_and_backs_off_after():
    """A waiter leaves only at its next poll: within POLL_TIGHT_S no pause exceeds POLL_MAX_S (0.1 ms), so the
    check adds at most that after the last arrival; a long wait backs off to POLL_SLOW_MAX_S (2 ms), so a rank
    waiting the whole POLL_FIRST_S makes tens of polls, not hundreds."""
    from dslint.runtime_checks.store_tree import (POLL_FIRST_S, POLL_MAX_S, POLL_SLOW_MAX_S, POLL_START_S,
                                                  POLL_TIGHT_S, next_pause)
    waited, pause, pauses = 0.0, POLL_START_S, []
    while waited < POLL_FIRST_S:
        pauses.append((waited, pause))
        waited += pause
        pause = next_pause(pause, waited)
    young = [p for w, p in pauses if w + p <= POLL_TIGHT_S]
    assert young and max(young) <= POLL_MAX_S <= 0.0001
    assert max(p for _, p in pauses) == POLL_SLOW_MAX_S
    assert len(pauses) < 60, len(pauses)
