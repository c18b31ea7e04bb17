"""The policies of one kind of identity (roles, users, groups): inline policies kept in the
entity (`InlinePolicies`: name -> document text) and managed policies attached to it
(`AttachedPolicies`: ARNs). The three kinds differ only in their words and quotas, given here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import documents
from .errors import delete_conflict, entity_missing, limit_exceeded, policy_not_found
from .policies import Policies
from .records import Table, page, under_path

ATTACHED_POLICIES_QUOTA = 10  # managed policies per role, user or group: AWS's default quota


@dataclass
class EntityKind:
    word: str  # AWS's word for it in messages: role, user, group
    name_param: str  # RoleName, UserName, GroupName
    inline_quota: int  # all of its inline policies together, in characters without whitespace
    attached_quota_name: str  # PoliciesPerRole, ...


class EntityPolicies:
    def __init__(self, table: Table, kind: EntityKind, policies: Policies):
        self.table = table
        self.kind = kind
        self.policies = policies

    def entity(self, name: str) -> dict[str, Any]:
        entity = self.table.get(name)
        if entity is None:
            raise entity_missing(self.kind.word, name)
        return entity

    def _save(self, entity: dict[str, Any]) -> None:
        self.table.put(entity[self.kind.name_param], entity)

    # inline policies

    def put_inline(self, p: dict[str, Any]) -> None:
        entity = self.entity(p[self.kind.name_param])
        text = p["PolicyDocument"]
        documents.checked(text)
        inline = dict(entity["InlinePolicies"])
        inline[p["PolicyName"]] = text
        if sum(documents.size(t) for t in inline.values()) > self.kind.inline_quota:
            raise limit_exceeded(f"Maximum policy size of {self.kind.inline_quota} bytes exceeded for "
                                 f"{self.kind.word} {entity[self.kind.name_param]}")
        entity["InlinePolicies"] = inline
        self._save(entity)

    def get_inline(self, p: dict[str, Any]) -> dict[str, Any]:
        entity = self.entity(p[self.kind.name_param])
        name = p["PolicyName"]
        if name not in entity["InlinePolicies"]:
            raise entity_missing(f"{self.kind.word} policy", name)
        return {self.kind.name_param: entity[self.kind.name_param], "PolicyName": name,
                "PolicyDocument": documents.answered(entity["InlinePolicies"][name])}

    def delete_inline(self, p: dict[str, Any]) -> None:
        entity = self.entity(p[self.kind.name_param])
        if entity["InlinePolicies"].pop(p["PolicyName"], None) is None:
            raise entity_missing(f"{self.kind.word} policy", p["PolicyName"])
        self._save(entity)

    def list_inline(self, p: dict[str, Any]) -> dict[str, Any]:
        names = [{"Name": n} for n in self.entity(p[self.kind.name_param])["InlinePolicies"]]
        out = page(names, p, lambda x: x["Name"], "PolicyNames")
        out["PolicyNames"] = [x["Name"] for x in out["PolicyNames"]]
        return out

    # managed policies

    def attach(self, p: dict[str, Any]) -> None:
        entity = self.entity(p[self.kind.name_param])
        policy = self.policies.attachable(p["PolicyArn"])
        if policy["Arn"] in entity["AttachedPolicies"]:
            return  # attaching again changes nothing, as in AWS
        if len(entity["AttachedPolicies"]) >= ATTACHED_POLICIES_QUOTA:
            raise limit_exceeded(f"Cannot exceed quota for {self.kind.attached_quota_name}: {ATTACHED_POLICIES_QUOTA}")
        entity["AttachedPolicies"].append(policy["Arn"])
        self._save(entity)

    def detach(self, p: dict[str, Any]) -> None:
        entity = self.entity(p[self.kind.name_param])
        if p["PolicyArn"] not in entity["AttachedPolicies"]:
            raise policy_not_found(p["PolicyArn"])
        entity["AttachedPolicies"].remove(p["PolicyArn"])
        self._save(entity)

    def list_attached(self, p: dict[str, Any]) -> dict[str, Any]:
        entity = self.entity(p[self.kind.name_param])
        attached = [policy for policy in map(self.policies.find, entity["AttachedPolicies"]) if policy is not None]
        listed = [{"PolicyName": x["PolicyName"], "PolicyArn": x["Arn"], "Path": x["Path"]}
                  for x in under_path(attached, p.get("PathPrefix"))]
        out = page(listed, p, lambda x: x["PolicyName"].lower() + "\0" + x["PolicyArn"], "AttachedPolicies")
        out["AttachedPolicies"] = [{"PolicyName": x["PolicyName"], "PolicyArn": x["PolicyArn"]}
                                   for x in out["AttachedPolicies"]]
        return out

    def attached_to(self, policy_arn: str) -> list[dict[str, str]]:
        """The entities of this kind `policy_arn` is attached to, as ListEntitiesForPolicy lists them."""
        noun = self.kind.name_param[:-4]  # Role, User, Group
        return [{f"{noun}Name": e[self.kind.name_param], f"{noun}Id": e[f"{noun}Id"]}
                for e in self.table.all() if policy_arn in e["AttachedPolicies"]]

    def attached_arns(self) -> list[str]:
        """The ARNs of the policies attached to entities of this kind, once per attachment."""
        return [policy_arn for e in self.table.all() for policy_arn in e["AttachedPolicies"]]

    def check_deletable(self, entity: dict[str, Any]) -> None:
        """AWS's refusals to delete an identity that still has policies."""
        if entity["AttachedPolicies"]:
            raise delete_conflict("Cannot delete entity, must detach all policies first.")
        if entity["InlinePolicies"]:
            raise delete_conflict("Cannot delete entity, must delete policies first.")
