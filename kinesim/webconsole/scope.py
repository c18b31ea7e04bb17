"""Which account and region the console looks at (issue 34).

Every console URL, page or API, and kinesim's own routes that read one scope's state, take
`?account=ACCOUNT&region=REGION`; a parameter left out is the server's own (`--account-id`,
`--region`), so a URL without them shows what it showed before accounts existed.

The pair must be the server's own or one it already has (made by a request or by a stored
document: `Services.scopes()`). Any other is answered 404 with code UnknownScope: the console only
looks, so a mistyped account must not make an empty scope appear in the list for good, and falling
back to the server's own scope would show one account's resources under another's name.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Flask

from ..protocol.errors import AwsError
from ..scopes import Scope
from .http import API, reads

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices


class UnknownScope(AwsError):
    def __init__(self, scope: Scope):
        super().__init__("UnknownScope", f"kinesim has nothing in account {scope.account}, region {scope.region} "
                                         f"(the scopes in use are listed at /_kinesim/health)", 404)


def scope_for(edge: "Edge", request: Any) -> "ScopeServices":
    """The services of the scope the request's `account` and `region` name; UnknownScope (an
    AwsError, 404) for a pair the server has no scope of."""
    own = edge.default_scope
    wanted = Scope(request.args.get("account") or own.account, request.args.get("region") or own.region)
    if wanted == own:
        return edge.own_scope
    for scope in edge.scopes():
        if scope.scope == wanted:
            return scope
    raise UnknownScope(wanted)


def scope_docs(edge: "Edge") -> list[dict[str, str]]:
    """The scopes in use, the server's own first, as the health route and the console list them."""
    return [{"account": s.scope.account, "region": s.scope.region} for s in edge.scopes()]


def add_routes(app: Flask, edge: "Edge") -> None:
    # GET /api/scopes  {"own": {"account", "region"}, "scopes": [the same, the own first]}: the
    # header's selector (any parameters given are ignored: the list is the whole server's).
    @app.get(API + "/scopes")
    @reads
    def scopes_list() -> dict[str, Any]:
        own = edge.default_scope
        return {"own": {"account": own.account, "region": own.region}, "scopes": scope_docs(edge)}
