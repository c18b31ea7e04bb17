"""Every operation of Kinesis (queues and channels too), Firehose, Lambda, S3, SNS, SQS, CloudWatch
Logs, CloudFormation, STS, SSM, ECR and IAM, fuzzed from botocore's models (tests/fuzzing.py): wrong
types, missing members, garbage bodies, wrong content types, odd envelopes, hostile documents and
patterns (3,000-deep, huge and malformed JSON in policies, filter policies, event patterns, session
policies and ECR's lifecycle and repository policies; backtracking filter patterns; endless JQ
queries), CloudFormation templates that bomb (YAML alias chains, 3,000-deep JSON and YAML, `!Join`
nested 1,500 deep, conditions and resources in circles, 5,000 resources at a TemplateURL, nested
stacks that name themselves), AllowedPattern expressions that backtrack or explode (SSM's
PutParameter, a template's parameters) against the value that makes them, and query-protocol
(SNS, CloudFormation, STS, IAM) form keys with thousands of dots get a 2xx or 4xx answer, never a 5xx
(501 "not implemented" and the one 500 Kinesis itself answers aside), nor a 2xx to what AWS refuses
on the request, nor an answer of the query protocol that no SDK can read (fuzz_wire.is_failure);
every request has a timeout, and no answer is a failure. The server stays up with its data intact.

This file sweeps the data services; tests/test_fuzz_control.py sweeps CloudFormation, STS, SSM, ECR
and IAM (tests/fuzz_sweep.py runs both). A longer random run is `bench/fuzz.py`. KINESIM_FUZZ_SEED
picks another seed for this sweep.
"""
from __future__ import annotations

import http.client
import urllib.parse

import cbor2

from conftest import client_for
from fuzz_sweep import DATA_SERVICES, fuzz_server, sweep  # noqa: F401 - fuzz_server is a fixture
from test_raw_http import AUTH


def test_every_operation_answers_fuzzed_requests_without_5xx(fuzz_server):
    sweep(fuzz_server, DATA_SERVICES)


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
