"""What a mapping lane hands a function and how it reads the answer: the records of a batch, the
pieces a batch is bisected into, and AWS's rules for an invocation's outcome
(`batchItemFailures`, tumbling-window state)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol

import orjson

from ..kinesis.reader import Record


class Invocation(Protocol):
    request_id: str
    payload: bytes
    function_error: str | None


class Invoke(Protocol):
    """Runs a function (LambdaService.invoke_function). `trace_header`: the X-Ray trace header of
    the events, which SQS mappings pass on from their messages; Kinesis records carry none, as
    Lambda's recursive loop detection does not cover Kinesis."""

    def __call__(self, name: str, payload: bytes, trace_header: str | None = None) -> Invocation: ...


@dataclass
class Item:
    row: Record
    entry: dict[str, Any]   # the record as the event carries it
    size: int               # its bytes in the event
    key: Hashable = None    # what `batchItemFailures` names it by (None: its sequence number)


@dataclass
class Batch:
    items: list[Item]
    next_index: int                  # where the lane goes on after this batch
    window_start: float | None = None
    window_over: bool = False        # the next record belongs to a later tumbling window
    at_tip: bool = False             # nothing more to read for now
    ended: bool = False              # a closed shard, read to its end


@dataclass
class Part:
    """A batch, or a piece of one after bisecting, on its way to the function."""
    items: list[Item]
    invokes: int = 0                 # invocations that carried these records
    retries: int = 0                 # failed attempts counted against MaximumRetryAttempts
    last: Invocation | None = None


@dataclass
class Outcome:
    kind: str                        # "ok" | "partial" | "error" | "problem"
    failed_at: int = 0               # partial: position in the part of the first failed record
    state: Any = None                # tumbling window: the state the function returned
    problem: str = ""                # problem: LastProcessingResult


def sequence_number(ident: Any) -> Hashable | None:
    """A Kinesis record's `itemIdentifier`: its sequence number, a string."""
    return ident if isinstance(ident, str) else None


def judge(invocation: Invocation, items: list[Item], report_item_failures: bool, needs_state: bool,
          reported_key: Callable[[Any], Hashable | None] = sequence_number) -> Outcome:
    """What an invocation's answer means for its batch, by AWS's rules. `reported_key`: the key
    (Item.key) an `itemIdentifier` names, None for one of the wrong form."""
    if invocation.function_error:
        return Outcome("error")
    try:
        body = orjson.loads(invocation.payload) if invocation.payload else None
    except orjson.JSONDecodeError:
        body = None
    state = None
    if needs_state:
        # With tumbling windows a response without `state` is a failed invocation.
        if not isinstance(body, dict) or not isinstance(body.get("state"), dict):
            return Outcome("error")
        state = body["state"]
    if not report_item_failures or not isinstance(body, dict):
        return Outcome("ok", state=state)
    failures = body.get("batchItemFailures")
    if not failures:  # absent, null or empty: complete success
        return Outcome("ok", state=state)
    if not isinstance(failures, list):
        return Outcome("error")
    position = {(it.row[1] if it.key is None else it.key): n for n, it in enumerate(items)}
    first = len(items)
    for failure in failures:
        key = reported_key(failure.get("itemIdentifier")) if isinstance(failure, dict) else None
        # An empty or null identifier, a bad key name, or one not in the batch: the whole batch failed.
        if key is None or key not in position:
            return Outcome("error")
        first = min(first, position[key])
    return Outcome("partial", failed_at=first, state=state)


def lane_of(partition_key: str, lanes: int) -> int:
    if lanes == 1:
        return 0
    return int.from_bytes(hashlib.md5(partition_key.encode()).digest()[:8], "big") % lanes
