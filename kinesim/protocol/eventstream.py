"""AWS event-stream framing (`application/vnd.amazon.eventstream`), as SubscribeToShard answers.

A message is

    [total length: u32][headers length: u32][prelude CRC32: u32]
    [headers][payload]
    [message CRC32: u32]

all big-endian, the prelude CRC over the first 8 bytes and the message CRC over everything before
it. A header is `[name length: u8][name][type: u8][value]`; strings (type 7) are
`[length: u16][utf-8]`, byte arrays (type 6) the same with raw bytes.

SubscribeToShard's HTTP 200 body, as the SDKs read it (botocore: `EventStream.get_initial_response`
then one parsed event per message):

1. an `initial-response` event (`:message-type: event`, `:event-type: initial-response`) whose
   payload is the operation's (empty) output, `{}` for JSON;
2. `SubscribeToShardEvent` events, payload `{"Records": [...], "ContinuationSequenceNumber": ...,
   "MillisBehindLatest": ..., "ChildShards": [...]}` (records as GetRecords gives them: Data base64,
   ApproximateArrivalTimestamp epoch seconds, in JSON);
3. possibly one exception message (`:message-type: exception`, `:exception-type: <Code>`, payload
   `{"message": ...}`), which botocore raises as `EventStreamError` with that code.

Payloads are bytes the caller encodes in the request's protocol (JSON, or CBOR for the Java SDKs:
pass `content_type` accordingly).
"""
from __future__ import annotations

import struct
from functools import lru_cache
from zlib import crc32

EVENTSTREAM_CONTENT_TYPE = "application/vnd.amazon.eventstream"

_PRELUDE = struct.Struct(">II")
_U32 = struct.Struct(">I")
_STRING, _BYTES = 7, 6
_PRELUDE_AND_CRCS = 16  # prelude (12) + message CRC (4)


def _encode_header(name: str, value: str | bytes) -> bytes:
    raw_name = name.encode("utf-8")
    if len(raw_name) > 255:
        raise ValueError(f"event-stream header name too long: {name!r}")
    if isinstance(value, str):
        raw, kind = value.encode("utf-8"), _STRING
    else:
        raw, kind = bytes(value), _BYTES
    if len(raw) > 0xFFFF:
        raise ValueError(f"event-stream header {name!r} too long")
    return bytes((len(raw_name),)) + raw_name + bytes((kind,)) + len(raw).to_bytes(2, "big") + raw


def encode_headers(headers: dict[str, str | bytes]) -> bytes:
    """A message's header block (string values as type 7, bytes as type 6)."""
    return b"".join(_encode_header(k, v) for k, v in headers.items())


def frame(header_block: bytes, payload: bytes) -> bytes:
    """One message from an encoded header block and a payload."""
    total = _PRELUDE_AND_CRCS + len(header_block) + len(payload)
    prelude = _PRELUDE.pack(total, len(header_block))
    prelude_crc = _U32.pack(crc32(prelude))
    crc = crc32(payload, crc32(header_block, crc32(prelude_crc, crc32(prelude))))
    return b"".join((prelude, prelude_crc, header_block, payload, _U32.pack(crc)))


def encode_message(headers: dict[str, str | bytes], payload: bytes) -> bytes:
    """One event-stream message."""
    return frame(encode_headers(headers), payload)


@lru_cache(maxsize=256)
def _event_headers(event_type: str, content_type: str) -> bytes:
    return encode_headers({":message-type": "event", ":event-type": event_type, ":content-type": content_type})


@lru_cache(maxsize=256)
def _exception_headers(code: str, content_type: str) -> bytes:
    return encode_headers({":message-type": "exception", ":exception-type": code, ":content-type": content_type})


def encode_event(event_type: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """An event message (`initial-response`, `SubscribeToShardEvent`, ...)."""
    return frame(_event_headers(event_type, content_type), payload)


def encode_exception(code: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """A modeled-exception message ending a stream: `code` is the error's shape name
    (ResourceNotFoundException, ...), `payload` its body (`{"message": "..."}`)."""
    return frame(_exception_headers(code, content_type), payload)


def encode_error_message(code: str, message: str) -> bytes:
    """An unmodeled error (`:message-type: error`, `:error-code`, `:error-message`), no payload."""
    return encode_message({":message-type": "error", ":error-code": code, ":error-message": message}, b"")


class EventStream:
    """An operation's answer that is a stream of events (SubscribeToShard). `events` yields
    `(message_type, name, body)`: ("event", "SubscribeToShardEvent", {...}) or
    ("exception", "ResourceNotFoundException", {"message": ...}); it may have a `close()`, called
    when the response ends or the client goes away. Payloads are encoded in the request's protocol
    by `encoded`, so that operations know nothing of JSON or CBOR."""

    content_type = EVENTSTREAM_CONTENT_TYPE

    def __init__(self, events):
        self.events = events

    def encoded(self, encode_payload, payload_type: str) -> "EncodedEvents":
        """The response body: `encode_payload(body) -> bytes` in the request's protocol, whose
        media type the events' `:content-type` header names."""
        return EncodedEvents(self.events, encode_payload, payload_type)


class EncodedEvents:
    """The bytes of an EventStream, message by message."""

    def __init__(self, events, encode_payload, payload_type: str):
        self.events, self.encode_payload, self.payload_type = iter(events), encode_payload, payload_type
        self._source = events

    def __iter__(self) -> "EncodedEvents":
        return self

    def __next__(self) -> bytes:
        kind, name, body = next(self.events)
        payload = self.encode_payload(body)
        if kind == "exception":
            return encode_exception(name, payload, self.payload_type)
        return encode_event(name, payload, self.payload_type)

    def close(self) -> None:
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
