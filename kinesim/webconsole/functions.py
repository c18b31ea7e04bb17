"""The console's functions and event source mappings: a function's page (invocations, errors,
throttles and duration percentiles over time, its warm workers, its mappings with their last
batches, its live log, an invoke form) and their rows of the overview.

API (under /_kinesim/console/api/functions):
- GET  /NAME?seconds=S      the function: configuration, `workers`, `summary` and per-second
                            `points` of the last S seconds (default 300), `mappings` (rows below)
- GET  /NAME/timeline?mapping=UUID&limit=N
                            the last batch outcomes of its mappings (or of one), newest first
- GET  /NAME/logs?cursor=C  its log lines: the last ones, then (with the answer's cursor) the new
- POST /NAME/invoke         {"payload": "<JSON text>", "qualifier"?}: Lambda's Invoke (RequestResponse,
                            LogType Tail), answered with the result, the function error and log tail

Figures come from the Lambda service's in-process state (kinesim/functions/invocation_stats.py,
batch_timeline.py); the invoke action goes through the service's `call("Invoke")`, so its errors
are Lambda's own.
"""
from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING, Any

from flask import Flask, request

from ..functions.log_tail import tail
from ..functions.service import LambdaService
from ..protocol.rest import RequestContext
from .figures import bounded, counted
from .http import API, acts, reads
from .scope import scope_for

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

BASE = API + "/functions"
PAGE = "/_kinesim/console/functions/"
WINDOW_S = 300        # what the page charts by default: the last five minutes
TIMELINE_LIMIT = 100  # outcomes a page shows


def add_routes(app: Flask, edge: "Edge") -> None:
    def functions_for() -> LambdaService:
        return scope_for(edge, request).functions

    @app.get(BASE + "/<name>", endpoint="functions_detail")
    @reads
    def functions_detail(name: str) -> dict[str, Any]:
        svc = functions_for()
        fn = svc.function(name)
        seconds = bounded(request.args.get("seconds"), WINDOW_S, 10, 600)
        stats = svc.invocation_stats
        return {
            "name": fn["FunctionName"], "arn": fn["FunctionArn"], "runtime": fn.get("Runtime"),
            "handler": fn.get("Handler"), "memory_mb": fn.get("MemorySize"), "timeout_s": fn.get("Timeout"),
            "state": fn.get("State", "Active"), "last_modified": fn.get("LastModified"),
            "code_size": fn.get("CodeSize"), "description": fn.get("Description") or "",
            "log_group": svc.logs.group_name(name),
            "workers": svc.warm_workers(name),
            "seconds": seconds,
            "summary": stats.summary(name, seconds),
            "points": stats.points(name, seconds),
            "mappings": [mapping_row(svc, m) for m in mappings_of(svc, name)],
        }

    @app.get(BASE + "/<name>/timeline", endpoint="functions_timeline")
    @reads
    def functions_timeline(name: str) -> dict[str, Any]:
        svc = functions_for()
        svc.function(name)
        wanted = request.args.get("mapping")
        limit = bounded(request.args.get("limit"), TIMELINE_LIMIT, 1, 200)
        entries = []
        for mapping in mappings_of(svc, name):
            if wanted and mapping["UUID"] != wanted:
                continue
            source = _mapping_source(mapping)[1]
            entries.extend({**e, "mapping": mapping["UUID"], "source": source}
                           for e in svc.mapping_timeline(mapping["UUID"]))
        entries.sort(key=lambda e: (e["t"], e["id"]), reverse=True)
        return {"entries": entries[:limit]}

    @app.get(BASE + "/<name>/logs", endpoint="functions_logs")
    @reads
    def functions_logs(name: str) -> dict[str, Any]:
        svc = functions_for()
        # the log group outlives its function (as on AWS), so no existence check
        limit = bounded(request.args.get("limit"), 200, 1, 1000)
        return tail(svc.logs, name, request.args.get("cursor") or None, limit)

    @app.post(BASE + "/<name>/invoke", endpoint="functions_invoke")
    @acts
    def functions_invoke(name: str, body: dict[str, Any]) -> dict[str, Any]:
        svc = functions_for()
        payload = body.get("payload", "")
        if not isinstance(payload, str):
            raise ValueError("payload is the event's JSON text (a string)")
        params: dict[str, Any] = {"FunctionName": name, "Payload": payload.encode(), "LogType": "Tail"}
        if body.get("qualifier"):
            params["Qualifier"] = str(body["qualifier"])
        request_id = str(uuid.uuid4())
        out = svc.call("Invoke", params, RequestContext(request_id, request.host, {}))
        result = out.get("Payload") or b""
        return {"request_id": request_id, "status": out["StatusCode"], "executed_version": out.get("ExecutedVersion"),
                "function_error": out.get("FunctionError"), "payload": result.decode("utf-8", "replace"),
                "log": base64.b64decode(out.get("LogResult") or "").decode("utf-8", "replace")}


def mappings_of(svc: LambdaService, name: str) -> list[dict[str, Any]]:
    """The function's mappings (of any of its versions or aliases), oldest first."""
    arn = svc.function_arn(name)
    mine = [m for m in list(svc.mappings.values())
            if m.get("FunctionArn") == arn or str(m.get("FunctionArn", "")).startswith(arn + ":")]
    return sorted(mine, key=lambda m: m.get("CreatedAt", 0))


def _source(arn: str) -> tuple[str, str, str | None]:
    """(kind, short name, console page) of an event source ARN."""
    resource = arn.split(":", 5)[-1]
    if ":sqs:" in arn:
        return "sqs", resource, "/_kinesim/console/queues"
    if ":dynamodb:" in arn:
        return "dynamodb", resource.split("/")[1] if "/" in resource else resource, None
    stream = resource.split("/")[1] if resource.startswith("stream/") else resource
    kind = "kinesis consumer" if "/consumer/" in resource else "kinesis"
    return kind, stream, "/_kinesim/console/streams/" + stream


def _mapping_source(doc: dict[str, Any]) -> tuple[str, str, str | None]:
    """(kind, short name, console page) of a mapping's source: an ARN's, or a Kafka topic's (a
    self-managed Kafka source has no ARN: its topic is one of the server's streams)."""
    if doc.get("EventSourceArn"):
        return _source(doc["EventSourceArn"])
    topic = (doc.get("Topics") or [""])[0]
    return "kafka", topic, "/_kinesim/console/streams/" + topic


def _source_arn(doc: dict[str, Any]) -> str:
    """A mapping's EventSourceArn; a Kafka source's bootstrap servers, which stand for it."""
    endpoints = ((doc.get("SelfManagedEventSource") or {}).get("Endpoints") or {}).get("KAFKA_BOOTSTRAP_SERVERS")
    return doc.get("EventSourceArn") or ",".join(endpoints or [])


def mapping_row(svc: LambdaService, doc: dict[str, Any]) -> dict[str, Any]:
    """A mapping as its function's page and the overview list it: state, source, settings, and
    its health (last result, lag, the last batch, outcome counts of the kept timeline)."""
    live = svc.live_mapping(doc)
    kind, source, source_href = _mapping_source(doc)
    timeline = svc.mapping_timeline(doc["UUID"])
    counts: dict[str, int] = {}
    for entry in timeline:
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    last = timeline[-1] if timeline else None
    ages = [e["age_ms"] for e in timeline if e.get("age_ms") is not None]
    lag = svc.mapping_lag(doc["UUID"])
    on_failure = ((doc.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    return {
        "uuid": doc["UUID"], "function": doc["FunctionArn"].split(":function:", 1)[1],
        "source_arn": _source_arn(doc), "source_kind": kind, "source": source, "source_href": source_href,
        "state": live.get("State"), "last_result": live.get("LastProcessingResult"),
        "batch_size": doc.get("BatchSize"), "batching_window_s": doc.get("MaximumBatchingWindowInSeconds"),
        "starting_position": doc.get("StartingPosition"), "parallelization": doc.get("ParallelizationFactor"),
        "bisect": doc.get("BisectBatchOnFunctionError"), "max_retries": doc.get("MaximumRetryAttempts"),
        "max_record_age_s": doc.get("MaximumRecordAgeInSeconds"), "on_failure": on_failure,
        "report_item_failures": "ReportBatchItemFailures" in (doc.get("FunctionResponseTypes") or ()),
        "lag_records": lag["records"] if lag else None,
        "iterator_age_ms": ages[-1] if ages else None,
        "last_batch": {"t": last["t"], "outcome": last["outcome"], "records": last["records"]} if last else None,
        "outcomes": counts,
    }


def overview_rows(scope: "ScopeServices") -> dict[str, list[dict[str, Any]]]:
    svc: LambdaService = scope.functions
    stats = svc.invocation_stats
    functions = []
    for name, fn in sorted(list(svc.functions.items())):
        s = stats.summary(name, WINDOW_S)
        workers = svc.warm_workers(name)
        warm = workers["idle"] + workers["busy"]
        functions.append({
            "name": name, "href": PAGE + name, "state": fn.get("State", "Active"),
            "health": f"{s['per_s']:.1f} invocations/s · {counted(int(s['errors']), 'error')} in 5 min"
                      + (f" · p99 {s['p99_ms']:.0f} ms" if s["p99_ms"] is not None else "")
                      + f" · {warm} warm ({workers['busy']} busy)",
            "figures": {"invocations": s["invocations"], "errors": s["errors"], "throttles": s["throttles"],
                        "per_s": s["per_s"], "p99_ms": s["p99_ms"], "warm": warm, "busy": workers["busy"]},
        })
    mappings = []
    for doc in sorted(list(svc.mappings.values()), key=lambda m: m.get("CreatedAt", 0)):
        row = mapping_row(svc, doc)
        health = [row["last_result"] or ""]
        if row["lag_records"] is not None:
            health.append(f"{counted(row['lag_records'], 'record')} behind")
        if row["iterator_age_ms"] is not None:
            health.append(f"iterator age {row['iterator_age_ms']} ms")
        failed = sum(row["outcomes"].get(k, 0) for k in ("retried", "failed", "on-failure", "skipped", "problem"))
        health.append(f"{failed:,} failed of the last {counted(sum(row['outcomes'].values()), 'batch', 'batches')}")
        # Named as a user thinks of it, by what it connects (its UUID second): the function it
        # runs and the stream or queue it reads, as "function ← source".
        mappings.append({
            "name": f"{row['function']} ← {row['source']}", "id": row["uuid"], "detail": row["uuid"],
            "href": PAGE + row["function"].split(":")[0], "state": row["state"],
            "health": " · ".join(h for h in health if h),
            "figures": {"lag_records": row["lag_records"], "iterator_age_ms": row["iterator_age_ms"],
                        "failed": failed},
        })
    return {"functions": functions, "mappings": mappings}
