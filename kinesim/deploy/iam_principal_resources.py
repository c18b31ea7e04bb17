"""IAM's users, groups and what hangs off them, made through kinesim's IAM API as CloudFormation's
providers make them: AWS::IAM::User, AWS::IAM::Group, AWS::IAM::AccessKey,
AWS::IAM::UserToGroupAddition and AWS::IAM::InstanceProfile (roles and policies are
`iam_resources.py`'s). Ref gives a user's, group's or instance profile's name, an access key's id;
GetAtt their Arn, an access key's SecretAccessKey. A stack's access keys sign requests as their
user (see kinesim.iam.principals); nothing else here is enforced.
"""
from __future__ import annotations

from typing import Any, ClassVar

from botocore.exceptions import ClientError

from .iam_resources import _document, _gone_is_fine, _names
from .resources import Applied, ResourceHandler, error_code, generated_name, tag_map
from .template import DeployError

_NO_POLICIES: dict[str, Any] = {"Policies": {}, "ManagedPolicyArns": []}


def _inline_policies(properties: dict[str, Any], type_name: str) -> dict[str, str]:
    policies = {}
    for policy in properties.get("Policies") or []:
        if not isinstance(policy, dict) or "PolicyName" not in policy or "PolicyDocument" not in policy:
            raise DeployError(f"each of Policies of {type_name} needs a PolicyName and a PolicyDocument")
        policies[policy["PolicyName"]] = _document(policy["PolicyDocument"], "Policies", type_name)
    return policies


def _required(properties: dict[str, Any], names: tuple[str, ...], type_name: str) -> None:
    for name in names:
        if properties.get(name) in (None, "", []):
            raise DeployError(f"property {name} of {type_name} is required")


def _diff(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """What `new` adds to `old`, and what it drops."""
    return [n for n in new if n not in old], [o for o in old if o not in new]


class _Identity(ResourceHandler):
    """What users and groups share: a path and inline and managed policies, applied with the
    kind's own IAM calls (put_user_policy, attach_group_policy, ...)."""
    kind: ClassVar[str]  # "User", "Group"
    attributes = frozenset({"Arn"})

    def _policy_call(self, action: str, name: str, **kwargs: Any) -> Any:
        call = getattr(self.target.iam, f"{action}_{self.kind.lower()}_policy")
        return call(**{f"{self.kind}Name": name}, **kwargs)

    def _policies(self, properties: dict[str, Any]) -> dict[str, Any]:
        return {"Policies": _inline_policies(properties, self.type_name),
                "ManagedPolicyArns": _names(properties.get("ManagedPolicyArns"), "ManagedPolicyArns", self.type_name)}

    def _apply_policies(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        for policy_name, text in new["Policies"].items():
            if old["Policies"].get(policy_name) != text:
                self._policy_call("put", name, PolicyName=policy_name, PolicyDocument=text)
        for policy_name in set(old["Policies"]) - set(new["Policies"]):
            _gone_is_fine(lambda: self._policy_call("delete", name, PolicyName=policy_name))
        added, dropped = _diff(old["ManagedPolicyArns"], new["ManagedPolicyArns"])
        for arn in added:
            self._policy_call("attach", name, PolicyArn=arn)
        for arn in dropped:
            _gone_is_fine(lambda: self._policy_call("detach", name, PolicyArn=arn))

    def _strip_policies(self, name: str) -> bool:
        """Detach and delete every policy the identity has, read from IAM (those given it outside
        the stack too, as CloudFormation does); False when the identity is already gone."""
        iam, noun = self.target.iam, self.kind.lower()
        try:
            attached = getattr(iam, f"list_attached_{noun}_policies")(**{f"{self.kind}Name": name})
            inline = getattr(iam, f"list_{noun}_policies")(**{f"{self.kind}Name": name})
        except ClientError as err:
            if error_code(err) == "NoSuchEntity":
                return False
            raise
        for policy in attached["AttachedPolicies"]:
            _gone_is_fine(lambda: self._policy_call("detach", name, PolicyArn=policy["PolicyArn"]))
        for policy_name in inline["PolicyNames"]:
            _gone_is_fine(lambda: self._policy_call("delete", name, PolicyName=policy_name))
        return True


class IamUser(_Identity):
    type_name = "AWS::IAM::User"
    kind = "User"
    name_property = "UserName"
    SUPPORTED = {"UserName", "Path", "Policies", "ManagedPolicyArns", "Groups", "Tags", "PermissionsBoundary"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        return {"UserName": properties.get("UserName"), "Path": properties.get("Path", "/"),
                **self._policies(properties), "Groups": _names(properties.get("Groups"), "Groups", self.type_name),
                "Tags": tag_map(properties.get("Tags")), "PermissionsBoundary": properties.get("PermissionsBoundary")}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        iam = self.target.iam
        request: dict[str, Any] = {"UserName": name, "Path": desired["Path"]}
        if desired["PermissionsBoundary"]:
            request["PermissionsBoundary"] = desired["PermissionsBoundary"]
        if desired["Tags"]:
            request["Tags"] = [{"Key": k, "Value": v} for k, v in desired["Tags"].items()]
        user = iam.create_user(**request)["User"]
        try:
            self._apply_policies(name, _NO_POLICIES, desired)
            for group in desired["Groups"]:
                iam.add_user_to_group(GroupName=group, UserName=name)
        except Exception:
            self.delete(name, desired)  # nothing half-made is left behind a failed create
            raise
        return Applied(name, {"Arn": user["Arn"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        iam = self.target.iam
        if old["Path"] != new["Path"]:
            iam.update_user(UserName=physical_id, NewPath=new["Path"])
        if old["PermissionsBoundary"] != new["PermissionsBoundary"]:
            if new["PermissionsBoundary"]:
                iam.put_user_permissions_boundary(UserName=physical_id, PermissionsBoundary=new["PermissionsBoundary"])
            else:
                iam.delete_user_permissions_boundary(UserName=physical_id)
        self._apply_policies(physical_id, old, new)
        added, dropped = _diff(old["Groups"], new["Groups"])
        for group in added:
            iam.add_user_to_group(GroupName=group, UserName=physical_id)
        for group in dropped:
            _gone_is_fine(lambda: iam.remove_user_from_group(GroupName=group, UserName=physical_id))
        removed = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed:
            iam.untag_user(UserName=physical_id, TagKeys=removed)
        changed = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed:
            iam.tag_user(UserName=physical_id, Tags=[{"Key": k, "Value": v} for k, v in changed.items()])
        return {"Arn": iam.get_user(UserName=physical_id)["User"]["Arn"]}

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        """Out of its groups and without its policies first; access keys made outside the stack
        keep it (IAM's DeleteConflict), as they would on AWS."""
        iam = self.target.iam
        if not self._strip_policies(physical_id):
            return
        for group in iam.list_groups_for_user(UserName=physical_id)["Groups"]:
            _gone_is_fine(lambda: iam.remove_user_from_group(GroupName=group["GroupName"], UserName=physical_id))
        _gone_is_fine(lambda: iam.delete_user(UserName=physical_id))


class IamGroup(_Identity):
    type_name = "AWS::IAM::Group"
    kind = "Group"
    name_property = "GroupName"
    name_max_length = 128
    SUPPORTED = {"GroupName", "Path", "Policies", "ManagedPolicyArns"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        return {"GroupName": properties.get("GroupName"), "Path": properties.get("Path", "/"),
                **self._policies(properties)}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        group = self.target.iam.create_group(GroupName=name, Path=desired["Path"])["Group"]
        try:
            self._apply_policies(name, _NO_POLICIES, desired)
        except Exception:
            self.delete(name, desired)
            raise
        return Applied(name, {"Arn": group["Arn"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        iam = self.target.iam
        if old["Path"] != new["Path"]:
            iam.update_group(GroupName=physical_id, NewPath=new["Path"])
        self._apply_policies(physical_id, old, new)
        return {"Arn": iam.get_group(GroupName=physical_id, MaxItems=1)["Group"]["Arn"]}

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        """Without its policies and members first (a member's UserToGroupAddition or User is
        deleted before it, being its dependent; those added outside the stack are removed)."""
        iam = self.target.iam
        if not self._strip_policies(physical_id):
            return
        for page in iam.get_paginator("get_group").paginate(GroupName=physical_id):
            for user in page["Users"]:
                _gone_is_fine(lambda: iam.remove_user_from_group(GroupName=physical_id, UserName=user["UserName"]))
        _gone_is_fine(lambda: iam.delete_group(GroupName=physical_id))


class IamAccessKey(ResourceHandler):
    """A user's access key: Ref is its id, GetAtt SecretAccessKey its secret. A new Serial (or
    UserName) replaces it: the old key is deleted, a new one made."""
    type_name = "AWS::IAM::AccessKey"
    name_property = None
    attributes = frozenset({"SecretAccessKey", "Id"})
    SUPPORTED = {"UserName", "Status", "Serial"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        _required(properties, ("UserName",), self.type_name)
        status = properties.get("Status", "Active")
        if status not in ("Active", "Inactive"):
            raise DeployError(f"property Status of {self.type_name} must be Active or Inactive, not {status!r}")
        serial = properties.get("Serial")
        try:
            serial = None if serial is None else int(serial)
        except (TypeError, ValueError):
            raise DeployError(f"property Serial of {self.type_name} must be an integer") from None
        return {"UserName": str(properties["UserName"]), "Status": status, "Serial": serial}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        iam = self.target.iam
        key = iam.create_access_key(UserName=desired["UserName"])["AccessKey"]
        if desired["Status"] != "Active":
            iam.update_access_key(UserName=desired["UserName"], AccessKeyId=key["AccessKeyId"],
                                  Status=desired["Status"])
        return Applied(key["AccessKeyId"], {"Id": key["AccessKeyId"], "SecretAccessKey": key["SecretAccessKey"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        if old["Status"] != new["Status"]:
            self.target.iam.update_access_key(UserName=new["UserName"], AccessKeyId=physical_id, Status=new["Status"])
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        _gone_is_fine(lambda: self.target.iam.delete_access_key(UserName=desired["UserName"], AccessKeyId=physical_id))


class IamUserToGroupAddition(ResourceHandler):
    """Users added to a group; removed again when the resource is deleted."""
    type_name = "AWS::IAM::UserToGroupAddition"
    name_property = None
    attributes = frozenset({"Id"})
    SUPPORTED = {"GroupName", "Users"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        _required(properties, ("GroupName", "Users"), self.type_name)
        return {"GroupName": str(properties["GroupName"]), "Users": _names(properties["Users"], "Users", self.type_name)}

    def _add(self, group: str, users: list[str]) -> None:
        for user in users:
            self.target.iam.add_user_to_group(GroupName=group, UserName=user)

    def _remove(self, group: str, users: list[str]) -> None:
        for user in users:
            _gone_is_fine(lambda: self.target.iam.remove_user_from_group(GroupName=group, UserName=user))

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        try:
            self._add(desired["GroupName"], desired["Users"])
        except Exception:
            self._remove(desired["GroupName"], desired["Users"])
            raise
        physical_id = generated_name(self.target.stack_name, "UserToGroupAddition", 64)
        return Applied(physical_id, {"Id": physical_id})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        if old["GroupName"] != new["GroupName"]:
            self._remove(old["GroupName"], old["Users"])
            self._add(new["GroupName"], new["Users"])
        else:
            added, dropped = _diff(old["Users"], new["Users"])
            self._remove(new["GroupName"], dropped)
            self._add(new["GroupName"], added)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        self._remove(desired["GroupName"], desired["Users"])


class IamInstanceProfile(ResourceHandler):
    """An instance profile and its role (IAM holds at most one); a new InstanceProfileName or
    Path replaces it."""
    type_name = "AWS::IAM::InstanceProfile"
    name_property = "InstanceProfileName"
    name_max_length = 128
    attributes = frozenset({"Arn"})
    SUPPORTED = {"InstanceProfileName", "Path", "Roles"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        _required(properties, ("Roles",), self.type_name)
        return {"InstanceProfileName": properties.get("InstanceProfileName"), "Path": properties.get("Path", "/"),
                "Roles": _names(properties["Roles"], "Roles", self.type_name)}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        iam = self.target.iam
        profile = iam.create_instance_profile(InstanceProfileName=name, Path=desired["Path"])["InstanceProfile"]
        try:
            for role in desired["Roles"]:
                iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
        except Exception:
            self.delete(name, desired)
            raise
        return Applied(name, {"Arn": profile["Arn"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        iam = self.target.iam
        added, dropped = _diff(old["Roles"], new["Roles"])
        for role in dropped:  # first: the profile has room for one role
            _gone_is_fine(lambda: iam.remove_role_from_instance_profile(InstanceProfileName=physical_id, RoleName=role))
        for role in added:
            iam.add_role_to_instance_profile(InstanceProfileName=physical_id, RoleName=role)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        iam = self.target.iam
        try:
            roles = iam.get_instance_profile(InstanceProfileName=physical_id)["InstanceProfile"]["Roles"]
        except ClientError as err:
            if error_code(err) == "NoSuchEntity":
                return
            raise
        for role in roles:
            _gone_is_fine(lambda: iam.remove_role_from_instance_profile(InstanceProfileName=physical_id,
                                                                        RoleName=role["RoleName"]))
        _gone_is_fine(lambda: iam.delete_instance_profile(InstanceProfileName=physical_id))
