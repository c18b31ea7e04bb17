"""The CloudWatch Logs service: log groups (metadata in the store), their streams and events (files,
shared with the Lambda runtime that writes functions' logs: kinesim.functions.logs.FunctionLogs,
passed in by the edge), retention applied on read and by a background sweep.

Each operation is a plain function `(service, params) -> response dict` in the module of its
concern, named in the table of `operations.py`: `groups_api` (groups, retention, tags), `streams_api`,
`events_api` (PutLogEvents, GetLogEvents, FilterLogEvents).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from kinesim.config import Settings
from kinesim.protocol.errors import AwsError
from kinesim.protocol.operations import JsonService
from kinesim.protocol.validation import ModelValidator
from kinesim.store import Store

from .errors import invalid_parameter
from .groups import DAY_MS, GROUP_KIND, new_group_doc, now_ms
from .operations import OPERATIONS

log = logging.getLogger("kinesim.logs")

_NAME_LIMIT = 512


class LogsService(JsonService):
    operations = OPERATIONS
    target_prefix = "Logs_20140328"

    def __init__(self, settings: Settings, store: Store, files: Any):
        self.settings = settings
        self.store = store
        self.files = files  # kinesim.functions.logs.FunctionLogs: every group's streams
        self.validator = ModelValidator("logs")
        self.lock = threading.RLock()  # group creation and deletion
        self._known: set[str] = set()  # groups whose document exists (a cache for the runtime's writes)
        files.on_new_stream = self.ensure_group
        # Groups logged to before they had documents (older data directories; functions that ran
        # between the Lambda service's start and the line above): adopted once the hook is in place.
        for group in files.group_dirs():
            self.ensure_group(group)
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="logs-retention", daemon=True)
        self._sweeper.start()

    def close(self) -> None:
        self._stop.set()
        self._sweeper.join(timeout=10)
        self.files.on_new_stream = None

    def call(self, op: str, params: dict[str, Any], cbor: bool = False) -> dict[str, Any]:
        if isinstance(params, dict):
            for member in ("logGroupName", "logStreamName"):
                value = params.get(member)
                # AWS answers an over-long name with its own sentence, not the model's constraint
                # (LocalStack's recording, test_create_log_group_invalid_name_length).
                if isinstance(value, str) and len(value) > _NAME_LIMIT:
                    raise invalid_parameter("Invalid LogGroup or LogStream, both must have length "
                                            "less than or equal to 512.")
        handler = self.operations.get(op)
        if handler is None:  # in the model, not emulated: kinesim's 501, as for Lambda's
            raise AwsError("NotImplementedException", f"kinesim does not implement the CloudWatch Logs "
                                                      f"operation {op}.", 501)
        try:
            params = self.validator.parse(op, params, cbor=cbor)
        except AwsError as err:
            # The Logs API's older operations answer constraint violations as
            # InvalidParameterException with Coral's usual text (LocalStack's recordings:
            # "1 validation error detected: Value '10001' at 'limit' ...").
            if err.code == "ValidationException":
                raise AwsError("InvalidParameterException", err.message, err.status) from None
            raise
        return handler(self, params)

    def has_operation(self, op: str) -> bool:
        return op in self.validator.operations

    # identity

    def group_arn(self, name: str) -> str:
        return f"arn:aws:logs:{self.settings.region}:{self.settings.account_id}:log-group:{name}"

    def group_from_identifier(self, identifier: str) -> str:
        """A log group's name from a name or an ARN (`...:log-group:NAME`, with or without `:*`)."""
        if identifier.startswith("arn:"):
            parts = identifier.split(":", 6)
            if len(parts) < 7 or not parts[5] == "log-group":
                raise invalid_parameter(f"Invalid log group ARN: {identifier}")
            name = parts[6]
            return name[:-2] if name.endswith(":*") else name
        return identifier

    def group_param(self, p: dict[str, Any]) -> str:
        """The group an operation names, by `logGroupName` or `logGroupIdentifier` (one of them)."""
        name, identifier = p.get("logGroupName"), p.get("logGroupIdentifier")
        if name is not None and identifier is not None:
            # LocalStack's recording: test_describe_log_streams_with_log_group_identifier.
            raise AwsError("ValidationException", "LogGroup name and LogGroup ARN are mutually exclusive parameters.")
        if name is None and identifier is None:
            raise invalid_parameter("Should provide either name or ARN of LogGroup")
        return name if name is not None else self.group_from_identifier(identifier)

    # groups

    def group(self, name: str) -> dict[str, Any]:
        doc = self.store.document(GROUP_KIND, name)
        if doc is None:
            raise AwsError("ResourceNotFoundException", "The specified log group does not exist.")
        return doc

    def groups(self) -> dict[str, dict[str, Any]]:
        return self.store.documents(GROUP_KIND)

    def save_group(self, name: str, doc: dict[str, Any]) -> None:
        self.store.put_document(GROUP_KIND, name, doc)
        self._known.add(name)

    def ensure_group(self, name: str) -> None:
        """The group exists (made now if not): what AWS does when a function first logs."""
        if name in self._known:
            return
        with self.lock:
            if self.store.document(GROUP_KIND, name) is None:
                self.save_group(name, new_group_doc())
            self._known.add(name)

    def refuse_if_protected(self, name: str) -> None:
        """Deletion protection "blocks all deletion operations until it is explicitly disabled"
        (the API reference); DeleteLogGroup's answer is a ValidationException."""
        if self.group(name).get("deletionProtectionEnabled"):
            raise AwsError("ValidationException", f"Log group {name} has deletion protection enabled. Disable it "
                                                  "with PutLogGroupDeletionProtection before deleting.")

    def delete_group(self, name: str) -> None:
        with self.lock:
            self.group(name)
            self.store.delete_document(GROUP_KIND, name)
            self._known.discard(name)
            self.files.delete_group(name)

    def retention_cutoff(self, doc: dict[str, Any], now: int | None = None) -> int:
        """Events with a timestamp before this have expired (0: kept forever)."""
        days = doc.get("retentionInDays")
        return ((now or now_ms()) - days * DAY_MS) if days else 0

    def expire(self, name: str, doc: dict[str, Any]) -> int:
        cutoff = self.retention_cutoff(doc)
        return self.files.expire(name, cutoff) if cutoff else 0

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self.settings.retention_sweep_s):
            for name, doc in self.groups().items():
                try:
                    self.expire(name, doc)
                except Exception:
                    log.exception("retention sweep of log group %s failed", name)
