"""One event source mapping's poller (pollers.py has the whole picture): it finds the mapping's
stream and, in lineage order (kinesis.reader.readable_shards), the shards to read; it runs a
ShardWork (a source and its lanes, lane.py) per readable shard and keeps the mapping's checkpoint.
Its lanes run on the mapping's LanePool (lane_runner.py), a few threads whatever the shards.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ..kinesis import consumers
from ..kinesis.model import Shard, Stream
from ..kinesis.reader import Checkpoint, Record, ShardCursor, ShardMark, readable_shards, starting_checkpoint
from ..protocol.errors import AwsError
from . import events
from . import mapping_status as status
from .batches import sequence_number
from .checkpoints import Checkpoints
from .consumer_source import ConsumerSource
from .filters import FilterCriteria, kinesis_view
from .lane import Lane
from .lane_runner import LanePool
from .mapping_config import MappingConfig
from .mapping_status import MappingStatus
from .shard_sources import PolledSource, ShardSource

log = logging.getLogger("kinesim.pollers")


class MappingPoller:
    """One mapping: finds its stream and shards, runs a ShardWork per readable shard."""

    def __init__(self, manager: Any, config: MappingConfig):
        self.svc, self.invoke, self.settings = manager.kinesis, manager.invoke, manager.settings
        self.timing = manager.timing
        self.timers = manager.timers
        self.pool = LanePool(manager.lane_threads, f"lane-{config.uuid[:8]}")
        self.failures = manager.failures
        self.config = config
        self.filters = FilterCriteria.parse({"Filters": [{"Pattern": p} for p in config.filter_patterns]})
        self.role_of: Callable[[str], str | None] | None = manager.role_of
        self.checkpoints = Checkpoints(manager.store, config.uuid)
        self.reporter = MappingStatus(self.checkpoints)
        self.timeline = manager.timeline(config.uuid)  # what became of each batch (the console's)
        self.active = False
        self.stopped = threading.Event()
        self.wake = threading.Event()          # a shard ended, or stop: look again now
        self.lock = threading.Lock()           # guards `running`
        self.stream: Stream | None = None
        self.checkpoint = Checkpoint()
        self.running: dict[str, ShardWork] = {}
        self.finished: list[ShardWork] = []
        self.shards_seen = -1  # how many shards the stream had at the last full scan
        self.thread: threading.Thread | None = None

    @property
    def result(self) -> str:
        return self.reporter.result

    # lifecycle

    def start(self) -> None:
        self.active = True
        # Positions are taken now, so LATEST means "after the records already in the stream when
        # the mapping was enabled", not whenever the thread first runs.
        self.attach(self.svc.find(self.config.stream_name))
        self.thread = threading.Thread(target=self.run, name=f"mapping-{self.config.uuid[:8]}", daemon=True)
        self.thread.start()

    def signal_stop(self) -> None:
        """Stop reading and retrying. An invocation already running may still finish and checkpoint
        until `seal()`."""
        self.stopped.set()
        self.active = False
        self.wake.set()
        self.pool.close()  # parked lanes are not run again; a lane being run finishes its step
        with self.lock:
            works = list(self.running.values())
        for work in works:
            work.wake()

    def join(self, deadline: float) -> None:
        threads = ([self.thread] if self.thread else []) + self.pool.threads()
        with self.lock:
            for work in list(self.running.values()) + self.finished:
                threads.extend(work.threads())
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def seal(self) -> None:
        """No checkpoint from now on: an invocation still running past the join is repeated by
        whoever reads the shard next, and cannot overwrite a newer checkpoint."""
        self.reporter.seal()

    def stop(self) -> None:
        self.signal_stop()
        self.join(time.monotonic() + self.timing.stop_join_s)
        self.seal()

    def status(self) -> dict[str, str]:
        return {"State": "Enabled" if self.active else "Disabled", "StateTransitionReason": "User action",
                "LastProcessingResult": self.result}

    def lag(self) -> dict[str, int]:
        """Records put to the shards being read and not yet checkpointed (a lane's position is
        the next record it will read), over those shards: {"records", "shards"}."""
        with self.lock:
            works = list(self.running.values())
        behind = sum(max(0, work.shard.next_index - work.mark.position) for work in works)
        return {"records": behind, "shards": len(works)}

    # shared by the lanes

    def set_result(self, result: str) -> None:
        self.reporter.set_result(result)

    def save(self, mark: ShardMark | None = None) -> bool:
        """Persist the checkpoint (`mark`: only that shard's mark moved); False (nothing written)
        once the poller is sealed."""
        return self.reporter.save(self.checkpoint, mark)

    def role_arn(self) -> str:
        """The function's execution role: each record's `invokeIdentityArn`. Looked up per batch, as
        UpdateFunctionConfiguration may change it."""
        name = self.config.invoke_name.split(":")[0]
        role = self.role_of(name) if self.role_of else None
        return role or f"arn:aws:iam::{self.settings.account_id}:role/{name}-role"

    def shard_ended(self, work: "ShardWork") -> None:
        with self.lock:
            if self.running.get(work.shard.shard_id) is work:
                del self.running[work.shard.shard_id]
                self.finished.append(work)
        self.wake.set()

    def send_failure(self, record: dict[str, Any], shard_id: str, event: bytes) -> str | None:
        """Deliver a discarded batch's invocation record to the OnFailure destination; None once
        delivered (or with no destination), else the problem for LastProcessingResult."""
        destination = self.config.on_failure
        if not destination:
            return None
        return self.failures.send(destination, record, self.config.uuid, shard_id, event)

    # what the lanes send: AWS's Kinesis event (a Kafka mapping's poller answers in Kafka's shape,
    # kafka_source.py); the lanes' batching, retries and checkpoints are the same for both

    def record_entry(self, row: Record, stream: Stream, shard: Shard, role_arn: str) -> dict[str, Any]:
        """One record as the event carries it."""
        return events.kinesis_record(row, shard.shard_id, stream.arn, self.svc.settings.region, role_arn)

    def record_key(self, row: Record, stream: Stream, shard: Shard) -> Any:
        """What the function's `batchItemFailures` names the record by (None: its sequence number)."""
        return None

    reported_key = staticmethod(sequence_number)  # the key an `itemIdentifier` names (batches.judge)

    def matches(self, entry: dict[str, Any], row: Record) -> bool:
        """Whether the mapping's FilterCriteria let the record through (no filters: all do)."""
        return self.filters is None or self.filters.matches(kinesis_view(entry, row[3]))

    def batch_event(self, entries: list[dict[str, Any]], stream: Stream, shard: Shard) -> dict[str, Any]:
        """The event of a batch of one shard's records (outside tumbling windows)."""
        return events.kinesis_event(entries)

    def make_source(self, cursor: ShardCursor, mark: ShardMark) -> ShardSource:
        if self.config.consumer_arn is None:
            return PolledSource(cursor)
        return ConsumerSource(self.svc, self.config.consumer_arn, cursor.shard, mark.position,
                              low_water=lambda: mark.position, stopped=self.stopped, report=self.set_result)

    # finding shards

    def run(self) -> None:
        prompted = True
        while not self.stopped.is_set():
            self.wake.clear()
            try:
                self.scan(prompted)
            except Exception:  # a failed scan must not end the mapping; the next one retries
                log.exception("mapping %s: scan failed", self.config.uuid)
                self.shards_seen = -1
            prompted = self.wake.wait(self.timing.scan_s)

    def scan(self, prompted: bool = True) -> None:
        """Start the work of shards that became readable. Unprompted (no shard ended), only a
        change of the stream or of its shard list can have made one readable: otherwise the scan
        is a few lookups, not a walk over every shard."""
        stream = self.svc.find(self.config.stream_name)
        if stream is None or stream.status == "DELETING":
            self.set_result(status.STREAM_NOT_FOUND)
            self.attach(None)
            return
        if stream.status == "CREATING":
            return
        if self.config.consumer_arn is not None and not self.consumer_exists():
            self.set_result(status.CONSUMER_NOT_FOUND)
            self.shards_seen = -1  # a consumer registered again: every shard's work starts anew
            with self.lock:
                works = list(self.running.values())
                self.running.clear()
            for work in works:
                work.source.close()
            return
        if stream is not self.stream:
            self.attach(stream)
        if not prompted and len(stream.shards) == self.shards_seen:
            return
        self.shards_seen = len(stream.shards)
        for shard in readable_shards(stream, self.checkpoint):
            if self.stopped.is_set():
                return
            sid = shard.shard_id
            with self.lock:
                if sid in self.running:
                    continue
            mark = self.checkpoint.mark(shard)
            if mark is None:  # a child born after the mapping started: read it from its start
                mark = self.checkpoint.set(ShardMark(sid, shard.uid, [1] * self.config.lanes))
            work = ShardWork(self, stream, shard, mark)
            with self.lock:
                if self.stopped.is_set():
                    return
                self.running[sid] = work
            work.start()

    def consumer_exists(self) -> bool:
        try:
            consumers.by_arn(self.svc, self.config.consumer_arn)
        except AwsError:
            return False
        return True

    def attach(self, stream: Stream | None) -> None:
        """Take up `stream` (None: the stream is gone). The first time a stream is seen, the
        mapping's StartingPosition places every shard; afterwards its checkpoint does."""
        if stream is self.stream:
            return
        with self.lock:
            self.running.clear()  # lanes of a deleted stream end by themselves
        self.stream, self.checkpoint = stream, Checkpoint()
        self.shards_seen = -1  # the next scan looks at every shard
        if stream is None or stream.status in ("CREATING", "DELETING"):
            self.stream = None
            return
        saved = self.checkpoints.load_checkpoint()
        saved = saved.only({s.uid for s in list(stream.shards)}) if saved is not None else Checkpoint()
        if saved.marks:
            for mark in saved.marks.values():
                saved.set(mark.with_lanes(self.config.lanes))
            self.checkpoint = saved
            return
        cfg = self.config
        self.checkpoint = starting_checkpoint(self.svc, stream, cfg.starting_position, cfg.starting_timestamp,
                                              lanes=cfg.lanes)
        self.save()


class ShardWork:
    """One shard of one mapping: its mark in the checkpoint, its source and its lanes."""

    def __init__(self, poller: MappingPoller, stream: Stream, shard: Shard, mark: ShardMark):
        self.poller, self.stream, self.shard, self.mark = poller, stream, shard, mark
        self.lock = threading.Lock()
        self.cursor = ShardCursor(poller.svc, stream, shard)
        self.source = poller.make_source(self.cursor, mark)
        self.lanes = [Lane(self, n) for n in range(len(mark.positions))]
        self.lanes_ended = 0

    def start(self) -> None:
        self.source.start()
        for lane in self.lanes:
            lane.start()

    def threads(self) -> list[threading.Thread]:
        """The source's own thread, if it has one (a consumer's subscription)."""
        extra = getattr(self.source, "thread", None)
        return [extra] if extra is not None and extra.ident is not None else []

    def wake(self) -> None:
        self.source.wake()

    def checkpoint(self, lane: int, index: int, window: dict[str, Any] | None) -> bool:
        with self.lock:
            self.mark.positions[lane] = index
            self.mark.states[lane] = dict(window) if window else None
            saved = self.poller.save(self.mark)
        self.source.advanced()
        return saved

    def lane_ended(self) -> None:
        with self.lock:
            self.lanes_ended += 1
            if self.lanes_ended < len(self.lanes):
                return
            self.mark.ended = True
            if not self.poller.save(self.mark):
                return
        self.source.close()
        self.poller.shard_ended(self)
