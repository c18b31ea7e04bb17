"""Event invoke configurations: PutFunctionEventInvokeConfig, UpdateFunctionEventInvokeConfig,
GetFunctionEventInvokeConfig, DeleteFunctionEventInvokeConfig, ListFunctionEventInvokeConfigs,
and what they mean for asynchronous invocations (`settings_for`, read by async_invoke).

One configuration per function and qualifier ($LATEST, a version or an alias): a document of kind
"event-invoke-config" named `<function>:<qualifier>`, holding the FunctionEventInvokeConfig. It goes
with its function (DeleteFunction); one whose version or alias was deleted is no longer shown.

AWS's answers, as LocalStack's recordings show them (test_lambda_api.snapshot.json,
test_lambda_eventinvokeconfig_exceptions / _lifecycle):
- Put and Update need at least one of MaximumRetryAttempts, MaximumEventAgeInSeconds and
  DestinationConfig, checked first (even for a function that does not exist);
- Put replaces the whole configuration (a setting left out is gone), Update changes what it names
  (DestinationConfig as a whole);
- answers always carry DestinationConfig, with `{}` for a destination not set;
- a Lambda destination must exist and not be the function itself; the other services are checked
  by the ARN's service only (sqs, sns, lambda, events; s3 for OnFailure), anything else makes the
  whole DestinationConfig invalid, named in Java's toString form.
kinesim serves no EventBridge: an event bus destination is refused with a message that says so,
rather than accepted and its records silently dropped (as OnFailure destinations of mappings are
refused when this server has no service to deliver to, failure_destinations.check_available).
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from ..destinations import arn_service
from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext
from .async_invoke import DEFAULT_MAX_AGE_S, DEFAULT_MAX_RETRIES, AsyncSettings
from .errors import invalid_parameter, resource_not_found
from .failure_destinations import s3_bucket
from .functions_api import paginate

if TYPE_CHECKING:
    from ..store import Store
    from .async_destinations import RecordSender
    from .service import LambdaService

KIND = "event-invoke-config"
LATEST = "$LATEST"
MAX_LIST_ITEMS = 50
_SETTINGS = ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig")


class EventInvokeConfigs:
    def __init__(self, svc: LambdaService, store: "Store", sender: "RecordSender"):
        self.svc, self.store, self.sender = svc, store, sender
        self.lock = threading.Lock()
        self.configs: dict[str, dict[str, Any]] = store.documents(KIND)  # "<function>:<qualifier>" -> config

    def get(self, name: str, qualifier: str) -> dict[str, Any] | None:
        """A configuration whose function and qualifier (still) exist."""
        config = self.configs.get(f"{name}:{qualifier}")
        if config is None or not self.svc.has_function(name, None if qualifier == LATEST else qualifier):
            return None
        return config

    def of(self, name: str) -> dict[str, dict[str, Any]]:
        """qualifier -> configuration, of one function."""
        prefix = f"{name}:"
        return {key[len(prefix):]: c for key, c in list(self.configs.items())
                if key.startswith(prefix) and self.get(name, key[len(prefix):]) is not None}

    def save(self, name: str, qualifier: str, config: dict[str, Any]) -> None:
        with self.lock:
            self.store.put_document(KIND, f"{name}:{qualifier}", config)
            self.configs[f"{name}:{qualifier}"] = config

    def delete(self, name: str, qualifier: str) -> None:
        with self.lock:
            self.configs.pop(f"{name}:{qualifier}", None)
            self.store.delete_document(KIND, f"{name}:{qualifier}")

    def drop_function(self, name: str) -> None:
        """Every configuration of a deleted function."""
        with self.lock:
            keys = [k for k in self.configs if k.startswith(f"{name}:")]
            for key in keys:
                self.configs.pop(key)
            self.store.delete_documents(KIND, keys)

    def settings_for(self, ref: str) -> AsyncSettings:
        """How an asynchronous invocation of `ref` is handled: the configuration of the qualifier
        invoked, and the dead-letter queue of the configuration that runs. Raises
        ResourceNotFoundException once the function, version or alias is gone."""
        name, qualifier = self.svc.parse_function_ref(ref)
        fn = self.svc.function(name, qualifier)
        qualifier = qualifier or LATEST
        config = self.configs.get(f"{name}:{qualifier}") or {}
        destinations = config.get("DestinationConfig") or {}
        retries = config.get("MaximumRetryAttempts")
        age = config.get("MaximumEventAgeInSeconds")
        return AsyncSettings(
            function_name=name, function_arn=self.svc.function_arn(name, qualifier),
            max_retries=DEFAULT_MAX_RETRIES if retries is None else retries,
            max_age_s=DEFAULT_MAX_AGE_S if age is None else age,
            on_success=(destinations.get("OnSuccess") or {}).get("Destination") or None,
            on_failure=(destinations.get("OnFailure") or {}).get("Destination") or None,
            dead_letter=(fn.get("DeadLetterConfig") or {}).get("TargetArn") or None)


# checks

def _require_setting(p: dict[str, Any]) -> None:
    if not any(p.get(k) is not None for k in _SETTINGS):
        raise invalid_parameter("You must specify at least one of error handling or destination setting.")


def _existing_target(svc: LambdaService, p: dict[str, Any]) -> tuple[str, str]:
    """(function, qualifier) of a Put/Update: the function and its version or alias must exist."""
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    if not svc.has_function(name, None if qualifier in (None, LATEST) else qualifier):
        raise resource_not_found("The function doesn't exist.")
    return name, qualifier or LATEST


def _no_config(svc: LambdaService, name: str, qualifier: str) -> AwsError:
    return resource_not_found(f"The function {svc.function_arn(name, qualifier)} doesn't have an EventInvokeConfig")


def _destination_config(svc: LambdaService, name: str, given: dict[str, Any]) -> dict[str, Any]:
    """DestinationConfig checked and as AWS answers it (`{}` for a destination not set)."""
    out: dict[str, Any] = {}
    invalid = False
    for kind in ("OnFailure", "OnSuccess"):
        arn = (given.get(kind) or {}).get("Destination") or None
        out[kind] = {"Destination": arn} if arn else {}
        if arn and not _valid_destination(svc, name, kind, arn):
            invalid = True
    if invalid:
        on_success, on_failure = out["OnSuccess"].get("Destination"), out["OnFailure"].get("Destination")
        raise invalid_parameter(
            "The provided destination config DestinationConfig("
            f"onSuccess={f'OnSuccess(destination={on_success})' if on_success else 'null'}, "
            f"onFailure={f'OnFailure(destination={on_failure})' if on_failure else 'null'}) is invalid.")
    return {"OnSuccess": out["OnSuccess"], "OnFailure": out["OnFailure"]}


def _valid_destination(svc: LambdaService, name: str, kind: str, arn: str) -> bool:
    service = arn_service(arn)
    if service == "events":
        raise invalid_parameter(
            f"kinesim does not serve Amazon EventBridge: the event bus {arn} cannot receive the invocation records "
            f"of {name}. Use an SQS queue, SNS topic or Lambda function (or, for OnFailure, an S3 bucket).")
    if service == "lambda":
        try:
            target, qualifier = svc.parse_function_ref(arn)
        except AwsError:
            raise invalid_parameter(f"The destination ARN {arn} is invalid.") from None
        if not svc.has_function(target, qualifier):
            raise invalid_parameter(f"The destination ARN {arn} is invalid.")
        if target == name:
            raise invalid_parameter("You can't specify the function as a destination for itself.")
        return True
    if service in ("sqs", "sns") or (kind == "OnFailure" and s3_bucket(arn) is not None):
        if not svc.event_invoke_configs.sender.can_deliver(arn):
            raise invalid_parameter(f"The destination ARN {arn} is invalid: this kinesim server has no "
                                    f"{service.upper()} service to deliver to.")
        return True
    return False


def _answer(svc: LambdaService, name: str, qualifier: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"FunctionArn": svc.function_arn(name, qualifier), **config}


# operations

def put_function_event_invoke_config(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    _require_setting(p)
    name, qualifier = _existing_target(svc, p)
    config: dict[str, Any] = {"LastModified": time.time()}
    for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
        if p.get(key) is not None:
            config[key] = p[key]
    config["DestinationConfig"] = _destination_config(svc, name, p.get("DestinationConfig") or {})
    svc.event_invoke_configs.save(name, qualifier, config)
    return _answer(svc, name, qualifier, config)


def update_function_event_invoke_config(svc: LambdaService, p: dict[str, Any],
                                        context: RequestContext) -> dict[str, Any]:
    _require_setting(p)
    name, qualifier = _existing_target(svc, p)
    current = svc.event_invoke_configs.get(name, qualifier)
    if current is None:
        raise _no_config(svc, name, qualifier)
    config = {**current, "LastModified": time.time()}
    for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
        if p.get(key) is not None:
            config[key] = p[key]
    if p.get("DestinationConfig") is not None:
        config["DestinationConfig"] = _destination_config(svc, name, p["DestinationConfig"])
    svc.event_invoke_configs.save(name, qualifier, config)
    return _answer(svc, name, qualifier, config)


def get_function_event_invoke_config(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    qualifier = qualifier or LATEST
    config = svc.event_invoke_configs.get(name, qualifier)
    if config is None:
        raise _no_config(svc, name, qualifier)
    return _answer(svc, name, qualifier, config)


def delete_function_event_invoke_config(svc: LambdaService, p: dict[str, Any],
                                        context: RequestContext) -> dict[str, Any]:
    name, qualifier = svc.parse_function_ref(p["FunctionName"], p.get("Qualifier"))
    qualifier = qualifier or LATEST
    if svc.event_invoke_configs.get(name, qualifier) is None:
        raise _no_config(svc, name, qualifier)
    svc.event_invoke_configs.delete(name, qualifier)
    return {}


def list_function_event_invoke_configs(svc: LambdaService, p: dict[str, Any],
                                       context: RequestContext) -> dict[str, Any]:
    name, _ = svc.parse_function_ref(p["FunctionName"])
    if not svc.has_function(name):
        raise resource_not_found("The function doesn't exist.")
    configs = {svc.function_arn(name, qualifier): c for qualifier, c in svc.event_invoke_configs.of(name).items()}
    page, marker = paginate(sorted(configs), p.get("Marker"), p.get("MaxItems") or MAX_LIST_ITEMS)
    out: dict[str, Any] = {"FunctionEventInvokeConfigs": [{"FunctionArn": arn, **configs[arn]} for arn in page]}
    if marker is not None:
        out["NextMarker"] = marker
    return out
