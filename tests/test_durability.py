"""What was acknowledged survives `kill -9` and a restart on the same data directory."""
from __future__ import annotations

import threading

from conftest import client_for
from kinesim.config import Settings
from kinesim.server import ServerProcess, free_port


def read_shard(k, name, shard_id):
    it = k.get_shard_iterator(StreamName=name, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    out = []
    while it:
        resp = k.get_records(ShardIterator=it)
        out += resp["Records"]
        if not resp["Records"]:
            break
        it = resp["NextShardIterator"]
    return out


def test_kill9_loses_nothing_and_sequence_numbers_continue(tmp_path):
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0,
                        update_stream_ms=0, delete_stream_ms=0, log_level="warning")
    proc = ServerProcess(settings).start()
    k = client_for(proc.url)
    k.create_stream(StreamName="durable", ShardCount=4)
    acked: list[tuple[str, str, bytes]] = []
    lock = threading.Lock()

    def producer(n: int):
        c = client_for(proc.url)
        for i in range(100):
            if i % 10 == 0:
                resp = c.put_records(StreamName="durable", Records=[
                    {"Data": f"{n}-{i}-{j}".encode(), "PartitionKey": f"{n}-{j}"} for j in range(20)])
                with lock:
                    acked.extend((r["ShardId"], r["SequenceNumber"], f"{n}-{i}-{j}".encode())
                                 for j, r in enumerate(resp["Records"]))
            else:
                r = c.put_record(StreamName="durable", Data=f"{n}-{i}".encode(), PartitionKey=str(i))
                with lock:
                    acked.append((r["ShardId"], r["SequenceNumber"], f"{n}-{i}".encode()))

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proc.kill()  # SIGKILL right after the last acknowledgement: no shutdown code runs

    proc = ServerProcess(settings).start()
    try:
        k = client_for(proc.url)
        last_seq = {}
        for shard in [f"shardId-00000000000{i}" for i in range(4)]:
            got = read_shard(k, "durable", shard)
            expected = sorted(((int(s), d) for sh, s, d in acked if sh == shard))
            assert [(int(r["SequenceNumber"]), r["Data"]) for r in got] == expected
            last_seq[shard] = expected[-1][0]
        assert len(acked) == 4 * (90 + 10 * 20)
        # new sequence numbers keep increasing after the restart
        for i in range(20):
            r = k.put_record(StreamName="durable", Data=b"after", PartitionKey=str(i))
            assert int(r["SequenceNumber"]) > last_seq[r["ShardId"]]
    finally:
        proc.stop()


def test_streams_and_settings_survive_clean_restart(tmp_path):
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0,
                        update_stream_ms=0, delete_stream_ms=0, log_level="warning")
    with ServerProcess(settings) as proc:
        k = client_for(proc.url)
        k.create_stream(StreamName="keep", ShardCount=2)
        k.increase_stream_retention_period(StreamName="keep", RetentionPeriodHours=72)
        k.add_tags_to_stream(StreamName="keep", Tags={"team": "data"})
        before = k.describe_stream(StreamName="keep")["StreamDescription"]
    with ServerProcess(settings) as proc:
        k = client_for(proc.url)
        after = k.describe_stream(StreamName="keep")["StreamDescription"]
        assert after == before
        assert k.list_tags_for_stream(StreamName="keep")["Tags"] == [{"Key": "team", "Value": "data"}]
