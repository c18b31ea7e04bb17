"""STS's HTTP front: AWS's query protocol (`Action=...&Version=2011-06-15`), answered in XML.

The generic query front is enough but for one thing: GetCallerIdentity and friends answer about
the credentials the request was signed with, so the access key id of the signature and the
request's account are handed to the service (`service.CALLER`, `service.ACCOUNT`) while it serves
the request.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from kinesim import scopes
from kinesim.protocol.query_app import QueryApp

from .service import ACCOUNT, CALLER, StsService

MAX_REQUEST_BYTES = 64 * 1024  # session policies (2048 characters) and tags, form-encoded: well under


class StsApp(QueryApp):
    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        credential = scopes.credential(environ)
        scope = environ.get(scopes.ENVIRON_KEY)  # the edge's; absent when the app is served alone
        token = CALLER.set(credential[0] if credential else None)
        account = ACCOUNT.set(scope.account if scope is not None else None)
        try:
            return super().__call__(environ, start_response)
        finally:
            ACCOUNT.reset(account)
            CALLER.reset(token)


def sts_app(service: StsService) -> StsApp:
    return StsApp("sts", service, "sts", MAX_REQUEST_BYTES,
                  "GetCallerIdentity, AssumeRole, GetSessionToken and GetAccessKeyInfo are what it has (no "
                  "federation, SAML or web identity)")
