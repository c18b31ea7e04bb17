"""Rollback: a failed create or update returns the stack to its baseline, the resources of the
last complete deploy (none for a first deploy), as CloudFormation rolls back.

In three steps, the state saved after each call (a rollback that is itself killed or fails is
carried on by the next deploy):
1. what the baseline does not have as it is (created by the failed deploy, or replaced by it
   under the same name) is deleted, dependents first;
2. resources replaced under a new name were kept until the cleanup phase: they are the stack's
   again;
3. every baseline resource is made as it was, what others depend on first: re-created if it was
   deleted, updated back to its previous properties if they changed (a function's previous code
   included: the deploy kept its package before changing it).
Resources the failed update removed from the template are still there: they would have been
deleted only in the cleanup phase.
"""
from __future__ import annotations

import hashlib
import urllib.request
from typing import TYPE_CHECKING, Any, Callable

from .custom_resources import is_custom
from .plan import _about, _as_found, _dependencies_of, _now, as_stored, creation_order, deletion_order, name_of
from .template import DeployError

if TYPE_CHECKING:
    from .resources import ResourceHandler


class RollbackMixin:
    """The Deployer's rollback (it provides handler(), _record(), _save(), _line(), echo, target)."""
    handler: Callable[[str, str], "ResourceHandler"]
    _record: Callable[..., None]
    _save: Callable[[dict[str, Any]], None]
    _line: Callable[..., None]
    _event: Callable[..., None]
    echo: Callable[[str], None]
    target: Any

    def _roll_back(self, state: dict[str, Any], creating: bool, failure: DeployError, reason: str) -> None:
        """Return the stack to its baseline, then raise `failure` (saying how the rollback went).
        `reason` is the stack's status reason, as CloudFormation words it."""
        self.echo(f"Failed: {str(failure).splitlines()[0]}")
        self.echo("Rolling back: " + ("deleting what was created" if creating
                                       else "returning every resource to the last complete deploy"))
        state["StackStatus"] = "ROLLBACK_IN_PROGRESS" if creating else "UPDATE_ROLLBACK_IN_PROGRESS"
        state["StackStatusReason"] = reason
        self._save(state)
        baseline: dict[str, Any] = state.get("Baseline") or {}
        current = state["Resources"]
        kept_aside = {entry["LogicalId"]: entry for entry in state.get("Cleanup", []) if not entry.get("Retain")}
        failed: list[str] = []
        # 1. What the baseline does not have as it is: dependents first.
        for lid in deletion_order(current):
            record, base = current[lid], baseline.get(lid)
            if base is not None and lid not in kept_aside and self._same_resource(record, base):
                continue
            action = "deleted"
            if record.get("Status") == "CREATE_FAILED" and not (is_custom(record["Type"])
                                                                and record.get("PhysicalResourceId")):
                pass  # the service refused it (its handler removed anything half-made): nothing of the stack's to delete
            elif record.get("Status") == "CREATE_IN_PROGRESS":
                self._discard_half_made(lid, record)  # a kill left it unanswered: it may exist
            elif base is None and record.get("DeletionPolicy") == "Retain":
                action = "retained"  # as CloudFormation: DeletionPolicy holds for a rollback too
            else:
                self._event(state, lid, record["Type"], record.get("PhysicalResourceId"), "DELETE_IN_PROGRESS")
                try:
                    with _about(lid, record["Type"]):
                        self.handler(record["Type"], lid).delete(record["PhysicalResourceId"], record["Properties"])
                except DeployError as err:
                    failed.append(str(err))
                    continue
            del current[lid]
            self._save(state)
            self._line(action, lid, record["Type"], record.get("PhysicalResourceId") or "-", "(rollback)")
        # 2. Resources replaced under a new name are still there.
        for lid, entry in kept_aside.items():
            if lid not in current:
                current[lid] = {k: v for k, v in entry.items() if k != "LogicalId"}
                self._line("kept", lid, entry["Type"], entry["PhysicalResourceId"], "(rollback: never deleted)")
        state["Cleanup"] = [e for e in state.get("Cleanup", []) if e.get("Retain")]
        self._save(state)
        # 3. Everything else as it was, what others depend on first.
        for lid in creation_order(_dependencies_of(baseline), list(baseline)):
            try:
                self._restore(lid, baseline[lid], state)
            except DeployError as err:
                failed.append(str(err))
        if failed:
            state["StackStatus"] = "ROLLBACK_FAILED" if creating else "UPDATE_ROLLBACK_FAILED"
            self._save(state)
            raise DeployError(f"{failure}\nThe rollback failed too ({state['StackStatus']}):\n  " + "\n  ".join(failed)
                              + "\nThe next deploy carries on from here; --delete removes the stack.")
        state["StackStatus"] = "ROLLBACK_COMPLETE" if creating else "UPDATE_ROLLBACK_COMPLETE"
        state["LastUpdatedTime"] = _now()
        fields = state.pop("BaselineFields", None) or {}
        if creating:
            state.pop("Baseline", None)
        else:  # the stack is the last complete deploy's again: its template, parameters, outputs too
            for key, value in fields.items():
                if value is None:
                    state.pop(key, None)
                else:
                    state[key] = value
        self._save(state)
        raise DeployError(f"{failure}\nStack {self.target.stack_name} rolled back ({state['StackStatus']})")

    def _discard_half_made(self, lid: str, record: dict[str, Any]) -> None:
        """A resource whose creation failed or never answered: delete it by the name it was being
        created with, in case it exists. Best effort: handlers remove what a failed create made,
        and a type whose physical id is not its name cannot be found by the name."""
        name = record.get("Name") or record.get("PhysicalResourceId")
        if not name:
            return
        try:
            with _about(lid, record["Type"]):
                self.handler(record["Type"], lid).delete(name, record["Properties"])
        except DeployError:
            pass

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

    @staticmethod
    def _check_code_at_hand(handler: "ResourceHandler", properties: dict[str, Any],
                            old: dict[str, Any] | None) -> None:
        """A function's previous package must be at hand to upload it again: the deploy keeps it
        before changing the code, but not across a kill."""
        zips = getattr(handler, "_zips", None)
        code = properties.get("Code")
        if zips is None or not isinstance(code, dict) or "ZipSha256" not in code or code["ZipSha256"] in zips:
            return
        if old is None or old.get("Code") != code:
            raise DeployError("its previous code package is not at hand any more (the deploy that changed it "
                              "was interrupted): deploy the previous template again")

    def _same_resource(self, record: dict[str, Any], base: dict[str, Any]) -> bool:
        """Whether `record` is still the baseline's resource (maybe with other properties)."""
        if record.get("Status") in ("CREATE_IN_PROGRESS", "DELETE_IN_PROGRESS") or record["Type"] != base["Type"] \
                or record.get("PhysicalResourceId") != base["PhysicalResourceId"]:
            return False
        return not self.handler(record["Type"], "").replacement_reasons(record["Properties"], base["Properties"])

    def _restore(self, lid: str, base: dict[str, Any], state: dict[str, Any]) -> None:
        record = state["Resources"].get(lid)
        handler = self.handler(base["Type"], lid)
        with _about(lid, base["Type"]):
            if record is None:
                self._check_code_at_hand(handler, base["Properties"], None)
                name = name_of(base, handler)
                self._record(state, lid, {**base, "Status": "CREATE_IN_PROGRESS", "PhysicalResourceId": name})
                applied = handler.create(name, base["Properties"])
                self._record(state, lid, {**base, "PhysicalResourceId": applied.physical_id,
                                          "Attributes": applied.attributes})
                self._line("created", lid, base["Type"], applied.physical_id, "(rollback)")
            elif record.get("Status") == "UPDATE_IN_PROGRESS" or \
                    as_stored(record["Properties"]) != as_stored(base["Properties"]):
                old = _as_found(record, base["Properties"])
                self._check_code_at_hand(handler, base["Properties"], old)
                self._record(state, lid, {**record, "Status": "UPDATE_IN_PROGRESS", "Target": base["Properties"]})
                attributes = handler.update(record["PhysicalResourceId"], old, base["Properties"], record["Attributes"])
                self._record(state, lid, {**base, "Attributes": attributes})
                self._line("restored", lid, base["Type"], record["PhysicalResourceId"], "(rollback)")
            elif record != base:
                self._record(state, lid, base)  # the same resource: only bookkeeping differs
