"""The whole pipeline as README walks a new user through it, every step a `kinesim` command:
deploy template.yaml -> `kinesim put clicks --generate clickstream` -> the Enrich function ->
clicks-enriched -> Firehose -> the clicks-archive bucket -> `kinesim sql` answers exactly."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest

from conftest import start_server
from kinesim.stream_cli.generators import Clickstream

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EVENTS = 3000
SEED = 11


def kinesim(url: str, *args: str, timeout: float = 300, input: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               AWS_DEFAULT_REGION="us-east-1")
    out = subprocess.run([sys.executable, "-m", "kinesim", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=timeout, input=input)
    assert out.returncode == 0, f"kinesim {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def pipeline_server(tmp_path_factory):
    # Firehose's 60 s buffer of template.yaml flushes after 0.6 s.
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


def delivered(url: str, stream: str) -> int:
    with urllib.request.urlopen(f"{url}/_kinesim/firehose/{stream}/metrics", timeout=10) as resp:
        return json.loads(resp.read())["DeliveryToS3.Records"]


def test_readme_pipeline_gives_exact_counts(pipeline_server):
    url = pipeline_server.url
    kinesim(url, "deploy", "template.yaml")
    put = kinesim(url, "put", "clicks", "--generate", "clickstream", "--count", str(EVENTS), "--seed", str(SEED))
    assert f"put {EVENTS} records" in put.stderr

    deadline = time.time() + 120
    while delivered(url, "clicks-archive") < EVENTS and time.time() < deadline:
        time.sleep(0.5)
    assert delivered(url, "clicks-archive") == EVENTS

    expected = Counter(event["page"] for event in islice(Clickstream(seed=SEED), EVENTS))
    out = kinesim(url, "sql", "--format", "json",
                  "SELECT page, page_category, count(*) AS views FROM clicks_archive GROUP BY page, page_category")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert {row["page"]: row["views"] for row in rows} == dict(expected)
    # The partition column comes from the bucket's page_category=... directories.
    assert {row["page_category"] for row in rows} <= {"home", "product", "cart", "checkout", "search", "content",
                                                        "support", "account", "other"}
    assert sum(row["views"] for row in rows) == EVENTS


def clicks_in(url: str) -> list[dict]:
    """Every click on the `clicks` stream, read from its start."""
    import boto3
    kinesis = boto3.client("kinesis", endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                           aws_secret_access_key="test")
    out = []
    for shard in kinesis.list_shards(StreamName="clicks")["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName="clicks", ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while True:
            page = kinesis.get_records(ShardIterator=iterator)
            out += [json.loads(r["Data"]) for r in page["Records"]]
            if page["MillisBehindLatest"] == 0:
                break
            iterator = page["NextShardIterator"]
    return out


@pytest.mark.timeout(900)
def test_views_per_minute_query_feeds_an_archived_stream(pipeline_server):
    """The seeds' classic pipeline: clicks -> a continuous windowed count -> a stream -> Firehose ->
    S3 -> SQL, with the exact number of views per page and minute of event time."""
    url = pipeline_server.url
    kinesim(url, "deploy", "template.yaml")
    if not clicks_in(url):
        kinesim(url, "put", "clicks", "--generate", "clickstream", "--count", str(EVENTS), "--seed", str(SEED))
    clicks = clicks_in(url)
    deadline = time.time() + 120  # the archive is the join's table: all of it delivered first
    while delivered(url, "clicks-archive") < len(clicks) and time.time() < deadline:
        time.sleep(0.5)
    # A click ten minutes later moves the watermark past every minute of the others.
    closing = {"user_id": "u-close", "page": "/closing", "ts": max(c["ts"] for c in clicks) + 600}
    kinesim(url, "put", "clicks", "--key-field", "user_id", input=json.dumps(closing) + "\n")
    expected = Counter((c["page"], int(c["ts"] // 60 * 60)) for c in clicks)  # the closing click has no category

    kinesim(url, "sql", "--continuous", "--name", "views-per-minute", "--into", "page-views-per-minute",
            "--event-time", "ts", "--watermark", "1 minute", "--starting-position", "TRIM_HORIZON",
            "--partition-key", "page",
            # A stream-table join: each page's category, from the archive's partition directories.
            "SELECT c.page, a.page_category, window.start AS minute, count(*) AS views FROM STREAM clicks c "
            "JOIN (SELECT DISTINCT page, page_category FROM clicks_archive) a ON c.page = a.page "
            "GROUP BY window(c.ts, '1 minute'), c.page, a.page_category")
    deadline = time.time() + 300
    while delivered(url, "page-views-archive") < len(expected) and time.time() < deadline:
        time.sleep(0.5)
    assert delivered(url, "page-views-archive") == len(expected), \
        kinesim(url, "queries", "show", "views-per-minute").stdout[-3000:]

    out = kinesim(url, "sql", "--format", "json",
                  "SELECT page, page_category, unix_timestamp(to_timestamp(minute)) AS minute, views "
                  "FROM page_views_archive")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    categories = {json.loads(line)["page"]: json.loads(line)["page_category"] for line in kinesim(
        url, "sql", "--format", "json", "SELECT DISTINCT page, page_category FROM clicks_archive").stdout.splitlines()}
    assert all(r["page_category"] == categories[r["page"]] for r in rows)
    assert Counter({(r["page"], r["minute"]): r["views"] for r in rows}) == expected
    assert len(rows) == len(expected)  # each window once
    kinesim(url, "queries", "delete", "views-per-minute")
