"""CloudFormation's operation events and hook results: DescribeEvents (a stack's events grouped by the
operation that made them, in the OperationEvent shape of botocore's model) and ListHookResults.

kinesim runs no CloudFormation Hooks and no early validations, so a change set's creation has no
VALIDATION_ERROR or HOOK_INVOCATION_ERROR events and every target has no hook results. The CDK asks
both when a change set fails (its change set diagnosis): with empty answers it reports the change
set's StatusReason, the real cause, and nothing above it."""
from __future__ import annotations

import base64
import binascii
from typing import Any

from kinesim.protocol.errors import AwsError

from .records import Records
from .service import CloudFormationService
from .stack_api import _name

# OperationEvents in a page (DescribeStackEvents' page on AWS is 100 events).
PAGE_SIZE = 100
_MEMBERS = ("EventId", "StackId", "OperationId", "OperationType", "LogicalResourceId", "PhysicalResourceId",
            "ResourceType", "Timestamp", "ResourceStatus", "ResourceStatusReason", "ResourceProperties",
            "ClientRequestToken")
_NO_SCOPE = "One of ChangeSetName, OperationId or StackName must be specified"


def describe_events(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    change_set_name, operation_id = params.get("ChangeSetName"), params.get("OperationId")
    stack = _name(params) if params.get("StackName") else None
    if not (stack or change_set_name or operation_id) or \
            change_set_name and not stack and not change_set_name.startswith("arn:"):
        raise AwsError("ValidationError", _NO_SCOPE)
    statuses: dict[str, str] = {}  # a change set creation's OperationStatus, by its operation id
    if change_set_name:
        change_set = svc.records.change_set(change_set_name, stack)
        creation = change_set.get("OperationId")  # None: stored before kinesim kept operations
        if creation:
            statuses[creation] = _change_set_status(change_set)
        events = [e for e in svc.records.events(change_set["StackId"]) if creation and e.get("OperationId") == creation]
    elif stack:
        state = svc.records.find(stack)
        if state is None:
            raise AwsError("ValidationError", f"Stack [{stack}] does not exist")
        events = svc.records.events(state["StackId"])
    else:
        events = [e for stack_events in svc.records.all_events().values() for e in stack_events
                  if e.get("OperationId") == operation_id]
    if operation_id:
        events = [e for e in events if e.get("OperationId") == operation_id]
    statuses.update(_change_set_statuses(svc.records, {e["StackId"] for e in events}, statuses))
    out = operation_events(events, statuses)
    if (params.get("Filters") or {}).get("FailedEvents"):
        out = [e for e in out if _failed(e)]
    page, token = paged(out, params.get("NextToken"))
    return {"OperationEvents": page, "NextToken": token}


def operation_events(events: list[dict[str, Any]], change_sets: dict[str, str]) -> list[dict[str, Any]]:
    """Stored stack events (newest first) as OperationEvents. `change_sets`: the OperationStatus of
    change set creations, by operation id (their events do not say how the creation ended)."""
    status: dict[str, str] = {}  # each operation's, from its newest stack-level event
    for event in events:
        op = event.get("OperationId")
        if op and op not in status and _stack_level(event):
            status[op] = change_sets.get(op) or _operation_status(event["ResourceStatus"], event["OperationType"])
    out = []
    for event in events:
        shown = {k: event[k] for k in _MEMBERS if event.get(k) is not None}
        if event.get("OperationId") in status:
            shown["OperationStatus"] = status[event["OperationId"]]
        if _stack_level(event):
            shown["EventType"] = "STACK_EVENT"
        else:
            shown["EventType"] = "PROVISIONING_ERROR" if _failed(event) else "PROGRESS_EVENT"
        out.append(shown)
    return out


def _stack_level(event: dict[str, Any]) -> bool:
    return event.get("ResourceType") == "AWS::CloudFormation::Stack" and event.get("PhysicalResourceId") == \
        event.get("StackId")


def _failed(event: dict[str, Any]) -> bool:
    return str(event.get("ResourceStatus", "")).endswith("_FAILED")


def _operation_status(stack_status: str, operation_type: str) -> str:
    if stack_status.endswith("_IN_PROGRESS"):
        return "IN_PROGRESS"
    if stack_status.endswith("_FAILED"):
        return "FAILED"
    # A rollback that ends is a failed create or update, or the RollbackStack operation done.
    if "ROLLBACK" in stack_status and operation_type != "ROLLBACK":
        return "FAILED"
    return "SUCCEEDED"


def _change_set_status(change_set: dict[str, Any]) -> str:
    status = change_set.get("Status", "")
    return "FAILED" if status == "FAILED" else "SUCCEEDED" if status == "CREATE_COMPLETE" else "IN_PROGRESS"


def _change_set_statuses(records: Records, stack_ids: set[str], known: dict[str, str]) -> dict[str, str]:
    out = {}
    for stack_id in stack_ids:
        for change_set_id in records.change_set_ids(stack_id):
            change_set = records.find_change_set(change_set_id)
            if change_set is not None and change_set.get("OperationId") and change_set["OperationId"] not in known:
                out[change_set["OperationId"]] = _change_set_status(change_set)
    return out


def paged(items: list[dict[str, Any]], token: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """A page of events, newest first, and the token of the next (the last event shown, opaque).
    A token stays good while events are added: it names an event, not a position."""
    start = 0
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeError, ValueError):
            after = None
        start = next((i + 1 for i, e in enumerate(items) if e["EventId"] == after), -1)
        if start < 0:
            raise AwsError("ValidationError", "Invalid NextToken")
    page = items[start:start + PAGE_SIZE]
    more = start + PAGE_SIZE < len(items)
    return page, base64.urlsafe_b64encode(page[-1]["EventId"].encode()).decode() if more else None


def list_hook_results(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    """No hook has run on anything here. A target that exists is echoed with no results; one that
    does not is HookResultNotFound. Without a target (all invocations, or a hook's), none."""
    target_type, target_id = params.get("TargetType"), params.get("TargetId")
    if bool(target_type) != bool(target_id):
        raise AwsError("ValidationError", "TargetType and TargetId must be specified together")
    if params.get("Status") and not params.get("TypeArn"):
        raise AwsError("ValidationError", "Status can only be specified with TypeArn")
    if not target_id:
        return {"HookResults": []}
    if target_type == "CHANGE_SET":
        exists = target_id.startswith("arn:") and svc.records.find_change_set(target_id) is not None
    elif target_type == "STACK":
        exists = svc.records.find(target_id) is not None
    elif target_type == "RESOURCE":  # a live stack's resource, by its logical or physical id
        exists = any(target_id == lid or target_id == record.get("PhysicalResourceId")
                     for state in svc.records.stacks().values()
                     for lid, record in (state.get("Resources") or {}).items())
    else:  # CLOUD_CONTROL: a Cloud Control request token, and kinesim serves no Cloud Control API
        exists = False
    if not exists:
        raise AwsError("HookResultNotFound", "The specified target doesn't have any requested Hook invocations.",
                       404)
    return {"TargetType": target_type, "TargetId": target_id, "HookResults": []}


EVENTS_OPERATIONS = {"DescribeEvents": describe_events, "ListHookResults": list_hook_results}
