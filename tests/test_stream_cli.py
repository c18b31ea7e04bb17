"""`kinesim put` and `kinesim tail` as users run them: subprocesses against a real server, checked
with boto3."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import client_for, ctrl_c_reaches_child, start_server
from kinesim.cli import build_parser, main
from kinesim.stream_cli.generators import SITE, Clickstream
from kinesim.server import free_port

FIELDS = {"event_id", "user_id", "session_id", "page", "referrer", "ts", "device", "country", "duration_ms"}
SUMMARY = re.compile(r"put (\d+) records? \((\d+\.\d) MB\) to (\S+) in (\d+\.\d) s: ([\d,]+) records/s")


def kinesim(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinesim", *args], input=input, capture_output=True,
                          text=True, encoding="utf-8", timeout=60)


def popen(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kinesim", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", preexec_fn=ctrl_c_reaches_child)


def read_all(kinesis, stream: str) -> dict[str, list[dict]]:
    """Every record of every shard, in shard order."""
    out = {}
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records: list[dict] = []
        while iterator:
            response = kinesis.get_records(ShardIterator=iterator)
            records += response["Records"]
            if not response["Records"] and response["MillisBehindLatest"] == 0:
                break
            iterator = response.get("NextShardIterator")
        out[shard["ShardId"]] = records
    return out


def put_numbered(kinesis, stream: str, keys: list[str], per_key: int, tag: str = "", size: int = 0) -> list[str]:
    """Put `per_key` records for each key, data "key:tag:i" (padded to `size`); the data in put order."""
    data = [f"{key}:{tag}:{i}".ljust(size, ".") for i in range(per_key) for key in keys]
    for start in range(0, len(data), 500):
        chunk = data[start:start + 500]
        response = kinesis.put_records(StreamName=stream, Records=[
            {"Data": d.encode(), "PartitionKey": d.split(":")[0]} for d in chunk])
        assert response["FailedRecordCount"] == 0
    return data


def assert_per_key_order(datas: list[str]) -> None:
    """Within each key, records appear in the order they were put (tag order, then number)."""
    seen: dict[str, tuple] = {}
    for d in datas:
        key, tag, number = d.rstrip(".").split(":")
        position = (tag, int(number))
        assert key not in seen or seen[key] < position, (key, seen[key], position)
        seen[key] = position


# --- put ---

def test_put_from_stdin_puts_each_line_exactly(server, kinesis, make_stream):
    stream = make_stream(2)
    lines = ["plain text", "ünïcödé ✓ 日本", "", "  spaces kept  ", "x" * 5000, '{"json": true}'] + \
            [f"line {i}" for i in range(1200)]  # more than one PutRecords batch
    out = kinesim("put", stream, "--partition-key", "one-key", "--endpoint-url", server.url,
                  input="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr
    summary = SUMMARY.search(out.stderr)
    assert summary and summary[1] == str(len(lines)) and summary[3] == stream, out.stderr
    shards = read_all(kinesis, stream)
    # One partition key: one shard, in the order read.
    records = [r for rs in shards.values() for r in rs]
    assert [r["Data"].decode() for r in records] == lines
    assert {r["PartitionKey"] for r in records} == {"one-key"}
    assert sum(1 for rs in shards.values() if rs) == 1


def test_put_random_keys_spread_over_shards_and_crlf_is_a_line_ending(server, kinesis, make_stream):
    stream = make_stream(4)
    lines = [f"record {i}" for i in range(400)]
    out = kinesim("put", stream, "--endpoint-url", server.url, input="\r\n".join(lines) + "\r\n")
    assert out.returncode == 0, out.stderr
    shards = read_all(kinesis, stream)
    assert sorted(r["Data"].decode() for rs in shards.values() for r in rs) == sorted(lines)
    assert all(len(rs) > 50 for rs in shards.values()), {s: len(rs) for s, rs in shards.items()}


def test_put_key_field_keys_records_and_stops_at_a_line_that_is_not_json(server, kinesis, make_stream):
    stream = make_stream(3)
    lines = [json.dumps({"user": f"u{i % 5}", "n": i}) for i in range(50)]
    out = kinesim("put", stream, "--key-field", "user", "--endpoint-url", server.url, input="\n".join(lines))
    assert out.returncode == 0, out.stderr
    records = [r for rs in read_all(kinesis, stream).values() for r in rs]
    assert len(records) == 50
    for r in records:
        assert json.loads(r["Data"])["user"] == r["PartitionKey"]
    for user in {r["PartitionKey"] for r in records}:  # one key's records stay in order
        ns = [json.loads(r["Data"])["n"] for r in records if r["PartitionKey"] == user]
        assert ns == sorted(ns)

    bad = make_stream(1)
    out = kinesim("put", bad, "--key-field", "user", "--endpoint-url", server.url,
                  input='{"user": "a"}\n{"user": "b"}\nnot json\n{"user": "c"}\n')
    assert out.returncode == 1
    assert "line 3 is not JSON, so it has no field 'user'" in out.stderr
    assert "put 2 records" in out.stderr  # what came before the bad line was sent
    assert [r["Data"] for rs in read_all(kinesis, bad).values() for r in rs] == [b'{"user": "a"}', b'{"user": "b"}']


def test_put_generate_clickstream_count_and_seed(server, kinesis, make_stream):
    stream = make_stream(2)
    out = kinesim("put", stream, "--generate", "clickstream", "--count", "1234", "--seed", "7",
                  "--endpoint-url", server.url)
    assert out.returncode == 0, out.stderr
    assert re.search(rf"^put 1234 records \(0\.\d MB\) to {stream} in \d+\.\d s: [\d,]+ records/s$", out.stderr,
                     re.M), out.stderr
    records = [r for rs in read_all(kinesis, stream).values() for r in rs]
    assert len(records) == 1234
    events = []
    for r in records:
        event = json.loads(r["Data"])
        assert set(event) == FIELDS
        assert r["PartitionKey"] == event["user_id"]  # a user's clicks stay in order
        assert isinstance(event["ts"], float) and abs(event["ts"] - time.time()) < 600 and event["page"].startswith("/")
        assert isinstance(event["duration_ms"], int) and event["duration_ms"] > 0
        events.append(event)
    assert len({e["event_id"] for e in events}) == 1234
    # --seed: the same events as the generator makes in-process with that seed (all but ts).
    expected = [dict(e, ts=None) for _, e in zip(range(1234), Clickstream(seed=7))]
    key = lambda e: e["event_id"]  # noqa: E731
    assert sorted((dict(e, ts=None) for e in events), key=key) == sorted(expected, key=key)


def test_clickstream_is_deterministic_and_sessions_hang_together():
    first = [dict(e, ts=None) for _, e in zip(range(2000), Clickstream(seed=3))]
    assert first == [dict(e, ts=None) for _, e in zip(range(2000), Clickstream(seed=3))]
    assert first != [dict(e, ts=None) for _, e in zip(range(2000), Clickstream(seed=4))]
    last_page: dict[str, str] = {}
    continued = 0
    for e in first:
        if e["session_id"] in last_page:  # within a session, the referrer is the previous page
            assert e["referrer"] == SITE + last_page[e["session_id"]]
            continued += 1
        else:
            assert e["referrer"] is None or not e["referrer"].startswith(SITE)
        last_page[e["session_id"]] = e["page"]
    assert continued > 500
    pages = {e["page"] for e in first}
    assert {"/home", "/cart", "/checkout"} <= pages and any(p.startswith("/products/") for p in pages)


def test_put_retries_throttled_records(tmp_path_factory):
    limited = start_server(tmp_path_factory, enforce_limits=True)
    try:
        kinesis = client_for(limited.url)
        kinesis.create_stream(StreamName="limited", ShardCount=1)
        # 1,000 records a second per shard: 2,100 records span three one-second windows, so most are
        # throttled at first and the put takes at least a second.
        lines = [f"r{i}" for i in range(2100)]
        out = kinesim("put", "limited", "--partition-key", "k", "--endpoint-url", limited.url,
                      input="\n".join(lines) + "\n")
        assert out.returncode == 0, out.stderr
        summary = SUMMARY.search(out.stderr)
        assert summary and summary[1] == "2100" and float(summary[4]) >= 0.9, out.stderr
        records = [r for rs in read_all(kinesis, "limited").values() for r in rs]
        assert sorted(r["Data"].decode() for r in records) == sorted(lines)
    finally:
        limited.stop()


def test_put_ctrl_c_sends_what_was_generated(server, kinesis, make_stream):
    stream = make_stream(1)
    proc = popen("put", stream, "--generate", "clickstream", "--rate", "200/s", "--endpoint-url", server.url)
    # Interrupt once it is producing (not while it is still starting up on a loaded machine).
    deadline = time.time() + 120
    while not read_all(kinesis, stream)["shardId-000000000000"] and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    summary = SUMMARY.search(err)
    assert summary, err
    put = int(summary[1])
    assert put > 0
    assert len(read_all(kinesis, stream)["shardId-000000000000"]) == put


# --- tail ---

def test_tail_no_follow_prints_every_record_once_in_shard_order(server, kinesis, make_stream):
    stream = make_stream(3)
    put = put_numbered(kinesis, stream, [f"k{i}" for i in range(10)], 30)
    out = kinesim("tail", stream, "--from", "TRIM_HORIZON", "--no-follow", "--format", "json",
                  "--endpoint-url", server.url)
    assert out.returncode == 0, out.stderr
    printed = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted(p["data"] for p in printed) == sorted(put)  # each exactly once
    stored = read_all(kinesis, stream)
    for shard_id, records in stored.items():
        mine = [p for p in printed if p["shardId"] == shard_id]
        assert [p["sequenceNumber"] for p in mine] == [r["SequenceNumber"] for r in records]
        assert [p["partitionKey"] for p in mine] == [r["PartitionKey"] for r in records]
        assert all(abs(p["approximateArrivalTimestamp"] - r["ApproximateArrivalTimestamp"].timestamp()) < 0.002
                   for p, r in zip(mine, records))
    assert_per_key_order([p["data"] for p in printed])


def test_tail_follows_a_split(server, kinesis, make_stream):
    stream = make_stream(1)
    keys = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    proc = popen("tail", stream, "--from", "TRIM_HORIZON", "--format", "json", "--max", "120",
                 "--endpoint-url", server.url)
    try:
        before = put_numbered(kinesis, stream, keys, 10, "a-before")
        # Split only once the parent is being read: the tail must notice it close and go on.
        lines = [proc.stdout.readline() for _ in before]
        kinesis.split_shard(StreamName=stream, ShardToSplit="shardId-000000000000",
                            NewStartingHashKey=str(2 ** 127))
        after = put_numbered(kinesis, stream, keys, 10, "b-after")
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    printed = [json.loads(line) for line in lines + out.splitlines()]
    assert sorted(p["data"] for p in printed) == sorted(before + after)
    assert {p["shardId"] for p in printed if "before" in p["data"]} == {"shardId-000000000000"}
    assert {p["shardId"] for p in printed if "after" in p["data"]} == {"shardId-000000000001", "shardId-000000000002"}
    assert_per_key_order([p["data"] for p in printed])  # a parent's records before its children's

    # Read again from the start: the closed parent first, then its children.
    again = kinesim("tail", stream, "--from", "TRIM_HORIZON", "--no-follow", "--endpoint-url", server.url)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == sorted(before + after)
    assert_per_key_order(again.stdout.splitlines())


def test_tail_max_stops_after_n_records(server, kinesis, make_stream):
    stream = make_stream(2)
    put_numbered(kinesis, stream, ["a", "b", "c"], 20)
    out = kinesim("tail", stream, "--from", "TRIM_HORIZON", "--max", "7", "--endpoint-url", server.url)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 7


def test_tail_latest_prints_only_records_put_after_it_started(server, kinesis, make_stream):
    stream = make_stream(2)
    put_numbered(kinesis, stream, ["old"], 5, "old")
    proc = popen("tail", stream, "--max", "1", "--endpoint-url", server.url)
    try:
        deadline, i = time.monotonic() + 120, 0
        while proc.poll() is None and time.monotonic() < deadline:  # until it has started and printed one
            kinesis.put_record(StreamName=stream, Data=f"new {i}".encode(), PartitionKey="new")
            i += 1
            time.sleep(0.2)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert re.fullmatch(r"new \d+\n", out)


def test_tail_at_timestamp(server, kinesis, make_stream):
    stream = make_stream(2)
    put_numbered(kinesis, stream, ["k1", "k2"], 5, "early")
    time.sleep(0.05)
    since = time.time()
    time.sleep(0.05)
    late = put_numbered(kinesis, stream, ["k1", "k2"], 5, "late")
    out = kinesim("tail", stream, "--timestamp", str(since), "--no-follow", "--endpoint-url", server.url)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == sorted(late)


def test_tail_prints_data_that_is_not_utf8_with_replacement(server, kinesis, make_stream):
    stream = make_stream(1)
    kinesis.put_record(StreamName=stream, Data=b"caf\xe9 \xff ok", PartitionKey="k")
    out = kinesim("tail", stream, "--from", "TRIM_HORIZON", "--no-follow", "--endpoint-url", server.url)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "caf\ufffd \ufffd ok\n"


def test_tail_ctrl_c_exits_cleanly(server, kinesis, make_stream):
    stream = make_stream(1)
    kinesis.put_record(StreamName=stream, Data=b"first", PartitionKey="k")
    proc = popen("tail", stream, "--from", "TRIM_HORIZON", "--endpoint-url", server.url)
    try:
        first = proc.stdout.readline()  # printed: it is following the stream now
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert first == "first\n", err
    assert proc.returncode == 0
    assert err == "" and out == ""


# Ctrl-C at a chosen moment of the start-up, wherever a loaded machine makes it arrive: the signal
# is sent from inside the process (os.kill is delivered before it returns), so the moment is exact.
EARLY_CTRL_C = """
import builtins, os, signal, sys
moment = sys.argv.pop(1)
if moment == "importing":  # while boto3 imports (main imports the commands' modules)
    real_import = builtins.__import__
    def interrupting_import(name, *args, **kwargs):
        if name == "boto3":
            builtins.__import__ = real_import
            os.kill(os.getpid(), signal.SIGINT)
        return real_import(name, *args, **kwargs)
    builtins.__import__ = interrupting_import
else:  # while the stream is looked up, before the command has taken Ctrl-C over
    import importlib
    command = importlib.import_module("kinesim.stream_cli." + sys.argv[1])
    real_describe = command.describe_stream
    def interrupting_describe(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real_describe(*args, **kwargs)
    command.describe_stream = interrupting_describe
from kinesim.cli import build_parser, main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("moment", ["importing", "looking up the stream"])
@pytest.mark.parametrize("command", ["tail", "put"])
def test_an_early_ctrl_c_exits_130_quietly(server, make_stream, command, moment):
    stream = make_stream(1)
    out = subprocess.run([sys.executable, "-c", EARLY_CTRL_C, moment, command, stream, "--endpoint-url",
                          server.url], input="never sent\n", capture_output=True, text=True, timeout=60,
                         preexec_fn=ctrl_c_reaches_child)
    assert (out.returncode, out.stderr, out.stdout) == (130, "", "")


def test_tail_into_a_closed_pipe_exits_quietly(server, kinesis, make_stream):
    stream = make_stream(1)
    put_numbered(kinesis, stream, ["k"], 300, size=1000)  # more than a pipe holds
    proc = popen("tail", stream, "--from", "TRIM_HORIZON", "--endpoint-url", server.url)
    first = proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    proc.wait(timeout=30)
    err = proc.stderr.read()
    assert first.startswith("k::0")
    assert proc.returncode == 0 and err == ""


# --- errors and help ---

@pytest.mark.parametrize("command", [["put"], ["tail", "--from", "TRIM_HORIZON"]])
def test_missing_stream_says_how_to_create_it(server, command):
    out = kinesim(*command, "no-such-stream", "--endpoint-url", server.url, input="x\n")
    assert out.returncode == 1
    assert f"stream 'no-such-stream' does not exist on {server.url}" in out.stderr
    assert f"aws --endpoint-url {server.url} kinesis create-stream --stream-name no-such-stream --shard-count 1" \
        in out.stderr
    assert "kinesim deploy" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["put", "tail"])
def test_unreachable_server_asks_whether_it_runs(command):
    url = f"http://127.0.0.1:{free_port()}"
    out = kinesim(command, "clicks", "--endpoint-url", url, input="x\n")
    assert out.returncode == 1
    assert f"cannot reach kinesim at {url}; is `kinesim serve` running?" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["put", "tail"])
def test_help_explains_with_examples(command, capsys):
    found = signal.getsignal(signal.SIGINT)  # Python's handler, or SIG_IGN in a background job
    with pytest.raises(SystemExit) as exit:
        main([command, "--help"])
    assert exit.value.code == 0
    assert signal.getsignal(signal.SIGINT) is found  # as main found it
    text = capsys.readouterr().out
    assert "examples:" in text and f"kinesim {command} clicks" in text and "--endpoint-url" in text


def test_a_mistyped_option_is_not_taken_for_an_abbreviation(capsys):
    # `--form` was taken for --format and answered "argument --format: invalid choice".
    with pytest.raises(SystemExit) as exit:
        main(["tail", "clicks", "--form", "TRIM_HORIZON"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "usage: kinesim tail" in err
    assert "kinesim tail: error: unrecognized arguments: --form TRIM_HORIZON (did you mean --format?)" in err
    assert "invalid choice" not in err


def test_no_command_takes_abbreviated_options():
    from kinesim.deploy import cli as deploy_cli
    parser, sub = build_parser([])
    parsers = [parser, *sub.choices.values(), deploy_cli.parser()]
    assert {"serve", "deploy", "logs", "put", "tail", "sql", "queries"} <= set(sub.choices)
    for p in parsers:
        assert p.allow_abbrev is False, p.prog
        for option in (o for action in p._actions for o in action.option_strings if o.startswith("--")):
            # Each option's prefix means only the option of that exact name, if there is one.
            prefix = option[:-1]
            assert p._parse_optional(prefix)[0] is p._option_string_actions.get(prefix), (p.prog, option)
