"""`DryRun` on GetRecords, GetShardIterator, PutRecord, PutRecords and SubscribeToShard.

AWS (https://docs.aws.amazon.com/streams/latest/dev/kds-dryrun-validation.html) runs every check
of the operation "without running the operation or reading or writing any data": if all pass it
answers HTTP 400 `DryRunOperationException`, else the error the real call would get. Each
operation calls `stop` right before its first side effect (append, metering, subscription claim,
iterator issue), after all of its checks.
"""
from __future__ import annotations

from typing import Any

from ..protocol.errors import AwsError

# Kinesis's own text is not recorded anywhere public (the model only has the shape, with a
# `message` member). This is EC2's DryRunOperation message, the long-standing AWS wording.
MESSAGE = "Request would have succeeded, but DryRun flag is set."


def answer() -> AwsError:
    """What a dry run whose checks all passed gets."""
    return AwsError("DryRunOperationException", MESSAGE)


def stop(params: dict[str, Any]) -> None:
    """Raise AWS's dry-run answer if the request asked for a dry run."""
    if params.get("DryRun"):
        raise answer()
