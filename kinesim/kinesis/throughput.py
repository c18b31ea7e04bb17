"""Per-shard throughput limits, applied only with `--enforce-limits` (AWS's quotas per shard:
1 MiB/s or 1,000 records/s in; 2 MiB/s and 5 GetRecords calls/s out)."""
from __future__ import annotations

import threading
import time

WRITE_BYTES, WRITE_RECORDS = 1 << 20, 1000
READ_BYTES, READ_CALLS = 2 << 20, 5


class Meter:
    """Counts per shard within the current one-second window."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[tuple[int, str], tuple[int, int, int]] = {}  # (uid, dir) -> (second, count, bytes)

    def _take(self, uid: int, direction: str, count: int, size: int, max_count: int, max_bytes: int) -> bool:
        second = int(time.monotonic())
        with self._lock:
            sec, c, b = self._windows.get((uid, direction), (second, 0, 0))
            if sec != second:
                c, b = 0, 0
            if c + count > max_count or b + size > max_bytes:
                self._windows[(uid, direction)] = (second, c, b)
                return False
            self._windows[(uid, direction)] = (second, c + count, b + size)
            return True

    def write(self, uid: int, size: int) -> bool:
        return self._take(uid, "w", 1, size, WRITE_RECORDS, WRITE_BYTES)

    def read_call(self, uid: int) -> bool:
        return self._take(uid, "r", 1, 0, READ_CALLS, 1 << 62)

    def read_bytes(self, uid: int, size: int) -> bool:
        return self._take(uid, "rb", 0, size, 1 << 62, READ_BYTES)
