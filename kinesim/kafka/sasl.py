"""SASL/PLAIN on the Kafka port: who a connection is, hence the account and region whose streams
are its topics (docs/plans/issue-35-kafka.md §6 "Scopes").

The user name is an access key id, as AWS_ACCESS_KEY_ID is to the SDKs, optionally `KEYID@region`
(PLAIN has no other place for a region); its scope is the one a SigV4 request signed with that key
for that region would have (`scopes.Resolver.of_credential`). Without SASL a connection is in the
server's own scope. Under --verify-signatures SASL is required and the password must be the key's
secret, as a signature must be made with it.
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from ..scopes import Scope, is_region

PLAIN = "PLAIN"


class Refused(Exception):
    """Credentials that do not authenticate: the message is the client's (SaslAuthenticate's
    error_message)."""


@dataclass(slots=True)
class Session:
    """A connection's SASL state, changed by SaslHandshake and SaslAuthenticate (one request at a
    time per connection: no lock)."""
    required: bool             # --verify-signatures: nothing but ApiVersions and SASL before it
    mechanism: str | None = None
    raw_token_next: bool = False   # after SaslHandshake v0 the token comes as a bare frame
    scope: Scope | None = None     # once authenticated
    kinesis: Any = None            # the authenticated scope's KinesisService

    def may_serve(self, api_key: int) -> bool:
        """A Kafka broker's SASL listener closes a connection that asks anything else first."""
        return not self.required or self.kinesis is not None or api_key in (17, 18, 36)


def plain_credentials(token: bytes) -> tuple[str, str]:
    """(user, password) of a PLAIN token, `authzid \\0 authcid \\0 password` (RFC 4616); an authzid
    other than the user itself is refused, as Kafka's PlainServer does."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise Refused("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        raise Refused("Invalid SASL/PLAIN response: not UTF-8") from None
    if not user:
        raise Refused("Authentication failed: username not specified")
    if authzid and authzid != user:
        raise Refused("Authentication failed: Client requested an authorization id that is different from username")
    return user, password


def authenticate(services: Any, token: bytes) -> tuple[Scope, Any]:
    """The scope and its KinesisService for a PLAIN token, or Refused."""
    user, password = plain_credentials(token)
    key, _, region = user.partition("@")
    if region and not is_region(region):
        # Not quietly the server's region, as SigV4 would: a typo would put topics elsewhere.
        raise Refused(f"Authentication failed: {region!r} in user name {user!r} is not a region "
                      "(the form is ACCESS_KEY_ID or ACCESS_KEY_ID@region)")
    verifier = getattr(services, "verifier", None)  # re-read: a reset of STS makes another
    if verifier is not None:
        secret = verifier.secrets.get(key)
        if secret is None or not hmac.compare_digest(secret.encode(), password.encode()):
            raise Refused("Authentication failed: Invalid username or password")
    scope = services.resolve.of_credential([key, "", region])
    try:
        return scope, services.scope(scope).kinesis
    except Exception as err:  # AwsError: too many scopes; said to the client, not raised
        raise Refused(f"Authentication failed: {getattr(err, 'message', err)}") from None
