"""Roles: CreateRole ... DeleteRole, their trust policies, descriptions, session durations and
tags. Their inline and attached policies are `entity_policies.py`'s.

A role record: `{RoleName, RoleId, Arn, Path, CreateDate, AssumeRolePolicyDocument (the text
sent), Description, MaxSessionDuration, PermissionsBoundary, Tags, InlinePolicies,
AttachedPolicies}`. kinesim records no use of a role, so GetRole's RoleLastUsed is empty, as AWS's
is for a role never used. A role held by an instance profile (`instance_profiles.py`) cannot be
deleted.
"""
from __future__ import annotations

from typing import Any, Callable

from . import documents
from .entity_policies import EntityKind, EntityPolicies
from .errors import already_exists, delete_conflict
from .policies import Policies
from .records import Table, arn, merged_tags, now, page, under_path, unique_id, without_tags

KIND = EntityKind("role", "RoleName", documents.ROLE_INLINE_SIZE, "PoliciesPerRole")
DEFAULT_SESSION_S = 3600
# What ListRoles leaves out of each role (AWS's answer has these only in GetRole).
_NOT_LISTED = ("Tags", "RoleLastUsed", "PermissionsBoundary")


class Roles:
    def __init__(self, store: Any, account: str, partition: str, policies: Policies):
        self.table = Table(store, "role")
        self.account = account
        self.partition = partition
        self.policies = policies
        self.entity_policies = EntityPolicies(self.table, KIND, policies)
        # The instance profiles holding a role (instance_profiles.py keeps them).
        self.in_instance_profile: Callable[[str], list[dict[str, Any]]] = lambda role_name: []

    def role(self, name: str) -> dict[str, Any]:
        return self.entity_policies.entity(name)

    def _trust_policy(self, text: str) -> str:
        documents.checked(text, trust=True)
        documents.check_quota(text, documents.TRUST_POLICY_SIZE, "ACLSizePerRole")
        return text

    @staticmethod
    def _boundary(boundary_arn: str | None) -> dict[str, str] | None:
        # Recorded as given: IAM's CreateRole documents no NoSuchEntity for a boundary it cannot
        # find, and CDK's bootstrap template names one its own stack makes without depending on it.
        if boundary_arn is None:
            return None
        return {"PermissionsBoundaryType": "Policy", "PermissionsBoundaryArn": boundary_arn}

    def answer(self, role: dict[str, Any]) -> dict[str, Any]:
        out = {k: role[k] for k in ("Path", "RoleName", "RoleId", "Arn", "CreateDate", "MaxSessionDuration")}
        out["AssumeRolePolicyDocument"] = documents.answered(role["AssumeRolePolicyDocument"])
        for optional in ("Description", "PermissionsBoundary", "Tags"):
            if role.get(optional):
                out[optional] = role[optional]
        out["RoleLastUsed"] = {}
        return out

    # operations

    def create_role(self, p: dict[str, Any]) -> dict[str, Any]:
        name, path = p["RoleName"], p.get("Path", "/")
        text = self._trust_policy(p["AssumeRolePolicyDocument"])
        if self.table.get(name) is not None:
            raise already_exists(f"Role with name {name} already exists.")
        role = {"RoleName": name, "RoleId": unique_id("AROA"), "Path": path,
                "Arn": arn(self.partition, self.account, "role", path, name),
                "CreateDate": now(), "AssumeRolePolicyDocument": text, "Description": p.get("Description"),
                "MaxSessionDuration": p.get("MaxSessionDuration", DEFAULT_SESSION_S),
                "PermissionsBoundary": self._boundary(p.get("PermissionsBoundary")),
                "Tags": merged_tags([], p.get("Tags") or []), "InlinePolicies": {}, "AttachedPolicies": []}
        self.table.put(name, role)
        out = self.answer(role)
        del out["RoleLastUsed"], out["MaxSessionDuration"]  # not in CreateRole's answer
        return {"Role": out}

    def get_role(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"Role": self.answer(self.role(p["RoleName"]))}

    def list_roles(self, p: dict[str, Any]) -> dict[str, Any]:
        listed = []
        for role in under_path(self.table.all(), p.get("PathPrefix")):
            out = self.answer(role)
            for left_out in _NOT_LISTED:
                out.pop(left_out, None)
            listed.append(out)
        return page(listed, p, lambda r: r["RoleName"].lower(), "Roles")

    def delete_role(self, p: dict[str, Any]) -> None:
        role = self.role(p["RoleName"])
        if self.in_instance_profile(role["RoleName"]):
            raise delete_conflict("Cannot delete entity, must remove roles from instance profile first.")
        self.entity_policies.check_deletable(role)
        self.table.delete(role["RoleName"])

    def update_role(self, p: dict[str, Any]) -> dict[str, Any]:
        role = self.role(p["RoleName"])
        if p.get("Description") is not None:
            role["Description"] = p["Description"]
        if p.get("MaxSessionDuration") is not None:
            role["MaxSessionDuration"] = p["MaxSessionDuration"]
        self.table.put(role["RoleName"], role)
        return {}

    def update_role_description(self, p: dict[str, Any]) -> dict[str, Any]:
        role = self.role(p["RoleName"])
        role["Description"] = p["Description"]
        self.table.put(role["RoleName"], role)
        return {"Role": self.answer(role)}

    def update_assume_role_policy(self, p: dict[str, Any]) -> None:
        role = self.role(p["RoleName"])
        role["AssumeRolePolicyDocument"] = self._trust_policy(p["PolicyDocument"])
        self.table.put(role["RoleName"], role)

    def put_role_permissions_boundary(self, p: dict[str, Any]) -> None:
        role = self.role(p["RoleName"])
        role["PermissionsBoundary"] = self._boundary(p["PermissionsBoundary"])
        self.table.put(role["RoleName"], role)

    def delete_role_permissions_boundary(self, p: dict[str, Any]) -> None:
        role = self.role(p["RoleName"])
        role["PermissionsBoundary"] = None
        self.table.put(role["RoleName"], role)

    def tag_role(self, p: dict[str, Any]) -> None:
        role = self.role(p["RoleName"])
        role["Tags"] = merged_tags(role["Tags"], p["Tags"])
        self.table.put(role["RoleName"], role)

    def untag_role(self, p: dict[str, Any]) -> None:
        role = self.role(p["RoleName"])
        role["Tags"] = without_tags(role["Tags"], p["TagKeys"])
        self.table.put(role["RoleName"], role)

    def list_role_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        return page(self.role(p["RoleName"])["Tags"], p, lambda t: t["Key"], "Tags")
