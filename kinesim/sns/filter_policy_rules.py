"""Which filter policies SNS accepts, and its words for the ones it refuses.

SNS checks a policy when it is set (Subscribe's Attributes, SetSubscriptionAttributes) and refuses
a bad one with InvalidParameter; a policy it accepted never fails a Publish. Its texts, recorded
from AWS in LocalStack's tests/aws/services/sns/test_sns_filter_policy.snapshot.json, are those of
AWS's rule compiler, event-ruler (github.com/aws/event-ruler: JsonRuleCompiler and RuleCompiler,
as of early 2023, before `anything-but` took `suffix`: AWS answered "Unsupported anything-but
pattern: suffix" in 2024), with Jackson's location (policy_tokens.py). Then SNS's own limits
(its "Filter policy constraints" documentation; texts recorded as above):

* at most 5 keys ("Filter policy can not have more than 5 keys"; top-level keys only);
* no nesting with FilterPolicyScope MessageAttributes;
* at most 150 combinations ("Filter policy is too complex"): the product, over the policy's
  arrays, of each array's length times its nesting depth, summed over `$or` branches (LocalStack's
  formula, which reproduces AWS's answers to its recorded policies).

`$or` is an OR only when the whole policy compiles so (an array of at least two objects, none of
them using an operator's name as a key); otherwise the compiler tries again with `$or` as an
ordinary key (event-ruler's GenericMachine.addRule, and SNS's "AND/OR logic" documentation:
"Otherwise "$or" is treated as a normal attribute name"). So `{"$or": [7]}` is accepted: it
matches a property named `$or` whose value is 7.

Operators are SNS's documented ones: exact values, prefix, suffix, equals-ignore-case,
anything-but (a value, a list, or {"prefix": ...}), numeric, exists, cidr. event-ruler also knows
`exactly` and `wildcard`, which SNS does not document (its filter operator list has neither), so
here they get the compiler's answer to an unknown operator.

Everything here is linear in the policy and bounded in recursion: the compiler keeps its own
stack, and the combination count stops descending once the answer can only be "too complex".
"""
from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

import orjson

from kinesim.protocol import user_json

from .policy_tokens import (END_ARRAY, END_OBJECT, FALSE, FIELD_NAME, NULL, NUMBER, START_ARRAY, START_OBJECT, STRING,
                            TRUE, JsonParseError, Tokens, compact)

MESSAGE_ATTRIBUTES, MESSAGE_BODY = "MessageAttributes", "MessageBody"
MAX_KEYS = 5
MAX_COMBINATIONS = 150
OR = "$or"
# event-ruler's Constants.RESERVED_FIELD_NAMES_IN_OR_RELATIONSHIP
_RESERVED_IN_OR = frozenset([
    "exactly", "equals-ignore-case", "prefix", "suffix", "anything-but", "exists", "wildcard", "numeric", "cidr",
    "=", "<", "<=", ">", ">=", "regex", "not-wildcard", "not-equals-ignore-case", "date-after", "date-on-or-after",
    "date-before", "date-on-or-before", "in-date-range", "ip-address-in-range", "ip-address-not-in-range"])
_FIVE_BILLION = 5e9  # event-ruler's ComparableNumber range
_IPV4 = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_IPV6 = re.compile(r"[0-9a-fA-F:]*:[0-9a-fA-F:]*")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_CACHED_TEXT = 256 * 1024  # SNS's largest filter policy; larger texts are checked again when used


class PolicyRefused(ValueError):
    """SNS's refusal of a policy: `str()` is the text after "Invalid parameter: " and, for
    Subscribe, "Attributes Reason: " (e.g. `FilterPolicy: Empty arrays are not allowed ...`)."""


class _IllegalArgument(Exception):
    """event-ruler's IllegalArgumentException: a text without Jackson's location."""


@dataclass(frozen=True)
class FilterPolicy:
    """A policy SNS accepts: its document, and whether `$or` in it means OR."""
    doc: dict[str, Any]
    or_relationship: bool


def check(text: str, scope: str) -> FilterPolicy:
    """The policy, or PolicyRefused with SNS's words."""
    try:
        doc = user_json.loads(text)
    except user_json.InvalidJson as err:
        raise PolicyRefused(f"FilterPolicy: failed to parse JSON. {err}") from None
    try:
        or_relationship = _compile_either_way(_fast_compact(doc))
    except (JsonParseError, _IllegalArgument):
        try:  # again on Jackson's own text, for Jackson's columns and spelling of numbers in the message
            or_relationship = _compile_either_way(compact(doc))
        except (JsonParseError, _IllegalArgument) as err:
            raise PolicyRefused(f"FilterPolicy: {err}") from None
    # A compiled policy is an object, each value an object or a non-empty array, no object empty.
    if len(doc) > MAX_KEYS:
        raise PolicyRefused("FilterPolicy: Filter policy can not have more than 5 keys")
    if scope != MESSAGE_BODY and _nested(doc, or_relationship):
        raise PolicyRefused("Filter policy scope MessageAttributes does not support nested filter policy")
    if _combinations(doc, or_relationship) > MAX_COMBINATIONS:
        raise PolicyRefused("FilterPolicy: Filter policy is too complex")
    return FilterPolicy(doc, or_relationship)


def checked(text: str, scope: str) -> FilterPolicy:
    """`check`, remembered for the texts Publish meets again and again."""
    if len(text) <= _CACHED_TEXT:
        return _checked_cached(text, scope)
    return check(text, scope)


@functools.lru_cache(maxsize=64)
def _checked_cached(text: str, scope: str) -> FilterPolicy:
    return check(text, scope)


def _fast_compact(doc: Any) -> str:
    """The document as compact JSON, written in C when it can be: the same tokens as Jackson's
    text (`compact`), though numbers and escapes may be spelt otherwise; enough to compile it."""
    try:
        return orjson.dumps(doc).decode()
    except orjson.JSONEncodeError:  # deeper than orjson writes (255)
        return compact(doc)


# event-ruler's compilers

def _compile_either_way(source: str) -> bool:
    """Whether `$or` means OR: JsonRuleCompiler first; on a JsonParseException, RuleCompiler (which
    knows no `$or`) decides, and its error is the one reported. An IllegalArgumentException (a CIDR,
    a number out of range) is no parse error: it is reported as it is."""
    try:
        _compile(Tokens(source), or_relationship=True)
        return True
    except JsonParseError:
        _compile(Tokens(source), or_relationship=False)
        return False


class _Frame:
    __slots__ = ("is_or", "in_or", "members")

    def __init__(self, is_or: bool, in_or: bool):
        self.is_or, self.in_or, self.members = is_or, in_or, 0


def _compile(tokens: Tokens, or_relationship: bool) -> None:
    """JsonRuleCompiler.parseObject / parseObjectInsideOrRelationship / parseIntoOrRelationship
    (or RuleCompiler.parseObject), with a stack of its own in place of recursion."""
    if tokens.next() != START_OBJECT:
        raise tokens.error("Filter is not an object")
    stack = [_Frame(is_or=False, in_or=False)]
    while stack:
        frame = stack[-1]
        token = tokens.next()
        if frame.is_or:  # inside "$or": [ ... ]
            if token == END_ARRAY:
                if frame.members < 2:
                    raise tokens.error("There must have at least 2 Objects in $or relationship.")
                stack.pop()
                continue
            frame.members += 1
            if token != START_OBJECT:
                raise tokens.error("Only JSON object is allowed in array of $or relationship.")
            stack.append(_Frame(is_or=False, in_or=True))
            continue
        if token == END_OBJECT:
            if not frame.members:
                raise tokens.error("Empty objects are not allowed")
            stack.pop()
            continue
        frame.members += 1
        name = tokens.name
        if or_relationship and name == OR:
            if tokens.next() != START_ARRAY:
                raise tokens.error("It must be an Array followed with $or.")
            stack.append(_Frame(is_or=True, in_or=True))
            continue
        if frame.in_or and name in _RESERVED_IN_OR:
            raise tokens.error(f"{name} is Ruler reserved fieldName which cannot be used inside $or.")
        token = tokens.next()
        if token == START_OBJECT:
            stack.append(_Frame(is_or=False, in_or=frame.in_or))
        elif token == START_ARRAY:
            _rules(tokens)
        else:
            raise tokens.error(f'"{name}" must be an object or an array')


def _rules(tokens: Tokens) -> None:
    """writeRules: the values of one key, up to the array's end."""
    count = 0
    while (token := tokens.next()) != END_ARRAY:
        count += 1
        if token == START_OBJECT:
            _match_expression(tokens)
        elif token == STRING:
            tokens.text_value()
        elif token not in (NUMBER, NULL, TRUE, FALSE):
            raise tokens.error("Match value must be String, number, true, false, or null")
    if not count:
        raise tokens.error("Empty arrays are not allowed")


def _match_expression(tokens: Tokens) -> None:
    """processMatchExpression: one `{operator: ...}` object, up to its end."""
    if tokens.next() != FIELD_NAME:
        raise tokens.error("Match expression name not found")
    name = tokens.name
    if name in ("prefix", "suffix", "equals-ignore-case"):
        if tokens.next() != STRING:
            raise tokens.error(f"{name} match pattern must be a string")
        tokens.text_value()
        _one_key(tokens)
    elif name == "numeric":
        if tokens.next() != START_ARRAY:
            raise tokens.error("Value of numeric must be an array.")
        _numeric(tokens)
        if tokens.next() != END_OBJECT:
            raise tokens.error("Too many elements in numeric expression")
    elif name == "anything-but":
        _anything_but(tokens)
    elif name == "exists":
        if tokens.next() not in (TRUE, FALSE):
            raise tokens.error("exists match pattern must be either true or false.")
        _one_key(tokens)
    elif name == "cidr":
        if tokens.next() != STRING:
            raise tokens.error("prefix match pattern must be a string")  # sic: event-ruler's text, recorded
        cidr_range(tokens.text_value())
        _one_key(tokens)
    else:
        raise tokens.error(f"Unrecognized match type {name}")


def _one_key(tokens: Tokens) -> None:
    if tokens.next() != END_OBJECT:
        raise tokens.error("Only one key allowed in match expression")


def _anything_but(tokens: Tokens) -> None:
    token = tokens.next()
    if token == START_OBJECT:
        if tokens.next() != FIELD_NAME:
            raise tokens.error("Anything-But expression name not found")
        if tokens.name != "prefix":
            raise tokens.error(f"Unsupported anything-but pattern: {tokens.name}")
        if tokens.next() != STRING:
            raise tokens.error("prefix match pattern must be a string")
        if not tokens.text_value():
            raise tokens.error("Null prefix not allowed")
        _one_key(tokens)
        _one_key(tokens)
        return
    if token not in (START_ARRAY, STRING, NUMBER):
        raise tokens.error("Value of anything-but must be an array or single string/number value.")
    if token == START_ARRAY:
        numbers = strings = False
        while (token := tokens.next()) != END_ARRAY:
            if token == STRING:
                tokens.text_value()
                strings = True
            elif token == NUMBER:
                try:
                    _comparable(tokens.number())
                except _IllegalArgument as err:  # caught there and re-thrown at the parser's place
                    raise tokens.error(str(err)) from None
                numbers = True
            else:
                raise tokens.error("Inside anything but list, start|null|boolean is not supported.")
        if numbers == strings:
            raise tokens.error("Inside anything but list, either all values are number or string, mixed type is "
                               "not supported")
    elif token == NUMBER:
        _comparable(tokens.number())  # not caught there: no location
    if tokens.next() != END_OBJECT:
        raise tokens.error("Too many elements in numeric expression")


def _numeric(tokens: Tokens) -> None:
    """processNumericMatchExpression and completeNumericRange; a range the numbers cannot make is
    reported at the parser's place (caught and re-thrown there)."""
    if tokens.next() != STRING:
        raise tokens.error(f"Invalid member in numeric match: {tokens.text_value()}")
    operator = tokens.text_value()
    token = tokens.next()
    try:
        if operator not in ("=", ">=", ">", "<=", "<"):
            raise tokens.error(f"Unrecognized numeric range operator: {operator}")
        if token != NUMBER:
            raise tokens.error(f"Value of {'equals' if operator == '=' else operator} must be numeric")
        value = tokens.number()
        if operator in (">=", ">"):
            token = tokens.next()
            if token == END_ARRAY:
                _range(value, _FIVE_BILLION)
                return
            if token != STRING:
                raise tokens.error(f"Bad value in numeric range: {tokens.text_value()}")
            top_operator = tokens.text_value()
            if top_operator not in ("<", "<="):
                raise tokens.error(f"Bad numeric range operator: {top_operator}")
            if tokens.next() != NUMBER:
                raise tokens.error(f"Value of {top_operator} must be numeric")
            top = tokens.number()
            if tokens.next() != END_ARRAY:
                raise tokens.error("Too many terms in numeric range expression")
            _range(value, top)
            return
        if tokens.next() != END_ARRAY:
            raise tokens.error("Too many elements in numeric expression")
        if operator == "=":
            _comparable(value)
        else:
            _range(-_FIVE_BILLION, value)
    except _IllegalArgument as err:
        raise tokens.error(str(err)) from None


def _range(bottom: float, top: float) -> None:
    if bottom >= top:
        raise _IllegalArgument("Bottom must be less than top")
    _comparable(bottom)
    _comparable(top)


def _comparable(value: float) -> None:
    if not -_FIVE_BILLION <= value <= _FIVE_BILLION:
        raise _IllegalArgument("Value must be between -5.0E9 and 5.0E9, inclusive")


def cidr_range(text: str) -> tuple[int, int, int]:
    """event-ruler's CIDR.cidr: (address length in bytes, lowest, highest). The range starts at the
    address as written (host bits kept) and ends with the host bits set; a /32 (IPv4) or /128 is
    refused, as event-ruler refuses them."""
    parts = _java_split(text, "/")
    if len(parts) != 2:
        raise _IllegalArgument("Malformed CIDR, one '/' required")
    # Integer.parseInt: a sign, then digits, within 32 bits (the length check keeps int() cheap).
    if not _JAVA_INT.fullmatch(parts[1]) or len(parts[1]) > 12 or not -2**31 <= int(parts[1]) < 2**31:
        raise _IllegalArgument("Malformed CIDR, mask bits must be an integer")
    mask = int(parts[1])
    if mask < 0:
        raise _IllegalArgument("Malformed CIDR, mask bits must not be negative")
    size, address = ip_address(parts[0], strict=True)
    if size == 4 and mask > 31:
        raise _IllegalArgument("IPv4 mask bits must be < 32")
    if size == 16 and mask > 127:
        raise _IllegalArgument("IPv6 mask bits must be < 128")
    host_bits = size * 8 - mask
    return size, address, address | ((1 << host_bits) - 1)


def ip_address(text: str, strict: bool = False) -> tuple[int, int]:
    """(4 or 16, the address as a number) for what event-ruler takes as an IP address literal;
    otherwise _IllegalArgument with its texts (`strict`), or (0, 0)."""
    if _IPV4.fullmatch(text):
        numbers = [p.lstrip("0") or "0" for p in text.split(".")]
        if all(len(n) <= 3 and int(n) <= 255 for n in numbers):
            return 4, int.from_bytes(bytes(int(n) for n in numbers), "big")
    elif _IPV6.fullmatch(text):
        try:
            return 16, int(ipaddress.IPv6Address(text))
        except ValueError:
            pass
    else:
        if strict:
            raise _IllegalArgument(f"Nonstandard IP address: {text}")
        return 0, 0
    if strict:  # Java's InetAddress took it for a host name, and found none
        raise _IllegalArgument(f"Invalid IP address: {text}")
    return 0, 0


def _java_split(text: str, separator: str) -> list[str]:
    """Java's String.split: trailing empty strings are dropped."""
    parts = text.split(separator)
    if len(parts) == 1:
        return parts
    while parts and not parts[-1]:
        parts.pop()
    return parts


# SNS's limits, on a policy that compiled

def _nested(doc: dict[str, Any], or_relationship: bool) -> bool:
    """Whether a key's value is an object (within `$or` branches too)."""
    stack = [doc]
    while stack:
        for key, value in stack.pop().items():
            if or_relationship and key == OR:
                stack.extend(value)
            elif isinstance(value, dict):
                return True
    return False


# Past these, a compiled policy is too complex whatever lies below: every object holds at least one
# array (no empty objects), which multiplies the count by at least its depth; every `$or` array sums
# at least two branches, so n nested ones at least double the count n times (2^8 > 150).
_DEEPEST = MAX_COMBINATIONS
_DEEPEST_OR = 7


def _combinations(policy: dict[str, Any], or_relationship: bool, depth: int = 1, count: int = 1,
                  or_depth: int = 0) -> int:
    """LocalStack's FilterPolicyValidator.aggregate_rules count. It only grows, so it stops as
    soon as it passes the limit; its recursion is bounded by _DEEPEST and _DEEPEST_OR."""
    for key, value in policy.items():
        if or_relationship and key == OR:
            if or_depth >= _DEEPEST_OR:
                return MAX_COMBINATIONS + 1
            count = sum(_combinations(branch, or_relationship, depth, count, or_depth + 1) for branch in value)
        elif isinstance(value, dict):
            if depth >= _DEEPEST:
                return MAX_COMBINATIONS + 1
            count = _combinations(value, or_relationship, depth + 1, count, or_depth)
        else:
            count *= len(value) * depth
        if count > MAX_COMBINATIONS:
            return count
    return count
