"""The web console's streams API (/_kinesim/console/api/streams/...) against a real server: the
shard map after a split and a merge, the record browser's peek from each position type (nothing
consumed), the decoding of JSON, text, binary and KPL-aggregated data, the live tail's cursor, the
lag of a Lambda mapping per shard, write rates counted where records are put, the actions going
through Kinesis's own validation, and the overview's rows of streams and channels."""
from __future__ import annotations

import datetime
import json
import os
import time
import uuid

import pytest
import requests
from console_api import ConsoleApi
from conftest import client_for
from health_probe import peak_resident_bytes
from test_kpl_aggregation import aggregate
from test_mappings_e2e import deploy, stream_arn, wait_until

from kinesim.analytics import connect_server, continuous
from kinesim.config import Settings
from kinesim.server import InProcessServer, free_port
from kinesim.webconsole import streams as console_streams

API = "/_kinesim/console/api/streams"


@pytest.fixture(scope="module")
def kinesis(server):
    return client_for(server.url)


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


@pytest.fixture
def console(server):
    return ConsoleApi(server.url, "/streams")


@pytest.fixture
def stream(kinesis):
    """make(shards) -> a new stream's name; deleted afterwards."""
    names = []

    def make(shards: int = 1) -> str:
        name = "console-" + uuid.uuid4().hex[:10]
        kinesis.create_stream(StreamName=name, ShardCount=shards)
        kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
        names.append(name)
        return name
    yield make
    for name in names:
        kinesis.delete_stream(StreamName=name, EnforceConsumerDeletion=True)


def put(kinesis, name: str, data: bytes, key: str = "k") -> dict:
    return kinesis.put_record(StreamName=name, PartitionKey=key, Data=data)


def test_shard_map_after_split_and_merge(console, kinesis, stream):
    name = stream(2)
    detail = console.get("/" + name).json()
    first = detail["shards"][0]
    assert [s["id"] for s in detail["shards"]] == ["shardId-000000000000", "shardId-000000000001"]
    assert first["start_hash"] == "0" and all(s["open"] and s["generation"] == 0 for s in detail["shards"])
    assert int(first["midpoint"]) == (int(first["end_hash"]) + 1) // 2

    split = console.post(f"/{name}/split", json={"shard": first["id"], "new_starting_hash_key": first["midpoint"]})
    assert split.status_code == 200, split.text
    wait_until(lambda: len(console.get("/" + name).json()["shards"]) == 4, what="the split")
    merge = console.post(f"/{name}/merge", json={"shard": "shardId-000000000002", "adjacent": "shardId-000000000003"})
    assert merge.status_code == 200, merge.text
    shards = wait_until(lambda: (d := console.get("/" + name).json())["status"] == "ACTIVE"
                        and len(d["shards"]) == 5 and d["shards"], what="the merge")
    by_id = {s["id"][-1]: s for s in shards}
    assert {k: (s["open"], s["generation"], s["parent"], s["adjacent_parent"]) for k, s in by_id.items()} == {
        "0": (False, 0, None, None),
        "1": (True, 0, None, None),
        "2": (False, 1, "shardId-000000000000", None),
        "3": (False, 1, "shardId-000000000000", None),
        "4": (True, 2, "shardId-000000000002", "shardId-000000000003"),
    }
    assert (by_id["2"]["start_hash"], by_id["2"]["end_hash"]) == ("0", str(int(first["midpoint"]) - 1))
    assert (by_id["3"]["start_hash"], by_id["3"]["end_hash"]) == (first["midpoint"], first["end_hash"])
    assert (by_id["4"]["start_hash"], by_id["4"]["end_hash"]) == ("0", first["end_hash"])

    # records land in the merged child, and are counted by the shard's write counter
    for i in range(3):
        put(kinesis, name, b"x" * 10, key=f"k{i}")
    sent = kinesis.put_records(StreamName=name, Records=[{"PartitionKey": f"p{i}", "Data": b"y" * 5} for i in range(4)])
    detail = console.get("/" + name).json()
    kept = {s["id"]: s["records"] for s in detail["shards"]}
    assert sum(kept.values()) == 7 and kept["shardId-000000000000"] == 0
    child = next(s for s in detail["shards"] if s["id"] == "shardId-000000000004")
    if child["records"]:
        assert child["first_sequence"] and child["last_sequence"]
    points = detail["points"]
    assert sum(points["records"]) == 7 and sum(points["bytes"]) == 3 * 10 + 4 * 5
    per_shard = {k[len("records:"):]: sum(v) for k, v in points.items() if k.startswith("records:")}
    assert per_shard == {s["id"]: s["records"] for s in detail["shards"]}
    assert len(points["t"]) == len(points["records"]) == detail["seconds"]
    assert {r["ShardId"] for r in sent["Records"]} <= {"shardId-000000000001", "shardId-000000000004"}


def test_peek_from_each_position_consumes_nothing(console, kinesis, stream):
    name = stream(1)
    sent = [put(kinesis, name, f"record {i}".encode()) for i in range(5)]
    seqs = [r["SequenceNumber"] for r in sent]
    shard = "shardId-000000000000"

    def peek(kind: str, value: str | None = None) -> list[dict]:
        answer = console.get(f"/{name}/records", shard=shard, type=kind, **({"value": value} if value else {}))
        assert answer.status_code == 200, answer.text
        return answer.json()["records"]

    assert [r["sequence_number"] for r in peek("TRIM_HORIZON")] == seqs
    assert peek("LATEST") == []
    assert [r["sequence_number"] for r in peek("AT_SEQUENCE_NUMBER", seqs[2])] == seqs[2:]
    everything = peek("TRIM_HORIZON")
    at = everything[3]["arrival_ms"]
    from_time = peek("AT_TIMESTAMP", str(at))
    assert seqs[3] in [r["sequence_number"] for r in from_time]
    assert all(r["arrival_ms"] >= at for r in from_time)
    assert [r["sequence_number"] for r in from_time] == [r["sequence_number"] for r in everything if r["arrival_ms"] >= at]
    iso = datetime.datetime.fromtimestamp(at / 1000, datetime.timezone.utc).isoformat()
    assert [r["sequence_number"] for r in peek("AT_TIMESTAMP", iso)] == [r["sequence_number"] for r in from_time]

    # nothing was consumed: a reader from TRIM_HORIZON still gets every record
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert [r["SequenceNumber"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]] == seqs

    # positions are checked as GetShardIterator checks them
    bad = console.get(f"/{name}/records", shard=shard, type="AT_SEQUENCE_NUMBER", value="12345")
    assert bad.status_code == 400 and bad.json()["code"] == "InvalidArgumentException"
    future = console.get(f"/{name}/records", shard=shard, type="AT_TIMESTAMP", value=str(int(time.time() * 1000) + 3_600_000))
    assert future.status_code == 400 and future.json()["code"] == "InvalidArgumentException"
    for missing in (console.get(f"/{name}/records", shard="shardId-000000000007"),
                    console.get("/no-such-stream-here/records")):
        assert 400 <= missing.status_code < 500 and missing.json()["code"] == "ResourceNotFoundException"
    assert console.get(f"/{name}/records", shard=shard, type="AFTER_SOMETHING").status_code == 400


def test_decoding_json_text_binary_and_kpl(console, kinesis, stream):
    name = stream(1)
    put(kinesis, name, json.dumps({"user": 7, "pages": ["/a", "/b"]}).encode(), key="json")
    put(kinesis, name, "plain text, ünïcode\nsecond line".encode(), key="text")
    put(kinesis, name, bytes([0, 1, 2, 0xff, 0xfe]), key="binary")
    put(kinesis, name, aggregate([("user-1", b'{"n": 1}'), ("user-2", b"two"), ("user-1", b"\x00\x01")]), key="kpl")
    records = {r["partition_key"]: r for r in console.get(f"/{name}/records").json()["records"]}
    assert records["json"]["format"] == "json"
    assert json.loads(records["json"]["text"]) == {"user": 7, "pages": ["/a", "/b"]}
    assert "\n  " in records["json"]["text"]  # pretty-printed
    assert (records["text"]["format"], records["text"]["text"]) == ("text", "plain text, ünïcode\nsecond line")
    assert (records["binary"]["format"], records["binary"]["text"]) == ("binary", "00 01 02 ff fe")
    kpl = records["kpl"]
    assert kpl["format"] == "kpl"
    assert [(u["subsequence"], u["partition_key"], u["format"], u["text"]) for u in kpl["user_records"]] == [
        (0, "user-1", "json", '{\n  "n": 1\n}'), (1, "user-2", "text", "two"), (2, "user-1", "binary", "00 01")]


def test_a_record_shows_a_bounded_text_whatever_it_decodes_to(server, console, kinesis, stream):
    name = stream(1)
    # Nested arrays: pretty-printed whole, each level indenting every line under it, this 940 KB
    # record was 380 MB of text; and an aggregate of 100,000 empty user records.
    nested = b"[" + b",".join([b"[" * 400 + b"]" * 400] * 1200) + b"]"
    put(kinesis, name, nested, key="nested")
    put(kinesis, name, aggregate([("user", b"")] * 100_000), key="kpl")
    before = peak_resident_bytes(server.proc.pid)
    answer = console.get(f"/{name}/records")
    grew = peak_resident_bytes(server.proc.pid) - before
    records = {r["partition_key"]: r for r in answer.json()["records"]}
    shown = records["nested"]
    assert (shown["format"], shown["truncated"], len(shown["text"])) == ("json", True, 8192)
    assert shown["text"].startswith("[\n  [\n    [\n")
    kpl = records["kpl"]
    assert kpl["text"] == "KPL aggregate of 100,000 user records"
    assert 0 < len(kpl["user_records"]) < 200 and kpl["user_records_hidden"] == 100_000 - len(kpl["user_records"])
    assert kpl["user_records"][0] == {"subsequence": 0, "partition_key": "user", "explicit_hash_key": None, "size": 0,
                                      "format": "text", "text": "", "truncated": False}
    assert len(answer.content) < 64 << 10
    assert grew < 150 << 20, f"the peek raised the server's peak memory by {grew >> 20} MiB"


def test_live_tail_with_a_cursor(console, kinesis, stream):
    name = stream(2)
    put(kinesis, name, b"before the page")
    first = console.get(f"/{name}/tail").json()
    assert first["records"] == [] and first["cursor"]
    sent = [put(kinesis, name, f"tail {i}".encode(), key=f"key-{i}") for i in range(4)]
    second = console.get(f"/{name}/tail", cursor=first["cursor"]).json()
    assert {r["sequence_number"] for r in second["records"]} == {s["SequenceNumber"] for s in sent}
    arrivals = [r["arrival_ms"] for r in second["records"]]
    assert arrivals == sorted(arrivals, reverse=True)  # newest first
    assert {r["text"] for r in second["records"]} == {f"tail {i}" for i in range(4)}
    assert console.get(f"/{name}/tail", cursor=second["cursor"]).json()["records"] == []
    assert console.get(f"/{name}/tail", cursor="garbage").status_code == 400


def test_lag_of_a_lambda_mapping_per_shard(console, kinesis, stream, lambda_client, tmp_path):
    name = stream(1)
    function, seen = deploy(lambda_client, tmp_path, Timeout=60)
    try:
        # The first record keeps its batch (of one) in the function for a minute: the mapping's
        # checkpoint stays before it while the other records wait behind.
        put(kinesis, name, b"sleep-once")
        mapping = lambda_client.create_event_source_mapping(
            FunctionName=function, EventSourceArn=stream_arn(name), StartingPosition="TRIM_HORIZON", BatchSize=1)
        wait_until(seen.invocations, what="the first invocation")
        for i in range(4):
            put(kinesis, name, f"waiting {i}".encode())
        readers = console.get("/" + name).json()["readers"]
        lambdas = [r for r in readers if r["kind"] == "lambda"]
        assert len(lambdas) == 1 and lambdas[0]["positions"]
        assert mapping["UUID"][:8] in lambdas[0]["name"] and lambdas[0]["href"].endswith("/functions/" + function)
        [shard] = lambdas[0]["shards"]
        assert (shard["shard"], shard["records"], shard["ended"]) == ("shardId-000000000000", 5, False)
        assert shard["ms"] >= 0 and lambdas[0]["records"] == 5
        detail = console.get("/" + name).json()
        assert detail["figures"]["readers"] == 1
        assert detail["lag_points"]["t"] and "shardId-000000000000" in detail["lag_points"]
    finally:
        for m in lambda_client.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]:
            lambda_client.delete_event_source_mapping(UUID=m["UUID"])
        lambda_client.delete_function(FunctionName=function)


def test_actions_answer_with_kinesis_errors(console, kinesis, stream):
    name = stream(2)
    done = console.post(f"/{name}/put", json={"partition_key": "pk", "data": '{"a": 1}'})
    assert done.status_code == 200, done.text
    assert done.json()["shard"].startswith("shardId-") and done.json()["sequence_number"]
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=done.json()["shard"],
                                          ShardIteratorType="AT_SEQUENCE_NUMBER",
                                          StartingSequenceNumber=done.json()["sequence_number"])["ShardIterator"]
    assert kinesis.get_records(ShardIterator=iterator)["Records"][0]["Data"] == b'{"a": 1}'

    cases = [
        ("put", {"data": "no key"}, "ValidationException"),
        ("split", {"shard": "shardId-000000000000", "new_starting_hash_key": "0"}, "InvalidArgumentException"),
        ("split", {"shard": "shardId-000000000000", "new_starting_hash_key": "not a number"}, "ValidationException"),
        ("split", {"shard": "shardId-000000000009", "new_starting_hash_key": "12"}, "ResourceNotFoundException"),
        ("merge", {"shard": "shardId-000000000000", "adjacent": "shardId-000000000000"}, "InvalidArgumentException"),
    ]
    for action, body, code in cases:
        answer = console.post(f"/{name}/{action}", json=body)
        assert 400 <= answer.status_code < 500 and answer.json()["code"] == code, (action, body, answer.text)
    missing = console.post("/no-such-stream-here/put", json={"partition_key": "k", "data": "x"})
    assert 400 <= missing.status_code < 500 and missing.json()["code"] == "ResourceNotFoundException"

    # a form post (what another site could send without a preflight) is refused, nothing done
    refused = console.post(f"/{name}/put", data={"partition_key": "k", "data": "x"})
    assert refused.status_code == 415
    refused = console.post(f"/{name}/split", data=json.dumps({"shard": "shardId-000000000000",
                                                              "new_starting_hash_key": "12"}),
                           headers={"Content-Type": "text/plain"})
    assert refused.status_code == 415
    assert len(kinesis.list_shards(StreamName=name)["Shards"]) == 2


def test_overview_rows_of_streams_and_channels(tmp_path):
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0, delete_stream_ms=0,
                        update_stream_ms=0, log_level="warning")
    with InProcessServer(settings) as srv:
        kinesis, s3 = client_for(srv.url), client_for(srv.url, "s3")
        kinesis.create_stream(StreamName="plain", ShardCount=2)
        kinesis.create_stream(StreamName="demand", StreamModeDetails={"StreamMode": "ON_DEMAND"})
        s3.create_bucket(Bucket="channel-sink")
        demand = kinesis.describe_stream_summary(StreamName="demand")["StreamDescriptionSummary"]["StreamARN"]
        kinesis.create_channel(
            ChannelName="to-s3", ServiceExecutionRoleARN="arn:aws:iam::000000000000:role/channel-role",
            StreamConfigurationList=[{"StreamARN": demand, "RecordConfiguration": {"RecordFormatType": "JSON"}}],
            S3DestinationConfiguration={"StorageConfiguration": {
                "BucketARN": "arn:aws:s3:::channel-sink", "ExpectedBucketOwner": "000000000000", "CompressionType": "NONE"}})
        put(kinesis, "plain", b"one")
        rows = console_streams.overview_rows(srv.edge.own_scope)
        by_name = {r["name"]: r for r in rows["streams"]}
        assert set(by_name) == {"plain", "demand"}
        assert by_name["plain"]["href"] == "/_kinesim/console/streams/plain"
        assert by_name["plain"]["state"] == "ACTIVE" and by_name["plain"]["figures"]["open_shards"] == 2
        assert "records/s in · 2 open shards · 0 readers · max lag" in by_name["plain"]["health"]
        [channel] = rows["channels"]
        assert channel["name"] == "to-s3" and channel["href"] == "/_kinesim/console/streams/demand"
        assert "demand → s3://channel-sink" in channel["health"]
        # the channel is one of the stream's readers
        detail = requests.get(srv.url + API + "/demand", timeout=30).json()
        assert [r["kind"] for r in detail["readers"]] == ["channel"]


def test_a_continuous_query_is_a_reader_at_its_committed_offset(tmp_path):
    """A continuous query's position is read from its Spark checkpoint, whose files are written
    here as Spark writes them (offsets/N: a version line, the batch's metadata, then the source's
    offset; commits/N once batch N is done), without running Spark."""
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0, delete_stream_ms=0,
                        update_stream_ms=0, log_level="warning")
    with InProcessServer(settings) as srv:
        kinesis = client_for(srv.url)
        kinesis.create_stream(StreamName="clicks", ShardCount=1)
        seqs = [put(kinesis, "clicks", f"click {i}".encode())["SequenceNumber"] for i in range(6)]
        directory = continuous.queries_dir(connect_server.state_dir(srv.edge.objects.root))
        for name, sql in (("per-page", "SELECT * FROM STREAM clicks"), ("fresh", "SELECT * FROM STREAM clicks")):
            continuous.save(directory, continuous.Query(name=name, sql=sql, endpoint_url=srv.url))
        checkpoint = continuous.checkpoint_dir(directory, "per-page")
        for batch, last in enumerate((seqs[0], seqs[1], seqs[4])):  # batch 2 planned, not committed
            os.makedirs(os.path.join(checkpoint, "offsets"), exist_ok=True)
            with open(os.path.join(checkpoint, "offsets", str(batch)), "w") as f:
                f.write('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n'
                        + json.dumps({"shards": {"shardId-000000000000": last}, "closed": []}))
            if batch < 2:
                os.makedirs(os.path.join(checkpoint, "commits"), exist_ok=True)
                with open(os.path.join(checkpoint, "commits", str(batch)), "w") as f:
                    f.write('v1\n{"nextBatchWatermarkMs":0}')
        readers = {r["name"]: r for r in requests.get(srv.url + API + "/clicks", timeout=30).json()["readers"]}
        assert readers["per-page"]["kind"] == "query" and readers["per-page"]["positions"]
        [shard] = readers["per-page"]["shards"]
        assert (shard["records"], shard["position"]) == (4, 3)  # after the second record: four behind
        assert not readers["fresh"]["positions"] and "no micro-batch committed" in readers["fresh"]["note"]
