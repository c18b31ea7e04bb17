"""Requests a careless or hostile client sends, each answered with AWS's 4xx (never a 500), leaving
the server answering and nothing stored (issue 9, items 5, 6, 8 and 9).

The server is this module's own: one test stops and restarts it on the same data directory.
"""
from __future__ import annotations

import json
import urllib.request
import uuid

import cbor2
import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.protocol import codec
from kinesim.protocol.errors import AwsError
from kinesim.store import Store
from test_raw_http import call

CBOR = "application/x-amz-cbor-1.1"
ROLE = "arn:aws:iam::000000000000:role/firehose"
MAX_WARM_MIBPS = 10240  # "Scale to more than 10 GiBps" is refused by default (the operation's documentation)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture
def kin(srv):
    # Without the client's own checks, so that what reaches the server is what a careless client sends.
    return client_for(srv.url, parameter_validation=False)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def still_answers(kin) -> None:
    name = unique("ok")
    kin.create_stream(StreamName=name, ShardCount=1)
    kin.put_record(StreamName=name, Data=b"fine", PartitionKey="k")
    assert [r["Data"] for r in records_in(kin, name)] == [b"fine"]


def records_in(kin, name: str) -> list[dict]:
    out = []
    for shard in kin.list_shards(StreamName=name)["Shards"]:
        it = kin.get_shard_iterator(StreamName=name, ShardId=shard["ShardId"],
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out += kin.get_records(ShardIterator=it)["Records"]
    return out


def raw(srv, body: bytes, target: str, ctype: str = "application/x-amz-json-1.1") -> tuple[int, dict]:
    status, _, data = call(srv.url, body, target=target, ctype=ctype)
    return status, (cbor2.loads(data) if ctype == CBOR else json.loads(data))


# ---------------------------------------------------------------------------------------------
# 5. PartitionKey missing: optional in the model since the AUTO record distribution strategy, but
# required on a stream with the default USER_PARTITION_KEY strategy (every stream here).

NULL_KEY = "failed to satisfy constraint: Member must not be null"


def test_put_record_without_partition_key(kin):
    name = unique("nopk")
    kin.create_stream(StreamName=name, ShardCount=1)
    with pytest.raises(ClientError) as e:
        kin.put_record(StreamName=name, Data=b"x")
    assert error_of(e) == ("ValidationException", f"1 validation error detected: Value null at 'partitionKey' {NULL_KEY}")
    assert records_in(kin, name) == []
    still_answers(kin)


def test_put_records_without_partition_key(kin):
    name = unique("nopk")
    kin.create_stream(StreamName=name, ShardCount=2)
    with pytest.raises(ClientError) as e:
        kin.put_records(StreamName=name, Records=[{"Data": b"a", "PartitionKey": "a"}, {"Data": b"b"}])
    assert error_of(e) == ("ValidationException",
                           f"1 validation error detected: Value null at 'records.2.member.partitionKey' {NULL_KEY}")
    # As AWS words a batch with many such records: at most 10 listed, and counted as 10.
    with pytest.raises(ClientError) as e:
        kin.put_records(StreamName=name, Records=[{"Data": b"x"}] * 12)
    code, message = error_of(e)
    assert code == "ValidationException" and message.startswith("10 validation errors detected: ")
    assert message.count(NULL_KEY) == 10 and "'records.10.member.partitionKey'" in message
    assert "records.11." not in message
    assert records_in(kin, name) == []  # the valid record of the rejected batch is not stored either
    still_answers(kin)


def test_missing_partition_key_on_a_missing_stream_is_not_found(kin):
    with pytest.raises(ClientError) as e:
        kin.put_record(StreamName=unique("absent"), Data=b"x")
    assert error_of(e)[0] == "ResourceNotFoundException"


# ---------------------------------------------------------------------------------------------
# 6. Warm throughput beyond what AWS allows (10 GiBps) is refused before anything is stored.

def on_demand(kin) -> str:
    name = unique("warm")
    kin.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    return name


def warm_of(kin, name: str) -> dict | None:
    return kin.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"].get("WarmThroughput")


def test_warm_throughput_beyond_the_limit_is_refused_and_survives_restart(srv, kin):
    name = on_demand(kin)
    kin.update_stream_warm_throughput(StreamName=name, WarmThroughputMiBps=MAX_WARM_MIBPS)
    assert warm_of(kin, name)["TargetMiBps"] == MAX_WARM_MIBPS
    for value in (2 ** 64, MAX_WARM_MIBPS + 1):
        with pytest.raises(ClientError) as e:
            kin.update_stream_warm_throughput(StreamName=name, WarmThroughputMiBps=value)
        code, message = error_of(e)
        assert code == "LimitExceededException" and str(MAX_WARM_MIBPS) in message
        assert warm_of(kin, name)["TargetMiBps"] == MAX_WARM_MIBPS
    with pytest.raises(ClientError) as e:
        kin.create_stream(StreamName=unique("warm"), StreamModeDetails={"StreamMode": "ON_DEMAND"},
                          WarmThroughputMiBps=2 ** 64)
    assert error_of(e)[0] == "LimitExceededException"
    srv.stop()
    srv.start()
    kin = client_for(srv.url)
    assert warm_of(kin, name)["TargetMiBps"] == MAX_WARM_MIBPS
    still_answers(kin)


def test_describe_summary_survives_a_bad_value_stored_by_an_older_version(srv, kin):
    name = on_demand(kin)
    kin.update_stream_warm_throughput(StreamName=name, WarmThroughputMiBps=100)
    srv.stop()
    store = Store(srv.settings.data_dir)
    try:
        doc = store.document("stream", name)
        assert doc["warm_throughput_mibps"] == 100
        doc["warm_throughput_mibps"] = 2 ** 64  # what UpdateStreamWarmThroughput used to store
        store.put_document("stream", name, doc)
    finally:
        store.close()
    srv.start()
    kin = client_for(srv.url)
    assert warm_of(kin, name) == {"TargetMiBps": MAX_WARM_MIBPS, "CurrentMiBps": MAX_WARM_MIBPS}
    kin.update_stream_warm_throughput(StreamName=name, WarmThroughputMiBps=50)  # and it can be repaired
    assert warm_of(kin, name)["TargetMiBps"] == 50


# ---------------------------------------------------------------------------------------------
# 8. A blob given as non-ASCII text (a multiple of 4 characters long): AWS's base64 error.

OMEGA = "ΩΩΩΩ"
OMEGA_ERROR = {"__type": "SerializationException",
               "Message": f"'{OMEGA}' can not be converted to a Blob: Invalid Base64 character: 'Ω'"}


def test_non_ascii_blob_in_kinesis(srv, kin):
    name = unique("blob")
    kin.create_stream(StreamName=name, ShardCount=1)
    for target, body in (("PutRecord", {"StreamName": name, "Data": OMEGA, "PartitionKey": "k"}),
                         ("PutRecords", {"StreamName": name, "Records": [{"Data": "YQ==", "PartitionKey": "k"},
                                                                         {"Data": OMEGA, "PartitionKey": "k"}]})):
        status, out = raw(srv, json.dumps(body).encode(), f"Kinesis_20131202.{target}")
        assert (status, out) == (400, OMEGA_ERROR)
    assert records_in(kin, name) == []
    still_answers(kin)


def test_non_ascii_blob_in_firehose(srv):
    s3 = client_for(srv.url, "s3", s3={"addressing_style": "path"})
    firehose = client_for(srv.url, "firehose")
    bucket, name = unique("bkt"), unique("fh")
    s3.create_bucket(Bucket=bucket)
    # The default 300 s interval: whatever is accepted stays buffered for the whole test.
    firehose.create_delivery_stream(DeliveryStreamName=name, ExtendedS3DestinationConfiguration={
        "RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}"})
    for target, body in (("PutRecord", {"DeliveryStreamName": name, "Record": {"Data": OMEGA}}),
                         ("PutRecordBatch", {"DeliveryStreamName": name,
                                             "Records": [{"Data": "YQ=="}, {"Data": OMEGA}]})):
        status, out = raw(srv, json.dumps(body).encode(), f"Firehose_20150804.{target}")
        assert (status, out) == (400, OMEGA_ERROR)
    assert buffered_bytes(srv, name) == 0
    firehose.put_record(DeliveryStreamName=name, Record={"Data": b"fine"})
    assert buffered_bytes(srv, name) == 4


def buffered_bytes(srv, name: str) -> int:
    with urllib.request.urlopen(f"{srv.url}/_kinesim/firehose/{name}/metrics", timeout=10) as r:
        return json.loads(r.read())["BufferedBytes"]


# ---------------------------------------------------------------------------------------------
# 9. CBOR bignums (tag 2, tag 3) past what a JSON number can hold are refused like such a number.

def bignum(n_bytes: int, tag: int = 2) -> cbor2.CBORTag:
    return cbor2.CBORTag(tag, b"\x01" * n_bytes)


def test_huge_cbor_bignum_is_a_serialization_error(srv, kin):
    name = unique("big")
    for tag in (2, 3):
        status, out = raw(srv, cbor2.dumps({"StreamName": name, "ShardCount": bignum(5000, tag)}),
                          "Kinesis_20131202.CreateStream", CBOR)
        assert (status, out) == (400, {"__type": "SerializationException"})
    # The JSON twin: a number no double can hold.
    status, out = raw(srv, b'{"StreamName": "%s", "ShardCount": 1%s}' % (name.encode(), b"0" * 5000),
                      "Kinesis_20131202.CreateStream")
    assert (status, out) == (400, {"__type": "SerializationException"})
    assert name not in kin.list_streams(Limit=10000)["StreamNames"]
    still_answers(kin)


def test_bignum_a_json_number_could_carry_gets_the_same_answer_as_json(srv, kin):
    value = 2 ** 70
    answers = []
    for body, ctype in ((cbor2.dumps({"StreamName": unique("big"), "ShardCount": cbor2.CBORTag(2, value.to_bytes(9, "big"))}), CBOR),
                        (b'{"StreamName": "%s", "ShardCount": %d}' % (unique("big").encode(), value),
                         "application/x-amz-json-1.1")):
        status, out = raw(srv, body, "Kinesis_20131202.CreateStream", ctype)
        answers.append((status, out["__type"]))
        assert "Number of additional shards that would have resulted from this request: " in out["message"]
    assert answers == [(400, "LimitExceededException")] * 2
    still_answers(kin)


@pytest.mark.parametrize("tag, payload", [(2, b"\x01" * 5000), (3, b"\xff" * 129), (2, b"\x00" * 10 + b"\x01" * 129)])
def test_decode_cbor_refuses_bignums_past_a_double(tag, payload):
    with pytest.raises(AwsError) as e:
        codec.decode_cbor(cbor2.dumps({"ShardCount": cbor2.CBORTag(tag, payload)}))
    assert (e.value.code, e.value.message, e.value.status) == ("SerializationException", None, 400)


def test_decode_cbor_keeps_bignums_a_double_can_hold():
    assert codec.decode_cbor(cbor2.dumps({"n": 2 ** 1000})) == {"n": 2 ** 1000}
    assert codec.decode_cbor(cbor2.dumps({"n": -(2 ** 1000)})) == {"n": -(2 ** 1000)}
    assert codec.decode_cbor(cbor2.dumps({"n": cbor2.CBORTag(2, b"\x00" * 20 + b"\x05")})) == {"n": 5}
