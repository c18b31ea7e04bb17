"""What became of an event source mapping's last batches, for the web console: a bounded ring of
outcomes, written where a lane (lane.py) or an SQS poller (sqs_poller.py) decides them. In memory
only: a restart starts it empty (the mapping's checkpoint and LastProcessingResult are what persist).

Outcomes (`outcome` of an entry):
- "ok": the function handled the batch;
- "partial": it reported `batchItemFailures`: `done` records succeeded, the rest is retried;
- "retried": a function error; the batch is invoked again after a backoff (`retries` so far);
- "bisected": a function error with BisectBatchOnFunctionError: split into halves of `halves` records;
- "on-failure": given up (`condition`: RetryAttemptsExhausted, RecordAgeExceeded), its invocation
  record delivered to the OnFailure `destination`;
- "skipped": given up with no OnFailure destination: the records are dropped;
- "failed": (SQS) a function error: the messages return to the queue after their visibility timeout;
- "problem": the function could not be invoked (`detail` says why); retried without counting.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

KEEP = 200  # outcomes kept per mapping


class BatchTimeline:
    __slots__ = ("_entries", "_lock", "_next")

    def __init__(self, keep: int = KEEP):
        self._entries: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._next = 1  # each entry's id (the console's row id)

    def add(self, outcome: str, records: int, **details: Any) -> None:
        """One batch's outcome; `details` are JSON-able (shard, sequence numbers, request id...)."""
        entry = {"t": time.time_ns() // 1_000_000, "outcome": outcome, "records": records, **details}
        with self._lock:
            entry["id"] = self._next
            self._next += 1
            self._entries.append(entry)

    def add_problem(self, problem: str, **details: Any) -> None:
        """An invocation that could not be made: a lane retries it every second or so, so the
        same problem in a row is one entry whose `t` and `count` move, not a flood."""
        now = time.time_ns() // 1_000_000
        with self._lock:
            last = self._entries[-1] if self._entries else None
            if last is not None and last["outcome"] == "problem" and last["detail"] == problem \
                    and all(last.get(k) == v for k, v in details.items()):
                self._entries[-1] = {**last, "t": now, "count": last["count"] + 1, "id": self._next}
            else:
                self._entries.append({"t": now, "outcome": "problem", "records": 0, "detail": problem,
                                      "count": 1, **details, "id": self._next})
            self._next += 1

    def entries(self) -> list[dict[str, Any]]:
        """The kept outcomes, oldest first."""
        with self._lock:
            return list(self._entries)

    def last(self) -> dict[str, Any] | None:
        with self._lock:
            return self._entries[-1] if self._entries else None
