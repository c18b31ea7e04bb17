"""The Kinesis service: operation registry, stream lookup, lazy state transitions, persistence.

Each operation is a plain function `(service, params) -> response dict` registered with
`@operation`, living in the module of its concern (streams, records, iterators, ...).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from ..config import Settings
from ..protocol.errors import AwsError, in_use, invalid_argument, not_found
from ..protocol.validation import ModelValidator
from ..store import Store
from .model import Stream
from .throughput import Meter

Handler = Callable[["KinesisService", dict[str, Any]], dict[str, Any]]
OPERATIONS: dict[str, Handler] = {}


def operation(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        OPERATIONS[name] = fn
        return fn
    return register


class KinesisService:
    target_prefix = "Kinesis_20131202"

    def __init__(self, settings: Settings, store: Store):
        # Importing the operation modules registers their operations.
        from . import consumers, iterators, policies, records, resharding, shards, streams, tags  # noqa: F401
        self.settings = settings
        self.store = store
        self.validator = ModelValidator("kinesis")
        self.lock = threading.RLock()  # stream creation/deletion and the shard-uid counter
        self.streams: dict[str, Stream] = {}
        for doc in store.documents("stream").values():
            stream = Stream.from_doc(doc)
            for shard in stream.shards:
                shard.next_index = max(shard.next_index, (store.last_index(shard.uid) or 0) + 1)
            self.streams[stream.name] = stream
        self._next_uid = 1 + max((s.uid for st in self.streams.values() for s in st.shards), default=0)
        meta = store.documents("meta")
        self.iterator_key: bytes = bytes.fromhex(meta["iterator-key"]) if "iterator-key" in meta else os.urandom(32)
        if "iterator-key" not in meta:
            store.put_document("meta", "iterator-key", self.iterator_key.hex())
        self.account_settings: dict[str, Any] = meta.get("account-settings", {})
        self.policies: dict[str, str] = store.documents("policy")
        self.meter = Meter()

    # dispatch

    def call(self, op: str, params: dict[str, Any], cbor: bool = False) -> dict[str, Any]:
        handler = OPERATIONS.get(op)
        if handler is None:
            raise AwsError("UnknownOperationException")
        return handler(self, self.validator.parse(op, params, cbor=cbor))

    def has_operation(self, op: str) -> bool:
        return op in OPERATIONS

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
            self._settle(stream)
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
        stream = self.stream(params)
        if stream.status != "ACTIVE":
            raise in_use(f"Stream {stream.name} under account {self.account} not ACTIVE, instead in state {stream.status}")
        return stream

    def all_streams(self) -> list[Stream]:
        for name in list(self.streams):
            self.find(name)
        return list(self.streams.values())

    def _settle(self, stream: Stream) -> None:
        with stream.lock:
            if not stream.ready_at or time.time() < stream.ready_at:
                return
            stream.ready_at = 0.0
            if stream.status == "DELETING":
                self.drop(stream)
                return
            stream.status = "ACTIVE"
            self.save(stream)

    def begin(self, stream: Stream, status: str, delay_ms: int) -> None:
        """Enter CREATING/UPDATING/DELETING for `delay_ms` (0: the change is immediate)."""
        if delay_ms <= 0:
            stream.status, stream.ready_at = ("DELETING", time.time()) if status == "DELETING" else ("ACTIVE", 0.0)
        else:
            stream.status, stream.ready_at = status, time.time() + delay_ms / 1000.0

    # persistence

    def save(self, stream: Stream) -> None:
        self.store.put_document("stream", stream.name, stream.to_doc())

    def drop(self, stream: Stream) -> None:
        with self.lock:
            if self.streams.get(stream.name) is stream:
                del self.streams[stream.name]
            self.store.delete_document("stream", stream.name)
            self.store.delete_records([s.uid for s in stream.shards])
            for shard in stream.shards:
                with shard.appended:
                    shard.appended.notify_all()

    def new_shard_uid(self) -> int:
        with self.lock:
            uid = self._next_uid
            self._next_uid += 1
            return uid

    def save_meta(self, name: str, body: Any) -> None:
        self.store.put_document("meta", name, body)

    def total_open_shards(self) -> int:
        return sum(len(s.open_shards()) for s in self.streams.values() if s.status != "DELETING")
