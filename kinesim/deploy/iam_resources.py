"""IAM resources, made through kinesim's IAM API: AWS::IAM::Role, AWS::IAM::Policy (inline
policies put into roles, users and groups) and AWS::IAM::ManagedPolicy. IAM stores them and answers
for them (`aws iam get-role` on a stack's role) but enforces nothing: kinesim checks no
permissions. Also the services' resource policies (a queue's, a topic's), which are recorded only.
"""
from __future__ import annotations

import json
from typing import Any, Callable, ClassVar

from botocore.exceptions import ClientError

from .resources import Applied, RecordedResource, ResourceHandler, error_code, generated_name, tag_map
from .template import DeployError

_KINDS = ("Role", "User", "Group")  # the identities an AWS::IAM::Policy or ManagedPolicy names


def _document(value: Any, prop: str, type_name: str) -> str:
    """A template's policy document (an object, or JSON text) as the text IAM is sent."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value)
    raise DeployError(f"property {prop} of {type_name} must be a JSON object")


def _names(value: Any, prop: str, type_name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DeployError(f"property {prop} of {type_name} must be a list of strings")
    return list(value)


def _gone_is_fine(call: Callable[[], Any]) -> None:
    """`call()`, where an entity already gone is what was wanted (a delete, a detach)."""
    try:
        call()
    except ClientError as err:
        if error_code(err) != "NoSuchEntity":
            raise


class ResourcePolicy(RecordedResource):
    """A service's resource policy (a queue's, a topic's): recorded with an id, not applied."""
    note = "resource policies are not enforced: kinesim does not check permissions"
    name_property = None
    attributes = frozenset({"Id"})
    kind: ClassVar[str] = "Policy"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        physical_id = generated_name(self.target.stack_name, self.kind, 64)
        return Applied(physical_id, {"Id": physical_id})


class IamRole(ResourceHandler):
    type_name = "AWS::IAM::Role"
    name_property = "RoleName"
    attributes = frozenset({"Arn", "RoleId"})
    SUPPORTED = {"RoleName", "AssumeRolePolicyDocument", "Description", "ManagedPolicyArns", "MaxSessionDuration",
                 "Path", "PermissionsBoundary", "Policies", "Tags"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        if "AssumeRolePolicyDocument" not in properties:
            raise DeployError("property AssumeRolePolicyDocument of AWS::IAM::Role is required")
        policies = {}
        for policy in properties.get("Policies") or []:
            if not isinstance(policy, dict) or "PolicyName" not in policy or "PolicyDocument" not in policy:
                raise DeployError("each of Policies of AWS::IAM::Role needs a PolicyName and a PolicyDocument")
            policies[policy["PolicyName"]] = _document(policy["PolicyDocument"], "Policies", self.type_name)
        return {"RoleName": properties.get("RoleName"), "Path": properties.get("Path", "/"),
                "AssumeRolePolicyDocument": _document(properties["AssumeRolePolicyDocument"],
                                                      "AssumeRolePolicyDocument", self.type_name),
                "Description": properties.get("Description"),
                "MaxSessionDuration": properties.get("MaxSessionDuration"),
                "PermissionsBoundary": properties.get("PermissionsBoundary"),
                "ManagedPolicyArns": _names(properties.get("ManagedPolicyArns"), "ManagedPolicyArns", self.type_name),
                "Policies": policies, "Tags": tag_map(properties.get("Tags"))}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        iam = self.target.iam
        request = {"RoleName": name, "Path": desired["Path"],
                   "AssumeRolePolicyDocument": desired["AssumeRolePolicyDocument"]}
        request.update({k: desired[k] for k in ("Description", "MaxSessionDuration", "PermissionsBoundary")
                        if desired[k] is not None})
        if desired["Tags"]:
            request["Tags"] = [{"Key": k, "Value": v} for k, v in desired["Tags"].items()]
        role = iam.create_role(**request)["Role"]
        try:
            self._apply_policies(name, {"Policies": {}, "ManagedPolicyArns": []}, desired)
        except Exception:
            self.delete(name, desired)  # nothing half-made is left behind a failed create
            raise
        return Applied(name, {"Arn": role["Arn"], "RoleId": role["RoleId"]})

    def _apply_policies(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        iam = self.target.iam
        for policy_name, text in new["Policies"].items():
            if old["Policies"].get(policy_name) != text:
                iam.put_role_policy(RoleName=name, PolicyName=policy_name, PolicyDocument=text)
        for policy_name in set(old["Policies"]) - set(new["Policies"]):
            _gone_is_fine(lambda: iam.delete_role_policy(RoleName=name, PolicyName=policy_name))
        for arn in new["ManagedPolicyArns"]:
            if arn not in old["ManagedPolicyArns"]:
                iam.attach_role_policy(RoleName=name, PolicyArn=arn)
        for arn in set(old["ManagedPolicyArns"]) - set(new["ManagedPolicyArns"]):
            _gone_is_fine(lambda: iam.detach_role_policy(RoleName=name, PolicyArn=arn))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        iam = self.target.iam
        if old["AssumeRolePolicyDocument"] != new["AssumeRolePolicyDocument"]:
            iam.update_assume_role_policy(RoleName=physical_id, PolicyDocument=new["AssumeRolePolicyDocument"])
        if (old["Description"], old["MaxSessionDuration"]) != (new["Description"], new["MaxSessionDuration"]):
            # a property removed from the template goes back to IAM's default
            iam.update_role(RoleName=physical_id, Description=new["Description"] or "",
                            MaxSessionDuration=new["MaxSessionDuration"] or 3600)
        if old["PermissionsBoundary"] != new["PermissionsBoundary"]:
            if new["PermissionsBoundary"] is None:
                iam.delete_role_permissions_boundary(RoleName=physical_id)
            else:
                iam.put_role_permissions_boundary(RoleName=physical_id, PermissionsBoundary=new["PermissionsBoundary"])
        self._apply_policies(physical_id, old, new)
        removed = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed:
            iam.untag_role(RoleName=physical_id, TagKeys=removed)
        changed = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed:
            iam.tag_role(RoleName=physical_id, Tags=[{"Key": k, "Value": v} for k, v in changed.items()])
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        """What the role has is read from IAM, not the template: a policy attached to it outside the
        stack would otherwise keep it from being deleted (CloudFormation detaches those too)."""
        iam = self.target.iam
        try:
            attached = iam.list_attached_role_policies(RoleName=physical_id)["AttachedPolicies"]
            inline = iam.list_role_policies(RoleName=physical_id)["PolicyNames"]
        except ClientError as err:
            if error_code(err) == "NoSuchEntity":
                return
            raise
        for policy in attached:
            _gone_is_fine(lambda: iam.detach_role_policy(RoleName=physical_id, PolicyArn=policy["PolicyArn"]))
        for policy_name in inline:
            _gone_is_fine(lambda: iam.delete_role_policy(RoleName=physical_id, PolicyName=policy_name))
        _gone_is_fine(lambda: iam.delete_role(RoleName=physical_id))


class _PolicyOfIdentities(ResourceHandler):
    """What AWS::IAM::Policy and ManagedPolicy share: a document and the roles, users and groups
    it applies to."""

    def _identities(self, properties: dict[str, Any]) -> dict[str, list[str]]:
        identities = {kind: _names(properties.get(f"{kind}s"), f"{kind}s", self.type_name) for kind in _KINDS}
        return identities

    def _each(self, identities: dict[str, list[str]], act: Callable[[str, str], None]) -> None:
        for kind in _KINDS:
            for name in identities[kind]:
                act(kind, name)


class IamPolicy(_PolicyOfIdentities):
    """Inline policies: the document put, under PolicyName, into each role, user and group named."""
    type_name = "AWS::IAM::Policy"
    name_property = None
    attributes = frozenset({"Id"})
    SUPPORTED = {"PolicyName", "PolicyDocument", "Roles", "Users", "Groups"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        for required in ("PolicyName", "PolicyDocument"):
            if required not in properties:
                raise DeployError(f"property {required} of AWS::IAM::Policy is required")
        identities = self._identities(properties)
        if not any(identities.values()):
            raise DeployError("At least one of [Groups,Roles,Users] must be non-empty.")
        return {"PolicyName": properties["PolicyName"],
                "PolicyDocument": _document(properties["PolicyDocument"], "PolicyDocument", self.type_name),
                "Identities": identities}

    def _put(self, desired: dict[str, Any], only: Callable[[str, str], bool] = lambda kind, name: True) -> None:
        iam = self.target.iam

        def put(kind: str, name: str) -> None:
            if only(kind, name):
                getattr(iam, f"put_{kind.lower()}_policy")(**{f"{kind}Name": name}, PolicyName=desired["PolicyName"],
                                                           PolicyDocument=desired["PolicyDocument"])
        self._each(desired["Identities"], put)

    def _remove(self, desired: dict[str, Any], only: Callable[[str, str], bool] = lambda kind, name: True) -> None:
        iam = self.target.iam

        def remove(kind: str, name: str) -> None:
            if only(kind, name):
                _gone_is_fine(lambda: getattr(iam, f"delete_{kind.lower()}_policy")(
                    **{f"{kind}Name": name}, PolicyName=desired["PolicyName"]))
        self._each(desired["Identities"], remove)

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        try:
            self._put(desired)
        except Exception:
            self._remove(desired)
            raise
        physical_id = generated_name(self.target.stack_name, "Policy", 64)
        return Applied(physical_id, {"Id": physical_id})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        renamed = old["PolicyName"] != new["PolicyName"]
        self._remove(old, lambda kind, name: renamed or name not in new["Identities"][kind])
        self._put(new)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        self._remove(desired)


class IamManagedPolicy(_PolicyOfIdentities):
    """A customer managed policy, attached to each role, user and group named; a new document is a
    new default version (the oldest other one deleted when the policy has IAM's five)."""
    type_name = "AWS::IAM::ManagedPolicy"
    name_property = "ManagedPolicyName"
    name_max_length = 128
    attributes = frozenset({"PolicyArn", "PolicyId", "DefaultVersionId", "AttachmentCount", "IsAttachable"})
    SUPPORTED = {"ManagedPolicyName", "Description", "Path", "PolicyDocument", "Roles", "Users", "Groups"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        if "PolicyDocument" not in properties:
            raise DeployError("property PolicyDocument of AWS::IAM::ManagedPolicy is required")
        return {"ManagedPolicyName": properties.get("ManagedPolicyName"), "Path": properties.get("Path", "/"),
                "Description": properties.get("Description"),
                "PolicyDocument": _document(properties["PolicyDocument"], "PolicyDocument", self.type_name),
                "Identities": self._identities(properties)}

    def _attach(self, arn: str, identities: dict[str, list[str]], old: dict[str, list[str]] | None = None) -> None:
        iam = self.target.iam
        self._each(identities, lambda kind, name: None if old and name in old[kind] else
                   getattr(iam, f"attach_{kind.lower()}_policy")(**{f"{kind}Name": name}, PolicyArn=arn))

    def _detach(self, arn: str, identities: dict[str, list[str]], keep: dict[str, list[str]] | None = None) -> None:
        iam = self.target.iam
        self._each(identities, lambda kind, name: None if keep and name in keep[kind] else _gone_is_fine(
            lambda: getattr(iam, f"detach_{kind.lower()}_policy")(**{f"{kind}Name": name}, PolicyArn=arn)))

    def _attributes(self, arn: str) -> dict[str, Any]:
        policy = self.target.iam.get_policy(PolicyArn=arn)["Policy"]
        return {"PolicyArn": arn, "PolicyId": policy["PolicyId"], "DefaultVersionId": policy["DefaultVersionId"],
                "AttachmentCount": policy["AttachmentCount"], "IsAttachable": policy["IsAttachable"]}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        request = {"PolicyName": name, "Path": desired["Path"], "PolicyDocument": desired["PolicyDocument"]}
        if desired["Description"] is not None:
            request["Description"] = desired["Description"]
        arn = self.target.iam.create_policy(**request)["Policy"]["Arn"]
        try:
            self._attach(arn, desired["Identities"])
        except Exception:
            self.delete(arn, desired)
            raise
        return Applied(arn, self._attributes(arn))  # Ref to a managed policy is its ARN

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        iam = self.target.iam
        if old["PolicyDocument"] != new["PolicyDocument"]:
            versions = iam.list_policy_versions(PolicyArn=physical_id)["Versions"]
            if len(versions) >= 5:  # IAM's quota of versions: make room, as CloudFormation does
                oldest = min((v for v in versions if not v["IsDefaultVersion"]), key=lambda v: v["CreateDate"])
                iam.delete_policy_version(PolicyArn=physical_id, VersionId=oldest["VersionId"])
            iam.create_policy_version(PolicyArn=physical_id, PolicyDocument=new["PolicyDocument"], SetAsDefault=True)
        self._detach(physical_id, old["Identities"], keep=new["Identities"])
        self._attach(physical_id, new["Identities"], old=old["Identities"])
        return self._attributes(physical_id)

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        iam = self.target.iam
        self._detach(physical_id, desired["Identities"])
        try:
            for version in iam.list_policy_versions(PolicyArn=physical_id)["Versions"]:
                if not version["IsDefaultVersion"]:
                    iam.delete_policy_version(PolicyArn=physical_id, VersionId=version["VersionId"])
            iam.delete_policy(PolicyArn=physical_id)
        except ClientError as err:
            if error_code(err) != "NoSuchEntity":
                raise
