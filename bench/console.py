#!/usr/bin/env python3
"""Does an open web console slow kinesim down? PutRecord/s with console tabs open vs without, in one run.

    .venv/bin/python bench/console.py                    # 3 rounds of 5 s each way, one tab per page
    .venv/bin/python bench/console.py --rounds 5 --seconds 10 --tabs 2 --json bench/results/console.json

One durable kinesim (temp data dir) serves a 4-shard stream and a function (invoked a few times,
so its page has something to show). Rounds alternate: the PutRecord load of bench/run.py's `put1`
(one 100 B record per request, `--clients` keep-alive connections in their own processes) alone,
then the same load while a watcher process polls the console's JSON API as the pages do: per tab of
the stream page its detail every 1.5 s and its live tail every 1 s (with the cursor), per tab of the
overview every 2 s, per tab of the function page its detail and batch timeline every 1.5 s and its
log every 1 s (with the cursor); `--tabs` tabs of each of the three pages, each its own keep-alive
connection. A browser draws the answers too, on the same two cores; that part is not counted.
Printed: records/s each way (acknowledged records / wall time over all rounds), their ratio, and
how fast the console's answers came while the load ran.
"""
from __future__ import annotations

import argparse
import http.client
import io
import json
import multiprocessing
import signal
import sys
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import quote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

import client  # noqa: E402
import workloads as wl  # noqa: E402
from peers import Server, in_work_dir  # noqa: E402
from run import log  # noqa: E402

API = "/_kinesim/console/api"
FUNCTION = "console-bench-fn"
FUNCTION_CODE = "def handler(event, context):\n    print('event', event)\n    return {'ok': True}\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="rounds of each kind, alternating (default 3)")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each round's load (default 5)")
    p.add_argument("--clients", type=int, default=4, help="PutRecord connections, one process each (default 4)")
    p.add_argument("--tabs", type=int, default=1, help="open tabs of each page: stream, overview, function (default 1)")
    p.add_argument("--warmup", type=float, default=2.0, help="untimed load after the server starts (default 2 s)")
    p.add_argument("--json", help="also write the figures here")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# the watcher: what open console tabs ask for

def tab_polls(stream: str, function: str) -> dict[str, list[tuple[str, float, str | None]]]:
    """Per page, its polls as (path, period s, name of the answer's cursor field or None)."""
    s, f = quote(stream, safe=""), quote(function, safe="")
    return {
        "stream": [(f"{API}/streams/{s}", 1.5, None), (f"{API}/streams/{s}/tail", 1.0, "cursor")],
        "overview": [(f"{API}/overview", 2.0, None)],
        "function": [(f"{API}/functions/{f}", 1.5, None), (f"{API}/functions/{f}/timeline", 1.5, None),
                     (f"{API}/functions/{f}/logs", 1.0, "cursor")],
    }


def watch_tab(endpoint: str, polls: list[tuple[str, float, str | None]], stop, latencies: list[float],
              failures: list[str]) -> None:
    """One tab: each poll when it is due, on one keep-alive connection, until `stop` is set."""
    host = urlsplit(endpoint)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
    due = [time.monotonic()] * len(polls)
    cursors: list[str | None] = [None] * len(polls)
    while not stop.is_set():
        i = min(range(len(polls)), key=due.__getitem__)
        wait = due[i] - time.monotonic()
        if wait > 0 and stop.wait(wait):
            break
        path, period, cursor_field = polls[i]
        url = path + (f"?cursor={quote(cursors[i])}" if cursors[i] else "")
        t0 = time.monotonic()
        try:
            conn.request("GET", url, headers={"Accept": "application/json"})
            answer = conn.getresponse()
            body = answer.read()
            latencies.append(time.monotonic() - t0)
            if answer.status != 200:
                failures.append(f"{answer.status} {url}")
            elif cursor_field:
                cursors[i] = json.loads(body).get(cursor_field)
        except (OSError, http.client.HTTPException) as e:
            failures.append(f"{type(e).__name__} {url}")
            conn.close()
        due[i] = t0 + period
    conn.close()


def watcher(endpoint: str, stream: str, function: str, tabs: int, stop, out) -> None:
    """In its own process: `tabs` tabs of each page, one thread each; sends what it saw to `out`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    latencies: list[float] = []
    failures: list[str] = []
    threads = [threading.Thread(target=watch_tab, args=(endpoint, polls, stop, latencies, failures), daemon=True)
               for polls in tab_polls(stream, function).values() for _ in range(tabs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.send({"latencies": latencies, "failures": failures})


# ---------------------------------------------------------------------------------------------
# the load

def make_function(endpoint: str) -> None:
    """A function with a few invocations behind it, for the function page."""
    lam = boto3.client("lambda", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test", config=Config(retries={"max_attempts": 1}))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("index.py", FUNCTION_CODE)
    lam.create_function(FunctionName=FUNCTION, Runtime="python3.11", Handler="index.handler",
                        Role="arn:aws:iam::000000000000:role/bench", Code={"ZipFile": archive.getvalue()})
    for i in range(5):
        lam.invoke(FunctionName=FUNCTION, Payload=json.dumps({"n": i}).encode())


def put_round(ctx: wl.Ctx, stream: str, seconds: float) -> tuple[int, float]:
    """put1's load on `stream` for `seconds`: (acknowledged records, wall seconds)."""
    t_end = time.monotonic() + 0.5 + seconds
    run = wl.Timed(ctx, wl.put1_worker, [(ctx.endpoint, stream, w, 100, t_end) for w in range(ctx.clients)])
    errors = wl.merge_errors(run.results)
    if errors:
        log(f"  errors: {errors}")
    return sum(map(len, wl.merge_acks(run.results).values())), run.wall


def watched_round(ctx: wl.Ctx, stream: str, args: argparse.Namespace) -> tuple[int, float, dict]:
    fork = multiprocessing.get_context("fork")
    stop = fork.Event()
    receive, send = fork.Pipe(duplex=False)
    proc = fork.Process(target=watcher, args=(ctx.endpoint, stream, FUNCTION, args.tabs, stop, send), daemon=True)
    proc.start()
    try:
        records, wall = put_round(ctx, stream, args.seconds)
    finally:
        stop.set()
    seen = receive.recv() if receive.poll(60) else {"latencies": [], "failures": ["the watcher did not report"]}
    proc.join(30)
    return records, wall, seen


def percentile(values: list[float], q: float) -> float | None:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def run_benchmark(args: argparse.Namespace, work_dir: Path) -> int:
    server = Server("kinesim", work_dir).start()
    log(f"kinesim ready on {server.endpoint} (pid {server.pid})")
    ctx = wl.Ctx(server=server, seconds=args.seconds, clients=args.clients, procs=args.clients, log=log)
    make_function(server.endpoint)
    if args.warmup > 0:
        wl.warmup(ctx, args.warmup)
    stream, _ = wl.create_stream(ctx, "console")
    totals = {"without": [0, 0.0], "with": [0, 0.0]}
    latencies: list[float] = []
    failures: list[str] = []
    for r in range(args.rounds):
        records, wall = put_round(ctx, stream, args.seconds)
        totals["without"][0] += records
        totals["without"][1] += wall
        log(f"round {r + 1} without the console: {records / wall:,.0f} records/s")
        records, wall, seen = watched_round(ctx, stream, args)
        totals["with"][0] += records
        totals["with"][1] += wall
        latencies += seen["latencies"]
        failures += seen["failures"]
        log(f"round {r + 1} with {3 * args.tabs} console tabs: {records / wall:,.0f} records/s "
            f"({len(seen['latencies'])} console answers)")
    server.stop()
    without = totals["without"][0] / totals["without"][1]
    watched = totals["with"][0] / totals["with"][1]
    figures = {
        "put1.rps.without_console": without, "put1.rps.with_console": watched, "ratio": watched / without,
        "tabs": 3 * args.tabs, "rounds": args.rounds, "seconds": args.seconds, "clients": args.clients,
        "console.answers": len(latencies), "console.failures": len(failures),
        "console.answer_ms.p50": _ms(percentile(latencies, 0.5)),
        "console.answer_ms.p99": _ms(percentile(latencies, 0.99)),
        "console.answer_ms.max": _ms(max(latencies, default=None)),
    }
    print()
    print(f"PutRecord/s, {args.clients} connections, {args.rounds} × {args.seconds:g} s each way, alternating:")
    print(f"  without the console      {without:>10,.0f} records/s")
    print(f"  with {3 * args.tabs} console tabs       {watched:>10,.0f} records/s")
    print(f"  ratio with / without     {watched / without:>10.3f}")
    print(f"  console answers under load: {len(latencies)}, p50 {figures['console.answer_ms.p50']} ms, "
          f"p99 {figures['console.answer_ms.p99']} ms, max {figures['console.answer_ms.max']} ms, "
          f"{len(failures)} failed")
    for failure in sorted(set(failures))[:10]:
        print(f"  FAILED console poll: {failure}")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client.HTTP_IMPL = "raw"  # the lean socket client for the producers (see README.md)
    return in_work_dir("kinesim-consolebench-", lambda work_dir: run_benchmark(args, work_dir), log)


if __name__ == "__main__":
    sys.exit(main())
