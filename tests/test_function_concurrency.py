"""Reserved concurrency through a real server: PutFunctionConcurrency / GetFunctionConcurrency /
DeleteFunctionConcurrency with AWS's answers and errors (LocalStack's recordings of AWS,
test_lambda_api.py::TestLambdaReservedConcurrency), GetFunction's `Concurrency`, the account's
UnreservedConcurrentExecutions; and its effect: a synchronous invocation beyond the reservation is
refused with TooManyRequestsException (429, Reason ReservedFunctionConcurrentInvocationLimitExceeded),
an asynchronous event or a Kinesis mapping's batch waits and runs once there is room; the
`ReservedConcurrentExecutions` property of AWS::Lambda::Function and AWS::Serverless::Function.
"""
from __future__ import annotations

import json
import os
import threading
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server, wait_for
from console_api import ConsoleApi
from test_deploy import deploy
from test_lambda_api import make_zip

ROLE = "arn:aws:iam::000000000000:role/concurrency"
ARN_PREFIX = "arn:aws:lambda:us-east-1:000000000000:function:"

# Each invocation marks that it started; one asked to block waits until the test creates `release`;
# then it appends its event to `ran`. Files in GATE_DIR are how the test and the handler meet.
HANDLER = '''
import json, os, time

def handler(event, context):
    gate = os.environ["GATE_DIR"]
    open(os.path.join(gate, "started-" + context.aws_request_id), "w").close()
    while event.get("block") and not os.path.exists(os.path.join(gate, "release")):
        time.sleep(0.01)
    with open(os.path.join(gate, "ran"), "a") as f:
        f.write(json.dumps(event) + "\\n")
    return event
'''


@pytest.fixture(scope="module")
def lam(server):
    # read_timeout: a blocked invocation waits for the test to release it
    return client_for(server.url, "lambda", read_timeout=120)


@pytest.fixture
def gate_dir(tmp_path):
    return tmp_path


@pytest.fixture
def make_function(lam, gate_dir):
    created = []

    def make() -> str:
        name = "cc-" + uuid.uuid4().hex[:10]
        lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler", Timeout=120,
                            Code={"ZipFile": make_zip({"app.py": HANDLER})},
                            Environment={"Variables": {"GATE_DIR": str(gate_dir)}})
        created.append(name)
        return name

    yield make
    for name in created:  # their reservations go with them: the session's other tests see 1000 unreserved
        try:
            lam.delete_function(FunctionName=name)
        except ClientError:
            pass


def error_of(call) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as excinfo:
        call()
    err = excinfo.value.response
    return err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]


def ran(gate_dir) -> list[dict]:
    path = os.path.join(gate_dir, "ran")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


def started(gate_dir) -> int:
    return sum(1 for entry in os.listdir(gate_dir) if entry.startswith("started-"))


def unreserved(lam) -> int:
    return lam.get_account_settings()["AccountLimit"]["UnreservedConcurrentExecutions"]


def test_put_get_delete_round_trip(lam, make_function):
    name = make_function()
    before = unreserved(lam)
    assert set(lam.get_function_concurrency(FunctionName=name)) == {"ResponseMetadata"}  # AWS: {}
    assert "Concurrency" not in lam.get_function(FunctionName=name)
    revision = lam.get_function_configuration(FunctionName=name)["RevisionId"]

    answer = lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=0)
    assert answer["ReservedConcurrentExecutions"] == 0 and set(answer) == {"ReservedConcurrentExecutions",
                                                                           "ResponseMetadata"}
    answer = lam.put_function_concurrency(FunctionName=ARN_PREFIX + name, ReservedConcurrentExecutions=7)
    assert answer["ReservedConcurrentExecutions"] == 7
    assert lam.get_function_concurrency(FunctionName=f"000000000000:function:{name}")[
        "ReservedConcurrentExecutions"] == 7
    shown = lam.get_function(FunctionName=name)
    assert shown["Concurrency"] == {"ReservedConcurrentExecutions": 7}
    assert "ReservedConcurrentExecutions" not in shown["Configuration"]
    assert shown["Configuration"]["RevisionId"] == revision  # not a configuration change
    assert unreserved(lam) == before - 7

    answer = lam.delete_function_concurrency(FunctionName=name)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert set(lam.get_function_concurrency(FunctionName=name)) == {"ResponseMetadata"}
    assert "Concurrency" not in lam.get_function(FunctionName=name)
    assert unreserved(lam) == before


def test_errors(lam, make_function):
    missing = ARN_PREFIX + "no-such-fn:$LATEST"  # AWS names $LATEST
    for call in (lambda: lam.put_function_concurrency(FunctionName="no-such-fn", ReservedConcurrentExecutions=1),
                 lambda: lam.get_function_concurrency(FunctionName="no-such-fn"),
                 lambda: lam.delete_function_concurrency(FunctionName="no-such-fn")):
        assert error_of(call) == ("ResourceNotFoundException", f"Function not found: {missing}", 404)
    name = make_function()
    qualified = ("This operation is permitted on Lambda functions only. Aliases and versions do not support this "
                 "operation. Please specify either a function name or an unqualified function ARN.")
    for ref in (ARN_PREFIX + name + ":$LATEST", name + ":1"):
        assert error_of(lambda: lam.put_function_concurrency(FunctionName=ref, ReservedConcurrentExecutions=0)) == \
            ("InvalidParameterValueException", qualified, 400)
    unchecked = client_for(lam.meta.endpoint_url, "lambda", parameter_validation=False)
    code, message, status = error_of(lambda: unchecked.put_function_concurrency(
        FunctionName=name, ReservedConcurrentExecutions=-1))
    assert (code, status) == ("ValidationException", 400) and "greater than or equal to 0" in message

    # The account's 1000 keep at least 100 unreserved, whatever the number asked
    below_minimum = ("Specified ReservedConcurrentExecutions for function decreases account's "
                     "UnreservedConcurrentExecution below its minimum value of [100].")
    most = unreserved(lam) - 100
    for too_many in (most + 1, 1001):
        assert error_of(lambda: lam.put_function_concurrency(FunctionName=name,
                                                             ReservedConcurrentExecutions=too_many)) == \
            ("InvalidParameterValueException", below_minimum, 400)
    assert lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=most)[
        "ReservedConcurrentExecutions"] == most
    assert unreserved(lam) == 100
    other = make_function()
    assert error_of(lambda: lam.put_function_concurrency(FunctionName=other, ReservedConcurrentExecutions=1)) == \
        ("InvalidParameterValueException", below_minimum, 400)
    # the function's own reservation is replaced, not added to
    assert lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=most)[
        "ReservedConcurrentExecutions"] == most
    lam.delete_function(FunctionName=name)  # its reservation goes with it
    assert unreserved(lam) == most + 100


def test_sync_invoke_beyond_reservation_is_throttled(server, lam, make_function, gate_dir):
    name = make_function()
    lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=1)
    assert ConsoleApi(server.url, "/functions").get("/" + name).json()["workers"]["max"] == 1
    answers = []
    first = threading.Thread(target=lambda: answers.append(
        lam.invoke(FunctionName=name, Payload=json.dumps({"block": True, "n": 1}))))
    first.start()
    try:
        wait_for(lambda: started(gate_dir) == 1, timeout=60)  # the one reserved execution is in use
        with pytest.raises(ClientError) as excinfo:
            lam.invoke(FunctionName=name, Payload=json.dumps({"n": 2}))
        err = excinfo.value.response
        assert err["Error"] == {"Code": "TooManyRequestsException", "Message": "Rate Exceeded."}
        assert err["ResponseMetadata"]["HTTPStatusCode"] == 429
        assert err["Reason"] == "ReservedFunctionConcurrentInvocationLimitExceeded" and err["Type"] == "User"
        assert started(gate_dir) == 1  # refused before it reached the function
    finally:
        open(os.path.join(gate_dir, "release"), "w").close()
        first.join(timeout=120)
    assert answers and answers[0]["StatusCode"] == 200 and "FunctionError" not in answers[0]
    # the execution is free again
    assert json.loads(lam.invoke(FunctionName=name, Payload=b'{"n": 3}')["Payload"].read()) == {"n": 3}
    assert [e["n"] for e in ran(gate_dir)] == [1, 3]


def test_reserved_zero_throttles_and_async_events_wait(server, lam, make_function, gate_dir):
    name = make_function()
    lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=0)
    figures = ConsoleApi(server.url, "/functions")

    def throttles() -> int:
        return figures.get("/" + name).json()["summary"]["throttles"]

    assert lam.invoke(FunctionName=name, InvocationType="Event", Payload=b'{"async": 1}')["StatusCode"] == 202
    wait_for(lambda: throttles() >= 1, timeout=60)  # the event was tried and refused
    assert error_of(lambda: lam.invoke(FunctionName=name, Payload=b"{}"))[::2] == ("TooManyRequestsException", 429)
    assert ran(gate_dir) == [] and started(gate_dir) == 0
    lam.delete_function_concurrency(FunctionName=name)
    wait_for(lambda: ran(gate_dir), timeout=120)  # the event's next try, after its backoff
    assert ran(gate_dir) == [{"async": 1}]
    assert json.loads(lam.invoke(FunctionName=name, Payload=b'{"sync": 1}')["Payload"].read()) == {"sync": 1}


def test_kinesis_mapping_waits_while_reserved_zero(server, lam, kinesis, make_stream, make_function, gate_dir):
    name = make_function()
    lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=0)
    stream = make_stream()
    kinesis.put_record(StreamName=stream, Data=b"kept", PartitionKey="p")
    figures = ConsoleApi(server.url, "/functions")
    mapping = lam.create_event_source_mapping(
        EventSourceArn=f"arn:aws:kinesis:us-east-1:000000000000:stream/{stream}", FunctionName=name,
        StartingPosition="TRIM_HORIZON", MaximumRetryAttempts=0)["UUID"]
    try:
        # throttled batches are tried again, not counted as attempts: MaximumRetryAttempts 0 drops nothing
        wait_for(lambda: figures.get("/" + name).json()["summary"]["throttles"] >= 2, timeout=60)
        assert ran(gate_dir) == []
        lam.delete_function_concurrency(FunctionName=name)
        records = wait_for(lambda: ran(gate_dir), timeout=60)
        assert [r["kinesis"]["data"] for r in records[0]["Records"]] == ["a2VwdA=="]  # b"kept"
    finally:
        lam.delete_event_source_mapping(UUID=mapping)


def test_reservation_survives_restart(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        client = client_for(proc.url, "lambda")
        client.create_function(FunctionName="kept", Runtime="python3.12", Role=ROLE, Handler="app.handler",
                               Code={"ZipFile": make_zip({"app.py": HANDLER})})
        client.put_function_concurrency(FunctionName="kept", ReservedConcurrentExecutions=0)
        proc.stop()
        proc.start()
        client = client_for(proc.url, "lambda")
        assert client.get_function_concurrency(FunctionName="kept")["ReservedConcurrentExecutions"] == 0
        assert error_of(lambda: client.invoke(FunctionName="kept", Payload=b"{}"))[::2] == \
            ("TooManyRequestsException", 429)
    finally:
        proc.stop()


def test_reserved_concurrency_property_of_cloudformation_and_sam(server, lam, tmp_path, capsys):
    stack = "cc" + uuid.uuid4().hex[:8]
    names = {"Plain": f"{stack}-plain", "Sam": f"{stack}-sam"}

    def template(plain: int, sam: int | None) -> str:
        sam_line = f"      ReservedConcurrentExecutions: {sam}\n" if sam is not None else ""
        return f"""Transform: AWS::Serverless-2016-10-31
Resources:
  Plain:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: {names["Plain"]}
      Runtime: python3.12
      Handler: index.handler
      Role: {ROLE}
      ReservedConcurrentExecutions: {plain}
      Code:
        ZipFile: "def handler(event, context):\\n    return 1\\n"
  Sam:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {names["Sam"]}
      Runtime: python3.12
      Handler: index.handler
      InlineCode: "def handler(event, context):\\n    return 1\\n"
{sam_line}"""

    def reserved() -> dict[str, int | None]:
        return {k: lam.get_function_concurrency(FunctionName=n).get("ReservedConcurrentExecutions")
                for k, n in names.items()}

    path = tmp_path / "template.yaml"
    path.write_text(template(0, 5))
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, out + err
    try:
        assert reserved() == {"Plain": 0, "Sam": 5}
        assert error_of(lambda: lam.invoke(FunctionName=names["Plain"], Payload=b"{}"))[::2] == \
            ("TooManyRequestsException", 429)
        assert lam.invoke(FunctionName=names["Sam"], Payload=b"{}")["Payload"].read() == b"1"
        path.write_text(template(2, None))  # changed, and removed: no reservation
        code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
        assert code == 0, out + err
        assert reserved() == {"Plain": 2, "Sam": None}
    finally:
        code, _, out, err = deploy(capsys, server.url, "--stack-name", stack, "--delete")
        assert code == 0, out + err
