"""A user's JSON document inside a request: a queue's Policy, a subscription's FilterPolicy, a
message with MessageStructure=json. One way to read them, so that none can stop a request thread.

Python's `json.loads` parses recursively: a document nested 3,000 deep raises RecursionError,
which no `except ValueError` catches (a 500). orjson parses without Python recursion and refuses
more than 1,024 levels; AWS's services, written in Java, parse with Jackson, whose default limit
(`StreamReadConstraints.getMaxNestingDepth()`, Jackson 2.15 and later) is 1,000 levels. That is
the limit here, worded as Jackson words it.

Whatever walks a parsed document must not recurse on its nesting either: `dumps` writes one
without recursion (json.dumps stops near Python's recursion limit, ~1,000 levels, and orjson's
writer at 255).
"""
from __future__ import annotations

import json
from typing import Any, Callable

import orjson

MAX_DEPTH = 1000


class InvalidJson(ValueError):
    """The text is not a JSON document kinesim will read; `str()` says why, for the user."""


def loads(text: str | bytes) -> Any:
    """The document, or InvalidJson (JSON's syntax, or nesting deeper than MAX_DEPTH)."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as err:
        if str(err).startswith("depth limit exceeded"):  # orjson's own limit, past Jackson's
            raise InvalidJson(_too_deep(MAX_DEPTH + 1)) from None
        raise InvalidJson(str(err)) from None
    # Only a text with more brackets than the limit can be too deep (counting them is C-speed), and
    # one orjson can write back is at most 254 deep (its writer's limit, C-speed too): the walk in
    # Python runs only when neither settles it.
    opening = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
    if text.count(opening[0]) + text.count(opening[1]) > MAX_DEPTH and not _shallow(doc):
        if nesting_depth(doc) > MAX_DEPTH:
            raise InvalidJson(_too_deep(MAX_DEPTH + 1))
    return doc


def _shallow(doc: Any) -> bool:
    try:
        orjson.dumps(doc)
        return True
    except orjson.JSONEncodeError:
        return False


def nesting_depth(doc: Any) -> int:
    """How many arrays and objects deep a parsed document goes (a scalar: 0), without recursion."""
    deepest = 0
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def dumps(doc: Any, scalar: Callable[[Any], str] = json.dumps) -> str:
    """What `json.dumps(doc, separators=(",", ":"))` writes, without recursion; `scalar` writes
    each string (member names included), number, boolean and null."""
    out: list[str] = []
    # Work items: a value to write, or a literal piece of punctuation (a str in a 1-tuple).
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            out.append(item[0])
        elif isinstance(item, dict):
            parts: list[Any] = [("{",)]
            for i, (key, value) in enumerate(item.items()):
                parts += [(("," if i else "") + scalar(str(key)) + ":",), value]
            stack.extend(reversed(parts + [("}",)]))
        elif isinstance(item, list):
            parts = [("[",)]
            for i, value in enumerate(item):
                parts += [(",",), value] if i else [value]
            stack.extend(reversed(parts + [("]",)]))
        else:
            out.append(scalar(item))
    return "".join(out)


def _too_deep(depth: int) -> str:
    # Jackson's StreamConstraintsException text (jackson-core StreamReadConstraints): it stops at
    # the first level past the limit, so the depth it names is always MAX_DEPTH + 1.
    return (f"Document nesting depth ({depth}) exceeds the maximum allowed ({MAX_DEPTH}, from "
            "`StreamReadConstraints.getMaxNestingDepth()`)")
