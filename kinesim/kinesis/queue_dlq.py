"""Kinesis queues' built-in dead letters: ReceiveDeadLetterQueueRecords,
AcknowledgeDeadLetterQueueRecords, UpdateDeadLetterQueueRecordsVisibility and
RestoreDeadLetterQueueRecords.

"When a record has been received MaxReceiveCount times without being acknowledged, it becomes a
dead-letter record ... The dead-letter record stays in the same queue" (the model): here it is
the same tracked entry, flagged dead, in the queue's state (kept across restarts like the rest).
It turns dead when the visibility timeout of its last allowed receive passes. Dead letters are
received, timed and acknowledged like records, with their own receipt handles; a restore resets
the receive count and makes the record visible on the normal path at once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .queue_records import batch, receive, set_visibility
from .queue_state import DEAD, Entry, QueueState

if TYPE_CHECKING:
    from .service import KinesisService


def receive_dead_letter_queue_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return receive(svc, p, DEAD)


def acknowledge_dead_letter_queue_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return batch(svc, p, DEAD, None)


def update_dead_letter_queue_records_visibility(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return batch(svc, p, DEAD, set_visibility, in_flight_only=True)


def _restore(state: QueueState, e: Entry, item: dict[str, Any], now: float) -> None:
    state.restore(e, now)


def restore_dead_letter_queue_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return batch(svc, p, DEAD, _restore)
