"""Kafka's admin APIs on streams (docs/plans/issue-35-kafka.md step 3): CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, with kafka-python's
KafkaAdminClient and confluent-kafka's AdminClient, each change checked through boto3."""
from __future__ import annotations

import socket
import uuid

import pytest

from kinesim.kafka import configs, errors
from kinesim.server import free_port

from conftest import client_for, start_server
from test_kafka_protocol import address, call

DAY_MS = 24 * 3_600_000


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def kinesis(kafka):
    return client_for(kafka.url)


def bootstrap(proc) -> str:
    return f"127.0.0.1:{proc.settings.kafka_port}"


def topic_name() -> str:
    return f"ka-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def kp_admin(kafka):
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(kafka))
    yield admin
    admin.close()


@pytest.fixture
def ck_admin(kafka):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap(kafka)})


def summary(kinesis, name) -> dict:
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]


def open_shards(kinesis, name) -> int:
    shards = kinesis.list_shards(StreamName=name)["Shards"]
    return sum("EndingSequenceNumber" not in s["SequenceNumberRange"] for s in shards)


def all_shards(kinesis, name) -> int:
    return len(kinesis.list_shards(StreamName=name)["Shards"])


def gone(kinesis, name) -> bool:
    return name not in kinesis.list_streams()["StreamNames"]


# Units


def test_config_checks():
    assert configs.check([("retention.ms", str(DAY_MS + 1))]).retention_hours == 25  # rounded up
    assert configs.check([("retention.ms", "604800000"), ("segment.bytes", "1000")]).retention_hours == 168
    assert configs.check([("max.message.bytes", "2097152")]).max_record_kib == 2048
    assert configs.check([("cleanup.policy", "delete")]) == configs.Settings()
    for bad in [("retention.ms", "3600000"), ("retention.ms", "-1"), ("retention.ms", "x"),
                ("cleanup.policy", "compact"), ("cleanup.policy", "compact,delete"), ("no.such.config", "1"),
                ("retention.bytes", "100"), ("min.insync.replicas", "two"), ("max.message.bytes", "1000")]:
        with pytest.raises(configs.ConfigError):
            configs.check([bad])


# kafka-python


def test_kafka_python_create_describe_alter_delete(kp_admin, kinesis):
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    name = topic_name()
    kp_admin.create_topics([NewTopic(name, 3, 1, topic_configs={"retention.ms": str(48 * 3_600_000),
                                                                 "min.insync.replicas": "1"})])
    got = summary(kinesis, name)
    assert got["StreamStatus"] == "ACTIVE" and got["OpenShardCount"] == 3 and got["RetentionPeriodHours"] == 48

    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    modified = kp_admin.describe_configs([resource])["topic"][name]  # kafka-python's default: the modified ones
    assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": str(48 * 3_600_000)}
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    every = kp_admin.describe_configs([resource], config_filter="all")["topic"][name]
    assert every["cleanup.policy"]["value"] == "delete"
    assert every["max.message.bytes"]["value"] == str(1024 * 1024)

    for incremental in (True, False):  # IncrementalAlterConfigs, then AlterConfigs
        hours = 72 if incremental else 96
        answer = kp_admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                        configs={"retention.ms": str(hours * 3_600_000)})],
                                        incremental=incremental)
        assert answer == {"topic": {name: "OK"}}
        assert summary(kinesis, name)["RetentionPeriodHours"] == hours
    answer = kp_admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                    configs={"cleanup.policy": "compact"})])
    assert "InvalidConfigurationError" in answer["topic"][name]
    assert summary(kinesis, name)["RetentionPeriodHours"] == 96

    kp_admin.create_partitions({name: NewPartitions(5)})
    # 3 shards, 5 asked: one split of a widest shard (closes one, adds two) = 5 partitions, 4 open.
    assert all_shards(kinesis, name) == 5 and open_shards(kinesis, name) == 4

    kp_admin.delete_topics([name])
    assert gone(kinesis, name)
    assert name not in kp_admin.list_topics()


def test_kafka_python_errors(kp_admin, kinesis):
    from kafka.admin import NewPartitions, NewTopic
    from kafka.errors import (InvalidConfigurationError, InvalidPartitionsError, InvalidReplicationFactorError,
                              InvalidTopicError, TopicAlreadyExistsError, UnknownTopicOrPartitionError)
    name = topic_name()
    kp_admin.create_topics([NewTopic(name, 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([NewTopic(name, 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        kp_admin.create_topics([NewTopic(topic_name(), 1, 3)])
    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics([NewTopic("bad/name", 1, 1)])
    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics([NewTopic("x" * 129, 1, 1)])
    for bad in ({"cleanup.policy": "compact"}, {"retention.ms": "3600000"}, {"no.such": "1"}):
        other = topic_name()
        with pytest.raises(InvalidConfigurationError):
            kp_admin.create_topics([NewTopic(other, 1, 1, topic_configs=bad)])
        assert gone(kinesis, other)
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({name: NewPartitions(1)})
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics([topic_name()])
    # validate_only creates nothing
    other = topic_name()
    kp_admin.create_topics([NewTopic(other, 2, 1)], validate_only=True)
    assert gone(kinesis, other)
    kp_admin.create_partitions({name: NewPartitions(4)}, validate_only=True)
    assert all_shards(kinesis, name) == 1


# confluent-kafka


def wait_all(futures: dict) -> dict:
    return {k: f.result(timeout=20) for k, f in futures.items()}


def test_confluent_kafka_admin(ck_admin, kinesis):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                       ResourceType)
    name = topic_name()
    wait_all(ck_admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=-1,
                                              config={"retention.ms": str(DAY_MS * 3)})]))
    got = summary(kinesis, name)
    assert got["OpenShardCount"] == 2 and got["RetentionPeriodHours"] == 72

    wait_all(ck_admin.create_partitions([NewPartitions(name, 6)]))
    # 2 -> 6: two splits, each closing one shard and adding two: 6 partitions, 4 open shards.
    assert all_shards(kinesis, name) == 6 and open_shards(kinesis, name) == 4

    resource = ConfigResource(ResourceType.TOPIC, name)
    described = wait_all(ck_admin.describe_configs([resource]))[resource]
    assert described["retention.ms"].value == str(DAY_MS * 3)
    assert described["cleanup.policy"].value == "delete"

    change = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", str(DAY_MS * 10), incremental_operation=AlterConfigOpType.SET)])
    wait_all(ck_admin.incremental_alter_configs([change]))
    assert summary(kinesis, name)["RetentionPeriodHours"] == 240
    # DELETE: back to the default (24 h); other configs untouched.
    change = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    wait_all(ck_admin.incremental_alter_configs([change]))
    assert summary(kinesis, name)["RetentionPeriodHours"] == 24

    bad = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException) as raised:
        wait_all(ck_admin.incremental_alter_configs([bad]))
    assert raised.value.args[0].code() == errors.INVALID_CONFIG

    broker = ConfigResource(ResourceType.BROKER, "0")
    entries = wait_all(ck_admin.describe_configs([broker]))[broker]
    assert entries["log.retention.hours"].value == "24" and entries["log.retention.hours"].is_read_only

    with pytest.raises(KafkaException) as raised:
        wait_all(ck_admin.create_topics([NewTopic(name, 1)]))
    assert raised.value.args[0].code() == errors.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as raised:
        wait_all(ck_admin.create_partitions([NewPartitions(name, 3)]))
    assert raised.value.args[0].code() == errors.INVALID_PARTITIONS

    wait_all(ck_admin.delete_topics([name]))
    assert gone(kinesis, name)


# Raw frames: what no client above shows


def test_create_topics_v7_answers_configs_and_partitions(kafka, kinesis):
    name = topic_name()
    with socket.create_connection(address(kafka)) as sock:
        body = call(sock, 19, 7, {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                               "assignments": [], "configs": []}], "timeout": 10000,
                                  "validate_only": False})
    result = body.topics[0]
    assert result.error_code == 0 and result.num_partitions == 1 and result.replication_factor == 1
    assert {c.name: c.value for c in result.configs}["retention.ms"] == str(DAY_MS)
    assert summary(kinesis, name)["OpenShardCount"] == 1


def test_delete_topics_by_id(kafka, kinesis):
    name = topic_name()
    with socket.create_connection(address(kafka)) as sock:
        made = call(sock, 19, 7, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1,
                                               "assignments": [], "configs": []}], "timeout": 10000})
        made_id = made.topics[0].topic_id
        body = call(sock, 20, 6, {"topics": [{"name": None, "topic_id": made_id}], "timeout": 10000})
        assert body.responses[0].error_code == 0 and body.responses[0].name == name
        body = call(sock, 20, 6, {"topics": [{"name": None, "topic_id": made_id}], "timeout": 10000})
        assert body.responses[0].error_code == errors.UNKNOWN_TOPIC_ID
    assert gone(kinesis, name)


def test_create_partitions_waits_for_each_split(tmp_path_factory):
    """With the stream UPDATING for a while after each split, the splits follow one another."""
    proc = start_server(tmp_path_factory, kafka_port=free_port(), update_stream_ms=150, create_stream_ms=50)
    try:
        kinesis = client_for(proc.url)
        name = topic_name()
        with socket.create_connection(address(proc)) as sock:
            made = call(sock, 19, 5, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                                   "assignments": [], "configs": []}], "timeout": 10000})
            assert made.topics[0].error_code == 0
            assert summary(kinesis, name)["StreamStatus"] == "ACTIVE"  # answered once ACTIVE
            body = call(sock, 37, 3, {"topics": [{"name": name, "count": 7, "assignments": None}],
                                      "timeout": 10000, "validate_only": False})
        assert body.results[0].error_code == 0
        assert all_shards(kinesis, name) == 7 and open_shards(kinesis, name) == 4
    finally:
        proc.stop()


def test_alter_configs_replaces_the_whole_set(kafka, kinesis):
    """AlterConfigs (not incremental) resets what it leaves out, as Kafka's does (kafka-python
    sends the modified ones back for that reason); validate_only changes nothing."""
    name = topic_name()
    with socket.create_connection(address(kafka)) as sock:
        call(sock, 19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                        "configs": [{"name": "retention.ms", "value": str(DAY_MS * 2)}]}],
                           "timeout": 10000})
        resource = {"resource_type": 2, "resource_name": name,
                    "configs": [{"name": "cleanup.policy", "value": "delete"}]}
        body = call(sock, 33, 2, {"resources": [resource], "validate_only": True})
        assert body.responses[0].error_code == 0
        assert summary(kinesis, name)["RetentionPeriodHours"] == 48
        body = call(sock, 33, 2, {"resources": [resource], "validate_only": False})
        assert body.responses[0].error_code == 0
        assert summary(kinesis, name)["RetentionPeriodHours"] == 24
        broker = {"resource_type": 4, "resource_name": "0", "configs": [{"name": "num.partitions", "value": "3"}]}
        body = call(sock, 33, 2, {"resources": [broker], "validate_only": False})
        assert body.responses[0].error_code == errors.INVALID_REQUEST
