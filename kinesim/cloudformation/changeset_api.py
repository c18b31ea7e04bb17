"""CloudFormation's change sets: what a template would change, listed before anything is done
(changes.py computes it with the engine's own plan), executed as an update (or the creation of
a stack that a CREATE change set holds in REVIEW_IN_PROGRESS)."""
from __future__ import annotations

import json
import re
import uuid
from typing import Any

from kinesim.deploy.sam import transforms
from kinesim.protocol.errors import AwsError

from . import templates
from .changes import resource_changes
from .records import now, timestamp
from .service import UPDATABLE, CloudFormationService, stack_event
from .stack_api import _name, not_updatable

_CHANGE_SET_NAME = re.compile(r"[a-zA-Z][-a-zA-Z0-9]*")
NO_CHANGES = "The submitted information didn't contain changes. Submit different information to create a change set."


def create_change_set(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    name = _name(params)
    cs_name = params.get("ChangeSetName", "")
    if not _CHANGE_SET_NAME.fullmatch(cs_name) or len(cs_name) > 128:
        raise AwsError("ValidationError", f"1 validation error detected: Value '{cs_name}' at 'changeSetName' failed "
                                          "to satisfy constraint: Member must satisfy regular expression pattern: "
                                          "[a-zA-Z][-a-zA-Z0-9]*")
    kind = params.get("ChangeSetType") or "UPDATE"
    state = svc.records.find(name, deleted=kind != "CREATE")
    if kind == "CREATE":
        if state is not None and (state["StackStatus"] != "REVIEW_IN_PROGRESS" or name.startswith("arn:")):
            raise AwsError("ValidationError", f"Stack [{name}] already exists and cannot be created again with the "
                                              f"changeSet [{cs_name}].")
        if name.startswith("arn:") and state is None:
            raise AwsError("ValidationError", f"Stack [{name}] already exists and cannot be created again with the "
                                              f"changeSet [{cs_name}].")
    elif kind == "UPDATE":
        if state is None:
            raise AwsError("ValidationError", f"Stack [{name}] does not exist")
        if state["StackStatus"] not in UPDATABLE:  # a deleted one by its id too: "is in DELETE_COMPLETE state"
            raise not_updatable(state)
    else:
        raise AwsError("ValidationError", f"ChangeSetType {kind} is not supported by kinesim (CREATE and UPDATE are)")
    if state is None:
        svc.quotas.check_new_stack()
    if state is not None and any(svc.records.change_set(cid, None)["ChangeSetName"] == cs_name
                                 for cid in svc.records.change_set_ids(state["StackId"])):
        raise AwsError("AlreadyExistsException", f"ChangeSet [{cs_name}] already exists")
    stack_name = state["StackName"] if state is not None else name
    plan = svc.plan(stack_name, params, state)
    if not transforms(plan.raw):  # with transforms, AWS finds this when the change set is computed
        svc.check_capabilities(plan, params.get("Capabilities") or [], directly=False)
    if state is None:
        state = svc.new_state(stack_name, "REVIEW_IN_PROGRESS")
        state["StackStatusReason"] = "User Initiated"  # as DescribeStacks shows a stack in review on AWS
        svc.records.put(state)
        operation_id = svc.records.begin_operation(state["StackId"], "CREATE_CHANGESET")
        svc.records.add_event(stack_event(state, "REVIEW_IN_PROGRESS", "User Initiated"))
    else:
        operation_id = svc.records.begin_operation(state["StackId"], "CREATE_CHANGESET")
    change_set_id = (f"arn:{state['StackId'].split(':')[1]}:cloudformation:{svc.settings.region}:"
                     f"{svc.settings.account_id}:changeSet/{cs_name}/{uuid.uuid4()}")
    change_set = {"ChangeSetId": change_set_id, "ChangeSetName": cs_name, "StackId": state["StackId"],
                  "StackName": stack_name, "CreationTime": now(), "ChangeSetType": kind, "Template": plan.text,
                  "Given": plan.given, "Capabilities": params.get("Capabilities") or [],
                  "Tags": params.get("Tags") or [], "NotificationARNs": params.get("NotificationARNs") or [],
                  "IncludeNestedStacks": bool(params.get("IncludeNestedStacks")), "Request": _kept(params),
                  "OperationId": operation_id}
    if params.get("Description"):
        change_set["Description"] = params["Description"]
    change_set.update(_computed(svc, plan, state, params))
    svc.records.put_change_set(change_set)
    return {"Id": change_set_id, "StackId": state["StackId"]}


def _kept(params: dict[str, Any]) -> dict[str, Any]:
    """What of the request ExecuteChangeSet applies to the stack."""
    return {k: params[k] for k in ("Capabilities", "Tags", "NotificationARNs", "RoleARN") if k in params}


def _computed(svc: CloudFormationService, plan: Any, state: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The change set's status and changes."""
    if plan.problem is not None:
        return _failed(plan.problem.message)
    try:
        svc.check_capabilities(plan, params.get("Capabilities") or [], directly=False)
    except AwsError as err:
        return _failed(err.message)
    changes = resource_changes(plan.deployer, plan.prepared, state)
    unchanged = (plan.text == state.get("Template") and plan.given == (state.get("Given") or {})) or \
        (not changes and state["StackStatus"] != "REVIEW_IN_PROGRESS"
         and json.dumps(plan.prepared.template, sort_keys=True) == json.dumps(state.get("ProcessedTemplate"),
                                                                              sort_keys=True)
         and plan.prepared.parameters == (state.get("Parameters") or {}))
    if unchanged and state["StackStatus"] != "REVIEW_IN_PROGRESS":
        return {**_failed(NO_CHANGES), "Changes": []}
    declared = plan.raw.get("Parameters") or {}
    return {"Status": "CREATE_COMPLETE", "ExecutionStatus": "AVAILABLE", "Changes": changes,
            "Parameters": templates.shown_parameters(declared, plan.prepared.parameters, plan.given),
            "ProcessedTemplate": plan.prepared.template}


def _failed(reason: str) -> dict[str, Any]:
    return {"Status": "FAILED", "ExecutionStatus": "UNAVAILABLE", "StatusReason": reason, "Changes": []}


def describe_change_set(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    change_set = svc.records.change_set(params.get("ChangeSetName", ""), params.get("StackName"))
    out = {k: v for k, v in change_set.items() if k not in ("Template", "Given", "ProcessedTemplate", "Request")}
    out["CreationTime"] = timestamp(change_set["CreationTime"])
    # As AWS answers: Parameters and Tags only when there are some; Changes, Capabilities and
    # NotificationARNs always (the SAM CLI iterates Changes unguarded).
    for key in ("Parameters", "Tags"):
        if not out.get(key):
            out.pop(key, None)
    out.setdefault("RollbackConfiguration", {})
    return out


def list_change_sets(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    state = svc.records.find(_name(params))
    if state is None:
        raise AwsError("ValidationError", f"Stack [{params['StackName']}] does not exist")
    summaries = []
    for change_set_id in svc.records.change_set_ids(state["StackId"]):
        cs = svc.records.change_set(change_set_id, None)
        summary = {k: cs[k] for k in ("StackId", "StackName", "ChangeSetId", "ChangeSetName", "ExecutionStatus",
                                      "Status", "StatusReason", "Description", "IncludeNestedStacks") if k in cs}
        summary["CreationTime"] = timestamp(cs["CreationTime"])
        summaries.append(summary)
    summaries.sort(key=lambda s: s["CreationTime"])
    return {"Summaries": summaries}


def delete_change_set(svc: CloudFormationService, params: dict[str, Any]) -> None:
    try:
        change_set = svc.records.change_set(params.get("ChangeSetName", ""), params.get("StackName"))
    except AwsError as err:
        if err.code == "ChangeSetNotFound" and params.get("StackName"):
            return None  # of a stack that exists: nothing to delete (the CDK deletes its change set before each deploy)
        raise
    if change_set.get("ExecutionStatus") == "EXECUTE_IN_PROGRESS":
        raise AwsError("InvalidChangeSetStatus", f"ChangeSet [{change_set['ChangeSetId']}] cannot be deleted in its "
                                                 "current status of [EXECUTE_IN_PROGRESS]")
    svc.records.delete_change_set(change_set["ChangeSetId"])
    return None


def execute_change_set(svc: CloudFormationService, params: dict[str, Any]) -> None:
    change_set = svc.records.change_set(params.get("ChangeSetName", ""), params.get("StackName"))
    if change_set["Status"] != "CREATE_COMPLETE" or change_set["ExecutionStatus"] != "AVAILABLE":
        raise AwsError("InvalidChangeSetStatus", f"ChangeSet [{change_set['ChangeSetId']}] cannot be executed in its "
                                                 f"current status of [{change_set['Status']}]")
    state = svc.records.find(change_set["StackId"], deleted=False)
    if state is None:
        raise AwsError("ValidationError", f"Stack [{change_set['StackName']}] does not exist")
    creating = state["StackStatus"] == "REVIEW_IN_PROGRESS"
    if not creating and state["StackStatus"] not in UPDATABLE:
        raise not_updatable(state)
    # "When you execute a change set, CloudFormation deletes all other change sets associated with
    # the stack" (ExecuteChangeSet's documentation).
    for other_id in svc.records.change_set_ids(state["StackId"]):
        if other_id != change_set["ChangeSetId"]:
            svc.records.delete_change_set(other_id)
    change_set["ExecutionStatus"] = "EXECUTE_IN_PROGRESS"
    svc.records.put_change_set(change_set)
    svc.begin(state, "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS", change_set["Template"],
              change_set["Given"], change_set["Request"], change_set["ChangeSetId"],
              on_end=lambda ok: _executed(svc, change_set["ChangeSetId"], ok),
              processed=change_set.get("ProcessedTemplate"))
    return None


def _executed(svc: CloudFormationService, change_set_id: str, ok: bool) -> None:
    found = svc.records.find_change_set(change_set_id)
    if found is not None:
        found["ExecutionStatus"] = "EXECUTE_COMPLETE" if ok else "EXECUTE_FAILED"
        svc.records.put_change_set(found)


CHANGE_SET_OPERATIONS = {
    "CreateChangeSet": create_change_set, "DescribeChangeSet": describe_change_set,
    "ListChangeSets": list_change_sets, "DeleteChangeSet": delete_change_set,
    "ExecuteChangeSet": execute_change_set,
}
