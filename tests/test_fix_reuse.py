"""What a `--fix` re-check reuses of the tree it was spliced from (issue 22's `--fix` timing target), and that
each reuse is exact:
- the facts: the fixed text's outline paired with the spliced tree's nodes (`dslint.program.facts.file_facts`) give
  what a fresh source of that text gives, every node being one of the spliced tree's; an import added or
  changed before an untouched statement changes what its calls resolve to;
- the parent index (`PythonSource._parents`): the previous tree's, less the replaced statements' nodes, plus
  the new statements';
- the CPython tree of a file that builds an engine is parsed once per text: the role analysis takes the
  outline's tree (`PythonSource.outline` keeps it, `RoleAnalysis._load` takes it).
Each is compared with what a fresh computation on the same tree gives (node identity included), on crafted
edits and on random edits of real files; and a fix round whose edit changes what an untouched function's calls
resolve to reports what a fresh check of the fixed text reports.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from dslint.sources.cstwalk import children
from dslint.sources import PythonSource, statement_offsets
from tests.conftest import REPO
from tests.test_fix_rounds import CASES, _real_files, random_edits


def _old(text: str) -> PythonSource:
    src = PythonSource("t.py", text)
    src.facts, src._parents            # what the check before a fix round computed
    return src


def _derived(old: PythonSource, text: str) -> PythonSource:
    new = PythonSource("t.py", text)
    new.__dict__["_derived_from"] = old          # as pipeline.gather.carry_over hands it over
    return new


def _facts_shape(facts) -> tuple:
    """The facts without node identity (a fresh parse has other node objects)."""
    import libcst as cst

    code = cst.Module([]).code_for_node

    def calls(cs):
        return [(code(c.node), c.callee, c.scope) for c in cs]
    return (list(facts.imports.items()),
            [(q, f.name, f.class_name, f.params, calls(f.calls)) for q, f in facts.functions.items()],
            [(q, c.name, c.bases, list(c.methods)) for q, c in facts.classes.items()],
            calls(facts.calls))


def _fresh_facts(text: str):
    return PythonSource("t.py", text).facts


def _nodes_in(facts, module) -> bool:
    """Every node the facts hold is a node of `module` (the spliced tree), by identity."""
    ids = set(_fresh_parents(module)) | {id(module)}
    return all(id(c.node) in ids for c in facts.calls) and \
        all(id(f.node) in ids for f in facts.functions.values()) and \
        all(id(c.node) in ids for c in facts.classes.values())


def _fresh_parents(module) -> dict[int, int]:
    out, stack = {}, [module]
    while stack:
        n = stack.pop()
        for kid in children(n):
            out[id(kid)] = id(n)
            stack.append(kid)
    return out


def _check_reuse(old: PythonSource, text: str) -> bool:
    """The derived source's facts and parents equal fresh ones on its tree; True when it was spliced."""
    new = _derived(old, text)
    module = new.module
    spliced = "_spliced" in new.__dict__
    assert _facts_shape(new.facts) == _facts_shape(_fresh_facts(text))
    assert _nodes_in(new.facts, module)
    assert {k: id(v) for k, v in new._parents.items()} == _fresh_parents(module)
    return spliced


@pytest.mark.parametrize("old,new,taken", CASES, ids=[str(i) for i in range(len(CASES))])
def test_reused_facts_and_parents_equal_fresh_ones(old, new, taken):
    spliced = _check_reuse(_old(old), new)
    if taken:
        assert spliced


def test_reuse_on_random_edits_of_real_files_equals_fresh():
    rng = random.Random(2222)
    snippets = [", synced_gpus=True", "x", "\n", "# c\n", "    y = 1\n", "pass\n", "from m import n\n",
                "import os as os2\n", "", "def g():\n    return 1\n", "(", "import torch.distributed as dist\n"]
    spliced = 0
    for path in _real_files():
        text = path.read_text()
        old = _old(text)
        starts = [a for a, _, _ in statement_offsets(old)]
        for _, new in random_edits(rng, text, starts, snippets, 6):
            try:
                compile(new, "t.py", "exec", flags=0x400)
            except (SyntaxError, ValueError):
                continue
            spliced += _check_reuse(old, new)
    assert spliced >= 15, spliced


IMPORTS_BEFORE = "\"\"\"Module.\"\"\"\nimport os\nimport torch\n\nLIMIT = 1\nSTEPS = 2\n\n\ndef f(t, rank):\n    if rank == 0:\n        dist.all_reduce(t)\n    return t\n\n\nclass M(Base):\n    pass\n"


@pytest.mark.parametrize("new", [
    # an import added before the untouched function and class: their calls and bases resolve otherwise
    IMPORTS_BEFORE.replace("import torch\n", "import torch\nimport torch.distributed as dist\nfrom m import Base\n"),
    # an import changed
    IMPORTS_BEFORE.replace("import torch\n", "import numpy as torch\n"),
])
def test_a_changed_import_is_seen_by_the_untouched_statements_after_it(new):
    old = _old(IMPORTS_BEFORE)
    derived = _derived(old, new)
    derived.module
    assert "_spliced" in derived.__dict__
    f = next(s for s in derived.module.body if type(s).__name__ == "FunctionDef")
    assert any(f is s for s in old.module.body)              # the function's node is kept ...
    assert _facts_shape(derived.facts) == _facts_shape(_fresh_facts(new))  # ... and its calls resolved again
    assert _nodes_in(derived.facts, derived.module)
    if "as dist" in new:
        assert [c.callee for c in derived.facts.functions["f"].calls] == ["torch.distributed.all_reduce"]
        assert derived.facts.classes["M"].bases == ["m.Base"]


def test_the_role_analysis_takes_the_outlines_tree(monkeypatch):
    """One CPython parse per text of a file that builds an engine: the outline's tree serves the role scopes;
    a file that builds none keeps no tree."""
    import builtins

    from dslint.engine import check_texts
    script = ("import deepspeed\n\n\ndef main(model, args, loader):\n"
              "    engine, *_ = deepspeed.initialize(model=model, args=args)\n"
              "    for batch in loader:\n        engine.module.generate(**batch, do_sample=True)\n")
    compiled: list[str] = []
    real = builtins.compile

    def counting(source, filename, *a, **k):
        if isinstance(source, str) and filename in ("train.py", "helper.py"):
            compiled.append(filename)
        return real(source, filename, *a, **k)
    monkeypatch.setattr(builtins, "compile", counting)
    report = check_texts({"train.py": script, "helper.py": "def h(x):\n    return x\n"})
    assert [f.code for f in report.findings] == ["DSL104"]          # the roles found the engine's module
    assert compiled.count("train.py") == 1, compiled


RANK_SCRIPT = ('"""Module."""\nimport os\nimport torch\n\nLIMIT = 1\nSTEPS = 2\n\n\ndef f(t, rank):\n'
               '    if rank == 0:\n        dist.all_reduce(t)\n    return t\n\n\ndef g(rank):\n    if rank == 0:\n'
               '        torch.distributed.barrier()\n\n\nif __name__ == "__main__":\n'
               '    f(torch.ones(1), int(os.environ["RANK"]))\n    g(int(os.environ["RANK"]))\n')


def test_a_re_check_sees_an_untouched_function_change_meaning(tmp_path, monkeypatch):
    """A round's edit adds `import torch.distributed as dist` (as a fix adds an import): the untouched
    function's `dist.all_reduce` under `rank == 0` becomes a collective, DSL101 -- the re-check (spliced tree,
    reused parts) reports it, as a fresh check of the new text does."""
    from tests.test_fix_rounds import _checker, _findings
    (tmp_path / "train.py").write_text(RANK_SCRIPT)
    monkeypatch.chdir(tmp_path)
    checker = _checker(tmp_path)
    assert [x["code"] for x in _findings(checker.check_paths([Path(".")]))] == ["DSL101"]    # in g
    old = next(s for s in checker.sources if s.path == "train.py")
    new_text = RANK_SCRIPT.replace("import torch\n", "import torch\nimport torch.distributed as dist\n")
    again = checker.check_paths([Path(".")], overrides={"train.py": new_text})
    new = next(s for s in checker.sources if s.path == "train.py")
    assert new is not old and "_spliced" in new.__dict__
    f = next(s for s in new.module.body if type(s).__name__ == "FunctionDef")
    assert any(f is s for s in old.module.body)                 # the function was not parsed again
    (tmp_path / "train.py").write_text(new_text)
    fresh = _findings(_checker(tmp_path).check_paths([Path(".")]))
    assert [x["code"] for x in fresh] == ["DSL101", "DSL101"] and _findings(again) == fresh
