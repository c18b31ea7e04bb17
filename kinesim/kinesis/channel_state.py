"""Channels' state: the channels of the account, their lifecycle and their documents.

A channel is kept as one document (kind "kinesis-channel", by name) written before its answer is
sent. States change lazily, as streams' do: CREATING and UPDATING end `create_stream_ms` /
`update_stream_ms` after the call (the same delays as streams'), DELETING ends with the channel
gone after `delete_stream_ms`. Provisioning checks what AWS can only find out then: the
destination bucket exists and belongs to ExpectedBucketOwner; if not, the channel is FAILED with
a reason and delivers nothing (DescribeChannel: "diagnose a channel in the FAILED state by reading
the ChannelStatusReason").

Where delivery starts: "No backfill" (developer guide, "Data delivery concepts"): records put
after the channel became ACTIVE. The positions of the stream's shards at that moment are stored
with the channel (`start`), before it is ACTIVE.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .checkpoints import Checkpoint, CheckpointStore

DOC_KIND = "kinesis-channel"
CHECKPOINT_KIND = "kinesis-channel-checkpoint"


@dataclass
class Channel:
    name: str
    id: str
    arn: str
    created: float
    role: str
    stream_arn: str
    stream_created: float
    record_config: dict[str, Any]
    s3: dict[str, Any]                      # S3DestinationDescription, defaults filled in
    logging: dict[str, Any]
    status: str = "CREATING"
    reason: str | None = None
    ready_at: float = 0.0
    encryption: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def stream_name(self) -> str:
        return self.stream_arn.rsplit("/", 1)[-1]

    @property
    def bucket(self) -> str:
        return self.s3["StorageConfiguration"]["BucketARN"].split(":::", 1)[1]

    @property
    def error_bucket(self) -> str:
        return self.s3["DeadLetterQueueS3Configuration"]["BucketARN"].split(":::", 1)[1]

    def to_doc(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> "Channel":
        return cls(**doc)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ChannelName": self.name, "ChannelARN": self.arn, "ChannelId": self.id,
            "ChannelStatus": self.status, "ChannelCreationTimestamp": self.created,
            "ServiceExecutionRoleARN": self.role,
            "StreamConfigurationList": [{"StreamARN": self.stream_arn, "StreamCreationTimestamp": self.stream_created,
                                         "RecordConfiguration": self.record_config}],
            "S3DestinationConfiguration": self.s3, "LoggingConfiguration": self.logging,
        }
        if self.reason:
            out["ChannelStatusReason"] = self.reason
        if self.encryption:
            out["EncryptionConfiguration"] = self.encryption
        return out

    def summary(self) -> dict[str, Any]:
        out = {"ChannelName": self.name, "ChannelARN": self.arn, "ChannelId": self.id,
               "ChannelStatus": self.status, "ChannelCreationTimestamp": self.created,
               "ChannelDestinationType": "S3",
               "Streams": [{"StreamARN": self.stream_arn, "StreamCreationTimestamp": self.stream_created}]}
        if self.reason:
            out["ChannelStatusReason"] = self.reason
        return out


class Channels:
    """The account's channels. `bucket_owner(name)` is the account that owns a bucket (None: no such
    bucket), from the object store (passed in by the edge: the Kinesis package does not import S3's). `start_reading(stream_name)` gives a
    stream's checkpoint at LATEST (None: no such stream), where a new channel starts."""

    def __init__(self, settings: Any, store: Any, bucket_owner: Callable[[str], str | None],
                 start_reading: Callable[[str], Checkpoint | None]):
        self.settings, self.store = settings, store
        self.bucket_owner, self.start_reading = bucket_owner, start_reading
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # the delivery worker waits on it
        self.by_name: dict[str, Channel] = {
            name: Channel.from_doc(doc) for name, doc in store.documents(DOC_KIND).items()}

    # lookup

    def find(self, name: str) -> Channel | None:
        with self.lock:
            channel = self.by_name.get(name)
            if channel is not None:
                self.settle(channel)
            return self.by_name.get(name)

    def all(self) -> list[Channel]:
        with self.lock:
            for channel in list(self.by_name.values()):
                self.settle(channel)
            return sorted(self.by_name.values(), key=lambda c: c.name)

    # lifecycle

    def add(self, channel: Channel) -> None:
        with self.lock:
            channel.ready_at = time.time() + self.settings.create_stream_ms / 1000.0
            self._save(channel)
            self.by_name[channel.name] = channel
            self.changed.notify_all()

    def begin_update(self, channel: Channel) -> None:
        with self.lock:
            channel.status, channel.ready_at = "UPDATING", time.time() + self.settings.update_stream_ms / 1000.0
            self._save(channel)
            self.changed.notify_all()

    def begin_delete(self, channel: Channel) -> None:
        with self.lock:
            channel.status, channel.ready_at = "DELETING", time.time() + self.settings.delete_stream_ms / 1000.0
            self._save(channel)
            self.changed.notify_all()

    def settle(self, channel: Channel) -> None:
        """Apply the channel's due state change (the caller holds `self.lock`)."""
        if not channel.ready_at or time.time() < channel.ready_at or self.by_name.get(channel.name) is not channel:
            return
        channel.ready_at = 0.0
        if channel.status == "DELETING":
            del self.by_name[channel.name]
            self.store.delete_document(DOC_KIND, channel.name)
            self.checkpoints(channel).delete()
        elif channel.status == "CREATING":
            self._provision(channel)
            self._save(channel)
        else:
            channel.status = "ACTIVE"
            self._save(channel)
        self.changed.notify_all()

    def _provision(self, channel: Channel) -> None:
        """CREATING ends: ACTIVE with its starting positions checkpointed, or FAILED and why."""
        storage = channel.s3["StorageConfiguration"]
        dlq = channel.s3["DeadLetterQueueS3Configuration"]
        for role, bucket, owner in (("destination", channel.bucket, storage["ExpectedBucketOwner"]),
                                    ("dead-letter queue", channel.error_bucket, dlq["ExpectedBucketOwner"])):
            actual = self.bucket_owner(bucket)
            if actual is None:
                return self.fail(channel, f"The {role} bucket {bucket} does not exist.", save=False)
            if owner != actual:
                return self.fail(channel, f"Access denied to the {role} bucket {bucket}: it is not owned by "
                                          f"the expected bucket owner {owner}.", save=False)
        checkpoint = self.start_reading(channel.stream_name)
        if checkpoint is None:
            return self.fail(channel, f"The source stream {channel.stream_arn} does not exist.", save=False)
        self.checkpoints(channel).save(checkpoint)
        channel.status = "ACTIVE"

    def fail(self, channel: Channel, reason: str, save: bool = True) -> None:
        with self.lock:
            channel.status, channel.reason, channel.ready_at = "FAILED", reason, 0.0
            if save and self.by_name.get(channel.name) is channel:
                self._save(channel)

    def _save(self, channel: Channel) -> None:
        self.store.put_document(DOC_KIND, channel.name, channel.to_doc())

    # the delivery worker's view

    def checkpoints(self, channel: Channel) -> CheckpointStore:
        return CheckpointStore(self.store, CHECKPOINT_KIND, channel.name)

    def save_checkpoint(self, channel: Channel, checkpoint: Checkpoint) -> None:
        """Store the channel's positions (after the objects holding the records before them were
        written). A channel deleted meanwhile keeps no checkpoint."""
        with self.lock:
            if self.by_name.get(channel.name) is channel:
                self.checkpoints(channel).save(checkpoint)
