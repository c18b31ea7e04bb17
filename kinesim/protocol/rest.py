"""AWS's REST protocols (rest-json: Lambda), driven by a botocore service model.

The model says everything: each operation's HTTP method and `requestUri` (with `{Label}` and
greedy `{Label+}` path labels, and a few query-qualified URIs such as
`/2018-10-31/layers?find=LayerVersion`), and where each input member travels (`location`: "uri",
"querystring", "header", "headers"; else the JSON body, or the raw body for a `payload` member).
Outputs the same way back: `statusCode` members set the HTTP status, `header` members become
headers, a blob payload is the raw body, the rest is a JSON document; the status is otherwise the
operation's `http.responseCode`.

Errors follow AWS's REST-JSON services: the code in the `x-amzn-ErrorType` header, the status
from the error shape's `httpStatusCode`, and a body with the shape's members, e.g. Lambda's
`{"Type": "User", "Message": "Function not found: arn:..."}` (the model spells the message member
`Message` for some errors and `message` for others, and AWS sends it as the model spells it).

`RestApp` is the WSGI glue: route, read the body (with the service's per-operation size limit),
check the SigV4 header, parse, call the service, serialize. The service gives:

    protocol: RestJsonProtocol
    call(operation, params, context: RequestContext) -> dict       # raises AwsError
    max_request_bytes(operation) -> tuple[int, AwsError]            # limit and the error past it
"""
from __future__ import annotations

import base64
import dataclasses
import logging
import math
import uuid
from datetime import datetime, timezone
from email.utils import format_datetime
from http import HTTPStatus
from typing import Any, Callable, Iterable, Protocol
from urllib.parse import parse_qs, unquote

import orjson

from . import auth
from .errors import AwsError
from .models import load_service_model

log = logging.getLogger("kinesim.rest")

JSON_TYPE = "application/json"
_READ_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Route:
    operation: str
    method: str
    segments: tuple[str, ...]           # literal text, "{Label}" or "{Label+}"
    query: tuple[tuple[str, str], ...]  # query parameters the URI itself requires ("?List=ALL")

    @property
    def rank(self) -> tuple[int, int, int]:
        """Most specific first: URI-required query parameters, literal segments, no greedy label."""
        literals = sum(1 for s in self.segments if not s.startswith("{"))
        greedy = any(s.endswith("+}") for s in self.segments)
        return (-len(self.query), -literals, int(greedy))


@dataclasses.dataclass
class RequestContext:
    """What an operation may want to know about the HTTP request besides its parameters."""
    request_id: str
    host: str          # the Host header, for URLs that point back at this server
    headers: dict[str, str]


class RestService(Protocol):
    protocol: "RestJsonProtocol"

    def call(self, operation: str, params: dict[str, Any], context: RequestContext) -> dict[str, Any]: ...

    def max_request_bytes(self, operation: str) -> tuple[int, AwsError]: ...


def _split_uri(uri: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    path, _, query = uri.partition("?")
    segments = tuple(s for s in path.strip("/").split("/") if s)
    required = []
    for part in query.split("&") if query else ():
        key, _, value = part.partition("=")
        required.append((key, value))
    return segments, tuple(required)


class RestJsonProtocol:
    """Routing and (de)serialization of one rest-json service, from its botocore model."""

    def __init__(self, service: str, malformed_body: Callable[[str], AwsError]):
        model = load_service_model(service)
        if model["metadata"].get("protocol") != "rest-json":
            raise ValueError(f"{service} does not speak rest-json")
        self.service = service
        self.shapes: dict[str, dict[str, Any]] = model["shapes"]
        self.operations: dict[str, dict[str, Any]] = model["operations"]
        self._malformed_body = malformed_body
        self.routes: dict[str, list[Route]] = {}
        for name, op in self.operations.items():
            segments, query = _split_uri(op["http"]["requestUri"])
            self.routes.setdefault(op["http"]["method"], []).append(Route(name, op["http"]["method"], segments, query))
        for routes in self.routes.values():
            routes.sort(key=lambda r: r.rank)
        # The first path segments of every operation (Lambda: API dates such as "2015-03-31").
        self.prefixes: tuple[str, ...] = tuple(sorted({
            "/" + r.segments[0] + "/" for routes in self.routes.values() for r in routes if r.segments}))

    # routing

    def match(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[str, dict[str, str]]:
        """(operation, path labels) for a request; UnknownOperationException (404) if none fits.
        `path` may still be percent-encoded: labels are decoded after matching."""
        parts = [p for p in path.strip("/").split("/") if p]
        for route in self.routes.get(method.upper(), ()):
            if any(query.get(k, [None])[0] != v for k, v in route.query):
                continue
            labels = _match_segments(route.segments, parts)
            if labels is not None:
                return route.operation, {k: unquote(v) for k, v in labels.items()}
        raise AwsError("UnknownOperationException", None, 404)

    # requests

    def parse_request(self, operation: str, labels: dict[str, str], query: dict[str, list[str]],
                      headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """The operation's input as a dict keyed like the model's members (ready for
        `ModelValidator.parse`): URI, query and header values as text, a payload blob as bytes,
        JSON body members under their wire names."""
        op = self.operations[operation]
        if "input" not in op:
            return {}
        shape = self.shapes[op["input"]["shape"]]
        members = shape.get("members", {})
        payload = shape.get("payload")
        params: dict[str, Any] = {}
        if payload is not None:
            kind = self.shapes[members[payload]["shape"]]["type"]
            if kind in ("blob", "string"):
                if body:
                    params[payload] = body
            elif body.strip():
                params[payload] = self._json_object(body)
        elif body.strip():
            located = {name for name, ref in members.items() if "location" in ref}
            params = {k: v for k, v in self._json_object(body).items() if k not in located}
        claimed = {ref.get("locationName", name) for name, ref in members.items() if ref.get("location") == "querystring"}
        for name, ref in members.items():
            location = ref.get("location")
            wire = ref.get("locationName", name)
            if location == "uri":
                if wire in labels:
                    params[name] = labels[wire]
            elif location == "querystring":
                kind = self.shapes[ref["shape"]]["type"]
                if kind == "map":
                    extra = {k: v[0] for k, v in query.items() if k not in claimed}
                    if extra:
                        params[name] = extra
                elif wire in query:
                    params[name] = query[wire] if kind == "list" else query[wire][0]
            elif location == "header":
                value = headers.get(wire.lower())
                if value is not None:
                    params[name] = value
            elif location == "headers":
                prefix = wire.lower()
                found = {k[len(prefix):]: v for k, v in headers.items() if k.startswith(prefix)}
                if found:
                    params[name] = found
        return params

    def _json_object(self, body: bytes) -> dict[str, Any]:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise self._malformed_body(str(err)) from None
        if not isinstance(value, dict):
            raise self._malformed_body(f"expected a JSON object, found {type(value).__name__}")
        return value

    # responses

    def serialize_response(self, operation: str, result: dict[str, Any] | None,
                           payload_type: str = "application/octet-stream") -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, headers, body) of a successful answer."""
        op = self.operations[operation]
        status = op["http"].get("responseCode", 200)
        headers: list[tuple[str, str]] = []
        result = result or {}
        if "output" not in op:
            return status, headers, b""
        shape = self.shapes[op["output"]["shape"]]
        members = shape.get("members", {})
        payload = shape.get("payload")
        document: dict[str, Any] = {}
        body: bytes | None = None
        for name, ref in members.items():
            value = result.get(name)
            if value is None:
                continue
            location = ref.get("location")
            member_shape = self.shapes[ref["shape"]]
            if location == "statusCode":
                status = int(value)
            elif location == "header":
                headers.append((ref.get("locationName", name), _header_text(value, member_shape)))
            elif location == "headers":
                prefix = ref.get("locationName", name)
                headers.extend((prefix + k, str(v)) for k, v in value.items())
            elif name == payload:
                if member_shape["type"] in ("blob", "string"):
                    body = value if isinstance(value, bytes) else str(value).encode()
                    headers.append(("Content-Type", payload_type))
                else:
                    body = orjson.dumps(self._to_wire(ref["shape"], value))
                    headers.append(("Content-Type", JSON_TYPE))
            elif location is None:
                document[ref.get("locationName", name)] = self._to_wire(ref["shape"], value)
        if body is None:
            if payload is None and any("location" not in ref for ref in members.values()):
                body = orjson.dumps(document)
                headers.append(("Content-Type", JSON_TYPE))
            else:
                body = b""
        return status, headers, body

    def _to_wire(self, shape_name: str, value: Any) -> Any:
        """A value as the model's shape puts it in JSON: only the shape's members, blobs in
        base64, timestamps as epoch seconds (or the shape's `timestampFormat`)."""
        shape = self.shapes[shape_name]
        kind = shape["type"]
        if kind == "structure":
            out = {}
            for name, ref in shape.get("members", {}).items():
                item = value.get(name)
                if item is not None:
                    out[ref.get("locationName", name)] = self._to_wire(ref["shape"], item)
            return out
        if kind == "list":
            return [self._to_wire(shape["member"]["shape"], v) for v in value]
        if kind == "map":
            return {k: self._to_wire(shape["value"]["shape"], v) for k, v in value.items()}
        if kind == "blob":
            return base64.b64encode(value).decode() if isinstance(value, (bytes, bytearray)) else value
        if kind == "timestamp":
            return _timestamp(value, shape.get("timestampFormat", "unixTimestamp"))
        return value

    def serialize_error(self, err: AwsError) -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, headers, body) of an error, as the model's error shape describes it."""
        shape = self.shapes.get(err.code)
        status = err.status
        key = "message"
        fault = status >= 500
        if shape is not None and shape.get("exception"):
            error = shape.get("error", {})
            status = error.get("httpStatusCode", status)
            fault = bool(shape.get("fault")) or status >= 500
            members = shape.get("members", {})
            if "Message" in members and "message" not in members:
                key = "Message"
        document: dict[str, Any] = {"Type": "Service" if fault else "User", **err.fields}
        if err.message is not None:
            document[key] = err.message
        headers = [("Content-Type", JSON_TYPE), ("x-amzn-ErrorType", err.code)]
        return status, headers, orjson.dumps(document)


def _match_segments(template: tuple[str, ...], parts: list[str]) -> dict[str, str] | None:
    labels: dict[str, str] = {}
    i = 0
    for j, seg in enumerate(template):
        if seg.endswith("+}"):
            rest = len(template) - j - 1
            take = len(parts) - i - rest
            if take < 1:
                return None
            labels[seg[1:-2]] = "/".join(parts[i:i + take])
            i += take
        elif seg.startswith("{"):
            if i >= len(parts):
                return None
            labels[seg[1:-1]] = parts[i]
            i += 1
        else:
            if i >= len(parts) or parts[i] != seg:
                return None
            i += 1
    return labels if i == len(parts) else None


def _timestamp(value: Any, fmt: str) -> Any:
    if isinstance(value, datetime):
        value = value.timestamp()
    if fmt == "iso8601":
        return datetime.fromtimestamp(value, timezone.utc).isoformat().replace("+00:00", "Z")
    if fmt == "rfc822":
        return format_datetime(datetime.fromtimestamp(value, timezone.utc), usegmt=True)
    return value


def _header_text(value: Any, shape: dict[str, Any]) -> str:
    kind = shape["type"]
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "timestamp":
        return str(_timestamp(value, shape.get("timestampFormat", "rfc822")))
    if kind in ("double", "float") and isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if kind == "list":
        return ",".join(str(v) for v in value)
    if kind == "string" and shape.get("jsonvalue"):
        return base64.b64encode(orjson.dumps(value)).decode()
    return str(value)


# WSGI

def wsgi_headers(environ: dict[str, Any]) -> dict[str, str]:
    """The request's headers, lowercased names."""
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    if environ.get("CONTENT_LENGTH"):
        headers["content-length"] = environ["CONTENT_LENGTH"]
    return headers


def request_path(environ: dict[str, Any]) -> str:
    """The path, percent-encoded as sent: werkzeug keeps the raw URI; granian only gives
    PATH_INFO, already decoded (as latin-1, per WSGI), which is turned back into UTF-8 text with
    its `%` escaped so that decoding the labels once gives them back exactly."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        return raw.split("?", 1)[0]
    path = environ.get("PATH_INFO", "")
    try:
        path = path.encode("latin-1").decode("utf-8")
    except UnicodeError:
        pass
    return path.replace("%", "%25")


class RestApp:
    """A WSGI app serving one rest-json service."""

    def __init__(self, service: RestService, signing_name: str | None = None,
                 payload_type: str = "application/octet-stream"):
        self.service = service
        self.protocol = service.protocol
        self.signing_name = signing_name or self.protocol.service
        self.payload_type = payload_type  # Content-Type of a raw (blob) payload answer

    def accepts(self, environ: dict[str, Any]) -> bool:
        """Whether a request is this service's: its path starts like one of the model's URIs,
        and its SigV4 credential scope, when it names a service, names this one."""
        if not environ.get("PATH_INFO", "").startswith(self.protocol.prefixes):
            return False
        authorization = environ.get("HTTP_AUTHORIZATION")
        query = environ.get("QUERY_STRING", "")
        if authorization or "X-Amz-Credential" in query:
            scope = auth.credential_scope({"authorization": authorization} if authorization else {}, query)
            if scope is not None and len(scope) >= 4 and scope[3] and scope[3] != self.signing_name:
                return False
        return True

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        request_id = str(uuid.uuid4())
        try:
            status, headers, body = self._handle(environ, request_id)
        except AwsError as err:
            status, headers, body = self.protocol.serialize_error(err)
        except Exception:
            log.exception("internal error")
            status, headers, body = self.protocol.serialize_error(
                AwsError("ServiceException", "An internal error occurred.", 500))
        headers.append(("x-amzn-RequestId", request_id))
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {_reason(status)}", headers)
        return [body]

    def error_answer(self, err: AwsError, environ: dict[str, Any] | None = None) -> tuple[str, list[tuple[str, str]], bytes]:
        """An error in this service's shape, for a request refused before it reached the service."""
        status, headers, body = self.protocol.serialize_error(err)
        return f"{status} {_reason(status)}", headers, body

    def _handle(self, environ: dict[str, Any], request_id: str) -> tuple[int, list[tuple[str, str]], bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        query_text = environ.get("QUERY_STRING", "")
        query = parse_qs(query_text, keep_blank_values=True)
        operation, labels = self.protocol.match(method, request_path(environ), query)
        limit, too_large = self.service.max_request_bytes(operation)
        body = _read_body(environ, limit, too_large)
        headers = wsgi_headers(environ)
        auth_check(method, headers, query_text)
        params = self.protocol.parse_request(operation, labels, query, headers, body)
        context = RequestContext(request_id=request_id, host=headers.get("host", ""), headers=headers)
        result = self.service.call(operation, params, context)
        return self.protocol.serialize_response(operation, result, self.payload_type)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def auth_check(method: str, headers: dict[str, str], query: str) -> None:
    """AWS's SigV4 presence checks; REST services answer them with 403 (Kinesis's JSON front end
    with 400)."""
    try:
        auth.check_auth(method, headers, query)
    except AwsError as err:
        err.status = 403
        raise


def _read_body(environ: dict[str, Any], limit: int, too_large: AwsError) -> bytes:
    length = environ.get("CONTENT_LENGTH")
    stream = environ["wsgi.input"]
    if length:
        try:
            size = int(length)
        except ValueError:
            raise AwsError("InvalidRequestContentException", "Invalid Content-Length header") from None
        if size > limit:
            raise too_large
        return stream.read(size) if size else b""
    # No length: a body only when the server marks the stream as ending (chunked uploads); else
    # reading would wait on the keep-alive connection for bytes that never come.
    if not environ.get("wsgi.input_terminated"):
        return b""
    chunks, total = [], 0
    while True:
        chunk = stream.read(_READ_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)
