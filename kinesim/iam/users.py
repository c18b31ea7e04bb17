"""Users and their access keys: CreateUser ... UpdateUser ... DeleteUser, their permissions
boundaries, CreateAccessKey ... DeleteAccessKey. Their inline and attached policies are
`entity_policies.py`'s; groups are `groups.py`'s.

A user record: `{UserName, UserId, Arn, Path, CreateDate, PermissionsBoundary, Tags,
InlinePolicies, AttachedPolicies}`; an access key `{UserName, AccessKeyId, SecretAccessKey, Status,
CreateDate}` (kind `iam-access-key`, by its id). A request signed with an Active key is accepted
by `--verify-signatures` and STS answers for it as the user (`principals.py`).
"""
from __future__ import annotations

import base64
import os
from typing import Any, Callable

from kinesim.protocol.errors import AwsError
from kinesim.scopes import key_id

from . import documents
from .entity_policies import EntityKind, EntityPolicies
from .errors import already_exists, delete_conflict, limit_exceeded, no_such_entity
from .policies import Policies
from .records import Table, arn, merged_tags, now, page, under_path, unique_id, without_tags

KIND = EntityKind("user", "UserName", documents.USER_INLINE_SIZE, "PoliciesPerUser")
ACCESS_KEYS_PER_USER = 2


class Users:
    def __init__(self, store: Any, account: str, partition: str, policies: Policies):
        self.table = Table(store, "user")
        self.keys = Table(store, "access-key")
        self.account = account
        self.partition = partition
        self.entity_policies = EntityPolicies(self.table, KIND, policies)
        # The groups a user is in (groups.py keeps the membership): a user in one cannot be deleted.
        self.groups_of: Callable[[str], list[str]] = lambda user_name: []
        # A user renamed: groups.py renames the member (old name, new name).
        self.member_renamed: Callable[[str, str], None] = lambda old, new: None

    def user(self, name: str) -> dict[str, Any]:
        return self.entity_policies.entity(name)

    def answer(self, user: dict[str, Any]) -> dict[str, Any]:
        out = {k: user[k] for k in ("Path", "UserName", "UserId", "Arn", "CreateDate")}
        for optional in ("PermissionsBoundary", "Tags"):
            if user.get(optional):
                out[optional] = user[optional]
        return out

    def create_user(self, p: dict[str, Any]) -> dict[str, Any]:
        name, path = p["UserName"], p.get("Path", "/")
        if self.table.get(name) is not None:
            raise already_exists(f"User with name {name} already exists.")
        user = {"UserName": name, "UserId": unique_id("AIDA"),
                "Arn": arn(self.partition, self.account, "user", path, name),
                "Path": path, "CreateDate": now(), "PermissionsBoundary": _boundary(p.get("PermissionsBoundary")),
                "Tags": merged_tags([], p.get("Tags") or []), "InlinePolicies": {}, "AttachedPolicies": []}
        self.table.put(name, user)
        return {"User": self.answer(user)}

    def get_user(self, p: dict[str, Any]) -> dict[str, Any]:
        if p.get("UserName") is None:
            # The caller: kinesim's callers are the account's root user (see sts/service.py), whose
            # answer has no user name or path; kinesim knows no date the account was made.
            return {"User": {"UserId": self.account, "Arn": f"arn:{self.partition}:iam::{self.account}:root"}}
        return {"User": self.answer(self.user(p["UserName"]))}

    def list_users(self, p: dict[str, Any]) -> dict[str, Any]:
        listed = []
        for user in under_path(self.table.all(), p.get("PathPrefix")):
            out = self.answer(user)
            out.pop("Tags", None)  # ListUsers leaves tags and boundaries out, as AWS's does
            out.pop("PermissionsBoundary", None)
            listed.append(out)
        return page(listed, p, lambda u: u["UserName"].lower(), "Users")

    def delete_user(self, p: dict[str, Any]) -> None:
        user = self.user(p["UserName"])
        if self._keys_of(user["UserName"]):
            raise delete_conflict("Cannot delete entity, must delete access keys first.")
        if self.groups_of(user["UserName"]):
            raise delete_conflict("Cannot delete entity, must remove users from group first.")
        self.entity_policies.check_deletable(user)
        self.table.delete(user["UserName"])

    def update_user(self, p: dict[str, Any]) -> None:
        """A new path or name: the user keeps its id, policies, keys and groups; its ARN follows."""
        user = self.user(p["UserName"])
        old_name, name = user["UserName"], p.get("NewUserName") or user["UserName"]
        if name.lower() != old_name.lower() and self.table.get(name) is not None:
            raise already_exists(f"User with name {name} already exists.")
        user["UserName"], user["Path"] = name, p.get("NewPath") or user["Path"]
        user["Arn"] = arn(self.partition, self.account, "user", user["Path"], name)
        if name != old_name:
            for key in self._keys_of(old_name):
                key["UserName"] = name
                self.keys.put(key["AccessKeyId"], key)
            self.member_renamed(old_name, name)
            self.table.delete(old_name)
        self.table.put(name, user)

    def put_user_permissions_boundary(self, p: dict[str, Any]) -> None:
        user = self.user(p["UserName"])
        user["PermissionsBoundary"] = _boundary(p["PermissionsBoundary"])
        self.table.put(user["UserName"], user)

    def delete_user_permissions_boundary(self, p: dict[str, Any]) -> None:
        user = self.user(p["UserName"])
        user["PermissionsBoundary"] = None
        self.table.put(user["UserName"], user)

    def tag_user(self, p: dict[str, Any]) -> None:
        user = self.user(p["UserName"])
        user["Tags"] = merged_tags(user["Tags"], p["Tags"])
        self.table.put(user["UserName"], user)

    def untag_user(self, p: dict[str, Any]) -> None:
        user = self.user(p["UserName"])
        user["Tags"] = without_tags(user["Tags"], p["TagKeys"])
        self.table.put(user["UserName"], user)

    def list_user_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        return page(self.user(p["UserName"])["Tags"], p, lambda t: t["Key"], "Tags")

    # access keys

    def _keys_of(self, user_name: str) -> list[dict[str, Any]]:
        return [k for k in self.keys.all() if k["UserName"].lower() == user_name.lower()]

    def _named_user(self, p: dict[str, Any]) -> dict[str, Any]:
        if p.get("UserName") is None:
            # kinesim's callers are the account's root user, whose keys IAM's users API does not manage.
            raise AwsError("ValidationError", "Must specify userName when calling with non-User credentials")
        return self.user(p["UserName"])

    def create_access_key(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self._named_user(p)
        if len(self._keys_of(user["UserName"])) >= ACCESS_KEYS_PER_USER:
            raise limit_exceeded(f"Cannot exceed quota for AccessKeysPerUser: {ACCESS_KEYS_PER_USER}")
        # long-term keys begin AKIA (temporary ones ASIA) and carry their account as AWS's do
        # (kinesim.scopes); secrets are 40 base64 characters
        key = {"UserName": user["UserName"], "AccessKeyId": key_id("AKIA", self.account),
               "SecretAccessKey": base64.b64encode(os.urandom(30)).decode(), "Status": "Active", "CreateDate": now()}
        self.keys.put(key["AccessKeyId"], key)
        return {"AccessKey": key}

    def _key(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self._named_user(p)
        key = self.keys.get(p["AccessKeyId"])
        if key is None or key["UserName"].lower() != user["UserName"].lower():
            raise no_such_entity(f"The Access Key with id {p['AccessKeyId']} cannot be found")
        return key

    def list_access_keys(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self._named_user(p)
        listed = [{k: key[k] for k in ("UserName", "AccessKeyId", "Status", "CreateDate")}
                  for key in self._keys_of(user["UserName"])]
        return page(listed, p, lambda k: k["AccessKeyId"], "AccessKeyMetadata")

    def update_access_key(self, p: dict[str, Any]) -> None:
        key = self._key(p)
        key["Status"] = p["Status"]
        self.keys.put(key["AccessKeyId"], key)

    def delete_access_key(self, p: dict[str, Any]) -> None:
        self.keys.delete(self._key(p)["AccessKeyId"])

    def get_access_key_last_used(self, p: dict[str, Any]) -> dict[str, Any]:
        key = self.keys.get(p["AccessKeyId"])
        if key is None:
            raise AwsError("AccessDenied", "The access key ID you specified was not found", 403)
        # kinesim records no use of a key: AWS's answer for a key never used
        return {"UserName": key["UserName"], "AccessKeyLastUsed": {"ServiceName": "N/A", "Region": "N/A"}}


def _boundary(boundary_arn: str | None) -> dict[str, str] | None:
    # Recorded as given, as a role's is (roles.py).
    if boundary_arn is None:
        return None
    return {"PermissionsBoundaryType": "Policy", "PermissionsBoundaryArn": boundary_arn}
