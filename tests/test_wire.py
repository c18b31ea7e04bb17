"""Wire-level units: JSON/CBOR codec, SigV4 presence checks, event-stream framing.

Expected texts and bytes are AWS's as kinesalite recorded them (its test/connection.js); responses
are read back with botocore's own parsers wherever botocore has one.
"""
from __future__ import annotations

import base64
import json
import struct
from datetime import datetime, timezone

import botocore.session
import cbor2
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from botocore.exceptions import EventStreamError
from botocore.parsers import ResponseParserError, create_parser

from kinesim import scopes
from kinesim.protocol import auth, codec, eventstream
from kinesim.protocol.errors import AwsError

KINESIS = botocore.session.get_session().get_service_model("kinesis")


def _raises(fn, *args) -> AwsError:
    with pytest.raises(AwsError) as info:
        fn(*args)
    return info.value


# ---------------------------------------------------------------------------------------------
# content types


@pytest.mark.parametrize("ctype, fmt", [
    ("application/x-amz-json-1.1", "json"),
    ("application/json", "json"),
    ("application/x-amz-cbor-1.1", "cbor"),
    ("   application/x-amz-json-1.1   ;whatever", "json"),  # kinesalite: media type trimmed, params ignored
    ("     application/json     ;", "json"),
    ("Application/X-Amz-CBOR-1.1; charset=utf-8", "cbor"),
    ("application/x-amz-json-1.0", None),
    ("application/x-amz-json-1.1asdf", None),
    ("application/cbor", None),
    ("text/plain", None),
    ("", None),
    (None, None),
])
def test_content_format(ctype, fmt):
    assert codec.content_format(ctype) == fmt


def test_decode_picks_format_by_content_type():
    assert codec.decode_request(b'{"StreamName":"s"}', "application/x-amz-json-1.1") == ({"StreamName": "s"}, "json")
    assert codec.decode_request(b'{"StreamName":"s"}', "application/json; charset=utf-8") == \
        ({"StreamName": "s"}, "json")
    body = cbor2.dumps({"StreamName": "s"})
    assert codec.decode_request(body, "application/x-amz-cbor-1.1") == ({"StreamName": "s"}, "cbor")


@pytest.mark.parametrize("ctype", [None, "", "application/x-amz-json-1.0", "text/plain", "application/xml"])
def test_unknown_content_type_is_unknown_operation_404(ctype):
    err = _raises(codec.decode_request, b"{}", ctype)
    assert (err.code, err.message, err.status) == ("UnknownOperationException", None, 404)
    # AWS answers it as a bare XML element (kinesalite: assertUnknownOperationXml), no Content-Type
    status, headers, body = codec.encode_error(err, "xml")
    assert (status, body) == (404, b"<UnknownOperationException/>\n")
    assert "Content-Type" not in headers


@pytest.mark.parametrize("ctype", ["application/x-amz-json-1.1", "application/x-amz-cbor-1.1"])
def test_empty_body_is_empty_params(ctype):
    params, fmt = codec.decode_request(b"", ctype)
    assert params == {} and fmt == codec.content_format(ctype)


# ---------------------------------------------------------------------------------------------
# JSON requests


def test_json_decode_keeps_types():
    body = b'{"StreamName":"s","ShardCount":2,"Timestamp":1700000000.5,"Flag":true,"Tags":{"a":"b"},"L":[1,null]}'
    params, _ = codec.decode_request(body, "application/x-amz-json-1.1")
    assert params == {"StreamName": "s", "ShardCount": 2, "Timestamp": 1700000000.5, "Flag": True,
                      "Tags": {"a": "b"}, "L": [1, None]}
    assert type(params["ShardCount"]) is int and type(params["Timestamp"]) is float


@pytest.mark.parametrize("body", [
    b"hello",            # kinesalite: "should return SerializationException if non-JSON body"
    b"{",
    b'{"a":1} trailing',
    b'{"a":"\xff\xfe"}',  # not UTF-8
    b"true",             # kinesalite's exhaustive matrix: 'true' and 'null' are SerializationException
    b"null",
    b'"a string"',
    b"12",
    b"[]",
    b'[{"StreamName":"s"}]',
])
def test_json_not_an_object_is_serialization_exception(body):
    err = _raises(codec.decode_request, body, "application/x-amz-json-1.1")
    assert (err.code, err.message, err.status) == ("SerializationException", None, 400)
    status, headers, out = codec.encode_error(err, "json")
    assert status == 400
    assert json.loads(out) == {"__type": "SerializationException"}  # AWS: no message member at all


# ---------------------------------------------------------------------------------------------
# CBOR requests


def test_cbor_decode_bytes_and_java_sdk_timestamps():
    # What the Java SDK sends: blobs as byte strings, timestamps as tag 1 + epoch milliseconds.
    body = cbor2.dumps({"StreamName": "s", "Data": b"\x00\x01binary\xff", "ShardCount": 3,
                        "Timestamp": cbor2.CBORTag(1, 1700000000123)})
    params, fmt = codec.decode_request(body, "application/x-amz-cbor-1.1")
    assert fmt == "cbor"
    assert params["Data"] == b"\x00\x01binary\xff" and params["ShardCount"] == 3
    assert params["Timestamp"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc)


def test_cbor_decode_standard_tag1_seconds_and_tag0():
    params = codec.decode_cbor(cbor2.dumps({"T": cbor2.CBORTag(1, 1700000000.25)}))
    assert params["T"] == datetime.fromtimestamp(1700000000.25, timezone.utc)
    params = codec.decode_cbor(cbor2.dumps({"T": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)}))
    assert params["T"] == datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_cbor_decode_indefinite_map_as_jackson_writes_it():
    body = b"\xbf" + cbor2.dumps("StreamName") + cbor2.dumps("s") + b"\xff"
    assert codec.decode_request(body, "application/x-amz-cbor-1.1") == ({"StreamName": "s"}, "cbor")


@pytest.mark.parametrize("body", [
    b"\xff",                       # break with nothing open
    b"\xa1",                       # truncated map
    b"\xa1\x61a",                  # map missing its value
    b"\x1c",                       # reserved additional info
    cbor2.dumps([{"StreamName": "s"}]),
    cbor2.dumps("text"),
    cbor2.dumps(None),
    cbor2.dumps(5),
    b"\xc1\x61x",                  # tag 1 around text
])
def test_cbor_invalid_is_serialization_exception(body):
    err = _raises(codec.decode_request, body, "application/x-amz-cbor-1.1")
    assert (err.code, err.message, err.status) == ("SerializationException", None, 400)


# ---------------------------------------------------------------------------------------------
# responses


GET_RECORDS_OUT = {
    "Records": [
        {"SequenceNumber": "49590338271490256608559692538361571095921575989136588898", "PartitionKey": "pk",
         "Data": b"\x00hello\xff", "ApproximateArrivalTimestamp": 1700000000.123},
        {"SequenceNumber": "49590338271490256608559692538361571095921575989136588899", "PartitionKey": "pk2",
         "Data": b"", "ApproximateArrivalTimestamp": 1700000001.0, "EncryptionType": "NONE"},
    ],
    "NextShardIterator": "AAAA",
    "MillisBehindLatest": 0,
}


def test_json_response_base64_and_epoch_seconds():
    body, ctype = codec.encode_response(GET_RECORDS_OUT, "json")
    assert ctype == "application/x-amz-json-1.1"
    raw = json.loads(body)
    assert raw["Records"][0]["Data"] == base64.b64encode(b"\x00hello\xff").decode()
    assert raw["Records"][1]["Data"] == ""
    assert raw["Records"][0]["ApproximateArrivalTimestamp"] == 1700000000.123
    assert raw["MillisBehindLatest"] == 0 and raw["NextShardIterator"] == "AAAA"


def test_json_response_read_by_botocore():
    body, _ = codec.encode_response(GET_RECORDS_OUT, "json")
    parsed = create_parser("json").parse({"status_code": 200, "headers": {}, "body": body},
                                         KINESIS.operation_model("GetRecords").output_shape)
    rec = parsed["Records"][0]
    assert rec["Data"] == b"\x00hello\xff" and parsed["Records"][1]["Data"] == b""
    assert rec["ApproximateArrivalTimestamp"].timestamp() == pytest.approx(1700000000.123)
    assert parsed["Records"][1]["EncryptionType"] == "NONE"


def test_json_response_datetime_and_other_blob_types():
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    body, _ = codec.encode_response({"T": when, "B": bytearray(b"ab"), "M": memoryview(b"cd")}, "json")
    assert json.loads(body) == {"T": 1704067200.0, "B": "YWI=", "M": "Y2Q="}


def test_cbor_response_raw_bytes_and_timestamp_tags():
    body, ctype = codec.encode_response(GET_RECORDS_OUT, "cbor", frozenset({"ApproximateArrivalTimestamp"}))
    assert ctype == "application/x-amz-cbor-1.1"
    # The Java SDKs read tag 1 + integer milliseconds: keep the tag as decoded, unconverted.
    raw = cbor2.loads(body, semantic_decoders={1: lambda value, immutable: ("tag1", value)})
    rec = raw["Records"][0]
    assert rec["Data"] == b"\x00hello\xff"
    assert rec["ApproximateArrivalTimestamp"] == ("tag1", 1700000000123)
    assert raw["Records"][1]["ApproximateArrivalTimestamp"] == ("tag1", 1700000001000)
    assert raw["MillisBehindLatest"] == 0  # numbers outside timestamp members stay numbers
    # the exact bytes: tag 1 (0xc1) then an 8-byte unsigned integer
    assert b"\xc1\x1b" + struct.pack(">Q", 1700000000123) in body
    # and our own decoder reads it back as the same instant
    back = codec.decode_cbor(body)
    assert back["Records"][0]["ApproximateArrivalTimestamp"].timestamp() == pytest.approx(1700000000.123)
    assert GET_RECORDS_OUT["Records"][0]["ApproximateArrivalTimestamp"] == 1700000000.123  # input untouched


def test_cbor_response_datetimes_anywhere():
    when = datetime(2024, 1, 1, 0, 0, 0, 250000, tzinfo=timezone.utc)
    body = codec.encode_cbor({"StreamDescriptionSummary": {"StreamCreationTimestamp": when}})
    raw = cbor2.loads(body, semantic_decoders={1: lambda value, immutable: value})
    assert raw["StreamDescriptionSummary"]["StreamCreationTimestamp"] == 1704067200250


def test_unknown_format_rejected():
    with pytest.raises(ValueError):
        codec.encode_response({}, "xml")


# ---------------------------------------------------------------------------------------------
# error envelopes


def _botocore_error(status: int, headers: dict, body: bytes) -> dict:
    lowered = {k.lower(): v for k, v in headers.items()}
    return create_parser("json").parse({"status_code": status, "headers": lowered, "body": body},
                                       KINESIS.operation_model("ListStreams").output_shape)["Error"]


def test_json_error_envelope():
    err = AwsError("ResourceNotFoundException", "Stream s under account 000000000000 not found.")
    status, headers, body = codec.encode_error(err, "json")
    assert status == 400
    assert headers["Content-Type"] == "application/x-amz-json-1.1"
    assert headers["x-amzn-ErrorType"] == "ResourceNotFoundException"
    assert body == b'{"__type":"ResourceNotFoundException","message":"Stream s under account 000000000000 not found."}'
    assert _botocore_error(status, headers, body) == {
        "Code": "ResourceNotFoundException", "Message": "Stream s under account 000000000000 not found."}


def test_serialization_exception_message_is_capitalised():
    # kinesalite validations/index.js: type errors are {__type: 'SerializationException', Message: msg}
    err = AwsError("SerializationException", "class java.lang.String can not be converted to an Integer")
    status, headers, body = codec.encode_error(err, "json")
    assert json.loads(body) == {"__type": "SerializationException",
                                "Message": "class java.lang.String can not be converted to an Integer"}
    assert _botocore_error(status, headers, body)["Message"] == \
        "class java.lang.String can not be converted to an Integer"


def test_error_without_message_has_no_message_member():
    status, headers, body = codec.encode_error(AwsError("UnknownOperationException"), "json")
    assert (status, body) == (400, b'{"__type":"UnknownOperationException"}')
    status, _, body = codec.encode_error(AwsError("InternalFailure", None, 500), "json")
    assert (status, json.loads(body)) == (500, {"__type": "InternalFailure"})


def test_cbor_errors_byte_for_byte_as_recorded():
    # kinesalite's assertSerializationCbor / assertUnknownCbor bodies
    status, headers, body = codec.encode_error(AwsError("SerializationException"), "cbor")
    assert status == 400 and headers["Content-Type"] == "application/x-amz-cbor-1.1"
    assert body == bytes.fromhex("bf66") + b"__type" + bytes.fromhex("76") + b"SerializationException" + b"\xff"
    _, _, body = codec.encode_error(AwsError("UnknownOperationException"), "cbor")
    assert body == bytes.fromhex("bf66") + b"__type" + bytes.fromhex("7819") + b"UnknownOperationException" + b"\xff"


def test_cbor_error_with_message():
    _, headers, body = codec.encode_error(AwsError("LimitExceededException", "Rate exceeded"), "cbor")
    assert headers["x-amzn-ErrorType"] == "LimitExceededException"
    assert body[:1] == b"\xbf" and body[-1:] == b"\xff"
    assert cbor2.loads(body) == {"__type": "LimitExceededException", "message": "Rate exceeded"}
    _, _, body = codec.encode_error(AwsError("SerializationException", "Expected null"), "cbor")
    assert cbor2.loads(body) == {"__type": "SerializationException", "Message": "Expected null"}


def test_xml_errors_as_recorded():
    err = AwsError("AccessDeniedException", "Unable to determine service/operation name to be authorized", 403)
    status, headers, body = codec.encode_error(err, "xml")
    assert status == 403 and "Content-Type" not in headers
    assert body == (b"<AccessDeniedException>\n"
                    b"  <Message>Unable to determine service/operation name to be authorized</Message>\n"
                    b"</AccessDeniedException>\n")


# ---------------------------------------------------------------------------------------------
# auth

JSON_HEADERS = {"content-type": "application/x-amz-json-1.1", "x-amz-target": "Kinesis_20131202.ListStreams"}


def _auth_error(headers: dict, query: str = "") -> AwsError:
    return _raises(auth.check_auth, "POST", headers, query)


def _signed_headers(region: str = "eu-west-2") -> dict[str, str]:
    req = AWSRequest(method="POST", url="http://localhost:4567/", data=b"{}", headers=dict(JSON_HEADERS))
    SigV4Auth(Credentials("AKIDEXAMPLE", "secret"), "kinesis", region).add_auth(req)
    return {k.lower(): v for k, v in req.headers.items()}


def _credential(headers: dict[str, str], query: str = "") -> list[str]:
    """The credential's parts as the edge reads them (kinesim.scopes) from these headers."""
    authorization = headers.get("authorization") or headers.get("Authorization")
    return scopes.credential({"QUERY_STRING": query, **({"HTTP_AUTHORIZATION": authorization} if authorization
                                                        else {})}) or []


def _region(headers: dict[str, str], query: str = "") -> str | None:
    parts = _credential(headers, query)
    return parts[2] if len(parts) > 2 and parts[2] else None


def test_botocore_signed_request_passes_and_names_its_region():
    headers = _signed_headers()
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert auth.check_auth("POST", headers, "") is None
    assert _region(headers) == "eu-west-2"
    assert _credential(headers)[0] == "AKIDEXAMPLE"


def test_any_signature_is_accepted():
    headers = {"Authorization": "AWS4-HMAC-SHA256 Credential=whoever/20260101/us-east-1/kinesis/aws4_request, "
                                "SignedHeaders=host;x-amz-date, Signature=not-even-hex",
               "X-Amz-Date": "20260101T000000Z"}
    assert auth.check_auth("POST", headers, "") is None  # mixed-case keys in a plain dict work too
    assert _region(headers) == "us-east-1"


def test_missing_authentication_token():
    err = _auth_error(dict(JSON_HEADERS))
    assert (err.code, err.message, err.status) == (
        "MissingAuthenticationTokenException", "Missing Authentication Token", 400)
    assert json.loads(codec.encode_error(err, "json")[2]) == {
        "__type": "MissingAuthenticationTokenException", "message": "Missing Authentication Token"}


def test_query_params_without_algorithm_are_no_auth():
    err = _auth_error(dict(JSON_HEADERS), "X-Amz-Credential=a&X-Amz-Signature=b&X-Amz-SignedHeaders=c&X-Amz-Date=d")
    assert err.code == "MissingAuthenticationTokenException"


def test_incomplete_header_lists_everything():
    err = _auth_error({**JSON_HEADERS, "authorization": "X"})
    assert (err.code, err.status) == ("IncompleteSignatureException", 400)
    assert err.message == (
        "Authorization header requires 'Credential' parameter. "
        "Authorization header requires 'Signature' parameter. "
        "Authorization header requires 'SignedHeaders' parameter. "
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
        "Authorization=X")


def test_incomplete_header_with_a_near_miss_query_param():
    err = _auth_error({**JSON_HEADERS, "authorization": "X"}, "X-Amz-Algorith")
    assert err.code == "IncompleteSignatureException" and err.message.endswith("Authorization=X")


@pytest.mark.parametrize("header", [
    "AWS4- Signature=b Credential=a",
    "AWS4- Signature=b,Credential=a",
    "AWS4- Signature=b, Credential=a",
])
def test_incomplete_header_separators(header):
    err = _auth_error({**JSON_HEADERS, "authorization": header, "date": "a"})
    assert err.message == f"Authorization header requires 'SignedHeaders' parameter. Authorization={header}"


def test_empty_parameter_value_counts_as_missing():
    header = "AWS4-HMAC-SHA256 Credential=, SignedHeaders=host, Signature=abc"
    err = _auth_error({"authorization": header, "x-amz-date": "20260101T000000Z"})
    assert err.message == f"Authorization header requires 'Credential' parameter. Authorization={header}"


@pytest.mark.parametrize("header", [
    "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/kinesis/aws4_request,SignedHeaders=host,Signature=ab",
    "AWS4-HMAC-SHA256 Signature=ab= SignedHeaders=host Credential=a",  # any order, '=' inside a value
    "Whatever Credential=a, SignedHeaders=b, Signature=c",             # the algorithm is not checked
])
def test_complete_header_forms_pass(header):
    assert auth.check_auth("POST", {"authorization": header, "x-amz-date": "20260101T000000Z"}, "") is None


def test_authorization_params_as_kinesalite_splits_them():
    assert auth.authorization_params("AWS4 Credential=a=b,, SignedHeaders Signature=") == {
        "Credential": "a", "SignedHeaders": None, "Signature": ""}


def test_missing_date_header():
    header = "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/kinesis/aws4_request, SignedHeaders=host, Signature=abc"
    err = _auth_error({"authorization": header})
    assert err.message == ("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
                           f"Authorization={header}")
    assert auth.check_auth("POST", {"authorization": header, "date": "Thu, 01 Jan 2026 00:00:00 GMT"}, "") is None


def test_header_and_query_auth_together():
    err = _auth_error({**JSON_HEADERS, "authorization": "X"}, "X-Amz-Algorithm")
    assert (err.code, err.status) == ("InvalidSignatureException", 400)
    assert err.message == "Found both 'X-Amz-Algorithm' as a query-string param and 'Authorization' as HTTP header."


def test_empty_query_auth():
    err = _auth_error(dict(JSON_HEADERS), "X-Amz-Algorithm")
    assert err.code == "IncompleteSignatureException"
    assert err.message == (
        "AWS query-string parameters must include 'X-Amz-Algorithm'. "
        "AWS query-string parameters must include 'X-Amz-Credential'. "
        "AWS query-string parameters must include 'X-Amz-Signature'. "
        "AWS query-string parameters must include 'X-Amz-SignedHeaders'. "
        "AWS query-string parameters must include 'X-Amz-Date'. "
        "Re-examine the query-string parameters.")


def test_query_auth_missing_signed_headers():
    err = _auth_error(dict(JSON_HEADERS), "X-Amz-Algorithm=a&X-Amz-Credential=b&X-Amz-Signature=c&X-Amz-Date=d")
    assert err.message == ("AWS query-string parameters must include 'X-Amz-SignedHeaders'. "
                           "Re-examine the query-string parameters.")


def test_complete_query_auth_passes_and_names_its_region():
    query = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20260101%2Fap-south-1%2Fkinesis%2Faws4_request"
             "&X-Amz-Signature=c&X-Amz-SignedHeaders=host&X-Amz-Date=20260101T000000Z")
    assert auth.check_auth("POST", dict(JSON_HEADERS), query) is None
    assert _region(dict(JSON_HEADERS), query) == "ap-south-1"


@pytest.mark.parametrize("headers", [
    {},
    {"authorization": "X"},
    {"authorization": "AWS4-HMAC-SHA256 Credential=AKIDONLY, SignedHeaders=host, Signature=x"},
    {"authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101//kinesis/aws4_request"},
])
def test_region_absent(headers):
    assert _region(headers) is None


# ---------------------------------------------------------------------------------------------
# event streams


class _Body:
    """What botocore's EventStream reads: an object with stream() and close()."""

    def __init__(self, data: bytes, chunk: int = 7):
        self.data, self.chunk = data, chunk

    def stream(self):
        for i in range(0, len(self.data), self.chunk):
            yield self.data[i:i + self.chunk]

    def close(self):
        pass


def _messages(data: bytes) -> list:
    buf = EventStreamBuffer()
    buf.add_data(data)
    return list(buf)


def test_message_framing_parsed_by_botocore():
    msg = eventstream.encode_message({":message-type": "event", "x-custom": "välue", "raw": b"\x00\x01"}, b"payload!")
    total, headers_len = struct.unpack(">II", msg[:8])
    assert total == len(msg)
    [parsed] = _messages(msg)
    assert parsed.headers == {":message-type": "event", "x-custom": "välue", "raw": b"\x00\x01"}
    assert parsed.payload == b"payload!"
    assert parsed.prelude.headers_length == headers_len


def test_crc_is_checked():
    msg = bytearray(eventstream.encode_event("SubscribeToShardEvent", b'{"Records":[]}'))
    msg[-6] ^= 0x01  # flip a payload bit
    with pytest.raises(ChecksumMismatch):
        _messages(bytes(msg))
    msg = bytearray(eventstream.encode_event("SubscribeToShardEvent", b"{}"))
    msg[2] ^= 0x01  # corrupt the prelude
    with pytest.raises(ChecksumMismatch):
        _messages(bytes(msg))


def test_event_and_exception_headers():
    [event, exc] = _messages(eventstream.encode_event("initial-response", b"{}")
                             + eventstream.encode_exception("ResourceNotFoundException", b'{"message":"gone"}'))
    assert event.headers == {":message-type": "event", ":event-type": "initial-response",
                             ":content-type": "application/json"}
    assert event.payload == b"{}"
    assert exc.headers[":message-type"] == "exception"
    assert exc.headers[":exception-type"] == "ResourceNotFoundException"
    assert exc.to_response_dict()["status_code"] == 400


def _subscribe_response(body: bytes) -> dict:
    return create_parser("json").parse(
        {"status_code": 200, "headers": {"content-type": eventstream.EVENTSTREAM_CONTENT_TYPE},
         "body": _Body(body), "context": {"operation_name": "SubscribeToShard"}},
        KINESIS.operation_model("SubscribeToShard").output_shape)


def _json(obj) -> bytes:
    return codec.encode_response(obj, "json")[0]


def test_subscribe_to_shard_stream_read_by_botocore():
    event1 = {"Records": GET_RECORDS_OUT["Records"],
              "ContinuationSequenceNumber": "49590338271490256608559692538361571095921575989136588899",
              "MillisBehindLatest": 12}
    event2 = {"Records": [], "ContinuationSequenceNumber": None, "MillisBehindLatest": 0,
              "ChildShards": [{"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
                               "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"}}]}
    event2 = {k: v for k, v in event2.items() if v is not None}
    body = (eventstream.encode_event("initial-response", b"{}")
            + eventstream.encode_event("SubscribeToShardEvent", _json(event1))
            + eventstream.encode_event("SubscribeToShardEvent", _json(event2)))
    parsed = _subscribe_response(body)
    events = list(parsed["EventStream"])
    assert len(events) == 2
    first = events[0]["SubscribeToShardEvent"]
    assert first["MillisBehindLatest"] == 12
    assert first["ContinuationSequenceNumber"] == "49590338271490256608559692538361571095921575989136588899"
    rec = first["Records"][0]
    assert rec["Data"] == b"\x00hello\xff" and rec["PartitionKey"] == "pk"
    assert isinstance(rec["ApproximateArrivalTimestamp"], datetime)
    assert rec["ApproximateArrivalTimestamp"].timestamp() == pytest.approx(1700000000.123)
    assert first["Records"][1]["EncryptionType"] == "NONE"
    second = events[1]["SubscribeToShardEvent"]
    assert second["Records"] == [] and second["ChildShards"][0]["ParentShards"] == ["shardId-000000000000"]


def test_subscribe_to_shard_exception_raised_by_botocore():
    body = (eventstream.encode_event("initial-response", b"{}")
            + eventstream.encode_exception("ResourceNotFoundException", b'{"message":"Stream s not found."}'))
    stream = _subscribe_response(body)["EventStream"]
    with pytest.raises(EventStreamError) as info:
        list(stream)
    assert info.value.response["Error"] == {"Code": "ResourceNotFoundException", "Message": "Stream s not found."}


def test_stream_without_initial_response_is_rejected_by_botocore():
    with pytest.raises(ResponseParserError):
        _subscribe_response(eventstream.encode_event("SubscribeToShardEvent", b'{"Records":[]}'))


def test_cbor_event_payload():
    when = datetime.fromtimestamp(1700000000.5, timezone.utc)
    payload = codec.encode_cbor({"Records": [{"Data": b"\x01\x02", "ApproximateArrivalTimestamp": when,
                                              "SequenceNumber": "1", "PartitionKey": "k"}],
                                 "ContinuationSequenceNumber": "1", "MillisBehindLatest": 0})
    [msg] = _messages(eventstream.encode_event("SubscribeToShardEvent", payload,
                                               content_type="application/x-amz-cbor-1.1"))
    assert msg.headers[":content-type"] == "application/x-amz-cbor-1.1"
    raw = cbor2.loads(msg.payload, semantic_decoders={1: lambda value, immutable: value})
    assert raw["Records"][0]["Data"] == b"\x01\x02"
    assert raw["Records"][0]["ApproximateArrivalTimestamp"] == 1700000000500


def test_error_message_and_empty_payload():
    raw = eventstream.encode_error_message("InternalFailure", "boom")
    [msg] = _messages(raw)
    assert msg.headers == {":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}
    assert msg.payload == b"" and msg.prelude.total_length == len(raw)
