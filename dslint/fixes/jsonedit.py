"""JSON edits on the spans dslint.sources.jsonpos keeps: a key renamed, a value replaced, a member deleted. Each edit
covers only the key or value it changes, so every other byte of the file (formatting, key order, the text
around) stays as it was."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from dslint.findings import Edit

if TYPE_CHECKING:
    from dslint.sources.jsonpos import JsonPath, Span
    from dslint.sources import JsonSource


def _edit(source: "JsonSource", span: "Span", content: str) -> Edit:
    return Edit(path=source.path, line=span.line, column=span.column, end_line=span.end_line,
                end_column=span.end_column, content=content)


def value_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def rename_key(source: "JsonSource", path: "JsonPath", new_key: str) -> Optional[Edit]:
    """`"old": v` → `"new": v`; None when the object already has the new key (that would duplicate it)."""
    span = source.parsed.key_spans.get(tuple(path))
    parent = _value_at(source.data, path[:-1])
    if span is None or not isinstance(parent, dict) or new_key in parent:
        return None
    return _edit(source, span, value_text(new_key))


def set_value(source: "JsonSource", path: "JsonPath", value: Any) -> Optional[Edit]:
    span = source.parsed.value_spans.get(tuple(path))
    return None if span is None else _edit(source, span, value_text(value))


def delete_first_duplicate(source: "JsonSource", index: int) -> Optional[Edit]:
    """Delete the earlier member of the `index`-th duplicate key (the later value is the one other loaders keep)."""
    firsts = source.parsed.duplicate_firsts
    return _edit(source, firsts[index], "") if index < len(firsts) else None


def _value_at(data: Any, path) -> Any:
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def _offset(text: str, line: int, column: int) -> int:
    at = 0
    for _ in range(line - 1):
        at = text.index("\n", at) + 1
    return at + column - 1


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def delete_member(source: "JsonSource", path: "JsonPath") -> Optional[Edit]:
    """Delete the member `path` (key, value and one separating comma) from its object; the whitespace before
    the next member stays as it was."""
    parsed, text = source.parsed, source.text
    key, value = parsed.key_spans.get(tuple(path)), parsed.value_spans.get(tuple(path))
    if key is None or value is None:
        return None
    a = _offset(text, key.line, key.column)
    b = _offset(text, value.end_line, value.end_column)
    after = b
    while after < len(text) and text[after] in " \t\r\n":
        after += 1
    if after < len(text) and text[after] == ",":
        end = after + 1
        while end < len(text) and text[end] in " \t\r\n":
            end += 1
        start = a
    else:
        before = a - 1
        while before >= 0 and text[before] in " \t\r\n":
            before -= 1
        if before < 0:
            return None
        start, end = (before, b) if text[before] == "," else (before + 1, b)
    (line, column), (end_line, end_column) = _position(text, start), _position(text, end)
    return Edit(path=source.path, line=line, column=column, end_line=end_line, end_column=end_column, content="")
