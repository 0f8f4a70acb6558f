"""Results a launch unit's view computes that depend on one file alone are kept on the source for every view
(dslint.program.view_free); those that asked the view are computed in each view. The fixture pair
units/unit_global_before_clean_unit and units/unit_global_after_clean_unit checks the findings either way round."""

from pathlib import Path

from dslint.program.project_view import ProjectView
from dslint.program.rank.function_summaries import _MODULE_ENV, ProjectTaint
from dslint.program.view_free import Watch, asked, per_source, questions
from dslint.sources import make_source


class _Box:
    def __init__(self) -> None:
        self.value = 1


def test_watch_forwards_and_records():
    box = _Box()
    watch = Watch(box)
    assert not asked(watch)
    assert watch.value == 1 and asked(watch)
    watch = Watch(box)
    watch.value = 2
    assert box.value == 2 and asked(watch)
    watch = Watch(box)
    assert isinstance(watch, _Box) and asked(watch)       # even `isinstance` reads `__class__` through it


class _Lookup:
    def __init__(self, answer) -> None:
        self.answer = answer

    def find(self, name: str):
        return self.answer


def test_watch_records_the_lookups_it_lets_through():
    watch = Watch(_Lookup(("f", 1)), frozenset({"find"}))
    assert watch.find("x") == ("f", 1) and not asked(watch)
    assert questions(watch) == [("find", ("x",), {}, ("f", 1))]


def test_per_source_keeps_what_asked_nothing_but_its_lookups():
    src = make_source(Path("a.py"), "a.py", "python", "x = 1\n")
    assert per_source(src, "_k", _Box(), lambda analysis: 7) == 7
    assert per_source(src, "_k", _Box(), lambda analysis: 8) == 7
    assert per_source(src, "_j", _Box(), lambda analysis: analysis.value) == 1 and "_j" not in src.__dict__
    lookups = frozenset({"find"})
    one, other = _Lookup(None), _Lookup(("g", 2))
    assert per_source(src, "_l", one, lambda analysis: analysis.find("f") or "none", lookups) == "none"
    assert per_source(src, "_l", _Lookup(None), lambda analysis: 9, lookups) == "none"      # answered alike
    assert per_source(src, "_l", other, lambda analysis: analysis.find("f") or "none", lookups) == ("g", 2)


def _sources(files: dict[str, str]) -> dict:
    out = {}
    for name, text in files.items():
        out[name] = make_source(Path(name), name, "python", text)
        out[name].module_name = Path(name).stem
    return out


def test_module_environment_shared_by_views_unless_it_asked_the_view():
    src = _sources({
        "ranks.py": "import os\nRANK = int(os.environ['RANK'])\n\ndef rank():\n    return RANK\n",
        "helper.py": "def pick(x):\n    return x\n",
        "derived.py": "from helper import pick\nVALUE = pick(3)\n",
        "local.py": "LOCAL = 3\nif LOCAL:\n    RANK = dist.get_rank()\n",
    })
    one = ProjectTaint.of(ProjectView(list(src.values())))
    env = one.module_env(src["ranks.py"])
    assert env["RANK"].kind == "rank"
    assert src["ranks.py"].__dict__[_MODULE_ENV][0][0] is env    # the file's text and its lookups decided it
    other = ProjectTaint.of(ProjectView([src["ranks.py"]]))
    assert other.module_env(src["ranks.py"]) is env
    one.module_env(src["derived.py"])                              # asks the view for pick's return
    assert _MODULE_ENV not in src["derived.py"].__dict__
    assert one.module_env(src["local.py"]) is ProjectTaint.of(ProjectView([src["local.py"]])).module_env(src["local.py"])
