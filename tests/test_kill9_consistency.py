"""A `kill -9` between two of the service's transactions leaves nothing a later run trips over.

Deleting a stream is several transactions: its document (and its resource policies), then its
records in batches. A kill in between used to leave the records behind for ever, and since shard
uids were numbered from the highest uid in the stream documents, the next stream could take the
dropped stream's uids, read its records and fail its first PutRecord on the records' primary key.
The unit tests stop a service exactly where such a kill would (after `drop`'s first transaction)
by doing only that transaction on the store; the last test kills a real server.
"""
from __future__ import annotations

import pytest

from conftest import client_for, make_service
from kinesim.config import Settings
from kinesim.kinesis.service import OPERATIONS, KinesisService
from kinesim.kinesis.uids import UID_COUNTER
from kinesim.protocol.errors import AwsError
from kinesim.server import ServerProcess, free_port
from kinesim.store import Store

POLICY = '{"Version":"2012-10-17","Statement":[]}'


def call(svc: KinesisService, op: str, **params):
    return OPERATIONS[op](svc, params)


def put(svc: KinesisService, name: str, *datas: bytes) -> None:
    for i, data in enumerate(datas):
        call(svc, "PutRecord", StreamName=name, Data=data, PartitionKey=f"pk-{i}")


def read_all(svc: KinesisService, name: str) -> list[bytes]:
    out = []
    for shard in call(svc, "ListShards", StreamName=name)["Shards"]:
        it = call(svc, "GetShardIterator", StreamName=name, ShardId=shard["ShardId"],
                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out += [r["Data"] for r in call(svc, "GetRecords", ShardIterator=it)["Records"]]
    return sorted(out)


def half_drop(svc: KinesisService, name: str) -> list[int]:
    """What a kill -9 inside `drop` leaves: the stream's document is gone, its policy and its
    records are not. Closes the store (no later step runs) and returns the dropped shard uids."""
    uids = [s.uid for s in svc.streams[name].shards]
    svc.store.delete_document("stream", name)
    svc.store.close()
    return uids


@pytest.mark.parametrize("written_before_counter", [False, True], ids=["counter", "older-database"])
def test_stream_created_after_a_half_done_delete_starts_empty(tmp_path, written_before_counter):
    svc = make_service(tmp_path)
    call(svc, "CreateStream", StreamName="keep", ShardCount=1)
    call(svc, "CreateStream", StreamName="gone", ShardCount=2)  # the highest shard uids
    put(svc, "keep", b"kept")
    put(svc, "gone", *(f"old-{i}".encode() for i in range(20)))
    old_iterator = call(svc, "GetShardIterator", StreamName="gone", ShardId="shardId-000000000000",
                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    dropped = half_drop(svc, "gone")
    if written_before_counter:
        # A database of a version that kept no uid counter: only the orphan records tell which
        # uids were used.
        store = Store(str(tmp_path))
        store.delete_document("meta", UID_COUNTER)
        store.close()

    svc = make_service(tmp_path)
    try:
        # The orphan records are gone once the service has loaded.
        assert all(svc.store.read(uid, 0, 10) == [] for uid in dropped)
        assert read_all(svc, "keep") == [b"kept"]
        for name in ("gone", "fresh"):
            call(svc, "CreateStream", StreamName=name, ShardCount=2)
            put(svc, name, *(f"new-{i}".encode() for i in range(20)))
            call(svc, "PutRecords", StreamName=name,
                 Records=[{"Data": b"batch", "PartitionKey": str(i)} for i in range(10)])
            assert read_all(svc, name) == sorted([f"new-{i}".encode() for i in range(20)] + [b"batch"] * 10)
        # An iterator into the dropped stream does not read its namesake's records.
        with pytest.raises(AwsError) as caught:
            call(svc, "GetRecords", ShardIterator=old_iterator)
        assert caught.value.code == "ResourceNotFoundException"
    finally:
        svc.store.close()


def test_policy_of_a_half_deleted_stream_does_not_pass_to_its_namesake(tmp_path):
    svc = make_service(tmp_path)
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    arn = svc.stream_arn("s")
    call(svc, "PutResourcePolicy", ResourceARN=arn, Policy=POLICY)
    half_drop(svc, "s")

    svc = make_service(tmp_path)
    try:
        assert svc.store.document("policy", arn) is None
        call(svc, "CreateStream", StreamName="s", ShardCount=1)
        assert call(svc, "GetResourcePolicy", ResourceARN=arn) == {"Policy": "{}"}
    finally:
        svc.store.close()


def test_policies_of_live_streams_and_consumers_survive_load(tmp_path):
    svc = make_service(tmp_path)
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    arn = svc.stream_arn("s")
    consumer = call(svc, "RegisterStreamConsumer", StreamARN=arn, ConsumerName="c")["Consumer"]["ConsumerARN"]
    for resource in (arn, consumer):
        call(svc, "PutResourcePolicy", ResourceARN=resource, Policy=POLICY)
    svc.store.close()

    svc = make_service(tmp_path)
    try:
        assert svc.policies == {arn: POLICY, consumer: POLICY}
        assert call(svc, "GetResourcePolicy", ResourceARN=consumer) == {"Policy": POLICY}
    finally:
        svc.store.close()


class StoreThatPutsWhileCreating(Store):
    """A store that, while a stream's document is being written, has a client put to that stream:
    a put that races CreateStream, at the moment a kill -9 would leave its record in no document."""

    svc: KinesisService

    def put_document(self, kind, name, body):
        if kind == "stream" and self.document(kind, name) is None:
            with pytest.raises(AwsError) as caught:
                call(self.svc, "PutRecord", StreamName=name, Data=b"early", PartitionKey="pk")
            assert caught.value.code == "ResourceNotFoundException"
        super().put_document(kind, name, body)


def test_no_put_is_acknowledged_before_the_stream_is_stored(tmp_path):
    store = StoreThatPutsWhileCreating(str(tmp_path))
    svc = store.svc = KinesisService(Settings(create_stream_ms=0, update_stream_ms=0, delete_stream_ms=0), store)
    try:
        call(svc, "CreateStream", StreamName="s", ShardCount=1)
        assert read_all(svc, "s") == []
    finally:
        store.close()


def test_kill9_after_delete_stream_never_revives_old_positions(tmp_path):
    """A shard uid is never handed out twice, not even across kill -9: a stream re-created under
    a deleted one's name must not accept the deleted stream's iterators (nor would a trigger's or a
    Firehose source's checkpoint, which name shards the same way, apply to it)."""
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0,
                        update_stream_ms=0, delete_stream_ms=0, log_level="warning")
    previous = None
    for round_ in range(3):
        proc = ServerProcess(settings).start()
        try:
            k = client_for(proc.url)
            k.create_stream(StreamName="s", ShardCount=1)
            if previous is not None:
                with pytest.raises(k.exceptions.ResourceNotFoundException):
                    k.get_records(ShardIterator=previous)
            data = f"round-{round_}".encode()
            k.put_record(StreamName="s", Data=data, PartitionKey="pk")
            previous = k.get_shard_iterator(StreamName="s", ShardId="shardId-000000000000",
                                            ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            assert [r["Data"] for r in k.get_records(ShardIterator=previous)["Records"]] == [data]
            k.delete_stream(StreamName="s")
        finally:
            proc.kill()
