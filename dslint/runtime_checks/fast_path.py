"""The pre-issue check's fast path: a step's agreed sequence of collectives, armed for the next step.

The pre-issue check (``DrySession.before_issue``) holds every rank of a group until the last one has arrived,
so it acts as a barrier in front of each collective. Training repeats itself step after step: at an optimizer-
step boundary the ranks agree on a *pattern*, per group the sequence of check tokens (``fingerprint.
check_token``) of the step just completed. Every collective of that step was compared across its group before
it was issued, so every member holds the same sequence; the boundary's exchange confirms it (a digest of the
sequence, its start and length per group, in each rank's vote) and arms a group's pattern only where all of the
group's members published the same digest.

In the next step, a rank whose collective at in-step position i of group g has exactly the pattern's token
there takes the fast path: it makes its arrival known as the check always does (its folded token ``add``ed to
the group's counter) but does not wait for the others. If every rank of the group takes it, they all hold the
pattern's token: the collective was compared before it was issued, transitively. A rank whose token differs
(or that is past the pattern's end) waits and compares as always, sees the token sum disagree, and concludes
before issuing its call; the fast ranks, blocked in the collective, are ended by the verdict. Its verdict names
the fast ranks' calls from the pattern (its own record of the previous step at that position) and their stacks
from their heartbeats. A deviation disarms the group's pattern on that rank until the next boundary.

all_to_all (``PAIRWISE_OPS``) never takes the fast path: its sizes differ per rank and are not in the token.

Pure bookkeeping: no store, no torch (unit-tested without processes).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from dslint.runtime_checks.fingerprint import PAIRWISE_OPS

FAST_ENV = "DSLINT_PREFLIGHT_FAST_PATH"  # 1/on (default) or 0/off: the A/B switch


def enabled(env: dict[str, str] | None = None) -> bool:
    mode = (env if env is not None else os.environ).get(FAST_ENV, "1").strip().lower()
    return mode not in ("0", "off", "no", "false")


class Entry:
    """One checked collective of a step: its token, its fingerprint and its tracer record."""

    __slots__ = ("token", "fp", "record")

    def __init__(self, token: str, fp: dict[str, Any], record: dict[str, Any]) -> None:
        self.token, self.fp, self.record = token, fp, record


class FastPath:
    """One rank's patterns: the current step's checked collectives per group, and the armed ones."""

    def __init__(self, on: bool | None = None) -> None:
        self.enabled = enabled() if on is None else on
        self.start: dict[str, int] = {}  # group -> its sequence number at the current step's start
        self.current: dict[str, list[Entry]] = {}  # group -> the current step's checked collectives, in order
        self.broken: set[str] = set()  # groups whose current sequence has a gap (not armable)
        self.armed: dict[str, list[Entry]] = {}  # group -> the pattern this step's collectives may match
        self.previous: dict[str, list[Entry]] = {}  # group -> the pattern as armed (kept after a deviation)
        self.fast = 0  # collectives this rank issued on the fast path
        self.checked = 0  # collectives checked in all (fast or not)
        self.deviations = 0  # armed groups disarmed by a collective that did not match the pattern
        self.armed_steps = 0  # boundaries after which at least one group was armed
        self.candidates: dict[str, tuple[str, list[Entry]]] = {}  # group -> (digest, sequence) of the step ended

    def reset(self, counts: dict[str, int]) -> None:
        """Start afresh (nothing armed) with the groups' sequence numbers ``counts`` (the bench's blocks)."""
        self.start, self.current, self.broken = dict(counts), {}, set()
        self.armed, self.previous, self.candidates = {}, {}, {}

    def position(self, group: str, seq: int) -> int:
        return seq - self.start.get(group, 0)

    def expects(self, group: str, seq: int, op: str, token: str) -> bool:
        """May this collective take the fast path? Its token is the armed pattern's at its in-step position.
        A rank with an armed pattern for the group whose collective does not match is a deviation: the group
        is disarmed until the next boundary (the normal path then compares every collective)."""
        pattern = self.armed.get(group)
        if pattern is None:
            return False
        pos = self.position(group, seq)
        if 0 <= pos < len(pattern) and pattern[pos].token == token:
            return op not in PAIRWISE_OPS  # an all_to_all as in the pattern: compared as always, still armed
        del self.armed[group]
        self.deviations += 1
        return False

    def note(self, group: str, seq: int, token: str, fp: dict[str, Any], record: dict[str, Any],
             fast: bool) -> None:
        """A collective of the group passed the check (``fast``: on the fast path): part of this step's sequence."""
        self.checked += 1
        self.fast += fast
        if not self.enabled:
            return
        cur = self.current.setdefault(group, [])
        if self.position(group, seq) == len(cur):
            cur.append(Entry(token, fp, record))
        else:
            self.broken.add(group)

    def pattern_entry(self, group: str, seq: int) -> Entry | None:
        """The pattern's collective at this position (for a verdict naming the fast ranks' calls)."""
        pattern = self.previous.get(group)
        pos = self.position(group, seq)
        return pattern[pos] if pattern is not None and 0 <= pos < len(pattern) else None

    def end_step(self, counts: dict[str, int]) -> dict[str, str]:
        """The step ended: its sequences become the candidates for the next step's patterns (armed by ``arm``
        once the peers' votes are read), nothing stays armed, and the next step starts at the groups' sequence
        numbers ``counts``. Returns this rank's vote: per group, a digest of the step's sequence (its start,
        tokens, and the next step's start: the in-step positions of the next step are the same on every rank
        that voted it)."""
        mine: dict[str, str] = {}
        if self.enabled:
            for group, cur in self.current.items():
                if group not in self.broken and cur:
                    body = json.dumps([self.start.get(group, 0), [e.token for e in cur], counts.get(group, 0)])
                    mine[group] = hashlib.blake2b(body.encode(), digest_size=12).hexdigest()
        self.candidates = {g: (d, self.current[g]) for g, d in mine.items()}
        self.armed, self.previous = {}, {}
        self.current, self.broken, self.start = {}, set(), dict(counts)
        return mine

    def arm(self, votes: dict[int, dict[str, str]] | None, members: dict[str, tuple[int, ...]]) -> list[str]:
        """Arm each candidate group whose every member voted this rank's digest (``votes``: rank -> its vote;
        None: the exchange did not complete, nothing is armed). Returns the groups armed."""
        armed: dict[str, list[Entry]] = {}
        if votes is not None:
            for group, (digest, entries) in self.candidates.items():
                ranks = members.get(group) or ()
                if ranks and all((votes.get(r) or {}).get(group) == digest for r in ranks):
                    armed[group] = entries
        self.candidates = {}
        self.armed, self.previous = armed, dict(armed)
        self.armed_steps += bool(armed)
        return sorted(armed)

    def summary(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "fast": self.fast, "checked": self.checked,
                "deviations": self.deviations, "armed_steps": self.armed_steps}
