"""Continuous SQL (`kinesim sql --continuous` and `kinesim queries`), through the real server and the
warm Spark Connect server: windowed counts equal exactly what was produced per window, late events
beyond the watermark are dropped (Spark: a window is emitted in append mode once the watermark
passes its end; a row for a window that was emitted is dropped), and a stopped and resumed query
goes on from its checkpoint without putting a row twice."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timezone

import pytest

from conftest import client_for, ctrl_c_reaches_child, start_server
from kinesim.analytics.connect_server import STATE_FILE, state_dir
from kinesim.analytics.tables import server_info

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
QUERY = ("SELECT page, window.start AS minute, count(*) AS views FROM STREAM events "
         "GROUP BY window(ts, '1 minute'), page")


def kinesim(url: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinesim", *args, "--endpoint-url", url],
                          capture_output=True, text=True, timeout=timeout)


def state(url: str) -> str:
    listed = kinesim(url, "queries", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["state"]


def clicks(minute: int, page: str, count: int) -> list[dict]:
    return [{"page": page, "ts": BASE + minute * 60 + 1 + i % 58, "user": f"u{i}"} for i in range(count)]


def put(kinesis, stream: str, events: list[dict]) -> None:
    for start in range(0, len(events), 500):
        chunk = events[start:start + 500]
        answer = kinesis.put_records(StreamName=stream, Records=[
            {"Data": json.dumps(e).encode(), "PartitionKey": e["user"]} for e in chunk])
        assert answer["FailedRecordCount"] == 0


class Output:
    """Every row the query put to the output stream so far, read forward."""

    def __init__(self, kinesis, stream: str):
        self.kinesis, self.rows, self.iterators = kinesis, [], {}
        for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
            self.iterators[shard["ShardId"]] = kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    def read(self) -> list[dict]:
        for shard, iterator in self.iterators.items():
            page = self.kinesis.get_records(ShardIterator=iterator)
            self.iterators[shard] = page["NextShardIterator"]
            self.rows += [json.loads(r["Data"]) for r in page["Records"]]
        return self.rows

    def counts(self) -> dict[tuple[str, int], int]:
        out = {}
        for row in self.rows:
            minute = int((datetime.fromisoformat(row["minute"].replace("Z", "+00:00")).replace(tzinfo=timezone.utc)
                          .timestamp() - BASE) // 60)
            key = (row["page"], minute)
            assert key not in out, f"window {key} emitted twice: {self.rows}"
            out[key] = row["views"]
        return out

    def wait_for(self, keys: set, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        while not keys <= set(self.counts()):
            assert time.monotonic() < deadline, f"windows {keys - set(self.counts())} never came: {self.rows}"
            time.sleep(0.5)
            self.read()
        return self.counts()


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_windowed_counts_are_exact_late_events_dropped_and_resume_goes_on(tmp_path_factory):
    server = start_server(tmp_path_factory)
    try:
        kinesis = client_for(server.url, "kinesis")
        kinesis.create_stream(StreamName="events", ShardCount=2)
        kinesis.create_stream(StreamName="minutes", ShardCount=1)
        produced = {}
        events = []
        for minute in range(4):
            for page, extra in (("/a", 0), ("/b", 3)):
                produced[(page, minute)] = 2 + minute * 2 + extra
                events += clicks(minute, page, produced[(page, minute)])
        events += clicks(5, "/c", 1)  # event time 5:01: the watermark (1 minute late) passes 4:00
        put(kinesis, "events", events)

        started = kinesim(server.url, "sql", "--continuous", QUERY, "--into", "minutes", "--name", "per-minute",
                          "--event-time", "ts", "--watermark", "1 minute", "--starting-position", "TRIM_HORIZON",
                          "--partition-key", "page")
        assert started.returncode == 0, started.stderr
        assert "per-minute is running into minutes" in started.stdout

        output = Output(kinesis, "minutes")
        assert output.wait_for(set(produced)) == produced  # windows 0-3, exact; 5 still open

        # Late: minute 1 is closed (its row is out), so these are dropped; minute 5 is still open.
        put(kinesis, "events", clicks(1, "/a", 3) + clicks(5, "/c", 1) + clicks(9, "/d", 1))
        produced[("/c", 5)] = 2
        assert output.wait_for(set(produced)) == produced

        listed = kinesim(server.url, "queries", "--format", "json")
        assert listed.returncode == 0, listed.stderr
        row = json.loads(listed.stdout)
        assert (row["name"], row["state"], row["into"]) == ("per-minute", "running", "minutes")

        stopped = kinesim(server.url, "queries", "stop", "per-minute")
        assert stopped.returncode == 0 and "per-minute stopped" in stopped.stderr, stopped.stderr
        assert state(server.url) == "stopped"

        # While it is stopped: minute 9 gets more views, minute 12 closes it.
        put(kinesis, "events", clicks(9, "/d", 4) + clicks(12, "/e", 1))
        resumed = kinesim(server.url, "queries", "resume", "per-minute")
        assert resumed.returncode == 0, resumed.stderr
        produced[("/d", 9)] = 5
        assert output.wait_for(set(produced)) == produced  # and no window twice (counts() checks)

        everything = events + clicks(1, "/a", 3) + clicks(5, "/c", 1) + clicks(9, "/d", 5) + clicks(12, "/e", 1)
        printed_hopping_windows_until_ctrl_c(server.url, everything)

        # The query stops with the kinesim server (and its Spark) and resumes when Spark starts again.
        directory = state_dir(server_info(server.url)["s3_root"])
        server.stop()
        deadline = time.monotonic() + 180
        while os.path.exists(os.path.join(directory, STATE_FILE)):
            assert time.monotonic() < deadline, "Spark still running after the kinesim server stopped"
            time.sleep(0.5)
        server.start()
        assert state(server.url) == "stopped with Spark"
        assert kinesim(server.url, "sql", "SELECT 1 AS one").returncode == 0  # Spark starts, the query resumes
        deadline = time.monotonic() + 180
        while state(server.url) != "running":
            assert time.monotonic() < deadline, "the query was not resumed"
            time.sleep(1)
        put(kinesis, "events", clicks(12, "/e", 2) + clicks(15, "/f", 1))
        produced[("/e", 12)] = 3
        assert Output(kinesis, "minutes").wait_for(set(produced)) == produced

        # Its output stream deleted, the next window cannot be put: the query fails, and says why.
        kinesis.delete_stream(StreamName="minutes")
        put(kinesis, "events", clicks(18, "/g", 1))
        deadline = time.monotonic() + 180
        while state(server.url) != "failed":
            assert time.monotonic() < deadline, "the query did not fail"
            time.sleep(1)
        shown = json.loads(kinesim(server.url, "queries", "show", "per-minute").stdout)
        assert "minutes" in shown["error"], shown["error"]

        deleted = kinesim(server.url, "queries", "delete", "per-minute")
        assert deleted.returncode == 0, deleted.stderr
        assert kinesim(server.url, "queries", "--format", "json").stdout == ""
    finally:
        server.stop()


def printed_hopping_windows_until_ctrl_c(url: str, events: list[dict]) -> None:
    """`--print` with two-minute windows every minute, over the whole stream in one go: nothing is
    late for a new query (all of it comes in its first micro-batch), every window ending before
    the watermark (12:01 - 1 minute) is printed once, then Ctrl-C ends the command cleanly."""
    minutes = Counter((e["page"], int((e["ts"] - BASE) // 60)) for e in events)
    expected = {}
    for start in range(-1, 10):  # windows [start, start + 2) that end by 11:01
        for page in {p for p, _ in minutes}:
            views = minutes[(page, start)] + minutes[(page, start + 1)]
            if views:
                expected[(page, start)] = views
    proc = subprocess.Popen(
        [sys.executable, "-m", "kinesim", "sql", "--endpoint-url", url, "--continuous", "--print", "--format", "json",
         "--event-time", "ts", "--watermark", "1 minute", "--starting-position", "TRIM_HORIZON",
         "SELECT page, window.start AS start, count(*) AS views FROM STREAM events "
         "GROUP BY window(ts, '2 minutes', '1 minute'), page"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_child)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    printed: dict = {}
    deadline = time.monotonic() + 240
    try:
        while set(printed) != set(expected):
            assert time.monotonic() < deadline, f"printed {printed}, expected {expected}"
            try:
                row = json.loads(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, proc.stderr.read()
                continue
            start = int((datetime.fromisoformat(row["start"]).replace(tzinfo=timezone.utc).timestamp() - BASE) // 60)
            assert (row["page"], start) not in printed, f"printed twice: {row}"
            printed[(row["page"], start)] = row["views"]
        assert printed == expected
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_usage_errors_say_what_to_do(server):
    kinesis = client_for(server.url, "kinesis")
    kinesis.create_stream(StreamName="continuous-usage", ShardCount=1)
    no_target = kinesim(server.url, "sql", "--continuous", "SELECT * FROM STREAM continuous-usage")
    assert no_target.returncode == 2 and "--into STREAM" in no_target.stderr
    no_stream = kinesim(server.url, "sql", "--continuous", "SELECT 1", "--print")
    assert no_stream.returncode == 2 and "FROM STREAM name" in no_stream.stderr
    no_name = kinesim(server.url, "sql", "--continuous", "SELECT * FROM STREAM continuous-usage", "--into", "x")
    assert no_name.returncode == 2 and "--name" in no_name.stderr
    missing = kinesim(server.url, "sql", "--continuous", "SELECT * FROM STREAM continuous-usage", "--into",
                      "no-such-target", "--name", "q1")
    assert missing.returncode == 2 and "no Kinesis stream or delivery stream" in missing.stderr
    no_such = kinesim(server.url, "sql", "--continuous", "SELECT * FROM STREAM never-made", "--print")
    assert no_such.returncode == 2 and "FROM STREAM never-made: no such Kinesis stream" in no_such.stderr
    assert "Traceback" not in no_such.stderr
    unknown = kinesim(server.url, "queries", "stop", "never-made")
    assert unknown.returncode == 2 and "no continuous query named 'never-made'" in unknown.stderr
