"""A call of a JSON-protocol AWS API (Firehose, Kinesis) without botocore, for kinesim's own
short-lived commands: `kinesim sql` asks the server for its delivery streams and channels before
every query, and importing boto3 and loading two service models took ~0.3 s of a 1.7 s warm
answer (issue 33). The answers are the wire's JSON (timestamps as epoch seconds)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from .sigv4 import sign

_CONTENT_TYPE = "application/x-amz-json-1.1"


class CallError(Exception):
    """The service's error answer: `code` is its error type (ResourceNotFoundException, ...)."""

    def __init__(self, code: str, message: str, status: int):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


def call(endpoint_url: str, target: str, params: dict[str, Any], service: str, region: str = "us-east-1",
         key_id: str = "kinesim", secret: str = "kinesim", timeout: float = 30.0) -> dict[str, Any]:
    """POST `params` to `target` ("Firehose_20150804.ListDeliveryStreams"), signed for `service`
    ("firehose") in `region`; the answer's JSON, or CallError. Connection failures are the
    URLError/OSError they are."""
    parts = urlsplit(endpoint_url)
    body = json.dumps(params).encode()
    headers = sign("POST", parts.netloc, "/", {"Content-Type": _CONTENT_TYPE, "X-Amz-Target": target}, body,
                   key_id, secret, region, service)
    request = urllib.request.Request(endpoint_url.rstrip("/") + "/", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        text = err.read()
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {}
        code = str(answer.get("__type") or answer.get("code") or f"HTTP {err.code}").rpartition("#")[2]
        raise CallError(code, str(answer.get("message") or answer.get("Message") or text[:200]), err.code) from None
