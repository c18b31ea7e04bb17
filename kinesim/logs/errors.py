"""CloudWatch Logs' errors, shared by the service and its operation modules."""
from __future__ import annotations

from kinesim.protocol.errors import AwsError


def invalid_parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterException", message)
