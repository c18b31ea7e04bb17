"""Where a mapping's lanes get one shard's records from. The lanes (pollers.Lane) batch, invoke,
retry and checkpoint the same way whatever the source; a source only answers "the records from
index N on" and "wait until there are some":

- PolledSource: a stream's shared-throughput reader (GetRecords' way: the store's ordered log,
  waking on the shard's append condition).
- consumer_source.ConsumerSource: an enhanced fan-out consumer's subscription pushing records.
"""
from __future__ import annotations

from typing import Protocol

from ..kinesis.model import Shard, Stream
from ..kinesis.records import read_batch
from ..kinesis.service import KinesisService
from ..store import StoredRecord

Read = tuple[list[StoredRecord], int, bool, bool]


class ShardSource(Protocol):
    def start(self) -> None: ...

    def read(self, index: int, want: int, max_bytes: int) -> Read:
        """(records from `index` on, the index after them, at the tip, shard read to its end)."""

    def wait(self, index: int, timeout: float) -> None:
        """Until a record at `index` may exist (or the source ends), up to `timeout`."""

    def wake(self) -> None:
        """Wake waiters (the poller stops)."""

    def advanced(self) -> None:
        """A lane checkpointed: records below every lane's checkpoint are no longer needed."""

    def gone(self) -> str | None:
        """Why nothing more can be read (None: it can)."""

    def close(self) -> None: ...


class PolledSource:
    """A shard read straight from the store, as GetRecords reads it."""

    def __init__(self, svc: KinesisService, stream: Stream, shard: Shard, stopped) -> None:
        self.svc, self.stream, self.shard, self.stopped = svc, stream, shard, stopped

    def start(self) -> None:
        pass

    def read(self, index: int, want: int, max_bytes: int) -> Read:
        closed = not self.shard.is_open  # read before the records: a closed shard's tip is final
        rows, next_index, at_tip = read_batch(self.svc, self.stream, self.shard, index, want, max_bytes)
        return rows, next_index, at_tip, closed and at_tip

    def wait(self, index: int, timeout: float) -> None:
        shard = self.shard
        with shard.appended:
            if shard.next_index <= index and shard.is_open and not self.stopped.is_set() and self.gone() is None:
                shard.appended.wait(timeout)

    def wake(self) -> None:
        with self.shard.appended:
            self.shard.appended.notify_all()

    def advanced(self) -> None:
        pass

    def gone(self) -> str | None:
        if self.svc.streams.get(self.stream.name) is not self.stream or self.stream.status == "DELETING":
            return "stream"
        return None

    def close(self) -> None:
        pass
