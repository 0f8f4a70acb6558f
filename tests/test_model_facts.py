"""The model facts built on CPython's `ast` agree with the libcst trees the rules read: the same methods,
created attributes (kind, frozen, constructor, creating statement), constructed classes, dynamic attribute
access (`getattr(self, name)`, `self.children()`, … in the class's code) and freezing
statements as a libcst pass computes, on the fixtures, dslint itself, the examples and the installed
deepspeed package."""

import importlib.util
from pathlib import Path

import libcst as cst
import pytest

from dslint.program.models import modules as mf
from dslint.program.facts import dotted_name
from dslint.sources.literals import literal_value
from dslint.program.project_view import ProjectView
from dslint.sources import PythonSource, module_name_for

ROOT = Path(__file__).parent.parent


def _corpus(name: str) -> list[Path]:
    if name == "deepspeed":
        spec = importlib.util.find_spec("deepspeed")
        if spec is None or spec.origin is None:
            pytest.skip("deepspeed is not installed (the runtime extra)")
        return sorted(Path(spec.origin).parent.rglob("*.py"))
    return sorted(p for d in ("tests/fixtures", "dslint", "examples") for p in (ROOT / d).rglob("*.py"))


# --- the reference: the libcst pass the ast one replaced -----------------------------------------------

def _cst_classify(facts, value, names):
    if not isinstance(value, cst.Call):
        return None
    callee = facts.resolve_expr(value.func) or ""
    last = callee.rsplit(".", 1)[-1]
    if last == "Parameter" and ("nn" in callee or callee == "Parameter"):
        return "parameter", any(a.keyword is not None and a.keyword.value == "requires_grad"
                                and literal_value(a.value) is False for a in value.args)
    if callee.startswith(("torch.nn.", "nn.")):
        return None if last in mf.PARAMETERLESS or last == "Buffer" or not last[:1].isupper() else ("module", False)
    if callee.endswith(".from_pretrained") and callee.startswith("transformers.") and \
            not mf._is_moduleish(callee.rsplit(".", 1)[0]):
        return None
    if last in names or last == "MoE" or callee.endswith("from_pretrained"):
        return "module", False
    return None


def _cst_kind(project, cls, value, names):
    """`_cst_classify`, a call of a function of the run followed to what it returns (the ast facts' own
    `_factory_kind` over the returns they recorded: what is compared here is the per-class pass)."""
    kind = _cst_classify(cls.src.facts, value, names)
    if kind is None and isinstance(value, cst.Call):
        callee = cls.src.facts.resolve_expr(value.func) or ""
        if callee and not callee.startswith(mf._LIBRARY_ROOTS):
            kind = mf._factory_kind(project, cls.src, callee, cls, names)
    return kind


def _cst_attrs(cls, names, project) -> dict:
    """attr → (kind, frozen, ctor, method, statement) from the libcst tree, first creation wins."""
    out = {}
    for mname, method in cls.info.methods.items():
        for stmt in mf._statements(method.node):
            pairs = [(t.target, stmt.value) for t in stmt.targets] if isinstance(stmt, cst.Assign) else \
                [(stmt.target, stmt.value)] if isinstance(stmt, cst.AnnAssign) and stmt.value is not None else []
            for target, value in pairs:
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and \
                        target.value.value == "self":
                    kind = _cst_kind(project, cls, value, names)
                    if kind is not None and target.attr.value not in out:
                        out[target.attr.value] = (*kind, (dotted_name(value.func) or "").rsplit(".", 1)[-1],
                                                  mname, stmt)
            if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
                call = stmt.value
                if isinstance(call.func, cst.Attribute) and call.func.attr.value == "register_parameter" \
                        and len(call.args) >= 2:
                    attr = literal_value(call.args[0].value)
                    kind = _cst_kind(project, cls, call.args[1].value, names)
                    if isinstance(attr, str) and attr not in out and kind is not None:
                        out[attr] = (*kind, "", mname, stmt)
    return out


class _CstFreezes:
    """The libcst freeze collector: (attr or '*', flag, line) for every freeze/unfreeze statement."""

    def __init__(self, src):
        self.src, self.out, self.loops, self.conditional, self.classes = src, set(), [], 0, 0

    def run(self):
        from dslint.sources.cstwalk import walk_events
        for node, entering in walk_events(self.src.module):
            if isinstance(node, (cst.If, cst.IfExp)):
                self.conditional += 1 if entering else -1
            elif isinstance(node, cst.ClassDef):
                self.classes += 1 if entering else -1
            elif isinstance(node, cst.For):
                if not entering:
                    self.loops.pop()
                    continue
                it = node.iter
                if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and \
                        it.func.attr.value in ("parameters", "named_parameters") and \
                        isinstance(node.target, (cst.Name, cst.Tuple)):
                    var = node.target.value if isinstance(node.target, cst.Name) else next(
                        (e.value.value for e in reversed(node.target.elements) if isinstance(e.value, cst.Name)), "")
                    root = it.func.value
                    while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
                        root = root.func if isinstance(root, cst.Call) else root.value
                    # a loop over `self.parameters()` in a class freezes that class's instances, not the model
                    own = self.classes > 0 and isinstance(root, cst.Name) and root.value == "self"
                    self.loops.append((var, _cst_chain(it.func.value), not own))
                else:
                    self.loops.append(("", [], True))
            elif entering and isinstance(node, cst.Assign):
                for t in node.targets:
                    tgt = t.target
                    if isinstance(tgt, cst.Attribute) and tgt.attr.value == "requires_grad":
                        flag = literal_value(node.value)
                        loop = next((l for l in reversed(self.loops) if isinstance(tgt.value, cst.Name)
                                     and l[0] == tgt.value.value), None)
                        if loop is not None:
                            self.record(loop[1], flag, node, loop[2])
                        else:
                            self.record(_cst_chain(tgt.value), flag, node, False)
            elif entering and isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_":
                    root = func.value
                    while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
                        root = root.func if isinstance(root, cst.Call) else root.value
                    self.record(_cst_chain(func.value), literal_value(node.args[0].value) if node.args else True,
                                node, not (isinstance(root, cst.Name) and root.value == "self"))
                if (dotted_name(func) or "").rsplit(".", 1)[-1] in ("get_peft_model", "prepare_model_for_kbit_training",
                                                                   "freeze_model"):
                    self.out.add(("*", False, self.src.span(node).line))
        return self.out

    def record(self, attrs, flag, node, whole):
        if (self.conditional and flag is False) or (flag is not True and flag is not False):
            return
        attrs = [a for a in attrs if a not in ("parameters", "named_parameters", "module", "get_model", "model",
                                               "requires_grad", "requires_grad_", "weight", "bias", "base_model")]
        line = self.src.span(node).line
        if not attrs and flag is False and whole:
            self.out.add(("*", False, line))
        self.out |= {(a, flag, line) for a in attrs}


def _cst_chain(expr) -> list[str]:
    out = []
    while isinstance(expr, (cst.Attribute, cst.Call, cst.Subscript)):
        if isinstance(expr, cst.Attribute):
            out.append(expr.attr.value)
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return out[::-1]


def _ast_freezes(freezing: mf.Freezing, path: str) -> set:
    out = {("*", False, line) for p, line in freezing.freeze_all if p == path}
    for flag, table in ((False, freezing.frozen), (True, freezing.unfrozen)):
        out |= {(attr, flag, line) for attr, places in table.items() for p, line in places if p == path}
    return out


# --- the comparison ------------------------------------------------------------------------------------

@pytest.mark.parametrize("corpus", ["own", "deepspeed"])
def test_ast_model_facts_match_libcst(corpus):
    sources = [PythonSource(str(p), p.read_text(encoding="utf-8"), module_name=module_name_for(p))
               for p in _corpus(corpus)]
    project = ProjectView([s for s in sources if s.compiles])
    facts = mf.model_facts(project)
    names = set(facts.by_name)
    reference = {id(cls): _cst_attrs(cls, names, project) for cls in facts.classes}
    changed = True
    while changed:      # the op-wrapper pruning: a constructed class that creates nothing trainable
        changed = False
        for cls in facts.classes:
            for name, (kind, _, ctor, _, _) in list(reference[id(cls)].items()):
                owners = facts.by_name.get(ctor, [])
                if kind == "module" and owners and all(not any(reference[id(c)] or c.external_bases
                                                               for c in o.mro()) for o in owners):
                    del reference[id(cls)][name]
                    changed = True
    attrs = dynamic = 0
    for cls in facts.classes:
        assert cls.methods == set(cls.info.methods), cls.qualname
        expected = {c.attr for m in cls.info.methods.values() for c in m.calls if c.attr} & names
        assert cls.created_classes == expected, cls.qualname
        assert cls.dynamic == bool(mf._DYNAMIC.search(cst.Module([]).code_for_node(cls.info.node))), cls.qualname
        dynamic += cls.dynamic
        assert set(cls.attrs) == set(reference[id(cls)]), cls.qualname
        for name, attr in cls.attrs.items():
            kind, frozen, ctor, method, stmt = reference[id(cls)][name]
            assert (attr.kind, attr.frozen_at_creation, attr.ctor, attr.method) == (kind, frozen, ctor, method)
            assert attr.statement is stmt and cls.src.span(stmt).line == attr.line, (cls.qualname, name)
            attrs += 1
    freezes = 0
    for src in project.python:
        if mf._FREEZE_TEXT.search(src.text):
            got = _ast_freezes(facts.freezing, src.path)
            assert got == _CstFreezes(src).run(), src.path
            freezes += len(got)
    assert len(facts.classes) > (40 if corpus == "own" else 150) and attrs > 30 and freezes > 3 \
            and dynamic >= (0 if corpus == "own" else 3), \
        (len(facts.classes), attrs, freezes, dynamic)


def test_class_text_is_libcst_code_for_node():
    """The comments a class owns, as libcst assigns them: those above it at its indentation (not the deeper
    ones closing the block before it), its decorators, and the deeper comments after its body."""
    text = ("import torch\n\n\ndef f():\n    x = 1\n    # f's footer: getattr(self, name)\n"
            "# A's leading: self.children()\n\n@decorate\nclass A(torch.nn.Module):\n    def forward(self):\n"
            "        return 1\n        # A's footer: vars(self)\n# module: self._modules\nclass B:\n    pass\n")
    src = PythonSource("m.py", text)
    for qual in ("A", "B"):
        start, end = src.outline.model_classes[qual].span      # what `mentions` and the dynamic test read
        assert text[start:end].strip() == cst.Module([]).code_for_node(src.facts.classes[qual].node).strip()


def test_statement_order_follows_libcst_blocks():
    """elif chains, same-line suites, `else: if` nesting, try/else/except/finally, match: the statement index
    (what a finding points at) is the one libcst's tree has."""
    text = (
        "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self, a):\n"
        "        if a: self.skipped = nn.Linear(1, 1)\n"
        "        if a:\n            pass\n        elif a > 1:\n            self.p = nn.Parameter(a)\n"
        "        else:\n            if a:\n                self.q = nn.Linear(2, 2)\n"
        "            self.q = nn.Linear(3, 3)\n"
        "        try:\n            x = 1\n        except ValueError:\n            self.r = nn.Linear(4, 4)\n"
        "        else:\n            self.r = nn.Linear(5, 5)\n        finally: self.s = nn.Linear(1, 1)\n"
        "        match a:\n            case 1:\n                self.t = nn.Linear(1, 1)\n"
        "        self.u = nn.Linear(1, 1); self.v = nn.Parameter(a, requires_grad=False)\n"
        "        def inner():\n            self.w = nn.Linear(1, 1)\n"
        "        self.register_parameter('z', nn.Parameter(a))\n")
    project = ProjectView([PythonSource("m.py", text)])
    cls = mf.model_facts(project).classes[0]
    assert sorted(cls.attrs) == ["p", "q", "r", "u", "v", "z"]
    reference = _cst_attrs(cls, set(), project)
    for name, attr in cls.attrs.items():
        assert attr.statement is reference[name][4]
    assert cls.src.span(cls.attrs["q"].statement).line == 14       # breadth-first: the else block's own line
    assert cls.src.span(cls.attrs["r"].statement).line == 20       # try's else block before its handlers
    assert cls.attrs["v"].frozen_at_creation and not cls.attrs["p"].frozen_at_creation


def test_freezing_is_per_sub_tree():
    """Freezing `model.get_model()` (a getter of `self.model`) freezes the library sub-module's tree only: an
    attribute of the outer class stays trainable; freezing everything then unfreezing one sub-tree leaves that
    sub-tree trainable; a mixin's attribute sits under the attribute that creates its subclass."""
    model = (
        "import torch\nimport torch.nn as nn\nfrom transformers import LlamaForCausalLM, LlamaModel\n"
        "class MetaModel:\n    def __init__(self, config):\n        super().__init__(config)\n"
        "        self.mm_projector = nn.Linear(4, 4)\n"
        "class InnerModel(MetaModel, LlamaModel):\n    pass\n"
        "class Outer(LlamaForCausalLM):\n    def __init__(self, config):\n        super().__init__(config)\n"
        "        self.model = InnerModel(config)\n        self.image_gate = nn.Parameter(torch.zeros(1))\n"
        "        self.frozen_query = nn.Parameter(torch.zeros(1), requires_grad=False)\n"
        "    def get_model(self):\n        return self.model\n")

    def trainable(script: str) -> dict:
        srcs = [PythonSource("m.py", model, module_name="m"),
                PythonSource("t.py", script, module_name="t")]
        facts = mf.model_facts(ProjectView(srcs))
        return {a.name: facts.trainable(a) for c in facts.classes for a in c.attrs.values()}

    assert trainable("model.get_model().requires_grad_(False)\n") == \
        {"mm_projector": False, "model": False, "image_gate": True, "frozen_query": False}
    assert trainable("for p in model.model.parameters():\n    p.requires_grad = False\n")["image_gate"]
    assert trainable("model.requires_grad_(False)\nmodel.get_model().mm_projector.requires_grad_(True)\n") == \
        {"mm_projector": True, "model": True, "image_gate": False, "frozen_query": False}
    assert trainable("model.frozen_query.requires_grad = True\n")["frozen_query"]
    assert trainable("x = 1\n") == {"mm_projector": True, "model": True, "image_gate": True, "frozen_query": False}


def test_attribute_read_counts_are_the_read_patterns_findall_counts():
    """The per-file count is found at the `.`/quote sites of the name's word (one scan of the text per file),
    and equals the read pattern's findall over the whole text: overlapping quotes, assignments and
    comparisons, prefixes, non-ASCII words, a name that is not a word."""
    import re

    from dslint.program.models.modules import _READ_PATTERNS, _attribute_reads_in
    from dslint.sources import PythonSource
    text = ('x = self.gate.gate\nself.gate = 1\nif self.gate == 2: pass\ny = getattr(m, "gate")\n'
            'z = "a"a"a"\nw = \'a"b\' + "b"b"\nv = self.gates + self.gate_\nu = obj.é + "é"\n'
            's = self.gate  =  3\nt = x.gate\n')
    names = ["gate", "a", "b", "é", "gates", "gate_", "missing", "self.gate"]
    src = PythonSource("m.py", text)
    counts = {n: _attribute_reads_in(src, n) for n in names}
    expected = {n: len(re.compile(r"\.%s\b(?!\s*=[^=])|[\"']%s[\"']" % (re.escape(n), re.escape(n))).findall(text))
                for n in names}
    assert counts == expected
    assert counts["gate"] == 5 and counts["a"] == 3 and counts["missing"] == 0      # the shapes are exercised
    assert set(_READ_PATTERNS) >= set(names)
