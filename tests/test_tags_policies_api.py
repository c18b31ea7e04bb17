"""Tags (on streams and consumers) and resource policies through boto3 against a real server."""
from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for

ACCOUNT = "000000000000"
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kinesis:*",
     "Resource": "*"}]})


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def arn_of(kinesis, name: str) -> str:
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": tags[k]} for k in sorted(tags)]


def too_many(name: str, kind: str = "stream", target: str | None = None) -> str:
    target = target or f"stream {name} under account {ACCOUNT}"
    return (f"Failed to add tags to {target} because a given {kind} cannot have more than 50 tags associated "
            "with it.")


# Stream tags


def test_add_list_remove_stream_tags(kinesis, make_stream):
    name = make_stream()
    arn = arn_of(kinesis, name)
    kinesis.add_tags_to_stream(StreamName=name, Tags={"b": "2", "a": "1", "ü0 _./=+-@:": ""})
    kinesis.add_tags_to_stream(StreamARN=arn, Tags={"a": "one", "c": "3"})
    expected = {"a": "one", "b": "2", "c": "3", "ü0 _./=+-@:": ""}
    out = kinesis.list_tags_for_stream(StreamName=name)
    assert out["Tags"] == tag_list(expected) and out["HasMoreTags"] is False
    assert kinesis.list_tags_for_stream(StreamARN=arn)["Tags"] == tag_list(expected)
    assert kinesis.list_tags_for_resource(ResourceARN=arn)["Tags"] == tag_list(expected)

    # Paging: Limit, then ExclusiveStartTagKey = the last key seen.
    page = kinesis.list_tags_for_stream(StreamName=name, Limit=2)
    assert page["Tags"] == tag_list(expected)[:2] and page["HasMoreTags"] is True
    page = kinesis.list_tags_for_stream(StreamName=name, Limit=2, ExclusiveStartTagKey=page["Tags"][-1]["Key"])
    assert page["Tags"] == tag_list(expected)[2:] and page["HasMoreTags"] is False
    page = kinesis.list_tags_for_stream(StreamName=name, ExclusiveStartTagKey="b")
    assert page["Tags"] == tag_list(expected)[2:] and page["HasMoreTags"] is False
    page = kinesis.list_tags_for_stream(StreamName=name, Limit=1, ExclusiveStartTagKey="a")
    assert page == {**page, "Tags": [{"Key": "b", "Value": "2"}], "HasMoreTags": True}
    assert kinesis.list_tags_for_stream(StreamName=name, ExclusiveStartTagKey="ü0 _./=+-@:")["Tags"] == []

    kinesis.remove_tags_from_stream(StreamName=name, TagKeys=["a", "not-there"])
    kinesis.remove_tags_from_stream(StreamARN=arn, TagKeys=["c"])
    assert kinesis.list_tags_for_stream(StreamName=name)["Tags"] == tag_list({"b": "2", "ü0 _./=+-@:": ""})


def test_stream_tag_limit_and_characters(kinesis, make_stream):
    name = make_stream()
    kinesis.add_tags_to_stream(StreamName=name, Tags={f"k{i:02}": "v" for i in range(45)})
    with pytest.raises(ClientError) as e:
        kinesis.add_tags_to_stream(StreamName=name, Tags={f"n{i}": "v" for i in range(6)})
    assert error_of(e) == ("InvalidArgumentException", too_many(name))
    assert len(kinesis.list_tags_for_stream(StreamName=name, Limit=50)["Tags"]) == 45  # nothing added
    # Overwriting a key does not count against the limit; 50 exactly is allowed.
    kinesis.add_tags_to_stream(StreamName=name, Tags={**{f"k{i:02}": "w" for i in range(10)},
                                                      **{f"n{i}": "v" for i in range(5)}})
    tags = kinesis.list_tags_for_stream(StreamName=name, Limit=50)
    assert len(tags["Tags"]) == 50 and tags["HasMoreTags"] is False
    with pytest.raises(ClientError) as e:
        kinesis.tag_resource(ResourceARN=arn_of(kinesis, name), Tags={"one-more": "v"})
    assert error_of(e) == ("InvalidArgumentException", too_many(name))
    for bad in ("a;b", "tab\there", "a,b", "a*b"):
        with pytest.raises(ClientError) as e:
            kinesis.add_tags_to_stream(StreamName=name, Tags={"k00": bad})
        assert error_of(e) == ("InvalidArgumentException",
                               "Some tags contain invalid characters. Valid characters: Unicode letters, digits, "
                               "white space, _ . / = + - % @ :.")
    with pytest.raises(ClientError) as e:
        kinesis.add_tags_to_stream(StreamName=name, Tags={"k00": "50%"})
    assert error_of(e) == (
        "InvalidArgumentException",
        f"Failed to add tags to stream {name} under account {ACCOUNT} because some tags contained illegal "
        "characters. The allowed characters are Unicode letters, white-spaces, '_',',','/','=','+','-','@',':'.")
    with pytest.raises(ClientError) as e:
        kinesis.remove_tags_from_stream(StreamName=name, TagKeys=["50%"])
    assert error_of(e)[1].startswith(f"Failed to remove tags from stream {name} under account {ACCOUNT} because "
                                     "some tags contained illegal characters.")
    with pytest.raises(ClientError) as e:
        kinesis.add_tags_to_stream(StreamName=name, Tags={"aws:reserved": "v"})
    assert error_of(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        kinesis.add_tags_to_stream(StreamName="no-such-stream", Tags={"a": "b"})
    assert error_of(e) == ("ResourceNotFoundException", f"Stream no-such-stream under account {ACCOUNT} not found.")
    with pytest.raises(ClientError) as e:
        kinesis.list_tags_for_stream(StreamName="no-such-stream")
    assert error_of(e)[0] == "ResourceNotFoundException"


def test_model_limits_come_from_the_model(server, make_stream):
    unchecked = client_for(server.url, parameter_validation=False)
    name = make_stream()
    with pytest.raises(ClientError) as e:
        unchecked.add_tags_to_stream(StreamName=name, Tags={"k" * 129: "v"})
    assert error_of(e)[0] == "ValidationException"
    with pytest.raises(ClientError) as e:
        unchecked.list_tags_for_stream(StreamName=name, Limit=51)
    assert error_of(e) == ("ValidationException",
                           "1 validation error detected: Value '51' at 'limit' failed to satisfy constraint: "
                           "Member must have value less than or equal to 50")


def test_create_stream_with_tags(kinesis, stream_name):
    tags = {f"t{i:02}": f"v{i}" for i in range(50)}
    kinesis.create_stream(StreamName=stream_name, ShardCount=1, Tags=tags)
    arn = arn_of(kinesis, stream_name)
    out = kinesis.list_tags_for_stream(StreamName=stream_name, Limit=50)
    assert out["Tags"] == tag_list(tags) and out["HasMoreTags"] is False
    assert kinesis.list_tags_for_resource(ResourceARN=arn)["Tags"] == tag_list(tags)
    kinesis.delete_stream(StreamName=stream_name)

    # The same checks as AddTagsToStream, before the stream exists.
    with pytest.raises(ClientError) as e:
        kinesis.create_stream(StreamName=stream_name, ShardCount=1, Tags={f"t{i}": "v" for i in range(51)})
    assert error_of(e) == ("InvalidArgumentException", too_many(stream_name))
    with pytest.raises(ClientError) as e:
        kinesis.create_stream(StreamName=stream_name, ShardCount=1, Tags={"bad": "a;b"})
    assert error_of(e)[0] == "InvalidArgumentException"
    assert stream_name not in kinesis.list_streams(Limit=10000)["StreamNames"]


# Tags by resource ARN: streams and consumers


def test_tag_resource_on_streams_and_consumers(kinesis, make_stream):
    name = make_stream()
    arn = arn_of(kinesis, name)
    kinesis.tag_resource(ResourceARN=arn, Tags={"team": "data", "env": "dev"})
    assert kinesis.list_tags_for_resource(ResourceARN=arn)["Tags"] == tag_list({"team": "data", "env": "dev"})
    assert kinesis.list_tags_for_stream(StreamName=name)["Tags"] == tag_list({"team": "data", "env": "dev"})
    kinesis.untag_resource(ResourceARN=arn, TagKeys=["env", "absent"])
    assert kinesis.list_tags_for_resource(ResourceARN=arn)["Tags"] == [{"Key": "team", "Value": "data"}]

    consumer = kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="tagged", Tags={"owner": "me"})[
        "Consumer"]["ConsumerARN"]
    assert kinesis.list_tags_for_resource(ResourceARN=consumer)["Tags"] == [{"Key": "owner", "Value": "me"}]
    kinesis.tag_resource(ResourceARN=consumer, Tags={"tier": "gold", "owner": "you"})
    assert kinesis.list_tags_for_resource(ResourceARN=consumer)["Tags"] == tag_list({"owner": "you", "tier": "gold"})
    kinesis.untag_resource(ResourceARN=consumer, TagKeys=["owner"])
    assert kinesis.list_tags_for_resource(ResourceARN=consumer)["Tags"] == [{"Key": "tier", "Value": "gold"}]
    # A consumer's tags and its stream's are separate.
    assert kinesis.list_tags_for_stream(StreamName=name)["Tags"] == [{"Key": "team", "Value": "data"}]

    kinesis.tag_resource(ResourceARN=consumer, Tags={f"c{i:02}": "v" for i in range(49)})
    with pytest.raises(ClientError) as e:
        kinesis.tag_resource(ResourceARN=consumer, Tags={"c99": "v"})
    assert error_of(e) == ("InvalidArgumentException",
                           too_many(name, "consumer", f"consumer tagged of stream {name} under account {ACCOUNT}"))
    with pytest.raises(ClientError) as e:
        kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="over", Tags={f"x{i}": "v" for i in range(51)})
    assert error_of(e)[0] == "InvalidArgumentException"
    assert [c["ConsumerName"] for c in kinesis.list_stream_consumers(StreamARN=arn)["Consumers"]] == ["tagged"]

    # Deregistered, re-registered under the same name: no tags carried over.
    kinesis.deregister_stream_consumer(ConsumerARN=consumer)
    again = kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="tagged")["Consumer"]["ConsumerARN"]
    assert kinesis.list_tags_for_resource(ResourceARN=again)["Tags"] == []

    ghost_stream = arn.replace(name, "no-such-stream")
    for call in (lambda: kinesis.tag_resource(ResourceARN=ghost_stream, Tags={"a": "b"}),
                 lambda: kinesis.untag_resource(ResourceARN=ghost_stream, TagKeys=["a"]),
                 lambda: kinesis.list_tags_for_resource(ResourceARN=ghost_stream),
                 lambda: kinesis.list_tags_for_resource(ResourceARN=f"{arn}/consumer/ghost:1700000000"),
                 lambda: kinesis.tag_resource(ResourceARN=f"{arn}/consumer/ghost:1700000000", Tags={"a": "b"})):
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e)[0] == "ResourceNotFoundException"
    kinesis.delete_stream(StreamName=name, EnforceConsumerDeletion=True)


def test_tags_survive_a_restart(tmp_path_factory):
    from conftest import start_server
    proc = start_server(tmp_path_factory)
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="kept", ShardCount=1, Tags={"a": "1"})
        arn = arn_of(k, "kept")
        consumer = k.register_stream_consumer(StreamARN=arn, ConsumerName="c", Tags={"b": "2"})["Consumer"][
            "ConsumerARN"]
        k.put_resource_policy(ResourceARN=arn, Policy=POLICY)
        proc.stop()
        proc.start()
        k = client_for(proc.url)
        assert k.list_tags_for_stream(StreamName="kept")["Tags"] == [{"Key": "a", "Value": "1"}]
        assert k.list_tags_for_resource(ResourceARN=consumer)["Tags"] == [{"Key": "b", "Value": "2"}]
        assert k.get_resource_policy(ResourceARN=arn)["Policy"] == POLICY
    finally:
        proc.stop()


# Resource policies


def test_resource_policies_on_streams_and_consumers(kinesis, make_stream):
    name = make_stream()
    arn = arn_of(kinesis, name)
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == "{}"
    kinesis.put_resource_policy(ResourceARN=arn, Policy=POLICY)
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == POLICY
    replaced = POLICY.replace("kinesis:*", "kinesis:Get*")
    kinesis.put_resource_policy(ResourceARN=arn, Policy=replaced)
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == replaced

    consumer = kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="pc")["Consumer"]["ConsumerARN"]
    assert kinesis.get_resource_policy(ResourceARN=consumer)["Policy"] == "{}"
    kinesis.put_resource_policy(ResourceARN=consumer, Policy=POLICY)
    assert kinesis.get_resource_policy(ResourceARN=consumer)["Policy"] == POLICY
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == replaced  # each resource its own

    kinesis.delete_resource_policy(ResourceARN=arn)
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == "{}"
    with pytest.raises(ClientError) as e:
        kinesis.delete_resource_policy(ResourceARN=arn)
    assert error_of(e) == ("ResourceNotFoundException", f"No resource policy found for resource ARN {arn}.")

    # Deregistering a consumer takes its policy with it (a namesake has the same ARN in the same second).
    kinesis.deregister_stream_consumer(ConsumerARN=consumer)
    again = kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="pc")["Consumer"]["ConsumerARN"]
    assert kinesis.get_resource_policy(ResourceARN=again)["Policy"] == "{}"
    kinesis.delete_stream(StreamName=name, EnforceConsumerDeletion=True)


def test_resource_policy_errors(kinesis, make_stream):
    name = make_stream()
    arn = arn_of(kinesis, name)
    # ... nor one nested 3,000 deep (the fuzzer's: json.loads raised RecursionError, a 500).
    deep = ['{"Statement": ' + "[" * 3000 + "]" * 3000 + "}", '{"a":' * 3000 + "1" + "}" * 3000]
    for bad in ("not json", "[1, 2]", '{"Version": ', *deep):
        with pytest.raises(ClientError) as e:
            kinesis.put_resource_policy(ResourceARN=arn, Policy=bad)
        assert error_of(e) == ("InvalidArgumentException", "Policy is not a valid JSON document.")
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == "{}"
    ghost = arn.replace(name, "ghost-" + uuid.uuid4().hex[:6])
    for call in (lambda: kinesis.put_resource_policy(ResourceARN=ghost, Policy=POLICY),
                 lambda: kinesis.get_resource_policy(ResourceARN=ghost),
                 lambda: kinesis.delete_resource_policy(ResourceARN=ghost)):
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e) == ("ResourceNotFoundException", f"Stream {ghost} under account {ACCOUNT} not found.")
    ghost_consumer = f"{arn}/consumer/ghost:1700000000"
    for call in (lambda: kinesis.put_resource_policy(ResourceARN=ghost_consumer, Policy=POLICY),
                 lambda: kinesis.get_resource_policy(ResourceARN=ghost_consumer)):
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e)[0] == "ResourceNotFoundException"
    other_region = arn.replace("us-east-1", "eu-west-1")
    with pytest.raises(ClientError) as e:
        kinesis.get_resource_policy(ResourceARN=other_region)
    assert error_of(e)[0] == "ResourceNotFoundException"
