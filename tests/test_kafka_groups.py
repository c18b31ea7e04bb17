"""Consumer groups (docs/plans/issue-35-kafka.md §5, step 5): kafka-python, confluent-kafka and
aiokafka consumers in groups read, commit and resume; two members split a topic's partitions;
offsets and membership survive a restart and kill -9; the admin calls list, describe and delete
groups."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kinesim.kafka.groups import subscription_topics
from kinesim.server import free_port

from conftest import start_server
from test_kafka_clients import bootstrap, new_stream


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    yield proc
    proc.stop()


def produce(proc, topic: str, values: list[bytes], partitions: int = 1) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap(proc), acks="all")
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % partitions)
        producer.flush(20)
    finally:
        producer.close()


def consumer(proc, topic: str, group: str, **config):
    from kafka import KafkaConsumer
    return KafkaConsumer(topic, bootstrap_servers=bootstrap(proc), group_id=group, auto_offset_reset="earliest",
                         **config)


def read(c, count: int, timeout: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=300).values():
            got.extend(batch)
    return got


def values(records) -> list[bytes]:
    return [r.value for r in records]


def test_kafka_python_group_reads_commits_and_a_second_consumer_resumes(kafka):
    topic, group = new_stream(kafka), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [b"v%d" % i for i in range(10)])
    c = consumer(kafka, topic, group, enable_auto_commit=False)
    got = read(c, 6)
    assert values(got)[:6] == [b"v%d" % i for i in range(6)]
    from kafka import OffsetAndMetadata, TopicPartition
    c.commit({TopicPartition(topic, 0): OffsetAndMetadata(6, "", -1)})  # manual, exactly after v5
    assert c.committed(TopicPartition(topic, 0)) == 6
    c.close()
    c2 = consumer(kafka, topic, group, enable_auto_commit=True, auto_commit_interval_ms=100)
    assert values(read(c2, 4)) == [b"v%d" % i for i in range(6, 10)]
    c2.close()  # auto commit on close
    c3 = consumer(kafka, topic, group)
    assert c3.committed(TopicPartition(topic, 0)) == 10
    c3.close()


def test_two_consumers_split_four_partitions_and_read_each_record_once(kafka):
    topic, group = new_stream(kafka, shards=4), f"g-{uuid.uuid4().hex[:8]}"
    sent = [b"r%d" % i for i in range(40)]
    produce(kafka, topic, sent, partitions=4)
    a = consumer(kafka, topic, group, enable_auto_commit=False, max_poll_records=3)
    first = read(a, 3)
    b = consumer(kafka, topic, group, enable_auto_commit=False)
    got = list(first)
    # Until both hold partitions: a commits what it read, so the rebalance hands nothing over twice.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (a.assignment() and b.assignment() and len(got) >= len(sent)):
        for c in (a, b):
            records = read(c, 1, timeout=0.3)
            got.extend(records)
            if records:
                c.commit()
    a.commit()
    assert a.assignment() and b.assignment()
    assert not a.assignment() & b.assignment()
    assert len(a.assignment() | b.assignment()) == 4
    assert sorted(values(got)) == sorted(sent)
    a.close()
    b.close()


def test_confluent_kafka_subscribe_and_commit(kafka):
    from confluent_kafka import Consumer, TopicPartition
    topic, group = new_stream(kafka), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [b"c%d" % i for i in range(5)])
    config = {"bootstrap.servers": bootstrap(kafka), "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    c = Consumer(config)
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    assert got == [b"c%d" % i for i in range(5)]
    c.commit(asynchronous=False)
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 5
    c.close()
    produce(kafka, topic, [b"c5"])
    c = Consumer(config)
    c.subscribe([topic])
    deadline, m = time.monotonic() + 30, None
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            break
    assert m is not None and m.value() == b"c5"
    c.close()


def test_aiokafka_group(kafka):
    from aiokafka import AIOKafkaConsumer
    topic, group = new_stream(kafka), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [b"a%d" % i for i in range(4)])

    async def run() -> list[bytes]:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap(kafka), group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            got = []
            while len(got) < 4:
                batches = await asyncio.wait_for(c.getmany(timeout_ms=500), 30)
                for records in batches.values():
                    got.extend(r.value for r in records)
            await c.commit()
            from aiokafka import TopicPartition
            assert await c.committed(TopicPartition(topic, 0)) == 4
            return got
        finally:
            await c.stop()
    assert asyncio.run(run()) == [b"a%d" % i for i in range(4)]


def test_admin_lists_describes_and_deletes_groups(kafka):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    topic, group = new_stream(kafka), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [b"x"])
    c = consumer(kafka, topic, group, enable_auto_commit=False)
    assert read(c, 1)
    c.commit()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(kafka))
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer" and listed[group]["group_state"] == "Stable"
        described = admin.describe_groups([group])[group]
        assert described["error"] is None and described["group_state"] == "Stable"
        assert described["protocol_data"] == "range"
        [member] = described["members"]
        assert list(member["member_metadata"]["topics"]) == [topic]
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        c.close()
        _wait(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty")
        offsets = admin.list_group_offsets(group)[group]
        assert offsets[TopicPartition(topic, 0)].offset == 1
        assert admin.delete_groups([group]) == {group: "OK"}
        assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert not admin.list_group_offsets(group)[group]
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    finally:
        admin.close()


def _wait(check, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_group_resumes_from_its_commits_after_a_restart(tmp_path_factory, how):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    try:
        topic, group = new_stream(proc), f"g-{uuid.uuid4().hex[:8]}"
        produce(proc, topic, [b"p%d" % i for i in range(20)])
        c = consumer(proc, topic, group, enable_auto_commit=False, max_poll_records=5)
        got = read(c, 5)
        c.commit()  # acknowledged: offset 5
        committed = len(got)
        proc.kill() if how == "kill" else proc.stop()
        proc.start()
        # The same consumer carries on: its member is known again (the group was saved at Stable).
        more = read(c, 20 - committed)
        c.commit()
        assert values(got + more)[:committed] == [b"p%d" % i for i in range(committed)]
        assert set(values(got + more)) == {b"p%d" % i for i in range(20)}
        c.close()
        fresh = consumer(proc, topic, group)
        from kafka import TopicPartition
        assert fresh.committed(TopicPartition(topic, 0)) == 20
        fresh.close()
    finally:
        proc.stop()


def test_a_member_that_stays_after_a_kill_keeps_its_generation(tmp_path_factory):
    """kill -9 while a group consumes: commits acknowledged before are all there afterwards."""
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    try:
        topic, group = new_stream(proc), f"g-{uuid.uuid4().hex[:8]}"
        produce(proc, topic, [b"k%d" % i for i in range(50)])
        c = consumer(proc, topic, group, enable_auto_commit=False, max_poll_records=7)
        acknowledged = 0
        while acknowledged < 21:
            acknowledged += len(read(c, 1))
            c.commit()
        c.close(autocommit=False)
        proc.kill()
        proc.start()
        from kafka import TopicPartition
        fresh = consumer(proc, topic, group, enable_auto_commit=False)
        assert fresh.committed(TopicPartition(topic, 0)) == acknowledged
        assert values(read(fresh, 50 - acknowledged)) == [b"k%d" % i for i in range(acknowledged, 50)]
        fresh.close()
    finally:
        proc.stop()


def test_subscription_topics_are_read_from_member_metadata():
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
    for version in (0, 1, 3):
        encoded = ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"").encode(version=version)
        assert subscription_topics(bytes(encoded)) == ["a", "b"]
    assert subscription_topics(b"\x00") == [] and subscription_topics(b"\xff\xff garbage") == []


# Raw frames: the coordinator's answers as the protocol defines them.

def _sock(proc):
    import socket
    from test_kafka_protocol import address
    return socket.create_connection(address(proc), timeout=20)


def _join(sock, group: str, member: str = "", instance: str | None = None, version: int = 9):
    from test_kafka_protocol import call
    return call(sock, 11, version, {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000,
                                    "member_id": member, "group_instance_id": instance, "protocol_type": "consumer",
                                    "protocols": [{"name": "range", "metadata": b"m-" + member.encode()}]})


def _heartbeat(sock, group: str, generation: int, member: str) -> int:
    from test_kafka_protocol import call
    return call(sock, 12, 4, {"group_id": group, "generation_id": generation, "member_id": member}).error_code


def test_join_sync_heartbeat_and_rebalance_on_the_wire(kafka):
    import threading
    from test_kafka_protocol import call
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = _sock(kafka), _sock(kafka)
    first = _join(a, group)
    assert first.error_code == 79 and first.member_id  # MEMBER_ID_REQUIRED, with the id to use
    joined = _join(a, group, first.member_id)
    assert joined.error_code == 0 and joined.generation_id == 1 and joined.leader == first.member_id
    assert [m.member_id for m in joined.members] == [first.member_id] and joined.protocol_name == "range"
    me = first.member_id
    assert _heartbeat(a, group, 1, me) == 0            # CompletingRebalance: heartbeats are fine
    assert _heartbeat(a, group, 2, me) == 22           # ILLEGAL_GENERATION
    assert _heartbeat(a, group, 1, "nobody") == 25     # UNKNOWN_MEMBER_ID
    synced = call(a, 14, 5, {"group_id": group, "generation_id": 1, "member_id": me, "protocol_type": "consumer",
                             "protocol_name": "range", "assignments": [{"member_id": me, "assignment": b"all"}]})
    assert synced.error_code == 0 and synced.assignment == b"all"
    # A second member: the first learns of the rebalance by its heartbeat and rejoins.
    other = _join(b, group).member_id
    answers = {}
    t = threading.Thread(target=lambda: answers.setdefault("b", _join(b, group, other)))
    t.start()
    deadline = time.monotonic() + 10
    while _heartbeat(a, group, 1, me) != 27:           # REBALANCE_IN_PROGRESS
        assert time.monotonic() < deadline
        time.sleep(0.05)
    again = _join(a, group, me)
    t.join(10)
    assert again.error_code == 0 and again.generation_id == 2 and again.leader == me
    assert sorted(m.member_id for m in again.members) == sorted([me, other])
    assert answers["b"].generation_id == 2 and answers["b"].members == ()  # followers get no member list
    # LeaveGroup v5 by member id: the group rebalances without it.
    left = call(b, 13, 5, {"group_id": group, "members": [{"member_id": other, "group_instance_id": None}]})
    assert left.error_code == 0 and left.members[0].error_code == 0
    assert _heartbeat(a, group, 2, me) == 27
    a.close()
    b.close()


def test_a_leader_that_assigned_fewer_partitions_than_the_topic_has_is_asked_to_rebalance(kafka):
    """A leader may assign from metadata older than the topic (kafka-python can lose a refresh it
    asked for): the partitions it did not know would wait for its next refresh (5 minutes). The
    coordinator compares what the leader assigned with the topic and asks for a rebalance."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    from test_kafka_protocol import call
    topic, group = new_stream(kafka, shards=2), f"g-{uuid.uuid4().hex[:8]}"
    subscription = bytes(ConsumerProtocolSubscription(topics=[topic], user_data=b"").encode(version=0))
    a = _sock(kafka)

    def join(member: str):
        return call(a, 11, 9, {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000,
                               "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": subscription}]})

    def sync(member: str, generation: int, partitions: list[int]) -> int:
        assignment = bytes(ConsumerProtocolAssignment(assigned_partitions=[(topic, partitions)],
                                                      user_data=b"").encode(version=0))
        return call(a, 14, 5, {"group_id": group, "generation_id": generation, "member_id": member,
                               "protocol_type": "consumer", "protocol_name": "range",
                               "assignments": [{"member_id": member, "assignment": assignment}]}).error_code

    me = join("").member_id
    assert join(me).generation_id == 1
    assert sync(me, 1, [0]) == 0
    # Partition 1 was left out: after the leader's grace (it may be rejoining by itself already,
    # coordinator.LEADER_GRACE_S), a heartbeat is answered REBALANCE_IN_PROGRESS.
    assert _heartbeat(a, group, 1, me) == 0
    deadline = time.monotonic() + 30
    while _heartbeat(a, group, 1, me) != 27:
        assert time.monotonic() < deadline, "no rebalance asked for"
        time.sleep(0.2)  # heartbeats, as a member sends them, until the grace is over
    assert join(me).generation_id == 2
    assert sync(me, 2, [0, 1]) == 0
    assert _heartbeat(a, group, 2, me) == 0            # every partition held: stable
    a.close()


def test_static_member_keeps_its_id(kafka):
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = _sock(kafka)
    first = _join(a, group, instance="instance-1")
    assert first.error_code == 0 and first.member_id   # static members get no MEMBER_ID_REQUIRED
    again = _join(a, group, instance="instance-1")      # restarted: it knows its instance id only
    assert again.error_code == 0 and again.member_id == first.member_id
    a.close()


def test_offsets_and_coordinator_on_the_wire(kafka):
    from test_kafka_protocol import call
    topic, group = new_stream(kafka, shards=2), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, [b"e%d" % i for i in range(3)])
    s = _sock(kafka)
    found = call(s, 10, 4, {"key_type": 0, "coordinator_keys": [group, "other"]})
    assert [(c.key, c.node_id, c.port, c.error_code) for c in found.coordinators] == \
        [(group, 0, kafka.settings.kafka_port, 0), ("other", 0, kafka.settings.kafka_port, 0)]
    assert call(s, 10, 0, {"key": group}).port == kafka.settings.kafka_port
    # A simple consumer's commit (generation -1, no member) to a group nobody joined.
    committed = call(s, 8, 9, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 2, "committed_metadata": "m"},
                                       {"partition_index": 9, "committed_offset": 1}]}]})
    assert [p.error_code for p in committed.topics[0].partitions] == [0, 3]
    fetched = call(s, 9, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": [
        {"name": topic, "partition_indexes": [0, 1]}]}]})
    parts = fetched.groups[0].topics[0].partitions
    assert [(p.committed_offset, p.metadata) for p in parts] == [(2, "m"), (-1, "")]
    every = call(s, 9, 7, {"group_id": group, "topics": None})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in every.topics] == [(topic, [0])]
    # A member of no generation may not commit to a group that has members.
    member = _join(s, group, instance="i").member_id
    refused = call(s, 8, 9, {"group_id": group, "generation_id_or_member_epoch": 5, "member_id": member,
                             "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 3}]}]})
    assert refused.topics[0].partitions[0].error_code == 22
    epochs = call(s, 23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]})
    assert (epochs.topics[0].partitions[0].leader_epoch, epochs.topics[0].partitions[0].end_offset) == (0, 3)
    s.close()


# Each client produces, consumes in a group, commits, and after a kill -9 and restart a new
# member of the group resumes from the commit (kafka-python's is test_group_resumes_... above).

def _confluent_round(proc, topic: str, group: str, produce_values: list[bytes], count: int) -> list[bytes]:
    """Produce with confluent-kafka's Producer, then read `count` records in `group` and commit."""
    from confluent_kafka import Consumer, Producer
    if produce_values:
        producer = Producer({"bootstrap.servers": bootstrap(proc), "acks": "all"})
        for value in produce_values:
            producer.produce(topic, value=value)
        assert producer.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap(proc), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.commit(asynchronous=False)
        return got
    finally:
        c.close()


def _aiokafka_round(proc, topic: str, group: str, produce_values: list[bytes], count: int) -> list[bytes]:
    """Produce with aiokafka's producer, then read `count` records in `group` and commit."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        if produce_values:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap(proc), acks="all")
            await producer.start()
            try:
                for value in produce_values:
                    await producer.send_and_wait(topic, value)
            finally:
                await producer.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap(proc), group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=count)
        await c.start()
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < count and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=500, max_records=count - len(got))
                for records in batches.values():
                    got.extend(r.value for r in records)
            await c.commit()
            return got
        finally:
            await c.stop()
    return asyncio.run(run())


@pytest.mark.parametrize("client", [_confluent_round, _aiokafka_round], ids=["confluent-kafka", "aiokafka"])
def test_a_group_rejoins_after_a_kill_9_from_its_commit(tmp_path_factory, client):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    try:
        topic, group = new_stream(proc), f"g-{uuid.uuid4().hex[:8]}"
        first = client(proc, topic, group, [b"r%d" % i for i in range(10)], 4)
        assert first == [b"r%d" % i for i in range(4)]
        proc.kill()
        proc.start()
        assert client(proc, topic, group, [], 6) == [b"r%d" % i for i in range(4, 10)]
    finally:
        proc.stop()
