"""Repositories: CreateRepository, DescribeRepositories, DeleteRepository, their tag mutability and
scanning settings, and their tags."""
from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

import orjson

from .errors import invalid_at, repository_exists

if TYPE_CHECKING:
    from .service import EcrService

_EXCLUSION = ("MUTABLE_WITH_EXCLUSION", "IMMUTABLE_WITH_EXCLUSION")
# Without maxResults, DescribeRepositories "returns up to 100 results and a nextToken value, if
# applicable" (the API reference).
_DEFAULT_PAGE = 100


def _check_mutability(mutability: str, filters: list[dict[str, Any]] | None) -> None:
    if mutability in _EXCLUSION and not filters:
        # moto keeps AWS's sentence for a *_WITH_EXCLUSION setting without its filters.
        raise invalid_at("imageTagMutabilityExclusionFilters",
                         f"ImageTagMutabilityExclusionFilters can't be null when imageTagMutability is set as "
                         f"{mutability}")


def create_repository(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    name = p["repositoryName"]
    mutability = p.get("imageTagMutability") or "MUTABLE"
    filters = p.get("imageTagMutabilityExclusionFilters")
    _check_mutability(mutability, filters)
    encryption = dict(p.get("encryptionConfiguration") or {"encryptionType": "AES256"})
    doc = {"createdAt": time.time(), "imageTagMutability": mutability,
           "imageTagMutabilityExclusionFilters": filters,
           "imageScanningConfiguration": {"scanOnPush": bool((p.get("imageScanningConfiguration") or {})
                                                             .get("scanOnPush"))},
           "encryptionConfiguration": encryption,
           "tags": {t["Key"]: t.get("Value", "") for t in p.get("tags") or []},
           "lifecyclePolicyText": None, "policyText": None}
    with svc.lock:
        if svc.store.document("ecr-repository", name) is not None:
            raise repository_exists(name, svc.registry_id)
        svc.save(name, doc)
    return {"repository": svc.describe(name, doc)}


def describe_repositories(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    registry = p.get("registryId") or svc.registry_id
    if p.get("repositoryNames"):
        # Named, every one must exist: the first that does not is the error.
        docs = [(name, svc.repository(name, registry)) for name in p["repositoryNames"]]
        return {"repositories": [svc.describe(name, doc) for name, doc in docs]}
    repositories = svc.repositories() if registry == svc.registry_id else {}
    names = sorted(repositories)
    after = _read_token(p.get("nextToken"))
    if after is not None:
        names = [n for n in names if n > after]
    limit = p.get("maxResults") or _DEFAULT_PAGE
    out: dict[str, Any] = {"repositories": [svc.describe(n, repositories[n]) for n in names[:limit]]}
    if len(names) > limit:
        out["nextToken"] = _make_token(names[limit - 1])
    return out


def _make_token(after: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"after": after})).decode().rstrip("=")


def _read_token(token: str | None) -> str | None:
    """The name a page ended at (the next page starts after it: repositories deleted meanwhile
    move nothing)."""
    if token is None:
        return None
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("after"), str):
        # kinesim's wording: AWS's answer to a made-up token is not recorded anywhere we could find.
        raise invalid_at("nextToken", "Invalid NextToken")
    return doc["after"]


def delete_repository(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    # No image is ever pushed here, so RepositoryNotEmptyException (`force` absent) cannot happen.
    name = p["repositoryName"]
    with svc.lock:
        doc = svc.repository(name, p.get("registryId"))
        svc.forget(name)
    return {"repository": svc.describe(name, doc)}


def put_image_tag_mutability(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    name, mutability = p["repositoryName"], p["imageTagMutability"]
    filters = p.get("imageTagMutabilityExclusionFilters")
    _check_mutability(mutability, filters)
    with svc.lock:
        doc = svc.repository(name, p.get("registryId"))
        doc.update(imageTagMutability=mutability, imageTagMutabilityExclusionFilters=filters)
        svc.save(name, doc)
    out = {"registryId": svc.registry_id, "repositoryName": name, "imageTagMutability": mutability}
    if filters:
        out["imageTagMutabilityExclusionFilters"] = filters
    return out


def put_image_scanning_configuration(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    name = p["repositoryName"]
    config = {"scanOnPush": bool(p["imageScanningConfiguration"].get("scanOnPush"))}
    with svc.lock:
        doc = svc.repository(name, p.get("registryId"))
        doc["imageScanningConfiguration"] = config
        svc.save(name, doc)
    return {"registryId": svc.registry_id, "repositoryName": name, "imageScanningConfiguration": config}


# tags, by the repository's ARN

def _change_tags(svc: EcrService, arn: str, add: list[dict[str, str]] | None = None,
                 remove: list[str] | None = None) -> dict[str, str]:
    name = svc.name_of_arn(arn)
    with svc.lock:
        doc = svc.repository(name)
        tags = dict(doc.get("tags") or {})
        tags.update({t["Key"]: t.get("Value", "") for t in add or []})
        for key in remove or []:
            tags.pop(key, None)
        if add or remove:
            doc["tags"] = tags
            svc.save(name, doc)
        return tags


def tag_resource(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    _change_tags(svc, p["resourceArn"], add=p["tags"])
    return {}


def untag_resource(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    _change_tags(svc, p["resourceArn"], remove=p["tagKeys"])
    return {}


def list_tags_for_resource(svc: EcrService, p: dict[str, Any]) -> dict[str, Any]:
    return {"tags": [{"Key": k, "Value": v} for k, v in _change_tags(svc, p["resourceArn"]).items()]}
