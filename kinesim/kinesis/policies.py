"""Resource-based policies on a stream or a consumer: PutResourcePolicy, GetResourcePolicy,
DeleteResourcePolicy. Kept (not enforced: requests are not authorised locally) as the JSON text
the client gave, per resource ARN, in `svc.policies` and the store's "policy" documents.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import user_json
from ..protocol.errors import in_use, invalid_argument, not_found
from . import consumers

if TYPE_CHECKING:
    from .service import KinesisService


def _resource_arn(svc: KinesisService, p: dict[str, Any], active: bool = False) -> str:
    """The ResourceARN, once the stream or consumer it names is known to exist."""
    arn = p["ResourceARN"]
    stream, consumer = consumers.resource(svc, arn)
    if active and consumer is not None and consumer.status != "ACTIVE":
        raise in_use(f"Consumer {consumer.name} with creation timestamp {int(consumer.created)} under "
                               f"stream {stream.name} and account {svc.account} is not in ACTIVE status.")
    return arn


def put_resource_policy(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    arn = _resource_arn(svc, p, active=True)
    text = p["Policy"]
    try:
        document = user_json.loads(text)  # json.loads recurses: 3,000 levels were a RecursionError (500)
    except user_json.InvalidJson:
        document = None
    if not isinstance(document, dict):
        raise invalid_argument("Policy is not a valid JSON document.")
    with svc.lock:
        svc.store.put_document("policy", arn, text)
        svc.policies[arn] = text
    return {}


def get_resource_policy(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    arn = _resource_arn(svc, p)
    return {"Policy": svc.policies.get(arn, "{}")}


def delete_resource_policy(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    arn = _resource_arn(svc, p)
    with svc.lock:
        if arn not in svc.policies:
            raise not_found(f"No resource policy found for resource ARN {arn}.")
        svc.store.delete_document("policy", arn)
        del svc.policies[arn]
    return {}
