"""Glue / Hive column type strings (`int`, `decimal(10,2)`, `array<struct<a:string>>`...) as the
Arrow types Firehose's record format conversion writes."""
from __future__ import annotations

import re

import pyarrow as pa

_TYPE_TOKEN = re.compile(r"`[^`]*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>,:()]")
_INTEGERS = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "integer": pa.int32(),
             "bigint": pa.int64()}
_PRIMITIVES = {
    **_INTEGERS,
    "string": pa.string(),
    "boolean": pa.bool_(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "binary": pa.binary(),
}


def hive_type(text: str) -> pa.DataType:
    """The Arrow type for a Glue / Hive column type string."""
    tokens = _TYPE_TOKEN.findall(text)
    if _TYPE_TOKEN.sub("", text).strip():
        raise ValueError(f"unsupported column type {text!r}")
    try:
        parsed, end = _parse_type(tokens, 0)
    except IndexError:
        raise ValueError(f"incomplete column type {text!r}") from None
    if end != len(tokens):
        raise ValueError(f"unsupported column type {text!r}")
    return parsed


def _expect(tokens: list[str], i: int, token: str) -> int:
    if i >= len(tokens) or tokens[i] != token:
        raise ValueError(f"expected {token!r} in column type")
    return i + 1


def _parse_type(tokens: list[str], i: int) -> tuple[pa.DataType, int]:
    if i >= len(tokens):
        raise ValueError("incomplete column type")
    name = tokens[i].lower()
    i += 1
    if name == "double" and i < len(tokens) and tokens[i].lower() == "precision":
        i += 1
    if name in ("array", "map", "struct"):
        i = _expect(tokens, i, "<")
        if name == "array":
            item, i = _parse_type(tokens, i)
            return pa.list_(item), _expect(tokens, i, ">")
        if name == "map":
            key, i = _parse_type(tokens, i)
            i = _expect(tokens, i, ",")
            value, i = _parse_type(tokens, i)
            return pa.map_(key, value), _expect(tokens, i, ">")
        fields = []
        while True:
            field_name = tokens[i].strip("`")
            i = _expect(tokens, i + 1, ":")
            field_type, i = _parse_type(tokens, i)
            fields.append(pa.field(field_name, field_type))
            if tokens[i] == ">":
                return pa.struct(fields), i + 1
            i = _expect(tokens, i, ",")
    if name in ("varchar", "char"):
        i = _expect(tokens, i, "(")
        return pa.string(), _expect(tokens, i + 1, ")")
    if name == "decimal":
        precision, scale = 10, 0
        if i < len(tokens) and tokens[i] == "(":
            precision = int(tokens[i + 1])
            i += 2
            if tokens[i] == ",":
                scale = int(tokens[i + 1])
                i += 2
            i = _expect(tokens, i, ")")
        return pa.decimal128(precision, scale), i
    if name in _PRIMITIVES:
        return _PRIMITIVES[name], i
    raise ValueError(f"unsupported column type {name!r}")


def arrow_schema(columns: list[dict]) -> pa.Schema:
    """The Arrow schema for Glue-style columns ``[{"Name": ..., "Type": ...}]``."""
    return pa.schema([pa.field(column["Name"], hive_type(column["Type"])) for column in columns])
