"""Messages one service sends to another by ARN, inside the server: the OnFailure destinations of
event source mappings, SNS subscriptions. A service that can receive registers a sender for the
service name of its ARNs (`arn:aws:<service>:...`); the senders never see each other's internals.

A sender is `send(arn, message, attributes, trace_header)`: `message` the bytes as the receiving API
would get them (an SQS message body, an SNS message, a Firehose record), `attributes` the message
attributes in the receiving API's request shape or None, `trace_header` the X-Ray trace header
(`X-Amzn-Trace-Id`) of the request the message comes from, or None: what the receiving service
would have read from that header, and what Lambda's recursive loop detection follows. It raises
AwsError when the target cannot take the message (most often ResourceNotFoundException / the
service's own not-found error).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from .protocol.errors import AwsError

Sender = Callable[[str, bytes, "dict[str, Any] | None", "str | None"], None]


def arn_service(arn: str) -> str | None:
    """The service part of an ARN (`sqs` of `arn:aws:sqs:us-east-1:123:q`), or None."""
    parts = arn.split(":", 5)
    return parts[2] if len(parts) == 6 and parts[0] == "arn" and parts[1].startswith("aws") else None


class Destinations:
    def __init__(self) -> None:
        self._senders: dict[str, Sender] = {}
        self._lock = threading.Lock()

    def register(self, service: str, send: Sender) -> None:
        with self._lock:
            self._senders[service] = send

    def can_send(self, arn: str) -> bool:
        return arn_service(arn) in self._senders

    def send(self, arn: str, message: bytes, attributes: dict[str, Any] | None = None,
             trace_header: str | None = None) -> None:
        send = self._senders.get(arn_service(arn) or "")
        if send is None:
            raise AwsError("InvalidParameterValueException", f"kinesim cannot deliver messages to {arn}", 400)
        send(arn, message, attributes, trace_header)
