"""AddPermission / RemovePermission: statements in the queue's `Policy` attribute, shaped as AWS
writes them (LocalStack's test_sqs_permission_lifecycle snapshot, recorded against AWS). Stored,
not enforced: kinesim checks no permissions."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json

from .errors import invalid_parameter, invalid_value
from .queue import Queue, now

if TYPE_CHECKING:
    from .service import Call


def _one_or_list(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values


def _policy(queue: Queue) -> dict[str, Any]:
    # The stored Policy passed SetQueueAttributes' check (a JSON object, nested at most as deep as
    # user_json reads); `user_json.dumps` writes it back however deep it is.
    text = queue.attributes.get("Policy")
    policy = user_json.loads(text) if text else {"Version": "2008-10-17", "Id": f"{queue.arn}/SQSDefaultPolicy"}
    policy.setdefault("Statement", [])
    return policy


def _save(call: Call, queue: Queue, policy: dict[str, Any]) -> None:
    if policy["Statement"]:
        queue.attributes["Policy"] = user_json.dumps(policy)
    else:
        queue.attributes.pop("Policy", None)  # the last statement gone, so is the attribute
    queue.modified = now()
    call.service.persist.save_queue(queue)


def add_permission(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    label, accounts, actions = params["Label"], params["AWSAccountIds"], params["Actions"]
    if not accounts:
        raise invalid_parameter("The request must contain the parameter AWSAccountIds.")
    if not actions:
        raise invalid_parameter("The request must contain the parameter Actions.")
    valid = call.service.validator.operations | {"*"}
    for action in actions:
        if action not in valid:
            raise invalid_value("ActionName", f"SQS:{action}", "Please refer to the appropriate WSDL for a list of "
                                                                "valid actions. ")
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        policy = _policy(queue)
        if any(s.get("Sid") == label for s in policy["Statement"]):
            raise invalid_value("Label", label, "Already exists.")
        policy["Statement"].append({
            "Sid": label, "Effect": "Allow",
            "Principal": {"AWS": _one_or_list([f"arn:aws:iam::{a}:root" for a in accounts])},
            "Action": _one_or_list([f"SQS:{a}" for a in actions]), "Resource": queue.arn})
        _save(call, queue, policy)
    return {}


def remove_permission(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    label = params["Label"]
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        policy = _policy(queue)
        if not any(s.get("Sid") == label for s in policy["Statement"]):
            raise invalid_value("Label", label, "can't find label.")
        policy["Statement"] = [s for s in policy["Statement"] if s.get("Sid") != label]
        _save(call, queue, policy)
    return {}
