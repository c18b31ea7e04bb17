#!/usr/bin/env python3
"""Benchmark kinesim's Firehose against moto's server, in one run, on this machine.

    .venv/bin/python bench/firehose.py                   # 5 s of PutRecordBatch, 30 latency samples each
    .venv/bin/python bench/firehose.py --quick           # smoke run, figures are rough
    .venv/bin/python bench/firehose.py --seconds 10 --json bench/results/firehose.json
    .venv/bin/python bench/firehose.py --only-kinesis-source --samples 40   # Kinesis source, put -> object

Measurements per target, each on a fresh delivery stream into a fresh bucket:
- throughput: records/s that PutRecordBatch accepts, 500 records of 1 KiB per call, 4 client
  threads (one keep-alive connection each), default buffering (5 MiB / 300 s), printed with the
  ratio kinesim / moto;
- end to end: the time from sending PutRecordBatch (one 1 KiB record) until ListObjectsV2 shows
  the object holding it, with BufferingHints IntervalInSeconds 0 and 1 (p50 / p99), one record
  at a time, the object deleted before the next;
- Kinesis source (kinesim targets; --no-kinesis-source skips it, --only-kinesis-source runs only
  it): the same with PutRecord into a 4-shard stream read by a KinesisStreamAsSource delivery
  stream at IntervalInSeconds 0: how soon the shard reader wakes on an append.

Every target is started by this script on a free port, measured alone, and stopped, also on
Ctrl-C or error (bench/peers.py). See bench/README.md, section "Firehose".
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client  # noqa: E402
import report  # noqa: E402
import workloads as wl  # noqa: E402
from peers import Server, choices, in_work_dir  # noqa: E402

TARGETS = ("kinesim", "kinesim-mem", "moto")
RECORD_BYTES = 1024
BATCH = 500              # PutRecordBatch's limit
INTERVALS = (0, 1)       # IntervalInSeconds of the end-to-end runs
ROLE_ARN = "arn:aws:iam::000000000000:role/firehose"  # neither server checks it
FIREHOSE_TARGET = "Firehose_20150804."
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
POLL_S = 0.002           # pause between two ListObjectsV2 polls
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def authorization(service: str) -> str:
    """A SigV4-shaped header naming `service` (moto's server routes by it; nobody checks the signature)."""
    return (f"AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/{service}/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=0000")


class _FirehoseHeaders:
    """The bench's lean client (bench/client.py), addressed to Firehose instead of Kinesis."""

    def headers(self, op: str) -> dict[str, str]:
        h = self._headers.get(op)
        if h is None:
            h = self._headers[op] = {**super().headers(op), "X-Amz-Target": FIREHOSE_TARGET + op,
                                     "Authorization": authorization("firehose")}
        return h


class RawFirehoseClient(_FirehoseHeaders, client.RawClient):
    pass


class StdFirehoseClient(_FirehoseHeaders, client.StdClient):
    pass


def firehose_client(endpoint: str):
    return (RawFirehoseClient if client.HTTP_IMPL == "raw" else StdFirehoseClient)(endpoint)


class BucketWatcher:
    """ListObjectsV2 (max-keys 1) over one keep-alive connection: the first key of a bucket."""

    def __init__(self, endpoint: str):
        u = urlsplit(endpoint)
        self.host, self.port = u.hostname, u.port
        self.conn: http.client.HTTPConnection | None = None
        self.headers = {"Authorization": authorization("s3"), "X-Amz-Date": client.AMZ_DATE,
                        "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}

    def first_key(self, bucket: str) -> str | None:
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request("GET", f"/{bucket}?list-type=2&max-keys=1", headers=self.headers)
                resp = self.conn.getresponse()
                data = resp.read()
                break
            except client.CONNECTION_ERRORS:
                self.close()
                if attempt:
                    raise
        if resp.status != 200:
            raise RuntimeError(f"ListObjectsV2 {bucket}: HTTP {resp.status} {data[:200]!r}")
        key = ET.fromstring(data).find(f"{S3_NS}Contents/{S3_NS}Key")
        return None if key is None else key.text

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---------------------------------------------------------------------------------------------
# delivery streams

def boto_client(endpoint: str, service: str):
    extra = {"s3": {"addressing_style": "path"}} if service == "s3" else {}
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test", config=Config(retries={"max_attempts": 2}, **extra))


def create_delivery_stream(endpoint: str, tag: str, interval: int | None = None,
                           source_stream_arn: str | None = None) -> tuple[str, str]:
    """A delivery stream into a new bucket of the same name, ACTIVE; (name, bucket). DirectPut, or
    reading the Kinesis stream `source_stream_arn`."""
    firehose, s3 = boto_client(endpoint, "firehose"), boto_client(endpoint, "s3")
    name = f"bench-{tag}-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    destination = {"RoleARN": ROLE_ARN, "BucketARN": f"arn:aws:s3:::{name}"}
    if interval is not None:
        destination["BufferingHints"] = {"IntervalInSeconds": interval, "SizeInMBs": 1}
    source = {}
    if source_stream_arn is not None:
        source = {"DeliveryStreamType": "KinesisStreamAsSource", "KinesisStreamSourceConfiguration": {
            "KinesisStreamARN": source_stream_arn, "RoleARN": ROLE_ARN}}
    firehose.create_delivery_stream(DeliveryStreamName=name, **({"DeliveryStreamType": "DirectPut"} | source),
                                    ExtendedS3DestinationConfiguration=destination)
    deadline = time.monotonic() + 30
    while firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"][
            "DeliveryStreamStatus"] != "ACTIVE":
        if time.monotonic() > deadline:
            raise TimeoutError(f"delivery stream {name} not ACTIVE after 30 s")
        time.sleep(0.05)
    return name, name


def delete_delivery_stream(endpoint: str, name: str) -> None:
    """Stop its delivery (its worker would otherwise share the cores with the next measurement)."""
    boto_client(endpoint, "firehose").delete_delivery_stream(DeliveryStreamName=name)


# ---------------------------------------------------------------------------------------------
# throughput

def put_batch_worker(endpoint: str, name: str, wid: int, t_end: float, t_start: float) -> dict:
    """PutRecordBatch of 500 × 1 KiB until t_end; counts the records accepted."""
    c = firehose_client(endpoint)
    c.connect()
    body = client.dumps({"DeliveryStreamName": name,
                         "Records": [{"Data": wl.payload(RECORD_BYTES, wid * BATCH + j)} for j in range(BATCH)]})
    accepted, errors = 0, {}
    wl.sleep_until(t_start)
    cpu0 = time.thread_time()
    while time.monotonic() < t_end:
        try:
            answer = client.loads(c.raw("PutRecordBatch", body))
        except (client.KinesisError, OSError) as e:
            code = getattr(e, "code", type(e).__name__)
            errors[code] = errors.get(code, 0) + BATCH
            continue
        failed = answer.get("FailedPutCount", 0)
        accepted += BATCH - failed
        for entry in answer.get("RequestResponses", []) if failed else ():
            if entry.get("ErrorCode"):
                errors[entry["ErrorCode"]] = errors.get(entry["ErrorCode"], 0) + 1
    done = time.monotonic()
    c.close()
    return {"accepted": accepted, "errors": errors, "cpu": time.thread_time() - cpu0, "t_done": done}


def throughput(ctx: wl.Ctx, warmup: float) -> dict:
    name, _ = create_delivery_stream(ctx.endpoint, "tput")
    try:
        # The connections are threads of one client process (procs=1), started together.
        def run(seconds: float) -> wl.Timed:
            t_end = time.monotonic() + 0.5 + seconds
            return wl.Timed(ctx, put_batch_worker, [(ctx.endpoint, name, w, t_end) for w in range(ctx.clients)],
                            procs=1)

        if warmup > 0:
            run(warmup)
        timed = run(ctx.seconds)
        accepted = sum(r["accepted"] for r in timed.results)
        errors = wl.merge_errors(timed.results)
        out = {"batch.records": accepted, "batch.rps": accepted / timed.wall,
               "batch.mbps": accepted * RECORD_BYTES / wl.MB / timed.wall, "batch.failed": sum(errors.values()),
               "batch.errors": errors}
        out.update(timed.figures("batch", accepted))
        return out
    finally:
        delete_delivery_stream(ctx.endpoint, name)


# ---------------------------------------------------------------------------------------------
# end to end

def end_to_end(endpoint: str, interval: int, samples: int, budget_s: float) -> dict:
    """One record at a time: send, poll the bucket until its object shows, delete the object."""
    name, bucket = create_delivery_stream(endpoint, f"e2e{interval}", interval)
    s3 = boto_client(endpoint, "s3")
    producer, watcher = firehose_client(endpoint), BucketWatcher(endpoint)
    body = client.dumps({"DeliveryStreamName": name, "Records": [{"Data": wl.payload(RECORD_BYTES)}]})
    try:
        latencies, missed = _put_to_object(lambda n: producer.raw("PutRecordBatch", body), watcher, s3, bucket,
                                           interval, samples, budget_s)
    finally:
        producer.close()
        watcher.close()
        delete_delivery_stream(endpoint, name)
    return _latency_figures(f"e2e{interval}", latencies, missed)


def _put_to_object(put: Callable[[int], Any], watcher: "BucketWatcher", s3: Any, bucket: str, interval: int,
                   samples: int, budget_s: float) -> tuple[list[float], int]:
    """Put one record (`put(n)`, n the sample number), then time until ListObjectsV2 shows its
    object; `samples` times, within `budget_s`. The latencies (sorted) and how many never came."""
    latencies, missed = [], 0
    stop_at = time.monotonic() + budget_s
    while len(latencies) + missed < samples and time.monotonic() < stop_at:
        t0 = time.monotonic()
        put(len(latencies) + missed)
        deadline = t0 + interval + 30
        while (key := watcher.first_key(bucket)) is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if key is None:
            missed += 1
            continue
        latencies.append(time.monotonic() - t0)
        s3.delete_object(Bucket=bucket, Key=key)
    return sorted(latencies), missed


def _latency_figures(prefix: str, latencies: list[float], missed: int) -> dict:
    ms = lambda q: None if not latencies else 1000 * wl.percentile(latencies, q)  # noqa: E731
    return {f"{prefix}.samples": len(latencies), f"{prefix}.missed": missed, f"{prefix}.p50_ms": ms(0.50),
            f"{prefix}.p99_ms": ms(0.99), f"{prefix}.max_ms": ms(1.0),
            f"{prefix}.samples_text": f"{len(latencies)} ({missed})"}


def kinesis_source_end_to_end(endpoint: str, interval: int, samples: int, budget_s: float,
                              shards: int = 4) -> dict:
    """As end_to_end, for a delivery stream reading a Kinesis stream of `shards` shards: the time
    from sending PutRecord (one 1 KiB record, a new partition key each time, so every shard takes
    some) until ListObjectsV2 shows the object holding it. kinesim only (moto's Firehose does not
    read Kinesis streams)."""
    kinesis, s3 = boto_client(endpoint, "kinesis"), boto_client(endpoint, "s3")
    stream = f"bench-ks-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=shards)
    kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150})
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    name, bucket = create_delivery_stream(endpoint, f"ks{interval}", interval, source_stream_arn=arn)
    producer, watcher = client.Client(endpoint), BucketWatcher(endpoint)

    def put(n: int) -> None:  # a new partition key each time: every shard takes some
        producer.raw("PutRecord", client.dumps({"StreamName": stream, "Data": wl.payload(RECORD_BYTES),
                                                "PartitionKey": f"k{n}"}))
    try:
        latencies, missed = _put_to_object(put, watcher, s3, bucket, interval, samples, budget_s)
    finally:
        producer.close()
        watcher.close()
        delete_delivery_stream(endpoint, name)
        kinesis.delete_stream(StreamName=stream)
    return _latency_figures(f"ks{interval}", latencies, missed)


# ---------------------------------------------------------------------------------------------
# the run

ROWS = [  # label, key, format, better ("hi": a ratio is printed, > 1 = kinesim better)
    ("PutRecordBatch records/s (500 x 1 KiB, 4 threads)", "batch.rps", "{:,.0f}", "hi"),
    ("PutRecordBatch MB/s", "batch.mbps", "{:.1f}", "hi"),
    ("server CPU s / 1k records", "batch.server_cpu_per_1k", "{:.3f}", None),
    ("server cores", "batch.server_cores", "{:.2f}", None),
    ("client cores", "batch.client_cores", "{:.2f}", None),
    ("failed records", "batch.failed", "{:,}", None),
    *[row for i in INTERVALS for row in (
        (f"put -> object p50 ms, IntervalInSeconds {i}", f"e2e{i}.p50_ms", "{:.1f}", None),
        (f"put -> object p99 ms, IntervalInSeconds {i}", f"e2e{i}.p99_ms", "{:.1f}", None),
        ("  samples (missed)", f"e2e{i}.samples_text", "{}", None))],
    ("Kinesis source: PutRecord -> object p50 ms, IntervalInSeconds 0", "ks0.p50_ms", "{:.1f}", None),
    ("Kinesis source: PutRecord -> object p99 ms, IntervalInSeconds 0", "ks0.p99_ms", "{:.1f}", None),
    ("  samples (missed)", "ks0.samples_text", "{}", None),
]


def table(figs: dict[str, dict], targets: list[str]) -> str:
    pairs = [(a, "moto") for a in targets if a != "moto" and "moto" in targets]
    return report.metrics_table(figs, targets, ROWS, pairs)


def bench_target(name: str, args: argparse.Namespace, work_dir: Path) -> dict:
    log(f"{name}: starting")
    server = Server(name, work_dir).start()
    log(f"{name}: ready on {server.endpoint} (pid {server.pid})")
    ctx = wl.Ctx(server=server, seconds=args.seconds, clients=args.clients, procs=1, log=log)
    figs: dict = {"endpoint": server.endpoint}
    try:
        if name != "moto" and args.kinesis_source:
            log(f"{name}: Kinesis source, PutRecord -> object, IntervalInSeconds 0, {args.samples} samples")
            figs.update(kinesis_source_end_to_end(server.endpoint, 0, args.samples, args.samples * 5.0))
        if args.only_kinesis_source:
            return figs
        log(f"{name}: PutRecordBatch, {args.clients} threads, {args.seconds:g} s")
        figs.update(throughput(ctx, args.warmup))
        for interval in INTERVALS:
            log(f"{name}: put -> object, IntervalInSeconds {interval}, {args.samples} samples")
            figs.update(end_to_end(server.endpoint, interval, args.samples, args.samples * (interval + 5.0)))
        return figs
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        log(f"{name}: FAILED: {type(e).__name__}: {e}")
        figs["error"] = f"{type(e).__name__}: {e}"
        if not server.alive():
            log(f"{name}: server died\n{server.log_tail()}")
        return figs
    finally:
        server.stop()
        log(f"{name}: stopped")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", default=None,
                   help="comma list out of " + ",".join(TARGETS) + " (default kinesim,moto; kinesim with --only-kinesis-source)")
    p.add_argument("--seconds", type=float, default=5.0, help="length of the timed PutRecordBatch run")
    p.add_argument("--samples", type=int, default=None,
                   help="put -> object samples per IntervalInSeconds (default 30, --quick 5)")
    p.add_argument("--clients", type=int, default=4, help="client threads of the PutRecordBatch run")
    p.add_argument("--warmup", type=float, default=None, help="untimed PutRecordBatch seconds (default 1, --quick 0.3)")
    p.add_argument("--http", choices=("raw", "stdlib"), default="raw", help="client HTTP implementation")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 s of PutRecordBatch, 5 samples")
    p.add_argument("--json", metavar="PATH", help="also save all figures as JSON")
    p.add_argument("--no-kinesis-source", dest="kinesis_source", action="store_false",
                   help="skip the Kinesis-source put -> object run (kinesim targets only)")
    p.add_argument("--only-kinesis-source", action="store_true",
                   help="only the Kinesis-source put -> object run (targets default to kinesim)")
    a = p.parse_args(argv)
    a.targets = a.targets or ("kinesim" if a.only_kinesis_source else "kinesim,moto")
    a.targets = choices(p, a.targets, TARGETS, "target")
    if a.quick:
        a.seconds = 1.0
    a.samples = a.samples or (5 if a.quick else 30)
    a.warmup = (0.3 if a.quick else 1.0) if a.warmup is None else a.warmup
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client.HTTP_IMPL = args.http  # before any client process is forked
    figs: dict[str, dict] = {}
    interrupted = in_work_dir("kinesim-bench-firehose-", lambda work_dir: figs.update(
        {t: bench_target(t, args, work_dir) for t in args.targets}) or 0, log)
    if interrupted:
        return interrupted
    print()
    print(f"Firehose benchmark: PutRecordBatch {args.seconds:g} s, {args.clients} client threads ({args.http} HTTP "
          f"client); put -> object {args.samples} samples per interval; {platform.node()} ({os.cpu_count()} cores)")
    print()
    print(table(figs, args.targets))
    if "moto" in args.targets:
        print("\nmoto writes one object per PutRecordBatch call, during the call, whatever the buffering hints say:"
              "\nits put -> object figures are the call's own time, not a buffered delivery.")
    for t in args.targets:
        if figs[t].get("error"):
            print(f"ERROR {t}: {figs[t]['error']}")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpus": os.cpu_count(),
                "python": platform.python_version(), "args": vars(args)}
        ratios = {f"{t}/moto": report.ratio(figs[t].get("batch.rps"), figs["moto"].get("batch.rps"))
                  for t in args.targets if t != "moto" and "moto" in figs}
        path.write_text(json.dumps({"meta": meta, "results": figs, "ratios": {"batch.rps": ratios}}, indent=1,
                                   default=str))
        log(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
