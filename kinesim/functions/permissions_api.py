"""A function's resource-based policy: AddPermission, RemovePermission, GetPolicy.

The policy is kept in the function's document (key `Policies`, one per qualifier: "" for the
unqualified function), so it lives and dies with the function and survives restarts. Statements
are built as Lambda builds them: the principal and conditions shaped as in AWS's answers
(LocalStack's recorded AWS answers, tests/aws/services/lambda_/test_lambda_api.snapshot.json).

Within its account kinesim does not enforce the policy (nor IAM): it is kept and shown, and an
invocation is allowed whatever it says. It decides the calls of other accounts
(kinesim/cross_account.py, through `policy_document`).
"""
from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext
from ..scopes import is_account
from .errors import conflict, invalid_parameter, resource_not_found

if TYPE_CHECKING:
    from .service import LambdaService

UNQUALIFIED = ""
# Service principals end in amazonaws.com (.cn in China), Alexa's in amazon.com; "*", an account
# id and an IAM ARN are the other forms AWS accepts.
_SERVICE_PRINCIPAL = re.compile(r"[a-z0-9][a-z0-9.-]*\.(?:amazonaws\.com(?:\.cn)?|amazon\.com)")


def _not_found() -> AwsError:
    return resource_not_found("The resource you requested does not exist.")


def _check_revision(current: str, given: str | None) -> None:
    if given is not None and given != current:
        raise AwsError("PreconditionFailedException",
                       "The Revision Id provided does not match the latest Revision Id. Call the GetPolicy API to "
                       "retrieve the latest Revision Id", 412)


def _target(svc: LambdaService, p: dict[str, Any], reading: bool = False) -> tuple[str, str]:
    """(function name, qualifier key) of the policy a request names; the function (and the version
    or alias) must exist. $LATEST has no policy of its own: reading it reads the function's."""
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    if qualifier == "$LATEST" and reading:
        qualifier = None
    if qualifier == "$LATEST":
        raise invalid_parameter("We currently do not support adding policies for $LATEST.")
    svc.function(name, qualifier)  # ResourceNotFoundException, as AWS words it, when it is not there
    return name, qualifier or UNQUALIFIED


def _principal(principal: str, account_id: str) -> Any:
    if principal == "*":
        return "*"
    if is_account(principal):
        return {"AWS": f"arn:aws:iam::{principal}:root"}
    if principal.startswith("arn:"):
        return {"AWS": principal}
    if _SERVICE_PRINCIPAL.fullmatch(principal):
        return {"Service": principal}
    raise invalid_parameter("The provided principal was invalid. Please check the principal and try again.")


def statement(p: dict[str, Any], resource_arn: str, account_id: str) -> dict[str, Any]:
    """The policy statement AddPermission adds, its members in AWS's order."""
    out: dict[str, Any] = {"Sid": p["StatementId"], "Effect": "Allow",
                           "Principal": _principal(p["Principal"], account_id),
                           "Action": p["Action"], "Resource": resource_arn}
    equals = {}
    if p.get("SourceAccount") is not None:
        equals["AWS:SourceAccount"] = p["SourceAccount"]
    if p.get("EventSourceToken") is not None:
        equals["lambda:EventSourceToken"] = p["EventSourceToken"]
    if p.get("FunctionUrlAuthType") is not None:
        equals["lambda:FunctionUrlAuthType"] = p["FunctionUrlAuthType"]
    if p.get("InvokedViaFunctionUrl"):
        equals["lambda:InvokedViaFunctionUrl"] = "true"
    if p.get("PrincipalOrgID") is not None:
        equals["aws:PrincipalOrgID"] = p["PrincipalOrgID"]
    condition: dict[str, Any] = {}
    if equals:
        condition["StringEquals"] = equals
    if p.get("SourceArn") is not None:
        condition["ArnLike"] = {"AWS:SourceArn": p["SourceArn"]}
    if condition:
        out["Condition"] = condition
    return out


def _policy_of(fn: dict[str, Any], key: str) -> dict[str, Any] | None:
    return (fn.get("Policies") or {}).get(key)


def _save_policy(svc: LambdaService, fn: dict[str, Any], key: str, statements: list[dict[str, Any]]) -> str:
    """Store the qualifier's statements (none: the policy is gone); returns the new revision id.
    The unqualified function's policy revision is the function's RevisionId, as on AWS."""
    revision = str(uuid.uuid4())
    policies = dict(fn.get("Policies") or {})
    if statements:
        policies[key] = {"Statements": statements, "RevisionId": revision}
    else:
        policies.pop(key, None)
    doc = {**fn, "Policies": policies}
    if key == UNQUALIFIED:
        doc["RevisionId"] = revision
    svc.save_function(doc)
    return revision


def _revision(fn: dict[str, Any], key: str) -> str:
    policy = _policy_of(fn, key)
    return fn["RevisionId"] if key == UNQUALIFIED or policy is None else policy["RevisionId"]


def add_permission(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    with svc.lock:
        name, key = _target(svc, p)
        fn = svc.functions[name]
        _check_revision(_revision(fn, key), p.get("RevisionId"))
        statements = list((_policy_of(fn, key) or {}).get("Statements") or [])
        if any(s["Sid"] == p["StatementId"] for s in statements):
            raise conflict(f"The statement id ({p['StatementId']}) provided already exists. Please provide a new "
                           "statement id, or remove the existing statement.")
        added = statement(p, svc.function_arn(name, key or None), svc.settings.account_id)
        _save_policy(svc, fn, key, statements + [added])
    return {"Statement": json.dumps(added)}


def remove_permission(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    with svc.lock:
        name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
        if name not in svc.functions:
            raise resource_not_found(f"No policy found for: {svc.function_arn(name, qualifier)}")
        name, key = _target(svc, p)
        fn = svc.functions[name]
        policy = _policy_of(fn, key)
        if policy is None:
            raise resource_not_found("No policy is associated with the given resource.")
        _check_revision(_revision(fn, key), p.get("RevisionId"))
        kept = [s for s in policy["Statements"] if s["Sid"] != p["StatementId"]]
        if len(kept) == len(policy["Statements"]):
            raise resource_not_found(f"Statement {p['StatementId']} is not found in resource policy.")
        _save_policy(svc, fn, key, kept)
    return {}


def get_policy(svc: LambdaService, p: dict[str, Any], context: RequestContext | None) -> dict[str, Any]:
    try:
        name, key = _target(svc, p, reading=True)
    except AwsError as err:
        if err.code == "ResourceNotFoundException":
            raise _not_found() from None  # AWS does not say whether the function or the policy is missing
        raise
    fn = svc.functions.get(name)
    policy = _policy_of(fn, key) if fn else None
    if fn is None or policy is None:
        raise _not_found()
    document = {"Version": "2012-10-17", "Id": "default", "Statement": policy["Statements"]}
    return {"Policy": json.dumps(document), "RevisionId": _revision(fn, key)}


def policy_document(svc: LambdaService, ref: str, qualifier: str | None = None) -> str | None:
    """The policy of a function (or of its version or alias) as GetPolicy answers it; None: none."""
    try:
        return get_policy(svc, {"FunctionName": ref, "Qualifier": qualifier}, None)["Policy"]
    except AwsError:
        return None
