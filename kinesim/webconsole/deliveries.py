"""The console's delivery stream page and overview rows.

GET  /api/delivery-streams/NAME        source, destination, buffer against the hints, next flush,
                                       metrics, rates and series, objects written lately, failures
POST /api/delivery-streams/NAME/flush  deliver what is buffered now (the worker's own flush, as if
                                       the interval had elapsed); waits up to FLUSH_WAIT_S for it

All of it comes from the Firehose service in this process (`Deliveries.state`, its per-second
counters `FirehoseService.rates`); nothing calls the AWS API over HTTP. Times are epoch ms.
"""
from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from flask import Flask, request

from firehose import streams_api

from .figures import ms
from .http import API, acts, reads
from .pages import PREFIX
from .scope import scope_for

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

FLUSH_WAIT_S = 10.0     # a flush with a Lambda transform may take seconds; the page re-polls after
SERIES_S = 300          # the charts' span
RATE_WINDOW_S = 10
DEFAULT_PREFIX = "YYYY/MM/DD/HH/"   # what Firehose uses when Prefix is empty (UTC)


def add_routes(app: Flask, edge: "Edge") -> None:
    @app.get(API + "/delivery-streams/<name>")
    @reads
    def deliveries_detail(name: str) -> dict[str, Any]:
        return detail(scope_for(edge, request), name)

    @app.post(API + "/delivery-streams/<name>/flush")
    @acts
    def deliveries_flush(name: str, body: dict[str, Any]) -> dict[str, Any]:
        firehose = scope_for(edge, request).firehose
        ds = streams_api.active(firehose, name)   # AWS's ResourceNotFound / ResourceInUse
        done = firehose.deliveries.flush_now(ds.name, FLUSH_WAIT_S)
        if done is None:
            raise firehose.not_found(name)
        return {**done, "objects": [_object(o) for o in done["objects"]]}


def overview_rows(scope: "ScopeServices") -> dict[str, list[dict[str, Any]]]:
    firehose = scope.firehose
    rows = []
    for ds in sorted(firehose.all_streams(), key=lambda d: d.name):
        metrics = firehose.deliveries.metrics(ds.name) or {}
        series = firehose.rates.get(ds.name)
        per_s = series.rate(RATE_WINDOW_S)["records_in"] if series is not None else 0.0
        failed = metrics.get("ErrorOutput.Records", 0) + metrics.get("DroppedRecords", 0)
        buffered = metrics.get("BufferedRecords", 0)
        health = (f"{per_s:,.1f} records/s in · {buffered:,} buffered · "
                  f"{metrics.get('DeliveryToS3.Records', 0):,} delivered · {failed:,} failed")
        if metrics.get("LastError"):
            health += f" · last error: {metrics['LastError']}"
        rows.append({"name": ds.name, "href": f"{PREFIX}/delivery-streams/{quote(ds.name, safe='')}",
                     "state": ds.status, "health": health,
                     "figures": {"in/s": round(per_s, 1), "buffered": buffered,
                                 "delivered": metrics.get("DeliveryToS3.Records", 0), "failed": failed}})
    return {"delivery-streams": rows}


# ------------------------------------------------------------------ the page's document

def detail(scope: "ScopeServices", name: str) -> dict[str, Any]:
    firehose = scope.firehose
    ds = firehose.find(name)
    if ds is None:
        raise LookupError(f"Firehose {name} under account {firehose.account} not found.")
    with ds.lock:
        dest, source = copy.deepcopy(ds.destination), copy.deepcopy(ds.source)
        status, kind, version, created = ds.status, ds.type, ds.version, ds.created
    state = firehose.deliveries.state(ds.name)
    series = firehose.rates.get(ds.name)
    doc: dict[str, Any] = {
        "name": ds.name, "arn": ds.arn, "state": status, "type": kind, "version": version, "created": ms(created),
        "source": _source(scope, kind, source), "destination": _destination(scope, dest),
        "rates": series.rate(RATE_WINDOW_S) if series is not None else None,
        "series": series.points(SERIES_S) if series is not None else None,
        "buffer": None, "metrics": None, "objects": [], "failures": [],
    }
    if state is not None:
        doc.update(buffer=_buffer(state["buffer"]), metrics=_metrics(state["metrics"]),
                   objects=[_object(o) for o in state["objects"]],
                   failures=[{**f, "time": ms(f["time"])} for f in state["failures"]])
    return doc


def _source(scope: "ScopeServices", kind: str, source: dict[str, Any] | None) -> dict[str, Any]:
    if kind != "KinesisStreamAsSource" or not source:
        return {"type": "DirectPut"}
    arn = source["KinesisStreamARN"]
    stream = arn.rsplit("/", 1)[-1]
    return {"type": kind, "stream": stream, "arn": arn, "exists": scope.kinesis.find(stream) is not None,
            "started": ms(source.get("DeliveryStartTimestamp"))}


def _destination(scope: "ScopeServices", dest: dict[str, Any]) -> dict[str, Any]:
    bucket = _bucket(dest["BucketARN"])
    conversion = dest.get("DataFormatConversionConfiguration") or {}
    processing = dest.get("ProcessingConfiguration") or {}
    processors = (processing.get("Processors") or []) if processing.get("Enabled", True) else []
    backup = dest.get("S3BackupDescription") if dest.get("S3BackupMode") == "Enabled" else None
    return {
        "bucket": bucket, "bucket_exists": scope.objects.bucket_exists(bucket),
        "prefix": dest.get("Prefix") or DEFAULT_PREFIX, "error_prefix": dest.get("ErrorOutputPrefix") or None,
        "compression": dest.get("CompressionFormat", "UNCOMPRESSED"), "file_extension": dest.get("FileExtension"),
        "conversion": _conversion(conversion) if conversion.get("Enabled") else None,
        "transform": _transform(scope, processors),
        "processors": [p.get("Type") for p in processors],
        "dynamic_partitioning": bool((dest.get("DynamicPartitioningConfiguration") or {}).get("Enabled")),
        "time_zone": dest.get("CustomTimeZone") or "UTC",
        "backup": {"bucket": _bucket(backup["BucketARN"]), "prefix": backup.get("Prefix") or DEFAULT_PREFIX}
        if backup else None,
    }


def _conversion(cfg: dict[str, Any]) -> dict[str, Any]:
    def first(found: dict[str, Any] | None) -> str | None:
        return next(iter(found), None) if found else None
    schema = cfg.get("SchemaConfiguration") or {}
    table = ".".join(filter(None, (schema.get("DatabaseName"), schema.get("TableName"))))
    return {"input": first((cfg.get("InputFormatConfiguration") or {}).get("Deserializer")),
            "output": first((cfg.get("OutputFormatConfiguration") or {}).get("Serializer")),
            "schema": table or None}


def _transform(scope: "ScopeServices", processors: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Lambda processor's function: its name (from the ARN) and whether it exists here."""
    for processor in processors:
        if processor.get("Type") != "Lambda":
            continue
        params = {p.get("ParameterName"): p.get("ParameterValue") for p in processor.get("Parameters") or []}
        arn = params.get("LambdaArn") or ""
        parts = arn.split(":")
        function = parts[6] if len(parts) >= 7 and parts[5] == "function" else arn
        return {"function": function, "arn": arn, "exists": scope.functions.has_function(arn or function),
                "retries": params.get("NumberOfRetries"), "buffer_size_mib": params.get("BufferSizeInMBs")}
    return None


def _buffer(state: dict[str, Any]) -> dict[str, Any]:
    now = time.time()
    next_flush = state["next_flush"]
    return {**state, "oldest": ms(state["oldest"]), "next_flush": ms(next_flush),
            "next_flush_in_ms": None if next_flush is None else max(0, int((next_flush - now) * 1000)),
            "size_bytes": state["size_mib"] << 20, "now": ms(now)}


def _metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {**metrics, "LastDeliveryTimestamp": ms(metrics["LastDeliveryTimestamp"]),
            "LastErrorTimestamp": ms(metrics["LastErrorTimestamp"])}


def _object(found: dict[str, Any]) -> dict[str, Any]:
    return {**found, "time": ms(found["time"])}


def _bucket(arn: str) -> str:
    return arn.split(":::", 1)[-1]
