"""The CPython-ast outline agrees with the libcst facts it stands in for, and the text pre-filters of the
whole-project scans never change a result (they only decide which files are parsed)."""

import re
from collections import Counter
from pathlib import Path

import pytest

from dslint.config import Settings
from dslint.engine import Checker
from dslint.sources import PythonSource, module_name_for

ROOT = Path(__file__).parent.parent
FILES = [*sorted((ROOT / "tests" / "fixtures").rglob("*.py")), *sorted((ROOT / "dslint").rglob("*.py")),
         *sorted((ROOT / "examples").rglob("*.py"))]


def test_outline_matches_libcst_facts():
    compared = 0
    for path in FILES:
        src = PythonSource(str(path), path.read_text(), module_name=module_name_for(path))
        if not src.compiles:
            continue
        facts, outline = src.facts, src.outline
        assert outline.functions == set(facts.functions), path
        assert set(outline.classes) == set(facts.classes), path
        for qual, info in facts.classes.items():
            assert outline.classes[qual].bases == info.bases, (path, qual)
        assert outline.imports == facts.imports, path
        assert Counter(outline.calls) == Counter((c.callee, c.scope) for c in facts.calls), path
        assert Counter(zip(outline.calls, outline.shapes)) == Counter(
            ((c.callee, c.scope), _cst_shape(c.node.func)) for c in facts.calls), path
        compared += 1
    assert compared > 100


def _cst_shape(func):
    """What `CollectiveSites._classify` reads of a callee, from the libcst tree."""
    import libcst as cst
    from dslint.analysis.collective_sites import _tail
    if isinstance(func, cst.Attribute):
        owner = func.value
        return func.attr.value, True, _tail(owner), _tail(owner.value) if isinstance(owner, cst.Attribute) else None
    return (func.value if isinstance(func, cst.Name) else None), False, None, None


def test_call_shapes_follow_call_chains():
    text = "a.b(x).c()\nnet.cuda().eval()\nself.engine.module.generate(x)\nf()(y)\nxs[0].step()\n"
    src = PythonSource("t.py", text)
    assert Counter(src.outline.shapes) == Counter(_cst_shape(c.node.func) for c in src.facts.calls)
    assert ("generate", True, "module", "engine") in src.outline.shapes
    assert ("step", True, None, None) in src.outline.shapes and (None, False, None, None) in src.outline.shapes
    assert ("c", True, "a", None) in src.outline.shapes


def test_may_call_sees_calls_through_aliases_and_not_definitions():
    src = PythonSource("t.py", "from deepspeed import initialize as ds_init\nengine = ds_init(model=m)\n")
    assert src.may_call(frozenset({"initialize"}))
    assert PythonSource("t.py", "engine, *_ = deepspeed.initialize (\n  model=m)\n").may_call(frozenset({"initialize"}))
    assert not PythonSource("t.py", "def initialize(x):\n    return x\n# initialize later\n").may_call(
        frozenset({"initialize"}))
    assert not PythonSource("t.py", "self._initialize(x)\n").may_call(frozenset({"initialize"}))


@pytest.fixture
def no_prefilters(monkeypatch):
    """Every project scan reads every file: what the pre-filters must not change."""
    from dslint.analysis import model_facts
    monkeypatch.setattr(PythonSource, "may_call", lambda self, names: True)
    monkeypatch.setattr(model_facts, "_FREEZE_TEXT", re.compile(""))
    import dslint.project as project
    monkeypatch.setattr(project, "_CONFIG_FLAG", re.compile(""))
    monkeypatch.setattr(project, "_CONFIG_KEYWORD_TEXT", re.compile(""))
    from dslint.analysis.rank_taint import ProjectTaint
    monkeypatch.setattr(ProjectTaint, "may_return_rank", lambda self, src, qual: True)
    monkeypatch.setattr(ProjectTaint, "_files_calling", lambda self, name: list(self.project.python))
    monkeypatch.setattr(ProjectTaint, "_files_calling_function", lambda self, src, info: list(self.project.python))
    from dslint.analysis import collective_sites
    from dslint.analysis.collective_sites import CollectiveSites
    monkeypatch.setattr(collective_sites, "_may_bind_role", lambda src, moe_classes: True)
    monkeypatch.setattr(CollectiveSites, "may_have_sites", lambda self, src: True)
    monkeypatch.setattr(CollectiveSites, "able", lambda self, unit: True)
    from dslint.analysis import param_groups
    monkeypatch.setattr(param_groups, "may_construct_optimizer", lambda src: True)
    monkeypatch.setattr(model_facts.ModuleClass, "mentions", lambda self, names: True)
    from dslint.program.roles import RoleAnalysis
    monkeypatch.setattr(RoleAnalysis, "_seed_files",       # every file read from the start, not on demand
                        lambda self: [s for s in self.project.python if s.outline is not None])


def _findings(files: list[Path], options: dict):
    settings = Settings(root=files[0].parent, **{"deepspeed_version": "0.19.8", **options})
    report = Checker(settings, jobs=1).check_paths(files)
    return [f.model_dump() for f in report.findings], report.errors


def test_prefilters_change_no_finding(monkeypatch, request):
    """Every fixture case (and the bundled examples) gives the same findings with every scan reading every
    file as with the pre-filters."""
    from tests.test_fixtures import _cases, _files, _options
    runs = [(_files(case), _options(_files(case))) for case in _cases()]
    runs.append((sorted((ROOT / "examples").rglob("*.py")), {}))
    monkeypatch.chdir(ROOT)
    filtered = [_findings(files, options) for files, options in runs]
    request.getfixturevalue("no_prefilters")
    unfiltered = [_findings(files, options) for files, options in runs]
    assert len(runs) > 70 and sum(bool(f[0]) for f in filtered) > 35, (len(runs), sum(bool(f[0]) for f in filtered))
    for (files, _), a, b in zip(runs, filtered, unfiltered):
        assert a == b, files


def test_engine_calls_prefilter_keeps_aliased_and_subclassed_trainers():
    """A trainer called through an alias (`SFTTrainer as T`, no `Trainer(` in the text) or as a local subclass
    (`class MoETrainer(Trainer)`) is still found; a file without such a call is not parsed."""
    from dslint.analysis.moe_facts import engine_calls
    from dslint.project import ProjectView
    aliased = PythonSource("a.py", "from trl import SFTTrainer as T\nt = T(model=model)\nt.train()\n")
    local = PythonSource("b.py", "from transformers import Trainer\n\nclass MoETrainer(Trainer):\n    pass\n\n"
                                 "runner = MoETrainer(model=model)\n")
    plain = PythonSource("c.py", "def build_trainer(cfg):\n    return cfg\n")
    project = ProjectView([aliased, local, plain])
    assert [(c.kind, c.call.callee) for c in engine_calls(project, aliased)] == [("trainer", "trl.SFTTrainer")]
    assert [(c.kind, c.call.attr) for c in engine_calls(project, local)] == [("trainer", "MoETrainer")]
    assert engine_calls(project, plain) == [] and "module" not in plain.__dict__


def test_rank_helpers_found_through_files_without_rank_words(tmp_path):
    """The outline closure over helpers: `a.py` and `b.py` spell no rank word; `c.py` returns the rank. The
    guard in a.py is still rank-dependent, and a file whose calls reach no such helper is not parsed."""
    (tmp_path / "a.py").write_text("import torch.distributed as dist\nfrom b import leader\n\n\ndef save():\n"
                                   "    if leader():\n        dist.barrier()\n")
    (tmp_path / "b.py").write_text("from c import who\n\n\ndef leader():\n    return who() == 0\n")
    (tmp_path / "c.py").write_text("import torch.distributed as dist\n\n\ndef who():\n    return dist.get_rank()\n")
    (tmp_path / "d.py").write_text("import torch.distributed as dist\nfrom b import unrelated\n\n\n"
                                   "def f():\n    if unrelated():\n        dist.barrier()\n")
    (tmp_path / "e.py").write_text("def unrelated():\n    return 3\n")
    (tmp_path / "b.py").write_text((tmp_path / "b.py").read_text() + "from e import unrelated\n")
    from dslint.engine import collect, read_sources
    from dslint.project import ProjectView
    from dslint.analysis.rank_taint import ProjectTaint
    from dslint.analysis.rank_hazards import rank_hazards
    sources = read_sources(collect([tmp_path], Settings(root=tmp_path)))[0]
    project = ProjectView(sources, root=tmp_path)
    by_name = {Path(s.path).name: s for s in sources}
    taint = ProjectTaint.of(project)
    assert taint.may_return_rank(by_name["b.py"], "leader") and taint.may_return_rank(by_name["c.py"], "who")
    assert not taint.may_return_rank(by_name["e.py"], "unrelated")
    assert [h.code for h in rank_hazards(project, by_name["a.py"])] == ["DSL101"]
    assert rank_hazards(project, by_name["d.py"]) == []
    assert "module" not in by_name["d.py"].__dict__      # decided without a libcst parse


def test_taint_words_seed_only_the_functions_that_spell_them():
    """A rank word inside a module-scope function or class (its decorators included) seeds it and what is
    nested in it; one in module-level code seeds every function of the file."""
    from dslint.analysis.rank_taint import _seeded_tops
    text = ("import torch.distributed as dist\n\n\ndef who():\n    return dist.get_rank()\n\n\n"
            "def plain():\n    return 3\n\n\nclass Box:\n    def size(self):\n        return 1\n")
    assert _seeded_tops(text, PythonSource("t.py", text).outline) == {"who"}
    with_global = text + "RANK = dist.get_rank()\n"
    assert _seeded_tops(with_global, PythonSource("t.py", with_global).outline) is None
    decorated = text.replace("class Box:", "@on_rank(0)\nclass Box:")
    assert _seeded_tops(decorated, PythonSource("t.py", decorated).outline) == {"who", "Box"}
    assert _seeded_tops("x = 1\n", PythonSource("t.py", "x = 1\n").outline) == set()
