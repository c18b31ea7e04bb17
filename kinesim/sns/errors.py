"""SNS's errors, shared by the service and its operation modules."""
from __future__ import annotations

from kinesim.protocol.errors import AwsError


def invalid(message: str) -> AwsError:
    return AwsError("InvalidParameter", message)


def not_found(message: str) -> AwsError:
    return AwsError("NotFound", message, 404)


def check_arn(arn: str, member: str) -> list[str]:
    """An ARN's parts, or AWS's text for one with too few (LocalStack's recordings of AWS:
    "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1")."""
    parts = arn.split(":")
    if len(parts) < 6:
        raise invalid(f"Invalid parameter: {member} Reason: An ARN must have at least 6 elements, not {len(parts)}")
    return parts
