"""A stream's Kafka consumer groups on its console page (issue 35, plan §5 "Console"): beside the
other readers, each group with its state and members, and per partition the committed offset, the
log end offset and the lag; the live state while members are in, Empty once they leave, the saved
state after a restart before any Kafka client asks; groups of another account only under that
account's scope."""
from __future__ import annotations

import time
import uuid

import pytest
from console_api import ConsoleApi
from test_kafka_clients import bootstrap, new_stream
from test_kafka_sasl import ACCOUNT, kinesis_as

from kinesim.kafka import group_view
from kinesim.server import ServerProcess, free_port

from conftest import start_server


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    yield proc
    proc.stop()


def produce(proc, topic: str, counts: list[int], **config) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap(proc), acks="all", **config)
    try:
        for partition, count in enumerate(counts):
            for i in range(count):
                producer.send(topic, value=b"p%d-%d" % (partition, i), partition=partition)
        producer.flush(20)
    finally:
        producer.close()


def consume(proc, topic: str, group: str, count: int, **config):
    """A group member that has read `count` records (committing nothing itself)."""
    from kafka import KafkaConsumer
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap(proc), group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, **config)
    got = 0
    deadline = time.monotonic() + 30
    while got < count and time.monotonic() < deadline:
        got += sum(len(b) for b in c.poll(timeout_ms=300).values())
    assert got == count
    return c


def group_reader(proc, topic: str, group: str, **params) -> dict | None:
    r = ConsoleApi(proc.url, "/streams").get(f"/{topic}", **params)
    assert r.status_code == 200, r.text
    return next((x for x in r.json()["readers"] if x["kind"] == "kafka" and x["name"] == group), None)


def partitions(reader: dict) -> dict[int, tuple]:
    return {p["partition"]: (p["committed"], p["log_end"], p["lag"]) for p in reader["shards"]}


def until(condition, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_a_group_beside_the_other_readers_with_lag_per_partition(kafka):
    from kafka import OffsetAndMetadata, TopicPartition
    topic, group = new_stream(kafka, shards=2), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [6, 3])
    c = consume(kafka, topic, group, 9)
    c.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1),
              TopicPartition(topic, 1): OffsetAndMetadata(3, "", -1)})
    reader = group_reader(kafka, topic, group)
    assert reader["state"] == "Stable" and reader["group"]["source"] == "live"
    assert partitions(reader) == {0: (4, 6, 2), 1: (3, 3, 0)}
    assert reader["records"] == 2 and reader["lag"] == 2 and reader["max_ms"] >= 0
    [member] = reader["group"]["members"]
    assert sorted(member["assignment"][topic]) == [0, 1]
    assert {p["member"] for p in reader["shards"]} == {member["id"]}
    produce(kafka, topic, [0, 5])  # the log end moves, the commit does not
    assert partitions(group_reader(kafka, topic, group))[1] == (3, 8, 5)
    c.close()  # LeaveGroup: the group is Empty, its offsets stay
    reader = until(lambda: (r := group_reader(kafka, topic, group)) and r["state"] == "Empty" and r)
    assert reader["group"]["members"] == [] and partitions(reader) == {0: (4, 6, 2), 1: (3, 8, 5)}


def test_a_member_that_committed_nothing_shows_no_lag(kafka):
    topic, group = new_stream(kafka), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [3])
    c = consume(kafka, topic, group, 3)
    try:
        # Listed by its subscription; like kafka-consumer-groups, no commit means no lag ("-").
        reader = until(lambda: group_reader(kafka, topic, group))
        assert partitions(reader) == {0: (None, 3, None)} and reader["lag"] is None and reader["records"] == 0
    finally:
        c.close()


def test_a_group_of_another_account_only_under_its_scope(kafka):
    topic, group = f"kg-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": ACCOUNT,
            "sasl_plain_password": "x"}
    kinesis_as(kafka, ACCOUNT).create_stream(StreamName=topic, ShardCount=1)
    kinesis_as(kafka, ACCOUNT).get_waiter("stream_exists").wait(StreamName=topic, WaiterConfig={"Delay": 0.1})
    produce(kafka, topic, [2], **sasl)
    c = consume(kafka, topic, group, 2, **sasl)
    c.commit()
    c.close()
    reader = group_reader(kafka, topic, group, account=ACCOUNT)
    assert reader is not None and partitions(reader) == {0: (2, 2, 0)}
    missing = ConsoleApi(kafka.url, "/streams").get(f"/{topic}")  # not in the server's own account
    assert missing.status_code == 400 and "ResourceNotFound" in missing.text
    own = new_stream(kafka)  # a stream of the own account is not read by the other account's group
    assert group_reader(kafka, own, group) is None


def test_after_a_restart_the_saved_state_until_a_client_asks(tmp_path):
    proc = ServerProcess(port=free_port(), kafka_port=free_port(), data_dir=str(tmp_path), create_stream_ms=0,
                         log_level="warning").start()
    try:
        topic, group = new_stream(proc), f"g-{uuid.uuid4().hex[:8]}"
        produce(proc, topic, [4])
        c = consume(proc, topic, group, 4)
        c.commit()
        proc.kill()  # the member is still in: the saved group is Stable with it
        c.close(autocommit=False)
        proc.start()
        reader = group_reader(proc, topic, group)
        assert reader["group"]["source"] == "saved" and reader["note"]
        assert reader["state"] == "Stable" and len(reader["group"]["members"]) == 1
        assert partitions(reader) == {0: (4, 4, 0)}
    finally:
        proc.stop()


def test_the_document_kinds_are_the_coordinators():
    from kinesim.kafka.groups import GROUP_DOCUMENT
    from kinesim.kafka.handlers.group_offsets import OFFSET_DOCUMENT
    assert (group_view.GROUP_DOCUMENT, group_view.OFFSET_DOCUMENT) == (GROUP_DOCUMENT, OFFSET_DOCUMENT)
