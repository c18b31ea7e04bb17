"""SNS's HTTP front: AWS's query protocol (`Action=...&Version=2010-03-31`, a form-urlencoded POST
or a GET's query string), answered in XML; errors as `<ErrorResponse>`.

The UnsubscribeURL in each notification is a GET of `?Action=Unsubscribe&SubscriptionArn=...` that
AWS serves without a signature (it is meant to be opened from an e-mail or a log); so is it here.
"""
from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any, Callable, Iterable

from kinesim.protocol import auth
from kinesim.protocol.body import read_bounded
from kinesim.protocol.drain import answer_unread
from kinesim.protocol.errors import AwsError

from .query import QueryModel, parse_form
from .service import SnsService

log = logging.getLogger("kinesim.sns")

# A batch of 256 KiB of messages, form-encoded (up to 3 bytes a byte for non-ASCII text), and its
# parameter names: well under this.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
XML_TYPE = "text/xml"
_BODY_READ = "kinesim.sns.body_read"  # set in the environ once the request's body has been read

# How the JSON protocols' refusals read in the query protocol (AWS's codes for query services).
_QUERY_CODES = {"MissingAuthenticationTokenException": "MissingAuthenticationToken",
                "IncompleteSignatureException": "IncompleteSignature",
                "InvalidSignatureException": "SignatureDoesNotMatch",
                "UnrecognizedClientException": "InvalidClientTokenId",
                "AccessDeniedException": "AccessDenied",
                "UnsupportedMediaTypeException": "InvalidParameter"}


class SnsApp:
    def __init__(self, service: SnsService):
        self.service = service
        self.model = QueryModel("sns")

    @staticmethod
    def accepts(environ: dict[str, Any], signed_for: str | None) -> bool:
        """Whether a request without X-Amz-Target is SNS's: signed for "sns", or an unsigned form
        POST / GET naming an Action to "/" (what no other emulated API sends there)."""
        if signed_for is not None:
            return signed_for == "sns"
        method = environ.get("REQUEST_METHOD")
        if environ.get("PATH_INFO", "/") not in ("", "/"):
            return False
        if method == "POST":
            return environ.get("CONTENT_TYPE", "").lower().startswith("application/x-www-form-urlencoded")
        return method == "GET" and environ.get("QUERY_STRING", "").startswith("Action=")

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
            # Refused before its body was read (over MAX_REQUEST_BYTES, a bad Content-Length): a
            # client writing its whole body first must see this answer, not a reset connection.
            return answer_unread(environ, start_response, status_line, headers, body)
        start_response(status_line, headers)
        return [body]

    def error_answer(self, err: AwsError, environ: dict[str, Any] | None = None) -> tuple[str, list, bytes]:
        """An error in SNS's shape, for a request refused before it reached the service."""
        request_id = str(uuid.uuid4())
        status, body = self._error(err, request_id)
        headers = [("Content-Type", XML_TYPE), ("x-amzn-RequestId", request_id)]
        return f"{status} {HTTPStatus(status).phrase}", headers, body

    def _error(self, err: AwsError, request_id: str) -> tuple[int, bytes]:
        code = _QUERY_CODES.get(err.code, err.code)
        status = 403 if code in ("MissingAuthenticationToken", "SignatureDoesNotMatch", "InvalidClientTokenId",
                                 "AccessDenied") else err.status
        return status, self.model.error(AwsError(code, err.message, status), request_id)

    def _handle(self, environ: dict[str, Any], request_id: str) -> bytes:
        form = parse_form(environ.get("QUERY_STRING", ""))
        if environ.get("REQUEST_METHOD") == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                raise AwsError("InvalidParameter", "Invalid Content-Length header") from None
            body = read_bounded(environ, length, MAX_REQUEST_BYTES)
            if body is None:
                raise AwsError("RequestEntityTooLarge", f"Request must be smaller than {MAX_REQUEST_BYTES} bytes", 413)
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
        if not self.service.has_operation(action):  # mobile push, SMS, permissions, data protection
            raise AwsError("NotImplemented", f"kinesim does not emulate SNS's {action}: topics, subscriptions to "
                                             "SQS, Lambda and Firehose, and publishing are what it has", 501)
        if not (action == "Unsubscribe" and environ.get("REQUEST_METHOD") == "GET"):
            auth.check_auth(environ.get("REQUEST_METHOD", "POST"), _headers(environ), environ.get("QUERY_STRING", ""))
        params = self.model.decode(action, form)
        result = self.service.call(action, params)
        return self.model.answer(action, result, request_id)


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    out = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if "CONTENT_TYPE" in environ:
        out["content-type"] = environ["CONTENT_TYPE"]
    return out
