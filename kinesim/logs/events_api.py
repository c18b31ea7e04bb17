"""Log events: PutLogEvents, GetLogEvents (a stream, forward and backward tokens) and
FilterLogEvents (a group's streams interleaved, filter patterns, `aws logs tail --follow`)."""
from __future__ import annotations

import bisect
import hashlib
import re
from typing import TYPE_CHECKING, Any

from .paging import invalid_token, make_token, read_token
from .patterns import PatternError, compile_pattern
from .errors import invalid_parameter
from .groups import DAY_MS, now_ms
from .streams_api import stream_not_found, visible_events

if TYPE_CHECKING:
    from .service import LogsService

# PutLogEvents' quotas (the API reference): a batch is at most 1,048,576 bytes, counted as each
# message's UTF-8 length plus 26 bytes, spans at most 24 hours; events more than 14 days old or more
# than 2 hours ahead are rejected (reported in rejectedLogEventsInfo, not an error).
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD = 26
MAX_SPAN_MS = DAY_MS
MAX_AGE_MS = 14 * DAY_MS
MAX_AHEAD_MS = 2 * 3600 * 1000
MAX_RESPONSE_BYTES = 1_048_576

_STREAM_TOKEN = re.compile(r"([fb])/(\d{20})(\d{36})")


def _size(message: str) -> int:
    return len(message.encode("utf-8", "surrogatepass")) + EVENT_OVERHEAD


def put_log_events(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    group, stream, events = p["logGroupName"], p["logStreamName"], p["logEvents"]
    doc = svc.group(group)
    if not svc.files.stream_exists(group, stream):
        raise stream_not_found()
    stamps = [e["timestamp"] for e in events]
    if any(b < a for a, b in zip(stamps, stamps[1:])):
        # LocalStack's recording: test_put_log_events_wrong_order.
        raise invalid_parameter("Log events in a single PutLogEvents request must be in chronological order.")
    if stamps[-1] - stamps[0] > MAX_SPAN_MS:
        raise invalid_parameter("The batch of log events in a single PutLogEvents request cannot span more than "
                                "24 hours.")
    size = sum(_size(e["message"]) for e in events)
    if size > MAX_BATCH_BYTES:
        raise invalid_parameter(f"Upload too large: {size} bytes exceeds limit of {MAX_BATCH_BYTES}")
    now = now_ms()
    # The batch is in time order: too old and expired events lead it, too new ones end it.
    too_old = bisect.bisect_left(stamps, now - MAX_AGE_MS)
    expired = max(too_old, bisect.bisect_left(stamps, svc.retention_cutoff(doc, now)))
    too_new = bisect.bisect_right(stamps, now + MAX_AHEAD_MS)
    accepted = [(e["timestamp"], e["message"]) for e in events[expired:too_new]]
    if accepted:
        svc.files.append(group, stream, accepted, now)
    out: dict[str, Any] = {"nextSequenceToken": f"{now:056d}"}
    rejected: dict[str, int] = {}
    # tooNewLogEventStartIndex is inclusive, the two end indexes exclusive (the API reference).
    if too_new < len(events):
        rejected["tooNewLogEventStartIndex"] = too_new
    if too_old:
        rejected["tooOldLogEventEndIndex"] = too_old
    if expired > too_old:
        rejected["expiredLogEventEndIndex"] = expired
    if rejected:
        out["rejectedLogEventsInfo"] = rejected
    return out


def _within(events: list[tuple], start: int | None, end: int | None, end_inclusive: bool) -> list[tuple]:
    """The slice of sorted events with start <= timestamp < end (or <= end)."""
    lo = bisect.bisect_left(events, (start,)) if start is not None else 0
    if end is None:
        hi = len(events)
    else:
        hi = bisect.bisect_left(events, (end + 1,) if end_inclusive else (end,))
    return events[lo:max(lo, hi)]


def _stream_token(kind: str, position: tuple[int, int]) -> str:
    return f"{kind}/{position[0]:020d}{position[1]:036d}"


def get_log_events(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    group, stream = svc.group_param(p), p["logStreamName"]
    doc = svc.group(group)
    if not svc.files.stream_exists(group, stream):
        raise stream_not_found()
    # endTime is exclusive here (the API reference), inclusive in FilterLogEvents.
    events = _within(visible_events(svc, group, doc, stream), p.get("startTime"), p.get("endTime"), False)
    keys = [(e[0], e[1]) for e in events]
    limit = p.get("limit", 10000)
    token = p.get("nextToken")
    if token is not None:
        match = _STREAM_TOKEN.fullmatch(token)
        if match is None:
            raise invalid_token()
        forward, at = match[1] == "f", (int(match[2]), int(match[3]))
    elif p.get("startFromHead"):
        forward, at = True, (0, 0)
    else:  # the newest events, as AWS answers without a token
        forward, at = False, (keys[-1][0], keys[-1][1] + 1) if keys else (p.get("startTime") or 0, 0)
    index = bisect.bisect_left(keys, at)
    chosen = _fitting(events[index:index + limit]) if forward \
        else _fitting(events[max(0, index - limit):index][::-1])[::-1]
    if chosen:
        first, last = (chosen[0][0], chosen[0][1]), (chosen[-1][0], chosen[-1][1] + 1)
    else:  # nothing further that way: the same position back, as AWS gives the same token at the end
        first = last = at
    return {"events": [{"timestamp": e[0], "message": e[3], "ingestionTime": e[2]} for e in chosen],
            "nextForwardToken": _stream_token("f", last), "nextBackwardToken": _stream_token("b", first)}


def _fitting(events: list[tuple], message_at: int = 3) -> list[tuple]:
    """The leading events that fit in one response (1 MB)."""
    total = 0
    for i, event in enumerate(events):
        total += _size(event[message_at])
        if total > MAX_RESPONSE_BYTES and i:
            return events[:i]
    return events


def event_id(group: str, stream: str, timestamp: int, rank: int) -> str:
    """A 56-digit id, as AWS's, the same on every read: `aws logs tail --follow` tells events it
    already printed by it."""
    digest = int.from_bytes(hashlib.blake2b(f"{group}\n{stream}".encode(), digest_size=8).digest(), "big")
    return f"{timestamp:020d}{digest:026d}{rank:010d}"


def filter_log_events(svc: LogsService, p: dict[str, Any]) -> dict[str, Any]:
    group = svc.group_param(p)
    doc = svc.group(group)
    names, prefix = p.get("logStreamNames"), p.get("logStreamNamePrefix")
    if names is not None and prefix is not None:
        raise invalid_parameter("Cannot specify both logStreamNames and logStreamNamePrefix")
    try:
        matches = compile_pattern(p.get("filterPattern"))
    except PatternError as err:
        raise invalid_parameter(str(err)) from None
    start, end = p.get("startTime"), p.get("endTime")
    query = {"group": group, "names": names, "prefix": prefix, "start": start, "end": end,
             "pattern": p.get("filterPattern")}
    after = read_token(p.get("nextToken"), query)
    if after is not None and not (isinstance(after, list) and len(after) == 3):
        raise invalid_token()
    wanted = set(names) if names is not None else None
    streams = [(n, _within(visible_events(svc, group, doc, n), start, end, True))
               for n in svc.files.stream_names(group)
               if (wanted is None or n in wanted) and (prefix is None or n.startswith(prefix))]
    limit, total = p.get("limit", 10000), 0
    out_events: list[dict[str, Any]] = []
    more = False
    for ts, stream, rank, ingestion, message in svc.files.merged(streams):
        if after is not None and [ts, stream, rank] <= after:
            continue
        if not matches(message):
            continue
        total += _size(message)
        if len(out_events) >= limit or (total > MAX_RESPONSE_BYTES and out_events):
            more = True
            break
        out_events.append({"logStreamName": stream, "timestamp": ts, "message": message, "ingestionTime": ingestion,
                           "eventId": event_id(group, stream, ts, rank), "_rank": rank})
    out: dict[str, Any] = {"events": out_events, "searchedLogStreams": []}
    if more:
        last = out_events[-1]
        out["nextToken"] = make_token(query, [last["timestamp"], last["logStreamName"], last["_rank"]])
    for event in out_events:
        del event["_rank"]
    return out
