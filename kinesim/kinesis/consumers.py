"""Enhanced fan-out: registered consumers and SubscribeToShard's pushed event stream.

A consumer belongs to one stream and is named by an ARN that carries its creation time
(`arn:aws:kinesis:REGION:ACCOUNT:stream/NAME/consumer/CONSUMER:EPOCH_SECONDS`). Like streams,
its CREATING/DELETING states end lazily: whoever next looks at the stream's consumers applies
them (`settle`).

SubscribeToShard answers with an event stream: an `initial-response` event, then
`SubscribeToShardEvent`s as records arrive (a reader waits on the shard's condition, so a record
is pushed milliseconds after it is stored), an empty one at least every
`settings.subscription_heartbeat_s` seconds, until `settings.subscription_s` (AWS's 5 minutes)
has passed or a closed shard's end is reached (that last event carries `ChildShards`). All
checks run before the stream is returned, so a bad request is an ordinary AWS error response.
"""
from __future__ import annotations

import base64
import binascii
import re
import threading
import time
import weakref
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterator

from ..protocol import eventstream
from ..protocol.errors import in_use, invalid_argument, limit_exceeded, not_found
from . import dryrun, iterators
from .model import Consumer, Shard, Stream
from .reader import Batch, ShardCursor, wake_readers
from .records import record_out

if TYPE_CHECKING:
    from .service import KinesisService

MAX_CONSUMERS = 20            # registered consumers per stream
MAX_CREATING = 5              # consumers in CREATING at once (per stream here; per account on AWS)
EVENT_MAX_RECORDS = 10000
EVENT_MAX_BYTES = 2 << 20     # one second of a shard's 2 MiB/s enhanced fan-out pipe

_CONSUMER_ARN = re.compile(r"arn:aws[^:]*:kinesis:([^:]*):(\d{12}):stream/([a-zA-Z0-9_.-]+)"
                           r"/consumer/([a-zA-Z0-9_.-]+):(\d+)")


# lookup

def consumer_arn(svc: KinesisService, stream: Stream, name: str, created: float) -> str:
    return f"{stream.arn}/consumer/{name}:{int(created)}"


def settle(svc: KinesisService, stream: Stream) -> None:
    """Apply the stream's consumers' due state changes: CREATING → ACTIVE, DELETING → gone."""
    now = time.time()
    if not any(c.ready_at and now >= c.ready_at for c in stream.consumers.values()):
        return
    with stream.lock:
        gone = []
        for consumer in list(stream.consumers.values()):
            if not consumer.ready_at or now < consumer.ready_at:
                continue
            consumer.ready_at = 0.0
            if consumer.status == "DELETING":
                gone.append(consumer)
            else:
                consumer.status = "ACTIVE"
        _save_without(svc, stream, gone)


def _save_without(svc: KinesisService, stream: Stream, gone: list[Consumer]) -> None:
    """Save the stream without these consumers, then drop their resource policies: in that order,
    a kill -9 in between leaves an orphan policy, which loading removes, never a live consumer
    without its policy. Caller holds stream.lock."""
    for consumer in gone:
        if stream.consumers.get(consumer.name) is consumer:
            del stream.consumers[consumer.name]
    svc.save(stream)
    for consumer in gone:
        if svc.policies.pop(consumer.arn, None) is not None:
            svc.store.delete_document("policy", consumer.arn)


def _consumer_not_found(svc: KinesisService, what: str) -> Exception:
    return not_found(f"Consumer {what}, account {svc.account} not found.")


def by_arn(svc: KinesisService, arn: str) -> tuple[Stream, Consumer]:
    """The stream and consumer a consumer ARN names, or AWS's not-found error."""
    m = _CONSUMER_ARN.fullmatch(arn)
    if m is None:
        raise _consumer_not_found(svc, arn)
    region, account, stream_name, name, _ = m.groups()
    stream = svc.find(stream_name) if (region, account) == (svc.settings.region, svc.account) else None
    if stream is None:
        raise _consumer_not_found(svc, arn)
    settle(svc, stream)
    consumer = stream.consumers.get(name)
    if consumer is None or consumer.arn != arn:
        raise _consumer_not_found(svc, arn)
    return stream, consumer


def identified(svc: KinesisService, p: dict[str, Any]) -> tuple[Stream, Consumer]:
    """A consumer named by ConsumerARN, or by StreamARN and ConsumerName."""
    arn, stream_arn, name = p.get("ConsumerARN"), p.get("StreamARN"), p.get("ConsumerName")
    if arn is not None:
        return by_arn(svc, arn)
    if stream_arn is None or name is None:
        raise invalid_argument("ConsumerARN or both ConsumerName and StreamARN are required for this request.")
    stream = svc.stream({"StreamARN": stream_arn})
    settle(svc, stream)
    consumer = stream.consumers.get(name)
    if consumer is None:
        raise _consumer_not_found(svc, name)
    return stream, consumer


def resource(svc: KinesisService, arn: str) -> tuple[Stream, Consumer | None]:
    """What a ResourceARN (TagResource, resource policies, ...) names: a stream or a consumer."""
    if "/consumer/" in arn:
        return by_arn(svc, arn)
    prefix = f"arn:aws:kinesis:{svc.settings.region}:{svc.account}:stream/"
    stream = svc.find(arn[len(prefix):]) if arn.startswith(prefix) else None
    if stream is None:
        raise not_found(f"Stream {arn} under account {svc.account} not found.")
    return stream, None


def describe(consumer: Consumer) -> dict[str, Any]:
    return {"ConsumerName": consumer.name, "ConsumerARN": consumer.arn, "ConsumerStatus": consumer.status,
            "ConsumerCreationTimestamp": consumer.created}


def not_active(svc: KinesisService, stream: Stream, consumer: Consumer) -> Exception:
    return in_use(f"Consumer {consumer.name} with creation timestamp {int(consumer.created)} under stream: "
                  f"{stream.name} , account {svc.account} is not in ACTIVE status.")


# control plane

def register_stream_consumer(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    if stream.status not in ("ACTIVE", "UPDATING"):
        raise in_use(f"Stream {stream.name} under account {svc.account} not ACTIVE, instead in state {stream.status}")
    name = p["ConsumerName"]
    tags = dict(p.get("Tags") or {})
    if tags:
        from .tag_rules import check_new_tags
        check_new_tags({}, tags, f"consumer {name} of stream {stream.name} under account {svc.account}", "consumer")
    settle(svc, stream)
    with stream.lock:
        if name in stream.consumers:
            raise in_use(f"Consumer {name} under stream {stream.name} already exists for account {svc.account}.")
        if len(stream.consumers) + len(svc.queues.on_stream(stream)) >= MAX_CONSUMERS:  # queues share the limit
            raise limit_exceeded(f"Consumer limit of {MAX_CONSUMERS} reached for stream {stream.name} under account "
                                 f"{svc.account}.")
        if sum(c.status == "CREATING" for c in stream.consumers.values()) >= MAX_CREATING:
            raise limit_exceeded(f"Only {MAX_CREATING} consumers can be in CREATING status at the same time.")
        now = time.time()
        consumer = Consumer(name=name, arn=consumer_arn(svc, stream, name, now), created=now, tags=tags)
        delay = svc.settings.update_stream_ms
        if delay > 0:
            consumer.status, consumer.ready_at = "CREATING", now + delay / 1000.0
        else:
            consumer.status = "ACTIVE"
        stream.consumers[name] = consumer
        svc.save(stream)
    return {"Consumer": describe(consumer)}


def deregister_stream_consumer(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = identified(svc, p)
    with stream.lock:
        if consumer.status == "DELETING":
            return {}
        delay = svc.settings.update_stream_ms
        if delay > 0:
            consumer.status, consumer.ready_at = "DELETING", time.time() + delay / 1000.0
        _save_without(svc, stream, [] if delay > 0 else [consumer])
    _wake_subscribers(stream)
    return {}


def describe_stream_consumer(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = identified(svc, p)
    return {"ConsumerDescription": {**describe(consumer), "StreamARN": stream.arn}}


def list_stream_consumers(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream({"StreamARN": p["StreamARN"]})
    created = p.get("StreamCreationTimestamp")
    if created is not None:
        seconds = created.timestamp() if isinstance(created, datetime) else float(created)
        if int(seconds) != int(stream.created):
            raise not_found(f"Stream {stream.name} under account {svc.account} not found.")
    settle(svc, stream)
    consumers = sorted(stream.consumers.values(), key=lambda c: (c.created, c.name))
    token = p.get("NextToken")
    if token is not None:
        after = _decode_token(token, stream)
        consumers = [c for c in consumers if (c.created, c.name) > after]
    limit = p.get("MaxResults", 100)
    page = consumers[:limit]
    out: dict[str, Any] = {"Consumers": [describe(c) for c in page]}
    if len(consumers) > limit:
        out["NextToken"] = _encode_token(stream, page[-1])
    return out


def _encode_token(stream: Stream, last: Consumer) -> str:
    return base64.urlsafe_b64encode(f"consumers|{stream.name}|{last.created!r}|{last.name}".encode()).decode()


def _decode_token(token: str, stream: Stream) -> tuple[float, str]:
    try:
        kind, name, created, last = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        if kind == "consumers" and name == stream.name:
            return float(created), last
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise invalid_argument(f"Invalid NextToken: {token}")


# SubscribeToShard

class _Subscriptions:
    """The (consumer, shard) pairs with a live subscription: AWS allows one at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: dict[tuple[str, int], tuple[object, float]] = {}

    def claim(self, key: tuple[str, int], owner: object, until: float, limit: int, dry_run: bool = False) -> bool:
        with self.lock:
            held = self.active.get(key)
            if held is not None and held[1] > time.monotonic():
                return False
            if held is None and len(self.active) >= limit:
                # Each open subscription holds one of the server's request threads for up to five
                # minutes: past this many, short calls would have none left (a KCL application on
                # a stream of hundreds of shards).
                raise limit_exceeded(
                    f"Too many SubscribeToShard calls open at once: this kinesim server holds at most {limit} "
                    "(start it with a larger --max-subscriptions).")
            if not dry_run:  # a dry run only asks whether a claim would succeed
                self.active[key] = (owner, until)
            return True

    def release(self, key: tuple[str, int], owner: object) -> None:
        with self.lock:
            held = self.active.get(key)
            if held is not None and held[0] is owner:
                del self.active[key]


_REGISTRIES: "weakref.WeakKeyDictionary[KinesisService, _Subscriptions]" = weakref.WeakKeyDictionary()
_REGISTRIES_LOCK = threading.Lock()


def _subscriptions(svc: KinesisService) -> _Subscriptions:
    with _REGISTRIES_LOCK:
        registry = _REGISTRIES.get(svc)
        if registry is None:
            registry = _REGISTRIES[svc] = _Subscriptions()
        return registry


def _wake_subscribers(stream: Stream) -> None:
    wake_readers(stream)


def lifetime(svc: KinesisService) -> float:
    return svc.settings.subscription_s


def heartbeat(svc: KinesisService) -> float:
    return svc.settings.subscription_heartbeat_s


class Subscription:
    """The chunks of one SubscribeToShard response: an iterable the edge streams to the client.

    The (consumer, shard) claim is released when the events end, when the edge closes the
    iterable (client gone), or at the latest when the subscription's lifetime has passed.
    """

    def __init__(self, svc: KinesisService, stream: Stream, shard: Shard, consumer: Consumer, index: int,
                 dry_run: bool = False):
        self.svc, self.stream, self.shard, self.consumer = svc, stream, shard, consumer
        self.cursor = ShardCursor(svc, stream, shard, index)
        self.key = (consumer.arn, shard.uid)
        self.lifetime = lifetime(svc)
        self.stopped = threading.Event()
        if not _subscriptions(svc).claim(self.key, self, time.monotonic() + self.lifetime + heartbeat(svc),
                                         svc.settings.max_subscriptions, dry_run):
            raise in_use(f"Another active subscription exists for this consumer: {svc.account}:{stream.name}:"
                         f"{shard.shard_id}:{consumer.name}")
        if dry_run:
            raise dryrun.answer()
        self._events = self._generate()

    def __iter__(self) -> "Subscription":
        return self

    def __next__(self) -> tuple[str, str, dict[str, Any]]:
        return next(self._events)

    def close(self) -> None:
        self.stopped.set()
        _subscriptions(self.svc).release(self.key, self)
        self.cursor.wake()
        try:
            self._events.close()
        except ValueError:  # being iterated by another thread: it sees `stopped` and ends
            pass

    # the events

    def _generate(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        try:
            yield "event", "initial-response", {}
            yield from self._records()
        finally:
            _subscriptions(self.svc).release(self.key, self)

    def _records(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        cursor = self.cursor
        start = time.monotonic()
        deadline = start + self.lifetime
        beat = heartbeat(self.svc)
        last_sent = start
        continuation = cursor.sequence_before()
        while not self.stopped.is_set():
            gone = self._gone_reason()
            if gone is not None:
                yield "exception", "ResourceNotFoundException", {"message": gone}
                return
            batch = cursor.read(EVENT_MAX_RECORDS, EVENT_MAX_BYTES)
            now = time.monotonic()
            if batch.records:
                continuation = batch.records[-1].sequence_number
            if batch.records or batch.finished or now - last_sent >= beat:
                yield self._event(batch, continuation)
                last_sent = now
                if batch.finished:
                    return
            if now >= deadline:
                return
            if batch.records and not batch.at_tip:
                continue
            # Also woken by close(), deregistration and stream deletion.
            cursor.wait(min(beat - (now - last_sent), deadline - now), until=self._interrupted)

    def _interrupted(self) -> bool:
        return self.stopped.is_set() or self._gone_reason() is not None

    def _gone_reason(self) -> str | None:
        """Why the subscription cannot go on: its stream or its consumer went away."""
        svc, stream, consumer = self.svc, self.stream, self.consumer
        gone = self.cursor.gone()
        if gone is not None:
            return gone
        if stream.consumers.get(consumer.name) is not consumer or consumer.status == "DELETING":
            return f"Consumer {consumer.arn}, account {svc.account} not found."
        return None

    def _event(self, batch: Batch, continuation: str) -> tuple[str, str, dict]:
        body: dict[str, Any] = {"Records": [record_out(r, self.stream) for r in batch.records],
                                "ContinuationSequenceNumber": None if batch.finished else continuation,
                                "MillisBehindLatest": batch.millis_behind}
        if batch.finished:
            body["ChildShards"] = self.cursor.child_shards()
        return "event", "SubscribeToShardEvent", body


def subscribe_to_shard(svc: KinesisService, p: dict[str, Any]):
    stream, consumer = by_arn(svc, p["ConsumerARN"])
    if consumer.status != "ACTIVE":
        raise not_active(svc, stream, consumer)
    shard = iterators.find_shard(svc, stream, p["ShardId"])
    position = p["StartingPosition"]
    timestamp = position.get("Timestamp")
    if isinstance(timestamp, datetime):
        timestamp = timestamp.timestamp()
    index = iterators.start_index(svc, stream, shard, position["Type"], position.get("SequenceNumber"), timestamp)
    return eventstream.EventStream(Subscription(svc, stream, shard, consumer, index,
                                                    dry_run=bool(p.get("DryRun"))))
