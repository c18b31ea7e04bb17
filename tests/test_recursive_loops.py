"""Lambda's recursive loop detection through a real server: a function that writes back to the
bucket, queue or topic that triggers it, or invokes itself, runs 16 times per chain of requests;
the 17th invocation is stopped and its event goes where AWS sends it (an asynchronous event to
the function's dead-letter queue or OnFailure destination; an SQS message back to its queue, which
moves it to the queue's dead-letter queue after maxReceiveCount). A function set to `Allow` loops
on. The chain is followed as on AWS: the trace header of each invocation (`_X_AMZN_TRACE_ID`) is
sent by the SDK inside the function (boto3, the JS SDK v3) and carried by S3, SQS and SNS.

Also PutFunctionRecursionConfig / GetFunctionRecursionConfig (AWS's answers: LocalStack's
recordings, test_lambda_api.py::TestLambdaRecursion) and the `RecursiveLoop` property of
AWS::Lambda::Function and AWS::Serverless::Function.
"""
from __future__ import annotations

import io
import json
import re
import urllib.request
import uuid
import zipfile

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, wait_for
from kinesim.functions import recursion
from kinesim.functions.recursion import function_key
from kinesim.protocol import trace_header
from test_async_invocation import make_queue
from test_deploy import deploy

ROLE = "arn:aws:iam::000000000000:role/loop"
LIMIT = 16  # AWS: "approximately 16" invocations per chain, the next one stopped
TRACE = re.compile(r"Root=(1-[0-9a-f]{8}-[0-9a-f]{24});Parent=[0-9a-f]{16};Sampled=0;Lineage=([0-9a-f]{8}:\d+)")

# Each invocation writes its step and its _X_AMZN_TRACE_ID to SEEN_FILE, then writes step + 1 back
# to what triggered it: the S3 bucket, the SQS queue, the SNS topic.
PYTHON_LOOP = '''
import fcntl, os
import boto3
from botocore.config import Config

def seen(step):
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(f"{step} {os.environ.get('_X_AMZN_TRACE_ID', '')}\\n")

def handler(event, context):
    if "report" in event:  # a direct Invoke: the trace header this invocation runs with
        return os.environ.get("_X_AMZN_TRACE_ID")
    record = event["Records"][0]
    if record.get("eventSource") == "aws:s3":
        step = int(record["s3"]["object"]["key"].rsplit("/", 1)[1])
        seen(step)
        s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
        s3.put_object(Bucket=record["s3"]["bucket"]["name"], Key=f"loop/{step + 1}", Body=b"x")
    elif record.get("eventSource") == "aws:sqs":
        step = int(record["body"])
        seen(step)
        boto3.client("sqs").send_message(QueueUrl=os.environ["QUEUE_URL"], MessageBody=str(step + 1))
    else:
        step = int(record["Sns"]["Message"])
        seen(step)
        boto3.client("sns").publish(TopicArn=record["Sns"]["TopicArn"], Message=str(step + 1))
'''
# A Node.js function invoking itself asynchronously with the runtime's JS SDK v3.
NODE_LOOP = '''
const fs = require("fs");
const { LambdaClient, InvokeCommand } = require("@aws-sdk/client-lambda");
const lambda = new LambdaClient({});
exports.handler = async (event, context) => {
  fs.appendFileSync(process.env.SEEN_FILE, `${event.step} ${process.env._X_AMZN_TRACE_ID || ""}\\n`);
  await lambda.send(new InvokeCommand({FunctionName: context.functionName, InvocationType: "Event",
                                       Payload: JSON.stringify({step: event.step + 1})}));
};
'''


@pytest.fixture(scope="module")
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3", s3={"addressing_style": "path"})


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


@pytest.fixture(scope="module")
def sns(server):
    return client_for(server.url, "sns")


class Looper:
    """A function running one of the loops above, and what its invocations saw."""

    def __init__(self, lam, name: str, arn: str, seen_file: str):
        self.lam, self.name, self.arn, self.seen_file = lam, name, arn, seen_file

    def steps(self) -> list[int]:
        return [int(line.split(" ", 1)[0]) for line in self._lines()]

    def traces(self) -> list[str]:
        return [line.split(" ", 1)[1] for line in self._lines()]

    def _lines(self) -> list[str]:
        try:
            with open(self.seen_file) as f:
                return [line.rstrip("\n") for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []


@pytest.fixture
def looper(lam, tmp_path):
    """make(runtime="python3.12", **create_function arguments) -> Looper; deleted afterwards, with
    its event source mappings (a loop left running stops with its function)."""
    made = []

    def make(runtime: str = "python3.12", variables: dict | None = None, **extra) -> Looper:
        name = "loop-" + uuid.uuid4().hex[:10]
        seen_file = str(tmp_path / f"{name}.seen")
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("app.py" if runtime.startswith("python") else "app.js",
                       PYTHON_LOOP if runtime.startswith("python") else NODE_LOOP)
        arn = lam.create_function(FunctionName=name, Runtime=runtime, Role=ROLE, Handler="app.handler",
                                  Code={"ZipFile": buf.getvalue()}, Timeout=30,
                                  Environment={"Variables": {"SEEN_FILE": seen_file, **(variables or {})}},
                                  **extra)["FunctionArn"]
        made.append(name)
        return Looper(lam, name, arn, seen_file)
    yield make
    for name in made:
        for m in lam.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
            lam.delete_event_source_mapping(UUID=m["UUID"])
        lam.delete_function(FunctionName=name)


def messages(sqs, url: str, until) -> list[dict]:
    """The queue's messages (with their message attributes and AWSTraceHeader), received and deleted
    until `until(messages)`."""
    got: list[dict] = []

    def enough():
        for m in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, MaxNumberOfMessages=10,
                                     MessageAttributeNames=["All"],
                                     MessageSystemAttributeNames=["AWSTraceHeader"]).get("Messages", []):
            got.append(m)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return until(got)
    wait_for(enough, timeout=120)
    return got


def queue_is_empty(sqs, url: str) -> bool:
    """Nothing visible, in flight or delayed: no invocation of a queue-triggered chain is under way."""
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return all(v == "0" for v in attributes.values())


def check_one_chain(fn: Looper) -> None:
    """The invocations 1..16 of one chain ran, in one trace, each knowing its place in it."""
    assert fn.steps() == list(range(1, LIMIT + 1))
    traces = [TRACE.fullmatch(t) for t in fn.traces()]
    assert all(traces), fn.traces()
    assert len({t.group(1) for t in traces}) == 1  # one Root: the trace of the first request
    assert [t.group(2) for t in traces] == [f"{function_key(fn.arn)}:{n}" for n in range(LIMIT)]


# the chain, without a server -----------------------------------------------------------------------


def test_the_lineage_counts_each_function_of_a_chain():
    f, g = (f"arn:aws:lambda:us-east-1:000000000000:function:{n}" for n in "fg")
    first = recursion.next_link(None, f)
    match = TRACE.fullmatch(first.header)
    assert match and match.group(2) == f"{function_key(f)}:0" and first.count == 0 and not first.past_limit
    # f -> g -> f: g joins the chain, f's count goes on; the trace stays the same
    second = recursion.next_link(recursion.next_link(first.header, g).header, f)
    assert second.count == 1
    assert second.header.startswith(f"Root={match.group(1)};")
    assert recursion.lineage(second.header) == {function_key(g): 0, function_key(f): 1}
    link = second
    while not link.past_limit:
        link = recursion.next_link(link.header, f)
    assert link.count == recursion.MAX_CHAIN_INVOCATIONS == LIMIT
    # What is not a lineage entry is left out; a bad Root or Sampled makes a new trace, not sampled.
    odd = recursion.next_link("Root=2-x;Sampled=?;Lineage=zz:1|12345678:x|12345678:2|abcdef01:3", f)
    assert recursion.lineage(odd.header) == {"12345678": 2, "abcdef01": 3, function_key(f): 0}
    assert re.match(r"Root=1-[0-9a-f]{8}-[0-9a-f]{24};Parent=[0-9a-f]{16};Sampled=0;Lineage=", odd.header)
    assert ";Sampled=1;" in recursion.next_link("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", f).header
    # A chain through many functions remembers the most recent ones: the header stays short.
    header = None
    for n in range(recursion.MAX_LINEAGE_ENTRIES + 8):
        header = recursion.next_link(header, f"{f}-{n}").header
    kept = recursion.lineage(header)
    assert list(kept) == [function_key(f"{f}-{n}") for n in range(8, recursion.MAX_LINEAGE_ENTRIES + 8)]


def test_a_batch_runs_in_the_chain_that_invoked_the_function_most():
    f = "arn:aws:lambda:us-east-1:000000000000:function:f"
    key = function_key(f)
    headers = [None, "Root=1-5759e988-bd862e3fe1be46a994272793;Lineage=aaaaaaaa:15", f"Lineage={key}:3",
               f"Lineage=bbbbbbbb:1|{key}:9"]
    assert recursion.deepest(headers, f) == f"Lineage=bbbbbbbb:1|{key}:9"
    assert recursion.deepest(headers[:2], f) == headers[1]
    assert recursion.deepest([None, None], f) is None


def test_the_trace_header_as_services_keep_it():
    assert trace_header.value("Root=1-a;Lineage=a87bd80c:1%7C68fd508a:5") == "Root=1-a;Lineage=a87bd80c:1|68fd508a:5"
    assert trace_header.value(" Root=1-a ") == "Root=1-a"
    assert trace_header.value(None) is None and trace_header.value("  ") is None
    assert trace_header.value("x" * (trace_header.MAX_LENGTH + 1)) is None
    assert trace_header.from_environ({"HTTP_X_AMZN_TRACE_ID": "Root=1-a"}) == "Root=1-a"


# the loops ---------------------------------------------------------------------------------------


def test_a_bucket_loop_stops_and_the_event_goes_to_the_dead_letter_queue(s3, sqs, looper):
    dlq_url, dlq_arn = make_queue(sqs)
    fn = looper(DeadLetterConfig={"TargetArn": dlq_arn})
    bucket = "loop-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "LambdaFunctionConfigurations": [{"LambdaFunctionArn": fn.arn, "Events": ["s3:ObjectCreated:*"]}]})
    s3.put_object(Bucket=bucket, Key="loop/1", Body=b"x")
    # The 16th invocation wrote loop/17 after noting its step: once the event of loop/17 is in the
    # dead-letter queue, every invocation there will be is done.
    [dead] = messages(sqs, dlq_url, lambda got: got)
    [record] = json.loads(dead["Body"])["Records"]
    assert record["s3"]["object"]["key"] == "loop/17"
    attributes = dead["MessageAttributes"]
    assert attributes["ErrorMessage"]["StringValue"].startswith("Lambda has detected your function being invoked "
                                                                "in a recursive loop")
    assert set(attributes) == {"RequestID", "ErrorCode", "ErrorMessage"}
    # The dead letter stays in the event's chain: a queue that triggered the function again would
    # be stopped at once ("this loop will also be terminated", the Lambda guide).
    assert TRACE.fullmatch(dead["Attributes"]["AWSTraceHeader"]).group(2) == f"{function_key(fn.arn)}:{LIMIT - 1}"
    check_one_chain(fn)
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) == \
        sorted(f"loop/{n}" for n in range(1, LIMIT + 2))


def test_a_queue_loop_stops_and_the_message_goes_to_the_queues_dead_letter_queue(lam, sqs, looper):
    dlq_url, dlq_arn = make_queue(sqs)
    url, arn = make_queue(sqs)
    # The stopped message comes back after its visibility timeout; its second receive moves it.
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "2", "RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})
    fn = looper(variables={"QUEUE_URL": url})
    lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=fn.name, BatchSize=1)
    sqs.send_message(QueueUrl=url, MessageBody="1")
    dead = messages(sqs, dlq_url, lambda got: "17" in [m["Body"] for m in got])
    # An invocation slower than the visibility timeout would let SQS deliver its message again (a
    # second chain from there) or move it: whatever the timing, no chain goes past 16, and once the
    # queue holds nothing no invocation is under way.
    wait_for(lambda: queue_is_empty(sqs, url), timeout=60)
    dead += messages(sqs, dlq_url, lambda got: True)
    assert max(fn.steps()) == LIMIT and set(fn.steps()) == set(range(1, LIMIT + 1))
    assert "17" in [m["Body"] for m in dead] and all(int(m["Body"]) <= LIMIT + 1 for m in dead)
    if len(fn.steps()) == LIMIT:  # no message was delivered twice: one chain, as on AWS
        check_one_chain(fn)


def test_a_topic_loop_stops_and_the_record_goes_to_the_on_failure_destination(lam, sns, sqs, looper):
    failures_url, failures_arn = make_queue(sqs)
    fn = looper()
    lam.put_function_event_invoke_config(FunctionName=fn.name, DestinationConfig={
        "OnFailure": {"Destination": failures_arn}})
    topic = sns.create_topic(Name="loop-" + uuid.uuid4().hex[:10])["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="lambda", Endpoint=fn.arn)
    sns.publish(TopicArn=topic, Message="1")
    [failure] = messages(sqs, failures_url, lambda got: got)
    record = json.loads(failure["Body"])
    assert record["requestContext"]["functionArn"] == fn.arn + ":$LATEST"
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 0  # it never ran
    assert record["requestPayload"]["Records"][0]["Sns"]["Message"] == "17"
    assert record["responseContext"] == {"statusCode": 400, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    assert record["responsePayload"]["errorType"] == "RecursiveInvocationException"
    check_one_chain(fn)


def test_a_node_function_invoking_itself_is_stopped(server, sqs, looper):
    if "nodejs22.x" not in json.load(urllib.request.urlopen(server.url + "/_kinesim/health"))["runtimes"]:
        pytest.skip("no Node.js 22 runtime on this machine")
    dlq_url, dlq_arn = make_queue(sqs)
    fn = looper("nodejs22.x", DeadLetterConfig={"TargetArn": dlq_arn})
    fn.lam.invoke(FunctionName=fn.name, InvocationType="Event", Payload=json.dumps({"step": 1}))
    [dead] = messages(sqs, dlq_url, lambda got: got)
    assert json.loads(dead["Body"]) == {"step": 17}
    check_one_chain(fn)  # the JS SDK sent each invocation's trace header with its Invoke


def test_allow_lets_the_loop_run_until_terminate_stops_it(lam, s3, sqs, looper):
    dlq_url, dlq_arn = make_queue(sqs)
    fn = looper(DeadLetterConfig={"TargetArn": dlq_arn})
    assert lam.put_function_recursion_config(FunctionName=fn.name, RecursiveLoop="Allow")["RecursiveLoop"] == "Allow"
    bucket = "allow-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "LambdaFunctionConfigurations": [{"LambdaFunctionArn": fn.arn, "Events": ["s3:ObjectCreated:*"]}]})
    s3.put_object(Bucket=bucket, Key="loop/1", Body=b"x")
    wait_for(lambda: len(fn.steps()) >= LIMIT + 8, timeout=120)
    assert lam.get_function_recursion_config(FunctionName=fn.name)["RecursiveLoop"] == "Allow"
    # Terminate again: the chain is past the limit, so its next invocation is stopped.
    lam.put_function_recursion_config(FunctionName=fn.name, RecursiveLoop="Terminate")
    [dead] = messages(sqs, dlq_url, lambda got: got)
    stopped = int(json.loads(dead["Body"])["Records"][0]["s3"]["object"]["key"].rsplit("/", 1)[1])
    assert stopped > LIMIT + 8
    assert fn.steps() == list(range(1, stopped))
    assert TRACE.fullmatch(fn.traces()[-1]).group(2) == f"{function_key(fn.arn)}:{stopped - 2}"


# a chain's trace header on Invoke ------------------------------------------------------------------


def invoke_with_trace(lam, name: str, header: str, **params):
    """Invoke with an X-Amzn-Trace-Id, as boto3 sends it from inside a function."""
    def add(request, **kwargs):
        request.headers["X-Amzn-Trace-Id"] = header

    lam.meta.events.register_first("before-sign.lambda.Invoke", add)
    try:
        return lam.invoke(FunctionName=name, **params)
    finally:
        lam.meta.events.unregister("before-sign.lambda.Invoke", add)


def test_invoke_continues_the_callers_chain_and_refuses_past_the_limit(lam, sqs, looper):
    fn = looper()
    root = "1-5759e988-bd862e3fe1be46a994272793"
    other = "68fd508a:3"
    key = function_key(fn.arn)

    def header(count: int) -> str:
        return f"Root={root};Parent=53995c3f42cd8ad8;Sampled=0;Lineage={other}|{key}:{count}"
    answer = invoke_with_trace(lam, fn.name, header(LIMIT - 2), Payload=b'{"report": true}')
    trace = json.loads(answer["Payload"].read())
    assert TRACE.fullmatch(trace) is None  # two entries: the caller's other function is kept
    assert trace.startswith(f"Root={root};Parent=") and trace.endswith(f";Sampled=0;Lineage={other}|{key}:{LIMIT - 1}")
    assert trace.split(";")[1] != "Parent=53995c3f42cd8ad8"  # a segment of its own
    with pytest.raises(ClientError) as caught:
        invoke_with_trace(lam, fn.name, header(LIMIT - 1), Payload=b'{"report": true}')
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert caught.value.response["Error"] == {
        "Code": "RecursiveInvocationException",
        "Message": "Lambda has detected your function being invoked in a recursive loop with other Amazon Web "
                   "Services resources and stopped your function's invocation."}
    # boto3 percent-encodes the header ("|" as %7C): the same chain
    with pytest.raises(ClientError) as caught:
        invoke_with_trace(lam, fn.name, header(LIMIT - 1).replace("|", "%7C"), Payload=b'{"report": true}')
    assert caught.value.response["Error"]["Code"] == "RecursiveInvocationException"
    # Another chain, or none: a fresh trace, this function's first invocation in it.
    fresh = json.loads(lam.invoke(FunctionName=fn.name, Payload=b'{"report": true}')["Payload"].read())
    assert TRACE.fullmatch(fresh).group(2) == f"{key}:0" and root not in fresh
    lam.put_function_recursion_config(FunctionName=fn.name, RecursiveLoop="Allow")
    allowed = invoke_with_trace(lam, fn.name, header(40), Payload=b'{"report": true}')
    assert json.loads(allowed["Payload"].read()).endswith(f"{key}:41")


def test_an_sqs_message_keeps_the_senders_trace_header(sqs):
    url, _ = make_queue(sqs)
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a87bd80c:1"

    def add(request, **kwargs):
        request.headers["X-Amzn-Trace-Id"] = header
    sqs.meta.events.register_first("before-sign.sqs.SendMessage", add)
    try:
        sent = sqs.send_message(QueueUrl=url, MessageBody="traced")
    finally:
        sqs.meta.events.unregister("before-sign.sqs.SendMessage", add)
    assert "MD5OfMessageSystemAttributes" not in sent  # the request sent no system attribute
    # The message system attribute, when sent, wins over the HTTP header (X-Ray's guide).
    own = "Root=1-00000000-000000000000000000000000"
    sqs.meta.events.register_first("before-sign.sqs.SendMessage", add)
    try:
        sqs.send_message(QueueUrl=url, MessageBody="own", MessageSystemAttributes={
            "AWSTraceHeader": {"DataType": "String", "StringValue": own}})
    finally:
        sqs.meta.events.unregister("before-sign.sqs.SendMessage", add)
    sqs.send_message(QueueUrl=url, MessageBody="none")
    got = messages(sqs, url, lambda got: len(got) == 3)
    traces = {m["Body"]: m.get("Attributes", {}).get("AWSTraceHeader") for m in got}
    assert traces == {"traced": header, "own": own, "none": None}


# the configuration API -------------------------------------------------------------------------


def error_of(call) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call()
    response = caught.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_recursion_config_api(lam, looper):
    fn = looper()
    answer = lam.get_function_recursion_config(FunctionName=fn.name)
    assert answer["RecursiveLoop"] == "Terminate" and set(answer) == {"RecursiveLoop", "ResponseMetadata"}
    revision = lam.get_function(FunctionName=fn.name)["Configuration"]["RevisionId"]
    answer = lam.put_function_recursion_config(FunctionName=fn.arn, RecursiveLoop="Allow")
    assert answer["RecursiveLoop"] == "Allow" and set(answer) == {"RecursiveLoop", "ResponseMetadata"}
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert lam.get_function_recursion_config(FunctionName=fn.arn)["RecursiveLoop"] == "Allow"
    assert lam.get_function_recursion_config(FunctionName=f"000000000000:function:{fn.name}")["RecursiveLoop"] == \
        "Allow"
    configuration = lam.get_function(FunctionName=fn.name)["Configuration"]
    assert "RecursiveLoop" not in configuration and configuration["RevisionId"] == revision
    assert lam.put_function_recursion_config(FunctionName=fn.name, RecursiveLoop="Terminate")["RecursiveLoop"] == \
        "Terminate"
    assert lam.get_function_recursion_config(FunctionName=fn.name)["RecursiveLoop"] == "Terminate"
    # AWS's answers
    assert error_of(lambda: lam.put_function_recursion_config(FunctionName=fn.name, RecursiveLoop="InvalidValue")) \
        == ("ValidationException", "1 validation error detected: Value 'InvalidValue' at 'recursiveLoop' failed to "
            "satisfy constraint: Member must satisfy enum value set: [Terminate, Allow]", 400)
    missing = "arn:aws:lambda:us-east-1:000000000000:function:no-such-fn"
    for call in (lambda: lam.get_function_recursion_config(FunctionName="no-such-fn"),
                 lambda: lam.put_function_recursion_config(FunctionName="no-such-fn", RecursiveLoop="Allow")):
        assert error_of(call) == ("ResourceNotFoundException", f"Function not found: {missing}", 404)
    code, message, status = error_of(lambda: lam.get_function_recursion_config(FunctionName=f"{fn.name}:1"))
    assert (code, status) == ("ValidationException", 400) and "at 'functionName'" in message


def test_recursive_loop_property_of_cloudformation_and_sam(server, lam, tmp_path, capsys):
    stack = "rl" + uuid.uuid4().hex[:8]
    names = {"Plain": f"{stack}-plain", "Sam": f"{stack}-sam", "Default": f"{stack}-default"}

    def template(plain: str, sam: str | None) -> str:
        sam_line = f"      RecursiveLoop: {sam}\n" if sam else ""
        return f"""Transform: AWS::Serverless-2016-10-31
Resources:
  Plain:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: {names["Plain"]}
      Runtime: python3.12
      Handler: index.handler
      Role: {ROLE}
      RecursiveLoop: {plain}
      Code:
        ZipFile: "def handler(event, context):\\n    return 1\\n"
  Sam:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {names["Sam"]}
      Runtime: python3.12
      Handler: index.handler
      InlineCode: "def handler(event, context):\\n    return 1\\n"
{sam_line}  Default:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {names["Default"]}
      Runtime: python3.12
      Handler: index.handler
      InlineCode: "def handler(event, context):\\n    return 1\\n"
"""

    def settings() -> dict[str, str]:
        return {k: lam.get_function_recursion_config(FunctionName=n)["RecursiveLoop"] for k, n in names.items()}
    path = tmp_path / "template.yaml"
    path.write_text(template("Allow", "Allow"))
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, out + err
    try:
        assert settings() == {"Plain": "Allow", "Sam": "Allow", "Default": "Terminate"}
        path.write_text(template("Terminate", None))  # changed, and removed: Lambda's default again
        code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
        assert code == 0, out + err
        assert settings() == {"Plain": "Terminate", "Sam": "Terminate", "Default": "Terminate"}
    finally:
        code, _, out, err = deploy(capsys, server.url, "--stack-name", stack, "--delete")
        assert code == 0, out + err
