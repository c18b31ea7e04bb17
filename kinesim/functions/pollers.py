"""Event source mappings' pollers: Kinesis shards read in order and fed to a function in batches.

A poller reads a stream's shards like any other consumer (the store's ordered log, waking on the
shard's append condition), never from PutRecord, and follows what AWS documents for Kinesis
event source mappings:

* Per shard, `ParallelizationFactor` lanes; a record's lane comes from a hash of its partition key,
  so one key's records stay in order in one lane. A lane collects up to `BatchSize` records (and
  at most 6 MB of event), waiting up to `MaximumBatchingWindowInSeconds` after its previous
  invocation to fill a batch (0: invoke as soon as records exist).
* `StartingPosition` applies the first time only; afterwards each lane resumes from its durable
  checkpoint (checkpoints.py), written after a batch succeeded or was given up. A restart
  repeats at most the batch that was in flight.
* A function error retries the batch with a growing backoff until `MaximumRetryAttempts` or
  `MaximumRecordAgeInSeconds` is exhausted (-1: until the records expire). With
  `BisectBatchOnFunctionError` a failing batch is split in halves first; splitting does not use up
  retries. Given-up batches are described to the `OnFailure` destination (an SQS queue, an SNS
  topic, an S3 bucket with the whole event, or a Kinesis stream: failure_destinations.py) and
  skipped; a destination that cannot take the description (no such bucket) holds the shard until
  it can.
  Errors before the function ran (function not found, throttled) are retried without counting.
* `ReportBatchItemFailures`: the function's `batchItemFailures` move the checkpoint to just before
  the lowest reported sequence number and the rest of the batch is retried.
* `FilterCriteria`: records no filter matches are skipped without invoking.
* `TumblingWindowInSeconds`: batches never span windows (by arrival time); each invocation gets
  the state the previous one returned; a final invocation with `isFinalInvokeForWindow` follows
  the window's end.
* Resharding: a child shard is read only after its parents were read to their end.
* The source is a stream (records polled from the store) or an enhanced fan-out consumer of it
  (records pushed by the consumer's subscription: consumer_source.py); only the reading differs
  (shard_sources.py), everything above is the same.

Threads: one per mapping (finds streams and shards, starts lanes) and one per lane; all stop
promptly on `close()`. An invocation that finishes while its poller stops is still checkpointed,
but nothing is written once `close()`/`stop()` returned, so a new poller on the same store never
races an old one (an invocation still running then is simply repeated).
"""
from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import uuid as uuidlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import orjson

from ..config import Settings
from ..destinations import Destinations
from ..kinesis import consumers
from ..kinesis.model import Shard, Stream
from ..kinesis.service import KinesisService
from ..protocol.errors import AwsError
from ..s3.objects import ObjectStore
from ..store import Store, StoredRecord
from . import events
from .checkpoints import Checkpoints, ShardProgress
from .consumer_source import ConsumerSource
from .failure_destinations import FailureSender
from .filters import FilterCriteria, kinesis_view
from .mapping_config import MappingConfig
from .shard_sources import PolledSource, ShardSource

log = logging.getLogger("kinesim.pollers")

# Tunables (module attributes so tests can shorten them).
RETRY_BACKOFF_S = 0.1        # delay before the first retry of a failed batch; doubles per retry
RETRY_BACKOFF_MAX_S = 3.0
PROBLEM_RETRY_S = 1.0        # delay when the function could not be invoked at all
SCAN_S = 0.5                 # how often a mapping looks for its stream and new shards unprompted
IDLE_WAIT_S = 1.0            # longest single wait on a shard (close() wakes waiters anyway)
WINDOW_GRACE_S = 0.05        # after a tumbling window's end, for puts stamped just before it
PASS_CHECKPOINT_S = 1.0      # how often a lane saves a position moved only by records it passed
STOP_JOIN_S = 2.0            # how long close() waits for threads (an invocation may be running)
MAX_WINDOW_STATE_BYTES = 1 << 20   # AWS's 1 MB of tumbling-window state per shard
MAX_READ = 10000             # records per store read (GetRecords' limit)

ENABLED_STATES = {"Enabled", "Creating", "Enabling"}
DISABLED_STATES = {"Disabled", "Disabling", "Deleting"}
NO_RECORDS = "No records processed"
OK = "OK"
FUNCTION_FAILED = "PROBLEM: Function call failed"
FUNCTION_NOT_FOUND = "PROBLEM: Function not found"
STREAM_NOT_FOUND = "PROBLEM: Stream not found"
# The consumer of an enhanced fan-out mapping was deregistered: like a deleted stream, the mapping
# stays Enabled and says why it reads nothing (no AWS evidence found either way; see README).
CONSUMER_NOT_FOUND = "PROBLEM: Stream consumer not found"


class Invocation(Protocol):
    request_id: str
    payload: bytes
    function_error: str | None


Invoke = Callable[[str, bytes], Invocation]


# the manager

class MappingManager:
    """The running pollers of all event source mappings, kept in step with their configurations."""

    def __init__(self, kinesis: KinesisService, store: Store, invoke: Invoke, settings: Settings,
                 objects: ObjectStore | None = None, role_of: Callable[[str], str | None] | None = None,
                 destinations: Destinations | None = None):
        self.kinesis, self.store, self.invoke, self.settings = kinesis, store, invoke, settings
        # Where on-failure records go: S3 buckets in `objects`, SQS/SNS through `destinations`.
        self.failures = FailureSender(kinesis, objects, destinations)
        self.role_of = role_of  # a function's execution role (its Role), by function name
        self.lock = threading.Lock()
        self.pollers: dict[str, MappingPoller] = {}

    def sync(self, mapping: dict[str, Any]) -> None:
        """Start, stop or reconfigure the mapping's poller to match its configuration.

        Raises AwsError InvalidParameterValueException for what cannot run (a bad filter pattern,
        an OnFailure destination of the wrong service). State "Updating" keeps a running poller running.
        """
        config = MappingConfig.from_mapping(mapping)
        if config.on_failure:
            self.failures.check_usable(config.on_failure)
        with self.lock:
            current = self.pollers.get(config.uuid)
            if config.state in ENABLED_STATES:
                enabled = True
            elif config.state in DISABLED_STATES:
                enabled = False
            else:  # Updating: whatever it was doing
                enabled = current.active if current is not None else True
            if current is not None and current.active == enabled and current.config.same_work(config):
                current.config = config
                return
            if current is not None:
                current.stop()
            poller = MappingPoller(self, config)
            self.pollers[config.uuid] = poller
            if enabled:
                poller.start()

    def check_destination(self, arn: str) -> None:
        """CreateEventSourceMapping/Update: refuse an OnFailure destination this server cannot reach."""
        self.failures.check_available(arn)

    def remove(self, uuid: str) -> None:
        """Stop the mapping's poller and forget its checkpoints."""
        with self.lock:
            poller = self.pollers.pop(uuid, None)
        if poller is not None:
            poller.stop()
        Checkpoints(self.store, uuid).delete_all()

    def status(self, uuid: str) -> dict[str, str]:
        poller = self.pollers.get(uuid)
        if poller is None:
            result = Checkpoints(self.store, uuid).load_result() or NO_RECORDS
            return {"State": "Disabled", "StateTransitionReason": "User action", "LastProcessingResult": result}
        return poller.status()

    def close(self) -> None:
        """Stop every poller (server shutdown): all are told at once, then joined."""
        with self.lock:
            pollers = list(self.pollers.values())
            self.pollers.clear()
        for poller in pollers:
            poller.signal_stop()
        deadline = time.monotonic() + STOP_JOIN_S
        for poller in pollers:
            poller.join(deadline)
            poller.seal()


# one mapping

class MappingPoller:
    """One mapping: finds its stream and shards, runs a ShardWork per readable shard."""

    def __init__(self, manager: MappingManager, config: MappingConfig):
        self.svc, self.invoke, self.settings = manager.kinesis, manager.invoke, manager.settings
        self.failures = manager.failures
        self.config = config
        self.filters = FilterCriteria.parse({"Filters": [{"Pattern": p} for p in config.filter_patterns]})
        self.role_of = manager.role_of
        self.checkpoints = Checkpoints(manager.store, config.uuid)
        self.result = self.checkpoints.load_result() or NO_RECORDS
        self.active = False
        self.stopped = threading.Event()
        self.wake = threading.Event()          # a shard ended, or stop: look again now
        self.write_lock = threading.Lock()     # guards `sealed`
        self.sealed = False                    # stopped and joined: nothing more is written
        self.lock = threading.Lock()           # guards `running`
        self.stream: Stream | None = None
        self.progress: dict[str, ShardProgress] = {}
        self.running: dict[str, ShardWork] = {}
        self.finished: list[ShardWork] = []
        self.thread: threading.Thread | None = None

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
        with self.lock:
            works = list(self.running.values())
        for work in works:
            work.wake()

    def join(self, deadline: float) -> None:
        threads = [self.thread] if self.thread else []
        with self.lock:
            for work in list(self.running.values()) + self.finished:
                threads.extend(work.threads())
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def seal(self) -> None:
        """No checkpoint from now on: an invocation still running past the join is repeated by
        whoever reads the shard next, and cannot overwrite a newer checkpoint."""
        with self.write_lock:
            self.sealed = True

    def stop(self) -> None:
        self.signal_stop()
        self.join(time.monotonic() + STOP_JOIN_S)
        self.seal()

    def status(self) -> dict[str, str]:
        return {"State": "Enabled" if self.active else "Disabled", "StateTransitionReason": "User action",
                "LastProcessingResult": self.result}

    # shared by the lanes

    def set_result(self, result: str) -> None:
        """LastProcessingResult; persisted when it changes (not per batch)."""
        with self.write_lock:
            if result == self.result:
                return
            self.result = result
            if not self.sealed:
                self.checkpoints.save_result(result)

    def save(self, progress: ShardProgress) -> bool:
        """Persist a shard's progress; False (nothing written) once the poller is sealed."""
        with self.write_lock:
            if self.sealed:
                return False
            self.checkpoints.save(progress)
            return True

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

    def make_source(self, stream: Stream, shard: Shard, progress: ShardProgress) -> ShardSource:
        if self.config.consumer_arn is None:
            return PolledSource(self.svc, stream, shard, self.stopped)
        return ConsumerSource(self.svc, self.config.consumer_arn, shard, min(progress.lanes),
                              low_water=lambda: min(progress.lanes), stopped=self.stopped, report=self.set_result)

    # finding shards

    def run(self) -> None:
        while not self.stopped.is_set():
            self.wake.clear()
            try:
                self.scan()
            except Exception:  # a failed scan must not end the mapping; the next one retries
                log.exception("mapping %s: scan failed", self.config.uuid)
            self.wake.wait(SCAN_S)

    def scan(self) -> None:
        stream = self.svc.find(self.config.stream_name)
        if stream is None or stream.status == "DELETING":
            self.set_result(STREAM_NOT_FOUND)
            self.attach(None)
            return
        if stream.status == "CREATING":
            return
        if self.config.consumer_arn is not None and not self.consumer_exists():
            self.set_result(CONSUMER_NOT_FOUND)
            with self.lock:
                works = list(self.running.values())
                self.running.clear()
            for work in works:
                work.source.close()
            return
        if stream is not self.stream:
            self.attach(stream)
        with stream.lock:  # a reshard closes parents and adds children under this lock
            shards = list(stream.shards)
        for shard in shards:
            if self.stopped.is_set():
                return
            sid = shard.shard_id
            with self.lock:
                if sid in self.running:
                    continue
            progress = self.progress.get(sid)
            if progress is None:  # a child born after the mapping started: read it from its start
                progress = self.progress[sid] = ShardProgress(sid, shard.uid, [1] * self.config.lanes)
            if progress.ended or not self.parents_done(stream, shard):
                continue
            work = ShardWork(self, stream, shard, progress)
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
        mapping's StartingPosition places every shard; afterwards its checkpoints do."""
        if stream is self.stream:
            return
        with self.lock:
            self.running.clear()  # lanes of a deleted stream end by themselves
        self.stream, self.progress = stream, {}
        if stream is None or stream.status in ("CREATING", "DELETING"):
            self.stream = None
            return
        with stream.lock:
            shards = list(stream.shards)
        uids = {s.shard_id: s.uid for s in shards}
        saved = {sid: p.with_lanes(self.config.lanes) for sid, p in self.checkpoints.load().items()
                 if uids.get(sid) == p.shard_uid}
        if saved:
            self.progress = saved
            return
        for shard in shards:
            progress = self.progress[shard.shard_id] = self.starting_progress(shard)
            self.save(progress)

    def starting_progress(self, shard: Shard) -> ShardProgress:
        cfg = self.config
        index, ended = 1, False
        if cfg.starting_position == "LATEST":
            index, ended = shard.next_index, not shard.is_open
        elif cfg.starting_position == "AT_TIMESTAMP":
            if shard.closed_at is not None and shard.closed_at < cfg.starting_timestamp:
                index, ended = shard.next_index, True
            else:
                found = self.svc.store.first_index_at(shard.uid, cfg.starting_timestamp)
                index = shard.next_index if found is None else found
        return ShardProgress(shard.shard_id, shard.uid, [index] * cfg.lanes, ended=ended)

    def parents_done(self, stream: Stream, shard: Shard) -> bool:
        for parent in (shard.parent, shard.adjacent_parent):
            if parent is None or stream.shard(parent) is None:
                continue
            progress = self.progress.get(parent)
            if progress is None or not progress.ended:
                return False
        return True


# one shard

class ShardWork:
    """One shard of one mapping: its progress and its lanes."""

    def __init__(self, poller: MappingPoller, stream: Stream, shard: Shard, progress: ShardProgress):
        self.poller, self.stream, self.shard, self.progress = poller, stream, shard, progress
        self.lock = threading.Lock()
        self.source = poller.make_source(stream, shard, progress)
        self.lanes = [Lane(self, n) for n in range(len(progress.lanes))]
        self.lanes_ended = 0

    def start(self) -> None:
        self.source.start()
        for lane in self.lanes:
            lane.start()

    def threads(self) -> list[threading.Thread]:
        extra = getattr(self.source, "thread", None)
        return list(self.lanes) + ([extra] if extra is not None and extra.ident is not None else [])

    def wake(self) -> None:
        self.source.wake()

    def checkpoint(self, lane: int, index: int, window: dict[str, Any] | None) -> bool:
        with self.lock:
            self.progress.lanes[lane] = index
            self.progress.windows[lane] = dict(window) if window else None
            saved = self.poller.save(self.progress)
        self.source.advanced()
        return saved

    def lane_ended(self) -> None:
        with self.lock:
            self.lanes_ended += 1
            if self.lanes_ended < len(self.lanes):
                return
            self.progress.ended = True
            if not self.poller.save(self.progress):
                return
        self.source.close()
        self.poller.shard_ended(self)


@dataclass
class Item:
    row: StoredRecord
    entry: dict[str, Any]   # the record as the event carries it
    size: int               # its bytes in the event


@dataclass
class Batch:
    items: list[Item]
    next_index: int                  # where the lane goes on after this batch
    window_start: float | None = None
    window_over: bool = False        # the next record belongs to a later tumbling window
    at_tip: bool = False             # nothing more to read for now
    ended: bool = False              # a closed shard, read to its end


@dataclass
class Part:
    """A batch, or a piece of one after bisecting, on its way to the function."""
    items: list[Item]
    invokes: int = 0                 # invocations that carried these records
    retries: int = 0                 # failed attempts counted against MaximumRetryAttempts
    last: Invocation | None = None


@dataclass
class Outcome:
    kind: str                        # "ok" | "partial" | "error" | "problem"
    failed_at: int = 0               # partial: position in the part of the first failed record
    state: Any = None                # tumbling window: the state the function returned
    problem: str = ""                # problem: LastProcessingResult


def judge(invocation: Invocation, items: list[Item], report_item_failures: bool, needs_state: bool) -> Outcome:
    """What an invocation's answer means for its batch, by AWS's rules."""
    if invocation.function_error:
        return Outcome("error")
    try:
        body = orjson.loads(invocation.payload) if invocation.payload else None
    except orjson.JSONDecodeError:
        body = None
    state = None
    if needs_state:
        # With tumbling windows a response without `state` is a failed invocation.
        if not isinstance(body, dict) or not isinstance(body.get("state"), dict):
            return Outcome("error")
        state = body["state"]
    if not report_item_failures or not isinstance(body, dict):
        return Outcome("ok", state=state)
    failures = body.get("batchItemFailures")
    if not failures:  # absent, null or empty: complete success
        return Outcome("ok", state=state)
    if not isinstance(failures, list):
        return Outcome("error")
    position = {it.row[1]: n for n, it in enumerate(items)}
    first = len(items)
    for failure in failures:
        ident = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        # An empty or null identifier, a bad key name, or one not in the batch: the whole batch failed.
        if not isinstance(ident, str) or ident not in position:
            return Outcome("error")
        first = min(first, position[ident])
    return Outcome("partial", failed_at=first, state=state)


def lane_of(partition_key: str, lanes: int) -> int:
    if lanes == 1:
        return 0
    return int.from_bytes(hashlib.md5(partition_key.encode()).digest()[:8], "big") % lanes


class Lane(threading.Thread):
    """An ordered reader of one shard's records of one lane, and the invocations they make."""

    def __init__(self, work: ShardWork, number: int):
        super().__init__(name=f"lane-{work.poller.config.uuid[:8]}-{work.shard.shard_id[-4:]}-{number}", daemon=True)
        self.work, self.number = work, number
        self.poller, self.config = work.poller, work.poller.config
        self.svc, self.stream, self.shard = work.poller.svc, work.stream, work.shard
        self.index = self.saved_index = work.progress.lanes[number]
        self.saved_at = time.monotonic()
        saved = work.progress.windows[number]
        self.window: dict[str, Any] | None = dict(saved) if saved else None
        # When the previous invocation ended: the batching window counts from there (AWS: "the
        # next window begins as soon as the previous function invocation completes").
        self.last_done = time.monotonic()

    # running

    def run(self) -> None:
        while not self.stopped():
            try:
                self.loop()
                return
            except Exception:  # not the function's fault: resume from the last checkpoint
                log.exception("mapping %s: %s lane %d failed", self.config.uuid, self.shard.shard_id, self.number)
                self.poller.stopped.wait(PROBLEM_RETRY_S)
                self.index = self.saved_index = self.work.progress.lanes[self.number]
                saved = self.work.progress.windows[self.number]
                self.window = dict(saved) if saved else None

    def stopped(self) -> bool:
        return self.poller.stopped.is_set()

    def gone(self) -> bool:
        return self.svc.streams.get(self.stream.name) is not self.stream or self.stream.status == "DELETING" \
            or self.work.source.gone() is not None

    def loop(self) -> None:
        tumbling = self.config.tumbling_window_s > 0
        while True:
            batch = self.collect()
            if batch is None:
                return
            if batch.items:
                if tumbling and self.window is None:
                    self.window = {"start": batch.window_start,
                                   "end": batch.window_start + self.config.tumbling_window_s, "state": {}}
                if not self.deliver(batch):
                    return
            else:
                # Records nobody wants here (other lanes', filtered out, expired) are passed; the
                # position is saved now and then, not per record: passing them again is harmless.
                self.index = batch.next_index
                if self.index != self.saved_index and (
                        batch.ended or time.monotonic() - self.saved_at >= PASS_CHECKPOINT_S):
                    if not self.checkpoint(self.index):
                        return
            # A window ends when a later window's record comes, or when its time is over and every
            # record stamped inside it was read (a lane catching up may still be in the past).
            if tumbling and self.window is not None and (batch.window_over or batch.ended or (
                    batch.at_tip and time.time() >= self.window["end"] + WINDOW_GRACE_S)):
                if not self.close_window():
                    return
            if batch.ended:
                self.work.lane_ended()
                return

    # reading

    def collect(self) -> Batch | None:
        """The next batch: up to BatchSize records of this lane that pass the filters, at most 6 MB
        of event, within one tumbling window, gathered for up to the batching window."""
        cfg, poller = self.config, self.poller
        items: list[Item] = []
        size = events.EVENT_OVERHEAD_BYTES
        index = self.index
        window_start = self.window["start"] if self.window else None
        deadline = self.last_done + cfg.batching_window_s if cfg.batching_window_s else None
        role_arn = poller.role_arn()
        while True:
            if self.stopped() or self.gone():
                return None
            want = min(MAX_READ, (cfg.batch_size - len(items)) * cfg.lanes)
            rows, next_index, at_tip, ended = self.work.source.read(index, want,
                                                                    max(1, events.MAX_PAYLOAD_BYTES - size))
            for row in rows:
                if lane_of(row[2], cfg.lanes) != self.number:
                    index = row[0] + 1
                    continue
                entry = events.kinesis_record(row, self.shard.shard_id, self.stream.arn,
                                              self.svc.settings.region, role_arn)
                if poller.filters is not None and not poller.filters.matches(kinesis_view(entry, row[3])):
                    index = row[0] + 1
                    continue
                if cfg.tumbling_window_s:
                    start = math.floor(row[4] / cfg.tumbling_window_s) * cfg.tumbling_window_s
                    if window_start is None:
                        window_start = start
                    elif start > window_start:
                        return Batch(items, index, window_start, window_over=True)
                n = len(orjson.dumps(entry)) + 1
                if items and size + n > events.MAX_PAYLOAD_BYTES:
                    return Batch(items, index, window_start)
                items.append(Item(row, entry, n))
                size += n
                index = row[0] + 1
                if len(items) >= cfg.batch_size:
                    return Batch(items, index, window_start)
            if not rows:
                index = max(index, next_index)  # an empty read below the tip: those records expired
            if not at_tip:
                continue
            if ended:
                return Batch(items, index, window_start, at_tip=True, ended=True)
            now = time.monotonic()
            if items and (deadline is None or now >= deadline):
                return Batch(items, index, window_start, at_tip=True)
            if not items and index != self.index:
                return Batch(items, index, at_tip=True)
            timeout = IDLE_WAIT_S
            if items:
                timeout = deadline - now
            if self.window is not None:
                due = self.window["end"] + WINDOW_GRACE_S - time.time()
                if due <= 0 and not items:
                    return Batch(items, index, at_tip=True)
                timeout = min(timeout, max(0.0, due))
            if not items and index != self.saved_index:  # passed records' position to save
                due = self.saved_at + PASS_CHECKPOINT_S - now
                if due <= 0:
                    return Batch(items, index, at_tip=True)
                timeout = min(timeout, due)
            self.wait(index, timeout)

    def wait(self, index: int, timeout: float) -> None:
        """Until a record at `index` exists (or the shard closes, the poller stops), up to `timeout`."""
        self.work.source.wait(index, timeout)

    # invoking

    def deliver(self, batch: Batch) -> bool:
        """Invoke the function with `batch` until it succeeds or is given up; False if stopped."""
        cfg = self.config
        parts = deque([Part(batch.items)])
        while parts:
            if self.stopped():
                return False
            part = parts[0]
            stale = self.stale(part.items)
            if stale:
                given, part.items = part.items[:stale], part.items[stale:]
                if not self.give_up(given, "RecordAgeExceeded", part):
                    return False
                if not part.items:
                    parts.popleft()
                if not self.checkpoint(given[-1].row[0] + 1 if parts else batch.next_index):
                    return False
                continue
            outcome = self.attempt(part)
            if outcome.kind == "problem":
                self.poller.set_result(outcome.problem)
                self.poller.stopped.wait(PROBLEM_RETRY_S)
                continue
            if outcome.kind == "ok":
                parts.popleft()
                self.poller.set_result(OK)
                if not self.succeeded(outcome.state, part.items[-1].row[0] + 1 if parts else batch.next_index):
                    return False
                continue
            self.poller.set_result(FUNCTION_FAILED)
            if outcome.kind == "partial" and outcome.failed_at > 0:
                done, part.items = part.items[:outcome.failed_at], part.items[outcome.failed_at:]
                if not self.succeeded(outcome.state, done[-1].row[0] + 1):
                    return False
                if cfg.bisect:  # "bisected at the returned sequence number": not a retry
                    continue
            elif outcome.kind == "error" and cfg.bisect and len(part.items) > 1:
                half = len(part.items) // 2
                parts.popleft()
                parts.extendleft([Part(part.items[half:], part.invokes, last=part.last),
                                  Part(part.items[:half], part.invokes, last=part.last)])
                continue
            part.retries += 1
            if 0 <= cfg.max_retries < part.retries:
                if not self.give_up(part.items, "RetryAttemptsExhausted", part):
                    return False
                parts.popleft()
                if not self.checkpoint(part.items[-1].row[0] + 1 if parts else batch.next_index):
                    return False
                continue
            self.poller.stopped.wait(min(RETRY_BACKOFF_S * 2 ** (part.retries - 1), RETRY_BACKOFF_MAX_S))
        return True

    def event(self, items: list[Item], final: bool = False, early: bool = False) -> bytes:
        """The event that carries `items` to the function (with the open tumbling window, if any)."""
        entries = [it.entry for it in items]
        if self.window is not None:
            w = self.window
            return orjson.dumps(events.window_event(entries, w["start"], w["end"], w["state"], self.shard.shard_id,
                                                    self.stream.arn, final, early))
        return orjson.dumps(events.kinesis_event(entries))

    def attempt(self, part: Part, final: bool = False, early: bool = False) -> Outcome:
        event = self.event(part.items, final, early)
        try:
            invocation = self.poller.invoke(self.config.invoke_name, event)
        except AwsError as err:  # the batch did not reach the function: retried, not counted
            if err.code == "ResourceNotFoundException":
                return Outcome("problem", problem=FUNCTION_NOT_FOUND)
            return Outcome("problem", problem=f"PROBLEM: {err.message or err.code}")
        except Exception:  # the runtime failed us, not the function: retried, not counted
            log.exception("mapping %s: invoking %s failed", self.config.uuid, self.config.invoke_name)
            return Outcome("problem", problem=FUNCTION_FAILED)
        finally:
            self.last_done = time.monotonic()
        part.invokes += 1
        part.last = invocation
        return judge(invocation, part.items, self.config.report_item_failures and not final,
                     needs_state=self.window is not None and not final)

    def succeeded(self, state: Any, next_index: int) -> bool:
        """Records up to `next_index` are done: keep the window's new state, checkpoint."""
        if self.window is not None and state is not None:
            self.window["state"] = state
            if len(orjson.dumps(state)) > MAX_WINDOW_STATE_BYTES:
                # AWS ends a window whose state outgrows 1 MB early; the window goes on, state fresh.
                if not self.checkpoint(next_index) or not self.close_window(early=True):
                    return False
                return True
        return self.checkpoint(next_index)

    def stale(self, items: list[Item]) -> int:
        """How many leading records are past MaximumRecordAgeInSeconds or the stream's retention."""
        now = time.time()
        horizon = self.svc.retention_horizon(self.stream)
        if self.config.max_record_age_s >= 0:
            horizon = max(horizon, now - self.config.max_record_age_s)
        n = 0
        while n < len(items) and items[n].row[4] < horizon:
            n += 1
        return n

    def give_up(self, items: list[Item], condition: str, part: Part) -> bool:
        """Discard records once their invocation record reached the OnFailure destination; False if
        the poller stopped first. A destination that cannot take the record (a missing bucket or
        stream) holds the shard: the records are kept, delivery is retried, and LastProcessingResult
        says why until it succeeds."""
        last = part.last
        record = events.failure_record(
            request_id=last.request_id if last else str(uuidlib.uuid4()), function_arn=self.config.function_arn,
            condition=condition, invoke_count=part.invokes, status_code=200,
            executed_version=getattr(last, "executed_version", self.config.executed_version),  # an alias: what ran
            function_error=last.function_error if last else None,
            shard_id=self.shard.shard_id, rows=[it.row for it in items], stream_arn=self.stream.arn)
        before = self.poller.result
        while (problem := self.poller.send_failure(record, self.shard.shard_id, self.event(items))) is not None:
            self.poller.set_result(problem)
            if self.poller.stopped.wait(PROBLEM_RETRY_S) or self.gone():
                return False
        self.poller.set_result(before)
        log.info("mapping %s: %d record(s) of %s discarded (%s)", self.config.uuid, len(items),
                 self.shard.shard_id, condition)
        return True

    def close_window(self, early: bool = False) -> bool:
        """The window's final invocation (no records, isFinalInvokeForWindow), retried like a batch;
        then its state is dropped (an early end keeps the window, with a fresh state)."""
        cfg = self.config
        part = Part([])
        while not self.stopped():
            outcome = self.attempt(part, final=True, early=early)
            if outcome.kind == "problem":
                self.poller.set_result(outcome.problem)
                self.poller.stopped.wait(PROBLEM_RETRY_S)
                continue
            if outcome.kind in ("ok", "partial"):
                self.poller.set_result(OK)
                break
            self.poller.set_result(FUNCTION_FAILED)
            part.retries += 1
            if 0 <= cfg.max_retries < part.retries:
                break
            self.poller.stopped.wait(min(RETRY_BACKOFF_S * 2 ** (part.retries - 1), RETRY_BACKOFF_MAX_S))
        else:
            return False
        if early and self.window is not None:
            self.window = {**self.window, "state": {}}
        else:
            self.window = None
        return self.checkpoint(self.index)

    def checkpoint(self, index: int) -> bool:
        if self.gone():
            return False
        self.index = self.saved_index = index
        self.saved_at = time.monotonic()
        return self.work.checkpoint(self.number, index, self.window)
