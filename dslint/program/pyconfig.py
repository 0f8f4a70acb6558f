"""DeepSpeed configs built in Python: a small abstract evaluator from a config expression to a `PartialDict`.

`deepspeed.initialize(config=cfg)` where `cfg` is a dict literal, `dict(...)`, a name bound to one and then
mutated (`cfg["zero_optimization"] = {...}`, `cfg.update({...})`, `cfg.setdefault("bf16", {...})`,
`cfg["zero_optimization"]["stage"] = 3`), or the return of a helper function of the checked files
(`def get_train_ds_config(...): return {...}`). The result keeps what is known and says what is not:

- a value that cannot be read (a parameter, `args.x`, a call) is `UNKNOWN`;
- `maybe`: keys set on some paths only (under an `if`, in a loop) -- their value is real on that path, but
  neither their presence nor their value may be relied on by a cross-key check;
- `open`: keys may exist that are not shown (`{**other}`, `cfg[k] = v`, a dict built from an unknown value);
- `escaped`: the dict was handed to code that may change it (`patch(cfg)`): every value is uncertain.

`reading_known(fn)` runs a check over a partial dict and tells whether it read anything uncertain (a
finding that depends on an unknown is never reported). Each key remembers where it was written
(`keys_at`: source and libcst node), so findings sit on the Python line of the offending key.

Flow: statements of the function are taken in order up to the call that receives the config; a branch of
an `if` that does not lead to the call is skipped; other branches and loop bodies set `maybe` keys; a second
binding of the name on another branch makes it unknown. No file is parsed here that the caller did not
choose (callers filter with the outlines first).
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from dslint.program.statement_walks import iter_returns
from dslint.sources.literals import UNKNOWN, literal_value

MAX_DEPTH = 6
# callees that read a config without changing it
_READERS = frozenset({"print", "len", "str", "repr", "isinstance", "json.dump", "json.dumps", "pprint",
                      "pprint.pprint", "yaml.dump", "yaml.safe_dump"})
_READ_METHODS = frozenset({"get", "keys", "items", "values", "copy", "__contains__", "info", "debug", "warning",
                           "print", "log"})
_COPIES = frozenset({"copy.deepcopy", "deepcopy", "copy.copy"})
_CONFIG_TAKERS = ("initialize", "init_inference", "TrainingArguments", "HfDeepSpeedConfig", "DeepSpeedPlugin",
                  "HfTrainerDeepSpeedConfig")

_TRACE: list = []


_ARITHMETIC = {cst.Multiply: lambda a, b: a * b, cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b,
               cst.Divide: lambda a, b: a / b, cst.FloorDivide: lambda a, b: a // b,
               cst.Power: lambda a, b: a ** b if abs(b) <= 64 else UNKNOWN}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class PartialDict(dict):
    """A dict whose values are literals, nested PartialDicts or UNKNOWN; see the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.open = False
        self.escaped = False
        self.based_unknown = False          # built on an unknown value (`deepcopy(plugin.config)`, a parameter)
        self.maybe: set = set()
        self.keys_at: dict[Any, tuple[Any, cst.CSTNode]] = {}

    # reads record what was uncertain (see `reading_known`)
    def _note(self, key: Any, present: bool) -> None:
        if _TRACE:
            if self.escaped or key in self.maybe or (not present and self.open):
                _TRACE[-1][0] = True
            elif present and dict.__getitem__(self, key) is UNKNOWN:
                _TRACE[-1][0] = True

    def __getitem__(self, key: Any) -> Any:
        self._note(key, dict.__contains__(self, key))
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        present = dict.__contains__(self, key)
        self._note(key, present)
        return present

    def get(self, key: Any, default: Any = None) -> Any:
        present = dict.__contains__(self, key)
        self._note(key, present)
        return dict.__getitem__(self, key) if present else default

    # --- building -------------------------------------------------------------------------------
    def put(self, key: Any, value: Any, at: Optional[tuple], maybe: bool) -> None:
        if maybe:
            self.maybe.add(key)
        else:
            self.maybe.discard(key)
        dict.__setitem__(self, key, value)
        if at is not None:
            self.keys_at[key] = at

    def merge(self, other: Any, maybe: bool) -> None:
        """`self.update(other)` / `{**self, **other}`."""
        if not isinstance(other, PartialDict):
            self.open = True                     # any key may have been added or replaced
            self.maybe.update(dict.keys(self))
            return
        for key, value in dict.items(other):
            self.put(key, value, other.keys_at.get(key), maybe or key in other.maybe)
        self.open = self.open or other.open
        self.escaped = self.escaped or other.escaped

    def unknown_key(self) -> None:
        """`cfg[k] = v` with an unknown k: any key may have been replaced."""
        self.open = True
        self.escaped = True

    def clone(self) -> "PartialDict":
        out = PartialDict()
        for key, value in dict.items(self):
            dict.__setitem__(out, key, value.clone() if isinstance(value, PartialDict) else value)
        out.open, out.escaped, out.based_unknown = self.open, self.escaped, self.based_unknown
        out.maybe, out.keys_at = set(self.maybe), dict(self.keys_at)
        return out

    # --- reading --------------------------------------------------------------------------------
    def location(self, path: tuple) -> Optional[tuple]:
        """(source, node) of the deepest key of `path` written in code, or None."""
        node: Any = self
        found = None
        for key in path:
            if not isinstance(node, PartialDict) or not dict.__contains__(node, key):
                break
            found = node.keys_at.get(key, found)
            node = dict.__getitem__(node, key)
        return found

    def known_below(self, path: tuple) -> bool:
        """Is everything at and under `path` known (no unknown value, no open, maybe or escaped dict)?"""
        node: Any = self
        for key in path:
            if not isinstance(node, PartialDict):
                return not _uncertain(node)
            if node.escaped or key in node.maybe or not dict.__contains__(node, key):
                return not node.escaped and key not in node.maybe and not node.open
            node = dict.__getitem__(node, key)
        return not _uncertain(node)

    def plain(self) -> dict:
        """A plain dict copy (UNKNOWN values kept) for code that must not record reads."""
        return {k: v.plain() if isinstance(v, PartialDict) else v for k, v in dict.items(self)}


def _uncertain(value: Any) -> bool:
    if value is UNKNOWN:
        return True
    if isinstance(value, PartialDict):
        return value.open or value.escaped or bool(value.maybe) or any(
            _uncertain(v) for v in dict.values(value))
    if isinstance(value, (list, tuple)):
        return any(_uncertain(v) for v in value)
    return False


def reading_known(fn, *args: Any, **kw: Any) -> tuple[Any, bool]:
    """(fn(*args), whether every read of a PartialDict it made was certain)."""
    _TRACE.append([False])
    try:
        result = fn(*args, **kw)
    finally:
        tainted = _TRACE.pop()[0]
    return result, not tainted


# --- the evaluator ---------------------------------------------------------------------------------
class _Found(Exception):
    pass


class ConfigEvaluator:
    """Evaluates config expressions of the files of one project view (`ProjectView.function_for_callee`
    follows helper calls)."""

    def __init__(self, project: Any) -> None:
        self.project = project
        self.paths: dict[tuple[int, int], set[int]] = {}
        self.touched: set[int] = set()          # files read by the evaluation under way

    def evaluate(self, src: Any, expr: cst.BaseExpression, scope: str, upto: Optional[cst.CSTNode] = None) -> Any:
        """`value`, memoised on the source across the views of a run: an evaluation is reused by another view
        when every file it read is in that view too."""
        memo = src.__dict__.setdefault("_dslint_pyconfig", {})
        key = (id(expr), id(upto))
        hit = memo.get(key)
        if hit is not None:
            value, touched = hit
            if touched <= self.project_ids:
                return value
        self.touched = {id(src)}
        value = self.value(src, expr, scope, upto)
        memo[key] = (value, frozenset(self.touched))
        return value

    @property
    def project_ids(self) -> set[int]:
        ids = self.__dict__.get("_ids")
        if ids is None:
            ids = self.__dict__["_ids"] = {id(s) for s in self.project.python}
        return ids

    def path_to(self, body: Any, upto: Any) -> set[int]:
        key = (id(body), id(upto))
        found = self.paths.get(key)
        if found is None:
            found = self.paths[key] = _path_to(body, upto)
        return found

    def value(self, src: Any, expr: cst.BaseExpression, scope: str, upto: Optional[cst.CSTNode] = None,
              depth: int = 0) -> Any:
        """The abstract value of `expr`, evaluated in function `scope` of `src` just before `upto`."""
        if depth > MAX_DEPTH:
            return UNKNOWN
        if isinstance(expr, cst.Dict):
            out = PartialDict()
            for el in expr.elements:
                if isinstance(el, cst.StarredDictElement):
                    base = self.value(src, el.value, scope, upto, depth)
                    if not isinstance(base, PartialDict):
                        out.based_unknown = True
                    out.merge(base, False)
                    continue
                key = literal_value(el.key)
                if not isinstance(key, str):
                    out.unknown_key()
                    continue
                out.put(key, self.value(src, el.value, scope, upto, depth), (src, el.key), False)
            return out
        if isinstance(expr, cst.Call):
            return self._call(src, expr, scope, upto, depth)
        if isinstance(expr, cst.Name):
            known = literal_value(expr)
            if known is not UNKNOWN or expr.value in ("True", "False", "None"):
                return known
            return self._name(src, expr.value, scope, upto, depth)
        if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _ARITHMETIC:
            # `0.9 * HIDDEN * HIDDEN`, `hidden * hidden`: Python computes it before DeepSpeed sees the value (its
            # type included: a float where DeepSpeed's field is an int is DSL405's)
            left = self.value(src, expr.left, scope, upto, depth + 1)
            right = self.value(src, expr.right, scope, upto, depth + 1)
            if _number(left) and _number(right):
                try:
                    return _ARITHMETIC[type(expr.operator)](left, right)
                except (ArithmeticError, ValueError, OverflowError):
                    return UNKNOWN
            return literal_value(expr)
        if isinstance(expr, cst.IfExp):
            # `"ds_config.json" if use_deepspeed else None`: where one side hands no config (None: DeepSpeed is
            # off), the config DeepSpeed runs under is the other side's; two sides alike are that value
            body = self.value(src, expr.body, scope, upto, depth + 1)
            orelse = self.value(src, expr.orelse, scope, upto, depth + 1)
            if orelse is None and body is not UNKNOWN:
                return body
            if body is None and orelse is not UNKNOWN:
                return orelse
            if isinstance(body, str) and body == orelse:
                return body
            return UNKNOWN
        if isinstance(expr, (cst.List, cst.Tuple)):
            items = [self.value(src, e.value, scope, upto, depth) for e in expr.elements
                     if isinstance(e, cst.Element)]
            if len(items) != len(expr.elements):
                return UNKNOWN
            return tuple(items) if isinstance(expr, cst.Tuple) else items
        return literal_value(expr)

    # calls: dict(...), copies, helper functions
    def _call(self, src: Any, call: cst.Call, scope: str, upto: Any, depth: int) -> Any:
        from dslint.program.facts import dotted_name
        name = dotted_name(call.func) or ""
        if name == "dict":
            out = PartialDict()
            for arg in call.args:
                if arg.keyword is not None:
                    out.put(arg.keyword.value, self.value(src, arg.value, scope, upto, depth),
                            (src, arg.keyword), False)
                elif arg.star == "**" or not arg.star:
                    base = self.value(src, arg.value, scope, upto, depth + 1)
                    if not isinstance(base, PartialDict):
                        out.based_unknown = True
                    out.merge(base, False)
                else:
                    return UNKNOWN
            return out
        if name in _COPIES and len(call.args) == 1 and not call.args[0].keyword:
            base = self.value(src, call.args[0].value, scope, upto, depth + 1)
            return base.clone() if isinstance(base, PartialDict) else base
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "copy" and not call.args:
            base = self.value(src, call.func.value, scope, upto, depth + 1)
            return base.clone() if isinstance(base, PartialDict) else UNKNOWN
        return self._returned(src, name, scope, depth)

    def _returned(self, src: Any, callee_text: str, scope: str, depth: int) -> Any:
        """What a helper function of the checked files returns: its one return of a dict (literal or a name
        bound to one), parameters unknown."""
        target = self._function(src, callee_text, scope)
        if target is None:
            return UNKNOWN
        fsrc, qual = target
        info = fsrc.facts.functions.get(qual)
        if info is None:
            return UNKNOWN
        memo = self.project.__dict__.setdefault("_pyconfig_returns", {})
        key = (id(fsrc), qual)
        if key in memo:
            value, touched = memo[key]
            self.touched |= touched
            return value.clone() if isinstance(value, PartialDict) else value
        memo[key] = (UNKNOWN, frozenset())          # recursion guard
        outer, self.touched = self.touched, {id(fsrc)}
        dicts = []
        for ret in iter_returns(info.node.body):
            if ret.value is None or (isinstance(ret.value, cst.Name) and ret.value.value == "None"):
                continue
            found = self.value(fsrc, ret.value, qual, ret, depth + 1)
            if isinstance(found, PartialDict):
                dicts.append(found)
            elif found is not UNKNOWN:
                dicts = []
                break
        value = dicts[0] if len(dicts) == 1 else UNKNOWN
        memo[key] = (value, frozenset(self.touched))
        self.touched = outer | self.touched
        return value.clone() if isinstance(value, PartialDict) else value

    def _function(self, src: Any, callee_text: str, scope: str) -> Optional[tuple[Any, str]]:
        if not callee_text:
            return None
        if callee_text.startswith("self.") and callee_text.count(".") == 1 and "." in scope:
            owner = scope.rsplit(".", 1)[0]
            qual = f"{owner}.{callee_text[5:]}"
            return (src, qual) if src.outline is not None and qual in src.outline.functions else None
        resolved = _resolve(src, callee_text)
        return self.project.function_for_callee(src, resolved)

    # names: statements of the scope in order, up to `upto`
    def _name(self, src: Any, name: str, scope: str, upto: Any, depth: int) -> Any:
        function = src.facts.functions.get(scope) if scope else None
        if function is not None:
            state = _NameState(self, src, name, scope, depth)
            if state.run(function.node.body, upto) and state.bound:
                return state.value
            if name in function.params:
                return UNKNOWN
        state = _NameState(self, src, name, "", depth)
        state.run(src.module, upto if function is None else None)
        return state.value if state.bound else UNKNOWN


def _resolve(src: Any, text: str) -> str:
    """A call's dotted text resolved through the file's imports, as `facts` resolves callees."""
    outline = src.outline
    head, _, rest = text.partition(".")
    if outline is not None and head in outline.imports:
        full = outline.imports[head]
        return f"{full}.{rest}" if rest else full
    return text


def _path_to(body: Any, target: Any) -> set[int]:
    """ids of the nodes from `body` down to `target` (empty when it is not there)."""
    from dslint.sources.cstwalk import walk_events
    stack: list[int] = []
    for node, entering in walk_events(body):
        if entering:
            stack.append(id(node))
            if node is target:
                return set(stack)
        else:
            stack.pop()
    return set()


def _rooted(expr: Any, name: str) -> Optional[list]:
    """`name["a"]["b"]` → [Subscript index exprs], `name` → []; None if not rooted at `name`."""
    chain = []
    while isinstance(expr, cst.Subscript):
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        chain.append(expr.slice[0].slice.value)
        expr = expr.value
    if isinstance(expr, cst.Name) and expr.value == name:
        chain.reverse()
        return chain
    return None


class _NameState:
    """The abstract value of one name through the statements of one scope."""

    def __init__(self, ev: ConfigEvaluator, src: Any, name: str, scope: str, depth: int) -> None:
        self.ev, self.src, self.name, self.scope, self.depth = ev, src, name, scope, depth
        self.value: Any = UNKNOWN
        self.bound = False
        self.upto: Any = None

    def run(self, body: Any, upto: Any) -> bool:
        """Process `body` up to `upto`; True when `upto` was reached (or none was given)."""
        self.upto = upto
        self.path = self.ev.path_to(body, upto) if upto is not None else set()
        try:
            self._block(body, False)
        except _Found:
            return True
        return upto is None

    # blocks
    def _block(self, body: Any, cond: bool) -> None:
        if isinstance(body, cst.SimpleStatementSuite):
            for small in body.body:
                if self._leads(small):
                    raise _Found
                self._small(small, cond)
            return
        stmts = body.body if isinstance(body, (cst.IndentedBlock, cst.Module)) else body
        if not isinstance(stmts, (list, tuple)):
            stmts = [stmts]
        for stmt in stmts:
            self._statement(stmt, cond)

    def _leads(self, node: Any) -> bool:
        return id(node) in self.path

    def _statement(self, stmt: Any, cond: bool) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if self._leads(small):
                    raise _Found
                self._small(small, cond)
            return
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            if self._leads(stmt):
                raise _Found
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == self.name:
                self._bind(UNKNOWN, cond)
            return
        if isinstance(stmt, cst.If):
            branches = []
            node: Any = stmt
            while True:
                branches.append(node.body)
                if isinstance(node.orelse, cst.If):
                    node = node.orelse
                    continue
                if isinstance(node.orelse, cst.Else):
                    branches.append(node.orelse.body)
                break
            lead = [b for b in branches if self._leads(b)]
            if lead:                                   # only the branch that reaches the call runs before it
                self._block(lead[0], cond)
                raise _Found
            for b in branches:
                self._block(b, True)
            if self._leads(stmt):
                raise _Found
            return
        if isinstance(stmt, (cst.For, cst.While)):
            self._block(stmt.body, True)
            if stmt.orelse is not None:
                self._block(stmt.orelse.body, True)
            if self._leads(stmt):
                raise _Found
            return
        if isinstance(stmt, cst.Try):
            self._block(stmt.body, cond)
            for part in list(stmt.handlers) + [stmt.orelse, stmt.finalbody]:
                if part is not None:
                    self._block(part.body, True)
            if self._leads(stmt):
                raise _Found
            return
        if isinstance(stmt, cst.With):
            self._block(stmt.body, cond)
            return
        body = getattr(stmt, "body", None)
        if body is not None:                            # match, async forms: conditional
            self._block(body, True)
        if self._leads(stmt):
            raise _Found

    # simple statements
    def _bind(self, value: Any, cond: bool) -> None:
        if cond and self.bound:
            self.value = UNKNOWN
        else:
            self.value = value.clone() if isinstance(value, PartialDict) else value
        self.bound = True

    def _eval(self, expr: Any) -> Any:
        return self.ev.value(self.src, expr, self.scope, self.upto, self.depth + 1)

    def _small(self, small: Any, cond: bool) -> None:
        name = self.name
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            value_expr = small.value
            for target in targets:
                if isinstance(target, cst.Name) and target.value == name:
                    if value_expr is None:
                        return
                    self._bind(self._eval(value_expr), cond)
                    return
                if isinstance(target, (cst.Tuple, cst.List)) and any(
                        isinstance(e.value, cst.Name) and e.value.value == name for e in target.elements):
                    self._bind(UNKNOWN, cond)
                    return
                chain = _rooted(target, name)
                if chain and value_expr is not None:
                    self._set(chain, self._eval(value_expr), (self.src, chain[-1]), cond)
                    return
            if value_expr is not None and _rooted(value_expr, name) is not None:
                self._escape()                          # an alias of the dict or of a section of it
            self._scan(small)
            return
        if isinstance(small, cst.AugAssign):
            if isinstance(small.target, cst.Name) and small.target.value == name and \
                    isinstance(small.operator, cst.BitOrAssign) and isinstance(self.value, PartialDict):
                self.value.merge(self._eval(small.value), cond)
                return
            if isinstance(small.target, cst.Name) and small.target.value == name:
                self._bind(UNKNOWN, cond)
                return
            chain = _rooted(small.target, name)
            if chain:
                self._set(chain, UNKNOWN, (self.src, chain[-1]), cond)
            return
        if isinstance(small, cst.Del):
            chain = _rooted(small.target, name)
            if chain:
                self._remove(chain, cond)
            return
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            if self._method(small.value, cond):
                return
        self._scan(small)

    def _container(self, chain: list, create: bool) -> Optional[PartialDict]:
        """The dict that `name[chain...]` designates (creating open sections under an unknown value)."""
        node = self.value
        if not isinstance(node, PartialDict):
            if not self.bound or node is not UNKNOWN:
                return None
            node = self.value = PartialDict()
            node.open = node.based_unknown = True
        for index in chain:
            key = literal_value(index)
            if not isinstance(key, str):
                node.unknown_key()
                return None
            child = dict.get(node, key, UNKNOWN)
            if not isinstance(child, PartialDict):
                if not create or (dict.__contains__(node, key) and child is not UNKNOWN):
                    return None
                child = PartialDict()
                child.open = child.based_unknown = True
                node.put(key, child, node.keys_at.get(key, (self.src, index)), key in node.maybe)
            node = child
        return node

    def _set(self, chain: list, value: Any, at: tuple, cond: bool) -> None:
        owner = self._container(chain[:-1], True)
        if owner is None:
            return
        key = literal_value(chain[-1])
        if not isinstance(key, str):
            owner.unknown_key()
            return
        owner.put(key, value, at, cond)

    def _remove(self, chain: list, cond: bool) -> None:
        owner = self._container(chain[:-1], False)
        key = literal_value(chain[-1])
        if owner is None or key is UNKNOWN:
            if owner is not None:
                owner.unknown_key()
            return
        if cond:
            owner.maybe.add(key)
        elif dict.__contains__(owner, key):
            dict.__delitem__(owner, key)
            owner.maybe.discard(key)

    def _method(self, call: cst.Call, cond: bool) -> bool:
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        chain = _rooted(func.value, self.name)
        if chain is None:
            return False
        method = func.attr.value
        if method == "update":
            owner = self._container(chain, True)
            if owner is None:
                return True
            for arg in call.args:
                if arg.keyword is not None:
                    owner.put(arg.keyword.value, self._eval(arg.value), (self.src, arg.keyword), cond)
                else:
                    owner.merge(self._eval(arg.value), cond)
            return True
        if method == "setdefault" and call.args:
            owner = self._container(chain, True)
            if owner is None:
                return True
            key = literal_value(call.args[0].value)
            if not isinstance(key, str):
                owner.unknown_key()
                return True
            value = self._eval(call.args[1].value) if len(call.args) > 1 else None
            if dict.__contains__(owner, key) and key not in owner.maybe:
                return True                              # already there: no change
            if dict.__contains__(owner, key) or owner.open:
                owner.put(key, UNKNOWN if dict.__contains__(owner, key) else value, None, True)
                owner.keys_at.setdefault(key, (self.src, call.args[0].value))
                return True
            owner.put(key, value, (self.src, call.args[0].value), cond)
            return True
        if method == "pop" and call.args:
            self._remove(chain + [call.args[0].value], cond)
            return True
        if method in _READ_METHODS:
            return True
        if method == "clear" and isinstance(self.value, PartialDict):
            self._bind(PartialDict(), cond)
            return True
        self._escape()
        return True

    def _escape(self) -> None:
        if isinstance(self.value, PartialDict):
            self.value.escaped = True

    def _scan(self, small: Any) -> None:
        """The dict handed to a call that may change it (`patch(cfg)`, `fill(cfg["zero_optimization"])`)."""
        from dslint.sources.cstwalk import walk
        from dslint.program.facts import dotted_name
        if not isinstance(self.value, PartialDict):
            return
        for node in walk(small):
            if isinstance(node, cst.Call):
                callee = dotted_name(node.func) or ""
                last = callee.rsplit(".", 1)[-1]
                if callee in _READERS or last in _READ_METHODS or last in _CONFIG_TAKERS:
                    continue
                if any(_rooted(a.value, self.name) is not None for a in node.args):
                    self._escape()
                    return
                if isinstance(node.func, cst.Attribute) and _rooted(node.func.value, self.name) is not None \
                        and node.func.attr.value not in _READ_METHODS:
                    self._escape()
                    return


# --- the configs of a view ---------------------------------------------------------------------------
class PyConfig:
    """One dict handed to a config call: its partial value, the call (`dslint.program.facts.CallSite`) and file."""

    def __init__(self, data: PartialDict, src: Any, call: Any, expr: Any) -> None:
        self.data, self.src, self.call, self.expr = data, src, call, expr

    @property
    def inference(self) -> bool:
        return (self.call.callee or "").endswith("init_inference")

    def location(self, path: tuple) -> tuple:
        return self.data.location(path) or (self.src, self.expr)


def python_configs(project: Any) -> list[PyConfig]:
    """Every dict built in Python and handed to a DeepSpeed config call in the files of `project` (files
    filtered on their outlines before any parse)."""
    def build() -> list[PyConfig]:
        from dslint.program.config_handoffs import _hands_config
        out: list[PyConfig] = []
        for src in project.python:
            takes = src.__dict__.get("_dslint_takes_config")
            if takes is None:
                outline = src.outline
                takes = src.__dict__["_dslint_takes_config"] = outline is not None and any(
                    c and _takes_config(c) for c, _ in outline.calls)
            if not takes:
                continue
            for call in src.facts.calls:
                if not _hands_config(call):
                    continue
                expr = project._config_expr(src, call)
                if expr is None or isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
                    continue
                value = project.config_value(src, expr, call.scope, call.node)
                if isinstance(value, PartialDict) and dict.__len__(value):
                    out.append(PyConfig(value, src, call, expr))
        return out
    return project.memo("pyconfig.python_configs", build)


def _takes_config(callee: str) -> bool:
    from dslint.program.config_handoffs import takes_config
    return takes_config(callee)


def configs_written_in(project: Any, src: Any) -> list[PyConfig]:
    """The Python-built configs with a key written in `src` (where their findings are reported)."""
    return [c for c in python_configs(project)
            if c.src is src or any(where[0] is src for where in _all_locations(c.data))]


def _all_locations(data: PartialDict):
    for key, at in data.keys_at.items():
        yield at
        value = dict.get(data, key)
        if isinstance(value, PartialDict):
            yield from _all_locations(value)
