"""What a hyper-parameter expression evaluates to without running the script.

`ep_size=4`, `ep_size=EP_SIZE` (a module constant), `ep_size=args.ep_world_size` (an argparse default, or the
value a launcher line in the same run passes: `deepspeed train.py --ep-world-size 2`), or a dataclass field
default read by `HfArgumentParser` (`model_args.num_experts`). Anything else is UNKNOWN: rules then stay
silent or say what is unknown, never guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from dslint.sources.cstwalk import nodes_of, visit as cst_visit
from dslint.program.facts import FunctionInfo, dotted_name
from dslint.program.statement_walks import iter_assigns
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource


@dataclass(frozen=True)
class Value:
    value: Any
    origin: str              # "literal", "default", "--ep-world-size default in train.py:12", "run.sh:3"

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN


UNKNOWN_VALUE = Value(UNKNOWN, "unknown")


def memo(project: "ProjectView", key: str, build):
    """Per-run cache on the project view, so rules of several families share one analysis."""
    return project.memo(key, build)


def _line(src: PythonSource, node: cst.CSTNode) -> int:
    try:
        return src.span(node).line
    except Exception:
        return 0


@dataclass
class Option:
    flags: tuple[str, ...]
    dest: str
    default: Any
    kind: Optional[str]        # "int" | "float" | "bool" | "str" | None
    source: PythonSource
    node: cst.CSTNode


def _argparse_options(project: "ProjectView") -> dict[str, list[Option]]:
    out: dict[str, list[Option]] = {}
    for src in project.mentioning("add_argument"):
        for call in src.facts.calls:
            if call.attr != "add_argument" or not call.node.args:
                continue
            flags = tuple(v for v in (literal_value(a.value) for a in call.node.args if a.keyword is None)
                          if isinstance(v, str))
            if not flags:
                continue
            dest_arg = call.keyword("dest")
            dest = literal_value(dest_arg.value) if dest_arg else None
            if not isinstance(dest, str):
                longs = [f for f in flags if f.startswith("--")] or list(flags)
                dest = longs[0].lstrip("-").replace("-", "_")
            action = call.keyword("action")
            action_v = literal_value(action.value) if action else None
            default_arg = call.keyword("default")
            if default_arg is not None:
                default = literal_value(default_arg.value)
            elif action_v == "store_true":
                default = False
            elif action_v == "store_false":
                default = True
            else:
                default = None
            typ = call.keyword("type")
            kind = dotted_name(typ.value) if typ else None
            if action_v in ("store_true", "store_false"):
                kind = "bool"
            nargs = call.keyword("nargs")
            if nargs is not None:
                kind = "list"
            out.setdefault(dest, []).append(Option(flags, dest, default, kind, src, call.node))
    return out


def _dataclass_fields(project: "ProjectView") -> dict[str, list[tuple[Any, PythonSource, cst.CSTNode]]]:
    """Class-level `name: int = 4` / `field(default=4)` defaults (HfArgumentParser dataclasses)."""
    out: dict[str, list[tuple[Any, PythonSource, cst.CSTNode]]] = {}
    for src in project.mentioning("dataclass"):
        for info in src.facts.classes.values():
            if not any(isinstance(d.decorator, (cst.Name, cst.Attribute, cst.Call)) and
                       "dataclass" in (dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call)
                                                   else d.decorator) or "")
                       for d in info.node.decorators):
                continue
            for stmt in info.node.body.body:
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for small in stmt.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
                        value = literal_value(small.value)
                        if value is UNKNOWN and isinstance(small.value, cst.Call) and \
                                (dotted_name(small.value.func) or "").endswith("field"):
                            for arg in small.value.args:
                                if arg.keyword is not None and arg.keyword.value == "default":
                                    value = literal_value(arg.value)
                        out.setdefault(small.target.value, []).append((value, src, small))
    return out


def _convert(text: str, kind: Optional[str]) -> Any:
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        return UNKNOWN
    if kind in ("bool",):
        return UNKNOWN
    if kind is None:
        for conv in (int, float):
            try:
                return conv(text)
            except ValueError:
                pass
        if text in ("True", "False"):
            return text == "True"
    return text


def _passed_values(launch, flags: tuple[str, ...], kind: Optional[str], default: Any) -> set:
    """The values one launcher line passes its script for an option (`--x 3`, `--x=3`; a bare bool flag flips
    its default), empty where it passes none."""
    values = set()
    args = launch.script_args
    for i, word in enumerate(args):
        key, eq, val = word.partition("=")
        if key in flags:
            if kind == "bool" and not eq:
                values.add(not default if isinstance(default, bool) else UNKNOWN)
                continue
            values.add(_convert(val if eq else (args[i + 1] if i + 1 < len(args) else ""), kind))
    return values


def launch_option_value(project: "ProjectView", attr: str, sh, launch) -> Value:
    """`args.<attr>` in the process one launcher line starts: the value that line passes its script, else the
    argparse default (one option of that dest in the run, as `option_value`); UNKNOWN otherwise. Options of
    that dest that differ in their default only (scripts of the run declaring `--world_size` each with its own
    default) still read the value a line passes: the default matters only where it passes none."""
    options = memo(project, "argparse", lambda: _argparse_options(project)).get(attr)
    if not options or len({(o.flags, o.kind) for o in options}) != 1:
        return UNKNOWN_VALUE
    opt = options[0]
    if opt.kind == "list":
        return UNKNOWN_VALUE
    passed = _passed_values(launch, opt.flags, opt.kind, opt.default if len(options) == 1 else UNKNOWN)
    if passed:
        value = passed.pop() if len(passed) == 1 else UNKNOWN
        return Value(value, f"{opt.flags[-1]} of {sh.path}:{launch.line}") if value is not UNKNOWN else UNKNOWN_VALUE
    if len({(o.flags, o.default) for o in options}) != 1 or opt.default is UNKNOWN \
            or _spreads_words(launch.script_args):
        return UNKNOWN_VALUE
    return Value(opt.default, f"default of {opt.flags[-1]} ({opt.source.path}:{_line(opt.source, opt.node)}), "
                              f"not passed by {sh.path}:{launch.line}")


def _spreads_words(args: list[str]) -> bool:
    """Does a launcher line hand its script an expansion the reader could not resolve that may hold options of
    its own (`"$@"`, `$EXTRA_ARGS`: a word of its own, not the value after an option)?"""
    return any(word.startswith("$") and not (i and args[i - 1].startswith("-") and "=" not in args[i - 1])
               for i, word in enumerate(args))


def _launch_value(project: "ProjectView", script: PythonSource, flags: tuple[str, ...], kind: Optional[str],
                  default: Any = None) -> Optional[Value]:
    """The value a launcher line of this script passes for an option (None: not passed / not launched)."""
    values = set()
    where = ""
    for sh, launch in project._launches_for(script):
        passed = _passed_values(launch, flags, kind, default)
        if passed:
            values |= passed
            where = f"{sh.path}:{launch.line}"
    if not values:
        return None
    if len(values) == 1:
        value = values.pop()
        return Value(value, where) if value is not UNKNOWN else UNKNOWN_VALUE
    return UNKNOWN_VALUE


def option_value(project: "ProjectView", attr: str, script: Optional[PythonSource]) -> Value:
    """`args.<attr>`: the launcher's value for the script if it passes one, else the argparse default."""
    options = memo(project, "argparse", lambda: _argparse_options(project)).get(attr)
    if options:
        opts = {(o.flags, o.default) for o in options}
        if len(opts) != 1:
            return UNKNOWN_VALUE
        opt = options[0]
        scripts = [script] if script is not None else []
        scripts += [s for s in project.python if s is not script and any(o.source is s for o in options)]
        for s in scripts:
            hit = _launch_value(project, s, opt.flags, opt.kind, opt.default)
            if hit is not None:
                return hit
        if opt.kind == "list" or opt.default is UNKNOWN:
            return UNKNOWN_VALUE
        return Value(opt.default, f"default of {opt.flags[-1]} ({opt.source.path}:{_line(opt.source, opt.node)})")
    fields = memo(project, "dataclass-fields", lambda: _dataclass_fields(project)).get(attr)
    if fields and len({repr(f[0]) for f in fields}) == 1 and fields[0][0] is not UNKNOWN:
        flag = "--" + attr
        hit = None
        for s in ([script] if script else []) + [f[1] for f in fields]:
            hit = _launch_value(project, s, (flag,), None)
            if hit is not None:
                return hit
        value, src, node = fields[0]
        return Value(value, f"default of field {attr} ({src.path}:{_line(src, node)})")
    return UNKNOWN_VALUE


def _assignments(body: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    found.append(node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name and node.value is not None:
                found.append(node.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is body

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

    cst_visit(body, Finder())
    return found


def module_assignments(src: PythonSource, name: str, annotated: bool = True) -> list[cst.BaseExpression]:
    """The values assigned to the module-level name `name`, in order (`x = v`; `x: T = v` too unless not
    `annotated`)."""
    out = []
    for stmt in src.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                         for t in small.targets):
                    out.append(small.value)
                elif annotated and isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and \
                        small.target.value == name and small.value is not None:
                    out.append(small.value)
    return out


def _module_constant(src: PythonSource, name: str) -> Value:
    values = [literal_value(v) for v in module_assignments(src, name)]
    if len(values) == 1 and values[0] is not UNKNOWN:
        return Value(values[0], f"constant {name}")
    return UNKNOWN_VALUE


def evaluate(project: "ProjectView", src: PythonSource, expr: Optional[cst.BaseExpression],
             scope: Optional[FunctionInfo] = None, script: Optional[PythonSource] = None, depth: int = 0) -> Value:
    if expr is None or depth > 3:
        return UNKNOWN_VALUE
    value = literal_value(expr)
    if value is not UNKNOWN and not isinstance(value, (list, dict, tuple)):
        return Value(value, "literal")
    if isinstance(expr, cst.Name):
        if scope is not None:
            local = _assignments(scope.node, expr.value)
            if len(local) == 1:
                return evaluate(project, src, local[0], scope, script, depth + 1)
            if local or expr.value in scope.params:
                return UNKNOWN_VALUE
        return _module_constant(src, expr.value)
    if isinstance(expr, cst.Attribute):
        base = dotted_name(expr.value) or ""
        held = options_holder(project, src, base) if isinstance(expr.value, cst.Name) else None
        if held is None:
            # not followed (`self.args`, a name this file never binds, a parameter no checked call fills): the
            # holder's conventional names stand in for the binding that could not be read
            held = base.split(".")[-1] in ("args", "opt", "opts", "cmd_args", "flags", "hparams", "model_args",
                                           "training_args", "data_args", "moe_args", "config_args",
                                           "arguments") or base.endswith("args")
        if held:
            return option_value(project, expr.attr.value, script or src)
    return UNKNOWN_VALUE


def _str_set(node: Optional[cst.BaseExpression]) -> Optional[frozenset]:
    """The strings of a literal list/tuple/set display of strings only (no starred item), else None."""
    if not isinstance(node, (cst.List, cst.Tuple, cst.Set)) or \
            not all(isinstance(el, cst.Element) for el in node.elements):
        return None
    values = [literal_value(el.value) for el in node.elements]
    return frozenset(values) if values and all(isinstance(v, str) for v in values) else None


def _declared_choices(option: Option) -> Optional[frozenset]:
    """The values an argparse option can hold: its literal `choices` and its literal default (argparse checks
    the command line against `choices`, never the default); None when it declares no literal choices or its
    default is no literal string (None: the option absent)."""
    call = option.node
    if not isinstance(call, cst.Call):
        return None
    given = next((a for a in call.args if a.keyword is not None and a.keyword.value == "choices"), None)
    choices = _str_set(given.value) if given is not None else None
    if choices is None or option.kind == "list":
        return None
    if option.default is None or isinstance(option.default, str):
        return choices | ({option.default} if isinstance(option.default, str) else frozenset())
    return None


def _field_choices(stmt: cst.CSTNode) -> Optional[frozenset]:
    """The values a dataclass field read by `HfArgumentParser` can hold: `Literal["a", "b"]` (or `Optional[...]`
    of it) as its annotation, or `field(metadata={"choices": [...]})`, with a literal string (or None) default;
    None otherwise."""
    if not isinstance(stmt, cst.AnnAssign):
        return None
    choices = None
    ann = stmt.annotation.annotation
    if isinstance(ann, cst.Subscript) and (dotted_name(ann.value) or "").split(".")[-1] == "Optional" and \
            len(ann.slice) == 1 and isinstance(ann.slice[0].slice, cst.Index):
        ann = ann.slice[0].slice.value
    if isinstance(ann, cst.Subscript) and (dotted_name(ann.value) or "").split(".")[-1] == "Literal":
        values = [literal_value(el.slice.value) if isinstance(el.slice, cst.Index) else None for el in ann.slice]
        if values and all(isinstance(v, str) for v in values):
            choices = frozenset(values)
    default: Any = UNKNOWN
    value = stmt.value
    if isinstance(value, cst.Call) and (dotted_name(value.func) or "").split(".")[-1] == "field":
        for arg in value.args:
            if arg.keyword is None:
                return None
            if arg.keyword.value == "default":
                default = literal_value(arg.value)
            elif arg.keyword.value == "metadata":
                if not isinstance(arg.value, cst.Dict):
                    return None
                for el in arg.value.elements:
                    if not isinstance(el, cst.DictElement):
                        return None
                    if literal_value(el.key) == "choices":
                        choices = _str_set(el.value)
                        if choices is None:
                            return None
            elif arg.keyword.value == "default_factory":
                return None
    elif value is not None:
        default = literal_value(value)
    if choices is None:
        return None
    if default is UNKNOWN and value is not None and not isinstance(value, cst.Call):
        return None
    if default is UNKNOWN or default is None:
        return choices
    return choices | {default} if isinstance(default, str) else None


def _attribute_stored(project: "ProjectView", attr: str) -> bool:
    """Can something other than the command line put a value into an attribute spelled `attr`: an assignment
    anywhere in the project (`args.metric = ...`, `setattr(args, "metric", ...)`), a call passing a keyword of
    that name (`Namespace(metric=...)`, `Options(metric=...)`, `set_defaults(metric=...)`, `replace(...)`), or a
    store at a key that is no literal (`setattr(args, key, value)`, `vars(args).update(d)`, `args.__dict__[k] =
    v`, `Namespace(**d)`): then what it holds is not only what the option's declaration allows."""
    def opaque_store(src) -> bool:
        for call in src.facts.calls:
            args = call.node.args
            if call.attr == "setattr" and len(args) > 1 and not isinstance(literal_value(args[1].value), str):
                return True
            if call.attr == "update" and isinstance(call.node.func, cst.Attribute) and (
                    isinstance(call.node.func.value, cst.Attribute) and call.node.func.value.attr.value == "__dict__"
                    or isinstance(call.node.func.value, cst.Call)
                    and dotted_name(call.node.func.value.func) == "vars"):
                return True
            if call.attr in ("Namespace", "SimpleNamespace", "set_defaults", "replace") and \
                    any(a.star == "**" for a in args):
                return True
        return any(isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Attribute)
                   and t.target.value.attr.value == "__dict__" for node in iter_assigns(src.module)
                   for t in node.targets)
    if memo(project, "opaque-attribute-stores", lambda: any(
            opaque_store(src) for src in project.mentioning("setattr", "__dict__", "vars(", "Namespace",
                                                            "set_defaults", "replace("))):
        return True
    for src in project.mentioning(attr):
        for node in iter_assigns(src.module):
            if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == attr for t in node.targets):
                return True
        aug, ann = nodes_of(src.module, (cst.AugAssign, cst.AnnAssign))
        if any(isinstance(stmt.target, cst.Attribute) and stmt.target.attr.value == attr for stmt in aug + ann):
            return True
        for call in src.facts.calls:
            if call.attr == "setattr" and len(call.node.args) > 1 and \
                    literal_value(call.node.args[1].value) == attr:
                return True
            if call.attr != "add_argument" and call.keyword(attr) is not None:
                return True
    return False


def _constructed_directly(project: "ProjectView", fields: list) -> bool:
    """Is a dataclass holding one of these fields called with positional or spread arguments anywhere in the
    project (`Options("eval_loss")`, `Options(**d)`): `HfArgumentParser` checks the declared choices, a direct
    construction does not (keywords of the field's name count as stores: `_attribute_stored`)."""
    names = set()
    for _, src, stmt in fields:
        for info in src.facts.classes.values():
            body = info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ()
            if any(isinstance(line, cst.SimpleStatementLine) and stmt in line.body for line in body):
                names.add(info.node.name.value)
    for name in names:
        for src in project.mentioning(name):
            for call in src.facts.calls:
                if call.attr == name and any(a.keyword is None for a in call.node.args):
                    return True
    return False


def option_domain(project: "ProjectView", attr: str) -> Optional[frozenset]:
    """The strings `<args>.<attr>` can hold where `attr` is the destination of the command line's options
    (argparse `add_argument(..., choices=[...])`, an `HfArgumentParser` dataclass field with `Literal[...]` or
    `metadata={"choices": [...]}`), their defaults included: the union over every option and field of that
    destination in the project. None where one of them declares no literal choices, none exists, or the
    attribute is also assigned anywhere in the project (`_attribute_stored`). Memoised per view."""
    def build() -> Optional[frozenset]:
        options = memo(project, "argparse", lambda: _argparse_options(project)).get(attr, [])
        fields = memo(project, "dataclass-fields", lambda: _dataclass_fields(project)).get(attr, [])
        if not options and not fields:
            return None
        out: frozenset = frozenset()
        for option in options:
            got = _declared_choices(option)
            if got is None:
                return None
            out |= got
        for _, _, stmt in fields:
            got = _field_choices(stmt)
            if got is None:
                return None
            out |= got
        if fields and _constructed_directly(project, fields):
            return None
        return None if _attribute_stored(project, attr) else out
    return memo(project, ("option-domain", attr), build)


# the parsers' calls that return the parsed options: argparse's namespace (`parse_known_args`: (namespace,
# rest)), HfArgumentParser's dataclasses
_PARSE_CALLS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args",
                          "parse_args_into_dataclasses", "parse_dict", "parse_json_file", "parse_yaml_file"})
_HOLDER_DEPTH = 2


def options_holder(project: "ProjectView", src: PythonSource, name: str, depth: int = 0) -> Optional[bool]:
    """Is the bare name `name`, wherever this file binds it, the parsed command-line options -- decided from its
    bindings, not its spelling: True when a binding is a parser's result (`parser.parse_args()`, an element of
    `HfArgumentParser(...).parse_args_into_dataclasses()`), a call of a checked function returning one
    (`args = add_argument()`), or a parameter that a checked call fills with such a name (`evaluate(model, rows,
    args)`, `model.initialize_moe_modules(model_args=model_args)`: followed `_HOLDER_DEPTH` callers deep); False
    when every binding is followed and none is; None when the file binds it nowhere, or only as parameters no
    checked call was found to fill. Memoised per (file, name)."""
    table = memo(project, "options-holders", dict)
    key = (id(src), name)
    if key in table:
        return table[key] if table[key] is not _IN_PROGRESS or depth else None
    table[key] = _IN_PROGRESS       # the same name handed back to itself (`args` passed as `args`): no evidence
    table[key] = _options_holder(project, src, name, depth)
    return table[key]


_IN_PROGRESS = object()


def _options_holder(project: "ProjectView", src: PythonSource, name: str, depth: int) -> Optional[bool]:
    if src.facts is None or name not in src.text:
        return None
    values: list[cst.BaseExpression] = []
    elementwise: list[cst.BaseExpression] = []

    class Bindings(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    values.append(node.value)
                elif isinstance(t.target, (cst.Tuple, cst.List)) and any(
                        isinstance(el.value, cst.Name) and el.value.value == name for el in t.target.elements):
                    elementwise.append(node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name and node.value is not None:
                values.append(node.value)

    cst_visit(src.module, Bindings())
    verdicts: list[Optional[bool]] = [_parsed(project, src, v) for v in values + elementwise]
    for info in src.facts.functions.values():
        if name in info.params:
            verdicts.append(_handed_options(project, src, info, name, depth))
    if any(v is True for v in verdicts):
        return True
    if not verdicts or any(v is None for v in verdicts):
        return None
    return False


def _parsed(project: "ProjectView", src: PythonSource, value: cst.BaseExpression) -> Optional[bool]:
    """A value is the parsed options: a parser's call (or an element of its result), or a call of a checked
    function every `return` of which is one."""
    if isinstance(value, cst.Subscript):
        value = value.value
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and value.func.attr.value in _PARSE_CALLS:
        return True
    callee = src.facts.resolve_expr(value.func)
    if project.class_for_callee(src, callee) is not None:
        return False                # an object of a checked class: what its constructor stores, not the options
    found = project.function_for_callee(src, callee)
    info = found[0].facts.functions.get(found[1]) if found is not None and found[0].facts is not None else None
    if info is None:
        return None
    returns: list[cst.BaseExpression] = []

    class Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is info.node

        def visit_Return(self, node: cst.Return) -> None:
            if node.value is not None:
                returns.append(node.value)

    cst_visit(info.node, Returns())
    verdicts: list[Optional[bool]] = []
    for r in returns:
        if isinstance(r, cst.Call) and isinstance(r.func, cst.Attribute) and r.func.attr.value in _PARSE_CALLS:
            verdicts.append(True)
        elif isinstance(r, cst.Name):
            # `args = parser.parse_args(); ...; return args`: the name's bindings in the callee's file decide
            held = options_holder(project, found[0], r.value, _HOLDER_DEPTH - 1)
            verdicts.append(None if held is _IN_PROGRESS else held)
        else:
            verdicts.append(False)
    if not verdicts or any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


def _handed_options(project: "ProjectView", src: PythonSource, info: FunctionInfo, param: str,
                    depth: int) -> Optional[bool]:
    """A parameter filled, at some checked call of its function, with a name the caller's file binds to the
    parsed options. None when no call is found or none passes a bare name there."""
    if depth >= _HOLDER_DEPTH or info.name.startswith("__"):
        return None
    at = info.params.index(param)
    if info.class_name is not None:
        at -= 1                     # `obj.method(x)`: self is the receiver
    verdicts: list[Optional[bool]] = []
    for other in project.mentioning(info.name):
        # decided on the outline first: a file that calls no function of that name is not parsed for it
        if other.outline is None or not any(callee and callee.rsplit(".", 1)[-1] == info.name
                                            for callee, _ in other.outline.calls) or other.facts is None:
            continue
        for call in other.facts.calls:
            if call.attr != info.name:
                continue
            if info.class_name is None:
                hit = project.function_for_callee(other, call.callee)
                if hit is None or hit[0] is not src or hit[1] != info.qualname:
                    continue
            elif not isinstance(call.node.func, cst.Attribute):
                continue
            kw = call.keyword(param)
            positional = [a for a in call.node.args if a.keyword is None and not a.star]
            arg = kw.value if kw is not None else positional[at].value if 0 <= at < len(positional) else None
            if isinstance(arg, cst.Name):
                held = options_holder(project, other, arg.value, depth + 1)
                # the name being decided, handed on as itself: its value is that of its other bindings
                verdicts.append(False if held is _IN_PROGRESS else held)
    if any(v is True for v in verdicts):
        return True
    if not verdicts or any(v is None for v in verdicts):
        return None
    return False
