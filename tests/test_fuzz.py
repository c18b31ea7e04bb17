"""Every operation of Kinesis, Firehose, Lambda and S3, fuzzed from botocore's models
(tests/fuzzing.py): wrong types, missing members, garbage bodies, wrong content types and odd
envelopes get a 2xx or 4xx answer, never a 5xx (501 "not implemented" and the one 500 Kinesis
itself answers aside: fuzz_wire.is_failure), and the server stays up with its data intact.

A longer random run is `bench/fuzz.py`. KINESIM_FUZZ_SEED picks another seed for this sweep.
"""
from __future__ import annotations

import collections
import http.client
import json
import os
import random
import urllib.parse
import urllib.request
import uuid

import cbor2
import pytest

from conftest import client_for, start_server
from fuzz_wire import Connection, Outcome, Request, is_failure
from fuzzing import Fuzzer, create_resources
from test_raw_http import AUTH

SEED = int(os.environ.get("KINESIM_FUZZ_SEED", "9"))


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    # A SubscribeToShard that the fuzzer gets right streams for a second, not AWS's 5 minutes.
    proc = start_server(tmp_path_factory, subscription_s=1.0, log_level="warning")
    yield proc
    proc.stop()


def _report(failures: list[tuple[Request, Outcome]], limit: int = 60) -> str:
    by_op = collections.Counter(f"{req.service}.{req.operation}" for req, _ in failures)
    lines = [f"{len(failures)} requests got a 5xx or no answer; by operation: {dict(by_op)}"]
    for req, out in failures[:limit]:
        lines.append(f"  {out.status} <- {req.describe(200)}\n      answer: {out.excerpt(300)}")
    return "\n".join(lines)


def test_every_operation_answers_fuzzed_requests_without_5xx(fuzz_server):
    url = fuzz_server.url
    kinesis = client_for(url)
    # Acknowledged before the fuzzing, in a stream the fuzzer never names: it must stay readable.
    witness = "witness-" + uuid.uuid4().hex[:12]
    kinesis.create_stream(StreamName=witness, ShardCount=1)
    acked = kinesis.put_record(StreamName=witness, Data=b"acknowledged", PartitionKey="pk")

    fuzzer = Fuzzer(create_resources(url))
    conn = Connection(url, timeout=30)
    rng = random.Random(SEED)
    sent: collections.Counter[tuple[str, str]] = collections.Counter()
    failures: list[tuple[Request, Outcome]] = []

    def send(req: Request) -> Outcome:
        outcome = conn.send(req)
        sent[req.service, req.operation] += 1
        if is_failure(req, outcome):
            failures.append((req, outcome))
        return outcome

    for ops in fuzzer.operations.values():
        for op in ops:
            # An operation kinesim answers 501 (not implemented) gets one value per member and
            # kind: the request is routed and parsed, nothing more happens to it.
            implemented = send(fuzzer.valid_case(op, rng)).status != 501
            for req in fuzzer.sweep(op, rng, every=implemented):
                send(req)
    conn.close()
    per_service = collections.Counter()
    for (service, _), count in sent.items():
        per_service[service] += count
    print(f"fuzzed requests sent (seed {SEED}): {dict(per_service)}")

    # Every operation of the four models, each with at least its valid, missing-member,
    # wrong-type, garbage-body, content-type and envelope cases.
    assert set(sent) == {(op.service, op.name) for ops in fuzzer.operations.values() for op in ops}
    assert set(per_service) == set(fuzzer.operations) and min(sent.values()) >= 6
    # The server is unharmed: it answers, and what it acknowledged is still there.
    with urllib.request.urlopen(url + "/_kinesim/health", timeout=30) as r:
        assert r.status == 200 and json.loads(r.read())["status"] == "running"
    assert witness in kinesis.list_streams(Limit=10000)["StreamNames"]
    it = kinesis.get_shard_iterator(StreamName=witness, ShardId=acked["ShardId"],
                                    ShardIteratorType="AT_SEQUENCE_NUMBER",
                                    StartingSequenceNumber=acked["SequenceNumber"])["ShardIterator"]
    records = kinesis.get_records(ShardIterator=it)["Records"]
    assert [(r["SequenceNumber"], r["Data"]) for r in records[:1]] == [(acked["SequenceNumber"], b"acknowledged")]
    if failures:
        pytest.fail(_report(failures), pytrace=False)


# Regressions the fuzzer found

def test_cbor_timestamps_that_are_not_finite_are_refused(server, kinesis, make_stream):
    stream = make_stream()
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    u = urllib.parse.urlparse(server.url)
    for value in (float("inf"), float("-inf"), float("nan")):
        for target, body in (("ListStreamConsumers", {"StreamARN": arn, "StreamCreationTimestamp": value}),
                             ("GetShardIterator", {"StreamName": stream, "ShardId": "shardId-000000000000",
                                                   "ShardIteratorType": "AT_TIMESTAMP", "Timestamp": value})):
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            conn.request("POST", "/", body=cbor2.dumps(body), headers={
                "X-Amz-Target": f"Kinesis_20131202.{target}", "Content-Type": "application/x-amz-cbor-1.1",
                "Authorization": AUTH, "X-Amz-Date": "20260101T000000Z"})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            assert resp.status == 400, (target, value)


def test_list_objects_with_max_keys_zero(server):
    s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
    s3.create_bucket(Bucket="max-keys-zero")
    s3.put_object(Bucket="max-keys-zero", Key="a", Body=b"x")
    page = s3.list_objects_v2(Bucket="max-keys-zero", MaxKeys=0)
    assert page["KeyCount"] == 0 and page["IsTruncated"] is False and "NextContinuationToken" not in page
