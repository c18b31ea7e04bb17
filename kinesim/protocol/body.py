"""Reading a WSGI request body whole, within a bound (the JSON protocols and signature checks)."""
from __future__ import annotations

from typing import Any


def read_bounded(environ: dict[str, Any], length: int, limit: int) -> bytes | None:
    """The body, or None when it is larger than `limit`. `length` is the announced
    Content-Length (0 or less: none given); an announced size past the limit is refused before
    anything is read. Without a length, a body is read only when the server marks the stream as
    ending (chunked uploads); else reading would wait on a keep-alive connection."""
    if length > limit:
        return None
    stream = environ["wsgi.input"]
    if length > 0:
        return stream.read(length)
    if not environ.get("wsgi.input_terminated"):
        return b""
    body = stream.read(limit + 1)
    return None if len(body) > limit else body
