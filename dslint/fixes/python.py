"""Python edits as libcst transformations.

A fix replaces libcst nodes of the file's tree by new nodes (`with_changes`, new `Arg`s, a wrapping `Call`);
the edit is the difference between the code libcst generates for the enclosing *top-level* statement before
and after (common prefix and suffix cut away). A top-level statement's code is exactly its text in the file
(libcst round-trips every byte; no enclosing block indentation is lost), so everything outside the changed
nodes — formatting, comments, quotes — stays as it was, and the edit is as small as the change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Optional

import libcst as cst

from dslint.findings import Edit

if TYPE_CHECKING:
    from dslint.sources import PythonSource


def _pieces(source: "PythonSource") -> list[tuple[int, int, cst.CSTNode]]:
    """(start offset, end offset, statement) of every top-level statement, memoised on the source."""
    from dslint.sources import statement_offsets
    return statement_offsets(source)


def offset_to_position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _top_statement(source: "PythonSource", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    module = source.module
    parents = source._parents
    at: Optional[cst.CSTNode] = node
    while at is not None:
        up = parents.get(id(at))
        if up is module:
            return at
        at = up
    return None


class _Replace(cst.CSTTransformer):
    def __init__(self, mapping: Mapping[int, cst.CSTNode]):
        super().__init__()
        self.mapping = mapping

    def on_leave(self, original, updated):
        return self.mapping.get(id(original), updated)


def replace_nodes(source: "PythonSource", mapping: Mapping[cst.CSTNode, cst.CSTNode]) -> list[Edit]:
    """Edits that replace each old node (a node of `source.module`) by its new node."""
    by_stmt: dict[int, tuple[cst.CSTNode, dict[int, cst.CSTNode]]] = {}
    for old, new in mapping.items():
        stmt = _top_statement(source, old)
        if stmt is None:
            raise ValueError("node is not in the module")
        by_stmt.setdefault(id(stmt), (stmt, {}))[1][id(old)] = new
    pieces = {id(s): (a, b) for a, b, s in _pieces(source)}
    edits = []
    module, text = source.module, source.text
    for stmt, repl in by_stmt.values():
        start, end = pieces[id(stmt)]
        before = text[start:end]
        after = module.code_for_node(stmt.visit(_Replace(repl)) if id(stmt) not in repl else repl[id(stmt)])
        edits.append(text_edit(source.path, text, start, end, before, after))
    return [e for e in edits if e is not None]


def text_edit(path: str, text: str, start: int, end: int, before: str, after: str) -> Optional[Edit]:
    """The smallest edit turning `before` (= text[start:end]) into `after`."""
    if before == after:
        return None
    head = 0
    limit = min(len(before), len(after))
    while head < limit and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < limit - head and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]:
        tail += 1
    a, b = start + head, end - tail
    return Edit(path=path, **_where(text, a, b), content=after[head:len(after) - tail])


def _where(text: str, a: int, b: int) -> dict:
    line, column = offset_to_position(text, a)
    end_line, end_column = offset_to_position(text, b)
    return {"line": line, "column": column, "end_line": end_line, "end_column": end_column}


def insertion(source: "PythonSource", offset: int, content: str) -> Edit:
    return Edit(path=source.path, **_where(source.text, offset, offset), content=content)


# --- node builders ---------------------------------------------------------------------------------

def expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value`: an existing keyword's value replaced, else a keyword added after the last
    argument (a multi-line call keeps one argument per line and its trailing comma)."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    between = _separator(call, args)
    if isinstance(last.comma, cst.Comma):
        # `f(\n    a,\n    b,  # note\n)`: b keeps its comment and is followed by the separator used between the
        # arguments (line break + their indentation); the new argument ends like b did (line break before `)`)
        ws = last.comma.whitespace_after
        if isinstance(ws, cst.ParenthesizedWhitespace):
            sep_ws = between.whitespace_after if isinstance(between.whitespace_after, cst.ParenthesizedWhitespace) \
                else None
            if sep_ws is None:
                return call.with_changes(args=[*args, new])
            args[-1] = last.with_changes(comma=last.comma.with_changes(
                whitespace_after=sep_ws.with_changes(first_line=ws.first_line, empty_lines=())))
            new = new.with_changes(comma=last.comma.with_changes(
                whitespace_after=ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())))
        else:
            args[-1] = last.with_changes(comma=between)
            new = new.with_changes(comma=last.comma)
    else:
        # the whitespace after the last argument (a line break before `)`) moves to the new one
        args[-1] = last.with_changes(comma=between, whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    return call.with_changes(args=[*args, new])


def _separator(call: cst.Call, args: list) -> cst.Comma:
    """The comma the call puts between its arguments (`, ` or a line break with the arguments' indentation)."""
    for arg in reversed(args[:-1]):
        if isinstance(arg.comma, cst.Comma):
            return arg.comma.with_changes(
                whitespace_after=arg.comma.whitespace_after.with_changes(first_line=cst.TrailingWhitespace(),
                                                                         empty_lines=())
                if isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace) else arg.comma.whitespace_after)
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=call.whitespace_before_args.with_changes(
            first_line=cst.TrailingWhitespace(), empty_lines=()))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def wrap(node: cst.BaseExpression, func: str) -> cst.Call:
    """`func(node)`; the node keeps its own parentheses and comments."""
    return cst.Call(func=cst.Name(func), args=[cst.Arg(value=node)])


# --- imports -----------------------------------------------------------------------------------------

def has_import(source: "PythonSource", module: str, name: str) -> bool:
    """`from module import name` (unaliased) anywhere at the top level of the file."""
    for stmt in source.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.ImportFrom) and small.module is not None and \
                        _dotted(small.module) == module and not isinstance(small.names, cst.ImportStar):
                    if any(a.asname is None and _dotted(a.name) == name for a in small.names):
                        return True
    return False


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _is_import_line(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString,
                                                                                cst.ConcatenatedString))


def import_edit(source: "PythonSource", module: str, name: Optional[str] = None) -> Optional[Edit]:
    """`from module import name` (or `import module` when name is None) added once, at the end of the file's
    leading import block (after the docstring when there is no import block); None when the file has it."""
    if name is None:
        if any(isinstance(s, cst.Import) and any(a.asname is None and _dotted(a.name) == module for a in s.names)
               for stmt in source.module.body if isinstance(stmt, cst.SimpleStatementLine) for s in stmt.body):
            return None
    elif has_import(source, module, name):
        return None
    pieces = _pieces(source)
    newline = source.module.default_newline
    line = f"from {module} import {name}{newline}" if name else f"import {module}{newline}"
    at = None
    for i, (start, end, stmt) in enumerate(pieces):
        if _is_import_line(stmt):
            at = end
        elif i == 0 and _is_docstring(stmt):
            at = end
        else:
            break
    if at is None:
        at = pieces[0][0] if pieces else len(source.text)
        if pieces:
            # before the first statement's own line, after its leading comments and blank lines
            first = pieces[0][2]
            lead = "".join(source.module.code_for_node(e) for e in getattr(first, "leading_lines", ()))
            at += len(lead)
    elif not source.text[:at].endswith(("\n", "\r")):
        line = newline + line
    return insertion(source, at, line)


def merge_unique(edits: Iterable[Optional[Edit]]) -> list[Edit]:
    out: list[Edit] = []
    for e in edits:
        if e is not None and e not in out:
            out.append(e)
    return out


# --- configs built in Python (dslint.program.pyconfig) -----------------------------------------------------------

def config_key_node(cfg, path, source: "PythonSource") -> Optional[cst.CSTNode]:
    """The node where the last key of `path` is written in `source` (a dict literal's key, a `dict(...)`
    keyword, a subscript's index), or None."""
    data = cfg.data
    for part in path[:-1]:
        if not isinstance(data, dict) or not dict.__contains__(data, part):
            return None
        data = dict.__getitem__(data, part)
    at = getattr(data, "keys_at", {}).get(path[-1]) if isinstance(data, dict) else None
    if not at or at[0] is not source:
        return None
    return at[1]


def config_value_node(source: "PythonSource", key: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The value written with `key`: `{key: value}`, `dict(key=value)`, `cfg[key] = value`."""
    parents = source._parents
    up = parents.get(id(key))
    if isinstance(up, cst.DictElement) and up.key is key:
        return up.value
    if isinstance(up, cst.Arg) and up.keyword is key:
        return up.value
    at = up
    while at is not None and not isinstance(at, (cst.Assign, cst.SimpleStatementLine)):
        if isinstance(at, cst.Subscript):
            holder = parents.get(id(at))
            if isinstance(holder, cst.AssignTarget):
                assign = parents.get(id(holder))
                if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
                    return assign.value
            return None
        at = parents.get(id(at))
    return None


def renamed_key(node: cst.CSTNode, new: str) -> Optional[cst.CSTNode]:
    if isinstance(node, cst.SimpleString):
        quote, prefix = node.quote, node.prefix
        if "b" in prefix.lower() or quote in new or "\\" in new:
            return None
        return node.with_changes(value=f"{prefix}{quote}{new}{quote}")
    if isinstance(node, cst.Name) and new.isidentifier():
        return node.with_changes(value=new)
    return None


def literal(value) -> Optional[cst.BaseExpression]:
    """A libcst expression for a JSON-like value (True/False/None, numbers, strings, lists, dicts); strings in
    double quotes, as JSON and most configs write them."""
    code = _literal_code(value)
    return None if code is None else cst.parse_expression(code)


def _literal_code(value) -> Optional[str]:
    import json
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        items = [_literal_code(v) for v in value]
        return None if None in items else "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        pairs = [(_literal_code(k), _literal_code(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    return None


def line_insertion(source: "PythonSource", node: cst.CSTNode, lines: list[str], after: bool) -> Optional[Edit]:
    """Whole lines inserted before the first line of `node` (a statement) or after its last line, indented
    like that first line."""
    span = source.span(node)
    text_lines = source.text.split("\n")
    first = text_lines[span.line - 1] if span.line <= len(text_lines) else ""
    indent = first[:len(first) - len(first.lstrip())]
    newline = source.module.default_newline
    body = "".join(f"{indent}{line}{newline}" for line in lines)
    at_line = span.end_line + 1 if after else span.line
    if at_line > len(text_lines):
        return None
    return Edit(path=source.path, line=at_line, column=1, end_line=at_line, end_column=1, content=body)


def statement_of(source: "PythonSource", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The innermost statement (simple line or compound statement) holding `node`."""
    parents = source._parents
    at: Optional[cst.CSTNode] = node
    while at is not None and not isinstance(at, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        at = parents.get(id(at))
    return at
