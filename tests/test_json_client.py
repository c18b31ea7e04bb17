"""kinesim/protocol/json_client.py: JSON-protocol calls signed without botocore, for short-lived
commands (`kinesim sql` asks for delivery streams and channels before each query)."""
from __future__ import annotations

import datetime

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from kinesim.protocol import sigv4
from kinesim.protocol.json_client import CallError, call

from conftest import start_server

BODY = b'{"Limit": 10}'
HEADERS = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Firehose_20150804.ListDeliveryStreams"}


def test_the_signature_is_botocores(monkeypatch):
    now = datetime.datetime(2026, 11, 29, 18, 0, 0)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)  # botocore's clock, fixed as ours is
    ours = sigv4.sign("POST", "127.0.0.1:4566", "/", HEADERS, BODY, "AKIDEXAMPLE", "secret", "eu-west-1",
                      "firehose", now=now.replace(tzinfo=datetime.timezone.utc).timestamp())
    request = AWSRequest("POST", "http://127.0.0.1:4566/", data=BODY, headers=dict(HEADERS))
    SigV4Auth(Credentials("AKIDEXAMPLE", "secret"), "firehose", "eu-west-1").add_auth(request)
    assert ours["X-Amz-Date"] == request.headers["X-Amz-Date"] == "20261129T180000Z"
    assert ours["Authorization"] == request.headers["Authorization"]


@pytest.fixture(scope="module")
def verifying_server(tmp_path_factory):
    proc = start_server(tmp_path_factory, verify_signatures=True, credentials=["kinesim:kinesim"])
    yield proc
    proc.stop()


def test_a_server_that_verifies_signatures_answers_and_errors_carry_the_code(verifying_server):
    url = verifying_server.url
    assert call(url, "Firehose_20150804.ListDeliveryStreams", {}, "firehose")["DeliveryStreamNames"] == []
    with pytest.raises(CallError) as caught:
        call(url, "Firehose_20150804.DescribeDeliveryStream", {"DeliveryStreamName": "none"}, "firehose")
    assert caught.value.code == "ResourceNotFoundException" and caught.value.status == 400
    with pytest.raises(CallError) as caught:  # a wrong secret is refused as AWS refuses it
        call(url, "Kinesis_20131202.ListStreams", {}, "kinesis", secret="wrong")
    assert caught.value.code == "InvalidSignatureException"
