"""The fuzz sweep of the Kafka port (docs/plans/issue-35-kafka.md §7; the HTTP sweep is
tests/test_fuzz.py): valid requests of every advertised API and version built with kio, then the
same with bytes flipped, cut short or padded, under another api key or version, frames of absurd
sizes and random bytes, each on a connection of its own, many side by side. After each batch a
fresh connection's ApiVersions is still answered; at the end the server logged no traceback (a
handler's bug is logged with one), and its threads and sockets are back to what they were: a
connection the client left is not held. KINESIM_FUZZ_SEED picks another seed."""
from __future__ import annotations

import concurrent.futures
import os
import random
import socket
import struct
import time
import uuid
from pathlib import Path

import pytest

from kinesim.config import Settings
from kinesim.kafka import codec
from kinesim.server import free_port

from conftest import client_for
from fuzzing import TRACEBACK, LoggedServer
from test_kafka_clients import fetch_tree, one_batch, produce_tree
from test_kafka_protocol import call, request_frame

SEED = int(os.environ.get("KINESIM_FUZZ_SEED", "9"))
BATCHES = 8
PER_BATCH = 400
THREADS_SLACK = 12
SIDE_BY_SIDE = 32
READ_S = 0.3  # what a case waits for an answer: a long-polling Fetch is not waited out


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    work = tmp_path_factory.mktemp("kafka-fuzz")
    settings = Settings(port=free_port(), kafka_port=free_port(), data_dir=str(work / "data"), create_stream_ms=0,
                        delete_stream_ms=0, update_stream_ms=0, log_level="warning", idle_connection_s=2.0)
    proc = LoggedServer(settings, work / "server.log").start()
    yield proc
    proc.stop()


def seed_trees(topic: str) -> dict[int, dict]:
    """A request tree per api key that reaches past the parsing into the handler's work (an
    empty tree is built for the others). DeleteTopics names a topic of its own, never `topic`."""
    return {
        0: produce_tree(topic, one_batch()),
        1: fetch_tree(topic, 0, max_wait_ms=200),
        2: {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        3: {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": True},
        17: {"mechanism": "PLAIN"},
        19: {"topics": [{"name": f"fuzz-made-{uuid.uuid4().hex[:6]}", "num_partitions": 1,
                         "replication_factor": 1}], "timeout_ms": 1000},
        20: {"topic_names": ["fuzz-absent"], "topics": [{"name": "fuzz-absent"}], "timeout_ms": 1000},
        22: {"transactional_id": None, "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1},
        32: {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}]},
        36: {"auth_bytes": b"\0111111111111\0x"},
    }


def valid_frames(topic: str) -> list[bytes]:
    trees = seed_trees(topic)
    return [request_frame(key, version, 1, trees.get(key, {}))
            for key, (low, high) in sorted(codec.VERSIONS.items()) for version in range(low, high + 1)]


def mutated(rng: random.Random, frame: bytes) -> bytes:
    """One of the ways a frame goes wrong; the size prefix is kept true unless lying is the case."""
    body = bytearray(frame[4:])
    case = rng.randrange(8)
    if case == 0:  # bytes flipped
        for _ in range(rng.randint(1, 6)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    elif case == 1:  # cut short
        body = body[:rng.randrange(len(body))]
    elif case == 2:  # padded with garbage
        body += rng.randbytes(rng.randint(1, 64))
    elif case == 3:  # another api key
        body[0:2] = struct.pack(">h", rng.choice([rng.randint(-32768, 32767), rng.randint(0, 80)]))
    elif case == 4:  # another version
        body[2:4] = struct.pack(">h", rng.choice([rng.randint(-32768, 32767), rng.randint(-1, 20)]))
    elif case == 5:  # a size that lies (more than sent: the idle timeout's; less: the rest is a next frame)
        return struct.pack(">i", max(0, len(body) + rng.choice([-3, -1, 1, 1000]))) + bytes(body)
    elif case == 6:  # absurd sizes
        return struct.pack(">i", rng.choice([-1, -(1 << 31), 0, 7, (1 << 31) - 1, 100 * 1024 * 1024 + 1])) + bytes(body)
    else:  # random bytes after a true header
        body[8:] = rng.randbytes(rng.randint(0, 200))
    return struct.pack(">i", len(body)) + bytes(body)


def send_one(port: int, frame: bytes) -> None:
    """Send, wait up to READ_S for the first bytes of an answer or a close, close: answers, a close
    and silence are all fine."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(frame)
            sock.settimeout(READ_S)
            sock.recv(65536)
        except (socket.timeout, ConnectionError):
            pass


def api_versions_answered(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        return call(sock, 18, 3, {"client_software_name": "fuzz", "client_software_version": "1"}).error_code == 0


def threads_and_sockets(pid: int) -> tuple[int, int]:
    threads = len(os.listdir(f"/proc/{pid}/task"))
    sockets = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return threads, sockets


def settled(pid: int, limit: tuple[int, int], within_s: float) -> tuple[int, int]:
    deadline = time.monotonic() + within_s
    now = threads_and_sockets(pid)
    while (now[0] > limit[0] or now[1] > limit[1]) and time.monotonic() < deadline:
        time.sleep(0.2)
        now = threads_and_sockets(pid)
    return now


def test_fuzzed_frames_leave_the_kafka_port_serving(fuzz_server):
    port, pid = fuzz_server.settings.kafka_port, fuzz_server.proc.pid
    topic = "fuzz-witness"
    kinesis = client_for(fuzz_server.url)
    kinesis.create_stream(StreamName=topic, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(StreamName=topic, WaiterConfig={"Delay": 0.1})
    acked = kinesis.put_record(StreamName=topic, Data=b"acknowledged", PartitionKey="pk")
    frames = valid_frames(topic)
    # The pool's threads and the first connections' made before the baseline is taken.
    for frame in frames:
        send_one(port, frame)
    assert api_versions_answered(port)
    baseline = threads_and_sockets(pid)

    rng = random.Random(SEED)
    with concurrent.futures.ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        for batch in range(BATCHES):
            cases = [mutated(rng, rng.choice(frames)) for _ in range(PER_BATCH)]
            cases += [struct.pack(">i", n) + rng.randbytes(n) for n in (rng.randint(0, 64) for _ in range(20))]
            list(pool.map(lambda f: send_one(port, f), cases))
            assert api_versions_answered(port), f"batch {batch} (seed {SEED}) left the Kafka port unanswered"

    # Connections the fuzzer left are closed by the server within the idle timeout (2 s here)
    # or when their request ends (a Fetch's wait), not kept.
    # Threads: a few more are legitimate (the scopes SASL user names made, streams' own), one per
    # connection (thousands were made) is not.
    threads, sockets = settled(pid, (baseline[0] + THREADS_SLACK, baseline[1] + 2), 15)
    assert (threads, sockets) <= (baseline[0] + THREADS_SLACK, baseline[1] + 2), \
        f"threads {baseline[0]} -> {threads}, sockets {baseline[1]} -> {sockets}"
    records = kinesis.get_records(ShardIterator=kinesis.get_shard_iterator(
        StreamName=topic, ShardId=acked["ShardId"], ShardIteratorType="AT_SEQUENCE_NUMBER",
        StartingSequenceNumber=acked["SequenceNumber"])["ShardIterator"])["Records"]
    assert records[0]["Data"] == b"acknowledged"
    log = Path(fuzz_server.log_path).read_text(errors="replace")
    assert not TRACEBACK.findall(log), f"the server logged tracebacks; see {fuzz_server.log_path}"


def test_a_long_poll_whose_client_left_is_ended(fuzz_server):
    """A Fetch waiting an hour for records on a connection its client closed holds no socket."""
    port, pid = fuzz_server.settings.kafka_port, fuzz_server.proc.pid
    topic = f"fuzz-poll-{uuid.uuid4().hex[:6]}"
    kinesis = client_for(fuzz_server.url)
    kinesis.create_stream(StreamName=topic, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(StreamName=topic, WaiterConfig={"Delay": 0.1})
    assert api_versions_answered(port)
    baseline = threads_and_sockets(pid)
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request_frame(1, 12, 1, fetch_tree(topic, 0, max_wait_ms=3_600_000)))
            time.sleep(0.05)  # the Fetch is waiting when the client goes
    _, sockets = settled(pid, (baseline[0] + THREADS_SLACK, baseline[1] + 2), 10)
    assert sockets <= baseline[1] + 2, f"sockets {baseline[1]} -> {sockets}"
