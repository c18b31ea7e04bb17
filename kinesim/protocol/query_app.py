"""The HTTP front of a service that speaks AWS's query protocol (SNS, CloudFormation, STS):
`Action=...&Version=...` as a form-urlencoded POST or a GET's query string, answered in XML, errors
as `<ErrorResponse>`. The service behind it is a plain object with `has_operation(action)` and
`call(action, params)`; query.py turns the form into the operation's parameters and the result
into XML, both from botocore's model of the service.
"""
from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any, Callable, Iterable, Protocol

from . import auth, trace_header
from .body import read_bounded
from .drain import answer_unread
from .errors import AwsError
from .query import QueryModel, parse_form

log = logging.getLogger("kinesim.query")

XML_TYPE = "text/xml"
_BODY_READ = "kinesim.query.body_read"  # set in the environ once the request's body has been read

# How the JSON protocols' refusals read in the query protocol (AWS's codes for query services).
_QUERY_CODES = {"MissingAuthenticationTokenException": "MissingAuthenticationToken",
                "IncompleteSignatureException": "IncompleteSignature",
                "InvalidSignatureException": "SignatureDoesNotMatch",
                "UnrecognizedClientException": "InvalidClientTokenId",
                "AccessDeniedException": "AccessDenied",
                "UnsupportedMediaTypeException": "InvalidParameter"}
_FORBIDDEN = frozenset(("MissingAuthenticationToken", "SignatureDoesNotMatch", "InvalidClientTokenId", "AccessDenied"))


class QueryService(Protocol):
    def has_operation(self, action: str) -> bool: ...

    def call(self, action: str, params: dict[str, Any]) -> dict[str, Any] | None: ...


class QueryApp:
    """One query-protocol service on the edge.

    `signing_name` is the service in a request's SigV4 scope (how the edge tells the query services
    apart: none of them has a path or a target header of its own); `max_request_bytes` bounds the
    form; `not_emulated` says what the service has, for actions of AWS's model it lacks;
    `unsigned` names actions served without a signature when sent as a GET. With `traced`, the
    service is called as `call(action, params, trace_header)` with the request's X-Amzn-Trace-Id (SNS
    carries it to what it delivers, for Lambda's recursive loop detection)."""

    def __init__(self, model: str, service: QueryService, signing_name: str, max_request_bytes: int,
                 not_emulated: str, unsigned: frozenset[str] = frozenset(), traced: bool = False):
        self.service = service
        self.traced = traced
        self.model = QueryModel(model)
        self.signing_name = signing_name
        self.max_request_bytes = max_request_bytes
        self.not_emulated = not_emulated
        self.unsigned = unsigned

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        request_id = str(uuid.uuid4())
        try:
            status, body = 200, self._handle(environ, request_id)
        except AwsError as err:
            status, body = self._error(err, request_id)
        except Exception:
            log.exception("internal error")
            status, body = self._error(AwsError("InternalError", "Internal Error", 500), request_id)
        status_line = f"{status} {HTTPStatus(status).phrase}"
        headers = [("Content-Type", XML_TYPE), ("x-amzn-RequestId", request_id), ("Content-Length", str(len(body)))]
        if environ.get("REQUEST_METHOD") == "POST" and not environ.get(_BODY_READ):
            # Refused before its body was read (over the limit, a bad Content-Length): a client
            # writing its whole body first must see this answer, not a reset connection.
            return answer_unread(environ, start_response, status_line, headers, body)
        start_response(status_line, headers)
        return [body]

    def error_answer(self, err: AwsError, environ: dict[str, Any] | None = None) -> tuple[str, list, bytes]:
        """An error in the service's shape, for a request refused before it reached the service."""
        request_id = str(uuid.uuid4())
        status, body = self._error(err, request_id)
        headers = [("Content-Type", XML_TYPE), ("x-amzn-RequestId", request_id)]
        return f"{status} {HTTPStatus(status).phrase}", headers, body

    def _error(self, err: AwsError, request_id: str) -> tuple[int, bytes]:
        code = _QUERY_CODES.get(err.code, err.code)
        status = 403 if code in _FORBIDDEN else err.status
        return status, self.model.error(AwsError(code, err.message, status), request_id)

    def _handle(self, environ: dict[str, Any], request_id: str) -> bytes:
        form = parse_form(environ.get("QUERY_STRING", ""))
        method = environ.get("REQUEST_METHOD", "POST")
        if method == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                raise AwsError("InvalidParameter", "Invalid Content-Length header") from None
            body = read_bounded(environ, length, self.max_request_bytes)
            if body is None:
                raise AwsError("RequestEntityTooLarge", f"Request must be smaller than {self.max_request_bytes} bytes",
                               413)
            environ[_BODY_READ] = True
            try:
                form.update(parse_form(body.decode("utf-8")))
            except UnicodeDecodeError:
                raise AwsError("MalformedQueryString", "The request body is not UTF-8 form data") from None
        action = form.get("Action")
        if not action:
            raise AwsError("MissingAction", "MissingAction")
        if action not in self.model.ops:
            raise AwsError("InvalidAction", f"The action {action} is not valid for this web service.")
        if not self.service.has_operation(action):
            raise AwsError("NotImplemented", f"kinesim does not emulate {action}: {self.not_emulated}", 501)
        if not (action in self.unsigned and method == "GET"):
            auth.check_auth(method, _headers(environ), environ.get("QUERY_STRING", ""))
        params = self.model.decode(action, form)
        if self.traced:
            result = self.service.call(action, params, trace_header.from_environ(environ))  # type: ignore[call-arg]
        else:
            result = self.service.call(action, params)
        return self.model.answer(action, result, request_id)


def is_query_request(environ: dict[str, Any]) -> bool:
    """An unsigned request in the query protocol's form: a form POST, or a GET naming an Action, to "/"."""
    if environ.get("PATH_INFO", "/") not in ("", "/"):
        return False
    method = environ.get("REQUEST_METHOD")
    if method == "POST":
        return environ.get("CONTENT_TYPE", "").lower().startswith("application/x-www-form-urlencoded")
    return method == "GET" and environ.get("QUERY_STRING", "").startswith("Action=")


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    out = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if "CONTENT_TYPE" in environ:
        out["content-type"] = environ["CONTENT_TYPE"]
    return out
