"""ECR's errors in AWS's words, shared by the service and its operation modules.

The texts are the ones AWS answers with (recorded in users' reports, e.g. LocalStack issue 8051 for
the name pattern, and kept by moto's ECR, which copies AWS's answers)."""
from __future__ import annotations

from kinesim.protocol.errors import AwsError

# The expression AWS quotes when a repository name is refused (older than the model's pattern,
# which also allows `__` and runs of `-`; AWS still quotes this one).
NAME_EXPRESSION = "(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*"


def invalid_parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterException", message)


def invalid_at(member: str, constraint: str) -> AwsError:
    return invalid_parameter(f"Invalid parameter at '{member}' failed to satisfy constraint: '{constraint}'")


def repository_not_found(name: str, registry_id: str) -> AwsError:
    return AwsError("RepositoryNotFoundException",
                    f"The repository with name '{name}' does not exist in the registry with id '{registry_id}'")


def repository_exists(name: str, registry_id: str) -> AwsError:
    return AwsError("RepositoryAlreadyExistsException",
                    f"The repository with name '{name}' already exists in the registry with id '{registry_id}'")


def lifecycle_policy_not_found(name: str, registry_id: str) -> AwsError:
    return AwsError("LifecyclePolicyNotFoundException",
                    f"Lifecycle policy does not exist for the repository with name '{name}' in the registry "
                    f"with id '{registry_id}'")


def repository_policy_not_found(name: str, registry_id: str) -> AwsError:
    return AwsError("RepositoryPolicyNotFoundException",
                    f"Repository policy does not exist for the repository with name '{name}' in the registry "
                    f"with id '{registry_id}'")
