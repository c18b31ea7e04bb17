"""What a delivery stream has done, since the server started: the counters behind
/_kinesim/firehose/<name>/metrics (CloudWatch's DeliveryToS3.* names) and what the web console's
delivery stream page shows besides: the objects written lately, newest first, the failed records
by error output type and error code (with the last message and where they went), and records and
bytes per second in and delivered (`kinesim.rates.Series`, one `add` per request or object).

Nothing here is stored: a restart starts the counters at zero, as a new CloudWatch graph would."""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from kinesim.rates import Series

from .writer import S3Object, bucket_name

# The per-second counters of a delivery stream (FirehoseService.rates).
FIELDS = ("records_in", "bytes_in", "records_out", "bytes_out", "records_failed")
RECENT_OBJECTS = 50


def tally(docs: Iterable[bytes]) -> dict[str, tuple[int, str]]:
    """Error output documents by error code: (how many, the last message). Processing and
    partitioning documents name it errorCode/errorMessage, format conversion's lastErrorCode/
    lastErrorMessage."""
    out: dict[str, tuple[int, str]] = {}
    for doc in docs:
        found = json.loads(doc)
        code = found.get("errorCode") or found.get("lastErrorCode") or "Unknown"
        message = found.get("errorMessage") or found.get("lastErrorMessage") or ""
        out[code] = (out.get(code, (0, ""))[0] + 1, message)
    return out


@dataclass
class FailureTally:
    """Records that went to the error output for one reason: an error output type
    (processing-failed, format-conversion-failed, s3-failed) and an error code."""
    output_type: str
    code: str
    records: int = 0
    message: str = ""      # the latest
    bucket: str = ""       # where the latest of them were written
    key: str = ""
    time: float = 0.0


class Activity:
    """One delivery stream's counters. Written by its delivery worker, read by the metrics route
    and the console."""

    def __init__(self, series: Series):
        self.series = series
        self.lock = threading.Lock()
        self.delivered_records = self.delivered_bytes = self.delivered_objects = 0
        self.backup_records = self.backup_objects = 0
        self.error_records = self.dropped_records = self.failed_attempts = 0
        self.last_delivery: float | None = None
        self.last_error: str | None = None
        self.last_error_time: float | None = None
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_OBJECTS)
        self.failures: dict[tuple[str, str], FailureTally] = {}

    def written(self, obj: S3Object) -> None:
        now, size, count = time.time(), len(obj.body), obj.record_count
        bucket = bucket_name(obj.bucket_arn)
        with self.lock:
            self.recent.appendleft({"bucket": bucket, "key": obj.key, "size": size, "records": count,
                                    "kind": obj.kind, "output_type": obj.output_type, "time": now})
            if obj.kind == "data":
                self.delivered_records += count
                self.delivered_bytes += size
                self.delivered_objects += 1
                self.last_delivery = now
            elif obj.kind == "backup":
                self.backup_records += count
                self.backup_objects += 1
            else:
                self.error_records += count
                for code, (records, message) in obj.errors.items():
                    found = self.failures.setdefault((obj.output_type or "", code),
                                                     FailureTally(obj.output_type or "", code))
                    found.records += records
                    found.message, found.bucket, found.key, found.time = message, bucket, obj.key, now
        if obj.kind == "data":
            self.series.add(0, 0, count, size)
        elif obj.kind == "error":
            self.series.add(0, 0, 0, 0, count)

    def dropped(self, obj: S3Object) -> None:
        with self.lock:
            self.dropped_records += obj.record_count

    def failed_attempt(self, text: str) -> None:
        with self.lock:
            self.failed_attempts += 1
            self.last_error, self.last_error_time = text, time.time()

    def recent_objects(self) -> list[dict[str, Any]]:
        """The objects written lately (data, error output, backup), newest first."""
        with self.lock:
            return list(self.recent)

    def failure_tallies(self) -> list[dict[str, Any]]:
        """Failed records by error output type and code, the latest first."""
        with self.lock:
            found = [asdict(f) for f in self.failures.values()]
        return sorted(found, key=lambda f: f["time"], reverse=True)

    def metrics(self, name: str, pending_count: int, pending_bytes: int, oldest: float | None) -> dict[str, Any]:
        """The delivery metrics, named as CloudWatch names them (the /metrics route's answer)."""
        now = time.time()
        with self.lock:
            attempts = self.delivered_objects + self.failed_attempts
            return {
                "DeliveryStreamName": name,
                "DeliveryToS3.Records": self.delivered_records,
                "DeliveryToS3.Bytes": self.delivered_bytes,
                "DeliveryToS3.ObjectCount": self.delivered_objects,
                "DeliveryToS3.Success": (self.delivered_objects / attempts) if attempts else 1.0,
                # Age of the oldest record not yet delivered (0 when none waits), in seconds.
                "DeliveryToS3.DataFreshness": max(0.0, now - oldest) if oldest is not None else 0.0,
                "BackupToS3.Records": self.backup_records,
                "BackupToS3.ObjectCount": self.backup_objects,
                "ErrorOutput.Records": self.error_records,
                "DroppedRecords": self.dropped_records,
                "FailedAttempts": self.failed_attempts,
                "BufferedRecords": pending_count,
                "BufferedBytes": pending_bytes,
                "LastDeliveryTimestamp": self.last_delivery,
                "LastError": self.last_error,
                "LastErrorTimestamp": self.last_error_time,
            }
