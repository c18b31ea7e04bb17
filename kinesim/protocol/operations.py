"""What every JSON-protocol service shares: operations registered by name, validated dispatch.

A service module declares `OPERATIONS = Operations()` and registers each operation, a plain
function `(service, params) -> response dict`, with `@OPERATIONS.register("PutRecord")` (aliased
`operation`); the service class derives from `JsonService` and names its registry.
"""
from __future__ import annotations

from typing import Any, Callable

from .errors import AwsError
from .validation import ModelValidator

Handler = Callable[[Any, dict[str, Any]], dict[str, Any]]


class Operations(dict[str, Handler]):
    def register(self, name: str) -> Callable[[Handler], Handler]:
        def add(fn: Handler) -> Handler:
            self[name] = fn
            return fn
        return add


class JsonService:
    """Dispatch for a service behind an `X-Amz-Target` header: `<target_prefix>.<Operation>`."""

    target_prefix: str
    operations: Operations
    validator: ModelValidator

    def call(self, op: str, params: dict[str, Any], cbor: bool = False) -> dict[str, Any]:
        handler = self.operations.get(op)
        if handler is None:
            raise AwsError("UnknownOperationException")
        return handler(self, self.validator.parse(op, params, cbor=cbor))

    def has_operation(self, op: str) -> bool:
        return op in self.operations
