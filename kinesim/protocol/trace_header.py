"""The X-Ray trace header a request carries, `X-Amzn-Trace-Id`, as the services that pass it on
keep it (SQS's AWSTraceHeader, an S3 object's event, an SNS notification, a Lambda invocation).

Lambda's recursive loop detection reads the `Lineage` field of this header (kinesim/functions/
recursion.py); the SDKs inside a function send it on every call they make from the function's
`_X_AMZN_TRACE_ID` (botocore's handler add_recursion_detection_header, the JS SDK v3's
middleware-recursion-detection). botocore percent-encodes the value (`urllib.parse.quote` with
`-=;:+&[]{}"',` kept: the `|` between lineage entries arrives as `%7C`); the JS SDK sends it as it is.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import unquote

HEADER = "X-Amzn-Trace-Id"
_ENVIRON_KEY = "HTTP_X_AMZN_TRACE_ID"
# A header longer than this is not a trace header any service would keep (X-Ray's tools cut theirs
# at 256 characters; kinesim's own stay far below this).
MAX_LENGTH = 2048


def value(raw: str | None) -> str | None:
    """The header as kept: percent-decoded, without surrounding blanks; None when absent, empty or
    too long."""
    if not raw:
        return None
    text = unquote(raw).strip()
    return text if text and len(text) <= MAX_LENGTH else None


def from_environ(environ: dict[str, Any]) -> str | None:
    """The trace header of a WSGI request."""
    return value(environ.get(_ENVIRON_KEY))
