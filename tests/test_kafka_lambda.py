"""Lambda event source mappings on a topic of kinesim's Kafka listener, created as a user creates a
self-managed Apache Kafka mapping (`SelfManagedEventSource` with the listener as bootstrap server,
`Topics`): the function gets AWS's SelfManagedKafka event, progress is the consumer group's
committed offsets (read back through the Kafka port), a failing batch is retried and never
skipped, and the API answers in AWS's shapes and words (kinesim/functions/kafka_mappings.py and
kafka_source.py cite the evidence)."""
from __future__ import annotations

import base64
import io
import json
import os
import textwrap
import time
import uuid
import zipfile
from datetime import datetime

import pytest
from botocore.exceptions import ClientError
from console_api import ConsoleApi
from test_mappings_e2e import ROLE, Seen, wait_until

from kinesim.server import free_port

from conftest import client_for, start_server

CONNECTION_ERROR = "PROBLEM: Connection error. Please check your event source connection configuration."

# The test function: records every event it gets; a value starting with "fail-until-released"
# fails the invocation until the test creates STATE_DIR/release; one starting with "report-once"
# is reported in batchItemFailures the first time it comes.
HANDLER = '''
import base64, fcntl, json, os, time

def _first_time(tag):
    try:
        os.close(os.open(os.path.join(os.environ["STATE_DIR"], tag), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False

def handler(event, context):
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"at": time.time(), "event": event}) + "\\n")
    failures = []
    for where, records in event.get("records", {}).items():
        for record in records:
            value = base64.b64decode(record.get("value", ""))
            released = os.path.exists(os.path.join(os.environ["STATE_DIR"], "release"))
            if value.startswith(b"fail-until-released") and not released:
                raise ValueError("not released yet: offset %d" % record["offset"])
            if value.startswith(b"report-once") and _first_time("%s@%d" % (where, record["offset"])):
                failures.append({"itemIdentifier": {"topic-partition": where, "offset": record["offset"]}})
    return {"batchItemFailures": failures}
'''


class KafkaSeen(Seen):
    """What the function got: `records()` every record of every invocation, in order."""

    def records(self) -> list[dict]:
        return [r for inv in self.invocations() for rs in inv["event"]["records"].values() for r in rs]

    def values(self) -> list[bytes]:
        return [base64.b64decode(r["value"]) for r in self.records() if "value" in r]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def lam(kafka):
    return client_for(kafka.url, "lambda")


def bootstrap(kafka) -> str:
    return f"localhost:{kafka.settings.kafka_port}"


def new_topic(kafka, shards: int = 1) -> str:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    kinesis = client_for(kafka.url)
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    return name


def deploy(lam, tmp_path) -> tuple[str, KafkaSeen, str]:
    """The recording function: (name, what it got, its state directory)."""
    name = "kfn-" + uuid.uuid4().hex[:10]
    state = tmp_path / f"{name}-state"
    state.mkdir()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
    seen = str(tmp_path / f"{name}-seen.jsonl")
    lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                        Code={"ZipFile": buf.getvalue()}, Timeout=10,
                        Environment={"Variables": {"SEEN_FILE": seen, "STATE_DIR": str(state)}})
    return name, KafkaSeen(seen), str(state)


def map_topic(lam, kafka, topic: str, function: str, **settings) -> dict:
    """CreateEventSourceMapping as a user writes it for a self-managed Kafka cluster."""
    return lam.create_event_source_mapping(
        FunctionName=function, Topics=[topic],
        SelfManagedEventSource={"Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": [bootstrap(kafka)]}}, **settings)


def committed(kafka, group: str) -> dict[int, int]:
    """The group's committed offsets by partition, as Kafka tools read them (OffsetFetch)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(kafka))
    try:
        return {tp.partition: o.offset for tp, o in admin.list_group_offsets({group: None})[group].items()}
    finally:
        admin.close()


def producer(kafka):
    from kafka import KafkaProducer
    return KafkaProducer(bootstrap_servers=bootstrap(kafka), acks="all")


def result_of(lam, mapping_uuid: str) -> str:
    return lam.get_event_source_mapping(UUID=mapping_uuid)["LastProcessingResult"]


# the event and the group's offsets --------------------------------------------------------------


def test_kafka_and_kinesis_records_reach_the_function_in_aws_kafka_shape(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, seen, _ = deploy(lam, tmp_path)
    p = producer(kafka)
    try:
        p.send(topic, key=b"customer-1", value=b'{"n": 1}', headers=[("source", b"web"), ("trace", b"\x00\xff")],
               timestamp_ms=1545084650987).get(timeout=30)
        p.send(topic, key=None, value=b"no key", timestamp_ms=1545084650988).get(timeout=30)
    finally:
        p.close()
    kinesis = client_for(kafka.url)
    before = time.time()
    kinesis.put_record(StreamName=topic, Data=b"through kinesis", PartitionKey="pk-7")
    after = time.time()

    mapping = map_topic(lam, kafka, topic, function, StartingPosition="TRIM_HORIZON", BatchSize=10)
    wait_until(lambda: len(seen.records()) >= 3, timeout=90, step=0.1, what="the function to get the 3 records")

    events = [inv["event"] for inv in seen.invocations()]
    for event in events:
        assert set(event) == {"eventSource", "bootstrapServers", "records"}
        assert event["eventSource"] == "SelfManagedKafka"
        assert event["bootstrapServers"] == bootstrap(kafka)
        assert list(event["records"]) == [f"{topic}-0"]  # one partition's records, keyed topic-partition
    first, second, third = seen.records()
    assert list(first) == ["topic", "partition", "offset", "timestamp", "timestampType", "key", "value", "headers"]
    assert first == {"topic": topic, "partition": 0, "offset": 0, "timestamp": 1545084650987,
                     "timestampType": "CREATE_TIME", "key": base64.b64encode(b"customer-1").decode(),
                     "value": base64.b64encode(b'{"n": 1}').decode(),
                     "headers": [{"source": list(b"web")}, {"trace": [0, 255]}]}
    assert "key" not in second  # a null key: no `key`
    assert (second["offset"], second["timestamp"], base64.b64decode(second["value"]), second["headers"]) == \
        (1, 1545084650988, b"no key", [])
    # Put through Kinesis: the partition key is the key, the arrival time the timestamp.
    assert (third["offset"], base64.b64decode(third["key"]), base64.b64decode(third["value"]), third["headers"]) == \
        (2, b"pk-7", b"through kinesis", [])
    assert int(before * 1000) - 1 <= third["timestamp"] <= int(after * 1000) + 1

    # The mapping's consumer group (its UUID by default) committed past the three records.
    group = mapping["SelfManagedKafkaEventSourceConfig"]["ConsumerGroupId"]
    assert group == mapping["UUID"]
    wait_until(lambda: committed(kafka, group) == {0: 3}, timeout=60, step=0.1, what="the group's offset 3")
    wait_until(lambda: result_of(lam, mapping["UUID"]) == "OK", timeout=30, step=0.1, what="LastProcessingResult OK")

    # Kafka tools see the group (no member: the mapping commits as a simple consumer).
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(kafka))
    try:
        assert group in [g["group_id"] for g in admin.list_groups()]
        described = admin.describe_groups([group])[group]
        assert (described["group_state"], described["members"]) == ("Empty", [])
    finally:
        admin.close()


def test_each_partition_in_order_and_batches_of_one_partition(kafka, lam, tmp_path):
    topic = new_topic(kafka, shards=2)
    function, seen, _ = deploy(lam, tmp_path)
    p = producer(kafka)
    sent = {0: [], 1: []}
    try:
        for i in range(40):
            partition = i % 2
            p.send(topic, partition=partition, key=b"k%d" % i, value=b"v%d" % i).get(timeout=30)
            sent[partition].append(b"v%d" % i)
    finally:
        p.close()
    mapping = map_topic(lam, kafka, topic, function, StartingPosition="TRIM_HORIZON", BatchSize=7,
                        SelfManagedKafkaEventSourceConfig={"ConsumerGroupId": f"grp-{topic}"})
    wait_until(lambda: len(seen.records()) >= 40, timeout=90, step=0.1, what="every record")
    for inv in seen.invocations():
        (key, records), = inv["event"]["records"].items()  # one partition per invocation
        assert 1 <= len(records) <= 7
        assert {f"{r['topic']}-{r['partition']}" for r in records} == {key}
    for partition in (0, 1):
        got = [r for r in seen.records() if r["partition"] == partition]
        assert [base64.b64decode(r["value"]) for r in got] == sent[partition]  # in order, each once
        assert [r["offset"] for r in got] == list(range(20))
    assert mapping["SelfManagedKafkaEventSourceConfig"]["ConsumerGroupId"] == f"grp-{topic}"
    wait_until(lambda: committed(kafka, f"grp-{topic}") == {0: 20, 1: 20}, timeout=60, step=0.1,
               what="both partitions committed")

    # The web console: the function's page lists the mapping by its topic, nothing behind; the
    # stream's page lists the group among its readers, with no lag.
    [row] = ConsoleApi(kafka.url, "/functions").get("/" + function).json()["mappings"]
    assert (row["source_kind"], row["source"], row["source_arn"], row["lag_records"]) == \
        ("kafka", topic, bootstrap(kafka), 0)
    assert sum(row["outcomes"].values()) >= 6  # 20 records a partition in batches of at most 7
    readers = ConsoleApi(kafka.url, "/streams").get(f"/{topic}").json()["readers"]
    [group] = [r for r in readers if r["kind"] == "kafka" and r["name"] == f"grp-{topic}"]
    assert {p["partition"]: (p["committed"], p["lag"]) for p in group["shards"]} == {0: (20, 0), 1: (20, 0)}


def test_a_failing_batch_is_retried_not_skipped_and_its_offset_is_not_committed(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, seen, state = deploy(lam, tmp_path)
    p = producer(kafka)
    try:
        for value in (b"first", b"fail-until-released", b"after"):
            p.send(topic, value=value).get(timeout=30)
    finally:
        p.close()
    mapping = map_topic(lam, kafka, topic, function, StartingPosition="TRIM_HORIZON", BatchSize=1)
    group = mapping["UUID"]

    def failed_times() -> int:
        return sum(1 for r in seen.records() if r["offset"] == 1)
    wait_until(lambda: failed_times() >= 3, timeout=90, step=0.1, what="the failing record to be retried")
    assert result_of(lam, mapping["UUID"]) == "PROBLEM: Function call failed"
    assert committed(kafka, group) == {0: 1}  # past "first" only
    assert b"after" not in seen.values()       # nothing after the failing record was sent meanwhile

    open(os.path.join(state, "release"), "w").close()
    wait_until(lambda: b"after" in seen.values(), timeout=60, step=0.1, what="the records after the failure")
    values = seen.values()
    assert values[0] == b"first" and values[-2:] == [b"fail-until-released", b"after"]
    assert set(values[1:-1]) == {b"fail-until-released"}  # the same record again and again, none skipped
    wait_until(lambda: committed(kafka, group) == {0: 3}, timeout=60, step=0.1, what="offset 3 committed")
    wait_until(lambda: result_of(lam, mapping["UUID"]) == "OK", timeout=30, step=0.1, what="OK again")


def test_report_batch_item_failures_resumes_from_the_reported_record(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, seen, _ = deploy(lam, tmp_path)
    p = producer(kafka)
    try:
        for value in (b"a", b"report-once", b"b"):
            p.send(topic, value=value).get(timeout=30)
    finally:
        p.close()
    mapping = map_topic(lam, kafka, topic, function, StartingPosition="TRIM_HORIZON", BatchSize=10,
                        MaximumBatchingWindowInSeconds=1, FunctionResponseTypes=["ReportBatchItemFailures"])
    wait_until(lambda: committed(kafka, mapping["UUID"]) == {0: 3}, timeout=60, step=0.1, what="offset 3")
    batches = [[base64.b64decode(r["value"]) for rs in inv["event"]["records"].values() for r in rs]
               for inv in seen.invocations()]
    # The reported record ({"topic-partition", "offset"}) and what follows it, again; not what came before.
    assert batches == [[b"a", b"report-once", b"b"], [b"report-once", b"b"]]


def test_latest_starts_after_what_exists_and_a_group_resumes_from_its_offset(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, seen, _ = deploy(lam, tmp_path)
    group = f"resume-{topic}"
    p = producer(kafka)
    try:
        p.send(topic, value=b"before the mapping").get(timeout=30)
        mapping = map_topic(lam, kafka, topic, function, StartingPosition="LATEST",
                            SelfManagedKafkaEventSourceConfig={"ConsumerGroupId": group})
        # LATEST's start is committed at once: the group exists, at the log's end.
        wait_until(lambda: committed(kafka, group) == {0: 1}, timeout=60, step=0.1, what="LATEST committed")
        p.send(topic, value=b"one").get(timeout=30)
        wait_until(lambda: seen.values() == [b"one"], timeout=60, step=0.1, what="only the new record")
        wait_until(lambda: committed(kafka, group) == {0: 2}, timeout=60, step=0.1, what="offset 2")
        lam.delete_event_source_mapping(UUID=mapping["UUID"])
        wait_until(lambda: not lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"],
                   timeout=30, step=0.1, what="the mapping to go")
        p.send(topic, value=b"two").get(timeout=30)
    finally:
        p.close()
    # The group has an offset: TRIM_HORIZON is ignored (the guide, "Customizable consumer group ID").
    again = map_topic(lam, kafka, topic, function, StartingPosition="TRIM_HORIZON",
                      SelfManagedKafkaEventSourceConfig={"ConsumerGroupId": group})
    wait_until(lambda: b"two" in seen.values(), timeout=60, step=0.1, what="the record after the offset")
    assert seen.values() == [b"one", b"two"]
    wait_until(lambda: committed(kafka, group) == {0: 3}, timeout=60, step=0.1, what="offset 3")
    lam.delete_event_source_mapping(UUID=again["UUID"])


def test_after_a_kill_the_mapping_resumes_from_the_group_offset(tmp_path_factory, tmp_path):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    try:
        lam = client_for(proc.url, "lambda")
        topic = new_topic(proc)
        function, seen, _ = deploy(lam, tmp_path)
        p = producer(proc)
        try:
            for i in range(5):
                p.send(topic, value=b"v%d" % i).get(timeout=30)
        finally:
            p.close()
        mapping = map_topic(lam, proc, topic, function, StartingPosition="TRIM_HORIZON", BatchSize=2)
        wait_until(lambda: committed(proc, mapping["UUID"]) == {0: 5}, timeout=60, step=0.1, what="offset 5")
        proc.kill()   # kill -9
        proc.start()  # same ports, same data directory
        p = producer(proc)
        try:
            for i in range(5, 7):
                p.send(topic, value=b"v%d" % i).get(timeout=30)
        finally:
            p.close()
        wait_until(lambda: b"v6" in seen.values(), timeout=90, step=0.1, what="the records after the restart")
        assert seen.values() == [b"v%d" % i for i in range(7)]  # from the committed offset: none again, none lost
        wait_until(lambda: committed(proc, mapping["UUID"]) == {0: 7}, timeout=60, step=0.1, what="offset 7")
    finally:
        proc.stop()


def test_filter_criteria_on_the_value(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, seen, _ = deploy(lam, tmp_path)
    p = producer(kafka)
    try:
        for value in (b'{"device_ID": "AB1234"}', b'{"device_ID": "CD5678"}', b"plain AB text",
                      b'{"device_ID": "AB9"}'):
            p.send(topic, value=value).get(timeout=30)
    finally:
        p.close()
    # The guide's example (kafka-filtering): only filtering on `value`, JSON values parsed.
    pattern = json.dumps({"value": {"device_ID": [{"prefix": "AB"}]}})
    mapping = map_topic(lam, kafka, topic, function, StartingPosition="TRIM_HORIZON",
                        FilterCriteria={"Filters": [{"Pattern": pattern}]})
    wait_until(lambda: committed(kafka, mapping["UUID"]) == {0: 4}, timeout=60, step=0.1,
               what="every record passed (sent or filtered out)")
    assert seen.values() == [b'{"device_ID": "AB1234"}', b'{"device_ID": "AB9"}']
    assert [r["offset"] for r in seen.records()] == [0, 3]


def test_a_bootstrap_server_that_is_not_kinesim_says_it_cannot_connect(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, seen, _ = deploy(lam, tmp_path)
    # AWS accepts any broker address and finds out when it polls.
    mapping = lam.create_event_source_mapping(
        FunctionName=function, Topics=[topic], StartingPosition="TRIM_HORIZON",
        SelfManagedEventSource={"Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": ["kafka.example.com:9092"]}})
    assert mapping["State"] == "Creating"
    client_for(kafka.url).put_record(StreamName=topic, Data=b"x", PartitionKey="k")
    wait_until(lambda: result_of(lam, mapping["UUID"]) == CONNECTION_ERROR, timeout=60, step=0.1,
               what="the connection error")
    got = lam.get_event_source_mapping(UUID=mapping["UUID"])
    assert (got["State"], got["StateTransitionReason"]) == ("Enabled", "USER_INITIATED")
    assert seen.invocations() == []
    assert committed(kafka, mapping["UUID"]) == {}  # nothing read, nothing committed


# the API --------------------------------------------------------------------------------------------


def test_create_get_list_update_delete_answer_in_aws_shape(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, _, _ = deploy(lam, tmp_path)
    created = map_topic(lam, kafka, topic, function)  # no StartingPosition, no BatchSize, no group id
    # AWS's answer as recorded (LocalStack's test_create_event_source_self_managed snapshot).
    assert created["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert created["State"] == "Creating"
    assert created["StartingPosition"] == "TRIM_HORIZON"
    assert created["BatchSize"] == 100
    assert created["StateTransitionReason"] == "USER_INITIATED"
    assert created["LastProcessingResult"] == "No records processed"
    assert created["Topics"] == [topic]
    assert created["SelfManagedEventSource"] == {"Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": [bootstrap(kafka)]}}
    assert created["SelfManagedKafkaEventSourceConfig"] == {"ConsumerGroupId": created["UUID"]}
    assert created["FunctionArn"].endswith(f":function:{function}")
    assert created["EventSourceMappingArn"].endswith(f":event-source-mapping:{created['UUID']}")
    assert isinstance(created["LastModified"], datetime)
    for absent in ("EventSourceArn", "MaximumBatchingWindowInSeconds", "ParallelizationFactor", "DestinationConfig"):
        assert absent not in created

    got = lam.get_event_source_mapping(UUID=created["UUID"])
    assert got["State"] == "Enabled"
    assert {k: got[k] for k in ("UUID", "Topics", "SelfManagedEventSource", "SelfManagedKafkaEventSourceConfig",
                                "StartingPosition", "BatchSize", "StateTransitionReason")} == \
        {k: created[k] for k in ("UUID", "Topics", "SelfManagedEventSource", "SelfManagedKafkaEventSourceConfig",
                                 "StartingPosition", "BatchSize", "StateTransitionReason")}
    listed = lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    assert [m["UUID"] for m in listed] == [created["UUID"]]
    assert listed[0]["Topics"] == [topic]

    updated = lam.update_event_source_mapping(UUID=created["UUID"], BatchSize=50, MaximumBatchingWindowInSeconds=2,
                                              Enabled=False)
    assert (updated["State"], updated["BatchSize"], updated["MaximumBatchingWindowInSeconds"]) == ("Disabling", 50, 2)
    wait_until(lambda: lam.get_event_source_mapping(UUID=created["UUID"])["State"] == "Disabled", timeout=30,
               what="Disabled")
    with pytest.raises(ClientError) as e:  # "After creating ... you cannot update this value" (the guide)
        lam.update_event_source_mapping(UUID=created["UUID"],
                                        SelfManagedKafkaEventSourceConfig={"ConsumerGroupId": "other"})
    assert e.value.response["Error"]["Code"] == "InvalidParameterValueException"
    with pytest.raises(ClientError) as e:
        lam.update_event_source_mapping(UUID=created["UUID"], ParallelizationFactor=2)
    assert e.value.response["Error"] == {
        "Code": "InvalidParameterValueException",
        "Message": "Unsupported ParallelizationFactor parameter for given event source mapping type."}

    deleted = lam.delete_event_source_mapping(UUID=created["UUID"])
    assert deleted["State"] == "Deleting" and deleted["Topics"] == [topic]
    with pytest.raises(ClientError) as e:
        lam.get_event_source_mapping(UUID=created["UUID"])
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_refusals_have_aws_types_and_texts(kafka, lam, tmp_path):
    topic = new_topic(kafka)
    function, _, _ = deploy(lam, tmp_path)
    endpoints = {"Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": [bootstrap(kafka)]}}

    def refused(**params) -> dict:
        with pytest.raises(ClientError) as e:
            lam.create_event_source_mapping(FunctionName=function, **params)
        return e.value.response["Error"]

    assert refused(SelfManagedEventSource=endpoints) == {
        "Code": "InvalidParameterValueException", "Message": "Required 'topics' parameter is missing."}
    big = refused(SelfManagedEventSource=endpoints, Topics=[topic], BatchSize=10001)
    assert big["Code"] == "ValidationException"
    assert "Member must have value less than or equal to 10000" in big["Message"]
    assert refused(SelfManagedEventSource=endpoints, Topics=[topic], ParallelizationFactor=2) == {
        "Code": "InvalidParameterValueException",
        "Message": "Unsupported ParallelizationFactor parameter for given event source mapping type."}
    with pytest.raises(ClientError) as e:
        lam.create_event_source_mapping(FunctionName="no-such-fn", SelfManagedEventSource=endpoints, Topics=[topic])
    assert e.value.response["Error"] == {"Code": "InvalidParameterValueException", "Message": "Function does not exist"}
    assert refused(SelfManagedEventSource=endpoints, Topics=[topic], StartingPosition="AT_TIMESTAMP") == {
        "Code": "InvalidParameterValueException",
        "Message": "StartingPositionTimestamp is required when StartingPosition is AT_TIMESTAMP."}

    first = lam.create_event_source_mapping(FunctionName=function, SelfManagedEventSource=endpoints, Topics=[topic])
    function_arn = first["FunctionArn"]
    with pytest.raises(ClientError) as e:  # AWS's text, as recorded
        lam.create_event_source_mapping(FunctionName=function, Topics=[topic], SelfManagedEventSource={
            "Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": [bootstrap(kafka), "other:9092"]}})
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert e.value.response["Error"] == {
        "Code": "ResourceConflictException",
        "Message": f'An event source mapping with event source ("{bootstrap(kafka)},other:9092"), function '
                   f'("{function_arn}"), topics ("{topic}") already exists. Please update or delete the existing '
                   f"mapping with UUID {first['UUID']}"}
    lam.delete_event_source_mapping(UUID=first["UUID"])


# CloudFormation / SAM ------------------------------------------------------------------------------


SAM_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Orders:
    Type: AWS::Kinesis::Stream
    Properties:
      Name: {topic}
      ShardCount: 1
  Reader:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {stack}-reader
      Runtime: python3.12
      Handler: index.handler
      Timeout: 10
      Environment:
        Variables:
          SEEN_FILE: {seen}
          STATE_DIR: {state}
      InlineCode: |
{code}
      Events:
        Orders:
          Type: SelfManagedKafka
          Properties:
            KafkaBootstrapServers: ["{bootstrap}"]
            Topics: ["{topic}"]
            StartingPosition: TRIM_HORIZON
            ConsumerGroupId: {stack}-group
            SourceAccessConfigurations:
              - Type: VPC_SUBNET
                URI: subnet:subnet-0123456789abcdef0
              - Type: VPC_SECURITY_GROUP
                URI: security_group:sg-0123456789abcdef0
"""


def test_a_sam_self_managed_kafka_event_makes_the_mapping(kafka, lam, tmp_path, capsys):
    from test_deploy import deploy as run_deploy

    stack = "kafka" + uuid.uuid4().hex[:8]
    topic = f"{stack}-orders"
    (tmp_path / "state").mkdir()
    seen = KafkaSeen(str(tmp_path / "seen.jsonl"))
    path = tmp_path / "template.yaml"
    path.write_text(SAM_TEMPLATE.format(stack=stack, topic=topic, seen=seen.path, state=tmp_path / "state",
                                        bootstrap=bootstrap(kafka), code=textwrap.indent(HANDLER.strip("\n"), " " * 8)))
    code, actions, out, err = run_deploy(capsys, kafka.url, str(path), "--stack-name", stack)
    assert code == 0, err
    mappings = lam.list_event_source_mappings(FunctionName=f"{stack}-reader")["EventSourceMappings"]
    assert len(mappings) == 1
    mapping = mappings[0]
    assert mapping["Topics"] == [topic]
    assert mapping["SelfManagedEventSource"] == {"Endpoints": {"KAFKA_BOOTSTRAP_SERVERS": [bootstrap(kafka)]}}
    assert mapping["SelfManagedKafkaEventSourceConfig"]["ConsumerGroupId"] == f"{stack}-group"
    assert [c["Type"] for c in mapping["SourceAccessConfigurations"]] == ["VPC_SUBNET", "VPC_SECURITY_GROUP"]
    p = producer(kafka)
    try:
        p.send(topic, key=b"k", value=b"from a template").get(timeout=30)
    finally:
        p.close()
    wait_until(lambda: seen.values() == [b"from a template"], timeout=90, step=0.1, what="the deployed function")
    wait_until(lambda: committed(kafka, f"{stack}-group") == {0: 1}, timeout=60, step=0.1, what="offset 1")
