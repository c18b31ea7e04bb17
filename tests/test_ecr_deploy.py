"""`kinesim deploy` of AWS::ECR::Repository against the real server: a generated lower-case name,
Ref and Fn::GetAtt as CloudFormation gives them, settings, policies and tags applied, changed in
place, dropped, a new encryption replacing the repository, and the deletion."""
from __future__ import annotations

import json
import uuid

import pytest

from conftest import client_for
from kinesim.deploy import cli

ACCOUNT = "000000000000"

TEMPLATE = """
Resources:
  Images:
    Type: AWS::ECR::Repository
    Properties:
%(properties)s
Outputs:
  Name: {Value: !Ref Images}
  Arn: {Value: !GetAtt Images.Arn}
  Uri: {Value: !GetAtt Images.RepositoryUri}
"""

FULL = """\
      ImageTagMutability: IMMUTABLE
      ImageScanningConfiguration: {ScanOnPush: "true"}
      LifecyclePolicy:
        LifecyclePolicyText: '{"rules":[{"rulePriority":1,"description":"expire untagged after a year",
          "selection":{"tagStatus":"untagged","countType":"sinceImagePushed","countUnit":"days","countNumber":365},
          "action":{"type":"expire"}}]}'
      RepositoryPolicyText:
        Version: "2012-10-17"
        Statement:
          - Sid: LambdaPull
            Effect: Allow
            Principal: {Service: lambda.amazonaws.com}
            Action: [ecr:BatchGetImage, ecr:GetDownloadUrlForLayer]
      EmptyOnDelete: true
      Tags:
        - {Key: team, Value: data}
        - {Key: stage, Value: dev}
"""


def deploy(capsys, url: str, template, stack: str, *extra: str) -> tuple[int, str, str]:
    code = cli.main([str(template), "--stack-name", stack, *extra, "--endpoint-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def outputs_of(out: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in out.split("Outputs:\n")[1].splitlines() if line.startswith("  "))


@pytest.fixture
def stack():
    return "Ecr" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def ecr(server):
    return client_for(server.url, "ecr")


def test_repository_made_changed_replaced_and_deleted(server, ecr, stack, tmp_path, capsys):
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE % {"properties": FULL})
    code, out, err = deploy(capsys, server.url, template, stack)
    assert code == 0, err
    outputs = outputs_of(out)
    name = outputs["Name"]
    # CloudFormation's generated name, in lower case: ECR refuses capitals.
    assert name.startswith(f"{stack.lower()}-images-") and name == name.lower()
    assert outputs["Arn"] == f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/{name}"
    assert outputs["Uri"] == f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{name}"
    described = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    assert described["imageTagMutability"] == "IMMUTABLE"
    assert described["imageScanningConfiguration"] == {"scanOnPush": True}
    assert json.loads(ecr.get_lifecycle_policy(repositoryName=name)["lifecyclePolicyText"])["rules"][0][
        "rulePriority"] == 1
    assert json.loads(ecr.get_repository_policy(repositoryName=name)["policyText"])["Statement"][0]["Sid"] == \
        "LambdaPull"
    assert ecr.list_tags_for_resource(resourceArn=outputs["Arn"])["tags"] == [
        {"Key": "team", "Value": "data"}, {"Key": "stage", "Value": "dev"}]

    # Changed in place: mutability, scanning, a tag; the policies dropped.
    template.write_text(TEMPLATE % {"properties": """\
      ImageTagMutability: MUTABLE
      Tags:
        - {Key: team, Value: analytics}
"""})
    code, out, err = deploy(capsys, server.url, template, stack)
    assert code == 0, err
    assert outputs_of(out)["Name"] == name
    described = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    assert described["imageTagMutability"] == "MUTABLE"
    assert described["imageScanningConfiguration"] == {"scanOnPush": False}
    with pytest.raises(ecr.exceptions.LifecyclePolicyNotFoundException):
        ecr.get_lifecycle_policy(repositoryName=name)
    with pytest.raises(ecr.exceptions.RepositoryPolicyNotFoundException):
        ecr.get_repository_policy(repositoryName=name)
    assert ecr.list_tags_for_resource(resourceArn=outputs["Arn"])["tags"] == [{"Key": "team", "Value": "analytics"}]

    # A new encryption configuration is create-only: the repository is replaced under a new name.
    template.write_text(TEMPLATE % {"properties": "      EncryptionConfiguration: {EncryptionType: KMS}\n"})
    code, out, err = deploy(capsys, server.url, template, stack)
    assert code == 0, err
    replacement = outputs_of(out)["Name"]
    assert replacement != name
    assert ecr.describe_repositories(repositoryNames=[replacement])["repositories"][0]["encryptionConfiguration"] == \
        {"encryptionType": "KMS"}
    with pytest.raises(ecr.exceptions.RepositoryNotFoundException):
        ecr.describe_repositories(repositoryNames=[name])

    code, out, err = deploy(capsys, server.url, template, stack, "--delete")
    assert code == 0, err
    with pytest.raises(ecr.exceptions.RepositoryNotFoundException):
        ecr.describe_repositories(repositoryNames=[replacement])


def test_invalid_repository_name_is_ecrs_answer(server, ecr, stack, tmp_path, capsys):
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE % {"properties": "      RepositoryName: Not-Lower-Case\n"})
    code, out, err = deploy(capsys, server.url, template, stack, "--no-lint")
    assert code == 1
    assert "Invalid parameter at 'repositoryName' failed to satisfy constraint" in err
    with pytest.raises(ecr.exceptions.RepositoryNotFoundException):
        ecr.describe_repositories(repositoryNames=["not-lower-case"])
    deploy(capsys, server.url, template, stack, "--delete")
