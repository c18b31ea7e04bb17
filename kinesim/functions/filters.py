"""Event filtering for event source mappings: AWS's FilterCriteria, EventBridge's pattern syntax.

A mapping's `FilterCriteria` holds up to a few `{"Pattern": "<json>"}` filters; a record is sent to
the function when any pattern matches it, and otherwise skipped (the poller moves past it).
A pattern is a JSON object whose leaves are arrays of rules; every key must match (AND), the
rules in one array are alternatives (OR), `$or` offers alternative sub-patterns. Rules:

    "v", 1, true, null              exact value (type-aware: 300 and 300.0 differ, as AWS says)
    {"prefix": "ab"}                also {"prefix": {"equals-ignore-case": "ab"}}
    {"suffix": "yz"}                also {"suffix": {"equals-ignore-case": "yz"}}
    {"equals-ignore-case": "Ab"}
    {"anything-but": "v" | ["v", 2] | {"prefix"|"suffix"|"wildcard"|"equals-ignore-case": ...}}
    {"numeric": [">", 0, "<=", 5]}
    {"exists": true | false}
    {"wildcard": "a*c"}             `*` is any run of characters, `\\*` a literal star
    {"cidr": "10.0.0.0/24"}

An array in the event matches a rule when any of its elements does (arrays are flattened, as
EventBridge does). For Kinesis, patterns see the record's fields with `data` decoded from base64
and parsed as JSON; a record whose data is not JSON never matches a pattern about `data` (AWS
drops it).

Hand-written on purpose: no maintained Python library implements this matcher (moto's is
test-only here, the `event-ruler` package on PyPI is an unmaintained toy).
"""
from __future__ import annotations

import base64
import ipaddress
from functools import lru_cache
from typing import Any, Callable

from ..protocol import user_json
from ..protocol.errors import AwsError
from ..wildcards import wildcard_matcher

_INVALID = "Invalid filter pattern definition."
_NUMERIC_OPS = {"=", "<", "<=", ">", ">="}
_NOT_JSON = object()  # the `data` of a Kinesis record that is not JSON, a Kafka `value` neither JSON nor text


def invalid(detail: str | None = None) -> AwsError:
    # AWS answers every malformed pattern with this one sentence; the detail only helps our logs.
    err = AwsError("InvalidParameterValueException", _INVALID)
    err.detail = detail
    return err


class FilterCriteria:
    """The compiled filters of one mapping."""

    def __init__(self, patterns: list[dict[str, Any]]):
        self.patterns = patterns

    @classmethod
    def parse(cls, criteria: dict[str, Any] | None) -> "FilterCriteria | None":
        """The mapping's FilterCriteria compiled, None when there is nothing to filter on.

        Raises AwsError InvalidParameterValueException for a pattern AWS would refuse.
        """
        filters = (criteria or {}).get("Filters") or []
        patterns = []
        for f in filters:
            text = f.get("Pattern") if isinstance(f, dict) else None
            if not isinstance(text, str):
                raise invalid("a filter without a Pattern string")
            try:
                pattern = user_json.loads(text)
                check_pattern(pattern)
            except user_json.InvalidJson:
                raise invalid("the pattern is not JSON") from None
            except RecursionError:  # checking walks the pattern: bounded by loads' depth, still too deep
                raise invalid("the pattern is nested too deeply") from None
            patterns.append(pattern)
        return cls(patterns) if patterns else None

    def matches(self, view: dict[str, Any]) -> bool:
        try:
            return any(_match(p, [view], top=True) for p in self.patterns)
        except RecursionError:
            # Matching walks the record's data: data nested near user_json's depth limit matches no
            # pattern (it stopped the mapping for good: the batch failed again on every poll).
            return False


def kinesis_view(entry: dict[str, Any], data: bytes) -> dict[str, Any]:
    """What patterns see of a Kinesis event record: its fields and its `kinesis` fields side by
    side, `data` parsed as JSON."""
    view = {k: v for k, v in entry.items() if k != "kinesis"}
    view.update(entry["kinesis"])
    try:
        view["data"] = user_json.loads(data)
    except ValueError:  # InvalidJson (syntax, or nested past its depth limit), UnicodeDecodeError
        view["data"] = _NOT_JSON
    return view


def kafka_view(value: bytes | None) -> dict[str, Any]:
    """What patterns see of a Kafka record: its `value` only (AWS: "Amazon MSK and self-managed
    Apache Kafka event source mappings only support filtering on the value key"), parsed as JSON,
    else as the plain string it is (the guide's producers write "valid JSON format or plain
    strings"); a value that is neither (binary, null) matches no pattern about it."""
    if value is None:
        return {"value": _NOT_JSON}
    try:
        return {"value": user_json.loads(value)}
    except ValueError:  # InvalidJson (syntax, or nested past its depth limit), UnicodeDecodeError
        pass
    try:
        return {"value": value.decode()}
    except UnicodeDecodeError:
        return {"value": _NOT_JSON}


def decoded(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["kinesis"]["data"])


# validation

def check_pattern(pattern: Any) -> None:
    if not isinstance(pattern, dict):
        raise invalid("a pattern must be a JSON object")
    for key, value in pattern.items():
        if key == "$or":
            if not isinstance(value, list) or not value:
                raise invalid("$or takes a non-empty array of patterns")
            for sub in value:
                check_pattern(sub)
        elif isinstance(value, dict):
            check_pattern(value)
        elif isinstance(value, list):
            if not value:
                raise invalid(f"empty array of rules for {key!r}")
            for rule in value:
                _check_rule(rule)
        else:
            raise invalid(f"{key!r} must be an object or an array")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int, float))


def _string_or_ignore_case(operand: Any) -> bool:
    return isinstance(operand, str) or (
        isinstance(operand, dict) and list(operand) == ["equals-ignore-case"]
        and isinstance(operand["equals-ignore-case"], str))


def _strings(operand: Any) -> bool:
    return isinstance(operand, str) or (
        isinstance(operand, list) and operand and all(isinstance(s, str) for s in operand))


def _check_rule(rule: Any) -> None:
    if _is_scalar(rule):
        return
    if not isinstance(rule, dict) or len(rule) != 1:
        raise invalid("a rule is a value or an object with one operator")
    (op, operand), = rule.items()
    ok = {
        "prefix": lambda o: _string_or_ignore_case(o),
        "suffix": lambda o: _string_or_ignore_case(o),
        "equals-ignore-case": lambda o: _strings(o),
        "exists": lambda o: isinstance(o, bool),
        "wildcard": lambda o: _strings(o) and all("**" not in s for s in _as_list(o)),
        "numeric": _numeric_ok,
        "anything-but": _anything_but_ok,
        "cidr": _cidr_ok,
    }.get(op)
    if ok is None or not ok(operand):
        raise invalid(f"bad operand for {op!r}")


def _numeric_ok(operand: Any) -> bool:
    if not isinstance(operand, list) or len(operand) not in (2, 4):
        return False
    ops, values = operand[0::2], operand[1::2]
    return all(op in _NUMERIC_OPS for op in ops) and all(_is_number(v) for v in values) \
        and (len(ops) == 1 or "=" not in ops)


def _anything_but_ok(operand: Any) -> bool:
    if isinstance(operand, (str, int, float)) and not isinstance(operand, bool):
        return True
    if isinstance(operand, list):
        return bool(operand) and all(isinstance(v, str) or _is_number(v) for v in operand)
    if isinstance(operand, dict) and len(operand) == 1:
        (op, inner), = operand.items()
        if op in ("prefix", "suffix"):
            return isinstance(inner, str)
        if op in ("equals-ignore-case", "wildcard"):
            return _strings(inner)
    return False


def _cidr_ok(operand: Any) -> bool:
    try:
        ipaddress.ip_network(operand, strict=False)
    except (TypeError, ValueError):
        return False
    return True


# matching

def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def _flatten(value: Any, out: list) -> None:
    if isinstance(value, list):
        for v in value:
            _flatten(v, out)
    else:
        out.append(value)


def _children(nodes: list, key: str) -> list:
    """The values under `key` in each of `nodes`, arrays flattened."""
    out: list = []
    for node in nodes:
        if isinstance(node, dict) and key in node:
            _flatten(node[key], out)
    return out


def _match(pattern: dict[str, Any], nodes: list, top: bool = False) -> bool:
    for key, rule in pattern.items():
        if key == "$or":
            if not any(_match(sub, nodes, top) for sub in rule):
                return False
            continue
        values = _children(nodes, key)
        if top and key in ("data", "value") and any(v is _NOT_JSON for v in values):  # Kinesis', Kafka's
            return False
        if isinstance(rule, dict):
            if not _match(rule, [v for v in values if isinstance(v, dict)]):
                return False
        elif not _match_rules(rule, [v for v in values if not isinstance(v, dict)]):
            return False
    return True


def _match_rules(rules: list, leaves: list) -> bool:
    for rule in rules:
        if isinstance(rule, dict):
            (op, operand), = rule.items()
            if op == "exists":
                if bool(leaves) == operand:
                    return True
            elif any(_apply(op, operand, v) for v in leaves):
                return True
        elif any(_equal(v, rule) for v in leaves):
            return True
    return False


def _equal(a: Any, b: Any) -> bool:
    # JSON values are equal when they are the same type and value: true is not 1, 300 is not 300.0.
    return type(a) is type(b) and a == b


def _apply(op: str, operand: Any, v: Any) -> bool:
    if op == "prefix":
        return _affix(operand, v, str.startswith)
    if op == "suffix":
        return _affix(operand, v, str.endswith)
    if op == "equals-ignore-case":
        return isinstance(v, str) and any(v.casefold() == s.casefold() for s in _as_list(operand))
    if op == "wildcard":
        return isinstance(v, str) and any(_wildcard(p)(v) for p in _as_list(operand))
    if op == "numeric":
        return _is_number(v) and all(_compare(v, o, n) for o, n in zip(operand[0::2], operand[1::2]))
    if op == "anything-but":
        return _anything_but(operand, v)
    if op == "cidr":
        return _in_network(operand, v)
    return False


def _affix(operand: Any, v: Any, test) -> bool:
    if not isinstance(v, str):
        return False
    if isinstance(operand, dict):
        return test(v.casefold(), operand["equals-ignore-case"].casefold())
    return test(v, operand)


def _compare(v: float, op: str, n: float) -> bool:
    return {"=": v == n, "<": v < n, "<=": v <= n, ">": v > n, ">=": v >= n}[op]


def _anything_but(operand: Any, v: Any) -> bool:
    if isinstance(operand, dict):
        (op, inner), = operand.items()
        # The string forms (prefix, suffix, wildcard, equals-ignore-case) only apply to strings.
        return isinstance(v, str) and not _apply(op, inner, v)
    return not any(_equal(v, x) for x in _as_list(operand))


def _in_network(operand: str, v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        return ipaddress.ip_address(v) in ipaddress.ip_network(operand, strict=False)
    except ValueError:
        return False


@lru_cache(maxsize=1024)
def _wildcard(pattern: str) -> Callable[[str], bool]:
    # Not a regex: `.*a.*a.*...b` backtracks, and a record's value is the client's (linear-time
    # matcher in kinesim.wildcards). Bounded cache: patterns come from clients too.
    return wildcard_matcher(pattern, backslash_escapes=True)
