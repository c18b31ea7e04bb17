"""A stack: the template's resources planned in dependency order and applied as CloudFormation
applies them. The engine behind the CloudFormation API (kinesim.cloudformation runs it in the
server, one operation per stack at a time).

Deploying compares each resource's desired properties with those applied last time (the stack's
state, a document in the server's store) and creates, updates in place, replaces or leaves it.
The whole template is checked first (validate.py). A replacement under a new name is created
before the old resource is removed; the old one, and resources gone from the template, are
deleted in a cleanup phase once everything else succeeded. Each step is also a stack event
(`events`), in CloudFormation's order and statuses.

A failure rolls back: a first deploy deletes what it made (ROLLBACK_COMPLETE), an update returns
every resource to the properties of the last complete deploy, kept in the state as the
`Baseline` (UPDATE_ROLLBACK_COMPLETE), and the stack's own fields (template, parameters, outputs)
to theirs. The state is written before and after every call that changes a resource (a record's
`Status` says what was under way), so an operation killed half-way is settled when it is carried
on: what it was creating is deleted, what it was updating is updated again, and the baseline
stays the last complete deploy's.
"""
from __future__ import annotations

import copy
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from .intrinsics import Resolver, pseudo_parameters
from .custom_resources import CustomResource, is_custom, masked
from .handlers import HANDLERS, handler_class
from .plan import (_about, _as_found, _now, as_stored, creation_order, decide, deletion_order, event_reason,
                   name_of)
from .resources import ResourceHandler, Target
from .rules import check_rules
from .sam import translate
from .ssm_parameters import resolve_ssm_parameters
from .template import DeployError, inline_includes, parameter_values
from .rollback import RollbackMixin
from .validate import check

__all__ = ["check", "creation_order", "decide", "deletion_order", "Deployer", "StateStore", "stack_name_for"]

# Stack statuses from which a deploy starts afresh (no operation was under way).
STABLE = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS"}


class StateStore(Protocol):
    """Where stack states are kept: the server's store, as documents of kind "stack"."""

    def get(self, name: str) -> dict[str, Any] | None: ...

    def put(self, name: str, state: dict[str, Any]) -> None: ...

    def delete(self, name: str) -> None: ...


@dataclass
class Prepared:
    """A template made ready to apply: translated, checked, ordered."""
    template: dict[str, Any]
    resolver: Resolver
    order: list[str]  # included resources, each after what it depends on
    dependencies: dict[str, list[str]]
    parameters: dict[str, Any] = field(default_factory=dict)


def prepare(raw: dict[str, Any], target: Target, given: dict[str, str], stack_id: str,
            runtimes: list[str] | None = None, handler_for: Callable[[str], ResourceHandler] | None = None,
            imports: Callable[[str], Any] | None = None) -> Prepared:
    """Inline `AWS::Include` snippets (from S3), apply parameters (SSM-typed ones read from Parameter
    Store), check the Rules, apply the SAM transform, and check everything that can be checked
    before a single call is made. A TemplateError says what is wrong."""
    raw = inline_includes(raw, None, _s3_reader(target))
    parameters = parameter_values(raw, given)
    parameters.update(resolve_ssm_parameters(raw.get("Parameters") or {}, parameters, target.ssm))
    pseudo = pseudo_parameters(target.region, target.account_id, target.stack_name, stack_id)
    check_rules(raw, parameters, pseudo)
    template = translate(raw, target.region, parameters)
    resolver = Resolver(template, parameters, pseudo, imports)
    dependencies = check(template, resolver, runtimes, handler_for)
    return Prepared(template, resolver, creation_order(dependencies, list(dependencies)), dependencies, parameters)


def _s3_reader(target: Target) -> Callable[[str, str], bytes] | None:
    if target.s3 is None:
        return None
    return lambda bucket, key: target.s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def new_state(name: str, target: Target) -> dict[str, Any]:
    return {"StackName": name, "StackId": f"arn:{target.partition}:cloudformation:{target.region}:"
                                          f"{target.account_id}:stack/{name}/{uuid.uuid4()}",
            "StackStatus": "REVIEW_IN_PROGRESS", "CreationTime": _now(), "Resources": {}, "Outputs": {}}


# What a resource line's action is, as a stack event's status.
_EVENT_STATUS = {"created": "CREATE_COMPLETE", "updated": "UPDATE_COMPLETE", "replaced": "UPDATE_COMPLETE",
                 "restored": "UPDATE_COMPLETE", "deleted": "DELETE_COMPLETE", "forgotten": "DELETE_COMPLETE",
                 "retained": "DELETE_SKIPPED", "DELETE_FAILED": "DELETE_FAILED"}
# The reason CloudFormation gives a stack's first event.
USER_INITIATED = "User Initiated"
# What a stack's state says of its last deploy besides its resources (restored by a rollback).
BASELINE_FIELDS = ("Parameters", "ProcessedTemplate", "Outputs", "Imports", "Description")
CREATION_INITIATED = "Resource creation Initiated"
REPLACING = "Requested update requires the creation of a new physical resource; hence creating one."


class Deployer(RollbackMixin):
    """Applies a template to a stack, or deletes a stack: one line per resource to `echo`, and
    CloudFormation's stack events (resource and stack statuses, in order) to `events`."""

    def __init__(self, target: Target, store: StateStore, echo: Callable[[str], None] = print,
                 runtimes: list[str] | None = None, events: Callable[[dict[str, Any]], None] | None = None,
                 imports: Callable[[str], Any] | None = None):
        self.target = target
        self.store = store
        self.echo = echo
        self.runtimes = runtimes  # what the server runs (None: it does not say; python3.* then)
        self.events = events
        self.imports = imports  # Fn::ImportValue: an export's value by name
        self.handlers: dict[str, ResourceHandler] = {}
        self.state: dict[str, Any] = {}  # the stack being deployed or deleted
        self.cancelled = False  # CancelUpdateStack: the deploy stops before its next resource and rolls back
        self._stack_status = ""  # the last stack status an event was given for
        self.secrets: set[str] = set()  # what custom resources answered with NoEcho: shown as *****

    def handler(self, type_name: str, lid: str = "") -> ResourceHandler:
        """The handler of a resource type; a custom resource's is its own (its requests name it)."""
        key = f"{type_name} {lid}" if is_custom(type_name) else type_name
        if key not in self.handlers:
            if handler_class(type_name) is None:
                raise DeployError(f"type {type_name} recorded in the stack is not supported any more")
            self.handlers[key] = CustomResource(self.target, type_name, lid, self.state.get("StackId", "")) \
                if is_custom(type_name) else HANDLERS[type_name](self.target)
        return self.handlers[key]

    def _save(self, state: dict[str, Any]) -> None:
        self.store.put(self.target.stack_name, state)
        status = state.get("StackStatus", "")
        if status != self._stack_status:
            self._stack_status = status
            reason = USER_INITIATED if status in ("CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS", "DELETE_IN_PROGRESS") \
                else state.get("StackStatusReason", "") if status.endswith(("FAILED", "ROLLBACK_IN_PROGRESS")) else ""
            self._event(state, self.target.stack_name, "AWS::CloudFormation::Stack", state["StackId"], status, reason)

    def _event(self, state: dict[str, Any], lid: str, type_name: str, physical_id: str | None, status: str,
               reason: str = "", properties: Any = None) -> None:
        if self.events is None:
            return
        event = {"StackId": state["StackId"], "StackName": state["StackName"], "LogicalResourceId": lid,
                 "PhysicalResourceId": physical_id or "", "ResourceType": type_name, "ResourceStatus": status}
        if reason:
            event["ResourceStatusReason"] = reason
        if properties is not None:
            event["ResourceProperties"] = json.dumps(masked(properties, self.secrets))
        self.events(event)

    # deploy

    def deploy(self, raw: dict[str, Any], given: dict[str, str] | None = None, stack_id: str | None = None,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Make the stack match the template; returns the Outputs. On failure, roll back and raise.
        `extra` is kept in the stack's state (the API's template text, tags, capabilities...)."""
        name = self.target.stack_name
        state = self.store.get(name)
        status = (state or {}).get("StackStatus", "")
        if status in ("DELETE_IN_PROGRESS", "DELETE_FAILED", "ROLLBACK_COMPLETE"):
            raise DeployError(f"Stack:{state['StackId']} is in {status} state and can not be updated.")
        if state is None:
            state = new_state(name, self.target)
            if stack_id:
                state["StackId"] = stack_id
        self._stack_status = status
        self.state = state
        prepared = prepare(raw, self.target, given or {}, state["StackId"], self.runtimes, self.handler,
                           self.imports)
        if status == "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS":
            # Killed in the cleanup phase: the update had succeeded; its cleanup is finished first.
            self._delete_replaced(state)
            status = "UPDATE_COMPLETE"
        if status in STABLE or not status or "Baseline" not in state:
            # The last complete deploy's resources: what a failure rolls back to.
            state["Baseline"] = copy.deepcopy(state["Resources"])
            state["Cleanup"] = []
        creating = not state.get("Baseline")
        if "BaselineFields" not in state:
            # The stack's own fields of the last complete deploy (its template text, parameters,
            # outputs...): what an update's rollback returns to, with the resources.
            state["BaselineFields"] = {k: copy.deepcopy(state.get(k)) for k in {*(extra or {}), *BASELINE_FIELDS}}
        state.update(extra or {})
        state["StackStatus"] = "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS"
        state.pop("StackStatusReason", None)
        state["Parameters"] = prepared.parameters
        state["ProcessedTemplate"] = prepared.template
        if "Description" in raw:
            state["Description"] = str(raw["Description"])
        else:
            state.pop("Description", None)
        self._save(state)
        failed: list[str] = []
        try:
            self._settle_interrupted(state)
            for lid in prepared.order:
                if self.cancelled:
                    raise DeployError("Stack update cancelled")
                try:
                    self._apply(lid, prepared, state)
                except (DeployError, ClientError, BotoCoreError) as err:
                    failed.append(lid)
                    record = state["Resources"].get(lid) or {}
                    if record.get("Status") == "CREATE_IN_PROGRESS":
                        # Answered with an error: the resource by that name (if any) is not the
                        # stack's, e.g. one that already existed; the rollback must leave it alone.
                        # A custom resource's provider may have answered FAILED with a physical
                        # id: the rollback sends it a Delete, as CloudFormation does.
                        failed_id = getattr(self.handlers.get(f"{record['Type']} {lid}"), "failed_id", None)
                        self._record(state, lid, {**record, "Status": "CREATE_FAILED",
                                                  **({"PhysicalResourceId": failed_id} if failed_id else {})})
                    self._event(state, lid, prepared.template["Resources"][lid]["Type"],
                                record.get("PhysicalResourceId"),
                                "CREATE_FAILED" if record.get("Status") in (None, "CREATE_IN_PROGRESS") else
                                "UPDATE_FAILED", event_reason(err, lid, prepared.template["Resources"][lid]["Type"]))
                    raise
            outputs = self._outputs(prepared)
        except (DeployError, ClientError, BotoCoreError) as err:
            failure = err if isinstance(err, DeployError) else DeployError(str(err))
            reason = (f"The following resource(s) failed to {'create' if creating else 'update'}: "
                      f"[{', '.join(failed)}]. ") if failed else str(failure).splitlines()[0]
            self._roll_back(state, creating, failure, reason)
        if not creating:
            state["StackStatus"] = "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"
            self._save(state)
        self._clean_up(state, prepared)
        state.update(Outputs=outputs, StackStatus="CREATE_COMPLETE" if creating else "UPDATE_COMPLETE",
                     LastUpdatedTime=_now(), Imports=sorted(prepared.resolver.imported))
        for key in ("Baseline", "Cleanup", "BaselineFields"):
            state.pop(key, None)
        self._save(state)
        if outputs:
            self.echo("Outputs:")
            width = max(map(len, outputs))
            for key, output in outputs.items():
                self.echo(f"  {key:<{width}}  {output['OutputValue']}")
        return outputs

    def roll_back_stack(self) -> None:
        """RollbackStack: a stack whose rollback failed returned to its last stable state again."""
        state = self.store.get(self.target.stack_name)
        if state is None:
            raise DeployError(f"Stack {self.target.stack_name} does not exist")
        self.state = state
        self._stack_status = state.get("StackStatus", "")
        creating = not state.get("Baseline")
        reason = state.get("StackStatusReason") or USER_INITIATED
        try:
            self._roll_back(state, creating, DeployError(reason), reason)
        except DeployError:
            if state["StackStatus"].endswith("_FAILED"):
                raise

    def _settle_interrupted(self, state: dict[str, Any]) -> None:
        """Records a killed deploy left mid-call: a resource being created or deleted may or may not
        exist, so it is deleted (if it has a name to delete it by) and forgotten. A resource being
        updated keeps its record: the next update of it sends every property again (`_as_found`)."""
        for lid in list(state["Resources"]):
            record = state["Resources"][lid]
            if record.get("Status") == "CREATE_IN_PROGRESS":
                self._discard_half_made(lid, record)
            elif record.get("Status") == "DELETE_IN_PROGRESS":
                with _about(lid, record["Type"]):
                    self.handler(record["Type"], lid).delete(record["PhysicalResourceId"], record["Properties"])
            if record.get("Status") in ("CREATE_IN_PROGRESS", "DELETE_IN_PROGRESS"):
                del state["Resources"][lid]
                self._save(state)
                self._line("deleted", lid, record["Type"], record.get("PhysicalResourceId") or "-",
                           "(left half-made by an interrupted deploy)")

    def _apply(self, lid: str, prepared: Prepared, state: dict[str, Any]) -> None:
        resource = prepared.template["Resources"][lid]
        type_name = resource["Type"]
        handler = self.handler(type_name, lid)
        record = state["Resources"].get(lid)
        note = ""
        with _about(lid, type_name):
            desired = as_stored(handler.desired(prepared.resolver.resolve(resource.get("Properties") or {})))
            action, reasons = decide(handler, record, type_name, desired)
            base = {"Type": type_name, "DependsOn": prepared.dependencies[lid],
                    "DeletionPolicy": resource.get("DeletionPolicy", "Delete")}
            if action == "unchanged":
                assert record is not None
                physical_id, attributes = record["PhysicalResourceId"], record["Attributes"]
            elif action == "update":
                assert record is not None
                physical_id = record["PhysicalResourceId"]
                self._keep_code(handler, record, desired)
                old = _as_found(record, desired)
                self._record(state, lid, {**record, **base, "Status": "UPDATE_IN_PROGRESS", "Target": desired})
                applied = handler.update_resource(physical_id, old, desired, record["Attributes"])
                if applied.physical_id != physical_id:
                    # A custom resource's provider answered with a new resource: the old one is
                    # deleted in the clean-up phase, as a replacement's is.
                    state.setdefault("Cleanup", []).append({"LogicalId": lid, **record})
                    physical_id, note = applied.physical_id, " (the provider replaced it)"
                attributes = applied.attributes
            else:
                named = desired.get(handler.name_property) if handler.name_property else None
                if named is None and handler.name_property:
                    named = handler.generate_name(lid)  # a new name for a replacement, too
                if action == "replace":
                    assert record is not None
                    note = self._replace_old(lid, resource, record, named, state)
                self._record(state, lid, {**base, "PhysicalResourceId": named, "Name": named, "Properties": desired,
                                          "Attributes": {}, "Status": "CREATE_IN_PROGRESS"},
                             ("UPDATE_IN_PROGRESS", REPLACING) if action == "replace" else None)
                applied = handler.create(named, desired)
                physical_id, attributes = applied.physical_id, applied.attributes
                self._event(state, lid, type_name, physical_id, "CREATE_IN_PROGRESS", CREATION_INITIATED)
        prepared.resolver.known(lid, physical_id, attributes)
        no_echo = getattr(handler, "no_echo", False) if action != "unchanged" else bool((record or {}).get("NoEcho"))
        if no_echo:
            base["NoEcho"] = True
            self.secrets.update(v for v in attributes.values() if isinstance(v, str))
        self._record(state, lid, {**base, "PhysicalResourceId": physical_id, "Properties": desired,
                                  "Attributes": attributes, "Name": (record or {}).get("Name") if action in (
                                      "update", "unchanged") else named})
        past = {"create": "created", "update": "updated", "replace": "replaced", "unchanged": "unchanged"}[action]
        if reasons:
            note = f"({', '.join(reasons)} changed)" + note
        if handler.ignored:
            past, note = "ignored", handler.note
        elif handler.note:
            note = f"{note}  {handler.note}" if note else handler.note
        self._line(past, lid, type_name, physical_id, note,
                   {"create": "CREATE_COMPLETE", "unchanged": ""}.get(action, "UPDATE_COMPLETE"))

    def _replace_old(self, lid: str, resource: dict[str, Any], record: dict[str, Any], new_name: str | None,
                     state: dict[str, Any]) -> str:
        """Deal with the resource a replacement replaces. Under a new name it stays until the
        cleanup phase (CloudFormation's order: a rollback then finds it intact); under the same
        name, or for types without one (two mappings of one stream and function conflict), it is
        deleted first."""
        retained = resource.get("UpdateReplacePolicy") == "Retain"
        old_handler = self.handler(record["Type"], lid)
        if retained:
            state.setdefault("Cleanup", []).append({"LogicalId": lid, "Retain": True, **record})
            return f"; {record['PhysicalResourceId']} retained (UpdateReplacePolicy)"
        if new_name is not None and old_handler.name_property and new_name != name_of(record, old_handler):
            state.setdefault("Cleanup", []).append({"LogicalId": lid, **record})
            self._save(state)
            return ""
        self._record(state, lid, {**record, "Status": "DELETE_IN_PROGRESS"})
        old_handler.delete(record["PhysicalResourceId"], record["Properties"])
        return ""

    def _record(self, state: dict[str, Any], lid: str, record: dict[str, Any],
                event: tuple[str, str] | None = None) -> None:
        """Keep a resource's record; one with an operation under way is a stack event too."""
        state["Resources"][lid] = record
        self._save(state)
        if event is None and record.get("Status") in ("CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS", "DELETE_IN_PROGRESS"):
            event = (record["Status"], "")
        if event is not None:
            # A creation's first event has no physical id yet (CloudFormation's order: then
            # "Resource creation Initiated" with it, then CREATE_COMPLETE).
            physical_id = "" if event[0] == "CREATE_IN_PROGRESS" else record.get("PhysicalResourceId")
            self._event(state, lid, record["Type"], physical_id, event[0], event[1],
                        record.get("Target", record.get("Properties")) if event[0] != "DELETE_IN_PROGRESS" else None)

    # cleanup and delete

    def _clean_up(self, state: dict[str, Any], prepared: Prepared) -> None:
        """After success: delete the resources replaced under new names and those gone from the
        template, dependents first. A failure here no longer fails the deploy (as on AWS): it is
        reported, and the resource is left out of the stack."""
        self._delete_replaced(state)
        removed = {lid: r for lid, r in state["Resources"].items() if lid not in prepared.dependencies}
        for lid in deletion_order(removed):
            self._delete_resource(lid, removed[lid])
            del state["Resources"][lid]
            self._save(state)

    def _delete_replaced(self, state: dict[str, Any]) -> None:
        """Delete the resources replaced under new names (UpdateReplacePolicy, not DeletionPolicy,
        says whether they stay)."""
        for entry in list(state.get("Cleanup", [])):
            record = {k: v for k, v in entry.items() if k not in ("LogicalId", "Retain")}
            if not entry.get("Retain"):
                self._delete_resource(entry["LogicalId"], {**record, "DeletionPolicy": "Delete"}, "(replaced)")
            state["Cleanup"].remove(entry)
            self._save(state)

    def _delete_resource(self, lid: str, record: dict[str, Any], note: str = "") -> None:
        handler = self.handler(record["Type"], lid)
        if record.get("DeletionPolicy") == "Retain":
            self._line("retained", lid, record["Type"], record["PhysicalResourceId"])
            return
        self._event(self.state, lid, record["Type"], record["PhysicalResourceId"], "DELETE_IN_PROGRESS")
        try:
            with _about(lid, record["Type"]):
                handler.delete(record["PhysicalResourceId"], record["Properties"])
        except DeployError as err:
            self._line("DELETE_FAILED", lid, record["Type"], record["PhysicalResourceId"], f"{err}; left as it is")
            return
        self._line("ignored" if handler.ignored else "deleted", lid, record["Type"], record["PhysicalResourceId"],
                   handler.note if handler.ignored else note, "DELETE_COMPLETE")

    def delete(self) -> bool:
        """Delete the stack's resources, dependents first, then its state. False if there was no stack."""
        name = self.target.stack_name
        state = self.store.get(name)
        if state is None:
            return False
        self.state = state
        self._stack_status = state.get("StackStatus", "")
        self._delete_all(state)
        state["StackStatus"] = "DELETE_COMPLETE"
        self._event(state, name, "AWS::CloudFormation::Stack", state["StackId"], "DELETE_COMPLETE")
        self.store.delete(name)
        return True

    def _delete_all(self, state: dict[str, Any]) -> None:
        """Delete every resource, dependents first. One that fails to delete is left, with what it
        depends on; the rest are deleted all the same, and the stack ends DELETE_FAILED naming it."""
        state["StackStatus"] = "DELETE_IN_PROGRESS"
        state.pop("StackStatusReason", None)
        self._save(state)
        failures: dict[str, DeployError] = {}
        kept: set[str] = set()  # what a resource that failed to delete depends on
        for entry in list(state.get("Cleanup", [])):
            try:
                if not entry.get("Retain"):
                    with _about(entry["LogicalId"], entry["Type"]):
                        self.handler(entry["Type"], entry["LogicalId"]).delete(entry["PhysicalResourceId"],
                                                                               entry["Properties"])
            except (DeployError, ClientError, BotoCoreError) as err:
                failures[entry["LogicalId"]] = err if isinstance(err, DeployError) else DeployError(str(err))
                continue
            state["Cleanup"].remove(entry)
            self._save(state)
        for lid in deletion_order(state["Resources"]):
            record = state["Resources"][lid]
            if lid in kept:
                kept.update(record.get("DependsOn", []))
                continue
            handler = self.handler(record["Type"], lid)
            if record.get("DeletionPolicy") == "Retain":
                action = "retained"
            elif record.get("PhysicalResourceId"):
                self._event(state, lid, record["Type"], record["PhysicalResourceId"], "DELETE_IN_PROGRESS")
                try:
                    with _about(lid, record["Type"]):
                        handler.delete(record["PhysicalResourceId"], record["Properties"])
                except (DeployError, ClientError, BotoCoreError) as err:
                    failure = err if isinstance(err, DeployError) else DeployError(str(err))
                    failures[lid] = failure
                    kept.update(record.get("DependsOn", []))
                    self._event(state, lid, record["Type"], record.get("PhysicalResourceId"), "DELETE_FAILED",
                                event_reason(failure, lid, record["Type"]))
                    continue
                action = "ignored" if handler.ignored else "deleted"
            else:
                action = "forgotten"  # its creation never answered: nothing to delete it by
            del state["Resources"][lid]
            self._save(state)
            self._line(action, lid, record["Type"], record.get("PhysicalResourceId") or "-",
                       handler.note if handler.ignored else "", "DELETE_SKIPPED" if action == "retained"
                       else "DELETE_COMPLETE")
        if failures:
            state["StackStatus"] = "DELETE_FAILED"
            state["StackStatusReason"] = f"The following resource(s) failed to delete: [{', '.join(failures)}]. "
            self._save(state)
            raise DeployError("\n".join(map(str, failures.values())))

    def _outputs(self, prepared: Prepared) -> dict[str, Any]:
        outputs = {}
        for key, output in (prepared.template.get("Outputs") or {}).items():
            if output.get("Condition") is not None and not prepared.resolver.condition(output["Condition"]):
                continue
            with _about(f"output {key}", None):
                entry = {"OutputValue": masked(prepared.resolver.resolve(output.get("Value")), self.secrets)}
                if "Description" in output:
                    entry["Description"] = prepared.resolver.resolve(output["Description"])
                if isinstance(output.get("Export"), dict):
                    entry["ExportName"] = prepared.resolver.resolve(output["Export"].get("Name"))
            outputs[key] = entry
        return outputs

    def _line(self, action: str, lid: str, type_name: str, physical_id: str, note: str = "",
              status: str | None = None) -> None:
        """One line for the person deploying, and the stack event of the same step (`status`, else
        the action's own)."""
        status = _EVENT_STATUS.get(action, "") if status is None else status
        if status and self.state:
            self._event(self.state, lid, type_name, None if physical_id == "-" else physical_id, status,
                        note.strip("() ") if status.endswith("FAILED") else "")
        self.echo(f"{action:<10} {lid:<32} {type_name:<32} {physical_id}" + (f"  {note}" if note else ""))


def stack_name_for(path: Path) -> str:
    """The default stack name: the template's directory name, made a valid CloudFormation stack
    name ([a-zA-Z][-a-zA-Z0-9]*)."""
    name = re.sub(r"[^-a-zA-Z0-9]+", "-", path.resolve().parent.name).strip("-")
    return name if name[:1].isalpha() else f"stack-{name}" if name else "stack"

