"""Keeping a request from waiting in granian's queue while threads are free to start.

granian 2.8's WSGI thread pool starts a thread when a request is queued and fewer threads are
idle than requests wait (`BlockingRunnerPool::run` in its src/blocking.rs, since its fix for
granian#873). A thread counts itself idle from before it takes a request until just after, so a
request queued in that instant can see an idle thread that is in fact taking another request:
no thread is started for it. With every other thread held (long polls, subscriptions, slow
uploads, synchronous invokes), it then waits until a held request ends (20 s for a long poll, 5
minutes for a subscription) or until another request arrives: each arrival starts one thread, and
that thread serves the oldest request queued. The held-connections test saw it once: a
ListStreams answered after 19.8 s beside 1,000 long polls and 700 subscriptions.

So while clients are calling (for `ACTIVE_S` after the last request that arrived), the keeper
sends the server a request of its own every `EVERY_S`: its arrival starts the thread a stranded
request lacks, and its own answer (an empty 204 that nothing else sees) costs next to nothing.
A stranded request waits about a second instead of a long poll's 20.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Callable, Iterable

log = logging.getLogger("kinesim.pool")

PATH = "/_kinesim/pool-keeper"
EVERY_S = 1.0
ACTIVE_S = 10.0
MAX_WAITING = 8        # its own requests unanswered at once (each waits, stranded, for the next)
ANSWER_WAIT_S = 120.0


class PoolKeeper:
    def __init__(self, address: tuple[str, int], authority: str, every_s: float = EVERY_S,
                 active_s: float = ACTIVE_S, clock: Callable[[], float] = time.monotonic):
        """`address` to connect to; `authority` (`host:port`) for the Host header."""
        self.address = address
        self.request = f"GET {PATH} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode()
        self.every_s, self.active_s, self.clock = every_s, active_s, clock
        self.last_arrival = float("-inf")   # set by every request but the keeper's own (no lock: a float)
        self.answered = 0
        self._waiting = threading.BoundedSemaphore(MAX_WAITING)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kinesim-pool-keeper", daemon=True)

    def start(self) -> "PoolKeeper":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def arrived(self) -> None:
        self.last_arrival = self.clock()

    def active(self) -> bool:
        return self.clock() - self.last_arrival < self.active_s

    def _run(self) -> None:
        while not self.stopped.wait(self.every_s):
            self.tick()

    def tick(self) -> bool:
        """Send one request of its own if clients are calling and fewer than MAX_WAITING of its
        own wait for their answers; whether it sent one."""
        if not self.active() or not self._waiting.acquire(blocking=False):
            return False
        threading.Thread(target=self._send, name="kinesim-pool-keeper-request", daemon=True).start()
        return True

    def _send(self) -> None:
        try:
            with socket.create_connection(self.address, timeout=ANSWER_WAIT_S) as sock:
                sock.sendall(self.request)
                while sock.recv(4096):  # until the server closes: answered
                    pass
            self.answered += 1
        except OSError as err:  # stopping, or the answer took too long: the next one goes on
            log.debug("pool keeper request: %s", err)
        finally:
            self._waiting.release()

    @staticmethod
    def answer(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        """The WSGI answer to the keeper's request: it only had to arrive."""
        start_response("204 No Content", [])
        return []
