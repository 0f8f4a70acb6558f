"""Regular expressions for "any of these words" over whole files.

Python's `re` tries the branches of `a|b|c` one after the other at every position of the text, so a plain
alternation of N words costs about N comparisons per character. The prefilters that scan every file of a run
for a set of words (rank-taint words, MoE family anchors, callee names) spent a few percent of a cold run that
way. `alternation` writes the same set of words as a pattern factored by common prefixes (a trie: `rank`,
`rank_id`, `ranks` → `rank(?:_id|s)?`), which matches at exactly the positions the plain alternation matches
at, testing each character once per trie level.

What differs is only which word is taken where one word is a prefix of another at the same position (the
factored form prefers the longer one, a plain alternation the one listed first). The callers only ask where a
match starts or whether there is one; where a pattern continues after the words, the continuation decides
between them as it would in the plain form.
"""

from __future__ import annotations

import re
from typing import Iterable


def alternation(words: Iterable[str]) -> str:
    """A pattern (no capturing groups) matching exactly the given non-empty words, factored by prefixes."""
    trie: dict = {}
    for word in set(words):
        if not word:
            raise ValueError("alternation() needs non-empty words")
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _branch(trie) if trie else "(?!)"


def _branch(node: dict) -> str:
    ends = "" in node
    alts = [re.escape(ch) + _branch(node[ch]) for ch in sorted(k for k in node if k)]
    if not alts:
        return ""
    if len(alts) == 1 and not ends:
        return alts[0]
    body = "(?:" + "|".join(alts) + ")"
    return body + "?" if ends else body
