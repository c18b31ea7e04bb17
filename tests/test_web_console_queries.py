"""The web console's continuous queries page against a real server and its warm Spark: a running named
query is listed with its rows/s and last batch (from Spark's checkpoint), Stop and Resume go through
the console's actions (`kinesim queries stop|resume` in the background) and the page shows the state
change, and an action without a JSON body is refused with 415."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from conftest import client_for, start_server, wait_for
from kinesim.webconsole import queries

API = "/_kinesim/console/api/queries"
QUERY = "SELECT page, upper(page) AS shouted FROM STREAM clicks"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()  # its Spark stops with it


def put(kinesis, pages: list[str]) -> None:
    kinesis.put_records(StreamName="clicks", Records=[{"Data": json.dumps({"page": p}).encode(), "PartitionKey": p}
                                                      for p in pages])


def query_row(server, name: str) -> dict | None:
    answer = requests.get(server.url + API, timeout=30)
    assert answer.status_code == 200, answer.text
    return {q["name"]: q for q in answer.json()["queries"]}.get(name)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_running_query_listed_then_stopped_and_resumed_through_the_console(server):
    kinesis = client_for(server.url)
    kinesis.create_stream(StreamName="clicks", ShardCount=1)
    kinesis.create_stream(StreamName="views", ShardCount=1)
    put(kinesis, ["/a", "/b", "/a"])
    started = subprocess.run([sys.executable, "-m", "kinesim", "sql", "--continuous", QUERY, "--into", "views",
                              "--name", "per-page", "--schema", "page STRING",
                              "--starting-position", "TRIM_HORIZON", "--endpoint-url", server.url],
                             capture_output=True, text=True, timeout=600)
    assert started.returncode == 0, started.stderr

    # Live figures come from a background `kinesim queries list`: the first polls may still say "checking".
    row = wait_for(lambda: (r := query_row(server, "per-page")) and r["state"] == "running"
                   and r["processed_rows_per_s"] is not None and r, timeout=180, interval=1)
    assert (row["into"], row["into_kind"], row["streams"], row["error"]) == ("views", "stream", ["clicks"], None)
    assert row["last_batch"]["id"] >= 0 and row["last_batch"]["started"] > 0
    first_batch = row["last_batch"]["id"]
    put(kinesis, ["/c"] * 5)
    # The batch that reads them is counted in rows/s (records read by the batches of the last 30 s).
    row = wait_for(lambda: (r := query_row(server, "per-page"))["last_batch"]["id"] > first_batch
                   and r["input_rows_per_s"] > 0 and r, timeout=180, interval=1)
    assert row["input_rows_per_s"] == round(5 / queries.RATE_WINDOW_S, 1)

    overview = requests.get(server.url + "/_kinesim/console/api/overview", timeout=30).json()
    rows = {r["name"]: r for k in overview["kinds"] if k["kind"] == "queries" for r in k["rows"]}
    assert rows["per-page"]["state"] == "running" and "into views" in rows["per-page"]["health"]

    # A form post (or any body that is not declared JSON) does nothing.
    refused = requests.post(server.url + API + "/per-page/stop", data="x", timeout=30,
                            headers={"Content-Type": "text/plain"})
    assert refused.status_code == 415
    assert query_row(server, "per-page")["state"] == "running"
    assert requests.post(server.url + API + "/nope/stop", json={}, timeout=30).status_code == 404

    stop = requests.post(server.url + API + "/per-page/stop", json={}, timeout=30)
    assert stop.status_code == 200 and stop.json() == {"name": "per-page", "action": "stop", "state": "stopping"}
    row = wait_for(lambda: (r := query_row(server, "per-page"))["state"] == "stopped" and r, timeout=180, interval=1)
    assert row["wanted"] == "stopped" and row["action"]["done"] and row["action"]["error"] is None

    resume = requests.post(server.url + API + "/per-page/resume", json={}, timeout=30)
    assert resume.status_code == 200 and resume.json()["state"] == "resuming"
    wait_for(lambda: query_row(server, "per-page")["state"] == "running", timeout=300, interval=1)
    batch = query_row(server, "per-page")["last_batch"]["id"]
    put(kinesis, ["/d"])  # it goes on from its checkpoint
    wait_for(lambda: query_row(server, "per-page")["last_batch"]["id"] > batch, timeout=180, interval=1)
