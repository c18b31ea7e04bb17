"""Who reads a stream, and how far behind each reader is on each shard.

Every in-process reader keeps its progress as a `kinesis.checkpoints.Checkpoint` in a store
document: event source mappings ("mapping-checkpoint", by UUID: written after each batch is
handled), Firehose sources ("firehose-checkpoint", by delivery stream: written once the records are
in an object) and channels ("kinesis-channel-checkpoint", by channel: once delivered). A mark's
position is the next record index to handle, so what is behind on a shard is every record from
there to the shard's tip, and its age is that of the oldest of them:

    records = tip - (index of the first record kept at or after the position)
    ms      = now - arrival time of that record

A shard without a mark is read from its start once its parents are done (lineage order), so all
its records are behind; a shard marked ended is done with.

Continuous queries (Spark) keep their position in Spark's checkpoint under the Spark state
directory: `offsets/N` is micro-batch N's end offset (one line per source after a version line
and a metadata line; kinesim's source writes {"shards": {shardId: last sequence number read},
"closed": [...]}, see analytics/streaming.py) and `commits/N` exists once batch N is done. The
position is the newest committed batch's offset. Which line is which stream is not written
there: a line is matched to this stream by its sequence numbers (they encode the shard's creation
time); a line without any (nothing read yet) is this stream's only when the query reads no other
stream. Otherwise the query is listed with `positions` false and a note saying why.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from ..kinesis import channels as kinesis_channels
from ..kinesis import sequence
from ..kinesis.channel_state import CHECKPOINT_KIND as CHANNEL_CHECKPOINT
from ..kinesis.checkpoints import Checkpoint, CheckpointStore
from ..kinesis.model import Shard, Stream
from .kafka_groups import kafka_readers

if TYPE_CHECKING:
    from ..scope_services import ScopeServices

MAPPING_CHECKPOINT = "mapping-checkpoint"    # kinesim/functions/checkpoints.py KIND
FIREHOSE_CHECKPOINT = "firehose-checkpoint"  # firehose/source.py KIND
CONSOLE = "/_kinesim/console"


# ---------------------------------------------------------------------------- lag of a position

def shard_lag(scope: "ScopeServices", stream: Stream, shard: Shard, position: int, ended: bool,
              now: float) -> dict[str, Any]:
    """{"shard", "position", "records", "ms"} behind for a reader at `position` on `shard`."""
    out = {"shard": shard.shard_id, "position": position, "ended": ended, "records": 0, "ms": 0}
    if ended or position >= shard.next_index:
        return out
    kinesis = scope.kinesis
    rows = kinesis.store.read(shard.uid, position, 1, kinesis.retention_horizon(stream))
    if rows:
        out["records"] = shard.next_index - rows[0][0]
        out["ms"] = max(0, int((now - rows[0][4]) * 1000))
    return out


def checkpoint_lag(scope: "ScopeServices", stream: Stream, shards: list[Shard],
                   checkpoint: Checkpoint) -> list[dict[str, Any]]:
    now = time.time()
    out = []
    for shard in shards:
        mark = checkpoint.mark(shard)
        out.append(shard_lag(scope, stream, shard, mark.position if mark else 1, bool(mark and mark.ended), now))
    return out


def stored_checkpoint(scope: "ScopeServices", kind: str, name: str) -> Checkpoint | None:
    return CheckpointStore(scope.store, kind, name).load()


def _reader(kind: str, name: str, href: str | None, state: str | None, detail: str,
            shards: list[dict[str, Any]] | None, note: str | None = None) -> dict[str, Any]:
    known = shards is not None
    return {"kind": kind, "name": name, "href": href, "state": state, "detail": detail, "positions": known,
            "note": note, "shards": shards or [],
            "records": sum(s["records"] for s in shards) if known else None,
            "max_ms": max((s["ms"] for s in shards), default=0) if known else None}


# ---------------------------------------------------------------------------- the readers

def readers(scope: "ScopeServices", stream: Stream, shards: list[Shard]) -> list[dict[str, Any]]:
    """Every reader of `stream` kinesim knows of, each with its lag per shard."""
    return (_mappings(scope, stream, shards) + _deliveries(scope, stream, shards) + _channels(scope, stream, shards)
            + _queries(scope, stream, shards) + kafka_readers(scope, stream, shards, shard_lag))


def _mappings(scope: "ScopeServices", stream: Stream, shards: list[Shard]) -> list[dict[str, Any]]:
    svc = scope.functions
    out = []
    for doc in sorted(list(svc.mappings.values()), key=lambda m: m.get("CreatedAt", 0)):
        source = doc.get("EventSourceArn", "")
        if source != stream.arn and not source.startswith(stream.arn + "/consumer/"):
            continue
        function = doc["FunctionArn"].split(":function:", 1)[1]
        state = svc.live_mapping(doc).get("State")
        checkpoint = stored_checkpoint(scope, MAPPING_CHECKPOINT, doc["UUID"])
        via = " via consumer " + source.rsplit("/consumer/", 1)[1].split(":")[0] if "/consumer/" in source else ""
        note = None if checkpoint else "no checkpoint yet (the mapping has not started reading)"
        out.append(_reader("lambda", f"{function} ({doc['UUID'][:8]})", f"{CONSOLE}/functions/{function.split(':')[0]}",
                           state, f"event source mapping {doc['UUID']}{via}, batch size {doc.get('BatchSize')}",
                           checkpoint_lag(scope, stream, shards, checkpoint) if checkpoint else None, note))
    return out


def _deliveries(scope: "ScopeServices", stream: Stream, shards: list[Shard]) -> list[dict[str, Any]]:
    out = []
    for ds in sorted(scope.firehose.all_streams(), key=lambda d: d.name):
        if not ds.source or ds.source.get("KinesisStreamARN") != stream.arn:
            continue
        checkpoint = stored_checkpoint(scope, FIREHOSE_CHECKPOINT, ds.name)
        out.append(_reader("firehose", ds.name, f"{CONSOLE}/delivery-streams/{ds.name}", ds.status,
                           "delivery stream (records not yet delivered count as behind)",
                           checkpoint_lag(scope, stream, shards, checkpoint) if checkpoint else None,
                           None if checkpoint else "no checkpoint yet"))
    return out


def _channels(scope: "ScopeServices", stream: Stream, shards: list[Shard]) -> list[dict[str, Any]]:
    return [channel_reader(scope, c, stream, shards) for c in kinesis_channels.on_stream(scope.kinesis, stream)]


def channel_reader(scope: "ScopeServices", channel: Any, stream: Stream, shards: list[Shard]) -> dict[str, Any]:
    checkpoint = stored_checkpoint(scope, CHANNEL_CHECKPOINT, channel.name)
    return _reader("channel", channel.name, f"{CONSOLE}/buckets/{channel.bucket}", channel.status,
                   f"channel to s3://{channel.bucket} (records not yet delivered count as behind)",
                   checkpoint_lag(scope, stream, shards, checkpoint) if checkpoint else None,
                   channel.reason or (None if checkpoint else "delivers records put once it is ACTIVE"))


def channel_rows(scope: "ScopeServices") -> list[tuple[Any, Stream | None]]:
    """Every channel with the stream it reads (None: deleted, or a namesake created since)."""
    registry = scope.kinesis.channels
    if registry is None:
        return []
    out = []
    for channel in registry.all():
        stream = scope.kinesis.find(channel.stream_name)
        same = stream is not None and stream.arn == channel.stream_arn and stream.created == channel.stream_created
        out.append((channel, stream if same else None))
    return out


# ---------------------------------------------------------------------------- continuous queries

def _queries(scope: "ScopeServices", stream: Stream, shards: list[Shard]) -> list[dict[str, Any]]:
    if scope is not scope.root.own_scope:  # a query names its streams, not their account (queries.py)
        return []
    from ..analytics import (  # light modules: no Spark imported
        connect_server,
        continuous,
    )
    directory = continuous.queries_dir(connect_server.state_dir(scope.objects.root))
    out = []
    for name in continuous.names(directory):
        try:
            query = continuous.load(directory, name)
        except (continuous.QueryError, ValueError, OSError):
            continue
        streams = continuous.stream_refs(query.sql)
        if stream.name not in streams:
            continue
        state = "error" if query.error else "running" if query.running else "stopped"
        positions, note = spark_positions(continuous.checkpoint_dir(directory, name), stream, shards, len(streams) == 1)
        lag = None
        if positions is not None:
            now = time.time()
            lag = [shard_lag(scope, stream, s, *positions.get(s.shard_id, (1, False)), now) for s in shards]
        out.append(_reader("query", name, f"{CONSOLE}/queries", state,
                           f"continuous query{' into ' + query.into if query.into else ''}: {query.sql}", lag, note))
    return out


def spark_positions(checkpoint: str, stream: Stream, shards: list[Shard],
                    only_stream: bool) -> tuple[dict[str, tuple[int, bool]] | None, str | None]:
    """{shardId: (next index, ended)} at the query's newest committed micro-batch, or None and why."""
    batch = _newest(os.path.join(checkpoint, "commits"))
    if batch is None:
        return None, "no micro-batch committed yet: position unknown"
    try:
        with open(os.path.join(checkpoint, "offsets", str(batch))) as f:
            lines = f.read().splitlines()[2:]
    except OSError:
        return None, f"Spark's offset log of batch {batch} is missing: position unknown"
    offsets = [o for o in map(_json, lines) if isinstance(o, dict) and isinstance(o.get("shards"), dict)]
    by_index = {s.index: s for s in shards}
    blank = None
    for offset in offsets:
        seqs = [sequence.parse(v) for v in offset["shards"].values() if isinstance(v, str)]
        if not seqs:
            blank = offset
            continue
        if all(p is not None and p.shard_index in by_index and by_index[p.shard_index].created == p.shard_created
               for p in seqs):
            return _positions(offset), None
    if blank is not None and only_stream:
        return _positions(blank), None
    return None, ("Spark's checkpoint holds no position of this stream's shards (the query reads several streams "
                  "and has read nothing of this one yet, or it read a stream of this name deleted since)")


def _positions(offset: dict[str, Any]) -> dict[str, tuple[int, bool]]:
    closed = set(offset.get("closed") or ())
    out = {}
    for shard_id, seq in offset["shards"].items():
        parsed = sequence.parse(seq) if isinstance(seq, str) else None
        out[shard_id] = (parsed.record_index + 1 if parsed else 1, shard_id in closed)
    for shard_id in closed - out.keys():
        out[shard_id] = (1, True)
    return out


def _newest(directory: str) -> int | None:
    try:
        return max((int(n) for n in os.listdir(directory) if n.isdigit()), default=None)
    except OSError:
        return None


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


# ---------------------------------------------------------------------------- lag over time

class LagHistory:
    """The largest lag (ms) of any reader per shard, sampled when a stream page asks (at most once
    a second per stream), for the page's lag chart: lag is a state, not a count, so no counter of
    rates.py holds it; the chart starts when the first page opens. Kept by ARN: streams of one name
    in two accounts or regions each have their own."""

    def __init__(self, seconds: int = 600):
        self.seconds = seconds
        self._samples: dict[tuple[str, float], deque[tuple[int, dict[str, int]]]] = {}
        self._lock = threading.Lock()

    def sample(self, stream: Stream, found: list[dict[str, Any]], now: float | None = None) -> None:
        second = int(time.time() if now is None else now)
        worst: dict[str, int] = {}
        for reader in found:
            for s in reader["shards"]:
                worst[s["shard"]] = max(worst.get(s["shard"], 0), s["ms"])
        with self._lock:
            for key in [k for k in self._samples if k[0] == stream.arn and k[1] != stream.created]:
                del self._samples[key]  # a deleted stream's namesake starts afresh
            samples = self._samples.setdefault((stream.arn, stream.created), deque(maxlen=self.seconds))
            if samples and samples[-1][0] == second:
                samples.pop()
            samples.append((second, worst))

    def points(self, stream: Stream, shard_ids: list[str], seconds: int) -> dict[str, list[Any]]:
        """{"t": [...], shardId: [ms or None...]}: one point per sample of the last `seconds`."""
        start = int(time.time()) - seconds
        with self._lock:
            samples = [s for s in self._samples.get((stream.arn, stream.created), ()) if s[0] > start]
        out: dict[str, list[Any]] = {"t": [t for t, _ in samples]}
        for shard_id in shard_ids:
            out[shard_id] = [worst.get(shard_id) for _, worst in samples]
        return out

