"""IAM's errors, with AWS's codes, statuses and sentences (AWS's answers as moto and LocalStack's
recordings of AWS have them)."""
from __future__ import annotations

from kinesim.protocol.errors import AwsError


def no_such_entity(message: str) -> AwsError:
    return AwsError("NoSuchEntity", message, 404)


def entity_missing(kind: str, name: str) -> AwsError:
    """`kind` is AWS's word in the sentence: role, user, group, role policy, user policy."""
    return no_such_entity(f"The {kind} with name {name} cannot be found.")


def already_exists(message: str) -> AwsError:
    return AwsError("EntityAlreadyExists", message, 409)


def delete_conflict(message: str) -> AwsError:
    return AwsError("DeleteConflict", message, 409)


def limit_exceeded(message: str) -> AwsError:
    return AwsError("LimitExceeded", message, 409)


def malformed_policy(message: str) -> AwsError:
    return AwsError("MalformedPolicyDocument", message, 400)


def invalid_input(message: str) -> AwsError:
    return AwsError("InvalidInput", message, 400)


def not_attachable(arn: str) -> AwsError:
    return no_such_entity(f"Policy {arn} does not exist or is not attachable.")


def policy_not_found(arn: str) -> AwsError:
    return no_such_entity(f"Policy {arn} was not found.")
