"""Where custom resource providers answer CloudFormation: each request's `ResponseURL`.

On AWS it is a presigned S3 URL that the provider PUTs a JSON document to. Here it is a route of
this server, `PUT /_kinesim/cloudformation/responses/<token>`, at the address functions are given
as AWS_ENDPOINT_URL, with an unguessable token standing for the presigned signature. Python's
cfnresponse (urllib3) and the CDK's Python handlers (urllib) PUT to the URL as given; the CDK's
Node.js handlers and AWS's cfn-response module send an HTTPS request to the URL's host and path
only, which kinesim's Node.js runtime carries to this route (functions/node/response_route.mjs).

As S3 does, the PUT is answered 200 whatever the document holds; what CloudFormation makes of it
(too long, not JSON) is the waiting resource's failure. An unknown or expired token is refused
with S3's 403. The first answer to a request is the one taken. Answers are kept in memory: a
server killed while a resource waits sends that resource's request again when the operation is
carried on.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import threading
from typing import Any, Callable

PATH = "/_kinesim/cloudformation/responses/"
# "The total size of the response body can't exceed 4096 bytes." (crpg-ref-responses.html)
MAX_RESPONSE_BYTES = 4096
# S3's answer to a presigned URL whose time is up (here: a token no request waits on).
EXPIRED = (403, [("Content-Type", "application/xml")],
           b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
           b'<Message>Request has expired</Message></Error>')


class _Pending:
    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.answer: Any = None


class CustomResponses:
    def __init__(self, base_url: Callable[[], str]):
        self.base_url = base_url  # the server's address as functions reach it
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._abandoned: str | None = None  # why no request waits any more (a reset of the server)

    def open(self) -> tuple[str, str]:
        """A new request's token and ResponseURL."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._pending[token] = _Pending()
        return token, f"{self.base_url().rstrip('/')}{PATH}{token}"

    def wait(self, token: str, timeout: float) -> Any:
        """The answer (a dict, or a string saying why it could not be taken), or None after `timeout`."""
        pending = self._pending[token]
        if self._abandoned is not None:
            return self._abandoned
        return pending.answer if pending.arrived.wait(timeout) else None

    def abandon(self, reason: str) -> None:
        """Answer every request waiting, and every later one, with the failure `reason`: the
        operations are being stopped (a reset of the server) and must not wait for providers."""
        with self._lock:
            self._abandoned = reason
            pending = list(self._pending.values())
        for waiting in pending:
            if not waiting.arrived.is_set():
                waiting.answer = reason
                waiting.arrived.set()

    def close(self, token: str) -> None:
        with self._lock:
            self._pending.pop(token, None)

    def awaits(self, token: str) -> bool:
        """Whether a request of this engine has that token (each scope's engine has its own)."""
        with self._lock:
            return token in self._pending

    def deliver(self, token: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """A provider's PUT: the HTTP status, headers and body to answer it with, as S3 would."""
        with self._lock:
            pending = self._pending.get(token)
        if pending is None:
            return EXPIRED
        if not pending.arrived.is_set():
            pending.answer = _read(body)
            pending.arrived.set()
        return 200, [("ETag", f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"')], b""


def _read(body: bytes) -> Any:
    if len(body) > MAX_RESPONSE_BYTES:
        return "Response object is too long."
    try:
        answer = json.loads(body)
    except ValueError:
        return "Invalid response object from custom resource: it is not JSON"
    if not isinstance(answer, dict):
        return "Invalid response object from custom resource: it is not a JSON object"
    return answer
