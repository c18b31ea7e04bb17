"""What deploying a template would change, as a change set lists it: each resource to Add,
Modify (in place, or with Replacement) or Remove, with the properties that differ.

The engine's own plan decides (kinesim.deploy.plan.decide, with each handler's replacement
rules), so a change set says what executing it does. A property that refers to a resource being
added or replaced cannot be known before the deploy: its resource shows as a Modify whose
Replacement is "Conditional", as CloudFormation shows it.

The Details name the template's properties, as AWS lists them (LocalStack's recordings of AWS,
test_changesets.snapshot.json): a property written differently is a Static DirectModification; one
whose text is the same but refers to a parameter given another value is a Static
ParameterReference naming the parameter, followed by a Dynamic DirectModification. Each says
whether changing it recreates the resource (Always for the type's create-only properties).
"""
from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kinesim.deploy.plan import as_stored, decide
from kinesim.deploy.resources import create_only_properties
from kinesim.deploy.stack import Prepared
from kinesim.deploy.template import DeployError


def resource_changes(deployer: Any, prepared: Prepared, state: dict[str, Any]) -> list[dict[str, Any]]:
    resolver = prepared.resolver
    current: dict[str, Any] = state.get("Resources") or {}
    for lid, record in current.items():
        if record.get("PhysicalResourceId"):
            resolver.known(lid, record["PhysicalResourceId"], record.get("Attributes") or {})
    old_template = (state.get("ProcessedTemplate") or {}).get("Resources") or {}
    changed_parameters = {key for key, value in prepared.parameters.items()
                          if (state.get("Parameters") or {}).get(key) != value}
    changes = []
    for lid in prepared.order:
        resource = prepared.template["Resources"][lid]
        type_name = resource["Type"]
        record = current.get(lid)
        if record is None:
            resolver.physical_ids.pop(lid, None)
            changes.append(_change("Add", lid, resource, None))
            continue
        handler = deployer.handler(type_name)
        try:
            desired = as_stored(handler.desired(resolver.resolve(resource.get("Properties") or {})))
            action, _ = decide(handler, record, type_name, desired)
        except (DeployError, ClientError, BotoCoreError):
            details = [_detail(name, "Conditional", "Dynamic", "ResourceReference")
                       for name in sorted(resource.get("Properties") or {})]
            changes.append(_change("Modify", lid, resource, record, "Conditional", details))
            continue
        if action == "unchanged":
            continue
        replacing = action == "replace"
        if replacing:
            resolver.physical_ids.pop(lid, None)  # its dependents see a new resource
        details = _details(type_name, (old_template.get(lid) or {}).get("Properties"),
                           resource.get("Properties") or {}, changed_parameters)
        if not details:  # the same text, resolved otherwise (an attribute of another resource)
            details = [_detail(name, _recreation(type_name, name), "Dynamic", "DirectModification")
                       for name in sorted(k for k in set(record["Properties"]) | set(desired)
                                          if record["Properties"].get(k) != desired.get(k))]
        changes.append(_change("Modify", lid, resource, record, "True" if replacing else "False", details))
    for lid, record in current.items():
        if lid not in prepared.dependencies:
            changes.append(_change("Remove", lid, {"Type": record["Type"],
                                                   "DeletionPolicy": record.get("DeletionPolicy")}, record))
    return changes


def _details(type_name: str, old: dict[str, Any] | None, new: dict[str, Any],
             changed_parameters: set[str]) -> list[dict[str, Any]]:
    if old is None:
        return []
    details = []
    for name in sorted(set(old) | set(new)):
        requires = _recreation(type_name, name)
        if old.get(name) != new.get(name):
            details.append(_detail(name, requires, "Static", "DirectModification"))
            continue
        causes = sorted(_parameter_refs(new.get(name)) & changed_parameters)
        for parameter in causes:
            details.append({**_detail(name, requires, "Static", "ParameterReference"), "CausingEntity": parameter})
        if causes:
            details.append(_detail(name, requires, "Dynamic", "DirectModification"))
    return details


def _parameter_refs(value: Any) -> set[str]:
    """The names a value refers to with Ref (and ${Name} in Fn::Sub): its parameters among them."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        sub = value.get("Fn::Sub")
        text = sub[0] if isinstance(sub, list) and sub else sub
        if isinstance(text, str):
            found.update(part.split("}", 1)[0] for part in text.split("${")[1:])
        for item in value.values():
            found |= _parameter_refs(item)
    elif isinstance(value, list):
        for item in value:
            found |= _parameter_refs(item)
    return found


def _recreation(type_name: str, name: str) -> str:
    return "Always" if name in create_only_properties(type_name) else "Never"


def _detail(name: str, requires: str, evaluation: str, source: str) -> dict[str, Any]:
    return {"Target": {"Attribute": "Properties", "Name": name, "RequiresRecreation": requires},
            "Evaluation": evaluation, "ChangeSource": source}


def _change(action: str, lid: str, resource: dict[str, Any], record: dict[str, Any] | None,
            replacement: str | None = None, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    change: dict[str, Any] = {"Action": action, "LogicalResourceId": lid, "ResourceType": resource["Type"],
                              "Scope": [], "Details": []}
    if record is not None and record.get("PhysicalResourceId"):
        change["PhysicalResourceId"] = record["PhysicalResourceId"]
    # What becomes of the resource as it is: AWS says it for a removal and a replacement.
    if action == "Remove":
        change["PolicyAction"] = "Retain" if resource.get("DeletionPolicy") == "Retain" else "Delete"
    if action == "Modify":
        change["Replacement"] = replacement
        change["Scope"] = ["Properties"]
        change["Details"] = details or []
        if replacement == "True":
            change["PolicyAction"] = ("ReplaceAndRetain" if resource.get("UpdateReplacePolicy") == "Retain"
                                      else "ReplaceAndDelete")
    return {"Type": "Resource", "ResourceChange": change}
