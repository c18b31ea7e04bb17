"""The console's Kinesis streams: a stream's page (its shard map and lineage, write rates, consumers,
every reader with its lag per shard, a record browser, a live tail, put / split / merge) and the
streams' and channels' rows of the overview.

API (under /_kinesim/console/api/streams):
- GET  /NAME?seconds=S   the stream: settings, `figures`, `shards` (hash range, lineage, generation,
                         open/closed, records kept, first/last sequence number, write rate and
                         records/bytes written in the last 10 minutes),
                         `consumers`, `readers` (stream_readers.py: kind, name, href, state, lag per
                         shard in records and ms), `points` (records/bytes per second of the last S
                         seconds, and per shard "records:<shardId>"), `lag_points` (ms per shard)
- GET  /NAME/records?shard=ID&type=T&value=V&limit=N
                         a peek (stream_records.py): records from TRIM_HORIZON, LATEST,
                         AT_SEQUENCE_NUMBER (V) or AT_TIMESTAMP (V: epoch ms or ISO 8601), decoded;
                         nothing is consumed
- GET  /NAME/tail?cursor=C   records put since the cursor, newest first, and the next cursor (none
                         given: no records and a cursor at the tips)
- POST /NAME/put     {"partition_key", "data" (text), "explicit_hash_key"?}: PutRecord
- POST /NAME/split   {"shard", "new_starting_hash_key"}: SplitShard
- POST /NAME/merge   {"shard", "adjacent"}: MergeShards

Actions go through the Kinesis service's `call`, so their validation and errors are AWS's.
Write rates come from the service's per-shard counters (`KinesisService.write_rates`).
"""
from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

from flask import Flask, request

from ..kinesis.model import Shard, Stream
from .stream_readers import LagHistory, channel_reader, channel_rows, readers
from .stream_records import peek, tail
from .figures import bounded, counted
from .http import API, acts, reads
from .scope import scope_for

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

BASE = API + "/streams"
PAGE = "/_kinesim/console/streams/"
WINDOW_S = 300       # what the page charts by default: the last five minutes
RATE_WINDOW_S = 10   # rates in figures: the mean of the last ten seconds
PEEK_LIMIT = 50

_lag_history = LagHistory()


def add_routes(app: Flask, edge: "Edge") -> None:
    def kinesis_for() -> Any:
        return scope_for(edge, request).kinesis

    def stream_named(kinesis: Any, name: str) -> Stream:
        return kinesis.stream({"StreamName": name})  # AWS's ResourceNotFoundException: 404

    @app.get(BASE + "/<name>", endpoint="streams_detail")
    @reads
    def streams_detail(name: str) -> dict[str, Any]:
        scope = scope_for(edge, request)
        kinesis = scope.kinesis
        stream = stream_named(kinesis, name)
        seconds = bounded(request.args.get("seconds"), WINDOW_S, 10, 600)
        shards = kinesis.visible_shards(stream)
        shard_docs = [_shard_doc(kinesis, stream, s) for s in _with_generations(shards)]
        found = readers(scope, stream, shards)
        _lag_history.sample(stream, found)
        rate = {"records": sum(s["write"]["records_per_s"] for s in shard_docs),
                "bytes": sum(s["write"]["bytes_per_s"] for s in shard_docs)}
        return {
            "name": stream.name, "arn": stream.arn, "status": stream.status, "mode": stream.mode,
            "created_ms": int(stream.created * 1000), "retention_hours": stream.retention_hours,
            "encryption": stream.encryption_type, "distribution": stream.distribution,
            "max_record_kib": stream.max_record_size_kib,
            "figures": {"open_shards": sum(1 for s in shards if s.is_open), "shards": len(shards),
                        "records_per_s": rate["records"], "bytes_per_s": rate["bytes"],
                        "records_kept": sum(s["records"] for s in shard_docs),
                        "consumers": len(stream.consumers), "readers": len(found),
                        "max_lag_ms": max((r["max_ms"] or 0 for r in found), default=0)},
            "shards": shard_docs,
            "consumers": [{"name": c.name, "arn": c.arn, "status": c.status, "created_ms": int(c.created * 1000)}
                          for c in list(stream.consumers.values())],
            "readers": found,
            "seconds": seconds,
            "points": _write_points(kinesis, shards, seconds),
            "lag_points": _lag_history.points(stream, [s.shard_id for s in shards], seconds),
        }

    @app.get(BASE + "/<name>/records", endpoint="streams_records")
    @reads
    def streams_records(name: str) -> dict[str, Any]:
        kinesis = kinesis_for()
        stream = stream_named(kinesis, name)
        args = request.args
        shard = args.get("shard") or _first_open(kinesis, stream)
        return peek(kinesis, stream, shard, args.get("type") or "TRIM_HORIZON",
                                   args.get("value") or None, bounded(args.get("limit"), PEEK_LIMIT, 1, 500))

    @app.get(BASE + "/<name>/tail", endpoint="streams_tail")
    @reads
    def streams_tail(name: str) -> dict[str, Any]:
        kinesis = kinesis_for()
        stream = stream_named(kinesis, name)
        return tail(kinesis, stream, kinesis.visible_shards(stream), request.args.get("cursor") or None)

    @app.post(BASE + "/<name>/put", endpoint="streams_put")
    @acts
    def streams_put(name: str, body: dict[str, Any]) -> dict[str, Any]:
        data = body.get("data", "")
        if not isinstance(data, str):
            raise ValueError("data is the record's text (a string)")
        params: dict[str, Any] = {"StreamName": name, "PartitionKey": body.get("partition_key"),
                                  "Data": base64.b64encode(data.encode()).decode()}
        if body.get("explicit_hash_key") not in (None, ""):
            params["ExplicitHashKey"] = body["explicit_hash_key"]
        out = kinesis_for().call("PutRecord", params)
        return {"shard": out["ShardId"], "sequence_number": out["SequenceNumber"]}

    @app.post(BASE + "/<name>/split", endpoint="streams_split")
    @acts
    def streams_split(name: str, body: dict[str, Any]) -> dict[str, Any]:
        kinesis = kinesis_for()
        kinesis.call("SplitShard", {"StreamName": name, "ShardToSplit": body.get("shard"),
                                    "NewStartingHashKey": body.get("new_starting_hash_key")})
        return {"status": stream_named(kinesis, name).status}

    @app.post(BASE + "/<name>/merge", endpoint="streams_merge")
    @acts
    def streams_merge(name: str, body: dict[str, Any]) -> dict[str, Any]:
        kinesis = kinesis_for()
        kinesis.call("MergeShards", {"StreamName": name, "ShardToMerge": body.get("shard"),
                                     "AdjacentShardToMerge": body.get("adjacent")})
        return {"status": stream_named(kinesis, name).status}


# ---------------------------------------------------------------------------- shards

def _with_generations(shards: list[Shard]) -> list[tuple[Shard, int]]:
    """Each shard with its generation: 0 for a shard without a parent listed, else one more than
    its deepest parent's (the shard map's rows)."""
    depth: dict[str, int] = {}
    out = []
    for shard in shards:  # parents always come before their children in a stream's list
        parents = [p for p in (shard.parent, shard.adjacent_parent) if p in depth]
        depth[shard.shard_id] = 1 + max(depth[p] for p in parents) if parents else 0
        out.append((shard, depth[shard.shard_id]))
    return out


def _shard_doc(kinesis: Any, stream: Stream, pair: tuple[Shard, int]) -> dict[str, Any]:
    shard, generation = pair
    tip = shard.next_index
    first = kinesis.store.read(shard.uid, 1, 1, kinesis.retention_horizon(stream)) if tip > 1 else []
    last = kinesis.store.read(shard.uid, tip - 1, 1) if first else []
    series = kinesis.write_rates.get(shard.uid)
    rate = series.rate(RATE_WINDOW_S) if series else {"records": 0.0, "bytes": 0.0}
    written = series.total() if series else {"records": 0, "bytes": 0}
    return {
        "id": shard.shard_id, "generation": generation,
        "start_hash": str(shard.start_hash), "end_hash": str(shard.end_hash),
        "midpoint": str((shard.start_hash + shard.end_hash + 1) // 2),
        "parent": shard.parent, "adjacent_parent": shard.adjacent_parent,
        "open": shard.is_open, "created_ms": shard.created * 1000,
        "closed_ms": int(shard.closed_at * 1000) if shard.closed_at else None,
        "records": tip - first[0][0] if first else 0,
        "first_sequence": first[0][1] if first else None, "last_sequence": last[0][1] if last else None,
        "starting_sequence": shard.starting_seq, "ending_sequence": shard.ending_seq,
        "write": {"records_per_s": rate["records"], "bytes_per_s": rate["bytes"],
                  "records_10min": written["records"], "bytes_10min": written["bytes"]},
    }


def _write_points(kinesis: Any, shards: list[Shard], seconds: int) -> dict[str, list[float]]:
    """The stream's records and bytes per second, and each shard's records ("records:<id>")."""
    now = time.time()
    out: dict[str, list[float]] = {"t": list(range(int(now) - seconds + 1, int(now) + 1))}
    out["records"] = [0.0] * seconds
    out["bytes"] = [0.0] * seconds
    for shard in shards:
        series = kinesis.write_rates.get(shard.uid)
        points = series.points(seconds, now) if series else {"records": [0] * seconds, "bytes": [0] * seconds}
        out["records:" + shard.shard_id] = points["records"]
        out["records"] = [a + b for a, b in zip(out["records"], points["records"])]
        out["bytes"] = [a + b for a, b in zip(out["bytes"], points["bytes"])]
    return out


def _first_open(kinesis: Any, stream: Stream) -> str:
    shards = kinesis.visible_shards(stream)
    if not shards:
        raise ValueError(f"stream {stream.name} has no shards yet")
    return next((s for s in shards if s.is_open), shards[0]).shard_id


# ---------------------------------------------------------------------------- overview

def overview_rows(scope: "ScopeServices") -> dict[str, list[dict[str, Any]]]:
    kinesis = scope.kinesis
    streams = []
    for stream in sorted(kinesis.all_streams(), key=lambda s: s.name):
        shards = kinesis.visible_shards(stream)
        records = bytes_ = 0.0
        for shard in shards:
            series = kinesis.write_rates.get(shard.uid)
            if series:
                rate = series.rate(RATE_WINDOW_S)
                records, bytes_ = records + rate["records"], bytes_ + rate["bytes"]
        found = readers(scope, stream, shards)
        lag = max((r["max_ms"] or 0 for r in found), default=0)
        open_shards = sum(1 for s in shards if s.is_open)
        streams.append({
            "name": stream.name, "href": PAGE + stream.name, "state": stream.status,
            "health": f"{records:.1f} records/s in · {counted(open_shards, 'open shard')} · "
                      f"{counted(len(found), 'reader')} · max lag {lag} ms",
            "figures": {"records_per_s": records, "bytes_per_s": bytes_, "open_shards": open_shards,
                        "readers": len(found), "max_lag_ms": lag},
        })
    channels = []
    for channel, stream in channel_rows(scope):
        behind = None
        if stream is not None:
            behind = channel_reader(scope, channel, stream, kinesis.visible_shards(stream))
        health = [f"{channel.stream_name} → s3://{channel.bucket}"]
        if behind and behind["positions"]:
            health.append(f"{counted(behind['records'], 'record')} not yet delivered · oldest {behind['max_ms']} ms")
        if channel.reason:
            health.append(channel.reason)
        channels.append({
            "name": channel.name, "href": PAGE + channel.stream_name if stream is not None else None,
            "state": channel.status, "health": " · ".join(health),
            "figures": {"records_behind": behind["records"] if behind else None,
                        "max_lag_ms": behind["max_ms"] if behind else None},
        })
    return {"streams": streams, "channels": channels}
