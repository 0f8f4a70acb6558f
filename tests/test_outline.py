"""The CPython-ast outline is the model of a file's names, scopes and calls, paired with libcst's nodes in source
order (`dslint.program.facts.file_facts`), and the text pre-filters of the whole-project scans never change a result (they
only decide which files are parsed)."""

import re
from pathlib import Path

import pytest

from dslint.config import Settings
from dslint.engine import Checker
from dslint.sources import PythonSource, module_name_for

ROOT = Path(__file__).parent.parent
FILES = [*sorted((ROOT / "tests" / "fixtures").rglob("*.py")), *sorted((ROOT / "dslint").rglob("*.py")),
         *sorted((ROOT / "examples").rglob("*.py"))]


_EDGES = '''\
import torch.distributed as dist
from .helpers import wrap as w
x = "é→ü"; dist.all_reduce(x)
(f)(x)
(a.b())()
a.b(x).c(d())


@w(deco(1))
@dist.barrier
def outer(p, /, q=dflt(), *args, r: ann() = 2, **kw) -> ret():
    s = f"{g(1)!r:>{width()}} {h(2)=}"
    t = [k(i) for i in rng() if keep(i)]
    u = lambda v=lam_default(): lam_body(v)
    if (n := walrus()) > 0:
        pass
    match subject():
        case {"k": 1} if guarded():
            in_case()
    return cond() if test() else other()


class Outer(Base, metaclass=meta()):
    attr = field()

    class Inner:
        def method(self):
            return dist.all_gather(
                [x],
                y(),
            )

    async def run(self):
        async with ctx() as c:
            await c.go()
        try:
            import os as tried
        except err():
            import sys as tried
            tried.handler_call()
        else:
            tried.else_call()
'''


def test_calls_pair_with_their_libcst_nodes():
    """Each call of FileFacts holds its own libcst node, with the outline's callee and scope, on the syntax that
    orders nodes differently in the two trees (parenthesised callees, chained calls, decorators, defaults and
    annotations, f-strings, comprehensions, lambdas, walrus, match guards, `x if c else y`, multi-line calls,
    non-ASCII text before a call, async code, nested classes, imports in `try`/`except`/`else`)."""
    src = PythonSource("pkg/t.py", _EDGES, module_name="pkg.t")
    facts = src.facts
    assert [(_code(c.node.func), c.callee, c.scope) for c in facts.calls] == [
        ("dist.all_reduce", "torch.distributed.all_reduce", "<module>"),
        ("(f)", "f", "<module>"), ("(a.b())", None, "<module>"), ("a.b", "a.b", "<module>"),
        ("a.b(x).c", None, "<module>"), ("a.b", "a.b", "<module>"), ("d", "d", "<module>"),
        # a decorator's calls are in the scope of the function it decorates
        ("w", "pkg.helpers.wrap", "outer"), ("deco", "deco", "outer"),
        ("dflt", "dflt", "outer"), ("ann", "ann", "outer"), ("ret", "ret", "outer"),
        ("g", "g", "outer"), ("width", "width", "outer"), ("h", "h", "outer"),
        ("k", "k", "outer"), ("rng", "rng", "outer"), ("keep", "keep", "outer"),
        ("lam_default", "lam_default", "outer"), ("lam_body", "lam_body", "outer"),
        ("walrus", "walrus", "outer"), ("subject", "subject", "outer"), ("guarded", "guarded", "outer"),
        ("in_case", "in_case", "outer"), ("cond", "cond", "outer"), ("test", "test", "outer"),
        ("other", "other", "outer"),
        ("meta", "meta", "<module>"), ("field", "field", "<module>"),
        ("dist.all_gather", "torch.distributed.all_gather", "Outer.Inner.method"), ("y", "y", "Outer.Inner.method"),
        ("ctx", "ctx", "Outer.run"), ("c.go", "c.go", "Outer.run"), ("err", "err", "Outer.run"),
        # names resolve in libcst's field order: a `try`'s handlers (their body before their type) before its `else`
        ("tried.handler_call", "sys.handler_call", "Outer.run"), ("tried.else_call", "sys.else_call", "Outer.run"),
    ]
    assert {q: (f.node.name.value, f.class_name, f.params, len(f.calls)) for q, f in facts.functions.items()} == {
        "outer": ("outer", None, ["p", "q", "r", "args", "kw"], 20),
        "Outer.Inner.method": ("method", "Outer.Inner", ["self"], 2), "Outer.run": ("run", "Outer", ["self"], 5)}
    assert {q: (c.node.name.value, c.bases, list(c.methods)) for q, c in facts.classes.items()} == {
        "Outer": ("Outer", ["Base"], ["run"]), "Outer.Inner": ("Inner", [], ["method"])}
    assert facts.classes["Outer.Inner"].methods["method"] is facts.functions["Outer.Inner.method"]
    assert [_code(c.node.func) for c in facts.calls_in("Outer.Inner.method")] == ["dist.all_gather", "y"]
    assert _code(facts.calls_in("Outer.Inner.method")[0].node).endswith("y(),\n)")     # the whole multi-line call
    assert [_code(c.node.func) for c in facts.calls_in("<module>")][:2] == ["dist.all_reduce", "(f)"]


def _code(node) -> str:
    import libcst as cst
    return cst.Module([]).code_for_node(node)


def test_redefinitions_keep_their_own_nodes_and_calls():
    """A name defined twice: `functions`/`classes` hold the last definition, each with its own node and calls;
    the earlier def's calls stay with it (as its methods stay with the earlier class)."""
    text = ("def f():\n    first()\n\n\ndef f():\n    second()\n\n\nclass C:\n    def m(self):\n        one()\n\n\n"
            "class C:\n    def n(self):\n        two()\n")
    facts = PythonSource("t.py", text).facts
    assert [_code(c.node.func) for c in facts.calls_in("f")] == ["second"]
    assert [(_code(c.node.func), c.scope) for c in facts.calls] == [("first", "f"), ("second", "f"), ("one", "C.m"),
                                                                    ("two", "C.n")]
    assert facts.functions["f"].node.body.body[0].body[0].value.func.value == "second"
    assert list(facts.classes["C"].methods) == ["n"] and facts.classes["C"].node.body.body[0].name.value == "n"
    assert facts.functions["C.m"].class_name == "C" and [_code(c.node.func) for c in facts.calls_in("C.m")] == ["one"]


def test_a_starred_base_is_not_a_base_name():
    """`class A(*BASES, nn.Module)`: the starred expression is no base's name ("", as for any non-name base)."""
    facts = PythonSource("t.py", "from torch import nn\n\n\nclass A(*BASES, nn.Module):\n    pass\n").facts
    assert facts.classes["A"].bases == ["", "torch.nn.Module"]


def test_a_corrupted_pairing_raises():
    """The pairing checks counts per kind, each call's callee shape and each definition's name: an outline that
    does not describe the tree is an error, never a call holding another call's node."""
    import copy
    from dslint.program.facts import PairingError, file_facts
    src = PythonSource("t.py", "import torch.distributed as dist\n\n\nclass A:\n    def f(self):\n"
                               "        dist.barrier()\n        log(x)\n\n\ndef g():\n    pass\n")
    assert [c.callee for c in file_facts(src.module, src.outline).calls] == ["torch.distributed.barrier", "log"]

    def corrupted(change):
        outline = copy.deepcopy(src.outline)
        change(outline)
        with pytest.raises(PairingError):
            file_facts(src.module, outline)

    corrupted(lambda o: (o.calls.reverse(), o.shapes.reverse()))      # two calls swapped
    corrupted(lambda o: (o.calls.pop(), o.shapes.pop()))              # a call missing
    corrupted(lambda o: o.defs.reverse())                               # functions swapped
    corrupted(lambda o: o.class_defs.clear())                           # a class missing
    corrupted(lambda o: o.shapes.__setitem__(0, ("barrier", True, "torch", None)))   # another owner


def test_a_pairing_failure_is_that_files_internal_error(tmp_path, monkeypatch):
    """An outline that does not pair with a file's tree costs that file's facts only: its rules report an
    internal error (exit 3) and the other file's findings stand -- also where the run reads the file's facts
    before any rule does (the config paths its calls name)."""
    import dslint.program.outline as outline_module
    build = outline_module.build_outline

    def broken(tree, package=""):
        out = build(tree, package)
        if any(isinstance(n, outline_module.ast.FunctionDef) and n.name == "broken" for n in tree.body):
            out.calls.reverse()
            out.shapes.reverse()
        return out

    import dslint.program.per_file as per_file        # where a source's outline is built
    monkeypatch.setattr(per_file, "build_outline", broken)
    body = ("import deepspeed\nimport torch.distributed as dist\n\n"
            "engine, *_ = deepspeed.initialize(model=m, config='ds.json')\n"
            "if dist.get_rank() == 0:\n    engine.save_checkpoint('ckpt')\n")
    (tmp_path / "ds.json").write_text('{"train_batch_size": 8}\n')
    (tmp_path / "a.py").write_text(body)
    (tmp_path / "b.py").write_text(body + "\n\ndef broken():\n    log(1)\n")
    report = Checker(Settings(root=tmp_path, deepspeed_version="0.19.8"), jobs=1).check_paths(
        [tmp_path / "a.py", tmp_path / "b.py"])
    assert [(Path(f.path).name, f.code) for f in report.findings] == [("a.py", "DSL101")]
    errors = [e for e in report.errors if e.kind == "internal-error"]
    assert errors and {Path(e.path).name for e in errors} == {"b.py"}
    assert all("PairingError" in e.message for e in errors)


def test_every_repository_file_pairs():
    """Every Python file of the fixtures, dslint and the examples pairs (the checks of `file_facts` pass): the
    corpus figure is in docs/architecture.md."""
    pairs = 0
    for path in FILES:
        src = PythonSource(str(path), path.read_text(), module_name=module_name_for(path))
        if src.compiles:
            facts = src.facts
            pairs += len(facts.calls) + len(src.outline.defs) + len(src.outline.class_defs)
            assert len(facts.calls) == len(src.outline.calls) and len(facts.functions) == len(src.outline.functions)
    assert pairs > 10_000


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
    from dslint.program.models import modules as model_facts
    monkeypatch.setattr(PythonSource, "may_call", lambda self, names: True)
    monkeypatch.setattr(model_facts, "_FREEZE_TEXT", re.compile(""))
    import dslint.program.project_view as project
    monkeypatch.setattr(project, "_CONFIG_FLAG", re.compile(""))
    monkeypatch.setattr(project, "_CONFIG_KEYWORD_TEXT", re.compile(""))
    from dslint.program.rank.function_summaries import ProjectTaint
    monkeypatch.setattr(ProjectTaint, "may_return_rank", lambda self, src, qual: True)
    monkeypatch.setattr(ProjectTaint, "_files_calling", lambda self, name: list(self.project.python))
    monkeypatch.setattr(ProjectTaint, "_files_calling_function", lambda self, src, info: list(self.project.python))
    from dslint.program import collective_sites
    from dslint.program.collective_sites import CollectiveSites
    monkeypatch.setattr(collective_sites, "_may_bind_role", lambda src, moe_classes: True)
    monkeypatch.setattr(CollectiveSites, "may_have_sites", lambda self, src: True)
    monkeypatch.setattr(CollectiveSites, "able", lambda self, unit: True)
    from dslint.program.models import param_groups
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
    from dslint.program.models.moe import engine_calls
    from dslint.program.project_view import ProjectView
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
    from dslint.program.project_view import ProjectView
    from dslint.program.rank.function_summaries import ProjectTaint
    from dslint.program.rank.collective_hazards import rank_hazards
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
    from dslint.program.rank.value_uniformity import _seeded_tops
    text = ("import torch.distributed as dist\n\n\ndef who():\n    return dist.get_rank()\n\n\n"
            "def plain():\n    return 3\n\n\nclass Box:\n    def size(self):\n        return 1\n")
    assert _seeded_tops(text, PythonSource("t.py", text).outline) == {"who"}
    with_global = text + "RANK = dist.get_rank()\n"
    assert _seeded_tops(with_global, PythonSource("t.py", with_global).outline) is None
    decorated = text.replace("class Box:", "@on_rank(0)\nclass Box:")
    assert _seeded_tops(decorated, PythonSource("t.py", decorated).outline) == {"who", "Box"}
    assert _seeded_tops("x = 1\n", PythonSource("t.py", "x = 1\n").outline) == set()
