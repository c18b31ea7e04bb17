"""The Kinesis service: stream lookup, lazy state transitions, persistence.

Each operation is a plain function `(service, params) -> response dict` living in the module of
its concern (streams, records, iterators, ...), named in the table of `operations.py`.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ..config import Settings
from ..protocol.errors import AwsError, in_use, invalid_argument, not_found
from ..protocol.operations import JsonService
from ..protocol.validation import ModelValidator
from ..long_polls import LongPolls
from ..rates import SeriesMap
from ..store import Store
from .model import Shard, Stream
from .operations import OPERATIONS
from .queues import QueueRegistry
from .resharding import apply_pending
from .throughput import Meter
from .uids import ShardUids

log = logging.getLogger("kinesim.kinesis")


class KinesisService(JsonService):
    operations = OPERATIONS
    target_prefix = "Kinesis_20131202"

    def __init__(self, settings: Settings, store: Store, long_polls: LongPolls | None = None,
                 uids: ShardUids | None = None):
        self.settings = settings
        self.store = store
        # Shared with SQS by the server (one cap for every long poll); a service of its own in tests.
        self.long_polls = long_polls or LongPolls(settings.max_long_polls)
        self.validator = ModelValidator("kinesis")
        # Lock order: a stream's `lock` first, then `self.lock`, then `_uid_lock`, then the uid
        # counter's; never the other way round. Resharding holds its stream's lock and takes
        # `self.lock` to check the account's shard count; deletion (`drop`) does the same. So whoever
        # holds `self.lock` (CreateStream) must not wait for a stream's lock.
        self.lock = threading.RLock()  # the streams map: creation/deletion, account-wide shard counts
        self._uid_lock = threading.Lock()
        self._closed = False  # no uid is given out once closed (`close`)
        if uids is None:  # a service of its own (tests): the server shares one among its scopes
            uids = ShardUids(store)
            uids.finish_interrupted_drops()
        self.uids = uids
        self._timers: list[threading.Timer] = []
        self.streams: dict[str, Stream] = {}
        for doc in store.documents("stream").values():
            stream = Stream.from_doc(doc)
            for shard in stream.shards:
                shard.next_index = max(shard.next_index, (store.last_index(shard.uid) or 0) + 1)
            self.streams[stream.name] = stream
        self.iterator_key: bytes = uids.iterator_key
        self.account_settings: dict[str, Any] = store.document("meta", "account-settings") or {}
        self.policies: dict[str, str] = store.documents("policy")
        self.meter = Meter()
        # Records and bytes of data put per second, per shard uid (the web console's write rates):
        # one `add` per shard per put request, forgotten with the stream (`drop`).
        self.write_rates = SeriesMap(("records", "bytes"))
        self._forget_orphan_policies()
        self.queues = QueueRegistry(self)  # Kinesis queues and their delivery state (queues.py)
        # Kinesis channels: given by channel_delivery.attach, with the object store's calls the edge
        # passes in (a server without an object store has none).
        self.channels: Any = None
        for stream in self.streams.values():
            self.settle_when_due(stream)  # a reshard acknowledged before a restart still happens

    # identity

    @property
    def account(self) -> str:
        return self.settings.account_id

    def stream_arn(self, name: str) -> str:
        return f"arn:aws:kinesis:{self.settings.region}:{self.account}:stream/{name}"

    def name_from_arn(self, arn: str) -> str:
        prefix = f"arn:aws:kinesis:{self.settings.region}:{self.account}:stream/"
        if not arn.startswith(prefix):
            # Another region's or account's stream: AWS answers as for a stream that does not exist.
            raise not_found(f"Stream {arn.rsplit('/', 1)[-1]} under account {self.account} not found.")
        return arn[len(prefix):].split("/", 1)[0]

    def stream_name(self, params: dict[str, Any]) -> str:
        name, arn = params.get("StreamName"), params.get("StreamARN")
        if arn is not None:
            from_arn = self.name_from_arn(arn)
            if name is not None and name != from_arn:
                raise invalid_argument("StreamARN and StreamName both specified but do not match.")
            return from_arn
        if name is None:
            raise invalid_argument("Either StreamName or StreamARN should be provided.")
        return name

    # lookup with lazy state transitions

    def find(self, name: str) -> Stream | None:
        stream = self.streams.get(name)
        if stream is not None and stream.ready_at and time.time() >= stream.ready_at:
            self.settle(stream)
            stream = self.streams.get(name)
        return stream

    def stream(self, params: dict[str, Any]) -> Stream:
        name = self.stream_name(params)
        stream = self.find(name)
        if stream is None:
            raise not_found(f"Stream {name} under account {self.account} not found.")
        return stream

    def active_stream(self, params: dict[str, Any]) -> Stream:
        """A stream that accepts control-plane changes (ACTIVE), else AWS's ResourceInUseException."""
        return self.check_active(self.stream(params))

    def check_active(self, stream: Stream) -> Stream:
        """`stream` if it is ACTIVE and still the stream of its name, else AWS's error.

        Settles only this stream, never looks its name up again: a caller holding the stream's
        lock and `self.lock` would otherwise wait for the lock of a re-created namesake.
        """
        self.settle(stream)
        if self.streams.get(stream.name) is not stream:
            raise not_found(f"Stream {stream.name} under account {self.account} not found.")
        if stream.status != "ACTIVE":
            raise in_use(f"Stream {stream.name} under account {self.account} not ACTIVE, instead in state {stream.status}")
        return stream

    def retention_horizon(self, stream: Stream) -> float:
        """Epoch seconds before which the stream's records have expired (and its closed shards
        are no longer listed). An hour lasts `settings.retention_hour_s`: 3600 unless a test
        shortens it."""
        return time.time() - stream.retention_hours * self.settings.retention_hour_s

    def visible_shards(self, stream: Stream) -> list[Shard]:
        """Shards AWS still lists: open ones, and closed ones until retention has passed since
        closing. None before the stream first turned ACTIVE, even once it is DELETING (kinesalite
        keeps `Shards: []` until then). While UPDATING, the layout before the pending reshard."""
        if not stream.activated:
            return []
        horizon = self.retention_horizon(stream)
        return [s for s in stream.shards if s.closed_at is None or s.closed_at >= horizon]

    def all_streams(self) -> list[Stream]:
        for name in list(self.streams):
            self.find(name)
        return list(self.streams.values())

    def settle(self, stream: Stream) -> None:
        """Apply the stream's due state change: CREATING/UPDATING -> ACTIVE, DELETING -> gone."""
        wake = None
        with stream.lock:
            if not stream.ready_at or time.time() < stream.ready_at:
                return
            stream.ready_at = 0.0
            if stream.status == "DELETING":
                self.drop(stream)
                return
            wake = self._activate(stream)
            self.save(stream)
        if wake is not None:
            wake()

    def begin(self, stream: Stream, status: str, delay_ms: int) -> Callable[[], None] | None:
        """Enter CREATING/UPDATING/DELETING for `delay_ms` (0: the change is immediate). If the
        stream became ACTIVE at once and that closed shards, returns what wakes their readers (to
        call after releasing the stream's lock)."""
        if delay_ms <= 0:
            if status == "DELETING":
                stream.status, stream.ready_at = "DELETING", time.time()
                return None
            return self._activate(stream)
        stream.status, stream.ready_at = status, time.time() + delay_ms / 1000.0
        return None

    def _activate(self, stream: Stream) -> Callable[[], None] | None:
        """CREATING/UPDATING ends (the caller holds the stream's lock): a pending reshard changes
        the shards now, as kinesalite's splitShard/mergeShards do in the setTimeout that ends
        UPDATING, and the stream's shards are listed from now on."""
        wake = None
        if stream.pending_reshard is not None:
            wake = apply_pending(self, stream)
            stream.pending_reshard = None
        stream.status, stream.ready_at, stream.activated = "ACTIVE", 0.0, True
        return wake

    def settle_when_due(self, stream: Stream) -> None:
        """Settle a stream with a pending reshard when its UPDATING ends, without waiting for a
        call to look it up: readers waiting on a parent (SubscribeToShard) then see it close."""
        if stream.pending_reshard is None or stream.status != "UPDATING":
            return
        timer = threading.Timer(max(0.0, stream.ready_at - time.time()), self._settle_due, (stream,))
        timer.name, timer.daemon = f"kinesim-reshard-{stream.name}", True
        self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        timer.start()

    def close(self) -> None:
        """Stop the timers of pending reshards (a restart applies those from the stored documents).
        No shard is made from now on and the uid counter is stored as it ends: the service made
        after a reset (`Services.reset`) reads it, and no request still in this one's hands may
        give out a uid that the new one gives out too."""
        with self._uid_lock:
            self._closed = True
        self._save_uid_counter()
        for timer in self._timers:
            timer.cancel()

    def _settle_due(self, stream: Stream) -> None:
        if self.streams.get(stream.name) is not stream:
            return  # deleted meanwhile: the reshard never happens
        if stream.pending_reshard is not None and stream.status == "UPDATING" and time.time() < stream.ready_at:
            self.settle_when_due(stream)  # the timer's clock ran ahead of the wall clock
            return
        try:
            self.settle(stream)
        except Exception as err:  # e.g. the store closed by a shutdown; the next lookup settles instead
            log.warning("settling stream %s failed: %s", stream.name, err)

    # persistence

    def add(self, stream: Stream) -> None:
        """Make a new stream known; the caller holds `self.lock`. Its document is written before
        the stream can be found, so no put racing CreateStream is acknowledged into shards that a
        kill -9 would leave in no document."""
        self._save_uid_counter()
        self.store.put_document("stream", stream.name, stream.to_doc())
        self.streams[stream.name] = stream

    def save(self, stream: Stream) -> None:
        """Write the stream's document; the caller holds `stream.lock`. A stream dropped since the
        caller looked it up (drop also runs under its lock) is not written back to life."""
        if self.streams.get(stream.name) is stream:
            self._save_uid_counter()
            self.store.put_document("stream", stream.name, stream.to_doc())

    def drop(self, stream: Stream) -> None:
        """Forget a deleted stream: its records, its consumers (kept in its document) and the
        resource policies of both, so that a stream created later under its name (same ARN)
        starts with none of them.

        Document, policies, records: each goes in transactions of its own. After a kill -9 part
        way, the stream is gone and the next start deletes what is left of it
        (`ShardUids.finish_interrupted_drops`, `_forget_orphan_policies`)."""
        with self.lock:
            if self.streams.get(stream.name) is stream:
                del self.streams[stream.name]
                self.store.delete_document("stream", stream.name)
                for arn in [stream.arn, *(c.arn for c in stream.consumers.values())]:
                    if self.policies.pop(arn, None) is not None:
                        self.store.delete_document("policy", arn)
            self.store.delete_records([s.uid for s in stream.shards])
            for shard in stream.shards:
                self.write_rates.discard(shard.uid)
                shard.notify()

    def new_shard_uid(self) -> int:
        """A uid for a new shard. Durable once a document names it (see `ShardUids.save`)."""
        with self._uid_lock:
            if self._closed:
                raise AwsError("ServiceUnavailable", "The service is stopping or being reset; try again.", 503)
            return self.uids.new()

    def _save_uid_counter(self) -> None:
        self.uids.save()

    def _forget_orphan_policies(self) -> None:
        """At load: delete the resource policies that belong to no stream or consumer, left by a
        kill -9 inside `drop` (the stream's document goes first; its records are the server's to
        delete, `ShardUids.finish_interrupted_drops`)."""
        resources = {stream.arn for stream in self.streams.values()}
        resources.update(c.arn for stream in self.streams.values() for c in stream.consumers.values())
        for arn in [arn for arn in self.policies if arn not in resources]:
            self.store.delete_document("policy", arn)
            del self.policies[arn]

    def save_meta(self, name: str, body: Any) -> None:
        self.store.put_document("meta", name, body)

    def total_open_shards(self) -> int:
        return sum(s.reserved_shards() for s in self.streams.values() if s.status != "DELETING")
