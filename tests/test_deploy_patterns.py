"""Templates shaped like AWS's public serverless patterns (aws-samples/serverless-patterns), in
kinesim's own copies under tests/templates/patterns/: deployed through the real server with
`kinesim deploy`, fed records, and their outputs checked as the patterns' READMEs check them
(S3 objects, SQS messages, log events through the Logs API).

- firehose-transform-node: a Direct PUT delivery stream whose records a Node.js function
  transforms, into S3 (firehose-transformation-sam);
- kinesis-error-handling-dlq: a stream mapping that bisects failing batches and sends what still
  fails to an SQS queue (kinesis-lambda-error-handling);
- kinesis-filters-log-groups: one stream, Node.js functions each with a FilterCriteria and its own
  log group (lambda-esm-kinesis-filters-sam).
"""
from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import pytest

from conftest import client_for, start_server
from test_deploy import deploy, empty_bucket, object_keys, s3_client

PATTERNS = Path(__file__).resolve().parent / "templates" / "patterns"
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def pattern_server(tmp_path_factory):
    # Firehose buffers run 100 times faster: the patterns' IntervalInSeconds 60 flushes after 0.6 s.
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


def deployed(capsys, url: str, tmp_path: Path, pattern: str) -> tuple[str, dict[str, str]]:
    """Deploy a copy of the pattern's directory; returns the name prefix and the stack's Outputs."""
    project = tmp_path / pattern
    shutil.copytree(PATTERNS / pattern, project)
    prefix = "p" + uuid.uuid4().hex[:8]
    code, actions, out, err = deploy(capsys, url, str(project / "template.yaml"), "--stack-name", prefix,
                                     "--parameter-overrides", f"Prefix={prefix}")
    assert code == 0, f"{pattern} did not deploy:\n{out}\n{err}"
    outputs = dict(line.split(None, 1) for line in out.split("Outputs:")[-1].splitlines() if line.startswith("  "))
    return prefix, {k: v.strip() for k, v in outputs.items()}


def eventually(probe, what: str, deadline_s: float = DEADLINE_S):
    """`probe()`'s first truthy answer, polling until the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: nothing after {deadline_s:.0f} s")
        time.sleep(0.2)


def log_messages(logs, group: str, pattern: str = "") -> list[str]:
    """Every event of the group (FilterLogEvents, all pages), oldest first."""
    messages, token = [], None
    while True:
        kwargs = {"logGroupName": group, "filterPattern": pattern}
        if token:
            kwargs["nextToken"] = token
        page = logs.filter_log_events(**kwargs)
        messages += [e["message"] for e in page["events"]]
        token = page.get("nextToken")
        if not token:
            return messages


def test_firehose_transform_in_nodejs(pattern_server, tmp_path, capsys):
    url = pattern_server.url
    prefix, outputs = deployed(capsys, url, tmp_path, "firehose-transform-node")
    firehose, s3 = client_for(url, "firehose"), s3_client(url)
    bucket = outputs["BucketName"]
    firehose.put_record_batch(DeliveryStreamName=outputs["DeliveryStreamName"], Records=[
        {"Data": json.dumps({"name": "ada", "n": 1}).encode()},
        {"Data": json.dumps({"name": "bob", "action": "drop"}).encode()},
        {"Data": json.dumps({"name": "cy", "n": 3}).encode()},
    ])
    keys = eventually(lambda: object_keys(s3, bucket, "transformed/"), "transformed objects")
    lines = [json.loads(line) for key in keys
             for line in s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()]
    assert lines == [{"name": "ADA", "n": 1, "by": f"{prefix}-transform"},
                     {"name": "CY", "n": 3, "by": f"{prefix}-transform"}]
    # The function's console.log lines are in its log group, as `sam logs` would show them.
    logs = client_for(url, "logs")
    assert eventually(lambda: log_messages(logs, f"/aws/lambda/{prefix}-transform", '"transformed 3 records"'),
                      "the transform's log line")
    empty_bucket(s3, bucket)  # CloudFormation does not delete a bucket that holds objects either
    assert deploy(capsys, url, str(tmp_path / "firehose-transform-node" / "template.yaml"), "--stack-name", prefix,
                  "--delete")[0] == 0


def test_error_handling_mapping_with_an_sqs_dead_letter_queue(pattern_server, tmp_path, capsys):
    url = pattern_server.url
    prefix, outputs = deployed(capsys, url, tmp_path, "kinesis-error-handling-dlq")
    kinesis, sqs, logs = client_for(url), client_for(url, "sqs"), client_for(url, "logs")
    elements = [{"AtomicNumber": 1, "Element": "Hydrogen", "Symbol": "H"},
                {"AtomicNumber": 2, "Element": "Helium", "Symbol": "He"},
                {"AtomicNumber": "three", "Element": "Lithium", "Symbol": "Li"},  # the poison pill
                {"AtomicNumber": 4, "Element": "Beryllium", "Symbol": "Be"},
                {"AtomicNumber": 5, "Element": "Boron", "Symbol": "B"}]
    sent = kinesis.put_records(StreamName=outputs["StreamName"], Records=[
        {"Data": json.dumps(e).encode(), "PartitionKey": "elements"} for e in elements])
    poison = sent["Records"][2]["SequenceNumber"]

    def failures() -> list[dict]:
        answer = sqs.receive_message(QueueUrl=outputs["QueueUrl"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
        return [json.loads(m["Body"]) for m in answer.get("Messages", [])]

    (record, *more) = eventually(failures, "the OnFailure record in the queue")
    # Bisecting narrows the failure down to the poison pill alone (AWS's invocation record shape).
    info = record["KinesisBatchInfo"]
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == poison and info["batchSize"] == 1
    assert info["streamArn"].endswith(f":stream/{outputs['StreamName']}")
    assert record["requestContext"]["functionArn"].endswith(f":function:{outputs['FunctionName']}")
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert more == []
    # Every valid element was processed.
    def processed() -> set[str]:
        symbols = {m.split("valid element ")[1].strip()
                   for m in log_messages(logs, f"/aws/lambda/{outputs['FunctionName']}", '"valid element"')}
        return symbols if symbols >= {"H", "He", "Be", "B"} else set()

    assert eventually(processed, "the valid elements in the function's log") == {"H", "He", "Be", "B"}
    groups = logs.describe_log_groups(logGroupNamePrefix=outputs["LogGroupName"])["logGroups"]
    assert [(g["logGroupName"], g.get("retentionInDays")) for g in groups] == [(outputs["LogGroupName"], 7)]


def test_filter_per_function_with_log_groups(pattern_server, tmp_path, capsys):
    url = pattern_server.url
    prefix, outputs = deployed(capsys, url, tmp_path, "kinesis-filters-log-groups")
    kinesis, logs = client_for(url), client_for(url, "logs")
    records = [("a", {"kind": "Event", "responseStatus": {"code": 300}}),
               ("b", {"kind": "Event", "responseStatus": {"code": 200}}),
               ("c", {"kind": "Other"}),
               ("d", "plain text, not JSON")]
    for key, data in records:
        kinesis.put_record(StreamName=outputs["StreamName"], PartitionKey=key,
                           Data=(data if isinstance(data, str) else json.dumps(data)).encode())
    # A last record every filter passes: once a function has it, it has seen all before it (one shard).
    kinesis.put_record(StreamName=outputs["StreamName"], PartitionKey="end",
                       Data=json.dumps({"kind": "Event", "responseStatus": {"code": 300}}).encode())
    expected = {"no-filter": ["a", "b", "c", "d", "end"], "events": ["a", "b", "end"], "code-300": ["a", "end"]}
    for function, keys in expected.items():
        group = f"/aws/lambda/{prefix}-{function}"

        def seen() -> list[str]:
            keys_seen = [m.split("\t")[-1].split(" record data:")[0].strip()
                         for m in log_messages(logs, group, '"record data"')]
            return keys_seen if "end" in keys_seen else []

        assert eventually(seen, f"{function}'s log events") == keys, function
        (described,) = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        assert described["retentionInDays"] == 3
    assert deploy(capsys, url, str(tmp_path / "kinesis-filters-log-groups" / "template.yaml"), "--stack-name",
                  prefix, "--delete")[0] == 0
