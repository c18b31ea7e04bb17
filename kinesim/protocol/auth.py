"""SigV4 presence checks, answering as AWS's front end does for a missing or incomplete signature.

Only the *shape* of the credentials is checked, never the signature itself: any access key and
secret work, as with kinesalite, kinesis-mock, LocalStack and moto. What is checked, and AWS's
answers (texts and order as kinesalite recorded them from real Kinesis; HTTP 400 with a JSON/CBOR
body for a request whose content type Kinesis takes):

* both an `Authorization` header and an `X-Amz-Algorithm` query parameter ->
  `InvalidSignatureException` "Found both 'X-Amz-Algorithm' as a query-string param and
  'Authorization' as HTTP header."
* neither -> `MissingAuthenticationTokenException` "Missing Authentication Token".
* an `Authorization` header: after its first word (the algorithm, not checked), comma- or
  space-separated `key=value` pairs must give non-empty `Credential`, `Signature` and
  `SignedHeaders`, and the request must carry an `X-Amz-Date` or a `Date` header; otherwise one
  `IncompleteSignatureException` listing every problem, then "Authorization=<the header>".
* query-string auth: `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Signature`,
  `X-Amz-SignedHeaders` and `X-Amz-Date` must all be non-empty, else `IncompleteSignatureException`
  listing the missing ones, then "Re-examine the query-string parameters."
"""
from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import parse_qs, unquote

from .errors import AwsError

AUTH_STATUS = 400  # AWS's status for these errors on a JSON/CBOR request (403 with an XML body otherwise)

_HEADER_PARAMS = ("Credential", "Signature", "SignedHeaders")
_QUERY_PARAMS = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-SignedHeaders", "X-Amz-Date")
_SEPARATORS = re.compile(r"[, ]")
_CREDENTIAL = re.compile(r"Credential=([^,\s]*)")
# The SDKs' own form: "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...". Matching it
# skips the general parse (same verdict: all three parameters there and non-empty).
_SDK_FORM = re.compile(r"[^ ,]+ Credential=[^ ,=]+, ?SignedHeaders=[^ ,=]+, ?Signature=[^ ,=]+")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value whatever the mapping's key case (lowercase first: the edge's own form)."""
    value = headers.get(name.lower())
    if value is None:
        value = headers.get(name)
        if value is None and isinstance(headers, dict):
            lower = name.lower()
            for key, v in headers.items():
                if key.lower() == lower:
                    return v
    return value


def _query_params(query: str) -> dict[str, list[str]]:
    return parse_qs(query, keep_blank_values=True) if query else {}


def _present(values: list[str] | None) -> bool:
    # kinesalite (node's querystring): a repeated parameter is an array, which is truthy
    return bool(values) and (len(values) > 1 or values[0] != "")


def authorization_params(authorization: str) -> dict[str, str | None]:
    """The `key=value` pairs after the Authorization header's first word (later ones win)."""
    params: dict[str, str | None] = {}
    for token in _SEPARATORS.split(authorization)[1:]:
        token = token.strip()
        if not token:
            continue
        key, eq, rest = token.partition("=")
        params[key] = rest.split("=", 1)[0] if eq else None
    return params


def check_auth(method: str, headers: Mapping[str, str], query: str) -> None:
    """Raise the AwsError AWS would for a request without (complete) SigV4 credentials.

    `method` is accepted for symmetry with AWS's checks; Kinesis's JSON protocol is POST-only and
    the edge answers other methods itself.
    """
    authorization = _header(headers, "Authorization")
    query_auth = _query_params(query) if query else {}
    has_query_auth = "X-Amz-Algorithm" in query_auth

    if authorization and has_query_auth:
        raise AwsError("InvalidSignatureException",
                       "Found both 'X-Amz-Algorithm' as a query-string param and 'Authorization' as HTTP header.",
                       AUTH_STATUS)
    if not authorization and not has_query_auth:
        raise AwsError("MissingAuthenticationTokenException", "Missing Authentication Token", AUTH_STATUS)

    if authorization and _SDK_FORM.fullmatch(authorization) is not None \
            and (_header(headers, "X-Amz-Date") or _header(headers, "Date")):
        return

    msg = ""
    if authorization:
        params = authorization_params(authorization)
        for name in _HEADER_PARAMS:
            if not params.get(name):
                msg += f"Authorization header requires '{name}' parameter. "
        if not _header(headers, "X-Amz-Date") and not _header(headers, "Date"):
            msg += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
        if msg:
            msg += "Authorization=" + authorization
    else:
        for name in _QUERY_PARAMS:
            if not _present(query_auth.get(name)):
                msg += f"AWS query-string parameters must include '{name}'. "
        if msg:
            msg += "Re-examine the query-string parameters."
    if msg:
        raise AwsError("IncompleteSignatureException", msg, AUTH_STATUS)


def check_environ_auth(environ: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """`check_auth` for a WSGI request, `headers` its headers by name. The SDKs' own request (an
    Authorization header of their form, a date header, no query string) passes on a few lookups
    of the environ; anything else gets the full checks."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    if authorization and not environ.get("QUERY_STRING") and _SDK_FORM.fullmatch(authorization) is not None \
            and (environ.get("HTTP_X_AMZ_DATE") or environ.get("HTTP_DATE")):
        return
    check_auth("POST", headers, environ.get("QUERY_STRING", ""))


def credential_scope(headers: Mapping[str, str], query: str = "") -> list[str] | None:
    """The Credential's parts, `[access_key, date, region, service, "aws4_request"]`, from the
    Authorization header or the X-Amz-Credential query parameter; None if there is none."""
    authorization = _header(headers, "Authorization")
    credential = None
    if authorization:
        m = _CREDENTIAL.search(authorization)
        if m:
            credential = m.group(1)
    elif query and "X-Amz-Credential" in query:
        values = _query_params(query).get("X-Amz-Credential")
        if values:
            credential = unquote(values[0])
    if not credential:
        return None
    return credential.split("/")
