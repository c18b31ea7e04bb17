"""kinesim/rates.py: the per-second counters behind the console's charts."""
from __future__ import annotations

import threading

from kinesim.rates import Series, SeriesMap


def test_points_fill_empty_seconds_with_zero_and_end_now():
    series = Series(("records", "bytes"))
    series.add(2, 200, now=1000.2)
    series.add(1, 50, now=1000.9)
    series.add(3, 30, now=1003.5)
    points = series.points(5, now=1004.1)
    assert points["t"] == [1000, 1001, 1002, 1003, 1004]
    assert points["records"] == [3, 0, 0, 3, 0]
    assert points["bytes"] == [250, 0, 0, 30, 0]


def test_rate_leaves_out_the_second_still_counting():
    series = Series(("records",))
    for second in range(990, 1000):
        series.add(10, now=second + 0.5)
    series.add(1000, now=1000.1)  # the current second: not in the rate yet
    assert series.rate(10, now=1000.5) == {"records": 10.0}
    assert series.total(20, now=1000.5) == {"records": 1100}


def test_old_seconds_are_dropped():
    series = Series(("n",), span=60)
    series.add(1, now=0)
    series.add(1, now=100)
    assert series.points(60, now=100)["n"] == [0] * 59 + [1]
    assert len(series._buckets) == 1  # what the span no longer covers is forgotten


def test_concurrent_adds_are_all_counted():
    series = Series(("n",))

    def add():
        for _ in range(10_000):
            series.add(1, now=5000.0)
    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert series.total(10, now=5000.0) == {"n": 40_000}


def test_series_map_makes_one_series_per_key_and_forgets():
    counters = SeriesMap(("n",))
    counters["a"].add(1, now=10)
    assert counters["a"] is counters["a"]
    assert counters.get("b") is None
    counters.discard("a")
    assert counters.get("a") is None


def test_add_many_counts_each_key_beside_single_adds_from_other_threads():
    counters = SeriesMap(("records", "bytes"))

    def single():
        for _ in range(5_000):
            counters["a"].add(1, 10, now=7000.5)

    threads = [threading.Thread(target=single) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in range(5_000):
        counters.add_many({"a": (1, 10), "b": (2, 20)}, now=7000.5)
    for t in threads:
        t.join()
    assert counters["a"].total(10, now=7000.9) == {"records": 15_000, "bytes": 150_000}
    assert counters["b"].total(10, now=7000.9) == {"records": 10_000, "bytes": 100_000}
    assert counters["b"].points(2, now=7001.2)["records"] == [10_000, 0]
