"""What every JSON-protocol service shares: validated dispatch through a table of operations.

Each service names its operations in an explicit table (`<service>/operations.py`: `OPERATIONS =
{"PutRecord": records.put_record, ...}`), plain functions `(service, params) -> response dict`;
the service class derives from `JsonService` and sets `operations` to that table.
"""
from __future__ import annotations

from typing import Any, Callable

from .errors import AwsError
from .validation import ModelValidator

Handler = Callable[[Any, dict[str, Any]], Any]


class JsonService:
    """Dispatch for a service behind an `X-Amz-Target` header: `<target_prefix>.<Operation>`."""

    target_prefix: str
    operations: dict[str, Handler]
    validator: ModelValidator

    def call(self, op: str, params: dict[str, Any], cbor: bool = False) -> dict[str, Any]:
        handler = self.operations.get(op)
        if handler is None:
            raise AwsError("UnknownOperationException")
        return handler(self, self.validator.parse(op, params, cbor=cbor))

    def has_operation(self, op: str) -> bool:
        return op in self.operations
