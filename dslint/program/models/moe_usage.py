"""Facts the MoE rules share beyond the MoE constructions themselves: ZeRO stages of the run's configs,
dynamic-padding sites (per-rank token counts), HF-style sparse MoE blocks and ZeRO-3 leaf-module settings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from dslint.program.models.modules import model_facts
from dslint.program.hyperparams import memo
from dslint.sources.cstwalk import visit as cst_visit, walk
from dslint.program.facts import CallSite, dotted_name
from dslint.sources.literals import UNKNOWN, literal_value
from dslint.program.project_view import ConfigView
from dslint.sources import PythonSource

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView

# DeepSpeed ≥ 0.18.0 (PR #7604): ZeRO-3 treats these as leaf modules unless the config lists other classes
DEFAULT_LEAF_CLASSES = ("MixtralSparseMoeBlock", "Qwen2MoeSparseMoeBlock", "Qwen3MoeSparseMoeBlock")
DYNAMIC_COLLATORS = ("DataCollatorWithPadding", "DataCollatorForSeq2Seq", "DataCollatorForTokenClassification",
                     "DataCollatorForLanguageModeling", "DataCollatorForCompletionOnlyLM",
                     "DataCollatorForWholeWordMask", "DataCollatorWithFlattening")


def stages_for(project: "ProjectView", src: PythonSource, call: Optional[CallSite] = None
               ) -> tuple[list[ConfigView], set[Optional[int]]]:
    """The configs (and their ZeRO stages; None: unknown) reaching one engine call of `src`
    (`ProjectView.configs_for_call`), or without a call those of the whole script."""
    configs = project.configs_for(src) if call is None else project.configs_for_call(src, call)
    return configs, {c.zero_stage for c in configs}


def run_stages(project: "ProjectView") -> set[Optional[int]]:
    """ZeRO stages of every config in the run (JSON files and dict literals of the scripts)."""
    def build():
        stages: set[Optional[int]] = set()
        for src in project.mentioning("initialize", "init_inference", "TrainingArguments", "HfDeepSpeedConfig",
                                      "DeepSpeedPlugin", "add_argument"):
            for value, _node in project.literal_configs(src):
                if isinstance(value, dict):
                    stages.add(ConfigView(value, src.path).zero_stage)
        for js in project.json_configs:
            if isinstance(js.data, dict) and ("zero_optimization" in js.data or "train_batch_size" in js.data
                                              or "train_micro_batch_size_per_gpu" in js.data):
                stages.add(ConfigView(js.data, js.path).zero_stage)
        return stages
    return memo(project, "run-stages", build)


@dataclass
class PaddingSite:
    src: PythonSource
    node: cst.CSTNode
    what: str


def _padding_kw(call: CallSite) -> object:
    kw = call.keyword("padding")
    return literal_value(kw.value) if kw is not None else None


# layers and functions whose `padding=` is spatial (a number of cells), never a batch's sequence padding
_SPATIAL_PADDING = ("torch.nn.", "nn.", "torch.nn.functional.", "F.", "torchvision.", "numpy.", "np.")


def _one_sequence(src: PythonSource, call) -> bool:
    """A tokenizer call on one text at a time: its text is a string literal, or the variable of a `for` loop
    around the call (`for text in texts: tok(text, padding=True)`): padding a single sequence to the longest of
    its batch of one pads nothing."""
    args = [a for a in call.node.args if a.keyword is None and not a.star]
    if not args:
        text = call.keyword("text")
        if text is None:
            return False
        value = text.value
    else:
        value = args[0].value
    if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if not isinstance(value, cst.Name):
        return False
    info = src.facts.functions.get(call.scope)
    body = info.node if info is not None else src.module
    from dslint.sources.cstwalk import walk
    for node in walk(body):
        if isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.target, cst.Name) \
                and node.target.value == value.value:
            return True
    return False


def dynamic_padding_sites(project: "ProjectView", src: PythonSource) -> list[PaddingSite]:
    """Where a batch is padded to its own longest sequence, so per-rank token counts differ."""
    out: list[PaddingSite] = []
    reduced_scopes = {c.scope for c in src.facts.calls if (c.attr or "") in ("all_reduce", "all_gather_object")}
    for call in src.facts.calls:
        last = call.attr or ""
        callee = call.callee or ""
        if call.scope in reduced_scopes and last != "TrainingArguments":
            continue        # a pad length agreed across ranks (all_reduce MAX) makes the count uniform
        padding = _padding_kw(call)
        if last in DYNAMIC_COLLATORS:
            if padding in ("max_length", "do_not_pad", False):
                continue
            what = f"`{last}` pads each batch to its own longest sequence"
            out.append(PaddingSite(src, call.node, what))
        elif last == "pad_sequence" and ("rnn" in callee or callee == "pad_sequence"):
            out.append(PaddingSite(src, call.node, "`pad_sequence` pads to the longest sequence of the batch"))
        elif (padding is True or padding == "longest") and not callee.startswith(_SPATIAL_PADDING) \
                and not _one_sequence(src, call):
            out.append(PaddingSite(src, call.node, f"`padding={padding!r}` pads to the longest sequence of the batch"))
        elif last in ("TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig"):
            kw = call.keyword("group_by_length")
            if kw is not None and literal_value(kw.value) is True:
                out.append(PaddingSite(src, kw, "`group_by_length=True` batches sequences of similar length, "
                                                "so batch lengths differ across ranks"))
    return out


@dataclass
class SparseBlock:
    src: PythonSource
    class_name: str
    loop: cst.For
    reason: str


_UNIFORM_ITER = re.compile(r"^(range\((len\()?(self\.)?\w+(\.\w+)*\)?\)|range\(\d+\))$")
# the routing calls of a top-k gate: which experts each token goes to
_ROUTING = frozenset({"topk", "argmax"})
_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict"})


def _self_field(n: cst.CSTNode) -> Optional[str]:
    if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == "self":
        return n.attr.value
    return None


def module_lists(src: PythonSource, methods) -> frozenset:
    """The fields of a class its methods store a torch `ModuleList`/`ModuleDict` in: the containers whose
    members a forward calls (the experts of a sparse block), by the library class, not the field's name."""
    out = set()
    for method in methods:
        for n in walk(method.node):
            if isinstance(n, cst.Assign) and isinstance(n.value, cst.Call) \
                    and src.facts.resolve_expr(n.value.func) in _CONTAINERS:
                out.update(f for t in n.targets if (f := _self_field(t.target)) is not None)
    return frozenset(out)


def _over(it: cst.CSTNode, lists: frozenset) -> bool:
    """An iterable over a module container (`self.experts`, `enumerate(self.experts)`, `self.experts.items()`)."""
    return any(_self_field(n) in lists for n in walk(it))


def _member_names(tree: cst.CSTNode, lists: frozenset) -> set:
    """The loop variables bound to the container's members by the `for` loops in `tree` over it."""
    out = set()
    for n in walk(tree):
        if isinstance(n, (cst.For, cst.CompFor)) and _over(n.iter, lists):
            out.update(x.value for x in walk(n.target) if isinstance(x, cst.Name))
    return out


def _calls_member(tree: cst.CSTNode, lists: frozenset, names: set) -> bool:
    """A call of a member of the container: `self.experts[i](x)`, or `expert(x)` with `expert` a loop variable
    over it."""
    for n in walk(tree):
        if isinstance(n, cst.Call):
            f = n.func
            if isinstance(f, cst.Subscript) and _self_field(f.value) in lists:
                return True
            if isinstance(f, cst.Name) and f.value in names:
                return True
    return False


class _ExpertLoops(cst.CSTVisitor):
    def __init__(self, lists: frozenset) -> None:
        self.hits: list[tuple[cst.For, str]] = []
        self.lists = lists

    def visit_For(self, node: cst.For) -> None:
        names = _member_names(node, self.lists)
        if not _calls_member(node.body, self.lists, names):
            return
        # a loop whose experts are all run by a loop nested in it over the experts themselves (`for b in
        # range(x.shape[0]): for i, expert in enumerate(self.experts): ...`, CuMo) iterates something else -- the
        # batch: every iteration runs every expert; the nested loop is the expert loop, judged on its own
        inner = _NestedExpertLoops(self.lists)
        cst_visit(node.body, inner)
        if inner.loops and not any(_calls_member(n, self.lists, names) for n in inner.outside):
            return
        it = cst.Module([]).code_for_node(node.iter).replace(" ", "")
        if not _UNIFORM_ITER.match(it) and not _over(node.iter, self.lists):
            self.hits.append((node, f"the loop runs only over `{it}` (the experts that received tokens)"))
            return
        skips = _DataSkip(self.lists, names)
        cst_visit(node.body, skips)
        if skips.reason:
            self.hits.append((node, skips.reason))


class _NestedExpertLoops(cst.CSTVisitor):
    """The `for` loops whose iterable is the experts container (`self.experts`, `enumerate(self.experts)`)."""

    def __init__(self, lists: frozenset) -> None:
        self.lists = lists
        self.loops: list[cst.For] = []
        self.outside: list[cst.CSTNode] = []        # the other statements (tests and headers included)

    def visit_For(self, node: cst.For) -> bool:
        if _over(node.iter, self.lists):
            self.loops.append(node)
            return False
        self.outside.append(node.iter)
        return True

    def visit_If(self, node: cst.If) -> None:
        self.outside.append(node.test)

    def visit_While(self, node: cst.While) -> None:
        self.outside.append(node.test)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        self.outside.append(node)
        return False


class _DataSkip(cst.CSTVisitor):
    """An `if` on the routed token count that skips an expert (`if top_x.shape[0] == 0: continue`)."""

    def __init__(self, lists: frozenset = frozenset(), names: Optional[set] = None) -> None:
        self.reason = ""
        self.lists = lists
        self.names = names or set()

    def visit_If(self, node: cst.If) -> None:
        test = cst.Module([]).code_for_node(node.test)
        body = cst.Module([]).code_for_node(node.body)
        if re.fullmatch(r"\s*(not\s+)?self\.\w+(\.\w+)*\s*", test):
            return
        if re.search(r"\bcontinue\b", body) or _calls_member(node.body, self.lists, self.names):
            self.reason = self.reason or f"`if {test.strip()}` skips experts that received no tokens"


def _routes(method) -> bool:
    """The method routes tokens: it calls a top-k gate's selection (`torch.topk`, `.topk(...)`, `argmax`)."""
    for n in walk(method.node):
        if isinstance(n, cst.Call):
            f = n.func
            last = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
            if last in _ROUTING:
                return True
    return False


def sparse_blocks(project: "ProjectView") -> list[SparseBlock]:
    """The module classes whose forward runs a module container's members in a loop that skips some of them by
    the routing (a sparse MoE block: `for i in range(E): ... if top_x.shape[0] == 0: continue`), or loops over
    the routed experts only -- the container a torch `ModuleList`/`ModuleDict` field, the routing a top-k gate's
    selection in the same method; decided by the library classes and calls, not by fields named `experts`."""
    def build():
        out = []
        for cls in model_facts(project).classes:
            if "ModuleList" not in cls.src.text and "ModuleDict" not in cls.src.text:
                continue
            methods = list(cls.info.methods.values())
            lists = module_lists(cls.src, methods)
            if not lists:
                continue
            for method in methods:
                if not _routes(method):
                    continue
                loops = _ExpertLoops(lists)
                cst_visit(method.node, loops)
                for loop, reason in loops.hits:
                    out.append(SparseBlock(cls.src, cls.name, loop, reason))
                    break
        return out
    return memo(project, "sparse-blocks", build)


def leaf_modules(project: "ProjectView") -> tuple[set[str], bool]:
    """Class names made ZeRO-3 leaf modules by `set_z3_leaf_modules(...)` calls; True when a call's list
    cannot be read (then every sparse block is given the benefit of the doubt)."""
    def build():
        names: set[str] = set()
        unreadable = False
        for src in project.mentioning("set_z3_leaf_module"):
            for call in src.facts.calls:
                if (call.attr or "") not in ("set_z3_leaf_modules", "set_z3_leaf_module", "set_z3_leaf_modules_by_name",
                                             "set_z3_leaf_modules_by_suffix"):
                    continue
                if len(call.node.args) < 2:
                    unreadable = True
                    continue
                value = call.node.args[1].value
                items = value.elements if isinstance(value, (cst.List, cst.Tuple, cst.Set)) else [None]
                for el in items:
                    name = dotted_name(el.value) if el is not None else None
                    lit = literal_value(el.value) if el is not None else UNKNOWN
                    if name:
                        names.add(name.rsplit(".", 1)[-1])
                    elif isinstance(lit, str):
                        names.add(lit.rsplit(".", 1)[-1])
                    else:
                        unreadable = True
        return names, unreadable
    return memo(project, "leaf-modules", build)


def config_leaf_classes(config: ConfigView) -> Optional[set[str]]:
    """Names a config's `zero_optimization.leaf_module` makes leaves; None when the section is absent."""
    section = config.get("zero_optimization", "leaf_module")
    if not isinstance(section, dict):
        return None
    out: set[str] = set()
    for key in ("classes", "names", "name_suffixes"):
        value = section.get(key)
        values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        out |= {str(v).rsplit(".", 1)[-1] for v in values}
    if "classes" not in section:
        out |= set(DEFAULT_LEAF_CLASSES)
    return out
