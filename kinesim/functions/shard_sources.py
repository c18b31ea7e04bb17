"""Where a mapping's lanes get one shard's records from. The lanes (lane.Lane) batch, invoke,
retry and checkpoint the same way whatever the source; a source only answers "the records from
index N on" (a kinesis.reader.Batch) and "call me back when there may be some":

- PolledSource: a stream's shared-throughput reader (GetRecords' way): a kinesis.reader
  ShardCursor, listening for the shard's appends.
- consumer_source.ConsumerSource: an enhanced fan-out consumer's subscription pushing records.
"""
from __future__ import annotations

from typing import Callable, Protocol

from ..kinesis.reader import Batch, ShardCursor


class ShardSource(Protocol):
    def start(self) -> None: ...

    def read(self, index: int, want: int, max_bytes: int) -> Batch:
        """Records from `index` on (their next position, at the tip, shard read to its end)."""

    def listen(self, index: int, callback: Callable[[], None]) -> bool:
        """Call `callback()` once when a record at `index` may exist (or the source ends); False,
        and nothing registered, if that is so already. The callback only queues the lane."""

    def wake(self) -> None:
        """The poller stops."""

    def advanced(self) -> None:
        """A lane checkpointed: records below every lane's checkpoint are no longer needed."""

    def gone(self) -> str | None:
        """Why nothing more can be read (None: it can)."""

    def close(self) -> None: ...


class PolledSource:
    """A shard read as GetRecords reads it, shared by the shard's lanes (each at its own index)."""

    def __init__(self, cursor: ShardCursor) -> None:
        self.cursor = cursor

    def start(self) -> None:
        pass

    def read(self, index: int, want: int, max_bytes: int) -> Batch:
        return self.cursor.read_from(index, want, max_bytes)

    def listen(self, index: int, callback: Callable[[], None]) -> bool:
        return self.cursor.listen(callback, index)

    def wake(self) -> None:
        pass

    def advanced(self) -> None:
        pass

    def gone(self) -> str | None:
        return self.cursor.gone()

    def close(self) -> None:
        pass
