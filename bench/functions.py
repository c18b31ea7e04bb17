#!/usr/bin/env python3
"""Benchmark kinesim's functions: a Python function fed by a Kinesis event source mapping, an S3
bucket notification or an SQS event source mapping.

    .venv/bin/python bench/functions.py                  # kinesim and moto, 10 s latency runs
    .venv/bin/python bench/functions.py --quick          # smoke run (~1 min)
    .venv/bin/python bench/functions.py --targets kinesim --workloads latency --json bench/results/fn.json

kinesim (durable, temp data dir) runs a 4-shard stream, a no-op Python function uploaded as a zip
with boto3's create_function and an event source mapping, and the script measures
put -> handler-start latency (BatchSize 100 and 1; the same workload again with a Node.js handler
on nodejs24.x, `--languages`) and the records/s a no-op handler gets through
(BatchSize 100, 4 shards, TRIM_HORIZON over a preloaded stream). The other triggers
(bench/triggers.py, workloads `s3` and `sqs`): S3 PutObject -> handler through a bucket
notification, SQS SendMessage -> handler through a mapping, and the messages/s a no-op handler
gets through from a preloaded queue. moto's server is probed for
whether it runs a function from a mapping at all (it needs Docker, which is not here) and timed on
the control-plane calls both implement. See bench/README.md, "Functions".

The handler reports what it saw by appending lines to a file of its own (one per worker process,
so no two processes write one file) in a directory named by the BENCH_RESULTS_DIR environment
variable; the script reads those files as they grow.
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import os
import platform
import sys
import tempfile
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

import client  # noqa: E402
import report  # noqa: E402
import triggers  # noqa: E402
import workloads as wl  # noqa: E402
from client import Client, KinesisError  # noqa: E402
from peers import Server, choices, in_work_dir, run_steps  # noqa: E402
from run import log  # noqa: E402

TARGETS = ("kinesim", "kinesim-mem", "moto")  # kinesim-mem (--in-memory): optional, for comparison
WORKLOADS = ("latency", "throughput", "s3", "sqs", "api")
LANGUAGES = ("python", "nodejs")  # the latency workload's handler: python3.12 or nodejs24.x
NODE_RUNTIME = "nodejs24.x"
REGION = "us-east-1"
KINESIM_ROLE = "arn:aws:iam::000000000000:role/bench-function-role"
LATENCY_TARGET_MS = 20.0
MOTO_NEEDS_DOCKER = "n/a: moto's Lambda needs Docker to run functions"
PREWARM = 4  # one warm worker per shard before a measurement: cold starts are not what is measured

# The function. `latency` takes time.time() first thing and writes, per invocation, one line of
# "index:milliseconds" pairs (entry time - the send time the producer put in the record);
# `count` writes "records shard first-sequence last-sequence done-time" per invocation.
HANDLER_MODULE = "bench_handler"
HANDLER_SOURCE = '''\
import base64
import os
import time

_out = open(os.path.join(os.environ["BENCH_RESULTS_DIR"], f"{os.getpid()}.txt"), "a")


def latency(event, context):
    entered = time.time()
    pairs = []
    for record in event["Records"]:
        index, sent = base64.b64decode(record["kinesis"]["data"]).split()[:2]
        pairs.append(f"{index.decode()}:{(entered - float(sent)) * 1000:.3f}")
    if pairs:
        _out.write(" ".join(pairs) + "\\n")
        _out.flush()


def count(event, context):
    records = event["Records"]
    if records:
        shard = records[0]["eventID"].rsplit(":", 1)[0]
        first, last = records[0]["kinesis"]["sequenceNumber"], records[-1]["kinesis"]["sequenceNumber"]
        _out.write(f"{len(records)} {shard} {first} {last} {time.time():.6f}\\n")
        _out.flush()
'''


# The same two handlers in Node.js (CommonJS), for the latency workload on nodejs24.x.
NODE_HANDLER_SOURCE = '''\
const fs = require('fs');
const path = require('path');

const out = fs.openSync(path.join(process.env.BENCH_RESULTS_DIR, `${process.pid}.txt`), 'a');

exports.latency = async (event) => {
  const entered = (performance.timeOrigin + performance.now()) / 1000;
  const pairs = event.Records.map((record) => {
    const [index, sent] = Buffer.from(record.kinesis.data, 'base64').toString().split(' ');
    return `${index}:${((entered - Number(sent)) * 1000).toFixed(3)}`;
  });
  if (pairs.length) fs.writeSync(out, pairs.join(' ') + '\\n');
};

exports.count = async (event) => {
  const records = event.Records;
  if (records.length) {
    const shard = records[0].eventID.slice(0, records[0].eventID.lastIndexOf(':'));
    const first = records[0].kinesis.sequenceNumber;
    const last = records[records.length - 1].kinesis.sequenceNumber;
    fs.writeSync(out, `${records.length} ${shard} ${first} ${last} ${(Date.now() / 1000).toFixed(6)}\\n`);
  }
};
'''


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", default="kinesim,moto", help="comma list out of " + ",".join(TARGETS)
                   + " (default kinesim,moto)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list out of " + ",".join(WORKLOADS))
    p.add_argument("--languages", default=",".join(LANGUAGES),
                   help="handlers of the latency workload, comma list out of " + ",".join(LANGUAGES))
    p.add_argument("--seconds", type=float, default=10.0, help="length of each latency run (default 10)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 2 s latency runs, 20k-record preload, 5 API rounds (figures are rough)")
    p.add_argument("--json", metavar="PATH", help="also save all figures as JSON")
    p.add_argument("--rate", type=float, default=200.0, help="records/s the latency producer puts (default 200)")
    p.add_argument("--preload", type=int, default=200_000, help="records preloaded for the throughput run")
    p.add_argument("--api-rounds", type=int, default=20, help="rounds of control-plane calls timed per target")
    a = p.parse_args(argv)
    a.targets = choices(p, a.targets, TARGETS, "target")
    a.workloads = choices(p, a.workloads, WORKLOADS, "workload")
    a.languages = choices(p, a.languages, LANGUAGES, "language")
    if a.quick:
        a.seconds, a.preload, a.api_rounds = min(a.seconds, 2.0), min(a.preload, 20_000), min(a.api_rounds, 5)
    return a


# ---------------------------------------------------------------------------------------------
# the function and its results

def function_zip(language: str = "python") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        if language == "nodejs":
            z.writestr(f"{HANDLER_MODULE}.js", NODE_HANDLER_SOURCE)
        else:
            z.writestr(f"{HANDLER_MODULE}.py", HANDLER_SOURCE)
    return buf.getvalue()


def node_missing() -> str | None:
    """Why the Node.js handler cannot run here (its Node.js is not installed), or None."""
    from kinesim.functions import runtimes  # the server runs from this same install
    return runtimes.check(NODE_RUNTIME)


class Results:
    """The lines the handler's worker processes appended to their files in one directory, read
    incrementally (complete lines only)."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.offsets: dict[Path, int] = {}

    def new_lines(self) -> list[str]:
        lines: list[str] = []
        for path in sorted(self.dir.glob("*.txt")):
            with open(path, "rb") as f:
                f.seek(self.offsets.get(path, 0))
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[path] = self.offsets.get(path, 0) + end
            lines.extend(data[:end].decode().splitlines())
        return lines


class Target:
    """A started server and the boto3 clients for it."""

    def __init__(self, server: Server):
        self.server, self.name, self.endpoint = server, server.name, server.endpoint
        self.kinesis = self.client("kinesis")
        self.lam = self.client("lambda")
        self.role = KINESIM_ROLE
        if self.name == "moto":  # moto's CreateFunction wants a role that exists in its IAM
            iam = self.client("iam")
            self.role = iam.create_role(RoleName="bench-function-role",
                                        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17"}))["Role"]["Arn"]

    def client(self, service: str):
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="test",
                            aws_secret_access_key="test",
                            config=Config(retries={"max_attempts": 1}, read_timeout=120))

    def create_function(self, name: str, handler: str, results: Path | None = None, package: bytes | None = None,
                        language: str = "python", module: str = HANDLER_MODULE):
        env = {"Variables": {"BENCH_RESULTS_DIR": str(results)}} if results else {"Variables": {}}
        runtime = NODE_RUNTIME if language == "nodejs" else "python3.12"
        return self.lam.create_function(FunctionName=name, Runtime=runtime, Role=self.role,
                                        Handler=f"{module}.{handler}", Environment=env,
                                        Code={"ZipFile": package or function_zip(language)})

    def prewarm(self, name: str, n: int = PREWARM) -> None:
        """n overlapping invocations with no records: n warm workers for the pollers to use."""
        def once(_):
            out = self.lam.invoke(FunctionName=name, Payload=b'{"Records": []}')
            if out.get("FunctionError"):
                raise RuntimeError(f"warm-up invocation failed: {out['Payload'].read()[:300]!r}")
        with ThreadPoolExecutor(n) as ex:
            list(ex.map(once, range(n)))

    def stream_arn(self, stream: str) -> str:
        return self.kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]

    def drop(self, mapping_uuid: str | None, function: str | None) -> None:
        """Delete a mapping and a function, either may be None (errors are logged: it is cleanup)."""
        calls = []
        if mapping_uuid:
            calls.append(lambda: self.lam.delete_event_source_mapping(UUID=mapping_uuid))
        if function:
            calls.append(lambda: self.lam.delete_function(FunctionName=function))
        for call in calls:
            try:
                call()
            except Exception as e:  # noqa: BLE001 - keep cleaning up
                log(f"    cleanup: {type(e).__name__}: {e}")


def _ctx(target: Target, args: argparse.Namespace) -> wl.Ctx:
    return wl.Ctx(server=target.server, seconds=args.seconds, preload=args.preload, log=log)


def _tag() -> str:
    return uuid.uuid4().hex[:6]


# ---------------------------------------------------------------------------------------------
# put -> handler-start latency

def produce_steadily(endpoint: str, stream: str, rate: float, seconds: float, prefix: str,
                     sent_at: dict[str, float]) -> int:
    """PutRecord one record at a time at `rate`/s for `seconds`, partition keys spread over the
    shards; each record carries its index and time.time() at sending. Behind schedule, the next
    record goes at once (no burst to catch up). Returns the number of failed puts."""
    c = Client(endpoint)
    c.call("DescribeStreamSummary", {"StreamName": stream})  # connected before the first timed put
    interval, errors, n = 1.0 / rate, 0, 0
    pad = "x" * 60
    next_t = time.monotonic()
    t_end = next_t + seconds
    try:
        while next_t < t_end:
            wl.sleep_until(next_t)
            index = f"{prefix}{n}"
            t_send = time.time()
            data = base64.b64encode(f"{index} {t_send:.6f} {pad}".encode()).decode()
            try:
                c.call("PutRecord", {"StreamName": stream, "Data": data, "PartitionKey": index})
                sent_at[index] = t_send
            except (KinesisError, OSError):
                errors += 1
            n += 1
            next_t = max(next_t + interval, time.monotonic() - interval)
    finally:
        c.close()
    return errors


def collect_latencies(results: Results, seen: dict[str, list[float]], invocations: list[int],
                      want: set[str], timeout: float) -> None:
    """Read the handler's lines until every index in `want` was seen (or `timeout` s passed)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in results.new_lines():
            pairs = line.split()
            invocations.append(len(pairs))
            for pair in pairs:
                index, ms = pair.rsplit(":", 1)
                seen.setdefault(index, []).append(float(ms))
        if want <= seen.keys() or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def latency_workload(target: Target, args: argparse.Namespace, work_dir: Path, batch_size: int,
                     language: str = "python") -> dict:
    """A steady producer (args.rate PutRecord/s, args.seconds) on a 4-shard stream with a mapping
    (BatchSize `batch_size`, LATEST); the handler's clock at entry - each record's send time.
    One second of warm-up records goes first and is not counted. Keys: lat<batch>.* for the Python
    handler, nodelat<batch>.* for the Node.js one."""
    key = f"{'node' if language == 'nodejs' else ''}lat{batch_size}"
    ctx = _ctx(target, args)
    stream, _ = wl.create_stream(ctx, f"fn-{key}")
    function, mapping = f"bench-{key}-{_tag()}", None
    results = Results(work_dir / function)
    try:
        target.create_function(function, "latency", results.dir, language=language)
        target.prewarm(function)
        mapping = target.lam.create_event_source_mapping(
            FunctionName=function, EventSourceArn=target.stream_arn(stream), StartingPosition="LATEST",
            BatchSize=batch_size)["UUID"]
        seen: dict[str, list[float]] = {}
        invocations: list[int] = []
        warm: dict[str, float] = {}
        produce_steadily(target.endpoint, stream, args.rate, 1.0, "w", warm)
        collect_latencies(results, seen, invocations, set(warm), timeout=30)
        if not set(warm) <= seen.keys():
            raise RuntimeError(f"warm-up: {len(set(warm) - seen.keys())} of {len(warm)} records never reached "
                               f"the handler; mapping: {target.lam.get_event_source_mapping(UUID=mapping)}")
        seen.clear()
        invocations.clear()
        sent: dict[str, float] = {}
        cpu0, t0 = target.server.cpu_seconds(), time.monotonic()
        put_errors = produce_steadily(target.endpoint, stream, args.rate, args.seconds, "m", sent)
        wall = time.monotonic() - t0
        server_cpu = target.server.cpu_seconds() - cpu0
        collect_latencies(results, seen, invocations, set(sent), timeout=30)
        mine = [ms for index, ms in seen.items() if index in sent]  # not a late warm-up record
        lat = sorted(ms[0] for ms in mine)
        got = len(lat)
        return {f"{key}.sent": len(sent), f"{key}.rate": len(sent) / wall, f"{key}.seen": got,
                f"{key}.missing": len(sent) - got, f"{key}.dups": sum(len(ms) - 1 for ms in mine),
                f"{key}.put_errors": put_errors, f"{key}.invocations": len(invocations),
                f"{key}.per_invocation": got / len(invocations) if invocations else None,
                f"{key}.p50": wl.percentile(lat, 0.50), f"{key}.p90": wl.percentile(lat, 0.90),
                f"{key}.p99": wl.percentile(lat, 0.99), f"{key}.max": lat[-1] if lat else None,
                f"{key}.server_cores": server_cpu / wall}
    finally:
        target.drop(mapping, function)
        wl.delete_stream(ctx, stream)


# ---------------------------------------------------------------------------------------------
# records/s through a no-op handler

def throughput_workload(target: Target, args: argparse.Namespace, work_dir: Path, batch_size: int = 100) -> dict:
    """Preload args.preload records (PutRecords 500 x 100 B, 4 connections), then create the
    mapping at TRIM_HORIZON and time until the handler has counted every record: from just before
    CreateEventSourceMapping to the end of the last invocation (the handler's own clock)."""
    ctx = _ctx(target, args)
    stream, shards = wl.create_stream(ctx, "fn-rate")
    function, mapping = f"bench-rate-{_tag()}", None
    results = Results(work_dir / function)
    try:
        quota = -(-args.preload // ctx.clients)
        t_end = time.monotonic() + 0.5 + 120
        load = wl.Timed(ctx, wl.putn_worker, [(ctx.endpoint, stream, w, 100, 500, t_end, quota)
                                              for w in range(ctx.clients)])
        acks = wl.merge_acks(load.results)
        loaded = sum(map(len, acks.values()))
        log(f"    preloaded {loaded:,} records in {load.wall:.1f}s")
        target.create_function(function, "count", results.dir)
        target.prewarm(function)
        arn = target.stream_arn(stream)
        cpu0, t0 = target.server.cpu_seconds(), time.time()
        mapping = target.lam.create_event_source_mapping(
            FunctionName=function, EventSourceArn=arn, StartingPosition="TRIM_HORIZON", BatchSize=batch_size)["UUID"]
        batches: list[tuple[int, str, int, int, float]] = []
        delivered, last_progress = 0, time.monotonic()
        while delivered < loaded and time.monotonic() - last_progress < 30:
            got = read_counts(results, batches)
            if got:
                delivered += got
                last_progress = time.monotonic()
            else:
                time.sleep(0.02)
        server_cpu = target.server.cpu_seconds() - cpu0
        time.sleep(0.5)  # a batch delivered twice would show up now
        delivered += read_counts(results, batches)
        wall = max(b[4] for b in batches) - t0 if batches else None
        out = {"rate.preloaded": loaded, "rate.preload_rps": loaded / load.wall, "rate.delivered": delivered,
               "rate.invocations": len(batches), "rate.seconds": wall,
               "rate.rps": delivered / wall if wall else None,
               "rate.ips": len(batches) / wall if wall else None,
               "rate.per_invocation": delivered / len(batches) if batches else None,
               "rate.server_cores": server_cpu / wall if wall else None,
               "rate.server_cpu_per_1k": 1000 * server_cpu / delivered if delivered else None}
        out.update(check_delivery(batches, acks, shards))
        return out
    finally:
        target.drop(mapping, function)
        wl.delete_stream(ctx, stream)


def read_counts(results: Results, batches: list[tuple[int, str, int, int, float]]) -> int:
    """Add the count handler's new lines to `batches`; returns the records they hold."""
    added = 0
    for line in results.new_lines():
        n, shard, first, last, done = line.split()
        batches.append((int(n), shard, int(first), int(last), float(done)))
        added += int(n)
    return added


def check_delivery(batches: list[tuple[int, str, int, int, float]], acks: dict[str, list[str]],
                   shards: list[dict]) -> dict:
    """Per shard: the records delivered against those acknowledged, and whether the batches
    followed each other in sequence-number order without overlapping (a repeated batch overlaps)."""
    missing = extra = disorder = 0
    for shard in (s["ShardId"] for s in shards):
        mine = sorted((b for b in batches if b[1] == shard), key=lambda b: b[4])  # in delivery order
        count = sum(b[0] for b in mine)
        acked = len(acks.get(shard, ()))
        missing += max(0, acked - count)
        extra += max(0, count - acked)
        disorder += sum(1 for a, b in zip(mine, mine[1:]) if b[2] <= a[3])
    return {"rate.check.missing": missing, "rate.check.extra": extra, "rate.check.disorder": disorder}


# ---------------------------------------------------------------------------------------------
# control-plane calls, and whether a mapping runs the function at all

def _ms(fn, *a, **kw) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*a, **kw)
    return (time.perf_counter() - t) * 1000, out


def api_workload(target: Target, args: argparse.Namespace) -> dict:
    """args.api_rounds rounds of CreateFunction (the bench's zip), CreateEventSourceMapping (a
    1-shard stream, LATEST), GetEventSourceMapping, DeleteEventSourceMapping, DeleteFunction, each
    through boto3 (the same client overhead for both targets); plus, where functions run, warm
    RequestResponse Invokes of the no-op handler with an empty event."""
    ctx = _ctx(target, args)
    stream, _ = wl.create_stream(ctx, "fn-api")
    arn = target.stream_arn(stream)
    package = function_zip()
    times: dict[str, list[float]] = {k: [] for k in ("create_function", "create_mapping", "get_mapping",
                                                      "delete_mapping", "delete_function", "invoke")}
    results_dir = Path(tempfile.mkdtemp(prefix="fn-api-", dir=ctx.server.dir))
    try:
        for _ in range(args.api_rounds):
            name = f"bench-api-{_tag()}"
            ms, _out = _ms(target.create_function, name, "count", results_dir, package)
            times["create_function"].append(ms)
            ms, m = _ms(target.lam.create_event_source_mapping, FunctionName=name, EventSourceArn=arn,
                        StartingPosition="LATEST", BatchSize=100)
            times["create_mapping"].append(ms)
            times["get_mapping"].append(_ms(target.lam.get_event_source_mapping, UUID=m["UUID"])[0])
            times["delete_mapping"].append(_ms(target.lam.delete_event_source_mapping, UUID=m["UUID"])[0])
            times["delete_function"].append(_ms(target.lam.delete_function, FunctionName=name)[0])
        if target.name != "moto":  # moto's Invoke does not run the function here (see the probe)
            name = f"bench-api-{_tag()}"
            target.create_function(name, "count", results_dir, package)
            event = json.dumps({"Records": []}).encode()
            try:
                target.lam.invoke(FunctionName=name, Payload=event)  # the cold start, not counted
                for _ in range(max(args.api_rounds, 20)):
                    times["invoke"].append(_ms(target.lam.invoke, FunctionName=name, Payload=event)[0])
            finally:
                target.drop(None, name)
    finally:
        wl.delete_stream(ctx, stream)
    out = {}
    for op, values in times.items():
        values.sort()
        out[f"api.{op}.p50"] = wl.percentile(values, 0.5)
        out[f"api.{op}.p90"] = wl.percentile(values, 0.9)
    return out


def moto_probe(target: Target, work_dir: Path) -> dict:
    """Does moto's server run a Python function from a Kinesis mapping? A handler that writes a
    marker file, a mapping, one PutRecord, then up to 5 s for the marker, or for moto to log that
    it could not start the Docker container it runs functions in."""
    ctx = wl.Ctx(server=target.server, seconds=1, log=log)
    stream, _ = wl.create_stream(ctx, "fn-probe")
    marker_dir = Path(tempfile.mkdtemp(prefix="probe-", dir=work_dir))
    name, mapping = f"bench-probe-{_tag()}", None
    try:
        target.create_function(name, "count", marker_dir)
        mapping = target.lam.create_event_source_mapping(FunctionName=name, EventSourceArn=target.stream_arn(stream),
                                                         StartingPosition="LATEST", BatchSize=1)["UUID"]
        log_start = target.server.log_path.stat().st_size
        target.kinesis.put_record(StreamName=stream, Data=b"0 0", PartitionKey="probe")
        deadline = time.monotonic() + 5
        ran, evidence = False, ""
        while time.monotonic() < deadline and not ran and not evidence:
            time.sleep(0.1)
            ran = any(marker_dir.glob("*.txt"))
            with open(target.server.log_path, "rb") as f:
                f.seek(log_start)
                evidence = next((line.strip() for line in f.read().decode(errors="replace").splitlines()
                                 if "error running docker" in line), "")
    finally:
        target.drop(mapping, name)
        wl.delete_stream(ctx, stream)
    return {"probe.ran": ran, "probe.evidence": (evidence[:100] + " ...") if len(evidence) > 100 else evidence or "-"}


# ---------------------------------------------------------------------------------------------
# running and reporting

def bench_target(name: str, args: argparse.Namespace, work_dir: Path) -> dict:
    log(f"{name}: starting")
    server = Server(name, work_dir).start()
    log(f"{name}: ready on {server.endpoint} (pid {server.pid})")
    steps = []
    if name == "moto":
        steps.append(("probe", lambda t: moto_probe(t, work_dir)))
    else:
        if "latency" in args.workloads and "python" in args.languages:
            steps += [("latency BatchSize 100", lambda t: latency_workload(t, args, work_dir, 100)),
                      ("latency BatchSize 1", lambda t: latency_workload(t, args, work_dir, 1))]
        if "latency" in args.workloads and "nodejs" in args.languages:
            missing = node_missing()
            if missing:
                log(f"{name}: no Node.js latency runs: {missing}")
            else:
                steps += [("latency BatchSize 100, Node.js", lambda t: latency_workload(t, args, work_dir, 100, "nodejs")),
                          ("latency BatchSize 1, Node.js", lambda t: latency_workload(t, args, work_dir, 1, "nodejs"))]
        if "throughput" in args.workloads:
            steps.append(("throughput", lambda t: throughput_workload(t, args, work_dir)))
        if "s3" in args.workloads:
            steps.append(("S3 upload latency", lambda t: triggers.s3_latency(t, args, work_dir, Results,
                                                                              collect_latencies)))
        if "sqs" in args.workloads:
            steps += [("SQS message latency", lambda t: triggers.sqs_latency(t, args, work_dir, Results,
                                                                             collect_latencies)),
                      ("SQS throughput", lambda t: triggers.sqs_throughput(t, args, work_dir, Results,
                                                                           collect_latencies))]
    if "api" in args.workloads:
        steps.append(("api", lambda t: api_workload(t, args)))
    try:
        target = Target(server)
    except BaseException:
        server.stop()
        raise
    return run_steps(name, server, [(label, lambda step=step: step(target)) for label, step in steps], log)


# (label, key, format, ratio: "up" = higher is better, "down" = lower is better, None = no ratio)
ROWS = [
    ("functions run from a Kinesis mapping", "runs", "{}", None),
    ("put->handler p50 ms, BatchSize 100", "lat100.p50", "{:.2f}", "down"),
    ("put->handler p90 ms, BatchSize 100", "lat100.p90", "{:.2f}", "down"),
    ("put->handler p99 ms, BatchSize 100", "lat100.p99", "{:.2f}", "down"),
    ("put->handler p50 ms, BatchSize 1", "lat1.p50", "{:.2f}", "down"),
    ("put->handler p90 ms, BatchSize 1", "lat1.p90", "{:.2f}", "down"),
    ("put->handler p99 ms, BatchSize 1", "lat1.p99", "{:.2f}", "down"),
    ("put->handler p50 ms, BatchSize 100, Node.js", "nodelat100.p50", "{:.2f}", "down"),
    ("put->handler p90 ms, BatchSize 100, Node.js", "nodelat100.p90", "{:.2f}", "down"),
    ("put->handler p99 ms, BatchSize 100, Node.js", "nodelat100.p99", "{:.2f}", "down"),
    ("put->handler p50 ms, BatchSize 1, Node.js", "nodelat1.p50", "{:.2f}", "down"),
    ("put->handler p90 ms, BatchSize 1, Node.js", "nodelat1.p90", "{:.2f}", "down"),
    ("put->handler p99 ms, BatchSize 1, Node.js", "nodelat1.p99", "{:.2f}", "down"),
    ("no-op handler records/s (BatchSize 100, 4 shards)", "rate.rps", "{:,.0f}", "up"),
    ("no-op handler invocations/s", "rate.ips", "{:,.0f}", "up"),
    *triggers.ROWS,
    ("CreateFunction p50 ms", "api.create_function.p50", "{:.2f}", "down"),
    ("CreateEventSourceMapping p50 ms", "api.create_mapping.p50", "{:.2f}", "down"),
    ("GetEventSourceMapping p50 ms", "api.get_mapping.p50", "{:.2f}", "down"),
    ("DeleteEventSourceMapping p50 ms", "api.delete_mapping.p50", "{:.2f}", "down"),
    ("DeleteFunction p50 ms", "api.delete_function.p50", "{:.2f}", "down"),
    ("Invoke (warm, no-op) p50 ms", "api.invoke.p50", "{:.2f}", "down"),
]
DETAIL_ROWS = [
    ("latency BatchSize 100: sent / seen / dups", "lat100.counts", "{}"),
    ("latency BatchSize 100: put rate /s, p90 / max ms", "lat100.rate_max", "{}"),
    ("latency BatchSize 100: invocations, records per invocation", "lat100.inv", "{}"),
    ("latency BatchSize 100: server cores", "lat100.server_cores", "{:.2f}"),
    ("latency BatchSize 1: sent / seen / dups", "lat1.counts", "{}"),
    ("latency BatchSize 1: put rate /s, p90 / max ms", "lat1.rate_max", "{}"),
    ("latency BatchSize 1: invocations, records per invocation", "lat1.inv", "{}"),
    ("latency BatchSize 1: server cores", "lat1.server_cores", "{:.2f}"),
    ("Node.js latency BatchSize 100: sent / seen / dups", "nodelat100.counts", "{}"),
    ("Node.js latency BatchSize 100: invocations, records per invocation", "nodelat100.inv", "{}"),
    ("Node.js latency BatchSize 1: sent / seen / dups", "nodelat1.counts", "{}"),
    ("Node.js latency BatchSize 1: invocations, records per invocation", "nodelat1.inv", "{}"),
    ("throughput: preloaded records (PutRecords records/s)", "rate.preload_text", "{}"),
    ("throughput: delivered in s", "rate.seconds", "{:.2f}"),
    ("throughput: invocations, records per invocation", "rate.inv", "{}"),
    ("throughput: server cores (server + workers)", "rate.server_cores", "{:.2f}"),
    ("throughput: server CPU s per 1k records", "rate.server_cpu_per_1k", "{:.3f}"),
    ("throughput: missing / extra / out-of-order batches", "rate.check_text", "{}"),
    *triggers.DETAIL_ROWS,
    ("API p90 ms: CreateFunction / CreateEventSourceMapping", "api.p90_create", "{}"),
    ("API p90 ms: Get / Delete mapping / DeleteFunction", "api.p90_rest", "{}"),
    ("moto probe: what its server logged", "probe.evidence", "{}"),
]


def derive(name: str, fig: dict) -> dict:
    """The combined cells of the tables, and n/a for what a target cannot do."""
    out = dict(fig)
    f = lambda v, fmt="{:.2f}": report.fmt_value(v, fmt)  # noqa: E731
    if name == "moto":
        out["runs"] = "yes" if fig.get("probe.ran") else MOTO_NEEDS_DOCKER if "probe.ran" in fig else None
        for label, key, _, _ in ROWS:
            if key.startswith(("lat", "nodelat", "rate.", "s3lat", "sqslat", "sqsrate")) or key == "api.invoke.p50":
                out[key] = "n/a"
    else:
        out["runs"] = "yes" if fig.get("lat100.seen") or fig.get("rate.delivered") or fig.get("api.invoke.p50") \
            else None
    for k in ("lat100", "lat1", "nodelat100", "nodelat1", *triggers.LATENCY_KEYS):
        if f"{k}.sent" in fig:
            out[f"{k}.counts"] = f"{fig[f'{k}.sent']:,} / {fig[f'{k}.seen']:,} / {fig[f'{k}.dups']:,}"
            out[f"{k}.rate_max"] = f"{fig[f'{k}.rate']:.0f}, {f(fig[f'{k}.p90'])} / {f(fig[f'{k}.max'])}"
            out[f"{k}.inv"] = f"{fig[f'{k}.invocations']:,}, {f(fig[f'{k}.per_invocation'])}"
    if "rate.preloaded" in fig:
        out["rate.preload_text"] = f"{fig['rate.preloaded']:,} ({fig['rate.preload_rps']:,.0f}/s)"
        out["rate.inv"] = f"{fig['rate.invocations']:,}, {f(fig['rate.per_invocation'], '{:.1f}')}"
        out["rate.check_text"] = (f"{fig['rate.check.missing']:,} / {fig['rate.check.extra']:,} / "
                                  f"{fig['rate.check.disorder']:,}")
    triggers.derive(fig, out, f)
    if "api.create_function.p90" in fig:
        out["api.p90_create"] = f"{f(fig['api.create_function.p90'])} / {f(fig['api.create_mapping.p90'])}"
        out["api.p90_rest"] = (f"{f(fig['api.get_mapping.p90'])} / {f(fig['api.delete_mapping.p90'])} / "
                               f"{f(fig['api.delete_function.p90'])}")
    return out


RATIOS = [("kinesim", "moto"), ("kinesim", "kinesim-mem")]


def _ratios(figs: dict[str, dict]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in RATIOS if a in figs and b in figs]


def main_table(figs: dict[str, dict], targets: list[str]) -> str:
    return report.metrics_table(figs, targets, ROWS, _ratios(figs), skip_empty=True)


def detail_table(figs: dict[str, dict], targets: list[str]) -> str:
    rows = [[label] + [report.fmt_value(figs[t].get(key), fmt) for t in targets] for label, key, fmt in DETAIL_ROWS]
    return report.text_table(["detail"] + targets, [r for r in rows if any(c != "-" for c in r[1:])])


def checks(figs: dict[str, dict]) -> list[dict]:
    out = []

    def add(label, value, ok):
        out.append({"check": label, "value": value, "result": "n/a" if ok is None else "PASS" if ok else "MISS"})

    for t in (t for t in ("kinesim", "kinesim-mem") if t in figs):
        k = figs[t]
        for prefix, language in (("lat", ""), ("nodelat", ", Node.js")):
            for batch in (100, 1):
                p50 = k.get(f"{prefix}{batch}.p50")
                if p50 is None and prefix == "nodelat":
                    continue
                add(f"{t} put->handler p50 <= {LATENCY_TARGET_MS:g} ms (BatchSize {batch}{language})",
                    report.fmt_value(p50, "{:.2f} ms"), None if p50 is None else p50 <= LATENCY_TARGET_MS)
            for batch in (100, 1):
                if f"{prefix}{batch}.sent" in k:
                    add(f"{t} latency run (BatchSize {batch}{language}): every record once",
                        k[f"{prefix}{batch}.counts"],
                        k[f"{prefix}{batch}.missing"] == 0 and k[f"{prefix}{batch}.dups"] == 0)
        triggers.checks(t, k, add)
        if "rate.delivered" in k:
            add(f"{t} throughput run: every record once, in order",
                k["rate.check_text"] + " missing/extra/disorder",
                k["rate.check.missing"] == 0 and k["rate.check.extra"] == 0 and k["rate.check.disorder"] == 0)
    if "moto" in figs:
        m = figs["moto"]
        add("moto runs a Python function from a Kinesis mapping (no Docker here)",
            "yes" if m.get("probe.ran") else MOTO_NEEDS_DOCKER if "probe.ran" in m else "-", None)
    return out


def save_json(args: argparse.Namespace, figs: dict, check_rows: list[dict]) -> None:
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    ratios = {f"{a}/{b}": {key: report.ratio(figs[a].get(key), figs[b].get(key)) for _, key, _, better in ROWS
                           if better} for a, b in _ratios(figs)}
    meta = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "args": vars(args)}
    path.write_text(json.dumps({"meta": meta, "results": figs, "ratios": ratios, "checks": check_rows},
                               indent=1, default=str))
    log(f"saved {path}")


def run_benchmark(args: argparse.Namespace, work_dir: Path) -> int:
    figs = {t: derive(t, bench_target(t, args, work_dir)) for t in args.targets}
    check_rows = checks(figs)
    print()
    print(f"kinesim functions benchmark: latency runs {args.seconds:g} s at {args.rate:g} PutRecord/s, "
          f"throughput over {args.preload:,} preloaded records, {args.api_rounds} API rounds, 4-shard streams, "
          f"{platform.node()} ({os.cpu_count()} cores)")
    print()
    print(main_table(figs, args.targets))
    print()
    print(report.checks_table(check_rows))
    print()
    print(detail_table(figs, args.targets))
    for t in args.targets:
        for e in figs[t].get("error", []):
            print(f"ERROR {t}: {e}")
    if args.json:
        save_json(args, figs, check_rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client.HTTP_IMPL = "raw"  # the lean socket client for the producers (see README.md)
    return in_work_dir("kinesim-fnbench-", lambda work_dir: run_benchmark(args, work_dir), log)


if __name__ == "__main__":
    sys.exit(main())
