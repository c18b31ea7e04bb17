"""Notifications on their way: a durable outbox and the thread that empties it.

S3 delivers event notifications at least once. kinesim records each one (one file per
destination and message, written to a temporary name and renamed into place) before the write
that caused it is answered, so a `kill -9` after the 200 loses nothing: the dispatcher delivers
what it finds at start-up, then deletes it. A crash between a delivery and the deletion sends that
message again, which "at least once" allows.

A delivery the destination refuses for good (the queue, topic or function is gone: a 4xx) is
dropped with a warning, as S3 drops events for a destination that no longer exists; any other
failure is retried with a growing pause (at most `MAX_RETRY_DELAY`).

`KINESIM_S3_NOTIFICATION_DELAY` (seconds, default 0) holds each message back that long after its
write, as S3's own delivery takes "seconds, sometimes a minute or longer" (S3 user guide): for
consumers that must cope with late events, and for tests that need a message still in the outbox.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..protocol.errors import AwsError

log = logging.getLogger("kinesim.s3.notifications")

MAX_RETRY_DELAY = 30.0
FIRST_RETRY_DELAY = 0.2


def delivery_delay() -> float:
    try:
        return max(0.0, float(os.environ.get("KINESIM_S3_NOTIFICATION_DELAY") or 0))
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class Delivery:
    """One message for one destination."""
    arn: str
    message: str
    attributes: dict[str, Any] | None = None  # e.g. SNS's Subject
    trace_header: str | None = None  # the X-Amzn-Trace-Id of the write that caused it


Send = Callable[[Delivery], None]


class Outbox:
    """Pending deliveries, one JSON file each under `directory`, named so that names sort in the
    order they were added."""

    def __init__(self, directory: str):
        self.directory = directory
        self._tmp = os.path.join(directory, ".tmp")
        os.makedirs(self._tmp, exist_ok=True)
        for name in os.listdir(self._tmp):  # half-written by a killed server: never acknowledged
            try:
                os.unlink(os.path.join(self._tmp, name))
            except OSError:
                pass
        self._counter = itertools.count()

    def add(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            doc = {"arn": delivery.arn, "message": delivery.message, "attributes": delivery.attributes,
                   "trace_header": delivery.trace_header}
            fd, tmp = tempfile.mkstemp(dir=self._tmp, suffix=".json")
            with os.fdopen(fd, "wb") as f:
                f.write(json.dumps(doc, separators=(",", ":")).encode())
            name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._counter):010d}.json"
            os.replace(tmp, os.path.join(self.directory, name))

    def pending(self) -> list[str]:
        return sorted(n for n in os.listdir(self.directory) if n.endswith(".json"))

    @staticmethod
    def added_at(name: str) -> float:
        """When the delivery `name` was added (epoch seconds)."""
        return int(name.split("-", 1)[0]) / 1e9

    def load(self, name: str) -> Delivery | None:
        try:
            with open(os.path.join(self.directory, name), "rb") as f:
                doc = json.loads(f.read())
            return Delivery(doc["arn"], doc["message"], doc.get("attributes"), doc.get("trace_header"))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            log.warning("dropping unreadable S3 notification %s", name)
            self.remove(name)
            return None

    def remove(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.directory, name))
        except FileNotFoundError:
            pass


class Dispatcher:
    """A thread that delivers the outbox's messages in order, waking when one is added."""

    def __init__(self, outbox: Outbox, send: Send, delay: float = 0.0):
        self.outbox, self.send, self.delay = outbox, send, delay
        self._wake = threading.Condition()
        self._pending = True  # look at what a previous run left
        self._closed = False
        self._failures: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, name="s3-notifications", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def notify(self) -> None:
        with self._wake:
            self._pending = True
            self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        delay = None
        while True:
            with self._wake:
                if not self._pending and not self._closed:
                    self._wake.wait(timeout=delay)
                if self._closed:
                    return
                self._pending = False
            delay = self._deliver_pending()

    def _deliver_pending(self) -> float | None:
        """Deliver everything pending; the pause before the next try of what failed, or None."""
        retry = None
        for name in self.outbox.pending():
            if self._closed:
                return None
            wait = self.outbox.added_at(name) + self.delay - time.time() if self.delay else 0
            if wait > 0:
                retry = wait if retry is None else min(retry, wait)
                continue
            delivery = self.outbox.load(name)
            if delivery is None:
                continue
            try:
                self.send(delivery)
            except AwsError as err:
                if 400 <= err.status < 500:
                    log.warning("S3 notification to %s dropped: %s: %s", delivery.arn, err.code, err.message)
                else:
                    retry = self._failed(name, delivery, err, retry)
                    continue
            except Exception as err:  # noqa: BLE001 - the destination's own failure: try again later
                retry = self._failed(name, delivery, err, retry)
                continue
            self._failures.pop(name, None)
            self.outbox.remove(name)
        return retry

    def _failed(self, name: str, delivery: Delivery, err: Exception, retry: float | None) -> float:
        count = self._failures[name] = self._failures.get(name, 0) + 1
        pause = min(MAX_RETRY_DELAY, FIRST_RETRY_DELAY * 2 ** (count - 1))
        log.warning("S3 notification to %s failed (try %d), retried in %.1f s: %s", delivery.arn, count, pause, err)
        return pause if retry is None else min(retry, pause)
