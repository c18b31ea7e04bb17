"""Constraint violations as AWS words them: the model's constraints on a scalar (enum, pattern,
length, range) with their texts, Java patterns, values rendered as Java's toString, the order
AWS lists several members' errors in (`aws_member_order`), and the ValidationException that
collects them (`violations`). See `validation`'s docstring for where AWS may differ."""
from __future__ import annotations

import math
import re
import time
from decimal import Decimal
from typing import Any, Callable

from .conversions import BYTES_TYPES, FLOATS, INTEGERS
from .errors import AwsError, validation_error

MAX_LISTED_ERRORS = 10
# Enum sets whose order in AWS's "Member must satisfy enum value set" is recorded and differs from
# the model's, by service and shape (the same values, reordered).
AWS_ENUM_ORDER: dict[str, dict[str, list[str]]] = {
    # LocalStack's AWS snapshots, test_lambda_api::test_create_event_source_validation_kinesis and
    # TestLambdaRecursion::test_put_function_recursion_config_invalid_value
    "lambda": {"EventSourcePosition": ["LATEST", "AT_TIMESTAMP", "TRIM_HORIZON"],
               "RecursiveLoop": ["Terminate", "Allow"]},
}


# Patterns: Java regexes, compiled lazily, matched against the whole value.

PATTERNS: dict[str, Callable[[str], Any] | None] = {}
JAVA_SURROGATES = re.compile(r"\\u(D[89AB][0-9A-F]{2})\\u(D[C-F][0-9A-F]{2})", re.IGNORECASE)
ASCII_CLASSES = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\x0B\\f\\r"}


def pattern_matcher(pattern: str) -> Callable[[str], Any] | None:
    """`fullmatch` for a model pattern, or None when no available engine can parse it."""
    try:
        return PATTERNS[pattern]
    except KeyError:
        pass
    source = JAVA_SURROGATES.sub(
        lambda m: "\\U%08X" % (0x10000 + ((int(m.group(1), 16) - 0xD800) << 10) + int(m.group(2), 16) - 0xDC00),
        pattern)
    matcher = None
    try:
        matcher = re.compile(source, re.ASCII).fullmatch  # Java's \d \w \s \b are ASCII-only
    except re.error:
        try:
            import regex  # type: ignore[import-not-found]  # optional: Unicode \p{..} classes
            matcher = regex.compile(ascii_escapes(source)).fullmatch
        except Exception:  # not installed, or a construct neither engine knows: skip the pattern
            matcher = None
    PATTERNS[pattern] = matcher
    return matcher


def ascii_escapes(pattern: str) -> str:
    """Rewrite \\d \\w \\s to Java's ASCII meaning for the `regex` engine (kept Unicode-aware
    there so that \\p{L} and friends still mean what they do in Java)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in ASCII_CLASSES:
                out.append(ASCII_CLASSES[nxt] if in_class else f"[{ASCII_CLASSES[nxt]}]")
            elif nxt.lower() in ASCII_CLASSES and not in_class:
                out.append(f"[^{ASCII_CLASSES[nxt.lower()]}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def utf16_len(value: str) -> int:
    """String length as Java counts it (UTF-16 code units)."""
    if value.isascii():
        return len(value)
    return len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)


def lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


# Member order in AWS's messages (see the module docstring).

def java_string_hash(text: str) -> int:
    """`String.hashCode` (over UTF-16 code units, in 32 bits)."""
    data, h = text.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java7_spread(h: int) -> int:
    h ^= (h >> 20) ^ (h >> 12)
    return h ^ (h >> 7) ^ (h >> 4)


def aws_member_order(names: list[str]) -> list[str]:
    """Members in the order AWS lists their errors: a Java 7 HashMap's iteration order over the
    lowerCamelCase names, inserted in model order (capacity 16, doubling past 3/4 full; a new entry
    goes to the head of its bucket, and a resize re-links each bucket head-first)."""
    capacity, size, table = 16, 0, [[] for _ in range(16)]
    for name in names:
        h = java7_spread(java_string_hash(lower_first(name)))
        if size >= capacity * 3 // 4 and table[h & (capacity - 1)]:
            capacity *= 2
            grown: list[list[str]] = [[] for _ in range(capacity)]
            for bucket in table:
                for old in bucket:
                    grown[java7_spread(java_string_hash(lower_first(old))) & (capacity - 1)].insert(0, old)
            table = grown
        table[h & (capacity - 1)].insert(0, name)
        size += 1
    return [name for bucket in table for name in bucket]


# Rendering values as Java's toString would, for "Value '...' at ...".

def java_double(value: float) -> str:
    """`Double.toString`: plain between 10^-3 and 10^7, else computerized scientific notation."""
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent + len(text) - 1}"


def render(value: Any, shape: dict[str, Any] | None, shapes: dict[str, Any]) -> str:
    if value is None:
        return "null"
    kind = shape["type"] if shape is not None else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, BYTES_TYPES):
        return f"java.nio.HeapByteBuffer[pos=0 lim={len(value)} cap={len(value)}]"
    if kind == "timestamp" and isinstance(value, (int, float)):
        return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(value))
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        member = shapes[shape["member"]["shape"]] if kind == "list" else None
        return "[" + ", ".join(render(item, member, shapes) for item in value) + "]"
    if isinstance(value, dict):
        if kind == "structure":
            members = shape.get("members", {})
            inner = ", ".join(f"{lower_first(name)}={render(value.get(name), shapes[ref['shape']], shapes)}"
                              for name, ref in members.items())
            return f"{shape.get('_name', 'Object')}({inner})"
        val_shape = shapes[shape["value"]["shape"]] if kind == "map" else None
        return "{" + ", ".join(f"{k}={render(v, val_shape, shapes)}" for k, v in value.items()) + "}"
    return str(value)


def constraint_error(value: Any, shape: dict[str, Any] | None, shapes: dict[str, Any], path: str,
                      message: str) -> str:
    rendered = render(value, shape, shapes)
    if value is not None:
        rendered = f"'{rendered}'"
    return f"Value {rendered} at '{path}' failed to satisfy constraint: {message}"


def null_member(path: str) -> str:
    """The violation of a member that must be present, at `path` ("records.2.member.partitionKey"),
    for services that require a member the model leaves optional."""
    return constraint_error(None, None, {}, path, "Member must not be null")


def violations(errors: list[str]) -> AwsError:
    """One ValidationException for constraint violations, as Coral words it: at most
    MAX_LISTED_ERRORS listed and counted ("10 validation errors detected: ...; ...")."""
    errors = errors[:MAX_LISTED_ERRORS]
    plural = "s" if len(errors) > 1 else ""
    return validation_error(f"{len(errors)} validation error{plural} detected: " + "; ".join(errors))


def number_text(limit: Any) -> str:
    return java_double(limit) if isinstance(limit, float) else str(limit)


def scalar_constraints(shape: dict[str, Any]) -> list[tuple[str, Callable[[Any], bool]]]:
    """The model's constraints on a scalar shape, each as (AWS's wording, predicate on a converted
    value), in the order AWS reports them for one member."""
    kind = shape["type"]
    lo, hi = shape.get("min"), shape.get("max")
    out: list[tuple[str, Callable[[Any], bool]]] = []
    if kind == "string":
        if "enum" in shape:
            allowed = frozenset(shape["enum"])
            out.append((f"Member must satisfy enum value set: [{', '.join(shape['enum'])}]",
                        lambda v, a=allowed: v in a))
        if "pattern" in shape:
            pattern = shape["pattern"]
            out.append((f"Member must satisfy regular expression pattern: {pattern}",
                        lambda v, p=pattern: (m := pattern_matcher(p)) is None or m(v) is not None))
        if lo is not None:
            out.append((f"Member must have length greater than or equal to {lo}", lambda v, n=lo: utf16_len(v) >= n))
        if hi is not None:
            out.append((f"Member must have length less than or equal to {hi}", lambda v, n=hi: utf16_len(v) <= n))
    elif kind == "blob":
        if lo is not None:
            out.append((f"Member must have length greater than or equal to {lo}", lambda v, n=lo: len(v) >= n))
        if hi is not None:
            out.append((f"Member must have length less than or equal to {hi}", lambda v, n=hi: len(v) <= n))
    elif kind in INTEGERS or kind in FLOATS:
        if lo is not None:
            out.append((f"Member must have value greater than or equal to {number_text(lo)}", lambda v, n=lo: v >= n))
        if hi is not None:
            out.append((f"Member must have value less than or equal to {number_text(hi)}", lambda v, n=hi: v <= n))
    return out


def collection_constraint_text(shape: dict[str, Any]) -> str:
    """The bracketed list AWS gives for constraints on a collection's scalar elements:
    "[Member must have length less than or equal to 128, Member must have length greater ...]"."""
    texts = [text for text, _ in scalar_constraints(shape)]
    # AWS lists the upper bound first (kinesalite's recordings for TagKeys and Tags).
    lengths = [t for t in texts if " than or equal to " in t]
    others = [t for t in texts if " than or equal to " not in t]
    return "[" + ", ".join(list(reversed(lengths)) + others) + "]"
