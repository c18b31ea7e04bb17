"""Topics and partitions as streams and shards (docs/plans/issue-35-kafka.md §3): which stream a
request's topic names (made on first use when auto-creation applies), which shard a partition
number names, and a partition's log start and end offsets.

Offsets are record indexes minus one: indexes are dense from 1 per shard, so the log end offset
(LEO, = high watermark = last stable offset: there are no transactions) is `next_index - 1`, and the
log start is the first record retention has not passed, minus one.
"""
from __future__ import annotations

import logging
import re
import threading
import weakref
from typing import Any

from ..kinesis import streams
from ..protocol.errors import AwsError
from . import errors

log = logging.getLogger("kinesim.kafka")

# `num.partitions`: shards of a stream made for an unknown topic (a setting, --kafka-partitions,
# is planned; one shard is Kafka's own default).
AUTO_CREATE_SHARDS = 1
MAX_TOPIC = 249           # Kafka's topic name limit
MAX_STREAM = 128          # Kinesis' stream name limit
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def find(svc: Any, name: str) -> tuple[Any, int]:
    """(stream, 0) for a topic that can be read, else (None or the stream, error code). A stream
    being made has no partitions yet (LEADER_NOT_AVAILABLE: clients retry); a deleting one is
    gone, as a topic marked for deletion is."""
    stream = svc.find(name) if name else None
    if stream is None or stream.status == "DELETING":
        return None, errors.UNKNOWN_TOPIC_OR_PARTITION
    if not stream.activated:
        return stream, errors.LEADER_NOT_AVAILABLE
    return stream, errors.NONE


def writable(svc: Any, name: str, create: bool = True) -> tuple[Any, int]:
    """(stream, 0) for a topic records may be produced to now, else the partitions' error code.
    An unknown topic is created (Kafka's `auto.create.topics.enable`, on by default) and answered
    LEADER_NOT_AVAILABLE until its stream is ACTIVE. A stream in neither ACTIVE nor UPDATING
    answers NOT_LEADER_OR_FOLLOWER, which clients retry after refreshing metadata."""
    stream = svc.find(name) if name else None
    if stream is None and create:
        code = auto_create(svc, name)
        if code != errors.NONE:
            return None, code
        stream = svc.find(name)
    if stream is None:
        return None, errors.UNKNOWN_TOPIC_OR_PARTITION
    if not stream.activated:
        return stream, errors.LEADER_NOT_AVAILABLE
    if stream.status not in ("ACTIVE", "UPDATING"):
        return stream, errors.NOT_LEADER_OR_FOLLOWER
    return stream, errors.NONE


def invalid_name(name: str | None) -> str | None:
    """Why `name` cannot be a topic, or None. Kafka's rule (`[a-zA-Z0-9._-]`, 1..249, not "." or
    ".."), and a stream's 128 characters: longer names are refused, not truncated."""
    if not name or not _TOPIC_CHARS.fullmatch(name) or name in (".", "..") or len(name) > MAX_TOPIC:
        return f"Topic name {name!r} is illegal: it must be 1 to {MAX_TOPIC} characters of [a-zA-Z0-9._-], not '.' or '..'"
    if len(name) > MAX_STREAM:
        return f"Topic name {name!r} is longer than a stream's {MAX_STREAM} characters"
    return None


def create(svc: Any, name: str, shards: int, retention_hours: int | None = None,
           max_record_kib: int | None = None) -> tuple[int, str | None]:
    """Make the stream of a new topic: (0, None), else (Kafka's error code, message)."""
    problem = invalid_name(name)
    if problem is not None:
        return errors.INVALID_TOPIC_EXCEPTION, problem
    params: dict[str, Any] = {"StreamName": name, "ShardCount": shards}
    if max_record_kib is not None:
        params["MaxRecordSizeInKiB"] = max_record_kib
    try:
        streams.create_stream(svc, params)
    except AwsError as err:
        if err.code == "ResourceInUseException":
            return errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        if err.code == "LimitExceededException":  # the account's shard limit
            return errors.INVALID_PARTITIONS, err.message
        return errors.INVALID_REQUEST, err.message
    if retention_hours is not None:
        # CreateStream has no retention parameter (AWS: 24 h, then IncreaseRetentionPeriod, which
        # needs an ACTIVE stream): set at once, so no record is ever kept by another retention.
        stream = svc.find(name)
        if stream is not None:
            with stream.lock:
                stream.retention_hours = retention_hours
                svc.save(stream)
    return errors.NONE, None


def auto_create(svc: Any, name: str) -> int:
    """Make a stream for a topic named by a Produce or a Metadata that allows it: 0 once asked
    for (or made meanwhile by somebody else), else the topic's error code."""
    code, message = create(svc, name, AUTO_CREATE_SHARDS)
    if code in (errors.NONE, errors.TOPIC_ALREADY_EXISTS):  # one made meanwhile is as good
        return errors.NONE
    if code == errors.INVALID_TOPIC_EXCEPTION:
        return code
    log.info("kafka: topic %s was not created: %s", name, message)
    return errors.UNKNOWN_TOPIC_OR_PARTITION


def shard_of(stream: Any, partition: int) -> Any | None:
    """Partition N is the shard with index N (every shard the stream ever had: the list only grows)."""
    shards = stream.shards
    return shards[partition] if 0 <= partition < len(shards) else None


def log_end(shard: Any) -> int:
    return shard.next_index - 1


# log_start's memo, per store (shard uids are unique within one): shard uid -> (horizon, first index)
_FIRSTS: "weakref.WeakKeyDictionary[Any, dict[int, tuple[float, int]]]" = weakref.WeakKeyDictionary()
_FIRSTS_LOCK = threading.Lock()
# How far retention's horizon may move before a partition's first record is looked up again: at
# most a second, or a thousandth of the retention (tests shorten hours to fractions of a second).
STALE_S = 1.0


def log_start(svc: Any, stream: Any, shard: Any) -> int:
    """The offset of the oldest record retention keeps; the LEO when none is kept (an empty log).

    Every Produce and Fetch answers it for every partition, and it moves only as retention passes
    records: the first index found is reused while the retention horizon has moved less than
    STALE_S (or 1/1000 of the retention) since, so a partition's start is at most that late. An
    empty log is not remembered: its start moves with its end, at the first put."""
    horizon = svc.retention_horizon(stream)
    store = svc.store
    with _FIRSTS_LOCK:
        firsts = _FIRSTS.get(store)
        if firsts is None:
            firsts = _FIRSTS[store] = {}
        seen = firsts.get(shard.uid)
    end = log_end(shard)
    tolerance = min(STALE_S, stream.retention_hours * svc.settings.retention_hour_s / 1000)
    if seen is not None and 0 <= horizon - seen[0] <= tolerance:
        first = seen[1]
    else:
        first = store.first_index_at(shard.uid, horizon)
        if first is not None:
            with _FIRSTS_LOCK:
                firsts[shard.uid] = (horizon, first)
    return end if first is None else min(first - 1, end)
