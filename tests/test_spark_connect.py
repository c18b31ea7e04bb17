"""The warm Spark Connect server: `kinesim sql` starts it once, later queries reuse it, new
deliveries are visible to the next query, and it stops with the kinesim server."""
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


def _sql(url: str, query: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kinesim", "sql", "--endpoint-url", url, "--format", "json", query],
                          capture_output=True, text=True, timeout=300)
    return time.monotonic() - started, proc


def _deliver(url: str, first: int, count: int, expected_objects: int) -> None:
    fh = client_for(url, "firehose")
    s3 = client_for(url, "s3", s3={"addressing_style": "path"})
    records = [{"Data": json.dumps({"n": i}).encode() + b"\n"} for i in range(first, first + count)]
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
        query = "SELECT count(*) AS n, sum(n) AS total FROM warm"
        cold, first = _sql(server.url, query)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout) == {"n": 100, "total": sum(range(100))}
        assert "Spark is starting" in first.stderr
        directory = state_dir(server_info(server.url)["s3_root"])
        assert running(directory), "no warm server recorded"
        with open(os.path.join(directory, STATE_FILE)) as f:
            recorded = json.load(f)

        _deliver(server.url, 100, 50, 2)  # after the Spark server started
        warm, second = _sql(server.url, query)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout) == {"n": 150, "total": sum(range(150))}
        assert "Spark is starting" not in second.stderr
        print(f"cold {cold:.1f} s, warm {warm:.1f} s")
        assert warm < cold
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
