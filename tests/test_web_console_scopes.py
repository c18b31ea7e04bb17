"""The web console's accounts and regions (issue 34) against a real server: every console route takes
`?account=&region=` (left out: the server's own), a stream of one name in two scopes shows each
scope's own, actions act in the chosen scope, the overview lists the chosen account's buckets only,
`/_kinesim/health` and `/api/scopes` list the scopes in use, and a pair the server has no scope of
is answered 404 UnknownScope without being made."""
from __future__ import annotations

import types
import uuid

import boto3
import pytest
import requests
from botocore.config import Config

from conftest import client_for, start_server
from console_api import ConsoleApi
from kinesim.webconsole.stream_readers import LagHistory

OWN = {"account": "000000000000", "region": "us-east-1"}        # the server's defaults
OTHER = {"account": "111111111111", "region": "eu-west-1"}      # a 12-digit key id is the account
UNKNOWN = {"account": "999999999999", "region": "eu-west-1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


def client_of(server, service: str, scope: dict, **config):
    return boto3.client(service, endpoint_url=server.url, region_name=scope["region"],
                        aws_access_key_id=scope["account"], aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}, **config))


@pytest.fixture(scope="module")
def streams(server):
    """"same-name" in the server's own scope (1 shard) and in OTHER (3 shards), and a stream only
    OTHER has."""
    own, other = client_for(server.url), client_of(server, "kinesis", OTHER)
    for client, name, shards in ((own, "same-name", 1), (other, "same-name", 3), (other, "only-there", 1)):
        client.create_stream(StreamName=name, ShardCount=shards)
        client.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    return own, other


@pytest.fixture
def console(server):
    return ConsoleApi(server.url)


def test_a_stream_of_one_name_is_each_scopes_own(console, streams):
    default = console.get("/streams/same-name").json()
    own = console.get("/streams/same-name", **OWN).json()
    other = console.get("/streams/same-name", **OTHER).json()
    assert len(default["shards"]) == len(own["shards"]) == 1
    assert default["arn"] == own["arn"] == "arn:aws:kinesis:us-east-1:000000000000:stream/same-name"
    assert len(other["shards"]) == 3
    assert other["arn"] == "arn:aws:kinesis:eu-west-1:111111111111:stream/same-name"
    # one parameter alone: the other is the server's own (111111111111 has nothing in us-east-1)
    assert console.get("/streams/same-name", account=OTHER["account"]).status_code == 404
    assert console.get("/streams/only-there").json()["code"] == "ResourceNotFoundException"


def test_the_overview_lists_the_chosen_scopes_streams(console, streams):
    def names(**scope):
        doc = console.get("/overview", **scope).json()
        assert not doc["errors"]
        return {row["name"]: row for row in next(k for k in doc["kinds"] if k["kind"] == "streams")["rows"]}
    assert set(names()) == set(names(**OWN)) == {"same-name"}
    other = names(**OTHER)
    assert set(other) == {"same-name", "only-there"}
    assert other["same-name"]["figures"]["open_shards"] == 3


def test_actions_act_in_the_chosen_scope(console, streams):
    own, other = streams
    put = console.post("/streams/same-name/put", params=OTHER, json={"partition_key": "k", "data": "for 111"})
    assert put.status_code == 200, put.text
    shard = put.json()["shard"]
    iterator = other.get_shard_iterator(StreamName="same-name", ShardId=shard,
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert [r["Data"] for r in other.get_records(ShardIterator=iterator)["Records"]] == [b"for 111"]
    peek = console.get("/streams/same-name/records", shard=shard, **OTHER).json()
    assert [r["text"] for r in peek["records"]] == ["for 111"]
    # the server's own stream of that name has nothing
    assert console.get("/streams/same-name/records").json()["records"] == []
    put = console.post("/streams/same-name/put", params=UNKNOWN, json={"partition_key": "k", "data": "lost"})
    assert put.status_code == 404 and put.json()["code"] == "UnknownScope"


def test_health_and_the_console_list_the_scopes_in_use(server, streams):
    health = requests.get(server.url + "/_kinesim/health", timeout=30).json()
    assert (health["account_id"], health["region"]) == (OWN["account"], OWN["region"])
    assert health["scopes"][0] == OWN and OTHER in health["scopes"]
    listed = ConsoleApi(server.url).get("/scopes").json()
    assert listed == {"own": OWN, "scopes": health["scopes"]}


def test_an_unknown_pair_is_404_and_is_not_made(server, console, streams):
    for path in ("/overview", "/streams/same-name", "/queues", "/topics", "/log-groups", "/queries",
                 "/functions/nothing", "/delivery-streams/nothing", "/buckets/nothing"):
        answer = console.get(path, **UNKNOWN)
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json()["code"] == "UnknownScope" and "999999999999" in answer.json()["message"]
    assert console.get("/overview", region="ap-south-1").status_code == 404
    # kinesim's own routes that read one scope's state answer the same
    logs = requests.get(server.url + "/_kinesim/logs/nothing", params=UNKNOWN, timeout=30)
    assert logs.status_code == 404 and logs.json()["code"] == "UnknownScope"
    health = requests.get(server.url + "/_kinesim/health", timeout=30).json()
    assert UNKNOWN not in health["scopes"]
    assert {"account": OWN["account"], "region": "ap-south-1"} not in health["scopes"]
    # the page itself is served: its scripts show the error and the header's choice of scopes
    page = requests.get(server.url + "/_kinesim/console/streams/same-name", params=UNKNOWN, timeout=30)
    assert page.status_code == 200 and 'id="scope"' in page.text


def test_the_overview_lists_the_chosen_accounts_buckets(server, console, streams):
    own_bucket, other_bucket = "own-" + uuid.uuid4().hex[:12], "other-" + uuid.uuid4().hex[:12]
    client_for(server.url, "s3", s3={"addressing_style": "path"}).create_bucket(Bucket=own_bucket)
    client_of(server, "s3", OTHER, s3={"addressing_style": "path"}).create_bucket(
        Bucket=other_bucket, CreateBucketConfiguration={"LocationConstraint": OTHER["region"]})

    def buckets(**scope):
        doc = console.get("/overview", **scope).json()
        return {row["name"] for row in next(k for k in doc["kinds"] if k["kind"] == "buckets")["rows"]}
    assert own_bucket in buckets() and other_bucket not in buckets()
    assert other_bucket in buckets(**OTHER) and own_bucket not in buckets(**OTHER)
    # a bucket's page opens whoever owns it (names are global), and says whose it is
    listing = console.get("/buckets/" + other_bucket).json()
    assert (listing["owner"], listing["region"]) == (OTHER["account"], OTHER["region"])


def test_queries_are_the_server_scopes(console, streams):
    doc = console.get("/queries", **OTHER).json()
    assert doc["queries"] == [] and "000000000000" in doc["note"]
    refused = console.post("/queries/any/stop", params=OTHER, json={})
    assert refused.status_code == 404


def test_the_lag_chart_keeps_namesakes_of_two_scopes_apart():
    history = LagHistory()
    own = types.SimpleNamespace(name="same-name", created=1.0,
                                arn="arn:aws:kinesis:us-east-1:000000000000:stream/same-name")
    other = types.SimpleNamespace(name="same-name", created=2.0,
                                  arn="arn:aws:kinesis:eu-west-1:111111111111:stream/same-name")
    history.sample(own, [{"shards": [{"shard": "shardId-000000000000", "ms": 5}]}])
    history.sample(other, [{"shards": [{"shard": "shardId-000000000000", "ms": 7}]}])
    assert history.points(own, ["shardId-000000000000"], 60)["shardId-000000000000"] == [5]
    assert history.points(other, ["shardId-000000000000"], 60)["shardId-000000000000"] == [7]

