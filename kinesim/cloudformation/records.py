"""What CloudFormation keeps, as documents in the server's store: live stacks by name (the
engine's state plus the API's fields), deleted stacks by id (DescribeStacks and ListStacks show
them), each stack's events by id, change sets by id."""
from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone
from typing import Any

from kinesim.protocol.errors import AwsError
from kinesim.store import Store

STACK = "stack"  # the engine's own kind: `kinesim deploy` stacks made before this service are these
DELETED = "deleted-stack"
EVENTS = "stack-events"
CHANGE_SET = "change-set"
# A stack's events kept (AWS keeps them for the stack's life; a bound keeps a document small).
MAX_EVENTS = 2000


def now() -> float:
    return datetime.now(timezone.utc).timestamp()


def timestamp(value: Any) -> float:
    """An engine time (ISO text) or an epoch number, as epoch seconds for the XML answers."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return now()


def _nested_names(state: dict[str, Any]) -> list[str]:
    return [record["Name"] for record in (state.get("Resources") or {}).values()
            if record.get("Type") == "AWS::CloudFormation::Stack" and record.get("Name")]


def stack_missing(name: str) -> AwsError:
    # DescribeStacks, GetTemplate, DescribeStackResources...: "Stack with id X does not exist"
    # (LocalStack's recordings of AWS; the CLI, SAM and the delete waiter read this text).
    return AwsError("ValidationError", f"Stack with id {name} does not exist")


class Records:
    def __init__(self, store: Store):
        self.store = store
        self.lock = threading.RLock()  # event appends, change set writes
        # Nested stack name -> its parent's name, as the parents' records name them (kept by put()),
        # and the other way.
        self._parents: dict[str, str] = {}
        self._children: dict[str, set[str]] = {}

    # stacks

    def live(self, name: str) -> dict[str, Any] | None:
        return self.store.document(STACK, name)

    def stacks(self) -> dict[str, dict[str, Any]]:
        return self.store.documents(STACK)

    def find(self, name_or_id: str, deleted: bool = True) -> dict[str, Any] | None:
        """A stack by name (live ones only, as AWS) or by id (deleted ones too)."""
        if not name_or_id.startswith("arn:"):
            return self.live(name_or_id)
        name = name_or_id.split(":", 5)[-1].split("/")[1] if "/" in name_or_id else ""
        state = self.live(name)
        if state is not None and state.get("StackId") == name_or_id:
            return state
        return self.store.document(DELETED, name_or_id) if deleted else None

    def get(self, name_or_id: str) -> dict[str, Any]:
        state = self.find(name_or_id)
        if state is None:
            raise stack_missing(name_or_id)
        return state

    def parent_of(self, name: str) -> dict[str, Any] | None:
        """The stack whose nested stack resource is named `name` (the engine records the name
        before it creates the stack). Looked up, not searched: a search read every stack for each
        nested stack made, and a chain of them made thousands."""
        with self.lock:
            parent = self._parents.get(name)
        state = self.live(parent) if parent is not None else None
        if state is not None and name in _nested_names(state):
            return state
        # Not indexed (a stack stored before this server started, or by the admin route): searched.
        found = None
        for state in self.stacks().values():
            self._index(state["StackName"], state)
            if name in _nested_names(state):
                found = state
        return found

    def _index(self, parent: str, state: dict[str, Any] | None) -> None:
        """Index the nested stacks stack `parent` names now (`state` None: it is gone)."""
        names = set(_nested_names(state)) if state is not None else set()
        with self.lock:
            for gone in self._children.get(parent, set()) - names:
                if self._parents.get(gone) == parent:
                    del self._parents[gone]
            for nested in names:
                self._parents[nested] = parent
            if names:
                self._children[parent] = names
            else:
                self._children.pop(parent, None)

    def put(self, state: dict[str, Any]) -> None:
        self.store.put_document(STACK, state["StackName"], state)
        self._index(state["StackName"], state)

    def deleted(self) -> dict[str, dict[str, Any]]:
        return self.store.documents(DELETED)

    def bury(self, state: dict[str, Any]) -> None:
        """A deleted stack: kept by id, without its resources, for DescribeStacks by id, ListStacks
        and GetTemplate (AWS answers all three for a deleted stack's id)."""
        kept = {k: v for k, v in state.items() if k not in ("Resources", "Baseline", "Cleanup", "Operation")}
        kept.update(StackStatus="DELETE_COMPLETE", DeletionTime=now())
        self.store.put_document(DELETED, state["StackId"], kept)
        self.store.delete_document(STACK, state["StackName"])
        self._index(state["StackName"], None)
        for change_set_id in self.change_set_ids(state["StackId"]):
            self.store.delete_document(CHANGE_SET, change_set_id)

    # events

    def begin_operation(self, stack_id: str, operation_type: str) -> str:
        """A new operation on the stack (an OperationType of AWS's model): the events added from now
        on are its events (StackEvent.OperationId, DescribeEvents), until the next one begins."""
        operation_id = str(uuid.uuid4())
        with self.lock:
            doc = self.store.document(EVENTS, stack_id) or {"Events": []}
            doc["Operation"] = {"OperationId": operation_id, "OperationType": operation_type}
            self.store.put_document(EVENTS, stack_id, doc)
        return operation_id

    def add_event(self, event: dict[str, Any]) -> None:
        with self.lock:
            doc = self.store.document(EVENTS, event["StackId"]) or {"Events": []}
            # Strictly increasing at the answers' millisecond precision: the SAM CLI shows only the
            # events newer than the newest it saw before it executed a change set.
            last = doc["Events"][-1]["Timestamp"] if doc["Events"] else 0.0
            event = {"EventId": str(uuid.uuid4()), "Timestamp": max(now(), last + 0.001),
                     **(doc.get("Operation") or {}), **event}
            doc["Events"] = (doc["Events"] + [event])[-MAX_EVENTS:]
            self.store.put_document(EVENTS, event["StackId"], doc)

    def events(self, stack_id: str) -> list[dict[str, Any]]:
        """Newest first, as DescribeStackEvents lists them."""
        doc = self.store.document(EVENTS, stack_id) or {"Events": []}
        return list(reversed(doc["Events"]))

    def all_events(self) -> dict[str, list[dict[str, Any]]]:
        """Every stack's events (live and deleted stacks), by stack id, newest first."""
        return {stack_id: list(reversed(doc["Events"])) for stack_id, doc in self.store.documents(EVENTS).items()}

    # change sets

    def put_change_set(self, change_set: dict[str, Any]) -> None:
        self.store.put_document(CHANGE_SET, change_set["ChangeSetId"], change_set)

    def change_set_ids(self, stack_id: str) -> list[str]:
        return [cid for cid, cs in self.store.documents(CHANGE_SET).items() if cs.get("StackId") == stack_id]

    def find_change_set(self, change_set_id: str) -> dict[str, Any] | None:
        return self.store.document(CHANGE_SET, change_set_id)

    def change_set(self, name_or_id: str, stack: str | None) -> dict[str, Any]:
        if name_or_id.startswith("arn:"):
            found = self.store.document(CHANGE_SET, name_or_id)
            if found is not None:
                return found
            raise AwsError("ChangeSetNotFound", f"ChangeSet [{name_or_id}] does not exist", 404)
        if not stack:
            raise AwsError("ValidationError",
                           "StackName must be specified if ChangeSetName is not specified as an ARN.")
        state = self.find(stack)
        if state is None:
            raise AwsError("ValidationError", f"Stack [{stack}] does not exist")
        for change_set_id in self.change_set_ids(state["StackId"]):
            found = self.store.document(CHANGE_SET, change_set_id)
            if found is not None and found["ChangeSetName"] == name_or_id:
                return found
        raise AwsError("ChangeSetNotFound", f"ChangeSet [{name_or_id}] does not exist", 404)

    def delete_change_set(self, change_set_id: str) -> None:
        self.store.delete_document(CHANGE_SET, change_set_id)

    # exports

    def exports(self) -> dict[str, tuple[str, Any]]:
        """Every export of every live stack: name -> (exporting stack id, value)."""
        out = {}
        for state in self.stacks().values():
            for output in (state.get("Outputs") or {}).values():
                if output.get("ExportName"):
                    out[output["ExportName"]] = (state["StackId"], output["OutputValue"])
        return out

    def importers(self, export_name: str) -> list[str]:
        return sorted(name for name, state in self.stacks().items() if export_name in (state.get("Imports") or []))
