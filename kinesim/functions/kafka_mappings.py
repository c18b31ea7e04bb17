"""Event source mappings whose source is a self-managed Apache Kafka cluster: the parameters AWS
takes for them, its defaults and refusals, and the stored document. The cluster kinesim reads is
its own Kafka listener (kinesim/kafka): a topic is a stream; the poller is kafka_source.py.

Evidence for the rules (cited where a rule looks surprising):
- the Lambda guide's "All self-managed Apache Kafka event source configuration parameters"
  (kafka-esm-parameters): BatchSize 100 (at most 10,000), MaximumBatchingWindowInSeconds 500 ms,
  SourceAccessConfigurations optional ("No credentials"), SelfManagedEventSource, Topics and
  SelfManagedKafkaEventSourceConfig (ConsumerGroupId "defaults to a unique value") set on Create
  only; "Customizable consumer group ID" (kafka-consumer-group-id): an ID must be unique among the
  Kafka event sources, and cannot be updated;
- AWS's answers recorded by LocalStack (tests/aws/services/lambda_/test_lambda_api.snapshot.json,
  test_create_event_source_self_managed, 2024-09): StateTransitionReason "USER_INITIATED",
  ConsumerGroupId = the mapping's UUID by default, StartingPosition TRIM_HORIZON when none is
  given (the guide calls it required; AWS's answer did not), no MaximumBatchingWindowInSeconds key
  (500 ms is not a whole second), no EventSourceArn, and the text of the duplicate mapping;
- botocore's model: one topic, endpoints as host:port, BatchSize 1 to 10,000 (the REST layer's
  validator answers those).

Not followed: that recording also refused a mapping without SourceAccessConfigurations
("Required 'sourceAccessConfigurations' parameter is missing."); the current guide says they are
optional, and kinesim's listener takes none, so none are required (any given are kept and shown).
"""
from __future__ import annotations

import functools
import socket
import time
from typing import Any

from ..config import Settings
from .errors import conflict, invalid_parameter

DEFAULT_BATCH_SIZE = 100
DEFAULT_BATCHING_WINDOW_S = 0.5    # the guide's 500 ms, until MaximumBatchingWindowInSeconds is set
STATE_REASON = "USER_INITIATED"    # recorded (stream sources show "User action")
ENDPOINTS = "KAFKA_BOOTSTRAP_SERVERS"
# What UpdateEventSourceMapping may change on a Kafka mapping (the guide's table, less what is
# "Can set only on Create"). DestinationConfig is refused by `check_parameters`.
UPDATABLE = ("BatchSize", "MaximumBatchingWindowInSeconds", "FilterCriteria", "SourceAccessConfigurations",
             "MaximumRetryAttempts", "MaximumRecordAgeInSeconds", "BisectBatchOnFunctionError",
             "FunctionResponseTypes", "KMSKeyArn", "MetricsConfig", "LoggingConfig", "ProvisionedPollerConfig")
# Parameters of other sources, refused in AWS's words for an unsupported DestinationConfig
# (recorded), with the parameter's name, as sqs_source.py does.
OTHER_SOURCES = ("EventSourceArn", "ParallelizationFactor", "TumblingWindowInSeconds", "Queues", "ScalingConfig",
                 "AmazonManagedKafkaEventSourceConfig", "DocumentDBEventSourceConfig")
# Supported by AWS, not by kinesim: refused with kinesim's reason rather than accepted and ignored.
NOT_SUPPORTED = {
    "DestinationConfig": "on-failure destinations of Kafka event source mappings are not supported by kinesim yet",
    "SchemaRegistryConfig": "schema registries are not supported by kinesim",
    "ConsumptionMode": "only the Stream consumption mode (a consumer group) is supported by kinesim",
}


def is_kafka(p: dict[str, Any]) -> bool:
    """Whether a request or a stored mapping is of a self-managed Kafka source."""
    return p.get("SelfManagedEventSource") is not None


def is_kafka_config(config: Any) -> bool:
    """Whether a poller configuration is a Kafka mapping's (kafka_source.KafkaMappingConfig),
    without importing the Kafka side to ask."""
    return hasattr(config, "group_id")


def bootstrap_servers(doc: dict[str, Any]) -> list[str]:
    return list(((doc.get("SelfManagedEventSource") or {}).get("Endpoints") or {}).get(ENDPOINTS) or [])


def check_parameters(p: dict[str, Any], creating: bool) -> None:
    """Refuse what a Kafka source does not take (CreateEventSourceMapping / Update)."""
    for name in OTHER_SOURCES + (("StartingPosition", "StartingPositionTimestamp", "Topics",
                                  "SelfManagedEventSource") if not creating else ()):
        if p.get(name) is not None:
            raise invalid_parameter(f"Unsupported {name} parameter for given event source mapping type.")
    config = p.get("SelfManagedKafkaEventSourceConfig") or {}
    for name, why in NOT_SUPPORTED.items():
        value = config.get(name) if name != "DestinationConfig" else p.get(name)
        if value is not None and not (name == "ConsumptionMode" and value == "Stream"):
            raise invalid_parameter(f"{name}: {why}.")
    if not creating and config.get("ConsumerGroupId") is not None:
        # "After creating a Kafka event source mapping with the consumer group ID specified, you
        # cannot update this value" (the guide); AWS's text for trying was not found recorded.
        raise invalid_parameter("ConsumerGroupId cannot be updated: create a new event source mapping.")
    if creating:
        if not bootstrap_servers(p):
            raise invalid_parameter("Required 'selfManagedEventSource.endpoints' parameter is missing.")
        if not p.get("Topics"):
            # AWS's text for a missing Topics was not found recorded: its text for another required
            # Kafka parameter (sourceAccessConfigurations, above) with this one's name.
            raise invalid_parameter("Required 'topics' parameter is missing.")
        if p.get("StartingPosition") == "AT_TIMESTAMP" and p.get("StartingPositionTimestamp") is None:
            raise invalid_parameter("StartingPositionTimestamp is required when StartingPosition is AT_TIMESTAMP.")


def check_unique(mappings: list[dict[str, Any]], p: dict[str, Any], function_arn: str) -> None:
    """AWS's duplicate (same function, a common broker and topic: recorded text) and the guide's
    rule that a consumer group belongs to one mapping (no recorded text: kinesim's words)."""
    sources, topics = bootstrap_servers(p), p["Topics"]
    group = (p.get("SelfManagedKafkaEventSourceConfig") or {}).get("ConsumerGroupId")
    for other in mappings:
        if not is_kafka(other):
            continue
        if (other["FunctionArn"] == function_arn and set(bootstrap_servers(other)) & set(sources)
                and set(other.get("Topics") or ()) & set(topics)):
            raise conflict(f'An event source mapping with event source ("{",".join(sources)}"), function '
                           f'("{function_arn}"), topics ("{",".join(topics)}") already exists. Please update or '
                           f"delete the existing mapping with UUID {other['UUID']}")
        if group is not None and group_id(other) == group:
            raise invalid_parameter(f"The consumer group ID {group} is used by event source mapping "
                                    f"{other['UUID']}: a consumer group ID must be unique among Kafka event sources.")


def group_id(doc: dict[str, Any]) -> str:
    return (doc.get("SelfManagedKafkaEventSourceConfig") or {}).get("ConsumerGroupId") or doc["UUID"]


def new_document(p: dict[str, Any], uuid: str, function_arn: str, mapping_arn: str, enabled: bool) -> dict[str, Any]:
    """A new Kafka mapping as AWS stores and shows it."""
    now = time.time()
    doc: dict[str, Any] = {"UUID": uuid, "StartingPosition": p.get("StartingPosition") or "TRIM_HORIZON"}
    if doc["StartingPosition"] == "AT_TIMESTAMP":
        doc["StartingPositionTimestamp"] = p["StartingPositionTimestamp"]
    doc["BatchSize"] = DEFAULT_BATCH_SIZE
    doc.update({
        "FunctionArn": function_arn,
        "LastModified": round(now, 3),
        "LastProcessingResult": "No records processed",
        "State": "Enabled" if enabled else "Disabled",
        "StateTransitionReason": STATE_REASON,
        "Topics": list(p["Topics"]),
        "SelfManagedEventSource": p["SelfManagedEventSource"],
        "SelfManagedKafkaEventSourceConfig": {**(p.get("SelfManagedKafkaEventSourceConfig") or {}),
                                              "ConsumerGroupId": group_id({**p, "UUID": uuid})},
    })
    apply(doc, p)
    doc["EventSourceMappingArn"] = mapping_arn
    doc["CreatedAt"] = now
    if p.get("Tags"):
        doc["Tags"] = p["Tags"]
    return doc


def apply(doc: dict[str, Any], p: dict[str, Any]) -> None:
    """Copy the settable parameters of `p` into `doc`; an empty FilterCriteria removes the filters."""
    for key in UPDATABLE:
        if p.get(key) is None:
            continue
        if key == "FilterCriteria" and not (p[key].get("Filters") or []):
            doc.pop(key, None)
        else:
            doc[key] = p[key]


def local_endpoint(endpoint: str, settings: Settings) -> bool:
    """Whether a bootstrap server (host:port) is this server's Kafka listener: its port, on its
    host, loopback, or this machine's name. Any other broker is out of kinesim's reach."""
    host, _, port = endpoint.rpartition(":")
    if not settings.kafka_port or not port.isdigit() or int(port) != settings.kafka_port:
        return False
    names = {settings.host.lower(), settings.local_host.lower(), "localhost", "127.0.0.1"} | _machine_names()
    return host.lower() in names


@functools.lru_cache(maxsize=1)
def _machine_names() -> frozenset[str]:
    """This machine's name, full name and address (once: getfqdn may wait on DNS)."""
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        names.add(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    return frozenset(n.lower() for n in names if n)


def reachable(doc: dict[str, Any], settings: Settings) -> bool:
    """A Kafka client needs one bootstrap server that answers: one of kinesim's own."""
    return any(local_endpoint(e, settings) for e in bootstrap_servers(doc))
