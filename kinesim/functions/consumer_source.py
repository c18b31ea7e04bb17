"""An event source mapping's shard read through an enhanced fan-out consumer.

A mapping whose EventSourceArn is a consumer ARN (`arn:aws:kinesis:R:A:stream/S/consumer/C:TS`)
holds, per shard, the consumer's SubscribeToShard subscription — kinesis.consumers.Subscription,
the very object that serves SubscribeToShard, iterated in-process instead of over HTTP — and
records are pushed to the shard's lanes as the subscription yields them. What the lanes do with
them (batches, retries, bisect, checkpoints, parents before children) is the polled mappings' code.

As on AWS:
- the subscription claims the (consumer, shard) pair: while the mapping reads a shard, another
  SubscribeToShard on that consumer and shard gets ResourceInUseException, and the mapping waits
  (LastProcessingResult says so) while somebody else holds it;
- a subscription ends after `--subscription-lifetime` (AWS's 5 minutes) and the Lambda service
  subscribes again from where the last one stopped (`renewals` counts them);
- the end of a closed shard arrives as the event with `ChildShards`;
- the consumer being deregistered (or the stream deleted) ends the subscription with
  ResourceNotFoundException: the lanes stop, and the mapping reports it (mapping_poller.py).

A subscription reads ahead of the lanes at most MAX_BUFFERED_RECORDS / MAX_BUFFERED_BYTES past the
slowest lane's checkpoint (HTTP/2 flow control's part on AWS); what every lane checkpointed past
is dropped.
"""
from __future__ import annotations

import bisect
import logging
import threading
from typing import Any, Callable

from ..kinesis import consumers, sequence
from ..kinesis.model import Shard
from ..kinesis.reader import Batch, Record
from ..kinesis.service import KinesisService
from ..protocol.errors import AwsError

log = logging.getLogger("kinesim.pollers")

MAX_BUFFERED_RECORDS = 20000
MAX_BUFFERED_BYTES = 32 << 20
RETRY_S = 1.0                 # after a refused subscription (in use by another subscriber, too many)
CREATING_WAIT_S = 0.05        # while the consumer is still CREATING
FLOW_WAIT_S = 0.2             # re-check of the lanes' checkpoints while the buffer is full


def is_consumer_arn(arn: str) -> bool:
    return "/consumer/" in arn


def row_of(record: dict[str, Any]) -> Record:
    """A SubscribeToShardEvent record as the reader's Record: kinesim's sequence numbers carry the
    shard's record index (kinesis/sequence.py), which is what lanes checkpoint."""
    seq = record["SequenceNumber"]
    parsed = sequence.parse(seq)
    if parsed is None:
        raise ValueError(f"unreadable sequence number {seq}")
    return Record(parsed.record_index, seq, record.get("PartitionKey", ""), record["Data"],
                  record["ApproximateArrivalTimestamp"])


class ConsumerSource:
    """One shard of a mapping, pushed by the consumer's subscription (see the module's doc)."""

    def __init__(self, svc: KinesisService, consumer_arn: str, shard: Shard, start_index: int,
                 low_water: Callable[[], int], stopped: threading.Event, report: Callable[[str], None]):
        self.svc, self.consumer_arn, self.shard = svc, consumer_arn, shard
        self.low_water = low_water   # the lowest index a lane may still read (min of checkpoints)
        self.stopped = stopped       # the poller's
        self.report = report         # a problem for LastProcessingResult
        self.cond = threading.Condition()
        self.listeners: set[Callable[[], None]] = set()  # lanes waiting for records (guarded by cond)
        self.rows: list[Record] = []
        self.keys: list[int] = []    # the rows' indexes, for bisect
        self.bytes = 0
        self.position = start_index  # the index after the last pushed record
        self.ended = False           # the event with ChildShards arrived
        self.gone_reason: str | None = None
        self.renewals = 0
        self.subscription: consumers.Subscription | None = None
        self.thread = threading.Thread(target=self.run, daemon=True,
                                       name=f"efo-{consumer_arn.rsplit('/', 1)[-1][:12]}-{shard.shard_id[-4:]}")

    # the lanes' side

    def start(self) -> None:
        self.thread.start()

    def read(self, index: int, want: int, max_bytes: int) -> Batch:
        with self.cond:
            first = bisect.bisect_left(self.keys, index)
            rows, size = [], 0
            for row in self.rows[first:first + want]:
                size += len(row[3])
                if size > max_bytes and rows:
                    break
                rows.append(row)
            next_index = rows[-1][0] + 1 if rows else max(index, self.position)
            at_tip = next_index >= self.position
            return Batch(rows, next_index, at_tip, self.ended and at_tip)

    def listen(self, index: int, callback: Callable[[], None]) -> bool:
        with self.cond:
            if self.position > index or self.ended or self.gone_reason is not None or self.stopped.is_set():
                return False
            self.listeners.add(callback)
            return True

    def _notify(self) -> None:
        """Records were pushed or the subscription ended: the pump's flow wait and the lanes look
        again. Caller holds cond; the lanes' callbacks only queue them."""
        self.cond.notify_all()
        fired, self.listeners = self.listeners, set()
        for callback in fired:
            callback()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()
        subscription = self.subscription
        if subscription is not None and self.stopped.is_set():
            subscription.close()

    def advanced(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def gone(self) -> str | None:
        return self.gone_reason

    def close(self) -> None:
        self.wake()
        subscription = self.subscription
        if subscription is not None:
            subscription.close()

    # the subscription's side

    def run(self) -> None:
        while not self.stopped.is_set() and not self.ended and self.gone_reason is None:
            subscription, retry = self._subscribe()
            if subscription is None:
                self.stopped.wait(retry)
                continue
            try:
                self._pump(subscription)
            except Exception:  # not the records' fault: subscribe again from the last pushed one
                log.exception("consumer %s: subscription to %s failed", self.consumer_arn, self.shard.shard_id)
                self.stopped.wait(RETRY_S)
            finally:
                subscription.close()
                self.subscription = None
            if not self.ended and self.gone_reason is None:
                self.renewals += 1  # the subscription's lifetime is over: renewed, as Lambda does
        with self.cond:
            self._notify()

    def _subscribe(self) -> tuple[consumers.Subscription | None, float]:
        """A new subscription from `position`, or None and how long to wait before trying again."""
        try:
            stream, consumer = consumers.by_arn(self.svc, self.consumer_arn)
            if stream.shard(self.shard.shard_id) is not self.shard:
                raise AwsError("ResourceNotFoundException", f"Shard {self.shard.shard_id} not found.")
            if consumer.status != "ACTIVE":
                return None, CREATING_WAIT_S
            subscription = consumers.Subscription(self.svc, stream, self.shard, consumer, self.position)
        except AwsError as err:
            if err.code == "ResourceNotFoundException":
                self._end(err.message or err.code)
            else:  # in use by another subscriber, too many subscriptions: try again
                self.report(f"PROBLEM: {err.code}: {err.message}")
            return None, RETRY_S
        self.subscription = subscription
        if self.stopped.is_set():
            subscription.close()
            return None, 0.0
        return subscription, 0.0

    def _pump(self, subscription: consumers.Subscription) -> None:
        for kind, name, body in subscription:
            if self.stopped.is_set():
                return
            if kind == "exception":
                if name == "ResourceNotFoundException":
                    self._end(body.get("message") or name)
                else:
                    self.report(f"PROBLEM: {name}: {body.get('message')}")
                return
            if name != "SubscribeToShardEvent":
                continue
            rows = [row_of(r) for r in body["Records"]]
            with self.cond:
                while not self._room() and not self.stopped.is_set():
                    self.cond.wait(FLOW_WAIT_S)
                for row in rows:
                    if row[0] >= self.position:
                        self.rows.append(row)
                        self.keys.append(row[0])
                        self.bytes += len(row[3])
                        self.position = row[0] + 1
                if "ChildShards" in body:
                    self.ended = True
                self._notify()
            if self.ended:
                return

    def _room(self) -> bool:
        """Drop what every lane is past; whether there is room for more. Caller holds cond."""
        low = bisect.bisect_left(self.keys, self.low_water())
        if low:
            self.bytes -= sum(len(r[3]) for r in self.rows[:low])
            del self.rows[:low], self.keys[:low]
        return len(self.rows) < MAX_BUFFERED_RECORDS and self.bytes < MAX_BUFFERED_BYTES

    def _end(self, reason: str) -> None:
        with self.cond:
            self.gone_reason = reason
            self._notify()
