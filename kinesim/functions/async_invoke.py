"""Asynchronous invocations (InvocationType "Event"): accepted at once (202), run in the
background, and retried as AWS documents for a function error: two more attempts, the first about
one minute after the failure, the second about two minutes after that, under the same request id.

AWS keeps its event queue durably; this one lives in memory, so events still queued when the
server stops are lost (a known difference from AWS).
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

from ..protocol.errors import AwsError

if TYPE_CHECKING:
    from .runtime import Invocation

log = logging.getLogger("kinesim.functions.async")

RETRY_DELAYS_S = (60.0, 120.0)


class AsyncInvoker:
    def __init__(self, invoke: Callable[[str, bytes, str], "Invocation"], workers: int = 8,
                 retry_delays_s: tuple[float, ...] = RETRY_DELAYS_S):
        self._invoke = invoke
        self._retry_delays = retry_delays_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kinesim-event-invoke")
        self._timers: set[threading.Timer] = set()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, function_name: str, payload: bytes, request_id: str) -> None:
        self._submit(function_name, payload, request_id, 0)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            timers, self._timers = self._timers, set()
        for timer in timers:
            timer.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _submit(self, function_name: str, payload: bytes, request_id: str, attempt: int) -> None:
        with self._lock:
            if self._closed:
                return
            self._pool.submit(self._run, function_name, payload, request_id, attempt)

    def _run(self, function_name: str, payload: bytes, request_id: str, attempt: int) -> None:
        try:
            result = self._invoke(function_name, payload, request_id)
            failed = result.function_error is not None
        except AwsError as err:
            if err.code == "ResourceNotFoundException":  # deleted since: nothing left to run
                log.info("event for %s dropped: %s", function_name, err.message)
                return
            log.warning("event invocation of %s failed: %s", function_name, err.message)
            failed = True
        except Exception:
            log.exception("event invocation of %s failed", function_name)
            failed = True
        if failed and attempt < len(self._retry_delays):
            self._schedule(function_name, payload, request_id, attempt + 1, self._retry_delays[attempt])
        elif failed:
            log.info("event %s for %s failed %d times: discarded", request_id, function_name, attempt + 1)

    def _schedule(self, function_name: str, payload: bytes, request_id: str, attempt: int, delay: float) -> None:
        def fire() -> None:
            with self._lock:
                self._timers.discard(timer)
            self._submit(function_name, payload, request_id, attempt)

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        with self._lock:
            if self._closed:
                return
            self._timers.add(timer)
        timer.start()
