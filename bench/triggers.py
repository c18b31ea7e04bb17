"""The functions benchmark's other triggers: an S3 upload and an SQS message running a function.

Imported by bench/functions.py (workloads `s3` and `sqs`), which owns the servers, the clients and
the report. Each latency run is a steady producer with the send time in what it sends (the object
key, the message body); the handler takes its clock first thing and writes one
`index:milliseconds` pair per record to a file of its own, as the Kinesis latency handler does.

- s3: PutObject of a 100-byte object at `rate`/s into a bucket whose notification configuration
  names the function (invoked asynchronously, as AWS invokes it for S3 events).
- sqs: SendMessage at `rate`/s to a standard queue read by an event source mapping (BatchSize 10,
  no batching window: AWS's defaults).
- sqs throughput: `preload` messages sent in batches of 10 beforehand, then a mapping
  (BatchSize 100, 1 s window) and a no-op handler that counts; the time from CreateEventSourceMapping
  to the last invocation's end, and whether every message arrived once (and left the queue).
"""
from __future__ import annotations

import io
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import workloads as wl

HANDLER_MODULE = "trigger_handler"
HANDLER_SOURCE = '''\
import os
import time
import urllib.parse

_out = open(os.path.join(os.environ["BENCH_RESULTS_DIR"], f"{os.getpid()}.txt"), "a")


def _write(pairs):
    if pairs:
        _out.write(" ".join(pairs) + "\\n")
        _out.flush()


def s3(event, context):
    entered = time.time()
    pairs = []
    for record in event.get("Records", []):
        key = urllib.parse.unquote_plus(record["s3"]["object"]["key"])
        index, sent = key.rsplit("/", 1)[-1].split("_")[:2]
        pairs.append(f"{index}:{(entered - float(sent)) * 1000:.3f}")
    _write(pairs)


def sqs(event, context):
    entered = time.time()
    _write([f"{index}:{(entered - float(sent)) * 1000:.3f}"
            for index, sent in (r["body"].split()[:2] for r in event.get("Records", []))])


def count(event, context):
    _write([r["body"].split()[0] + ":0" for r in event.get("Records", [])])
'''


def function_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{HANDLER_MODULE}.py", HANDLER_SOURCE)
    return buf.getvalue()


def _tag() -> str:
    return uuid.uuid4().hex[:6]


def _steadily(rate: float, seconds: float, prefix: str, send: Callable[[str, float], None],
              sent_at: dict[str, float]) -> int:
    """Call send(index, time) at `rate`/s for `seconds`; behind schedule, the next call goes at
    once (no burst to catch up). Returns the number of failed sends."""
    interval, errors, n = 1.0 / rate, 0, 0
    next_t = time.monotonic()
    t_end = next_t + seconds
    while next_t < t_end:
        wl.sleep_until(next_t)
        index = f"{prefix}{n}"
        t_send = time.time()
        try:
            send(index, t_send)
            sent_at[index] = t_send
        except Exception:  # noqa: BLE001 - counted, the run goes on
            errors += 1
        n += 1
        next_t = max(next_t + interval, time.monotonic() - interval)
    return errors


def _latency_run(key: str, args, results, collect, send: Callable[[str, float], None], server) -> dict:
    """One second of warm-up sends (not counted), then the measured run; figures under `key`."""
    seen: dict[str, list[float]] = {}
    invocations: list[int] = []
    warm: dict[str, float] = {}
    _steadily(args.rate, 1.0, "w", send, warm)
    collect(results, seen, invocations, set(warm), timeout=60)
    if not set(warm) <= seen.keys():
        raise RuntimeError(f"warm-up: {len(set(warm) - seen.keys())} of {len(warm)} sends never reached the handler")
    seen.clear()
    invocations.clear()
    sent: dict[str, float] = {}
    cpu0, t0 = server.cpu_seconds(), time.monotonic()
    errors = _steadily(args.rate, args.seconds, "m", send, sent)
    wall = time.monotonic() - t0
    server_cpu = server.cpu_seconds() - cpu0
    collect(results, seen, invocations, set(sent), timeout=60)
    mine = [ms for index, ms in seen.items() if index in sent]
    lat = sorted(ms[0] for ms in mine)
    return {f"{key}.sent": len(sent), f"{key}.rate": len(sent) / wall, f"{key}.seen": len(lat),
            f"{key}.missing": len(sent) - len(lat), f"{key}.dups": sum(len(ms) - 1 for ms in mine),
            f"{key}.put_errors": errors, f"{key}.invocations": len(invocations),
            f"{key}.per_invocation": len(lat) / len(invocations) if invocations else None,
            f"{key}.p50": wl.percentile(lat, 0.50), f"{key}.p90": wl.percentile(lat, 0.90),
            f"{key}.p99": wl.percentile(lat, 0.99), f"{key}.max": lat[-1] if lat else None,
            f"{key}.server_cores": server_cpu / wall}


def s3_latency(target, args, work_dir: Path, results_cls, collect) -> dict:
    """PutObject -> handler start, through a bucket notification (keys `s3lat.*`)."""
    s3 = target.client("s3")
    function, bucket = f"bench-s3-{_tag()}", f"bench-s3-{_tag()}"
    results = results_cls(work_dir / function)
    target.create_function(function, "s3", results.dir, package=function_zip(), module=HANDLER_MODULE)
    try:
        target.prewarm(function)
        arn = target.lam.get_function(FunctionName=function)["Configuration"]["FunctionArn"]
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
            "LambdaFunctionConfigurations": [{"LambdaFunctionArn": arn, "Events": ["s3:ObjectCreated:*"]}]})
        body = b"x" * 100

        def send(index: str, t_send: float) -> None:
            s3.put_object(Bucket=bucket, Key=f"in/{index}_{t_send:.6f}", Body=body)

        return _latency_run("s3lat", args, results, collect, send, target.server)
    finally:
        target.drop(None, function)
        _empty_bucket(s3, bucket)


def sqs_latency(target, args, work_dir: Path, results_cls, collect) -> dict:
    """SendMessage -> handler start, through an event source mapping (keys `sqslat.*`)."""
    sqs = target.client("sqs")
    function, queue = f"bench-sqs-{_tag()}", f"bench-sqs-{_tag()}"
    results = results_cls(work_dir / function)
    target.create_function(function, "sqs", results.dir, package=function_zip(), module=HANDLER_MODULE)
    url, mapping = sqs.create_queue(QueueName=queue)["QueueUrl"], None
    try:
        target.prewarm(function)
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        mapping = target.lam.create_event_source_mapping(FunctionName=function, EventSourceArn=arn,
                                                         BatchSize=10)["UUID"]

        def send(index: str, t_send: float) -> None:
            sqs.send_message(QueueUrl=url, MessageBody=f"{index} {t_send:.6f}")

        return _latency_run("sqslat", args, results, collect, send, target.server)
    finally:
        target.drop(mapping, function)
        sqs.delete_queue(QueueUrl=url)


def sqs_throughput(target, args, work_dir: Path, results_cls, collect) -> dict:
    """Messages/s a no-op handler gets through from a preloaded queue (keys `sqsrate.*`)."""
    sqs = target.client("sqs")
    function, queue = f"bench-sqsrate-{_tag()}", f"bench-sqsrate-{_tag()}"
    results = results_cls(work_dir / function)
    total = max(1000, args.preload // 10)
    target.create_function(function, "count", results.dir, package=function_zip(), module=HANDLER_MODULE)
    url, mapping = sqs.create_queue(QueueName=queue)["QueueUrl"], None
    try:
        t0 = time.monotonic()

        def batch(start: int) -> None:
            entries = [{"Id": str(i), "MessageBody": f"p{start + i} 0"} for i in range(min(10, total - start))]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)

        with ThreadPoolExecutor(4) as ex:
            list(ex.map(batch, range(0, total, 10)))
        preload_s = time.monotonic() - t0
        target.prewarm(function)
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        cpu0, started = target.server.cpu_seconds(), time.monotonic()
        mapping = target.lam.create_event_source_mapping(FunctionName=function, EventSourceArn=arn, BatchSize=100,
                                                         MaximumBatchingWindowInSeconds=1)["UUID"]
        seen: dict[str, list[float]] = {}
        invocations: list[int] = []
        collect(results, seen, invocations, {f"p{i}" for i in range(total)}, timeout=300)
        wall = time.monotonic() - started
        server_cpu = target.server.cpu_seconds() - cpu0
        left = _queue_depth(sqs, url, settle_s=15)
        return {"sqsrate.sent": total, "sqsrate.preload_rps": total / preload_s, "sqsrate.delivered": len(seen),
                "sqsrate.dups": sum(len(v) - 1 for v in seen.values()), "sqsrate.left": left,
                "sqsrate.invocations": len(invocations), "sqsrate.seconds": wall,
                "sqsrate.rps": len(seen) / wall, "sqsrate.server_cores": server_cpu / wall}
    finally:
        target.drop(mapping, function)
        sqs.delete_queue(QueueUrl=url)


def _queue_depth(sqs, url: str, settle_s: float) -> int:
    """Messages still in the queue (visible or in flight), once the last deletes had time to land."""
    deadline = time.monotonic() + settle_s
    while True:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        depth = int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])
        if depth == 0 or time.monotonic() > deadline:
            return depth
        time.sleep(0.2)


def _empty_bucket(s3: Any, bucket: str) -> None:
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for i in range(0, len(keys), 1000):
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[i:i + 1000], "Quiet": True})
        s3.delete_bucket(Bucket=bucket)
    except Exception:  # noqa: BLE001 - cleanup of a temporary server's data
        pass


ROWS = [
    ("S3 put->handler p50 ms (bucket notification)", "s3lat.p50", "{:.2f}", "down"),
    ("S3 put->handler p99 ms (bucket notification)", "s3lat.p99", "{:.2f}", "down"),
    ("SQS send->handler p50 ms (mapping, BatchSize 10)", "sqslat.p50", "{:.2f}", "down"),
    ("SQS send->handler p99 ms (mapping, BatchSize 10)", "sqslat.p99", "{:.2f}", "down"),
    ("SQS mapping no-op handler messages/s", "sqsrate.rps", "{:,.0f}", "up"),
]
DETAIL_ROWS = [
    ("S3 latency: sent / seen / dups", "s3lat.counts", "{}"),
    ("S3 latency: invocations, records per invocation", "s3lat.inv", "{}"),
    ("SQS latency: sent / seen / dups", "sqslat.counts", "{}"),
    ("SQS latency: invocations, records per invocation", "sqslat.inv", "{}"),
    ("SQS throughput: sent / delivered / dups / left in queue", "sqsrate.check_text", "{}"),
    ("SQS throughput: delivered in s, invocations", "sqsrate.time_text", "{}"),
    ("SQS throughput: server cores (server + workers)", "sqsrate.server_cores", "{:.2f}"),
]
LATENCY_KEYS = ("s3lat", "sqslat")


def derive(fig: dict, out: dict, f) -> None:
    if "sqsrate.sent" in fig:
        out["sqsrate.check_text"] = (f"{fig['sqsrate.sent']:,} / {fig['sqsrate.delivered']:,} / "
                                     f"{fig['sqsrate.dups']:,} / {fig['sqsrate.left']:,}")
        out["sqsrate.time_text"] = f"{f(fig['sqsrate.seconds'])}, {fig['sqsrate.invocations']:,}"


def checks(name: str, k: dict, add) -> None:
    for key, label in (("s3lat", "S3 upload"), ("sqslat", "SQS message")):
        if f"{key}.sent" in k:
            add(f"{name} {label} latency run: every send ran the handler once", k[f"{key}.counts"],
                k[f"{key}.missing"] == 0 and k[f"{key}.dups"] == 0)
    if "sqsrate.sent" in k:
        add(f"{name} SQS throughput run: every message once, queue emptied", k["sqsrate.check_text"],
            k["sqsrate.delivered"] == k["sqsrate.sent"] and k["sqsrate.left"] == 0)

