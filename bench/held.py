#!/usr/bin/env python3
"""Short calls while connections and requests are held open.

    .venv/bin/python bench/held.py                    # kinesim, kinesalite and moto
    .venv/bin/python bench/held.py --targets kinesim --calls 1000

Each server runs on its default settings. PutRecord and ListStreams latencies (p50, p99, max) are
measured one call at a time, on one keep-alive connection, in three phases:
  quiet   nothing else open;
  idle    + 1,000 connections that never send a byte;
  held    + 1,000 SQS ReceiveMessage long polls (20 s, sent again as each ends, so 1,000 are
          always waiting) and 700 SubscribeToShard calls (20 consumers x 35 shards) - kinesim only:
          kinesalite has neither SQS nor SubscribeToShard, moto's server serves one request at a time.
Ratios compare kinesim's p99 with each peer's in the same phase (over 1: kinesim is faster).
"""
from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[0:1] = [str(Path(__file__).resolve().parent)]

from client import Client  # noqa: E402
from peers import Server, choices, stop_all  # noqa: E402
from report import fmt_value, ratio, text_table  # noqa: E402
from workloads import percentile as _percentile  # noqa: E402

AUTH = ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/{service}/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=abcd")
PEERS = ("kinesim", "kinesalite", "moto")


def _request(target: str, content_type: str, service: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (f"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: {target}\r\nContent-Type: {content_type}\r\n"
            f"X-Amz-Date: 20260101T000000Z\r\nAuthorization: {AUTH.format(service=service)}\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


class LongPolls:
    """`count` ReceiveMessage long polls kept waiting: one is sent again as soon as one ends."""

    def __init__(self, port: int, queue_url: str, count: int):
        self.port, self.count = port, count
        self.request = _request("AmazonSQS.ReceiveMessage", "application/x-amz-json-1.0", "sqs",
                                {"QueueUrl": queue_url, "WaitTimeSeconds": 20})
        self.selector = selectors.DefaultSelector()
        self.stopped = threading.Event()
        self.answered = 0
        for _ in range(count):
            self._send()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _send(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.sendall(self.request)
        self.selector.register(sock, selectors.EVENT_READ)

    def _run(self) -> None:
        while not self.stopped.is_set():
            for key, _ in self.selector.select(timeout=0.5):
                # One answer per connection (a short JSON body): then a fresh long poll replaces it.
                key.fileobj.recv(65536)
                self.selector.unregister(key.fileobj)
                key.fileobj.close()
                self.answered += 1
                if not self.stopped.is_set():
                    self._send()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()


def _subscriptions(server: Server, streams: Client) -> list[socket.socket]:
    streams.call("CreateStream", {"StreamName": "held", "ShardCount": 35})
    arn = streams.call("DescribeStreamSummary", {"StreamName": "held"})["StreamDescriptionSummary"]["StreamARN"]
    consumers = [streams.call("RegisterStreamConsumer", {"StreamARN": arn, "ConsumerName": f"c{i}"})
                 ["Consumer"]["ConsumerARN"] for i in range(20)]
    deadline = time.monotonic() + 60
    while any(streams.call("DescribeStreamConsumer", {"ConsumerARN": c})["ConsumerDescription"]["ConsumerStatus"]
              != "ACTIVE" for c in consumers):
        if time.monotonic() > deadline:
            raise TimeoutError("consumers did not become ACTIVE")
        time.sleep(0.1)
    socks = []
    for consumer in consumers:
        for shard in range(35):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(_request("Kinesis_20131202.SubscribeToShard", "application/x-amz-json-1.1", "kinesis",
                                  {"ConsumerARN": consumer, "ShardId": f"shardId-{shard:012d}",
                                   "StartingPosition": {"Type": "LATEST"}}))
            socks.append(sock)
    for sock in socks:
        head = sock.recv(65536)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"a subscription was refused: {head[:200]!r}")
    return socks


def percentile(values: list[float], q: float) -> float:
    return _percentile(sorted(values), q)


def _latencies(client: Client, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"PutRecord": [], "ListStreams": []}
    for i in range(calls):
        for op, params in (("PutRecord", {"StreamName": "bench", "Data": "aGk=", "PartitionKey": str(i)}),
                           ("ListStreams", {})):
            start = time.perf_counter()
            client.call(op, params)
            out[op].append((time.perf_counter() - start) * 1000)
    return out


def run(name: str, work: Path, calls: int) -> dict[str, dict[str, list[float]]]:
    server = Server(name, work).start()
    phases: dict[str, dict[str, list[float]]] = {}
    idle: list[socket.socket] = []
    subs: list[socket.socket] = []
    polls = None
    client = Client(server.endpoint)
    try:
        client.call("CreateStream", {"StreamName": "bench", "ShardCount": 1})
        time.sleep(0.5 if name == "kinesalite" else 0)  # kinesalite: CREATING for --createStreamMs 0 too
        phases["quiet"] = _latencies(client, calls)
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(1000)]
        phases["idle"] = _latencies(client, calls)
        if name == "kinesim":
            queue_url = _create_queue(server.port)
            polls = LongPolls(server.port, queue_url, 1000)
            subs = _subscriptions(server, client)
            phases["held"] = _latencies(client, calls)
            print(f"  {name}: {polls.answered} long polls ended and were sent again during the run", file=sys.stderr)
    finally:
        if polls is not None:
            polls.close()
        for sock in idle + subs:
            sock.close()
        client.close()
        server.stop()
    return phases


def _create_queue(port: int) -> str:
    sock = socket.create_connection(("127.0.0.1", port))
    with sock:
        sock.sendall(_request("AmazonSQS.CreateQueue", "application/x-amz-json-1.0", "sqs", {"QueueName": "held"}))
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            answer += sock.recv(65536)
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])["QueueUrl"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(PEERS), help="comma list of: " + ", ".join(PEERS))
    parser.add_argument("--calls", type=int, default=500, help="calls of each operation per phase")
    args = parser.parse_args()
    targets = choices(parser, args.targets, PEERS, "target")
    results = {}
    with tempfile.TemporaryDirectory(prefix="kinesim-held-") as work:
        try:
            for name in targets:
                print(f"{name}...", file=sys.stderr)
                results[name] = run(name, Path(work), args.calls)
        finally:
            stop_all()
    rows = []
    for name, phases in results.items():
        for phase, ops in phases.items():
            for op, values in ops.items():
                rows.append([name, phase, op, fmt_value(percentile(values, 0.5), "{:.2f}"),
                             fmt_value(percentile(values, 0.99), "{:.2f}"), fmt_value(max(values), "{:.1f}")])
    print(text_table(["server", "phase", "operation", "p50 ms", "p99 ms", "max ms"], rows))
    if "kinesim" in results:
        ratios = []
        for peer in (p for p in results if p != "kinesim"):
            for phase in results[peer]:
                for op in ("PutRecord", "ListStreams"):
                    r = ratio(percentile(results[peer][phase][op], 0.99), percentile(results["kinesim"][phase][op], 0.99))
                    ratios.append([f"kinesim vs {peer}", phase, op, fmt_value(r, "{:.2f}x")])
        if ratios:
            print()
            print(text_table(["p99 ratio (peer / kinesim)", "phase", "operation", "ratio"], ratios))
        held = results["kinesim"].get("held", {})
        worst = max((percentile(v, 0.99) for v in held.values()), default=0)
        print(f"\nkinesim p99 with 1,000 idle connections, 1,000 long polls and 700 subscriptions: "
              f"{worst:.1f} ms (goal: under 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
