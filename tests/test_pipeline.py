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
from kinesim.console.generators import Clickstream

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EVENTS = 3000
SEED = 11


def kinesim(url: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               AWS_DEFAULT_REGION="us-east-1")
    out = subprocess.run([sys.executable, "-m", "kinesim", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=timeout)
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
