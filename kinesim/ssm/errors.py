"""Parameter Store's errors, shared by the service and its operation modules."""
from __future__ import annotations

from kinesim.protocol.errors import AwsError

# AWS answers a missing parameter with no message at all: LocalStack's recordings of AWS
# (test_parameter_defaults: `"Message": ""`; test_black_box: "... GetParameter operation: "), and
# users' logs of DeleteParameter ("An error occurred (ParameterNotFound) when calling the
# DeleteParameter operation:").


def parameter_not_found() -> AwsError:
    return AwsError("ParameterNotFound")


def validation(message: str) -> AwsError:
    return AwsError("ValidationException", message)


def version_not_found(version: object, name: str) -> AwsError:
    return AwsError("ParameterVersionNotFound",
                    f"Systems Manager could not find version {version} of {name}. Verify the version and try again.")


def invalid_resource_id() -> AwsError:
    return AwsError("InvalidResourceId")  # the model's shape has no members: AWS sends no message
