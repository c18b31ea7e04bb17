"""Opaque NextToken values of Parameter Store's listings: where the last page ended (a name, or a
version number), tied to what was asked, so a token given back with other parameters, or made up,
is refused."""
from __future__ import annotations

import base64
import hashlib
from typing import Any, Callable

import orjson

from kinesim.protocol.errors import AwsError


def _invalid() -> AwsError:
    return AwsError("InvalidNextToken", "The specified token is not valid.")


def _query_hash(query: Any) -> str:
    return hashlib.sha256(orjson.dumps(query, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _read(token: str, query: Any) -> Any:
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        raise _invalid() from None
    if not isinstance(doc, dict) or doc.get("q") != _query_hash(query) or "after" not in doc:
        raise _invalid()
    return doc["after"]


def page(items: list[Any], token: str | None, query: Any, limit: int,
         position: Callable[[Any], Any]) -> tuple[list[Any], str | None]:
    """One page of `items` (in ascending order of `position`) after the token's position, and the
    next page's token when more remain. A position rather than an offset: a parameter made or
    deleted between two pages shifts nothing."""
    start = 0
    if token is not None:
        after = _read(token, query)
        try:
            while start < len(items) and position(items[start]) <= after:
                start += 1
        except TypeError:  # a position of another kind than this listing's
            raise _invalid() from None
    chosen = items[start:start + limit]
    if start + limit >= len(items):
        return chosen, None
    body = orjson.dumps({"q": _query_hash(query), "after": position(chosen[-1])})
    return chosen, base64.urlsafe_b64encode(body).decode().rstrip("=")
