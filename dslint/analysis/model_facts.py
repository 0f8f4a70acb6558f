"""nn.Module classes of the checked files and the parameters/submodules they create.

For every class whose bases resolve (through imports and the other checked files) to `torch.nn.Module`, a
`torch.nn` layer, a `transformers` model class or DeepSpeed's `MoE`: the attributes its methods create
(`self.x = nn.Parameter(...)`, `self.proj = nn.Linear(...)`, `self.mm_projector = build_projector(cfg)`),
whether they start frozen (`requires_grad=False`), and the freezing/unfreezing statements anywhere in the run
(`.x.requires_grad_(False)`, `for p in m.x.parameters(): p.requires_grad = False`, `model.requires_grad_(False)`,
`get_peft_model`). Attributes are matched by name across classes (`self.get_model().mm_projector` in a mixin):
that is how multimodal models split creation and use over several classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.analysis.values import memo
from dslint.facts import ClassInfo, FileFacts, dotted_name
from dslint.literals import literal_value
from dslint.sources import PythonSource

if TYPE_CHECKING:
    from dslint.project import ProjectView

# torch.nn classes without parameters: creating one is not creating a trainable submodule
PARAMETERLESS = {"ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "Dropout1d",
                 "Dropout2d", "Dropout3d", "Identity", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d",
                 "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
                 "Upsample", "PixelShuffle", "LeakyReLU", "ELU", "Mish", "Hardswish", "Softplus", "CrossEntropyLoss",
                 "MSELoss", "L1Loss", "BCEWithLogitsLoss", "BCELoss", "NLLLoss", "KLDivLoss", "SmoothL1Loss",
                 "CosineSimilarity", "PairwiseDistance", "ZeroPad2d", "ConstantPad1d", "ReflectionPad2d",
                 "AlphaDropout", "Hardtanh", "ReLU6", "Threshold", "GLU", "Softsign", "Tanhshrink", "ChannelShuffle"}
NOT_MODULE_SUFFIXES = ("Config", "Trainer", "Tokenizer", "TokenizerFast", "Processor", "Arguments", "Callback",
                       "Collator", "Pipeline", "Output", "Mixin", "FeatureExtractor", "ImageProcessor")
@dataclass(eq=False)
class ModuleAttr:
    owner: "ModuleClass"
    name: str
    kind: str                      # "parameter" | "module"
    statement: cst.CSTNode         # the assignment, for reporting
    method: str
    frozen_at_creation: bool = False
    ctor: str = ""                 # short name of what was called to create it


@dataclass(eq=False)
class ModuleClass:
    src: PythonSource
    info: ClassInfo
    bases: list[str]
    project_bases: list["ModuleClass"] = field(default_factory=list)
    external_bases: list[str] = field(default_factory=list)
    attrs: dict[str, ModuleAttr] = field(default_factory=dict)
    created_classes: set[str] = field(default_factory=set)      # short names of classes its methods construct

    @property
    def name(self) -> str:
        return self.info.name

    def mro(self) -> list["ModuleClass"]:
        out: list[ModuleClass] = []
        todo = [self]
        while todo:
            cls = todo.pop(0)
            if cls not in out:
                out.append(cls)
                todo.extend(cls.project_bases)
        return out

    def find_method(self, name: str):
        for cls in self.mro():
            if name in cls.info.methods:
                return cls, cls.info.methods[name]
        return None


@dataclass
class Freezing:
    frozen: dict[str, list[cst.CSTNode]] = field(default_factory=dict)     # attr name → freeze statements
    unfrozen: dict[str, list[cst.CSTNode]] = field(default_factory=dict)
    freeze_all: list[cst.CSTNode] = field(default_factory=list)


@dataclass
class ModelFacts:
    classes: list[ModuleClass]
    by_name: dict[str, list[ModuleClass]]
    freezing: Freezing

    def trainable(self, attr: ModuleAttr) -> bool:
        """False when evidence says the attribute is frozen and nothing unfreezes it again."""
        if attr.frozen_at_creation and attr.name not in self.freezing.unfrozen:
            return False
        if attr.name in self.freezing.unfrozen:
            return True
        return attr.name not in self.freezing.frozen and not self.freezing.freeze_all

    # indexes built on first use: the rules ask these per class and per file, and a large project (the
    # transformers package) has ~10k module classes, so scanning the list each time is quadratic
    def classes_in(self, src: PythonSource) -> list[ModuleClass]:
        index = self.__dict__.get("_by_source")
        if index is None:
            index = self.__dict__["_by_source"] = {}
            for c in self.classes:
                index.setdefault(id(c.src), []).append(c)
        return index.get(id(src), [])

    def subclasses(self, cls: ModuleClass) -> list[ModuleClass]:
        index = self.__dict__.get("_subclasses")
        if index is None:
            index = self.__dict__["_subclasses"] = {}
            for c in self.classes:
                for ancestor in c.mro():
                    if ancestor is not c:
                        index.setdefault(id(ancestor), []).append(c)
        return index.get(id(cls), [])

    def containers(self, cls: ModuleClass) -> list[ModuleClass]:
        creators = self.__dict__.get("_creators")
        if creators is None:
            creators = self.__dict__["_creators"] = {}
            for position, c in enumerate(self.classes):
                for name in c.created_classes:
                    creators.setdefault(name, []).append((position, c))
        names = {c.name for c in [cls, *self.subclasses(cls)]}
        found = {position: c for name in names for position, c in creators.get(name, ()) if c is not cls}
        return [found[p] for p in sorted(found)]


def _is_moduleish(base: str) -> bool:
    last = base.rsplit(".", 1)[-1]
    if base.startswith(("torch.nn.", "nn.")) and last not in ("Parameter",):
        return True
    if base.startswith("transformers.") or base.startswith("deepspeed.moe"):
        return not last.endswith(NOT_MODULE_SUFFIXES)
    return last in ("Module", "PreTrainedModel", "MoE")


def _self_attr(target: cst.BaseExpression) -> Optional[str]:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None


def _classify(facts: FileFacts, value: cst.BaseExpression, project_names: set[str]) -> Optional[tuple[str, bool]]:
    """(kind, frozen) for the right-hand side of `self.x = …`, None when it creates nothing trainable."""
    if not isinstance(value, cst.Call):
        return None
    callee = facts.resolve_expr(value.func) or ""
    last = callee.rsplit(".", 1)[-1]
    if last == "Parameter" and ("nn" in callee or callee == "Parameter"):
        frozen = any(a.keyword is not None and a.keyword.value == "requires_grad" and literal_value(a.value) is False
                     for a in value.args)
        return "parameter", frozen
    if callee.startswith("torch.nn.") or callee.startswith("nn."):
        if last in PARAMETERLESS or last == "Buffer" or not last[:1].isupper():
            return None
        return "module", False
    if last in project_names or last == "MoE" or callee.endswith("from_pretrained"):
        return "module", False
    if last.startswith(("build_", "make_", "create_")):
        return "module", False
    return None


def _chain_attrs(expr: cst.BaseExpression) -> list[str]:
    """Attribute names along `a.b().c.d` (['b', 'c', 'd'])."""
    out = []
    while True:
        if isinstance(expr, cst.Attribute):
            out.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Call):
            expr = expr.func
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            break
    return list(reversed(out))


class _FreezeCollector:
    """Freeze/unfreeze statements, by the attribute they name (name-based across the run)."""

    def __init__(self, out: Freezing) -> None:
        self.out = out
        self.loops: list[tuple[str, list[str]]] = []     # (loop variable, attrs of the iterated module)
        self.conditional = 0

    def run(self, module: cst.Module) -> None:
        from dslint.cstwalk import walk_events
        for node, entering in walk_events(module):
            kind = type(node)
            # a freeze under `if args.freeze_backbone:` describes one configuration, not the model
            if kind is cst.If or kind is cst.IfExp:
                self.conditional += 1 if entering else -1
            elif kind is cst.For:
                if entering:
                    self.visit_For(node)
                else:
                    self.loops.pop()
            elif entering and kind is cst.Assign:
                self.visit_Assign(node)
            elif entering and kind is cst.Call:
                self.visit_Call(node)

    def _record(self, attrs: list[str], flag: object, node: cst.CSTNode, whole: bool = False) -> None:
        """`whole`: the statement acts on a module's parameters (requires_grad_(), a parameters() loop), so an
        empty attribute chain (`model.requires_grad_(False)`) means the whole model."""
        if self.conditional and flag is False:
            return
        attrs = [a for a in attrs if a not in ("parameters", "named_parameters", "module", "get_model", "model",
                                               "requires_grad", "requires_grad_", "weight", "bias", "base_model")]
        if flag is not True and flag is not False:
            return
        if not attrs:
            if flag is False and whole:
                self.out.freeze_all.append(node)
            return
        target = self.out.frozen if flag is False else self.out.unfrozen
        for attr in attrs:
            target.setdefault(attr, []).append(node)

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and \
                it.func.attr.value in ("parameters", "named_parameters") and isinstance(node.target, (cst.Name, cst.Tuple)):
            var = node.target.value if isinstance(node.target, cst.Name) else \
                next((e.value.value for e in reversed(node.target.elements) if isinstance(e.value, cst.Name)), "")
            self.loops.append((var, _chain_attrs(it.func.value)))
        else:
            self.loops.append(("", []))

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            tgt = t.target
            if isinstance(tgt, cst.Attribute) and tgt.attr.value == "requires_grad":
                flag = literal_value(node.value)
                if isinstance(tgt.value, cst.Name):
                    loop = next((l for l in reversed(self.loops) if l[0] == tgt.value.value), None)
                    if loop is not None:
                        self._record(loop[1], flag, node, whole=True)
                        continue
                self._record(_chain_attrs(tgt.value), flag, node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_":
            flag = literal_value(node.args[0].value) if node.args else True
            root = func.value
            while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
                root = root.func if isinstance(root, cst.Call) else root.value
            whole = not (isinstance(root, cst.Name) and root.value == "self")
            self._record(_chain_attrs(func.value), flag, node, whole=whole)
        name = dotted_name(func) or ""
        if name.rsplit(".", 1)[-1] in ("get_peft_model", "prepare_model_for_kbit_training", "freeze_model"):
            self.out.freeze_all.append(node)


# what `_FreezeCollector` records: `x.requires_grad = …`, `requires_grad_(…)` and the freezing helpers
_FREEZE_TEXT = re.compile(r"\.requires_grad\s*=(?!=)|requires_grad_\s*\(|get_peft_model|prepare_model_for_kbit_training|"
                          r"freeze_model")


def _module_class_files(project: "ProjectView") -> list[PythonSource]:
    """Files that define an nn.Module-like class or a mixin of one: the fixed points of `_build` computed on
    the outlines (same names, same resolved bases), so that only these files are parsed with libcst."""
    infos = [(src, c) for src in project.python for c in src.outline.classes.values()]
    short: dict[str, list] = {}
    for src, c in infos:
        short.setdefault(c.name, []).append(c)
    module_like: dict[int, list[str]] = {}
    changed = True
    while changed:
        changed = False
        for src, c in infos:
            if id(c) in module_like:
                continue
            bases = [b for b in c.bases if b]
            if any(id(i) in module_like for b in bases for i in short.get(b.rsplit(".", 1)[-1], ())) \
                    or any(_is_moduleish(b) for b in bases):
                module_like[id(c)] = bases
                changed = True
    changed = True
    while changed:
        changed = False
        wanted = {b.rsplit(".", 1)[-1] for bases in module_like.values() for b in bases}
        for src, c in infos:
            if id(c) not in module_like and c.name in wanted:
                module_like[id(c)] = [b for b in c.bases if b]
                changed = True
    files: dict[int, PythonSource] = {}
    for src, c in infos:
        if id(c) in module_like:
            files.setdefault(id(src), src)
    return list(files.values())


def _build(project: "ProjectView") -> ModelFacts:
    infos: list[tuple[PythonSource, ClassInfo]] = [(src, info) for src in _module_class_files(project)
                                                  for info in src.facts.classes.values()]
    short = {}
    for src, info in infos:
        short.setdefault(info.name, []).append((src, info))
    module_like: dict[int, ModuleClass] = {}
    changed = True
    while changed:      # a class is a module when a base is one (possibly another checked class)
        changed = False
        for src, info in infos:
            if id(info) in module_like:
                continue
            bases = [b for b in info.bases if b]
            proj = [module_like[id(i)] for b in bases for s, i in short.get(b.rsplit(".", 1)[-1], [])
                    if id(i) in module_like]
            if proj or any(_is_moduleish(b) for b in bases):
                module_like[id(info)] = ModuleClass(src, info, bases)
                changed = True
    changed = True
    while changed:      # mixins of module classes (LLaVA's LlavaMetaModel) create and use module attributes too
        changed = False
        wanted = {b.rsplit(".", 1)[-1] for m in module_like.values() for b in m.bases if b}
        for src, info in infos:
            if id(info) not in module_like and info.name in wanted:
                module_like[id(info)] = ModuleClass(src, info, [b for b in info.bases if b])
                changed = True
    classes = list(module_like.values())
    by_name: dict[str, list[ModuleClass]] = {}
    for cls in classes:
        by_name.setdefault(cls.name, []).append(cls)
    names = set(by_name)
    for cls in classes:
        for b in cls.bases:
            hits = by_name.get(b.rsplit(".", 1)[-1], [])
            if hits:
                cls.project_bases.extend(h for h in hits if h is not cls)
            elif not b.endswith(("torch.nn.Module", "nn.Module")) and b not in ("object", "ABC", "abc.ABC"):
                cls.external_bases.append(b)
        for mname, method in cls.info.methods.items():
            cls.created_classes |= {c.attr for c in method.calls if c.attr} & names
            for stmt in _statements(method.node):
                for target, value in _assignments_of(stmt):
                    attr = _self_attr(target)
                    if attr is None:
                        continue
                    kind = _classify(cls.src.facts, value, names)
                    if kind is not None and attr not in cls.attrs:
                        ctor = (dotted_name(value.func) or "").rsplit(".", 1)[-1] if isinstance(value, cst.Call) else ""
                        cls.attrs[attr] = ModuleAttr(cls, attr, kind[0], stmt, mname, kind[1], ctor)
                if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
                    call = stmt.value
                    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "register_parameter" \
                            and len(call.args) >= 2:
                        attr = literal_value(call.args[0].value)
                        if isinstance(attr, str) and attr not in cls.attrs:
                            kind = _classify(cls.src.facts, call.args[1].value, names)
                            if kind is not None:
                                cls.attrs[attr] = ModuleAttr(cls, attr, kind[0], stmt, mname, kind[1])
    # a checked class that creates nothing trainable (an op wrapper) is not a trainable submodule
    changed = True
    while changed:
        changed = False
        for cls in classes:
            for name, attr in list(cls.attrs.items()):
                owners = by_name.get(attr.ctor, [])
                if attr.kind == "module" and owners and all(
                        not any(c.attrs or c.external_bases for c in o.mro()) for o in owners):
                    del cls.attrs[name]
                    changed = True
    freezing = Freezing()
    collector = _FreezeCollector(freezing)
    for src in project.python:
        if _FREEZE_TEXT.search(src.text):
            collector.run(src.module)
    return ModelFacts(classes, by_name, freezing)


def _statements(fn: cst.FunctionDef):
    """Small statements of a function body, nested blocks included (not nested defs)."""
    todo = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(stmt, cst.BaseCompoundStatement):
            for block in _blocks(stmt):
                todo.extend(block)


def _blocks(stmt: cst.BaseCompoundStatement):
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite) and isinstance(body, cst.IndentedBlock):
        yield list(body.body)
    orelse = getattr(stmt, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            if isinstance(orelse.body, cst.IndentedBlock):
                yield list(orelse.body.body)
            orelse = orelse.orelse
        else:
            if isinstance(orelse.body, cst.IndentedBlock):
                yield list(orelse.body.body)
            orelse = None
    for handler in getattr(stmt, "handlers", ()) or ():
        if isinstance(handler.body, cst.IndentedBlock):
            yield list(handler.body.body)
    final = getattr(stmt, "finalbody", None)
    if final is not None and isinstance(final.body, cst.IndentedBlock):
        yield list(final.body.body)


def _assignments_of(stmt: cst.BaseSmallStatement):
    if isinstance(stmt, cst.Assign):
        for t in stmt.targets:
            yield t.target, stmt.value
    elif isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
        yield stmt.target, stmt.value


def model_facts(project: "ProjectView") -> ModelFacts:
    return memo(project, "model-facts", lambda: _build(project))


_DYNAMIC = re.compile(r"getattr\(\s*self\s*,\s*[^\"'\s]|self\.(children|named_children|modules|named_modules|"
                      r"_modules|__dict__|parameters|named_parameters|state_dict)\b|vars\(self\)")


def attribute_read_count(project: "ProjectView", name: str) -> int:
    """Reads of attribute `name` anywhere in the run's text (`.name` not being assigned, `"name"` strings for
    getattr/hasattr), the creating assignments excluded. A text count: cheap, and errs towards 'read'."""
    counts = memo(project, "attribute-reads", dict)
    if name not in counts:
        read = re.compile(r"\.%s\b(?!\s*=[^=])|[\"']%s[\"']" % (re.escape(name), re.escape(name)))
        counts[name] = sum(len(read.findall(src.text)) for src in project.using_identifier(name))
    return counts[name]


def reaches_attributes_dynamically(cls: ModuleClass) -> bool:
    """`getattr(self, name)`, `self.children()`, `self._modules`, … in the class body."""
    return bool(_DYNAMIC.search(cst.Module([]).code_for_node(cls.info.node)))
