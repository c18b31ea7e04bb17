"""The data plane: PutRecord and PutRecordBatch into a DirectPut delivery stream's durable buffer.

Limits: a record is at most 1,000 KiB (the model's `Record.Data` max, checked by the validator),
a batch at most 500 records (the model) and 4 MiB of data in all (checked here, as AWS does, with
InvalidArgumentException "Records size exceeds 4 MB limit"). With `--enforce-limits` the Direct
PUT quota of us-east-1/us-west-2/eu-west-1 applies per delivery stream (5 MiB/s, 2,000 requests/s,
500,000 records/s): PutRecord answers ServiceUnavailableException "Slow down." (503) and
PutRecordBatch fails the records past the quota one by one, with that code and message, as AWS
reports throttling.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError, invalid_argument

from .model import DeliveryStream

if TYPE_CHECKING:
    from .service import FirehoseService

MAX_BATCH_BYTES = 4 << 20
QUOTA_BYTES, QUOTA_REQUESTS, QUOTA_RECORDS = 5 << 20, 2000, 500_000
SLOW_DOWN = "Slow down."


class DirectPutQuota:
    """Per delivery stream counts within the current one-second window."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[int, int, int, int]] = {}  # name -> (second, requests, records, bytes)

    def request(self, name: str) -> bool:
        return self._take(name, 1, 0, 0)

    def record(self, name: str, size: int) -> bool:
        return self._take(name, 0, 1, size)

    def _take(self, name: str, requests: int, records: int, size: int) -> bool:
        second = int(time.monotonic())
        with self._lock:
            sec, req, rec, byt = self._windows.get(name, (second, 0, 0, 0))
            if sec != second:
                req, rec, byt = 0, 0, 0
            if req + requests > QUOTA_REQUESTS or rec + records > QUOTA_RECORDS or byt + size > QUOTA_BYTES:
                self._windows[name] = (second, req, rec, byt)
                return False
            self._windows[name] = (second, req + requests, rec + records, byt + size)
            return True


def writable(svc: FirehoseService, name: str) -> DeliveryStream:
    ds = svc.stream(name)
    if ds.type == "KinesisStreamAsSource":
        raise invalid_argument("This operation is not permitted on KinesisStreamAsSource delivery stream type.")
    if ds.status != "ACTIVE":
        # A delivery stream that is still being created, or being deleted, takes no records.
        raise svc.not_found(name)
    return ds


def _encrypted(ds: DeliveryStream) -> bool:
    return ds.encryption.get("Status") == "ENABLED"


def _quota(svc: FirehoseService) -> DirectPutQuota | None:
    return svc.direct_put_quota if svc.settings.enforce_limits else None


def put_record(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = writable(svc, p["DeliveryStreamName"])
    data = p["Record"]["Data"]
    quota = _quota(svc)
    if quota is not None and not (quota.request(ds.name) and quota.record(ds.name, len(data))):
        raise AwsError("ServiceUnavailableException", SLOW_DOWN, 503)
    [record_id] = svc.deliveries.buffer(ds.name).append([data])
    return {"RecordId": record_id, "Encrypted": _encrypted(ds)}


def put_record_batch(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = writable(svc, p["DeliveryStreamName"])
    datas = [r["Data"] for r in p["Records"]]
    if sum(len(d) for d in datas) > MAX_BATCH_BYTES:
        raise invalid_argument("Records size exceeds 4 MB limit")
    quota = _quota(svc)
    if quota is not None and not quota.request(ds.name):
        raise AwsError("ServiceUnavailableException", SLOW_DOWN, 503)
    accepted = [i for i, d in enumerate(datas) if quota is None or quota.record(ds.name, len(d))]
    ids = iter(svc.deliveries.buffer(ds.name).append([datas[i] for i in accepted]) if accepted else [])
    taken = set(accepted)
    responses = [{"RecordId": next(ids)} if i in taken
                 else {"ErrorCode": "ServiceUnavailableException", "ErrorMessage": SLOW_DOWN}
                 for i in range(len(datas))]
    return {"FailedPutCount": len(datas) - len(accepted), "Encrypted": _encrypted(ds), "RequestResponses": responses}
