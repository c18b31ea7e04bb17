"""A stack: the template's resources planned in dependency order and applied idempotently.

Deploying compares each resource's desired properties with those applied last time (the stack's
state, kept on the kinesim server under `/_kinesim/stacks/<name>`) and creates, updates in
place, replaces or leaves it; resources gone from the template are deleted last, dependents
first. The state is saved after every resource, so a deploy that stops half-way (a bad value,
a server error) is picked up by the next one. There is no rollback: what was applied stays,
and is reported.
"""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError

from .intrinsics import Resolver, pseudo_parameters
from .handlers import HANDLERS
from .resources import ResourceHandler, Target, schema_attributes
from .sam import translate
from .template import DeployError, TemplateError, lint, load_template, parameter_values


class StateStore:
    """The stack states the server keeps: `GET/PUT/DELETE /_kinesim/stacks/<name>`, JSON bodies."""

    def __init__(self, endpoint_url: str):
        self.endpoint_url = endpoint_url.rstrip("/")

    def _call(self, method: str, name: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        url = f"{self.endpoint_url}/_kinesim/stacks/{urllib.parse.quote(name, safe='')}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as err:
            if err.code == 404 and method == "GET":
                return None
            raise DeployError(f"kinesim at {self.endpoint_url} refused {method} of stack {name}: "
                              f"HTTP {err.code} {err.read().decode(errors='replace')}") from None
        except OSError as err:
            raise DeployError(f"cannot reach kinesim at {self.endpoint_url} ({err}); is `kinesim serve` running? "
                              "(--endpoint-url or AWS_ENDPOINT_URL choose the server)") from None
        return json.loads(text) if text.strip() else None

    def get(self, name: str) -> dict[str, Any] | None:
        return self._call("GET", name)

    def put(self, name: str, state: dict[str, Any]) -> None:
        self._call("PUT", name, state)

    def delete(self, name: str) -> None:
        self._call("DELETE", name)


@dataclass
class Prepared:
    """A template made ready to apply: translated, checked, ordered."""
    template: dict[str, Any]
    resolver: Resolver
    order: list[str]  # included resources, each after what it depends on
    dependencies: dict[str, list[str]]
    parameters: dict[str, Any] = field(default_factory=dict)


def prepare(path: Path, target: Target, overrides: dict[str, str], stack_id: str, run_lint: bool = True) -> Prepared:
    """Load, lint, apply parameters and the SAM transform, and check everything that can be
    checked before a single call is made."""
    raw = load_template(path)
    if run_lint:
        errors = lint(path, target.region)
        if errors:
            raise TemplateError(f"{path.name} has {len(errors)} error(s) (cfn-lint; --no-lint skips this check):\n  "
                                + "\n  ".join(errors))
    parameters = parameter_values(raw, overrides)
    template = translate(raw, path.parent, target.region, parameters)
    pseudo = pseudo_parameters(target.region, target.account_id, target.stack_name, stack_id)
    resolver = Resolver(template, parameters, pseudo)
    dependencies = check(template, resolver)
    return Prepared(template, resolver, creation_order(dependencies, list(dependencies)), dependencies, parameters)


def check(template: dict[str, Any], resolver: Resolver) -> dict[str, list[str]]:
    """Every included resource has a supported type and refers only to resources and attributes
    that exist; returns each resource's dependencies (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    resources = template["Resources"]
    included = {lid for lid in resources if _resource(resources, lid) and resolver.included(lid)}
    dependencies: dict[str, list[str]] = {}
    for lid in resources:
        if lid not in included:
            continue
        type_name = resources[lid]["Type"]
        if type_name not in HANDLERS:
            raise DeployError(f"resource {lid}: type {type_name} is not supported by kinesim deploy "
                              f"(supported: {', '.join(sorted(HANDLERS))})")
        found: set[str] = set()
        for prop, value in (resources[lid].get("Properties") or {}).items():
            where = f"resource {lid}, property {prop}"
            found |= _checked_references(resolver.references(value), resources, included, resolver, where)
        depends_on = resources[lid].get("DependsOn") or []
        for name in [depends_on] if isinstance(depends_on, str) else depends_on:
            if name not in included:
                raise TemplateError(f"Template format error: resource {lid}, DependsOn: Unresolved resource "
                                    f"dependencies [{name}] in the Resources block of the template")
            found.add(name)
        dependencies[lid] = sorted(found)
    for name, output in (template.get("Outputs") or {}).items():
        if output.get("Condition") is None or resolver.condition(output["Condition"]):
            _checked_references(resolver.references(output.get("Value")), resources, included, resolver,
                                f"output {name}")
    return dependencies


def _resource(resources: dict[str, Any], lid: str) -> bool:
    if not isinstance(resources[lid], dict) or "Type" not in resources[lid]:
        raise TemplateError(f"Template format error: [/Resources/{lid}] Every Resources object must contain a "
                            "Type member.")
    return True


def _checked_references(refs: Any, resources: dict[str, Any], included: set[str], resolver: Resolver,
                        where: str) -> set[str]:
    found = set()
    for name, attribute in refs:
        if name not in included:
            raise TemplateError(f"Template format error: {where}: Unresolved resource dependencies [{name}] "
                                "in the Resources block of the template")
        if attribute is not None:
            type_name = resources[name]["Type"]
            if attribute not in schema_attributes(type_name):
                raise TemplateError(f"Template error: {where}: resource {name} does not support attribute type "
                                    f"{attribute} in Fn::GetAtt")
            if attribute not in HANDLERS[type_name].attributes:
                raise DeployError(f"{where}: attribute {attribute} of {type_name} ({name}) is not provided by "
                                  f"kinesim deploy (provided: {', '.join(sorted(HANDLERS[type_name].attributes))})")
        found.add(name)
    return found


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


def deletion_order(resources: dict[str, dict[str, Any]]) -> list[str]:
    """Recorded resources in the order to delete them: dependents before what they depend on."""
    dependencies = {lid: [d for d in record.get("DependsOn", []) if d in resources]
                    for lid, record in resources.items()}
    return list(reversed(creation_order(dependencies, list(resources))))


def decide(handler: ResourceHandler, record: dict[str, Any] | None, type_name: str,
           desired: dict[str, Any]) -> tuple[str, list[str]]:
    """What to do with a resource: create, update, replace (with the reasons) or nothing."""
    if record is None:
        return "create", []
    if record["Type"] != type_name:
        return "replace", ["Type"]
    if _canonical(record["Properties"]) == _canonical(desired):
        return "unchanged", []
    reasons = handler.replacement_reasons(record["Properties"], _canonical(desired))
    return ("replace", reasons) if reasons else ("update", [])


def _canonical(value: Any) -> Any:
    """As stored: JSON's types only, so that what was stored compares equal to what is desired."""
    return json.loads(json.dumps(value))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_state(name: str, target: Target) -> dict[str, Any]:
    return {"StackName": name, "StackId": f"arn:{target.partition}:cloudformation:{target.region}:"
                                          f"{target.account_id}:stack/{name}/{uuid.uuid4()}",
            "StackStatus": "REVIEW_IN_PROGRESS", "CreationTime": _now(), "Resources": {}, "Outputs": {}}


class Deployer:
    """Applies a template to a stack, or deletes a stack, printing one line per resource."""

    def __init__(self, target: Target, store: StateStore, echo: Callable[[str], None] = print):
        self.target = target
        self.store = store
        self.echo = echo
        self.handlers: dict[str, ResourceHandler] = {}

    def handler(self, type_name: str) -> ResourceHandler:
        if type_name not in self.handlers:
            self.handlers[type_name] = HANDLERS[type_name](self.target)
        return self.handlers[type_name]

    def deploy(self, path: Path, overrides: dict[str, str] | None = None, run_lint: bool = True) -> dict[str, Any]:
        """Make the stack match the template; returns the Outputs."""
        name = self.target.stack_name
        state = self.store.get(name) or new_state(name, self.target)
        prepared = prepare(path, self.target, overrides or {}, state["StackId"], run_lint)
        creating = not state["Resources"]
        state["StackStatus"] = "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS"
        state["Parameters"] = prepared.parameters
        self.store.put(name, state)
        try:
            for lid in prepared.order:
                self._apply(lid, prepared, state)
            removed = {lid: r for lid, r in state["Resources"].items() if lid not in prepared.dependencies}
            for lid in deletion_order(removed):
                self._delete(lid, state)
            outputs = self._outputs(prepared)
        except (DeployError, ClientError, BotoCoreError) as err:
            state["StackStatus"] = "CREATE_FAILED" if creating else "UPDATE_FAILED"
            state["LastUpdatedTime"] = _now()
            self.store.put(name, state)
            raise err if isinstance(err, DeployError) else DeployError(str(err)) from None
        state.update(Outputs=outputs, StackStatus="CREATE_COMPLETE" if creating else "UPDATE_COMPLETE",
                     LastUpdatedTime=_now())
        self.store.put(name, state)
        if outputs:
            self.echo("Outputs:")
            width = max(map(len, outputs))
            for key, output in outputs.items():
                self.echo(f"  {key:<{width}}  {output['OutputValue']}")
        return outputs

    def delete(self) -> bool:
        """Delete the stack's resources, dependents first, then its state. False if there was no stack."""
        name = self.target.stack_name
        state = self.store.get(name)
        if state is None:
            return False
        state["StackStatus"] = "DELETE_IN_PROGRESS"
        self.store.put(name, state)
        try:
            for lid in deletion_order(state["Resources"]):
                self._delete(lid, state)
        except (DeployError, ClientError, BotoCoreError) as err:
            state["StackStatus"] = "DELETE_FAILED"
            self.store.put(name, state)
            raise err if isinstance(err, DeployError) else DeployError(str(err)) from None
        self.store.delete(name)
        return True

    def _apply(self, lid: str, prepared: Prepared, state: dict[str, Any]) -> None:
        resource = prepared.template["Resources"][lid]
        type_name = resource["Type"]
        handler = self.handler(type_name)
        record = state["Resources"].get(lid)
        with _about(lid, type_name):
            desired = _canonical(handler.desired(prepared.resolver.resolve(resource.get("Properties") or {})))
            action, reasons = decide(handler, record, type_name, desired)
            if action == "unchanged":
                physical_id, attributes = record["PhysicalResourceId"], record["Attributes"]
            elif action == "update":
                physical_id = record["PhysicalResourceId"]
                attributes = handler.update(physical_id, record["Properties"], desired, record["Attributes"])
            else:
                # UpdateReplacePolicy: Retain keeps the old resource (a bucket's data) out of the stack.
                if action == "replace" and resource.get("UpdateReplacePolicy") != "Retain":
                    self.handler(record["Type"]).delete(record["PhysicalResourceId"], record["Properties"])
                # CloudFormation names a resource whose template gives no name (a new name for a
                # replacement, too).
                named = desired.get(handler.name_property) if handler.name_property else None
                if named is None and handler.name_property:
                    named = handler.generate_name(lid)
                applied = handler.create(named, desired)
                physical_id, attributes = applied.physical_id, applied.attributes
        prepared.resolver.known(lid, physical_id, attributes)
        state["Resources"][lid] = {"Type": type_name, "PhysicalResourceId": physical_id, "Properties": desired,
                                   "Attributes": attributes, "DependsOn": prepared.dependencies[lid],
                                   "DeletionPolicy": resource.get("DeletionPolicy", "Delete")}
        self.store.put(self.target.stack_name, state)
        past = {"create": "created", "update": "updated", "replace": "replaced", "unchanged": "unchanged"}[action]
        note = f"({', '.join(reasons)} changed)" if reasons else ""
        if action == "replace" and resource.get("UpdateReplacePolicy") == "Retain":
            note += f"; {record['PhysicalResourceId']} retained (UpdateReplacePolicy)"
        if handler.ignored:
            past, note = "ignored", handler.note
        self._line(past, lid, type_name, physical_id, note)

    def _delete(self, lid: str, state: dict[str, Any]) -> None:
        record = state["Resources"][lid]
        type_name = record["Type"]
        if type_name not in HANDLERS:
            raise DeployError(f"resource {lid}: type {type_name} recorded in the stack is not supported any more")
        handler = self.handler(type_name)
        if record.get("DeletionPolicy") == "Retain":
            action = "retained"
        else:
            with _about(lid, type_name):
                handler.delete(record["PhysicalResourceId"], record["Properties"])
            action = "ignored" if handler.ignored else "deleted"
        del state["Resources"][lid]
        self.store.put(self.target.stack_name, state)
        self._line(action, lid, type_name, record["PhysicalResourceId"], handler.note if handler.ignored else "")

    def _outputs(self, prepared: Prepared) -> dict[str, Any]:
        outputs = {}
        for key, output in (prepared.template.get("Outputs") or {}).items():
            if output.get("Condition") is not None and not prepared.resolver.condition(output["Condition"]):
                continue
            with _about(f"output {key}", None):
                entry = {"OutputValue": prepared.resolver.resolve(output.get("Value"))}
                if "Description" in output:
                    entry["Description"] = prepared.resolver.resolve(output["Description"])
            outputs[key] = entry
        return outputs

    def _line(self, action: str, lid: str, type_name: str, physical_id: str, note: str = "") -> None:
        self.echo(f"{action:<10} {lid:<32} {type_name:<32} {physical_id}" + (f"  {note}" if note else ""))


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
        if isinstance(err, DeployError) and not str(err).startswith(self.prefix):
            raise type(err)(f"{self.prefix}: {err}") from None
        return False


def stack_name_for(path: Path) -> str:
    """The default stack name: the template's directory name, made a valid CloudFormation stack
    name ([a-zA-Z][-a-zA-Z0-9]*)."""
    name = re.sub(r"[^-a-zA-Z0-9]+", "-", path.resolve().parent.name).strip("-")
    return name if name[:1].isalpha() else f"stack-{name}" if name else "stack"

