"""The in-memory index of `recent` (see `recent`): which of its rows belong to which shard."""
from __future__ import annotations

from array import array
from typing import NamedTuple


class View(NamedTuple):
    """What `recent` holds of one shard as of compaction step `step`: `first` is the shard's first
    index there (every record below it is in `records`); `runs` are its runs from the requested
    index on (the first one cut to start there). Rows with gkeys below `switch` are in the
    inactive table, the others in the active one, `active` (a row stays in its table until a
    compaction step moves it, and then `step` changes)."""
    step: int
    first: int
    runs: list[tuple[int, int, int]]
    switch: int
    active: int

    def gkeys(self) -> list[int]:
        return [g for _, gkey, n in self.runs for g in range(gkey, gkey + n)]


class Tail:
    """One shard's rows in `recent`, as runs (first index, first gkey, count) of rows whose indexes
    and gkeys both follow on, as one batch's records of a shard do: one run per shard per batch
    keeps what a put adds here to one call per shard. Kept flat in an array, 24 bytes a run (a
    list of tuples took ~130)."""
    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs = array("q")

    def add(self, first_gkey: int, indexes: list[int]) -> None:
        n = len(indexes)
        if indexes[-1] - indexes[0] == n - 1:  # consecutive, as PutRecords numbers them
            self.runs.extend((indexes[0], first_gkey, n))
        else:
            for k, idx in enumerate(indexes):
                self.runs.extend((idx, first_gkey + k, 1))

    def first(self) -> int:
        return self.runs[0]

    def last(self) -> int:
        return self.runs[-3] + self.runs[-1] - 1

    def _search(self, value: int, field: int) -> int:
        """How many runs have `field` (0: first index, 1: first gkey; both ascending) <= value."""
        runs, lo, hi = self.runs, 0, len(self.runs) // 3
        while lo < hi:
            mid = (lo + hi) // 2
            if runs[3 * mid + field] <= value:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def below(self, switch: int) -> tuple[int, int]:
        """(runs, rows) with gkeys below `switch`: a batch is all below it or all above."""
        k = self._search(switch - 1, 1)
        return k, sum(self.runs[2:3 * k:3])

    def gkeys(self, runs: int | None = None) -> list[int]:
        """The gkeys of the first `runs` runs (all by default), in order."""
        return expand(self.runs if runs is None else self.runs[:3 * runs])

    def from_index(self, idx: int) -> list[tuple[int, int, int]]:
        """The runs from index `idx` on, the first one cut to start there."""
        runs = self.runs
        at = max(self._search(idx, 0) - 1, 0)
        out = [(runs[k], runs[k + 1], runs[k + 2]) for k in range(3 * at, len(runs), 3)]
        if out and out[0][0] < idx:
            first, gkey, n = out[0]
            skip = min(idx - first, n)
            out[0] = (first + skip, gkey + skip, n - skip)
            if not out[0][2]:
                del out[0]
        return out

    def cut_runs(self, k: int) -> None:
        del self.runs[:3 * k]

    def drop_rows(self, count: int) -> None:
        """Forget the first `count` rows."""
        runs = self.runs
        while count and runs:
            n = runs[2]
            if n <= count:
                del runs[:3]
                count -= n
            else:
                runs[0] += count
                runs[1] += count
                runs[2] -= count
                count = 0


def expand(flat: array) -> list[int]:
    """The gkeys of flat runs, in order. Runs of one row (a batch over many shards leaves mostly
    those) are a slice, done in C."""
    starts, counts = flat[1::3], flat[2::3]
    if not counts or max(counts) == 1:
        return starts.tolist()
    return [g for start, n in zip(starts, counts) for g in range(start, start + n)]
