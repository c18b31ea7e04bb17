"""The store's AT_TIMESTAMP lookup: a binary search that must agree with a plain scan."""
from __future__ import annotations

import random

from kinesim.store import Store


def test_first_index_at_agrees_with_a_scan_also_after_retention(tmp_path):
    rng = random.Random(5)
    store = Store(str(tmp_path))
    t, rows = 1000.0, []
    for index in range(1, 3001):
        t += rng.choice([0.0, 0.0, 0.5, 1.0])  # many records share an arrival time
        rows.append((index, "seq", "pk", b"x", t))
    store.append_many({3: rows, 4: [(1, "seq", "pk", b"x", 5.0)]})
    store.delete_records([3], before_arrival=1200.0)  # retention trims the front
    remaining = store.read(3, 0, 10_000)
    assert 0 < len(remaining) < 3000

    def scan(timestamp: float) -> int | None:
        return next((index for index, _, _, _, arrival in remaining if arrival >= timestamp), None)

    probes = [0.0, 1000.0, 1200.0, 1200.5, 1500.0, t, t + 0.1] + [rng.uniform(900, t + 5) for _ in range(300)]
    for timestamp in probes:
        assert store.first_index_at(3, timestamp) == scan(timestamp), timestamp
    assert store.first_index_at(4, 5.0) == 1 and store.first_index_at(4, 5.1) is None
    assert store.first_index_at(99, 0.0) is None  # a shard with no records
    store.close()
