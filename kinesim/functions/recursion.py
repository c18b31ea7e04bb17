"""Lambda's recursive loop detection: the chain of invocations an event started, counted per
function, and the invocation Lambda stops.

AWS's rules ("Use Lambda recursive loop detection to prevent infinite loops", Lambda developer
guide, invocation-recursion):
- Lambda tracks events through the X-Ray trace header. Services that support the detection (SQS,
  S3, SNS, and Lambda itself, invoked synchronously or asynchronously) carry the header of the
  request that produced an event to the invocation it causes; a function's SDK sends the header of
  its own invocation (`_X_AMZN_TRACE_ID`) on every call. Kinesis, DynamoDB and other services do not
  carry it, so loops through them are not detected.
- When a function is invoked approximately 16 times in the same chain of requests, Lambda stops the
  next invocation of that chain (RecursiveInvocationException) and counts it in the
  RecursiveInvocationsDropped metric; other chains and other triggers are not affected.
- A function whose configuration is `Allow` (PutFunctionRecursionConfig) is never stopped; the
  default is `Terminate`.

The count lives in the header's `Lineage` field: one `<hash>:<count>` entry per function of the
chain, joined by `|`: the form of the headers AWS's functions see in `_X_AMZN_TRACE_ID`
(`Root=1-46105bdf-04c13a9504458ebc539f5fba;Parent=240a548a42a88af4;Sampled=0;Lineage=12326a9d:0`
for a first invocation, quoted in DataDog/datadog-lambda-java#89; `Lineage=a87bd80c:1|68fd508a:5|
c512fbe3:2` in the X-Ray propagators' tests). The hash is the first 8 hex digits of the SHA-256 of
the function's unqualified ARN (AWS does not say what it hashes; versions and aliases of one
function are one function here). The count is the invocations of that function in the chain before
this one: 0 for the first, so the invocation that would be the 17th, count 16, is stopped. AWS's
newer form (`Lineage=<loop counter>:<hash>:<request counter>`, as OpenTelemetry's Java X-Ray
propagator reads it) is not read: the chains kinesim follows are those of the headers it gives its
functions, and an entry it cannot read is left out.
"""
from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from typing import Iterable

from ..protocol.errors import AwsError

TERMINATE = "Terminate"  # the other setting, "Allow", lets a loop run
DEFAULT_RECURSIVE_LOOP = TERMINATE
# Invocations of one function one chain may make; the next one is stopped.
MAX_CHAIN_INVOCATIONS = 16
# Functions a lineage remembers, the most recent ones (a chain through more distinct functions
# forgets the earliest; the header stays short, as AWS's trace headers must).
MAX_LINEAGE_ENTRIES = 32

_ROOT = re.compile(r"1-[0-9a-f]{8}-[0-9a-f]{24}")
_ENTRY = re.compile(r"([0-9a-f]{8}):(\d{1,9})")


@dataclass(frozen=True)
class Link:
    """One invocation's place in its chain."""
    header: str  # the trace header it runs with: its `_X_AMZN_TRACE_ID`
    count: int   # invocations of the same function earlier in the chain

    @property
    def past_limit(self) -> bool:
        return self.count >= MAX_CHAIN_INVOCATIONS


def function_key(function_arn: str) -> str:
    """A function's name in a lineage."""
    return hashlib.sha256(function_arn.encode()).hexdigest()[:8]


def _fields(header: str | None) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in (header or "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields.setdefault(name.strip(), value.strip())
    return fields


def lineage(header: str | None) -> dict[str, int]:
    """The lineage a header carries, function key -> count, oldest first; entries that are not
    `<8 hex digits>:<count>` are left out."""
    entries: dict[str, int] = {}
    for entry in _fields(header).get("Lineage", "").split("|"):
        m = _ENTRY.fullmatch(entry.strip())
        if m:
            entries[m.group(1)] = int(m.group(2))
    return entries


def next_link(incoming: str | None, function_arn: str) -> Link:
    """The trace header an invocation of `function_arn` caused by a request carrying `incoming`
    runs with: the same trace (Root) when there is one, else a new one; a new segment (Parent);
    the upstream sampling decision, else not sampled (kinesim records no X-Ray traces); and the
    lineage with this function's count raised by one (0 when the chain had not reached it yet)."""
    fields = _fields(incoming)
    root = fields.get("Root", "")
    if not _ROOT.fullmatch(root):
        root = f"1-{int(time.time()):08x}-{secrets.token_hex(12)}"
    sampled = fields.get("Sampled") if fields.get("Sampled") in ("0", "1") else "0"
    entries = lineage(incoming)
    key = function_key(function_arn)
    count = entries.pop(key, -1) + 1
    entries[key] = count  # the most recent function last: the first forgotten are the oldest
    kept = list(entries.items())[-MAX_LINEAGE_ENTRIES:]
    text = "|".join(f"{k}:{n}" for k, n in kept)
    return Link(f"Root={root};Parent={secrets.token_hex(8)};Sampled={sampled};Lineage={text}", count)


def deepest(headers: Iterable[str | None], function_arn: str) -> str | None:
    """Of the trace headers of the events one invocation of `function_arn` takes together (an SQS
    batch), the one whose chain has invoked it most (else the first there is). AWS does not say
    which header it follows for a batch; with this one, a looping message is stopped by the 17th
    invocation of its chain whatever shares its batch, and a batch never restarts a loop's count."""
    key = function_key(function_arn)
    best, most = None, -2
    for header in headers:
        count = lineage(header).get(key, -1) if header else -2
        if count > most:
            best, most = header, count
    return best


def recursive_invocation() -> AwsError:
    """What a stopped invocation answers (the error's description in Lambda's API model; AWS's
    message is not recorded anywhere kinesim could find)."""
    return AwsError("RecursiveInvocationException",
                    "Lambda has detected your function being invoked in a recursive loop with other Amazon Web "
                    "Services resources and stopped your function's invocation.", 400)
