"""AWS::S3::Bucket's configuration properties as the S3 API requests that apply them, converted as
CloudFormation's S3 provider converts them (its property names and shapes differ from the API's:
`ExpirationInDays` is `Expiration.Days`, `CorsRules[].MaxAge` is `MaxAgeSeconds`, a rule's `Prefix`
and `TagFilters` are its `Filter`, ...).

Each configuration has a Put request (made on create and when it changes) and a removal (made when
an update drops the property: the Delete call, or for versioning, which cannot be turned off, a
suspension, and for notifications an empty configuration, as CloudFormation does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import s3_notifications
from .template import DeployError


@dataclass(frozen=True)
class Configuration:
    prop: str                                  # the template's property
    put: str                                   # the S3 client's method that applies it
    convert: Callable[[Any], dict[str, Any]]   # template value -> that method's arguments (but Bucket)
    remove: str                                # the method that undoes it
    remove_args: dict[str, Any] | None = None  # its arguments (versioning: the suspension)


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise DeployError(f"{what} must be a list")
    return value


def _drop_none(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if v is not None}


def _tags(value: Any) -> list[dict[str, str]]:
    return [{"Key": str(t["Key"]), "Value": str(t["Value"])} for t in _list(value or [], "Tags")]


def versioning(value: dict[str, Any]) -> dict[str, Any]:
    return {"VersioningConfiguration": {"Status": value.get("Status")}}


def encryption(value: dict[str, Any]) -> dict[str, Any]:
    rules = []
    for rule in _list(value.get("ServerSideEncryptionConfiguration"), "ServerSideEncryptionConfiguration"):
        rules.append(_drop_none({"ApplyServerSideEncryptionByDefault": rule.get("ServerSideEncryptionByDefault"),
                                 "BucketKeyEnabled": rule.get("BucketKeyEnabled"),
                                 "BlockedEncryptionTypes": rule.get("BlockedEncryptionTypes")}))
    return {"ServerSideEncryptionConfiguration": {"Rules": rules}}


def public_access_block(value: dict[str, Any]) -> dict[str, Any]:
    return {"PublicAccessBlockConfiguration": dict(value)}


def ownership(value: dict[str, Any]) -> dict[str, Any]:
    return {"OwnershipControls": {"Rules": [dict(r) for r in _list(value.get("Rules"), "OwnershipControls.Rules")]}}


def cors(value: dict[str, Any]) -> dict[str, Any]:
    names = {"AllowedHeaders": "AllowedHeaders", "AllowedMethods": "AllowedMethods",
             "AllowedOrigins": "AllowedOrigins", "ExposedHeaders": "ExposeHeaders", "Id": "ID",
             "MaxAge": "MaxAgeSeconds"}
    rules = []
    for rule in _list(value.get("CorsRules"), "CorsConfiguration.CorsRules"):
        unknown = sorted(set(rule) - set(names))
        if unknown:
            raise DeployError(f"CorsRules property {', '.join(unknown)} is not one of {', '.join(sorted(names))}")
        rules.append({names[k]: v for k, v in rule.items()})
    return {"CORSConfiguration": {"CORSRules": rules}}


def lifecycle(value: dict[str, Any]) -> dict[str, Any]:
    rules = [_lifecycle_rule(r) for r in _list(value.get("Rules"), "LifecycleConfiguration.Rules")]
    return _drop_none({"LifecycleConfiguration": {"Rules": rules},
                       "TransitionDefaultMinimumObjectSize": value.get("TransitionDefaultMinimumObjectSize")})


_RULE_PROPERTIES = {"AbortIncompleteMultipartUpload", "ExpirationDate", "ExpirationInDays", "ExpiredObjectDeleteMarker",
                    "Id", "NoncurrentVersionExpiration", "NoncurrentVersionExpirationInDays",
                    "NoncurrentVersionTransition", "NoncurrentVersionTransitions", "ObjectSizeGreaterThan",
                    "ObjectSizeLessThan", "Prefix", "Status", "TagFilters", "Transition", "Transitions"}


def _lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(rule) - _RULE_PROPERTIES)
    if unknown:
        raise DeployError(f"LifecycleConfiguration rule property {', '.join(unknown)} is not one of "
                          f"{', '.join(sorted(_RULE_PROPERTIES))}")
    api: dict[str, Any] = {"ID": rule.get("Id"), "Status": rule.get("Status"), "Filter": _filter(rule)}
    expiration = _drop_none({"Days": rule.get("ExpirationInDays"), "Date": rule.get("ExpirationDate"),
                             "ExpiredObjectDeleteMarker": rule.get("ExpiredObjectDeleteMarker")})
    if expiration:
        api["Expiration"] = expiration
    transitions = list(rule.get("Transitions") or []) + ([rule["Transition"]] if "Transition" in rule else [])
    if transitions:
        api["Transitions"] = [_drop_none({"Days": t.get("TransitionInDays"), "Date": t.get("TransitionDate"),
                                          "StorageClass": t.get("StorageClass")}) for t in transitions]
    noncurrent = list(rule.get("NoncurrentVersionTransitions") or []) + (
        [rule["NoncurrentVersionTransition"]] if "NoncurrentVersionTransition" in rule else [])
    if noncurrent:
        api["NoncurrentVersionTransitions"] = [_drop_none({
            "NoncurrentDays": t.get("TransitionInDays"), "StorageClass": t.get("StorageClass"),
            "NewerNoncurrentVersions": t.get("NewerNoncurrentVersions")}) for t in noncurrent]
    if "NoncurrentVersionExpiration" in rule:
        api["NoncurrentVersionExpiration"] = dict(rule["NoncurrentVersionExpiration"])
    elif "NoncurrentVersionExpirationInDays" in rule:
        api["NoncurrentVersionExpiration"] = {"NoncurrentDays": rule["NoncurrentVersionExpirationInDays"]}
    if "AbortIncompleteMultipartUpload" in rule:
        api["AbortIncompleteMultipartUpload"] = dict(rule["AbortIncompleteMultipartUpload"])
    return _drop_none(api)


def _filter(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule's Prefix, TagFilters and size limits as the API's Filter: one condition alone, several
    under And, none as the empty prefix (the whole bucket)."""
    conditions = _drop_none({"Prefix": rule.get("Prefix"), "ObjectSizeGreaterThan": rule.get("ObjectSizeGreaterThan"),
                             "ObjectSizeLessThan": rule.get("ObjectSizeLessThan")})
    tags = _tags(rule.get("TagFilters"))
    if tags:
        conditions["Tags"] = tags
    if len(conditions) > 1 or len(tags) > 1:
        return {"And": conditions}
    if tags:
        return {"Tag": tags[0]}
    return conditions or {"Prefix": ""}


def tagging(value: Any) -> dict[str, Any]:
    return {"Tagging": {"TagSet": _tags(value)}}


CONFIGURATIONS = (
    Configuration("VersioningConfiguration", "put_bucket_versioning", versioning, "put_bucket_versioning",
                  {"VersioningConfiguration": {"Status": "Suspended"}}),
    Configuration("BucketEncryption", "put_bucket_encryption", encryption, "delete_bucket_encryption"),
    Configuration("PublicAccessBlockConfiguration", "put_public_access_block", public_access_block,
                  "delete_public_access_block"),
    Configuration("OwnershipControls", "put_bucket_ownership_controls", ownership, "delete_bucket_ownership_controls"),
    Configuration("CorsConfiguration", "put_bucket_cors", cors, "delete_bucket_cors"),
    Configuration("LifecycleConfiguration", "put_bucket_lifecycle_configuration", lifecycle, "delete_bucket_lifecycle"),
    Configuration("Tags", "put_bucket_tagging", tagging, "delete_bucket_tagging"),
    # Event notifications: converted by `s3_notifications`; dropping them puts an empty configuration.
    Configuration("NotificationConfiguration", "put_bucket_notification_configuration",
                  s3_notifications.put_arguments, "put_bucket_notification_configuration",
                  {"NotificationConfiguration": {}}),
)
