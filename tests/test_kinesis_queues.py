"""Kinesis queues through boto3 (botocore 1.44.5's CreateQueue ... RestoreDeadLetterQueueRecords):
the control plane and its errors, delivery with receipt handles, visibility timeouts, the built-in
dead-letter queue, long polling woken by a put, the in-flight limit, the stream-side rules (shared
consumer limit, no DeleteStream or switch to PROVISIONED while queues exist), and durability
across a kill -9 in the middle of receiving.

No test sleeps to make something happen: they poll a condition with a generous deadline.
"""
from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from conftest import client_for, start_server
from kinesim.server import ServerProcess

DEADLINE = 60.0


def unique(prefix: str = "q") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def on_demand(kinesis) -> str:
    name = unique("qs")
    kinesis.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def create(kinesis, stream_arn: str, start: str = "TRIM_HORIZON", **attributes) -> str:
    return kinesis.create_queue(
        QueueName=unique(), StreamConfigurationList=[{"StreamARN": stream_arn, "StartingPosition": {"Type": start}}],
        **({"QueueAttributes": attributes} if attributes else {}))["QueueDescription"]["QueueARN"]


def put(kinesis, stream_arn: str, count: int, prefix: str = "r") -> dict[str, bytes]:
    """Records put; their sequence numbers (a queue's RecordId) -> data."""
    out = {}
    for start in range(0, count, 500):
        records = [{"Data": f"{prefix}-{i}".encode(), "PartitionKey": f"pk-{i}"}
                   for i in range(start, min(count, start + 500))]
        answer = kinesis.put_records(StreamARN=stream_arn, Records=records)
        assert answer["FailedRecordCount"] == 0
        out.update((r["SequenceNumber"], rec["Data"]) for r, rec in zip(answer["Records"], records))
    return out


def receive_until(kinesis, queue: str, count: int, dead: bool = False, **params) -> list[dict]:
    """Receive until `count` records came (or the deadline)."""
    op = kinesis.receive_dead_letter_queue_records if dead else kinesis.receive_queue_records
    got: list[dict] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < count and time.monotonic() < deadline:
        got += op(QueueARN=queue, WaitTimeSeconds=1, **params)["QueueRecords"]
    return got


def ack(kinesis, queue: str, records: list[dict], dead: bool = False) -> dict:
    op = kinesis.acknowledge_dead_letter_queue_records if dead else kinesis.acknowledge_queue_records
    out = {"Successful": [], "Failed": []}
    for i in range(0, len(records), 10):
        answer = op(QueueARN=queue, Entries=[{"ReceiptHandle": r["ReceiptHandle"]} for r in records[i:i + 10]])
        out["Successful"] += answer["Successful"]
        out["Failed"] += answer["Failed"]
    return out


def error_code(call, **params) -> str:
    with pytest.raises(ClientError) as caught:
        call(**params)
    return caught.value.response["Error"]["Code"]


def all_queue_summaries(kinesis, **params) -> list[dict]:
    out, token = [], None
    while True:
        page = kinesis.list_queues(**params, **({"NextToken": token} if token else {}))
        out += page["QueueSummaries"]
        token = page.get("NextToken")
        if not token:
            return out


# control plane

def test_create_describe_list_update_delete(kinesis):
    stream_arn = on_demand(kinesis)
    name = unique()
    created = kinesis.create_queue(QueueName=name, StreamConfigurationList=[{"StreamARN": stream_arn}],
                                   Tags={"team": "a"})["QueueDescription"]
    arn = created["QueueARN"]
    assert arn.startswith("arn:aws:kinesis:us-east-1:000000000000:queue/") and name not in arn
    described = kinesis.describe_queue(QueueARN=arn)["QueueDescription"]
    assert described["QueueName"] == name and described["QueueStatus"] == "ACTIVE"
    # Defaults: LATEST, 30 s, built-in dead letters after 6 receives (the model).
    config = described["StreamConfigurationList"]
    assert [c["StreamARN"] for c in config] == [stream_arn]
    assert config[0]["StartingPosition"]["Type"] == "LATEST" and "Timestamp" in config[0]["StartingPosition"]
    assert described["QueueAttributes"] == {"VisibilityTimeoutSeconds": 30, "DeadLetterConfiguration": {
        "TargetType": "BUILT_IN", "MaxReceiveCount": 6}}

    other = create(kinesis, stream_arn)
    mine = all_queue_summaries(kinesis, StreamFilter=[{"StreamARN": stream_arn}], MaxResults=1)
    assert sorted(s["QueueARN"] for s in mine) == sorted([arn, other])
    summary = next(s for s in mine if s["QueueARN"] == arn)
    assert summary["QueueName"] == name and summary["Streams"][0]["StreamARN"] == stream_arn
    assert {arn, other} <= {s["QueueARN"] for s in all_queue_summaries(kinesis)}
    assert kinesis.describe_stream_summary(StreamARN=stream_arn)["StreamDescriptionSummary"]["QueueCount"] == 2

    updated = kinesis.update_queue(QueueARN=arn, QueueAttributes={"VisibilityTimeoutSeconds": 5})["QueueDescription"]
    assert updated["QueueAttributes"]["VisibilityTimeoutSeconds"] == 5
    # Attributes not given are left as they were.
    assert updated["QueueAttributes"]["DeadLetterConfiguration"]["MaxReceiveCount"] == 6
    updated = kinesis.update_queue(QueueARN=arn, QueueAttributes={"DeadLetterConfiguration": {"TargetType": "NONE"}})
    assert updated["QueueDescription"]["QueueAttributes"] == {"VisibilityTimeoutSeconds": 5,
                                                              "DeadLetterConfiguration": {"TargetType": "NONE"}}

    kinesis.delete_queue(QueueARN=arn)
    assert error_code(kinesis.describe_queue, QueueARN=arn) == "ResourceNotFoundException"
    assert error_code(kinesis.receive_queue_records, QueueARN=arn, WaitTimeSeconds=1) == "ResourceNotFoundException"
    assert arn not in {s["QueueARN"] for s in all_queue_summaries(kinesis)}
    kinesis.delete_queue(QueueARN=other)


def test_create_refusals(kinesis, make_stream):
    stream_arn = on_demand(kinesis)
    provisioned = kinesis.describe_stream_summary(StreamName=make_stream(1))["StreamDescriptionSummary"]["StreamARN"]

    def refused(code: str, **params) -> None:
        params = {"QueueName": unique(), "StreamConfigurationList": [{"StreamARN": stream_arn}], **params}
        assert error_code(kinesis.create_queue, **params) == code

    # "Queues are supported only on data streams in on-demand capacity mode"
    refused("ValidationException", StreamConfigurationList=[{"StreamARN": provisioned}])
    refused("ResourceNotFoundException", StreamConfigurationList=[{"StreamARN": stream_arn + "-missing"}])
    refused("ValidationException", StreamConfigurationList=[{"StreamARN": stream_arn}] * 2)
    refused("ValidationException", StreamConfigurationList=[
        {"StreamARN": stream_arn, "StartingPosition": {"Type": "LATEST", "Timestamp": time.time()}}])
    refused("ValidationException", StreamConfigurationList=[
        {"StreamARN": stream_arn, "StartingPosition": {"Type": "AT_TIMESTAMP"}}])
    refused("ValidationException", QueueAttributes={"DeadLetterConfiguration": {"TargetType": "BUILT_IN"}})
    taken = create(kinesis, stream_arn)
    name = kinesis.describe_queue(QueueARN=taken)["QueueDescription"]["QueueName"]
    refused("ResourceInUseException", QueueName=name)
    # The model's bounds, checked by the server (boto3's own checks off).
    raw = client_for(kinesis.meta.endpoint_url, parameter_validation=False)
    for attrs in ({"VisibilityTimeoutSeconds": 43201}, {"VisibilityTimeoutSeconds": -1},
                  {"DeadLetterConfiguration": {"TargetType": "BUILT_IN", "MaxReceiveCount": 0}}):
        assert error_code(raw.create_queue, QueueName=unique(), StreamConfigurationList=[{"StreamARN": stream_arn}],
                          QueueAttributes=attrs) in ("ValidationException", "InvalidArgumentException")
    for params in ({"WaitTimeSeconds": 0}, {"WaitTimeSeconds": 21}, {"Limit": 11}, {"Limit": 0}):
        assert error_code(raw.receive_queue_records, QueueARN=taken, **params) in (
            "ValidationException", "InvalidArgumentException")
    assert error_code(raw.acknowledge_queue_records, QueueARN=taken,
                      Entries=[{"ReceiptHandle": "x"}] * 11) in ("ValidationException", "InvalidArgumentException")
    with pytest.raises(ParamValidationError):
        kinesis.receive_queue_records(QueueARN=taken, WaitTimeSeconds=0)
    assert error_code(kinesis.describe_queue, QueueARN=taken[:-1] + "0-nope") == "ResourceNotFoundException"
    kinesis.delete_queue(QueueARN=taken)


def test_queues_share_the_consumer_limit_and_hold_the_stream(kinesis):
    stream_arn = on_demand(kinesis)
    for i in range(19):
        kinesis.register_stream_consumer(StreamARN=stream_arn, ConsumerName=f"c{i}")
    queue = create(kinesis, stream_arn)
    # 19 consumers and a queue: the 20 registered consumers AWS allows.
    assert error_code(kinesis.register_stream_consumer, StreamARN=stream_arn,
                      ConsumerName="c-last") == "LimitExceededException"
    assert error_code(kinesis.create_queue, QueueName=unique(),
                      StreamConfigurationList=[{"StreamARN": stream_arn}]) == "LimitExceededException"
    # A stream with queues can be neither deleted nor switched to provisioned mode.
    assert error_code(kinesis.delete_stream, StreamARN=stream_arn,
                      EnforceConsumerDeletion=True) == "ResourceInUseException"
    assert error_code(kinesis.update_stream_mode, StreamARN=stream_arn,
                      StreamModeDetails={"StreamMode": "PROVISIONED"}) == "ResourceInUseException"
    kinesis.delete_queue(QueueARN=queue)
    kinesis.register_stream_consumer(StreamARN=stream_arn, ConsumerName="c-last")
    kinesis.delete_stream(StreamARN=stream_arn, EnforceConsumerDeletion=True)


# delivery

def test_receive_and_acknowledge_every_record_once(kinesis):
    stream_arn = on_demand(kinesis)
    early = put(kinesis, stream_arn, 5, "early")
    latest = create(kinesis, stream_arn, "LATEST")
    queue = create(kinesis, stream_arn)  # TRIM_HORIZON: the records put before it too
    records = put(kinesis, stream_arn, 40)
    expected = {**early, **records}
    got = receive_until(kinesis, queue, len(expected), VisibilityTimeoutSeconds=300)
    assert sorted(r["RecordId"] for r in got) == sorted(expected)  # each once, across the 4 shards
    for r in got:
        assert r["Data"] == expected[r["RecordId"]]
        assert r["PartitionKey"].startswith("pk-") and r["ReceiveCount"] == 1
        assert r["FirstReceiveTimestamp"] >= r["ApproximateArrivalTimestamp"]
    answer = ack(kinesis, queue, got)
    assert answer["Failed"] == [] and len(answer["Successful"]) == len(got)
    assert kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"] == []
    # Acknowledging again is harmless (as SQS's DeleteMessage).
    assert ack(kinesis, queue, got[:3])["Failed"] == []
    # LATEST: only what was put after the queue was made.
    latest_got = receive_until(kinesis, latest, len(records))
    assert sorted(r["RecordId"] for r in latest_got) == sorted(records)
    for arn in (queue, latest):
        kinesis.delete_queue(QueueARN=arn)


def test_children_after_their_parent(kinesis, make_stream):
    """A queue reads a shard's children only once the parent was read to its end: the parent's
    records come in the first receive, the children's after."""
    name = make_stream(1)
    stream_arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    parent = put(kinesis, stream_arn, 3, "parent")
    kinesis.split_shard(StreamName=name, ShardToSplit="shardId-000000000000",
                        NewStartingHashKey=str(1 << 127))
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300})
    children = put(kinesis, stream_arn, 3, "child")
    kinesis.update_stream_mode(StreamARN=stream_arn, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300})
    queue = create(kinesis, stream_arn)
    first = kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"]
    assert sorted(r["RecordId"] for r in first) == sorted(parent)
    rest = receive_until(kinesis, queue, 3)
    assert sorted(r["RecordId"] for r in rest) == sorted(children)
    kinesis.delete_queue(QueueARN=queue)


def test_visibility_timeout_and_receipt_handles(kinesis):
    stream_arn = on_demand(kinesis)
    queue = create(kinesis, stream_arn, VisibilityTimeoutSeconds=1)
    put(kinesis, stream_arn, 1)
    first = receive_until(kinesis, queue, 1)[0]
    assert first["ReceiveCount"] == 1
    # The queue's 1 s timeout passes: the record is received again, with a new handle.
    again = receive_until(kinesis, queue, 1)[0]
    assert again["RecordId"] == first["RecordId"] and again["ReceiveCount"] == 2
    assert again["ReceiptHandle"] != first["ReceiptHandle"]
    assert again["FirstReceiveTimestamp"] == first["FirstReceiveTimestamp"]
    # The first delivery's handle is stale now.
    stale = kinesis.acknowledge_queue_records(QueueARN=queue, Entries=[{"ReceiptHandle": first["ReceiptHandle"]}])
    assert stale["Successful"] == [] and stale["Failed"][0]["ErrorCode"] == "InvalidArgumentException"
    # Extended: not received while in flight; set to 0: visible at once.
    changed = kinesis.update_queue_records_visibility(QueueARN=queue, Entries=[
        {"ReceiptHandle": again["ReceiptHandle"], "VisibilityTimeoutSeconds": 600},
        {"ReceiptHandle": "not-a-handle", "VisibilityTimeoutSeconds": 5}])
    assert [s["ReceiptHandle"] for s in changed["Successful"]] == [again["ReceiptHandle"]]
    assert [f["ErrorCode"] for f in changed["Failed"]] == ["InvalidArgumentException"]
    assert kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=2)["QueueRecords"] == []
    kinesis.update_queue_records_visibility(QueueARN=queue, Entries=[
        {"ReceiptHandle": again["ReceiptHandle"], "VisibilityTimeoutSeconds": 0}])
    third = kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1, VisibilityTimeoutSeconds=600)
    assert [r["ReceiveCount"] for r in third["QueueRecords"]] == [3]
    assert ack(kinesis, queue, third["QueueRecords"])["Failed"] == []
    kinesis.delete_queue(QueueARN=queue)


def test_dead_letters_after_max_receives_then_restore(kinesis):
    stream_arn = on_demand(kinesis)
    queue = create(kinesis, stream_arn, VisibilityTimeoutSeconds=0,
                   DeadLetterConfiguration={"TargetType": "BUILT_IN", "MaxReceiveCount": 2})
    records = put(kinesis, stream_arn, 3)
    counts: dict[str, int] = {}
    deadline = time.monotonic() + DEADLINE
    # Each record is received twice (visible again at once), then turns dead letter.
    while sum(counts.values()) < 6 and time.monotonic() < deadline:
        for r in kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"]:
            counts[r["RecordId"]] = max(counts.get(r["RecordId"], 0), r["ReceiveCount"])
    assert counts == {rid: 2 for rid in records}
    assert kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"] == []

    dead = receive_until(kinesis, queue, 3, dead=True, VisibilityTimeoutSeconds=600)
    assert sorted(r["RecordId"] for r in dead) == sorted(records)
    assert all(r["Data"] == records[r["RecordId"]] for r in dead)
    # A dead letter's handle is not a normal one, and the other way round.
    wrong = kinesis.acknowledge_queue_records(QueueARN=queue, Entries=[{"ReceiptHandle": dead[0]["ReceiptHandle"]}])
    assert wrong["Failed"][0]["ErrorCode"] == "InvalidArgumentException"
    assert kinesis.receive_dead_letter_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"] == []

    discard, restore, later = dead
    assert ack(kinesis, queue, [discard], dead=True)["Failed"] == []
    restored = kinesis.restore_dead_letter_queue_records(QueueARN=queue, Entries=[
        {"ReceiptHandle": restore["ReceiptHandle"]}])
    assert restored["Failed"] == [] and len(restored["Successful"]) == 1
    back = receive_until(kinesis, queue, 1, VisibilityTimeoutSeconds=600)
    # Restoring resets the receive count.
    assert [(r["RecordId"], r["ReceiveCount"]) for r in back] == [(restore["RecordId"], 1)]
    # A dead letter's visibility set to 0: received again at once.
    changed = kinesis.update_dead_letter_queue_records_visibility(QueueARN=queue, Entries=[
        {"ReceiptHandle": later["ReceiptHandle"], "VisibilityTimeoutSeconds": 0}])
    assert changed["Failed"] == []
    assert [r["RecordId"] for r in receive_until(kinesis, queue, 1, dead=True)] == [later["RecordId"]]
    kinesis.delete_queue(QueueARN=queue)


def test_without_dead_letters_records_keep_coming_back(kinesis):
    stream_arn = on_demand(kinesis)
    queue = create(kinesis, stream_arn, VisibilityTimeoutSeconds=0,
                   DeadLetterConfiguration={"TargetType": "NONE"})
    put(kinesis, stream_arn, 1)
    seen = 0
    deadline = time.monotonic() + DEADLINE
    while seen < 8 and time.monotonic() < deadline:
        for r in kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"]:
            seen = r["ReceiveCount"]
    assert seen >= 8  # past the default MaxReceiveCount of 6
    assert kinesis.receive_dead_letter_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"] == []
    kinesis.delete_queue(QueueARN=queue)


def test_long_poll_is_woken_by_a_put(kinesis):
    stream_arn = on_demand(kinesis)
    queue = create(kinesis, stream_arn)
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(kinesis.receive_queue_records, QueueARN=queue, WaitTimeSeconds=20)
        records = put(kinesis, stream_arn, 1)
        got = waiting.result(timeout=DEADLINE)["QueueRecords"]
        elapsed = time.monotonic() - started
    assert [r["RecordId"] for r in got] == list(records)
    assert elapsed < 15  # answered on the append, not at the end of its 20 s
    kinesis.delete_queue(QueueARN=queue)


# states, the in-flight quota, durability: private servers

def test_states_end_lazily_and_at_most_five_queues_transition(tmp_path_factory):
    """With 5 s state changes: CREATING (StartingPosition without Timestamp for TRIM_HORIZON, as
    the model says), then ACTIVE; a long poll made while CREATING gets records once ACTIVE;
    UPDATING refuses another UpdateQueue; a sixth queue CREATING at once is refused."""
    server = start_server(tmp_path_factory, update_stream_ms=5000)
    try:
        kinesis = client_for(server.url)
        stream_arn = on_demand(kinesis)
        queues = [create(kinesis, stream_arn) for _ in range(5)]
        first = kinesis.describe_queue(QueueARN=queues[0])["QueueDescription"]
        if first["QueueStatus"] == "CREATING":  # still within its 5 s (not on a very slow machine)
            assert "Timestamp" not in first["StreamConfigurationList"][0]["StartingPosition"]
        records = put(kinesis, stream_arn, 3)
        got = receive_until(kinesis, queues[0], 3)
        assert sorted(r["RecordId"] for r in got) == sorted(records)
        described = kinesis.describe_queue(QueueARN=queues[0])["QueueDescription"]
        assert described["QueueStatus"] == "ACTIVE"
        assert "Timestamp" in described["StreamConfigurationList"][0]["StartingPosition"]

        deadline = time.monotonic() + DEADLINE
        while kinesis.describe_queue(QueueARN=queues[-1])["QueueDescription"]["QueueStatus"] != "ACTIVE" \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        kinesis.update_queue(QueueARN=queues[1], QueueAttributes={"VisibilityTimeoutSeconds": 7})
        if kinesis.describe_queue(QueueARN=queues[1])["QueueDescription"]["QueueStatus"] == "UPDATING":
            assert error_code(kinesis.update_queue, QueueARN=queues[1],
                              QueueAttributes={"VisibilityTimeoutSeconds": 8}) == "ResourceInUseException"
        for arn in queues:
            kinesis.delete_queue(QueueARN=arn)
        # Five DELETING at once: a sixth queue cannot start CREATING until they are gone.
        assert error_code(kinesis.create_queue, QueueName=unique(),
                          StreamConfigurationList=[{"StreamARN": stream_arn}]) == "LimitExceededException"
        deadline = time.monotonic() + DEADLINE
        while any(q["QueueARN"] in queues for q in all_queue_summaries(kinesis)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not {q["QueueARN"] for q in all_queue_summaries(kinesis)} & set(queues)
        kinesis.delete_stream(StreamARN=stream_arn)
    finally:
        server.stop()


def test_records_past_retention_are_not_delivered(tmp_path_factory):
    """"When a record reaches the end of the data stream's retention period, the queue stops
    delivering it" (CreateQueue): neither an in-flight record nor one never taken. An hour of
    retention lasts 0.05 s here (24 h: 1.2 s)."""
    server = start_server(tmp_path_factory, retention_hour_s=0.05)
    try:
        kinesis = client_for(server.url)
        stream_arn = on_demand(kinesis)
        queue = create(kinesis, stream_arn, VisibilityTimeoutSeconds=1)
        put(kinesis, stream_arn, 2)
        expires = time.time() + 24 * 0.05
        taken = kinesis.receive_queue_records(QueueARN=queue, Limit=1, WaitTimeSeconds=1)["QueueRecords"]
        assert len(taken) == 1 or time.time() > expires
        while time.time() < expires + 0.5:  # the records' retention runs out
            time.sleep(0.05)
        assert kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=2)["QueueRecords"] == []
    finally:
        server.stop()


def test_in_flight_limit_is_120000_records(tmp_path_factory):
    """AWS's quota: 120,000 records in flight per queue. Past it a receive is refused with
    ThrottlingException (kinesim's choice: the model lists no other error that fits) until records
    are acknowledged."""
    server = start_server(tmp_path_factory)
    try:
        kinesis = client_for(server.url)
        stream_arn = on_demand(kinesis)
        queue = create(kinesis, stream_arn)
        for start in range(0, 120_010, 500):
            kinesis.put_records(StreamARN=stream_arn, Records=[{"Data": b"x", "PartitionKey": str(i)}
                                                               for i in range(start, min(120_010, start + 500))])
        clients = [client_for(server.url) for _ in range(4)]

        def drain(client) -> list[dict]:
            taken: list[dict] = []
            while True:
                try:
                    got = client.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1,
                                                       VisibilityTimeoutSeconds=3600)["QueueRecords"]
                except ClientError as err:
                    assert err.response["Error"]["Code"] == "ThrottlingException"
                    return taken
                taken += got
                if not got:
                    return taken

        with ThreadPoolExecutor(len(clients)) as pool:
            taken = [r for part in pool.map(drain, clients) for r in part]
        assert len(taken) == 120_000
        assert error_code(kinesis.receive_queue_records, QueueARN=queue, WaitTimeSeconds=1) == "ThrottlingException"
        assert ack(kinesis, queue, taken[:5])["Failed"] == []
        more = kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"]
        assert len(more) == 5
    finally:
        server.stop()


def test_kill9_while_receiving_keeps_acknowledged_and_unacknowledged(tmp_path_factory):
    """A consumer receives and acknowledges while the server is killed (-9). After a restart: no
    acknowledged record comes back, every other record does (after its timeout), and the dead
    letters are still there."""
    server = start_server(tmp_path_factory)
    try:
        _receive_through_a_kill(server)
    finally:
        server.stop()


def _receive_through_a_kill(server) -> None:
    settings = server.settings
    kinesis = client_for(server.url)
    stream_arn = on_demand(kinesis)
    queue = create(kinesis, stream_arn, VisibilityTimeoutSeconds=2)
    dead_queue = create(kinesis, stream_arn, VisibilityTimeoutSeconds=0,
                        DeadLetterConfiguration={"TargetType": "BUILT_IN", "MaxReceiveCount": 1})
    records = put(kinesis, stream_arn, 400)
    # The dead-letter queue's records: each received once (MaxReceiveCount 1, visible again at
    # once), then dead letters at the next receive.
    assert len(receive_until(kinesis, dead_queue, 400)) == 400
    assert kinesis.receive_queue_records(QueueARN=dead_queue, WaitTimeSeconds=1)["QueueRecords"] == []
    acked: set[str] = set()
    # The batch whose acknowledgement was sent when the kill came: the server may have committed it
    # before dying without the answer reaching us, so these records may or may not come back.
    unanswered: set[str] = set()
    stop = threading.Event()

    def consume() -> None:
        client = client_for(server.url)
        while not stop.is_set():
            got = []
            try:
                got = client.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"]
                answer = client.acknowledge_queue_records(
                    QueueARN=queue, Entries=[{"ReceiptHandle": r["ReceiptHandle"]} for r in got]) if got else None
            except Exception:
                unanswered.update(r["RecordId"] for r in got)
                return  # the server is gone
            if answer:
                ids = {r["ReceiptHandle"]: r["RecordId"] for r in got}
                acked.update(ids[s["ReceiptHandle"]] for s in answer["Successful"])

    consumer = threading.Thread(target=consume)
    consumer.start()
    deadline = time.monotonic() + DEADLINE
    while len(acked) < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()
    stop.set()
    consumer.join(DEADLINE)
    assert 100 <= len(acked) < 400

    with ServerProcess(settings) as restarted:
        kinesis = client_for(restarted.url)
        unacknowledged = set(records) - acked - unanswered
        ids: set[str] = set()
        deadline = time.monotonic() + DEADLINE
        while not unacknowledged <= ids and time.monotonic() < deadline:
            ids.update(r["RecordId"] for r in kinesis.receive_queue_records(
                QueueARN=queue, WaitTimeSeconds=1, VisibilityTimeoutSeconds=600)["QueueRecords"])
        assert unacknowledged <= ids  # nothing unacknowledged is lost
        ids.update(r["RecordId"] for r in kinesis.receive_queue_records(QueueARN=queue, WaitTimeSeconds=1)["QueueRecords"])
        assert not ids & acked  # nothing acknowledged comes back
        assert ids <= unacknowledged | unanswered
        dead = receive_until(kinesis, dead_queue, 400, dead=True, VisibilityTimeoutSeconds=600)
        assert {r["RecordId"] for r in dead} == set(records)
