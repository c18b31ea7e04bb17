"""The jq worker: a process that evaluates MetadataExtractionQuery programs for the server.

A client's jq query can loop for ever (`def f: f; f`) or allocate until libjq aborts the process
(`def f: [f]; f`), and libjq holds the interpreter while it runs; so the server never runs jq
itself. `jq_runner` starts this module as `python -I -m firehose.jq_worker MEMORY_BYTES
TIME_LIMIT_S` and talks to it over stdin/stdout:
- each evaluation has TIME_LIMIT_S of CPU time: SIGPROF, left at its default action, ends the
  process even while libjq loops (no Python handler could run then);
- the address space is capped at MEMORY_BYTES: a runaway allocation fails here (libjq aborts);
- queries see no file of the host (`main`) and nothing of the server's environment (`$ENV`: the
  runner passes only TZ=UTC, the time zone of AWS's jq);
- the worker exits when its stdin closes, so it never outlives the server by more than one
  evaluation's time limit.

Protocol: `multiprocessing.connection` messages (a 4-byte length, then bytes). Once set up, the
worker sends READY; then, for each request:
- `{"op": "extract", "query": Q, "sizes": [n1, n2, ...], "flush_every": F}`, then one message
  holding the records one after the other (n1 bytes, n2 bytes, ...): one reply per record, in
  order, each `{"keys": {name: text}}` or `{"error": message}` (`partition_keys`), sent as JSON
  arrays of F replies (or fewer: after FLUSH_AFTER_S, and at the end);
- `{"op": "inspect", "query": Q}`: `[{"compile_error": message}]` or `[{"keys": [names] | null}]`
  (the keys of the object the query makes from null, null when it makes none).
"""
from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import struct
import sys
import tempfile
import time
from functools import lru_cache
from itertools import islice
from multiprocessing.connection import Connection
from typing import Any

# Partition keys longer than this (a query can build strings of hundreds of megabytes) are an
# error rather than a reply: no S3 key could hold them (S3 keys are at most 1,024 bytes), and the
# server should not receive what a query can blow up to.
MAX_KEYS_CHARS = 1 << 20
READY = b"ready"
# Replies go out this many at a time, or after FLUSH_AFTER_S, and at the end of a request; a
# request may ask for fewer ("flush_every": 1, so that the server learns which record ended a
# worker). FLUSH_AFTER_S keeps the server hearing from a worker busy with slow, legitimate work.
FLUSH_EVERY = 50
FLUSH_AFTER_S = 0.5
OUT_OF_MEMORY_EXIT = 70  # a MemoryError in Python code: the runner reports the memory limit


@lru_cache(maxsize=256)
def compiled(query: str) -> Any:
    """The compiled program (jq raises ValueError for a query that does not compile)."""
    import jq  # here, not above: the server imports this module's constants, and must not load libjq
    return jq.compile(query)


def partition_keys(query: str, record: bytes) -> dict[str, Any]:
    """MetadataExtraction of one record: {"keys": {name: text}} or {"error": AWS-style message}.

    Values must be scalars: strings as they are, numbers and booleans as JSON text."""
    try:
        # What json.loads(record) reads (UTF-8, -16 or -32), checked by it; jq then parses the
        # same text itself, as AWS's jq reads the record (no Python round trip: half the cost).
        text = record.decode(json.detect_encoding(record), "surrogatepass")
        json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
        return {"error": "Non JSON record provided"}
    try:
        program = compiled(query)
    except ValueError as error:
        return {"error": f"Invalid MetadataExtractionQuery: {error}"}
    try:
        # Two results are enough to know there is not exactly one (a query may make endless ones).
        results = list(islice(program.input_text(text), 2))
    except (ValueError, RecursionError) as error:
        return {"error": f"Failed to execute the MetadataExtractionQuery: {error}"}
    if len(results) != 1 or not isinstance(results[0], dict):
        return {"error": "The MetadataExtractionQuery must produce one JSON object"}
    keys = {}
    for name, value in results[0].items():
        if value is None or isinstance(value, (dict, list)):
            return {"error": f"The partition key {name} has no scalar value: {json.dumps(value)}"}
        keys[name] = value if isinstance(value, str) else json.dumps(value)
    if sum(len(name) + len(value) for name, value in keys.items()) > MAX_KEYS_CHARS:
        return {"error": f"Failed to execute the MetadataExtractionQuery: the partition keys are longer than "
                         f"{MAX_KEYS_CHARS} characters"}
    return {"keys": keys}


def inspect(query: str) -> dict[str, Any]:
    """Whether `query` compiles, and the keys of the object it makes from null.

    An object constructor's keys do not depend on the input, but its values may fail on null
    (e.g. strftime): then the caller reads the keys from the query's text."""
    try:
        program = compiled(query)
    except ValueError as error:
        return {"compile_error": str(error)}
    try:
        results = list(islice(program.input_value(None), 1))
    except (ValueError, RecursionError):
        return {"keys": None}
    return {"keys": sorted(results[0])} if results and isinstance(results[0], dict) else {"keys": None}


def _limit(seconds: float) -> None:
    """Arm (0: disarm) the CPU-time limit; arming again replaces the time left."""
    # CPU time, not wall time: a query is not cut short because the machine is busy.
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _write(fd: int, message: bytes) -> None:
    """One `Connection` message: a 4-byte length, then the bytes."""
    data = memoryview(struct.pack("!i", len(message)) + message)
    while data:
        data = data[os.write(fd, data):]


class _Replies:
    """Replies in batches, one message (a JSON array) per FLUSH_EVERY records: a write per record
    cost more than the evaluation (each one wakes the server)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.pending: list[dict[str, Any]] = []

    def add(self, reply: dict[str, Any]) -> None:
        self.pending.append(reply)

    def flush(self) -> None:
        _write(self.fd, json.dumps(self.pending).encode())  # ASCII: lone surrogates stay escaped
        self.pending = []


def serve(requests: Connection, replies: _Replies, time_limit_s: float) -> None:
    while True:
        try:
            header = json.loads(requests.recv_bytes())
        except EOFError:  # the server closed our stdin (or is gone): stop
            return
        query = header["query"]
        if header["op"] == "inspect":
            _limit(time_limit_s)
            replies.add(inspect(query))
            _limit(0)
            replies.flush()
            continue
        flush_every, sizes = header.get("flush_every", FLUSH_EVERY), header["sizes"]
        records = memoryview(requests.recv_bytes())
        start, flushed = 0, time.monotonic()
        for n, size in enumerate(sizes, 1):
            record = records[start:start + size].tobytes()
            start += size
            _limit(time_limit_s)
            replies.add(partition_keys(query, record))
            if n % flush_every == 0 or n == len(sizes) or time.monotonic() - flushed > FLUSH_AFTER_S:
                replies.flush()
                flushed = time.monotonic()
        _limit(0)


def main(argv: list[str]) -> None:
    memory_bytes, time_limit_s = int(argv[1]), float(argv[2])
    importlib.import_module("jq")  # before READY: a worker that cannot load jq never says it is ready
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ValueError, OSError):  # macOS does not take it: jq's allocations go unbounded there
        pass
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # a timed-out evaluation ends the process
    # The protocol gets private descriptors; fds 0 and 1 become /dev/null, so nothing jq or Python
    # might print can corrupt the replies.
    requests = Connection(os.dup(0), writable=False)
    replies = _Replies(os.dup(1))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    # jq's `import "name" as $data;` reads name.json relative to the current directory (it refuses
    # absolute paths and `..`): work in an empty directory that no longer exists, so a query
    # reads no file of the host.
    empty = tempfile.mkdtemp(prefix="kinesim-jq-")
    os.chdir(empty)
    os.rmdir(empty)
    try:
        _write(replies.fd, READY)
        serve(requests, replies, time_limit_s)
    except MemoryError:
        os._exit(OUT_OF_MEMORY_EXIT)
    except (BrokenPipeError, ConnectionResetError):  # the server is gone
        pass


if __name__ == "__main__":
    main(sys.argv)
