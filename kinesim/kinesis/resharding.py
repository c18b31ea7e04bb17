"""Resharding: SplitShard, MergeShards, UpdateShardCount.

Every change closes its parents (they keep their records and end with an EndingSequenceNumber)
and appends children with the next shard indexes, whose ParentShardId/AdjacentParentShardId
record the lineage. The open shards' hash ranges always cover [0, 2^128-1] exactly, without
overlap.

As on AWS, resharding is asynchronous: the call checks everything, records the change on the
stream (`pending_reshard`, saved in its document, so an acknowledged reshard survives a kill -9)
and answers; the stream is UPDATING for `update_stream_ms`, during which listings show the old
shards and puts still go to the parents. When UPDATING ends (`KinesisService.settle`) the change
is applied: parents close, children appear (kinesalite's splitShard/mergeShards do the same in a
setTimeout; its recorded tests show one shard right after SplitShard). With 0 ms it applies at
once. Puts and the change both hold the stream's lock, so every record acknowledged before it is
in a parent and every later one in a child.

UpdateShardCount (UNIFORM_SCALING) does what AWS says it does, "splits or merges on individual
shards", so every child has at most two parents that exactly cover its range:

1. each open shard is split at every target boundary that falls inside it (a shard holding
   several boundaries is split again and again; the pieces in between are short-lived shards,
   closed at once, as AWS's are);
2. the pieces inside each target range are merged left to right into one shard.

The result is exactly the even ranges of a new stream with TargetShardCount shards. A shard
whose range is already a target range is left open and untouched (4 -> 4 changes nothing,
2 -> 4 is two splits, 4 -> 2 two merges).

On-demand streams scale themselves: AWS refuses all three calls on them (ValidationException).
"""
from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any, Callable

from ..protocol.errors import invalid_argument, limit_exceeded, not_found, validation_error
from . import iterators, sequence
from .model import Shard, Stream, even_ranges
from .streams import check_shard_limit

if TYPE_CHECKING:
    from .service import KinesisService

MAX_SHARDS_PER_STREAM = 10000   # AWS's default per-stream limit for UpdateShardCount


def change_shard(svc: KinesisService, stream: Stream, given: str) -> Shard:
    """A shard named in SplitShard/MergeShards, with AWS's not-found texts ('1', 'shardId-1' and
    'shardId-000000000001' name the same shard)."""
    index = iterators.shard_index(svc, stream.name, given)
    shard = stream.shard(sequence.shard_id(index))
    if shard is None:
        raise not_found(f"Could not find shard {sequence.shard_id(index)} in stream {stream.name} "
                        f"under account {svc.account}.")
    return shard


def require_open(svc: KinesisService, stream: Stream, shard: Shard) -> None:
    if not shard.is_open:
        raise invalid_argument(
            f"Shard {shard.shard_id} in stream {stream.name} under account {svc.account} has already been merged "
            "or split, and thus is not eligible for merging or splitting.")


def accept(svc: KinesisService, stream: Stream, pending: dict[str, Any]) -> Callable[[], None] | None:
    """Record a checked reshard on the stream (whose lock the caller holds), make it UPDATING and
    save it: the change happens when UPDATING ends. Returns what wakes the closed parents' readers
    if it happened at once (update_stream_ms 0), to call after releasing the lock."""
    stream.pending_reshard = pending
    wake = svc.begin(stream, "UPDATING", svc.settings.update_stream_ms)
    svc.save(stream)
    svc.settle_when_due(stream)
    return wake


def apply_pending(svc: KinesisService, stream: Stream) -> Callable[[], None]:
    """Apply `stream.pending_reshard` (the caller holds the stream's lock); returns what wakes the
    closed parents' readers. Nothing else reshards while the stream is UPDATING, so the shards are
    as they were when the call was checked. The pending change is one of
    {"op": "split", "shard": index, "key": "NewStartingHashKey"},
    {"op": "merge", "shard": index, "adjacent": index},
    {"op": "scale", "target": TargetShardCount},
    each with "added": the open shards it adds (negative: removes)."""
    pending = stream.pending_reshard
    assert pending is not None
    change = Reshard(svc, stream)

    def shard(key: str) -> Shard:
        found = stream.shard(sequence.shard_id(pending[key]))
        assert found is not None and found.is_open, pending
        return found

    if pending["op"] == "split":
        change.split(shard("shard"), int(pending["key"]))
    elif pending["op"] == "merge":
        change.merge(shard("shard"), shard("adjacent"))
    else:
        uniform_scale(change, sorted(stream.open_shards(), key=lambda s: s.start_hash), even_ranges(pending["target"]))
    return change.wake


def require_provisioned(svc: KinesisService, stream: Stream, op: str) -> None:
    """AWS refuses resharding an on-demand stream (it scales itself) with a ValidationException."""
    if stream.mode == "ON_DEMAND":
        raise validation_error(
            f"{op} is not supported for stream {stream.name} under account {svc.account} because it is in "
            "ON_DEMAND capacity mode. This API is only supported for data streams with the provisioned capacity mode.")


class Reshard:
    """The shard changes of one call, applied to `stream` (whose lock the caller holds)."""

    def __init__(self, svc: KinesisService, stream: Stream):
        self.svc, self.stream = svc, stream
        self.now = time.time()
        self.closed: list[Shard] = []

    def close(self, shard: Shard) -> None:
        shard.closed_at = self.now
        shard.ending_seq = sequence.make(shard.created, shard.index, sequence.END_INDEX, int(self.now))
        self.closed.append(shard)

    def child(self, start: int, end: int, *parents: Shard) -> Shard:
        # A sequence number leads with its shard's creation second, so a child created in its
        # parent's second would compare by the index's low nibble (shard 16 below shard 15).
        # Created a second after the parents close and after every parent's creation (AWS's
        # children are created 1 s after their parent's end, kinesalite test/splitShard.js), each
        # of its sequence numbers is above all of theirs, EndingSequenceNumber included.
        created = max(int(self.now) + 1, *(p.created + 1 for p in parents))
        shard = Shard(uid=self.svc.new_shard_uid(), index=len(self.stream.shards), start_hash=start,
                      end_hash=end, created=created, parent=parents[0].shard_id,
                      adjacent_parent=parents[1].shard_id if len(parents) > 1 else None)
        self.stream.shards.append(shard)
        return shard

    def split(self, parent: Shard, new_start: int) -> tuple[Shard, Shard]:
        self.close(parent)
        return (self.child(parent.start_hash, new_start - 1, parent),
                self.child(new_start, parent.end_hash, parent))

    def merge(self, lower: Shard, upper: Shard) -> Shard:
        self.close(lower)
        self.close(upper)
        return self.child(lower.start_hash, upper.end_hash, lower, upper)

    def wake(self) -> None:
        """Readers waiting on a now-closed shard see its end (call after releasing the lock)."""
        for shard in self.closed:
            shard.notify()


def split_shard(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    iterators.shard_index(svc, svc.stream_name(p), p["ShardToSplit"])  # AWS: the id's text, then the stream
    stream = svc.stream(p)
    require_provisioned(svc, stream, "SplitShard")
    # svc.lock: the account's shard count holds until the children are reserved (Stream.reserved_shards).
    with stream.lock, svc.lock:
        svc.check_active(stream)  # before the shard and its hash range, as AWS (kinesalite's splitShard.js)
        shard = change_shard(svc, stream, p["ShardToSplit"])
        check_shard_limit(svc, 1)
        require_open(svc, stream, shard)
        key = int(p["NewStartingHashKey"])
        if not shard.start_hash + 1 < key < shard.end_hash:
            raise invalid_argument(
                f"NewStartingHashKey {p['NewStartingHashKey']} used in SplitShard() on shard {shard.shard_id} "
                f"in stream {stream.name} under account {svc.account} is not both greater than one plus the "
                f"shard's StartingHashKey {shard.start_hash} and less than the shard's EndingHashKey "
                f"{shard.end_hash}.")
        wake = accept(svc, stream, {"op": "split", "shard": shard.index, "key": str(key), "added": 1})
    if wake is not None:
        wake()
    return {}


def merge_shards(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    for given in (p["ShardToMerge"], p["AdjacentShardToMerge"]):
        iterators.shard_index(svc, svc.stream_name(p), given)  # AWS: the ids' text, then the stream
    stream = svc.stream(p)
    require_provisioned(svc, stream, "MergeShards")
    with stream.lock:
        svc.check_active(stream)  # before the shards, as AWS (kinesalite's mergeShards.js)
        shard = change_shard(svc, stream, p["ShardToMerge"])
        adjacent = change_shard(svc, stream, p["AdjacentShardToMerge"])
        require_open(svc, stream, shard)
        require_open(svc, stream, adjacent)
        # As AWS (and kinesalite's tests against it): ShardToMerge is the lower of the two.
        if shard.end_hash + 1 != adjacent.start_hash:
            raise invalid_argument(
                f"Shards {shard.shard_id} and {adjacent.shard_id} in stream {stream.name} under account "
                f"{svc.account} are not an adjacent pair of shards eligible for merging")
        wake = accept(svc, stream, {"op": "merge", "shard": shard.index, "adjacent": adjacent.index, "added": -1})
    if wake is not None:
        wake()
    return {}


def update_shard_count(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    target = p["TargetShardCount"]
    stream = svc.stream(p)
    require_provisioned(svc, stream, "UpdateShardCount")
    with stream.lock, svc.lock:
        svc.check_active(stream)
        current = sorted(stream.open_shards(), key=lambda s: s.start_hash)
        count = len(current)
        counts = f"Current open shard count: {count}, Target shard count: {target}"
        # Every limit is checked before anything is allocated.
        if target > MAX_SHARDS_PER_STREAM:
            raise limit_exceeded(f"Target shard count or number of open shards cannot be greater than "
                                 f"{MAX_SHARDS_PER_STREAM}. {counts}")
        if target > count * 2:
            raise limit_exceeded(f"UpdateShardCount cannot scale up over double your current open shard count. "
                                 f"{counts}")
        if target * 2 < count:
            raise limit_exceeded(f"UpdateShardCount cannot scale down below half your current open shard count. "
                                 f"{counts}")
        check_shard_limit(svc, max(0, target - count))
        wake = accept(svc, stream, {"op": "scale", "target": target, "added": target - count})
    if wake is not None:
        wake()
    return {"StreamName": stream.name, "StreamARN": stream.arn, "CurrentShardCount": count,
            "TargetShardCount": target}


def uniform_scale(change: Reshard, current: list[Shard], targets: list[tuple[int, int]]) -> list[Shard]:
    """Split and merge `current` (the open shards, by hash) into shards with exactly `targets`'
    ranges; returns the resulting open shards in hash order."""
    boundaries = [lo for lo, _ in targets[1:]]
    pieces: list[Shard] = []
    for shard in current:
        # Target boundaries strictly inside the shard: start < b <= end.
        inside = boundaries[bisect_right(boundaries, shard.start_hash):bisect_right(boundaries, shard.end_hash)]
        for b in inside:
            left, shard = change.split(shard, b)
            pieces.append(left)
        pieces.append(shard)
    ends = [s.end_hash for s in pieces]
    result: list[Shard] = []
    first = 0
    for lo, hi in targets:
        last = bisect_left(ends, hi)  # the piece that ends the target range
        shard = pieces[first]
        for piece in pieces[first + 1:last + 1]:
            shard = change.merge(shard, piece)
        assert shard.start_hash == lo and shard.end_hash == hi
        result.append(shard)
        first = last + 1
    return result
