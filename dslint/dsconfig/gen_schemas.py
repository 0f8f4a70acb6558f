"""Generate `dslint/dsconfig/schemas.json`: the DeepSpeed config schema of every release, read from DeepSpeed's
own sources by static analysis (CPython's `ast`; DeepSpeed's code is never imported or run).

    python -m dslint.dsconfig.gen_schemas [--repo GITDIR] [--tree VERSION=DIR ...] [--out PATH] [--check]

`--repo`: a git directory of deepspeedai/DeepSpeed (default: the mirror under /work/.mirror); every tag
`vX.Y.Z` from v0.10.0 on is read with `git cat-file`. `--tree VERSION=DIR`: a release's source tree on disk
(the folder holding `deepspeed/`, e.g. site-packages of an installed release the mirror has no tag for).
`--check`: compare with the committed table instead of writing it (exit 1 when they differ).

The committed table was made with the mirror's tags v0.10.0 … v0.19.5 and the installed 0.19.8 (which the
mirror has no tag for):

    python -m dslint.dsconfig.gen_schemas --tree 0.19.8=.venv/lib/python3.11/site-packages

A release between two of the table's (0.19.6, 0.19.7) is judged at the older one (`table.release_for`).

What is extracted, per release:
- pydantic sections: every subclass of `DeepSpeedConfigModel` with its fields (annotation → a small type
  grammar, default, alias, numeric bounds, deprecation `json_schema_extra={"deprecated": True, "new_param": …}`
  or pydantic-1 `Field(..., deprecated=True, new_param=…)`), and whether it forbids extra keys
  (`model_config = ConfigDict(extra=…)` / `class Config: extra = …`, inherited), and the names of its
  validators (`@field_validator`/`@model_validator`, pydantic 1's `@validator`/`@root_validator`, inherited):
  `knowledge.py` holds their equivalents by name;
- which config path each section sits at, and the keys read with `get_scalar_param` / `dict.get` /
  `d[K]` / `K in d`: an abstract interpretation of `DeepSpeedConfig.__init__` (runtime/config.py) and
  `deepspeed.initialize`, following calls into the functions and classes of DeepSpeed's modules, with the
  config paths a value can denote (`param_dict[FP16]` → ("fp16",)); module constants (`FP16 = "fp16"`,
  `from .constants import *`) are resolved;
- a path handed whole to code the analysis does not follow (stored on an object, passed to an unknown call,
  iterated) is `open`: its keys are not known and never reported as unknown;
- explicit removals (`_REMOVED_TOP_LEVEL_CONFIG_KEYS`, `_REMOVED_ZERO_CONFIG_KEYS`: key → message).

The table holds each section's schema once per run of consecutive releases where it is the same
(`{"from": first, "to": last, ...}`); `dslint.dsconfig.table` reads it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

MIRROR = "/work/.mirror/deepspeedai+DeepSpeed/repo"
FIRST = (0, 10, 0)
OUT = Path(__file__).with_name("schemas.json")
FORMAT = 1


def vtuple(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


# ---------------------------------------------------------------------------------------------------- sources

class GitTree:
    """The files of one tag of a bare git repository, read on demand through one `git cat-file --batch`."""

    def __init__(self, gitdir: str, tag: str):
        self.gitdir, self.tag = gitdir, tag
        out = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "-r", tag, "--", "deepspeed"],
                             capture_output=True, text=True, check=True).stdout
        self.blobs = {}
        for line in out.splitlines():
            meta, path = line.split("\t", 1)
            if path.endswith(".py"):
                self.blobs[path] = meta.split()[2]
        self._proc = None

    def read(self, path: str) -> Optional[str]:
        sha = self.blobs.get(path)
        if sha is None:
            return None
        if self._proc is None:
            self._proc = subprocess.Popen(["git", "--git-dir", self.gitdir, "cat-file", "--batch"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._proc.stdin.write(sha.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        size = int(header[2])
        data = self._proc.stdout.read(size + 1)[:size]
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait()


class DirTree:
    """The files of a source tree on disk (the folder that holds `deepspeed/`)."""

    def __init__(self, root: str):
        self.root = Path(root)

    def read(self, path: str) -> Optional[str]:
        p = self.root / path
        return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------------------------ the modules

class Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()
MAXSIZE = 9223372036854775807


class Module:
    def __init__(self, project: "Project", name: str, tree: ast.Module, is_package: bool):
        self.project, self.name, self.tree = project, name, tree
        self.package = name if is_package else name.rpartition(".")[0]
        self.defs: dict[str, ast.AST] = {}          # name -> FunctionDef / ClassDef / expression assigned
        self.imports: dict[str, tuple] = {}        # name -> ("module", mod) | ("from", mod, name)
        self.stars: list[str] = []
        for node in tree.body:
            self._top(node)

    def _top(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.defs[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            self.defs[node.target.id] = node.value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = ("module", alias.name)
                else:
                    self.imports[alias.name.split(".")[0]] = ("module", alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = self._absolute(node)
            for alias in node.names:
                if alias.name == "*":
                    self.stars.append(base)
                else:
                    self.imports[alias.asname or alias.name] = ("from", base, alias.name)
        elif isinstance(node, (ast.If, ast.Try)):
            for part in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                for sub in part:
                    self._top(sub)
            for handler in getattr(node, "handlers", []):
                for sub in handler.body:
                    self._top(sub)

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.package.split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join([*parts, node.module] if node.module else parts)


class Ref:
    """A resolved name: a function, a class or a module of the analysed sources."""

    def __init__(self, kind: str, module: Module, node: Any = None, modname: str = ""):
        self.kind, self.module, self.node, self.modname = kind, module, node, modname


class Project:
    def __init__(self, tree):
        self.tree = tree
        self.modules: dict[str, Optional[Module]] = {}
        self._const_stack: set = set()

    def module(self, name: str) -> Optional[Module]:
        if name in self.modules:
            return self.modules[name]
        self.modules[name] = None
        if not name.startswith("deepspeed"):
            return None
        base = name.replace(".", "/")
        for path, package in ((base + ".py", False), (base + "/__init__.py", True)):
            text = self.tree.read(path)
            if text is not None:
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    return None
                self.modules[name] = Module(self, name, tree, package)
                break
        return self.modules[name]

    def lookup(self, module: Module, name: str, depth: int = 0) -> Optional[Any]:
        """What `name` is at the top of `module`: an AST node (def/class/expression) with its module, a module
        Ref, or None."""
        if depth > 12:
            return None
        if name in module.defs:
            node = module.defs[name]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return Ref("function", module, node)
            if isinstance(node, ast.ClassDef):
                return Ref("class", module, node)
            return Ref("value", module, node)
        if name in module.imports:
            entry = module.imports[name]
            if entry[0] == "module":
                mod = self.module(entry[1])
                return Ref("module", mod, modname=entry[1]) if mod else None
            _, base, orig = entry
            sub = self.module(f"{base}.{orig}")
            if sub is not None:
                return Ref("module", sub, modname=f"{base}.{orig}")
            mod = self.module(base)
            return self.lookup(mod, orig, depth + 1) if mod else None
        for star in module.stars:
            mod = self.module(star)
            if mod is not None:
                found = self.lookup(mod, name, depth + 1)
                if found is not None:
                    return found
        return None

    def resolve(self, module: Module, expr: ast.AST) -> Optional[Ref]:
        """A Name or dotted Attribute at module scope."""
        if isinstance(expr, ast.Name):
            return self.lookup(module, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve(module, expr.value)
            if base is not None and base.kind == "module" and base.module is not None:
                return self.lookup(base.module, expr.attr)
        return None

    def const(self, module: Module, expr: ast.AST) -> Any:
        """The value of a constant expression (names resolved through the modules), else UNKNOWN."""
        try:
            return self._const(module, expr)
        except (RecursionError, TypeError, ValueError, ZeroDivisionError, OverflowError):
            return UNKNOWN

    def _const(self, module: Module, e: ast.AST) -> Any:
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, (ast.Name, ast.Attribute)):
            if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "sys" \
                    and e.attr == "maxsize":
                return MAXSIZE
            ref = self.resolve(module, e)
            if ref is None:
                if isinstance(e, ast.Attribute):      # Enum.member
                    owner = self.resolve(module, e.value)
                    if owner is not None and owner.kind == "class":
                        members = self.enum_members(owner)
                        if members is not None and e.attr in members:
                            return members[e.attr]
                return UNKNOWN
            if ref.kind != "value":
                return UNKNOWN
            key = (ref.module.name, id(ref.node))
            if key in self._const_stack:
                return UNKNOWN
            self._const_stack.add(key)
            try:
                return self._const(ref.module, ref.node)
            finally:
                self._const_stack.discard(key)
        if isinstance(e, ast.UnaryOp):
            v = self._const(module, e.operand)
            if v is UNKNOWN:
                return UNKNOWN
            if isinstance(e.op, ast.USub):
                return -v
            if isinstance(e.op, ast.UAdd):
                return +v
            if isinstance(e.op, ast.Not):
                return not v
            return UNKNOWN
        if isinstance(e, ast.BinOp):
            a, b = self._const(module, e.left), self._const(module, e.right)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            ops = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
                   ast.Div: lambda x, y: x / y, ast.FloorDiv: lambda x, y: x // y, ast.Pow: lambda x, y: x ** y,
                   ast.Mod: lambda x, y: x % y}
            op = ops.get(type(e.op))
            if op is None or (isinstance(e.op, ast.Pow) and isinstance(b, (int, float)) and b > 64):
                return UNKNOWN
            return op(a, b)
        if isinstance(e, ast.JoinedStr):
            parts = []
            for v in e.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    inner = self._const(module, v.value)
                    if inner is UNKNOWN:
                        return UNKNOWN
                    parts.append(str(inner))
            return "".join(parts)
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            items = [self._const(module, x) for x in e.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) else list(items)
        if isinstance(e, ast.Dict):
            out = {}
            for k, v in zip(e.keys, e.values):
                if k is None:
                    return UNKNOWN
                kk, vv = self._const(module, k), self._const(module, v)
                if kk is UNKNOWN or isinstance(kk, (list, dict)):
                    return UNKNOWN
                out[kk] = vv
            return out
        if isinstance(e, ast.Call):
            name = _callee_name(e.func)
            args = [self._const(module, a) for a in e.args]
            if any(a is UNKNOWN for a in args):
                return UNKNOWN
            if name in ("pp_int", "int") and args:
                return int(args[0])
            if name == "float" and args:
                return float(args[0])
            if name == "str" and args:
                return str(args[0])
            if name in ("dict", "list", "tuple", "set") and not args and not e.keywords:
                return {} if name == "dict" else []
            if name in ("dict", "list", "tuple", "set") and args:
                return args[0]
            return UNKNOWN
        return UNKNOWN

    def enum_members(self, ref: Ref) -> Optional[dict]:
        """name -> value of an Enum class of the sources (None when `ref` is no Enum)."""
        cls = ref.node
        if not isinstance(cls, ast.ClassDef) or not any(_callee_name(b) in ("Enum", "IntEnum", "StrEnum")
                                                        or self._is_enum_base(ref.module, b) for b in cls.bases):
            return None
        out = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                v = self.const(ref.module, stmt.value)
                if v is not UNKNOWN and not stmt.targets[0].id.startswith("_"):
                    out[stmt.targets[0].id] = v
        return out

    def _is_enum_base(self, module: Module, base: ast.AST) -> bool:
        ref = self.resolve(module, base)
        return ref is not None and ref.kind == "class" and self.enum_members(ref) is not None

    def class_bases(self, ref: Ref) -> list[Ref]:
        out = []
        for b in ref.node.bases:
            r = self.resolve(ref.module, b)
            if r is not None and r.kind == "class":
                out.append(r)
        return out

    def is_config_model(self, ref: Ref, depth: int = 0) -> bool:
        if ref.node.name == "DeepSpeedConfigModel" and ref.module.name.endswith("config_utils"):
            return True
        return depth < 10 and any(self.is_config_model(b, depth + 1) for b in self.class_bases(ref))


def _callee_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


# -------------------------------------------------------------------------------------- pydantic config models

# pydantic 2 and 1: a method decorated with one of these is a validator of the model (recorded by name, so
# that dslint's hand-written equivalent in knowledge.py applies only at the releases that have it)
VALIDATOR_DECORATORS = ("field_validator", "model_validator", "validator", "root_validator")


def model_id(ref: Ref) -> str:
    return f"{ref.module.name}.{ref.node.name}"


class Models:
    """The DeepSpeedConfigModel subclasses met, with their fields."""

    def __init__(self, project: Project):
        self.project = project
        self.fields: dict[str, dict] = {}
        self.forbid: dict[str, bool] = {}
        self.validators: dict[str, set] = {}     # model id -> the names of its validators (inherited too)
        self.refs: dict[str, Ref] = {}
        self._aliases: set = set()

    def get(self, ref: Ref) -> str:
        mid = model_id(ref)
        if mid in self.refs:
            return mid
        self.refs[mid] = ref
        fields: dict[str, dict] = {}
        forbid = True
        validators: set = set()
        for base in reversed(self.project.class_bases(ref)):
            if self.project.is_config_model(base) and not (base.node.name == "DeepSpeedConfigModel"):
                bid = self.get(base)
                fields.update(self.fields[bid])
                forbid = self.forbid[bid]
                validators |= self.validators[bid]
            elif base.node.name == "DeepSpeedConfigModel":
                forbid = _extra_forbid(self.project, base, True)
        forbid = _extra_forbid(self.project, ref, forbid)
        for stmt in ref.node.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            name = stmt.target.id
            if "ClassVar" in ast.unparse(stmt.annotation) or name == "model_config":
                continue
            fields[name] = self._field(ref, name, stmt)
        validators |= {stmt.name for stmt in ref.node.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and any(_callee_name(d.func if isinstance(d, ast.Call) else d) in VALIDATOR_DECORATORS
                               for d in stmt.decorator_list)}
        self.fields[mid], self.forbid[mid], self.validators[mid] = fields, forbid, validators
        return mid

    def _field(self, ref: Ref, name: str, stmt: ast.AnnAssign) -> dict:
        project, module = self.project, ref.module
        out: dict[str, Any] = {"type": self.type_of(module, stmt.annotation)}
        value = stmt.value
        default: Any = UNKNOWN
        if value is None:
            out["required"] = True
        elif isinstance(value, ast.Call) and _callee_name(value.func) == "Field":
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            if value.args:
                if isinstance(value.args[0], ast.Constant) and value.args[0].value is Ellipsis:
                    out["required"] = True
                else:
                    default = project.const(module, value.args[0])
            elif "default" in kw:
                default = project.const(module, kw["default"])
            elif "default_factory" in kw:
                default = _factory(kw["default_factory"])
            else:
                out["required"] = True
            if "alias" in kw:
                alias = project.const(module, kw["alias"])
                if isinstance(alias, str) and alias != name:
                    out["alias"] = alias
            for bound in ("ge", "gt", "le", "lt"):
                if bound in kw:
                    b = project.const(module, kw[bound])
                    if isinstance(b, (int, float)) and not isinstance(b, bool):
                        out[bound] = b
            extra = {}
            if "json_schema_extra" in kw and isinstance(kw["json_schema_extra"], ast.Dict):
                for k, v in zip(kw["json_schema_extra"].keys, kw["json_schema_extra"].values):
                    kk = project.const(module, k) if k is not None else UNKNOWN
                    if isinstance(kk, str):
                        extra[kk] = v
            for k in ("deprecated", "new_param", "deprecated_msg"):
                if k in kw:
                    extra.setdefault(k, kw[k])
            if "deprecated" in extra and project.const(module, extra["deprecated"]) is True:
                new = project.const(module, extra["new_param"]) if "new_param" in extra else ""
                out["deprecated"] = new if isinstance(new, str) else ""
        else:
            default = project.const(module, value)
        if "required" not in out:
            out["default"] = _jsonable(default)
        return out

    def type_of(self, module: Module, ann: ast.AST) -> Any:
        project = self.project
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                return self.type_of(module, ast.parse(ann.value, mode="eval").body)
            except SyntaxError:
                return "any"
        if isinstance(ann, ast.Constant) and ann.value is None:
            return "none"
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return _union([self.type_of(module, ann.left), self.type_of(module, ann.right)])
        if isinstance(ann, ast.Subscript):
            head = _callee_name(ann.value)
            args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            if head == "Optional":
                return _union([self.type_of(module, args[0]), "none"])
            if head == "Union":
                return _union([self.type_of(module, a) for a in args])
            if head in ("List", "list", "Set", "set", "Sequence", "Tuple", "tuple"):
                inner = [self.type_of(module, a) for a in args if not (isinstance(a, ast.Constant)
                                                                        and a.value is Ellipsis)]
                return ["list", inner[0] if len(inner) == 1 else "any"]
            if head in ("Dict", "dict", "Mapping"):
                return "dict"
            if head == "Literal":
                values = [project.const(module, a) for a in args]
                return "any" if any(v is UNKNOWN for v in values) else ["lit", values]
            if head == "Annotated":
                return self.type_of(module, args[0])
            return "any"
        name = _callee_name(ann)
        if isinstance(ann, ast.Name) and name in ("bool", "int", "float", "str"):
            return name
        if name in ("Dict", "dict", "Mapping"):
            return "dict"
        if name in ("List", "list", "Set", "set", "Tuple", "tuple"):
            return ["list", "any"]
        if name == "Path":
            return "str"
        ref = project.resolve(module, ann) if isinstance(ann, (ast.Name, ast.Attribute)) else None
        if ref is not None and ref.kind == "value" and isinstance(ref.node, (ast.Subscript, ast.Name,
                                                                             ast.Attribute, ast.BinOp)):
            key = ("alias", ref.module.name, id(ref.node))         # a type alias: `PassName = Literal[...]`
            if key not in self._aliases:
                self._aliases.add(key)
                try:
                    return self.type_of(ref.module, ref.node)
                finally:
                    self._aliases.discard(key)
        if ref is not None and ref.kind == "class":
            if project.is_config_model(ref):
                return ["model", self.get(ref)]
            members = project.enum_members(ref)
            if members is not None:
                return ["enum", [_jsonable(v) for v in members.values()]]
            if ref.node.name == "pp_int":
                return "int"
        return "any"


def _extra_forbid(project: Project, ref: Ref, inherited: bool) -> bool:
    for stmt in ref.node.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_config"
                                                for t in stmt.targets) and isinstance(stmt.value, ast.Call):
            for k in stmt.value.keywords:
                if k.arg == "extra":
                    return project.const(ref.module, k.value) == "forbid" or "forbid" in ast.unparse(k.value)
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            for sub in stmt.body:
                if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "extra"
                                                       for t in sub.targets):
                    return "forbid" in ast.unparse(sub.value)
    return inherited


def _factory(node: ast.AST) -> Any:
    name = _callee_name(node)
    return {"list": [], "dict": {}, "set": []}.get(name, None)


def _jsonable(v: Any) -> Any:
    if v is UNKNOWN:
        return None
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return None


def _union(types: list) -> Any:
    flat = []
    for t in types:
        members = t[1] if isinstance(t, list) and t and t[0] == "union" else [t]
        for m in members:
            if m not in flat:
                flat.append(m)
    if "any" in flat:
        return "any"
    return flat[0] if len(flat) == 1 else ["union", flat]


# ------------------------------------------------------------------------------- the abstract interpretation

class PathV:
    """A config value at a JSON path (from the root of the config)."""
    __slots__ = ("path",)

    def __init__(self, path: tuple):
        self.path = path

    def __eq__(self, other):
        return isinstance(other, PathV) and other.path == self.path

    def __hash__(self):
        return hash(("P", self.path))


class ConstV:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, ConstV) and repr(other.value) == repr(self.value)

    def __hash__(self):
        return hash(("C", repr(self.value)))


class DictV:
    __slots__ = ("items",)

    def __init__(self, items: dict):
        self.items = items          # const key -> frozenset of values

    def __eq__(self, other):
        return isinstance(other, DictV) and other.items == self.items

    def __hash__(self):
        return hash(("D", tuple(sorted((repr(k), v) for k, v in self.items.items()))))


class ObjV:
    __slots__ = ("cls",)

    def __init__(self, cls: str):
        self.cls = cls

    def __eq__(self, other):
        return isinstance(other, ObjV) and other.cls == self.cls

    def __hash__(self):
        return hash(("O", self.cls))


EMPTY: frozenset = frozenset()
HARMLESS = {"isinstance", "len", "str", "int", "float", "bool", "type", "print", "any", "all", "hasattr",
            "getattr", "repr", "format", "sorted", "set", "tuple", "min", "max", "abs", "round", "issubclass",
            "warning", "info", "debug", "error", "warn", "log", "log_dist", "print_rank_0", "lower", "upper",
            "startswith", "endswith", "split", "strip", "join", "enumerate", "zip", "range", "append",
            "DeepSpeedConfigError", "ValueError", "AssertionError", "RuntimeError", "TypeError", "KeyError",
            "NotImplementedError", "Exception", "ElasticityConfigError"}
READERS = {"get_scalar_param", "get_dict_param", "get_list_param"}


class Reads:
    def __init__(self):
        self.keys: dict[tuple, dict[str, dict]] = {}     # path -> key -> {"default": …}
        self.models: dict[tuple, set[str]] = {}          # path -> pydantic model ids built on it
        self.open: set[tuple] = set()

    def read(self, path: tuple, key: str, default: Any = UNKNOWN) -> None:
        entry = self.keys.setdefault(path, {}).setdefault(key, {})
        if default is not UNKNOWN and "default" not in entry:
            entry["default"] = _jsonable(default)


class Interpreter:
    def __init__(self, project: Project, models: Models):
        self.project, self.models = project, models
        self.reads = Reads()
        self.done: dict = {}
        self.stack: set = set()
        self.attrs: dict[tuple, set] = {}       # (class id, attr) -> values

    # one function, with its parameters' values
    def call(self, module: Module, fn: ast.FunctionDef, args: dict, cls: Optional[Ref] = None) -> frozenset:
        key = (module.name, id(fn), tuple(sorted((k, v) for k, v in args.items())))
        if key in self.done:
            return self.done[key]
        if key in self.stack or len(self.stack) > 40:
            return EMPTY
        self.stack.add(key)
        try:
            frame = Frame(self, module, fn, cls)
            for name, values in args.items():
                frame.env[name] = set(values)
            frame.block(fn.body)
            result = frozenset(frame.returns)
        finally:
            self.stack.discard(key)
        self.done[key] = result
        return result

    def escape(self, values: Iterable) -> None:
        for v in values:
            if isinstance(v, PathV) and v.path:
                self.reads.open.add(v.path)
            elif isinstance(v, DictV):
                for inner in v.items.values():
                    self.escape(inner)

    def build_model(self, ref: Ref, node: ast.Call, frame: "Frame") -> frozenset:
        mid = self.models.get(ref)
        fields = self.models.fields[mid]
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                frame.eval(arg.value)
        for kw in node.keywords:
            values = frame.eval(kw.value)
            if kw.arg is None:
                for v in values:
                    if isinstance(v, PathV):
                        self.reads.models.setdefault(v.path, set()).add(mid)
                    elif isinstance(v, DictV):
                        for k, inner in v.items.items():
                            self._bind_field(fields, k, inner)
            else:
                self._bind_field(fields, kw.arg, values)
        return frozenset({ObjV(mid)})

    def _bind_field(self, fields: dict, key: Any, values: Iterable) -> None:
        spec = next((f for n, f in fields.items() if key == n or key == f.get("alias")), None)
        sub = _model_in(spec["type"]) if spec else None
        for v in values:
            if isinstance(v, PathV):
                if sub is not None:
                    self.reads.models.setdefault(v.path, set()).add(sub)
                elif spec is None or spec["type"] in ("any", "dict"):
                    self.escape([v])


def _model_in(t: Any) -> Optional[str]:
    if isinstance(t, list):
        if t[0] == "model":
            return t[1]
        if t[0] == "union":
            for m in t[1]:
                found = _model_in(m)
                if found:
                    return found
    return None


class Frame:
    def __init__(self, interp: Interpreter, module: Module, fn: ast.FunctionDef, cls: Optional[Ref]):
        self.i, self.module, self.fn, self.cls = interp, module, fn, cls
        self.env: dict[str, set] = {}
        self.returns: set = set()

    # statements
    def block(self, body: list) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, s: ast.AST) -> None:
        if isinstance(s, ast.Assign):
            values = self.eval(s.value)
            for t in s.targets:
                self.assign(t, values, s.value)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign(s.target, self.eval(s.value), s.value)
        elif isinstance(s, ast.AugAssign):
            self.eval(s.value)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.returns |= self.eval(s.value)
        elif isinstance(s, ast.Expr):
            self.eval(s.value)
        elif isinstance(s, (ast.If, ast.While)):
            self.eval(s.test)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.For):
            it = self.eval(s.iter)
            elems: set = set()
            for v in it:
                if isinstance(v, ConstV) and isinstance(v.value, list):
                    elems |= {ConstV(x) for x in v.value}
                elif isinstance(v, PathV):
                    self.i.escape([v])
            self.assign(s.target, elems, None)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.With):
            for item in s.items:
                self.eval(item.context_expr)
            self.block(s.body)
        elif isinstance(s, ast.Try):
            self.block(s.body)
            for h in s.handlers:
                self.block(h.body)
            self.block(s.orelse)
            self.block(s.finalbody)
        elif isinstance(s, (ast.Assert,)):
            self.eval(s.test)
        elif isinstance(s, ast.Raise) and s.exc is not None:
            self.eval(s.exc)

    def assign(self, target: ast.AST, values: set, expr: Optional[ast.AST]) -> None:
        if isinstance(target, ast.Name):
            self.env.setdefault(target.id, set()).update(values)
        elif isinstance(target, ast.Attribute):
            if isinstance(target.value, ast.Name) and target.value.id == "self" and self.cls is not None:
                self.i.attrs.setdefault((model_id(self.cls), target.attr), set()).update(values)
            self.i.escape(values)
        elif isinstance(target, ast.Subscript):
            self.eval(target.value)
            self.i.escape(values)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.assign(t, set(), None)
            self.i.escape(values)

    # expressions
    def eval(self, e: ast.AST) -> frozenset:
        try:
            return frozenset(self._eval(e))
        except RecursionError:
            return EMPTY

    def _eval(self, e: ast.AST) -> set:
        i = self.i
        if isinstance(e, ast.Constant):
            return {ConstV(e.value)}
        if isinstance(e, ast.Name):
            if e.id in self.env:
                return set(self.env[e.id])
            v = i.project.const(self.module, e)
            return {ConstV(v)} if v is not UNKNOWN else set()
        if isinstance(e, ast.Attribute):
            if e.attr == "_param_dict":
                self.eval(e.value)
                return {PathV(())}
            if isinstance(e.value, ast.Name) and e.value.id == "self" and self.cls is not None:
                return set(i.attrs.get((model_id(self.cls), e.attr), set()))
            v = i.project.const(self.module, e)
            if v is not UNKNOWN:
                return {ConstV(v)}
            self.eval(e.value)
            return set()
        if isinstance(e, ast.Subscript):
            base = self.eval(e.value)
            keys = self.eval(e.slice)
            out = set()
            for b in base:
                for k in keys:
                    if not isinstance(k, ConstV):
                        continue
                    if isinstance(b, PathV) and isinstance(k.value, str):
                        i.reads.read(b.path, k.value)
                        out.add(PathV(b.path + (k.value,)))
                    elif isinstance(b, DictV) and k.value in b.items:
                        out |= set(b.items[k.value])
                if isinstance(b, PathV) and not any(isinstance(k, ConstV) for k in keys):
                    i.escape([b])
            return out
        if isinstance(e, ast.Compare):
            left = self.eval(e.left)
            for op, right in zip(e.ops, e.comparators):
                rv = self.eval(right)
                if isinstance(op, (ast.In, ast.NotIn)):
                    for b in rv:
                        for k in left:
                            if isinstance(b, PathV) and isinstance(k, ConstV) and isinstance(k.value, str):
                                i.reads.read(b.path, k.value)
            return set()
        if isinstance(e, ast.BoolOp):
            out = set()
            for v in e.values:
                out |= self.eval(v)
            return out
        if isinstance(e, ast.IfExp):
            self.eval(e.test)
            return set(self.eval(e.body)) | set(self.eval(e.orelse))
        if isinstance(e, ast.Dict):
            items: dict = {}
            for k, v in zip(e.keys, e.values):
                vals = self.eval(v)
                if k is None:
                    i.escape(vals)
                    continue
                kk = i.project.const(self.module, k)
                if kk is UNKNOWN or isinstance(kk, (list, dict)):
                    self.eval(k)
                    i.escape(vals)
                    continue
                items[kk] = frozenset(vals)
            return {DictV(items)}
        if isinstance(e, ast.DictComp) and len(e.generators) == 1:
            gen = e.generators[0]
            it = self.eval(gen.iter)
            keys = [x for v in it if isinstance(v, ConstV) and isinstance(v.value, list) for x in v.value]
            if isinstance(gen.target, ast.Name) and keys:
                items = {}
                saved = self.env.get(gen.target.id)
                for k in keys:
                    self.env[gen.target.id] = {ConstV(k)}
                    kv = self.eval(e.key)
                    vv = self.eval(e.value)
                    for kc in kv:
                        if isinstance(kc, ConstV) and not isinstance(kc.value, (list, dict)):
                            items[kc.value] = vv
                if saved is None:
                    self.env.pop(gen.target.id, None)
                else:
                    self.env[gen.target.id] = saved
                return {DictV(items)}
            for v in it:
                i.escape([v])
            return set()
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            vals = [self.eval(x) for x in e.elts]
            consts = []
            for vs in vals:
                c = [v for v in vs if isinstance(v, ConstV)]
                if len(c) == 1 and len(vs) == 1:
                    consts.append(c[0].value)
                else:
                    consts = None
                    break
            for vs in vals:
                i.escape(vs)
            return {ConstV(consts)} if consts is not None else set()
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            for gen in e.generators:
                it = self.eval(gen.iter)
                elems = set()
                for v in it:
                    if isinstance(v, ConstV) and isinstance(v.value, list):
                        elems |= {ConstV(x) for x in v.value}
                    elif isinstance(v, PathV):
                        i.escape([v])
                self.assign(gen.target, elems, None)
                for cond in gen.ifs:
                    self.eval(cond)
            self.eval(e.elt)
            return set()
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.JoinedStr):
            for v in e.values:
                if isinstance(v, ast.FormattedValue):
                    self.eval(v.value)
            return set()
        if isinstance(e, ast.Starred):
            return set(self.eval(e.value))
        if isinstance(e, (ast.BinOp,)):
            v = i.project.const(self.module, e)
            self.eval(e.left)
            self.eval(e.right)
            return {ConstV(v)} if v is not UNKNOWN else set()
        if isinstance(e, ast.UnaryOp):
            self.eval(e.operand)
            return set()
        if isinstance(e, ast.Lambda):
            return set()
        return set()

    def call(self, e: ast.Call) -> set:
        i = self.i
        func = e.func
        name = _callee_name(func)
        # reads of a config dict
        if name in READERS and len(e.args) >= 2:
            base, key = self.eval(e.args[0]), self.eval(e.args[1])
            default = i.project.const(self.module, e.args[2]) if len(e.args) > 2 else UNKNOWN
            out = set()
            for b in base:
                for k in key:
                    if isinstance(b, PathV) and isinstance(k, ConstV) and isinstance(k.value, str):
                        i.reads.read(b.path, k.value, default)
                        out.add(PathV(b.path + (k.value,)))
            return out
        if isinstance(func, ast.Attribute) and name in ("get", "pop", "setdefault", "keys", "copy", "__contains__",
                                                        "items", "values", "update") \
                and not (isinstance(func.value, ast.Name) and func.value.id == "copy"):
            base = self.eval(func.value)
            args = [self.eval(a) for a in e.args]
            paths = [b for b in base if isinstance(b, PathV)]
            if name in ("get", "pop", "setdefault", "__contains__") and args:
                out = set()
                default = i.project.const(self.module, e.args[1]) if len(e.args) > 1 else UNKNOWN
                for b in paths:
                    for k in args[0]:
                        if isinstance(k, ConstV) and isinstance(k.value, str):
                            i.reads.read(b.path, k.value, default if not isinstance(default, dict) else UNKNOWN)
                            out.add(PathV(b.path + (k.value,)))
                        else:
                            i.escape([b])
                for b in base:
                    if isinstance(b, DictV):
                        for k in args[0]:
                            if isinstance(k, ConstV) and k.value in b.items:
                                out |= set(b.items[k.value])
                if name == "get" and len(args) > 1:
                    out |= {v for v in args[1] if not isinstance(v, (ConstV, DictV))}
                return out
            if name in ("keys", "copy"):
                return set(base)
            if name in ("items", "values"):
                i.escape(paths)
                return set()
            if name == "update":
                for a in args:
                    i.escape(a)
                return set()
        if name in ("copy", "deepcopy") and len(e.args) == 1:       # copy.copy(d), deepcopy(d)
            return set(self.eval(e.args[0]))
        if isinstance(func, ast.Name) and func.id in ("dict", "list") and len(e.args) == 1 and not e.keywords:
            return set(self.eval(e.args[0]))
        # a function or class of the sources
        target = self._target(func)
        if target is not None:
            ref, bound_self = target
            if ref.kind == "class":
                if i.project.is_config_model(ref):
                    return set(i.build_model(ref, e, self))
                init = _method(i.project, ref, "__init__")
                if init is not None:
                    self._invoke(init[0], init[1], e, self_value={ObjV(model_id(ref))}, cls=init[2])
                else:
                    self._escape_args(e)
                return {ObjV(model_id(ref))}
            if ref.kind == "function":
                return set(self._invoke(ref.module, ref.node, e, self_value=bound_self[0] if bound_self else None,
                                        cls=bound_self[1] if bound_self else None))
        # something else
        if isinstance(func, ast.Attribute):
            self.eval(func.value)
        if name in HARMLESS:
            for a in e.args:
                self.eval(a)
            for k in e.keywords:
                self.eval(k.value)
            return set()
        self._escape_args(e)
        return set()

    def _escape_args(self, e: ast.Call) -> None:
        for a in e.args:
            self.i.escape(self.eval(a))
        for k in e.keywords:
            self.i.escape(self.eval(k.value))

    def _target(self, func: ast.AST):
        """(Ref of the callee, (self value, class Ref) for a method) or None."""
        p = self.i.project
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") \
                and self.cls is not None:
            found = _method(p, self.cls, func.attr)
            if found is not None:
                mod, node, owner = found
                return Ref("function", mod, node), ({ObjV(model_id(self.cls))}, owner)
            return None
        if isinstance(func, ast.Name) and func.id in self.env:
            return None
        if isinstance(func, (ast.Name, ast.Attribute)):
            ref = p.resolve(self.module, func)
            if ref is not None and ref.kind in ("function", "class"):
                return ref, None
            if isinstance(func, ast.Attribute):          # Class.method / Class.from_x
                owner = p.resolve(self.module, func.value)
                if owner is not None and owner.kind == "class":
                    found = _method(p, owner, func.attr)
                    if found is not None:
                        return Ref("function", found[0], found[1]), None
        return None

    def _invoke(self, module: Module, fn: ast.FunctionDef, e: ast.Call, self_value=None, cls=None) -> frozenset:
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        kwonly = [a.arg for a in fn.args.kwonlyargs]
        args: dict[str, frozenset] = {}
        pos = list(e.args)
        start = 0
        if self_value is not None and params and params[0] in ("self", "cls"):
            args[params[0]] = frozenset(self_value)
            start = 1
        elif params and params[0] in ("self", "cls") and cls is None:
            start = 1 if isinstance(e.func, ast.Attribute) else 0
        for idx, a in enumerate(pos):
            values = self.eval(a.value if isinstance(a, ast.Starred) else a)
            if isinstance(a, ast.Starred):
                self.i.escape(values)
                continue
            if start + idx < len(params):
                args[params[start + idx]] = values
            elif fn.args.vararg is not None:
                self.i.escape(values)
        for k in e.keywords:
            values = self.eval(k.value)
            if k.arg is None:
                for v in values:
                    if isinstance(v, DictV):
                        for kk, vv in v.items.items():
                            if kk in params or kk in kwonly:
                                args[kk] = vv
                    else:
                        self.i.escape([v])
            elif k.arg in params or k.arg in kwonly:
                args[k.arg] = values
            else:
                self.i.escape(values)
        # default values of parameters not given
        defaults = fn.args.defaults
        for name, d in zip(params[len(params) - len(defaults):], defaults):
            if name not in args:
                value = self.i.project.const(module, d)
                args[name] = frozenset({ConstV(value)}) if value is not UNKNOWN else EMPTY
        return self.i.call(module, fn, args, cls)


def _method(project: Project, cls: Ref, name: str, depth: int = 0):
    for stmt in cls.node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return cls.module, stmt, cls
    if depth < 8:
        for base in project.class_bases(cls):
            found = _method(project, base, name, depth + 1)
            if found is not None:
                return found
    return None


# -------------------------------------------------------------------------------------------- one release

def removed_keys(project: Project) -> dict[tuple, dict[str, str]]:
    mod = project.module("deepspeed.runtime.config")
    out: dict[tuple, dict[str, str]] = {}
    if mod is None:
        return out
    for name, path in (("_REMOVED_TOP_LEVEL_CONFIG_KEYS", ()), ("_REMOVED_ZERO_CONFIG_KEYS",
                                                                 ("zero_optimization",))):
        node = mod.defs.get(name)
        if node is None:
            continue
        value = project.const(mod, node)
        if isinstance(value, dict):
            out[path] = {str(k): str(v) for k, v in value.items()}
        elif isinstance(value, list):
            out[path] = {str(k): "" for k in value}
    return out


def pydantic_major(project: Project) -> int:
    mod = project.module("deepspeed.runtime.config_utils")
    if mod is None:
        return 2
    ref = project.lookup(mod, "DeepSpeedConfigModel")
    if ref is None or ref.kind != "class":
        return 2
    for stmt in ref.node.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_config"
                                                for t in stmt.targets):
            return 2
    return 1


def analyse_release(tree) -> dict:
    """{"pydantic": 1|2, "sections": {dotted path: schema}} of one release's sources."""
    project = Project(tree)
    models = Models(project)
    interp = Interpreter(project, models)
    config = project.module("deepspeed.runtime.config")
    if config is None:
        raise SystemExit("no deepspeed/runtime/config.py in this tree")
    ref = project.lookup(config, "DeepSpeedConfig")
    init = _method(project, ref, "__init__")
    interp.call(init[0], init[1], {"self": frozenset({ObjV(model_id(ref))})}, cls=init[2])
    # methods DeepSpeedConfig's own __init__ reaches only through paths the analysis does not take
    for stmt in ref.node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "_initialize_params":
            interp.call(config, stmt, {"self": frozenset({ObjV(model_id(ref))}),
                                       stmt.args.args[1].arg: frozenset({PathV(())})}, cls=ref)
    top = project.module("deepspeed")
    if top is not None:
        fn = top.defs.get("initialize")
        if isinstance(fn, ast.FunctionDef):
            names = [a.arg for a in fn.args.args]
            if "config" in names:
                interp.call(top, fn, {"config": frozenset({PathV(())})})
    reads = interp.reads
    sections: dict[tuple, dict] = {}

    def model_section(path: tuple, mid: str, depth: int = 0) -> None:
        fields = models.fields[mid]
        sec = sections.setdefault(path, {"keys": {}})
        sec["model"] = mid.rsplit(".", 1)[1]
        sec["rejects_unknown"] = models.forbid[mid]
        if models.validators[mid]:
            sec["validators"] = sorted(models.validators[mid])
        for name, spec in fields.items():
            entry = dict(spec)
            key = spec.get("alias", name)
            entry.pop("alias", None)
            if key != name:
                entry["field"] = name
            sub = _model_in(spec["type"])
            if sub is not None and depth < 6:
                model_section(path + (key,), sub, depth + 1)
            sec["keys"][key] = _finish_type(entry)

    for path in sorted(reads.models, key=len):
        for mid in sorted(reads.models[path]):
            model_section(path, mid)
    for path, keys in reads.keys.items():
        sec = sections.setdefault(path, {"keys": {}})
        for key, info in keys.items():
            if key in sec["keys"]:
                continue
            entry = {"type": "read"}
            if "default" in info:
                entry["default"] = info["default"]
            sec["keys"][key] = entry
        sec.setdefault("rejects_unknown", False)
    # every section's parent has the key that leads to it
    for path in list(sections):
        for n in range(len(path)):
            parent = sections.setdefault(path[:n], {"keys": {}, "rejects_unknown": False})
            parent["keys"].setdefault(path[n], {"type": "read"})
    for path in reads.open:
        if any(path[:n] in reads.models for n in range(len(path) + 1)):
            continue            # pydantic validates it whatever else reads it
        if path in sections:
            sections[path]["open"] = True
        elif path[:-1] in sections and path[-1] in sections[path[:-1]]["keys"]:
            entry = sections[path[:-1]]["keys"][path[-1]]
            if not isinstance(entry.get("default"), (bool, int, float, str)):
                entry["open"] = True     # a value handed on whole (a mapping, maybe): not checked below
    for path, keys in removed_keys(project).items():
        sec = sections.setdefault(path, {"keys": {}, "rejects_unknown": False})
        for key, message in keys.items():
            entry = sec["keys"].setdefault(key, {"type": "any"})
            entry["removed"] = message
    # a key whose value is a section is marked as one; sections of paths below an open one are kept
    for path, sec in sections.items():
        for key, entry in sec["keys"].items():
            if path + (key,) in sections:
                entry["section"] = True
        sec["keys"] = dict(sorted(sec["keys"].items()))
    tree.close()
    return {"pydantic": pydantic_major(project),
            "sections": {".".join(p): s for p, s in sorted(sections.items())}}


def _finish_type(entry: dict) -> dict:
    t = entry.get("type")
    if _model_in(t) is not None:
        entry["type"] = _replace_models(t)
    return entry


def _replace_models(t: Any) -> Any:
    if isinstance(t, list) and t and t[0] == "model":
        return "section"
    if isinstance(t, list) and t and t[0] == "union":
        return _union([_replace_models(m) for m in t[1]])
    return t


# ------------------------------------------------------------------------------------------ the whole table

def release_tags(gitdir: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", gitdir, "tag", "--list", "v*"], capture_output=True, text=True,
                         check=True).stdout.split()
    tags = [t for t in out if re.fullmatch(r"v\d+\.\d+\.\d+", t) and vtuple(t) >= FIRST]
    return sorted(tags, key=vtuple)


def build(gitdir: Optional[str], trees: list[tuple[str, str]], log=None) -> dict:
    releases: dict[str, dict] = {}
    sources: dict[str, str] = {}
    if gitdir:
        for tag in release_tags(gitdir):
            version = tag[1:]
            if log:
                log(f"{tag}")
            releases[version] = analyse_release(GitTree(gitdir, tag))
            sources[version] = f"tag {tag}"
    for version, root in trees:
        if log:
            log(f"{version} from {root}")
        releases[version] = analyse_release(DirTree(root))
        sources[version] = "source tree of the installed release"
    return compact(releases, sources)


def compact(releases: dict[str, dict], sources: dict[str, str]) -> dict:
    versions = sorted(releases, key=vtuple)
    paths = sorted({p for r in releases.values() for p in r["sections"]})
    sections: dict[str, list] = {}
    for path in paths:
        runs: list[dict] = []
        for v in versions:
            schema = releases[v]["sections"].get(path)
            if runs and runs[-1]["schema"] == schema and runs[-1]["to"] == versions[versions.index(v) - 1]:
                runs[-1]["to"] = v
            else:
                runs.append({"from": v, "to": v, "schema": schema})
        sections[path] = [{"from": r["from"], "to": r["to"], **r["schema"]} for r in runs if r["schema"] is not None]
    pydantic = []
    for v in versions:
        major = releases[v]["pydantic"]
        if pydantic and pydantic[-1]["major"] == major:
            pydantic[-1]["to"] = v
        else:
            pydantic.append({"from": v, "to": v, "major": major})
    return {"format": FORMAT,
            "generated_by": "python -m dslint.dsconfig.gen_schemas (dslint/dsconfig/gen_schemas.py)",
            "versions": versions, "sources": {v: sources[v] for v in versions}, "pydantic": pydantic,
            "sections": sections}


def dumps(table: dict) -> str:
    return json.dumps(table, indent=None, separators=(",", ":"), sort_keys=False) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=MIRROR if os.path.isdir(MIRROR) else None)
    parser.add_argument("--tree", action="append", default=[], metavar="VERSION=DIR")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    trees = [tuple(t.split("=", 1)) for t in args.tree]
    table = build(args.repo, trees, log=None if args.quiet else (lambda m: print(m, file=sys.stderr)))
    text = dumps(table)
    if args.check:
        same = Path(args.out).read_text(encoding="utf-8") == text
        print("up to date" if same else f"{args.out} differs from what the sources give")
        return 0 if same else 1
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(table['versions'])} releases, {len(table['sections'])} sections, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
