"""CloudFormation's HTTP front: AWS's query protocol (`Action=...&Version=2010-05-15`) on the edge."""
from __future__ import annotations

from typing import Any

from kinesim.protocol.errors import AwsError
from kinesim.protocol.query_app import QueryApp

from .changeset_api import CHANGE_SET_OPERATIONS
from .events_api import EVENTS_OPERATIONS
from .service import CloudFormationService
from .stack_api import STACK_OPERATIONS

OPERATIONS = {**STACK_OPERATIONS, **CHANGE_SET_OPERATIONS, **EVENTS_OPERATIONS}
# A 51,200-byte TemplateBody, form-encoded (up to 3 bytes a byte), with its parameters and tags.
MAX_REQUEST_BYTES = 1024 * 1024


class _Operations:
    """The service as the query front calls it."""

    def __init__(self, service: CloudFormationService):
        self.service = service

    def has_operation(self, action: str) -> bool:
        return action in OPERATIONS

    def call(self, action: str, params: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return OPERATIONS[action](self.service, params)
        except RecursionError:
            # The template's nesting is bounded where it is read and chains of conditions where they
            # are evaluated; whatever else recurses on a template the client sent is the client's
            # template too deep, not the server's error (a 500).
            raise AwsError("ValidationError", "Template format error: the template nests or chains its values "
                                              "too deeply to be processed") from None


def cloudformation_app(service: CloudFormationService) -> QueryApp:
    return QueryApp("cloudformation", _Operations(service), "cloudformation", MAX_REQUEST_BYTES,
                    "stacks, change sets, events, exports and imports are what it has "
                    "(no stack sets, drift detection, resource import, type registry or hooks)")
