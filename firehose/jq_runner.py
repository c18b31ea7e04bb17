"""A small pool of jq worker processes (`jq_worker`): how the server evaluates MetadataExtraction
queries without running a client's jq in its own interpreter.

Measured before this pool, with libjq inside the server: `def f: f; f` and `last(range(1e12))`
looped for ever holding the interpreter (CreateDeliveryStream alone froze the whole server), and
`[range(1e12)]` and `def f: [f]; f` allocated until libjq aborted the server. AWS runs these
queries outside Firehose too (its JQProcessing.Duration metric is "the time it took to execute
JQ expression in the JQ Lambda function", Firehose's CloudWatch metrics page).

Interface:
- ``JqPool()``: at most POOL_SIZE workers, started on first use (none before), reused; each
  evaluation is limited to TIME_LIMIT_S of CPU, each worker to MEMORY_BYTES of address space.
  Workers are separate programs (fork and exec, never a fork of the threaded server).
- ``pool.partition_keys(query, records) -> list[dict]``: one reply per record, in order:
  ``{"keys": {name: text}}`` or ``{"error": message}`` (`jq_worker.partition_keys`). A delivery's
  records go in round trips of up to ROUND_TRIP_RECORDS / ROUND_TRIP_BYTES, and their replies
  come back FLUSH_EVERY at a time, so the per-record cost stays low. A record whose evaluation
  exceeds a limit gets an error reply, its worker is replaced, and the records after it go to
  the new one (a query may fail on one record only). The replies the worker had not yet written
  when it ended are asked for again, one record at a time, to learn which record it was.
- ``pool.inspect(query) -> dict``: ``{"compile_error": message}`` or ``{"keys": [names] | None}``
  (`jq_worker.inspect`); raises JqFailed when the evaluation on null exceeded a limit.
- ``pool.close()``: ends the workers (FirehoseService.close); later calls raise JqUnavailable.
JqUnavailable (the pool is closed, a worker could not start or stopped between calls) is never
the query's fault: callers let the whole operation fail and retry, and route no record anywhere.
"""
from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any, Iterator

from .jq_worker import FLUSH_EVERY, OUT_OF_MEMORY_EXIT, READY

POOL_SIZE = 2
# Not AWS's (it documents none): partition keys come from one record of at most 1,000 KiB, which
# a reasonable query reads in milliseconds.
TIME_LIMIT_S = 1.0
MEMORY_BYTES = 512 << 20
# The worker's own CPU timer ends a runaway evaluation; the server waits this long (wall clock:
# more than the CPU limit, for a loaded machine) before it kills a worker that did not answer.
REPLY_WAIT_S = 10.0
ROUND_TRIP_RECORDS = 500
ROUND_TRIP_BYTES = 4 << 20
FAILED = "Failed to execute the MetadataExtractionQuery: "


class JqUnavailable(Exception):
    """No worker could evaluate: the pool is closed, or a worker could not start or be reached."""


class JqFailed(Exception):
    """The evaluation ended its worker: it exceeded the time or memory limit (the message says)."""


class _Worker:
    """One worker process and the pipes to it (their other ends only in the worker)."""

    def __init__(self, memory_bytes: int, time_limit_s: float):
        to_worker = os.pipe()
        from_worker = os.pipe()
        env = {"TZ": "UTC"}  # and nothing of the server's environment: queries can read `$ENV`
        if "LD_LIBRARY_PATH" in os.environ:  # a Python built against a libpython outside the usual paths
            env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
        try:
            # A session of its own: Ctrl-C at the server's terminal is the server's to handle; the
            # worker stops when its stdin closes.
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "firehose.jq_worker", str(memory_bytes), repr(time_limit_s)],
                stdin=to_worker[0], stdout=from_worker[1], stderr=subprocess.DEVNULL, env=env,
                start_new_session=True)
        except BaseException:
            os.close(to_worker[1])
            os.close(from_worker[0])
            raise
        finally:
            os.close(to_worker[0])
            os.close(from_worker[1])
        self.requests = Connection(to_worker[1], readable=False)
        # Replies are read in large reads and split here (the worker writes `Connection` messages:
        # a 4-byte length, then the bytes): one read takes many records' replies.
        self.replies = from_worker[0]
        self.readable = select.poll()  # (not select(): the server's descriptors go past 1024)
        self.readable.register(self.replies, select.POLLIN)
        self.received = bytearray()
        self.timed_out = False  # no reply within REPLY_WAIT_S: to be killed
        # Wait until it runs: a worker that cannot start (jq missing, say) must not be taken for
        # a query that failed.
        try:
            ready = self._message() == READY
        except EOFError:
            ready = False
        if not ready:
            code = self.end()
            raise JqUnavailable(f"a jq worker did not start (exit status {code})")

    def usable(self) -> bool:
        return self.proc.poll() is None

    def send(self, header: dict[str, Any], records: list[bytes] | None = None) -> None:
        if records is not None:
            header = {**header, "sizes": [len(record) for record in records]}
        self.requests.send_bytes(json.dumps(header).encode())
        if records is not None:
            self.requests.send_bytes(b"".join(records))

    def receive(self) -> list[dict[str, Any]]:
        """The next replies; EOFError when the worker ended (or did not answer in REPLY_WAIT_S)."""
        return json.loads(self._message())

    def _message(self) -> bytes:
        while True:
            if len(self.received) >= 4:
                size = struct.unpack("!i", self.received[:4])[0]
                if len(self.received) >= 4 + size:
                    message = bytes(self.received[4:4 + size])
                    del self.received[:4 + size]
                    return message
            try:
                ready = self.readable.poll(REPLY_WAIT_S * 1000)
                data = os.read(self.replies, 1 << 16) if ready else None
            except OSError:
                raise EOFError from None
            if data is None:
                self.timed_out = True
                raise EOFError
            if not data:
                raise EOFError
            self.received += data

    def end(self) -> int:
        """Kill (if it still runs) and reap the worker: its exit status."""
        self.proc.kill()  # (nothing when it was reaped already)
        code = self.proc.wait()
        self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        self.requests.close()
        if self.replies >= 0:
            os.close(self.replies)
            self.replies = -1

    def close(self, grace_s: float = 1.0) -> None:
        """Stop: close its stdin (it exits between evaluations), then kill what did not exit."""
        self.requests.close()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._close_pipes()


class JqPool:
    def __init__(self, size: int = POOL_SIZE, time_limit_s: float = TIME_LIMIT_S,
                 memory_bytes: int = MEMORY_BYTES):
        self.time_limit_s, self.memory_bytes = time_limit_s, memory_bytes
        self._lock = threading.Lock()
        self._free = size                     # workers that may still be started or handed out
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._waiting: deque[threading.Event] = deque()  # first come, first served
        self._closed = False

    # ------------------------------------------------------------------ evaluations

    def partition_keys(self, query: str, records: list[bytes]) -> list[dict[str, Any]]:
        replies: list[dict[str, Any]] = []
        isolate_until = 0  # records up to this one go one reply at a time
        while len(replies) < len(records):
            start = len(replies)
            isolate = start < isolate_until
            chunk = records[start:isolate_until] if isolate else _round_trip_chunk(records, start)
            with self._worker() as worker:
                answered, ended = self._extract(worker, query, chunk, isolate)
            replies += answered
            if ended is None:
                continue
            if isolate:  # the record after the last reply ended the worker
                replies.append({"error": FAILED + ended})
            else:
                # The worker ended on one of the records whose replies it had not written yet
                # (at most FLUSH_EVERY): evaluate those again one by one, to find it.
                isolate_until = min(len(replies) + FLUSH_EVERY, len(records))
        return replies

    def inspect(self, query: str) -> dict[str, Any]:
        with self._worker() as worker:
            self._send(worker, {"op": "inspect", "query": query})
            try:
                return worker.receive()[0]
            except EOFError:
                raise JqFailed(self._why_ended(worker)) from None  # (JqUnavailable when closed)

    def _extract(self, worker: _Worker, query: str, chunk: list[bytes],
                 isolate: bool) -> tuple[list[dict[str, Any]], str | None]:
        """The replies the worker wrote for `chunk`, and why it ended if it did before the last
        (`isolate`: it writes each reply at once, so the next record is the one that ended it)."""
        self._send(worker, {"op": "extract", "query": query, "flush_every": 1 if isolate else FLUSH_EVERY}, chunk)
        replies: list[dict[str, Any]] = []
        try:
            while len(replies) < len(chunk):
                replies += worker.receive()
        except EOFError:
            return replies, self._why_ended(worker)
        return replies, None

    def _send(self, worker: _Worker, header: dict[str, Any], records: list[bytes] | None = None) -> None:
        try:
            worker.send(header, records)
        except OSError:  # it ended before evaluating anything: not the query's doing
            worker.end()
            raise JqUnavailable("the jq worker stopped") from None

    def _why_ended(self, worker: _Worker) -> str:
        """Why the worker ended during an evaluation; JqUnavailable when close() ended it."""
        code = worker.end()
        if self._closed:
            raise JqUnavailable("the jq pool is closed")
        if worker.timed_out or code == -signal.SIGPROF:
            return f"the query ran longer than {self.time_limit_s:g} s"
        if code in (-signal.SIGABRT, OUT_OF_MEMORY_EXIT):  # libjq aborts when an allocation fails
            return f"the query needed more than {self.memory_bytes >> 20} MiB of memory"
        reason = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return f"jq stopped ({reason})"

    # ------------------------------------------------------------------ workers

    @contextmanager
    def _worker(self) -> Iterator[_Worker]:
        """A worker for one round trip; back to the idle list after, unless it ended."""
        self._acquire()
        worker = None
        try:
            worker = self._take()
            yield worker
        finally:
            self._give_back(worker)

    def _acquire(self) -> None:
        with self._lock:
            if self._closed:
                raise JqUnavailable("the jq pool is closed")
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # set by _give_back (the slot is ours now) or by close

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise JqUnavailable("the jq pool is closed")
            worker = self._idle.pop() if self._idle else None
        if worker is not None and not worker.usable():  # it died while idle (killed from outside)
            worker.end()
            worker = None
        if worker is None:
            try:
                worker = _Worker(self.memory_bytes, self.time_limit_s)
            except OSError as error:  # (a JqUnavailable passes through)
                raise JqUnavailable(f"a jq worker could not start: {error}") from None
        with self._lock:
            self._busy.add(worker)
        return worker

    def _give_back(self, worker: _Worker | None) -> None:
        with self._lock:
            if worker is not None:
                self._busy.discard(worker)
            keep = worker is not None and worker.proc.returncode is None and not self._closed
            if keep:
                self._idle.append(worker)
            # The slot goes to the longest waiter: a stream whose query keeps timing out cannot
            # take the workers back before a waiting CreateDeliveryStream gets one.
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1
        if worker is not None and not keep and worker.proc.returncode is None:
            worker.close()  # the pool closed during this round trip

    def close(self) -> None:
        """End every worker. Idle ones are closed here; busy ones are killed, and the thread
        using one gets JqUnavailable (and reaps it), not a failed evaluation."""
        with self._lock:
            self._closed = True
            idle, busy = self._idle, list(self._busy)
            self._idle = []
            waiting, self._waiting = list(self._waiting), deque()
        for turn in waiting:
            turn.set()
        for worker in busy:
            worker.proc.kill()
        for worker in idle:
            worker.close()


def _round_trip_chunk(records: list[bytes], start: int) -> list[bytes]:
    """Records from `start`: at most ROUND_TRIP_RECORDS and ROUND_TRIP_BYTES (at least one)."""
    end, size = start, 0
    while end < len(records) and end - start < ROUND_TRIP_RECORDS:
        size += len(records[end])
        if end > start and size > ROUND_TRIP_BYTES:
            break
        end += 1
    return records[start:end]
