"""Launch units (dslint.program.units): what is an entry point, what it imports, which launcher line runs it,
and the consequence that matters to users -- a file's findings do not depend on what else was checked."""

from pathlib import Path

from dslint.config import Settings
from dslint.engine import Checker, check_texts
from dslint.program.units import Program
from dslint.sources import make_source

from test_fixtures import ROOT, _cases, _files, _options


def _program(files: dict[str, str]) -> tuple[Program, dict]:
    sources = {}
    for name, text in files.items():
        kind = "shell" if name.endswith(".sh") else "python"
        sources[name] = make_source(Path(name), name, kind, text)
        if kind == "python":        # the module name from the in-memory tree's __init__.py files
            parts = [Path(name).stem] if Path(name).name != "__init__.py" else []
            folder = Path(name).parent
            while (folder / "__init__.py").as_posix() in files and folder != folder.parent:
                parts.insert(0, folder.name)
                folder = folder.parent
            sources[name].module_name = ".".join(parts)
    python = [s for s in sources.values() if s.kind == "python"]
    shell = [s for s in sources.values() if s.kind == "shell"]
    return Program(python, shell), sources


def _unit(program: Program, entry: str):
    return next(u for u in program.units if u.entry.path == entry)


def test_entry_points_main_guard_top_level_work_and_launcher_lines():
    program, src = _program({
        "guarded.py": "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
        "toplevel.py": "import deepspeed\nengine, *_ = deepspeed.initialize(model=m, config='ds.json')\n",
        "launched.py": "def f():\n    pass\n",
        "library.py": "def helper():\n    return 1\n",
        "run.sh": "#!/bin/bash\ndeepspeed --num_gpus 2 launched.py --deepspeed ds.json\n",
    })
    entries = sorted(u.entry.path for u in program.units)
    assert entries == ["guarded.py", "launched.py", "toplevel.py"]
    assert [launch.line for _, launch in _unit(program, "launched.py").launches] == [2]
    assert program.context_of(src["library.py"]).units == []


def test_imports_package_relative_sibling_and_parent_folder():
    program, src = _program({
        "app/train.py": "from model import Net\nfrom pkg.sub import layers\nimport helpers\n"
                        "if __name__ == '__main__':\n    Net()\n",
        "app/model.py": "from .unused import x\nclass Net: pass\n",
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/layers.py": "from . import moe\nfrom ..common import util\n",
        "pkg/sub/moe.py": "",
        "pkg/common.py": "",
        "helpers.py": "",            # one folder up: found as `sys.path.insert(0, "..")` makes it importable
        "other/unrelated.py": "x = 1\n",
    })
    files = {f.path for f in _unit(program, "app/train.py").files}
    assert files == {"app/train.py", "app/model.py", "pkg/__init__.py", "pkg/sub/__init__.py",
                     "pkg/sub/layers.py", "pkg/sub/moe.py", "pkg/common.py", "helpers.py"}


def test_launcher_picks_the_script_beside_it_not_any_script_of_that_name():
    program, src = _program({
        "step1/main.py": "if __name__ == '__main__':\n    pass\n",
        "step2/main.py": "if __name__ == '__main__':\n    pass\n",
        "step2/run.sh": "#!/bin/bash\ncd ..\ndeepspeed $ROOT/main.py --deepspeed ds.json\n",
        "step1/run.sh": "#!/bin/bash\ndeepspeed --num_gpus 4 main.py --deepspeed ds.json\n",
        "scripts/both.sh": "#!/bin/bash\ndeepspeed main.py\n",      # ambiguous: runs neither for sure
        "run_mod.sh": "#!/bin/bash\ntorchrun --nproc_per_node 2 -m step1.main\n",
    })
    assert [sh.path for sh, _ in program.launches_of(src["step1/main.py"])] == ["step1/run.sh", "run_mod.sh"]
    assert [sh.path for sh, _ in program.launches_of(src["step2/main.py"])] == ["step2/run.sh"]


def test_contexts_keep_unrelated_scripts_apart_and_share_a_library_between_its_units():
    program, src = _program({
        "a.py": "from lib import f\nif __name__ == '__main__':\n    f()\n",
        "b.py": "from lib import f\nif __name__ == '__main__':\n    f()\n",
        "c.py": "if __name__ == '__main__':\n    pass\n",
        "lib.py": "def f():\n    pass\n",
        "orphan1.py": "import orphan2\n",
        "orphan2.py": "",
        "orphan3.py": "",
        "lib/__init__.py": "",
        "lib/a.py": "x = 1\n",
        "lib/sub/__init__.py": "",
        "lib/sub/b.py": "y = 2\n",
    })
    ctx = {name: program.context_of(s) for name, s in src.items()}
    assert {f.path for f in ctx["a.py"].files} == {"a.py", "lib.py"}
    assert {u.entry.path for u in ctx["lib.py"].units} == {"a.py", "b.py"}
    assert {f.path for f in ctx["lib.py"].files} == {"a.py", "b.py", "lib.py"}
    assert {f.path for f in ctx["c.py"].files} == {"c.py"}
    assert ctx["orphan1.py"] is ctx["orphan2.py"] and ctx["orphan3.py"] is not ctx["orphan1.py"]
    # the modules of one package no unit reaches form one context, even when they do not import each other
    assert ctx["lib/a.py"] is ctx["lib/sub/b.py"] is ctx["lib/__init__.py"] and ctx["lib/a.py"] is not ctx["orphan3.py"]


def test_moe_model_of_one_script_does_not_make_another_scripts_forward_collective():
    moe = ("import deepspeed, torch\nfrom deepspeed.moe.layer import MoE\n"
           "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.moe = MoE(hidden_size=8, expert=torch.nn.Linear(8, 8), num_experts=4, ep_size=2)\n"
           "    def forward(self, x):\n        return self.moe(x)[0]\n"
           "if __name__ == '__main__':\n    engine, *_ = deepspeed.initialize(model=Net(), config={'train_batch_size': 8})\n")
    rank0 = ("import deepspeed, torch\nimport torch.distributed as dist\n"
             "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
             "if __name__ == '__main__':\n    engine, *_ = deepspeed.initialize(model=Net(), config={'train_batch_size': 8})\n"
             "    if dist.get_rank() == 0:\n        engine(torch.zeros(2))\n")
    pad = "import torch.nn as nn\nconv = nn.Conv2d(3, 8, kernel_size=3, padding=1)\n"
    together = check_texts({"a_moe.py": moe, "b_plain.py": rank0, "c_pad.py": pad})
    assert [(f.path, f.code) for f in together.findings] == []
    # the same guard in the MoE script is a hang
    guarded = moe + "    if dist.get_rank() == 0:\n        engine(torch.zeros(2))\n"
    guarded = guarded.replace("import deepspeed, torch\n", "import deepspeed, torch\nimport torch.distributed as dist\n")
    alone = check_texts({"a_moe.py": guarded, "b_plain.py": rank0, "c_pad.py": pad})
    assert [(f.path, f.code) for f in alone.findings] == [("a_moe.py", "DSL101")]


def test_shared_module_names_the_unit_that_makes_it_hazardous():
    report = Checker(Settings(), cache_dir=None).check_paths([ROOT / "units" / "shared_helper"])
    (finding,) = report.findings
    assert finding.path.endswith("lib/evaluate.py") and finding.code == "DSL101"
    notes = [step.note for step in finding.trace]
    assert any("moe_train.py runs" in n for n in notes) and not any("plain_train.py" in n for n in notes)


def test_findings_do_not_depend_on_what_else_is_checked():
    """Every fixture case checked alone gives exactly the findings it gets when the whole fixture tree is
    checked in one run (the consequence the launch units exist for)."""
    def key(f):
        return (f.path, f.line, f.code, f.message)

    whole = {key(f) for f in Checker(Settings(), cache_dir=None).check_paths([ROOT]).findings}
    differing = []
    for case in _cases():
        if _options(_files(case)):
            continue            # run options (world size, version) differ from the whole run's defaults
        if any((case / name).exists() for name in ("setup.py", "pyproject.toml", "setup.cfg")) if case.is_dir() \
                else False:
            continue            # a distribution: whether it is the run's own package (its public names reached by
                                # its users, `reach.published`) or a copy inside a larger run depends on the run
        alone = {key(f) for f in Checker(Settings(), cache_dir=None).check_paths([case]).findings}
        rel = case.relative_to(Path.cwd()).as_posix() if case.is_absolute() else case.as_posix()
        mine = {k for k in whole if k[0] == rel or k[0].startswith(rel + "/")}
        if alone != mine:
            differing.append((rel, sorted(alone ^ mine)))
    assert differing == []


def test_editing_one_script_reanalyses_only_the_files_of_its_units(tmp_path, monkeypatch):
    from dslint.pipeline.rule_runs import RuleRun

    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.py").write_text(f"import torch.distributed as dist\nfrom {name}_lib import f\n"
                                             "if __name__ == '__main__':\n    if dist.get_rank() == 0:\n"
                                             "        f()\n")
        (tmp_path / f"{name}_lib.py").write_text("import torch.distributed as dist\ndef f():\n"
                                                 "    return dist.get_rank()\n")
    monkeypatch.chdir(tmp_path)
    analysed: list[str] = []
    real = RuleRun.results_for

    def spy(self, source, view):
        analysed.append(source.path)
        return real(self, source, view)

    monkeypatch.setattr(RuleRun, "results_for", spy)
    settings = Settings(root=tmp_path)
    Checker(settings, cache_dir=tmp_path / "cache", jobs=1).check_paths([Path(".")])
    assert sorted(analysed) == ["a.py", "a_lib.py", "b.py", "b_lib.py", "c.py", "c_lib.py"]
    analysed.clear()
    Checker(settings, cache_dir=tmp_path / "cache", jobs=1).check_paths([Path(".")])
    assert analysed == []
    (tmp_path / "b_lib.py").write_text("import torch.distributed as dist\ndef f():\n    return 0\n")
    Checker(settings, cache_dir=tmp_path / "cache", jobs=1).check_paths([Path(".")])
    assert sorted(analysed) == ["b.py", "b_lib.py"]


def test_the_runs_only_config_reaches_scripts_beside_or_below_it_only():
    z3 = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}'
    gen = ("import deepspeed, torch.distributed as dist\n"
           "if __name__ == '__main__':\n    engine, *_ = deepspeed.initialize(model=m, config=cfg)\n"
           "    for p in prompts[dist.get_rank()::2]:\n        engine.module.generate(p, do_sample=True)\n")
    beside = check_texts({"exp/ds.json": z3, "exp/gen.py": gen})
    assert {f.code for f in beside.findings} >= {"DSL102", "DSL104"}
    assert all(f.severity.value == "error" for f in beside.findings if f.code == "DSL104")
    apart = check_texts({"exp/ds.json": z3, "other/gen.py": gen})
    assert all(f.severity.value == "warning" for f in apart.findings if f.code in ("DSL102", "DSL104"))


def test_views_of_many_units_share_the_runs_indexes_and_answer_as_their_own():
    """Issue 33: a launch unit's view reads the run's identifier index (built once, on the program model) in its
    own order of its files, and indexes the units reaching each file once; both answer exactly what the
    view's own scans answered (same files, same order, same units)."""
    from dslint.program.project_view import ProjectView
    files = {"pkg/__init__.py": "", "pkg/comm.py": "import torch.distributed as dist\ndef sync(t):\n    dist.all_reduce(t)\n",
             "pkg/loop.py": "from pkg import comm\ndef train(engine, t):\n    comm.sync(t)\n",
             "helper.py": "def unused_words(): return 1\n",
             "run.sh": "deepspeed --num_gpus 1 a.py\ndeepspeed --num_gpus 2 b.py\n"}
    for name in ("a", "b", "c"):
        files[f"{name}.py"] = (f"import deepspeed\nfrom pkg import loop\nfrom pkg.comm import sync\n"
                               f"def main_{name}(model, t):\n    engine, *_ = deepspeed.initialize(model=model)\n"
                               f"    loop.train(engine, t)\n\nif __name__ == '__main__':\n    main_{name}(None, None)\n")
    program, sources = _program(files)
    run = ProjectView(list(sources.values()), program=program)
    views = [run.context_view(ctx) for ctx in program.contexts()]
    assert len(views) >= 4 and any(len(v.units) == 3 for v in views)
    for view in views:
        assert view._shared_identifiers is not None
        for word in ("dist", "sync", "loop", "engine", "main_a", "main_b", "unused_words", "absent"):
            assert view.using_identifier(word) == view._identifier_index.get(word, []), word
        for src in view.python:
            reaching = [u for u in view.units if any(f is src for f in u.files)]
            assert view._units_reaching.get(id(src), []) == reaching
            assert view.runs_one_process(src) == (bool(reaching) and all(u.world_size == 1 for u in reaching))
    # a view the program model does not hold every file of (built by hand) keeps its own index
    alone = ProjectView([make_source(Path("x.py"), "x.py", "python", "dist = 1\n")], program=program, run_view=run)
    assert alone._shared_identifiers is None and [s.path for s in alone.using_identifier("dist")] == ["x.py"]


def test_editing_the_script_that_loads_a_plugin_reanalyses_the_plugin(tmp_path, monkeypatch):
    """A plugin module's rank hazards are unproven while the script that loads it by a computed name creates no
    process group (dslint.program.plugins); that script is no file of the plugin's context, so the result cache
    keys the plugin by it too: creating the group there shows the finding again."""
    fixture = Path(__file__).parent / "fixtures" / "static" / "units"
    for name in ("convert.py", "convert_loader_megatron.py"):
        (tmp_path / name).write_text((fixture / "plugin_tool_one_process" / name).read_text())
    monkeypatch.chdir(tmp_path)
    settings = Settings(root=tmp_path)
    first = Checker(settings, cache_dir=tmp_path / "cache", jobs=1).check_paths([Path(".")])
    assert [f.code for f in first.findings] == []
    (tmp_path / "convert.py").write_text((fixture / "plugin_tool_process_group" / "convert.py").read_text())
    second = Checker(settings, cache_dir=tmp_path / "cache", jobs=1).check_paths([Path(".")])
    assert [(f.path, f.code) for f in second.findings] == [("convert_loader_megatron.py", "DSL101")]


def test_views_of_many_units_read_the_runs_tables_as_a_table_of_their_own_files_would_answer():
    """Issue 33: a launch unit's view restricts the run's tables to its files, in its order (`mentioning`,
    `files_where`, the function and class indexes, `methods_named`, the module-like classes) instead of walking
    every file it holds; each answers what the same view without the run's tables (its own scans, same files,
    same order) answers. `ViewIndex`: of a name's entries, the one of the file latest in the view's order."""
    from dslint.program.models.modules import _module_like
    from dslint.program.project_view import ProjectView, ViewIndex, _qualified_functions
    files = {"pkg/__init__.py": "",
             "pkg/comm.py": "import torch.distributed as dist\ndef sync(t):\n    dist.all_reduce(t)\n",
             "pkg/model.py": ("import torch\nclass Block(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                              "class Mixin:\n    def save(self):\n        pass\nclass Net(Block, Mixin):\n"
                              "    def forward(self, x):\n        return x\n"),
             "pkg/loop.py": "from pkg import comm\ndef train(engine, t):\n    comm.sync(t)\n    engine.module.forward = None\n",
             "run.sh": "deepspeed --num_gpus 1 a.py\ndeepspeed --num_gpus 2 b.py\n"}
    for name in ("a", "b", "c"):
        files[f"{name}.py"] = (f"import deepspeed\nfrom pkg import loop, model\nfrom pkg.comm import sync\n"
                               f"class Runner:\n    def save(self):\n        pass\n"
                               f"def main_{name}(t):\n    net = model.Net()\n"
                               f"    engine, *_ = deepspeed.initialize(model=net)\n    loop.train(engine, t)\n\n"
                               f"if __name__ == '__main__':\n    main_{name}(None)\n")
    program, sources = _program(files)
    run = ProjectView(list(sources.values()), program=program)
    views = [run.context_view(ctx) for ctx in program.contexts()]
    keys = {k for s in sources.values() if s.kind == "python" for k, _ in _qualified_functions(s)} | {"absent"}
    classes = {f"{s.module_name}.{q}" for s in sources.values() if s.kind == "python" for q in s.outline.classes}

    def has_class(src) -> bool:
        return bool(src.outline.classes)
    assert len(views) >= 4
    for view in views:
        own = ProjectView(list(view.sources))       # the same files in the same order, no run tables
        assert view._run_order is not None and own._run_order is None
        for words in (("dist",), (".forward =", ".forward="), ("save", "Block"), ("absent",)):
            assert view.mentioning(*words) == own.mentioning(*words), words
        assert view.files_where("has-class", has_class) == own.files_where("has-class", has_class)
        assert isinstance(view._function_index, ViewIndex) and isinstance(own._function_index, dict)
        for key in keys:
            assert view._function_index.get(key) == own._function_index.get(key), key
            assert (key in view._function_index) == (key in own._function_index)
        for key in classes | {"absent"}:
            assert view._class_index().get(key) == own._class_index().get(key), key
        for name in ("forward", "save", "absent"):
            assert view.methods_named(name) == own.methods_named(name), name
        assert _module_like(view) == _module_like(own)
    one, two = sources["a.py"], sources["b.py"]
    index = ViewIndex({"k": [(one, "f"), (two, "f")]}, {id(one): 1, id(two): 0})
    assert index.get("k") == (one, "f") and index["k"] == (one, "f") and "k" in index and "j" not in index
    assert ViewIndex({"k": [(one, "f")]}, {id(two): 0}).get("k") is None
