"""Unit tests for Kinesis event source mapping pollers, in-process: a real KinesisService on a real
store, records put through the registered operations, and a fake function that records what it
was sent and fails when told to."""
from __future__ import annotations

import base64
import json
import re
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from kinesim.config import Settings
from kinesim.functions import pollers
from kinesim.functions.checkpoints import Checkpoints
from kinesim.functions.pollers import MappingManager
from kinesim.kinesis.service import OPERATIONS, KinesisService
from kinesim.protocol.errors import AwsError
from kinesim.store import Store

FUNCTION_ARN = "arn:aws:lambda:us-east-1:000000000000:function:{}"
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(pollers, "RETRY_BACKOFF_S", 0.005)
    monkeypatch.setattr(pollers, "PROBLEM_RETRY_S", 0.02)
    monkeypatch.setattr(pollers, "SCAN_S", 0.05)
    monkeypatch.setattr(pollers, "STOP_JOIN_S", 0.5)
    monkeypatch.setattr(pollers, "PASS_CHECKPOINT_S", 0.05)


def make_service(path) -> KinesisService:
    return KinesisService(Settings(create_stream_ms=0, update_stream_ms=0, delete_stream_ms=0), Store(str(path)))


@pytest.fixture
def svc(tmp_path):
    service = make_service(tmp_path)
    yield service
    service.store.close()


@pytest.fixture
def managers(svc):
    made: list[MappingManager] = []

    def make(function: "Function", service: KinesisService | None = None) -> MappingManager:
        s = service or svc
        manager = MappingManager(s, s.store, function, s.settings)
        made.append(manager)
        return manager
    yield make
    for manager in made:
        manager.close()


def call(svc: KinesisService, op: str, **params):
    return OPERATIONS[op](svc, params)


def create(svc: KinesisService, name: str, shards: int = 1) -> str:
    call(svc, "CreateStream", StreamName=name, ShardCount=shards)
    return svc.stream_arn(name)


def put(svc: KinesisService, stream: str, data: bytes, key: str = "k") -> str:
    return call(svc, "PutRecord", StreamName=stream, Data=data, PartitionKey=key)["SequenceNumber"]


def put_many(svc: KinesisService, stream: str, entries: list[tuple[bytes, str]]) -> list[str]:
    out = call(svc, "PutRecords", StreamName=stream, Records=[{"Data": d, "PartitionKey": k} for d, k in entries])
    return [r["SequenceNumber"] for r in out["Records"]]


def read_all(svc: KinesisService, stream: str) -> list[bytes]:
    out = []
    for shard in call(svc, "ListShards", StreamName=stream)["Shards"]:
        it = call(svc, "GetShardIterator", StreamName=stream, ShardId=shard["ShardId"],
                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out += [r["Data"] for r in call(svc, "GetRecords", ShardIterator=it)["Records"]]
    return out


def mapping(arn: str, uuid_: str | None = None, function: str = "fn", **overrides) -> dict:
    m = {"UUID": uuid_ or str(uuid.uuid4()), "EventSourceArn": arn, "FunctionArn": FUNCTION_ARN.format(function),
         "State": "Enabled", "BatchSize": 100, "MaximumBatchingWindowInSeconds": 0, "ParallelizationFactor": 1,
         "StartingPosition": "TRIM_HORIZON", "MaximumRetryAttempts": -1, "MaximumRecordAgeInSeconds": -1,
         "BisectBatchOnFunctionError": False, "TumblingWindowInSeconds": 0, "FunctionResponseTypes": [],
         "DestinationConfig": {}}
    m.update(overrides)
    return m


def wait_until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class FunctionError(Exception):
    pass


@dataclass
class Invocation:
    payload: bytes
    function_error: str | None = None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class Call:
    name: str
    event: dict
    ok: bool
    at: float

    @property
    def records(self) -> list[dict]:
        return self.event["Records"]

    @property
    def data(self) -> list[bytes]:
        return [base64.b64decode(r["kinesis"]["data"]) for r in self.records]

    @property
    def shard(self) -> str:
        return self.records[0]["eventID"].split(":")[0]


class Function:
    """A fake `invoke`: `handler(event)` returns the function's result or raises FunctionError."""

    def __init__(self, handler=None):
        self.handler = handler or (lambda event: None)
        self.calls: list[Call] = []
        self.lock = threading.Lock()

    def __call__(self, name: str, payload: bytes) -> Invocation:
        event = json.loads(payload)
        try:
            result, ok = self.handler(event), True
        except FunctionError as err:
            result, ok = {"errorMessage": str(err), "errorType": "FunctionError"}, False
        with self.lock:
            self.calls.append(Call(name, event, ok, time.monotonic()))
        return Invocation(json.dumps(result).encode(), None if ok else "Unhandled")

    def delivered(self, name: str | None = None) -> list[bytes]:
        """Data of the records in successful invocations, in invocation order."""
        with self.lock:
            return [d for c in self.calls if c.ok and (name is None or c.name == name) for d in c.data]

    def snapshot(self) -> list[Call]:
        with self.lock:
            return list(self.calls)


# batching, ordering, event shape

def test_batches_are_ordered_per_shard_and_shaped_as_aws_sends_them(svc, managers):
    arn = create(svc, "s", shards=2)
    fn = Function()
    manager = managers(fn)
    m = mapping(arn, BatchSize=7)
    manager.sync(m)
    assert manager.status(m["UUID"])["LastProcessingResult"] == "No records processed"
    sent = []
    for chunk in range(10):
        entries = [(f"r{chunk * 10 + i}".encode(), f"key-{i}") for i in range(10)]
        sent += list(zip(put_many(svc, "s", entries), entries))
    wait_until(lambda: len(fn.delivered()) == 100, what="100 records")
    calls = fn.snapshot()
    assert all(len(c.records) <= 7 for c in calls)
    assert sorted(fn.delivered()) == sorted(d for _, (d, _) in sent)
    by_shard = defaultdict(list)
    for c in calls:
        assert len({r["eventID"].split(":")[0] for r in c.records}) == 1, "a batch holds one shard's records"
        by_shard[c.shard] += [int(r["kinesis"]["sequenceNumber"]) for r in c.records]
    assert set(by_shard) == {"shardId-000000000000", "shardId-000000000001"}
    for seqs in by_shard.values():
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    record = calls[0].records[0]
    seq = record["kinesis"]["sequenceNumber"]
    data, key = next(e for s, e in sent if s == seq)
    assert record == {
        "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": key, "sequenceNumber": seq,
                    "data": base64.b64encode(data).decode(),
                    "approximateArrivalTimestamp": record["kinesis"]["approximateArrivalTimestamp"]},
        "eventSource": "aws:kinesis", "eventVersion": "1.0", "eventID": f"{calls[0].shard}:{seq}",
        "eventName": "aws:kinesis:record", "invokeIdentityArn": "arn:aws:iam::000000000000:role/fn-role",
        "awsRegion": "us-east-1", "eventSourceARN": arn}
    assert isinstance(record["kinesis"]["approximateArrivalTimestamp"], float)
    assert abs(record["kinesis"]["approximateArrivalTimestamp"] - time.time()) < 60
    assert set(calls[0].event) == {"Records"}
    assert calls[0].name == "fn"
    assert manager.status(m["UUID"]) == {"State": "Enabled", "StateTransitionReason": "User action",
                                         "LastProcessingResult": "OK"}


def test_batching_window_gathers_records(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    managers(fn).sync(mapping(arn, BatchSize=100, MaximumBatchingWindowInSeconds=0.4))
    start = time.monotonic()
    for i in range(5):
        put(svc, "s", b"%d" % i)
    wait_until(lambda: fn.delivered(), what="a batch")
    calls = fn.snapshot()
    assert [len(c.records) for c in calls] == [5]
    assert calls[0].at - start >= 0.3


def test_full_batch_does_not_wait_for_the_window(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    managers(fn).sync(mapping(arn, BatchSize=3, MaximumBatchingWindowInSeconds=30))
    put_many(svc, "s", [(b"a", "k"), (b"b", "k"), (b"c", "k")])
    wait_until(lambda: len(fn.delivered()) == 3, timeout=15, what="a full batch")  # not the 30 s window


def test_a_batch_stays_under_the_6_mb_payload_limit(svc, managers):
    arn = create(svc, "s")
    blob = b"x" * 1_000_000
    for i in range(8):
        put(svc, "s", blob)
    fn = Function()
    managers(fn).sync(mapping(arn, BatchSize=100))
    wait_until(lambda: len(fn.delivered()) == 8, what="8 big records")
    sizes = [len(c.records) for c in fn.snapshot()]
    assert sizes == [4, 4]  # 4 x 1.33 MB of base64 fit in 6 MB, 5 would not


# starting positions and checkpoints

def test_starting_positions(svc, managers):
    arn = create(svc, "s")
    put(svc, "s", b"old-1")
    time.sleep(0.02)
    between = time.time()
    time.sleep(0.02)
    put(svc, "s", b"old-2")
    fn = Function()
    manager = managers(fn)
    manager.sync(mapping(arn, function="latest", StartingPosition="LATEST"))
    manager.sync(mapping(arn, function="trim", StartingPosition="TRIM_HORIZON"))
    manager.sync(mapping(arn, function="stamp", StartingPosition="AT_TIMESTAMP", StartingPositionTimestamp=between))
    put(svc, "s", b"new")
    wait_until(lambda: len(fn.delivered()) == 1 + 3 + 2, what="every mapping's records")
    assert fn.delivered("latest") == [b"new"]
    assert fn.delivered("trim") == [b"old-1", b"old-2", b"new"]
    assert fn.delivered("stamp") == [b"old-2", b"new"]


def test_latest_applies_only_the_first_time(svc, managers):
    arn = create(svc, "s")
    put(svc, "s", b"before")
    first = managers(Function())
    m = mapping(arn, StartingPosition="LATEST")
    first.sync(m)
    first.close()
    put(svc, "s", b"while-stopped")
    fn = Function()
    managers(fn).sync(m)
    put(svc, "s", b"after")
    wait_until(lambda: len(fn.delivered()) == 2, what="two records")
    time.sleep(0.05)
    assert fn.delivered() == [b"while-stopped", b"after"]


def test_restart_resumes_after_the_last_successful_batch(svc, tmp_path, managers, monkeypatch):
    monkeypatch.setattr(pollers, "STOP_JOIN_S", 0.2)
    arn = create(svc, "s")
    put_many(svc, "s", [(b"%02d" % i, "k") for i in range(30)])
    in_flight, release = threading.Event(), threading.Event()

    def handler(event):
        if event["Records"][0]["kinesis"]["data"] == base64.b64encode(b"10").decode():
            in_flight.set()
            release.wait(60)

    before = Function(handler)
    first = managers(before, svc)
    m = mapping(arn, BatchSize=5)
    first.sync(m)
    assert in_flight.wait(30)
    started = time.monotonic()
    first.close()  # the invocation of records 10-14 is still running
    assert time.monotonic() - started < 20  # gave up on it after STOP_JOIN_S
    release.set()
    # Its answer comes after the stop: it must not be checkpointed. Its lane has ended once it is in.
    wait_until(lambda: not any(t.name.startswith("lane-" + m["UUID"][:8]) for t in threading.enumerate()),
               what="the stopped lane to end")

    restarted = make_service(tmp_path)  # a new process on the same data
    after = Function()
    second = managers(after, restarted)
    second.sync(m)
    wait_until(lambda: len(after.delivered()) == 20, what="the rest")
    time.sleep(0.05)
    done_before = before.delivered()
    assert done_before[:10] == [b"%02d" % i for i in range(10)]
    assert after.delivered() == [b"%02d" % i for i in range(10, 30)]  # only the in-flight batch repeats
    second.close()
    restarted.store.close()


def test_disable_keeps_the_position_and_enable_resumes(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    manager = managers(fn)
    m = mapping(arn, StartingPosition="LATEST")
    manager.sync(m)
    put(svc, "s", b"1")
    wait_until(lambda: fn.delivered() == [b"1"], what="first record")
    manager.sync({**m, "State": "Disabled"})
    assert manager.status(m["UUID"])["State"] == "Disabled"
    put(svc, "s", b"2")
    time.sleep(0.1)
    assert fn.delivered() == [b"1"]
    manager.sync({**m, "State": "Enabled", "BatchSize": 10})
    put(svc, "s", b"3")
    wait_until(lambda: fn.delivered() == [b"1", b"2", b"3"], what="resumed records")
    assert manager.status(m["UUID"])["State"] == "Enabled"


def test_remove_forgets_checkpoints(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    manager = managers(fn)
    m = mapping(arn)
    manager.sync(m)
    put(svc, "s", b"1")
    wait_until(lambda: fn.delivered() == [b"1"], what="a record")
    assert Checkpoints(svc.store, m["UUID"]).load()
    manager.remove(m["UUID"])
    assert Checkpoints(svc.store, m["UUID"]).load() == {}
    put(svc, "s", b"2")
    time.sleep(0.05)
    assert fn.delivered() == [b"1"]


# failures

def failing_on(*bad: bytes):
    def handler(event):
        for r in event["Records"]:
            if base64.b64decode(r["kinesis"]["data"]) in bad:
                raise FunctionError("bad record")
    return handler


def on_failure(arn: str) -> dict:
    return {"OnFailure": {"Destination": arn}}


def test_retries_until_maximum_then_sends_the_invocation_record(svc, managers):
    arn = create(svc, "s")
    dlq = create(svc, "dlq")
    fn = Function(failing_on(b"bad"))
    manager = managers(fn)
    m = mapping(arn, BatchSize=1, MaximumRetryAttempts=2, DestinationConfig=on_failure(dlq))
    manager.sync(m)
    put(svc, "s", b"good-1")
    bad_seq = put(svc, "s", b"bad")
    put(svc, "s", b"good-2")
    wait_until(lambda: fn.delivered() == [b"good-1", b"good-2"], what="the good records")
    attempts = [c for c in fn.snapshot() if c.data == [b"bad"]]
    assert len(attempts) == 3 and not any(c.ok for c in attempts)  # the first try and 2 retries
    [body] = read_all(svc, "dlq")
    record = json.loads(body)
    assert record["requestContext"]["functionArn"] == FUNCTION_ARN.format("fn")
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert re.fullmatch(r"[0-9a-f-]{36}", record["requestContext"]["requestId"])
    assert record["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    assert record["version"] == "1.0" and ISO_MS.match(record["timestamp"])
    info = record["KinesisBatchInfo"]
    assert info["shardId"] == "shardId-000000000000" and info["streamArn"] == arn
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == bad_seq
    assert info["batchSize"] == 1
    assert ISO_MS.match(info["approximateArrivalOfFirstRecord"]) and ISO_MS.match(info["approximateArrivalOfLastRecord"])
    assert set(record) == {"requestContext", "responseContext", "version", "timestamp", "KinesisBatchInfo"}
    wait_until(lambda: manager.status(m["UUID"])["LastProcessingResult"] == "OK", what="OK")


def test_failing_batch_blocks_the_shard_until_it_succeeds(svc, managers):
    arn = create(svc, "s")
    failures = {"left": 3}

    def handler(event):
        if failures["left"]:
            failures["left"] -= 1
            raise FunctionError("not yet")

    fn = Function(handler)
    manager = managers(fn)
    m = mapping(arn)
    manager.sync(m)
    put(svc, "s", b"1")
    wait_until(lambda: len(fn.snapshot()) >= 2, what="a retry")
    assert manager.status(m["UUID"])["LastProcessingResult"] == "PROBLEM: Function call failed"
    put(svc, "s", b"2")
    wait_until(lambda: fn.delivered(), what="success")
    assert fn.delivered() in ([b"1"], [b"1", b"2"])
    wait_until(lambda: fn.delivered() == [b"1", b"2"], what="the next record")
    assert all(c.data[0] == b"1" for c in fn.snapshot()[:4])  # nothing went past the failing batch


def test_bisect_isolates_the_bad_record(svc, managers):
    arn = create(svc, "s")
    dlq = create(svc, "dlq")
    put_many(svc, "s", [(b"%d" % i, "k") for i in range(8)])
    fn = Function(failing_on(b"5"))
    managers(fn).sync(mapping(arn, BatchSize=8, MaximumRetryAttempts=0, BisectBatchOnFunctionError=True,
                              DestinationConfig=on_failure(dlq)))
    wait_until(lambda: len(fn.delivered()) == 7, what="the good records")
    time.sleep(0.05)
    assert [[int(d) for d in c.data] for c in fn.snapshot()] == [
        [0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7], [4, 5], [4], [5], [6, 7]]
    assert fn.delivered() == [b"0", b"1", b"2", b"3", b"4", b"6", b"7"]
    [body] = read_all(svc, "dlq")
    record = json.loads(body)
    assert record["KinesisBatchInfo"]["batchSize"] == 1
    assert record["requestContext"]["approximateInvokeCount"] == 4  # every invocation that carried it


def test_record_age_exceeded(svc, managers):
    arn = create(svc, "s")
    dlq = create(svc, "dlq")
    fn = Function(failing_on(b"bad"))
    manager = managers(fn)
    manager.sync(mapping(arn, MaximumRecordAgeInSeconds=1, DestinationConfig=on_failure(dlq)))
    seq = put(svc, "s", b"bad")
    wait_until(lambda: read_all(svc, "dlq"), what="the failure record")
    record = json.loads(read_all(svc, "dlq")[0])
    assert record["requestContext"]["condition"] == "RecordAgeExceeded"
    assert record["KinesisBatchInfo"]["startSequenceNumber"] == seq
    put(svc, "s", b"fine")
    wait_until(lambda: fn.delivered() == [b"fine"], what="the next record")


@pytest.mark.parametrize("answer,expected_second", [
    ({"batchItemFailures": [{"itemIdentifier": "{4}"}, {"itemIdentifier": "{7}"}]}, list(range(4, 10))),
    ({"batchItemFailures": [{"itemIdentifier": ""}]}, list(range(10))),
    ({"batchItemFailures": [{"itemIdentifier": None}]}, list(range(10))),
    ({"batchItemFailures": [{"sequenceNumber": "{4}"}]}, list(range(10))),
    ({"batchItemFailures": [{"itemIdentifier": "not-in-the-batch"}]}, list(range(10))),
    ({"batchItemFailures": []}, None),
    ({"batchItemFailures": None}, None),
    (None, None),
    ({}, None),
])
def test_report_batch_item_failures(svc, managers, answer, expected_second):
    arn = create(svc, "s")
    seqs = put_many(svc, "s", [(b"%d" % i, "k") for i in range(10)])
    calls = {"n": 0}

    def handler(event):
        calls["n"] += 1
        if calls["n"] == 1:
            return json.loads(json.dumps(answer).replace('"{4}"', f'"{seqs[4]}"').replace('"{7}"', f'"{seqs[7]}"'))
        return {"batchItemFailures": []}

    fn = Function(handler)
    managers(fn).sync(mapping(arn, BatchSize=10, FunctionResponseTypes=["ReportBatchItemFailures"]))
    wait_until(lambda: len(fn.snapshot()) >= (2 if expected_second else 1), what="invocations")
    put(svc, "s", b"next")
    wait_until(lambda: any(b"next" in c.data for c in fn.snapshot()), what="the next record")
    calls_made = [[int(d) for d in c.data if d != b"next"] for c in fn.snapshot()]
    assert calls_made[0] == list(range(10))
    if expected_second is None:
        assert calls_made[1] == []  # success: the next invocation holds only the new record
    else:
        assert calls_made[1] == expected_second


def test_function_not_found_is_retried_without_losing_records(svc, managers):
    arn = create(svc, "s")
    exists = threading.Event()
    fn = Function()

    def invoke(name, payload):
        if not exists.is_set():
            raise AwsError("ResourceNotFoundException", f"Function not found: {FUNCTION_ARN.format(name)}", 404)
        return fn(name, payload)

    manager = managers(invoke)
    m = mapping(arn, MaximumRetryAttempts=0)
    manager.sync(m)
    put(svc, "s", b"1")
    wait_until(lambda: manager.status(m["UUID"])["LastProcessingResult"] == "PROBLEM: Function not found",
               what="the problem")
    time.sleep(0.1)  # several attempts: not counted against MaximumRetryAttempts
    exists.set()
    wait_until(lambda: fn.delivered() == [b"1"], what="the record")
    # set once the invocation has returned, a moment after the function saw the record
    wait_until(lambda: manager.status(m["UUID"])["LastProcessingResult"] == "OK", what="OK")


# filters

def test_filtered_out_records_are_skipped_and_passed(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    m = mapping(arn, FilterCriteria={"Filters": [
        {"Pattern": json.dumps({"data": {"kind": ["click"], "ms": [{"numeric": ["<", 100]}]}})},
        {"Pattern": json.dumps({"partitionKey": [{"prefix": "vip-"}]})}]})
    managers(fn).sync(m)
    put(svc, "s", json.dumps({"kind": "view", "ms": 1}).encode())
    put(svc, "s", json.dumps({"kind": "click", "ms": 5}).encode())
    put(svc, "s", json.dumps({"kind": "click", "ms": 500}).encode())
    put(svc, "s", b"not json")
    put(svc, "s", b"not json either", key="vip-1")
    last = put(svc, "s", json.dumps({"kind": "view"}).encode())
    wait_until(lambda: len(fn.delivered()) == 2, what="the matching records")
    assert fn.delivered() == [json.dumps({"kind": "click", "ms": 5}).encode(), b"not json either"]
    shard = svc.streams["s"].shards[0]
    wait_until(lambda: Checkpoints(svc.store, m["UUID"]).load()["shardId-000000000000"].positions == [shard.next_index],
               what="the checkpoint past the filtered records")
    assert int(last) > 0


def test_bad_filters_and_unsupported_destinations_are_refused(svc, managers):
    arn = create(svc, "s")
    manager = managers(Function())
    with pytest.raises(AwsError) as caught:
        manager.sync(mapping(arn, FilterCriteria={"Filters": [{"Pattern": '{"data": "x"}'}]}))
    assert (caught.value.code, caught.value.message) == ("InvalidParameterValueException",
                                                         "Invalid filter pattern definition.")
    with pytest.raises(AwsError) as caught:
        manager.sync(mapping(arn, DestinationConfig=on_failure("arn:aws:s3:::my-bucket")))
    assert caught.value.code == "InvalidParameterValueException"
    assert "arn:aws:s3:::my-bucket" in caught.value.message
    assert manager.pollers == {}


# tumbling windows

def test_tumbling_window_state_and_final_invocation(svc, managers):
    arn = create(svc, "s")

    def handler(event):
        if event["isFinalInvokeForWindow"]:
            return {"state": event["state"]}
        state = dict(event["state"])
        state["count"] = state.get("count", 0) + len(event["Records"])
        return {"state": state}

    fn = Function(handler)
    managers(fn).sync(mapping(arn, BatchSize=2, TumblingWindowInSeconds=2))
    while time.time() % 2 > 0.5:  # all records inside one window: one call, early in it
        time.sleep(0.01)
    put_many(svc, "s", [(b"%d" % i, "k") for i in range(5)])
    wait_until(lambda: any(c.event["isFinalInvokeForWindow"] for c in fn.snapshot()),
               what="the final invocation")
    calls = fn.snapshot()
    final = calls[-1]
    aggregations = calls[:-1]
    assert sum(len(c.records) for c in aggregations) == 5
    assert aggregations[0].event["state"] == {}
    for prev, cur in zip(aggregations, aggregations[1:]):
        assert cur.event["state"] == {"count": prev.event["state"].get("count", 0) + len(prev.records)}
    assert final.records == [] and final.event["state"] == {"count": 5}
    assert final.event["isWindowTerminatedEarly"] is False
    start, end = final.event["window"]["start"], final.event["window"]["end"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", start) and start < end
    assert all(c.event["window"] == final.event["window"] for c in calls)
    assert final.event["shardId"] == "shardId-000000000000" and final.event["eventSourceARN"] == arn


def test_tumbling_window_response_without_state_is_a_failure(svc, managers):
    arn = create(svc, "s")
    answers = iter([{"nothing": 1}, {"state": {"ok": True}}])
    fn = Function(lambda event: next(answers, {"state": {}}))
    managers(fn).sync(mapping(arn, TumblingWindowInSeconds=60))
    put(svc, "s", b"1")
    wait_until(lambda: len(fn.snapshot()) >= 2, what="a retry")
    first, second = fn.snapshot()[:2]
    assert first.data == second.data == [b"1"] and second.event["state"] == {}


# parallelization and resharding

def test_parallelization_factor_keeps_each_keys_order(svc, managers):
    arn = create(svc, "s")
    live = {"now": 0, "max": 0}
    lock = threading.Lock()

    def handler(event):
        with lock:
            live["now"] += 1
            live["max"] = max(live["max"], live["now"])
        time.sleep(0.01)
        with lock:
            live["now"] -= 1

    fn = Function(handler)
    m = mapping(arn, BatchSize=5, ParallelizationFactor=4)
    managers(fn).sync(m)
    entries = [(f"{i % 16}:{i // 16}".encode(), f"key-{i % 16}") for i in range(320)]
    for chunk in range(0, 320, 40):
        put_many(svc, "s", entries[chunk:chunk + 40])
    wait_until(lambda: len(fn.delivered()) == 320, what="every record")
    assert sorted(fn.delivered()) == sorted(d for d, _ in entries)
    per_key = defaultdict(list)
    for d in fn.delivered():
        key, n = d.decode().split(":")
        per_key[key].append(int(n))
    assert all(ns == list(range(20)) for ns in per_key.values())
    assert live["max"] > 1
    progress = Checkpoints(svc.store, m["UUID"]).load()["shardId-000000000000"]
    wait_until(lambda: Checkpoints(svc.store, m["UUID"]).load()["shardId-000000000000"].positions
               == [svc.streams["s"].shards[0].next_index] * 4, what="every lane's checkpoint")
    assert len(progress.positions) == 4


def test_resharding_while_running_reads_parents_before_children(svc, managers):
    arn = create(svc, "s", shards=2)
    fn = Function()
    m = mapping(arn, BatchSize=10)
    managers(fn).sync(m)
    keys = [f"key-{i}" for i in range(20)]
    sent: list[bytes] = []

    def produce(rounds: int) -> None:
        for n in range(rounds):
            entries = [(f"{k}:{len(sent) // len(keys)}".encode(), k) for k in keys]
            put_many(svc, "s", entries)
            sent.extend(d for d, _ in entries)

    produce(5)
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=4, ScalingType="UNIFORM_SCALING")
    produce(5)
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=2, ScalingType="UNIFORM_SCALING")
    produce(5)
    wait_until(lambda: len(fn.delivered()) == len(sent), what="every record")
    time.sleep(0.05)
    assert sorted(fn.delivered()) == sorted(sent)  # each exactly once
    per_key = defaultdict(list)
    for d in fn.delivered():
        key, n = d.decode().split(":")
        per_key[key].append(int(n))
    assert all(ns == list(range(15)) for ns in per_key.values())
    calls = fn.snapshot()
    first_at = {}
    last_at = {}
    for c in calls:
        first_at.setdefault(c.shard, c.at)
        last_at[c.shard] = c.at
    stream = svc.streams["s"]
    assert len(stream.shards) > 2
    for shard in stream.shards:
        for parent in (shard.parent, shard.adjacent_parent):
            if parent in last_at and shard.shard_id in first_at:
                assert first_at[shard.shard_id] >= last_at[parent]
    # the closed shards were read to their end, and their checkpoints say so (saved once each last
    # invocation has returned)
    closed = {s.shard_id for s in stream.shards if not s.is_open}
    wait_until(lambda: {sid for sid, p in Checkpoints(svc.store, m["UUID"]).load().items() if p.ended} == closed,
               what="the closed shards' checkpoints")


# lifecycle

def test_stream_deleted_is_reported(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    manager = managers(fn)
    m = mapping(arn)
    manager.sync(m)
    put(svc, "s", b"1")
    wait_until(lambda: fn.delivered() == [b"1"], what="a record")
    call(svc, "DeleteStream", StreamName="s")
    wait_until(lambda: manager.status(m["UUID"])["LastProcessingResult"] == "PROBLEM: Stream not found",
               what="the problem")
    # The lanes ended: no shard's work is left and the mapping's threads wait for work.
    wait_until(lambda: manager.lag(m["UUID"])["shards"] == 0, what="the shards' work to go")
    wait_until(lambda: all(_waiting_for_work(t) for t in threading.enumerate()
                           if t.name.startswith("lane-" + m["UUID"][:8])), what="the lanes to end")


def test_close_is_prompt(svc, managers, monkeypatch):
    # A lane waits for records with no time limit: a close that waited for parked lanes (or for a
    # lane in a long backoff) would never end.
    monkeypatch.setattr(pollers, "STOP_JOIN_S", 60.0)
    monkeypatch.setattr(pollers, "RETRY_BACKOFF_S", 60.0)
    arn = create(svc, "s", shards=4)
    def fail(event):
        raise FunctionError("no")

    failing = Function(fail)
    manager = managers(failing)
    uuids = []
    for _ in range(3):
        m = mapping(arn, ParallelizationFactor=2)
        uuids.append(m["UUID"])
        manager.sync(m)
    put(svc, "s", b"1", "k")  # one lane of each mapping fails and backs off for a minute
    wait_until(lambda: len(failing.calls) >= 3, what="the first attempts")
    wait_until(lambda: all(manager.lag(u)["shards"] == 4 for u in uuids), what="the shards")
    started = time.monotonic()
    manager.close()
    assert time.monotonic() - started < 20
    assert not any(t.name.startswith(("lane-", "mapping-")) for t in threading.enumerate())


def test_threads_do_not_grow_with_shards_and_idle_lanes_hold_none(svc, managers):
    arn = create(svc, "s", shards=64)
    fn = Function()
    manager = managers(fn)
    m = mapping(arn, ParallelizationFactor=4)  # 256 lanes
    manager.sync(m)
    wait_until(lambda: manager.lag(m["UUID"])["shards"] == 64, what="every shard's work")
    put_many(svc, "s", [(b"%d" % i, f"k{i}") for i in range(300)])
    wait_until(lambda: len(fn.delivered()) == 300, what="every record")
    lanes = [t for t in threading.enumerate() if t.name.startswith("lane-" + m["UUID"][:8])]
    assert 1 <= len(lanes) <= pollers.LANE_THREADS
    assert sorted(fn.delivered()) == sorted(b"%d" % i for i in range(300))
    # Idle, no lane is being run: every pool thread waits for work (none runs a lane's step).
    wait_until(lambda: all(_waiting_for_work(t) for t in lanes), what="the pool to go idle")


def _waiting_for_work(thread: threading.Thread) -> bool:
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "step":
            return False
        frame = frame.f_back
    return True


def test_changing_the_parallelization_factor_skips_nothing(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    manager = managers(fn)
    m = mapping(arn, BatchSize=3)
    manager.sync(m)
    put_many(svc, "s", [(b"a%d" % i, f"k{i}") for i in range(6)])
    wait_until(lambda: len(fn.delivered()) == 6, what="the first records")
    manager.sync({**m, "ParallelizationFactor": 3})
    put_many(svc, "s", [(b"b%d" % i, f"k{i}") for i in range(6)])
    wait_until(lambda: len(fn.delivered()) == 12, what="the later records")
    time.sleep(0.05)
    assert sorted(fn.delivered()) == sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(6)])
    assert len(Checkpoints(svc.store, m["UUID"]).load()["shardId-000000000000"].positions) == 3


def test_a_recreated_stream_is_read_from_its_starting_position(svc, managers):
    arn = create(svc, "s")
    fn = Function()
    manager = managers(fn)
    m = mapping(arn)
    manager.sync(m)
    put(svc, "s", b"first life")
    wait_until(lambda: fn.delivered() == [b"first life"], what="a record")
    call(svc, "DeleteStream", StreamName="s")
    wait_until(lambda: manager.status(m["UUID"])["LastProcessingResult"] == "PROBLEM: Stream not found",
               what="the problem")
    create(svc, "s")
    put(svc, "s", b"second life")
    wait_until(lambda: fn.delivered() == [b"first life", b"second life"], what="the new stream's record")
    wait_until(lambda: manager.status(m["UUID"])["LastProcessingResult"] == "OK", what="OK")
