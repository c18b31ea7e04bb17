"""ApiVersions (18): the table of served APIs, the first request of nearly every client."""
from __future__ import annotations

from typing import Any

from ..codec import VERSIONS
from ..context import Context

UNSUPPORTED_VERSION = 35


def table() -> list[dict[str, int]]:
    return [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(VERSIONS.items())]


def api_versions(ctx: Context, body: Any) -> dict[str, Any]:
    return {"error_code": 0, "api_keys": table(), "throttle_time": 0}


def unsupported_version() -> dict[str, Any]:
    """The answer to an ApiVersions of a version kinesim does not serve, sent as v0 (every client
    reads it): the error and the table, from which the client picks a version and asks again."""
    return {"error_code": UNSUPPORTED_VERSION, "api_keys": table()}
