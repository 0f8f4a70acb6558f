"""nn.Module classes of the checked files and the parameters/submodules they create.

For every class whose bases resolve (through imports and the other checked files) to `torch.nn.Module`, a
`torch.nn` layer, a `transformers` model class or DeepSpeed's `MoE`: the attributes its methods create
(`self.x = nn.Parameter(...)`, `self.proj = nn.Linear(...)`, `self.mm_projector = build_projector(cfg)`),
whether they start frozen (`requires_grad=False`), and the freezing/unfreezing statements anywhere in the run
(`.x.requires_grad_(False)`, `for p in m.x.parameters(): p.requires_grad = False`, `model.requires_grad_(False)`,
`get_peft_model`). Attributes are matched by name across classes (`self.get_model().mm_projector` in a mixin):
that is how multimodal models split creation and use over several classes.

Freezing is per sub-tree: each statement acts on an attribute path (`model.get_model().requires_grad_(False)`
→ `("model",)` once the getter `def get_model(self): return self.model` is resolved), and an attribute's own
paths come from the containment of the run's classes (`self.model = LlavaLlamaModel(config)` puts the mixin
`LlavaMetaModel`'s `mm_projector` at `("model", "mm_projector")`). The most specific statement reaching an
attribute decides (`model.requires_grad_(False)` then `model.get_model().mm_projector.requires_grad_(True)`
leaves only the projector trainable); freezing `model.model` leaves `self.image_gate` of the outer class alone.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.hyperparams import memo
from dslint.program.facts import ClassInfo
from dslint.sources.literals import UNKNOWN
from dslint.sources.wordsearch import alternation
from dslint.program.outline import ClassOutline, Outline, calls_under, dotted_name
from dslint.sources.cstwalk import visit as cst_visit

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

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
    method: str
    index: int                     # position of the assignment among `_statements` of the method
    line: int
    frozen_at_creation: bool = False
    ctor: str = ""                 # short name of what was called to create it

    @property
    def statement(self) -> cst.CSTNode:
        """The creating statement in the libcst tree, for reporting (parses the file on first use)."""
        method = self.owner.info.methods[self.method]
        for index, stmt in enumerate(_statements(method.node)):
            if index == self.index:
                return stmt
        raise LookupError(f"{self.owner.qualname}.{self.method}: statement {self.index} not found")


@dataclass(eq=False)
class ModuleClass:
    """A module class, found on the outlines; its libcst `info` is looked up (and the file parsed) only when a
    rule reads the class's syntax."""
    src: PythonSource
    name: str
    qualname: str
    bases: list[str]
    methods: frozenset = frozenset()                               # names of the methods it defines
    project_bases: list["ModuleClass"] = field(default_factory=list)
    external_bases: list[str] = field(default_factory=list)
    attrs: dict[str, ModuleAttr] = field(default_factory=dict)
    created_classes: set[str] = field(default_factory=set)      # short names of classes its methods construct
    dynamic: bool = False          # its code reaches attributes by name or by iteration (`_DYNAMIC`)
    span: tuple[int, int] = (0, 0)  # its text in src.text, as `_class_lines` has it

    def mentions(self, names: frozenset) -> bool:
        """Does the class's own text spell any of `names` as a word? (A superset of the attributes of those
        names that its methods read, `getattr(self, "name")` included.)"""
        return _words(names).search(self.src.text, *self.span) is not None

    @property
    def info(self) -> ClassInfo:
        return self.src.facts.classes[self.qualname]

    def mro(self) -> list["ModuleClass"]:
        out: list[ModuleClass] = []
        todo = [self]
        while todo:
            cls = todo.pop(0)
            if cls not in out:
                out.append(cls)
                todo.extend(cls.project_bases)
        return out

    def has_method(self, name: str) -> bool:
        """`find_method(name) is not None`, without reading the syntax tree."""
        return any(name in cls.methods for cls in self.mro())

    def find_method(self, name: str):
        for cls in self.mro():
            if name in cls.methods:
                return cls, cls.info.methods[name]
        return None


@dataclass
class Freezing:
    """Freeze/unfreeze statements as (file, line), by the attribute they name."""
    frozen: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    unfrozen: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    freeze_all: list[tuple[str, int]] = field(default_factory=list)
    # every statement by the attribute path it acts on (from the statement's root variable; a method call
    # kept as "name()" until `_build` resolves getters): (path, flag, file, line); () is the whole model
    paths: list[tuple[tuple, bool, str, int]] = field(default_factory=list)


@dataclass
class ModelFacts:
    classes: list[ModuleClass]
    by_name: dict[str, list[ModuleClass]]
    freezing: Freezing

    def trainable(self, attr: ModuleAttr) -> bool:
        """False when evidence says the whole attribute is frozen and nothing unfreezes it (or a part of it)
        again. Per sub-tree: see `_path_state`."""
        statements = self.freezing.paths
        if not statements:
            return not attr.frozen_at_creation
        return any(_path_state(path, statements, attr.frozen_at_creation) for path in self.paths_of(attr))

    def paths_of(self, attr: ModuleAttr) -> set[tuple]:
        return {(*p, attr.name) for p in self.class_paths(attr.owner)}

    def class_paths(self, cls: ModuleClass, seen: Optional[frozenset] = None) -> set[tuple]:
        """Attribute paths at which instances of `cls` (or of a subclass: a mixin's attributes live in them) sit
        below a model root: `self.<a> = Cls(...)` in another class of the run; {()} when none creates it."""
        memo_paths = self.__dict__.setdefault("_class_paths", {})
        if id(cls) in memo_paths:
            return memo_paths[id(cls)]
        seen = (seen or frozenset()) | {id(cls)}
        index = self.__dict__.get("_created_as")
        if index is None:
            index = self.__dict__["_created_as"] = {}
            for c in self.classes:
                for a in c.attrs.values():
                    if a.kind == "module" and a.ctor:
                        index.setdefault(a.ctor, []).append(a)
        out: set[tuple] = set()
        for inst in [cls, *self.subclasses(cls)]:
            for a in index.get(inst.name, ()):
                if id(a.owner) in seen:
                    continue
                out |= {(*p, a.name) for p in self.class_paths(a.owner, seen)}
                if len(out) > 8:
                    break
        if not out:
            out = {()}
        if seen == {id(cls)}:
            memo_paths[id(cls)] = out
        return out

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


def _lands(stmt: tuple, path: tuple) -> Optional[int]:
    """Where in `path` the statement's path ends, over the alignments that agree on every segment both have
    (its start may lie above the attribute's root: a wrapper's own attributes); None when it does not reach
    the attribute, len(path) when it reaches a part below it (`vision_tower.blocks`). () ends at -1: the whole
    model."""
    if not stmt:
        return -1
    best = None
    n, m = len(stmt), len(path)
    for k in range(-n + 1, m):
        overlap = [(j, k + j) for j in range(n) if 0 <= k + j < m]
        if not overlap or any(stmt[j] != path[i] for j, i in overlap):
            continue
        if k + n - 1 < m and (best is None or k + n - 1 > best):
            best = k + n - 1
        elif k + n - 1 >= m and k <= m - 1 and overlap[-1][1] == m - 1:
            best = m if best is None else max(best, m)
    return best


def _path_state(path: tuple, statements: list, frozen_at_creation: bool) -> bool:
    """Is the attribute at `path` (or a part of it) trainable? The most specific statement reaching it decides
    (an unfreeze wins a tie: statements of several files have no order); an unfreeze of a part below it makes
    it (partly) trainable; `requires_grad=False` at creation counts as a freeze of the attribute itself that
    only an unfreeze naming the attribute undoes."""
    state, depth = True, -2
    if frozen_at_creation:
        state, depth = False, len(path) - 1
    partly = False
    for stmt, flag, _file, _line in statements:
        at = _lands(stmt, path)
        if at is None:
            continue
        if at == len(path):
            partly = partly or flag
            continue
        if at > depth or (at == depth and flag):
            state, depth = flag, at
    return state or partly


def _resolve_segments(path: tuple, getters: dict) -> tuple:
    """Method calls in a freezing statement's path: a getter of the run (`get_model()` → `model`), else the
    name without `get_` (LLaVA's `get_vision_tower()`), else the call's name."""
    out = []
    for seg in path:
        if seg.endswith("()"):
            name = seg[:-2]
            attrs = getters.get(name)
            if attrs and len(attrs) == 1:
                seg = next(iter(attrs))
            elif name.startswith("get_") and len(name) > 4:
                seg = name[4:]
            else:
                seg = name
        out.append(seg)
    return tuple(out)


def _is_moduleish(base: str) -> bool:
    last = base.rsplit(".", 1)[-1]
    if base.startswith(("torch.nn.", "nn.")) and last not in ("Parameter",):
        return True
    if base.startswith("transformers.") or base.startswith("deepspeed.moe"):
        return not last.endswith(NOT_MODULE_SUFFIXES)
    return last in ("Module", "PreTrainedModel", "MoE")


def _module_like(project: "ProjectView") -> list[tuple[PythonSource, ClassOutline]]:
    """Classes that are nn.Module-like (a base is one, possibly another checked class) or a mixin of one,
    found on the outlines (same names and resolved bases as the libcst facts)."""
    infos = [(src, c) for src in project.python if src.outline is not None for c in src.outline.classes.values()]
    # which classes are module-like is decided by the set of classes alone (both fixed points only add): a
    # launch unit's view (`ProjectView._run_order`) takes the answer of an earlier view holding the same files
    # with classes, kept on the run's program model, and lists the classes in its own order
    shared = project.program.__dict__.setdefault("_module_like", {}) if project._run_order is not None else None
    key = frozenset(id(src) for src in project.python if src.outline is not None and src.outline.classes) \
        if shared is not None else None
    module_like = shared.get(key) if shared is not None else None
    if module_like is None:
        module_like = _module_like_ids(infos)
        if shared is not None:
            shared[key] = module_like
    return [(src, c) for src, c in infos if id(c) in module_like]


def _module_like_ids(infos: list[tuple[PythonSource, ClassOutline]]) -> set[int]:
    """ids of the module-like classes among `infos` (`_module_like`)."""
    short: dict[str, list] = {}
    for src, c in infos:
        short.setdefault(c.name, []).append(c)
    module_like: set[int] = set()
    changed = True
    while changed:      # a class is a module when a base is one (possibly another checked class)
        changed = False
        for src, c in infos:
            if id(c) in module_like:
                continue
            bases = [b for b in c.bases if b]
            if any(id(i) in module_like for b in bases for i in short.get(b.rsplit(".", 1)[-1], ())) \
                    or any(_is_moduleish(b) for b in bases):
                module_like.add(id(c))
                changed = True
    changed = True
    while changed:      # mixins of module classes (LLaVA's LlavaMetaModel) create and use module attributes too
        changed = False
        wanted = {b.rsplit(".", 1)[-1] for src, c in infos if id(c) in module_like for b in c.bases if b}
        for src, c in infos:
            if id(c) not in module_like and c.name in wanted:
                module_like.add(id(c))
                changed = True
    return module_like


def _same_path(base: str, cls: "ModuleClass") -> bool:
    """Can the resolved base name `base` denote `cls` -- one dotted path a suffix of the other (a file checked from
    a sub-folder has a shorter module name than the package's absolute import spells)?"""
    full = f"{cls.src.module_name}.{cls.qualname}" if cls.src.module_name else cls.qualname
    return base == full or base.endswith("." + full) or full.endswith("." + base) or base == cls.qualname


def _build(project: "ProjectView") -> ModelFacts:
    """From the outlines' per-file part (`file_model_facts`, built on CPython's tree with the outline): nothing
    is parsed here."""
    classes = [ModuleClass(src, c.name, c.qualname, [b for b in c.bases if b]) for src, c in _module_like(project)]
    by_name: dict[str, list[ModuleClass]] = {}
    for cls in classes:
        by_name.setdefault(cls.name, []).append(cls)
    names = set(by_name)
    for cls in classes:
        for b in cls.bases:
            hits = by_name.get(b.rsplit(".", 1)[-1], [])
            if "." in b and not b.startswith("."):
                # a base resolved through an import (`from transformers.models.gpt2.modeling_gpt2 import
                # GPT2Block`) is the class of that module: a class of the run with the same short name in a module
                # whose dotted path does not match (a vendored `...tfpp.backbones.gpt2.block.GPT2Block`) is another
                # class -- the base is then a library's
                hits = [h for h in hits if _same_path(b, h)]
            if hits:
                cls.project_bases.extend(h for h in hits if h is not cls)
            elif not b.endswith(("torch.nn.Module", "nn.Module")) and b not in ("object", "ABC", "abc.ABC"):
                cls.external_bases.append(b)
        raw = cls.src.outline.model_classes[cls.qualname]
        cls.span, cls.dynamic, cls.methods = raw.span, raw.dynamic, raw.methods
        cls.created_classes = set(raw.created & names)
    for cls in classes:     # once every class's bases and methods are known (`_factory_kind` walks the mro)
        raw = cls.src.outline.model_classes[cls.qualname]
        for attr, plain, project_class, last, factory, ctor, mname, index, line in raw.attrs:
            kind = project_class if last in names else plain
            if kind is None and factory and attr not in cls.attrs:
                kind = _factory_kind(project, cls.src, factory, cls, names)
            if kind is not None and attr not in cls.attrs:
                cls.attrs[attr] = ModuleAttr(cls, attr, kind[0], mname, index, line, kind[1], ctor)
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
    raw_paths = []
    for src in project.python:
        found = src.outline.freezing if src.outline is not None else None
        if found is not None:
            for attr, where in found.frozen.items():
                freezing.frozen.setdefault(attr, []).extend(where)
            for attr, where in found.unfrozen.items():
                freezing.unfrozen.setdefault(attr, []).extend(where)
            freezing.freeze_all.extend(found.freeze_all)
            raw_paths.extend(found.paths)
    if raw_paths:
        getters: dict[str, set] = {}
        for cls in classes:
            for name, attr in cls.src.outline.model_classes[cls.qualname].getters.items():
                getters.setdefault(name, set()).add(attr)
        freezing.paths = [(_resolve_segments(p, getters), flag, f, line) for p, flag, f, line in raw_paths]
    facts = ModelFacts(classes, by_name, freezing)
    if any(p and p[0].startswith("self:") for p, *_ in freezing.paths):
        placed = []
        for path, flag, f, line in freezing.paths:
            if not (path and path[0].startswith("self:")):
                placed.append((path, flag, f, line))
                continue
            owners = by_name.get(path[0][5:], [])
            for base in {p for c in owners for p in facts.class_paths(c)} or {()}:
                placed.append(((*base, *path[1:]), flag, f, line))
        freezing.paths = placed
    return facts


@dataclass
class RawClass:
    """What `_build` reads of one class, from its file alone (computed with the outline, where CPython's tree
    is at hand, and in the outline workers on big runs)."""
    span: tuple[int, int]
    dynamic: bool
    methods: frozenset
    created: frozenset          # short names of the resolved callees of its methods' own calls
    # self.<attr> = <call> candidates in `_build`'s order: (attr, kind when the callee's short name `last` is no
    # module class of the run, kind when it is, last, the resolved callee when a function of the run it calls
    # may decide by its returns -- `_factory_kind` -- else "", ctor, method, statement index, line)
    attrs: list
    getters: dict = field(default_factory=dict)     # `def m(self): return self.x` → {"m": "x"}


def _getter(fn: ast.AST) -> Optional[str]:
    body = [s for s in fn.body if not (type(s) is ast.Expr and type(s.value) is ast.Constant)]
    if len(body) == 1 and type(body[0]) is ast.Return and body[0].value is not None:
        return _self_attr(body[0].value)
    return None


def file_model_facts(tree: ast.Module, text: str, path: str, outline: Outline
                     ) -> tuple[dict[str, RawClass], Optional[Freezing], dict]:
    """The per-file part of the model facts: every class's `RawClass`, the file's freezing statements, and the
    constructions its functions return (`_file_returns`)."""
    classes: dict[str, RawClass] = {}
    defs = _class_defs(tree)
    if defs:
        lines = text.split("\n")
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line) + 1)
    for qual, node in defs.items():
        start, end = _class_lines(node, lines)
        span = (offsets[start], offsets[end] - 1)
        methods = _methods(node)
        created: set[str] = set()
        attrs: list = []
        for mname, fn in methods.items():
            created |= {(outline.resolve(dotted_name(c.func)) or "").rsplit(".", 1)[-1] for c in _own_calls(fn)}
            for index, stmt in enumerate(_ast_statements(fn, lines)):
                for target, value in _ast_assignments(stmt):
                    attr = _self_attr(target)
                    candidate = _attr_candidate(outline, value) if attr is not None else None
                    if candidate is not None:
                        ctor = (dotted_name(value.func) or "").rsplit(".", 1)[-1]
                        attrs.append((attr, *candidate, ctor, mname, index, stmt.lineno))
                if type(stmt) is ast.Expr and type(stmt.value) is ast.Call:
                    call = stmt.value
                    args = _ordered_args(call)
                    if isinstance(call.func, ast.Attribute) and call.func.attr == "register_parameter" \
                            and len(args) >= 2:
                        attr = _literal(args[0])
                        candidate = _attr_candidate(outline, args[1]) if isinstance(attr, str) else None
                        if candidate is not None:
                            attrs.append((attr, *candidate, "", mname, index, stmt.lineno))
        getters = {m: a for m, fn in methods.items() if (a := _getter(fn)) is not None}
        classes[qual] = RawClass(span, _DYNAMIC.search(text, *span) is not None, frozenset(methods),
                                 frozenset(created), attrs, getters)
    freezing = None
    matches = [m.start() for m in _FREEZE_TEXT.finditer(text)]
    if matches:
        freezing = Freezing()
        lines_at, line, pos = [], 1, 0
        for at in matches:
            line += text.count("\n", pos, at)
            pos = at
            if not lines_at or lines_at[-1] != line:
                lines_at.append(line)
        _FreezeCollector(freezing, path, lines_at).visit(tree)
    return classes, freezing, _file_returns(tree, outline)


def _attr_candidate(outline: Outline, value: ast.expr) -> Optional[tuple]:
    """`_classify` of `value` both ways its callee's short name may turn out (a module class of the run or
    not), that name, and the resolved callee when it may be a function of the run whose returns decide
    (`_factory_kind`); None when it creates nothing trainable any way."""
    if type(value) is not ast.Call:
        return None
    callee = outline.resolve(dotted_name(value.func)) or ""
    last = callee.rsplit(".", 1)[-1]
    plain, project_class = _classify(outline, value, set()), _classify(outline, value, {last})
    # a call of a function (not a library's: torch's are classified above) may return a construction
    factory = callee if callee and plain is None and not callee.startswith(_LIBRARY_ROOTS) else ""
    if plain is None and project_class is None and not factory:
        return None
    return plain, project_class, last, factory


_LIBRARY_ROOTS = ("torch.", "nn.", "transformers.", "numpy.", "np.", "math.", "os.", "deepspeed.", "super().",
                  "super.")


def _returned_constructions(fn: ast.AST, outline: Outline) -> tuple:
    """What a function's `return`s construct: `_attr_candidate` of each returned call, a returned local name
    followed to the calls assigned to it in the function (`proj = nn.Sequential(*mods); return proj`)."""
    returns = []
    assigned: dict[str, list] = {}
    todo = list(fn.body)
    while todo:         # statements only (a return or an assignment is one), not into nested definitions
        node = todo.pop()
        kind = type(node)
        if kind is ast.Return:
            if node.value is not None:
                returns.append(node.value)
        elif kind is ast.Assign:
            if type(node.value) is ast.Call:
                for target in node.targets:
                    if type(target) is ast.Name:
                        assigned.setdefault(target.id, []).append(node.value)
        elif kind not in _DEFS:
            for name in _SCOPE_BLOCKS:
                block = getattr(node, name, None)
                if block:
                    todo.extend(block)
    if not returns:
        return ()
    out = []
    for value in returns:
        calls = [value] if type(value) is ast.Call else assigned.get(value.id, []) if type(value) is ast.Name \
            else []
        for call in calls:
            candidate = _attr_candidate(outline, call)
            if candidate is not None:
                out.append(candidate)
    return tuple(out)


def _file_returns(tree: ast.Module, outline: Outline) -> dict:
    """`_returned_constructions` of the file's functions and methods, by qualified name (those returning a
    call only)."""
    out = {}
    stack: list[tuple[ast.AST, tuple]] = [(tree, ())]
    while stack:
        node, scopes = stack.pop()
        if isinstance(node, _DEFS):
            scopes = (*scopes, node.name)
            if type(node) is not ast.ClassDef:
                found = _returned_constructions(node, outline)
                if found:
                    out[".".join(scopes)] = found
                continue
        kids = [k for name in _SCOPE_BLOCKS for k in getattr(node, name, None) or ()]
        stack.extend((k, scopes) for k in kids)
    return out


def _factory_kind(project: "ProjectView", src: "PythonSource", callee: str, owner: Optional["ModuleClass"],
                  names: set, depth: int = 0) -> Optional[tuple[str, bool]]:
    """(kind, frozen) of what a function of the run that `callee` resolves to returns -- a torch layer, a module
    class of the run, a pretrained model, another such function's result (a method of `owner` for
    `self.m(...)`) --, None when none of its returns constructs something trainable or it is not found."""
    if depth > 4 or not callee:
        return None
    hits: list[tuple["PythonSource", str]] = []
    if callee.startswith("self.") and callee.count(".") == 1 and owner is not None:
        method = callee[5:]
        for cls in owner.mro():
            if method in cls.methods:
                hits.append((cls.src, f"{cls.qualname}.{method}"))
                break
    elif not callee.startswith("self."):
        hit = project.function_for_callee(src, callee)
        if hit is not None:
            hits.append(hit)
    for where, qual in hits:
        outline = where.outline
        for plain, project_class, last, inner in (outline.returned_constructions.get(qual, ()) if outline else ()):
            kind = project_class if last in names else plain
            if kind is None and inner:
                kind = _factory_kind(project, where, inner, owner if where is src else None, names, depth + 1)
            if kind is not None:
                return kind
    return None


# --- CPython ast helpers: the same facts as the libcst passes they replaced (tests/test_model_facts.py) ----

_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SCOPE_BLOCKS = ("body", "orelse", "handlers", "finalbody", "cases")


def _class_defs(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """Class definitions by qualified name (the outline's names: functions and classes make scopes)."""
    out: dict[str, ast.ClassDef] = {}
    stack: list[tuple[ast.AST, tuple]] = [(tree, ())]
    while stack:
        node, scopes = stack.pop()
        if isinstance(node, _DEFS):
            scopes = (*scopes, node.name)
            if type(node) is ast.ClassDef:
                out[".".join(scopes)] = node
        kids = [k for name in _SCOPE_BLOCKS for k in getattr(node, name, None) or ()]
        stack.extend((k, scopes) for k in reversed(kids))
    return out


def _class_lines(node: ast.ClassDef, lines: list[str]) -> tuple[int, int]:
    """The lines [start, end) of a class as libcst's `code_for_node` has it: its decorators, the comments and
    blank lines above it at its indentation or less, and the comment lines after its body indented further
    than it."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    indent = len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())
    start = first
    while start > 0:
        line = lines[start - 1]
        body = line.lstrip()
        if body and not (body.startswith("#") and len(line) - len(body) <= indent):
            break
        start -= 1
    end = node.end_lineno
    while end < len(lines):
        line = lines[end]
        body = line.lstrip()
        if body and not (body.startswith("#") and len(line) - len(body) > indent):
            break
        end += 1
    return start, end


def _methods(node: ast.ClassDef) -> dict[str, ast.AST]:
    """Functions defined directly in the class's scope (inside `if`/`try` blocks too); the last one of a name."""
    out: dict[str, ast.AST] = {}
    todo = list(reversed(node.body))
    while todo:
        stmt = todo.pop()
        if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef):
            out[stmt.name] = stmt
        elif type(stmt) is not ast.ClassDef:
            todo.extend(reversed([k for name in _SCOPE_BLOCKS for k in getattr(stmt, name, None) or ()]))
    return out


def _own_calls(fn: ast.AST):
    """Calls of a function (its decorators and defaults included), not of the functions nested in it."""
    return calls_under([*fn.decorator_list, fn.args, *([fn.returns] if fn.returns else []), *fn.body],
                       skip=(ast.FunctionDef, ast.AsyncFunctionDef))


def _indented(block: list, lines: list[str]) -> bool:
    """libcst's IndentedBlock (a suite on its own lines), not a `x: stmt` on the header's line."""
    if not block:
        return False
    first = block[0]
    return not lines[first.lineno - 1].encode()[: first.col_offset].strip()


def _ast_blocks(stmt: ast.stmt, lines: list[str]):
    """The nested statement lists of a compound statement, in `_blocks`' order (body, else/elif chain,
    handlers, finally)."""
    kind = type(stmt)
    if kind is ast.Match:
        return
    yield stmt.body
    if kind is ast.If:
        orelse = stmt.orelse
        while len(orelse) == 1 and type(orelse[0]) is ast.If and \
                lines[orelse[0].lineno - 1].encode()[orelse[0].col_offset:].startswith(b"elif"):
            yield orelse[0].body
            orelse = orelse[0].orelse
        if orelse:
            yield orelse
        return
    if getattr(stmt, "orelse", None):
        yield stmt.orelse
    for handler in getattr(stmt, "handlers", ()) or ():
        yield handler.body
    if getattr(stmt, "finalbody", None):
        yield stmt.finalbody


def _ast_statements(fn: ast.AST, lines: list[str]):
    """`_statements` on the ast: simple statements of the body, nested blocks breadth-first, no nested defs."""
    todo = list(fn.body) if _indented(fn.body, lines) else []
    position = 0
    while position < len(todo):
        stmt = todo[position]
        position += 1
        if not isinstance(stmt, _COMPOUND):
            yield stmt
        elif not isinstance(stmt, _DEFS):
            for block in _ast_blocks(stmt, lines):
                if _indented(block, lines):
                    todo.extend(block)


def _ast_assignments(stmt: ast.stmt):
    if type(stmt) is ast.Assign:
        for target in stmt.targets:
            yield target, stmt.value
    elif type(stmt) is ast.AnnAssign and stmt.value is not None:
        yield stmt.target, stmt.value


def _self_attr(target: ast.expr) -> Optional[str]:
    if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
        return target.attr
    return None


def _literal(expr: Optional[ast.expr]) -> object:
    """`literal_value` for the scalars read here: True/False/None, numbers, str."""
    if type(expr) is ast.Constant and not isinstance(expr.value, bytes):
        return expr.value
    return UNKNOWN


def _ordered_args(call: ast.Call) -> list[ast.expr]:
    """Argument values in source order, keywords included (libcst's `Call.args`)."""
    items = [(a.lineno, a.col_offset, a) for a in call.args] + \
        [(k.lineno, k.col_offset, k.value) for k in call.keywords]
    return [a for _, _, a in sorted(items, key=lambda t: t[:2])]


def _classify(outline: Outline, value: ast.expr, project_names: set[str]) -> Optional[tuple[str, bool]]:
    """(kind, frozen) for the right-hand side of `self.x = …`, None when it creates nothing trainable."""
    if type(value) is not ast.Call:
        return None
    callee = outline.resolve(dotted_name(value.func)) or ""
    last = callee.rsplit(".", 1)[-1]
    if last == "Parameter" and ("nn" in callee or callee == "Parameter"):
        frozen = any(k.arg == "requires_grad" and _literal(k.value) is False for k in value.keywords)
        return "parameter", frozen
    if callee.startswith("torch.nn.") or callee.startswith("nn."):
        if last in PARAMETERLESS or last == "Buffer" or not last[:1].isupper():
            return None
        return "module", False
    if callee.endswith(".from_pretrained") and callee.startswith("transformers.") and \
            not _is_moduleish(callee.rsplit(".", 1)[0]):
        return None     # a transformers tokenizer, processor, config: no parameters (`_is_moduleish`)
    if last in project_names or last == "MoE" or callee.endswith("from_pretrained"):
        return "module", False
    # a project function that builds the module (`self.mm_projector = build_vision_projector(cfg)`) is followed
    # to what it returns in `_build` (`_factory_kind`), whatever its name
    return None


_WRAPPERS = ("module", "base_model")      # engine.module, PEFT's base_model: the model itself
_PARTS = ("weight", "bias")              # freezing a layer's weight: the layer, as before


def _chain_segments(expr: ast.expr) -> list[str]:
    """The attribute names along `a.b().c[0].d` from its root variable, a method call marked "name()":
    ["b()", "c", "d"]."""
    out = []
    while True:
        kind = type(expr)
        if kind is ast.Attribute:
            out.append(expr.attr)
            expr = expr.value
        elif kind is ast.Call:
            if type(expr.func) is ast.Attribute:
                out.append(expr.func.attr + "()")
                expr = expr.func.value
            else:
                break
        elif kind is ast.Subscript:
            expr = expr.value
        else:
            break
    out.reverse()
    return out


def _chain_path(expr: ast.expr) -> tuple:
    """The attribute path of `a.b().c[0].d` from its root variable: ("b()", "c", "d") -- a method call kept as
    "name()" for `_resolve_segments`; leading wrappers and a trailing weight/bias dropped."""
    out = _chain_segments(expr)
    while out and out[0] in _WRAPPERS:
        out.pop(0)
    while out and out[-1] in _PARTS:
        out.pop()
    return tuple(out)


def _chain_attrs(expr: ast.expr) -> list[str]:
    """Attribute names along `a.b().c.d` (['b', 'c', 'd'])."""
    return [seg[:-2] if seg.endswith("()") else seg for seg in _chain_segments(expr)]


class _FreezeCollector(ast.NodeVisitor):
    """Freeze/unfreeze statements, by the attribute they name (name-based across the run)."""

    def __init__(self, out: Freezing, path: str, lines: Optional[list[int]] = None) -> None:
        self.out = out
        self.path = path
        self.loops: list[tuple[str, list[str], tuple]] = []  # (loop variable, attrs and path of the iterated module)
        self.conditional = 0
        self.classes: list[str] = []    # the classes whose bodies enclose the visited node
        self.lines = lines      # sorted lines where `_FREEZE_TEXT` matches; None: visit everything

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def _own(self, expr: ast.expr, path: tuple) -> Optional[tuple]:
        """A statement on `self` in a class's method acts on that class's instances: its path starts with
        the marker `self:<Class>` (`_build` puts it below the paths where the run creates the class), so a
        `for p in self.parameters()` freezing loop in a tower's `__init__` freezes the tower, not the model."""
        root = expr
        while type(root) in (ast.Attribute, ast.Call, ast.Subscript):
            root = root.func if type(root) is ast.Call else root.value
        if type(root) is ast.Name and root.id == "self" and self.classes:
            return (f"self:{self.classes[-1]}", *path)
        return None

    def generic_visit(self, node: ast.AST) -> None:
        """Only into nodes whose lines hold a `_FREEZE_TEXT` match: every record is made at a node spanning one
        (the assignment, the call), and the loops and tests it reads are its ancestors, which span it too."""
        lines = self.lines
        for _name, value in ast.iter_fields(node):
            for item in value if type(value) is list else (value,):
                if not isinstance(item, ast.AST):
                    continue
                first = getattr(item, "lineno", None)
                if lines is not None and first is not None:
                    k = bisect_left(lines, first)
                    if k == len(lines) or lines[k] > item.end_lineno:
                        continue
                self.visit(item)

    def _record(self, attrs: list[str], flag: object, node: ast.AST, whole: bool = False,
                path: Optional[tuple] = None) -> None:
        """`whole`: the statement acts on a module's parameters (requires_grad_(), a parameters() loop), so an
        empty attribute chain (`model.requires_grad_(False)`) means the whole model. `path`: the attribute path
        it acts on (`Freezing.paths`)."""
        if self.conditional and flag is False:
            return
        if (flag is True or flag is False) and path is not None and (path or (whole and flag is False)):
            self.out.paths.append((path, flag, self.path, node.lineno))
        if path and path[0].startswith("self:"):
            whole = False       # the class's own parameters, not the whole model's
        attrs = [a for a in attrs if a not in ("parameters", "named_parameters", "module", "get_model", "model",
                                               "requires_grad", "requires_grad_", "weight", "bias", "base_model")]
        if flag is not True and flag is not False:
            return
        where = (self.path, node.lineno)
        if not attrs:
            if flag is False and whole:
                self.out.freeze_all.append(where)
            return
        target = self.out.frozen if flag is False else self.out.unfrozen
        for attr in attrs:
            target.setdefault(attr, []).append(where)

    # a freeze under `if args.freeze_backbone:` describes one configuration, not the model
    def visit_If(self, node: ast.AST) -> None:
        self.conditional += 1
        self.generic_visit(node)
        self.conditional -= 1

    visit_IfExp = visit_If

    def visit_For(self, node: ast.For) -> None:
        it = node.iter
        if type(it) is ast.Call and type(it.func) is ast.Attribute and \
                it.func.attr in ("parameters", "named_parameters") and type(node.target) in (ast.Name, ast.Tuple):
            var = node.target.id if type(node.target) is ast.Name else \
                next((e.id for e in reversed(node.target.elts) if type(e) is ast.Name), "")
            path = _chain_path(it.func.value)
            self.loops.append((var, _chain_attrs(it.func.value), self._own(it.func.value, path) or path))
        else:
            self.loops.append(("", [], ()))
        self.generic_visit(node)
        self.loops.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        for tgt in node.targets:
            if type(tgt) is ast.Attribute and tgt.attr == "requires_grad":
                flag = _literal(node.value)
                if type(tgt.value) is ast.Name:
                    loop = next((l for l in reversed(self.loops) if l[0] == tgt.value.id), None)
                    if loop is not None:
                        self._record(loop[1], flag, node, whole=True, path=loop[2])
                        continue
                self._record(_chain_attrs(tgt.value), flag, node, path=_chain_path(tgt.value))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if type(func) is ast.Attribute and func.attr == "requires_grad_":
            args = _ordered_args(node)
            flag = _literal(args[0]) if args else True
            root = func.value
            while type(root) in (ast.Attribute, ast.Call, ast.Subscript):
                root = root.func if type(root) is ast.Call else root.value
            whole = not (type(root) is ast.Name and root.id == "self")
            path = _chain_path(func.value)
            self._record(_chain_attrs(func.value), flag, node, whole=whole, path=self._own(func.value, path) or path)
        name = dotted_name(func) or ""
        if name.rsplit(".", 1)[-1] in ("get_peft_model", "prepare_model_for_kbit_training", "freeze_model"):
            self.out.freeze_all.append((self.path, node.lineno))
            self.out.paths.append(((), False, self.path, node.lineno))
        self.generic_visit(node)


# what `_FreezeCollector` records: `x.requires_grad = …`, `requires_grad_(…)` and the freezing helpers
_FREEZE_TEXT = re.compile(r"\.requires_grad\s*=(?!=)|requires_grad_\s*\(|get_peft_model|prepare_model_for_kbit_training|"
                          r"freeze_model")


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


@lru_cache(maxsize=4096)
def _words(names: frozenset) -> re.Pattern:
    return re.compile(r"\b(?:%s)\b" % alternation(names))


def model_facts(project: "ProjectView") -> ModelFacts:
    return memo(project, "model-facts", lambda: _build(project))


_DYNAMIC = re.compile(r"getattr\(\s*self\s*,\s*[^\"'\s]|self\.(children|named_children|modules|named_modules|"
                      r"_modules|__dict__|parameters|named_parameters|state_dict)\b|vars\(self\)")


def attribute_read_count(project: "ProjectView", name: str) -> int:
    """Reads of attribute `name` anywhere in the run's text (`.name` not being assigned, `"name"` strings for
    getattr/hasattr), the creating assignments excluded. A text count: cheap, and errs towards 'read'."""
    counts = memo(project, "attribute-reads", dict)
    if name not in counts:
        counts[name] = sum(_attribute_reads_in(src, name) for src in project.using_identifier(name))
    return counts[name]


def _attribute_reads_in(src: "PythonSource", name: str) -> int:
    """`attribute_read_count`'s count in one file: a fact of its text, kept on the source for every view.
    The count of `_READ_PATTERNS[name].findall(text)`, found without scanning the text once per name: every
    match starts at a `.` or quote followed by a whole word equal to `name` (`_read_sites`: those words'
    positions, one scan per file), so the pattern is tried only there, leftmost first and without overlap
    as findall does."""
    per_file = src.__dict__.setdefault("_attribute_reads", {})
    found = per_file.get(name)
    if found is None:
        read = _READ_PATTERNS.get(name)
        if read is None:
            read = _READ_PATTERNS[name] = re.compile(
                r"\.%s\b(?!\s*=[^=])|[\"']%s[\"']" % (re.escape(name), re.escape(name)))
        text = src.text
        if _WORD.fullmatch(name) is None:
            found = len(read.findall(text))
        else:
            found, end = 0, 0
            for start in _read_sites(src).get(name, ()):
                if start - 1 >= end and (m := read.match(text, start - 1)) is not None:
                    found += 1
                    end = m.end()
        per_file[name] = found
    return found


def _read_sites(src: "PythonSource") -> dict[str, list[int]]:
    """Word → start offsets of its occurrences right after a `.` or a quote in `src`'s text (a fact of the
    text, kept on the source)."""
    sites = src.__dict__.get("_attribute_read_sites")
    if sites is None:
        sites = src.__dict__["_attribute_read_sites"] = {}
        for m in _WORD_AFTER_DOT_OR_QUOTE.finditer(src.text):
            sites.setdefault(m.group(), []).append(m.start())
    return sites


_READ_PATTERNS: dict[str, re.Pattern] = {}
_WORD = re.compile(r"\w+")
_WORD_AFTER_DOT_OR_QUOTE = re.compile(r"(?<=[.\"'])\w+")


def reaches_attributes_dynamically(cls: ModuleClass) -> bool:
    """`getattr(self, name)`, `self.children()`, `self._modules`, … in the class body."""
    return cls.dynamic


# calls that train a model (the last name of the resolved callee): a loss's `backward()`, an optimizer's or
# engine's `step()`, DeepSpeed's `initialize`, DDP/FSDP, accelerate's `Accelerator`; a `...Trainer(...)`
# construction is counted in `_trains`
TRAINING_CALLS = frozenset({"backward", "step", "initialize", "DistributedDataParallel", "DDP",
                            "FullyShardedDataParallel", "Accelerator"})


def never_trained(project: "ProjectView", facts: ModelFacts, cls: ModuleClass) -> bool:
    """Is every construction of `cls` the run's files show -- of the class, a subclass, or a class that holds one
    as an attribute (up to three levels) -- in a file that trains nothing, neither itself nor through a function
    of another file it calls (`backward`, `step`, `deepspeed.initialize`, a Trainer, DDP/FSDP, accelerate)?
    A unit test that builds a model only to inspect its parameter groups: its unused parameters are no
    training's concern. A construction in a factory -- a module-level function that returns a value
    (`get_language_model()` building the model and returning it with its checkpoint key) -- called in a method of a
    module class is that class's: the holder's constructions count (a factory-built holder); a factory called
    elsewhere keeps its own file as the site. When no construction is found (a model built elsewhere, by a registry): True only for a class the run
    names nowhere else (`_unreferenced`), defined in a file that builds other models of the run and trains
    nothing."""
    unique = _construction_files(project, facts, cls, 0, set())
    if not unique:
        # no construction found: a model built elsewhere (a factory, a registry, a user of the package) -- unless
        # nothing in the run names the class at all (no construction, subclass, import, registry entry or config
        # string) and its own file is a user of models, not a model library: it builds other models of the run and
        # trains nothing (a unit test's stand-in left unused beside the models it inspects)
        return _unreferenced(project, cls) and _builds_models(project, facts, cls.src) and \
            not _trains(project, cls.src)
    return not any(_trains(project, src) for src in unique)


MAX_FACTORY_DEPTH = 3


def holder_closure(facts: ModelFacts, cls: ModuleClass) -> dict[int, ModuleClass]:
    """`cls`, its subclasses and the classes holding one of them as a sub-module, four levels up, by id."""
    holders: dict[int, ModuleClass] = {}
    frontier = [cls]
    for _ in range(4):
        nxt = []
        for c in frontier:
            for k in [c, *facts.subclasses(c)]:
                if id(k) not in holders:
                    holders[id(k)] = k
                    nxt.extend(facts.containers(k))
        frontier = nxt
    return holders


def _construction_files(project: "ProjectView", facts: ModelFacts, cls: ModuleClass, depth: int, seen: set
                        ) -> list[PythonSource]:
    """The files whose code builds `cls` (`never_trained`): constructions of it, a subclass or a holder, a
    factory's construction replaced by the factory's calls."""
    seen.add(id(cls))
    holders = holder_closure(facts, cls)
    keys = {(id(c.src), c.qualname) for c in holders.values()}
    names = {c.name for c in holders.values()}
    sites: list[PythonSource] = []
    for src, callee, scope in [*constructor_calls(project), *class_method_calls(project)]:
        if callee.rsplit(".", 1)[-1] not in names:
            continue
        found = project.class_for_callee(src, callee)
        if found is None or (id(found[0]), found[1]) not in keys:
            continue
        owner = _scope_class(project, src, scope)
        if owner is not None and (id(src), owner) in keys:
            continue            # a holder creating it as its attribute: counted through the holder
        if owner is None and depth < MAX_FACTORY_DEPTH and _returns_value(src, scope):
            callers = _factory_calls(project, src, scope)
            if callers:
                for caller_src, caller_scope in callers:
                    holder = _module_class_of(project, facts, caller_src, caller_scope)
                    if holder is None:
                        # handed to code that is not a module holding it (a loader returning it in a list the
                        # script freezes or inspects): the factory's own file stays the site, as a construction
                        sites.append(src)
                    elif id(holder) not in seen:
                        sites.extend(_construction_files(project, facts, holder, depth + 1, seen))
                continue
        sites.append(src)
    return list({id(src): src for src in sites}.values())


def _returns_value(src: PythonSource, scope: str) -> bool:
    """Is `scope` a function of the file (not a method, not the module) with a `return <value>`?"""
    if src.outline is None or scope not in src.outline.functions or _scope_class_of(src, scope) is not None:
        return False
    info = src.facts.functions.get(scope)
    if info is None:
        return False
    finder = _Returns(info.node)
    cst_visit(info.node, finder)
    return finder.found


class _Returns(cst.CSTVisitor):
    def __init__(self, fn: cst.FunctionDef) -> None:
        self.fn, self.found = fn, False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.fn

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None and not (isinstance(node.value, cst.Name) and node.value.value == "None"):
            self.found = True


def _scope_class_of(src: PythonSource, scope: str) -> Optional[str]:
    return next((d.class_name for d in src.outline.defs if d.qualname == scope), None)


def _factory_calls(project: "ProjectView", src: PythonSource, scope: str) -> list[tuple[PythonSource, str]]:
    """(file, scope) of every call of the run that resolves to the function `scope` of `src`."""
    name = scope.rsplit(".", 1)[-1]
    out = []
    for other in project.mentioning(name):
        if other.outline is None:
            continue
        for callee, where in other.outline.calls:
            if callee and callee.rsplit(".", 1)[-1] == name:
                found = project.function_for_callee(other, callee)
                if found is not None and found[0] is src and found[1] == scope:
                    out.append((other, where))
    return out


def _module_class_of(project: "ProjectView", facts: ModelFacts, src: PythonSource, scope: str
                     ) -> Optional[ModuleClass]:
    """The module class of the run one of whose methods is `scope`."""
    owner = _scope_class(project, src, scope)
    if owner is None:
        return None
    return next((c for c in facts.classes_in(src) if c.qualname == owner), None)


def _builds_models(project: "ProjectView", facts: ModelFacts, src: PythonSource) -> bool:
    """Does the file construct one of the run's module classes itself?"""
    for callee, _ in src.outline.calls if src.outline is not None else ():
        if callee and callee.rsplit(".", 1)[-1] in facts.by_name:
            found = project.class_for_callee(src, callee)
            if found is not None and any(c.src is found[0] and c.qualname == found[1]
                                         for c in facts.by_name[callee.rsplit(".", 1)[-1]]):
                return True
    return False


def _unreferenced(project: "ProjectView", cls: ModuleClass) -> bool:
    """Is `cls`'s name spelled nowhere in the run's Python files but in its own `class` line, and is the class
    undecorated (a decorator may register it)?"""
    try:
        if cls.info.node.decorators:
            return False
    except Exception:
        return False
    word = re.compile(r"\b%s\b" % re.escape(cls.name))
    count = 0
    for src in project.mentioning(cls.name):
        count += len(word.findall(src.text))
        if count > 1:
            return False
    return count == 1


def class_method_calls(project: "ProjectView") -> list[tuple[PythonSource, str, str]]:
    """(file, resolved class, scope) of every call of a method on a capitalised name (`DepthNet.from_pretrained(...)`,
    `Model.load(path)`) that the class does not define as a plain method: a `@classmethod` of it, or one its
    library base gives -- an alternative constructor, counted as a construction of the class (`never_trained`)."""
    def build():
        out = []
        for src in project.python:
            if src.outline is None:
                continue
            for callee, scope in src.outline.calls:
                if not callee or callee.count(".") < 1:
                    continue
                head, method = callee.rsplit(".", 1)
                if not head.rsplit(".", 1)[-1][:1].isupper() or not method[:1].islower():
                    continue
                found = project.class_for_callee(src, head)
                if found is None:
                    continue
                info = found[0].facts.classes.get(found[1]) if found[0].facts is not None else None
                own = found[0].facts.functions.get(f"{found[1]}.{method}") if info is not None else None
                if own is not None and not any(
                        isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod"
                        for d in own.node.decorators):
                    continue        # a plain or static method called on the class: no instance made
                out.append((src, head, scope))
        return out
    return memo(project, "class-method-calls", build)


def constructor_calls(project: "ProjectView") -> list[tuple[PythonSource, str, str]]:
    """(file, resolved callee, scope) of every call of the view whose callee's last name is capitalised."""
    def build():
        out = []
        for src in project.python:
            if src.outline is None:
                continue
            out.extend((src, callee, scope) for callee, scope in src.outline.calls
                       if callee and callee.rsplit(".", 1)[-1][:1].isupper())
        return out
    return memo(project, "constructor-calls", build)


def _scope_class(project: "ProjectView", src: PythonSource, scope: str) -> Optional[str]:
    """The qualified name of the class whose method `scope` is (None: a function, the module)."""
    tables = memo(project, "scope-classes", dict)
    if id(src) not in tables:
        tables[id(src)] = {d.qualname: d.class_name for d in src.outline.defs}
    return tables[id(src)].get(scope)


def _trains_itself(src: PythonSource) -> bool:
    for callee, _ in src.outline.calls:
        last = (callee or "").rsplit(".", 1)[-1]
        if last in TRAINING_CALLS or last.endswith("Trainer"):
            return True
    return False


def _trains(project: "ProjectView", src: PythonSource) -> bool:
    """The file trains a model itself or calls a function of another checked file that does."""
    if _trains_itself(src):
        return True
    for callee, _ in src.outline.calls:
        found = project.function_for_callee(src, callee) if callee else None
        if found is not None and found[0] is not src and found[0].outline is not None and _trains_itself(found[0]):
            return True
    return False


def built_only_where_untrained(project: "ProjectView", facts: ModelFacts, cls: ModuleClass) -> bool:
    """Is `cls` built only through a class value chosen by a flag (`module_class = InfModule if for_inference
    else Module`, a parameter of the enclosing function), and does every call of that function in the run that
    may choose it (the flag passed true, a value not known, or a default that chooses it) sit in a file that
    trains nothing (`_trains_strictly`)? A subclass for no-grad generation, never the one a training script builds.
    False when any other mention of the class is found (a construction, a subclass, a registry, a value handed on)
    or no call of the choosing function is."""
    return _flag_choice(project, facts, cls) is True


def flag_choice_unseen(project: "ProjectView", facts: ModelFacts, cls: ModuleClass) -> bool:
    """Is `cls` built only through a flag-chosen class value (`Inf if for_inference else Train`) of a function
    that no call of the run reaches (a module imported by a name the command line gives)? Whether a training
    script chooses it is then undecidable: a finding through it is unproven (model-never-trained)."""
    return _flag_choice(project, facts, cls) is None


def _flag_choice(project: "ProjectView", facts: ModelFacts, cls: ModuleClass) -> Optional[bool]:
    """True: built only through a flag-chosen class value, every choosing call in a file that trains nothing;
    None: built only so, and no call of the choosing function is found; False otherwise."""
    if facts.subclasses(cls):
        return False
    sites = _flag_selections(project, cls)
    if not sites:
        return False
    calls = 0
    for fn_src, fn, param, when in sites:
        for src, call in _calls_of(project, fn_src, fn):
            calls += 1
            value = _argument(fn, param, call)
            if value is not UNKNOWN and bool(value) != when:
                continue            # this call chooses the other class
            if _trains_strictly(project, src):
                return False
    return True if calls > 0 else None


def _flag_selections(project: "ProjectView", cls: ModuleClass) -> Optional[list]:
    """(file, function node, flag parameter, flag value that chooses `cls`) of each mention of `cls` as a class
    value; None when a mention is anything else (type annotations and imports aside)."""
    out = []
    for src in project.mentioning(cls.name):
        if src is not cls.src:
            found = project.class_for_callee(src, cls.name)
            if found is None or found[0] is not cls.src or found[1] != cls.qualname:
                continue            # the name is bound to another class there (or to none)
        try:
            tree = ast.parse(src.text)
        except (SyntaxError, ValueError):
            return None
        skip: set[int] = set()
        for node in ast.walk(tree):
            for ann in _annotations(node):
                skip.update(id(n) for n in ast.walk(ann))
        parents: dict[int, ast.AST] = {}
        functions: dict[int, ast.AST] = {}

        def walk(node, fn):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
                functions[id(child)] = fn
                walk(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn)
        walk(tree, None)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Name) and node.id == cls.name) or id(node) in skip:
                continue
            parent, fn = parents.get(id(node)), functions.get(id(node))
            if not (isinstance(parent, ast.IfExp) and node is not parent.test and isinstance(parent.test, ast.Name)
                    and isinstance(fn, ast.FunctionDef)):
                return None
            args = fn.args
            if parent.test.id not in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
                return None
            out.append((src, fn, parent.test.id, node is parent.body))
    return out


def _annotations(node: ast.AST) -> list:
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    if isinstance(node, ast.arg) and node.annotation is not None:
        return [node.annotation]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
        return [node.returns]
    return []


def _calls_of(project: "ProjectView", fn_src: PythonSource, fn: ast.FunctionDef) -> list:
    """(file, ast.Call) of every call in the run whose callee is `fn` or may be (a module chosen at run time:
    `importlib.import_module(name).f(...)`); calls that resolve to another function are not counted."""
    out = []
    for src in project.mentioning(fn.name):
        if src.outline is None:
            continue
        if not any(callee and callee.rsplit(".", 1)[-1] == fn.name for callee, _ in src.outline.calls):
            continue
        try:
            tree = ast.parse(src.text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if last != fn.name:
                continue
            callee = _dotted(func)
            if callee is None:
                continue
            root = callee.split(".", 1)[0]
            if "." not in callee or root in src.outline.imports:
                # a name or an imported module's function: counted when it resolves to `fn`
                if root in src.outline.imports:
                    callee = src.outline.imports[root] + callee[len(root):]
                found = project.function_for_callee(src, callee)
                if found is None or found[0] is not fn_src or found[1].rsplit(".", 1)[-1] != fn.name:
                    continue
            # else a module object chosen at run time (`importlib.import_module(args.network_module)`): may be fn's
            out.append((src, node))
    return out


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _argument(fn: ast.FunctionDef, param: str, call: ast.Call, skip_self: bool = False):
    """The literal value `call` gives `fn`'s parameter `param` (its default when not passed); UNKNOWN otherwise.
    `skip_self`: `fn` is a constructor's `__init__`, whose `self` the call does not pass."""
    args = fn.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    if skip_self:
        defaults_of = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        positional = positional[1:]
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in positional], vararg=args.vararg,
                             kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults, kwarg=args.kwarg,
                             defaults=[defaults_of[a] for a in positional if a in defaults_of])
    for kw in call.keywords:
        if kw.arg == param:
            return _literal_eval(kw.value)
    if param in positional:
        i = positional.index(param)
        if any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
            return UNKNOWN
        if i < len(call.args):
            return _literal_eval(call.args[i])
    if any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return UNKNOWN          # `**kwargs` may carry it
    defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return _literal_eval(defaults[param]) if param in defaults else UNKNOWN


def _literal_eval(node: ast.AST):
    """`ast.literal_eval`, UNKNOWN where it cannot evaluate (containers of literals included)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return UNKNOWN


def _trains_strictly(project: "ProjectView", src: PythonSource) -> bool:
    """`_trains`, read closer: the file's own calls, where a `.step(a, b, ...)` with two or more positional
    arguments is a sampler's or a noise scheduler's step (torch's `Optimizer.step(closure=None)`, DeepSpeed's
    `engine.step(lr_kwargs=None)` and `LRScheduler.step(epoch=None)` take at most one), and of the functions
    of other files it calls, only those functions' own calls (not their whole file's)."""
    try:
        tree = ast.parse(src.text)
    except (SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            last = _dotted(node.func)
            last = last.rsplit(".", 1)[-1] if last else (node.func.attr if isinstance(node.func, ast.Attribute)
                                                        else None)
            if last is None:
                continue
            if last == "step" and len(node.args) >= 2:
                continue
            if last in TRAINING_CALLS or last.endswith("Trainer"):
                return True
    for callee, _ in src.outline.calls:
        found = project.function_for_callee(src, callee) if callee else None
        if found is None or found[0] is src or found[0].outline is None:
            continue
        qual = found[1]
        for inner, scope in found[0].outline.calls:
            if (scope == qual or (scope or "").startswith(qual + ".")) and inner:
                last = inner.rsplit(".", 1)[-1]
                if last in TRAINING_CALLS or last.endswith("Trainer"):
                    return True
    return False


def never_created(project: "ProjectView", facts: ModelFacts, attr: ModuleAttr) -> bool:
    """Is `attr` created only under a test of a constructor flag (`if learnable: self.inv_freq =
    nn.Parameter(...)`, a parameter of `__init__`) that every construction of its class in the run settles the
    other way (`RotaryEmbedding(dim, learnable=False)`, or leaving a false default)? Then no instance has it
    (a buffer of the same name stands in). False when the class has subclasses or no construction is found."""
    cls = attr.owner
    if attr.method != "__init__" or facts.subclasses(cls):
        return False
    try:
        tree = ast.parse(cls.src.text)
    except (SyntaxError, ValueError):
        return False
    init = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.name:
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is not None and init.lineno <= attr.line <= (init.end_lineno or init.lineno):
                break
            init = None
    if init is None:
        return False
    flags = _enclosing_flags(init.body, attr.line, {a.arg for a in (*init.args.posonlyargs, *init.args.args,
                                                                      *init.args.kwonlyargs)})
    if not flags:
        return False
    sites = [call for src, call in _constructions_of(project, cls)]
    if not sites:
        return False
    for param, when in flags:
        if all(_argument(init, param, call, skip_self=True) is not UNKNOWN and
               bool(_argument(init, param, call, skip_self=True)) != when for call in sites):
            return True
    return False


def _enclosing_flags(body: list, line: int, params: set) -> list:
    """(parameter, truth that runs the line) of the `if p:` / `if not p:` tests enclosing `line`."""
    for stmt in body:
        if not (stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)):
            continue
        if isinstance(stmt, ast.If):
            test, when = stmt.test, True
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, when = test.operand, False
            in_body = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in stmt.body)
            inner = _enclosing_flags(stmt.body if in_body else stmt.orelse, line, params)
            if isinstance(test, ast.Name) and test.id in params:
                return [(test.id, when if in_body else not when), *inner]
            return inner
        for field_name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                found = _enclosing_flags(inner, line, params)
                if found:
                    return found
        return []
    return []


def _constructions_of(project: "ProjectView", cls: ModuleClass) -> list:
    """(file, ast.Call) of every call in the run that resolves to `cls`'s constructor."""
    out = []
    for src in project.mentioning(cls.name):
        if src.outline is None:
            continue
        try:
            tree = ast.parse(src.text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            callee = _dotted(node.func)
            if not callee or callee.rsplit(".", 1)[-1] != cls.name:
                continue
            root = callee.split(".", 1)[0]
            if root in src.outline.imports:
                callee = src.outline.imports[root] + callee[len(root):]
            found = project.class_for_callee(src, callee)
            if found is not None and found[0] is cls.src and found[1] == cls.qualname:
                out.append((src, node))
    return out
