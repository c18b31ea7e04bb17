"""A filter policy as AWS's rule compiler reads it: Jackson's token stream, and where Jackson says
the parser stands when a rule is refused.

SNS refuses a bad policy with its compiler's text and Jackson's location, e.g. (recorded from AWS
in LocalStack's test_sns_filter_policy.snapshot.json):

    FilterPolicy: Unrecognized match type wrong-operator
     at [Source: (String)"{"key":[{"wrong-operator":true}]}"; line: 1, column: 31]

The source shown is the policy re-written compactly (the test sent `{"key": [{"wrong-operator":
true}]}`, with spaces): SNS parses the JSON, writes it back with Jackson and compiles that text,
so `compact` does the same, and columns count in it. Jackson's streaming parser reads lazily, and
the recorded columns follow from it (every recorded one is reproduced by this module):

* a field name is read together with the first token of its value (`"key":[` stops after `[`,
  `"a":true` after `true`, `"a":"text"` after the opening quote);
* a string value is read to its closing quote only when its text is asked for;
* a number, `true`, `false`, `null`, `[`, `]`, `{`, `}` are read whole.

The text given here is always valid JSON (the caller parsed it first), so nothing is checked twice.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from ..protocol import user_json

START_OBJECT, END_OBJECT, START_ARRAY, END_ARRAY = "{", "}", "[", "]"
FIELD_NAME, STRING, NUMBER, TRUE, FALSE, NULL = "name", "string", "number", "true", "false", "null"

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # from the opening quote; linear (no nested repeats)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"t": (TRUE, "true"), "f": (FALSE, "false"), "n": (NULL, "null")}
_SNIPPET = 500  # Jackson's ContentReference: the first 500 characters of the source, then "[truncated N chars]"
# Jackson writes control characters as \b \t \n \f \r or \u00XX (upper-case hex), and `"` `\` escaped.
_JACKSON_ESCAPES = {**{c: f"\\u{c:04X}" for c in range(0x20)}, 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f",
                    0x0D: "\\r", ord('"'): '\\"', ord("\\"): "\\\\"}
# In a location's source text, Jackson shows ISO control characters other than CR and LF as \uXXXX.
_SOURCE_ESCAPES = {c: f"\\u{c:04X}" for c in (*range(0x20), *range(0x7F, 0xA0)) if c not in (0x0A, 0x0D)}


class JsonParseError(Exception):
    """A rule refused at a place in the policy: `str()` is Jackson's JsonParseException text."""


def compact(doc: Any) -> str:
    """The parsed policy as Jackson's ObjectMapper writes it: no spaces, members in their order
    (without recursion: the policy may be nested up to the JSON reader's limit)."""
    return user_json.dumps(doc, _scalar)


def _string(text: str) -> str:
    return '"' + text.translate(_JACKSON_ESCAPES) + '"'


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    return _string(value)


def java_double(value: float) -> str:
    """Java's Double.toString, as Jackson writes a double: `1.5`, `100.0`, `1.0E20`, `1.0E-5`."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    mantissa, _, exponent = repr(value).partition("e")  # repr: the shortest digits that read back
    sign = "-" if mantissa.startswith("-") else ""
    whole, _, fraction = mantissa.lstrip("-").partition(".")
    written = whole + fraction
    digits = written.lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(written) - len(digits))  # value = 0.DIGITS x 10^point
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= abs(value) < 1e7:  # plain notation, at least one digit after the point
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


class Tokens:
    """Jackson's ReaderBasedJsonParser over a compact JSON text, token by token."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0                        # index of the next character Jackson has not read
        self.kind: str | None = None        # the current token
        self.name = ""                      # the current (last read) field name
        self._written = ""                  # the current number or literal as written
        self._string_at = -1                # a string value not read yet: index of its opening quote
        self._string = ""                   # the current string value, once read
        self._pending: str | None = None    # the value token read along with a field name
        self._objects: list[bool] = []      # per open container: is it an object (not an array)?

    def next(self) -> str:
        """Jackson's nextToken()."""
        if self._pending is not None:  # read already, with its field name
            self.kind, self._pending = self._pending, None
            return self.kind
        if self._string_at >= 0:  # Jackson skips what is left of a string value nobody read
            self._read_string()
        text, pos = self.text, self.pos
        if text[pos] == ",":
            pos += 1
        char = text[pos]
        if char in "]}":
            self.pos = pos + 1
            self._objects.pop()
            self.kind = END_ARRAY if char == "]" else END_OBJECT
            return self.kind
        if self._objects and self._objects[-1]:
            end = _STRING.match(text, pos).end()
            self.name = _unquote(text, pos, end)
            self._pending = self._value_at(end + 1)  # past the colon
            self.kind = FIELD_NAME
            return self.kind
        self.kind = self._value_at(pos)
        return self.kind

    def _value_at(self, start: int) -> str:
        """Read the value token starting at `start` as far as Jackson reads it, and name it."""
        char = self.text[start]
        if char == '"':
            self._string_at, self.pos = start, start + 1
            return STRING
        if char in "[{":
            self.pos = start + 1
            self._objects.append(char == "{")
            return START_ARRAY if char == "[" else START_OBJECT
        if char in _LITERALS:
            kind, self._written = _LITERALS[char]
            self.pos = start + len(self._written)
            return kind
        end = _NUMBER.match(self.text, start).end()
        self._written, self.pos = self.text[start:end], end
        return NUMBER

    def _read_string(self) -> None:
        end = _STRING.match(self.text, self._string_at).end()
        self._string = _unquote(self.text, self._string_at, end)
        self._string_at, self.pos = -1, end

    def text_value(self) -> str:
        """Jackson's getText(): a string's value (reading it to its end), a field's name, a number
        or literal as written, a bracket itself."""
        if self.kind == STRING:
            if self._string_at >= 0:
                self._read_string()
            return self._string
        if self.kind == FIELD_NAME:
            return self.name
        if self.kind in (START_OBJECT, END_OBJECT, START_ARRAY, END_ARRAY):
            return self.kind
        return self._written

    def number(self) -> float:
        """Jackson's getDoubleValue() of the current number."""
        return float(self._written)

    def error(self, message: str) -> JsonParseError:
        """Jackson's JsonParseException at the current location."""
        column = len(self.text[:self.pos].encode("utf-16-le")) // 2 + 1  # Java counts UTF-16 units
        return JsonParseError(f"{message}\n at [Source: (String){_source(self.text)}; line: 1, column: {column}]")


def _unquote(text: str, start: int, end: int) -> str:
    """The JSON string text[start:end] (quotes included) as a value."""
    inner = text[start + 1:end - 1]
    return json.loads(text[start:end]) if "\\" in inner else inner


def _source(text: str) -> str:
    """Jackson's description of a String source: its first 500 characters, quoted."""
    units = text.encode("utf-16-le")
    if len(units) <= 2 * _SNIPPET:
        return '"' + text.translate(_SOURCE_ESCAPES) + '"'
    # A cut through a surrogate pair drops the pair's first half (Java would show a lone surrogate,
    # which no XML answer can carry).
    shown = units[:2 * _SNIPPET].decode("utf-16-le", errors="ignore")
    return '"' + shown.translate(_SOURCE_ESCAPES) + f'"[truncated {len(units) // 2 - _SNIPPET} chars]'
