"""The example functions in lambdas/, called as the Lambda runtime calls them: a Kinesis event in,
the handler's result out. The enrich function's output goes to a real stream on a test server."""
from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

LAMBDAS = Path(__file__).resolve().parent.parent / "lambdas"


def load(name: str) -> ModuleType:
    """A function's app.py as its own module (as the runtime loads it from the code directory)."""
    spec = importlib.util.spec_from_file_location(f"lambda_{name}_app", LAMBDAS / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kinesis_event(*payloads: bytes, stream_arn: str = "arn:aws:kinesis:us-east-1:000000000000:stream/clicks") -> dict:
    records = []
    for i, data in enumerate(payloads):
        sequence_number = f"4968048984059557122865842327822747140843236275774082{i:04d}"
        records.append({
            "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": f"pk-{i}", "sequenceNumber": sequence_number,
                        "data": base64.b64encode(data).decode(), "approximateArrivalTimestamp": 1700000000.5},
            "eventSource": "aws:kinesis", "eventVersion": "1.0", "eventID": f"shardId-000000000000:{sequence_number}",
            "eventName": "aws:kinesis:record", "invokeIdentityArn": "arn:aws:iam::000000000000:role/r",
            "awsRegion": "us-east-1", "eventSourceARN": stream_arn})
    return {"Records": records}


def click(**fields) -> bytes:
    return json.dumps({"user_id": "u-1", "page": "/products/42", "ts": 1700000000, **fields}).encode()


# enrich


@pytest.fixture
def enrich():
    return load("enrich")


@pytest.mark.parametrize("page, category", [
    ("/", "home"), ("", "home"), ("/products/42", "product"), ("/Products/42?ref=mail#top", "product"),
    ("/cart", "cart"), ("/checkout/pay", "checkout"), ("/blog/2024/hello", "content"), ("/help", "support"),
    ("/careers", "other"), ("https://shop.example/search?q=shoes", "search"),
])
def test_page_category(enrich, page, category):
    assert enrich.page_category(page) == category


def test_event_time_is_iso_utc(enrich):
    assert enrich.event_time(1700000000) == "2023-11-14T22:13:20.000Z"
    assert enrich.event_time(1700000000.25) == "2023-11-14T22:13:20.250Z"


def test_enrich_keeps_the_click_and_adds_fields(enrich):
    out = enrich.enrich({"user_id": "u-1", "page": "/cart", "ts": 1700000000, "session": "s-9"})
    assert out == {"user_id": "u-1", "page": "/cart", "ts": 1700000000, "session": "s-9",
                   "page_category": "cart", "event_time": "2023-11-14T22:13:20.000Z"}


@pytest.mark.parametrize("data, reason", [
    (b"{not json", "Expecting property name"), (b"\x80abc", "codec can't decode"), (b"[1, 2]", "not a JSON object"),
    (b'{"user_id": "u"}', "missing page, ts"), (click(ts="yesterday"), "ts is not a number"),
    (click(page=7), "page is not a string"),
])
def test_parse_click_rejects(enrich, data, reason):
    with pytest.raises(ValueError, match=reason):
        enrich.parse_click(data)


def test_handler_writes_enriched_clicks_to_the_output_stream(enrich, server, kinesis, make_stream, monkeypatch,
                                                            capsys):
    output = make_stream(2)
    monkeypatch.setenv("OUTPUT_STREAM", output)
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    event = kinesis_event(click(user_id="u-1", page="/cart"), b"garbage", click(user_id="u-2", page="/help"),
                          b'"a string"')

    assert enrich.handler(event, None) == {"enriched": 2, "invalid": 2}

    logged = capsys.readouterr().out
    assert logged.count("skipped record") == 2 and "enriched 2 click(s), skipped 2 invalid record(s)" in logged
    written = []
    for shard in kinesis.list_shards(StreamName=output)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=output, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        written += kinesis.get_records(ShardIterator=iterator)["Records"]
    clicks = sorted((json.loads(r["Data"]) for r in written), key=lambda c: c["user_id"])
    assert [(c["user_id"], c["page_category"], c["event_time"]) for c in clicks] == \
        [("u-1", "cart", "2023-11-14T22:13:20.000Z"), ("u-2", "support", "2023-11-14T22:13:20.000Z")]
    assert sorted(r["PartitionKey"] for r in written) == ["u-1", "u-2"]


def test_handler_with_only_invalid_records_writes_nothing(enrich, monkeypatch):
    monkeypatch.setenv("OUTPUT_STREAM", "unused")
    # No client is made, so no endpoint is needed: nothing to write.
    assert enrich.handler(kinesis_event(b"x", b"y"), None) == {"enriched": 0, "invalid": 2}
    assert enrich._kinesis is None


# validate


@pytest.fixture
def validate():
    return load("validate")


@pytest.mark.parametrize("data, found", [
    (click(), []),
    (click(ts=1700000000.5, extra={"a": 1}), []),
    (b"nope", ["not JSON"]),
    (b"\xff", ["not JSON"]),
    (b"[]", ["not a JSON object"]),
    (click(user_id=""), ["user_id must be a non-empty string"]),
    (click(user_id=42), ["user_id must be a non-empty string"]),
    (click(page="products"), ["page must be a path starting with /"]),
    (click(ts=True), ["ts must be a positive number (Unix time in seconds)"]),
    (click(ts=-5), ["ts must be a positive number (Unix time in seconds)"]),
    (b"{}", ["user_id must be a non-empty string", "page must be a path starting with /",
             "ts must be a positive number (Unix time in seconds)"]),
])
def test_problems(validate, data, found):
    assert validate.problems(data) == found


def test_handler_reports_invalid_records_by_sequence_number(validate, capsys):
    event = kinesis_event(click(), b"nope", click(page="x"), click(user_id="u-7"))
    sequence_numbers = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]

    result = validate.handler(event, None)

    assert result == {"batchItemFailures": [{"itemIdentifier": sequence_numbers[1]},
                                            {"itemIdentifier": sequence_numbers[2]}]}
    logged = capsys.readouterr().out
    assert f"invalid click {sequence_numbers[1]}: not JSON" in logged
    assert "validated 4 record(s), 2 invalid" in logged


def test_handler_with_all_valid_records_reports_no_failures(validate):
    assert validate.handler(kinesis_event(click(), click(user_id="u-2")), None) == {"batchItemFailures": []}
