"""firehose.partitioning: MetadataExtraction (JQ, evaluated by a pool of jq workers), de-aggregation,
delimiters, processor checks."""
from __future__ import annotations

import json

import pytest

from firehose import jq_worker, partitioning
from firehose.jq_runner import JqPool
from firehose.partitioning import (
    PartitioningError,
    append_delimiter,
    deaggregate,
    processor_parameters,
)
from kinesim.protocol.errors import AwsError


@pytest.fixture(scope="module")
def jq():
    pool = JqPool()
    yield pool
    pool.close()


@pytest.fixture
def extract_partition_keys(jq):
    """One record's keys, or its PartitioningError raised."""
    def extract(record: bytes, query: str) -> dict[str, str]:
        [found] = partitioning.extract_partition_keys([record], query, jq)
        if isinstance(found, PartitioningError):
            raise found
        return found
    return extract


@pytest.fixture
def validate_processing(jq):
    return lambda prefix, configuration, dynamic: partitioning.validate_processing(prefix, configuration, dynamic, jq)

# The sample record of AWS's "Understand partitioning keys" page.
RECORD = json.dumps({
    "type": {"device": "mobile", "event": "user_clicked_submit_button"},
    "customer_id": "1234567890",
    "event_timestamp": 1565382027,
    "region": "sample_region",
}).encode()
AWS_QUERY = ('{customer_id:.customer_id,device:.type.device,year:.event_timestamp|strftime("%Y"),'
             'month:.event_timestamp|strftime("%m"),day:.event_timestamp|strftime("%d"),'
             'hour:.event_timestamp|strftime("%H")}')


def test_aws_example_query(extract_partition_keys):
    assert extract_partition_keys(RECORD, AWS_QUERY) == {
        "customer_id": "1234567890", "device": "mobile", "year": "2019", "month": "08", "day": "09", "hour": "20",
    }


def test_spacing_as_in_the_brief_and_scalars_become_text(extract_partition_keys):
    query = '{customer_id: .customer_id, year: .event_timestamp| strftime("%Y"), ts: .event_timestamp, ok: true}'
    assert extract_partition_keys(RECORD, query) == {
        "customer_id": "1234567890", "year": "2019", "ts": "1565382027", "ok": "true",
    }


def test_each_query_is_compiled_once():
    """In a worker (`jq_worker`, tested here in this process with a query that ends)."""
    jq_worker.compiled.cache_clear()
    for _ in range(5):
        assert jq_worker.partition_keys(AWS_QUERY, RECORD)["keys"]["device"] == "mobile"
    info = jq_worker.compiled.cache_info()
    assert info.misses == 1 and info.hits == 4


def test_a_delivery_is_evaluated_in_one_round_trip_per_chunk(jq):
    records = [json.dumps({"customer_id": str(n)}).encode() for n in range(1200)] + [b"not json"]
    found = partitioning.extract_partition_keys(records, "{customer_id: .customer_id}", jq)
    assert found[:1200] == [{"customer_id": str(n)} for n in range(1200)]
    assert isinstance(found[1200], PartitioningError) and found[1200].message == "Non JSON record provided"
    assert partitioning.extract_partition_keys([], "{customer_id: .customer_id}", jq) == []


@pytest.mark.parametrize(
    "record, query, message",
    [
        (b"not json", "{id: .customer_id}", "Non JSON record provided"),
        (RECORD, "{id: .missing}", "The partition key id has no scalar value: null"),
        (RECORD, "{t: .type}", "The partition key t has no scalar value"),
        (RECORD, '{y: .region | strftime("%Y")}', "Failed to execute the MetadataExtractionQuery"),
        (RECORD, "{id: .customer_id", "Invalid MetadataExtractionQuery"),
        (RECORD, ".customer_id", "The MetadataExtractionQuery must produce one JSON object"),
        (RECORD, "{a: .customer_id}, {b: .region}", "The MetadataExtractionQuery must produce one JSON object"),
    ],
)
def test_extraction_errors(extract_partition_keys, record, query, message):
    with pytest.raises(PartitioningError, match=message.replace("(", r"\(").replace("|", r"\|")) as caught:
        extract_partition_keys(record, query)
    assert caught.value.code == "DynamicPartitioning.MetadataExtractionFailed"


# ------------------------------------------------------------------ de-aggregation


def test_json_deaggregation_keeps_each_object_as_written():
    assert deaggregate(b'{"a":1}{"a": 2}', "JSON") == [b'{"a":1}', b'{"a": 2}']
    assert deaggregate(b'{"a":1}\n{"b":{"c":[1,2]}}\n', "JSON") == [b'{"a":1}', b'{"b":{"c":[1,2]}}']
    assert deaggregate("{\"é\":1}".encode(), "JSON") == ["{\"é\":1}".encode()]


@pytest.mark.parametrize("record", [b'[{"a":1}, {"a":2}]', b'{"a":1} oops', b"1 2"])
def test_json_deaggregation_rejects_what_is_not_consecutive_objects(record):
    with pytest.raises(PartitioningError):
        deaggregate(record, "JSON")


def test_delimited_deaggregation_uses_the_base64_delimiter():
    # AWS's example: the delimiter "####" is given as "IyMjIw==".
    assert deaggregate(b"one####two####three", "DELIMITED", "IyMjIw==") == [b"one", b"two", b"three"]
    assert deaggregate(b"one####", "DELIMITED", "IyMjIw==") == [b"one"]
    with pytest.raises(PartitioningError, match="Delimiter should be present for DELIMITED"):
        deaggregate(b"a", "DELIMITED")
    with pytest.raises(PartitioningError, match="base64"):
        deaggregate(b"a", "DELIMITED", "not base64!")


def test_deaggregation_is_capped_at_500_sub_records():
    assert len(deaggregate(b'{"a":1}' * 500, "JSON")) == 500
    with pytest.raises(PartitioningError, match="500"):
        deaggregate(b'{"a":1}' * 501, "JSON")
    with pytest.raises(PartitioningError, match="500"):
        deaggregate(b"x\n" * 501, "DELIMITED", "Cg==")


def test_unknown_sub_record_type():
    with pytest.raises(PartitioningError, match="SubRecordType has to be one of JSON, DELIMITED"):
        deaggregate(b"{}", "CSV")


def test_append_delimiter_adds_a_new_line():
    assert append_delimiter(b'{"a":1}') == b'{"a":1}\n'
    assert append_delimiter(b"x\n") == b"x\n\n"


def test_processor_parameters():
    processor = {"Type": "RecordDeAggregation", "Parameters": [{"ParameterName": "SubRecordType", "ParameterValue": "JSON"}]}
    assert processor_parameters(processor) == {"SubRecordType": "JSON"}
    assert processor_parameters({"Type": "AppendDelimiterToRecord"}) == {}


# -------------------------------------------------------------- processor checks


def processing(*processors: dict, enabled: bool = True) -> dict:
    return {"Enabled": enabled, "Processors": list(processors)}


def metadata_extraction(query: str = "{customer_id:.customer_id}", engine: str = "JQ-1.6") -> dict:
    return {"Type": "MetadataExtraction", "Parameters": [
        {"ParameterName": "MetadataExtractionQuery", "ParameterValue": query},
        {"ParameterName": "JsonParsingEngine", "ParameterValue": engine},
    ]}


LAMBDA = {"Type": "Lambda", "Parameters": [{"ParameterName": "LambdaArn", "ParameterValue": "arn:aws:lambda:us-east-1:1:function:f"}]}
QUERY_PREFIX = "customer_id=!{partitionKeyFromQuery:customer_id}/"


@pytest.fixture
def rejected(validate_processing):
    return lambda prefix, configuration, dynamic=True: _rejected(validate_processing, prefix, configuration, dynamic)


def _rejected(validate_processing, prefix, configuration, dynamic) -> str:
    with pytest.raises(AwsError) as caught:
        validate_processing(prefix, configuration, dynamic)
    assert caught.value.code == "InvalidArgumentException"
    return caught.value.message


def test_valid_processing_configurations(validate_processing):
    validate_processing(None, None, False)
    validate_processing(QUERY_PREFIX, processing(metadata_extraction()), True)
    validate_processing(QUERY_PREFIX + "y=!{partitionKeyFromQuery:year}/",
                        processing(metadata_extraction('{customer_id:.customer_id,year:.ts|strftime("%Y")}')), True)
    validate_processing("d=!{partitionKeyFromLambda:device}/", processing(LAMBDA), True)
    validate_processing(None, processing({"Type": "AppendDelimiterToRecord"}), False)


def test_dynamic_partitioning_needs_processors(rejected):
    assert rejected(QUERY_PREFIX, None) == "Processing Configuration is not enabled when DataPartitioning is enabled"
    assert rejected(QUERY_PREFIX, processing(metadata_extraction(), enabled=False)) == (
        "Processing Configuration is not enabled when DataPartitioning is enabled"
    )


def test_partition_namespaces_need_their_processor(rejected):
    assert rejected("d=!{partitionKeyFromLambda:device}/", processing(metadata_extraction("{}"))) == (
        "Lambda should be present when S3 Prefix contains keys from partitionKeyFromLambda namespace"
    )
    assert rejected(QUERY_PREFIX, processing(LAMBDA)) == (
        "MetadataExtraction processor should be present when S3 Prefix has partitionKeyFromQuery namespace"
    )


def test_metadata_extraction_rules(rejected):
    assert rejected(QUERY_PREFIX, processing(metadata_extraction()), dynamic=False) == (
        "class com.amazonaws.services.firehose.internal.model.MetadataExtractionProcessor "
        "can only be present when Dynamic Partitioning is enabled."
    )
    assert rejected(QUERY_PREFIX, processing(metadata_extraction(engine="JQ-1.5"))) == (
        "MetaDataExtraction JSON Parsing Engine has to be one of JQ-1.6"
    )
    assert rejected(QUERY_PREFIX, processing(metadata_extraction("{customer_id:.customer_id,extra:.x}"))) == (
        "MetaDataExtraction JQ Query can't contain keys that are not present in the S3 Prefix expression"
    )
    assert rejected(QUERY_PREFIX, processing(metadata_extraction("{customer_id:.c"))).startswith(
        "Invalid MetadataExtractionQuery"
    )


def test_record_deaggregation_rules(validate_processing, rejected):
    def deagg(*parameters):
        return {"Type": "RecordDeAggregation",
                "Parameters": [{"ParameterName": n, "ParameterValue": v} for n, v in parameters]}

    validate_processing(QUERY_PREFIX, processing(deagg(("SubRecordType", "JSON")), metadata_extraction()), True)
    assert rejected(QUERY_PREFIX, processing(deagg(("SubRecordType", "CSV")), metadata_extraction())) == (
        "SubRecordType has to be one of JSON, DELIMITED"
    )
    assert rejected(QUERY_PREFIX, processing(deagg(("SubRecordType", "DELIMITED")), metadata_extraction())) == (
        "Delimiter should be present for DELIMITED"
    )


# ------------------------------------------------------------- hostile records

DEEP = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def test_a_record_nested_too_deep_is_not_json(extract_partition_keys):
    # Before, json's RecursionError escaped the flush, which was then retried for ever.
    with pytest.raises(PartitioningError, match="Non JSON record provided"):
        extract_partition_keys(DEEP, "{customer_id: .customer_id}")
    with pytest.raises(PartitioningError, match="Non JSON record provided") as caught:
        deaggregate(DEEP, "JSON")
    assert caught.value.code == "RecordDeAggregation.Failed"
