"""Reserved concurrency at invocation time: a function's executions in flight (every version and
alias together, as AWS counts them) against its `ReservedConcurrentExecutions`.

An invocation beyond the reserved number is refused before it reaches an execution environment
with AWS's TooManyRequestsException (HTTP 429, Reason
ReservedFunctionConcurrentInvocationLimitExceeded, message "Rate Exceeded.": LocalStack's
recordings of AWS, test_lambda.py::TestLambdaConcurrency). Reserved 0 refuses every invocation
("throttles all invocations", the Lambda guide). What the caller does with the refusal is its own
rule: a synchronous Invoke answers it; asynchronous events (async_invoke.py) and event source
mappings (lane.py, sqs_poller.py) keep the event and try again later.

A function without reserved concurrency is not refused here: it draws on the account's
unreserved pool, which kinesim does not exhaust (the runtime's worker pool makes a caller wait for
a free environment instead, runtime.py).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..protocol.errors import AwsError

THROTTLE_REASON = "ReservedFunctionConcurrentInvocationLimitExceeded"


def throttled() -> AwsError:
    return AwsError("TooManyRequestsException", "Rate Exceeded.", 429, fields={"Reason": THROTTLE_REASON})


class ConcurrencyGate:
    """Executions in flight per function name; `on_throttle(function_name)` is told of each refusal."""

    def __init__(self, on_throttle: Callable[[str], None] = lambda function_name: None) -> None:
        self._on_throttle = on_throttle
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}

    @contextmanager
    def execution(self, function_name: str, reserved: int | None) -> Iterator[None]:
        """Hold one of the function's executions for the body; TooManyRequestsException when
        `reserved` (None: not reserved) are already in flight."""
        with self._lock:
            running = self._running.get(function_name, 0)
            refused = reserved is not None and running >= reserved
            if not refused:
                self._running[function_name] = running + 1
        if refused:
            self._on_throttle(function_name)
            raise throttled()
        try:
            yield
        finally:
            with self._lock:
                left = self._running[function_name] - 1
                if left:
                    self._running[function_name] = left
                else:
                    del self._running[function_name]

    def running(self, function_name: str) -> int:
        with self._lock:
            return self._running.get(function_name, 0)
