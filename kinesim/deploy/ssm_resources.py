"""Systems Manager resources: AWS::SSM::Parameter, a Parameter Store parameter. Its `Ref` is the
parameter's name; `Fn::GetAtt` gives `Type` and `Value` (LocalStack's recordings of AWS,
test_parameter.py: the other attributes of the schema are not readable).

CloudFormation names a parameter the template names not `CFN-<LogicalId>-<12 letters and digits>`
("CFN-MyResource-ywXNmT4uRH69" in the same recordings), not after the stack. It creates no
SecureString parameter: the type's schema allows String and StringList only, and AWS's resource
provider answers "SSM Parameters of type SecureString cannot be created using CloudFormation"
(aws-cloudformation-resource-providers-ssm#63). The `Tags` property is a map, not a list.
"""
from __future__ import annotations

import random
import string
from typing import Any

from botocore.exceptions import ClientError

from .resources import Applied, ResourceHandler, error_code, tag_map
from .template import DeployError

_TYPES = ("String", "StringList")
_TIERS = ("Standard", "Advanced", "Intelligent-Tiering")
_OPTIONAL = ("Description", "AllowedPattern", "Tier", "DataType")


def _text(value: Any, prop: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise DeployError(f"property {prop} of AWS::SSM::Parameter must be a string, not {type(value).__name__}")


class SsmParameter(ResourceHandler):
    type_name = "AWS::SSM::Parameter"
    name_property = "Name"
    name_max_length = 1011  # the longest name Parameter Store lets a user create
    attributes = frozenset({"Type", "Value"})
    SUPPORTED = {"Name", "Type", "Value", "Description", "AllowedPattern", "Tier", "Tags", "DataType"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        for required in ("Type", "Value"):
            if required not in properties:
                raise DeployError(f"property {required} of AWS::SSM::Parameter is required")
        kind = _text(properties["Type"], "Type")
        if kind == "SecureString":
            raise DeployError("SSM Parameters of type SecureString cannot be created using CloudFormation")
        if kind not in _TYPES:
            raise DeployError(f"property Type of AWS::SSM::Parameter must be one of {', '.join(_TYPES)}, not {kind!r}")
        tier = properties.get("Tier")
        if tier is not None and tier not in _TIERS:
            raise DeployError(f"property Tier of AWS::SSM::Parameter must be one of {', '.join(_TIERS)}, not {tier!r}")
        name = properties.get("Name")
        return {"Name": None if name is None else _text(name, "Name"), "Type": kind,
                "Value": _text(properties["Value"], "Value"),
                **{prop: None if properties.get(prop) is None else _text(properties[prop], prop) for prop in _OPTIONAL},
                "Tags": tag_map(properties.get("Tags"))}

    def generate_name(self, logical_id: str) -> str:
        suffix = "".join(random.choices(string.ascii_letters + string.digits, k=12))
        return f"CFN-{logical_id[:self.name_max_length - len(suffix) - 5]}-{suffix}"

    def _put(self, name: str, desired: dict[str, Any], overwrite: bool) -> None:
        request: dict[str, Any] = {"Name": name, "Value": desired["Value"], "Type": desired["Type"]}
        request.update({prop: desired[prop] for prop in _OPTIONAL if desired[prop] is not None})
        if overwrite:
            request["Overwrite"] = True
        elif desired["Tags"]:
            request["Tags"] = [{"Key": k, "Value": v} for k, v in desired["Tags"].items()]
        self.target.ssm.put_parameter(**request)

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        self._put(name, desired, overwrite=False)
        return Applied(name, {"Type": desired["Type"], "Value": desired["Value"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        ssm = self.target.ssm
        if any(old[k] != new[k] for k in ("Type", "Value", *_OPTIONAL)):
            cleared = {prop: "" for prop in ("Description", "AllowedPattern") if old[prop] and new[prop] is None}
            self._put(physical_id, {**new, **cleared}, overwrite=True)  # a new version of the parameter
        removed = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed:
            ssm.remove_tags_from_resource(ResourceType="Parameter", ResourceId=physical_id, TagKeys=removed)
        changed = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed:
            ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=physical_id,
                                     Tags=[{"Key": k, "Value": v} for k, v in changed.items()])
        return {"Type": new["Type"], "Value": new["Value"]}

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        try:
            self.target.ssm.delete_parameter(Name=physical_id)
        except ClientError as err:
            if error_code(err) != "ParameterNotFound":
                raise
