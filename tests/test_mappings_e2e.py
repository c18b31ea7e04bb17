"""Kinesis event source mappings end to end: boto3 against a real server, real handlers in worker
processes. The handler (HANDLER below) appends every event it is sent to a file named by its
environment (it runs on this machine), so a test sees exactly what each invocation carried, in the
order the invocations started, and which worker process ran it.

The MaximumRecordAgeInSeconds path is tested in tests/test_pollers.py only: AWS's minimum is 60 s
and kinesim has (deliberately) no setting that scales a mapping's time.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
import time
import urllib.request
import uuid
import zipfile
from collections import defaultdict

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

REGION, ACCOUNT = "us-east-1", "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/stream-reader-role"
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

# What each record's data asks the handler to do (anything else: nothing).
#   poison...       raise, every time (a function error)
#   sleep-once...   sleep past any test timeout, the first time only (the mapping's retry succeeds)
#   report-once...  report the record in batchItemFailures, the first time only
#   slow...         sleep 20 ms (keeps a batch in flight)
HANDLER = '''
import base64, fcntl, json, os, time

def _first_time(tag):
    """True the first time: a marker file, so it holds across worker processes."""
    try:
        os.close(os.open(os.path.join(os.environ["STATE_DIR"], tag), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False

def handler(event, context):
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"at": time.time(), "pid": os.getpid(), "request_id": context.aws_request_id,
                            "event": event}) + "\\n")
    failures = []
    for record in event["Records"]:
        data = base64.b64decode(record["kinesis"]["data"])
        seq = record["kinesis"]["sequenceNumber"]
        if data.startswith(b"poison"):
            raise ValueError("poison record " + seq)
        if data.startswith(b"sleep-once") and _first_time(seq):
            time.sleep(60)
        if data.startswith(b"report-once") and _first_time(seq):
            failures.append({"itemIdentifier": seq})
        if data.startswith(b"slow"):
            time.sleep(0.02)
    return {"batchItemFailures": failures}
'''


def handler_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
    return buf.getvalue()


def stream_arn(name: str) -> str:
    return f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{name}"


def wait_until(predicate, timeout: float = 30.0, what: str = "condition", step: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)


class Seen:
    """What one function's handler was sent: its invocations, oldest first."""

    def __init__(self, path: str):
        self.path = path

    def invocations(self) -> list[dict]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def batches(self) -> list[list[bytes]]:
        """Each invocation's records' data."""
        return [[base64.b64decode(r["kinesis"]["data"]) for r in inv["event"]["Records"]]
                for inv in self.invocations()]

    def records(self) -> list[dict]:
        """Every record of every invocation, in invocation order (repeats included)."""
        return [r for inv in self.invocations() for r in inv["event"]["Records"]]

    def data(self) -> list[bytes]:
        return [d for batch in self.batches() for d in batch]


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3", s3={"addressing_style": "path"})


def deploy(client, tmp_path, name: str | None = None, **settings) -> tuple[str, Seen]:
    """Create the recording function; returns its name and what it sees."""
    name = name or "fn-" + uuid.uuid4().hex[:10]
    state = tmp_path / f"{name}-state"
    state.mkdir()
    seen_file = str(tmp_path / f"{name}-seen.jsonl")
    client.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                           Code={"ZipFile": handler_zip()}, Timeout=settings.pop("Timeout", 10),
                           Environment={"Variables": {"SEEN_FILE": seen_file, "STATE_DIR": str(state)}})
    return name, Seen(seen_file)


@pytest.fixture
def function(lambda_client, tmp_path):
    """deploy(**settings) -> (name, Seen); the functions and their mappings are deleted afterwards."""
    names = []

    def make(**settings) -> tuple[str, Seen]:
        name, seen = deploy(lambda_client, tmp_path, **settings)
        names.append(name)
        return name, seen
    yield make
    for name in names:
        for m in lambda_client.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
            lambda_client.delete_event_source_mapping(UUID=m["UUID"])
        lambda_client.delete_function(FunctionName=name)


def map_stream(client, stream: str, function: str, **settings) -> dict:
    params = {"StartingPosition": "TRIM_HORIZON", "BatchSize": 10, **settings}
    return client.create_event_source_mapping(EventSourceArn=stream_arn(stream), FunctionName=function, **params)


def read_stream(kinesis, stream: str) -> list[dict]:
    out = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        it = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out += kinesis.get_records(ShardIterator=it)["Records"]
    return out


def result_of(client, uuid_: str) -> str:
    return client.get_event_source_mapping(UUID=uuid_)["LastProcessingResult"]


# 1. the event -------------------------------------------------------------------------------


def test_put_record_reaches_the_handler_as_aws_shapes_it_within_a_second(lambda_client, kinesis, make_stream,
                                                                          function):
    name, seen = function()
    stream = make_stream(2)
    map_stream(lambda_client, stream, name, StartingPosition="LATEST")
    data = b"\x00\x01 binary \xff\xfe payload"
    put_at = time.time()
    out = kinesis.put_record(StreamName=stream, Data=data, PartitionKey="customer-42")
    [invocation] = wait_until(seen.invocations, timeout=5, what="the invocation")
    assert invocation["at"] - put_at < 1.0
    [stored] = [r for r in read_stream(kinesis, stream) if r["SequenceNumber"] == out["SequenceNumber"]]
    [record] = invocation["event"]["Records"]
    assert invocation["event"] == {"Records": [record]}
    arrival = record["kinesis"].pop("approximateArrivalTimestamp")
    assert isinstance(arrival, float) and abs(arrival - stored["ApproximateArrivalTimestamp"].timestamp()) < 0.001
    assert record == {
        "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "customer-42",
                    "sequenceNumber": out["SequenceNumber"], "data": base64.b64encode(data).decode()},
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{out['ShardId']}:{out['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": ROLE,
        "awsRegion": REGION,
        "eventSourceARN": stream_arn(stream),
    }


# 2. ordering under load -----------------------------------------------------------------------


def test_every_record_once_and_in_order_per_partition_key(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream = make_stream(4)
    map_stream(lambda_client, stream, name, BatchSize=100)
    put = {}  # sequence number -> (partition key, data)
    for chunk in range(4):
        entries = [{"Data": b"r%d" % (chunk * 500 + i), "PartitionKey": f"key-{i % 50}"} for i in range(500)]
        out = kinesis.put_records(StreamName=stream, Records=entries)
        assert out["FailedRecordCount"] == 0
        for entry, result in zip(entries, out["Records"]):
            put[result["SequenceNumber"]] = (entry["PartitionKey"], entry["Data"])
    wait_until(lambda: len(seen.records()) >= 2000, timeout=20, what="2,000 records")
    records = seen.records()
    assert sorted(r["kinesis"]["sequenceNumber"] for r in records) == sorted(put)  # each once, none missing
    by_key = defaultdict(list)
    for r in records:
        seq = r["kinesis"]["sequenceNumber"]
        assert (r["kinesis"]["partitionKey"], base64.b64decode(r["kinesis"]["data"])) == put[seq]
        by_key[r["kinesis"]["partitionKey"]].append(int(seq))
    assert len(by_key) == 50
    for key, seqs in by_key.items():
        assert all(a < b for a, b in zip(seqs, seqs[1:])), key
    assert max(len(inv["event"]["Records"]) for inv in seen.invocations()) <= 100


# 3. errors: retries, destinations, bisect, partial failures, filters ---------------------------


def test_retries_until_maximum_then_the_invocation_record_goes_to_the_destination(
        lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream, dlq = make_stream(), make_stream()
    mapping = map_stream(lambda_client, stream, name, BatchSize=1, MaximumRetryAttempts=2,
                         DestinationConfig={"OnFailure": {"Destination": stream_arn(dlq)}})
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": stream_arn(dlq)}}
    kinesis.put_record(StreamName=stream, Data=b"ok-1", PartitionKey="k")
    poison = kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    kinesis.put_record(StreamName=stream, Data=b"ok-2", PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"ok-2"]], what="the record after the poison one")
    assert seen.batches() == [[b"ok-1"], [b"poison"], [b"poison"], [b"poison"], [b"ok-2"]]  # 1 try + 2 retries
    [failure] = read_stream(kinesis, dlq)
    assert failure["PartitionKey"] == poison["ShardId"]
    record = json.loads(failure["Data"])
    last_attempt = seen.invocations()[3]
    info = record.pop("KinesisBatchInfo")
    timestamp = record.pop("timestamp")
    assert record == {
        "requestContext": {"requestId": last_attempt["request_id"], "functionArn": mapping["FunctionArn"],
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
    }
    assert ISO_MS.fullmatch(timestamp)
    arrival = info.pop("approximateArrivalOfFirstRecord")
    assert ISO_MS.fullmatch(arrival) and info.pop("approximateArrivalOfLastRecord") == arrival
    assert info == {"shardId": poison["ShardId"], "startSequenceNumber": poison["SequenceNumber"],
                    "endSequenceNumber": poison["SequenceNumber"], "batchSize": 1, "streamArn": stream_arn(stream)}
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK after the last batch")


def test_bisect_isolates_one_poison_record(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream, dlq = make_stream(), make_stream()
    out = kinesis.put_records(StreamName=stream, Records=[
        {"Data": b"poison" if i == 5 else b"%d" % i, "PartitionKey": "k"} for i in range(8)])
    poison_seq = out["Records"][5]["SequenceNumber"]
    map_stream(lambda_client, stream, name, BatchSize=8, MaximumRetryAttempts=0, BisectBatchOnFunctionError=True,
               DestinationConfig={"OnFailure": {"Destination": stream_arn(dlq)}})
    wait_until(lambda: seen.batches()[-1:] == [[b"6", b"7"]], what="the last half")
    p = b"poison"
    assert seen.batches() == [  # halves until the poison record is alone; splitting costs no retries
        [b"0", b"1", b"2", b"3", b"4", p, b"6", b"7"], [b"0", b"1", b"2", b"3"], [b"4", p, b"6", b"7"],
        [b"4", p], [b"4"], [p], [b"6", b"7"]]
    [failure] = read_stream(kinesis, dlq)
    record = json.loads(failure["Data"])
    assert record["requestContext"]["approximateInvokeCount"] == 4  # every invocation that carried it
    info = record["KinesisBatchInfo"]
    assert (info["batchSize"], info["startSequenceNumber"], info["endSequenceNumber"]) == (1, poison_seq, poison_seq)


def test_report_batch_item_failures_resumes_from_the_reported_record(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream = make_stream()
    kinesis.put_records(StreamName=stream, Records=[
        {"Data": b"report-once-%d" % i if i in (4, 7) else b"%d" % i, "PartitionKey": "k"} for i in range(10)])
    mapping = map_stream(lambda_client, stream, name, FunctionResponseTypes=["ReportBatchItemFailures"])
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    wait_until(lambda: len(seen.invocations()) >= 2, what="the retry")
    time.sleep(0.3)
    full = [b"0", b"1", b"2", b"3", b"report-once-4", b"5", b"6", b"report-once-7", b"8", b"9"]
    # 4 and 7 are reported: the retry starts at the lowest one; 0-3 are done and not sent again.
    assert seen.batches() == [full, full[4:]]
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK")


def test_filter_criteria_pass_only_matching_records(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream = make_stream()
    patterns = [{"Pattern": json.dumps({"data": {"kind": ["click"], "ms": [{"numeric": ["<", 100]}]}})},
                {"Pattern": json.dumps({"partitionKey": [{"prefix": "vip-"}]})}]
    mapping = map_stream(lambda_client, stream, name, FilterCriteria={"Filters": patterns})
    assert mapping["FilterCriteria"] == {"Filters": patterns}
    sent = [(b'{"kind": "view", "ms": 1}', "a"), (b'{"kind": "click", "ms": 5}', "a"),
            (b'{"kind": "click", "ms": 500}', "a"), (b"not json", "a"), (b"not json either", "vip-1"),
            (b'{"kind": "click", "ms": 99}', "b")]
    for data, key in sent:
        kinesis.put_record(StreamName=stream, Data=data, PartitionKey=key)
    wait_until(lambda: len(seen.data()) >= 3, what="the matching records")
    time.sleep(0.3)
    assert seen.data() == [b'{"kind": "click", "ms": 5}', b"not json either", b'{"kind": "click", "ms": 99}']


# 4. a kill -9 and a restart -------------------------------------------------------------------


def test_checkpoints_survive_a_kill_and_restart(tmp_path_factory, tmp_path):
    proc = start_server(tmp_path_factory)
    try:
        client, kin = client_for(proc.url, "lambda"), client_for(proc.url)
        kin.create_stream(StreamName="orders", ShardCount=2)
        name, seen = deploy(client, tmp_path)
        map_stream(client, "orders", name, BatchSize=10)
        sent: list[str] = []

        def produce(kin, start: int, count: int) -> None:
            for first in range(start, start + count, 50):
                entries = [{"Data": b"slow-%d" % i, "PartitionKey": f"key-{i % 10}"} for i in range(first, first + 50)]
                out = kin.put_records(StreamName="orders", Records=entries)
                sent.extend(r["SequenceNumber"] for r in out["Records"])

        produce(kin, 0, 200)
        wait_until(lambda: len(seen.records()) >= 60, timeout=20, what="some records processed")
        proc.kill()  # kill -9 with batches in flight: a batch of 10 slow records takes 200 ms
        before = seen.invocations()
        assert len({r["kinesis"]["sequenceNumber"] for inv in before for r in inv["event"]["Records"]}) < 200
        proc.start()  # same port, same data directory
        client, kin = client_for(proc.url, "lambda"), client_for(proc.url)
        produce(kin, 200, 100)
        wait_until(lambda: {r["kinesis"]["sequenceNumber"] for r in seen.records()} >= set(sent), timeout=30,
                   what="every record processed")
    finally:
        proc.stop()
    counts = defaultdict(int)
    for r in seen.records():
        counts[r["kinesis"]["sequenceNumber"]] += 1
    assert set(counts) == set(sent)  # nothing processed zero times
    # Repeats only for the batch each shard had in flight at the kill: its last invocation before it
    # (a shard's next batch starts only after the previous one was checkpointed).
    in_flight = {}
    for inv in before:
        in_flight[inv["event"]["Records"][0]["eventID"].split(":")[0]] = inv
    allowed = {r["kinesis"]["sequenceNumber"] for inv in in_flight.values() for r in inv["event"]["Records"]}
    repeated = {seq for seq, n in counts.items() if n > 1}
    assert repeated <= allowed
    assert all(n <= 2 for n in counts.values())


# 5. resharding while the mapping runs -----------------------------------------------------------


def test_split_and_merge_during_production(lambda_client, kinesis, server, make_stream, function):
    name, seen = function()
    stream = make_stream(2)
    map_stream(lambda_client, stream, name, BatchSize=25)
    keys = [f"key-{k}" for k in range(20)]
    rounds_done = 0
    cond = threading.Condition()
    errors: list[BaseException] = []

    def produce() -> None:
        nonlocal rounds_done
        producer = client_for(server.url)
        try:
            for n in range(30):  # each round: one record per key, so a key's records go in round order
                out = producer.put_records(StreamName=stream, Records=[
                    {"Data": f"{key}:{n}".encode(), "PartitionKey": key} for key in keys])
                assert out["FailedRecordCount"] == 0
                with cond:
                    rounds_done = n + 1
                    cond.notify_all()
                time.sleep(0.01)
        except BaseException as err:  # reported by the test thread
            errors.append(err)

    def after_round(n: int) -> None:
        with cond:
            assert cond.wait_for(lambda: rounds_done >= n or errors, timeout=20)

    def active() -> bool:
        return kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        after_round(8)
        first = kinesis.list_shards(StreamName=stream)["Shards"][0]
        low, high = int(first["HashKeyRange"]["StartingHashKey"]), int(first["HashKeyRange"]["EndingHashKey"])
        kinesis.split_shard(StreamName=stream, ShardToSplit=first["ShardId"], NewStartingHashKey=str((low + high) // 2))
        wait_until(active, what="the split")
        after_round(16)
        open_shards = sorted((s for s in kinesis.list_shards(StreamName=stream)["Shards"]
                              if "EndingSequenceNumber" not in s["SequenceNumberRange"]),
                             key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
        # the upper child of the split and the old second shard are adjacent
        kinesis.merge_shards(StreamName=stream, ShardToMerge=open_shards[1]["ShardId"],
                             AdjacentShardToMerge=open_shards[2]["ShardId"])
        wait_until(active, what="the merge")
    finally:
        thread.join()
    assert not errors, errors
    shards = kinesis.list_shards(StreamName=stream)["Shards"]
    assert len(shards) == 5  # 2 + 2 children of the split + 1 of the merge
    wait_until(lambda: len(set(seen.data())) >= 600, timeout=20, what="all 600 records")
    order = defaultdict(list)
    for data in seen.data():
        key, n = data.decode().split(":")
        order[key].append(int(n))
    for key in keys:
        assert order[key] == list(range(30)), key  # every record once, parents' before children's
    used = {r["eventID"].split(":")[0] for r in seen.records()}
    assert used == {s["ShardId"] for s in shards}


# 6. timeouts -------------------------------------------------------------------------------------


def test_timeout_replaces_the_worker_and_the_batch_is_retried(lambda_client, kinesis, make_stream, function, server):
    name, seen = function(Timeout=1)
    stream = make_stream()
    mapping = map_stream(lambda_client, stream, name, BatchSize=1, MaximumRetryAttempts=3)
    for data in (b"before", b"sleep-once", b"after"):
        kinesis.put_record(StreamName=stream, Data=data, PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], timeout=10, what="the record after the timeout")
    invocations = seen.invocations()
    assert seen.batches() == [[b"before"], [b"sleep-once"], [b"sleep-once"], [b"after"]]
    timed_out, retried = invocations[1], invocations[2]
    assert retried["at"] - timed_out["at"] >= 1.0  # the timeout ended the first attempt
    assert invocations[0]["pid"] == timed_out["pid"] != retried["pid"] == invocations[3]["pid"]
    assert not running(timed_out["pid"])  # killed, not left behind
    with urllib.request.urlopen(f"{server.url}/_kinesim/logs/{name}", timeout=10) as r:
        logs = [e["message"] for e in json.loads(r.read())["events"]]
    [report] = [m for m in logs if m.startswith(f"REPORT RequestId: {timed_out['request_id']}")]
    assert "Status: timeout" in report
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK")


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "(zombie)" not in f.read()
    except FileNotFoundError:
        return False


# 7. state and LastProcessingResult ----------------------------------------------------------------


def test_state_and_last_processing_result(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream = make_stream()
    created = map_stream(lambda_client, stream, name, BatchSize=1)
    uid = created["UUID"]
    assert (created["State"], created["LastProcessingResult"]) == ("Creating", "No records processed")
    got = lambda_client.get_event_source_mapping(UUID=uid)
    assert (got["State"], got["StateTransitionReason"], got["LastProcessingResult"]) == (
        "Enabled", "User action", "No records processed")
    kinesis.put_record(StreamName=stream, Data=b"fine", PartitionKey="k")
    wait_until(lambda: result_of(lambda_client, uid) == "OK", what="OK")
    kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")  # retried until it expires
    wait_until(lambda: result_of(lambda_client, uid) == "PROBLEM: Function call failed", what="the failure")
    [listed] = lambda_client.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]
    assert (listed["UUID"], listed["State"], listed["LastProcessingResult"]) == (
        uid, "Enabled", "PROBLEM: Function call failed")
    disabling = lambda_client.update_event_source_mapping(UUID=uid, Enabled=False)
    assert disabling["State"] == "Disabling"
    got = lambda_client.get_event_source_mapping(UUID=uid)
    assert (got["State"], got["LastProcessingResult"]) == ("Disabled", "PROBLEM: Function call failed")
    attempts = len(seen.invocations())
    time.sleep(0.5)
    assert len(seen.invocations()) == attempts  # disabled: no more retries
    assert lambda_client.update_event_source_mapping(UUID=uid, Enabled=True)["State"] == "Enabling"
    wait_until(lambda: len(seen.invocations()) > attempts, what="retries again once enabled")
    assert lambda_client.get_event_source_mapping(UUID=uid)["State"] == "Enabled"


# 8. S3 on-failure destination ----------------------------------------------------------------------


S3_KEY = re.compile(r"aws/lambda/(?P<uuid>[0-9a-f-]{36})/(?P<shard>shardId-\d{12})/(?P<y>\d{4})/(?P<m>\d\d)/(?P<d>\d\d)/"
                    r"(?P<stamp>\d{4}-\d\d-\d\dT\d\d\.\d\d\.\d\d)-[0-9a-f-]{36}")


def s3_objects(s3, bucket: str, prefix: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


def test_s3_on_failure_destination_gets_the_record_and_the_batch(lambda_client, kinesis, s3, make_stream, function):
    name, seen = function()
    stream = make_stream()
    bucket = "esm-failures-" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=bucket)
    first = kinesis.put_record(StreamName=stream, Data=b"ok-first", PartitionKey="k")
    poison = kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    mapping = map_stream(lambda_client, stream, name, BatchSize=2, MaximumRetryAttempts=1,
                         DestinationConfig={"OnFailure": {"Destination": f"arn:aws:s3:::{bucket}"}})
    uid = mapping["UUID"]
    prefix = f"aws/lambda/{uid}/"
    [key] = wait_until(lambda: s3_objects(s3, bucket, prefix), what="the failure object")
    m = S3_KEY.fullmatch(key)
    assert m and (m["uuid"], m["shard"]) == (uid, first["ShardId"])
    body = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert (m["y"], m["m"], m["d"]) == tuple(body["timestamp"][:10].split("-"))
    assert m["stamp"] == body["timestamp"][:19].replace(":", ".")
    last = seen.invocations()[-1]
    assert seen.batches() == [[b"ok-first", b"poison"]] * 2
    assert set(body) == {"requestContext", "responseContext", "version", "timestamp", "KinesisBatchInfo", "payload"}
    assert body["requestContext"] == {"requestId": last["request_id"], "functionArn": mapping["FunctionArn"],
                                      "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 2}
    assert body["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    info = body["KinesisBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"], info["streamArn"]) == (
        first["SequenceNumber"], poison["SequenceNumber"], 2, stream_arn(stream))
    assert isinstance(body["payload"], str)  # the whole event, as an escaped JSON string
    assert json.loads(body["payload"]) == last["event"]
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], what="the next record")


def test_s3_destination_bucket_missing_holds_the_batch_until_it_exists(lambda_client, kinesis, s3, make_stream,
                                                                       function):
    name, seen = function()
    stream = make_stream()
    bucket = "esm-missing-" + uuid.uuid4().hex[:8]
    kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    mapping = map_stream(lambda_client, stream, name, BatchSize=1, MaximumRetryAttempts=0,
                         DestinationConfig={"OnFailure": {"Destination": f"arn:aws:s3:::{bucket}"}})
    uid = mapping["UUID"]
    problem = wait_until(lambda: bucket in result_of(lambda_client, uid) and result_of(lambda_client, uid),
                         what="the destination problem")
    assert problem.startswith("PROBLEM: ") and "NoSuchBucket" in problem
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    time.sleep(0.5)
    assert seen.batches() == [[b"poison"]]  # given up, but kept: nothing goes past it, no re-invocation
    s3.create_bucket(Bucket=bucket)
    wait_until(lambda: s3_objects(s3, bucket, f"aws/lambda/{uid}/"), what="the failure object")
    wait_until(lambda: seen.batches() == [[b"poison"], [b"after"]], what="the next record")
    wait_until(lambda: result_of(lambda_client, uid) == "OK", what="OK")


def test_unsupported_destinations_are_refused(lambda_client, make_stream, function):
    name, _ = function()
    stream = make_stream()
    for destination in ("arn:aws:lambda:us-east-1:000000000000:function:dlq", "arn:aws:s3:::bucket/with/key"):
        with pytest.raises(ClientError) as caught:
            map_stream(lambda_client, stream, name, DestinationConfig={"OnFailure": {"Destination": destination}})
        assert caught.value.response["Error"]["Code"] == "InvalidParameterValueException"
        assert destination in caught.value.response["Error"]["Message"]
