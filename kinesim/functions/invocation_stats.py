"""Per-function invocation figures of the last minutes, for the web console (CloudWatch's
Invocations, Errors, Throttles and Duration metrics of a function, kept in memory only).

Every invocation, whatever made it (Invoke, an event source mapping, an asynchronous event, an S3
or SNS trigger, a Firehose transform), is counted by the runtime as it ends: one `Series.add` of
(invocations, errors, throttles, duration_ms) and one duration kept in a small per-second sample,
so percentiles cost nothing on the invocation path beyond a lock and an append.

`throttles` counts invocations refused for the function's reserved concurrency (concurrency.py,
not counted as invocations, as in AWS's metrics) and those that waited for an execution
environment: without a reservation kinesim refuses nothing, and an invocation that finds every
environment of the function busy waits for one (where AWS would throttle or queue, it was held
up), so a saturated function shows.
"""
from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import Any

from ..rates import SPAN_S, SeriesMap

FIELDS = ("invocations", "errors", "throttles", "duration_ms")
SAMPLE_PER_S = 64  # durations kept per function and second: enough for p99 of a chart point


class DurationSample:
    """Up to SAMPLE_PER_S durations per wall-clock second (a uniform reservoir when more came),
    for the last `span` seconds."""

    __slots__ = ("span", "_seconds", "_lock")

    def __init__(self, span: int = SPAN_S):
        self.span = span
        self._seconds: deque[list[Any]] = deque()  # [second, seen, [durations...]]
        self._lock = threading.Lock()

    def add(self, duration_ms: float, now: float | None = None) -> None:
        second = int(time.time() if now is None else now)
        with self._lock:
            seconds = self._seconds
            bucket = seconds[-1] if seconds else None
            if bucket is None or bucket[0] != second:
                bucket = [second, 0, []]
                seconds.append(bucket)
                while seconds[0][0] <= second - self.span:
                    seconds.popleft()
            bucket[1] += 1
            kept = bucket[2]
            if len(kept) < SAMPLE_PER_S:
                kept.append(duration_ms)
            else:
                slot = random.randrange(bucket[1])
                if slot < SAMPLE_PER_S:
                    kept[slot] = duration_ms

    def by_second(self, start: int) -> dict[int, list[float]]:
        """The kept durations of each second from `start` on."""
        with self._lock:
            return {b[0]: list(b[2]) for b in self._seconds if b[0] >= start}


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile `q` (0-100) of `values`, None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least the first
    return ordered[int(rank) - 1]


class InvocationStats:
    """Counters and duration samples per function name (every version counted together)."""

    def __init__(self) -> None:
        self.series = SeriesMap(FIELDS)
        self._samples: dict[str, DurationSample] = {}

    def record(self, function_name: str, duration_ms: float, error: bool, throttled: bool) -> None:
        self.series[function_name].add(1, 1 if error else 0, 1 if throttled else 0, duration_ms)
        sample = self._samples.get(function_name)
        if sample is None:
            sample = self._samples.setdefault(function_name, DurationSample())
        sample.add(duration_ms)

    def throttled(self, function_name: str) -> None:
        """An invocation refused before it ran (TooManyRequestsException)."""
        self.series[function_name].add(0, 0, 1, 0)

    def forget(self, function_name: str) -> None:
        """A deleted function's figures (a new one of that name starts from nothing)."""
        self.series.discard(function_name)
        self._samples.pop(function_name, None)

    def points(self, function_name: str, seconds: int = 300) -> dict[str, list]:
        """Per second over the last `seconds`: the counters as `Series.points()` gives them, plus
        `p50`, `p90`, `p99` of the durations (None for a second without invocations)."""
        series = self.series.get(function_name)
        out: dict[str, list] = series.points(seconds) if series is not None else _empty_points(seconds)
        sample = self._samples.get(function_name)
        kept = sample.by_second(out["t"][0]) if sample is not None else {}
        for name, q in (("p50", 50), ("p90", 90), ("p99", 99)):
            out[name] = [percentile(kept.get(t, []), q) for t in out["t"]]
        return out

    def summary(self, function_name: str, seconds: int = 300) -> dict[str, Any]:
        """Totals over the last `seconds` and the duration percentiles over them."""
        series = self.series.get(function_name)
        totals = series.total(seconds) if series is not None else dict.fromkeys(FIELDS, 0)
        sample = self._samples.get(function_name)
        durations = [d for kept in (sample.by_second(int(time.time()) - seconds + 1) if sample else {}).values()
                     for d in kept]
        calls = totals["invocations"]
        return {"invocations": calls, "errors": totals["errors"], "throttles": totals["throttles"],
                "avg_ms": totals["duration_ms"] / calls if calls else None,
                "p50_ms": percentile(durations, 50), "p90_ms": percentile(durations, 90),
                "p99_ms": percentile(durations, 99),
                "per_s": series.rate(10)["invocations"] if series is not None else 0.0}


def _empty_points(seconds: int) -> dict[str, list]:
    end = int(time.time())
    t = list(range(end - min(seconds, SPAN_S) + 1, end + 1))
    return {"t": t, **{name: [0] * len(t) for name in FIELDS}}
