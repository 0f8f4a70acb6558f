"""A JSON reader that keeps positions.

`json.loads` throws positions away; config findings must point at the offending key, so this small
recursive-descent reader returns the value together with the span of every key and value, addressed by
its path (`("zero_optimization", "stage")`, `("optimizer", "params", "betas", 0)`).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Union

JsonPath = tuple[Union[str, int], ...]

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None, "NaN": float("nan"),
             "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int
    end_column: int


class JsonPositionError(ValueError):
    def __init__(self, message: str, line: int, column: int):
        super().__init__(f"{message} (line {line}, column {column})")
        self.message, self.line, self.column = message, line, column


@dataclass
class PositionedJson:
    value: Any
    key_spans: dict[JsonPath, Span] = field(default_factory=dict)
    value_spans: dict[JsonPath, Span] = field(default_factory=dict)
    duplicate_keys: list[tuple[JsonPath, Span]] = field(default_factory=list)
    # per duplicate key: the text of the member it repeats (from its key up to the next member's key), what a
    # fix deletes to keep the last value (the one `json.load` keeps)
    duplicate_firsts: list[Span] = field(default_factory=list)

    def span(self, path: JsonPath) -> Span:
        """The key's span for an object member, else the value's; falls back to the nearest ancestor."""
        while True:
            if path in self.key_spans:
                return self.key_spans[path]
            if path in self.value_spans:
                return self.value_spans[path]
            if not path:
                return Span(1, 1, 1, 1)
            path = path[:-1]


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.out = PositionedJson(None)

    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def span(self, start: int, end: int) -> Span:
        return Span(*self.pos(start), *self.pos(end))

    def fail(self, message: str, offset: int) -> JsonPositionError:
        return JsonPositionError(message, *self.pos(offset))

    def skip(self, i: int) -> int:
        return _WS.match(self.text, i).end()

    def read(self) -> PositionedJson:
        i = self.skip(0)
        if i >= len(self.text):
            raise self.fail("empty document", i)
        self.out.value, i = self.value(i, ())
        i = self.skip(i)
        if i != len(self.text):
            raise self.fail("extra data after the JSON value", i)
        return self.out

    def value(self, i: int, path: JsonPath) -> tuple[Any, int]:
        text = self.text
        if i >= len(text):
            raise self.fail("unexpected end of input, expected a value", i)
        ch = text[i]
        start = i
        if ch == "{":
            result, i = self.object(i, path)
        elif ch == "[":
            result, i = self.array(i, path)
        elif ch == '"':
            result, i = self.string(i)
        else:
            m = _NUMBER.match(text, i)
            if m and m.end() > i:
                s = m.group()
                result = float(s) if any(c in s for c in ".eE") else int(s)
                i = m.end()
            else:
                for word, lit in _LITERALS.items():
                    if text.startswith(word, i):
                        result, i = lit, i + len(word)
                        break
                else:
                    raise self.fail(f"expected a value, found {text[i:i + 10]!r}", i)
        self.out.value_spans[path] = self.span(start, i)
        return result, i

    def string(self, i: int) -> tuple[str, int]:
        try:
            return json.decoder.scanstring(self.text, i + 1, True)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None

    def object(self, i: int, path: JsonPath) -> tuple[dict, int]:
        result: dict[str, Any] = {}
        starts: list[int] = []              # each member's key offset
        member: dict[str, int] = {}         # key -> index of its latest member
        i = self.skip(i + 1)
        if self.text.startswith("}", i):
            return result, i + 1
        while True:
            if not self.text.startswith('"', i):
                raise self.fail("expected a property name in double quotes", i)
            key_start = i
            key, i = self.string(i)
            child = path + (key,)
            span = self.span(key_start, i)
            if key in result:
                self.out.duplicate_keys.append((child, span))
                first = member[key]
                self.out.duplicate_firsts.append(self.span(starts[first], key_start if first + 1 == len(starts)
                                                           else starts[first + 1]))
            member[key] = len(starts)
            starts.append(key_start)
            self.out.key_spans[child] = span
            i = self.skip(i)
            if not self.text.startswith(":", i):
                raise self.fail("expected ':' after a property name", i)
            result[key], i = self.value(self.skip(i + 1), child)
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
                continue
            if self.text.startswith("}", i):
                return result, i + 1
            raise self.fail("expected ',' or '}' in an object", i)

    def array(self, i: int, path: JsonPath) -> tuple[list, int]:
        result: list[Any] = []
        i = self.skip(i + 1)
        if self.text.startswith("]", i):
            return result, i + 1
        while True:
            item, i = self.value(i, path + (len(result),))
            result.append(item)
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
                continue
            if self.text.startswith("]", i):
                return result, i + 1
            raise self.fail("expected ',' or ']' in an array", i)


def load_positioned(text: str) -> PositionedJson:
    """Parse `text` as JSON, keeping the span of every key and value. Raises JsonPositionError."""
    return _Reader(text).read()
