"""AddTagsToResource, ListTagsForResource, RemoveTagsFromResource for parameters. The other
resource types SSM tags (documents, maintenance windows, ...) kinesim does not have: a call naming
one names a resource that does not exist, which AWS answers InvalidResourceId."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

from . import names
from .errors import invalid_resource_id

if TYPE_CHECKING:
    from .service import SsmService

MAX_TAGS = 50  # tags a resource may have (the Tagging Systems Manager resources guide)


def _key(svc: SsmService, p: dict[str, Any]) -> str:
    if p["ResourceType"] != "Parameter":
        raise invalid_resource_id()
    key = names.parse_resource_id(p["ResourceId"])
    if key not in svc.parameters:
        raise invalid_resource_id()
    return key


def add_tags_to_resource(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        key = _key(svc, p)
        doc = svc.parameters[key]
        tags = {**doc.get("Tags", {}), **{t["Key"]: t["Value"] for t in p["Tags"]}}
        if len(tags) > MAX_TAGS:
            raise AwsError("TooManyTagsError", f"The Tags list for resource {p['ResourceId']} exceeds the maximum "
                                               f"of {MAX_TAGS} tags.")
        svc.save(key, {**doc, "Tags": tags})
    return {}


def remove_tags_from_resource(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        key = _key(svc, p)
        doc = svc.parameters[key]
        gone = set(p["TagKeys"])
        svc.save(key, {**doc, "Tags": {k: v for k, v in doc.get("Tags", {}).items() if k not in gone}})
    return {}


def list_tags_for_resource(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        tags = svc.parameters[_key(svc, p)].get("Tags", {})
    return {"TagList": [{"Key": k, "Value": v} for k, v in tags.items()]}
