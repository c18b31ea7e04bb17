"""The Lambda service: function and mapping lookup, persistence.

Each operation is a plain function `(service, params, context) -> response dict` living in the
module of its concern, named in the table of `operations.py` (`functions_api`: functions and
invocations, `mappings_api`: event source mappings, `versions_api`: versions and aliases,
`layers_api`: layers, `permissions_api`: resource policies, `recursion_config_api`: recursive
loop detection, whose counting is recursion.py's, `concurrency_api`: reserved concurrency, whose
gate is concurrency.py's; both applied in `invoke_qualified`). Params arrive
validated against botocore's `lambda` model; responses are dicts shaped like the model's output (the
REST layer drops any key the model does not know, so stored documents can carry internal keys such
as `CodeDir`).

Functions are documents of kind "function" (the FunctionConfiguration plus internal keys; their
published versions, aliases and layers are kept by `versions` and `layers`), event source
mappings documents of kind "mapping"; all survive restarts, and on start every mapping is
handed to the MappingManager again so its pollers resume from their checkpoints.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext, RestJsonProtocol
from ..protocol.validation import ModelValidator
from ..store import Store
from .async_destinations import RecordSender
from .async_invoke import AsyncInvoker
from . import event_invoke_config_api, layers_api, recursion, set_up, versions_api
from .code import CodeStore
from .concurrency import ConcurrencyGate
from .concurrency_api import reserved_concurrency
from .errors import invalid_parameter, malformed_body, resource_not_found
from .operations import OPERATIONS
from .recursion_config_api import recursive_loop
from .runtime import Invocation

if TYPE_CHECKING:
    from ..destinations import Destinations
    from ..kinesis.service import KinesisService
    from ..s3.objects import ObjectStore
    from .invocation_stats import InvocationStats
    from .sqs_poller import QueueSource

log = logging.getLogger("kinesim.functions")

# Request size limits, as AWS words them. A 50 MB package is 69905067 bytes of base64.
MAX_CREATE_REQUEST_BYTES = 69_905_067
MAX_INVOKE_REQUEST_BYTES = 6_291_456
MAX_OTHER_REQUEST_BYTES = 6_291_456

# A function reference: name, partial ARN ("123456789012:function:name") or ARN, each optionally
# with ":qualifier" (the model's FunctionName pattern, with groups).
_FUNCTION_REF = re.compile(
    r"(?:arn:(?:aws[a-zA-Z-]*)?:lambda:)?"
    r"(?:(?P<region>(?:eusc-)?[a-z]{2}(?:(?:-gov)|(?:-iso(?:[a-z]?)))?-[a-z]+-\d):)?"
    r"(?:(?P<account>\d{12}):)?(?:function:)?(?P<name>[a-zA-Z0-9-_.]+)"
    r"(?::(?P<qualifier>\$LATEST(?:\.PUBLISHED)?|[a-zA-Z0-9-_]+))?")


@dataclasses.dataclass
class VersionedInvocation(Invocation):
    """An invocation's result with the version that ran (Invoke's X-Amz-Executed-Version, the
    `executedVersion` of a mapping's invocation records)."""
    executed_version: str = "$LATEST"


class LambdaService:
    def __init__(self, settings: Settings, store: Store, kinesis: "KinesisService",
                 objects: "ObjectStore | None" = None, destinations: "Destinations | None" = None,
                 queues: "QueueSource | None" = None, files_dir: str | None = None):
        from .logs import FunctionLogs
        from .pollers import MappingManager
        from .runtime import FunctionRuntime

        self.settings = settings
        self.store = store
        self.kinesis = kinesis
        # Buckets that deployment packages (Code.S3Bucket/S3Key) come from and that S3 on-failure
        # destinations of event source mappings write to.
        self.objects = objects
        self.protocol = RestJsonProtocol("lambda", malformed_body=malformed_body)
        self.validator = ModelValidator("lambda")
        self.lock = threading.RLock()  # function and mapping creation, update, deletion
        # --in-memory: code and logs in a throwaway directory, like the database, unless the caller
        # gives one it keeps across services (`files_dir`: the server's, which a reset keeps).
        self._tmp = tempfile.mkdtemp(prefix="kinesim-functions-") if settings.in_memory and not files_dir else None
        base = files_dir or self._tmp or settings.data_dir
        self.code = CodeStore(os.path.join(base, "functions"))
        self.logs = FunctionLogs(os.path.join(base, "logs"))
        self.runtime = FunctionRuntime(self.logs, self.endpoint_url, settings.region, settings.account_id)
        # executions in flight against reserved concurrency; refusals counted as AWS's Throttles metric
        self.concurrency = ConcurrencyGate(on_throttle=self.runtime.stats.throttled)
        self.layers = layers_api.Layers(store, CodeStore(os.path.join(base, "layers")), self.layer_arn)
        self.versions = versions_api.Versions(self, store, self.code)
        self.functions: dict[str, dict[str, Any]] = self._load_functions()
        self.versions.forget_orphans(set(self.functions))
        for version in self.versions.all_configurations():
            version["LayerDirs"] = self.layers.dirs(version.get("LayerPackages"))
        self.layers.prune(self.layer_packages_in_use())
        set_up.resume(self)  # Node.js functions left Pending by a stopped server
        self.mappings: dict[str, dict[str, Any]] = store.documents("mapping")
        # Asynchronous invocations: kept in the store until done, configured per qualifier
        # (event_invoke_config_api), their records sent to destinations; started by the edge once
        # every destination service is registered.
        self.event_invoke_configs = event_invoke_config_api.EventInvokeConfigs(
            self, store, RecordSender(destinations, objects))
        self.async_invoker = AsyncInvoker(self._invoke_event, store, self.event_invoke_configs.settings_for,
                                          self.event_invoke_configs.sender, start=False)
        # `destinations`: where SQS and SNS OnFailure destinations of mappings are delivered;
        # `queues`: the SQS service's consumers, which SQS mappings read.
        self.manager = MappingManager(kinesis, store, self.invoke_function, settings, objects,
                                      role_of=lambda name: (self.functions.get(name) or {}).get("Role"),
                                      destinations=destinations, queues=queues)
        for mapping in sorted(self.mappings.values(), key=lambda m: m.get("CreatedAt", 0)):
            try:
                self.manager.sync(mapping)
            except Exception:
                log.exception("could not resume event source mapping %s", mapping.get("UUID"))

    def close(self) -> None:
        self.manager.close()
        self.async_invoker.close()
        self.runtime.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # dispatch (the REST layer's interface)

    def call(self, op: str, params: dict[str, Any], context: RequestContext) -> dict[str, Any]:
        handler = OPERATIONS.get(op)
        if handler is None:
            raise AwsError("NotImplementedException", f"kinesim does not implement the Lambda operation {op}.", 501)
        return handler(self, self.validator.parse(op, params), context)

    def has_operation(self, op: str) -> bool:
        return op in OPERATIONS

    def max_request_bytes(self, op: str) -> tuple[int, AwsError]:
        if op in ("CreateFunction", "UpdateFunctionCode"):
            return MAX_CREATE_REQUEST_BYTES, AwsError(
                "RequestEntityTooLargeException",
                f"Request must be smaller than {MAX_CREATE_REQUEST_BYTES} bytes for the {op} operation", 413)
        if op == "Invoke":
            return MAX_INVOKE_REQUEST_BYTES, AwsError(
                "RequestTooLargeException",
                f"Request must be smaller than {MAX_INVOKE_REQUEST_BYTES} bytes for the InvokeFunction operation", 413)
        return MAX_OTHER_REQUEST_BYTES, AwsError(
            "RequestEntityTooLargeException",
            f"Request must be smaller than {MAX_OTHER_REQUEST_BYTES} bytes for the {op} operation", 413)

    # identity

    @property
    def endpoint_url(self) -> str:
        """This server's URL as functions should call it (AWS_ENDPOINT_URL in their environment)."""
        return self.settings.local_url

    def function_arn(self, name: str, qualifier: str | None = None) -> str:
        arn = f"arn:aws:lambda:{self.settings.region}:{self.settings.account_id}:function:{name}"
        return f"{arn}:{qualifier}" if qualifier else arn

    def layer_arn(self, name: str, version: int | None = None) -> str:
        arn = f"arn:aws:lambda:{self.settings.region}:{self.settings.account_id}:layer:{name}"
        return f"{arn}:{version}" if version is not None else arn

    def mapping_arn(self, uuid: str) -> str:
        return f"arn:aws:lambda:{self.settings.region}:{self.settings.account_id}:event-source-mapping:{uuid}"

    def parse_function_ref(self, ref: str, qualifier: str | None = None) -> tuple[str, str | None]:
        """(name, qualifier) of a function reference; ResourceNotFoundException for another
        region's or account's function (it cannot exist here)."""
        m = _FUNCTION_REF.fullmatch(ref)
        if m is None:
            raise resource_not_found(f"Function not found: {self.function_arn(ref)}")
        name, derived = m.group("name"), m.group("qualifier")
        if derived is not None and qualifier is not None and derived != qualifier:
            raise invalid_parameter("The derived qualifier from the function name does not match the specified qualifier.")
        qualifier = qualifier or derived
        region, account = m.group("region"), m.group("account")
        if (region and region != self.settings.region) or (account and account != self.settings.account_id):
            arn = (f"arn:aws:lambda:{region or self.settings.region}:{account or self.settings.account_id}"
                   f":function:{name}")
            raise resource_not_found(f"Function not found: {arn}:{qualifier}" if qualifier else f"Function not found: {arn}")
        return name, qualifier

    def resource_policy(self, ref: str, qualifier: str | None = None) -> str | None:
        """The policy of the function a reference names (None: none, or no such function)."""
        from .permissions_api import policy_document
        return policy_document(self, ref, qualifier)

    # functions

    def function(self, ref: str, qualifier: str | None = None, *, route: bool = False) -> dict[str, Any]:
        """The configuration a reference names: $LATEST's stored document, a published version's,
        or the version an alias points at (with `route`, the one its routing configuration picks
        for this invocation). What the runtime is handed: it has `Version`, `CodeDir`, `LayerDirs`."""
        name, qualifier = self.parse_function_ref(ref, qualifier)
        doc = self.functions.get(name)
        if doc is not None and qualifier not in (None, "$LATEST"):
            doc = self.versions.resolve(doc, qualifier, route)
        if doc is None:
            raise resource_not_found(f"Function not found: {self.function_arn(name, qualifier)}")
        return doc

    def has_function(self, name: str, qualifier: str | None = None) -> bool:
        """Whether a function (and its version or alias, when qualified) exists."""
        try:
            self.function(name, qualifier)
        except AwsError:
            return False
        return True

    def save_function(self, doc: dict[str, Any]) -> None:
        """Store a function's new document (a fresh dict: readers hold the old one safely)."""
        with self.lock:
            self.store.put_document("function", doc["FunctionName"], doc)
            self.functions[doc["FunctionName"]] = doc

    def drop_function(self, name: str) -> None:
        with self.lock:
            self.functions.pop(name, None)
            self.store.delete_document("function", name)

    def _load_functions(self) -> dict[str, dict[str, Any]]:
        functions = {}
        for name, doc in self.store.documents("function").items():
            code_dir = self.code.restore(name, doc)
            if code_dir is None:
                log.warning("the code of function %s is missing from %s", name, self.code.root)
            doc["CodeDir"] = code_dir
            doc["LayerDirs"] = self.layers.dirs(doc.get("LayerPackages"))
            functions[name] = doc
            if not doc.get("HotReload"):
                self.code.prune(name, {doc.get("PackageId", "")} | self.versions.package_ids(name))
        for name in self.code.function_names():  # code left by functions deleted mid-way
            if name not in functions:
                self.code.remove(name)
        return functions

    # invocation

    def invoke_function(self, name_or_arn: str, payload: bytes, trace_header: str | None = None) -> "Invocation":
        """Run a function synchronously (the MappingManager's way in); a qualified reference runs
        that version, or the one its alias routes to (`executed_version` of the answer).
        `trace_header`: the X-Ray trace header of the event (an SQS message's AWSTraceHeader)."""
        return self.invoke_qualified(name_or_arn, payload, trace_header=trace_header)

    def _invoke_event(self, name: str, payload: bytes, request_id: str, trace_header: str | None) -> "Invocation":
        return self.invoke_qualified(name, payload, request_id, trace_header=trace_header)

    def invoke_qualified(self, ref: str, payload: bytes, request_id: str | None = None,
                         qualifier: str | None = None, trace_header: str | None = None, **extra: Any) -> "Invocation":
        """Invoke the configuration a reference names. The handler sees the ARN the caller used
        (an alias's, not the version's), as on AWS. `trace_header`: the X-Ray trace header of the
        request or event that caused the invocation, which places it in its chain of requests;
        RecursiveInvocationException when recursive loop detection stops it, TooManyRequestsException
        when the function's reserved concurrency is in use (concurrency.py)."""
        name, qualifier = self.parse_function_ref(ref, qualifier)
        fn = self.function(name, qualifier, route=True)
        link = self._chain_link(name, trace_header)
        with self.concurrency.execution(name, reserved_concurrency(self.functions.get(name) or {})):
            result = self.runtime.invoke(fn, payload, request_id, trace_id=link.header,
                                         invoked_function_arn=self.function_arn(name, qualifier), **extra)
        return VersionedInvocation(**{f.name: getattr(result, f.name) for f in dataclasses.fields(Invocation)},
                                   executed_version=fn.get("Version", "$LATEST"))

    def _chain_link(self, name: str, trace_header: str | None) -> recursion.Link:
        """The invocation's place in the chain its event started (recursion.py). Past the limit,
        a function left at `Terminate` is not invoked: AWS counts the drop in its
        RecursiveInvocationsDropped metric and notifies the account; kinesim logs it."""
        arn = self.function_arn(name)
        link = recursion.next_link(trace_header, arn)
        if link.past_limit and recursive_loop(self.functions.get(name) or {}) == recursion.TERMINATE:
            log.warning("recursive loop detection stopped an invocation of %s (RecursiveInvocationsDropped): it "
                        "was invoked %d times in one chain of requests; PutFunctionRecursionConfig with "
                        "RecursiveLoop Allow lets such a loop run", arn, link.count)
            raise recursion.recursive_invocation()
        return link

    # figures for the web console (read-only)

    @property
    def invocation_stats(self) -> "InvocationStats":
        """Every function's invocations, errors, throttles and durations of the last minutes."""
        return self.runtime.stats

    def warm_workers(self, name: str) -> dict[str, int]:
        """The function's execution environments now: idle, busy, starting, and the most it gets
        (its reserved concurrency, when that is fewer than the runtime's limit)."""
        reserved = reserved_concurrency(self.functions.get(name) or {})
        most = self.runtime.max_workers if reserved is None else min(reserved, self.runtime.max_workers)
        return {**self.runtime.workers(name), "max": most}

    def mapping_timeline(self, uuid: str) -> list[dict[str, Any]]:
        """What became of the mapping's last batches, oldest first (batch_timeline.py)."""
        timeline = self.manager.timelines.get(uuid)
        return timeline.entries() if timeline is not None else []

    def mapping_lag(self, uuid: str) -> dict[str, int] | None:
        """Records a running Kinesis mapping has still to handle (None: SQS, or not running)."""
        return self.manager.lag(uuid)

    def layer_packages_in_use(self) -> set[tuple[str, str]]:
        """(layer name, package id) of every layer a function or version uses: kept even once the
        layer version is deleted, as AWS keeps it for the functions that use it."""
        configurations = list(self.functions.values()) + self.versions.all_configurations()
        return {(name, package) for c in configurations for name, package in c.get("LayerPackages") or ()}

    # mappings

    def mapping(self, uuid: str) -> dict[str, Any]:
        doc = self.mappings.get(uuid)
        if doc is None:
            raise resource_not_found("The resource you requested does not exist.")
        return doc

    def save_mapping(self, doc: dict[str, Any]) -> None:
        with self.lock:
            self.store.put_document("mapping", doc["UUID"], doc)
            self.mappings[doc["UUID"]] = doc

    def drop_mapping(self, uuid: str) -> None:
        with self.lock:
            self.mappings.pop(uuid, None)
            self.store.delete_document("mapping", uuid)

    def live_mapping(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A mapping as Get/List show it: the stored configuration with the pollers' live state."""
        try:
            status = self.manager.status(doc["UUID"]) or {}
        except Exception:
            log.exception("status of event source mapping %s", doc["UUID"])
            status = {}
        return {**doc, **{k: v for k, v in status.items() if v is not None}}
