"""Messages: what a queue holds, the checks a sent message passes, and the MD5 digests SQS returns
(SDKs other than boto3 verify them: the Java SDK, the JS SDK v3's middleware).

MD5OfMessageAttributes (the developer guide, "Calculating the MD5 message digest for message
attributes"): for each attribute in name order, the 4-byte big-endian length and UTF-8 bytes of the
name, of the data type, then one transport byte (1 for String and Number types, 2 for Binary),
then the length and bytes of the value.
"""
from __future__ import annotations

import base64
import hashlib
import re
import struct
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import SqsError, invalid_parameter, invalid_value, missing_parameter

# Characters a body (and a String attribute) may hold: the SendMessage reference.
_VALID_TEXT = re.compile("[\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*")
_INVALID_CHARACTERS = ("Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | "
                       "#xE000 to #xFFFD | #x10000 to #x10FFFF")
_ATTRIBUTE_NAME = re.compile(r"[\u00c0-\u017fa-zA-Z0-9_.-]+")
_RESERVED_PREFIX = re.compile(r"(aws\.|amazon\.|\.)|.*\.$", re.I)
_FIFO_ID = re.compile(r"[!-~]{1,128}")  # "alphanumeric and punctuation characters"


@dataclass
class Message:
    id: str
    body: str
    sent: float                       # epoch seconds
    visible_at: float                 # delay, then each receive's visibility timeout
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)  # MessageAttributes, blobs as base64
    system: dict[str, dict[str, Any]] = field(default_factory=dict)      # MessageSystemAttributes
    md5_attributes: str | None = None
    md5_system: str | None = None
    receive_count: int = 0
    first_receive: float | None = None
    receipt: str | None = None        # the newest receipt handle
    group: str | None = None          # FIFO
    dedup: str | None = None
    sequence: str | None = None
    order: int = 0                    # arrival order within the queue
    sender: str = ""
    source_arn: str | None = None     # DeadLetterQueueSourceArn, once moved to a dead-letter queue

    @property
    def md5_body(self) -> str:
        return md5_hex(self.body.encode())

    def to_doc(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> "Message":
        return cls(**doc)


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _length_prefixed(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def attributes_md5(attributes: dict[str, dict[str, Any]]) -> str | None:
    """MD5OfMessageAttributes (or ...SystemAttributes) of attributes in their stored form."""
    if not attributes:
        return None
    parts = []
    for name in sorted(attributes):
        value = attributes[name]
        data_type = value["DataType"]
        parts += [_length_prefixed(name.encode()), _length_prefixed(data_type.encode())]
        if "BinaryValue" in value:
            parts += [b"\x02", _length_prefixed(base64.b64decode(value["BinaryValue"]))]
        else:
            parts += [b"\x01", _length_prefixed(value["StringValue"].encode())]
    return md5_hex(b"".join(parts))


def check_body(body: Any) -> str:
    if body is None or body == "":
        raise missing_parameter("MessageBody")
    if not _VALID_TEXT.fullmatch(body):
        raise SqsError("InvalidMessageContents", _INVALID_CHARACTERS)
    return body


def stored_attributes(attributes: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """MessageAttributes checked (LocalStack's texts, validated against AWS) and kept as
    {name: {DataType, StringValue | BinaryValue (base64)}}."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in (attributes or {}).items():
        if len(name.encode()) >= 256:
            raise invalid_parameter("Message (user) attribute names must be shorter than 256 Bytes")
        if not _ATTRIBUTE_NAME.fullmatch(name):
            raise invalid_parameter("Message (user) attributes name can only contain upper and lower score "
                                    "characters, digits, periods, hyphens and underscores. ")
        if _RESERVED_PREFIX.match(name):
            raise invalid_parameter("You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. "
                                    "These strings are reserved for internal use. Additionally, they cannot start "
                                    "or end with '.'.")
        out[name] = _stored_value(name, value)
    return out


def _stored_value(name: str, value: dict[str, Any]) -> dict[str, Any]:
    data_type = value.get("DataType")
    if not data_type:
        raise invalid_parameter("Missing required parameter DataType")
    if not re.match(r"(String|Number|Binary)", data_type):
        raise invalid_parameter('Type for parameter MessageAttributes.Attribute_name.DataType must be prefixed'
                                f'with "String", "Binary", or "Number", but was: {data_type}')
    if len(data_type.encode()) >= 256:
        raise invalid_parameter("Message (user) attribute types must be shorter than 256 Bytes")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        # Reserved in the API, "not implemented" on AWS (the SendMessage reference).
        raise invalid_parameter(f"Message (user) attribute '{name}' list values are not supported.")
    if data_type.startswith("Binary"):
        blob = value.get("BinaryValue")
        if not blob:
            raise invalid_parameter(f"Message (user) attribute '{name}' must contain a non-empty value of type "
                                    f"'Binary'.")
        if isinstance(blob, str):  # from another service, in the JSON wire form
            try:
                blob = base64.b64decode(blob, validate=True)
            except ValueError:
                raise invalid_parameter(f"Message (user) attribute '{name}' has an invalid Binary value.") from None
        return {"DataType": data_type, "BinaryValue": base64.b64encode(bytes(blob)).decode()}
    text = value.get("StringValue")
    if not text:
        kind = "Number" if data_type.startswith("Number") else "String"
        raise invalid_parameter(f"Message (user) attribute '{name}' must contain a non-empty value of type '{kind}'.")
    if not _VALID_TEXT.fullmatch(text):
        raise invalid_parameter(_INVALID_CHARACTERS)
    if data_type.startswith("Number"):
        try:
            float(text)
        except ValueError:
            raise invalid_parameter(f"Can't cast the value of message (user) attribute '{name}' to a number.") from None
    return {"DataType": data_type, "StringValue": text}


def stored_system_attributes(attributes: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """MessageSystemAttributes: only AWSTraceHeader exists, a String."""
    out = {}
    for name, value in (attributes or {}).items():
        if name != "AWSTraceHeader":
            raise invalid_parameter(f"Message system attribute name '{name}' is invalid.")
        if value.get("DataType") != "String" or not value.get("StringValue"):
            raise invalid_parameter("Message system attribute 'AWSTraceHeader' must contain a non-empty value of "
                                    "type 'String'.")
        out[name] = {"DataType": "String", "StringValue": value["StringValue"]}
    return out


def size_of(body: str, attributes: dict[str, dict[str, Any]]) -> int:
    """A message's size as SQS counts it against MaximumMessageSize: body plus attribute names,
    types and values."""
    size = len(body.encode())
    for name, value in attributes.items():
        size += len(name.encode()) + len(value["DataType"].encode())
        size += len(base64.b64decode(value["BinaryValue"])) if "BinaryValue" in value \
            else len(value["StringValue"].encode())
    return size


def check_fifo_id(value: str | None, parameter: str) -> None:
    if value is not None and not _FIFO_ID.fullmatch(value):
        raise invalid_value(parameter, value, f"{parameter} can only include alphanumeric and punctuation "
                                              f"characters. 1 to 128 in length.")


def wire_attributes(attributes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Stored attributes in the response's shape (blobs as bytes: the codec writes base64)."""
    return {name: ({"DataType": v["DataType"], "BinaryValue": base64.b64decode(v["BinaryValue"])}
                   if "BinaryValue" in v else dict(v)) for name, v in attributes.items()}
