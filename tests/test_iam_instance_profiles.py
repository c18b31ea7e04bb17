"""IAM's instance profiles through boto3 (create, get, list with paths and paging, the one role a
profile holds, tags, delete) and the renames of UpdateUser and UpdateGroup, with AWS's refusals:
their sentences as AWS's answers quoted in users' reports have them ("Instance Profile NAME cannot
be found.", "Cannot delete entity, must remove roles from instance profile first.", moto's
"Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")."""
from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for

ACCOUNT = "000000000000"
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}
DOC = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}


@pytest.fixture(scope="module")
def iam(server):
    return client_for(server.url, "iam")


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def error(e: pytest.ExceptionInfo) -> tuple[str, str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


def refused(call, **kwargs) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as e:
        call(**kwargs)
    return error(e)


def test_an_instance_profile_and_its_role(iam):
    profile, role = name("profile"), name("role")
    made = iam.create_instance_profile(InstanceProfileName=profile, Path="/web/",
                                       Tags=[{"Key": "team", "Value": "a"}])["InstanceProfile"]
    assert made["Arn"] == f"arn:aws:iam::{ACCOUNT}:instance-profile/web/{profile}"
    assert made["InstanceProfileId"].startswith("AIPA") and len(made["InstanceProfileId"]) == 21
    assert (made["Path"], made["Roles"], made["Tags"]) == ("/web/", [], [{"Key": "team", "Value": "a"}])
    assert refused(iam.create_instance_profile, InstanceProfileName=profile.upper()) == \
        ("EntityAlreadyExists", f"Instance Profile {profile.upper()} already exists.", 409)

    created_role = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]
    iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=role)
    got = iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
    assert (got["InstanceProfileId"], got["CreateDate"], got["Tags"]) == \
        (made["InstanceProfileId"], made["CreateDate"], [{"Key": "team", "Value": "a"}])
    [held] = got["Roles"]
    assert (held["RoleName"], held["RoleId"], held["Arn"], held["Path"]) == \
        (role, created_role["RoleId"], created_role["Arn"], "/")
    assert held["AssumeRolePolicyDocument"] == TRUST

    # One role per profile, the same one again too.
    for again in (role, iam.create_role(RoleName=name("other"), AssumeRolePolicyDocument=json.dumps(TRUST))
                  ["Role"]["RoleName"]):
        assert refused(iam.add_role_to_instance_profile, InstanceProfileName=profile, RoleName=again) == \
            ("LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1", 409)
    assert refused(iam.add_role_to_instance_profile, InstanceProfileName=profile, RoleName="no-such-role") == \
        ("NoSuchEntity", "The role with name no-such-role cannot be found.", 404)

    for_role = iam.list_instance_profiles_for_role(RoleName=role)
    assert [p["InstanceProfileName"] for p in for_role["InstanceProfiles"]] == [profile]
    assert for_role["IsTruncated"] is False and "Tags" not in for_role["InstanceProfiles"][0]
    assert refused(iam.list_instance_profiles_for_role, RoleName="no-such-role")[0::2] == ("NoSuchEntity", 404)

    # Neither the role nor the profile goes while the one is in the other.
    assert refused(iam.delete_role, RoleName=role) == \
        ("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.", 409)
    assert refused(iam.delete_instance_profile, InstanceProfileName=profile) == \
        ("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.", 409)
    iam.remove_role_from_instance_profile(InstanceProfileName=profile, RoleName=role)
    assert iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"] == []
    assert iam.list_instance_profiles_for_role(RoleName=role)["InstanceProfiles"] == []
    assert refused(iam.remove_role_from_instance_profile, InstanceProfileName=profile, RoleName=role)[0::2] == \
        ("NoSuchEntity", 404)
    iam.delete_role(RoleName=role)
    iam.delete_instance_profile(InstanceProfileName=profile)
    for call in (iam.get_instance_profile, iam.delete_instance_profile, iam.list_instance_profile_tags):
        assert refused(call, InstanceProfileName=profile) == \
            ("NoSuchEntity", f"Instance Profile {profile} cannot be found.", 404)


def test_instance_profile_tags(iam):
    profile = name("tagged")
    iam.create_instance_profile(InstanceProfileName=profile)
    assert iam.list_instance_profile_tags(InstanceProfileName=profile)["Tags"] == []
    iam.tag_instance_profile(InstanceProfileName=profile, Tags=[{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}])
    iam.tag_instance_profile(InstanceProfileName=profile, Tags=[{"Key": "A", "Value": "3"}])  # keys: any case
    iam.untag_instance_profile(InstanceProfileName=profile, TagKeys=["b", "never-there"])
    assert iam.list_instance_profile_tags(InstanceProfileName=profile)["Tags"] == [{"Key": "A", "Value": "3"}]
    assert refused(iam.tag_instance_profile, InstanceProfileName=profile,
                   Tags=[{"Key": "x", "Value": "1"}, {"Key": "X", "Value": "2"}]) == \
        ("InvalidInput", "Duplicate tag keys found. Please note that Tag keys are case insensitive.", 400)
    iam.delete_instance_profile(InstanceProfileName=profile)


def test_list_instance_profiles_by_path_and_page(iam):
    path = f"/{name('p')}/"
    profiles = sorted(name("listed") for _ in range(5))
    for profile in profiles:
        iam.create_instance_profile(InstanceProfileName=profile, Path=path, Tags=[{"Key": "k", "Value": "v"}])
    seen, marker = [], None
    while True:
        answer = iam.list_instance_profiles(PathPrefix=path, MaxItems=2, **({"Marker": marker} if marker else {}))
        assert len(answer["InstanceProfiles"]) <= 2 and "Tags" not in answer["InstanceProfiles"][0]
        seen += [p["InstanceProfileName"] for p in answer["InstanceProfiles"]]
        if not answer["IsTruncated"]:
            break
        marker = answer["Marker"]
    assert seen == profiles
    paginated = [p["InstanceProfileName"] for page in iam.get_paginator("list_instance_profiles").paginate(
        PathPrefix=path, PaginationConfig={"PageSize": 3}) for p in page["InstanceProfiles"]]
    assert paginated == profiles
    assert iam.list_instance_profiles(PathPrefix=f"{path}none/")["InstanceProfiles"] == []
    for profile in profiles:
        iam.delete_instance_profile(InstanceProfileName=profile)


def test_update_user_renames_and_keeps_what_the_user_has(iam):
    user, group, new = name("user"), name("group"), name("renamed")
    made = iam.create_user(UserName=user)["User"]
    key = iam.create_access_key(UserName=user)["AccessKey"]
    iam.create_group(GroupName=group)
    iam.add_user_to_group(GroupName=group, UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="inline", PolicyDocument=json.dumps(DOC))
    iam.attach_user_policy(UserName=user, PolicyArn="arn:aws:iam::aws:policy/AmazonKinesisReadOnlyAccess")

    iam.update_user(UserName=user, NewUserName=new, NewPath="/people/")
    got = iam.get_user(UserName=new)["User"]
    assert (got["UserName"], got["UserId"], got["Path"], got["Arn"]) == \
        (new, made["UserId"], "/people/", f"arn:aws:iam::{ACCOUNT}:user/people/{new}")
    assert refused(iam.get_user, UserName=user) == ("NoSuchEntity", f"The user with name {user} cannot be found.", 404)
    assert [k["AccessKeyId"] for k in iam.list_access_keys(UserName=new)["AccessKeyMetadata"]] == [key["AccessKeyId"]]
    assert iam.get_access_key_last_used(AccessKeyId=key["AccessKeyId"])["UserName"] == new
    assert [u["UserName"] for u in iam.get_group(GroupName=group)["Users"]] == [new]
    assert [g["GroupName"] for g in iam.list_groups_for_user(UserName=new)["Groups"]] == [group]
    assert iam.list_user_policies(UserName=new)["PolicyNames"] == ["inline"]
    assert [p["PolicyName"] for p in iam.list_attached_user_policies(UserName=new)["AttachedPolicies"]] == \
        ["AmazonKinesisReadOnlyAccess"]
    users = iam.list_entities_for_policy(PolicyArn="arn:aws:iam::aws:policy/AmazonKinesisReadOnlyAccess",
                                         PathPrefix="/people/")["PolicyUsers"]
    assert users == [{"UserName": new, "UserId": made["UserId"]}]

    other = iam.create_user(UserName=name("other"))["User"]["UserName"]
    assert refused(iam.update_user, UserName=new, NewUserName=other.upper()) == \
        ("EntityAlreadyExists", f"User with name {other.upper()} already exists.", 409)
    assert refused(iam.update_user, UserName=user, NewPath="/x/")[0::2] == ("NoSuchEntity", 404)
    iam.update_user(UserName=new, NewPath="/")  # the path alone
    assert iam.get_user(UserName=new)["User"]["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/{new}"


def test_update_group_renames_and_keeps_members_and_policies(iam):
    group, new, user = name("group"), name("renamed"), name("member")
    made = iam.create_group(GroupName=group)["Group"]
    iam.create_user(UserName=user)
    iam.add_user_to_group(GroupName=group, UserName=user)
    iam.put_group_policy(GroupName=group, PolicyName="inline", PolicyDocument=json.dumps(DOC))
    iam.update_group(GroupName=group, NewGroupName=new, NewPath="/teams/")
    got = iam.get_group(GroupName=new)
    assert (got["Group"]["GroupId"], got["Group"]["Arn"]) == \
        (made["GroupId"], f"arn:aws:iam::{ACCOUNT}:group/teams/{new}")
    assert [u["UserName"] for u in got["Users"]] == [user]
    assert [g["GroupName"] for g in iam.list_groups_for_user(UserName=user)["Groups"]] == [new]
    assert iam.get_group_policy(GroupName=new, PolicyName="inline")["PolicyDocument"] == DOC
    assert refused(iam.get_group, GroupName=group) == \
        ("NoSuchEntity", f"The group with name {group} cannot be found.", 404)
    taken = iam.create_group(GroupName=name("taken"))["Group"]["GroupName"]
    assert refused(iam.update_group, GroupName=new, NewGroupName=taken) == \
        ("EntityAlreadyExists", f"Group with name {taken} already exists.", 409)


def test_user_permissions_boundary(iam):
    user, boundary = name("bounded"), "arn:aws:iam::aws:policy/PowerUserAccess"
    assert iam.create_user(UserName=user, PermissionsBoundary=boundary)["User"]["PermissionsBoundary"] == \
        {"PermissionsBoundaryType": "Policy", "PermissionsBoundaryArn": boundary}
    listed = [u for u in iam.list_users(MaxItems=1000)["Users"] if u["UserName"] == user]
    assert listed and "PermissionsBoundary" not in listed[0]
    iam.delete_user_permissions_boundary(UserName=user)
    assert "PermissionsBoundary" not in iam.get_user(UserName=user)["User"]
    iam.put_user_permissions_boundary(UserName=user, PermissionsBoundary=boundary)
    assert iam.get_user(UserName=user)["User"]["PermissionsBoundary"]["PermissionsBoundaryArn"] == boundary
