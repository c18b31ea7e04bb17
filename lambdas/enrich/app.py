"""Enrich click events: read them from a Kinesis trigger, add what downstream consumers want to
group by, and write them to the stream named by the `OUTPUT_STREAM` environment variable.

A click is a JSON object such as `{"user_id": "u-42", "page": "/products/123", "ts": 1700000000}`
(`ts`: Unix time in seconds). Enrichment adds
- `page_category`: from the first segment of the page's path ("/products/123" -> "product"),
- `event_time`: `ts` as an ISO 8601 UTC time ("2023-11-14T22:13:20.000Z").
Records that are not such a JSON object are counted, logged and skipped: retrying them would
not make them valid.
"""
from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import boto3

# The first segment of a page's path -> its category.
CATEGORIES = {
    "": "home",
    "home": "home",
    "products": "product",
    "product": "product",
    "cart": "cart",
    "checkout": "checkout",
    "search": "search",
    "blog": "content",
    "help": "support",
    "account": "account",
}

PUT_RECORDS_LIMIT = 500  # records per PutRecords call
PUT_ATTEMPTS = 3

_kinesis = None


def kinesis():
    """One client per worker, made on first use: warm invocations reuse it. boto3 finds the
    endpoint (AWS_ENDPOINT_URL), region and credentials in the environment the runtime sets."""
    global _kinesis
    if _kinesis is None:
        _kinesis = boto3.client("kinesis", region_name=os.environ.get("AWS_REGION"))
    return _kinesis


def page_category(page: str) -> str:
    path = urlsplit(page).path
    first = path.strip("/").split("/", 1)[0].lower()
    return CATEGORIES.get(first, "other")


def event_time(ts: float) -> str:
    moment = datetime.fromtimestamp(ts, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_click(data: bytes) -> dict[str, Any]:
    """The click in a record's data; ValueError if it is not one."""
    click = json.loads(data)
    if not isinstance(click, dict):
        raise ValueError("not a JSON object")
    missing = [f for f in ("user_id", "page", "ts") if f not in click]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if not isinstance(click["page"], str):
        raise ValueError("page is not a string")
    if isinstance(click["ts"], bool) or not isinstance(click["ts"], (int, float)):
        raise ValueError("ts is not a number")
    return click


def enrich(click: dict[str, Any]) -> dict[str, Any]:
    return {**click, "page_category": page_category(click["page"]), "event_time": event_time(click["ts"])}


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    enriched, invalid = [], 0
    for record in event["Records"]:
        try:
            click = parse_click(base64.b64decode(record["kinesis"]["data"]))
        except ValueError as err:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            invalid += 1
            print(f"skipped record {record['kinesis']['sequenceNumber']}: not a click event ({err})")
            continue
        enriched.append(enrich(click))
    put_all(os.environ["OUTPUT_STREAM"], enriched)
    print(f"enriched {len(enriched)} click(s), skipped {invalid} invalid record(s)")
    return {"enriched": len(enriched), "invalid": invalid}


def put_all(stream: str, clicks: list[dict[str, Any]]) -> None:
    """Write the clicks, keyed by user (one user's clicks stay in order on one shard). Records
    PutRecords rejects (throttling) are sent again; if some still fail, raise so that Lambda
    retries the batch rather than lose clicks."""
    for start in range(0, len(clicks), PUT_RECORDS_LIMIT):
        entries = [{"Data": json.dumps(c).encode(), "PartitionKey": str(c["user_id"])}
                   for c in clicks[start:start + PUT_RECORDS_LIMIT]]
        for _ in range(PUT_ATTEMPTS):
            response = kinesis().put_records(StreamName=stream, Records=entries)
            if not response.get("FailedRecordCount"):
                break
            entries = [e for e, r in zip(entries, response["Records"], strict=True) if "ErrorCode" in r]
        else:
            raise RuntimeError(f"{len(entries)} record(s) not written to {stream} after {PUT_ATTEMPTS} attempts")
