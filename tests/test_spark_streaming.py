"""The Spark source on kinesim streams (kinesim/analytics/streaming.py), through a real server: in a
local SparkSession (batch reads, a streaming query restarted from its checkpoint across a shard
split, LATEST, AvailableNow, the page-views example script as a user runs it), the stream
reader driven directly the way Spark calls it (a merge, AvailableNow's target, LATEST's offset),
and how PySpark's streaming source runner (the process the reader runs in) ends: with its query,
in a classic Spark and in the warm Spark Connect server, and with Spark (source_runner.py)."""
from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from conftest import client_for, start_server, wait_for  # noqa: E402
from kinesim.analytics.source_runner import RUNNER_MODULE  # noqa: E402
from kinesim.analytics.streaming import KinesimStreamReader  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spark(local_spark):
    return local_spark


def put(kinesis, stream: str, records: list[tuple[str, bytes]]) -> list[dict]:
    """PutRecords in batches of 500; the acknowledgements, all of which must have succeeded."""
    acks = []
    for i in range(0, len(records), 500):
        out = kinesis.put_records(StreamName=stream, Records=[{"PartitionKey": k, "Data": d}
                                                              for k, d in records[i:i + 500]])
        assert out["FailedRecordCount"] == 0
        acks += out["Records"]
    return acks


def kinesim_stream(spark, url: str, stream: str, **options):
    reader = spark.readStream.format("kinesim").option("stream", stream).option("endpointUrl", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_returns_every_record(spark, server, kinesis, make_stream):
    stream = make_stream(3)
    records = [(f"user-{i % 17}", json.dumps({"n": i}).encode()) for i in range(1200)]
    before = datetime.now(timezone.utc)
    acks = put(kinesis, stream, records)
    df = spark.read.format("kinesim").option("stream", stream).option("endpointUrl", server.url).load()
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("data", "binary"), ("partitionKey", "string"), ("sequenceNumber", "string"), ("shardId", "string"),
        ("approximateArrivalTimestamp", "timestamp")]
    rows = df.collect()
    assert len(rows) == len(records)
    got = {(r.shardId, r.sequenceNumber): (r.partitionKey, bytes(r.data)) for r in rows}
    want = {(a["ShardId"], a["SequenceNumber"]): rec for a, rec in zip(acks, records)}
    assert got == want
    assert len({r.shardId for r in rows}) == 3
    for r in rows:   # the session time zone is UTC: timestamps come back as naive UTC
        arrival = r.approximateArrivalTimestamp.replace(tzinfo=timezone.utc)
        assert before.timestamp() - 1 <= arrival.timestamp() <= datetime.now(timezone.utc).timestamp() + 1
    # A filter and an aggregate run on top of the source like on any table.
    assert df.where("partitionKey = 'user-3'").count() == sum(1 for k, _ in records if k == "user-3")


def test_batch_read_of_an_empty_stream(spark, server, make_stream):
    stream = make_stream(2)
    assert spark.read.format("kinesim").option("stream", stream).option("endpointUrl", server.url).load().count() == 0


def read_sink(out: Path) -> list[dict]:
    rows = []
    for path in sorted(out.glob("batch-*.jsonl")):
        batch = int(path.stem.split("-")[1])
        rows += [dict(json.loads(line), batch=batch) for line in path.read_text().splitlines()]
    return rows


def file_sink(out: Path):
    """A foreachBatch sink writing each micro-batch to its own file, named by batch id, so a
    replayed batch replaces its file instead of adding to the output (an idempotent sink)."""
    def write(df, batch_id: int) -> None:
        rows = df.select("partitionKey", "sequenceNumber", "shardId").collect()
        (out / f"batch-{batch_id:05d}.jsonl").write_text("".join(json.dumps(r.asDict()) + "\n" for r in rows))
    return write


def start_query(spark, url: str, stream: str, out: Path, checkpoint: Path):
    return (kinesim_stream(spark, url, stream, maxRecordsPerTrigger="120").writeStream
            .foreachBatch(file_sink(out)).option("checkpointLocation", str(checkpoint)).start())


def test_restart_from_checkpoint_across_a_split_reads_every_record_once_in_order(
        spark, server, kinesis, make_stream, tmp_path):
    stream = make_stream(2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    out.mkdir()
    keys = [f"key-{i}" for i in range(12)]

    def records(tag: str, n: int) -> list[tuple[str, bytes]]:
        return [(keys[i % len(keys)], f"{tag}-{i}".encode()) for i in range(n)]

    put_order = records("n", 300)
    acks = put(kinesis, stream, put_order)
    query = start_query(spark, server.url, stream, out, checkpoint)
    query.processAllAvailable()
    query.stop()
    first_run = read_sink(out)
    assert len(first_run) == 300

    put_order += records("m", 200)
    acks += put(kinesis, stream, put_order[300:])
    # Split shard 0 in the middle of its hash range: it closes, two children take its keys.
    shard0 = kinesis.list_shards(StreamName=stream)["Shards"][0]
    low, high = (int(shard0["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
    kinesis.split_shard(StreamName=stream, ShardToSplit=shard0["ShardId"], NewStartingHashKey=str((low + high) // 2))
    put_order += records("k", 250)
    acks += put(kinesis, stream, put_order[500:])
    children = {s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"]
                if s.get("ParentShardId") == shard0["ShardId"]}
    assert len(children) == 2 and {a["ShardId"] for a in acks[500:]} & children

    query = start_query(spark, server.url, stream, out, checkpoint)
    query.processAllAvailable()
    query.stop()
    rows = read_sink(out)

    # Every record exactly once: N + M + K, no duplicate sequence number, the acknowledged ones.
    assert len(rows) == 750
    assert {(r["shardId"], r["sequenceNumber"]) for r in rows} == {(a["ShardId"], a["SequenceNumber"]) for a in acks}
    # The restart went on after the first run's last records: its batches add to the first run's.
    assert [r for r in rows if r["batch"] <= max(r["batch"] for r in first_run)] == first_run
    # maxRecordsPerTrigger bounds each shard's share of a micro-batch.
    per_batch_shard = defaultdict(int)
    for r in rows:
        per_batch_shard[r["batch"], r["shardId"]] += 1
    assert max(per_batch_shard.values()) <= 120
    # Per shard, records arrive in sequence number order across micro-batches.
    for shard_id in {r["shardId"] for r in rows}:
        seqs = [int(r["sequenceNumber"]) for r in rows if r["shardId"] == shard_id]
        assert seqs == sorted(seqs)
    # Per partition key, every record of the parent comes in a micro-batch before any of a child.
    moved = 0
    for key in keys:
        of_key = [r for r in rows if r["partitionKey"] == key]
        parent = [r["batch"] for r in of_key if r["shardId"] == shard0["ShardId"]]
        child = [r["batch"] for r in of_key if r["shardId"] in children]
        if parent and child:
            assert max(parent) < min(child), key
            moved += 1
    assert moved > 0
    # And the records of a key are read in the order they were put.
    for key in keys:
        read = [r["sequenceNumber"] for r in sorted((r for r in rows if r["partitionKey"] == key),
                                                    key=lambda r: (r["batch"], int(r["sequenceNumber"])))]
        assert read == [a["SequenceNumber"] for a, (k, _) in zip(acks, put_order) if k == key]


def test_latest_reads_only_records_put_after_the_query_started(spark, server, kinesis, make_stream, tmp_path):
    stream = make_stream(2)
    put(kinesis, stream, [(f"p{i}", b"old") for i in range(50)])
    query = (kinesim_stream(spark, server.url, stream, startingPosition="LATEST").writeStream
             .format("memory").queryName("latest_clicks").option("checkpointLocation", str(tmp_path / "ck"))
             .start())
    try:
        query.processAllAvailable()
        acks = put(kinesis, stream, [(f"p{i}", b"new") for i in range(40)])
        query.processAllAvailable()
        rows = spark.sql("SELECT shardId, sequenceNumber, data FROM latest_clicks").collect()
    finally:
        query.stop()
    assert {(r.shardId, r.sequenceNumber) for r in rows} == {(a["ShardId"], a["SequenceNumber"]) for a in acks}
    assert {bytes(r.data) for r in rows} == {b"new"}


def test_available_now_reads_what_is_there_and_stops(spark, server, kinesis, make_stream, tmp_path):
    stream = make_stream(3)
    acks = put(kinesis, stream, [(f"p{i}", str(i).encode()) for i in range(900)])
    per_shard = max(sum(1 for a in acks if a["ShardId"] == s) for s in {a["ShardId"] for a in acks})
    query = (kinesim_stream(spark, server.url, stream, maxRecordsPerTrigger="100").writeStream
             .format("memory").queryName("available_now").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    assert query.awaitTermination(60)
    rows = spark.sql("SELECT shardId, sequenceNumber FROM available_now").collect()
    assert sorted((r.shardId, r.sequenceNumber) for r in rows) == sorted((a["ShardId"], a["SequenceNumber"])
                                                                        for a in acks)
    # At most 100 records a shard per micro-batch: as many batches as the fullest shard needs.
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == -(-per_shard // 100)


def test_pageviews_per_minute_example(server, kinesis, make_stream, tmp_path):
    stream = make_stream(2)
    base = 1_700_000_040   # 2023-11-14 22:14:00 UTC, a minute boundary
    expected: dict[tuple[str, str], int] = defaultdict(int)
    clicks = []
    for i in range(90):
        minute, page = i % 3, ["/home", "/products/1", "/cart"][i % 7 % 3]
        ts: float | str = base + minute * 60 + i % 50
        if i % 4 == 0:   # ISO 8601, as `kinesim put --generate clickstream` writes it
            ts = datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.123Z")
        clicks.append((f"u-{i % 9}", json.dumps({"user_id": f"u-{i % 9}", "page": page, "ts": ts}).encode()))
        expected[datetime.fromtimestamp(base + minute * 60, timezone.utc).strftime("%Y-%m-%d %H:%M:%S"), page] += 1
    clicks.append(("u-x", b"not json"))   # skipped, not counted
    put(kinesis, stream, clicks)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "pageviews_per_minute.py"), "--stream", stream,
                           "--endpoint-url", server.url, "--available-now", "--checkpoint", str(tmp_path / "ck")],
                          capture_output=True, text=True, timeout=110, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Console sink rows: | minute | page | views |; in update mode a later batch may repeat a row
    # with a higher count, so keep the last.
    seen: dict[tuple[str, str], int] = {}
    for minute, page, views in re.findall(r"^\|(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*\|(\S+)\s*\|(\d+)\s*\|$",
                                          proc.stdout, re.M):
        seen[minute, page] = int(views)
    assert seen == dict(expected), proc.stdout[-3000:]


# The stream reader driven directly, as Spark's driver and executors call it (no Spark needed).


def drive(reader, start: dict, limit) -> tuple[dict, list[dict]]:
    """One micro-batch: latestOffset, partitions, read every partition; the end offset and the rows."""
    end = reader.latestOffset(start, limit)
    rows = [row for part in reader.partitions(start, end) for batch in reader.read(part)
            for row in batch.to_pylist()]
    return end, rows


def test_merged_child_is_read_after_both_parents_are_finished(server, kinesis, make_stream):
    stream = make_stream(2)
    reader = KinesimStreamReader({"stream": stream, "endpointUrl": server.url})
    keys = [f"key-{i}" for i in range(8)]
    put_order = [(keys[i % 8], b"before") for i in range(40)]
    put(kinesis, stream, put_order)
    offset, batches = reader.initialOffset(), []
    assert offset == {"shards": {}, "closed": []}
    offset, rows = drive(reader, offset, ReadAllAvailable())
    batches.append(rows)
    parents = [s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"]]
    put_order += [(keys[i % 8], b"parent") for i in range(40)]
    put(kinesis, stream, put_order[40:])
    kinesis.merge_shards(StreamName=stream, ShardToMerge=parents[0], AdjacentShardToMerge=parents[1])
    put_order += [(keys[i % 8], b"child") for i in range(40)]
    acks = put(kinesis, stream, put_order[80:])
    child = acks[0]["ShardId"]
    for _ in range(4):
        offset, rows = drive(reader, offset, ReadMaxRows(15))
        batches.append(rows)
    offset, rows = drive(reader, offset, ReadAllAvailable())
    batches.append(rows)
    assert drive(reader, offset, ReadAllAvailable()) == (offset, [])    # nothing new: the same offset
    assert offset["closed"] == sorted(parents) and set(offset["shards"]) == {*parents, child}

    read = [dict(row, batch=n) for n, rows in enumerate(batches) for row in rows]
    assert len(read) == 120 and len({r["sequenceNumber"] for r in read}) == 120
    assert max(sum(1 for r in rows if r["shardId"] == s) for rows in batches[1:5] for s in (*parents, child)) <= 15
    last_parent_batch = max(r["batch"] for r in read if r["shardId"] != child)
    assert min(r["batch"] for r in read if r["shardId"] == child) > last_parent_batch
    for key in keys:
        assert [bytes(r["data"]) for r in read if r["partitionKey"] == key] == [d for k, d in put_order if k == key]


def test_available_now_target_excludes_records_put_after_it(server, kinesis, make_stream):
    stream = make_stream(2)
    reader = KinesimStreamReader({"stream": stream, "endpointUrl": server.url, "maxRecordsPerTrigger": "7"})
    acks = put(kinesis, stream, [(f"k{i}", b"x") for i in range(30)])
    offset = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    put(kinesis, stream, [(f"k{i}", b"late") for i in range(30)])
    seen = []
    for _ in range(20):
        end, rows = drive(reader, offset, reader.getDefaultReadLimit())
        if end == offset:
            break
        offset, seen = end, seen + rows
    assert sorted(r["sequenceNumber"] for r in seen) == sorted(a["SequenceNumber"] for a in acks)


def test_latest_initial_offset_is_each_open_shards_newest_record(server, kinesis, make_stream):
    stream = make_stream(3)
    acks = put(kinesis, stream, [(f"k{i}", b"x") for i in range(60)])
    reader = KinesimStreamReader({"stream": stream, "endpointUrl": server.url, "startingPosition": "latest"})
    newest = {}
    for a in acks:
        newest[a["ShardId"]] = a["SequenceNumber"]
    assert reader.initialOffset() == {"shards": dict(sorted(newest.items())), "closed": []}


def test_a_checkpoint_of_a_deleted_and_recreated_stream_is_refused_with_the_reason(server, kinesis, make_stream):
    stream = make_stream(1)
    reader = KinesimStreamReader({"stream": stream, "endpointUrl": server.url})
    put(kinesis, stream, [("k", b"first life")])
    offset, rows = drive(reader, reader.initialOffset(), ReadAllAvailable())
    assert len(rows) == 1
    kinesis.delete_stream(StreamName=stream)
    kinesis.get_waiter("stream_not_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1})
    time.sleep(1.1)   # sequence numbers tell streams apart by their shards' creation second
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1})
    put(kinesis, stream, [("k", b"second life")])
    with pytest.raises(RuntimeError, match="deleted and created again.*new checkpoint location"):
        drive(reader, offset, ReadAllAvailable())


# PySpark's streaming source runner: the process the reader runs in ends with its query and with Spark.

def _proc_stat(pid: int) -> list[str] | None:
    """state, ppid, pgrp, ... of a process; None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields


def _alive(pid: int) -> bool:
    return _proc_stat(pid) is not None


def source_runners(parents: set[int]) -> list[int]:
    """The running python_streaming_source_runner processes whose parent is one of `parents`."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        stat = _proc_stat(int(name))
        if stat is None or int(stat[1]) not in parents:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if RUNNER_MODULE.encode() in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def children(pid: int) -> set[int]:
    return {int(n) for n in filter(str.isdigit, os.listdir("/proc")) if (_proc_stat(int(n)) or [0, 0])[1] == str(pid)}


def test_stopping_a_query_ends_its_source_runner(spark, server, kinesis, make_stream, tmp_path):
    stream = make_stream(1)
    put(kinesis, stream, [("k", b"x")])
    query = (kinesim_stream(spark, server.url, stream).writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
        # Spark's JVM is a child of this process, the runner a child of the JVM.
        runners = wait_for(lambda: source_runners(children(os.getpid())))
    finally:
        query.stop()
    # Spark sends it SIGTERM as the query stops: it is gone at once (a generous deadline).
    wait_for(lambda: not any(_alive(r) for r in runners), timeout=30)


CONNECT_CLIENT = """
import sys, tempfile
from kinesim.analytics import connect
url, stream = sys.argv[1:3]
spark = connect(url)
query = (spark.readStream.format("kinesim").option("stream", stream).option("endpointUrl", url).load()
         .writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp()).start())
query.processAllAvailable()
print("RUNNING", flush=True)
sys.stdin.readline()
query.stop()
print("STOPPED", flush=True)
spark.stop()
"""


def test_stopping_a_query_in_the_warm_spark_ends_its_source_runner(tmp_path_factory, tmp_path):
    from kinesim.analytics.connect_server import STATE_FILE, state_dir
    from kinesim.analytics.tables import server_info
    server = start_server(tmp_path_factory)
    errors = tmp_path / "client.err"
    client = None
    try:
        kinesis = client_for(server.url)
        kinesis.create_stream(StreamName="warm-clicks", ShardCount=1)
        kinesis.get_waiter("stream_exists").wait(StreamName="warm-clicks", WaiterConfig={"Delay": 1})
        put(kinesis, "warm-clicks", [("k", b"x")])
        # A user's script (a classic Spark may already run in this test process: connect() would use it).
        with open(errors, "w") as err:
            client = subprocess.Popen([sys.executable, "-c", CONNECT_CLIENT, server.url, "warm-clicks"],
                                      cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                      text=True)
        watchdog = threading.Timer(600, client.kill)   # a hung client ends the readline below
        watchdog.start()
        try:
            line = client.stdout.readline()
            assert line == "RUNNING\n", line + errors.read_text()[-3000:]
            with open(os.path.join(state_dir(server_info(server.url)["s3_root"]), STATE_FILE)) as f:
                spark_pid = json.load(f)["pid"]
            runners = wait_for(lambda: source_runners({spark_pid}))
            client.stdin.write("\n")
            client.stdin.flush()
            assert client.stdout.readline() == "STOPPED\n", errors.read_text()[-3000:]
        finally:
            watchdog.cancel()
        # The warm Spark goes on; the query's runner does not.
        wait_for(lambda: not any(_alive(r) for r in runners), timeout=30)
        assert _alive(spark_pid)
        assert client.wait(120) == 0, errors.read_text()[-3000:]
        assert "Traceback" not in errors.read_text(), errors.read_text()
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        server.stop()


# PySpark's runner driven as Spark's JVM drives it (PythonStreamingSourceRunner, PySpark 4): the
# moments a real Spark reaches only by chance, made certain with a Kinesis endpoint that holds its
# answer. A stand-in for the JVM in a process of its own, so that it can die as the JVM does.
FAKE_SPARK = r"""
import json, os, socket, struct, subprocess, sys, tempfile
from pyspark.serializers import CloudPickleSerializer
from kinesim.analytics.streaming import KinesimDataSource
from pyspark.sql.types import StructType, StructField, BinaryType, StringType, TimestampType

endpoint, stream, errors = sys.argv[1:4]
def write_int(f, value): f.write(struct.pack("!i", value))
def write_bytes(f, data): write_int(f, len(data)); f.write(data)
def read_int(f): return struct.unpack("!i", f.read(4))[0]

listener = socket.create_server(("127.0.0.1", 0))
listener.settimeout(120)
env = dict(os.environ, PYTHON_WORKER_FACTORY_PORT=str(listener.getsockname()[1]),
           PYTHON_WORKER_FACTORY_SECRET="secret", PYTHONUNBUFFERED="YES")
with open(errors, "wb") as err:
    runner = subprocess.Popen([sys.executable, "-m", "pyspark.sql.streaming.python_streaming_source_runner"],
                              env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
conn, _ = listener.accept()
f = conn.makefile("rwb")
assert f.read(read_int(f)) == b"secret"
write_bytes(f, b"ok"); f.flush()
read_int(f)                                                   # the runner's pid
write_bytes(f, b"%d.%d" % sys.version_info[:2])               # Python version
write_bytes(f, tempfile.mkdtemp().encode()); write_int(f, 0)  # Spark files, no includes
write_bytes(f, CloudPickleSerializer().dumps(KinesimDataSource({"stream": stream, "endpointUrl": endpoint})))
schema = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType()),
                     StructField("sequenceNumber", StringType()), StructField("shardId", StringType()),
                     StructField("approximateArrivalTimestamp", TimestampType())])
write_bytes(f, schema.json().encode()); write_int(f, 10000); f.flush()
assert read_int(f) == 0, "the runner did not make the reader"
print("runner", runner.pid, flush=True)
write_int(f, 890)                                             # latestOffset(start, limit)
write_bytes(f, json.dumps({"shards": {}, "closed": []}).encode())
write_bytes(f, json.dumps({"_type": "ReadAllAvailable"}).encode()); f.flush()
sys.stdin.readline()                                          # "close": the query stops
f.close(); conn.close()
print("closed", flush=True)
print("exited", runner.wait(120), flush=True)
"""


class HeldKinesis:
    """A Kinesis endpoint that answers ListShards (no shards) only once released."""

    def __init__(self):
        self.asked, self.released = threading.Event(), threading.Event()
        held = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                held.asked.set()
                held.released.wait()
                body = b'{"Shards": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeSpark:
    """FAKE_SPARK in a subprocess: its runner has made the reader and is inside latestOffset."""

    def __init__(self, endpoint: str, errors: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", FAKE_SPARK, endpoint, "clicks", str(errors)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("runner "), line + errors.read_text()
        self.runner = int(line.split()[1])

    def command(self, text: str) -> str:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def close(self) -> None:
        for pid in (self.proc.pid, self.runner):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()


def test_a_source_runner_stopped_in_the_middle_of_a_call_ends_quietly(tmp_path):
    # The query stops (Spark closes the runner's socket) while the reader waits for Kinesis, and
    # the runner answers before Spark's SIGTERM reaches it: it used to print EOFError and
    # BrokenPipeError tracebacks on Spark's stderr (a busy machine made that likely).
    errors = tmp_path / "runner.err"
    with HeldKinesis() as kinesis_endpoint:
        spark = FakeSpark(kinesis_endpoint.url, errors)
        try:
            assert kinesis_endpoint.asked.wait(120), "the reader did not call Kinesis"
            assert spark.command("close") == "closed\n"
            kinesis_endpoint.released.set()
            exited = spark.proc.stdout.readline()
        finally:
            spark.close()
    assert exited.startswith("exited "), exited
    assert errors.read_text() == ""


def test_a_source_runner_ends_with_spark_even_inside_a_call_that_does_not_return(tmp_path):
    # Spark's JVM dies (killed, or its driver exited) without stopping the query: no SIGTERM, only
    # the socket closes. The reader is inside a Kinesis call that does not return (a stopped or
    # stuck server: botocore's retries and 60 s read timeouts kept a runner up to minutes).
    with HeldKinesis() as kinesis_endpoint:
        spark = FakeSpark(kinesis_endpoint.url, tmp_path / "runner.err")
        try:
            assert kinesis_endpoint.asked.wait(120), "the reader did not call Kinesis"
            spark.proc.kill()
            spark.proc.wait()
            # Gone at once; the deadline is generous, and the call it was in never returns.
            wait_for(lambda: not _alive(spark.runner), timeout=30)
        finally:
            spark.close()
