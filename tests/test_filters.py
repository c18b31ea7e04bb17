"""Unit tests for event source mapping filter criteria (EventBridge pattern syntax)."""
from __future__ import annotations

import base64
import json

import pytest

from kinesim.functions.events import kinesis_record
from kinesim.functions.filters import FilterCriteria, kinesis_view
from kinesim.protocol.errors import AwsError


def criteria(*patterns) -> FilterCriteria:
    parsed = FilterCriteria.parse({"Filters": [{"Pattern": json.dumps(p)} for p in patterns]})
    assert parsed is not None
    return parsed


def matches(pattern, event) -> bool:
    return criteria(pattern).matches(event)


@pytest.mark.parametrize("pattern,event,expected", [
    # exact values, type-aware
    ({"a": ["x"]}, {"a": "x"}, True),
    ({"a": ["x"]}, {"a": "X"}, False),
    ({"a": ["x", "y"]}, {"a": "y"}, True),
    ({"a": [1]}, {"a": 1}, True),
    ({"a": [300]}, {"a": 300.0}, False),
    ({"a": [True]}, {"a": 1}, False),
    ({"a": [None]}, {"a": None}, True),
    ({"a": [None]}, {}, False),
    ({"a": [""]}, {"a": ""}, True),
    # AND across keys, nesting
    ({"a": ["x"], "b": {"c": [2]}}, {"a": "x", "b": {"c": 2}}, True),
    ({"a": ["x"], "b": {"c": [2]}}, {"a": "x", "b": {"c": 3}}, False),
    ({"b": {"c": [2]}}, {"b": 2}, False),
    # arrays in the event: any element
    ({"tags": ["red"]}, {"tags": ["blue", "red"]}, True),
    ({"items": {"id": [7]}}, {"items": [{"id": 1}, {"id": 7}]}, True),
    ({"items": {"id": [7]}}, {"items": [{"id": 1}]}, False),
    # prefix / suffix / equals-ignore-case
    ({"a": [{"prefix": "us-"}]}, {"a": "us-east-1"}, True),
    ({"a": [{"prefix": "us-"}]}, {"a": "eu-west-1"}, False),
    ({"a": [{"prefix": {"equals-ignore-case": "US-"}}]}, {"a": "us-east-1"}, True),
    ({"a": [{"suffix": ".png"}]}, {"a": "cat.png"}, True),
    ({"a": [{"suffix": ".png"}]}, {"a": "cat.jpg"}, False),
    ({"a": [{"suffix": {"equals-ignore-case": ".PNG"}}]}, {"a": "cat.png"}, True),
    ({"a": [{"equals-ignore-case": "alice"}]}, {"a": "ALICE"}, True),
    ({"a": [{"equals-ignore-case": "alice"}]}, {"a": "bob"}, False),
    ({"a": [{"prefix": "1"}]}, {"a": 12}, False),
    # anything-but
    ({"a": [{"anything-but": "rain"}]}, {"a": "sun"}, True),
    ({"a": [{"anything-but": "rain"}]}, {"a": "rain"}, False),
    ({"a": [{"anything-but": ["rain", "snow"]}]}, {"a": "snow"}, False),
    ({"a": [{"anything-but": [1, 2]}]}, {"a": 3}, True),
    ({"a": [{"anything-but": "rain"}]}, {}, False),
    ({"a": [{"anything-but": {"prefix": "init"}}]}, {"a": "initial"}, False),
    ({"a": [{"anything-but": {"prefix": "init"}}]}, {"a": "final"}, True),
    ({"a": [{"anything-but": {"suffix": ".tmp"}}]}, {"a": "x.tmp"}, False),
    ({"a": [{"anything-but": {"equals-ignore-case": ["A", "B"]}}]}, {"a": "b"}, False),
    ({"a": [{"anything-but": {"wildcard": "*.tmp"}}]}, {"a": "x.txt"}, True),
    # numeric
    ({"p": [{"numeric": [">", 10, "<=", 20]}]}, {"p": 20}, True),
    ({"p": [{"numeric": [">", 10, "<=", 20]}]}, {"p": 10}, False),
    ({"p": [{"numeric": [">", 10, "<=", 20]}]}, {"p": 20.5}, False),
    ({"p": [{"numeric": ["=", 100]}]}, {"p": 100.0}, True),
    ({"p": [{"numeric": ["<", 0]}]}, {"p": "-1"}, False),
    ({"p": [{"numeric": [">=", 0]}]}, {"p": True}, False),
    # exists
    ({"a": [{"exists": True}]}, {"a": "v"}, True),
    ({"a": [{"exists": True}]}, {"b": "v"}, False),
    ({"a": [{"exists": False}]}, {"b": "v"}, True),
    ({"a": [{"exists": False}]}, {"a": "v"}, False),
    ({"x": {"y": [{"exists": False}]}}, {}, True),
    # wildcard
    ({"a": [{"wildcard": "dir/*.png"}]}, {"a": "dir/cat.png"}, True),
    ({"a": [{"wildcard": "dir/*.png"}]}, {"a": "other/cat.png"}, False),
    ({"a": [{"wildcard": "a\\*b"}]}, {"a": "a*b"}, True),
    ({"a": [{"wildcard": "a\\*b"}]}, {"a": "axb"}, False),
    # cidr
    ({"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": "10.0.0.7"}, True),
    ({"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": "10.0.1.7"}, False),
    # $or
    ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, {"b": "y"}, True),
    ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, {"a": "y"}, False),
    ({"c": ["z"], "$or": [{"a": ["x"]}, {"b": ["y"]}]}, {"a": "x", "c": "q"}, False),
])
def test_rules(pattern, event, expected):
    assert matches(pattern, event) is expected


def test_any_filter_matches():
    f = criteria({"a": ["x"]}, {"b": ["y"]})
    assert f.matches({"b": "y"})
    assert not f.matches({"a": "y", "b": "x"})


def test_no_filters_means_none():
    assert FilterCriteria.parse(None) is None
    assert FilterCriteria.parse({}) is None
    assert FilterCriteria.parse({"Filters": []}) is None


@pytest.mark.parametrize("pattern", [
    "not json", "[1, 2]", '"x"', '{"a": "x"}', '{"a": []}', '{"a": [{"prefix": 1}]}',
    '{"a": [{"numeric": [">", "x"]}]}', '{"a": [{"numeric": ["~", 1]}]}', '{"a": [{"exists": "yes"}]}',
    '{"a": [{"nope": 1}]}', '{"a": [{"prefix": "x", "suffix": "y"}]}', '{"$or": []}',
    '{"a": [{"anything-but": {"numeric": [">", 1]}}]}', '{"a": [{"wildcard": "a**b"}]}',
    '{"a": [{"cidr": "not-a-network"}]}',
])
def test_invalid_patterns_are_refused(pattern):
    with pytest.raises(AwsError) as caught:
        FilterCriteria.parse({"Filters": [{"Pattern": pattern}]})
    assert caught.value.code == "InvalidParameterValueException"
    assert caught.value.message == "Invalid filter pattern definition."


def record(data: bytes, key: str = "pk-1") -> dict:
    row = (1, "49590338271490256608559692538361571095921575989136588898", key, data, 1545084650.987)
    return kinesis_record(row, "shardId-000000000000", "arn:aws:kinesis:us-east-1:000000000000:stream/s",
                          "us-east-1", "arn:aws:iam::000000000000:role/r")


def view(data: bytes, key: str = "pk-1") -> dict:
    entry = record(data, key)
    assert base64.b64decode(entry["kinesis"]["data"]) == data
    return kinesis_view(entry, data)


def test_kinesis_data_is_decoded_json():
    f = criteria({"data": {"order": {"type": ["buy"]}, "quantity": [{"numeric": [">", 10]}]}})
    assert f.matches(view(b'{"order": {"type": "buy"}, "quantity": 50}'))
    assert not f.matches(view(b'{"order": {"type": "sell"}, "quantity": 50}'))


def test_kinesis_metadata_fields():
    f = criteria({"partitionKey": [{"prefix": "vip-"}], "eventSource": ["aws:kinesis"]})
    assert f.matches(view(b"not json", key="vip-7"))
    assert not f.matches(view(b"not json", key="std-7"))


def test_non_json_data_never_matches_a_data_pattern():
    assert not criteria({"data": {"a": [{"exists": False}]}}).matches(view(b"\xff\x00 binary"))
    assert not criteria({"data": [{"anything-but": "x"}]}).matches(view(b"plain text"))
    # ...but a pattern without `data` still applies to the metadata
    assert criteria({"partitionKey": ["pk-1"]}).matches(view(b"plain text"))


def test_a_pattern_nested_too_deeply_is_refused_not_a_500():
    deep = "[" * 2000 + "]" * 2000
    with pytest.raises(AwsError) as refused:
        FilterCriteria.parse({"Filters": [{"Pattern": json.dumps({"data": {"a": 1}})[:-1] + f', "b": {deep}}}'}]})
    assert refused.value.code == "InvalidParameterValueException"
    nested = '{"a": ' * 999 + "[1]" + "}" * 999  # within the JSON depth limit, past the checker's recursion
    with pytest.raises(AwsError) as refused:
        FilterCriteria.parse({"Filters": [{"Pattern": nested}]})
    assert refused.value.code == "InvalidParameterValueException"


def test_record_data_nested_deep_matches_no_pattern_instead_of_failing():
    criteria = FilterCriteria.parse({"Filters": [{"Pattern": json.dumps({"data": {"a": {"b": [1]}}})}]})
    entry = {"eventSource": "aws:kinesis", "kinesis": {"partitionKey": "k"}}
    for depth in (900, 3000):
        data = ('{"a": ' * depth + "1" + "}" * depth).encode()
        assert criteria.matches(kinesis_view(entry, data)) is False
    assert criteria.matches(kinesis_view(entry, b'{"a": {"b": 1}}'))
