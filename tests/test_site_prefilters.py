"""The outline pre-filters of the rank analysis (DSL101-DSL104) only decide which files are parsed: each is a
superset of what the libcst analysis finds with every pre-filter off, on the fixtures, dslint itself, the
examples and the installed deepspeed package (a corpus dense in collectives and rank tests).

- `CollectiveSites.site_units` holds every function whose `reaches()` finds a site;
- `CollectiveSites.may_have_sites` holds for every file with a call `classify()` takes for a site;
- `ProjectTaint.may_return_rank` holds for every function whose `returns()` is rank-varying;
- `ProjectTaint._files_calling_function` holds every file with a call `function_for_call` resolves to it.
"""

import pytest

from dslint.analysis.collective_sites import CollectiveSites
from dslint.analysis.rank_taint import ProjectTaint
from dslint.project import ProjectView
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
