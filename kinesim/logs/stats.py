"""What the web console shows of the CloudWatch Logs log groups: per group its stored bytes, number
of streams, retention and, when asked, the time of its last event (the newest `lastEventTimestamp`
DescribeLogStreams would give, retention applied). Read-only."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .streams_api import visible_events

if TYPE_CHECKING:
    from .service import LogsService


def group_stats(svc: "LogsService", last_event: bool = False) -> list[dict[str, Any]]:
    """One dict per group, by name: name, arn, created (epoch ms), retention_days, stored_bytes,
    streams, log_class and, with `last_event`, last_event (epoch ms or None; this reads the
    streams' events, so the overview leaves it out)."""
    out = []
    for name, doc in sorted(svc.groups().items()):
        streams = svc.files.stream_names(name)
        row = {"name": name, "arn": svc.group_arn(name), "created": doc.get("creationTime"),
               "retention_days": doc.get("retentionInDays"), "stored_bytes": svc.files.stored_bytes(name),
               "streams": len(streams), "log_class": doc.get("logGroupClass", "STANDARD")}
        if last_event:
            newest = [events[-1][0] for events in (visible_events(svc, name, doc, s) for s in streams) if events]
            row["last_event"] = max(newest, default=None)
        out.append(row)
    return out
