"""Log streams: CreateLogStream, DescribeLogStreams, DeleteLogStream."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

from .paging import page
from .errors import invalid_parameter
from .groups import now_ms

if TYPE_CHECKING:
    from .service import LogsService

STREAM_NOT_FOUND = "The specified log stream does not exist."


def stream_not_found() -> AwsError:
    return AwsError("ResourceNotFoundException", STREAM_NOT_FOUND)


def visible_events(svc: LogsService, group: str, doc: dict[str, Any], stream: str) -> list[tuple]:
    """The stream's events that have not expired under the group's retention, oldest first."""
    events = svc.files.events(group, stream)
    cutoff = svc.retention_cutoff(doc)
    if cutoff and events and events[0][0] < cutoff:
        events = [e for e in events if e[0] >= cutoff]
    return events


def describe_stream(svc: LogsService, group: str, doc: dict[str, Any], stream: str) -> dict[str, Any]:
    events = visible_events(svc, group, doc, stream)
    created = svc.files.created(group, stream)
    out: dict[str, Any] = {"logStreamName": stream}
    if events:
        ingested = [e[2] for e in events]
        out.update(creationTime=created if created is not None else min(ingested),
                   firstEventTimestamp=events[0][0], lastEventTimestamp=events[-1][0],
                   lastIngestionTime=max(ingested))
    else:
        out["creationTime"] = created if created is not None else doc["creationTime"]
    # storedBytes of a stream is always 0 since 2019 (the API reference: "deprecated").
    out.update(arn=f"{svc.group_arn(group)}:log-stream:{stream}", storedBytes=0)
    return out


def create_log_stream(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    group, stream = p["logGroupName"], p["logStreamName"]
    with svc.lock:
        svc.group(group)
        if not svc.files.create_stream(group, stream, now_ms()):
            # LocalStack's recording: test_create_log_stream_duplicate_error.
            raise AwsError("ResourceAlreadyExistsException", "The specified log stream already exists")
    return {}


def describe_log_streams(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    group = svc.group_param(p)
    doc = svc.group(group)
    order, prefix = p.get("orderBy", "LogStreamName"), p.get("logStreamNamePrefix")
    if order == "LastEventTime" and prefix is not None:
        raise invalid_parameter("Cannot order by LastEventTime with a logStreamNamePrefix.")
    names = [n for n in svc.files.stream_names(group) if prefix is None or n.startswith(prefix)]
    described = [describe_stream(svc, group, doc, n) for n in names]
    if order == "LastEventTime":
        described.sort(key=lambda s: (s.get("lastEventTimestamp", 0), s["logStreamName"]))
    if p.get("descending"):
        described.reverse()
    query = {"group": group, "orderBy": order, "prefix": prefix, "descending": bool(p.get("descending"))}
    chosen, token = page(described, p.get("nextToken"), query, p.get("limit", 50))
    out: dict[str, Any] = {"logStreams": chosen}
    if token:
        out["nextToken"] = token
    return out


def delete_log_stream(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    group, stream = p["logGroupName"], p["logStreamName"]
    svc.refuse_if_protected(group)
    if not svc.files.delete_stream(group, stream):
        raise stream_not_found()
    return {}
