"""kinesim's answers compared with answers recorded from AWS itself: Kinesis-triggered event source
mappings and Firehose delivery streams reading a Kinesis stream.

The recordings are LocalStack's AWS-validated snapshots (localstack/localstack at 8b9a79f0):
`tests/aws/services/lambda_/test_lambda_api.snapshot.json` (TestLambdaEventSourceMappings,
recorded 2025-11-25/27), `tests/aws/services/lambda_/event_source_mapping/
test_lambda_integration_kinesis.snapshot.json` (TestKinesisSource, 2025-11-25) and
`tests/aws/services/cloudformation/resources/test_firehose.snapshot.json`
(test_firehose_stack_with_kinesis_as_source, 2022-09-14). Each expected value below is the
recorded one, with the recording's placeholders (<uuid>, ARNs, timestamps) filled in with ours.
"""
from __future__ import annotations

import io
import time
import uuid
import zipfile

import pytest
from botocore.exceptions import ClientError

from conftest import client_for

REGION, ACCOUNT = "us-east-1", "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/recorded"


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def firehose(server):
    return client_for(server.url, "firehose")


@pytest.fixture(scope="module")
def function(lambda_client):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", "def handler(event, context):\n    return {}\n")
    name = "fn-" + uuid.uuid4().hex[:10]
    out = lambda_client.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                        Code={"ZipFile": buf.getvalue()})
    yield out
    lambda_client.delete_function(FunctionName=name)


def stream_arn(name: str) -> str:
    return f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{name}"


def answer(call, **params) -> dict:
    """The parsed error answer as the recordings keep it: everything but the headers."""
    with pytest.raises(ClientError) as e:
        call(**params)
    response = dict(e.value.response)
    response["ResponseMetadata"] = {"HTTPStatusCode": response["ResponseMetadata"]["HTTPStatusCode"]}
    return response


def user_error(code: str, message: str, status: int = 400, key: str = "message") -> dict:
    """A Lambda error as recorded: `Type: User` and the message member spelt as the model spells it."""
    return {"Error": {"Code": code, "Message": message}, "Type": "User", key: message,
            "ResponseMetadata": {"HTTPStatusCode": status}}


def wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return value


# ---------------------------------------------------------------- event source mappings

def test_create_and_get_answer_as_recorded(lambda_client, make_stream, function):
    stream = make_stream()
    out = lambda_client.create_event_source_mapping(EventSourceArn=stream_arn(stream),
                                                    FunctionName=function["FunctionName"], StartingPosition="LATEST")
    try:
        mapping_uuid = out["UUID"]
        assert out.pop("ResponseMetadata")["HTTPStatusCode"] == 202
        assert isinstance(out.pop("LastModified").timestamp(), float)
        assert out == {
            "BatchSize": 100, "BisectBatchOnFunctionError": False, "DestinationConfig": {"OnFailure": {}},
            "EventSourceArn": stream_arn(stream),
            "EventSourceMappingArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:event-source-mapping:{mapping_uuid}",
            "FunctionArn": function["FunctionArn"], "FunctionResponseTypes": [],
            "LastProcessingResult": "No records processed", "MaximumBatchingWindowInSeconds": 0,
            "MaximumRecordAgeInSeconds": -1, "MaximumRetryAttempts": -1, "ParallelizationFactor": 1,
            "StartingPosition": "LATEST", "State": "Creating", "StateTransitionReason": "User action",
            "TumblingWindowInSeconds": 0, "UUID": mapping_uuid}
        got = wait_for(lambda: (m := lambda_client.get_event_source_mapping(UUID=mapping_uuid))["State"] == "Enabled"
                       and m)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert set(got) - {"ResponseMetadata"} == set(out) | {"LastModified"}   # no KMSKeyArn, Tags, ...
    finally:
        lambda_client.delete_event_source_mapping(UUID=out["UUID"])


def test_create_errors_come_in_the_recorded_order(lambda_client):
    sqs = f"arn:aws:sqs:{REGION}:111111111111:somequeue"
    create = lambda_client.create_event_source_mapping
    assert answer(create, FunctionName="doesnotexist") == user_error(
        "InvalidParameterValueException", "Unrecognized event source.")
    # The function is looked for before the source is (an SQS queue here, which kinesim cannot read).
    assert answer(create, FunctionName="doesnotexist", EventSourceArn=sqs) == user_error(
        "InvalidParameterValueException", "Function does not exist")
    assert answer(create, FunctionName="doesnotexist", EventSourceArn=sqs, DestinationConfig={
        "OnSuccess": {"Destination": f"arn:aws:sqs:{REGION}:111111111111:someotherqueue"}}) == user_error(
        "InvalidParameterValueException",
        "Unsupported DestinationConfig parameter for given event source mapping type.")
    # The same with a Kinesis stream that does not exist either.
    missing = stream_arn("test-foobar-81ded7e8")
    assert answer(create, FunctionName="doesnotexist", EventSourceArn=missing, StartingPosition="LATEST") == \
        user_error("InvalidParameterValueException", "Function does not exist")


def test_unknown_stream_and_starting_position_answers(lambda_client, make_stream, function):
    create = lambda_client.create_event_source_mapping
    name = function["FunctionName"]
    missing = stream_arn("test-foobar-81ded7e8")
    assert answer(create, FunctionName=name, EventSourceArn=missing, StartingPosition="LATEST") == user_error(
        "InvalidParameterValueException", f"Stream not found: {missing}")
    arn = stream_arn(make_stream())
    assert answer(create, FunctionName=name, EventSourceArn=arn) == user_error(
        "InvalidParameterValueException", "1 validation error detected: Value null at 'startingPosition' failed to "
                                          "satisfy constraint: Member must not be null.")
    message = ("1 validation error detected: Value 'invalid' at 'startingPosition' failed to satisfy constraint: "
               "Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]")
    assert answer(create, FunctionName=name, EventSourceArn=arn, StartingPosition="invalid") == {
        "Error": {"Code": "ValidationException", "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}


@pytest.mark.parametrize("operation", ["get_event_source_mapping", "delete_event_source_mapping",
                                       "update_event_source_mapping"])
def test_unknown_uuid_answers(lambda_client, operation):
    params = {"UUID": str(uuid.uuid4())}
    if operation == "update_event_source_mapping":
        params["Enabled"] = False
    assert answer(getattr(lambda_client, operation), **params) == user_error(
        "ResourceNotFoundException", "The resource you requested does not exist.", 404, key="Message")


# ---------------------------------------------------------------- Firehose, Kinesis stream as source

def test_describe_kinesis_source_delivery_stream_as_recorded(firehose, kinesis, server):
    s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
    stream, bucket, name = ("rec-" + uuid.uuid4().hex[:8] for _ in range(3))
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    s3.create_bucket(Bucket=bucket)
    prefix = "firehoseTest/!{partitionKeyFromQuery:s3Prefix}"
    errors = "firehoseTest-errors/!{firehose:error-output-type}/"
    processing = {"Enabled": True, "Processors": [{"Type": "MetadataExtraction", "Parameters": [
        {"ParameterName": "MetadataExtractionQuery", "ParameterValue": "{s3Prefix: .tableName}"},
        {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]}]}
    firehose.create_delivery_stream(
        DeliveryStreamName=name, DeliveryStreamType="KinesisStreamAsSource",
        KinesisStreamSourceConfiguration={"KinesisStreamARN": stream_arn(stream), "RoleARN": ROLE},
        ExtendedS3DestinationConfiguration={
            "BucketARN": f"arn:aws:s3:::{bucket}", "RoleARN": ROLE,
            "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 64}, "ProcessingConfiguration": processing,
            "DynamicPartitioningConfiguration": {"Enabled": True},
            "DataFormatConversionConfiguration": {"Enabled": False}, "Prefix": prefix, "ErrorOutputPrefix": errors})
    try:
        d = wait_for(lambda: (x := firehose.describe_delivery_stream(DeliveryStreamName=name)
                              ["DeliveryStreamDescription"])["DeliveryStreamStatus"] == "ACTIVE" and x)
        d.pop("CreateTimestamp")
        d["Source"]["KinesisStreamSourceDescription"].pop("DeliveryStartTimestamp")
        common = {"BucketARN": f"arn:aws:s3:::{bucket}", "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 64},
                  "CloudWatchLoggingOptions": {"Enabled": False}, "CompressionFormat": "UNCOMPRESSED",
                  "EncryptionConfiguration": {"NoEncryptionConfig": "NoEncryption"}, "ErrorOutputPrefix": errors,
                  "Prefix": prefix, "RoleARN": ROLE}
        assert d == {
            "DeliveryStreamARN": f"arn:aws:firehose:{REGION}:{ACCOUNT}:deliverystream/{name}",
            "DeliveryStreamName": name, "DeliveryStreamStatus": "ACTIVE", "DeliveryStreamType": "KinesisStreamAsSource",
            "Destinations": [{
                "DestinationId": "destinationId-000000000001",
                "ExtendedS3DestinationDescription": {
                    **common, "DataFormatConversionConfiguration": {"Enabled": False},
                    "DynamicPartitioningConfiguration": {"Enabled": True, "RetryOptions": {"DurationInSeconds": 300}},
                    "ProcessingConfiguration": processing, "S3BackupMode": "Disabled"},
                "S3DestinationDescription": common}],
            "HasMoreDestinations": False,
            "Source": {"KinesisStreamSourceDescription": {"KinesisStreamARN": stream_arn(stream), "RoleARN": ROLE}},
            "VersionId": "1"}
    finally:
        firehose.delete_delivery_stream(DeliveryStreamName=name)
