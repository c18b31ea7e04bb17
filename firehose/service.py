"""The Firehose service: delivery stream lookup, lazy states, persistence.

Each operation is a plain function `(service, params) -> response dict` in the module of its
concern, named in the table of `operations.py` (`streams_api`: the control plane, `records_api`:
PutRecord/PutRecordBatch). Delivery itself runs in background workers (`delivery`), one per
delivery stream, started here and stopped by `close()`, which also ends the jq worker processes
(`jq_runner`).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from kinesim.config import Settings
from kinesim.protocol.errors import AwsError, not_found
from kinesim.protocol.operations import JsonService
from kinesim.protocol.validation import ModelValidator
from kinesim.rates import SeriesMap
from kinesim.store import Store

from . import activity, records_api
from .delivery import Deliveries
from .jq_runner import JqPool
from .model import DeliveryStream
from .operations import OPERATIONS

# `invoke(function name or ARN, payload) -> Invocation` (attributes `payload`, `function_error`):
# how a Lambda processor is called (kinesim.functions' LambdaService.invoke_function).
Invoke = Callable[[str, bytes], Any]


class FirehoseService(JsonService):
    operations = OPERATIONS
    target_prefix = "Firehose_20150804"

    def __init__(self, settings: Settings, store: Store, objects: Any, kinesis: Any,
                 invoke: Invoke | None = None):
        self.settings = settings
        self.store = store
        self.objects = objects        # kinesim.s3.objects.ObjectStore: the local buckets
        self.kinesis = kinesis        # kinesim.kinesis.service.KinesisService: KinesisStreamAsSource
        self.invoke = invoke
        self.validator = ModelValidator("firehose")
        self.direct_put_quota = records_api.DirectPutQuota()  # applied with --enforce-limits
        self.lock = threading.RLock()  # the delivery streams map
        self.streams: dict[str, DeliveryStream] = {
            name: DeliveryStream.from_doc(doc) for name, doc in store.documents("firehose-stream").items()}
        # Records and bytes per second in and delivered, per delivery stream (the web console's charts).
        self.rates = SeriesMap(activity.FIELDS)
        self.deliveries = Deliveries(self)
        self.jq = JqPool()  # MetadataExtraction queries run in its worker processes (none until the first)

    def start(self) -> None:
        """Start (or resume, after a restart) delivery for every stored delivery stream."""
        for ds in self.all_streams():
            if ds.status != "DELETING":
                self.deliveries.start(ds)

    def close(self) -> None:
        self.deliveries.stop_all()
        self.jq.close()  # after the deliveries: no batch is evaluating when its worker ends

    # identity

    @property
    def account(self) -> str:
        return self.settings.account_id

    def arn(self, name: str) -> str:
        return f"arn:aws:firehose:{self.settings.region}:{self.account}:deliverystream/{name}"

    def not_found(self, name: str) -> AwsError:
        return not_found(f"Firehose {name} under account {self.account} not found.")

    # lookup with lazy state transitions

    def find(self, name: str) -> DeliveryStream | None:
        ds = self.streams.get(name)
        if ds is not None and ds.ready_at and time.time() >= ds.ready_at:
            self._settle(ds)
            ds = self.streams.get(name)
        return ds

    def stream(self, name: str) -> DeliveryStream:
        ds = self.find(name)
        if ds is None:
            raise self.not_found(name)
        return ds

    def all_streams(self) -> list[DeliveryStream]:
        for name in list(self.streams):
            self.find(name)
        return list(self.streams.values())

    def _settle(self, ds: DeliveryStream) -> None:
        with ds.lock:
            if not ds.ready_at or time.time() < ds.ready_at:
                return
            ds.ready_at = 0.0
            deleting = ds.status == "DELETING"
            if not deleting:
                ds.status = "ACTIVE"
                self.save(ds)
        if deleting:  # outside the lock: dropping joins the worker, which may be waiting for it
            self.drop(ds)

    def begin(self, ds: DeliveryStream, status: str, delay_ms: int) -> None:
        """Enter CREATING/DELETING for `delay_ms` (0: the change is immediate)."""
        if delay_ms <= 0:
            ds.status, ds.ready_at = ("DELETING", time.time()) if status == "DELETING" else ("ACTIVE", 0.0)
        else:
            ds.status, ds.ready_at = status, time.time() + delay_ms / 1000.0

    # persistence

    def save(self, ds: DeliveryStream) -> None:
        self.store.put_document("firehose-stream", ds.name, ds.to_doc())

    def drop(self, ds: DeliveryStream) -> None:
        """Forget a deleted delivery stream: its worker, its buffered records, its source checkpoint."""
        self.deliveries.stop(ds.name)
        with self.lock:
            if self.streams.get(ds.name) is ds:
                del self.streams[ds.name]
            self.store.delete_document("firehose-stream", ds.name)
            self.store.delete_document("firehose-checkpoint", ds.name)
            self.store.firehose_buffer_delete(ds.name)
        self.rates.discard(ds.name)
