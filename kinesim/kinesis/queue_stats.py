"""What the web console shows of the Kinesis queues: per queue its status, its stream, and how many
records wait (approximately, as SQS's counts are): not yet taken from the stream plus taken and
visible again, in flight, and dead letters in the built-in dead-letter queue.

Read-only: the delivery state is looked at under its lock, held only to count (a receive that
holds it while reading the stream makes the count wait at most LOCK_WAIT_S, then it is left out).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .queue_records import queue_stream

if TYPE_CHECKING:
    from .queues import Queue
    from .service import KinesisService

LOCK_WAIT_S = 0.5
COUNTS = ("visible", "untaken", "in_flight", "dead_letters")


def queue_stats(svc: "KinesisService") -> list[dict[str, Any]]:
    """One dict per queue, by name: name, arn, status, stream, created (epoch s), visibility_s,
    dead_letter ("BUILT_IN" or "NONE"), max_receives, and the counts of `counts` (None when the
    state was busy)."""
    out = []
    for queue in sorted(svc.queues.all(), key=lambda q: q.name):
        found = counts(svc, queue) or dict.fromkeys(COUNTS)
        out.append({"name": queue.name, "arn": queue.arn, "status": queue.status, "stream": queue.stream_name,
                    "created": queue.created, "visibility_s": queue.visibility, "dead_letter": queue.dead_letter,
                    "max_receives": queue.dead_after, **found})
    return out


def counts(svc: "KinesisService", queue: "Queue") -> dict[str, int] | None:
    """{"visible": records receivable now (untaken + visible again), "untaken": records of the
    stream the queue has not taken yet, "in_flight", "dead_letters"}."""
    state = queue.state
    if state is None or not state.lock.acquire(timeout=LOCK_WAIT_S):
        return None
    try:
        at = time.time()
        visible = in_flight = dead = 0
        for e in state.entries.values():
            if e.dead:
                dead += 1
            elif e.visible_at > at:
                in_flight += 1
            else:
                visible += 1
        marks = dict(state.checkpoint.marks)
    finally:
        state.lock.release()
    untaken = 0
    stream = queue_stream(svc, queue)
    for shard in list(stream.shards) if stream is not None else []:
        mark = marks.get(shard.uid)
        if mark is None or not mark.ended:
            untaken += max(0, shard.next_index - (mark.position if mark else 1))
    return {"visible": untaken + visible, "untaken": untaken, "in_flight": in_flight, "dead_letters": dead}
