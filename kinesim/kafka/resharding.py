"""What a Kafka client sees when a topic's stream is resharded (docs/plans/issue-35-kafka.md §4).

Partitions are shards for ever: a closed shard stays a partition, readable to its end. What this
module adds, used by Produce, Fetch, OffsetFetch and the coordinator:

- `route`: where a closed partition's records go instead, the open shard a Kinesis put of the
  same record would reach (md5 of its partition key), or for a null key the open shard holding the
  closed shard's first hash (one of its descendants). The caller holds the stream's lock, which
  resharding holds too, so the shard chosen is still open when the records are stored.
- `nudge`: the first Fetch or Produce of a connection that names a closed partition is answered
  NOT_LEADER_OR_FOLLOWER, which makes clients refresh their metadata at once (else they see the
  new partitions within `metadata.max.age.ms`, 5 minutes).
- `inherits`: a group that committed on a shard's ancestors reads the shard from its start.
- `layout`: shard counts of topics, which the coordinator compares to move groups to rebalance.
"""
from __future__ import annotations

import hashlib
from bisect import bisect_right
from typing import Any, Callable, Iterable

from .batches import decode_meta, encode_meta, producer_of

MAX_LINEAGE = 10_000  # ancestors looked at: bounds the walk even if a lineage were ever cyclic


def nudge(nudged: set[int], shard: Any) -> bool:
    """Whether to answer NOT_LEADER_OR_FOLLOWER for `shard` on the connection whose set of shards
    already nudged is `nudged`: once per closed shard and connection (nothing is stored or read)."""
    if shard.is_open or shard.uid in nudged:
        return False
    nudged.add(shard.uid)
    return True


def route(stream: Any, closed: Any, rows: list[tuple[str, bytes, bytes]]) -> dict[int, list]:
    """A closed shard's rows by the open shard (index) they go to, each shard's in their order.
    Under the stream's lock. The hash route is Kinesis' for a partition key (an AUTO stream's
    turn-taking router is not used: a key's records stay together, as Kafka's do)."""
    shards = sorted(stream.open_shards(), key=lambda s: s.start_hash)
    starts = [s.start_hash for s in shards]

    def holding(h: int) -> int:
        return shards[bisect_right(starts, h) - 1].index

    no_key = holding(closed.start_hash)
    out: dict[int, list] = {}
    for row in rows:
        pk = row[0]
        dest = holding(int.from_bytes(hashlib.md5(pk.encode()).digest(), "big")) if pk else no_key
        out.setdefault(dest, []).append(_forwarded(row))
    return out


def _forwarded(row: tuple[str, bytes, bytes]) -> tuple[str, bytes, bytes]:
    """The row without its producer stamp: the stamp rebuilds a partition's sequence table after
    a restart, and this batch's sequences are the closed partition's, not the child's (a child
    would otherwise refuse the producer's own next batch to it as out of order)."""
    pk, data, meta = row
    if producer_of(meta) is None:
        return row
    m = decode_meta(meta)
    return pk, data, encode_meta(m.timestamp_ms, m.key, m.headers, m.null_value, None)


def ancestors(stream: Any, shard: Any) -> Iterable[Any]:
    """The shard's parents, their parents, and so on (UpdateShardCount's short-lived shards are
    closed at once and never read, so a group's offsets may sit two generations up)."""
    by_id = {s.shard_id: s for s in stream.shards}
    todo = [p for p in (shard.parent, shard.adjacent_parent) if p]
    seen: set[str] = set()
    while todo and len(seen) < MAX_LINEAGE:
        sid = todo.pop()
        if sid in seen or sid not in by_id:
            continue
        seen.add(sid)
        parent = by_id[sid]
        yield parent
        todo.extend(p for p in (parent.parent, parent.adjacent_parent) if p)


def inherits(stream: Any, shard: Any, committed: Callable[[Any], bool]) -> bool:
    """Whether a group with no offset on `shard` has one on one of its ancestors: then it reads
    the shard from offset 0, whatever its auto.offset.reset says (the shard's records all came
    after what the group read of the ancestors)."""
    return any(committed(parent) for parent in ancestors(stream, shard))


def layout(svc: Any, topics: Iterable[str]) -> dict[str, int]:
    """Each topic's partition count. Read on the listener's loop: `streams.get`, not `find`, which
    may settle a reshard (store writes); an unsettled reshard is seen at the next heartbeat after
    anything settles it (a put, a listing, its timer)."""
    out = {}
    for name in topics:
        stream = svc.streams.get(name)
        out[name] = len(stream.shards) if stream is not None else 0
    return out
