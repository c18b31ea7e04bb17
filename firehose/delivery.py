"""Delivery: one worker thread per delivery stream moves buffered records into S3 objects.

The loop (`Worker.run`): a buffer is flushed when it holds BufferingHints.SizeInMBs, or when its
oldest record has waited IntervalInSeconds (0: at once), whichever comes first; intervals and
retry durations are multiplied by the server's `firehose_interval_scale` (tests use 0.01).

A flush (`Worker.flush`) turns a batch of records into objects (`build_objects`):

1. processing (ProcessingConfiguration, `processing`), in AWS's order: RecordDeAggregation, the Lambda
   processor (`transform`), MetadataExtraction, AppendDelimiterToRecord (`partitioning`);
   records that fail a step go to the error output (processing-failed);
2. dynamic partitioning groups records by their partition keys, one object per group;
3. data format conversion (`conversion`) or compression (`compression`) makes each body;
4. keys come from `keys.object_key` (Prefix, or ErrorOutputPrefix for failed records);
5. with S3BackupMode Enabled, the source records, untransformed, also go to the backup bucket.

Then every object is written; a write that fails is retried every 5 s (scaled) for the retry
duration (DynamicPartitioningConfiguration.RetryOptions.DurationInSeconds, 300 by default; AWS's
24 hours for S3 without dynamic partitioning), after which the object's records go to the error
output (error-output-type `s3-failed`, a kinesim name: AWS discards them after 24 hours); so do
records whose partition keys make a key the object store refuses ("../x": see `keys.check_storable`
for the prefixes refused at create time). An error output that cannot be written either (its
bucket is gone) is retried for the same duration; then its records are dropped, logged and counted
(`DroppedRecords`), as AWS loses data it could not deliver within its retry time: a delivery
stream is never held forever by records it cannot write. Only after all of a batch's objects are
written (or dropped) does the source forget it (`commit`): the DirectPut buffer deletes the rows, a
Kinesis source moves its checkpoint.

Metrics (what CloudWatch would show: DeliveryToS3.Records/Bytes/Success/DataFreshness, ...) are
kept per worker (`activity`) and served by the edge at /_kinesim/firehose/<name>/metrics; the web
console reads them too, with the buffer's state (`Worker.buffer_state`), and may ask a worker to
deliver what is buffered at once (`Worker.request_flush`: the same flush, as if the interval had
elapsed).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from . import compression, keys, partitioning
from .activity import Activity, tally
from .buffers import Buffer, Record
from .jq_runner import JqPool, JqUnavailable
from .processing import MiB, Failures, FlushConfig, Item, epoch_ms, error_document, process
from .source import KinesisSource
from .writer import DeliveryError, S3Object, Writer

log = logging.getLogger("kinesim.firehose")

RETRY_EVERY_S = 5.0              # AWS retries a failed S3 delivery every 5 seconds
S3_RETRY_S = 24 * 3600           # ... for up to 24 hours (without dynamic partitioning)
IDLE_WAIT_S = 1.0                # how long an empty worker sleeps between looks (appends wake it)


# ------------------------------------------------------------------ records -> objects

def _when(records: list[Record], dest: dict[str, Any]) -> datetime:
    when = datetime.fromtimestamp(min(r.arrival for r in records), timezone.utc)
    zone = dest.get("CustomTimeZone")
    return when.astimezone(ZoneInfo(zone)) if zone else when


def error_objects(cfg: FlushConfig, failures: list[tuple[Record, bytes]], output_type: str) -> list[S3Object]:
    """Error output: failed records (with their error documents) under ErrorOutputPrefix."""
    if not failures:
        return []
    dest = cfg.dest
    records = [r for r, _ in failures]
    key = keys.object_key(keys.error_prefix_template(dest.get("Prefix"), dest.get("ErrorOutputPrefix")),
                          cfg.name, cfg.version, _when(records, dest), error_output_type=output_type)
    docs = [doc for _, doc in failures]
    return [S3Object(dest["BucketARN"], key, b"".join(docs), records, kind="error", record_count=len(records),
                     output_type=output_type, errors=tally(docs))]


def _body(dest: dict[str, Any], datas: list[bytes]) -> tuple[bytes, str | None, str]:
    """(object body, Content-Encoding, key extension) for records' bytes."""
    fmt = dest.get("CompressionFormat", "UNCOMPRESSED")
    return compression.compress(b"".join(datas), fmt), compression.content_encoding(fmt), compression.extension(fmt)


def _partition(cfg: FlushConfig, items: list[Item], failures: Failures) -> list[tuple[str | None, list[Item]]]:
    """Groups of items that share an evaluated prefix (one group without dynamic partitioning)."""
    dest = cfg.dest
    if not (dest.get("DynamicPartitioningConfiguration") or {}).get("Enabled"):
        return [(None, items)] if items else []
    groups: dict[str, list[Item]] = {}
    for item in items:
        try:
            # The timestamp part is evaluated per object below; only the keys decide the group.
            prefix = keys.evaluate_prefix(dest.get("Prefix"), datetime(2000, 1, 1, tzinfo=timezone.utc),
                                          partition_keys=item.keys, random=lambda: "")
        except keys.PrefixEvaluationError as err:
            failures.setdefault(partitioning.ERROR_OUTPUT_TYPE, []).append((item.record, error_document(
                item.record, "DynamicPartitioning.PartitionKeyMissing", str(err), 1)))
            continue
        groups.setdefault(prefix, []).append(item)
    return list(groups.items())


def data_objects(cfg: FlushConfig, items: list[Item], failures: Failures) -> list[S3Object]:
    """The destination objects: one per partition, its body converted or compressed."""
    dest = cfg.dest
    conversion_cfg = dest.get("DataFormatConversionConfiguration") or {}
    out = []
    for _, group in _partition(cfg, items, failures):
        records = [i.record for i in group]
        if conversion_cfg.get("Enabled"):
            from . import conversion  # pyarrow: loaded by the first delivery stream that converts
            body, errors = conversion.convert([i.data for i in group], conversion_cfg)
            by_data = {}
            for i in group:
                by_data.setdefault(i.data, i)
            for data, message in errors:
                item = by_data[data]
                failures.setdefault(conversion.ERROR_OUTPUT_TYPE, []).append((item.record, conversion.error_document(
                    data, message, arrival_ms=epoch_ms(item.record.arrival), attempt_ending_ms=epoch_ms(time.time()),
                    schema_configuration=conversion_cfg.get("SchemaConfiguration"),
                    sequence_number=(item.record.kinesis or {}).get("sequenceNumber"))))
            if body is None:
                continue
            failed = {d for d, _ in errors}
            records = [i.record for i in group if i.data not in failed]
            encoding, ext = None, conversion.extension(conversion_cfg)
        else:
            body, encoding, ext = _body(dest, [i.data for i in group])
        key = keys.object_key(dest.get("Prefix"), cfg.name, cfg.version, _when(records, dest),
                              partition_keys=group[0].keys, extension=dest.get("FileExtension") or ext)
        out.append(S3Object(dest["BucketARN"], key, body, records, encoding, record_count=len(records)))
    return out


def backup_objects(cfg: FlushConfig, records: list[Record]) -> list[S3Object]:
    """S3BackupMode Enabled: the source records as they arrived, to the backup bucket/prefix."""
    dest = cfg.dest
    if dest.get("S3BackupMode") != "Enabled" or "S3BackupDescription" not in dest:
        return []
    backup = dest["S3BackupDescription"]
    body, encoding, ext = _body(backup, [r.data for r in records])
    key = keys.object_key(backup.get("Prefix"), cfg.name, cfg.version, _when(records, dest), extension=ext)
    return [S3Object(backup["BucketARN"], key, body, records, encoding, kind="backup", record_count=len(records))]


def build_objects(cfg: FlushConfig, records: list[Record], invoke: Any, region: str, jq: JqPool) -> list[S3Object]:
    """Every object a batch becomes: data (per partition), error output (per error type), backup."""
    failures: Failures = {}
    items = process(cfg, records, invoke, region, jq, failures)
    objects = data_objects(cfg, items, failures)
    for output_type, failed in failures.items():
        objects += error_objects(cfg, failed, output_type)
    return objects + backup_objects(cfg, records)


# ------------------------------------------------------------------ the worker

class Worker(threading.Thread):
    def __init__(self, svc: Any, ds: Any, source: Buffer | KinesisSource, stopped: threading.Event,
                 activity: Activity):
        super().__init__(name=f"kinesim-firehose-{ds.name}", daemon=True)
        self.svc, self.ds, self.source, self.stopped = svc, ds, source, stopped
        self.writer = Writer(svc.settings, svc.objects)
        self.activity = activity
        self.scale = svc.settings.firehose_interval_scale
        # Flushes asked for (the console's "flush now"), numbered; served in order. Serving one
        # flushes the records pending when the worker saw it (`_owed`), as if the interval had
        # elapsed for them.
        self._flushes = threading.Condition()
        self._flush_asked = self._flush_seen = self._flush_served = 0
        self._owed = 0

    def flush_config(self) -> FlushConfig:
        ds = self.ds
        with ds.lock:
            return FlushConfig(ds.name, ds.arn, ds.version, json.loads(json.dumps(ds.destination)),
                           ds.source["KinesisStreamARN"] if ds.source else None)

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.step()
            except JqUnavailable as err:  # no jq worker (the server is stopping): the batch waits
                if not self.stopped.is_set():
                    self.note_error(f"InternalError: {err}")
                    self.stopped.wait(RETRY_EVERY_S * self.scale)
            except Exception as err:  # a bug in one flush must not end delivery for good
                log.exception("firehose %s: delivery failed", self.ds.name)
                self.note_error(f"InternalError: {err}")
                self.stopped.wait(RETRY_EVERY_S * self.scale)
        with self._flushes:
            self._flushes.notify_all()  # nobody waits for a flush that will not come

    def step(self) -> None:
        cfg = self.flush_config()
        hints = cfg.dest["BufferingHints"]
        size = hints["SizeInMBs"] * MiB
        interval = hints["IntervalInSeconds"] * self.scale
        self.source.fill(size)
        with self._flushes:  # a flush asked for is owed every record appended before it
            count, pending_bytes, oldest = self.source.stats()
            if self._flush_asked > self._flush_seen:
                self._flush_seen, self._owed = self._flush_asked, count
        if self._owed <= 0:
            self._served()
        if not count or oldest is None:
            self.source.wait(IDLE_WAIT_S)
            return
        due = oldest + interval - time.time()
        if self._owed <= 0 and pending_bytes < size and due > 0:
            # At most a second: a flush asked for just before this wait (its wake missed) starts soon.
            self.source.wait(min(due, IDLE_WAIT_S))
            return
        batch = self.source.take(size)
        if batch and self.flush(cfg, batch):
            self.source.commit(batch)
            self._owed -= len(batch)

    def _served(self) -> None:
        with self._flushes:
            if self._flush_served < self._flush_seen:
                self._flush_served = self._flush_seen
                self._flushes.notify_all()

    def request_flush(self) -> int:
        """Ask for what is buffered now to be delivered at once; returns the request's number."""
        with self._flushes:
            self._flush_asked += 1
            number = self._flush_asked
        self.source.wake()
        return number

    def wait_flushed(self, number: int, timeout: float) -> bool:
        """Whether flush request `number` was served (its records written) within `timeout` s."""
        with self._flushes:
            return self._flushes.wait_for(lambda: self._flush_served >= number or self.stopped.is_set(),
                                          timeout) and self._flush_served >= number

    def buffer_state(self) -> dict[str, Any]:
        """What waits to be delivered, against the buffering hints, and when it will be: now when
        the size hint is reached, else when the oldest record has waited the interval."""
        with self.ds.lock:
            hints = dict(self.ds.destination["BufferingHints"])
        count, size, oldest = self.source.stats()
        interval = hints["IntervalInSeconds"] * self.scale
        next_flush = None
        if count and oldest is not None:
            next_flush = time.time() if size >= hints["SizeInMBs"] * MiB else oldest + interval
        with self._flushes:
            flushing = self._flush_served < self._flush_asked
        return {"records": count, "bytes": size, "oldest": oldest, "size_mib": hints["SizeInMBs"],
                "interval_s": hints["IntervalInSeconds"], "scaled_interval_s": interval,
                "next_flush": next_flush, "flush_requested": flushing}

    def flush(self, cfg: FlushConfig, batch: list[Record]) -> bool:
        """Write every object of `batch`, each to its destination, else to the error output, else
        nowhere (see the module docstring); False only when stopped before that was decided."""
        pending = build_objects(cfg, batch, self.svc.invoke, self.svc.settings.region, self.svc.jq)
        dynamic = bool((cfg.dest.get("DynamicPartitioningConfiguration") or {}).get("Enabled"))
        retry_s = (cfg.dest["DynamicPartitioningConfiguration"]["RetryOptions"]["DurationInSeconds"]
                   if dynamic else S3_RETRY_S) * self.scale
        failed = self.write(pending, retry_s)
        if failed is None:
            return False
        # Past the retry duration: what never landed goes to the error output (once).
        pending = []
        for obj, err, attempts in failed:
            if obj.kind == "error":
                pending.append(obj)
            else:
                docs = [(r, error_document(r, err.code, err.message, attempts)) for r in obj.records]
                pending += error_objects(cfg, docs, keys.S3_FAILED)
        failed = self.write(pending, retry_s)
        if failed is None:
            return False
        for obj, err, _ in failed:
            self.activity.dropped(obj)
            log.error("firehose %s: %d record(s) dropped: neither the destination nor the error output took "
                      "them within the retry duration (last error %s)", self.ds.name, obj.record_count, err)
        return True

    def write(self, objects: list[S3Object],
              retry_s: float) -> list[tuple[S3Object, DeliveryError, int]] | None:
        """Write `objects`, retrying failures every 5 s (scaled) for `retry_s`: those that were never
        written, with their last error and the attempts made; None if stopped meanwhile."""
        started, attempts = time.monotonic(), 0
        while objects:
            attempts += 1
            failed: list[tuple[S3Object, DeliveryError, int]] = []
            for obj in objects:
                try:
                    self.writer.put(obj)
                    self.activity.written(obj)
                except DeliveryError as err:
                    self.note_error(str(err), loud=attempts == 1)
                    failed.append((obj, err, attempts))
            if not failed or time.monotonic() - started >= retry_s:
                return failed
            objects = [obj for obj, _, _ in failed]
            if self.stopped.wait(RETRY_EVERY_S * self.scale):
                return None
        return []

    def note_error(self, text: str, loud: bool = True) -> None:
        self.activity.failed_attempt(text)
        # The first failure of a batch is worth a warning; its retries are not.
        log.log(logging.WARNING if loud else logging.DEBUG, "firehose %s: %s (retrying)", self.ds.name, text)

    def snapshot(self) -> dict[str, Any]:
        return self.activity.metrics(self.ds.name, *self.source.stats())


class Deliveries:
    """The workers of a FirehoseService, by delivery stream name."""

    def __init__(self, svc: Any):
        self.svc = svc
        self.lock = threading.Lock()
        self.workers: dict[str, Worker] = {}
        self.buffers: dict[str, Buffer] = {}

    def start(self, ds: Any) -> None:
        with self.lock:
            if ds.name in self.workers:
                return
            stopped = threading.Event()
            series = self.svc.rates[ds.name]
            if ds.type == "KinesisStreamAsSource":
                source: Buffer | KinesisSource = KinesisSource(self.svc, ds, stopped, series)
            else:
                source = self.buffers[ds.name] = Buffer(self.svc.store, ds.name, series)
            worker = self.workers[ds.name] = Worker(self.svc, ds, source, stopped, Activity(series))
        worker.start()

    def buffer(self, name: str) -> Buffer:
        return self.buffers[name]

    def state(self, name: str) -> dict[str, Any] | None:
        """What a delivery stream's page shows (None without a worker): the buffer against its
        hints, the delivery metrics, the objects written lately and the failures by reason."""
        worker = self.workers.get(name)
        if worker is None:
            return None
        return {"buffer": worker.buffer_state(), "metrics": worker.snapshot(),
                "objects": worker.activity.recent_objects(), "failures": worker.activity.failure_tallies()}

    def flush_now(self, name: str, timeout: float) -> dict[str, Any] | None:
        """Deliver what is buffered now, as if the interval had elapsed, through the worker's own
        flush; waits up to `timeout` s for it. Whether it was done, and the objects written since
        it was asked for (None without a worker)."""
        worker = self.workers.get(name)
        if worker is None:
            return None
        asked = time.time()
        done = worker.wait_flushed(worker.request_flush(), timeout)
        return {"done": done, "objects": [o for o in worker.activity.recent_objects() if o["time"] >= asked]}

    def wake(self, name: str) -> None:
        worker = self.workers.get(name)
        if worker is not None:
            worker.source.wake()

    def metrics(self, name: str) -> dict[str, Any] | None:
        worker = self.workers.get(name)
        return worker.snapshot() if worker is not None else None

    def stop(self, name: str) -> None:
        with self.lock:
            worker = self.workers.pop(name, None)
            self.buffers.pop(name, None)
        if worker is None:
            return
        worker.stopped.set()
        worker.source.wake()
        if worker is not threading.current_thread():
            worker.join(30)

    def stop_all(self) -> None:
        for name in list(self.workers):
            self.stop(name)
