"""Kafka tools other than the Python clients against the Kafka port: kcat (Debian's, on its own
librdkafka 2.0.2; installed by tests/kcat_setup.py when missing) and kafkajs 2.2.4 (npm,
tests/kafkajs, installed by tests/npm_setup.py)."""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from kinesim.server import free_port

from conftest import client_for, start_server
from kcat_setup import kcat
from npm_setup import NODE, NPM, ensure_node_modules

KAFKAJS = Path(__file__).parent / "kafkajs"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


def broker(proc) -> str:
    return f"127.0.0.1:{proc.settings.kafka_port}"


def run(cmd: list[str], stdin: str | None = None, timeout: float = 60, **kwargs) -> str:
    res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert res.returncode == 0, f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_kcat_round_trip_with_keys_and_headers(kafka):
    tool = kcat()
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    # -K: splits each line into key:value; -H adds a header to every record produced.
    run([tool, "-b", broker(kafka), "-P", "-t", topic, "-K:", "-H", "origin=kcat"], "k1:v1\nk2:v2\nk3:v3\n")
    out = run([tool, "-b", broker(kafka), "-C", "-t", topic, "-o", "beginning", "-e", "-q",
               "-f", "%k|%s|%h|%o\n"])
    assert out.splitlines() == ["k1|v1|origin=kcat|0", "k2|v2|origin=kcat|1", "k3|v3|origin=kcat|2"]
    # The same records through Kinesis: the keys are the partition keys.
    kinesis = client_for(kafka.url)
    shard = kinesis.list_shards(StreamName=topic)["Shards"][0]["ShardId"]
    it = kinesis.get_shard_iterator(StreamName=topic, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = kinesis.get_records(ShardIterator=it["ShardIterator"])["Records"]
    assert [(r["PartitionKey"], r["Data"]) for r in records] == [("k1", b"v1"), ("k2", b"v2"), ("k3", b"v3")]


def test_kcat_metadata_lists_the_streams(kafka):
    tool = kcat()
    name = f"kcat-{uuid.uuid4().hex[:8]}"
    client_for(kafka.url).create_stream(StreamName=name, ShardCount=3)
    listing = json.loads(run([tool, "-b", broker(kafka), "-L", "-J", "-t", name]))
    [topic] = listing["topics"]
    assert topic["topic"] == name and len(topic["partitions"]) == 3


@pytest.fixture(scope="module")
def kafkajs():
    if NODE is None or NPM is None:
        pytest.skip("node and npm are needed for kafkajs: `apt-get install nodejs npm`")
    ensure_node_modules(KAFKAJS)
    return KAFKAJS / "roundtrip.mjs"


def test_kafkajs_produces_and_reads_offsets(kafka, kafkajs):
    topic = f"kjs-{uuid.uuid4().hex[:8]}"
    out = json.loads(run([NODE, str(kafkajs), broker(kafka), topic], cwd=KAFKAJS))
    assert [(a["partition"], a["errorCode"], a["baseOffset"]) for a in out["acks"]] == [(0, 0, "0")]
    assert [(o["partition"], o["low"], o["high"]) for o in out["offsets"]] == [(0, "0", "3")]
    kinesis = client_for(kafka.url)
    shard = kinesis.list_shards(StreamName=topic)["Shards"][0]["ShardId"]
    it = kinesis.get_shard_iterator(StreamName=topic, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = kinesis.get_records(ShardIterator=it["ShardIterator"])["Records"]
    assert [(r["PartitionKey"], r["Data"]) for r in records] == [(f"k{i}", b"value-%d" % i) for i in range(3)]


def test_kafkajs_group_consumer_from_beginning(kafka, kafkajs):
    topic = f"kjs-{uuid.uuid4().hex[:8]}"
    out = json.loads(run([NODE, str(kafkajs), broker(kafka), topic, "consume"], cwd=KAFKAJS, timeout=90))
    assert [(m["offset"], m["key"], m["value"], m["h"]) for m in out["received"]] == \
        [(str(i), f"k{i}", f"value-{i}", str(i)) for i in range(3)]


def test_kcat_and_kafkajs_groups_rejoin_from_their_commits_after_a_kill_9(tmp_path_factory, kafkajs):
    """Each tool consumes in a group and commits (kcat -G and kafkajs' consumer.run commit
    themselves); after a kill -9 and a restart, the same group reads only what came since."""
    tool = kcat()
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0)
    try:
        topic = f"kcat-{uuid.uuid4().hex[:8]}"
        group = f"g-{topic}"

        def produce(lines: str) -> None:
            run([tool, "-b", broker(proc), "-P", "-t", topic], lines)

        def consume_group() -> list[str]:
            # -G: a balanced consumer of the group (librdkafka commits what it read at close);
            # -e: exit at the end of the partition.
            out = run([tool, "-b", broker(proc), "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q",
                       "-f", "%o:%s\n", topic], timeout=90)
            return out.splitlines()
        produce("a\nb\nc\n")
        assert consume_group() == ["0:a", "1:b", "2:c"]
        js_topic = f"kjs-{uuid.uuid4().hex[:8]}"
        first = json.loads(run([NODE, str(kafkajs), broker(proc), js_topic, "consume"], cwd=KAFKAJS, timeout=90))
        assert [m["offset"] for m in first["received"]] == ["0", "1", "2"]
        proc.kill()
        proc.start()
        produce("d\n")
        assert consume_group() == ["3:d"]
        # kafkajs produces its three records again; its group resumes after the first three.
        again = json.loads(run([NODE, str(kafkajs), broker(proc), js_topic, "consume"], cwd=KAFKAJS, timeout=90))
        assert [(m["offset"], m["value"]) for m in again["received"]] == [("3", "value-0"), ("4", "value-1"),
                                                                        ("5", "value-2")]
    finally:
        proc.stop()
