"""Systems Manager Parameter Store through boto3: parameters and their versions, names with and
without a leading slash, ARNs and selectors, SecureString, listings by path and with filters,
paging, labels, tags, AWS's refusals, and durability across a kill."""
from __future__ import annotations

import base64
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

ACCOUNT, REGION = "000000000000", "us-east-1"


@pytest.fixture(scope="module")
def ssm(server):
    return client_for(server.url, "ssm")


def uid() -> str:
    return uuid.uuid4().hex[:10]


def error(e: pytest.ExceptionInfo) -> tuple[str, str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


def test_put_get_versions_and_overwrite(ssm):
    name = f"/app-{uid()}/db/host"
    answer = ssm.put_parameter(Name=name, Value="h1", Type="String", Description="the host")
    assert (answer["Version"], answer["Tier"]) == (1, "Standard")
    answer = ssm.get_parameter(Name=name)["Parameter"]
    assert {k: answer[k] for k in ("Name", "Type", "Value", "Version", "DataType", "ARN")} == {
        "Name": name, "Type": "String", "Value": "h1", "Version": 1, "DataType": "text",
        "ARN": f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{name}"}
    assert "LastModifiedDate" in answer and "Selector" not in answer
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=name, Value="h2", Type="String")
    assert error(e) == ("ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the "
                                                  "overwrite option in the request to true.", 400)
    # An overwrite may leave out the type; the description is kept.
    assert ssm.put_parameter(Name=name, Value="h2", Overwrite=True)["Version"] == 2
    assert ssm.get_parameter(Name=name)["Parameter"]["Value"] == "h2"
    old = ssm.get_parameter(Name=f"{name}:1")["Parameter"]
    assert (old["Value"], old["Version"], old["Selector"]) == ("h1", 1, ":1")
    with pytest.raises(ClientError) as e:
        ssm.get_parameter(Name=f"{name}:7")
    assert error(e)[0] == "ParameterVersionNotFound" and "could not find version 7" in error(e)[1]
    history = ssm.get_parameter_history(Name=name)["Parameters"]
    assert [(h["Version"], h["Value"], h["Description"]) for h in history] == [(1, "h1", "the host"),
                                                                               (2, "h2", "the host")]
    assert history[0]["Labels"] == [] and history[0]["LastModifiedUser"] == f"arn:aws:iam::{ACCOUNT}:root"


def test_leading_slash_and_arns(ssm):
    """A first-level name is one parameter with or without its slash, answered as asked; ARNs name
    parameters too (LocalStack's recordings of AWS: test_put_parameters, test_parameters_with_path)."""
    plain = f"param-{uid()}"
    ssm.put_parameter(Name=plain, Value="123", Type="String")
    assert ssm.get_parameter(Name=f"/{plain}")["Parameter"]["Name"] == f"/{plain}"
    got = ssm.get_parameter(Name=plain)["Parameter"]
    assert got["Name"] == plain and got["ARN"] == f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{plain}"
    assert ssm.get_parameter(Name=got["ARN"])["Parameter"]["Name"] == plain
    path = f"/test/param-{uid()}"
    ssm.put_parameter(Name=path, Value="123", Type="String")
    arn = ssm.get_parameter(Name=path)["Parameter"]["ARN"]
    assert arn == f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{path}"
    assert ssm.get_parameter(Name=arn)["Parameter"]["Name"] == path
    assert ssm.get_parameters(Names=[arn])["Parameters"][0]["Name"] == path
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"/{plain}", Value="x", Type="String")
    assert error(e)[0] == "ParameterAlreadyExists"


@pytest.mark.parametrize("pattern", ["/{p}//b//c", "{p}/b/c", "/{p}/b c"])
def test_malformed_names_are_refused(ssm, pattern):
    p = uid()
    ssm.put_parameter(Name=f"/{p}/b/c", Value="123", Type="String")
    with pytest.raises(ClientError) as e:
        ssm.get_parameter(Name=pattern.format(p=p))
    code, message, status = error(e)
    assert (code, status) == ("ValidationException", 400) and "sub-paths divided by slash symbol" in message


def test_reserved_names_and_bad_values(ssm):
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name="awsthing", Value="x", Type="String")
    assert error(e)[:2] == ("ValidationException", 'Parameter name: can\'t be prefixed with "aws" or "ssm" '
                                                   "(case-insensitive).")
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name="/aws/mine/x", Value="x", Type="String")
    assert error(e)[:2] == ("AccessDeniedException", "No access to reserved parameter name: /aws/mine/x.")
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"new-{uid()}", Value="x")
    assert error(e)[:2] == ("ValidationException", "A parameter type is required when you create a parameter.")
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"new-{uid()}", Value="x", Type="Text")
    assert error(e)[0] == "ValidationException" and "Member must satisfy enum value set" in error(e)[1]
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"big-{uid()}", Value="x" * 4097, Type="String")
    assert error(e)[1].startswith("Standard tier parameters support a maximum parameter value of 4096 characters.")
    assert ssm.put_parameter(Name=f"big-{uid()}", Value="x" * 4097, Type="String", Tier="Advanced")["Tier"] == \
        "Advanced"
    assert ssm.put_parameter(Name=f"big-{uid()}", Value="x" * 5000, Type="String",
                             Tier="Intelligent-Tiering")["Tier"] == "Advanced"
    assert ssm.put_parameter(Name=f"small-{uid()}", Value="x", Type="String",
                             Tier="Intelligent-Tiering")["Tier"] == "Standard"
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"new-{uid()}", Value="x", Type="String", DataType="Text")
    assert error(e)[1] == "The following data type is not supported: Text (Data type names are all lowercase.)"
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"new-{uid()}", Value="x", Type="String", Tags=[{"Key": "k", "Value": "v"}],
                          Overwrite=True)
    assert error(e)[1].startswith("Invalid request: tags and overwrite can't be used together.")


def test_tier_downgrade_is_refused(ssm):
    name = f"adv-{uid()}"
    ssm.put_parameter(Name=name, Value="x", Type="String", Tier="Advanced")
    assert ssm.put_parameter(Name=name, Value="y", Overwrite=True)["Tier"] == "Advanced"
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=name, Value="z", Overwrite=True, Tier="Standard")
    assert error(e)[0] == "ValidationException" and "can't downgrade" in error(e)[1]


def test_allowed_pattern(ssm):
    name = f"num-{uid()}"
    ssm.put_parameter(Name=name, Value="42", Type="String", AllowedPattern=r"^\d+$")
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=name, Value="forty-two", Overwrite=True)  # the stored pattern still applies
    assert error(e)[:2] == ("ParameterPatternMismatchException",
                            r"Parameter value, cannot be validated against allowedPattern: ^\d+$")
    assert ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [name]}])["Parameters"][0][
        "AllowedPattern"] == r"^\d+$"


def test_secure_string(ssm):
    name = f"/secrets-{uid()}/db"
    ssm.put_parameter(Name=name, Value="s3cr3t", Type="SecureString")
    hidden = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    assert hidden != "s3cr3t" and hidden.startswith("AQICAH")  # a KMS ciphertext blob, as base64
    assert base64.b64decode(hidden)[:5] == b"\x01\x02\x02\x00\x78"
    assert ssm.get_parameter(Name=name)["Parameter"]["Value"] == hidden  # the same text every time
    assert ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"] == "s3cr3t"
    assert ssm.get_parameters(Names=[name], WithDecryption=True)["Parameters"][0]["Value"] == "s3cr3t"
    meta = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [name]}])["Parameters"][0]
    assert (meta["Type"], meta["KeyId"]) == ("SecureString", "alias/aws/ssm")
    assert ssm.get_parameter_history(Name=name, WithDecryption=True)["Parameters"][0]["Value"] == "s3cr3t"
    ssm.put_parameter(Name=name, Value="other", Type="SecureString", KeyId="alias/mine", Overwrite=True)
    assert ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [name]}])["Parameters"][0][
        "KeyId"] == "alias/mine"
    with pytest.raises(ClientError) as e:
        ssm.put_parameter(Name=f"plain-{uid()}", Value="x", Type="String", KeyId="alias/mine")
    assert error(e)[0] == "ValidationException"


def test_get_parameters_and_delete(ssm):
    a, b = f"a-{uid()}", f"b-{uid()}"
    ssm.put_parameter(Name=a, Value="1", Type="String")
    ssm.put_parameter(Name=b, Value="x,y", Type="StringList")
    answer = ssm.get_parameters(Names=[a, "missing-one", b])
    assert [p["Name"] for p in answer["Parameters"]] == [a, b] and answer["InvalidParameters"] == ["missing-one"]
    assert answer["Parameters"][1]["Value"] == "x,y" and answer["Parameters"][1]["Type"] == "StringList"
    assert ssm.get_parameters(Names=[a])["InvalidParameters"] == []
    ssm.delete_parameter(Name=a)
    for call in (lambda: ssm.get_parameter(Name=a), lambda: ssm.delete_parameter(Name=a),
                 lambda: ssm.get_parameter_history(Name=a)):
        with pytest.raises(ClientError) as e:
            call()
        # AWS's ParameterNotFound has no message (LocalStack's recordings: "Message": "").
        assert error(e) == ("ParameterNotFound", "", 400)
    answer = ssm.delete_parameters(Names=[b, a])
    assert (answer["DeletedParameters"], answer["InvalidParameters"]) == ([b], [a])
    assert ssm.get_parameters(Names=[b])["InvalidParameters"] == [b]


def test_parameters_by_path_recursive_filters_and_paging(ssm):
    root = f"/tree-{uid()}"
    for name in ("a", "b", "sub/c", "sub/deeper/d"):
        ssm.put_parameter(Name=f"{root}/{name}", Value=name, Type="String")
    ssm.put_parameter(Name=f"{root}/s", Value="secret", Type="SecureString")
    one_level = ssm.get_parameters_by_path(Path=root)["Parameters"]
    assert [p["Name"] for p in one_level] == [f"{root}/a", f"{root}/b", f"{root}/s"]
    assert one_level[2]["Value"] != "secret"
    assert ssm.get_parameters_by_path(Path=root + "/", WithDecryption=True)["Parameters"][2]["Value"] == "secret"
    everything = ssm.get_parameters_by_path(Path=root, Recursive=True)["Parameters"]
    assert len(everything) == 5
    typed = ssm.get_parameters_by_path(Path=root, Recursive=True,
                                       ParameterFilters=[{"Key": "Type", "Values": ["SecureString"]}])
    assert [p["Name"] for p in typed["Parameters"]] == [f"{root}/s"]
    pages, token = [], None
    while True:
        kwargs = {"NextToken": token} if token else {}
        answer = ssm.get_parameters_by_path(Path=root, Recursive=True, MaxResults=2, **kwargs)
        pages.append([p["Name"] for p in answer["Parameters"]])
        token = answer.get("NextToken")
        if not token:
            break
    assert [len(p) for p in pages] == [2, 2, 1] and sorted(sum(pages, [])) == sorted(p["Name"] for p in everything)
    with pytest.raises(ClientError) as e:
        ssm.get_parameters_by_path(Path=root, MaxResults=11)
    assert error(e)[0] == "ValidationException" and "maxResults" in error(e)[1]
    with pytest.raises(ClientError) as e:
        ssm.get_parameters_by_path(Path=root, NextToken="made-up")
    assert error(e)[0] == "InvalidNextToken"
    with pytest.raises(ClientError) as e:
        ssm.get_parameters_by_path(Path=root, ParameterFilters=[{"Key": "Name", "Values": ["x"]}])
    assert error(e)[:2] == ("InvalidFilterKey", "The following filter key is not valid: Name. Valid filter keys "
                                                "include: [Type, KeyId].")
    with pytest.raises(ClientError) as e:
        ssm.get_parameters_by_path(Path="no-slash")
    assert error(e)[0] == "ValidationException"


def test_describe_parameters_filters_and_paging(ssm):
    root = f"/desc-{uid()}"
    for i in range(5):
        ssm.put_parameter(Name=f"{root}/p{i}", Value=str(i), Type="StringList" if i % 2 else "String")
    ssm.put_parameter(Name=f"{root}/deep/q", Value="q", Type="String")
    by_path = ssm.describe_parameters(ParameterFilters=[{"Key": "Path", "Values": [root]}])["Parameters"]
    assert [p["Name"] for p in by_path] == [f"{root}/p{i}" for i in range(5)]
    recursive = ssm.describe_parameters(ParameterFilters=[{"Key": "Path", "Option": "Recursive",
                                                           "Values": [root]}])["Parameters"]
    assert len(recursive) == 6
    lists = ssm.describe_parameters(ParameterFilters=[{"Key": "Path", "Values": [root]},
                                                      {"Key": "Type", "Values": ["StringList"]}])["Parameters"]
    assert [p["Name"] for p in lists] == [f"{root}/p1", f"{root}/p3"]
    begins = ssm.describe_parameters(Filters=[{"Key": "Name", "Values": [f"{root}/p"]}])["Parameters"]
    assert len(begins) == 5
    paginator = ssm.get_paginator("describe_parameters")
    names = [p["Name"] for page in paginator.paginate(
        ParameterFilters=[{"Key": "Name", "Option": "BeginsWith", "Values": [root]}],
        PaginationConfig={"PageSize": 2}) for p in page["Parameters"]]
    assert names == sorted(p["Name"] for p in recursive)
    with pytest.raises(ClientError) as e:
        ssm.describe_parameters(Filters=[{"Key": "Name", "Values": ["x"]}],
                                ParameterFilters=[{"Key": "Name", "Values": ["x"]}])
    assert error(e)[1] == "You can use either Filters or ParameterFilters in a single request."
    with pytest.raises(ClientError) as e:
        ssm.describe_parameters(ParameterFilters=[{"Key": "Label", "Values": ["x"]}])
    assert error(e)[0] == "InvalidFilterKey"
    with pytest.raises(ClientError) as e:
        ssm.describe_parameters(ParameterFilters=[{"Key": "Type", "Values": ["Text"]}])
    assert error(e)[0] == "InvalidFilterValue"


def test_labels(ssm):
    name = f"/labelled-{uid()}/p"
    ssm.put_parameter(Name=name, Value="v1", Type="String")
    ssm.put_parameter(Name=name, Value="v2", Overwrite=True)
    answer = ssm.label_parameter_version(Name=name, ParameterVersion=1, Labels=["stable", "9lives", "awsy"])
    assert (answer["ParameterVersion"], answer["InvalidLabels"]) == (1, ["9lives", "awsy"])
    assert ssm.get_parameter(Name=f"{name}:stable")["Parameter"]["Value"] == "v1"
    assert ssm.label_parameter_version(Name=name, Labels=["stable"])["ParameterVersion"] == 2  # moves it
    assert ssm.get_parameter(Name=f"{name}:stable")["Parameter"]["Value"] == "v2"
    assert [h["Labels"] for h in ssm.get_parameter_history(Name=name)["Parameters"]] == [[], ["stable"]]
    found = ssm.get_parameters_by_path(Path=name.rsplit("/", 1)[0],
                                       ParameterFilters=[{"Key": "Label", "Values": ["stable"]}])["Parameters"]
    assert [p["Name"] for p in found] == [name]
    assert ssm.unlabel_parameter_version(Name=name, ParameterVersion=2, Labels=["stable", "other"])[
        "RemovedLabels"] == ["stable"]
    with pytest.raises(ClientError) as e:
        ssm.get_parameter(Name=f"{name}:stable")
    assert error(e)[0] == "ParameterNotFound"
    with pytest.raises(ClientError) as e:
        ssm.label_parameter_version(Name=name, ParameterVersion=9, Labels=["x"])
    assert error(e)[0] == "ParameterVersionNotFound"
    with pytest.raises(ClientError) as e:
        ssm.label_parameter_version(Name=name, Labels=[f"l{i}" for i in range(10)] + ["x"])
    assert error(e)[0] == "ValidationException"  # the model's limit: 10 labels a call
    ssm.label_parameter_version(Name=name, Labels=[f"l{i}" for i in range(10)])
    with pytest.raises(ClientError) as e:
        ssm.label_parameter_version(Name=name, Labels=["one-more"])
    assert error(e)[0] == "ParameterVersionLabelLimitExceeded"


def test_tags(ssm):
    name = f"tagged-{uid()}"
    ssm.put_parameter(Name=name, Value="v", Type="String", Tags=[{"Key": "team", "Value": "data"}])
    ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=f"/{name}", Tags=[{"Key": "env", "Value": "dev"}])
    tags = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)["TagList"]
    assert sorted((t["Key"], t["Value"]) for t in tags) == [("env", "dev"), ("team", "data")]
    ssm.remove_tags_from_resource(ResourceType="Parameter", ResourceId=name, TagKeys=["team"])
    assert ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)["TagList"] == \
        [{"Key": "env", "Value": "dev"}]
    found = ssm.describe_parameters(ParameterFilters=[{"Key": "tag:env", "Values": ["dev"]},
                                                      {"Key": "Name", "Values": [name]}])["Parameters"]
    assert [p["Name"] for p in found] == [name]
    for resource_type, resource_id in (("Parameter", "no-such-parameter"), ("Document", name)):
        with pytest.raises(ClientError) as e:
            ssm.list_tags_for_resource(ResourceType=resource_type, ResourceId=resource_id)
        assert error(e)[0] == "InvalidResourceId"


def test_operations_kinesim_lacks(ssm):
    with pytest.raises(ClientError) as e:
        ssm.list_documents()
    code, message, status = error(e)
    assert (code, status) == ("NotImplementedException", 501) and "ListDocuments" in message


def test_parameters_survive_a_kill(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        ssm = client_for(proc.url, "ssm")
        ssm.put_parameter(Name="/kept/p", Value="v1", Type="SecureString")
        ssm.put_parameter(Name="/kept/p", Value="v2", Overwrite=True)
        ssm.label_parameter_version(Name="/kept/p", ParameterVersion=1, Labels=["first"])
        ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId="/kept/p", Tags=[{"Key": "k", "Value": "v"}])
        hidden = ssm.get_parameter(Name="/kept/p")["Parameter"]["Value"]
        proc.kill()
        proc.start()
        ssm = client_for(proc.url, "ssm")
        assert ssm.get_parameter(Name="/kept/p")["Parameter"]["Value"] == hidden
        assert ssm.get_parameter(Name="/kept/p:first", WithDecryption=True)["Parameter"]["Value"] == "v1"
        assert ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId="/kept/p")["TagList"] == \
            [{"Key": "k", "Value": "v"}]
        assert ssm.put_parameter(Name="/kept/p", Value="v3", Overwrite=True)["Version"] == 3
    finally:
        proc.stop()


def test_malformed_requests_are_answered_not_crashed_on(server, ssm):
    import json
    import urllib.error
    import urllib.request

    def post(target: str, body: bytes) -> tuple[int, dict]:
        request = urllib.request.Request(server.url, data=body, method="POST", headers={
            "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1",
            "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/ssm/aws4_request, "
                             "SignedHeaders=host, Signature=abc", "X-Amz-Date": "20260101T000000Z"})
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    status, body = post("AmazonSSM.PutParameter", json.dumps({"Name": "n", "Value": 12}).encode())
    assert status == 400 and body["__type"].endswith("SerializationException")
    status, body = post("AmazonSSM.NoSuchThing", b"{}")
    assert status == 400 and body["__type"].endswith("UnknownOperationException")
    for name in ("arn:aws:ssm", "arn:aws:ssm:us-east-1:000000000000:parameter/x:1:2", "x:", ":", "/", "a" * 2048):
        status, body = post("AmazonSSM.GetParameter", json.dumps({"Name": name}).encode())
        assert status == 400 and body["__type"].split("#")[-1] in ("ValidationException", "ParameterNotFound"), name
    status, body = post("AmazonSSM.GetParametersByPath", json.dumps({"Path": "/", "NextToken": "eyJxIjoxfQ"}).encode())
    assert status == 400 and body["__type"].endswith("InvalidNextToken")
    status, body = post("AmazonSSM.PutParameter", json.dumps({"Name": f"p-{uid()}", "Value": "v", "Type": "String",
                                                              "AllowedPattern": "(unclosed"}).encode())
    assert status == 400 and body["__type"].endswith("InvalidAllowedPatternException")
