"""The Amazon ECR operations kinesim answers: AWS's operation name -> the function
`(service, params) -> response` that answers it. The model's other operations (pushing and pulling
images above all) answer kinesim's 501.

One explicit table, imported by the service class (the operation modules import the service only
for type checking)."""
from __future__ import annotations

from typing import Any, Callable

from . import images_api, policies_api, repositories_api

OPERATIONS: dict[str, Callable[..., Any]] = {
    # repositories_api
    "CreateRepository": repositories_api.create_repository,
    "DescribeRepositories": repositories_api.describe_repositories,
    "DeleteRepository": repositories_api.delete_repository,
    "PutImageTagMutability": repositories_api.put_image_tag_mutability,
    "PutImageScanningConfiguration": repositories_api.put_image_scanning_configuration,
    "TagResource": repositories_api.tag_resource,
    "UntagResource": repositories_api.untag_resource,
    "ListTagsForResource": repositories_api.list_tags_for_resource,
    # policies_api
    "PutLifecyclePolicy": policies_api.put_lifecycle_policy,
    "GetLifecyclePolicy": policies_api.get_lifecycle_policy,
    "DeleteLifecyclePolicy": policies_api.delete_lifecycle_policy,
    "SetRepositoryPolicy": policies_api.set_repository_policy,
    "GetRepositoryPolicy": policies_api.get_repository_policy,
    "DeleteRepositoryPolicy": policies_api.delete_repository_policy,
    # images_api
    "ListImages": images_api.list_images,
    "DescribeImages": images_api.describe_images,
}
