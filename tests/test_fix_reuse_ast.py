"""What a `--fix` re-check reuses of the CPython tree of the text it was fixed from (issue 22's `--fix` timing
target), and that each reuse is exact:
- the fixed text's CPython tree (`dslint.sources.astsplice.spliced_ast`, read by its outline): the statements the
  change touches parsed again, the others the previous tree's nodes; equal to `compile(..., PyCF_ONLY_AST)` of
  the text, positions included (`ast.dump(..., include_attributes=True)`), or not taken;
- the role scopes (`roles._Collector`): a function whose node the fixed tree keeps gets the scopes its body's
  walk found before (with this source, and its classes' bases resolved again through the imports); equal to a
  fresh collection of the text;
- a re-check whose edit changes the meaning of an untouched function (an import changed on the same line, so
  the function's node and positions are kept) reports what a fresh check of the fixed text reports.
Crafted cases at the edges of what a splice may take, random edits of real files, and the fix run on them.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from dslint.sources.astsplice import spliced_ast
from dslint.program.per_file import cpython_tree
from dslint.sources import PythonSource
from tests.conftest import REPO
from tests.test_fix_rounds import random_edits


def _tree(text: str):
    try:
        return compile(text, "t.py", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError):
        return None


def _dump(tree) -> str:
    return ast.dump(tree, include_attributes=True)


def _same_as_fresh(before: str, text: str) -> bool:
    """The splice equals a fresh parse where it is taken; True when taken."""
    old = _tree(before)
    got = spliced_ast(old, before, text)
    if got is None:
        return False
    fresh = _tree(text)
    assert fresh is not None, text
    assert _dump(got) == _dump(fresh), text
    return True


BASE = ("\"\"\"Doc.\"\"\"\nimport os\nimport torch\n\n\n@dec(1)\ndef f(a, b=g(1)):\n    x = h(a)\n    return x\n\n\n"
        "class C(Base):\n    y: int = 1\n\n    def m(self, t):\n        return t.sum()\n\n\nz = 1; w = f(z)\n"
        "v = (1 +\n     2)\nu = 3 \\\n    + 4\n\n\ndef last():\n    return call(1)\n")

# (old, new, taken): taken True / False / None (either: what matters is equality when taken)
CASES = [
    # an argument added on one line (no line added): kept before and after
    (BASE, BASE.replace("return call(1)", "return call(1, synced_gpus=True)"), True),
    (BASE, BASE.replace("x = h(a)", "x = h(a, k=1)"), True),
    # lines added / removed: the rest of the file parsed again
    (BASE, BASE.replace("x = h(a)\n", "x = h(a)\n    y = 2\n"), True),
    (BASE, BASE.replace("import torch\n", "import torch\nimport torch.distributed as dist\n"), True),
    (BASE, BASE.replace("    y: int = 1\n\n", ""), True),
    # two statements on one line, a statement over several lines, a continuation line
    (BASE, BASE.replace("z = 1; w = f(z)", "z = 2; w = f(z)"), True),
    (BASE, BASE.replace("w = f(z)", "w = f(z, 1)"), True),
    (BASE, BASE.replace("v = (1 +", "v = (5 +"), True),
    (BASE, BASE.replace("u = 3 \\", "u = 7 \\"), True),
    (BASE, BASE.replace("    + 4", "    + 8"), True),
    # the decorator of a kept function, the base of a kept class, the docstring, the last line
    (BASE, BASE.replace("@dec(1)", "@dec(2)"), True),
    (BASE, BASE.replace("class C(Base)", "class C(Other)"), True),
    (BASE, BASE.replace("\"\"\"Doc.\"\"\"", "\"\"\"Other.\"\"\""), True),
    (BASE, BASE + "q = 1\n", True),
    (BASE, BASE[:-1], None),
    # edits that lean on a neighbour: an indented line continuing the function before, an `else` of nothing,
    # a decorator of the function after, a continuation into the next statement
    (BASE, BASE.replace("\n\n\nclass C", "\n    extra = 1\n\n\nclass C"), None),
    (BASE, BASE.replace("\n\n\ndef last", "\n@deco\ndef last"), None),
    (BASE, BASE.replace("v = (1 +\n     2)\n", "v = 1 \\\n"), None),
    ("if a:\n    x = 1\ny = 2\nz = 3\n", "if a:\n    x = 1\nelse:\n    x = 2\nz = 3\n", None),
    ("try:\n    x = 1\nexcept E:\n    pass\nz = 3\n", "try:\n    x = 1\nexcept E:\n    pass\nfinally:\n    q()\nz = 3\n",
     None),
    # comments and blank lines only
    (BASE, BASE.replace("\n\n\nclass C", "\n# a comment\n\nclass C"), True),
    # text that no longer parses: never taken
    (BASE, BASE.replace("x = h(a)", "x = h(a"), False),
    (BASE, BASE.replace("return call(1)", "return call(1"), False),
    # what is never spliced: carriage returns, the grammar changed by a future import
    ("x = 1\r\ny = 2\r\nz = 3\r\n", "x = 1\r\ny = 5\r\nz = 3\r\n", False),
    ("from __future__ import barry_as_FLUFL\nx = 1\ny = 2\n", "from __future__ import barry_as_FLUFL\nx = 1\ny = 3\n",
     False),
    # non-ASCII text before the change on the same line (columns are UTF-8 bytes)
    ("s = 'é'; t = f(1)\nz = 2\n", "s = 'é'; t = f(1, 2)\nz = 2\n", True),
]


@pytest.mark.parametrize("old,new,taken", CASES, ids=[str(i) for i in range(len(CASES))])
def test_spliced_cpython_tree_equals_a_whole_parse(old, new, taken):
    got = _same_as_fresh(old, new)
    if taken is not None:
        assert got == taken


def _real_files() -> list[Path]:
    picks = ["dslint/fixes/python.py", "dslint/sources/__init__.py", "dslint/program/roles.py", "examples",
             "tests/fixtures/static/moe"]
    out = []
    for pick in picks:
        path = REPO / pick
        out += sorted(path.rglob("*.py"))[:6] if path.is_dir() else [path]
    return out


SNIPPETS = [", synced_gpus=True", "x", "\n", "# c\n", "    y = 1\n", "pass\n", "from m import n\n", "",
            "def g():\n    return 1\n", "(", ")", "else:\n    pass\n", "@dec\n", "\\\n", "a; b\n", "'''", ":", "é"]


def _line_starts(text: str) -> list[int]:
    return [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n" and text[i + 1:i + 2] not in ("", " ", "\n")]


def test_splicing_real_files_equals_a_whole_parse():
    rng = random.Random(2203)
    taken = kept_after = 0
    for path in _real_files():
        text = path.read_text()
        for _, new in random_edits(rng, text, _line_starts(text), SNIPPETS, 25):
            if _same_as_fresh(text, new):
                taken += 1
                kept_after += new.count("\n") == text.count("\n")
    assert taken >= 60 and kept_after >= 20, (taken, kept_after)


# --- the role scopes --------------------------------------------------------------------------------------

def _scopes_shape(col) -> tuple:
    def scope(sc):
        return (sc.qual, sc.cls, sc.parent.qual if sc.parent is not None else None, sc.params, sc.positional,
                sorted(sc.bound), [_dump(b) for b in sc.binds], [_dump(c) for c in sc.calls],
                _dump(sc.node) if sc.qual != "<module>" else None)
    return ([scope(sc) for sc in col.scopes.values()], list(col.scopes),
            [(c.qual, c.bases, c.fields, c.is_dataclass) for c in col.classes.values()], list(col.classes))


def _collect(src: PythonSource):
    from dslint.program.roles import _Collector
    col = _Collector(src, src.__dict__.pop("_previous_scopes", None))     # as RoleAnalysis._load
    tree = src.__dict__.pop("_ast_tree", None)
    col.run(tree if tree is not None else _tree(src.text))
    return col


def _old(text: str) -> PythonSource:
    """A source as the check before a fix round leaves it: its role scopes collected."""
    src = PythonSource("t.py", text)
    src.outline
    src.__dict__["_role_scopes"] = _collect(src)
    return src


def _reused_scopes_equal_fresh(old: PythonSource, text: str) -> int:
    """The scopes of a source derived from `old` equal a fresh source's; how many function bodies were reused."""
    new = PythonSource("t.py", text)
    new.__dict__["_derived_from"] = old
    if new.outline is None:
        return 0
    previous = new.__dict__.get("_previous_scopes")
    col = _collect(new)
    fresh = PythonSource("t.py", text)
    fresh.outline
    assert new.too_complex == fresh.too_complex
    assert _scopes_shape(col) == _scopes_shape(_collect(fresh))
    assert all(sc.src is new for sc in col.scopes.values()) and all(c.src is new for c in col.classes.values())
    if previous is None:
        return 0
    return sum(1 for node, *_ in col.bodies.values() if id(node) in previous.bodies)


NESTED = ("import torch\nfrom m import Base\n\n\ndef outer(a):\n    def inner(b=k(1)):\n        class L(Base):\n"
          "            def meth(self):\n                return g(self)\n        return L\n    y = [i for i in a]\n"
          "    return inner\n\n\nclass T(Base):\n    @staticmethod\n    def s(x):\n        return x\n\n"
          "    class N(torch.nn.Module):\n        def f(self):\n            return 1\n\n\ndef outer(a):\n"
          "    return a\n\n\nif __name__ == '__main__':\n    outer(1)\n")


@pytest.mark.parametrize("new", [
    NESTED.replace("return g(self)", "return g(self, 1)"),
    # the imports changed on their line: the kept classes' bases resolve otherwise
    NESTED.replace("from m import Base", "from n import Base"),
    NESTED.replace("import torch\n", "import tor as torch\n"),
    # a redefinition changed, the module's code changed, lines added before kept functions
    NESTED.replace("def outer(a):\n    return a", "def outer(a):\n    return a + 1"),
    NESTED.replace("outer(1)", "outer(2)"),
    NESTED.replace("import torch\n", "import torch\nimport os\n"),
])
def test_reused_role_scopes_equal_fresh_ones(new):
    old = _old(NESTED)
    reused = _reused_scopes_equal_fresh(old, new)
    if new.count("\n") == NESTED.count("\n"):
        assert reused >= 3, reused


def test_reused_role_scopes_on_random_edits_of_real_files_equal_fresh():
    rng = random.Random(2204)
    reused = 0
    for path in _real_files():
        text = path.read_text()
        old = _old(text)
        for _, new in random_edits(rng, text, _line_starts(text), SNIPPETS, 6):
            reused += _reused_scopes_equal_fresh(old, new)
    assert reused >= 50, reused


# --- the re-check ---------------------------------------------------------------------------------------

ENGINE_SCRIPT = ("import os\nimport torch\nimport deepspeed\nfrom helpers import MoE\n\n\n"
                 "def build(args, expert):\n"
                 "    model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n"
                 "    e, *_ = deepspeed.initialize(model=model, args=args)\n    return e\n\n\n"
                 "def run(runner, loader):\n    for batch in loader:\n"
                 "        out = runner.module.generate(**batch, do_sample=True)\n\n\n"
                 "def sync(t, rank):\n    if rank == 0:\n        dist.all_reduce(t)\n    return t\n\n\n"
                 "if __name__ == '__main__':\n    run(build(None, None), [])\n"
                 "    sync(torch.ones(1), int(os.environ['RANK']))\n")


@pytest.mark.parametrize("new,kept,codes", [
    # the module's code no longer hands the engine to the kept `run`: its parameter is no engine, DSL104 goes
    (ENGINE_SCRIPT.replace("run(build(None, None), [])", "run(make(None, None), [])"), ["build", "run", "sync"], []),
    # the engine is no longer DeepSpeed's (in `build`, parsed again): the kept `run`'s generate is no hazard
    (ENGINE_SCRIPT.replace("deepspeed.initialize(", "deepspark.initialize("), ["run", "sync"], []),
    # `dist` becomes torch.distributed (same line): the kept function's all_reduce under `rank == 0`, DSL101
    (ENGINE_SCRIPT.replace("import torch\n", "import torch; import torch.distributed as dist\n"),
     ["build", "run", "sync"], ["DSL104", "DSL101"]),
])
def test_a_re_check_with_kept_nodes_sees_what_a_fresh_check_sees(tmp_path, monkeypatch, new, kept, codes):
    """A round's edit changes, on its own line, what untouched functions mean: their CPython nodes and role
    scopes are reused (their text and positions did not change), and the re-check reports what a fresh check
    of the new text reports."""
    from tests.test_fix_rounds import _checker, _findings
    (tmp_path / "train.py").write_text(ENGINE_SCRIPT)
    monkeypatch.chdir(tmp_path)
    checker = _checker(tmp_path)
    before = _findings(checker.check_paths([Path(".")]))
    assert [f["code"] for f in before] == ["DSL104"]
    source = next(s for s in checker.sources if s.path == "train.py")
    kept = {id(f) for f in cpython_tree(source).body if isinstance(f, ast.FunctionDef) and f.name in kept}
    again = _findings(checker.check_paths([Path(".")], overrides={"train.py": new}))
    derived = next(s for s in checker.sources if s.path == "train.py")
    assert {id(f) for f in cpython_tree(derived).body} >= kept          # the functions' nodes were kept ...
    scopes = derived.__dict__.get("_role_scopes")       # (read when the new text still builds an engine)
    assert scopes is None or {id(node) for node, *_ in scopes.bodies.values()} >= kept
    assert [f["code"] for f in again] != [f["code"] for f in before]      # ... and what they mean changed
    (tmp_path / "train.py").write_text(new)
    fresh = _findings(_checker(tmp_path).check_paths([Path(".")]))
    assert again == fresh and [f["code"] for f in fresh] == codes


# --- the complexity guard ---------------------------------------------------------------------------------

DEEP = "x = " + "(" * 210 + "1" + ")" * 210 + "\n"
CHAIN = "y = " + " + ".join(["a"] * 1200) + "\n"
ELIFS = "if a == 0:\n    pass\n" + "".join(f"elif a == {i}:\n    pass\n" for i in range(1, 600))


@pytest.mark.parametrize("new", [
    BASE.replace("z = 1; w = f(z)\n", DEEP),                       # over a limit in the part parsed again
    BASE.replace("z = 1; w = f(z)\n", CHAIN),
    BASE.replace("z = 1; w = f(z)\n", ELIFS),
    BASE.replace("x = h(a)", "x = h(a, k=1)"),                        # within every limit
    BASE.replace("z = 1; w = f(z)\n", "z = 1; w = f(z)\n" + "q = " + "(" * 40 + "1" + ")" * 40 + "\n"),
])
def test_a_fixed_text_is_guarded_as_a_fresh_one(new):
    """The complexity guard's verdict on a fixed text equals a fresh source's: the part parsed again is guarded
    before CPython reads it (its verdict found there, where it is the text's, else the whole text is
    guarded), the statements kept were within the limits in the previous text."""
    old = PythonSource("t.py", BASE)
    old.outline
    old.__dict__["_role_scopes"] = _collect(old)
    derived = PythonSource("t.py", new)
    derived.__dict__["_derived_from"] = old
    fresh = PythonSource("t.py", new)
    assert (derived.outline is None) == (fresh.outline is None)
    assert derived.too_complex == fresh.too_complex
    if fresh.too_complex is None:
        assert _dump(derived.__dict__.get("_ast_tree") or cpython_tree(derived) or _tree(new)) == _dump(_tree(new))
        assert "_previous_scopes" in derived.__dict__                 # spliced
    else:
        assert "_previous_scopes" not in derived.__dict__


# --- the facts' node walk ---------------------------------------------------------------------------------

def test_the_facts_node_walk_reuses_the_kept_statements_and_equals_a_fresh_walk():
    """`PythonSource.facts` walks the libcst tree one top-level statement at a time (`cstwalk.statement_nodes`);
    a fixed text's spliced tree takes again what the previous walk found under the statements it kept (the same
    node objects), and the result is the whole tree's walk (`nodes_of`), node identity included, and the facts
    a fresh source of the text gives (`test_fix_reuse._check_reuse`)."""
    from dslint.sources.cstwalk import nodes_of
    from dslint.program.facts import KINDS
    from dslint.sources import statement_offsets
    from tests.test_fix_reuse import _check_reuse, _derived
    from tests.test_fix_reuse import _old as _old_cst
    rng = random.Random(2205)
    reused = spliced = 0
    for path in _real_files():
        text = path.read_text()
        old = _old_cst(text)
        starts = [a for a, _, _ in statement_offsets(old)]
        for _, new in random_edits(rng, text, starts, SNIPPETS, 6):
            if _tree(new) is None:
                continue
            if not _check_reuse(old, new):
                continue
            spliced += 1
            derived = _derived(old, new)
            facts = derived.facts
            module = derived.module
            walked = derived.__dict__["_statement_nodes"]
            fresh = nodes_of(module, KINDS)
            again = [[n for hit in walked.values() for n in hit[1][k]] for k in range(len(KINDS))]
            assert [[id(n) for n in kind] for kind in again] == [[id(n) for n in kind] for kind in fresh]
            assert [id(c.node) for c in facts.calls] == [id(n) for n in fresh[0]]
            previous = old.__dict__["_statement_nodes"]
            reused += sum(1 for key, hit in walked.items() if previous.get(key) is hit)
    assert spliced >= 10 and reused >= 100, (spliced, reused)
