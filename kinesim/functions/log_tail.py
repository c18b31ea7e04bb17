"""A function's log lines as the web console follows them: the last lines first, then, with the
cursor each answer carries, only the lines written since.

Lines are ordered for following by when they were written (ingestion time), then stream,
timestamp and rank (logs.py: a stable position); the cursor is the last line's such key. Ordering
by the events' own timestamps would not do: a worker's output reaches its file up to a flush
interval late, after newer lines of another worker were shown. An event's timestamp is never
later than its ingestion, and never much earlier (runtime.LOG_FLUSH_S), so a follow-up read looks
at the events of the last LOOKBACK_MS before the cursor only.
"""
from __future__ import annotations

import bisect
from typing import Any

from .logs import FunctionLogs

LOOKBACK_MS = 60_000  # how much older than its ingestion a function's event can be, with a wide margin
Key = tuple[int, str, int, int]  # (ingestion ms, stream, timestamp ms, rank)


def _cursor(key: Key) -> str:
    ingestion, stream, ts, rank = key
    return f"{ingestion}:{ts}:{rank}:{stream}"


def _parse_cursor(cursor: str) -> Key:
    try:
        ingestion, ts, rank, stream = cursor.split(":", 3)
        return int(ingestion), stream, int(ts), int(rank)
    except ValueError:
        raise ValueError(f"not a log cursor: {cursor!r}") from None


def _line(key: Key, message: str) -> dict[str, Any]:
    ingestion, stream, ts, rank = key
    return {"id": f"{stream}:{ts}:{rank}", "t": ts, "stream": stream, "message": message.rstrip("\n")}


def tail(logs: FunctionLogs, function_name: str, cursor: str | None = None, limit: int = 200) -> dict[str, Any]:
    """{"lines": [{"id", "t" (epoch ms), "stream", "message"}...] oldest first, "cursor"}: without
    a cursor the last `limit` lines; with one, up to `limit` lines written after it."""
    group = logs.group_name(function_name)
    if cursor is None:
        return _last(logs, group, limit)
    after = _parse_cursor(cursor)
    fresh: list[tuple[Key, str]] = []
    for stream in logs.stream_names(group, since_ms=after[0]):
        events = logs.events(group, stream)
        start = bisect.bisect_left(events, (after[0] - LOOKBACK_MS,))
        for ts, rank, ingestion, message in events[start:]:
            key = (ingestion, stream, ts, rank)
            if key > after:
                fresh.append((key, message))
    fresh.sort()
    fresh = fresh[:limit]
    return {"lines": [_line(key, message) for key, message in fresh],
            "cursor": _cursor(fresh[-1][0]) if fresh else cursor}


def _last(logs: FunctionLogs, group: str, limit: int) -> dict[str, Any]:
    newest: list[tuple[Key, str]] = []
    for stream in logs.stream_names(group):
        newest.extend(((ingestion, stream, ts, rank), message)
                      for ts, rank, ingestion, message in logs.events(group, stream)[-limit:])
    if not newest:
        return {"lines": [], "cursor": _cursor((0, "", 0, 0))}
    cursor = max(key for key, _ in newest)
    shown = sorted(newest, key=lambda e: (e[0][2], e[0][1], e[0][3]))[-limit:]  # by timestamp
    return {"lines": [_line(key, message) for key, message in shown], "cursor": _cursor(cursor)}
