"""firehose.transform: the Lambda transformation event, response rules and error output."""
from __future__ import annotations

import base64
import json

import pytest

from firehose.transform import (
    FUNCTION_ERROR,
    PROCESSING_FAILED_STATUS,
    LambdaProcessor,
    TransformationFailed,
    build_event,
    lambda_parameters,
    parse_response,
    processing_failed_document,
)
from kinesim.protocol.errors import AwsError

STREAM_ARN = "arn:aws:firehose:us-east-1:123456789012:deliverystream/clicks"
SOURCE_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/clicks-in"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:transform"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ------------------------------------------------------------------------ event


def test_direct_put_event():
    event = build_event([("r1", b"hello", 1507217624302), ("r2", b"", 1507217624303)], STREAM_ARN, "us-east-1",
                        invocation_id="inv-1")
    assert event == {
        "invocationId": "inv-1",
        "deliveryStreamArn": STREAM_ARN,
        "region": "us-east-1",
        "records": [
            {"recordId": "r1", "approximateArrivalTimestamp": 1507217624302, "data": "aGVsbG8="},
            {"recordId": "r2", "approximateArrivalTimestamp": 1507217624303, "data": ""},
        ],
    }
    assert list(event) == ["invocationId", "deliveryStreamArn", "region", "records"]


def test_kinesis_source_event_carries_record_metadata():
    kinesis = {"shardId": "shardId-000000000000", "partitionKey": "pk-1",
               "sequenceNumber": "49546986683135544286507457936321625675700192471156785154"}
    event = build_event([("r1", b"Hello World", 1507217624302, kinesis)], STREAM_ARN, "us-west-2",
                        {"KinesisStreamARN": SOURCE_ARN, "RoleARN": "arn:aws:iam::1:role/r"}, invocation_id="inv-2")
    assert event == {
        "invocationId": "inv-2",
        "deliveryStreamArn": STREAM_ARN,
        "sourceKinesisStreamArn": SOURCE_ARN,
        "region": "us-west-2",
        "records": [{
            "recordId": "r1",
            "approximateArrivalTimestamp": 1507217624302,
            "data": "SGVsbG8gV29ybGQ=",
            "kinesisRecordMetadata": {
                "shardId": "shardId-000000000000",
                "partitionKey": "pk-1",
                "approximateArrivalTimestamp": 1507217624302,
                "sequenceNumber": "49546986683135544286507457936321625675700192471156785154",
                "subsequenceNumber": 0,
            },
        }],
    }
    json.dumps(event)  # the event is plain JSON


def test_invocation_ids_are_unique_uuids():
    first = build_event([], STREAM_ARN, "us-east-1")["invocationId"]
    second = build_event([], STREAM_ARN, "us-east-1")["invocationId"]
    assert first != second and len(first) == 36


# --------------------------------------------------------------------- response


def response(*records: dict) -> bytes:
    return json.dumps({"records": list(records)}).encode()


def test_results_in_sent_order_with_data_and_partition_keys():
    payload = response(
        {"recordId": "b", "result": "Dropped"},
        {"recordId": "a", "result": "Ok", "data": b64(b"A!"), "metadata": {"partitionKeys": {"customer": "c1", "year": 2024}}},
        {"recordId": "c", "result": "ProcessingFailed", "data": b64(b"raw")},
        {"recordId": "not-sent", "result": "Ok", "data": b64(b"stray")},  # ignored, as AWS does
    )
    assert parse_response(payload, ["a", "b", "c"]) == [
        ("a", "Ok", b"A!", {"customer": "c1", "year": "2024"}),
        ("b", "Dropped", None, None),
        ("c", "ProcessingFailed", b"raw", None),
    ]


def test_ok_with_empty_data_is_an_empty_record():
    assert parse_response(response({"recordId": "a", "result": "Ok", "data": ""}), ["a"]) == [("a", "Ok", b"", None)]


def failure(payload: bytes, sent=("a", "b")) -> TransformationFailed:
    with pytest.raises(TransformationFailed) as caught:
        parse_response(payload, list(sent))
    return caught.value


def test_not_json_is_a_json_processing_exception():
    error = failure(b"<html>")
    assert (error.code, error.message) == (
        "Lambda.JsonProcessingException",
        "There was an error parsing returned records from the Lambda function. "
        "Ensure that the returned records follow the status model required by Firehose.",
    )


def test_a_response_nested_too_deep_is_a_json_processing_exception():
    # Before, json's RecursionError escaped the flush, which was then retried for ever.
    deep = b'{"records": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert failure(deep).code == "Lambda.JsonProcessingException"


@pytest.mark.parametrize("payload", [b"null", b"[]", b"{}", b'{"records": "nope"}'])
def test_no_records_means_every_id_is_missing(payload):
    error = failure(payload)
    assert (error.code, error.message) == (
        "Lambda.MissingRecordId",
        "One or more record Ids were not returned. Ensure that the Lambda function returns all received record Ids.",
    )


def test_a_missing_record_id_fails_the_batch():
    error = failure(response({"recordId": "a", "result": "Ok", "data": ""}))
    assert error.code == "Lambda.MissingRecordId"


def test_a_duplicated_record_id_fails_the_batch():
    error = failure(response({"recordId": "a", "result": "Ok", "data": ""}, {"recordId": "a", "result": "Dropped"},
                             {"recordId": "b", "result": "Dropped"}))
    assert (error.code, error.message) == (
        "Lambda.DuplicatedRecordId",
        "Multiple records were returned with the same record Id. "
        "Ensure that the Lambda function returns a unique record Id for each record.",
    )


@pytest.mark.parametrize(
    "entry",
    [
        {"recordId": "a", "result": "OK", "data": ""},  # results are case-sensitive
        {"recordId": "a", "data": ""},
        {"recordId": "a", "result": "Ok"},  # Ok needs data
        {"recordId": "a", "result": "Ok", "data": "not base64!"},
        {"recordId": "a", "result": "Ok", "data": 12},
        {"recordId": 1, "result": "Ok", "data": ""},
        {"result": "Ok", "data": ""},
        "a",
        {"recordId": "a", "result": "Ok", "data": "", "metadata": {"partitionKeys": ["x"]}},
    ],
)
def test_a_malformed_record_fails_the_batch_as_a_function_error(entry):
    error = failure(response(entry, {"recordId": "b", "result": "Dropped"}))
    assert (error.code, error.message) == (
        "Lambda.FunctionError",
        "Check your function and make sure the output is in required format. In addition to that, "
        "make sure the processed records contain valid result status of Dropped, Ok, or ProcessingFailed",
    )


def test_null_partition_keys_are_left_out():
    payload = response({"recordId": "a", "result": "Ok", "data": "", "metadata": {"partitionKeys": {"k": None, "j": "v"}}})
    assert parse_response(payload, ["a"]) == [("a", "Ok", b"", {"j": "v"})]


# ------------------------------------------------------------- error output


def test_processing_failed_document():
    line = processing_failed_document(b"raw record", *PROCESSING_FAILED_STATUS, attempts_made=1,
                                      arrival_ms=1575019718303, attempt_ending_ms=1575019781231, lambda_arn=FUNCTION_ARN)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "attemptsMade": 1,
        "arrivalTimestamp": 1575019718303,
        "errorCode": "Lambda.ProcessingFailedStatus",
        "errorMessage": "ProcessingFailed status set for record",
        "attemptEndingTimestamp": 1575019781231,
        "rawData": b64(b"raw record"),
        "lambdaArn": FUNCTION_ARN,
    }
    assert list(json.loads(line)) == ["attemptsMade", "arrivalTimestamp", "errorCode", "errorMessage",
                                      "attemptEndingTimestamp", "rawData", "lambdaArn"]
    assert FUNCTION_ERROR == ("Lambda.FunctionError",
                              "The Lambda function was successfully invoked but it returned an error result.")


# ------------------------------------------------------------ processor parameters


def lambda_processor(**parameters) -> dict:
    parameters.setdefault("LambdaArn", FUNCTION_ARN)
    return {"Type": "Lambda", "Parameters": [{"ParameterName": k, "ParameterValue": v} for k, v in parameters.items()]}


def test_lambda_parameters_defaults():
    assert lambda_parameters(lambda_processor()) == LambdaProcessor(
        lambda_arn=FUNCTION_ARN, number_of_retries=3, buffer_size_mb=1.0, buffer_interval_seconds=60
    )
    splunk = lambda_parameters(lambda_processor(), destination="Splunk")
    assert (splunk.buffer_size_mb, splunk.buffer_interval_seconds) == (0.25, 60)
    snowflake = lambda_parameters(lambda_processor(), destination="Snowflake")
    assert (snowflake.buffer_size_mb, snowflake.buffer_interval_seconds) == (0.25, 30)


def test_lambda_parameters_given():
    processor = lambda_processor(NumberOfRetries="0", BufferSizeInMBs="0.2", BufferIntervalInSeconds="900",
                                 RoleArn="arn:aws:iam::1:role/r")
    assert lambda_parameters(processor) == LambdaProcessor(FUNCTION_ARN, 0, 0.2, 900, "arn:aws:iam::1:role/r")


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"LambdaArn": ""}, "LambdaArn is required when Lambda processor is used."),
        ({"NumberOfRetries": "301"}, "Number of retries for lambda must be between 0 and 300."),
        ({"NumberOfRetries": "three"}, "Number of retries for lambda must be between 0 and 300."),
        ({"BufferSizeInMBs": "0.1"}, "BufferSizeInMBs for lambda processor must be between 0.2 and 3."),
        ({"BufferSizeInMBs": "4"}, "BufferSizeInMBs for lambda processor must be between 0.2 and 3."),
        ({"BufferIntervalInSeconds": "901"}, "BufferIntervalInSeconds for lambda processor must be between 0 and 900."),
    ],
)
def test_lambda_parameters_out_of_range(parameters, message):
    with pytest.raises(AwsError) as caught:
        lambda_parameters(lambda_processor(**parameters))
    assert (caught.value.code, caught.value.message) == ("InvalidArgumentException", message)


def test_lambda_processor_without_any_arn():
    with pytest.raises(AwsError, match="LambdaArn is required"):
        lambda_parameters({"Type": "Lambda"})
