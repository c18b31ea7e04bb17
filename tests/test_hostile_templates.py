"""Hostile and oversized CloudFormation templates (issue 30): each refused with AWS's 4xx, at once,
while the server keeps answering other clients and its memory stays small.

- A YAML alias chain ("billion laughs", 700 bytes) froze the server for good: turning the parsed
  document into JSON expanded it. CloudFormation refuses every YAML alias ("Template error: YAML
  aliases are not allowed in CloudFormation templates."); `kinesim deploy` resolves them in local
  files, as `aws cloudformation package` and the SAM CLI do, up to cfn-lint's bound.
- 5,000 resources were accepted (CreateStack answered after 22 s, the stack never settled): AWS's
  quotas (500 resources, 200 parameters, outputs and mappings, names of 255 characters) are
  enforced before any work in proportion, on the processed template too.
- A nested stack that creates itself, or two that create each other, never settled: AWS's account
  quotas end the chain (stacks per account; resources in one stack operation, nested stacks
  included), the stack fails and rolls back as for any failed resource.
- Deep nesting (`Fn::Join` 2,500 deep, 3,000 `[`, 1,500 `!Join`) answered 500: now a
  ValidationError. So do deep JSON documents of STS and ECR, which answered 500 too.

The server is this module's own (a second one has a small stack quota), each hostile request is
watched by a health probe (ListStreams every 100 ms, the server's RSS); a watchdog kills a server
that passes 1.5 GB, so that a regression fails the test rather than the machine.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server, wait_for
from health_probe import HealthProbe, resident_bytes
from kinesim.deploy.template import TemplateError, load_template

KILL_RSS = 1536 << 20
RESOURCE_LIMIT = "Template format error: Number of resources, {}, is greater than maximum allowed, 500"
ALIASES = "Template error: YAML aliases are not allowed in CloudFormation templates."
STACK_LIMIT = "Limit for stack has been exceeded"
OPERATION_LIMIT = "Limit on the number of resources in a single stack operation exceeded"


class Watchdog:
    """Kills the server if it grows past KILL_RSS (a bomb that got through must not take the
    machine with it): the request under test then fails instead of hanging."""

    def __init__(self, server):
        self.pid = server.proc.pid
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            if resident_bytes(self.pid) > KILL_RSS:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                return


def hostile(server, call, **kwargs) -> tuple[dict, HealthProbe]:
    """`call(**kwargs)`'s AWS error (it must fail), made beside a health probe and the watchdog."""
    with Watchdog(server) as watchdog, HealthProbe(server) as probe:
        with pytest.raises(ClientError) as caught:
            call(**kwargs)
    assert not watchdog.killed, "the server passed 1.5 GB and was killed"
    probe.assert_healthy()
    return caught.value.response, probe


def error(response: dict) -> tuple[str, str, int]:
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def cfn(own_server):
    return client_for(own_server.url, "cloudformation", read_timeout=90)


@pytest.fixture(scope="module")
def bucket(own_server):
    s3 = client_for(own_server.url, "s3", s3={"addressing_style": "path"})
    name = "templates-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name)
    return name


def upload(server, bucket: str, body: str, key: str | None = None) -> str:
    s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
    key = key or f"{uuid.uuid4().hex}.yaml"
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    return f"{server.url}/{bucket}/{key}"


def stack_name() -> str:
    return "h" + uuid.uuid4().hex[:12]


def ssm_parameters(count: int, extra: str = "") -> str:
    return "".join(f"  P{i}: {{Type: AWS::SSM::Parameter, Properties: {{Type: String, Value: x}}{extra}}}\n"
                   for i in range(count))


# 1. YAML aliases


def alias_bomb(levels: int, width: int = 9) -> str:
    """`a: &a [x, x, ...]`, `b: &b [*a, *a, ...]`, ...: `width ** levels` strings from ~80 bytes a level."""
    lines = ["Metadata:", f"  a0: &a0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"  a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    return "\n".join(lines) + "\nResources:\n  Q: {Type: AWS::SQS::Queue}\n"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("operation", ["validate_template", "create_stack"])
def test_a_yaml_alias_bomb_is_refused_at_once(own_server, cfn, operation):
    body = alias_bomb(9)
    assert len(body) < 1000
    kwargs = {"TemplateBody": body} if operation == "validate_template" else {"TemplateBody": body,
                                                                               "StackName": stack_name()}
    response, _ = hostile(own_server, getattr(cfn, operation), **kwargs)
    assert error(response) == ("ValidationError", ALIASES, 400)


def test_any_yaml_alias_is_refused_by_the_service(cfn):
    body = "Metadata:\n  tags: &tags {team: data}\n  again: *tags\nResources:\n  Q: {Type: AWS::SQS::Queue}\n"
    with pytest.raises(ClientError) as caught:
        cfn.validate_template(TemplateBody=body)
    assert error(caught.value.response) == ("ValidationError", ALIASES, 400)


@pytest.mark.timeout(60)
def test_local_templates_resolve_aliases_within_a_bound(tmp_path):
    # `kinesim deploy` reads local files as `aws cloudformation package` does: aliases resolved...
    ok = tmp_path / "ok.yaml"
    ok.write_text("Metadata:\n  tags: &tags {team: data}\nResources:\n  Q:\n    Type: AWS::SQS::Queue\n"
                  "    Metadata: *tags\n")
    assert load_template(ok)["Resources"]["Q"]["Metadata"] == {"team": "data"}
    # ...but not into more than cfn-lint's 250,000 values (this one is 1,000,000 strings).
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(6, width=10))
    with pytest.raises(TemplateError, match="more than 250000 values once its YAML aliases are expanded"):
        load_template(bomb)
    # ...nor deeper than the bound: each alias of a deep value inside a deep value adds their depths.
    deep = tmp_path / "deep.yaml"
    deep.write_text("Metadata:\n  a: &a " + "[" * 60 + "x" + "]" * 60 + "\n  b: " + "[" * 60 + "*a" + "]" * 60
                    + "\nResources:\n  Q: {Type: AWS::SQS::Queue}\n")
    with pytest.raises(TemplateError, match="nested more than 100 levels deep"):
        load_template(deep)


# 5. Quotas


@pytest.mark.timeout(240)
def test_5000_resources_are_refused_before_any_work(own_server, cfn, bucket):
    url = upload(own_server, bucket, "Resources:\n" + ssm_parameters(5000))
    name = stack_name()
    response, _ = hostile(own_server, cfn.create_stack, StackName=name, TemplateURL=url)
    assert error(response) == ("ValidationError", RESOURCE_LIMIT.format(5000), 400)
    with pytest.raises(ClientError, match="does not exist"):
        cfn.describe_stacks(StackName=name)


def named(kind: str, name: str) -> str:
    return {"Resources": f"Resources:\n  {name}: {{Type: AWS::SQS::Queue}}\n",
            "Parameters": f"Parameters:\n  {name}: {{Type: String}}\nResources:\n  Q: {{Type: AWS::SQS::Queue}}\n",
            "Outputs": f"Resources:\n  Q: {{Type: AWS::SQS::Queue}}\nOutputs:\n  {name}: {{Value: x}}\n",
            "Mappings": f"Mappings:\n  {name}: {{K: {{A: x}}}}\nResources:\n  Q: {{Type: AWS::SQS::Queue}}\n"}[kind]


def counted(kind: str, count: int) -> str:
    queue = "Resources:\n  Q: {Type: AWS::SQS::Queue}\n"
    if kind == "Resources":
        return "Resources:\n" + ssm_parameters(count)
    if kind == "Parameters":
        return "Parameters:\n" + "".join(f"  P{i}: {{Type: String, Default: x}}\n" for i in range(count)) + queue
    if kind == "Outputs":
        return queue + "Outputs:\n" + "".join(f"  O{i}: {{Value: x}}\n" for i in range(count))
    if kind == "Mappings":
        return "Mappings:\n" + "".join(f"  M{i}: {{K: {{A: x}}}}\n" for i in range(count)) + queue
    if kind == "top-level keys":
        return "Mappings:\n  M:\n" + "".join(f"    K{i}: {{A: x}}\n" for i in range(count)) + queue
    assert kind == "second-level keys"
    return "Mappings:\n  M:\n    K:\n" + "".join(f"      A{i}: x\n" for i in range(count)) + queue


@pytest.mark.parametrize("kind, limit, message", [
    ("Resources", 500, RESOURCE_LIMIT.format(501)),
    ("Parameters", 200, "Template format error: Parameter count 201 is greater than max allowed 200"),
    ("Outputs", 200, "Template format error: Outputs count 201 is greater than max allowed 200"),
    ("Mappings", 200, "Template format error: Mappings count 201 is greater than max allowed 200"),
    ("top-level keys", 200, "Template format error: Mapping attributes count 201 in mapping M is greater than "
                            "max allowed 200"),
    ("second-level keys", 200, "Template format error: Mapping attributes count 201 in mapping M is greater than "
                               "max allowed 200"),
])
def test_counts_past_aws_quotas_are_refused(cfn, kind, limit, message):
    cfn.validate_template(TemplateBody=counted(kind, limit))
    with pytest.raises(ClientError) as caught:
        cfn.validate_template(TemplateBody=counted(kind, limit + 1))
    assert error(caught.value.response) == ("ValidationError", message, 400)


@pytest.mark.parametrize("kind, word", [("Resources", "Resource"), ("Parameters", "Parameter"),
                                        ("Outputs", "Output"), ("Mappings", "Mapping")])
def test_names_longer_than_255_characters_are_refused(cfn, kind, word):
    cfn.validate_template(TemplateBody=named(kind, "N" * 255))
    with pytest.raises(ClientError) as caught:
        cfn.validate_template(TemplateBody=named(kind, "N" * 256))
    assert error(caught.value.response) == (
        "ValidationError", f"Template format error: {word} name {'N' * 256} is longer than 255 characters.", 400)


def test_a_long_description_is_refused(cfn):
    template = "Description: {}\nResources:\n  Q: {{Type: AWS::SQS::Queue}}\n"
    cfn.validate_template(TemplateBody=template.format("d" * 1024))
    with pytest.raises(ClientError) as caught:
        cfn.validate_template(TemplateBody=template.format("d" * 1025))
    assert error(caught.value.response)[0::2] == ("ValidationError", 400)
    assert "1024" in error(caught.value.response)[1]


@pytest.mark.timeout(120)
def test_the_processed_template_is_held_to_the_quotas(cfn):
    # 251 functions are 251 resources as sent, 502 once SAM has given each its role.
    functions = "".join(f"  F{i}: {{Type: AWS::Serverless::Function, Properties: {{Runtime: python3.12, "
                        f"Handler: a.h, CodeUri: s3://code/f.zip}}}}\n" for i in range(251))
    body = "Transform: AWS::Serverless-2016-10-31\nResources:\n" + functions
    cfn.validate_template(TemplateBody=body)  # ValidateTemplate applies no transform
    name = stack_name()
    with pytest.raises(ClientError) as caught:
        cfn.create_stack(StackName=name, TemplateBody=body, Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"])
    assert error(caught.value.response) == ("ValidationError", RESOURCE_LIMIT.format(502), 400)
    with pytest.raises(ClientError, match="does not exist"):
        cfn.describe_stacks(StackName=name)


# 6. Nested stacks that create themselves


def settled(cfn, name: str, timeout: float = 150.0) -> dict:
    def done():
        found = cfn.describe_stacks(StackName=name)["Stacks"][0]
        return found if not found["StackStatus"].endswith("_IN_PROGRESS") else None
    return wait_for(done, timeout, interval=0.5)


def failure_reasons(cfn) -> list[str]:
    """Every CREATE_FAILED reason of every stack the server has known (deleted ones by id)."""
    reasons = []
    for summary in cfn.list_stacks()["StackSummaries"]:
        for event in cfn.describe_stack_events(StackName=summary["StackId"])["StackEvents"]:
            if event["ResourceStatus"] == "CREATE_FAILED" and event["ResourceType"] == "AWS::CloudFormation::Stack":
                reasons.append(event.get("ResourceStatusReason", ""))
    return reasons


def live_stacks(cfn) -> list[str]:
    return [s["StackName"] for s in cfn.list_stacks()["StackSummaries"] if s["StackStatus"] != "DELETE_COMPLETE"]


def assert_rolled_back(cfn, name: str, reason: str) -> None:
    stack = settled(cfn, name)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    assert stack["StackStatusReason"].startswith("The following resource(s) failed to create: [Child]")
    reasons = failure_reasons(cfn)
    # The deepest stack's nested stack resource, in AWS's words (after the engine's "resource Child
    # (AWS::CloudFormation::Stack): ", as every resource's reason is given); each parent's, AWS's.
    assert reason in reasons, reasons  # AWS's words alone: the event names the resource
    assert any("Embedded stack arn:" in r and "was not successfully created: The following resource(s) failed "
               "to create: [Child]" in r for r in reasons)
    assert live_stacks(cfn) == [name]  # every nested stack was deleted with the rollback
    cfn.delete_stack(StackName=name)
    wait_for(lambda: not live_stacks(cfn), 60)


def create_answered(cfn, **kwargs) -> None:
    started = time.monotonic()
    cfn.create_stack(Capabilities=["CAPABILITY_IAM"], **kwargs)
    # The stack's work goes on after the answer, as on AWS (it answered after 20 s, held by a child
    # that never settled); a generous bound, far from either.
    assert time.monotonic() - started < 10


@pytest.mark.timeout(300)
def test_a_stack_that_nests_itself_is_stopped_by_the_operation_quota(own_server, cfn, bucket):
    # Each level plans 500 resources (all but the child wait for it): the sixth level would bring
    # the operation past 2,500 and is refused; nothing but the nested stacks was made.
    key = f"{uuid.uuid4().hex}.yaml"
    url = f"{own_server.url}/{bucket}/{key}"
    body = ("Resources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: "
            + json.dumps(url) + "}\n" + ssm_parameters(499, ", DependsOn: Child"))
    upload(own_server, bucket, body, key)
    name = stack_name()
    with Watchdog(own_server) as watchdog, HealthProbe(own_server) as probe:
        create_answered(cfn, StackName=name, TemplateURL=url)
        assert_rolled_back(cfn, name, OPERATION_LIMIT)
    assert not watchdog.killed
    probe.assert_healthy()
    ssm = client_for(own_server.url, "ssm")
    assert not ssm.describe_parameters()["Parameters"]


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory):
    """A server whose account may hold 8 stacks (AWS's quota is 2,000 and can be changed)."""
    proc = start_server(tmp_path_factory, stack_limit=8)
    yield proc
    proc.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mutual", [False, True], ids=["itself", "each-other"])
def test_nested_stacks_that_create_each_other_are_stopped_by_the_stack_quota(limited_server, mutual):
    cfn = client_for(limited_server.url, "cloudformation", read_timeout=90)
    s3 = client_for(limited_server.url, "s3", s3={"addressing_style": "path"})
    bucket = "nest-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    urls = [f"{limited_server.url}/{bucket}/{side}.yaml" for side in ("a", "b")]
    for side, url in zip(("a", "b"), urls):
        child = urls[1] if mutual and side == "a" else urls[0]
        s3.put_object(Bucket=bucket, Key=f"{side}.yaml", Body=(
            "Resources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: "
            + json.dumps(child) + "}\n").encode())
    name = stack_name()
    with Watchdog(limited_server) as watchdog, HealthProbe(limited_server) as probe:
        create_answered(cfn, StackName=name, TemplateURL=urls[0])
        assert_rolled_back(cfn, name, STACK_LIMIT)
    assert not watchdog.killed
    probe.assert_healthy()


def test_the_stack_quota_refuses_a_new_stack(limited_server):
    cfn = client_for(limited_server.url, "cloudformation")
    names = [stack_name() for _ in range(8)]
    try:
        for name in names:
            cfn.create_stack(StackName=name, TemplateBody="Resources:\n  Q: {Type: AWS::SQS::Queue}\n")
        with pytest.raises(ClientError) as caught:
            cfn.create_stack(StackName=stack_name(), TemplateBody="Resources:\n  Q: {Type: AWS::SQS::Queue}\n")
        assert error(caught.value.response) == ("LimitExceededException", STACK_LIMIT, 400)
        with pytest.raises(ClientError) as caught:
            cfn.create_change_set(StackName=stack_name(), ChangeSetName="c", ChangeSetType="CREATE",
                                  TemplateBody="Resources:\n  Q: {Type: AWS::SQS::Queue}\n")
        assert error(caught.value.response) == ("LimitExceededException", STACK_LIMIT, 400)
    finally:
        for name in names:
            cfn.delete_stack(StackName=name)
        wait_for(lambda: not live_stacks(cfn), 60)


# 7. Deep nesting


def deep_json_join(depth: int) -> str:
    value = '"x"'
    for _ in range(depth):
        value = '{"Fn::Join":["",[' + value + ']]}'
    return ('{"Resources":{"P":{"Type":"AWS::SSM::Parameter","Properties":{"Type":"String","Value":'
            + value + '}}}}')


YAML_PARAMETER = "Resources:\n  P:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: "


@pytest.mark.timeout(120)
@pytest.mark.parametrize("body", [
    deep_json_join(2500),
    YAML_PARAMETER + "[" * 3000 + "]" * 3000 + "\n",
    YAML_PARAMETER + "!Join ['', [" * 1500 + "x" + "]]" * 1500 + "\n",
], ids=["json-join-2500", "yaml-brackets-3000", "yaml-join-1500"])
@pytest.mark.parametrize("operation", ["validate_template", "create_stack", "get_template_summary"])
def test_deep_nesting_is_a_validation_error(own_server, cfn, body, operation):
    kwargs = {"TemplateBody": body, **({"StackName": stack_name()} if operation == "create_stack" else {})}
    response, _ = hostile(own_server, getattr(cfn, operation), **kwargs)
    code, message, status = error(response)
    assert (code, status) == ("ValidationError", 400)
    assert message.startswith("Template format error: ") and "nested more than 100 levels deep" in message


def test_nesting_within_the_bound_is_deployed(own_server, cfn):
    name = stack_name()
    cfn.create_stack(StackName=name, TemplateBody=deep_json_join(30))  # 94 levels in all
    assert settled(cfn, name)["StackStatus"] == "CREATE_COMPLETE"
    physical = cfn.describe_stack_resource(StackName=name, LogicalResourceId="P")["StackResourceDetail"]
    ssm = client_for(own_server.url, "ssm")
    assert ssm.get_parameter(Name=physical["PhysicalResourceId"])["Parameter"]["Value"] == "x"
    cfn.delete_stack(StackName=name)


@pytest.mark.timeout(120)
def test_a_long_chain_of_conditions_is_a_validation_error(own_server, cfn, bucket):
    # Each condition names the next: no nesting, but evaluating them recursed 5,000 deep.
    conditions = "".join(f"  C{i}: {{Condition: C{i + 1}}}\n" for i in range(5000))
    body = ("Conditions:\n" + conditions + "  C5000: !Equals [a, a]\nResources:\n"
            "  Q: {Type: AWS::SQS::Queue, Condition: C0}\n")
    url = upload(own_server, bucket, body)
    response, _ = hostile(own_server, cfn.create_stack, StackName=stack_name(), TemplateURL=url)
    code, message, status = error(response)
    assert (code, status) == ("ValidationError", 400)
    assert message.startswith("Template format error: ")


# Other documents the server reads from a client


@pytest.mark.timeout(60)
def test_deep_json_policies_are_refused_as_aws_refuses_them(own_server):
    deep = "[" * 1024 + "]" * 1024  # as deep as the 2,048 characters of a Policy go, past Jackson's 1,000 levels
    sts = client_for(own_server.url, "sts")
    response, _ = hostile(own_server, sts.assume_role, RoleArn="arn:aws:iam::000000000000:role/r",
                          RoleSessionName="deep", Policy=deep)
    assert error(response) == ("MalformedPolicyDocument", "The policy is not in the valid JSON format.", 400)
    ecr = client_for(own_server.url, "ecr")
    repository = "deep-" + uuid.uuid4().hex[:8]
    ecr.create_repository(repositoryName=repository)
    response, _ = hostile(own_server, ecr.set_repository_policy, repositoryName=repository,
                          policyText="[" * 3000 + "]" * 3000)
    assert error(response)[0::2] == ("InvalidParameterException", 400)
    response, _ = hostile(own_server, ecr.put_lifecycle_policy, repositoryName=repository,
                          lifecyclePolicyText="[" * 3000 + "]" * 3000)
    assert error(response)[0::2] == ("InvalidParameterException", 400)


@pytest.mark.timeout(60)
def test_xml_entity_bombs_are_malformed_xml(own_server):
    # Python's expat (2.4 and later) stops entity amplification: S3 answers MalformedXML at once.
    import base64
    import hashlib
    import urllib.error
    import urllib.request

    s3 = client_for(own_server.url, "s3", s3={"addressing_style": "path"})
    name = "xml-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name)
    entities = '<!ENTITY a0 "lollollol">' + "".join(
        f'<!ENTITY a{i} "{("&a" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    body = (f'<?xml version="1.0"?><!DOCTYPE d [{entities}]><Delete><Object><Key>&a9;</Key></Object></Delete>').encode()
    request = urllib.request.Request(f"{own_server.url}/{name}?delete", data=body, method="POST", headers={
        "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode(), "Content-Type": "application/xml"})
    with Watchdog(own_server) as watchdog, HealthProbe(own_server) as probe:
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
    assert not watchdog.killed
    probe.assert_healthy()
    assert caught.value.code == 400 and b"<Code>MalformedXML</Code>" in caught.value.read()


# Found by the fuzz sweep (tests/test_fuzz.py): 500s and a cycle ValidateTemplate let through


@pytest.mark.parametrize("call, kwargs, message", [
    ("validate_template", {"TemplateURL": "http://[::1/b/k"}, "TemplateURL must be a supported URL."),
    ("get_template_summary", {"TemplateURL": "http://[::1/b/k"}, "TemplateURL must be a supported URL."),
    ("validate_template", {"TemplateBody": "\x00"}, "Template format error: YAML not well-formed."),
])
def test_unreadable_urls_and_characters_are_validation_errors(cfn, call, kwargs, message):
    with pytest.raises(ClientError) as caught:
        getattr(cfn, call)(**kwargs)
    assert error(caught.value.response) == ("ValidationError", message, 400)


@pytest.mark.parametrize("resources", [
    {"A": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::GetAtt": ["B", "QueueName"]}}},
     "B": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Sub": "${A.QueueName}-b"}}}},
    {"A": {"Type": "AWS::SQS::Queue", "DependsOn": "B"}, "B": {"Type": "AWS::SQS::Queue", "DependsOn": ["A"]}},
    # Without parameter values, both branches of an Fn::If count
    {"A": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::If": ["C", "a", {"Ref": "B"}]}}},
     "B": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Ref": "A"}}}},
])
def test_validate_template_finds_circular_dependencies(cfn, resources):
    template = {"Parameters": {"P": {"Type": "String", "Default": "x"}},
                "Conditions": {"C": {"Fn::Equals": [{"Ref": "P"}, "x"]}}, "Resources": resources}
    with pytest.raises(ClientError) as caught:
        cfn.validate_template(TemplateBody=json.dumps(template))
    assert error(caught.value.response) == ("ValidationError", "Circular dependency between resources: [A, B]", 400)
