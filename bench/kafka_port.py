#!/usr/bin/env python3
"""Kafka port against PutRecords / GetRecords: records/s of 100-byte records, one kinesim, one run.

    .venv/bin/python bench/kafka_port.py                        # 200k records per path (~1-2 min)
    .venv/bin/python bench/kafka_port.py --records 50000        # smoke run; figures are rough
    .venv/bin/python bench/kafka_port.py --in-memory --json bench/results/kafka.json

One kinesim server (durable, temp data dir, or --in-memory) is started on free ports, its Kafka
port with `--kafka-port`, and every path runs against it, one after the other, each on a fresh
4-shard stream (= a 4-partition topic):

  produce  kinesis-raw    PutRecords of 500, run.py's raw HTTP client (workloads.putn_worker)
           kinesis-boto3  PutRecords of 500, boto3
           confluent      confluent-kafka Producer: acks=all, linger.ms=5, batch.size=64 KiB
           kafka-python   kafka-python KafkaProducer: acks=all, linger_ms=5, batch_size=64 KiB
  consume  kinesis        GetRecords (Limit 10000) from TRIM_HORIZON, one connection per shard
                          (workloads.drain_worker), of the kinesis-raw stream
           raw Fetch      Fetch v12 (1 MiB per partition) from offset 0, one connection per
                          partition, answers decoded with kio and aiokafka's batch reader: the
                          Kafka counterpart of the drain, client for client (raw_fetch_worker),
                          of the kinesis-raw stream (the drain's own records; the two drains run
                          twice, alternating, and the better pass of each is compared) and of the
                          confluent topic
           confluent      confluent-kafka Consumer, assign() from the beginning, no group, of the
                          confluent stream (and, as a second figure, of the kafka-python stream)

Each path's clients are --clients processes (default 4) starting together, as in run.py; the
records are split evenly over them. Every record is checked: Kinesis by (shard, sequence number)
acknowledged against read, Kafka by (partition, offset) delivered against consumed and by the
record's own id in its value, so a fast wrong answer cannot pass. See bench/README.md.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as wl  # noqa: E402
from peers import REPO_DIR, Server, free_port, in_work_dir, run_steps  # noqa: E402

sys.path.insert(1, str(REPO_DIR))  # the raw Fetch client builds its requests with this checkout's kinesim.kafka

RECORD_BYTES = 100
BATCH = 500
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


class KafkaServer(Server):
    """kinesim with its Kafka port on a free port too, running this checkout's code."""

    def __init__(self, name: str, work_dir: Path, in_memory: bool):
        super().__init__(name, work_dir)
        self.in_memory = in_memory
        self.kafka_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.kafka_port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kinesim", "serve", "--port", str(self.port), "--kafka-port",
               str(self.kafka_port), "--create-stream-ms", "0", "--delete-stream-ms", "0",
               "--update-stream-ms", "0", "--log-level", "warning"]
        return cmd + (["--in-memory"] if self.in_memory else ["--data-dir", str(self.dir / "data")])

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH")) if p)
        return env


# ---------------------------------------------------------------------------------------------
# values: 100 bytes, the first 12 the record's id (client, index), so every record is told apart

def value_of(wid: int, i: int) -> bytes:
    head = b"%02d%010d" % (wid, i)
    return head + bytes((j * 131 + wid) & 255 for j in range(RECORD_BYTES - len(head)))


def _values(wid: int, n: int) -> list[bytes]:
    tail = value_of(wid, 0)[12:]
    return [b"%02d%010d" % (wid, i) + tail for i in range(n)]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if w < total % parts else 0) for w in range(parts)]


# ---------------------------------------------------------------------------------------------
# workers (in client processes, forked by workloads.Timed)

def boto3_put_worker(endpoint: str, stream: str, wid: int, n: int, t_start: float) -> dict:
    """PutRecords of BATCH records through boto3 until n records were acknowledged."""
    import boto3
    from botocore.config import Config
    c = boto3.client("kinesis", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKID",
                     aws_secret_access_key="secret", config=Config(retries={"max_attempts": 0}))
    c.describe_stream_summary(StreamName=stream)  # connect before the clock starts
    data = value_of(wid, 0)
    records = [{"Data": data, "PartitionKey": f"w{wid}-{j}"} for j in range(BATCH)]
    acks: dict[str, list[str]] = {}
    errors: dict[str, int] = {}
    done = 0
    wl.sleep_until(t_start)
    cpu0 = time.thread_time()
    while done < n:
        batch = records[:min(BATCH, n - done)]
        try:
            r = c.put_records(StreamName=stream, Records=batch)
        except Exception as e:  # noqa: BLE001 - counted, the check fails
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + len(batch)
            done += len(batch)
            continue
        for rec in r["Records"]:
            if rec.get("ErrorCode"):
                errors[rec["ErrorCode"]] = errors.get(rec["ErrorCode"], 0) + 1
            else:
                acks.setdefault(rec["ShardId"], []).append(rec["SequenceNumber"])
        done += len(batch)
    t_done = time.monotonic()
    return {"acks": acks, "errors": errors, "cpu": time.thread_time() - cpu0, "t_done": t_done}


def confluent_produce_worker(bootstrap: str, topic: str, wid: int, n: int, partitions: int, idempotent: bool,
                             t_start: float) -> dict:
    """confluent-kafka Producer: n records, partition i % partitions, key w<wid>-<i>."""
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 65536,
                     "enable.idempotence": idempotent, "queue.buffering.max.messages": 1_000_000,
                     "queue.buffering.max.kbytes": 1_048_576})
    p.list_topics(topic, timeout=30)  # connected, metadata known, before the clock starts
    values = _values(wid, n)
    acked: list[tuple[int, int, bytes]] = []
    errors: dict[str, int] = {}

    def delivered(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()[:12]))
        else:
            errors[err.name()] = errors.get(err.name(), 0) + 1

    wl.sleep_until(t_start)
    cpu0 = time.process_time()  # librdkafka's own threads count too
    produce, poll = p.produce, p.poll
    for i, v in enumerate(values):
        while True:
            try:
                produce(topic, v, b"w%d-%d" % (wid, i), partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                poll(0.001)
        if not i & 1023:
            poll(0)
    left = p.flush(120)
    t_done = time.monotonic()
    if left:
        errors["not flushed"] = left
    return {"acked": acked, "errors": errors, "cpu": time.process_time() - cpu0, "t_done": t_done}


def kafka_python_produce_worker(bootstrap: str, topic: str, wid: int, n: int, partitions: int, idempotent: bool,
                                t_start: float) -> dict:
    """kafka-python KafkaProducer: n records, partition i % partitions, key w<wid>-<i>."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=65536,
                      enable_idempotence=idempotent)
    p.partitions_for(topic)  # connected, metadata known, before the clock starts
    values = _values(wid, n)
    wl.sleep_until(t_start)
    cpu0 = time.process_time()
    send = p.send
    futures = [send(topic, v, key=b"w%d-%d" % (wid, i), partition=i % partitions) for i, v in enumerate(values)]
    p.flush(120)
    t_done = time.monotonic()
    cpu = time.process_time() - cpu0
    acked, errors = [], {}
    for f, v in zip(futures, values):
        if f.succeeded():
            acked.append((f.value.partition, f.value.offset, v[:12]))
        else:
            name = type(f.exception).__name__ if f.is_done else "not done"
            errors[name] = errors.get(name, 0) + 1
    p.close(10)
    return {"acked": acked, "errors": errors, "cpu": cpu, "t_done": t_done}


def confluent_consume_worker(bootstrap: str, topic: str, expected: dict[int, int], timeout: float,
                             t_start: float) -> dict:
    """confluent-kafka Consumer, no group: assign() its partitions from the beginning and read until
    it holds `expected[p]` records of each partition (or timeout)."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"kinesim-bench-unused-{os.getpid()}",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "fetch.wait.max.ms": 100})
    c.list_topics(topic, timeout=30)
    got: list[tuple[int, int, bytes]] = []
    errors: dict[str, int] = {}
    left = dict(expected)
    wl.sleep_until(t_start)
    cpu0 = time.process_time()
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in expected])
    deadline = time.monotonic() + timeout
    while any(v > 0 for v in left.values()) and time.monotonic() < deadline:
        # A short timeout: consume() returns when it holds num_messages OR the timeout passed, so
        # with 0.5 s each consumer's last call waited up to 0.5 s for records that never come.
        for m in c.consume(10000, 0.01):
            err = m.error()
            if err is not None:
                if err.code() != ck.KafkaError._PARTITION_EOF:
                    errors[err.name()] = errors.get(err.name(), 0) + 1
                continue
            p = m.partition()
            got.append((p, m.offset(), m.value()[:12]))
            left[p] -= 1
    t_done = time.monotonic()
    cpu = time.process_time() - cpu0
    c.close()
    return {"got": got, "errors": errors, "cpu": cpu, "t_done": t_done}


def raw_fetch_worker(bootstrap: str, topic: str, partition: int, expected: int, timeout: float,
                     t_start: float) -> dict:
    """The Kafka counterpart of workloads.drain_worker: Fetch (v12, 1 MiB per partition, no wait)
    from offset 0 on one connection, answers decoded with kio and their batches with aiokafka's
    reader, until `expected` records are read or a read comes back empty at the end."""
    import socket
    import struct

    from aiokafka.record.memory_records import MemoryRecords
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader, entity_writer

    from kinesim.kafka import shapes
    request, response = load_request_schema(1, 12), load_response_schema(1, 12)
    write_header, write_body = entity_writer(request.__header_schema__), entity_writer(request)
    read_header, read_body = entity_reader(response.__header_schema__), entity_reader(response)
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    got: list[tuple[int, int, bytes]] = []
    errors: dict[str, int] = {}
    offset = correlation = pages = 0
    wl.sleep_until(t_start)
    cpu0 = time.process_time()
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        out = io.BytesIO()
        write_header(out, shapes.build(request.__header_schema__, {
            "request_api_key": 1, "request_api_version": 12, "correlation_id": correlation, "client_id": "bench"}))
        write_body(out, shapes.build(request, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))
        frame = out.getvalue()
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        body = _recv_exactly(sock, size)
        _, used = read_header(body, 0)
        answer, _ = read_body(body, used)
        correlation += 1
        pages += 1
        part = answer.responses[0].partitions[0]
        if part.error_code:
            errors[str(part.error_code)] = errors.get(str(part.error_code), 0) + 1
            break
        records = MemoryRecords(bytes(part.records or b""))
        before = len(got)
        while (batch := records.next_batch()) is not None:
            for record in batch:
                got.append((partition, record.offset, record.value[:12]))
        if len(got) == before:
            break  # at the end, short of `expected`: records went missing
        offset = got[-1][1] + 1
    t_done = time.monotonic()
    sock.close()
    return {"got": got, "errors": errors, "pages": pages, "cpu": time.process_time() - cpu0, "t_done": t_done}


def _recv_exactly(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    return bytes(buf)


# ---------------------------------------------------------------------------------------------
# the paths: each returns figures under its prefix

def _figures(prefix: str, run: wl.Timed, n: int, errors: dict) -> dict:
    out = {f"{prefix}.records": n, f"{prefix}.rps": n / run.wall if run.wall > 0 else None,
           f"{prefix}.mbps": n * RECORD_BYTES / wl.MB / run.wall if run.wall > 0 else None,
           f"{prefix}.errors": errors}
    out.update(run.figures(prefix, n))
    return out


def kinesis_produce(ctx: wl.Ctx, n: int, streams: dict, boto: bool) -> dict:
    key = "produce.kinesis-boto3" if boto else "produce.kinesis-raw"
    stream, shards = wl.create_stream(ctx, "k-boto3" if boto else "k-raw")
    streams[key] = (stream, shards)
    quotas = _split(n, ctx.clients)
    if boto:
        run = wl.Timed(ctx, boto3_put_worker, [(ctx.endpoint, stream, w, quotas[w]) for w in range(ctx.clients)])
    else:  # putn_worker stops at the first whole batch at or past its quota: quotas in batches
        quotas = [BATCH * b for b in _split(-(-n // BATCH), ctx.clients)]
        run = wl.Timed(ctx, wl.putn_worker, [(ctx.endpoint, stream, w, RECORD_BYTES, BATCH, time.monotonic() + 3600,
                                              quotas[w]) for w in range(ctx.clients)])
    acks = wl.merge_acks(run.results)
    streams[key] += (acks,)
    got = sum(map(len, acks.values()))
    out = _figures(key, run, got, wl.merge_errors(run.results))
    out[f"{key}.check.missing_acks"] = sum(quotas) - got
    return out


def kafka_produce(ctx: wl.Ctx, n: int, streams: dict, which: str, idempotent: bool) -> dict:
    key = f"produce.{which}"
    stream, shards = wl.create_stream(ctx, which)
    fn = confluent_produce_worker if which == "confluent" else kafka_python_produce_worker
    quotas = _split(n, ctx.clients)
    run = wl.Timed(ctx, fn, [(ctx.server.bootstrap, stream, w, quotas[w], len(shards), idempotent)
                             for w in range(ctx.clients)])
    acked = [a for r in run.results for a in r["acked"]]
    errors: dict[str, int] = {}
    for r in run.results:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    streams[key] = (stream, shards, acked)
    out = _figures(key, run, len(acked), errors)
    out[f"{key}.check.missing_acks"] = n - len(acked)
    out[f"{key}.check.dup_acks"] = len(acked) - len({(p, o) for p, o, _ in acked})
    return out


def kinesis_consume(ctx: wl.Ctx, streams: dict, key: str = "consume.kinesis") -> dict:
    stream, shards, acks = streams["produce.kinesis-raw"]
    args = [(ctx.endpoint, stream, s["ShardId"], len(acks.get(s["ShardId"], ())), True, 600.0) for s in shards]
    run = wl.Timed(ctx, wl.drain_worker, args, procs=min(ctx.procs, len(shards)))
    acked = {(shard, seq) for shard, seqs in acks.items() for seq in seqs}
    read = [(r["shard"], seq) for r in run.results for seq in r["seqs"]]
    out = _figures(key, run, len(read), wl.merge_errors(run.results))
    out.update({f"{key}.pages": sum(r["pages"] for r in run.results),
                f"{key}.check.expected": len(acked),
                f"{key}.check.dup_read": len(read) - len(set(read)),
                f"{key}.check.missing": len(acked - set(read)),
                f"{key}.check.never_acked": len(set(read) - acked)})
    return out


def kafka_drain_of_kinesis(ctx: wl.Ctx, streams: dict, key: str = "consume.raw<kinesis-raw") -> dict:
    """The raw Fetch drain of the records the GetRecords drain reads (the kinesis-raw stream), in
    the same state: the protocols compared on the same rows. Checked by count per partition and
    by offsets (each partition's 0..n-1, once): their ids are Kinesis sequence numbers, not in
    the values."""
    stream, shards, acks = streams["produce.kinesis-raw"]
    counts = {int(s["ShardId"].rsplit("-", 1)[1]): len(acks.get(s["ShardId"], ())) for s in shards}
    run = wl.Timed(ctx, raw_fetch_worker, [(ctx.server.bootstrap, stream, p, n, 600.0) for p, n in counts.items()],
                   procs=min(ctx.procs, len(counts)))
    got = [(p, offset) for r in run.results for p, offset, _ in r["got"]]
    expected = {(p, offset) for p, n in counts.items() for offset in range(n)}
    errors: dict[str, int] = {}
    for r in run.results:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    out = _figures(key, run, len(got), errors)
    out.update({f"{key}.check.expected": len(expected),
                f"{key}.check.dup_read": len(got) - len(set(got)),
                f"{key}.check.missing": len(expected - set(got)),
                f"{key}.check.never_acked": len(set(got) - expected)})
    return out


def kafka_consume(ctx: wl.Ctx, streams: dict, source: str, consumers: int, raw: bool = False) -> dict:
    key = f"consume.{'raw' if raw else 'confluent'}<{source}"
    stream, shards, acked = streams[f"produce.{source}"]
    expected: dict[int, int] = {p: 0 for p in range(len(shards))}
    for p, _, _ in acked:
        expected[p] += 1
    if raw:  # as the GetRecords drain: one connection per partition
        run = wl.Timed(ctx, raw_fetch_worker, [(ctx.server.bootstrap, stream, p, n, 600.0)
                                               for p, n in expected.items()], procs=min(ctx.procs, len(expected)))
    else:
        groups = [{p: expected[p] for p in list(expected)[i::consumers]}
                  for i in range(min(consumers, len(expected)))]
        run = wl.Timed(ctx, confluent_consume_worker, [(ctx.server.bootstrap, stream, g, 600.0) for g in groups],
                       procs=len(groups))
    got = [g for r in run.results for g in r["got"]]
    errors: dict[str, int] = {}
    for r in run.results:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    acked_set, got_set = set(acked), set(got)
    ids = [v for _, _, v in got]
    out = _figures(key, run, len(got), errors)
    out.update({f"{key}.check.expected": len(acked_set),
                f"{key}.check.dup_read": len(got) - len(got_set) + (len(got_set) - len(set(ids))),
                f"{key}.check.missing": len(acked_set - got_set),
                f"{key}.check.never_acked": len(got_set - acked_set)})
    return out


# ---------------------------------------------------------------------------------------------
# report

PRODUCE = ("produce.kinesis-raw", "produce.kinesis-boto3", "produce.confluent", "produce.kafka-python")
CONSUME = ("consume.kinesis", "consume.raw<kinesis-raw", "consume.kinesis-again", "consume.raw<kinesis-raw-again",
           "consume.raw<confluent",
           "consume.confluent<confluent", "consume.confluent<kafka-python")
LABELS = {
    "produce.kinesis-raw": "Kinesis PutRecords x500 (raw client)",
    "produce.kinesis-boto3": "Kinesis PutRecords x500 (boto3)",
    "produce.confluent": "Kafka confluent-kafka Producer",
    "produce.kafka-python": "Kafka kafka-python KafkaProducer",
    "consume.kinesis": "Kinesis GetRecords drain (raw client)",
    "consume.raw<kinesis-raw": "Kafka Fetch drain of the same (raw)",
    "consume.kinesis-again": "Kinesis GetRecords drain, again",
    "consume.raw<kinesis-raw-again": "Kafka Fetch drain of the same, again",
    "consume.raw<confluent": "Kafka Fetch drain of confluent's (raw)",
    "consume.confluent<confluent": "Kafka confluent Consumer (assign)",
    "consume.confluent<kafka-python": "  same, of kafka-python's topic",
}


def _fmt(v, spec=",.0f") -> str:
    return "-" if v is None else format(v, spec)


def table(figs: dict) -> str:
    head = f"| {'path':<38} | {'records':>9} | {'records/s':>9} | {'MB/s':>6} | {'vs Kinesis':>10} | " \
           f"{'server cores':>12} | {'srv CPU s/1k':>12} | {'client cores':>12} | {'check':<8} |"
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    for group, base in ((PRODUCE, "produce.kinesis-raw"), (CONSUME, consume_base(figs))):
        for k in group:
            if f"{k}.rps" not in figs:
                continue
            r = ratio(figs.get(f"{k}.rps"), figs.get(f"{base}.rps"))
            lines.append(f"| {LABELS[k]:<38} | {_fmt(figs.get(f'{k}.records')):>9} | {_fmt(figs.get(f'{k}.rps')):>9} | "
                         f"{_fmt(figs.get(f'{k}.mbps'), '.2f'):>6} | {_fmt(r, '.2f') + 'x':>10} | "
                         f"{_fmt(figs.get(f'{k}.server_cores'), '.2f'):>12} | "
                         f"{_fmt(figs.get(f'{k}.server_cpu_per_1k'), '.3f'):>12} | "
                         f"{_fmt(figs.get(f'{k}.client_cores'), '.2f'):>12} | {'ok' if ok(figs, k) else 'WRONG':<8} |")
    return "\n".join(lines)


def consume_base(figs: dict) -> str:
    """The faster of the two GetRecords passes: the consume figures' baseline."""
    return _faster(figs, "consume.kinesis", "consume.kinesis-again")


def _faster(figs: dict, *keys: str) -> str:
    passes = [k for k in keys if figs.get(f"{k}.rps")]
    return max(passes, key=lambda k: figs[f"{k}.rps"]) if passes else keys[0]


def ratio(a, b):
    return a / b if a is not None and b else None


def ok(figs: dict, prefix: str) -> bool:
    """Every record acknowledged once and, for reads, read once: no check figure non-zero, no errors."""
    bad = [k for k, v in figs.items() if k.startswith(prefix + ".check.") and not k.endswith(".expected") and v]
    return not bad and not figs.get(f"{prefix}.errors") and figs.get(f"{prefix}.records", 0) > 0


def checks(figs: dict) -> list[dict]:
    out = []
    for name, kafka, kinesis in (("Kafka produce (confluent-kafka) >= Kinesis PutRecords", "produce.confluent",
                                  "produce.kinesis-raw"),
                                 ("Kafka produce (kafka-python) >= Kinesis PutRecords", "produce.kafka-python",
                                  "produce.kinesis-raw"),
                                 ("Kafka consume (raw Fetch) >= Kinesis GetRecords (raw), same records, better pass of 2",
                                  _faster(figs, "consume.raw<kinesis-raw", "consume.raw<kinesis-raw-again"),
                                  consume_base(figs)),
                                 ("Kafka consume (confluent-kafka) >= Kinesis GetRecords (raw)",
                                  "consume.confluent<confluent", consume_base(figs))):
        a, b = figs.get(f"{kafka}.rps"), figs.get(f"{kinesis}.rps")
        if a is None or b is None:
            out.append({"check": name, "result": "n/a", "detail": "not run"})
            continue
        correct = ok(figs, kafka) and ok(figs, kinesis)
        result = "PASS" if a >= b and correct else "FAIL"
        detail = f"{a:,.0f} vs {b:,.0f} records/s = {a / b:.2f}x" + ("" if correct else "; counts WRONG")
        out.append({"check": name, "result": result, "detail": detail})
    wrong = [k for k in PRODUCE + CONSUME if f"{k}.rps" in figs and not ok(figs, k)]
    out.append({"check": "every record acknowledged once and read once, on every path",
                "result": "FAIL" if wrong else "PASS", "detail": ", ".join(wrong) or "all checks 0"})
    return out


def details(figs: dict) -> str:
    lines = []
    for k in PRODUCE + CONSUME:
        if f"{k}.rps" not in figs:
            continue
        c = {kk.split(".check.")[1]: v for kk, v in figs.items() if kk.startswith(k + ".check.")}
        lines.append(f"  {LABELS[k].strip():<38} {figs[f'{k}.seconds']:6.2f} s  checks {c}  errors "
                     f"{figs.get(f'{k}.errors') or {}}" + (f"  pages {figs[f'{k}.pages']}" if f"{k}.pages" in figs else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------

PATHS = ("kinesis-raw", "kinesis-boto3", "confluent", "kafka-python")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200_000, help="records per path (default 200000)")
    p.add_argument("--clients", type=int, default=4,
                   help="client processes per produce path, each with its own connection/producer (default 4)")
    p.add_argument("--consumers", type=int, default=4,
                   help="Kafka consumer processes, the 4 partitions spread over them (default 4, one each, "
                        "as the GetRecords drain has one connection per shard)")
    p.add_argument("--paths", default=",".join(PATHS), help="produce paths, comma list out of " + ",".join(PATHS))
    p.add_argument("--no-idempotence", dest="idempotent", action="store_false",
                   help="Kafka producers without enable.idempotence (default: on, as current clients' default)")
    p.add_argument("--in-memory", action="store_true", help="kinesim --in-memory instead of a temp data dir")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of untimed Kinesis load first (default 2)")
    p.add_argument("--json", metavar="PATH", help="also save every figure and check as JSON")
    a = p.parse_args(argv)
    a.paths = [x.strip() for x in a.paths.split(",") if x.strip()]
    for x in a.paths:
        if x not in PATHS:
            p.error(f"unknown path {x!r} (known: {', '.join(PATHS)})")
    return a


def run(args: argparse.Namespace, work_dir: Path) -> int:
    name = "kinesim-mem" if args.in_memory else "kinesim"
    log(f"{name}: starting")
    server = KafkaServer(name, work_dir, args.in_memory).start()
    log(f"{name}: ready on {server.endpoint}, Kafka on {server.bootstrap} (pid {server.pid})")
    ctx = wl.Ctx(server=server, seconds=0, clients=args.clients, procs=args.clients, log=log)
    streams: dict = {}
    n = args.records
    steps = []
    if args.warmup > 0:
        steps.append((f"warm-up {args.warmup:g}s", lambda: wl.warmup(ctx, args.warmup) or {}))
    for path in args.paths:
        if path.startswith("kinesis"):
            steps.append((f"produce {path} {n:,}", lambda b=path.endswith("boto3"): kinesis_produce(ctx, n, streams, b)))
        else:
            steps.append((f"produce {path} {n:,}",
                          lambda w=path: kafka_produce(ctx, n, streams, w, args.idempotent)))
    if "kinesis-raw" in args.paths:
        # GetRecords and the raw Fetch drain of the same records, twice, alternating: each protocol
        # meets the rows both before and after the other has read them (caches, the WAL's
        # checkpoint), and a pass's figure moves by a third from one run to the next on a shared
        # VM: the better pass of each is compared.
        steps.append(("consume kinesis GetRecords", lambda: kinesis_consume(ctx, streams)))
        steps.append(("consume raw Fetch <- kinesis-raw", lambda: kafka_drain_of_kinesis(ctx, streams)))
        steps.append(("consume kinesis GetRecords again",
                      lambda: kinesis_consume(ctx, streams, "consume.kinesis-again")))
        steps.append(("consume raw Fetch <- kinesis-raw again",
                      lambda: kafka_drain_of_kinesis(ctx, streams, "consume.raw<kinesis-raw-again")))
    if "confluent" in args.paths:
        steps.append(("consume raw Fetch <- confluent", lambda: kafka_consume(ctx, streams, "confluent", 0, raw=True)))
    for src in ("confluent", "kafka-python"):
        if src in args.paths:
            steps.append((f"consume confluent Consumer <- {src}",
                          lambda s=src: kafka_consume(ctx, streams, s, args.consumers)))
    figs = run_steps(name, server, steps, log)
    results = checks(figs)
    print()
    print(f"kinesim Kafka port vs Kinesis API: {n:,} records of {RECORD_BYTES} B per path, 4 partitions/shards, "
          f"{args.clients} client processes per produce path, {args.consumers} Kafka consumers, "
          f"{'in-memory' if args.in_memory else 'durable'}, Kafka idempotence "
          f"{'on' if args.idempotent else 'off'}; {platform.node()} ({os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f})")
    print()
    print(table(figs))
    print()
    for c in results:
        print(f"{c['result']:<5} {c['check']}: {c['detail']}")
    print()
    print(details(figs))
    for e in figs.get("error", []):
        print(f"ERROR: {e}")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpus": os.cpu_count(),
                "python": platform.python_version(), "args": vars(args)}
        path.write_text(json.dumps({"meta": meta, "results": figs, "checks": results}, indent=1, default=str))
        log(f"saved {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return in_work_dir("kinesim-bench-kafka-", lambda work_dir: run(args, work_dir), log)


if __name__ == "__main__":
    sys.exit(main())
