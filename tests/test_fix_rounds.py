"""What a `--fix` round re-checks, and that re-checking less changes nothing (issue 22's `--fix` timing target).

A round's re-check starts from the previous check's sources (`dslint.pipeline.gather.carry_over`): unchanged files keep their
parses, a changed Python file gets its libcst tree by re-parsing only the top-level statements the change
touches (`sources.spliced_module`), and a file's CPython parse -- which says whether a fix broke it -- is the
one the re-check makes anyway (`fix_command.parsed_in`). Each is exact:
- the spliced tree equals a whole parse of the new text (`deep_equals`, code, the module's defaults) on
  crafted edge cases (header and footer comments, tabs, a first indented block inside the change, CRLF, a
  coding line, no final newline, comments after a block) and on edits of real files, or is not used;
- the report after `--fix` equals a fresh check of the fixed files, also when a fix in one file creates a
  finding in another (a config key renamed), and a second `--fix` changes nothing;
- a round that leaves a file unparsable is undone for that file, and the other files' fixes stand.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dslint.findings import Edit, Finding, Fix
from dslint.sources import PythonSource, parse_module, spliced_module, statement_offsets
from tests.conftest import REPO


def _whole(text: str):
    try:
        return parse_module(text)
    except Exception:
        return None


def _source(text: str) -> PythonSource:
    src = PythonSource("t.py", text)
    src.module          # parsed, as the check before a fix round parses it
    return src


def _same_tree(spliced, text: str) -> bool:
    whole = _whole(text)
    return whole is not None and spliced.deep_equals(whole) and spliced.code == text and all(
        getattr(spliced, k) == getattr(whole, k)
        for k in ("default_indent", "default_newline", "has_trailing_newline", "encoding"))


# (old text, new text, whether the splice must be taken): edits a fix makes and the edge cases of libcst's
# whole-file facts
BODY = ("# header comment\n\n\"\"\"doc.\"\"\"\nimport os\n\n\ndef f(x):\n    y = g(x)\n    # inside\n    return y\n"
        "    # trailing, indented: the block's\n# top level: the next statement's\n\n\nclass C:\n"
        "    def m(self):\n        return f(1)\n\n\nout = f(2)\n# footer\n")
CASES = [
    # a keyword added to a call in a function (DSL104's fix)
    (BODY, BODY.replace("y = g(x)", "y = g(x, synced_gpus=True)"), True),
    # in the last statement, before the module footer
    (BODY, BODY.replace("out = f(2)", "out = f(2, z=3)"), True),
    # a line inserted at a statement boundary (an import added after the import block)
    (BODY, BODY.replace("import os\n", "import os\nfrom m import n\n"), True),
    # an indented comment line at the end of a block: the block's footer, not the next statement's
    (BODY, BODY.replace("    # trailing, indented: the block's\n",
                        "    # trailing, indented: the block's\n    # another\n"), True),
    # a statement removed, one added
    (BODY, BODY.replace("class C:\n    def m(self):\n        return f(1)\n\n\n", ""), True),
    (BODY, BODY.replace("class C:\n", "print(0)\n\n\nclass C:\n"), True),
    # lines added after the last statement (the footer's boundary), before the first (the header's)
    (BODY, BODY.replace("out = f(2)\n", "out = f(2)\nprint(out)\n"), False),
    ("# a\n# b\n# c\nimport os\nx = 1\ny = 2\n", "# a\n# b\n# c\n# new\nimport os\nx = 1\ny = 2\n", False),
    # comment lines between a block and the next statement, the deeper one after a top-level one
    ("import a\n\n\ndef f():\n    return 1\n# a\nx = 1\ny = 2\n",
     "import a\n\n\ndef f():\n    return 1\n# a\n    # deep\nx = 1\ny = 2\n", None),
    ("import a\n\n\ndef f():\n    return 1\n# a\nx = 1\ny = 2\n",
     "import a\n\n\ndef f():\n    return 1\n    # deep\n# a\nx = 1\ny = 2\n", None),
    # the first indented block changes its indentation: the file's default indentation changes with it
    (BODY, BODY.replace("    y = g(x)\n    # inside\n    return y\n    # trailing, indented: the block's\n",
                        "\ty = g(x)\n\treturn y\n"), False),
    # a tab-indented file
    ("import a\n\n\ndef f():\n\treturn 1\n\n\ndef g():\n\treturn 2\n",
     "import a\n\n\ndef f():\n\treturn 1\n\n\ndef g():\n\treturn 2 + 1\n", None),
    # the change in the header, in the footer, on the first two lines (a coding line), at the very end
    (BODY, BODY.replace("# header comment", "# header, changed"), False),
    (BODY, BODY.replace("# footer", "# footer, changed"), False),
    ("# -*- coding: latin-1 -*-\nx = 1\ny = 2\nz = 3\n", "# -*- coding: utf-8 -*-\nx = 1\ny = 2\nz = 3\n", False),
    ("x = 1\ny = 2\nz = 3\n", "x = 1\ny = 2\nz = 3\nw = 4\n", False),
    # CRLF line endings, a file without a final newline
    ("x = 1\r\ny = 2\r\nz = 3\r\n", "x = 1\r\ny = 5\r\nz = 3\r\n", False),
    ("x = 1\ny = 2\nz = f(3)", "x = 1\ny = 2\nz = f(3, a=1)", False),
    # a decorated definition, an if/else chain, a statement of several lines in brackets
    ("import a\n\n@dec(1)\ndef f():\n    if a:\n        return 1\n    else:\n        return 2\n\nz = 1\n",
     "import a\n\n@dec(1, 2)\ndef f():\n    if a:\n        return 1\n    else:\n        return 3\n\nz = 1\n", True),
    ("import a\ncall(\n    1,\n    2,\n)\nz = 1\n", "import a\ncall(\n    1,\n    2,\n    k=3,\n)\nz = 1\n", True),
]


@pytest.mark.parametrize("old,new,taken", CASES, ids=[str(i) for i in range(len(CASES))])
def test_spliced_tree_equals_a_whole_parse(old, new, taken):
    got = spliced_module(_source(old), new)
    if taken is not None:
        assert (got is not None) == taken
    if got is not None:
        assert _same_tree(got, new)


def _real_files() -> list[Path]:
    picks = ["dslint/fixes/python.py", "dslint/sources/__init__.py", "examples", "tests/fixtures/static/moe"]
    out = []
    for pick in picks:
        path = REPO / pick
        out += sorted(path.rglob("*.py"))[:6] if path.is_dir() else [path]
    return out


def random_edits(rng: random.Random, text: str, starts: list[int], snippets: list[str], count: int):
    """``count`` texts, each ``text`` with one snippet written over 0-4 characters at a random place or at the
    start of a top-level statement (``starts``)."""
    for _ in range(count):
        at = rng.choice([rng.randrange(len(text)), rng.choice(starts)])
        end = min(len(text), at + rng.choice([0, 0, 1, 4]))
        yield at, text[:at] + rng.choice(snippets) + text[end:]


def test_splicing_real_files_at_every_kind_of_place_equals_a_whole_parse():
    """Edits at random places of real files (inside statements, at their boundaries, lines added and removed):
    wherever the splice is taken its tree is the whole parse's, and it is taken for most edits inside a
    statement."""
    rng = random.Random(22)
    snippets = [", synced_gpus=True", "x", "\n", "# c\n", "    y = 1\n", "pass\n", "  # deep\n",
                "from m import n\n", "", "def g():\n    return 1\n", "'s'", "(", ":"]
    taken = compared = 0
    for path in _real_files():
        text = path.read_text()
        src = _source(text)
        starts = [a for a, _, _ in statement_offsets(src)]
        for at, new in random_edits(rng, text, starts, snippets, 5):
            got = spliced_module(src, new)
            whole = _whole(new)
            if got is None:
                continue
            assert whole is not None, (path, at)     # a text libcst rejects is never spliced
            assert _same_tree(got, new), (path, at, new[max(0, at - 40):at + 40])
            taken += 1
        # an argument added inside a function: the edit DSL104's fix makes
        for start in starts[len(starts) // 3::max(1, len(starts) // 3)]:
            call = re.compile(r"(?<!def )(?<![\w.])[A-Za-z_][\w.]*\(").search(text, start)
            if call is None:
                continue
            new = text[:call.end()] + "synced_gpus=True, " + text[call.end():]
            if _whole(new) is not None:
                compared += 1
                got = spliced_module(src, new)
                assert got is not None and _same_tree(got, new), (path, call.start())
    assert taken >= 12 and compared >= 5, (taken, compared)


# --- the fix run ---------------------------------------------------------------------------------------

HELPERS = "".join(f"\n\ndef helper_{i}(x):\n    # helper {i}\n    return x * {i}\n" for i in range(40))
SCRIPT = ("import deepspeed\nfrom deepspeed.moe.layer import MoE\n" + HELPERS +
          "\n\ndef main(loader, args, expert):\n"
          "    model = Net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n"
          "    engine, *_ = deepspeed.initialize(model=model, args=args)\n"
          "    for batch in loader:\n        out = engine.module.generate(**batch, do_sample=True)\n"
          "\n\nif __name__ == '__main__':\n    main(None, None, None)\n")


def _checker(root: Path):
    from dslint.config import Settings
    from dslint.engine import Checker
    return Checker(Settings(root=root, deepspeed_version="0.19.8"), jobs=1)


def _findings(report) -> list:
    return [f.model_dump(mode="json") for f in report.findings]


def test_re_check_parses_only_the_changed_statement_and_reports_as_a_fresh_check(tmp_path, monkeypatch):
    from dslint import sources
    from dslint.fix_command import run_fixes
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "notes.py").write_text("import deepspeed\nprint('untouched')\n")
    monkeypatch.chdir(tmp_path)
    parsed: list[str] = []
    whole = sources.parse_module

    def recording(text):
        parsed.append(text)
        return whole(text)
    monkeypatch.setattr(sources, "parse_module", recording)
    checker = _checker(tmp_path)
    outcome = run_fixes(checker, [Path(".")], unsafe=False)
    fixed = outcome.texts["train.py"]
    assert "generate(**batch, do_sample=True, synced_gpus=True)" in fixed and outcome.rounds == 1
    assert SCRIPT in parsed and fixed not in parsed            # the fixed text was never parsed whole
    assert max(len(t) for t in parsed if t != SCRIPT) < len(SCRIPT) // 4
    notes = [s for s in checker.sources if s.path == "notes.py"]
    fresh = _checker(tmp_path)
    monkeypatch.setattr(sources, "parse_module", whole)
    assert _findings(outcome.report) == _findings(fresh.check_paths([Path(".")], overrides=outcome.texts))
    assert notes and notes[0] is next(s for s in checker.sources if s.path == "notes.py")   # carried over


MODEL = ("import torch\nimport deepspeed\nfrom torch import nn\n\n\nclass VLM(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n        self.lm = nn.Linear(8, 8)\n"
         "        self.projector = nn.Linear(4, 8)\n\n    def forward(self, text, images=None):\n"
         "        if images is not None:\n            text = torch.cat([self.projector(images), text])\n"
         "        return self.lm(text)\n\n\n"
         'engine, _, loader, _ = deepspeed.initialize(model=VLM(), config="ds.json")\n'
         "for batch in loader:\n"
         '    engine.backward(engine(batch["text"], images=batch.get("images")).sum())\n')
MISSPELT = '{"train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 2}}\n'


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)


def test_a_finding_that_a_fix_creates_in_another_file_is_reported(tmp_path):
    """Renaming the misspelt `zero_optimisation` (an unsafe fix of ds.json) turns ZeRO-2 on, under which the
    model's conditionally used projector (in train.py, which no fix touched) is DSL303: the re-check reports
    it, as a fresh check of the fixed files does, and a second --fix changes nothing."""
    (tmp_path / "train.py").write_text(MODEL)
    (tmp_path / "ds.json").write_text(MISSPELT)
    from dslint.engine import check_texts
    assert [f.code for f in check_texts({"train.py": MODEL, "ds.json": MISSPELT}).findings] == ["DSL401"]
    run = _cli(tmp_path, "--fix", "--unsafe-fixes", "--format", "json", ".")
    report = json.loads(run.stdout)
    assert run.returncode == 1, run.stderr
    assert [(f["code"], f["path"]) for f in report["findings"]] == [("DSL303", "train.py")]
    assert report["fixes"]["applied"] == 1 and report["fixes"]["files"] == ["ds.json"]
    assert '"zero_optimization"' in (tmp_path / "ds.json").read_text()
    fresh = json.loads(_cli(tmp_path, "--format", "json", ".").stdout)
    assert fresh["findings"] == report["findings"]
    texts = {p: (tmp_path / p).read_bytes() for p in ("train.py", "ds.json")}
    again = json.loads(_cli(tmp_path, "--fix", "--unsafe-fixes", "--format", "json", ".").stdout)
    assert again["fixes"]["applied"] == 0 and again["findings"] == report["findings"]
    assert {p: (tmp_path / p).read_bytes() for p in texts} == texts


def test_a_fix_that_creates_a_fixable_finding_is_fixed_in_the_next_round():
    from dslint.testing import fix_files
    script = ('import deepspeed\nengine, *_ = deepspeed.initialize(model=Net(), config="ds.json")\n'
              "for batch in loader:\n    out = engine.module.generate(**batch)\n")
    out = fix_files({"train.py": script, "ds.json": '{"train_micro_batch_size_per_gpu": 1, '
                                                    '"zero_optimisation": {"stage": 3}}\n'})
    assert out.rounds == 2 and [f.code for f in out.applied] == ["DSL401", "DSL104"]
    assert "synced_gpus=True" in out.texts["train.py"] and not out.report.findings


def test_a_round_that_breaks_a_file_is_undone_for_it_and_the_others_stand(tmp_path, monkeypatch):
    from dslint.fix_command import fix_loop, parsed_in
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "ds.json").write_text('{\n  "train_micro_batch_size_per_gpu": 1,\n  "bfloat16": {"enabled": true}\n}\n')
    monkeypatch.chdir(tmp_path)
    checker = _checker(tmp_path)
    paths = [Path(".")]
    report = checker.check_paths(paths)
    assert {f.code for f in report.findings} == {"DSL104", "DSL402"}
    breaking = Finding(code="DSL104", name="x", severity="error", path="train.py", line=1, column=1, end_line=1,
                       end_column=1, message="a fix that breaks the file",
                       fix=Fix(description="break", applicability="safe",
                               edits=[Edit(path="train.py", line=1, column=1, end_line=1, end_column=1,
                                           content="def (\n")]))
    report.findings = [f for f in report.findings if f.code != "DSL104"] + [breaking]
    sources = list(checker.sources)
    outcome = fix_loop(lambda t: checker.check_paths(paths, overrides=t), report, {s.path: s.text for s in sources},
                       {s.path: s.kind for s in sources}, False, parsed_in(checker))
    assert outcome.broken == ["train.py"] and list(outcome.texts) == ["ds.json"]
    assert '"bf16"' in outcome.texts["ds.json"] and outcome.fixed == 1
    fresh = _checker(tmp_path).check_paths(paths, overrides=outcome.texts)
    assert _findings(outcome.report) == _findings(fresh)
    assert [f.code for f in outcome.report.findings] == ["DSL104"]       # train.py as it is on disk


def test_parse_status_comes_from_the_check_or_its_cache_without_parsing_again(tmp_path, monkeypatch):
    """`Checker.parsed`: from the outline the check built, else from the result cache's program facts of that
    text (a run answered from the cache builds no outline); unknown (None) for a file the cache says does not
    compile, which `fix_loop` then compiles itself. A cached `--fix` run gives the uncached one's result."""
    from dslint.config import Settings
    from dslint.engine import Checker
    from dslint.fix_command import run_fixes
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "broken.py").write_text("import deepspeed\ndef f(:\n")
    monkeypatch.chdir(tmp_path)
    settings = Settings(root=tmp_path, deepspeed_version="0.19.8")
    first = Checker(settings, cache_dir=tmp_path / "cache", jobs=1)
    first.check_paths([Path(".")])
    by_path = {s.path: s for s in first.sources}
    assert first.parsed(by_path["train.py"]) is True and first.parsed(by_path["broken.py"]) is False
    second = Checker(settings, cache_dir=tmp_path / "cache", jobs=1)
    second.check_paths([Path(".")])
    by_path = {s.path: s for s in second.sources}
    assert second.parsed(by_path["train.py"]) is True and "outline" not in by_path["train.py"].__dict__
    assert second.parsed(by_path["broken.py"]) is None
    assert Checker(settings, jobs=1).parsed(by_path["train.py"]) is None          # no check, no cache: unknown
    uncached = run_fixes(Checker(settings, jobs=1), [Path(".")], unsafe=False)
    for _ in range(2):                  # the second time, every check of the run is answered from the cache
        cached = run_fixes(Checker(settings, cache_dir=tmp_path / "cache", jobs=1), [Path(".")], unsafe=False)
        assert cached.texts == uncached.texts and _findings(cached.report) == _findings(uncached.report)
