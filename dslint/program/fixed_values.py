"""Values a run fixes before any rank differs (issue 30: conditions that a launch fixes).

Two kinds, both decided by data flow, never by what a name spells:

- the namespace argparse parses from the process's command line (`parsed_setting`): `args.use_deepspeed` where
  `args` is bound only to `parser.parse_args()`, to the return of a checked function that gives one, or is a
  parameter every caller hands one. Its value is one launcher line's (`hyperparams.launch_option_value`), so a
  test on it is judged per launch unit (`collective_hazards.HazardWalk._launch_truth`).
- a field of a library config object that the program never sets (`library_setting`): `accelerator.
  project_configuration.automatic_checkpoint_naming` where every `Accelerator(...)` reaching `accelerator` is
  handed a `ProjectConfiguration(...)` (or none) that leaves the field at the library's default. The
  constructors' keywords and defaults are a table (`LIBRARY_CONFIGS`, from the library's source); a test on such
  a field is the same in every process of every launch (`reaching_ranks.FlowWalk._never_holds`).

`reaching_values` is the shared data flow: the expressions a name of a function can hold (its own bindings, else
the module's; a parameter's arguments at every call found), or None where one escapes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import libcst as cst

from dslint.program.facts import FunctionInfo
from dslint.sources.cstwalk import visit as cst_visit
from dslint.program.hyperparams import _assignments, module_assignments
from dslint.program.statement_walks import argument_for, iter_returns
from dslint.sources.literals import UNKNOWN, literal_value

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.sources import PythonSource

# (file, call node, calling function or None) of every call resolving to a function: `ProjectTaint.calls_of`
CallsOf = Callable[["PythonSource", FunctionInfo], list]

_DEPTH = 4


def reaching_values(src: "PythonSource", scope: Optional[FunctionInfo], name: str, calls_of: CallsOf,
                    depth: int = 0) -> Optional[list[tuple["PythonSource", Optional[FunctionInfo], Any]]]:
    """(file, function, expression) for every value `name` can hold in `scope` (None: module level): its
    bindings there (a name without any in a function: the module's), or for a parameter bound nowhere in the
    function, the argument every call found hands it (followed through the caller's names). None where some
    value is out of sight: a parameter with no call found, a spread or a default taking its place, a name
    assigned by no plain `=`, a chain deeper than a few calls."""
    if depth > _DEPTH:
        return None
    values = _assignments(scope.node, name) if scope is not None else module_assignments(src, name)
    if scope is not None and name in scope.params:
        callers = calls_of(src, scope)
        if values or not callers:
            return None
        handed = []
        for other, call, caller in callers:
            found, arg = argument_for(call, scope, name)
            if not found:
                return None
            handed.append((other, caller, arg))
        return _followed(handed, calls_of, depth)
    if not values and scope is not None:
        return reaching_values(src, None, name, calls_of, depth + 1)
    if any(isinstance(v, cst.Name) and v.value == name for v in values):
        return None
    return _followed([(src, scope, v) for v in values], calls_of, depth) if values else None


def _followed(items: list, calls_of: CallsOf, depth: int) -> Optional[list]:
    """`items` -- (file, function, expression) -- with each bare name replaced by the values it can hold there
    (`reaching_values`); None where one is out of sight (an expression None: a default or bare `return`)."""
    out = []
    for where, at, value in items:
        if value is None:
            return None
        if isinstance(value, cst.Name):
            more = reaching_values(where, at, value.value, calls_of, depth + 1)
            if more is None:
                return None
            out += more
        else:
            out.append((where, at, value))
    return out


def _returned_values(project: "ProjectView", src: "PythonSource", call: cst.Call, calls_of: CallsOf,
                     depth: int) -> Optional[list[tuple["PythonSource", Optional[FunctionInfo], Any]]]:
    """What a call of a checked function returns, as `reaching_values` gives it (None: not such a call, or a
    `return` out of sight)."""
    hit = project.function_for_callee(src, src.facts.resolve_expr(call.func))
    info = hit[0].facts.functions.get(hit[1]) if hit is not None else None
    if info is None or depth > _DEPTH:
        return None
    return _followed([(hit[0], info, ret.value) for ret in iter_returns(info.node.body)], calls_of, depth) or None


def truth_of(test: cst.BaseExpression, leaf: Callable[[cst.BaseExpression], Optional[bool]]) -> Optional[bool]:
    """The truth of a test through `not`/`and`/`or` whose operands `leaf` judges (None: not fixed); an operand
    that settles its operation alone (a true one for `or`, a false one for `and`) settles it whatever the other."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = truth_of(test.expression, leaf)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = truth_of(test.left, leaf), truth_of(test.right, leaf)
        settles = isinstance(test.operator, cst.Or)
        if left is settles or right is settles:
            return settles
        return None if left is None or right is None else not settles
    return leaf(test)


def known_truth(value: Any) -> Optional[bool]:
    """bool(value) for a known value, None for UNKNOWN (or one whose truth cannot be taken)."""
    if value is UNKNOWN:
        return None
    try:
        return bool(value)
    except Exception:
        return None


# --- the argparse namespace ----------------------------------------------------------------------------------

def parsed_setting(project: "ProjectView", src: "PythonSource", scope: Optional[FunctionInfo],
                   expr: cst.BaseExpression, calls_of: CallsOf) -> Optional[str]:
    """The option `expr` reads when it is an attribute of the namespace argparse parsed from the command line
    (`args.x` → "x"), whatever the names (see the module's docstring), and no statement of the run assigns an
    attribute of that name. None otherwise."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)) or \
            _assigned_anywhere(project, expr.attr.value):
        return None     # the program may change what the command line gave (`args.x = ...`)
    values = reaching_values(src, scope, expr.value.value, calls_of)
    if not values or not all(_parsed_namespace(project, *v, calls_of, 0) for v in values):
        return None
    return expr.attr.value


def _parses_command_line(call: cst.BaseExpression, method: str) -> bool:
    """`parser.<method>()` reading the process's own command line (no argument list handed to it)."""
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == method \
        and not any(a.keyword is None or a.keyword.value == "args" for a in call.args)


def _parsed_namespace(project: "ProjectView", src: "PythonSource", scope: Optional[FunctionInfo],
                      value: cst.BaseExpression, calls_of: CallsOf, depth: int) -> bool:
    """Is `value` the namespace argparse returns: `parser.parse_args()`, `parser.parse_known_args()[0]`, or a
    call of a checked function whose every `return` gives one?"""
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and \
            isinstance(value.slice[0].slice, cst.Index) and literal_value(value.slice[0].slice.value) == 0:
        return _parses_command_line(value.value, "parse_known_args")
    if not isinstance(value, cst.Call):
        return False
    if _parses_command_line(value, "parse_args"):
        return True
    returned = _returned_values(project, src, value, calls_of, depth + 1)
    return bool(returned) and all(_parsed_namespace(project, *v, calls_of, depth + 1) for v in returned)


# --- library config objects ----------------------------------------------------------------------------------

# (library class, attribute of its instance) → (constructor keyword handing the config object, config class,
# the config class's field defaults). accelerate 1.16: `Accelerator.__init__(..., project_config=None)` stores
# `project_config` or `ProjectConfiguration(project_dir=...)` as `self.project_configuration`
# (accelerator.py); `ProjectConfiguration` (utils/dataclasses.py) is a dataclass with these defaults.
LIBRARY_CONFIGS = {
    ("accelerate.Accelerator", "project_configuration"): (
        "project_config", "accelerate.ProjectConfiguration",
        {"automatic_checkpoint_naming": False, "total_limit": None, "iteration": 0, "save_on_each_node": False}),
}


def _library_class(src: "PythonSource", func: cst.BaseExpression) -> Optional[str]:
    """`accelerate.Accelerator` for a call of accelerate's `Accelerator` however it was imported
    (`accelerate.accelerator.Accelerator`, `from accelerate import Accelerator as A`)."""
    resolved = src.facts.resolve_expr(func) or ""
    top, _, rest = resolved.partition(".")
    return f"{top}.{rest.rsplit('.', 1)[-1]}" if rest else None


def library_field_shape(expr: cst.BaseExpression) -> bool:
    """Is `expr` spelled `obj.<config>.<field>` with a config holder and field `LIBRARY_CONFIGS` knows? (A
    prefilter: decided on the expression alone, before anything of the program is asked.)"""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Attribute)
            and isinstance(expr.value.value, cst.Name)):
        return False
    holder, field = expr.value.attr.value, expr.attr.value
    return any(holder == attr and field in defaults for (_, attr), (_, _, defaults) in LIBRARY_CONFIGS.items())


def library_setting(project: "ProjectView", src: "PythonSource", scope: Optional[FunctionInfo],
                    expr: cst.BaseExpression, calls_of: CallsOf) -> Any:
    """The value of `obj.<config>.<field>` (`accelerator.project_configuration.automatic_checkpoint_naming`)
    when every object `obj` can be is built in the checked files by a constructor `LIBRARY_CONFIGS` knows,
    each handed no config object or one built there whose call leaves the field at its default or gives it a
    literal, all the same value, and no statement of the program assigns the field. UNKNOWN otherwise."""
    if not library_field_shape(expr):
        return UNKNOWN      # no library object stores a config of this field there: nothing to follow
    holder, field = expr.value.attr.value, expr.attr.value
    owners = reaching_values(src, scope, expr.value.value.value, calls_of)
    if not owners or _assigned_anywhere(project, field):
        return UNKNOWN
    found: set = set()
    for where, at, value in owners:
        if not isinstance(value, cst.Call):
            return UNKNOWN
        known = LIBRARY_CONFIGS.get((_library_class(where, value.func), holder))
        if known is None:
            return UNKNOWN
        keyword, config_class, defaults = known
        if field not in defaults:
            return UNKNOWN
        handed = next((a for a in value.args if a.keyword is not None and a.keyword.value == keyword), None)
        if any(a.star for a in value.args):
            return UNKNOWN
        if handed is None or literal_value(handed.value) is None:
            found.add(defaults[field])
            continue
        configs = reaching_values(where, at, handed.value.value, calls_of) \
            if isinstance(handed.value, cst.Name) else [(where, at, handed.value)]
        for csrc, _, config in configs or [(None, None, None)]:
            if not isinstance(config, cst.Call) or _library_class(csrc, config.func) != config_class \
                    or any(a.star for a in config.args):
                return UNKNOWN
            given = next((a for a in config.args if a.keyword is not None and a.keyword.value == field), None)
            value_of = defaults[field] if given is None else literal_value(given.value)
            if value_of is UNKNOWN:
                return UNKNOWN
            found.add(value_of)
    return found.pop() if len(found) == 1 else UNKNOWN


def _assigned_anywhere(project: "ProjectView", field: str) -> bool:
    """Does a statement of the run assign an attribute named `field` (`cfg.automatic_checkpoint_naming = True`),
    or `setattr` one by name?"""
    memo = project.__dict__.setdefault("_fixed_values_assigned", {})
    if field not in memo:
        memo[field] = any(field in _attribute_targets(f.module) or
                          "setattr(" in f.text and (f'"{field}"' in f.text or f"'{field}'" in f.text)
                          for f in project.mentioning(field))
    return memo[field]


def _attribute_targets(module: cst.Module):
    """The attribute names assigned by `x.name = ...`/`x.name += ...`/`x.name: T = ...` anywhere in a module."""
    out: list[str] = []

    class Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            for target in _flatten(node.target):
                if isinstance(target, cst.Attribute):
                    out.append(target.attr.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Attribute):
                out.append(node.target.attr.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Attribute):
                out.append(node.target.attr.value)

    cst_visit(module, Targets())
    return out


def _flatten(target: cst.BaseExpression) -> list:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [t for el in target.elements for t in _flatten(el.value)]
    return [target]
