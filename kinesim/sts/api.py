"""STS's HTTP front: AWS's query protocol (`Action=...&Version=2011-06-15`), answered in XML.

The generic query front is enough but for one thing: GetCallerIdentity and friends answer about
the credentials the request was signed with, so the access key id of the signature is handed to
the service (`service.CALLER`) while it serves the request.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from kinesim.protocol import auth
from kinesim.protocol.query_app import QueryApp

from .service import CALLER, StsService

MAX_REQUEST_BYTES = 64 * 1024  # session policies (2048 characters) and tags, form-encoded: well under


class StsApp(QueryApp):
    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        headers = {"authorization": environ.get("HTTP_AUTHORIZATION", "")}
        scope = auth.credential_scope(headers, environ.get("QUERY_STRING", ""))
        token = CALLER.set(scope[0] if scope else None)
        try:
            return super().__call__(environ, start_response)
        finally:
            CALLER.reset(token)


def sts_app(service: StsService) -> StsApp:
    return StsApp("sts", service, "sts", MAX_REQUEST_BYTES,
                  "GetCallerIdentity, AssumeRole, GetSessionToken and GetAccessKeyInfo are what it has (no "
                  "federation, SAML or web identity)")
