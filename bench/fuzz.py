#!/usr/bin/env python3
"""A long fuzzing run against kinesim: random requests for every operation of Kinesis, Firehose,
Lambda, S3, SNS, SQS, CloudWatch Logs, CloudFormation, STS, SSM, ECR and IAM, generated from botocore's
models (tests/fuzzing.py), until a time or count limit.

    .venv/bin/python bench/fuzz.py --seconds 600                 # ten minutes against a fresh server
    .venv/bin/python bench/fuzz.py --requests 100000 --seed 7
    .venv/bin/python bench/fuzz.py --services sqs --seconds 120  # one service: whose memory grows?
    .venv/bin/python bench/fuzz.py --url http://127.0.0.1:4566 --pid PID  # a running server (no tracebacks)
    .venv/bin/python bench/fuzz.py --replay /tmp/kinesim-fuzz-XXXX/failure-0001.json --url URL

It starts its own server (durable, temp data dir, SubscribeToShard lasting 1 s instead of 5 min so
that one the fuzzer gets right does not hold the run) with its log in a file, creates streams, a
delivery stream, a bucket, a function, queues, a topic, a log group, stacks, an SSM parameter and an
ECR repository for fuzzed names to hit (again every --refresh requests, since fuzzed deletions
remove them), and sends one request at a time on one connection: the same seed gives the same
requests. It prints the requests sent per service, the status histogram, and every failure (a 5xx
other than 501 "not implemented" and the one 500 Kinesis itself gives, no answer, a 2xx to what AWS
refuses, an answer of the query protocol that is no XML document) grouped by operation, case and
exception, with a reproducer: the request, the server's traceback, and a JSON file that `--replay`
sends again. At the end it checks that the server still answers and still holds a record
acknowledged before the run.

Memory: the resident set (RSS) of the server process and its children (function workers), read
from /proc, once the resources exist and a warm-up (the sweep of tests/test_fuzz.py: every value
of the catalogue once, for every operation) has loaded what the server loads lazily and raised the
allocators' high-water marks with the largest requests; then every 10,000 requests and at the
end. A server that keeps something per request grows with the run; one that does not stays level
after the warm-up.
With --url the server's process is not known: give it with --pid, else memory is not measured.

Exit status 1 when any request failed, the server was harmed, or its memory at the end is more
than --max-growth (25%) above the start; else 0.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The fuzzer lives with the tests; and bench/ itself must leave the path: bench/firehose.py would
# shadow the firehose package that the server imports.
sys.path[0:1] = [str(ROOT / "tests"), str(ROOT)]

from fuzz_wire import Connection, Outcome, Request, is_failure  # noqa: E402
from fuzzing import (MEMORY_LIMIT, SERVICES, STACK_LIMIT, TRACEBACK, Fuzzer, LoggedServer, LogReader,  # noqa: E402
                     client, create_resources)

from kinesim.config import Settings  # noqa: E402
from kinesim.server import free_port  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="stop after this long (default 60)")
    p.add_argument("--requests", type=int, default=0,
                   help="stop after this many requests, the warm-up's included (default: no limit)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--services", default=",".join(SERVICES), help="comma list out of " + ",".join(SERVICES))
    p.add_argument("--url", help="fuzz a running server instead of starting one (its tracebacks are not read)")
    p.add_argument("--refresh", type=int, default=5000, help="re-create the real resources every N requests")
    p.add_argument("--out", help="directory for the failures' replay files (default: a new temp dir)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for an answer (default 60)")
    p.add_argument("--replay", nargs="+", metavar="FILE", help="send saved failures again (needs --url)")
    p.add_argument("--pid", type=int, help="with --url: the server's process id, to measure its memory")
    p.add_argument("--max-growth", type=float, default=0.25,
                   help="fail when the server's memory grows more than this fraction over the run (default 0.25)")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="measure the starting memory right after creating the resources")
    args = p.parse_args(argv)
    args.services = tuple(s.strip() for s in args.services.split(",") if s.strip())
    if unknown := set(args.services) - set(SERVICES):
        p.error(f"unknown services {sorted(unknown)}")
    if args.replay and not args.url:
        p.error("--replay needs --url")
    return args


def replay(args: argparse.Namespace) -> int:
    create_resources(args.url)  # the names the saved requests use (a consumer's ARN will differ)
    conn = Connection(args.url, args.timeout)
    for path in args.replay:
        req = Request.from_dict(json.loads(Path(path).read_text())["request"])
        outcome = conn.send(req)
        print(f"{path}: {outcome.status} {outcome.excerpt(500)}\n  {req.describe(300)}")
    return 0


class Run:
    """The figures of one run, and the failures with their reproducers."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.sent: collections.Counter[str] = collections.Counter()
        self.statuses: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.groups: dict[tuple, list[dict]] = collections.defaultdict(list)
        self.unattributed: list[str] = []  # tracebacks logged after a request that was answered well

    def record(self, index: int, req: Request, outcome: Outcome, log_text: str) -> None:
        self.sent[req.service] += 1
        self.statuses[req.service][outcome.status if outcome.status is not None else "no answer"] += 1
        tracebacks = TRACEBACK.findall(log_text)
        if not is_failure(req, outcome):
            self.unattributed += tracebacks
            return
        exception = tracebacks[-1] if tracebacks else outcome.error or "(no traceback in the log)"
        key = (req.service, req.operation, re.sub(r"/(json|cbor|xml)$", "", req.case)[:60], outcome.status, exception)
        path = self.out_dir / f"failure-{index:07d}.json"
        path.write_text(json.dumps({"request": req.to_dict(), "status": outcome.status,
                                    "answer": outcome.excerpt(2000), "server_log": log_text[-20000:]}, indent=1))
        self.groups[key].append({"request": req, "outcome": outcome, "log": log_text, "file": path})

    def failures(self) -> int:
        return sum(len(v) for v in self.groups.values())

    def print_report(self, elapsed: float, seed: int) -> None:
        total = sum(self.sent.values())
        print(f"\n{total} requests in {elapsed:.0f} s ({total / max(elapsed, 1e-9):.0f}/s), seed {seed}")
        print("requests sent per service: " + ", ".join(f"{s} {n}" for s, n in sorted(self.sent.items())))
        print("\nstatus histogram:")
        every = collections.Counter()
        for counter in self.statuses.values():
            every.update(counter)
        for service in sorted(self.statuses) + ["all"]:
            counter = every if service == "all" else self.statuses[service]
            ordered = sorted(counter.items(), key=lambda kv: str(kv[0]))
            print(f"  {service:9} " + "  ".join(f"{k}: {v}" for k, v in ordered))
        print(f"\nfailures (fuzz_wire.is_failure: 5xx but 501 not implemented and AWS's own 500s, no answer, "
              f"a 2xx where AWS refuses, XML no SDK reads): {self.failures()} requests in {len(self.groups)} groups")
        for (service, op, case, status, exception), items in sorted(self.groups.items(), key=lambda kv: -len(kv[1])):
            first = items[0]
            print(f"\n[{len(items)}x] {service}.{op} [{case}] -> {status}: {exception}")
            print(f"  reproducer: {first['request'].describe(400)}")
            print(f"  answer: {first['outcome'].excerpt(300)}")
            print(f"  replay: {sys.executable} bench/fuzz.py --url URL --replay {first['file']}")
            tb = TRACEBACK.search(first["log"])
            if tb:
                print("  server log:\n    " + first["log"][tb.start():tb.end()].strip().replace("\n", "\n    "))
        if self.unattributed:
            counts = collections.Counter(self.unattributed)
            print(f"\ntracebacks logged without a failed request (background work): {dict(counts)}")


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from the parent ids in /proc/*/stat."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
            children[ppid].append(int(entry))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo += children.get(out[-1], [])
    return out


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):  # gone meanwhile
        return 0


class Memory:
    """The server's resident memory over the run: its own and with its children's (function
    workers, which come and go), in MiB."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.samples: list[tuple[int, float, float]] = []  # (requests so far, server, with children)

    def sample(self, requests: int) -> str:
        if self.pid is None:
            return ""
        own = _rss_bytes(self.pid) / 2 ** 20
        every = sum(_rss_bytes(p) for p in _descendants(self.pid)) / 2 ** 20
        self.samples.append((requests, own, every))
        return f"RSS {own:.0f} MiB (with children {every:.0f} MiB)"

    def report(self, max_growth: float) -> str | None:
        """The memory figures, and what is wrong with them (growth past `max_growth`) or None."""
        if len(self.samples) < 2:
            print("\nmemory: not measured" + (" (--url without --pid)" if self.pid is None else ""))
            return None
        (_, own0, every0), (_, own1, every1) = self.samples[0], self.samples[-1]
        print(f"\nmemory (RSS, MiB): server {own0:.0f} -> {own1:.0f}, with children {every0:.0f} -> {every1:.0f} "
              f"({(every1 / every0 - 1) * 100:+.0f}%)")
        print("  over the run: " + ", ".join(f"{n}: {every:.0f}" for n, _, every in self.samples))
        if every1 > every0 * (1 + max_growth):
            return f"memory grew {(every1 / every0 - 1) * 100:.0f}% (limit {max_growth * 100:.0f}%)"
        return None


def check_unharmed(url: str, witness: str, acked: dict) -> list[str]:
    """What is wrong with the server after the run: not answering, or an acknowledged record lost."""
    problems = []
    try:
        with urllib.request.urlopen(url + "/_kinesim/health", timeout=30) as r:
            if r.status != 200:
                problems.append(f"health answered {r.status}")
        kinesis = client(url, "kinesis")
        if witness not in kinesis.list_streams(Limit=10000)["StreamNames"]:
            problems.append(f"stream {witness} is gone")
        it = kinesis.get_shard_iterator(StreamName=witness, ShardId=acked["ShardId"],
                                        ShardIteratorType="AT_SEQUENCE_NUMBER",
                                        StartingSequenceNumber=acked["SequenceNumber"])["ShardIterator"]
        records = kinesis.get_records(ShardIterator=it)["Records"]
        if not records or records[0]["Data"] != b"acknowledged":
            problems.append("the record acknowledged before the run is not readable")
    except Exception as err:  # noqa: BLE001 - any failure here is the finding
        problems.append(f"{type(err).__name__}: {err}")
    return problems


def fuzz(args: argparse.Namespace, url: str, log: LogReader, out_dir: Path, pid: int | None) -> int:
    kinesis = client(url, "kinesis")
    witness = "witness-" + uuid.uuid4().hex[:12]
    kinesis.create_stream(StreamName=witness, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(StreamName=witness, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150})
    acked = kinesis.put_record(StreamName=witness, Data=b"acknowledged", PartitionKey="pk")

    fuzzer = Fuzzer(create_resources(url), args.services)
    rng = random.Random(args.seed)
    conn = Connection(url, args.timeout)
    run = Run(out_dir)
    memory = Memory(pid)
    log.new_text()
    index = 0
    unimplemented: set[tuple[str, str]] = set()

    def send(req: Request) -> Outcome:
        nonlocal index
        index += 1
        outcome = conn.send(req)
        if req.case.startswith("valid/"):
            (unimplemented.add if outcome.status == 501 else unimplemented.discard)((req.service, req.operation))
        run.record(index, req, outcome, log.new_text())
        return outcome

    begun = time.monotonic()
    try:
        if args.warm_up:
            # The sweep of tests/test_fuzz.py: every value of the catalogue once, so that the
            # largest requests have raised the allocators' high-water marks before the start.
            fuzzer.sweep_all(rng, send)
            fuzzer.pools = create_resources(url)  # what the warm-up's deletions removed
            log.new_text()
            print(f"  warm-up: {index} requests (every operation swept), {time.monotonic() - begun:.0f} s",
                  flush=True)
        print(f"  start: {memory.sample(index)}", flush=True)
        start = time.monotonic()
        deadline = start + args.seconds if args.seconds else float("inf")
        while time.monotonic() < deadline and (not args.requests or index < args.requests):
            if index and index % args.refresh == 0:
                fuzzer.pools = create_resources(url)  # the same names: `varying` holds
                log.new_text()
            send(fuzzer.random_request(rng, unimplemented))
            if index % 10000 == 0:
                print(f"  {index} requests, {run.failures()} failures, {time.monotonic() - start:.0f} s "
                      f"{memory.sample(index)}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: the figures so far")
    conn.close()
    memory.sample(index)
    run.print_report(time.monotonic() - begun, args.seed)
    problems = check_unharmed(url, witness, acked)
    grown = memory.report(args.max_growth)
    print("\nserver after the run: " + ("answers, acknowledged record intact" if not problems else "; ".join(problems)))
    if grown:
        problems.append(grown)
        print(grown)
    print(f"replay files: {out_dir}")
    return 1 if problems or run.failures() else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replay:
        return replay(args)
    out_dir = Path(args.out or tempfile.mkdtemp(prefix="kinesim-fuzz-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.url:
        return fuzz(args, args.url, LogReader(None), out_dir, args.pid)
    work = Path(tempfile.mkdtemp(prefix="kinesim-fuzz-server-"))
    settings = Settings(port=free_port(), data_dir=str(work / "data"), create_stream_ms=0, delete_stream_ms=0,
                        update_stream_ms=0, log_level="warning", subscription_s=1.0, stack_limit=STACK_LIMIT)
    server = LoggedServer(settings, out_dir / "server.log", memory_limit=MEMORY_LIMIT).start()
    try:
        return fuzz(args, server.url, LogReader(server.log_path), out_dir, server.proc.pid)
    finally:
        code = server.stop()
        shutil.rmtree(work, ignore_errors=True)
        print(f"server stopped (exit code {code}); its log: {server.log_path}")


if __name__ == "__main__":
    sys.exit(main())
