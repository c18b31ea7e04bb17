"""Resource-based policy evaluation, for calls that cross accounts.

A call inside one account is not checked. A call whose caller's account differs from the
resource's account must be allowed by the resource's own policy (a Kinesis stream or consumer
policy, an SQS queue's or SNS topic's Policy attribute, an S3 bucket policy, a Lambda function's
AddPermission statements). `evaluate` gives the answer AWS's evaluation logic gives for one policy:
an explicit Deny wins, else any Allow allows, else the request is implicitly denied.

Supported: `Statement` as an object or a list; `Principal` / `NotPrincipal` as "*" or
{"AWS": ..., "Service": ...} (an account id or `:root` ARN stands for every principal of that
account, a role ARN for its assumed-role sessions too, a service when the context's
aws:PrincipalService names it); `Action` / `NotAction` (case-insensitive) and `Resource` /
`NotResource` (case-sensitive) with `*` and `?` wildcards; `Condition` with the String, Arn,
Numeric and Bool operators, Null, the `IfExists` suffix and the `ForAnyValue:` / `ForAllValues:`
prefixes. Context keys are looked up case-insensitively.

Lenient or simplified, deliberately:
- a statement with neither Resource nor NotResource applies to every resource;
- a statement with no Principal / NotPrincipal, or no Action / NotAction, applies to nobody (AWS
  refuses to store such a resource policy);
- a statement with an operator this module does not know (DateLessThan, IpAddress, ...) or an
  ill-typed element does not match: it neither allows nor denies;
- policy variables (`${aws:username}`) are not substituted;
- a policy that is not JSON or not an object evaluates to ImplicitDeny; nothing here raises.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

ALLOW, DENY, IMPLICIT_DENY = "Allow", "Deny", "ImplicitDeny"


@dataclass(frozen=True)
class Caller:
    account: str                  # 12 digits
    arn: str                      # ...:iam::ACCT:root, ...:iam::ACCT:user/x, ...:sts::ACCT:assumed-role/R/S
    role_arn: str | None = None   # an assumed-role session's role: arn:aws:iam::ACCT:role/path/R


# Condition keys (aws:SourceArn, aws:SourceAccount, ...) to a value, or to a multivalued key's values.
Context = dict[str, str | list[str]]


def evaluate(policy: str | dict | None, caller: Caller, action: str, resource: str,
             context: Context | None = None) -> str:
    """'Allow', 'Deny' (an explicit deny) or 'ImplicitDeny' (no statement allows). `action` as
    "kinesis:PutRecord"; aws:PrincipalAccount and aws:PrincipalArn come from `caller`."""
    statements = _statements(policy)
    ctx = {str(k).lower(): v for k, v in (context or {}).items()}
    # As AWS fills them: an assumed-role session's aws:PrincipalArn is its role's ARN.
    ctx["aws:principalaccount"] = caller.account
    ctx["aws:principalarn"] = caller.role_arn or caller.arn
    effects = {s.get("Effect") for s in statements if _applies(s, caller, action, resource, ctx)}
    if DENY in effects:
        return DENY
    return ALLOW if ALLOW in effects else IMPLICIT_DENY


def allows(policy: str | dict | None, caller: Caller, action: str, resource: str,
           context: Context | None = None) -> bool:
    return evaluate(policy, caller, action, resource, context) == ALLOW


def denied_message(caller_arn: str, action: str, resource: str, explicit: bool = False) -> str:
    """AWS's AccessDenied text for a cross-account call its resource's policy refuses.
    The wording is the IAM User Guide's ("Troubleshoot access denied error messages": "... with an
    explicit deny in a <type> policy" / "... because no <type> policy allows the <action> action"),
    as Kinesis, Lambda and SNS answer it, e.g. "User: arn:aws:sts::...:assumed-role/R/S is not
    authorized to perform: SNS:Subscribe on resource: arn:aws:sns:... because no resource-based
    policy allows the SNS:Subscribe action"."""
    head = f"User: {caller_arn} is not authorized to perform: {action} on resource: {resource}"
    if explicit:
        return f"{head} with an explicit deny in a resource-based policy"
    return f"{head} because no resource-based policy allows the {action} action"


# --- the document -------------------------------------------------------------------------

def _statements(policy: Any) -> list[dict]:
    if isinstance(policy, (str, bytes)):
        try:
            policy = json.loads(policy)
        except (ValueError, RecursionError):
            return []
    if not isinstance(policy, dict):
        return []
    statements = policy.get("Statement")
    statements = statements if isinstance(statements, list) else [statements]
    return [s for s in statements if isinstance(s, dict)]


def _strings(value: Any) -> list[str] | None:
    """An element's values: a string or a list of strings (JSON numbers and booleans as AWS reads
    them); None when it is anything else, which makes the statement not match."""
    values = value if isinstance(value, list) else [value]
    out = []
    for v in values:
        if isinstance(v, bool):
            out.append("true" if v else "false")
        elif isinstance(v, (str, int, float)):
            out.append(str(v))
        else:
            return None
    return out


def _element(statement: dict, name: str, test: Callable[[Any], bool | None], absent: bool) -> bool:
    """`name` (Action, Resource, Principal) must match and `Not<name>` must not; `absent` when the
    statement has neither. A test answers None for an ill-typed element: no match then."""
    results = {key: test(statement[key]) for key in (name, "Not" + name) if key in statement}
    if not results:
        return absent
    if None in results.values():
        return False
    return results.get(name, True) and not results.get("Not" + name, False)


def _applies(s: dict, caller: Caller, action: str, resource: str, ctx: dict[str, Any]) -> bool:
    if s.get("Effect") not in (ALLOW, DENY):
        return False
    return (_element(s, "Principal", lambda p: _principal_matches(p, caller, ctx), absent=False)
            and _element(s, "Action", lambda a: _any_glob(a, action, ignore_case=True), absent=False)
            and _element(s, "Resource", lambda r: _any_glob(r, resource), absent=True)
            and _conditions_hold(s.get("Condition", {}), ctx))


# --- principals ---------------------------------------------------------------------------

_ACCOUNT = re.compile(r"^\d{12}$")
_ROOT = re.compile(r"^arn:[\w-]+:iam::(\d{12}):root$")


def _principal_matches(principal: Any, caller: Caller, ctx: dict[str, Any]) -> bool | None:
    if isinstance(principal, str):  # "*"; a bare id or ARN is read as {"AWS": ...}
        principal = {"AWS": principal}
    if not isinstance(principal, dict):
        return None
    aws, services = _strings(principal.get("AWS", [])), _strings(principal.get("Service", []))
    if aws is None or services is None:
        return None
    # Other kinds (Federated, CanonicalUser) name no caller kinesim has.
    return (any(_aws_principal_matches(p, caller) for p in aws)
            or ctx.get("aws:principalservice") in services)


def _aws_principal_matches(p: str, caller: Caller) -> bool:
    if p == "*":
        return True
    if _ACCOUNT.match(p):
        return p == caller.account
    root = _ROOT.match(p)
    if root:
        return root.group(1) == caller.account
    return p in (caller.arn, caller.role_arn)


# --- actions and resources ----------------------------------------------------------------

def _any_glob(patterns: Any, value: str, ignore_case: bool = False) -> bool | None:
    patterns = _strings(patterns)
    if patterns is None:
        return None
    if ignore_case:
        patterns, value = [p.lower() for p in patterns], value.lower()
    return any(_glob(p, value) for p in patterns)


def _glob(pattern: str, value: str) -> bool:
    """`*` any run of characters, `?` any one character, the whole value. No regex (it backtracks);
    as in kinesim/wildcards.py (which has no `?`), each run between stars is placed at its leftmost
    fit after the previous one, which is always a best placement."""
    runs = pattern.split("*")
    if len(runs) == 1:
        return len(value) == len(pattern) and _fits(pattern, value, 0)
    first, middle, last = runs[0], runs[1:-1], runs[-1]
    end = len(value) - len(last)
    if end < len(first) or not _fits(first, value, 0) or not _fits(last, value, end):
        return False
    position = len(first)
    for run in middle:
        found = next((i for i in range(position, end - len(run) + 1) if _fits(run, value, i)), -1)
        if found < 0:
            return False
        position = found + len(run)
    return True


def _fits(run: str, value: str, at: int) -> bool:
    return all(c == "?" or c == value[at + i] for i, c in enumerate(run))


# --- conditions ---------------------------------------------------------------------------

def _numeric(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def test(actual: str, wanted: str) -> bool:
        try:
            return compare(float(actual), float(wanted))
        except ValueError:
            return False
    return test


def _arn_like(actual: str, wanted: str) -> bool:
    """ArnLike / ArnEquals: each of the six colon-separated parts is matched on its own."""
    a, w = actual.split(":", 5), wanted.split(":", 5)
    return len(a) == len(w) == 6 and all(_glob(wp, ap) for wp, ap in zip(w, a))


# Operator -> (test of one context value against one policy value, negated?)
_OPERATORS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "stringequals": (lambda a, w: a == w, False),
    "stringnotequals": (lambda a, w: a == w, True),
    "stringequalsignorecase": (lambda a, w: a.lower() == w.lower(), False),
    "stringnotequalsignorecase": (lambda a, w: a.lower() == w.lower(), True),
    "stringlike": (lambda a, w: _glob(w, a), False),
    "stringnotlike": (lambda a, w: _glob(w, a), True),
    "arnequals": (_arn_like, False),
    "arnlike": (_arn_like, False),
    "arnnotequals": (_arn_like, True),
    "arnnotlike": (_arn_like, True),
    "bool": (lambda a, w: a.lower() == w.lower(), False),
    "numericequals": (_numeric(lambda a, w: a == w), False),
    "numericnotequals": (_numeric(lambda a, w: a == w), True),
    "numericlessthan": (_numeric(lambda a, w: a < w), False),
    "numericlessthanequals": (_numeric(lambda a, w: a <= w), False),
    "numericgreaterthan": (_numeric(lambda a, w: a > w), False),
    "numericgreaterthanequals": (_numeric(lambda a, w: a >= w), False),
}


def _conditions_hold(condition: Any, ctx: dict[str, Any]) -> bool:
    """Every operator, and every key under it, must hold (AND); a key holds when its context value
    matches any of the policy's values (OR), or, for a negated operator, none of them."""
    if not isinstance(condition, dict):
        return False
    for operator, keys in condition.items():
        if not isinstance(keys, dict):
            return False
        for key, wanted in keys.items():
            wanted = _strings(wanted)
            if wanted is None or not _key_holds(str(operator), ctx.get(str(key).lower()), wanted):
                return False
    return True


def _key_holds(operator: str, actual: Any, wanted: list[str]) -> bool:
    op = operator.lower()
    qualifier, _, op = op.rpartition(":")  # "forallvalues", "foranyvalue" or ""
    if qualifier not in ("", "forallvalues", "foranyvalue"):
        return False
    if op == "null":  # "true": the key must be absent; "false": present
        return [str(actual is None).lower()] == [w.lower() for w in wanted]
    if_exists = op.endswith("ifexists")
    test, negated = _OPERATORS.get(op.removesuffix("ifexists"), (None, False))
    if test is None:
        return False  # an operator we do not know: the statement does not match
    values = _strings(actual) if actual is not None else []
    if not values:
        # AWS: ...IfExists holds for an absent key; else ForAllValues holds over no values and
        # ForAnyValue does not; else a positive test fails and a negated one (StringNotEquals) holds.
        if if_exists:
            return True
        return qualifier == "forallvalues" if qualifier else negated
    results = [any(test(v, w) for w in wanted) != negated for v in values]
    return all(results) if qualifier == "forallvalues" else any(results)
