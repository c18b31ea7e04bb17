"""Validate click events from a Kinesis trigger, reporting the invalid ones as batch item
failures.

The function's event source mapping sets `FunctionResponseTypes: [ReportBatchItemFailures]`: the
response `{"batchItemFailures": [{"itemIdentifier": <sequence number>}]}` tells Lambda which
records failed, and Lambda retries the batch from the first of them (up to the mapping's
MaximumRetryAttempts) instead of retrying it all. A valid click is a JSON object with
- `user_id`: a non-empty string,
- `page`: a path starting with "/",
- `ts`: Unix time in seconds, a positive number.
"""
from __future__ import annotations

import base64
import json
from typing import Any


def problems(data: bytes) -> list[str]:
    """What is wrong with a record's data as a click; empty when it is valid."""
    try:
        click = json.loads(data)
    except ValueError:  # bad JSON, or bytes that are not UTF-8
        return ["not JSON"]
    if not isinstance(click, dict):
        return ["not a JSON object"]
    found = []
    user_id = click.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        found.append("user_id must be a non-empty string")
    page = click.get("page")
    if not isinstance(page, str) or not page.startswith("/"):
        found.append("page must be a path starting with /")
    ts = click.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts <= 0:
        found.append("ts must be a positive number (Unix time in seconds)")
    return found


def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    failures = []
    for record in event["Records"]:
        sequence_number = record["kinesis"]["sequenceNumber"]
        found = problems(base64.b64decode(record["kinesis"]["data"]))
        if found:
            print(f"invalid click {sequence_number}: {'; '.join(found)}")
            failures.append({"itemIdentifier": sequence_number})
    print(f"validated {len(event['Records'])} record(s), {len(failures)} invalid")
    return {"batchItemFailures": failures}
