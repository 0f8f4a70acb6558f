"""A JSON reader that keeps positions, and the Hjson that DeepSpeed reads configs with.

`json.loads` throws positions away; config findings must point at the offending key, so this small
recursive-descent reader returns the value together with the span of every key and value, addressed by
its path (`("zero_optimization", "stage")`, `("optimizer", "params", "betas", 0)`).

DeepSpeed (0.19.8: `runtime/config.py`) loads a config file with `hjson.load`, so a config with comments
(`#`, `//`, `/* */`), trailing or missing commas, unquoted keys, quoteless or `'single'`/`'''multi-line'''`
strings, or no braces around the root object runs. A text that is not strict JSON is read again by
`_HjsonReader`, a port of hjson-py 3.1's decoder that keeps the same spans (`tests/test_bad_inputs.py`
compares its values with `hjson.loads` where hjson is installed). Strict JSON is read as JSON (hjson would
turn `1.0` into `1`; nothing a rule reads depends on it).

Input that no config can be -- nested deeper than `MAX_DEPTH`, an integer longer than Python converts,
a string holding a lone surrogate (`"\\ud800"`, not Unicode) -- is a `JsonPositionError` at its position.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union

JsonPath = tuple[Union[str, int], ...]

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None, "NaN": float("nan"),
             "Infinity": float("inf"), "-Infinity": float("-inf")}
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_DEPTH = 100                 # DeepSpeed configs nest 3 or 4 levels; hjson itself fails near 330


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int
    end_column: int


class JsonPositionError(ValueError):
    def __init__(self, message: str, line: int, column: int, fatal: bool = False):
        super().__init__(f"{message} (line {line}, column {column})")
        self.message, self.line, self.column = message, line, column
        self.fatal = fatal          # no config at all, in JSON or Hjson (too deep, too long, not Unicode)


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
        self.depth = 0

    def enter(self, i: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels; not read as a DeepSpeed config", i, True)

    def integer(self, s: str, i: int) -> int:
        try:
            return int(s)
        except ValueError:      # longer than sys.get_int_max_str_digits()
            raise self.fail(f"an integer of {len(s.lstrip('-'))} digits is too long to read", i, True) from None

    def checked(self, value: str, start: int) -> str:
        m = _SURROGATE.search(value)
        if m:
            raise self.fail(f"string holds a lone surrogate \\u{ord(m.group()):04x}, which is not Unicode", start, True)
        return value

    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def span(self, start: int, end: int) -> Span:
        return Span(*self.pos(start), *self.pos(end))

    def fail(self, message: str, offset: int, fatal: bool = False) -> JsonPositionError:
        return JsonPositionError(message, *self.pos(offset), fatal=fatal)

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
            self.enter(i)
            result, i = self.object(i, path)
            self.depth -= 1
        elif ch == "[":
            self.enter(i)
            result, i = self.array(i, path)
            self.depth -= 1
        elif ch == '"':
            result, i = self.string(i)
        else:
            m = _NUMBER.match(text, i)
            if m and m.end() > i:
                s = m.group()
                result = float(s) if any(c in s for c in ".eE") else self.integer(s, i)
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
            value, end = json.decoder.scanstring(self.text, i + 1, True)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None
        return self.checked(value, i), end

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


_HJSON_WS = " \t\n\r"
_HJSON_PUNCTUATORS = "{}[],:"
_HJSON_NUMBER = re.compile(r"[\t ]*(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?[\t ]*")
_HJSON_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                  "t": "\t"}


class _HjsonReader(_Reader):
    """hjson-py 3.1.0's decoder (`hjson/decoder.py`), step for step, keeping spans. Its quirks are kept: a
    quoteless value runs to the end of the line unless what precedes a `,` `}` `]` or comment is a number,
    `true`, `false` or `null`; a whole number written `2.0` is the int 2."""

    def skip(self, i: int) -> int:          # hjson's getNext: whitespace and comments
        text = self.text
        while True:
            while i < len(text) and text[i] in _HJSON_WS:
                i += 1
            two = text[i:i + 2]
            if two[:1] == "#" or two == "//":
                i = self._eol(i)
            elif two == "/*":
                end = text.find("*/", i + 2)
                i = len(text) if end < 0 else end + 2
            else:
                return i

    def _eol(self, i: int) -> int:
        while i < len(self.text) and self.text[i] not in "\r\n":
            i += 1
        return i

    def read(self) -> PositionedJson:
        text = self.text
        start = 1 if text.startswith("\ufeff") else 0
        i = self.skip(start)
        if i >= len(text):
            self.out.value = {}
            return self.out
        if text[i] in "{[":
            self.out.value, i = self.value(i, ())
        else:
            try:                                    # a root object without braces
                self.enter(i)
                self.out.value, i = self.members(i, (), braces=False)
                self.out.value_spans[()] = self.span(start, i)
                self.depth -= 1
            except JsonPositionError as first:
                self.out = PositionedJson(None)
                self.depth = 0
                try:
                    self.out.value, i = self.value(i, ())
                except JsonPositionError:
                    raise first from None
        i = self.skip(i)
        if i != len(text):
            raise self.fail("extra data after the value", i)
        return self.out

    def value(self, i: int, path: JsonPath) -> tuple[Any, int]:
        text = self.text
        if i >= len(text):
            raise self.fail("unexpected end of input, expected a value", i)
        ch, start = text[i], i
        if ch in "\"'":
            if text.startswith("'''", i):
                result, i = self.multiline(i)
            else:
                result, i = self.quoted(i)
        elif ch == "{":
            self.enter(i)
            result, i = self.members(i + 1, path, braces=True)
            self.depth -= 1
        elif ch == "[":
            self.enter(i)
            result, i = self.items(i + 1, path)
            self.depth -= 1
        else:
            result, i = self.quoteless(i)
        self.out.value_spans[path] = self.span(start, i)
        return result, i

    def quoted(self, i: int) -> tuple[str, int]:
        text, quote, start = self.text, self.text[i], i
        out: list[str] = []
        i += 1
        while True:
            if i >= len(text):
                raise self.fail("unterminated string", start)
            ch = text[i]
            if ch == quote:
                return self.checked("".join(out), start), i + 1
            if ch == "\\":
                esc = text[i + 1:i + 2]
                if esc == "u":
                    digits = text[i + 2:i + 6]
                    if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                        raise self.fail("invalid \\uXXXX escape", i)
                    code = int(digits, 16)
                    i += 6
                    if 0xD800 <= code <= 0xDBFF and text.startswith("\\u", i):
                        low = text[i + 2:i + 6]
                        if len(low) == 4 and all(c in "0123456789abcdefABCDEF" for c in low) \
                                and 0xDC00 <= int(low, 16) <= 0xDFFF:
                            code = 0x10000 + ((code - 0xD800) << 10 | (int(low, 16) - 0xDC00))
                            i += 6
                    out.append(chr(code))
                    continue
                if esc not in _HJSON_ESCAPES:
                    raise self.fail(f"invalid escape {esc!r}", i)
                out.append(_HJSON_ESCAPES[esc])
                i += 2
                continue
            if ch < " " and ch != "\t":
                raise self.fail("invalid control character in a string", i)
            out.append(ch)
            i += 1

    def multiline(self, i: int) -> tuple[str, int]:
        text, start = self.text, i
        indent = i - (text.rfind("\n", 0, i) + 1)
        i += 3
        while i < len(text) and text[i] in " \t\r":
            i += 1
        if text[i:i + 1] == "\n":
            i = self._indent(i + 1, indent)
        out, triple = [], 0
        while True:
            if i >= len(text):
                raise self.fail("unterminated multi-line string", start)
            ch = text[i]
            if ch == "'":
                triple += 1
                i += 1
                if triple == 3:
                    value = "".join(out)
                    return self.checked(value[:-1] if value.endswith("\n") else value, start), i
                continue
            out.append("'" * triple)
            triple = 0
            if ch == "\n":
                out.append(ch)
                i = self._indent(i + 1, indent)
            else:
                if ch != "\r":
                    out.append(ch)
                i += 1

    def _indent(self, i: int, n: int) -> int:
        while i < len(self.text) and self.text[i] in " \t\r" and n > 0:
            i += 1
            n -= 1
        return i

    def quoteless(self, i: int) -> tuple[Any, int]:
        text, begin = self.text, i
        first = text[i]
        if first in _HJSON_PUNCTUATORS:
            raise self.fail(f"found {first!r} where a value was expected", i)
        end = i
        while True:
            ch = text[end:end + 1]
            eol = ch in ("\r", "\n", "")
            if eol or ch in ",}]#" or ch == "/" and text[end + 1:end + 2] in ("/", "*"):
                word = text[begin:end].strip()
                if word in ("null", "true", "false"):
                    return {"null": None, "true": True, "false": False}[word], end
                if first == "-" or first.isdigit():
                    m = _HJSON_NUMBER.match(text, begin)
                    if m is not None and m.end() == end:
                        whole, frac, exp = m.groups()
                        if frac or exp:
                            number = float(whole + (frac or "") + (exp or ""))
                            return (int(number) if number == int(number) and abs(number) < 1e10 else number), end
                        return self.integer(whole, begin), end
                if eol:
                    return self.checked(text[begin:end].strip(), begin), end
            end += 1

    def key(self, i: int) -> tuple[str, int]:
        text = self.text
        if text[i:i + 1] in ("\"", "'"):
            return self.quoted(i)
        begin, space = i, -1
        while True:
            ch = text[i:i + 1]
            if ch == "":
                raise self.fail("end of input in a key name", i)
            if ch == ":":
                if begin == i:
                    raise self.fail("found ':' but no key name", begin)
                if space >= 0:
                    if space != i - 1:
                        raise self.fail("whitespace in a key name (quote it)", space)
                    return text[begin:i].rstrip(), i
                return text[begin:i], i
            if ch in _HJSON_WS:
                if space < 0 or space == i - 1:
                    space = i
            elif ch in "{}[],":
                raise self.fail(f"found {ch!r} where a key name was expected", begin)
            i += 1

    def members(self, i: int, path: JsonPath, braces: bool) -> tuple[dict, int]:
        result: dict[str, Any] = {}
        i = self.skip(i)
        if braces and self.text.startswith("}", i):
            return result, i + 1
        while True:
            key_start = i
            key, i = self.key(i)
            child = path + (key,)
            span = self.span(key_start, i)
            if key in result:
                self.out.duplicate_keys.append((child, span))
            self.out.key_spans[child] = span
            i = self.skip(i)
            if not self.text.startswith(":", i):
                raise self.fail("expected ':' after a key name", i)
            result[key], i = self.value(self.skip(i + 1), child)
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
            if not braces and i >= len(self.text):
                return result, i
            if braces and self.text.startswith("}", i):
                return result, i + 1
            if i >= len(self.text):
                raise self.fail("end of input in an object (a '}' missing?)", i)

    def items(self, i: int, path: JsonPath) -> tuple[list, int]:
        result: list[Any] = []
        i = self.skip(i)
        if self.text.startswith("]", i):
            return result, i + 1
        while True:
            if i >= len(self.text):
                raise self.fail("end of input in an array (a ']' missing?)", i)
            item, i = self.value(i, path + (len(result),))
            result.append(item)
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
            if self.text.startswith("]", i):
                return result, i + 1


def load_positioned(text: str, hjson: Optional[bool] = None) -> PositionedJson:
    """Parse `text` keeping the span of every key and value: as JSON (`hjson=False`), as Hjson (`True`), or
    as JSON and else as Hjson, as DeepSpeed reads a config file (None). Raises JsonPositionError; when both
    fail, the strict reader's, which places JSON mistakes best."""
    if hjson:
        return _HjsonReader(text).read()
    try:
        return _Reader(text).read()
    except JsonPositionError as strict:
        if strict.fatal or hjson is False:
            raise
        try:
            return _HjsonReader(text).read()
        except JsonPositionError as exc:
            raise exc if exc.fatal else strict from None
