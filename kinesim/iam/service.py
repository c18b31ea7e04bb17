"""IAM as a service: the operations by their action names, each checked against botocore's model
first, each served under one lock (every write reads an entity, changes it and writes it back).

The account's entities live in the store (`records.py`); AWS's managed policies are data
(`managed_data.py`). Nothing here is enforced: see the package's docstring.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Callable

from kinesim.config import Settings, partition_of
from kinesim.protocol.errors import AwsError
from kinesim.protocol.validation import ModelValidator
from kinesim.store import Store

from .groups import Groups
from .instance_profiles import InstanceProfiles
from .policies import Policies
from .roles import Roles
from .users import Users

Operation = Callable[[dict[str, Any]], Any]


class IamService:
    def __init__(self, settings: Settings, store: Store):
        account, partition = settings.account_id, partition_of(settings.region)
        self.validator = ModelValidator("iam")
        self.lock = threading.RLock()
        self.policies = Policies(store, account, partition, self._attachment_counts)
        self.roles = Roles(store, account, partition, self.policies)
        self.users = Users(store, account, partition, self.policies)
        self.groups = Groups(store, account, partition, self.policies, self.users)
        self.instance_profiles = InstanceProfiles(store, account, partition, self.roles)
        roles, policies, users, groups = self.roles, self.policies, self.users, self.groups
        self.operations: dict[str, Operation] = {
            **_named(roles, "create_role", "get_role", "list_roles", "delete_role", "update_role",
                     "update_role_description", "update_assume_role_policy", "put_role_permissions_boundary",
                     "delete_role_permissions_boundary", "tag_role", "untag_role", "list_role_tags"),
            **_entity_policies(roles.entity_policies, "Role"),
            **_named(policies, "create_policy", "get_policy", "list_policies", "delete_policy", "tag_policy",
                     "untag_policy", "list_policy_tags", "get_policy_version", "list_policy_versions",
                     "create_policy_version", "delete_policy_version", "set_default_policy_version"),
            **_named(users, "create_user", "get_user", "list_users", "update_user", "delete_user", "tag_user",
                     "untag_user", "list_user_tags", "put_user_permissions_boundary",
                     "delete_user_permissions_boundary", "create_access_key", "list_access_keys",
                     "update_access_key", "delete_access_key", "get_access_key_last_used"),
            **_entity_policies(users.entity_policies, "User"),
            **_named(groups, "create_group", "get_group", "list_groups", "list_groups_for_user", "update_group",
                     "delete_group", "add_user_to_group", "remove_user_from_group"),
            **_entity_policies(groups.entity_policies, "Group"),
            **_named(self.instance_profiles, "create_instance_profile", "get_instance_profile",
                     "list_instance_profiles", "delete_instance_profile", "add_role_to_instance_profile",
                     "remove_role_from_instance_profile", "list_instance_profiles_for_role",
                     "tag_instance_profile", "untag_instance_profile", "list_instance_profile_tags"),
            "ListEntitiesForPolicy": self.list_entities_for_policy,
        }

    def close(self) -> None:
        """Nothing runs in the background."""

    def _attachment_counts(self) -> Counter:
        counts: Counter = Counter()
        for kind in (self.roles, self.users, self.groups):
            counts.update(kind.entity_policies.attached_arns())
        return counts

    def list_entities_for_policy(self, p: dict[str, Any]) -> dict[str, Any]:
        """The roles, users and groups a managed policy is attached to (EntityFilter and PathPrefix
        choose among them; not paged: an answer holds at most every entity of the account)."""
        self.policies.find_existing(p["PolicyArn"])
        wanted = p.get("EntityFilter")
        out: dict[str, Any] = {"PolicyGroups": [], "PolicyUsers": [], "PolicyRoles": [], "IsTruncated": False}
        for noun, kind in (("Role", self.roles), ("User", self.users), ("Group", self.groups)):
            if wanted in (None, noun):
                entities = kind.entity_policies.attached_to(p["PolicyArn"])
                if p.get("PathPrefix"):
                    paths = {e[f"{noun}Name"]: kind.table.get(e[f"{noun}Name"])["Path"] for e in entities}
                    entities = [e for e in entities if paths[e[f"{noun}Name"]].startswith(p["PathPrefix"])]
                out[f"Policy{noun}s"] = entities
        return out

    def has_operation(self, action: str) -> bool:
        return action in self.operations

    def call(self, action: str, params: dict[str, Any]) -> dict[str, Any] | None:
        try:
            params = self.validator.parse(action, params)
        except AwsError as err:
            # IAM is a query service: the same sentence under the query protocol's code
            if err.code == "ValidationException":
                raise AwsError("ValidationError", err.message) from None
            raise
        with self.lock:
            return self.operations[action](params)


def _named(target: Any, *methods: str) -> dict[str, Operation]:
    """`target`'s methods by the actions they serve (create_role: CreateRole)."""
    return {"".join(part.title() for part in method.split("_")): getattr(target, method) for method in methods}


def _entity_policies(policies: Any, noun: str) -> dict[str, Operation]:
    """The policy operations of one kind of identity (PutRolePolicy, AttachUserPolicy, ...)."""
    return {f"Put{noun}Policy": policies.put_inline, f"Get{noun}Policy": policies.get_inline,
            f"Delete{noun}Policy": policies.delete_inline, f"List{noun}Policies": policies.list_inline,
            f"Attach{noun}Policy": policies.attach, f"Detach{noun}Policy": policies.detach,
            f"ListAttached{noun}Policies": policies.list_attached}
