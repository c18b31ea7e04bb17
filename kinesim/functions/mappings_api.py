"""Event source mapping operations: Create, Get, List, Update, Delete — Kinesis streams as sources,
read directly or through an enhanced fan-out consumer (EventSourceArn = the consumer's ARN), SQS
queues, standard and FIFO (their parameters and AWS's rules for them: sqs_source.py), and topics
of kinesim's Kafka listener as a self-managed Apache Kafka source (kafka_mappings.py).

The stored document is the EventSourceMappingConfiguration with `State` holding what the user
asked for ("Enabled" or "Disabled"); the MappingManager runs pollers to match it. Answers to
Create/Update/Delete show AWS's transitional states (Creating, Enabling, Disabling, Updating,
Deleting); Get and List show the pollers' live state and last processing result.
"""
from __future__ import annotations

import base64
import time
import uuid as uuidlib
from typing import TYPE_CHECKING, Any

from ..kinesis import consumers
from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext
from . import kafka_mappings, sqs_source
from .errors import conflict, invalid_parameter

if TYPE_CHECKING:
    from .service import LambdaService

MAX_LIST_ITEMS = 100  # ListEventSourceMappings' default page
MIN_RECORD_AGE_S = 60  # MaximumRecordAgeInSeconds: -1, or at least a minute

# Kinesis defaults, as AWS fills them in.
KINESIS_DEFAULTS: dict[str, Any] = {
    "BatchSize": 100,
    "MaximumBatchingWindowInSeconds": 0,
    "ParallelizationFactor": 1,
    "MaximumRecordAgeInSeconds": -1,
    "BisectBatchOnFunctionError": False,
    "MaximumRetryAttempts": -1,
    "TumblingWindowInSeconds": 0,
    "FunctionResponseTypes": [],
}
# What UpdateEventSourceMapping may change for a Kinesis source.
UPDATABLE = ("BatchSize", "FilterCriteria", "MaximumBatchingWindowInSeconds", "ParallelizationFactor",
             "DestinationConfig", "MaximumRecordAgeInSeconds", "BisectBatchOnFunctionError", "MaximumRetryAttempts",
             "TumblingWindowInSeconds", "FunctionResponseTypes", "KMSKeyArn", "MetricsConfig")


def _stream_name(svc: LambdaService, arn: str) -> str:
    """The name of the local stream a Kinesis source ARN (a stream's or a consumer's) names; AWS's
    errors otherwise."""
    parts = arn.split(":", 5)
    service = parts[2] if len(parts) > 2 else ""
    if service != "kinesis":
        raise invalid_parameter(
            f"Unsupported event source {arn}: kinesim's event source mappings read Kinesis streams and SQS "
            f"queues only.")
    resource = parts[5] if len(parts) > 5 else ""
    if "/consumer/" in resource:
        # A registered consumer (CREATING or ACTIVE; the mapping subscribes once it is ACTIVE).
        # AWS's text for a missing consumer was not found recorded: the missing stream's is used.
        try:
            stream, consumer = consumers.by_arn(svc.kinesis, arn)
        except AwsError:
            raise invalid_parameter(f"Stream not found: {arn}") from None
        if consumer.status == "DELETING" or stream.status == "DELETING":
            raise invalid_parameter(f"Stream not found: {arn}")
        return stream.name
    name = resource[len("stream/"):] if resource.startswith("stream/") else ""
    stream = svc.kinesis.find(name) if name else None
    if (stream is None or stream.status == "DELETING" or parts[3] != svc.settings.region
            or parts[4] != svc.settings.account_id):
        raise invalid_parameter(f"Stream not found: {arn}")
    return name


def _check_settings(svc: LambdaService, p: dict[str, Any]) -> None:
    destination = p.get("DestinationConfig") or {}
    if destination.get("OnSuccess"):
        raise invalid_parameter("Unsupported DestinationConfig parameter for given event source mapping type.")
    on_failure = (destination.get("OnFailure") or {}).get("Destination")
    if on_failure:
        # The ARN's service only: a queue, topic or bucket that does not exist yet is accepted, and
        # found out when a record is sent (it then holds the shard, as a missing S3 bucket does).
        svc.manager.check_destination(on_failure)
    _check_record_age(p)


def _check_record_age(p: dict[str, Any]) -> None:
    age = p.get("MaximumRecordAgeInSeconds")
    if age is not None and age != -1 and age < MIN_RECORD_AGE_S:
        raise invalid_parameter(
            f"MaximumRecordAgeInSeconds must be -1 (records never expire from the mapping) or between "
            f"{MIN_RECORD_AGE_S} and 604800; got {age}.")


def _response(doc: dict[str, Any], state: str) -> dict[str, Any]:
    return {**doc, "State": state}


def create_event_source_mapping(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    # AWS's order (LocalStack's AWS recordings, test_event_source_mapping_exceptions): the source ARN's
    # presence, the DestinationConfig, the function, and only then the source itself.
    if kafka_mappings.is_kafka(p):
        return _create_kafka_mapping(svc, p)
    source = p.get("EventSourceArn")
    if not source:
        raise invalid_parameter("Unrecognized event source.")
    if sqs_source.is_queue_arn(source):
        return _create_sqs_mapping(svc, p, source)
    _check_settings(svc, p)
    name, qualifier = svc.parse_function_ref(p["FunctionName"])
    if not svc.has_function(name, qualifier):
        raise invalid_parameter("Function does not exist")
    _stream_name(svc, source)
    position = p.get("StartingPosition")
    if position is None:
        raise invalid_parameter("1 validation error detected: Value null at 'startingPosition' failed to satisfy "
                                "constraint: Member must not be null.")
    if position == "AT_TIMESTAMP" and p.get("StartingPositionTimestamp") is None:
        raise invalid_parameter("StartingPositionTimestamp is required when StartingPosition is AT_TIMESTAMP.")
    function_arn = svc.function_arn(name, qualifier)
    uuid = str(uuidlib.uuid4())
    doc: dict[str, Any] = {
        "UUID": uuid,
        "StartingPosition": position,
        **KINESIS_DEFAULTS,
        "EventSourceArn": source,
        "FunctionArn": function_arn,
        "LastModified": round(time.time(), 3),
        "LastProcessingResult": "No records processed",
        "State": "Enabled" if p.get("Enabled", True) else "Disabled",
        "StateTransitionReason": "User action",
        "DestinationConfig": {"OnFailure": {}},
        "EventSourceMappingArn": svc.mapping_arn(uuid),
        "CreatedAt": time.time(),
    }
    if position == "AT_TIMESTAMP":
        doc["StartingPositionTimestamp"] = p["StartingPositionTimestamp"]
    for key in UPDATABLE:
        if p.get(key) is not None:
            doc[key] = p[key]
    if p.get("Tags"):
        doc["Tags"] = p["Tags"]
    with svc.lock:
        for other in svc.mappings.values():
            if other.get("EventSourceArn") == source and other["FunctionArn"] == function_arn:
                raise conflict(f'The event source arn (" {source} ") and function (" {name} ") provided mapping '
                               f"already exists. Please update or delete the existing mapping with UUID "
                               f"{other['UUID']}")
        svc.manager.sync(doc)  # refuses what cannot run (a bad filter, an unsupported destination)
        svc.save_mapping(doc)
    return _response(doc, "Creating")


def _create_sqs_mapping(svc: LambdaService, p: dict[str, Any], source: str) -> dict[str, Any]:
    sqs_source.check_parameters(p)  # a DestinationConfig among them, in AWS's words for OnSuccess
    sqs_source.check_batching(source, p.get("BatchSize") or sqs_source.DEFAULT_BATCH_SIZE,
                              p.get("MaximumBatchingWindowInSeconds") or 0)
    name, qualifier = svc.parse_function_ref(p["FunctionName"])
    if not svc.has_function(name, qualifier):
        raise invalid_parameter("Function does not exist")
    parts = source.split(":")
    if (parts[3] != svc.settings.region or parts[4] != svc.settings.account_id
            or svc.manager.queues is None or svc.manager.queues.find(source) is None):
        raise sqs_source.missing_queue()
    function_arn = svc.function_arn(name, qualifier)
    uuid = str(uuidlib.uuid4())
    enabled = p.get("Enabled", True)
    doc = sqs_source.new_document(p, uuid, function_arn, svc.mapping_arn(uuid), time.time(), enabled)
    with svc.lock:
        for other in svc.mappings.values():
            if other.get("EventSourceArn") == source and other["FunctionArn"] == function_arn:
                raise sqs_source.duplicate(source, name, other["UUID"])
        svc.manager.sync(doc)  # refuses what cannot run (a bad filter pattern)
        svc.save_mapping(doc)
    # AWS answers a mapping created disabled with "Disabled" (recorded), an enabled one "Creating".
    return _response(doc, "Creating" if enabled else "Disabled")


def _create_kafka_mapping(svc: LambdaService, p: dict[str, Any]) -> dict[str, Any]:
    kafka_mappings.check_parameters(p, creating=True)
    _check_record_age(p)
    name, qualifier = svc.parse_function_ref(p["FunctionName"])
    if not svc.has_function(name, qualifier):
        raise invalid_parameter("Function does not exist")
    function_arn = svc.function_arn(name, qualifier)
    uuid = str(uuidlib.uuid4())
    enabled = p.get("Enabled", True)
    doc = kafka_mappings.new_document(p, uuid, function_arn, svc.mapping_arn(uuid), enabled)
    with svc.lock:
        kafka_mappings.check_unique(list(svc.mappings.values()), p, function_arn)
        svc.manager.sync(doc)  # refuses what cannot run (a bad filter pattern)
        svc.save_mapping(doc)
    # As an SQS mapping (recorded): "Disabled" for one created disabled, else "Creating".
    return _response(doc, "Creating" if enabled else "Disabled")


def get_event_source_mapping(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    return svc.live_mapping(svc.mapping(p["UUID"]))


def list_event_source_mappings(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    mappings = sorted(svc.mappings.values(), key=lambda m: (m.get("CreatedAt", 0), m["UUID"]))
    if p.get("EventSourceArn"):
        mappings = [m for m in mappings if m.get("EventSourceArn") == p["EventSourceArn"]]
    if p.get("FunctionName"):
        name, qualifier = svc.parse_function_ref(p["FunctionName"])
        wanted = svc.function_arn(name, qualifier)
        mappings = [m for m in mappings if m["FunctionArn"] == wanted
                    or (qualifier is None and m["FunctionArn"].startswith(wanted + ":"))]
    start = 0
    if p.get("Marker"):
        try:
            first = base64.urlsafe_b64decode(p["Marker"].encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise invalid_parameter(f"Invalid marker: {p['Marker']}") from None
        start = next((i for i, m in enumerate(mappings) if m["UUID"] == first), len(mappings))
    limit = p.get("MaxItems") or MAX_LIST_ITEMS
    page = mappings[start:start + limit]
    out: dict[str, Any] = {"EventSourceMappings": [svc.live_mapping(m) for m in page]}
    if start + limit < len(mappings):
        out["NextMarker"] = base64.urlsafe_b64encode(mappings[start + limit]["UUID"].encode()).decode()
    return out


def update_event_source_mapping(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    current = svc.mapping(p["UUID"])
    kafka = kafka_mappings.is_kafka(current)
    queue = not kafka and sqs_source.is_queue_arn(current["EventSourceArn"])
    if queue:
        sqs_source.check_parameters(p)
    elif kafka:
        kafka_mappings.check_parameters(p, creating=False)
        _check_record_age(p)
    else:
        _check_settings(svc, p)
    with svc.lock:
        doc = dict(svc.mapping(p["UUID"]))
        if p.get("FunctionName") is not None:
            name, qualifier = svc.parse_function_ref(p["FunctionName"])
            if not svc.has_function(name, qualifier):
                raise invalid_parameter("Function does not exist")
            doc["FunctionArn"] = svc.function_arn(name, qualifier)
        if queue:
            sqs_source.apply(doc, p)
            sqs_source.check_batching(doc["EventSourceArn"], doc["BatchSize"], doc["MaximumBatchingWindowInSeconds"])
        elif kafka:
            kafka_mappings.apply(doc, p)
        else:
            for key in UPDATABLE:
                if p.get(key) is not None:
                    doc[key] = p[key]
        shown = "Updating"
        if p.get("Enabled") is not None:
            wanted = "Enabled" if p["Enabled"] else "Disabled"
            if wanted != doc["State"]:
                shown = "Enabling" if p["Enabled"] else "Disabling"
            doc["State"] = wanted
        doc["LastModified"] = round(time.time(), 3)
        svc.manager.sync(doc)
        svc.save_mapping(doc)
    return _response(svc.live_mapping(doc), shown)


def delete_event_source_mapping(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    with svc.lock:
        doc = svc.mapping(p["UUID"])
        live = svc.live_mapping(doc)
        svc.manager.remove(doc["UUID"])
        svc.drop_mapping(doc["UUID"])
    return _response(live, "Deleting")
