"""Bucket configuration documents (CORSConfiguration, LifecycleConfiguration, Tagging, ...) between
S3's XML and plain dicts, driven by botocore's model of S3: the dicts have the shape boto3's
parameters have (`{"CORSRules": [{"AllowedMethods": ["GET"], ...}]}`), and element names, list
layouts (flattened or wrapped), types and enums come from the model, not from this module.

Reading is strict, as S3 is: an element the schema does not have, a value that is not of its type,
an enum value S3 does not know, or a missing required member is `MalformedXML`.
"""
from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any
from xml.etree import ElementTree as ET

from ..protocol.models import service_model
from .errors import malformed_xml
from .xmldoc import document, element, serialize


@functools.cache
def _model():
    return service_model("s3")


def payload_shape(operation: str) -> Any:
    """The shape of an operation's XML request body (PutBucketCors → CORSConfiguration)."""
    shape = _model().operation_model(operation).input_shape
    return shape.members[shape.serialization["payload"]]


def read(operation: str, root: ET.Element) -> dict[str, Any]:
    """The request document of `operation` (parsed by `xmldoc.parse`) as a dict of the model's
    member names."""
    shape = payload_shape(operation)
    if root.tag != shape.serialization.get("name", shape.name):
        raise malformed_xml()
    return _structure(shape, root)


def write(operation: str, value: dict[str, Any]) -> bytes:
    """A document in the shape of `operation`'s request body (Get answers with the same document)."""
    shape = payload_shape(operation)
    root = document(shape.serialization.get("name", shape.name))
    _write_members(root, shape, value)
    return serialize(root)


def _name(member_name: str, shape: Any) -> str:
    return shape.serialization.get("name", member_name)


def _structure(shape: Any, node: ET.Element) -> dict[str, Any]:
    by_tag: dict[str, tuple[str, Any]] = {}
    for name, member in shape.members.items():
        if member.serialization.get("location"):
            continue  # headers, not body
        if member.type_name == "list" and member.serialization.get("flattened"):
            by_tag[_name(member.member.name, member.member) if "name" not in member.serialization
                   else member.serialization["name"]] = (name, member)
        else:
            by_tag[_name(name, member)] = (name, member)
    result: dict[str, Any] = {}
    for child in node:
        if child.tag not in by_tag:
            raise malformed_xml()
        name, member = by_tag[child.tag]
        if member.type_name == "list" and member.serialization.get("flattened"):
            result.setdefault(name, []).append(_value(member.member, child))
        elif name in result:
            raise malformed_xml()  # a member given twice
        else:
            result[name] = _value(member, child)
    if shape.required_members and any(r not in result for r in shape.required_members):
        raise malformed_xml()
    return result


def _value(shape: Any, node: ET.Element) -> Any:
    kind = shape.type_name
    if kind == "structure":
        return _structure(shape, node)
    if kind == "list":
        item_tag = shape.member.serialization.get("name", "member")
        items = []
        for child in node:
            if child.tag != item_tag:
                raise malformed_xml()
            items.append(_value(shape.member, child))
        return items
    text = (node.text or "").strip() if kind != "string" else (node.text or "")
    if len(node):
        raise malformed_xml()
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind == "boolean":
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        if kind == "timestamp":
            return iso_timestamp(text)
    except ValueError:
        raise malformed_xml() from None
    if shape.enum and text not in shape.enum:
        raise malformed_xml()
    return text


def iso_timestamp(text: str) -> str:
    """An ISO 8601 time as S3 writes it back (UTC, milliseconds): 2025-01-01T00:00:00.000Z."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _write_members(parent: ET.Element, shape: Any, value: dict[str, Any]) -> None:
    for name, member in shape.members.items():
        if name not in value or member.serialization.get("location"):
            continue
        item = value[name]
        if member.type_name == "list" and member.serialization.get("flattened"):
            tag = member.serialization.get("name", _name(member.member.name, member.member))
            for one in item:
                _write_value(element(parent, tag), member.member, one)
        else:
            _write_value(element(parent, _name(name, member)), member, item)


def _write_value(node: ET.Element, shape: Any, value: Any) -> None:
    if shape.type_name == "structure":
        _write_members(node, shape, value)
    elif shape.type_name == "list":
        tag = shape.member.serialization.get("name", "member")
        for one in value:
            _write_value(element(node, tag), shape.member, one)
    else:
        node.text = element(None, "x", value).text  # S3's spelling of booleans
