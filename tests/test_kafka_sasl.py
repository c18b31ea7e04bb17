"""SASL/PLAIN on the Kafka port (kinesim/kafka/sasl.py): the user name (an access key id, optionally
`KEYID@region`) picks the account and region whose streams a connection's topics are, as the same
key does for boto3; --verify-signatures requires SASL and the key's secret."""
from __future__ import annotations

import socket
import struct
import uuid

import boto3
import pytest
from botocore.config import Config

from kinesim.kafka import errors
from kinesim.server import free_port

from conftest import client_for, start_server
from test_kafka_protocol import call, closed_by_server, metadata, read_frame, request_frame

ACCOUNT = "111111111111"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def verifying(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), verify_signatures=True,
                        credentials=[f"{ACCOUNT}:right-secret"])
    yield proc
    proc.stop()


def kinesis_as(proc, key: str, region: str = "us-east-1", secret: str = "x"):
    return boto3.client("kinesis", endpoint_url=proc.url, region_name=region, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def produce_as(proc, topic: str, user: str, password: str = "x", **config) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proc.settings.kafka_port}", acks="all",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username=user, sasl_plain_password=password, **config)
    try:
        producer.send(topic, key=b"k", value=b"v").get(timeout=20)
    finally:
        producer.close()


def connect(proc) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proc.settings.kafka_port), timeout=10)


def plain(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_an_account_key_puts_topics_in_that_account(kafka):
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    produce_as(kafka, topic, ACCOUNT)
    assert topic in kinesis_as(kafka, ACCOUNT).list_streams()["StreamNames"]
    assert topic not in client_for(kafka.url).list_streams()["StreamNames"]  # the server's own account


def test_a_region_after_the_key(kafka):
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    produce_as(kafka, topic, f"{ACCOUNT}@eu-west-1")
    assert topic in kinesis_as(kafka, ACCOUNT, "eu-west-1").list_streams()["StreamNames"]
    assert topic not in kinesis_as(kafka, ACCOUNT, "us-east-1").list_streams()["StreamNames"]


def test_handshake_and_authenticate_frames(kafka):
    with connect(kafka) as sock:
        assert call(sock, 36, 2, {"auth_bytes": plain(ACCOUNT, "x")}).error_code == errors.ILLEGAL_SASL_STATE
        answer = call(sock, 17, 1, {"mechanism": "SCRAM-SHA-256"})
        assert (answer.error_code, answer.mechanisms) == (errors.UNSUPPORTED_SASL_MECHANISM, ("PLAIN",))
        assert call(sock, 17, 1, {"mechanism": "PLAIN"}).error_code == errors.NONE
        refused = call(sock, 36, 1, {"auth_bytes": plain(f"{ACCOUNT}@nowhere", "x")})
        assert refused.error_code == errors.SASL_AUTHENTICATION_FAILED and "not a region" in refused.error_message
        assert call(sock, 17, 1, {"mechanism": "PLAIN"}).error_code == errors.NONE
        assert call(sock, 36, 0, {"auth_bytes": plain(ACCOUNT, "x")}).error_code == errors.NONE


def test_handshake_v0_then_a_bare_token(kafka):
    name = f"sasl-{uuid.uuid4().hex[:8]}"
    kinesis_as(kafka, "222222222222", "ap-south-1").create_stream(StreamName=name, ShardCount=2)
    with connect(kafka) as sock:
        assert call(sock, 17, 0, {"mechanism": "PLAIN"}).error_code == errors.NONE
        token = plain("222222222222@ap-south-1", "x")
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(sock) == b""  # success: an empty frame
        [topic] = metadata(sock, [name]).topics
        assert topic.error_code == errors.NONE and len(topic.partitions) == 2


def test_without_sasl_the_servers_own_scope(kafka):
    name = f"sasl-{uuid.uuid4().hex[:8]}"
    client_for(kafka.url).create_stream(StreamName=name, ShardCount=1)
    with connect(kafka) as sock:
        assert metadata(sock, [name]).topics[0].error_code == errors.NONE


# --verify-signatures


def test_verify_signatures_accepts_the_keys_secret(verifying):
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    produce_as(verifying, topic, ACCOUNT, "right-secret")
    assert topic in kinesis_as(verifying, ACCOUNT, secret="right-secret").list_streams()["StreamNames"]


def test_verify_signatures_refuses_a_wrong_password(verifying):
    with connect(verifying) as sock:
        assert call(sock, 17, 1, {"mechanism": "PLAIN"}).error_code == errors.NONE
        assert call(sock, 36, 2, {"auth_bytes": plain(ACCOUNT, "wrong")}).error_code == \
            errors.SASL_AUTHENTICATION_FAILED
        assert call(sock, 17, 1, {"mechanism": "PLAIN"}).error_code == errors.NONE
        assert call(sock, 36, 2, {"auth_bytes": plain("AKIDUNKNOWN", "right-secret")}).error_code == \
            errors.SASL_AUTHENTICATION_FAILED
    with pytest.raises(Exception):
        # Short waits: kafka-python retries a refused bootstrap until they run out.
        produce_as(verifying, f"sasl-{uuid.uuid4().hex[:8]}", ACCOUNT, "wrong", max_block_ms=3000,
                   api_version_auto_timeout_ms=3000)


def test_verify_signatures_closes_a_connection_that_skips_sasl(verifying):
    with connect(verifying) as sock:
        assert call(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
        sock.sendall(request_frame(3, 12, 8, {"topics": None, "allow_auto_topic_creation": False}))
        assert closed_by_server(sock)
