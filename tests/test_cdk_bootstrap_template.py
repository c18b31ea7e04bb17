"""CDK's bootstrap template (tests/templates/cdk-bootstrap.yaml, from the CDK CLI) deployed with
`kinesim deploy` against the real server, with the parameters `cdk bootstrap` passes on a fresh
environment: the staging bucket with its versioning, encryption, public access block, lifecycle
rules and SSL-only policy, the container assets repository with its lifecycle and repository
policies, the version parameter in Parameter Store, the IAM roles and their policies (readable through IAM, gone
with the stack). Then an update (trust,
permissions boundary, no public access block), a redeploy that changes nothing, the deletion (the
bucket retained, as its DeletionPolicy says), and a CDK app's template (CDKMetadata, the
SSM-typed BootstrapVersion parameter and the CheckBootstrapVersion rule) against the bootstrapped
environment."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from conftest import client_for
from kinesim.deploy import cli

ACCOUNT = "000000000000"
REGION = "us-east-1"
TEMPLATE = Path(__file__).parent / "templates" / "cdk-bootstrap.yaml"
# What `cdk bootstrap` passes for a new bootstrap stack (aws-cdk's Bootstrapper: no customer key means
# the AWS managed key, no trusted accounts, the public access block on).
CLI_PARAMETERS = ["FileAssetsBucketKmsKeyId=AWS_MANAGED_KEY", "TrustedAccounts=", "TrustedAccountsForLookup=",
                  "CloudFormationExecutionPolicies=", "PublicAccessBlockConfiguration=true"]


def deploy(capsys, url: str, template: Path, stack: str, *extra: str) -> tuple[int, str, str]:
    code = cli.main([str(template), "--stack-name", stack, "--no-lint", *extra, "--endpoint-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def outputs_of(out: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in out.split("Outputs:\n")[1].splitlines() if line.startswith("  "))


@pytest.fixture
def qualifier():
    # The qualifier names every bootstrap resource: one per test keeps tests on the shared server apart.
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def clients(server):
    return {"s3": client_for(server.url, "s3", s3={"addressing_style": "path"}), "ecr": client_for(server.url, "ecr"),
            "ssm": client_for(server.url, "ssm"), "iam": client_for(server.url, "iam")}


def test_bootstrap_as_cdk_bootstrap_deploys_it_then_deleted(server, clients, qualifier, capsys):
    s3, ecr, ssm = clients["s3"], clients["ecr"], clients["ssm"]
    stack = f"CDKToolkit-{qualifier}"
    code, out, err = deploy(capsys, server.url, TEMPLATE, stack, "--parameter-overrides", *CLI_PARAMETERS,
                            f"Qualifier={qualifier}")
    assert code == 0, err
    bucket = f"cdk-{qualifier}-assets-{ACCOUNT}-{REGION}"
    repository = f"cdk-{qualifier}-container-assets-{ACCOUNT}-{REGION}"
    outputs = outputs_of(out)
    assert outputs["BucketName"] == bucket
    assert outputs["BucketDomainName"] == f"{bucket}.s3.{REGION}.amazonaws.com"
    assert outputs["ImageRepositoryName"] == repository
    assert outputs["BootstrapVersion"] == "33"
    assert outputs["FileAssetKeyArn"] == "AWS_MANAGED_KEY"  # the Fn::If's other branch: no key was made

    # The staging bucket, configured as the template says.
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    # KMSMasterKeyID is `Ref: AWS::NoValue` with the AWS managed key: the property is left out.
    assert rules[0]["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms"}
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    lifecycle = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]}
    assert lifecycle["CleanupOldVersions"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert lifecycle["AbortIncompleteMultipartUploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    assert policy["Statement"][0]["Sid"] == "AllowSSLRequestsOnly"
    assert policy["Statement"][0]["Resource"] == [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]

    # The container assets repository (no image can be pushed to it: kinesim has no registry).
    described = ecr.describe_repositories(repositoryNames=[repository])["repositories"][0]
    assert described["imageTagMutability"] == "IMMUTABLE"
    assert described["repositoryUri"] == f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{repository}"
    lifecycle_policy = json.loads(ecr.get_lifecycle_policy(repositoryName=repository)["lifecyclePolicyText"])
    assert lifecycle_policy["rules"][0]["selection"]["tagStatus"] == "untagged"
    repository_policy = json.loads(ecr.get_repository_policy(repositoryName=repository)["policyText"])
    assert [s["Sid"] for s in repository_policy["Statement"]] == ["LambdaECRImageRetrievalPolicy",
                                                                  "EmrServerlessImageRetrievalPolicy"]

    # The version parameter that CDK apps' templates read (their BootstrapVersion parameter).
    assert ssm.get_parameter(Name=f"/cdk-bootstrap/{qualifier}/version")["Parameter"]["Value"] == "33"

    # The roles, with their inline policies, their default policies and the execution role's managed policy.
    iam = clients["iam"]
    exec_role = f"cdk-{qualifier}-cfn-exec-role-{ACCOUNT}-{REGION}"
    assert iam.get_role(RoleName=exec_role)["Role"]["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/{exec_role}"
    assert [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=exec_role)["AttachedPolicies"]] == [
        "arn:aws:iam::aws:policy/AdministratorAccess"]
    publishing = f"cdk-{qualifier}-file-publishing-role-{ACCOUNT}-{REGION}"
    assert iam.list_role_policies(RoleName=publishing)["PolicyNames"] == [
        f"cdk-{qualifier}-file-publishing-role-default-policy-{ACCOUNT}-{REGION}"]

    # Deleted: the bucket stays (DeletionPolicy: Retain), the rest goes.
    code, out, err = deploy(capsys, server.url, TEMPLATE, stack, "--delete")
    assert code == 0, err
    s3.head_bucket(Bucket=bucket)
    with pytest.raises(ecr.exceptions.RepositoryNotFoundException):
        ecr.describe_repositories(repositoryNames=[repository])
    with pytest.raises(ssm.exceptions.ParameterNotFound):
        ssm.get_parameter(Name=f"/cdk-bootstrap/{qualifier}/version")
    for role in (exec_role, publishing):
        with pytest.raises(iam.exceptions.NoSuchEntityException):
            iam.get_role(RoleName=role)


# The second deploy sends UsePreviousValue for every parameter of the stack not given again (as `aws
# cloudformation deploy`, `sam deploy` and `cdk bootstrap` do); CloudFormation takes the previous value of
# any parameter the previous template declared, defaults included.
def test_bootstrap_deployed_again_and_updated(server, clients, qualifier, capsys):
    s3, ecr = clients["s3"], clients["ecr"]
    stack = f"CDKToolkit-{qualifier}"
    bucket = f"cdk-{qualifier}-assets-{ACCOUNT}-{REGION}"
    repository = f"cdk-{qualifier}-container-assets-{ACCOUNT}-{REGION}"
    code, out, err = deploy(capsys, server.url, TEMPLATE, stack, "--parameter-overrides", *CLI_PARAMETERS,
                            f"Qualifier={qualifier}")
    assert code == 0, err
    created = ecr.describe_repositories(repositoryNames=[repository])["repositories"][0]["createdAt"]

    # Deployed again unchanged, nothing is replaced.
    code, out, err = deploy(capsys, server.url, TEMPLATE, stack, "--parameter-overrides", *CLI_PARAMETERS,
                            f"Qualifier={qualifier}")
    assert code == 0, err
    assert ecr.describe_repositories(repositoryNames=[repository])["repositories"][0]["createdAt"] == created

    # `cdk bootstrap --trust ... --cloudformation-execution-policies ... --public-access-block-configuration false
    # --example-permissions-boundary`: the Fn::If branches with lists, the managed policy, the block removed.
    code, out, err = deploy(capsys, server.url, TEMPLATE, stack, "--parameter-overrides",
                            "FileAssetsBucketKmsKeyId=AWS_MANAGED_KEY", "TrustedAccounts=111111111111,222222222222",
                            "TrustedAccountsForLookup=333333333333",
                            "CloudFormationExecutionPolicies=arn:aws:iam::aws:policy/AdministratorAccess",
                            "PublicAccessBlockConfiguration=false", "UseExamplePermissionsBoundary=true",
                            f"InputPermissionsBoundary=cdk-{qualifier}-permissions-boundary",
                            "ApplyPermissionsBoundaryToAllRoles=true", f"Qualifier={qualifier}")
    assert code == 0, err
    with pytest.raises(s3.exceptions.ClientError) as caught:
        s3.get_public_access_block(Bucket=bucket)
    assert caught.value.response["Error"]["Code"] == "NoSuchPublicAccessBlockConfiguration"
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert ecr.describe_repositories(repositoryNames=[repository])["repositories"][0]["createdAt"] == created
    # The permissions boundary named is set on the execution role, and the example one is a managed policy.
    iam = clients["iam"]
    named = f"arn:aws:iam::{ACCOUNT}:policy/cdk-{qualifier}-permissions-boundary"
    exec_role = iam.get_role(RoleName=f"cdk-{qualifier}-cfn-exec-role-{ACCOUNT}-{REGION}")["Role"]
    assert exec_role["PermissionsBoundary"] == {"PermissionsBoundaryType": "Policy", "PermissionsBoundaryArn": named}
    boundary = f"{named}-{ACCOUNT}-{REGION}"
    assert iam.get_policy(PolicyArn=boundary)["Policy"]["Description"] == "Bootstrap Permission Boundary"

    assert deploy(capsys, server.url, TEMPLATE, stack, "--delete")[0] == 0
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_policy(PolicyArn=boundary)


def test_bootstrap_with_a_new_customer_key_is_refused_before_anything_is_made(server, clients, qualifier, capsys):
    # The template's defaults (FileAssetsBucketKmsKeyId empty, as `cdk bootstrap --bootstrap-customer-key`)
    # make a KMS key and alias: kinesim does not emulate KMS, and says so before creating anything.
    stack = f"CDKToolkit-{qualifier}"
    code, out, err = deploy(capsys, server.url, TEMPLATE, stack, "--parameter-overrides", f"Qualifier={qualifier}")
    assert code == 1
    assert "FileAssetsBucketEncryptionKey" in err and "AWS::KMS::Key" in err
    assert "FileAssetsBucketEncryptionKeyAlias" in err and "Key Management Service" in err
    with pytest.raises(clients["s3"].exceptions.ClientError):
        clients["s3"].head_bucket(Bucket=f"cdk-{qualifier}-assets-{ACCOUNT}-{REGION}")


# What `cdk synth` makes of an app with one bucket (aws-cdk-lib's DefaultStackSynthesizer):
# CDKMetadata under its condition, the bootstrap version read from Parameter Store, and the rule.
APP = """
Resources:
  Assets:
    Type: AWS::S3::Bucket
    UpdateReplacePolicy: Delete
    DeletionPolicy: Delete
    Metadata:
      aws:cdk:path: AppStack/Assets/Resource
  CDKMetadata:
    Type: AWS::CDK::Metadata
    Properties:
      Analytics: v2:deflate64:H4sIAAAAAAAA/zPSMzTTM1BMLC/WTU7J1s3JTNKrDi5JTM7WcU7LC0otzi8tSk4FsZ3z81I  # (cut short)
    Metadata:
      aws:cdk:path: AppStack/CDKMetadata/Default
    Condition: CDKMetadataAvailable
Conditions:
  CDKMetadataAvailable:
    Fn::Or:
      - Fn::Equals: [{Ref: AWS::Region}, us-east-1]
      - Fn::Equals: [{Ref: AWS::Region}, eu-west-1]
Parameters:
  BootstrapVersion:
    Type: AWS::SSM::Parameter::Value<String>
    Default: /cdk-bootstrap/%(qualifier)s/version
    Description: Version of the CDK Bootstrap resources in this environment, automatically retrieved from SSM
      Parameter Store. [cdk:skip]
Outputs:
  AssetsBucket:
    Value: {Ref: Assets}
  SeenBootstrapVersion:
    Value: {Ref: BootstrapVersion}
Rules:
  CheckBootstrapVersion:
    Assertions:
      - Assert:
          Fn::Not:
            - Fn::Contains:
                - ["1", "2", "3", "4", "5"]
                - Ref: BootstrapVersion
        AssertDescription: >-
          CDK bootstrap stack version 6 required. Please run 'cdk bootstrap' with a recent version of the CDK CLI.
"""


def test_a_cdk_apps_template_deploys_against_the_bootstrapped_environment(server, clients, qualifier, tmp_path, capsys):
    ssm = clients["ssm"]
    app = tmp_path / "app.yaml"
    app.write_text(APP % {"qualifier": qualifier})
    stack = f"App-{qualifier}"
    # Not bootstrapped: the parameter cannot be read, and nothing is made.
    code, out, err = deploy(capsys, server.url, app, stack)
    assert code == 1
    assert f"/cdk-bootstrap/{qualifier}/version" in err

    # Bootstrapped long ago (version 5): the rule refuses the deploy with its description.
    ssm.put_parameter(Name=f"/cdk-bootstrap/{qualifier}/version", Value="5", Type="String")
    code, out, err = deploy(capsys, server.url, app, stack)
    assert code == 1
    assert "CDK bootstrap stack version 6 required. Please run 'cdk bootstrap' with a recent version of the CDK " \
           "CLI." in err

    # Bootstrapped with this template (which makes the parameter: the old one goes first, as CloudFormation
    # would refuse to make a parameter that exists): the app deploys, CDKMetadata accepted.
    ssm.delete_parameter(Name=f"/cdk-bootstrap/{qualifier}/version")
    code, out, err = deploy(capsys, server.url, TEMPLATE, f"CDKToolkit-{qualifier}", "--parameter-overrides",
                            *CLI_PARAMETERS, f"Qualifier={qualifier}")
    assert code == 0, err
    code, out, err = deploy(capsys, server.url, app, stack)
    assert code == 0, err
    outputs = outputs_of(out)
    assert outputs["SeenBootstrapVersion"] == "33"
    clients["s3"].head_bucket(Bucket=outputs["AssetsBucket"])
    assert "CDKMetadata" in out
    for name in (stack, f"CDKToolkit-{qualifier}"):
        assert deploy(capsys, server.url, app, name, "--delete")[0] == 0
