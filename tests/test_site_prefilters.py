"""The outline pre-filters of the rank analysis (DSL101-DSL104) only decide which files are parsed: each is a
superset of what the libcst analysis finds with every pre-filter off, on the fixtures, dslint itself, the
examples and the installed deepspeed package (a corpus dense in collectives and rank tests).

- `CollectiveSites.site_units` holds every function whose `reaches()` finds a site;
- `CollectiveSites.may_have_sites` holds for every file with a call `classify()` takes for a site;
- `ProjectTaint.may_return_rank` holds for every function whose `returns()` is rank-varying;
- `ProjectTaint._files_calling_function` holds every file with a call `function_for_call` resolves to it.
"""

import pytest

from dslint.program.collective_sites import CollectiveSites
from dslint.program.rank.function_summaries import ProjectTaint
from dslint.program.project_view import ProjectView
from dslint.sources import PythonSource, module_name_for
from tests.test_model_facts import _corpus
from tests.test_outline import no_prefilters  # noqa: F401  (the fixture)

REAL = {"site_units": CollectiveSites.__dict__["site_units"].func, "may_have_sites": CollectiveSites.may_have_sites,
        "may_return_rank": ProjectTaint.may_return_rank,
        "files_calling_function": ProjectTaint._files_calling_function}


@pytest.mark.parametrize("corpus", ["own", "deepspeed"])
def test_outline_prefilters_cover_the_libcst_answers(corpus, request):
    paths = _corpus(corpus)
    sources = [PythonSource(str(p), p.read_text(encoding="utf-8"), module_name=module_name_for(p)) for p in paths]
    project = ProjectView([s for s in sources if s.compiles], deepspeed_version_override="0.19.8")
    request.getfixturevalue("no_prefilters")
    sites, taint = CollectiveSites.of(project), ProjectTaint.of(project)
    units, reached, files_with_sites, returning, resolved = REAL["site_units"](sites), 0, 0, 0, 0
    # every file takes part in the project; a third of deepspeed's is checked (the whole package takes minutes)
    for src in project.python[::3 if corpus == "deepspeed" else 1]:
        facts = src.facts
        if any(sites.classify(src, c.node, (facts.functions.get(c.scope) or _NoClass).class_name) is not None
               for c in facts.calls):
            files_with_sites += 1
            assert REAL["may_have_sites"](sites, src), src.path
        for qual, info in facts.functions.items():
            if sites.reaches(src, info) is not None:
                reached += 1
                assert (id(src), qual) in units, (src.path, qual)
            if taint.returns(src, info) is not None:
                returning += 1
                assert REAL["may_return_rank"](taint, src, qual), (src.path, qual)
        for call in facts.calls:
            caller = facts.functions.get(call.scope)
            hit = taint.function_for_call(src, call.node, call.callee, caller.class_name if caller else None)
            if hit is not None and call.attr == hit[1].name:
                resolved += 1
                assert src in REAL["files_calling_function"](taint, *hit), (src.path, hit[1].qualname)
    # the corpora exercise every filter
    assert min(reached, files_with_sites, returning, resolved) > 10, (reached, files_with_sites, returning, resolved)
    skipped = [s for s in project.python if not REAL["may_have_sites"](sites, s)]
    assert len(skipped) > len(project.python) // 8, (len(skipped), len(project.python))


class _NoClass:
    class_name = None


def _conditional_uses(paths, filtered: bool, monkeypatch):
    """DSL303's facts for every file of `paths`, every attribute taken as trainable (the run-wide freezing
    facts would otherwise hide most classes)."""

    from dslint.program.models import modules as model_facts
    from dslint.program.models.forward_paths import ForwardPaths
    from dslint.rules.base import RuleContext
    from dslint.rules.params import conditional_uses
    walked = [0]
    real_root = ForwardPaths.root

    def counting_root(self, node, *args):
        walked[0] += 1
        return real_root(self, node, *args)
    monkeypatch.setattr(ForwardPaths, "root", counting_root)
    monkeypatch.setattr(model_facts.ModelFacts, "trainable", lambda self, attr: True)
    if not filtered:
        monkeypatch.setattr(model_facts.ModuleClass, "mentions", lambda self, names: True)
    sources = [PythonSource(str(p), p.read_text(encoding="utf-8"), module_name=module_name_for(p)) for p in paths]
    project = ProjectView([s for s in sources if s.compiles])
    out = []
    for src in project.python:
        for attr, root, owner, cond, use, *_rest in conditional_uses(RuleContext(src, project)):
            out.append((src.path, attr.owner.qualname, attr.name, root.qualname, owner.qualname,
                        cond.src.path, cond.node.__class__.__name__, cond.method))
    monkeypatch.undo()
    return out, walked[0]


def test_dsl303_mentions_filter_keeps_every_conditional_use(monkeypatch):
    """`ModuleClass.mentions` only skips roots whose forward paths cannot use the attributes: the same
    conditional uses with and without it, on real model code (the modeling files of 35 transformers models,
    a corpus dense in containers and `if x is not None` paths)."""
    spec = __import__("importlib").util.find_spec("transformers")
    models = __import__("pathlib").Path(spec.origin).parent / "models"
    paths = [f for d in sorted(p for p in models.iterdir() if p.is_dir())[:35] for f in sorted(d.glob("modeling_*.py"))]
    assert len(paths) > 20
    filtered, walks_filtered = _conditional_uses(paths, True, monkeypatch)
    unfiltered, walks_unfiltered = _conditional_uses(paths, False, monkeypatch)
    assert filtered == unfiltered
    print(len(filtered), walks_filtered, walks_unfiltered)
    assert len(filtered) >= 5, filtered
    assert walks_filtered < walks_unfiltered / 2, (walks_filtered, walks_unfiltered)


@pytest.mark.parametrize("corpus", ["own", "deepspeed"])
def test_site_reach_on_demand_equals_the_whole_fixed_point(corpus):
    """`able(unit)` (the search from one function, memoised across queries in any order) answers exactly
    `site_units` (the fixed point over every call of the project)."""
    paths = _corpus(corpus)
    sources = [PythonSource(str(p), p.read_text(encoding="utf-8"), module_name=module_name_for(p)) for p in paths]
    project = ProjectView([s for s in sources if s.compiles], deepspeed_version_override="0.19.8")
    everything = REAL["site_units"](CollectiveSites.of(project))
    units = {(id(s), scope) for s in project.python for _, scope in s.outline.calls}
    for order in (sorted(units), sorted(units, reverse=True)):
        fresh = CollectiveSites(project)
        assert {u for u in order if fresh.able(u)} == everything & units
    assert len(everything) > 10
