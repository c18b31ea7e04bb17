"""Previewed values as JSON carries them to the console's page, and a table cell cut to a size.

`plain` keeps a value whole (its input is already bounded: the JSON preview reads 64 KiB of text);
`cell` also cuts it, because a table cell is not: a Parquet or ORC cell of a few bytes on disk can
hold a list of ten million items or a string of hundreds of megabytes.
"""
from __future__ import annotations

import math
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

ROW_LIMIT = 50                   # rows a preview shows
MAX_COLUMNS = 40                 # columns a table preview shows
MAX_DEPTH = 32                   # deeper values are shown as text (JSON) or cut (cells)
CELL_BYTES = 256                 # of a binary value shown in hex
CELL_CHARS = 2048                # of a table cell: its text, or the items of a nested value, past which it is cut
MORE = "…"                       # where a value was cut


class NotPlain(Exception):
    """A value the preview shows as text rather than as values (too deep)."""


def plain(value: Any, depth: int = 0) -> Any:
    """A value as JSON can carry it to the page: bytes as text or hex, times as ISO strings, integers
    past 64 bits and non-finite floats as strings; NotPlain if nested deeper than MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise NotPlain()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return binary_value(bytes(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def binary_value(data: bytes) -> str:
    """A binary value: its text when it is printable UTF-8, else 0x and its hex."""
    try:
        text = data.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    return "0x" + data[:CELL_BYTES].hex() + (MORE if len(data) > CELL_BYTES else "")


def cell(value: Any, chars: int = CELL_CHARS) -> Any:
    """A table cell as `plain` gives it, cut to about `chars` characters of JSON (its text, names and
    separators; quotes and escapes aside): a string ends with MORE, a
    list or map stops with a MORE item (a map: a MORE key), a value nested deeper than MAX_DEPTH is
    MORE. What is cut off is never walked."""
    return _cut(value, [chars], 0)


def _cut(value: Any, left: list[int], depth: int) -> Any:
    if depth > MAX_DEPTH:
        left[0] = 0
        return MORE
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if left[0] <= 0:
                out[MORE] = MORE
                break
            name = _text(str(k), left)
            out[name] = _cut(v, left, depth + 1)
            left[0] -= 2  # the separators
        return out
    if isinstance(value, (list, tuple)):
        items: list[Any] = []
        for v in value:
            if left[0] <= 0:
                items.append(MORE)
                break
            items.append(_cut(v, left, depth + 1))
            left[0] -= 1  # the separator
        return items
    shown = plain(value)
    if isinstance(shown, str):
        return _text(shown, left)
    left[0] -= len(str(shown))
    return shown


def _text(text: Any, left: list[int]) -> str:
    text = str(text)
    if len(text) > left[0]:
        text = text[:max(left[0], 0)] + MORE
    left[0] -= len(text)
    return text
