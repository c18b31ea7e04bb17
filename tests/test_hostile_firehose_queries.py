"""Firehose under hostile MetadataExtractionQuery values (issue 18): a client's jq query runs in a
worker process (`firehose.jq_runner`), never in the server's interpreter. Before, the server ran
libjq itself: `def f: f; f` or `last(range(1e12))` froze the whole server from CreateDeliveryStream
alone, and `def f: [f]; f` allocated until libjq aborted it.

- at CreateDeliveryStream, a query that does not end on null (in time or memory) is an invalid
  query (InvalidArgumentException), and the server answers other calls meanwhile;
- at delivery, a record on which the query does not end goes to the error output
  (processing-failed, DynamicPartitioning.MetadataExtractionFailed, as any record whose keys
  cannot be extracted) and the other records of the batch are delivered;
- the workers start with the first query, and end with the server, even one killed with -9;
- a query sees neither the server's environment nor its files.
The server runs with --firehose-interval-scale 0.01, as in test_firehose_api.py.
"""
from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
import uuid
from contextlib import suppress

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import client_for, start_server, wait_for
from firehose.jq_runner import JqPool, JqUnavailable
from test_firehose_api import ROLE, SCALE, body, keys_in, s3_client

SECRET_VARIABLE = "KINESIM_TEST_SECRET"
# Valid on null ({team: null}, so CreateDeliveryStream takes it), endless on some records.
DATA_DEPENDENT = ('{team: (if .spin then last(range(1e12)) elif .grow then (def f: [f]; f) '
                  'elif .env then ($ENV.' + SECRET_VARIABLE + ' // "unset") else .team end)}')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    os.environ[SECRET_VARIABLE] = "s3cr3t"  # in the server's environment, which queries must not see
    try:
        proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    finally:
        del os.environ[SECRET_VARIABLE]
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def firehose(server):
    return client_for(server.url, "firehose")


@pytest.fixture(scope="module")
def s3(server):
    return s3_client(server.url)


def healthy(server) -> bool:
    return requests.get(server.url + "/_kinesim/health", timeout=10).ok


def destination(s3, query: str) -> dict:
    bucket = "bkt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    return {"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}", "Prefix": "data/!{partitionKeyFromQuery:team}/",
            "ErrorOutputPrefix": "errors/!{firehose:error-output-type}/",
            "BufferingHints": {"SizeInMBs": 64, "IntervalInSeconds": 60},
            "DynamicPartitioningConfiguration": {"Enabled": True},
            "ProcessingConfiguration": {"Enabled": True, "Processors": [{"Type": "MetadataExtraction", "Parameters": [
                {"ParameterName": "MetadataExtractionQuery", "ParameterValue": query},
                {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]}]}}


def create(firehose, s3, query: str) -> tuple[str, str]:
    name = "fh-" + uuid.uuid4().hex[:10]
    dest = destination(s3, query)
    firehose.create_delivery_stream(DeliveryStreamName=name, ExtendedS3DestinationConfiguration=dest)
    return name, dest["BucketARN"].split(":::")[1]


def refused(firehose, s3, query: str) -> str:
    with pytest.raises(ClientError) as caught:
        create(firehose, s3, query)
    error = caught.value.response["Error"]
    assert error["Code"] == "InvalidArgumentException", error
    return error["Message"]


def jq_workers(server_pid: int) -> list[int]:
    """The server's jq worker processes (running, not zombies)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if int(stat[1]) == server_pid and stat[0] != "Z" and b"firehose.jq_worker" in command:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------ CreateDeliveryStream


@pytest.mark.timeout(60)
@pytest.mark.parametrize("query", ["{team: (def f: f; f)}", "{team: last(range(1e12))}", "def f: f; f",
                                   "{team: [range(1e12)]}", "{team: (def f: [f]; f)}"])
def test_a_query_that_does_not_end_is_refused_at_create(server, firehose, s3, query):
    assert refused(firehose, s3, query) == f"Invalid MetadataExtractionQuery: {query}"
    assert healthy(server)
    assert firehose.list_delivery_streams()["DeliveryStreamNames"] is not None


@pytest.mark.timeout(60)
def test_other_calls_are_answered_while_a_query_runs(server, firehose, s3):
    outcome: dict[str, str] = {}

    def create_hostile() -> None:
        client = client_for(server.url, "firehose", read_timeout=50)
        outcome["message"] = refused(client, s3, "{team: last(range(1e12))}")

    creating = threading.Thread(target=create_hostile)
    creating.start()
    time.sleep(0.3)  # the query is running by now (before: in the server, holding its interpreter)
    answered_while_running = []
    while creating.is_alive() and len(answered_while_running) < 3:
        firehose.list_delivery_streams()
        answered_while_running.append(creating.is_alive())
    creating.join(50)
    assert any(answered_while_running)
    assert outcome["message"].startswith("Invalid MetadataExtractionQuery")


def test_valid_queries_are_still_checked_against_the_prefix(firehose, s3):
    assert refused(firehose, s3, "{team: .team, extra: .x}") == (
        "MetaDataExtraction JQ Query can't contain keys that are not present in the S3 Prefix expression")
    assert refused(firehose, s3, "{team: .team").startswith("Invalid MetadataExtractionQuery")
    create(firehose, s3, '{team: .ts | strftime("%Y")}')  # fails on null: its keys are read from its text


# ------------------------------------------------------------------ delivery


@pytest.mark.timeout(120)
def test_records_the_query_does_not_end_on_go_to_the_error_output(server, firehose, s3):
    name, bucket = create(firehose, s3, DATA_DEPENDENT)
    records = [b'{"team": "red"}', b'{"spin": true}', b'{"team": "blue"}', b'{"grow": true}', b'{"env": true}',
               b'{"team": "green"}']
    firehose.put_record_batch(DeliveryStreamName=name, Records=[{"Data": r} for r in records])

    def delivered() -> dict[str, bytes]:
        return {key.split("/")[1]: body(s3, bucket, key) for key in keys_in(s3, bucket, "data/")}

    def failed() -> list[dict]:
        return [json.loads(line) for key in keys_in(s3, bucket, "errors/")
                for line in body(s3, bucket, key).splitlines()]

    wait_for(lambda: len(delivered()) == 4 and len(failed()) == 2, timeout=100)
    assert delivered() == {"red": records[0], "blue": records[2], "green": records[5], "unset": records[4]}
    assert all(key.startswith("errors/processing-failed/") for key in keys_in(s3, bucket, "errors/"))
    outcome = {base64.b64decode(d["rawData"]): (d["errorCode"], d["errorMessage"]) for d in failed()}
    prefix = "Failed to execute the MetadataExtractionQuery: the query "
    assert outcome[records[1]] == ("DynamicPartitioning.MetadataExtractionFailed", prefix + "ran longer than 1 s")
    # The growing query meets whichever limit comes first on this machine: memory or CPU time.
    assert outcome[records[3]] in {("DynamicPartitioning.MetadataExtractionFailed", prefix + ending)
                                   for ending in ("needed more than 512 MiB of memory", "ran longer than 1 s")}
    assert healthy(server)


# ------------------------------------------------------------------ the workers' lives


@pytest.mark.timeout(120)
def test_workers_start_with_the_first_query_and_stop_with_the_server(tmp_path_factory):
    server = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    try:
        assert jq_workers(server.proc.pid) == []  # none before a query needs one
        create(client_for(server.url, "firehose"), s3_client(server.url), "{team: .team}")
        workers = jq_workers(server.proc.pid)
        assert len(workers) == 1
    finally:
        server.stop()
    wait_for(lambda: not any(alive(pid) for pid in workers), timeout=10)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("busy", [False, True], ids=["idle", "mid-query"])
def test_workers_do_not_outlive_a_killed_server(tmp_path_factory, busy):
    """An idle worker sees its stdin close; one running a query ends at its time limit."""
    server = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    fh = client_for(server.url, "firehose", read_timeout=5)
    s3 = s3_client(server.url)

    def create_hostile() -> None:
        with suppress(Exception):  # the server is killed while it answers
            create(fh, s3, "{team: last(range(1e12))}")

    try:
        if busy:
            for _ in range(2):
                threading.Thread(target=create_hostile, daemon=True).start()
        else:
            create(fh, s3, "{team: .team}")
        workers = wait_for(lambda: len(w := jq_workers(server.proc.pid)) == (2 if busy else 1) and w, timeout=10)
    finally:
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    wait_for(lambda: not any(alive(pid) for pid in workers), timeout=10)


# ------------------------------------------------------------------ what a query can see


@pytest.fixture
def pool():
    jq = JqPool()
    yield jq
    jq.close()


def test_a_query_reads_no_file_of_the_host(pool, tmp_path, monkeypatch):
    """jq's `import "name" as $x;` reads name.json from the current directory: the server's."""
    (tmp_path / "secret.json").write_text('{"password": "s3cr3t"}')
    monkeypatch.chdir(tmp_path)
    assert "module not found: secret" in pool.inspect('import "secret" as $s; {team: $s[0].password}')["compile_error"]


def test_a_query_sees_no_variable_of_the_servers_environment(pool, monkeypatch):
    monkeypatch.setenv(SECRET_VARIABLE, "s3cr3t")
    [reply] = pool.partition_keys('{names: ($ENV | keys | join(","))}', [b"{}"])
    assert set(reply["keys"]["names"].split(",")) <= {"TZ", "LC_CTYPE", "LD_LIBRARY_PATH"}  # (LC_CTYPE: Python sets it)


def test_only_the_records_a_query_does_not_end_on_fail():
    """Replies come 50 at a time: the records around one that ended a worker are evaluated again,
    one by one, so that no other record takes the blame."""
    quick = JqPool(time_limit_s=0.2)
    try:
        records = [json.dumps({"team": f"t{n}"}).encode() for n in range(130)]
        hostile = {49, 77, 78, 129}
        for n in hostile:
            records[n] = b'{"spin": true}'
        replies = quick.partition_keys(DATA_DEPENDENT, records)
    finally:
        quick.close()
    assert [n for n, reply in enumerate(replies) if "error" in reply] == sorted(hostile)
    assert {replies[n]["error"] for n in hostile} == {
        "Failed to execute the MetadataExtractionQuery: the query ran longer than 0.2 s"}
    assert all(replies[n] == {"keys": {"team": f"t{n}"}} for n in range(130) if n not in hostile)


def test_a_closed_pool_routes_no_record(pool):
    pool.partition_keys("{team: .team}", [b'{"team": "red"}'])
    pool.close()
    with pytest.raises(JqUnavailable):
        pool.partition_keys("{team: .team}", [b'{"team": "red"}'])
