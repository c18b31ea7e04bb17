"""What an event source mapping sends: AWS's Kinesis event, tumbling-window fields, and the
invocation record that goes to an on-failure destination when a batch is given up."""
from __future__ import annotations

import base64
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from ..store import StoredRecord

# A synchronous invocation's payload limit ("6 MB"), which caps a batch.
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
# The bytes around the records in `{"Records":[...]}` plus tumbling-window fields, kept free.
EVENT_OVERHEAD_BYTES = 4096


def kinesis_record(row: StoredRecord, shard_id: str, stream_arn: str, region: str, role_arn: str) -> dict[str, Any]:
    """One entry of an event's `Records`, as Lambda builds it from a Kinesis record."""
    _, seq, pk, data, arrival = row
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": pk,
            "sequenceNumber": seq,
            "data": base64.b64encode(data).decode(),
            "approximateArrivalTimestamp": round(arrival, 3),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{seq}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": role_arn,
        "awsRegion": region,
        "eventSourceARN": stream_arn,
    }


def kinesis_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}


def window_event(records: list[dict[str, Any]], start: float, end: float, state: dict[str, Any],
                 shard_id: str, stream_arn: str, final: bool, terminated_early: bool) -> dict[str, Any]:
    """A tumbling-window invocation: the batch plus the window, the state returned by the previous
    invocation of the window, and whether this is the window's final invocation."""
    return {
        "Records": records,
        "window": {"start": iso_seconds(start), "end": iso_seconds(end)},
        "state": state,
        "shardId": shard_id,
        "eventSourceARN": stream_arn,
        "isFinalInvokeForWindow": final,
        "isWindowTerminatedEarly": terminated_early,
    }


def failure_record(*, request_id: str, function_arn: str, condition: str, invoke_count: int,
                   status_code: int, executed_version: str, function_error: str | None,
                   shard_id: str, rows: list[StoredRecord], stream_arn: str) -> dict[str, Any]:
    """The invocation record Lambda sends to an OnFailure destination for a discarded batch.

    `condition` is "RetryAttemptsExhausted" or "RecordAgeExceeded". The records themselves are not
    included, only where they are in the stream (an S3 destination's object adds them: `payload`).
    """
    response: dict[str, Any] = {"statusCode": status_code, "executedVersion": executed_version}
    if function_error:
        response["functionError"] = function_error
    return {
        "requestContext": {"requestId": request_id, "functionArn": function_arn, "condition": condition,
                           "approximateInvokeCount": invoke_count},
        "responseContext": response,
        "version": "1.0",
        "timestamp": iso_millis(time.time()),
        "KinesisBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": rows[0][1],
            "endSequenceNumber": rows[-1][1],
            "approximateArrivalOfFirstRecord": iso_millis(rows[0][4]),
            "approximateArrivalOfLastRecord": iso_millis(rows[-1][4]),
            "batchSize": len(rows),
            "streamArn": stream_arn,
        },
    }


def failure_object_key(mapping_uuid: str, shard_id: str, timestamp: str) -> str:
    """Where an S3 on-failure destination keeps an invocation record:
    `aws/lambda/<ESM-UUID>/<shardID>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<Random UUID>`, in UTC, from the
    record's own `timestamp` (`2019-11-14T00:38:06.021Z`) so that both name the same second."""
    day = timestamp[:10].replace("-", "/")
    second = timestamp[:19].replace(":", ".")
    return f"aws/lambda/{mapping_uuid}/{shard_id}/{day}/{second}-{uuid.uuid4()}"


def iso_millis(ts: float) -> str:
    """2019-11-14T00:38:06.021Z"""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def iso_seconds(ts: float) -> str:
    """2020-12-09T07:04:00Z"""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
