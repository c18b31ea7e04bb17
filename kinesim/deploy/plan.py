"""The plan's pieces shared by the stack engine and its rollback: dependency order, what to do
with a resource, and errors named after the resource they concern."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .resources import ResourceHandler
from .template import DeployError, TemplateError


def creation_order(dependencies: dict[str, list[str]], template_order: list[str]) -> list[str]:
    """Resources ordered so that each comes after what it depends on; otherwise in template order."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(lid: str, path: list[str]) -> None:
        if state.get(lid) == "done":
            return
        if state.get(lid) == "visiting":
            cycle = path[path.index(lid):-1]
            raise TemplateError(f"Circular dependency between resources: [{', '.join(sorted(cycle))}]")
        state[lid] = "visiting"
        for dep in dependencies.get(lid, []):
            if dep in dependencies:
                visit(dep, path + [dep])
        state[lid] = "done"
        order.append(lid)

    for lid in template_order:
        visit(lid, [lid])
    return order


def _dependencies_of(resources: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    return {lid: [d for d in record.get("DependsOn", []) if d in resources] for lid, record in resources.items()}


def deletion_order(resources: dict[str, dict[str, Any]]) -> list[str]:
    """Recorded resources in the order to delete them: dependents before what they depend on."""
    return list(reversed(creation_order(_dependencies_of(resources), list(resources))))


def decide(handler: ResourceHandler, record: dict[str, Any] | None, type_name: str,
           desired: dict[str, Any]) -> tuple[str, list[str]]:
    """What to do with a resource: create, update, replace (with the reasons) or nothing."""
    if record is None:
        return "create", []
    if record["Type"] != type_name:
        return "replace", ["Type"]
    if as_stored(record["Properties"]) == as_stored(desired):
        # An update a killed deploy left half-done is made again.
        return ("update", []) if record.get("Status") == "UPDATE_IN_PROGRESS" else ("unchanged", [])
    reasons = handler.replacement_reasons(record["Properties"], as_stored(desired))
    return ("replace", reasons) if reasons else ("update", [])


def as_stored(value: Any) -> Any:
    """As stored: JSON's types only, so that what was stored compares equal to what is desired
    (the API's change sets compare properties so too)."""
    return json.loads(json.dumps(value))


def _as_found(record: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The properties to update a resource from. After an interrupted update a property may hold
    its old value or the one being applied (`Target`): where the old one is not what is now
    desired it is sent again, and where the old one is, the value being applied counts as
    current, so that it is sent back."""
    old = record["Properties"]
    if record.get("Status") != "UPDATE_IN_PROGRESS":
        return old
    target = record.get("Target") or {}
    out = {}
    for key in set(old) | set(target):
        source = old if old.get(key) != desired.get(key) else target
        if key in source:
            out[key] = source[key]
    return out


def name_of(record: dict[str, Any], handler: ResourceHandler) -> str | None:
    """The name a recorded resource was created with (what its handler's create() took): not
    always its physical id (a queue's is its URL, a managed policy's its ARN)."""
    if not handler.name_property:
        return None
    return record.get("Name") or record["Properties"].get(handler.name_property) or record.get("PhysicalResourceId")


def _now() -> str:
    # milliseconds, as CloudFormation's times: a stack's LastUpdatedTime is never before the
    # CreationTime (full precision) the service gave it
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def event_reason(err: BaseException, lid: str, type_name: str) -> str:
    """An error as a resource's event gives it: without the name `_about` put in front (the event
    names the resource already), as CloudFormation words a handler's or provider's message."""
    return str(err).removeprefix(f"resource {lid} ({type_name}): ")


class _about:
    """Errors inside name the resource: `resource Foo (AWS::Kinesis::Stream): ...`."""

    def __init__(self, lid: str, type_name: str | None):
        self.prefix = f"resource {lid} ({type_name})" if type_name else lid

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, err: BaseException | None, tb: Any) -> bool:
        if isinstance(err, ClientError):
            error = err.response.get("Error", {})
            raise DeployError(f"{self.prefix}: {err.operation_name} failed: {error.get('Code')}: "
                              f"{error.get('Message')}") from None
        if isinstance(err, BotoCoreError):
            raise DeployError(f"{self.prefix}: {err}") from None
        if isinstance(err, DeployError) and not str(err).startswith(self.prefix):
            raise type(err)(f"{self.prefix}: {err}") from None
        return False
