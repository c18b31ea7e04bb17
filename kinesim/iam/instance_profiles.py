"""Instance profiles: CreateInstanceProfile ... DeleteInstanceProfile, the role each holds
(AddRoleToInstanceProfile, RemoveRoleFromInstanceProfile, ListInstanceProfilesForRole) and their
tags.

An instance profile record: `{InstanceProfileName, InstanceProfileId, Arn, Path, CreateDate, Roles
(names), Tags}`. A profile holds at most one role (AWS's InstanceSessionsPerInstanceProfile quota);
a role in a profile cannot be deleted (roles.py asks `holding`). AWS's sentences as its answers
quoted in users' reports have them ("Instance Profile NAME cannot be found.", "... already
exists.", "Cannot delete entity, must remove roles from instance profile first.").
"""
from __future__ import annotations

from typing import Any

from . import documents
from .errors import already_exists, delete_conflict, limit_exceeded, no_such_entity
from .records import Table, arn, merged_tags, now, page, under_path, unique_id, without_tags
from .roles import Roles

ROLES_PER_PROFILE = 1


class InstanceProfiles:
    def __init__(self, store: Any, account: str, partition: str, roles: Roles):
        self.table = Table(store, "instance-profile")
        self.account = account
        self.partition = partition
        self.roles = roles
        roles.in_instance_profile = self.holding

    def profile(self, name: str) -> dict[str, Any]:
        profile = self.table.get(name)
        if profile is None:
            raise no_such_entity(f"Instance Profile {name} cannot be found.")
        return profile

    def holding(self, role_name: str) -> list[dict[str, Any]]:
        """The instance profiles that hold the role."""
        return [p for p in self.table.all() if role_name.lower() in (r.lower() for r in p["Roles"])]

    def _role_answer(self, role: dict[str, Any]) -> dict[str, Any]:
        # A profile's roles as AWS's GetInstanceProfile lists them (its API reference's example).
        out = {k: role[k] for k in ("Path", "RoleName", "RoleId", "Arn", "CreateDate")}
        out["AssumeRolePolicyDocument"] = documents.answered(role["AssumeRolePolicyDocument"])
        return out

    def answer(self, profile: dict[str, Any], tags: bool = True) -> dict[str, Any]:
        out = {k: profile[k] for k in ("Path", "InstanceProfileName", "InstanceProfileId", "Arn", "CreateDate")}
        out["Roles"] = [self._role_answer(r) for r in map(self.roles.table.get, profile["Roles"]) if r is not None]
        if tags and profile.get("Tags"):
            out["Tags"] = profile["Tags"]
        return out

    def _save(self, profile: dict[str, Any]) -> None:
        self.table.put(profile["InstanceProfileName"], profile)

    # operations

    def create_instance_profile(self, p: dict[str, Any]) -> dict[str, Any]:
        name, path = p["InstanceProfileName"], p.get("Path", "/")
        if self.table.get(name) is not None:
            raise already_exists(f"Instance Profile {name} already exists.")
        profile = {"InstanceProfileName": name, "InstanceProfileId": unique_id("AIPA"), "Path": path,
                   "Arn": arn(self.partition, self.account, "instance-profile", path, name), "CreateDate": now(),
                   "Roles": [], "Tags": merged_tags([], p.get("Tags") or [])}
        self._save(profile)
        return {"InstanceProfile": self.answer(profile)}

    def get_instance_profile(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"InstanceProfile": self.answer(self.profile(p["InstanceProfileName"]))}

    def list_instance_profiles(self, p: dict[str, Any]) -> dict[str, Any]:
        # Listed without their tags, as AWS's ListInstanceProfiles answers them.
        listed = [self.answer(x, tags=False) for x in under_path(self.table.all(), p.get("PathPrefix"))]
        return page(listed, p, lambda x: x["InstanceProfileName"].lower(), "InstanceProfiles")

    def list_instance_profiles_for_role(self, p: dict[str, Any]) -> dict[str, Any]:
        role = self.roles.role(p["RoleName"])
        listed = [self.answer(x, tags=False) for x in self.holding(role["RoleName"])]
        return page(listed, p, lambda x: x["InstanceProfileName"].lower(), "InstanceProfiles")

    def delete_instance_profile(self, p: dict[str, Any]) -> None:
        profile = self.profile(p["InstanceProfileName"])
        if profile["Roles"]:
            raise delete_conflict("Cannot delete entity, must remove roles from instance profile first.")
        self.table.delete(profile["InstanceProfileName"])

    def add_role_to_instance_profile(self, p: dict[str, Any]) -> None:
        profile = self.profile(p["InstanceProfileName"])
        role = self.roles.role(p["RoleName"])
        if len(profile["Roles"]) >= ROLES_PER_PROFILE:  # the same role again too, as in AWS
            raise limit_exceeded(f"Cannot exceed quota for InstanceSessionsPerInstanceProfile: {ROLES_PER_PROFILE}")
        profile["Roles"].append(role["RoleName"])
        self._save(profile)

    def remove_role_from_instance_profile(self, p: dict[str, Any]) -> None:
        profile = self.profile(p["InstanceProfileName"])
        role = self.roles.role(p["RoleName"])
        held = [r for r in profile["Roles"] if r.lower() == role["RoleName"].lower()]
        if not held:
            # AWS documents NoSuchEntity here, without the sentence: kinesim's says what is missing.
            raise no_such_entity(f"The role with name {role['RoleName']} cannot be found in instance profile "
                                 f"{profile['InstanceProfileName']}.")
        profile["Roles"] = [r for r in profile["Roles"] if r not in held]
        self._save(profile)

    def tag_instance_profile(self, p: dict[str, Any]) -> None:
        profile = self.profile(p["InstanceProfileName"])
        profile["Tags"] = merged_tags(profile["Tags"], p["Tags"])
        self._save(profile)

    def untag_instance_profile(self, p: dict[str, Any]) -> None:
        profile = self.profile(p["InstanceProfileName"])
        profile["Tags"] = without_tags(profile["Tags"], p["TagKeys"])
        self._save(profile)

    def list_instance_profile_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        return page(self.profile(p["InstanceProfileName"])["Tags"], p, lambda t: t["Key"], "Tags")
