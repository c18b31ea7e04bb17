"""Kinesis channels through boto3: lifecycle and errors, the ChannelActive waiter, FAILED with a
reason, delivery into kinesim's S3 in every record format and compression read back by boto3's
S3 client, the dead-letter bucket, exactly-once across kill -9, deploy of AWS::Kinesis::Channel
and the channel's table in `kinesim sql`.

The server's `firehose_interval_scale` (0.01) makes DataFreshnessInSeconds 300 a 3 s wait."""
from __future__ import annotations

import gzip
import json
import time
import uuid

import botocore.exceptions
import pytest

from kinesim.kinesis import channel_objects
from kinesim.server import ServerProcess

from conftest import client_for, start_server

ACCOUNT = "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/channel-role"
DEADLINE_S = 60


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def kinesis(srv):
    return client_for(srv.url)


@pytest.fixture(scope="module")
def s3(srv):
    return client_for(srv.url, "s3")


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _stream(kinesis, mode: str = "ON_DEMAND") -> str:
    name = _name("chs")
    if mode == "ON_DEMAND":
        kinesis.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    else:
        kinesis.create_stream(StreamName=name, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def _bucket(s3) -> str:
    name = _name("chb")
    s3.create_bucket(Bucket=name)
    return name


def _create(kinesis, stream_arn: str, bucket: str, fmt: str = "JSON", compression: str = "NONE",
            name: str | None = None, **storage) -> str:
    answer = kinesis.create_channel(
        ChannelName=name or _name("ch"), ServiceExecutionRoleARN=ROLE,
        StreamConfigurationList=[{"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": fmt}}],
        S3DestinationConfiguration={"StorageConfiguration": {
            "BucketARN": f"arn:aws:s3:::{bucket}", "ExpectedBucketOwner": ACCOUNT, "CompressionType": compression,
            **storage}})
    assert answer["ChannelDescription"]["ChannelStatus"] == "CREATING"
    return answer["ChannelDescription"]["ChannelARN"]


def _wait_active(kinesis, arn: str) -> None:
    kinesis.get_waiter("channel_active").wait(ChannelARN=arn, WaiterConfig={"Delay": 1, "MaxAttempts": 30})


def _error(call, *args, **kwargs) -> tuple[str, str]:
    with pytest.raises(botocore.exceptions.ClientError) as err:
        call(*args, **kwargs)
    return err.value.response["Error"]["Code"], err.value.response["Error"].get("Message", "")


def _objects(s3, bucket: str, prefix: str = "") -> list[dict]:
    out, kwargs = [], {"Bucket": bucket, "Prefix": prefix}
    while True:
        page = s3.list_objects_v2(**kwargs)
        out += page.get("Contents", [])
        if not page.get("IsTruncated"):
            return out
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


def _wait_objects(s3, bucket: str, prefix: str, done) -> list[tuple[str, bytes]]:
    deadline = time.time() + DEADLINE_S
    while True:
        got = [(o["Key"], s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
               for o in _objects(s3, bucket, prefix)]
        if done(got) or time.time() > deadline:
            return got
        time.sleep(0.2)


# ------------------------------------------------------------------ control plane


def test_lifecycle_describe_list_update_delete(kinesis, s3):
    stream_arn, bucket = _stream(kinesis), _bucket(s3)
    name = _name("life")
    arn = _create(kinesis, stream_arn, bucket, name=name)
    assert arn == f"arn:aws:kinesis:us-east-1:{ACCOUNT}:channel/{name}"
    _wait_active(kinesis, arn)
    d = kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]
    assert d["ChannelName"] == name and d["ChannelStatus"] == "ACTIVE" and "ChannelStatusReason" not in d
    assert d["ServiceExecutionRoleARN"] == ROLE
    assert d["StreamConfigurationList"][0]["StreamARN"] == stream_arn
    assert d["StreamConfigurationList"][0]["RecordConfiguration"] == {"RecordFormatType": "JSON"}
    dest = d["S3DestinationConfiguration"]
    assert dest["DataFreshnessInSeconds"] == 300  # AWS's default
    # "If not specified, it defaults to the destination bucket with an error prefix."
    assert dest["DeadLetterQueueS3Configuration"]["BucketARN"] == f"arn:aws:s3:::{bucket}"
    assert dest["DeadLetterQueueS3Configuration"]["ErrorOutputPrefix"]
    assert d["LoggingConfiguration"] == {"CloudWatchLogs": {"Enabled": False}}

    summaries = kinesis.list_channels(StreamFilter=[{"StreamARN": stream_arn}])["ChannelSummaries"]
    assert [(s["ChannelARN"], s["ChannelDestinationType"], s["Streams"][0]["StreamARN"]) for s in summaries] == \
        [(arn, "S3", stream_arn)]
    # paging: every channel exactly once, one per page
    seen, kwargs = [], {"MaxResults": 1}
    while True:
        page = kinesis.list_channels(**kwargs)
        assert len(page["ChannelSummaries"]) <= 1
        seen += [s["ChannelName"] for s in page["ChannelSummaries"]]
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
    assert name in seen and len(seen) == len(set(seen))

    updated = kinesis.update_channel(ChannelARN=arn, S3DestinationConfiguration={"DataFreshnessInSeconds": 600},
                                     LoggingConfiguration={"CloudWatchLogs": {"Enabled": True}})
    assert updated["ChannelDescription"]["ChannelStatus"] == "UPDATING"
    _wait_active(kinesis, arn)
    d = kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]
    assert d["S3DestinationConfiguration"]["DataFreshnessInSeconds"] == 600
    logs = d["LoggingConfiguration"]["CloudWatchLogs"]
    assert logs == {"Enabled": True, "LogGroupName": f"/aws/kinesis/{name}/{d['ChannelId']}",
                    "LogStreamName": "DestinationDelivery"}

    kinesis.delete_channel(ChannelARN=arn)
    deadline = time.time() + DEADLINE_S
    while time.time() < deadline:
        try:
            kinesis.describe_channel(ChannelARN=arn)
        except kinesis.exceptions.ResourceNotFoundException:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the channel was not deleted")
    assert kinesis.list_channels(StreamFilter=[{"StreamARN": stream_arn}])["ChannelSummaries"] == []


def test_errors(kinesis, s3):
    stream_arn, bucket = _stream(kinesis), _bucket(s3)
    storage = {"BucketARN": f"arn:aws:s3:::{bucket}", "ExpectedBucketOwner": ACCOUNT, "CompressionType": "NONE"}
    source = [{"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": "JSON"}}]

    def create(**kw):
        args = {"ChannelName": _name("err"), "ServiceExecutionRoleARN": ROLE, "StreamConfigurationList": source,
                "S3DestinationConfiguration": {"StorageConfiguration": storage}}
        args.update(kw)
        return kinesis.create_channel(**{k: v for k, v in args.items() if v is not None})

    # from the model, with AWS's text
    code, message = _error(create, ChannelName="bad name!")
    assert code == "ValidationException" and "channelName" in message and "[a-zA-Z0-9_.-]+" in message
    code, _ = _error(create, S3DestinationConfiguration={"StorageConfiguration": {**storage, "CompressionType": "LZ4"}})
    assert code == "ValidationException"
    # what only the service knows
    assert _error(create, S3DestinationConfiguration=None)[0] == "InvalidArgumentException"
    tables = {"DeadLetterQueueS3Configuration": {"BucketARN": f"arn:aws:s3:::{bucket}", "ExpectedBucketOwner": ACCOUNT},
              "S3TablesConfigurationList": [{"TableBucketARN": f"arn:aws:s3tables:us-east-1:{ACCOUNT}:bucket/tables",
                                             "Namespace": "ns", "TableName": "t", "CompressionType": "ZSTD"}]}
    code, message = _error(create, S3DestinationConfiguration=None, S3TablesDestinationConfiguration=tables)
    assert code == "InvalidArgumentException" and "S3 Tables" in message
    assert _error(create, S3TablesDestinationConfiguration=tables)[0] == "InvalidArgumentException"
    code, _ = _error(create, StreamConfigurationList=[
        {"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": "GSR_JSON"}}])
    assert code == "InvalidArgumentException"
    for freshness in (299, 901):
        code, message = _error(create, S3DestinationConfiguration={"StorageConfiguration": storage,
                                                                   "DataFreshnessInSeconds": freshness})
        assert code == "InvalidArgumentException" and "300" in message
    code, message = _error(create, S3DestinationConfiguration={
        "StorageConfiguration": {**storage, "OutputKeyTemplate": "data/!{nope}/x"}})
    assert code == "InvalidArgumentException" and "!{nope}" in message
    provisioned = _stream(kinesis, mode="PROVISIONED")
    code, message = _error(create, StreamConfigurationList=[
        {"StreamARN": provisioned, "RecordConfiguration": {"RecordFormatType": "JSON"}}])
    assert code == "InvalidArgumentException" and "on-demand" in message
    missing = stream_arn.rsplit("/", 1)[0] + "/no-such-stream"
    assert _error(create, StreamConfigurationList=[
        {"StreamARN": missing, "RecordConfiguration": {"RecordFormatType": "JSON"}}])[0] == "ResourceNotFoundException"

    name = _name("dup")
    arn = create(ChannelName=name)["ChannelDescription"]["ChannelARN"]
    assert _error(create, ChannelName=name)[0] == "ResourceInUseException"
    assert _error(create)[0] == "LimitExceededException"  # one S3 channel per stream
    unknown = arn + "-nope"
    assert _error(kinesis.describe_channel, ChannelARN=unknown)[0] == "ResourceNotFoundException"
    assert _error(kinesis.delete_channel, ChannelARN=unknown)[0] == "ResourceNotFoundException"
    assert _error(kinesis.describe_channel, ChannelARN="not-an-arn")[0] == "ValidationException"
    _wait_active(kinesis, arn)
    assert _error(kinesis.update_channel, ChannelARN=arn)[0] == "InvalidArgumentException"
    assert _error(kinesis.update_channel, ChannelARN=arn,
                  S3DestinationConfiguration={"DataFreshnessInSeconds": 10})[0] == "InvalidArgumentException"
    assert _error(kinesis.list_channels, NextToken="garbage")[0] == "InvalidArgumentException"
    kinesis.delete_channel(ChannelARN=arn)


def test_failed_with_a_reason_when_the_bucket_does_not_exist(kinesis):
    stream_arn = _stream(kinesis)
    arn = _create(kinesis, stream_arn, "no-such-bucket-" + uuid.uuid4().hex[:8])
    with pytest.raises(botocore.exceptions.WaiterError) as err:
        _wait_active(kinesis, arn)
    assert "FAILED" in str(err.value)
    d = kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]
    assert d["ChannelStatus"] == "FAILED" and "does not exist" in d["ChannelStatusReason"]
    summary = kinesis.list_channels(StreamFilter=[{"StreamARN": stream_arn}])["ChannelSummaries"][0]
    assert summary["ChannelStatus"] == "FAILED" and summary["ChannelStatusReason"] == d["ChannelStatusReason"]
    assert _error(kinesis.update_channel, ChannelARN=arn,
                  S3DestinationConfiguration={"DataFreshnessInSeconds": 300})[0] == "ResourceInUseException"
    kinesis.delete_channel(ChannelARN=arn)


# ------------------------------------------------------------------ delivery

RECORDS = {
    "JSON": [json.dumps({"n": i, "page": f"p{i % 3}"}).encode() for i in range(20)],
    "STRING": [f"line {i} é".encode() for i in range(20)],
    "BYTE_ARRAY": [bytes([i, 0, 255, 10, i]) for i in range(20)],
}


@pytest.mark.parametrize("fmt,compression", [("JSON", "NONE"), ("JSON", "GZIP"), ("STRING", "ZSTD"),
                                             ("STRING", "NONE"), ("BYTE_ARRAY", "GZIP"), ("BYTE_ARRAY", "ZSTD")])
def test_delivery_by_format_and_compression(kinesis, s3, fmt, compression):
    stream_arn, bucket = _stream(kinesis), _bucket(s3)
    name = _name("del")
    arn = _create(kinesis, stream_arn, bucket, fmt, compression, name=name)
    _wait_active(kinesis, arn)
    channel_id = kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]["ChannelId"]
    records = RECORDS[fmt]
    # one partition key: one shard, so the object holds the records in the order they were put
    for data in records:
        kinesis.put_record(StreamARN=stream_arn, Data=data, PartitionKey="k")
    ext = channel_objects.extension(fmt, compression)
    expected = channel_objects.frame(fmt, records)

    def body(got):
        return b"".join(channel_objects.decompress(data, compression) for _, data in sorted(got))

    got = _wait_objects(s3, bucket, "kinesis-channel/", lambda got: len(body(got)) >= len(expected))
    assert body(got) == expected
    for key, _ in got:
        # the default template, AWS's, then kinesim's unique suffix before the extension
        parts = key.split("/")
        assert parts[:3] == ["kinesis-channel", name, channel_id] and len(parts) == 8
        assert parts[-1].startswith(f"{name}-{channel_id}-") and "-shardId-" in parts[-1] and key.endswith(ext)
    if compression == "GZIP":
        assert gzip.decompress(got[0][1])  # a real gzip member
    if fmt == "JSON":
        assert [json.loads(line)["n"] for line in body(got).splitlines()] == list(range(20))
    kinesis.delete_channel(ChannelARN=arn)


def test_invalid_records_go_to_the_dead_letter_bucket_and_custom_template(kinesis, s3):
    stream_arn, bucket, dlq = _stream(kinesis), _bucket(s3), _bucket(s3)
    kinesis_args = {"DataFreshnessInSeconds": 300,
                    "DeadLetterQueueS3Configuration": {"BucketARN": f"arn:aws:s3:::{dlq}",
                                                       "ExpectedBucketOwner": ACCOUNT, "ErrorOutputPrefix": "bad/"},
                    "StorageConfiguration": {"BucketARN": f"arn:aws:s3:::{bucket}", "ExpectedBucketOwner": ACCOUNT,
                                             "CompressionType": "NONE",
                                             "OutputKeyTemplate": "out/!{stream-name}/!{yy}-!{MM}/data!{extension}"}}
    arn = kinesis.create_channel(
        ChannelName=_name("dlq"), ServiceExecutionRoleARN=ROLE,
        StreamConfigurationList=[{"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": "JSON"}}],
        S3DestinationConfiguration=kinesis_args)["ChannelDescription"]["ChannelARN"]
    _wait_active(kinesis, arn)
    good, bad = b'{"ok": 1}', b"{not json"
    kinesis.put_record(StreamARN=stream_arn, Data=good, PartitionKey="k")
    kinesis.put_record(StreamARN=stream_arn, Data=bad, PartitionKey="k")
    stream = stream_arn.rsplit("/", 1)[1]
    delivered = _wait_objects(s3, bucket, "out/", lambda got: bool(got))
    assert [data for _, data in delivered] == [good + b"\n"]
    key = delivered[0][0]
    assert key.startswith(f"out/{stream}/{time.strftime('%y-%m', time.gmtime())[:2]}") and key.endswith(".json")
    assert "/data-shardId-" in key
    errors = _wait_objects(s3, dlq, "bad/", lambda got: bool(got))
    line = json.loads(errors[0][1])
    assert line["errorMessage"] == "The record is not a valid JSON payload."
    assert line["rawData"] == "e25vdCBqc29u"  # base64 of the record
    kinesis.delete_channel(ChannelARN=arn)


def test_no_backfill_and_exactly_once_across_kill9(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    try:
        kinesis, s3 = client_for(proc.url), client_for(proc.url, "s3")
        stream_arn, bucket = _stream(kinesis), _bucket(s3)
        kinesis.put_record(StreamARN=stream_arn, Data=b'{"before": true}', PartitionKey="k")
        arn = _create(kinesis, stream_arn, bucket)
        _wait_active(kinesis, arn)
        first = [json.dumps({"n": i}).encode() for i in range(30)]
        kinesis.put_records(StreamARN=stream_arn, Records=[{"Data": d, "PartitionKey": str(i)}
                                                           for i, d in enumerate(first)])

        def lines(got):
            return [json.loads(line) for _, data in got for line in data.splitlines()]

        got = _wait_objects(s3, bucket, "", lambda got: len(lines(got)) >= 30)
        assert sorted(r["n"] for r in lines(got)) == list(range(30))  # not the record put before ACTIVE
        proc.kill()
        proc = ServerProcess(proc.settings).start()
        kinesis, s3 = client_for(proc.url), client_for(proc.url, "s3")
        assert kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]["ChannelStatus"] == "ACTIVE"
        kinesis.put_records(StreamARN=stream_arn, Records=[{"Data": json.dumps({"n": i}).encode(),
                                                            "PartitionKey": str(i)} for i in range(30, 40)])
        got = _wait_objects(s3, bucket, "", lambda got: len(lines(got)) >= 40)
        # what was delivered before the kill is not delivered again
        assert sorted(r["n"] for r in lines(got)) == list(range(40))
    finally:
        proc.stop()


# ------------------------------------------------------------------ deploy

CHANNEL_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Freshness:
    Type: Number
    Default: 300
Resources:
  Events:
    Type: AWS::Kinesis::Stream
    Properties:
      StreamModeDetails: {StreamMode: ON_DEMAND}
  Archive:
    Type: AWS::S3::Bucket
  Delivery:
    Type: AWS::Kinesis::Channel
    Properties:
      ChannelName: !Sub "${AWS::StackName}-delivery"
      ServiceExecutionRoleARN: arn:aws:iam::000000000000:role/channel-role
      StreamConfigurationList:
        - StreamARN: !GetAtt Events.Arn
          RecordConfiguration: {RecordFormatType: JSON}
      S3DestinationConfiguration:
        DataFreshnessInSeconds: !Ref Freshness
        StorageConfiguration:
          BucketARN: !GetAtt Archive.Arn
          ExpectedBucketOwner: "000000000000"
          CompressionType: GZIP
Outputs:
  ChannelArn:
    Value: !Ref Delivery
  ChannelId:
    Value: !GetAtt Delivery.ChannelId
  Bucket:
    Value: !Ref Archive
  StreamArn:
    Value: !GetAtt Events.Arn
"""


def test_deploy_channel_update_and_delete(srv, kinesis, s3, tmp_path, capsys):
    from kinesim.deploy import cli

    def deploy(*args: str) -> str:
        code = cli.main([str(template), "--stack-name", stack, *args, "--endpoint-url", srv.url])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        return out

    def outputs() -> dict[str, str]:
        import urllib.request
        with urllib.request.urlopen(f"{srv.url}/_kinesim/stacks/{stack}") as response:
            return {k: v["OutputValue"] for k, v in json.loads(response.read())["Outputs"].items()}

    stack = "chan" + uuid.uuid4().hex[:8]
    template = tmp_path / "template.yaml"
    template.write_text(CHANNEL_TEMPLATE)
    deploy()
    out = outputs()
    arn = out["ChannelArn"]
    d = kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]
    assert d["ChannelName"] == f"{stack}-delivery" and d["ChannelStatus"] == "ACTIVE"
    assert d["ChannelId"] == out["ChannelId"]
    assert d["StreamConfigurationList"][0]["StreamARN"] == out["StreamArn"]
    kinesis.put_record(StreamARN=out["StreamArn"], Data=b'{"deployed": 1}', PartitionKey="k")
    got = _wait_objects(s3, out["Bucket"], "kinesis-channel/", lambda got: bool(got))
    assert [gzip.decompress(data) for _, data in got] == [b'{"deployed": 1}\n']

    log = deploy("--parameter-overrides", "Freshness=600")
    assert "Delivery" in log
    d = kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"]
    assert d["S3DestinationConfiguration"]["DataFreshnessInSeconds"] == 600  # updated in place, same channel
    assert outputs()["ChannelArn"] == arn

    s3.delete_object(Bucket=out["Bucket"], Key=got[0][0])
    deploy("--delete")
    assert _error(kinesis.describe_channel, ChannelARN=arn)[0] == "ResourceNotFoundException"


# ------------------------------------------------------------------ kinesim sql


@pytest.mark.slow
def test_channel_outputs_are_kinesim_sql_tables(srv, kinesis, s3):
    import subprocess
    import sys

    from kinesim.analytics.table_sources import find_objects
    from kinesim.analytics.tables import plan_tables

    json_stream, text_stream, bucket = _stream(kinesis), _stream(kinesis), _bucket(s3)
    json_name, text_name = _name("sqlj"), _name("sqlt")
    arns = [_create(kinesis, json_stream, bucket, "JSON", "ZSTD", name=json_name),
            _create(kinesis, text_stream, bucket, "STRING", "GZIP", name=text_name,
                    OutputKeyTemplate="text/!{channel-name}/!{yyyy}!{MM}!{dd}/part!{extension}")]
    for arn in arns:
        _wait_active(kinesis, arn)
    pages = ["home", "cart", "home", "search", "home"]
    kinesis.put_records(StreamARN=json_stream, Records=[
        {"Data": json.dumps({"page": p, "n": i}).encode(), "PartitionKey": str(i)} for i, p in enumerate(pages)])
    kinesis.put_record(StreamARN=json_stream, Data=b"not json", PartitionKey="bad")  # -> dead-letter, not the table
    kinesis.put_records(StreamARN=text_stream, Records=[{"Data": f"text {i}".encode(), "PartitionKey": str(i)}
                                                        for i in range(7)])
    _wait_objects(s3, bucket, "kinesis-channel-errors/", lambda got: bool(got))

    json_table, text_table = json_name.replace("-", "_"), text_name.replace("-", "_")

    def lines(source) -> int:
        return sum(len(channel_objects.decompress(open(o.path, "rb").read(),
                                                  "ZSTD" if o.key.endswith(".zst") else "GZIP").splitlines())
                   for o in find_objects(source))

    deadline = time.time() + DEADLINE_S
    while True:
        sources = {s.name: s for s in plan_tables(srv.url)[0]}
        if lines(sources[json_table]) >= len(pages) and lines(sources[text_table]) >= 7 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert sources[json_table].format == "json" and sources[text_table].format == "text"
    assert all(not o.key.startswith("kinesis-channel-errors/") for o in find_objects(sources[json_table]))

    proc = subprocess.run([sys.executable, "-m", "kinesim", "sql", "--endpoint-url", srv.url, "--format", "json",
                           "--master", "local[2]",
                           f"SELECT page, count(*) AS n FROM {json_table} GROUP BY page ORDER BY page; "
                           f"SELECT count(*) AS n, min(value) AS first FROM {text_table}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows == [{"page": "cart", "n": 1}, {"page": "home", "n": 3}, {"page": "search", "n": 1},
                    {"n": 7, "first": "text 0"}], proc.stderr
    for arn in arns:
        kinesis.delete_channel(ChannelARN=arn)


# ------------------------------------------------------------------ a re-write replaces, in process


def test_an_object_written_again_after_a_crash_replaces_itself(tmp_path):
    """Objects written, then a crash before the checkpoint was stored: the next run reads the same
    records from the same first record and writes the same key (with the later records too)."""
    from conftest import make_service
    from kinesim.kinesis import channel_delivery
    from kinesim.kinesis.channel_state import CHECKPOINT_KIND

    svc = make_service(tmp_path, firehose_interval_scale=0.01)
    written: dict[tuple[str, str], bytes] = {}
    delivery = channel_delivery.attach(svc, lambda bucket: ACCOUNT,
                                       lambda bucket, key, data: written.__setitem__((bucket, key), data))
    try:
        svc.call("CreateStream", {"StreamName": "s", "StreamModeDetails": {"StreamMode": "ON_DEMAND"}}, cbor=True)
        stream_arn = svc.stream_arn("s")
        svc.call("CreateChannel", {
            "ChannelName": "c", "ServiceExecutionRoleARN": ROLE,
            "StreamConfigurationList": [{"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": "JSON"}}],
            "S3DestinationConfiguration": {"StorageConfiguration": {
                "BucketARN": "arn:aws:s3:::bkt", "ExpectedBucketOwner": ACCOUNT, "CompressionType": "NONE"}}}, cbor=True)
        [channel] = svc.channels.all()
        assert channel.status == "ACTIVE"

        def put(n: int) -> None:
            svc.call("PutRecord", {"StreamName": "s", "Data": json.dumps({"n": n}).encode(), "PartitionKey": "k"},
                     cbor=True)

        before = svc.store.documents(CHECKPOINT_KIND)  # the checkpoint: a header and its shards' marks
        for n in range(3):
            put(n)
        channel_delivery.ChannelWorker(svc, svc.channels, channel, delivery.put_object).step(force=True)
        [(key, first)] = written.items()
        assert first == b'{"n": 0}\n{"n": 1}\n{"n": 2}\n'  # as put: no transformation
        svc.store.delete_documents(CHECKPOINT_KIND)  # the checkpoint of before the write: a crash
        svc.store.put_documents(CHECKPOINT_KIND, before)
        put(3)
        channel_delivery.ChannelWorker(svc, svc.channels, channel, delivery.put_object).step(force=True)
        assert list(written) == [key]  # replaced, not duplicated
        assert written[key] == first + b'{"n": 3}\n'
        put(4)  # after a stored checkpoint: a new object
        channel_delivery.ChannelWorker(svc, svc.channels, channel, delivery.put_object).step(force=True)
        [other] = [k for k in written if k != key]
        assert written[other] == b'{"n": 4}\n'
    finally:
        svc.store.close()


def test_a_stream_with_a_channel_counts_it_and_cannot_be_deleted(kinesis, s3):
    """DeleteChannel's documentation: "A stream cannot be deleted while it has active channels";
    DescribeStreamSummary's ChannelCount counts them (EnforceConsumerDeletion does not apply)."""
    stream_arn, bucket = _stream(kinesis), _bucket(s3)
    arn = _create(kinesis, stream_arn, bucket)
    _wait_active(kinesis, arn)
    assert kinesis.describe_stream_summary(StreamARN=stream_arn)["StreamDescriptionSummary"]["ChannelCount"] == 1
    code, message = _error(kinesis.delete_stream, StreamARN=stream_arn, EnforceConsumerDeletion=True)
    assert code == "ResourceInUseException" and "channels" in message
    kinesis.delete_channel(ChannelARN=arn)
    deadline = time.time() + DEADLINE_S
    while time.time() < deadline:
        try:
            kinesis.delete_stream(StreamARN=stream_arn)
            break
        except botocore.exceptions.ClientError as err:  # the channel is DELETING until it is gone
            assert err.response["Error"]["Code"] == "ResourceInUseException"
            time.sleep(0.2)
    else:
        raise AssertionError("the stream could not be deleted after its channel was")
