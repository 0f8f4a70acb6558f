"""Value roles (dslint/program/roles.py): DeepSpeed engines and the models they wrap followed through
assignments, unpacking, containers, attributes, parameters and returns; the query rules call; hand-off traces;
files read on demand."""

import pytest
import textwrap

import libcst as cst

from dslint.program.roles import RoleAnalysis
from dslint.program.project_view import ProjectView
from dslint.sources import PythonSource


def _project(files: dict[str, str]) -> ProjectView:
    sources = [PythonSource(path, textwrap.dedent(text), module_name=path[:-3].replace("/", "."))
               for path, text in files.items()]
    return ProjectView(sources)


def _roles(project: ProjectView, path: str, expr: str, scope: str = "<module>") -> list:
    src = next(s for s in project.python if s.path == path)
    return RoleAnalysis.of(project).model_roles(src, cst.parse_expression(expr), scope)


def test_unpacking_subscripts_returns_and_module():
    project = _project({"t.py": """
        import deepspeed
        a, opt, _, _ = deepspeed.initialize(model=net, config=cfg)
        b = deepspeed.initialize(model=net2, config=cfg)[0]
        c, *_ = deepspeed.initialize(model=net3, config=cfg)
        whole = deepspeed.initialize(model=net4, config=cfg)
        inf = deepspeed.init_inference(plain, mp_size=2)

        def build():
            e, *_ = deepspeed.initialize(model=net5, config=cfg)
            return e, 3

        d, n = build()
        pair = [a, b]
        table = {"actor": c}
        for m in pair:
            pass
        t = table["actor"]
        """})
    for name in ("a", "b", "c", "inf", "d", "m", "t"):
        kinds = [r.kind for r in _roles(project, "t.py", name)]
        assert kinds and set(kinds) == {"engine"}, (name, kinds)
    assert _roles(project, "t.py", "whole") == []            # the tuple itself is no engine
    assert _roles(project, "t.py", "opt") == []
    assert _roles(project, "t.py", "n") == []
    assert {r.kind for r in _roles(project, "t.py", "a.module")} == {"model"}
    assert {r.kind for r in _roles(project, "t.py", "net")} == {"model"}      # wrapped by initialize
    assert {r.kind for r in _roles(project, "t.py", "plain")} == {"model"}    # wrapped by init_inference
    assert _roles(project, "t.py", "a.module.eval()")             # methods that return their receiver
    returned = _roles(project, "t.py", "d")[0]
    assert "returned by build() at t.py:13" in returned.trace()


def test_fields_constructor_parameters_and_trace_across_files():
    project = _project({
        "holder.py": """
            import deepspeed

            class Holder:
                def __init__(self, path):
                    self.actor, _, _, _ = deepspeed.initialize(model=load(path), config="ds.json")
            """,
        "worker.py": """
            class Worker:
                def __init__(self, holder, tokenizer):
                    self.holder = holder
                    self.actor_model = self.holder.actor

                def run(self, xs):
                    return self.actor_model.module.generate(xs)

            class Sub(Worker):
                def again(self, xs):
                    return self.actor_model(xs)
            """,
        "main.py": """
            from holder import Holder
            from worker import Worker

            def main(tok):
                h = Holder("gpt2")
                w = Worker(h, tok)
            """,
        "unrelated.py": """
            def helper(model):
                return model.generate(1)
            """})
    [role] = _roles(project, "worker.py", "self.actor_model.module", "Worker.run")
    assert role.kind == "model"
    assert role.trace() == ("engine created by deepspeed.initialize at holder.py:6 → stored on self.actor at "
                            "holder.py:6 → stored on self.actor_model at worker.py:5")
    notes = [s.note for s in role.steps]
    assert notes == ["engine created by deepspeed.initialize", "stored on self.actor",
                     "stored on self.actor_model"], notes
    assert _roles(project, "worker.py", "self.actor_model", "Sub.again")       # a subclass reads the field
    analysis = RoleAnalysis.of(project)
    assert {s.path for s in analysis.files} == {"holder.py", "worker.py", "main.py"}   # unrelated.py is not read
    assert _roles(project, "unrelated.py", "model", "helper") == []
    assert {"actor", "actor_model"} <= analysis.tails


def test_parameters_follow_every_call_site_and_only_those():
    project = _project({"t.py": """
        import deepspeed

        def evaluate(loader, model):
            return [model.generate(b) for b in loader]

        def report(loader, model):
            return [model(b) for b in loader]

        def main(loader, reference):
            engine, *_ = deepspeed.initialize(model=policy, config=cfg)
            evaluate(loader, model=engine)
            report(loader, reference)
        """})
    [role] = _roles(project, "t.py", "model", "evaluate")
    assert [s.note for s in role.steps] == ["engine created by deepspeed.initialize", "passed as `model` to evaluate()"]
    assert _roles(project, "t.py", "model", "report") == []


def test_dataclass_fields_and_strategy_objects():
    project = _project({"t.py": """
        from dataclasses import dataclass
        import deepspeed

        @dataclass
        class Bundle:
            actor: object
            critic: object = None

        class Strategy:
            def prepare(self, model):
                engine, *_ = deepspeed.initialize(model=model, config=cfg)
                return engine

        def main(m, c):
            strategy = Strategy()
            bundle = Bundle(strategy.prepare(m), critic=c)
            out = bundle.actor.generate(1)
        """})
    assert _roles(project, "t.py", "bundle.actor", "main")
    assert _roles(project, "t.py", "bundle.critic", "main") == []


def test_no_engine_builder_reads_nothing():
    project = _project({"t.py": "def f(model):\n    return model.generate(1)\n"})
    analysis = RoleAnalysis.of(project)
    assert analysis.files == [] and not analysis.active


# --- the worklist of the fixed point -----------------------------------------------------------------------

class _EveryScopeEveryRound(RoleAnalysis):
    """The reference: the fixed point as it ran before the worklist (every scope of every file, every round)."""

    def _rounds(self, dirty):
        from dslint.program.roles import MAX_ROUNDS
        for _ in range(MAX_ROUNDS):
            self._changed = False
            self._carrying = self._carrying_families()
            for scopes in list(self.scopes.values()):
                for sc in scopes.values():
                    self._run_scope(sc)
            if not self._changed and self._carrying == self._carrying_families():
                break


# every kind of location a scope reads, written by a scope that runs after the reader in a round: the reader
# must run again (a function's return, a module global read through an import, a parameter; and a field, in a
# project of its own: a field that gains an engine makes every scope run again through the carrying families)
_LATE_WRITES = ({
    "late/users.py": """
        import deepspeed
        from late.holder import GLOBAL_ENGINE

        def through_global():
            kept = GLOBAL_ENGINE
            return kept

        def caller():
            return make(None)

        def make(cfg):
            return build(cfg)

        def build(cfg):
            e, *_ = deepspeed.initialize(model=net, config=cfg)
            return e

        def consumer(model):
            held = model
            return held

        def main():
            consumer(caller())
    """,
    "late/holder.py": """
        import deepspeed
        GLOBAL_ENGINE = deepspeed.initialize(model=net, config=cfg)[0]
    """,
}, {
    # files read in a later batch (a role is passed into them, or they call a function returning one): each
    # scope that missed them runs again -- a function, a class, a base class's method, an imported module global
    "later/seed.py": """
        import deepspeed
        from later.helpers import wrap
        from later.holder import Holder
        from later.base import Base, hand_over
        from later.glob import SHARED

        class Mine(Base):
            pass

        def make():
            engine, *_ = deepspeed.initialize(model=net, config=cfg)
            return engine

        def use_function():
            w = wrap(make())
            return w

        def use_class():
            h = Holder(make())
            inner = h.engine
            return inner

        def load_base():
            hand_over(make())

        def use_base():
            e = make()
            via_base = Mine().passthrough(e)
            return via_base

        def use_global():
            s = SHARED
            return s
    """,
    "later/helpers.py": """
        def wrap(e):
            return e
    """,
    "later/holder.py": """
        class Holder:
            def __init__(self, engine):
                self.engine = engine
    """,
    "later/base.py": """
        def hand_over(e):
            return e

        class Base:
            def passthrough(self, x):
                return x
    """,
    "later/glob.py": """
        from later.seed import make
        SHARED = make()
    """,
}, {
    "late/fields.py": """
        import deepspeed

        class Trainer:
            def use(self):
                eng = self.engine
                return eng

            def setup(self, cfg):
                self.engine = make(cfg)

        def make(cfg):
            e, *_ = deepspeed.initialize(model=net, config=cfg)
            return e
    """,
})


def _state(analysis: RoleAnalysis):
    """Every location's roles in the order they were added, with their hand-off steps; the files read."""
    return ({loc: [(key, [(s.note, s.src.path, s.line, s.col) for s in role.steps]) for key, role in roles.items()]
             for loc, roles in analysis.values.items()}, sorted(analysis._loaded), analysis.tails)


@pytest.mark.timeout(900)   # two role analyses of dslint itself and of every fixture folder: minutes on a loaded machine
def test_the_worklist_reaches_the_state_of_running_every_scope_every_round():
    """A scope runs again only when a location it read gained a role: the same roles, in the same order (the
    MAX_ROLES cap keeps the first ones), on the fixtures, dslint itself and the examples -- one project of them
    all, and one per fixture folder."""
    from pathlib import Path
    from dslint.sources import module_name_for
    from tests.test_model_facts import _corpus

    def sources(paths):
        return [s for s in (PythonSource(str(p), p.read_text(encoding="utf-8"), module_name=module_name_for(p))
                            for p in paths) if s.compiles]
    everything = _corpus("own")
    groups = [everything] + [[p for p in everything if folder in p.parents]
                             for folder in sorted({p.parent for p in everything if "fixtures" in p.parts})]
    compared = engines = 0
    for paths in [*_LATE_WRITES, *groups]:
        if not paths:
            continue
        make = (lambda: list(_project(paths).python)) if isinstance(paths, dict) else (lambda: sources(paths))
        worklist = RoleAnalysis(ProjectView(make()))
        reference = _EveryScopeEveryRound(ProjectView(make()))
        # sources are distinct objects in the two projects: compare by path
        ids = {id(s): s.path for s in worklist.project.python} | {id(s): s.path for s in reference.project.python}

        def named(x):
            if isinstance(x, tuple):
                return tuple(named(y) for y in x)
            if isinstance(x, list):
                return [named(y) for y in x]
            return ids.get(x, x) if type(x) is int else x

        def by_path(state):
            values, loaded, tails = state
            return named(list(values.items())), sorted(ids[i] for i in loaded), tails
        assert by_path(_state(worklist)) == by_path(_state(reference)), [str(p) for p in paths[:3]]
        compared += 1
        engines += bool(worklist.tails)
    assert compared > 20 and engines > 10


def test_module_named_by_suffix_is_the_first_match_in_reading_order():
    """`RoleAnalysis._module_named` (an index by dotted suffix) answers what trying every read module against
    `_same_module` in reading order answers, re-reads of a name keeping its first place included."""
    from types import SimpleNamespace

    from dslint.program.roles import _same_module
    names = ["pkg.a.b", "b", "x.pkg.a.b", "a.b", "c.d", "pkg.c.d", "q", "pkg.a.b", "e.f.g", "f.g"]
    analysis = RoleAnalysis.__new__(RoleAnalysis)
    analysis._by_module, analysis._module_suffixes = {}, {}
    for i, name in enumerate(names):
        analysis._note_module(name, SimpleNamespace(name=name, i=i))
    for mod in ["b", "a.b", "pkg.a.b", "z.pkg.a.b", "d", "y.c.d", "g", "f.g", "e.f.g", "w.e.f.g", "q", "r.q",
                "nothing", "a", "pkg"]:
        scanned = next((s for m, s in analysis._by_module.items() if _same_module(m, mod)), None)
        assert analysis._module_named(mod) is scanned, mod
