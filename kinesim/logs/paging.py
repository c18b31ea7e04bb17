"""Opaque paging tokens of the Logs API: what was asked and where the last page ended, so a token
given back with different parameters, or made up, is refused with AWS's sentence."""
from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

from kinesim.protocol.errors import AwsError

INVALID_TOKEN = "The specified nextToken is invalid."


def invalid_token() -> AwsError:
    # LocalStack's recordings: test_get_log_events_invalid_token, test_filter_log_events_unknown_token.
    return AwsError("InvalidParameterException", INVALID_TOKEN)


def _query_hash(query: Any) -> str:
    return hashlib.sha256(orjson.dumps(query, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def make_token(query: Any, position: Any) -> str:
    body = orjson.dumps({"q": _query_hash(query), "p": position})
    return base64.urlsafe_b64encode(body).decode().rstrip("=")


def read_token(token: str | None, query: Any) -> Any | None:
    """The position a token stands for (None without a token)."""
    if token is None:
        return None
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        raise invalid_token() from None
    if not isinstance(doc, dict) or doc.get("q") != _query_hash(query) or "p" not in doc:
        raise invalid_token()
    return doc["p"]


def page(items: list[Any], token: str | None, query: Any, limit: int) -> tuple[list[Any], str | None]:
    """One page of the listing `items` from the token's offset, and the next page's token when more
    remain (Describe* calls: a listing, not a log, so an offset is position enough)."""
    start = read_token(token, query) or 0
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise invalid_token()
    chosen = items[start:start + limit]
    return chosen, make_token(query, start + limit) if len(items) > start + limit else None
