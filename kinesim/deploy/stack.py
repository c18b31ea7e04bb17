"""A stack: the template's resources planned in dependency order and applied as CloudFormation
applies them.

Deploying compares each resource's desired properties with those applied last time (the stack's
state, kept on the kinesim server under `/_kinesim/stacks/<name>`) and creates, updates in
place, replaces or leaves it. The whole template is checked first (validate.py). A replacement
under a new name is created before the old resource is removed; the old one, and resources gone
from the template, are deleted in a cleanup phase once everything else succeeded.

A failure rolls back: a first deploy deletes what it made (ROLLBACK_COMPLETE; the next deploy
replaces such a stack, as `sam deploy` users expect), an update returns every resource to the
properties of the last complete deploy, kept in the state as the `Baseline` (UPDATE_ROLLBACK_COMPLETE).
The state is written before and after every call that changes a resource (a record's `Status`
says what was under way), so a deploy killed half-way is settled by the next one: what it was
creating is deleted, what it was updating is updated again, and the baseline stays the last
complete deploy's.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError

from .intrinsics import Resolver, pseudo_parameters
from .handlers import HANDLERS
from .plan import _about, _as_found, _canonical, _now, creation_order, decide, deletion_order, name_of
from .resources import ResourceHandler, Target
from .sam import translate
from .template import DeployError, TemplateError, inline_includes, lint, load_template, parameter_values
from .rollback import RollbackMixin
from .validate import check

__all__ = ["check", "creation_order", "decide", "deletion_order", "Deployer", "StateStore", "stack_name_for"]

# Stack statuses from which a deploy starts afresh (no operation was under way).
STABLE = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS"}


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


def prepare(path: Path, target: Target, overrides: dict[str, str], stack_id: str, run_lint: bool = True,
            runtimes: list[str] | None = None,
            handler_for: Callable[[str], ResourceHandler] | None = None) -> Prepared:
    """Load, lint, inline AWS::Include snippets, apply parameters and the SAM transform, and check
    everything that can be checked before a single call is made."""
    raw = load_template(path)
    if run_lint:
        errors = lint(path, target.region)
        if errors:
            raise TemplateError(f"{path.name} has {len(errors)} error(s) (cfn-lint; --no-lint skips this check):\n  "
                                + "\n  ".join(errors))
    raw = inline_includes(raw, path.parent, _s3_reader(target))
    parameters = parameter_values(raw, overrides)
    template = translate(raw, path.parent, target.region, parameters)
    pseudo = pseudo_parameters(target.region, target.account_id, target.stack_name, stack_id)
    resolver = Resolver(template, parameters, pseudo)
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


class Deployer(RollbackMixin):
    """Applies a template to a stack, or deletes a stack, printing one line per resource."""

    def __init__(self, target: Target, store: StateStore, echo: Callable[[str], None] = print,
                 runtimes: list[str] | None = None):
        self.target = target
        self.store = store
        self.echo = echo
        self.runtimes = runtimes  # what the server runs (None: it does not say; python3.* then)
        self.handlers: dict[str, ResourceHandler] = {}

    def handler(self, type_name: str) -> ResourceHandler:
        if type_name not in self.handlers:
            if type_name not in HANDLERS:
                raise DeployError(f"type {type_name} recorded in the stack is not supported any more")
            self.handlers[type_name] = HANDLERS[type_name](self.target)
        return self.handlers[type_name]

    def _save(self, state: dict[str, Any]) -> None:
        self.store.put(self.target.stack_name, state)

    # deploy

    def deploy(self, path: Path, overrides: dict[str, str] | None = None, run_lint: bool = True) -> dict[str, Any]:
        """Make the stack match the template; returns the Outputs. On failure, roll back and raise."""
        name = self.target.stack_name
        state = self.store.get(name)
        status = (state or {}).get("StackStatus", "")
        if status in ("DELETE_IN_PROGRESS", "DELETE_FAILED"):
            raise DeployError(f"Stack {name} is {status}: delete it first (kinesim deploy {path} --delete)")
        prepared = prepare(path, self.target, overrides or {}, (state or {}).get("StackId") or "pending", run_lint,
                           self.runtimes, self.handler)
        if status == "ROLLBACK_COMPLETE":
            # CloudFormation refuses to update a stack whose creation rolled back (it can only be
            # deleted); `sam deploy --on-failure DELETE` deletes such a stack for its users
            # (samcli/lib/deploy/deployer.py, rollback_delete_stack). Here the next deploy does
            # that, then creates the stack anew.
            self.echo(f"Stack {name} is ROLLBACK_COMPLETE (its creation failed): deleting it and creating it anew")
            self._delete_all(state)
            self.store.delete(name)
            state = None
        if state is None:
            state = new_state(name, self.target)
            prepared.resolver.pseudo["AWS::StackId"] = state["StackId"]
        if status == "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS":
            # Killed in the cleanup phase: the update had succeeded; its cleanup is finished first.
            self._delete_replaced(state)
            status = "UPDATE_COMPLETE"
        if status in STABLE or not status or "Baseline" not in state:
            # The last complete deploy's resources: what a failure rolls back to.
            state["Baseline"] = copy.deepcopy(state["Resources"])
            state["Cleanup"] = []
        creating = not state.get("Baseline")
        state["StackStatus"] = "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS"
        state["Parameters"] = prepared.parameters
        self._save(state)
        try:
            self._settle_interrupted(state)
            for lid in prepared.order:
                self._apply(lid, prepared, state)
            outputs = self._outputs(prepared)
        except (DeployError, ClientError, BotoCoreError) as err:
            failure = err if isinstance(err, DeployError) else DeployError(str(err))
            self._roll_back(state, creating, failure)
        if not creating:
            state["StackStatus"] = "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"
            self._save(state)
        self._clean_up(state, prepared)
        state.update(Outputs=outputs, StackStatus="CREATE_COMPLETE" if creating else "UPDATE_COMPLETE",
                     LastUpdatedTime=_now())
        state.pop("Baseline", None)
        state.pop("Cleanup", None)
        self._save(state)
        if outputs:
            self.echo("Outputs:")
            width = max(map(len, outputs))
            for key, output in outputs.items():
                self.echo(f"  {key:<{width}}  {output['OutputValue']}")
        return outputs

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
                    self.handler(record["Type"]).delete(record["PhysicalResourceId"], record["Properties"])
            if record.get("Status") in ("CREATE_IN_PROGRESS", "DELETE_IN_PROGRESS"):
                del state["Resources"][lid]
                self._save(state)
                self._line("deleted", lid, record["Type"], record.get("PhysicalResourceId") or "-",
                           "(left half-made by an interrupted deploy)")

    def _apply(self, lid: str, prepared: Prepared, state: dict[str, Any]) -> None:
        resource = prepared.template["Resources"][lid]
        type_name = resource["Type"]
        handler = self.handler(type_name)
        record = state["Resources"].get(lid)
        note = ""
        with _about(lid, type_name):
            desired = _canonical(handler.desired(prepared.resolver.resolve(resource.get("Properties") or {})))
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
                attributes = handler.update(physical_id, old, desired, record["Attributes"])
            else:
                named = desired.get(handler.name_property) if handler.name_property else None
                if named is None and handler.name_property:
                    named = handler.generate_name(lid)  # a new name for a replacement, too
                if action == "replace":
                    assert record is not None
                    note = self._replace_old(lid, resource, record, named, state)
                self._record(state, lid, {**base, "PhysicalResourceId": named, "Name": named, "Properties": desired,
                                          "Attributes": {}, "Status": "CREATE_IN_PROGRESS"})
                applied = handler.create(named, desired)
                physical_id, attributes = applied.physical_id, applied.attributes
        prepared.resolver.known(lid, physical_id, attributes)
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
        self._line(past, lid, type_name, physical_id, note)

    def _replace_old(self, lid: str, resource: dict[str, Any], record: dict[str, Any], new_name: str | None,
                     state: dict[str, Any]) -> str:
        """Deal with the resource a replacement replaces. Under a new name it stays until the
        cleanup phase (CloudFormation's order: a rollback then finds it intact); under the same
        name, or for types without one (two mappings of one stream and function conflict), it is
        deleted first."""
        retained = resource.get("UpdateReplacePolicy") == "Retain"
        old_handler = self.handler(record["Type"])
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

    def _keep_code(self, handler: ResourceHandler, record: dict[str, Any], desired: dict[str, Any]) -> None:
        """Before a function's code changes, keep its current package: a rollback uploads it again.
        (The function handler keeps the zips it built by sha256; this one comes from the server.)"""
        zips = getattr(handler, "_zips", None)
        code = record["Properties"].get("Code")
        if zips is None or not isinstance(code, dict) or "ZipSha256" not in code or code == desired.get("Code") \
                or code["ZipSha256"] in zips:
            return
        location = self.target.lambda_.get_function(FunctionName=record["PhysicalResourceId"])["Code"].get("Location")
        if location:
            with urllib.request.urlopen(location, timeout=60) as response:
                package = response.read()
            if hashlib.sha256(package).hexdigest() == code["ZipSha256"]:
                zips[code["ZipSha256"]] = package

    def _record(self, state: dict[str, Any], lid: str, record: dict[str, Any]) -> None:
        state["Resources"][lid] = record
        self._save(state)

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
        handler = self.handler(record["Type"])
        if record.get("DeletionPolicy") == "Retain":
            self._line("retained", lid, record["Type"], record["PhysicalResourceId"])
            return
        try:
            with _about(lid, record["Type"]):
                handler.delete(record["PhysicalResourceId"], record["Properties"])
        except DeployError as err:
            self._line("DELETE_FAILED", lid, record["Type"], record["PhysicalResourceId"], f"{err}; left as it is")
            return
        self._line("ignored" if handler.ignored else "deleted", lid, record["Type"], record["PhysicalResourceId"],
                   handler.note if handler.ignored else note)

    def delete(self) -> bool:
        """Delete the stack's resources, dependents first, then its state. False if there was no stack."""
        name = self.target.stack_name
        state = self.store.get(name)
        if state is None:
            return False
        self._delete_all(state)
        self.store.delete(name)
        return True

    def _delete_all(self, state: dict[str, Any]) -> None:
        state["StackStatus"] = "DELETE_IN_PROGRESS"
        self._save(state)
        try:
            for entry in list(state.get("Cleanup", [])):
                if not entry.get("Retain"):
                    with _about(entry["LogicalId"], entry["Type"]):
                        self.handler(entry["Type"]).delete(entry["PhysicalResourceId"], entry["Properties"])
                state["Cleanup"].remove(entry)
                self._save(state)
            for lid in deletion_order(state["Resources"]):
                record = state["Resources"][lid]
                handler = self.handler(record["Type"])
                if record.get("DeletionPolicy") == "Retain":
                    action = "retained"
                elif record.get("PhysicalResourceId"):
                    with _about(lid, record["Type"]):
                        handler.delete(record["PhysicalResourceId"], record["Properties"])
                    action = "ignored" if handler.ignored else "deleted"
                else:
                    action = "forgotten"  # its creation never answered: nothing to delete it by
                del state["Resources"][lid]
                self._save(state)
                self._line(action, lid, record["Type"], record.get("PhysicalResourceId") or "-",
                           handler.note if handler.ignored else "")
        except (DeployError, ClientError, BotoCoreError) as err:
            state["StackStatus"] = "DELETE_FAILED"
            self._save(state)
            raise err if isinstance(err, DeployError) else DeployError(str(err)) from None

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


def stack_name_for(path: Path) -> str:
    """The default stack name: the template's directory name, made a valid CloudFormation stack
    name ([a-zA-Z][-a-zA-Z0-9]*)."""
    name = re.sub(r"[^-a-zA-Z0-9]+", "-", path.resolve().parent.name).strip("-")
    return name if name[:1].isalpha() else f"stack-{name}" if name else "stack"

