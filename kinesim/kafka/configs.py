"""Kafka topic configs onto a stream's settings, and the broker's few static ones.

Kafka's broker refuses a topic config it does not know ("Unknown topic config name: x",
INVALID_CONFIG) and a value of the wrong type; kinesim does the same, and sorts the ones it knows:
- mapped onto the stream: `retention.ms` (the retention period, in hours rounded up so nothing is
  dropped earlier than asked, within Kinesis' 24..8760 h) and `max.message.bytes` (the stream's
  maximum record size, KiB rounded up, within Kinesis' 1024..10240 KiB);
- fixed: what a stream does and cannot be made to do otherwise (`cleanup.policy` is `delete`:
  no compaction; no size-based retention; CreateTime timestamps; no tiered storage). Any other
  value is INVALID_CONFIG, since a client asking for it would rely on a behaviour it won't get;
- tuning of a broker's segments, flushes, replicas and cleaner: accepted as Kafka accepts them
  (so tools that set `min.insync.replicas` or `segment.bytes` work) but without effect on one
  node with no segments, and described with the value that says what kinesim does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

HOUR_MS = 3_600_000
MIN_HOURS, MAX_HOURS = 24, 8760          # Kinesis' retention bounds
DEFAULT_HOURS = 24                       # a new stream's: kinesim's `log.retention.hours`
MIN_KIB, MAX_KIB = 1024, 10240           # Kinesis' MaxRecordSizeInKiB bounds
DEFAULT_KIB = 1024
LONG_MAX = str(2**63 - 1)

# DescribeConfigs' config_source and config_type codes (org.apache.kafka.common.requests).
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT_SOURCE = 1, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

RETENTION, MAX_BYTES, CLEANUP = "retention.ms", "max.message.bytes", "cleanup.policy"
MAPPED = {RETENTION: LONG, MAX_BYTES: INT}
# name -> (type, the only value a stream has)
FIXED = {
    CLEANUP: (LIST, "delete"),
    "retention.bytes": (LONG, "-1"),
    "message.timestamp.type": (STRING, "CreateTime"),
    "remote.storage.enable": (BOOLEAN, "false"),
    "local.retention.ms": (LONG, "-2"),
    "local.retention.bytes": (LONG, "-2"),
}
# name -> (type, the value described): accepted, no effect (see above).
IGNORED = {
    "compression.type": (STRING, "producer"),
    "compression.gzip.level": (INT, "-1"),
    "compression.lz4.level": (INT, "9"),
    "compression.zstd.level": (INT, "3"),
    "delete.retention.ms": (LONG, "86400000"),
    "file.delete.delay.ms": (LONG, "60000"),
    "flush.messages": (LONG, LONG_MAX),
    "flush.ms": (LONG, LONG_MAX),
    "follower.replication.throttled.replicas": (LIST, ""),
    "leader.replication.throttled.replicas": (LIST, ""),
    "index.interval.bytes": (INT, "4096"),
    "max.compaction.lag.ms": (LONG, LONG_MAX),
    "min.compaction.lag.ms": (LONG, "0"),
    "min.cleanable.dirty.ratio": (DOUBLE, "0.5"),
    "min.insync.replicas": (INT, "1"),
    "message.downconversion.enable": (BOOLEAN, "true"),
    # kinesim does not refuse records by timestamp: the widest bounds say so.
    "message.timestamp.after.max.ms": (LONG, LONG_MAX),
    "message.timestamp.before.max.ms": (LONG, LONG_MAX),
    "message.timestamp.difference.max.ms": (LONG, LONG_MAX),
    "preallocate": (BOOLEAN, "false"),
    "remote.log.copy.disable": (BOOLEAN, "false"),
    "remote.log.delete.on.disable": (BOOLEAN, "false"),
    "segment.bytes": (INT, "1073741824"),
    "segment.index.bytes": (INT, "10485760"),
    "segment.jitter.ms": (LONG, "0"),
    "segment.ms": (LONG, "604800000"),
    "unclean.leader.election.enable": (BOOLEAN, "false"),
}
KNOWN = {**{n: t for n, (t, _) in FIXED.items()}, **{n: t for n, (t, _) in IGNORED.items()}, **MAPPED}

# Broker 0's configs: what kinesim does, read-only (kinesim has no dynamic broker configs).
BROKER = {
    "broker.id": (INT, "0"),
    "num.partitions": (INT, "1"),
    "default.replication.factor": (INT, "1"),
    "auto.create.topics.enable": (BOOLEAN, "true"),
    "delete.topic.enable": (BOOLEAN, "true"),
    "log.retention.hours": (INT, str(DEFAULT_HOURS)),
    "log.cleanup.policy": (LIST, "delete"),
    "message.max.bytes": (INT, str(DEFAULT_KIB * 1024)),
    "min.insync.replicas": (INT, "1"),
    "offsets.topic.replication.factor": (INT, "1"),
}


class ConfigError(Exception):
    """A config Kafka's broker would refuse (INVALID_CONFIG), with a message in its words."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What a topic's configs set on its stream; None: not named (the stream's default)."""
    retention_hours: int | None = None
    max_record_kib: int | None = None


def _typed(name: str, kind: int, value: str) -> None:
    try:
        if kind in (INT, LONG):
            int(value)
        elif kind == DOUBLE:
            float(value)
        elif kind == BOOLEAN and value.strip().lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise ConfigError(f"Invalid value {value} for configuration {name}") from None


def as_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def check(configs: Iterable[tuple[str, str | None]]) -> Settings:
    """The stream settings a topic's configs ask for, or ConfigError."""
    retention = max_kib = None
    for name, value in configs:
        kind = KNOWN.get(name)
        if kind is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise ConfigError(f"Null value not supported for topic config: {name}")
        _typed(name, kind, value)
        if name == RETENTION:
            ms = int(value)
            retention = math.ceil(ms / HOUR_MS) if ms > 0 else -1
            if not MIN_HOURS <= retention <= MAX_HOURS:
                raise ConfigError(f"Invalid value {value} for configuration {name}: a stream keeps its records "
                                  f"{MIN_HOURS} to {MAX_HOURS} hours ({MIN_HOURS * HOUR_MS} to {MAX_HOURS * HOUR_MS} ms)")
        elif name == MAX_BYTES:
            max_kib = math.ceil(int(value) / 1024)
            if not MIN_KIB <= max_kib <= MAX_KIB:
                raise ConfigError(f"Invalid value {value} for configuration {name}: a stream's maximum record size "
                                  f"is {MIN_KIB * 1024} to {MAX_KIB * 1024} bytes")
        elif name in FIXED:
            _, only = FIXED[name]
            same = as_list(value) == as_list(only) if kind == LIST else value.strip() == only
            if not same:
                raise ConfigError(f"Invalid value {value} for configuration {name}: kinesim streams support only "
                                  f"{name}={only}")
    return Settings(retention, max_kib)


def entry(name: str, kind: int, value: str, source: int, read_only: bool = False) -> dict[str, Any]:
    """One DescribeConfigs (and CreateTopics v5+) entry; no synonyms or documentation."""
    return {"name": name, "value": value, "read_only": read_only, "config_source": source, "is_sensitive": False,
            "synonyms": [], "config_type": kind, "documentation": None}


def describe(retention_hours: int, max_record_kib: int, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """A topic's configs from its stream's settings (all of them, or the `keys` named)."""
    def source(default: bool) -> int:
        return DEFAULT_SOURCE if default else DYNAMIC_TOPIC
    out = [entry(RETENTION, LONG, str(retention_hours * HOUR_MS), source(retention_hours == DEFAULT_HOURS)),
           entry(MAX_BYTES, INT, str(max_record_kib * 1024), source(max_record_kib == DEFAULT_KIB))]
    out += [entry(n, t, v, DEFAULT_SOURCE) for n, (t, v) in {**FIXED, **IGNORED}.items()]
    if keys is not None:
        wanted = set(keys)
        out = [e for e in out if e["name"] in wanted]
    return sorted(out, key=lambda e: e["name"])


def describe_broker(keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    wanted = None if keys is None else set(keys)
    return [entry(n, t, v, STATIC_BROKER, read_only=True) for n, (t, v) in BROKER.items()
            if wanted is None or n in wanted]
