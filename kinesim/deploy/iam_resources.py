"""IAM resources, accepted and recorded but not made: AWS::IAM::Role, Policy, ManagedPolicy."""
from __future__ import annotations

import random
import string
from typing import Any, ClassVar

from .resources import Applied, ResourceHandler, generated_name


class IamResource(ResourceHandler):
    """IAM is not emulated: kinesim does not check permissions. The resources are accepted so
    that templates written for AWS deploy unchanged, and given the names and ARNs CloudFormation
    would give them (functions need a role ARN)."""
    ignored = True
    note = "IAM is not emulated: kinesim does not check permissions"
    id_prefix: ClassVar[str] = ""

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        return properties

    def _arn(self, kind: str, name: str, desired: dict[str, Any]) -> str:
        t = self.target
        return f"arn:{t.partition}:iam::{t.account_id}:{kind}{desired.get('Path', '/')}{name}"

    def _unique_id(self) -> str:
        return self.id_prefix + "".join(random.choices(string.ascii_uppercase + string.digits, k=17))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        pass


class ResourcePolicy(IamResource):
    """A service's resource policy (a queue's, a topic's): recorded with an id, not applied."""
    name_property = None
    attributes = frozenset({"Id"})
    kind: ClassVar[str] = "Policy"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        physical_id = generated_name(self.target.stack_name, self.kind, 64)
        return Applied(physical_id, {"Id": physical_id})


class IamRole(IamResource):
    type_name = "AWS::IAM::Role"
    name_property = "RoleName"
    attributes = frozenset({"Arn", "RoleId"})
    id_prefix = "AROA"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        return Applied(name, {"Arn": self._arn("role", name, desired), "RoleId": self._unique_id()})


class IamPolicy(IamResource):
    type_name = "AWS::IAM::Policy"
    name_property = None
    attributes = frozenset({"Id"})

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        physical_id = generated_name(self.target.stack_name, "Policy", 64)
        return Applied(physical_id, {"Id": physical_id})


class IamManagedPolicy(IamResource):
    type_name = "AWS::IAM::ManagedPolicy"
    name_property = "ManagedPolicyName"
    attributes = frozenset({"PolicyArn", "PolicyId"})
    id_prefix = "ANPA"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        arn = self._arn("policy", name, desired)  # Ref to a managed policy is its ARN
        return Applied(arn, {"PolicyArn": arn, "PolicyId": self._unique_id()})
