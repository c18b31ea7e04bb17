"""Resharding is asynchronous, as on AWS: while a stream is UPDATING after SplitShard, MergeShards or
UpdateShardCount, every listing shows the old shards and puts go to the parents; the new layout
appears when UPDATING ends. (kinesalite's recorded tests, test/splitShard.js: one shard right after
SplitShard, a put landing on it, three shards once ACTIVE, children created 1 s after the parent's
end.) Also: a stream deleted while CREATING lists no shards (test/createStream.js)."""
from __future__ import annotations

import time
import uuid

import pytest

from conftest import client_for, start_server
from kinesim.config import Settings
from kinesim.kinesis import sequence
from kinesim.server import ServerProcess, free_port

DELAY_MS = 1500
HALF = str(1 << 127)


def sid(n: int) -> str:
    return sequence.shard_id(n)


def new_name() -> str:
    return "async-" + uuid.uuid4().hex[:10]


def summary(k, name: str) -> dict:
    return k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]


def wait_for_status(k, name: str, status: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while summary(k, name)["StreamStatus"] != status:
        assert time.monotonic() < deadline, f"{name} never became {status}"
        time.sleep(0.05)


def described(k, name: str) -> tuple[str, list[dict]]:
    desc = k.describe_stream(StreamName=name)["StreamDescription"]
    return desc["StreamStatus"], desc["Shards"]


def listed(k, name: str) -> list[dict]:
    return k.list_shards(StreamName=name)["Shards"]


def ids(shards: list[dict]) -> list[str]:
    return [s["ShardId"] for s in shards]


def read_all(k, name: str, shard_id: str) -> tuple[list[dict], dict]:
    """Every record of a shard from its start, and the last GetRecords answer."""
    it = k.get_shard_iterator(StreamName=name, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records: list[dict] = []
    while True:
        resp = k.get_records(ShardIterator=it)
        records += resp["Records"]
        it = resp.get("NextShardIterator")
        if it is None or not resp["Records"]:
            return records, resp


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    proc = start_server(tmp_path_factory, create_stream_ms=DELAY_MS, update_stream_ms=DELAY_MS,
                        delete_stream_ms=5000)
    yield proc
    proc.stop()


@pytest.fixture
def k(slow):
    return client_for(slow.url)


def active_stream(k, shards: int) -> str:
    name = new_name()
    k.create_stream(StreamName=name, ShardCount=shards)
    wait_for_status(k, name, "ACTIVE")
    return name


def while_updating(k, shards: int, change, observe) -> tuple[str, dict]:
    """Makes the change on a new ACTIVE stream, then runs observe(name) -> what it saw. What it saw
    counts only if the stream is still UPDATING afterwards (UPDATING only ever ends, so everything
    observe read was read while UPDATING); on a machine too busy to read within DELAY_MS, the
    change is tried again on another stream rather than asserting on a window that has closed."""
    for _ in range(5):
        name = active_stream(k, shards)
        change(name)
        seen = observe(name)
        if summary(k, name)["StreamStatus"] == "UPDATING":
            return name, seen
    pytest.fail(f"UPDATING ({DELAY_MS} ms) ended five times before the stream could be read")


def test_split_shows_the_old_shard_until_updating_ends(k):
    def observe(name):
        seen = {"before": k.put_record(StreamName=name, Data=b"before", PartitionKey="a", ExplicitHashKey="5")}
        k.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=HALF)
        seen["described"] = described(k, name)
        seen["listed"] = listed(k, name)
        seen["open"] = summary(k, name)["OpenShardCount"]
        seen["during"] = k.put_record(StreamName=name, Data=b"during", PartitionKey="a", ExplicitHashKey="5")
        return seen

    name, seen = while_updating(k, 1, lambda name: None, observe)
    before, during = seen["before"], seen["during"]
    status, shards = seen["described"]
    assert status == "UPDATING"
    assert ids(shards) == [sid(0)]
    assert "EndingSequenceNumber" not in shards[0]["SequenceNumberRange"]
    assert ids(seen["listed"]) == [sid(0)]
    assert seen["open"] == 1
    assert during["ShardId"] == sid(0)

    wait_for_status(k, name, "ACTIVE")
    status, shards = described(k, name)
    assert ids(shards) == [sid(0), sid(1), sid(2)]
    assert ids(listed(k, name)) == ids(shards)
    assert summary(k, name)["OpenShardCount"] == 2
    assert [s.get("ParentShardId") for s in shards] == [None, sid(0), sid(0)]
    ending = shards[0]["SequenceNumberRange"]["EndingSequenceNumber"]
    # Children are created a second after their parent's end (recorded: diff 1000 ms).
    for child in shards[1:]:
        assert sequence.parse(child["SequenceNumberRange"]["StartingSequenceNumber"]).shard_created == \
            sequence.parse(ending).arrival + 1
    after = k.put_record(StreamName=name, Data=b"after", PartitionKey="a", ExplicitHashKey="5")
    assert after["ShardId"] == sid(1)
    # The parent holds everything acknowledged before the change, in order, then ends.
    records, last = read_all(k, name, sid(0))
    assert [r["Data"] for r in records] == [b"before", b"during"]
    assert [r["SequenceNumber"] for r in records] == [before["SequenceNumber"], during["SequenceNumber"]]
    assert last.get("NextShardIterator") is None and ids(last["ChildShards"]) == [sid(1), sid(2)]
    assert int(after["SequenceNumber"]) > int(ending) > int(during["SequenceNumber"])


def test_merge_shows_both_parents_until_updating_ends(k):
    def observe(name):
        return {"described": described(k, name), "listed": listed(k, name),
                "open": summary(k, name)["OpenShardCount"],
                "put": k.put_record(StreamName=name, Data=b"x", PartitionKey="a", ExplicitHashKey=HALF)}

    name, seen = while_updating(
        k, 2, lambda name: k.merge_shards(StreamName=name, ShardToMerge=sid(0), AdjacentShardToMerge=sid(1)),
        observe)
    status, shards = seen["described"]
    assert status == "UPDATING"
    assert ids(shards) == [sid(0), sid(1)]
    assert all("EndingSequenceNumber" not in s["SequenceNumberRange"] for s in shards)
    assert ids(seen["listed"]) == [sid(0), sid(1)]
    assert seen["open"] == 2
    assert seen["put"]["ShardId"] == sid(1)

    wait_for_status(k, name, "ACTIVE")
    status, shards = described(k, name)
    assert ids(shards) == [sid(0), sid(1), sid(2)]
    assert (shards[2]["ParentShardId"], shards[2]["AdjacentParentShardId"]) == (sid(0), sid(1))
    assert summary(k, name)["OpenShardCount"] == 1
    assert k.put_record(StreamName=name, Data=b"y", PartitionKey="a", ExplicitHashKey=HALF)["ShardId"] == sid(2)


def test_update_shard_count_shows_the_old_count_until_updating_ends(k):
    def change(name):
        out = k.update_shard_count(StreamName=name, TargetShardCount=4, ScalingType="UNIFORM_SCALING")
        assert (out["CurrentShardCount"], out["TargetShardCount"]) == (2, 4)

    def observe(name):
        return {"summary": summary(k, name), "listed": listed(k, name),
                "latest": k.list_shards(StreamName=name, ShardFilter={"Type": "AT_LATEST"})["Shards"]}

    name, seen = while_updating(k, 2, change, observe)
    assert seen["summary"]["StreamStatus"] == "UPDATING"
    assert seen["summary"]["OpenShardCount"] == 2
    assert ids(seen["listed"]) == [sid(0), sid(1)]
    assert ids(seen["latest"]) == [sid(0), sid(1)]

    wait_for_status(k, name, "ACTIVE")
    assert summary(k, name)["OpenShardCount"] == 4
    assert len(k.list_shards(StreamName=name, ShardFilter={"Type": "AT_LATEST"})["Shards"]) == 4


def test_a_subscriber_to_the_parent_sees_it_end_when_the_split_happens(k):
    """Nothing but the subscription is running: the change happens when UPDATING ends, not when
    the next call (or the retention sweep, once a minute) looks the stream up."""
    name = active_stream(k, 1)
    arn = summary(k, name)["StreamARN"]
    consumer = k.register_stream_consumer(StreamARN=arn, ConsumerName="c")["Consumer"]["ConsumerARN"]
    deadline = time.monotonic() + 60
    while k.describe_stream_consumer(ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    k.put_record(StreamName=name, Data=b"before", PartitionKey="a")
    events = client_for(k.meta.endpoint_url, read_timeout=60).subscribe_to_shard(
        ConsumerARN=consumer, ShardId=sid(0), StartingPosition={"Type": "TRIM_HORIZON"})["EventStream"]
    k.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=HALF)
    deadline = time.monotonic() + 30  # the split is due in 1.5 s; heartbeats come every 5 s
    data = []
    for event in events:
        assert time.monotonic() < deadline, "the parent did not end when the split was due"
        body = event["SubscribeToShardEvent"]
        data += [r["Data"] for r in body["Records"]]
        if body.get("ChildShards"):
            break
    assert data == [b"before"]
    assert ids(body["ChildShards"]) == [sid(1), sid(2)]


def test_a_stream_deleted_while_creating_lists_no_shards(k):
    name = new_name()
    k.create_stream(StreamName=name, ShardCount=2)
    k.delete_stream(StreamName=name)
    status, shards = described(k, name)
    assert (status, shards) == ("DELETING", [])
    assert summary(k, name)["OpenShardCount"] == 0
    assert listed(k, name) == []


def test_an_acknowledged_split_survives_kill_9(tmp_path):
    """The pending split is in the stream's document: after a kill -9 while UPDATING, the restarted
    server applies it, and the parent keeps every record acknowledged before."""
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0,
                        update_stream_ms=5000, delete_stream_ms=0, log_level="warning")
    proc = ServerProcess(settings).start()
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="s", ShardCount=1)
        k.split_shard(StreamName="s", ShardToSplit=sid(0), NewStartingHashKey=HALF)
        acked = [k.put_record(StreamName="s", Data=str(i).encode(), PartitionKey=str(i)) for i in range(20)]
        assert {r["ShardId"] for r in acked} == {sid(0)}
        status, shards = described(k, "s")
        assert (status, ids(shards)) == ("UPDATING", [sid(0)])
    finally:
        proc.kill()
    proc = ServerProcess(settings).start()
    try:
        k = client_for(proc.url)
        wait_for_status(k, "s", "ACTIVE")
        _, shards = described(k, "s")
        assert ids(shards) == [sid(0), sid(1), sid(2)]
        records, last = read_all(k, "s", sid(0))
        assert [r["SequenceNumber"] for r in records] == [r["SequenceNumber"] for r in acked]
        assert last.get("NextShardIterator") is None
        after = k.put_record(StreamName="s", Data=b"after", PartitionKey="0")
        assert after["ShardId"] in (sid(1), sid(2))
        assert int(after["SequenceNumber"]) > int(acked[-1]["SequenceNumber"])
    finally:
        proc.stop()
