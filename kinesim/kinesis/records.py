"""The data plane: PutRecord, PutRecords, GetRecords, and the wait-for-append readers share;
`put_to_shards`, Kafka's Produce, appends through the same steps as PutRecords (`locked_put`)."""
from __future__ import annotations

import hashlib
import itertools
import time
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Callable

from ..protocol.errors import invalid_argument, not_found, throughput_exceeded, validation_error
from ..protocol.constraints import null_member, violations
from ..store import StoredRecord
from . import dryrun, iterators, sequence
from .model import MAX_HASH, Shard, Stream

if TYPE_CHECKING:
    from .service import KinesisService

MAX_PUT_RECORDS_BYTES = 5 << 20
MAX_GET_BYTES = 10 << 20


def writable(svc: KinesisService, p: dict[str, Any]) -> Stream:
    stream = svc.stream(p)
    if stream.status not in ("ACTIVE", "UPDATING"):
        raise not_found(f"Stream {stream.name} under account {svc.account} not found.")
    return stream


def hash_key(record: dict[str, Any]) -> int:
    explicit = record.get("ExplicitHashKey")
    if explicit is not None:
        value = int(explicit)
        if value > MAX_HASH:
            raise invalid_argument("Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. "
                                   f"Specified value was {explicit}")
        return value
    return int.from_bytes(hashlib.md5(record["PartitionKey"].encode()).digest(), "big")


def router(stream: Stream):
    """A function from hash key to the open shard whose range holds it.

    Built once per shard layout: a stream's shard list only ever grows (resharding closes parents
    and appends children; expired closed shards are hidden from listings, never removed), so its
    length identifies the layout. Callers hold the stream lock.

    Under the AUTO record distribution strategy the function ignores the key and deals records
    to the open shards in turn (AWS "distributes records evenly across shards using
    service-managed algorithms"). A change of strategy resets `stream.routing`."""
    layout = len(stream.shards)
    if stream.routing is None or stream.routing[0] != layout:
        shards = sorted(stream.open_shards(), key=lambda s: s.start_hash)
        if stream.distribution == "AUTO":
            turns = itertools.cycle(shards)
            stream.routing = (layout, lambda _key: next(turns))
        else:
            starts = [s.start_hash for s in shards]
            stream.routing = (layout, lambda h: shards[bisect_right(starts, h) - 1])
    return stream.routing[1]


def no_key(record: dict[str, Any]) -> None:
    """The hash key of a record on an AUTO stream: none, the router ignores it."""
    return None


def check_size(stream: Stream, data: bytes, path: str) -> None:
    """The stream's record size limit (1 MiB unless raised by UpdateMaxRecordSize), reported as AWS
    reports the model's length constraint. The model itself allows 10 MiB, the highest setting."""
    limit = stream.max_record_size_kib * 1024
    if len(data) > limit:
        n = len(data)
        raise validation_error(
            f"1 validation error detected: Value 'java.nio.HeapByteBuffer[pos=0 lim={n} cap={n}]' at '{path}' "
            f"failed to satisfy constraint: Member must have length less than or equal to {limit}")


def require_partition_keys(entries: list[dict[str, Any]], path: str) -> None:
    """The model leaves PartitionKey optional since streams may use the AUTO record distribution
    strategy, where AWS ignores it; on a stream with the default USER_PARTITION_KEY strategy "a
    partition key is required" (the model's documentation of PartitionKey); AUTO streams never
    call this. AWS's answer is the one it gave while the model required the
    member: a ValidationException per record, at most 10 listed ("10 validation errors detected:
    Value null at 'records.1.member.partitionKey' failed to satisfy constraint: Member must not be
    null; ...", as quoted from AWS in snowplow/enrich#377 and recorded by kinesalite).
    `path` holds "{n}" for the record's 1-based position in a batch."""
    missing = [null_member(path.format(n=n)) for n, r in enumerate(entries, 1) if r.get("PartitionKey") is None]
    if missing:
        raise violations(missing)


def auto_put(svc: KinesisService, stream: Stream, p: dict[str, Any]) -> None:
    """PutRecord's checks on an AUTO stream, where a missing PartitionKey is stored as "" (never a
    real key: the model's minimum length is 1) and left out of what readers get back.

    "SequenceNumberForOrdering (PutRecord only) – Must not be provided. PutRecord requests that
    include this field are rejected with an InvalidArgumentException" (docs, service-managed-pk-
    producing-behavior). AWS's message is not recorded; this one is ours."""
    if p.get("SequenceNumberForOrdering") is not None:
        raise invalid_argument(f"SequenceNumberForOrdering cannot be used in PutRecord on stream {stream.name} under "
                               f"account {svc.account}: the stream uses the AUTO record distribution strategy.")
    p.setdefault("PartitionKey", "")


def with_empty_keys(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PutRecords' entries on an AUTO stream, a missing PartitionKey stored as "" (see auto_put)."""
    return [r if "PartitionKey" in r else {**r, "PartitionKey": ""} for r in entries]


def encryption(stream: Stream, out: dict[str, Any]) -> dict[str, Any]:
    if stream.encryption_type != "NONE":
        out["EncryptionType"] = stream.encryption_type
    return out


def put_record(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = writable(svc, p)
    auto = stream.distribution == "AUTO"
    if auto:
        auto_put(svc, stream, p)
    elif p.get("PartitionKey") is None:
        require_partition_keys([p], "partitionKey")
    data = p["Data"]
    check_size(stream, data, "data")
    key = None if auto else hash_key(p)
    ordering = p.get("SequenceNumberForOrdering")
    if ordering is not None and not sequence.valid_ordering(ordering, time.time()):
        raise invalid_argument(f"ExclusiveMinimumSequenceNumber {ordering} used in PutRecord on stream "
                               f"{stream.name} under account {svc.account} is invalid.")
    if "DryRun" in p:
        dryrun.stop(p)
    with stream.lock:
        shard = router(stream)(key)
        if svc.settings.enforce_limits and not svc.meter.write(shard.uid, len(data)):
            raise throughput_exceeded(f"Rate exceeded for shard {shard.shard_id} in stream {stream.name} "
                                      f"under account {svc.account}.")
        now = round(time.time(), 3)  # AWS's arrival times have millisecond precision
        index = shard.next_index
        seq = sequence.make(shard.created, shard.index, index, int(now))
        svc.store.append_one(shard.uid, (index, seq, p["PartitionKey"], data, now))
        shard.next_index = index + 1
    shard.notify()
    svc.write_rates[shard.uid].add(1, len(data))
    return encryption(stream, {"ShardId": shard.shard_id, "SequenceNumber": seq})


def put_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = writable(svc, p)
    entries = p["Records"]
    auto = stream.distribution == "AUTO"
    if auto:
        entries = with_empty_keys(entries)
    else:
        require_partition_keys(entries, "records.{n}.member.partitionKey")
    key_of = no_key if auto else hash_key
    if sum(len(r["Data"]) + len(r["PartitionKey"].encode()) for r in entries) > MAX_PUT_RECORDS_BYTES:
        raise invalid_argument("Records size exceeds 5 MB limit")
    keys = []
    for i, r in enumerate(entries):
        check_size(stream, r["Data"], f"records.{i + 1}.member.data")
        keys.append(key_of(r))
    dryrun.stop(p)
    results: list[dict[str, Any]] = []
    failed = 0
    enforce = svc.settings.enforce_limits

    def stamp(now: float) -> tuple[dict[int, list[StoredRecord]], dict[int, Shard], dict[int, int]]:
        nonlocal failed
        batches: dict[int, list[StoredRecord]] = {}
        touched: dict[int, Shard] = {}
        next_index: dict[int, int] = {}
        route = router(stream)
        arrival = int(now)
        for r, key in zip(entries, keys):
            shard = route(key)
            if enforce and not svc.meter.write(shard.uid, len(r["Data"])):
                failed += 1
                results.append({"ErrorCode": "ProvisionedThroughputExceededException",
                                "ErrorMessage": f"Rate exceeded for shard {shard.shard_id} in stream {stream.name} "
                                                f"under account {svc.account}."})
                continue
            index = next_index.get(shard.uid, shard.next_index)
            next_index[shard.uid] = index + 1
            seq = sequence.make(shard.created, shard.index, index, arrival)
            batches.setdefault(shard.uid, []).append((index, seq, r["PartitionKey"], r["Data"], now))
            touched[shard.uid] = shard
            results.append({"SequenceNumber": seq, "ShardId": shard.shard_id})
        return batches, touched, next_index

    locked_put(svc, stream, stamp)
    return encryption(stream, {"FailedRecordCount": failed, "Records": results})


Stamp = Callable[[float], tuple[dict[int, list], dict[int, Shard], dict[int, int]]]


def locked_put(svc: KinesisService, stream: Stream, stamp: Stamp, kafka: bool = False) -> float:
    """A multi-record put's commit, shared by PutRecords and Kafka's Produce. Under the stream's
    lock, `stamp(now)` hands out indexes from each shard's `next_index` and returns the rows
    ({uid: rows}), the shards ({uid: shard}) and each shard's next index after them ({uid: index});
    they are stored in one transaction, and only then the shards' tips move, so a reader never sees
    a tip whose records are not stored yet (and a failed commit takes no index). Then readers wake
    and the writes are counted. Returns the arrival time (`now`, in ms precision) it stamped."""
    with stream.lock:
        now = round(time.time(), 3)  # AWS's arrival times have millisecond precision
        batches, touched, next_index = stamp(now)
        svc.store.append_many(batches, kafka)
        for uid, index in next_index.items():
            touched[uid].next_index = index
    for shard in touched.values():
        shard.notify()
    svc.write_rates.add_many({uid: (len(batch), sum([len(row[3]) for row in batch]))
                              for uid, batch in batches.items()}, now)
    return now


class ShardClosed(Exception):
    """A Kafka put named a closed shard (partition): nothing of the put was stored."""

    def __init__(self, shard: Shard):
        super().__init__(f"{shard.shard_id} is closed")
        self.shard = shard


def put_to_shards(svc: KinesisService, stream: Stream,
                  entries: dict[int, list[tuple[str, bytes, bytes | None]]]) -> dict[int, range]:
    """Append records to shards the caller chose (Kafka's Produce: partition N is the shard with
    index N), entries (partition key, data, kafka meta) per shard index, all in one transaction.
    Returns each shard's record indexes (its Kafka offsets are these minus 1).

    Everything is checked before anything is handed out, under the stream's lock (which resharding
    holds while it closes shards): an unknown shard raises IndexError, a closed one ShardClosed, and
    then nothing is stored. The caller checks sizes and the stream's status, and decides where
    records for a closed shard go. The per-shard write meter (`enforce_limits`) is not applied: it
    would fail single records, and a Kafka batch is stored whole or not at all."""
    out: dict[int, range] = {}

    def stamp(now: float) -> tuple[dict[int, list], dict[int, Shard], dict[int, int]]:
        shards = stream.shards
        for n in entries:
            if not 0 <= n < len(shards):
                raise IndexError(f"{stream.name} has no shard {sequence.shard_id(n)}")
            if not shards[n].is_open:
                raise ShardClosed(shards[n])
        batches: dict[int, list] = {}
        touched: dict[int, Shard] = {}
        next_index: dict[int, int] = {}
        arrival = int(now)
        for n, rows in entries.items():
            if not rows:
                continue
            shard = shards[n]
            first = shard.next_index
            make, created = sequence.make, shard.created
            batches[shard.uid] = [(index, make(created, n, index, arrival), pk, data, now, meta)
                                  for index, (pk, data, meta) in enumerate(rows, first)]
            touched[shard.uid] = shard
            next_index[shard.uid] = first + len(rows)
            out[n] = range(first, first + len(rows))
        return batches, touched, next_index

    locked_put(svc, stream, stamp, kafka=True)
    return out


def child_shards(stream: Stream, shard: Shard) -> list[dict[str, Any]]:
    children = [s for s in stream.shards if shard.shard_id in (s.parent, s.adjacent_parent)]
    return [{"ShardId": c.shard_id,
             "ParentShards": [x for x in (c.parent, c.adjacent_parent) if x],
             "HashKeyRange": {"StartingHashKey": str(c.start_hash), "EndingHashKey": str(c.end_hash)}}
            for c in children]


def read_batch(svc: KinesisService, stream: Stream, shard: Shard, index: int, limit: int,
               max_bytes: int = MAX_GET_BYTES, kafka: bool = False) -> tuple[list[StoredRecord], int, bool]:
    """Records from `index` on, the index after them, and whether the reader is at the tip.

    Shared by GetRecords, SubscribeToShard and the other in-process readers; `kafka`: the rows are
    KafkaRecords, with the `kafka` column (Kafka's Fetch).
    """
    tip = shard.next_index
    horizon = svc.retention_horizon(stream)
    rows = svc.store.read(shard.uid, index, limit, horizon, kafka)
    size = 0
    for n, row in enumerate(rows):
        size += len(row[3])
        if size > max_bytes and n:
            rows = rows[:n]
            break
    # Indexes below the tip are committed; an empty read below it means they all expired.
    next_index = rows[-1][0] + 1 if rows else max(index, tip)
    return rows, next_index, next_index >= tip


def record_out(row: StoredRecord, stream: Stream) -> dict[str, Any]:
    out = {"SequenceNumber": row[1], "ApproximateArrivalTimestamp": row[4], "Data": row[3], "PartitionKey": row[2]}
    if not row[2]:  # put to an AUTO stream without a key: "this value is not returned" (model, Record)
        del out["PartitionKey"]
    if stream.encryption_type != "NONE":
        out["EncryptionType"] = stream.encryption_type
    return out


def get_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    pos = iterators.decode(svc, p["ShardIterator"])
    stream, shard = iterators.resolve(svc, pos)
    dryrun.stop(p)
    if svc.settings.enforce_limits and not svc.meter.read_call(shard.uid):
        raise throughput_exceeded(f"Rate exceeded for shard {shard.shard_id} in stream {stream.name} "
                                  f"under account {svc.account}.")
    rows, next_index, at_tip = read_batch(svc, stream, shard, pos.index, p.get("Limit", 10000))
    if svc.settings.enforce_limits and rows and not svc.meter.read_bytes(shard.uid, sum(len(r[3]) for r in rows)):
        raise throughput_exceeded(f"Rate exceeded for shard {shard.shard_id} in stream {stream.name} "
                                  f"under account {svc.account}.")
    now = time.time()
    out: dict[str, Any] = {
        "Records": [record_out(r, stream) for r in rows],
        "MillisBehindLatest": 0 if at_tip or not rows else max(0, int((now - rows[-1][4]) * 1000)),
    }
    if not shard.is_open and at_tip:
        out["NextShardIterator"] = None
        out["ChildShards"] = child_shards(stream, shard)
    else:
        out["NextShardIterator"] = iterators.encode(svc, stream, shard, next_index)
    return out


def wait_for_append(shard: Shard, index: int, timeout: float) -> bool:
    """Block until the shard holds a record at `index` (or is closed), up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with shard.appended:
        shard.watch(1)  # before looking at the shard: see Shard.notify
        try:
            while shard.next_index <= index and shard.is_open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                shard.appended.wait(remaining)
        finally:
            shard.watch(-1)
    return True
