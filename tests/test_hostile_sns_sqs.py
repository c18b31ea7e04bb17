"""What a careless or hostile client sends SNS and SQS, answered with AWS's 4xx (never a 500),
with the server still answering and no subscriber losing a message (issue 18).

1. Form names full of dots cost the query-protocol parser no more than their length.
2. A filter policy SNS would refuse is refused when set, with SNS's words (recorded from AWS in
   LocalStack's tests/aws/services/sns/test_sns_filter_policy.snapshot.json); a Publish never fails
   on a policy, nor stops at one subscription.
3. JSON documents nested thousands deep in attributes and messages are refused as AWS refuses
   what it cannot read.
4. An SNS body over the size limit is answered (413) even to a client that writes it all first.
"""
from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from conftest import client_for
from kinesim.protocol import user_json
from kinesim.sns import filter_policy_rules as rules
from kinesim.sns.delivery import Deliveries, Message
from kinesim.sns.model import Subscription, Topic
from kinesim.protocol.query import QueryModel, parse_form

ACCOUNT = "000000000000"
SNS_NS = {"s": "http://sns.amazonaws.com/doc/2010-03-31/"}
DEEP_ARRAY = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000
TOO_DEEP = ("Document nesting depth (1001) exceeds the maximum allowed (1000, from "
            "`StreamReadConstraints.getMaxNestingDepth()`)")


@pytest.fixture(scope="module")
def sns(server):
    return client_for(server.url, "sns")


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


def uid() -> str:
    return uuid.uuid4().hex[:10]


def error_of(excinfo) -> tuple[str, str, int]:
    r = excinfo.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


def raw_sns_post(url: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(url + "/", data=body, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "X-Amz-Date": "20260101T000000Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/sns/aws4_request, "
                         "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def queue_with_subscription(sns, sqs, topic_arn: str, **attributes: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=f"q-{uid()}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sub = sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes=attributes,
                        ReturnSubscriptionArn=True)["SubscriptionArn"]
    return url, sub


def bodies(sqs, url: str) -> list[str]:
    out = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages"):
        out += [json.loads(m["Body"])["Message"] for m in messages]
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                        for i, m in enumerate(messages)])
    return out


# ---------------------------------------------------------------- 1. names full of dots

_DECODE = """
import resource, sys, time, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a regression fails here, not the machine
from kinesim.protocol.query import QueryModel, parse_form
model = QueryModel("sns")
body = "Action=ListTopics&A" + "." * int(sys.argv[1]) + "=1"
tracemalloc.start()
started = time.monotonic()
params = model.decode("ListTopics", parse_form(body))
print(params, tracemalloc.get_traced_memory()[1], time.monotonic() - started)
"""


@pytest.mark.parametrize("dots", [16_000, 4 * 1024 * 1024 - 64])
def test_a_name_of_dots_costs_its_length_not_its_square(dots):
    # In a process of its own, with at most 1 GiB: the square of 4 MiB would be terabytes.
    done = subprocess.run([sys.executable, "-c", _DECODE, str(dots)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    params, peak, seconds = done.stdout.split()
    assert params == "{}"  # a name no member of the model has: ignored, as AWS ignores it
    # Its n prefixes of up to n characters were 128 MB for 16,000 dots; now a few copies of the body.
    assert int(peak) < 4 * dots + 1024 * 1024, peak
    assert float(seconds) < 5


def test_members_are_still_read_from_their_dotted_names():
    model = QueryModel("sns")
    form = parse_form("TopicArn=t&Message=m&MessageAttributes.entry.1.Name=color&MessageAttributes.entry.1.Value."
                      "DataType=String&MessageAttributes.entry.1.Value.StringValue=red&MessageAttributes.entry.1."
                      "Value.StringValue.x.y.z=ignored")
    assert model.decode("Publish", form) == {"TopicArn": "t", "Message": "m", "MessageAttributes": {
        "color": {"DataType": "String", "StringValue": "red"}}}


def test_the_server_answers_a_body_of_dots_at_once(server, sns):
    body = b"Action=ListTopics&Version=2010-03-31&A" + b"." * 16_000 + b"=1"
    started = time.monotonic()
    status, text = raw_sns_post(server.url, body)
    assert status == 200 and "<ListTopicsResult>" in text
    assert time.monotonic() - started < 5
    assert "Topics" in sns.list_topics()


# ---------------------------------------------------------------- 2. filter policies

# (policy as sent, SNS's answer after "Invalid parameter: Attributes Reason: "), recorded from AWS
# (test_sns_filter_policy.snapshot.json: test_validate_policy*, test_policy_complexity*).
RECORDED = [
    ({"key": [["value"]]}, 'FilterPolicy: Match value must be String, number, true, false, or null\n at [Source: '
                           '(String)"{"key":[["value"]]}"; line: 1, column: 10]'),
    ({"key": [{"wrong-operator": True}]}, 'FilterPolicy: Unrecognized match type wrong-operator\n at [Source: '
                                          '(String)"{"key":[{"wrong-operator":true}]}"; line: 1, column: 31]'),
    ({"key": [{"suffix": "value", "prefix": "value2"}]},
     'FilterPolicy: Only one key allowed in match expression\n at [Source: (String)"{"key":[{"suffix":"value",'
     '"prefix":"value2"}]}"; line: 1, column: 37]'),
    ({"key": []},
     'FilterPolicy: Empty arrays are not allowed\n at [Source: (String)"{"key":[]}"; line: 1, column: 10]'),
    ({"key": {"suffix": "value"}}, 'FilterPolicy: "suffix" must be an object or an array\n at [Source: (String)'
                                   '"{"key":{"suffix":"value"}}"; line: 1, column: 19]'),
    ({"key": [{"cidr": "bad-/64filter"}]}, "FilterPolicy: Malformed CIDR, mask bits must be an integer"),
    ({"key": [{"cidr": "xx.11.xx/8"}]}, "FilterPolicy: Nonstandard IP address: xx.11.xx"),
    ({"key": [{"numeric": []}]}, 'FilterPolicy: Invalid member in numeric match: ]\n at [Source: (String)"{"key":'
                                 '[{"numeric":[]}]}"; line: 1, column: 22]'),
    ({"key": [{"numeric": ["operator"]}]},
     'FilterPolicy: Unrecognized numeric range operator: operator\n at [Source: (String)"{"key":[{"numeric":'
     '["operator"]}]}"; line: 1, column: 32]'),
    ({"key": [{"numeric": ["=", "000"]}]}, 'FilterPolicy: Value of equals must be numeric\n at [Source: (String)'
                                           '"{"key":[{"numeric":["=","000"]}]}"; line: 1, column: 26]'),
    ({"key": [{"numeric": [">", 3, "<", 1]}]}, 'FilterPolicy: Bottom must be less than top\n at [Source: (String)'
                                               '"{"key":[{"numeric":[">",3,"<",1]}]}"; line: 1, column: 33]'),
    ({"key": [{"numeric": [">", 20, "<", 30, "<", 50]}]},
     'FilterPolicy: Too many terms in numeric range expression\n at [Source: (String)"{"key":[{"numeric":[">",20,'
     '"<",30,"<",50]}]}"; line: 1, column: 36]'),
    ({"key": [{"exists": "no"}]}, 'FilterPolicy: exists match pattern must be either true or false.\n at [Source: '
                                  '(String)"{"key":[{"exists":"no"}]}"; line: 1, column: 20]'),
    ({"key": [{"anything-but": {"suffix": "test"}}]},
     'FilterPolicy: Unsupported anything-but pattern: suffix\n at [Source: (String)"{"key":[{"anything-but":'
     '{"suffix":"test"}}]}"; line: 1, column: 36]'),
    ({"key": [f"value{i}" for i in range(151)]}, "FilterPolicy: Filter policy is too complex"),
    ({f"key{i}": [f"value{i}"] for i in range(1, 7)}, "FilterPolicy: Filter policy can not have more than 5 keys"),
    ({"source": ["aws.cloudwatch", "aws.events", "aws.test", "aws.test2"],
      "$or": [{"metricName": ["CPUUtilization", "ReadLatency", "t1", "t2", "t3", "t4"]},
              {"metricType": ["MetricType", "TestType", "TestType2", "TestType3"],
               "$or": [{"metricId": [1234, 4321, 5678, 9012]}, {"spaceId": [1, 2, 3, 4]}]}]},
     "FilterPolicy: Filter policy is too complex"),
    ({"object": {"key": [{"prefix": "auto-"}]}},
     "Filter policy scope MessageAttributes does not support nested filter policy"),
]


@pytest.mark.parametrize("policy,refusal", RECORDED)
def test_filter_policies_are_refused_with_the_recorded_texts(policy, refusal):
    with pytest.raises(rules.PolicyRefused) as e:
        rules.check(json.dumps(policy), rules.MESSAGE_ATTRIBUTES)
    assert str(e.value) == refusal


def test_the_policies_of_issue_18():
    with pytest.raises(rules.PolicyRefused) as e:
        rules.check('{"$or": 5}', rules.MESSAGE_ATTRIBUTES)
    assert str(e.value).startswith('FilterPolicy: "$or" must be an object or an array\n at [Source: ')
    with pytest.raises(rules.PolicyRefused) as e:
        rules.check('{"a": [{"numeric": [">", "x"]}]}', rules.MESSAGE_ATTRIBUTES)
    assert str(e.value).startswith("FilterPolicy: Value of > must be numeric\n")
    # "$or" not followed by at least two objects is an ordinary key (SNS's "AND/OR logic" page).
    policy = rules.check('{"$or": [7]}', rules.MESSAGE_ATTRIBUTES)
    assert policy.doc == {"$or": [7]} and not policy.or_relationship
    assert rules.check('{"$or": [{"a": ["x"]}, {"b": ["y"]}]}', rules.MESSAGE_ATTRIBUTES).or_relationship


def test_checking_deep_policies_does_not_recurse():
    # Each would overflow Python's stack if walked recursively: refused, each for its reason.
    empty_at_the_bottom = '{"a":' * 999 + "{}" + "}" * 999
    with pytest.raises(rules.PolicyRefused) as e:
        rules.check(empty_at_the_bottom, rules.MESSAGE_BODY)
    assert str(e.value).startswith("FilterPolicy: Empty objects are not allowed\n")
    for deep in ('{"a":' * 998 + '["x"]' + "}" * 998,
                 '{"$or":[' * 333 + '{"a":["x"]},{"b":["y"]}' + ']},{"c":["z"]}' * 332 + "]}"):
        with pytest.raises(rules.PolicyRefused) as e:
            rules.check(deep, rules.MESSAGE_BODY)
        assert str(e.value) == "FilterPolicy: Filter policy is too complex"
    with pytest.raises(rules.PolicyRefused) as e:
        rules.check(DEEP_OBJECT, rules.MESSAGE_BODY)
    assert str(e.value) == f"FilterPolicy: failed to parse JSON. {TOO_DEEP}"


def test_a_policy_that_cannot_be_evaluated_fails_neither_publish_nor_the_others():
    sent = []
    deliveries = Deliveries(lambda arn, body, attrs, trace: sent.append(arn), "http://localhost:4566")
    topic = Topic("t", f"arn:aws:sns:us-east-1:{ACCOUNT}:t")

    def sub(n: int, **attributes: str) -> Subscription:
        return Subscription(f"{topic.arn}:{n}", topic.arn, "sqs", f"arn:aws:sqs:us-east-1:{ACCOUNT}:q{n}", ACCOUNT,
                            attributes)
    # Policies SNS refuses, as an older kinesim stored them: they match nothing, and the rest is delivered.
    subs = [sub(1, FilterPolicy='{"$or": 5}'), sub(2, FilterPolicy='{"$or": [7]}'),
            sub(3, FilterPolicy='{"a": [{"numeric": [">", "x"]}]}'), sub(4, FilterPolicy=DEEP_OBJECT), sub(5),
            sub(6, FilterPolicy='{"a": [{"cidr": "10.0.0.0/8"}]}')]
    deliveries.fan_out(topic, subs, Message(topic.arn, "hello", attributes={
        "a": {"DataType": "String", "StringValue": "10.1.2.3"}}))
    assert sent == [f"arn:aws:sqs:us-east-1:{ACCOUNT}:q5", f"arn:aws:sqs:us-east-1:{ACCOUNT}:q6"]


def test_bad_filter_policies_are_refused_when_set(sns, sqs):
    topic = sns.create_topic(Name=f"filters-{uid()}")["TopicArn"]
    url = sqs.create_queue(QueueName=f"q-{uid()}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for policy in ('{"$or": 5}', '{"a": [{"numeric": [">", "x"]}]}', '{"a": [{"wildcard": "x*"}]}', DEEP_ARRAY):
        with pytest.raises(ClientError) as e:
            sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"FilterPolicy": policy})
        code, message, status = error_of(e)
        assert (code, status) == ("InvalidParameter", 400)
        assert message.startswith("Invalid parameter: Attributes Reason: FilterPolicy: ")
    assert sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"] == []
    _, sub = queue_with_subscription(sns, sqs, topic)
    with pytest.raises(ClientError) as e:
        sns.set_subscription_attributes(SubscriptionArn=sub, AttributeName="FilterPolicy",
                                        AttributeValue='{"object": {"key": [{"prefix": "auto-"}]}}')
    assert error_of(e) == ("InvalidParameter", "Invalid parameter: Filter policy scope MessageAttributes does not "
                                               "support nested filter policy", 400)
    with pytest.raises(ClientError) as e:
        sns.set_subscription_attributes(SubscriptionArn=sub, AttributeName="FilterPolicy", AttributeValue=DEEP_OBJECT)
    assert error_of(e) == ("InvalidParameter", f"Invalid parameter: FilterPolicy: failed to parse JSON. {TOO_DEEP}",
                           400)
    assert "FilterPolicy" not in sns.get_subscription_attributes(SubscriptionArn=sub)["Attributes"]


def test_publish_reaches_every_subscriber_whatever_the_policies(sns, sqs):
    topic = sns.create_topic(Name=f"fanout-{uid()}")["TopicArn"]
    # "$or" with one value: an ordinary key no message attribute can have ($ is no attribute-name character).
    odd_url, _ = queue_with_subscription(sns, sqs, topic, FilterPolicy='{"$or": [7]}')
    plain_url, _ = queue_with_subscription(sns, sqs, topic)
    cidr_url, _ = queue_with_subscription(sns, sqs, topic, FilterPolicy='{"ip": [{"cidr": "10.0.0.0/24"}]}')
    body_url, _ = queue_with_subscription(sns, sqs, topic, FilterPolicyScope="MessageBody",
                                          FilterPolicy='{"kind": ["a"]}')
    for message, ip in (("first", "10.0.0.9"), ("second", "10.0.1.9"), (DEEP_OBJECT, "10.0.0.1"),
                        ('{"kind": "a"}', "192.0.2.1")):
        assert sns.publish(TopicArn=topic, Message=message, MessageAttributes={
            "ip": {"DataType": "String", "StringValue": ip}})["MessageId"]
    assert bodies(sqs, odd_url) == []
    assert bodies(sqs, plain_url) == ["first", "second", DEEP_OBJECT, '{"kind": "a"}']
    assert bodies(sqs, cidr_url) == ["first", DEEP_OBJECT]
    assert bodies(sqs, body_url) == ['{"kind": "a"}']  # a body nested past the JSON reader's limit matches nothing


# ---------------------------------------------------------------- 3. deeply nested JSON

def test_user_json_refuses_what_jackson_refuses_and_writes_without_recursion():
    assert user_json.nesting_depth(user_json.loads("[" * 1000 + "]" * 1000)) == 1000
    for text in ("[" * 1001 + "]" * 1001, DEEP_ARRAY, DEEP_OBJECT):
        with pytest.raises(user_json.InvalidJson) as e:
            user_json.loads(text)
        assert str(e.value) == TOO_DEEP
    deep = user_json.loads('{"a":' * 999 + '["é", 1.5, null]' + "}" * 999)
    assert user_json.dumps(deep) == '{"a":' * 999 + '["\\u00e9",1.5,null]' + "}" * 999


def test_sqs_refuses_policies_nested_past_the_limit(sqs):
    url = sqs.create_queue(QueueName=f"deep-{uid()}")["QueueUrl"]
    refusals = {
        "Policy": "Invalid value for the parameter Policy.",
        "RedrivePolicy": "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a valid JSON "
                         "map.",
        "RedriveAllowPolicy": "Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create "
                              "the redrive allow policy, as it’s in an unsupported format.",
    }
    for name, message in refusals.items():
        for document in (DEEP_OBJECT, DEEP_ARRAY, "{i"):
            with pytest.raises(ClientError) as e:
                sqs.set_queue_attributes(QueueUrl=url, Attributes={name: document})
            assert error_of(e) == ("InvalidAttributeValue", message, 400)
            with pytest.raises(ClientError) as e:
                sqs.create_queue(QueueName=f"deep-{uid()}", Attributes={name: document})
            assert error_of(e) == ("InvalidAttributeValue", message, 400)
    assert "Policy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_sqs_writes_back_a_deep_policy_it_accepted(sqs):
    url = sqs.create_queue(QueueName=f"deep-{uid()}")["QueueUrl"]
    deep = json.dumps({"Version": "2012-10-17", "Statement": [], "Extra": "X"})
    deep = deep.replace('"X"', '{"a":' * 990 + "1" + "}" * 990)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": deep})
    sqs.add_permission(QueueUrl=url, Label="l1", AWSAccountIds=[ACCOUNT], Actions=["SendMessage"])
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    assert user_json.nesting_depth(user_json.loads(policy)) == 991
    assert [s["Sid"] for s in user_json.loads(policy)["Statement"]] == ["l1"]


def test_sqs_task_handle_of_deep_json_is_invalid(sqs):
    handle = base64.b64encode(DEEP_ARRAY.encode()).decode()
    with pytest.raises(ClientError) as e:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert error_of(e) == ("InvalidParameterValue", "Value for parameter TaskHandle is invalid.", 400)


def test_sns_refuses_documents_nested_past_the_limit(sns, sqs):
    topic = sns.create_topic(Name=f"deep-{uid()}")["TopicArn"]
    url, sub = queue_with_subscription(sns, sqs, topic)
    for name in ("RedrivePolicy", "DeliveryPolicy"):
        with pytest.raises(ClientError) as e:
            sns.set_subscription_attributes(SubscriptionArn=sub, AttributeName=name, AttributeValue=DEEP_ARRAY)
        assert error_of(e) == ("InvalidParameter", f"Invalid parameter: {name}: failed to parse JSON. {TOO_DEEP}", 400)
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:other",
                      Attributes={"FilterPolicyScope": "MessageBody", "FilterPolicy": DEEP_OBJECT})
    assert error_of(e) == ("InvalidParameter", "Invalid parameter: Attributes Reason: FilterPolicy: failed to parse "
                                               f"JSON. {TOO_DEEP}", 400)
    for document in (DEEP_OBJECT, DEEP_ARRAY):
        with pytest.raises(ClientError) as e:
            sns.publish(TopicArn=topic, Message=document, MessageStructure="json")
        assert error_of(e) == ("InvalidParameter", "Invalid parameter: Message Structure - JSON message body failed "
                                                   "to parse", 400)
    # Topic policies are stored as given (kinesim reads none of them): nothing to fail on.
    sns.set_topic_attributes(TopicArn=topic, AttributeName="DeliveryPolicy", AttributeValue=DEEP_OBJECT)
    sns.publish(TopicArn=topic, Message="still delivered")
    assert bodies(sqs, url) == ["still delivered"]


# ---------------------------------------------------------------- 4. bodies over the limit

def _send_then_read(url: str, head: bytes, body_size: int) -> bytes:
    """Write the whole request, then read the answer: what urllib, requests and the SDKs do."""
    u = urllib.parse.urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=60) as sock:
        sock.sendall(head)
        chunk = b"A" * (1 << 20)
        left = body_size
        while left:
            n = min(left, len(chunk))
            sock.sendall(chunk[:n])
            left -= n
        answer = b""
        while data := sock.recv(65536):
            answer += data
            if b"</ErrorResponse>" in answer:
                break
        return answer


def test_an_oversized_sns_body_written_whole_gets_the_413(server, sns):
    size = 5 * 1024 * 1024
    head = (b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            b"X-Amz-Date: 20260101T000000Z\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/"
            b"sns/aws4_request, SignedHeaders=host;x-amz-date, Signature=0\r\nContent-Length: %d\r\n\r\n" % size)
    answer = _send_then_read(server.url, head, size)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    root = ET.fromstring(answer.split(b"\r\n\r\n", 1)[1])
    assert root.tag == "{http://sns.amazonaws.com/doc/2010-03-31/}ErrorResponse"
    assert root.find("s:Error/s:Code", SNS_NS).text == "RequestEntityTooLarge"
    assert root.find("s:RequestId", SNS_NS).text
    assert "Topics" in sns.list_topics()
