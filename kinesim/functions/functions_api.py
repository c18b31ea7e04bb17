"""Function operations: CreateFunction, GetFunction(Configuration), ListFunctions,
UpdateFunctionCode, UpdateFunctionConfiguration, DeleteFunction, Invoke, tags, account settings.

kinesim runs `.zip` packages on `python3.*` runtimes (every one the model lists), in worker
processes (`runtime`). Functions are Active as soon as they are created or updated: there is
nothing to provision, except for a Node.js function whose code imports a package of the AWS SDK
for JavaScript v3 that is not installed yet: it is Pending (created) or its LastUpdateStatus
InProgress (updated) while kinesim installs it (js_sdk_fetch.py), as AWS's states cover its own
set-up; an Invoke meanwhile waits for it instead of being refused. `Publish` publishes a version
(versions_api); a qualifier (a version or an alias) selects what GetFunction shows, Invoke runs
and DeleteFunction deletes. `Layers` must name existing layer versions (layers_api).
"""
from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol import trace_header
from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext
from . import runtimes, set_up
from .code import HOT_RELOAD_BUCKET, StoredCode
from .concurrency_api import ACCOUNT_CONCURRENCY, reserved_concurrency, unreserved_concurrency
from .errors import conflict, invalid_parameter, lambda_date, resource_not_found

if TYPE_CHECKING:
    from .service import LambdaService

DEFAULT_TIMEOUT_S = 3
DEFAULT_MEMORY_MB = 128
DEFAULT_EPHEMERAL_MB = 512
MAX_ASYNC_PAYLOAD_BYTES = 1_048_576   # "Event" invocations (256 KB until late 2025)
MAX_ENVIRONMENT_BYTES = 4096
LOG_TAIL_BYTES = 4096
MAX_LIST_ITEMS = 50                   # ListFunctions' default page
MAX_S3_PACKAGE_BYTES = 262_144_000    # a package from S3 is bound by the unzipped limit only

# Environment variables Lambda sets itself and refuses to take from the configuration.
RESERVED_ENVIRONMENT_KEYS = frozenset((
    "_HANDLER", "_X_AMZN_TRACE_ID", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_LAMBDA_FUNCTION_VERSION",
    "AWS_LAMBDA_INITIALIZATION_TYPE", "AWS_LAMBDA_LOG_GROUP_NAME", "AWS_LAMBDA_LOG_STREAM_NAME",
    "AWS_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_LAMBDA_RUNTIME_API", "LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR",
))

# Fields GetFunction shows and ListFunctions leaves out (AWS: "use GetFunction" for these).
GET_ONLY_FIELDS = ("State", "StateReason", "StateReasonCode", "LastUpdateStatus", "LastUpdateStatusReason",
                   "LastUpdateStatusReasonCode", "RuntimeVersionConfig")

# Account quotas AWS reports by default.
ACCOUNT_LIMIT = {"TotalCodeSize": 80_530_636_800, "CodeSizeUnzipped": 262_144_000, "CodeSizeZipped": 52_428_800,
                 "ConcurrentExecutions": ACCOUNT_CONCURRENCY}


# checks

def check_runtime(runtime: str) -> None:
    reason = runtimes.check(runtime)  # python3.*, and nodejsNN.x where a Node.js NN is installed
    if reason is not None:
        raise invalid_parameter(reason)


def check_environment(environment: dict[str, Any] | None) -> None:
    variables = (environment or {}).get("Variables") or {}
    reserved = [k for k in variables if k in RESERVED_ENVIRONMENT_KEYS]
    if reserved:
        raise invalid_parameter(
            "Lambda was unable to configure your environment variables because the environment variables you have "
            "provided contains reserved keys that are currently not supported for modification. Reserved keys used "
            f"in this request: {', '.join(reserved)}")
    measured = orjson.dumps(variables).decode()
    if len(measured.encode()) > MAX_ENVIRONMENT_BYTES:
        raise invalid_parameter(
            "Lambda was unable to configure your environment variables because the environment variables you have "
            f"provided exceeded the 4KB limit. String measured: {measured}")
    # A process's environment cannot hold a NUL: accepted, it made every invocation a 500.
    if any("\x00" in str(value) for value in variables.values()):
        raise invalid_parameter(
            "Lambda was unable to configure your environment variables because the environment variables you have "
            "provided contain a null character, which an environment variable cannot hold.")


def check_handler(handler: str) -> None:
    # The model's pattern ([^\s]+) lets a NUL through; the handler reaches the runtime in its
    # environment (_HANDLER), which cannot hold one.
    if "\x00" in handler:
        raise invalid_parameter("The handler contains a null character, which Lambda cannot pass to the runtime.")


def check_package_type(package_type: str | None, image_uri: str | None) -> None:
    if package_type == "Image" or image_uri:
        raise invalid_parameter(
            "kinesim runs .zip packages on Python and Node.js runtimes only: container images (PackageType "
            "Image, Code.ImageUri) are not supported.")


def check_revision(fn: dict[str, Any], revision_id: str | None) -> None:
    if revision_id is not None and revision_id != fn["RevisionId"]:
        raise AwsError("PreconditionFailedException",
                       "The Revision Id provided does not match the latest Revision Id. Call the GetFunction/GetAlias "
                       "API to retrieve the latest Revision Id", 412)


def fetch_code(svc: LambdaService, name: str, source: dict[str, Any], dry_run: bool = False) -> StoredCode:
    """Unpack a package given as `ZipFile`, or take a hot-reload directory."""
    if source.get("ZipFile") is not None:
        if dry_run:
            return svc.code.check_zip(source["ZipFile"])
        return svc.code.store_zip(name, source["ZipFile"])
    bucket, key = source.get("S3Bucket"), source.get("S3Key")
    if bucket == HOT_RELOAD_BUCKET and key:
        return svc.code.hot_reload(key)
    if bucket and key:
        package = s3_package(svc, bucket, key)
        return svc.code.check_zip(package) if dry_run else svc.code.store_zip(name, package)
    raise invalid_parameter("Please provide a source for function code.")


def s3_package(svc: LambdaService, bucket: str, key: str) -> bytes:
    """A deployment package from kinesim's S3 buckets, with AWS's wording when it is not there."""
    if svc.objects is None:
        raise invalid_parameter("Error occurred while GetObject. S3 Error Code: NoSuchBucket. S3 Error Message: "
                                "The specified bucket does not exist")
    try:
        f, meta = svc.objects.open_object(bucket, key)
    except AwsError as err:
        raise invalid_parameter(f"Error occurred while GetObject. S3 Error Code: {err.code}. S3 Error Message: "
                                f"{err.message}") from None
    with f:
        if meta.size >= MAX_S3_PACKAGE_BYTES:
            raise invalid_parameter(f"Unzipped size must be smaller than {MAX_S3_PACKAGE_BYTES} bytes")
        return f.read()


# views

def configuration(svc: LambdaService, fn: dict[str, Any], qualifier: str | None = None) -> dict[str, Any]:
    """The FunctionConfiguration of a stored function (the REST layer drops internal keys)."""
    if qualifier:
        return {**fn, "FunctionArn": svc.function_arn(fn["FunctionName"], qualifier)}
    return fn


def code_location(svc: LambdaService, fn: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    if fn.get("HotReload"):
        return {"RepositoryType": "S3"}
    host = context.host or svc.endpoint_url.split("//", 1)[1]
    # AWS hands out a pre-signed S3 URL; ours serves the package as uploaded from this server (the
    # function's account and region say which function of that name).
    where = f"account={svc.settings.account_id}&region={svc.settings.region}"
    return {"RepositoryType": "S3",
            "Location": f"http://{host}/_kinesim/functions/{fn['FunctionName']}/code.zip?{where}"}


def _apply_settings(cfg: dict[str, Any], p: dict[str, Any]) -> None:
    """Settings CreateFunction and UpdateFunctionConfiguration share, applied when given."""
    for key in ("Role", "Handler", "Description", "Timeout", "MemorySize", "Runtime", "KMSKeyArn",
                "DeadLetterConfig", "FileSystemConfigs"):
        if key in p:
            cfg[key] = p[key]
    if "Environment" in p:
        variables = p["Environment"].get("Variables") or {}
        if variables:
            cfg["Environment"] = {"Variables": variables}
        else:
            cfg.pop("Environment", None)
    if "TracingConfig" in p:
        cfg["TracingConfig"] = {"Mode": p["TracingConfig"].get("Mode", "PassThrough")}
    if "EphemeralStorage" in p:
        cfg["EphemeralStorage"] = {"Size": p["EphemeralStorage"]["Size"]}
    if "SnapStart" in p:
        cfg["SnapStart"] = {"ApplyOn": p["SnapStart"].get("ApplyOn", "None"), "OptimizationStatus": "Off"}
    if "VpcConfig" in p:
        vpc = p["VpcConfig"]
        cfg["VpcConfig"] = {"SubnetIds": vpc.get("SubnetIds", []), "SecurityGroupIds": vpc.get("SecurityGroupIds", []),
                            "VpcId": "", "Ipv6AllowedForDualStack": vpc.get("Ipv6AllowedForDualStack", False)}
    if "LoggingConfig" in p:
        logging_config = {**cfg.get("LoggingConfig", {}), **p["LoggingConfig"]}
        if logging_config.get("LogFormat") == "JSON":
            logging_config.setdefault("ApplicationLogLevel", "INFO")
            logging_config.setdefault("SystemLogLevel", "INFO")
        cfg["LoggingConfig"] = logging_config


def _new_revision(cfg: dict[str, Any]) -> None:
    cfg["RevisionId"] = str(uuid.uuid4())
    cfg["LastModified"] = lambda_date()
    cfg["State"] = "Active"
    cfg["LastUpdateStatus"] = "Successful"
    for key in set_up.REASONS:
        cfg.pop(key, None)


# operations

def create_function(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, _ = svc.parse_function_ref(p["FunctionName"])
    source = p["Code"]
    check_package_type(p.get("PackageType"), source.get("ImageUri"))
    runtime, handler = p.get("Runtime"), p.get("Handler")
    if runtime is None or handler is None:
        raise invalid_parameter("Runtime and Handler are mandatory parameters for functions created with deployment "
                                "packages.")
    check_runtime(runtime)
    check_handler(handler)
    check_environment(p.get("Environment"))
    layers = svc.layers.resolve(p.get("Layers"), svc.settings.region, svc.settings.account_id)
    if name in svc.functions:
        raise conflict(f"Function already exist: {name}")
    code = fetch_code(svc, name, source)
    cfg: dict[str, Any] = {
        "FunctionName": name,
        "FunctionArn": svc.function_arn(name),
        "Runtime": runtime,
        "Role": p["Role"],
        "Handler": handler,
        "CodeSize": code.size,
        "Description": "",
        "Timeout": DEFAULT_TIMEOUT_S,
        "MemorySize": DEFAULT_MEMORY_MB,
        "CodeSha256": code.sha256,
        "Version": "$LATEST",
        "TracingConfig": {"Mode": "PassThrough"},
        "PackageType": "Zip",
        "Architectures": p.get("Architectures") or ["x86_64"],
        "EphemeralStorage": {"Size": DEFAULT_EPHEMERAL_MB},
        "SnapStart": {"ApplyOn": "None", "OptimizationStatus": "Off"},
        "LoggingConfig": {"LogFormat": "Text", "LogGroup": f"/aws/lambda/{name}"},
        "Tags": p.get("Tags") or {},
        **code.internal_keys(),
    }
    _apply_settings(cfg, p)
    svc.layers.apply(cfg, layers)
    _new_revision(cfg)
    missing = set_up.begin(cfg)
    with svc.lock:
        if name in svc.functions:  # created by a concurrent request meanwhile
            raise conflict(f"Function already exist: {name}")
        svc.save_function(cfg)
    if missing:
        set_up.start(svc, cfg, missing)
    if p.get("Publish"):
        # AWS answers with $LATEST's configuration and the published version's number.
        return {**configuration(svc, cfg), "Version": svc.versions.publish(name)["Version"]}
    return configuration(svc, cfg)


def get_function(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    fn = svc.function(name, qualifier)
    out: dict[str, Any] = {"Configuration": configuration(svc, fn, qualifier),
                           "Code": code_location(svc, fn, context)}
    tags = svc.functions[name].get("Tags")  # the function's, whichever version is shown
    if tags:
        out["Tags"] = tags
    reserved = reserved_concurrency(svc.functions[name])  # the function's too
    if reserved is not None:
        out["Concurrency"] = {"ReservedConcurrentExecutions": reserved}
    return out


def get_function_configuration(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    return configuration(svc, svc.function(name, qualifier), qualifier)


def list_functions(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    configurations = dict(svc.functions)
    if p.get("FunctionVersion") == "ALL":  # every version, each function's $LATEST first
        configurations = {f"{name}:{v['Version'].zfill(12)}": v for name in configurations
                          for v in svc.versions.of(name)}
        configurations.update({f"{name}:$LATEST": configuration(svc, fn, "$LATEST")
                               for name, fn in svc.functions.items()})
    page, next_marker = paginate(sorted(configurations), p.get("Marker"), p.get("MaxItems") or MAX_LIST_ITEMS)
    functions = [{k: v for k, v in configurations[key].items() if k not in GET_ONLY_FIELDS} for key in page]
    out: dict[str, Any] = {"Functions": functions}
    if next_marker is not None:
        out["NextMarker"] = next_marker
    return out


def paginate(keys: list[str], marker: str | None, max_items: int) -> tuple[list[str], str | None]:
    """A page of sorted keys from an opaque marker (the next page's first key, base64)."""
    start = 0
    if marker:
        try:
            first = base64.urlsafe_b64decode(marker.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise invalid_parameter(f"Invalid marker: {marker}") from None
        start = next((i for i, k in enumerate(keys) if k >= first), len(keys))
    page = keys[start:start + max_items]
    rest = keys[start + max_items:start + max_items + 1]
    return page, base64.urlsafe_b64encode(rest[0].encode()).decode() if rest else None


def update_function_code(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    fn = _latest(svc, p["FunctionName"])
    name = fn["FunctionName"]
    check_revision(fn, p.get("RevisionId"))
    check_package_type(None, p.get("ImageUri"))
    code = fetch_code(svc, name, p, dry_run=bool(p.get("DryRun")))
    cfg = {**fn, "CodeSha256": code.sha256, "CodeSize": code.size, **code.internal_keys()}
    if p.get("Architectures"):
        cfg["Architectures"] = p["Architectures"]
    _new_revision(cfg)
    if p.get("DryRun"):
        return configuration(svc, {**cfg, "RevisionId": fn["RevisionId"], "LastModified": fn["LastModified"]})
    missing = set_up.begin(cfg, fn)
    with svc.lock:
        current = svc.function(name)
        check_revision(current, p.get("RevisionId"))
        svc.save_function(cfg)
    if missing:
        set_up.start(svc, cfg, missing)
    svc.runtime.retire(name)
    # Keep the previous package too: an invocation that started before the update may still read
    # it; and those of published versions.
    svc.code.prune(name, {cfg.get("PackageId", ""), fn.get("PackageId", "")} | svc.versions.package_ids(name))
    if p.get("Publish"):
        return svc.versions.publish(name)  # AWS answers with the published version
    return configuration(svc, cfg)


def _latest(svc: LambdaService, ref: str) -> dict[str, Any]:
    """$LATEST of the function a reference names: only it can be changed (versions are immutable)."""
    name, qualifier = svc.parse_function_ref(ref)
    if qualifier not in (None, "$LATEST"):
        raise resource_not_found(f"Function not found: {svc.function_arn(name, qualifier)}")
    return svc.function(name)


def update_function_configuration(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    fn = _latest(svc, p["FunctionName"])
    check_revision(fn, p.get("RevisionId"))
    if "Runtime" in p:
        check_runtime(p["Runtime"])
    if "ImageConfig" in p:
        check_package_type("Image", None)
    if "Handler" in p:
        check_handler(p["Handler"])
    check_environment(p.get("Environment"))
    layers = svc.layers.resolve(p.get("Layers"), svc.settings.region, svc.settings.account_id)
    cfg = dict(fn)
    _apply_settings(cfg, p)
    if "Layers" in p:
        svc.layers.apply(cfg, layers)
    _new_revision(cfg)
    missing = set_up.begin(cfg, fn)
    with svc.lock:
        check_revision(svc.function(fn["FunctionName"]), p.get("RevisionId"))
        svc.save_function(cfg)
    if missing:
        set_up.start(svc, cfg, missing)
    svc.runtime.retire(fn["FunctionName"])
    if "Layers" in p:
        svc.layers.prune(svc.layer_packages_in_use())  # a deleted layer version no function uses any more
    return configuration(svc, cfg)


def delete_function(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    if qualifier == "$LATEST":
        raise invalid_parameter("$LATEST version cannot be deleted without deleting the function.")
    if name not in svc.functions:  # AWS names the unqualified function, whatever the qualifier
        raise resource_not_found(f"Function not found: {svc.function_arn(name)}")
    if qualifier is not None:
        svc.versions.delete(name, qualifier)
        return {"StatusCode": 204}
    with svc.lock:
        fn = svc.function(name)
        svc.drop_function(name)
        svc.versions.drop_function(name)  # its versions and aliases go with it
        svc.event_invoke_configs.drop_function(name)  # and their event invoke configurations
    svc.runtime.retire(name)
    svc.invocation_stats.forget(name)
    if not fn.get("HotReload"):
        svc.code.remove(name)
    svc.layers.prune(svc.layer_packages_in_use())
    # Like AWS, the function's logs stay (CloudWatch keeps the log group) and so do its event
    # source mappings: their pollers report the missing function in LastProcessingResult.
    return {"StatusCode": 204}


def invoke(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    svc.function(name, qualifier)  # a missing function or qualifier is answered before the payload is read
    invocation_type = p.get("InvocationType", "RequestResponse")
    payload = p.get("Payload") or b""
    if invocation_type == "Event" and len(payload) > MAX_ASYNC_PAYLOAD_BYTES:
        raise AwsError("RequestTooLargeException",
                       f"Request must be smaller than {MAX_ASYNC_PAYLOAD_BYTES} bytes for the InvokeFunction operation",
                       413)
    if payload.strip():
        try:
            orjson.loads(payload)
        except orjson.JSONDecodeError as err:
            raise AwsError("InvalidRequestContentException",
                           f"Could not parse request body into json: Could not parse payload into json: {err}") from None
    else:
        payload = b"{}"  # no payload: the handler gets an empty event
    client_context = _client_context(p.get("ClientContext"))
    if invocation_type == "DryRun":
        return {"StatusCode": 204}
    # A function invoking a function passes its own trace header on (recursion.py): Lambda-to-Lambda
    # loops, synchronous or asynchronous, are detected too.
    trace = trace_header.value(context.headers.get("x-amzn-trace-id"))
    if invocation_type == "Event":
        svc.async_invoker.submit(f"{name}:{qualifier}" if qualifier else name, payload, context.request_id,
                                 trace_header=trace)
        return {"StatusCode": 202}
    result = svc.invoke_qualified(name, payload, context.request_id, qualifier, trace_header=trace,
                                  client_context=client_context)
    out: dict[str, Any] = {"StatusCode": 200, "Payload": result.payload, "ExecutedVersion": result.executed_version}
    if result.function_error:
        out["FunctionError"] = result.function_error
    if p.get("LogType") == "Tail":
        out["LogResult"] = base64.b64encode(result.log_tail.encode()[-LOG_TAIL_BYTES:]).decode()
    return out


def _client_context(header: str | None) -> dict[str, Any] | None:
    """X-Amz-Client-Context: base64 of a JSON object, for the handler's `context.client_context`."""
    if not header:
        return None
    try:
        value = orjson.loads(base64.b64decode(header, validate=True))
    except (ValueError, orjson.JSONDecodeError):
        value = None
    if not isinstance(value, dict):
        raise AwsError("InvalidRequestContentException", "Client context must be a valid Base64-encoded JSON object.")
    return value


# tags

def _tagged(svc: LambdaService, arn: str) -> tuple[str, dict[str, Any]]:
    """(kind, stored document) of a taggable resource ARN: a function or an event source mapping."""
    if ":event-source-mapping:" in arn:
        return "mapping", svc.mapping(arn.rsplit(":", 1)[1])
    name, qualifier = svc.parse_function_ref(arn)
    if qualifier is not None:
        raise invalid_parameter("Tags on function aliases and versions are not supported. Please specify a function "
                                "ARN.")  # AWS's text (test_tag_versions)
    return "function", svc.function(name)


def _save_tagged(svc: LambdaService, kind: str, doc: dict[str, Any]) -> None:
    if kind == "mapping":
        svc.save_mapping(doc)
    else:
        svc.save_function(doc)


def tag_resource(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    with svc.lock:
        kind, doc = _tagged(svc, p["Resource"])
        _save_tagged(svc, kind, {**doc, "Tags": {**(doc.get("Tags") or {}), **(p.get("Tags") or {})}})
    return {}


def untag_resource(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    with svc.lock:
        kind, doc = _tagged(svc, p["Resource"])
        drop = set(p.get("TagKeys") or ())
        _save_tagged(svc, kind, {**doc, "Tags": {k: v for k, v in (doc.get("Tags") or {}).items() if k not in drop}})
    return {}


def list_tags(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    _, doc = _tagged(svc, p["Resource"])
    return {"Tags": doc.get("Tags") or {}}


def get_account_settings(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    functions = list(svc.functions.values())
    return {"AccountLimit": {**ACCOUNT_LIMIT, "UnreservedConcurrentExecutions": unreserved_concurrency(svc.functions)},
            "AccountUsage": {"TotalCodeSize": sum(f.get("CodeSize", 0) for f in functions),
                             "FunctionCount": len(functions)}}
