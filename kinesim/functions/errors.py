"""AWS's Lambda errors and the date text Lambda's answers carry, shared by the service and its
operation modules."""
from __future__ import annotations

from datetime import datetime, timezone

from ..protocol.errors import AwsError


def invalid_parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterValueException", message)


def conflict(message: str) -> AwsError:
    return AwsError("ResourceConflictException", message, 409)


def resource_not_found(message: str) -> AwsError:
    return AwsError("ResourceNotFoundException", message, 404)


def malformed_body(detail: str) -> AwsError:
    return AwsError("InvalidRequestContentException", f"Could not parse request body into json: {detail}")


def lambda_date(ts: float | None = None) -> str:
    """Lambda's LastModified text: `2024-05-01T12:00:00.123+0000`."""
    moment = datetime.now(timezone.utc) if ts is None else datetime.fromtimestamp(ts, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"
