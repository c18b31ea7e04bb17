"""What the console's API answers have in common, and what keeps other web sites out.

A page of another site cannot read the console: the edge's guard refuses any request whose
`Origin` is foreign (and answers CORS only for this machine's origins), and its Host check stops
DNS rebinding. It cannot act through it either: every action is a POST whose body must be
`application/json`, a type a page may only send cross-site after a preflight, which the guard
refuses; a form post or `fetch(..., {mode: "no-cors"})` of another site gets 415 and nothing done.
"""
from __future__ import annotations

import functools
import logging
from typing import Any, Callable

import orjson
from flask import Response, request

from ..protocol.errors import AwsError
from .pages import SECURITY_HEADERS

log = logging.getLogger("kinesim.webconsole")
API = "/_kinesim/console/api"


def answer(doc: Any, status: int = 200) -> Response:
    """A JSON answer of the console's API: never cached, never sniffed, never framed."""
    response = Response(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS, default=str), status,
                        mimetype="application/json")
    response.headers.update(SECURITY_HEADERS)
    response.headers["Cache-Control"] = "no-store"
    return response


def error(message: str, status: int = 400, code: str | None = None) -> Response:
    return answer({"message": message, **({"code": code} if code else {})}, status)


def reads(view: Callable[..., Any]) -> Callable[..., Response]:
    """A GET of the console's API: the view returns a JSON-able document, or raises AwsError
    (ResourceNotFoundException: 404) or LookupError (404) or ValueError (400)."""
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Response:
        return _answered(view, *args, **kwargs)
    return wrapped


def acts(view: Callable[..., Any]) -> Callable[..., Response]:
    """A POST action of the console: the JSON body is the view's `body` keyword argument. Refused
    unless the body is declared `application/json` (see the module's docstring); AWS's errors are
    answered with their status, code and message, as the API would give them."""
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Response:
        ctype = (request.content_type or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return error("The console's actions take a JSON body (Content-Type: application/json)", 415)
        try:
            body = orjson.loads(request.get_data() or b"{}")
        except orjson.JSONDecodeError:
            return error("The body is not JSON", 400)
        if not isinstance(body, dict):
            return error("The body is a JSON object", 400)
        return _answered(view, *args, body=body, **kwargs)
    return wrapped


def _answered(view: Callable[..., Any], *args: Any, **kwargs: Any) -> Response:
    """The view's answer, or its error as the console's JSON error: AWS's status and code for an
    AwsError (a 5xx one as 400: the console asked for something the service refused), 404 for a
    LookupError, 400 for a ValueError."""
    try:
        return answer(view(*args, **kwargs))
    except AwsError as err:
        return error(err.message or err.code, err.status if err.status < 500 else 400, err.code)
    except LookupError as err:
        return error(str(err.args[0] if err.args else err), 404)
    except ValueError as err:
        return error(str(err), 400)
