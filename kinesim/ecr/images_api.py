"""ListImages and DescribeImages: kinesim has no registry, so a repository never holds an image."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

if TYPE_CHECKING:
    from .service import EcrService


def list_images(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    svc.repository(p["repositoryName"], p.get("registryId"))
    return {"imageIds": []}


def describe_images(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    name, registry = p["repositoryName"], p.get("registryId") or svc.registry_id
    svc.repository(name, registry)
    for image in p.get("imageIds") or []:
        # Asked for by id, an image that is not there is an error (the first one named), in AWS's
        # words as moto keeps them: the identifier printed Java-style, absent members as 'null'.
        digest, tag = image.get("imageDigest") or "null", image.get("imageTag") or "null"
        raise AwsError("ImageNotFoundException",
                       f"The image with imageId {{imageDigest:'{digest}', imageTag:'{tag}'}} does not exist within "
                       f"the repository with name '{name}' in the registry with id '{registry}'")
    return {"imageDetails": []}
