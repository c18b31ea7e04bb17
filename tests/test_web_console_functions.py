"""The web console's functions API (/_kinesim/console/api/functions/...) against a real server:
invocation figures counted where invocations happen (successes, function errors, duration
percentiles), warm workers, a Kinesis mapping's batch timeline (a failing batch bisected, retried
and sent to its OnFailure destination), the live log with its cursor, and the invoke action with
Lambda's own errors."""
from __future__ import annotations

import io
import json
import threading
import uuid
import zipfile

import pytest

from console_api import ConsoleApi
from conftest import client_for
from test_failure_destinations import queue, receive
from test_mappings_e2e import deploy, stream_arn, wait_until


# event: {"sleep": s} sleeps, {"fail": msg} raises, {"say": text} prints it; returns {"echo": event}
HANDLER = '''
import time

def handler(event, context):
    if "say" in event:
        print(event["say"])
    time.sleep(event.get("sleep", 0))
    if "fail" in event:
        raise RuntimeError(event["fail"])
    return {"echo": event}
'''


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


@pytest.fixture
def console(server):
    """get(path) / post(path, ...) on the console's functions API."""
    return ConsoleApi(server.url, "/functions")


@pytest.fixture
def function(lambda_client):
    names = []

    def make() -> str:
        name = "console-fn-" + uuid.uuid4().hex[:8]
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("app.py", HANDLER)
        lambda_client.create_function(FunctionName=name, Runtime="python3.12", Role="arn:aws:iam::000000000000:role/r",
                                      Handler="app.handler", Code={"ZipFile": buf.getvalue()}, Timeout=10)
        names.append(name)
        return name
    yield make
    for name in names:
        lambda_client.delete_function(FunctionName=name)


def invoke(lambda_client, name: str, event: str) -> dict:
    return lambda_client.invoke(FunctionName=name, Payload=event.encode())


def test_figures_count_invocations_errors_and_duration_percentiles(lambda_client, console, function):
    name = function()
    for _ in range(4):
        assert "FunctionError" not in invoke(lambda_client, name, "{}")
    assert "FunctionError" not in invoke(lambda_client, name, '{"sleep": 0.3}')
    for _ in range(2):
        assert invoke(lambda_client, name, '{"fail": "no"}')["FunctionError"] == "Unhandled"

    doc = console.get("/" + name).json()
    assert (doc["name"], doc["runtime"], doc["state"]) == (name, "python3.12", "Active")
    summary = doc["summary"]
    assert (summary["invocations"], summary["errors"], summary["throttles"]) == (7, 2, 0)
    assert summary["p99_ms"] >= 300 > summary["p50_ms"]
    assert summary["p50_ms"] <= summary["p90_ms"] <= summary["p99_ms"]
    assert summary["avg_ms"] > 300 / 7
    points = doc["points"]
    assert len(points["t"]) == doc["seconds"] == 300
    assert (sum(points["invocations"]), sum(points["errors"])) == (7, 2)
    assert max(p for p in points["p99"] if p is not None) >= 300
    assert abs(sum(points["duration_ms"]) - summary["avg_ms"] * 7) < 1
    # one invocation at a time: one warm environment, idle now
    assert doc["workers"] == {"idle": 1, "busy": 0, "starting": 0, "max": 10}
    assert doc["mappings"] == []


def test_warm_workers_show_busy_environments(lambda_client, console, function):
    name = function()
    threads = [threading.Thread(target=invoke, args=(lambda_client, name, '{"sleep": 3}')) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        busy = wait_until(lambda: console.get("/" + name).json()["workers"]["busy"] == 2, what="2 busy workers")
        assert busy
    finally:
        for t in threads:
            t.join()
    workers = console.get("/" + name).json()["workers"]
    assert (workers["idle"], workers["busy"]) == (2, 0)


def test_unknown_function_is_404(console):
    answer = console.get("/nobody-here")
    assert answer.status_code == 404
    assert answer.json()["code"] == "ResourceNotFoundException"


def test_kinesis_mapping_timeline_bisects_retries_and_sends_to_on_failure(lambda_client, kinesis, sqs, console,
                                                                          make_stream, tmp_path):
    name, seen = deploy(lambda_client, tmp_path)
    stream = make_stream()
    for data in (b"a", b"poison", b"b", b"c"):
        kinesis.put_record(StreamName=stream, Data=data, PartitionKey="k")
    url, arn = queue(sqs)
    mapping = lambda_client.create_event_source_mapping(
        EventSourceArn=stream_arn(stream), FunctionName=name, StartingPosition="TRIM_HORIZON", BatchSize=4,
        BisectBatchOnFunctionError=True, MaximumRetryAttempts=1,
        DestinationConfig={"OnFailure": {"Destination": arn}})
    try:
        receive(sqs, url)  # the poison record's invocation record reached the queue

        def done():
            entries = console.get(f"/{name}/timeline").json()["entries"]
            return entries if sum(e["records"] for e in entries if e["outcome"] == "ok") == 3 else None
        entries = list(reversed(wait_until(done, what="the good records handled")))  # oldest first
        outcomes = [(e["outcome"], e["records"]) for e in entries]
        # 4 fail -> halves of 2; [a, poison] fails -> halves of 1; [a] ok; [poison] fails, is retried
        # once, fails again and is given up; [b, c] ok
        assert outcomes == [("bisected", 4), ("bisected", 2), ("ok", 1), ("retried", 1), ("on-failure", 1),
                            ("ok", 2)]
        given_up = entries[4]
        assert (given_up["condition"], given_up["destination"], given_up["error"]) == (
            "RetryAttemptsExhausted", arn, "Unhandled")
        assert given_up["first"] == given_up["last"] == seen.records()[1]["kinesis"]["sequenceNumber"]
        assert entries[0]["halves"] == [2, 2] and entries[0]["shard"] == "shardId-000000000000"
        assert all(e["mapping"] == mapping["UUID"] and e["source"] == stream for e in entries)
        assert all(e["age_ms"] >= 0 for e in entries)

        def settled():
            [row] = console.get("/" + name).json()["mappings"]
            return row if row["lag_records"] == 0 and row["last_result"] == "OK" else None
        row = wait_until(settled, what="the mapping caught up")
        assert (row["uuid"], row["state"], row["source_kind"], row["source"], row["on_failure"]) == (
            mapping["UUID"], "Enabled", "kinesis", stream, arn)
        assert row["outcomes"] == {"bisected": 2, "ok": 2, "retried": 1, "on-failure": 1}
        assert row["last_batch"]["outcome"] == "ok" and row["iterator_age_ms"] >= 0
        only = console.get(f"/{name}/timeline", mapping="not-this-one").json()["entries"]
        assert only == []
    finally:
        lambda_client.delete_event_source_mapping(UUID=mapping["UUID"])
        lambda_client.delete_function(FunctionName=name)


def test_logs_follow_with_a_cursor(lambda_client, console, function):
    name = function()
    assert console.get(f"/{name}/logs").json()["lines"] == []
    invoke(lambda_client, name, '{"say": "first-marker"}')

    def written():
        doc = console.get(f"/{name}/logs").json()
        return doc if any(line["message"] == "first-marker" for line in doc["lines"]) else None
    first = wait_until(written, what="the first line")
    messages = [line["message"] for line in first["lines"]]
    assert messages[0].startswith("START RequestId:") and messages[-1].startswith("REPORT RequestId:")
    assert all(line["t"] > 0 and line["stream"] and line["id"] for line in first["lines"])

    invoke(lambda_client, name, '{"say": "second-marker"}')
    cursor, fresh = first["cursor"], []

    def more():
        doc = console.get(f"/{name}/logs", cursor=cursor).json()
        return doc if doc["lines"] else None
    while not any(line["message"] == "second-marker" for line in fresh):
        doc = wait_until(more, what="new lines")
        fresh += doc["lines"]
        cursor = doc["cursor"]
    assert "first-marker" not in [line["message"] for line in fresh]
    assert not {line["id"] for line in fresh} & {line["id"] for line in first["lines"]}
    assert console.get(f"/{name}/logs", cursor=cursor).json() == {"lines": [], "cursor": cursor}
    assert console.get(f"/{name}/logs", cursor="junk").status_code == 400


def test_invoke_action(console, function):
    name = function()
    ok = console.post(f"/{name}/invoke", json={"payload": '{"say": "hello"}'})
    assert ok.status_code == 200
    doc = ok.json()
    assert (doc["status"], doc["function_error"], doc["executed_version"]) == (200, None, "$LATEST")
    assert json.loads(doc["payload"]) == {"echo": {"say": "hello"}}
    assert "hello" in doc["log"] and f"REPORT RequestId: {doc['request_id']}" in doc["log"]

    failed = console.post(f"/{name}/invoke", json={"payload": '{"fail": "on purpose"}'}).json()
    assert failed["function_error"] == "Unhandled"
    assert json.loads(failed["payload"])["errorMessage"] == "on purpose"

    empty = console.post(f"/{name}/invoke", json={}).json()  # no payload: an empty event, as Invoke
    assert json.loads(empty["payload"]) == {"echo": {}}

    missing = console.post("/nobody-here/invoke", json={"payload": "{}"})
    assert missing.status_code == 404
    assert missing.json()["code"] == "ResourceNotFoundException"

    bad_event = console.post(f"/{name}/invoke", json={"payload": "{not json"})
    assert bad_event.status_code == 400
    assert bad_event.json()["code"] == "InvalidRequestContentException"

    bad_body = console.post(f"/{name}/invoke", data=b"{not json", headers={"Content-Type": "application/json"})
    assert bad_body.status_code == 400

    form = console.post(f"/{name}/invoke", data={"payload": "{}"})  # what another site's form sends
    assert form.status_code == 415

    counted = console.get("/" + name).json()["summary"]
    assert (counted["invocations"], counted["errors"]) == (3, 1)
