"""Type checks and conversions of request values against the model's scalar types, with the
SerializationException texts AWS (Coral) answers a value of the wrong type with.

Shared by the compiled fast path and the slow path of `validation.ModelValidator`: each converter
returns the converted value or raises AWS's error. Kinesalite recorded these texts from Kinesis;
newer Coral stacks word them differently (see `validation`'s docstring), which is why they all
live in the `type_error_*` helpers here."""
from __future__ import annotations

import binascii
import math
import re
from datetime import datetime, timezone
from typing import Any, Callable

from .errors import AwsError, serialization_error

Checker = Callable[[Any], Any]
SCALARS = frozenset(("string", "blob", "boolean", "integer", "long", "short", "byte", "double", "float",
                      "timestamp", "bigInteger", "bigDecimal"))
INTEGERS = frozenset(("integer", "long", "short", "byte", "bigInteger"))
FLOATS = frozenset(("double", "float", "bigDecimal"))
JAVA_NAMES = {"integer": "Integer", "long": "Long", "short": "Short", "byte": "Byte", "bigInteger": "BigInteger",
               "double": "Double", "float": "Float", "bigDecimal": "BigDecimal"}
BYTES_TYPES = (bytes, bytearray, memoryview)
TEXT_LOCATIONS = frozenset(("uri", "querystring", "header"))




# Type errors (SerializationException), as kinesalite recorded them from Kinesis.

NUMBER = "class com.amazon.coral.value.json.numbers.TruncatingBigNumber"
LIST_HERE = "Start of list found where not expected"
MAP_HERE = "Start of structure or map found where not expected."


def container_error(value: Any) -> AwsError | None:
    if isinstance(value, (list, tuple)):
        return serialization_error(LIST_HERE)
    if isinstance(value, dict):
        return serialization_error(MAP_HERE)
    return None


def type_error_string(value: Any) -> AwsError:
    if isinstance(value, bool):
        return serialization_error("class java.lang.Boolean can not be converted to an String")
    if isinstance(value, (int, float)):
        return serialization_error(f"{NUMBER} can not be converted to an String")
    return container_error(value) or serialization_error(f"class {java_class(value)} can not be converted to an String")


def type_error_number(value: Any, java: str) -> AwsError:
    if isinstance(value, bool):
        return serialization_error(f"class java.lang.Boolean can not be converted to an {java}")
    if isinstance(value, str):
        return serialization_error(f"class java.lang.String can not be converted to an {java}")
    if isinstance(value, float):  # NaN or Infinity
        return serialization_error(f"{NUMBER} can not be converted to an {java}")
    return container_error(value) or serialization_error(f"class {java_class(value)} can not be converted to an {java}")


def type_error_boolean(value: Any) -> AwsError:
    if isinstance(value, (int, float)):
        return serialization_error(f"{NUMBER} can not be converted to an Boolean")
    if isinstance(value, str):
        return serialization_error(f"'{value.upper()}' can not be converted to an Boolean")
    return container_error(value) or serialization_error(f"class {java_class(value)} can not be converted to an Boolean")


def type_error_blob(value: Any) -> AwsError:
    if isinstance(value, bool):
        return serialization_error("class java.lang.Boolean can not be converted to a Blob")
    if isinstance(value, (int, float)):
        return serialization_error(f"{NUMBER} can not be converted to a Blob")
    return container_error(value) or serialization_error(f"class {java_class(value)} can not be converted to a Blob")


def type_error_timestamp(value: Any) -> AwsError:
    if isinstance(value, bool):
        return serialization_error("class java.lang.Boolean can not be converted to milliseconds since epoch")
    if isinstance(value, str):
        return serialization_error("class java.lang.String can not be converted to milliseconds since epoch")
    return container_error(value) or serialization_error(
        f"class {java_class(value)} can not be converted to milliseconds since epoch")


def type_error_list(value: Any) -> AwsError:
    if isinstance(value, dict):
        return serialization_error(MAP_HERE)
    return serialization_error("Expected list or null")


def type_error_map(value: Any) -> AwsError:
    if isinstance(value, (list, tuple)):
        return serialization_error(LIST_HERE)
    return serialization_error("Expected map or null")


def type_error_structure(value: Any) -> AwsError:
    if isinstance(value, (list, tuple)):
        return serialization_error(LIST_HERE)
    return serialization_error("Expected null")


def java_class(value: Any) -> str:
    """The Java class a CBOR-only value (byte string, date) would have reached Coral as."""
    if isinstance(value, BYTES_TYPES):
        return "java.nio.HeapByteBuffer"
    if isinstance(value, datetime):
        return "java.util.Date"
    return "java.lang.Object"


# Scalar conversions, shared by the fast and the slow path. Each returns the converted value or
# raises the SerializationException AWS would.

def conv_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise type_error_string(value)


def conv_integer(java: str) -> Checker:
    def conv(value: Any) -> int:
        cls = value.__class__
        if cls is int:
            return value
        if cls is float and math.isfinite(value):
            return math.floor(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
        raise type_error_number(value, java)
    return conv


def conv_float(java: str) -> Checker:
    def conv(value: Any) -> float:
        cls = value.__class__
        if cls is float or cls is int:
            return float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise type_error_number(value, java)
    return conv


TRUE_STRINGS = frozenset(("TRUE", "YES", "1"))
FALSE_STRINGS = frozenset(("FALSE", "NO", "0"))


def conv_boolean(value: Any) -> bool:
    if value.__class__ is bool:
        return value
    if isinstance(value, str):
        # Kinesalite's recordings: 'true'/'false'/'1'/'0'/'yes'/'no' convert, any other string fails.
        upper = value.upper()
        if upper in TRUE_STRINGS:
            return True
        if upper in FALSE_STRINGS:
            return False
    raise type_error_boolean(value)


def conv_timestamp(value: Any) -> float:
    cls = value.__class__
    if cls is int or (cls is float and math.isfinite(value)):  # CBOR can carry inf and NaN, JSON not
        return float(value)
    if isinstance(value, datetime):  # CBOR tag 0/1, decoded by cbor2
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, str):
        # Some SDKs send ISO-8601 text instead of epoch seconds.
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise type_error_timestamp(value) from None
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise type_error_timestamp(value)


BASE64_BAD_CHAR = re.compile(r"[^a-zA-Z0-9+/=]|=[^=]")
BASE64_INDEX = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


# binascii.Error for bad base64, and a plain ValueError for text that is not ASCII at all ("ΩΩΩΩ"):
# both are the client's bad base64, which `blob_error` words as AWS does.
BASE64_ERRORS = (binascii.Error, ValueError)


def conv_blob(value: Any) -> bytes:
    """A JSON blob (base64 text) or a CBOR one (a byte string) as bytes."""
    cls = value.__class__
    if cls is str:
        if not len(value) & 3:
            try:
                data = binascii.a2b_base64(value, strict_mode=True)
            except BASE64_ERRORS:
                return blob_error(value)
            if value[-1:] != "=" or canonical_padding(value):
                return data
        return blob_error(value)
    if cls is bytes:
        return value
    if isinstance(value, BYTES_TYPES):
        return bytes(value)
    raise type_error_blob(value)


ZERO_LOW_4 = frozenset(c for c, i in BASE64_INDEX.items() if not i & 0xF)  # before "=="
ZERO_LOW_2 = frozenset(c for c, i in BASE64_INDEX.items() if not i & 0x3)  # before "="


def canonical_padding(value: str) -> bool:
    """Whether the unused low bits of the last data character of padded base64 are zero (Java's
    decoder, like Node's round trip in kinesalite, rejects them otherwise)."""
    if value[-2] == "=":
        return value[-3] in ZERO_LOW_4
    return value[-2] in ZERO_LOW_2


def blob_error(value: str) -> bytes:
    """Kinesalite's three base64 checks, in its order, each with AWS's wording."""
    prefix = f"'{value}' can not be converted to a Blob: "
    if len(value) % 4:
        raise serialization_error(f"{prefix}Base64 encoded length is expected a multiple of 4 bytes "
                                  f"but found: {len(value)}")
    match = BASE64_BAD_CHAR.search(value)
    if match:
        raise serialization_error(f"{prefix}Invalid Base64 character: '{match.group()[0]}'")
    try:
        data = binascii.a2b_base64(value, strict_mode=True)
    except BASE64_ERRORS:
        data = None
    if data is None or binascii.b2a_base64(data, newline=False).decode() != value:
        raise serialization_error(f"{prefix}Invalid last non-pad Base64 character dectected")
    return data


def conv_payload_blob(value: Any) -> bytes:
    """A rest-json payload blob: the raw body, handed over as bytes (text is taken as UTF-8)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, BYTES_TYPES):
        return bytes(value)
    raise type_error_blob(value)


def scalar_converter(shape: dict[str, Any], payload: bool = False) -> Checker | None:
    kind = shape["type"]
    if kind == "string":
        return conv_string
    if kind == "blob":
        return conv_payload_blob if payload else conv_blob
    if kind == "boolean":
        return conv_boolean
    if kind in INTEGERS:
        return conv_integer(JAVA_NAMES[kind])
    if kind in FLOATS:
        return conv_float(JAVA_NAMES[kind])
    if kind == "timestamp":
        return conv_timestamp
    return None


INT_TEXT = re.compile(r"[+-]?[0-9]+")


def located_coercer(shape: dict[str, Any], shapes: dict[str, Any]) -> Checker | None:
    """For rest-json members bound to the URI, query string or a header, whose values reach us as
    text: the text converted to the member's type where it reads as one (anything else is left for
    the type check to reject). None when the member's type needs no coercion."""
    kind = shape["type"]
    if kind in INTEGERS:
        return lambda v: int(v) if isinstance(v, str) and INT_TEXT.fullmatch(v.strip()) else v
    if kind in FLOATS:
        def to_float(v: Any) -> Any:
            if isinstance(v, str):
                try:
                    return float(v)
                except ValueError:
                    return v
            return v
        return to_float
    if kind == "boolean":
        return lambda v: {"true": True, "false": False}.get(v.lower(), v) if isinstance(v, str) else v
    if kind == "timestamp":
        def to_time(v: Any) -> Any:
            if isinstance(v, str):
                try:
                    return float(v)
                except ValueError:
                    pass
                try:
                    from email.utils import parsedate_to_datetime
                    return parsedate_to_datetime(v)  # a header's RFC 7231 date
                except (TypeError, ValueError, IndexError):
                    return v  # ISO-8601 or not a date: the timestamp conversion decides
            return v
        return to_time
    if kind == "list":
        item = located_coercer(shapes[shape["member"]["shape"]], shapes)

        def to_list(v: Any) -> Any:
            if isinstance(v, str):
                v = [v]
            if item is not None and isinstance(v, list):
                v = [item(x) for x in v]
            return v
        return to_list
    return None
