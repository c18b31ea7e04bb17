"""ModelValidator: requests checked against botocore's Kinesis model, answered in AWS's words.

Expected texts are AWS's as recorded by kinesalite (test/*.js against real Kinesis) unless a test
says otherwise.
"""
from __future__ import annotations

import base64
import time
from datetime import datetime, timezone

import pytest

from kinesim.protocol.errors import AwsError
from kinesim.protocol.validation import ModelValidator, _aws_member_order


@pytest.fixture(scope="module")
def v() -> ModelValidator:
    return ModelValidator("kinesis")


def fails(v: ModelValidator, op: str, params, **kw) -> AwsError:
    with pytest.raises(AwsError) as e:
        v.parse(op, params, **kw)
    return e.value


def validation(v: ModelValidator, op: str, params) -> str:
    err = fails(v, op, params)
    assert (err.code, err.status) == ("ValidationException", 400), err.message
    return err.message


def serialization(v: ModelValidator, op: str, params, **kw) -> str:
    err = fails(v, op, params, **kw)
    assert (err.code, err.status) == ("SerializationException", 400), err.message
    return err.message


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# the model itself

def test_operations_come_from_the_model(v):
    assert {"CreateStream", "PutRecord", "PutRecords", "GetRecords", "SubscribeToShard"} <= v.operations
    assert fails(v, "NoSuchOperation", {}).code == "UnknownOperationException"


def test_valid_request_passes_and_drops_unknown_members_and_nulls(v):
    out = v.parse("CreateStream", {"StreamName": "s", "ShardCount": 2, "Bogus": [1, 2], "Tags": None})
    assert out == {"StreamName": "s", "ShardCount": 2}


# constraint violations: one ValidationException, every failure listed

def test_shard_count_zero(v):
    assert validation(v, "CreateStream", {"StreamName": "x", "ShardCount": 0}) == (
        "1 validation error detected: Value '0' at 'shardCount' failed to satisfy constraint: "
        "Member must have value greater than or equal to 1")


def test_stream_name_pattern(v):
    assert validation(v, "CreateStream", {"StreamName": "x!", "ShardCount": 1}) == (
        "1 validation error detected: Value 'x!' at 'streamName' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")


def test_missing_required_member_is_null(v):
    assert validation(v, "CreateStream", {"ShardCount": 1}) == (
        "1 validation error detected: Value null at 'streamName' failed to satisfy constraint: "
        "Member must not be null")
    # JSON null is the same as absent
    assert "Value null at 'streamName'" in validation(v, "CreateStream", {"StreamName": None})


def test_stream_name_too_long(v):
    name = "a" * 129
    assert validation(v, "CreateStream", {"StreamName": name, "ShardCount": 1}) == (
        f"1 validation error detected: Value '{name}' at 'streamName' failed to satisfy constraint: "
        "Member must have length less than or equal to 128")


def test_several_errors_counted_and_joined_in_aws_order(v):
    # kinesalite's exact recording of AWS: shardCount before streamName, pattern before length.
    assert validation(v, "CreateStream", {"StreamName": "", "ShardCount": 0}) == (
        "3 validation errors detected: "
        "Value '0' at 'shardCount' failed to satisfy constraint: "
        "Member must have value greater than or equal to 1; "
        "Value '' at 'streamName' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+; "
        "Value '' at 'streamName' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1")


def test_member_order_reproduces_recorded_aws_orders():
    # Orders kinesalite recorded from AWS (exact-text assertions), over today's model members.
    def order(names):
        return [n for n in _aws_member_order(names) if n in recorded]
    recorded = ["ShardCount", "StreamName"]
    assert order(["StreamName", "ShardCount", "StreamModeDetails", "Tags"]) == recorded
    recorded = ["Tags", "StreamName"]
    assert order(["StreamName", "Tags", "StreamARN"]) == recorded
    recorded = ["Records", "StreamName"]
    assert order(["Records", "StreamName", "StreamARN"]) == recorded
    recorded = ["ShardId", "ShardIteratorType", "StartingSequenceNumber", "StreamName"]
    assert order(["StreamName", "ShardId", "ShardIteratorType", "StartingSequenceNumber", "Timestamp"]) == recorded


def test_errors_capped_at_ten(v):
    records = [{"Data": "", "PartitionKey": ""} for _ in range(12)]
    message = validation(v, "PutRecords", {"StreamName": "s", "Records": records})
    assert message.startswith("10 validation errors detected: ")
    assert message.count("failed to satisfy constraint") == 10
    assert "records.10.member.partitionKey" in message and "records.11.member" not in message


def test_enum_value_set(v):
    message = validation(v, "GetShardIterator", {"StreamName": "s", "ShardId": "shardId-0",
                                                 "ShardIteratorType": "NOPE"})
    assert message == (
        "1 validation error detected: Value 'NOPE' at 'shardIteratorType' failed to satisfy constraint: "
        "Member must satisfy enum value set: [AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, "
        "LATEST, AT_TIMESTAMP]")


def test_nested_list_member_paths(v):
    message = validation(v, "PutRecords", {"StreamName": "s", "Records": [
        {"Data": "", "PartitionKey": "ok"},
        {"Data": "", "PartitionKey": ""},
        {"Data": "", "PartitionKey": "p", "ExplicitHashKey": "12a"},
    ]})
    assert message == (
        "2 validation errors detected: "
        "Value '' at 'records.2.member.partitionKey' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1; "
        "Value '12a' at 'records.3.member.explicitHashKey' failed to satisfy constraint: "
        r"Member must satisfy regular expression pattern: ^(0|([1-9]\d{0,38}))$")


def test_nested_structure_path_and_required(v):
    message = validation(v, "ListShards", {"StreamName": "s", "ShardFilter": {"ShardId": "x"}})
    assert message == ("1 validation error detected: Value null at 'shardFilter.type' failed to satisfy "
                       "constraint: Member must not be null")


def test_put_records_501_records(v):
    records = [{"Data": b64(b"abc"), "PartitionKey": "p"}] * 501
    message = validation(v, "PutRecords", {"StreamName": "s", "Records": records})
    entry = "PutRecordsRequestEntry(data=java.nio.HeapByteBuffer[pos=0 lim=3 cap=3], explicitHashKey=null, partitionKey=p)"
    # AWS renders the list as Java does (the form of a real AWS response, recorded in 2019).
    assert message == ("1 validation error detected: Value '[" + ", ".join([entry] * 501) + "]' at 'records' "
                       "failed to satisfy constraint: Member must have length less than or equal to 500")


def test_put_records_empty_list(v):
    assert validation(v, "PutRecords", {"StreamName": "s", "Records": []}) == (
        "1 validation error detected: Value '[]' at 'records' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1")


def test_record_data_over_the_model_limit(v):
    # The model's Data limit is 10 MiB (MaxRecordSizeInKiB's ceiling); the stream's own limit,
    # 1 MiB by default, is the service's check. A 1 MiB + 1 record passes the model.
    one_mib_plus = b64(b"x" * (1024 * 1024 + 1))
    out = v.parse("PutRecord", {"StreamName": "s", "PartitionKey": "p", "Data": one_mib_plus})
    assert len(out["Data"]) == 1024 * 1024 + 1
    n = 10 * 1024 * 1024 + 1
    message = validation(v, "PutRecords", {"StreamName": "s", "Records": [
        {"Data": b64(b"ok"), "PartitionKey": "p"}, {"Data": b64(b"x" * n), "PartitionKey": "p"}]})
    assert message == (
        f"1 validation error detected: Value 'java.nio.HeapByteBuffer[pos=0 lim={n} cap={n}]' at "
        "'records.2.member.data' failed to satisfy constraint: Member must have length less than or equal to 10485760")


def test_tag_keys_constraint_reported_for_the_whole_list(v):
    # kinesalite's validations: scalar list members are checked as one constraint on the list.
    assert validation(v, "RemoveTagsFromStream", {"StreamName": "s", "TagKeys": ["a", ""]}) == (
        "1 validation error detected: Value '[a, ]' at 'tagKeys' failed to satisfy constraint: "
        "Member must satisfy constraint: [Member must have length less than or equal to 128, "
        "Member must have length greater than or equal to 1]")


def test_tag_map_rendering_and_key_constraint(v):
    assert validation(v, "AddTagsToStream", {"StreamName": "s", "Tags": {"k": "v", "": "w"}}) == (
        "1 validation error detected: Value '{k=v, =w}' at 'tags' failed to satisfy constraint: "
        "Map keys must satisfy constraint: [Member must have length less than or equal to 128, "
        "Member must have length greater than or equal to 1]")
    assert validation(v, "AddTagsToStream", {"StreamName": "s", "Tags": {}}) == (
        "1 validation error detected: Value '{}' at 'tags' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1")


def test_string_length_counts_utf16_units_like_java(v):
    assert v.parse("PutRecord", {"StreamName": "s", "Data": "", "PartitionKey": "é" * 256})["PartitionKey"]
    message = validation(v, "PutRecord", {"StreamName": "s", "Data": "", "PartitionKey": "\U0001F600" * 129})
    assert "at 'partitionKey' failed to satisfy constraint: Member must have length less than or equal to 256" in message


def test_patterns_match_the_whole_value_with_ascii_digits(v):
    ok = {"StreamName": "s", "Data": "", "PartitionKey": "p"}
    assert v.parse("PutRecord", {**ok, "ExplicitHashKey": "0"})["ExplicitHashKey"] == "0"
    for bad in ("01", "1 ", "\u0661\u0662", "1" * 40):
        assert "at 'explicitHashKey'" in validation(v, "PutRecord", {**ok, "ExplicitHashKey": bad})


# type mismatches: SerializationException, the first one only, before any constraint

@pytest.mark.parametrize("value, message", [
    (True, "class java.lang.Boolean can not be converted to an String"),
    (23, "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to an String"),
    (34.56, "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to an String"),
    ([], "Start of list found where not expected"),
    ({}, "Start of structure or map found where not expected."),
])
def test_string_member_wrong_type(v, value, message):
    assert serialization(v, "CreateStream", {"StreamName": value, "ShardCount": 1}) == message


@pytest.mark.parametrize("value, message", [
    ("23", "class java.lang.String can not be converted to an Integer"),
    (True, "class java.lang.Boolean can not be converted to an Integer"),
    ([], "Start of list found where not expected"),
    ({}, "Start of structure or map found where not expected."),
])
def test_integer_member_wrong_type(v, value, message):
    assert serialization(v, "CreateStream", {"StreamName": "s", "ShardCount": value}) == message


def test_integers_floor_fractions_and_keep_large_values(v):
    assert v.parse("CreateStream", {"StreamName": "s", "ShardCount": 2.9})["ShardCount"] == 2
    assert v.parse("CreateStream", {"StreamName": "s", "ShardCount": 100000000000})["ShardCount"] == 100000000000


def test_other_integer_members_wrong_type(v):
    assert serialization(v, "IncreaseStreamRetentionPeriod",
                         {"StreamName": "s", "RetentionPeriodHours": "48"}) == \
        "class java.lang.String can not be converted to an Integer"
    assert serialization(v, "GetRecords", {"ShardIterator": "x", "Limit": False}) == \
        "class java.lang.Boolean can not be converted to an Integer"


def test_long_and_double_members_name_their_java_type():
    # Kinesis has no long or double inputs; Lambda and Firehose do (kinesalite's "an Long" wording).
    lam = ModelValidator("lambda")
    assert serialization(lam, "DeleteLayerVersion", {"LayerName": "l", "VersionNumber": []}) == \
        "Start of list found where not expected"
    assert serialization(lam, "DeleteLayerVersion", {"LayerName": "l", "VersionNumber": True}) == \
        "class java.lang.Boolean can not be converted to an Long"
    firehose = ModelValidator("firehose")
    orc = {"DeliveryStreamName": "d", "ExtendedS3DestinationConfiguration": {
        "RoleARN": "arn:aws:iam::123456789012:role/r", "BucketARN": "arn:aws:s3:::bucket",
        "DataFormatConversionConfiguration": {"OutputFormatConfiguration": {"Serializer": {"OrcSerDe": {
            "PaddingTolerance": "x"}}}}}}
    assert serialization(firehose, "CreateDeliveryStream", orc) == \
        "class java.lang.String can not be converted to an Double"


@pytest.mark.parametrize("value, message", [
    ("23", "Expected list or null"),
    (23, "Expected list or null"),
    (True, "Expected list or null"),
    ({}, "Start of structure or map found where not expected."),
])
def test_list_member_wrong_type(v, value, message):
    assert serialization(v, "PutRecords", {"StreamName": "s", "Records": value}) == message


@pytest.mark.parametrize("value, message", [
    ("23", "Expected null"),
    (23, "Expected null"),
    ([], "Start of list found where not expected"),
])
def test_structure_member_wrong_type(v, value, message):
    assert serialization(v, "PutRecords", {"StreamName": "s", "Records": [value]}) == message


@pytest.mark.parametrize("value, message", [
    ("23", "Expected map or null"),
    (23, "Expected map or null"),
    ([], "Start of list found where not expected"),
])
def test_map_member_wrong_type(v, value, message):
    assert serialization(v, "AddTagsToStream", {"StreamName": "s", "Tags": value}) == message


def test_map_value_wrong_type(v):
    assert serialization(v, "AddTagsToStream", {"StreamName": "s", "Tags": {"a": 1}}) == \
        "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to an String"


@pytest.mark.parametrize("value, message", [
    (True, "class java.lang.Boolean can not be converted to a Blob"),
    (23, "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to a Blob"),
    ([], "Start of list found where not expected"),
    ({}, "Start of structure or map found where not expected."),
    ("abc", "'abc' can not be converted to a Blob: Base64 encoded length is expected a multiple of 4 bytes "
            "but found: 3"),
    ("23456", "'23456' can not be converted to a Blob: Base64 encoded length is expected a multiple of 4 bytes "
              "but found: 5"),
    ("=+/=", "'=+/=' can not be converted to a Blob: Invalid Base64 character: '='"),
    ("ab!d", "'ab!d' can not be converted to a Blob: Invalid Base64 character: '!'"),
    ("+/+=", "'+/+=' can not be converted to a Blob: Invalid last non-pad Base64 character dectected"),
    ("YR==", "'YR==' can not be converted to a Blob: Invalid last non-pad Base64 character dectected"),
])
def test_bad_blob(v, value, message):
    assert serialization(v, "PutRecord", {"StreamName": "s", "PartitionKey": "p", "Data": value}) == message


def test_bad_blob_inside_put_records(v):
    assert serialization(v, "PutRecords", {"StreamName": "s", "Records": [
        {"Data": "YWJj", "PartitionKey": "p"}, {"Data": "YWJ", "PartitionKey": "p"}]}) == \
        "'YWJ' can not be converted to a Blob: Base64 encoded length is expected a multiple of 4 bytes but found: 3"


@pytest.mark.parametrize("value, message", [
    (23, "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to an Boolean"),
    ("hello", "'HELLO' can not be converted to an Boolean"),
    ([], "Start of list found where not expected"),
    ({}, "Start of structure or map found where not expected."),
])
def test_boolean_member_wrong_type(v, value, message):
    assert serialization(v, "PutRecords", {"Records": [{"Data": "", "PartitionKey": "p"}], "DryRun": value}) == message


def test_boolean_strings_aws_accepts(v):
    base = {"Records": [{"Data": "", "PartitionKey": "p"}]}
    assert v.parse("PutRecords", {**base, "DryRun": "true"})["DryRun"] is True
    assert v.parse("PutRecords", {**base, "DryRun": "No"})["DryRun"] is False
    assert v.parse("PutRecords", {**base, "DryRun": False})["DryRun"] is False


def test_type_error_wins_over_constraint_errors(v):
    # The constraint failure comes first in the document; AWS still answers with the type error.
    assert serialization(v, "CreateStream", {"StreamName": "x!", "ShardCount": "1"}) == \
        "class java.lang.String can not be converted to an Integer"
    assert serialization(v, "PutRecords", {"StreamName": "s", "Records": [
        {"Data": "", "PartitionKey": ""}, {"Data": "", "PartitionKey": 5}]}) == \
        "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to an String"


def test_first_type_error_in_document_order(v):
    assert serialization(v, "CreateStream", {"ShardCount": "1", "StreamName": 1}) == \
        "class java.lang.String can not be converted to an Integer"
    assert serialization(v, "CreateStream", {"StreamName": 1, "ShardCount": "1"}) == \
        "class com.amazon.coral.value.json.numbers.TruncatingBigNumber can not be converted to an String"


# conversions for the service

def test_blob_becomes_bytes(v):
    out = v.parse("PutRecords", {"StreamName": "s", "Records": [
        {"Data": b64(b"hello"), "PartitionKey": "p"}, {"Data": "", "PartitionKey": "q"}]})
    assert out["Records"] == [{"Data": b"hello", "PartitionKey": "p"}, {"Data": b"", "PartitionKey": "q"}]


def test_cbor_bytes_pass_through(v):
    out = v.parse("PutRecord", {"StreamName": "s", "PartitionKey": "p", "Data": b"\x00\xffraw"}, cbor=True)
    assert out["Data"] == b"\x00\xffraw"
    out = v.parse("PutRecords", {"StreamName": "s", "Records": [{"Data": bytearray(b"ab"), "PartitionKey": "p"}]},
                  cbor=True)
    assert out["Records"][0]["Data"] == b"ab" and type(out["Records"][0]["Data"]) is bytes


def test_cbor_blob_length_checked_in_bytes(v):
    n = 10 * 1024 * 1024 + 1
    message = validation(v, "PutRecord", {"StreamName": "s", "PartitionKey": "p", "Data": bytes(n)})
    assert f"Value 'java.nio.HeapByteBuffer[pos=0 lim={n} cap={n}]' at 'data'" in message


def test_timestamps_become_epoch_seconds(v):
    base = {"StreamName": "s", "ShardId": "shardId-000000000000", "ShardIteratorType": "AT_TIMESTAMP"}
    assert v.parse("GetShardIterator", {**base, "Timestamp": 1459799926.48})["Timestamp"] == 1459799926.48
    assert v.parse("GetShardIterator", {**base, "Timestamp": 1459799926})["Timestamp"] == 1459799926.0
    iso = v.parse("GetShardIterator", {**base, "Timestamp": "2016-04-04T19:58:46.480-00:00"})["Timestamp"]
    assert iso == pytest.approx(1459799926.48)
    assert v.parse("GetShardIterator", {**base, "Timestamp": "2016-04-04T19:58:46Z"})["Timestamp"] == 1459799926.0
    when = datetime(2016, 4, 4, 19, 58, 46, 480000, tzinfo=timezone.utc)
    out = v.parse("GetShardIterator", {**base, "Timestamp": when}, cbor=True)["Timestamp"]
    assert isinstance(out, float) and out == pytest.approx(1459799926.48)
    nested = v.parse("ListShards", {"StreamName": "s", "ShardFilter": {"Type": "AT_TIMESTAMP", "Timestamp": 5}})
    assert nested["ShardFilter"]["Timestamp"] == 5.0


@pytest.mark.parametrize("value, message", [
    ("yesterday", "class java.lang.String can not be converted to milliseconds since epoch"),
    (True, "class java.lang.Boolean can not be converted to milliseconds since epoch"),
    ([], "Start of list found where not expected"),
])
def test_bad_timestamp(v, value, message):
    assert serialization(v, "GetShardIterator", {"StreamName": "s", "ShardId": "shardId-0",
                                                 "ShardIteratorType": "AT_TIMESTAMP", "Timestamp": value}) == message


def test_output_timestamp_members(v):
    assert v.output_timestamp_members("GetRecords") == frozenset({"ApproximateArrivalTimestamp"})
    assert "StreamCreationTimestamp" in v.output_timestamp_members("DescribeStreamSummary")
    assert v.output_timestamp_members("PutRecord") == frozenset()
    assert v.output_timestamp_members("CreateStream") == frozenset()


def test_other_services_load():
    firehose = ModelValidator("firehose")
    assert "PutRecordBatch" in firehose.operations
    out = firehose.parse("PutRecord", {"DeliveryStreamName": "d", "Record": {"Data": b64(b"x")}})
    assert out["Record"]["Data"] == b"x"
    lam = ModelValidator("lambda")
    # rest-json: query-string members arrive as text
    assert lam.parse("ListFunctions", {"MaxItems": "10"}) == {"MaxItems": 10}
    assert "at 'maxItems'" in fails(lam, "ListFunctions", {"MaxItems": "0"}).message


# speed: PutRecords is the hot path

def test_put_records_parse_is_fast(v):
    data = b64(bytes(range(100)))
    body = {"StreamName": "bench", "Records": [{"Data": data, "PartitionKey": f"pk-{i}"} for i in range(500)]}
    v.parse("PutRecords", body)
    runs = 50
    best = min(_timed(v, body) for _ in range(runs))
    assert best < 0.002, f"PutRecords of 500 records took {best * 1000:.2f} ms"


def _timed(v: ModelValidator, body) -> float:
    start = time.perf_counter()
    v.parse("PutRecords", body)
    return time.perf_counter() - start
