"""What the web console shows of the SQS queues: a read-only snapshot of each queue's depth (the
three ApproximateNumberOf... counts), its FIFO-ness and its dead-letter queue with that queue's
depth. Nothing is changed: messages past their retention period are counted until the next
operation on the queue drops them (as `GetQueueAttributes` would first)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .queue import now

if TYPE_CHECKING:
    from .service import SqsService


def queue_stats(svc: "SqsService") -> list[dict[str, Any]]:
    """One dict per queue, by name: name, arn, fifo, visible, in_flight, delayed, created (epoch s),
    dead_letter ({name, arn, exists, max_receives, visible, in_flight} or None) and dead_letter_for
    (the names of the queues whose RedrivePolicy targets this one)."""
    at = now()
    with svc.lock:
        queues = sorted(svc.queues.values(), key=lambda q: q.name)
        counts = {q.arn: q.counts(at) for q in queues}
        redrives = {q.arn: q.redrive for q in queues}
    by_arn = {q.arn: q for q in queues}
    sources: dict[str, list[str]] = {}
    for q in queues:
        policy = redrives[q.arn]
        if policy:
            sources.setdefault(policy["deadLetterTargetArn"], []).append(q.name)
    out = []
    for q in queues:
        visible, in_flight, delayed = counts[q.arn]
        policy = redrives[q.arn]
        dead_letter = None
        if policy:
            target = policy["deadLetterTargetArn"]
            found = by_arn.get(target)
            dead_letter = {"name": target.rsplit(":", 1)[-1], "arn": target, "exists": found is not None,
                           "max_receives": policy["maxReceiveCount"],
                           "visible": counts[target][0] if found else None,
                           "in_flight": counts[target][1] if found else None}
        out.append({"name": q.name, "arn": q.arn, "fifo": q.fifo, "visible": visible, "in_flight": in_flight,
                    "delayed": delayed, "created": q.created, "dead_letter": dead_letter,
                    "dead_letter_for": sorted(sources.get(q.arn, []))})
    return out
