"""The fuzzer's wire: requests encoded as the SDKs put them on the wire, from botocore's models,
and one keep-alive HTTP connection to send them on.

- JSON 1.1 (Kinesis, Firehose, SQS, Logs, SSM, ECR): `POST /`, `X-Amz-Target: <prefix>.<Operation>`;
  Kinesis also in CBOR 1.1 (`application/x-amz-cbor-1.1`, the Java SDKs' default).
- The query protocol (SNS, CloudFormation, STS): a form POST (tests/fuzzing.py `QueryOperation`).
- REST-JSON (Lambda) and REST-XML (S3, path style): the model's method and `requestUri`, each member
  where its `location` says (URI label, query string, header, header prefix, body or payload).
- A SigV4-shaped `Authorization` header whose credential scope names the service, and
  `X-Amz-Date` (signatures are never checked, only their shape).

The encoders write what `json` and `cbor2` will not (`Raw`: NaN, huge numbers, deep nesting,
undecodable percent escapes) and values of the wrong type wherever they land.
"""
from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree

import cbor2

from fuzz_values import CBOR_TYPE, Raw

DATE = "20260101T000000Z"
CONTENT_TYPES = {"json": "application/x-amz-json-1.1", "rest-json": "application/json", "rest-xml": "application/xml"}


def authorization(service: str) -> str:
    return (f"AWS4-HMAC-SHA256 Credential=AKIDFUZZ/20260101/us-east-1/{service}/aws4_request, "
            f"SignedHeaders=host;x-amz-date, Signature={'0' * 64}")


# ---------------------------------------------------------------------------------------------
# encoders that write Raw and what json/cbor2 refuse


def to_json(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value.value)
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(str(k)) + ":" + to_json(v) for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, (bytes, bytearray)):
        return json.dumps(base64.b64encode(value).decode())
    if isinstance(value, datetime):
        return repr(value.timestamp())
    return json.dumps(value, ensure_ascii=False)


def _cbor_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for extra, size in ((24, 1), (25, 2), (26, 4)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | extra]) + n.to_bytes(size, "big")
    raise ValueError(n)


def to_cbor(value: Any) -> bytes:
    if isinstance(value, Raw):
        return value.value if isinstance(value.value, bytes) else value.value.encode()
    if isinstance(value, dict):
        return _cbor_head(5, len(value)) + b"".join(cbor2.dumps(k) + to_cbor(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return _cbor_head(4, len(value)) + b"".join(to_cbor(v) for v in value)
    if isinstance(value, datetime):  # as AWS's Java encoders write a timestamp: tag 1, epoch milliseconds
        return cbor2.dumps(cbor2.CBORTag(1, int(value.timestamp() * 1000)))
    if isinstance(value, str):  # lone surrogates ("\ud800") as the invalid UTF-8 they make: cbor2 refuses them
        data = _utf8(value)
        return _cbor_head(3, len(data)) + data
    return cbor2.dumps(value)


def text_of(value: Any) -> str:
    """A value as URI, query and header positions carry it."""
    if isinstance(value, Raw):
        return str(value.value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.strftime("%a, %d %b %Y %H:%M:%S GMT")
    if isinstance(value, (list, dict)):
        return to_json(value)
    return str(value)


def _xml_text(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value.value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    text = text_of(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_xml(shape: Any, value: Any, tag: str) -> str:
    """A value as S3's REST-XML protocol writes it (flattened lists repeat their element)."""
    kind = shape.type_name if shape is not None else None
    if kind == "structure" and isinstance(value, dict):
        inner = []
        for name, item in value.items():
            member = shape.members.get(name)
            if member is not None and member.serialization.get("xmlAttribute"):
                continue
            item_tag = member.serialization.get("name", name) if member is not None else name
            if member is not None and member.type_name == "list" and member.serialization.get("flattened") \
                    and isinstance(item, list):
                inner.extend(to_xml(member.member, x, item_tag) for x in item)
            else:
                inner.append(to_xml(member, item, item_tag))
        return f"<{tag}>{''.join(inner)}</{tag}>"
    if kind == "list" and isinstance(value, list):
        item_tag = shape.member.serialization.get("name", "member")
        return f"<{tag}>{''.join(to_xml(shape.member, x, item_tag) for x in value)}</{tag}>"
    return f"<{tag}>{_xml_text(value)}</{tag}>"


# ---------------------------------------------------------------------------------------------
# requests


@dataclasses.dataclass
class Request:
    service: str
    operation: str
    case: str
    method: str
    path: str                   # with its query string, ready for the request line
    headers: dict[str, str]
    body: bytes
    refused: bool = False       # AWS refuses it on the request (a 4xx): a 2xx is a failure too

    def __repr__(self) -> str:
        return f"<Request {self.describe(100)}>"

    def describe(self, limit: int = 300) -> str:
        body = self.body[:limit]
        more = f" (+{len(self.body) - limit} bytes)" if len(self.body) > limit else ""
        return (f"{self.service}.{self.operation} [{self.case}] {self.method} {self.path[:limit]} "
                f"Content-Type={self.headers.get('Content-Type')!r} headers={_short(self.headers, limit)} "
                f"body={body!r}{more}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "body": base64.b64encode(self.body).decode()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Request":
        return cls(**{**data, "body": base64.b64decode(data["body"])})


def _short(headers: dict[str, str], limit: int) -> str:
    skip = ("Authorization", "X-Amz-Date", "Content-Type")
    return repr({k: v[:limit] for k, v in headers.items() if k not in skip})


def header_value(text: str) -> str:
    # http.client refuses line breaks and sends latin-1: UTF-8 text goes as its bytes.
    return _utf8(text.replace("\r", " ").replace("\n", " ")).decode("latin-1")


def header_name(text: str) -> str:
    return re.sub(r"[:\s]", "-", header_value(text)) or "x"


def _uri_part(value: Any, safe: str = "") -> str:
    return str(value.value) if isinstance(value, Raw) else quote(_utf8(text_of(value)), safe=safe)


class Operation:
    """One operation of one service, and how its input goes on the wire."""

    def __init__(self, service: str, model: Any, name: str):
        self.service, self.name = service, name
        self.protocol = model.metadata["protocol"]
        self.target = f"{model.metadata.get('targetPrefix')}.{name}"
        self.model = model.operation_model(name)
        self.input = self.model.input_shape
        self.members: dict[str, Any] = dict(self.input.members) if self.input is not None else {}
        self.required: list[str] = list(self.input.required_members) if self.input is not None else []
        self.payload = self.input.serialization.get("payload") if self.input is not None else None

    def location(self, member: str) -> str | None:
        return self.members[member].serialization.get("location")

    def body_format(self, member: str | None = None) -> str:
        """Where a member's value is written: "text" (URI, query, header) or the body's format."""
        if member is not None and self.location(member):
            return "text"
        return {"json": "json", "rest-json": "json", "rest-xml": "xml"}[self.protocol]

    def request(self, params: dict[str, Any], case: str, fmt: str = "json") -> Request:
        """The request carrying `params` (member name -> value, of any type), in `fmt` ("json"
        or "cbor") for the JSON protocol."""
        headers = {"X-Amz-Date": DATE, "Authorization": authorization(self.service)}
        if self.protocol != "json":
            return self._rest_request(params, case, headers)
        body = to_cbor(params) if fmt == "cbor" else _utf8(to_json(params))
        headers.update({"Content-Type": CBOR_TYPE if fmt == "cbor" else CONTENT_TYPES["json"],
                        "X-Amz-Target": self.target})
        return Request(self.service, self.name, case, "POST", "/", headers, body)

    def _rest_request(self, params: dict[str, Any], case: str, headers: dict[str, str]) -> Request:
        route = self.model.http
        path, _, fixed = route["requestUri"].partition("?")
        query = [fixed] if fixed else []
        body_members: dict[str, Any] = {}
        for name, value in params.items():
            member = self.members.get(name)
            where = member.serialization.get("location") if member is not None else None
            wire = member.serialization.get("name", name) if member is not None else name
            if where == "uri":
                greedy = "{" + wire + "+}" in path
                path = path.replace("{" + wire + ("+}" if greedy else "}"), _uri_part(value, "/" if greedy else ""))
            elif where == "querystring":
                items = value.items() if isinstance(value, dict) else [(wire, v) for v in value] \
                    if isinstance(value, list) else [(wire, value)]
                query += [f"{_uri_part(k)}={_uri_part(v)}" for k, v in items]
            elif where == "header":
                headers[wire] = header_value(text_of(value))
            elif where == "headers":
                items = value.items() if isinstance(value, dict) else [("x", value)]
                headers.update({header_name(wire + str(k)): header_value(text_of(v)) for k, v in items})
            elif name != self.payload:
                body_members[wire] = value
        # A label left unfilled (a missing member) is an empty path segment.
        path = "/".join("" if part.startswith("{") else part for part in path.split("/")) or "/"
        body = self._rest_body(params, body_members)
        if body:
            headers["Content-Type"] = CONTENT_TYPES[self.protocol]
        return Request(self.service, self.name, case, route["method"],
                       path + ("?" + "&".join(query) if query else ""), headers, body)

    def _rest_body(self, params: dict[str, Any], body_members: dict[str, Any]) -> bytes:
        """The payload member as the body (raw for a blob or string, else a document), or the
        body members as a JSON document (rest-json)."""
        if self.payload is None or self.payload not in params:
            return _utf8(to_json(body_members)) if body_members and self.protocol == "rest-json" else b""
        value, shape = params[self.payload], self.members[self.payload]
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if shape.type_name in ("blob", "string") and isinstance(value, str):
            return _utf8(value)
        if self.protocol == "rest-xml":
            return _utf8(to_xml(shape, value, shape.serialization.get("name", shape.name)))
        return _utf8(to_json(value))


def _utf8(text: str) -> bytes:
    # Lone surrogates ("\ud800") go out as the invalid UTF-8 they make.
    return text.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------------------------
# sending


@dataclasses.dataclass
class Outcome:
    status: int | None          # None: no answer (reset, closed, timed out)
    body: bytes
    error: str = ""

    def excerpt(self, limit: int = 300) -> str:
        return self.error or repr(self.body[:limit])


# The query protocol's services: each of their answers is an XML document that kinesim writes, which
# an SDK must be able to read (S3's REST-XML answers also carry objects' bytes as they were stored).
QUERY_SERVICES = frozenset(("sns", "cloudformation", "sts"))


def is_failure(req: Request, outcome: Outcome) -> bool:
    """No answer, or a 5xx other than 501 and AWS's own 500s. 501 is HTTP's "not implemented",
    kinesim's deliberate answer to what it lacks (S3's `NotImplemented` sub-resources, Lambda's
    `NotImplementedException` operations), as AWS answers 501 to a feature it does not have.
    And a 2xx to a request AWS refuses (`Request.refused`: a template past its limits), or an
    answer of the query protocol that is no XML document (an SDK reads neither result nor error)."""
    if outcome.status is None:
        return True
    if req.refused and outcome.status < 300:
        return True
    if req.service in QUERY_SERVICES and outcome.body.startswith(b"<?xml") and not _well_formed(outcome.body):
        return True
    return outcome.status >= 500 and outcome.status != 501 and not aws_answers_500(req, outcome)


def _well_formed(body: bytes) -> bool:
    try:
        ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return False
    return True


_SMALL_SEQUENCE, _VERSION_0_END = 1 << 124, 1 << 129


def aws_answers_500(req: Request, outcome: Outcome) -> bool:
    """The 500 Kinesis itself gives a client's mistake, which kinesim reproduces: GetShardIterator
    with a small ("version 0") StartingSequenceNumber is an InternalFailure. kinesalite's test
    "should return InternalFailure if using small (old?) sequence number" (test/getShardIterator.js,
    recorded against AWS); version 0 as its parseSequence reads it: below 2^129 once numbers
    under 2^124 are offset by 2^124."""
    if req.operation != "GetShardIterator" or outcome.status != 500 or b"InternalFailure" not in outcome.body:
        return False
    try:
        params = cbor2.loads(req.body) if req.headers.get("Content-Type") == CBOR_TYPE else json.loads(req.body)
        seq = params["StartingSequenceNumber"]
    except Exception:  # noqa: BLE001 - a body the fuzzer broke: not that case
        return False
    if not isinstance(seq, str) or not seq.isascii() or not seq.isdigit() or len(seq) > 130:
        return False
    number = int(seq)
    return (number + _SMALL_SEQUENCE if number < _SMALL_SEQUENCE else number) < _VERSION_0_END


class Connection:
    """One keep-alive connection, reopened when the server closes it."""

    def __init__(self, url: str, timeout: float = 60.0):
        parts = urlsplit(url)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def send(self, req: Request) -> Outcome:
        for attempt in range(2):
            reused = self.conn is not None
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.putrequest(req.method, req.path, skip_accept_encoding=True)
                for name, value in req.headers.items():
                    self.conn.putheader(name.encode("latin-1"), value)
                self.conn.putheader("Content-Length", str(len(req.body)))
                self.conn.endheaders(req.body)
                resp = self.conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as err:
                self.close()
                # A keep-alive connection the server had closed: once more on a new one.
                if reused and attempt == 0 and isinstance(err, (ConnectionError, http.client.RemoteDisconnected)):
                    continue
                return Outcome(None, b"", f"no answer: {err!r}")
            if resp.will_close:
                self.close()
            return Outcome(resp.status, body)
        raise AssertionError("unreachable")
