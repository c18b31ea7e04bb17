"""CloudFormation's quotas on the account's stacks ("Understand CloudFormation quotas", AWS
CloudFormation User Guide), which are also what ends a nested stack that creates itself, or two that
create each other: AWS documents no limit on how deep stacks nest, so such a chain grows until one
of these is reached, its last AWS::CloudFormation::Stack fails with the quota's message, and every
stack of the chain rolls back.

- Stacks: 2,000 per account and Region by default (`Settings.stack_limit`). CreateStack, and
  CreateChangeSet for a new stack, past it: LimitExceededException "Limit for stack has been
  exceeded" (as aws-amplify/amplify-cli#2467 and #5221 quote the answer, and #7321 the status
  reason of a nested stack resource that met it).
- Nested stacks: "Maximum number of CloudFormation resources a nested stack can create, update, or
  delete per operation: 2,500 resources". Counted here per operation of a root stack: the resources
  of the root's (processed) template, plus those of each nested stack created in that operation,
  before the nested stack is (so nothing of it is made). Past it the nested stack's creation is
  refused with "Limit on the number of resources in a single stack operation exceeded" (the status
  reason aws-amplify/amplify-cli#13491 quotes). Updates of nested stacks are not counted: AWS counts
  the resources an update changes, which is known only as it goes. The count is the server's, in
  memory: after a restart a carried-on operation counts from its next nested stack.
"""
from __future__ import annotations

import threading
from typing import Any

from kinesim.protocol.errors import AwsError

from .records import STACK, Records

MAX_OPERATION_RESOURCES = 2500
STACK_LIMIT = "Limit for stack has been exceeded"
OPERATION_LIMIT = "Limit on the number of resources in a single stack operation exceeded"


def _limit_exceeded(message: str) -> AwsError:
    return AwsError("LimitExceededException", message)


class AccountQuotas:
    def __init__(self, records: Records, stack_limit: int):
        self.records = records
        self.stack_limit = stack_limit
        self._lock = threading.Lock()
        self._operations: dict[str, int] = {}  # root stack id -> resources its operation has planned

    def check_new_stack(self) -> None:
        """A stack is about to be made (a CREATE change set's stack in review is one already)."""
        if self.records.store.document_count(STACK) >= self.stack_limit:
            raise _limit_exceeded(STACK_LIMIT)

    def operation_begins(self, state: dict[str, Any], creating: bool, processed: dict[str, Any] | None) -> None:
        """Count an operation's planned resources: a root stack's operation starts its own count; a
        nested stack's creation adds to its root's, refused past MAX_OPERATION_RESOURCES."""
        resources = (processed or {}).get("Resources")
        planned = len(resources) if isinstance(resources, dict) else 0
        with self._lock:
            if not state.get("ParentId"):
                self._operations[state["StackId"]] = planned
                return
            if not creating:
                return
            root = state.get("RootId") or state["ParentId"]
            total = self._operations.get(root, 0) + planned
            if total > MAX_OPERATION_RESOURCES:
                raise _limit_exceeded(OPERATION_LIMIT)
            self._operations[root] = total

    def forget(self, stack_id: str) -> None:
        """A root stack deleted: its count goes."""
        with self._lock:
            self._operations.pop(stack_id, None)
