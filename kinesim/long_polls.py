"""Long polls waiting now, across the services that have them (SQS ReceiveMessage, Kinesis
ReceiveQueueRecords): each holds one of the server's request threads while it waits, so together
they are capped (`--max-long-polls`), leaving threads for short calls. Past the cap a receive
answers at once with what the queue has: an empty answer is one a long poll may give."""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class LongPolls:
    def __init__(self, limit: int):
        self.limit = limit
        self.count = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def waiting(self, wanted: bool = True) -> Iterator[bool]:
        """Whether this receive may wait (`wanted` and under the cap), for the `with` block."""
        with self._lock:
            allowed = wanted and self.count < self.limit
            self.count += allowed
        try:
            yield allowed
        finally:
            if allowed:
                with self._lock:
                    self.count -= 1
