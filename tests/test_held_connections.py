"""Connections and requests that are held open: idle connections, half-sent heads, long polls and
subscriptions never take the server from other clients; and one server per port and data
directory."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse

import requests

from conftest import client_for, start_server, wait_for
from kinesim import port_holder
from kinesim.server import ServerProcess, free_port
from test_edge_safety import AUTH, _await_status, _open_subscription, kinesis_headers


def _address(url: str) -> tuple[str, int]:
    u = urllib.parse.urlparse(url)
    return u.hostname, u.port


def _closed_by_server(sock: socket.socket, deadline_s: float = 60.0) -> bool:
    """Whether the server closes `sock` (end of file, or a reset) before the deadline."""
    sock.settimeout(deadline_s)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _list_streams(url: str, session: requests.Session) -> float:
    start = time.monotonic()
    r = session.post(url, data=b"{}", headers=kinesis_headers("ListStreams"), timeout=60)
    assert r.status_code == 200, r.text
    return time.monotonic() - start


def test_idle_and_half_sent_connections_are_closed(tmp_path_factory):
    proc = start_server(tmp_path_factory, idle_connection_s=1.0)
    try:
        address = _address(proc.url)
        silent = socket.create_connection(address)  # never sends a byte
        half = socket.create_connection(address)
        half.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\n")  # a head that never ends
        done = socket.create_connection(address)  # one request answered, then nothing
        done.sendall(b"GET /_kinesim/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert done.recv(65536).startswith(b"HTTP/1.1 200")
        assert _closed_by_server(silent), "a connection that never sent a byte was kept"
        assert _closed_by_server(half), "a half-sent request head was kept"
        assert _closed_by_server(done), "an idle keep-alive connection was kept"
        assert requests.get(proc.url + "/_kinesim/health", timeout=30).status_code == 200
    finally:
        proc.stop()


def test_idle_connections_do_not_count_against_request_threads(tmp_path_factory):
    # Before: granian counted connections against its limit (the thread count), so as many idle
    # connections as threads left nobody served.
    proc = start_server(tmp_path_factory, request_threads=32, max_subscriptions=8, max_long_polls=8)
    socks = []
    try:
        socks = [socket.create_connection(_address(proc.url)) for _ in range(300)]
        with requests.Session() as session:
            assert max(_list_streams(proc.url, session) for _ in range(5)) < 30
    finally:
        for sock in socks:
            sock.close()
        proc.stop()


def _receive_message(address: tuple[str, int], queue_url: str) -> socket.socket:
    body = json.dumps({"QueueUrl": queue_url, "WaitTimeSeconds": 20}).encode()
    sock = socket.create_connection(address, timeout=120)
    sock.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: AmazonSQS.ReceiveMessage\r\n"
                 b"Content-Type: application/x-amz-json-1.0\r\nX-Amz-Date: 20260101T000000Z\r\n"
                 + f"Authorization: {AUTH.format(service='sqs')}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                 + body)
    return sock


def test_long_polls_subscriptions_and_idle_connections_on_default_settings(tmp_path_factory):
    """1,000 idle connections, 1,000 SQS long polls and 700 SubscribeToShard calls at once, on the
    default settings: every one is held, and short calls are still answered (bench/held.py
    measures how fast)."""
    proc = start_server(tmp_path_factory)  # the default thread count and caps
    address = _address(proc.url)
    idle: list[socket.socket] = []
    subscriptions: list[socket.socket] = []
    polls: list[tuple[socket.socket, float]] = []
    try:
        kinesis = client_for(proc.url)
        kinesis.create_stream(StreamName="wide", ShardCount=35)
        arn = kinesis.describe_stream_summary(StreamName="wide")["StreamDescriptionSummary"]["StreamARN"]
        consumers = [kinesis.register_stream_consumer(StreamARN=arn, ConsumerName=f"c{i}")["Consumer"]["ConsumerARN"]
                     for i in range(20)]
        wait_for(lambda: all(kinesis.describe_stream_consumer(ConsumerARN=c)["ConsumerDescription"]["ConsumerStatus"]
                             == "ACTIVE" for c in consumers))
        queue_url = client_for(proc.url, "sqs").create_queue(QueueName="held")["QueueUrl"]

        idle = [socket.create_connection(address) for _ in range(1000)]
        for consumer in consumers:
            for shard in range(35):
                subscriptions.append(_open_subscription(proc.url, consumer, f"shardId-{shard:012d}"))
        polls = [(_receive_message(address, queue_url), time.monotonic()) for _ in range(1000)]
        for sock in subscriptions:  # every one is being served (holding its thread)
            assert _await_status(sock).startswith(b"HTTP/1.1 200"), "a subscription was refused"

        with requests.Session() as session:
            latencies = [_list_streams(proc.url, session) for _ in range(50)]
            for i in range(50):
                start = time.monotonic()
                r = session.post(proc.url, headers=kinesis_headers("PutRecord"), timeout=60,
                                 data=json.dumps({"StreamName": "wide", "Data": "aGk=", "PartitionKey": str(i)}))
                assert r.status_code == 200, r.text
                latencies.append(time.monotonic() - start)
        # Starved, they would wait for a long poll (20 s) or a subscription (5 minutes) to end.
        assert max(latencies) < 15, f"slowest short call: {max(latencies):.1f} s"

        for sock, sent in polls:  # each was held its 20 s (past a cap it would answer at once)
            answer = _await_status(sock)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            assert time.monotonic() - sent >= 19, "a long poll was answered without waiting"
    finally:
        for sock in idle + subscriptions + [s for s, _ in polls]:
            sock.close()
        proc.stop()


def test_a_second_server_on_the_same_data_directory_is_refused(tmp_path_factory, tmp_path):
    first = start_server(tmp_path_factory)
    try:
        second = ServerProcess(data_dir=first.settings.data_dir)
        out = subprocess.run(second.command(), capture_output=True, text=True, timeout=120)
        assert out.returncode == 1
        assert f"the data directory {os.path.abspath(first.settings.data_dir)} is in use by another kinesim " \
               f"server (pid {first.proc.pid}, {first.url})" in out.stderr, out.stderr
        assert "--data-dir" in out.stderr and "listening" not in out.stderr
        # The first one serves on, and its data directory is free again once it has stopped.
        client_for(first.url).create_stream(StreamName="still-mine", ShardCount=1)
    finally:
        first.stop()
    again = ServerProcess(data_dir=first.settings.data_dir, create_stream_ms=0).start()
    try:
        assert "still-mine" in client_for(again.url).list_streams()["StreamNames"]
    finally:
        again.stop()


def test_a_port_in_use_is_refused(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ServerProcess(port=port, data_dir=str(tmp_path / "data"))
        out = subprocess.run(server.command(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in out.stderr, out.stderr
    assert "--port" in out.stderr and "listening" not in out.stderr
    # It names who holds the port (this test's process) and how to free it.
    command = port_holder._proc_command(str(os.getpid()))
    assert command and f"it is held by pid {os.getpid()} ({command})." in out.stderr, out.stderr
    assert f"Stop it (kill {os.getpid()}), or choose another --port." in out.stderr


def test_who_holds_a_port_is_found_without_proc_too(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert port_holder.port_holders(port)[0].pid == os.getpid()
        assert port_holder._bound_inodes(port) and not port_holder._bound_inodes(free_port())
        # Elsewhere than Linux: ss or lsof, when the machine has them.
        monkeypatch.setattr(port_holder, "_from_proc", lambda port: [])
        for tool in ("ss", "lsof"):
            if shutil.which(tool):
                found = getattr(port_holder, f"_from_{tool}")(port)
                assert [h.pid for h in found] == [os.getpid()] and found[0].command, (tool, found)
        # Nobody found: the message says what it can.
        monkeypatch.setattr(port_holder, "port_holders", lambda port: [])
        message = port_holder.port_taken_message("127.0.0.1", port, "Address already in use")
        assert message == f"cannot listen on 127.0.0.1:{port}: Address already in use. Another server (kinesim, " \
                          "LocalStack...) is probably using it: stop it, or choose another --port."


def test_the_idle_timeout_is_checked(tmp_path):
    server = ServerProcess(data_dir=str(tmp_path / "data"), idle_connection_s=120)
    out = subprocess.run(server.command(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "--idle-timeout must be more than 0 and at most 60 seconds" in out.stderr
