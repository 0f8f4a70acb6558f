"""Sub-modules a patched-in forward reaches on some data paths only (issue 30, cause 8).

Projects that train library models often replace a library class's forward with a function of their own
(`Qwen2VLModel.forward = qwen2_vl_base_forward`, verl's monkey patches) and move the multimodal part into a
helper that receives the model (`_get_input_embeds(self, input_ids, pixel_values, ...)`). That code is no
`nn.Module` method of the checked files, so the forward-path analysis of DSL303 (`forward_paths.py`) never sees
it; the hazard is the same: a sub-module (`model.visual`) whose parameters get a gradient on the ranks whose batch
takes one path (images) and none on the others (text only), or whose forward -- a parameter all-gather under
FSDP/ZeRO-3 -- runs on some ranks only.

What is a module here is decided by API meaning, never by a name:
- a function assigned to a class's `forward` (`Cls.forward = fn`, `Cls` a class of the checked files or of an
  installed package, resolved through the file's imports, function-local imports included) receives an instance
  of that class as its first parameter; a helper of the checked files it hands that parameter to positionally
  receives it too (one hop);
- a parameter annotated with such a class (`model: "Qwen3VLModel"`) is one;
- `m.attr(...)` calls a sub-module when the class's `__init__` stores a constructed object in `self.attr`
  (`self.visual = AutoModel.from_config(...)`): methods (`m.get_input_embeddings()`) are not fields.

The paths: the function's `if` tests are boolean formulas over atoms (`pixel_values is None`, `model.training`);
an atom is data-dependent when it reads a parameter of the function (not the module, not an option parameter
annotated or defaulted as a bool/int/float/str) or a local computed from one, and uniform otherwise (the module's
own flags and config, constants). For every assignment of the uniform atoms, every assignment of the data atoms
is walked (a `raise` ends a path that is not compared; loops' bodies are taken to run). A path *uses* a
sub-module's output when it calls the sub-module and reads the result; a call whose result is unpacked uses the
elements bound to a name read later in the function (`image_embeds, _ = model.visual(...)` drops element 1).
When one data path uses an output that another data path of the same uniform assignment does not, the
parameters producing it get a gradient (and, under FSDP/ZeRO-3, run a forward) on some ranks only.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from dslint.program.statement_walks import names_reached

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

# at most this many atoms in one function (2**n paths are walked)
MAX_ATOMS = 11
_OPTION_TYPES = {"bool", "int", "float", "str"}
WHOLE = -1          # the whole output of a sub-module call is read


@dataclass(frozen=True)
class ModuleClass:
    """A class whose instance a parameter holds: its qualified name and the sub-module fields of its
    `__init__` (field → line there), found in `path`; `members`: per field, the names of that field's own
    parameters and sub-modules (`weight`, `bias` of a `torch.nn.Linear`), whose reads (`m.k_proj.weight`) use
    the field's parameters as a call of it does."""
    qualified: str
    fields: dict
    path: str
    members: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass
class ModuleParam:
    function: str                   # qualified name within the file
    param: str
    cls: ModuleClass
    how: str                        # "installed as X.forward at f.py:12" / "annotated X"
    where: Optional[tuple] = None   # (path, line) of the patch
    # the patch is installed under a test of a parameter of the function installing it
    # (`if model.config.model_type == "qwen2_vl": Qwen2VLModel.forward = ...` in `apply_patch(model)`): chosen for
    # the model object the caller hands in, i.e. for a model the run builds (`_patches`)
    chosen_for_model: bool = False


@dataclass
class UnevenUse:
    """A sub-module output one data path of `function` uses and another does not."""
    function: str
    submodule: str
    element: int                    # WHOLE: the sub-module is not called (or its result unread) on the other path
    line: int                       # where to report: the call that drops it, or the test that skips it
    col: int
    test_line: Optional[int]
    test_code: str
    uniform: str                    # the uniform assignment, in words ("" when the function has no uniform atom)
    data_atoms: list = field(default_factory=list)
    param: Optional[ModuleParam] = None


# --------------------------------------------------------------------------- per-file helpers

def _tree(project: "ProjectView", src: "PythonSource") -> Optional[ast.Module]:
    def build():
        from dslint.program.per_file import cpython_tree
        from dslint.sources.astsplice import compile_ast
        kept = cpython_tree(src)        # the outline's tree, where the role analysis keeps it: no second parse
        if kept is not None:
            return kept
        # else parsed once per source, kept on it (a fact of its text): the views of later runs (a server's
        # re-checks carry the unchanged sources over) take it again
        if "_patched_forwards_tree" in src.__dict__:
            return src.__dict__["_patched_forwards_tree"]
        try:
            tree = compile_ast(src.text, src.path)
        except (SyntaxError, ValueError, RecursionError):
            tree = None
        src.__dict__["_patched_forwards_tree"] = tree
        return tree
    return project.memo(("patched_forwards.tree", id(src)), build)


# `_imports` of a tree, per (tree, module name): the same trees (a source's kept CPython tree, an installed
# module's) are read by every launch unit's view and every server re-check (issue 33). The entry holds the tree,
# so its id is not reused while the entry lives; cleared whole past `_IMPORTS_LIMIT` entries.
_IMPORTS_MEMO: dict[tuple[int, str], tuple[ast.Module, dict[str, str]]] = {}
_IMPORTS_LIMIT = 20_000


def _imports(tree: ast.Module, module_name: str = "") -> dict[str, str]:
    """Local name → qualified name, for every import of the file (function-local ones included). Memoised per
    tree; callers only read it."""
    key = (id(tree), module_name)
    hit = _IMPORTS_MEMO.get(key)
    if hit is not None and hit[0] is tree:
        return hit[1]
    if len(_IMPORTS_MEMO) >= _IMPORTS_LIMIT:
        _IMPORTS_MEMO.clear()
    out = _walk_imports(tree, module_name)
    _IMPORTS_MEMO[key] = (tree, out)
    return out


def _walk_imports(tree: ast.Module, module_name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    package = module_name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join(p for p in [*parts, base] if p)
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    return out


def _dotted(e: ast.AST) -> Optional[str]:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        base = _dotted(e.value)
        return f"{base}.{e.attr}" if base else None
    return None


def _qualify(expr_text: str, imports: dict[str, str]) -> str:
    head, _, rest = expr_text.partition(".")
    if head in imports:
        return imports[head] + (f".{rest}" if rest else "")
    return expr_text


# --------------------------------------------------------------------------- classes and their sub-modules

# installed modules' trees, per module name: (path, text, tree). A tree is taken again while the file reads the
# same (every launch unit's view and every server re-check asked for them: ~0.1 s of compile() per re-check of a
# 252-file workspace); callers only read the trees
_INSTALLED_TREES: dict[str, tuple[str, str, Optional[ast.Module]]] = {}


def _installed_tree(project: "ProjectView", module: str) -> Optional[tuple[ast.Module, str, str]]:
    """An installed module's tree (read from site-packages, never imported), its path and module name."""
    def build():
        from dslint.program.rank.function_summaries import _read_installed
        src = _read_installed(module)
        if src is None:
            return None
        kept = _INSTALLED_TREES.get(module)
        if kept is not None and kept[0] == src.path and kept[1] == src.text:
            tree = kept[2]
        else:
            tree = _tree(project, src)
            _INSTALLED_TREES[module] = (src.path, src.text, tree)
        return (tree, src.path, module) if tree is not None else None
    return project.memo(("patched_forwards.installed", module), build)


def _resolve_installed(project: "ProjectView", qualified: str, depth: int = 0
                       ) -> Optional[tuple[ast.ClassDef, ast.Module, str, str]]:
    """The class an installed package's qualified name denotes, following the re-exports of its modules
    (`torch.nn.Linear` → `torch.nn.modules.linear.Linear`: explicit and star imports)."""
    module, _, name = qualified.rpartition(".")
    if not module or depth > 4:
        return None
    hit = _installed_tree(project, module)
    if hit is None:
        return None
    tree, path, modname = hit
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node, tree, path, modname
    is_package = path.endswith("__init__.py")
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = modname.split(".") if is_package else modname.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join(p for p in [*parts, base] if p)
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name) == name:
                    found = _resolve_installed(project, f"{base}.{alias.name if alias.name != '*' else name}",
                                               depth + 1)
                    if found is not None:
                        return found
    return None


def _class_tree(project: "ProjectView", near: "PythonSource", qualified: str
                ) -> Optional[tuple[ast.ClassDef, ast.Module, str, str]]:
    """The ClassDef of a checked class or of an installed package's class, its file's tree, path, module."""
    found = project.class_for_callee(near, qualified)
    if found is not None:
        src, name = found
        tree = _tree(project, src)
        simple = name.rsplit(".", 1)[-1]
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.ClassDef) and node.name == simple:
                return node, tree, src.path, src.module_name
        return None
    return _resolve_installed(project, qualified) if "." in qualified else None


# factory classmethods of transformers models: what they return is a pretrained model, which holds parameters
_MODEL_FACTORIES = ("from_config", "_from_config", "from_pretrained")


def _holds_parameters(project: "ProjectView", near: "PythonSource", qualified: str, depth: int = 0) -> bool:
    """Does an object of the class hold parameters? Its `__init__` (or a base class's) creates a
    `torch.nn.Parameter`, or constructs an object of a class that does -- read from the checked files and the
    installed packages' sources (`torch.nn.Linear`'s `self.weight = Parameter(...)`); a transformers model
    made by `from_config`/`from_pretrained` does. A class whose source is not found does not count (a rotary
    embedding holding only buffers must not be mistaken for a layer)."""
    memo = project.memo("patched_forwards.holds", dict)
    if qualified in memo:
        return memo[qualified]
    if depth > 6:
        return False
    memo[qualified] = False          # cycles
    hit = _class_tree(project, near, qualified)
    result = False
    if hit is not None:
        cls, tree, _path, modname = hit
        imports = _imports(tree, modname)
        local_classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}

        def qual(text: str) -> str:
            if text.split(".")[0] in local_classes:
                return f"{modname}.{text}"
            return _qualify(text, imports)

        inits = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        for init in inits:
            for node in ast.walk(init):
                if not isinstance(node, ast.Call):
                    continue
                if isinstance(node.func, ast.Attribute) and node.func.attr in _MODEL_FACTORIES:
                    result = True
                    break
                text = _dotted(node.func)
                if text is None or text.startswith("self.") or text == "super":
                    continue
                q = qual(text)
                if q.rsplit(".", 1)[-1] == "Parameter" and q.startswith("torch."):
                    result = True
                    break
                if q.rsplit(".", 1)[-1][:1].isupper() and _holds_parameters(project, near, q, depth + 1):
                    result = True
                    break
            if result:
                break
        if not result:
            for base in cls.bases:
                text = _dotted(base)
                if text and _holds_parameters(project, near, qual(text), depth + 1):
                    result = True
                    break
    memo[qualified] = result
    return result


def _parameter_members(project: "ProjectView", near: "PythonSource", qualified: str, depth: int = 0) -> frozenset:
    """The names under which an object of the class holds parameters: `self.X = torch.nn.Parameter(...)`,
    `self.X = <a call whose result holds parameters>` in its `__init__` or a base class's, and
    `self.register_parameter("X", ...)` -- read from the checked files and the installed packages' sources
    (`torch.nn.Linear`: `weight`, `bias`). Empty when the class's source is not found."""
    memo = project.memo("patched_forwards.members", dict)
    if qualified in memo:
        return memo[qualified]
    memo[qualified] = frozenset()          # cycles
    hit = _class_tree(project, near, qualified) if depth <= 6 else None
    out: set[str] = set()
    if hit is not None:
        cls, tree, _path, modname = hit
        imports = _imports(tree, modname)
        local_classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}

        def qual(text: str) -> str:
            return f"{modname}.{text}" if text.split(".")[0] in local_classes else _qualify(text, imports)

        for init in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"):
            for node in ast.walk(init):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        node.func.attr == "register_parameter" and node.args and \
                        isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    out.add(node.args[0].value)
                if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                    continue
                text = _dotted(node.value.func)
                if text is None or text.startswith("self.") or text == "super":
                    continue
                q = qual(text)
                param = q.rsplit(".", 1)[-1] == "Parameter" and q.startswith("torch.")
                if not param and not (q.rsplit(".", 1)[-1][:1].isupper() and _holds_parameters(project, near, q)):
                    continue
                out.update(t.attr for t in node.targets if isinstance(t, ast.Attribute)
                           and isinstance(t.value, ast.Name) and t.value.id == "self")
        for base in cls.bases:
            text = _dotted(base)
            if text:
                out |= _parameter_members(project, near, qual(text), depth + 1)
    memo[qualified] = frozenset(out)
    return memo[qualified]


def module_class(project: "ProjectView", near: "PythonSource", qualified: str) -> Optional[ModuleClass]:
    """The sub-module fields of a class: `self.attr = <a call>` in its `__init__` whose result holds parameters
    (`_holds_parameters`)."""
    def build():
        hit = _class_tree(project, near, qualified)
        if hit is None:
            return None
        cls, tree, path, modname = hit
        imports = _imports(tree, modname)
        local_classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        fields: dict[str, int] = {}
        members: dict[str, frozenset] = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                for node in ast.walk(stmt):
                    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                        continue
                    func = node.value.func
                    if isinstance(func, ast.Attribute) and func.attr in _MODEL_FACTORIES:
                        holds = True
                    else:
                        text = _dotted(func)
                        if text is None:
                            continue
                        q = f"{modname}.{text}" if text.split(".")[0] in local_classes else _qualify(text, imports)
                        holds = _holds_parameters(project, near, q) and "held"
                    if not holds:
                        continue
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            fields.setdefault(t.attr, node.lineno)
                            if holds is not True:
                                members.setdefault(t.attr, _parameter_members(project, near, q))
        return ModuleClass(qualified, fields, path, members) if fields else None
    return project.memo(("patched_forwards.class", qualified), build)


# --------------------------------------------------------------------------- which parameters hold a module

def _guarded_assigns(tree: ast.Module) -> list[tuple[ast.Assign, bool]]:
    """Every assignment of the tree, with whether an `if` test enclosing it within its function reads a
    parameter of that function (the innermost function only)."""
    out: list[tuple[ast.Assign, bool]] = []

    def handle(node: ast.AST, params: frozenset, guarded: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params, guarded = frozenset(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)), False
        elif isinstance(node, ast.ClassDef):
            params, guarded = frozenset(), False
        elif isinstance(node, ast.If):
            inner = guarded or bool(_reads(node.test) & params)
            for stmt in (*node.body, *node.orelse):
                handle(stmt, params, inner)
            return
        elif isinstance(node, ast.Assign):
            out.append((node, guarded))
        for child in ast.iter_child_nodes(node):
            handle(child, params, guarded)

    handle(tree, frozenset(), False)
    return out


def _patches(project: "ProjectView") -> list[tuple[str, ModuleClass, str, int, "PythonSource", bool]]:
    """`Cls.forward = fn` in the run: (qualified function, class, patch file, line, file of the patch, whether
    an enclosing test reads a parameter of the installing function -- the patch is chosen for a model object
    handed in)."""
    def build():
        out = []
        # prefilter only (the files whose text holds one, as `".forward =" in src.text`): the assignments are
        # read from the tree below
        for src in project.mentioning(".forward =", ".forward="):
            tree = _tree(project, src)
            if tree is None:
                continue
            imports = _imports(tree, src.module_name)
            for node, chosen in _guarded_assigns(tree):
                if len(node.targets) != 1:
                    continue
                t = node.targets[0]
                if not (isinstance(t, ast.Attribute) and t.attr == "forward"):
                    continue
                cls_text, fn_text = _dotted(t.value), _dotted(node.value)
                if cls_text is None or fn_text is None or cls_text not in imports and "." not in cls_text:
                    continue
                cls = module_class(project, src, _qualify(cls_text, imports))
                if cls is None:
                    continue
                fn = _qualify(fn_text, imports)
                found = project.find_function_source(fn, near=src)
                if found is not None:
                    fsrc, qual = found
                    qualified = f"{fsrc.module_name}.{qual}" if fsrc.module_name else qual
                    out.append((qualified, cls, src.path, node.lineno, src, chosen))
        return out
    return project.memo("patched_forwards.patches", build)


def module_params(project: "ProjectView", src: "PythonSource") -> dict[str, ModuleParam]:
    """The free functions of `src` with a parameter holding a module: qualified name within the file → param."""
    def build():
        tree = _tree(project, src)
        if tree is None:
            return {}
        funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if not funcs:
            return {}
        out: dict[str, ModuleParam] = {}
        prefix = f"{src.module_name}." if src.module_name else ""
        for qualified, cls, path, line, _psrc, chosen in _patches(project):
            if not qualified.startswith(prefix) or qualified[len(prefix):] not in funcs:
                continue
            name = qualified[len(prefix):]
            args = funcs[name].args.posonlyargs + funcs[name].args.args
            if args:
                if name in out and out[name].chosen_for_model:
                    continue
                out[name] = ModuleParam(name, args[0].arg, cls, f"installed as `{cls.qualified.rsplit('.', 1)[-1]}"
                                        f".forward` at {path}:{line}", (path, line), chosen)

        def hop(sources: list[str]) -> None:
            """A module parameter handed positionally to a helper of this file (one hop)."""
            for name in sources:
                mp = out[name]
                for node in ast.walk(funcs[name]):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in funcs \
                            and node.func.id not in out:
                        for i, arg in enumerate(node.args):
                            if isinstance(arg, ast.Name) and arg.id == mp.param:
                                callee = funcs[node.func.id]
                                params = callee.args.posonlyargs + callee.args.args
                                if i < len(params):
                                    out[node.func.id] = ModuleParam(node.func.id, params[i].arg, mp.cls,
                                                                    f"{mp.how}, handed on by {name}()", mp.where,
                                                                    mp.chosen_for_model)

        # the class a patch installs the function on is what it receives at run time: it goes first, then
        # the helpers it hands the model to, then annotations for the functions left
        hop(list(out))
        before = set(out)
        imports = _imports(tree, src.module_name)
        for name, fn in funcs.items():
            if name in out:
                continue
            for a in fn.args.posonlyargs + fn.args.args:
                ann = a.annotation
                text = ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) else \
                    (_dotted(ann) if ann is not None else None)
                if not text or text.split(".")[0] not in imports:
                    continue
                cls = module_class(project, src, _qualify(text, imports))
                if cls is not None:
                    out[name] = ModuleParam(name, a.arg, cls, f"annotated `{text}`")
                    break
        hop([n for n in out if n not in before])
        return out
    return project.memo(("patched_forwards.params", id(src)), build)


# --------------------------------------------------------------------------- atoms and paths

def _reads(e: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Atoms:
    def __init__(self, data_names: set[str]):
        self.data_names = data_names
        self.index: dict[str, int] = {}
        self.data: dict[str, bool] = {}
        self.nodes: dict[str, ast.AST] = {}

    def atom(self, e: ast.AST) -> tuple[str, bool]:
        """(atom key, negated) of a leaf test."""
        neg = False
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Is, ast.IsNot)) and \
                isinstance(e.comparators[0], ast.Constant) and e.comparators[0].value is None:
            neg = isinstance(e.ops[0], ast.IsNot)
            key = ast.unparse(e.left) + " is None"
        else:
            key = ast.unparse(e)
        if key not in self.index:
            self.index[key] = len(self.index)
            self.data[key] = bool(_reads(e) & self.data_names)
            self.nodes[key] = e
        return key, neg

    def collect(self, e: ast.AST) -> None:
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                self.collect(v)
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            self.collect(e.operand)
        else:
            self.atom(e)

    def value(self, e: ast.AST, env: dict[str, bool]) -> bool:
        if isinstance(e, ast.BoolOp):
            vals = (self.value(v, env) for v in e.values)
            return all(vals) if isinstance(e.op, ast.And) else any(vals)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return not self.value(e.operand, env)
        key, neg = self.atom(e)
        return env[key] != neg


def _bound(target: ast.AST, module_param: Optional[str]) -> set[str]:
    """The names an assignment target binds or fills: `a`, `a, *b`, and the container of `xs[i] = v` /
    `obj.f = v` -- not the names its index reads (`out[:, self.n // 2:] = v` fills `out`, not `self`), and never
    the module parameter (a value stored on the module is its state, not a rebinding of the module)."""
    if isinstance(target, ast.Name):
        return {target.id} - {module_param}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_bound(e, module_param) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _bound(target.value, module_param)
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return {target.id} - {module_param} if isinstance(target, ast.Name) else set()


def data_names(fn: ast.FunctionDef, module_param: Optional[str]) -> set[str]:
    """The function's data: its parameters other than the module and option parameters, and the locals
    assigned from them (a fixed point over the assignments; a target binds its names and the container it
    fills, `_bound`, never what its index reads nor the module)."""
    a = fn.args
    params = a.posonlyargs + a.args + a.kwonlyargs
    defaults = dict(zip([p.arg for p in (a.posonlyargs + a.args)][::-1], a.defaults[::-1]))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    data = set()
    for p in params:
        if p.arg == module_param:
            continue
        ann = p.annotation
        ann_text = ann.id if isinstance(ann, ast.Name) else (ann.value if isinstance(ann, ast.Constant) else None)
        d = defaults.get(p.arg)
        if ann_text in _OPTION_TYPES or isinstance(d, ast.Constant) and isinstance(d.value, (bool, int, float, str)):
            continue
        data.add(p.arg)
    for extra in (a.vararg, a.kwarg):
        if extra is not None:
            data.add(extra.arg)
    assigns = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = set().union(*(_bound(t, module_param) for t in targets))
            assigns.append((names, _reads(node.value)))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            assigns.append((_bound(node.target, module_param), _reads(node.iter)))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name) and \
                node.value.func.value.id != module_param:
            # `weights.append(chunk_weight)`: the container now holds what the call was given
            call = node.value
            assigns.append(({call.func.value.id}, set().union(*(_reads(a) for a in call.args),
                                                              *(_reads(k.value) for k in call.keywords))))
    return names_reached(assigns, data)


@dataclass
class _Use:
    attr: str
    elements: Optional[frozenset]       # None: the whole output; else the unpacked elements read
    node: ast.Call
    arity: int = 0


class _Walker:
    """Walks one function along one assignment of the atoms, collecting the sub-module outputs it uses."""

    def __init__(self, fn, mp: ModuleParam, atoms: _Atoms, later_reads):
        self.fn, self.mp, self.atoms, self.later_reads = fn, mp, atoms, later_reads

    def calls_in(self, node: ast.AST) -> list[ast.Call]:
        out = []
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == self.mp.param and n.func.attr in self.mp.cls.fields:
                out.append(n)
        return out

    def member_reads(self, node: ast.AST) -> list[_Use]:
        """`m.k_proj.weight` (a parameter or sub-module of the field, `ModuleClass.members`, read directly --
        `F.linear(x, m.k_proj.weight)`, `m.k_proj.weight.split(n)`): the field's parameters take part as in a
        call of it."""
        out = []
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and \
                    isinstance(n.value.value, ast.Name) and n.value.value.id == self.mp.param and \
                    n.value.attr in self.mp.cls.fields and n.attr in self.mp.cls.members.get(n.value.attr, ()):
                out.append(_Use(n.value.attr, None, n))
        return out

    def uses_of(self, stmt: ast.stmt) -> list[_Use]:
        out = self.member_reads(stmt) if not isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
                                                                ast.AsyncWith, ast.Try)) else []
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple) \
                and isinstance(value, ast.Call) and value in self.calls_in(value)[:1]:
            elts = stmt.targets[0].elts
            read = frozenset(i for i, t in enumerate(elts)
                             if isinstance(t, ast.Name) and t.id in self.later_reads(stmt, t.id))
            out.append(_Use(value.func.attr, read, value, len(elts)))
            for inner in self.calls_in(value)[1:]:
                out.append(_Use(inner.func.attr, None, inner))
            return out
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets) and \
                isinstance(value, ast.Call) and self.calls_in(value)[:1] == [value] and \
                not any(t.id in self.later_reads(stmt, t.id) for t in stmt.targets):
            # `out = model.visual(x)` never read: the output is dropped
            return [_Use(inner.func.attr, frozenset(), inner) for inner in self.calls_in(value)[1:]] + \
                [_Use(value.func.attr, frozenset(), value, 1)]
        for part in _own_parts(stmt):
            out.extend(_Use(c.func.attr, None, c) for c in self.calls_in(part))
        return out

    def walk(self, body: list[ast.stmt], env: dict[str, bool], uses: list[_Use], skipped: list) -> bool:
        """False when the path raises (not compared)."""
        for stmt in body:
            if isinstance(stmt, ast.If):
                uses.extend(_Use(c.func.attr, None, c) for c in self.calls_in(stmt.test))
                uses.extend(self.member_reads(stmt.test))
                taken = self.atoms.value(stmt.test, env)
                branch, other = (stmt.body, stmt.orelse) if taken else (stmt.orelse, stmt.body)
                skipped.append((stmt, other))
                if not self.walk(branch, env, uses, skipped):
                    return False
                continue
            if isinstance(stmt, ast.Raise):
                return False
            if isinstance(stmt, ast.Return):
                uses.extend(self.uses_of(stmt))
                return True
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
                for part in _own_parts(stmt):
                    uses.extend(_Use(c.func.attr, None, c) for c in self.calls_in(part))
                    uses.extend(self.member_reads(part))
                inner = list(stmt.body)
                if not self.walk(inner, env, uses, skipped):
                    return False
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            uses.extend(self.uses_of(stmt))
        return True


def _own_parts(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions of a statement itself (not of the statements nested in it)."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, ast.While):
        return [stmt.test]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Try):
        return []
    return [stmt]


def _used(uses: list[_Use]) -> dict[str, Optional[frozenset]]:
    """Sub-module → the elements this path reads (None: the whole output)."""
    out: dict[str, Optional[frozenset]] = {}
    for u in uses:
        if u.attr in out and out[u.attr] is None:
            continue
        if u.elements is None:
            out[u.attr] = None
        else:
            out[u.attr] = (out.get(u.attr) or frozenset()) | u.elements
    return out


def uneven_uses(project: "ProjectView", src: "PythonSource") -> list[UnevenUse]:
    """Sub-module outputs that some data paths of a module-taking function use and others do not."""
    params = module_params(project, src)
    if not params:
        return []
    tree = _tree(project, src)
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: list[UnevenUse] = []
    for name, mp in params.items():
        fn = funcs.get(name)
        if fn is not None:
            out.extend(_function_uneven(fn, mp))
    return out


def _function_uneven(fn: ast.FunctionDef, mp: ModuleParam) -> list[UnevenUse]:
    atoms = _Atoms(data_names(fn, mp.param))
    for node in ast.walk(fn):
        if isinstance(node, ast.If):
            atoms.collect(node.test)
    # a default fill (`if inputs_embeds is None: inputs_embeds = model.embed(ids)`, ids or embeddings handed over
    # as alternatives) says where a value comes from, not what the batch holds: its test is no data test
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 and \
                isinstance(node.test.ops[0], ast.Is) and isinstance(node.test.left, ast.Name):
            name = node.test.left.id
            if any(isinstance(t, ast.Name) and t.id == name for s in node.body for n in ast.walk(s)
                   if isinstance(n, (ast.Assign, ast.AnnAssign)) for t in (n.targets if isinstance(n, ast.Assign)
                                                                            else [n.target])):
                key, _ = atoms.atom(node.test)
                atoms.data[key] = False
    if not atoms.index or len(atoms.index) > MAX_ATOMS:
        return []
    reads_at: dict[str, list[int]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads_at.setdefault(node.id, []).append(node.lineno)

    def later_reads(stmt, name):
        end = getattr(stmt, "end_lineno", stmt.lineno)
        return {name} if any(ln > end for ln in reads_at.get(name, ())) else set()

    walker = _Walker(fn, mp, atoms, later_reads)
    if not any(walker.calls_in(s) or walker.member_reads(s) for s in fn.body):
        return []
    uniform = [k for k in atoms.index if not atoms.data[k]]
    data = [k for k in atoms.index if atoms.data[k]]
    if not data:
        return []
    found: dict[tuple, UnevenUse] = {}
    for ub in itertools.product((False, True), repeat=len(uniform)):
        paths = []
        for db in itertools.product((False, True), repeat=len(data)):
            env = dict(zip(uniform, ub)) | dict(zip(data, db))
            uses, skipped = [], []
            if walker.walk(fn.body, env, uses, skipped):
                paths.append((env, uses, skipped))
        used = [_used(u) for _, u, _ in paths]
        for i, (env, uses, skipped) in enumerate(paths):
            for j, other in enumerate(used):
                if i == j:
                    continue
                mine = used[i]
                for attr, elements in other.items():
                    have = mine.get(attr, frozenset())
                    if have is None:
                        continue
                    want = elements if elements is not None else frozenset(
                        range(max((u.arity for u in uses if u.attr == attr), default=1)))
                    missing = want - have if attr in mine else frozenset({WHOLE})
                    if not missing:
                        continue
                    hit = _where(walker, attr, uses, skipped, env, uniform)
                    if hit is None:
                        continue
                    line, col, test = hit
                    key = (attr, line)
                    if key in found:
                        continue
                    element = WHOLE if WHOLE in missing else min(missing)
                    found[key] = UnevenUse(
                        fn.name, attr, element, line, col, test.lineno if test is not None else None,
                        ast.unparse(test.test) if test is not None else "",
                        ", ".join(f"`{k}` {'true' if v else 'false'}" for k, v in zip(uniform, ub)
                                  if k in _test_keys(atoms, test)) if test is not None else "",
                        [k for k in data if test is not None and k in _test_keys(atoms, test)], mp)
    return sorted(found.values(), key=lambda u: (u.line, u.submodule))


def _test_keys(atoms: _Atoms, test_stmt: ast.If) -> set[str]:
    keys = set()

    def go(e):
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                go(v)
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            go(e.operand)
        else:
            keys.add(atoms.atom(e)[0])
    go(test_stmt.test)
    return keys


def _where(walker: _Walker, attr: str, uses: list[_Use], skipped: list, env, uniform) -> Optional[tuple]:
    """Where the path that lacks the output loses it: the call of the sub-module that drops elements, else the
    branch it skipped that calls the sub-module (one whose test reads a uniform atom first: the switch that
    turns the fallback off)."""
    for u in uses:
        if u.elements is not None and isinstance(u.node, ast.Call) and u.attr == u.node.func.attr == attr:
            return u.node.lineno, u.node.col_offset, None
    candidates = [(stmt, branch) for stmt, branch in skipped
                  if any(c.func.attr == attr for s in branch for c in walker.calls_in(s))
                  or any(u.attr == attr for s in branch for u in walker.member_reads(s))]
    if not candidates:
        return None
    with_uniform = [c for c in candidates if _test_keys(walker.atoms, c[0]) & set(uniform)]
    stmt, _ = (with_uniform or candidates)[-1]
    return stmt.lineno, stmt.col_offset, stmt


# shared with constant_losses.py
tree_of = _tree
reads_of = _reads


# --------------------------------------------------------------------------- is the patched class trained

def class_trained(project: "ProjectView", cls: ModuleClass) -> Optional[tuple[str, int]]:
    """(file, line) of a construction of the patched class -- `Cls(...)`, `Cls.from_pretrained(...)`,
    `Cls.from_config(...)` resolved through the file's imports -- in a file of the run that trains (itself or
    through a function of another file it calls: `backward`, `step`, `deepspeed.initialize`, a Trainer,
    DDP/FSDP, accelerate); None when none is found. A patched forward's parameters are the batch only where the
    run calls that model on it: a layer's forward installed over a library class (`BlipTextLayer.forward =
    gaudi_...`) receives what the library's enclosing forward hands it -- cross-attention states, caches, the
    model config's switches -- and a model the run builds by a name the command line gives
    (`AutoModelForCausalLM.from_pretrained(args.model)`) may be any class: whether the branch varies with the
    batch is not decided, and the finding is unproven (patched-forward-config-path)."""
    def build():
        from dslint.program.models.modules import _trains
        simple = cls.qualified.rsplit(".", 1)[-1]
        checked = project.class_for_callee  # resolves a checked class's callee to (source, qualified name)
        for src in project.mentioning(simple):
            outline = src.outline
            if outline is None:
                continue
            for callee, _scope in outline.calls:
                if not callee:
                    continue
                head, _, last = callee.rpartition(".")
                target = head if last in _MODEL_FACTORIES else callee
                if target.rsplit(".", 1)[-1] != simple:
                    continue        # prefilter: the construction is confirmed by resolution below
                if not _same_class(project, checked, src, target, cls):
                    continue
                if _trains(project, src):
                    return src.path, _call_line(src, simple)
        return None
    return project.memo(("patched_forwards.trained", cls.qualified), build)


def _same_class(project: "ProjectView", checked, src: "PythonSource", callee: str, cls: ModuleClass) -> bool:
    """Does `callee` (resolved through `src`'s imports) denote the patched class?"""
    found = checked(src, callee)
    if found is not None:
        csrc, name = found
        return csrc.path == cls.path and name.rsplit(".", 1)[-1] == cls.qualified.rsplit(".", 1)[-1]
    if callee == cls.qualified:
        return True
    hit = _resolve_installed(project, callee) if "." in callee else None
    return hit is not None and hit[2] == cls.path and hit[0].name == cls.qualified.rsplit(".", 1)[-1]


def _call_line(src: "PythonSource", simple: str) -> int:
    for i, line in enumerate(src.text.splitlines(), 1):
        if f"{simple}(" in line or f"{simple}.from_" in line or f"{simple}._from_" in line:
            return i
    return 1
