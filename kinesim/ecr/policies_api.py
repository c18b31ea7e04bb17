"""A repository's lifecycle policy (Put/Get/DeleteLifecyclePolicy) and repository policy
(Set/Get/DeleteRepositoryPolicy): kept and returned as given, checked as AWS checks their shape,
never applied (there are no images to expire, and kinesim checks no permissions)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json
from kinesim.protocol.errors import AwsError

from .errors import invalid_at, lifecycle_policy_not_found, repository_policy_not_found

if TYPE_CHECKING:
    from .service import EcrService

_RULE_REQUIRED = ("action", "rulePriority", "selection")


def _check_lifecycle_policy(text: str) -> None:
    """The checks AWS makes before anything else, in its words (as moto keeps them): the text is a
    JSON object with a `rules` list of objects, each with `rulePriority`, `selection` and `action`.
    What a rule selects and does is not checked further: ECR adds selection and action kinds over
    time, and a policy is never run here."""
    try:
        # Not json.loads: it recurses, and 3,000 `[` were a RecursionError (a 500); deeper than
        # Jackson reads (ECR's parser) is as unreadable as bad JSON.
        policy = user_json.loads(text)
    except ValueError:
        policy = None
    if not isinstance(policy, dict):
        raise _lifecycle_failure("Could not map policyString into LifecyclePolicy.")
    if not isinstance(policy.get("rules"), list):
        raise _lifecycle_failure('object has missing required properties (["rules"])')
    for rule in policy["rules"]:
        if not isinstance(rule, dict):
            raise _lifecycle_failure(f"instance type ({_json_type(rule)}) does not match any allowed primitive type "
                                     '(allowed: ["object"])')
        missing = [k for k in _RULE_REQUIRED if k not in rule]
        if missing:
            raise _lifecycle_failure(f"object has missing required properties ({json.dumps(missing)})")


def _lifecycle_failure(reason: str) -> AwsError:
    return invalid_at("LifecyclePolicyText", "Lifecycle policy validation failure: " + reason)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if isinstance(value, int) else "number"
    return {str: "string", list: "array", type(None): "null"}.get(type(value), "object")


def put_lifecycle_policy(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    name, text = p["repositoryName"], p["lifecyclePolicyText"]
    with svc.lock:
        doc = svc.repository(name, p.get("registryId"))
        _check_lifecycle_policy(text)
        doc["lifecyclePolicyText"] = text
        svc.save(name, doc)
    return {"registryId": svc.registry_id, "repositoryName": name, "lifecyclePolicyText": text}


def get_lifecycle_policy(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    # `lastEvaluatedAt` (when the policy last ran) is left out: it never runs here.
    return _policy(svc, p, "lifecyclePolicyText", lifecycle_policy_not_found, delete=False)


def delete_lifecycle_policy(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    return _policy(svc, p, "lifecyclePolicyText", lifecycle_policy_not_found, delete=True)


def _policy(svc: EcrService, p: dict[str, Any], field: str, missing: Any, delete: bool) -> dict[str, Any]:
    """A repository's policy text (`field`), answered and, with `delete`, removed."""
    name = p["repositoryName"]
    with svc.lock:
        doc = svc.repository(name, p.get("registryId"))
        text = doc.get(field)
        if text is None:
            raise missing(name, svc.registry_id)
        if delete:
            doc[field] = None
            svc.save(name, doc)
    return {"registryId": svc.registry_id, "repositoryName": name, field: text}


def set_repository_policy(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    name, text = p["repositoryName"], p["policyText"]
    with svc.lock:
        doc = svc.repository(name, p.get("registryId"))
        try:
            policy = user_json.loads(text)  # bounded nesting, as in _check_lifecycle_policy
        except ValueError:
            policy = None
        if not isinstance(policy, dict) or not policy.get("Statement"):
            # AWS's sentence for a policy it cannot read as a policy document (moto keeps it).
            raise invalid_at("PolicyText", "Invalid repository policy provided")
        doc["policyText"] = text
        svc.save(name, doc)
    return {"registryId": svc.registry_id, "repositoryName": name, "policyText": text}


def get_repository_policy(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    return _policy(svc, p, "policyText", repository_policy_not_found, delete=False)


def delete_repository_policy(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    return _policy(svc, p, "policyText", repository_policy_not_found, delete=True)
