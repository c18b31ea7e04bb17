"""The Kafka port's protocol layer (kinesim/kafka): framing, limits, versions, Metadata onto the
Kinesis streams, and real clients' admin calls. Raw frames are built with kio's own writers."""
from __future__ import annotations

import io
import logging
import socket
import struct
import subprocess
import time
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kinesim.cli import _kafka_port
from kinesim.config import SettingsError
from kinesim.kafka import codec, shapes
from kinesim.kafka.operations import OPERATIONS
from kinesim.server import ServerProcess, free_port, kafka_socket

from conftest import client_for, start_server


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


def address(proc: ServerProcess) -> tuple[str, int]:
    return proc.settings.host, proc.settings.kafka_port


def request_frame(api_key: int, version: int, correlation_id: int, tree: dict) -> bytes:
    schema = load_request_schema(api_key, version)
    out = io.BytesIO()
    entity_writer(schema.__header_schema__)(out, shapes.build(schema.__header_schema__, {
        "request_api_key": api_key, "request_api_version": version, "correlation_id": correlation_id,
        "client_id": "kinesim-test"}))
    entity_writer(schema)(out, shapes.build(schema, tree))
    return struct.pack(">i", out.tell()) + out.getvalue()


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def parse_response(frame: bytes, api_key: int, version: int):
    schema = load_response_schema(api_key, version)
    header, used = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, used)
    return header.correlation_id, body


def call(sock: socket.socket, api_key: int, version: int, tree: dict, correlation_id: int = 7):
    sock.sendall(request_frame(api_key, version, correlation_id, tree))
    got, body = parse_response(read_frame(sock), api_key, version)
    assert got == correlation_id
    return body


def closed_by_server(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def metadata(sock: socket.socket, names: list[str] | None, version: int = 12):
    topics = None if names is None else [{"name": n, "topic_id": None} for n in names]
    return call(sock, 3, version, {"topics": topics, "allow_auto_topic_creation": False})


# Units


def test_every_advertised_api_has_a_handler():
    assert set(codec.VERSIONS) == set(OPERATIONS)


def test_shapes_fit_one_tree_to_every_version():
    tree = {"throttle_time": 5, "brokers": [{"node_id": 0, "host": "h", "port": 1, "rack": None}],
            "cluster_id": "c", "controller_id": 0, "topics": []}
    v0 = shapes.build(load_response_schema(3, 0), tree)
    assert not hasattr(v0, "cluster_id") and v0.brokers[0].port == 1
    v12 = shapes.build(load_response_schema(3, 12), tree)
    assert v12.cluster_id == "c" and v12.throttle_time.total_seconds() == 0.005


def test_kafka_port_option():
    assert _kafka_port("off") == 0 and _kafka_port("9093") == 9093
    with pytest.raises(Exception):
        _kafka_port("70000")


def test_default_kafka_port_taken_is_a_warning_a_chosen_one_an_error(caplog):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="kinesim"):
            assert kafka_socket("127.0.0.1", port, explicit=False) is None
        assert f"127.0.0.1:{port} is taken" in caplog.text and "--kafka-port" in caplog.text
        with pytest.raises(SettingsError, match="--kafka-port"):
            kafka_socket("127.0.0.1", port, explicit=True)
    assert kafka_socket("127.0.0.1", 0, explicit=True) is None  # 0: Kafka off


def test_server_refuses_a_chosen_kafka_port_that_is_taken(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        proc = ServerProcess(data_dir=str(tmp_path), kafka_port=holder.getsockname()[1])
        done = subprocess.run(proc.command(), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--kafka-port" in done.stderr and "cannot listen" in done.stderr


# Raw frames


def test_api_versions(kafka):
    with socket.create_connection(address(kafka)) as sock:
        for version in (0, 3, 4):
            body = call(sock, 18, version, {"client_software_name": "t", "client_software_version": "1"})
            assert body.error_code == 0
            table = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
            # Every API served, as codec's table says; those of step 1-2 pinned here.
            assert table == codec.VERSIONS
            assert {k: table[k] for k in (0, 1, 2, 18, 3, 60)} == {0: (3, 12), 1: (4, 12), 2: (1, 10), 18: (0, 4),
                                                               3: (0, 12), 60: (0, 1)}


def test_api_versions_too_high_is_answered_in_v0_with_the_table(kafka):
    with socket.create_connection(address(kafka)) as sock:
        # A version kio has no schema for either: only the fixed head is read.
        frame = struct.pack(">hhi", 18, 99, 41) + struct.pack(">h", 1) + b"x" + b"\0" * 5
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        got, body = parse_response(read_frame(sock), 18, 0)
        assert got == 41 and body.error_code == 35 and {k.api_key for k in body.api_keys} == set(codec.VERSIONS)
        assert call(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


def test_metadata_lists_every_shard_as_a_partition(kafka):
    kinesis = client_for(kafka.url)
    name = f"kafka-md-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=name, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    with socket.create_connection(address(kafka)) as sock:
        body = metadata(sock, [name])
        assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(0, "127.0.0.1", kafka.settings.kafka_port)]
        assert body.controller_id == 0 and body.cluster_id
        (topic,) = body.topics
        assert topic.error_code == 0 and topic.name == name and topic.topic_id is not None
        assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
                for p in topic.partitions] == [(0, 0, 0, (0,), (0,)), (1, 0, 0, (0,), (0,))]
        first_id = topic.topic_id
        shard = kinesis.describe_stream(StreamName=name)["StreamDescription"]["Shards"][0]
        middle = (int(shard["HashKeyRange"]["StartingHashKey"]) + int(shard["HashKeyRange"]["EndingHashKey"])) // 2
        kinesis.split_shard(StreamName=name, ShardToSplit=shard["ShardId"], NewStartingHashKey=str(middle))
        kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
        # The closed parent stays a partition; its children are partitions 2 and 3.
        (topic,) = metadata(sock, [name]).topics
        assert [p.partition_index for p in topic.partitions] == [0, 1, 2, 3]
        assert topic.topic_id == first_id
        # Every topic when none is named; v0 has no topic ids, no cluster id.
        assert name in {t.name for t in metadata(sock, None).topics}
        old = metadata(sock, [], version=0)
        assert name in {t.name for t in old.topics} and not hasattr(old, "cluster_id")
        # By topic id (v10+).
        by_id = call(sock, 3, 12, {"topics": [{"name": None, "topic_id": first_id}]})
        assert by_id.topics[0].name == name
        # The id changes when the stream is made again under its name.
        kinesis.delete_stream(StreamName=name)
        kinesis.get_waiter("stream_not_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
        kinesis.create_stream(StreamName=name, ShardCount=1)
        kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
        (topic,) = metadata(sock, [name]).topics
        assert topic.topic_id != first_id and len(topic.partitions) == 1


def test_metadata_of_an_unknown_topic(kafka):
    with socket.create_connection(address(kafka)) as sock:
        (topic,) = metadata(sock, ["no-such-stream"]).topics
        assert topic.error_code == 3 and topic.partitions == ()
        unknown = call(sock, 3, 12, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]})
        assert unknown.topics[0].error_code == 100


def test_describe_cluster(kafka):
    with socket.create_connection(address(kafka)) as sock:
        body = call(sock, 60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        assert body.error_code == 0 and body.controller_id == 0
        assert [(b.broker_id, b.port) for b in body.brokers] == [(0, kafka.settings.kafka_port)]
        assert body.cluster_id == metadata(sock, []).cluster_id


def test_pipelined_requests_are_answered_in_order(kafka):
    with socket.create_connection(address(kafka)) as sock:
        frames = [request_frame(3, 12, 100, {"topics": None}),
                  request_frame(18, 3, 101, {"client_software_name": "t", "client_software_version": "1"}),
                  request_frame(60, 0, 102, {"include_cluster_authorized_operations": False}),
                  request_frame(3, 1, 103, {"topics": None})]
        sock.sendall(b"".join(frames))
        answers = [read_frame(sock) for _ in frames]
        assert [struct.unpack_from(">i", a)[0] for a in answers] == [100, 101, 102, 103]


def test_oversized_frame_closes_only_its_connection(kafka):
    with socket.create_connection(address(kafka)) as bad, socket.create_connection(address(kafka)) as good:
        bad.sendall(struct.pack(">i", 100 * 1024 * 1024 + 1))  # the body is never sent: not waited for
        assert closed_by_server(bad)
        assert metadata(good, []).controller_id == 0
    with socket.create_connection(address(kafka)) as tiny:
        tiny.sendall(struct.pack(">i", 4) + b"\0\x12\0\0")
        assert closed_by_server(tiny)


def test_malformed_or_unserved_requests_close_the_connection(kafka):
    cases = [
        struct.pack(">hhi", 3, 12, 5) + b"\xff\xff\xff",     # a header cut short
        struct.pack(">hhi", 3, 99, 5) + b"\0" * 8,            # a version not served
        struct.pack(">hhi", 8, 9, 5) + b"\0" * 8,             # an API not served (yet)
        struct.pack(">hhi", 3, 0, 5) + b"\0\0" + b"\0\0\0\x09",  # an array longer than the frame
    ]
    for frame in cases:
        with socket.create_connection(address(kafka)) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            assert closed_by_server(sock), frame
    with socket.create_connection(address(kafka)) as sock:
        assert metadata(sock, []).controller_id == 0


def test_idle_connection_is_closed(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), idle_connection_s=0.5)
    try:
        with socket.create_connection(address(proc)) as silent, socket.create_connection(address(proc)) as slow:
            slow.sendall(struct.pack(">i", 20) + b"\0\x03")  # part of a frame: still idle
            started = time.monotonic()
            assert closed_by_server(silent) and closed_by_server(slow)
            assert time.monotonic() - started < 4
        with socket.create_connection(address(proc)) as busy:
            # Past the first request, the wait is Kafka's 600 s, not the HTTP idle timeout.
            assert metadata(busy, []).controller_id == 0
            time.sleep(1.0)
            assert metadata(busy, []).controller_id == 0
    finally:
        proc.stop()


# Real clients


def test_kafka_python_admin_sees_the_stream(kafka):
    from kafka.admin import KafkaAdminClient
    name = f"kafka-py-{uuid.uuid4().hex[:8]}"
    kinesis = client_for(kafka.url)
    kinesis.create_stream(StreamName=name, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{kafka.settings.kafka_port}")
    try:
        assert name in admin.list_topics()
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 0
        assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(0, kafka.settings.kafka_port)]
    finally:
        admin.close()


def test_confluent_kafka_admin_sees_the_stream(kafka):
    from confluent_kafka.admin import AdminClient
    name = f"kafka-ck-{uuid.uuid4().hex[:8]}"
    kinesis = client_for(kafka.url)
    kinesis.create_stream(StreamName=name, ShardCount=3)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    found = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka.settings.kafka_port}"}).list_topics(timeout=10)
    assert sorted(found.topics[name].partitions) == [0, 1, 2]
    assert [(b.id, b.port) for b in found.brokers.values()] == [(0, kafka.settings.kafka_port)]
