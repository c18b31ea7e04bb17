"""Lambda versions, aliases and layers through boto3 against a real server: PublishVersion's
snapshots, Invoke with a qualifier, alias routing, mappings bound to an alias, layers on the
handler's path, errors as AWS words them (LocalStack's AWS recordings, test_lambda_api.snapshot.json),
and all of it kept across a restart."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import time
import uuid
import zipfile

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

REGION, ACCOUNT = "us-east-1", "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/lambda-role"
FN_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:"
LAYER_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:"

# The handler reports which code ran (MARK, set per package), the version and the ARN it was
# invoked by; with SEEN_FILE set it also appends that to the file (mappings have no caller to
# answer). A Kinesis record "poison" makes it fail.
HANDLER = """
import base64, json, os
MARK = {mark!r}

def handler(event, context):
    for record in event.get("Records", []):
        if base64.b64decode(record["kinesis"]["data"]) == b"poison":
            raise ValueError("poison record")
    seen = {{"mark": MARK, "version": context.function_version, "arn": context.invoked_function_arn,
             "env_version": os.environ["AWS_LAMBDA_FUNCTION_VERSION"], "event": event}}
    if os.environ.get("SEEN_FILE"):
        with open(os.environ["SEEN_FILE"], "a") as f:
            f.write(json.dumps(seen) + "\\n")
    return seen
"""

LAYER_HANDLER = """
import layermod

def handler(event, context):
    return {"from_layer": layermod.GREETING}
"""


def make_zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return buf.getvalue()


def code(mark: str) -> bytes:
    return make_zip({"app.py": HANDLER.format(mark=mark)})


def sha(package: bytes) -> str:
    return base64.b64encode(hashlib.sha256(package).digest()).decode()


def error_of(excinfo) -> tuple[str, str, int]:
    err = excinfo.value.response
    return err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]


def invoke(client, name: str, **kwargs) -> tuple[dict, dict]:
    out = client.invoke(FunctionName=name, Payload=b"{}", **kwargs)
    assert "FunctionError" not in out, out["Payload"].read()
    return json.loads(out["Payload"].read()), out


@pytest.fixture(scope="module")
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture
def function(lam):
    """A new function running code "v1"; deleted afterwards."""
    name = "ver-" + uuid.uuid4().hex[:10]
    lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                        Code={"ZipFile": code("v1")})
    yield name
    try:
        lam.delete_function(FunctionName=name)
    except ClientError:
        pass


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --- versions --------------------------------------------------------------------------------


def test_published_versions_keep_their_code_and_configuration(lam, function):
    v1 = lam.publish_version(FunctionName=function, Description="first")
    assert v1["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert (v1["Version"], v1["FunctionArn"], v1["Description"]) == ("1", FN_ARN + function + ":1", "first")
    assert v1["CodeSha256"] == sha(code("v1")) and v1["State"] == "Active"

    lam.update_function_code(FunctionName=function, ZipFile=code("v2"))
    lam.update_function_configuration(FunctionName=function, Timeout=9)
    assert invoke(lam, function)[0]["mark"] == "v2"
    ran, out = invoke(lam, function, Qualifier="1")
    assert (ran["mark"], ran["version"], ran["env_version"]) == ("v1", "1", "1")
    assert ran["arn"] == FN_ARN + function + ":1"
    assert out["ExecutedVersion"] == "1"
    assert invoke(lam, f"{function}:1")[1]["ExecutedVersion"] == "1"  # the qualifier in the name
    assert invoke(lam, FN_ARN + function + ":1")[0]["mark"] == "v1"   # in the ARN
    latest, out = invoke(lam, function)
    assert (latest["version"], latest["arn"], out["ExecutedVersion"]) == ("$LATEST", FN_ARN + function, "$LATEST")

    one = lam.get_function_configuration(FunctionName=function, Qualifier="1")
    assert (one["Timeout"], one["CodeSha256"], one["Version"]) == (3, sha(code("v1")), "1")
    shown = lam.get_function(FunctionName=function, Qualifier="1")["Configuration"]
    assert shown["FunctionArn"] == FN_ARN + function + ":1"

    v2 = lam.publish_version(FunctionName=function)
    assert (v2["Version"], v2["Timeout"], v2["CodeSha256"]) == ("2", 9, sha(code("v2")))
    # Nothing changed since version 2: AWS answers with version 2 (test_version_lifecycle).
    assert lam.publish_version(FunctionName=function, Description="again")["Version"] == "2"
    versions = lam.list_versions_by_function(FunctionName=function)["Versions"]
    assert [(v["Version"], v["FunctionArn"]) for v in versions] == [
        ("$LATEST", FN_ARN + function + ":$LATEST"), ("1", FN_ARN + function + ":1"), ("2", FN_ARN + function + ":2")]
    assert "State" not in versions[1]  # as ListFunctions: GetFunction's fields only there
    page = lam.list_versions_by_function(FunctionName=function, MaxItems=2)
    assert [v["Version"] for v in page["Versions"]] == ["$LATEST", "1"]
    rest = lam.list_versions_by_function(FunctionName=function, Marker=page["NextMarker"])
    assert [v["Version"] for v in rest["Versions"]] == ["2"] and "NextMarker" not in rest

    listed = [f for page in lam.get_paginator("list_functions").paginate(FunctionVersion="ALL", PaginationConfig={
        "PageSize": 7}) for f in page["Functions"] if f["FunctionName"] == function]
    assert [(f["Version"], f["FunctionArn"]) for f in listed] == [(v["Version"], v["FunctionArn"]) for v in versions]
    assert [f["Version"] for page in lam.get_paginator("list_functions").paginate() for f in page["Functions"]
            if f["FunctionName"] == function] == ["$LATEST"]

    lam.delete_function(FunctionName=function, Qualifier="1")
    assert [v["Version"] for v in lam.list_versions_by_function(FunctionName=function)["Versions"]] == ["$LATEST", "2"]
    lam.update_function_code(FunctionName=function, ZipFile=code("v3"))
    assert lam.publish_version(FunctionName=function)["Version"] == "3"  # numbers are never reused
    assert invoke(lam, function, Qualifier="2")[0]["mark"] == "v2"  # its package was kept through the updates


def test_publish_checks_and_missing_versions(lam, function):
    current = lam.get_function(FunctionName=function)["Configuration"]
    with pytest.raises(ClientError) as err:
        lam.publish_version(FunctionName=function, CodeSha256="somenonexistentsha256")
    assert error_of(err) == ("InvalidParameterValueException",
                             f"CodeSHA256 (somenonexistentsha256) is different from current CodeSHA256 in $LATEST "
                             f"({current['CodeSha256']}). Please try again with the CodeSHA256 in $LATEST.", 400)
    with pytest.raises(ClientError) as err:
        lam.publish_version(FunctionName=function, RevisionId=str(uuid.uuid4()))
    assert error_of(err) == ("PreconditionFailedException",
                             "The Revision Id provided does not match the latest Revision Id. Call the "
                             "GetFunction/GetAlias API to retrieve the latest Revision Id", 412)
    published = lam.publish_version(FunctionName=function, CodeSha256=current["CodeSha256"],
                                    RevisionId=current["RevisionId"])
    assert published["Version"] == "1"
    # Publishing gives $LATEST a new RevisionId (test_function_revisions_version_and_alias).
    assert lam.get_function(FunctionName=function)["Configuration"]["RevisionId"] != current["RevisionId"]
    for call in (lambda: lam.get_function(FunctionName=function, Qualifier="1221"),
                 lambda: lam.get_function_configuration(FunctionName=function, Qualifier="1221"),
                 lambda: lam.invoke(FunctionName=function, Qualifier="1221")):
        with pytest.raises(ClientError) as err:
            call()
        assert error_of(err) == ("ResourceNotFoundException", f"Function not found: {FN_ARN}{function}:1221", 404)
    with pytest.raises(ClientError) as err:
        lam.delete_function(FunctionName=function + "-gone", Qualifier="1")
    assert error_of(err) == ("ResourceNotFoundException", f"Function not found: {FN_ARN}{function}-gone", 404)
    with pytest.raises(ClientError) as err:
        lam.update_function_configuration(FunctionName=f"{function}:1", Timeout=5)
    assert error_of(err)[0] == "ResourceNotFoundException"  # versions are immutable


def test_publish_on_create_and_on_code_update(lam):
    name = "ver-" + uuid.uuid4().hex[:10]
    created = lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                  Code={"ZipFile": code("v1")}, Publish=True)
    try:
        # AWS answers with $LATEST's ARN and the published number (test_publish_version_on_create).
        assert (created["Version"], created["FunctionArn"]) == ("1", FN_ARN + name)
        updated = lam.update_function_code(FunctionName=name, ZipFile=code("v2"), Publish=True)
        assert (updated["Version"], updated["FunctionArn"]) == ("2", FN_ARN + name + ":2")
        assert invoke(lam, name, Qualifier="1")[0]["mark"] == "v1"
        assert invoke(lam, name, Qualifier="2")[0]["mark"] == "v2"
    finally:
        lam.delete_function(FunctionName=name)
    with pytest.raises(ClientError) as err:
        lam.list_versions_by_function(FunctionName=name)
    assert error_of(err)[0] == "ResourceNotFoundException"


# --- aliases ---------------------------------------------------------------------------------


def test_alias_lifecycle_and_invocation(lam, function):
    lam.publish_version(FunctionName=function)
    lam.update_function_code(FunctionName=function, ZipFile=code("v2"))
    lam.publish_version(FunctionName=function)
    revision = lam.get_function(FunctionName=function)["Configuration"]["RevisionId"]
    live = lam.create_alias(FunctionName=function, Name="live", FunctionVersion="1", Description="prod")
    assert live["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert (live["AliasArn"], live["FunctionVersion"], live["Description"]) == \
        (FN_ARN + function + ":live", "1", "prod")
    assert lam.get_function(FunctionName=function)["Configuration"]["RevisionId"] != revision
    got = lam.get_alias(FunctionName=function, Name="live")
    assert {k: v for k, v in got.items() if k != "ResponseMetadata"} == \
        {k: v for k, v in live.items() if k != "ResponseMetadata"}

    ran, out = invoke(lam, function, Qualifier="live")
    assert (ran["mark"], ran["version"], out["ExecutedVersion"]) == ("v1", "1", "1")
    assert ran["arn"] == FN_ARN + function + ":live"  # the ARN the caller used, as on AWS
    config = lam.get_function(FunctionName=FN_ARN + function + ":live")["Configuration"]
    assert (config["FunctionArn"], config["Version"]) == (FN_ARN + function + ":live", "1")

    with pytest.raises(ClientError) as err:
        lam.update_alias(FunctionName=function, Name="live", FunctionVersion="2", RevisionId=str(uuid.uuid4()))
    assert error_of(err)[0:3:2] == ("PreconditionFailedException", 412)
    moved = lam.update_alias(FunctionName=function, Name="live", FunctionVersion="2", RevisionId=live["RevisionId"])
    assert (moved["FunctionVersion"], moved["Description"]) == ("2", "prod")
    assert moved["RevisionId"] != live["RevisionId"]
    assert invoke(lam, f"{function}:live")[1]["ExecutedVersion"] == "2"

    lam.create_alias(FunctionName=function, Name="edge", FunctionVersion="$LATEST")
    lam.create_alias(FunctionName=function, Name="old", FunctionVersion="1")
    assert [a["Name"] for a in lam.list_aliases(FunctionName=function)["Aliases"]] == ["edge", "live", "old"]
    assert [a["Name"] for a in lam.list_aliases(FunctionName=function, FunctionVersion="1")["Aliases"]] == ["old"]
    page = lam.list_aliases(FunctionName=function, MaxItems=2)
    assert len(page["Aliases"]) == 2 and \
        [a["Name"] for a in lam.list_aliases(FunctionName=function, Marker=page["NextMarker"])["Aliases"]] == ["old"]
    assert invoke(lam, function, Qualifier="edge")[1]["ExecutedVersion"] == "$LATEST"

    with pytest.raises(ClientError) as err:
        lam.delete_function(FunctionName=function, Qualifier="1")
    assert error_of(err) == ("ResourceConflictException",
                             "Unable to delete version because the following aliases reference it: [old]", 409)
    with pytest.raises(ClientError) as err:
        lam.delete_function(FunctionName=function, Qualifier="old")
    assert error_of(err) == ("InvalidParameterValueException", "Deletion of aliases is not currently supported.", 400)
    lam.delete_alias(FunctionName=function, Name="old")
    lam.delete_alias(FunctionName=function, Name="old")  # AWS: deleting a missing alias succeeds
    lam.delete_function(FunctionName=function, Qualifier="1")
    with pytest.raises(ClientError) as err:
        lam.get_alias(FunctionName=function, Name="old")
    assert error_of(err) == ("ResourceNotFoundException", f"Cannot find alias arn: {FN_ARN}{function}:old", 404)
    with pytest.raises(ClientError) as err:
        lam.update_alias(FunctionName=function, Name="old", FunctionVersion="2")
    assert error_of(err) == ("ResourceNotFoundException", f"Alias not found: {FN_ARN}{function}:old", 404)
    with pytest.raises(ClientError) as err:
        lam.invoke(FunctionName=function, Qualifier="old")
    assert error_of(err) == ("ResourceNotFoundException", f"Function not found: {FN_ARN}{function}:old", 404)


def test_alias_errors_as_aws_words_them(lam, function, server):
    lam.publish_version(FunctionName=function)
    lam.update_function_code(FunctionName=function, ZipFile=code("v2"))
    lam.publish_version(FunctionName=function)
    cases = [  # (FunctionVersion, RoutingConfig weights, error): test_notfound_and_invalid_routingconfigs
        ("1", {"1": 0.8, "2": 0.2}, ("InvalidParameterValueException",
                                     "Number of items in AdditionalVersionWeights cannot be greater than 1", 400)),
        ("1", {"1": 0.5}, ("InvalidParameterValueException", "Invalid function version 1. Function version 1 is "
                                                              "already included in routing configuration.", 400)),
        ("10", {"2": 0.5}, ("ResourceNotFoundException", f"Function not found: {FN_ARN}{function}:10", 404)),
        ("1", {"10": 0.5}, ("ResourceNotFoundException", f"Function not found: {FN_ARN}{function}:10", 404)),
        ("$LATEST", {"1": 0.5}, ("InvalidParameterValueException",
                                 "$LATEST is not supported for an alias pointing to more than 1 version", 400)),
    ]
    for version, weights, expected in cases:
        with pytest.raises(ClientError) as err:
            lam.create_alias(FunctionName=function, Name="custom", FunctionVersion=version,
                             RoutingConfig={"AdditionalVersionWeights": weights})
        assert error_of(err) == expected, (version, weights)
    unchecked = client_for(server.url, "lambda", parameter_validation=False)  # boto3 refuses -1 itself
    for weight in (2, -1):
        with pytest.raises(ClientError) as err:
            unchecked.create_alias(FunctionName=function, Name="custom", FunctionVersion="1",
                             RoutingConfig={"AdditionalVersionWeights": {"2": weight}})
        assert error_of(err)[0] == "ValidationException"
    with pytest.raises(ClientError) as err:
        lam.create_alias(FunctionName=function + "-unknown", Name="custom", FunctionVersion="1")
    assert error_of(err) == ("ResourceNotFoundException", f"Function not found: {FN_ARN}{function}-unknown:1", 404)
    with pytest.raises(ClientError) as err:
        lam.create_alias(FunctionName=function, Name="2024", FunctionVersion="1")
    assert error_of(err)[0] == "ValidationException"  # an alias name cannot be a number
    empty = lam.create_alias(FunctionName=function, Name="custom", FunctionVersion="1", RoutingConfig={})
    assert "RoutingConfig" not in empty
    with pytest.raises(ClientError) as err:
        lam.create_alias(FunctionName=function, Name="custom", FunctionVersion="1")
    assert error_of(err) == ("ResourceConflictException", f"Alias already exists: {FN_ARN}{function}:custom", 409)
    with pytest.raises(ClientError) as err:
        lam.tag_resource(Resource=FN_ARN + function + ":custom", Tags={"a": "b"})
    assert error_of(err) == ("InvalidParameterValueException", "Tags on function aliases and versions are not "
                                                               "supported. Please specify a function ARN.", 400)


def test_alias_routing_splits_invocations_by_weight(lam, function):
    lam.publish_version(FunctionName=function)
    lam.update_function_code(FunctionName=function, ZipFile=code("v2"))
    lam.publish_version(FunctionName=function)
    alias = lam.create_alias(FunctionName=function, Name="canary", FunctionVersion="1",
                             RoutingConfig={"AdditionalVersionWeights": {"2": 0.5}})
    assert alias["RoutingConfig"] == {"AdditionalVersionWeights": {"2": 0.5}}
    executed = {}
    for _ in range(200):  # both versions run: a miss at 0.5 for 200 tries has odds of 2**-199
        ran, out = invoke(lam, function, Qualifier="canary")
        executed[out["ExecutedVersion"]] = ran["mark"]
        if len(executed) == 2:
            break
    assert executed == {"1": "v1", "2": "v2"}
    # GetFunction on the alias shows its primary version, whatever the routing.
    assert lam.get_function_configuration(FunctionName=function, Qualifier="canary")["Version"] == "1"
    cleared = lam.update_alias(FunctionName=function, Name="canary", RoutingConfig={"AdditionalVersionWeights": {}})
    assert "RoutingConfig" not in cleared
    assert {invoke(lam, function, Qualifier="canary")[1]["ExecutedVersion"] for _ in range(20)} == {"1"}


# --- mappings bound to an alias --------------------------------------------------------------


def test_mapping_on_an_alias_runs_the_alias_version(lam, server, tmp_path):
    kinesis = client_for(server.url)
    stream, name = "ver-" + uuid.uuid4().hex[:10], "ver-" + uuid.uuid4().hex[:10]
    seen = tmp_path / "seen.jsonl"
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    kinesis.create_stream(StreamName=stream + "-dlq", ShardCount=1)
    lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                        Code={"ZipFile": code("v1")}, Environment={"Variables": {"SEEN_FILE": str(seen)}})
    try:
        lam.publish_version(FunctionName=name)
        lam.update_function_code(FunctionName=name, ZipFile=code("v2"))
        lam.publish_version(FunctionName=name)
        lam.create_alias(FunctionName=name, Name="live", FunctionVersion="1")
        stream_arn = f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{stream}"
        mapping = lam.create_event_source_mapping(
            EventSourceArn=stream_arn, FunctionName=FN_ARN + name + ":live", StartingPosition="TRIM_HORIZON",
            MaximumRetryAttempts=0, DestinationConfig={"OnFailure": {"Destination": stream_arn + "-dlq"}})
        assert mapping["FunctionArn"] == FN_ARN + name + ":live"
        with pytest.raises(ClientError) as err:
            lam.create_event_source_mapping(EventSourceArn=stream_arn, FunctionName=FN_ARN + name + ":nope",
                                            StartingPosition="TRIM_HORIZON")
        assert error_of(err) == ("InvalidParameterValueException", "Function does not exist", 400)
        listed = lam.list_event_source_mappings(FunctionName=FN_ARN + name + ":live")["EventSourceMappings"]
        assert [m["UUID"] for m in listed] == [mapping["UUID"]]

        def records() -> list[dict]:
            return [json.loads(line) for line in seen.read_text().splitlines()] if seen.exists() else []

        kinesis.put_record(StreamName=stream, Data=b"first", PartitionKey="p")
        wait_until(lambda: records(), what="the first record")
        first = records()[0]
        assert (first["mark"], first["version"], first["arn"]) == ("v1", "1", FN_ARN + name + ":live")
        lam.update_alias(FunctionName=name, Name="live", FunctionVersion="2")
        kinesis.put_record(StreamName=stream, Data=b"second", PartitionKey="p")
        wait_until(lambda: len(records()) >= 2, what="the second record")
        second = records()[-1]
        assert base64.b64decode(second["event"]["Records"][0]["kinesis"]["data"]) == b"second"
        assert (second["mark"], second["version"]) == ("v2", "2")
        # A batch given up: the invocation record names the alias and the version that ran.
        kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="p")
        iterator = kinesis.get_shard_iterator(StreamName=stream + "-dlq", ShardId="shardId-000000000000",
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

        def failure_records() -> list:
            nonlocal iterator
            got = kinesis.get_records(ShardIterator=iterator)
            iterator = got["NextShardIterator"]
            return got["Records"]

        (failed,) = wait_until(failure_records, what="the invocation record of the poisoned batch")
        failure = json.loads(failed["Data"])
        assert failure["requestContext"]["functionArn"] == FN_ARN + name + ":live"
        assert failure["responseContext"]["executedVersion"] == "2"
        lam.delete_event_source_mapping(UUID=mapping["UUID"])
        # An event (asynchronous) invocation of an alias runs its version too.
        assert lam.invoke(FunctionName=name, Qualifier="live", InvocationType="Event",
                          Payload=b'{"async": true}')["StatusCode"] == 202
        wait_until(lambda: any(r["event"] == {"async": True} for r in records()), what="the event invocation")
        ran = next(r for r in records() if r["event"] == {"async": True})
        assert (ran["version"], ran["arn"]) == ("2", FN_ARN + name + ":live")
    finally:
        lam.delete_function(FunctionName=name)
        kinesis.delete_stream(StreamName=stream)
        kinesis.delete_stream(StreamName=stream + "-dlq")


# --- layers ----------------------------------------------------------------------------------


def layer_zip(greeting: str) -> bytes:
    return make_zip({"python/layermod.py": f"GREETING = {greeting!r}\n"})


def test_layer_versions_and_a_handler_importing_from_its_layer(lam, server):
    layer = "layer-" + uuid.uuid4().hex[:10]
    first = lam.publish_layer_version(LayerName=layer, Content={"ZipFile": layer_zip("hello")},
                                      CompatibleRuntimes=["python3.12"], CompatibleArchitectures=["x86_64"],
                                      Description="one", LicenseInfo="MIT")
    assert first["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert (first["LayerArn"], first["LayerVersionArn"], first["Version"]) == \
        (LAYER_ARN + layer, LAYER_ARN + layer + ":1", 1)
    assert first["Content"]["CodeSha256"] == sha(layer_zip("hello"))
    assert first["Content"]["CodeSize"] == len(layer_zip("hello"))
    # The second version from kinesim's S3, as CreateFunction reads packages.
    s3 = client_for(server.url, "s3")
    bucket = "layers-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="layer.zip", Body=layer_zip("from s3"))
    second = lam.publish_layer_version(LayerName=LAYER_ARN + layer, Content={"S3Bucket": bucket, "S3Key": "layer.zip"},
                                       CompatibleRuntimes=["nodejs22.x"])
    assert second["Version"] == 2 and second["CompatibleArchitectures"] == []

    got = lam.get_layer_version(LayerName=layer, VersionNumber=1)
    assert (got["Description"], got["LicenseInfo"], got["CompatibleRuntimes"]) == ("one", "MIT", ["python3.12"])
    assert lam.get_layer_version_by_arn(Arn=LAYER_ARN + layer + ":2")["Version"] == 2
    assert [v["Version"] for v in lam.list_layer_versions(LayerName=layer)["LayerVersions"]] == [2, 1]
    assert [v["Version"] for v in lam.list_layer_versions(LayerName=layer, CompatibleRuntime="python3.12")[
        "LayerVersions"]] == [1]
    listed = {x["LayerName"]: x for x in lam.list_layers(CompatibleRuntime="python3.12")["Layers"]}
    assert listed[layer]["LatestMatchingVersion"]["LayerVersionArn"] == LAYER_ARN + layer + ":1"
    assert {x["LayerName"]: x for x in lam.list_layers()["Layers"]}[layer]["LatestMatchingVersion"]["Version"] == 2

    name = "layered-" + uuid.uuid4().hex[:10]
    created = lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                  Code={"ZipFile": make_zip({"app.py": LAYER_HANDLER})},
                                  Layers=[LAYER_ARN + layer + ":1"])
    try:
        assert created["Layers"] == [{"Arn": LAYER_ARN + layer + ":1", "CodeSize": len(layer_zip("hello"))}]
        assert invoke(lam, name)[0] == {"from_layer": "hello"}
        lam.publish_version(FunctionName=name)
        lam.update_function_configuration(FunctionName=name, Layers=[LAYER_ARN + layer + ":2"])
        assert invoke(lam, name)[0] == {"from_layer": "from s3"}
        assert invoke(lam, name, Qualifier="1")[0] == {"from_layer": "hello"}  # the version keeps its layers

        # A deleted layer version is gone from the API, but the functions using it keep running.
        lam.delete_layer_version(LayerName=layer, VersionNumber=1)
        lam.delete_layer_version(LayerName=layer, VersionNumber=1)  # AWS: deleting again succeeds
        with pytest.raises(ClientError) as err:
            lam.get_layer_version(LayerName=layer, VersionNumber=1)
        assert error_of(err) == ("ResourceNotFoundException", "The resource you requested does not exist.", 404)
        assert invoke(lam, name, Qualifier="1")[0] == {"from_layer": "hello"}
        assert lam.get_function_configuration(FunctionName=name, Qualifier="1")["Layers"][0]["Arn"] == \
            LAYER_ARN + layer + ":1"
        lam.update_function_configuration(FunctionName=name, Layers=[])
        assert "Layers" not in lam.get_function_configuration(FunctionName=name)
        lam.delete_layer_version(LayerName=layer, VersionNumber=2)
        assert lam.list_layer_versions(LayerName=layer)["LayerVersions"] == []
        third = lam.publish_layer_version(LayerName=layer, Content={"ZipFile": layer_zip("again")})
        assert third["Version"] == 3  # numbers are never reused (test_layer_lifecycle)
    finally:
        lam.delete_function(FunctionName=name)


def test_layer_errors_as_aws_words_them(lam, function):
    layer = "layer-" + uuid.uuid4().hex[:10]
    lam.publish_layer_version(LayerName=layer, Content={"ZipFile": layer_zip("a")})
    lam.publish_layer_version(LayerName=layer, Content={"ZipFile": layer_zip("b")})
    cases = [  # test_layer_function_exceptions, test_layer_function_quota_exception
        ([LAYER_ARN + layer + ":1", LAYER_ARN + layer + ":2"],
         ("InvalidParameterValueException",
          "Two different versions of the same layer are not allowed to be referenced in the same function. "
          f"{LAYER_ARN}{layer}:1 and {LAYER_ARN}{layer}:2 are versions of the same layer.", 400)),
        ([LAYER_ARN + "doesnotexist:1"],
         ("InvalidParameterValueException", f"Layer version {LAYER_ARN}doesnotexist:1 does not exist.", 400)),
        ([LAYER_ARN + layer + ":9"],
         ("InvalidParameterValueException", f"Layer version {LAYER_ARN}{layer}:9 does not exist.", 400)),
        ([f"arn:aws:lambda:eu-west-1:{ACCOUNT}:layer:{layer}:1"],
         ("InvalidParameterValueException", "Layers are not in the same region as the function. Layers are expected "
                                            f"to be in region {REGION}.", 400)),
        ([LAYER_ARN + layer + ":1"] * 6,
         ("InvalidParameterValueException", "Cannot reference more than 5 layers.", 400)),
    ]
    for layers, expected in cases:
        with pytest.raises(ClientError) as err:
            lam.update_function_configuration(FunctionName=function, Layers=layers)
        assert error_of(err) == expected, layers
    with pytest.raises(ClientError) as err:
        lam.update_function_configuration(FunctionName=function, Layers=[LAYER_ARN + layer])
    assert error_of(err)[0] == "ValidationException"
    for number in (0, -1):
        with pytest.raises(ClientError) as err:
            lam.get_layer_version(LayerName=layer, VersionNumber=number)
        assert error_of(err) == ("InvalidParameterValueException", "Layer Version Cannot be less than 1", 400)
    with pytest.raises(ClientError) as err:
        lam.get_layer_version(LayerName=layer + "-none", VersionNumber=1)
    assert error_of(err) == ("ResourceNotFoundException", "The resource you requested does not exist.", 404)
    with pytest.raises(ClientError) as err:
        lam.get_layer_version_by_arn(Arn=LAYER_ARN + layer + ":7")
    assert error_of(err)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as err:
        lam.publish_layer_version(LayerName=layer, Content={"ZipFile": b"not a zip"})
    assert error_of(err) == ("InvalidParameterValueException",
                             "Could not unzip uploaded file. Please check your file, then try to upload again.", 400)
    hostile = io.BytesIO()
    with zipfile.ZipFile(hostile, "w") as z:
        z.writestr("../escape.py", "x = 1")
    with pytest.raises(ClientError) as err:
        lam.publish_layer_version(LayerName=layer, Content={"ZipFile": hostile.getvalue()})
    assert error_of(err)[0] == "InvalidParameterValueException"
    with pytest.raises(ClientError) as err:
        lam.list_layers(CompatibleRuntime="runtimedoesnotexist")
    assert error_of(err)[0] == "ValidationException"
    assert lam.list_layer_versions(LayerName=layer + "-none")["LayerVersions"] == []
    lam.delete_layer_version(LayerName=layer + "-none", VersionNumber=3)  # AWS: 204


# --- durability ------------------------------------------------------------------------------


def test_versions_aliases_and_layers_survive_a_restart(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        lam = client_for(proc.url, "lambda")
        lam.publish_layer_version(LayerName="kept", Content={"ZipFile": layer_zip("kept layer")})
        lam.create_function(FunctionName="kept", Runtime="python3.12", Role=ROLE, Handler="app.handler",
                            Code={"ZipFile": code("v1")})
        lam.publish_version(FunctionName="kept")
        lam.create_alias(FunctionName="kept", Name="live", FunctionVersion="1")
        lam.update_function_code(FunctionName="kept", ZipFile=make_zip({"app.py": LAYER_HANDLER}))
        lam.update_function_configuration(FunctionName="kept", Layers=[LAYER_ARN + "kept:1"])
        before = lam.list_versions_by_function(FunctionName="kept")["Versions"]
        proc.stop()
        proc.start()
        lam = client_for(proc.url, "lambda")
        assert lam.list_versions_by_function(FunctionName="kept")["Versions"] == before
        ran, out = invoke(lam, "kept", Qualifier="live")
        assert (ran["mark"], out["ExecutedVersion"]) == ("v1", "1")
        assert invoke(lam, "kept")[0] == {"from_layer": "kept layer"}
        assert lam.get_layer_version(LayerName="kept", VersionNumber=1)["Version"] == 1
        assert lam.publish_version(FunctionName="kept")["Version"] == "2"
    finally:
        proc.stop()


# --- deploy: SAM's AutoPublishAlias and layers ----------------------------------------------

SAM_TEMPLATE = """
Transform: AWS::Serverless-2016-10-31
Resources:
  Events:
    Type: AWS::Kinesis::Stream
    Properties:
      ShardCount: 1
  Shared:
    Type: AWS::Serverless::LayerVersion
    Properties:
      ContentUri: layer/
      CompatibleRuntimes: [python3.12]
  Consumer:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fn/
      Handler: app.handler
      Runtime: python3.12
      AutoPublishAlias: live
      DeploymentPreference:
        Type: AllAtOnce
      Layers: [!Ref Shared]
      Environment:
        Variables:
          SEEN_FILE: {seen}
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Events.Arn
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
Outputs:
  StreamName:
    Value: !Ref Events
  AliasArn:
    Value: !Ref ConsumerAliaslive
  FunctionName:
    Value: !Ref Consumer
"""

SAM_HANDLER = """
import json, os
import layermod
MARK = {mark!r}

def handler(event, context):
    with open(os.environ["SEEN_FILE"], "a") as f:
        for record in event["Records"]:
            f.write(json.dumps({{"mark": MARK, "version": context.function_version, "layer": layermod.GREETING,
                                "arn": context.invoked_function_arn, "data": record["kinesis"]["data"]}}) + "\\n")
    return {{"mark": MARK, "version": context.function_version}}
"""


# A mapping whose stream does not exist: its creation fails after the alias has moved.
BROKEN_MAPPING_RESOURCE = """  Broken:
    Type: AWS::Lambda::EventSourceMapping
    Properties:
      FunctionName: !Ref ConsumerAliaslive
      EventSourceArn: !Sub "arn:aws:kinesis:${AWS::Region}:${AWS::AccountId}:stream/${Events}-missing"
      StartingPosition: LATEST
"""


def run_deploy(capsys, url: str, *args: str) -> tuple[int, dict[str, tuple[str, str]], dict[str, str], str]:
    """`kinesim deploy`: exit code, each resource's (action, type), the outputs, and all it printed."""
    from kinesim.deploy import cli

    code = cli.main([*args, "--endpoint-url", url])
    out, err = capsys.readouterr()
    actions, outputs, in_outputs = {}, {}, False
    for line in out.splitlines():
        words = line.split()
        if line.startswith("Outputs:"):
            in_outputs = True
        elif in_outputs and len(words) == 2:
            outputs[words[0]] = words[1]
        elif len(words) >= 4 and words[2].startswith("AWS::"):
            actions[words[1]] = (words[0], words[2])
    return code, actions, outputs, out + err


def test_auto_publish_alias_template_deploys_and_moves_the_alias(server, lam, tmp_path, capsys):
    kinesis = client_for(server.url)
    stack = "v" + uuid.uuid4().hex[:10]
    seen = tmp_path / "seen.jsonl"
    (tmp_path / "fn").mkdir()
    (tmp_path / "layer" / "python").mkdir(parents=True)
    (tmp_path / "layer" / "python" / "layermod.py").write_text("GREETING = 'from the layer'\n")
    (tmp_path / "fn" / "app.py").write_text(SAM_HANDLER.format(mark="v1"))
    template = tmp_path / "template.yaml"
    template.write_text(SAM_TEMPLATE.format(seen=seen))

    def records() -> list[dict]:
        return [json.loads(line) for line in seen.read_text().splitlines()] if seen.exists() else []

    code, actions, outputs, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
    try:
        assert code == 0, out
        by_type = {t: (lid, action) for lid, (action, t) in actions.items()}
        assert by_type["AWS::Lambda::Version"][1] == "created" and by_type["AWS::Lambda::Alias"][1] == "created"
        assert by_type["AWS::Lambda::LayerVersion"][1] == "created"
        assert by_type["AWS::CodeDeploy::Application"][1] == by_type["AWS::CodeDeploy::DeploymentGroup"][1] == "ignored"
        assert "no gradual traffic shifting" in out
        first_version = by_type["AWS::Lambda::Version"][0]
        name, alias_arn = outputs["FunctionName"], outputs["AliasArn"]
        assert alias_arn == FN_ARN + name + ":live"
        assert lam.get_alias(FunctionName=name, Name="live")["FunctionVersion"] == "1"
        (mapping,) = lam.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]
        assert mapping["FunctionArn"] == alias_arn
        assert lam.get_function_configuration(FunctionName=name)["Layers"][0]["Arn"].startswith(LAYER_ARN + "Shared:")

        kinesis.put_record(StreamName=outputs["StreamName"], Data=b"one", PartitionKey="p")
        wait_until(records, what="the first record at the handler")
        assert records()[0] == {"mark": "v1", "version": "1", "layer": "from the layer", "arn": alias_arn,
                                "data": base64.b64encode(b"one").decode()}

        # Changed code: SAM names a new Version resource; it publishes version 2 and the alias moves.
        (tmp_path / "fn" / "app.py").write_text(SAM_HANDLER.format(mark="v2"))
        code, actions, outputs, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
        assert code == 0, out
        by_type = {t: (lid, action) for lid, (action, t) in actions.items() if lid != first_version}
        assert by_type["AWS::Lambda::Version"][1] == "created" and by_type["AWS::Lambda::Alias"][1] == "updated"
        assert actions[first_version][0] == "retained"  # SAM's DeletionPolicy: Retain
        assert lam.get_alias(FunctionName=name, Name="live")["FunctionVersion"] == "2"
        kinesis.put_record(StreamName=outputs["StreamName"], Data=b"two", PartitionKey="p")
        wait_until(lambda: len(records()) >= 2, what="the second record at the handler")
        assert (records()[-1]["mark"], records()[-1]["version"], records()[-1]["arn"]) == ("v2", "2", alias_arn)
        out1 = lam.invoke(FunctionName=name, Qualifier="1", Payload=json.dumps({"Records": []}).encode())
        assert (json.loads(out1["Payload"].read())["mark"], out1["ExecutedVersion"]) == ("v1", "1")

        # A failed update rolls back: the alias returns to version 2 (version 3 stays published, as
        # SAM's versions are retained), and the mapping keeps invoking it.
        (tmp_path / "fn" / "app.py").write_text(SAM_HANDLER.format(mark="v3"))
        broken = tmp_path / "broken.yaml"
        broken.write_text(template.read_text().replace("Outputs:", BROKEN_MAPPING_RESOURCE + "Outputs:", 1))
        code, actions, _, out = run_deploy(capsys, server.url, str(broken), "--stack-name", stack)
        assert code != 0 and "UPDATE_ROLLBACK_COMPLETE" in out, out
        assert lam.get_alias(FunctionName=name, Name="live")["FunctionVersion"] == "2"
        kinesis.put_record(StreamName=outputs["StreamName"], Data=b"three", PartitionKey="p")
        wait_until(lambda: len(records()) >= 3, what="the third record at the handler")
        assert (records()[-1]["mark"], records()[-1]["version"]) == ("v2", "2")
        (tmp_path / "fn" / "app.py").write_text(SAM_HANDLER.format(mark="v2"))

        # Unchanged: nothing is published.
        code, actions, outputs, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
        assert code == 0, out
        assert {action for action, t in actions.values() if not t.startswith(("AWS::IAM", "AWS::CodeDeploy"))} \
            == {"unchanged"}
        assert [v["Version"] for v in lam.list_versions_by_function(FunctionName=name)["Versions"]] == \
            ["$LATEST", "1", "2", "3"]
    finally:
        code, _, _, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack, "--delete")
    assert code == 0, out
    with pytest.raises(ClientError):
        lam.get_function(FunctionName=name)


CFN_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement: [{{Effect: Allow, Principal: {{Service: lambda.amazonaws.com}}, Action: sts:AssumeRole}}]
  Layer:
    Type: AWS::Lambda::LayerVersion
    Properties:
      LayerName: {stack}-layer
      Content: {{S3Bucket: {bucket}, S3Key: layer.zip}}
      CompatibleRuntimes: [python3.12]
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: {stack}-fn
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Layers: [!Ref Layer]
      Environment: {{Variables: {{STAGE: {stage}}}}}
      Code:
        ZipFile: |
          import os, layermod
          def handler(event, context):
              return {{"layer": layermod.GREETING, "stage": os.environ["STAGE"]}}
  V1:
    Type: AWS::Lambda::Version
    DeletionPolicy: Retain
    Properties: {{FunctionName: !Ref Fn, Description: first}}
{more}
  Live:
    Type: AWS::Lambda::Alias
    Properties:
      FunctionName: !Ref Fn
      FunctionVersion: !GetAtt V1.Version
      Name: live
{routing}
Outputs:
  VersionArn:
    Value: !Ref V1
  AliasArn:
    Value: !GetAtt Live.AliasArn
  LayerArn:
    Value: !Ref Layer
"""

SECOND_VERSION = """
  V2:
    Type: AWS::Lambda::Version
    Properties: {FunctionName: !Ref Fn, Description: second}
"""

CANARY = """
      RoutingConfig:
        AdditionalVersionWeights:
          - {FunctionVersion: !GetAtt V2.Version, FunctionWeight: 0.25}
"""


def test_plain_cloudformation_versions_alias_routing_and_layer(server, lam, tmp_path, capsys):
    stack, bucket = "c" + uuid.uuid4().hex[:10], "layers-" + uuid.uuid4().hex[:10]
    s3 = client_for(server.url, "s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="layer.zip", Body=layer_zip("s3 layer"))
    template = tmp_path / "template.yaml"
    template.write_text(CFN_TEMPLATE.format(stack=stack, bucket=bucket, stage="one", more="", routing=""))
    code, actions, outputs, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
    try:
        assert code == 0, out
        assert outputs["VersionArn"] == FN_ARN + stack + "-fn:1"
        assert outputs["AliasArn"] == FN_ARN + stack + "-fn:live"
        assert outputs["LayerArn"] == LAYER_ARN + stack + "-layer:1"
        ran, out1 = invoke(lam, stack + "-fn", Qualifier="live")
        assert (ran, out1["ExecutedVersion"]) == ({"layer": "s3 layer", "stage": "one"}, "1")
        assert lam.get_function_configuration(FunctionName=stack + "-fn", Qualifier="1")["Description"] == "first"

        template.write_text(CFN_TEMPLATE.format(stack=stack, bucket=bucket, stage="two", more=SECOND_VERSION,
                                                routing=CANARY))
        code, actions, outputs, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
        assert code == 0, out
        assert (actions["Fn"][0], actions["V2"][0], actions["Live"][0]) == ("updated", "created", "updated")
        alias = lam.get_alias(FunctionName=stack + "-fn", Name="live")
        assert (alias["FunctionVersion"], alias["RoutingConfig"]) == ("1", {"AdditionalVersionWeights": {"2": 0.25}})
        assert invoke(lam, stack + "-fn", Qualifier="2")[0]["stage"] == "two"
    finally:
        code, actions, _, out = run_deploy(capsys, server.url, str(template), "--stack-name", stack, "--delete")
    assert code == 0, out
    assert actions["V1"][0] == "retained" and actions["Layer"][0] == "deleted"
    assert lam.list_layer_versions(LayerName=stack + "-layer")["LayerVersions"] == []
    with pytest.raises(ClientError):
        lam.get_function(FunctionName=stack + "-fn")
