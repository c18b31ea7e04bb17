"""SSM in templates: AWS::SSM::Parameter through `kinesim deploy` (a named and a generated
parameter, GetAtt Type/Value, an update that makes a new version and changes tags, delete), the
SecureString refusal, and template parameters of `AWS::SSM::Parameter::Value<...>` types read
from Parameter Store (`resolve_ssm_parameters`, against a real server)."""
from __future__ import annotations

import json
import re
import urllib.request
import uuid

import pytest

from kinesim.deploy import cli
from kinesim.deploy.ssm_parameters import resolve_ssm_parameters
from kinesim.deploy.template import TemplateError

from conftest import client_for

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Release:
    Type: AWS::SSM::Parameter::Value<String>
    Default: {release}
  Zones:
    Type: AWS::SSM::Parameter::Value<List<String>>
    Default: {zones}
  Team:
    Type: String
    Default: data
Resources:
  Named:
    Type: AWS::SSM::Parameter
    Properties:
      Name: !Sub "/${{AWS::StackName}}/release"
      Type: String
      Value: !Sub "release-${{Release}}"
      Description: the release deployed
      Tags: {{team: !Ref Team}}
  Generated:
    Type: AWS::SSM::Parameter
    Properties:
      Type: StringList
      Value: !Join [",", !Ref Zones]
      Tier: Standard
Outputs:
  NamedName:
    Value: !Ref Named
  NamedValue:
    Value: !GetAtt Named.Value
  GeneratedName:
    Value: !Ref Generated
  GeneratedType:
    Value: !GetAtt Generated.Type
"""

SECURE = """
Resources:
  Secret:
    Type: AWS::SSM::Parameter
    Properties:
      Type: SecureString
      Value: hunter2
"""


@pytest.fixture(scope="module")
def ssm(server):
    return client_for(server.url, "ssm")


def uid() -> str:
    return uuid.uuid4().hex[:10]


def deploy(capsys, url: str, *args: str) -> tuple[int, dict[str, str], str]:
    code = cli.main([*args, "--endpoint-url", url])
    out, err = capsys.readouterr()
    actions = {w[1]: w[0] for w in (line.split() for line in out.splitlines()) if len(w) >= 4 and w[2].startswith("AWS::")}
    return code, actions, out + err


def outputs(url: str, stack: str) -> dict[str, str]:
    with urllib.request.urlopen(f"{url}/_kinesim/stacks/{stack}") as response:
        return {k: v["OutputValue"] for k, v in json.loads(response.read())["Outputs"].items()}


def test_parameters_deploy_update_and_delete(server, ssm, tmp_path, capsys):
    stack, release, zones = "cfg" + uid()[:8], f"/rel-{uid()}/version", f"/zones-{uid()}"
    ssm.put_parameter(Name=release, Value="7", Type="String")
    ssm.put_parameter(Name=zones, Value="us-east-1a,us-east-1b", Type="StringList")
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE.format(release=release, zones=zones))
    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack)
    assert code == 0, log
    assert actions["Named"] == actions["Generated"] == "created"
    out = outputs(server.url, stack)
    named, generated = out["NamedName"], out["GeneratedName"]
    assert named == f"/{stack}/release" and out["NamedValue"] == "release-7"
    # CloudFormation's own naming: CFN-<LogicalId>-<12 letters and digits>.
    assert re.fullmatch(r"CFN-Generated-[A-Za-z0-9]{12}", generated) and out["GeneratedType"] == "StringList"
    got = ssm.get_parameter(Name=generated)["Parameter"]
    assert (got["Type"], got["Value"]) == ("StringList", "us-east-1a,us-east-1b")
    meta = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [named]}])["Parameters"][0]
    assert (meta["Description"], meta["Version"]) == ("the release deployed", 1)
    assert ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=named)["TagList"] == \
        [{"Key": "team", "Value": "data"}]

    # The SSM parameter behind `Release` changes: the next deploy reads it anew.
    ssm.put_parameter(Name=release, Value="8", Overwrite=True)
    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack,
                                "--parameter-overrides", "Team=platform", f"Release={release}", f"Zones={zones}")
    assert code == 0, log
    assert actions["Named"] == "updated" and actions["Generated"] == "unchanged"
    got = ssm.get_parameter(Name=named)["Parameter"]
    assert (got["Value"], got["Version"]) == ("release-8", 2)
    assert outputs(server.url, stack)["NamedValue"] == "release-8"
    assert ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=named)["TagList"] == \
        [{"Key": "team", "Value": "platform"}]

    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack, "--delete")
    assert code == 0, log
    assert ssm.get_parameters(Names=[named, generated])["InvalidParameters"] == [named, generated]


def test_secure_string_parameters_are_refused(server, tmp_path, capsys):
    template = tmp_path / "template.yaml"
    template.write_text(SECURE)
    code, _, log = deploy(capsys, server.url, str(template), "--stack-name", "cfg" + uid()[:8])
    assert code != 0 and "'SecureString' is not one of ['String', 'StringList']" in log  # cfn-lint's, first
    # Past the linter (as `aws cloudformation deploy` is), the resource type refuses it itself.
    code, _, log = deploy(capsys, server.url, str(template), "--stack-name", "cfg" + uid()[:8], "--no-lint")
    assert code != 0 and "SSM Parameters of type SecureString cannot be created using CloudFormation" in log


def test_a_missing_ssm_parameter_stops_the_deploy(server, tmp_path, capsys):
    missing = f"/missing-{uid()}/version"
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE.format(release=missing, zones=missing + "-zones"))
    code, _, log = deploy(capsys, server.url, str(template), "--stack-name", "cfg" + uid()[:8])
    assert code != 0 and f"Unable to fetch parameters [{missing}, {missing}-zones] from parameter store" in log


# resolve_ssm_parameters, against the server's Parameter Store

def test_resolve_values_of_each_type(ssm):
    root = f"/resolve-{uid()}"
    ssm.put_parameter(Name=f"{root}/text", Value="hello", Type="String")
    ssm.put_parameter(Name=f"{root}/list", Value="a,b,c", Type="StringList")
    ssm.put_parameter(Name=f"{root}/ami", Value="ami-0123456789abcdef0", Type="String")
    specs = {"Text": {"Type": "AWS::SSM::Parameter::Value<String>"},
             "List": {"Type": "AWS::SSM::Parameter::Value<List<String>>"},
             "Delimited": {"Type": "AWS::SSM::Parameter::Value<CommaDelimitedList>"},
             "Image": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"},
             "ListAsText": {"Type": "AWS::SSM::Parameter::Value<String>"},
             "KeyName": {"Type": "AWS::SSM::Parameter::Name"},
             "Plain": {"Type": "String"}}
    values = {"Text": f"{root}/text", "List": f"{root}/list", "Delimited": f"{root}/list", "Image": f"{root}/ami",
              "ListAsText": f"{root}/list", "KeyName": f"{root}/text", "Plain": "as is"}
    assert resolve_ssm_parameters(specs, values, ssm) == {
        "Text": "hello", "List": ["a", "b", "c"], "Delimited": ["a", "b", "c"], "Image": "ami-0123456789abcdef0",
        "ListAsText": "a,b,c", "KeyName": f"{root}/text"}
    assert resolve_ssm_parameters({"Plain": {"Type": "String"}}, {"Plain": "x"}, None) == {}


def test_resolve_reads_more_than_one_batch_and_selectors(ssm):
    root = f"/many-{uid()}"
    for i in range(12):
        ssm.put_parameter(Name=f"{root}/p{i}", Value=f"v{i}", Type="String")
    ssm.put_parameter(Name=f"{root}/p0", Value="newer", Overwrite=True)
    specs = {f"P{i}": {"Type": "AWS::SSM::Parameter::Value<String>"} for i in range(12)}
    specs["Old"] = {"Type": "AWS::SSM::Parameter::Value<String>"}
    values = {f"P{i}": f"{root}/p{i}" for i in range(12)} | {"Old": f"{root}/p0:1"}
    resolved = resolve_ssm_parameters(specs, values, ssm)
    assert resolved == {"P0": "newer", **{f"P{i}": f"v{i}" for i in range(1, 12)}, "Old": "v0"}


def test_resolve_refusals(ssm):
    secret = f"/secret-{uid()}"
    ssm.put_parameter(Name=secret, Value="s3cr3t", Type="SecureString")
    spec = {"V": {"Type": "AWS::SSM::Parameter::Value<String>"}}
    with pytest.raises(TemplateError) as e:
        resolve_ssm_parameters(spec, {"V": "/cdk-bootstrap/hnb659fds/version-" + uid()}, ssm)
    assert re.fullmatch(r"Unable to fetch parameters \[/cdk-bootstrap/hnb659fds/version-\w+\] from parameter store "
                        r"for this account\.", str(e.value))
    with pytest.raises(TemplateError) as e:
        resolve_ssm_parameters(spec, {"V": secret}, ssm)
    assert str(e.value) == f"Parameters [{secret}] referenced by template have types not supported by CloudFormation."
    with pytest.raises(TemplateError) as e:
        resolve_ssm_parameters({"V": {"Type": "AWS::SSM::Parameter::Value<SecureString>"}}, {"V": secret}, ssm)
    assert str(e.value) == "Template format error: Unrecognized parameter type: SecureString"

