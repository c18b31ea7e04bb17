"""Asynchronous invocations as AWS runs them, through boto3 against a real server: the event invoke
configuration API (Put/Update/Get/Delete/List and AWS's errors), retries of a failing function,
MaximumEventAgeInSeconds, the invocation records sent to OnSuccess / OnFailure destinations (SQS,
Lambda, S3) and the bare event sent to a dead-letter queue, accepted events surviving `kill -9`,
a bounded thread pool, and AWS::Lambda::EventInvokeConfig / SAM's EventInvokeConfig deployed.

Most tests use a server in this process (InProcessServer) so that they can shorten the module's
tunables (AWS's one- and two-minute retry delays, the length of a second of event age); the
`kill -9` test runs a server subprocess with AWS's timing.

Expected shapes: LocalStack's recordings of AWS, tests/aws/services/lambda_/
test_lambda_destinations.snapshot.json and test_lambda_api.snapshot.json (TestLambdaEventInvokeConfig).
"""
from __future__ import annotations

import io
import json
import os
import re
import signal
import threading
import time
import urllib.request
import uuid
import zipfile
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, wait_for
from kinesim.config import Settings
from kinesim.deploy import cli
from kinesim.functions import async_invoke
from kinesim.server import InProcessServer, ServerProcess, free_port

ROLE = "arn:aws:iam::000000000000:role/lambda-role"
ARN = "arn:aws:lambda:us-east-1:000000000000:function:"
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

# Writes every invocation to SEEN_FILE; waits for the file GATE (when set) before it answers;
# raises for {"fail": true}.
HANDLER = """
import fcntl, json, os, time

def _note(entry):
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(entry) + "\\n")

def handler(event, context):
    _note({"at": time.time(), "request_id": context.aws_request_id, "pid": os.getpid(), "event": event})
    gate = os.environ.get("GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.05)
    if isinstance(event, dict) and event.get("fail"):
        raise ValueError("asked to fail")
    _note({"done": context.aws_request_id})
    return {"echo": event}
"""


def package() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
    return buf.getvalue()


def seen(path) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def started(path) -> list[dict]:
    return [e for e in seen(path) if "request_id" in e]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings = Settings(port=free_port(), data_dir=str(tmp_path_factory.mktemp("data")), create_stream_ms=0,
                        delete_stream_ms=0, update_stream_ms=0, log_level="warning")
    with InProcessServer(settings) as proc:
        yield proc


@pytest.fixture(scope="module")
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture
def make_function(lam, tmp_path):
    """A function running HANDLER; its invocations are written to the returned file."""
    def make(name: str | None = None, **extra) -> tuple[str, str]:
        name = name or "fn-" + uuid.uuid4().hex[:10]
        seen_file = str(tmp_path / f"{name}.seen")
        variables = {"SEEN_FILE": seen_file, **extra.pop("variables", {})}
        lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                            Code={"ZipFile": package()}, Timeout=60, Environment={"Variables": variables}, **extra)
        return name, seen_file
    return make


def make_queue(sqs) -> tuple[str, str]:
    url = sqs.create_queue(QueueName="q-" + uuid.uuid4().hex[:10])["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def receive_one(sqs, url: str, **kwargs) -> dict:
    def poll():
        return sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, MaxNumberOfMessages=10, **kwargs).get("Messages")
    [message] = wait_for(poll, timeout=60)
    return message


def error(excinfo) -> tuple[str, str, int]:
    response = excinfo.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


# --- the configuration API ----------------------------------------------------------------


def test_event_invoke_config_round_trip(lam, make_function):
    name, _ = make_function()
    target, _ = make_function()
    out = lam.put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=0)
    assert out["FunctionArn"] == f"{ARN}{name}:$LATEST" and out["MaximumRetryAttempts"] == 0
    assert out["DestinationConfig"] == {"OnSuccess": {}, "OnFailure": {}} and "MaximumEventAgeInSeconds" not in out
    assert abs(out["LastModified"].timestamp() - time.time()) < 60
    # Put replaces: the retry setting is gone
    out = lam.put_function_event_invoke_config(FunctionName=name, MaximumEventAgeInSeconds=60)
    assert out["MaximumEventAgeInSeconds"] == 60 and "MaximumRetryAttempts" not in out
    # Update changes what it names
    out = lam.update_function_event_invoke_config(
        FunctionName=name, MaximumRetryAttempts=1, DestinationConfig={"OnSuccess": {"Destination": ARN + target}})
    assert (out["MaximumEventAgeInSeconds"], out["MaximumRetryAttempts"]) == (60, 1)
    assert out["DestinationConfig"] == {"OnSuccess": {"Destination": ARN + target}, "OnFailure": {}}
    got = lam.get_function_event_invoke_config(FunctionName=name, Qualifier="$LATEST")
    assert {k: got[k] for k in ("FunctionArn", "MaximumRetryAttempts", "MaximumEventAgeInSeconds",
                                "DestinationConfig")} == {k: out[k] for k in ("FunctionArn", "MaximumRetryAttempts",
                                                                                  "MaximumEventAgeInSeconds",
                                                                                  "DestinationConfig")}
    # versions and aliases have configurations of their own
    version = lam.publish_version(FunctionName=name)["Version"]
    lam.create_alias(FunctionName=name, Name="live", FunctionVersion=version)
    with pytest.raises(ClientError) as e:
        lam.get_function_event_invoke_config(FunctionName=name, Qualifier=version)
    assert error(e) == ("ResourceNotFoundException",
                        f"The function {ARN}{name}:{version} doesn't have an EventInvokeConfig", 404)
    assert lam.put_function_event_invoke_config(FunctionName=f"{name}:{version}", MaximumEventAgeInSeconds=120)[
        "FunctionArn"] == f"{ARN}{name}:{version}"
    assert lam.put_function_event_invoke_config(FunctionName=ARN + name + ":live", Qualifier="live",
                                                MaximumRetryAttempts=2)["FunctionArn"] == f"{ARN}{name}:live"
    listed = lam.list_function_event_invoke_configs(FunctionName=name)["FunctionEventInvokeConfigs"]
    assert [c["FunctionArn"] for c in listed] == [f"{ARN}{name}:$LATEST", f"{ARN}{name}:{version}", f"{ARN}{name}:live"]
    first = lam.list_function_event_invoke_configs(FunctionName=name, MaxItems=2)
    rest = lam.list_function_event_invoke_configs(FunctionName=name, Marker=first["NextMarker"])
    assert [c["FunctionArn"] for c in first["FunctionEventInvokeConfigs"] + rest["FunctionEventInvokeConfigs"]] == \
        [c["FunctionArn"] for c in listed] and "NextMarker" not in rest
    # deleting the alias hides its configuration; deleting the function removes them all
    lam.delete_alias(FunctionName=name, Name="live")
    assert len(lam.list_function_event_invoke_configs(FunctionName=name)["FunctionEventInvokeConfigs"]) == 2
    lam.delete_function_event_invoke_config(FunctionName=name, Qualifier=version)
    with pytest.raises(ClientError) as e:
        lam.delete_function_event_invoke_config(FunctionName=name, Qualifier=version)
    assert error(e)[0] == "ResourceNotFoundException"
    lam.delete_function(FunctionName=name)
    lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                        Code={"ZipFile": package()})
    assert lam.list_function_event_invoke_configs(FunctionName=name)["FunctionEventInvokeConfigs"] == []


def test_event_invoke_config_errors(server, lam, make_function):
    name, _ = make_function()
    other, _ = make_function()
    unchecked = client_for(server.url, "lambda", parameter_validation=False)
    cases = [
        # (call, params, (code, message, status)) — AWS's answers, as recorded
        (lam.put_function_event_invoke_config, {"FunctionName": "doesnotexist"},
         ("InvalidParameterValueException", "You must specify at least one of error handling or destination setting.",
          400)),
        (lam.put_function_event_invoke_config, {"FunctionName": "doesnotexist", "MaximumRetryAttempts": 1},
         ("ResourceNotFoundException", "The function doesn't exist.", 404)),
        (lam.put_function_event_invoke_config, {"FunctionName": name, "Qualifier": "nosuchalias",
                                                "MaximumRetryAttempts": 1},
         ("ResourceNotFoundException", "The function doesn't exist.", 404)),
        (lam.put_function_event_invoke_config, {"FunctionName": f"{name}:1", "Qualifier": "$LATEST",
                                                "MaximumRetryAttempts": 1},
         ("InvalidParameterValueException",
          "The derived qualifier from the function name does not match the specified qualifier.", 400)),
        (lam.put_function_event_invoke_config,
         {"FunctionName": name, "DestinationConfig": {"OnSuccess": {"Destination": ARN + "doesnotexist"}}},
         ("InvalidParameterValueException", f"The destination ARN {ARN}doesnotexist is invalid.", 400)),
        (lam.put_function_event_invoke_config,
         {"FunctionName": name, "DestinationConfig": {"OnSuccess": {"Destination": ARN + name}}},
         ("InvalidParameterValueException", "You can't specify the function as a destination for itself.", 400)),
        (lam.put_function_event_invoke_config,
         {"FunctionName": name, "DestinationConfig": {"OnSuccess": {"Destination": f"arn:aws:iam:us-east-1:"
                                                                                   f"000000000000:function:{other}"}}},
         ("InvalidParameterValueException",
          f"The provided destination config DestinationConfig(onSuccess=OnSuccess(destination=arn:aws:iam:us-east-1:"
          f"000000000000:function:{other}), onFailure=null) is invalid.", 400)),
        (lam.put_function_event_invoke_config,
         {"FunctionName": name, "DestinationConfig": {"OnSuccess": {"Destination": "arn:aws:s3:::some-bucket"}}},
         ("InvalidParameterValueException",
          "The provided destination config DestinationConfig(onSuccess=OnSuccess(destination=arn:aws:s3:::some-bucket),"
          " onFailure=null) is invalid.", 400)),
        (lam.update_function_event_invoke_config, {"FunctionName": name, "MaximumRetryAttempts": 1},
         ("ResourceNotFoundException", f"The function {ARN}{name}:$LATEST doesn't have an EventInvokeConfig", 404)),
        (lam.update_function_event_invoke_config, {"FunctionName": "doesnotexist", "MaximumRetryAttempts": 1},
         ("ResourceNotFoundException", "The function doesn't exist.", 404)),
        (lam.get_function_event_invoke_config, {"FunctionName": "doesnotexist"},
         ("ResourceNotFoundException", f"The function {ARN}doesnotexist:$LATEST doesn't have an EventInvokeConfig",
          404)),
        (lam.delete_function_event_invoke_config, {"FunctionName": name},
         ("ResourceNotFoundException", f"The function {ARN}{name}:$LATEST doesn't have an EventInvokeConfig", 404)),
        (lam.list_function_event_invoke_configs, {"FunctionName": "doesnotexist"},
         ("ResourceNotFoundException", "The function doesn't exist.", 404)),
        (unchecked.put_function_event_invoke_config, {"FunctionName": name, "MaximumRetryAttempts": 3},
         ("ValidationException", "1 validation error detected: Value '3' at 'maximumRetryAttempts' failed to satisfy "
                                 "constraint: Member must have value less than or equal to 2", 400)),
        (unchecked.put_function_event_invoke_config, {"FunctionName": name, "MaximumEventAgeInSeconds": 59},
         ("ValidationException", "1 validation error detected: Value '59' at 'maximumEventAgeInSeconds' failed to "
                                 "satisfy constraint: Member must have value greater than or equal to 60", 400)),
    ]
    for call, params, expected in cases:
        with pytest.raises(ClientError) as e:
            call(**params)
        assert error(e) == expected, params
    # kinesim serves no EventBridge: an event bus is refused, saying why
    with pytest.raises(ClientError) as e:
        lam.put_function_event_invoke_config(FunctionName=name, DestinationConfig={"OnFailure": {
            "Destination": "arn:aws:events:us-east-1:000000000000:event-bus/default"}})
    code, message, status = error(e)
    assert (code, status) == ("InvalidParameterValueException", 400) and "EventBridge" in message
    with pytest.raises(ClientError):
        lam.get_function_event_invoke_config(FunctionName=name)  # nothing was saved by the failed calls


# --- behaviour ----------------------------------------------------------------------------


def test_failing_event_is_retried_then_its_record_goes_to_on_failure(server, lam, sqs, make_function, monkeypatch):
    monkeypatch.setattr(async_invoke, "RETRY_DELAYS_S", (0.5, 1.0))
    name, seen_file = make_function()
    url, queue_arn = make_queue(sqs)
    lam.put_function_event_invoke_config(FunctionName=name, DestinationConfig={"OnFailure": {"Destination": queue_arn}})
    out = lam.invoke(FunctionName=name, InvocationType="Event", Payload=b'{"fail": true, "n": 1}')
    assert out["StatusCode"] == 202 and "FunctionError" not in out
    request_id = out["ResponseMetadata"]["RequestId"]
    record = json.loads(receive_one(sqs, url)["Body"])
    attempts = started(seen_file)
    assert [a["request_id"] for a in attempts] == [request_id] * 3  # the first attempt and two retries
    assert attempts[1]["at"] - attempts[0]["at"] >= 0.5 and attempts[2]["at"] - attempts[1]["at"] >= 1.0
    assert list(record) == ["version", "timestamp", "requestContext", "requestPayload", "responseContext",
                            "responsePayload"]
    assert ISO_MS.fullmatch(record.pop("timestamp"))
    stack = record["responsePayload"].pop("stackTrace")
    assert isinstance(stack, list) and stack
    assert record == {
        "version": "1.0",
        "requestContext": {"requestId": request_id, "functionArn": f"{ARN}{name}:$LATEST",
                           "condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": {"fail": True, "n": 1},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "asked to fail", "errorType": "ValueError", "requestId": request_id},
    }
    wait_for(lambda: server.edge.functions.async_invoker.pending() == 0)
    assert len(started(seen_file)) == 3  # no more attempts


def test_success_record_goes_to_on_success(server, lam, sqs, make_function):
    name, seen_file = make_function()
    version = lam.publish_version(FunctionName=name)["Version"]
    lam.create_alias(FunctionName=name, Name="live", FunctionVersion=version)
    url, queue_arn = make_queue(sqs)
    lam.put_function_event_invoke_config(FunctionName=name, Qualifier="live", MaximumRetryAttempts=0,
                                         DestinationConfig={"OnSuccess": {"Destination": queue_arn},
                                                            "OnFailure": {"Destination": queue_arn}})
    out = lam.invoke(FunctionName=name, Qualifier="live", InvocationType="Event", Payload=b'{"hello": "world"}')
    record = json.loads(receive_one(sqs, url)["Body"])
    record.pop("timestamp")
    assert record == {
        "version": "1.0",
        "requestContext": {"requestId": out["ResponseMetadata"]["RequestId"], "functionArn": f"{ARN}{name}:live",
                           "condition": "Success", "approximateInvokeCount": 1},
        "requestPayload": {"hello": "world"},
        "responseContext": {"statusCode": 200, "executedVersion": version},
        "responsePayload": {"echo": {"hello": "world"}},
    }
    # $LATEST has no configuration: its events leave no record
    lam.invoke(FunctionName=name, InvocationType="Event", Payload=b'{"hello": "again"}')
    wait_for(lambda: [e for e in started(seen_file) if e["event"] == {"hello": "again"}])
    wait_for(lambda: server.edge.functions.async_invoker.pending() == 0)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_event_too_old_for_its_next_retry_is_given_up(lam, sqs, make_function, monkeypatch):
    # One second of MaximumEventAgeInSeconds lasts 50 ms: 60 s is 3 s, less than the 30 s before a
    # retry, so (as AWS does) the event is given up right after the first failure.
    monkeypatch.setattr(async_invoke, "AGE_SECOND_S", 0.05)
    monkeypatch.setattr(async_invoke, "RETRY_DELAYS_S", (30.0, 30.0))
    name, seen_file = make_function()
    url, queue_arn = make_queue(sqs)
    lam.put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=2, MaximumEventAgeInSeconds=60,
                                         DestinationConfig={"OnFailure": {"Destination": queue_arn}})
    out = lam.invoke(FunctionName=name, InvocationType="Event", Payload=b'{"fail": true}')
    record = json.loads(receive_one(sqs, url)["Body"])
    assert record["requestContext"] == {"requestId": out["ResponseMetadata"]["RequestId"],
                                        "functionArn": f"{ARN}{name}:$LATEST", "condition": "EventAgeExceeded",
                                        "approximateInvokeCount": 1}
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert len(started(seen_file)) == 1


def test_dead_letter_queue_and_s3_and_lambda_destinations(server, lam, sqs, make_function, tmp_path):
    s3 = client_for(server.url, "s3")
    bucket = "failures-" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=bucket)
    dlq_url, dlq_arn = make_queue(sqs)
    collector, collector_seen = make_function()
    name, _ = make_function(DeadLetterConfig={"TargetArn": dlq_arn})
    lam.put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=0, DestinationConfig={
        "OnFailure": {"Destination": f"arn:aws:s3:::{bucket}"}, "OnSuccess": {"Destination": ARN + collector}})
    failed = lam.invoke(FunctionName=name, InvocationType="Event", Payload=b'{"fail": true, "k": "v"}')
    request_id = failed["ResponseMetadata"]["RequestId"]
    # the dead-letter queue gets the event itself, with AWS's three attributes
    message = receive_one(sqs, dlq_url, MessageAttributeNames=["All"])
    assert json.loads(message["Body"]) == {"fail": True, "k": "v"}
    assert message["MessageAttributes"] == {
        "RequestID": {"DataType": "String", "StringValue": request_id},
        "ErrorCode": {"DataType": "Number", "StringValue": "200"},
        "ErrorMessage": {"DataType": "String", "StringValue": "asked to fail"},
    }
    # the S3 OnFailure destination an object per record, under aws/lambda/async/<function>/
    [obj] = wait_for(lambda: s3.list_objects_v2(Bucket=bucket).get("Contents"))
    key = rf"aws/lambda/async/{name}/\d{{4}}/\d\d/\d\d/\d{{4}}-\d\d-\d\dT\d\d\.\d\d\.\d\d-[0-9a-f-]{{36}}"
    assert re.fullmatch(key, obj["Key"]), obj["Key"]
    record = json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
    assert record["requestContext"]["condition"] == "RetriesExhausted" and record["requestPayload"]["k"] == "v"
    # a Lambda OnSuccess destination is invoked (asynchronously) with the record as its event
    ok = lam.invoke(FunctionName=name, InvocationType="Event", Payload=b'{"ok": 1}')
    [delivered] = wait_for(lambda: started(collector_seen))
    assert delivered["event"]["requestContext"]["requestId"] == ok["ResponseMetadata"]["RequestId"]
    assert delivered["event"]["requestContext"]["condition"] == "Success"
    assert delivered["event"]["responsePayload"] == {"echo": {"ok": 1}}


def test_a_long_queue_holds_no_more_threads_than_the_pool(server, lam, make_function, tmp_path):
    gate = tmp_path / "gate"
    name, seen_file = make_function(variables={"GATE": str(gate)})
    invoker = server.edge.functions.async_invoker
    for i in range(60):
        lam.invoke(FunctionName=name, InvocationType="Event", Payload=json.dumps({"i": i}).encode())
    wait_for(lambda: len(started(seen_file)) >= 2)  # running ones wait at the gate; the rest are queued
    pool = [t for t in threading.enumerate() if t.name.startswith("kinesim-event-invoke-")]
    assert len(pool) == async_invoke.WORKERS and invoker.pending() >= 60 - async_invoke.WORKERS
    gate.touch()
    wait_for(lambda: len([e for e in seen(seen_file) if "done" in e]) == 60, timeout=120)
    wait_for(lambda: invoker.pending() == 0)
    assert len([t for t in threading.enumerate() if t.name.startswith("kinesim-event-invoke-")]) == async_invoke.WORKERS


# --- durability ---------------------------------------------------------------------------


def workers_with(variable_value: str) -> list[int]:
    """The processes whose environment holds `variable_value`: a function's workers."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if variable_value.encode() in f.read():
                        pids.append(int(entry))
            except OSError:  # gone, or not ours
                pass
    return pids


def test_accepted_events_survive_kill9(tmp_path):
    """Events accepted (202) whose function cannot finish before the kill (it waits for a file the
    test writes only afterwards) all run to the end after a restart, under their request ids."""
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0, delete_stream_ms=0,
                        update_stream_ms=0, log_level="warning")
    gate, seen_file = tmp_path / "gate", tmp_path / "seen"
    proc = ServerProcess(settings).start()
    try:
        lam = client_for(proc.url, "lambda")
        lam.create_function(FunctionName="durable", Runtime="python3.12", Role=ROLE, Handler="app.handler",
                            Code={"ZipFile": package()}, Timeout=60,
                            Environment={"Variables": {"SEEN_FILE": str(seen_file), "GATE": str(gate)}})
        request_ids = [lam.invoke(FunctionName="durable", InvocationType="Event",
                                  Payload=json.dumps({"n": n}).encode())["ResponseMetadata"]["RequestId"]
                       for n in range(3)]
        wait_for(lambda: started(seen_file))  # at least one is inside the handler, held at the gate
        proc.kill()
        # Workers orphaned by the kill (they leave by themselves within a second) must not finish
        # the job once the gate opens: ended now, and waited for.
        for pid in workers_with(str(seen_file)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for(lambda: not workers_with(str(seen_file)))
        assert not [e for e in seen(seen_file) if "done" in e]
        gate.touch()
        proc = ServerProcess(settings).start()
        wait_for(lambda: sorted(e["done"] for e in seen(seen_file) if "done" in e) == sorted(request_ids))
        runs = {e["request_id"]: e["event"] for e in started(seen_file)}
        assert sorted(runs) == sorted(request_ids) and sorted(e["n"] for e in runs.values()) == [0, 1, 2]
    finally:
        proc.stop()


# --- deploy ---------------------------------------------------------------------------------


TEMPLATE = """
Transform: AWS::Serverless-2016-10-31
Resources:
  Failures:
    Type: AWS::SQS::Queue
  Worker:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: app.handler
      CodeUri: src/
      Environment:
        Variables: {SEEN_FILE: "%(seen)s"}
      EventInvokeConfig:
        MaximumRetryAttempts: 0
        MaximumEventAgeInSeconds: 600
        DestinationConfig:
          OnFailure:
            Type: SQS
            Destination: !GetAtt Failures.Arn
  Plain:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: app.handler
      CodeUri: src/
  PlainAsync:
    Type: AWS::Lambda::EventInvokeConfig
    Properties:
      FunctionName: !Ref Plain
      Qualifier: $LATEST
      MaximumRetryAttempts: %(retries)s
Outputs:
  Worker:
    Value: !Ref Worker
  Plain:
    Value: !Ref Plain
  PlainAsync:
    Value: !Ref PlainAsync
  FailuresUrl:
    Value: !Ref Failures
"""


def test_event_invoke_configs_deploy(server, lam, sqs, tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(HANDLER)
    template = tmp_path / "template.yaml"
    stack = "async" + uuid.uuid4().hex[:8]

    def deploy(*args: str) -> dict[str, str]:
        code = cli.main([str(template), "--stack-name", stack, *args, "--endpoint-url", server.url])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        with urllib.request.urlopen(f"{server.url}/_kinesim/stacks/{stack}") as response:
            return {k: v["OutputValue"] for k, v in json.loads(response.read())["Outputs"].items()}

    template.write_text(TEMPLATE % {"seen": tmp_path / "seen", "retries": 1})
    outputs = deploy()
    worker, plain = outputs["Worker"], outputs["Plain"]
    assert outputs["PlainAsync"] == f"{plain}|$LATEST"
    config = lam.get_function_event_invoke_config(FunctionName=worker)
    failures_arn = sqs.get_queue_attributes(QueueUrl=outputs["FailuresUrl"],
                                           AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert (config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (0, 600)
    assert config["DestinationConfig"] == {"OnSuccess": {}, "OnFailure": {"Destination": failures_arn}}
    assert lam.get_function_event_invoke_config(FunctionName=plain)["MaximumRetryAttempts"] == 1
    # the deployed configuration works: a failure's record reaches the stack's queue
    lam.invoke(FunctionName=worker, InvocationType="Event", Payload=b'{"fail": true}')
    record = json.loads(receive_one(sqs, outputs["FailuresUrl"])["Body"])
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 1
    # updated in place, then deleted with the stack
    template.write_text(TEMPLATE % {"seen": tmp_path / "seen", "retries": 2})
    deploy()
    assert lam.get_function_event_invoke_config(FunctionName=plain)["MaximumRetryAttempts"] == 2
    code = cli.main([str(template), "--stack-name", stack, "--delete", "--endpoint-url", server.url])
    assert code == 0, capsys.readouterr()
    with pytest.raises(ClientError):
        lam.get_function_event_invoke_config(FunctionName=plain)



def test_a_waiting_retry_resumes_with_its_attempt_count_after_a_restart(tmp_path):
    """The invoker alone, on a real store: an event waiting for its retry when the server stops is
    retried by the next server under the same request id, its earlier attempt counted."""
    from kinesim.functions.async_invoke import AsyncInvoker, AsyncSettings
    from kinesim.store import Store

    class Failing:
        def __init__(self):
            self.calls = []

        def __call__(self, ref, payload, request_id, trace_header):
            self.calls.append(request_id)
            return SimpleNamespace(payload=b'{"errorMessage": "no", "errorType": "E"}', function_error="Unhandled",
                                   executed_version="$LATEST")

    class Sender:
        def __init__(self):
            self.records = []

        def send_record(self, arn, record, function_name, trace_header):
            self.records.append((arn, record))

        def send_dead_letter(self, *args):
            pass

    def settings(ref):
        return AsyncSettings("f", ARN + "f:$LATEST", max_retries=1, on_failure="arn:aws:sqs:us-east-1:000000000000:q")

    store = Store(str(tmp_path / "db"))
    try:
        first = Failing()
        invoker = AsyncInvoker(first, store, settings, Sender(), retry_delays_s=(3600.0,))
        invoker.submit("f", b'{"x": 1}', "rid-1")
        wait_for(lambda: first.calls)
        wait_for(lambda: store.documents("lambda-async-event") and
                 next(iter(store.documents("lambda-async-event").values()))["attempts"] == 1)
        invoker.close()
        [doc] = store.documents("lambda-async-event").values()
        doc["due"] = time.time()  # the hour has passed
        store.put_document("lambda-async-event", next(iter(store.documents("lambda-async-event"))), doc)
        second, sender = Failing(), Sender()
        invoker = AsyncInvoker(second, store, settings, sender, retry_delays_s=(3600.0,))
        wait_for(lambda: sender.records)
        invoker.close()
        [(arn, record)] = sender.records
        assert second.calls == ["rid-1"] and arn.endswith(":q")
        assert record["requestContext"] == {"requestId": "rid-1", "functionArn": ARN + "f:$LATEST",
                                            "condition": "RetriesExhausted", "approximateInvokeCount": 2}
        assert store.documents("lambda-async-event") == {}
    finally:
        store.close()


def test_throttled_events_wait_without_using_up_their_retries(tmp_path, monkeypatch):
    """A throttle (or a function not ready) is not an attempt: the event waits, longer each time,
    and is run once it can be, its record counting only the attempts that reached the function."""
    from kinesim.functions.async_invoke import AsyncInvoker, AsyncSettings
    from kinesim.protocol.errors import AwsError
    from kinesim.store import Store

    monkeypatch.setattr(async_invoke, "THROTTLE_BACKOFF_S", (0.05, 0.2))
    calls, records = [], []

    def invoke(ref, payload, request_id, trace_header):
        calls.append(time.monotonic())
        if len(calls) <= 4:
            raise AwsError("TooManyRequestsException", "Rate Exceeded.", 429)
        return SimpleNamespace(payload=b'{"ok": true}', function_error=None, executed_version="$LATEST")

    sender = SimpleNamespace(send_record=lambda arn, record, fn, trace: records.append(record), send_dead_letter=None)
    settings = AsyncSettings("f", ARN + "f:$LATEST", max_retries=0, on_success="arn:aws:sqs:us-east-1:000000000000:q")
    store = Store(str(tmp_path / "db"))
    invoker = AsyncInvoker(invoke, store, lambda ref: settings, sender)
    try:
        invoker.submit("f", b"{}", "rid-t")
        [record] = wait_for(lambda: records)
        assert record["requestContext"]["condition"] == "Success" and record["requestContext"][
            "approximateInvokeCount"] == 1
        gaps = [b - a for a, b in zip(calls, calls[1:])]
        assert len(calls) == 5 and gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2 and gaps[3] >= 0.2
    finally:
        invoker.close()
        store.close()


def test_an_event_bus_destination_is_refused_before_a_deploy_starts(server, tmp_path, capsys):
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE.replace("Type: SQS\n            Destination: !GetAtt Failures.Arn",
                                         "Type: EventBridge\n            Destination: "
                                         "arn:aws:events:us-east-1:000000000000:event-bus/default")
                        % {"seen": tmp_path / "seen", "retries": 1})
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(HANDLER)
    stack = "bus" + uuid.uuid4().hex[:8]
    code = cli.main([str(template), "--stack-name", stack, "--endpoint-url", server.url])
    out, err = capsys.readouterr()
    assert code != 0 and "kinesim does not serve EventBridge" in out + err
    lam = client_for(server.url, "lambda")
    assert not [f for f in lam.list_functions()["Functions"] if f["FunctionName"].startswith(stack)]
