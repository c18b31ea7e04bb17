"""The Spark sink into kinesim streams and delivery streams (kinesim/analytics/sink.py), through a
real server: batch writes, a streaming query restarted from its checkpoint, a micro-batch replayed
by Spark after the sink committed it (the ledger sends nothing twice), a delivery stream's objects
as JSON lines; and the writers driven directly as Spark calls them (a commit that died half way,
throttled puts under --enforce-limits, a fake client's failures)."""
from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from botocore.exceptions import ClientError  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from conftest import client_for, start_server, wait_for  # noqa: E402
from kinesim.analytics.sink import Ledger, SinkError, Target, put_all, put_chunk  # noqa: E402
from kinesim.analytics.streaming import Connection, KinesimDataSource, client  # noqa: E402

pytestmark = pytest.mark.slow

ROLE = "arn:aws:iam::000000000000:role/firehose"
BASE = 1_700_000_000   # 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def spark(local_spark):
    return local_spark


def put(kinesis, stream: str, records: list[tuple[str, bytes]]) -> None:
    for i in range(0, len(records), 500):
        out = kinesis.put_records(StreamName=stream, Records=[{"PartitionKey": k, "Data": d}
                                                              for k, d in records[i:i + 500]])
        assert out["FailedRecordCount"] == 0


def read_all(kinesis, stream: str, limit: int = 10000) -> list[tuple[str, dict]]:
    """Every record of the stream as (partition key, parsed JSON), shard by shard in order."""
    out = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=limit)
            out += [(r["PartitionKey"], json.loads(r["Data"])) for r in page["Records"]]
            if page["MillisBehindLatest"] == 0:
                break
            iterator = page["NextShardIterator"]
    return out


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_batch_write_puts_every_row_once_with_its_key_as_json(spark, server, kinesis, make_stream):
    stream = make_stream(2)
    df = spark.sql(f"""SELECT concat('user-', id % 7) AS user, id AS n, timestamp_seconds({BASE} + id) AS ts,
                              CAST(id / 4 AS DECIMAL(10, 2)) AS amount, map('k', id) AS tags,
                              named_struct('start', timestamp_seconds({BASE}), 'end', timestamp_seconds({BASE + 60}))
                                AS window
                       FROM range(1200)""")
    writer = df.write.format("kinesim").option("stream", stream).option("endpointUrl", server.url).mode("append")
    # A column the DataFrame lacks fails at the start, naming the columns it has; nothing is put.
    with pytest.raises(Exception, match=r"partitionKeyColumn 'usr' is not a column.*user, n, ts, amount"):
        writer.option("partitionKeyColumn", "usr").save()
    writer.option("partitionKeyColumn", "user").save()
    got = read_all(kinesis, stream)
    assert sorted(value["n"] for _, value in got) == list(range(1200))
    for key, value in got:
        n = value["n"]
        assert key == f"user-{n % 7}"
        assert value == {"user": key, "n": n, "ts": iso(BASE + n), "amount": n / 4, "tags": {"k": n},
                         "window": {"start": iso(BASE), "end": iso(BASE + 60)}}


def start_query(spark, url: str, source: str, target: str, checkpoint: Path):
    """source -> a transform -> target: the source's key, the number doubled and where it came from."""
    rows = (spark.readStream.format("kinesim").option("stream", source).option("endpointUrl", url)
            .option("maxRecordsPerTrigger", "100").load()
            .selectExpr("partitionKey", "CAST(get_json_object(CAST(data AS STRING), '$.n') AS INT) * 2 AS doubled",
                        "sequenceNumber AS source"))
    return (rows.writeStream.format("kinesim").option("stream", target).option("endpointUrl", url)
            .option("checkpointLocation", str(checkpoint)).start())


def run_until_caught_up(spark, url, source, target, checkpoint):
    query = start_query(spark, url, source, target, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


def source_records(first: int, count: int) -> list[tuple[str, bytes]]:
    return [(f"key-{i % 11}", json.dumps({"n": i}).encode()) for i in range(first, first + count)]


def assert_each_once_in_order(kinesis, target: str, total: int) -> None:
    got = read_all(kinesis, target)
    assert sorted(v["doubled"] for _, v in got) == [2 * i for i in range(total)]
    assert all(key == f"key-{v['doubled'] // 2 % 11}" for key, v in got)
    for key in {k for k, _ in got}:   # per key, in the order the source held them
        of_key = [v["doubled"] for k, v in got if k == key]
        assert of_key == sorted(of_key), key


def test_streaming_restart_from_checkpoint_puts_every_row_once(spark, server, kinesis, make_stream, tmp_path):
    source, target = make_stream(2), make_stream(3)
    checkpoint = tmp_path / "ck"
    put(kinesis, source, source_records(0, 300))
    run_until_caught_up(spark, server.url, source, target, checkpoint)
    assert len(read_all(kinesis, target)) == 300
    put(kinesis, source, source_records(300, 250))
    run_until_caught_up(spark, server.url, source, target, checkpoint)
    assert_each_once_in_order(kinesis, target, 550)
    # The ledger went into the checkpoint (Spark hands the sink its checkpointLocation).
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert Ledger(str(checkpoint / "kinesim-sink")).committed() == commits[-1]


def test_a_batch_spark_replays_after_the_sink_committed_is_not_put_again(
        spark, server, kinesis, make_stream, tmp_path):
    source, target = make_stream(2), make_stream(2)
    checkpoint = tmp_path / "ck"
    put(kinesis, source, source_records(0, 320))
    first = run_until_caught_up(spark, server.url, source, target, checkpoint)
    assert len(read_all(kinesis, target)) == 320
    # As if the driver died between the sink's commit and Spark's commit log write.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    rows_of_last = next(p["numInputRows"] for p in first.recentProgress if p["batchId"] == last)
    assert rows_of_last > 0
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    second = run_until_caught_up(spark, server.url, source, target, checkpoint)
    # Spark did run the batch again, with the same rows, and committed it to the sink...
    assert [(p["batchId"], p["numInputRows"]) for p in second.recentProgress if p["numInputRows"]] == \
        [(last, rows_of_last)]
    assert (checkpoint / "commits" / str(last)).exists()
    # ...which sent nothing: each row once.
    assert_each_once_in_order(kinesis, target, 320)


def test_batch_write_to_a_delivery_stream_arrives_as_json_lines(spark, server):
    firehose, s3 = client_for(server.url, "firehose"), client_for(server.url, "s3", s3={"addressing_style": "path"})
    bucket, name = "sink-" + uuid.uuid4().hex[:10], "sink-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    firehose.create_delivery_stream(DeliveryStreamName=name, ExtendedS3DestinationConfiguration={
        "RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}", "BufferingHints": {"IntervalInSeconds": 0}})
    wait_for(lambda: firehose.describe_delivery_stream(DeliveryStreamName=name)
             ["DeliveryStreamDescription"]["DeliveryStreamStatus"] == "ACTIVE")
    (spark.sql("SELECT id AS n, concat('page-', id % 5) AS page FROM range(1300)").write.format("kinesim")
     .option("deliveryStream", name).option("endpointUrl", server.url).mode("append").save())

    def lines() -> list[bytes]:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        body = b"".join(s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys)
        return body.splitlines() if body.count(b"\n") >= 1300 else []
    got = [json.loads(line) for line in wait_for(lines)]
    assert sorted(got, key=lambda v: v["n"]) == [{"n": i, "page": f"page-{i % 5}"} for i in range(1300)]


# The writers driven directly, as Spark's driver and executors call them (no Spark needed).


def stream_writer(url: str, stream: str, ledger: Path, **options):
    schema = StructType.fromJson({"type": "struct", "fields": [
        {"name": "partitionKey", "type": "string", "nullable": True, "metadata": {}},
        {"name": "n", "type": "long", "nullable": True, "metadata": {}}]})
    source = KinesimDataSource({"stream": stream, "endpointUrl": url, "ledgerLocation": str(ledger), **options})
    return source.streamWriter(schema, False)


def arrow_rows(first: int, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"partitionKey": [f"k{i % 3}" for i in range(first, first + count)],
                                       "n": list(range(first, first + count))})


def test_a_commit_that_died_half_way_sends_the_rest_of_the_first_attempts_records(
        server, kinesis, make_stream, tmp_path):
    stream, ledger = make_stream(1), tmp_path / "ledger"
    writer = stream_writer(server.url, stream, ledger)
    first_attempt = [writer.write(iter([arrow_rows(0, 700)])), writer.write(iter([arrow_rows(700, 600)]))]
    # A first commit sealed batch 7 and had 500 records acknowledged when the driver died.
    book = Ledger(str(ledger))
    sealed = book.seal(7, [r for m in first_attempt for r in m.records])
    put_all(writer.encoder.target, sealed[:500])
    book.ack(7, 500)
    # The replay's tasks computed the batch's partitions in the other order: the sealed order wins.
    replay = stream_writer(server.url, stream, ledger)
    replay.commit(list(reversed(first_attempt)), 7)
    assert [v["n"] for _, v in read_all(kinesis, stream)] == list(range(1300))
    assert book.committed() == 7
    replay.commit(first_attempt, 7)            # committed already: nothing sent
    replay.abort(first_attempt, 8)             # a failed batch: nothing sent
    assert len(read_all(kinesis, stream)) == 1300
    # Older batches' files go once later ones complete; the last few stay.
    for batch in (8, 9, 10):
        replay.commit([writer.write(iter([arrow_rows(2000 + batch, 1)]))], batch)
    assert sorted(os.listdir(ledger / "batches")) == [f"{b}.{s}" for b in (10, 8, 9) for s in ("acked", "records")]
    # A ledger is one query's: another checkpoint's query id is refused.
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "metadata").write_text('{"id":"other-query"}\n')
    (ledger / "query").write_text("first-query")
    other = stream_writer(server.url, stream, ledger, checkpointLocation=str(tmp_path / "ck"))
    with pytest.raises(SinkError, match="belongs to query first-query"):
        other.commit([], 11)


def test_throttled_records_are_sent_again_until_the_shard_takes_them(tmp_path_factory):
    limited = start_server(tmp_path_factory, enforce_limits=True)
    try:
        conn = Connection("narrow", limited.url, "us-east-1")
        kinesis = client(conn)   # retries throttled reads too (2 MiB/s out)
        kinesis.create_stream(StreamName="narrow", ShardCount=1)
        failed_counts = []

        def recording(conn, service, attempts):
            real = client(conn, service, attempts)

            class Recorder:
                def put_records(self, **kwargs):
                    out = real.put_records(**kwargs)
                    failed_counts.append(out["FailedRecordCount"])
                    return out
            return Recorder()
        target = Target(False, conn, 1 << 20, recording)
        # 8 records of 300 KiB in one call (2.4 MiB): the shard takes 1 MiB a second, so some are
        # throttled (even if the call straddles two of its one-second windows).
        records = [(f"k{i}", json.dumps({"n": i, "pad": "x" * (300 << 10)}).encode()) for i in range(8)]
        assert put_all(target, records) == 8
        assert failed_counts[0] > 0 and failed_counts[-1] == 0 and len(failed_counts) > 1
        assert sorted(v["n"] for _, v in read_all(kinesis, "narrow", limit=3)) == list(range(8))
    finally:
        limited.stop()


class FakeKinesis:
    """Answers PutRecords from a script: per call, a set of indexes to fail, or an error to raise;
    once the script is done, every call fails `then` (none by default)."""

    def __init__(self, script, then=frozenset()):
        self.script, self.then, self.calls = list(script), then, []

    def put_records(self, StreamName, Records):   # noqa: N803 - boto3's names
        self.calls.append([r["Data"] for r in Records])
        step = self.script.pop(0) if self.script else self.then
        if isinstance(step, Exception):
            raise step
        return {"FailedRecordCount": len(step), "Records": [
            {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded"} if i in step
            else {"SequenceNumber": str(i), "ShardId": "shardId-000000000000"} for i in range(len(Records))]}


def fake_target(fake) -> Target:
    return Target(False, Connection("fake", "http://unused", "us-east-1"), 1 << 20, lambda *_: fake)


def throttled_call() -> ClientError:
    return ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "Rate exceeded"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutRecords")


def test_retries_send_only_the_failed_records_before_any_later_call():
    fake = FakeKinesis([{1, 3}, throttled_call(), {0}])
    records = [(f"k{i}", str(i).encode()) for i in range(505)]
    acked = []
    assert put_all(fake_target(fake), records, acked.append, sleep=lambda s: None) == 505
    assert fake.calls == [[str(i).encode() for i in range(500)], [b"1", b"3"], [b"1", b"3"], [b"1"],
                          [str(i).encode() for i in range(500, 505)]]
    assert acked == [500, 505]
    # A record the target refuses for good is an error, not a retry.
    refused = FakeKinesis([])
    refused.put_records = lambda **kw: {"FailedRecordCount": 1, "Records": [{"ErrorCode": "AccessDenied"}]}
    with pytest.raises(SinkError, match="refused records: AccessDenied"):
        put_chunk(fake_target(refused), [("k", b"x")], sleep=lambda s: None)
    # Throttled for longer than the retry window: the stream and the count left in the error.
    # (Throttled for good: a finite script could run out before the window on a fast machine.)
    stuck = FakeKinesis([], then={0, 1})
    with pytest.raises(SinkError, match=r"stream fake: 2 records still not accepted after 0 s"):
        put_chunk(fake_target(stuck), [("a", b"1"), ("b", b"2")], retry_for=0.05, sleep=lambda s: None)
