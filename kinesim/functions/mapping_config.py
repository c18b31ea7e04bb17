"""An event source mapping's configuration as its poller reads it: the stored
EventSourceMappingConfiguration with AWS's defaults filled in, checked once here so that a poller
never meets a bad filter pattern or destination."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..protocol.errors import AwsError
from .consumer_source import is_consumer_arn
from .failure_destinations import check_destination
from .filters import FilterCriteria


def invalid_parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterValueException", message)


@dataclass(frozen=True)
class MappingConfig:
    """What a poller needs from an EventSourceMappingConfiguration, with AWS's defaults."""
    uuid: str
    source_arn: str
    stream_name: str
    function_arn: str
    invoke_name: str          # what invoke() is called with: the name, with a qualifier if any
    executed_version: str
    state: str
    batch_size: int
    batching_window_s: float
    lanes: int
    starting_position: str
    starting_timestamp: float | None
    max_retries: int          # -1: until the records expire
    max_record_age_s: int     # -1: until the records expire
    bisect: bool
    tumbling_window_s: int
    report_item_failures: bool
    on_failure: str | None
    filter_patterns: tuple[str, ...]
    consumer_arn: str | None = None  # an enhanced fan-out source: the stream is read through it

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> "MappingConfig":
        source = m["EventSourceArn"]
        if ":stream/" not in source or not source.startswith("arn:aws"):
            raise invalid_parameter(f"Unsupported event source for a Kinesis poller: {source}")
        function_arn = m["FunctionArn"]
        invoke_name, executed_version = function_target(function_arn)
        position, timestamp = starting_position(m)
        destination = ((m.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination:
            check_destination(destination)
        filters = tuple(f.get("Pattern", "") for f in ((m.get("FilterCriteria") or {}).get("Filters") or []))
        FilterCriteria.parse(m.get("FilterCriteria"))  # refuse a bad pattern now, not in the poller
        return cls(
            uuid=m["UUID"], source_arn=source, stream_name=source.split(":stream/", 1)[1].split("/", 1)[0],
            function_arn=function_arn, invoke_name=invoke_name, executed_version=executed_version,
            state=m.get("State", "Enabled"),
            batch_size=int(m.get("BatchSize") or 100),
            batching_window_s=float(m.get("MaximumBatchingWindowInSeconds") or 0),
            lanes=max(1, int(m.get("ParallelizationFactor") or 1)),
            starting_position=position, starting_timestamp=timestamp,
            max_retries=_int(m.get("MaximumRetryAttempts"), -1),
            max_record_age_s=_int(m.get("MaximumRecordAgeInSeconds"), -1),
            bisect=bool(m.get("BisectBatchOnFunctionError")),
            tumbling_window_s=int(m.get("TumblingWindowInSeconds") or 0),
            report_item_failures="ReportBatchItemFailures" in (m.get("FunctionResponseTypes") or []),
            on_failure=destination or None, filter_patterns=filters,
            consumer_arn=source if is_consumer_arn(source) else None)

    def same_work(self, other: "MappingConfig") -> bool:
        """Whether a poller configured by `other` does what this configuration asks (State aside)."""
        return replace(self, state="") == replace(other, state="")


def function_target(function_arn: str) -> tuple[str, str]:
    """(what invoke() is called with: the name, with a qualifier if any; the version that runs
    unless an alias says otherwise) of a mapping's FunctionArn."""
    parts = function_arn.split(":")
    name = parts[6] if len(parts) > 6 else function_arn
    qualifier = parts[7] if len(parts) > 7 else None
    return (f"{name}:{qualifier}" if qualifier and qualifier != "$LATEST" else name,
            qualifier if qualifier and qualifier.isdigit() else "$LATEST")


def starting_position(m: dict[str, Any]) -> tuple[str, float | None]:
    """A mapping's StartingPosition (LATEST when none) and its timestamp in epoch seconds."""
    position = m.get("StartingPosition") or "LATEST"
    timestamp = m.get("StartingPositionTimestamp")
    if isinstance(timestamp, datetime):
        timestamp = timestamp.timestamp()
    if position == "AT_TIMESTAMP" and timestamp is None:
        raise invalid_parameter("StartingPositionTimestamp is required when StartingPosition is AT_TIMESTAMP.")
    return position, timestamp


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)
