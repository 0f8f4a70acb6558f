"""The complexity guard (dslint/sources/guard.py): a file whose syntax would crash libcst's native parser (SIGSEGV, no
report at all) or exhaust the rules' recursion is reported as DSL001 "could not be analysed" at the token that
crossed the limit, and the other files of the run keep their findings."""

import json
from pathlib import Path

import pytest

from dslint.engine import check_texts
from dslint.sources.guard import MAX_CHAIN, MAX_DEPTH, MAX_ELIFS, MAX_STRINGS, _estimate, check, scan

HAZARD = "import torch.distributed as dist\nrank = dist.get_rank()\nif rank == 0:\n    dist.barrier()\n"


def _hostile() -> dict[str, str]:
    """The inputs that killed `dslint check` (exit 139) or ran for minutes, one file each."""
    return {
        "paren.py": "x = " + "(" * 2000 + "1" + ")" * 2000 + "\n",
        "lists.py": "x = " + "[" * 5000 + "]" * 5000 + "\n",
        "unary.py": "x = " + "-" * 100_000 + "1\n",
        "attrs.py": "x = a" + ".b" * 100_000 + "\n",
        "calls.py": "x = f" + "()" * 100_000 + "\n",
        "plus.py": "x = " + "+".join(["a"] * 100_000) + "\n",
        "nots.py": "x = " + "not " * 20_000 + "a\n",
        "ands.py": "x = " + " and ".join(["a"] * 20_000) + "\n",
        "strings.py": "x = (" + "\n".join(["'a'"] * 20_000) + ")\n",
        "elifs.py": "if a == 0:\n    pass\n" + "".join(f"elif a == {i}:\n    pass\n" for i in range(1, 5000)),
    }


@pytest.mark.parametrize("name", sorted(_hostile()))
def test_each_hostile_input_is_refused_with_a_position(name):
    text = _hostile()[name]
    verdict = check(text)
    assert verdict is not None
    assert 1 <= verdict.line <= text.count("\n") + 1 and verdict.column >= 1


def test_the_limits_are_where_the_measures_cross_them():
    deep = "x = " + "(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH + "\n"
    assert check(deep) is None and scan(deep)[0].depth == MAX_DEPTH
    assert "nested" in check("x = " + "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1) + "\n").reason
    chain = "x = a" + ".b" * MAX_CHAIN + "\n"
    assert check(chain) is None and scan(chain)[0].chain == MAX_CHAIN
    assert "chaining" in check("x = a" + ".b" * (MAX_CHAIN + 1) + "\n").reason
    elifs = "if a == 0:\n    pass\n" + "".join(f"elif a == {i}:\n    pass\n" for i in range(MAX_ELIFS))
    assert check(elifs) is None and scan(elifs)[0].elifs == MAX_ELIFS
    assert "elif" in check(elifs + f"elif a == -1:\n    pass\n").reason


def test_a_table_of_concatenated_string_literals_is_analysed_up_to_its_own_limit():
    """A run of implicitly concatenated literals (a character table, one literal per line: 300 in a real
    repository's text normaliser) is not an operator chain: within `MAX_STRINGS` the file is analysed and its
    findings are reported; one literal more is refused at the literal that crossed the limit."""
    table = "TABLE = (\n" + "".join(f"    'c{i}'  # row {i}\n" for i in range(MAX_STRINGS + 1)) + ")\n"
    assert MAX_STRINGS > MAX_CHAIN and check(table) is None
    assert scan(table)[0].strings == MAX_STRINGS and scan(table)[0].chain == 0
    findings = check_texts({"train.py": table + HAZARD}).findings
    assert [f.code for f in findings] == ["DSL101"]
    over = table.replace(")\n", "    'last'\n)\n", 1)
    verdict = check(over)
    assert "concatenated string literals" in verdict.reason and verdict.line == MAX_STRINGS + 3
    apart = "x = 'a' 'b'\n" + "y = 'c'\n" * 10 + "z = ('d'\n 'e')\n"     # runs end with their statement
    assert scan(apart)[0].strings == 1


def test_separators_end_a_chain_and_strings_and_comments_hold_no_operators():
    many = "x = [" + ", ".join(["a + b"] * 5000) + "]\n"                # commas: 5,000 short operands
    assert check(many) is None
    lines = "".join(f"y{i} = a.b.c(d)[0] + 1\n" for i in range(5000))    # statements: 5,000 short lines
    assert check(lines) is None
    text = "x = '" + "+" * 5000 + "'  # " + "-" * 5000 + "\n"
    assert check(text) is None and scan(text)[0].chain == 0


def test_the_estimate_never_undercounts_the_tokenizer():
    samples = list(_hostile().values()) + [
        "x = f(a, b).g(c)[d] + 'e' 'f' - (g if h else i)\n",
        "def f(a, b=1, *c, **d) -> int:\n    return a.b(c)(d)[e] ** -f\n",
        "x = (\n  'a'  # c\n  'b'\n  f'c'\n)\n",
        "x = 1e-5 + 0x1f - 1.5j\ny = lambda a: lambda b: not a or b\n",
    ]
    for text in samples:
        measures, _ = scan(text, (10**9, 10**9, 10**9))
        depth, chain, strings = _estimate(text)
        assert depth >= measures.depth and chain >= measures.chain and strings >= measures.strings, text[:80]


def test_a_refused_file_is_dsl001_and_the_other_files_keep_their_findings():
    files = {**_hostile(), "train.py": HAZARD}
    report = check_texts(files)
    by_path = {}
    for f in report.findings:
        by_path.setdefault(f.path, []).append(f)
    assert [f.code for f in by_path["train.py"]] == ["DSL101"]
    for name in _hostile():
        (finding,) = by_path[name]
        assert finding.code == "DSL001" and finding.message.startswith("could not be analysed: ")
    assert not report.errors


def test_the_cli_survives_a_folder_of_hostile_inputs(tmp_path, dslint_cli):
    for name, text in {**_hostile(), "train.py": HAZARD}.items():
        (tmp_path / name).write_text(text)
    proc = dslint_cli("check", "--format", "json", str(tmp_path), timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    codes = sorted((f["path"].rsplit("/", 1)[-1], f["code"]) for f in data["findings"])
    assert ("train.py", "DSL101") in codes
    assert sorted(n for n, c in codes if c == "DSL001") == sorted(_hostile())


def test_the_text_report_of_a_megabyte_line_shows_a_window_around_the_column(tmp_path, dslint_cli):
    (tmp_path / "attrs.py").write_text("x = a" + ".b" * 100_000 + "\n")
    proc = dslint_cli("check", str(tmp_path / "attrs.py"), timeout=120)
    assert proc.returncode == 1 and "could not be analysed" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) < 400
    frame = [line for line in proc.stdout.splitlines() if line.startswith("  ") and "|" in line]
    code, marks = frame[0], frame[1]
    column = int(proc.stdout.split(":", 3)[2])
    # the caret sits under the character at the reported column
    window_start = max(0, column - 1 - 40)
    assert code.split("| ", 1)[1][marks.split("| ", 1)[1].index("^")] == ("x = a" + ".b" * 100_000)[column - 1]
    assert window_start > 0 and code.split("| ", 1)[1].startswith("…")


def test_the_quick_bound_holds_only_for_files_within_the_limits():
    """`within_bound` says True only when the tokenizer's exact measures are within the limits: on the samples
    above, on real code with low limits (where it has to say False), and on generated token soups."""
    from dslint.sources.guard import within_bound
    real = (Path(__file__).parent.parent / "dslint" / "engine.py").read_text()
    samples = list(_hostile().values()) + [real, "x = a.b.c.d.e.f\n", "x = (a +\n b +\n c +\n d)\n",
                                           "f(a.b.c.d, e)\n", "x = 'a' 'b' 'c' 'd' 'e'\n", "x = a == b == c == d\n"]
    for text in samples:
        measures, _ = scan(text, (10**9, 10**9, 10**9))
        for limit in (3, 5, 30, 200):
            if within_bound(text, limit, limit):
                assert measures.depth <= limit and measures.chain <= limit, (limit, text[:80])
    assert not within_bound("x = a.b.c.d.e.f\n", 3, 3) and within_bound(real, MAX_DEPTH, MAX_CHAIN)


hypothesis = pytest.importorskip("hypothesis", reason="the test extra installs it (constraints/test.txt pins it)")
st = hypothesis.strategies
_TOKENS = ["a", "b1", "f", "not", "and", "or", "if", "else", "lambda", "in", "is", "for", "x", ".", "+", "-", "*",
           "**", "==", "<=", "!=", "=", "+=", ":=", ",", ";", ":", "(", ")", "[", "]", "{", "}", "'s'", '"t"',
           "'''u\nv'''", "# c\n", "\n", "\\\n", " ", "1e-5"]


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(st.lists(st.sampled_from(_TOKENS), max_size=120), st.integers(min_value=1, max_value=12))
def test_the_quick_bound_never_undercounts_generated_token_soups(tokens, limit):
    from dslint.sources.guard import within_bound
    text = " ".join(tokens) + "\n"
    if within_bound(text, limit, limit):
        measures, _ = scan(text, (10**9, 10**9, 10**9))
        assert measures.depth <= limit and measures.chain <= limit


def test_a_runs_size_limit_is_its_own_and_does_not_outlive_it():
    """`--max-file-size` sets the Python analysis cap for its run only: a later check in the same process (the
    language server, the test suite) starts from the process's own limit again."""
    from dslint import config
    from dslint.sources import guard

    before = guard.MAX_SOURCE_CHARS
    settings = config.Settings()
    settings.max_file_size = 2048
    text = "import torch.distributed as dist\n" + "x = 1\n" * 1000  # 6 KiB: over this run's limit
    report = check_texts({"big.py": text}, settings)
    assert [f.code for f in report.findings] == ["DSL001"] and "2.0 KiB limit" in report.findings[0].message
    assert guard.MAX_SOURCE_CHARS == before
    assert check("x = 1\n" * 1000) is None
