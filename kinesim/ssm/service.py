"""The Parameter Store service: parameters with their versions, labels and tags.

Each parameter is one document in the store (kind "ssm-parameter", named by its stored key, see
`names.key`): `{"Name", "Versions": [...oldest first], "Tags": {...}}`, written before an operation
answers; the service keeps them in memory too, for listings by path. Each operation is a plain
function `(service, params) -> response dict` in the module of its concern, named in the table of
`operations.py`: `parameters_api` (put, get, delete, history, labels), `listing_api`
(DescribeParameters, GetParametersByPath), `tags_api`. Operations of SSM's model that are not
Parameter Store's (documents, run command, patching, ...) are answered 501.
"""
from __future__ import annotations

import threading
from typing import Any

from kinesim.config import Settings
from kinesim.protocol.errors import AwsError
from kinesim.protocol.operations import JsonService
from kinesim.protocol.validation import ModelValidator
from kinesim.store import Store

from . import names
from .errors import parameter_not_found
from .operations import OPERATIONS

KIND = "ssm-parameter"


class SsmService(JsonService):
    operations = OPERATIONS
    target_prefix = "AmazonSSM"

    def __init__(self, settings: Settings, store: Store):
        self.settings = settings
        self.store = store
        self.validator = ModelValidator("ssm")
        self.lock = threading.RLock()  # read-modify-write of a parameter's document
        self.parameters: dict[str, dict[str, Any]] = store.documents(KIND)

    def close(self) -> None:
        """Nothing runs in the background."""

    def call(self, op: str, params: dict[str, Any], cbor: bool = False) -> dict[str, Any]:
        handler = self.operations.get(op)
        if handler is None:  # in the model, not emulated: kinesim's 501, as for Lambda's and Logs'
            raise AwsError("NotImplementedException", f"kinesim does not implement the Systems Manager operation "
                                                      f"{op}: it emulates Parameter Store (parameters, their "
                                                      f"versions, labels and tags).", 501)
        return handler(self, self.validator.parse(op, params, cbor=cbor))

    def has_operation(self, op: str) -> bool:
        return op in self.validator.operations

    # identity

    @property
    def region(self) -> str:
        return self.settings.region

    @property
    def account(self) -> str:
        return self.settings.account_id

    def arn(self, name: str) -> str:
        return names.arn(self.region, self.account, name)

    @property
    def caller(self) -> str:
        """LastModifiedUser: kinesim takes every request as the account's own."""
        return f"arn:aws:iam::{self.account}:root"

    # documents

    def parameter(self, key: str) -> dict[str, Any]:
        doc = self.parameters.get(key)
        if doc is None:
            raise parameter_not_found()
        return doc

    def save(self, key: str, doc: dict[str, Any]) -> None:
        self.store.put_document(KIND, key, doc)
        self.parameters[key] = doc

    def delete(self, key: str) -> None:
        self.store.delete_document(KIND, key)
        self.parameters.pop(key, None)

    def sorted_parameters(self) -> list[tuple[str, dict[str, Any]]]:
        with self.lock:
            return sorted(self.parameters.items())
