"""InitProducerId (22): an idempotent producer's id and epoch (kafka/producers.py).

Transactions are not served (docs/plans/issue-35-kafka.md §2): a transactional id is answered
INVALID_REQUEST, which is not retriable, so the client fails at once. The response has no message
field to say why: the log says it.
"""
from __future__ import annotations

import logging
from typing import Any

from .. import errors, producers
from ..context import Context

log = logging.getLogger("kinesim.kafka")


def init_producer_id(ctx: Context, body: Any) -> dict[str, Any]:
    if body.transactional_id is not None:
        log.info("kafka: InitProducerId for transactional id %r refused: transactions are not supported "
                 "by kinesim", body.transactional_id)
        return {"throttle_time": 0, "error_code": errors.INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    # v0-v2 name no producer: their fields are absent, as a new producer's (-1) are.
    producer_id, epoch = producers.of(ctx.kinesis).init(getattr(body, "producer_id", -1),
                                                        getattr(body, "producer_epoch", -1))
    return {"throttle_time": 0, "error_code": errors.NONE, "producer_id": producer_id, "producer_epoch": epoch}
