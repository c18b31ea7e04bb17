"""The Lambda REST API through boto3 (and raw HTTP, and the AWS CLI) against a real server:
functions, invocations, event source mappings, errors as AWS shapes them, restarts."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import zipfile
from types import SimpleNamespace

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from kinesim.functions.async_invoke import AsyncInvoker
from kinesim.functions.code import MAX_UNZIPPED_BYTES, CodeStore
from kinesim.protocol.errors import AwsError
from kinesim.protocol.rest import RestApp, RestJsonProtocol, request_path

from conftest import client_for, start_server

ROLE = "arn:aws:iam::000000000000:role/lambda-role"
ARN_PREFIX = "arn:aws:lambda:us-east-1:000000000000:function:"

HANDLER = """
import json, os

def handler(event, context):
    print("got", json.dumps(event, sort_keys=True))
    if isinstance(event, dict) and event.get("fail"):
        raise ValueError("asked to fail")
    return {"event": event, "request_id": context.aws_request_id, "name": context.function_name,
            "env": os.environ.get("GREETING"), "client": getattr(context.client_context, "custom", None)}
"""


def make_zip(files: dict[str, str]) -> bytes:
    """A package whose bytes depend only on `files` (a fixed entry time, not the clock's), so the
    same files give the same CodeSha256."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text, zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def error_of(excinfo) -> tuple[str, str, int]:
    err = excinfo.value.response
    return err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def unchecked_client(server):
    """A client that sends what botocore itself would refuse (values under a shape's minimum)."""
    return client_for(server.url, "lambda", parameter_validation=False)


@pytest.fixture
def function_name():
    return "fn-" + uuid.uuid4().hex[:10]


@pytest.fixture
def make_function(lambda_client):
    created = []

    def make(name: str | None = None, files: dict[str, str] | None = None, **kwargs) -> dict:
        name = name or "fn-" + uuid.uuid4().hex[:10]
        params = {"FunctionName": name, "Runtime": "python3.12", "Role": ROLE, "Handler": "app.handler",
                  "Code": {"ZipFile": make_zip(files or {"app.py": HANDLER})}}
        params.update(kwargs)
        out = lambda_client.create_function(**params)
        created.append(name)
        return out

    yield make
    for name in created:
        try:
            lambda_client.delete_function(FunctionName=name)
        except ClientError:
            pass


def signed(url: str, method: str = "GET", body: bytes = b"", headers: dict | None = None) -> requests.Response:
    """A raw request signed as boto3 would sign it (the edge checks the SigV4 header's shape)."""
    req = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    SigV4Auth(Credentials("test", "test"), "lambda", "us-east-1").add_auth(req)
    return requests.request(method, url, data=body, headers=dict(req.headers.items()), timeout=30)


def logs_of(url: str, function: str, since: int = 0) -> list[dict]:
    with urllib.request.urlopen(f"{url}/_kinesim/logs/{function}?since={since}", timeout=10) as r:
        return json.loads(r.read())["events"]


def wait_for_log(url: str, function: str, text: str, timeout: float = 20.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = logs_of(url, function)
        if any(text in e["message"] for e in events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in the logs of {function}: {logs_of(url, function)}")


# --- functions -----------------------------------------------------------------------------


def test_create_function_defaults(make_function, function_name):
    package = make_zip({"app.py": HANDLER})
    out = make_function(function_name, Code={"ZipFile": package})
    assert out["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert out["FunctionName"] == function_name
    assert out["FunctionArn"] == ARN_PREFIX + function_name
    assert out["Runtime"] == "python3.12" and out["Handler"] == "app.handler" and out["Role"] == ROLE
    assert out["Timeout"] == 3 and out["MemorySize"] == 128 and out["Description"] == ""
    assert out["PackageType"] == "Zip" and out["Architectures"] == ["x86_64"]
    assert out["EphemeralStorage"] == {"Size": 512} and out["TracingConfig"] == {"Mode": "PassThrough"}
    assert out["State"] == "Active" and out["LastUpdateStatus"] == "Successful"
    assert out["Version"] == "$LATEST"
    assert out["CodeSha256"] == base64.b64encode(hashlib.sha256(package).digest()).decode()
    assert out["CodeSize"] == len(package)
    uuid.UUID(out["RevisionId"])
    assert out["LastModified"].endswith("+0000") and "T" in out["LastModified"]
    assert out["LoggingConfig"] == {"LogFormat": "Text", "LogGroup": f"/aws/lambda/{function_name}"}
    assert "Environment" not in out and "CodeDir" not in out


def test_every_python3_runtime_is_accepted(lambda_client, make_function):
    runtimes = [r for r in lambda_client.meta.service_model.shape_for("Runtime").enum if r.startswith("python3.")]
    assert len(runtimes) >= 6
    for runtime in runtimes:
        assert make_function(Runtime=runtime)["Runtime"] == runtime


def test_create_function_settings(lambda_client, make_function, function_name):
    out = make_function(function_name, Timeout=30, MemorySize=256, Description="d", Environment={"Variables": {"GREETING": "hi"}},
                        Architectures=["arm64"], EphemeralStorage={"Size": 1024}, TracingConfig={"Mode": "Active"},
                        Tags={"team": "data"})
    assert (out["Timeout"], out["MemorySize"], out["Description"]) == (30, 256, "d")
    assert out["Environment"] == {"Variables": {"GREETING": "hi"}}
    assert out["Architectures"] == ["arm64"] and out["EphemeralStorage"] == {"Size": 1024}
    assert out["TracingConfig"] == {"Mode": "Active"}
    got = lambda_client.get_function(FunctionName=function_name)
    assert got["Tags"] == {"team": "data"}
    assert got["Configuration"]["Environment"] == {"Variables": {"GREETING": "hi"}}


def test_get_function_and_configuration(lambda_client, make_function, function_name, server):
    package = make_zip({"app.py": HANDLER})
    created = make_function(function_name, Code={"ZipFile": package})
    got = lambda_client.get_function(FunctionName=function_name)
    assert got["Configuration"]["RevisionId"] == created["RevisionId"]
    assert got["Configuration"]["State"] == "Active"
    assert got["Code"]["RepositoryType"] == "S3"
    with urllib.request.urlopen(got["Code"]["Location"], timeout=10) as r:
        assert r.read() == package  # the package as uploaded
    by_arn = lambda_client.get_function_configuration(FunctionName=ARN_PREFIX + function_name)
    assert by_arn["FunctionName"] == function_name and by_arn["CodeSha256"] == created["CodeSha256"]
    partial = lambda_client.get_function_configuration(FunctionName=f"000000000000:function:{function_name}")
    assert partial["FunctionArn"] == ARN_PREFIX + function_name
    latest = lambda_client.get_function_configuration(FunctionName=function_name, Qualifier="$LATEST")
    assert latest["FunctionArn"] == ARN_PREFIX + function_name + ":$LATEST"


def test_get_function_errors(lambda_client, function_name, make_function):
    with pytest.raises(ClientError) as e:
        lambda_client.get_function(FunctionName=function_name)
    assert error_of(e) == ("ResourceNotFoundException", f"Function not found: {ARN_PREFIX}{function_name}", 404)
    assert e.value.response["Type"] == "User"
    with pytest.raises(ClientError) as e:
        lambda_client.get_function_configuration(FunctionName=f"arn:aws:lambda:eu-west-1:000000000000:function:{function_name}")
    assert error_of(e)[0] == "ResourceNotFoundException"
    assert "eu-west-1" in error_of(e)[1]
    make_function(function_name)
    with pytest.raises(ClientError) as e:
        lambda_client.get_function(FunctionName=function_name, Qualifier="7")
    assert error_of(e) == ("ResourceNotFoundException", f"Function not found: {ARN_PREFIX}{function_name}:7", 404)
    with pytest.raises(ClientError) as e:
        lambda_client.get_function(FunctionName="bad name!")
    code, message, status = error_of(e)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("1 validation error detected: Value 'bad name!' at 'functionName' failed to satisfy "
                              "constraint: Member must satisfy regular expression pattern")


def test_create_function_conflict(lambda_client, make_function, function_name):
    make_function(function_name)
    with pytest.raises(ClientError) as e:
        make_function(function_name)
    assert error_of(e) == ("ResourceConflictException", f"Function already exist: {function_name}", 409)
    assert e.value.response["Type"] == "User"


@pytest.mark.parametrize("runtime", ["nodejs4.3", "java21", "python2.7", "provided.al2023"])
def test_create_function_refuses_runtimes_it_cannot_run(lambda_client, function_name, runtime):
    with pytest.raises(ClientError) as e:
        lambda_client.create_function(FunctionName=function_name, Runtime=runtime, Role=ROLE, Handler="index.handler",
                                      Code={"ZipFile": make_zip({"index.js": ""})})
    code, message, status = error_of(e)
    assert (code, status) == ("InvalidParameterValueException", 400)
    assert message.startswith(f"The runtime parameter of {runtime} is not supported by kinesim")  # see runtimes.py
    with pytest.raises(ClientError):
        lambda_client.get_function(FunctionName=function_name)


def test_create_function_invalid_parameters(lambda_client, unchecked_client, function_name):
    base = {"FunctionName": function_name, "Role": ROLE, "Code": {"ZipFile": make_zip({"app.py": HANDLER})}}
    cases = [
        ({"Handler": "app.handler"},
         "Runtime and Handler are mandatory parameters for functions created with deployment packages."),
        ({"Runtime": "python3.12"},
         "Runtime and Handler are mandatory parameters for functions created with deployment packages."),
        ({"Runtime": "python3.12", "Handler": "app.handler", "Code": {"ZipFile": b"not a zip"}},
         "Could not unzip uploaded file. Please check your file, then try to upload again."),
        ({"Runtime": "python3.12", "Handler": "app.handler", "Code": {}},
         "Please provide a source for function code."),
        ({"Runtime": "python3.12", "Handler": "app.handler", "Environment": {"Variables": {"AWS_REGION": "x"}}},
         "Lambda was unable to configure your environment variables because the environment variables you have "
         "provided contains reserved keys that are currently not supported for modification. Reserved keys used in "
         "this request: AWS_REGION"),
        ({"Runtime": "python3.12", "Handler": "app.handler", "Code": {"S3Bucket": "some-bucket", "S3Key": "k.zip"}},
         "Error occurred while GetObject. S3 Error Code: NoSuchBucket. S3 Error Message: The specified bucket does "
         "not exist"),
    ]
    for extra, message in cases:
        with pytest.raises(ClientError) as e:
            lambda_client.create_function(**{**base, **extra})
        assert error_of(e) == ("InvalidParameterValueException", message, 400), extra
    with pytest.raises(ClientError) as e:
        lambda_client.create_function(**base, Runtime="python3.12", Handler="app.handler",
                                      Environment={"Variables": {"BIG": "x" * 5000}})
    assert error_of(e)[1].startswith("Lambda was unable to configure your environment variables because the "
                                     "environment variables you have provided exceeded the 4KB limit.")
    with pytest.raises(ClientError) as e:
        lambda_client.create_function(**{**base, "Code": {"ImageUri": "123.dkr.ecr.us-east-1.amazonaws.com/x:1"}},
                                      PackageType="Image")
    assert error_of(e)[0] == "InvalidParameterValueException" and "container images" in error_of(e)[1]
    with pytest.raises(ClientError) as e:
        unchecked_client.create_function(**base, Runtime="python3.12", Handler="app.handler", Timeout=0, MemorySize=64)
    code, message, _ = error_of(e)
    assert code == "ValidationException" and message.startswith("2 validation errors detected: ")
    assert "Value '0' at 'timeout' failed to satisfy constraint: Member must have value greater than or equal to 1" in message
    assert "Value '64' at 'memorySize' failed to satisfy constraint" in message
    with pytest.raises(ClientError):
        lambda_client.get_function(FunctionName=function_name)


def test_a_null_character_where_the_runtime_gets_it_is_refused(lambda_client, make_function, function_name):
    # The fuzzer's: a handler or environment variable holding a NUL was accepted, and every
    # invocation then failed with a 500 (a process's environment cannot hold one).
    base = {"FunctionName": function_name, "Role": ROLE, "Runtime": "python3.12",
            "Code": {"ZipFile": make_zip({"app.py": HANDLER})}}
    for extra in ({"Handler": "app\x00.handler"},
                  {"Handler": "app.handler", "Environment": {"Variables": {"A1": "x\x00y"}}}):
        with pytest.raises(ClientError) as e:
            lambda_client.create_function(**base, **extra)
        assert error_of(e)[0] == "InvalidParameterValueException" and "null character" in error_of(e)[1]
    name = make_function()["FunctionName"]
    for extra in ({"Handler": "app\x00.handler"}, {"Environment": {"Variables": {"A1": "x\x00y"}}}):
        with pytest.raises(ClientError) as e:
            lambda_client.update_function_configuration(FunctionName=name, **extra)
        assert error_of(e)[0] == "InvalidParameterValueException" and "null character" in error_of(e)[1]
    assert lambda_client.invoke(FunctionName=name, Payload=b"{}")["StatusCode"] == 200


def test_zip_slip_is_refused(lambda_client, function_name, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
        z.writestr("../../escaped.py", "x = 1")
    with pytest.raises(ClientError) as e:
        lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                      Code={"ZipFile": buf.getvalue()})
    assert error_of(e) == ("InvalidParameterValueException",
                           "Could not unzip uploaded file. Please check your file, then try to upload again.", 400)


def test_list_functions_paging(lambda_client, unchecked_client, make_function):
    prefix = "ls-" + uuid.uuid4().hex[:6]
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        make_function(name)
    seen, marker, pages = [], None, 0
    while True:
        kwargs = {"MaxItems": 2}
        if marker:
            kwargs["Marker"] = marker
        page = lambda_client.list_functions(**kwargs)
        pages += 1
        assert len(page["Functions"]) <= 2
        seen += [f["FunctionName"] for f in page["Functions"]]
        marker = page.get("NextMarker")
        if not marker:
            break
    assert [n for n in seen if n.startswith(prefix)] == names
    assert len(seen) == len(set(seen)) and pages >= 3
    listed = next(f for f in lambda_client.list_functions(MaxItems=10000)["Functions"] if f["FunctionName"] == names[0])
    # ListFunctions leaves out the state fields (AWS: "use GetFunction").
    assert "State" not in listed and "LastUpdateStatus" not in listed and listed["Runtime"] == "python3.12"
    all_names = [f["FunctionName"] for f in lambda_client.get_paginator("list_functions").paginate(
        PaginationConfig={"PageSize": 3}).build_full_result()["Functions"]]
    assert [n for n in all_names if n.startswith(prefix)] == names
    with pytest.raises(ClientError) as e:
        unchecked_client.list_functions(MaxItems=0)
    assert error_of(e)[0] == "ValidationException"


def test_update_function_code(lambda_client, make_function, function_name):
    created = make_function(function_name)
    assert lambda_client.invoke(FunctionName=function_name, Payload=b'{"v": 1}')["Payload"].read()
    new_package = make_zip({"app.py": "def handler(event, context):\n    return 'v2'\n"})
    updated = lambda_client.update_function_code(FunctionName=function_name, ZipFile=new_package)
    assert updated["CodeSha256"] != created["CodeSha256"] and updated["CodeSize"] == len(new_package)
    assert updated["RevisionId"] != created["RevisionId"]
    assert updated["LastUpdateStatus"] == "Successful"
    assert lambda_client.invoke(FunctionName=function_name)["Payload"].read() == b'"v2"'
    with pytest.raises(ClientError) as e:
        lambda_client.update_function_code(FunctionName=function_name, ZipFile=new_package, RevisionId=created["RevisionId"])
    assert error_of(e) == ("PreconditionFailedException",
                           "The Revision Id provided does not match the latest Revision Id. Call the GetFunction/GetAlias "
                           "API to retrieve the latest Revision Id", 412)
    dry = lambda_client.update_function_code(FunctionName=function_name, ZipFile=make_zip({"app.py": HANDLER}), DryRun=True)
    assert dry["CodeSha256"] == created["CodeSha256"]
    assert lambda_client.get_function(FunctionName=function_name)["Configuration"]["CodeSha256"] == updated["CodeSha256"]
    with pytest.raises(ClientError) as e:
        lambda_client.update_function_code(FunctionName=function_name + "-missing", ZipFile=new_package)
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        lambda_client.update_function_code(FunctionName=function_name, ZipFile=b"garbage")
    assert error_of(e)[1] == "Could not unzip uploaded file. Please check your file, then try to upload again."


def test_update_function_configuration(lambda_client, make_function, function_name):
    created = make_function(function_name)
    out = lambda_client.update_function_configuration(
        FunctionName=function_name, Timeout=10, MemorySize=512, Description="new", Runtime="python3.11",
        Environment={"Variables": {"GREETING": "hello"}}, Handler="app.handler")
    assert (out["Timeout"], out["MemorySize"], out["Description"], out["Runtime"]) == (10, 512, "new", "python3.11")
    assert out["RevisionId"] != created["RevisionId"] and out["CodeSha256"] == created["CodeSha256"]
    body = json.loads(lambda_client.invoke(FunctionName=function_name, Payload=b"{}")["Payload"].read())
    assert body["env"] == "hello"
    cleared = lambda_client.update_function_configuration(FunctionName=function_name, Environment={"Variables": {}})
    assert "Environment" not in cleared
    with pytest.raises(ClientError) as e:
        lambda_client.update_function_configuration(FunctionName=function_name, Runtime="java21")
    assert error_of(e)[0] == "InvalidParameterValueException"
    with pytest.raises(ClientError) as e:
        lambda_client.update_function_configuration(FunctionName=function_name, Timeout=3, RevisionId="stale")
    assert error_of(e)[0] == "PreconditionFailedException" and error_of(e)[2] == 412
    assert lambda_client.get_function_configuration(FunctionName=function_name)["Timeout"] == 10


def test_delete_function(lambda_client, make_function, function_name):
    make_function(function_name)
    with pytest.raises(ClientError) as e:
        lambda_client.delete_function(FunctionName=function_name, Qualifier="$LATEST")
    assert error_of(e) == ("InvalidParameterValueException",
                           "$LATEST version cannot be deleted without deleting the function.", 400)
    out = lambda_client.delete_function(FunctionName=function_name)
    assert out["StatusCode"] == 204 and out["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        lambda_client.delete_function(FunctionName=function_name)
    assert error_of(e) == ("ResourceNotFoundException", f"Function not found: {ARN_PREFIX}{function_name}", 404)
    with pytest.raises(ClientError) as e:
        lambda_client.invoke(FunctionName=function_name)
    assert error_of(e)[0] == "ResourceNotFoundException"


def test_tags_and_account_settings(lambda_client, make_function, function_name):
    make_function(function_name, Tags={"a": "1"})
    arn = ARN_PREFIX + function_name
    lambda_client.tag_resource(Resource=arn, Tags={"b": "2"})
    assert lambda_client.list_tags(Resource=arn)["Tags"] == {"a": "1", "b": "2"}
    lambda_client.untag_resource(Resource=arn, TagKeys=["a"])
    assert lambda_client.list_tags(Resource=arn)["Tags"] == {"b": "2"}
    with pytest.raises(ClientError) as e:
        lambda_client.list_tags(Resource=arn + "-missing")
    assert error_of(e)[0] == "ResourceNotFoundException"
    settings = lambda_client.get_account_settings()
    assert settings["AccountLimit"]["CodeSizeUnzipped"] == 262144000
    assert settings["AccountUsage"]["FunctionCount"] >= 1


# --- invocations ---------------------------------------------------------------------------


def test_invoke_returns_the_handler_result(lambda_client, make_function, function_name):
    make_function(function_name)
    out = lambda_client.invoke(FunctionName=function_name, Payload=json.dumps({"x": [1, 2]}).encode())
    assert out["StatusCode"] == 200 and "FunctionError" not in out
    assert out["ExecutedVersion"] == "$LATEST"
    body = json.loads(out["Payload"].read())
    assert body["event"] == {"x": [1, 2]} and body["name"] == function_name
    assert body["request_id"] == out["ResponseMetadata"]["RequestId"]
    by_arn = lambda_client.invoke(FunctionName=ARN_PREFIX + function_name)
    assert json.loads(by_arn["Payload"].read())["event"] == {}  # no payload: an empty event
    ctx = base64.b64encode(json.dumps({"custom": {"k": "v"}}).encode()).decode()
    with_ctx = lambda_client.invoke(FunctionName=function_name, ClientContext=ctx)
    assert json.loads(with_ctx["Payload"].read())["client"] == {"k": "v"}


def test_invoke_function_error(lambda_client, make_function, function_name):
    make_function(function_name)
    out = lambda_client.invoke(FunctionName=function_name, Payload=b'{"fail": true}')
    assert out["StatusCode"] == 200 and out["FunctionError"] == "Unhandled"
    error = json.loads(out["Payload"].read())
    assert error["errorType"] == "ValueError" and error["errorMessage"] == "asked to fail"


def test_invoke_log_tail(lambda_client, make_function, function_name):
    make_function(function_name)
    out = lambda_client.invoke(FunctionName=function_name, Payload=b'{"n": 42}', LogType="Tail")
    tail = base64.b64decode(out["LogResult"]).decode()
    request_id = out["ResponseMetadata"]["RequestId"]
    assert f"START RequestId: {request_id}" in tail and f"REPORT RequestId: {request_id}" in tail
    assert 'got {"n": 42}' in tail
    big = make_zip({"app.py": "def handler(event, context):\n    print('x' * 10000)\n    return 1\n"})
    lambda_client.update_function_code(FunctionName=function_name, ZipFile=big)
    out = lambda_client.invoke(FunctionName=function_name, LogType="Tail")
    assert len(base64.b64decode(out["LogResult"])) == 4096  # the last 4 KB
    assert "LogResult" not in lambda_client.invoke(FunctionName=function_name)


def test_invoke_event_runs_in_background(lambda_client, make_function, function_name, server):
    make_function(function_name)
    out = lambda_client.invoke(FunctionName=function_name, InvocationType="Event", Payload=b'{"async": "yes"}')
    assert out["StatusCode"] == 202 and out["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert out["Payload"].read() == b""
    events = wait_for_log(server.url, function_name, 'got {"async": "yes"}')
    request_id = out["ResponseMetadata"]["RequestId"]
    assert any(f"START RequestId: {request_id}" in e["message"] for e in events)


def test_invoke_dry_run(lambda_client, make_function, function_name, server):
    make_function(function_name)
    out = lambda_client.invoke(FunctionName=function_name, InvocationType="DryRun", Payload=b'{"dry": 1}')
    assert out["StatusCode"] == 204
    assert logs_of(server.url, function_name) == []  # nothing ran
    with pytest.raises(ClientError) as e:
        lambda_client.invoke(FunctionName=function_name + "-missing", InvocationType="DryRun")
    assert error_of(e)[0] == "ResourceNotFoundException"


def test_invoke_errors(lambda_client, make_function, function_name):
    make_function(function_name)
    with pytest.raises(ClientError) as e:
        lambda_client.invoke(FunctionName=function_name, Payload=b"{not json")
    code, message, status = error_of(e)
    assert (code, status) == ("InvalidRequestContentException", 400)
    assert message.startswith("Could not parse request body into json: Could not parse payload into json: ")
    with pytest.raises(ClientError) as e:
        lambda_client.invoke(FunctionName=function_name, Payload=b'"' + b"x" * 6_300_000 + b'"')
    assert error_of(e) == ("RequestTooLargeException",
                           "Request must be smaller than 6291456 bytes for the InvokeFunction operation", 413)
    with pytest.raises(ClientError) as e:
        lambda_client.invoke(FunctionName=function_name, InvocationType="Event", Payload=b'"' + b"x" * 1_100_000 + b'"')
    assert error_of(e)[0] == "RequestTooLargeException"
    with pytest.raises(ClientError) as e:
        lambda_client.invoke(FunctionName=function_name, InvocationType="Sideways")
    assert error_of(e)[0] == "ValidationException"
    assert "Member must satisfy enum value set: [Event, RequestResponse, DryRun]" in error_of(e)[1]


def test_create_function_from_s3(lambda_client, server, function_name):
    s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
    bucket = "code-" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=bucket)
    package = make_zip({"app.py": "def handler(event, context):\n    return 's3 code'\n"})
    s3.put_object(Bucket=bucket, Key="pkg/app.zip", Body=package)
    try:
        out = lambda_client.create_function(FunctionName=function_name, Runtime="python3.13", Role=ROLE,
                                            Handler="app.handler", Code={"S3Bucket": bucket, "S3Key": "pkg/app.zip"})
        assert out["CodeSize"] == len(package)
        assert lambda_client.invoke(FunctionName=function_name)["Payload"].read() == b'"s3 code"'
        with pytest.raises(ClientError) as e:
            lambda_client.update_function_code(FunctionName=function_name, S3Bucket=bucket, S3Key="missing.zip")
        assert error_of(e) == ("InvalidParameterValueException", "Error occurred while GetObject. S3 Error Code: "
                               "NoSuchKey. S3 Error Message: The specified key does not exist.", 400)
    finally:
        lambda_client.delete_function(FunctionName=function_name)


def test_hot_reload_code_runs_in_place(lambda_client, function_name, tmp_path):
    (tmp_path / "app.py").write_text("def handler(event, context):\n    return 'from disk'\n")
    try:
        out = lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE,
                                            Handler="app.handler", Code={"S3Bucket": "hot-reload", "S3Key": str(tmp_path)})
        assert out["CodeSize"] == 0
        assert lambda_client.invoke(FunctionName=function_name)["Payload"].read() == b'"from disk"'
        assert "Location" not in lambda_client.get_function(FunctionName=function_name)["Code"]
    finally:
        lambda_client.delete_function(FunctionName=function_name)
    assert (tmp_path / "app.py").exists()  # deleting the function leaves the user's directory alone
    with pytest.raises(ClientError) as e:
        lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                      Code={"S3Bucket": "hot-reload", "S3Key": "relative/dir"})
    assert "absolute path" in error_of(e)[1]


# --- event source mappings -----------------------------------------------------------------


def stream_arn(name: str) -> str:
    return f"arn:aws:kinesis:us-east-1:000000000000:stream/{name}"


def test_event_source_mapping_lifecycle(lambda_client, kinesis, make_stream, make_function, function_name):
    make_function(function_name)
    stream = make_stream()
    out = lambda_client.create_event_source_mapping(EventSourceArn=stream_arn(stream), FunctionName=function_name,
                                                    StartingPosition="LATEST")
    assert out["ResponseMetadata"]["HTTPStatusCode"] == 202
    uid = out["UUID"]
    try:
        assert out["State"] == "Creating" and out["StateTransitionReason"] == "User action"
        assert out["LastProcessingResult"] == "No records processed"
        assert out["BatchSize"] == 100 and out["MaximumBatchingWindowInSeconds"] == 0
        assert out["ParallelizationFactor"] == 1 and out["StartingPosition"] == "LATEST"
        assert out["MaximumRetryAttempts"] == -1 and out["MaximumRecordAgeInSeconds"] == -1
        assert out["BisectBatchOnFunctionError"] is False and out["TumblingWindowInSeconds"] == 0
        assert out["FunctionResponseTypes"] == [] and out["DestinationConfig"] == {"OnFailure": {}}
        assert out["EventSourceArn"] == stream_arn(stream) and out["FunctionArn"] == ARN_PREFIX + function_name
        assert out["EventSourceMappingArn"] == f"arn:aws:lambda:us-east-1:000000000000:event-source-mapping:{uid}"
        assert isinstance(out["LastModified"].timestamp(), float)
        got = lambda_client.get_event_source_mapping(UUID=uid)
        assert got["State"] == "Enabled" and got["UUID"] == uid

        updated = lambda_client.update_event_source_mapping(UUID=uid, BatchSize=10, MaximumRetryAttempts=2,
                                                            BisectBatchOnFunctionError=True)
        assert updated["ResponseMetadata"]["HTTPStatusCode"] == 202 and updated["State"] == "Updating"
        assert (updated["BatchSize"], updated["MaximumRetryAttempts"], updated["BisectBatchOnFunctionError"]) == (10, 2, True)
        disabled = lambda_client.update_event_source_mapping(UUID=uid, Enabled=False)
        assert disabled["State"] == "Disabling"
        assert lambda_client.get_event_source_mapping(UUID=uid)["State"] == "Disabled"
        enabled = lambda_client.update_event_source_mapping(UUID=uid, Enabled=True)
        assert enabled["State"] == "Enabling"
        assert lambda_client.get_event_source_mapping(UUID=uid)["State"] == "Enabled"
    finally:
        deleted = lambda_client.delete_event_source_mapping(UUID=uid)
    assert deleted["State"] == "Deleting" and deleted["ResponseMetadata"]["HTTPStatusCode"] == 202
    with pytest.raises(ClientError) as e:
        lambda_client.get_event_source_mapping(UUID=uid)
    assert error_of(e) == ("ResourceNotFoundException", "The resource you requested does not exist.", 404)
    with pytest.raises(ClientError) as e:
        lambda_client.delete_event_source_mapping(UUID=uid)
    assert error_of(e)[0] == "ResourceNotFoundException"


def test_event_source_mapping_invokes_function(lambda_client, kinesis, make_stream, make_function, function_name, server):
    make_function(function_name)
    stream = make_stream()
    kinesis.put_record(StreamName=stream, Data=b'{"before": 1}', PartitionKey="k")
    out = lambda_client.create_event_source_mapping(EventSourceArn=stream_arn(stream), FunctionName=function_name,
                                                    StartingPosition="TRIM_HORIZON", BatchSize=5)
    try:
        events = wait_for_log(server.url, function_name, '"eventSource": "aws:kinesis"')
        event_line = next(e["message"] for e in events if '"eventSource": "aws:kinesis"' in e["message"])
        record = json.loads(event_line.split("got ", 1)[1])["Records"][0]
        assert base64.b64decode(record["kinesis"]["data"]) == b'{"before": 1}'
        assert record["eventSourceARN"] == stream_arn(stream)
        deadline = time.monotonic() + 30
        while lambda_client.get_event_source_mapping(UUID=out["UUID"])["LastProcessingResult"] != "OK":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        lambda_client.delete_event_source_mapping(UUID=out["UUID"])


def test_event_source_mapping_settings_and_filters(lambda_client, make_stream, make_function, function_name):
    make_function(function_name)
    stream = make_stream()
    ts = time.time() - 60
    out = lambda_client.create_event_source_mapping(
        EventSourceArn=stream_arn(stream), FunctionName=ARN_PREFIX + function_name, StartingPosition="AT_TIMESTAMP",
        StartingPositionTimestamp=ts, BatchSize=10000, ParallelizationFactor=10, MaximumBatchingWindowInSeconds=5,
        MaximumRecordAgeInSeconds=3600, TumblingWindowInSeconds=60, FunctionResponseTypes=["ReportBatchItemFailures"],
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"data": {"kind": ["click"]}})}]}, Enabled=False)
    try:
        assert abs(out["StartingPositionTimestamp"].timestamp() - ts) < 1
        assert (out["BatchSize"], out["ParallelizationFactor"], out["MaximumBatchingWindowInSeconds"]) == (10000, 10, 5)
        assert out["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and out["TumblingWindowInSeconds"] == 60
        assert out["FilterCriteria"]["Filters"][0]["Pattern"] == json.dumps({"data": {"kind": ["click"]}})
        assert lambda_client.get_event_source_mapping(UUID=out["UUID"])["State"] == "Disabled"
    finally:
        lambda_client.delete_event_source_mapping(UUID=out["UUID"])


def test_event_source_mapping_errors(lambda_client, unchecked_client, make_stream, make_function, function_name):
    make_function(function_name)
    stream = make_stream()
    arn = stream_arn(stream)
    cases = [
        ({"EventSourceArn": stream_arn("no-such-stream"), "StartingPosition": "LATEST"},
         ("InvalidParameterValueException", f"Stream not found: {stream_arn('no-such-stream')}", 400)),
        ({"EventSourceArn": arn},
         ("InvalidParameterValueException", "1 validation error detected: Value null at 'startingPosition' failed to "
                                            "satisfy constraint: Member must not be null.", 400)),
        ({"EventSourceArn": arn, "StartingPosition": "LATEST", "FunctionName": function_name + "-missing"},
         ("InvalidParameterValueException", "Function does not exist", 400)),
        ({"EventSourceArn": arn, "StartingPosition": "LATEST",
          "FilterCriteria": {"Filters": [{"Pattern": "not json"}]}},
         ("InvalidParameterValueException", "Invalid filter pattern definition.", 400)),
        ({"EventSourceArn": arn, "StartingPosition": "LATEST",
          "DestinationConfig": {"OnSuccess": {"Destination": "arn:aws:sqs:us-east-1:000000000000:q"}}},
         ("InvalidParameterValueException", "Unsupported DestinationConfig parameter for given event source mapping type.",
          400)),
    ]
    for params, expected in cases:
        with pytest.raises(ClientError) as e:
            lambda_client.create_event_source_mapping(**{"FunctionName": function_name, **params})
        assert error_of(e) == expected, params
    with pytest.raises(ClientError) as e:
        lambda_client.create_event_source_mapping(EventSourceArn="arn:aws:sqs:us-east-1:000000000000:queue",
                                                  FunctionName=function_name)
    assert error_of(e) == ("InvalidParameterValueException", "Error occurred while ReceiveMessage. SQS Error Code: "
                           "AWS.SimpleQueueService.NonExistentQueue. SQS Error Message: The specified queue does not "
                           "exist.", 400)
    with pytest.raises(ClientError) as e:
        lambda_client.create_event_source_mapping(EventSourceArn=arn, FunctionName=function_name,
                                                  StartingPosition="LATEST", BatchSize=10001, ParallelizationFactor=11)
    code, message, _ = error_of(e)
    assert code == "ValidationException" and message.startswith("2 validation errors detected: ")
    assert "Value '10001' at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000" in message
    with pytest.raises(ClientError) as e:
        unchecked_client.create_event_source_mapping(EventSourceArn=arn, FunctionName=function_name,
                                                     StartingPosition="LATEST", MaximumRetryAttempts=-2)
    assert error_of(e)[0] == "ValidationException"

    first = lambda_client.create_event_source_mapping(EventSourceArn=arn, FunctionName=function_name,
                                                      StartingPosition="LATEST")
    try:
        with pytest.raises(ClientError) as e:
            lambda_client.create_event_source_mapping(EventSourceArn=arn, FunctionName=function_name,
                                                      StartingPosition="TRIM_HORIZON")
        assert error_of(e) == ("ResourceConflictException",
                               f'The event source arn (" {arn} ") and function (" {function_name} ") provided mapping '
                               f"already exists. Please update or delete the existing mapping with UUID {first['UUID']}",
                               409)
        with pytest.raises(ClientError) as e:
            lambda_client.update_event_source_mapping(UUID=first["UUID"], FunctionName=function_name + "-missing")
        assert error_of(e) == ("InvalidParameterValueException", "Function does not exist", 400)
        with pytest.raises(ClientError) as e:
            lambda_client.update_event_source_mapping(UUID=str(uuid.uuid4()), BatchSize=5)
        assert error_of(e)[0] == "ResourceNotFoundException"
    finally:
        lambda_client.delete_event_source_mapping(UUID=first["UUID"])


def test_list_event_source_mappings(lambda_client, make_stream, make_function):
    fn_a, fn_b = make_function()["FunctionName"], make_function()["FunctionName"]
    streams = [make_stream() for _ in range(3)]
    uuids = []
    try:
        for s in streams:
            uuids.append(lambda_client.create_event_source_mapping(EventSourceArn=stream_arn(s), FunctionName=fn_a,
                                                                   StartingPosition="LATEST")["UUID"])
        uuids.append(lambda_client.create_event_source_mapping(EventSourceArn=stream_arn(streams[0]), FunctionName=fn_b,
                                                               StartingPosition="LATEST")["UUID"])
        by_fn = lambda_client.list_event_source_mappings(FunctionName=fn_a)["EventSourceMappings"]
        assert [m["UUID"] for m in by_fn] == uuids[:3]
        assert all(m["State"] == "Enabled" for m in by_fn)
        by_arn = lambda_client.list_event_source_mappings(FunctionName=ARN_PREFIX + fn_a)["EventSourceMappings"]
        assert [m["UUID"] for m in by_arn] == uuids[:3]
        by_source = lambda_client.list_event_source_mappings(EventSourceArn=stream_arn(streams[0]))["EventSourceMappings"]
        assert sorted(m["UUID"] for m in by_source) == sorted([uuids[0], uuids[3]])
        both = lambda_client.list_event_source_mappings(EventSourceArn=stream_arn(streams[0]), FunctionName=fn_b)
        assert [m["UUID"] for m in both["EventSourceMappings"]] == [uuids[3]]
        page = lambda_client.list_event_source_mappings(FunctionName=fn_a, MaxItems=2)
        assert [m["UUID"] for m in page["EventSourceMappings"]] == uuids[:2]
        rest = lambda_client.list_event_source_mappings(FunctionName=fn_a, MaxItems=2, Marker=page["NextMarker"])
        assert [m["UUID"] for m in rest["EventSourceMappings"]] == uuids[2:3] and "NextMarker" not in rest
        assert lambda_client.list_event_source_mappings(FunctionName="no-such-fn")["EventSourceMappings"] == []
    finally:
        for u in uuids:
            lambda_client.delete_event_source_mapping(UUID=u)


# --- wire: raw HTTP, the AWS CLI, restarts ---------------------------------------------------


def test_unknown_lambda_path(server):
    r = signed(f"{server.url}/2015-03-31/no-such-thing")
    assert r.status_code == 404
    assert r.headers["x-amzn-ErrorType"] == "UnknownOperationException"
    assert r.json() == {"Type": "User"}
    r = signed(f"{server.url}/2015-03-31/functions/x/code", method="POST")  # wrong method for the path
    assert r.status_code == 404 and r.headers["x-amzn-ErrorType"] == "UnknownOperationException"


def test_malformed_json_body(server, function_name):
    r = signed(f"{server.url}/2015-03-31/functions", method="POST", body=b'{"FunctionName": ',
               headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.headers["x-amzn-ErrorType"] == "InvalidRequestContentException"
    body = r.json()
    assert body["Type"] == "User" and body["message"].startswith("Could not parse request body into json: ")
    r = signed(f"{server.url}/2015-03-31/functions", method="POST", body=b"[1, 2]")
    assert r.status_code == 400 and r.headers["x-amzn-ErrorType"] == "InvalidRequestContentException"


def test_unsigned_request_is_refused(server):
    r = requests.get(f"{server.url}/2015-03-31/functions", timeout=10)
    assert r.status_code == 403
    assert r.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    assert r.json()["message"] == "Missing Authentication Token"


def test_model_operation_not_implemented(lambda_client, make_function, function_name):
    make_function(function_name)
    with pytest.raises(ClientError) as e:
        lambda_client.list_provisioned_concurrency_configs(FunctionName=function_name)
    code, message, status = error_of(e)
    assert (code, status) == ("NotImplementedException", 501) and "ListProvisionedConcurrencyConfigs" in message


def test_error_body_shape(server, function_name):
    r = signed(f"{server.url}/2015-03-31/functions/{function_name}")
    assert r.status_code == 404
    assert r.headers["x-amzn-ErrorType"] == "ResourceNotFoundException"
    # The model spells this error's message member "Message"; AWS sends it so.
    assert r.json() == {"Type": "User", "Message": f"Function not found: {ARN_PREFIX}{function_name}"}


def test_aws_cli_list_functions(server, make_function, function_name):
    make_function(function_name)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_PAGER": ""}
    aws = os.path.join(os.path.dirname(sys.executable), "aws")
    out = subprocess.run([aws, "--endpoint-url", server.url, "lambda", "list-functions", "--output", "json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert function_name in [f["FunctionName"] for f in json.loads(out.stdout)["Functions"]]


def test_restart_keeps_functions_and_mappings(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        client, kin = client_for(proc.url, "lambda"), client_for(proc.url)
        kin.create_stream(StreamName="s1", ShardCount=1)
        client.create_function(FunctionName="keep", Runtime="python3.12", Role=ROLE, Handler="app.handler",
                               Code={"ZipFile": make_zip({"app.py": HANDLER})}, Environment={"Variables": {"GREETING": "x"}})
        mapping = client.create_event_source_mapping(EventSourceArn=stream_arn("s1"), FunctionName="keep",
                                                     StartingPosition="TRIM_HORIZON", BatchSize=7)
        before = client.get_function_configuration(FunctionName="keep")
        proc.stop()
        proc.start()
        client, kin = client_for(proc.url, "lambda"), client_for(proc.url)
        after = client.get_function_configuration(FunctionName="keep")
        assert after == {**before, "ResponseMetadata": after["ResponseMetadata"]}
        assert json.loads(client.invoke(FunctionName="keep", Payload=b'{"after": "restart"}')["Payload"].read())["env"] == "x"
        kept = client.get_event_source_mapping(UUID=mapping["UUID"])
        assert kept["BatchSize"] == 7 and kept["State"] == "Enabled"
        kin.put_record(StreamName="s1", Data=b"after restart", PartitionKey="p")
        wait_for_log(proc.url, "keep", base64.b64encode(b"after restart").decode())
    finally:
        proc.stop()


# --- units: routing, code storage, event retries -------------------------------------------


def test_rest_routing_from_the_model():
    protocol = RestJsonProtocol("lambda", lambda detail: AwsError("InvalidRequestContentException", detail))
    assert protocol.match("GET", "/2015-03-31/functions/", {}) == ("ListFunctions", {})
    assert protocol.match("POST", "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A000000000000%3Afunction%3Af/invocations",
                          {}) == ("Invoke", {"FunctionName": "arn:aws:lambda:us-east-1:000000000000:function:f"})
    # Query-qualified URIs win when their parameter is there.
    assert protocol.match("GET", "/2019-09-30/functions/f/provisioned-concurrency", {"List": ["ALL"]})[0] == \
        "ListProvisionedConcurrencyConfigs"
    assert protocol.match("GET", "/2019-09-30/functions/f/provisioned-concurrency", {})[0] == "GetProvisionedConcurrencyConfig"
    assert protocol.match("GET", "/2018-10-31/layers", {"find": ["LayerVersion"]})[0] == "GetLayerVersionByArn"
    assert protocol.match("GET", "/2018-10-31/layers", {})[0] == "ListLayers"
    with pytest.raises(AwsError) as e:
        protocol.match("PATCH", "/2015-03-31/functions/f", {})
    assert (e.value.code, e.value.status) == ("UnknownOperationException", 404)
    params = protocol.parse_request("Invoke", {"FunctionName": "f"}, {"Qualifier": ["$LATEST"]},
                                    {"x-amz-invocation-type": "Event", "x-amz-log-type": "Tail"}, b'{"raw": true}')
    assert params == {"Payload": b'{"raw": true}', "FunctionName": "f", "InvocationType": "Event", "LogType": "Tail",
                      "Qualifier": "$LATEST"}
    # A body member cannot override a URI label.
    params = protocol.parse_request("UpdateFunctionConfiguration", {"FunctionName": "f"}, {}, {},
                                    b'{"FunctionName": "other", "Timeout": 9}')
    assert params == {"FunctionName": "f", "Timeout": 9}
    status, headers, body = protocol.serialize_response(
        "Invoke", {"StatusCode": 200, "Payload": b"[1]", "FunctionError": "Unhandled", "ExecutedVersion": "$LATEST"})
    assert status == 200 and body == b"[1]"
    assert ("X-Amz-Function-Error", "Unhandled") in headers and ("X-Amz-Executed-Version", "$LATEST") in headers
    status, headers, body = protocol.serialize_error(AwsError("ResourceConflictException", "Function already exist: f"))
    assert status == 409 and json.loads(body) == {"Type": "User", "message": "Function already exist: f"}
    status, _, body = protocol.serialize_error(AwsError("ServiceException", "boom", 500))
    assert status == 500 and json.loads(body) == {"Type": "Service", "Message": "boom"}


def test_edge_routing_by_path_and_signing_service():
    app = RestApp(SimpleNamespace(protocol=RestJsonProtocol("lambda", lambda d: AwsError("X", d))))
    signed_for = "AWS4-HMAC-SHA256 Credential=AK/20260101/us-east-1/{}/aws4_request, SignedHeaders=host, Signature=00"
    assert app.accepts({"PATH_INFO": "/2015-03-31/functions/f", "HTTP_AUTHORIZATION": signed_for.format("lambda")})
    assert app.accepts({"PATH_INFO": "/2018-10-31/layers"})
    # An S3 path-style request for a bucket named like an API date stays S3's.
    assert not app.accepts({"PATH_INFO": "/2015-03-31/key", "HTTP_AUTHORIZATION": signed_for.format("s3")})
    assert not app.accepts({"PATH_INFO": "/2015-03-31/key",
                            "QUERY_STRING": "X-Amz-Credential=AK%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"})
    assert not app.accepts({"PATH_INFO": "/_kinesim/health"})
    assert request_path({"PATH_INFO": "/2015-03-31/functions/a%b"}) == "/2015-03-31/functions/a%25b"


def test_code_store_unpacks_safely(tmp_path):
    store = CodeStore(str(tmp_path / "code"))
    package = make_zip({"app.py": "x = 1", "pkg/mod.py": "y = 2"})
    code = store.store_zip("f", package)
    assert open(os.path.join(code.code_dir, "pkg", "mod.py")).read() == "y = 2"
    assert store.package_path("f", code.package_id) and open(store.package_path("f", code.package_id), "rb").read() == package
    assert store.store_zip("f", package).code_dir == code.code_dir  # same content: unpacked once
    for bad_name in ("/etc/evil.py", "../evil.py", "a/../../evil.py"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr(bad_name, "x")
        with pytest.raises(AwsError) as e:
            store.store_zip("g", buf.getvalue())
        assert e.value.code == "InvalidParameterValueException"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)
        z.writestr(info, "../../outside")
    with pytest.raises(AwsError):
        store.store_zip("h", buf.getvalue())
    assert not (tmp_path / "outside").exists() and not (tmp_path / "evil.py").exists()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big", b"\0" * (MAX_UNZIPPED_BYTES // 2 + 1))
        z.writestr("big2", b"\0" * (MAX_UNZIPPED_BYTES // 2 + 1))
    with pytest.raises(AwsError) as e:
        store.store_zip("bomb", buf.getvalue())
    assert e.value.message == "Unzipped size must be smaller than 262144000 bytes"
    store.prune("f", set())
    assert not os.path.exists(code.code_dir)


def test_async_invoker_retries_twice_then_gives_up():
    calls = []
    done = threading.Event()

    def invoke(name, payload, request_id, trace_header):
        calls.append((name, payload, request_id, time.monotonic()))
        if len(calls) == 3:
            done.set()
        return SimpleNamespace(function_error="Unhandled")

    invoker = AsyncInvoker(invoke, retry_delays_s=(0.05, 0.1))
    try:
        invoker.submit("f", b"{}", "rid-1")
        assert done.wait(5)
        time.sleep(0.3)
        assert len(calls) == 3  # the first attempt and two retries, no more
        assert {c[2] for c in calls} == {"rid-1"}
        assert calls[1][3] - calls[0][3] >= 0.05 and calls[2][3] - calls[1][3] >= 0.1
    finally:
        invoker.close()
