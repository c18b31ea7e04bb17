"""SQS's errors. SQS speaks JSON 1.0 but its model is `awsQueryCompatible`: each error also names
the code of the old query protocol in the `x-amzn-query-error: <code>;Sender` header, and SDKs
show that one (botocore's parser: `Error.Code` is the query code, `QueryErrorCode` the JSON one).
The pairs are those of SQS's query model (the `error.code` traits; LocalStack keeps a copy in
aws/data/sqs-query) and of AWS's recorded answers (LocalStack's tests/aws/services/sqs snapshots).
"""
from __future__ import annotations

from kinesim.protocol.errors import AwsError

# JSON error code -> (query error code, HTTP status)
QUERY_CODES: dict[str, tuple[str, int]] = {
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400),
    "QueueNameExists": ("QueueAlreadyExists", 400),
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", 400),
    "InvalidParameterValueException": ("InvalidParameterValue", 400),
    "MissingRequiredParameterException": ("MissingParameter", 400),
    "InvalidAttributeName": ("InvalidAttributeName", 400),
    "InvalidAttributeValue": ("InvalidAttributeValue", 400),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", 400),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400),
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", 403),
    "InvalidAddress": ("InvalidAddress", 404),
    "InvalidMessageContents": ("InvalidMessageContents", 400),
    "OverLimit": ("OverLimit", 403),
    "ResourceNotFoundException": ("ResourceNotFoundException", 404),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400),
}


class SqsError(AwsError):
    """An SQS error: its JSON code (`code`), its query code (`query_error`, sent as the
    `x-amzn-query-error` header) and AWS's namespace for `__type`."""
    namespace = "com.amazonaws.sqs"

    def __init__(self, code: str, message: str | None = None):
        query_code, status = QUERY_CODES[code]
        super().__init__(code, message, status)
        self.query_error = f"{query_code};Sender"


def queue_does_not_exist() -> SqsError:
    return SqsError("QueueDoesNotExist", "The specified queue does not exist.")


def invalid_parameter(message: str) -> SqsError:
    return SqsError("InvalidParameterValueException", message)


def invalid_value(parameter: str, value: object, reason: str) -> SqsError:
    return invalid_parameter(f"Value {value} for parameter {parameter} is invalid. Reason: {reason}")


def missing_parameter(name: str) -> SqsError:
    return SqsError("MissingRequiredParameterException", f"The request must contain the parameter {name}.")


def unknown_attribute(name: str) -> SqsError:
    return SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")


def invalid_attribute_value(name: str, reason: str | None = None) -> SqsError:
    text = f"Invalid value for the parameter {name}."
    return SqsError("InvalidAttributeValue", text[:-1] + f". Reason: {reason}" if reason else text)
