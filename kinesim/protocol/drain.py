"""Answering a request before its body was read (refused, or too large), without a reset connection.

An HTTP client that writes its whole request before reading (most do: urllib, requests, the SDKs
for a small body) sees a reset, not the answer, when the server closes the connection with part of
the body unread. So the answer goes out first, then what is left of the body is read and dropped
(`ThenDrain`, closed by the WSGI server once the answer is sent). Past DRAIN_LIMIT announced bytes
the connection is closed instead: reading gigabytes to be polite is not worth it.

Shared by the edge (refusals, JSON-protocol bodies over the limit) and the services with their own
WSGI front (SNS's query protocol).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

DRAIN_LIMIT = 64 * 1024 * 1024
_DRAIN_CHUNK = 1024 * 1024


class ThenDrain:
    """A response body that, once sent, reads and drops what is left of the request body. Both
    kinds of client then get the answer: one that waits for it before sending its body, and one
    that writes its whole request first (which would see a reset connection if the server closed
    with the body unread). The server calls `close` after the answer has gone out."""

    def __init__(self, environ: dict[str, Any], body: bytes):
        self.environ, self.parts = environ, iter((body,))

    def __iter__(self) -> "ThenDrain":
        return self

    def __next__(self) -> bytes:
        return next(self.parts)

    def close(self) -> None:
        stream, read = self.environ["wsgi.input"], 0
        try:
            while read <= DRAIN_LIMIT and (chunk := stream.read(_DRAIN_CHUNK)):
                read += len(chunk)
        except (OSError, ValueError, RuntimeError):  # the client went away
            pass


def answer_unread(environ: dict[str, Any], start_response: Callable, status: str, headers: list,
                  body: bytes) -> Iterable[bytes]:
    """Send an answer to a request whose body was not read: drained afterwards, or, when it is
    announced larger than DRAIN_LIMIT, the connection is closed."""
    try:
        announced = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        announced = DRAIN_LIMIT + 1
    if announced > DRAIN_LIMIT:
        start_response(status, headers + [("Connection", "close")])
        return [body]
    start_response(status, headers)
    return ThenDrain(environ, body)
