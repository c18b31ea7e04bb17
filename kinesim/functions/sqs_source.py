"""Event source mappings whose source is an SQS queue: the parameters AWS takes for them, its
defaults and refusals, and the configuration their poller reads (sqs_poller.py).

Evidence for the rules (cited where a rule looks surprising):
- defaults and limits: the Lambda guide's "Lambda parameters for Amazon SQS event source
  mappings" (BatchSize 10, at most 10,000 for a standard queue and 10 for a FIFO queue,
  MaximumBatchingWindowInSeconds 0 and "not supported for FIFO queues", ScalingConfig);
- the shape of a mapping and the texts of the errors: AWS's answers recorded by LocalStack
  (test_lambda_integration_sqs.snapshot.json): StateTransitionReason "USER_INITIATED", no
  StartingPosition, ParallelizationFactor, DestinationConfig or LastProcessingResult keys;
  "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than
  10" for BatchSize > 10 without a window; the missing queue's and the duplicate's texts.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..protocol.errors import AwsError
from .errors import conflict, invalid_parameter
from .filters import FilterCriteria

DEFAULT_BATCH_SIZE = 10
MAX_UNWINDOWED_BATCH = 10          # above this a standard queue's mapping needs a batching window
STATE_REASON = "USER_INITIATED"    # what AWS shows for SQS mappings (streams show "User action")
# What UpdateEventSourceMapping may change on an SQS mapping.
UPDATABLE = ("BatchSize", "MaximumBatchingWindowInSeconds", "FilterCriteria", "FunctionResponseTypes",
             "ScalingConfig", "ProvisionedPollerConfig", "KMSKeyArn", "MetricsConfig")
# Parameters of stream (and broker) sources. AWS refuses StartingPosition with its own text (boto3
# issue #1613 quotes it); for the others no recorded text was found, so AWS's wording for an
# unsupported DestinationConfig (recorded) is used with the parameter's name.
STREAM_ONLY = ("StartingPositionTimestamp", "ParallelizationFactor", "BisectBatchOnFunctionError",
               "MaximumRetryAttempts", "MaximumRecordAgeInSeconds", "TumblingWindowInSeconds", "DestinationConfig",
               "Topics", "Queues", "SourceAccessConfigurations", "SelfManagedEventSource",
               "AmazonManagedKafkaEventSourceConfig", "SelfManagedKafkaEventSourceConfig",
               "DocumentDBEventSourceConfig")


def is_queue_arn(arn: str) -> bool:
    parts = arn.split(":")
    return len(parts) == 6 and parts[2] == "sqs"


def is_fifo_arn(arn: str) -> bool:
    # A FIFO queue's name is the one ending in ".fifo" (CreateQueue refuses any other).
    return arn.endswith(".fifo")


def missing_queue() -> AwsError:
    # AWS checks the queue with a ReceiveMessage and passes SQS's answer on (recorded).
    return invalid_parameter("Error occurred while ReceiveMessage. SQS Error Code: "
                             "AWS.SimpleQueueService.NonExistentQueue. SQS Error Message: The specified queue does "
                             "not exist.")


def duplicate(arn: str, function_name: str, uuid: str) -> AwsError:
    return conflict(f'An event source mapping with SQS arn (" {arn} ") and function (" {function_name} ") already '
                    f"exists. Please update or delete the existing mapping with UUID {uuid}")


def check_parameters(p: dict[str, Any]) -> None:
    """Refuse what an SQS source does not take (CreateEventSourceMapping / Update)."""
    if p.get("StartingPosition") is not None:
        raise invalid_parameter("StartingPosition is not valid for SQS event sources.")
    for name in STREAM_ONLY:
        if p.get(name) is not None:
            raise invalid_parameter(f"Unsupported {name} parameter for given event source mapping type.")


def check_batching(arn: str, batch_size: int, window: int) -> None:
    """AWS's rules tying BatchSize to the batching window and the queue type. A FIFO queue's
    maximum of 10 follows: it takes no window, and without one 10 is the most."""
    if is_fifo_arn(arn) and window > 0:
        # The guide: "Batching window is not supported for FIFO queues"; CloudFormation relays
        # Lambda's refusal in these words (aws-lambda-dotnet PR #1758).
        raise invalid_parameter("Batching window is not supported for FIFO queues")
    if batch_size > MAX_UNWINDOWED_BATCH and window == 0:
        raise invalid_parameter("Maximum batch window in seconds must be greater than 0 if maximum batch size is "
                                "greater than 10")


def apply(doc: dict[str, Any], p: dict[str, Any]) -> None:
    """Copy the settable parameters of `p` into the mapping `doc`. Empty FilterCriteria and
    ScalingConfig remove the setting (AWS then shows neither key)."""
    for key in UPDATABLE:
        if p.get(key) is None:
            continue
        value = p[key]
        if key == "FilterCriteria" and not (value.get("Filters") or []):
            doc.pop(key, None)
        elif key == "ScalingConfig" and value.get("MaximumConcurrency") is None:
            doc.pop(key, None)
        else:
            doc[key] = value


def new_document(p: dict[str, Any], uuid: str, function_arn: str, mapping_arn: str, now: float,
                 enabled: bool) -> dict[str, Any]:
    """A new SQS mapping as AWS stores and shows it (its keys in AWS's order)."""
    doc: dict[str, Any] = {
        "UUID": uuid,
        "BatchSize": DEFAULT_BATCH_SIZE,
        "MaximumBatchingWindowInSeconds": 0,
        "EventSourceArn": p["EventSourceArn"],
        "FunctionArn": function_arn,
        "LastModified": round(now, 3),
        "State": "Enabled" if enabled else "Disabled",
        "StateTransitionReason": STATE_REASON,
        "FunctionResponseTypes": [],
        "EventSourceMappingArn": mapping_arn,
        "CreatedAt": now,
    }
    apply(doc, p)
    if p.get("Tags"):
        doc["Tags"] = p["Tags"]
    return doc


@dataclass(frozen=True)
class SqsMappingConfig:
    """What an SQS poller needs from its mapping, with AWS's defaults."""
    uuid: str
    source_arn: str
    function_arn: str
    invoke_name: str              # what invoke() is called with: the name, with a qualifier if any
    state: str
    batch_size: int
    batching_window_s: float
    maximum_concurrency: int | None
    report_item_failures: bool
    filter_patterns: tuple[str, ...]

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> "SqsMappingConfig":
        source = m["EventSourceArn"]
        if not is_queue_arn(source):
            raise invalid_parameter(f"Unsupported event source for an SQS poller: {source}")
        function_arn = m["FunctionArn"]
        parts = function_arn.split(":")
        name = parts[6] if len(parts) > 6 else function_arn
        qualifier = parts[7] if len(parts) > 7 else None
        criteria = m.get("FilterCriteria")
        FilterCriteria.parse(criteria)  # refuse a bad pattern now, not in the poller
        filters = tuple(f.get("Pattern", "") for f in ((criteria or {}).get("Filters") or []))
        concurrency = (m.get("ScalingConfig") or {}).get("MaximumConcurrency")
        return cls(
            uuid=m["UUID"], source_arn=source, function_arn=function_arn,
            invoke_name=f"{name}:{qualifier}" if qualifier and qualifier != "$LATEST" else name,
            state=m.get("State", "Enabled"),
            batch_size=int(m.get("BatchSize") or DEFAULT_BATCH_SIZE),
            batching_window_s=float(m.get("MaximumBatchingWindowInSeconds") or 0),
            maximum_concurrency=int(concurrency) if concurrency is not None else None,
            report_item_failures="ReportBatchItemFailures" in (m.get("FunctionResponseTypes") or []),
            filter_patterns=filters)

    def same_work(self, other: "SqsMappingConfig") -> bool:
        return replace(self, state="") == replace(other, state="")
