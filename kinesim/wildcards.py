"""`*` wildcards over client text, in linear time: CloudWatch Logs filter-pattern values
(`{ $.ip = 10.0.* }`) and event-filter `{"wildcard": "a*c"}` rules of Lambda mappings.

A pattern is literal text with stars between; `*` stands for any run of characters (newlines
too). No regex: `re` (and fnmatch, which translates to it) backtracks, and a client's
`*a*a*a*...b` over a long value held the interpreter for minutes. Matching a star pattern
needs no backtracking at all: the text before the first star must open the value, the text
after the last must close it, and each run between is best placed at its leftmost occurrence
after the previous one (placing it further right can only leave less room for the rest).
"""
from __future__ import annotations

from typing import Callable


def wildcard_matcher(pattern: str, backslash_escapes: bool = False) -> Callable[[str], bool]:
    """A predicate: does a whole value match `pattern`? With `backslash_escapes`, `\\*` is a
    literal star (EventBridge's rule); a backslash before anything else stays as it is."""
    parts = _literal_runs(pattern, backslash_escapes)
    return lambda value: _matches(parts, value)


def _literal_runs(pattern: str, backslash_escapes: bool) -> list[str]:
    """The literal texts between the stars: `a*b*` -> ['a', 'b', '']."""
    if not backslash_escapes:
        return pattern.split("*")
    runs, current, i = [], [], 0
    while i < len(pattern):
        if pattern.startswith("\\*", i):
            current.append("*")
            i += 2
            continue
        if pattern[i] == "*":
            runs.append("".join(current))
            current = []
        else:
            current.append(pattern[i])
        i += 1
    runs.append("".join(current))
    return runs


def _matches(parts: list[str], value: str) -> bool:
    if len(parts) == 1:
        return value == parts[0]
    first, middle, last = parts[0], parts[1:-1], parts[-1]
    if len(value) < len(first) + len(last) or not value.startswith(first) or not value.endswith(last):
        return False
    position, end = len(first), len(value) - len(last)
    for run in middle:
        found = value.find(run, position, end)
        if found < 0:
            return False
        position = found + len(run)
    return True
