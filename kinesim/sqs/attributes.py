"""Queue attributes: which exist for which queue type, their defaults and ranges, how a new value
is checked (CreateQueue, SetQueueAttributes) and how AWS words a refusal.

Ranges and defaults: the SetQueueAttributes reference. MaximumMessageSize's default and ceiling
are 1 MiB since AWS raised them in August 2025 (the recorded answers in LocalStack's
test_sqs.snapshot.json show `"MaximumMessageSize": "1048576"` for a new queue).
"""
from __future__ import annotations

import json
import re
from typing import Any

from kinesim.protocol import user_json

from .errors import SqsError, invalid_attribute_value, invalid_parameter, unknown_attribute

MAX_MESSAGE_SIZE = 1024 * 1024

# name -> (default or None: absent unless set, (low, high) for integers or None)
STANDARD: dict[str, tuple[str | None, tuple[int, int] | None]] = {
    "DelaySeconds": ("0", (0, 900)),
    "MaximumMessageSize": (str(MAX_MESSAGE_SIZE), (1024, MAX_MESSAGE_SIZE)),
    "MessageRetentionPeriod": ("345600", (60, 1209600)),
    "ReceiveMessageWaitTimeSeconds": ("0", (0, 20)),
    "VisibilityTimeout": ("30", (0, 43200)),
    "Policy": (None, None),
    "RedrivePolicy": (None, None),
    "RedriveAllowPolicy": (None, None),
    "KmsMasterKeyId": (None, None),
    "KmsDataKeyReusePeriodSeconds": (None, (60, 86400)),
    "SqsManagedSseEnabled": ("true", None),
}
FIFO_ONLY: dict[str, tuple[str | None, tuple[int, int] | None]] = {
    "FifoQueue": ("true", None),
    "ContentBasedDeduplication": ("false", None),
    "DeduplicationScope": ("queue", None),
    "FifoThroughputLimit": ("perQueue", None),
}
# Computed when asked for, never set.
READ_ONLY = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed",
             "ApproximateNumberOfMessagesNotVisible", "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn")
# Set back to these values, they disappear from GetQueueAttributes (LocalStack's DELETE_IF_DEFAULT,
# validated against AWS in test_set_queue_attributes_default_values).
_GONE_AT_DEFAULT = {"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"}
_ENUMS = {"DeduplicationScope": ("messageGroup", "queue"), "FifoThroughputLimit": ("perQueue", "perMessageGroupId")}
_BOOLEANS = ("SqsManagedSseEnabled", "ContentBasedDeduplication", "FifoQueue")
_ARN = re.compile(r"arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?")


def defaults(fifo: bool) -> dict[str, str]:
    table = {**STANDARD, **FIFO_ONLY} if fifo else STANDARD
    return {name: default for name, (default, _) in table.items() if default is not None}


def settable(fifo: bool) -> dict[str, tuple[str | None, tuple[int, int] | None]]:
    return {**STANDARD, **FIFO_ONLY} if fifo else STANDARD


def check_names_for_create(attributes: dict[str, str], fifo: bool) -> None:
    """CreateQueue's own checks of a standard queue's attribute names (AWS's recorded answers in
    test_create_standard_queue_with_fifo_attribute_raises_error)."""
    if fifo:
        return
    for name in attributes:
        if name in ("DeduplicationScope", "FifoThroughputLimit"):
            raise SqsError("InvalidAttributeName", f"You can specify the {name} only when FifoQueue is set to true.")


def normalise(attributes: dict[str, str], fifo: bool, creating: bool) -> dict[str, str]:
    """The attributes checked and in their stored form ("True" -> "true", policies as given)."""
    table = settable(fifo)
    out: dict[str, str] = {}
    for name, value in attributes.items():
        if name == "FifoQueue" and fifo and not creating:
            # A FIFO queue stays FIFO (recorded: test_set_unsupported_attribute_fifo).
            if str(value).lower() != "true":
                raise invalid_attribute_value("FifoQueue", "Modifying queue type is not supported.")
        if name not in table:
            raise unknown_attribute(name)
        out[name] = _checked(name, value, table[name][1])
    if fifo and creating and out.get("FifoQueue", "true") != "true":
        raise invalid_attribute_value("FifoQueue")
    if "RedrivePolicy" in out and out["RedrivePolicy"]:
        out["RedrivePolicy"] = json.dumps(redrive_policy(out["RedrivePolicy"]), separators=(",", ":"))
    return out


def apply(current: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """`current` with `changes`; values set back to their "nothing" default disappear."""
    merged = dict(current)
    for name, value in changes.items():
        if _GONE_AT_DEFAULT.get(name) == value or (name in ("RedrivePolicy", "Policy", "RedriveAllowPolicy")
                                                   and value == ""):
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def _checked(name: str, value: Any, bounds: tuple[int, int] | None) -> str:
    text = str(value)
    if bounds is not None:
        try:
            number = int(text)
        except ValueError:
            raise invalid_attribute_value(name) from None
        if not bounds[0] <= number <= bounds[1]:
            raise invalid_attribute_value(name)
        return str(number)
    if name in _BOOLEANS:
        if text.lower() not in ("true", "false"):
            raise invalid_attribute_value(name)
        return text.lower()
    if name in _ENUMS and text not in _ENUMS[name]:
        raise invalid_attribute_value(name)
    if name == "Policy" and text and not isinstance(_document(text), dict):
        raise invalid_attribute_value(name)
    if name == "RedriveAllowPolicy" and text and not isinstance(_document(text), dict):
        # AWS's reason for a document that is not a JSON object (as an AWS-parity SQS emulator
        # words it; AWS's SQS documentation names the format: redrivePermission, sourceQueueArns).
        raise invalid_attribute_value(name, "Amazon SQS can't create the redrive allow policy, as it’s in an "
                                            "unsupported format.")
    return text


def _document(text: str) -> Any:
    """A policy's JSON, or None when it is none (malformed, or nested past what a JSON reader
    takes: AWS answers both alike)."""
    try:
        return user_json.loads(text)
    except user_json.InvalidJson:
        return None


def redrive_policy(text: str) -> dict[str, Any]:
    """A RedrivePolicy's JSON as {deadLetterTargetArn, maxReceiveCount (int)}; AWS's texts
    (LocalStack's provider, validated against AWS)."""
    policy = _document(text)
    if not isinstance(policy, dict):
        # A real AWS answer (InvalidAttributeValue, quoted in a user's report of a failed
        # SetQueueAttributes): "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy
        # is not a valid JSON map."
        raise invalid_attribute_value("RedrivePolicy", "Redrive policy is not a valid JSON map.")
    if "deadLetterTargetArn" not in policy:
        raise invalid_parameter("The required parameter 'deadLetterTargetArn' is missing")
    if "maxReceiveCount" not in policy:
        raise invalid_parameter("The required parameter 'maxReceiveCount' is missing")
    arn, count = policy["deadLetterTargetArn"], policy["maxReceiveCount"]
    try:
        number = int(count)
    except (TypeError, ValueError):
        number = 0
    if isinstance(count, bool) or not 1 <= number <= 1000:
        raise invalid_parameter(f"Value {text} for parameter RedrivePolicy is invalid. Reason: Invalid value for "
                                f"maxReceiveCount: {count}, valid values are from 1 to 1000 both inclusive.")
    if not isinstance(arn, str) or not _ARN.fullmatch(arn):
        raise invalid_parameter(f"Value {text} for parameter RedrivePolicy is invalid. Reason: Invalid value for "
                                f"deadLetterTargetArn.")
    return {"deadLetterTargetArn": arn, "maxReceiveCount": number}


def requested_names(names: list[str], fifo: bool) -> list[str]:
    """GetQueueAttributes' AttributeNames expanded ("All"), checked: an unknown name is an error."""
    known = list(settable(fifo)) + list(READ_ONLY)
    if "All" in names:
        return known
    for name in names:
        if name not in known:
            raise unknown_attribute(name)
    return list(dict.fromkeys(names))
