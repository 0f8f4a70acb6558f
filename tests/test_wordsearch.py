"""The factored word alternations (dslint/sources/wordsearch.py) and the prefilters written with them match where
the plain alternations they replace match."""

import random
import re

import pytest

from dslint.sources import PythonSource
from dslint.sources.wordsearch import alternation

_ALPHABET = "ab_(. \nd"


def _plain(words) -> re.Pattern:
    return re.compile("|".join(re.escape(w) for w in sorted(words)))


@pytest.mark.parametrize("seed", range(40))
def test_matches_start_where_the_plain_alternation_does(seed):
    rng = random.Random(seed)
    words = {"".join(rng.choice("ab_") for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 8))}
    factored, plain = re.compile(alternation(words)), _plain(words)
    for _ in range(30):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40)))
        assert [i for i in range(len(text) + 1) if factored.match(text, i)] == \
            [i for i in range(len(text) + 1) if plain.match(text, i)], (words, text)
        hit, want = factored.search(text), plain.search(text)
        assert (hit and hit.start()) == (want and want.start())
        # where a continuation follows, the continuation decides between words as it does in the plain form
        assert [m.span() for m in re.finditer(rf"\b(?:{alternation(words)})\b", text)] == \
            [m.span() for m in re.finditer(rf"\b(?:{plain.pattern})\b", text)]


def test_special_characters_and_the_empty_set():
    assert re.fullmatch(alternation({"a.b", "a*", "a"}), "a.b") and not re.search(alternation({"a.b"}), "axb")
    assert re.search(alternation(set()), "anything") is None
    with pytest.raises(ValueError):
        alternation({""})


@pytest.mark.parametrize("suffix", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_may_call_is_the_call_pattern_on_the_text(seed, suffix):
    """`PythonSource.may_call` (text part): `name(` / `xname(` with `suffix`, not after `def `, through blanks."""
    rng = random.Random(seed)
    names = frozenset({"Trainer", "init"})
    head = r"\b\w*" if suffix else r"(?<![\w])"
    reference = re.compile(rf"(?<!def ){head}(Trainer|init)\s*\(")
    pieces = ["Trainer", "init", "def ", "(", " ", "\n", "x", "_", ".", "é", "1", "de", "f "]
    for _ in range(60):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        src = PythonSource("t.py", text)
        src.__dict__["outline"] = None           # the text test alone (no import aliases)
        assert src.may_call(names, suffix) == bool(reference.search(text)), text
