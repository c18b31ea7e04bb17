"""Log groups: CreateLogGroup, DescribeLogGroups, DeleteLogGroup, retention policies and tags."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

from .paging import page
from .errors import invalid_parameter
from .groups import new_group_doc

if TYPE_CHECKING:
    from .service import LogsService

# PutRetentionPolicy's documented values (the model leaves retentionInDays a plain integer).
RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                  3288, 3653)


def describe_group(svc: LogsService, name: str, doc: dict[str, Any]) -> dict[str, Any]:
    arn = svc.group_arn(name)
    out: dict[str, Any] = {"logGroupName": name, "creationTime": doc["creationTime"]}
    if doc.get("retentionInDays"):
        out["retentionInDays"] = doc["retentionInDays"]
    out.update(metricFilterCount=0, arn=f"{arn}:*", storedBytes=svc.files.stored_bytes(name))
    if doc.get("kmsKeyId"):
        out["kmsKeyId"] = doc["kmsKeyId"]
    out.update(logGroupClass=doc.get("logGroupClass", "STANDARD"), logGroupArn=arn,
               deletionProtectionEnabled=bool(doc.get("deletionProtectionEnabled")))
    return out


def create_log_group(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    name = p["logGroupName"]
    with svc.lock:
        if svc.store.document("logs-group", name) is not None:
            # LocalStack's recording: test_create_log_group_duplicate_error.
            raise AwsError("ResourceAlreadyExistsException", "The specified log group already exists")
        svc.save_group(name, new_group_doc(tags=dict(p.get("tags") or {}), kmsKeyId=p.get("kmsKeyId"),
                                           logGroupClass=p.get("logGroupClass", "STANDARD"),
                                           deletionProtectionEnabled=bool(p.get("deletionProtectionEnabled"))))
    return {}


def describe_log_groups(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    prefix, pattern = p.get("logGroupNamePrefix"), p.get("logGroupNamePattern")
    if prefix is not None and pattern is not None:
        # LocalStack's recording: test_describe_log_groups_prefix_and_pattern_error.
        raise invalid_parameter("LogGroup name prefix and LogGroup name pattern are mutually exclusive parameters.")
    wanted = {svc.group_from_identifier(i) for i in p["logGroupIdentifiers"]} if p.get("logGroupIdentifiers") else None
    groups = svc.groups()
    names = sorted(n for n, doc in groups.items()
                   if (prefix is None or n.startswith(prefix))
                   # The pattern matches anywhere in the name, ignoring case (AWS's API reference).
                   and (not pattern or pattern.lower() in n.lower())
                   and (wanted is None or n in wanted)
                   and (p.get("logGroupClass") is None or doc.get("logGroupClass", "STANDARD") == p["logGroupClass"]))
    query = {k: p.get(k) for k in ("logGroupNamePrefix", "logGroupNamePattern", "logGroupClass")}
    chosen, token = page(names, p.get("nextToken"), query, p.get("limit", 50))
    out: dict[str, Any] = {"logGroups": [describe_group(svc, n, groups[n]) for n in chosen]}
    if token:
        out["nextToken"] = token
    return out


def delete_log_group(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    svc.refuse_if_protected(p["logGroupName"])
    svc.delete_group(p["logGroupName"])
    return {}


def put_log_group_deletion_protection(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    name = svc.group_from_identifier(p["logGroupIdentifier"])
    with svc.lock:
        doc = svc.group(name)
        doc["deletionProtectionEnabled"] = bool(p["deletionProtectionEnabled"])
        svc.save_group(name, doc)
    return {}


def put_retention_policy(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    days = p["retentionInDays"]
    if days not in RETENTION_DAYS:
        raise invalid_parameter(f"1 validation error detected: Value '{days}' at 'retentionInDays' failed to "
                                f"satisfy constraint: Member must satisfy enum value set: "
                                f"[{', '.join(map(str, RETENTION_DAYS))}]")
    name = p["logGroupName"]
    with svc.lock:
        doc = svc.group(name)
        doc["retentionInDays"] = days
        svc.save_group(name, doc)
    svc.expire(name, doc)  # what is past the retention goes now, not at the next sweep
    return {}


def delete_retention_policy(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        doc = svc.group(p["logGroupName"])
        doc["retentionInDays"] = None
        svc.save_group(p["logGroupName"], doc)
    return {}


# tags: by ARN (TagResource and friends) and the older by-name operations

def _group_of_arn(svc: LogsService, arn: str) -> str:
    if ":log-group:" not in arn:
        raise invalid_parameter(f"Invalid resource ARN: {arn}")
    return svc.group_from_identifier(arn)


def _change_tags(svc: LogsService, name: str, add: dict[str, str] | None = None,
                 remove: list[str] | None = None) -> dict[str, str]:
    with svc.lock:
        doc = svc.group(name)
        tags = dict(doc.get("tags") or {})
        tags.update(add or {})
        for key in remove or []:
            tags.pop(key, None)
        if len(tags) > 50:
            raise AwsError("TooManyTagsException", "A resource can have no more than 50 tags.")
        if add or remove:
            doc["tags"] = tags
            svc.save_group(name, doc)
        return tags


def tag_resource(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    _change_tags(svc, _group_of_arn(svc, p["resourceArn"]), add=p["tags"])
    return {}


def untag_resource(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    _change_tags(svc, _group_of_arn(svc, p["resourceArn"]), remove=p["tagKeys"])
    return {}


def list_tags_for_resource(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    return {"tags": _change_tags(svc, _group_of_arn(svc, p["resourceArn"]))}


def tag_log_group(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    _change_tags(svc, p["logGroupName"], add=p["tags"])
    return {}


def untag_log_group(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    _change_tags(svc, p["logGroupName"], remove=p["tags"])
    return {}


def list_tags_log_group(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    return {"tags": _change_tags(svc, p["logGroupName"])}
