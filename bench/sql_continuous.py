"""A continuous query (`kinesim sql --continuous ... --into STREAM`, run in the warm Spark
Connect server), measured from outside as a user meets it: records/s over a preloaded stream,
and the latency from putting a click that closes a window to that window's row in the output.

1. A fresh kinesim server (bench/peers.py `Server`); the warm Spark started first with a
   `kinesim sql "SELECT 1"` (its start-up is reported, not counted in the query's figures).
2. `--stream-records` clicks `{"page": ..., "ts": "2024-05-01T10:..Z"}` spread over
   `--minutes` minutes of event time are put into a `--stream-shards` stream, then one click
   ten minutes later (`/mark/0`), which moves the watermark (`--watermark "1 minute"`) past every
   window of the preload.
3. preload records/s: the query is started from TRIM_HORIZON (`kinesim sql --continuous ...`
   returns once its first micro-batch ran); the clock runs from that command until the output
   stream holds every window of the preload, checked by their views adding up to the clicks put
   (the latest row per window is taken, so append and update output modes both count right).
4. live records/s: as many clicks again (pages `/live/...`, later event times) put while the
   query runs, then `/mark/1`: from the first put to every one of their windows in the output.
5. put -> window result: with the query caught up, click `/probe/i` (i = 1..`--probes`) is put
   ten minutes (and 30 s) of event time after the last click, which closes the last click's
   window; the time from the PutRecord to that window's row read from the output stream
   (GetRecords from iterators taken at LATEST before the put, polled every few ms).
"""
from __future__ import annotations

import base64
import json
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

from client import Client, dumps, loads
from peers import REPO_DIR, Server
from sql_warm import PYTHON, kinesim_sql, stop_warm_spark

CLICKS, OUT, NAME = "bench-clicks", "bench-views", "bench_views_per_minute"
BASE = datetime(2024, 5, 1, 10, tzinfo=timezone.utc)
QUERY = (f"SELECT page, window.start AS minute, count(*) AS views FROM STREAM {CLICKS} "
         "GROUP BY window(ts, '1 minute'), page")
PAGES = ["/", "/search", "/cart", "/checkout", "/account", "/help"] + [f"/product/{i}" for i in range(60)]
# Producers on 4 connections put clicks a few seconds of event time out of order: a watermark of
# 0 s would drop some of them (as Spark documents), and the views would not add up.
WATERMARK = "1 minute"
RESULT_TIMEOUT_S = 900
PROBE_TIMEOUT_S = 600
POLL_S = 0.005


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def configure(parser) -> None:
    group = parser.add_argument_group("continuous")
    group.add_argument("--stream-records", type=int, default=200_000, help="clicks preloaded (default 200000)")
    group.add_argument("--stream-shards", type=int, default=4, help="shards of the clicks stream (default 4)")
    group.add_argument("--minutes", type=int, default=20, help="minutes of event time they span (default 20)")
    group.add_argument("--probes", type=int, default=5, help="put -> window result measurements (default 5)")


def kinesim(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "kinesim", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO_DIR)


def missing_cli() -> str | None:
    """Why the continuous query cannot be measured here (None: the commands are there)."""
    help_text = kinesim("sql", "--help", timeout=60).stdout
    if "--continuous" not in help_text:
        return "`kinesim sql --continuous` is not in this kinesim (kinesim/analytics/continuous.py not landed?)"
    if kinesim("queries", "--help", timeout=60).returncode != 0:
        return "`kinesim queries` is not in this kinesim"
    return None


def click(page: str, when: datetime) -> bytes:
    return json.dumps({"page": page, "ts": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"},
                      separators=(",", ":")).encode()


def mark_time(n: int, minutes: int) -> datetime:
    """Where click /mark/n goes: ten minutes after the clicks of phase n (0: preload, 1: live)."""
    return BASE + timedelta(minutes=(n + 1) * minutes + 20 * n + 10)


def live_base(minutes: int) -> datetime:
    return BASE + timedelta(minutes=minutes + 20)


def probe_time(i: int, minutes: int) -> datetime:
    """Each probe ten minutes (and 30 s) after the last click: past the watermark's delay, so it
    closes that click's window."""
    return mark_time(1, minutes) + timedelta(minutes=10 * i, seconds=30)


def put_one(client, stream: str, data: bytes, key: str) -> None:
    client.call("PutRecord", {"StreamName": stream, "PartitionKey": key, "Data": base64.b64encode(data).decode()})


def preload(endpoint: str, records: int, minutes: int, base: datetime = BASE, prefix: str = "",
            connections: int = 4) -> float:
    """PutRecords of 500 clicks spread evenly over `minutes` of event time from `base` (pages named
    `prefix` + page); returns records/s."""
    rng = random.Random(11)
    pages = [prefix + p for p in rng.choices(PAGES, [40, 15, 8, 4, 3, 2] + [1] * 60, k=records)]
    step = minutes * 60 / records

    def put(starts: list[int]) -> None:
        client = Client(endpoint)
        for start in starts:
            batch = [{"PartitionKey": f"k{i}", "Data": base64.b64encode(
                click(pages[i], base + timedelta(seconds=i * step))).decode()}
                for i in range(start, min(start + 500, records))]
            answer = loads(client.raw("PutRecords", dumps({"StreamName": CLICKS, "Records": batch})))
            if answer["FailedRecordCount"]:
                raise RuntimeError(f"{answer['FailedRecordCount']} records failed during the preload")
        client.close()

    began = time.perf_counter()
    starts = list(range(0, records, 500))
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(put, [starts[i::connections] for i in range(connections)]))
    return records / (time.perf_counter() - began)


class Output:
    """The output stream, read shard by shard: rows by (page, minute), the latest one wins."""

    def __init__(self, endpoint: str, position: str):
        self.client = Client(endpoint)
        shards = self.client.call("ListShards", {"StreamName": OUT})["Shards"]
        self.iterators = [self.client.call("GetShardIterator", {
            "StreamName": OUT, "ShardId": s["ShardId"], "ShardIteratorType": position})["ShardIterator"]
            for s in shards]
        self.windows: dict[tuple, int] = {}

    def poll(self) -> list[dict]:
        rows = []
        for n, iterator in enumerate(self.iterators):
            answer = self.client.call("GetRecords", {"ShardIterator": iterator, "Limit": 10000})
            self.iterators[n] = answer["NextShardIterator"]
            for record in answer["Records"]:
                row = json.loads(base64.b64decode(record["Data"]))
                self.windows[(row.get("page"), str(row.get("minute")))] = int(row.get("views", 0))
                rows.append(row)
        return rows

    def views(self, live: bool = False) -> int:
        """Views of the preload's windows (live: of the live phase's), not the marks' or probes'."""
        return sum(v for (page, _), v in self.windows.items()
                   if str(page).startswith("/live/") == live and not str(page).startswith(("/mark/", "/probe/")))

    def wait(self, views: int, live: bool, began: float, timeout: float = RESULT_TIMEOUT_S) -> float | None:
        """Poll until the phase's windows add up to `views`; seconds since `began` to the first row."""
        first = None
        while self.views(live) < views and time.perf_counter() - began < timeout:
            if self.poll() and first is None:
                first = time.perf_counter() - began
            time.sleep(0.05)
        if self.views(live) != views:
            raise RuntimeError(f"after {time.perf_counter() - began:.0f} s the output holds {self.views(live):,} "
                               f"views of {views:,} clicks")
        return first


def measure(args, work_dir: Path) -> dict:
    why = missing_cli()
    if why:
        log(f"continuous: SKIPPED: {why}")
        return {"skipped": why}
    server = Server("kinesim", work_dir / "continuous").start()
    endpoint = server.endpoint
    figures: dict = {"records": args.stream_records, "shards": args.stream_shards, "minutes": args.minutes}
    try:
        client = Client(endpoint)
        client.call("CreateStream", {"StreamName": CLICKS, "ShardCount": args.stream_shards})
        client.call("CreateStream", {"StreamName": OUT, "ShardCount": 1})
        log("continuous: starting the warm Spark (kinesim sql \"SELECT 1\") ...")
        figures["spark_start_s"] = kinesim_sql(endpoint, "SELECT 1 AS one").seconds
        log(f"continuous: preloading {args.stream_records:,} clicks into {args.stream_shards} shards ...")
        figures["preload_records_per_s"] = preload(endpoint, args.stream_records, args.minutes)
        put_one(client, CLICKS, click("/mark/0", mark_time(0, args.minutes)), "mark")
        output = Output(endpoint, "TRIM_HORIZON")
        log("continuous: kinesim sql --continuous ...")
        began = time.perf_counter()
        started = kinesim("sql", "--endpoint-url", endpoint, "--continuous", QUERY, "--into", OUT, "--name", NAME,
                          "--event-time", "ts", "--watermark", WATERMARK, "--starting-position", "TRIM_HORIZON")
        figures["start_command_s"] = time.perf_counter() - began
        if started.returncode != 0:
            raise RuntimeError(f"kinesim sql --continuous exited {started.returncode}: {started.stderr.strip()[-800:]}")
        first = output.wait(args.stream_records, False, began)
        done = time.perf_counter() - began
        figures.update(first_row_s=first, all_windows_s=done, windows=len(output.windows),
                       records_per_s=args.stream_records / done)
        log(f"continuous: {args.stream_records:,} clicks -> {len(output.windows):,} windows in {done:.1f} s")
        figures.update(live(endpoint, client, output, args))
        figures["latency_ms"] = [probe(endpoint, client, i, args.minutes) for i in range(1, args.probes + 1)]
        lat = figures["latency_ms"]
        figures.update(latency_median_ms=statistics.median(lat), latency_min_ms=min(lat), latency_max_ms=max(lat))
        listed = kinesim("queries", "--endpoint-url", endpoint, timeout=120)
        figures["queries_listed"] = NAME in listed.stdout
        stopped = kinesim("queries", "stop", NAME, "--endpoint-url", endpoint, timeout=120)
        figures["stopped"] = stopped.returncode == 0
    finally:
        server.stop()
        stop_warm_spark(server.dir / "data")
    return figures


def live(endpoint: str, client, output: Output, args) -> dict:
    """The same number of clicks put while the query runs (later event times, pages /live/...),
    then /mark/1 after them: seconds from the first put to every window's row."""
    log(f"continuous: putting {args.stream_records:,} clicks while the query runs ...")
    began = time.perf_counter()
    rate = preload(endpoint, args.stream_records, args.minutes, live_base(args.minutes), "/live")
    put_one(client, CLICKS, click("/mark/1", mark_time(1, args.minutes)), "mark")
    put_s = time.perf_counter() - began
    output.wait(args.stream_records, True, began)
    done = time.perf_counter() - began
    log(f"continuous: live: {done:.1f} s to every window ({put_s:.1f} s of puts)")
    return {"live_put_records_per_s": rate, "live_put_s": put_s, "live_all_windows_s": done,
            "live_records_per_s": args.stream_records / done, "live_after_last_put_s": done - put_s}


def probe(endpoint: str, client, i: int, minutes: int) -> float:
    """Milliseconds from putting /probe/i to /probe/(i-1)'s window row in the output stream."""
    output = Output(endpoint, "LATEST")
    wanted = f"/probe/{i - 1}" if i > 1 else "/mark/1"
    began = time.perf_counter()
    put_one(client, CLICKS, click(f"/probe/{i}", probe_time(i, minutes)), "probe")
    while time.perf_counter() - began < PROBE_TIMEOUT_S:
        if any(row.get("page") == wanted for row in output.poll()):
            ms = (time.perf_counter() - began) * 1000
            log(f"continuous: probe {i}: {ms:,.0f} ms")
            return ms
        time.sleep(POLL_S)
    raise TimeoutError(f"no row for {wanted}'s window {PROBE_TIMEOUT_S} s after the click that closes it")


def report(f: dict) -> None:
    print("\nContinuous query (`kinesim sql --continuous ... --into STREAM`, warm Spark Connect server)\n")
    if "skipped" in f or "error" in f:
        print(f"not measured: {f.get('skipped') or f.get('error')}")
        return
    print(f"{f['records']:,} clicks in {f['shards']} shards over {f['minutes']} minutes of event time, "
          f"preloaded at {f['preload_records_per_s']:,.0f} records/s; warm Spark's start: {f['spark_start_s']:.1f} s")
    rows = [("start command (returns after the query's first micro-batch)", f"{f['start_command_s']:.1f} s"),
            ("first output row, from the start command", "-" if f["first_row_s"] is None
             else f"{f['first_row_s']:.1f} s"),
            (f"every window of the preload ({f['windows']:,} rows), from the start command",
             f"{f['all_windows_s']:.1f} s"),
            ("preload records/s, start command to every window", f"{f['records_per_s']:,.0f}"),
            (f"live: {f['records']:,} clicks put (at {f['live_put_records_per_s']:,.0f}/s) -> every window",
             f"{f['live_all_windows_s']:.1f} s"),
            ("live records/s, first put to every window", f"{f['live_records_per_s']:,.0f}"),
            ("live: last put -> every window", f"{f['live_after_last_put_s']:.1f} s"),
            ("put -> window result, median ms", f"{f['latency_median_ms']:,.0f}"),
            ("put -> window result, min / max ms", f"{f['latency_min_ms']:,.0f} / {f['latency_max_ms']:,.0f}"),
            ("kinesim queries lists it / queries stop", f"{f['queries_listed']} / {f['stopped']}")]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>14}")
