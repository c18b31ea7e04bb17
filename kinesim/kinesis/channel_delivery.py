"""Channel delivery: a worker thread per delivering channel moves its records into S3 objects.

Each worker reads its stream through the shard reader (`reader.StreamReader`: lineage order,
one durable Checkpoint, a wait that wakes on append) and holds, per shard, the records read since
the checkpoint. A shard's records are written when the oldest of them has waited
DataFreshnessInSeconds (times `firehose_interval_scale`, the server's buffer-time knob, so that
tests see 300 s as 3 s) or when they reach `MAX_OBJECT_BYTES`: one object per shard, named from
the shard and the sequence number of its first record. Records that fail their format's
validation go to the dead-letter bucket in an object of the same name.

Exactly once, across kill -9: the checkpoint is saved after the objects. A crash in between
reads the same records again from the same first record, so the object written again has the
same key and replaces the first one (holding the same records, or those and later ones).

Objects are written with `put_object(bucket, key, data)`, the object store's, passed in by the
edge: this package does not import S3's.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import channel_objects
from .channel_state import Channel, Channels
from .checkpoints import Checkpoint
from .reader import Record, ShardCursor, StreamReader, starting_checkpoint

log = logging.getLogger("kinesim.kinesis.channels")

MAX_OBJECT_BYTES = 16 * 1024 * 1024
READ_LIMIT = 10000
SUPERVISE_S = 1.0     # how often the supervisor looks for channels that started or stopped delivering
IDLE_WAIT_S = 5.0     # a worker with nothing pending re-checks its channel this often


@dataclass
class Pending:
    """What one shard holds for a channel: the records read and not yet written."""
    cursor: ShardCursor
    records: list[Record] = field(default_factory=list)
    size: int = 0
    first_read_at: float = 0.0   # when the oldest of them was read: the freshness clock
    finished: bool = False       # the cursor read a closed shard to its end


class ChannelWorker:
    """Delivers one channel until `stop()`."""

    def __init__(self, kinesis: Any, channels: Channels, channel: Channel, put_object: Callable[..., Any]):
        self.kinesis, self.channels, self.channel, self.put_object = kinesis, channels, channel, put_object
        self.checkpoint: Checkpoint = channels.checkpoints(channel).load() or Checkpoint()
        self.reader = StreamReader(kinesis, channel.stream_name, self.checkpoint)
        self.pending: dict[int, Pending] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"kinesim-channel-{channel.name[:24]}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.reader.close()

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                try:
                    timeout = self.step()
                except Exception as err:  # e.g. the bucket deleted since: records stay, tried again later
                    if self.stopped.is_set():
                        return
                    log.warning("channel %s: delivery failed, retrying: %s", self.channel.name, err)
                    timeout = self._wait_s()
                    for p in self.pending.values():
                        p.first_read_at = time.time()
                self.reader.wait(timeout)
        finally:
            self.reader.close()

    def _wait_s(self) -> float:
        return self.channel.s3["DataFreshnessInSeconds"] * self.channels.settings.firehose_interval_scale

    def step(self, force: bool = False) -> float:
        """Read what is new, write what is due (`force`: everything). Returns how long to wait."""
        stream = self.reader.stream()
        if stream is None or stream.arn != self.channel.stream_arn or stream.created != self.channel.stream_created:
            if self.kinesis.find(self.channel.stream_name) is None or stream is not None:
                self.channels.fail(self.channel, f"The source stream {self.channel.stream_arn} was deleted.")
                self.stopped.set()
            return IDLE_WAIT_S
        now = time.time()
        for cursor in self.reader.cursors():
            p = self.pending.get(cursor.uid)
            if p is None or p.cursor is not cursor:
                p = self.pending[cursor.uid] = Pending(cursor)
            if p.size >= MAX_OBJECT_BYTES or p.finished:
                continue
            batch = cursor.read(READ_LIMIT, MAX_OBJECT_BYTES - p.size)
            if batch.records and not p.records:
                p.first_read_at = now
            p.records += batch.records
            p.size += sum(len(r.data) for r in batch.records)
            p.finished = batch.finished
        wait = self._wait_s()
        due = [p for p in self.pending.values()
               if p.records and (force or p.size >= MAX_OBJECT_BYTES or now - p.first_read_at >= wait)]
        for p in due:
            self._write(p)
        ended = [p for p in self.pending.values() if p.finished and not p.records]
        for p in due:
            self.reader.advance(p.cursor.shard, p.cursor.position)
        for p in ended:
            self.reader.ended(p.cursor)
            del self.pending[p.cursor.uid]
        if due or ended:
            self.channels.save_checkpoint(self.channel, self.checkpoint)
        waiting = [p.first_read_at + wait - now for p in self.pending.values() if p.records]
        return max(0.01, min(waiting)) if waiting else IDLE_WAIT_S

    def _write(self, p: Pending) -> None:
        channel = self.channel
        storage = channel.s3["StorageConfiguration"]
        record_format = channel.record_config["RecordFormatType"]
        compression = storage["CompressionType"]
        first = p.records[0]
        good, bad = [], []
        for record in p.records:
            problem = channel_objects.record_problem(record_format, record.data)
            if problem:
                bad.append((tuple(record), problem))
            else:
                good.append(record.data)
        if good:
            key = channel_objects.render_key(
                storage.get("OutputKeyTemplate"), channel=channel.name, channel_id=channel.id,
                stream=channel.stream_name, arrival=first.arrival, shard_id=p.cursor.shard_id,
                first_sequence=first.sequence_number, ext=channel_objects.extension(record_format, compression))
            body = channel_objects.frame(record_format, good)
            self.put_object(channel.bucket, key, channel_objects.compress(body, compression))
        if bad:
            key = channel_objects.error_key(channel.s3["DeadLetterQueueS3Configuration"].get("ErrorOutputPrefix"),
                                            channel=channel.name, arrival=first.arrival,
                                            shard_id=p.cursor.shard_id, first_sequence=first.sequence_number)
            self.put_object(channel.error_bucket, key, channel_objects.error_records(bad, p.cursor.shard_id))
        p.records, p.size = [], 0


class ChannelDelivery:
    """Starts a worker for each channel that delivers (ACTIVE or UPDATING) and stops those of
    channels that no longer do (deleted, FAILED)."""

    def __init__(self, kinesis: Any, channels: Channels, put_object: Callable[..., Any]):
        self.kinesis, self.channels, self.put_object = kinesis, channels, put_object
        self.workers: dict[str, ChannelWorker] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kinesim-channels", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stopped.set()
        with self.channels.lock:
            self.channels.changed.notify_all()
        self.thread.join(timeout=10)
        for worker in list(self.workers.values()):
            worker.stop()
        for worker in list(self.workers.values()):
            worker.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.supervise()
            except Exception:  # e.g. the store closed by a shutdown
                if self.stopped.is_set():
                    return
                log.exception("channel supervision failed")
            with self.channels.lock:
                self.channels.changed.wait(SUPERVISE_S)

    def supervise(self) -> None:
        delivering = {c.name: c for c in self.channels.all() if c.status in ("ACTIVE", "UPDATING")}
        for name, worker in list(self.workers.items()):
            if delivering.get(name) is not worker.channel or worker.stopped.is_set():
                worker.stop()
                del self.workers[name]
        for name, channel in delivering.items():
            if name not in self.workers and not self.stopped.is_set():
                worker = self.workers[name] = ChannelWorker(self.kinesis, self.channels, channel, self.put_object)
                worker.start()


def attach(kinesis: Any, bucket_owner: Callable[[str], str | None],
           put_object: Callable[..., Any]) -> ChannelDelivery:
    """Give `kinesis` its channels (`kinesis.channels`, what the channel operations use) and
    return their delivery supervisor, not started. The callables are the object store's."""
    def start_reading(stream_name: str) -> Checkpoint | None:
        stream = kinesis.find(stream_name)
        # "No backfill": records put after the channel is ACTIVE (developer guide).
        return None if stream is None else starting_checkpoint(kinesis, stream, "LATEST")

    kinesis.channels = Channels(kinesis.settings, kinesis.store, bucket_owner, start_reading)
    return ChannelDelivery(kinesis, kinesis.channels, put_object)
