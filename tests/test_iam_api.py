"""IAM through boto3 and the AWS CLI (issue 31): roles, inline and managed policies, AWS's managed
policies, users, access keys and groups, stored and answered as AWS does (not enforced); AWS's
refusals with their codes, messages and statuses (NoSuchEntity's sentences as LocalStack's
recordings of AWS have them); the first steps of AWS's "Using Lambda with Kinesis" tutorial with
the CLI; and the roles and policies a stack makes, readable until the stack is deleted."""
from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for
from tool_setup import aws_cli, run_tool, tool_env

ACCOUNT = "000000000000"
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}
DOC = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "kinesis:GetRecords", "Resource": "*"}]}
KINESIS_EXECUTION = "arn:aws:iam::aws:policy/service-role/AWSLambdaKinesisExecutionRole"


@pytest.fixture(scope="module")
def iam(server):
    return client_for(server.url, "iam")


@pytest.fixture(scope="module")
def unchecked_iam(server):
    """A client that sends what botocore would refuse itself: the server's own checks answer."""
    return client_for(server.url, "iam", parameter_validation=False)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def error(e: pytest.ExceptionInfo) -> tuple[str, str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


def make_role(iam, **kwargs) -> str:
    role = name("role")
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(TRUST), **kwargs)
    return role


def test_create_get_and_delete_a_role(iam):
    role = name("role")
    made = iam.create_role(RoleName=role, Path="/app/", AssumeRolePolicyDocument=json.dumps(TRUST),
                           Description="for tests", Tags=[{"Key": "team", "Value": "a"}])["Role"]
    assert made["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/app/{role}" and made["Path"] == "/app/"
    assert made["RoleId"].startswith("AROA") and len(made["RoleId"]) == 21
    assert made["AssumeRolePolicyDocument"] == TRUST  # botocore decodes IAM's URL-encoded documents
    got = iam.get_role(RoleName=role)["Role"]
    assert (got["RoleId"], got["CreateDate"], got["Description"], got["MaxSessionDuration"]) == \
        (made["RoleId"], made["CreateDate"], "for tests", 3600)
    assert got["RoleLastUsed"] == {} and got["Tags"] == [{"Key": "team", "Value": "a"}]
    # names are unique whatever their case, and found so
    assert iam.get_role(RoleName=role.upper())["Role"]["RoleName"] == role
    with pytest.raises(ClientError) as e:
        iam.create_role(RoleName=role.upper(), AssumeRolePolicyDocument=json.dumps(TRUST))
    assert error(e) == ("EntityAlreadyExists", f"Role with name {role.upper()} already exists.", 409)
    iam.delete_role(RoleName=role)
    with pytest.raises(ClientError) as e:
        iam.get_role(RoleName=role)
    assert error(e) == ("NoSuchEntity", f"The role with name {role} cannot be found.", 404)
    with pytest.raises(ClientError) as e:
        iam.delete_role(RoleName=role)
    assert error(e)[0] == "NoSuchEntity"


def test_role_updates_and_tags(iam, unchecked_iam):
    role = make_role(iam)
    iam.update_role(RoleName=role, Description="new", MaxSessionDuration=7200)
    trust = dict(TRUST, Statement=[dict(TRUST["Statement"][0], Principal={"Service": "kinesis.amazonaws.com"})])
    iam.update_assume_role_policy(RoleName=role, PolicyDocument=json.dumps(trust))
    got = iam.get_role(RoleName=role)["Role"]
    assert (got["Description"], got["MaxSessionDuration"], got["AssumeRolePolicyDocument"]) == ("new", 7200, trust)
    assert iam.update_role_description(RoleName=role, Description="again")["Role"]["Description"] == "again"
    iam.tag_role(RoleName=role, Tags=[{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}])
    iam.tag_role(RoleName=role, Tags=[{"Key": "A", "Value": "3"}])  # keys are case-insensitive
    iam.untag_role(RoleName=role, TagKeys=["b"])
    assert iam.list_role_tags(RoleName=role)["Tags"] == [{"Key": "A", "Value": "3"}]
    with pytest.raises(ClientError) as e:
        unchecked_iam.update_role(RoleName=role, MaxSessionDuration=60)
    code, message, status = error(e)
    assert (code, status) == ("ValidationError", 400) and "maxSessionDuration" in message
    with pytest.raises(ClientError) as e:
        iam.update_assume_role_policy(RoleName=role, PolicyDocument="{not json")
    assert error(e) == ("MalformedPolicyDocument", "This policy contains invalid Json", 400)


def test_list_roles_pages_with_marker_and_path_prefix(iam):
    path = f"/{name('p')}/"
    roles = sorted(make_role(iam, Path=path) for _ in range(5))
    seen, marker = [], None
    while True:
        answer = iam.list_roles(PathPrefix=path, MaxItems=2, **({"Marker": marker} if marker else {}))
        seen += [r["RoleName"] for r in answer["Roles"]]
        assert "Tags" not in answer["Roles"][0] and "RoleLastUsed" not in answer["Roles"][0]
        if not answer["IsTruncated"]:
            break
        marker = answer["Marker"]
    assert seen == roles
    paginated = [r["RoleName"] for page in iam.get_paginator("list_roles").paginate(PathPrefix=path)
                 for r in page["Roles"]]
    assert paginated == roles


def test_inline_role_policies(iam):
    role = make_role(iam)
    iam.put_role_policy(RoleName=role, PolicyName="read", PolicyDocument=json.dumps(DOC))
    got = iam.get_role_policy(RoleName=role, PolicyName="read")
    assert (got["RoleName"], got["PolicyName"], got["PolicyDocument"]) == (role, "read", DOC)
    assert iam.list_role_policies(RoleName=role)["PolicyNames"] == ["read"]
    with pytest.raises(ClientError) as e:
        iam.delete_role(RoleName=role)
    assert error(e) == ("DeleteConflict", "Cannot delete entity, must delete policies first.", 409)
    with pytest.raises(ClientError) as e:
        iam.get_role_policy(RoleName=role, PolicyName="other")
    assert error(e) == ("NoSuchEntity", "The role policy with name other cannot be found.", 404)
    for bad, message in (("[]", "This policy contains invalid Json"), ('{"Version": "2012-10-17"}',
                                                                        "Syntax errors in policy.")):
        with pytest.raises(ClientError) as e:
            iam.put_role_policy(RoleName=role, PolicyName="bad", PolicyDocument=bad)
        assert error(e) == ("MalformedPolicyDocument", message, 400)
    iam.delete_role_policy(RoleName=role, PolicyName="read")
    assert iam.list_role_policies(RoleName=role)["PolicyNames"] == []
    iam.delete_role(RoleName=role)


def test_aws_managed_policies_are_there(iam):
    policy = iam.get_policy(PolicyArn=KINESIS_EXECUTION)["Policy"]
    assert (policy["PolicyName"], policy["Path"], policy["PolicyId"][:4]) == \
        ("AWSLambdaKinesisExecutionRole", "/service-role/", "ANPA")
    version = iam.get_policy_version(PolicyArn=KINESIS_EXECUTION, VersionId=policy["DefaultVersionId"])["PolicyVersion"]
    assert version["IsDefaultVersion"] and "kinesis:GetRecords" in version["Document"]["Statement"][0]["Action"]
    for arn in ("arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
                "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
                "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole",
                "arn:aws:iam::aws:policy/service-role/AWSLambdaRole", "arn:aws:iam::aws:policy/AWSLambdaExecute",
                "arn:aws:iam::aws:policy/AmazonS3FullAccess", "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess",
                "arn:aws:iam::aws:policy/AmazonKinesisFullAccess", "arn:aws:iam::aws:policy/AmazonSQSFullAccess",
                "arn:aws:iam::aws:policy/AmazonSNSFullAccess", "arn:aws:iam::aws:policy/CloudWatchLogsFullAccess",
                "arn:aws:iam::aws:policy/AdministratorAccess"):
        assert iam.get_policy(PolicyArn=arn)["Policy"]["Arn"] == arn
    listed = iam.list_policies(Scope="AWS", PathPrefix="/service-role/", MaxItems=1000)["Policies"]
    assert KINESIS_EXECUTION in {p["Arn"] for p in listed} and all(p["Path"] == "/service-role/" for p in listed)
    with pytest.raises(ClientError) as e:
        iam.delete_policy(PolicyArn=KINESIS_EXECUTION)
    assert error(e)[0::2] == ("AccessDenied", 403)


def test_managed_policies_and_their_versions(iam):
    policy_name = name("policy")
    policy = iam.create_policy(PolicyName=policy_name, PolicyDocument=json.dumps(DOC), Description="d")["Policy"]
    arn = policy["Arn"]
    assert arn == f"arn:aws:iam::{ACCOUNT}:policy/{policy_name}" and policy["PolicyId"].startswith("ANPA")
    assert (policy["DefaultVersionId"], policy["AttachmentCount"], policy["IsAttachable"]) == ("v1", 0, True)
    assert iam.get_policy(PolicyArn=arn)["Policy"]["Description"] == "d"
    with pytest.raises(ClientError) as e:
        iam.create_policy(PolicyName=policy_name, PolicyDocument=json.dumps(DOC))
    assert error(e) == ("EntityAlreadyExists",
                        f"A policy called {policy_name} already exists. Duplicate names are not allowed.", 409)
    local = [p["Arn"] for p in iam.list_policies(Scope="Local", MaxItems=1000)["Policies"]]
    assert arn in local and not any(":aws:policy" in a for a in local)
    doc2 = dict(DOC, Statement=[dict(DOC["Statement"][0], Action="kinesis:*")])
    assert iam.create_policy_version(PolicyArn=arn, PolicyDocument=json.dumps(doc2),
                                     SetAsDefault=True)["PolicyVersion"]["VersionId"] == "v2"
    assert iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"] == "v2"
    assert iam.get_policy_version(PolicyArn=arn, VersionId="v2")["PolicyVersion"]["Document"] == doc2
    for _ in range(3):
        iam.create_policy_version(PolicyArn=arn, PolicyDocument=json.dumps(DOC))
    with pytest.raises(ClientError) as e:
        iam.create_policy_version(PolicyArn=arn, PolicyDocument=json.dumps(DOC))
    assert error(e) == ("LimitExceeded", "A managed policy can have up to 5 versions. Before you create a new "
                                         "version, you must delete an existing version.", 409)
    versions = iam.list_policy_versions(PolicyArn=arn)["Versions"]
    assert [v["VersionId"] for v in versions] == ["v5", "v4", "v3", "v2", "v1"]
    assert [v["IsDefaultVersion"] for v in versions] == [False, False, False, True, False]
    with pytest.raises(ClientError) as e:
        iam.delete_policy_version(PolicyArn=arn, VersionId="v2")
    assert error(e) == ("DeleteConflict", "Cannot delete the default version of a policy.", 409)
    with pytest.raises(ClientError) as e:
        iam.delete_policy(PolicyArn=arn)
    assert error(e)[0] == "DeleteConflict"
    iam.set_default_policy_version(PolicyArn=arn, VersionId="v5")
    for version in ("v1", "v2", "v3", "v4"):
        iam.delete_policy_version(PolicyArn=arn, VersionId=version)
    with pytest.raises(ClientError) as e:
        iam.get_policy_version(PolicyArn=arn, VersionId="v1")
    assert error(e) == ("NoSuchEntity", f"Policy {arn} version v1 does not exist or is not attachable.", 404)
    iam.delete_policy(PolicyArn=arn)
    with pytest.raises(ClientError) as e:
        iam.get_policy(PolicyArn=arn)
    assert error(e) == ("NoSuchEntity", f"Policy {arn} was not found.", 404)


def test_attach_and_detach_role_policies(iam):
    role = make_role(iam)
    arn = iam.create_policy(PolicyName=name("policy"), PolicyDocument=json.dumps(DOC))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=role, PolicyArn=KINESIS_EXECUTION)
    iam.attach_role_policy(RoleName=role, PolicyArn=arn)
    iam.attach_role_policy(RoleName=role, PolicyArn=arn)  # again: nothing changes
    attached = iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]
    assert sorted(p["PolicyArn"] for p in attached) == sorted([KINESIS_EXECUTION, arn])
    assert [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role, PathPrefix="/service-role/")[
        "AttachedPolicies"]] == [KINESIS_EXECUTION]
    assert iam.get_policy(PolicyArn=arn)["Policy"]["AttachmentCount"] == 1
    entities = iam.list_entities_for_policy(PolicyArn=arn)
    assert [r["RoleName"] for r in entities["PolicyRoles"]] == [role] and entities["PolicyUsers"] == []
    assert iam.list_entities_for_policy(PolicyArn=arn, EntityFilter="User")["PolicyRoles"] == []
    with pytest.raises(ClientError) as e:
        iam.delete_policy(PolicyArn=arn)
    assert error(e) == ("DeleteConflict", "Cannot delete a policy attached to entities.", 409)
    with pytest.raises(ClientError) as e:
        iam.delete_role(RoleName=role)
    assert error(e) == ("DeleteConflict", "Cannot delete entity, must detach all policies first.", 409)
    missing = f"arn:aws:iam::{ACCOUNT}:policy/nope"
    with pytest.raises(ClientError) as e:
        iam.attach_role_policy(RoleName=role, PolicyArn=missing)
    assert error(e) == ("NoSuchEntity", f"Policy {missing} does not exist or is not attachable.", 404)
    with pytest.raises(ClientError) as e:
        iam.detach_role_policy(RoleName=role, PolicyArn=missing)
    assert error(e) == ("NoSuchEntity", f"Policy {missing} was not found.", 404)
    with pytest.raises(ClientError) as e:
        iam.attach_role_policy(RoleName="no-such-role", PolicyArn=arn)
    assert error(e) == ("NoSuchEntity", "The role with name no-such-role cannot be found.", 404)
    iam.detach_role_policy(RoleName=role, PolicyArn=arn)
    iam.detach_role_policy(RoleName=role, PolicyArn=KINESIS_EXECUTION)
    iam.delete_role(RoleName=role)
    iam.delete_policy(PolicyArn=arn)


def test_at_most_ten_managed_policies_per_role(iam):
    role = make_role(iam)
    arns = [iam.create_policy(PolicyName=name("quota"), PolicyDocument=json.dumps(DOC))["Policy"]["Arn"]
            for _ in range(11)]
    for arn in arns[:10]:
        iam.attach_role_policy(RoleName=role, PolicyArn=arn)
    with pytest.raises(ClientError) as e:
        iam.attach_role_policy(RoleName=role, PolicyArn=arns[10])
    assert error(e) == ("LimitExceeded", "Cannot exceed quota for PoliciesPerRole: 10", 409)


def test_validation_comes_from_the_model(unchecked_iam):
    iam = unchecked_iam
    with pytest.raises(ClientError) as e:
        iam.create_role(RoleName="bad name!", AssumeRolePolicyDocument=json.dumps(TRUST))
    code, message, status = error(e)
    assert (code, status) == ("ValidationError", 400)
    assert message.startswith("1 validation error detected: Value 'bad name!' at 'roleName' failed to satisfy "
                              "constraint: Member must satisfy regular expression pattern")
    with pytest.raises(ClientError) as e:
        iam.create_role(RoleName="x" * 65, AssumeRolePolicyDocument=json.dumps(TRUST))
    assert "Member must have length less than or equal to 64" in error(e)[1]


def test_users_access_keys_and_groups(iam):
    user, group = name("user"), name("group")
    made = iam.create_user(UserName=user)["User"]
    assert made["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/{user}" and made["UserId"].startswith("AIDA")
    assert iam.get_user(UserName=user)["User"]["UserId"] == made["UserId"]
    assert user in [u["UserName"] for u in iam.list_users(MaxItems=1000)["Users"]]
    with pytest.raises(ClientError) as e:
        iam.create_user(UserName=user)
    assert error(e) == ("EntityAlreadyExists", f"User with name {user} already exists.", 409)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    assert key["AccessKeyId"].startswith("AKIA") and len(key["AccessKeyId"]) == 20 and key["Status"] == "Active"
    assert len(key["SecretAccessKey"]) == 40
    iam.create_access_key(UserName=user)
    with pytest.raises(ClientError) as e:
        iam.create_access_key(UserName=user)
    assert error(e) == ("LimitExceeded", "Cannot exceed quota for AccessKeysPerUser: 2", 409)
    iam.update_access_key(UserName=user, AccessKeyId=key["AccessKeyId"], Status="Inactive")
    listed = {k["AccessKeyId"]: k["Status"] for k in iam.list_access_keys(UserName=user)["AccessKeyMetadata"]}
    assert len(listed) == 2 and listed[key["AccessKeyId"]] == "Inactive"
    iam.create_group(GroupName=group)
    iam.add_user_to_group(GroupName=group, UserName=user)
    assert [u["UserName"] for u in iam.get_group(GroupName=group)["Users"]] == [user]
    assert [g["GroupName"] for g in iam.list_groups_for_user(UserName=user)["Groups"]] == [group]
    iam.attach_user_policy(UserName=user, PolicyArn="arn:aws:iam::aws:policy/AmazonKinesisFullAccess")
    iam.put_group_policy(GroupName=group, PolicyName="g", PolicyDocument=json.dumps(DOC))
    with pytest.raises(ClientError) as e:
        iam.delete_user(UserName=user)
    assert error(e) == ("DeleteConflict", "Cannot delete entity, must delete access keys first.", 409)
    for k in listed:
        iam.delete_access_key(UserName=user, AccessKeyId=k)
    with pytest.raises(ClientError) as e:
        iam.delete_access_key(UserName=user, AccessKeyId=key["AccessKeyId"])
    assert error(e) == ("NoSuchEntity", f"The Access Key with id {key['AccessKeyId']} cannot be found", 404)
    with pytest.raises(ClientError) as e:
        iam.delete_group(GroupName=group)
    assert error(e) == ("DeleteConflict", "Cannot delete entity, must remove users from group first.", 409)
    iam.remove_user_from_group(GroupName=group, UserName=user)
    iam.detach_user_policy(UserName=user, PolicyArn="arn:aws:iam::aws:policy/AmazonKinesisFullAccess")
    iam.delete_user(UserName=user)
    with pytest.raises(ClientError) as e:
        iam.get_user(UserName=user)
    assert error(e) == ("NoSuchEntity", f"The user with name {user} cannot be found.", 404)
    iam.delete_group_policy(GroupName=group, PolicyName="g")
    iam.delete_group(GroupName=group)
    with pytest.raises(ClientError) as e:
        iam.get_group(GroupName=group)
    assert error(e) == ("NoSuchEntity", f"The group with name {group} cannot be found.", 404)


def test_what_is_not_emulated_says_so(iam):
    with pytest.raises(ClientError) as e:
        iam.create_login_profile(UserName=name("user"), Password="a-Password-1")
    assert error(e)[0::2] == ("NotImplemented", 501)


def test_roles_survive_a_restart(tmp_path_factory):
    from conftest import start_server
    proc = start_server(tmp_path_factory)
    try:
        iam = client_for(proc.url, "iam")
        role = make_role(iam)
        iam.attach_role_policy(RoleName=role, PolicyArn=KINESIS_EXECUTION)
        proc.stop()
        proc.start()
        iam = client_for(proc.url, "iam")
        assert iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"][0]["PolicyArn"] == KINESIS_EXECUTION
    finally:
        proc.stop()


def test_the_lambda_kinesis_tutorial_with_the_cli(server, tmp_path):
    env = tool_env(server.url, tmp_path / "home")
    aws = aws_cli(env)
    trust = tmp_path / "trust-policy.json"
    trust.write_text(json.dumps(TRUST))
    role = name("lambda-kinesis-role")
    out = run_tool([aws, "iam", "create-role", "--role-name", role, "--assume-role-policy-document",
                    f"file://{trust}", "--output", "json"], env)
    created = json.loads(out.stdout)["Role"]
    assert created["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/{role}"
    run_tool([aws, "iam", "attach-role-policy", "--role-name", role, "--policy-arn", KINESIS_EXECUTION], env)
    out = run_tool([aws, "iam", "list-attached-role-policies", "--role-name", role, "--output", "json"], env)
    assert json.loads(out.stdout)["AttachedPolicies"] == [{"PolicyName": "AWSLambdaKinesisExecutionRole",
                                                          "PolicyArn": KINESIS_EXECUTION}]
    out = run_tool([aws, "iam", "get-role", "--role-name", "no-such-role"], env, expect=None)
    assert out.returncode != 0 and "NoSuchEntity" in out.stderr and \
        "The role with name no-such-role cannot be found." in out.stderr


STACK_TEMPLATE = """
Parameters:
  Action:
    Type: String
    Default: kinesis:GetRecords
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {Service: lambda.amazonaws.com}
            Action: sts:AssumeRole
      ManagedPolicyArns:
        - !Sub arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaKinesisExecutionRole
      Policies:
        - PolicyName: inline
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - {Effect: Allow, Action: !Ref Action, Resource: "*"}
      Tags:
        - {Key: team, Value: data}
  Extra:
    Type: AWS::IAM::Policy
    Properties:
      PolicyName: extra
      Roles: [!Ref Role]
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - {Effect: Allow, Action: s3:GetObject, Resource: "*"}
  Shared:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      Description: shared
      Roles: [!Ref Role]
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - {Effect: Allow, Action: !Ref Action, Resource: "*"}
Outputs:
  RoleName: {Value: !Ref Role}
  RoleArn: {Value: !GetAtt Role.Arn}
  PolicyArn: {Value: !Ref Shared}
"""


def test_a_stack_makes_roles_and_policies_and_deleting_it_removes_them(server, iam, tmp_path, capsys):
    from kinesim.deploy import cli
    stack = name("iam-stack")
    template = tmp_path / "template.yaml"
    template.write_text(STACK_TEMPLATE)

    def deploy(*args: str) -> dict[str, str]:
        code = cli.main([str(template), "--stack-name", stack, "--no-lint", *args, "--endpoint-url", server.url])
        out, err = capsys.readouterr()
        assert code == 0, err
        if "--delete" in args:
            return {}
        return dict(line.split(None, 1) for line in out.split("Outputs:\n")[1].splitlines() if line.startswith("  "))

    outputs = deploy()
    role_name, policy_arn = outputs["RoleName"], outputs["PolicyArn"]
    assert role_name.startswith(f"{stack}-Role-")
    role = iam.get_role(RoleName=role_name)["Role"]
    assert role["Arn"] == outputs["RoleArn"] and role["Tags"] == [{"Key": "team", "Value": "data"}]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "lambda.amazonaws.com"}
    assert sorted(iam.list_role_policies(RoleName=role_name)["PolicyNames"]) == ["extra", "inline"]
    attached = {p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]}
    assert attached == {KINESIS_EXECUTION, policy_arn}
    assert policy_arn.startswith(f"arn:aws:iam::{ACCOUNT}:policy/{stack}-Shared-")
    assert iam.get_policy(PolicyArn=policy_arn)["Policy"]["Description"] == "shared"

    # An update: the inline policy and the managed policy's document change (a new default version).
    deploy("--parameter-overrides", "Action=kinesis:PutRecord")
    inline = iam.get_role_policy(RoleName=role_name, PolicyName="inline")["PolicyDocument"]
    assert inline["Statement"][0]["Action"] == "kinesis:PutRecord"
    policy = iam.get_policy(PolicyArn=policy_arn)["Policy"]
    assert policy["DefaultVersionId"] == "v2" and policy["AttachmentCount"] == 1
    document = iam.get_policy_version(PolicyArn=policy_arn, VersionId="v2")["PolicyVersion"]["Document"]
    assert document["Statement"][0]["Action"] == "kinesis:PutRecord"

    deploy("--delete")
    with pytest.raises(ClientError) as e:
        iam.get_role(RoleName=role_name)
    assert error(e) == ("NoSuchEntity", f"The role with name {role_name} cannot be found.", 404)
    with pytest.raises(ClientError) as e:
        iam.get_policy(PolicyArn=policy_arn)
    assert error(e) == ("NoSuchEntity", f"Policy {policy_arn} was not found.", 404)
