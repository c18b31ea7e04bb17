"""AWS errors as values: every service raises these; the edge turns them into AWS's envelope."""


class AwsError(Exception):
    """An error AWS would return: its `__type` code, message and HTTP status.

    `message=None` means AWS sends no message member at all (e.g. UnknownOperationException).
    `fields`: other members of the error's body the model describes (Lambda's TooManyRequestsException
    carries a `Reason`).
    """

    def __init__(self, code: str, message: str | None = None, status: int = 400,
                 fields: dict[str, str] | None = None):
        super().__init__(message or code)
        self.code = code
        self.message = message
        self.status = status
        self.fields = fields or {}


def validation_error(message: str) -> AwsError:
    return AwsError("ValidationException", message)


def serialization_error(message: str | None = None) -> AwsError:
    return AwsError("SerializationException", message)


def invalid_argument(message: str) -> AwsError:
    return AwsError("InvalidArgumentException", message)


def not_found(message: str) -> AwsError:
    return AwsError("ResourceNotFoundException", message)


def in_use(message: str) -> AwsError:
    return AwsError("ResourceInUseException", message)


def limit_exceeded(message: str) -> AwsError:
    return AwsError("LimitExceededException", message)


def expired_iterator(message: str) -> AwsError:
    return AwsError("ExpiredIteratorException", message)


def throughput_exceeded(message: str) -> AwsError:
    return AwsError("ProvisionedThroughputExceededException", message)
