"""Request and response bodies of AWS's JSON 1.1 and CBOR 1.1 protocols, chosen by Content-Type.

Kinesis speaks `application/x-amz-json-1.1` (boto3, the JS, Go, .NET... SDKs) and
`application/x-amz-cbor-1.1` (the Java SDKs v1 and v2, the KPL and KCL, unless CBOR is disabled).
What AWS does with other content types, as kinesalite recorded it from the real service:

* `application/json`: real Kinesis answers every such call in a legacy Coral envelope, 404
  `{"Output": {"__type": "com.amazon.coral.service#UnknownOperationException"}, "Version": "1.0"}`
  (400 and `#SerializationException` for a body that is not JSON): kinesalite's connection tests,
  re-recorded from production in 2019. The edge answers it so (`encode_error(err, "coral")`); no
  SDK sends it, and a client that does would fail on AWS.
* Any other or no content type with a non-empty body: `<UnknownOperationException/>` as XML with
  404, or 403 `AccessDeniedException` "Unable to determine service/operation name to be authorized"
  when X-Amz-Target has no `service.operation`. `decode_request` raises the 404 form (it cannot see
  the target); encode it with `fmt="xml"`.
* An empty body with a known operation is a `SerializationException` (400, no message), answered in
  CBOR unless the content type was `application/x-amz-json-1.1`. That is the edge's check;
  `decode_request` itself maps an empty body to `{}` (what rest-json services want).
* A body that does not parse, or parses to anything but an object (`true`, `null`, `"x"`), is a
  `SerializationException` with no message.

Error envelopes: `{"__type": code, "message": text}`, except `SerializationException`, whose text
AWS sends as `"Message"` (Coral's deserializer; kinesalite's recordings: "class java.lang.String can
not be converted to an Integer" and friends). No message member at all when AWS sends none
(`UnknownOperationException`, a bare `SerializationException`). CBOR errors are the same map,
written as AWS writes it (an indefinite-length map: `bf 66 "__type" 76 "SerializationException"
ff`, byte for byte kinesalite's recording).

CBOR timestamps: AWS's CBOR codec (Jackson CBOR, the Java SDKs' `SdkCborGenerator`) writes a
timestamp as tag 1 around an integer count of *milliseconds* since the epoch, and the Java SDKs
read them back that way (v1 `new Date(long)`, v2 `UNIX_TIMESTAMP_MILLIS` for CBOR payloads), so
responses encode them like that and requests decode tag 1 as milliseconds too (a value below 1e11
is taken as seconds: RFC 8949 tag 1 as a standard CBOR encoder writes it).
"""
from __future__ import annotations

import binascii
import json
from datetime import datetime, timezone
from typing import Any

import cbor2
import orjson

from .errors import AwsError

JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
CBOR_CONTENT_TYPE = "application/x-amz-cbor-1.1"
# JSON 1.0 (SQS): the same bodies as 1.1; the edge takes it for the services whose protocol it is.
JSON10_CONTENT_TYPE = "application/x-amz-json-1.0"

# Content-Type (its media type, lowercased) -> body format
FORMATS: dict[str, str] = {
    JSON_CONTENT_TYPE: "json",
    "application/json": "json",
    CBOR_CONTENT_TYPE: "cbor",
}

_RESPONSE_TYPES = {"json": JSON_CONTENT_TYPE, "cbor": CBOR_CONTENT_TYPE, "json10": JSON10_CONTENT_TYPE}

# Errors whose text AWS sends as "Message" rather than "message".
_CAPITAL_MESSAGE = frozenset({"SerializationException"})

_EPOCH_MS_THRESHOLD = 100_000_000_000  # 1e11: as seconds, the year 5138; as ms, March 1973


def content_format(content_type: str | None) -> str | None:
    """"json", "cbor" or None (not a type Kinesis accepts) for a Content-Type header value."""
    if not content_type:
        return None
    fmt = FORMATS.get(content_type)
    if fmt is None:
        fmt = FORMATS.get(content_type.split(";", 1)[0].strip().lower())
    return fmt


# ---------------------------------------------------------------------------------------------
# requests


def decode_request(body: bytes, content_type: str | None) -> tuple[dict, str]:
    """The request's parameters and its format ("json" or "cbor").

    Raises `SerializationException` (no message, as AWS) for a body that does not parse or is not
    an object at its top level, and 404 `UnknownOperationException` for a content type Kinesis
    does not take (answer that one with `encode_error(err, "xml")`).
    """
    fmt = FORMATS.get(content_type) if content_type else None  # the edge's normalised value: one lookup
    if fmt is None:
        fmt = content_format(content_type)
        if fmt is None:
            raise AwsError("UnknownOperationException", None, 404)
    if fmt == "json":
        if not body:
            return {}, fmt
        try:
            params = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise AwsError("SerializationException") from None
    else:
        if not body:
            return {}, fmt
        params = decode_cbor(body)
    if params.__class__ is not dict:
        raise AwsError("SerializationException")
    return params, fmt


def _tag1_as_datetime(value: Any, immutable: bool = False) -> datetime:
    """CBOR tag 1 (epoch time): milliseconds from AWS's Java encoders, seconds from a standard one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("tag 1 needs a number")
    seconds = value / 1000 if abs(value) >= _EPOCH_MS_THRESHOLD else value
    return datetime.fromtimestamp(seconds, timezone.utc)


# A JSON number no double can hold (past ~1.8e308) is a SerializationException (orjson refuses it),
# which bounds every integer reaching the services to 309 digits. CBOR bignums (tag 2, and tag 3 for
# -1 - n) have no such bound: a 5,000-byte one became an int whose text Python refuses to write
# (its 4,300-digit limit), a 500 while wording the error. They get the JSON path's bound. A double
# holds no integer of more than 1024 bits (128 bytes): longer payloads are refused unread.
_MAX_BIGNUM_BYTES = 128


def _bignum(negative: bool):
    def decode(payload: Any, immutable: bool = False) -> int:
        if not isinstance(payload, bytes):
            raise ValueError("a bignum's content is a byte string")
        payload = payload.lstrip(b"\0")
        if len(payload) > _MAX_BIGNUM_BYTES:
            raise ValueError("bignum out of range")
        value = int.from_bytes(payload, "big")
        if negative:
            value = -1 - value
        try:
            float(value)
        except OverflowError:
            raise ValueError("bignum out of range") from None
        return value
    return decode


_SEMANTIC = {1: _tag1_as_datetime, 2: _bignum(False), 3: _bignum(True)}
try:
    cbor2.loads(b"\xc1\x00", semantic_decoders=_SEMANTIC)
    _CBOR_LOAD_OPTIONS: dict[str, Any] = {"semantic_decoders": _SEMANTIC}
except TypeError:  # cbor2 before semantic_decoders: tag 1 only as seconds
    _CBOR_LOAD_OPTIONS = {}


def decode_cbor(body: bytes) -> Any:
    """A CBOR document as Python values (tag 1 as an aware datetime); SerializationException if bad.

    Bytes after the first data item are ignored, as Jackson's parser does.
    """
    try:
        return cbor2.loads(body, **_CBOR_LOAD_OPTIONS)
    except (cbor2.CBORDecodeError, ValueError, OverflowError, OSError, TypeError, RecursionError):
        raise AwsError("SerializationException") from None


# ---------------------------------------------------------------------------------------------
# responses


def _json_default(value: Any) -> Any:
    """orjson's hook for what JSON has no type for: blobs as base64, dates as epoch seconds."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return binascii.b2a_base64(value, newline=False).decode("ascii")
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


_JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME


def encode_json(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_json_default, option=_JSON_OPTIONS)


def _cbor_datetime(encoder: cbor2.CBOREncoder, value: datetime) -> None:
    # Naive datetimes follow Python's datetime.timestamp(): local time.
    encoder.encode(cbor2.CBORTag(1, round(value.timestamp() * 1000)))


_CBOR_ENCODERS = {datetime: _cbor_datetime}


def _epoch_ms_tag(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return cbor2.CBORTag(1, round(value * 1000))
    return value  # a datetime (the encoder hook tags it) or anything else: left alone


def _tag_timestamps(obj: Any, members: frozenset[str]) -> Any:
    """A copy of `obj` whose members named in `members` hold epoch-ms tags instead of numbers."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in members and value is not None and not isinstance(value, (dict, list, tuple)):
                out[key] = _epoch_ms_tag(value)
            elif isinstance(value, (dict, list, tuple)):
                out[key] = _tag_timestamps(value, members)
            else:
                out[key] = value
        return out
    if isinstance(obj, (list, tuple)):
        return [_tag_timestamps(v, members) if isinstance(v, (dict, list, tuple)) else v for v in obj]
    return obj


def encode_cbor(obj: Any, timestamp_members: frozenset[str] = frozenset()) -> bytes:
    """`obj` as AWS CBOR: bytes as byte strings, datetimes and the numbers (epoch seconds) of
    members named in `timestamp_members` as tag 1 + integer epoch milliseconds."""
    if timestamp_members:
        obj = _tag_timestamps(obj, timestamp_members)
    return cbor2.dumps(obj, encoders=_CBOR_ENCODERS)


def response_type(fmt: str) -> str:
    """The media type of answers in `fmt` ("json" or "cbor")."""
    return _RESPONSE_TYPES[fmt]


def encode_response(obj: dict, fmt: str, timestamp_members: frozenset[str] = frozenset()) -> tuple[bytes, str]:
    """(body, content type) of a successful answer in the request's format.

    JSON: blobs as base64 text, timestamps as epoch seconds (plain numbers, or datetimes).
    CBOR: blobs as byte strings, timestamps (datetimes, and numbers in members named in
    `timestamp_members`) as tag 1 + epoch milliseconds.
    """
    if fmt == "json" or fmt == "json10":
        try:
            return orjson.dumps(obj, default=_json_default, option=_JSON_OPTIONS), _RESPONSE_TYPES[fmt]
        except orjson.JSONEncodeError:
            # orjson stops at 64-bit integers; a larger one stored from a request (an integer
            # member the model does not bound) is echoed as AWS's JSON would carry it.
            return _json_slow(obj), _RESPONSE_TYPES[fmt]
    if fmt == "cbor":
        return encode_cbor(obj, timestamp_members), CBOR_CONTENT_TYPE
    raise ValueError(f"unknown format {fmt!r}")


def _json_slow(obj: Any) -> bytes:
    return json.dumps(obj, default=_json_default, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------------------------
# errors


def _cbor_text(text: str) -> bytes:
    return cbor2.dumps(text)


def _cbor_error_body(code: str, key: str | None, message: str | None) -> bytes:
    # An indefinite-length map, as AWS's encoder writes it.
    parts = [b"\xbf", _cbor_text("__type"), _cbor_text(code)]
    if key is not None:
        parts += [_cbor_text(key), _cbor_text(message)]
    parts.append(b"\xff")
    return b"".join(parts)


def error_body(err: AwsError) -> dict[str, str]:
    """The error's JSON/CBOR envelope as a dict."""
    if err.message is None:
        return {"__type": err.code}
    return {"__type": err.code, "Message" if err.code in _CAPITAL_MESSAGE else "message": err.message}


def encode_error(err: AwsError, fmt: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of an error answer: "json", "cbor", or "xml" (AWS's answer to a
    request whose content type it does not take: no Content-Type, `<Code>` `<Message>` text)."""
    code, message = err.code, err.message
    if fmt == "json":
        headers = {"Content-Type": JSON_CONTENT_TYPE, "x-amzn-ErrorType": code}
        return err.status, headers, orjson.dumps(error_body(err))
    if fmt == "json10":
        # JSON 1.0 services (SQS): `__type` namespaced as AWS sends it; an `awsQueryCompatible`
        # service's error also names its old query code (`x-amzn-query-error: Code;Sender`),
        # which SDKs show instead (botocore's parser: Error.Code, and QueryErrorCode).
        namespace, query_error = getattr(err, "namespace", None), getattr(err, "query_error", None)
        body = error_body(err)
        if namespace:
            body["__type"] = f"{namespace}#{code}"
        headers = {"Content-Type": JSON10_CONTENT_TYPE, "x-amzn-ErrorType": code}
        if query_error:
            headers["x-amzn-query-error"] = query_error
        return err.status, headers, orjson.dumps(body)
    if fmt == "cbor":
        key = None if message is None else "Message" if code in _CAPITAL_MESSAGE else "message"
        headers = {"Content-Type": CBOR_CONTENT_TYPE, "x-amzn-ErrorType": code}
        return err.status, headers, _cbor_error_body(code, key, message)
    if fmt == "coral":  # what AWS answers to `Content-Type: application/json`
        body = {"Output": {"__type": f"com.amazon.coral.service#{code}"}, "Version": "1.0"}
        return err.status, {"Content-Type": "application/json", "x-amzn-ErrorType": code}, orjson.dumps(body)
    if fmt == "xml":
        if message is None:
            body = f"<{code}/>\n"
        else:
            body = f"<{code}>\n  <Message>{_xml_escape(message)}</Message>\n</{code}>\n"
        return err.status, {"x-amzn-ErrorType": code}, body.encode()
    raise ValueError(f"unknown format {fmt!r}")


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
