"""Asynchronous invocations (Invoke with InvocationType "Event", S3 notifications, SNS
subscriptions): accepted at once, kept on disk until done (async_event_store), run in the
background by a fixed pool of threads, retried and recorded as AWS documents ("How Lambda handles
errors and retries with asynchronous invocation"):

- A function error (the handler raised, timed out, crashed) is retried MaximumRetryAttempts times
  (default 2): about one minute after the first attempt, two minutes after the second. Every
  attempt has the event's request id.
- A throttle or a system error (the function could not be run: TooManyRequestsException, a
  function not ready, a 5xx, a worker that could not start) is not an attempt: the event goes back
  to the queue with an exponential wait, from 1 second up to 5 minutes, until it is too old.
- MaximumEventAgeInSeconds (default 6 h) counts from when the event was first accepted. An event
  that is too old is given up with the condition EventAgeExceeded, and so is one whose next retry
  would come too late: AWS does not wait for it (LocalStack's recording of AWS, test_maxeventage:
  with MaximumEventAgeInSeconds 60 the record arrives right after the first failure, with
  approximateInvokeCount 1).
- When done, the invocation record goes to the OnSuccess or OnFailure destination of the
  configuration of the qualifier invoked, and a given-up event to the function's dead-letter queue
  (async_destinations).
- An event recursive loop detection stops (recursion.py) is given up at once, to the dead-letter
  queue or OnFailure destination as AWS documents ("If a function is invoked by the same
  triggering event more than 16 times, Lambda will stop the next invocation and send the event to
  a Dead-Letter Queue or on-failure destination, if configured", AWS's notice of June 2023): a
  retry would carry the same chain and be stopped too. AWS documents no record for it; kinesim's
  says RetriesExhausted, with the RecursiveInvocationException as the response. Records and
  dead letters carry the event's trace header, so a destination that triggers the function again
  is stopped as well ("this loop will also be terminated", the Lambda guide).

The pool has `WORKERS` threads, whatever the queue's length: queued events hold no thread. A free
thread takes the due event of the function with the fewest invocations in flight, so one slow
function's backlog does not starve the others.

Events are kept until done, so a `kill -9` loses none; the one running when the server died runs
again (AWS, too, may deliver an event more than once). A clean stop leaves the events being run
as they were: their attempt is not counted, their answer not recorded.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import orjson

from ..protocol.errors import AwsError
from ..store import Store
from .async_event_store import Attempt, EventQueueStore, PendingEvent
from .events import iso_millis

if TYPE_CHECKING:
    from .async_destinations import RecordSender
    from .runtime import Invocation

log = logging.getLogger("kinesim.functions.async")

# Module tunables (tests shorten them). AWS's waits before the 2nd and 3rd attempts.
RETRY_DELAYS_S = (60.0, 120.0)
# The wait after a throttle or system error: doubles from the first to the last.
THROTTLE_BACKOFF_S = (1.0, 300.0)
# How long one second of MaximumEventAgeInSeconds lasts (1.0: AWS's).
AGE_SECOND_S = 1.0
WORKERS = 8
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_AGE_S = 21600

# Stopped by recursive loop detection (recursion.py): given up at once.
RECURSIVE_INVOCATION = "RecursiveInvocationException"
# AwsError codes from an invocation that mean "not run now, try again later".
_THROTTLES = frozenset(("TooManyRequestsException", "ResourceConflictException", "ServiceException",
                        "EC2ThrottledException", "ResourceNotReadyException"))


@dataclass
class AsyncSettings:
    """How the events of one function reference are handled (its event invoke configuration)."""
    function_name: str
    function_arn: str            # qualified: ...:function:name:$LATEST / :alias / :version
    max_retries: int = DEFAULT_MAX_RETRIES
    max_age_s: int = DEFAULT_MAX_AGE_S
    on_success: str | None = None
    on_failure: str | None = None
    dead_letter: str | None = None


class AsyncInvoker:
    def __init__(self, invoke: Callable[[str, bytes, str, str | None], "Invocation"], store: Store | None = None,
                 settings_for: Callable[[str], AsyncSettings] | None = None,
                 sender: "RecordSender | None" = None, workers: int | None = None,
                 retry_delays_s: tuple[float, ...] | None = None, start: bool = True):
        """`invoke(reference, payload, request_id, trace_header)` runs the function; `settings_for(reference)` gives
        its configuration (raising ResourceNotFoundException once the function is gone). Without a
        store, events live in a throwaway one. With `start=False`, nothing runs until `start()`
        (the server starts it once every destination service is there)."""
        self._invoke = invoke
        self._own_store = store is None
        self._queue = EventQueueStore(store or Store(None))
        self._settings_for = settings_for or self._default_settings
        self._sender = sender
        self._workers = workers or WORKERS
        self._retry_delays = retry_delays_s
        self._cond = threading.Condition()
        self._due: dict[str, list[tuple[float, int, str]]] = {}  # function reference -> heap of (due, seq, id)
        self._events: dict[str, PendingEvent] = {}
        self._in_flight: dict[str, int] = {}
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False
        for event in sorted(self._queue.load(), key=lambda e: e.accepted):
            self._push(event)
        if self._events:
            log.info("%d asynchronous invocation(s) accepted before the restart resume", len(self._events))
        if start:
            self.start()

    # the interface

    def submit(self, function_name: str, payload: bytes, request_id: str, trace_header: str | None = None) -> None:
        """Accept an event for `function_name` (a name, name:qualifier or ARN): stored before this
        returns, run in the background. `trace_header`: the X-Ray trace header of the request that
        caused it (an S3 write, an SNS publish, an Invoke), which places it in its chain."""
        now = time.time()
        event = PendingEvent(str(uuid.uuid4()), function_name, request_id, now, now, trace_header=trace_header)
        self._queue.save(event, payload)
        with self._cond:
            self._push(event)
            self._cond.notify()

    def start(self) -> None:
        with self._cond:
            if self._threads or self._closed:
                return
            for i in range(self._workers):
                thread = threading.Thread(target=self._work, name=f"kinesim-event-invoke-{i}", daemon=True)
                self._threads.append(thread)
                thread.start()

    def pending(self) -> int:
        """Events accepted and not done yet."""
        with self._cond:
            return len(self._events)

    def close(self) -> None:
        """Stop taking events; those not done stay stored for the next start."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._own_store:
            self._queue.store.close()

    # the queue

    def _push(self, event: PendingEvent) -> None:
        self._events[event.id] = event
        heapq.heappush(self._due.setdefault(event.function, []), (event.due, next(self._seq), event.id))

    def _take(self) -> PendingEvent | None:
        """The next due event (blocking until there is one), or None once closed."""
        with self._cond:
            while not self._closed:
                now, best, wait = time.time(), None, None
                for function, heap in self._due.items():
                    due = heap[0][0]
                    if due <= now:
                        key = (self._in_flight.get(function, 0), due)
                        if best is None or key < best[0]:
                            best = (key, function)
                    else:
                        wait = due - now if wait is None else min(wait, due - now)
                if best is not None:
                    function = best[1]
                    _, _, event_id = heapq.heappop(self._due[function])
                    if not self._due[function]:
                        del self._due[function]
                    self._in_flight[function] = self._in_flight.get(function, 0) + 1
                    return self._events[event_id]
                self._cond.wait(wait)
            return None

    def _release(self, event: PendingEvent, done: bool) -> None:
        with self._cond:
            left = self._in_flight.get(event.function, 1) - 1
            if left:
                self._in_flight[event.function] = left
            else:
                self._in_flight.pop(event.function, None)
            if done:
                self._events.pop(event.id, None)
            elif not self._closed:
                heapq.heappush(self._due.setdefault(event.function, []), (event.due, next(self._seq), event.id))
            self._cond.notify()

    def _work(self) -> None:
        while True:
            event = self._take()
            if event is None:
                return
            done = False
            try:
                done = self._attempt(event)
            except Exception:  # never lose the thread; the event stays stored and is tried again
                log.exception("asynchronous invocation %s of %s", event.request_id, event.function)
                event.due = time.time() + THROTTLE_BACKOFF_S[1]
            finally:
                self._release(event, done)

    # one attempt

    def _attempt(self, event: PendingEvent) -> bool:
        """Run the event once; True when it is done (and deleted), False when it waits again."""
        body = self._queue.body(event.id)
        if body is None:  # deleted meanwhile
            return True
        payload, event.last = body
        try:
            return self._attempt_with(event, payload)
        finally:
            event.last = None  # on disk; memory holds only what orders the queue

    def _attempt_with(self, event: PendingEvent, payload: bytes) -> bool:
        try:
            settings = self._settings_for(event.function)
        except AwsError as err:
            return self._drop(event, err)
        max_age = settings.max_age_s * AGE_SECOND_S
        if time.time() - event.accepted > max_age:
            return self._finish(event, settings, payload, "EventAgeExceeded", event.last)
        try:
            attempt = _attempt_of(self._invoke(event.function, payload, event.request_id, event.trace_header))
        except AwsError as err:
            if err.code == "ResourceNotFoundException":
                return self._drop(event, err)
            if err.code == RECURSIVE_INVOCATION:
                return self._finish(event, settings, payload, "RetriesExhausted", _refusal(err))
            if err.code in _THROTTLES or err.status == 429 or err.status >= 500:
                return self._back_off(event, settings, payload, f"{err.code}: {err.message}")
            # Refused for a reason retrying cannot change: a failed attempt, answered with the error.
            attempt = _refusal(err)
        except Exception as err:  # the function could not be run at all: a system error
            if self._closed:
                return False
            return self._back_off(event, settings, payload, repr(err))
        if self._closed:  # the server is stopping: this attempt's answer may be a killed worker's
            return False
        event.attempts += 1
        if attempt.function_error is None:
            return self._finish(event, settings, payload, "Success", attempt)
        if event.attempts > settings.max_retries:
            return self._finish(event, settings, payload, "RetriesExhausted", attempt)
        delays = self._retry_delays or RETRY_DELAYS_S
        delay = delays[min(event.attempts - 1, len(delays) - 1)]
        now = time.time()
        if now + delay - event.accepted > max_age:  # the retry would come too late: AWS gives up now
            return self._finish(event, settings, payload, "EventAgeExceeded", attempt)
        event.last, event.due, event.backoff_s = attempt, now + delay, 0.0
        self._queue.save(event, payload)
        return False

    def _back_off(self, event: PendingEvent, settings: AsyncSettings, payload: bytes, why: str) -> bool:
        first, most = THROTTLE_BACKOFF_S
        event.backoff_s = min(most, event.backoff_s * 2 if event.backoff_s else first)
        now = time.time()
        if now + event.backoff_s - event.accepted > settings.max_age_s * AGE_SECOND_S:
            return self._finish(event, settings, payload, "EventAgeExceeded", event.last)
        log.info("asynchronous invocation %s of %s not run (%s): again in %.0f s", event.request_id,
                 event.function, why, event.backoff_s)
        event.due = now + event.backoff_s
        self._queue.save(event, payload)
        return False

    def _drop(self, event: PendingEvent, err: AwsError) -> bool:
        # The function (or its version or alias) was deleted: its queue and configuration went with it.
        log.info("asynchronous invocation %s dropped: %s", event.request_id, err.message)
        self._queue.delete(event.id)
        return True

    def _finish(self, event: PendingEvent, settings: AsyncSettings, payload: bytes, condition: str,
                attempt: Attempt | None) -> bool:
        if condition != "Success":
            log.info("asynchronous invocation %s of %s given up (%s after %d attempt(s))", event.request_id,
                     event.function, condition, event.attempts)
        if self._sender is not None:
            destination = settings.on_success if condition == "Success" else settings.on_failure
            if destination:
                record = invocation_record(event, settings, payload, condition, attempt)
                self._sender.send_record(destination, record, settings.function_name, event.trace_header)
            if condition != "Success" and settings.dead_letter:
                self._sender.send_dead_letter(settings.dead_letter, payload, event.request_id,
                                              _error_message(attempt, condition), event.trace_header)
        self._queue.delete(event.id)
        return True

    def _default_settings(self, function: str) -> AsyncSettings:
        delays = self._retry_delays or RETRY_DELAYS_S
        return AsyncSettings(function, function, max_retries=len(delays))


def _refusal(err: AwsError) -> Attempt:
    """An invocation Lambda refused, as the attempt a record reports: the error as the response."""
    answer = orjson.dumps({"errorType": err.code, "errorMessage": err.message})
    return Attempt(err.status, "$LATEST", "Unhandled", answer)


def _attempt_of(result: "Invocation") -> Attempt:
    return Attempt(200, getattr(result, "executed_version", "$LATEST"), getattr(result, "function_error", None),
                   getattr(result, "payload", b"") or b"")


def _json_or_text(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.decode("utf-8", "replace")


def invocation_record(event: PendingEvent, settings: AsyncSettings, payload: bytes, condition: str,
                      attempt: Attempt | None) -> dict[str, Any]:
    """The record AWS sends to a destination (shape and key order: LocalStack's recordings of AWS,
    test_lambda_destinations.snapshot.json). An event given up before any attempt reached the
    function has no response to report: its record has no responseContext nor responsePayload."""
    record: dict[str, Any] = {
        "version": "1.0",
        "timestamp": iso_millis(time.time()),
        "requestContext": {"requestId": event.request_id, "functionArn": settings.function_arn,
                           "condition": condition, "approximateInvokeCount": event.attempts},
        "requestPayload": _json_or_text(payload),
    }
    if attempt is not None:
        response: dict[str, Any] = {"statusCode": attempt.status_code, "executedVersion": attempt.executed_version}
        if attempt.function_error:
            response["functionError"] = attempt.function_error
        record["responseContext"] = response
        record["responsePayload"] = _json_or_text(attempt.payload)
    return record


def _error_message(attempt: Attempt | None, condition: str) -> str:
    if attempt is not None:
        answer = _json_or_text(attempt.payload)
        if isinstance(answer, dict) and answer.get("errorMessage"):
            return str(answer["errorMessage"])
        if isinstance(answer, dict) and answer.get("errorType"):
            return str(answer["errorType"])
    return "Event age exceeded" if condition == "EventAgeExceeded" else condition
