"""SaslHandshake (17) and SaslAuthenticate (36), PLAIN only (kafka/sasl.py says what a user name
means). After a SaslHandshake v0 the token comes as a bare frame, without a Kafka header, and is
answered with a bare frame (`raw_token`), as Kafka brokers did before SaslAuthenticate existed."""
from __future__ import annotations

import logging
from typing import Any

from .. import errors, sasl
from ..context import CloseConnection, Context

log = logging.getLogger("kinesim.kafka")


def sasl_handshake(ctx: Context, body: Any) -> dict[str, Any]:
    session = ctx.session
    if body.mechanism != sasl.PLAIN:
        session.mechanism = None
        return {"error_code": errors.UNSUPPORTED_SASL_MECHANISM, "mechanisms": [sasl.PLAIN]}
    session.mechanism = sasl.PLAIN
    session.raw_token_next = body.__version__ == 0
    return {"error_code": errors.NONE, "mechanisms": [sasl.PLAIN]}


def sasl_authenticate(ctx: Context, body: Any) -> dict[str, Any]:
    session = ctx.session
    if session.mechanism is None:
        return {"error_code": errors.ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime": 0,
                "error_message": "SaslAuthenticate before a SaslHandshake that chose PLAIN"}
    session.mechanism = None  # one token per handshake
    try:
        _authenticated(ctx, bytes(body.auth_bytes))
    except sasl.Refused as refused:
        return {"error_code": errors.SASL_AUTHENTICATION_FAILED, "error_message": str(refused),
                "auth_bytes": b"", "session_lifetime": 0}
    # session_lifetime 0: no re-authentication (KIP-368) is asked of the client.
    return {"error_code": errors.NONE, "error_message": None, "auth_bytes": b"", "session_lifetime": 0}


def raw_token(ctx: Context, token: bytes) -> bytes:
    """The answer frame to a v0 handshake's bare token: empty on success; a failure closes the
    connection, the only way SASL v0 had to say so."""
    ctx.session.raw_token_next = False
    ctx.session.mechanism = None
    try:
        _authenticated(ctx, token)
    except sasl.Refused as refused:
        raise CloseConnection(f"SASL/PLAIN refused: {refused}") from None
    return b"\0\0\0\0"


def _authenticated(ctx: Context, token: bytes) -> None:
    session = ctx.session
    try:
        session.scope, session.kinesis = sasl.authenticate(ctx.services, token)
    except sasl.Refused as refused:
        log.info("kafka: SASL/PLAIN refused: %s", refused)
        raise
    log.debug("kafka: authenticated as account %s in %s", session.scope.account, session.scope.region)
