"""CloudWatch Logs through the real server with boto3: groups, streams, events, filter patterns,
retention, tags, functions' logs, the calls `aws logs tail --follow` makes, restarts."""
from __future__ import annotations

import io
import re
import subprocess
import sys
import time
import uuid
import zipfile
from collections import defaultdict

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.server import ServerProcess

DAY_MS = 86_400_000
ACCOUNT = "000000000000"


@pytest.fixture(scope="module")
def logs(server):
    return client_for(server.url, "logs")


@pytest.fixture
def group(logs):
    name = f"/test/{uuid.uuid4().hex[:10]}"
    logs.create_log_group(logGroupName=name)
    yield name
    try:
        logs.delete_log_group(logGroupName=name)
    except logs.exceptions.ResourceNotFoundException:
        pass


def now_ms() -> int:
    return int(time.time() * 1000)


def error(call, **kw) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def put(logs, group: str, stream: str, messages: list[str], start: int | None = None, step: int = 1) -> int:
    """Put messages one millisecond (or `step`) apart, making the stream if need be; the first timestamp."""
    if stream not in {s["logStreamName"] for s in logs.describe_log_streams(logGroupName=group)["logStreams"]}:
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
    start = now_ms() - len(messages) * step if start is None else start
    logs.put_log_events(logGroupName=group, logStreamName=stream,
                        logEvents=[{"timestamp": start + i * step, "message": m} for i, m in enumerate(messages)])
    return start


def all_filtered(logs, **kw) -> list[dict]:
    events = []
    for page in logs.get_paginator("filter_log_events").paginate(**kw):
        events.extend(page["events"])
    return events


# --- groups -------------------------------------------------------------------------------------


def test_log_groups_create_describe_delete(logs):
    base = f"/grp/{uuid.uuid4().hex[:8]}"
    names = [f"{base}/a", f"{base}/b", f"{base}/C-x", f"{base}/d"]
    for n in names:
        logs.create_log_group(logGroupName=n, tags={"team": "data"})
    assert error(logs.create_log_group, logGroupName=names[0]) == (
        "ResourceAlreadyExistsException", "The specified log group already exists")
    found = logs.describe_log_groups(logGroupNamePrefix=base)["logGroups"]
    assert [g["logGroupName"] for g in found] == sorted(names)
    g = found[0]
    assert g["arn"] == f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{sorted(names)[0]}:*"
    assert g["logGroupArn"] == g["arn"][:-2] and g["logGroupClass"] == "STANDARD"
    assert g["metricFilterCount"] == 0 and g["storedBytes"] == 0 and "retentionInDays" not in g
    assert abs(g["creationTime"] - now_ms()) < 60_000
    # Paging: one at a time, every group once.
    seen, token = [], None
    while True:
        page = logs.describe_log_groups(logGroupNamePrefix=base, limit=1, **({"nextToken": token} if token else {}))
        seen += [x["logGroupName"] for x in page["logGroups"]]
        token = page.get("nextToken")
        if not token:
            break
    assert seen == sorted(names)
    # The pattern matches anywhere in the name, ignoring case.
    by_pattern = logs.describe_log_groups(logGroupNamePattern=base.split("/")[-1] + "/c-X")["logGroups"]
    assert [x["logGroupName"] for x in by_pattern] == [names[2]]
    assert error(logs.describe_log_groups, logGroupNamePrefix=base, logGroupNamePattern="x") == (
        "InvalidParameterException",
        "LogGroup name prefix and LogGroup name pattern are mutually exclusive parameters.")
    for n in names:
        logs.delete_log_group(logGroupName=n)
    assert logs.describe_log_groups(logGroupNamePrefix=base)["logGroups"] == []
    assert error(logs.delete_log_group, logGroupName=names[0]) == (
        "ResourceNotFoundException", "The specified log group does not exist.")


def test_bad_names_and_limits_get_aws_answers(logs, group):
    assert error(logs.create_log_group, logGroupName="x" * 513) == (
        "InvalidParameterException", "Invalid LogGroup or LogStream, both must have length less than or equal to 512.")
    code, message = error(logs.create_log_group, logGroupName="bad name!")
    assert code == "InvalidParameterException" and "at 'logGroupName' failed to satisfy constraint" in message
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    assert error(logs.get_log_events, logGroupName=group, logStreamName="s", limit=10001) == (
        "InvalidParameterException", "1 validation error detected: Value '10001' at 'limit' failed to satisfy "
                                     "constraint: Member must have value less than or equal to 10000")
    assert error(logs.describe_log_streams, logGroupName=group, logGroupIdentifier=group) == (
        "ValidationException", "LogGroup name and LogGroup ARN are mutually exclusive parameters.")


def test_tags_by_arn_and_by_name(logs, group):
    arn = f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{group}"
    logs.tag_resource(resourceArn=arn, tags={"a": "1", "b": "2"})
    logs.tag_log_group(logGroupName=group, tags={"c": "3"})
    assert logs.list_tags_for_resource(resourceArn=arn)["tags"] == {"a": "1", "b": "2", "c": "3"}
    logs.untag_resource(resourceArn=arn, tagKeys=["a"])
    logs.untag_log_group(logGroupName=group, tags=["c"])
    assert logs.list_tags_log_group(logGroupName=group)["tags"] == {"b": "2"}
    missing = f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/no/such/group"
    assert error(logs.list_tags_for_resource, resourceArn=missing)[0] == "ResourceNotFoundException"


def test_names_up_to_aws_limits(logs):
    """512-character group and stream names (longer than a file name may be) and odd characters."""
    group = "/long/" + uuid.uuid4().hex + "#." * 237
    streams = ["~tilde [$LATEST] é/ü?", "s" * 512]
    assert len(group) == 512
    logs.create_log_group(logGroupName=group)
    try:
        for i, stream in enumerate(streams):
            put(logs, group, stream, [f"event {i}"])
        described = logs.describe_log_streams(logGroupName=group)["logStreams"]
        assert sorted(s["logStreamName"] for s in described) == sorted(streams)
        events = all_filtered(logs, logGroupName=group)
        assert sorted((e["logStreamName"], e["message"]) for e in events) == sorted(
            (stream, f"event {i}") for i, stream in enumerate(streams))
        assert [g["logGroupName"] for g in logs.describe_log_groups(logGroupNamePrefix=group[:40])["logGroups"]] \
            == [group]
    finally:
        logs.delete_log_group(logGroupName=group)
    assert logs.describe_log_groups(logGroupNamePrefix=group[:40])["logGroups"] == []


def test_deletion_protection_blocks_deletions(logs):
    name = f"/protected/{uuid.uuid4().hex[:10]}"
    logs.create_log_group(logGroupName=name, deletionProtectionEnabled=True)
    logs.create_log_stream(logGroupName=name, logStreamName="s")
    assert logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"][0]["deletionProtectionEnabled"] is True
    assert error(logs.delete_log_group, logGroupName=name)[0] == "ValidationException"
    assert error(logs.delete_log_stream, logGroupName=name, logStreamName="s")[0] == "ValidationException"
    logs.put_log_group_deletion_protection(logGroupIdentifier=f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{name}",
                                           deletionProtectionEnabled=False)
    logs.delete_log_stream(logGroupName=name, logStreamName="s")
    logs.delete_log_group(logGroupName=name)
    assert logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"] == []


# --- retention ----------------------------------------------------------------------------------


def test_retention_hides_and_deletes_old_events(logs, group):
    old = now_ms() - 3 * DAY_MS
    put(logs, group, "s", ["old one", "old two"], start=old)
    put(logs, group, "s", ["new one"])
    code, message = error(logs.put_retention_policy, logGroupName=group, retentionInDays=2)
    assert code == "InvalidParameterException" and "Member must satisfy enum value set: [1, 3, 5, 7" in message
    logs.put_retention_policy(logGroupName=group, retentionInDays=1)
    described = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0]
    assert described["retentionInDays"] == 1
    assert [e["message"] for e in all_filtered(logs, logGroupName=group)] == ["new one"]
    got = logs.get_log_events(logGroupName=group, logStreamName="s", startFromHead=True)["events"]
    assert [e["message"] for e in got] == ["new one"]
    stream = logs.describe_log_streams(logGroupName=group)["logStreams"][0]
    assert stream["firstEventTimestamp"] > old + DAY_MS
    # Deleted, not only hidden: without the policy they do not come back.
    logs.delete_retention_policy(logGroupName=group)
    assert "retentionInDays" not in logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0]
    assert [e["message"] for e in all_filtered(logs, logGroupName=group)] == ["new one"]
    # New events older than the retention are refused as expired.
    logs.put_retention_policy(logGroupName=group, retentionInDays=1)
    answer = logs.put_log_events(logGroupName=group, logStreamName="s", logEvents=[
        {"timestamp": now_ms() - 30 * 3600_000, "message": "too old for retention"},
        {"timestamp": now_ms() - 10 * 3600_000, "message": "fine"}])
    assert answer["rejectedLogEventsInfo"] == {"expiredLogEventEndIndex": 1}


# --- streams ------------------------------------------------------------------------------------


def test_log_streams_create_describe_order_delete(logs, group):
    t = now_ms() - 10_000
    for name, at in (("b-stream", t + 300), ("a-stream", t + 100), ("c-stream", t + 200)):
        put(logs, group, name, ["x"], start=at)
    logs.create_log_stream(logGroupName=group, logStreamName="d-empty")
    assert error(logs.create_log_stream, logGroupName=group, logStreamName="d-empty") == (
        "ResourceAlreadyExistsException", "The specified log stream already exists")
    assert error(logs.create_log_stream, logGroupName="/no/such", logStreamName="x") == (
        "ResourceNotFoundException", "The specified log group does not exist.")
    streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    assert [s["logStreamName"] for s in streams] == ["a-stream", "b-stream", "c-stream", "d-empty"]
    a = streams[0]
    assert a["firstEventTimestamp"] == a["lastEventTimestamp"] == t + 100 and a["storedBytes"] == 0
    assert a["arn"] == f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{group}:log-stream:a-stream"
    assert a["lastIngestionTime"] >= a["creationTime"]
    assert "firstEventTimestamp" not in streams[3] and streams[3]["creationTime"] > 0
    by_time = logs.describe_log_streams(logGroupName=group, orderBy="LastEventTime", descending=True)["logStreams"]
    assert [s["logStreamName"] for s in by_time] == ["b-stream", "c-stream", "a-stream", "d-empty"]
    prefixed = logs.describe_log_streams(logGroupIdentifier=f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{group}",
                                         logStreamNamePrefix="c-")["logStreams"]
    assert [s["logStreamName"] for s in prefixed] == ["c-stream"]
    assert error(logs.describe_log_streams, logGroupName=group, orderBy="LastEventTime",
                 logStreamNamePrefix="a")[0] == "InvalidParameterException"
    pages = list(logs.get_paginator("describe_log_streams").paginate(logGroupName=group, limit=3))
    assert len(pages) == 2 and [s["logStreamName"] for p in pages for s in p["logStreams"]][-1] == "d-empty"
    logs.delete_log_stream(logGroupName=group, logStreamName="a-stream")
    assert error(logs.delete_log_stream, logGroupName=group, logStreamName="a-stream") == (
        "ResourceNotFoundException", "The specified log stream does not exist.")
    assert "a-stream" not in {s["logStreamName"] for s in logs.describe_log_streams(logGroupName=group)["logStreams"]}


# --- PutLogEvents -------------------------------------------------------------------------------


def test_put_log_events_rules(logs, group):
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    now = now_ms()

    def put_events(events):
        return logs.put_log_events(logGroupName=group, logStreamName="s", logEvents=events)

    assert error(put_events, events=[{"timestamp": now, "message": "b"}, {"timestamp": now - 1, "message": "a"}]) == (
        "InvalidParameterException", "Log events in a single PutLogEvents request must be in chronological order.")
    code, message = error(put_events, events=[{"timestamp": now - DAY_MS - 1000, "message": "a"},
                                              {"timestamp": now, "message": "b"}])
    assert code == "InvalidParameterException" and "cannot span more than 24 hours" in message
    assert error(put_events, events=[{"timestamp": now, "message": "x" * 300_000}] * 4)[0] == \
        "InvalidParameterException"
    code, message = error(put_events, events=[{"timestamp": now, "message": "x"}] * 10_001)
    assert code == "InvalidParameterException" and "at 'logEvents' failed to satisfy constraint: Member must have " \
                                                   "length less than or equal to 10000" in message
    assert error(logs.put_log_events, logGroupName=group, logStreamName="nope",
                 logEvents=[{"timestamp": now, "message": "a"}]) == (
        "ResourceNotFoundException", "The specified log stream does not exist.")
    answer = put_events([{"timestamp": now - 15 * DAY_MS, "message": "ancient"},
                         {"timestamp": now - 15 * DAY_MS + 1, "message": "ancient 2"}])
    assert answer["rejectedLogEventsInfo"] == {"tooOldLogEventEndIndex": 2}
    answer = put_events([{"timestamp": now, "message": "kept"}, {"timestamp": now + 3 * 3600_000, "message": "future"}])
    assert answer["rejectedLogEventsInfo"] == {"tooNewLogEventStartIndex": 1}
    assert re.fullmatch(r"\d{56}", answer["nextSequenceToken"])
    assert [e["message"] for e in all_filtered(logs, logGroupName=group)] == ["kept"]


# --- GetLogEvents -------------------------------------------------------------------------------


def test_get_log_events_tokens_as_aws(logs, group):
    start = put(logs, group, "s", [f"m{i:02d}" for i in range(25)])
    kw = dict(logGroupName=group, logStreamName="s")
    # Forward from the head, 10 at a time, until the same token comes back.
    got, page = [], logs.get_log_events(startFromHead=True, limit=10, **kw)
    while page["events"]:
        got += [e["message"] for e in page["events"]]
        token = page["nextForwardToken"]
        page = logs.get_log_events(nextToken=token, limit=10, **kw)
    assert got == [f"m{i:02d}" for i in range(25)] and page["nextForwardToken"] == token
    assert re.fullmatch(r"f/\d{56}", token) and re.fullmatch(r"b/\d{56}", page["nextBackwardToken"])
    # Without a token: the newest events; backward from there.
    newest = logs.get_log_events(limit=10, **kw)
    assert [e["message"] for e in newest["events"]] == [f"m{i:02d}" for i in range(15, 25)]
    back = logs.get_log_events(nextToken=newest["nextBackwardToken"], limit=10, **kw)
    assert [e["message"] for e in back["events"]] == [f"m{i:02d}" for i in range(5, 15)]
    # A forward token taken at the end sees what comes next.
    later = put(logs, group, "s", ["after"], start=start + 100)
    assert later and [e["message"] for e in logs.get_log_events(nextToken=newest["nextForwardToken"], **kw)["events"]] \
        == ["after"]
    # startTime inclusive, endTime exclusive.
    window = logs.get_log_events(startTime=start + 3, endTime=start + 6, startFromHead=True, **kw)["events"]
    assert [e["message"] for e in window] == ["m03", "m04", "m05"]
    assert set(window[0]) == {"timestamp", "message", "ingestionTime"}
    assert error(logs.get_log_events, nextToken="f/123", **kw) == (
        "InvalidParameterException", "The specified nextToken is invalid.")
    assert error(logs.get_log_events, logGroupName=group, logStreamName="none")[0] == "ResourceNotFoundException"


# --- FilterLogEvents ----------------------------------------------------------------------------


def test_filter_log_events_interleaves_and_pages(logs, group):
    start = now_ms() - 100_000
    put(logs, group, "web-1", [f"web1 {i}" for i in range(5)], start=start, step=2)
    put(logs, group, "web-2", [f"web2 {i}" for i in range(5)], start=start + 1, step=2)
    put(logs, group, "worker", ["work"], start=start + 50)
    events = all_filtered(logs, logGroupName=group, limit=3)
    assert [e["timestamp"] for e in events] == sorted(e["timestamp"] for e in events) and len(events) == 11
    assert [e["message"] for e in events[:3]] == ["web1 0", "web2 0", "web1 1"]
    first = events[0]
    assert set(first) == {"logStreamName", "timestamp", "message", "ingestionTime", "eventId"}
    assert re.fullmatch(r"\d{56}", first["eventId"]) and len({e["eventId"] for e in events}) == 11
    assert len(all_filtered(logs, logGroupName=group, logStreamNamePrefix="web")) == 10
    assert [e["message"] for e in all_filtered(logs, logGroupName=group, logStreamNames=["worker"])] == ["work"]
    # startTime and endTime both inclusive.
    window = all_filtered(logs, logGroupName=group, startTime=start + 2, endTime=start + 4)
    assert [e["message"] for e in window] == ["web1 1", "web2 1", "web1 2"]
    assert error(logs.filter_log_events, logGroupName=group, nextToken="bogus") == (
        "InvalidParameterException", "The specified nextToken is invalid.")
    assert error(logs.filter_log_events, logGroupName="/no/such/group") == (
        "ResourceNotFoundException", "The specified log group does not exist.")


MESSAGES = [
    "[ERROR 400] BAD REQUEST",
    "[WARN] slow response from db",
    "INFO user signed in",
    "ERROR: Exiting now",
    "NOERRORS here",
    "UNAUTHORIZED request",
    '{"eventType": "UpdateTrail", "latency": 120, "user": {"id": 1, "name": "ann"}, "ok": true, '
    '"tags": ["a", "b"], "region": null, "ip": "10.0.1.7"}',
    '{"eventType": "Login", "latency": 40, "user": {"id": 2}, "ok": false, "tags": ["b"], "ip": "192.168.0.1"}',
    '127.0.0.1 - frank [10/Oct/2000:13:25:15 -0700] "GET /index.html HTTP/1.0" 404 1534',
    '127.0.0.1 - jane [10/Oct/2000:13:25:16 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326',
    '10.1.1.1 - bob [10/Oct/2000:13:25:17 -0700] "POST /form HTTP/1.0" 500 90',
]


@pytest.fixture(scope="module")
def pattern_group(logs):
    name = f"/patterns/{uuid.uuid4().hex[:8]}"
    logs.create_log_group(logGroupName=name)
    put(logs, name, "s", MESSAGES)
    yield name
    logs.delete_log_group(logGroupName=name)


@pytest.mark.parametrize("pattern, expected", [
    ("", list(range(11))),
    ("ERROR", [0, 3]),                        # whole words, case sensitive: not NOERRORS
    ('"BAD REQUEST"', [0]),
    ("ERROR Exiting", [3]),
    ("?WARN ?Exiting", [1, 3]),
    ("ERROR -Exiting", [0]),
    ("%AUTHORIZED%", [5]),
    ("%^\\[WARN%", [1]),
    ('{ $.eventType = "UpdateTrail" }', [6]),
    ("{ $.eventType = Update* }", [6]),
    ("{ $.latency > 100 }", [6]),
    ("{ $.latency <= 40 }", [7]),
    ("{ $.user.id = 2 }", [7]),
    ("{ $.user.id != 2 }", [6]),
    ("{ $.user.name NOT EXISTS }", [7]),
    ("{ $.region IS NULL }", [6]),
    ("{ $.ok IS TRUE }", [6]),
    ("{ $.ok IS FALSE }", [7]),
    ('{ $.tags[1] = "b" }', [6]),
    ('{ $.tags[*] = "b" }', [6, 7]),
    ("{ $.ip = 10.0.* }", [6]),
    ('{ ($.latency > 100 && $.user.id = 1) || $.eventType = "Login" }', [6, 7]),
    ("{ $.latency > 30 && $.ok IS FALSE }", [7]),
    ("{ $.ip = %^192\\.168% }", [7]),
    ("[ip, user, username, timestamp, request, status_code, bytes]", [8, 9, 10]),
    ("[ip, user, username, timestamp, request, status_code = 404, bytes]", [8]),
    ("[ip, user, username, timestamp, request, status_code = 4* || status_code = 5*, bytes]", [8, 10]),
    ("[ip, user, username, timestamp, request, status_code, bytes > 2000]", [9]),
    ("[ip, user, username, timestamp, request, status_code != 200, bytes]", [8, 10]),
    ('[ip, user, username = jane, ...]', [9]),
    ('[..., request = "*html*", status, bytes]', [8]),
    ("[w1, w2]", [4, 5]),
    ("[w1 = ERROR*, ...]", [0, 3]),  # "[ERROR 400]" is one field
])
def test_filter_patterns(logs, pattern_group, pattern, expected):
    events = all_filtered(logs, logGroupName=pattern_group, filterPattern=pattern)
    assert [MESSAGES.index(e["message"]) for e in events] == expected


@pytest.mark.parametrize("pattern, message", [
    ('{ $.a = "x" ', "If a filter pattern starts with '{' it must end with '}'"),
    ("{ $.a > }", "Invalid filter pattern"),
    ("{ a = 1 }", "Invalid filter pattern"),
    ('{ $.a > "x" }', "Invalid filter pattern"),
    ("[a, b = ]", "Invalid filter pattern"),
    ("ERROR{", "Invalid character(s) in term 'ERROR{'"),
    # AWS's regex subset (CloudWatch Logs guide, "Supported regular expressions (regex) syntax"):
    # "%something!% would be rejected since '!' is not supported"; 2 regex at most in a pattern.
    ("%something!%", "Invalid filter pattern"),
    ("{ $.a = %x% || $.b = %y% || $.c = %z% }", "Invalid filter pattern"),
])
def test_invalid_filter_patterns_are_refused(logs, pattern_group, pattern, message):
    assert error(logs.filter_log_events, logGroupName=pattern_group, filterPattern=pattern) == (
        "InvalidParameterException", message)


def test_the_calls_of_aws_logs_tail_follow(logs, group):
    """`aws logs tail GROUP --follow` (AWS CLI v2; the v1 CLI of this venv has no `tail`) pages
    FilterLogEvents with interleaved=True from --since, then polls again from the newest timestamp
    it printed, telling events already printed by eventId. The same calls, in its order."""
    start = put(logs, group, "a", ["one", "two"])
    put(logs, group, "b", ["three"], start=start + 1)  # the same millisecond as "two"
    kwargs = {"logGroupName": group, "interleaved": True, "startTime": start - 600_000}
    printed: list[str] = []
    ids_per_timestamp: dict[int, set] = defaultdict(set)

    def poll_until_last_page() -> None:
        nonlocal ids_per_timestamp
        while True:
            response = logs.filter_log_events(**kwargs)
            for event in response["events"]:
                if event["eventId"] not in ids_per_timestamp[event["timestamp"]]:
                    ids_per_timestamp[event["timestamp"]].add(event["eventId"])
                    printed.append(event["message"])
            if ids_per_timestamp:
                newest = max(ids_per_timestamp)
                ids_per_timestamp = defaultdict(set, {newest: ids_per_timestamp[newest]})
            if "nextToken" in response:
                kwargs["nextToken"] = response["nextToken"]
                continue
            if ids_per_timestamp:
                kwargs["startTime"] = max(ids_per_timestamp)
            kwargs.pop("nextToken", None)
            return

    poll_until_last_page()
    assert sorted(printed) == ["one", "three", "two"]
    poll_until_last_page()  # nothing new: nothing printed twice
    assert len(printed) == 3
    put(logs, group, "a", ["four"], start=start + 1)  # late, in the newest millisecond already seen
    put(logs, group, "b", ["five", "six"], start=start + 2)
    poll_until_last_page()
    assert printed[3:] == ["four", "five", "six"]


def test_kinesim_logs_reads_any_group_with_a_pattern(server, logs, group):
    put(logs, group, "s", ["INFO starting", "ERROR disk full", "INFO done", "WARN slow"])
    out = subprocess.run([sys.executable, "-m", "kinesim", "logs", group, "--since", "all",
                          "--filter-pattern", "?ERROR ?WARN", "--endpoint-url", server.url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "ERROR disk full\nWARN slow\n", out.stderr
    missing = subprocess.run([sys.executable, "-m", "kinesim", "logs", "/no/such/group", "--endpoint-url", server.url],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "log group '/no/such/group' does not exist" in missing.stderr


# --- functions' logs ----------------------------------------------------------------------------

HANDLER = "def handler(event, context):\n    print('order', event['id'], 'status', event['status'])\n    return 1\n"


def package() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
    return buf.getvalue()


def wait_for_events(logs, group: str, pattern: str, want: int, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            events = all_filtered(logs, logGroupName=group, filterPattern=pattern)
        except logs.exceptions.ResourceNotFoundException:
            events = []
        if len(events) >= want or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


def test_function_prints_are_log_events(server, logs):
    lam = client_for(server.url, "lambda")
    name = "logs-fn-" + uuid.uuid4().hex[:8]
    group = f"/aws/lambda/{name}"
    lam.create_function(FunctionName=name, Runtime="python3.11", Role=f"arn:aws:iam::{ACCOUNT}:role/r",
                        Handler="app.handler", Code={"ZipFile": package()})
    try:
        assert logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"] == []  # nothing logged yet
        for i, status in enumerate(["paid", "failed", "paid"]):
            lam.invoke(FunctionName=name, Payload=f'{{"id": {i}, "status": "{status}"}}'.encode())
        failed = wait_for_events(logs, group, "failed", 1)
        assert [e["message"] for e in failed] == ["order 1 status failed\n"]
        assert len(wait_for_events(logs, group, '?"START RequestId" ?"REPORT RequestId"', 6)) == 6
        assert [g["logGroupName"] for g in logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]] == [group]
        streams = logs.describe_log_streams(logGroupName=group, orderBy="LastEventTime", descending=True)["logStreams"]
        assert streams and re.fullmatch(r"\d{4}/\d{2}/\d{2}/\[\$LATEST\][0-9a-f]{32}", streams[0]["logStreamName"])
        head = logs.get_log_events(logGroupName=group, logStreamName=streams[0]["logStreamName"], startFromHead=True)
        assert any(e["message"].startswith("START RequestId: ") for e in head["events"])
        # Deleting the group deletes the function's logs; its next invocation makes it again.
        logs.delete_log_group(logGroupName=group)
        assert error(logs.filter_log_events, logGroupName=group)[0] == "ResourceNotFoundException"
        lam.invoke(FunctionName=name, Payload=b'{"id": 9, "status": "late"}')
        events = wait_for_events(logs, group, "order", 1)
        assert [e["message"] for e in events] == ["order 9 status late\n"]
    finally:
        lam.delete_function(FunctionName=name)
        try:
            logs.delete_log_group(logGroupName=group)
        except logs.exceptions.ResourceNotFoundException:
            pass


# --- durability ---------------------------------------------------------------------------------


def test_groups_streams_retention_and_events_survive_restart(tmp_path_factory):
    first = start_server(tmp_path_factory)
    try:
        logs = client_for(first.url, "logs")
        logs.create_log_group(logGroupName="/durable/g", tags={"k": "v"})
        logs.put_retention_policy(logGroupName="/durable/g", retentionInDays=7)
        put(logs, "/durable/g", "s", ["kept 1", "kept 2"])
        logs.create_log_stream(logGroupName="/durable/g", logStreamName="empty")
    finally:
        first.stop()
    again = ServerProcess(first.settings).start()
    try:
        logs = client_for(again.url, "logs")
        group = logs.describe_log_groups(logGroupNamePrefix="/durable/")["logGroups"]
        assert [(g["logGroupName"], g["retentionInDays"]) for g in group] == [("/durable/g", 7)]
        assert logs.list_tags_log_group(logGroupName="/durable/g")["tags"] == {"k": "v"}
        streams = logs.describe_log_streams(logGroupName="/durable/g")["logStreams"]
        assert [s["logStreamName"] for s in streams] == ["empty", "s"]
        assert [e["message"] for e in all_filtered(logs, logGroupName="/durable/g")] == ["kept 1", "kept 2"]
    finally:
        again.stop()
