"""The request ids of the server's answers (`x-amzn-RequestId`, `x-amz-id-2`), and of the work it
starts for a request (an asynchronous invocation's id): one sequence for the whole process."""
from __future__ import annotations

import base64
import itertools
import os
import uuid

_REQUEST_ID_PREFIX = str(uuid.uuid4())[:24]
_request_counter = itertools.count(1)

# x-amz-id-2: 72 bytes in base64, as AWS's (and kinesalite's recordings): 66 random bytes per
# process, then the request counter.
_ID2_PREFIX = base64.b64encode(os.urandom(66)).decode()


def request_id() -> str:
    """A UUID-shaped request id: a random per-process prefix and a counter (uuid4 per call costs
    more than the rest of a PutRecord's bookkeeping)."""
    return f"{_REQUEST_ID_PREFIX}{next(_request_counter) & 0xFFFFFFFFFFFF:012x}"


def answer_ids() -> list[tuple[str, str]]:
    """The two ids every answer of AWS's JSON services carries. The counter's 8 hex digits are
    base64 characters too: x-amz-id-2 stays 96 characters of base64 (72 bytes)."""
    n = next(_request_counter) & 0xFFFFFFFFFFFF
    return [("x-amzn-RequestId", f"{_REQUEST_ID_PREFIX}{n:012x}"), ("x-amz-id-2", f"{_ID2_PREFIX}{n & 0xFFFFFFFF:08x}")]
