"""CloudFormation's stack operations: each a function `(service, params) -> answer`, answers in
the shapes of botocore's model (query.py writes them as XML). Texts of errors are AWS's, as
LocalStack's recordings of AWS show them (tests/aws/services/cloudformation/api/*.snapshot.json)."""
from __future__ import annotations

import json
import re
from typing import Any

from kinesim.deploy.sam import transforms
from kinesim.protocol.errors import AwsError

from . import templates
from .records import stack_missing, timestamp
from .service import UPDATABLE, CloudFormationService, stack_event

_NAME_PATTERN = "[a-zA-Z][-a-zA-Z0-9]*|arn:[-a-zA-Z0-9:/._+]*"


def _name(params: dict[str, Any], member: str = "StackName") -> str:
    name = params.get(member)
    if not name:
        raise AwsError("ValidationError", f"{member} is a required parameter.")
    if not re.fullmatch(_NAME_PATTERN, name) or len(name) > 128 and not name.startswith("arn:"):
        raise AwsError("ValidationError", f"1 validation error detected: Value '{name}' at '{member[0].lower()}"
                                          f"{member[1:]}' failed to satisfy constraint: Member must satisfy regular "
                                          f"expression pattern: {_NAME_PATTERN}")
    return name


def not_updatable(state: dict[str, Any]) -> AwsError:
    return AwsError("ValidationError", f"Stack:{state['StackId']} is in {state['StackStatus']} state and can not "
                                       "be updated.")


def create_stack(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    name = _name(params)
    existing = svc.records.live(name)
    # A stack a CREATE change set holds in review is created by CreateStack all the same (its id
    # kept, its change sets obsolete), as AWS does (LocalStack's test_create_while_in_review).
    reviewing = existing is not None and existing["StackStatus"] == "REVIEW_IN_PROGRESS" \
        and not svc.runner.busy(name)
    if existing is not None and not reviewing:
        raise AwsError("AlreadyExistsException", f"Stack [{name}] already exists")
    if not reviewing:
        svc.quotas.check_new_stack()
    state = existing if reviewing else svc.new_state(name, "CREATE_IN_PROGRESS")
    state["EnableTerminationProtection"] = bool(params.get("EnableTerminationProtection"))
    parent = svc.records.parent_of(name)
    if parent is not None:  # a nested stack: its parent's AWS::CloudFormation::Stack is creating it
        state.update(ParentId=parent["StackId"], RootId=parent.get("RootId") or parent["StackId"])
    plan = svc.plan(name, params, state)
    if plan.problem is not None:
        raise plan.problem
    svc.check_capabilities(plan, params.get("Capabilities") or [], directly=True)
    if reviewing:
        for change_set_id in svc.records.change_set_ids(state["StackId"]):
            change_set = svc.records.change_set(change_set_id, None)
            change_set["ExecutionStatus"] = "OBSOLETE"
            svc.records.put_change_set(change_set)
    operation_id = svc.begin(state, "CREATE_IN_PROGRESS", plan.text, plan.given, params,
                             processed=plan.prepared.template)
    return {"StackId": state["StackId"], "OperationId": operation_id}


def update_stack(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    name = _name(params)
    state = svc.records.find(name)  # a deleted stack, by id: "is in DELETE_COMPLETE state"
    if state is None:
        raise stack_missing(name)
    if state["StackStatus"] not in UPDATABLE:
        raise not_updatable(state)
    plan = svc.plan(state["StackName"], params, state)
    if plan.problem is not None:
        raise plan.problem
    svc.check_capabilities(plan, params.get("Capabilities") or [], directly=True)
    if plan.text == state.get("Template") and plan.given == (state.get("Given") or {}) \
            and (params.get("Tags") or state.get("Tags") or []) == (state.get("Tags") or []):
        raise AwsError("ValidationError", "No updates are to be performed.")
    state.pop("ChangeSetId", None)  # DescribeStacks names a change set only when one made the stack as it is
    operation_id = svc.begin(state, "UPDATE_IN_PROGRESS", plan.text, plan.given, params,
                             processed=plan.prepared.template)
    return {"StackId": state["StackId"], "OperationId": operation_id}


def delete_stack(svc: CloudFormationService, params: dict[str, Any]) -> None:
    name = _name(params)
    state = svc.records.find(name, deleted=False)
    if state is None:
        return None  # deleting a stack that does not exist succeeds, as on AWS
    if state.get("EnableTerminationProtection"):
        raise AwsError("ValidationError", f"Stack [{state['StackName']}] cannot be deleted while TerminationProtection "
                                          "is enabled")
    if svc.runner.busy(state["StackName"]):
        if state["StackStatus"] == "DELETE_IN_PROGRESS":
            return None
        raise AwsError("ValidationError", f"Stack [{state['StackName']}] cannot be deleted while in status "
                                          f"{state['StackStatus']}")
    retain = params.get("RetainResources") or []
    if retain and state["StackStatus"] != "DELETE_FAILED":
        raise AwsError("ValidationError", f"Invalid operation on stack [{state['StackId']}]. RetainResources can only "
                                          "be specified when a stack is in the DELETE_FAILED state")
    svc.begin_delete(state, retain)
    return None


def describe_stacks(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    if params.get("StackName"):
        return {"Stacks": [_stack(svc.records.get(params["StackName"]))]}
    states = sorted(svc.records.stacks().values(), key=lambda s: timestamp(s.get("CreationTime")), reverse=True)
    return {"Stacks": [_stack(s) for s in states]}


def _stack(state: dict[str, Any]) -> dict[str, Any]:
    out = {key: state[key] for key in ("StackId", "StackName", "StackStatus", "StackStatusReason", "Description",
                                       "ChangeSetId", "RoleARN", "TimeoutInMinutes", "ParentId", "RootId")
           if state.get(key)}
    out["CreationTime"] = timestamp(state.get("CreationTime"))
    if state.get("LastUpdatedTime"):
        out["LastUpdatedTime"] = timestamp(state["LastUpdatedTime"])
    if state.get("DeletionTime"):
        out["DeletionTime"] = timestamp(state["DeletionTime"])
    declared = templates.stored(state.get("Template") or "").get("Parameters") or {}
    out["Parameters"] = templates.shown_parameters(declared, state.get("Parameters") or {}, state.get("Given") or {})
    out["Outputs"] = [{"OutputKey": key, **{k: v for k, v in output.items() if k in ("OutputValue", "Description",
                                                                                      "ExportName")}}
                      for key, output in (state.get("Outputs") or {}).items()]
    # As AWS answers (LocalStack's recordings): Capabilities only when granted, RollbackConfiguration
    # always, EnableTerminationProtection on every stack but a deleted one. Parameters, Outputs and
    # Tags always (AWS leaves out the first two when empty; the SAM CLI reads them unguarded).
    if state.get("Capabilities"):
        out["Capabilities"] = state["Capabilities"]
    out.update(Tags=state.get("Tags") or [], NotificationARNs=state.get("NotificationARNs") or [],
               DisableRollback=bool(state.get("DisableRollback")),
               RollbackConfiguration=state.get("RollbackConfiguration") or {},
               DriftInformation={"StackDriftStatus": "NOT_CHECKED"})
    if state["StackStatus"] != "DELETE_COMPLETE":
        out["EnableTerminationProtection"] = bool(state.get("EnableTerminationProtection"))
    for output in out["Outputs"]:
        if not isinstance(output["OutputValue"], str):
            value = output["OutputValue"]
            output["OutputValue"] = ",".join(map(str, value)) if isinstance(value, list) else json.dumps(value)
    return out


def list_stacks(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    wanted = set(params.get("StackStatusFilter") or [])
    states = list(svc.records.stacks().values()) + list(svc.records.deleted().values())
    states.sort(key=lambda s: timestamp(s.get("CreationTime")), reverse=True)
    summaries = []
    for state in states:
        if wanted and state["StackStatus"] not in wanted:
            continue
        summary = {key: state[key] for key in ("StackId", "StackName", "StackStatus", "StackStatusReason")
                   if state.get(key)}
        summary["CreationTime"] = timestamp(state.get("CreationTime"))
        for key in ("LastUpdatedTime", "DeletionTime"):
            if state.get(key):
                summary[key] = timestamp(state[key])
        if state.get("Description"):
            summary["TemplateDescription"] = state["Description"]
        summary["DriftInformation"] = {"StackDriftStatus": "NOT_CHECKED"}
        summaries.append(summary)
    return {"StackSummaries": summaries}


def describe_stack_events(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    name = _name(params)
    state = svc.records.find(name)
    if state is None:
        raise AwsError("ValidationError", f"Stack [{name}] does not exist")
    return {"StackEvents": svc.records.events(state["StackId"])}


def _resources(state: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(lid, record) for lid, record in (state.get("Resources") or {}).items()]


def _resource_status(record: dict[str, Any]) -> str:
    status = record.get("Status")
    return status if status else "UPDATE_COMPLETE" if record.get("Updated") else "CREATE_COMPLETE"


def _resource(state: dict[str, Any], lid: str, record: dict[str, Any], time_key: str) -> dict[str, Any]:
    out = {"LogicalResourceId": lid, "PhysicalResourceId": record.get("PhysicalResourceId") or "",
           "ResourceType": record["Type"], time_key: timestamp(state.get("LastUpdatedTime") or state.get("CreationTime")),
           "ResourceStatus": _resource_status(record), "DriftInformation": {"StackResourceDriftStatus": "NOT_CHECKED"}}
    return out


def describe_stack_resource(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    state = svc.records.get(_name(params))
    lid = params.get("LogicalResourceId", "")
    record = (state.get("Resources") or {}).get(lid)
    if record is None:
        raise AwsError("ValidationError", f"Resource {lid} does not exist for stack {state['StackName']}")
    detail = _resource(state, lid, record, "LastUpdatedTimestamp")
    detail.update(StackName=state["StackName"], StackId=state["StackId"])
    return {"StackResourceDetail": detail}


def describe_stack_resources(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    if not params.get("StackName") and not params.get("PhysicalResourceId"):
        raise AwsError("ValidationError", "Either StackName or PhysicalResourceId must be specified.")
    if params.get("StackName"):
        states = [svc.records.get(params["StackName"])]
    else:
        states = list(svc.records.stacks().values())
    out = []
    for state in states:
        for lid, record in _resources(state):
            if params.get("LogicalResourceId") not in (None, lid):
                continue
            if params.get("PhysicalResourceId") not in (None, record.get("PhysicalResourceId")):
                continue
            resource = _resource(state, lid, record, "Timestamp")
            resource.update(StackName=state["StackName"], StackId=state["StackId"])
            out.append(resource)
    if params.get("PhysicalResourceId") and not out:
        raise AwsError("ValidationError", f"Stack for {params['PhysicalResourceId']} does not exist")
    return {"StackResources": out}


def list_stack_resources(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    state = svc.records.get(_name(params))
    return {"StackResourceSummaries": [_resource(state, lid, record, "LastUpdatedTimestamp")
                                       for lid, record in _resources(state)]}


def get_template(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    stage = params.get("TemplateStage") or "Original"
    if params.get("ChangeSetName"):
        if not params.get("StackName") and not params["ChangeSetName"].startswith("arn:"):
            raise AwsError("ValidationError", "StackName is a required parameter.")
        source = svc.records.change_set(params["ChangeSetName"], params.get("StackName"))
        text, processed = source.get("Template", ""), source.get("ProcessedTemplate")
    elif params.get("StackName"):
        state = svc.records.get(params["StackName"])
        text, processed = state.get("Template", ""), state.get("ProcessedTemplate")
    else:
        raise AwsError("ValidationError", "StackName is required if ChangeSetName is not specified.")
    available = ["Original", "Processed"]
    # Processed: the template after its transforms, as JSON; one without transforms is its text as
    # sent, as AWS answers (LocalStack's test_get_template_using_create_stack).
    if stage == "Processed" and processed is not None and transforms(templates.stored(text)):
        body = json.dumps(processed)
    else:
        body = text
    return {"TemplateBody": body, "StagesAvailable": available}


def get_template_summary(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    if params.get("StackName"):
        state = svc.records.get(params["StackName"])
        if state["StackStatus"] == "REVIEW_IN_PROGRESS":
            raise AwsError("ValidationError", "GetTemplateSummary cannot be called on REVIEW_IN_PROGRESS stacks.")
        return templates.summary(templates.stored(state.get("Template") or ""), state.get("ProcessedTemplate"))
    text = templates.body_of(params, svc.read_object)
    return templates.summary(templates.parse(text))


def validate_template(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    template = templates.parse(templates.body_of(params, svc.read_object))
    templates.check_cycles(template)
    summary = templates.summary(template)
    out = {"Parameters": [{k: v for k, v in p.items() if k in ("ParameterKey", "DefaultValue", "NoEcho",
                                                                "Description")} for p in summary["Parameters"]]}
    for key in ("Description", "Capabilities", "CapabilitiesReason", "DeclaredTransforms"):
        if key in summary:
            out[key] = summary[key]
    return out


def list_exports(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    return {"Exports": [{"ExportingStackId": stack_id, "Name": name, "Value": value}
                        for name, (stack_id, value) in sorted(svc.records.exports().items())]}


def list_imports(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("ExportName", "")
    importers = svc.records.importers(name)
    if not importers:
        raise AwsError("ValidationError", f"Export '{name}' is not imported by any stack.")
    return {"Imports": importers}


def update_termination_protection(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    state = svc.records.find(_name(params), deleted=False)
    if state is None:
        raise stack_missing(params["StackName"])
    state["EnableTerminationProtection"] = bool(params.get("EnableTerminationProtection"))
    svc.records.put(state)
    return {"StackId": state["StackId"]}


def cancel_update_stack(svc: CloudFormationService, params: dict[str, Any]) -> None:
    state = svc.records.find(_name(params), deleted=False)
    if state is None:
        raise stack_missing(params["StackName"])
    if state["StackStatus"] != "UPDATE_IN_PROGRESS" or not svc.runner.cancel(state["StackName"]):
        raise AwsError("ValidationError", "CancelUpdateStack cannot be called from current stack status")
    return None


def rollback_stack(svc: CloudFormationService, params: dict[str, Any]) -> dict[str, Any]:
    """A stack left failed (its rollback failed, or was disabled) returned to its last stable state."""
    state = svc.records.find(_name(params), deleted=False)
    if state is None:
        raise stack_missing(params["StackName"])
    if state["StackStatus"] not in ("CREATE_FAILED", "UPDATE_FAILED", "ROLLBACK_FAILED", "UPDATE_ROLLBACK_FAILED") \
            or svc.runner.busy(state["StackName"]):
        raise AwsError("ValidationError", f"Stack {state['StackId']} is in {state['StackStatus']} state and can not "
                                          "be rolled back")
    operation_id = svc.records.begin_operation(state["StackId"], "ROLLBACK")
    svc.records.add_event(stack_event(state, "ROLLBACK_IN_PROGRESS" if "UPDATE" not in state["StackStatus"]
                                      else "UPDATE_ROLLBACK_IN_PROGRESS", "User Initiated"))
    svc.runner.start(state["StackName"], state["StackId"], lambda deployer: deployer.roll_back_stack())
    return {"StackId": state["StackId"], "OperationId": operation_id}


STACK_OPERATIONS = {
    "CreateStack": create_stack, "UpdateStack": update_stack, "DeleteStack": delete_stack,
    "DescribeStacks": describe_stacks, "ListStacks": list_stacks, "DescribeStackEvents": describe_stack_events,
    "DescribeStackResource": describe_stack_resource, "DescribeStackResources": describe_stack_resources,
    "ListStackResources": list_stack_resources, "GetTemplate": get_template,
    "GetTemplateSummary": get_template_summary, "ValidateTemplate": validate_template,
    "ListExports": list_exports, "ListImports": list_imports,
    "UpdateTerminationProtection": update_termination_protection, "CancelUpdateStack": cancel_update_stack,
    "RollbackStack": rollback_stack,
}
