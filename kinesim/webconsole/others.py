"""The console's queues, topics and log groups pages, and their rows of the overview.

GET /api/queues      {"queues": [QUEUE...]}: SQS queues and Kinesis queues, by name. A QUEUE:
                     {"type": "sqs"|"kinesis", "name", "arn", "state", "fifo", "visible" (depth),
                     "in_flight", "delayed" (SQS; null for Kinesis), "untaken" (Kinesis: records of
                     the stream not taken yet, part of "visible"), "stream" (Kinesis), "created"
                     (epoch ms), "dead_letter": {"name", "arn", "exists", "max_receives",
                     "depth"} or null, "dead_letter_for": [queue names] (SQS), "health"}
GET /api/topics      {"topics": [{"name", "arn", "fifo", "subscriptions", "pending", "health"}],
                     "subscriptions": [{"arn", "topic", "topic_arn", "protocol", "endpoint",
                     "confirmed", "raw", "filter_policy", "target": {"kind", "name", "exists",
                     "href"} or null}]}
GET /api/log-groups  {"log_groups": [{"name", "arn", "created" (ms), "retention_days",
                     "stored_bytes", "streams", "log_class", "last_event" (ms or null),
                     "function" (the function whose group it is, or null)}]}

Everything comes from the services' read-only snapshots (kinesim/sqs/stats.py,
kinesis/queue_stats.py, sns/stats.py, logs/stats.py); nothing here changes state.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from flask import Flask, request

from ..kinesis.queue_stats import queue_stats as kinesis_queue_stats
from ..logs.stats import group_stats
from ..sns.stats import topic_stats
from ..sqs.stats import queue_stats as sqs_queue_stats
from .figures import counted, ms, size_text
from .http import API, reads
from .pages import PREFIX
from .scope import scope_for

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

LAMBDA_GROUP = "/aws/lambda/"


def add_routes(app: Flask, edge: "Edge") -> None:
    @app.get(API + "/queues")
    @reads
    def others_queues() -> dict[str, Any]:
        return {"queues": queues(scope_for(edge, request))}

    @app.get(API + "/topics")
    @reads
    def others_topics() -> dict[str, Any]:
        return topics(scope_for(edge, request))

    @app.get(API + "/log-groups")
    @reads
    def others_log_groups() -> dict[str, Any]:
        return {"log_groups": log_groups(scope_for(edge, request), last_event=True)}


def overview_rows(scope: "ScopeServices") -> dict[str, list[dict[str, Any]]]:
    queue_rows = [{"name": q["name"], "href": f"{PREFIX}/queues", "state": q["state"], "health": q["health"],
                   "figures": {"visible": q["visible"], "in_flight": q["in_flight"],
                               "dead_letters": (q["dead_letter"] or {}).get("depth")}} for q in queues(scope)]
    found = topics(scope)
    topic_rows = [{"name": t["name"], "href": f"{PREFIX}/topics", "state": "ok", "health": t["health"],
                   "figures": {"subscriptions": t["subscriptions"]}} for t in found["topics"]]
    group_rows = [{"name": g["name"], "href": f"{PREFIX}/log-groups", "state": "ok", "health": g["health"],
                   "figures": {"bytes": g["stored_bytes"], "streams": g["streams"]}}
                  for g in log_groups(scope, last_event=False)]
    return {"queues": queue_rows, "topics": topic_rows, "log-groups": group_rows}


# ------------------------------------------------------------------ queues

def queues(scope: "ScopeServices") -> list[dict[str, Any]]:
    rows = [_sqs_row(q) for q in sqs_queue_stats(scope.sqs)]
    rows += [_kinesis_row(q) for q in kinesis_queue_stats(scope.kinesis)]
    rows.sort(key=lambda r: (r["name"], r["type"]))
    for row in rows:
        row["health"] = _queue_health(row)
    return rows


def _sqs_row(q: dict[str, Any]) -> dict[str, Any]:
    dlq = q["dead_letter"]
    return {"type": "sqs", "name": q["name"], "arn": q["arn"], "state": "ok", "fifo": q["fifo"],
            "visible": q["visible"], "in_flight": q["in_flight"], "delayed": q["delayed"], "untaken": None,
            "stream": None, "created": ms(q["created"]), "dead_letter_for": q["dead_letter_for"],
            "dead_letter": None if dlq is None else {
                "name": dlq["name"], "arn": dlq["arn"], "exists": dlq["exists"], "max_receives": dlq["max_receives"],
                "depth": dlq["visible"]}}


def _kinesis_row(q: dict[str, Any]) -> dict[str, Any]:
    return {"type": "kinesis", "name": q["name"], "arn": q["arn"], "state": q["status"], "fifo": False,
            "visible": q["visible"], "in_flight": q["in_flight"], "delayed": None, "untaken": q["untaken"],
            "stream": q["stream"], "created": ms(q["created"]), "dead_letter_for": [],
            "dead_letter": None if q["dead_letter"] != "BUILT_IN" else {
                "name": "built-in", "arn": None, "exists": True, "max_receives": q["max_receives"],
                "depth": q["dead_letters"]}}


def _queue_health(row: dict[str, Any]) -> str:
    if row["visible"] is None:
        return "busy: counts not read this time"
    parts = [f"{row['visible']:,} visible", f"{row['in_flight']:,} in flight"]
    if row["delayed"]:
        parts.append(f"{row['delayed']:,} delayed")
    if row["type"] == "kinesis":
        parts.insert(0, f"from stream {row['stream']}")
    dlq = row["dead_letter"]
    if dlq is not None:
        if not dlq["exists"]:
            parts.append(f"dead-letter queue {dlq['name']} missing")
        elif row["type"] == "kinesis":
            parts.append(counted(dlq["depth"], "dead letter"))
        else:
            parts.append(f"DLQ {dlq['name']}: {dlq['depth']:,}")
    return " · ".join(parts)


# ------------------------------------------------------------------ topics

def topics(scope: "ScopeServices") -> dict[str, Any]:
    found, subscriptions = topic_stats(scope.sns)
    for sub in subscriptions:
        sub["target"] = _target(scope, sub["protocol"], sub["endpoint"])
    for topic in found:
        mine = [s for s in subscriptions if s["topic_arn"] == topic["arn"]]
        missing = sum(1 for s in mine if s["target"] is not None and not s["target"]["exists"])
        protocols = sorted({s["protocol"] for s in mine})
        health = counted(topic["subscriptions"], "subscription")
        if protocols:
            health += f" ({', '.join(protocols)})"
        if topic["pending"]:
            health += f" · {topic['pending']} pending confirmation"
        if missing:
            health += f" · {counted(missing, 'endpoint')} missing"
        topic["health"] = health
    return {"topics": found, "subscriptions": subscriptions}


def _target(scope: "ScopeServices", protocol: str, endpoint: str) -> dict[str, Any] | None:
    """The kinesim resource a subscription delivers to, whether it exists, and its console page."""
    name = endpoint.rsplit(":", 1)[-1]
    if protocol == "sqs":
        return {"kind": "queue", "name": name, "exists": scope.sqs.queue_by_arn(endpoint) is not None,
                "href": f"{PREFIX}/queues"}
    if protocol == "lambda":
        parts = endpoint.split(":")
        name = parts[6] if len(parts) > 6 else name
        return {"kind": "function", "name": name, "exists": name in scope.functions.functions,
                "href": f"{PREFIX}/functions/{quote(name, safe='')}"}
    if protocol == "firehose":
        name = endpoint.rsplit("/", 1)[-1]
        return {"kind": "delivery stream", "name": name, "exists": scope.firehose.find(name) is not None,
                "href": f"{PREFIX}/delivery-streams/{quote(name, safe='')}"}
    return None


# ------------------------------------------------------------------ log groups

def log_groups(scope: "ScopeServices", last_event: bool) -> list[dict[str, Any]]:
    rows = group_stats(scope.logs, last_event=last_event)
    functions = scope.functions.functions
    for row in rows:
        name = row["name"]
        fn = name[len(LAMBDA_GROUP):] if name.startswith(LAMBDA_GROUP) else None
        row["function"] = fn if fn in functions else None
        retention = f"kept {counted(row['retention_days'], 'day')}" if row["retention_days"] else "kept forever"
        row["health"] = f"{size_text(row['stored_bytes'])} · {counted(row['streams'], 'stream')} · {retention}"
    return rows
