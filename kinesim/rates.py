"""Per-second counters over the last minutes, kept in memory for the web console's charts (records
in per stream and shard, invocations per function, bytes delivered...). They cost a lock and an
addition on the data path; nothing is stored, so a restart starts them empty, as a fresh
CloudWatch graph of a new resource would be."""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

SPAN_S = 600  # ten minutes: what the console draws


class Series:
    """Sums of a few named counters per wall-clock second, for the last `span` seconds."""

    __slots__ = ("fields", "span", "_buckets", "_lock")

    def __init__(self, fields: tuple[str, ...], span: int = SPAN_S, lock: threading.Lock | None = None):
        self.fields = fields
        self.span = span
        self._buckets: deque[list[Any]] = deque()  # [second, sum of field 0, sum of field 1, ...]
        self._lock = lock or threading.Lock()  # a SeriesMap's series share one (`SeriesMap.add_many`)

    def add(self, *values: float, now: float | None = None) -> None:
        """Add `values` (one per field, in order; missing ones are 0) to the current second."""
        second = int(time.time() if now is None else now)
        with self._lock:
            self.add_locked(second, values)

    def add_locked(self, second: int, values: tuple[float, ...]) -> None:
        """`add`, by a caller that holds the series' lock."""
        buckets = self._buckets
        bucket = buckets[-1] if buckets else None
        if bucket is None or bucket[0] != second:
            bucket = [second] + [0] * len(self.fields)
            buckets.append(bucket)
            oldest = second - self.span
            while buckets[0][0] <= oldest:
                buckets.popleft()
        for i, value in enumerate(values, 1):
            bucket[i] += value

    def points(self, seconds: int = 300, now: float | None = None) -> dict[str, list[float]]:
        """The last `seconds` seconds up to now, one point per second (0 where nothing was
        counted): {"t": [epoch seconds...], field: [sums...], ...}, as the console's charts take."""
        end = int(time.time() if now is None else now)
        start = end - min(seconds, self.span) + 1
        with self._lock:
            counted = {b[0]: b for b in self._buckets if b[0] >= start}
        out: dict[str, list[float]] = {"t": list(range(start, end + 1))}
        for i, name in enumerate(self.fields, 1):
            out[name] = [counted[s][i] if s in counted else 0 for s in out["t"]]
        return out

    def rate(self, window: int = 10, now: float | None = None) -> dict[str, float]:
        """Each field's mean per second over the last `window` whole seconds (the current one left
        out: it is still counting)."""
        end = int(time.time() if now is None else now)
        with self._lock:
            sums = [0.0] * len(self.fields)
            for bucket in self._buckets:
                if end - window <= bucket[0] < end:
                    for i in range(len(sums)):
                        sums[i] += bucket[i + 1]
        return {name: total / window for name, total in zip(self.fields, sums)}

    def total(self, seconds: int = SPAN_S, now: float | None = None) -> dict[str, float]:
        """Each field's sum over the last `seconds` seconds."""
        end = int(time.time() if now is None else now)
        with self._lock:
            sums = [0.0] * len(self.fields)
            for bucket in self._buckets:
                if bucket[0] > end - seconds:
                    for i in range(len(sums)):
                        sums[i] += bucket[i + 1]
        return dict(zip(self.fields, sums))


class SeriesMap:
    """A Series per key (a stream, a shard, a function), made on first use."""

    def __init__(self, fields: tuple[str, ...], span: int = SPAN_S):
        self.fields = fields
        self.span = span
        self._series: dict[Any, Series] = {}
        self._lock = threading.Lock()
        # Every series of the map counts under this one lock: a PutRecords spread over 500 shards
        # adds to 500 series, and a lock each cost ~4 µs per record at 1,024 shards (measured).
        self._counting = threading.Lock()

    def __getitem__(self, key: Any) -> Series:
        series = self._series.get(key)
        if series is None:
            with self._lock:
                series = self._series.setdefault(key, Series(self.fields, self.span, self._counting))
        return series

    def add_many(self, counts: dict[Any, tuple[float, ...]], now: float | None = None) -> None:
        """`add` to several keys' series at once, under one lock."""
        second = int(time.time() if now is None else now)
        series = [self[key] for key in counts]
        with self._counting:
            for one, values in zip(series, counts.values()):
                one.add_locked(second, values)

    def get(self, key: Any) -> Series | None:
        return self._series.get(key)

    def discard(self, key: Any) -> None:
        """Forget a deleted resource's counters (a new one of the same name starts at zero)."""
        with self._lock:
            self._series.pop(key, None)
