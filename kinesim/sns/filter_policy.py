"""Subscription filter policies (AWS's "Amazon SNS message filtering" documentation): does a
message reach a subscription?

A policy is a JSON object; with FilterPolicyScope MessageAttributes (the default) its keys name
message attributes, with MessageBody they mirror the (JSON) message's structure. Each leaf is a
list of conditions, one of which must match: an exact string or number, `{"prefix": s}`,
`{"suffix": s}`, `{"equals-ignore-case": s}`, `{"anything-but": value | [values] | {"prefix": s}}`,
`{"numeric": [op, n(, op, n)]}`, `{"exists": bool}`, `{"cidr": "addr/bits"}`. Every key of the
policy must match (AND); `"$or": [policy, ...]` matches when one of its policies does, when the
policy compiled with `$or` as an OR (filter_policy_rules.py). String.Array attributes and arrays
in the body match when one element does. A message the policy cannot apply to (a body that is not
JSON under MessageBody scope) is not delivered, as AWS filters it out.

Only policies SNS accepts are evaluated (filter_policy_rules.checked, remembered per text): their
nesting is bounded there, so the recursion here is too. A stored policy SNS would refuse (one saved
by an older kinesim) matches nothing, with a warning: it never fails the Publish.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json

from . import filter_policy_rules as rules

if TYPE_CHECKING:
    from .delivery import Message

log = logging.getLogger("kinesim.sns")

_MISSING = object()
_NUMERIC = {"=": lambda a, b: a == b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
            ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def matches(sub_attributes: dict[str, str], msg: "Message") -> bool:
    raw = sub_attributes.get("FilterPolicy")
    if not raw:
        return True
    scope = sub_attributes.get("FilterPolicyScope") or rules.MESSAGE_ATTRIBUTES
    try:
        policy = rules.checked(raw, scope)
    except rules.PolicyRefused as err:
        log.warning("SNS: a stored filter policy SNS refuses (%s) matches no message", err)
        return False
    if scope == rules.MESSAGE_BODY:
        try:
            body = user_json.loads(msg.text("default") if isinstance(msg.message, dict) else msg.message)
        except user_json.InvalidJson:
            return False
        return isinstance(body, dict) and _match_object(policy.doc, body, policy.or_relationship)
    attributes = {name: _attribute_value(a) for name, a in msg.attributes.items()}
    return _match_object(policy.doc, attributes, policy.or_relationship)


def _attribute_value(attr: dict[str, Any]) -> Any:
    kind = attr.get("DataType", "")
    text = attr.get("StringValue")
    if kind.startswith("Number"):
        try:
            return float(text)
        except (TypeError, ValueError):
            return text
    if kind.startswith("String.Array"):
        try:
            return user_json.loads(text)
        except (TypeError, user_json.InvalidJson):
            return text
    if kind.startswith("Binary"):
        return _MISSING  # binary attributes are not matched by filter policies
    return text


def _match_object(policy: dict[str, Any], doc: dict[str, Any], or_relationship: bool) -> bool:
    for key, rule in policy.items():
        if or_relationship and key == rules.OR:
            if not any(_match_object(p, doc, or_relationship) for p in rule):
                return False
            continue
        value = doc.get(key, _MISSING) if isinstance(doc, dict) else _MISSING
        if isinstance(rule, dict):
            if value is _MISSING or not (isinstance(value, dict) and _match_object(rule, value, or_relationship)):
                return False
        elif not _match_leaf(rule, value):
            return False
    return True


def _match_leaf(conditions: Any, value: Any) -> bool:
    if not isinstance(conditions, list):
        conditions = [conditions]
    values = value if isinstance(value, list) else [value]
    return any(_condition(c, v) for c in conditions for v in values) or \
        any(isinstance(c, dict) and c.get("exists") is False and value is _MISSING for c in conditions)


def _condition(cond: Any, value: Any) -> bool:
    if value is _MISSING:
        return False
    if not isinstance(cond, dict):
        if isinstance(cond, (int, float)) and not isinstance(cond, bool):
            return _number(value) == cond
        return cond == value
    if "exists" in cond:
        return cond["exists"] is True
    if "prefix" in cond:
        return isinstance(value, str) and value.startswith(cond["prefix"])
    if "suffix" in cond:
        return isinstance(value, str) and value.endswith(cond["suffix"])
    if "equals-ignore-case" in cond:
        return isinstance(value, str) and value.lower() == str(cond["equals-ignore-case"]).lower()
    if "anything-but" in cond:
        but = cond["anything-but"]
        if isinstance(but, dict):
            return not (isinstance(value, str) and "prefix" in but and value.startswith(but["prefix"]))
        excluded = but if isinstance(but, list) else [but]
        return not any(_condition(e, value) for e in excluded)
    if "numeric" in cond:
        number = _number(value)
        if number is None:
            return False
        spec = cond["numeric"]
        return all(_NUMERIC.get(op, lambda a, b: False)(number, bound) for op, bound in zip(spec[::2], spec[1::2]))
    if "cidr" in cond:
        return isinstance(value, str) and _in_cidr(value, cond["cidr"])
    return False


def _in_cidr(value: str, cidr: str) -> bool:
    """event-ruler's CIDR match: an address of the range's family within its (inclusive) bounds."""
    size, address = rules.ip_address(value)
    low_size, low, high = rules.cidr_range(cidr)
    return size == low_size and low <= address <= high


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None
