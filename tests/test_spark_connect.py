"""The warm Spark Connect server: `kinesim sql` starts it once (and warms it up), later queries
reuse it, new deliveries (with new fields) and deleted objects are seen by the next query, SQL
errors are one line, and it stops with the kinesim server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import client_for, start_server, wait_for
from kinesim.analytics.connect_server import STATE_FILE, running, state_dir
from kinesim.analytics.tables import server_info

ROLE = "arn:aws:iam::000000000000:role/firehose"
BUCKET = "warm-lake"


def _sql(url: str, query: str, *options: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kinesim", "sql", "--endpoint-url", url, "--format", "json",
                           *options, query], capture_output=True, text=True, timeout=300)
    return time.monotonic() - started, proc


def _deliver(url: str, first: int, count: int, expected_objects: int, **extra) -> None:
    fh = client_for(url, "firehose")
    s3 = client_for(url, "s3", s3={"addressing_style": "path"})
    records = [{"Data": json.dumps({"n": i, **extra}).encode() + b"\n"} for i in range(first, first + count)]
    assert fh.put_record_batch(DeliveryStreamName="warm", Records=records)["FailedPutCount"] == 0
    deadline = time.monotonic() + 60
    while len(s3.list_objects_v2(Bucket=BUCKET, Prefix="warm/").get("Contents", [])) < expected_objects:
        assert time.monotonic() < deadline, "delivery did not arrive"
        time.sleep(0.2)


@pytest.mark.slow
def test_second_query_reuses_the_warm_server_and_sees_new_deliveries(tmp_path_factory):
    server = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    try:
        client_for(server.url, "s3", s3={"addressing_style": "path"}).create_bucket(Bucket=BUCKET)
        client_for(server.url, "firehose").create_delivery_stream(
            DeliveryStreamName="warm", ExtendedS3DestinationConfiguration={
                "RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{BUCKET}", "Prefix": "warm/",
                "BufferingHints": {"IntervalInSeconds": 0}})
        _deliver(server.url, 0, 100, 1)
        s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
        [first_object] = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
        query = "SELECT count(*) AS n, sum(n) AS total FROM warm"
        cold, first = _sql(server.url, query)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout) == {"n": 100, "total": sum(range(100))}
        assert "Spark is starting" in first.stderr
        directory = state_dir(server_info(server.url)["s3_root"])
        assert running(directory), "no warm server recorded"
        with open(os.path.join(directory, STATE_FILE)) as f:
            recorded = json.load(f)

        # Spark was warmed up before it was recorded ready, without a failure; the table's schema
        # is kept with the server's state.
        with open(os.path.join(directory, "spark.log")) as f:
            assert "Traceback" not in f.read()
        assert os.listdir(os.path.join(directory, "schemas"))

        _deliver(server.url, 100, 50, 2, tag="new")  # after the Spark server started, with a new field
        warm, second = _sql(server.url, "SELECT count(*) AS n, sum(n) AS total, count(tag) AS tagged FROM warm")
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout) == {"n": 150, "total": sum(range(150)), "tagged": 50}
        assert "Spark is starting" not in second.stderr
        print(f"cold {cold:.1f} s, warm {warm:.1f} s")
        assert warm < cold

        # The next command goes on in the same Spark Connect session (kept: sessions.py), its
        # settings and views as a new session's: a temp view or a --conf of a command is gone.
        slot = os.path.join(directory, "sessions", "slot-0.json")
        with open(slot) as f:
            kept = json.load(f)
        assert kept["clean"] and kept["views"] == ["warm"]
        _, view = _sql(server.url, "CREATE TEMP VIEW mine AS SELECT 1 AS a; SELECT a FROM mine")
        assert view.returncode == 0 and json.loads(view.stdout) == {"a": 1}, view.stderr
        assert not os.path.exists(slot)   # a statement that changed the session: released
        _, gone = _sql(server.url, "SELECT a FROM mine")
        assert gone.returncode == 1 and "TABLE_OR_VIEW_NOT_FOUND" in gone.stderr
        _, conf = _sql(server.url, "SELECT 1 AS one", "--conf", "spark.sql.shuffle.partitions=7")
        assert conf.returncode == 0, conf.stderr
        with open(slot) as f:
            reused = json.load(f)["id"]
        _, shown = _sql(server.url, "SHOW TABLES")
        assert shown.returncode == 0 and '"tableName": "warm"' in shown.stdout, shown.stdout
        with open(slot) as f:
            assert json.load(f)["id"] == reused
        _, setting = _sql(server.url, "SET spark.sql.shuffle.partitions")
        assert json.loads(setting.stdout)["value"] != "7", setting.stdout

        # A typo: Spark's message in one line, exit 1; --verbose adds the plan and the stack trace.
        for typo, condition in (("SELECT nope FROM warm", "UNRESOLVED_COLUMN.WITH_SUGGESTION"),
                                ("SELEC n FROM warm", "PARSE_SYNTAX_ERROR")):
            _, failed = _sql(server.url, typo)
            assert failed.returncode == 1 and failed.stdout == ""
            assert failed.stderr.startswith(f"kinesim sql: error: [{condition}] ") and \
                failed.stderr.count("\n") == 1, failed.stderr
        _, verbose = _sql(server.url, "SELECT nope FROM warm", "--verbose")
        assert verbose.returncode == 1 and "JVM stacktrace:" in verbose.stderr and "at org.apache.spark" in verbose.stderr

        # Deleted objects, then the bucket: the next query answers from what is left.
        s3.delete_object(Bucket=BUCKET, Key=first_object)
        _, third = _sql(server.url, "SELECT count(*) AS n, count(tag) AS tagged FROM warm")
        assert third.returncode == 0, third.stderr
        assert json.loads(third.stdout) == {"n": 50, "tagged": 50}
        for left in s3.list_objects_v2(Bucket=BUCKET)["Contents"]:
            s3.delete_object(Bucket=BUCKET, Key=left["Key"])
        s3.delete_bucket(Bucket=BUCKET)
        _, last = _sql(server.url, "SELECT 1 AS one")
        assert last.returncode == 0 and json.loads(last.stdout) == {"one": 1}, last.stderr
    finally:
        code = server.stop()
    # Stopped with the kinesim server, which waited for it (its own exit, not a SIGKILL): the
    # supervisor that `kinesim sql` started, Spark, and every process Spark started.
    assert code == 0
    assert not os.path.exists(os.path.join(directory, STATE_FILE))
    # Its lock is free once it has closed its files: the last moments of its exit may remain.
    wait_for(lambda: not _alive(recorded["supervisor"]), timeout=30)
    wait_for(lambda: not _group_members(recorded["pid"]), timeout=30)


def _alive(pid: int) -> bool:
    """Running: not gone, and not a zombie its new parent has yet to reap."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _group_members(pgid: int) -> list[int]:
    """The running (not zombie) processes of process group `pgid`."""
    members = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(name))
    return members
