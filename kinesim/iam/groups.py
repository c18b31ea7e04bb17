"""Groups and their members: CreateGroup ... UpdateGroup ... DeleteGroup, AddUserToGroup,
RemoveUserFromGroup, ListGroupsForUser. Their inline and attached policies are `entity_policies.py`'s.

A group record: `{GroupName, GroupId, Arn, Path, CreateDate, Users (names), InlinePolicies,
AttachedPolicies}`.
"""
from __future__ import annotations

from typing import Any

from . import documents
from .entity_policies import EntityKind, EntityPolicies
from .errors import already_exists, delete_conflict, no_such_entity
from .policies import Policies
from .records import Table, arn, now, page, under_path, unique_id
from .users import Users

KIND = EntityKind("group", "GroupName", documents.GROUP_INLINE_SIZE, "PoliciesPerGroup")


class Groups:
    def __init__(self, store: Any, account: str, partition: str, policies: Policies, users: Users):
        self.table = Table(store, "group")
        self.account = account
        self.partition = partition
        self.users = users
        self.entity_policies = EntityPolicies(self.table, KIND, policies)
        users.groups_of = self.groups_of
        users.member_renamed = self._member_renamed

    def group(self, name: str) -> dict[str, Any]:
        return self.entity_policies.entity(name)

    def answer(self, group: dict[str, Any]) -> dict[str, Any]:
        return {k: group[k] for k in ("Path", "GroupName", "GroupId", "Arn", "CreateDate")}

    def groups_of(self, user_name: str) -> list[dict[str, Any]]:
        return [g for g in self.table.all() if user_name.lower() in (u.lower() for u in g["Users"])]

    def create_group(self, p: dict[str, Any]) -> dict[str, Any]:
        name, path = p["GroupName"], p.get("Path", "/")
        if self.table.get(name) is not None:
            raise already_exists(f"Group with name {name} already exists.")
        group = {"GroupName": name, "GroupId": unique_id("AGPA"), "Path": path, "CreateDate": now(),
                 "Arn": arn(self.partition, self.account, "group", path, name),
                 "Users": [], "InlinePolicies": {}, "AttachedPolicies": []}
        self.table.put(name, group)
        return {"Group": self.answer(group)}

    def get_group(self, p: dict[str, Any]) -> dict[str, Any]:
        group = self.group(p["GroupName"])
        members = [u for u in map(self.users.table.get, group["Users"]) if u is not None]
        out = page([self.users.answer(u) for u in members], p, lambda u: u["UserName"].lower(), "Users")
        out["Group"] = self.answer(group)
        return out

    def list_groups(self, p: dict[str, Any]) -> dict[str, Any]:
        listed = [self.answer(g) for g in under_path(self.table.all(), p.get("PathPrefix"))]
        return page(listed, p, lambda g: g["GroupName"].lower(), "Groups")

    def list_groups_for_user(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.user(p["UserName"])
        listed = [self.answer(g) for g in self.groups_of(user["UserName"])]
        return page(listed, p, lambda g: g["GroupName"].lower(), "Groups")

    def _member_renamed(self, old: str, new: str) -> None:
        for group in self.groups_of(old):
            group["Users"] = [new if u.lower() == old.lower() else u for u in group["Users"]]
            self.table.put(group["GroupName"], group)

    def update_group(self, p: dict[str, Any]) -> None:
        """A new path or name: the group keeps its id, policies and members; its ARN follows."""
        group = self.group(p["GroupName"])
        old_name, name = group["GroupName"], p.get("NewGroupName") or group["GroupName"]
        if name.lower() != old_name.lower() and self.table.get(name) is not None:
            raise already_exists(f"Group with name {name} already exists.")
        group["GroupName"], group["Path"] = name, p.get("NewPath") or group["Path"]
        group["Arn"] = arn(self.partition, self.account, "group", group["Path"], name)
        if name != old_name:
            self.table.delete(old_name)
        self.table.put(name, group)

    def delete_group(self, p: dict[str, Any]) -> None:
        group = self.group(p["GroupName"])
        if group["Users"]:
            raise delete_conflict("Cannot delete entity, must remove users from group first.")
        self.entity_policies.check_deletable(group)
        self.table.delete(group["GroupName"])

    def add_user_to_group(self, p: dict[str, Any]) -> None:
        group = self.group(p["GroupName"])
        user = self.users.user(p["UserName"])
        if user["UserName"] not in group["Users"]:
            group["Users"].append(user["UserName"])
            self.table.put(group["GroupName"], group)

    def remove_user_from_group(self, p: dict[str, Any]) -> None:
        group = self.group(p["GroupName"])
        user = self.users.user(p["UserName"])
        if user["UserName"] not in group["Users"]:
            raise no_such_entity(f"User {user['UserName']} not in group {group['GroupName']}")
        group["Users"].remove(user["UserName"])
        self.table.put(group["GroupName"], group)
