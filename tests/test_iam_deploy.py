"""IAM's users, groups, access keys, group additions and instance profiles in templates, deployed
through CloudFormation's API (boto3's create_stack / update_stack / delete_stack, as users call
it): what IAM answers for them afterwards, an update made in place (paths, policies, tags) and by
replacement (an access key's Serial), and nothing left once the stack is deleted."""
from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from conftest import client_for

ACCOUNT = "000000000000"
WAIT = {"Delay": 0.2, "MaxAttempts": 300}
READ_ONLY = "arn:aws:iam::aws:policy/AmazonKinesisReadOnlyAccess"
BOUNDARY = "arn:aws:iam::aws:policy/PowerUserAccess"

TEMPLATE = """
Parameters:
  Path: {Type: String, Default: /app/}
  Action: {Type: String, Default: s3:GetObject}
  Serial: {Type: Number, Default: 1}
  KeyStatus: {Type: String, Default: Active}
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - {Effect: Allow, Principal: {Service: ec2.amazonaws.com}, Action: sts:AssumeRole}
  Profile:
    Type: AWS::IAM::InstanceProfile
    Properties:
      Path: /fleet/
      Roles: [!Ref Role]
  Group:
    Type: AWS::IAM::Group
    Properties:
      Path: !Ref Path
      ManagedPolicyArns: [arn:aws:iam::aws:policy/AmazonKinesisReadOnlyAccess]
      Policies:
        - PolicyName: group-inline
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - {Effect: Allow, Action: !Ref Action, Resource: "*"}
  User:
    Type: AWS::IAM::User
    Properties:
      Path: !Ref Path
      Groups: [!Ref Group]
      ManagedPolicyArns: [arn:aws:iam::aws:policy/AmazonKinesisReadOnlyAccess]
      PermissionsBoundary: arn:aws:iam::aws:policy/PowerUserAccess
      Policies:
        - PolicyName: user-inline
          PolicyDocument: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: !Ref Action, Resource: "*"}]}
      Tags:
        - {Key: team, Value: !Ref Action}
  Other:
    Type: AWS::IAM::User
  Addition:
    Type: AWS::IAM::UserToGroupAddition
    Properties:
      GroupName: !Ref Group
      Users: [!Ref Other]
  Key:
    Type: AWS::IAM::AccessKey
    Properties:
      UserName: !Ref User
      Serial: !Ref Serial
      Status: !Ref KeyStatus
Outputs:
  UserName: {Value: !Ref User}
  UserArn: {Value: !GetAtt User.Arn}
  OtherName: {Value: !Ref Other}
  GroupName: {Value: !Ref Group}
  GroupArn: {Value: !GetAtt Group.Arn}
  ProfileName: {Value: !Ref Profile}
  ProfileArn: {Value: !GetAtt Profile.Arn}
  RoleName: {Value: !Ref Role}
  KeyId: {Value: !Ref Key}
  Secret: {Value: !GetAtt Key.SecretAccessKey}
"""


@pytest.fixture(scope="module")
def cfn(server):
    return client_for(server.url, "cloudformation")


@pytest.fixture(scope="module")
def iam(server):
    return client_for(server.url, "iam")


def outputs(cfn, stack: str) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in cfn.describe_stacks(StackName=stack)["Stacks"][0]["Outputs"]}


def gone(call, **kwargs) -> bool:
    try:
        call(**kwargs)
    except ClientError as err:
        return err.response["Error"]["Code"] == "NoSuchEntity"
    return False


def test_users_groups_keys_and_instance_profiles_of_a_stack(server, cfn, iam):
    stack = "iam" + uuid.uuid4().hex[:10]
    with pytest.raises(ClientError) as e:
        cfn.create_stack(StackName=stack, TemplateBody=TEMPLATE)
    assert e.value.response["Error"]["Code"] == "InsufficientCapabilitiesException"
    cfn.create_stack(StackName=stack, TemplateBody=TEMPLATE, Capabilities=["CAPABILITY_IAM"])
    cfn.get_waiter("stack_create_complete").wait(StackName=stack, WaiterConfig=WAIT)
    out = outputs(cfn, stack)
    user, other, group, profile = out["UserName"], out["OtherName"], out["GroupName"], out["ProfileName"]
    assert user.startswith(f"{stack}-User-") and other.startswith(f"{stack}-Other-")

    got = iam.get_user(UserName=user)["User"]
    assert got["Arn"] == out["UserArn"] == f"arn:aws:iam::{ACCOUNT}:user/app/{user}"
    assert got["Tags"] == [{"Key": "team", "Value": "s3:GetObject"}]
    assert got["PermissionsBoundary"]["PermissionsBoundaryArn"] == BOUNDARY
    assert [g["GroupName"] for g in iam.list_groups_for_user(UserName=user)["Groups"]] == [group]
    assert iam.get_user_policy(UserName=user, PolicyName="user-inline")["PolicyDocument"]["Statement"][0]["Action"] \
        == "s3:GetObject"
    assert [p["PolicyArn"] for p in iam.list_attached_user_policies(UserName=user)["AttachedPolicies"]] == [READ_ONLY]

    members = iam.get_group(GroupName=group)
    assert members["Group"]["Arn"] == out["GroupArn"] == f"arn:aws:iam::{ACCOUNT}:group/app/{group}"
    assert sorted(u["UserName"] for u in members["Users"]) == sorted([user, other])
    assert iam.list_group_policies(GroupName=group)["PolicyNames"] == ["group-inline"]
    assert [p["PolicyArn"] for p in iam.list_attached_group_policies(GroupName=group)["AttachedPolicies"]] == \
        [READ_ONLY]

    got_profile = iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
    assert got_profile["Arn"] == out["ProfileArn"] == f"arn:aws:iam::{ACCOUNT}:instance-profile/fleet/{profile}"
    assert [r["RoleName"] for r in got_profile["Roles"]] == [out["RoleName"]]

    keys = iam.list_access_keys(UserName=user)["AccessKeyMetadata"]
    assert [(k["AccessKeyId"], k["Status"]) for k in keys] == [(out["KeyId"], "Active")]
    # The stack's key is the user's (GetAtt SecretAccessKey signs as it).
    sts = boto3.client("sts", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id=out["KeyId"], aws_secret_access_key=out["Secret"])
    assert sts.get_caller_identity()["Arn"] == out["UserArn"]

    # In place: paths (new ARNs), documents and tags; by replacement: the key (a new Serial).
    cfn.update_stack(StackName=stack, UsePreviousTemplate=True, Capabilities=["CAPABILITY_IAM"],
                     Parameters=[{"ParameterKey": "Path", "ParameterValue": "/ops/"},
                                 {"ParameterKey": "Action", "ParameterValue": "s3:PutObject"},
                                 {"ParameterKey": "Serial", "ParameterValue": "2"},
                                 {"ParameterKey": "KeyStatus", "ParameterValue": "Inactive"}])
    cfn.get_waiter("stack_update_complete").wait(StackName=stack, WaiterConfig=WAIT)
    updated = outputs(cfn, stack)
    assert (updated["UserName"], updated["GroupName"]) == (user, group)
    assert updated["UserArn"] == iam.get_user(UserName=user)["User"]["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/ops/{user}"
    assert updated["GroupArn"] == f"arn:aws:iam::{ACCOUNT}:group/ops/{group}"
    assert iam.get_group_policy(GroupName=group, PolicyName="group-inline")["PolicyDocument"]["Statement"][0][
        "Action"] == "s3:PutObject"
    assert iam.list_user_tags(UserName=user)["Tags"] == [{"Key": "team", "Value": "s3:PutObject"}]
    assert updated["KeyId"] != out["KeyId"]
    keys = iam.list_access_keys(UserName=user)["AccessKeyMetadata"]
    assert [(k["AccessKeyId"], k["Status"]) for k in keys] == [(updated["KeyId"], "Inactive")]

    cfn.delete_stack(StackName=stack)
    cfn.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig=WAIT)
    for name in (user, other):
        assert gone(iam.get_user, UserName=name)
    assert gone(iam.get_group, GroupName=group)
    assert gone(iam.get_instance_profile, InstanceProfileName=profile)
    assert gone(iam.get_role, RoleName=out["RoleName"])
    assert gone(iam.list_access_keys, UserName=user)
