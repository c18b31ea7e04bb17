"""The CloudFormation service: what its operations (stack_api, changeset_api) share — the engine for a
stack (a Deployer whose clients call this same server), a request's template made ready to
deploy, and the start of a stack operation."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from kinesim.config import Settings
from kinesim.config import partition_of
from kinesim.deploy.resources import service_clients, target_for
from kinesim.deploy.sam import transforms
from kinesim.deploy.stack import Deployer, Prepared, prepare
from kinesim.deploy.template import DeployError, TemplateError
from kinesim.protocol.errors import AwsError
from kinesim.store import Store

from . import templates
from .account_quotas import AccountQuotas
from .custom_responses import CustomResponses
from .records import Records, now
from .runner import Runner, StoreStates

# Statuses from which a stack can be updated (AWS: "Stack:<id> is in X state and can not be updated.").
UPDATABLE = frozenset(("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE",
                       "IMPORT_ROLLBACK_COMPLETE"))


@dataclass
class Plan:
    """A request's template made ready: its text, the template, the parameter values given, and
    the engine's preparation (None when it failed: `problem` says why)."""
    text: str
    raw: dict[str, Any]
    given: dict[str, str]
    prepared: Prepared | None
    problem: AwsError | None
    deployer: Deployer


class CloudFormationService:
    def __init__(self, settings: Settings, store: Store, read_object: Callable[[str, str], bytes],
                 endpoint_url: Callable[[], str], credentials: dict[str, str], runtimes: Callable[[], list[str]]):
        self.settings = settings
        self.records = Records(store)
        self.quotas = AccountQuotas(self.records, settings.stack_limit)
        self.read_object = read_object  # (bucket, key) -> bytes, from this server's S3 store
        self.endpoint_url = endpoint_url
        self.credentials = credentials
        self.runtimes = runtimes
        self._clients: dict[str, Any] | None = None
        self._clients_lock = threading.Lock()
        self.responses = CustomResponses(endpoint_url)  # custom resource providers answer here
        self.runner = Runner(self.records, self.deployer, f"{endpoint_url()}/_kinesim/health")
        self.runner.resume(self._carry_on)

    # the engine

    def clients(self) -> dict[str, Any]:
        with self._clients_lock:
            if self._clients is None:  # made once: boto3 clients are thread-safe, and slow to make
                self._clients = service_clients(self.endpoint_url(), self.settings.region, self.credentials)
            return self._clients

    def deployer(self, name: str, echo: Callable[[str], None] = lambda line: None) -> Deployer:
        region = self.settings.region
        target = target_for(self.clients(), stack_name=name, region=region, account_id=self.settings.account_id,
                            partition=partition_of(region), await_stack=self._await_stack,
                            custom_resources=self.responses)
        return Deployer(target, StoreStates(self.records), echo, self.runtimes(), self.records.add_event,
                        self.export_value)

    def _await_stack(self, name: str, timeout: float) -> bool:
        """The engine's wait for a nested stack's operation (Target.await_stack). The waiting thread
        first gives back its store connection: a chain of nested stacks holds a waiting thread per
        level, and 2,000 connections were ~260 MB."""
        self.records.store.release_reader()
        return self.runner.wait(name, timeout)

    def export_value(self, name: str) -> Any:
        found = self.records.exports().get(name)
        return found[1] if found else None

    def plan(self, name: str, params: dict[str, Any], state: dict[str, Any] | None) -> Plan:
        """The request's template, read, parsed and prepared as the engine will deploy it."""
        text = templates.body_of(params, self.read_object, (state or {}).get("Template"))
        raw = templates.parse(text)
        previous = previous_values(state) if state is not None and state.get("Template") else None
        given = templates.parameter_overrides(raw.get("Parameters") or {}, params.get("Parameters") or [], previous)
        deployer = self.deployer(name)
        stack_id = (state or {}).get("StackId") or self.new_stack_id(name)
        try:
            prepared: Prepared | None = prepare(raw, deployer.target, given, stack_id, self.runtimes(),
                                                deployer.handler, self.export_value)
            problem = None
            if transforms(raw):
                templates.check_processed_size(prepared.template, params)
        except (TemplateError, DeployError) as err:
            prepared, problem = None, AwsError("ValidationError", str(err))
        except AwsError as err:
            prepared, problem = None, err
        return Plan(text, raw, given, prepared, problem, deployer)

    def new_stack_id(self, name: str) -> str:
        region = self.settings.region
        return f"arn:{partition_of(region)}:cloudformation:{region}:{self.settings.account_id}:stack/{name}/{uuid.uuid4()}"

    def new_state(self, name: str, status: str) -> dict[str, Any]:
        return {"StackName": name, "StackId": self.new_stack_id(name), "StackStatus": status, "CreationTime": now(),
                "Resources": {}, "Outputs": {}}

    def check_capabilities(self, plan: Plan, granted: list[str], directly: bool) -> None:
        """InsufficientCapabilitiesException as AWS raises it: transforms applied by CreateStack or
        UpdateStack need CAPABILITY_AUTO_EXPAND; IAM resources need CAPABILITY_(NAMED_)IAM."""
        if directly and transforms(plan.raw) and "CAPABILITY_AUTO_EXPAND" not in granted:
            raise AwsError("InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_AUTO_EXPAND]")
        if plan.prepared is not None:
            templates.check_capabilities(plan.prepared.template, granted)

    def begin(self, state: dict[str, Any], status: str, text: str, given: dict[str, str],
              params: dict[str, Any], change_set_id: str | None = None,
              on_end: Callable[[bool], None] | None = None, processed: dict[str, Any] | None = None) -> str:
        """Mark the stack IN_PROGRESS (what DescribeStacks answers from now on) and run the deploy.
        The request's fields become the stack's with it (and return to the old ones if it rolls back).
        `processed`: the template as it will be deployed, whose resources the operation counts.
        Answers the operation's id."""
        self.quotas.operation_begins(state, status == "CREATE_IN_PROGRESS", processed)
        fields: dict[str, Any] = {"Template": text, "Given": given, "Capabilities": params.get("Capabilities") or [],
                                  "Tags": params.get("Tags") or [],
                                  "NotificationARNs": params.get("NotificationARNs") or []}
        for key in ("TimeoutInMinutes", "RoleARN", "DisableRollback"):
            if key in params:
                fields[key] = params[key]
        if change_set_id:
            fields["ChangeSetId"] = change_set_id
        state.update(StackStatus=status, Operation={"Kind": "deploy", "Fields": fields})
        state.pop("StackStatusReason", None)
        self.records.put(state)
        operation_id = self.records.begin_operation(
            state["StackId"], "CREATE_STACK" if status == "CREATE_IN_PROGRESS" else "UPDATE_STACK")
        self.records.add_event(stack_event(state, status, "User Initiated"))
        self._start_deploy(state["StackName"], fields, on_end)
        self._settle(state)
        return operation_id

    def _start_deploy(self, name: str, fields: dict[str, Any], on_end: Callable[[bool], None] | None = None) -> None:
        raw = templates.stored(fields["Template"])
        self.runner.start(name, str(uuid.uuid4()),
                          lambda deployer: deployer.deploy(raw, fields["Given"], extra=fields), on_end)

    def _settle(self, state: dict[str, Any]) -> None:
        """A client's request waits a little for its operation (Runner.settle). A nested stack's
        does not: its parent's engine follows it anyway, and a chain of nested stacks each held
        its parent's request (20 s a level when a child never settled)."""
        if not state.get("ParentId"):
            self.runner.settle(state["StackName"])

    def begin_delete(self, state: dict[str, Any], retain: list[str]) -> None:
        for lid in retain:
            if lid in state["Resources"]:
                state["Resources"][lid]["DeletionPolicy"] = "Retain"
        state.update(Operation={"Kind": "delete"})
        self.records.put(state)
        self.records.begin_operation(state["StackId"], "DELETE_STACK")
        self.quotas.forget(state["StackId"])
        self.runner.start(state["StackName"], str(uuid.uuid4()), lambda deployer: self._delete(deployer, state))
        self._settle(state)

    def _delete(self, deployer: Deployer, state: dict[str, Any]) -> None:
        # This stack's own exports (its outputs), not every stack's: deleting each stack of a long
        # chain of nested stacks read all the others.
        exported = [o["ExportName"] for o in (state.get("Outputs") or {}).values() if o.get("ExportName")]
        in_use = [(name, importer) for name in exported for importer in self.records.importers(name)
                  if importer != state["StackName"]]
        if in_use:
            name, importer = in_use[0]
            reason = f"Export {name} cannot be deleted as it is in use by {importer}"
            state.update(StackStatus="DELETE_FAILED", StackStatusReason=reason)
            self.records.put(state)
            self.records.add_event(stack_event(state, "DELETE_IN_PROGRESS", "User Initiated"))
            self.records.add_event(stack_event(state, "DELETE_FAILED", reason))
            raise DeployError(reason)
        deployer.delete()

    def _carry_on(self, state: dict[str, Any]) -> None:
        """An operation a restart interrupted, carried on."""
        kind = state["Operation"].get("Kind")
        if kind == "delete":
            self.runner.start(state["StackName"], str(uuid.uuid4()), lambda deployer: deployer.delete())
        elif kind == "deploy":
            self._start_deploy(state["StackName"], state["Operation"].get("Fields") or {
                "Template": state["Template"], "Given": state.get("Given") or {}})


def stack_event(state: dict[str, Any], status: str, reason: str = "") -> dict[str, Any]:
    event = {"StackId": state["StackId"], "StackName": state["StackName"], "LogicalResourceId": state["StackName"],
             "PhysicalResourceId": state["StackId"], "ResourceType": "AWS::CloudFormation::Stack",
             "ResourceStatus": status}
    if reason:
        event["ResourceStatusReason"] = reason
    return event


def previous_values(state: dict[str, Any]) -> dict[str, Any]:
    """What UsePreviousValue takes: each parameter's value as given, or its default (for an
    SSM-typed parameter, the parameter's name: it is read again, as on AWS)."""
    declared = templates.stored(state["Template"]).get("Parameters") or {}
    given = state.get("Given") or {}
    out = {}
    for key, value in (state.get("Parameters") or {}).items():
        spec = declared.get(key) if isinstance(declared.get(key), dict) else {}
        if key in given:
            out[key] = given[key]
        elif str(spec.get("Type", "")).startswith("AWS::SSM::Parameter::Value") and "Default" in spec:
            out[key] = spec["Default"]
        else:
            out[key] = value
    return out
