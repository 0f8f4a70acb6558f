"""Value roles (dslint/program/roles.py): DeepSpeed engines and the models they wrap followed through
assignments, unpacking, containers, attributes, parameters and returns; the query rules call; hand-off traces;
files read on demand."""

import textwrap

import libcst as cst

from dslint.program.roles import RoleAnalysis
from dslint.program.project import ProjectView
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
